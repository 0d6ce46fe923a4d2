"""Measured against predicted: `roofline check`'s ops (predicted and measured points on the
profile's roofline) and a profiler trace's ops on a machine's roofline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roofline.machines import get_machine
from roofline.palette import COMPUTE_BLUE, MEMORY_RED
from roofline.plots.figure import finish_figure, new_figure, place_labels
from roofline.units import GIGA, MIB, TERA

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_check(report, path: str | None = None, title: str | None = None) -> Figure:
    """Predicted and measured points of `roofline check` on one roofline chart: the profile's roof
    (its peak at the report's dtype, main-memory slope and every measured cache level as extra
    ceilings); per op, the measured FLOP/s (filled, red if memory-bound, blue if compute-bound),
    the calibrated prediction (hollow, its interval as an error bar) and a line between them; each
    op labelled where its label covers nothing else. Levels measured at one bandwidth share a roof."""
    machine = report.profile_machine
    if machine is None:
        raise ValueError("the report carries no machine to draw the roofline of")
    ops = [op for op in report.ops if op.flops > 0]
    peak = machine.peak(report.dtype)
    scale, unit = (1e12, "TFLOP/s") if peak >= 1e13 else (1e9, "GFLOP/s")
    intensities = [op.intensity for op in ops]
    fastest = max([machine.bandwidth, *(lvl.bytes_per_s for lvl in machine.levels)])
    lo = min([0.05, *(i / 3 for i in intensities)])
    hi = max([peak / machine.bandwidth * 10, *(i * 3 for i in intensities)])
    x = np.logspace(np.log10(lo), np.log10(hi), 600)
    fig, ax = new_figure(figsize=(9.5, 6))
    ax.loglog(x, np.minimum(peak, x * machine.bandwidth) / scale, color="black", lw=2.2,
              label=f"{machine.name}: {peak / scale:,.3g} {unit} {report.dtype}, {machine.bandwidth / GIGA:,.1f} GB/s main memory")
    roofs: dict[float, list] = {}  # levels measured at the same bandwidth share one roof and one label
    for level in sorted(machine.levels, key=lambda l: l.size_bytes):
        roofs.setdefault(level.bytes_per_s, []).append(level)
    for bw, levels in roofs.items():  # named in the legend: at their knees the labels ran into each other
        names = ", ".join(f"{lvl.name} ({lvl.size_bytes / MIB:,.3g} MiB)" for lvl in levels)
        ax.loglog(x, np.minimum(peak, x * bw) / scale, color="0.55", lw=1, ls="-.",
                  label=f"cache roof: {names} {bw / GIGA:,.0f} GB/s")
    labels = []
    for op in sorted(ops, key=lambda o: o.intensity):
        side = MEMORY_RED if op.bound == "memory" else COMPUTE_BLUE
        measured = op.flops / op.measured_s / scale
        predicted = op.flops / op.calibrated_s / scale
        err = [[predicted - op.flops / op.calibrated_high_s / scale], [op.flops / op.calibrated_low_s / scale - predicted]]
        ax.plot([op.intensity, op.intensity], [measured, predicted], color=side, lw=0.8, alpha=0.6)
        ax.errorbar(op.intensity, predicted, yerr=err, fmt="o", mfc="white", mec=side, ecolor=side, ms=7, capsize=2,
                    zorder=3)
        ax.plot(op.intensity, measured, "o", color=side, ms=7, mec="white", mew=0.8, zorder=4)
        ax.plot(op.intensity, op.flops / op.seed_s / scale, "x", color="0.35", ms=5, zorder=3)
        labels.append((op.intensity, measured, f"{op.name} {op.roof_fraction:.0%}"))
    ax.plot([], [], "o", color="0.3", label="measured (red memory-bound, blue compute-bound); % of roof")
    ax.plot([], [], "o", mfc="white", mec="0.3", label="calibrated prediction with its interval")
    ax.plot([], [], "x", color="0.35", label="the workshop's cost model (e_c 0.70, e_m 0.85, launch); the roof is the plain roofline")
    ax.set_xlabel("arithmetic intensity (FLOP per byte, as the kernels count them)")
    ax.set_ylabel(f"achieved {unit}")
    ax.set_title(title or f"roofline check: {report.model} ({report.config}), {report.workload_text}, {report.dtype}\n"
                          f"on {report.device_name}, {report.threads} thread(s)", fontsize=9.5)
    ax.grid(True, which="both", alpha=0.25)
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom=min([lo * machine.bandwidth / scale, *(op.flops / op.measured_s / scale / 3 for op in ops)]),
                top=max(peak, lo * fastest) / scale * 4)
    ax.legend(loc="upper left", fontsize=7.5, framealpha=0.9)
    fig.tight_layout()
    place_labels(ax, labels)
    return finish_figure(fig, path)


def _short(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters with '...', its parentheses closed (a shape cut inside one)."""
    if len(text) <= n:
        return text
    cut = text[: n - 3].rstrip(" ,")
    return cut + "..." + ")" * max(cut.count("(") - cut.count(")"), 0)


def not_drawn(report) -> tuple[int, float]:
    """(rows, seconds) of a profile that plot_profile leaves off the roofline: no FLOPs (a sort's
    comparisons, a copy), no bytes or no measured time."""
    left = [op for op in report.ops if not (op.flops > 0 and op.bytes > 0 and op.measured_s > 0)]
    return len(left), float(sum(op.measured_s for op in left))


def plot_profile(report, machine, path: str | None = None, title: str | None = None, label: int = 8) -> Figure:
    """Measured ops of a profile (roofline.trace.profiler.ProfileReport) on ``machine``'s roofline:
    one roof per dtype the ops run at (each op's peak is its own dtype's, as the report costs it),
    each op at (intensity, achieved FLOP/s = FLOPs / measured time), a grey stem up to its dtype's
    roof; the ``label`` ops that lose the most time are named."""
    from roofline.trace.result import peak_dtype
    from roofline.units import format_si

    machine = get_machine(machine)
    ops = [op for op in report.ops if op.flops > 0 and op.bytes > 0 and op.measured_s > 0]
    dtypes = list(dict.fromkeys(peak_dtype(op.dtype, machine) for op in ops)) or [machine.default_dtype]
    dtypes.sort(key=machine.peak, reverse=True)
    xs = np.array([op.intensity for op in ops]) if ops else np.array([1.0])
    lo, hi = min(0.01, xs.min() / 3), max(1e4, *(machine.ridge(d) * 10 for d in dtypes), xs.max() * 3)
    x = np.logspace(np.log10(lo), np.log10(hi), 400)
    fig, ax = new_figure(figsize=(9, 5.6))
    styles = ("-", "--", "-.", ":")
    for i, dtype in enumerate(dtypes):
        ax.loglog(x, machine.attainable(x, dtype) / TERA, color="black", lw=2 if i == 0 else 1.4, ls=styles[i % 4],
                  label=f"{machine.name} {dtype}: {format_si(machine.peak(dtype), 'FLOP/s')}, "
                        f"{format_si(machine.bandwidth, 'B/s')}")
        ax.axvline(machine.ridge(dtype), color="black", ls="--", lw=0.8, alpha=0.5)
    # one artist per kind, not two per op: 20,000 ncu kernels as 40,000 Line2D took minutes to lay out and draw
    floor = None
    if ops:
        from matplotlib.collections import LineCollection

        achieved = np.array([op.flops * op.calls / op.measured_s for op in ops]) / TERA
        at = np.array([peak_dtype(op.dtype, machine) for op in ops])
        roof = np.empty_like(xs)
        for d in dtypes:  # each op's roof is its own dtype's
            roof[at == d] = machine.attainable(xs[at == d], d) / TERA
        ax.add_collection(LineCollection(np.stack([np.column_stack([xs, achieved]), np.column_stack([xs, roof])], axis=1),
                                         colors="0.75", linewidths=0.8, zorder=1))
        memory = np.array([op.bound == "memory" for op in ops])
        for where, color in ((memory, MEMORY_RED), (~memory, COMPUTE_BLUE)):
            if where.any():
                ax.plot(xs[where], achieved[where], "o", ls="none", color=color, ms=6, mec="white", mew=0.6, zorder=3)
        floor = float(achieved.min())
    labelled = [(op, op.flops * op.calls / op.measured_s / TERA) for op in sorted(ops, key=lambda o: -o.lost_s)[:label]]
    ax.plot([], [], "o", color=MEMORY_RED, label="memory-bound op (measured)")
    ax.plot([], [], "o", color=COMPUTE_BLUE, label="compute-bound op (measured)")
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("TFLOP/s (achieved: points; attainable: the roof of the op's dtype)")
    src = "device kernels" if report.device else "CPU wall time"
    ax.set_title(title or f"Profile {report.path.split('/')[-1]} on {machine.name}: measured ({src}) against the roofline",
                 fontsize=9.5)
    ax.set_xlim(lo, hi)
    if floor is not None:
        ax.set_ylim(bottom=floor / 5, top=max(machine.peak(d) for d in dtypes) / TERA * 4)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="upper left", fontsize=7.5, framealpha=0.9)
    fig.tight_layout()
    tag = len(dtypes) > 1
    place_labels(ax, [(op.intensity, y, f"{_short(op.name.removeprefix('aten::'), 28)} {_short(op.shapes, 24)}"
                        f"{' ' + op.dtype if tag else ''} ({op.speed_of_light:.1%})") for op, y in labelled], fontsize=7)
    return finish_figure(fig, path)
