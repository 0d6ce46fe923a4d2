"""What the workshop's whole-model view shows (/api/model), built from the planning library's
results (plan.inference.ModelPrediction with its plan.memory.MemoryPlan): readouts, a sentence,
the parts' bars and the memory bar. Pure functions (results in, plain dict out) and no web stack,
so the page's JavaScript only places numbers and text it is given.

Times are the library's seconds, written by roofline.units (format_duration: about three
significant figures, auto-scaled), the parts chart's time axis in the unit of its largest part
(payload.time_axis); bytes in decimal SI units, as ``roofline memory`` prints them.
"""

from __future__ import annotations

from roofline.palette import COMPUTE_BLUE, MEMORY_RED, PART_COLORS, UNNAMED_PART_GREY
from roofline.plan.inference import ModelPrediction
from roofline.plan.memory import MemoryPlan
from roofline.units import GIGA, MS, format_duration, format_number, format_rate, format_share, format_si
from roofline.web.payload import json_safe, memory_warnings, time_axis
from roofline.web.plan_shared import bound_word, fit_message, machine_phrase, setup_phrase, view_body

NON_BLOCK_PARTS = ("embedding", "final norm", "LM head")  # model_ops' names for the ops outside the blocks


def _batch_phrase(batch: int) -> str:
    return "one sequence" if batch == 1 else f"a batch of {batch:,} sequences"


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
        lines += [f"{op['name']}: {format_duration(op['time_s'])}, {bound_word(op['bound'])}" for op in biggest]
    else:
        lines.append(bound_word(part["ops"][0]["bound"]))
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


def memory_chart(memory: MemoryPlan) -> dict:
    """One stacked bar in GB (weights, KV cache, then a step's activations) against the share of the
    machine's memory an engine uses."""
    labels = {"weights": "weights", "kv_cache": "KV cache", "activations": "a step's activations"}
    total_gb = memory.total_bytes / GIGA
    cap_gb = None if memory.capacity_bytes is None else memory.capacity_bytes / GIGA
    segments = [
        {"name": labels.get(p.name, p.name), "gb": p.bytes / GIGA, "color": PART_COLORS.get(p.name, UNNAMED_PART_GREY),
         "hover": f"<b>{labels.get(p.name, p.name)}</b>: {format_si(p.bytes, 'B')}"}
        for p in memory.parts
    ]
    name = memory.machine_name or memory.machine
    share = dict(memory.settings).get("memory_fraction")  # an engine's share of the memory, said beside the line
    return {
        "label": "weights + KV cache + activations",
        "segments": segments,
        "total_gb": total_gb,
        "total_text": f"{format_si(memory.total_bytes, 'B')}" + ("" if memory.fits is None else (" fits" if memory.fits else " does not fit")),
        "fits": memory.fits,
        "colors": {"not_fit": MEMORY_RED},
        "capacity_gb": cap_gb,
        "capacity_text": None if cap_gb is None else f"{name}: {format_si(memory.capacity_bytes, 'B')}" + (
            f" ({share:g} of {format_si(memory.capacity_bytes / share, 'B')})" if share else ""),
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
    from roofline.plan.limits import MAX_CONTEXT

    if mc >= MAX_CONTEXT:  # the search's cap, not a limit: windowed or state-space layers stop the cache growing
        grow = (f"{'one sequence' if batch == 1 else f'a batch of {batch:,}'} can grow without bound (the cache stops "
                f"growing: windowed or state-space layers; searched to {MAX_CONTEXT:,} tokens)")
    else:
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
        "bound_sub": f"of the time in memory-bound ops; matmuls {bound_word(pred.gemm_bound)}",
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
    machine = machine_phrase(pred)
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


def attention_note(attention: str, n_layers: int | None = None, command: str = "roofline model") -> dict:
    """Which attention the view priced, said on the page: the whole-model and decode views take
    flash (fused) by default, as `roofline model` does, while the One layer view takes unfused, so L
    times the layer view's time is not the pass (issue 38: 32 x 8,756 us is not 208 ms)."""
    if attention == "flash":
        text = (f"Attention: flash (fused), as `{command}` prices it by default. The One layer view's "
                f"default is unfused (QKᵀ, softmax and PV as three ops, the scores through memory), so "
                f"{'L' if n_layers is None else f'{n_layers:,}'} times its layer time is not this pass: set Attention alike in both views to compare them.")
    else:
        text = ("Attention: unfused (QKᵀ, softmax and PV as three ops, the scores through memory), as the One layer "
                f"view's default; this view's default, as `{command}`, is flash (fused).")
    return {"attention": attention, "text": text}


def model_payload(pred: ModelPrediction, memory: MemoryPlan, kv_crossover_context: int, model_name: str, n_layers: int,
                  launch_overhead_us: float) -> dict:
    """The /api/model body: the library's ``ModelPrediction.to_dict()``, the memory plan's
    ``to_dict()`` and what the page draws."""
    parts = model_parts(pred, n_layers)
    total_s = float(pred.time_s)
    m = pred.machine_spec
    return json_safe(view_body(
        pred, model_name, m, n_layers=n_layers, launch_overhead_us=launch_overhead_us,
        time_to_first_token_s=total_s if pred.phase == "prefill" else None,
        step_s=total_s if pred.phase == "decode" else None, kv_overtakes_weights_context=kv_crossover_context,
        parts=parts, memory=memory.to_dict(), fit=fit_message(memory), attention_note=attention_note(pred.attention, n_layers),
        memory_limits_text=_limits_text(memory, int(pred.batch), int(pred.context)),
        readouts=model_readouts(pred, memory, kv_crossover_context),
        sentence=model_sentence(pred, model_name, n_layers, kv_crossover_context),
        parts_chart=parts_chart(parts, total_s), memory_chart=memory_chart(memory),
        warnings=memory_warnings([(c.kernel.name, c.kernel.category, float(c.kernel.bytes)) for c in pred.ops],
                                 m.capacity_bytes, m.name, pred.attention == "naive"),
        caption=(f"The whole {model_name} forward pass ({pred.phase}) {setup_phrase(pred)}. Memory: weights + KV cache "
                 "only (no activations or runtime workspace).")))
