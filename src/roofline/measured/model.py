"""MeasuredKernels: the plate's cost model with the ops of the measured families priced from an engine's measured
kernels (what each op rests on: predictions.py).

An op of a measured family takes its table's kernel time at its shape plus the model's launch, as the plate adds
t_launch to a kernel's time (the engines' tables time kernels on the GPU, without the CPU's launch), never under the
op's roofline (at_least_roofline):

- a matmul of one (M, N, K) shape (a linear layer) in a dtype the GEMM table measured: measured.gemm; a tensor-parallel
  all-reduce within a node (ALL_REDUCE): measured.comm; a MoE's routed experts: their share of the module, measured.moe;
- a fused attention (FUSED_ATTENTION): measured.attention; MLA's absorbed decode attention (FUSED_MLA): measured.mla;
- Gated DeltaNet's conv and rule (GATED_DELTA_NET): measured.gdn; Kimi Delta Attention's (KIMI_DELTA_ATTENTION)
  and Mamba-2's conv (MAMBA2_CONV): measured.linear.

Every other op (norms, activations, residual adds, unfused attention, MLA's prefill, batched matmuls, sites the
tables lack) keeps the cost model, e_c and e_m; a norm or element-wise kernel of its own (not a residual add, fused
into the next norm) and a serving step's decode op no table measures (plan.step_decode) take at least the least
time a kernel takes in the engine's CUDA graph (measured.floor; "floor"). Each op says which and why."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from roofline.routing import expected_experts_touched
from roofline.cost import CostModel, overlapped_s, roofline_bound, time_lower_bound
from roofline.errors import RooflineError, unknown_name
from roofline.kernel_shapes import GATED_DELTA_NET, KIMI_DELTA_ATTENTION, MAMBA2_CONV
from roofline.kernels import ALL_REDUCE, FUSED_ATTENTION, FUSED_MLA, MOE_EXPERTS, Kernel, matmul_dims
from roofline.machines import Machine
from roofline.measured.attention import attention_table
from roofline.measured.comm import all_reduce_table
from roofline.measured.floor import floor_estimate
from roofline.measured.gdn import gdn_table
from roofline.measured.gemm import TABLE_DTYPE, GemmEstimate, gemm_table
from roofline.measured.linear import kda_table, mamba2_table
from roofline.measured.mla import mla_table
from roofline.measured.predictions import (IMPLAUSIBLY_SLOW, MEASURED_FIELDS, MeasuredOpPrediction,  # noqa: F401
                                           MeasuredWorkloadPrediction, at_least_roofline, measured_notes)  # (re-exported)
from roofline.measured.moe import TABLE_DTYPE as MOE_TABLE_DTYPE, module_s as moe_module_s, moe_table
from roofline.measured import profile
from roofline.measured.tables import resolve, transfer_source
from roofline.measured.transfer import nearest_measured


FP8_SCALINGS = ("tensor", "block")  # MeasuredKernels.fp8_scaling
MOE_BACKENDS = ("", "cutlass", "trtllm")  # MeasuredKernels.moe_backend: measured.moe.LANES ("" the engine's default)
LINEAR_FAMILIES = {KIMI_DELTA_ATTENTION: "kda", MAMBA2_CONV: "mamba2"}  # the shape tags measured.linear reads


@dataclass(frozen=True)
class MeasuredKernels(CostModel):
    """The cost model (e_c, e_m, launch, overlap, CUDA graph, as CostModel) with ``kernels``, an engine's measured tables
    (``ENGINE[@VERSION]``: trtllm, vllm, sglang) or a calibration profile's (its path: measured.profile), pricing the
    ops of a measured family. Build it with for_machine, which refuses a GPU or engine without tables."""

    kernels: str = "trtllm"
    tables: str = ""  # for a header: "trtllm 1.3.0rc20 on h100_sxm" (for_machine)
    # how fp8 weights are scaled, which picks the tables' fp8 rows (FP8_SCALINGS): "tensor" (ModelOpt, the engines' on-the-fly
    # fp8) or "block" (128 x 128 blocks: config.json's weight_block_size [128, 128]), each its own kernel
    fp8_scaling: str = "tensor"
    measured_on: str = ""  # a preset without tables: the measured one its efficiencies transfer from (NEAREST_MEASURED)
    fp8_scaling_from: str = ""  # where fp8_scaling came from, where not the flag or its default (scaled_for)
    moe_backend: str = ""  # the MoE backend whose kernels time the routed experts (MOE_BACKENDS); "" the engine's default

    def __post_init__(self):
        super().__post_init__()
        if self.fp8_scaling not in FP8_SCALINGS:
            raise unknown_name("fp8 scaling", self.fp8_scaling, FP8_SCALINGS, field="fp8_scaling")
        if self.moe_backend not in MOE_BACKENDS:
            raise unknown_name("MoE backend", self.moe_backend, MOE_BACKENDS[1:], field="moe_backend")

    def scaled_for(self, precision, chosen: str | None = None) -> "MeasuredKernels":
        """The tables' fp8 rows as the checkpoint scales its fp8 weights (Precision.fp8_scaling: a weight_block_size
        picks the block rows, ModelOpt's FP8 the per-tensor ones), unless ``chosen`` (--fp8-scaling) said which."""
        scaling = getattr(precision, "fp8_scaling", "")
        if chosen or not scaling:
            return self
        return dataclasses.replace(self, fp8_scaling=scaling, fp8_scaling_from="the checkpoint's")

    def table_dtype(self, dtype: str) -> str:
        """The GEMM table's dtype for our ``dtype``: fp8 as fp8_block with block scaling."""
        return "fp8_block" if dtype == "fp8" and self.fp8_scaling == "block" else dtype

    @classmethod
    def for_machine(cls, machine: Machine, kernels: str, **cost) -> "MeasuredKernels":
        """The model of ``kernels`` (ENGINE[@VERSION], or the path of a `roofline calibrate` profile
        measured on this machine: measured.profile) on a machine, refused by name where no tables are."""
        if profile.is_profile(kernels):
            profile.machine_of(machine.key, kernels)  # refused by name unless the profile measured this machine
            return cls(kernels=kernels, tables=profile.source(kernels), **cost)
        near, why = transfer_source(machine, kernels), ""
        if near is None:  # a user's machine file: the measured preset nearest its figures (nearest_measured)
            near, why = nearest_measured(machine, kernels)
            if near is None and why:
                raise RooflineError(f"no measured kernels for {machine.name}: {why}", field="machine", also=("kernels",))
        ts = resolve(near or machine.key, kernels, "gemm")  # refused by name here: a GPU, engine or version without tables
        if near:
            return cls(kernels=kernels, tables=f"{ts.engine} {ts.version} on {ts.gpu}, transferred to {machine.name}{why}",
                       measured_on=near, **cost)
        return cls(kernels=kernels, tables=f"{ts.engine} {ts.version} on {ts.gpu}", **cost)

    def _source(self, machine: Machine) -> str:
        """The preset whose tables price this machine's ops: its own, or the one they transfer from."""
        return self.measured_on or machine.key

    def _gemm_table(self, machine: Machine, dtype: str):
        return self._onto(gemm_table(self._source(machine), self.kernels, self.table_dtype(dtype)), machine)

    def _attention_table(self, machine: Machine, decode: bool):
        return self._onto(attention_table(self._source(machine), self.kernels, bool(decode)), machine)

    def _mla_table(self, machine: Machine):
        return self._onto(mla_table(self._source(machine), self.kernels), machine)

    def _gdn_table(self, machine: Machine):
        return self._onto(gdn_table(self._source(machine), self.kernels), machine)

    def _linear_table(self, machine: Machine, family: str):
        """The KDA table (family "kda") or the Mamba-2 conv's ("mamba2")."""
        load = kda_table if family == "kda" else mamba2_table
        return self._onto(load(self._source(machine), self.kernels), machine)

    @staticmethod
    def _fused(kernel: Kernel) -> bool:
        """An op inside a measured module's one kernel (a MoE's activation): no time or launch of its own."""
        return bool(kernel.shape) and kernel.shape[0] == MOE_EXPERTS and kernel.category != "matmul"

    def _onto(self, table, machine: Machine):
        """A GEMM or attention table of the source preset read against ``machine``'s roofline: each
        point's efficiency kept, the bound this machine's (transferred), said in its source."""
        if not self.measured_on:
            return table
        return dataclasses.replace(table, machine=machine, source=f"{table.source}, transferred to {machine.name}")

    def priced_by(self, model=None, tensor_parallel: int = 1) -> str:
        """Which ops the measured kernels price: every family the tables hold, or those ``model``
        has (MLA decode, routed experts) and its layout needs (all-reduces past one GPU)."""
        rows = "128-block" if self.fp8_scaling == "block" else "per-tensor"
        why = f"as {self.fp8_scaling_from} weights are scaled (--fp8-scaling sets another)" if self.fp8_scaling_from else \
            "(--fp8-scaling block)"
        return self._priced_by(model, tensor_parallel) + (f"; fp8 weights read from the tables' {rows}-scaled rows {why}"
                                                          if self.fp8_scaling_from or self.fp8_scaling == "block" else "")

    @staticmethod
    def _families(model, tensor_parallel: int, reduces: bool = True) -> str:
        from roofline.architecture import GatedDeltaNet, LatentAttention, Mamba2

        has = (lambda test: True) if model is None else (lambda test: any(test(k) for k in model.kinds))
        names = ["matmuls", "fused attention"]
        names += ["MLA decode"] if has(lambda k: isinstance(k.mixer, LatentAttention)) else []
        names += ["DSA's prompt module"] * has(lambda k: isinstance(k.mixer, LatentAttention) and k.mixer.index_heads > 0)
        names += ["Gated DeltaNet"] if has(lambda k: isinstance(k.mixer, GatedDeltaNet) and not k.mixer.gate_rank) else []
        names += ["Kimi Delta Attention"] if has(lambda k: isinstance(k.mixer, GatedDeltaNet) and k.mixer.gate_rank) else []
        names += ["Mamba-2's conv"] if has(lambda k: any(isinstance(m, Mamba2) for m in k.mixers)) else []
        names += ["routed experts"] if has(lambda k: k.is_moe) else []
        names += ["all-reduces"] if reduces and (model is None or tensor_parallel > 1) else []
        return ", ".join(names[:-1]) + " and " + names[-1]

    def _priced_by(self, model=None, tensor_parallel: int = 1) -> str:
        if profile.is_profile(self.kernels):
            return (f"matmuls and fused attention from the kernels measured by {self.tables or self.kernels} plus the "
                    "launch; the other ops by the cost model")
        if self.measured_on:  # all-reduces are the machine's interconnect: never transferred
            return (f"{self._families(model, tensor_parallel, reduces=False)} at the efficiencies of the measured "
                    f"kernels of {self.tables or self.kernels} (aiconfigurator-core; transferred: each shape's share of its roofline "
                    f"on the {self.measured_on} applied to this machine's, not measured on it) plus the launch; the other "
                    "ops, all-reduces included, by the cost model")
        return (f"{self._families(model, tensor_parallel)} from the measured kernels of "
                f"{self.tables or self.kernels} (aiconfigurator-core) plus the launch; the other ops by the cost model, "
                "norms and element-wise kernels at no less than the tables' least kernel time (measured.floor)")

    def describe(self, graph_steps: str = "", model=None, tensor_parallel: int = 1) -> str:
        """The cost model's line, and which ops the measured kernels price (those ``model`` has)."""
        return super().describe(graph_steps) + "; " + self.priced_by(model, tensor_parallel)

    def predict(self, kernels, machine) -> MeasuredWorkloadPrediction:
        base = super().predict(kernels, machine)
        return MeasuredWorkloadPrediction(**vars(base))

    @staticmethod
    def family_of(kernel: Kernel) -> str:
        """The measured family an op belongs to: "attention" (a fused attention), "gemm" (a matmul),
        "" (none measured yet)."""
        if kernel.shape and kernel.shape[0] == FUSED_ATTENTION:
            return "attention"
        if kernel.shape and kernel.shape[0] == MOE_EXPERTS:
            return "moe"
        if kernel.shape and kernel.shape[0] == ALL_REDUCE:
            return "all-reduce"
        if kernel.shape and kernel.shape[0] == FUSED_MLA:
            return "mla"
        if kernel.shape and kernel.shape[0] == GATED_DELTA_NET:
            return "gdn"
        if kernel.shape and kernel.shape[0] in LINEAR_FAMILIES:
            return LINEAR_FAMILIES[kernel.shape[0]]
        return "gemm" if kernel.category == "matmul" else ""

    def _gemm(self, kernel: Kernel, machine: Machine, shape=None):
        """(GemmEstimate, None) for an op of one size a measured table prices (a matmul, a fused
        attention, a routed expert from its module, an all-reduce), else (None, why not). ``shape``:
        the kernel's unless given."""
        shape = kernel.shape if shape is None else shape
        if shape and shape[0] == FUSED_ATTENTION:
            return self._attention(kernel, machine, shape)
        if shape and shape[0] == MOE_EXPERTS:
            return self._moe(kernel, machine, shape)
        if shape and shape[0] == FUSED_MLA:
            _, B, S, H, r, rope, kv_dtype = shape
            try:
                return self._mla_table(machine).estimate(kv_dtype, B, S, H, int(r), int(rope)), None
            except RooflineError as exc:
                return None, str(exc)
        if shape and shape[0] == GATED_DELTA_NET:
            try:
                return self._gdn_table(machine).estimate(*shape[1:]), None
            except RooflineError as exc:
                return None, str(exc)
        if shape and shape[0] in LINEAR_FAMILIES:
            try:
                return self._linear_table(machine, LINEAR_FAMILIES[shape[0]]).estimate(*shape[1:]), None
            except RooflineError as exc:
                return None, str(exc)
        if shape and shape[0] == ALL_REDUCE:
            if self.measured_on:
                return None, (f"an all-reduce's table is its machine's interconnect: not transferred from "
                              f"{self.measured_on}")
            try:
                return all_reduce_table(machine.key, self.kernels).estimate(shape[1], shape[2]), None
            except RooflineError as exc:
                return None, str(exc)
        if kernel.category == "attention":
            return None, ("unfused attention (QK^T, PV), MLA's prefill, a verify step's latent attention and DeepSeek "
                          "Sparse Attention's indexer and top-k attention have no measured family here; the tables hold "
                          "fused attention (--attention flash) and MLA's dense decode")
        if self.floored(kernel):
            return self._floor(kernel, machine)
        if kernel.category != "matmul":
            return None, f"no measured {kernel.category} family yet"
        dims = matmul_dims(shape)
        if dims is None or not all(np.ndim(x) == 0 for x in dims):
            return None, "a matmul of unknown shape"
        batch, M, N, K = (float(x) for x in dims)
        if batch != 1:
            return None, f"a batched matmul ({batch:,.0f} matrices): the GEMM table measured single ones"
        if kernel.dtype not in TABLE_DTYPE:
            return None, f"no measured {kernel.dtype} GEMMs"
        try:
            return self._gemm_table(machine, kernel.dtype).estimate(M, N, K), None
        except RooflineError as exc:  # a dtype this engine did not measure on this GPU: said in the op's source
            return None, str(exc)

    @classmethod
    def floored(cls, kernel: Kernel) -> bool:
        """A norm or element-wise kernel no table measures, run as a kernel of its own: not fused into a measured
        module (a MoE's activation), nor a residual add, which the engines fuse into the norm after it (vLLM's and
        SGLang's fused_add_rms_norm, TensorRT-LLM's RMSNorm given the residual)."""
        return (kernel.category in ("norm", "elementwise") and cls.family_of(kernel) == "" and not cls._fused(kernel)
                and not kernel.name.startswith("residual add"))

    def _floor(self, kernel: Kernel, machine: Machine):
        """A floored op's time: the cost model's body (e_c, e_m, no launch), at least the engine's
        kernel floor inside a CUDA graph (measured.floor.floor_estimate); FLOPs and bytes may be arrays."""
        if self.measured_on:
            return None, f"a kernel's floor is its GPU's: not transferred from {self.measured_on}"
        return floor_estimate(kernel, machine, self.kernels, CostModel.op_seconds(self, kernel, machine, 0.0)[2])

    def _attention(self, kernel: Kernel, machine: Machine, shape):
        _, B, T, S, H, K, d, dv, window, chunked, decode, kv_dtype = shape
        if dv != d or chunked:
            return None, ("a V head dim unlike the K one" if dv != d else "chunked attention") + \
                ": the attention tables measured neither"
        try:
            return self._attention_table(machine, decode).estimate(kernel.dtype, kv_dtype, B, T, S, H, K, d, int(window or 0)), None
        except RooflineError as exc:
            return None, str(exc)

    def _moe(self, kernel: Kernel, machine: Machine, shape):
        """A routed-expert op from the measured MoE module (its moe_backend's rows), whose one kernel runs the gate+up
        GEMM, the activation (fused: its time and bytes are the GEMMs') and the down GEMM: the op's own roofline (its
        tokens' expected experts, its bytes) over the module's efficiency at its tokens (measured.moe)."""
        _, M, D, F, k, E, gated, weights, compute = shape
        try:
            eff, basis, points, source = moe_table(self._source(machine), self.kernels).efficiency(
                compute, self.table_dtype(weights), M, D, F, k, E, self.moe_backend)
            if self.measured_on:
                source = f"{source}, transferred to {machine.name}"
        except RooflineError as exc:
            return None, str(exc)
        if kernel.category != "matmul":
            return GemmEstimate(0.0, 0.0, "fused", points, f"{source}: inside the module's time, fused into its GEMMs"), None
        return GemmEstimate(float(self._expert_op_s(kernel, machine, shape, eff)), time_lower_bound(kernel, machine),
                            basis, points, f"{source}: the module's {eff:.0%} of its roofline at {float(M):,.0f} tokens"), None

    def _expert_op_s(self, kernel: Kernel, machine: Machine, shape, eff):
        """A routed-expert op's seconds: its share of the module's FLOPs (gate+up 2/3 of a gated module's, down 1/3) of
        the module's time at its M tokens reading the experts the op reads (its weights: uniform routing's, under expert
        parallelism the busiest GPU's; measured.moe.module_s), at the table's widths for weights and activations (NVFP4's
        4.5 bits for both; our op's own roofline, 16-bit activations, priced an NVFP4 prefill's experts at twice the
        module's time: DeepSeek-V3, B200, 8,192 tokens, 256 x 7,168: 2.9 ms for 1.45)."""
        _, M, D, F, k, E, gated, weights, compute = shape
        M = np.asarray(M, dtype=float)
        dtype = MOE_TABLE_DTYPE[(compute, self.table_dtype(weights))]
        width = np.divide(np.asarray(kernel.flops, float), 2.0 * M * k * D * F, out=np.ones_like(M), where=M > 0)  # 2 or 1
        touched = np.asarray(kernel.weight_elems, float) / (D * F * width) if np.any(kernel.weight_elems) else expected_experts_touched(E, k, M)
        table = moe_table(self._source(machine), self.kernels)
        module_s = moe_module_s(machine, dtype, M, D, F, k, E, bool(gated), eff, touched, lambda x: table.efficiencies(
            compute, self.table_dtype(weights), x, D, F, k, E, self.moe_backend))
        return module_s * np.asarray(kernel.flops, dtype=float) / (2.0 * M * k * D * F * ((2 if gated else 1) + 1))

    def _measured_s(self, kernel: Kernel, machine: Machine):
        """The measured kernel time of an op, NaN where the tables do not price it: a float for an op
        of one size, an array for an op of many (a decode curve's batches), each size looked up; never
        under the op's roofline (at_least_roofline)."""
        shape = kernel.shape
        if not shape or all(np.ndim(x) == 0 for x in shape):
            est, _ = self._gemm(kernel, machine)
            return at_least_roofline(est.time_s, kernel, machine) if est is not None else np.nan
        try:
            return at_least_roofline(self._times(kernel, machine), kernel, machine)
        except RooflineError:  # a site, dtype or size the tables lack: the cost model's, as one size says
            return np.nan

    def _times(self, kernel: Kernel, machine: Machine):
        """_measured_s for an op of many sizes: each family's table read in one numpy pass."""
        shape, family = kernel.shape, self.family_of(kernel)
        if family == "gemm":
            dims = matmul_dims(shape)
            if dims is None or np.any(np.asarray(dims[0]) != 1) or kernel.dtype not in TABLE_DTYPE:
                return np.nan
            return self._gemm_table(machine, kernel.dtype).times(*dims[1:])
        if family == "attention":
            _, B, T, S, H, K, d, dv, window, chunked, decode, kv_dtype = shape
            if dv != d or chunked:
                return np.nan
            return self._attention_table(machine, decode).times(
                kernel.dtype, kv_dtype, B, T, S, H, K, d, int(window or 0))
        if family == "moe":
            _, M, D, F, k, E, gated, weights, compute = shape
            eff = moe_table(self._source(machine), self.kernels).efficiencies(compute, self.table_dtype(weights), M, D, F, k, E,
                                                                               self.moe_backend)
            if self._fused(kernel):
                return np.zeros_like(eff)  # fused into the module's GEMMs
            return self._expert_op_s(kernel, machine, shape, eff)
        if family == "mla":
            _, B, S, H, r, rope, kv_dtype = shape
            return self._mla_table(machine).times(kv_dtype, B, S, H, int(r), int(rope))
        if family == "gdn":
            return self._gdn_table(machine).times(*shape[1:])
        if family in ("kda", "mamba2"):
            return self._linear_table(machine, family).times(*shape[1:])
        if family == "all-reduce":
            if self.measured_on:
                return np.nan
            return all_reduce_table(machine.key, self.kernels).times(shape[1], shape[2])
        return np.nan

    def op_seconds(self, kernel: Kernel, machine: Machine, launch_s: float, *floor):
        """The cost model's (compute_s, memory_s, time_s), with each size the tables price at its
        measured kernel time plus the launch; the columns scaled to it, as a calibrated model's
        (a fused op's to 0)."""
        c, m, t = super().op_seconds(kernel, machine, launch_s, *floor)
        measured = self._measured_s(kernel, machine)
        if np.all(np.isnan(measured)):
            return c, m, t
        body = overlapped_s(c, m, self.overlap)
        r = np.where(np.isnan(measured), 1.0, np.divide(np.nan_to_num(measured), body, out=np.zeros_like(
            np.asarray(body, dtype=float)), where=np.asarray(body) > 0))
        time_s = np.where(np.isnan(measured), t, (0.0 if self._fused(kernel) else launch_s) + np.nan_to_num(measured))
        if np.ndim(time_s) == 0:
            return float(c * r), float(m * r), float(time_s)
        return c * r, m * r, time_s

    def predict_op(self, kernel: Kernel, machine: Machine, launch_s: float | None = None, *floor) -> MeasuredOpPrediction:
        p = super().predict_op(kernel, machine, launch_s, *floor)
        sol = time_lower_bound(kernel, machine)
        family = self.family_of(kernel)
        floored = self.floored(kernel) and np.ndim(kernel.bytes) > 0  # a norm of many sizes: each at least the floor
        if floored or kernel.shape and not all(np.ndim(x) == 0 for x in kernel.shape):  # many sizes: each looked up
            c, m, t = self.op_seconds(kernel, machine, p.launch_s, *floor)
            priced = ~np.isnan(np.asarray(self._measured_s(kernel, machine), dtype=float))
            basis = "measured per size" if priced.all() else ("measured where tabled" if priced.any() else "cost model")
            basis = "floor" if floored and priced.any() else basis
            return MeasuredOpPrediction(**{**vars(p), "compute_s": c, "memory_s": m, "time_s": t}, basis=basis,
                                        source="each size looked up in its table" if priced.any() else
                                        "no size of it in the tables", roofline_s=sol, family=family)
        est, why = self._gemm(kernel, machine)
        if est is None:
            return MeasuredOpPrediction(**vars(p), basis="cost model", source=why, roofline_s=sol, family=family)
        kernel_s = at_least_roofline(est.time_s, kernel, machine)
        body = overlapped_s(p.compute_s, p.memory_s, self.overlap)
        r = kernel_s / body if body > 0 else 0.0
        compute_s, memory_s = p.compute_s * r, p.memory_s * r
        launch_s = 0.0 if self._fused(kernel) else p.launch_s
        fields = {**vars(p), "compute_s": compute_s, "memory_s": memory_s, "time_s": launch_s + kernel_s, "launch_s": launch_s,
                  "bound": roofline_bound(kernel, machine)}  # the roofline's verdict, as a calibrated op's
        return MeasuredOpPrediction(**fields, basis=est.basis, source=est.source, points=est.points, roofline_s=sol,
                                    family=family, beat_roofline=float(sol / est.time_s) if kernel_s > est.time_s else 0.0,
                                    transferred_from=self.measured_on)
