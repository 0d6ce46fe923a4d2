"""Loaders of the newer families shipped with aiconfigurator-core: Gemma 4, Kimi K3, MiniMax M3,
DeepSeek V4. Each counted by hand per layer kind and against its publisher's total. The configs'
shape keys are inline so the tests stand without the package; the package's own files are read
when it is installed."""

from __future__ import annotations

import json
import os

import pytest

from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.transformer import active_params, count_params


def _shipped(name: str) -> dict:
    core = pytest.importorskip("aiconfigurator_core")
    with open(os.path.join(os.path.dirname(core.__file__), "model_configs", name)) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------
# Gemma 4
# ---------------------------------------------------------------------------------------------

GEMMA4_TYPES = (["sliding_attention"] * 5 + ["full_attention"])


def _gemma4(text: dict) -> dict:
    """A Gemma4ForConditionalGeneration config as published: the language model in text_config."""
    return {"model_type": "gemma4", "text_config": {"model_type": "gemma4_text", **text}, "vision_config": {"hidden_size": 1152},
            "tie_word_embeddings": True, "dtype": "bfloat16"}


# google/gemma-4-26B-A4B config.json, the keys that shape the weights
GEMMA4_26B_A4B = {"hidden_size": 2816, "num_hidden_layers": 30, "num_attention_heads": 16, "num_key_value_heads": 8,
                  "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 2, "attention_k_eq_v": True,
                  "intermediate_size": 2112, "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8,
                  "moe_intermediate_size": 704, "vocab_size": 262144, "sliding_window": 1024,
                  "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "layer_types": GEMMA4_TYPES * 5,
                  "final_logit_softcapping": 30.0, "tie_word_embeddings": True}
# google/gemma-4-31B (nvidia/Gemma-4-31B-IT-NVFP4 ships the same text_config)
GEMMA4_31B = {"hidden_size": 5376, "num_hidden_layers": 60, "num_attention_heads": 32, "num_key_value_heads": 16,
              "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 4, "attention_k_eq_v": True,
              "intermediate_size": 21504, "enable_moe_block": False, "num_experts": None, "top_k_experts": None,
              "vocab_size": 262144, "sliding_window": 1024, "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
              "layer_types": GEMMA4_TYPES * 10, "final_logit_softcapping": 30.0, "tie_word_embeddings": True}


def test_gemma4_31b_counts_by_hand_and_to_its_published_total():
    """Sliding layer (32 heads, 16 kv heads of 256): q 5376 x 8192 = 44,040,192, k and v 5376 x 4096 =
    22,020,096 each, o 44,040,192, q/k norms 2 x 256 -> 132,121,088. Full layer (32 heads of 512, 4 kv
    heads, values = keys: no v_proj): q 5376 x 16384 = 88,080,384, k 5376 x 2048 = 11,010,048, o
    88,080,384, q/k norms 2 x 512 -> 187,171,840. MLP 3 x 5376 x 21504 = 346,816,512; 4 norms 21,504.
    50 x 478,959,104 + 10 x 534,009,856 + embedding 262144 x 5376 = 1,409,286,144 (tied) + final norm
    5376 = 30,697,345,280. Google's model card (https://huggingface.co/google/gemma-4-31B-it) and
    NVIDIA's (https://huggingface.co/nvidia/Gemma-4-31B-IT-NVFP4, "Number of model parameters: 30.7B";
    https://docs.api.nvidia.com/nim/reference/google-gemma-4-31b-it, "Total Parameters: 30.7B") give 30.7B for the language model (the ~550M vision encoder apart)."""
    m = from_hf_config(_gemma4(GEMMA4_31B))
    sliding = 44_040_192 + 2 * 22_020_096 + 44_040_192 + 512 + 346_816_512 + 21_504
    full = 88_080_384 + 11_010_048 + 88_080_384 + 1024 + 346_816_512 + 21_504
    total = count_params(m)["total"]
    assert total == 50 * sliding + 10 * full + 262144 * 5376 + 5376 == 30_697_345_280
    assert round(total / 1e9, 1) == 30.7
    assert m.leaves_out("vision")
    assert m.ignored_keys == ()  # the null MoE keys of a dense model are read
    full_attn = m.layer(5).mixer
    assert (full_attn.head_dim, full_attn.kv_heads, full_attn.k_eq_v, m.layer(0).mixer.window) == (512, 4, True, 1024)
    # K and V are both cached on the full layers: 4 x (512 + 512) a token
    assert full_attn.cache_elems_per_token() == 4096


def test_gemma4_26b_a4b_counts_by_hand_and_to_its_published_total_and_active():
    """Per layer: a dense gated MLP 3 x 2816 x 2112 = 17,842,176 beside 128 experts of 3 x 2816 x 704 =
    5,947,392 (761,266,176), a router 2816 x 128 = 360,448 with its input scale 2816 and per-expert scale
    128, 7 norms 19,712. Sliding attention (16 heads, 8 kv of 256): q and o 2816 x 4096 = 11,534,336
    each, k and v 2816 x 2048 = 5,767,168 each, norms 512 -> 34,603,520; full (16 heads of 512, 2 kv
    heads, no v_proj): q and o 23,068,672 each, k 2,883,584, norms 1024 -> 49,021,952. 25 sliding +
    5 full layers + embedding 262144 x 2816 = 738,197,504 (tied) + 2816 = 25,233,141,760. Google's card
    (https://huggingface.co/google/gemma-4-26B-A4B): 25.2B total, 3.8B active (the vision encoder
    apart). Active: 8 of 128 experts, 120 x 5,947,392 fewer a layer."""
    m = from_hf_config(_gemma4(GEMMA4_26B_A4B))
    ff = 17_842_176 + 128 * 5_947_392 + 360_448 + 2816 + 128 + 7 * 2816
    sliding, full = 34_603_520 + ff, 49_021_952 + ff
    total = count_params(m)["total"]
    assert total == 25 * sliding + 5 * full + 262144 * 2816 + 2816 == 25_233_141_760
    assert round(total / 1e9, 1) == 25.2
    active = total - 30 * 120 * 5_947_392
    assert active_params(m) == active and round(active / 1e9, 1) == 3.8


def test_gemma4_refuses_what_it_does_not_model():
    for key, value in (("hidden_size_per_layer_input", 256), ("num_kv_shared_layers", 20)):
        with pytest.raises(RooflineError, match="not yet supported"):
            from_hf_config(_gemma4({**GEMMA4_31B, key: value}))
    with pytest.raises(RooflineError, match="not yet supported"):
        from_hf_config(_gemma4({**GEMMA4_31B, "use_bidirectional_attention": "all"}))
    absent = {k: v for k, v in GEMMA4_31B.items() if k != "hidden_size_per_layer_input"}  # the class default is 256
    with pytest.raises(RooflineError, match="not yet supported"):
        from_hf_config(_gemma4(absent))


def test_gemma4_shipped_configs_load():
    for name in ("google--gemma-4-26B-A4B_config.json", "nvidia--Gemma-4-26B-A4B-NVFP4_config.json",
                 "nvidia--Gemma-4-31B-IT-NVFP4_config.json"):
        raw = _shipped(name)
        raw.pop("quantization_config", None)  # NVFP4: the storage format is another loader's; the count is the same
        total = count_params(from_hf_config(raw, name))["total"]
        assert total == (30_697_345_280 if "31B" in name else 25_233_141_760)


# ---------------------------------------------------------------------------------------------
# Families refused as not yet supported (docs/models.md, "Not yet supported")
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config, words", [
    ({"model_type": "kimi_k3", "text_config": {"model_type": "kimi_linear"}}, "Kimi Delta Attention"),
    ({"model_type": "kimi_linear", "routed_expert_hidden_size": 3584}, "latent MoE"),  # K3's text model
    ({"model_type": "deepseek_v4"}, "hyper-connections"),
    ({"model_type": "deepseek_ref"}, "compressed attention"),
])
def test_families_without_a_cost_model_are_refused_by_name(config, words):
    with pytest.raises(RooflineError, match="not yet supported") as exc:
        from_hf_config(config, "cfg")
    assert words in str(exc.value)


def test_shipped_configs_of_refused_families_say_not_yet_supported():
    for name in ("moonshotai--Kimi-K3_config.json",
                 "deepseek-ai--DeepSeek-V4-Flash_config.json", "deepseek-ai--DeepSeek-V4-Pro_config.json",
                 "sgl-project--DeepSeek-V4-Flash-FP8_config.json", "sgl-project--DeepSeek-V4-Pro-FP8_config.json"):
        with pytest.raises(RooflineError, match="not yet supported"):
            from_hf_config(_shipped(name), name)


def test_gemma4_full_layer_kernels_have_no_v_projection_and_the_router_its_scales():
    """Tiny Gemma 4: D 64, 4 heads; full layers of 2 kv heads x 32 with values = keys. One token:
    QKV proj 2 x 64 x (4 x 32 + 2 x 32) = 24,576 FLOPs (no 2 x 32 for v); the router 64 x 8 + 64 + 8."""
    from roofline.blocks import layer_kernels

    tiny = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "global_head_dim": 32, "num_global_key_value_heads": 2, "attention_k_eq_v": True, "intermediate_size": 96,
            "enable_moe_block": True, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 32, "vocab_size": 100,
            "sliding_window": 16, "hidden_size_per_layer_input": 0, "layer_types": ["sliding_attention", "full_attention"]}
    m = from_hf_config(_gemma4(tiny))
    full = m.layer(1)
    ops = {k.name: k for k in layer_kernels(full, 64, decode=True, T=1, B=1, S=10, attention="flash", dtype="bf16")}
    assert ops["QKV proj"].flops == 2 * 64 * (4 * 32 + 2 * 32) == 24_576
    assert full.mixer.params(64) == 64 * (4 * 32 + 2 * 32) + 4 * 32 * 64 + 2 * 32  # q, k, o, q/k norms
    assert full.mlp.router_params(64) == 64 * 8 + 64 + 8
    assert "values = keys" in full.label


def test_refused_families_are_not_listed_as_supported():
    with pytest.raises(RooflineError) as exc:
        from_hf_config({"model_type": "no_such_family"})
    listed = str(exc.value).split("supported: ")[1]
    assert "gemma4" in listed and not any(t in listed for t in ("kimi_k3", "deepseek_v4", "deepseek_ref"))
