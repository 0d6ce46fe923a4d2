"""Figures: the roofline with kernels placed (seed 000 section 3.1) and the layer bar chart (seed
003). matplotlib is imported inside each function so that the CLI starts fast.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from roofline.kernels import Kernel, decode_step_kernel, flash_attention_kernel, layernorm_kernel, matmul_kernel, naive_attention_kernel
from roofline.machines import Machine, get_machine

MEMORY_RED = "#d62728"
COMPUTE_BLUE = "#1f77b4"
LAUNCH_GREY = "#9e9e9e"


def seed_kernels() -> list[Kernel]:
    """The seven kernels of the seed's H100 figure (seed 000, section 1 and exercise 5)."""
    return [
        matmul_kernel(8192, 4096, 4096, name="prefill GEMM 8192x4096x4096"),
        flash_attention_kernel(4096, 128),
        naive_attention_kernel(4096, 128),
        matmul_kernel(64, 4096, 4096, name="decode matmul B=64"),
        decode_step_kernel(7e9, 256),
        decode_step_kernel(7e9, 1),
        layernorm_kernel(4096, 4096),
    ]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # keep text as text in SVG: selectable, searchable
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path):
    fig.savefig(path, dpi=150, bbox_inches="tight", facecolor="white")


def plot_roofline(machine, kernels: Sequence[Kernel], path: str, title: str | None = None, ceilings: bool = True) -> None:
    """Write a log-log roofline of one machine (or several: a list) with each kernel placed at
    (intensity, attainable on the first machine). The ridge is marked; with ``ceilings`` the other
    dtypes' peaks and any cache levels with a known bandwidth are drawn as extra roofs."""
    plt = _pyplot()
    machines: list[Machine] = [get_machine(m) for m in (machine if isinstance(machine, (list, tuple)) else [machine])]
    primary = machines[0]
    intensities = [k.intensity for k in kernels if k.intensity > 0]
    lo = min([0.1, *(i / 3 for i in intensities)])
    hi = max([1e4, *(m.ridge_point * 10 for m in machines), *(i * 3 for i in intensities)])
    x = np.logspace(np.log10(lo), np.log10(hi), 600)

    fig, ax = plt.subplots(figsize=(9, 5.6))
    for i, m in enumerate(machines):
        color = "black" if i == 0 else f"C{(i + 2) % 10}"
        roof = m.attainable(x) / 1e12
        ax.loglog(x, roof, color=color, lw=2.2 if i == 0 else 1.6,
                  label=f"{m.name}: {m.peak_flops / 1e12:,.0f} TFLOP/s {m.default_dtype}, {m.bandwidth / 1e12:.2f} TB/s")
        ax.axvline(m.ridge_point, color=color, ls="--", lw=0.9, alpha=0.6)
        ax.annotate(f"ridge {m.ridge_point:,.0f} FLOP/B", (m.ridge_point, lo * m.bandwidth / 1e12), xytext=(-3 - 11 * i, 6),
                    textcoords="offset points", fontsize=8, color=color, rotation=90, ha="right", va="bottom")
    if ceilings:
        for dtype, peak in primary.peaks:
            if dtype != primary.default_dtype and peak < primary.peak_flops and dtype in ("fp32", "tf32"):
                flat = x >= peak / primary.bandwidth  # only the flat part: the slope is shared
                ax.loglog(x[flat], np.full(flat.sum(), peak / 1e12), color="0.55", lw=1, ls=":")
                ax.annotate(f"{dtype} {peak / 1e12:,.0f} TFLOP/s (no tensor cores)" if dtype == "fp32" else f"{dtype} {peak / 1e12:,.0f} TFLOP/s",
                            (peak / primary.bandwidth, peak / 1e12), fontsize=7, color="0.4",
                            xytext=(4, -3), textcoords="offset points", ha="left", va="top")
        for level in primary.levels:
            ax.loglog(x, np.minimum(primary.peak_flops, x * level.bytes_per_s) / 1e12, color="0.55", lw=1, ls="-.")
            ax.annotate(f"{level.name} {level.bytes_per_s / 1e12:.1f} TB/s", (lo * 2, lo * 2 * level.bytes_per_s / 1e12),
                        fontsize=7, color="0.4", rotation=0)
    placed: list[float] = []
    for k in sorted(kernels, key=lambda k: k.intensity):
        xi = max(k.intensity, lo)
        yi = primary.attainable(xi, k.dtype) / 1e12
        side = "memory" if k.intensity < primary.ridge(k.dtype) else "compute"
        color = MEMORY_RED if side == "memory" else COMPUTE_BLUE
        ax.plot(xi, yi, "o", color=color, ms=7, mec="white", mew=0.8, zorder=3)
        # neighbours closer than a factor 1.6 in intensity get stacked labels
        crowd = sum(1 for p in placed if abs(np.log10(xi / p)) < 0.2)
        placed.append(xi)
        on_flat = side == "compute"
        dx, ha = (-8, "right") if on_flat else (9, "left")
        dy = 6 + 12 * crowd if on_flat else -2 - 12 * crowd
        ax.annotate(f"{k.name} (I={k.intensity:,.1f})", (xi, yi), textcoords="offset points", xytext=(dx, dy),
                    fontsize=7.5, ha=ha, va="top" if dy < 0 else "bottom")
    ax.plot([], [], "o", color=MEMORY_RED, label="memory-bound kernel")
    ax.plot([], [], "o", color=COMPUTE_BLUE, label="compute-bound kernel")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of memory traffic)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(title or f"Roofline: {primary.name} (memory-bound left of the ridge, compute-bound right)")
    ax.grid(True, which="both", alpha=0.25)
    ax.set_xlim(lo, hi)
    ax.set_ylim(top=max(m.peak_flops for m in machines) / 1e12 * 4)  # room for labels above the flat roof
    ax.legend(loc="upper left", fontsize=7.5, framealpha=0.9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_layer(report, path: str, title: str | None = None) -> None:
    """Per-op predicted time of one block as horizontal bars: red memory-bound, blue
    compute-bound, the launch overhead as a grey tail; the seed's readouts in the title."""
    plt = _pyplot()
    pred = getattr(report, "prediction", report)
    ops = list(pred.ops)
    names = [op.name for op in ops]
    body = np.array([(op.time_s - op.launch_s) * 1e6 for op in ops])
    launch = np.array([op.launch_s * 1e6 for op in ops])
    colors = [MEMORY_RED if op.bound == "memory" else COMPUTE_BLUE for op in ops]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(ops) + 1.9))
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
    sub = (f"total {pred.total_s * 1e6:,.0f} us = {pred.total_s / pred.flops_only_s:.2f}x FLOPs-only, "
           f"{pred.total_s / pred.bytes_only_s:.2f}x bytes-only; {pred.memory_bound_ops} of {len(ops)} ops memory-bound "
           f"({pred.memory_bound_share:.0%} of time); launch {pred.launch_share:.1%}")
    ax.set_title(f"{head}\n{sub}", fontsize=9.5)
    ax.grid(True, axis="x", alpha=0.25)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
