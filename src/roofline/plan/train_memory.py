"""Training memory per GPU (docs/planning.md): model states under ZeRO, activations per layer
(Korthikanti et al. 2022, arXiv:2205.05198), the parallel layout, and advice when it does not fit;
the step time and MFU are in training.py.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from roofline.errors import RooflineError, check_choice, check_number
from roofline.machines import get_machine
from roofline.parameters import GPUS, SEQ_LEN
from roofline.plan.memory import MemoryPart, MemoryPlan
from roofline.plan.parallel import shard
from roofline.units import format_si
from roofline.transformer import (active_params, attention_flops_per_token_forward, count_params, flops_per_token,
                                  get_model, model_state_bytes, train_flops_per_forward)


RECOMPUTE = ("none", "selective", "full")
CONVENTIONS = ("6nd", "full")


def train_flops_per_token(model, seq_len: int, convention: str = "6nd", recompute: str = "none") -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) per training token; see the module docstring."""
    cfg = get_model(model)
    check_choice("flops convention", convention, CONVENTIONS)
    check_choice("recompute", recompute, RECOMPUTE)
    if convention == "6nd":
        forward = 2.0 * float(active_params(cfg))
        return train_flops_per_forward() * forward, train_flops_per_forward(recompute == "full") * forward
    model_flops = flops_per_token(cfg, seq_len, "train")
    if recompute == "full":
        return model_flops, flops_per_token(cfg, seq_len, "train", recompute=True)
    if recompute == "selective":  # QK^T, softmax and PV re-run in the backward pass
        return model_flops, model_flops + attention_flops_per_token_forward(cfg, seq_len)
    return model_flops, model_flops


def activation_bytes_per_layer(seq_len, micro_batch, d_model, n_heads, tensor_parallel=1, sequence_parallel=True,
                               recompute="none", attention="naive"):
    """Activations one transformer layer keeps for the backward pass, in bytes (16-bit), from
    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
    (arXiv:2205.05198), Table 2, with s sequence, b micro-batch, h d_model, a heads, t tensor
    parallel:
        no recompute      sbh(34 + 5as/h)                 (t = 1)
                          sbh(10 + 24/t + 5as/(ht))       tensor parallel
                          sbh(34/t + 5as/(ht))            tensor + sequence parallel
        selective         the same without the 5as/h score terms (attention recomputed)
        full              2sbh (only the layer's input is kept)
    The paper counts a GPT layer (4h GELU MLP, dropout); for gated MLPs and GQA it is an estimate.
    With ``attention="flash"`` the a s x s scores are never stored (FlashAttention recomputes them
    in its backward pass), so the 5as/h terms drop as in the selective row."""
    check_choice("recompute", recompute, RECOMPUTE)
    check_choice("attention", attention, ("naive", "flash"))
    s, b, h, a, t = (float(x) for x in (seq_len, micro_batch, d_model, n_heads, tensor_parallel))
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh
    scores = 0.0 if (recompute == "selective" or attention == "flash") else 5.0 * a * s / (h * t)
    linear = 34.0 / t if sequence_parallel else 10.0 + 24.0 / t
    return sbh * (linear + scores)


@dataclass(frozen=True)
class Layout:
    """How ``gpus`` = data x tensor x pipeline, the ZeRO stage, the micro-batch (sequences) and
    the global batch (tokens per optimizer step)."""

    data_parallel: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    zero: int = 0
    micro_batch: int = 1
    global_batch_tokens: float = 0.0
    sequence_parallel: bool = True

    @property
    def gpus(self) -> int:
        return self.data_parallel * self.tensor_parallel * self.pipeline_parallel

    def micro_batches(self, seq_len: int) -> int:
        """Micro-batches each data-parallel rank runs per optimizer step, m = global batch /
        (data x micro-batch x sequence): one when no global batch is set."""
        per = self.data_parallel * self.micro_batch * seq_len
        return max(1, int(round(self.global_batch_tokens / per)))

    def label(self) -> str:
        return (f"data {self.data_parallel} x tensor {self.tensor_parallel} x pipeline {self.pipeline_parallel}, "
                f"ZeRO {self.zero}, micro-batch {self.micro_batch}")


def make_layout(gpus, tensor_parallel=1, pipeline_parallel=1, zero=0, micro_batch=1, seq_len=8192,
                global_batch_tokens=None, sequence_parallel=True) -> Layout:
    """The layout with data_parallel = gpus / (tensor x pipeline); the global batch defaults to one
    micro-batch per data-parallel rank and must be a whole number of such rounds (each rank runs
    whole micro-batches of ``micro_batch`` sequences of ``seq_len`` tokens)."""
    GPUS.check(gpus)
    for name, v in (("tensor_parallel", tensor_parallel), ("pipeline_parallel", pipeline_parallel),
                    ("micro_batch", micro_batch)):
        check_number(name, v, maximum=GPUS.maximum, integer=True)  # no more of a kind than GPUs
    gpus, tp, pp = int(gpus), int(tensor_parallel), int(pipeline_parallel)
    if gpus % (tp * pp):
        raise RooflineError(f"gpus {gpus} must be a multiple of tensor_parallel x pipeline_parallel = {tp * pp}", field="gpus")
    dp = gpus // (tp * pp)
    per_step_min = dp * int(micro_batch) * seq_len
    if global_batch_tokens is None:
        global_batch_tokens = per_step_min
    check_number("global_batch", global_batch_tokens)
    if global_batch_tokens < per_step_min:
        raise RooflineError(f"global_batch {global_batch_tokens:,.0f} tokens is less than one micro-batch per data-parallel rank "
                            f"({dp} x {micro_batch} x {seq_len} = {per_step_min:,} tokens)", field="global_batch")
    rounds = global_batch_tokens / per_step_min
    if rounds != round(rounds):
        lo, hi = math.floor(rounds) * per_step_min, math.ceil(rounds) * per_step_min
        raise RooflineError(f"global_batch {global_batch_tokens:,.0f} tokens is not a whole number of micro-batches per "
                            f"data-parallel rank: it must be a multiple of data {dp} x micro-batch {micro_batch} x sequence "
                            f"{seq_len:,} = {per_step_min:,} tokens (e.g. {lo:,} or {hi:,})", field="global_batch")
    return Layout(dp, tp, pp, int(zero), int(micro_batch), float(global_batch_tokens), bool(sequence_parallel))


def output_layer_bytes(seq_len, micro_batch, d_model, vocab, tensor_parallel=1) -> float:
    """Activations the output layer keeps for the backward pass, in bytes: Korthikanti et al. 2022
    (arXiv:2205.05198) section 4.3, 4sbh/t (1 + v/h) = 4sbh/t + 4sbv/t: the final layer norm's and
    the LM head's 16-bit inputs (2sbh/t each) and the logits, kept in fp32 for the cross entropy
    (4sbv/t, the vocabulary split t ways). The input embedding's dropout mask is left out (Llama
    trains without dropout). A fused linear cross-entropy (Liger, Apple's Cut Cross-Entropy) never
    materialises the logits: this counts the unfused loss."""
    s, b, h, v, t = (float(x) for x in (seq_len, micro_batch, d_model, vocab, tensor_parallel))
    return 4.0 * s * b * h / t * (1.0 + v / h)


def check_pipeline(cfg, layout: Layout) -> int:
    """Layers of the largest pipeline stage, ceil(L / p): the stage that bounds memory and the step's
    pace. p may leave a remainder (Llama 3.1 405B's 126 layers over 16 stages: 14 of 8 and 2 of 7,
    Meta's end stages one layer short for the embedding and LM head); p above L is refused."""
    p, L = layout.pipeline_parallel, cfg.n_layers
    if p > L:
        raise RooflineError(f"pipeline_parallel {p} is more stages than {cfg.name}'s {L} layers", field="pipeline_parallel")
    return -(-L // p)


def stage_layers(n_layers: int, p: int) -> list[int]:
    """Layers per pipeline stage, first to last: ceil(L / p) each, the stages one layer short at
    the ends (first, last, second, second to last, ...), where the embedding and the LM head sit
    (Llama 3.1 405B: 126 layers over 16 stages, 7 + 14 x 8 + 7)."""
    big, short = n_layers - (n_layers // p) * p, p - (n_layers - (n_layers // p) * p)
    if big == 0:
        return [n_layers // p] * p
    counts = [-(-n_layers // p)] * p
    ends = [i for pair in zip(range(p), range(p - 1, -1, -1)) for i in pair]
    for i in list(dict.fromkeys(ends))[:short]:
        counts[i] -= 1
    return counts


def stage_params(cfg, layout: Layout) -> int:
    """Parameters one GPU of the largest pipeline stage holds (its tensor-parallel slice): the
    layers of its stage (stage_layers), the embedding (and learned positions) on the first stage,
    the final norm and the LM head on the last (a tied embedding's copy there too, as Megatron-LM
    keeps it). p = 1: every parameter."""
    cfg = get_model(cfg)
    sh = shard(cfg, layout.tensor_parallel)
    whole = count_params(sh)
    p = layout.pipeline_parallel
    if p <= 1:
        return int(whole["total"])
    per_layer = [sum(layer.parts(sh.d_model).values()) for layer in sh.layers]
    final_norm = whole["norms"] - sum(layer.parts(sh.d_model)["norms"] for layer in sh.layers)
    first_extra = whole["embedding"] + whole["position"]
    last_extra = (whole["lm_head"] or whole["embedding"]) + final_norm
    out, start = [], 0
    for i, n in enumerate(stage_layers(cfg.n_layers, p)):
        out.append(sum(per_layer[start:start + n]) + (first_extra if i == 0 else 0) + (last_extra if i == p - 1 else 0))
        start += n
    return int(max(out))


def stage_note(cfg, layout: Layout) -> str:
    """The stages' layer counts when p does not divide L ("" when it does)."""
    p, L = layout.pipeline_parallel, cfg.n_layers
    if L % p == 0:
        return ""
    big = L - (L // p) * p  # stages of ceil(L / p) layers; the rest hold one fewer
    return (f"pipeline: {L} layers over {p} stages: {big} of {-(-L // p)} and {p - big} of {L // p} layers; the largest "
            "stage bounds memory and time (counted here)")


def train_memory(model="llama3-8b", machine="h100-sxm", layout: Layout | None = None, seq_len=8192,
                 recompute="none", attention="flash") -> MemoryPlan:
    """Memory per GPU: model states (ZeRO over the data-parallel ranks) of the GPU's tensor and
    pipeline slice, and the activations of the first pipeline stage. Under 1F1B that stage has
    min(p, m) micro-batches in flight (m per step per data-parallel rank), each through its L / p
    layers: L layers' worth once m >= p (Korthikanti et al. section 4.2.3), m L / p below that."""
    cfg = get_model(model)
    m = get_machine(machine)
    layout = layout or make_layout(1, seq_len=seq_len)
    SEQ_LEN.check(seq_len)
    per_stage = check_pipeline(cfg, layout)
    in_flight = min(layout.pipeline_parallel, layout.micro_batches(seq_len))
    params = stage_params(cfg, layout)  # the largest stage's, its end's embedding or LM head included
    states = model_state_bytes(params, layout.data_parallel, layout.zero)
    heads = getattr(cfg.first_attention, "heads", 0)  # the score terms of attention layers (0 for SSM-only models)
    per_layer = activation_bytes_per_layer(seq_len, layout.micro_batch, cfg.d_model, heads, layout.tensor_parallel,
                                           layout.sequence_parallel, recompute, attention)
    output = output_layer_bytes(seq_len, layout.micro_batch, cfg.d_model, cfg.vocab, layout.tensor_parallel)
    acts = in_flight * per_stage * per_layer
    stage_notes = ()
    if layout.pipeline_parallel > 1:  # the LM head sits on the last stage, one micro-batch in flight under 1F1B
        last_layers = stage_layers(cfg.n_layers, layout.pipeline_parallel)[-1]
        last = last_layers * per_layer + output
        if last > acts:
            stage_notes = (f"pipeline: the last stage's activations (1 micro-batch in flight under 1F1B, its "
                           f"{last_layers} layers and the output layer) "
                           f"exceed the first stage's {format_si(acts, 'B')}: counted here",)
            acts, extra = last - output, output
        else:
            stage_notes = (f"pipeline: the output layer's {format_si(output, 'B')} of activations sits on the last stage (1 "
                           f"micro-batch in flight under 1F1B), whose {format_si(last, 'B')} stays under the first stage's "
                           f"{format_si(acts, 'B')}, counted here",)
            extra = 0.0
    else:
        extra = output
    parts = tuple(MemoryPart(k, v) for k, v in states.items()) + (MemoryPart("activations", acts),)
    if extra:
        parts += (MemoryPart("output_layer", extra),)
    settings = (("gpus", layout.gpus), ("data_parallel", layout.data_parallel), ("tensor_parallel", layout.tensor_parallel),
                ("pipeline_parallel", layout.pipeline_parallel), ("zero", layout.zero), ("micro_batch", layout.micro_batch),
                ("seq_len", int(seq_len)), ("recompute", recompute), ("attention", attention),
                ("sequence_parallel", layout.sequence_parallel),
                ("params_per_gpu", params), ("micro_batches_in_flight", in_flight), ("layers_per_stage", per_stage))
    notes = cfg.header_lines() + m.capacity_notes
    notes += ("activations: Korthikanti et al. 2022, Table 2 (GPT layer; an estimate for gated MLPs and GQA); the output "
              "layer's 4sbh/t (1 + v/h), section 4.3: fp32 logits for an unfused cross entropy (a fused one, as Liger's, "
              "keeps none of them)",) + stage_notes
    unusual = sorted({k.mixer.kind for k in cfg.kinds if k.mixer is not None and (k.is_ssm or k.mixer.span or getattr(k.mixer, "index_topk", 0) or not k.is_attention
                                                                                  or type(k.mixer).__name__ != "Attention")}
                     | ({"MoE"} if cfg.is_moe else set()))
    if unusual:
        notes += (f"activations of {', '.join(unusual)} layers use the same per-layer formula with the first attention "
                  "layer's heads: an estimate, not a count",)
    if stage_note(cfg, layout):
        notes += (stage_note(cfg, layout),)
    if layout.pipeline_parallel > 1:
        notes += (f"pipeline: the first stage holds min(p {layout.pipeline_parallel}, m {layout.micro_batches(seq_len)}) = "
                  f"{in_flight} micro-batch{'es' if in_flight != 1 else ''} in flight x {per_stage} layers (1F1B); the model states are the largest "
                  "stage's (its layers, and on an end stage the embedding or the LM head)",)
    plan = MemoryPlan("train", cfg.key or cfg.name, m.key or m.name, parts, m.capacity_bytes, settings, (), "", notes, m.name)
    if plan.fits is False:
        plan = dataclasses.replace(plan, advice=_train_advice(cfg, m, layout, seq_len, recompute, attention))
    return plan


def _advice_order(zero: int, recompute: str) -> list[tuple[int, str]]:
    """The (ZeRO stage, recompute) changes from (zero, recompute) in order of what they cost:
    ZeRO 1 and 2 first (the same bytes as the all-reduce they replace, Rajbhandari et al. 2020),
    then selective recompute (attention's scores re-run, a few per cent of the FLOPs), then ZeRO 3
    (1.5x the data-parallel traffic), full recompute last (a third more compute: 8N against 6N)."""
    rcs = RECOMPUTE[RECOMPUTE.index(recompute):]
    cheap = [rc for rc in rcs if rc != "full"]
    order = [(z, rc) for rc in cheap for z in range(zero, 3)] + [(3, rc) for rc in cheap]
    order += [(z, "full") for z in range(zero, 4) if "full" in rcs]
    return [c for c in dict.fromkeys(order) if c != (zero, recompute)]


def _train_advice(cfg, m, layout, seq_len, recompute, attention) -> str:
    """The cheapest change of ZeRO stage and recompute that fits (_advice_order)."""
    for zero, rc in _advice_order(layout.zero, recompute):
        trial = train_memory(cfg, m, dataclasses.replace(layout, zero=zero), seq_len, rc, attention)
        if trial.fits:
            how = "no recompute" if rc == "none" else f"{rc} recompute"
            return f"It fits with ZeRO {zero} and {how} ({trial.verdict.split(': ', 1)[1]})."
    return "Not even ZeRO 3 with full recompute fits: add tensor or pipeline parallelism, or GPUs."
