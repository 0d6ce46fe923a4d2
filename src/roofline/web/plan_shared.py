"""What the whole-model, decode-versus-batch and serving views (web.model_view, web.decode_view,
web.serving_view) share: the phrases that name a bound, a machine, its tensor parallelism and the
cost model; the head of a view's body; the memory verdict's message; and the log axes' ticks. Pure functions, no web stack.
"""

from __future__ import annotations

import math

from roofline.plan.inference import ModelPrediction
from roofline.plan.memory import MemoryPlan
from roofline.units import format_duration, format_number, format_si

PAD_LOG10 = 0.06  # room either side of a log batch or users axis (in decades) so the end ticks show


# -- text at the edge -----------------------------------------------------------------------------

def bound_word(bound: str) -> str:
    """'memory-bound', 'compute-bound', 'link-bound'."""
    return f"{bound}-bound"


def machine_phrase(pred: ModelPrediction) -> str:
    """'the H100 SXM', or under tensor parallelism 'the H100 SXM × 2 (tensor-parallel)'."""
    t = int(pred.tensor_parallel)
    return pred.machine_spec.the_name + (f" × {t} (tensor-parallel)" if t > 1 else "")


def tp_text(pred: ModelPrediction) -> str:
    """', tensor-parallel over 2 GPUs joined by nvlink (weights, KV cache and bytes per GPU)', or
    '' on one GPU."""
    t = int(pred.tensor_parallel)
    if t == 1:
        return ""
    link = next((op.kernel.link for op in pred.ops if op.kernel.link), None)
    return (f", tensor-parallel over {t} GPUs" + (f" joined by {link}" if link else "")
            + " (weights, KV cache and bytes per GPU)")


def cost_text(pred: ModelPrediction) -> str:
    """The cost model for a caption: 'e_c = 0.7, e_m = 0.85, 3 µs per launch, overlap 1'."""
    cm = pred.cost_model
    launch = "per pass (one CUDA graph launch)" if cm.cuda_graph else "per launch"
    return (f"e_c = {cm.compute_efficiency:g}, e_m = {cm.memory_efficiency:g}, {format_duration(cm.launch_overhead_s)} {launch}, "
            f"overlap {cm.overlap:g}")


def setup_phrase(pred: ModelPrediction, memory: str | None = None) -> str:
    """What a view's caption says it ran: 'in bf16 on the H100 SXM (peak 989 TFLOP/s, 3.35 TB/s[,
    memory MEMORY]), tensor-parallel ..., flash attention, e_c = 0.7, ...' (tp_text, cost_text)."""
    m = pred.machine_spec
    held = f", memory {memory}" if memory is not None else ""
    return (f"in {pred.precision.label()} on {m.the_name} (peak {format_si(m.peak(pred.precision.compute), 'FLOP/s')}, "
            f"{format_si(m.bandwidth, 'B/s')}{held}){tp_text(pred)}, {pred.attention} attention, {cost_text(pred)}")


def view_body(result, model_name: str, machine, **fields) -> dict:
    """The head of a whole-model view's body (web.model_view, web.decode_view): the library's
    ``result.to_dict()``, the model's and the ``machine``'s names, then the view's own ``fields`` in order."""
    return {**result.to_dict(), "model_name": model_name, "machine_name": machine.name, **fields}


def fit_message(memory: MemoryPlan) -> dict:
    """The plan's verdict with a one-word state for the page's colour (fits, does-not-fit,
    unknown), a headline and a mark."""
    state = "unknown" if memory.fits is None else ("fits" if memory.fits else "does-not-fit")
    headline = {"fits": "Fits in memory", "does-not-fit": "Does not fit in memory", "unknown": "Memory capacity unknown"}[state]
    mark = {"fits": "✓", "does-not-fit": "✗", "unknown": "?"}[state]
    return {"state": state, "headline": headline, "mark": mark, "text": memory.verdict}


# -- log axes -------------------------------------------------------------------------------------

def log_ticks_125(lo: float, hi: float) -> dict:
    """Ticks at 1, 2 and 5 times each power of ten that spans ``lo`` to ``hi`` (a log axis)."""
    values = [m * 10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    values = [v for v in values if lo / 1.5 <= v <= hi * 1.5]
    return {"values": values, "text": [format_number(v) for v in values]}


def log2_ticks(top: int, most: int = 11) -> dict:
    """Powers of two from 1 to ``top``, every other one (or fewer) beyond ``most`` ticks."""
    values = [2**k for k in range(int(math.log2(top)) + 1)]
    values = values[:: math.ceil(len(values) / most)]
    return {"values": values, "text": [f"{v:,}" for v in values]}
