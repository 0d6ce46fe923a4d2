"""Loaders of the linear-attention hybrids: Qwen3-Next and Qwen3.5 / Qwen3.6 (dense and MoE), Gated
DeltaNet layers beside gated full attention, three to one; Kimi Linear, Kimi Delta Attention beside
MLA."""

from __future__ import annotations

from roofline.architecture import MLP, Attention, GatedDeltaNet, LatentAttention, Layer, LeftOut, Model, MoE
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.llama import qwen_moe_layers
from roofline.hf_configs.shared import activation_name, assemble, loader

LINEAR, FULL = "linear_attention", "full_attention"

# The config classes' defaults (transformers configuration_qwen3_next.py, configuration_qwen3_5.py,
# configuration_qwen3_5_moe.py) for the keys a published file may omit.
_GDN_DEFAULTS = {"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                 "linear_num_key_heads": 16, "linear_num_value_heads": 32, "head_dim": 256, "num_attention_heads": 16}
DEFAULTS = {
    "qwen3_next": {**_GDN_DEFAULTS, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                   "num_hidden_layers": 48, "num_key_value_heads": 2, "decoder_sparse_step": 1,
                   "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 10,
                   "num_experts": 512},
    "qwen3_5_text": {**_GDN_DEFAULTS, "vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288,
                     "num_hidden_layers": 32, "num_key_value_heads": 4},
    "qwen3_5_moe_text": {**_GDN_DEFAULTS, "vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40,
                         "num_key_value_heads": 2, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                         "num_experts_per_tok": 8, "num_experts": 256},
}


def _types(c: Keys, L: int) -> tuple[list[str], list[str]]:
    """layer_types as published (linear_attention / full_attention), else full attention on every
    full_attention_interval-th layer (4: layers 3, 7, ...), as the config classes build it."""
    interval = c.pos("full_attention_interval", 4)
    by_interval = [FULL if (i + 1) % interval == 0 else LINEAR for i in range(L)]
    types = c.get("layer_types")
    if types is None:
        return by_interval, []
    if not isinstance(types, list) or len(types) != L:
        raise RooflineError(f"{c.name}: layer_types must list {L} layers", field="model")
    bad = sorted(set(map(str, types)) - {LINEAR, FULL})
    if bad:
        raise RooflineError(f"{c.name}: layer_types {bad} not understood (known: {FULL}, {LINEAR})", field="model")
    notes = []
    if "full_attention_interval" in c.raw and types != by_interval:
        notes.append(f"full_attention_interval {interval} disagrees with layer_types: layer_types is used, as "
                     "transformers does")
    return list(types), notes


def _hybrid(c: Keys, channel, split: bool = False) -> Model:
    """The layer list: Gated DeltaNet (its projections ``split`` as Qwen3.5 stores them) or gated
    attention by layer_types, ``channel(i)`` after each; two RMSNorms a layer, a final norm; the
    multi-token-prediction layers left out, said."""
    D, L, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("vocab_size")
    H, d = c.pos("num_attention_heads"), c.pos("head_dim")
    if c.flag("attention_bias", False):
        raise RooflineError(f"{c.name}: attention_bias true (biases on a gated q_proj twice as wide) is not modelled",
                            field="model")
    if not c.flag("attn_output_gate", True):
        raise RooflineError(f"{c.name}: attn_output_gate false: transformers' Qwen3-Next attention always builds the "
                            "gate (q_proj 2 H d wide) and vLLM drops it, so the checkpoint's q_proj width is unknown; "
                            "not supported", field="model")
    attn = Attention(H, c.pos("num_key_value_heads", H), d, qk_norm="rmsnorm", output_gate=True)
    gdn = GatedDeltaNet(c.pos("linear_num_key_heads"), c.pos("linear_num_value_heads"), c.pos("linear_key_head_dim"),
                        c.pos("linear_value_head_dim"), c.pos("linear_conv_kernel_dim"), split_projections=split)
    types, notes = _types(c, L)
    c.get("use_sliding_window")  # Qwen3-Next's attention has no window; the key is a leftover of Qwen2's config
    layers = [Layer(gdn if types[i] == LINEAR else attn, channel(i)) for i in range(L)]
    dtype = c.get("mamba_ssm_dtype")
    if dtype not in (None, "bfloat16", "bf16", "auto"):
        notes.append(f"mamba_ssm_dtype {dtype!r}: the checkpoint asks for Gated DeltaNet's recurrent state in {dtype}; "
                     "here it is priced at the KV cache dtype like every cache: an engine that keeps it in "
                     f"{dtype} holds more bytes than shown (float32: twice a bf16 cache's)")
    gate = c.get("output_gate_type")  # Qwen3.6's configs: "swish"; transformers reads no such key
    if gate is not None:
        notes.append(f"output_gate_type {gate!r}: a gate's activation (transformers reads no such key: sigmoid on the "
                     "attention output, silu in Gated DeltaNet's norm); no weights, and both gates are costed as one "
                     "activation and a multiply an element whichever it is")
    mtp = c.int("mtp_num_hidden_layers", 0)
    c.get("mtp_use_dedicated_embeddings")
    omitted = (LeftOut("mtp", "mtp_num_hidden_layers", f"multi-token-prediction module ({mtp} layer{'s' if mtp != 1 else ''}, "
                       "mtp_num_hidden_layers): not instantiated by transformers, not counted"),) if mtp else ()
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", False), omitted=omitted, notes=notes)


@loader("qwen3_next")
def _qwen3_next(c: Keys) -> Model:
    """Qwen3NextConfig (Qwen3-Next-80B-A3B): layer_types (or every full_attention_interval-th layer,
    4) full attention, the others Gated DeltaNet (linear_num_key_heads 16 x linear_key_head_dim 128,
    linear_num_value_heads 32 x linear_value_head_dim 128, linear_conv_kernel_dim 4; in_proj_qkvz and
    in_proj_ba). Full attention: num_attention_heads x head_dim (256) over num_key_value_heads, q_proj
    twice as wide for the sigmoid output gate, q and k RMSNorms of head_dim, partial rotary (no
    weights). MoE as Qwen2-MoE: on layers (i + 1) % decoder_sparse_step == 0 not in mlp_only_layers,
    num_experts of moe_intermediate_size, top num_experts_per_tok, a shared expert of
    shared_expert_intermediate_size with its sigmoid gate (D, 1); dense layers intermediate_size.
    tie False. The MTP layers (mtp_num_hidden_layers) are left out."""
    c.defaults = DEFAULTS["qwen3_next"]
    L = c.pos("num_hidden_layers")
    moe = qwen_moe_layers(c, L, shared=True)
    dense = MLP(c.pos("intermediate_size"), activation=activation_name(c))
    return _hybrid(c, lambda i: moe(i) or dense)


@loader("qwen3_5_text")
def _qwen3_5_text(c: Keys) -> Model:
    """Qwen3_5TextConfig (Qwen3.5-27B, Qwen3.6-27B; the text_config of model_type qwen3_5): Qwen3-Next's
    layers with Gated DeltaNet's projections split (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: the
    same widths) and a dense gated MLP of intermediate_size on every layer (the class has no MoE keys;
    mlp_only_layers must be empty). tie False. The MTP layers are left out."""
    c.defaults = DEFAULTS["qwen3_5_text"]
    _all_one_kind(c, "a dense MLP")
    dense = MLP(c.pos("intermediate_size"), activation=activation_name(c))
    return _hybrid(c, lambda i: dense, split=True)


@loader("qwen3_5_moe_text")
def _qwen3_5_moe_text(c: Keys) -> Model:
    """Qwen3_5MoeTextConfig (Qwen3.5-35B-A3B to 397B-A17B, Qwen3.6-35B-A3B; the text_config of model_type
    qwen3_5_moe): Qwen3.5's layers with a MoE on every layer: num_experts of moe_intermediate_size, top
    num_experts_per_tok, router (D, E) without bias, a shared expert of shared_expert_intermediate_size
    with its sigmoid gate (D, 1). The class has no intermediate_size, decoder_sparse_step or
    mlp_only_layers (an empty mlp_only_layers passes). tie False. The MTP layers are left out."""
    c.defaults = DEFAULTS["qwen3_5_moe_text"]
    _all_one_kind(c, "a mixture of experts")
    moe = MoE(c.pos("num_experts"), c.pos("num_experts_per_tok"), c.pos("moe_intermediate_size"),
              shared_d_ff=c.pos("shared_expert_intermediate_size"), shared_gate=True, activation=activation_name(c))
    return _hybrid(c, lambda i: moe, split=True)


def _all_one_kind(c: Keys, what: str) -> None:
    """Qwen3.5's decoder layers all have ``what``: an mlp_only_layers or decoder_sparse_step asking
    otherwise (keys its class does not have) is refused, not obeyed or dropped."""
    only, step = c.get("mlp_only_layers") or [], c.get("decoder_sparse_step", 1)
    if only or step != 1:
        raise RooflineError(f"{c.name}: mlp_only_layers {only!r} / decoder_sparse_step {step!r}: every "
                            f"{c.raw.get('model_type')} decoder layer has {what} in transformers; a config asking "
                            "otherwise is not supported", field="model")


# Kimi K3's additions to Kimi Linear's text model (its text_config is a kimi_linear one): refused by name
_KIMI_K3_KEYS = {"attn_res_block_size": "attention residuals", "routed_expert_hidden_size": "a latent MoE",
                 "latent_moe_use_norm": "a latent MoE's norm", "activation_situ_beta": "the situ activation"}


@loader("kimi_linear")
def _kimi_linear(c: Keys) -> Model:
    """KimiLinearConfig (Kimi-Linear-48B-A3B; vLLM's kimi_linear.py): linear_attn_config names the
    Kimi Delta Attention layers (kda_layers, 1-based; num_heads x head_dim, short_conv_kernel_size;
    GatedDeltaNet with gate_rank head_dim), the others MLA without a query latent (q_lora_rank null;
    q_proj D -> H (nope + rope), kv_a_proj_with_mqa and its norm, kv_b_proj, o_proj; no rotary,
    mla_use_nope). Layers from first_k_dense_replace on (every moe_layer_freq-th) a MoE: num_experts
    of moe_intermediate_size, top num_experts_per_token, num_shared_experts x moe_intermediate_size
    shared, a router (D, E) with sigmoid scores and e_score_correction_bias (not counted, as
    DeepSeek-V3's); the others a dense MLP of intermediate_size. silu only. Kimi K3's additions
    (attention residuals, a latent MoE, output-gated MLA, full-rank KDA gates) are refused."""
    k3 = [f"{k} ({what})" for k, what in _KIMI_K3_KEYS.items() if c.raw.get(k) is not None]
    la = c.get("linear_attn_config")
    if c.raw.get("mla_use_output_gate"):
        k3.append("mla_use_output_gate (output-gated MLA)")
    if isinstance(la, dict) and la.get("use_full_rank_gate"):
        k3.append("linear_attn_config use_full_rank_gate (full-rank KDA gates)")
    if k3:
        raise RooflineError(f"{c.name}: Kimi K3's text model is not yet supported: {', '.join(k3)} have no cost model "
                            "here (Kimi Linear's own layers do)", field="model")
    D, L, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("vocab_size", 163840)
    if not isinstance(la, dict):
        raise RooflineError(f"{c.name}: kimi_linear without linear_attn_config (its KDA layers) is not supported",
                            field="model")
    unknown = sorted(set(la) - {"kda_layers", "full_attn_layers", "num_heads", "head_dim", "short_conv_kernel_size",
                                "gate_lower_bound", "use_full_rank_gate"})
    if unknown:
        raise RooflineError(f"{c.name}: linear_attn_config keys {unknown} not understood", field="model")
    kda = la.get("kda_layers")
    full = la.get("full_attn_layers", [i for i in range(1, L + 1) if i not in (kda or [])])
    if not isinstance(kda, list) or not isinstance(full, list) or sorted(kda + full) != list(range(1, L + 1)):
        raise RooflineError(f"{c.name}: linear_attn_config kda_layers and full_attn_layers must split the layers 1 to {L}",
                            field="model")
    keys = Keys(la, f"{c.name}: linear_attn_config")
    H, d = keys.pos("num_heads"), keys.pos("head_dim")
    kda_mixer = GatedDeltaNet(H, H, d, d, keys.pos("short_conv_kernel_size", 4), gate_rank=d)
    if c.get("q_lora_rank") is not None or not c.flag("mla_use_nope", True):
        raise RooflineError(f"{c.name}: Kimi Linear's MLA with a query latent (q_lora_rank) or rotary (mla_use_nope "
                            "false) is not modelled (vLLM asserts neither)", field="model")
    mla = LatentAttention(c.pos("num_attention_heads"), c.pos("kv_lora_rank"), c.pos("qk_nope_head_dim"),
                          c.pos("qk_rope_head_dim"), c.pos("v_head_dim"))
    if activation_name(c) != "silu":
        raise RooflineError(f"{c.name}: hidden_act {activation_name(c)!r} (read: silu) is not modelled", field="model")
    dense = MLP(c.pos("intermediate_size"))
    E = c.int("num_experts", 0)
    moe = None
    if E:
        F = c.pos("moe_intermediate_size")
        moe = MoE(E, c.pos("num_experts_per_token"), F, shared_d_ff=F * c.int("num_shared_experts", 0))
    first, freq = c.int("first_k_dense_replace", 0), c.pos("moe_layer_freq", 1)
    for key in ("num_key_value_heads", "head_dim", "moe_renormalize", "moe_router_activation_func", "use_grouped_topk",
                "num_expert_group", "model_max_length"):
        c.get(key)  # MLA's heads are num_attention_heads; head_dim is read by no module; routing numerics
    layers = [Layer(kda_mixer if i + 1 in kda else mla, moe if moe and i >= first and i % freq == 0 else dense)
              for i in range(L)]
    mtp = c.int("num_nextn_predict_layers", 0)
    omitted = (LeftOut("mtp", "num_nextn_predict_layers",
                       f"multi-token-prediction layers ({mtp}, num_nextn_predict_layers): not counted"),) if mtp else ()
    notes = ["Kimi Delta Attention's dt_bias, A_log, short convolutions and gated norm are fp32 in vLLM; priced at the "
             "weights' width (under 0.2% of a KDA layer)"]
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", False), omitted=omitted, notes=notes)
