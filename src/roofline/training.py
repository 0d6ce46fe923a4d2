"""Training plans (docs/planning.md): FLOPs, wall-clock, GPU-hours and cost at an MFU on N GPUs; HFU against
MFU; memory per GPU under data, tensor and pipeline parallelism and ZeRO stages 1-3; and the
collectives of one optimizer step (tensor-parallel all-reduces over NVLink, the gradient
all-reduce over InfiniBand) against its compute, so a user sees when the link is the bound.

FLOPs conventions (the roofline chapter, section 2.3 and exercise 4):
  "6nd"   6 N per token, N = the parameters a token uses (all of them for a dense model, the
          active ones for MoE); full recompute executes 8 N. The chapter's exercise 4: 7.2e23, 20.6 days.
  "full"  6 N_matmul + 12 L h s per token (the embedding is a gather, the LM head a matmul;
          attention counted in full, the PaLM / Megatron convention); full recompute executes
          8 N_matmul + 16 L h s, selective recompute re-runs attention's 4 L h s.
MFU = model FLOPs / (GPUs x peak x time); HFU counts the FLOPs executed, recomputation included.

Links: the tensor-parallel all-reduces default to the machine's scale-up link (plan.SCALE_UP_LINKS);
the data-parallel collectives to the scale-up link within one node, and across nodes to
infiniband, else roce, else ici (a TPU pod), else pcie (a scale-out NIC sits behind PCIe, so PCIe
bounds it), else the scale-up link; a fallback is said in the plan's notes.
"""

from __future__ import annotations

from roofline.tables import Tabular, dump_json  # noqa: E402

import dataclasses
import math
from dataclasses import dataclass

from roofline.cost import CostModel, WorkloadPrediction, _jsonable
from roofline.errors import RooflineError, check_choice, check_fraction, check_number
from roofline.kernels import all_gather_kernel, all_reduce_kernel, reduce_scatter_kernel
from roofline.machines import get_machine
from roofline.capacity import MemoryPart, MemoryPlan
from roofline.plan import SCALE_UP_LINKS, CountedOp, computes_in, default_link, predict_counted, resolve_link, shard
from roofline.transformer import (
    active_params,
    attention_flops_per_token_forward,
    count_params,
    flops_per_token,
    get_model,
    matmul_params,
    model_state_bytes,
    train_flops_per_forward,
)
from roofline.units import DTYPE_BYTES

RECOMPUTE = ("none", "selective", "full")
CONVENTIONS = ("6nd", "full")
SECONDS_PER_DAY = 86400.0
SECONDS_PER_HOUR = 3600.0

SCALE_OUT_LINKS = ("infiniband", "roce", "ici", "pcie") + SCALE_UP_LINKS  # data parallel across nodes


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
    for name, v in (("gpus", gpus), ("tensor_parallel", tensor_parallel), ("pipeline_parallel", pipeline_parallel),
                    ("micro_batch", micro_batch)):
        check_number(name, v, maximum=1e7, integer=True)
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


def check_pipeline(cfg, layout: Layout) -> int:
    """Layers of the largest pipeline stage, ceil(L / p): the stage that bounds memory and the step's
    pace. p may leave a remainder (Llama 3.1 405B's 126 layers over 16 stages: 14 of 8 and 2 of 7,
    Meta's end stages one layer short for the embedding and LM head); p above L is refused."""
    p, L = layout.pipeline_parallel, cfg.n_layers
    if p > L:
        raise RooflineError(f"pipeline_parallel {p} is more stages than {cfg.name}'s {L} layers", field="pipeline_parallel")
    return -(-L // p)


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
    check_number("seq_len", seq_len, maximum=1e8, integer=True)
    per_stage = check_pipeline(cfg, layout)
    in_flight = min(layout.pipeline_parallel, layout.micro_batches(seq_len))
    params = count_params(shard(cfg, layout.tensor_parallel))["total"] * per_stage / cfg.n_layers  # the largest stage's share
    states = model_state_bytes(params, layout.data_parallel, layout.zero)
    heads = getattr(cfg.first_attention, "heads", 0)  # the score terms of attention layers (0 for SSM-only models)
    acts = in_flight * per_stage * activation_bytes_per_layer(seq_len, layout.micro_batch, cfg.d_model, heads,
                                                              layout.tensor_parallel, layout.sequence_parallel, recompute,
                                                              attention)
    parts = tuple(MemoryPart(k, v) for k, v in states.items()) + (MemoryPart("activations", acts),)
    settings = (("gpus", layout.gpus), ("data_parallel", layout.data_parallel), ("tensor_parallel", layout.tensor_parallel),
                ("pipeline_parallel", layout.pipeline_parallel), ("zero", layout.zero), ("micro_batch", layout.micro_batch),
                ("seq_len", int(seq_len)), ("recompute", recompute), ("attention", attention),
                ("sequence_parallel", layout.sequence_parallel),
                ("params_per_gpu", params), ("micro_batches_in_flight", in_flight), ("layers_per_stage", per_stage))
    notes = cfg.header_lines()
    notes += ("activations: Korthikanti et al. 2022, Table 2 (GPT layer; an estimate for gated MLPs and GQA)",)
    unusual = sorted({k.mixer.kind for k in cfg.kinds if k.mixer is not None and (k.is_ssm or k.mixer.span or not k.is_attention
                                                                                  or type(k.mixer).__name__ != "Attention")}
                     | ({"MoE"} if cfg.is_moe else set()))
    if unusual:
        notes += (f"activations of {', '.join(unusual)} layers use the same per-layer formula with the first attention "
                  "layer's heads: an estimate, not a count",)
    if stage_note(cfg, layout):
        notes += (stage_note(cfg, layout),)
    if layout.pipeline_parallel > 1:
        notes += (f"pipeline: the first stage holds min(p {layout.pipeline_parallel}, m {layout.micro_batches(seq_len)}) = "
                  f"{in_flight} micro-batches in flight x {per_stage} layers (1F1B); the embedding and LM head on the end "
                  "stages are not added",)
    plan = MemoryPlan("train", cfg.key or cfg.name, m.key or m.name, parts, m.memory_bytes, settings, (), "", notes, m.name)
    if plan.fits is False:
        plan = dataclasses.replace(plan, advice=_train_advice(cfg, m, layout, seq_len, recompute, attention))
    return plan


def _train_advice(cfg, m, layout, seq_len, recompute, attention) -> str:
    for zero in range(layout.zero, 4):
        for rc in RECOMPUTE[RECOMPUTE.index(recompute):]:
            if (zero, rc) == (layout.zero, recompute):
                continue
            trial = train_memory(cfg, m, dataclasses.replace(layout, zero=zero), seq_len, rc, attention)
            if trial.fits:
                how = "no recompute" if rc == "none" else f"{rc} recompute"
                return f"It fits with ZeRO {zero} and {how} ({trial.verdict.split(': ', 1)[1]})."
    return "Not even ZeRO 3 with full recompute fits: add tensor or pipeline parallelism, or GPUs."


# ---------------------------------------------------------------------------------------------
# One optimizer step's collectives
# ---------------------------------------------------------------------------------------------


def step_collectives(model, machine, layout: Layout, seq_len: int, recompute: str = "none", tp_link=None,
                     dp_link=None, gpus_per_node: int = 8) -> tuple[list[CountedOp], list[str]]:
    """The collectives one GPU runs per optimizer step, with notes on what is left out and on
    default links that fall back (see the module docstring; a link named must be the machine's).

    Tensor parallel (Megatron-LM): 2 all-reduces of the (b s, D) activations per layer forward and
    2 backward (2 more forward with full recompute), for each of the step's m micro-batches and the
    GPU's L / p layers; with sequence parallelism each is a reduce-scatter + all-gather, the same
    bytes. Data parallel: the bf16 gradients of the GPU's slice all-reduced across the data ranks
    once per step (ZeRO 1 and 2: a reduce-scatter and an all-gather, the same bytes); ZeRO 3
    all-gathers the weights for every micro-batch's forward and backward (2 m) and reduce-scatters
    the gradients after every micro-batch's backward (m), as FSDP does with gradient accumulation.
    A pipeline whose p leaves a remainder of L is costed at its largest stage."""
    cfg = get_model(model)
    m = get_machine(machine)
    per_stage = check_pipeline(cfg, layout)
    ops, notes = [], []
    tp_link = _link(m, tp_link, "tp_link", SCALE_UP_LINKS, notes) if layout.tensor_parallel > 1 else None
    if layout.data_parallel > 1:
        one_node = layout.gpus <= gpus_per_node
        chosen = dp_link is not None
        dp_link = _link(m, dp_link, "dp_link", SCALE_UP_LINKS if one_node else SCALE_OUT_LINKS, notes)
        if dp_link and not one_node and dp_link not in ("infiniband", "roce"):
            if chosen:  # the user's choice: say what it means, not that the machine lacks a NIC
                notes.append(f"the data-parallel collectives across {layout.gpus // gpus_per_node if gpus_per_node else 0:,} "
                             f"nodes go over {dp_link}, as --dp-link says (between nodes a cluster uses a scale-out "
                             f"network: {', '.join(n for n in ('infiniband', 'roce') if n in dict(m.links)) or 'none listed'})")
            else:
                notes.append(f"{m.the_name} lists no infiniband or roce link: the data-parallel collectives across nodes "
                             f"go over {dp_link}" + (" (a scale-out NIC sits behind PCIe, so PCIe bounds it)"
                                                     if dp_link == "pcie" else "") + "; choose with --dp-link")
    if tp_link:
        per_layer = 4 + (2 if recompute == "full" else 0)
        count = per_layer * per_stage * layout.micro_batches(seq_len)
        k = all_reduce_kernel(layout.micro_batch * seq_len * cfg.d_model, layout.tensor_parallel, tp_link, "bf16",
                              name=f"TP all-reduce ({tp_link})")
        ops.append(CountedOp(k, count))
    if layout.data_parallel > 1 and dp_link:
        grads = count_params(shard(cfg, layout.tensor_parallel))["total"] * per_stage / cfg.n_layers  # the largest stage's
        d = layout.data_parallel
        if layout.zero >= 3:  # the weights are gathered for every micro-batch's forward and backward (FSDP / ZeRO-3)
            mb = layout.micro_batches(seq_len)
            ops.append(CountedOp(reduce_scatter_kernel(grads, d, dp_link, "bf16", name=f"gradient reduce-scatter ({dp_link})"), mb))
            ops.append(CountedOp(all_gather_kernel(grads, d, dp_link, "bf16", name=f"weight all-gather ({dp_link})"), 2 * mb))
        else:
            ops.append(CountedOp(all_reduce_kernel(grads, d, dp_link, "bf16", name=f"gradient all-reduce ({dp_link})"), 1))
    if stage_note(cfg, layout):
        notes.append(stage_note(cfg, layout))
    if layout.pipeline_parallel > 1:
        notes.append("pipeline sends between stages (b s D activations per micro-batch) are not costed")
    return ops, notes


def _link(m, link, field, order, notes) -> str | None:
    """The link named (checked against the machine's) or the first of ``order`` it lists; None,
    with a note, when the machine lists no link at all."""
    if link is None and default_link(m, order) is None:
        notes.append(f"{m.the_name} lists no link for its {'tensor' if field == 'tp_link' else 'data'}-parallel "
                     "collectives: they are not costed")
        return None
    return resolve_link(m, link, field, order)


@dataclass(frozen=True)
class TrainPlan(Tabular):
    """A training run: model FLOPs (``training_flops``) and executed FLOPs, time at the given
    utilisation, GPU-hours, cost, memory per GPU, and one optimizer step's collectives (predicted
    at the links' full per-direction bandwidth) against its compute."""

    ROWS_KEY = None  # one row of figures; the collectives are a table of their own

    model: str
    machine: str
    tokens: float
    seq_len: int
    convention: str
    recompute: str
    dtype: str
    layout: Layout
    peak_flops_per_s: float
    params: float
    training_flops: float
    hardware_flops: float
    other_convention_flops: float
    seconds: float
    price_per_gpu_hour: float | None
    memory: MemoryPlan
    step: WorkloadPrediction | None
    notes: tuple[str, ...] = ()
    context_terms: str = "12Lhs"  # how the convention other than 6ND names its per-token context terms

    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @property
    def days(self) -> float:
        return self.seconds / SECONDS_PER_DAY

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.gpus / SECONDS_PER_HOUR

    @property
    def mfu(self) -> float:
        return self.training_flops / (self.gpus * self.peak_flops_per_s * self.seconds)

    @property
    def hfu(self) -> float:
        return self.hardware_flops / (self.gpus * self.peak_flops_per_s * self.seconds)

    @property
    def cost(self) -> float | None:
        return None if self.price_per_gpu_hour is None else self.gpu_hours * self.price_per_gpu_hour

    @property
    def steps(self) -> float:
        return self.tokens / self.layout.global_batch_tokens

    @property
    def step_compute_s(self) -> float:
        return self.seconds / self.steps

    @property
    def step_communication_s(self) -> float:
        return 0.0 if self.step is None else float(self.step.total_s)

    def to_dict(self) -> dict:
        lay = self.layout
        return {
            "model": self.model, "machine": self.machine, "tokens": self.tokens, "seq_len": self.seq_len,
            "flops_convention": self.convention, "recompute": self.recompute, "dtype": self.dtype,
            "gpus": self.gpus, "data_parallel": lay.data_parallel, "tensor_parallel": lay.tensor_parallel,
            "pipeline_parallel": lay.pipeline_parallel, "zero": lay.zero, "micro_batch": lay.micro_batch,
            "global_batch_tokens": lay.global_batch_tokens, "peak_flops_per_s": self.peak_flops_per_s,
            "params": self.params, "training_flops": self.training_flops, "hardware_flops": self.hardware_flops,
            "other_convention_flops": self.other_convention_flops, "mfu": self.mfu, "hfu": self.hfu,
            "seconds": self.seconds, "days": self.days, "gpu_hours": self.gpu_hours,
            "price_per_gpu_hour": self.price_per_gpu_hour, "cost": self.cost, "steps": self.steps,
            "step_compute_s": self.step_compute_s, "step_communication_s": self.step_communication_s,
            "communication": [] if self.step is None else [op.to_dict() for op in self.step.ops],
            "memory": self.memory.to_dict(), "notes": list(self.notes),
        }

    def to_json(self) -> str:
        return dump_json({k: _jsonable(v) for k, v in self.to_dict().items()})

    def to_csv(self) -> str:
        """The plan's scalar figures as quantity,value rows (memory and collectives: see to_json)."""
        from roofline.tables import rows_to_csv

        return rows_to_csv([{"quantity": k, "value": v} for k, v in self.to_dict().items() if not isinstance(v, (list, dict))])

    def to_table(self) -> str:
        from roofline.plan_tables import train_table

        return train_table(self)


def train_plan(model="llama3-8b", tokens=15e12, gpus=1024, machine="h100-sxm", mfu=None, hfu=None, seq_len=8192,
               recompute="none", convention="6nd", dtype=None, price_per_gpu_hour=None, tensor_parallel=1,
               pipeline_parallel=1, zero=0, micro_batch=1, global_batch_tokens=None, sequence_parallel=True,
               attention="flash", tp_link=None, dp_link=None, gpus_per_node=8) -> TrainPlan:
    """Plan a training run at a utilisation: give ``mfu`` (model FLOPs utilisation, default 0.40)
    or ``hfu`` (hardware FLOPs utilisation, recomputation included), not both; ``dtype`` is the
    dense peak they are of. Links default as step_collectives says: the machine's scale-up link
    (tensor parallel, and data parallel within one node of ``gpus_per_node``), else InfiniBand."""
    cfg = get_model(model)
    m = get_machine(machine)
    check_number("tokens", tokens, maximum=1e18)
    check_number("seq_len", seq_len, maximum=1e8, integer=True)
    if mfu is not None and hfu is not None:
        raise RooflineError("give mfu or hfu, not both", field="mfu")
    layout = make_layout(gpus, tensor_parallel, pipeline_parallel, zero, micro_batch, seq_len, global_batch_tokens, sequence_parallel)
    model_tok, hw_tok = train_flops_per_token(cfg, seq_len, convention, recompute)
    other = "full" if convention == "6nd" else "6nd"
    other_tok, _ = train_flops_per_token(cfg, seq_len, other, "none")
    if price_per_gpu_hour is not None:
        check_number("price_per_gpu_hour", price_per_gpu_hour, maximum=1e6)
    if dtype is None:  # the machine's own dtype, as layer and gemm take it (bf16 on most)
        dtype = m.default_dtype
    check_choice("peak_dtype", dtype, DTYPE_BYTES)
    if not computes_in(m, dtype):
        raise RooflineError(f"peak_dtype {dtype}: {m.the_name} has no {dtype} peak; it has {', '.join(m.dtypes)}",
                            field="peak_dtype")
    peak = m.peak(dtype)
    capacity = layout.gpus * peak
    if hfu is not None:
        check_fraction("hfu", hfu)
        seconds = hw_tok * tokens / (capacity * hfu)
    else:
        mfu = 0.40 if mfu is None else mfu
        check_fraction("mfu", mfu)
        seconds = model_tok * tokens / (capacity * mfu)
        if hw_tok / model_tok * mfu > 1.0 + 1e-12:
            raise RooflineError(f"mfu {mfu:g} with {recompute} recompute means an HFU of {hw_tok / model_tok * mfu:.2f}, "
                                "above 1: impossible", field="mfu")
    check_number("gpus_per_node", gpus_per_node, maximum=1e4, integer=True)
    ops, notes = step_collectives(cfg, m, layout, seq_len, recompute, tp_link, dp_link, gpus_per_node)
    step = predict_counted(ops, m, CostModel()) if ops else None
    n = active_params(cfg) if convention == "6nd" else matmul_params(cfg)
    return TrainPlan(
        model=cfg.key or cfg.name, machine=m.key or m.name, tokens=float(tokens), seq_len=int(seq_len), convention=convention,
        recompute=recompute, dtype=dtype, layout=layout, peak_flops_per_s=peak, params=float(n),
        training_flops=model_tok * tokens, hardware_flops=hw_tok * tokens, other_convention_flops=other_tok * tokens,
        seconds=seconds, price_per_gpu_hour=price_per_gpu_hour, memory=train_memory(cfg, m, layout, seq_len, recompute, attention),
        step=step, notes=tuple(notes), context_terms=_context_terms(cfg),
    )


def _context_terms(cfg) -> str:
    """The name of flops_per_token's context terms for this model: 12Lhs for plain attention."""
    plain = all(k.mixer is None or (type(k.mixer).__name__ == "Attention" and not k.mixer.span) for k in cfg.kinds)
    if plain and cfg.has_attention:
        return "12Lhs"
    terms = (["attention over min(s, window)"] if cfg.has_attention else []) + (
        ["SSM scans"] if any(k.is_ssm for k in cfg.kinds) else [])
    return "3 x (" + " + ".join(terms) + ")" if terms else "0"
