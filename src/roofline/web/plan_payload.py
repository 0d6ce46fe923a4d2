"""What the workshop's whole-model and decode-versus-batch views show, built from the planning
library's results (plan.ModelPrediction, capacity.MemoryPlan, capacity.DecodePlan): readouts,
a sentence, and the series of their charts. Pure functions (results in, plain dict out) and no
web stack, so the page's JavaScript only places numbers and text it is given.

Times are the library's seconds, shown in ms or µs at this edge; bytes are shown in decimal GB,
as ``roofline memory`` and ``roofline decode`` print them.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.capacity import DecodePlan, MemoryPlan
from roofline.plan import ModelPrediction
from roofline.plots import COMPUTE_BLUE, MEMORY_RED, PART_COLORS
from roofline.units import GIGA, MS, US, format_si
from roofline.web.payload import format_share, format_us, json_safe

PAD_LOG10 = 0.06  # room either side of the batch axis (in decades) so the end ticks show
CURVE_POINTS = 240  # log-spaced batches on the decode curves; the marked batches are added exactly
NON_BLOCK_PARTS = ("embedding", "final norm", "LM head")  # model_ops' names for the ops outside the blocks


# -- text at the edge -----------------------------------------------------------------------------

def format_time(seconds: float) -> str:
    """A model-sized time: '6.43 ms', '28.1 ms', '281 ms', '2.83 s', '1,635 s'; µs below 0.1 ms."""
    if not math.isfinite(seconds):
        return "—"
    if seconds < 100 * US:
        return format_us(seconds)
    ms = seconds / MS
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"
    return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:,.0f} s"


def format_rate(tokens_per_s: float) -> str:
    """'155 tokens/s', '4,616 tokens/s', '0.52 tokens/s'."""
    if not math.isfinite(tokens_per_s):
        return "—"
    return f"{tokens_per_s:,.0f} tokens/s" if tokens_per_s >= 10 else f"{tokens_per_s:.2g} tokens/s"


def format_gb(n_bytes: float) -> str:
    """Decimal bytes, as the CLI prints them: '16.1 GB', '537 MB'."""
    return format_si(n_bytes, "B")


def _batch_phrase(batch: int) -> str:
    return "one sequence" if batch == 1 else f"a batch of {batch:,} sequences"


def _bound_word(bound: str) -> str:
    return f"{bound}-bound"


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
    lines = [f"<b>{part['name']}</b> — {format_time(part['time_s'])} ({format_share(part['time_s'] / total_s)} of the pass)",
             f"FLOPs: {format_si(part['flops'], 'FLOP')} · bytes: {format_si(part['bytes'], 'B')}"]
    if len(part["ops"]) > 1:
        biggest = sorted(part["ops"], key=lambda op: op["time_s"], reverse=True)[:6]
        lines += [f"{op['name']}: {format_time(op['time_s'])}, {_bound_word(op['bound'])}" for op in biggest]
    else:
        lines.append(_bound_word(part["ops"][0]["bound"]))
    return "<br>".join(lines)


def parts_chart(parts: list[dict], total_s: float) -> dict:
    """Stacked horizontal bars in ms: each part's memory-bound and compute-bound time."""
    return {
        "labels": [p["name"] for p in parts],
        "memory_ms": [(p["memory_time_s"] + p["link_time_s"]) / MS for p in parts],
        "compute_ms": [p["compute_time_s"] / MS for p in parts],
        "total_ms": [p["time_s"] / MS for p in parts],
        "text": [f"{format_time(p['time_s'])} ({format_share(p['time_s'] / total_s)})" for p in parts],
        "hover": [_part_hover(p, total_s) for p in parts],
        "x_max_ms": max(p["time_s"] for p in parts) / MS * 1.3,
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
        {"name": labels.get(p.name, p.name), "gb": p.bytes / GIGA, "color": PART_COLORS.get(p.name, "#999999"),
         "hover": f"<b>{labels.get(p.name, p.name)}</b>: {format_gb(p.bytes)}"}
        for p in memory.parts
    ]
    name = memory.machine_name or memory.machine
    return {
        "label": "weights + KV cache",
        "segments": segments,
        "total_gb": total_gb,
        "total_text": f"{format_gb(memory.total_bytes)}" + ("" if memory.fits is None else (" fits" if memory.fits else " does not fit")),
        "fits": memory.fits,
        "capacity_gb": cap_gb,
        "capacity_text": None if cap_gb is None else f"{name}: {format_gb(memory.capacity_bytes)}",
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
        "latency": format_time(pred.time_s),
        "latency_sub": (f"{B:,} × {T:,}-token prompt{'s' if B != 1 else ''}" if prefill
                        else f"batch {B:,} at {S:,} tokens of context"),
        "throughput_name": "Prefill throughput" if prefill else "Decode throughput",
        "throughput": format_rate(pred.tokens_per_s),
        "throughput_sub": "prompt tokens through the model" if prefill else f"{B:,} new token{'s' if B != 1 else ''} per step",
        "bound": format_share(pred.memory_bound_share),
        "bound_sub": f"of the time in memory-bound ops; matmuls {_bound_word(pred.gemm_bound)}",
        "bytes_name": "Arithmetic" if prefill else "Weights + KV cache read",
        "bytes": format_si(pred.flops, "FLOP") if prefill else f"{format_gb(weights_bytes)} + {format_gb(kv_bytes)}",
        "bytes_sub": (f"over {format_gb(pred.bytes)} moved: {pred.intensity:,.0f} FLOP/byte" if prefill
                      else ("KV reads never overtake weights" if kv_crossover_context is None
                            else f"KV reads overtake weights from {kv_crossover_context:,} tokens")),
        "memory": format_gb(memory.total_bytes),
        "memory_sub": {True: f"of {format_gb(cap)}: fits ({memory.total_bytes / cap:.0%})" if cap else "fits",
                       False: f"of {format_gb(cap)}: does not fit" if cap else "does not fit",
                       None: "the machine gives no capacity"}[memory.fits],
    }
    return {**numbers, "text": text}


def model_sentence(pred: ModelPrediction, model_name: str, n_layers: int, kv_crossover_context: int) -> str:
    """One sentence for the pass, e.g. 'Prefill of one 8,192-token sequence through Llama 3 8B (32
    blocks, embedding, final norm and LM head) on the H100 SXM takes 281 ms to the first token:
    29,190 prompt tokens/s, 41% of the time in memory-bound ops.'"""
    B, T, S = int(pred.batch), int(pred.tokens), int(pred.context)
    machine = pred.machine_spec.name
    whole = f"{model_name} ({n_layers} blocks, embedding, final norm and LM head)"
    share = f"{format_share(pred.memory_bound_share)} of the time in memory-bound ops"
    if pred.phase == "prefill":
        who = f"one {T:,}-token sequence" if B == 1 else f"a batch of {B:,} {T:,}-token sequences"
        return (f"Prefill of {who} through {whole} on the {machine} takes {format_time(pred.time_s)} to the first token: "
                f"{format_rate(pred.tokens_per_s).replace('tokens/s', 'prompt tokens/s')}, {share}.")
    if kv_crossover_context is None:
        over = "KV-cache reads never overtake the weight reads (the cache stops growing: windowed or state-space layers)"
    elif S >= kv_crossover_context:
        over = "KV-cache reads already exceed the weight reads"
    else:
        over = f"KV-cache reads would overtake weight reads at {kv_crossover_context:,} tokens of context"
    return (f"One decode step of {_batch_phrase(B)} at {S:,} tokens of context through {whole} on the {machine} takes "
            f"{format_time(pred.time_s)}: {format_rate(pred.tokens_per_s)}. It reads {format_gb(pred.weight_bytes)} of weights "
            f"and {format_gb(pred.kv_bytes)} of KV cache; {over} at this batch.")


def _cost_text(pred: ModelPrediction) -> str:
    cm = pred.cost_model
    return (f"e_c = {cm.compute_efficiency:g}, e_m = {cm.memory_efficiency:g}, {format_us(cm.launch_overhead_s)} per launch, "
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
        "caption": (f"The whole {model_name} forward pass ({pred.phase}) in {pred.precision.label()} on the {m.name} "
                    f"(peak {format_si(m.peak(pred.precision.compute), 'FLOP/s')}, {format_si(m.bandwidth, 'B/s')}), "
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
    return {"values": values, "text": [f"{v:,.0f}" if v >= 1 else f"{v:g}" for v in values]}


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
    return (f"<b>batch {row['batch']:,}</b><br>step: {format_time(row['step_s'])}<br>{format_rate(row['tokens_per_s'])}"
            f"<br>step {_bound_word(row['bound'])}; matmuls {_bound_word(row['gemm_bound'])}{fits}")


def decode_chart(plan: DecodePlan, batch: int) -> dict:
    """The curves (tokens/s and step latency in ms at each batch of the plan's curve, thinned to
    log-spaced points), the tabulated batches as markers coloured by the step's bound, the
    compute-bound batch, the region where weights + KV cache no longer fit, and the page's batch."""
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
    step_ticks = _log_ticks_125(float(step_s.min()) / MS, float(step_s.max()) / MS)
    return {
        "batch": shown.tolist(),
        "tokens_per_s": tps.tolist(),
        "step_ms": (step_s / MS).tolist(),
        "hover": [f"batch {b:,}: {format_time(s)}, {format_rate(t)}" for b, s, t in zip(shown.tolist(), step_s, tps)],
        "points": {
            "batch": [r["batch"] for r in rows],
            "tokens_per_s": [r["tokens_per_s"] for r in rows],
            "step_ms": [r["step_s"] / MS for r in rows],
            "bound": [r["bound"] for r in rows],
            "hover": [_row_hover(r) for r in rows],
        },
        "here": {"batch": batch, "tokens_per_s": here["tokens_per_s"], "step_ms": here["step_s"] / MS,
                 "text": f"batch {batch:,}", "hover": _row_hover(here),
                 "textposition": "top center" if _anchor(batch, top) == "left" else "top left"},
        "x_max": top,
        "x_range_log10": [-PAD_LOG10, math.log10(top) + PAD_LOG10],
        "x_end": 10 ** (math.log10(top) + PAD_LOG10),  # where the not-fitting region's shading ends
        "ticks": _log2_ticks(top),
        "axes": {  # the y axis of each chart, and the height (0 to 1) of the not-fitting note, clear of the curve
            "tokens_per_s": {"type": "linear", "range": [0.0, float(tps.max()) * 1.15], "title": "tokens/s (all sequences)",
                             "note_y": 0.5, "note_yanchor": "middle"},
            "step_ms": {"type": "log", "title": "step time (ms)", "tickvals": step_ticks["values"], "ticktext": step_ticks["text"],
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
                        (f"weights + KV cache<br>exceed {format_gb(cap)}<br>beyond batch {mb:,}" if mb > 0
                         else f"weights + KV cache<br>exceed {format_gb(cap)}<br>at any batch")),
        "colors": {"memory": MEMORY_RED, "compute": COMPUTE_BLUE, "link": "#2ca02c"},
    }


def _tokens_text(n) -> str:
    """A crossover context for a readout: 'never' when the cache stops growing first."""
    return "never" if n is None else f"{n:,} tokens"


def decode_readouts(plan: DecodePlan, batch: int, kv_crossover_context: int) -> dict:
    """The decode view's readouts as numbers and as the text the page shows."""
    here = next(r for r in plan.rows() if r["batch"] == batch)
    cb, scb, mb = plan.compute_bound_batch, plan.step_compute_bound_batch, plan.max_batch_in_memory
    S = int(plan.step.context)
    cap = plan.memory.capacity_bytes
    numbers = {
        "step_s": here["step_s"], "step_ms": here["step_s"] / MS, "tokens_per_s": here["tokens_per_s"], "fits": here["fits"],
        "compute_bound_batch": cb, "step_compute_bound_batch": scb, "max_batch_in_memory": mb,
        "kv_overtakes_weights_context": kv_crossover_context,
        "kv_overtakes_weights_context_batch_1": plan.kv_crossover_context,
    }
    text = {
        "step_name": f"Decode step at batch {batch:,}",
        "step": format_time(here["step_s"]),
        "step_sub": f"step {_bound_word(here['bound'])}; matmuls {_bound_word(here['gemm_bound'])}",
        "throughput_name": f"Throughput at batch {batch:,}",
        "throughput": format_rate(here["tokens_per_s"]),
        "throughput_sub": {True: "fits in memory", False: "does not fit in memory", None: "memory capacity unknown"}[here["fits"]],
        "compute_bound": "—" if cb is None else f"batch {cb:,}",
        "compute_bound_sub": ("whole step stays memory-bound to 65,536" if scb is None else f"whole step from batch {scb:,}")
                             if cb is not None else "matmuls stay memory-bound up to 65,536",
        "max_batch": "—" if mb is None else f"{mb:,}",
        "max_batch_sub": ("machine gives no capacity" if cap is None
                          else f"sequences of {S:,} tokens in {format_gb(cap)}"),
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
    text = (f"{model_name} decoding at {S:,} tokens of context on the {plan.step.machine_spec.name}: "
            f"{format_rate(one['tokens_per_s'])} at batch {one['batch']:,}")
    if batch != one["batch"]:
        text += f", {format_rate(here['tokens_per_s'])} at batch {batch:,}"
    text += "; the matmuls " + (f"turn compute-bound at batch {cb:,}" if cb else "stay memory-bound up to batch 65,536")
    cap = plan.memory.capacity_bytes
    if mb is not None and cap is not None:
        if mb == 0:
            text += f", but the weights and one sequence's KV cache do not fit in {format_gb(cap)}"
        elif cb is not None and mb < cb:
            text += f", but only {mb:,} sequence{'s' if mb != 1 else ''} fit in {format_gb(cap)}"
        else:
            text += f", and up to {mb:,} sequences fit in {format_gb(cap)}"
    return text + "."


def decode_payload(plan: DecodePlan, batch: int, kv_crossover_context: int, model_name: str, launch_overhead_us: float) -> dict:
    """The /api/decode body: the library's ``DecodePlan.to_dict()`` (rows at 1, 2, 4, ..., 1,024 and
    the page's batch) plus what the page draws."""
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
        "readouts": decode_readouts(plan, batch, kv_crossover_context),
        "sentence": decode_sentence(plan, batch, model_name),
        "chart": decode_chart(plan, batch),
        "caption": (f"{model_name} decode steps in {s.precision.label()} on the {m.name} "
                    f"(peak {format_si(m.peak(s.precision.compute), 'FLOP/s')}, {format_si(m.bandwidth, 'B/s')}, "
                    f"memory {format_gb(plan.memory.capacity_bytes) if plan.memory.capacity_bytes else 'unknown'}), "
                    f"{s.attention} attention, {_cost_text(s)}. Markers: the step's bound at each tabulated batch "
                    "(red memory-bound, blue compute-bound); grey: weights + KV cache do not fit."),
    }
    return json_safe(body)
