"""Loaders of the state-space and hybrid models: Mamba-2 (transformers' and state-spaces' mamba_ssm
configs), Jamba, Nemotron-H and Falcon-H1."""

from __future__ import annotations

import math

from roofline.architecture import MLP, Attention, Layer, LeftOut, Mamba, Mamba2, Model, MoE, ParallelMixer
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.shared import assemble, gqa_heads, loader


@loader("mamba2")
def _mamba2(c: Keys) -> Model:
    """Mamba2Config: every layer one Mamba-2 mixer after one RMSNorm; d_inner = expand x
    hidden_size (= num_heads x head_dim); use_bias False, use_conv_bias True; a final norm_f;
    tie_word_embeddings False in the class (True in mamba_ssm checkpoints, which set it)."""
    D, L, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("vocab_size")
    heads, hd = c.pos("num_heads"), c.int("head_dim", 64)
    inner = c.int("expand", 2) * D
    if heads * hd != inner:
        raise RooflineError(f"{c.name}: num_heads x head_dim = {heads * hd} differs from expand x hidden_size = {inner}",
                            field="model")
    mixer = Mamba2(inner, c.int("state_size", 128), c.int("n_groups", 1), heads, c.int("conv_kernel", 4),
                   bool(c.get("use_conv_bias", True)), bool(c.get("use_bias", False)))
    return assemble(c, [Layer(mixer, None)] * L, D, V, c.flag("tie_word_embeddings", False))


@loader("mamba_ssm")
def _mamba_ssm(c: Keys) -> Model:
    """state-spaces' mamba_ssm config (no model_type; d_model, n_layer, ssm_cfg): Mamba-2 layers
    (ssm_cfg layer "Mamba2": d_state 128, headdim 64, ngroups 1, expand 2, d_conv 4, conv_bias True,
    bias False) with one RMSNorm each, vocab padded up to pad_vocab_size_multiple (16), tied
    embeddings (default True). Only Mamba-2 layers without attention (attn_layer_idx empty) and
    d_intermediate 0 are read."""
    D, L = c.pos("d_model"), c.pos("n_layer")
    mult = c.int("pad_vocab_size_multiple", 16) or 1
    V = int(math.ceil(c.pos("vocab_size") / mult) * mult)
    ssm = dict(c.get("ssm_cfg", {}) or {})
    if ssm.get("layer", "Mamba1") != "Mamba2":
        raise RooflineError(f"{c.name}: mamba_ssm config with layer {ssm.get('layer', 'Mamba1')!r}; only Mamba2 is supported",
                            field="model")
    if c.get("attn_layer_idx") or c.get("d_intermediate", 0):
        raise RooflineError(f"{c.name}: mamba_ssm hybrids (attn_layer_idx, d_intermediate) are not supported", field="model")
    c.get("attn_cfg"), c.get("rms_norm"), c.get("fused_add_norm"), c.get("residual_in_fp32")
    known = {"layer", "d_state", "headdim", "ngroups", "expand", "d_conv", "conv_bias", "bias"}
    inner = int(ssm.get("expand", 2)) * D
    hd = int(ssm.get("headdim", 64))
    mixer = Mamba2(inner, int(ssm.get("d_state", 128)), int(ssm.get("ngroups", 1)), inner // hd, int(ssm.get("d_conv", 4)),
                   bool(ssm.get("conv_bias", True)), bool(ssm.get("bias", False)))
    notes = [f"ssm_cfg key {k!r} not understood: ignored" for k in sorted(set(ssm) - known)]
    return assemble(c, [Layer(mixer, None)] * L, D, V, bool(c.get("tie_embeddings", True)), notes=notes)


@loader("jamba")
def _jamba(c: Keys) -> Model:
    """JambaConfig: attention on layers i % attn_layer_period == attn_layer_offset (8, 4), Mamba
    (v1) elsewhere (mamba_d_state 16, mamba_d_conv 4, mamba_expand 2, mamba_dt_rank "auto" =
    ceil(D / 16), mamba_conv_bias True, mamba_proj_bias False, dt/B/C RMSNorms); MoE on layers
    i % expert_layer_period == expert_layer_offset (2, 1) with num_experts (16) of
    intermediate_size, top num_experts_per_tok (2); dense MLPs elsewhere; 2 RMSNorms per layer;
    attention without biases or rotary positions; vocab_size 65536 and tie True in the class."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.int("vocab_size", 65536)
    kv, d = gqa_heads(c, D, H)
    c.get("sliding_window")  # JambaAttention has none; null in published configs
    ap, ao = c.int("attn_layer_period", 8), c.int("attn_layer_offset", 4)
    ep, eo = c.int("expert_layer_period", 2), c.int("expert_layer_offset", 1)
    F = c.pos("intermediate_size")
    E, k = c.int("num_experts", 16), c.int("num_experts_per_tok", 2)
    rank = c.get("mamba_dt_rank", "auto")
    rank = math.ceil(D / 16) if rank == "auto" else int(rank)
    mamba = Mamba(c.int("mamba_expand", 2) * D, c.int("mamba_d_state", 16), rank, c.int("mamba_d_conv", 4),
                  bool(c.get("mamba_conv_bias", True)), bool(c.get("mamba_proj_bias", False)), inner_norms=True)
    attn = Attention(H, kv, d)
    layers = [Layer(attn if i % ap == ao else mamba, MoE(E, k, F) if (E > 1 and i % ep == eo) else MLP(F))
              for i in range(L)]
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", True))


NEMOTRON_H_CODES = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}  # hybrid_override_pattern's letters
NEMOTRON_H_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "attention": "attention",
                    "full_attention": "attention", "mlp": "mlp", "moe": "moe"}  # layers_block_type's words, old and new


def _nemotron_h_types(c: Keys) -> list[str]:
    """The layer list: layers_block_type (Nemotron-3 Ultra, 3.5; transformers 5 saves this) or the
    older hybrid_override_pattern string, one letter a layer."""
    if c.has("layers_block_type"):
        words = c.get("layers_block_type")
        c.get("hybrid_override_pattern")
        if not isinstance(words, list) or any(w not in NEMOTRON_H_TYPES for w in words):
            raise RooflineError(f"{c.name}: layers_block_type must list layer types from {', '.join(NEMOTRON_H_TYPES)}, "
                                f"got {words!r}"[:300], field="model")
        types = [NEMOTRON_H_TYPES[w] for w in words]
        pattern = c.raw.get("hybrid_override_pattern")
        if pattern is not None and [NEMOTRON_H_CODES.get(ch) for ch in str(pattern)] != types:
            raise RooflineError(f"{c.name}: layers_block_type and hybrid_override_pattern list different layers",
                                field="model")
    else:
        pattern = str(c.need("hybrid_override_pattern"))
        bad = sorted(set(pattern) - set(NEMOTRON_H_CODES))
        if bad:
            raise RooflineError(f"{c.name}: hybrid_override_pattern layer codes {bad} not supported (known: M mamba2, "
                                "* attention, - MLP, E MoE)", field="model")
        types = [NEMOTRON_H_CODES[ch] for ch in pattern]
    if c.has("num_hidden_layers") and c.int("num_hidden_layers") != len(types):
        raise RooflineError(f"{c.name}: the layer list has {len(types)} layers, num_hidden_layers "
                            f"{c.raw['num_hidden_layers']}", field="model")
    return types


def _nemotron_h_moe(c: Keys) -> MoE:
    """NemotronHMoE: n_routed_experts plain (up, down) experts of moe_intermediate_size with
    mlp_hidden_act (relu2), top num_experts_per_tok, a router (E, D) without bias (sigmoid scores;
    e_score_correction_bias a buffer), a shared expert NemotronHMLP(moe_shared_expert_intermediate_size),
    and, with moe_latent_size, the experts at that width between fc1/fc2_latent_proj."""
    if c.int("n_shared_experts", 1) != 1:
        raise RooflineError(f"{c.name}: n_shared_experts {c.raw['n_shared_experts']}: NemotronHMoE builds exactly one "
                            "shared expert (of moe_shared_expert_intermediate_size)", field="model")
    if c.flag("mlp_bias", False):
        raise RooflineError(f"{c.name}: mlp_bias true in a Nemotron-H MoE layer (expert, shared-expert and latent "
                            "biases) is not yet supported", field="model")
    c.get("moe_shared_expert_overlap")  # a schedule (shared expert beside the routed ones), not a weight
    act = str(c.get("mlp_hidden_act", "relu2"))
    return MoE(c.pos("n_routed_experts"), c.pos("num_experts_per_tok"), c.pos("moe_intermediate_size"), gated=False,
               shared_d_ff=c.int("moe_shared_expert_intermediate_size", 7688), activation=act,
               latent=c.int("moe_latent_size", 0))


@loader("nemotron_h")
def _nemotron_h(c: Keys) -> Model:
    """NemotronHConfig: the layer list (layers_block_type, or hybrid_override_pattern with one
    letter a layer): mamba / M a Mamba-2 mixer (mamba_num_heads x mamba_head_dim inner,
    ssm_state_size, n_groups, conv_kernel, use_conv_bias, mamba_proj_bias), attention / * attention
    (num_attention_heads, num_key_value_heads, head_dim, attention_bias), mlp / - a plain MLP
    (intermediate_size, relu2, mlp_bias), moe / E a mixture of experts (_nemotron_h_moe); each
    layer one RMSNorm and one of these; a final norm_f. tie False. The multi-token-prediction
    layers (num_nextn_predict_layers, of mtp_layers_block_type) are left out, said."""
    D, V = c.pos("hidden_size"), c.pos("vocab_size")
    types = _nemotron_h_types(c)
    H = c.pos("num_attention_heads")
    kv = c.int("num_key_value_heads", H)
    d = c.int("head_dim", 0) or c.int("attention_head_dim", D // H)
    bias = bool(c.get("attention_bias", False))
    heads, hd = c.pos("mamba_num_heads"), c.pos("mamba_head_dim")
    mamba = Mamba2(heads * hd, c.pos("ssm_state_size"), c.int("n_groups", 8), heads, c.int("conv_kernel", 4),
                   bool(c.get("use_conv_bias", True)), bool(c.get("mamba_proj_bias", c.get("use_bias", False))))
    c.get("expand"), c.get("mamba_hidden_act"), c.get("use_bias"), c.get("mlp_hidden_act")
    kinds = {"mamba": Layer(mamba, None), "attention": Layer(Attention(H, kv, d, qkv_bias=bias, out_bias=bias), None)}
    if "mlp" in types:
        kinds["mlp"] = Layer(None, MLP(c.pos("intermediate_size"), gated=False, bias=bool(c.get("mlp_bias", False)),
                                       activation="relu2"))
    if "moe" in types:
        kinds["moe"] = Layer(None, _nemotron_h_moe(c))
    c.get("intermediate_size"), c.get("norm_eps")  # a width no layer has; an epsilon
    if c.get("sliding_window") is not None:
        raise RooflineError(f"{c.name}: sliding_window {c.raw['sliding_window']!r}: NemotronHAttention has no window; "
                            "give null", field="model")
    for k in ("mtp_layers_block_type", "mtp_hybrid_override_pattern"):
        c.get(k)
    mtp = c.int("num_nextn_predict_layers", 0)
    each = c.raw.get("mtp_layers_block_type") or c.raw.get("mtp_hybrid_override_pattern") or ["attention", "moe"]
    each = " + ".join(each) if isinstance(each, list) else str(each)
    omitted = (LeftOut("mtp", "num_nextn_predict_layers",
                       f"multi-token-prediction layers ({mtp} x {each}, num_nextn_predict_layers): not counted"),) if mtp else ()
    notes = []
    state = c.get("mamba_ssm_cache_dtype")
    if state is not None and str(state) not in ("bfloat16", "float16"):
        notes.append(f"mamba_ssm_cache_dtype {state}: the checkpoint keeps the SSM state in {state}; it is priced at the "
                     "KV-cache dtype here (in float32 the SSM state takes twice its bf16 bytes)")
    return assemble(c, [kinds[t] for t in types], D, V, c.flag("tie_word_embeddings", False), omitted=omitted,
                     notes=notes)


# Falcon-H1's muP multipliers: constants applied to activations (mup_vector is a non-persistent buffer), no weights
FALCON_H1_MULTIPLIERS = ("lm_head_multiplier", "embedding_multiplier", "mlp_multipliers", "key_multiplier",
                         "attention_out_multiplier", "attention_in_multiplier", "ssm_multipliers", "ssm_in_multiplier",
                         "ssm_out_multiplier", "mamba_norm_before_gate")


@loader("falcon_h1")
def _falcon_h1(c: Keys) -> Model:
    """FalconH1Config (transformers modeling_falcon_h1.py): every layer one parallel hybrid block,
    input_layernorm, then self_attn (LlamaAttention: num_attention_heads, num_key_value_heads,
    head_dim (default hidden_size / heads), attention_bias on q, k, v and o) and mamba (Mamba-2:
    d_inner = mamba_d_ssm, or mamba_expand x hidden_size when null; mamba_n_heads x mamba_d_head (auto:
    d_inner / heads); mamba_n_groups, mamba_d_state, mamba_d_conv, mamba_conv_bias; in_proj's bias
    mamba_proj_bias, out_proj's projectors_bias; the gated RMSNorm only when mamba_rms_norm) side by
    side on its output, summed into the residual; then pre_ff_layernorm and a SwiGLU MLP
    (intermediate_size, mlp_bias); a final norm; tie_word_embeddings False by default. The muP
    multipliers are constants, no weights. Defaults are the config class's."""
    D, L, V = c.pos("hidden_size", 4096), c.pos("num_hidden_layers", 32), c.pos("vocab_size", 128000)
    H = c.pos("num_attention_heads", 32)
    kv = c.pos("num_key_value_heads", H)
    d = c.pos("head_dim", D // H)
    bias = c.flag("attention_bias", False)
    c.read.add("mamba_d_ssm")
    if "mamba_d_ssm" in c.raw and c.raw["mamba_d_ssm"] is None:
        inner = c.pos("mamba_expand", 2) * D
    else:
        inner = c.pos("mamba_d_ssm", 1024)
        c.get("mamba_expand")  # unused when mamba_d_ssm is given
    heads = c.pos("mamba_n_heads", 128)
    head_dim = c.get("mamba_d_head", "auto")
    if head_dim != "auto" and c.pos("mamba_d_head") * heads != inner:
        raise RooflineError(f"{c.name}: mamba_n_heads x mamba_d_head = {heads} x {head_dim} differs from the Mamba "
                            f"inner width {inner} (mamba_d_ssm, or mamba_expand x hidden_size)", field="model")
    if inner % heads:
        raise RooflineError(f"{c.name}: mamba_n_heads {heads} does not divide the Mamba inner width {inner}", field="model")
    ssm = Mamba2(inner, c.pos("mamba_d_state", 256), c.pos("mamba_n_groups", 1), heads, c.pos("mamba_d_conv", 4),
                 c.flag("mamba_conv_bias", True), c.flag("mamba_proj_bias", False),
                 gated_norm=c.flag("mamba_rms_norm", False), out_bias=c.flag("projectors_bias", False))
    mlp = MLP(c.pos("intermediate_size", 14336), gated=True, bias=c.flag("mlp_bias", False),
              activation=str(c.get("hidden_act", "silu")))
    if not c.flag("mamba_use_mlp", True):  # an early config key; the modeling file builds the MLP in every layer
        raise RooflineError(f"{c.name}: mamba_use_mlp false: transformers' FalconH1DecoderLayer always has its MLP; "
                            "a Falcon-H1 without one is not supported", field="model")
    types = c.get("layers_block_type")
    if types is not None and any(t != "hybrid" for t in types):
        raise RooflineError(f"{c.name}: layers_block_type {sorted(set(types))}: Falcon-H1's layers are all 'hybrid'",
                            field="model")
    scaled = [k for k in FALCON_H1_MULTIPLIERS[:-1] if c.get(k) not in (None, 1, 1.0, [1.0, 1.0], [1.0] * 5)]
    c.get("mamba_norm_before_gate")  # where the gate multiplies, not how much
    notes = []
    if scaled:
        notes.append(f"muP multipliers ({', '.join(scaled)}) scale activations: elementwise multiplies (vLLM runs them "
                     "apart, e.g. the SSM's in_proj output by mup_vector) not counted as ops; no weights")
    if c.get("attn_layer_indices") is not None:
        notes.append("attn_layer_indices is ignored, as transformers does: every layer runs attention beside its SSM")
    layer = Layer(ParallelMixer(Attention(H, kv, d, qkv_bias=bias, out_bias=bias), ssm), mlp)
    return assemble(c, [layer] * L, D, V, c.flag("tie_word_embeddings", False), notes=notes)
