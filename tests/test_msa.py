"""MiniMax Sparse Attention (MSA, MiniMax-M3): grouped-query attention whose block indexer picks each
query's top sparse_topk_blocks blocks of sparse_block_size keys. Truths: MiniMax-M3's card
(https://huggingface.co/MiniMaxAI/MiniMax-M3: "~428B parameters and ~23B activated") and hand
arithmetic in the comments. The config is the published config.json's keys (MiniMaxAI/MiniMax-M3),
inline so the tests stand without aiconfigurator-core."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.blocks import SPARSE_GQA, block_kernels
from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.plan.memory import kv_bytes_read_per_sequence
from roofline.plan.step import StepCost
from roofline.transformer import (active_params, attention_flops_per_token_forward, count_params, kv_cache_bytes_per_token)

DENSE_3 = [0] * 3 + [1] * 57
MINIMAX_M3 = {
    "model_type": "minimax_m3", "architectures": ["MiniMaxM3ForCausalLM"], "attention_output_gate": False,
    "dense_intermediate_size": 12288, "first_k_dense_replace": 3, "head_dim": 128, "hidden_act": "swigluoai",
    "hidden_size": 6144, "intermediate_size": 3072, "max_position_embeddings": 1048576, "moe_intermediate_size": 3072,
    "moe_layer_freq": DENSE_3, "n_shared_experts": 1, "num_attention_heads": 64, "num_experts_per_tok": 4,
    "num_hidden_layers": 60, "num_key_value_heads": 4, "num_local_experts": 128, "num_mtp_modules": 7,
    "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5, "qk_norm_type": "per_head", "rms_norm_eps": 1e-06,
    "rope_theta": 5000000, "rotary_dim": 64, "routed_scaling_factor": 2.0, "scoring_func": "sigmoid",
    "shared_intermediate_size": 3072,
    "sparse_attention_config": {"sparse_attention_freq": DENSE_3, "sparse_block_size": 128,
                                "sparse_disable_index_value": DENSE_3, "sparse_index_dim": 128, "sparse_init_block": 0,
                                "sparse_local_block": 1, "sparse_num_index_heads": 4, "sparse_score_type": "max",
                                "sparse_topk_blocks": 16, "use_sparse_attention": True},
    "swiglu_alpha": 1.702, "swiglu_limit": 7.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_gemma_norm": True, "use_qk_norm": True, "use_routing_bias": True, "vocab_size": 200064}


@pytest.fixture(scope="module")
def m3():
    return from_hf_config(MINIMAX_M3, "MiniMax-M3")


def test_minimax_m3_counts_by_hand_and_against_the_card(m3):
    """Attention, every layer: q and o 64 x 128 x 6,144 = 50,331,648 each, k and v 4 x 128 x 6,144 =
    3,145,728 each, q/k norms 128 + 128: 106,955,008. MSA's indexer on layers 3-59: index_q_proj
    4 x 128 x 6,144 = 3,145,728, index_k_proj 128 x 6,144 = 786,432, norms 128 + 128: 3,932,416.
    Layers 0-2: a dense MLP 3 x 6,144 x 12,288 = 226,492,416. Layers 3-59: 128 experts x 3 x 6,144 x
    3,072 = 7,247,757,312, a shared expert 56,623,104, a router 128 x 6,144 = 786,432. Two norms a
    layer (12,288), embedding and LM head 200,064 x 6,144 each, a final norm 6,144:
    3 x 333,459,712 + 57 x 7,416,066,560 + 2,458,386,432 + 6,144 = 426,174,565,632 (vLLM's
    MiniMax-M3 modules, the same weights). The card's ~428B also holds the vision tower (CLIP-style, 32
    layers of 1,280: about 0.63B, and its projector) and the MTP modules, both left out here: the
    language model is 0.43% under it. Active: the 4 of 128 experts, 25,962,466,560 with the
    embedding and LM head; 23,504,080,128 without, the card's ~23B."""
    n = count_params(m3)
    assert n["attention"] == 60 * 106_955_008 + 57 * 3_932_416
    assert n["total"] == 3 * 333_459_712 + 57 * 7_416_066_560 + 2_458_386_432 + 6_144 == 426_174_565_632
    assert 0 < 428e9 - n["total"] < 0.005 * 428e9
    assert active_params(m3) == 25_962_466_560
    assert active_params(m3) - 2 * 200_064 * 6144 == 23_504_080_128
    assert m3.leaves_out("mtp")
    assert not m3.notes  # every published key read or cost-neutral
    kinds = {layer.mixer.kind for layer in m3.layers}
    assert kinds == {"full attention", "sparse attention (MSA top-16 blocks of 128, indexer 4x128)"}


def test_msa_caches_keys_values_and_the_index_key(m3):
    # layers 0-2: 4 kv heads x (128 + 128) = 1,024 a token; MSA layers 1,024 + the index key 128 = 1,152:
    # (3 x 1,024 + 57 x 1,152) x 2 bytes = 137,472
    assert kv_cache_bytes_per_token(m3) == (3 * 1024 + 57 * 1152) * 2 == 137_472
    # a decode step at 100,000 reads every index key but only 2,048 keys and values an MSA layer:
    # 137,472 x 100,000 less 57 x (100,000 - 2,048) x 1,024 x 2 bytes
    whole = 137_472 * 100_000
    assert float(kv_bytes_read_per_sequence(m3, 100_000)) == whole - 57 * (100_000 - 2048) * 1024 * 2
    assert float(kv_bytes_read_per_sequence(m3, 1000)) == 137_472 * 1000  # under k: all of it
    # one GPU of 4: one kv head (256 a token) and the replicated index key (128): 3 x 256 + 57 x 384 = 22,656
    # elements a token, less 57 x (100,000 - 2,048) x 256 unread, x 2 bytes
    assert float(kv_bytes_read_per_sequence(m3, 100_000, tensor_parallel=4)) == 2 * (
        22_656 * 100_000 - 57 * (100_000 - 2048) * 256)


def test_msa_decode_attends_k_keys_and_the_indexer_scores_all(m3):
    ops = {k.name: k for k in block_kernels(m3, "decode", batch=1, context=100_000, layer=3)}
    core = ops[SPARSE_GQA]
    # 2,048 of 100,000 keys: 64 heads x 2,048 x (2 x 128 + 2 x 128 + 5 softmax) = 67,764,224 FLOPs; bytes
    # 2 x (q 64 x 128 + k and v 4 x 2,048 x 128 each + out 64 x 128) = 4,227,072
    assert core.flops == 64 * 2048 * (512 + 5) == 67_764_224
    assert core.bytes == 2 * (8192 + 2 * 1_048_576 + 8192) == 4_227_072
    assert core.cache_elems == 4 * 2048 * 256
    # the indexer: 4 heads x (2 x 128 + 1 for the block max) x 100,000 keys, reading 100,000 index keys of 128
    score = ops["indexer block scores"]
    assert score.flops == 4 * 257 * 100_000 and score.cache_elems == 100_000 * 128
    assert ops["top-k blocks"].flops == 100_000 / 128
    assert ops["index q/k proj"].flops == 2 * 6144 * (4 * 128 + 128)
    full = {k.name: k for k in block_kernels(m3, "decode", batch=1, context=100_000, layer=0, attention="flash")}
    assert "flash attention" in full and "indexer block scores" not in full
    # forward FLOPs per token at 100,000 (attention's context term): 3 full layers 2 x 64 x 256 x 100,000,
    # 57 MSA layers 2 x 64 x 256 x 2,048 and their indexers 2 x 4 x 128 x 100,000
    assert attention_flops_per_token_forward(m3, 100_000) == pytest.approx(
        3 * 32768 * 100_000 + 57 * (32768 * 2048 + 1024 * 100_000), rel=1e-12)


def test_msa_prefill_attends_min_p_k_keys_a_query(m3):
    # 4,096 prompt tokens: 2,048 x 2,049 / 2 + 2,048 x 2,048 = 6,292,480 pairs a head (full attention: 4,096^2 / 2,
    # the causal half as the dense count takes it, 8,388,608)
    sparse = {k.name: k for k in block_kernels(m3, "prefill", 4096, layer=3)}[SPARSE_GQA]
    dense = {k.name: k for k in block_kernels(m3, "prefill", 4096, layer=0, attention="flash")}["flash attention"]
    assert sparse.flops == 64 * 517 * 6_292_480 and dense.flops == 64 * 517 * 4096 * 4096 // 2


def test_serving_prices_msa_at_k_past_k(m3):
    # TP 4: 16 heads and 1 kv head a GPU; 4 sequences at 100,000 read 2,048 keys and values each an MSA layer:
    # 2 x (4 x 16 x 128 + 2 x 4 x 2,048 x 128 + 4 x 16 x 128) = 4,227,072 bytes, x 57 layers
    s = StepCost(m3, "h200", tensor_parallel=4, max_tokens=4096, max_seqs=64)
    ops = [o for o in s.ops([100_000] * 4) if o.part == "decode" and SPARSE_GQA in o.name]
    assert sum(o.count for o in ops) == 57
    assert sum(o.bytes for o in ops) == pytest.approx(57 * 4_227_072, rel=1e-9)
    at = {S: sum(o.bytes for o in s.ops([S] * 4) if o.part == "decode" and SPARSE_GQA in o.name)
          for S in (1000, 2048, 50_000)}
    assert at[1000] < at[2048] == pytest.approx(at[50_000], rel=1e-12)
    with pytest.raises(RooflineError, match="MiniMax Sparse Attention"):
        StepCost(m3, "h200", tensor_parallel=4, verify_tokens=3)


def test_minimax_m3_refuses_what_it_does_not_model():
    sc = MINIMAX_M3["sparse_attention_config"]
    for extra, words in (({"sparse_init_block": 1}, "sparse_init_block"), ({"sparse_score_type": "sum"}, "sum"),
                         ({"sparse_disable_index_value": [0] * 60}, "index value"), ({"new_knob": 1}, "new_knob")):
        with pytest.raises(RooflineError, match=words):
            from_hf_config(dict(MINIMAX_M3, sparse_attention_config=dict(sc, **extra)), "M3")
    for extra, words in (({"attention_output_gate": True}, "attention_output_gate"), ({"n_shared_experts": 2}, "2"),
                         ({"moe_intermediate_size": 1024}, "moe_intermediate_size"),
                         ({"first_k_dense_replace": 4}, "first_k_dense_replace")):
        with pytest.raises(RooflineError, match=words):
            from_hf_config(dict(MINIMAX_M3, **extra), "M3")


def test_minimax_m3_vl_nests_the_same_language_model_and_its_nvfp4_export_prices_as_listed(m3):
    text = {k: v for k, v in MINIMAX_M3.items() if k not in ("model_type", "architectures")}
    vl = from_hf_config({"model_type": "minimax_m3_vl", "text_config": text, "vision_config": {"hidden_size": 1280},
                         "image_grid_pinpoints": [[336, 336]], "projector_hidden_size": 6144}, "M3-VL")
    assert count_params(vl)["total"] == count_params(m3)["total"]
    assert vl.leaves_out("vision")
    core = pytest.importorskip("aiconfigurator_core")
    import os

    from roofline.transformer import get_model

    nv = get_model(os.path.join(os.path.dirname(core.__file__), "model_configs", "nvidia--MiniMax-M3-NVFP4_config.json"))
    # attention at MXFP8 (1 byte a weight + a uint8 scale per 32: 33/32 bytes), the q/k and index norms at bf16:
    # full layers 106,954,752 weights and 256 norm scales, MSA layers 110,886,912 and 512
    stored = 3 * (106_954_752 * 33 / 32 + 256 * 2) + 57 * (110_886_912 * 33 / 32 + 512 * 2)
    assert nv.storage.width("attention", 2.0) == pytest.approx(stored / (60 * 106_955_008 + 57 * 3_932_416), rel=1e-12)
    assert {p for p, _, _ in nv.storage.parts} == {"attention", "mlp", "experts", "shared_experts"}
