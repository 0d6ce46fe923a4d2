"""Checkpoint formats read as stored: compressed-tensors, ModelOpt (config.json and the
hf_quant_config.json beside it), fbgemm_fp8, bitsandbytes, GPTQ's per-channel groups and g_idx.
Expected bytes are hand arithmetic (in the comments) or a published checkpoint size."""

import json

import pytest

from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.plan.memory import inference_memory
from roofline.plan.precision import Precision
from roofline.transformer import get_model, weight_bytes

# a small Llama: D 256, F 512, 4 heads of 64 (2 kv heads), 2 layers, vocab 100. Per layer: q, o (256 x 256), k, v
# (128 x 256), gate, up (512 x 256), down (256 x 512). The rest at bf16: embedding and LM head 100 x 256 x 2 B each,
# norms (2 x 2 + 1) x 256 x 2 B: 102,400 + 2,560 = 104,960 B
SMALL = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "torch_dtype": "bfloat16"}
REST = 2 * 100 * 256 * 2 + 5 * 256 * 2
ATTENTION = ((256, 256), (128, 256), (128, 256), (256, 256))  # (N out, K in)
MLP = ((512, 256), (512, 256), (256, 512))


def stored(q, cfg=SMALL) -> float:
    return weight_bytes(from_hf_config(dict(cfg, quantization_config=q)))


def per_layer(matrix_bytes) -> float:
    """Both layers' attention and MLP matrices, each at matrix_bytes(N, K)."""
    return 2 * sum(matrix_bytes(n, k) for n, k in ATTENTION + MLP)


# ---------------------------------------------------------------------------------------------
# compressed-tensors
# ---------------------------------------------------------------------------------------------

def ct(weights, fmt, inputs=None, ignore=("lm_head",), **extra):
    return {"quant_method": "compressed-tensors", "format": fmt, "ignore": list(ignore),
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": inputs}},
            **extra}


def test_compressed_tensors_int4_groups_packed_with_their_shape():
    # W4A16 pack-quantized, group 32, symmetric: N K / 2 B of values in int32s, N K / 32 bf16 scales, weight_shape
    # (two int64, 16 B) per matrix; no zero points
    q = ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True}, "pack-quantized")
    assert stored(q) == per_layer(lambda n, k: n * k / 2 + n * k / 32 * 2 + 16) + REST


def test_compressed_tensors_asymmetric_int4_adds_packed_zero_points_and_g_idx():
    # asymmetric, group 128, actorder "group": a packed 4-bit zero (0.5 B) beside each bf16 scale, N ceil(K / 128)
    # of them, and weight_g_idx, one int32 per input column
    q = ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": False,
            "actorder": "group"}, "pack-quantized")
    assert stored(q) == per_layer(lambda n, k: n * k / 2 + n * (k // 128) * 2.5 + 16 + 4 * k) + REST


def test_compressed_tensors_fp8_per_channel_and_per_tensor():
    # FP8-dynamic: fp8 values, a bf16 scale per output row, no input scale (dynamic per token)
    dyn = ct({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}, "float-quantized",
             {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True})
    assert stored(dyn) == per_layer(lambda n, k: n * k + 2 * n) + REST
    # static FP8 (per tensor): one bf16 weight scale and one bf16 input scale per matrix
    static = ct({"num_bits": 8, "type": "float", "strategy": "tensor"}, "naive-quantized",
                {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False})
    assert stored(static) == per_layer(lambda n, k: n * k + 4) + REST
    # FP8 blocks of 128 x 128: ceil(N / 128) ceil(K / 128) bf16 scales
    block = ct({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}, "float-quantized")
    assert stored(block) == per_layer(lambda n, k: n * k + -(-n // 128) * -(-k // 128) * 2) + REST
    # the LM head is a Linear: quantised when the ignore list leaves it out (100 x 256 fp8 + 100 bf16 scales)
    head = dict(dyn, ignore=[])
    assert stored(head) == stored(dyn) - 100 * 256 * 2 + 100 * 256 + 100 * 2


# Meta-Llama-3.1-70B-Instruct-FP8 (neuralmagic / RedHatAI; llm-compressor, compressed-tensors): static fp8 per tensor,
# weights and inputs, lm_head ignored. 80 layers x (8192 x (8192 + 1024 + 1024 + 8192) + 3 x 8192 x 28672) =
# 68,451,041,280 fp8 weights; 80 x 7 matrices x 2 bf16 scales (4 B); embedding and LM head 2 x 128,256 x 8192 x 2 B and
# 161 norms x 8192 x 2 B = 4,205,330,432 B: 72,656,373,952 B = 67.67 GiB, the checkpoint's 67.7 GiB
# (https://huggingface.co/neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8, its safetensors files)
LLAMA31_70B_FP8 = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                   "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16",
                   "max_position_embeddings": 131072, "tie_word_embeddings": False,
                   "quantization_config": {
                       "quant_method": "compressed-tensors", "format": "naive-quantized", "quantization_status": "frozen",
                       "ignore": ["lm_head"], "config_groups": {"group_0": {
                           "targets": ["Linear"],
                           "weights": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False,
                                       "symmetric": True},
                           "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False,
                                                 "symmetric": True}}}}}


def test_roofline_memory_on_a_compressed_tensors_fp8_checkpoint_gives_its_stored_bytes(tmp_path, capsys):
    m = from_hf_config(LLAMA31_70B_FP8)
    expected = 68_451_041_280 + 80 * 7 * 4 + 4_205_330_432
    assert weight_bytes(m) == expected == 72_656_373_952
    assert abs(expected / 2**30 - 67.7) < 0.05
    mem = inference_memory(m, "h100-sxm", 1, 8192, Precision.as_stored(m))
    assert mem.parts[0].bytes == expected
    # the command itself, on the config.json as a file: the bytes and the words saying what was read
    from roofline.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA31_70B_FP8))
    assert main(["memory", "--model", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["weights_bytes"] == expected
    said = " ".join(out["notes"])
    assert "compressed-tensors" in said and "left at bf16 by the checkpoint's skip list: lm head" in said


# Kimi K2.5's language model (moonshotai/Kimi-K2.5 config.json, text_config; model_type kimi_k25), as published
KIMI_K25_TEXT = {"model_type": "kimi_k2", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                 "num_hidden_layers": 61, "num_attention_heads": 64, "num_key_value_heads": 64, "n_routed_experts": 384,
                 "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 1, "moe_layer_freq": 1,
                 "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                 "v_head_dim": 128, "vocab_size": 163840, "tie_word_embeddings": False, "dtype": "bfloat16",
                 "num_nextn_predict_layers": 0, "max_position_embeddings": 262144}
KIMI_K25_QUANT = {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
                  "kv_cache_scheme": None,
                  "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
                  "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "weights": {
                      "num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True,
                      "actorder": None, "block_structure": None, "dynamic": False}}}}


def test_kimi_k25_int4_experts_and_the_rest_bf16():
    """Experts: 60 MoE layers x 384 x 3 = 69,120 matrices of 2048 x 7168 (or 7168 x 2048): 7,340,032 B of int4,
    917,504 B of bf16 scales (one per 32) and 16 B of shape: 8,257,552 B each, 570,761,994,240 B. The rest at bf16:
    embedding and LM head 2 x 163,840 x 7168; MLA 61 x 101,124,096 (q_a 7168 x 1536 + 1536, q_b 1536 x 64 x 192,
    kv_a 7168 x 576 + 512, kv_b 512 x 64 x 256, o 8192 x 7168); the dense MLP 3 x 7168 x 18432; 60 shared experts
    3 x 7168 x 2048 and routers 384 x 7168; norms 122 x 7168 + 7168: 11,722,185,728 weights, 23,444,371,456 B."""
    m = from_hf_config({"model_type": "kimi_k25", "text_config": KIMI_K25_TEXT, "quantization_config": KIMI_K25_QUANT})
    assert weight_bytes(m) == 570_761_994_240 + 2 * 11_722_185_728 == 594_206_365_696
    assert [p for p, _, _ in m.storage.parts] == ["experts"]
    said = " ".join(m.notes)
    assert "left at bf16 by the checkpoint's skip list: attention, mlp, shared experts, lm head" in said


def test_the_shipped_kimi_k25_config_loads_and_counts_the_same():
    core = pytest.importorskip("aiconfigurator_core")
    import os

    path = os.path.join(os.path.dirname(core.__file__), "model_configs", "moonshotai--Kimi-K2.5_config.json")
    assert weight_bytes(get_model(path)) == 594_206_365_696


def test_compressed_tensors_variants_not_read_are_refused_by_name():
    w4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32}
    for q, said in ((ct(w4, "dense"), "'dense'"), (ct(w4, "marlin-24"), "'marlin-24'"),
                    (ct(w4, "pack-quantized", sparsity_config={"format": "sparse-bitmask"}), "sparsity_config"),
                    (ct(dict(w4, strategy="token"), "pack-quantized"), "'token'"),
                    (ct(dict(w4, num_bits=3), "pack-quantized"), "num_bits 3")):
        with pytest.raises(RooflineError, match=said):
            stored(q)
    only_experts = ct(w4, "pack-quantized")
    only_experts["config_groups"]["group_0"]["targets"] = ["re:.*experts.*"]
    with pytest.raises(RooflineError, match="targeting \"Linear\""):
        stored(only_experts)


# ---------------------------------------------------------------------------------------------
# ModelOpt
# ---------------------------------------------------------------------------------------------

# MiniMax-M2.5 (the keys that shape the weights; tests/test_architectures.py's MINIMAX_M25) with nvidia's NVFP4
# quantization_config as published (nvidia/MiniMax-M2.5-NVFP4): every layer's attention and router excluded
MINIMAX = {"model_type": "minimax_m2", "num_hidden_layers": 62, "hidden_size": 3072, "num_attention_heads": 48,
           "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 1536, "vocab_size": 200064,
           "num_experts_per_tok": 8, "num_local_experts": 256, "max_position_embeddings": 196608, "rotary_dim": 64,
           "tie_word_embeddings": False, "use_qk_norm": True, "qk_norm_type": "per_layer", "use_routing_bias": True,
           "use_mtp": True, "mtp_transformer_layers": 1, "num_mtp_modules": 3, "shared_intermediate_size": 0,
           "scoring_func": "sigmoid", "torch_dtype": "bfloat16",
           "quantization_config": {
               "quant_method": "modelopt", "quant_algo": "NVFP4", "producer": {"name": "modelopt"},
               "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
               "config_groups": {"group_0": {"targets": ["Linear"],
                                             "weights": {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16},
                                             "input_activations": {"dynamic": False, "num_bits": 4, "type": "float",
                                                                   "group_size": 16}}},
               "ignore": ["lm_head"] + [f"model.layers.{i}.{m}" for i in range(62)
                                        for m in ("block_sparse_moe.gate", "self_attn*")]}}


def test_modelopt_nvfp4_minimax_experts_as_stored():
    """Experts: 62 x 256 x 3 = 47,616 matrices of 1536 x 3072 (or 3072 x 1536): 2,359,296 B of fp4 values, 294,912
    fp8 scales (one per 16) and two fp32 scalars (weight_scale_2, input_scale): 2,654,216 B each, 126,383,149,056 B.
    The rest at bf16: 62 x (44,040,192 + 7,168 + 786,432 + 6,144) + 2 x 200,064 x 3072 + 3072 = 4,009,272,320
    weights, 8,018,544,640 B (test_architectures' hand count of MiniMax-M2.5 less its experts)."""
    m = from_hf_config(MINIMAX)
    assert weight_bytes(m) == 126_383_149_056 + 2 * 4_009_272_320 == 134_401_693_696
    assert [p for p, _, _ in m.storage.parts] == ["experts"] and m.storage.parts[0][1].startswith("fp4")
    said = " ".join(m.notes)
    assert "modelopt" in said and "attention, lm head" in said
    core = pytest.importorskip("aiconfigurator_core")
    import os

    path = os.path.join(os.path.dirname(core.__file__), "model_configs", "nvidia--MiniMax-M2.5-NVFP4_config.json")
    assert weight_bytes(get_model(path)) == 134_401_693_696


def test_modelopt_fp8_from_a_config_with_only_its_producer():
    # Qwen3-32B-FP8-Static-PerTensor's quantization_config names no quant_method, only producer modelopt: read as
    # ModelOpt FP8, fp8 values with an fp32 weight scale and input scale (8 B) per matrix
    q = {"producer": {"name": "modelopt", "version": "0.31.0"}, "quant_algo": "FP8", "kv_cache_scheme": "FP8",
         "ignore": ["lm_head"], "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}}}
    assert stored(q) == per_layer(lambda n, k: n * k + 8) + REST
    with pytest.raises(RooflineError, match="'W4A8_AWQ'"):
        stored({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"})


def test_the_hf_quant_config_beside_a_config_is_read_and_said(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    companion = {"producer": {"name": "modelopt", "version": "0.23.0"},
                 "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(companion))
    m = get_model(str(tmp_path / "config.json"))
    assert weight_bytes(m) == per_layer(lambda n, k: n * k + 8) + REST
    assert any("hf_quant_config.json beside the config" in n for n in m.notes)
    # a collection's naming: NAME_config.json beside NAME_hf_quant_config.json
    (tmp_path / "x_config.json").write_text(json.dumps(SMALL))
    (tmp_path / "x_hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}))
    nv = get_model(str(tmp_path / "x_config.json"))
    # NVFP4 on every Linear, the LM head too (not excluded): N K / 2 + N K / 16 fp8 scales + 8 B a matrix
    head = 100 * 256 / 2 + 100 * 256 / 16 + 8
    assert weight_bytes(nv) == per_layer(lambda n, k: n * k / 2 + n * k / 16 + 8) + REST - 100 * 256 * 2 + head
    # the companion given as the model is refused, naming what to pass
    with pytest.raises(RooflineError, match="pass the config.json beside it"):
        get_model(str(tmp_path / "hf_quant_config.json"))
    # a config with its own quantization_config: that one is read, and the companion said not read
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "config.json").write_text(json.dumps(dict(SMALL, quantization_config={"quant_method": "fp8"})))
    (tmp_path / "own" / "hf_quant_config.json").write_text(json.dumps(companion))
    own = get_model(str(tmp_path / "own"))
    assert own.storage.method == "fp8" and any("not read" in n for n in own.notes)


def test_a_modelopt_checkpoints_fp8_kv_cache_is_priced_as_the_engines_auto_runs_it(tmp_path):
    # kv_cache_quant_algo "FP8": TensorRT-LLM's KvCacheConfig.dtype 'auto' follows checkpoint metadata, SGLang's
    # configure_kv_cache_dtype and vLLM's (from 0.13.0, PR #30785) likewise; the cache is fp8 unless --kv-cache says
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    m = get_model(str(tmp_path / "config.json"))
    assert m.storage.kv_cache == "fp8"
    p = Precision.as_stored(m)
    assert p.kv_cache == "fp8" and p.kv_source  # said in the label, with why
    given = Precision.as_stored(m, kv_cache="bf16")
    assert given.kv_cache == "bf16" and not given.kv_source
    # 2 layers x 2 kv heads x 64 head dims x (K and V) = 512 values a token: 512 B at fp8, 1,024 B at bf16
    assert inference_memory(m, "h100-sxm", 1, 1000, p).parts[1].bytes == 512 * 1000
    assert inference_memory(m, "h100-sxm", 1, 1000, given).parts[1].bytes == 1024 * 1000
    # an export stating no KV quantisation keeps the activations' dtype
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}))
    plain = get_model(str(tmp_path / "config.json"))
    assert plain.storage.kv_cache == "" and Precision.as_stored(plain).kv_cache == "bf16"


def test_the_shipped_companions_are_read():
    core = pytest.importorskip("aiconfigurator_core")
    import os

    path = os.path.join(os.path.dirname(core.__file__), "model_configs", "nvidia--Llama-3.1-70B-Instruct-FP8_config.json")
    m = get_model(path)
    # as the compressed-tensors checkpoint above, with ModelOpt's two fp32 scalars (8 B) per matrix
    assert weight_bytes(m) == 68_451_041_280 + 80 * 7 * 8 + 4_205_330_432
    assert m.storage.method == "modelopt"


def mixed(listing: dict, **extra) -> dict:
    """ModelOpt's MIXED_PRECISION quantization_config: each module's algorithm in quantized_layers."""
    return {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "producer": {"name": "modelopt"},
            "quantized_layers": listing, **extra}


FP8, W4A16 = {"quant_algo": "FP8"}, {"quant_algo": "W4A16_NVFP4", "group_size": 16}


def test_modelopt_mixed_precision_prices_each_listed_module_by_its_own_algorithm():
    listing = {f"model.layers.0.self_attn.{p}": FP8 for p in ("q_proj", "k_proj", "v_proj", "o_proj")}
    listing |= {f"model.layers.{i}.mlp.{p}": W4A16 for i in range(2) for p in ("gate_proj", "up_proj", "down_proj")}
    listing["lm_head"] = {"quant_algo": "NVFP4", "group_size": 16}
    m = from_hf_config(dict(SMALL, quantization_config=mixed(listing)))
    # layer 0's attention FP8: fp8 values + fp32 weight_scale and input_scale (8 B) a matrix:
    #   q, o 65,536 + 8 = 65,544 each; k, v 32,768 + 8 = 32,776 each: 196,640
    # layer 1's attention not listed, bf16: (2 x 65,536 + 2 x 32,768) x 2 = 393,216
    # both MLPs W4A16_NVFP4: 131,072 / 2 values + 8,192 fp8 scales (one per 16) + 4 (weight_scale_2, no input_scale)
    #   = 73,732 a matrix, 3 x 2 of them: 442,392
    # LM head NVFP4: 25,600 / 2 + 1,600 + 8 = 14,408; embedding and norms bf16: 51,200 + 2,560 = 53,760
    assert weight_bytes(m) == 196_640 + 393_216 + 442_392 + 14_408 + 53_760 == 1_100_416
    said = " ".join(m.notes)
    assert "W4A16_NVFP4" in said and "not being in quantized_layers" in said and "attention in layer(s) 1" in said
    # exclude_modules wins over the listing (vLLM reads it first): layer 0's attention back at bf16
    assert stored(mixed(listing, exclude_modules=["model.layers.0.self_attn*"])) == 1_100_416 - 196_640 + 393_216


def test_modelopt_mixed_precision_refuses_what_it_cannot_price_exactly():
    with pytest.raises(RooflineError, match="'W4A8_AWQ'"):
        stored(mixed({"model.layers.0.mlp.up_proj": {"quant_algo": "W4A8_AWQ"}}))
    with pytest.raises(RooflineError, match="two ways"):  # one matrix, two algorithms
        stored(mixed({"model.layers.0.mlp.up_proj": FP8, "model.layers.0.mlp.up_proj.": W4A16}))
    with pytest.raises(RooflineError, match="no such matrix"):  # a matrix the layer does not hold
        stored(mixed({"model.layers.0.mlp.w9_proj": FP8}))
    with pytest.raises(RooflineError, match="layer 5"):
        stored(mixed({"model.layers.5.mlp.up_proj": FP8}))
    with pytest.raises(RooflineError, match="quantized_layers"):
        stored(mixed({}))
    moe = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 100, "num_experts": 4,
           "num_experts_per_tok": 2, "moe_intermediate_size": 32, "torch_dtype": "bfloat16"}
    every = {f"model.layers.0.mlp.experts.{e}.{p}": W4A16 for e in range(4) for p in ("gate_proj", "up_proj", "down_proj")}
    # all four experts listed one by one: their 12 matrices of 32 x 64 at 1,024 + 128 + 4 = 1,156 B, not 4,096
    assert stored(mixed(every), moe) == stored(mixed({}, quant_algo="NVFP4", exclude_modules=[
        "lm_head", "model.layers.0.self_attn*", "model.layers.0.mlp.gate"]), moe) - 12 * 4
    with pytest.raises(RooflineError, match="3 of layer 0's 4 experts"):
        stored(mixed({k: v for k, v in every.items() if ".experts.3." not in k}), moe)


def test_modelopt_mixed_precision_prices_qwen35_gated_deltanet_split_as_stored():
    # a small Qwen3.5: D 64, 4 layers (3 Gated DeltaNet, 1 attention), key heads 2 x 16, value heads 4 x 16
    text = {"model_type": "qwen3_5_text", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128, "vocab_size": 100,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
            "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "torch_dtype": "bfloat16"}
    listing = {f"model.layers.{i}.linear_attn.{p}": FP8 for i in range(3) for p in ("in_proj_qkv", "in_proj_z", "out_proj")}
    # a Gated DeltaNet layer at bf16: in_proj_qkv (2 x 32 + 64) x 64, in_proj_z 64 x 64, in_proj_b and in_proj_a
    # 4 x 64 each, out_proj 64 x 64, conv 128 x 4, dt_bias and A_log 4 each, norm 16: 17,432 x 2 B = 34,864 B.
    # FP8 for qkv, z, out (each + 8 B of scales): 8,200 + 4,104 + 4,104; b and a stay bf16 (not listed): 512 + 512;
    # conv, dt_bias, A_log, norm bf16: 1,024 + 16 + 32: 18,504 B. Three such layers: 3 x (34,864 - 18,504) = 49,080
    assert weight_bytes(from_hf_config(text)) - stored(mixed(listing), text) == 49_080
    assert "in_proj_a, in_proj_b of the ssm in every layer" in " ".join(from_hf_config(
        dict(text, quantization_config=mixed(listing))).notes)


def test_the_shipped_mixed_precision_checkpoints_load():
    core = pytest.importorskip("aiconfigurator_core")
    import os

    d = os.path.join(os.path.dirname(core.__file__), "model_configs")
    for f, parts in (("nvidia--Qwen3.6-27B-NVFP4", {"ssm", "attention", "mlp", "lm_head"}),
                     ("nvidia--Qwen3.6-35B-A3B-NVFP4", {"ssm", "attention", "experts", "shared_experts", "lm_head"}),
                     ("nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", {"ssm", "experts", "shared_experts",
                                                                             "lm_head"})):
        m = get_model(os.path.join(d, f"{f}_config.json"))
        assert m.storage.method == "modelopt" and {p for p, _, _ in m.storage.parts} == parts, f
        # FP8 token mixers, W4A16_NVFP4 MLPs / experts and LM head; attention and router at bf16 in Nemotron
        assert {fmt.split(" ")[0] for _, fmt, _ in m.storage.parts} == {"fp8", "fp4"}, f
    # Nemotron-3 Nano's exclude list names its attention layers' mixer.q_proj ... o_proj: kept at bf16
    nano = get_model(os.path.join(d, "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4_config.json"))
    assert "attention" not in {p for p, _, _ in nano.storage.parts}


def test_kimi_k25_nvfp4_keeps_k2s_text_model_as_deepseek_v3():
    inner = {"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "vocab_size": 100, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8,
             "q_lora_rank": 0, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
             "intermediate_size": 128, "first_k_dense_replace": 1, "n_shared_experts": 1}
    m = from_hf_config({"model_type": "kimi_k25", "text_config": inner})
    assert m.model_type == "deepseek_v3" and m.n_layers == 2
    with pytest.raises(RooflineError, match="'llama'"):
        from_hf_config({"model_type": "kimi_k25", "text_config": dict(inner, model_type="llama")})
    core = pytest.importorskip("aiconfigurator_core")
    import os

    for f in ("nvidia--Kimi-K2.5-NVFP4_config.json", "nvidia--Kimi-K2.6-NVFP4_config.json"):
        assert get_model(os.path.join(os.path.dirname(core.__file__), "model_configs", f)).storage.method == "modelopt"


# ---------------------------------------------------------------------------------------------
# fbgemm_fp8, bitsandbytes, GPTQ
# ---------------------------------------------------------------------------------------------

def test_fbgemm_fp8_per_channel_scales():
    # FbgemmFp8Linear: fp8 weights and an fp32 scale per output row (4 N B); the LM head not converted
    q = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]}
    assert stored(q) == per_layer(lambda n, k: n * k + 4 * n) + REST


def test_bitsandbytes_4bit_and_8bit():
    # nf4: N K / 2 B, an fp32 absmax per 64 values, a 16-entry fp32 code (64 B) per matrix; the LM head unquantised
    nf4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
           "bnb_4bit_quant_storage": "uint8"}
    assert stored(nf4) == per_layer(lambda n, k: n * k / 2 + n * k / 64 * 4 + 64) + REST
    # double quant: the absmax as uint8 (1 B per 64), an fp32 per 256 of them (4 / 16,384 B a value), codes 1,088 B
    dq = dict(nf4, bnb_4bit_use_double_quant=True)
    assert stored(dq) == pytest.approx(per_layer(lambda n, k: n * k * (0.5 + 4 / 16384) + n * k / 64 + 1088) + REST)
    # LLM.int8: int8 weights and an fp32 SCB per row
    int8 = {"quant_method": "bitsandbytes", "load_in_8bit": True}
    assert stored(int8) == per_layer(lambda n, k: n * k + 4 * n) + REST
    for bad, said in (({"load_in_4bit": True, "load_in_8bit": True}, "exactly one"),
                      ({"load_in_8bit": True, "llm_int8_has_fp16_weight": True}, "fp16 weights"),
                      ({"load_in_4bit": True, "bnb_4bit_quant_type": "int4"}, "'int4'")):
        with pytest.raises(RooflineError, match=said):
            stored({"quant_method": "bitsandbytes", **bad})


def test_gptq_per_channel_group_and_g_idx():
    # group_size -1: one fp16 scale and a packed 4-bit zero per output channel (2.5 N B); g_idx 4 K B, stored by
    # AutoGPTQ's QuantLinear whatever desc_act
    q = {"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": True}
    assert stored(q) == per_layer(lambda n, k: n * k / 2 + 2.5 * n + 4 * k) + REST
    # group 128: 2.5 B per group of 128 inputs of a row
    assert stored(dict(q, group_size=128)) == per_layer(lambda n, k: n * k / 2 + 2.5 * n * k / 128 + 4 * k) + REST
    with pytest.raises(RooflineError, match="'marlin'"):
        stored(dict(q, checkpoint_format="marlin"))
    with pytest.raises(RooflineError, match="modules_in_block_to_quantize"):  # some modules only: not guessed
        stored(dict(q, modules_in_block_to_quantize=[["self_attn.q_proj"]]))


# ---------------------------------------------------------------------------------------------
# Skip lists that name norms
# ---------------------------------------------------------------------------------------------

def test_a_skip_list_naming_norms_changes_nothing_and_a_name_of_no_weight_is_refused():
    # Qwen3-30B-A3B-FP8's modules_to_not_convert names its layers' norms (never quantised) beside the LM head and routers
    q = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]}
    norms = dict(q, modules_to_not_convert=["lm_head", "model.layers.0.input_layernorm",
                                            "model.layers.1.post_attention_layernorm", "model.norm"])
    assert stored(norms) == stored(q)
    with pytest.raises(RooflineError, match="model.layers.0.widget"):
        stored(dict(q, modules_to_not_convert=["model.layers.0.widget"]))
    core = pytest.importorskip("aiconfigurator_core")
    import os

    for f in ("Qwen--Qwen3-235B-A22B-FP8_config.json", "Qwen--Qwen3-30B-A3B-FP8_config.json"):
        assert get_model(os.path.join(os.path.dirname(core.__file__), "model_configs", f)).storage.method == "fp8"


# Llama 4 Maverick's text model (meta-llama/Llama-4-Maverick-17B-128E config.json, as data/models.toml keeps it)
MAVERICK_TEXT = {"attention_bias": False, "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
                 "interleave_moe_layer_step": 2, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
                 "max_position_embeddings": 1048576, "model_type": "llama4_text", "num_attention_heads": 40,
                 "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 128,
                 "use_qk_norm": False, "vocab_size": 202048}


def test_fbgemm_fp8_maverick_experts_per_channel():
    """Meta's Maverick FP8 recipe converts the routed experts (FbgemmFp8Llama4TextExperts): 24 MoE layers x 128
    experts x (gate 8192 x 5120 + up 8192 x 5120 + down 5120 x 8192) = 386,547,056,640 fp8 weights, and an fp32 scale
    per output channel, 24 x 128 x (8192 + 8192 + 5120) x 4 = 264,241,152 B. The skip list here (attention, router,
    shared expert, the dense layers' feed_forward, LM head, vision) is representative: the rest at bf16."""
    skip = (["language_model.model.layers.*.self_attn", "language_model.model.layers.*.feed_forward.router",
             "language_model.model.layers.*.feed_forward.shared_expert", "language_model.lm_head", "vision_model",
             "multi_modal_projector"] + [f"language_model.model.layers.{i}.feed_forward" for i in range(0, 48, 2)])
    m = from_hf_config({"model_type": "llama4", "torch_dtype": "bfloat16", "text_config": MAVERICK_TEXT,
                        "vision_config": {"hidden_size": 1408},
                        "quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                                "modules_to_not_convert": skip}})
    from roofline.transformer import count_params

    experts = 24 * 128 * 3 * 5120 * 8192
    assert count_params(m)["experts"] == experts == 386_547_056_640
    assert [p for p, _, _ in m.storage.parts] == ["experts"]
    assert weight_bytes(m) == experts + 264_241_152 + 2 * (count_params(m)["total"] - experts)


def test_bitsandbytes_without_quant_method_and_an_explicit_skip_list():
    # transformers' BitsAndBytesConfig wrote no quant_method before 4.3x: load_in_4bit says what it is
    old = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    assert stored(old) == stored(dict(old, quant_method="bitsandbytes"))
    # an llm_int8_skip_modules list replaces transformers' default (the LM head): one leaving the LM head out quantises it
    # (100 x 256 / 2 + 400 absmax x 4 + 64 B for its 51,200 B at bf16)
    listed = dict(old, llm_int8_skip_modules=[])
    assert stored(listed) == stored(old) - 100 * 256 * 2 + (100 * 256 / 2 + 400 * 4 + 64)


def test_a_skip_list_naming_a_matrix_the_tool_does_not_hold_apart_keeps_the_whole_part_and_says_so():
    # Phi-3 fuses q, k and v into qkv_proj; the tool holds q_proj, k_proj, v_proj: layer 0's attention is kept whole
    q = {"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["lm_head", "model.layers.0.self_attn.qkv_proj"]}
    m = from_hf_config(dict(SMALL, quantization_config=q))
    attention = sum(n * k for n, k in ATTENTION)
    assert weight_bytes(m) == stored(dict(q, modules_to_not_convert=["lm_head"])) - sum(
        n * k + 4 * n for n, k in ATTENTION) + 2 * attention
    assert any("qkv_proj" in n and "whole attention" in n for n in m.notes)


def test_deepseek_nvfp4_keeps_single_matrices_and_may_name_its_mtp_layer():
    # nvidia/DeepSeek-V3.1-NVFP4 excludes q_a, q_b, kv_a and kv_b of every layer (o_proj stays NVFP4) and
    # model.layers.61*, the multi-token-prediction layer after the model's 61
    cfg = {"model_type": "deepseek_v3", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "vocab_size": 100, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32,
           "q_lora_rank": 128, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
           "intermediate_size": 512, "first_k_dense_replace": 1, "n_shared_experts": 1, "num_nextn_predict_layers": 1,
           "torch_dtype": "bfloat16"}
    kept = [f"model.layers.{i}.self_attn.{p}" for i in range(2)
            for p in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")]
    q = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head", *kept]}
    m = from_hf_config(dict(cfg, quantization_config=q))
    # attention per layer: q_a 128 x 256, q_b 4 x 48 x 128, kv_a 80 x 256, kv_b 4 x 64 x 64 at bf16 (2 B), their
    # norms 128 + 64 at bf16; o_proj 256 x 128 at NVFP4: 32,768 / 2 + 32,768 / 16 + 8 = 18,440 B
    bf16 = 2 * (128 * 256 + 192 * 128 + 80 * 256 + 256 * 64 + 128 + 64)
    params = 128 * 256 + 192 * 128 + 80 * 256 + 256 * 64 + 128 + 64 + 256 * 128
    assert m.storage.width("attention", 2.0) == pytest.approx((bf16 + 18_440) / params)
    assert stored(dict(q, exclude_modules=[*q["exclude_modules"], "model.layers.2*"]), cfg) == weight_bytes(m)
    with pytest.raises(RooflineError, match="layer 3"):
        stored(dict(q, exclude_modules=["model.layers.3*"]), cfg)
