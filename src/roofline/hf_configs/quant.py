"""The stored width of the weights: torch_dtype, and quantization_config as a WeightStorage of the
modules the format quantises, priced as stored (quant_parts: values, scales, zero points, group
indices). Formats: mxfp4, fp8, gptq, awq here; compressed-tensors, modelopt, fbgemm_fp8 and
bitsandbytes in quant_formats. A method, variant or skip list not understood is refused by name."""

from __future__ import annotations

import dataclasses
import math

from roofline.architecture import WeightStorage
from roofline.errors import RooflineError
from roofline.hf_configs.quant_parts import QUANTISED_PARTS, Scheme, priced, skip_rules


def _positive_number(q: dict, key: str, default, name: str, whole: bool = True):
    v = q.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0 or (whole and v != int(v)):
        raise RooflineError(f"{name}: quantization_config {key} must be a positive whole number, got {v!r}", field="model")
    return int(v) if whole else float(v)


def _skip_list(q: dict, name: str, *keys: str) -> tuple[list[str], str]:
    for key in keys:
        v = q.get(key)
        if v is None:
            continue
        if not isinstance(v, list):
            raise RooflineError(f"{name}: quantization_config {key} must be a list", field="model")
        return [str(m) for m in v], key
    return [], keys[0]


def _mxfp4(q, name, default):
    # OCP MX: 32 FP4 (E2M1) values share one 8-bit E8M0 scale: (32 x 4 + 8) / 32 = 4.25 bits
    scheme = Scheme("mxfp4 (4.25 bits: 4-bit values, one 8-bit scale per 32)", 4, scale_bytes=1, group=32)
    return {"experts": scheme}, (f"the routed experts' weight matrices are stored in MXFP4; attention, router, "
                                 f"embedding, LM head and biases at {default} (transformers' Mxfp4 quantizer "
                                 "converts experts only)"), []


FP8_ACTIVATION_SCHEMES = ("dynamic", "static")


def _fp8(q, name, default):
    """transformers' FineGrainedFP8 / vLLM's Fp8Config checkpoint: fp8 weights, per tensor or per
    weight_block_size block. vLLM runs it W8A8 (Fp8LinearMethod: inputs quantised to fp8 per token
    group of 128 for block weights, per tensor for dynamic or static activation_scheme; Marlin W8A16
    on a GPU without fp8 arithmetic), as SGLang and TensorRT-LLM do (Scheme.acts "fp8")."""
    scheme_of_acts = q.get("activation_scheme", "dynamic")
    if scheme_of_acts not in FP8_ACTIVATION_SCHEMES:
        raise RooflineError(f"{name}: quantization_config activation_scheme {scheme_of_acts!r} is not read (read: "
                            f"{', '.join(FP8_ACTIVATION_SCHEMES)}, as vLLM's Fp8Config)", field="model")
    block = q.get("weight_block_size")
    if block:
        if not isinstance(block, list) or len(block) != 2:
            raise RooflineError(f"{name}: quantization_config weight_block_size must be [rows, cols], got {block!r}",
                                field="model")
        bh, bw = (_positive_number({"weight_block_size": b}, "weight_block_size", None, name) for b in block)
        # transformers' FP8Linear: fp8 values and weight_scale_inv, one fp32 per (bh x bw) block
        scheme = Scheme(f"fp8 ({bh}x{bw} blocks, fp32 scales)", 8, scale_bytes=4, block=(bh, bw), acts="fp8")
    else:
        scheme = Scheme("fp8 (per-tensor scale)", 8, tensor_bytes=4, acts="fp8")
    return dict.fromkeys(QUANTISED_PARTS, scheme), f"embedding, LM head, router and norms at {default}", []


def _gptq_awq(q, method, name, default):
    assumed = []
    if "bits" not in q and "w_bit" not in q:
        raise RooflineError(f"{name}: quantization_config {method} gives no bits (or w_bit): the stored width "
                            "is not guessed", field="model")
    for key in ("modules_in_block_to_quantize", "dynamic"):  # quantise some modules only, or some otherwise (GPTQModel)
        if q.get(key):
            raise RooflineError(f"{name}: {method} {key} (which modules are quantised, and how) is not read: remove "
                                "quantization_config and set the weight width with --weights", field="model")
    bits = _positive_number(q, "bits" if "bits" in q else "w_bit", None, name)
    if bits not in (2, 3, 4, 8):
        raise RooflineError(f"{name}: {method} bits {bits} is not one of 2, 3, 4, 8", field="model")
    if "group_size" not in q and "q_group_size" not in q:
        assumed.append(f"{method}: no group_size given: 128, the default of transformers' {method.upper()}Config")
    group = q.get("group_size", q.get("q_group_size", 128))
    packing = str(q.get("checkpoint_format") or q.get("version") or method).lower()
    if packing not in ("gptq", "gptq_v2", "awq", "gemm"):
        raise RooflineError(f"{name}: {method} checkpoint_format/version {packing!r} is not read (known: gptq, gptq_v2 "
                            "for GPTQ; gemm for AWQ): its packing differs", field="model")
    # AutoGPTQ's and AutoAWQ's QuantLinear: packed int32 values, an fp16 scale and a packed zero (bits/8 B) per
    # group of each output (qzeros are stored symmetric or not); AutoGPTQ's QuantLinear also registers g_idx, one
    # int32 per input channel, whatever desc_act, and saves it (group_size -1: one group of all K inputs)
    g_idx = 4.0 if method == "gptq" else 0.0
    if group == -1:
        if method != "gptq":
            raise RooflineError(f"{name}: awq group_size -1 is not read", field="model")
        scheme = Scheme(f"int{bits} (gptq, one fp16 scale + zero per output channel, int32 g_idx)", bits, 2.0, bits / 8,
                        rows=True, input_bytes=g_idx)
    else:
        group = _positive_number({"group_size": group}, "group_size", None, name)
        extra = ", int32 g_idx" if g_idx else ""
        scheme = Scheme(f"int{bits} ({method}, group {group}: fp16 scale + zero per group{extra})", bits, 2.0, bits / 8,
                        group=group, input_bytes=g_idx)
    return dict.fromkeys(QUANTISED_PARTS, scheme), f"embedding and LM head at {default}", assumed


def _gptq(q, name, default):
    return _gptq_awq(q, "gptq", name, default)


def _awq(q, name, default):
    return _gptq_awq(q, "awq", name, default)


def _method(q: dict) -> str:
    method = str(q.get("quant_method", "")).lower()
    producer = q.get("producer")
    if not method and isinstance(producer, dict) and str(producer.get("name", "")).lower() == "modelopt":
        return "modelopt"  # ModelOpt's exports write its producer and no quant_method (Qwen3-32B-FP8-Static-PerTensor)
    if not method and (q.get("load_in_4bit") is True or q.get("load_in_8bit") is True):
        return "bitsandbytes"  # transformers' BitsAndBytesConfig before it wrote quant_method
    return method


def weight_storage(q: dict, name: str, default: str, model, mtp_layers: int = 0) -> tuple[WeightStorage, list[str]]:
    """WeightStorage from a quantization_config for ``model`` (its parts and layers), and notes on
    what was read: the format, what it left at ``default``, what it assumed. ``mtp_layers``: the
    multi-token-prediction layers numbered after the model's, left out of the count (a skip list
    naming them changes nothing)."""
    from roofline.hf_configs import quant_formats

    if not isinstance(q, dict):
        raise RooflineError(f"{name}: quantization_config must be an object", field="model")
    method = _method(q)
    readers = {"mxfp4": _mxfp4, "fp8": _fp8, "gptq": _gptq, "awq": _awq, **quant_formats.READERS}
    if method not in readers:
        raise RooflineError(f"{name}: quantization_config quant_method {method or '(none)'!r} is not understood "
                            f"(known: {', '.join(sorted(readers))}); remove it and set the weight width with --weights",
                            field="model")
    skip, key = _skip_list(q, name, *quant_formats.SKIP_KEYS.get(method, ("modules_to_not_convert", "ignored_layers")))
    if any(getattr(k.mixer, "gate_rank", 0) for k in model.kinds) and any("self_attn" in m for m in skip):
        raise RooflineError(f"{name}: quantization_config {key} names self_attn modules, which in Kimi Linear are its "
                            "Kimi Delta Attention layers as well as its MLA ones: not read (remove quantization_config "
                            "and set the weight width with --weights)", field="model")
    rules, loose = skip_rules(skip, name, model.n_layers, key, mtp_layers, model.model_type)
    schemes, kept, assumed = readers[method](q, name, default)
    if method == "mxfp4" and any(r.part == "experts" for r in rules):
        raise RooflineError(f"{name}: mxfp4 with the experts in modules_to_not_convert is not understood", field="model")
    if not model.is_moe or any(r.part == "router" for r in rules):
        assumed = [n for n in assumed if n != quant_formats.ROUTER_NOTE.format(d=default)]
    kept_by = "the checkpoint's skip list"
    if method == "modelopt" and quant_formats.modelopt_mixed(q):
        rules += quant_formats.mixed_rules(q, name, model, mtp_layers)  # after the exclusions: they win, as in vLLM
        kept_by = "not being in quantized_layers (or by exclude_modules)"
    storage, said = priced(model, schemes, rules, default, method, kept_by)
    if method == "modelopt" and quant_formats.modelopt_kv(q):
        storage = dataclasses.replace(storage, kv_cache=quant_formats.modelopt_kv(q))
    labels = [*(schemes[p].label for p, _, _ in storage.parts if p in schemes), *(r.scheme.label for r in rules if r.scheme)]
    stored = "; ".join(dict.fromkeys(labels))
    head = f"{method}: weights stored as {stored or default}; {kept}"
    return storage, [head, *said, *loose, *assumed]


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def checkpoint_dtype(raw: dict) -> str:
    d = str(raw.get("torch_dtype") or raw.get("dtype") or "bfloat16")
    return TORCH_DTYPES.get(d, "bf16")


def dtype_note(raw: dict, preset: bool = False) -> list[str]:
    """A torch_dtype the loader does not know, or none at all (outside a preset), is said, with what
    it was taken as."""
    d = raw.get("torch_dtype") or raw.get("dtype")
    if d is None and "quantization_config" not in raw and not preset:
        return ["the config names no torch_dtype: weights taken as bf16, as most checkpoints since 2023 store them "
                "(GPT-2's and other older ones are fp32: --weights fp32 or --dtype fp32 to say so)"]
    if d is None or str(d) in TORCH_DTYPES:
        return []
    return [f"torch_dtype {d!r} not understood: weights taken as bf16 (use --weights/--dtype to say otherwise)"]
