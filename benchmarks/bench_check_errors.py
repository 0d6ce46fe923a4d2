"""Does calibration beat the plain roofline at sizes it was not fitted on? A tiny CPU calibration
(the plan tests/test_measure.py uses: fp32 matmuls 32-256, working sets 32 KiB-1 MiB, probes at
d_model 128 and 256), then `roofline check` on a held-out block (d_model 192, 96 tokens) N times;
for each run, the median |predicted / measured - 1| over the block's ops of the plain roofline, the
seed defaults and the calibrated model, and calibrated / roofline. Prints figures measured in this
one process, with the machine and the date; asserts nothing (timings belong here, not in the
tests: on a busy machine one run can go either way).

    python benchmarks/bench_check_errors.py [N]      # ~10 s a run on one thread

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): a 0.5 s calibration, one run timed for 0.1 s;
the figures mean nothing. TINY is also the plan accuracy.py and accuracy_models.py calibrate with
in smoke mode.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roofline.diagnose.check_report import PREDICTORS  # noqa: E402
from roofline.measure.machine_file import write_profile  # noqa: E402
from roofline.measure import CalibrationPlan, calibrate  # noqa: E402
from roofline.measure.run_check import run_check  # noqa: E402
from smoke import announce, smoke_or  # noqa: E402  (benchmarks/ is on sys.path as a script)

TINY = CalibrationPlan(  # tests/test_measure.py's TINY
    matmul_dtypes=("fp32",),
    matmul_sizes=(32, 64, 128, 256),
    working_sets=tuple(32 * 2**10 * 2**i for i in range(6)),  # 32 KiB .. 1 MiB
    probe_sizes=((128, 64), (256, 32), (256, 128)),
    probe_dtype="fp32",
)
HELD_OUT = dict(d_model=192, tokens=96, budget_s=smoke_or(0.5, 0.1), threads=1)  # no probe at d_model 192
CALIBRATION_S = smoke_or(2.0, 0.5)


def cpu_name() -> str:
    try:  # Linux names the model here; platform.processor() is often just the architecture
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(5, 1)
    announce()
    cpu = cpu_name()
    print(f"{platform.node()} ({cpu}, {os.cpu_count()} CPUs), Python {platform.python_version()}, "
          f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "cpu.toml"
        cal = calibrate("cpu", "fp32", CALIBRATION_S, None, plan=TINY, threads=1, allow_drift=True)  # said below
        write_profile(cal, profile)
        print(f"calibration (tiny plan, 1 thread): {time.perf_counter() - t0:.1f} s; {cal.reference.text()}")
        print(f"held out: d_model {HELD_OUT['d_model']}, {HELD_OUT['tokens']} tokens; median |error| over the block's ops")
        print("run  " + "  ".join(f"{p:>10}" for p in PREDICTORS) + "  calibrated/roofline")
        ratios = []
        for i in range(runs):
            report = run_check("cpu", profile=str(profile), **HELD_OUT)
            err = {p: report.median_abs_error(p) for p in PREDICTORS}
            ratios.append(err["calibrated"] / err["roofline"])
            print(f"{i + 1:>3}  " + "  ".join(f"{err[p]:>10.1%}" for p in PREDICTORS) + f"  {ratios[-1]:>19.2f}")
    print(f"calibrated / roofline median error: median {statistics.median(ratios):.2f}, "
          f"worst {max(ratios):.2f} over {runs} runs (below 1: calibration helps)")


if __name__ == "__main__":
    main()
