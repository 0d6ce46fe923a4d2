"""Kimi Linear (kimi_linear): Kimi Delta Attention (GatedDeltaNet with rank-r gates and a decay per
channel) beside MLA without a query latent, DeepSeek-style MoE. Truths: the model card
(https://huggingface.co/moonshotai/Kimi-Linear-48B-A3B-Instruct: "48B" total, "3B" activated) and
hand arithmetic from vLLM's KimiDeltaAttention and KimiMLAAttention modules. Kimi K3 stays refused."""

from __future__ import annotations

import pytest

from roofline.blocks import block_kernels
from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.transformer import active_params, cache_elems_per_sequence, count_params

# moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json, the keys that shape the weights (as republished with its
# quantisation at https://huggingface.co/Firworks/Kimi-Linear-48B-A3B-Instruct-nvfp4/blob/main/config.json);
# v_head_dim 128 as the modules read it, vocab_size 163,840 and tie_word_embeddings false KimiLinearConfig's defaults
KIMI_LINEAR = {
    "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"], "bos_token_id": 163584,
    "dtype": "bfloat16", "eos_token_id": 163586, "first_k_dense_replace": 1, "head_dim": 72, "hidden_act": "silu",
    "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216, "kv_lora_rank": 512,
    "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128,
                           "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
                           "num_heads": 32, "short_conv_kernel_size": 4},
    "mla_use_nope": True, "model_max_length": 1048576, "moe_intermediate_size": 1024, "moe_layer_freq": 1,
    "moe_renormalize": True, "moe_router_activation_func": "sigmoid", "num_attention_heads": 32, "num_expert_group": 1,
    "num_experts": 256, "num_experts_per_token": 8, "num_hidden_layers": 27, "num_key_value_heads": 32,
    "num_nextn_predict_layers": 0, "num_shared_experts": 1, "pad_token_id": 163839, "q_lora_rank": None,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 163840,
    "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def kl():
    return from_hf_config(KIMI_LINEAR, "Kimi-Linear-48B-A3B")


def test_kimi_linear_counts_by_hand_and_against_the_card(kl):
    """A KDA layer (D 2,304; 32 heads of 128, 4,096 wide): q, k, v 3 x 2,304 x 4,096 = 28,311,552; f_a and
    g_a 2,304 x 128 = 294,912 each; f_b and g_b 128 x 4,096 = 524,288 each; b_proj 2,304 x 32 = 73,728;
    the q, k, v convs 3 x 4,096 x 4 = 49,152; dt_bias 4,096; A_log 32; o_norm 128; o_proj 4,096 x 2,304 =
    9,437,184: 39,514,272. An MLA layer: q_proj 2,304 x 32 x 192 = 14,155,776, kv_a 2,304 x 576 =
    1,327,104, its norm 512, kv_b 512 x 32 x 256 = 4,194,304, o_proj 9,437,184: 29,114,880. Layer 0's
    dense MLP 3 x 2,304 x 9,216 = 63,700,992; layers 1-26 a MoE: 256 x 3 x 2,304 x 1,024 =
    1,811,939,328, a shared expert 7,077,888, a router 589,824. Two norms a layer, a final norm,
    embedding and LM head 163,840 x 2,304 = 377,487,360 each:
    20 x 39,514,272 + 7 x 29,114,880 + 63,700,992 + 26 x 1,819,607,040 + 27 x 4,608 + 2 x 377,487,360
    + 2,304 = 49,122,675,072. The card's "48B" is the count without the embedding and LM head
    (48,367,700,352); its "3B" active likewise (8 of 256 experts: 2,729,478,528)."""
    n = count_params(kl)
    assert n["ssm"] == 20 * 39_514_272 and n["attention"] == 7 * 29_114_880
    assert n["total"] == 49_122_675_072
    bare = n["total"] - 2 * 377_487_360
    assert bare == 48_367_700_352 and round(bare / 1e9) == 48
    assert active_params(kl) - 2 * 377_487_360 == 2_729_478_528
    assert {layer.mixer.kind for layer in kl.layers} == {"kimi delta attention (linear attention)",
                                                         "latent attention (MLA)"}
    assert kl.ignored_keys == ()


def test_kda_state_and_the_mla_cache(kl):
    # a KDA layer keeps 32 x 128 x 128 = 524,288 state elements and 3 conv taps of q, k, v (3 x 12,288 =
    # 36,864); an MLA layer 576 a token: 20 x 561,152 + 7 x 576 x S
    for S in (1, 1000, 100_000):
        assert float(cache_elems_per_sequence(kl, S)) == 20 * 561_152 + 7 * 576 * S


def test_kda_decode_kernels(kl):
    ops = {k.name: k for k in block_kernels(kl, "decode", batch=1, context=1000, layer=1)}
    # in proj: q, k, v, b and the two rank-128 gate inputs, 2 x 2,304 x (3 x 4,096 + 32 + 256) FLOPs
    assert ops["in proj"].flops == 2 * 2304 * 12_576
    assert ops["gate up proj (f_b, g_b)"].flops == 2 * 128 * 8192
    # the delta rule: 7 FLOPs per state element, 32 x 128 x 128
    assert ops["gated delta rule"].flops == 7 * 32 * 128 * 128


def test_kimi_k3_and_what_kimi_linear_does_not_model_are_refused():
    with pytest.raises(RooflineError, match="not yet supported.*attention residuals"):
        from_hf_config({"model_type": "kimi_k3", "text_config": dict(KIMI_LINEAR)}, "K3")
    for extra, words in (({"attn_res_block_size": 12}, "attention residuals"),
                         ({"routed_expert_hidden_size": 3584}, "latent MoE"),
                         ({"mla_use_output_gate": True}, "output-gated MLA")):
        with pytest.raises(RooflineError, match=f"not yet supported.*{words}"):
            from_hf_config(dict(KIMI_LINEAR, **extra), "K3 text")
    with pytest.raises(RooflineError, match="not yet supported.*full-rank"):
        from_hf_config(dict(KIMI_LINEAR, linear_attn_config=dict(KIMI_LINEAR["linear_attn_config"],
                                                                 use_full_rank_gate=True)), "K3 text")
    with pytest.raises(RooflineError, match="split the layers"):
        from_hf_config(dict(KIMI_LINEAR, linear_attn_config=dict(KIMI_LINEAR["linear_attn_config"], kda_layers=[1])))
    with pytest.raises(RooflineError, match="q_lora_rank"):
        from_hf_config(dict(KIMI_LINEAR, q_lora_rank=1536))
    with pytest.raises(RooflineError, match="self_attn"):
        from_hf_config(dict(KIMI_LINEAR, quantization_config={"quant_method": "fp8", "ignored_layers": ["model.layers.0.self_attn"]}))
