#!/usr/bin/env bash
# One prepared device check for a GPU session (an H200): calibrate + check in bf16 on CUDA, the GPU
# test tier, and the accuracy report, all written under $OUT; a short table is printed last.
# No network installs: it uses the python, torch (CUDA build), numpy and matplotlib already on the
# machine, and this checkout's src/ through PYTHONPATH. About 3-4 minutes; every step has a timeout.
#
#   OUT=/some/dir bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"

{
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  "$PY" -c "import sys, torch, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: no CUDA device visible to torch; nothing measured" | tee "$OUT/summary.txt"
  exit 2
fi

# 1. the GPU test tier (skips nothing here: a CUDA device is present)
if "$PY" -c "import pytest" 2>/dev/null; then
  timeout 240 "$PY" -m pytest -q -p no:cacheprovider tests/test_measure_gpu.py > "$OUT/pytest-gpu.txt" 2>&1
  echo "pytest tests/test_measure_gpu.py: exit $?" | tee -a "$OUT/steps.txt"
  tail -3 "$OUT/pytest-gpu.txt"
else
  echo "pytest not installed: GPU tests not run" | tee -a "$OUT/steps.txt"
fi

# 2. the accuracy report: calibrate (fit on probe sizes), check four held-out blocks, bf16
PLOT=()
"$PY" -c "import matplotlib" 2>/dev/null && PLOT=(--plot "$OUT/check-cuda.png")
timeout 420 "$PY" benchmarks/accuracy.py --device cuda --dtype bf16 --budget 90 --check-budget 10 \
  --out "$OUT/accuracy-cuda.md" --profile-out "$OUT/roofline-cuda.toml" --json "$OUT/accuracy-cuda.json" "${PLOT[@]}" \
  > "$OUT/accuracy-stdout.txt" 2> "$OUT/accuracy-stderr.txt"
status=$?
echo "benchmarks/accuracy.py: exit $status" | tee -a "$OUT/steps.txt"

# 3. the short table, last
echo
tail -8 "$OUT/accuracy-stdout.txt" | tee "$OUT/summary.txt"
[ "$status" -eq 0 ] || tail -20 "$OUT/accuracy-stderr.txt"
exit "$status"
