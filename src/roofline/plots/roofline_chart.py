"""The roofline chart (the roofline chapter, section 3.1): one or several machines' roofs, the
ridge, the other dtypes' and the cache levels' ceilings, and each kernel placed at its intensity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from roofline.cost import roofline_bound
from roofline.kernels import (Kernel, decode_step_kernel, flash_attention_kernel, layernorm_kernel, matmul_kernel,
                              naive_attention_kernel)
from roofline.machines import Machine, get_machine
from roofline.palette import COMPUTE_BLUE, MEMORY_RED
from roofline.plots.figure import finish_figure, new_figure, place_labels
from roofline.plots.plan_figures import bound_colors
from roofline.units import TERA

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def seed_kernels() -> list[Kernel]:
    """The seven kernels of the seed's H100 figure (the roofline chapter, section 1 and exercise 5)."""
    return [
        matmul_kernel(8192, 4096, 4096, name="prefill GEMM 8192x4096x4096"),
        flash_attention_kernel(4096, 128),
        naive_attention_kernel(4096, 128),
        matmul_kernel(64, 4096, 4096, name="decode matmul B=64"),
        decode_step_kernel(7e9, 256),
        decode_step_kernel(7e9, 1),
        layernorm_kernel(4096, 4096),
    ]


def plot_roofline(machine, kernels: Sequence[Kernel], path: str | None = None, title: str | None = None,
                  ceilings: bool = True) -> Figure:
    """A log-log roofline of one machine (or several: a list) with each kernel placed at
    (intensity, attainable on the first machine), labelled where the label covers nothing else.
    The ridge is marked; with ``ceilings`` the other dtypes' peaks and any cache levels with a
    known bandwidth are drawn as extra roofs."""
    machines: list[Machine] = [get_machine(m) for m in (machine if isinstance(machine, (list, tuple)) else [machine])]
    primary = machines[0]
    intensities = [k.intensity for k in kernels if k.intensity > 0]
    lo = min([0.1, *(i / 3 for i in intensities)])
    hi = max([1e4, *(m.ridge_point * 10 for m in machines), *(i * 3 for i in intensities)])
    x = np.logspace(np.log10(lo), np.log10(hi), 600)

    fig, ax = new_figure(figsize=(9, 5.6))
    for i, m in enumerate(machines):
        color = "black" if i == 0 else f"C{(i + 2) % 10}"
        roof = m.attainable(x) / TERA
        ax.loglog(x, roof, color=color, lw=2.2 if i == 0 else 1.6,
                  label=f"{m.name}: {m.peak_flops / TERA:,.0f} TFLOP/s {m.default_dtype}, {m.bandwidth / TERA:.2f} TB/s")
        ax.axvline(m.ridge_point, color=color, ls="--", lw=0.9, alpha=0.6)
        ax.annotate(f"ridge {m.ridge_point:,.0f} FLOP/B", (m.ridge_point, lo * m.bandwidth / TERA), xytext=(-3 - 11 * i, 6),
                    textcoords="offset points", fontsize=8, color=color, rotation=90, ha="right", va="bottom")
    if ceilings:
        for dtype, peak in primary.peaks:
            if dtype != primary.default_dtype and peak < primary.peak_flops and dtype in ("fp32", "tf32"):
                flat = x >= peak / primary.bandwidth  # only the flat part: the slope is shared
                ax.loglog(x[flat], np.full(flat.sum(), peak / TERA), color="0.55", lw=1, ls=":")
                ax.annotate(f"{dtype} {peak / TERA:,.0f} TFLOP/s (no tensor cores)" if dtype == "fp32" else f"{dtype} {peak / TERA:,.0f} TFLOP/s",
                            (peak / primary.bandwidth, peak / TERA), fontsize=7, color="0.4",
                            xytext=(4, -3), textcoords="offset points", ha="left", va="top")
        for level in primary.levels:
            ax.loglog(x, np.minimum(primary.peak_flops, x * level.bytes_per_s) / TERA, color="0.55", lw=1, ls="-.")
            ax.annotate(f"{level.name} {level.bytes_per_s / TERA:.1f} TB/s", (lo * 2, lo * 2 * level.bytes_per_s / TERA),
                        fontsize=7, color="0.4", rotation=0)
    labels = []
    for k in sorted(kernels, key=lambda k: k.intensity):
        xi = max(k.intensity, lo)
        yi = primary.attainable(xi, k.dtype) / TERA
        color = bound_colors(roofline_bound(k, primary))[0]
        ax.plot(xi, yi, "o", color=color, ms=7, mec="white", mew=0.8, zorder=3)
        labels.append((xi, yi, f"{k.name} (I={k.intensity:,.1f})"))
    ax.plot([], [], "o", color=MEMORY_RED, label="memory-bound kernel")
    ax.plot([], [], "o", color=COMPUTE_BLUE, label="compute-bound kernel")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of memory traffic)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(title or f"Roofline: {primary.name} (memory-bound left of the ridge, compute-bound right)")
    ax.grid(True, which="both", alpha=0.25)
    ax.set_xlim(lo, hi)
    ax.set_ylim(top=max(m.peak_flops for m in machines) / TERA * 4)  # room for labels above the flat roof
    ax.legend(loc="upper left", fontsize=7.5, framealpha=0.9)
    fig.tight_layout()
    place_labels(ax, labels)
    return finish_figure(fig, path)
