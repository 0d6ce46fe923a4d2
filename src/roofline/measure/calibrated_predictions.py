"""What the calibrated model (calibrated.py) predicts: CalibratedOpPrediction, an op's time with
its interval [low_s, high_s], the residual applied and the measured rates it used, and predict_op,
which makes it from the model's rates and corrections; and CalibratedWorkloadPrediction, a
workload's, whose total carries the summed interval.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from roofline.cost import OpPrediction, WorkloadPrediction, roofline_bound
from roofline.kernels import Kernel
from roofline.machines import Machine
from roofline.measure.probe_classes import aten_name, fit_class, fit_op, op_class, sized
from roofline.tables import jsonable


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
    op_class: str = ""
    basis: str = ""  # which measured points the rate and the correction came from
    extrapolated: bool = False  # outside the measured points: the interval is widened

    def to_dict(self) -> dict:
        extra = ("low_s", "high_s", "residual", "residual_source", "flops_per_s", "bytes_per_s", "op_class", "basis",
                 "extrapolated")
        return {**super().to_dict(), **{k: jsonable(getattr(self, k)) for k in extra}}


def predict_op(model, kernel: Kernel, machine: Machine, launch_s: float | None = None) -> CalibratedOpPrediction:
    """One op: its compute and memory columns carry the fitted correction r (so that launch +
    max(compute, memory) is the time printed), with its class, the measured points it came
    from and whether it lies outside them; its bound is the roofline's (cost.roofline_bound)."""
    cold = model.reads_cold(kernel)
    compute_s, memory_s, body, fps, bps = model.base_body_s(kernel, machine, cold=True if cold else None)
    res = model.residual(kernel, cold)
    launch = model.launch_of(kernel, launch_s)
    launch_lo, launch_hi = (model.floor_band(kernel)[1:] if launch == model.floor_band(kernel)[0] else (launch, launch))
    time_s = launch + res.ratio * body
    gemm = model.gemm_rate(kernel, machine) if kernel.category == "matmul" else None
    basis = _basis(kernel, res, gemm)
    low_s = launch_lo + res.ratio * res.low * body
    if model.weights_cold and kernel.category == "matmul" and not model.cold:
        # weights of a forward near the cache's size are partly cached: the warm rate is the interval's low end
        warm = dataclasses.replace(model, weights_cold=False).predict_op(kernel, machine, launch_s)
        low_s = np.minimum(low_s, warm.low_s)
        basis.append("interval down to the warm GEMM rate (weights partly cached)")
    high_s = launch_hi + res.ratio * res.high * body
    if model.reuse_bytes and kernel.category == "matmul" and model.weights_cached_share(kernel.dtype):
        # the cached share is a pool's, and a forward touches more than its weights: up to all streamed
        streamed = dataclasses.replace(model, reuse_bytes=0.0).predict_op(kernel, machine, launch_s)
        high_s = np.maximum(high_s, streamed.high_s)
    if cold and not model.cold:
        # operands evicted by the ops before it, or some still cached: the warm probes are the low end
        warm = dataclasses.replace(model, operands_cold=False).predict_op(kernel, machine, launch_s)
        low_s = np.minimum(low_s, warm.low_s)
        basis.append("interval down to the warm probes (operands partly cached)")
    cold_floor = model.floor_band(kernel, cold=True) if cold else None
    if cold_floor is not None and launch == model.floor_band(kernel)[0]:
        # the ops between its calls (GEMMs streaming weights) may evict the dispatcher's code too
        high_s = np.maximum(high_s, cold_floor[0] + res.ratio * res.high * body)
        basis.append("interval up to a cold call's own cost (dispatcher evicted)")
    # never below the profile's own speed of light: its best measured FLOP/s and bandwidth
    low_s = np.minimum(np.maximum(low_s, model.fastest_s(kernel, machine)), time_s)
    bound = roofline_bound(kernel, machine)
    if gemm is not None and bound == "memory":
        # a memory-bound GEMM's measured rate (a skinny or streamed family's) is its wait on the weight: its
        # time goes in the memory column, and the compute column is its FLOPs at the best matmul rate, so the
        # columns agree with the bound (a reviewer read 'memory' beside a compute column twice the memory one)
        waited = np.maximum(compute_s, memory_s)
        compute_s = np.minimum(compute_s, np.asarray(kernel.flops, dtype=float)
                               / model.achieved_flops_per_s(np.inf, kernel.dtype, machine))
        memory_s = waited
    return CalibratedOpPrediction(
        name=kernel.name, category=kernel.category, dtype=kernel.dtype, flops=kernel.flops, bytes=kernel.bytes,
        intensity=kernel.intensity, compute_s=_f(res.ratio * compute_s), memory_s=_f(res.ratio * memory_s),
        # the roofline's verdict (as `profile` gives it), not the larger measured column: an M = 1 GEMM
        # reaches a small share of the peak because it waits on its weight
        launch_s=launch, time_s=_f(time_s), bound=bound,
        low_s=_f(low_s), high_s=_f(high_s),
        residual=res.ratio, residual_source=res.source, flops_per_s=_f(fps), bytes_per_s=_f(bps),
        op_class=op_class(kernel), basis="; ".join(basis),
        extrapolated=res.extrapolated or bool(gemm and gemm[1]) or res.source == "none",
    )


def _basis(kernel: Kernel, res, gemm) -> list[str]:
    """Which measured points an op's rate and correction came from (res: its residuals.Residual;
    gemm: its GEMM family's rate, calibrated.gemm_rate, or None), in words."""
    basis = [gemm[2] if gemm else ("matmul by size" if sized(kernel) else "bandwidth by working set")]
    aten = aten_name(kernel)
    basis.append({"op": f"correction of block op {kernel.name!r}", "aten": f"correction of the {fit_op(kernel)} probes",
                  "class": f"correction of the {fit_class(kernel)} probes",
                  "aten-cold": f"correction of the {fit_op(kernel)} probes timed cold (operands from main memory)",
                  "class-cold": f"correction of the {fit_class(kernel)} probes timed cold (operands from main memory)",
                  "category": f"mean correction of the {kernel.category} block ops",
                  "none": f"no probe of its class ({op_class(kernel)}): the rates alone, uncorrected"}[res.source])
    if res.borrowed:
        basis.append(f"borrowed from the {res.borrowed} probes: the profile has no {kernel.dtype} probe of this class "
                     f"(its interval widened; `roofline calibrate --dtype {kernel.dtype}` measures them)")
    if res.width:
        basis.append(f"rows of {res.width}: corrected by the {aten_name(kernel)} probes on narrow rows")
    if res.strided:
        basis.append(f"a non-contiguous input: x{res.strided_by:.2f} by the {res.strided} probes on chunk views"
                     + (" (no slower than contiguous at this size)" if res.strided_by == 1.0 else ""))
    return basis


def _f(x):
    return float(x) if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class CalibratedWorkloadPrediction(WorkloadPrediction):
    """A WorkloadPrediction whose total carries the interval: sums of the ops' lows and highs
    (the ops' errors on one machine move together, so the band is not narrowed by averaging)."""

    total_low_s: float = 0.0
    total_high_s: float = 0.0

    def to_dict(self) -> dict:
        cal = self.model  # the CalibratedModel that predicted
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


def calibration_notes(ops) -> tuple[str, ...]:
    """What a calibrated table's rows do not show: the ops with no correction of their own dtype
    (borrowed from another dtype's probes, or none at all) and the ops outside the measured points
    (their rate clamped or extrapolated, their interval widened). Empty for a plain cost model's."""
    ops = [o for o in ops if isinstance(o, CalibratedOpPrediction)]
    borrowed = [o.name for o in ops if "borrowed from the" in o.basis]
    bare = [o.name for o in ops if o.residual_source == "none"]
    outside = [o.name for o in ops if o.extrapolated and o.name not in borrowed and o.name not in bare]
    dtypes = sorted({o.dtype for o in ops if o.name in borrowed or o.name in bare})
    out = []
    if borrowed:
        out.append(f"{len(borrowed)} op(s) corrected by another dtype's probes (no {'/'.join(dtypes)} probe of their "
                   f"class in the profile: {', '.join(borrowed[:6])}{', ...' if len(borrowed) > 6 else ''}); their "
                   f"ranges are widened; `roofline calibrate --dtype {dtypes[0]}` measures them")
    if bare:
        out.append(f"{len(bare)} op(s) uncorrected, their measured rates alone (a matmul's: the GEMM rate measured at "
                   f"its dtype and size), no probe of their class at {'/'.join(dtypes)}: "
                   f"{', '.join(bare[:6])}{', ...' if len(bare) > 6 else ''}; their ranges widened")
    if outside:
        out.append(f"{len(outside)} op(s) outside the measured points ({', '.join(outside[:6])}"
                   f"{', ...' if len(outside) > 6 else ''}): rates clamped or extrapolated, ranges widened (--json: basis)")
    return tuple(out)
