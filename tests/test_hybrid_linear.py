"""The linear-attention hybrids: Gated DeltaNet (mixers.GatedDeltaNet) beside gated full attention,
Qwen3-Next and Qwen3.5 / 3.6 (hf_configs/hybrid.py), and Qwen3-VL's text model unwrapped. Counts by
hand against the published totals; the state per sequence by hand; serving runs on Qwen3.5-397B."""

from __future__ import annotations

import glob
import json
import os

import pytest

from roofline.architecture import Attention, GatedDeltaNet
from roofline.blocks import layer_kernels
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.plan.parallel import shard
from roofline.transformer import (active_params, cache_bytes_per_sequence, count_params, matmul_params,
                                  scan_flops_per_token_forward)

# Qwen3-Next-80B-A3B-Instruct's config.json as published (the keys that shape the weights):
# https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json
QWEN3_NEXT_80B = {"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48, "intermediate_size": 5120,
                  "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 151936,
                  "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                  "linear_num_key_heads": 16, "linear_num_value_heads": 32, "full_attention_interval": 4,
                  "decoder_sparse_step": 1, "mlp_only_layers": [], "num_experts": 512, "num_experts_per_tok": 10,
                  "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "norm_topk_prob": True,
                  "tie_word_embeddings": False, "attention_bias": False, "use_sliding_window": False,
                  "partial_rotary_factor": 0.25, "rope_theta": 10000000, "hidden_act": "silu", "torch_dtype": "bfloat16"}

# Qwen3.5-397B-A17B's config.json as published (its text_config's keys that shape the weights):
# https://huggingface.co/Qwen/Qwen3.5-397B-A17B/blob/main/config.json
QWEN35_397B_TEXT = {"model_type": "qwen3_5_moe_text", "hidden_size": 4096, "num_hidden_layers": 60,
                    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320,
                    "attn_output_gate": True, "attention_bias": False, "full_attention_interval": 4,
                    "layer_types": ["linear_attention"] * 3 + ["full_attention"], "linear_conv_kernel_dim": 4,
                    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
                    "linear_num_value_heads": 64, "num_experts": 512, "num_experts_per_tok": 10,
                    "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024, "mlp_only_layers": [],
                    "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False, "mamba_ssm_dtype": "float32",
                    "max_position_embeddings": 262144, "hidden_act": "silu", "dtype": "bfloat16",
                    "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "rope_type": "default",
                                        "rope_theta": 10000000, "partial_rotary_factor": 0.25}}
QWEN35_397B_TEXT["layer_types"] = QWEN35_397B_TEXT["layer_types"] * 15
QWEN35_397B = {"model_type": "qwen3_5_moe", "tie_word_embeddings": False, "image_token_id": 248056,
               "video_token_id": 248057, "vision_start_token_id": 248053, "vision_end_token_id": 248054,
               "text_config": QWEN35_397B_TEXT,
               "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16}}


def test_gated_deltanet_counts_by_hand():
    """Qwen3-Next's layer (D 2048; 16 key heads and 32 value heads of 128): in_proj_qkvz 2048 x
    (2 x 2048 + 2 x 4096) = 25,165,824; in_proj_ba 2048 x 64 = 131,072; conv 8,192 channels x 4 =
    32,768; dt_bias and A_log 32 each; the gated norm 128; out_proj 4096 x 2048 = 8,388,608."""
    g = GatedDeltaNet(k_heads=16, v_heads=32, k_head_dim=128, v_head_dim=128, conv_kernel=4)
    assert g.params(2048) == 25_165_824 + 131_072 + 32_768 + 64 + 128 + 8_388_608  # 33,718,464
    # state: 32 value heads x 128 x 128 = 524,288; conv window 3 x 8,192 = 24,576
    assert g.state_elems() == 524_288 + 24_576
    # 7 per state element, 7 x 524,288 = 3,670,016; conv 2 x 4 x 8,192 = 65,536
    assert g.scan_flops_per_token() == 3_670_016 + 65_536
    with pytest.raises(RooflineError, match="multiple of key heads"):
        GatedDeltaNet(k_heads=3, v_heads=32, k_head_dim=128, v_head_dim=128)


def test_the_output_gate_doubles_q_proj_and_changes_nothing_else():
    """Gated attention: q_proj (2048, 2 x 16 x 256): 8,388,608 more weights than plain Qwen3 attention."""
    plain, gated = Attention(16, 2, 256, qk_norm="rmsnorm"), Attention(16, 2, 256, qk_norm="rmsnorm", output_gate=True)
    assert gated.params(2048) - plain.params(2048) == 2048 * 16 * 256
    assert gated.cache_elems_per_token() == plain.cache_elems_per_token()
    with pytest.raises(RooflineError, match="must be equal"):
        Attention(16, 2, 256, v_head_dim=128, output_gate=True)


def test_qwen3_next_80b_counts_by_hand_and_to_its_published_80b():
    """Per Gated DeltaNet layer 33,718,464 (above); per attention layer q 2048 x 8192 = 16,777,216,
    k and v 2048 x 512 each, o 4096 x 2048 = 8,388,608, q/k norms 256 each: 27,263,488; every layer a
    MoE: 512 experts of 3 x 2048 x 512 = 3,145,728, a shared expert 3,145,728, its gate 2,048, the
    router 2048 x 512 = 1,048,576: 1,614,809,088; two norms 4,096. 36 linear + 12 full layers (every
    4th full); embedding and LM head 151,936 x 2048 each; final norm 2,048. Total 79,674,391,296: the
    model card's "80B in total" (https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct) to its
    printed digit, [79.5B, 80.5B); the MTP layer is not in it."""
    m = from_hf_config(QWEN3_NEXT_80B)
    moe = 512 * 3_145_728 + 3_145_728 + 2_048 + 1_048_576
    total = 36 * (33_718_464 + moe + 4_096) + 12 * (27_263_488 + moe + 4_096) + 2 * 151_936 * 2048 + 2048
    assert count_params(m)["total"] == total == 79_674_391_296
    assert 79.5e9 <= total < 80.5e9
    assert [k.mixer.kind for k in m.layers[:4]] == ["gated deltanet (linear attention)"] * 3 + ["full attention"]
    assert m.notes == () and m.omitted == ()


def test_qwen35_397b_counts_by_hand_and_to_its_published_397b_and_17b_active():
    """Gated DeltaNet (16 key heads, 64 value heads of 128, D 4096): in_proj_qkv 4096 x 12,288 =
    50,331,648, in_proj_z 4096 x 8192 = 33,554,432, in_proj_b and _a 4096 x 64 each = 524,288, conv
    12,288 x 4 = 49,152, dt_bias and A_log 128, norm 128, out_proj 8192 x 4096 = 33,554,432:
    118,014,208. Attention (32 heads, 2 kv, 256): q 4096 x 16,384 = 67,108,864, k and v 4096 x 512
    each, o 8192 x 4096 = 33,554,432, norms 512: 104,858,112. MoE: 512 x 3 x 4096 x 1024 =
    6,442,450,944, shared 12,582,912 and its gate 4,096, router 2,097,152: 6,457,135,104. Two norms
    8,192. 45 + 15 layers; embedding and LM head 248,320 x 4096 each; final norm 4,096. Total
    396,346,350,336. The card (https://huggingface.co/Qwen/Qwen3.5-397B-A17B) says "397B in total
    and 17B activated" for the model with its vision encoder (27 blocks of width 1152, ~0.4B): the
    language model alone is 396.3B, so the test allows [396B, 397.5B). Active: 10 of 512 experts,
    60 x 502 x 12,582,912 fewer = 17,349,040,896, "17B" to the digit."""
    m = from_hf_config(QWEN35_397B)
    moe = 6_457_135_104
    total = 45 * (118_014_208 + moe + 8_192) + 15 * (104_858_112 + moe + 8_192) + 2 * 248_320 * 4096 + 4096
    c = count_params(m)
    assert c["total"] == total == 396_346_350_336
    assert 396e9 <= total < 397.5e9
    assert active_params(m) == total - 60 * 502 * 12_582_912 == 17_349_040_896
    assert 16.5e9 <= active_params(m) < 17.5e9
    assert c["ssm"] == 45 * 118_014_208 and c["attention"] == 15 * 104_858_112
    assert m.leaves_out("vision") and m.leaves_out("mtp")
    assert any("mamba_ssm_dtype" in n for n in m.notes) and m.ignored_keys == ()


def test_qwen35_27b_dense_counts_to_its_published_27b():
    """Qwen3.5-27B (https://huggingface.co/Qwen/Qwen3.5-27B, "27B"): D 5120, 64 layers, 24 heads of
    256 over 4 kv heads, 16 key / 48 value linear heads of 128, a dense MLP of 17,408. Per linear
    layer: in_proj 5120 x 16,480 = 84,377,600, conv 10,240 x 4 = 40,960, 96 + 128, out_proj 6144 x
    5120 = 31,457,280: 115,876,064; per attention layer: q 5120 x 12,288 = 62,914,560, k and v 5120
    x 1024 each, o 31,457,280, norms 512: 104,858,112; MLP 3 x 5120 x 17,408 = 267,386,880; norms
    10,240. 48 + 16 layers; embedding and LM head 248,320 x 5120 each; final norm: 26,895,998,464."""
    text = {"model_type": "qwen3_5_text", "hidden_size": 5120, "num_hidden_layers": 64, "num_attention_heads": 24,
            "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 17408, "vocab_size": 248320,
            "linear_num_key_heads": 16, "linear_num_value_heads": 48, "full_attention_interval": 4,
            "mlp_only_layers": [], "mtp_num_hidden_layers": 1}
    m = from_hf_config({"model_type": "qwen3_5", "text_config": text, "vision_config": {"depth": 27}})
    total = 48 * (115_876_064 + 267_386_880 + 10_240) + 16 * (104_858_112 + 267_386_880 + 10_240) \
        + 2 * 248_320 * 5120 + 5120
    assert count_params(m)["total"] == total == 26_895_998_464
    assert round(total / 1e9) == 27
    with pytest.raises(RooflineError, match="mlp_only_layers"):
        from_hf_config(dict(text, mlp_only_layers=[0]))
    # Qwen3.6-27B's config adds output_gate_type "swish": no weights, read and said, the count unchanged
    swish = from_hf_config(dict(text, output_gate_type="swish"))
    assert count_params(swish)["total"] == total and any("output_gate_type 'swish'" in n for n in swish.notes)
    assert swish.ignored_keys == ()


def test_state_per_sequence_and_its_tensor_parallel_split_by_hand():
    """Qwen3.5-397B at bf16: each of 45 linear layers keeps 64 x 128 x 128 = 1,048,576 state
    elements and a conv window of 3 x 12,288 = 36,864: 48,844,800 elements, 97,689,600 bytes, at
    any context; each of 15 attention layers 2 kv heads x (256 + 256) = 1,024 per token: 15,360."""
    m = from_hf_config(QWEN35_397B)
    fixed = 45 * (1_048_576 + 36_864)
    assert cache_bytes_per_sequence(m, 0) == 2 * fixed == 97_689_600
    assert cache_bytes_per_sequence(m, 1000) == 2 * (fixed + 15_360 * 1000)
    # tensor parallel 8: 2 key heads and 8 value heads a GPU: state 8 x 128 x 128, conv 3 x (512 + 1024)
    one = shard(m, 8)
    g = next(k.mixer for k in one.kinds if k.is_ssm)
    assert (g.k_heads, g.v_heads) == (2, 8) and g.state_elems() == 131_072 + 3 * 1_536
    with pytest.raises(RooflineError, match="linear-attention key heads"):
        shard(m, 32)


def test_decode_kernels_read_and_write_the_state_once():
    """One decode step of 4 sequences through a linear layer: the delta rule does 7 x 4 x 64 x 128 x
    128 = 29,360,128 FLOPs and reads and writes 4 x 1,048,576 state elements; the conv reads and
    writes 4 x 3 x 12,288 window elements. Scan FLOPs per token, whole model: 45 x (7 x 1,048,576 +
    2 x 4 x 12,288) = 45 x 7,438,336."""
    m = from_hf_config(QWEN35_397B)
    ops = {k.name: k for k in layer_kernels(m.kinds[0], 4096, True, 1, 4, 1000, "flash", "bf16")}
    assert ops["gated delta rule"].flops == 29_360_128 and ops["gated delta rule"].cache_elems == 2 * 4 * 1_048_576
    assert ops["conv1d"].cache_elems == 2 * 4 * 36_864
    # the engines' two input GEMMs (SGLang's and vLLM's in_proj_qkvz and in_proj_ba): q, k, v (12,288) and z
    # (8,192); b and a, one each of 64 value heads
    assert ops["in proj (q, k, v, z)"].weight_elems == 4096 * (12_288 + 8192)
    assert ops["in proj (b, a)"].weight_elems == 4096 * 128
    assert scan_flops_per_token_forward(m) == 45 * 7_438_336
    attn = {k.name: k for k in layer_kernels(m.kinds[1], 4096, True, 1, 4, 1000, "flash", "bf16")}
    assert attn["QKV proj"].weight_elems == 4096 * (2 * 32 * 256 + 2 * 2 * 256) and "output gate (sigmoid*mul)" in attn
    # per token: linear in_proj + out_proj, attention q (gated) k v o, 10 experts + shared + gate + router, LM head
    per_moe = 10 * 12_582_912 + 12_582_912 + 4096 + 512 * 4096
    assert matmul_params(m) == (45 * (4096 * 20_608 + 8192 * 4096) + 15 * (104_858_112 - 512) + 60 * per_moe
                                + 248_320 * 4096)


def test_qwen3_vl_keeps_a_plain_qwen3_language_model():
    """Qwen3-VL's text_config is Qwen3's (MoE: Qwen3-MoE's); the vision tower is named as left out."""
    text = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 128, "vocab_size": 100}
    vl = from_hf_config({"model_type": "qwen3_vl", "text_config": dict(text, model_type="qwen3_vl_text"),
                         "vision_config": {"depth": 2}, "vision_start_token_id": 1, "vision_end_token_id": 2})
    assert count_params(vl) == count_params(from_hf_config(dict(text, model_type="qwen3")))
    assert vl.omitted[0].part == "vision" and vl.ignored_keys == ()
    moe = dict(text, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
               mlp_only_layers=[])
    vl_moe = from_hf_config({"model_type": "qwen3_vl_moe", "text_config": dict(moe, model_type="qwen3_vl_moe_text"),
                             "vision_config": {}})
    assert count_params(vl_moe) == count_params(from_hf_config(dict(moe, model_type="qwen3_moe")))


def test_what_cannot_be_costed_is_refused_by_name():
    with pytest.raises(RooflineError, match="attn_output_gate false"):
        from_hf_config(dict(QWEN3_NEXT_80B, attn_output_gate=False))
    with pytest.raises(RooflineError, match="'sliding_attention'"):
        from_hf_config(dict(QWEN3_NEXT_80B, layer_types=["sliding_attention"] * 48))
    with pytest.raises(RooflineError, match="attention_bias"):
        from_hf_config(dict(QWEN3_NEXT_80B, attention_bias=True))
    odd = from_hf_config(dict(QWEN3_NEXT_80B, full_attention_interval=2, layer_types=["linear_attention"] * 3
                              + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 40))
    assert any("disagrees with layer_types" in n for n in odd.notes)  # layer_types wins, said
    assert sum(k.is_attention for k in odd.layers) == 2


def test_a_skipped_linear_attn_module_is_the_gated_deltanet_not_the_attention():
    """Gated DeltaNet's modules are named linear_attn (weights in the ssm part): a quantization_config
    that skips them keeps the ssm part at bf16, not the attention."""
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["linear_attn"]}
    m = from_hf_config(dict(QWEN3_NEXT_80B, quantization_config=quant))
    assert m.storage.width("ssm", 2.0) == 2.0 and m.storage.width("attention", 2.0) < 1.1


def test_serving_runs_on_qwen35_397b_at_tensor_parallel_8(tmp_path, capsys):
    path = tmp_path / "qwen3.5-397b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(QWEN35_397B))
    assert main(["serving", "--model", str(path), "--machine", "h200", "--tp", "8", "--concurrency", "4",
                 "--requests", "8", "--input-len", "512", "--output-len", "16"]) == 0
    out = capsys.readouterr().out
    assert "KV cache + SSM state" in out and "vision tower" in out and "mamba_ssm_dtype" in out


def test_the_shipped_qwen35_and_qwen3_vl_configs_load_without_a_stray_key():
    pkg = pytest.importorskip("aiconfigurator_core")
    folder = os.path.join(os.path.dirname(pkg.__file__), "model_configs")
    paths = [p for p in glob.glob(os.path.join(folder, "Qwen--Qwen3*_config.json"))
             if ("3.5" in p or "VL" in p) and not p.endswith("hf_quant_config.json")]
    assert len(paths) >= 11
    for p in paths:
        m = from_hf_config(json.load(open(p)), os.path.basename(p))
        assert m.ignored_keys == (), p
        assert m.leaves_out("vision"), p
