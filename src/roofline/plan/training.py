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

Links: the tensor-parallel all-reduces default to the machine's scale-up link (parallel.SCALE_UP_LINKS);
the data-parallel collectives to the scale-up link within one node (PCIe past a bridged NVLink pair:
an H100 PCIe's bridge joins 2 cards), and across nodes to
infiniband, else roce, else ici (a TPU pod), else pcie (a scale-out NIC sits behind PCIe, so PCIe
bounds it), else the scale-up link; a fallback is said in the plan's notes.

Memory per GPU (model states, activations, the layout) is in train_memory.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.cost import CostModel, WorkloadPrediction
from roofline.errors import RooflineError, check_choice, check_fraction
from roofline.kernels import all_gather_kernel, all_reduce_kernel, reduce_scatter_kernel
from roofline.blocks import qk_norm_all_reduce_op
from roofline.machines import get_machine
from roofline.parameters import MFU, PRICE, SEQ_LEN, TRAIN_GPUS_PER_NODE, TRAIN_TOKENS
from roofline.plan.memory import MemoryPlan
from roofline.plan.model_ops import CountedOp, predict_counted, qk_norm_all_reduces
from roofline.plan.parallel import SCALE_UP_LINKS, default_link, resolve_link
from roofline.plan.precision import computes_in
from roofline.plan.train_memory import (Layout, check_pipeline, make_layout, stage_params, train_flops_per_token,
                                        train_memory)
from roofline.tables import Tabular, dump_json, jsonable
from roofline.transformer import active_params, get_model, matmul_params
from roofline.units import DTYPE_BYTES


SECONDS_PER_DAY = 86400.0
SECONDS_PER_HOUR = 3600.0

SCALE_OUT_LINKS = ("infiniband", "roce", "ici", "pcie") + SCALE_UP_LINKS  # data parallel across nodes


def step_collectives(model, machine, layout: Layout, seq_len: int, recompute: str = "none", tp_link=None,
                     dp_link=None, gpus_per_node: int = 8) -> tuple[list[CountedOp], list[str], int]:
    """The collectives one GPU runs per optimizer step, with notes on what is left out and on
    default links that fall back (see the module docstring; a link named must be the machine's),
    and how many of the ops, first, are the tensor-parallel group's (on the critical path).

    Tensor parallel (Megatron-LM): 2 all-reduces of the (b s, D) activations per layer forward and
    2 backward (2 more forward with full recompute), and a layer-wide q/k norm's (b s, 2) variances
    once forward and once backward (once more with full recompute; blocks.qk_norm_all_reduce_op),
    for each of the step's m micro-batches and the GPU's L / p layers; with sequence parallelism
    each is a reduce-scatter + all-gather, the same bytes. Data parallel: the bf16 gradients of the GPU's slice all-reduced across the data ranks
    once per step (ZeRO 1 and 2: a reduce-scatter and an all-gather, the same bytes); ZeRO 3
    all-gathers the weights for every micro-batch's forward and backward (2 m) and reduce-scatters
    the gradients after every micro-batch's backward (m), as FSDP does with gradient accumulation.
    A pipeline whose p leaves a remainder of L is costed at its largest stage."""
    cfg = get_model(model)
    m = get_machine(machine)
    per_stage = check_pipeline(cfg, layout)
    ops, notes = [], []
    if layout.tensor_parallel > 1:  # decode's choice: past a node (or an NVLink bridge's pair) the ring leaves it
        from roofline.plan.parallel import tp_link as ring_link

        tp_link = (_link(m, tp_link, "tp_link", SCALE_UP_LINKS, notes) if not m.links
                   else ring_link(m, tp_link, layout.tensor_parallel, gpus_per_node))
    else:
        tp_link = None
    if layout.data_parallel > 1:
        from roofline.plan.parallel import check_scale_up

        check_scale_up(m, gpus_per_node, layout.gpus, f"a data-parallel group of {layout.gpus} GPUs")
        one_node = layout.gpus <= gpus_per_node
        chosen = dp_link is not None
        pair = m.nvlink_gpus  # bridged cards: NVLink joins a pair, a ring over more GPUs crosses PCIe
        if one_node and pair and layout.gpus > pair and "pcie" in dict(m.links):
            if chosen and str(dp_link).strip().lower() == "nvlink":
                raise RooflineError(f"dp_link nvlink: {m.the_name}'s NVLink bridge joins {pair} cards, and the "
                                    f"{layout.data_parallel} data-parallel ranks spread over {layout.gpus} GPUs sit on "
                                    "different bridges, so their ring crosses PCIe: give --dp-link pcie", field="dp_link")
            dp_link = dp_link or "pcie"
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
        qk = qk_norm_all_reduces(cfg)  # a layer-wide q/k norm's variances: once forward, once backward (its gradient's sum)
        if qk:
            per = (2 + (recompute == "full")) * round(qk * per_stage / cfg.n_layers) * layout.micro_batches(seq_len)
            ops.append(CountedOp(qk_norm_all_reduce_op(layout.micro_batch * seq_len, layout.tensor_parallel, tp_link), per))
    tp_ops = len(ops)
    if layout.data_parallel > 1 and dp_link:
        grads = stage_params(cfg, layout)  # the largest stage's: a whole number of parameters
        d = layout.data_parallel
        if layout.zero >= 3:  # the weights are gathered for every micro-batch's forward and backward (FSDP / ZeRO-3)
            mb = layout.micro_batches(seq_len)
            ops.append(CountedOp(reduce_scatter_kernel(grads, d, dp_link, "bf16", name=f"gradient reduce-scatter ({dp_link})"), mb))
            ops.append(CountedOp(all_gather_kernel(grads, d, dp_link, "bf16", name=f"weight all-gather ({dp_link})"), 2 * mb))
        else:
            ops.append(CountedOp(all_reduce_kernel(grads, d, dp_link, "bf16", name=f"gradient all-reduce ({dp_link})"), 1))
    # the stages' layer counts (stage_note) are the memory plan's note, printed with its table
    if layout.pipeline_parallel > 1:
        notes.append("pipeline sends between stages (b s D activations per micro-batch) are not costed")
    return ops, notes, tp_ops


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
    tensor_parallel_ops: int = 0  # the first ops of step: the tensor-parallel collectives (Megatron-LM's sit between a layer's matmuls)

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

    @property
    def step_tensor_parallel_s(self) -> float:
        """Of step_communication_s, the tensor-parallel collectives': nothing hides them."""
        return 0.0 if self.step is None else float(sum(op.time_s for op in self.step.ops[:self.tensor_parallel_ops]))

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
        return dump_json({k: jsonable(v) for k, v in self.to_dict().items()})

    def to_csv(self) -> str:
        """The plan's scalar figures as quantity,value rows (memory and collectives: see to_json)."""
        from roofline.tables import rows_to_csv

        return rows_to_csv([{"quantity": k, "value": v} for k, v in self.to_dict().items() if not isinstance(v, (list, dict))])

    def to_table(self) -> str:
        from roofline.plan.render import train_table

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
    TRAIN_TOKENS.check(tokens)
    SEQ_LEN.check(seq_len)
    if mfu is not None and hfu is not None:
        raise RooflineError("give mfu or hfu, not both", field="mfu")
    layout = make_layout(gpus, tensor_parallel, pipeline_parallel, zero, micro_batch, seq_len, global_batch_tokens, sequence_parallel)
    model_tok, hw_tok = train_flops_per_token(cfg, seq_len, convention, recompute)
    other = "full" if convention == "6nd" else "6nd"
    other_tok, _ = train_flops_per_token(cfg, seq_len, other, "none")
    if price_per_gpu_hour is not None:
        PRICE.check(price_per_gpu_hour)
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
        mfu = MFU.default if mfu is None else mfu
        check_fraction("mfu", mfu)
        seconds = model_tok * tokens / (capacity * mfu)
        if hw_tok / model_tok * mfu > 1.0 + 1e-12:
            raise RooflineError(f"mfu {mfu:g} with {recompute} recompute means an HFU of {hw_tok / model_tok * mfu:.2f}, "
                                "above 1: impossible", field="mfu")
    TRAIN_GPUS_PER_NODE.check(gpus_per_node)
    ops, notes, tp_ops = step_collectives(cfg, m, layout, seq_len, recompute, tp_link, dp_link, gpus_per_node)
    step = predict_counted(ops, m, CostModel()) if ops else None
    n = active_params(cfg) if convention == "6nd" else matmul_params(cfg)
    return TrainPlan(
        model=cfg.key or cfg.name, machine=m.key or m.name, tokens=float(tokens), seq_len=int(seq_len), convention=convention,
        recompute=recompute, dtype=dtype, layout=layout, peak_flops_per_s=peak, params=float(n),
        training_flops=model_tok * tokens, hardware_flops=hw_tok * tokens, other_convention_flops=other_tok * tokens,
        seconds=seconds, price_per_gpu_hour=price_per_gpu_hour, memory=train_memory(cfg, m, layout, seq_len, recompute, attention),
        step=step, notes=tuple(notes), context_terms=_context_terms(cfg), tensor_parallel_ops=tp_ops,
    )


def _context_terms(cfg) -> str:
    """The name of flops_per_token's context terms for this model: 12Lhs for plain attention."""
    plain = all(k.mixer is None or (type(k.mixer).__name__ == "Attention" and not k.mixer.span
                                                    and not k.mixer.index_topk) for k in cfg.kinds)
    if plain and cfg.has_attention:
        return "12Lhs"
    terms = (["attention over min(s, window)"] if cfg.has_attention else []) + (
        ["SSM scans"] if any(k.keeps_state for k in cfg.kinds) else [])
    return "3 x (" + " + ".join(terms) + ")" if terms else "0"
