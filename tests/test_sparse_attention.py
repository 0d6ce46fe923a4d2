"""DeepSeek Sparse Attention (DSA): MLA plus a lightning indexer that picks each query's top-k
latent tokens (DeepSeek-V3.2-Exp report; DeepSeek-V3.2, GLM-5). Truths: the published parameter
counts (URLs below) and hand arithmetic in the comments.

The configs are the published config.json keys (deepseek-ai/DeepSeek-V3.2, zai-org/GLM-5 and
zai-org/GLM-5.2 on Hugging Face), inline so the tests stand without aiconfigurator-core; the
quantization_config is left out (weights priced with --weights where a test needs a width)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.architecture import LatentAttention
from roofline.blocks import SPARSE_ATTENTION, block_kernels
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.plan.step import StepCost
from roofline.transformer import (active_params, attention_flops_per_token_forward, count_params, kv_cache_bytes_per_token,
                                 matmul_params)

DEEPSEEK_V32 = {
    "model_type": "deepseek_v32", "architectures": ["DeepseekV32ForCausalLM"], "attention_bias": False,
    "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168, "index_head_dim": 128,
    "index_n_heads": 64, "index_topk": 2048, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8,
    "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 129280, "ep_size": 1,
}

GLM5 = {
    "model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"], "attention_bias": False, "dtype": "bfloat16",
    "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu", "head_dim": 64, "hidden_size": 6144,
    "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048, "indexer_rope_interleave": True,
    "intermediate_size": 12288, "kv_lora_rank": 512, "max_position_embeddings": 202752, "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 78, "num_key_value_heads": 64,
    "num_nextn_predict_layers": 1, "pad_token_id": 154820, "pretraining_tp": 1, "q_lora_rank": 2048,
    "qk_head_dim": 256, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "rope_interleave": True,
    "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}, "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc",
    "use_cache": True, "v_head_dim": 256, "vocab_size": 154880,
}

# GLM-5.2 (zai-org/GLM-5.2 config.json): GLM-5's sizes, 3 dense layers by mlp_layer_types, and IndexCache
# (arXiv:2603.12201): layers 0-2 and every 4th from 6 run the indexer, the others reuse its top-k
_GLM52_INDEXERS = ["full"] * 3 + [("full" if (i - 2) % 4 == 0 else "shared") for i in range(3, 78)]
GLM52 = dict(GLM5, head_dim=192, index_share_for_mtp_iteration=True, index_skip_topk_offset=3, index_topk_freq=4,
             index_topk_pattern=None, indexer_types=_GLM52_INDEXERS, max_position_embeddings=1048576,
             mlp_layer_types=["dense"] * 3 + ["sparse"] * 75, moe_router_dtype="float32",
             rope_parameters={"rope_theta": 8000000, "rope_type": "default"})

# One DeepSeek-V3.2 indexer (a layer): wq_b 1,536 x (64 x 128) = 12,582,912; wk 7,168 x 128 = 917,504;
# k_norm weight and bias 2 x 128 = 256; weights_proj 7,168 x 64 = 458,752: 13,959,424
V32_INDEXER = 13_959_424
# One GLM-5 indexer: wq_b 2,048 x (32 x 128) = 8,388,608; wk 6,144 x 128 = 786,432; k_norm 256;
# weights_proj 6,144 x 32 = 196,608: 9,371,904
GLM5_INDEXER = 9_371_904


@pytest.fixture(scope="module")
def v32():
    return from_hf_config(DEEPSEEK_V32, "DeepSeek-V3.2")


@pytest.fixture(scope="module")
def glm5():
    return from_hf_config(GLM5, "GLM-5")


def test_the_indexer_counts_by_hand():
    a = LatentAttention(128, 512, 128, 64, 128, 1536, index_topk=2048, index_heads=64, index_head_dim=128)
    assert a.indexer_params(7168) == V32_INDEXER
    dense = LatentAttention(128, 512, 128, 64, 128, 1536)
    assert a.params(7168) - dense.params(7168) == V32_INDEXER
    assert dense.indexer_params(7168) == 0 == dense.index_topk  # without index_topk MLA is as before


def test_deepseek_v32_is_v3_plus_an_indexer_a_layer(v32):
    # DeepSeek-V3 counts to its published 671B main model (test_model_presets); V3.2 adds 61 indexers:
    # 61 x 13,959,424 = 851,524,864
    assert count_params(v32)["total"] == count_params("deepseek-v3")["total"] + 61 * V32_INDEXER
    assert all(k.mixer.index_topk == 2048 and k.mixer.index_heads == 64 for k in v32.kinds)
    assert v32.mtp is not None and v32.mtp.depth == 1  # num_nextn_predict_layers 1: held apart from the total


def test_deepseek_v32_with_its_mtp_module_is_the_hubs_total(v32):
    # https://huggingface.co/deepseek-ai/DeepSeek-V3.2: the Hub's safetensors total is 685.4B, the MTP
    # module included (its own copies of the embedding and head) and the FP8 block scales too
    # (one fp32 per 128 x 128 block: about 671e9 / 16,384 = 0.04B). The MTP module by hand: one MoE
    # layer: MLA q 7,168 x 1,536 + 1,536 + 1,536 x 128 x 192 = 48,760,320, kv 7,168 x 576 + 512 +
    # 512 x 128 x 256 = 20,906,496, o 128 x 128 x 7,168 = 117,440,512; its indexer 13,959,424; experts
    # 256 x 3 x 7,168 x 2,048 = 11,274,289,152, shared 3 x 7,168 x 2,048 = 44,040,192, router
    # 256 x 7,168 = 1,835,008; 2 norms 14,336; eh_proj 2 x 7,168 x 7,168 = 102,760,448; enorm, hnorm,
    # shared_head.norm 21,504; embedding and head 2 x 129,280 x 7,168 = 1,853,358,080
    mtp = (48_760_320 + 20_906_496 + 117_440_512 + V32_INDEXER + 11_274_289_152 + 44_040_192 + 1_835_008 + 14_336
           + 102_760_448 + 21_504 + 1_853_358_080)
    assert abs(count_params(v32)["total"] + mtp + 0.04e9 - 685.4e9) < 0.06e9


def test_glm5_counts_to_its_published_744b(glm5):
    # https://huggingface.co/zai-org/GLM-5 and the GLM-5 report (arXiv:2602.15763): "744B parameters
    # (40B active)". By hand: a layer's MLA q 6,144 x 2,048 + 2,048 + 2,048 x 64 x 256 = 46,139,392,
    # kv 6,144 x 576 + 512 + 512 x 64 x 448 = 18,219,520, o 64 x 256 x 6,144 = 100,663,296, indexer
    # 9,371,904: 174,394,112 x 78 = 13,602,740,736; 3 dense MLPs 3 x 3 x 6,144 x 12,288 = 679,477,248;
    # 75 MoE layers x (256 + 1 shared) x 3 x 6,144 x 2,048 + router 6,144 x 256 = 727,724,851,200;
    # norms 2 x 6,144 x 78 + 6,144 = 964,608; embedding and head 2 x 154,880 x 6,144 = 1,903,165,440
    total = 13_602_740_736 + 679_477_248 + 727_724_851_200 + 964_608 + 1_903_165_440
    assert count_params(glm5)["total"] == total == 743_911_199_232
    assert abs(total - 744e9) < 0.5e9
    # active: 40B counts neither embedding table (39.88B; with the head 40.83B): the card does not say
    assert abs(active_params(glm5, embeddings=False) - 154_880 * 6144 - 40e9) < 0.5e9
    assert glm5.mtp is not None and glm5.mtp.depth == 1  # num_nextn_predict_layers 1: held apart from the total


def test_glm52_shared_layers_have_no_indexer(glm5):
    m = from_hf_config(GLM52, "GLM-5.2")
    shared = [i for i, k in enumerate(m.layers) if not k.mixer.index_heads]
    # 78 layers, 21 full (0, 1, 2, 6, 10, ..., 74): 57 shared, each short one GLM-5 indexer
    assert len(shared) == 57 and 6 not in shared and 3 in shared
    assert count_params(m)["total"] == count_params(glm5)["total"] - 57 * GLM5_INDEXER
    assert all(k.mixer.index_topk == 2048 for k in m.kinds) and any("57 of 78" in n for n in m.notes)
    # transformers' schedule from index_topk_freq 4 and index_skip_topk_offset 3 gives the same layers
    derived = from_hf_config({k: v for k, v in GLM52.items() if k != "indexer_types"}, "GLM-5.2")
    assert [k.mixer for k in derived.layers] == [k.mixer for k in m.layers]


def test_glm_keys_that_change_the_weights_are_refused():
    for extra, words in [({"mlp_bias": True}, "mlp_bias"), ({"moe_layer_freq": 2}, "moe_layer_freq"),
                         ({"qk_head_dim": 192}, "qk_head_dim"), ({"attention_bias": True}, "attention_bias"),
                         ({"layer_types": ["full_attention"] * 78}, "layer_types"),
                         ({"indexer_types": ["shared"] * 78}, "layer 0")]:
        with pytest.raises(RooflineError, match=words):
            from_hf_config(dict(GLM5, **extra), "GLM-5")
    with pytest.raises(RooflineError, match="index_topk"):
        from_hf_config({k: v for k, v in DEEPSEEK_V32.items() if k != "index_topk"}, "DeepSeek-V3.2")
    assert not from_hf_config(GLM5, "GLM-5").notes  # every published key read or cost-neutral


def test_a_dsa_layer_caches_the_latent_and_the_index_key(v32, glm5):
    # DeepSeek-V3.2 at bf16: 61 layers x (512 latent + 64 rope + 128 index key) x 2 bytes = 85,888
    assert kv_cache_bytes_per_token(v32) == 61 * (512 + 64 + 128) * 2 == 85_888
    # GLM-5.2: 21 layers with an indexer x 704 + 57 without x 576, x 2 bytes = 95,232
    assert kv_cache_bytes_per_token(from_hf_config(GLM52, "GLM-5.2")) == (21 * 704 + 57 * 576) * 2 == 95_232
    assert kv_cache_bytes_per_token(glm5) == 78 * 704 * 2


def test_decode_attention_reads_the_top_k_and_the_indexer_reads_everything(v32):
    ops = {k.name: k for k in block_kernels(v32, "decode", batch=1, context=100_000, layer=3)}
    core = ops[SPARSE_ATTENTION]
    # 2,048 of the 100,000 cached latents, 576 each: 1,179,648 elements; bytes at bf16 = 2 x (128 heads x
    # 576 query 73,728 + 1,179,648 + 128 x 512 output 65,536) = 2 x 1,318,912 = 2,637,824 (dense MLA
    # reads 100,000 x 576 = 57,600,000 elements)
    assert core.cache_elems == 2048 * 576 == 1_179_648
    assert core.bytes == 2 * (128 * 576 + 2048 * 576 + 128 * 512) == 2_637_824
    # its FLOPs: 128 heads x 2,048 keys x (2 x 576 + 2 x 512 + 5 softmax) = 571,736,064
    assert core.flops == 128 * 2048 * (2 * 576 + 2 * 512 + 5)
    # the indexer scores all 100,000: 64 heads x (2 x 128 + 3) FLOPs a key; reads 100,000 index keys of 128
    assert ops["indexer scores"].flops == 64 * 259 * 100_000
    assert ops["indexer scores"].cache_elems == 100_000 * 128
    dense = {k.name: k for k in block_kernels("deepseek-v3", "decode", batch=1, context=100_000, layer=3)}
    assert dense["latent attention"].cache_elems == 100_000 * 576 and "indexer scores" not in dense


def test_prefill_attends_min_p_k_keys_a_query(v32):
    # 4,096 prompt tokens: queries 1..2,048 see p keys, the other 2,048 see 2,048:
    # 2,048 x 2,049 / 2 + 2,048 x 2,048 = 6,292,480 pairs a head (dense: 4,096 x 4,096 / 2 = 8,388,608)
    sparse = {k.name: k for k in block_kernels(v32, "prefill", 4096, layer=3)}["flash attention"]
    dense = {k.name: k for k in block_kernels("deepseek-v3", "prefill", 4096, layer=3)}["flash attention"]
    per_pair = 128 * (2 * (192 + 128) + 5)
    assert sparse.flops == per_pair * 6_292_480 and dense.flops == per_pair * 8_388_608


def test_serving_prices_the_sparse_attention_at_k_past_k(v32):
    # TP 8: 16 heads a GPU; a decode step of 4 sequences at 100,000: the sparse attention reads
    # 4 x 2,048 latents a layer: 2 x (4 x 16 x 576 + 4 x 2,048 x 576 + 4 x 16 x 512) = 9,576,448 bytes, x 61 layers
    s = StepCost(v32, "h200", tensor_parallel=8, max_tokens=4096, max_seqs=64)
    ops = [o for o in s.ops([100_000] * 4) if o.part == "decode" and SPARSE_ATTENTION in o.name]
    assert sum(o.count for o in ops) == 61
    assert sum(o.bytes for o in ops) == pytest.approx(61 * 9_576_448, rel=1e-9)
    # below k the same op grows with the context; past k it does not
    at = {S: sum(o.bytes for o in s.ops([S] * 4) if o.part == "decode" and SPARSE_ATTENTION in o.name)
          for S in (1000, 2048, 50_000)}
    assert at[1000] < at[2048] == pytest.approx(at[50_000], rel=1e-12)
    with pytest.raises(RooflineError, match="Sparse Attention"):
        StepCost(v32, "h200", tensor_parallel=8, verify_tokens=3)


@pytest.mark.parametrize("config,machine", [(DEEPSEEK_V32, "h200"), (DEEPSEEK_V32, "b200"), (GLM5, "h200"),
                                            (GLM5, "b200")])
def test_cli_serving_runs_dsa_models_on_eight_gpus(config, machine, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["serving", "--model", str(path), "--machine", machine, "--tp", "8", "--weights", "fp8",
                 "--concurrency", "2", "--requests", "4", "--input-len", "4096", "--output-len", "16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["output_tokens_per_s"] > 0 and out["tensor_parallel"] == 8


def test_cli_serving_with_measured_kernels_says_the_sparse_attention_is_the_cost_models(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GLM5))
    assert main(["serving", "--model", str(path), "--machine", "h200", "--tp", "8", "--weights", "fp8",
                 "--concurrency", "2", "--requests", "4", "--input-len", "4096", "--output-len", "16",
                 "--kernels", "vllm"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{SPARSE_ATTENTION} (decode): the cost model at the min(S, 2048) latents") == 1


def test_training_flops_count_the_indexer_and_k_keys(v32):
    # matmul weights a token multiplies by: the indexer's, less k_norm's 256 (a norm): 61 x 13,959,168
    assert matmul_params(v32) - matmul_params("deepseek-v3") == 61 * (V32_INDEXER - 256)
    # attention at s = 4,096, forward, full count: 61 x (2 x 128 heads x (192 + 128) x 2,048 keys
    # + the indexer's 2 x 64 x 128 x 4,096) = 61 x (167,772,160 + 67,108,864) = 14,327,742,464
    assert attention_flops_per_token_forward(v32, 4096) == 61 * (167_772_160 + 67_108_864) == 14_327_742_464
    # below k it is MLA's own term plus the indexer's
    dense = attention_flops_per_token_forward("deepseek-v3", 1024)
    assert attention_flops_per_token_forward(v32, 1024) == dense + 61 * 2 * 64 * 128 * 1024


def test_a_decode_step_reads_less_of_a_dsa_cache_than_it_keeps(v32):
    from roofline.plan.memory import kv_bytes_per_sequence, kv_bytes_read_per_sequence, kv_overtakes_weights_context

    # at 100,000 tokens, bf16: kept 61 x 100,000 x 704 x 2 = 8,588,800,000 bytes; read 61 x (100,000 x 128
    # index keys 12,800,000 + 2,048 x 576 latents 1,179,648) x 2 = 61 x 13,979,648 x 2 = 1,705,517,056
    assert kv_bytes_per_sequence(v32, 100_000) == 61 * 100_000 * 704 * 2 == 8_588_800_000
    assert kv_bytes_read_per_sequence(v32, 100_000) == 61 * (100_000 * 128 + 2048 * 576) * 2 == 1_705_517_056
    assert kv_bytes_read_per_sequence(v32, 1000) == kv_bytes_per_sequence(v32, 1000)  # under k: all of it
    assert kv_bytes_read_per_sequence("deepseek-v3", 100_000) == kv_bytes_per_sequence("deepseek-v3", 100_000)
    # the crossover with the weights comes later than the stored cache would say
    assert kv_overtakes_weights_context(v32) > kv_overtakes_weights_context("deepseek-v3")


def test_a_dsa_model_steps_the_same_at_once_and_one_by_one(v32, monkeypatch):
    """Contexts cross k = 2,048 during the run: the stretch's min(S, k) sums for the sparse attention
    and the indexer's full sums agree with stepping one at a time."""
    import roofline.serving.scheduler as serving
    from roofline.serving import Engine, closed_requests, simulate

    from roofline.plan.precision import Precision

    s = StepCost(v32, "h200", Precision(weights="fp8"), tensor_parallel=8, max_tokens=8192, max_seqs=16)
    reqs = closed_requests(4, 8, (1500, 2500), (100, 900), seed=2)
    fast = simulate(s, reqs, Engine(max_seqs=16))
    monkeypatch.setattr(serving, "STRETCH", 1)
    slow = simulate(s, reqs, Engine(max_seqs=16))
    assert fast.steps == slow.steps
    np.testing.assert_allclose(fast.e2e_s, slow.e2e_s, rtol=1e-9)


def test_a_top_k_under_the_fit_contexts_still_reduces(v32):
    """k = 100 sits inside the decode fit's probe contexts (64 to 224): the sparse attention is fitted
    under k, the indexer and top-k over all S; 4 sequences at 5,000 read 4 x 100 latents a layer:
    2 x (4 x 16 x 576 + 4 x 100 x 576 + 4 x 16 x 512) = 2 x 300,032 = 600,064 bytes, x 61 layers."""
    import dataclasses

    from roofline.plan.precision import Precision

    small = dataclasses.replace(v32, kinds=tuple(dataclasses.replace(k, mixer=dataclasses.replace(k.mixer, index_topk=100))
                                                 for k in v32.kinds))
    s = StepCost(small, "h200", Precision(weights="fp8"), tensor_parallel=8, max_tokens=4096, max_seqs=8)
    ops = [o for o in s.ops([5000] * 4) if o.part == "decode" and SPARSE_ATTENTION in o.name]
    assert sum(o.bytes for o in ops) == pytest.approx(61 * 600_064, rel=1e-9)
    tiny = dataclasses.replace(v32, kinds=tuple(dataclasses.replace(k, mixer=dataclasses.replace(k.mixer, index_topk=3))
                                                for k in v32.kinds))
    with pytest.raises(RooflineError, match="index_topk 3"):
        StepCost(tiny, "h200", Precision(weights="fp8"), tensor_parallel=8, max_seqs=8)
