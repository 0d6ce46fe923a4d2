"""Transformer accounting: parameter counts, FLOPs per token, training FLOPs and time, memory by
dtype (the roofline chapter, sections 2.3 and 3.2).

Every function takes a model as get_model does (a preset key, a Model, a TransformerConfig or a
config.json path). TransformerConfig, get_model, list_models and the config.json loaders live in
model_sources.py and are re-exported here, where the documented imports name them.

Dimension letters: D d_model, F d_ff, H query heads, K kv heads, d_head head dim, L layers,
V vocab, E experts, s sequence length.

FLOPs convention: one multiply-accumulate is 2 FLOPs. The attention term 4 L h s (h = H d_head)
counts QK^T and PV in full, ignoring causal masking: the PaLM / Megatron convention used for MFU.
"""

from __future__ import annotations

from roofline.architecture import Attention, GatedDeltaNet, LatentAttention, Layer, Mamba, Mamba2, Model, MoE, ParallelMixer
from roofline.errors import MAX_COUNT, check_choice, check_fraction, check_number
from roofline.model_sources import (
    PRESET_KEYS,
    TransformerConfig,
    config_name,
    get_model,
    hf_config_to_model,
    list_models,
    load_hf_config,
    preset_from_table,
    uniform_config,
)
from roofline.units import DTYPE_BYTES, dtype_bytes


# ---------------------------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------------------------

PARTS = ("embedding", "position", "attention", "ssm", "mlp", "experts", "expert_biases", "shared_experts", "router", "norms",
         "lm_head")


def count_params(model) -> dict[str, int]:
    """Parameter count by part, with ``total``. Parts: embedding (V D), position (learned
    positions), attention and ssm (token mixers), mlp (dense), experts (every routed expert's weight
    matrices) and expert_biases, shared_experts, router, norms (each layer's and the final one), lm_head (V D and its bias; zero
    when tied to the embedding)."""
    m = get_model(model)
    D, V = m.d_model, m.vocab
    parts = dict.fromkeys(PARTS, 0)
    for layer, n in m.kind_counts():
        for k, v in layer.parts(D).items():
            parts[k] += n * v
    parts["embedding"] = V * D
    parts["position"] = m.positions * D
    parts["norms"] += 2 * D if m.final_norm == "layernorm" else D
    parts["lm_head"] = (0 if m.tied_embeddings else V * D) + (V if m.lm_head_bias else 0)
    parts["total"] = sum(parts.values())
    return parts


def _inactive_experts(m: Model) -> int:
    """Parameters of the routed experts one token does not use: (E - k) experts per MoE layer."""
    return sum(n * (k.mlp.n_experts - k.mlp.top_k) * k.mlp.expert.params(k.mlp.expert_width(m.d_model))
               for k, n in m.kind_counts() if k.is_moe)


def active_params(model, embeddings: bool = True) -> int:
    """Parameters one token touches: every routed expert counts only if routed to (top_k of
    n_experts); shared experts always. Embedding and LM head are in (the model cards' convention);
    ``embeddings=False`` leaves the input embedding table (and learned positions) out. Equals
    count_params(model)['total'] for a dense model."""
    m = get_model(model)
    p = count_params(m)
    n = p["total"] - _inactive_experts(m)
    return n if embeddings else n - p["embedding"] - p["position"]


def _matmul_params_of(layer: Layer, D: int) -> int:
    """Weights one token multiplies by in a layer: the mixer's projections (an SSM's in/out
    projections, not its conv, A, D or norm), the active experts, shared experts, router, dense MLP."""
    n = 0
    mixer = layer.mixer
    if isinstance(mixer, ParallelMixer):  # both mixers' projections
        n += sum(_matmul_params_of(Layer(m, None), D) for m in mixer.parts)
    elif isinstance(mixer, Mamba2):
        n += D * mixer.in_proj_width + mixer.d_inner * D
    elif isinstance(mixer, Mamba):
        n += D * 2 * mixer.d_inner + mixer.d_inner * (mixer.dt_rank + 2 * mixer.d_state) + mixer.dt_rank * mixer.d_inner \
            + mixer.d_inner * D
    elif isinstance(mixer, GatedDeltaNet):
        n += D * mixer.in_proj_width + mixer.gate_rank * mixer.gate_up_width + mixer.value_dim * D
    elif isinstance(mixer, Attention):
        a = mixer
        n += D * a.qkv_width + a.heads * a.v_head_dim * D + a.indexer_params(D) - 2 * a.index_head_dim  # less its norms
    elif isinstance(mixer, LatentAttention):
        n += mixer.params(D) - mixer.q_lora_rank - mixer.kv_lora_rank - 2 * mixer.index_head_dim  # less the norms
    ff = layer.mlp
    if isinstance(ff, MoE):
        n += ff.top_k * 2 * ff.expert_width(D) * ff.d_ff * (1.5 if ff.gated else 1.0) + ff.latent_params(D)
        n += (ff.shared.params(D) - (0 if not ff.shared.bias else 0)) if ff.shared_d_ff else 0
        n += D * ff.n_experts + (D if ff.shared_gate else 0)
    elif ff is not None:
        n += (3 if ff.gated else 2) * D * ff.d_ff
    return int(n)


def matmul_params(model) -> int:
    """Parameters one token multiplies by: every layer's projections (the active experts for MoE),
    the routers and the LM head (a matmul against the vocabulary even when tied). The input
    embedding is a gather, and norms, biases, convs and SSM decay terms are elementwise, so none
    counts."""
    m = get_model(model)
    return sum(n * _matmul_params_of(k, m.d_model) for k, n in m.kind_counts()) + m.vocab * m.d_model


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------


def attention_flops_per_token_forward(model, seq_len) -> float:
    """Attention's context term per token, forward, full (non-causal) count: per attention layer
    2 H (d_qk + d_v) s_eff, QK^T and PV, with s_eff = min(s, W) for sliding and chunked layers.
    For a plain model (d_qk = d_v = d_head, h = H d_head) that is the 4 L h s of the MFU convention.
    MLA counts its expanded per-head form (d_qk = nope + rope, d_v), as training runs it; under
    DeepSeek Sparse Attention over s_eff = min(s, k), plus the indexer's scores over all s
    (2 H_I d_I s); MiniMax Sparse Attention the same on grouped-query attention."""
    check_number("seq_len", seq_len, minimum=0, strictly=False, maximum=MAX_COUNT)
    m = get_model(model)
    total = 0.0
    for layer, n in m.kind_counts():
        a = next((x for x in layer.mixers if isinstance(x, (Attention, LatentAttention))), None)  # a parallel mixer's too
        if isinstance(a, Attention):
            total += n * 2.0 * a.heads * (a.head_dim + a.v_head_dim) * a.attended(seq_len)
            total += n * 2.0 * a.index_heads * a.index_head_dim * seq_len
        elif isinstance(a, LatentAttention):
            total += n * 2.0 * a.heads * (a.qk_head_dim + a.v_head_dim) * a.attended(seq_len)
            total += n * 2.0 * a.index_heads * a.index_head_dim * seq_len
    return total


def scan_flops_per_token_forward(model) -> float:
    """State-space layers' scan and conv per token (Mamba2.scan_flops_per_token), forward."""
    m = get_model(model)
    return sum(n * x.scan_flops_per_token() for k, n in m.kind_counts() for x in k.mixers
               if isinstance(x, (Mamba2, Mamba, GatedDeltaNet)))


def train_flops_per_forward(recompute: bool = False) -> float:
    """Training FLOPs as a multiple of the forward's: 3 (the backward pass does 2 x the forward's
    matmul FLOPs, gradients of the inputs and of the weights); 4 with full activation recompute,
    the forward run a second time before the backward (Korthikanti et al. 2022, arXiv:2205.05198)."""
    return 4.0 if recompute else 3.0


def flops_per_token(model, seq_len, mode: str = "train", recompute: bool = False) -> float:
    """FLOPs per token. forward = 2 N_matmul + attention's context term + SSM scans; train =
    train_flops_per_forward x forward: 3 x, 4 x with full activation recompute."""
    check_choice("mode", mode, ("forward", "train"))
    m = get_model(model)
    fwd = 2.0 * matmul_params(m) + attention_flops_per_token_forward(m, seq_len) + scan_flops_per_token_forward(m)
    if mode == "forward":
        return fwd
    return train_flops_per_forward(recompute) * fwd


def training_flops(model, tokens, seq_len, recompute: bool = False) -> float:
    """Total training FLOPs: flops_per_token(train) x tokens ((6 N_matmul + 12 L h s) x tokens for
    a plain model; 8 N + 16 L h s with recompute)."""
    check_number("tokens", tokens)
    return flops_per_token(model, seq_len, "train", recompute) * tokens


def six_nd(n_params, tokens) -> float:
    """The back-of-envelope C = 6 N D: 2 N per token forward, train_flops_per_forward x that
    (Kaplan et al. 2020, arXiv:2001.08361, section 2.1; ignores the attention term)."""
    check_number("n_params", n_params)
    check_number("tokens", tokens)
    return train_flops_per_forward() * 2.0 * n_params * tokens


def training_time_s(total_flops, n_gpus, peak_flops_per_s, utilization) -> float:
    """Wall-clock seconds to execute ``total_flops`` on ``n_gpus`` at a utilisation of their peak.
    Model FLOPs with MFU give the plan; hardware FLOPs (with recompute) with HFU give the same
    wall-clock when both describe one run."""
    check_number("total_flops", total_flops)
    check_number("gpus", n_gpus, maximum=1e8)
    check_number("peak_flops_per_s", peak_flops_per_s)
    check_fraction("mfu", utilization)
    return total_flops / (n_gpus * peak_flops_per_s * utilization)


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------

# Mixed-precision Adam (Rajbhandari et al. 2020, "ZeRO", arXiv:1910.02054, section 3.1):
# 2 psi bf16 weights + 2 psi bf16 gradients + K psi optimizer states, K = 12 (fp32 master weights,
# Adam momentum and variance): 16 bytes per parameter.
WEIGHT_BYTES_PER_PARAM = 2.0
GRADIENT_BYTES_PER_PARAM = 2.0
OPTIMIZER_BYTES_PER_PARAM = 12.0


def weight_bytes(model, dtype: str | None = None) -> float:
    """All weights: at ``dtype`` (fp32 4, bf16 2, fp8 1, int4 0.5 bytes per parameter), or as the
    checkpoint stores them (Model.storage: quantised parts at their width, the rest at the
    checkpoint's dtype) when dtype is None."""
    m = get_model(model)
    p = count_params(m)
    if dtype is not None:
        return p["total"] * dtype_bytes(dtype)
    base = dtype_bytes(m.storage.default)
    return float(sum(p[part] * m.storage.width(part, base) for part in PARTS))


def model_state_bytes(n_params, data_parallel: int = 1, zero: int = 0) -> dict[str, float]:
    """Weights, gradients and Adam state per GPU for ``n_params`` parameters, ZeRO stage ``zero``
    over ``data_parallel`` ranks: stage 1 shards the optimizer states, stage 2 the gradients too,
    stage 3 the weights too (ZeRO section 5; 7.5B params on 64 GPUs: 120, 31.4, 16.6, 1.88 GB)."""
    check_number("params", n_params)
    check_number("data_parallel", data_parallel, maximum=1e7, integer=True)
    check_choice("zero", zero, (0, 1, 2, 3))
    n, d = float(n_params), float(data_parallel)
    return {
        "weights": WEIGHT_BYTES_PER_PARAM * n / (d if zero >= 3 else 1.0),
        "gradients": GRADIENT_BYTES_PER_PARAM * n / (d if zero >= 2 else 1.0),
        "optimizer": OPTIMIZER_BYTES_PER_PARAM * n / (d if zero >= 1 else 1.0),
    }


def training_state_bytes(model) -> float:
    """Weights, gradients and Adam state in mixed precision on one GPU: 16 bytes per parameter
    (model_state_bytes without ZeRO)."""
    return sum(model_state_bytes(count_params(model)["total"]).values())


def cache_elems_per_sequence(model, context) -> object:
    """Elements one sequence of ``context`` tokens keeps in the cache, over all layers: K and V of
    min(S, W) tokens per attention layer (W the window or chunk, unlimited for full attention), MLA's
    latent, and each state-space layer's constant state. Arrays broadcast."""
    m = get_model(model)
    return sum(n * layer.cache_elems(context) for layer, n in m.kind_counts())


def cache_bytes_per_sequence(model, context, dtype: str = "bf16") -> object:
    """cache_elems_per_sequence x the cache dtype's width (SSM states too, at that width)."""
    return cache_elems_per_sequence(model, context) * dtype_bytes(dtype)


def kv_cache_bytes_per_token(model, dtype: str = "bf16") -> float:
    """What each further token adds to the cache at long context: K and V (K (d + d_v) w) of every
    full-attention layer, MLA's (kv_lora_rank + rope) w. Windowed, chunked and state-space layers
    add nothing past their window: use cache_bytes_per_sequence for the whole cache at a context.
    2 L K d_head w for a plain model."""
    m = get_model(model)
    per = sum(n * x.cache_elems_per_token() for k, n in m.kind_counts() for x in k.mixers
              if isinstance(x, (Attention, LatentAttention)) and not x.span)
    return float(per) * dtype_bytes(dtype)



def model_summary(model) -> dict:
    """What a listing shows of a model: name, type, layers and their kinds, totals, cache."""
    m = get_model(model)
    p = count_params(m)
    return {
        "key": m.key, "name": m.name, "model_type": m.model_type, "layers": m.n_layers, "d_model": m.d_model,
        "vocab": m.vocab, "params": p["total"], "active_params": active_params(m) if m.is_moe else p["total"],
        "layer_kinds": [{"kind": k.label, "count": n, "first_layer": m.layers.index(k)} for k, n in m.kind_counts()],
        "pattern": m.pattern(),
        "weights_stored": m.storage.label(), "omitted": [x.words for x in m.omitted], "notes": list(m.notes),
        "kv_bytes_per_token_past_windows_bf16": kv_cache_bytes_per_token(m),
        "cache_bytes_per_sequence_bf16": {str(S): float(cache_bytes_per_sequence(m, S)) for S in (4096, 32768, 131072)},
        "max_context": m.max_context or None,
        # the multi-token-prediction module, counted apart from "params" (its own weights; the embedding and head shared)
        "mtp": None if m.mtp is None else {"depth": m.mtp.depth, "layer_kind": m.mtp.layer.label,
                                           "params": m.mtp.params(m.d_model), "source": m.mtp.source},
    }


__all__ = [
    "TransformerConfig", "Model", "count_params", "active_params", "matmul_params", "attention_flops_per_token_forward",
    "flops_per_token", "training_flops", "six_nd", "training_time_s", "weight_bytes", "training_state_bytes",
    "model_state_bytes", "train_flops_per_forward",
    "kv_cache_bytes_per_token", "cache_bytes_per_sequence", "get_model", "list_models", "load_hf_config",
    "hf_config_to_model", "uniform_config", "model_summary", "DTYPE_BYTES",
    "config_name", "preset_from_table", "PRESET_KEYS",  # re-exported from model_sources.py, with those above
]


def cache_name(model) -> str:
    """What a sequence's cache holds, by name: "KV cache" (attention layers, MLA latents included),
    "SSM state" (state-space layers only: a constant state per sequence, not keys and values) or
    "KV cache + SSM state" (hybrids)."""
    cfg = get_model(model) if isinstance(model, str) else model
    ssm, attention = any(k.keeps_state for k in cfg.kinds), any(k.attends for k in cfg.kinds)
    return "KV cache + SSM state" if ssm and attention else "SSM state" if ssm else "KV cache"
