"""Planning figures (docs/planning.md, docs/serving.md): decode versus batch, sweeps, memory per
GPU, training memory options, serving throughput against latency.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from roofline.palette import (BOUND_COLORS, COMPUTE_BLUE, LAUNCH_GREY, LINK_GREEN, MEMORY_RED, PART_COLORS,
                              VECTOR_OPS_ORANGE)
from roofline.plots.figure import finish_figure, new_figure
from roofline.units import GIGA, MS, US, format_si

if TYPE_CHECKING:
    from matplotlib.figure import Figure


SERIES_COLORS = ("black", "C2", "C4", "C1", "C5", "C6", "C8", "C9")  # machines; red and blue mean the bound


def bound_colors(bounds):
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
    from roofline.plan.render import model_name

    curve = plan.curve
    s = plan.step
    b = np.asarray(curve.batch)
    tps = np.asarray(curve.tokens_per_s)
    fig, (ax, ax2) = new_figure((13, 5.2), 1, 2)
    ax.plot(b, tps, color="black", lw=1.6, zorder=2)
    ax.scatter(plan.batches, np.asarray(s.tokens_per_s), c=bound_colors(s.bound), s=36, zorder=3, edgecolor="white", lw=0.6)
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
        ax.annotate(f"weights + KV cache\nexceed {format_si(cap * GIGA, 'B')}\nbeyond batch {mb:,}", (max(mb, 1), ymax * 0.45), xytext=(4, 0),
                    textcoords="offset points", fontsize=8, color="0.3", va="top")
    ax.set_ylabel("decode throughput (tokens/s, all sequences)")
    handles = _bound_legend(ax, s.bound)
    ax.legend(handles=handles, title="the step is", loc="upper left", fontsize=8, title_fontsize=8)
    ax2.set_ylabel("time of one decode step, and of its parts (ms)")
    ax2.legend(loc="upper left", fontsize=8)
    head = title or (f"{model_name(s.model)} decode on {s.machine_spec.name}: context {int(s.context):,}, "
                     f"{s.precision.label(scales=False)}" + (f", tensor parallel {s.tensor_parallel}" if s.tensor_parallel > 1 else ""))
    cm = s.cost_model
    sub = (f"e_c {cm.compute_efficiency:g}, e_m {cm.memory_efficiency:g}, launch {cm.launch_overhead_s / US:g} us"
           f"{' (CUDA graph)' if cm.cuda_graph else ' per kernel'}; red: memory-bound step, blue: compute-bound; "
           f"grey: does not fit")
    fig.suptitle(f"{head}\n{sub}", fontsize=10)
    fig.tight_layout()
    return finish_figure(fig, path)


def plot_sweep(result, path: str | None = None, title: str | None = None) -> Figure:
    """A sweep's figure. tokens: time to first token and memory-bound share versus prompt tokens;
    batch: decode throughput and step time versus batch; context: step time and the KV-cache to
    weight bytes ratio versus context; machines: one bar per machine. Machines side by side, each
    point red (memory-bound) or blue (compute-bound)."""
    from roofline.plan.render import model_name

    if result.over == "machines":
        return _plot_machines(result, path, title)
    fig, (ax, ax2) = new_figure((13, 5), 1, 2)
    time_label = "time to first token (ms)" if result.phase == "prefill" else "decode step (ms)"
    right = {"tokens": ("memory_bound_share", "share of time in memory-bound ops"),
             "batch": ("tokens_per_s", "throughput (tokens/s)"),
             "context": (None, "KV-cache bytes / weight bytes read per step")}[result.over]
    unfit = False
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
        fits = np.ones(len(x), dtype=bool) if srs.fits is None else np.broadcast_to(np.asarray(srs.fits, dtype=bool), np.shape(x))
        colors = np.array(bound_colors(np.broadcast_to(srs.bound, np.shape(x))), dtype=object)
        ax.scatter(np.asarray(x)[fits], np.asarray(y_left)[fits], c=list(colors[fits]), s=22, zorder=3, edgecolor="white", lw=0.5)
        if not fits.all():  # more memory than one GPU has: hollow, as the table's 'no'
            ax.scatter(np.asarray(x)[~fits], np.asarray(y_left)[~fits], facecolors="white", edgecolors=list(colors[~fits]),
                       s=26, zorder=3, lw=1.2)
            unfit = True
        if result.over == "context":  # a property of the model, the same on every machine: drawn once
            if i == 0:
                ax2.plot(x, y_right, color="black", lw=1.5, marker="o", ms=3, label="every machine")
            continue
        ax2.plot(x, y_right, color=color, lw=1.5, marker="o", ms=3, label=srs.machine_name)
        if not fits.all():  # the same points hollow here as on the left
            ax2.scatter(np.asarray(x)[~fits], np.asarray(y_right)[~fits], facecolors="white", edgecolors=color, s=26,
                        zorder=3, lw=1.2)
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
    tp = f", tensor parallel {result.tensor_parallel}" if result.tensor_parallel > 1 else ""  # the table says it: so does the figure
    head = title or (f"{model_name(result.model)} {result.phase} sweep over {result.over} ({fixed}, {result.precision.label(scales=False)}"
                     f"{tp})")
    fig.suptitle(head + "\nred: memory-bound, blue: compute-bound" + ("; hollow: needs more memory than one GPU has"
                                                                      if unfit else ""), fontsize=10)
    fig.tight_layout()
    return finish_figure(fig, path)


def _plot_machines(result, path, title):
    from roofline.plan.render import model_name

    names = [s.machine_name for s in result.series]
    t = np.array([float(s.time_s[0]) / MS for s in result.series])
    bounds = [str(s.bound[0]) for s in result.series]
    fig, ax = new_figure(figsize=(9, 0.5 * len(names) + 1.8))
    y = np.arange(len(names))[::-1]
    ax.barh(y, t, color=bound_colors(bounds), height=0.65)
    for yi, ti, s in zip(y, t, result.series):
        ax.annotate(f"{ti:,.2f} ms, {float(s.tokens_per_s[0]):,.0f} tokens/s", (ti, yi), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_yticks(y, names, fontsize=9)
    ax.set_xlim(0, t.max() * 1.35)
    ax.set_xlabel("time to first token (ms)" if result.phase == "prefill" else "decode step (ms)")
    ax.grid(True, axis="x", alpha=0.25)
    ax.legend(handles=_bound_legend(ax, bounds), loc="upper right", fontsize=8)
    fixed = ", ".join(f"{k} {v:,}" for k, v in result.fixed)
    ax.set_title(title or f"{model_name(result.model)} {result.phase} ({fixed}, {result.precision.label(scales=False)}) on each machine",
                 fontsize=10)
    fig.tight_layout()
    return finish_figure(fig, path)


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
                    fontsize=8, color="black" if plan.fits is not False else MEMORY_RED, zorder=4,
                    bbox=dict(facecolor="white", edgecolor="none", pad=1.0, alpha=0.85))  # legible across the capacity line
    cap = plans[0][1].capacity_bytes
    top = max(p.total_bytes for _, p in plans) / GIGA
    if cap:
        ax.axvline(cap / GIGA, color="black", ls="--", lw=1.2)
        ax.annotate(f"{plans[0][1].machine_name or plans[0][1].machine}: {format_si(cap, 'B')}", (cap / GIGA, y.max() + 0.45),
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
    fig, ax = new_figure(figsize=(10, 0.55 * len(plans) + 2.0))
    _memory_bars(ax, plans)
    ax.set_title(title or "Memory per GPU", fontsize=10)
    fig.tight_layout()
    return finish_figure(fig, path)


def plot_train(plan, memory_options, path: str | None = None, title: str | None = None) -> Figure:
    """A training plan: memory per GPU under each option (left) and one optimizer step's compute
    against its collectives (right: blue compute at the plan's utilisation, green link-bound)."""
    from roofline.plan.render import model_name

    fig, (ax, ax2) = new_figure((14, 0.5 * len(memory_options) + 2.6), 1, 2, gridspec_kw={"width_ratios": [1.35, 1]})
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

    head = title or (f"{model_name(plan.model)}: {count_text(plan.tokens)} tokens on {plan.gpus:,} x {plan.memory.machine_name}, "
                     f"{plan.days:,.1f} days at {plan.mfu:.0%} MFU ({plan.hfu:.0%} HFU), {plan.gpu_hours:,.0f} GPU-hours"
                     + (f", ${plan.cost:,.0f}" if plan.cost is not None else ""))
    fig.suptitle(f"{head}\n{plan.layout.label()}", fontsize=10)
    fig.tight_layout()
    return finish_figure(fig, path)


LABEL_GAP = 0.04  # points closer than this (a share of each axis) to a labelled one go unlabelled


def _latency_panel(ax2, sweep, rows, loads, order, over, what: str):
    """plot_serving's right panel: TTFT p50/p99 and TPOT p50 (and both at the SLO's percentile, with its
    targets) against the load, the overloaded points crossed, a rate sweep's capacity marked."""
    ttft50 = np.array([r["ttft_p50_s"] for r in rows], dtype=float)[order] / MS
    ttft99 = np.array([r["ttft_p99_s"] for r in rows], dtype=float)[order] / MS
    tpot50 = np.array([np.nan if r["tpot_p50_s"] is None else r["tpot_p50_s"] for r in rows], dtype=float)[order] / MS
    ax2.plot(loads[order], ttft50, color=MEMORY_RED, lw=1.6, marker="o", ms=3, label="TTFT p50")
    ax2.plot(loads[order], ttft99, color=MEMORY_RED, lw=1.0, ls="--", label="TTFT p99")
    ax2.plot(loads[order], tpot50, color=COMPUTE_BLUE, lw=1.6, marker="o", ms=3, label="TPOT p50")
    if sweep.slo:
        p = sweep.slo["percentile"]
        if p not in (50, 99):  # the percentile the targets test
            ttftp = np.array([r[f"ttft_p{p:g}_s"] for r in rows], dtype=float)[order] / MS
            tpotp = np.array([np.nan if r[f"tpot_p{p:g}_s"] is None else r[f"tpot_p{p:g}_s"] for r in rows],
                             dtype=float)[order] / MS
            ax2.plot(loads[order], ttftp, color=MEMORY_RED, lw=1.2, ls="-.", label=f"TTFT p{p:g}")
            ax2.plot(loads[order], tpotp, color=COMPUTE_BLUE, lw=1.2, ls="-.", label=f"TPOT p{p:g}")
        if sweep.slo.get("ttft_s"):
            ax2.axhline(sweep.slo["ttft_s"] / MS, color=MEMORY_RED, lw=0.8, ls=":", label=f"TTFT p{p:g} target")
        if sweep.slo.get("tpot_s"):
            ax2.axhline(sweep.slo["tpot_s"] / MS, color=COMPUTE_BLUE, lw=0.8, ls=":", label=f"TPOT p{p:g} target")
    if over.any():
        ax2.scatter(loads[over], np.array([r["ttft_p50_s"] for r in rows], dtype=float)[over] / MS, s=60, marker="x", color=MEMORY_RED, lw=1.3, zorder=4,
                    label="overloaded")
    cap = (sweep.slo or {}).get("capacity_per_s")
    if sweep.over == "rate" and cap and math.isfinite(cap):
        ax2.axvline(cap, color="gray", lw=0.9, ls="--", label=f"capacity {cap:,.4g}/s (every request at once)")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel(what)
    ax2.set_ylabel("latency (ms)")
    ax2.grid(True, which="both", alpha=0.25)
    ax2.legend(loc="upper left", fontsize=8)


def plot_serving(sweep, path: str | None = None, title: str | None = None) -> Figure:
    """The throughput-latency picture of a serving sweep: output tokens/s per GPU against tokens/s
    per user (left: each point a concurrency or a rate, labelled; the SLO's points filled), and
    TTFT p50/p99 and TPOT p50 (and both at the SLO's percentile) against the load (right). Points
    crowding a labelled one (a search's bisections near its answer) go unlabelled; the best is bold."""
    from roofline.serving.search import meets_slo

    rows = sweep.rows()
    x = np.array([r["per_user_tokens_per_s"] or 0.0 for r in rows])
    y = np.array([r["output_tokens_per_s_per_gpu"] for r in rows])
    loads = np.array([r[sweep.over] for r in rows], dtype=float)
    order = np.argsort(loads)
    fig, (ax, ax2) = new_figure((13, 5.2), 1, 2)
    ax.plot(x[order], y[order], color="black", lw=1.4, zorder=2)
    ok = [meets_slo(r, sweep.slo) for r in sweep.results]
    best = (sweep.slo or {}).get("best")
    span = np.array([max(x.max(), 1e-9), max(y.max(), 1e-9)])
    labelled: list = []  # points already labelled, in axes fractions: a search's bisections crowd near its answer
    for i in sorted(range(len(rows)), key=lambda k: (loads[k] != best, k)):  # the best point's label first
        xi, yi, load, good = x[i], y[i], loads[i], ok[i]
        ax.scatter([xi], [yi], s=40, zorder=3, color=COMPUTE_BLUE if good else "white", edgecolor=COMPUTE_BLUE, lw=1.2)
        here = np.array([xi, yi]) / span
        if any(np.abs(here - q).max() < LABEL_GAP for q in labelled):
            continue
        labelled.append(here)
        label = f"{load:,.0f}" if sweep.over == "concurrency" else f"{load:,.4g}/s"
        ax.annotate(label, (xi, yi), xytext=(5, 4), textcoords="offset points", fontsize=7.5,
                    fontweight="bold" if load == best else "normal")
    over = np.array([bool(r["overloaded"] or r["over_capacity"]) for r in rows])
    if over.any():  # its queue grows: the figures are of a run that never settles, not a steady state
        ax.scatter(x[over], y[over], s=70, marker="x", color=MEMORY_RED, lw=1.3, zorder=4)
    ax.set_xlabel("tokens/s per user while streaming (1 / median TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.grid(True, alpha=0.25)
    ax.set_ylim(0, y.max() * 1.15)
    ax.set_xlim(0, max(x.max(), 1e-9) * 1.15)
    what = "users (closed loop)" if sweep.over == "concurrency" else "requests/s offered (Poisson)"
    if sweep.slo:
        ax.scatter([], [], color=COMPUTE_BLUE, label="meets the SLO")
        ax.scatter([], [], color="white", edgecolor=COMPUTE_BLUE, label="misses it")
    if over.any():
        ax.scatter([], [], marker="x", color=MEMORY_RED, lw=1.3, label="overloaded: its queue grows")
    if sweep.slo or over.any():
        ax.legend(loc="upper right", fontsize=8, title=f"points: {what}", title_fontsize=8)
    else:
        ax.set_title(f"points labelled by {what}", fontsize=9)
    _latency_panel(ax2, sweep, rows, loads, order, over, what)
    first = sweep.results[0]
    head = title or (f"{first.description.split(';')[0]}: serving {first.input_tokens / first.requests:,.0f} in / "
                     f"{first.output_tokens / first.requests:,.0f} out tokens")
    fig.suptitle(head + "\n" + f"simulated continuous batching: at most {first.engine.max_seqs:,} sequences, "
                 f"{first.engine.max_tokens:,} tokens per step; {first.description.split(';', 1)[-1].strip()}", fontsize=9.5)
    return finish_figure(fig, path)
