"""Precision: the storage widths of weights, activations and KV cache, checked against a machine.

Weights may be stored narrower than any dtype the machine computes in (int4, or fp4 without an fp4
peak): weight-only quantisation, dequantised into bf16 matmuls. Activations (and so every
non-matmul op) must be a dtype the machine has a peak for. ``Precision.uniform(d, machine)`` is
what ``--dtype d`` means. For bf16, fp16 or fp32: d everywhere. For a dtype narrower than bf16 that
the machine computes in (fp8 on Hopper, int8, fp4 on Blackwell): what serving engines run as W8A8
(W4A4): d weights and KV cache, matmuls in d, and the activations between ops in bf16: each
matmul's input is quantised on its way in and its output written in bf16, so norms, residual adds,
activations and the tensor-parallel all-reduces move bf16 (vLLM's FP8 W8A8 and its QuantFP8 input
quantisation, https://docs.vllm.ai/en/v0.6.3.post1/quantization/fp8.html; torchao's
float8_dynamic_activation_float8_weight; TensorRT-LLM's FP8 with an FP8 KV cache). Where the
machine has no peak for d: d weights with bf16 activations and KV cache, matmuls in bf16
(weight-only). ``--activations d`` keeps every activation at d.

A quantised checkpoint's weights (``as_stored``) run as the serving engines run its format: fp8
(quant_method fp8, ModelOpt FP8, fbgemm_fp8, compressed-tensors fp8 weights and inputs) as W8A8
fp8 matmuls, and NVFP4 (ModelOpt NVFP4, compressed-tensors nvfp4 weights and inputs) as W4A4, on
a machine with that arithmetic (vLLM's Fp8LinearMethod, ModelOptFp8LinearMethod and
ModelOptNvFp4LinearMethod, vllm/model_executor/layers/quantization/fp8.py and modelopt.py); where
it has none (fp4 on a Hopper, fp8 on an A100) weight-only, dequantised into bf16 matmuls (vLLM's
Marlin fallback, marlin_utils_fp4.py: "Your GPU does not have native support for FP4 computation
... Weight-only FP4 compression will be used leveraging the Marlin kernel"). Weight-only formats
(int4 GPTQ/AWQ, MXFP4 experts, W4A16_NVFP4) stay dequantised into the matmuls.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from roofline.architecture import WeightStorage
from roofline.errors import RooflineError, check_choice
from roofline.machines import Machine, get_machine
from roofline.plan.limits import QUANT_DTYPES
from roofline.transformer import get_model
from roofline.units import DTYPE_BYTES


# what quantisation tools leave at the model's own width (Precision.kept): ModelOpt's default configs
# disable "*lm_head*" and the MoE routers ("*router*", "*mlp.gate.*"); embeddings, norms and biases are no Linear
UNQUANTISED_PARTS = ("lm_head", "embedding", "position", "router", "norms", "expert_biases")
KEPT_DTYPE = "bf16"  # ... which is bf16 for the checkpoints of today's models

# The KV cache under --dtype fp4 (uniform): no engine's default KV-cache dtype is fp4. vLLM's kv_cache_dtype has no fp4
# (vllm/config/cache.py CacheDType: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla, in the versions whose
# defaults and tables are modelled here); SGLang's --kv-cache-dtype and TensorRT-LLM's KvCacheConfig.dtype default to
# 'auto', the model's dtype or the checkpoint's kv_cache_quant_algo (FP8 in NVIDIA's NVFP4 exports, e.g.
# nvidia/DeepSeek-V3.1-NVFP4's hf_quant_config.json). fp4 is opt-in: SGLang's fp4_e2m1 (experimental,
# docs/advanced_features/quantized_kv_cache.md) and TensorRT-LLM's NVFP4 KV cache on Blackwell.
FP4_KV = "fp8"
FP4_KV_SOURCE = ("under --dtype fp4, as the engines run an fp4 model by default: vLLM's kv_cache_dtype has no fp4, SGLang's "
                 "and TensorRT-LLM's 'auto' keep the model's dtype or the checkpoint's (fp8 in NVIDIA's NVFP4 exports); "
                 "--kv-cache fp4 prices SGLang's fp4_e2m1 or TensorRT-LLM's NVFP4 cache")
FP4_KV_ENGINES = ("sglang", "trtllm")  # the engines that run an fp4 KV cache when asked (above)


def computes_in(machine: Machine, dtype: str) -> bool:
    """Whether the machine has a peak of its own for ``dtype`` (a machine without per-dtype peaks
    computes in any). Machine.peak also answers int4 and fp4 with the bf16 peak where the chip has
    none: that is weight-only storage, not a dtype to compute in."""
    return not machine.peaks or dtype in machine.dtypes


def weight_only_compute(machine: Machine) -> str:
    """The dtype weight-only quantised matmuls compute in: bf16, or the machine's default without a bf16 peak."""
    return "bf16" if computes_in(machine, "bf16") else machine.default_dtype


@dataclass(frozen=True)
class Precision:
    """Storage widths of the weights, the activations and the KV cache (bf16 2, fp8 1, int8 1,
    int4 0.5 bytes), each on its own."""

    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"
    stored: WeightStorage | None = None  # weights as the checkpoint stores them, part by part
    matmul: str | None = None  # the dtype matmuls compute in, where not the wider of weights and activations (W8A8)
    # the dtype the routed experts' matmuls compute in, where the engine quantises their input apart from the rest's
    # (TensorRT-LLM on Blackwell: MXFP8 activations into MXFP4 experts, the other GEMMs bf16)
    experts_matmul: str | None = None
    experts_source: str = field(default="", compare=False)  # why the experts compute in experts_matmul, said in the label
    replaces: str = field(default="", compare=False)  # how the checkpoint's own storage differs, said in the label
    kv_source: str = field(default="", compare=False)  # why the KV cache is at its dtype, where the checkpoint chose it
    # (part, dtype) of a checkpoint's parts whose matmuls run narrower on this machine (RunStorage.matmuls that
    # it computes in), and the checkpoint's fp8 scaling ("block", "tensor") where some are fp8 (as_stored)
    stored_matmul: tuple[tuple[str, str], ...] = ()
    fp8_scaling: str = ""

    def __post_init__(self):
        for part in ("weights", "activations", "kv_cache"):
            check_choice(f"{part} dtype", getattr(self, part), QUANT_DTYPES)
        for part in ("matmul", "experts_matmul"):
            if getattr(self, part) is not None:
                check_choice(f"{part} dtype", getattr(self, part), QUANT_DTYPES)

    @classmethod
    def as_stored(cls, model, activations: str = "bf16", kv_cache: str | None = None,
                  machine: Machine | None = None) -> "Precision":
        """Weights as the model's checkpoint stores them (its quantization_config: MXFP4 experts,
        block-scaled fp8, int4 groups), activations at ``activations``; the KV cache at ``kv_cache``,
        else the dtype the checkpoint calibrates it in (a ModelOpt export's kv_cache_quant_algo, which
        the engines' default 'auto' follows: hf_configs.quant_formats.modelopt_kv), else ``activations``.
        The parts whose format the engines run as W8A8 or W4A4 (quant_parts.RunStorage) compute in
        that dtype where ``machine`` does (any, without a machine), the rest in ``activations``."""
        storage = get_model(model).storage
        base = storage.default if storage.default in QUANT_DTYPES else "bf16"
        source = "" if kv_cache or not storage.kv_cache else (
            "the checkpoint's kv_cache_quant_algo, which the engines' default kv-cache dtype 'auto' follows "
            "(TensorRT-LLM, SGLang, vLLM from 0.13.0); --kv-cache sets another")
        run = tuple((p, d) for p, d in getattr(storage, "matmuls", ())  # a RunStorage (hf_configs.quant_parts)
                    if machine is None or computes_in(get_machine(machine), d))
        scaling = storage.fp8_scaling if any(d == "fp8" for _, d in run) else ""
        return cls(base, activations, kv_cache or storage.kv_cache or activations, storage if storage.parts else None,
                   kv_source=source, stored_matmul=run, fp8_scaling=scaling)

    def kept(self, part: str) -> bool:
        """Whether ``part``'s weights stay at KEPT_DTYPE when the weights are quantised narrower by a
        flag (not a checkpoint's own storage, which lists what it leaves unquantised): the LM head,
        the MoE router, the embeddings, norms and biases (UNQUANTISED_PARTS), as quantisation tools
        leave them (NVIDIA ModelOpt's default configs, FP8, INT4 AWQ, NVFP4 and the rest, disable
        "*lm_head*" and "*router*"; embeddings, norms and biases are no Linear)."""
        return self.stored is None and part in UNQUANTISED_PARTS and DTYPE_BYTES[self.weights] < DTYPE_BYTES[KEPT_DTYPE]

    def weight_width(self, part: str) -> float:
        """Bytes per parameter of a part's weights: the stored width, or ``weights``'s (KEPT_DTYPE's
        for the parts kept unquantised)."""
        if self.kept(part):
            return DTYPE_BYTES[KEPT_DTYPE]
        base = DTYPE_BYTES[self.weights]
        return self.stored.width(part, base) if self.stored is not None else base

    def weight_format(self, part: str) -> str:
        """The format a part's weights are stored in: the checkpoint's (its format's first word:
        mxfp4, fp8, int4) for a part it lists, KEPT_DTYPE for a part kept unquantised, else ``weights``."""
        if self.kept(part):
            return KEPT_DTYPE
        for name, fmt, _ in (self.stored.parts if self.stored is not None else ()):
            if name == part:
                return fmt.split()[0]
        return self.weights

    def compute_for(self, part: str) -> str:
        """The dtype a part's matmul computes in: experts_matmul for the routed experts where set, a
        checkpoint's part run narrower (stored_matmul), KEPT_DTYPE for a part kept unquantised, else ``compute``."""
        if part == "experts" and self.experts_matmul is not None:
            return self.experts_matmul
        for name, dtype in self.stored_matmul:
            if name == part:
                return dtype
        return KEPT_DTYPE if self.kept(part) else (self._wider() if self.stored_matmul else self.compute)

    @classmethod
    def uniform(cls, dtype: str, machine: Machine | None = None) -> "Precision":
        """What ``--dtype`` means (the module's docstring): ``dtype`` for all three parts at bf16 and
        wider; narrower, where the machine computes in it, ``dtype`` weights, KV cache and matmuls
        with activations at KEPT_DTYPE between ops (W8A8); where it does not (int4; fp4 before
        Blackwell; fp8 on an A100), weight-only storage: ``dtype`` weights, bf16 activations and KV
        cache, matmuls in bf16. Under fp4 the KV cache is fp8 (bf16 on a machine without fp8), as
        the engines keep it by default (FP4_KV_SOURCE); --kv-cache fp4 sets it."""
        check_choice("dtype", dtype, QUANT_DTYPES)
        narrow = DTYPE_BYTES[dtype] < DTYPE_BYTES[KEPT_DTYPE]
        if machine is not None and not computes_in(machine, dtype):
            fallback = weight_only_compute(machine)
            if DTYPE_BYTES[dtype] < DTYPE_BYTES[fallback]:
                return cls(dtype, fallback, fallback)
        elif narrow and (machine is None or computes_in(machine, KEPT_DTYPE)):
            if dtype == "fp4":  # the KV cache the engines keep by default (FP4_KV_SOURCE): fp8, bf16 without fp8
                kv = FP4_KV if machine is None or computes_in(machine, FP4_KV) else KEPT_DTYPE
                return cls(dtype, KEPT_DTYPE, kv, matmul=dtype, kv_source=FP4_KV_SOURCE)
            return cls(dtype, KEPT_DTYPE, dtype, matmul=dtype)
        return cls(dtype, dtype, dtype)

    @classmethod
    def resolve(cls, model, machine: Machine, dtype: str | None = None, weights: str | None = None,
                activations: str | None = None, kv_cache: str | None = None) -> "Precision":
        """What `--dtype`, `--weights`, `--activations` and `--kv-cache` (the CLI) and the web's
        dtype, weights and kv_cache choose: ``dtype`` on this machine (uniform; default the
        machine's), each part given over it; a quantised checkpoint's stored widths when neither
        ``dtype`` nor ``weights`` is given."""
        storage = get_model(model).storage
        if storage.parts and dtype is None and weights is None:
            acts = activations or machine.default_dtype
            return cls.as_stored(model, acts, kv_cache, machine)
        base = cls.uniform(dtype or machine.default_dtype, machine)
        w, a = weights or base.weights, activations or base.activations
        # W8A8's matmul dtype holds while the weights are no wider than it (int4 weights under fp8: W4A8)
        # and the activations are not set to another (then matmuls compute in the wider of the two)
        # (--activations naming the dtype W8A8 already keeps between ops, bf16, is that default, not another mode)
        matmul = (base.matmul if base.matmul is not None and DTYPE_BYTES[w] <= DTYPE_BYTES[base.matmul]
                  and activations in (None, base.matmul, base.activations) else None)
        replaces = ""
        if storage.parts:  # --dtype or --weights set a quantised checkpoint aside
            replaces = f"the dtype flags set aside the checkpoint's own storage ({storage.label()})"
        elif (dtype is None and weights is None and storage.default in QUANT_DTYPES
              and DTYPE_BYTES[storage.default] != DTYPE_BYTES[w]):
            # a checkpoint stored wider than the machine's default (torch_dtype float32) is said, never
            # silent; a dtype flag is the user's own choice and needs no word
            replaces = (f"the checkpoint stores {storage.default} weights (torch_dtype), priced at {w} as engines "
                        f"serve it (vLLM's dtype auto runs an fp32 checkpoint in fp16); --weights {storage.default} "
                        "prices it as stored")
        return cls(w, a, kv_cache or base.kv_cache, matmul=matmul, replaces=replaces,
                   kv_source="" if kv_cache else base.kv_source)

    @property
    def compute(self) -> str:
        """The matmul dtype: ``matmul`` where set (W8A8), else the one dtype a checkpoint's quantised
        parts run in (stored_matmul: its fp8 checkpoint's W8A8), else the wider of weights and
        activations (activations on a tie). The LM head and other parts kept wide: compute_for."""
        if self.matmul is not None:
            return self.matmul
        run = {d for _, d in self.stored_matmul}
        return run.pop() if len(run) == 1 else self._wider()

    def _wider(self) -> str:
        w, a = DTYPE_BYTES[self.weights], DTYPE_BYTES[self.activations]
        return self.weights if w > a else self.activations

    @property
    def weight_only(self) -> bool:
        """Weights stored narrower than the matmuls compute in (dequantised on the fly)."""
        return DTYPE_BYTES[self.weights] < DTYPE_BYTES[self.compute]

    def label(self, scales: bool = True) -> str:
        """The precision in words; ``scales`` adds what a 4-bit flag leaves out (scales_left_out),
        which a figure's title and a list of machines' labels say once, not per machine."""
        text = self._label()
        return text + (f"; {self.replaces}" if self.replaces else "") + (self.scales_left_out() if scales else "")

    def scales_left_out(self, parts: bool = True) -> str:
        """What a 4-bit flag leaves out: the block scales every 4-bit format carries (a checkpoint's
        own storage counts them: MXFP4's 4.25 bits). Over 4 bits a value: NVFP4, an fp8 E4M3 scale
        per 16 values (NVIDIA, "Introducing NVFP4", 2025), 8/16 bit: +12.5%; MXFP4, an E8M0 scale
        per 32 (OCP MX v1.0), 8/32 bit: +6.25%; int4 AWQ/GPTQ, an fp16 scale per group of 128,
        16/128 bit: +3.1%. ``parts`` False words it for several machines at once ("4-bit values")."""
        four = (["weights"] if self.stored is None and DTYPE_BYTES[self.weights] == 0.5 else []) + (
            ["KV"] if DTYPE_BYTES[self.kv_cache] == 0.5 else [])
        if not four:
            return ""
        what = " and ".join(four) if parts else "values"
        return (f"; 4-bit {what} at 0.5 B a value, block scales not counted (NVFP4's fp8 per 16 adds 12.5%, "
                "MXFP4's per 32 6.25%, int4's fp16 per group of 128 3.1%)")

    def _label(self) -> str:
        if self.stored is not None:
            kv = f"KV {self.kv_cache}" + (f" ({self.kv_source})" if self.kv_source else "")
            why = f": {self.experts_source}" if self.experts_source else ""
            experts = (f"the routed experts' matmuls in {self.experts_matmul} (their input quantised to it{why})"
                       if self.experts_matmul is not None else "")
            matmuls = "; ".join(w for w in (self.stored_matmuls(), experts) if w)
            return f"weights as stored ({self.stored.label()}), activations {self.activations}, {kv}; {matmuls}"
        kept = f"LM head, embeddings, norms and any MoE router {KEPT_DTYPE}" if self.kept("lm_head") else ""
        if self.matmul is not None and self.weights == self.kv_cache == self.matmul != self.activations:
            bits = round(8 * DTYPE_BYTES[self.matmul])
            return (f"{self.weights} weights, matmuls and KV cache, activations {self.activations} between ops "
                    f"(W{bits}A{bits})"
                    + (f"; {kept}" if kept else ""))
        if self.matmul is not None and self.weights == self.matmul != self.activations and self.kv_source:
            bits = round(8 * DTYPE_BYTES[self.matmul])  # W4A4 with the KV cache the engines keep (uniform)
            return (f"{self.weights} weights and matmuls, activations {self.activations} between ops (W{bits}A{bits}), "
                    f"KV {self.kv_cache} ({self.kv_source})" + (f"; {kept}" if kept else ""))
        if self.weights == self.activations == self.kv_cache:
            return self.weights + (f" ({kept})" if kept else "")
        text = f"weights {self.weights}, activations {self.activations}, KV {self.kv_cache}"
        text += f" ({self.kv_source})" if self.kv_source else ""
        text += f" (weight-only {self.weights}: matmuls compute in {self.compute})" if self.weight_only else ""
        text += f" (matmuls in {self.compute})" if self.matmul is not None and not self.weight_only else ""
        return text + (f"; {kept}" if kept else "")

    def stored_matmuls(self) -> str:
        """How a checkpoint's quantised parts run, in words: those in stored_matmul as W8A8 / W4A4 in
        their dtype (fp8 block- or tensor-scaled), the rest dequantised into the matmuls (with why,
        where the format runs narrower on a machine with the arithmetic: RunStorage.matmuls)."""
        run = {p: d for p, d in self.stored_matmul}
        words = []
        for dtype in dict.fromkeys(run.values()):
            names = ", ".join(p.replace("_", " ") for p, d in run.items() if d == dtype)
            bits = round(8 * DTYPE_BYTES[dtype])
            scaled = {"block": ", block-scaled weights", "tensor": ", per-tensor-scaled weights"}.get(
                self.fp8_scaling, "") if dtype == "fp8" else ""
            words.append(f"{names} matmuls in {dtype} (W{bits}A{bits}{scaled}, inputs quantised on the way in, as vLLM, "
                         f"SGLang and TensorRT-LLM run the format)")
        rest = [p.replace("_", " ") for p, _, _ in self.stored.parts  # the experts of experts_matmul: _label says
                if p not in run and not (p == "experts" and self.experts_matmul is not None)]
        if rest:
            left = {p: d for p, d in getattr(self.stored, "matmuls", ()) if p not in run}
            why = (f" ({', '.join(sorted(set(left.values())))} matmuls need {'/'.join(sorted(set(left.values())))} "
                   "arithmetic this machine lacks: weight-only, as vLLM's Marlin fallback runs them)") if left else (
                   f" (weight-only: their inputs stay {self.activations}; no engine rule of data/engines.toml quantises "
                   "them here: TensorRT-LLM's MXFP8 inputs to MXFP4 experts on Blackwell is its one)"
                   if "experts" in rest else "")
            words.append(f"{', '.join(rest)} weights dequantised into {self.activations} matmuls{why}")
        return "; ".join(words)

    def check_engine(self, engine: str) -> "Precision":
        """Raise where ``engine`` (serving.engines' preset name) runs no KV cache of this dtype: fp4
        on vLLM (FP4_KV_SOURCE); SGLang and TensorRT-LLM run one when asked."""
        if self.kv_cache == "fp4" and engine and engine not in FP4_KV_ENGINES:
            raise RooflineError(f"KV cache fp4 under --engine {engine}: its kv_cache_dtype has no fp4 (vLLM's CacheDType: "
                                "auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla); give --kv-cache fp8, or "
                                f"--engine {' or '.join(FP4_KV_ENGINES)}, which run an fp4 cache when asked",
                                field="kv_cache")
        return self

    def storage_note(self, machine: Machine) -> str | None:
        """A KV cache stored in a dtype the machine has no arithmetic for (fp4 on an H100): what the
        model takes it to be (storage the attention dequantises as it reads) and what to check."""
        machine = get_machine(machine)
        kv = self.kv_cache
        if kv == self.activations or computes_in(machine, kv) or DTYPE_BYTES[kv] >= DTYPE_BYTES[self.activations]:
            return None
        return (f"KV cache {kv} on {machine.the_name}, which has no {kv} arithmetic: costed as {DTYPE_BYTES[kv]:g} B a value "
                f"of storage that the attention dequantises to {self.activations} as it reads it; check that your engine's "
                f"attention kernels read an {kv} cache on this GPU")

    def check_machine(self, machine: Machine) -> "Precision":
        """Raise unless the machine computes in the activation dtype (every non-matmul op) and the
        matmul dtype; weights and KV cache are storage and may be narrower."""
        machine = get_machine(machine)
        if not machine.peaks or (self.activations in machine.dtypes and self.compute in machine.dtypes):
            return self  # computes_in both (the common case, without the loop)
        for part, dtype in (("activations", self.activations), ("weights", self.compute)):
            if not computes_in(machine, dtype):
                fallback = weight_only_compute(machine)
                hint = (f"; {dtype} can be weight storage computing in {fallback} (--dtype {dtype} or --weights {dtype})"
                        if part == "activations" and DTYPE_BYTES[dtype] < DTYPE_BYTES[fallback] else "")
                raise RooflineError(f"{part} dtype {dtype}: {machine.the_name} has no {dtype} peak to compute in; it has "
                                    f"{', '.join(machine.dtypes)}{hint}", field=f"{part} dtype")
        return self

    def to_dict(self) -> dict:
        d = {"weights": self.weights, "activations": self.activations, "kv_cache": self.kv_cache, "compute": self.compute}
        if self.stored is not None:
            d["weights"] = f"as stored ({self.stored.method}); the rest {self.weights}"
            run = dict(self.stored_matmul) | ({"experts": self.experts_matmul} if self.experts_matmul else {})
            d["weights_stored"] = [{"part": p, "format": f, "bytes_per_param": b, "matmul": run.get(p, self.compute)}
                                   for p, f, b in self.stored.parts]
            if self.fp8_scaling:
                d["fp8_scaling"] = self.fp8_scaling
        if self.experts_matmul is not None:
            d["experts_matmul"] = self.experts_matmul
            if self.experts_source:
                d["experts_matmul_source"] = self.experts_source
        if self.replaces:
            d["checkpoint"] = self.replaces
        if self.kv_source:
            d["kv_cache_source"] = self.kv_source
        return d
