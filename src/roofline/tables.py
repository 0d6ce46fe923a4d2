"""Plain-text tables for the CLI, rendered from result objects (never from hand-built dicts)."""

from __future__ import annotations

import csv
import io
from typing import Sequence

from roofline.units import US, format_intensity, format_time


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """Columns padded to their widest cell; ``right`` marks right-aligned columns."""
    right = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(str(c).rjust(w) if r else str(c).ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def _us(seconds: float) -> str:
    v = seconds / US
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def _mag(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:,.2f}{unit}"
    return f"{x:,.0f}"


def workload_table(pred) -> str:
    """A WorkloadPrediction as the per-op table plus the seed's readouts."""
    headers = ["op", "FLOPs", "bytes", "FLOP/B", "compute us", "memory us", "launch us", "time us", "share", "bound"]
    rows = []
    for op in pred.ops:
        rows.append([
            op.name, _mag(op.flops), _mag(op.bytes), format_intensity(op.intensity), _us(op.compute_s), _us(op.memory_s),
            _us(op.launch_s), _us(op.time_s), f"{op.time_s / pred.total_s:.1%}", op.bound,
        ])
    rows.append(["total", _mag(sum(o.flops for o in pred.ops)), _mag(sum(o.bytes for o in pred.ops)), "",
                 _us(pred.flops_only_s), _us(pred.bytes_only_s), _us(pred.launch_s), _us(pred.total_s), "100%", ""])
    n = len(pred.ops)
    lines = [
        grid(headers, rows, [False] + [True] * 8 + [False]),
        "",
        f"total {_us(pred.total_s)} us ({format_time(pred.total_s)})",
        f"FLOPs-only {_us(pred.flops_only_s)} us: total is {pred.total_s / pred.flops_only_s:.2f}x"
        if pred.flops_only_s > 0 else "FLOPs-only 0 us",
        f"bytes-only {_us(pred.bytes_only_s)} us: total is {pred.total_s / pred.bytes_only_s:.2f}x",
        f"memory-bound: {pred.memory_bound_ops} of {n} ops, {pred.memory_bound_share:.0%} of the time",
        f"launch overhead: {pred.launch_share:.1%} of the time",
    ]
    return "\n".join(lines)


def rows_to_csv(rows: Sequence[dict], fieldnames: Sequence[str] | None = None) -> str:
    """Same-keyed row dicts (a result's ``rows()``) as CSV text with a header. ``fieldnames`` picks
    and orders the columns (default: the first row's keys) and gives the header when there are no rows."""
    buf = io.StringIO()
    names = list(fieldnames) if fieldnames is not None else (list(rows[0]) if rows else [])
    if names:
        writer = csv.DictWriter(buf, fieldnames=names, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


def dump_json(obj) -> str:
    """JSON with indent 2, refusing NaN and infinity (which json.dumps would write as the invalid
    tokens NaN and Infinity): a result that is not finite is one line naming it, never printed."""
    import json

    from roofline.errors import RooflineError

    try:
        return json.dumps(obj, indent=2, allow_nan=False)
    except ValueError:
        bad = _non_finite_key(obj)
        raise RooflineError(f"the result is not finite ({bad or 'a value'} is NaN or infinite): an input is out of "
                            "any physical range", field=None) from None


# How Python and numpy print a value that is not finite: 'nan', 'inf', '-inf', also glued to a unit
# or a multiplier ('nanx', 'inf%', 'inf us'); not inside words ('info', 'inference', 'nanoseconds').
_NON_FINITE_TEXT = None


def check_finite_text(text: str) -> str:
    """``text`` (a command's whole output) if it prints no NaN or infinity, else a RooflineError
    quoting the line: a result that is not finite is said, never printed as a number."""
    global _NON_FINITE_TEXT
    if _NON_FINITE_TEXT is None:
        import re

        _NON_FINITE_TEXT = re.compile(r"(?<![A-Za-z_])(?:nan|inf)(?![a-wyzA-Z_])|(?<![A-Za-z_])(?:NaN|Infinity)(?![A-Za-z_])")
    hit = _NON_FINITE_TEXT.search(text)
    if hit is None:
        return text
    from roofline.errors import RooflineError

    start, end = text.rfind("\n", 0, hit.start()) + 1, text.find("\n", hit.end())
    line = text[start:end if end >= 0 else len(text)].strip()
    raise RooflineError(f"the result is not finite ({line[:120]!r}): an input is out of any physical range", field=None)


def _non_finite_key(obj, path: str = "") -> str | None:
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "value"
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return None
    for k, v in items:
        found = _non_finite_key(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None
