"""The machines and models a workshop app offers: the machine table (the presets and each machine
file's machines), and each machine and model as /api/machines and /api/models list them. No web
stack.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from roofline.architecture import Model
from roofline.errors import RooflineError
from roofline.machines import Machine, list_machines, load_machine_file
from roofline.plan.limits import QUANT_DTYPES
from roofline.sourced import range_of
from roofline.transformer import model_summary
from roofline.units import US, format_duration, format_si

# How the machine view names a figure of a machine file, by its key (a peak or a link adds its name).
FIGURE_NAMES = {
    "memory_bytes": "memory (datasheet)", "usable_memory_bytes": "memory (as the driver reports)",
    "memory_bytes_per_s": "memory bandwidth", "l2_bytes": "L2 cache", "sm_count": "SMs (compute units)",
    "launch_overhead_s": "launch overhead per kernel", "scale_up_gpus": "GPUs one scale-up domain joins",
    "nvlink_gpus": "GPUs one NVLink domain joins",
}


def machine_table(machine_files: list[str] | None) -> tuple[MappingProxyType, MappingProxyType]:
    """{key: Machine} for the presets and every machine in ``machine_files``, and {key: origin}."""
    machines: dict[str, Machine] = {m.key: m for m in list_machines()}
    origin = {key: "preset" for key in machines}
    for path in machine_files or []:
        for key, m in load_machine_file(path).items():
            if key in machines:
                raise RooflineError(
                    f"machine file {str(path)!r} defines {key!r}, which is already "
                    f"{'a preset' if origin[key] == 'preset' else 'in ' + origin[key]}; rename it",
                    field="machine",
                )
            machines[key] = m
            origin[key] = str(path)
        _machine_doc(str(path))  # its sources and notes read now, while the file is as it was loaded
    return MappingProxyType(machines), MappingProxyType(origin)


@functools.lru_cache(maxsize=32)
def _machine_doc(origin: str) -> dict:
    """The TOML a machine came from (the presets' data/machines.toml, or a machine file the app was
    started with and has already loaded, so it parses): its [machines] and [sources] tables."""
    if origin == "preset":
        return tomllib.loads(resources.files("roofline").joinpath("data/machines.toml").read_text(encoding="utf-8"))
    return tomllib.loads(Path(origin).read_text(encoding="utf-8"))


def _figure_text(where: str, value: float) -> str:
    unit = range_of(f"machine.{where}")[2]  # the unit of each key, as the file's checks have it
    if where.endswith("launch_overhead_s"):
        return format_duration(value)
    if unit in ("FLOP/s", "bytes/s", "bytes"):
        return format_si(value, {"FLOP/s": "FLOP/s", "bytes/s": "B/s", "bytes": "B"}[unit])
    return f"{value:,.0f}"


def _figure(name: str, where: str, entry: dict, citations: dict) -> dict:
    keys = [k.strip() for k in str(entry["source"]).replace(";", ",").split(",") if k.strip()]
    return {"name": name, "key": where, "value": float(entry["value"]), "text": _figure_text(where, float(entry["value"])),
            "note": entry.get("note", ""),
            "sources": [{"key": k, "citation": citations.get(k, k)} for k in keys]}


def machine_figures(key: str, origin: str) -> list[dict]:
    """Every number of a machine as its file gives it, each with its value in words, the file's note
    and the citation of each source key (the file's [sources] table): the machine view's table."""
    doc = _machine_doc(origin)
    return spec_figures(doc["machines"][key], doc.get("sources", {}))


def spec_figures(spec: dict, citations: dict) -> list[dict]:
    """Every number of one machine's table (machine_figures), with ``citations`` its file's [sources]."""
    out = [_figure(f"peak {d}", f"peak_flops_per_s.{d}", e, citations) for d, e in spec["peak_flops_per_s"].items()]
    out += [_figure(FIGURE_NAMES.get(k, k.replace("_", " ")), k, spec[k], citations)
            for k in spec if isinstance(spec[k], dict) and "value" in spec[k]]
    for table, words in (("links", "link"), ("peer_links", "link to one peer")):
        out += [_figure(f"{n} {words} (per direction)", f"{table}.{n}", e, citations) for n, e in spec.get(table, {}).items()]
    for level in spec.get("cache_levels", []):
        for k, words in (("size_bytes", "size"), ("bytes_per_s", "bandwidth")):
            if isinstance(level.get(k), dict):
                out.append(_figure(f"{level.get('name', 'cache')} {words}", f"cache_levels.{level.get('name')}.{k}",
                                   level[k], citations))
    return out


def machine_dict(m: Machine, origin: str, figures: list[dict] | None = None) -> dict:
    """A machine as /api/machines lists it: its figures, the precisions the page offers on it (those
    of the planner's it has a peak for: no fp8 on an A100) and every figure's source."""
    return {
        "key": m.key,
        "name": m.name,
        "vendor": m.vendor,
        "origin": origin,
        "default_dtype": m.default_dtype,
        "dtypes": list(m.dtypes),
        "precisions": [d for d in QUANT_DTYPES if d in m.dtypes],
        "peak_flops_per_s": m.peak_flops,
        "bytes_per_s": m.bandwidth,
        "ridge_flop_per_byte": m.ridge_point,
        "launch_overhead_s": m.launch_overhead_s,
        "launch_overhead_us": (m.launch_overhead_s or 0.0) / US,
        "label": m.name,
        "detail": f"{format_si(m.peak_flops, 'FLOP/s')} {m.default_dtype} · {format_si(m.bandwidth, 'B/s')} · "
                  f"ridge {m.ridge_point:,.0f} FLOP/byte",
        "figures": machine_figures(m.key, origin) if figures is None else figures,
    }


def model_dict(c: Model) -> dict:
    """A model as the page lists it: model_summary (layers, kinds, totals), with the attention shape
    of its first attention layer and its experts (None where it has none)."""
    a = c.first_attention
    moe = next((k.mlp for k in c.kinds if k.is_moe), None)
    return {
        **model_summary(c),
        "n_layers": c.n_layers,
        "n_heads": getattr(a, "heads", None),
        "n_kv_heads": getattr(a, "kv_heads", None),
        "head_dim": getattr(a, "head_dim", getattr(a, "qk_head_dim", None)),
        "n_experts": moe.n_experts if moe else 1,
        "experts_per_token": moe.top_k if moe else 1,
        "uniform": c.is_uniform,
        "label": c.name,
    }


# -- a machine given by its figures, in the URL (issue 37 item 5) ------------------------------------------

CUSTOM_PREFIX = "custom:"
CUSTOM_NAME = "Custom machine (your figures, no source)"  # every output names the machine: it says whose figures
CUSTOM_SOURCE = "user"
CUSTOM_CITATION = "your figure, given in the URL: no source"
# The URL's keys and the machine file's (machines.machine_from_dict, which checks each against its physical
# range); besides these, a dtype's peak FLOP/s (bf16=989e12) and a link's bytes/s per direction (nvlink=450e9)
CUSTOM_KEYS = MappingProxyType({"bw": "memory_bytes_per_s", "mem": "memory_bytes", "launch": "launch_overhead_s"})
CUSTOM_LINKS = ("nvlink", "xgmi", "ici", "roce", "pcie", "infiniband")  # plan.parallel's scale-up links, a network's
CUSTOM_EXAMPLE = "custom:bf16=989TFLOP/s,bw=3.35TB/s,mem=80GB,launch=3us,nvlink=450GB/s"


def custom_machine(text: str) -> Machine:
    """The machine of ``text``, 'custom:KEY=VALUE,...' (CUSTOM_EXAMPLE; each value in SI units, with or
    without its prefix and unit: 989e12, 989T or 989TFLOP/s; a launch 3us or 3e-6): a dtype's peak FLOP/s
    (at least one; the default dtype bf16 where given, else the first), bw the memory bytes/s (needed), mem
    the memory bytes, launch the time per launch, a link's bytes/s per direction.
    Built and checked by machines.machine_from_dict; a refusal names the URL's key."""
    return _custom(text)[0]


@functools.lru_cache(maxsize=64)
def _custom(text: str) -> tuple[Machine, dict]:
    """custom_machine's machine and its table, as a machine file would hold it."""
    from roofline.machines import machine_from_dict
    from roofline.units import DTYPE_BYTES, parse_number, parse_time_s

    spec: dict = {"name": CUSTOM_NAME, "peak_flops_per_s": {}, "links": {}}
    seen = set()
    for item in filter(None, (t.strip() for t in text[len(CUSTOM_PREFIX):].split(","))):
        key, sep, value = (t.strip() for t in item.partition("="))
        known = key in DTYPE_BYTES or key in CUSTOM_KEYS or key in CUSTOM_LINKS
        if not sep or not known:
            raise RooflineError(f"custom machine: {item!r} is not KEY=VALUE with KEY a dtype's peak ({', '.join(DTYPE_BYTES)}), "
                                f"bw, mem, launch or a link ({', '.join(CUSTOM_LINKS)}); e.g. {CUSTOM_EXAMPLE}", field="machine")
        if key in seen:
            raise RooflineError(f"custom machine: {key} is given twice", field="machine")
        seen.add(key)
        field = f"custom machine's {key}"
        unit = "FLOP/s" if key in DTYPE_BYTES else "B" if key == "mem" else "B/s"
        try:
            number = parse_time_s(value, field) if key == "launch" else parse_number(value, field, unit)
        except RooflineError as exc:  # the query's parameter is machine
            raise RooflineError(str(exc), field="machine") from None
        entry = {"value": number, "source": CUSTOM_SOURCE}
        table = spec["peak_flops_per_s"] if key in DTYPE_BYTES else spec["links"] if key in CUSTOM_LINKS else spec
        table[CUSTOM_KEYS.get(key, key)] = entry
    for needed, what in (("peak_flops_per_s", "a peak, e.g. bf16=989e12"), ("memory_bytes_per_s", "bw, e.g. bw=3.35e12")):
        if not spec.get(needed):
            raise RooflineError(f"custom machine {text!r}: give {what} (bytes/s and FLOP/s, SI units)", field="machine")
    peaks = spec["peak_flops_per_s"]
    spec["default_dtype"] = "bf16" if "bf16" in peaks else next(iter(peaks))
    try:
        return machine_from_dict("custom", spec, {CUSTOM_SOURCE: CUSTOM_CITATION}), spec
    except RooflineError as exc:  # "machines.custom.memory_bytes_per_s: ..." as the URL names it: "custom machine's bw: ..."
        message = str(exc)
        for short, long in (*((s, lg) for s, lg in CUSTOM_KEYS.items()),
                            *((d, f"peak_flops_per_s.{d}") for d in peaks), *((n, f"links.{n}") for n in spec["links"])):
            message = message.replace(f"machines.custom.{long}:", f"custom machine's {short}:")
        raise RooflineError(message.replace("machines.custom", "custom machine"), field="machine") from None


def custom_machine_dict(text: str) -> dict:
    """A custom machine as /api/machines lists a preset: its figures, each sourced to the user (no source)."""
    m, spec = _custom(text)
    return {**machine_dict(m, "custom", spec_figures(spec, {CUSTOM_SOURCE: CUSTOM_CITATION})), "key": text}
