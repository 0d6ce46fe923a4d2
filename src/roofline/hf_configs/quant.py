"""The stored width of the weights: torch_dtype, and quantization_config (mxfp4, fp8, gptq, awq) as
a WeightStorage of the modules the format quantises; a method or skip list not understood is refused."""

from __future__ import annotations

import math

from roofline.architecture import WeightStorage
from roofline.errors import RooflineError

QUANTISED_PARTS = ("attention", "ssm", "mlp", "experts", "shared_experts")


_PART_PATTERNS = (("shared_expert", "shared_experts"), ("experts", "experts"), ("router", "router"),
                  ("mlp.gate", "router"), ("self_attn", "attention"), ("attn", "attention"), ("mixer", "ssm"),
                  ("mamba", "ssm"), ("embed", "embedding"), ("lm_head", "lm_head"), ("mlp", "mlp"))


def _skipped_parts(skip: list[str], name: str) -> set[str]:
    """The parameter parts a modules_to_not_convert / ignored_layers list names; a pattern that
    names none is refused rather than guessed."""
    parts = set()
    for pattern in skip:
        hit = next((part for key, part in _PART_PATTERNS
                    if (pattern.endswith(key) if key == "mlp.gate" else key in pattern)), None)
        if hit is None:
            raise RooflineError(f"{name}: quantization_config skips {pattern!r}, which names no module this tool "
                                "prices apart (attention, mlp, experts, shared experts, ssm, router, embedding, "
                                "lm_head)", field="model")
        if hit == "mlp" and "expert" not in pattern:
            parts |= {"mlp", "experts", "shared_experts"} if pattern.rstrip(".*").endswith("mlp") else {"mlp"}
        else:
            parts.add(hit)
    return parts


def _positive_number(q: dict, key: str, default, name: str, whole: bool = True):
    v = q.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0 or (whole and v != int(v)):
        raise RooflineError(f"{name}: quantization_config {key} must be a positive whole number, got {v!r}", field="model")
    return int(v) if whole else float(v)


def _storage(q: dict, name: str, default: str) -> tuple[WeightStorage, list[str]]:
    """WeightStorage from a quantization_config, and notes on what it assumed."""
    if not isinstance(q, dict):
        raise RooflineError(f"{name}: quantization_config must be an object", field="model")
    method = str(q.get("quant_method", "")).lower()
    skip_list = q.get("modules_to_not_convert") or q.get("ignored_layers") or []
    if not isinstance(skip_list, list):
        raise RooflineError(f"{name}: quantization_config modules_to_not_convert must be a list", field="model")
    skip = [str(m) for m in skip_list]
    if method == "mxfp4":
        # OCP MX: 32 FP4 (E2M1) values share one 8-bit E8M0 scale: (32 x 4 + 8) / 32 = 4.25 bits
        if "experts" in _skipped_parts(skip, name):
            raise RooflineError(f"{name}: mxfp4 with the experts in modules_to_not_convert is not understood", field="model")
        parts = (("experts", "mxfp4 (4.25 bits: 4-bit values, one 8-bit scale per 32)", 4.25 / 8),)
        return WeightStorage(default, parts, "mxfp4"), ["mxfp4: the routed experts' weight matrices are stored in "
                                                        "MXFP4; attention, router, embedding, LM head and biases at "
                                                        f"{default} (transformers' Mxfp4 quantizer converts experts only)"]
    if method == "fp8":
        block = q.get("weight_block_size")
        if block:
            if not isinstance(block, list) or len(block) != 2:
                raise RooflineError(f"{name}: quantization_config weight_block_size must be [rows, cols], got {block!r}",
                                    field="model")
            bh, bw = (_positive_number({"weight_block_size": b}, "weight_block_size", None, name) for b in block)
            width = 1.0 + 4.0 / (bh * bw)  # fp8 values + one fp32 scale per block
            fmt = f"fp8 ({bh}x{bw} blocks, fp32 scales)"
        else:
            width, fmt = 1.0, "fp8 (per-tensor scale)"
        kept = f"embedding, LM head, router and norms at {default}"
    elif method in ("gptq", "awq"):
        bits = _positive_number(q, "bits" if "bits" in q else "w_bit", 4, name)
        if bits not in (2, 3, 4, 8):
            raise RooflineError(f"{name}: {method} bits {bits} is not one of 2, 3, 4, 8", field="model")
        group = q.get("group_size", q.get("q_group_size", 128))
        if group == -1:
            raise RooflineError(f"{name}: {method} group_size -1 (one scale per output channel) is not supported",
                                field="model")
        group = _positive_number({"group_size": group}, "group_size", None, name)
        width = bits / 8 + (2.0 + bits / 8) / group  # packed values + an fp16 scale and a packed zero per group
        fmt = f"int{bits} ({method}, group {group}: fp16 scale + zero per group)"
        kept = f"embedding and LM head at {default}"
    else:
        raise RooflineError(f"{name}: quantization_config quant_method {method or '(none)'!r} is not understood "
                            "(known: mxfp4, fp8, gptq, awq); remove it and set the weight width with --weights",
                            field="model")
    skipped = _skipped_parts(skip, name)
    parts = tuple((p, fmt, width) for p in QUANTISED_PARTS if p not in skipped)
    said = f"; left at {default} by modules_to_not_convert: {', '.join(sorted(skipped))}" if skipped else ""
    return WeightStorage(default, parts, method), [f"{method}: linear layers of the blocks stored as {fmt}; {kept}{said}"]


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _dtype(raw: dict) -> str:
    d = str(raw.get("torch_dtype") or raw.get("dtype") or "bfloat16")
    return TORCH_DTYPES.get(d, "bf16")


def _dtype_note(raw: dict) -> list[str]:
    """A torch_dtype the loader does not know is said, with what it was taken as."""
    d = raw.get("torch_dtype") or raw.get("dtype")
    if d is None or str(d) in TORCH_DTYPES:
        return []
    return [f"torch_dtype {d!r} not understood: weights taken as bf16 (use --weights/--dtype to say otherwise)"]
