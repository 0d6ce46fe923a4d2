"""Falcon-H1 (hf_configs/ssm.py's falcon_h1 loader): attention and a Mamba-2 mixer side by side in
every layer (mixers.ParallelMixer), then a SwiGLU MLP. Counts by hand against the published total;
the cache per sequence (K and V per token plus the SSM state) by hand; decode and serving run."""

from __future__ import annotations

import json

import pytest

from roofline.architecture import Attention, Mamba2, ParallelMixer
from roofline.blocks import block_kernels
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.plan.parallel import shard
from roofline.transformer import (cache_bytes_per_sequence, cache_name, count_params, kv_cache_bytes_per_token,
                                  matmul_params, scan_flops_per_token_forward)

# Falcon-H1-7B-Instruct's config.json, the keys that shape the weights (the muP multipliers are
# constants, no weights). https://huggingface.co/tiiuae/Falcon-H1-7B-Instruct/blob/main/config.json;
# the shape agrees with transformers' FalconH1 docs table (H1 7B: 44 layers, 3072 wide, 12 attention
# and 2 KV heads, 24 Mamba heads, head dims 128 / 128, d_state 256).
FALCON_H1_7B = {
    "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "hidden_size": 3072, "num_hidden_layers": 44,
    "num_attention_heads": 12, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 12288,
    "vocab_size": 130048, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
    "mamba_d_ssm": 3072, "mamba_n_heads": 24, "mamba_d_head": 128, "mamba_n_groups": 1, "mamba_d_state": 256,
    "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 128, "mamba_conv_bias": True, "mamba_proj_bias": False,
    "mamba_rms_norm": True, "mamba_norm_before_gate": False, "projectors_bias": False, "mamba_use_mlp": True,
    "attn_layer_indices": None, "hidden_act": "silu", "max_position_embeddings": 262144, "rope_theta": 1e11,
    "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5, "embedding_multiplier": 5.656854249492381,
    "lm_head_multiplier": 0.0390625, "key_multiplier": 0.390625, "attention_in_multiplier": 1.0,
    "attention_out_multiplier": 0.9375, "ssm_in_multiplier": 1.25, "ssm_out_multiplier": 0.23570226039551587,
    "ssm_multipliers": [0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738],
    "mlp_multipliers": [0.8838834764831844, 0.5859375],
}

# One layer by hand (D 3072):
#   attention: q 3072 x 12*128 = 4,718,592; k and v 3072 x 2*128 = 786,432 each; o 1536 x 3072 = 4,718,592
#              -> 11,010,048
#   mamba:     in_proj 3072 x (2*3072 + 2*1*256 + 24 = 6,680) = 20,520,960; conv1d 3,584 channels
#              (3072 + 2*256) x 4 + bias 3,584 = 17,920; dt_bias, A_log, D 3 x 24 = 72; gated norm 3,072;
#              out_proj 3072 x 3072 = 9,437,184 -> 29,979,208
#   mlp:       3 x 3072 x 12288 = 113,246,208
#   norms:     input_layernorm + pre_ff_layernorm 2 x 3072 = 6,144
#   -> 154,241,608 a layer; x 44 = 6,786,630,752
# embedding and untied LM head 2 x 130048 x 3072 = 799,014,912; final norm 3,072
# total 6,786,630,752 + 799,014,912 + 3,072 = 7,585,648,736
PER_LAYER = 11_010_048 + 29_979_208 + 113_246_208 + 6_144
TOTAL = 44 * PER_LAYER + 2 * 130048 * 3072 + 3072

# The published size: "7.59B params" on the model card's safetensors summary,
# https://huggingface.co/tiiuae/Falcon-H1-7B-Instruct
PUBLISHED_7B = 7.59e9


def _model(cfg=FALCON_H1_7B, name="Falcon-H1-7B-Instruct"):
    return from_hf_config(dict(cfg), name)


def test_falcon_h1_7b_counts_by_hand_and_matches_the_model_card():
    m = _model()
    assert m.n_layers == 44 and m.is_uniform and not m.tied_embeddings
    # the only note: the muP multipliers, elementwise scales not counted as ops (no key went unread)
    assert len(m.notes) == 1 and "muP multipliers" in m.notes[0] and "ssm_multipliers" in m.notes[0]
    layer = m.kinds[0]
    assert isinstance(layer.mixer, ParallelMixer) and layer.is_parallel_hybrid and layer.attends and layer.keeps_state
    p = count_params(m)
    assert PER_LAYER == 154_241_608 and TOTAL == 7_585_648_736
    assert p["total"] == TOTAL
    assert p["attention"] == 44 * 11_010_048 and p["ssm"] == 44 * 29_979_208
    assert abs(p["total"] - PUBLISHED_7B) < 0.005e9  # 7.5856B rounds to the card's 7.59B


def test_falcon_h1_cache_is_the_kv_per_token_plus_the_ssm_state():
    m = _model()
    # per layer: K and V 2 kv heads x (128 + 128) = 512 elements a token; the state 3072 x 256 = 786,432 and the
    # conv window (4 - 1) x 3,584 = 10,752 (vLLM keeps d_conv - 1 columns) -> 797,184 elements a sequence
    assert kv_cache_bytes_per_token(m) == 44 * 512 * 2  # 45,056 bytes a token in bf16
    # at 4,096 tokens: 44 x (512 x 4096 + 797,184) x 2 bytes = 254,701,568
    assert float(cache_bytes_per_sequence(m, 4096)) == 44 * (512 * 4096 + 797_184) * 2 == 254_701_568
    # one token more adds only the KV: the state is fixed
    assert float(cache_bytes_per_sequence(m, 4097) - cache_bytes_per_sequence(m, 4096)) == 44 * 512 * 2
    assert cache_name(m) == "KV cache + SSM state"


def test_falcon_h1_flops_count_both_mixers():
    m = _model()
    # matmuls a token: attention 11,010,048 + mamba in and out 20,520,960 + 9,437,184 + mlp 113,246,208 a layer,
    # and the LM head 130048 x 3072
    assert matmul_params(m) == 44 * (11_010_048 + 20_520_960 + 9_437_184 + 113_246_208) + 130048 * 3072
    # scan: 6 x 3072 x 256 + conv 2 x 4 x 3,584 a layer
    assert scan_flops_per_token_forward(m) == 44 * (6.0 * 3072 * 256 + 2.0 * 4 * 3584)
    names = [k.name for k in block_kernels(m, "decode", batch=4, context=1024, attention="flash")]
    assert names.index("flash attention") < names.index("ssm scan") < names.index("attention + ssm sum")
    assert "out proj" in names and "ssm out proj" in names and "ssm gated norm" in names


def test_falcon_h1_tensor_parallel_splits_both_mixers():
    sliced = shard(_model(), 4)
    mix = sliced.kinds[0].mixer
    assert isinstance(mix, ParallelMixer)
    # 12 heads / 4; 2 kv heads replicated to 1 a GPU; Mamba: 3072 / 4 inner, 24 / 4 heads, its one group's B and C
    # on every GPU (vLLM's MambaMixer2)
    assert (mix.attention.heads, mix.attention.kv_heads) == (3, 1)
    assert (mix.ssm.d_inner, mix.ssm.heads, mix.ssm.n_groups) == (768, 6, 1)
    assert sliced.kinds[0].mlp.d_ff == 3072
    assert sliced.kinds[0].tp_all_reduces == 3  # o_proj, the mamba out_proj and down_proj each reduce (vLLM)
    # one of 2 GPUs, the Mamba part by hand: in_proj 3072 x (2 x 1536 + 2 x 256 (B and C whole) + 12) = 11,046,912;
    # conv (1536 + 512) x 4 + 2,048 bias = 10,240; dt_bias, A_log, D 3 x 12 = 36; norm 1,536;
    # out_proj 1536 x 3072 = 4,718,592 -> 15,777,316
    assert shard(_model(), 2).kinds[0].mixer.ssm.params(3072) == 15_777_316
    with pytest.raises(RooflineError, match="attention heads"):
        shard(_model(), 8)  # 12 heads do not split 8 ways


def test_falcon_h1_keys_that_change_the_weights():
    base = count_params(_model())["total"]
    # no gated norm: 3072 fewer a layer
    assert count_params(_model({**FALCON_H1_7B, "mamba_rms_norm": False}))["total"] == base - 44 * 3072
    # projectors_bias: out_proj's bias only (D a layer); mamba_proj_bias: in_proj's only (6,680 a layer)
    assert count_params(_model({**FALCON_H1_7B, "projectors_bias": True}))["total"] == base + 44 * 3072
    assert count_params(_model({**FALCON_H1_7B, "mamba_proj_bias": True}))["total"] == base + 44 * 6680
    # tied: one table fewer
    assert count_params(_model({**FALCON_H1_7B, "tie_word_embeddings": True}))["total"] == base - 130048 * 3072
    # mamba_d_ssm null: mamba_expand x hidden_size = 6144 inner, 48 heads of 128
    wide = _model({**FALCON_H1_7B, "mamba_d_ssm": None, "mamba_n_heads": 48, "mamba_d_head": "auto"}).kinds[0].mixer
    assert wide.ssm == Mamba2(6144, 256, 1, 48, 4, True, False, gated_norm=True, out_bias=False)
    assert wide.attention == Attention(12, 2, 128)


def test_falcon_h1_refuses_what_it_cannot_build():
    with pytest.raises(RooflineError, match="mamba_d_head"):
        _model({**FALCON_H1_7B, "mamba_d_head": 64})  # 24 x 64 is not the 3072 inner width
    with pytest.raises(RooflineError, match="mamba_use_mlp"):
        _model({**FALCON_H1_7B, "mamba_use_mlp": False})
    assert "attn_layer_indices" in " ".join(_model({**FALCON_H1_7B, "attn_layer_indices": [0, 1]}).notes)
    assert _model({**FALCON_H1_7B, "mamba_new_thing": 3}).ignored_keys == ("mamba_new_thing",)
    plain = {k: v for k, v in FALCON_H1_7B.items() if "multiplier" not in k}  # the class's defaults: all 1
    assert not _model(plain).notes


def test_decode_and_serving_run_on_falcon_h1_7b(tmp_path, capsys):
    path = tmp_path / "falcon-h1-7b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(FALCON_H1_7B))
    assert main(["decode", "--model", str(path), "--batch", "1,16", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "KV cache + SSM state" in out and "flash attention" in out and "no attention" not in out
    assert main(["serving", "--model", str(path), "--concurrency", "4", "--requests", "8", "--input-len", "512",
                 "--output-len", "16"]) == 0
    assert "KV cache + SSM state" in capsys.readouterr().out
    assert main(["serving", "--model", str(path), "--tp", "2", "--concurrency", "4", "--requests", "8",
                 "--input-len", "512", "--output-len", "16"]) == 0
