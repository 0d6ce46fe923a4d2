"""Model presets (src/roofline/data/models.toml) against the parameter counts their publishers give.

The published counts below are the independent truth: each literal was typed in from the cited
publication, never printed by the code under test. "HF safetensors total" means the Hugging Face
Hub's count of the tensors stored in the checkpoint (model API field ``safetensors.total``;
``model.safetensors.index.json`` gives the same as ``total_size`` = 2 bytes x count in bf16).
"""

from __future__ import annotations

import json
import os
import sys
from importlib import resources

import pytest

from roofline.errors import RooflineError
from roofline.transformer import (
    active_params,
    count_params,
    get_model,
    hf_config_to_model,
    kv_cache_bytes_per_token,
    list_models,
    load_hf_config,
    matmul_params,
    weight_bytes,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# key: (exact published total, where it is published)
PUBLISHED_TOTAL = {
    # HF safetensors total of meta-llama/Meta-Llama-3-8B and meta-llama/Llama-3.1-8B (index.json
    # total_size 16,060,522,496 bytes = 2 x 8,030,261,248); KerasHub preset llama3_8b_en "params".
    "llama3-8b": 8_030_261_248,
    # HF safetensors total of meta-llama/Llama-3.1-70B (same shapes as Meta-Llama-3-70B; the Hub
    # page shows 70.6B for both).
    "llama3-70b": 70_553_706_496,
    # the same totals for the Llama 3.1 presets (Llama 3's shapes, longer positions: no weights)
    "llama3.1-8b": 8_030_261_248,
    "llama3.1-70b": 70_553_706_496,
    # HF safetensors total of meta-llama/Llama-3.3-70B-Instruct (Llama 3.1 70B's shapes, the same count:
    # https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct)
    "llama3.3-70b": 70_553_706_496,
    # HF safetensors total of meta-llama/Llama-3.1-405B (its old key llama3-405b an alias).
    "llama3.1-405b": 405_853_388_800,
    # KerasHub preset llama2_7b_en "params" (= transformers num_parameters() of
    # meta-llama/Llama-2-7b-hf). The Hub's safetensors total is 6,738,417,664: see
    # test_llama2_hub_totals_include_rotary_buffers.
    "llama2-7b": 6_738_415_616,
    # transformers num_parameters() of meta-llama/Llama-2-13b-hf (Hub safetensors total
    # 13,015,866,880 less the rotary buffers, see below).
    "llama2-13b": 13_015_864_320,
    # transformers num_parameters() of meta-llama/Llama-2-70b-hf (Hub safetensors total
    # 68,976,653,312 less the rotary buffers, see below).
    "llama2-70b": 68_976_648_192,
    # HF safetensors total of mistralai/Mistral-7B-v0.1; KerasHub preset mistral_7b_en "params".
    "mistral-7b": 7_241_732_096,
    # HF safetensors total of mistralai/Mixtral-8x7B-v0.1; KerasHub preset mixtral_8_7b_en
    # "params"; Mistral AI's "Mixtral of experts" post (2023-12-11) rounds it to "46.7B".
    "mixtral-8x7b": 46_702_792_704,
    # HF safetensors total of Qwen/Qwen2.5-7B (and -Instruct); the model card rounds it to 7.61B.
    "qwen2.5-7b": 7_615_616_512,
    # KerasHub presets gpt2_base_en / medium / large / extra_large "params" (= transformers
    # GPT2LMHeadModel num_parameters() of openai-community/gpt2*, lm_head tied). Radford et al.
    # 2019, Table 2, printed 117M / 345M / 762M / 1542M; the openai/gpt-2 README says those
    # counts were wrong and names the checkpoints 124M / 355M / 774M / 1558M. The Hub's
    # safetensors totals (137M for gpt2) are larger because those checkpoints also store each
    # layer's 1024 x 1024 causal-mask buffer (attn.bias), which is not a parameter.
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    # Exact published totals of the 2024-2025 presets: the Hub's safetensors total (or the
    # model.safetensors.index.json total_size / 2 of an all-bf16 checkpoint), as quoted in the
    # sources named; KerasHub preset "params" where it is the source.
    "llama3.2-1b": 1_235_814_400,  # Hub total of meta-llama/Llama-3.2-1B(-Instruct)
    "llama3.2-3b": 3_212_749_824,  # Hub total of meta-llama/Llama-3.2-3B-Instruct (same shapes)
    "qwen2.5-72b": 72_706_203_648,  # Hub total of Qwen/Qwen2.5-72B-Instruct; model card "72.7B"
    "qwen3-8b": 8_190_735_360,  # Hub total; index total_size 16,381,470,720 = 2 x this
    "qwen3-32b": 32_762_123_264,  # Hub total; index total_size 65,524,246,528 = 2 x this
    "gemma2-9b": 9_241_705_984,  # KerasHub gemma2_9b_en "params"; Hub page "9.24B"
    "gemma2-27b": 27_227_128_320,  # KerasHub gemma2_27b_en "params"; Hub page "27.2B"
    "gemma3-1b": 999_885_952,  # KerasHub gemma3_1b "params"; Hub total of gemma-3-1b-it
    "mistral-small-24b": 23_572_403_200,  # Hub total (BF16) of Mistral-Small-24B-Base-2501; page "23.6B"
    "phi2": 2_779_683_840,  # Hub safetensors.parameters F16 of microsoft/phi-2
    "phi3-mini": 3_821_079_552,  # Hub total of microsoft/Phi-3-mini-4k-instruct; card "3.8B"
    "phi4": 14_659_507_200,  # Hub total of microsoft/phi-4; page "14.7B"
    "pythia-6.9b": 6_857_302_016,  # Pythia README table (EleutherAI), "Naming convention and parameter count"
}

# The newest families' exact totals by hand, the arithmetic written in the family tests named (each
# also checked there against its publisher's figure, and below against the rounded one).
HAND_TOTAL = {
    "qwen3-next-80b-a3b": 79_674_391_296,  # tests/test_hybrid_linear.py, Qwen3-Next 80B
    "qwen3.5-397b-a17b": 396_346_350_336,  # tests/test_hybrid_linear.py, Qwen3.5-397B (language model)
    "glm-5": 743_911_199_232,  # tests/test_sparse_attention.py, GLM-5
    "glm-4.5-air": 106_852_245_504,  # tests/test_architectures.py, GLM-4.5-Air
    "gemma-4-31b": 30_697_345_280,  # tests/test_new_families_2.py, Gemma 4 31B (language model)
    # tests/test_architectures.py, MiniMax-M2.5: 62 x 3,668,718,592 a layer + 2 x 200,064 x 3072 + 3072
    "minimax-m2.5": 228_689_748_992,
    # tests/test_quant_formats.py, Kimi K2.5: 60 x 384 x 3 x 7168 x 2048 = 1,014,686,023,680 experts + the
    # rest 11,722,185,728
    "kimi-k2.5": 1_026_408_209_408,
    # tests/test_new_families.py: Nano 23 x 38,744,896 + 23 x 1,297,468,032 + 6 x 23,399,040 + 704,643,072 + 2688;
    # Super 40 x 2,873,102,336 + 40 x 109,640,064 + 8 x 35,655,680 + 1,073,741,824 + 4096
    "nemotron-3-nano-30b-a3b": 31_577_937_344,
    "nemotron-3-super-120b-a12b": 120_668_687_360,
}

# Presets whose publisher prints a rounded total: (published figure, half its last printed digit,
# what it counts). A vision tower the preset leaves out is subtracted as the publisher sizes it.
PUBLISHED_ROUNDED = {
    # gpt-oss model card (arXiv:2508.10925, Table 1): 116.83B and 20.91B total
    "gpt-oss-120b": (116.83e9, 0.005e9),
    "gpt-oss-20b": (20.91e9, 0.005e9),
    # DeepSeek-V3 README: "671B" main-model parameters (685B on the Hub with the 14B MTP module)
    "deepseek-v3": (671e9, 0.5e9),
    # Qwen3 model cards: "30.5B" and "235B" in total
    "qwen3-30b-a3b": (30.5e9, 0.05e9),
    "qwen3-235b-a22b": (235e9, 0.5e9),
    # Qwen1.5-MoE-A2.7B README: "14.3B parameters in total"
    "qwen1.5-moe-a2.7b": (14.3e9, 0.05e9),
    # Mistral AI "Cheaper, Better, Faster, Stronger" (Mixtral 8x22B): "141B"
    "mixtral-8x22b": (141e9, 0.5e9),
    # Llama 4 model card: Maverick "400B (Total)"; the text model alone, the 0.8B vision tower aside,
    # is still 400B to the card's precision
    "llama4-maverick": (400e9, 1.5e9),
    # Jamba paper (arXiv:2403.19887) and the 1.5 Mini card: "52B total available parameters"
    "jamba": (52e9, 0.5e9),
    # names only: "Nemotron-H 8B", "Mamba-2 2.7B"
    "nemotron-h-8b": (8e9, 0.5e9),
    "mamba2-2.7b": (2.7e9, 0.05e9),
    # Qwen3-Next-80B-A3B card (https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct): "80B in total"
    "qwen3-next-80b-a3b": (80e9, 0.5e9),
    # GLM-5 card (https://huggingface.co/zai-org/GLM-5) and report (arXiv:2602.15763): "744B parameters"
    "glm-5": (744e9, 0.5e9),
    # Gemma 4 31B: 30.7B for the language model (https://huggingface.co/google/gemma-4-31B-it;
    # https://huggingface.co/nvidia/Gemma-4-31B-IT-NVFP4, "Number of model parameters: 30.7B")
    "gemma-4-31b": (30.7e9, 0.05e9),
    # Nemotron 3 Nano card (https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16): 31.6B total
    "nemotron-3-nano-30b-a3b": (31.6e9, 0.05e9),
    # Nemotron 3 Super (https://research.nvidia.com/labs/nemotron/Nemotron-3-Super): "120B total", a name
    # as much as a count (ours 120.67B, the MTP layer apart): within 1%, as tests/test_new_families.py
    "nemotron-3-super-120b-a12b": (120e9, 1.2e9),
    # MiniMax-M2 card (https://huggingface.co/MiniMaxAI/MiniMax-M2; M2.5 the same backbone): "230 billion
    # total parameters", two digits
    "minimax-m2.5": (230e9, 5e9),
    # Kimi K2.5 card (https://huggingface.co/moonshotai/Kimi-K2.5): "1T" total, one digit
    "kimi-k2.5": (1e12, 0.5e12),
}

# Active parameters per token, with the publisher's own convention for the embeddings.
# gpt-oss counts the unembedding but not the embedding table (a lookup): 3.61B / 5.13B (card,
# Table 1); the others count both (Mixtral 12.9B: 12.88B with, 12.75B without; Llama 4 17B:
# 17.2B with, 16.1B without; Qwen3-30B-A3B 3.3B: 3.35B with, 3.04B without).
PUBLISHED_ACTIVE = {
    "gpt-oss-120b": (5.13e9, 0.005e9, False),
    "gpt-oss-20b": (3.61e9, 0.005e9, False),
    "deepseek-v3": (37e9, 0.6e9, True),  # "37B activated": 37.55B with embeddings; the README does not say which
    "qwen3-30b-a3b": (3.3e9, 0.06e9, True),
    "qwen3-235b-a22b": (22e9, 0.5e9, True),
    "qwen1.5-moe-a2.7b": (2.7e9, 0.05e9, True),
    "mixtral-8x7b": (12.9e9, 0.05e9, True),
    "mixtral-8x22b": (39e9, 0.5e9, True),
    "llama4-scout": (17e9, 0.5e9, True),
    "llama4-maverick": (17e9, 0.5e9, True),
    "jamba": (12e9, 0.5e9, True),
    # Qwen3.5-397B-A17B card: "17B activated" (17.35B with both tables)
    "qwen3.5-397b-a17b": (17e9, 0.5e9, True),
    # Nemotron 3 Nano card: "3.6B including embeddings" (3.2B without)
    "nemotron-3-nano-30b-a3b": (3.6e9, 0.05e9, True),
}

# Gemma 3 27B: the Hub checkpoint's 27,432,406,640 (kvfit registry; KerasHub medgemma 27B) holds
# the language model, the SigLIP tower and the projector; the Gemma 3 report (arXiv:2503.19786,
# Table 1) gives the vision encoder as 417M. The preset counts the language model only.
GEMMA3_27B_CHECKPOINT = 27_432_406_640
GEMMA3_VISION_TEXT = 417e6
# Llama 4 Scout: "109B (Total)" on the card counts the vision tower too; the text model alone is
# smaller by the tower (the card gives no figure for it; its config: 34 layers of width 1408).
LLAMA4_SCOUT_TOTAL = 109e9

# GPT-3 has no public checkpoint. Brown et al. 2020, Table 2.1, gives "175.0B" for GPT-3 175B
# (96 layers, d_model 12288, 96 heads, d_head 128, context 2048). The exact count implied by that
# table with the GPT-2 layout the paper says it follows (section 2.1: learned positions,
# LayerNorm, biases, d_ff = 4 d_model, 50257-token vocabulary, tied embeddings) is about
# 174.6B, so the paper's figure is a rounded label; compare to 0.5%.
GPT3_PUBLISHED = 175e9
GPT3_TOLERANCE = 0.005

# DeepSeek-V3.2 is DeepSeek-V3 (671B, above) with an indexer a layer: test_deepseek_v32_is_v3_with_an_indexer_a_layer
ALL_PRESETS = sorted({*PUBLISHED_TOTAL, *PUBLISHED_ROUNDED, *HAND_TOTAL, "gemma3-27b", "llama4-scout", "gpt3-175b",
                      "deepseek-v3.2"})


def _preset_tables() -> dict:
    """The data file itself, parsed independently of the loader."""
    text = resources.files("roofline").joinpath("data/models.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["models"]


# ---------------------------------------------------------------------------------------------
# The data file
# ---------------------------------------------------------------------------------------------


def test_every_preset_is_checked_against_a_published_count():
    assert sorted(m.key for m in list_models()) == sorted(ALL_PRESETS)
    assert sorted(_preset_tables()) == sorted(ALL_PRESETS)


@pytest.mark.parametrize("key", ALL_PRESETS)
def test_preset_has_name_and_source(key):
    table = _preset_tables()[key]
    assert isinstance(table.get("name"), str) and table["name"].strip()
    assert isinstance(table.get("source"), str) and table["source"].strip()
    assert get_model(key).name == table["name"]
    assert get_model(key).key == key


@pytest.mark.parametrize("key", ALL_PRESETS)
def test_preset_config_is_read_without_a_word_left_over(key):
    # a preset is a published config.json's architecture keys: the loader must understand all of them
    table = _preset_tables()[key]
    config = table.get("config") or json.loads(
        resources.files("roofline").joinpath("data", *table["config_file"].split("/")).read_text(encoding="utf-8"))
    assert "model_type" in config or "ssm_cfg" in config
    assert get_model(key).ignored_keys == ()


def test_get_model_normalises_the_key():
    assert get_model("LLAMA3-8B") is get_model("llama3-8b")
    assert get_model("gpt2_medium") is get_model("gpt2-medium")
    assert get_model("Qwen2.5-7B") is get_model("qwen2.5-7b")


def test_unknown_preset_is_a_roofline_error():
    with pytest.raises(RooflineError, match="llama3-8b"):
        get_model("llama3-8")


# ---------------------------------------------------------------------------------------------
# Parameter counts against the published ones
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(PUBLISHED_TOTAL))
def test_total_params_equal_the_published_count(key):
    assert count_params(get_model(key))["total"] == PUBLISHED_TOTAL[key]


@pytest.mark.parametrize("key", sorted(PUBLISHED_ROUNDED))
def test_total_params_match_the_rounded_published_figure(key):
    figure, half_digit = PUBLISHED_ROUNDED[key]
    assert abs(count_params(get_model(key))["total"] - figure) <= half_digit


@pytest.mark.parametrize("key", sorted(PUBLISHED_ACTIVE))
def test_active_params_match_the_published_figure_with_its_convention(key):
    figure, half_digit, embeddings_in = PUBLISHED_ACTIVE[key]
    assert abs(active_params(get_model(key), embeddings=embeddings_in) - figure) <= half_digit


@pytest.mark.parametrize("key", sorted(HAND_TOTAL))
def test_total_params_equal_the_family_tests_hand_count(key):
    assert count_params(get_model(key))["total"] == HAND_TOTAL[key]


def test_deepseek_v32_is_v3_with_an_indexer_a_layer():
    # DeepSeek-V3.2 (https://huggingface.co/deepseek-ai/DeepSeek-V3.2) is V3's shapes plus a lightning
    # indexer a layer: wq_b 1,536 x (64 x 128) = 12,582,912, wk 7,168 x 128 = 917,504, k_norm 256,
    # weights_proj 7,168 x 64 = 458,752: 13,959,424 x 61 (tests/test_sparse_attention.py)
    assert count_params(get_model("deepseek-v3.2"))["total"] == count_params(get_model("deepseek-v3"))["total"] + 61 * 13_959_424
    assert get_model("deepseek-v3.2").storage.width("experts", 2.0) < 1.1  # its FP8 checkpoint, as published


def test_glm45_air_is_the_readmes_106b_truncated():
    # GLM-4.5 README (github.com/zai-org/GLM-4.5): "106 billion total parameters", 106.85B truncated
    assert int(count_params(get_model("glm-4.5-air"))["total"] // 1e9) == 106


def test_qwen35_397b_language_model_is_the_published_397b_less_its_vision_tower():
    # the card's "397B" counts the vision encoder (27 blocks of width 1152, ~0.4B); the language model
    # alone, [396B, 397.5B) as tests/test_hybrid_linear.py allows
    m = get_model("qwen3.5-397b-a17b")
    assert 396e9 <= count_params(m)["total"] < 397.5e9 and m.leaves_out("vision")


def test_kimi_k25_and_minimax_m25_store_their_weights_as_published():
    # Kimi K2.5's INT4 experts: tests/test_quant_formats.py's hand count, 570,761,994,240 B of experts
    # (int4, a bf16 scale per 32) + 2 x 11,722,185,728 B for the rest at bf16
    assert weight_bytes(get_model("kimi-k2.5")) == 594_206_365_696
    # MiniMax-M2.5's FP8 blocks: attention and experts fp8, the router and LM head bf16 (its skip list)
    m = get_model("minimax-m2.5")
    assert m.storage.width("experts", 2.0) < 1.1 and m.storage.width("router", 2.0) == 2.0
    assert m.storage.width("lm_head", 2.0) == 2.0


def test_llama3_405b_is_an_alias_of_llama31_405b():
    # there is no Llama 3 405B: the old key answers with the Llama 3.1 405B preset
    assert get_model("llama3-405b") is get_model("llama3.1-405b") is get_model("Llama3_405B")
    assert "llama3-405b" not in {m.key for m in list_models()}
    assert _preset_tables()["llama3.1-405b"]["aliases"] == ["llama3-405b"]


def test_models_lists_the_new_presets_and_says_the_alias(capsys):
    from roofline.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for key in [*HAND_TOTAL, "llama3.3-70b", "llama3.1-405b", "deepseek-v3.2"]:
        assert f"\n{key} " in out
    assert "llama3-405b = llama3.1-405b" in out


CORE_CONFIGS = {  # presets whose config.json aiconfigurator-core ships: the preset keeps every count of it
    "qwen3.5-397b-a17b": "Qwen--Qwen3.5-397B-A17B", "deepseek-v3.2": "deepseek-ai--DeepSeek-V3.2",
    "glm-5": "zai-org--GLM-5", "kimi-k2.5": "moonshotai--Kimi-K2.5", "minimax-m2.5": "MiniMaxAI--MiniMax-M2.5",
    "nemotron-3-nano-30b-a3b": "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "llama3.1-405b": "meta-llama--Meta-Llama-3.1-405B",
    "llama3.1-70b": "meta-llama--Meta-Llama-3.1-70B", "llama3.1-8b": "meta-llama--Meta-Llama-3.1-8B",
}


@pytest.mark.parametrize("key", sorted(CORE_CONFIGS))
def test_preset_counts_as_the_whole_published_config(key):
    # the keys a preset leaves out change no count: the published file gives the same parameters and bytes
    core = pytest.importorskip("aiconfigurator_core")
    raw = json.load(open(os.path.join(os.path.dirname(core.__file__), "model_configs", f"{CORE_CONFIGS[key]}_config.json")))
    full, preset = hf_config_to_model(raw, name=key), get_model(key)
    assert count_params(full) == count_params(preset) and weight_bytes(full) == weight_bytes(preset)
    assert active_params(full) == active_params(preset) and full.max_context == preset.max_context


def test_a_preset_config_file_outside_data_configs_is_refused():
    from roofline.model_sources import preset_from_table

    for bad in ("../models.toml", "/etc/x.json", "configs/absent.json", "configs/x.toml"):
        with pytest.raises(RooflineError, match="config_file"):
            preset_from_table("x", {"name": "x", "source": "y", "config_file": bad})
    with pytest.raises(RooflineError, match="one of config or config_file"):
        preset_from_table("x", {"name": "x", "source": "y", "config": {"model_type": "llama"},
                                "config_file": "configs/kimi-k2.5.json"})


# mistralai/Mistral-Small-3.1-24B-Instruct-2503 config.json (Hugging Face), as published: a mistral3 wrapper
# of Mistral Small 3's text model (32,768 positions there; 131,072 here, rope_theta 1e9) and a Pixtral tower
MISTRAL_SMALL_31 = {
    "architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10, "model_type": "mistral3",
    "multimodal_projector_bias": False, "projector_hidden_act": "gelu", "spatial_merge_size": 2,
    "text_config": {"attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
                    "initializer_range": 0.02, "intermediate_size": 32768, "max_position_embeddings": 131072,
                    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
                    "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0, "sliding_window": None, "use_cache": True,
                    "vocab_size": 131072},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"attention_dropout": 0.0, "head_dim": 64, "hidden_act": "silu", "hidden_size": 1024,
                      "image_size": 1540, "initializer_range": 0.02, "intermediate_size": 4096, "model_type": "pixtral",
                      "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 24, "patch_size": 14,
                      "rope_theta": 10000.0},
    "vision_feature_layer": -1,
}


def test_mistral3_unwraps_mistral_small_31_to_mistral_small_3s_text_model(tmp_path):
    # the text model is Mistral Small 24B (2501)'s: the Hub's 23,572,403,200 (PUBLISHED_TOTAL), the Pixtral
    # tower and projector left out and said; the projector's keys are the wrapper's, not "not understood"
    path = _write(tmp_path, "Mistral-Small-3.1-24B-Instruct-2503", json.dumps(MISTRAL_SMALL_31))
    m = load_hf_config(path)
    assert count_params(m) == count_params(get_model("mistral-small-24b"))
    assert count_params(m)["total"] == PUBLISHED_TOTAL["mistral-small-24b"]
    assert m.leaves_out("vision") and m.notes == ()
    assert (m.model_type, m.max_context, m.only_kind().mixer.span) == ("mistral", 131072, 0)
    with pytest.raises(RooflineError, match="'mistral' language model"):
        hf_config_to_model(dict(MISTRAL_SMALL_31, text_config=dict(MISTRAL_SMALL_31["text_config"], model_type="ministral3")))


def test_gemma3_27b_is_the_checkpoint_less_its_vision_tower():
    m = get_model("gemma3-27b")
    assert m.omitted and m.omitted[0].part == "vision"
    vision = GEMMA3_27B_CHECKPOINT - count_params(m)["total"]
    assert abs(vision - GEMMA3_VISION_TEXT) <= 0.015 * GEMMA3_27B_CHECKPOINT / 27  # the tower + projector, ~0.42B


def test_llama4_scout_text_model_is_the_total_less_a_vision_tower():
    m = get_model("llama4-scout")
    assert m.omitted and 0 < LLAMA4_SCOUT_TOTAL - count_params(m)["total"] < 2e9


def test_gpt3_total_matches_the_paper_to_its_precision():
    total = count_params(get_model("gpt3-175b"))["total"]
    assert abs(total - GPT3_PUBLISHED) <= GPT3_TOLERANCE * GPT3_PUBLISHED


@pytest.mark.parametrize(
    "key, hub_total",
    [
        ("llama2-7b", 6_738_417_664),  # HF safetensors total, meta-llama/Llama-2-7b-hf
        ("llama2-13b", 13_015_866_880),  # HF safetensors total, meta-llama/Llama-2-13b-hf
        ("llama2-70b", 68_976_653_312),  # HF safetensors total, meta-llama/Llama-2-70b-hf
    ],
)
def test_llama2_hub_totals_include_rotary_buffers(key, hub_total):
    """The Llama 2 *-hf checkpoints also store each layer's rotary ``inv_freq`` buffer (head_dim/2
    = 64 numbers per layer), which is not a parameter: the Hub total less L x 64 is the count."""
    cfg = get_model(key)
    assert count_params(cfg)["total"] == hub_total - cfg.n_layers * cfg.only_kind().mixer.head_dim // 2


def test_qwen25_7b_non_embedding_count_matches_the_model_card():
    # Qwen/Qwen2.5-7B model card: "Number of Paramaters (Non-Embedding): 6.53B" (two decimals),
    # which also says the 152064 x 3584 input and output embeddings are separate (untied).
    p = count_params(get_model("qwen2.5-7b"))
    non_embedding = p["total"] - p["embedding"] - p["lm_head"]
    assert abs(non_embedding - 6.53e9) <= 0.005e9
    assert p["lm_head"] == p["embedding"] > 0


def test_gpt2_lm_head_is_tied():
    p = count_params(get_model("gpt2"))
    assert p["lm_head"] == 0
    assert p["position"] == 1024 * 768


def test_mixtral_active_params_match_the_published_figure():
    # Mistral AI, "Mixtral of experts" (2023-12-11): "Mixtral has 46.7B total parameters but only
    # uses 12.9B parameters per token." The figure has 3 significant digits; compare to 1%.
    active = active_params(get_model("mixtral-8x7b"))
    assert abs(active - 12.9e9) <= 0.01 * 12.9e9


def test_dense_active_params_equal_total():
    for key in ("llama3-8b", "qwen2.5-7b", "gpt2"):
        cfg = get_model(key)
        assert active_params(cfg) == count_params(cfg)["total"]


def test_llama3_8b_matmul_params():
    # Published total 8,030,261,248
    #   - input embedding 128,256 x 4,096 = 525,336,576 (a gather, not a matmul)
    #   - norms (2 per layer x 32 layers + the final one) x 4,096 = 65 x 4,096 = 266,240
    #   = 7,504,658,432 (the untied LM head stays: it is a matmul against the vocabulary).
    assert matmul_params(get_model("llama3-8b")) == 7_504_658_432


def test_llama3_8b_kv_cache_bytes_per_token():
    # K and V (2) x 32 layers x 8 kv heads x 128 head dim x 2 bytes (bf16) = 131,072 bytes.
    assert kv_cache_bytes_per_token(get_model("llama3-8b"), "bf16") == 131_072
    # fp8 halves it.
    assert kv_cache_bytes_per_token(get_model("llama3-8b"), "fp8") == 65_536


# ---------------------------------------------------------------------------------------------
# Hugging Face config.json files
# ---------------------------------------------------------------------------------------------

# meta-llama/Meta-Llama-3-8B config.json
LLAMA3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}

# openai-community/gpt2 config.json (no tie_word_embeddings key, no n_inner: HF's defaults are
# tied embeddings and a 4 x n_embd MLP)
GPT2_CONFIG = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}

# mistralai/Mixtral-8x7B-v0.1 config.json
MIXTRAL_CONFIG = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.02,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}

# Qwen/Qwen2.5-7B config.json (q, k, v biases come from model_type qwen2, not from a key)
QWEN25_7B_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 131072,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

HF_CASES = [
    ("llama3-8b", "Meta-Llama-3-8B", LLAMA3_8B_CONFIG),
    ("gpt2", "gpt2", GPT2_CONFIG),
    ("mixtral-8x7b", "Mixtral-8x7B-v0.1", MIXTRAL_CONFIG),
    ("qwen2.5-7b", "Qwen2.5-7B", QWEN25_7B_CONFIG),
]


def _write(tmp_path, folder: str, content: str):
    d = tmp_path / folder
    d.mkdir(parents=True, exist_ok=True)
    path = d / "config.json"
    path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("key, folder, raw", HF_CASES, ids=[c[0] for c in HF_CASES])
def test_hf_config_file_gives_the_preset_and_published_total(tmp_path, key, folder, raw):
    path = _write(tmp_path, folder, json.dumps(raw, indent=2))
    cfg = load_hf_config(path)
    preset = get_model(key)
    assert count_params(cfg)["total"] == count_params(preset)["total"] == PUBLISHED_TOTAL[key]
    assert count_params(cfg) == count_params(preset)
    assert active_params(cfg) == active_params(preset)
    assert kv_cache_bytes_per_token(cfg) == kv_cache_bytes_per_token(preset)


def test_hf_config_dict_maps_llama3_fields():
    cfg = hf_config_to_model(LLAMA3_8B_CONFIG, name="llama")
    preset = get_model("llama3-8b")
    assert (cfg.kinds, cfg.order, cfg.d_model, cfg.vocab, cfg.tied_embeddings) == (
        preset.kinds, preset.order, preset.d_model, preset.vocab, preset.tied_embeddings)
    (layer,) = cfg.kinds
    a, mlp = layer.mixer, layer.mlp
    assert (a.heads, a.kv_heads, a.head_dim, a.span, mlp.d_ff, mlp.gated, cfg.n_layers) == (32, 8, 128, 0, 14336, True, 32)
    assert cfg.notes == ()  # every key of the published file understood


def test_get_model_accepts_a_config_json_path(tmp_path):
    path = _write(tmp_path, "gpt2", json.dumps(GPT2_CONFIG))
    assert count_params(get_model(str(path)))["total"] == PUBLISHED_TOTAL["gpt2"]


# ---------------------------------------------------------------------------------------------
# Malformed config.json files
# ---------------------------------------------------------------------------------------------


_DROP = object()


def _broken(**changes):
    raw = dict(LLAMA3_8B_CONFIG)
    for k, v in changes.items():
        if v is _DROP:
            raw.pop(k)
        else:
            raw[k] = v
    return json.dumps(raw)

MALFORMED = {
    "not-json": "{hidden_size: 4096,",
    "empty-file": "",
    "json-array": json.dumps([LLAMA3_8B_CONFIG]),
    "json-string": json.dumps("llama"),
    "missing-hidden-size": _broken(hidden_size=_DROP),
    "missing-vocab-size": _broken(vocab_size=_DROP),
    "heads-do-not-divide-d-model": _broken(num_attention_heads=30, num_key_value_heads=10),
    "kv-heads-do-not-divide-heads": _broken(num_key_value_heads=5),
    "negative-layers": _broken(num_hidden_layers=-1),
    "fractional-hidden-size": _broken(hidden_size=4096.5),
    "hidden-size-as-text": _broken(hidden_size="4096 units"),
    "experts-per-token-above-experts": json.dumps(dict(MIXTRAL_CONFIG, num_experts_per_tok=9)),
}


@pytest.mark.parametrize("content", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_config_is_a_roofline_error(tmp_path, content):
    path = _write(tmp_path, "broken", content)
    with pytest.raises(RooflineError):
        load_hf_config(path)


def test_missing_hidden_size_is_named(tmp_path):
    path = _write(tmp_path, "broken", MALFORMED["missing-hidden-size"])
    with pytest.raises(RooflineError, match="hidden_size"):
        load_hf_config(path)


def test_a_config_read_again_unchanged_is_the_model_read_then(tmp_path):
    # a sweep over deployments reads one config many times: parsed once, while its text is the same
    path = _write(tmp_path, "mixtral", json.dumps(MIXTRAL_CONFIG))
    first = load_hf_config(path)
    assert load_hf_config(path) is first
    assert load_hf_config(str(path)) == first  # the same file by another spelling: an equal model
    # the same size, one digit changed (a rewrite within the file system's time granularity keeps mtime and
    # size): the new text is read, 32 layers -> 16
    assert '"num_hidden_layers": 32' in path.read_text()
    path.write_text(path.read_text().replace('"num_hidden_layers": 32', '"num_hidden_layers": 16'))
    assert load_hf_config(path).n_layers == 16 and first.n_layers == 32
    # a ModelOpt companion put beside it changes what is read (its quantisation)
    (path.parent / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    again = load_hf_config(path)
    assert again is not first and any("hf_quant_config.json" in n for n in again.notes)
    with pytest.raises(RooflineError):  # and an error is never kept: a broken file refused every time
        (path.parent / "config.json").write_text("{")
        load_hf_config(path)
    with pytest.raises(RooflineError):
        load_hf_config(path)


def test_missing_config_file_is_a_roofline_error(tmp_path):
    with pytest.raises(RooflineError):
        load_hf_config(tmp_path / "absent" / "config.json")


def test_every_preset_config_file_is_package_data():
    """A wheel installs what pyproject's package-data globs match: every config_file among them."""
    import fnmatch
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("no pyproject.toml beside the tests")
    globs = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]["roofline"]
    files = [t["config_file"] for t in _preset_tables().values() if "config_file" in t]
    assert files and all(any(fnmatch.fnmatch(f"data/{f}", g) for g in globs) for f in files)


def test_deepseek_r1_is_an_alias_of_deepseek_v3():
    # https://huggingface.co/deepseek-ai/DeepSeek-R1: "671B" total parameters, "37B" activated, built on DeepSeek-V3-Base
    assert get_model("deepseek-r1") is get_model("deepseek-v3")
    assert abs(count_params(get_model("deepseek-r1"))["total"] - 671e9) < 0.5e9
