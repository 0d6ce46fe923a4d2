"""A measured machine profile: what `roofline calibrate` measured, written as a machine file.

The file has the presets' format (``[sources]`` and one ``[machines.KEY]`` with ``{value, source,
note}`` numbers, so ``get_machine(path)`` and every ``--machine FILE`` read it) plus the measured
curves in ``[calibration.KEY]``, which the machine loader ignores and ``load_profile`` reads:

- ``matmul.DTYPE``: square n x n x n matmuls, FLOPs and median/10th/90th-percentile seconds;
- ``bandwidth.copy`` / ``bandwidth.add``: working set in bytes against seconds (copy reads one
  buffer and writes one, add reads two and writes one; bytes counted = the working set);
- ``probes``: the ops of a few scaled-down transformer blocks, measured (the fit set of the
  calibrated cost model's per-op residuals).

Derived numbers (peaks, bandwidth per cache level) are computed here from the curves: every time
is first reduced to its body, t - launch (at least a quarter of t), because the cost model adds
the launch back. Pure numpy; torch lives in roofline.measure.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError
from roofline.files import write_text_atomically
from roofline.machines import Machine, parse_machine_file
from roofline.units import KIB, MIB

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BANDWIDTH_KINDS = ("copy", "add")
MIN_BODY_SHARE = 0.25  # a time's body (t - launch) is at least this share of t


@dataclass(frozen=True)
class Curve:
    """One micro-benchmark over a size sweep. ``kind`` is "matmul" (``size`` = n of a square
    n x n x n matmul in ``dtype``), "gemm" (``size`` = M of an (M, K) @ (K, N) with the skinny M
    of decode, ``n`` and ``k`` per point) or "copy"/"add" (``size`` = working set in bytes). ``seconds``
    are medians, ``low_s``/``high_s`` the 10th/90th percentiles of the repeats."""

    kind: str
    dtype: str
    size: tuple[float, ...]
    flops: tuple[float, ...]
    bytes: tuple[float, ...]
    seconds: tuple[float, ...]
    low_s: tuple[float, ...]
    high_s: tuple[float, ...]
    n: tuple[float, ...] = ()  # kind "gemm": size is M of an (M, K) @ (K, N), these N and K
    k: tuple[float, ...] = ()


@dataclass(frozen=True)
class Probe:
    """One op of a scaled-down block, timed during calibration: FLOPs and bytes as the kernel
    constructors count them, median and 10th/90th-percentile seconds."""

    name: str
    category: str
    dtype: str
    flops: float
    bytes: float
    measured_s: float
    low_s: float
    high_s: float
    shape: str = ""
    op: str = ""  # a class probe's aten op, as the trace rules name it (e.g. "aten::_fused_rms_norm")
    profiled_s: float | None = None  # a CPU class probe's time per call as torch.profiler records it


@dataclass(frozen=True)
class Calibration:
    """Everything one `roofline calibrate` run measured. ``caches`` are (name, bytes) from the
    smallest level up, sized for the threads used (per-core caches times the cores in use)."""

    key: str
    device: str
    device_name: str
    date: str
    torch_version: str
    threads: int
    budget_s: float
    default_dtype: str
    launch_s: float
    launch_low_s: float
    launch_high_s: float
    caches: tuple[tuple[str, float], ...]
    matmul: tuple[Curve, ...]
    bandwidth: tuple[Curve, ...]
    probes: tuple[Probe, ...] = ()
    gemm: tuple[Curve, ...] = ()  # skinny-M GEMMs per dtype, warm ("gemm") and cold ("gemm_cold"); older profiles have none
    vendor: str = ""
    memory_bytes: float | None = None
    sm_count: int | None = None
    notes: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def source(self) -> str:
        return f"measured: roofline calibrate on {self.date}"


# ---------------------------------------------------------------------------------------------
# Derived numbers
# ---------------------------------------------------------------------------------------------


def body_s(seconds, launch_s: float):
    """The part of a measured time the roofline explains: max(t - launch, t / 4)."""
    t = np.asarray(seconds, dtype=float)
    return np.maximum(t - launch_s, MIN_BODY_SHARE * t)


def matmul_rates(cal: Calibration, dtype: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(FLOPs, achieved FLOP/s) of the dtype's matmul sweep, sorted by FLOPs; None if unmeasured."""
    for c in cal.matmul:
        if c.dtype == dtype and c.flops and c.kind == "matmul":
            f = np.asarray(c.flops, dtype=float)
            rate = f / body_s(c.seconds, cal.launch_s)
            order = np.argsort(f)
            return f[order], rate[order]
    return None


def gemm_points(cal: Calibration, dtype: str, cold: bool = False):
    """(M, N x K, achieved FLOP/s) of the dtype's skinny-M GEMM family, timed warm or with the
    caches flushed (``cold``), or None if unmeasured."""
    kind = "gemm_cold" if cold else "gemm"
    for c in cal.gemm:
        if c.dtype == dtype and c.flops and c.kind == kind:
            m, nk = np.asarray(c.size, dtype=float), np.asarray(c.n, dtype=float) * np.asarray(c.k, dtype=float)
            return m, nk, np.asarray(c.flops, dtype=float) / body_s(c.seconds, cal.launch_s)
    return None


def peaks(cal: Calibration) -> dict[str, float]:
    """Best achieved matmul FLOP/s per dtype: the profile's peak_flops_per_s."""
    out = {}
    for c in cal.matmul:
        rates = matmul_rates(cal, c.dtype)
        if rates is not None:
            out[c.dtype] = float(rates[1].max())
    return out


def stream_curve(cal: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """(working set bytes, bytes/s): at each working set the better of copy and add."""
    best: dict[float, float] = {}
    for c in cal.bandwidth:
        rate = np.asarray(c.bytes, dtype=float) / body_s(c.seconds, cal.launch_s)
        for ws, r in zip(c.size, rate):
            best[float(ws)] = max(best.get(float(ws), 0.0), float(r))
    ws = np.array(sorted(best))
    return ws, np.array([best[w] for w in ws])


def main_memory(cal: Calibration) -> tuple[float, str]:
    """(bytes/s, note) of main memory: the best stream bandwidth at working sets of at least twice
    the last cache; if the sweep stopped short of that, the largest working set's."""
    ws, bw = stream_curve(cal)
    if not ws.size:
        raise RooflineError("calibration has no bandwidth measurements", field="profile")
    llc = cal.caches[-1][1] if cal.caches else 0.0
    beyond = ws >= 2 * llc
    if beyond.any():
        return float(bw[beyond].max()), f"best copy/add at working sets {_mib(ws[beyond].min())}-{_mib(ws.max())} (>= 2x last cache {_mib(llc)})"
    return float(bw[-1]), f"largest working set measured, {_mib(ws[-1])}: short of 2x the last cache ({_mib(llc)})"


def level_bandwidths(cal: Calibration) -> list[tuple[str, float, float]]:
    """(name, size bytes, bytes/s) per cache level: the best stream bandwidth over the working sets
    that fit the level and not the one below, raised to the best of every larger level and of main
    memory. Data in a small cache is never slower to reach than in a larger one: a small level that
    measures slower (its working sets are so short that dispatch dominates them) takes the larger
    level's bandwidth. Levels with no such working set are left out."""
    ws, bw = stream_curve(cal)
    measured, below = [], 0.0
    for name, size in cal.caches:
        inside = (ws > below) & (ws <= size)
        if inside.any():
            measured.append((name, float(size), float(bw[inside].max())))
        below = size
    out, floor = [], main_memory(cal)[0] if ws.size else 0.0
    for name, size, rate in reversed(measured):  # largest level first: each is at least the ones above it
        floor = max(floor, rate)
        out.append((name, size, floor))
    return out[::-1]


def timing_spread(cal: Calibration) -> tuple[float, float]:
    """Median of (10th percentile / median) and of (90th percentile / median) over every
    measurement of the calibration: how much a repeat of one op varies on this machine."""
    lo, hi = [], []
    for c in (*cal.matmul, *cal.bandwidth):
        lo += [l / s for l, s in zip(c.low_s, c.seconds)]
        hi += [h / s for h, s in zip(c.high_s, c.seconds)]
    lo += [p.low_s / p.measured_s for p in cal.probes]
    hi += [p.high_s / p.measured_s for p in cal.probes]
    if not lo:
        return 1.0, 1.0
    return min(1.0, float(np.median(lo))), max(1.0, float(np.median(hi)))


def _mib(n: float) -> str:
    return f"{n / MIB:,.3g} MiB" if n >= MIB else f"{n / KIB:,.3g} KiB"


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
    meta.update(cal.extra)
    lines += [f"{_key(k)} = {_val(v)}" for k, v in meta.items()]
    for group, curves in (("matmul", cal.matmul), ("bandwidth", cal.bandwidth), ("gemm", cal.gemm)):
        for c in curves:
            name = c.kind if group == "bandwidth" else c.dtype if c.kind != "gemm_cold" else f"{c.dtype}-cold"
            lines += ["", f"[calibration.{_key(cal.key)}.{group}.{_key(name)}]", f"dtype = {_val(c.dtype)}"]
            if group == "gemm":
                lines.append(f"kind = {_val(c.kind)}")
            for f in ("size", "flops", "bytes", "seconds", "low_s", "high_s") + (("n", "k") if group == "gemm" else ()):
                lines.append(f"{f} = {_val([float(x) for x in getattr(c, f)])}")
    for p in cal.probes:
        lines += ["", f"[[calibration.{_key(cal.key)}.probes]]"]
        for f in ("name", "category", "dtype", "shape", "flops", "bytes", "measured_s", "low_s", "high_s", "op", "profiled_s"):
            v = getattr(p, f)
            if v is None or (f == "op" and not v):
                continue
            lines.append(f"{f} = {_val(float(v) if isinstance(v, (int, float)) else v)}")
    return "\n".join(lines) + "\n"


def _best_size(cal: Calibration, dtype: str) -> float:
    for c in cal.matmul:
        if c.dtype == dtype:
            rate = np.asarray(c.flops) / body_s(c.seconds, cal.launch_s)
            return float(c.size[int(np.argmax(rate))])
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


def _curve(kind: str, spec: dict) -> Curve:
    fields = ("size", "flops", "bytes", "seconds", "low_s", "high_s") + (("n", "k") if kind.startswith("gemm") else ())
    arrays = {f: tuple(float(x) for x in spec[f]) for f in fields}
    n = {len(a) for a in arrays.values()}
    if len(n) != 1:
        raise ValueError(f"{kind} arrays differ in length")
    if any(not math.isfinite(x) or x < 0 for a in arrays.values() for x in a) or any(s <= 0 for s in arrays["seconds"]):
        raise ValueError(f"{kind} has a negative, zero or non-finite time")
    return Curve(kind=kind, dtype=str(spec["dtype"]), **arrays)


def _positive_or_none(x) -> float | None:
    if x is None:
        return None
    v = float(x)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"profiled_s = {x!r} is not a positive number")
    return v


def _calibration(key: str, cal: dict) -> Calibration:
    known = {"device", "device_name", "vendor", "date", "torch_version", "threads", "budget_s", "default_dtype",
             "launch_s", "launch_low_s", "launch_high_s", "cache_names", "cache_bytes", "memory_bytes", "sm_count",
             "matmul", "bandwidth", "probes", "gemm"}
    probes = tuple(
        Probe(str(p["name"]), str(p["category"]), str(p["dtype"]), float(p["flops"]), float(p["bytes"]),
              float(p["measured_s"]), float(p["low_s"]), float(p["high_s"]), str(p.get("shape", "")),
              str(p.get("op", "")), _positive_or_none(p.get("profiled_s")))
        for p in cal.get("probes", [])
    )
    return Calibration(
        key=key,
        device=str(cal["device"]),
        device_name=str(cal["device_name"]),
        vendor=str(cal.get("vendor", "")),
        date=str(cal["date"]),
        torch_version=str(cal.get("torch_version", "")),
        threads=int(cal.get("threads", 1)),
        budget_s=float(cal.get("budget_s", 0.0)),
        default_dtype=str(cal["default_dtype"]),
        launch_s=float(cal["launch_s"]),
        launch_low_s=float(cal.get("launch_low_s", cal["launch_s"])),
        launch_high_s=float(cal.get("launch_high_s", cal["launch_s"])),
        caches=tuple((str(n), float(s)) for n, s in zip(cal.get("cache_names", []), cal.get("cache_bytes", []))),
        matmul=tuple(_curve("matmul", spec) for spec in cal.get("matmul", {}).values()),
        bandwidth=tuple(_curve(kind, spec) for kind, spec in cal.get("bandwidth", {}).items()),
        probes=probes,
        gemm=tuple(_curve(str(spec.get("kind", "gemm")), spec) for spec in cal.get("gemm", {}).values()),
        memory_bytes=float(cal["memory_bytes"]) if "memory_bytes" in cal else None,
        sm_count=int(cal["sm_count"]) if "sm_count" in cal else None,
        extra={k: v for k, v in cal.items() if k not in known},
    )


def load_profile(path) -> tuple[Machine, Calibration]:
    """Read a profile written by `roofline calibrate`."""
    from roofline.files import read_text

    p = Path(path)
    text = read_text(p, "profile", "profile", 16 * 2**20)
    try:
        return parse_profile(text, str(p))
    except (OverflowError, RecursionError, TypeError, AttributeError) as exc:
        raise RooflineError(f"profile {str(p)!r} could not be read ({type(exc).__name__}: {exc})", field="profile") from None
