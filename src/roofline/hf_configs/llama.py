"""Loaders of the Llama-like families (Llama, OLMo 2, Mistral, Mixtral, Qwen2/3 and their MoE, GLM-4 MoE, Gemma 1-3),
all built by llama_like: grouped-query attention, an optional window per layer, a gated MLP or MoE."""

from __future__ import annotations

import math
from typing import Callable

from roofline.architecture import MLP, Attention, Layer, LeftOut, Model, MoE
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.kernels import FLOPS_PER_ELEMENT
from roofline.hf_configs.shared import activation_name, assemble, gqa_heads, layer_window, loader, read_layer_types


def llama_like(c: Keys, *, tie_default=False, qkv_bias=None, out_bias=None, qk_norm="", sliding_default=None,
                n_norms=-1, types_default=None, moe: Callable[[int], MoE | None] | None = None,
                dense_ff: int | None = None, head_dim_default=None, gated=True, windowed=True, vocab_default=None,
                act_default="silu", softcap=False) -> Model:
    D = c.pos("hidden_size")
    L = c.pos("num_hidden_layers")
    H = c.pos("num_attention_heads")
    V = c.int("vocab_size", vocab_default)
    if head_dim_default is not None and not c.has("head_dim"):
        kv, d = c.int("num_key_value_heads", H), head_dim_default
    else:
        kv, d = gqa_heads(c, D, H)
    bias = bool(c.get("attention_bias", False))
    qkv_bias = bias if qkv_bias is None else qkv_bias
    out_bias = bias if out_bias is None else out_bias
    window = (c.int("sliding_window", sliding_default or 0) if c.get("sliding_window") is not None or sliding_default
              else 0) if windowed else 0
    types = read_layer_types(c, L, types_default or (lambda i: "sliding_attention" if window else "full_attention"))
    F = dense_ff if dense_ff is not None else c.pos("intermediate_size")
    mlp_bias = bool(c.get("mlp_bias", False))
    act = activation_name(c, act_default)
    layers, built = [], {}
    dense = MLP(F, gated, mlp_bias, act)
    for i in range(L):
        w, ch = layer_window(types, i, int(window))
        if types[i] == "sliding_attention" and not w:
            raise RooflineError(f"{c.name}: layer {i} is sliding_attention but sliding_window is absent", field="model")
        ff = moe(i) if moe else None
        key = (w, ch, ff)
        if key not in built:  # one object per distinct kind
            attn = Attention(H, kv, d, window=w, chunk=ch, qkv_bias=qkv_bias, out_bias=out_bias, qk_norm=qk_norm)
            built[key] = Layer(attn, ff or dense, n_norms=n_norms)
        layers.append(built[key])
    notes = _softcap_notes(c, d, D) if softcap else ()
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", tie_default), notes=notes)


@loader("llama")
def _llama(c: Keys) -> Model:
    """LlamaConfig: tie_word_embeddings False; attention_bias (q, k, v, o) and mlp_bias False;
    head_dim = hidden_size / heads; no sliding window (LlamaAttention reads none: a sliding_window
    key is reported as not understood)."""
    return llama_like(c, windowed=False)


@loader("olmo2")
def _olmo2(c: Keys) -> Model:
    """Olmo2Config (OLMo 2, transformers' modeling_olmo2): Llama's projections and SwiGLU MLP;
    q_norm and k_norm over the whole projection (RMSNorm of H d and of K d, the "rmsnorm_full" kind);
    two RMSNorms a layer, after attention and after the MLP (post_attention_layernorm,
    post_feedforward_layernorm: x + norm(f(x)), the same count as pre-norm); tie False; no window."""
    return llama_like(c, qk_norm="rmsnorm_full", windowed=False)


@loader("mistral")
def _mistral(c: Keys) -> Model:
    """MistralConfig: as Llama, with sliding_window (default 4096; null = full attention) on every layer."""
    return llama_like(c, sliding_default=4096 if "sliding_window" not in c.raw else None)


@loader("mixtral")
def _mixtral(c: Keys) -> Model:
    """MixtralConfig: num_local_experts (8), num_experts_per_tok (2), expert d_ff intermediate_size,
    router (D, E) without bias; sliding_window default None."""
    E, k, F = c.int("num_local_experts", 8), c.int("num_experts_per_tok", 2), c.pos("intermediate_size")
    moe = MoE(E, k, F)
    return llama_like(c, moe=lambda i: moe)


def _qwen_types(c: Keys, L: int):
    """Qwen2/3: sliding layers only when use_sliding_window, from max_window_layers on."""
    use = bool(c.get("use_sliding_window", False))
    first = c.int("max_window_layers", L)
    return lambda i: "sliding_attention" if use and i >= first else "full_attention"


@loader("qwen2")
def qwen2_model(c: Keys) -> Model:
    """Qwen2Config: biases on q, k, v (not o); tie_word_embeddings False; sliding only with use_sliding_window."""
    L = c.pos("num_hidden_layers")
    c.get("sliding_window")  # read either way: it applies only with use_sliding_window
    return llama_like(c, qkv_bias=True, out_bias=False, types_default=_qwen_types(c, L),
                       windowed=bool(c.get("use_sliding_window", False)))


def qwen_moe_layers(c: Keys, L: int, shared: bool) -> Callable[[int], MoE | None]:
    E = c.pos("num_experts")
    k = c.pos("num_experts_per_tok")
    F = c.pos("moe_intermediate_size")
    step = c.int("decoder_sparse_step", 1)
    only = c.get("mlp_only_layers", []) or []
    if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < L for i in only):
        raise RooflineError(f"{c.name}: mlp_only_layers must list layer indices from 0 to {L - 1}, got {only!r}",
                            field="model")
    dense = set(only)
    shared_ff = c.int("shared_expert_intermediate_size") if shared else 0
    moe = MoE(E, k, F, shared_d_ff=shared_ff, shared_gate=shared) if E else None

    def at(i):
        if i in dense or not E or (i + 1) % step:
            return None
        return moe

    return at


@loader("qwen2_moe")
def _qwen2_moe(c: Keys) -> Model:
    """Qwen2MoeConfig: q, k, v biases; MoE on layers (i + 1) % decoder_sparse_step == 0 not in
    mlp_only_layers, each with a shared expert (shared_expert_intermediate_size) and its sigmoid
    gate (D, 1); dense layers use intermediate_size."""
    L = c.pos("num_hidden_layers")
    return llama_like(c, qkv_bias=True, out_bias=False, types_default=_qwen_types(c, L),
                       moe=qwen_moe_layers(c, L, shared=True))


@loader("qwen3", "qwen3_vl_text")
def _qwen3(c: Keys) -> Model:
    """Qwen3Config: q_norm and k_norm (RMSNorm of head_dim); attention_bias False; head_dim given (default 128).
    Also Qwen3-VL's language model (Qwen3VLTextConfig, its text_config): Qwen3's layers; MRoPE changes
    no weights, and the deepstack visual features are added by the vision tower's mergers."""
    L = c.pos("num_hidden_layers")
    return llama_like(c, qk_norm="rmsnorm", types_default=_qwen_types(c, L), head_dim_default=128)


@loader("qwen3_moe", "qwen3_vl_moe_text")
def _qwen3_moe(c: Keys) -> Model:
    """Qwen3MoeConfig: Qwen3 attention; MoE as Qwen2-MoE without shared experts. Also Qwen3-VL-MoE's
    language model (Qwen3VLMoeTextConfig: Qwen3MoeDecoderLayer's layers)."""
    L = c.pos("num_hidden_layers")
    return llama_like(c, qk_norm="rmsnorm", types_default=_qwen_types(c, L), head_dim_default=128,
                       moe=qwen_moe_layers(c, L, shared=False))


@loader("minimax_m2")
def _minimax_m2(c: Keys) -> Model:
    """MiniMaxM2Config (MiniMax-M2, M2.5): full attention of num_attention_heads x head_dim (wider than
    hidden_size) over num_key_value_heads; q and k RMS-normed across all heads (use_qk_norm with
    qk_norm_type per_layer: scales H d and K d wide; per_head would be Qwen3's d); partial rotary
    (rotary_dim: no weights); MoE on every layer: num_local_experts experts of intermediate_size,
    top num_experts_per_tok, a router (D, E), sigmoid scores with a per-expert correction bias
    (use_routing_bias: a buffer, not counted, as DeepSeek-V3's), no shared expert
    (shared_intermediate_size 0); tie False. The multi-token-prediction modules (use_mtp,
    num_mtp_modules) are left out, said."""
    L = c.pos("num_hidden_layers")
    norm = ""
    if c.flag("use_qk_norm", False):
        kind = c.get("qk_norm_type", "per_layer")
        if kind not in ("per_layer", "per_head"):
            raise RooflineError(f"{c.name}: qk_norm_type must be 'per_layer' or 'per_head', got {kind!r}", field="model")
        norm = "rmsnorm_full" if kind == "per_layer" else "rmsnorm"
    if c.int("shared_intermediate_size", 0):
        raise RooflineError(f"{c.name}: a MiniMax-M2 shared expert (shared_intermediate_size "
                            f"{c.raw['shared_intermediate_size']}) is not modelled", field="model")
    for key in ("rotary_dim", "use_routing_bias", "scoring_func", "mtp_transformer_layers"):
        c.get(key)  # read: no weights of their own (partial RoPE, the routing bias buffer, the score function)
    E, k, F = c.pos("num_local_experts"), c.pos("num_experts_per_tok"), c.pos("intermediate_size")
    mtp = c.int("num_mtp_modules", 1) if c.flag("use_mtp", False) else 0  # read before the model is assembled
    model = llama_like(c, qk_norm=norm, head_dim_default=128, moe=lambda i: MoE(E, k, F), dense_ff=F)
    if mtp:
        import dataclasses

        model = dataclasses.replace(model, omitted=model.omitted + (
            LeftOut("mtp", "use_mtp", f"multi-token-prediction modules ({mtp}, use_mtp): not counted"),))
    return model


@loader("glm4_moe")
def _glm4_moe(c: Keys) -> Model:
    """Glm4MoeConfig (GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7): grouped-query attention of head_dim
    (128) with biases on q, k, v when attention_bias (o has none), a per-head RMSNorm on q and k when
    use_qk_norm, partial rotary (partial_rotary_factor: no weights); the first first_k_dense_replace
    (1) layers dense (intermediate_size), the others MoE: n_routed_experts of moe_intermediate_size,
    top num_experts_per_tok, n_shared_experts (1) x moe_intermediate_size shared, a router (D, E)
    with sigmoid scores and e_score_correction_bias (a buffer, not counted, as DeepSeek-V3's); tie
    False. The multi-token-prediction layers (num_nextn_predict_layers) are left out, said."""
    L = c.pos("num_hidden_layers")
    E, k, F = c.pos("n_routed_experts"), c.pos("num_experts_per_tok"), c.pos("moe_intermediate_size")
    moe = MoE(E, k, F, shared_d_ff=c.int("n_shared_experts", 1) * F)
    first = c.int("first_k_dense_replace", 1)
    if c.get("mlp_bias", False):
        raise RooflineError(f"{c.name}: mlp_bias true is not modelled for GLM-4 MoE", field="model")
    bias = c.flag("attention_bias", False)
    mtp = c.int("num_nextn_predict_layers", 0)  # read before the model is assembled
    model = llama_like(c, qkv_bias=bias, out_bias=False, qk_norm="rmsnorm" if c.flag("use_qk_norm", False) else "",
                        windowed=False, head_dim_default=128, moe=lambda i: moe if i >= first else None)
    if not mtp:
        return model
    import dataclasses

    return dataclasses.replace(model, omitted=model.omitted + (LeftOut(
        "mtp", "num_nextn_predict_layers",
        f"multi-token-prediction module ({mtp} layer{'s' if mtp != 1 else ''}, num_nextn_predict_layers): not counted"),))


# ---------------------------------------------------------------------------------------------
# Gemma
# ---------------------------------------------------------------------------------------------


GEMMA_ACT = "gelu_pytorch_tanh"  # Gemma's hidden_activation / hidden_act default in transformers' configs
SOFTCAP_FLOPS = 3.0  # cap * tanh(x / cap): a divide, a tanh (counted as one), a multiply


def _softcap_notes(c: Keys, head_dim: int, d_model: int) -> tuple[str, ...]:
    """What Gemma 2's soft-capping adds and why it is left out, with its share (a null key: none).
    attn_logit_softcapping: 3 FLOPs a score against attention's 4 d + 5 (QK^T, PV, softmax), in the
    fused kernel (FlashAttention's softcap) or, unfused, in the passes over the scores.
    final_logit_softcapping: 3 FLOPs a logit against the LM head's 2 D."""
    notes = []
    for key, per, each, of in (("attn_logit_softcapping", 4.0 * head_dim + FLOPS_PER_ELEMENT["softmax"],
                                "attention score", "attention's FLOPs"),
                               ("final_logit_softcapping", 2.0 * d_model, "logit", "the LM head's FLOPs")):
        cap = c.get(key)
        if cap is None:
            continue
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not math.isfinite(cap) or cap <= 0:
            raise RooflineError(f"{c.name}: config key {key} must be a positive number or null, got {cap!r}",
                                field="model")
        notes.append(f"{key} {cap:g}: cap * tanh(x / cap) on every {each} ({SOFTCAP_FLOPS:g} FLOPs each, "
                     f"{100 * SOFTCAP_FLOPS / per:.2g}% of {of}) not counted")
    return tuple(notes)


@loader("gemma")
def _gemma(c: Keys) -> Model:
    """GemmaConfig: head_dim 256, tie_word_embeddings True, gated GELU MLP (hidden_act default
    gelu_pytorch_tanh, transformers' GemmaConfig), no biases."""
    return llama_like(c, tie_default=True, head_dim_default=256, act_default=GEMMA_ACT)


@loader("gemma2")
def _gemma2(c: Keys) -> Model:
    """Gemma2Config: tie True; head_dim 256; sliding_window 4096 on even layers (layer_types
    default: sliding when (i + 1) % 2); 4 RMSNorms per layer (input, post-attention,
    pre-feedforward, post-feedforward)."""
    window = c.int("sliding_window", 4096)
    if c.has("sliding_window_size") and int(c.raw["sliding_window_size"]) != window:  # an older alias
        raise RooflineError(f"{c.name}: sliding_window {window} and sliding_window_size {c.raw['sliding_window_size']} "
                            "disagree", field="model")
    return llama_like(c, tie_default=True, n_norms=4, head_dim_default=256, sliding_default=window,
                       types_default=lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention",
                       act_default=GEMMA_ACT, softcap=True)


@loader("gemma3_text")
def _gemma3_text(c: Keys) -> Model:
    """Gemma3TextConfig: tie True; head_dim 256; q_norm and k_norm; 4 norms per layer;
    sliding_window 4096, on all layers but every sliding_window_pattern-th (default 6);
    the class's sizes where a text_config omits them (vocab_size 262208, absent from Gemma 3 27B's;
    heads 8, kv heads 4, head_dim 256, absent from Gemma 3 4B's)."""
    c.defaults = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                  "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072}
    window = c.int("sliding_window", 4096)
    pattern = c.pos("sliding_window_pattern", 6)
    return llama_like(c, tie_default=True, n_norms=4, qk_norm="rmsnorm", head_dim_default=256, vocab_default=262208,
                       sliding_default=window, types_default=lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention",
                       act_default=GEMMA_ACT, softcap=True)


@loader("gemma4_text", module_parts={"mlp": ("mlp", "shared_experts")})  # layers.N.mlp: the dense block, the experts beside it
def _gemma4_text(c: Keys) -> Model:
    """Gemma4TextConfig (transformers' modeling_gemma4): tie True; 4 norms per layer; q_norm and
    k_norm (head_dim wide), a v_norm without weights; sliding layers: num_key_value_heads x head_dim,
    window sliding_window (512); full layers: global_head_dim (512) wide heads and, with
    attention_k_eq_v, num_global_key_value_heads kv heads whose values are the keys' projection (no
    v_proj). layer_types default: sliding but every 6th, the last layer always full. With
    enable_moe_block every layer adds to its dense MLP (intermediate_size) num_experts experts of
    moe_intermediate_size, top top_k_experts, a router (D, E) with its input scale (D) and per-expert
    scale (E), and 3 more norms. Per-layer input embeddings (hidden_size_per_layer_input, default
    256), KV-shared layers (num_kv_shared_layers) and use_bidirectional_attention "all" (non-causal)
    are refused as not yet supported."""
    c.defaults = {"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
                  "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 512,
                  "global_head_dim": 512, "hidden_size_per_layer_input": 256}
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    for key in ("hidden_size_per_layer_input", "num_kv_shared_layers"):
        if c.int(key, 0):
            raise RooflineError(f"{c.name}: Gemma 4 with {key} {c.raw.get(key, c.defaults.get(key))} (per-layer input "
                                "embeddings or KV-shared layers, the E2B/E4B models) is not yet supported", field="model")
    c.get("vocab_size_per_layer_input")  # sizes the per-layer embeddings, refused above
    c.get("use_double_wide_mlp")  # applies only to KV-shared layers, refused above
    if c.get("use_bidirectional_attention") == "all":  # "vision": only image tokens see each other, text stays causal
        raise RooflineError(f"{c.name}: Gemma 4 with use_bidirectional_attention 'all' (non-causal attention) is not yet "
                            "supported", field="model")
    K, d, W = c.pos("num_key_value_heads"), c.pos("head_dim"), c.pos("sliding_window")
    k_eq_v = c.flag("attention_k_eq_v", False)
    d_full = c.pos("global_head_dim") if c.get("global_head_dim") else d
    global_kv = c.has("num_global_key_value_heads")  # read either way: it applies only with attention_k_eq_v
    K_full = c.pos("num_global_key_value_heads") if k_eq_v and global_kv else K
    bias = c.flag("attention_bias", False)
    types = read_layer_types(c, L, lambda i: "sliding_attention" if (i + 1) % 6 else "full_attention")
    notes = []
    if types[-1] != "full_attention":  # Gemma4TextConfig forces it
        types[-1] = "full_attention"
        notes.append("layer_types ends with a sliding layer: the last layer is full attention, as transformers makes it")
    if "chunked_attention" in types:
        raise RooflineError(f"{c.name}: Gemma 4 layer_types has no chunked_attention", field="model")
    act = activation_name(c, GEMMA_ACT)
    dense = MLP(c.pos("intermediate_size"), True, False, act)
    ff = dense
    alias = c.get("expert_intermediate_size")  # an older name; null in published configs
    if c.flag("enable_moe_block", False):
        if alias is not None and alias != c.get("moe_intermediate_size"):
            raise RooflineError(f"{c.name}: expert_intermediate_size {alias!r} and moe_intermediate_size "
                                f"{c.get('moe_intermediate_size')!r} disagree", field="model")
        ff = MoE(c.pos("num_experts"), c.pos("top_k_experts"), c.pos("moe_intermediate_size"), shared_d_ff=dense.d_ff,
                 activation=act, router_scales=True)
    else:
        for key in ("num_experts", "top_k_experts", "moe_intermediate_size"):
            c.get(key)  # sizes of the MoE block, which enable_moe_block false leaves out
    sliding = Layer(Attention(H, K, d, window=W, qkv_bias=bias, out_bias=bias, qk_norm="rmsnorm"), ff,
                    n_norms=7 if ff is not dense else 4)
    full = Layer(Attention(H, K_full, d_full, qkv_bias=bias, out_bias=bias, qk_norm="rmsnorm", k_eq_v=k_eq_v), ff,
                 n_norms=sliding.n_norms)
    layers = [sliding if t == "sliding_attention" else full for t in types]
    notes += list(_softcap_notes(c, d, D))
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", True), notes=tuple(notes))
