"""FLOPs accounting (seed 000 sections 2.3 and 3.2, exercise 4)."""

import pytest

from roofline import (
    H100_SXM,
    TransformerConfig,
    attention_flops_per_token_forward,
    count_params,
    flops_per_token,
    get_model,
    matmul_params,
    six_nd,
    training_flops,
    training_time_s,
)
from roofline.errors import RooflineError
from roofline.transformer import kv_cache_bytes_per_token, training_state_bytes, weight_bytes

DAY = 86400.0


@pytest.fixture
def llama():
    return get_model("llama3-8b")


def test_llama3_8b_published_parameter_count(llama):
    # Hugging Face safetensors metadata for Meta-Llama-3-8B: 8,030,261,248 parameters
    assert count_params(llama)["total"] == 8_030_261_248


def test_parts_add_up_to_total(llama):
    p = count_params(llama)
    assert sum(v for k, v in p.items() if k != "total") == p["total"]


def test_matmul_params_exclude_embedding_gather_include_lm_head(llama):
    p = count_params(llama)
    # 128256 * 4096 = 525,336,576 for the embedding; the LM head is a separate, equal-sized matmul
    assert p["embedding"] == 128256 * 4096
    assert matmul_params(llama) == p["attention"] + p["mlp"] + 128256 * 4096


def test_tied_model_still_counts_lm_head_as_matmul():
    tiny = TransformerConfig("tiny", d_model=8, n_layers=1, n_heads=2, vocab=10, d_ff=16, tied_embeddings=True, gated_mlp=False)
    p = count_params(tiny)
    assert p["lm_head"] == 0
    # attention 4*8*8 = 256, mlp 2*8*16 = 256, head 10*8 = 80
    assert matmul_params(tiny) == 256 + 256 + 80


def test_attention_flops_4lhs(llama):
    # 4 * 32 layers * 4096 * 2048 = 1,073,741,824
    assert attention_flops_per_token_forward(llama, 2048) == 4 * 32 * 4096 * 2048


def test_flops_per_token_train_is_6n_plus_12lhs(llama):
    n = matmul_params(llama)
    s = 4096
    assert flops_per_token(llama, s, "forward") == 2 * n + 4 * 32 * 4096 * s
    assert flops_per_token(llama, s) == 6 * n + 12 * 32 * 4096 * s
    assert flops_per_token(llama, s, recompute=True) == 8 * n + 16 * 32 * 4096 * s
    assert flops_per_token(llama, s) == 3 * flops_per_token(llama, s, "forward")


def test_flops_per_token_within_10_percent_of_6nd_at_short_context(llama):
    n_total = count_params(llama)["total"]
    per_token = flops_per_token(llama, 512)
    assert abs(per_token / six_nd(n_total, 1) - 1) < 0.10


def test_exercise_4_llama3_8b_15t_tokens_1024_h100(llama):
    n = count_params(llama)["total"]
    flops = six_nd(n, 15e12)
    assert flops == pytest.approx(7.2e23, rel=0.01)  # 6 * 8.03e9 * 1.5e13
    days = training_time_s(flops, 1024, H100_SXM.peak_flops, 0.40) / DAY
    assert days == pytest.approx(20.6, abs=0.05)
    # full recompute executes 4/3 as much (8N + 16Lhs against 6N + 12Lhs); at 40% HFU: 27.5 days
    executed = flops_per_token(llama, 8192, recompute=True) / flops_per_token(llama, 8192)
    assert executed == pytest.approx(4 / 3)
    hw_days = training_time_s(flops * executed, 1024, H100_SXM.peak_flops, 0.40) / DAY
    assert hw_days == pytest.approx(27.5, abs=0.05)


def test_training_flops_uses_the_full_formula(llama):
    assert training_flops(llama, 1e9, 4096) == flops_per_token(llama, 4096) * 1e9


def test_memory_bytes_per_param_and_kv_cache(llama):
    n = count_params(llama)["total"]
    assert weight_bytes(llama, "bf16") == 2 * n
    assert weight_bytes(llama, "fp8") == n
    assert weight_bytes(llama, "int4") == n / 2
    assert weight_bytes(llama, "fp32") == 4 * n
    assert training_state_bytes(llama) == 16 * n
    # 2 * 32 layers * 8 kv heads * 128 * 2 bytes = 131,072 = 128 KiB per token; 8192 tokens = 1 GiB
    assert kv_cache_bytes_per_token(llama) == 131072
    assert kv_cache_bytes_per_token(llama) * 8192 == 2**30


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(d_model=-1, n_layers=1, n_heads=1, vocab=10),
        dict(d_model=10, n_layers=0, n_heads=1, vocab=10),
        dict(d_model=10, n_layers=1, n_heads=3, vocab=10),  # 10 not divisible by 3
        dict(d_model=8, n_layers=1, n_heads=4, n_kv_heads=3, vocab=10),
        dict(d_model=8, n_layers=1, n_heads=2, vocab=10, n_experts=2, experts_per_token=3),
        dict(d_model=float("nan"), n_layers=1, n_heads=1, vocab=10),
    ],
)
def test_bad_configs_are_refused(kwargs):
    with pytest.raises(RooflineError):
        TransformerConfig("bad", **kwargs)


def test_bad_training_inputs(llama):
    with pytest.raises(RooflineError, match="mfu"):
        training_time_s(1e20, 8, 1e15, 1.5)
    with pytest.raises(RooflineError, match="gpus"):
        training_time_s(1e20, 0, 1e15, 0.4)
    with pytest.raises(RooflineError, match="mode"):
        flops_per_token(llama, 10, mode="inference")


def test_a_config_file_is_named_after_its_model_not_config(tmp_path, monkeypatch):
    """A config.json is named by its _name_or_path, else its folder (the working folder for a bare
    config.json), else its model_type; any other file by its own name: never 'config'."""
    import json

    from roofline.transformer import get_model

    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 100}
    folder = tmp_path / "Tiny-Llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "tiny.json").write_text(json.dumps(cfg))
    (folder / "hub.json").write_text(json.dumps({**cfg, "_name_or_path": "meta-llama/Tiny"}))
    (folder / "local.json").write_text(json.dumps({**cfg, "_name_or_path": "/ckpt/run-7/"}))
    assert get_model(str(folder / "config.json")).name == "Tiny-Llama"
    assert get_model(str(folder)).name == "Tiny-Llama"
    assert get_model(str(folder / "tiny.json")).name == "tiny"
    assert get_model(str(folder / "hub.json")).name == "meta-llama/Tiny"
    assert get_model(str(folder / "local.json")).name == "run-7"
    monkeypatch.chdir(folder)
    assert get_model("config.json").name == "Tiny-Llama"
