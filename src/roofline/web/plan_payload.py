"""What the workshop's whole-model, decode-versus-batch and serving views show, built from the
planning library's results (plan.ModelPrediction, capacity.MemoryPlan, capacity.DecodePlan,
serving.ServingSweep with step.StepCost): readouts, a sentence, and the series of their charts. Pure functions (results in, plain dict out) and no
web stack, so the page's JavaScript only places numbers and text it is given.

Times are the library's seconds, written by roofline.units (format_duration: about three
significant figures, auto-scaled), each chart's time axis in the unit of its largest value
(payload.time_axis); bytes in decimal SI units, as ``roofline memory`` and ``roofline decode``
print them.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.plan.decode import DecodePlan
from roofline.plan.memory import MemoryPlan
from roofline.plan.inference import ModelPrediction
from roofline.palette import (BOUND_COLORS, COMPUTE_BLUE, INK, MEMORY_RED, MISS_GREY, PART_COLORS, TPOT_COLOR, TTFT_COLOR,
                              UNNAMED_PART_GREY)
from roofline.units import GIGA, MS, format_duration, format_number, format_rate, format_share, format_si, format_typed_ms
from roofline.web.payload import json_safe, memory_warnings, time_axis

PAD_LOG10 = 0.06  # room either side of the batch axis (in decades) so the end ticks show
CURVE_POINTS = 240  # log-spaced batches on the decode curves; the marked batches are added exactly
NON_BLOCK_PARTS = ("embedding", "final norm", "LM head")  # model_ops' names for the ops outside the blocks


# -- text at the edge -----------------------------------------------------------------------------

def _batch_phrase(batch: int) -> str:
    return "one sequence" if batch == 1 else f"a batch of {batch:,} sequences"


def _bound_word(bound: str) -> str:
    return f"{bound}-bound"


def _machine_phrase(pred: ModelPrediction) -> str:
    """'the H100 SXM', or under tensor parallelism 'the H100 SXM × 2 (tensor-parallel)'."""
    t = int(pred.tensor_parallel)
    return pred.machine_spec.the_name + (f" × {t} (tensor-parallel)" if t > 1 else "")


def _tp_text(pred: ModelPrediction) -> str:
    """', tensor-parallel over 2 GPUs joined by nvlink (weights, KV cache and bytes per GPU)', or
    '' on one GPU."""
    t = int(pred.tensor_parallel)
    if t == 1:
        return ""
    link = next((op.kernel.link for op in pred.ops if op.kernel.link), None)
    return (f", tensor-parallel over {t} GPUs" + (f" joined by {link}" if link else "")
            + " (weights, KV cache and bytes per GPU)")


# -- the whole model --------------------------------------------------------------------------------

def model_parts(pred: ModelPrediction, n_layers: int) -> list[dict]:
    """The pass's ops summed into the whole model's parts, in execution order: the embedding, the
    L blocks (every block op times L, tensor-parallel all-reduces included), the final norm and
    the LM head. Each part's time is split by the limit that binds each of its ops."""
    blocks = f"{n_layers} blocks" if n_layers != 1 else "1 block"
    parts: dict[str, dict] = {}
    for counted, op in zip(pred.ops, pred.prediction.ops):
        name = counted.kernel.name if counted.kernel.name in NON_BLOCK_PARTS else blocks
        part = parts.setdefault(name, {
            "name": name, "key": "blocks" if name == blocks else name.replace(" ", "_").lower(),
            "ops": [], "time_s": 0.0, "memory_time_s": 0.0, "compute_time_s": 0.0, "link_time_s": 0.0,
            "flops": 0.0, "bytes": 0.0, "weight_bytes": 0.0, "kv_bytes": 0.0,
        })
        part["ops"].append({"name": op.name, "time_s": op.time_s, "bound": op.bound})
        part["time_s"] += op.time_s
        part[f"{op.bound}_time_s"] += op.time_s
        part["flops"] += op.flops
        part["bytes"] += op.bytes
        part["weight_bytes"] += counted.weight_bytes * counted.count
        part["kv_bytes"] += counted.kv_bytes * counted.count
    order = ["embedding", blocks, "final norm", "LM head"]
    return [parts[n] for n in order if n in parts]


def _part_hover(part: dict, total_s: float) -> str:
    lines = [f"<b>{part['name']}</b> — {format_duration(part['time_s'])} ({format_share(part['time_s'] / total_s)} of the pass)",
             f"FLOPs: {format_si(part['flops'], 'FLOP')} · bytes: {format_si(part['bytes'], 'B')}"]
    if len(part["ops"]) > 1:
        biggest = sorted(part["ops"], key=lambda op: op["time_s"], reverse=True)[:6]
        lines += [f"{op['name']}: {format_duration(op['time_s'])}, {_bound_word(op['bound'])}" for op in biggest]
    else:
        lines.append(_bound_word(part["ops"][0]["bound"]))
    return "<br>".join(lines)


def parts_chart(parts: list[dict], total_s: float) -> dict:
    """Stacked horizontal bars in the unit of the largest part (``axis``, payload.time_axis): each
    part's memory-bound and compute-bound time, and its total."""
    axis = time_axis([p["time_s"] for p in parts])
    scale = axis["seconds_per_unit"]
    return {
        "labels": [p["name"] for p in parts],
        "axis": axis,
        "memory": [(p["memory_time_s"] + p["link_time_s"]) / scale for p in parts],
        "compute": [p["compute_time_s"] / scale for p in parts],
        "total": [p["time_s"] / scale for p in parts],
        "text": [f"{format_duration(p['time_s'])} ({format_share(p['time_s'] / total_s)})" for p in parts],
        "hover": [_part_hover(p, total_s) for p in parts],
        "x_max": max(p["time_s"] for p in parts) / scale * 1.3,
        "colors": {"memory": MEMORY_RED, "compute": COMPUTE_BLUE},
    }


def fit_message(memory: MemoryPlan) -> dict:
    """The plan's verdict with a one-word state for the page's colour (fits, does-not-fit,
    unknown), a headline and a mark."""
    state = "unknown" if memory.fits is None else ("fits" if memory.fits else "does-not-fit")
    headline = {"fits": "Fits in memory", "does-not-fit": "Does not fit in memory", "unknown": "Memory capacity unknown"}[state]
    mark = {"fits": "✓", "does-not-fit": "✗", "unknown": "?"}[state]
    return {"state": state, "headline": headline, "mark": mark, "text": memory.verdict}


def memory_chart(memory: MemoryPlan) -> dict:
    """One stacked bar in GB (weights, then KV cache) against the machine's capacity."""
    labels = {"weights": "weights", "kv_cache": "KV cache"}
    total_gb = memory.total_bytes / GIGA
    cap_gb = None if memory.capacity_bytes is None else memory.capacity_bytes / GIGA
    segments = [
        {"name": labels.get(p.name, p.name), "gb": p.bytes / GIGA, "color": PART_COLORS.get(p.name, UNNAMED_PART_GREY),
         "hover": f"<b>{labels.get(p.name, p.name)}</b>: {format_si(p.bytes, 'B')}"}
        for p in memory.parts
    ]
    name = memory.machine_name or memory.machine
    return {
        "label": "weights + KV cache",
        "segments": segments,
        "total_gb": total_gb,
        "total_text": f"{format_si(memory.total_bytes, 'B')}" + ("" if memory.fits is None else (" fits" if memory.fits else " does not fit")),
        "fits": memory.fits,
        "colors": {"not_fit": MEMORY_RED},
        "capacity_gb": cap_gb,
        "capacity_text": None if cap_gb is None else f"{name}: {format_si(memory.capacity_bytes, 'B')}",
        "capacity_anchor": None if cap_gb is None else ("left" if cap_gb < 0.5 * max(total_gb, cap_gb) * 1.45 else "right"),
        "x_max_gb": max(total_gb, cap_gb or 0.0) * 1.45,  # room for the total's label
    }


def _limits_text(memory: MemoryPlan, batch: int, context: int) -> str:
    limits = dict(memory.limits)
    if not limits:
        return "The machine gives no memory capacity, so no batch or context limit is shown."
    mb, mc = limits["max_batch_at_context"], limits["max_context_at_batch"]
    if mb == 0:
        return f"Not one sequence of {context:,} tokens fits beside the weights."
    grow = f"one sequence can grow to {mc:,} tokens" if batch == 1 else f"a batch of {batch:,} to {mc:,} tokens each"
    return f"Up to {mb:,} sequence{'s' if mb != 1 else ''} of {context:,} tokens fit; {grow}."


def model_readouts(pred: ModelPrediction, memory: MemoryPlan, kv_crossover_context: int) -> dict:
    """The whole-model view's readouts as numbers and as the text the page shows."""
    prefill = pred.phase == "prefill"
    B, T, S = int(pred.batch), int(pred.tokens), int(pred.context)
    weights_bytes, kv_bytes = float(pred.weight_bytes), float(pred.kv_bytes)
    numbers = {
        "latency_s": float(pred.time_s),
        "latency_ms": float(pred.time_s) / MS,
        "tokens_per_s": float(pred.tokens_per_s),
        "memory_bound_share": float(pred.memory_bound_share),
        "weight_bytes_read": weights_bytes,
        "kv_bytes_read": kv_bytes,
        "memory_total_bytes": memory.total_bytes,
        "capacity_bytes": memory.capacity_bytes,
        "fits": memory.fits,
        "kv_overtakes_weights_context": kv_crossover_context,
    }
    cap = memory.capacity_bytes
    text = {
        "latency_name": "Time to first token" if prefill else "Decode step",
        "latency": format_duration(pred.time_s),
        "latency_sub": (f"{B:,} × {T:,}-token prompt{'s' if B != 1 else ''}" if prefill
                        else f"batch {B:,} at {S:,} tokens of context"),
        "throughput_name": "Prefill throughput" if prefill else "Decode throughput",
        "throughput": format_rate(pred.tokens_per_s),
        "throughput_sub": "prompt tokens through the model" if prefill else f"{B:,} new token{'s' if B != 1 else ''} per step",
        "bound": format_share(pred.memory_bound_share),
        "bound_sub": f"of the time in memory-bound ops; matmuls {_bound_word(pred.gemm_bound)}",
        "bytes_name": "Arithmetic" if prefill else "Weights + KV cache read",
        "bytes": format_si(pred.flops, "FLOP") if prefill else f"{format_si(weights_bytes, 'B')} + {format_si(kv_bytes, 'B')}",
        "bytes_sub": (f"over {format_si(pred.bytes, 'B')} moved: {format_number(pred.intensity)} FLOP/byte" if prefill
                      else ("KV reads never overtake weights" if kv_crossover_context is None
                            else f"KV reads overtake weights from {kv_crossover_context:,} tokens")),
        "memory": format_si(memory.total_bytes, "B"),
        "memory_sub": {True: f"of {format_si(cap, 'B')}: fits ({memory.total_bytes / cap:.0%})" if cap else "fits",
                       False: f"of {format_si(cap, 'B')}: does not fit" if cap else "does not fit",
                       None: "the machine gives no capacity"}[memory.fits],
    }
    return {**numbers, "text": text}


def model_sentence(pred: ModelPrediction, model_name: str, n_layers: int, kv_crossover_context: int) -> str:
    """One sentence for the pass, e.g. 'Prefill of one 8,192-token sequence through Llama 3 8B (32
    blocks, embedding, final norm and LM head) on the H100 SXM takes 281 ms to the first token:
    29,190 prompt tokens/s, 41% of the time in memory-bound ops.'"""
    B, T, S = int(pred.batch), int(pred.tokens), int(pred.context)
    machine = _machine_phrase(pred)
    whole = f"{model_name} ({n_layers} blocks, embedding, final norm and LM head)"
    share = f"{format_share(pred.memory_bound_share)} of the time in memory-bound ops"
    if pred.phase == "prefill":
        who = f"one {T:,}-token sequence" if B == 1 else f"a batch of {B:,} sequences of {T:,} tokens"
        return (f"Prefill of {who} through {whole} on {machine} takes {format_duration(pred.time_s)} to the first token: "
                f"{format_rate(pred.tokens_per_s).replace('tokens/s', 'prompt tokens/s')}, {share}.")
    if kv_crossover_context is None:
        over = "KV-cache reads never overtake the weight reads (the cache stops growing: windowed or state-space layers)"
    elif S >= kv_crossover_context:
        over = "KV-cache reads already exceed the weight reads"
    else:
        over = f"KV-cache reads would overtake weight reads at {kv_crossover_context:,} tokens of context"
    return (f"One decode step of {_batch_phrase(B)} at {S:,} tokens of context through {whole} on {machine} takes "
            f"{format_duration(pred.time_s)}: {format_rate(pred.tokens_per_s)}. It reads {format_si(pred.weight_bytes, 'B')} of weights "
            f"and {format_si(pred.kv_bytes, 'B')} of KV cache; {over} at this batch.")


def _cost_text(pred: ModelPrediction) -> str:
    cm = pred.cost_model
    launch = "per pass (one CUDA graph launch)" if cm.cuda_graph else "per launch"
    return (f"e_c = {cm.compute_efficiency:g}, e_m = {cm.memory_efficiency:g}, {format_duration(cm.launch_overhead_s)} {launch}, "
            f"overlap {cm.overlap:g}")


def model_payload(pred: ModelPrediction, memory: MemoryPlan, kv_crossover_context: int, model_name: str, n_layers: int,
                  launch_overhead_us: float) -> dict:
    """The /api/model body: the library's ``ModelPrediction.to_dict()``, the memory plan's
    ``to_dict()`` and what the page draws."""
    parts = model_parts(pred, n_layers)
    total_s = float(pred.time_s)
    m = pred.machine_spec
    body = {
        **pred.to_dict(),
        "model_name": model_name,
        "machine_name": m.name,
        "n_layers": n_layers,
        "launch_overhead_us": launch_overhead_us,
        "time_to_first_token_s": total_s if pred.phase == "prefill" else None,
        "step_s": total_s if pred.phase == "decode" else None,
        "kv_overtakes_weights_context": kv_crossover_context,
        "parts": parts,
        "memory": memory.to_dict(),
        "fit": fit_message(memory),
        "memory_limits_text": _limits_text(memory, int(pred.batch), int(pred.context)),
        "readouts": model_readouts(pred, memory, kv_crossover_context),
        "sentence": model_sentence(pred, model_name, n_layers, kv_crossover_context),
        "parts_chart": parts_chart(parts, total_s),
        "memory_chart": memory_chart(memory),
        "warnings": memory_warnings([(c.kernel.name, c.kernel.category, float(c.kernel.bytes)) for c in pred.ops],
                                    m.memory_bytes, m.name, pred.attention == "naive"),
        "caption": (f"The whole {model_name} forward pass ({pred.phase}) in {pred.precision.label()} on {m.the_name} "
                    f"(peak {format_si(m.peak(pred.precision.compute), 'FLOP/s')}, {format_si(m.bandwidth, 'B/s')}){_tp_text(pred)}, "
                    f"{pred.attention} attention, {_cost_text(pred)}. Memory: weights + KV cache only (no activations "
                    "or runtime workspace)."),
    }
    return json_safe(body)


# -- decode versus batch ----------------------------------------------------------------------------

def curve_batches(top: int, marked) -> np.ndarray:
    """The batches the decode curves are drawn at: log-spaced from 1 to ``top`` with every power of
    two and each marked batch (those from 1 to ``top``) included exactly."""
    grid = np.round(np.geomspace(1, top, CURVE_POINTS)).astype(np.int64)
    powers = 2 ** np.arange(int(math.log2(top)) + 1)
    extra = [int(b) for b in marked if b is not None and 1 <= b <= top]
    return np.unique(np.concatenate([grid, powers, np.asarray(extra, dtype=np.int64), [top]]))


def _log_ticks_125(lo: float, hi: float) -> dict:
    """Ticks at 1, 2 and 5 times each power of ten that spans ``lo`` to ``hi`` (a log axis)."""
    values = [m * 10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    values = [v for v in values if lo / 1.5 <= v <= hi * 1.5]
    return {"values": values, "text": [format_number(v) for v in values]}


def _log2_ticks(top: int, most: int = 11) -> dict:
    """Powers of two from 1 to ``top``, every other one (or fewer) beyond ``most`` ticks."""
    values = [2**k for k in range(int(math.log2(top)) + 1)]
    values = values[:: math.ceil(len(values) / most)]
    return {"values": values, "text": [f"{v:,}" for v in values]}


def _anchor(batch: int, top: int) -> str:
    """Which side of a mark at ``batch`` its label goes: right of it in the left 60% of the log
    axis, else left of it (so the label stays on the chart)."""
    return "left" if math.log10(max(batch, 1)) <= 0.6 * math.log10(top) else "right"


def _row_hover(row: dict) -> str:
    fits = "" if row["fits"] is None else ("<br>fits in memory" if row["fits"] else "<br>does not fit in memory")
    return (f"<b>batch {row['batch']:,}</b><br>step: {format_duration(row['step_s'])}<br>{format_rate(row['tokens_per_s'])}"
            f"<br>step {_bound_word(row['bound'])}; matmuls {_bound_word(row['gemm_bound'])}{fits}")


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
    step_ticks = _log_ticks_125(float(step_s.min()) / unit, float(step_s.max()) / unit)
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
        "ticks": _log2_ticks(top),
        "axes": {  # the y axis of each chart, and the height (0 to 1) of the not-fitting note, clear of the curve
            "tokens_per_s": {"type": "linear", "range": [0.0, float(tps.max()) * 1.15], "title": "tokens/s (all sequences)",
                             "note_y": 0.5, "note_yanchor": "middle"},
            "step_time": {"type": "log", **step_axis, "tickvals": step_ticks["values"], "ticktext": step_ticks["text"],
                          "note_y": 0.98, "note_yanchor": "top"},
        },
        "compute_bound_batch": cb if cb is not None and cb <= top else None,
        "compute_bound_log10": math.log10(cb) if cb is not None and cb <= top else None,
        "compute_bound_text": None if cb is None else f"matmuls<br>compute-bound<br>from batch {cb:,}",
        "compute_bound_anchor": None if cb is None else _anchor(cb, top),
        "max_batch_in_memory": mb,
        "no_fit_from": None if mb is None or mb >= top else max(mb, 1),
        "no_fit_log10": None if mb is None or mb >= top else math.log10(max(mb, 1)),
        "no_fit_anchor": None if mb is None or mb >= top else _anchor(mb, top),
        "no_fit_text": (None if mb is None or mb >= top or cap is None else
                        (f"weights + KV cache<br>exceed {format_si(cap, 'B')}<br>beyond batch {mb:,}" if mb > 0
                         else f"weights + KV cache<br>exceed {format_si(cap, 'B')}<br>at any batch")),
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
        "step_sub": f"step {_bound_word(here['bound'])}; matmuls {_bound_word(here['gemm_bound'])}",
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
    1; the matmuls turn compute-bound at batch 264, but only 59 sequences fit in 80 GB.'"""
    rows = {r["batch"]: r for r in plan.rows()}
    one, here = rows[min(rows)], rows[batch]
    S = int(plan.step.context)
    cb, mb = plan.compute_bound_batch, plan.max_batch_in_memory
    text = (f"{model_name} decoding at {S:,} tokens of context on {_machine_phrase(plan.step)}: "
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
    m = s.machine_spec
    body = {
        **plan.to_dict(),
        "model_name": model_name,
        "machine_name": m.name,
        "batch": batch,
        "launch_overhead_us": launch_overhead_us,
        "kv_overtakes_weights_context": kv_crossover_context,
        "fit": fit_message(plan.memory),
        "readouts": decode_readouts(plan, batch, kv_crossover_context, step_runs),
        "sentence": decode_sentence(plan, batch, model_name),
        "chart": decode_chart(plan, batch),
        "caption": (f"{model_name} decode steps in {s.precision.label()} on {m.the_name} "
                    f"(peak {format_si(m.peak(s.precision.compute), 'FLOP/s')}, {format_si(m.bandwidth, 'B/s')}, "
                    f"memory {format_si(plan.memory.capacity_bytes, 'B') if plan.memory.capacity_bytes else 'unknown'}){_tp_text(s)}, "
                    f"{s.attention} attention, {_cost_text(s)}. Markers: the step's bound at each tabulated batch "
                    "(red memory-bound, blue compute-bound); grey: weights + KV cache do not fit."),
    }
    return json_safe(body)


# -- serving: a deployment under load ---------------------------------------------------------------



def _users(n: int) -> str:
    return f"{n:,} user" + ("" if n == 1 else "s")


def _pct(p: float) -> str:
    return f"p{p:g}"


def targets_text(slo: dict | None) -> str:
    """'TTFT p90 <= 500 ms and TPOT p90 <= 30 ms' (the targets given)."""
    if not slo:
        return "no targets"
    p = _pct(slo["percentile"])
    parts = [f"{what} {p} ≤ {format_typed_ms(slo[key])}" for what, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"))
             if slo.get(key) is not None]
    return " and ".join(parts)


def serving_representative(sweep) -> int:
    """The index of the point the readouts and the breakdown describe: the highest concurrency that
    meets the targets, else the last (as `roofline serving --breakdown`)."""
    best = (sweep.slo or {}).get("best")
    return sweep.values.index(best) if best is not None else len(sweep.values) - 1


def serving_breakdown(step, result, users: int) -> dict:
    """One decode step of a point op by op, as `roofline serving --breakdown` gives it: its mean
    decode batch at its mean context (a decoding sequence halfway through its answer), with a table
    of the ops by time."""
    batch = max(1, round(result.mean_decode_batch))
    context = max(1, round(result.input_tokens / result.requests + result.output_tokens / result.requests / 2))
    ops = step.ops([context] * batch)
    time_s = step.seconds([context] * batch)
    total = sum(o.time_s for o in ops) or 1.0
    ranked = sorted(ops, key=lambda o: o.time_s, reverse=True)
    shown, rest = ranked[:10], ranked[10:]
    rows = [{"name": o.name, "runs": f"{o.count:,}", "time": format_duration(o.time_s), "share": format_share(o.time_s / total),
             "bound": o.bound} for o in shown]
    if rest:
        rest_s = sum(o.time_s for o in rest)
        rows.append({"name": f"{len(rest)} other ops", "runs": "", "time": format_duration(rest_s),
                     "share": format_share(rest_s / total), "bound": ""})
    return {
        "users": users, "decode_batch": batch, "context": context, "time_s": time_s,
        "ops": [o.to_dict() for o in ops],
        "table": rows,
        "title": (f"One decode step at {_users(users)}: {batch:,} sequence{'s' if batch != 1 else ''} at "
                  f"{context:,} tokens of context take {format_duration(time_s)}"),
    }


def _point_hover(row: dict, result, percentile: float) -> str:
    p = _pct(percentile)
    lines = [f"<b>{_users(row['concurrency'])}</b>",
             f"{format_rate(row['output_tokens_per_s_per_gpu'])} per GPU · {format_rate(row['per_user_tokens_per_s'])} per user",
             f"TTFT p50 {format_duration(row['ttft_p50_s'])} · {p} {format_duration(result.percentile('ttft', percentile))}"
             f" · p99 {format_duration(row['ttft_p99_s'])}",
             f"TPOT p50 {format_duration(row['tpot_p50_s'])} · {p} {format_duration(result.percentile('tpot', percentile))}",
             f"mean decode batch {row['mean_decode_batch']:.1f} · KV cache peak {format_share(row['kv_cache_peak'])}"
             f" · {row['preemptions']:,} preemptions",
             f"{result.requests:,} requests simulated"]
    if "meets_slo" in row:
        lines.append("meets the targets" if row["meets_slo"] else "misses the targets")
    return "<br>".join(lines)


def _users_ticks(top: int) -> dict:
    ticks = _log2_ticks(top)
    if top not in ticks["values"]:
        ticks = {"values": ticks["values"] + [top], "text": ticks["text"] + [f"{top:,}"]}
    return ticks


def point_labels(users, xs, ys, x_span: float, y_span: float, near: float = 0.025) -> list[str]:
    """Each point's label (its users), one label for a run of points that sit on one another (a
    saturated engine: '16–64' at the last of them, the others unlabelled)."""
    labels = [f"{u:,}" for u in users]
    start = 0
    for i in range(1, len(users) + 1):
        same = (i < len(users) and xs[i] is not None and xs[start] is not None
                and abs(xs[i] - xs[start]) <= near * x_span and abs(ys[i] - ys[start]) <= near * y_span)
        if same:
            continue
        if i - 1 > start:
            for j in range(start, i - 1):
                labels[j] = ""
            labels[i - 1] = f"{users[start]:,}–{users[i - 1]:,}"
        start = i
    return labels


def serving_charts(sweep, best_index: int | None, percentile: float) -> dict:
    """The curve (output tokens/s per GPU against tokens/s per user, each point labelled by its
    users, filled where it meets the targets) and the latencies against users (TTFT p50 and p99,
    TPOT p50 in the unit of the slowest, ``axis``; the targets as lines)."""
    rows = sweep.rows()
    users = [r["concurrency"] for r in rows]
    top = max(users)
    meets = [r.get("meets_slo", True) for r in rows]
    gpu = [r["output_tokens_per_s_per_gpu"] for r in rows]
    per_user = [r["per_user_tokens_per_s"] for r in rows]
    per_user = [None if v is None or not math.isfinite(v) else v for v in per_user]
    hover = [_point_hover(r, res, percentile) for r, res in zip(rows, sweep.results)]
    known = [v for v in per_user if v is not None]
    x_range, y_range = [0.0, (max(known) if known else 1.0) * 1.12], [0.0, max(gpu) * 1.15]
    curve = {
        "users": users, "output_tokens_per_s_per_gpu": gpu, "per_user_tokens_per_s": per_user, "meets_slo": meets,
        "text": point_labels(users, per_user, gpu, x_range[1], y_range[1]), "hover": hover, "best": best_index,
        "x_range": x_range, "y_range": y_range,
        "x_title": "tokens/s per user (1 / median TPOT)", "y_title": "output tokens/s per GPU",
        "colors": {"meets": COMPUTE_BLUE, "misses": MISS_GREY, "line": INK},
        "empty_text": None if known else "one output token per request: no TPOT, so no per-user rate to place",
    }
    known = lambda v: v is not None and math.isfinite(v)  # noqa: E731
    # p50 and p99 as benchmarks print them, and the percentile the cards and targets use (p90)
    seconds = {"ttft_p50": [r["ttft_p50_s"] for r in rows], "ttft_p99": [r["ttft_p99_s"] for r in rows],
               "tpot_p50": [r["tpot_p50_s"] for r in rows],
               "ttft_at": [res.percentile("ttft", percentile) for res in sweep.results],
               "tpot_at": [res.percentile("tpot", percentile) for res in sweep.results]}
    slo = sweep.slo or {}
    given = [(what, key, color) for what, key, color in (("TTFT", "ttft_s", TTFT_COLOR), ("TPOT", "tpot_s", TPOT_COLOR))
             if slo.get(key) is not None]
    shown_s = [v for s in seconds.values() for v in s if known(v) and v > 0] + [slo[key] for _, key, _ in given]
    axis = time_axis(shown_s, "latency")  # the unit of the slowest latency or target
    unit = axis["seconds_per_unit"]
    series = {k: [v / unit if known(v) else None for v in s] for k, s in seconds.items()}
    targets = [{"name": what, "value": slo[key] / unit, "value_log10": math.log10(slo[key] / unit), "color": color,
                "text": f"{what} {_pct(slo['percentile'])} target {format_typed_ms(slo[key])}"}
               for what, key, color in given]
    lo, hi = min(shown_s) / unit, max(shown_s) / unit
    ticks = _log_ticks_125(lo, hi)
    latency = {
        "users": users, **series, "axis": axis,
        "hover": {k: [f"{_users(u)}: {name} {format_duration(v)}" for u, v in zip(users, seconds[k])]
                  for k, name in (("ttft_p50", "TTFT p50"), ("ttft_p99", "TTFT p99"), ("tpot_p50", "TPOT p50"),
                                  ("ttft_at", f"TTFT {_pct(percentile)}"), ("tpot_at", f"TPOT {_pct(percentile)}"))},
        "percentile_name": _pct(percentile),
        "targets": targets,
        "x_range_log10": [-PAD_LOG10, math.log10(top) + PAD_LOG10] if top > 1 else [-0.5, 0.5],
        "ticks": _users_ticks(top),
        "y_range_log10": [math.log10(lo) - 0.1, math.log10(hi) + 0.1],
        "y_ticks": ticks,
        "colors": {"ttft": TTFT_COLOR, "tpot": TPOT_COLOR},
    }
    return {"curve": curve, "latency": latency}


def left_out_text(left_out) -> str:
    """' 128 and 256 users are left out: ...' (empty when the whole sweep ran)."""
    if not left_out:
        return ""
    names = f"{', '.join(f'{u:,}' for u in left_out[:-1])} and {left_out[-1]:,}" if len(left_out) > 1 else f"{left_out[0]:,}"
    return (f" {names} users {'are' if len(left_out) > 1 else 'is'} left out: they would take longer to simulate than "
            "this view allows (see the note below).")


def slo_verdict(sweep, percentile: float, left_out=()) -> dict:
    """The targets' verdict: met up to some concurrency, met by none, or no targets given; and the
    points the bound left out."""
    verdict = _slo_verdict(sweep, percentile)
    verdict["text"] += left_out_text(list(left_out))
    return verdict


def _slo_verdict(sweep, percentile: float) -> dict:
    slo = sweep.slo
    lo, hi = sweep.values[0], sweep.values[-1]
    if not slo:
        return {"state": "none", "mark": "–", "headline": "No targets",
                "text": "No TTFT or TPOT target: set one to find the highest concurrency within it."}
    best = slo.get("best")
    if best is not None:
        return {"state": "meets", "mark": "✓", "headline": f"Meets the targets up to {_users(best)}",
                "text": f"Up to {_users(best)} meet{'s' if best == 1 else ''} {targets_text(slo)} ({lo:,} to {_users(hi)} swept)."}
    first = sweep.results[0]
    return {"state": "misses", "mark": "✗", "headline": "No concurrency meets the targets",
            "text": (f"No concurrency from {lo:,} to {_users(hi)} meets {targets_text(slo)}: {_users(lo)} alone sees "
                     f"TTFT {_pct(percentile)} {format_duration(first.percentile('ttft', percentile))} and TPOT "
                     f"{_pct(percentile)} {format_duration(first.percentile('tpot', percentile))}.")}


def serving_readouts(sweep, index: int, percentile: float, left_out=()) -> dict:
    """The serving view's readouts as numbers and as the text the page shows, for the point
    ``index`` (serving_representative)."""
    slo = sweep.slo
    best = (slo or {}).get("best")
    row, r = sweep.rows()[index], sweep.results[index]
    users = sweep.values[index]
    p = _pct(percentile)
    ttft, tpot = r.percentile("ttft", percentile), r.percentile("tpot", percentile)
    cost = row.get("cost_per_million_output_tokens")
    numbers = {
        "best_users": best, "users": users, "requests_per_s": row["requests_per_s"],
        "output_tokens_per_s_per_gpu": row["output_tokens_per_s_per_gpu"], "per_user_tokens_per_s": row["per_user_tokens_per_s"],
        "ttft_s": ttft, "tpot_s": tpot, "percentile": percentile, "cost_per_million_output_tokens": cost,
    }
    at = f"at {_users(users)}"
    gpu_sub = f"{at}; {format_rate(row['requests_per_s'], 'requests/s')}"
    if cost is not None:
        gpu_sub += f"; ${format_number(cost)} per million output tokens"
    target = lambda key: "" if not slo or slo.get(key) is None else f"; target {format_typed_ms(slo[key])}"  # noqa: E731
    text = {
        "best_name": "Best concurrency within the SLO" if slo else "Highest concurrency swept",
        "best": _users(best) if best is not None else ("none" if slo else _users(users)),
        "best_sub": (targets_text(slo) if best is not None else
                     (f"none of {sweep.values[0]:,} to {sweep.values[-1]:,} users meets {targets_text(slo)}" if slo
                      else "no TTFT or TPOT target given")) + ("" if not left_out else
                                                               f"; {_users(left_out[-1])} left out (bound)"),
        "gpu": format_rate(row["output_tokens_per_s_per_gpu"]),
        "gpu_sub": gpu_sub,
        "user": format_rate(row["per_user_tokens_per_s"]),
        "user_sub": (f"{at}: 1 / median TPOT ({format_duration(row['tpot_p50_s'])})" if row["tpot_p50_s"] is not None
                     else f"{at}: one output token, no TPOT"),
        "ttft_name": f"TTFT {p}",
        "ttft": format_duration(ttft),
        "ttft_sub": f"{at}; p50 {format_duration(row['ttft_p50_s'])}" + target("ttft_s"),
        "tpot_name": f"TPOT {p}",
        "tpot": format_duration(tpot),
        "tpot_sub": f"{at}; p50 {format_duration(row['tpot_p50_s'])}" + target("tpot_s"),
    }
    return {**numbers, "text": text}


def serving_sentence(sweep, index: int, model_name: str, machine_name: str, gpus: int, input_len: int, output_len: int,
                     percentile: float) -> str:
    """E.g. 'Llama 3 8B on one H100 SXM, 1,024-token prompts and 256-token answers: up to 128
    concurrent users meet TTFT p90 <= 500 ms and TPOT p90 <= 30 ms, at 6,935 output tokens/s per GPU
    and 55 tokens/s per user.'"""
    where = f"{model_name} on {'one' if gpus == 1 else f'{gpus:,}'} {machine_name}{'' if gpus == 1 else 's'}"
    work = f"{input_len:,}-token prompt{'s' if input_len != 1 else ''} and {output_len:,}-token answer{'s' if output_len != 1 else ''}"
    row, r = sweep.rows()[index], sweep.results[index]
    users = sweep.values[index]
    speeds = f"{format_rate(row['output_tokens_per_s_per_gpu']).replace('tokens/s', 'output tokens/s')} per GPU"
    if row["per_user_tokens_per_s"] is not None:
        speeds += f" and {format_rate(row['per_user_tokens_per_s'])} per user"
    slo = sweep.slo
    if slo and slo.get("best") is not None:
        return f"{where}, {work}: up to {users:,} concurrent user{'s' if users != 1 else ''} meet {targets_text(slo)}, at {speeds}."
    if slo:
        first = sweep.results[0]
        return (f"{where}, {work}: no concurrency from {sweep.values[0]:,} to {_users(sweep.values[-1])} meets "
                f"{targets_text(slo)}; {_users(sweep.values[0])} alone sees TTFT {_pct(percentile)} "
                f"{format_duration(first.percentile('ttft', percentile))} and TPOT {_pct(percentile)} "
                f"{format_duration(first.percentile('tpot', percentile))}.")
    return (f"{where}, {work}: at {_users(users)}, {speeds}, TTFT {_pct(percentile)} "
            f"{format_duration(r.percentile('ttft', percentile))}.")


def bound_text(bound: dict) -> str:
    """What the view's bound did: the requests per point, and the points it left out."""
    text = ("Each point simulates 8 requests per user, at most 2,000 (one per user past 2,000 users), seed 0, "
            f"within about {bound['budget_s']:g} s of simulation a request")
    if bound["left_out"]:
        left = bound["left_out"]
        text += (f"; {', '.join(f'{u:,}' for u in left)} users left out (they would simulate past that bound: "
                 f"`roofline serving --sweep ... --requests N` runs them)")
    return text + "."


def serving_payload(sweep, step, engine, q, bound: dict, model_name: str) -> dict:
    """The /api/serving body: the library's ``ServingSweep.to_dict()`` plus what the page draws."""
    index = serving_representative(sweep)
    best = (sweep.slo or {}).get("best")
    m = step.machine
    gpus = sweep.results[0].gpus
    charts = serving_charts(sweep, index if best is not None else None, q.percentile)
    notes = list(sweep.to_dict()["notes"]) + list(step.model.header_lines())
    body = {
        **sweep.to_dict(),
        "model_name": model_name,
        "machine_name": m.name,
        "tensor_parallel": step.tensor_parallel,
        "input_len": q.input_len,
        "output_len": q.output_len,
        "max_users": q.max_users,
        "percentile": q.percentile,
        "launch_overhead_us": q.launch_overhead_us,
        "concurrencies": list(sweep.values),
        "requests_per_point": list(bound["requests"]),
        "bound": {**bound, "text": bound_text(bound)},
        "best_users": best,
        "shown_users": sweep.values[index],
        "verdict": slo_verdict(sweep, q.percentile, bound["left_out"]),
        "readouts": serving_readouts(sweep, index, q.percentile, bound["left_out"]),
        "sentence": serving_sentence(sweep, index, model_name, m.name, gpus, q.input_len, q.output_len, q.percentile),
        "chart": charts["curve"],
        "latency_chart": charts["latency"],
        "breakdown": serving_breakdown(step, sweep.results[index], sweep.values[index]),
        "notes": notes,
        "caption": (f"{sweep.to_dict()['model']}. Closed loop: each user sends its next request when the last one "
                    f"finishes; engine max_seqs {engine.max_seqs:,}, max_tokens {engine.max_tokens:,}, memory fraction "
                    f"{engine.memory_fraction:g}, prefix hits {engine.prefix_hit:g}. {bound_text(bound)}"),
    }
    return json_safe(body)
