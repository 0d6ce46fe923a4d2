"""The calibrated cost model: seed 003's estimate with its fractions measured on this device.

    t = t_launch + r(op) * max(F / achieved(F), B / bandwidth(B))

- achieved(F): the matmul FLOP/s measured at the same dtype, interpolated in log-log by the op's
  FLOPs (the achievable fraction as a function of size, seed 003) for matmul-like ops; the best
  measured rate for the few vector FLOPs of elementwise ops, norms and softmax;
- bandwidth(B): the copy/add bandwidth measured at the op's working set (its bytes), interpolated
  in log-log: in cache when it fits, main memory when not (the hierarchical roofline, seed 000
  section 2.4). With ``cold`` every op reads main memory (caches flushed between runs);
- r(op): the op's residual, measured / modelled over the calibration's probe ops of the same name
  (interpolated in log bytes between probe sizes, constant beyond them), else the geometric mean
  over its category, else 1: "the achievable fractions are themselves measured, kernel by kernel";
- the interval [low, high] multiplies the body by the leave-one-out residual spread of the op's
  category (how well r predicted probes it was not fitted on) and by the timing spread of repeats.

Same interface as roofline.cost.CostModel: ``predict(kernels, machine) -> WorkloadPrediction``
(here a subclass whose ops carry ``low_s`` and ``high_s``). Scaling the machine (what-if) scales
the measured curves by peak and bandwidth ratios. Numpy only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from roofline.cost import OpPrediction, WorkloadPrediction, _jsonable
from roofline.kernels import Kernel
from roofline.machines import Machine, get_machine
from roofline.machine_profile import Calibration, load_profile, main_memory, matmul_rates, peaks, stream_curve, timing_spread

SIZED_CATEGORIES = ("matmul", "attention", "decode")
DEFAULT_COMPUTE_FRACTION = 0.70  # seed 003's e_c, for a dtype the calibration did not measure
MIN_PROBE_LAUNCHES = 1.5  # a probe shorter than this many launch overheads is not fitted


def hierarchical_lower_bound(kernel: Kernel, machine: Machine) -> tuple[float, str]:
    """(seconds, level): the roofline with the bandwidth of the smallest memory level that holds
    the kernel's working set (its bytes), main memory if none does. A level is at least as fast as
    every larger one (data that fits a small cache also fits the larger ones), so the bandwidth is
    the best over the holding level, the levels above it and main memory; the level named is the
    one whose bandwidth was used. Never slower than time_lower_bound."""
    machine = get_machine(machine)
    bw, level = machine.bandwidth, "main memory"
    for lvl in sorted(machine.levels, key=lambda l: l.size_bytes):
        if kernel.bytes <= lvl.size_bytes and lvl.bytes_per_s > bw:
            bw, level = lvl.bytes_per_s, lvl.name
    t = max(kernel.flops / machine.peak(kernel.dtype), kernel.bytes / bw)
    return float(t), level


@dataclass(frozen=True)
class Residual:
    """The op's measured / modelled ratio and its multiplicative band (low <= 1 <= high)."""

    ratio: float
    low: float
    high: float
    source: str  # "op", "category" or "none"


@dataclass(frozen=True)
class CalibratedOpPrediction(OpPrediction):
    """An OpPrediction with the calibrated interval (``low_s``, ``high_s``), the residual applied
    and the achieved FLOP/s and bandwidth the model used."""

    low_s: float = 0.0
    high_s: float = 0.0
    residual: float = 1.0
    residual_source: str = "none"
    flops_per_s: float = 0.0
    bytes_per_s: float = 0.0

    def to_dict(self) -> dict:
        extra = ("low_s", "high_s", "residual", "residual_source", "flops_per_s", "bytes_per_s")
        return {**super().to_dict(), **{k: _jsonable(getattr(self, k)) for k in extra}}


@dataclass(frozen=True)
class CalibratedWorkloadPrediction(WorkloadPrediction):
    """A WorkloadPrediction whose total carries the interval: sums of the ops' lows and highs
    (the ops' errors on one machine move together, so the band is not narrowed by averaging)."""

    total_low_s: float = 0.0
    total_high_s: float = 0.0

    def to_dict(self) -> dict:
        cal: CalibratedModel = self.model  # type: ignore[assignment]
        return {
            "machine": self.machine,
            "model": "calibrated",
            "profile_date": cal.calibration.date,
            "launch_overhead_s": cal.launch_overhead_s,
            "cold": cal.cold,
            **self.summary(),
            "total_low_s": self.total_low_s,
            "total_high_s": self.total_high_s,
            "ops": [op.to_dict() for op in self.ops],
        }


@dataclass(frozen=True)
class CalibratedModel:
    """The cost model of a measured profile (see the module docstring). ``cold``: caches flushed
    between runs, so every op's bytes come from main memory."""

    calibration: Calibration
    cold: bool = False
    residuals: dict = field(init=False, repr=False, compare=False)
    category_bands: dict = field(init=False, repr=False, compare=False)

    # attributes WorkloadPrediction and the tables read from a cost model
    overlap: float = field(default=1.0, init=False)
    cuda_graph: bool = field(default=False, init=False)

    def __post_init__(self):
        residuals, bands = _fit_residuals(self)
        object.__setattr__(self, "residuals", residuals)
        object.__setattr__(self, "category_bands", bands)

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
        unmeasured dtype, seed 003's 0.70 of the machine's peak."""
        rates = matmul_rates(self.calibration, dtype)
        if rates is None:
            if machine is None:
                raise ValueError(f"no {dtype} matmul in the calibration and no machine to take a peak from")
            return DEFAULT_COMPUTE_FRACTION * machine.peak(dtype)
        f, r = rates
        size = np.asarray(flops, dtype=float)
        x = np.log(np.clip(size, 1.0, 1e300))
        out = np.where(np.isposinf(size), r.max(), np.exp(np.interp(x, np.log(f), np.log(r))))
        if machine is not None:
            out = out * machine.peak(dtype) / r.max()
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

    def base_body_s(self, kernel: Kernel, machine: Machine | None = None, cold: bool | None = None):
        """max(compute, memory) before the residual: (compute_s, memory_s, body_s, FLOP/s, bytes/s).
        Matmul-like ops (SIZED_CATEGORIES) get the matmul rate at their size; the others' few
        vector FLOPs the best measured rate (their small-size matmul rate is launch, counted apart).
        ``cold``: read every byte from main memory (default: the model's ``cold``)."""
        size = kernel.flops if kernel.category in SIZED_CATEGORIES else np.inf
        fps = self.achieved_flops_per_s(size, kernel.dtype, machine)
        bps = self.bandwidth_bytes_per_s(kernel.bytes, machine, cold)
        compute_s = np.asarray(kernel.flops, dtype=float) / fps
        memory_s = np.asarray(kernel.bytes, dtype=float) / bps
        return compute_s, memory_s, np.maximum(compute_s, memory_s), fps, bps

    def residual(self, kernel: Kernel) -> Residual:
        """The op's residual: by name (interpolated over probe sizes), else by category, else 1."""
        spread_lo, spread_hi = timing_spread(self.calibration)
        band_lo, band_hi = self.category_bands.get(kernel.category, self.category_bands.get("*", (1.0, 1.0)))
        lo, hi = band_lo * spread_lo, band_hi * spread_hi
        fit = self.residuals.get(("op", kernel.dtype, kernel.name))
        if fit is not None:
            x, logr = fit
            r = float(np.exp(np.interp(np.log(max(float(np.max(kernel.bytes)), 1.0)), x, logr)))
            return Residual(r, lo, hi, "op")
        fit = self.residuals.get(("category", kernel.dtype, kernel.category))
        if fit is not None:
            r, r_lo, r_hi = fit
            return Residual(r, min(lo, r_lo / r), max(hi, r_hi / r), "category")
        return Residual(1.0, lo, hi, "none")

    # -- the CostModel interface ----------------------------------------------------------------
    compute_efficiency = None  # measured rates by size instead (the tables say so)
    memory_efficiency = None

    def op_seconds(self, kernel: Kernel, machine: Machine, launch_s: float):
        """(compute_s, memory_s, time_s) of one run: the measured rates, the op's residual and
        ``launch_s`` (CostModel.op_seconds' interface, what the planner sums)."""
        compute_s, memory_s, body, _, _ = self.base_body_s(kernel, machine)
        return compute_s, memory_s, launch_s + self.residual(kernel).ratio * body

    def describe(self) -> str:
        return (f"calibrated model of the profile measured {self.calibration.date}: achieved rates by op size and "
                f"working set, launch {self.launch_overhead_s * 1e6:.1f} us")

    def predict_op(self, kernel: Kernel, machine: Machine, launch_s: float | None = None) -> CalibratedOpPrediction:
        compute_s, memory_s, body, fps, bps = self.base_body_s(kernel, machine)
        res = self.residual(kernel)
        launch = self.launch_overhead_s if launch_s is None else launch_s
        time_s = launch + res.ratio * body
        return CalibratedOpPrediction(
            name=kernel.name, category=kernel.category, dtype=kernel.dtype, flops=kernel.flops, bytes=kernel.bytes,
            intensity=kernel.intensity, compute_s=_f(compute_s), memory_s=_f(memory_s), launch_s=launch,
            time_s=_f(time_s), bound="memory" if memory_s > compute_s else "compute",
            low_s=_f(launch + res.ratio * res.low * body), high_s=_f(launch + res.ratio * res.high * body),
            residual=res.ratio, residual_source=res.source, flops_per_s=_f(fps), bytes_per_s=_f(bps),
        )

    def predict(self, kernels: Sequence[Kernel], machine) -> CalibratedWorkloadPrediction:
        machine = get_machine(machine)
        ops = tuple(self.predict_op(k, machine) for k in kernels)
        base = CalibratedWorkloadPrediction.from_ops(machine.name, self, ops)
        return dataclasses.replace(base, total_low_s=sum(o.low_s for o in ops), total_high_s=sum(o.high_s for o in ops))


def _f(x):
    return float(x) if np.ndim(x) == 0 else x


def _fit_residuals(model: CalibratedModel) -> tuple[dict, dict]:
    """Per-op residual curves, per-category residuals and per-category leave-one-out bands from the
    calibration's probes. Keys: ("op", dtype, name) -> (log bytes, log r) sorted by size;
    ("category", dtype, category) -> (geometric mean r, min r, max r). Bands: category ->
    (low, high) multipliers, "*" pooled over every category.

    The probes were timed warm, so r = (t - launch) / the warm body, whatever the model's ``cold``
    (a cold prediction applies r to the main-memory body). Probes shorter than MIN_PROBE_LAUNCHES
    launches are left out: their time is mostly dispatch, and t - launch is noise."""
    cal = model.calibration
    groups: dict[tuple, list[tuple[float, float]]] = {}
    by_cat: dict[tuple, list[float]] = {}
    cats: dict[tuple, str] = {}
    for p in cal.probes:
        k = Kernel(p.name, p.flops, p.bytes, p.category, p.dtype)
        rates = matmul_rates(cal, p.dtype)
        if rates is None or p.measured_s < MIN_PROBE_LAUNCHES * cal.launch_s:
            continue
        _, _, base, _, _ = model.base_body_s(k, cold=False)
        r = (p.measured_s - cal.launch_s) / float(base)
        groups.setdefault((p.dtype, p.name), []).append((float(np.log(max(p.bytes, 1.0))), float(np.log(r))))
        by_cat.setdefault((p.dtype, p.category), []).append(r)
        cats[(p.dtype, p.name)] = p.category
    residuals: dict = {}
    loo: dict[str, list[float]] = {}
    for key, pts in groups.items():
        pts.sort()
        x = np.array([a for a, _ in pts])
        y = np.array([b for _, b in pts])
        residuals[("op", *key)] = (x, y)
        for i in range(len(pts)):
            if len(pts) < 2:
                break
            rest = np.delete(np.arange(len(pts)), i)
            guess = np.interp(x[i], x[rest], y[rest])
            loo.setdefault(cats[key], []).append(float(np.exp(y[i] - guess)))
    for (dtype, cat), rs in by_cat.items():
        gm = float(np.exp(np.mean(np.log(rs))))
        residuals[("category", dtype, cat)] = (gm, min(rs), max(rs))
    bands = {}
    pooled = [q for qs in loo.values() for q in qs]
    for cat, qs in loo.items():
        if len(qs) >= 2:
            bands[cat] = (min(1.0, min(qs)), max(1.0, max(qs)))
    if pooled:
        bands["*"] = (min(1.0, min(pooled)), max(1.0, max(pooled)))
    return residuals, bands


def calibrated_model_for(machine_or_path, cold: bool = False) -> CalibratedModel | None:
    """The calibrated model of a profile path, or None for a preset or a plain machine file
    (which keeps the existing cost model: without a profile nothing changes)."""
    from roofline.errors import RooflineError

    try:
        return CalibratedModel.from_profile(machine_or_path, cold)
    except RooflineError:
        return None


__all__ = ["CalibratedModel", "CalibratedOpPrediction", "CalibratedWorkloadPrediction", "Residual",
           "hierarchical_lower_bound", "calibrated_model_for", "peaks"]
