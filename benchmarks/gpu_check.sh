#!/usr/bin/env bash
# One prepared device check for a GPU session (an H200): the GPU test tier, then calibrate + check
# in bf16 on CUDA (benchmarks/accuracy.py), all written under $OUT; a short table is printed last.
# No installs, no downloads: it uses the python, torch (a CUDA build, >= 2.5), numpy and matplotlib
# already on the machine, and this checkout's src/ through PYTHONPATH.
#
# Time: every step has a timeout and the whole run stays within $GPU_CHECK_S seconds (default 540,
# under a 600 s per-command limit): the GPU tests get at most 150 s, the accuracy run what is left
# less 30 s kept for the summary. accuracy.py writes each held-out check's JSON as it completes,
# so a run cut short still leaves its finished checks, and summary.txt is written in every case.
#
#   OUT=/some/dir bash benchmarks/gpu_check.sh
#
# With ROOFLINE_BENCH_SMOKE=1 (read by benchmarks/smoke.py): accuracy.py runs at its smoke size (a
# tiny calibration, two small blocks). Where torch sees no CUDA device, the GPU test tier still runs
# (it skips itself: that it imports is what is checked) and accuracy.py runs on the CPU in fp32
# instead of CUDA bf16, through the same steps and the same summary; a line says so. Outside smoke
# mode a machine without CUDA exits 2 at once, measuring nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"
SMOKE=$(timeout 60 "$PY" benchmarks/smoke.py 2>/dev/null || echo 0)  # 1 in smoke mode (one reading of the variable)
[ "$SMOKE" = 1 ] && echo "smoke mode: sizes cut, figures not meaningful"
DEVICE=cuda
DTYPE=bf16
TOTAL_S="${GPU_CHECK_S:-540}"
SUMMARY_RESERVE_S=30
TESTS_MAX_S=150
START_S=$SECONDS
status=0

left_s() { echo $(( TOTAL_S - (SECONDS - START_S) )); }

summary() {  # the short table, last: from the JSON of the checks that finished (no torch import)
  {
    echo "gpu_check: $(( SECONDS - START_S )) s; exit $status"
    [ -f "$OUT/steps.txt" ] && cat "$OUT/steps.txt"
    if [ -f "$OUT/accuracy-$DEVICE.json" ]; then
      timeout 20 "$PY" - "$OUT/accuracy-$DEVICE.json" <<'EOF'
import json, sys
reports = json.load(open(sys.argv[1], encoding="utf-8"))
print(f"{'held-out block':<30} {'measured us':>12} {'roofline':>9} {'seed':>8} {'calibr.':>8} {'op med cal':>11}")
for r in reports:
    b = r["block"]
    name = f"d {r['config'].split(',')[0].split()[-1]} T {r['tokens']} {r['attention']}"
    print(f"{name:<30} {b['measured_s'] * 1e6:>12,.0f} {b['roofline_error']:>+9.1%} {b['seed_error']:>+8.1%} "
          f"{b['calibrated_error']:>+8.1%} {r['median_abs_error']['calibrated']:>11.1%}")
print(f"{len(reports)} held-out check(s) finished")
EOF
    else
      echo "no held-out check finished (no $OUT/accuracy-$DEVICE.json)"
    fi
  } > "$OUT/summary.txt" 2>&1
  echo
  cat "$OUT/summary.txt"
}
trap summary EXIT
trap 'status=143; exit 143' TERM

{
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  timeout 60 "$PY" -c "import sys, torch, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

# torch >= 2.5: the block's ops call F.rms_norm (2.4) and SDPA with enable_gqa (2.5)
if ! timeout 60 "$PY" -c "
import sys, torch
major, minor = (int(p) for p in torch.__version__.split('+')[0].split('.')[:2])
sys.exit(0 if (major, minor) >= (2, 5) else 1)" 2>/dev/null; then
  echo "gpu_check: needs torch >= 2.5 (F.rms_norm since 2.4, SDPA enable_gqa since 2.5); found: $(timeout 60 "$PY" -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)" | tee -a "$OUT/steps.txt"
  status=2
  exit "$status"
fi
if ! timeout 60 "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  if [ "$SMOKE" != 1 ]; then
    echo "gpu_check: no CUDA device visible to torch; nothing measured" | tee -a "$OUT/steps.txt"
    status=2
    exit "$status"
  fi
  DEVICE=cpu
  DTYPE=fp32
  echo "gpu_check: smoke mode without CUDA: no CUDA device visible to torch, so the GPU test tier skips itself and the CUDA bf16 accuracy run is skipped: accuracy.py runs on the CPU in fp32 instead" | tee -a "$OUT/steps.txt"
fi

# 1. the GPU test tier (skips nothing here where a CUDA device is present; without one, smoke mode
# only, the module skips itself: what is checked then is that it imports and the run ends cleanly)
if "$PY" -c "import pytest" 2>/dev/null; then
  limit=$(( $(left_s) - SUMMARY_RESERVE_S ))
  [ "$limit" -gt "$TESTS_MAX_S" ] && limit=$TESTS_MAX_S
  timeout "$limit" "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_measure_gpu.py > "$OUT/pytest-gpu.txt" 2>&1
  rc=$?
  why=""
  [ "$DEVICE" = cpu ] && [ "$rc" -eq 5 ] && why="; 5: no test ran, the tier skipped itself without CUDA"
  echo "pytest tests/test_measure_gpu.py: exit $rc (timeout ${limit} s$why)" | tee -a "$OUT/steps.txt"
  tail -3 "$OUT/pytest-gpu.txt"
else
  echo "pytest not installed: GPU tests not run" | tee -a "$OUT/steps.txt"
fi

# 2. the accuracy report: calibrate (fit on probe sizes), check four held-out blocks, bf16
PLOT=()
"$PY" -c "import matplotlib" 2>/dev/null && PLOT=(--plot "$OUT/check-$DEVICE.png")
limit=$(( $(left_s) - SUMMARY_RESERVE_S ))
if [ "$limit" -lt 60 ]; then
  echo "benchmarks/accuracy.py: not run, ${limit} s left" | tee -a "$OUT/steps.txt"
  status=1
  exit "$status"
fi
# ${PLOT[@]+"${PLOT[@]}"}: an empty array under set -u fails on bash < 4.4 otherwise
timeout "$limit" "$PY" benchmarks/accuracy.py --device "$DEVICE" --dtype "$DTYPE" --budget 90 --check-budget 10 \
  --out "$OUT/accuracy-$DEVICE.md" --profile-out "$OUT/roofline-$DEVICE.toml" --json "$OUT/accuracy-$DEVICE.json" \
  ${PLOT[@]+"${PLOT[@]}"} > "$OUT/accuracy-stdout.txt" 2> "$OUT/accuracy-stderr.txt"
status=$?
echo "benchmarks/accuracy.py: exit $status (timeout ${limit} s)" | tee -a "$OUT/steps.txt"
[ "$status" -eq 0 ] || tail -20 "$OUT/accuracy-stderr.txt"
exit "$status"
