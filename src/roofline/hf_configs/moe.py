"""Loaders of Llama 4, DeepSeek V2/V3 (and Kimi K2), DeepSeek-V3.2 and GLM-5 (sparse attention) and gpt-oss:
mixture-of-experts models whose attention or expert layout is their own."""

from __future__ import annotations

import dataclasses

from roofline.architecture import MLP, Attention, LatentAttention, Layer, LeftOut, Model, MoE, MtpModule
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.shared import assemble, gqa_heads, layer_window, loader, read_layer_types


@loader("llama4_text")
def _llama4_text(c: Keys) -> Model:
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
    kv, d = gqa_heads(c, D, H)
    bias = bool(c.get("attention_bias", False))
    layers = []
    for i in range(L):
        attn = Attention(H, kv, d, chunk=chunk if rope[i] else 0, qkv_bias=bias, out_bias=bias, qk_norm=qk if rope[i] else "")
        ff = MoE(E, k, F, shared_d_ff=F) if i in moe_set else MLP(F_dense)
        layers.append(Layer(attn, ff))
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))


@loader("deepseek_v3", "deepseek_v2", "kimi_k2")
def _deepseek(c: Keys, indexers: list | None = None, mlp_types: list | None = None) -> Model:
    """DeepseekV3Config (also Kimi K2, which reuses it): multi-head latent attention (q_lora_rank,
    kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim); the first first_k_dense_replace
    layers dense (intermediate_size), then MoE every moe_layer_freq-th: n_routed_experts of
    moe_intermediate_size, top num_experts_per_tok, n_shared_experts x moe_intermediate_size shared,
    a router (D, E) (V3's e_score_correction_bias is a buffer, not counted). tie False. The multi-token-prediction
    module (num_nextn_predict_layers) is not instantiated by transformers: it is left out of the total and
    recorded apart as Model.mtp (an MoE layer of the model's, with eh_proj and three RMSNorms).
    ``indexers``: each layer's DSA fields (_dsa_indexers), for DeepSeek-V3.2 and GLM-5; ``mlp_types``:
    each layer's "dense" or "sparse" (GLM-5's mlp_layer_types) in place of first_k_dense_replace."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    mla = dict(heads=H, kv_lora_rank=c.pos("kv_lora_rank"), qk_nope_head_dim=c.pos("qk_nope_head_dim"),
               qk_rope_head_dim=c.pos("qk_rope_head_dim"), v_head_dim=c.pos("v_head_dim"), q_lora_rank=c.int("q_lora_rank", 0))
    if c.get("attention_bias", False):
        raise RooflineError(f"{c.name}: attention_bias true in an MLA model is not supported", field="model")
    c.get("num_key_value_heads")  # MLA has no kv heads of its own; the key is a leftover
    E, k, F = c.pos("n_routed_experts"), c.pos("num_experts_per_tok"), c.pos("moe_intermediate_size")
    shared = c.int("n_shared_experts", 0) * F
    first_dense, freq = c.int("first_k_dense_replace", 0), c.int("moe_layer_freq", 1)
    moe_at = mlp_types or ["sparse" if (i >= first_dense and i % freq == 0) else "dense" for i in range(L)]
    dense = MLP(c.pos("intermediate_size"))
    indexers = indexers or [{}] * L
    layers = [Layer(LatentAttention(**mla, **indexers[i]), MoE(E, k, F, shared_d_ff=shared) if moe_at[i] == "sparse" else dense)
              for i in range(L)]
    omitted, mtp = (), None
    depth = c.int("num_nextn_predict_layers", 0)
    if depth:  # DeepSeek's MTP block is an MoE layer (model.layers.61 of V3: README_WEIGHTS.md), with the indexer where the model has one
        mtp = MtpModule(Layer(LatentAttention(**mla, **indexers[0]), MoE(E, k, F, shared_d_ff=shared)), depth)
        runs = ("; speculation over its sparse attention is not modelled yet" if indexers[0] else
                "; `roofline serving --draft mtp` runs it")
        omitted = (LeftOut("mtp", "num_nextn_predict_layers",
                           f"multi-token-prediction module ({depth} layer{'s' if depth != 1 else ''}): not instantiated by "
                           "transformers and not in the total (the published count's convention); counted apart (`roofline "
                           f"models` shows it{runs})"),)
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", False), omitted=omitted, mtp=mtp)


@loader("kimi_k3")
def _kimi_k3(c: Keys):
    """Kimi K3 (a Kimi Linear language model in text_config): Kimi Linear's layers (KDA beside MLA,
    hybrid.py's kimi_linear loader) plus attention residuals (attn_res_block_size: each block's
    input a learned mix of the earlier blocks' outputs), output-gated MLA (mla_use_output_gate), a
    latent MoE with a norm (routed_expert_hidden_size, latent_moe_use_norm), full-rank KDA gates
    (use_full_rank_gate) and the situ activation. Their weights are not read from modeling code
    here: refused as not yet supported."""
    raise RooflineError(f"{c.name}: model_type {c.raw.get('model_type')!r} (Kimi K3) is not yet supported: its Kimi Delta "
                        "Attention and MLA layers are modelled (Kimi Linear, model_type kimi_linear), but not yet its "
                        "attention residuals (attn_res_block_size), output-gated MLA (mla_use_output_gate), latent MoE "
                        "with a norm (routed_expert_hidden_size, latent_moe_use_norm), full-rank KDA gates "
                        "(use_full_rank_gate) or situ activation", field="model")


@loader("deepseek_v4", "deepseek_ref")
def _deepseek_v4(c: Keys):
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


def _dsa_indexers(c: Keys, L: int, types: list[str] | None = None) -> list[dict]:
    """Each layer's DeepSeek Sparse Attention fields: index_topk, and index_n_heads x index_head_dim
    for a layer that runs its own indexer ("full"); a "shared" layer (GLM-5.2's indexer_types) reuses
    the previous full layer's top-k and has no indexer weights or index keys of its own."""
    if not c.get("q_lora_rank"):
        raise RooflineError(f"{c.name}: the DSA indexer projects the query latent, and q_lora_rank is absent", field="model")
    own = dict(index_topk=c.pos("index_topk"), index_heads=c.pos("index_n_heads"), index_head_dim=c.pos("index_head_dim"))
    types = types or ["full"] * L
    return [own if t == "full" else dict(index_topk=own["index_topk"]) for t in types]


@loader("deepseek_v32")
def _deepseek_v32(c: Keys) -> Model:
    """DeepSeek-V3.2 (and V3.2-Exp): DeepSeek-V3 (_deepseek) with DeepSeek Sparse Attention: a
    lightning indexer in every layer (index_n_heads x index_head_dim, top index_topk keys a query)."""
    return _deepseek(c, _dsa_indexers(c, c.pos("num_hidden_layers")))


def _listed(c: Keys, key: str, L: int, known: tuple[str, ...]) -> list[str] | None:
    """A per-layer list of words from ``known``, or None when the config leaves it out."""
    v = c.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != L or not set(v) <= set(known):
        raise RooflineError(f"{c.name}: {key} must list {L} layers, each one of {', '.join(known)}", field="model")
    return list(v)


@loader("glm_moe_dsa")
def _glm_moe_dsa(c: Keys) -> Model:
    """GlmMoeDsaConfig (GLM-5, 5.1, 5.2, 5.3; transformers modeling_glm_moe_dsa): DeepSeek-V3.2's layer
    (MLA, DSA indexer, MoE with a shared expert, sigmoid routing) at GLM's sizes. mlp_layer_types
    ("dense"/"sparse", default first_k_dense_replace dense); indexer_types ("full"/"shared"), else as
    transformers derives it: from index_topk_pattern ("F"/"S"), else full where
    max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0 (defaults 2, 1: all full).
    head_dim is set to qk_rope_head_dim by transformers (cost-neutral); qk_head_dim must be
    nope + rope. The MTP layers are left out, as DeepSeek's."""
    L = c.pos("num_hidden_layers")
    if c.get("mlp_bias", False):
        raise RooflineError(f"{c.name}: mlp_bias true is not modelled for GLM-MoE-DSA", field="model")
    if c.int("moe_layer_freq", 1) != 1:
        raise RooflineError(f"{c.name}: moe_layer_freq {c.raw['moe_layer_freq']}: GLM-MoE-DSA places its MoE layers by "
                            "mlp_layer_types; a frequency other than 1 is not understood", field="model")
    qk = c.get("qk_head_dim")
    if qk is not None and qk != c.pos("qk_nope_head_dim") + c.pos("qk_rope_head_dim"):
        raise RooflineError(f"{c.name}: qk_head_dim {qk} is not qk_nope_head_dim + qk_rope_head_dim", field="model")
    c.get("head_dim")  # transformers sets it to qk_rope_head_dim: the rotary slice, no weights
    for key in ("indexer_rope_interleave", "index_share_for_mtp_iteration", "moe_router_dtype"):
        c.get(key)  # rotary layout, the MTP layer's reuse of top-k (MTP is left out), the router's compute dtype
    _listed(c, "layer_types", L, ("deepseek_sparse_attention",))  # the only kind transformers builds
    types = _listed(c, "indexer_types", L, ("full", "shared"))
    if types is None:
        pattern = c.get("index_topk_pattern")
        if pattern is not None:
            if not isinstance(pattern, str) or len(pattern) != L or not set(pattern) <= {"F", "S"}:
                raise RooflineError(f"{c.name}: index_topk_pattern must be {L} letters F or S", field="model")
            types = ["full" if ch == "F" else "shared" for ch in pattern]
        else:
            freq, offset = max(c.int("index_topk_freq", 1), 1), c.int("index_skip_topk_offset", 2)
            types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(L)]
    else:  # the schedule the list was written from
        c.get("index_topk_pattern"), c.get("index_topk_freq"), c.get("index_skip_topk_offset")
    if types[0] != "full":
        raise RooflineError(f"{c.name}: layer 0's indexer is 'shared', with no earlier layer to share", field="model")
    mlp_types = _listed(c, "mlp_layer_types", L, ("dense", "sparse"))
    if mlp_types is None:
        n_dense = min(c.int("first_k_dense_replace", 3), L)
        mlp_types = ["dense"] * n_dense + ["sparse"] * (L - n_dense)
    else:
        c.get("first_k_dense_replace")
    model = _deepseek(c, _dsa_indexers(c, L, types), mlp_types)
    shared = types.count("shared")
    if not shared:
        return model
    note = (f"{shared} of {L} layers reuse the previous full layer's top-k (indexer_types 'shared'): no indexer "
            "weights or index keys counted there, as the FP8 checkpoint lists indexer modules on full layers only")
    return dataclasses.replace(model, notes=model.notes + (note,))


@loader("gpt_oss")
def _gpt_oss(c: Keys) -> Model:
    """GptOssConfig: attention with biases on q, k, v, o and a learned sink per head; layer_types
    alternate sliding_window (128) and full attention (default: sliding on even layers); MoE on
    every layer: num_local_experts experts of intermediate_size with biases (gate_up 2F, down D),
    top num_experts_per_tok (experts_per_token), router (D, E) with bias. tie False."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    kv, d = c.int("num_key_value_heads"), c.int("head_dim", 64)
    window = c.int("sliding_window", 128)
    types = read_layer_types(c, L, lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")
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
    layers = [Layer(Attention(H, kv, d, window=layer_window(types, i, window)[0], qkv_bias=bias, out_bias=bias, sinks=True), moe)
              for i in range(L)]
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))
