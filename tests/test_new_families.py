"""Families added for the configs aiconfigurator-core ships: each counted by hand (one layer of each
kind, the arithmetic in the comment) and against the publisher's total. The configs' architecture
keys are inline, so the tests stand without the package; one test reads the shipped files when the
package is there."""

from __future__ import annotations

import json
import os

import pytest

from roofline.blocks import layer_kernels
from roofline.hf_configs import from_hf_config
from roofline.transformer import active_params, count_params, matmul_params

# ---------------------------------------------------------------------------------------------
# Nemotron-3 (nemotron_h with MoE layers)
# ---------------------------------------------------------------------------------------------

NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"  # 23 M, 23 E, 6 *
NANO = {"model_type": "nemotron_h", "hidden_size": 2688, "hybrid_override_pattern": NANO_PATTERN, "num_hidden_layers": 52,
        "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "attention_bias": False,
        "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
        "use_conv_bias": True, "mamba_proj_bias": False, "expand": 2, "intermediate_size": 1856, "mlp_bias": False,
        "mlp_hidden_act": "relu2", "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712,
        "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 6, "vocab_size": 131072,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "sliding_window": None}
SUPER_PATTERN = ("MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME")
SUPER = dict(NANO, hidden_size=4096, hybrid_override_pattern=SUPER_PATTERN, num_hidden_layers=88, mamba_num_heads=128,
             intermediate_size=2688, moe_intermediate_size=2688, moe_latent_size=1024,
             moe_shared_expert_intermediate_size=5376, n_routed_experts=512, num_experts_per_tok=22,
             num_nextn_predict_layers=1, mtp_hybrid_override_pattern="*E")
ULTRA_PATTERN = ("MEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*"
                 "EMEMEMEM*EMEMEMEME")  # 48 M, 48 E, 12 *
ULTRA_WORDS = {"M": "mamba", "E": "moe", "*": "attention"}
ULTRA = dict(SUPER, hidden_size=8192, mamba_num_heads=256, num_attention_heads=64, intermediate_size=5120,
             moe_intermediate_size=5120, moe_latent_size=2048, moe_shared_expert_intermediate_size=10240,
             layers_block_type=[ULTRA_WORDS[ch] for ch in ULTRA_PATTERN], mtp_layers_block_type=["attention", "moe"])
del ULTRA["hybrid_override_pattern"], ULTRA["num_hidden_layers"], ULTRA["mtp_hybrid_override_pattern"]


def test_nemotron3_nano_counts_by_hand_and_to_its_model_card():
    """D 2688. Mamba-2 layer: d_inner 64 x 64 = 4096; in_proj 2688 x (2 x 4096 + 2 x 8 x 128 + 64 = 10,304)
    = 27,697,152; conv (4096 + 2048 = 6144 channels) x 4 + 6144 bias = 30,720; dt_bias, A_log, D 3 x 64 = 192;
    gated norm 4096; out_proj 4096 x 2688 = 11,010,048; the layer norm 2688: 38,744,896.
    Attention layer: q 2688 x 4096 = 11,010,048, k and v 2688 x 256 each = 1,376,256, o 11,010,048, norm 2688:
    23,399,040. MoE layer: 128 experts x (up 2688 x 1856 + down 1856 x 2688 = 9,977,856) = 1,277,165,568;
    shared expert 2 x 2688 x 3712 = 19,955,712; router 2688 x 128 = 344,064; norm 2688: 1,297,468,032.
    Embedding and LM head 2 x 131072 x 2688 = 704,643,072; final norm 2688.
    The model card (https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, and the
    technical report, arXiv:2512.20848): 31.6B total, 3.2B active (3.6B including embeddings)."""
    m = from_hf_config(NANO)
    mamba, attn, moe = 38_744_896, 23_399_040, 1_297_468_032
    assert {k.label: n for k, n in m.kind_counts()} == {"mamba2 (SSD)": 23, "MoE 6 of 128 x 1856 + shared 3712": 23,
                                                         "full attention": 6}
    total = 23 * mamba + 23 * moe + 6 * attn + 704_643_072 + 2688
    assert count_params(m)["total"] == total
    # active: 6 of the 128 experts in each MoE layer
    active = total - 23 * (128 - 6) * 9_977_856
    assert active_params(m) == active
    assert round(total / 1e9, 1) == 31.6
    assert round(active / 1e9, 1) == 3.6 and round((active - 131072 * 2688) / 1e9, 1) == 3.2
    # the float32 SSM state the checkpoint keeps is said, not silently priced at the KV dtype
    assert any("mamba_ssm_cache_dtype float32" in n for n in from_hf_config(dict(NANO, mamba_ssm_cache_dtype="float32")).notes)


def test_nemotron3_super_latent_moe_by_hand_and_to_its_published_total():
    """D 4096, latent 1024. MoE layer: 512 experts x (2 x 1024 x 2688 = 5,505,024) = 2,818,572,288;
    latent down 4096 x 1024 and up 1024 x 4096 = 8,388,608; shared expert 2 x 4096 x 5376 = 44,040,192;
    router 4096 x 512 = 2,097,152; norm 4096: 2,873,102,336. Mamba-2 layer: d_inner 128 x 64 = 8192;
    in_proj 4096 x (2 x 8192 + 2048 + 128 = 18,560) = 76,021,760; conv (8192 + 2048 = 10,240) x 5 = 51,200;
    3 x 128 = 384; gated norm 8192; out_proj 8192 x 4096 = 33,554,432; norm 4096: 109,640,064. Attention:
    q and o 4096 x 4096 each = 33,554,432, k and v 4096 x 256 each = 2,097,152, norm 4096: 35,655,680.
    40 Mamba-2, 40 MoE, 8 attention layers; embedding and LM head 2 x 131072 x 4096 = 1,073,741,824.
    Published (https://research.nvidia.com/labs/nemotron/Nemotron-3-Super and the model card
    https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8): 120B total, 12B active,
    the MTP layer not counted (said)."""
    m = from_hf_config(SUPER)
    moe, mamba, attn = 2_873_102_336, 109_640_064, 35_655_680
    total = 40 * moe + 40 * mamba + 8 * attn + 1_073_741_824 + 4096
    assert count_params(m)["total"] == total
    active = total - 40 * (512 - 22) * 5_505_024
    assert active_params(m) == active
    assert abs(total / 120e9 - 1) < 0.01  # "120B", a rounded figure: ours 120.67B
    assert round((active - 131072 * 4096) / 1e9) == 12
    assert m.leaves_out("mtp")


def test_nemotron3_ultra_reads_layers_block_type_and_matches_its_published_total():
    """Ultra has no hybrid_override_pattern: layers_block_type lists 108 layers (48 mamba, 48 moe, 12
    attention in ULTRA_PATTERN). Published (https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16):
    550B total, 55B active."""
    m = from_hf_config(ULTRA)
    assert m.n_layers == 108 and ULTRA_PATTERN.count("*") == 12
    total, active = count_params(m)["total"], active_params(m, embeddings=False)
    assert abs(total / 550e9 - 1) < 0.01 and round(active / 1e9) == 55
    # the same model written as a pattern string counts the same
    legacy = dict(ULTRA, hybrid_override_pattern=ULTRA_PATTERN)
    del legacy["layers_block_type"]
    assert count_params(from_hf_config(legacy)) == count_params(m)


def test_latent_moe_kernels_multiply_by_the_weights_a_token_uses():
    """One decode token through a Super MoE layer: router 4096 x 512, latent down and up 2 x 4096 x 1024,
    22 experts x 2 x 1024 x 2688, shared 2 x 4096 x 5376: matmul FLOPs = 2 x those weights."""
    m = from_hf_config(SUPER)
    layer = next(k for k in m.kinds if k.is_moe)
    ops = layer_kernels(layer, 4096, True, 1, 1, 1, "naive", "bf16")
    weights = 4096 * 512 + 2 * 4096 * 1024 + 22 * 2 * 1024 * 2688 + 2 * 4096 * 5376
    assert sum(k.flops for k in ops if k.category == "matmul") == 2 * weights
    assert matmul_params(m) > 0


def test_nemotron_h_refuses_what_it_cannot_count():
    with pytest.raises(Exception, match="layer codes"):
        from_hf_config(dict(NANO, hybrid_override_pattern="MEX" + NANO_PATTERN[3:]))
    with pytest.raises(Exception, match="num_hidden_layers"):
        from_hf_config(dict(NANO, num_hidden_layers=51))
    with pytest.raises(Exception, match="layers_block_type"):
        from_hf_config(dict(ULTRA, layers_block_type=["mamba", "conv"]))
    with pytest.raises(Exception, match="list different layers"):
        from_hf_config(dict(ULTRA, hybrid_override_pattern="M" * 108))
    assert count_params(from_hf_config(dict(ULTRA, hybrid_override_pattern=ULTRA_PATTERN))) == count_params(from_hf_config(ULTRA))
    with pytest.raises(Exception, match="n_shared_experts"):
        from_hf_config(dict(NANO, n_shared_experts=2))


# ---------------------------------------------------------------------------------------------
# MiMo
# ---------------------------------------------------------------------------------------------

MIMO_7B = {"model_type": "mimo", "num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 11008, "vocab_size": 151680,
           "attention_bias": True, "sliding_window": 32768, "max_window_layers": 32, "use_sliding_window": False,
           "use_mrope": False, "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
MIMO_V2_SWA = [0, 1, 1, 1, 1] + [0, 1, 1, 1, 1, 1] * 7 + [0]  # 9 full, 39 sliding
MIMO_V2 = {"model_type": "mimo_v2_flash", "num_hidden_layers": 48, "hidden_size": 4096, "num_attention_heads": 64,
           "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128, "intermediate_size": 16384, "vocab_size": 152576,
           "sliding_window": 128, "sliding_window_size": 128, "attention_chunk_size": 128, "swa_num_attention_heads": 64,
           "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128, "hybrid_layer_pattern": MIMO_V2_SWA,
           "moe_layer_freq": [0] + [1] * 47, "moe_intermediate_size": 2048, "n_routed_experts": 256,
           "n_shared_experts": None, "num_experts_per_tok": 8, "hidden_act": "silu", "attention_bias": False,
           "attention_value_scale": 0.707, "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_mimo_7b_is_qwen2_with_its_mtp_layer_left_out():
    """Per layer: q 4096 x 4096 = 16,777,216 and its bias 4096; k and v 4096 x 1024 each = 8,388,608 and
    biases 2048; o 16,777,216 (no bias); gated MLP 3 x 4096 x 11008 = 135,266,304; 2 norms 8192:
    177,223,680. 36 layers, embedding and LM head 2 x 151680 x 4096 = 1,242,562,560, final norm 4096.
    The MTP layer (input_proj 2 x 4096 x 4096, one attention and MLP as above, five norms: 210,788,352)
    is left out and said."""
    m = from_hf_config(MIMO_7B)
    assert count_params(m)["total"] == 36 * 177_223_680 + 1_242_562_560 + 4096
    assert m.leaves_out("mtp") and not m.notes


def test_mimo_v2_flash_by_hand_and_to_its_model_card():
    """D 4096. Full attention: q 4096 x 64 x 192 = 50,331,648, k 4096 x 4 x 192 = 3,145,728, v 4096 x 4 x 128
    = 2,097,152, o 64 x 128 x 4096 = 33,554,432: 89,128,960. Sliding (8 kv heads, a sink per head): 50,331,648
    + 6,291,456 + 4,194,304 + 33,554,432 + 64 = 94,371,904. MoE: 256 x 3 x 4096 x 2048 = 6,442,450,944 and router
    4096 x 256 = 1,048,576. Layer 0's dense MLP 3 x 4096 x 16384 = 201,326,592. 2 norms a layer (8192);
    embedding and LM head 2 x 152576 x 4096 = 1,249,902,592; final norm 4096. 9 full and 39 sliding layers,
    47 MoE. The model card (https://huggingface.co/XiaomiMiMo/MiMo-V2-Flash): 309B total, 15B active."""
    m = from_hf_config(MIMO_V2)
    total = (9 * 89_128_960 + 39 * 94_371_904 + 47 * (6_442_450_944 + 1_048_576) + 201_326_592 + 48 * 8192
             + 1_249_902_592 + 4096)
    assert count_params(m)["total"] == total
    active = total - 47 * (256 - 8) * 3 * 4096 * 2048
    assert active_params(m) == active
    assert round(total / 1e9) == 309 and round(active / 1e9) == 15
    windows = {k.mixer.window for k in m.kinds}
    assert windows == {0, 128}
    with pytest.raises(Exception, match="attention_chunk_size"):
        from_hf_config(dict(MIMO_V2, attention_chunk_size=256))
    with pytest.raises(Exception, match="hybrid_layer_pattern"):
        from_hf_config(dict(MIMO_V2, hybrid_layer_pattern=[0, 1]))


# ---------------------------------------------------------------------------------------------
# Llama-3.3-Nemotron-Super-49B (nemotron-nas) and Step-3.7-Flash (refused)
# ---------------------------------------------------------------------------------------------


def _nas_block(attention: bool, ffn_mult: float) -> dict:
    attn = {"n_heads_in_group": 8 if attention else None, "no_op": not attention, "num_sink_tokens": None,
            "replace_with_linear": False, "sparsify": None, "unshifted_sink": False,
            "use_prefill_window_in_sink_attention": False, "window_length": None}
    return {"attention": attn, "ffn": {"ffn_mult": ffn_mult, "no_op": False, "replace_with_linear": False, "sparsify": None}}


# the 80 block_configs of Llama-3_3-Nemotron-Super-49B-v1, by kind (their order changes no count)
NAS_KINDS = [(True, 5.25, 48), (True, 2.625, 1), (False, 5.25, 1), (False, 2.625, 5), (False, 3.28125, 1),
             (False, 1.3125, 10), (False, 1.0, 8), (False, 0.5, 6)]
NAS_49B = {"model_type": "nemotron-nas", "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
           "num_key_value_heads": None, "intermediate_size": None, "vocab_size": 128256, "hidden_act": "silu",
           "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "block_configs": [_nas_block(a, f) for a, f, n in NAS_KINDS for _ in range(n)]}


def test_nemotron_nas_super_49b_by_hand_and_to_its_model_card():
    """D 8192, 64 heads of 128. Attention (49 layers): q and o 8192 x 8192 = 67,108,864 each, k and v 8192 x
    1024 each (64 / 8 = 8 kv heads): 150,994,944. MLP widths int(2 mult 8192 / 3) rounded up to 256:
    5.25 -> 28672, 2.625 -> 14336, 3.28125 -> 17920, 1.3125 -> 7168, 1.0 -> 5461 -> 5632, 0.5 -> 2730 ->
    2816; each 3 x 8192 x F. Norms: one per kept part, 49 + 80 = 129 x 8192 = 1,056,768. Embedding and LM
    head 2 x 128256 x 8192 = 2,101,346,304; final norm 8192. The model card
    (https://huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1): 49.9B parameters."""
    m = from_hf_config(NAS_49B)
    mlp = 3 * 8192 * (49 * 28672 + 6 * 14336 + 17920 + 10 * 7168 + 8 * 5632 + 6 * 2816)
    total = 49 * 150_994_944 + mlp + 129 * 8192 + 2_101_346_304 + 8192
    assert count_params(m)["total"] == total
    assert round(total / 1e9, 1) == 49.9
    counts = {k.label: n for k, n in m.kind_counts()}
    assert counts["full attention + gated MLP 28672"] == 48 and counts["gated MLP 5632"] == 8
    assert sum(n for k, n in m.kind_counts() if k.is_attention) == 49


def test_nemotron_nas_refuses_blocks_it_cannot_cost():
    linear = dict(NAS_49B, block_configs=[dict(b) for b in NAS_49B["block_configs"]])
    linear["block_configs"][0] = {"attention": dict(NAS_49B["block_configs"][0]["attention"], replace_with_linear=True),
                                  "ffn": NAS_49B["block_configs"][0]["ffn"]}
    with pytest.raises(Exception, match="not yet supported"):
        from_hf_config(linear)
    with pytest.raises(Exception, match="block_configs must list 80"):
        from_hf_config(dict(NAS_49B, block_configs=NAS_49B["block_configs"][:79]))
    empty = dict(NAS_49B, block_configs=list(NAS_49B["block_configs"]))
    empty["block_configs"][0] = {"attention": {"no_op": True}, "ffn": {"no_op": True}}
    with pytest.raises(Exception, match="not yet supported"):
        from_hf_config(empty)


def test_step3p7_is_refused_as_not_yet_supported_and_not_listed_as_supported():
    step = {"model_type": "step3p7", "num_hidden_layers": 45, "hidden_size": 4096, "num_attention_heads": 64,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128896}
    with pytest.raises(Exception, match="not yet supported.*g_proj.*attention_other_setting"):
        from_hf_config(step)
    with pytest.raises(Exception, match="supported: ") as refusal:
        from_hf_config({"model_type": "no_such_family"})
    assert "step3p7" not in str(refusal.value) and "nemotron-nas" in str(refusal.value)


# ---------------------------------------------------------------------------------------------
# The shipped files, where aiconfigurator-core is installed
# ---------------------------------------------------------------------------------------------


def _shipped(name):
    core = pytest.importorskip("aiconfigurator_core")
    with open(os.path.join(os.path.dirname(core.__file__), "model_configs", name)) as f:
        return json.load(f)


@pytest.mark.parametrize("name, inline", [("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16_config.json", NANO),
                                          ("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json", SUPER),
                                          ("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16_config.json", ULTRA),
                                          ("nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4_config.json", NANO),
                                          ("XiaomiMiMo--MiMo-7B-Base_config.json", MIMO_7B),
                                          ("XiaomiMiMo--MiMo-V2-Flash_config.json", MIMO_V2),
                                          ("nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json", NAS_49B)])
def test_shipped_configs_count_as_the_inline_keys(name, inline):
    assert count_params(from_hf_config(_shipped(name), name)) == count_params(from_hf_config(inline))


def test_latent_moe_under_expert_parallelism_sends_latent_rows():
    """A tiny latent MoE (D 256, R 64, 8 experts, top 2) over 4 GPUs: a step of 64 decode tokens gives
    each GPU 16 rows; each sends its 2 routed copies of a 64-wide latent row (2 B each), 3/4 of them to
    other GPUs, at each of 2 MoE layers, each way: 16 x 2 x 64 x 2 x 3/4 x 2 = 6,144 B (not D's 24,576)."""
    from roofline.plan.step import StepCost

    tiny = dict(NANO, hidden_size=256, hybrid_override_pattern="M*EE", num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, head_dim=64, mamba_num_heads=8, mamba_head_dim=32, ssm_state_size=16,
                n_groups=2, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, moe_latent_size=64,
                moe_shared_expert_intermediate_size=128, vocab_size=1000)
    ep = StepCost(from_hf_config(tiny), "h100-sxm", tensor_parallel=4, expert_parallel=True)
    ops = {o.name: o for o in ep.ops([2048] * 64)}
    assert ops["C: EP all-to-all dispatch (nvlink)"].bytes == pytest.approx(6_144)  # C: the MoE layers' kind
    assert ops["C: EP all-to-all combine (nvlink)"].bytes == pytest.approx(6_144)
    assert "C: latent down proj" in ops and "C: expert up proj" in ops
