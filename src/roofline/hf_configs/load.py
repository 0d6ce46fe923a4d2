"""from_hf_config: a config.json dict to a Model. Unwraps a nested text_config, dispatches on
model_type to the loader registered for it, and sets the weights' storage from quantization_config."""

from __future__ import annotations

import dataclasses

from roofline.architecture import LeftOut, Model, WeightStorage
from roofline.errors import RooflineError
import roofline.hf_configs.llama as llama  # the order SUPPORTED was filled in before
import roofline.hf_configs.moe as moe
import roofline.hf_configs.gpt as gpt
import roofline.hf_configs.ssm as ssm
import roofline.hf_configs.hybrid as hybrid
import roofline.hf_configs.mimo as mimo
import roofline.hf_configs.minimax as minimax
import roofline.hf_configs.nvidia as nvidia
import roofline.hf_configs.step as step
from roofline.hf_configs.keys import COST_NEUTRAL, Keys
from roofline.hf_configs.quant import checkpoint_dtype, dtype_note, weight_storage
from roofline.hf_configs.shared import SUPPORTED, ignored_key_note

FAMILIES = (llama, moe, gpt, ssm, hybrid, mimo, minimax, nvidia, step)  # importing them registers their loaders in SUPPORTED

NESTED = {"gemma3": "gemma3_text", "llama4": "llama4_text", "kimi_k25": "kimi_k2",  # Kimi K2.5: K2's text model
          "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text",  # Qwen3-VL: Qwen3 (MoE) language models
          "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text",  # Qwen3.5 / 3.6
          "gemma4": "gemma4_text", "minimax_m3_vl": "minimax_m3",
          "mistral3": "mistral"}  # Mistral Small 3.1 / 3.2: Mistral Small 3's text model
# other model_types a nested text_config may carry for the same language model: NVIDIA's Kimi K2.5 NVFP4 exports name
# K2's text model deepseek_v3, the architecture K2 is (its loader is DeepSeek-V3's)
NESTED_ALSO = {"kimi_k25": ("deepseek_v3",)}
# a wrapper's own keys for the projector between its vision tower and the language model: left out with the tower
NESTED_VISION_KEYS = {"mistral3": ("projector_hidden_act", "vision_feature_layer", "multimodal_projector_bias",
                                   "spatial_merge_size")}


def from_hf_config(raw: dict, name: str = "model", preset: bool = False) -> Model:
    """A Model from a config.json dict (see the roofline.hf_configs docstring); ``preset``: one of
    data/models.toml's, whose stored keys leave out torch_dtype (bf16, as published) unsaid."""
    if not isinstance(raw, dict):
        raise RooflineError(f"{name}: a config.json must hold a JSON object", field="model")
    model_type = raw.get("model_type")
    if model_type is None and isinstance(raw.get("quantization"), dict) and "producer" in raw:
        raise RooflineError(f"{name}: this is a ModelOpt hf_quant_config.json, the companion of a checkpoint's "
                            "config.json, not a model config: pass the config.json beside it (its quantisation is "
                            "read from there)", field="model")
    if model_type is None and "ssm_cfg" in raw:
        model_type = "mamba_ssm"
    omitted: list[LeftOut] = []
    outer_keys: list[str] = []
    top = raw
    if model_type is not None and not isinstance(model_type, str):
        raise RooflineError(f"{name}: model_type must be a string such as \"llama\", got {model_type!r}", field="model")
    if model_type in NESTED:
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise RooflineError(f"{name}: model_type {model_type!r} keeps its language model in text_config, which is "
                                "missing", field="model")
        if raw.get("vision_config") is not None:
            omitted.append(LeftOut("vision", "vision_config", "vision tower and multimodal projector (vision_config): not "
                                   "counted; costs are the language model's"))
        if raw.get("audio_config") is not None:
            omitted.append(LeftOut("audio", "audio_config", "audio tower (audio_config): not counted; costs are the "
                                   "language model's"))
        inner = dict(text)
        inner.setdefault("model_type", NESTED[model_type])
        if inner["model_type"] != NESTED[model_type] and inner["model_type"] not in NESTED_ALSO.get(model_type, ()):
            raise RooflineError(f"{name}: a {model_type!r} config keeps a {NESTED[model_type]!r} language model in "
                                f"text_config; its model_type is {inner['model_type']!r}", field="model")
        for k in ("tie_word_embeddings", "torch_dtype", "quantization_config"):
            if k in raw and k not in inner:
                inner[k] = raw[k]
        known_top = {"text_config", "vision_config", "audio_config", "tie_word_embeddings", "torch_dtype", "quantization_config",
                     *NESTED_VISION_KEYS.get(model_type, ())}
        outer_keys = [k for k in sorted(raw) if k not in known_top and k not in COST_NEUTRAL and not k.startswith("_")]
        raw, model_type = inner, inner["model_type"]
    if model_type not in SUPPORTED:
        shown = "(none)" if model_type is None else repr(model_type)
        loadable = {t for t, fn in SUPPORTED.items() if not getattr(fn, "not_yet", False)}  # less those refused by name
        raise RooflineError(f"{name}: model_type {shown} is not supported; supported: {', '.join(sorted({*loadable, *NESTED}))}",
                            field="model")
    keys = Keys({k: v for k, v in raw.items() if k != "quantization_config"}, str(top.get("_name_or_path") or name))
    try:
        model = SUPPORTED[model_type](keys)
    except RooflineError as exc:  # a layer's own check: say which config it came from
        if keys.name in str(exc):
            raise
        raise RooflineError(f"{keys.name} (model_type {model_type!r}): {exc}", field="model") from None
    storage, qnotes = (WeightStorage(checkpoint_dtype(raw), assumed=not preset and (raw.get("torch_dtype") or raw.get("dtype")) is None), [])
    if raw.get("quantization_config") is not None:
        # DeepSeek's multi-token-prediction layers follow the model's (layer 61 of V3's 61): a skip list may name them
        mtp = raw.get("num_nextn_predict_layers")
        storage, qnotes = weight_storage(raw["quantization_config"], name, checkpoint_dtype(raw), model,
                                   mtp if isinstance(mtp, int) and not isinstance(mtp, bool) and 0 < mtp < 100 else 0)
        present = {p for layer in model.kinds for p, n in layer.parts(model.d_model).items() if n} | {"lm_head"}
        if storage.method == "mxfp4" and "experts" not in present:
            raise RooflineError(f"{name}: quantization_config mxfp4 quantises experts, and this model has none",
                                field="model")
        storage = dataclasses.replace(storage, parts=tuple(p for p in storage.parts if p[0] in present))
    top_context = 0
    for k in ("max_position_embeddings", "n_positions"):  # the trained length, where the config gives it
        if keys.get(k) is not None:
            top_context = keys.pos(k)
            break
    return dataclasses.replace(model, storage=storage, omitted=model.omitted + tuple(omitted),
                               notes=tuple(map(ignored_key_note, outer_keys)) + model.notes + tuple(qnotes) + tuple(dtype_note(raw, preset)),
                               ignored_keys=tuple(outer_keys) + model.ignored_keys,
                               model_type=str(model_type),
                               max_context=int(top_context))
