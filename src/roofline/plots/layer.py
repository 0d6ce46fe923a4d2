"""The layer bar chart (the 'Predicting a Kernel's Time' plate): each op's time split into compute,
memory and launch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roofline.palette import COMPUTE_BLUE, LAUNCH_GREY, MEMORY_RED
from roofline.plots.figure import finish_figure, new_figure
from roofline.units import US

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_layer(report, path: str | None = None, title: str | None = None) -> Figure:
    """Per-op predicted time of one block as horizontal bars: red memory-bound, blue
    compute-bound, the launch overhead as a grey tail; the seed's readouts in the title."""
    pred = getattr(report, "prediction", report)
    ops = list(pred.ops)
    names = [op.name for op in ops]
    body = np.array([(op.time_s - op.launch_s) / US for op in ops])
    launch = np.array([op.launch_s / US for op in ops])
    colors = [MEMORY_RED if op.bound == "memory" else COMPUTE_BLUE for op in ops]
    fig, ax = new_figure(figsize=(9, 0.42 * len(ops) + 1.9))
    y = np.arange(len(ops))[::-1]
    ax.barh(y, body, color=colors, height=0.7)
    ax.barh(y, launch, left=body, color=LAUNCH_GREY, height=0.7, hatch="///", edgecolor="white", lw=0)
    for yi, b, l in zip(y, body, launch):
        ax.annotate(f"{b + l:,.1f} us", (b + l, yi), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(y, names, fontsize=9)
    ax.set_xlabel("predicted time (us)")
    ax.set_xlim(0, (body + launch).max() * 1.18)
    from matplotlib.patches import Patch

    handles = [Patch(color=MEMORY_RED, label="memory-bound"), Patch(color=COMPUTE_BLUE, label="compute-bound"),
               Patch(facecolor=LAUNCH_GREY, hatch="///", edgecolor="white", label="launch overhead")]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    where = ""
    if hasattr(report, "phase"):
        where = (f"{report.model}, {report.phase} T={report.tokens:,}" if report.phase == "prefill"
                 else f"{report.model}, decode S={report.context:,}") + f", B={report.batch}, {report.attention} attention, "
    head = title or f"One block: {where}{pred.machine}"
    sub = (f"total {pred.total_s / US:,.0f} us = {pred.total_s / pred.flops_only_s:.2f}x FLOPs-only, "
           f"{pred.total_s / pred.bytes_only_s:.2f}x bytes-only; {pred.memory_bound_ops} of {len(ops)} ops memory-bound "
           f"({pred.memory_bound_share:.0%} of time); launch {pred.launch_share:.1%}")
    ax.set_title(f"{head}\n{sub}", fontsize=9.5)
    ax.grid(True, axis="x", alpha=0.25)
    fig.tight_layout()
    return finish_figure(fig, path)
