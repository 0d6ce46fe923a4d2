"""Models as stacks of layers: caches, decode bytes and memory verdicts of each layer kind against
hand arithmetic; the loaders' refusals and notes; the causal count for T queries of S positions.

Every expected value is arithmetic in the comment from the published config's shapes (the preset
files copy them), never a printout of the code under test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.architecture import Attention, Layer, LeftOut, MLP, Model, attended_pairs
from roofline.blocks import block_kernels, layer_reports
from roofline.plan.memory import inference_memory
from roofline.errors import RooflineError
from roofline.hf_configs import SUPPORTED, from_hf_config
from roofline.kernels import attention_scores_kernel
from roofline.plan import Precision, decode_step, kv_overtakes_weights_context, predict_model
from roofline.transformer import (
    attention_flops_per_token_forward,
    cache_bytes_per_sequence,
    count_params,
    get_model,
    kv_cache_bytes_per_token,
    model_summary,
    weight_bytes,
)

# ---------------------------------------------------------------------------------------------
# The layer lists of the presets
# ---------------------------------------------------------------------------------------------


def _counts(key):
    return {k.label: n for k, n in get_model(key).kind_counts()}


def test_gemma3_27b_is_five_sliding_layers_to_one_full():
    # 62 layers, sliding_window_pattern 6: layers 5, 11, ..., 59 full (10 of them), 52 sliding 1024
    m = get_model("gemma3-27b")
    full = [i for i, layer in enumerate(m.layers) if not layer.mixer.span]
    assert full == list(range(5, 62, 6)) and len(full) == 10
    assert {layer.mixer.span for layer in m.layers} == {0, 1024}


def test_gpt_oss_alternates_sliding_128_and_full():
    m = get_model("gpt-oss-120b")
    assert [layer.mixer.span for layer in m.layers[:4]] == [128, 0, 128, 0] and m.n_layers == 36


def test_llama4_maverick_interleaves_dense_and_moe_layers():
    # interleave_moe_layer_step 2: layers 1, 3, ... MoE (24); every 4th layer (3, 7, ...) NoPE full attention
    m = get_model("llama4-maverick")
    moe = [i for i, layer in enumerate(m.layers) if layer.is_moe]
    assert moe == list(range(1, 48, 2))
    assert [i for i, layer in enumerate(m.layers) if not layer.mixer.span] == list(range(3, 48, 4))
    assert all(layer.mlp.shared_d_ff == 8192 for layer in m.layers if layer.is_moe)


def test_deepseek_v3_has_three_dense_layers_then_moe_with_a_shared_expert():
    m = get_model("deepseek-v3")
    assert [layer.is_moe for layer in m.layers[:4]] == [False, False, False, True]
    moe = m.layers[3].mlp
    assert (moe.n_experts, moe.top_k, moe.d_ff, moe.shared_d_ff) == (256, 8, 2048, 2048)
    assert m.layers[0].mlp.d_ff == 18432
    assert m.mtp is not None and m.mtp.depth == 1  # the one MTP layer (num_nextn_predict_layers 1), held apart


def test_hybrids_count_their_mixers():
    # Jamba: attention on i % 8 == 4 (4 of 32), MoE on odd layers (16)
    jamba = get_model("jamba")
    assert sum(layer.is_attention for layer in jamba.layers) == 4 and sum(layer.is_moe for layer in jamba.layers) == 16
    # Nemotron-H 8B: "M-M-M-M*-..." 24 Mamba-2, 24 MLP, 4 attention layers of 52
    nem = get_model("nemotron-h-8b")
    assert (sum(k.is_ssm for k in nem.layers), sum(k.is_attention for k in nem.layers), nem.n_layers) == (24, 4, 52)


# ---------------------------------------------------------------------------------------------
# Caches per layer kind
# ---------------------------------------------------------------------------------------------


def test_full_attention_cache_is_per_token():
    # Llama 3 8B: 2 x 32 layers x 8 kv heads x 128 x 2 bytes = 131,072 bytes a token
    assert cache_bytes_per_sequence("llama3-8b", 8192) == 8192 * 131_072


def test_sliding_window_caps_the_cache():
    # Mistral 7B v0.1 at 32k: 32 layers x min(32,768, 4,096) x (2 x 8 x 128 x 2 bytes = 4,096) = 536,870,912,
    # an eighth of the 4,294,967,296 a full cache would take
    assert cache_bytes_per_sequence("mistral-7b", 32768) == 32 * 4096 * 4096 == 4_294_967_296 / 8
    assert kv_cache_bytes_per_token("mistral-7b") == 0.0  # nothing grows past the window


def test_gemma3_27b_cache_at_128k_and_the_fit_on_one_h100():
    # per token per layer 2 x 16 kv heads x 128 x 2 bytes = 8,192; 10 full layers x 131,072 tokens
    # + 52 sliding layers x 1,024 = 10,737,418,240 + 436,207,616 = 11,173,625,856 bytes
    kv = 10 * 131072 * 8192 + 52 * 1024 * 8192
    assert cache_bytes_per_sequence("gemma3-27b", 131072) == kv == 11_173_625_856
    mem = inference_memory("gemma3-27b", "h100-sxm", 1, 131072)
    # weights 27,009,346,304 x 2 bytes = 54,018,692,608; with the cache 65.2 GB of 80 GB
    assert mem.parts[0].bytes == 54_018_692_608 and mem.fits
    # and a step's activations (as serving reserves them): 8,192 x (2 x 21,504 + 4 x 5,376) x 2
    # + 256 x 262,208 x 4 = 1,056,964,608 + 268,500,992 = 1,325,465,600
    assert mem.total_bytes == 54_018_692_608 + kv + 1_325_465_600


def test_gpt_oss_120b_mxfp4_fits_one_80gb_gpu():
    # experts: 36 layers x 128 x 3 x 2880 x 2880 = 114,661,785,600 weights at 4.25 bits (0.53125 B)
    # = 60,914,073,600 B; the rest, 116,829,156,672 - 114,661,785,600 = 2,167,371,072 parameters at
    # bf16 = 4,334,742,144 B: 65,248,815,744 B (the model card's checkpoint: 60.8 GiB = 65.28 GB)
    weights = 114_661_785_600 * 0.53125 + (116_829_156_672 - 114_661_785_600) * 2
    stored = Precision.as_stored("gpt-oss-120b")
    mem = inference_memory("gpt-oss-120b", "h100-sxm", 1, 8192, stored)
    assert mem.parts[0].bytes == weights == 65_248_815_744
    # KV: per token per layer 2 x 8 x 64 x 2 = 2,048 B; 18 full x 8,192 + 18 sliding x 128
    assert mem.parts[1].bytes == 18 * 8192 * 2048 + 18 * 128 * 2048 == 306_708_480
    assert mem.fits
    # read as bf16 it would not (116.8e9 x 2 = 233.7 GB)
    assert not inference_memory("gpt-oss-120b", "h100-sxm", 1, 8192, Precision()).fits
    assert weight_bytes("gpt-oss-120b") == weights  # as stored, without a Precision


def test_mla_caches_the_latent():
    # DeepSeek-V3: 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes = 70,272 bytes a token
    assert kv_cache_bytes_per_token("deepseek-v3") == 61 * 576 * 2 == 70_272


def test_state_space_layers_keep_a_constant_state():
    # Mamba-2 2.7B: d_inner 5,120 x d_state 128 = 655,360 + conv (4 - 1) x (5,120 + 2 x 128) = 16,128
    # = 671,488 elements x 2 bytes x 64 layers = 85,950,464 bytes, whatever the context
    per_seq = 64 * (5120 * 128 + 3 * (5120 + 2 * 128)) * 2
    assert cache_bytes_per_sequence("mamba2-2.7b", 1) == cache_bytes_per_sequence("mamba2-2.7b", 10**6) == per_seq
    # Nemotron-H 8B: 4 attention layers x 2 x 8 x 128 x 2 = 16,384 B a token, plus 24 Mamba-2 layers x
    # (8,192 x 128 + 3 x (8,192 + 2 x 8 x 128)) x 2 = 51,806,208 B
    assert cache_bytes_per_sequence("nemotron-h-8b", 1000) == 1000 * 16_384 + 51_806_208
    # Jamba: 4 attention layers x 2 x 8 x 128 x 2 = 16,384 B a token; 28 Mamba layers x
    # (8,192 x 16 + 3 x 8,192) x 2 = 8,716,288 B
    assert cache_bytes_per_sequence("jamba", 1000) == 1000 * 16_384 + 8_716_288


def test_decode_step_reads_windowed_kv():
    # gpt-oss-20b at context 4,096, batch 1: 12 full layers x 4,096 x 2,048 B + 12 sliding x 128 x 2,048
    step = decode_step("gpt-oss-20b", "h100-sxm", 1, 4096)
    assert step.kv_bytes == 12 * 4096 * 2048 + 12 * 128 * 2048 == 103_809_024


def test_decode_step_reads_ssm_state_both_ways():
    # Mamba-2 2.7B: each step reads and writes the 85,950,464-byte state of each sequence
    step = decode_step("mamba2-2.7b", "h100-sxm", 2, 4096)
    assert step.kv_bytes == 2 * 2 * 85_950_464


def test_kv_never_overtakes_weights_when_the_cache_stops_growing():
    assert kv_overtakes_weights_context("mamba2-2.7b") is None
    # Llama 3 8B: matmul weights 7,504,658,432 x 2 bytes / 131,072 bytes a token = 114,512 (docs/planning.md)
    assert kv_overtakes_weights_context("llama3-8b") == 114_512


# ---------------------------------------------------------------------------------------------
# Attention pairs, FLOPs and the two MLA forms
# ---------------------------------------------------------------------------------------------


def test_causal_pairs_for_the_last_t_of_s_positions():
    # 4 queries at positions 7..10 of 10: 7 + 8 + 9 + 10 = 34 = 4 x 10 - 4 x 3 / 2
    assert attended_pairs(4, 10) == 34
    # the seed's convention for a prompt with no cache: T^2 / 2
    assert attended_pairs(8192, 8192) == 8192 * 8192 / 2
    # sliding window 3: min(p, 3) for p = 7..10 = 12; chunked 3: ((p - 1) mod 3) + 1 = 1, 2, 3, 1 = 7
    assert attended_pairs(4, 10, 3) == 12 and attended_pairs(4, 10, 3, chunked=True) == 7
    # one decode query sees min(S, W)
    assert attended_pairs(1, 4096, 128, causal=False) == 128
    # QK^T: 2 x pairs x d FLOPs, one head, d 8
    assert attention_scores_kernel(4, 8, causal=True, context=10).flops == 2 * 34 * 8


def test_causal_needs_at_least_as_many_keys_as_queries():
    with pytest.raises(RooflineError) as refused:
        attention_scores_kernel(10, 8, causal=True, context=4)
    assert refused.value.field == "context"


def test_windowed_attention_flops_use_the_window():
    # Mistral at s = 32,768: per layer 2 x 32 heads x (128 + 128) x min(s, 4,096) = 67,108,864 per token
    assert attention_flops_per_token_forward("mistral-7b", 32768) == 32 * 2 * 32 * 256 * 4096


def test_chunked_prefill_step_counts_the_cache():
    # Llama 3 8B, T = 128 new tokens of S = 4,096 positions: QK^T pairs per head 128 x 4,096 - 128 x 127 / 2
    # = 516,160; 32 heads; 2 x d 128 FLOPs each
    ops = {k.name: k for k in block_kernels("llama3-8b", "prefill", 128, 1, 4096)}
    assert ops["QK^T"].flops == 2 * 32 * (128 * 4096 - 128 * 127 / 2) * 128
    # the 4,096 - 128 cached keys (8 kv heads x 128) are cache reads
    assert ops["QK^T"].cache_elems == 8 * (4096 - 128) * 128


def test_mla_prefill_expands_and_decode_absorbs():
    pre = [k.name for k in block_kernels("deepseek-v3", "prefill", 256, layer=3)]
    dec = {k.name: k for k in block_kernels("deepseek-v3", "decode", batch=4, context=1000, layer=3)}
    assert "kv_b proj (expand)" in pre and "latent attention" not in pre
    assert "q absorb (W_UK)" in dec and "out absorb (W_UV)" in dec
    # absorbed decode reads the latent once: 4 sequences x 1,000 tokens x 576 elements
    assert dec["latent attention"].cache_elems == 4 * 1000 * 576


def test_every_layer_kind_of_every_preset_has_ops():
    for key in ("gemma3-27b", "deepseek-v3", "jamba", "nemotron-h-8b", "mamba2-2.7b", "llama4-maverick", "phi2",
                "pythia-6.9b", "gpt-oss-20b"):
        for report in layer_reports(key, "h100-sxm", "decode", context=2048):
            assert report.prediction.total_s > 0 and report.layer_count >= 1
        p = predict_model(key, "h100-sxm", "prefill", 512)
        assert np.isfinite(p.time_s) and p.time_s > 0


# ---------------------------------------------------------------------------------------------
# Loaders: refusals and notes
# ---------------------------------------------------------------------------------------------

TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "torch_dtype": "bfloat16"}


def test_unknown_model_type_is_refused_by_name():
    with pytest.raises(RooflineError) as err:
        from_hf_config(dict(TINY_LLAMA, model_type="phi3small"))
    assert "'phi3small'" in str(err.value) and "llama" in str(err.value) and "jamba" in str(err.value)
    with pytest.raises(RooflineError, match="model_type"):
        from_hf_config({k: v for k, v in TINY_LLAMA.items() if k != "model_type"})


def test_a_key_the_loader_does_not_know_is_said():
    m = from_hf_config(dict(TINY_LLAMA, fancy_new_attention=True))
    assert m.ignored_keys == ("fancy_new_attention",)
    assert m.notes == ("config key 'fancy_new_attention' not understood: ignored",)  # the words a report prints
    # Llama reads no sliding window (LlamaAttention has none): said, not applied
    m = from_hf_config(dict(TINY_LLAMA, sliding_window=16))
    assert "sliding_window" in m.notes[0] and not m.kinds[0].mixer.span


def test_gemma_ties_by_default():
    # Gemma 2 9B with the key absent (as published): tied; untied adds the 256,000 x 3,584 head
    cfg = json.loads(json.dumps(dict(model_type="gemma2", hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
                                     num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=256000)))
    tied, untied = from_hf_config(cfg), from_hf_config(dict(cfg, tie_word_embeddings=False))
    assert count_params(tied)["total"] == 9_241_705_984  # KerasHub gemma2_9b_en
    assert count_params(untied)["total"] - count_params(tied)["total"] == 256000 * 3584


def test_gemma2_soft_capping_is_said_not_passed_silently():
    # Gemma 2 9B publishes attn_logit_softcapping 50.0 and final_logit_softcapping 30.0. cap * tanh(x / cap) is
    # 3 FLOPs a score against 4 x 256 + 5 = 1,029 (0.3%) and a logit against the head's 2 x 3,584 (0.04%)
    cfg = dict(model_type="gemma2", hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
               num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=256000,
               attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
    notes = " | ".join(from_hf_config(cfg).notes)
    assert "attn_logit_softcapping 50" in notes and "0.29% of attention" in notes
    assert "final_logit_softcapping 30" in notes and "0.042% of the LM head" in notes
    assert from_hf_config(cfg).ignored_keys == ()
    assert not any("softcapping" in n for n in from_hf_config(dict(cfg, attn_logit_softcapping=None,
                                                                   final_logit_softcapping=None)).notes)
    for bad in (-1, 0, "50", True, float("nan")):
        with pytest.raises(RooflineError, match=f"attn_logit_softcapping must be a positive number.*{bad!r}"[:60]):
            from_hf_config(dict(cfg, attn_logit_softcapping=bad))
    # a family whose attention has no soft-capping (HF's Qwen2 ignores the key): reported, not read
    qwen = dict(TINY_LLAMA, model_type="qwen2", attn_logit_softcapping=50.0)
    assert from_hf_config(qwen).ignored_keys == ("attn_logit_softcapping",)


def test_nested_text_config_is_read_and_the_vision_tower_said():
    m = from_hf_config({"model_type": "gemma3", "text_config": dict(TINY_LLAMA, model_type="gemma3_text"),
                        "vision_config": {"hidden_size": 8}})
    assert m.model_type == "gemma3_text" and m.omitted[0].part == "vision"
    # a key neither the wrapper nor its text model reads: the wrapper's first, then the text model's
    both = from_hf_config({"model_type": "gemma3", "text_config": dict(TINY_LLAMA, model_type="gemma3_text", inner_thing=1),
                           "vision_config": {"hidden_size": 8}, "outer_thing": 2})
    assert both.ignored_keys == ("outer_thing", "inner_thing")
    with pytest.raises(RooflineError, match="text_config"):
        from_hf_config({"model_type": "llama4", "vision_config": {}})


def test_unknown_quantisation_is_refused_by_name():
    with pytest.raises(RooflineError, match="'hqq'"):
        from_hf_config(dict(TINY_LLAMA, quantization_config={"quant_method": "hqq"}))
    # fp8 with 128 x 128 blocks: 1 byte a weight + a 4-byte scale per block; TINY's attention matrices q, o
    # (64 x 64) and k, v (32 x 64) are one block each: (12,288 + 4 x 4) / 12,288 weights
    m = from_hf_config(dict(TINY_LLAMA, quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]}))
    assert m.storage.width("attention", 2.0) == (12288 + 16) / 12288 and m.storage.width("embedding", 2.0) == 2.0


def test_every_supported_family_has_a_preset_or_a_test():
    presets = {m.model_type for m in __import__("roofline.transformer", fromlist=["list_models"]).list_models()}
    tested_here = {"gemma", "gemma3", "llama4", "qwen2_moe", "deepseek_v2", "kimi_k2", "mamba2", "minimax_m2",
                   "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_vl_text", "qwen3_vl_moe_text"}  # test_hybrid_linear
    tested_here |= {"mimo", "mimo_v2_flash", "nemotron-nas", "step3p7"}  # tests/test_new_families.py
    tested_here |= {"gemma4_text", "kimi_k3", "kimi_linear", "deepseek_v4", "deepseek_ref"}  # tests/test_new_families_2.py
    tested_here |= {"deepseek_v32", "glm_moe_dsa", "glm4_moe"}  # tests/test_sparse_attention.py
    tested_here |= {"olmo2"}  # test_olmo2_7b_counts_by_hand_to_its_published_7_30b
    tested_here |= {"minimax_m3"}  # tests/test_msa.py
    tested_here |= {"kimi_linear"}  # tests/test_kimi_linear.py
    tested_here |= {"falcon_h1"}  # tests/test_falcon_h1.py
    assert set(SUPPORTED) <= presets | tested_here


def test_mamba2_transformers_format_matches_the_mamba_ssm_one():
    # the transformers form of state-spaces/mamba2-2.7b's shapes (Mamba2Config keys)
    hf = from_hf_config({"model_type": "mamba2", "hidden_size": 2560, "num_hidden_layers": 64, "num_heads": 80,
                         "head_dim": 64, "state_size": 128, "n_groups": 1, "expand": 2, "conv_kernel": 4,
                         "vocab_size": 50288, "tie_word_embeddings": True})
    assert count_params(hf) == count_params(get_model("mamba2-2.7b"))


def test_deepseek_v2_and_kimi_k2_reuse_the_deepseek_loader():
    cfg = {"model_type": "kimi_k2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "vocab_size": 100, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8,
           "q_lora_rank": 0, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
           "intermediate_size": 128, "first_k_dense_replace": 1, "n_shared_experts": 1}
    m = from_hf_config(cfg)
    # layer 0 dense, layer 1 MoE; MLA: q 64 x 4 x 12 + kv_a 64 x 20 + norm 16 + kv_b 16 x 4 x 16 + o 4 x 8 x 64
    assert [layer.is_moe for layer in m.layers] == [False, True]
    assert m.layers[0].mixer.params(64) == 64 * 48 + 64 * 20 + 16 + 16 * 64 + 32 * 64


def test_a_uniform_model_built_by_hand():
    layer = Layer(Attention(4, 2, 16), MLP(128))
    m = Model("tiny", 64, 100, (layer,), (0, 0))
    # per layer: q 64 x 64 + k, v 64 x 32 each + o 64 x 64 = 12,288; MLP 3 x 64 x 128 = 24,576;
    # 2 norms x 64. Embedding and LM head 100 x 64 each; final norm 64.
    assert count_params(m)["total"] == 2 * (12288 + 24576 + 128) + 2 * 6400 + 64


# TINY_LLAMA as GPTQ int4, group 128, stores each matrix (N out, K in): N K / 2 B of values, N ceil(K / 128) groups of
# an fp16 scale and a 4-bit zero (2.5 B), and g_idx, 4 B per input. Attention: q and o (64 x 64) 2,048 + 64 x 2.5 +
# 256 = 2,464 B each; k and v (32 x 64) 1,024 + 80 + 256 = 1,360 each: 7,648 B for 12,288 weights. MLP: gate and up
# (128 x 64) 4,096 + 320 + 256 = 4,672 each; down (64 x 128) 4,096 + 160 + 512 = 4,768: 14,112 B for 24,576 weights.
GPTQ_ATTENTION, GPTQ_MLP = 2 * 2464 + 2 * 1360, 2 * 4672 + 4768


def test_quantisation_skip_lists_and_bad_fields():
    base = dict(TINY_LLAMA, quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 128,
                                                 "modules_to_not_convert": ["model.layers.*.mlp"]})
    m = from_hf_config(base)
    # the skipped MLP stays bf16; parts the model lacks are not listed; attention as GPTQ stores it (GPTQ_ATTENTION)
    assert [p for p, _, _ in m.storage.parts] == ["attention"]
    assert m.storage.width("mlp", 2.0) == 2.0 and m.storage.width("attention", 2.0) == GPTQ_ATTENTION / 12288
    for bad in ({"bits": 0}, {"group_size": "x"}, {"modules_to_not_convert": ["model.weird_block"]}):
        with pytest.raises(RooflineError):
            from_hf_config(dict(TINY_LLAMA, quantization_config={"quant_method": "gptq", **bad}))
    with pytest.raises(RooflineError, match="weight_block_size"):
        from_hf_config(dict(TINY_LLAMA, quantization_config={"quant_method": "fp8", "weight_block_size": [0, 128]}))
    with pytest.raises(RooflineError, match="has none"):  # mxfp4 quantises experts; a dense model has none
        from_hf_config(dict(TINY_LLAMA, quantization_config={"quant_method": "mxfp4"}))


def test_a_skip_list_naming_one_layer_keeps_that_layer_only_and_names_no_part_the_model_lacks():
    cfg = dict(TINY_LLAMA, num_hidden_layers=4)
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    one = from_hf_config(dict(cfg, quantization_config=dict(q, modules_to_not_convert=["model.layers.0.mlp"])))
    # GPTQ_MLP bytes a layer's MLP as stored; one MLP of four (equal layers) at bf16's 2 bytes a weight
    assert one.storage.width("mlp", 2.0) == pytest.approx((2 * 24576 + 3 * GPTQ_MLP) / (4 * 24576))
    assert one.storage.width("attention", 2.0) == GPTQ_ATTENTION / 12288
    said = " ".join(one.notes)
    assert "mlp in layer(s) 0" in said and "experts" not in said  # a dense model: no experts to name
    every = from_hf_config(dict(cfg, quantization_config=dict(
        q, modules_to_not_convert=[f"model.layers.{i}.mlp" for i in range(4)])))
    assert every.storage.width("mlp", 2.0) == 2.0  # all four layers named: the whole MLP kept
    with pytest.raises(RooflineError, match="layer 9"):
        from_hf_config(dict(cfg, quantization_config=dict(q, modules_to_not_convert=["model.layers.9.mlp"])))
    # one matrix named: that matrix kept, in that layer only (down_proj: 4,768 B as GPTQ stores it, 64 x 128 x 2 at bf16)
    part = from_hf_config(dict(cfg, quantization_config=dict(q, modules_to_not_convert=["model.layers.1.mlp.down_proj"])))
    assert part.storage.width("mlp", 2.0) == pytest.approx((4 * GPTQ_MLP - 4768 + 64 * 128 * 2) / (4 * 24576))
    assert "mlp in layer(s) 1" in " ".join(part.notes)
    # a vision tower's modules (Qwen2.5-VL AWQ skips "visual") are not priced: nothing changes, nothing refused
    vis = from_hf_config(dict(cfg, quantization_config=dict(q, modules_to_not_convert=["visual"])))
    assert vis.storage.width("mlp", 2.0) == GPTQ_MLP / 24576


def test_what_a_reviewer_found_assumed_silently_is_refused_or_said():
    with pytest.raises(RooflineError, match="no bits"):  # GPTQ without bits: the width is not guessed
        from_hf_config(dict(TINY_LLAMA, quantization_config={"quant_method": "gptq"}))
    m = from_hf_config(dict(TINY_LLAMA, quantization_config={"quant_method": "gptq", "bits": 4}))
    assert any("no group_size given: 128" in n for n in m.notes)
    for bad in ("4096", 0, True):
        with pytest.raises(RooflineError, match="max_position_embeddings"):
            from_hf_config(dict(TINY_LLAMA, max_position_embeddings=bad))
    oss = {"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "num_local_experts": 4,
           "num_experts_per_tok": 2, "intermediate_size": 32}
    assert from_hf_config(oss).layers[0].mixer.window == 128  # absent: GptOssConfig's default
    with pytest.raises(RooflineError, match="sliding_window is null"):
        from_hf_config(dict(oss, sliding_window=None))
    moe = dict(TINY_LLAMA, model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    assert [layer.is_moe for layer in from_hf_config(dict(moe, mlp_only_layers=[1])).layers] == [True, False]
    with pytest.raises(RooflineError, match="mlp_only_layers"):
        from_hf_config(dict(moe, mlp_only_layers=[5]))
    assert any("rope_theta" in n and "is not a number, not a finite value" in n
               for n in from_hf_config(dict(TINY_LLAMA, rope_theta=float("nan"))).notes)
    gpt2 = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100, "torch_dtype": "float32"}
    assert from_hf_config(dict(gpt2, n_ctx=1024)).notes == ()  # n_ctx = n_positions (1024 default): read, nothing to say
    # GPT-2's own config names no torch_dtype (its weights are fp32): the bf16 taken is said, and no
    # 'the checkpoint stores bf16' is claimed beside a trace at fp32 (a reviewer saw it asserted)
    bare = {k: v for k, v in gpt2.items() if k != "torch_dtype"}
    assert any(n.startswith("the config names no torch_dtype: weights taken as bf16") for n in from_hf_config(bare).notes)
    from roofline.blocks import storage_note
    assert from_hf_config(bare).storage.assumed and storage_note(from_hf_config(bare), "fp32") is None
    assert storage_note(from_hf_config(dict(bare, torch_dtype="bfloat16")), "fp32").startswith("every weight is priced at fp32")
    assert "n_ctx 512 differs" in from_hf_config(dict(gpt2, n_ctx=512)).notes[0]
    with pytest.raises(RooflineError, match="not divisible"):
        from_hf_config(dict(gpt2, n_head=3))


@pytest.mark.parametrize("key, value", [("num_attention_heads", 0), ("intermediate_size", float("inf")),
                                        ("hidden_size", float("nan")), ("num_hidden_layers", 10**7), ("num_hidden_layers", 10**8),
                                        ("vocab_size", -3), ("hidden_size", "4096")])
def test_bad_config_values_are_refused_by_key(key, value):
    with pytest.raises(RooflineError, match=key if key != "num_hidden_layers" else "layers"):
        from_hf_config(dict(TINY_LLAMA, **{key: value}))


def test_gemma3_text_takes_the_class_sizes_a_config_omits():
    # Gemma 3 4B's text_config gives hidden, intermediate, layers and the window but not the heads:
    # Gemma3TextConfig's 8 heads, 4 kv heads, head_dim 256 apply
    m = from_hf_config({"model_type": "gemma3", "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                                                                "num_hidden_layers": 34, "sliding_window": 1024}})
    a = m.kinds[0].mixer
    assert (a.heads, a.kv_heads, a.head_dim, m.vocab) == (8, 4, 256, 262208)


def test_hostile_config_files_are_one_line_errors(tmp_path):
    import os

    from roofline.transformer import load_hf_config

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 100_000)
    huge = tmp_path / "huge.json"
    huge.write_text('{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    for path, needle in ((fifo, "not a regular file"), (deep, "could not be read"), (huge, "could not be read"),
                         (binary, "not a UTF-8")):
        with pytest.raises(RooflineError, match=needle):
            load_hf_config(path)


def test_qwen2_sliding_window_applies_only_with_use_sliding_window():
    cfg = dict(TINY_LLAMA, model_type="qwen2", num_hidden_layers=4, sliding_window=16, max_window_layers=2)
    assert {layer.mixer.span for layer in from_hf_config(cfg).layers} == {0}  # use_sliding_window absent: False
    on = from_hf_config(dict(cfg, use_sliding_window=True))
    assert [layer.mixer.span for layer in on.layers] == [0, 0, 16, 16]  # layers from max_window_layers on
    assert on.notes == () and from_hf_config(cfg).notes == ()


# MiniMax-M2.5's config.json as published (MiniMaxAI/MiniMax-M2.5; the keys that shape the weights)
MINIMAX_M25 = {"model_type": "minimax_m2", "num_hidden_layers": 62, "hidden_size": 3072, "num_attention_heads": 48,
               "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 1536, "vocab_size": 200064,
               "num_experts_per_tok": 8, "num_local_experts": 256, "max_position_embeddings": 196608,
               "rotary_dim": 64, "hidden_act": "silu", "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
               "use_qk_norm": True, "qk_norm_type": "per_layer", "use_routing_bias": True, "use_mtp": True,
               "mtp_transformer_layers": 1, "num_mtp_modules": 3, "shared_intermediate_size": 0,
               "scoring_func": "sigmoid", "torch_dtype": "bfloat16",
               "quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn", "activation_scheme": "dynamic",
                                       "weight_block_size": [128, 128],
                                       "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}}


def test_minimax_m2_counts_by_hand_and_to_its_published_active_parameters():
    """Per layer: q 3072 x 6144, k and v 3072 x 1024 each, o 6144 x 3072 = 44,040,192; the q/k norms
    across all heads (per_layer) 6,144 + 1,024; router 3072 x 256 = 786,432; 256 experts of 3 x 3072 x
    1536 = 3,623,878,656; two norms 6,144. Embedding and LM head 200,064 x 3072 each; final norm 3,072.
    Active: 8 experts (113,246,208) instead of 256. MiniMax's report (M2 series, M2.5 the same
    backbone) gives 9.8B activated per token: ours without the embedding and LM head."""
    m = from_hf_config(MINIMAX_M25)
    per_layer = 44_040_192 + 6_144 + 1_024 + 786_432 + 3_623_878_656 + 6_144
    emb = 2 * 200_064 * 3072
    c = count_params(m)
    assert c["total"] == 62 * per_layer + emb + 3072
    active = 62 * (per_layer - 3_623_878_656 + 8 * 3 * 3072 * 1536) + emb + 3072
    from roofline.transformer import active_params

    assert active_params(m) == active
    assert abs((active - emb) / 9.8e9 - 1) < 0.005  # 9.80B without the embedding and LM head
    assert m.leaves_out("mtp")
    # the skip list's bare "gate" is the router (kept bf16), its correction bias a buffer
    assert m.storage.width("router", 2.0) == 2.0 and m.storage.width("experts", 2.0) < 1.1


def test_kimi_k25_is_kimi_k2s_language_model_in_a_text_config():
    inner = {"model_type": "kimi_k2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "vocab_size": 100, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8,
             "q_lora_rank": 0, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
             "intermediate_size": 128, "first_k_dense_replace": 1, "n_shared_experts": 1}
    wrapped = from_hf_config({"model_type": "kimi_k25", "text_config": inner, "vision_config": {"hidden_size": 8}})
    assert count_params(wrapped) == count_params(from_hf_config(inner)) and wrapped.omitted[0].part == "vision"
    # what is left out is typed (part, key); the report's line is rendered from its words
    (vision,) = wrapped.omitted
    assert (vision.part, vision.key) == ("vision", "vision_config") and not wrapped.leaves_out("mtp")
    assert wrapped.header_lines()[0] == "left out: " + vision.words
    assert model_summary(wrapped)["omitted"] == [vision.words]
    with pytest.raises(ValueError):
        LeftOut("a tower", "tower_config", "a part no code knows")


# GLM-4.5-Air's config.json (zai-org/GLM-4.5-Air on Hugging Face), its architecture keys
GLM45_AIR = {"model_type": "glm4_moe", "attention_bias": True, "first_k_dense_replace": 1, "head_dim": 128,
             "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 10944, "max_position_embeddings": 131072,
             "moe_intermediate_size": 1408, "n_group": 1, "n_routed_experts": 128, "n_shared_experts": 1,
             "norm_topk_prob": True, "num_attention_heads": 96, "num_experts_per_tok": 8, "num_hidden_layers": 46,
             "num_key_value_heads": 8, "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5,
             "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 1000000, "routed_scaling_factor": 1.0,
             "tie_word_embeddings": False, "topk_group": 1, "torch_dtype": "bfloat16", "use_qk_norm": False,
             "vocab_size": 151552}


def test_glm45_air_counts_to_its_published_106b():
    # GLM-4.5 README (github.com/zai-org/GLM-4.5; arXiv:2508.06471): GLM-4.5-Air "106 billion total
    # parameters and 12 billion active". By hand: attention q 4,096 x 96 x 128 = 50,331,648, k and v
    # 2 x 4,096 x 8 x 128 = 8,388,608, o 50,331,648, q/k/v biases 12,288 + 2,048: 109,066,240 x 46 =
    # 5,017,047,040; 1 dense MLP 3 x 4,096 x 10,944 = 134,479,872; 45 MoE layers x ((128 + 1 shared) x
    # 3 x 4,096 x 1,408 + router 128 x 4,096) = 45 x 2,232,418,304 = 100,458,823,680; norms 2 x 4,096
    # x 46 + 4,096 = 380,928; embedding and head 2 x 151,552 x 4,096 = 1,241,513,984: 106,852,245,504,
    # which the README truncates to 106B
    m = from_hf_config(GLM45_AIR, "GLM-4.5-Air")
    total = 5_017_047_040 + 134_479_872 + 100_458_823_680 + 380_928 + 1_241_513_984
    assert count_params(m)["total"] == total == 106_852_245_504
    assert [layer.is_moe for layer in m.layers[:2]] == [False, True]
    assert m.layers[1].mlp.shared_d_ff == 1408 and m.layers[0].mixer.qkv_bias and not m.layers[0].mixer.out_bias
    # active: 8 routed + the shared expert + router a MoE layer, 45 x 156,237,824 = 7,030,702,080; with
    # attention, the dense layer and the norms 12,182,609,920 without either embedding table (the README's 12B)
    from roofline.transformer import active_params

    assert active_params(m, embeddings=False) - 151_552 * 4096 == 7_030_702_080 + 5_151_526_912 + 380_928 == 12_182_609_920
    assert m.leaves_out("mtp") and not m.notes
    # GLM-4.5's per-head q/k norm (use_qk_norm): 2 x 128 more a layer
    normed = from_hf_config(dict(GLM45_AIR, use_qk_norm=True), "x")
    assert count_params(normed)["total"] - total == 46 * 256


# OLMo 2 7B's config.json (huggingface.co/allenai/OLMo-2-1124-7B), its keys inline
OLMO2_7B = {"architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
            "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
            "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "olmo2",
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "pad_token_id": 100277,
            "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False,
            "torch_dtype": "float32", "use_cache": True, "vocab_size": 100352}


def test_olmo2_7b_counts_by_hand_to_its_published_7_30b():
    # https://huggingface.co/allenai/OLMo-2-1124-7B: 7.30B parameters (the card's safetensors total).
    # By hand: attention 4 x 4,096 x 4,096 = 67,108,864 with q_norm and k_norm over the whole
    # projection, 4,096 + 4,096; MLP 3 x 4,096 x 11,008 = 135,266,304; 2 norms 8,192: 202,391,552 a
    # layer x 32 = 6,476,529,664; embedding and untied head 2 x 100,352 x 4,096 = 822,083,584; final
    # norm 4,096: 7,298,617,344
    m = from_hf_config(OLMO2_7B, "OLMo-2-7B")
    assert count_params(m)["total"] == 6_476_529_664 + 822_083_584 + 4_096 == 7_298_617_344
    assert round(count_params(m)["total"] / 1e9, 2) == 7.30
    assert m.layers[0].mixer.qk_norm == "rmsnorm_full" and m.layers[0].n_norms == 2 and not m.notes
    # grouped-query OLMo 2 (the 32B's 8 kv heads): k_norm is K d wide, 8 x 128 = 1,024
    gqa = from_hf_config(dict(OLMO2_7B, num_key_value_heads=8), "x")
    assert gqa.layers[0].mixer.params(4096) == 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 4096 + 1024
