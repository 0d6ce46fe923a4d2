"""The numeric parameters of the commands that measure or read a measurement (issue 37: one declaration per
parameter): `calibrate` and `check` (measure this device), `trace` and `profile` (a PyTorch model, a
torch.profiler trace), `diagnose` (a kernel and its measured time), and the ranked reports of `profile` and
`nsight`. Each is a ``Param`` (roofline.parameters), made into its flag by cli.args.add_declared; the sizes a
command shares with the views (tokens, batch, context, phase, attention) are roofline.parameters' own, in the
command's words. No argparse or numpy: the CLI reads it at start.
"""

from __future__ import annotations

from roofline.parameters import COUNT_MAX, Param
from roofline.plan.limits import SEARCH_MAX_BATCH

DAY_S = 24 * 3600  # a time budget past a day is a typo (2d for 2s), not a measurement

# `calibrate` and `check`: the CPU's threads, and the seconds each spends timing (calibrate at least 1 s: a
# calibration of microseconds measures nothing and writes a profile of zeros); a budget takes bare seconds or a unit
THREADS = Param("threads", "--threads", None, "CPU threads for torch (default: torch's; check: the profile's)",
                maximum=COUNT_MAX, integer=True)
CALIBRATE_BUDGET = Param("budget", "--budget", None, "seconds to spend, about (default 60, at least 1; under ~30 the "
                         "probes' fixed passes stretch it)", 60.0, minimum=1.0, strictly=False, maximum=DAY_S)
CHECK_BUDGET = Param("budget", "--budget", None, "seconds of timing (CPU default 20)", maximum=DAY_S)
# `check` scales the model's width to the device
D_MODEL = Param("d_model", "--d-model", None, "scale the model to this d_model (CPU default 1024; CUDA default: the "
                "model's own)", maximum=COUNT_MAX, integer=True)
# `trace` of a preset or config.json: its batch, up to the largest decode batch planned (plan.limits)
TRACE_BATCH = Param("batch", "--batch", None, "sequences (default 1)", maximum=SEARCH_MAX_BATCH, integer=True)
# `profile`: the forwards a trace recorded (written 1,000 or 1_000 too)
FORWARDS = Param("forwards", "--forwards", None, "forwards the trace recorded (totals also per forward); default: its "
                 "ProfilerStep spans, else 1", maximum=COUNT_MAX, integer=True)
# `diagnose`: a kernel's measured time (its unit required; a million seconds is diagnose.kernel_diagnosis's bound),
# the op of a profile by rank, or a kernel given by its FLOPs and bytes
MEASURED = Param("measured_s", "--measured", None, "measured time with its unit: 12us, 1.5ms, 2e-3s", maximum=1e6,
                 unit="s")
RANK = Param("rank", "--rank", None, "... the op ranked N by time lost in `roofline profile` (default 1), per call", 1,
             maximum=COUNT_MAX, integer=True)
FLOPS = Param("flops", "--flops", None, "", strictly=False)
BYTES = Param("bytes", "--bytes", None, "")
# `profile` and `nsight`: the rows of the ranked table
LIMIT = Param("limit", "--limit", None, "rows in the table (0: all)", 20, strictly=False, maximum=COUNT_MAX,
              integer=True)

TOOL_PARAMS = (THREADS, CALIBRATE_BUDGET, CHECK_BUDGET, D_MODEL, TRACE_BATCH, FORWARDS, MEASURED, RANK, FLOPS, BYTES,
               LIMIT)
