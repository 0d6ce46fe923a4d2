"""What the workshop's decode-versus-batch view shows (/api/decode), built from the planning
library's plan.decode.DecodePlan: readouts, a sentence, and the series of its two charts (tokens/s
and step time against batch). Pure functions (results in, plain dict out) and no web stack, so the
page's JavaScript only places numbers and text it is given.

Times are the library's seconds, written by roofline.units (format_duration: about three
significant figures, auto-scaled), the step-time axis in the unit of the slowest step
(payload.time_axis); bytes in decimal SI units, as ``roofline decode`` prints them.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.palette import BOUND_COLORS
from roofline.plan.decode import DecodePlan
from roofline.units import MS, format_duration, format_rate, format_si
from roofline.web.model_view import attention_note
from roofline.web.payload import json_safe, time_axis
from roofline.web.plan_shared import (PAD_LOG10, bound_word, fit_message, log2_ticks, log_ticks_125, machine_phrase,
                                      setup_phrase, view_body)

CURVE_POINTS = 240  # log-spaced batches on the decode curves; the marked batches are added exactly


def curve_batches(top: int, marked) -> np.ndarray:
    """The batches the decode curves are drawn at: log-spaced from 1 to ``top`` with every power of
    two and each marked batch (those from 1 to ``top``) included exactly."""
    grid = np.round(np.geomspace(1, top, CURVE_POINTS)).astype(np.int64)
    powers = 2 ** np.arange(int(math.log2(top)) + 1)
    extra = [int(b) for b in marked if b is not None and 1 <= b <= top]
    return np.unique(np.concatenate([grid, powers, np.asarray(extra, dtype=np.int64), [top]]))


def _anchor(batch: int, top: int) -> str:
    """Which side of a mark at ``batch`` its label goes: right of it in the left 60% of the log
    axis, else left of it (so the label stays on the chart)."""
    return "left" if math.log10(max(batch, 1)) <= 0.6 * math.log10(top) else "right"


def _row_hover(row: dict) -> str:
    fits = "" if row["fits"] is None else ("<br>fits in memory" if row["fits"] else "<br>does not fit in memory")
    return (f"<b>batch {row['batch']:,}</b><br>step: {format_duration(row['step_s'])}<br>{format_rate(row['tokens_per_s'])}"
            f"<br>step {bound_word(row['bound'])}; matmuls {bound_word(row['gemm_bound'])}{fits}")


def decode_chart(plan: DecodePlan, batch: int) -> dict:
    """The curves (tokens/s, and step latency ``step_time`` in the unit of the slowest step, at each
    batch of the plan's curve, thinned to log-spaced points), the tabulated batches as markers
    coloured by the step's bound, the compute-bound batch, the region where weights + KV cache no
    longer fit, and the page's batch."""
    curve = plan.curve
    at = np.asarray(curve.batch).astype(np.int64)
    top = int(at.max())
    cb, mb = plan.compute_bound_batch, plan.max_batch_in_memory
    if at.size == top:  # a curve at every batch from 1 to top: thin it to the drawn batches
        shown = curve_batches(top, (cb, mb, batch))
        idx = shown - 1
    else:  # a curve already at the drawn batches (the app computes only those)
        shown, idx = at, np.arange(at.size)
    step_s = np.broadcast_to(np.asarray(curve.time_s, dtype=float), at.shape)[idx]
    tps = np.broadcast_to(np.asarray(curve.tokens_per_s, dtype=float), at.shape)[idx]
    rows = plan.rows()
    cap = plan.memory.capacity_bytes
    here = next(r for r in rows if r["batch"] == batch)
    step_axis = time_axis([float(step_s.max())], "step time")
    unit = step_axis["seconds_per_unit"]
    step_ticks = log_ticks_125(float(step_s.min()) / unit, float(step_s.max()) / unit)
    return {
        "batch": shown.tolist(),
        "tokens_per_s": tps.tolist(),
        "step_time": (step_s / unit).tolist(),
        "hover": [f"batch {b:,}: {format_duration(s)}, {format_rate(t)}" for b, s, t in zip(shown.tolist(), step_s, tps)],
        "points": {
            "batch": [r["batch"] for r in rows],
            "tokens_per_s": [r["tokens_per_s"] for r in rows],
            "step_time": [r["step_s"] / unit for r in rows],
            "bound": [r["bound"] for r in rows],
            "hover": [_row_hover(r) for r in rows],
        },
        "here": {"batch": batch, "tokens_per_s": here["tokens_per_s"], "step_time": here["step_s"] / unit,
                 "text": f"batch {batch:,}", "hover": _row_hover(here),
                 "textposition": "top center" if _anchor(batch, top) == "left" else "top left"},
        "x_max": top,
        "x_range_log10": [-PAD_LOG10, math.log10(top) + PAD_LOG10],
        "x_end": 10 ** (math.log10(top) + PAD_LOG10),  # where the not-fitting region's shading ends
        "ticks": log2_ticks(top),
        "axes": {  # the y axis of each chart
            "tokens_per_s": {"type": "linear", "range": [0.0, float(tps.max()) * 1.15], "title": "tokens/s (all sequences)"},
            "step_time": {"type": "log", **step_axis, "tickvals": step_ticks["values"], "ticktext": step_ticks["text"]},
        },
        "compute_bound_batch": cb if cb is not None and cb <= top else None,
        "compute_bound_log10": math.log10(cb) if cb is not None and cb <= top else None,
        # the two marks' words, said under the charts (inside them they crossed the curve and each
        # other's line on a phone)
        "compute_bound_text": None if cb is None else f"matmuls compute-bound from batch {cb:,}",
        "max_batch_in_memory": mb,
        "no_fit_from": None if mb is None or mb >= top else max(mb, 1),
        "no_fit_log10": None if mb is None or mb >= top else math.log10(max(mb, 1)),
        "no_fit_text": (None if mb is None or mb >= top or cap is None else
                        (f"weights + KV cache exceed {format_si(cap, 'B')} beyond batch {mb:,}" if mb > 0
                         else f"weights + KV cache exceed {format_si(cap, 'B')} at any batch")),
        "colors": BOUND_COLORS,
    }


def _tokens_text(n) -> str:
    """A crossover context for a readout: 'never' when the cache stops growing first."""
    return "never" if n is None else f"{n:,} tokens"


def step_runs_text(runs, top: int) -> str:
    """Where the whole step is compute-bound, from plan.decode.step_bound_runs: 'whole step
    compute-bound from batch 264'; 'whole step compute-bound for batches 186–220; memory-bound
    again from 221'; 'whole step compute-bound for batches 191–192 and from 194'; 'whole step
    stays memory-bound to 65,536'."""
    compute = [(a, e) for a, e, bound in runs if bound == "compute"]
    if not compute:
        kinds = sorted({bound for _, _, bound in runs})
        return f"whole step stays {kinds[0]}-bound to {top:,}" if len(kinds) == 1 else f"whole step never compute-bound up to {top:,}"
    spans = [f"{a:,}" if a == e else f"{a:,}–{e:,}" for a, e in compute]
    last_a, last_e = compute[-1]
    if last_e >= top:
        spans[-1] = f"from {last_a:,}" if len(compute) > 1 else f"from batch {last_a:,}"
    text = "whole step compute-bound " + ("" if len(compute) == 1 and last_e >= top else "for batches ")
    text += spans[0] if len(spans) == 1 else f"{', '.join(spans[:-1])} and {spans[-1]}"
    if last_e < top:
        after = next(bound for a, _, bound in runs if a == last_e + 1)
        text += f"; {after}-bound again from {last_e + 1:,}"
    return text


def decode_readouts(plan: DecodePlan, batch: int, kv_crossover_context: int, step_runs) -> dict:
    """The decode view's readouts as numbers and as the text the page shows. ``step_runs`` are
    plan.decode.step_bound_runs of the plan: where the whole step is memory-, compute- or link-bound."""
    top = step_runs[-1][1]
    here = next(r for r in plan.rows() if r["batch"] == batch)
    cb, scb, mb = plan.compute_bound_batch, plan.step_compute_bound_batch, plan.max_batch_in_memory
    S = int(plan.step.context)
    cap = plan.memory.capacity_bytes
    numbers = {
        "step_s": here["step_s"], "step_ms": here["step_s"] / MS, "tokens_per_s": here["tokens_per_s"], "fits": here["fits"],
        "compute_bound_batch": cb, "step_compute_bound_batch": scb, "max_batch_in_memory": mb,
        "step_bound_runs": [{"first": a, "last": e, "bound": bound} for a, e, bound in step_runs],
        "kv_overtakes_weights_context": kv_crossover_context,
        "kv_overtakes_weights_context_batch_1": plan.kv_crossover_context,
    }
    text = {
        "step_name": f"Decode step at batch {batch:,}",
        "step": format_duration(here["step_s"]),
        "step_sub": f"step {bound_word(here['bound'])}; matmuls {bound_word(here['gemm_bound'])}",
        "throughput_name": f"Throughput at batch {batch:,}",
        "throughput": format_rate(here["tokens_per_s"]),
        "throughput_sub": {True: "fits in memory", False: "does not fit in memory", None: "memory capacity unknown"}[here["fits"]],
        "compute_bound": "—" if cb is None else f"batch {cb:,}",
        "compute_bound_sub": step_runs_text(step_runs, top) if cb is not None else f"matmuls stay memory-bound up to {top:,}",
        "max_batch": "—" if mb is None else f"{mb:,}",
        "max_batch_sub": ("machine gives no capacity" if cap is None
                          else f"sequences of {S:,} tokens in {format_si(cap, 'B')}"),
        "kv": _tokens_text(kv_crossover_context),
        "kv_sub": (f"of context at batch {batch:,}" if batch == 1 else
                   f"of context at batch {batch:,}; {_tokens_text(plan.kv_crossover_context)} at batch 1"),
    }
    return {**numbers, "text": text}


def decode_sentence(plan: DecodePlan, batch: int, model_name: str) -> str:
    """E.g. 'Llama 3 8B decoding at 8,192 tokens of context on the H100 SXM: 155 tokens/s at batch
    1; the matmuls turn compute-bound at batch 264, but only 64 sequences fit in 85.5 GB.'"""
    rows = {r["batch"]: r for r in plan.rows()}
    one, here = rows[min(rows)], rows[batch]
    S = int(plan.step.context)
    cb, mb = plan.compute_bound_batch, plan.max_batch_in_memory
    text = (f"{model_name} decoding at {S:,} tokens of context on {machine_phrase(plan.step)}: "
            f"{format_rate(one['tokens_per_s'])} at batch {one['batch']:,}")
    if batch != one["batch"]:
        text += f", {format_rate(here['tokens_per_s'])} at batch {batch:,}"
    text += "; the matmuls " + (f"turn compute-bound at batch {cb:,}" if cb else "stay memory-bound up to batch 65,536")
    cap = plan.memory.capacity_bytes
    if mb is not None and cap is not None:
        if mb == 0:
            text += f", but the weights and one sequence's KV cache do not fit in {format_si(cap, 'B')}"
        elif cb is not None and mb < cb:
            text += f", but only {mb:,} sequence{'s' if mb != 1 else ''} fit in {format_si(cap, 'B')}"
        else:
            text += f", and up to {mb:,} sequences fit in {format_si(cap, 'B')}"
    return text + "."


def decode_payload(plan: DecodePlan, batch: int, kv_crossover_context: int, model_name: str, launch_overhead_us: float,
                   step_runs) -> dict:
    """The /api/decode body: the library's ``DecodePlan.to_dict()`` (rows at 1, 2, 4, ..., 1,024 and
    the page's batch) plus what the page draws. ``step_runs``: plan.decode.step_bound_runs(model, plan)."""
    s = plan.step
    cap = plan.memory.capacity_bytes
    return json_safe(view_body(
        plan, model_name, s.machine_spec, batch=batch, launch_overhead_us=launch_overhead_us,
        kv_overtakes_weights_context=kv_crossover_context, fit=fit_message(plan.memory),
        attention_note=attention_note(s.attention, command="roofline decode"),
        readouts=decode_readouts(plan, batch, kv_crossover_context, step_runs),
        sentence=decode_sentence(plan, batch, model_name), chart=decode_chart(plan, batch),
        caption=(f"{model_name} decode steps {setup_phrase(s, format_si(cap, 'B') if cap else 'unknown')}. Markers: the "
                 "step's bound at each tabulated batch (red memory-bound, blue compute-bound); grey: weights + KV cache "
                 "do not fit.")))
