"""Loaders of Xiaomi's MiMo models: MiMo-7B (a Qwen2 decoder and multi-token-prediction layers) and
MiMo-V2-Flash (a mixture of experts with sliding-window and full attention layers of their own shapes)."""

from __future__ import annotations

import dataclasses

from roofline.architecture import MLP, Attention, Layer, LeftOut, Model, MoE
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.llama import qwen2_model
from roofline.hf_configs.shared import assemble, loader


def _mtp_omitted(n: int, what: str) -> tuple[LeftOut, ...]:
    return (LeftOut("mtp", what, f"multi-token-prediction layers ({n}, {what}): not counted"),) if n else ()


@loader("mimo")
def _mimo(c: Keys) -> Model:
    """MiMoConfig (XiaomiMiMo's remote code: Qwen2Config plus num_nextn_predict_layers): the main
    model is Qwen2's (q, k, v biases, no o bias; sliding only with use_sliding_window). The
    MiMoMTPLayers (each four RMSNorms, input_proj 2D -> D, a Qwen2 attention and MLP, a final norm)
    are left out, said."""
    mtp = c.int("num_nextn_predict_layers", 0)
    c.get("use_mrope")  # false in MiMo-7B; Qwen2's multimodal rotary sections have no weights
    c.get("attention_bias")  # Qwen2Attention fixes the biases (q, k, v yes; o no) whatever it says
    model = qwen2_model(c)
    return dataclasses.replace(model, omitted=model.omitted + _mtp_omitted(mtp, "num_nextn_predict_layers"))


def _per_layer(c: Keys, key: str, L: int) -> list[int]:
    v = c.need(key)
    if not isinstance(v, list) or len(v) != L or any(x not in (0, 1) or isinstance(x, bool) for x in v):
        raise RooflineError(f"{c.name}: {key} must list 0 or 1 for each of the {L} layers", field="model")
    return v


@loader("mimo_v2_flash")
def _mimo_v2_flash(c: Keys) -> Model:
    """MiMoV2FlashConfig as XiaomiMiMo publishes it (transformers' MiMoV2FlashAttention and
    SparseMoeBlock): hybrid_layer_pattern[i] 1 a sliding-window layer (sliding_window; swa_num_attention_heads,
    swa_num_key_value_heads, swa_head_dim, swa_v_head_dim; a learned sink per head with
    add_swa_attention_sink_bias), 0 a full-attention layer (num_attention_heads, num_key_value_heads,
    head_dim, v_head_dim; sinks with add_full_attention_sink_bias); q, k, v biases with attention_bias,
    no o bias; attention_value_scale a scalar on v (no weight). moe_layer_freq[i] 1 a mixture of
    experts (n_routed_experts gated experts of moe_intermediate_size, top num_experts_per_tok, router
    (E, D) without bias, sigmoid scores with a correction-bias buffer, no shared expert), 0 a dense
    gated MLP of intermediate_size. Two RMSNorms a layer; tie False. The checkpoint's MTP modules
    (model.mtp.*, named by no config key) are not loaded by transformers and not counted."""
    D, L, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("vocab_size")
    swa, moe_at = _per_layer(c, "hybrid_layer_pattern", L), _per_layer(c, "moe_layer_freq", L)
    window = c.pos("sliding_window")
    for alias in ("sliding_window_size", "attention_chunk_size"):  # the remote code's other names for the window
        if c.has(alias) and c.int(alias) != window:
            raise RooflineError(f"{c.name}: {alias} {c.raw[alias]} differs from sliding_window {window}; "
                                "MiMo-V2-Flash attends within one window", field="model")
    if c.int("n_shared_experts", 0):
        raise RooflineError(f"{c.name}: n_shared_experts {c.raw['n_shared_experts']}: MiMo-V2-Flash's MoE block has "
                            "no shared expert", field="model")
    bias = c.flag("attention_bias", False)
    c.get("attention_value_scale"), c.get("swa_rope_theta"), c.get("layernorm_epsilon")  # scalars, no weights
    full = Attention(c.pos("num_attention_heads"), c.pos("num_key_value_heads"), c.pos("head_dim"),
                     v_head_dim=c.int("v_head_dim", 0), qkv_bias=bias, sinks=c.flag("add_full_attention_sink_bias", False))
    sliding = Attention(c.pos("swa_num_attention_heads"), c.pos("swa_num_key_value_heads"), c.pos("swa_head_dim"),
                        v_head_dim=c.int("swa_v_head_dim", 0), window=window, qkv_bias=bias,
                        sinks=c.flag("add_swa_attention_sink_bias", False))
    act = str(c.get("hidden_act", "silu"))
    moe = MoE(c.pos("n_routed_experts"), c.pos("num_experts_per_tok"), c.pos("moe_intermediate_size"), activation=act)
    dense = MLP(c.pos("intermediate_size"), activation=act)
    kinds: dict = {}
    layers = [kinds.setdefault((s, e), Layer(sliding if s else full, moe if e else dense)) for s, e in zip(swa, moe_at)]
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))
