"""One layer as a list of kernels (the workshop of the 'Predicting a Kernel's Time' plate), for every kind of layer.

Workload (workload.py): T new tokens per sequence, batch B, against S positions (context). Prefill: the T tokens are
the last T of S (S = T for a prompt with no cache; S > T is a chunked-prefill step over a cache of S - T tokens),
causal. Decode: one new token per sequence with S tokens cached.

Attention is "naive" (QK^T, softmax and PV as three kernels with the scores in memory, as the workshop has it) or
"flash" (one kernel; only Q, K, V and O touch memory). Sliding-window and chunked layers attend to at most W (C)
keys per query (attention_pairs.attended_pairs) and read at most min(S, T + W - 1) keys.

Multi-head latent attention is costed in the form engines run it (vLLM, SGLang, FlashMLA): prefill expanded (the
latent of all S positions decompressed by kv_b_proj to per-head keys and values, then attention with d_qk = nope +
rope and d_v), decode absorbed (queries multiplied into the latent space, one shared latent "head" of kv_lora_rank +
rope read from the cache, outputs multiplied back by W_UV). Its attention is one fused kernel in both forms,
whatever ``attention`` says. DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5) adds the lightning indexer's ops
(its projections, a score for every (query, key) pair a query may see, the top-k selection) and attends each query
to its top k: decode reads min(S, k) latents a sequence; prefill keeps the expanded form over all S positions with
min(p, k) keys a query (the V3.2 report's masked-MHA prefill; an engine that runs prefill absorbed through sparse
MQA kernels spends more FLOPs a pair). MiniMax Sparse Attention (MSA: MiniMax-M3) on grouped-query attention adds a
block indexer's ops (its projections, a score for every (query, key) pair pooled to one a block, the top-k blocks)
and one sparse attention kernel over each query's top min(p, k) keys: decode reads min(S, k) keys a sequence, a
prefill chunk all S (its queries' selections together).

A parallel mixer (Falcon-H1) runs the attention's ops and the Mamba-2 mixer's on the one normed input, then one add
of their two outputs; its multipliers are constants folded into neighbouring ops.

State-space layers are costed in their recurrent form: 6 FLOPs per state element per token (7 for Gated DeltaNet's
delta rule), the state read and written once per decode step (kept on chip through a prefill, written once).

Byte counts (w bytes per element): matmul w (MK + KN + MN); a norm reads and writes the (BT, D) activations; a
residual add reads two (three for a parallel block) and writes one; an activation reads its inputs and writes one
output. Weights of norms, biases and attention sinks are ignored. The new token's K and V are counted as part of the
QKV projection's output.

Each kernel carries its role: ``weight_elems`` (the weights it reads, of parameter part ``part``) and
``cache_elems`` (KV cache or SSM state it reads or writes); planning re-prices those at their stored widths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.architecture import Layer
from roofline.cost import CostModel, WorkloadPrediction, seed_cost_model
from roofline.errors import MAX_COUNT, check_number
from roofline.attention_ops import SPARSE_ATTENTION, SPARSE_GQA, attention_ops, latent_ops
from roofline.kernels import FLOPS_PER_ELEMENT, MOE_EXPERTS, Kernel, all_reduce_kernel
from roofline.kernel_shapes import GATED_DELTA_NET, KIMI_DELTA_ATTENTION, MAMBA2_CONV
from roofline.op_counts import conv1d_counts, gdn_counts
from roofline.machines import Machine, get_machine
from roofline.mixers import MLP, Attention, GatedDeltaNet, LatentAttention, Mamba, Mamba2, MoE, ParallelMixer
from roofline.model_sources import get_model
from roofline.op_builder import OpBuilder, builder_for, row_builder_for
from roofline.op_counts import expert_matmul_counts
from roofline.routing import expected_experts_touched  # noqa: F401 (its home: routing.py; read here and from here)
from roofline.tables import Tabular
from roofline.units import DTYPE_BYTES
from roofline.workload import ATTENTIONS, PHASES, Workload, check_size, checked_workload



# ---------------------------------------------------------------------------------------------
# Kernel builders (trusted inputs: the workload is validated once, in block_kernels); the attention
# family's in attention_ops.py, the per-op builder (OpBuilder) in op_builder.py
# ---------------------------------------------------------------------------------------------

_ACT_NAMES = {"gelu_pytorch_tanh": "gelu", "gelu_new": "gelu", "swish": "silu"}  # the name an op says for a config's


def _act_name(mlp, gated: bool) -> str:
    act = _ACT_NAMES.get(mlp.activation, mlp.activation)
    return f"{act}*mul" if gated else act


def _mlp_ops(o: OpBuilder, mlp: MLP, M, D, prefix="", part="mlp") -> list[Kernel]:
    """A dense MLP on M rows: gate+up (one (D, 2F) matmul), act*mul, down; or up, act, down."""
    F = mlp.d_ff
    if mlp.gated:
        return [o.mm(f"{prefix}gate+up proj", M, 2 * F, D, part),
                o.ew(f"{prefix}{_act_name(mlp, True)}", M * F, 2, 1, FLOPS_PER_ELEMENT["gated_activation"]),
                o.mm(f"{prefix}down proj", M, D, F, part)]
    return [o.mm(f"{prefix}up proj", M, F, D, part),
            o.ew(f"{prefix}{_act_name(mlp, False)}", M * F, 1, 1, FLOPS_PER_ELEMENT["gelu"]),
            o.mm(f"{prefix}down proj", M, D, F, part)]


def _moe_ops(o: OpBuilder, moe: MoE, M, D, touched=None) -> list[Kernel]:
    """Router (M, E); the routed experts (routed_ops), between the latent down (D -> R) and up
    (R -> D) projections on all M rows where the MoE has a latent R; a shared expert on all M rows."""
    R = moe.latent
    ops = [o.mm("router", M, moe.n_experts, D, "router")]
    if R:
        ops.append(o.mm("latent down proj", M, R, D, "experts"))
    ops += routed_ops(o, moe, M, R or D, touched)
    if R:
        ops.append(o.mm("latent up proj", M, D, R, "experts"))
    if moe.shared_d_ff:
        ops += _mlp_ops(o, moe.shared, M, D, "shared ", "shared_experts")
        if moe.shared_gate:
            ops.append(o.mm("shared gate", M, 1, D, "shared_experts"))
    return ops


def routed_ops(o: OpBuilder, moe, M, D, touched=None) -> list[Kernel]:
    """Routed experts of width D (the model's, or the MoE's latent) on M k token-expert rows,
    reading the weights of the experts the M tokens are expected to touch
    (expected_experts_touched, unless ``touched`` is given)."""
    w = o.w
    k, E, F = moe.top_k, moe.n_experts, moe.d_ff
    touched = expected_experts_touched(E, k, M) if touched is None else touched
    rows = M * k
    up = 2 if moe.gated else 1
    shape = (MOE_EXPERTS, M, D, F, k, E, moe.gated, o.dtype, o.dtype)  # weights and compute: model_ops sets them
    return [o.kernel("expert gate+up proj" if moe.gated else "expert up proj",
                     *expert_matmul_counts(rows, D, F, up, touched, w), "matmul", o.dtype,
                     weight_elems=touched * up * D * F, part="experts", shape=shape),
            o.ew(_act_name(moe, moe.gated), rows * F, 2 if moe.gated else 1, 1,
                 FLOPS_PER_ELEMENT["gated_activation" if moe.gated else "gelu"], shape=shape),
            o.kernel("expert down proj", *expert_matmul_counts(rows, F, D, 1, touched, w), "matmul", o.dtype,
                     weight_elems=touched * F * D, part="experts", shape=shape)]


def _ssm_ops(o: OpBuilder, s, B, T, decode: bool, D, prefix="") -> list[Kernel]:
    """Mamba-2 or Mamba in its recurrent form (module docstring); ``prefix`` before each op's name
    but the scan's ("ssm " beside a parallel block's attention, whose "out proj" is the other)."""
    M = B * T
    state = B * s.d_inner * s.d_state
    state_io = 2.0 * state if decode else state  # decode reads and writes it; prefill writes it once
    if isinstance(s, Mamba2):
        cf, cb, conv_io = conv1d_counts(s.conv_channels, s.conv_kernel, B, T, decode, o.w)
        ops = [o.mm(f"{prefix}in proj", M, s.in_proj_width, D, "ssm"),
               o.kernel(f"{prefix}conv1d", cf, cb, "elementwise", o.dtype, cache_elems=conv_io,
                        shape=(MAMBA2_CONV, B, T, s.conv_channels, s.conv_kernel, decode, D)),
               o.kernel("ssm scan", 6.0 * M * s.d_inner * s.d_state,
                        o.w * (M * (s.d_inner + 2 * s.n_groups * s.d_state + s.heads) + M * s.d_inner + state_io),
                        "scan", o.dtype, cache_elems=state_io),
               (o.ew(f"{prefix}gated norm", M * s.d_inner, 2, 1, FLOPS_PER_ELEMENT["gated_rmsnorm"]) if s.gated_norm
                else o.ew(f"{prefix}gate (y*silu(z))", M * s.d_inner, 2, 1, FLOPS_PER_ELEMENT["gated_activation"])),
               o.mm(f"{prefix}out proj", M, D, s.d_inner, "ssm")]
        return ops
    inner = s.d_inner
    cf, cb, conv_io = conv1d_counts(inner, s.conv_kernel, B, T, decode, o.w)
    return [o.mm(f"{prefix}in proj", M, 2 * inner, D, "ssm"),
            o.kernel(f"{prefix}conv1d", cf, cb, "elementwise", o.dtype, cache_elems=conv_io),
            o.mm(f"{prefix}x proj", M, s.dt_rank + 2 * s.d_state, inner, "ssm"),
            o.mm(f"{prefix}dt proj", M, inner, s.dt_rank, "ssm"),
            o.kernel("ssm scan", 6.0 * M * inner * s.d_state,
                     o.w * (M * (2 * inner + 2 * s.d_state) + M * inner + state_io), "scan", o.dtype, cache_elems=state_io),
            o.ew(f"{prefix}gate (y*silu(z))", M * inner, 2, 1, FLOPS_PER_ELEMENT["gated_activation"]),
            o.mm(f"{prefix}out proj", M, D, inner, "ssm")]


def _gdn_ops(o: OpBuilder, g: GatedDeltaNet, B, T, decode: bool, D) -> list[Kernel]:
    """Gated DeltaNet in its recurrent form: in proj as the engines run it, two GEMMs, (q, k, v, z) and (b, a) (vLLM's
    and SGLang's in_proj_qkvz and in_proj_ba: sgl-project/sglang PR #21019 merged Qwen3.5's four into those two); the
    conv over q, k, v and the delta rule (gdn_counts); the gated norm; out proj. Kimi Delta Attention adds the rank-r
    gates' up projections and reads a decay per key channel; its gate's activations (O(key_dim) a token) are left out.
    The conv and the rule carry their shape (GATED_DELTA_NET, KDA's KIMI_DELTA_ATTENTION: the tables' keys)."""
    M = B * T
    (cf, cb, conv_io), (rf, rb, state_io) = gdn_counts(g, B, T, decode, o.w)
    gates = [o.mm("gate up proj (f_b, g_b)", M, g.gate_up_width, g.gate_rank, "ssm")] if g.gate_rank else []
    tag = KIMI_DELTA_ATTENTION if g.gate_rank else GATED_DELTA_NET
    shape = (lambda part: (tag, part, B, T, g.k_heads, g.k_head_dim, g.v_heads, g.v_head_dim, g.conv_kernel, decode, D))
    ba = 0 if g.gate_rank else 2 * g.v_heads  # KDA's in proj is one matrix (q, k, v, b and its gates' inputs)
    proj = [o.mm("in proj" if not ba else "in proj (q, k, v, z)", M, g.in_proj_width - ba, D, "ssm")] + \
        ([o.mm("in proj (b, a)", M, ba, D, "ssm")] if ba else [])
    return [*proj, *gates,
            o.kernel("conv1d", cf, cb, "elementwise", o.dtype, cache_elems=conv_io, shape=shape("conv")),
            o.kernel("gated delta rule", rf, rb, "scan", o.dtype, cache_elems=state_io, shape=shape("rule")),
            o.ew("gated norm", M * g.value_dim, 2, 1, FLOPS_PER_ELEMENT["gated_rmsnorm"]),
            o.mm("out proj", M, D, g.value_dim, "ssm")]


def attention_used(layer: Layer, attention: str) -> str:
    """The attention a layer of this kind is costed with, as its header says it: ``attention``
    (naive or flash) for standard attention; latent attention (MLA) is costed fused whatever is
    asked (its absorbed form: no T x S scores in memory), said where naive was; a layer with no
    attention (state-space, or none) says no."""
    if isinstance(layer.mixer, LatentAttention) and attention != "flash":
        return "flash (MLA: costed fused only, not naive)"
    if not layer.attends:
        return "no"
    return attention


QK_NORM_VALUES = 2  # a token's q and k variances, all-reduced together in fp32 (vLLM's minimax_qk_norm_fusion)
QK_NORM_REDUCED = ("minimax_m2",)  # model types whose engines all-reduce the variances (OLMo-2's all-gather q and k)


def qk_norm_all_reduce_op(M, t: int, link: str) -> Kernel:
    """A layer-wide q/k RMSNorm's all-reduce under TP (MiniMax-M2's per_layer norm: each token's q and k mean squares,
    fp32, summed; vLLM's MiniMaxText01RMSNormTP: one (M, 2) a layer, SGLang's two); as 2-byte words (B300: no fp32)."""
    return all_reduce_kernel(M * QK_NORM_VALUES * 2, t, link, 2.0, name=f"TP q/k-norm all-reduce ({link})")


def layer_qk_norm_all_reduces(layer, model_type: str) -> int:
    """qk_norm_all_reduce_op's a layer runs under TP: one a layer-wide q/k norm's attention, of QK_NORM_REDUCED."""
    return sum(getattr(m, "qk_norm", "") == "rmsnorm_full" for m in layer.mixers) * (model_type in QK_NORM_REDUCED)


def layer_kernels(layer: Layer, d_model: int, decode: bool, T, B, S, attention: str, dtype: str) -> list[Kernel]:
    """The ops of one layer of this kind, in execution order (trusted, validated sizes)."""
    return layer_ops(builder_for(dtype), layer, d_model, decode, T, B, S, attention)


def layer_rows(layer: Layer, d_model: int, decode: bool, T, B, S, attention: str, dtype: str) -> list[tuple]:
    """layer_kernels as rows, each a Kernel's fields in a plain tuple (kernels.kernel_row; Kernel.of_row
    makes the object): the whole-model planner's lean form."""
    return layer_ops(row_builder_for(dtype), layer, d_model, decode, T, B, S, attention)


def layer_ops(o: OpBuilder, layer: Layer, D: int, decode: bool, T, B, S, attention: str) -> list:
    """The ops of one layer of this kind, in execution order, each made by ``o`` (a Kernel or a row)."""
    M = B * T
    mix = layer.mixer
    if isinstance(mix, ParallelMixer):  # both on the one normed input, their outputs summed (one add, 2 reads, 1 write)
        mixer = [*attention_ops(o, mix.attention, B, T, S, decode, attention, D),
                 *_ssm_ops(o, mix.ssm, B, T, decode, D, "ssm "),  # "ssm out proj" beside the attention's "out proj"
                 o.ew("attention + ssm sum", M * D, 2, 1)]
    elif isinstance(mix, Attention):
        mixer = attention_ops(o, mix, B, T, S, decode, attention, D)
    elif isinstance(mix, LatentAttention):
        mixer = latent_ops(o, mix, B, T, S, decode, D)
    elif isinstance(mix, (Mamba2, Mamba)):
        mixer = _ssm_ops(o, mix, B, T, decode, D)
    elif isinstance(mix, GatedDeltaNet):
        mixer = _gdn_ops(o, mix, B, T, decode, D)
    else:
        mixer = []
    ff = layer.mlp
    if isinstance(ff, MoE):
        channel = _moe_ops(o, ff, M, D)
    elif ff is not None:
        channel = _mlp_ops(o, ff, M, D)
    else:
        channel = []
    norm = layer.norm
    first = "attn norm" if layer.attends or layer.parallel else ("norm" if not channel else "mixer norm")
    if layer.parallel:  # one norm (two for NeoX) feeds both; one add of three
        norms = [o.norm(first, M, D, norm)] + [o.norm(f"norm {i + 2}", M, D, norm) for i in range(layer.n_norms - 1)]
        return [*norms, *mixer, *channel, o.ew("residual add", M * D, 3, 1)]
    ops: list[Kernel] = []
    extra = layer.n_norms - (bool(mixer) + bool(channel))  # Gemma's post-attention and post-feedforward norms
    if mixer:
        ops += [o.norm(first if channel else "norm", M, D, norm), *mixer]
        if extra > 0:
            ops.append(o.norm("post-attn norm", M, D, norm))
        ops.append(o.ew("residual add", M * D, 2, 1))
    if channel:
        ops += [o.norm("ffn norm" if mixer else "norm", M, D, norm), *channel]
        if extra > 1:
            ops.append(o.norm("post-ffn norm", M, D, norm))
        ops.append(o.ew("residual add 2" if mixer else "residual add", M * D, 2, 1))
    return ops


# ---------------------------------------------------------------------------------------------
# The entry points (the workload validated once, in workload.checked_workload)
# ---------------------------------------------------------------------------------------------


def block_kernels(cfg, phase: str = "prefill", tokens=None, batch=1, context=None, attention: str = "naive",
                  dtype: str = "bf16", layer: int | None = None) -> list[Kernel]:
    """The ops of one layer, in execution order: layer ``layer`` (an index), or the model's only
    kind. ``tokens`` is T (prefill); ``context`` S (decode: keys cached, default ``tokens``; prefill:
    default T, larger for a chunked-prefill step). Sizes may be numpy arrays."""
    model = get_model(cfg)
    w = checked_workload(model, phase, tokens, batch, context, attention, dtype)
    kind = model.only_kind("a one-layer breakdown") if layer is None else model.layer(layer)
    return layer_kernels(kind, model.d_model, w.decode, w.tokens, w.batch, w.context, attention, dtype)


@dataclass(frozen=True)
class LayerReport(Tabular):
    """One layer's prediction with the configuration that produced it. ``layer_kind`` names the
    kind, ``layer_count`` how many of the model's layers have it, ``layer_index`` the first."""

    machine_key: str
    model: str
    phase: str
    tokens: int
    batch: int
    context: int
    attention: str
    dtype: str
    prediction: WorkloadPrediction
    layer_kind: str = ""
    layer_count: int = 1
    layer_index: int = 0
    n_layers: int = 1
    tensor_parallel: int = 1  # > 1: one GPU's slice of the layer and its all-reduces ...
    tp_link: str = ""  # ... over this link

    def to_dict(self) -> dict:
        pred = self.prediction.to_dict()
        cost_model = pred.pop("model", "roofline cost model")
        pred.setdefault("compute_efficiency", None)  # a calibrated model has measured rates instead
        pred.setdefault("memory_efficiency", None)
        head = {
            "machine": self.machine_key,
            "machine_name": pred.pop("machine"),
            "model": self.model,
            "phase": self.phase,
            "tokens": self.tokens,
            "batch": self.batch,
            "context": self.context,
            "attention": self.attention,
            "dtype": self.dtype,
            "layer_kind": self.layer_kind,
            "layer_count": self.layer_count,
            "layer_index": self.layer_index,
            "n_layers": self.n_layers,
            "tensor_parallel": self.tensor_parallel,
            "tp_link": self.tp_link or None,
        }
        return {**head, "cost_model": cost_model, **pred}

    def to_table(self) -> str:
        """The layer's op table and readouts (WorkloadPrediction.to_table); `roofline layer` heads it
        with what ran and the cost model."""
        return self.prediction.to_table()


def layer_reports(model="llama3-8b", machine="h100-sxm", phase: str = "prefill", tokens: int | None = None,
                  batch: int = 1, context: int | None = None, attention: str = "naive", dtype: str = "bf16",
                  cost_model: CostModel | None = None, layer: int | None = None, tensor_parallel: int = 1,
                  all_reduce=None, tp_link: str = "") -> list[LayerReport]:
    """One report per distinct layer kind of ``model`` (with how many layers have it), or one for
    layer index ``layer``. Defaults: the workshop's cost model with the machine's launch overhead.
    ``tensor_parallel`` t > 1: ``model`` is one GPU's slice (plan.parallel.shard) and
    ``all_reduce(M, i)`` the Kernel of the layer's i-th all-reduce of M rows (Layer.tp_all_reduces of them)."""
    cfg = get_model(model)
    m: Machine = get_machine(machine)
    if cost_model is None:
        cost_model = seed_cost_model(launch_overhead_s=m.launch_overhead_s)
    w = checked_workload(cfg, phase, tokens, batch, context, attention, dtype)
    if layer is not None:
        check_number("layer", layer, minimum=0, strictly=False, maximum=MAX_COUNT, integer=True)
        kind = cfg.layer(int(layer))
        picks = [(kind, sum(1 for i in cfg.order if cfg.kinds[i] == kind), int(layer))]
    else:
        picks = [(k, n, cfg.layers.index(k)) for k, n in cfg.kind_counts()]
    out = []
    for kind, n, index in picks:
        kernels = layer_kernels(kind, cfg.d_model, w.decode, w.tokens, w.batch, w.context, attention, dtype)
        if all_reduce is not None:
            rows = w.batch * (1 if w.decode else w.tokens)  # the (rows, D) activations each all-reduce sums
            kernels += [all_reduce(rows, i + 1) for i in range(kind.tp_all_reduces)]
            qk = layer_qk_norm_all_reduces(kind, cfg.model_type)
            kernels += [qk_norm_all_reduce_op(rows, int(tensor_parallel), tp_link)] * qk
        out.append(LayerReport(machine_key=m.key or m.name, model=cfg.key or cfg.name, phase=w.phase, tokens=w.tokens,
                               batch=batch, context=w.context, attention=attention_used(kind, attention), dtype=dtype,
                               prediction=cost_model.predict(kernels, m), layer_kind=kind.label, layer_count=n,
                               layer_index=index, n_layers=cfg.n_layers, tensor_parallel=int(tensor_parallel), tp_link=tp_link))
    return out


def layer_report(model="llama3-8b", machine="h100-sxm", phase: str = "prefill", tokens: int | None = None,
                 batch: int = 1, context: int | None = None, attention: str = "naive", dtype: str = "bf16",
                 cost_model: CostModel | None = None, layer: int | None = None) -> LayerReport:
    """Predict one layer of ``model`` on ``machine``: the only kind of a uniform model, or layer
    index ``layer`` (defaults: the workshop's cost model, with the machine's preset launch overhead)."""
    cfg = get_model(model)
    if layer is None:
        cfg.only_kind("a one-layer report")
    return layer_reports(cfg, machine, phase, tokens, batch, context, attention, dtype, cost_model, layer)[0]


__all__ = [
    "PHASES", "ATTENTIONS", "Workload", "check_size", "checked_workload",  # re-exported from workload.py
    "SPARSE_ATTENTION", "SPARSE_GQA",  # re-exported from attention_ops.py
    "expected_experts_touched", "layer_kernels", "layer_rows", "layer_ops", "routed_ops", "block_kernels", "LayerReport", "layer_reports", "layer_report",
]


def storage_note(cfg, dtype: str, given: bool = False, doing: str = "priced") -> str | None:
    """What `layer` and the web's layer view (``doing`` 'priced') and `trace` ('traced') say when the checkpoint stores
    weights otherwise than the one ``dtype`` they use (a plain width only where ``dtype`` was not
    ``given`` by a flag: then it is the user's choice)."""
    if cfg.storage.parts:
        return (f"every weight is {doing} at {dtype} here; the checkpoint stores {cfg.storage.label()}: "
                "`roofline decode` and `roofline memory` price them as stored")
    if not given and not cfg.storage.assumed and DTYPE_BYTES.get(cfg.storage.default) != DTYPE_BYTES.get(dtype):
        verb = {"priced": "prices", "traced": "traces"}.get(doing, doing)
        return (f"every weight is {doing} at {dtype} here; the checkpoint stores {cfg.storage.default}: "
                f"--dtype {cfg.storage.default} {verb} it as stored")
    return None
