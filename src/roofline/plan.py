"""Whole-model inference planning (docs/planning.md): time to first token, decode step latency and
throughput versus batch and context, quantisation, MoE, tensor parallelism, memory fit.

A model is L blocks (``blocks.block_kernels``) + the embedding gather + the final norm + the LM
head and, with tensor parallelism t > 1, two all-reduces per block over a link (Megatron-LM: one
after attention's output projection, one after the MLP's down projection; Shoeybi et al. 2019,
arXiv:1909.08053, section 3). Each kind of op is predicted once and multiplied by its count
(max(L c, L m) = L max(c, m)), so a sweep over batch, tokens or context is one numpy call.

Traffic split. An op's bytes are weights (a matmul's K x N operand; the embedding rows gathered),
KV cache (keys and values that decode attention reads) and activations (everything else).
blocks.py prices all three at one width; ``_requantised`` re-prices the weight and KV parts at
their own: bytes' = bytes + (w_w - w_a) weight_elems + (w_kv - w_a) kv_elems. Matmuls run at the
peak of the wider of the weight and activation dtypes (the narrower operand is up-converted, as
in weight-only int4 kernels); every other op at the activation dtype.

Precision. Weights may be stored narrower than any dtype the machine computes in (int4, or fp4
without an fp4 peak): weight-only quantisation, dequantised into bf16 matmuls. Activations (and so
every non-matmul op) must be a dtype the machine has a peak for. ``Precision.uniform(d, machine)``
is what ``--dtype d`` means: d everywhere where the machine computes in d, else d weights with
bf16 activations and KV cache.

Links. The tensor-parallel all-reduces default to the machine's scale-up link (nvlink, else xgmi,
else ici, else roce, else pcie); a link named explicitly must be one the machine lists.

Letters: B batch, T prompt tokens, S context (keys cached), D d_model, h = H d_head, K kv heads,
F d_ff, V vocab, L layers, E experts, t tensor-parallel degree. Memory fit and decode versus batch
build on this in capacity.py, training in training.py, sweeps in sweep.py.
"""

from __future__ import annotations

from roofline.tables import Tabular, dump_json  # noqa: E402

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from roofline.architecture import Attention, LatentAttention, Layer, Mamba, Mamba2, Model, MoE, WeightStorage
from roofline.blocks import Workload, check_size, layer_kernels
from roofline.cost import link_latency_s, CostModel, WorkloadPrediction, _jsonable, binds, bytes_bind, overlapped_s, seed_cost_model
from roofline.errors import RooflineError, check_choice, check_number
from roofline.kernels import _PLAIN, Kernel, all_reduce_kernel, norm_flops_per_element
from roofline.machines import Machine, get_machine
from roofline.transformer import cache_bytes_per_sequence, count_params, get_model, kv_cache_bytes_per_token
from roofline.units import DTYPE_BYTES

QUANT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
DEFAULT_BATCHES = tuple(2**i for i in range(11))  # 1 .. 1,024
SEARCH_MAX_BATCH = 65536  # compute-bound batches are searched up to here; the largest decode batch planned
SCALE_UP_LINKS = ("nvlink", "xgmi", "ici", "roce", "pcie")  # the tensor-parallel default, first listed wins


def computes_in(machine: Machine, dtype: str) -> bool:
    """Whether the machine has a peak of its own for ``dtype`` (a machine without per-dtype peaks
    computes in any). Machine.peak also answers int4 and fp4 with the bf16 peak where the chip has
    none: that is weight-only storage, not a dtype to compute in."""
    return not machine.peaks or dtype in machine.dtypes


def weight_only_compute(machine: Machine) -> str:
    """The dtype weight-only quantised matmuls compute in: bf16, or the machine's default without a bf16 peak."""
    return "bf16" if computes_in(machine, "bf16") else machine.default_dtype


@dataclass(frozen=True)
class Precision:
    """Storage widths of the weights, the activations and the KV cache (bf16 2, fp8 1, int8 1,
    int4 0.5 bytes), each on its own."""

    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"
    stored: WeightStorage | None = None  # weights as the checkpoint stores them, part by part

    def __post_init__(self):
        for part in ("weights", "activations", "kv_cache"):
            check_choice(f"{part} dtype", getattr(self, part), QUANT_DTYPES)

    @classmethod
    def as_stored(cls, model, activations: str = "bf16", kv_cache: str | None = None) -> "Precision":
        """Weights as the model's checkpoint stores them (its quantization_config: MXFP4 experts,
        block-scaled fp8, int4 groups), activations and KV cache at ``activations``."""
        storage = get_model(model).storage
        base = storage.default if storage.default in QUANT_DTYPES else "bf16"
        return cls(base, activations, kv_cache or activations, storage if storage.parts else None)

    def weight_width(self, part: str) -> float:
        """Bytes per parameter of a part's weights: the stored width, or ``weights``'s."""
        base = DTYPE_BYTES[self.weights]
        return self.stored.width(part, base) if self.stored is not None else base

    @classmethod
    def uniform(cls, dtype: str, machine: Machine | None = None) -> "Precision":
        """``dtype`` for all three parts; with a ``machine`` that has no ``dtype`` peak and a dtype
        narrower than bf16 (int4; fp4 before Blackwell; fp8 on an A100), weight-only storage:
        ``dtype`` weights, bf16 activations and KV cache, matmuls in bf16."""
        if machine is not None and not computes_in(machine, dtype):
            fallback = weight_only_compute(machine)
            if DTYPE_BYTES.get(dtype, 0.0) < DTYPE_BYTES[fallback]:
                return cls(dtype, fallback, fallback)
        return cls(dtype, dtype, dtype)

    @classmethod
    def resolve(cls, model, machine: Machine, dtype: str | None = None, weights: str | None = None,
                activations: str | None = None, kv_cache: str | None = None) -> "Precision":
        """What `--dtype`, `--weights`, `--activations` and `--kv-cache` (the CLI) and the web's
        dtype, weights and kv_cache choose: ``dtype`` on this machine (uniform; default the
        machine's), each part given over it; a quantised checkpoint's stored widths when neither
        ``dtype`` nor ``weights`` is given."""
        if get_model(model).storage.parts and dtype is None and weights is None:
            acts = activations or machine.default_dtype
            return cls.as_stored(model, acts, kv_cache or acts)
        base = cls.uniform(dtype or machine.default_dtype, machine)
        return cls(weights or base.weights, activations or base.activations, kv_cache or base.kv_cache)

    @property
    def compute(self) -> str:
        """The matmul dtype: the wider of weights and activations (activations on a tie)."""
        w, a = DTYPE_BYTES[self.weights], DTYPE_BYTES[self.activations]
        return self.weights if w > a else self.activations

    @property
    def weight_only(self) -> bool:
        """Weights stored narrower than the matmuls compute in (dequantised on the fly)."""
        return DTYPE_BYTES[self.weights] < DTYPE_BYTES[self.compute]

    def label(self) -> str:
        if self.stored is not None:
            return (f"weights as stored ({self.stored.label()}), activations {self.activations}, KV {self.kv_cache}; "
                    "quantised weights are dequantised into the matmuls")
        if self.weights == self.activations == self.kv_cache:
            return self.weights
        text = f"weights {self.weights}, activations {self.activations}, KV {self.kv_cache}"
        return text + (f" (weight-only {self.weights}: matmuls compute in {self.compute})" if self.weight_only else "")

    def check_machine(self, machine: Machine) -> "Precision":
        """Raise unless the machine computes in the activation dtype (every non-matmul op) and the
        matmul dtype; weights and KV cache are storage and may be narrower."""
        machine = get_machine(machine)
        for part, dtype in (("activations", self.activations), ("weights", self.compute)):
            if not computes_in(machine, dtype):
                fallback = weight_only_compute(machine)
                hint = (f"; {dtype} can be weight storage computing in {fallback} (--dtype {dtype} or --weights {dtype})"
                        if part == "activations" and DTYPE_BYTES[dtype] < DTYPE_BYTES[fallback] else "")
                raise RooflineError(f"{part} dtype {dtype}: {machine.the_name} has no {dtype} peak to compute in; it has "
                                    f"{', '.join(machine.dtypes)}{hint}", field=f"{part} dtype")
        return self

    def to_dict(self) -> dict:
        d = {"weights": self.weights, "activations": self.activations, "kv_cache": self.kv_cache, "compute": self.compute}
        if self.stored is not None:
            d["weights"] = f"as stored ({self.stored.method}); the rest {self.weights}"
            d["weights_stored"] = [{"part": p, "format": f, "bytes_per_param": b} for p, f, b in self.stored.parts]
        return d


def _shard_layer(layer: Layer, t: int, name: str) -> Layer:
    def need(what, n):
        if n % t:
            raise RooflineError(f"tensor_parallel {t} must divide {name}'s {what} {n}", field="tensor_parallel")
        return n // t

    mix, ff = layer.mixer, layer.mlp
    if isinstance(mix, Attention):
        H, K = mix.heads, mix.kv_heads
        need("attention heads", H)
        if K % t and t % K:
            raise RooflineError(f"tensor_parallel {t} must divide {name}'s {K} kv heads or be a multiple of them",
                                field="tensor_parallel")
        mix = dataclasses.replace(mix, heads=H // t, kv_heads=max(1, K // t))
    elif isinstance(mix, LatentAttention):
        mix = dataclasses.replace(mix, heads=need("attention heads", mix.heads))  # the latent is replicated
    elif isinstance(mix, Mamba2):
        mix = dataclasses.replace(mix, d_inner=need("SSM d_inner", mix.d_inner), heads=need("SSM heads", mix.heads),
                                  n_groups=need("SSM groups", mix.n_groups))
    elif isinstance(mix, Mamba):
        mix = dataclasses.replace(mix, d_inner=need("SSM d_inner", mix.d_inner))
    if isinstance(ff, MoE):
        ff = dataclasses.replace(ff, d_ff=need("expert d_ff", ff.d_ff),
                                 shared_d_ff=need("shared expert d_ff", ff.shared_d_ff) if ff.shared_d_ff else 0)
    elif ff is not None:
        ff = dataclasses.replace(ff, d_ff=need("d_ff", ff.d_ff))
    return dataclasses.replace(layer, mixer=mix, mlp=ff)


def shard(model, tensor_parallel: int = 1) -> Model:
    """One GPU's slice under Megatron-LM tensor parallelism t: query heads, d_ff (of each expert,
    and of the shared expert), SSM heads and inner width, and the vocabulary split t ways; kv
    heads split too, or replicated once t exceeds them; MLA's latent projections, norms and the
    router replicated. count_params of the slice is the weights one GPU holds."""
    cfg = get_model(model)
    if type(tensor_parallel) is int and tensor_parallel == 1:
        return cfg
    check_number("tensor_parallel", tensor_parallel, maximum=4096, integer=True)
    t = int(tensor_parallel)
    if t == 1:
        return cfg
    kinds = tuple(_shard_layer(k, t, cfg.name) for k in cfg.kinds)
    return dataclasses.replace(cfg, name=f"{cfg.name} (1/{t} tensor-parallel)", key="", kinds=kinds,
                               vocab=-(-cfg.vocab // t))


# ---------------------------------------------------------------------------------------------
# The whole model as counted ops
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CountedOp:
    """A kernel run ``count`` times per forward pass, with its weight and KV-cache bytes (per run)
    and the layer kind it belongs to (``group``: a letter of Model.pattern(), "" outside layers)."""

    kernel: Kernel
    count: int
    weight_bytes: object = 0.0
    kv_bytes: object = 0.0
    group: str = ""


def _requantised(k: Kernel, precision: Precision) -> tuple[Kernel, object, object]:
    """The kernel with its weight and cache parts at their own widths (the kernel carries their
    element counts), and those parts in bytes: bytes' = bytes + (w_w - w_a) weight_elems +
    (w_kv - w_a) cache_elems."""
    wa, wkv = DTYPE_BYTES[precision.activations], DTYPE_BYTES[precision.kv_cache]
    ww = precision.weight_width(k.part)
    dtype = precision.compute if k.category == "matmul" else precision.activations
    if ww == wa and wkv == wa and dtype == k.dtype:  # the kernel is already priced at these widths
        return k, ww * k.weight_elems, wkv * k.cache_elems
    moved = k.bytes + (ww - wa) * k.weight_elems + (wkv - wa) * k.cache_elems
    return (Kernel.trusted(k.name, k.flops, moved, k.category, dtype, k.link, k.weight_elems, k.cache_elems, k.part),
            ww * k.weight_elems, wkv * k.cache_elems)


def context_of(phase: str, tokens, context):
    """Keys each query attends over: the prompt itself in prefill (or ``context`` for a
    chunked-prefill step); the cached ``context`` in decode (``tokens`` when no context is given)."""
    return tokens if context is None else context


def default_link(machine: Machine, order=SCALE_UP_LINKS) -> str | None:
    """The first link in ``order`` that the machine lists (None when it lists none of them)."""
    names = [n for n, _ in machine.links]
    return next((n for n in order if n in names), None)


def resolve_link(machine: Machine, link: str | None, field: str = "link", order=SCALE_UP_LINKS) -> str:
    """``link`` checked against the machine's links, or the first of ``order`` it lists when None."""
    names = [n for n, _ in machine.links]
    if link is None:
        chosen = default_link(machine, order)
        if chosen is None:  # nothing given, nothing to choose: the parallelism that needs it is what to name
            blame = "tensor_parallel" if field == "link" else field
            raise RooflineError(f"{blame} > 1 needs a link for its collectives, and {machine.the_name} lists none of "
                                f"{', '.join(order)}; add one to its machine file", field=blame)
        return chosen
    name = str(link).strip().lower()
    if name not in names:
        raise RooflineError(f"{field} {link!r}: {machine.the_name} has no such link; it has {', '.join(names) or 'none'}",
                            field=field)
    return name


GPUS_PER_NODE = 8  # GPUs one scale-up domain joins by default (an HGX / DGX node)
NODE_LINKS = ("nvlink", "xgmi")  # scale-up links that do not leave a node
CROSS_NODE_LINKS = ("infiniband", "roce")


def tp_link(machine: Machine, link: str | None, tensor_parallel: int, gpus_per_node: int = GPUS_PER_NODE) -> str:
    """The link tensor-parallel all-reduces cross: resolve_link's within a node; past
    ``gpus_per_node`` GPUs a ring leaves the node, so it is the scale-out network (the slowest
    link of the ring bounds it): the machine's infiniband or roce by default, and a node-only link
    named (nvlink, xgmi) is refused rather than silently stretched across nodes."""
    t = int(tensor_parallel)
    g = int(check_number("gpus_per_node", gpus_per_node, maximum=1_000_000, integer=True))
    pair = machine.nvlink_gpus
    if pair and pair < t <= g:  # bridged cards: NVLink joins only a pair, the ring crosses PCIe
        if link is not None and str(link).strip().lower() == "nvlink":
            raise RooflineError(f"tensor_parallel {t}: {machine.the_name}'s NVLink bridge joins {pair} cards, so a ring of "
                                f"{t} crosses PCIe: give --tp-link pcie (or at most --tp {pair} over nvlink)", field="tensor_parallel")
        return resolve_link(machine, link or "pcie")
    if t <= g:
        return resolve_link(machine, link)
    nodes = -(-t // g)
    if link is not None and str(link).strip().lower() in NODE_LINKS:
        raise RooflineError(f"tensor_parallel {t} spans {nodes} nodes of {g} GPUs and {link} does not leave a node: give "
                            f"--tp-link {' or '.join(CROSS_NODE_LINKS)}, or --gpus-per-node for a larger domain "
                            "(a GB200 NVL72 joins 72)", field="tensor_parallel")
    if link is None:
        names = [n for n, _ in machine.links]
        chosen = next((n for n in CROSS_NODE_LINKS if n in names), None)
        if chosen is None:
            raise RooflineError(f"tensor_parallel {t} spans {nodes} nodes of {g} GPUs, and {machine.the_name} lists no "
                                f"{' or '.join(CROSS_NODE_LINKS)} link to cross them; add one to its machine file",
                                field="tensor_parallel")
        return chosen
    return resolve_link(machine, link)


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def model_ops(model, phase="decode", tokens=1, batch=1, context=None, attention="flash", precision=None,
              tensor_parallel=1, link=None) -> list[CountedOp]:
    """One forward pass of the whole model on one GPU, in order: embedding gather, each distinct
    layer kind's ops (each counted as many times as layers have that kind; ops grouped by kind),
    the tensor-parallel all-reduces over ``link`` (required when t > 1; one per sub-layer, one per
    parallel block), the final norm and the LM head. Prefill: T = ``tokens`` per sequence (the last
    T of ``context`` positions when given); the final norm and LM head run on the last token only
    (B rows: time to first token needs one set of logits). Decode: one token per sequence against
    S = ``context`` cached. Sizes may be numpy arrays (they broadcast)."""
    if int(tensor_parallel) > 1 and link is None:
        raise RooflineError("tensor parallelism needs the link its all-reduces cross (predict_model defaults to the "
                            "machine's scale-up link)", field="link")
    return _model_ops(model, phase, tokens, batch, context, attention, precision, tensor_parallel, link)


def _model_ops(model, phase, tokens, batch, context, attention, precision, tensor_parallel, link) -> list[CountedOp]:
    """model_ops; with ``link`` None the all-reduces are left out (for weight and KV sums only)."""
    cfg = get_model(model)
    precision = precision or Precision()
    sh = shard(cfg, tensor_parallel)
    t = int(tensor_parallel)
    wa = precision.activations
    if phase == "decode":
        w = Workload.of("decode", None, batch, context_of(phase, tokens, context))
    else:
        w = Workload.of("prefill", tokens, batch, context)
    check_size(cfg, w)
    M = w.batch * w.tokens
    D = cfg.d_model

    w_a = DTYPE_BYTES[wa]
    plain = precision.stored is None and precision.weights == precision.kv_cache == wa  # nothing to re-price

    def counted(k, count, group=""):
        if plain:  # CountedOp's fields, set without the frozen dataclass's per-field setattr
            op = object.__new__(CountedOp)
            op.__dict__.update(kernel=k, count=count, weight_bytes=w_a * k.weight_elems, kv_bytes=w_a * k.cache_elems,
                               group=group)
            return op
        kernel, wbytes, kvbytes = _requantised(k, precision)
        return CountedOp(kernel, count, wbytes, kvbytes, group)

    # the embedding gather: T rows of the table read, (T, D) written (kernels.embedding_kernel's count)
    ops = [counted(Kernel.trusted("embedding", 0.0, 2.0 * w_a * M * D, "gather", wa, weight_elems=M * D, part="embedding"), 1)]
    kinds = sh.kind_counts()
    multi = len(kinds) > 1
    reduces = 0
    for kind, n in kinds:
        group = LETTERS[sh.kinds.index(kind)] if multi else ""
        for k in layer_kernels(kind, D, w.decode, w.tokens, w.batch, w.context, attention, wa):
            if multi:
                k = Kernel.trusted(**{**k.__dict__, "name": f"{group}: {k.name}"})
            ops.append(counted(k, n, group))
        reduces += n * (1 if kind.parallel else (kind.mixer is not None) + (kind.mlp is not None))
    if t > 1 and link is not None:
        ops.append(counted(all_reduce_kernel(M * D, t, link, wa, name=f"TP all-reduce ({link})"), reduces))
    ops.append(counted(Kernel.trusted("final norm", norm_flops_per_element(cfg.final_norm) * w.batch * D,
                              2.0 * w_a * w.batch * D, "norm", wa), 1))
    B, V = w.batch, sh.vocab  # the LM head on the last token of each sequence: (B, D) @ (D, V)
    ops.append(counted(Kernel.trusted("LM head", 2.0 * B * V * D, w_a * (B * D + D * V + B * V), "matmul", wa,
                              weight_elems=D * V, part="embedding" if cfg.tied_embeddings else "lm_head"), 1))
    return ops


def predict_counted(ops: list[CountedOp], machine, cost_model: CostModel) -> WorkloadPrediction:
    """Predict each op once and scale by its count. Each run pays one launch; with a CUDA graph
    the whole pass pays one, shared by all runs."""
    machine = get_machine(machine)
    runs = sum(op.count for op in ops)
    per_run = cost_model.launch_overhead_s / runs if cost_model.cuda_graph else None
    preds = []
    for op in ops:
        p = cost_model.predict_op(op.kernel, machine, per_run)
        n = op.count
        if n != 1:
            p = dataclasses.replace(p, name=f"{p.name} x{n}", flops=p.flops * n, bytes=p.bytes * n, compute_s=p.compute_s * n,
                                    memory_s=p.memory_s * n, launch_s=p.launch_s * n, time_s=p.time_s * n)
        preds.append(p)
    return WorkloadPrediction.from_ops(machine.name, cost_model, tuple(preds))


def default_cost_model(machine: Machine) -> CostModel:
    """The workshop's cost model (cost.seed_cost_model) with the machine's preset launch overhead."""
    return seed_cost_model(launch_overhead_s=machine.launch_overhead_s)


@dataclass(frozen=True)
class Totals:
    """Sums over a pass's ops (arrays when a size was): seconds by the limit that binds each op,
    FLOPs and bytes, the matmuls' share, and the weight and KV-cache bytes read."""

    time_s: object = 0.0
    memory_time_s: object = 0.0
    compute_time_s: object = 0.0
    link_time_s: object = 0.0
    launch_s: object = 0.0
    flops: object = 0.0
    bytes: object = 0.0
    weight_bytes: object = 0.0
    kv_bytes: object = 0.0
    gemm_flops: object = 0.0
    gemm_weight_bytes: object = 0.0
    gemm_compute_s: object = 0.0
    gemm_memory_s: object = 0.0


def totals(ops: list[CountedOp], machine, cost_model: CostModel) -> Totals:
    """The same arithmetic as predict_counted (cost.op_times per op, times its count), summed
    without building per-op results: the fast path for sweeps. An op is memory- (or link-) bound
    when moving its bytes takes longer than its arithmetic, as in CostModel.predict_op."""
    machine = get_machine(machine)
    cm = cost_model
    runs = sum(op.count for op in ops)
    launch = cm.launch_overhead_s / runs if cm.cuda_graph else cm.launch_overhead_s
    if type(cm) is CostModel and all(type(op.kernel.flops) in _PLAIN and type(op.kernel.bytes) in _PLAIN for op in ops):
        return _scalar_totals(ops, machine, cm, launch, runs)
    acc = dict.fromkeys(Totals.__dataclass_fields__, 0.0)
    for op in ops:
        k, n = op.kernel, op.count
        c, m, t = cm.op_seconds(k, machine, launch)  # a calibrated model's measured rates, or e_c and e_m
        moving = bytes_bind(c, m)
        t = t * n
        acc["time_s"] += t
        acc["link_time_s" if k.link else "memory_time_s"] += t * moving
        acc["compute_time_s"] += t * ~moving
        acc["launch_s"] += launch * n
        acc["flops"] += k.flops * n
        acc["bytes"] += k.bytes * n
        acc["weight_bytes"] += op.weight_bytes * n
        acc["kv_bytes"] += op.kv_bytes * n
        if k.category == "matmul":
            acc["gemm_flops"] += k.flops * n
            acc["gemm_weight_bytes"] += op.weight_bytes * n
            acc["gemm_compute_s"] += c * n
            acc["gemm_memory_s"] += m * n
    return Totals(**acc)


def _scalar_totals(ops: list[CountedOp], machine: Machine, cm: CostModel, launch: float, runs: int) -> Totals:
    """totals() for plain numbers: cost.op_times' arithmetic (time = overlapped_s(c, m) + launch)
    in Python floats, without numpy's per-call overhead."""
    e_c, e_m = cm.compute_efficiency, cm.memory_efficiency
    peaks: dict[str, float] = {}
    time_s = memory_s = compute_s = link_s = flops = moved = wbytes = kvbytes = 0.0
    g_flops = g_wbytes = g_c = g_m = 0.0
    for op in ops:
        k, n = op.kernel, op.count
        peak = peaks.get(k.dtype)
        if peak is None:
            peak = peaks[k.dtype] = machine.peak(k.dtype)
        bw = machine.bandwidth if k.link is None else machine.link(k.link)
        c = k.flops / (e_c * peak)
        m = k.bytes / (e_m * bw) + (link_latency_s(k) if k.link is not None else 0.0)
        t = (overlapped_s(c, m, cm.overlap) + launch) * n
        time_s += t
        if bytes_bind(c, m):
            if k.link:
                link_s += t
            else:
                memory_s += t
        else:
            compute_s += t
        flops += k.flops * n
        moved += k.bytes * n
        wbytes += op.weight_bytes * n
        kvbytes += op.kv_bytes * n
        if k.category == "matmul":
            g_flops += k.flops * n
            g_wbytes += op.weight_bytes * n
            g_c += c * n
            g_m += m * n
    return Totals(time_s, memory_s, compute_s, link_s, launch * runs, flops, moved, wbytes, kvbytes,
                  g_flops, g_wbytes, g_c, g_m)


def _text(x):
    return str(x) if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class ModelPrediction(Tabular):
    """One forward pass of a whole model on one GPU (prefill of ``tokens`` or one decode step at
    ``context``), batch ``batch``. Quantities may be arrays when a size was.

    ``totals`` holds the sums; ``prediction`` (built on first use) the per-op breakdown, each op
    times its count. ``weight_bytes`` and ``kv_bytes`` are the weights (embedding rows included)
    and KV cache read; ``bound`` is the limit that holds most of the time."""

    model: str
    machine: str
    phase: str
    tokens: object
    batch: object
    context: object
    attention: str
    precision: Precision
    tensor_parallel: int
    ops: tuple[CountedOp, ...]
    machine_spec: Machine
    cost_model: CostModel
    totals: Totals

    @functools.cached_property
    def prediction(self) -> WorkloadPrediction:
        return predict_counted(list(self.ops), self.machine_spec, self.cost_model)

    @property
    def time_s(self):
        """Seconds for the pass: the decode step, or the time to first token in prefill."""
        return self.totals.time_s

    @property
    def tokens_per_s(self):
        """Tokens out per second: B per decode step; B T prompt tokens per prefill."""
        made = self.batch if self.phase == "decode" else self.batch * self.tokens
        return made / self.time_s

    @property
    def flops(self):
        return self.totals.flops

    @property
    def bytes(self):
        return self.totals.bytes

    @property
    def weight_bytes(self):
        return self.totals.weight_bytes

    @property
    def kv_bytes(self):
        return self.totals.kv_bytes

    @property
    def intensity(self):
        """FLOPs per byte of the whole pass (weights, KV cache and activations)."""
        return self.flops / self.bytes

    @property
    def weights_intensity(self):
        """Matmul FLOPs per matmul weight byte: the seed's decode view, = B in bf16 for a dense model
        (2 B FLOPs per weight over 2 bytes per weight)."""
        return self.totals.gemm_flops / self.totals.gemm_weight_bytes

    @property
    def memory_bound_share(self):
        return self.totals.memory_time_s / self.time_s

    @property
    def link_share(self):
        return self.totals.link_time_s / self.time_s

    @property
    def bound(self):
        """"memory", "compute" or "link": whichever holds the larger share of the time."""
        t = self.totals
        shares = np.stack(np.broadcast_arrays(t.memory_time_s, t.compute_time_s, t.link_time_s))
        return _text(np.array(["memory", "compute", "link"])[np.argmax(shares, axis=0)])

    @property
    def gemm_bound(self):
        """"compute" once the matmuls' arithmetic takes at least as long as their weight reads (binds)."""
        t = self.totals
        return _text(binds(t.gemm_compute_s, t.gemm_memory_s))

    def summary(self) -> dict:
        return {
            "model": self.model, "machine": self.machine, "phase": self.phase, "tokens": self.tokens, "batch": self.batch,
            "context": self.context, "attention": self.attention, "precision": self.precision.to_dict(),
            "tensor_parallel": self.tensor_parallel, "time_s": self.time_s, "tokens_per_s": self.tokens_per_s,
            "flops": self.flops, "bytes": self.bytes, "intensity": self.intensity, "weights_intensity": self.weights_intensity,
            "weight_bytes": self.weight_bytes, "kv_bytes": self.kv_bytes, "bound": self.bound, "gemm_bound": self.gemm_bound,
            "memory_bound_share": self.memory_bound_share, "link_share": self.link_share,
        }

    def to_dict(self) -> dict:
        pred = self.prediction.to_dict()
        pred.pop("machine")
        return {k: _jsonable(v) for k, v in {**pred, **self.summary()}.items()}

    def to_json(self) -> str:
        return dump_json(self.to_dict())

    def to_csv(self) -> str:
        return self.prediction.to_csv()

    def to_table(self) -> str:
        return self.prediction.to_table()


def time_by_limit(pred: ModelPrediction) -> dict[str, float]:
    """Seconds of one pass (scalar sizes) by what holds each op back: "compute" for compute-bound
    ops, "link" for collectives, and a memory-bound op's time split over "weights", "kv_cache" and
    "activations" in proportion to the bytes of each it moves."""
    out = dict.fromkeys(("compute", "link", "weights", "kv_cache", "activations"), 0.0)
    for p, op in zip(pred.prediction.ops, pred.ops):
        t = float(p.time_s)
        total = float(p.bytes)  # op bytes times its count, as are the parts below
        if p.bound != "memory" or total <= 0:
            out["compute" if p.bound == "memory" else p.bound] += t
            continue
        w, kv = float(op.weight_bytes) * op.count, float(op.kv_bytes) * op.count
        out["weights"] += t * w / total
        out["kv_cache"] += t * kv / total
        out["activations"] += t * max(total - w - kv, 0.0) / total
    return out


def predict_model(model="llama3-8b", machine="h100-sxm", phase="decode", tokens=1, batch=1, context=None,
                  attention="flash", precision=None, tensor_parallel=1, link=None,
                  cost_model: CostModel | None = None, gpus_per_node: int = GPUS_PER_NODE) -> ModelPrediction:
    """Predict one forward pass of the whole model (see model_ops). Default cost model: the workshop's
    fractions with the machine's launch overhead; default link: the machine's scale-up link, its
    scale-out network past ``gpus_per_node`` GPUs (tp_link; a link given is checked against the
    machine's even at t = 1)."""
    cfg = get_model(model)
    m = get_machine(machine)
    precision = (precision or Precision()).check_machine(m)
    cost_model = cost_model or default_cost_model(m)
    one_gpu = type(tensor_parallel) is int and tensor_parallel == 1
    if link is not None or not (one_gpu or int(check_number("tensor_parallel", tensor_parallel, maximum=4096,
                                                            integer=True)) == 1):
        link = tp_link(m, link, tensor_parallel, gpus_per_node)
    ops = model_ops(cfg, phase, tokens, batch, context, attention, precision, tensor_parallel, link)
    S = context_of(phase, tokens, context)
    return ModelPrediction(
        model=cfg.key or cfg.name, machine=m.key or m.name, phase=phase, tokens=tokens if phase == "prefill" else 1,
        batch=batch, context=S, attention=attention, precision=precision, tensor_parallel=int(tensor_parallel),
        ops=tuple(ops), machine_spec=m, cost_model=cost_model, totals=totals(ops, m, cost_model),
    )


def time_to_first_token(model, machine, tokens, batch=1, **kwargs) -> ModelPrediction:
    """Prefill of ``tokens`` prompt tokens for ``batch`` sequences: the time to first token."""
    return predict_model(model, machine, "prefill", tokens, batch, **kwargs)


def decode_step(model, machine, batch=1, context=4096, **kwargs) -> ModelPrediction:
    """One decode step: one new token for each of ``batch`` sequences with ``context`` cached."""
    return predict_model(model, machine, "decode", 1, batch, context, **kwargs)


# ---------------------------------------------------------------------------------------------
# Memory for inference, and where the KV cache overtakes the weights
# ---------------------------------------------------------------------------------------------


def inference_weight_bytes(model, precision: Precision | None = None, tensor_parallel: int = 1) -> float:
    """Weights one GPU holds: every parameter (all experts) of its tensor-parallel slice, at the
    precision's weight width or, for weights as stored, each part at its stored width."""
    precision = precision or Precision()
    sh = shard(model, tensor_parallel)
    if precision.stored is not None:
        p = count_params(sh)
        return float(sum(v * precision.weight_width(k) for k, v in p.items() if k != "total"))
    return count_params(sh)["total"] * DTYPE_BYTES[precision.weights]


def kv_bytes_per_token(model, precision: Precision | None = None, tensor_parallel: int = 1) -> float:
    """What each further cached token adds on one GPU at long context (full-attention and MLA
    layers; windowed and state-space layers add nothing past their window): 2 L K d_head w for a
    plain model."""
    precision = precision or Precision()
    return kv_cache_bytes_per_token(shard(model, tensor_parallel), precision.kv_cache)


def kv_bytes_per_sequence(model, context, precision: Precision | None = None, tensor_parallel: int = 1):
    """The whole cache of one sequence of ``context`` tokens on one GPU: K and V of min(S, W)
    tokens per attention layer, MLA latents, SSM states (transformer.cache_bytes_per_sequence)."""
    precision = precision or Precision()
    return cache_bytes_per_sequence(shard(model, tensor_parallel), context, precision.kv_cache)


def max_context_within(model, free_bytes: float, batch: int, precision: Precision | None = None,
                       tensor_parallel: int = 1, limit: int = 2**24) -> int:
    """The longest context S (at most ``limit``) whose cache for ``batch`` sequences fits in
    ``free_bytes`` (0 when not even one token's does). The cache grows with S, piecewise linearly
    (windows cap their layers), so a bisection finds the exact integer."""
    def fits(S):
        return batch * float(kv_bytes_per_sequence(model, S, precision, tensor_parallel)) <= free_bytes

    if not fits(1):
        return 0
    if fits(limit):
        return limit
    lo, hi = 1, limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def kv_overtakes_weights_context(model, batch=1, precision: Precision | None = None, tensor_parallel: int = 1):
    """The smallest context S at which a decode step reads at least as much cache (B times the
    cache of one sequence at S) as weights. Weight bytes read are the matmul weights (the experts a
    batch of B touches, for MoE), not the embedding table. None when the cache stops growing before
    it gets there (windowed and state-space layers only), up to 2^24 tokens."""
    precision = precision or Precision()
    step = _model_ops(model, "decode", 1, batch, 1, "flash", precision, tensor_parallel, None)
    read = sum(op.weight_bytes * op.count for op in step if op.kernel.category == "matmul")  # the LM head included

    def crossover(read_b, b):
        per_token = kv_bytes_per_token(model, precision, tensor_parallel)
        if per_token > 0:
            guess = int(np.ceil(read_b / (b * per_token)))
            if float(b * kv_bytes_per_sequence(model, guess, precision, tensor_parallel)) >= read_b:
                lo, hi = 0, guess  # windows only add bytes: the exact S is at or below the full-attention guess
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if float(b * kv_bytes_per_sequence(model, mid, precision, tensor_parallel)) >= read_b else (mid, hi)
                return hi
        top = 2**24
        if float(b * kv_bytes_per_sequence(model, top, precision, tensor_parallel)) < read_b:
            return None
        lo, hi = 0, top
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if float(b * kv_bytes_per_sequence(model, mid, precision, tensor_parallel)) >= read_b else (mid, hi)
        return hi

    if np.ndim(read) == 0 and np.ndim(batch) == 0:
        return crossover(float(read), float(batch))
    reads, batches = np.broadcast_arrays(np.asarray(read, dtype=float), np.asarray(batch, dtype=float))
    out = [crossover(r, b) for r, b in zip(reads.ravel(), batches.ravel())]
    return np.array([-1 if x is None else x for x in out], dtype=np.int64).reshape(reads.shape)
