"""Loaders of Llama 4, DeepSeek V2/V3 (and Kimi K2) and gpt-oss: mixture-of-experts models whose
attention or expert layout is their own."""

from __future__ import annotations

from roofline.architecture import MLP, Attention, LatentAttention, Layer, Model, MoE
from roofline.errors import RooflineError
from roofline.hf_configs.keys import _Keys
from roofline.hf_configs.shared import _assemble, _gqa, _layer_types, _windowed, loader


@loader("llama4_text")
def _llama4_text(c: _Keys) -> Model:
    """Llama4TextConfig: MoE every interleave_moe_layer_step-th layer (layer i is MoE when
    (i + 1) % step == 0, or as listed in moe_layers): num_local_experts routed experts of
    intermediate_size, top num_experts_per_tok (1), plus a shared expert of intermediate_size;
    other layers are dense MLPs of intermediate_size_mlp. Layers with rotary positions
    (no_rope_layers[i] = 1; default every layer but each 4th) use chunked attention of
    attention_chunk_size (8192) and an L2 q/k norm (use_qk_norm, no weights); the others are full
    (NoPE) attention. tie False."""
    L = c.pos("num_hidden_layers")
    E, k, F = c.int("num_local_experts", 16), c.int("num_experts_per_tok", 1), c.pos("intermediate_size")
    F_dense = c.int("intermediate_size_mlp", F)
    step = c.int("interleave_moe_layer_step", 1)
    moe_layers = c.get("moe_layers")
    moe_set = set(moe_layers) if moe_layers is not None else {i for i in range(L) if (i + 1) % step == 0}
    rope = c.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(L)]
    chunk = c.int("attention_chunk_size", 8192)
    qk = "l2" if c.get("use_qk_norm", True) else ""
    D, H, V = c.pos("hidden_size"), c.pos("num_attention_heads"), c.pos("vocab_size")
    kv, d = _gqa(c, D, H)
    bias = bool(c.get("attention_bias", False))
    layers = []
    for i in range(L):
        attn = Attention(H, kv, d, chunk=chunk if rope[i] else 0, qkv_bias=bias, out_bias=bias, qk_norm=qk if rope[i] else "")
        ff = MoE(E, k, F, shared_d_ff=F) if i in moe_set else MLP(F_dense)
        layers.append(Layer(attn, ff))
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))


@loader("deepseek_v3", "deepseek_v2", "kimi_k2")
def _deepseek(c: _Keys) -> Model:
    """DeepseekV3Config (also Kimi K2, which reuses it): multi-head latent attention (q_lora_rank,
    kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim); the first first_k_dense_replace
    layers dense (intermediate_size), then MoE every moe_layer_freq-th: n_routed_experts of
    moe_intermediate_size, top num_experts_per_tok, n_shared_experts x moe_intermediate_size shared,
    a router (D, E) (V3's e_score_correction_bias is a buffer, not counted). tie False. The multi-token-prediction
    module (num_nextn_predict_layers) is not instantiated by transformers and is left out."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    mla = LatentAttention(H, c.pos("kv_lora_rank"), c.pos("qk_nope_head_dim"), c.pos("qk_rope_head_dim"),
                          c.pos("v_head_dim"), c.int("q_lora_rank", 0))
    if c.get("attention_bias", False):
        raise RooflineError(f"{c.name}: attention_bias true in an MLA model is not supported", field="model")
    c.get("num_key_value_heads")  # MLA has no kv heads of its own; the key is a leftover
    E, k, F = c.pos("n_routed_experts"), c.pos("num_experts_per_tok"), c.pos("moe_intermediate_size")
    shared = c.int("n_shared_experts", 0) * F
    first_dense, freq = c.int("first_k_dense_replace", 0), c.int("moe_layer_freq", 1)
    dense = MLP(c.pos("intermediate_size"))
    layers = [Layer(mla, MoE(E, k, F, shared_d_ff=shared)
                    if (i >= first_dense and i % freq == 0) else dense) for i in range(L)]
    omitted = ()
    if c.int("num_nextn_predict_layers", 0):
        omitted = (f"multi-token-prediction module ({c.raw['num_nextn_predict_layers']} layer{'s' if c.raw['num_nextn_predict_layers'] != 1 else ''}): not instantiated by "
                   "transformers, not counted",)
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", False), omitted=omitted)


@loader("kimi_k3", "kimi_linear")
def _kimi_k3(c: _Keys):
    """Kimi K3 (a Kimi Linear language model in text_config): beside K2's MLA (here output-gated) it
    runs Kimi Delta Attention layers (linear_attn_config kda_layers: a gated delta-rule linear
    attention with short convolutions and a per-sequence state), a latent MoE (routed experts at
    routed_expert_hidden_size) and attention residuals (attn_res_block_size). None has a cost model
    here: refused as not yet supported."""
    raise RooflineError(f"{c.name}: model_type {c.raw.get('model_type')!r} (Kimi K3 / Kimi Linear) is not yet supported: "
                        "no cost model yet for its Kimi Delta Attention layers (linear_attn_config kda_layers: a gated "
                        "delta-rule linear attention with short convolutions), a latent MoE (routed experts at "
                        "routed_expert_hidden_size), attention residuals (attn_res_block_size) and output-gated MLA",
                        field="model")


@loader("deepseek_v4", "deepseek_ref")
def _deepseek_v4(c: _Keys):
    """DeepSeek V4 (deepseek_v4; SGLang's reference configs say deepseek_ref): manifold-constrained
    hyper-connections (hc_mult residual streams mixed by Sinkhorn), compressed attention
    (compress_ratios: 4 or 128 keys pooled into one by compressors with their own weights) with a
    sparse indexer (index_n_heads x index_head_dim, top index_topk) beside a sliding window, a grouped
    low-rank output projection (o_groups, o_lora_rank), hash-routed MoE layers (num_hash_layers).
    None has a cost model here: refused as not yet supported."""
    raise RooflineError(f"{c.name}: model_type {c.raw.get('model_type')!r} (DeepSeek V4) is not yet supported: no cost "
                        "model yet for its manifold-constrained hyper-connections (hc_mult residual streams mixed by "
                        "Sinkhorn), compressed attention (compress_ratios: 4 or 128 keys pooled into one by compressors "
                        "with their own weights) with a sparse indexer (index_n_heads x index_head_dim, top index_topk) "
                        "beside a sliding window, grouped low-rank output projection (o_groups, o_lora_rank) and "
                        "hash-routed MoE layers (num_hash_layers)", field="model")


_kimi_k3.not_yet = _deepseek_v4.not_yet = True  # left out of the supported list that an unknown model_type's refusal prints


@loader("gpt_oss")
def _gpt_oss(c: _Keys) -> Model:
    """GptOssConfig: attention with biases on q, k, v, o and a learned sink per head; layer_types
    alternate sliding_window (128) and full attention (default: sliding on even layers); MoE on
    every layer: num_local_experts experts of intermediate_size with biases (gate_up 2F, down D),
    top num_experts_per_tok (experts_per_token), router (D, E) with bias. tie False."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    kv, d = c.int("num_key_value_heads"), c.int("head_dim", 64)
    window = c.int("sliding_window", 128)
    types = _layer_types(c, L, lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")
    if "sliding_window" in c.raw and c.raw["sliding_window"] is None and "sliding_attention" in types:
        raise RooflineError(f"{c.name}: sliding_window is null and layers are sliding_attention: give the window "
                            "(gpt-oss publishes 128)", field="model")
    E = c.pos("num_local_experts")
    k = c.pos("num_experts_per_tok") if c.has("num_experts_per_tok") else c.int("experts_per_token", 4)
    if c.has("experts_per_token") and c.int("experts_per_token") != k:
        raise RooflineError(f"{c.name}: experts_per_token {c.raw['experts_per_token']} and num_experts_per_tok {k} disagree",
                            field="model")
    bias = bool(c.get("attention_bias", True))
    moe = MoE(E, k, c.pos("intermediate_size"), bias=True, router_bias=True)
    layers = [Layer(Attention(H, kv, d, window=_windowed(types, i, window)[0], qkv_bias=bias, out_bias=bias, sinks=True), moe)
              for i in range(L)]
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))
