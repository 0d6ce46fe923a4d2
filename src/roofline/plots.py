"""Figures: the roofline with kernels placed (the roofline chapter, section 3.1) and the layer bar
chart (the 'Predicting a Kernel's Time' plate). matplotlib is imported inside each function so that the CLI starts fast.

Each plot_* function returns its matplotlib Figure and writes it only when given a path. Figures
are made outside pyplot (no global backend switched, no figure registry): they draw headless, and
in Jupyter the returned figure shows itself.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from roofline.cost import roofline_bound
from roofline.kernels import Kernel, decode_step_kernel, flash_attention_kernel, layernorm_kernel, matmul_kernel, naive_attention_kernel
from roofline.machines import Machine, get_machine
from roofline.palette import BOUND_COLORS, COMPUTE_BLUE, LAUNCH_GREY, LINK_GREEN, MEMORY_RED, PART_COLORS, VECTOR_OPS_ORANGE
from roofline.units import GIGA, MIB, MS, TERA, US

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


@functools.lru_cache(maxsize=1)
def _figure_class():
    from matplotlib.figure import Figure

    class RooflineFigure(Figure):
        """A Figure that shows itself in Jupyter as a PNG whether or not pyplot was imported."""

        def _repr_png_(self) -> bytes:
            import io

            buf = io.BytesIO()
            self.savefig(buf, format="png", bbox_inches="tight", facecolor="white")
            return buf.getvalue()

    return RooflineFigure


def _figure(figsize, nrows: int = 1, ncols: int = 1, **subplot_kw):
    """A figure on its own Agg canvas and its axes, as pyplot.subplots would give them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = _figure_class()(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **subplot_kw)


def _save(fig, path):
    """Write the figure atomically (files.write_atomically), in the format its suffix names; SVG
    keeps its text as text (selectable, searchable)."""
    import matplotlib

    from roofline.files import write_atomically

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        write_atomically(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight", facecolor="white"))


def _done(fig, path):
    if path is not None:
        _save(fig, path)
    return fig


# Where a point's label may go, in points from it, nearest first: beside, above, below and on the
# four diagonals, then stepped up and down on either side with a leader line back to the point.
_LABEL_SPOTS = ([(7, 0, "left", "center"), (-7, 0, "right", "center"), (0, 7, "center", "bottom"), (0, -7, "center", "top"),
                 (7, -5, "left", "top"), (-7, 5, "right", "bottom"), (7, 5, "left", "bottom"), (-7, -5, "right", "top")]
                + [(side * 9, sign * (5 + 11 * k), "left" if side > 0 else "right", "center")
                   for k in range(1, 8) for side in (1, -1) for sign in (1, -1)])
_LEADER_FROM = {"left": (0, 0.5), "right": (1, 0.5), "center": (0.5, 0.5)}  # where on the text a leader starts


def _obstacles(ax, renderer):
    """Display-space points a label should not cover: every line, segment and marker in the axes
    (resampled every few pixels), and the corners and edges of the texts and legend already drawn."""
    pts = []
    ring = np.array([(0, 0), *((np.cos(a), np.sin(a)) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False))])
    for ln in ax.get_lines():
        if ln.get_marker() not in (None, "", "None", " ") and len(ln.get_xydata()):
            radius = ln.get_markersize() / 2 * ax.figure.dpi / 72
            centres = ln.get_transform().transform(ln.get_xydata())
            pts += [c + radius * ring for c in centres]
    segments = [ln.get_transform().transform(ln.get_xydata()) for ln in ax.get_lines()
                if len(ln.get_xydata()) and ln.get_linestyle() not in ("None", "", " ")]
    for coll in ax.collections:
        if hasattr(coll, "get_segments"):  # error bars and other line collections
            segments += [coll.get_transform().transform(np.asarray(seg)) for seg in coll.get_segments() if len(seg)]
    for xy in segments:
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
            n = int(min(max(abs(x1 - x0), abs(y1 - y0)) / 3, 2000)) + 1
            pts.append(np.column_stack([np.linspace(x0, x1, n), np.linspace(y0, y1, n)]))
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
    if ax.get_legend() is not None:
        boxes.append(ax.get_legend().get_window_extent(renderer))
    for bb in boxes:
        gx, gy = np.meshgrid(np.linspace(bb.x0, bb.x1, max(2, int(bb.width / 3))), np.linspace(bb.y0, bb.y1, max(2, int(bb.height / 3))))
        pts.append(np.column_stack([gx.ravel(), gy.ravel()]))
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def _place_labels(ax, labels, fontsize: float = 7.5, **text_kw):
    """Annotate each (x, y, text) at the first of _LABEL_SPOTS where its text (and leader) covers
    no line, marker, other label or the legend and stays inside the axes, else where it covers
    least. Call it last, once the limits and the layout are set: it measures in display space."""
    renderer = ax.figure.canvas.get_renderer()
    avoid = _obstacles(ax, renderer)
    frame = ax.get_window_extent(renderer)
    px_per_pt = ax.figure.dpi / 72
    placed = []

    def covered(bb, pts):
        return (np.abs(pts[:, 0] - (bb.x0 + bb.x1) / 2) < bb.width / 2) & (np.abs(pts[:, 1] - (bb.y0 + bb.y1) / 2) < bb.height / 2)

    for x, y, text in labels:
        point = ax.transData.transform((x, y))
        best = None
        for dx, dy, ha, va in _LABEL_SPOTS:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=fontsize,
                              **text_kw)
            bb = ann.get_window_extent(renderer).padded(1.5)
            ann.remove()
            leader = np.linspace(point, point + np.array([dx, dy]) * px_per_pt, 12)[3:] if abs(dy) > 7 else np.zeros((0, 2))
            cost = (int(covered(bb, avoid).sum()) + 50 * sum(bb.overlaps(o) for o in placed)
                    + 10 * sum(int(covered(o, leader).sum()) for o in placed)
                    + 1000 * (not (frame.x0 <= bb.x0 and bb.x1 <= frame.x1 and frame.y0 <= bb.y0 and bb.y1 <= frame.y1)))
            if best is None or cost < best[0]:
                best = (cost, dx, dy, ha, va, bb, leader)
            if cost == 0:
                break
        _, dx, dy, ha, va, bb, leader = best
        line = {"arrowprops": dict(arrowstyle="-", color="0.6", lw=0.6, shrinkA=0, shrinkB=3, relpos=_LEADER_FROM[ha])} if len(leader) else {}
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=fontsize, **line,
                    **text_kw)
        placed.append(bb)
        avoid = np.concatenate([avoid, leader])


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

    fig, ax = _figure(figsize=(9, 5.6))
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
        color = _bound_colors(roofline_bound(k, primary))[0]
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
    _place_labels(ax, labels)
    return _done(fig, path)


def plot_layer(report, path: str | None = None, title: str | None = None) -> Figure:
    """Per-op predicted time of one block as horizontal bars: red memory-bound, blue
    compute-bound, the launch overhead as a grey tail; the seed's readouts in the title."""
    pred = getattr(report, "prediction", report)
    ops = list(pred.ops)
    names = [op.name for op in ops]
    body = np.array([(op.time_s - op.launch_s) / US for op in ops])
    launch = np.array([op.launch_s / US for op in ops])
    colors = [MEMORY_RED if op.bound == "memory" else COMPUTE_BLUE for op in ops]
    fig, ax = _figure(figsize=(9, 0.42 * len(ops) + 1.9))
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
    return _done(fig, path)


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
    fig, ax = _figure(figsize=(9.5, 6))
    ax.loglog(x, np.minimum(peak, x * machine.bandwidth) / scale, color="black", lw=2.2,
              label=f"{machine.name}: {peak / scale:,.3g} {unit} {report.dtype}, {machine.bandwidth / GIGA:,.1f} GB/s main memory")
    roofs: dict[float, list] = {}  # levels measured at the same bandwidth share one roof and one label
    for level in sorted(machine.levels, key=lambda l: l.size_bytes):
        roofs.setdefault(level.bytes_per_s, []).append(level)
    roof_labels = []  # each at its roof's knee
    for bw, levels in roofs.items():
        ax.loglog(x, np.minimum(peak, x * bw) / scale, color="0.55", lw=1, ls="-.")
        names = ", ".join(f"{lvl.name} ({lvl.size_bytes / MIB:,.3g} MiB)" for lvl in levels)
        roof_labels.append((max(peak / bw, lo), peak / scale, f"{names} {bw / GIGA:,.0f} GB/s"))
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
    ax.set_title(title or f"roofline check: {report.model} ({report.config}), T={report.tokens}, {report.dtype}\n"
                          f"on {report.device_name}, {report.threads} thread(s)", fontsize=9.5)
    ax.grid(True, which="both", alpha=0.25)
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom=min([lo * machine.bandwidth / scale, *(op.flops / op.measured_s / scale / 3 for op in ops)]),
                top=max(peak, lo * fastest) / scale * 4)
    ax.legend(loc="upper left", fontsize=7.5, framealpha=0.9)
    fig.tight_layout()
    _place_labels(ax, roof_labels, fontsize=7, color="0.4")
    _place_labels(ax, labels)
    return _done(fig, path)


# ---------------------------------------------------------------------------------------------
# Planning figures: decode versus batch, sweeps, memory per GPU (docs/planning.md)
# ---------------------------------------------------------------------------------------------

SERIES_COLORS = ("black", "C2", "C4", "C1", "C5", "C6", "C8", "C9")  # machines; red and blue mean the bound


def _bound_colors(bounds):
    return [BOUND_COLORS.get(b, COMPUTE_BLUE) for b in np.atleast_1d(bounds)]


def _bound_legend(ax, bounds, loc="lower right"):
    from matplotlib.lines import Line2D

    seen = sorted(set(np.atleast_1d(bounds)), key=["memory", "compute", "link"].index)
    handles = [Line2D([], [], marker="o", ls="", color=BOUND_COLORS[b], label=f"{b}-bound") for b in seen]
    return handles


def _category_times(pred):
    """Seconds per step by op group (arrays over the sizes): matmuls, attention, collectives,
    everything else, and the launch overhead apart."""
    groups = {"matmuls (weights)": 0.0, "attention (KV cache)": 0.0, "collectives (link)": 0.0,
              "norms, activations, embedding": 0.0, "launch overhead": 0.0}
    for op in pred.ops:
        body = np.asarray(op.time_s) - np.asarray(op.launch_s)
        key = {"matmul": "matmuls (weights)", "attention": "attention (KV cache)", "softmax": "attention (KV cache)",
               "collective": "collectives (link)"}.get(op.category, "norms, activations, embedding")
        groups[key] = groups[key] + body
        groups["launch overhead"] = groups["launch overhead"] + np.asarray(op.launch_s)
    return {k: v for k, v in groups.items() if np.any(np.asarray(v) > 0)}


def plot_decode(plan, path: str | None = None, title: str | None = None) -> Figure:
    """Decode versus batch: tokens/s (left) and the step's time by op group (right), with the batch
    where the matmuls turn compute-bound and the region where weights + KV cache no longer fit."""
    from roofline.plan.render import _model_name

    curve = plan.curve
    s = plan.step
    b = np.asarray(curve.batch)
    tps = np.asarray(curve.tokens_per_s)
    fig, (ax, ax2) = _figure((13, 5.2), 1, 2)
    ax.plot(b, tps, color="black", lw=1.6, zorder=2)
    ax.scatter(plan.batches, np.asarray(s.tokens_per_s), c=_bound_colors(s.bound), s=36, zorder=3, edgecolor="white", lw=0.6)
    for bi, t in zip(plan.batches, np.asarray(s.tokens_per_s)):
        ax.annotate(f"{t:,.0f}", (bi, t), xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7.5)
    groups = _category_times(curve.prediction)
    colors = {"matmuls (weights)": COMPUTE_BLUE, "attention (KV cache)": MEMORY_RED, "collectives (link)": LINK_GREEN,
              "norms, activations, embedding": VECTOR_OPS_ORANGE, "launch overhead": LAUNCH_GREY}
    ax2.plot(b, np.asarray(curve.time_s) / MS, color="black", lw=2.2, label="whole step")
    for name, v in groups.items():
        ax2.plot(b, np.broadcast_to(v, b.shape) / MS, color=colors[name], lw=1.5, label=name)
    ax2.set_yscale("log")
    ax2.set_ylim(np.asarray(curve.time_s).min() / MS / 100, np.asarray(curve.time_s).max() / MS * 2)
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlim(1, max(b.max(), 2))  # one batch: a range of its own, not a singular axis
        a.grid(True, which="both", alpha=0.25)
        a.set_xlabel("batch (sequences decoding together)")
        cb, mb = plan.compute_bound_batch, plan.max_batch_in_memory
        if cb and cb <= b.max():
            a.axvline(cb, color=COMPUTE_BLUE, ls="--", lw=1.1)
        if mb is not None and mb < b.max():
            a.axvspan(max(mb, 1), b.max(), color="0.85", alpha=0.6, lw=0, zorder=0)
    ymax = tps.max() * 1.25
    ax.set_ylim(0, ymax)
    cb, mb = plan.compute_bound_batch, plan.max_batch_in_memory
    if cb and cb <= b.max():
        ax.annotate(f"matmuls compute-bound\nfrom batch {cb:,}", (cb, ymax * 0.05), xytext=(4, 0), textcoords="offset points",
                    fontsize=8, color=COMPUTE_BLUE)
    if mb is not None and mb < b.max():
        cap = plan.memory.capacity_bytes / GIGA
        ax.annotate(f"weights + KV cache\nexceed {cap:,.0f} GB\nbeyond batch {mb:,}", (max(mb, 1), ymax * 0.45), xytext=(4, 0),
                    textcoords="offset points", fontsize=8, color="0.3", va="top")
    ax.set_ylabel("decode throughput (tokens/s, all sequences)")
    handles = _bound_legend(ax, s.bound)
    ax.legend(handles=handles, title="the step is", loc="upper left", fontsize=8, title_fontsize=8)
    ax2.set_ylabel("time of one decode step, and of its parts (ms)")
    ax2.legend(loc="upper left", fontsize=8)
    head = title or (f"{_model_name(s.model)} decode on {s.machine_spec.name}: context {int(s.context):,}, "
                     f"{s.precision.label()}" + (f", tensor parallel {s.tensor_parallel}" if s.tensor_parallel > 1 else ""))
    cm = s.cost_model
    sub = (f"e_c {cm.compute_efficiency:g}, e_m {cm.memory_efficiency:g}, launch {cm.launch_overhead_s / US:g} us"
           f"{' (CUDA graph)' if cm.cuda_graph else ' per kernel'}; red: memory-bound step, blue: compute-bound; "
           f"grey: does not fit")
    fig.suptitle(f"{head}\n{sub}", fontsize=10)
    fig.tight_layout()
    return _done(fig, path)


def plot_sweep(result, path: str | None = None, title: str | None = None) -> Figure:
    """A sweep's figure. tokens: time to first token and memory-bound share versus prompt tokens;
    batch: decode throughput and step time versus batch; context: step time and the KV-cache to
    weight bytes ratio versus context; machines: one bar per machine. Machines side by side, each
    point red (memory-bound) or blue (compute-bound)."""
    from roofline.plan.render import _model_name

    if result.over == "machines":
        return _plot_machines(result, path, title)
    fig, (ax, ax2) = _figure((13, 5), 1, 2)
    time_label = "time to first token (ms)" if result.phase == "prefill" else "decode step (ms)"
    right = {"tokens": ("memory_bound_share", "share of time in memory-bound ops"),
             "batch": ("tokens_per_s", "throughput (tokens/s)"),
             "context": (None, "KV-cache bytes / weight bytes read per step")}[result.over]
    for i, srs in enumerate(result.series):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        x = srs.values
        y_left = srs.time_s / MS
        if result.over == "batch":
            y_left, y_right = srs.tokens_per_s, srs.time_s / MS
        elif result.over == "context":
            y_right = srs.kv_bytes / srs.weight_bytes
        else:
            y_right = srs.memory_bound_share * 100
        ax.plot(x, y_left, color=color, lw=1.5, label=srs.machine_name)
        ax.scatter(x, y_left, c=_bound_colors(srs.bound), s=22, zorder=3, edgecolor="white", lw=0.5)
        if result.over == "context":  # a property of the model, the same on every machine: drawn once
            if i == 0:
                ax2.plot(x, y_right, color="black", lw=1.5, marker="o", ms=3, label="every machine")
            continue
        ax2.plot(x, y_right, color=color, lw=1.5, marker="o", ms=3, label=srs.machine_name)
    if result.over == "batch":
        ax.set_ylabel("decode throughput (tokens/s)")
        ax2.set_ylabel("decode step (ms)")
    else:
        ax.set_ylabel(time_label)
        ax2.set_ylabel(right[1] + (" (%)" if result.over == "tokens" else ""))
    if result.over == "context":
        ax2.axhline(1.0, color="0.4", ls="--", lw=1)
        ax2.annotate("KV-cache reads = weight reads", (result.series[0].values[0], 1.0), xytext=(2, 4), textcoords="offset points",
                     fontsize=8, color="0.3")
        ax2.set_yscale("log")
    if result.over == "tokens":
        ax2.set_ylim(-3, 103)
    xlabel = {"tokens": "prompt tokens per sequence (prefill)", "batch": "batch (sequences)",
              "context": "context (tokens in the KV cache)"}[result.over]
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.grid(True, which="both", alpha=0.25)
        a.set_xlabel(xlabel)
    if result.over == "tokens":
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    bounds = np.concatenate([s.bound for s in result.series])
    leg = ax.legend(loc="upper left", fontsize=8)
    ax.add_artist(leg)
    ax.legend(handles=_bound_legend(ax, bounds), loc="lower right", fontsize=8)
    ax2.legend(loc="lower right" if result.over != "tokens" else "upper right", fontsize=8)
    fixed = ", ".join(f"{k} {v:,}" for k, v in result.fixed)
    head = title or f"{_model_name(result.model)} {result.phase} sweep over {result.over} ({fixed}, {result.precision.label()})"
    fig.suptitle(head + "\nred: memory-bound, blue: compute-bound", fontsize=10)
    fig.tight_layout()
    return _done(fig, path)


def _plot_machines(result, path, title):
    from roofline.plan.render import _model_name

    names = [s.machine_name for s in result.series]
    t = np.array([float(s.time_s[0]) / MS for s in result.series])
    bounds = [str(s.bound[0]) for s in result.series]
    fig, ax = _figure(figsize=(9, 0.5 * len(names) + 1.8))
    y = np.arange(len(names))[::-1]
    ax.barh(y, t, color=_bound_colors(bounds), height=0.65)
    for yi, ti, s in zip(y, t, result.series):
        ax.annotate(f"{ti:,.2f} ms, {float(s.tokens_per_s[0]):,.0f} tokens/s", (ti, yi), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_yticks(y, names, fontsize=9)
    ax.set_xlim(0, t.max() * 1.35)
    ax.set_xlabel("time to first token (ms)" if result.phase == "prefill" else "decode step (ms)")
    ax.grid(True, axis="x", alpha=0.25)
    ax.legend(handles=_bound_legend(ax, bounds), loc="upper right", fontsize=8)
    fixed = ", ".join(f"{k} {v:,}" for k, v in result.fixed)
    ax.set_title(title or f"{_model_name(result.model)} {result.phase} ({fixed}, {result.precision.label()}) on each machine",
                 fontsize=10)
    fig.tight_layout()
    return _done(fig, path)


def _memory_bars(ax, plans):
    """Stacked horizontal bars of memory per GPU, one per (label, MemoryPlan), and the capacity."""
    labels = [label for label, _ in plans]
    y = np.arange(len(plans))[::-1]
    seen = set()
    for yi, (_, plan) in zip(y, plans):
        left = 0.0
        for part in plan.parts:
            gb = part.bytes / GIGA
            if gb <= 0:
                continue
            label = part.name.replace("_", " ") if part.name not in seen else None
            seen.add(part.name)
            ax.barh(yi, gb, left=left, color=PART_COLORS.get(part.name, "0.6"), height=0.62, label=label)
            left += gb
        verdict = "" if plan.fits is None else ("fits" if plan.fits else "does not fit")
        ax.annotate(f"{left:,.1f} GB {verdict}", (left, yi), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=8, color="black" if plan.fits is not False else MEMORY_RED)
    cap = plans[0][1].capacity_bytes
    top = max(p.total_bytes for _, p in plans) / GIGA
    if cap:
        ax.axvline(cap / GIGA, color="black", ls="--", lw=1.2)
        ax.annotate(f"{plans[0][1].machine_name or plans[0][1].machine}: {cap / GIGA:,.0f} GB", (cap / GIGA, y.max() + 0.45),
                    xytext=(3, 0), textcoords="offset points", fontsize=8)
        top = max(top, cap / GIGA)
    ax.set_xlim(0, top * 1.3)
    ax.set_ylim(-0.6, len(plans) - 0.1)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlabel("memory per GPU (GB)")
    ax.grid(True, axis="x", alpha=0.25)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13 - 0.6 / (len(plans) + 2)), ncol=5, fontsize=8, frameon=False)


def plot_memory(plans, path: str | None = None, title: str | None = None) -> Figure:
    """Memory per GPU as stacked horizontal bars, one per (label, MemoryPlan), against the GPU's
    capacity (a dashed line); totals over capacity are marked in red."""
    fig, ax = _figure(figsize=(10, 0.55 * len(plans) + 2.0))
    _memory_bars(ax, plans)
    ax.set_title(title or "Memory per GPU", fontsize=10)
    fig.tight_layout()
    return _done(fig, path)


def plot_train(plan, memory_options, path: str | None = None, title: str | None = None) -> Figure:
    """A training plan: memory per GPU under each option (left) and one optimizer step's compute
    against its collectives (right: blue compute at the plan's utilisation, green link-bound)."""
    from roofline.plan.render import _model_name

    fig, (ax, ax2) = _figure((14, 0.5 * len(memory_options) + 2.6), 1, 2, gridspec_kw={"width_ratios": [1.35, 1]})
    _memory_bars(ax, memory_options)
    ax.set_title("memory per GPU (weights, gradients, Adam state, activations)", fontsize=9.5)
    names = ["compute (fwd + bwd)"] + ([op.name for op in plan.step.ops] if plan.step else [])
    secs = [plan.step_compute_s] + ([float(op.time_s) for op in plan.step.ops] if plan.step else [])
    colors = [COMPUTE_BLUE] + ([LINK_GREEN if op.bound == "link" else MEMORY_RED for op in plan.step.ops] if plan.step else [])
    y = np.arange(len(names))[::-1]
    ax2.barh(y, secs, color=colors, height=0.6)
    for yi, sec in zip(y, secs):
        ax2.annotate(f"{sec:,.3f} s ({sec / plan.step_compute_s:.0%})", (sec, yi), xytext=(4, 0), textcoords="offset points",
                     va="center", fontsize=8)
    ax2.set_yticks(y, names, fontsize=9)
    ax2.set_xlim(0, max(secs) * 1.45)
    ax2.set_xlabel("seconds per optimizer step, per GPU")
    ax2.grid(True, axis="x", alpha=0.25)
    ax2.set_title(f"one step of {plan.layout.global_batch_tokens:,.0f} tokens: compute at {plan.mfu:.0%} MFU vs collectives",
                  fontsize=9.5)
    from roofline.plan.render import count_text

    head = title or (f"{_model_name(plan.model)}: {count_text(plan.tokens)} tokens on {plan.gpus:,} x {plan.memory.machine_name}, "
                     f"{plan.days:,.1f} days at {plan.mfu:.0%} MFU ({plan.hfu:.0%} HFU), {plan.gpu_hours:,.0f} GPU-hours"
                     + (f", ${plan.cost:,.0f}" if plan.cost is not None else ""))
    fig.suptitle(f"{head}\n{plan.layout.label()}", fontsize=10)
    fig.tight_layout()
    return _done(fig, path)


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
    fig, ax = _figure(figsize=(9, 5.6))
    styles = ("-", "--", "-.", ":")
    for i, dtype in enumerate(dtypes):
        ax.loglog(x, machine.attainable(x, dtype) / TERA, color="black", lw=2 if i == 0 else 1.4, ls=styles[i % 4],
                  label=f"{machine.name} {dtype}: {format_si(machine.peak(dtype), 'FLOP/s')}, "
                        f"{format_si(machine.bandwidth, 'B/s')}")
        ax.axvline(machine.ridge(dtype), color="black", ls="--", lw=0.8, alpha=0.5)
    floor = None
    for op in ops:
        achieved = op.flops * op.calls / op.measured_s / TERA
        roof = machine.attainable(op.intensity, peak_dtype(op.dtype, machine)) / TERA
        color = MEMORY_RED if op.bound == "memory" else COMPUTE_BLUE
        ax.plot([op.intensity, op.intensity], [achieved, roof], color="0.75", lw=0.8, zorder=1)
        ax.plot(op.intensity, achieved, "o", color=color, ms=6, mec="white", mew=0.6, zorder=3)
        floor = achieved if floor is None else min(floor, achieved)
    for op in sorted(ops, key=lambda o: -o.lost_s)[:label]:
        achieved = op.flops * op.calls / op.measured_s / TERA
        tag = f" {op.dtype}" if len(dtypes) > 1 else ""
        ax.annotate(f"{op.name.removeprefix('aten::')[:28]} {op.shapes[:24]}{tag} ({op.speed_of_light:.1%})",
                    (op.intensity, achieved), textcoords="offset points", xytext=(6, -3), fontsize=7, va="top")
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
    return _done(fig, path)


def plot_serving(sweep, path: str | None = None, title: str | None = None) -> Figure:
    """The throughput-latency picture of a serving sweep: output tokens/s per GPU against tokens/s
    per user (left: each point a concurrency or a rate, labelled; the SLO's points filled), and
    TTFT p50/p99 and TPOT p50 against the load (right)."""
    from roofline.serving.search import meets_slo

    rows = sweep.rows()
    x = np.array([r["per_user_tokens_per_s"] or 0.0 for r in rows])
    y = np.array([r["output_tokens_per_s_per_gpu"] for r in rows])
    loads = np.array([r[sweep.over] for r in rows], dtype=float)
    order = np.argsort(loads)
    fig, (ax, ax2) = _figure((13, 5.2), 1, 2)
    ax.plot(x[order], y[order], color="black", lw=1.4, zorder=2)
    ok = [meets_slo(r, sweep.slo) for r in sweep.results]
    for xi, yi, load, good in zip(x, y, loads, ok):
        ax.scatter([xi], [yi], s=40, zorder=3, color=COMPUTE_BLUE if good else "white", edgecolor=COMPUTE_BLUE, lw=1.2)
        label = f"{load:,.0f}" if sweep.over == "concurrency" else f"{load:,.3g}/s"
        ax.annotate(label, (xi, yi), xytext=(5, 4), textcoords="offset points", fontsize=7.5)
    ax.set_xlabel("tokens/s per user while streaming (1 / median TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.grid(True, alpha=0.25)
    ax.set_ylim(0, y.max() * 1.15)
    ax.set_xlim(0, max(x.max(), 1e-9) * 1.15)
    what = "users (closed loop)" if sweep.over == "concurrency" else "requests/s offered (Poisson)"
    if sweep.slo:
        ax.scatter([], [], color=COMPUTE_BLUE, label="meets the SLO")
        ax.scatter([], [], color="white", edgecolor=COMPUTE_BLUE, label="misses it")
        ax.legend(loc="upper right", fontsize=8, title=f"points: {what}", title_fontsize=8)
    else:
        ax.set_title(f"points labelled by {what}", fontsize=9)
    ttft50 = np.array([r["ttft_p50_s"] for r in rows], dtype=float)[order] / MS
    ttft99 = np.array([r["ttft_p99_s"] for r in rows], dtype=float)[order] / MS
    tpot50 = np.array([np.nan if r["tpot_p50_s"] is None else r["tpot_p50_s"] for r in rows], dtype=float)[order] / MS
    ax2.plot(loads[order], ttft50, color=MEMORY_RED, lw=1.6, marker="o", ms=3, label="TTFT p50")
    ax2.plot(loads[order], ttft99, color=MEMORY_RED, lw=1.0, ls="--", label="TTFT p99")
    ax2.plot(loads[order], tpot50, color=COMPUTE_BLUE, lw=1.6, marker="o", ms=3, label="TPOT p50")
    if sweep.slo:
        p = sweep.slo["percentile"]
        if sweep.slo.get("ttft_s"):
            ax2.axhline(sweep.slo["ttft_s"] / MS, color=MEMORY_RED, lw=0.8, ls=":", label=f"TTFT p{p:g} target")
        if sweep.slo.get("tpot_s"):
            ax2.axhline(sweep.slo["tpot_s"] / MS, color=COMPUTE_BLUE, lw=0.8, ls=":", label=f"TPOT p{p:g} target")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel(what)
    ax2.set_ylabel("latency (ms)")
    ax2.grid(True, which="both", alpha=0.25)
    ax2.legend(loc="upper left", fontsize=8)
    first = sweep.results[0]
    head = title or (f"{first.description.split(';')[0]}: serving {first.input_tokens / first.requests:,.0f} in / "
                     f"{first.output_tokens / first.requests:,.0f} out tokens")
    fig.suptitle(head + "\n" + f"simulated continuous batching: at most {first.engine.max_seqs:,} sequences, "
                 f"{first.engine.max_tokens:,} tokens per step; {first.description.split(';', 1)[-1].strip()}", fontsize=9.5)
    return _done(fig, path)
