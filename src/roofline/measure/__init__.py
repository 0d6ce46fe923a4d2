"""Measurement on the local device through PyTorch (the `torch` extra): timing, calibration into
a machine profile, and `roofline check`. The only package of roofline that imports torch.

    from roofline.measure import calibrate, run_check, write_profile
"""

from roofline.measure.calibration import CalibrationPlan, calibrate, default_plan
from roofline.measure.check import run_check
from roofline.measure.timing import Timing, bench, bench_round_robin
from roofline.machine_profile import write_profile

__all__ = ["CalibrationPlan", "Timing", "bench", "bench_round_robin", "calibrate", "default_plan", "run_check",
           "write_profile"]
