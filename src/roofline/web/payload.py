"""What the workshop page shows, built from a LayerReport: readouts, the seed's sentence, the bar
chart's series and the roofline's curves. Pure functions (report in, plain dict out) and no web
stack, so the page's JavaScript only places numbers and text it is given.

Every number here comes from the library: times are the report's seconds, converted to
microseconds at this edge; roofs are ``Machine.attainable`` and the cost model's ``op_times``.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.blocks import LayerReport
from roofline.cost import CostModel, op_times
from roofline.machines import STORAGE_ONLY, Machine
from roofline.palette import BOUND_COLORS
from roofline.units import (DTYPE_BYTES, TERA, US, format_duration, format_number, format_plain, format_ratio, format_share, format_si,
                            time_unit)

ROOF_POINTS = 96  # points on each roof curve; the ridge is added exactly

# Every number's text comes from roofline.units (format_duration, format_ratio, format_share,
# format_si, ...). These two names stay for the modules that import them from here.
format_us = format_us_fine = format_duration


def time_axis(seconds, what: str = "predicted time") -> dict:
    """A chart's time axis in the unit of its largest value (units.time_unit: µs below 10 ms, ms
    below 1 s, s, ...): the unit, its seconds and the title with the unit. The chart's values are
    sent in that unit, so Plotly never abbreviates the ticks ('0.8M µs', '300k ms')."""
    symbol, scale = time_unit(max((float(s) for s in seconds), default=0.0))
    return {"unit": symbol, "seconds_per_unit": scale, "title": f"{what} ({symbol})"}


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def json_safe(x):
    """Floats that JSON can carry: NaN and infinities become None (never a 500)."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


# -- readouts and the seed's sentence ---------------------------------------------------------------

def readouts(report: LayerReport) -> dict:
    """The seed's readouts as numbers (µs, ratios, shares) and as the text the page shows."""
    p = report.prediction
    n_ops = len(p.ops)
    flops_ratio = _ratio(p.total_s, p.flops_only_s)
    bytes_ratio = _ratio(p.total_s, p.bytes_only_s)
    numbers = {
        "total_us": p.total_s / US,
        "flops_only_us": p.flops_only_s / US,
        "bytes_only_us": p.bytes_only_s / US,
        "launch_us": p.launch_s / US,
        "total_over_flops_only": flops_ratio,
        "total_over_bytes_only": bytes_ratio,
        "memory_bound_ops": p.memory_bound_ops,
        "n_ops": n_ops,
        "memory_bound_share": p.memory_bound_share,
        "launch_share": p.launch_share,
    }
    text = {
        "total": format_duration(p.total_s),
        "flops_only": format_duration(p.flops_only_s),
        "flops_ratio": format_ratio(flops_ratio),
        "bytes_only": format_duration(p.bytes_only_s),
        "bytes_ratio": format_ratio(bytes_ratio),
        "memory_bound": f"{p.memory_bound_ops} of {n_ops} ops",
        "memory_share": f"{format_share(p.memory_bound_share)} of the time",
        "launch": format_duration(p.launch_s),
        "launch_share": format_share(p.launch_share),
    }
    return {**numbers, "text": text}


def _workload_phrase(report: LayerReport) -> str:
    B, S, T = report.batch, report.context, report.tokens
    if report.phase == "prefill":
        over = f" over a context of {S:,} (a chunk of a longer prompt)" if S != T else ""  # the link's context=, said
        return (f"one {T:,}-token sequence{over}" if B == 1 else f"a batch of {B:,} sequences of {T:,} tokens{over}")
    who = "one sequence" if B == 1 else f"a batch of {B:,} sequences"
    return f"one decode step of {who} at {S:,} token{'s' if S != 1 else ''} of context"


def _reason(n_memory: int, n_ops: int, memory_share: float) -> str:
    if n_memory == 0:
        return "with every operation compute-bound"
    if n_memory == n_ops:
        return f"because all {n_ops} operations are memory-bound"
    if n_memory == 1:
        return f"because 1 of the operations is memory-bound and takes {format_share(memory_share)} of the time"
    return f"because {n_memory} of the operations are memory-bound and take {format_share(memory_share)} of the time"


def sentence(report: LayerReport) -> str:
    """The 'Predicting a Kernel's Time' plate's sentence for any configuration, e.g. 'For one 8,192-token sequence, the model
    predicts 8,756 µs for the layer — 1.47 times a FLOPs-only estimate of 5,965 µs, because 8 of
    the operations are memory-bound and take 41% of the time.' A launch share of 5% or more is
    named too."""
    p = report.prediction
    ratio = _ratio(p.total_s, p.flops_only_s)
    times = "" if ratio is None else f" — {format_number(ratio)} times a FLOPs-only estimate of {format_duration(p.flops_only_s)}"
    text = (
        f"For {_workload_phrase(report)}, the model predicts {format_duration(p.total_s)} for the layer{times}, "
        f"{_reason(p.memory_bound_ops, len(p.ops), p.memory_bound_share)}"
    )
    if p.launch_share >= 0.05:
        text += f"; {format_share(p.launch_share)} of the time is launch overhead alone"
    return text + "."


# -- the bar chart ------------------------------------------------------------------------------

def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
    return out


def chart(report: LayerReport) -> dict:
    """Per-op series for the horizontal bar chart, in execution order: labels, time in µs
    (``time_us``) and in the axis's unit (``time``, ``axis``: the unit of the largest bar), bound
    and hover text (FLOPs, bytes, intensity, compute, memory and launch time, bound)."""
    p = report.prediction
    labels = _unique([op.name for op in p.ops])
    hover = []
    for label, op in zip(labels, p.ops):
        share = format_share(op.time_s / p.total_s) if p.total_s > 0 else "—"
        hover.append(
            f"<b>{label}</b> — {format_duration(op.time_s)} ({share} of the layer)<br>"
            f"FLOPs: {format_si(op.flops, 'FLOP')}<br>"
            f"bytes: {format_si(op.bytes, 'B')}<br>"
            f"intensity: {format_number(op.intensity)} FLOP/byte<br>"
            f"compute: {format_duration(op.compute_s)} · memory: {format_duration(op.memory_s)} · "
            f"launch: {format_duration(op.launch_s)}<br>"
            f"{op.bound}-bound"
        )
    axis = time_axis([op.time_s for op in p.ops])
    return {
        "labels": labels,
        "time_us": [op.time_s / US for op in p.ops],
        "time": [op.time_s / axis["seconds_per_unit"] for op in p.ops],
        "axis": axis,
        "time_text": [format_duration(op.time_s) for op in p.ops],
        "bound": [op.bound for op in p.ops],
        "hover": hover,
        "colors": BOUND_COLORS,
    }


# -- what cannot run as one kernel on this machine -------------------------------------------------

def memory_warnings(ops, memory_bytes, machine_name: str, naive_attention: bool = False) -> list[dict]:
    """The ops whose working set exceeds the machine's memory, in order, each named once (its
    largest). The working set is what the library knows of it: the op's bytes, its inputs and
    outputs each counted once (for the unfused attention, the scores it writes to memory and reads
    back). ``ops`` are (name, category, bytes) of one run of each op; none without a capacity."""
    if not memory_bytes:
        return []
    largest: dict[str, tuple[str, float]] = {}
    for name, category, n_bytes in ops:
        if n_bytes > memory_bytes and n_bytes > largest.get(name, ("", 0.0))[1]:
            largest[name] = (category, float(n_bytes))
    out = []
    for name, (category, n_bytes) in largest.items():
        text = (f"{name} moves {format_si(n_bytes, 'B')} (its inputs and outputs, each counted once), more than the "
                f"{machine_name}'s {format_si(memory_bytes, 'B')} of memory: it cannot run as one kernel there")
        if naive_attention and category in ("attention", "softmax"):
            text += "; unfused attention holds the scores in memory, flash attention keeps them on chip"
        out.append({"op": name, "bytes": n_bytes, "memory_bytes": float(memory_bytes), "working_set": "bytes moved",
                    "text": text + "."})
    return out


def layer_warnings(report: LayerReport, machine: Machine) -> list[dict]:
    """memory_warnings for the layer's ops, and what a storage-only dtype (int4, fp4 without a
    peak of its own) means for one layer: the library prices it as stated, so the page says so."""
    out = memory_warnings([(op.name, op.category, op.bytes) for op in report.prediction.ops], machine.capacity_bytes,
                          machine.name, report.attention == "naive")
    if report.dtype in STORAGE_ONLY and report.dtype not in machine.dtypes:
        compute = STORAGE_ONLY[report.dtype]
        out.append({"op": "", "bytes": 0.0, "memory_bytes": float(machine.capacity_bytes or 0), "working_set": "dtype",
                    "text": (f"{report.dtype} has no compute peak on {machine.the_name}: this layer's matmuls are priced "
                             f"at its {compute} peak and every tensor (weights, activations, attention scores) at "
                             f"{DTYPE_BYTES[report.dtype]:g} bytes an element. For {report.dtype} weights with "
                             f"{compute} activations, use the Whole model view's Weights control.")})
    return out


# -- the CSV download -----------------------------------------------------------------------------

CSV_FIELDS = ("op", "bound", "flops", "bytes", "intensity_flop_per_byte", "compute_us", "memory_us", "launch_us", "time_us")


def layer_csv(report: LayerReport) -> str:
    """/api/layer.csv: one row per op and a totals row, each column's unit in its name; FLOPs and
    bytes as whole numbers, the rest to 6 significant figures (units.format_plain). The totals
    row's compute_us is the FLOPs-only estimate, memory_us the bytes-only one and time_us the
    layer's time. (`roofline layer --csv` keeps the library's seconds: WorkloadPrediction.to_csv.)"""
    from roofline.tables import rows_to_csv

    p = report.prediction

    def row(op_name, bound, flops, n_bytes, compute_s, memory_s, launch_s, time_s):
        return {"op": op_name, "bound": bound, "flops": format_plain(round(flops)), "bytes": format_plain(round(n_bytes)),
                "intensity_flop_per_byte": format_plain(flops / n_bytes) if n_bytes > 0 else "",
                "compute_us": format_plain(compute_s / US), "memory_us": format_plain(memory_s / US),
                "launch_us": format_plain(launch_s / US), "time_us": format_plain(time_s / US)}

    rows = [row(op.name, op.bound, op.flops, op.bytes, op.compute_s, op.memory_s, op.launch_s, op.time_s) for op in p.ops]
    rows.append(row("total", "", sum(op.flops for op in p.ops), sum(op.bytes for op in p.ops), p.flops_only_s,
                    p.bytes_only_s, p.launch_s, p.total_s))
    return rows_to_csv(rows, CSV_FIELDS)


# -- the roofline ---------------------------------------------------------------------------------

def _intensity_grid(intensities: list[float], ridge: float) -> np.ndarray:
    """Log-spaced FLOP/byte from half a decade below the decade of the smallest of ops and ridge to a decade above the
    largest, with the ridge itself included."""
    known = [i for i in intensities if i > 0 and math.isfinite(i)] + [ridge]
    # half a decade below the smallest op's decade: the first x tick then stands clear of the y axis's
    # labels (a whole decade put a "0.01" tick in the corner under the y axis's "0.01" on an A100)
    lo = 10.0 ** (math.floor(math.log10(min(known))) - 0.5)
    hi = 10.0 ** math.ceil(math.log10(max(known)) + 1)
    grid = np.logspace(math.log10(lo), math.log10(hi), ROOF_POINTS)
    return np.unique(np.append(grid, ridge))


LABEL_SPOTS = ("top left", "bottom right", "top right", "bottom left")
NEAR_LOG10 = 0.08  # labels of points within 3x this on both log axes keep off each other's spots
SHARED_LOG10 = 0.06  # points nearer than this on both log axes (~4 px: their markers overlap) share one label


EDGE_LOG10 = 1.0  # a point this near (in decades) the plot's left or right edge takes a label on its inner side


def point_labels(intensity: list[float], rate: list, x_range_log10: tuple[float, float] | None = None
                 ) -> tuple[list[str], list[str]]:
    """Each roofline point's label (its 1-based op number) and where it sits. Points at the same
    spot (the same op repeated: the two residual adds, QK^T and PV) share one label, "7, 12", and so
    do points nearer than SHARED_LOG10 on both axes (their markers overlap: two labels found no room);
    a label takes the first spot around its point that no near label holds and no near point lies
    toward (a "10" set top right of its point sat under op 1's marker), and none toward the near edge
    of ``x_range_log10`` (a label left of a point at the left edge sat on the y axis's ticks)."""
    xy = [None if r is None or r <= 0 or i <= 0 else (math.log10(i), math.log10(r)) for i, r in zip(intensity, rate)]
    numbers, positions = [""] * len(xy), [LABEL_SPOTS[0]] * len(xy)
    placed: list[tuple[float, float, str]] = []
    toward = {"top left": (-1, 1), "bottom right": (1, -1), "top right": (1, 1), "bottom left": (-1, -1)}
    for k, point in enumerate(xy):
        if point is None:
            continue
        same = [j for j in range(k) if numbers[j] and abs(xy[j][0] - point[0]) < SHARED_LOG10 and abs(xy[j][1] - point[1]) < SHARED_LOG10]
        if same:  # a repeat of an earlier op, or a point its marker covers: its number joins that label
            numbers[same[0]] += f", {k + 1}"
            continue
        numbers[k] = str(k + 1)
        near = {spot for x, y, spot in placed if abs(x - point[0]) < NEAR_LOG10 * 3 and abs(y - point[1]) < NEAR_LOG10 * 3}
        others = [p for j, p in enumerate(xy) if p is not None and j != k and p != point
                  and abs(p[0] - point[0]) < NEAR_LOG10 * 3 and abs(p[1] - point[1]) < NEAR_LOG10 * 3]
        crowded = {spot for spot, (sx, sy) in toward.items()
                   if any((p[0] - point[0]) * sx >= 0 and (p[1] - point[1]) * sy >= 0 for p in others)}
        side = set()
        if x_range_log10 is not None and point[0] - x_range_log10[0] < EDGE_LOG10:
            side = {"top left", "bottom left"}
        elif x_range_log10 is not None and x_range_log10[1] - point[0] < EDGE_LOG10:
            side = {"top right", "bottom right"}
        spots = [spot for spot in LABEL_SPOTS if spot not in side]
        positions[k] = next((spot for spot in spots if spot not in near | crowded),
                            next((spot for spot in spots if spot not in near), spots[k % len(spots)]))
        placed.append((point[0], point[1], positions[k]))
    return numbers, positions


def roofline(report: LayerReport, machine: Machine, cost_model: CostModel) -> dict:
    """The machine's roof (``attainable``) and the cost model's achievable roof (a 1-byte op of
    each intensity through ``op_times``, no launch) on one grid, in TFLOP/s for the chart; the
    ridge; and the ops placed at their intensity and predicted rate (FLOPs / predicted time)."""
    p = report.prediction
    peak_flops_per_s = machine.peak(report.dtype)
    ridge = machine.ridge(report.dtype)
    grid = _intensity_grid([op.intensity for op in p.ops], ridge)
    _, _, one_byte_s = op_times(
        grid, 1.0, peak_flops_per_s, machine.bandwidth, cost_model.compute_efficiency,
        cost_model.memory_efficiency, 0.0, cost_model.overlap,
    )
    labels = _unique([op.name for op in p.ops])
    op_flops_per_s = [op.flops / op.time_s if op.time_s > 0 else None for op in p.ops]
    numbers, positions = point_labels([op.intensity for op in p.ops], op_flops_per_s,
                                      (math.log10(grid[0]), math.log10(grid[-1])))
    hover = [
        f"<b>{label}</b><br>intensity: {format_number(op.intensity)} FLOP/byte<br>"
        f"predicted: {format_si(rate, 'FLOP/s') if rate else '—'}<br>"
        f"roof: {format_si(machine.attainable(op.intensity, report.dtype), 'FLOP/s')}<br>{op.bound}-bound"
        for label, op, rate in zip(labels, p.ops, op_flops_per_s)
    ]
    return {
        "machine": machine.key or machine.name,
        "machine_name": machine.name,
        "dtype": report.dtype,
        "peak_flops_per_s": peak_flops_per_s,
        "peak_tflops_per_s": peak_flops_per_s / TERA,
        "bytes_per_s": machine.bandwidth,
        "ridge_flop_per_byte": ridge,
        "ridge_log10": math.log10(ridge),  # where Plotly puts an annotation on a log axis
        "ridge_text": f"ridge {ridge:,.0f} FLOP/byte",
        "peak_text": f"peak {format_si(peak_flops_per_s, 'FLOP/s')} ({report.dtype})",
        "intensity": grid.tolist(),
        "roof_tflops_per_s": (np.asarray(machine.attainable(grid, report.dtype)) / TERA).tolist(),
        "achievable_tflops_per_s": (grid / one_byte_s / TERA).tolist(),
        "ops": {
            "labels": labels,
            "intensity": [op.intensity for op in p.ops],
            "tflops_per_s": [None if r is None else r / TERA for r in op_flops_per_s],
            "bound": [op.bound for op in p.ops],
            "hover": hover,
            "number": numbers,  # the op table's #: each point labelled, points that coincide once
            "text_position": positions,
        },
        "colors": BOUND_COLORS,
    }


def caption(report: LayerReport, machine: Machine, model_name: str) -> str:
    """What the page is showing, in one line under the charts."""
    p = report.prediction
    which = "" if report.layer_count == report.n_layers else (
        f" (layer {report.layer_index}: {report.layer_kind}, one of the {report.layer_count} of {report.n_layers} layers of "
        "this kind; choose another in the Layer control)")
    return (
        f"One {model_name} layer's forward pass{which} in {report.dtype} on {machine.the_name} "
        f"(peak {format_si(machine.peak(report.dtype), 'FLOP/s')}, {format_si(machine.bandwidth, 'B/s')}), "
        f"e_c = {p.model.compute_efficiency:g}, e_m = {p.model.memory_efficiency:g}, "
        f"{format_duration(p.model.launch_overhead_s)} {'per pass (one CUDA graph launch)' if p.model.cuda_graph else 'per launch'}, "
        f"overlap {p.model.overlap:g}. "
        "FLOPs-only: ΣF ÷ (e_c · peak); bytes-only: ΣB ÷ (e_m · bandwidth)."
    )


def layer_payload(report: LayerReport, machine: Machine, cost_model: CostModel, launch_overhead_us: float,
                  model_name: str = "") -> dict:
    """The /api/layer body: the library's ``LayerReport.to_dict()`` plus what the page draws."""
    body = {
        **report.to_dict(),
        "launch_overhead_us": launch_overhead_us,
        "caption": caption(report, machine, model_name or report.model),
        "readouts": readouts(report),
        "sentence": sentence(report),
        "chart": chart(report),
        "roofline": roofline(report, machine, cost_model),
        "warnings": layer_warnings(report, machine),
    }
    return json_safe(body)
