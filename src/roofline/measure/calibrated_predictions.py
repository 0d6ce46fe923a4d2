"""What the calibrated model (calibrated.py) predicts: CalibratedOpPrediction, an op's time with
its interval [low_s, high_s], the residual applied and the measured rates it used; and
CalibratedWorkloadPrediction, a workload's, whose total carries the summed interval.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.cost import OpPrediction, WorkloadPrediction, _jsonable


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
        return {**super().to_dict(), **{k: _jsonable(getattr(self, k)) for k in extra}}


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
