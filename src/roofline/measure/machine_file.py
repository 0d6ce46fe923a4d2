"""A measured machine file (a machine profile): what `roofline calibrate` measured, written as a machine file.

The file has the presets' format (``[sources]`` and one ``[machines.KEY]`` with ``{value, source,
note}`` numbers, so ``get_machine(path)`` and every ``--machine FILE`` read it) plus the measured
curves in ``[calibration.KEY]``, which the machine loader ignores and ``load_profile`` reads:

- ``matmul.DTYPE``: square n x n x n matmuls, FLOPs and median/10th/90th-percentile seconds;
- ``bandwidth.copy`` / ``bandwidth.add``: working set in bytes against seconds (copy reads one
  buffer and writes one, add reads two and writes one; bytes counted = the working set);
- ``probes``: the ops of a few scaled-down transformer blocks, measured (the fit set of the
  calibrated cost model's per-op residuals).

Pure numpy: the curves' types and derived numbers are in measurements.py.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError
from roofline.files import write_text_atomically
from roofline.machines import Machine, parse_machine_file
from roofline.measure.drift import ReferenceRun
from roofline.measure.measurements import Calibration, Curve, Probe, best_rate, body_s, level_bandwidths, main_memory, peaks

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# ---------------------------------------------------------------------------------------------
# TOML out
# ---------------------------------------------------------------------------------------------


def _key(k: str) -> str:
    return k if k.replace("-", "").replace("_", "").isalnum() and k.isascii() else json.dumps(k)


def _val(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise RooflineError(f"cannot write a non-finite number ({v}) to a profile", field="profile")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_val(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _num(value: float, source: str, note: str = "") -> dict:
    out = {"value": float(value), "source": source}
    if note:
        out["note"] = note
    return out


def render_profile(cal: Calibration) -> str:
    """The profile file's text: a machine in the presets' format, then the measured curves."""
    src = cal.source
    best = peaks(cal)
    if cal.default_dtype not in best:
        raise RooflineError(f"calibration measured no {cal.default_dtype} matmul: cannot write a peak", field="profile")
    dram, dram_note = main_memory(cal)
    lines = [
        f"# Machine profile measured by `roofline calibrate` on {cal.date}: {cal.device_name}, {cal.threads} thread(s).",
        "# A machine file in the presets' format (use it as --machine FILE); peaks and bandwidths are the",
        "# best measured values, not datasheet figures. [calibration] holds the curves they come from.",
        "",
        "[sources]",
        'SYSFS = "Linux /sys/devices/system/cpu/cpu0/cache/index*/size (cache sizes)"',
        'MEMINFO = "Linux /proc/meminfo MemTotal"',
        'TORCH-PROPS = "torch.cuda.get_device_properties (memory, L2, SM count)"',
        "",
        f"[machines.{_key(cal.key)}]",
        f"name = {_val(cal.device_name + ' (measured)')}",
        f"vendor = {_val(cal.vendor)}",
        f"default_dtype = {_val(cal.default_dtype)}",
        f"notes = {_val(cal.notes or f'measured on {cal.device} with {cal.threads} thread(s), torch {cal.torch_version}')}",
        f"memory_bytes_per_s = {_val(_num(dram, src, dram_note))}",
        f"launch_overhead_s = {_val(_num(cal.launch_s, src, 'median time of one tiny op, back to back'))}",
    ]
    cache_src = "SYSFS" if cal.device == "cpu" else "TORCH-PROPS"
    if cal.memory_bytes:
        lines.append(f"memory_bytes = {_val(_num(cal.memory_bytes, 'MEMINFO' if cal.device == 'cpu' else 'TORCH-PROPS'))}")
    if cal.sm_count:
        lines.append(f"sm_count = {_val(_num(cal.sm_count, 'TORCH-PROPS'))}")
    l2 = [size for name, size in cal.caches if name.lower() == "l2"]
    if l2:
        lines.append(f"l2_bytes = {_val(_num(l2[0], cache_src, 'for the threads used'))}")
    levels = level_bandwidths(cal)
    if levels:
        lines.append("cache_levels = [")
        for name, size, bw in levels:
            entry = {"name": name, "size_bytes": _num(size, cache_src, "for the threads used"),
                     "bytes_per_s": _num(bw, src, "best copy/add bandwidth with the working set in this level")}
            lines.append(f"    {_val(entry)},")
        lines.append("]")
    lines += ["", f"[machines.{_key(cal.key)}.peak_flops_per_s]"]
    for dtype, flops in best.items():
        n = _best_size(cal, dtype)
        lines.append(f"{dtype} = {_val(_num(flops, src, f'best of the matmul sweep (n = {n:g}); achieved, not a datasheet peak'))}")
    lines += ["", f"[calibration.{_key(cal.key)}]"]
    meta = {"device": cal.device, "device_name": cal.device_name, "vendor": cal.vendor, "date": cal.date,
            "torch_version": cal.torch_version, "threads": cal.threads, "budget_s": float(cal.budget_s),
            "default_dtype": cal.default_dtype, "launch_s": cal.launch_s, "launch_low_s": cal.launch_low_s,
            "launch_high_s": cal.launch_high_s, "cache_names": [n for n, _ in cal.caches],
            "cache_bytes": [float(s) for _, s in cal.caches]}
    if cal.memory_bytes:
        meta["memory_bytes"] = float(cal.memory_bytes)
    if cal.sm_count:
        meta["sm_count"] = int(cal.sm_count)
    if cal.framework_gap_s is not None:
        meta["framework_gap_s"] = float(cal.framework_gap_s)
        meta["framework_probe"] = cal.framework_probe
    meta.update(cal.extra)
    lines += [f"{_key(k)} = {_val(v)}" for k, v in meta.items()] + _reference_lines(cal)
    for group, curves in (("matmul", cal.matmul), ("bandwidth", cal.bandwidth), ("gemm", cal.gemm)):
        for c in curves:
            name = (c.kind if group == "bandwidth" else
                    {"gemm_cold": f"{c.dtype}-cold", "gemm_pool": f"{c.dtype}-pool"}.get(c.kind, c.dtype))
            lines += ["", f"[calibration.{_key(cal.key)}.{group}.{_key(name)}]", f"dtype = {_val(c.dtype)}"]
            if group == "gemm":
                lines.append(f"kind = {_val(c.kind)}")
            for f in _curve_fields(c.kind):
                lines.append(f"{f} = {_val([float(x) for x in getattr(c, f)])}")
    for p in cal.probes:
        lines += ["", f"[[calibration.{_key(cal.key)}.probes]]"]
        for f in ("name", "category", "dtype", "shape", "flops", "bytes", "measured_s", "low_s", "high_s", "op", "profiled_s"):
            v = getattr(p, f)
            if v is None or (f == "op" and not v):
                continue
            lines.append(f"{f} = {_val(float(v) if isinstance(v, (int, float)) else v)}")
    return "\n".join(lines) + "\n"


def _reference_lines(cal: Calibration) -> list[str]:
    """[calibration.KEY.reference]: the reference kernel's timings, drift bound and the load (drift.ReferenceRun)."""
    r = cal.reference
    if r is None:
        return []
    spec = {"kernel": r.kernel, "n": r.n, "reference_s": list(r.reference_s), "kept_s": list(r.kept_s),
            "bound": float(r.bound), "repeats": r.repeats, "allowed": r.allowed, "load_start": r.load_start,
            "load_end": r.load_end, "cpu_share": r.cpu_share}
    return ["", f"[calibration.{_key(cal.key)}.reference]",
            *(f"{k} = {_val(float(v) if isinstance(v, float) else v)}" for k, v in spec.items() if v is not None)]


def _best_size(cal: Calibration, dtype: str) -> float:
    """The size whose rate is the dtype's peak (measurements.best_rate)."""
    best = best_rate(cal, dtype)
    for c in cal.matmul:
        if c.dtype == dtype and best is not None:
            rate = np.asarray(c.flops) / body_s(c.seconds, cal.launch_s)
            return float(c.size[int(np.argmin(np.abs(rate - best)))])
    return 0.0


def write_profile(cal: Calibration, path) -> Path:
    """Write the profile atomically (files.write_atomically: the old file or the new one, never half,
    its mode and a symlink kept, no temporary file left behind)."""
    path = Path(path)
    text = render_profile(cal)
    parse_profile(text, str(path))  # what we write must read back
    write_text_atomically(path, text)
    return path


# ---------------------------------------------------------------------------------------------
# TOML in
# ---------------------------------------------------------------------------------------------


class NotAProfile(RooflineError):
    """A machine file with no [calibration] table at all: a machine, not a measured profile."""


def parse_profile(text: str, origin: str) -> tuple[Machine, Calibration]:
    """The machine and the calibration of a profile file's text. NotAProfile when the file has no
    [calibration] table; any other fault of the table is a RooflineError naming the file."""
    machines = parse_machine_file(text, origin)
    doc = tomllib.loads(text)
    if "calibration" not in doc:
        raise NotAProfile(f"{origin}: no [calibration] table: a machine file, not a measured profile "
                          "(make one with `roofline calibrate`)", field="profile")
    if len(machines) != 1:
        raise RooflineError(f"{origin}: a profile holds one machine, found {len(machines)}", field="profile")
    key, machine = next(iter(machines.items()))
    cal = doc["calibration"].get(key) if isinstance(doc["calibration"], dict) else None
    if not isinstance(cal, dict):
        raise RooflineError(f"{origin}: no [calibration.{key}] table for its machine {key!r} "
                            "(a profile written by `roofline calibrate` has one)", field="profile")
    try:
        return machine, _calibration(key, cal)
    except KeyError as exc:
        raise RooflineError(f"{origin}: [calibration.{key}] is missing {exc.args[0]!r}", field="profile") from None
    except (TypeError, ValueError) as exc:
        raise RooflineError(f"{origin}: [calibration.{key}] is malformed ({exc})", field="profile") from None


def _curve_fields(kind: str) -> tuple[str, ...]:
    """The arrays a curve of this kind writes and reads: every curve's, a GEMM family's N and K, a pool's bytes."""
    return (("size", "flops", "bytes", "seconds", "low_s", "high_s") + (("n", "k") if kind.startswith("gemm") else ())
            + (("pool",) if kind == "gemm_pool" else ()))


def _curve(kind: str, spec: dict) -> Curve:
    fields = _curve_fields(kind)
    arrays = {f: tuple(float(x) for x in spec[f]) for f in fields}
    n = {len(a) for a in arrays.values()}
    if len(n) != 1:
        raise ValueError(f"{kind} arrays differ in length")
    if n == {0}:  # no point to read a rate from: numpy's max and median of nothing warn, then fail
        raise ValueError(f"{kind} curve at {spec.get('dtype')} has no points: its arrays are empty; run `roofline "
                         "calibrate` again or delete the table")
    if any(not math.isfinite(x) or x < 0 for a in arrays.values() for x in a) or any(s <= 0 for s in arrays["seconds"]):
        raise ValueError(f"{kind} has a negative, zero or non-finite time")
    return Curve(kind=kind, dtype=str(spec["dtype"]), **arrays)


MAX_LAUNCH_S = 0.1  # one kernel launch or eager dispatch: microseconds; a tenth of a second is a wrong file


def _number(name: str, x, positive: bool = True, maximum: float = math.inf) -> float:
    """A profile's number: finite, above 0 (or from 0 with ``positive`` off) and at most ``maximum``,
    else a ValueError naming the key (a hand-edited launch_s = -1 priced every op negative)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"{name} = {x!r} is not a number")
    v = float(x)
    if not math.isfinite(v) or v < 0 or (positive and v == 0) or v > maximum:
        raise ValueError(f"{name} = {x!r} is not a number {'above' if positive else 'from'} 0"
                         + (f" to {maximum:g}" if math.isfinite(maximum) else ""))
    return v


def _positive_or_none(x) -> float | None:
    if x is None:
        return None
    v = float(x)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"profiled_s = {x!r} is not a positive number")
    return v


MAX_FRAMEWORK_GAP_S = 1e-3  # eager Python between two ops: microseconds; a millisecond is a wrong file


MAX_THREADS = 4096


def _threads(x) -> int:
    """threads: a whole number from 1 to MAX_THREADS (torch.set_num_threads refuses 0 and less),
    else a ValueError naming the key."""
    if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= MAX_THREADS:
        raise ValueError(f"threads = {x!r} is not a whole number of CPU threads from 1 to {MAX_THREADS:,}")
    return x


def _framework_gap(x) -> float | None:
    """framework_gap_s: absent, or seconds from 0 (a probe that found no gap time) to
    MAX_FRAMEWORK_GAP_S, else a ValueError naming the key."""
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"framework_gap_s = {x!r} is not a number of seconds")
    v = float(x)
    if not math.isfinite(v) or not 0 <= v <= MAX_FRAMEWORK_GAP_S:
        raise ValueError(f"framework_gap_s = {x!r} is not seconds from 0 to {MAX_FRAMEWORK_GAP_S:g} "
                         "(microseconds per gap between ops)")
    return v


def _reference(spec) -> ReferenceRun | None:
    """[calibration.KEY.reference] as drift.ReferenceRun; None when absent (profiles before 2026-12-06)."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ValueError("reference is not a table")
    times = {f: tuple(_number(f"reference {f}", x) for x in spec[f]) for f in ("reference_s", "kept_s")}
    if not times["reference_s"] or not times["kept_s"]:
        raise ValueError("reference has no timings")
    n, repeats, allowed = spec["n"], spec.get("repeats", 0), spec.get("allowed", False)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or isinstance(repeats, bool) or not isinstance(repeats, int) \
            or repeats < 0 or not isinstance(allowed, bool):
        raise ValueError(f"reference n = {n!r}, repeats = {repeats!r} or allowed = {allowed!r} is not valid")
    opt = {f: (_number(f"reference {f}", spec[f], False) if f in spec else None) for f in ("load_start", "load_end", "cpu_share")}
    return ReferenceRun(str(spec["kernel"]), n, **times, bound=_number("reference bound", spec["bound"], maximum=10.0),
                        repeats=repeats, allowed=allowed, **opt)


def _calibration(key: str, cal: dict) -> Calibration:
    known = {"reference", "device", "device_name", "vendor", "date", "torch_version", "threads", "budget_s", "default_dtype",
             "launch_s", "launch_low_s", "launch_high_s", "cache_names", "cache_bytes", "memory_bytes", "sm_count",
             "matmul", "bandwidth", "probes", "gemm", "framework_gap_s", "framework_probe"}
    probes = tuple(
        Probe(str(p["name"]), str(p["category"]), str(p["dtype"]), _number("probe flops", p["flops"], False),
              _number("probe bytes", p["bytes"], False), _number("probe measured_s", p["measured_s"]),
              _number("probe low_s", p["low_s"]), _number("probe high_s", p["high_s"]), str(p.get("shape", "")),
              str(p.get("op", "")), _positive_or_none(p.get("profiled_s")))
        for p in cal.get("probes", [])
    )
    launch = _number("launch_s", cal["launch_s"], False, MAX_LAUNCH_S)
    return Calibration(
        key=key,
        device=str(cal["device"]),
        device_name=str(cal["device_name"]),
        vendor=str(cal.get("vendor", "")),
        date=str(cal["date"]),
        torch_version=str(cal.get("torch_version", "")),
        threads=_threads(cal.get("threads", 1)),
        budget_s=_number("budget_s", cal.get("budget_s", 0.0), False),
        default_dtype=str(cal["default_dtype"]),
        launch_s=launch,
        launch_low_s=_number("launch_low_s", cal.get("launch_low_s", launch), False, MAX_LAUNCH_S),
        launch_high_s=_number("launch_high_s", cal.get("launch_high_s", launch), False, MAX_LAUNCH_S),
        caches=tuple((str(n), _number("cache_bytes", s)) for n, s in zip(cal.get("cache_names", []),
                                                                         cal.get("cache_bytes", []))),
        matmul=tuple(_curve("matmul", spec) for spec in cal.get("matmul", {}).values()),
        bandwidth=tuple(_curve(kind, spec) for kind, spec in cal.get("bandwidth", {}).items()),
        probes=probes,
        gemm=tuple(_curve(str(spec.get("kind", "gemm")), spec) for spec in cal.get("gemm", {}).values()),
        memory_bytes=_number("memory_bytes", cal["memory_bytes"]) if "memory_bytes" in cal else None,
        sm_count=int(cal["sm_count"]) if "sm_count" in cal else None,
        framework_gap_s=_framework_gap(cal.get("framework_gap_s")),
        framework_probe=str(cal.get("framework_probe", "")),
        reference=_reference(cal.get("reference")),
        extra={k: v for k, v in cal.items() if k not in known},
    )


def load_profile(path) -> tuple[Machine, Calibration]:
    """Read a profile written by `roofline calibrate`."""
    from roofline.files import read_text

    p = Path(path)
    text = read_text(path, "profile", "profile", 16 * 2**20)
    try:
        return parse_profile(text, str(p))
    except (OverflowError, RecursionError, TypeError, AttributeError) as exc:
        raise RooflineError(f"profile {str(p)!r} could not be read ({type(exc).__name__}: {exc})", field="profile") from None
