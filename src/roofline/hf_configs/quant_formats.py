"""Checkpoint formats read as stored (quant_parts.Scheme), each reader giving the Scheme of each
part it quantises, what it leaves at the checkpoint's dtype, and notes:

- compressed-tensors (llm-compressor; vLLM's FP8 and W4A16 checkpoints): config_groups' weights
  (num_bits, type int or float, strategy tensor / channel / group / block / tensor_group,
  symmetric, actorder) in the format that packs them (pack-quantized, naive-quantized,
  int-quantized, float-quantized, nvfp4-pack-quantized, mxfp4-pack-quantized), and its ignore list;
- modelopt (NVIDIA TensorRT Model Optimizer): quant_algo FP8, NVFP4, W4A16_NVFP4 or MXFP8, or
  MIXED_PRECISION (each module its own, listed in quantized_layers), from config.json's
  quantization_config or the hf_quant_config.json beside it, and its exclude list;
- fbgemm_fp8: fp8 with one fp32 scale per output channel, modules_to_not_convert;
- bitsandbytes: 4-bit (nf4/fp4, an absmax per 64 values, optionally quantised again) or 8-bit
  (int8 with an fp32 scale per row).

The bytes of each tensor are those the format's own code writes (compressed-tensors'
compressors and initialize.py; ModelOpt's export; transformers' FbgemmFp8Linear; bitsandbytes'
Params4bit / Int8Params); each reader's docstring names them. A variant not listed is refused."""

from __future__ import annotations

import dataclasses
import re

from roofline.errors import RooflineError
from roofline.hf_configs.quant_parts import QUANTISED_PARTS, Scheme, Skip, skip_rules
from roofline.units import DTYPE_BYTES

LINEAR_PARTS = QUANTISED_PARTS + ("lm_head",)  # what "every Linear" covers (routers: see ROUTER_NOTE)
ROUTER_NOTE = ("the MoE router is priced at {d}: formats that convert every Linear store it quantised where the family's "
           "router is a Linear and the skip list does not name it (E x D a layer: under 0.1% of the weights)")
_TORCH_BYTES = {"torch.bfloat16": 2, "torch.float16": 2, "torch.float32": 4, "torch.float8_e4m3fn": 1, "torch.uint8": 1,
                "torch.int8": 1}


def _refuse(name: str, what: str) -> RooflineError:
    return RooflineError(f"{name}: quantization_config {what}; remove quantization_config and set the weight width with "
                         "--weights to price it otherwise", field="model")


def _int(v, what: str, name: str, allowed=None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0 or (allowed and v not in allowed):
        raise _refuse(name, f"{what} {v!r} is not read" + (f" (read: {', '.join(map(str, allowed))})" if allowed else ""))
    return v


# ---------------------------------------------------------------------------------------------
# compressed-tensors
# ---------------------------------------------------------------------------------------------

_CT_FORMATS = ("pack-quantized", "naive-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized",
               "mxfp4-pack-quantized")


def _ct_scheme(w: dict, inputs, fmt: str, default: str, name: str) -> Scheme:
    """One config group's weights as compressed-tensors stores them: values packed into int32
    (pack-quantized: N ceil(K bits / 32) x 4 B, and the matrix's shape as two int64), one byte a
    value (naive-, int-, float-quantized), two fp4 a byte (nvfp4-, mxfp4-pack-quantized); scales
    of the weight's dtype (scale_dtype where given; fp8 for NVFP4, uint8 for MXFP4) per tensor,
    row, group or block, with an int8 zero point each when asymmetric (packed bits/8 for
    pack-quantized groups and rows); NVFP4's fp32 global scale; weight_g_idx (int32 per input)
    for actorder "group"; a static input scale (and zero point) per matrix."""
    if fmt not in _CT_FORMATS:
        raise _refuse(name, f"compressed-tensors format {fmt!r} is not read (read: {', '.join(_CT_FORMATS)})")
    if w.get("dynamic") not in (None, False):
        raise _refuse(name, "compressed-tensors weights with dynamic scales are not read")
    kind = str(w.get("type", "int"))
    bits = _int(w.get("num_bits", 8), "compressed-tensors num_bits", name, (2, 4, 8) if kind == "int" else (4, 8))
    strategy = str(w.get("strategy") or "tensor")
    fp4 = kind == "float" and bits == 4
    if fmt in ("nvfp4-pack-quantized", "mxfp4-pack-quantized") and not fp4:
        raise _refuse(name, f"compressed-tensors {fmt} with {kind} {bits}-bit weights is not read")
    scale = _TORCH_BYTES.get(str(w.get("scale_dtype")), DTYPE_BYTES[default])
    if fmt == "nvfp4-pack-quantized" or (fp4 and strategy == "tensor_group"):
        scale = 1  # an fp8 (E4M3) scale per 16
    elif fmt == "mxfp4-pack-quantized":
        scale = 1  # an E8M0 exponent (uint8) per 32
    asym = w.get("symmetric") is False
    packed = fmt == "pack-quantized"
    zero = (bits / 8 if packed and strategy in ("group", "channel") else 1.0) if asym else 0.0
    value_bits = bits if packed or fp4 else 8
    tensor = 16.0 if packed else 0.0  # weight_shape: torch.tensor(weight.shape), two int64
    label = f"{'int' if kind == 'int' else 'fp'}{bits}" if not fmt.startswith("mxfp4") else "mxfp4"
    words = [f"compressed-tensors {fmt}"]
    group = 0
    block = None
    rows = False
    if strategy in ("group", "tensor_group"):
        group = _int(w.get("group_size"), "compressed-tensors group_size", name)
        words.append(f"group {group}")
        if strategy == "tensor_group":
            tensor += 4.0  # weight_global_scale, fp32
    elif strategy == "channel":
        rows = True
        words.append("a scale per output channel")
    elif strategy == "block":
        shape = w.get("block_structure")
        if isinstance(shape, str) and "x" in shape:
            shape = shape.split("x")
        if not isinstance(shape, list) or len(shape) != 2:
            raise _refuse(name, f"compressed-tensors block_structure {shape!r} is not [rows, cols]")
        block = tuple(_int(int(b) if str(b).strip().isdigit() else b, "compressed-tensors block_structure", name)
                      for b in shape)
        words.append(f"{block[0]}x{block[1]} blocks")
    elif strategy == "tensor":
        tensor += scale + zero
        words.append("a scale per tensor")
    else:
        raise _refuse(name, f"compressed-tensors weight strategy {strategy!r} is not read")
    words.append(f"{scale:g}-byte scales" + (", zero points" if asym else ""))
    actorder = w.get("actorder")
    g_idx = 4.0 if actorder in ("group", True) else 0.0
    if g_idx:
        words.append("int32 g_idx")
    if isinstance(inputs, dict) and inputs.get("dynamic") in (False, "local"):
        in_fp4 = inputs.get("type") == "float" and inputs.get("num_bits") == 4
        if in_fp4:
            tensor += 4.0  # input_global_scale, fp32
        elif str(inputs.get("strategy") or "tensor") == "tensor":
            tensor += DTYPE_BYTES[default] + (1.0 if inputs.get("symmetric") is False else 0.0)
        else:
            raise _refuse(name, f"compressed-tensors static input activations by {inputs.get('strategy')!r} are not read")
        words.append("a static input scale")
    return Scheme(f"{label} ({', '.join(words)})", value_bits, scale, zero, group, block, rows, tensor, g_idx,
                  "" if fmt.startswith("mxfp4") else _ct_acts(kind, bits, inputs))


def _ct_acts(kind: str, bits: int, inputs) -> str:
    """The dtype vLLM's compressed-tensors schemes quantise a group's matmul inputs to where its
    input_activations match its weights (CompressedTensorsW8A8Fp8, W8A8Int8, W4A4Fp4: W8A8 and
    W4A4), else "" (W8A16 / W4A16: weight-only, dequantised)."""
    if not isinstance(inputs, dict) or inputs.get("type", "int") != kind or inputs.get("num_bits") != bits:
        return ""
    return {("float", 8): "fp8", ("int", 8): "int8", ("float", 4): "fp4"}.get((kind, bits), "")


def _compressed_tensors(q: dict, name: str, default: str):
    for key in ("sparsity_config", "transform_config"):
        if q.get(key):
            raise _refuse(name, f"compressed-tensors {key} is not read (its extra tensors are not priced)")
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise _refuse(name, "compressed-tensors without config_groups is not read")
    schemes: dict[str, Scheme] = {}
    for gname, g in groups.items():
        if not isinstance(g, dict) or not isinstance(g.get("weights"), (dict, type(None))):
            raise _refuse(name, f"compressed-tensors config group {gname!r} is not an object")
        if g.get("weights") is None:
            continue  # activations only: the weights stay at their dtype
        targets = [str(t) for t in g.get("targets") or []]
        if targets != ["Linear"]:
            raise _refuse(name, f"compressed-tensors group {gname!r} targets {targets[:3]}: only groups targeting "
                                "\"Linear\" (every linear layer, less the ignore list) are read")
        scheme = _ct_scheme(g["weights"], g.get("input_activations"), str(g.get("format") or q.get("format") or "dense"),
                            default, name)
        for p in LINEAR_PARTS:
            if schemes.setdefault(p, scheme) != scheme:
                raise _refuse(name, "compressed-tensors with two config groups targeting \"Linear\" is not read")
    notes = [ROUTER_NOTE.format(d=default)]
    if q.get("kv_cache_scheme"):
        notes.append("kv_cache_scheme: the checkpoint calibrates a quantised KV cache, priced at the KV dtype given "
                     "(bf16 unless --kv-cache says otherwise); a k_scale and a v_scale per attention layer (a few "
                     "bytes) are not counted")
    return schemes, f"embedding, norms and what the ignore list names at {default}", notes


# ---------------------------------------------------------------------------------------------
# ModelOpt
# ---------------------------------------------------------------------------------------------

def modelopt_companion(companion: dict, name: str) -> dict:
    """hf_quant_config.json ({"producer": ..., "quantization": {quant_algo, group_size,
    exclude_modules, kv_cache_quant_algo}}) as a quantization_config."""
    inner = companion.get("quantization") if isinstance(companion, dict) else None
    if not isinstance(inner, dict):
        raise RooflineError(f"{name}: hf_quant_config.json holds no \"quantization\" object", field="model")
    return {"quant_method": "modelopt", **inner}


MODELOPT_ALGOS = ("FP8", "NVFP4", "W4A16_NVFP4", "MXFP8")


def _modelopt_scheme(algo: str, group, name: str) -> Scheme:
    """One ModelOpt algorithm's matrix as its export stores it (vLLM's modelopt.py reads the same
    tensors): FP8 fp8 values, an fp32 weight_scale and input_scale; NVFP4 two fp4 values a byte,
    an fp8 weight_scale per 16 values of a row, an fp32 weight_scale_2 and input_scale; W4A16_NVFP4
    the same weights and no input_scale (its activations stay 16-bit); MXFP8 fp8 values and a uint8
    (E8M0) weight_scale per 32, no per-tensor scale. The engines run FP8 W8A8 and NVFP4 W4A4
    (vLLM's ModelOptFp8LinearMethod and ModelOptNvFp4LinearMethod, the latter weight-only through
    Marlin on a GPU without fp4 arithmetic: Scheme.acts); W4A16_NVFP4 and MXFP8 (no measured
    MXFP8 GEMMs here) are priced dequantised into 16-bit matmuls."""
    if algo == "FP8":
        return Scheme("fp8 (modelopt: fp32 weight and input scales per tensor)", 8, tensor_bytes=8.0, acts="fp8")
    if algo in ("NVFP4", "W4A16_NVFP4"):
        group = _int(16 if group is None else group, "modelopt group_size", name, (16,))
        if algo == "NVFP4":
            return Scheme(f"fp4 (modelopt NVFP4: fp8 scale per {group}, fp32 global and input scales)", 4,
                          scale_bytes=1.0, group=group, tensor_bytes=8.0, acts="fp4")
        return Scheme(f"fp4 (modelopt W4A16_NVFP4: fp8 scale per {group}, fp32 global scale)", 4, scale_bytes=1.0,
                      group=group, tensor_bytes=4.0)
    if algo == "MXFP8":
        return Scheme("fp8 (modelopt MXFP8: uint8 scale per 32)", 8, scale_bytes=1.0, group=32)
    raise _refuse(name, f"modelopt quant_algo {algo or '(none)'!r} is not read (read: {', '.join(MODELOPT_ALGOS)}, "
                        "MIXED_PRECISION)")


def modelopt_kv(q: dict) -> str:
    """The KV-cache dtype a ModelOpt export calibrates: "fp8" for kv_cache_quant_algo "FP8" (or a
    kv_cache_scheme of 8-bit floats), else "" (none, or a kind not read). TensorRT-LLM's, SGLang's and
    vLLM's (from 0.13.0) default kv-cache dtype 'auto' follows it: tensorrt_llm/llmapi/llm_args.py
    KvCacheConfig.dtype; sglang ModelRunner.configure_kv_cache_dtype; vllm-project/vllm PR #30785."""
    kv = q.get("kv_cache_quant_algo") or q.get("kv_cache_scheme")
    if isinstance(kv, dict):
        return "fp8" if kv.get("type") == "float" and kv.get("num_bits") == 8 else ""
    return "fp8" if isinstance(kv, str) and kv.upper() == "FP8" else ""


def modelopt_mixed(q: dict) -> bool:
    return str(q.get("quant_algo") or "").upper() == "MIXED_PRECISION"


def _modelopt(q: dict, name: str, default: str):
    """ModelOpt's export (unified HF checkpoint), quant_algo one of MODELOPT_ALGOS for every Linear
    less exclude_modules (_modelopt_scheme); MIXED_PRECISION names each quantised module's own
    algorithm in quantized_layers (read by mixed_rules), every other module at the checkpoint's dtype."""
    notes = []
    kv = q.get("kv_cache_quant_algo") or q.get("kv_cache_scheme")
    if kv and modelopt_kv(q):
        notes.append(f"the checkpoint calibrates an {modelopt_kv(q)} KV cache (kv_cache_quant_algo), priced so unless "
                     "--kv-cache says otherwise: the engines' default kv-cache dtype 'auto' follows it (TensorRT-LLM; "
                     "SGLang; vLLM from 0.13.0, before it the model's dtype); its fp32 k_scale and v_scale per "
                     "attention layer (8 bytes) are not counted")
    elif kv:
        notes.append(f"the checkpoint calibrates a {str(kv) if isinstance(kv, str) else 'quantised'} KV cache "
                     "(kv_cache_quant_algo) of a kind not read here: the cache is priced at the KV dtype given (bf16 "
                     "unless --kv-cache says otherwise)")
    if modelopt_mixed(q):
        return {}, (f"each module in quantized_layers stored by its own quant_algo; every module not listed there "
                    f"(embedding, norms, what exclude_modules names) at {default}"), notes + _groups_disagree(q)
    scheme = _modelopt_scheme(str(q.get("quant_algo") or "").upper(), q.get("group_size"), name)
    return (dict.fromkeys(LINEAR_PARTS, scheme), f"embedding, norms and what exclude_modules names at {default}",
            [ROUTER_NOTE.format(d=default), *notes])


def _groups_disagree(q: dict) -> list[str]:
    """A note where config.json's config_groups (written beside quantized_layers by some exports)
    give a listed module another algorithm: quantized_layers is read, as vLLM reads it."""
    listed, differ = q.get("quantized_layers") or {}, []
    for g in (q.get("config_groups") or {}).values():
        w, a = (g or {}).get("weights") or {}, (g or {}).get("input_activations") or {}
        algo = {8: "FP8", 4: "NVFP4" if a.get("num_bits") == 4 else "W4A16_NVFP4"}.get(w.get("num_bits"))
        differ += [t for t in g.get("targets") or [] if str((listed.get(t) or {}).get("quant_algo", algo)).upper() != algo]
    if not differ:
        return []
    return [f"config_groups give {len(differ)} modules (e.g. {differ[0]}) another algorithm than quantized_layers: "
            "quantized_layers is read, as vLLM's ModelOptMixedPrecisionConfig reads it (NVFP4 against W4A16_NVFP4 "
            "is an fp32 input_scale, 4 B, a matrix)"]


_EXPERT_INDEX = re.compile(r"\.experts\.(\d+)\.")
_EXPERT_W = re.compile(r"(\.experts\.\d+)\.w([123])$")


def mixed_rules(q: dict, name: str, model, mtp_layers: int = 0) -> list[Skip]:
    """ModelOpt MIXED_PRECISION's quantized_layers ({module: {quant_algo, group_size}}) as rules
    storing each named matrix (or whole part) by its algorithm. A name read only loosely, two
    algorithms for one matrix, or one expert's matrix named without all of the layer's experts is
    refused: a listing says exactly what is quantised, and a guess would misprice the rest."""
    listed = q.get("quantized_layers")
    if not isinstance(listed, dict) or not listed:
        raise _refuse(name, "modelopt MIXED_PRECISION without a quantized_layers object")
    chosen: dict[tuple, Skip] = {}
    experts: dict[tuple, set[int]] = {}
    for module, entry in listed.items():
        if not isinstance(entry, dict):
            raise _refuse(name, f"modelopt quantized_layers {module!r} is not an object")
        scheme = _modelopt_scheme(str(entry.get("quant_algo") or "").upper(), entry.get("group_size"), name)
        # Mixtral's and MiniMax's expert names: w1 gate, w3 up, w2 down
        plain = _EXPERT_W.sub(lambda m: f"{m.group(1)}.{ {'1': 'gate', '2': 'down', '3': 'up'}[m.group(2)]}_proj", str(module))
        rules, loose = skip_rules([plain], name, model.n_layers, "quantized_layers", mtp_layers, model.model_type)
        if loose:
            raise _refuse(name, f"modelopt quantized_layers names {module!r}, which this reader does not hold apart")
        for r in rules:
            if r.part == "embedding":
                raise _refuse(name, f"modelopt quantized_layers names {module!r}: a quantised embedding is not read")
            key = (r.part, r.layers, r.matrix)
            if chosen.setdefault(key, dataclasses.replace(r, scheme=scheme)).scheme != scheme:
                raise _refuse(name, f"modelopt quantized_layers stores {module!r} two ways")
            hit = _EXPERT_INDEX.search(str(module).lower())
            if hit and r.part == "experts":
                experts.setdefault(key, set()).add(int(hit.group(1)))
    for (part, layers, matrix), ids in experts.items():
        for i in layers or range(model.n_layers):
            n = getattr(model.layers[i].mlp, "n_experts", 0)
            if ids != set(range(n)):
                raise _refuse(name, f"modelopt quantized_layers names {matrix} of {len(ids)} of layer {i}'s {n} experts: "
                                    "experts stored two ways in one layer are not read")
    return sorted(chosen.values(), key=lambda r: r.matrix is None)  # a matrix named alone before its whole part


# ---------------------------------------------------------------------------------------------
# fbgemm_fp8 and bitsandbytes
# ---------------------------------------------------------------------------------------------

def _fbgemm_fp8(q: dict, name: str, default: str):
    """transformers' FbgemmFp8Linear (and its Llama 4 experts): fp8 weights and an fp32
    weight_scale per output channel; its input_scale_ub is not saved. vLLM runs it W8A8
    (FBGEMMFp8LinearMethod: inputs quantised to fp8 per token)."""
    scheme = Scheme("fp8 (fbgemm: fp32 scale per output channel)", 8, scale_bytes=4.0, rows=True, acts="fp8")
    return (dict.fromkeys(LINEAR_PARTS, scheme), f"embedding, norms and what modules_to_not_convert names at {default}",
            [ROUTER_NOTE.format(d=default)])


def _bitsandbytes(q: dict, name: str, default: str):
    """bitsandbytes through transformers. 4-bit (Params4bit): two values a byte (whatever
    bnb_4bit_quant_storage, a container of the same bytes), an fp32 absmax per 64 values and a
    16-entry fp32 code; with double quant the absmax is uint8, with an fp32 absmax per 256 of them
    and a 256-entry fp32 code. 8-bit (Int8Params): int8 weights and an fp32 SCB per row. The LM
    head stays unquantised (transformers' default skip list) unless llm_int8_skip_modules, a list
    that replaces that default, leaves it out."""
    four, eight = q.get("load_in_4bit") is True, q.get("load_in_8bit") is True
    if four == eight:
        raise _refuse(name, "bitsandbytes needs exactly one of load_in_4bit and load_in_8bit true")
    if eight:
        if q.get("llm_int8_has_fp16_weight"):
            raise _refuse(name, "bitsandbytes llm_int8_has_fp16_weight keeps fp16 weights: not read")
        scheme = Scheme("int8 (bitsandbytes LLM.int8: fp32 scale per row)", 8, scale_bytes=4.0, rows=True)
    else:
        kind = str(q.get("bnb_4bit_quant_type") or "fp4")
        if kind not in ("nf4", "fp4"):
            raise _refuse(name, f"bitsandbytes bnb_4bit_quant_type {kind!r} is not read (read: nf4, fp4)")
        label = "nf4" if kind == "nf4" else "bnb_fp4"  # bitsandbytes' own fp4, not NVFP4 or MXFP4
        if q.get("bnb_4bit_use_double_quant"):
            # uint8 absmax per 64 values; an fp32 absmax per 256 absmax: 4 / (64 x 256) B a value (spread over the
            # values: within 4 B a matrix of ceil(ceil(N K / 64) / 256) of them); codes 256 x 4 + 16 x 4 B
            scheme = Scheme(f"{label} (bitsandbytes: absmax per 64 quantised to uint8, double quant)",
                            4 + 8 * 4 / (64 * 256), scale_bytes=1.0, group=64, tensor_bytes=1024.0 + 64.0)
        else:
            scheme = Scheme(f"{label} (bitsandbytes: fp32 absmax per 64)", 4, scale_bytes=4.0, group=64, tensor_bytes=64.0)
    notes = [ROUTER_NOTE.format(d=default)] + ([] if eight else ["bitsandbytes' quant-state JSON (about 100 bytes a matrix) is "
                                                              "not counted"])
    if isinstance(q.get("llm_int8_skip_modules"), list):  # a list given replaces transformers' default (the LM head)
        return dict.fromkeys(LINEAR_PARTS, scheme), f"embedding and what llm_int8_skip_modules names at {default}", notes
    return (dict.fromkeys(QUANTISED_PARTS, scheme), f"embedding and LM head (transformers' default skip list) at {default}",
            notes)


READERS = {"compressed-tensors": _compressed_tensors, "modelopt": _modelopt, "fbgemm_fp8": _fbgemm_fp8,
           "bitsandbytes": _bitsandbytes}
SKIP_KEYS = {"compressed-tensors": ("ignore",), "modelopt": ("ignore", "exclude_modules"),
             "fbgemm_fp8": ("modules_to_not_convert",), "bitsandbytes": ("llm_int8_skip_modules",)}
