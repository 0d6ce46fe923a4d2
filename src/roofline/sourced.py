"""Sourced numbers: the data files' ``{ value = ..., source = ..., note = ... }`` entries (machines,
links), each value checked positive, finite and within a physical range, each source checked against
the file's [sources] table. One home for both files' checks."""

from __future__ import annotations

import math

from roofline.errors import RooflineError

# What a machine file's numbers may be: wide enough for a phone to a whole pod, narrow enough that
# a typo (1e300, 5e-324) is refused by name instead of overflowing a prediction or a plot's axis.
PHYSICAL_RANGES = {
    "peak_flops_per_s": (1e3, 1e21, "FLOP/s"),
    "bytes_per_s": (1e3, 1e18, "bytes/s"),
    "bytes": (1.0, 1e18, "bytes"),
    "sm_count": (1.0, 1e6, "units"),
    "nvlink_gpus": (1.0, 1e6, "GPUs"),
    "scale_up_gpus": (1.0, 1e6, "GPUs"),
    "launch_overhead_s": (1e-12, 1.0, "s"),
}


def range_of(where: str) -> tuple[float, float, str]:
    if ".peak_flops_per_s." in where:
        return PHYSICAL_RANGES["peak_flops_per_s"]
    last = where.rsplit(".", 1)[-1]
    if ".links." in where or ".peer_links." in where or last.endswith("bytes_per_s"):
        return PHYSICAL_RANGES["bytes_per_s"]
    if last.endswith("bytes"):
        return PHYSICAL_RANGES["bytes"]
    return PHYSICAL_RANGES.get(last, (0.0, math.inf, ""))


def sourced_value(where: str, entry, sources: dict[str, str], field: str = "machine") -> float:
    """Read a ``{value, source, note}`` entry, checking the value (positive, finite, in its
    PHYSICAL_RANGES) and that the source is cited."""
    if not isinstance(entry, dict) or "value" not in entry or "source" not in entry:
        raise RooflineError(f"{where}: expected {{ value = ..., source = ... }}, got {entry!r}", field=field)
    extra = set(entry) - {"value", "source", "note"}
    if extra:
        raise RooflineError(f"{where}: unknown keys {sorted(extra)}", field=field)
    value = entry["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        hint = (" (none is the default: leave the key out for no launch overhead)"
                if where.endswith("launch_overhead_s") and value == 0 and not isinstance(value, bool) else "")
        raise RooflineError(f"{where}: value must be a positive finite number, got {value!r}{hint}", field=field)
    low, high, unit = range_of(where)
    if not low <= value <= high:
        raise RooflineError(f"{where}: value {value:g} {unit} is outside the physical range {low:g} to {high:g}",
                            field=field)
    check_cited(where, entry["source"], sources, field)
    return float(value)


def check_cited(where: str, source, sources: dict[str, str], field: str = "machine") -> None:
    """Every key of ``source`` (comma- or semicolon-separated) is in the file's [sources] table, or is
    a URL or says it is derived, the seed's or measured."""
    for key in str(source).replace(";", ",").split(","):
        key = key.strip()
        if not key or (key not in sources and not key.startswith(("http", "derived", "seed", "measured"))):
            raise RooflineError(f"{where}: source {key!r} is not in the file's [sources] table", field=field)
