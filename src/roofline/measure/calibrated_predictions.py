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
