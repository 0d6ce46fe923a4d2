"""The stored width of the weights: torch_dtype, and quantization_config (mxfp4, fp8, gptq, awq) as
a WeightStorage of the modules the format quantises; a method or skip list not understood is refused."""

from __future__ import annotations

import math
import re

from roofline.architecture import WeightStorage
from roofline.errors import RooflineError

QUANTISED_PARTS = ("attention", "ssm", "mlp", "experts", "shared_experts")


_PART_PATTERNS = (("shared_expert", "shared_experts"), ("experts", "experts"), ("router", "router"),
                  ("mlp.gate", "router"), ("linear_attn", "ssm"), ("self_attn", "attention"), ("attn", "attention"),
                  ("mixer", "ssm"),
                  ("mamba", "ssm"), ("embed", "embedding"), ("lm_head", "lm_head"), ("mlp", "mlp"))
# modules of a part the loader leaves out of the count (a vision tower): skipping them changes nothing priced
_UNPRICED_PATTERNS = ("visual", "vision", "multi_modal", "mm_projector")
_BUFFERS = ("e_score_correction_bias",)  # a router's correction bias: a buffer, not a weight (not counted)
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")
_PROJECTION = re.compile(r"\.(\w*_proj|fc\d|w\d|dense\w*|c_fc|c_proj)$")


def _skipped_parts(skip: list[str], name: str, n_layers: int) -> tuple[dict[str, set[int] | None], list[str]]:
    """The parameter parts a modules_to_not_convert / ignored_layers list names: part -> the layer
    indices it names (None: every layer), and notes on what was read loosely. A pattern that names
    no part is refused rather than guessed; one naming a layer past the model's is refused."""
    parts: dict[str, set[int] | None] = {}
    notes = []
    for pattern in skip:
        low = pattern.lower()
        if any(u in low for u in _UNPRICED_PATTERNS) or low.rsplit(".", 1)[-1] in _BUFFERS:
            continue  # the vision tower is not counted (said in the model's left-out line), nor a buffer
        if low.rsplit(".", 1)[-1] == "gate":  # a bare "gate" (MiniMax's, Mixtral's block_sparse_moe.gate): the router
            parts["router"] = None
            continue
        hit = next((part for key, part in _PART_PATTERNS
                    if (low.endswith(key) if key == "mlp.gate" else key in low)), None)
        if hit is None:
            raise RooflineError(f"{name}: quantization_config skips {pattern!r}, which names no module this tool "
                                "prices apart (attention, mlp, experts, shared experts, ssm, router, embedding, "
                                "lm_head)", field="model")
        index = _LAYER_INDEX.search(low)
        layers = None
        if index:
            i = int(index.group(1))
            if i >= n_layers:
                raise RooflineError(f"{name}: quantization_config skips {pattern!r}, layer {i}, and the model has layers "
                                    f"0 to {n_layers - 1}", field="model")
            layers = {i}
        if _PROJECTION.search(low) and hit not in ("router", "embedding", "lm_head"):
            notes.append(f"modules_to_not_convert names {pattern!r}, one matrix of the {hit.replace('_', ' ')}: taken "
                         f"as the whole {hit.replace('_', ' ')} (its other matrices are priced unquantised too)")
        hits = {hit}
        if hit == "mlp" and "expert" not in low and low.rstrip(".*").endswith("mlp"):
            hits = {"mlp", "experts", "shared_experts"}  # a layer's whole MLP block: its experts too
        for h in hits:
            if h in parts and parts[h] is None or layers is None:
                parts[h] = None
            else:
                parts[h] = parts.get(h, set()) | layers
    return parts, notes


def _layers_text(indices: set[int]) -> str:
    shown = sorted(indices)
    return ", ".join(map(str, shown[:8])) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")


def _positive_number(q: dict, key: str, default, name: str, whole: bool = True):
    v = q.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0 or (whole and v != int(v)):
        raise RooflineError(f"{name}: quantization_config {key} must be a positive whole number, got {v!r}", field="model")
    return int(v) if whole else float(v)


def _storage(q: dict, name: str, default: str, model) -> tuple[WeightStorage, list[str]]:
    """WeightStorage from a quantization_config for ``model`` (its parts and layers), and notes on
    what it assumed. A part left unquantised in some layers only is stored at the parameter-weighted
    mean of the two widths over its layers: exact for its bytes (what memory and a memory-bound step
    read); a step is priced as if every layer held that mean width."""
    if not isinstance(q, dict):
        raise RooflineError(f"{name}: quantization_config must be an object", field="model")
    method = str(q.get("quant_method", "")).lower()
    skip_list = q.get("modules_to_not_convert") or q.get("ignored_layers") or []
    if not isinstance(skip_list, list):
        raise RooflineError(f"{name}: quantization_config modules_to_not_convert must be a list", field="model")
    skip = [str(m) for m in skip_list]
    skipped, loose = _skipped_parts(skip, name, model.n_layers)
    assumed: list[str] = []
    present = {p for layer in model.kinds for p, n in layer.parts(model.d_model).items() if n}
    if method == "mxfp4":
        # OCP MX: 32 FP4 (E2M1) values share one 8-bit E8M0 scale: (32 x 4 + 8) / 32 = 4.25 bits
        if "experts" in skipped:
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
        if "bits" not in q and "w_bit" not in q:
            raise RooflineError(f"{name}: quantization_config {method} gives no bits (or w_bit): the stored width "
                                "is not guessed", field="model")
        bits = _positive_number(q, "bits" if "bits" in q else "w_bit", None, name)
        if bits not in (2, 3, 4, 8):
            raise RooflineError(f"{name}: {method} bits {bits} is not one of 2, 3, 4, 8", field="model")
        if "group_size" not in q and "q_group_size" not in q:
            assumed.append(f"{method}: no group_size given: 128, the default of transformers' {method.upper()}Config")
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
    from roofline.units import DTYPE_BYTES

    parts, whole, some = [], [], []
    for p in QUANTISED_PARTS:
        if p not in present:
            continue
        layers = skipped.get(p, set())
        if layers is None:
            whole.append(p)
            continue
        per_layer = [layer.parts(model.d_model)[p] for layer in model.layers]
        kept_params = sum(per_layer[i] for i in layers)
        if kept_params >= sum(per_layer):
            whole.append(p)
        elif kept_params == 0:
            parts.append((p, fmt, width))
        else:
            share = kept_params / sum(per_layer)
            mean = share * DTYPE_BYTES[default] + (1.0 - share) * width
            held = sum(1 for n in per_layer if n)
            parts.append((p, f"{fmt} in {held - len(layers)} of {held} layers, {default} in layer(s) "
                             f"{_layers_text(layers)}", mean))
            some.append(f"{p.replace('_', ' ')} in layer(s) {_layers_text(layers)} (priced at the mean width over "
                        f"its layers, {mean:.3g} bytes a parameter: exact for the bytes, each layer's step as if "
                        "all held it)")
    said = "".join(f"; left at {default} by modules_to_not_convert: {', '.join(x)}" for x in (whole + some,) if x)
    return WeightStorage(default, tuple(parts), method), [f"{method}: linear layers of the blocks stored as {fmt}; "
                                                          f"{kept}{said}", *loose, *assumed]


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _dtype(raw: dict) -> str:
    d = str(raw.get("torch_dtype") or raw.get("dtype") or "bfloat16")
    return TORCH_DTYPES.get(d, "bf16")


def _dtype_note(raw: dict, preset: bool = False) -> list[str]:
    """A torch_dtype the loader does not know, or none at all (outside a preset), is said, with what
    it was taken as."""
    d = raw.get("torch_dtype") or raw.get("dtype")
    if d is None and "quantization_config" not in raw and not preset:
        return ["the config names no torch_dtype: weights taken as bf16, as most checkpoints since 2023 store them "
                "(GPT-2's and other older ones are fp32: --weights fp32 or --dtype fp32 to say so)"]
    if d is None or str(d) in TORCH_DTYPES:
        return []
    return [f"torch_dtype {d!r} not understood: weights taken as bf16 (use --weights/--dtype to say otherwise)"]
