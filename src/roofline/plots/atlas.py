"""The atlas: a GPU's measured kernels on its roofline (measured.atlas), the figure no bound alone
can draw. Each measured GEMM and fused attention of a model, at a few prefill lengths and decode
batches, is placed at its intensity and the FLOP/s its measured kernel reaches, under the roof of
the dtype's peak and the memory bandwidth: how far below its bound each real kernel runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roofline.machines import get_machine
from roofline.palette import COMPUTE_BLUE, MOE_PURPLE, TPOT_COLOR
from roofline.plots.figure import finish_figure, new_figure
from roofline.units import TERA

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FAMILY_COLORS = {"gemm": COMPUTE_BLUE, "attention": TPOT_COLOR, "moe": MOE_PURPLE}
PHASE_MARKERS = {"prefill": "o", "decode": "s"}


def plot_atlas(result, path: str | None = None, title: str | None = None) -> "Figure":
    """The roof (the dtype's peak, the memory bandwidth) and each measured op at (intensity,
    achieved FLOP/s): colour by family, marker by phase (circle prefill, square decode), filled
    where measured or interpolated and hollow where extrapolated; a dotted line joins each op to
    its roof above it. The median share of the roofline reached, per family, is in the legend."""
    m = get_machine(result.machine)
    peak = m.peak(result.dtype)
    pts = result.points
    x_all = np.array([p.intensity for p in pts])
    lo, hi = min(0.3, x_all.min() / 3), max(m.ridge_point * 30, x_all.max() * 3)
    x = np.logspace(np.log10(lo), np.log10(hi), 400)
    fig, ax = new_figure(figsize=(9.5, 6))
    ax.loglog(x, np.minimum(peak, x * m.bandwidth) / TERA, color="black", lw=2.2,
              label=f"{m.name} roofline: {peak / TERA:,.0f} TFLOP/s {result.dtype}, {m.bandwidth / TERA:.2f} TB/s")
    for other in sorted({p.dtype for p in pts} - {result.dtype, ""}):  # ops computing in another dtype: its roof too
        ax.loglog(x, np.minimum(m.peak(other), x * m.bandwidth) / TERA, color="black", lw=1.0, ls="--",
                  label=f"{other} roof ({m.peak(other) / TERA:,.0f} TFLOP/s): the ops computing in {other}")
    ax.axvline(peak / m.bandwidth, color="black", ls="--", lw=0.8, alpha=0.5)
    for family, color in FAMILY_COLORS.items():
        mine = [p for p in pts if p.family == family]
        if not mine:
            continue
        for phase, marker in PHASE_MARKERS.items():
            phased = [p for p in mine if p.phase == phase]
            share = np.median([p.roofline_s / p.kernel_s for p in phased]) if phased else 0.0
            for extrapolated in (False, True):
                group = [p for p in phased if (p.basis == "extrapolated") == extrapolated]
                if not group:
                    continue
                xs = np.array([p.intensity for p in group])
                ys = np.array([p.flops_per_s for p in group]) / TERA
                ax.scatter(xs, ys, marker=marker, s=34, zorder=3, edgecolors=color,
                           facecolors="none" if extrapolated else color,
                           label=(f"{family} {phase}, extrapolated" if extrapolated
                                  else f"{family} {phase}: median {share:.0%} of its roofline"))
                roof = np.array([min(m.peak(p.dtype or result.dtype), p.intensity * m.bandwidth) for p in group]) / TERA
                ax.vlines(xs, ys, roof, colors=color, linestyles=":", lw=0.7, alpha=0.6)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s (measured kernel, no launch)")
    ax.set_xlim(lo, hi)
    ys_all = np.array([p.flops_per_s for p in pts]) / TERA
    ax.set_ylim(max(ys_all.min() / 5, 1e-4), peak / TERA * 2)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")  # above the roof: no point can be there
    ax.set_title(title or f"{result.model}, {result.dtype} matmuls: {result.tables}'s measured kernels on {m.name} against the "
                 f"roofline\nprefill {', '.join(f'{t:,}' for t in result.prefill_tokens)} tokens; decode batches "
                 f"{', '.join(f'{b:,}' for b in result.decode_batches)} at {result.context:,} tokens", fontsize=9)
    fig.tight_layout()
    return finish_figure(fig, path)
