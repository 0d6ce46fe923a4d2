"""Diagnosis (the roofline chapter, section 4: its procedure and symptom table; docs/tracing.md):
where a measured op sits against its bound, and which fixes are even possible.

    kernel_diagnosis.py  one measured kernel: diagnose -> Diagnosis; measurement_problem, advice, fixes
    check_report.py      `roofline check`'s result: predicted (roofline, seed, calibrated) against
                         measured, op by op, each op flagged by diagnose_op -> CheckReport

Numpy only, on the core; the timings come from roofline.measure, the traces from roofline.trace.
"""

from roofline.diagnose.kernel_diagnosis import (ELEMENTWISE, SYMPTOMS, Diagnosis, Finding, Symptom, advice, check_measured,
                                      diagnose, diagnosis_text, fixes, measurement_problem)
from roofline.diagnose.check_report import (BELOW_ROOF, FAR_FROM_ROOF, PREDICTORS, CheckOp, CheckReport, Measured,
                                            OpRun, TimedOp, block_sum, build_report, diagnose_op)

__all__ = ["BELOW_ROOF", "CheckOp", "CheckReport", "Diagnosis", "ELEMENTWISE", "FAR_FROM_ROOF", "Finding", "Measured",
           "OpRun", "PREDICTORS", "SYMPTOMS", "Symptom", "TimedOp", "advice", "block_sum", "build_report", "check_measured",
           "diagnose", "diagnose_op", "diagnosis_text", "fixes", "measurement_problem"]
