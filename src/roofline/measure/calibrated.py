"""The calibrated cost model: the workshop's estimate (the 'Predicting a Kernel's Time' plate) with its
fractions measured on this device.

    t = t_launch + r(op) * max(F / achieved(F), B / bandwidth(B))

- achieved(F): the matmul FLOP/s measured at the same dtype, interpolated in log-log by the op's
  FLOPs (the achievable fraction as a function of size, as the plate describes it) for matmul-like ops; the best
  measured rate for the few vector FLOPs of elementwise ops, norms and softmax;
- bandwidth(B): the copy/add bandwidth measured at the op's working set (its bytes), interpolated
  in log-log: in cache when it fits, main memory when not (the hierarchical roofline, the roofline
  chapter, section 2.4). With ``cold`` every op reads main memory (caches flushed between runs);
- r(op): the op's residual, measured / modelled over the calibration's probe ops of the same name
  (interpolated in log bytes between probe sizes, constant beyond them), else the geometric mean
  over its category, else 1: "the achievable fractions are themselves measured, kernel by kernel";
- the interval [low, high] multiplies the body by the leave-one-out residual spread of the op's
  category (how well r predicted probes it was not fitted on) and by the timing spread of repeats.

Same interface as roofline.cost.CostModel: ``predict(kernels, machine) -> WorkloadPrediction``
(here a subclass whose ops carry ``low_s`` and ``high_s``). Scaling the machine (what-if) scales
the measured curves by peak and bandwidth ratios. Numpy only.

The op classes are in probe_classes.py, the residual fits in residuals.py; the measured curves in
measurements.py; the prediction records, and an op's prediction itself, in calibrated_predictions.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from roofline.cost import hierarchical_lower_bound, overlapped_s
from roofline.kernels import Kernel, matmul_dims
from roofline.machines import Machine, get_machine
from roofline.measure.calibrated_predictions import CalibratedOpPrediction, CalibratedWorkloadPrediction, predict_op
from roofline.measure.machine_file import load_profile
from roofline.measure.measurements import (Calibration, best_rate, cached_share, gemm_points, grid_rate, main_memory,
                                           matmul_rates, peaks, stream_curve, timing_spread)
from roofline.measure.probe_classes import SIZED_CATEGORIES, aten_name, fit_class, is_scalar, op_class, sized
from roofline.measure.residuals import INSTRUMENTS, Residual, class_launch, fit_residuals, lookup_residual
from roofline.units import US


DEFAULT_COMPUTE_FRACTION = 0.70  # the workshop's e_c, for a dtype the calibration did not measure


FORWARD_CACHE_SHARE = 0.25  # with fewer than three cache levels (a GPU's L2): past this share of the last, weights read cold


@dataclass(frozen=True)
class CalibratedModel:
    """The cost model of a measured profile (see the module docstring). ``cold``: caches flushed
    between runs, so every op's bytes come from main memory."""

    calibration: Calibration
    cold: bool = False
    weights_cold: bool = False  # matmuls read their weight from main memory (a forward whose weights outgrow the cache)
    operands_cold: bool = False  # the other ops find their operands evicted (the cold class probes, where measured)
    reuse_bytes: float = 0.0  # with weights_cold, the bytes a forward reads between two reads of a weight (for_forward)
    instrument: str = "wall"  # what measures the ops predicted: "wall" (a clock around the op) or "profiler"
    residuals: dict = field(init=False, repr=False, compare=False)
    class_launch: dict = field(init=False, repr=False, compare=False)
    cold_launch: dict = field(init=False, repr=False, compare=False)
    category_bands: dict = field(init=False, repr=False, compare=False)
    class_bands: dict = field(init=False, repr=False, compare=False)

    # attributes WorkloadPrediction and the tables read from a cost model
    overlap: float = field(default=1.0, init=False)
    cuda_graph: bool = field(default=False, init=False)

    def __post_init__(self):
        if self.instrument not in INSTRUMENTS:
            raise ValueError(f"instrument must be one of {INSTRUMENTS}, not {self.instrument!r}")
        object.__setattr__(self, "class_launch", class_launch(self.calibration, self.instrument))
        object.__setattr__(self, "cold_launch", class_launch(self.calibration, self.instrument, cold=True))
        residuals, bands, class_bands = fit_residuals(self)
        object.__setattr__(self, "residuals", residuals)
        object.__setattr__(self, "category_bands", bands)
        object.__setattr__(self, "class_bands", class_bands)

    def for_forward(self, bytes_per_forward: float) -> "CalibratedModel":
        """This model for a whole forward pass that moves ``bytes_per_forward`` (all its ops' bytes):
        its matmuls read their weights cold, and its other ops their operands, when that is more than
        forward_cache_bytes (a core's own cache on a CPU, a quarter of a GPU's L2). A step reads each weight once, and what else it touches (activations, KV cache, the
        allocator's churn, a shared L3's other tenants) evicts them well before the cache is full:
        on the 2-core EPYC of docs/accuracy-models.md (a 32 MiB L3) 27 MB (fp32) and 13 MB (bf16)
        forwards ran their decode GEMMs at the cold family's rate, 4-6x under the warm one, and their
        prefill's elementwise ops and norms 2-4x slower than the warm class probes.
        A weight is read again after the forward's bytes: with pool points in the profile
        (measurements.cached_share) its GEMMs avoid the share of the streaming cost that a pool of
        that size avoided (reuse_bytes)."""
        limit = self.forward_cache_bytes
        cold = 0 < limit < bytes_per_forward
        reuse = float(bytes_per_forward) if cold else 0.0
        if cold == self.weights_cold == self.operands_cold and reuse == self.reuse_bytes:
            return self
        return dataclasses.replace(self, weights_cold=cold, operands_cold=cold, reuse_bytes=reuse)

    def _has_pool(self) -> bool:
        return any(c.kind == "gemm_pool" for c in self.calibration.gemm)

    def weights_cached_share(self, dtype: str):
        """(phi, basis) of measurements.cached_share at this forward's reuse distance, or None
        (weights warm, every byte cold, no reuse distance or no pool points)."""
        if self.cold or not self.weights_cold or self.reuse_bytes <= 0:
            return None
        return cached_share(self.calibration, dtype, self.reuse_bytes)

    def _cache_kept(self) -> str:
        """Which cache forward_cache_bytes is, in words."""
        caches = self.calibration.caches
        if len(caches) >= 3:
            return f"{caches[-2][0]}, a core's own cache: the shared {caches[-1][0]} holds other data and tenants"
        return f"a quarter of the {caches[-1][0]}" if caches else "no cache known"

    @property
    def forward_cache_bytes(self) -> float:
        """The most a forward may move and still find its weights cached (for_forward): on a CPU
        with three or more cache levels, the level below the last (a core's own cache; the last is
        shared with the other cores and, on a VM, with other tenants: on the 2-core EPYC of
        docs/accuracy-models.md, with a 32 MiB L3, a 7.2 MiB decode step ran its GEMMs near the
        streamed family's rates, 2-3x the warm one's, 2026-12-02); else a quarter of the last
        cache (a GPU's L2). 0 when no cache is known."""
        caches = self.calibration.caches
        if not caches:
            return 0.0
        if len(caches) >= 3:
            return float(caches[-2][1])
        return FORWARD_CACHE_SHARE * float(caches[-1][1])

    def measured_by(self, instrument: str) -> "CalibratedModel":
        """This model for ops measured by ``instrument``: "wall" (a clock around each op: the class
        probes' loop times) or "profiler" (torch.profiler's CPU time of each op, as `roofline
        profile` reads a trace: the class probes as the profiler recorded them, which carries the
        profiler's own cost per recorded op). A calibration without profiled probes (a GPU one, an
        older one) keeps the wall times for them: says so in ``describe``."""
        return self if instrument == self.instrument else dataclasses.replace(self, instrument=instrument)

    @property
    def profiled_probes(self) -> bool:
        return any(p.profiled_s for p in self.calibration.probes)

    @classmethod
    def from_profile(cls, path, cold: bool = False) -> "CalibratedModel":
        _, cal = load_profile(path)
        return cls(cal, cold)

    @property
    def launch_overhead_s(self) -> float:
        return self.calibration.launch_s

    # -- the two rates --------------------------------------------------------------------------
    def achieved_flops_per_s(self, flops, dtype: str, machine: Machine | None = None):
        """Matmul FLOP/s at this size and dtype, scaled by the machine's peak over the measured
        one; ``flops`` = inf asks for the best measured rate (whatever size reached it). For an
        unmeasured dtype, the workshop's 0.70 of the machine's peak."""
        rates = matmul_rates(self.calibration, dtype)
        if rates is None:
            if machine is None:
                raise ValueError(f"no {dtype} matmul in the calibration and no machine to take a peak from")
            return DEFAULT_COMPUTE_FRACTION * machine.peak(dtype)
        f, r = rates
        best = best_rate(self.calibration, dtype)  # the profile's peak: what a machine's peak is scaled against
        size = np.asarray(flops, dtype=float)
        x = np.log(np.clip(size, 1.0, 1e300))
        out = np.where(np.isposinf(size), best, np.exp(np.interp(x, np.log(f), np.log(r))))
        if machine is not None:
            out = out * machine.peak(dtype) / best
        return out

    def bandwidth_bytes_per_s(self, working_set_bytes, machine: Machine | None = None, cold: bool | None = None):
        """Stream bandwidth at this working set (interpolated in log-log, clamped at the sweep's
        ends); main memory's when ``cold`` (default: the model's). Scaled by the machine's
        bandwidth over the measured."""
        ws, bw = stream_curve(self.calibration)
        dram, _ = main_memory(self.calibration)
        if self.cold if cold is None else cold:
            out = np.full(np.shape(working_set_bytes), dram, dtype=float)
        else:
            x = np.log(np.maximum(np.asarray(working_set_bytes, dtype=float), 1.0))
            out = np.exp(np.interp(x, np.log(ws), np.log(bw)))
        if machine is not None:
            out = out * machine.bandwidth / dram
        return out

    def gemm_rate(self, kernel: Kernel, machine: Machine | None = None):
        """(FLOP/s, extrapolated, basis) of a matmul with a known (batch, M, N, K) from the skinny-M
        GEMM family, bilinear in (log M, log N K) over the measured grid and clamped at its edges
        (``extrapolated`` then); None when the family was not measured at this dtype, the shape is
        unknown, or M is past the family's largest (the square sweep's rate by size holds there).
        A batch of b matrices runs at one matrix's rate."""
        pts = None
        dims = matmul_dims(kernel.shape)
        streamed = self.cold or self.weights_cold
        if dims and streamed:
            pts = gemm_points(self.calibration, kernel.dtype, cold=True)
            streamed = pts is not None
        if pts is None and dims:
            pts = gemm_points(self.calibration, kernel.dtype)
        if pts is None or not all(is_scalar(x) for x in dims):
            return None
        _, M, N, K = (float(x) for x in dims)
        got = grid_rate(pts, M, N * K)
        if got is None:
            return None
        rate, outside, (mu, nku) = got
        share = self.weights_cached_share(kernel.dtype) if streamed else None
        warm = grid_rate(gemm_points(self.calibration, kernel.dtype), M, N * K) if share and share[0] > 0 else None
        if warm is not None:  # the time of a cached share phi of the weight at the warm rate, the rest streamed
            rate = 1.0 / ((1.0 - share[0]) / rate + share[0] / warm[0])
        if machine is not None:
            best = best_rate(self.calibration, kernel.dtype)
            rate = rate * machine.peak(kernel.dtype) / (best if best is not None else pts[2].max())
        basis = (f"gemm {kernel.dtype}{' weights streamed' if streamed else ''} M {mu.min():g}-{mu.max():g} x N K "
                 f"{np.sqrt(nku.min()):g}^2-{np.sqrt(nku.max()):g}^2"
                 + (" (outside: clamped)" if outside else "") + (f", {share[1]}" if warm is not None else ""))
        return float(rate), outside, basis

    def base_body_s(self, kernel: Kernel, machine: Machine | None = None, cold: bool | None = None):
        """max(compute, memory) before the residual: (compute_s, memory_s, body_s, FLOP/s, bytes/s).
        Matmul-like ops (SIZED_CATEGORIES, but a decode-shaped attention: probe_classes.sized) get the matmul rate at their size; the others' few
        vector FLOPs the best measured rate (their small-size matmul rate is launch, counted apart).
        ``cold``: read every byte from main memory (default: the model's ``cold``)."""
        gemm = self.gemm_rate(kernel, machine) if kernel.category == "matmul" else None
        by_size = sized(kernel)
        if gemm is not None:
            fps = gemm[0]
        else:
            size = kernel.flops if by_size else np.inf
            fps = self.achieved_flops_per_s(size, kernel.dtype, machine)
        bps = self.bandwidth_bytes_per_s(kernel.bytes, machine, cold)
        compute_s = np.asarray(kernel.flops, dtype=float) / fps
        memory_s = np.asarray(kernel.bytes, dtype=float) / bps
        if kernel.category in SIZED_CATEGORIES and not by_size:
            # a decode-shaped attention: its FLOPs taken to hide under its K and V reads (probe_classes.sized), so the
            # body (and the compute column, capped at the memory one) follows its bytes
            compute_s = np.minimum(compute_s, memory_s)
        return compute_s, memory_s, overlapped_s(compute_s, memory_s), fps, bps

    def reads_cold(self, kernel: Kernel) -> bool:
        """Whether the op is costed from main memory by the cold class probes: not a matmul (its
        weights have the streamed GEMM family), the model cold (``cold``) or its operands evicted
        (``operands_cold``, a forward that outgrows the cache), and cold probes of its aten op or
        class in the profile."""
        if kernel.category == "matmul" or not (self.cold or self.operands_cold):
            return False
        return (("aten-cold", kernel.dtype, aten_name(kernel)) in self.residuals
                or ("class-cold", kernel.dtype, fit_class(kernel)) in self.residuals)

    def residual(self, kernel: Kernel, cold: bool = False) -> Residual:
        """The op's residual: by name (the same block op, interpolated over probe sizes), else by
        aten op (class probes of that very op), else by class (fit_class: the class probes,
        interpolated in log bytes, widened outside them), else by category, else 1. ``cold``: the
        cold class probes' curves (reads_cold), relative to the main-memory body. A row-wise op
        with a known row width is then multiplied by its width factor (residuals.width_factor:
        the same op probed on narrow rows)."""
        return lookup_residual(self.residuals, self.category_bands, self.class_bands, timing_spread(self.calibration),
                               kernel, cold)

    # -- the CostModel interface ----------------------------------------------------------------
    compute_efficiency = None  # measured rates by size instead (the tables say so)
    memory_efficiency = None

    def launch_of(self, kernel: Kernel, launch_s: float | None = None) -> float:
        """The op's fixed cost per call: its class's measured eager call on a tiny tensor (the class
        probes' floor) where measured, else the calibration's launch; ``launch_s`` other than the
        calibration's own (a user's --launch-overhead) wins."""
        if launch_s is not None and launch_s != self.launch_overhead_s:
            return launch_s
        return self.floor_band(kernel)[0]

    def floor_band(self, kernel: Kernel, cold: bool = False) -> tuple[float, float, float] | None:
        """(floor, low, high) of the op's fixed cost per call: the tiny probes of the same aten op
        (their median and range), else the median of its class's tiny probes with their range (one eager
        call of a class costs from ~1 us for an add to ~10 us for a GELU on this kind of CPU),
        else the calibration's launch. ``cold``: of the tiny probes timed after a cache flush
        (the dispatcher's code and data evicted too), None where they were not measured."""
        table = self.cold_launch if cold else self.class_launch
        got = table.get((kernel.dtype, "aten", aten_name(kernel)))
        if got is None:
            got = table.get((kernel.dtype, "class", fit_class(kernel)))
        if got is None:
            got = table.get((kernel.dtype, "class", op_class(kernel)))
        if got is None and cold:
            return None
        if got is None:
            t = self.launch_overhead_s
            return t, t, t
        return got

    def op_seconds(self, kernel: Kernel, machine: Machine, launch_s: float):
        """(compute_s, memory_s, time_s) of one run: the measured rates, the op's residual and
        its launch (launch_of; CostModel.op_seconds' interface, what the planner sums)."""
        cold = self.reads_cold(kernel)
        compute_s, memory_s, body, _, _ = self.base_body_s(kernel, machine, cold=True if cold else None)
        r = self.residual(kernel, cold).ratio
        return r * compute_s, r * memory_s, self.launch_of(kernel, launch_s) + r * body

    def framework_s(self, gaps: float, free_calls: float = 0.0) -> float:
        """The eager framework's own time in a forward with ``gaps`` gaps between its top-level ops
        (chrome_trace.between_ops): gaps x the profile's framework gap (measure.framework: Python,
        module calls and the views between ops, per gap, on small models) where it was measured;
        else one dispatch, the launch, per free op (``free_calls``, views), as profiles written
        before 2026-12-02 have it."""
        if self.calibration.framework_gap_s is not None:
            return float(gaps) * self.calibration.framework_gap_s
        return float(free_calls) * self.launch_overhead_s

    @property
    def framework_text(self) -> str:
        """How framework_s counts, for a total's line."""
        gap = self.calibration.framework_gap_s
        return (f"{gap / US:.1f} us per gap between top-level ops, measured by calibrate" if gap is not None
                else "one eager call per free op: this profile has no framework probe")

    def describe(self) -> str:
        instrument = ""
        if self.instrument == "profiler":
            instrument = ("; class ops as torch.profiler records them (the class probes profiled)" if self.profiled_probes
                          else "; class ops as a wall clock times them (this profile has no profiled probes: "
                               "torch.profiler's own cost per op is not in the prediction)")
        return (f"calibrated model of the profile measured {self.calibration.date}: achieved rates by op size and "
                f"working set, launch {self.launch_overhead_s / US:.1f} us"
                + (f"; matmul weights read cold (a forward of {self.reuse_bytes / 2**20:,.1f} MiB outgrows "
                   f"{self.forward_cache_bytes / 2**20:,.3g} MiB, {self._cache_kept()})" if self.weights_cold else "")
                + (", each weight read again after the whole forward's bytes (a block shown alone is still one of "
                   "the forward's): the GEMMs' basis gives the share cached" if self.reuse_bytes and self._has_pool() else "")
                + ("; other ops' operands read cold where cold probes were measured" if self.operands_cold else "")
                + instrument)

    def predict_op(self, kernel: Kernel, machine: Machine, launch_s: float | None = None) -> CalibratedOpPrediction:
        """One op: its time, interval, class and basis (calibrated_predictions.predict_op)."""
        return predict_op(self, kernel, machine, launch_s)

    def fastest_s(self, kernel: Kernel, machine: Machine | None = None):
        """The op at the best rates the profile measured, whatever the size: its FLOPs at the best
        matmul FLOP/s of its dtype and its bytes at the best stream bandwidth (the smallest cache's),
        the larger (scaled to ``machine`` as the rates are). No interval reaches below it."""
        ws, bw = stream_curve(self.calibration)
        best_bw = float(np.max(bw))
        if machine is not None:
            best_bw *= machine.bandwidth / main_memory(self.calibration)[0]
        rates = matmul_rates(self.calibration, kernel.dtype)
        compute = (np.asarray(kernel.flops, dtype=float) / self.achieved_flops_per_s(np.inf, kernel.dtype, machine)
                   if rates is not None or machine is not None else 0.0)
        return np.maximum(compute, np.asarray(kernel.bytes, dtype=float) / best_bw)

    def predict(self, kernels: Sequence[Kernel], machine) -> CalibratedWorkloadPrediction:
        machine = get_machine(machine)
        ops = tuple(self.predict_op(k, machine) for k in kernels)
        base = CalibratedWorkloadPrediction.from_ops(machine.name, self, ops)
        return dataclasses.replace(base, total_low_s=sum(o.low_s for o in ops), total_high_s=sum(o.high_s for o in ops))


def calibrated_model_for(machine_or_path, cold: bool = False) -> CalibratedModel | None:
    """The calibrated model of a profile path, or None for a preset, a Machine or a plain machine
    file with no [calibration] table (which keeps the existing cost model: without a profile
    nothing changes). A profile that cannot be read is a RooflineError naming the file and what is
    wrong in it, never a silent fall back to the cost model."""
    from pathlib import Path

    from roofline.measure.machine_file import NotAProfile

    if isinstance(machine_or_path, Machine) or not Path(str(machine_or_path)).is_file():
        return None
    try:
        return CalibratedModel.from_profile(machine_or_path, cold)
    except NotAProfile:
        return None


__all__ = ["CalibratedModel", "CalibratedOpPrediction", "CalibratedWorkloadPrediction", "Residual",
           "hierarchical_lower_bound", "calibrated_model_for", "op_class", "peaks"]
