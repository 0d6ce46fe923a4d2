"""Every benchmark in benchmarks/ runs, in smoke mode (ROOFLINE_BENCH_SMOKE=1, benchmarks/smoke.py):
its own code path at a tiny size, so a benchmark cannot rot unseen (issue 33). Each runs as a user
runs it, a subprocess from the repository root, and must exit 0 with no traceback and print its
figures. What a smoke run writes goes to a temporary directory (here the test's own, as TMPDIR),
never over a committed report in docs/. Timings are not looked at: smoke figures mean nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
NOT_BENCHMARKS = {"smoke.py", "silicon_disagg.py", "silicon_twins.py", "inferencex_speculation.py", "inferencex_layouts.py"}  # the shared smoke-mode helper, and silicon_validation.py's disaggregated part and its section on the sample's own spread (smoke-tested through it), imported by the benchmarks; and the hand-run tools writing inferencex_speculation.toml and inferencex_layouts.toml from a clone of InferenceX (tests/test_inferencex_speculation.py, tests/test_inferencex_layouts.py)
HEADER = "smoke mode: sizes cut, figures not meaningful"  # benchmarks/smoke.py's HEADER
TIMEOUT_S = 120

# Each benchmark and text its output always holds (a figure's label).
EXPECTED = {
    "accuracy.py": "per-op median |err|",
    "accuracy_models.py": "decode  B=1: wall",
    "bench_check_errors.py": "calibrated / roofline median error",
    "bench_cli_startup.py": "roofline layer --json     median",
    "bench_load.py": "/api/decode",
    "bench_measured.py": "peak resident memory",
    "measured_efficiency.py": "median share of the roofline",
    "bench_model.py": "llama3-8b prefill 8192 + decode step",
    "bench_serving.py": "steps/s",
    "bench_sweep.py": "slowest case:",
    "bench_trace.py": "TFLOP",
    "bench_web.py": "GET /api/layer (uvicorn, loopback)",
    "fuzz.py": "broke the contract",
    "gpu_check.sh": "held-out check(s) finished",
    "profiler_faults.py": "profiled, shapes",
    "serving_validation.py": "simulated runs",
    "silicon_validation.py": "TPOT median |error|",
    "peer_comparison.py": "roofline against AIConfigurator",
    "trace_vs_transformers.py": "families agree",
}
# The reports in docs/ a full run writes: a smoke run must leave them alone.
WRITES_DOCS = {
    "accuracy.py": ["accuracy.md"],
    "accuracy_models.py": ["accuracy-models.md"],
    "serving_validation.py": ["serving-validation.md"],
    "silicon_validation.py": ["serving-validation-measured.md"],
    "peer_comparison.py": ["serving-peer-comparison.md"],
}
MARKS = {"bench_web.py": [pytest.mark.browser]}  # drives Chromium through Playwright
LONGER = {"gpu_check.sh": 180}  # three Python processes, one of them accuracy.py


def run_smoke(name: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run a benchmark in smoke mode with ``tmp_path`` as its TMPDIR (a short one: Chromium's socket
    under TMPDIR must fit a Unix socket path's 108 bytes)."""
    path = BENCHMARKS / name
    argv = ["bash", str(path)] if path.suffix == ".sh" else [sys.executable, str(path)]
    env = {**os.environ, "ROOFLINE_BENCH_SMOKE": "1", "TMPDIR": str(tmp_path), "PYTHON": sys.executable,
           "OUT": str(tmp_path / "out")}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group: a timeout ends its children too
    try:
        out, err = proc.communicate(timeout=LONGER.get(name, TIMEOUT_S))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{name} in smoke mode ran past {LONGER.get(name, TIMEOUT_S)} s\n--- stdout\n{out[-3000:]}\n"
                    f"--- stderr\n{err[-3000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in sorted(EXPECTED)])
def test_benchmark_runs_in_smoke_mode(name, tmp_path):
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))  # pytest's tmp_path can be too long for Chromium's socket
    try:
        _smoke_checks(name, short)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def _smoke_checks(name, tmp_path):
    docs = [ROOT / "docs" / f for f in WRITES_DOCS.get(name, [])]
    before = {p: p.stat().st_mtime_ns for p in docs if p.exists()}
    r = run_smoke(name, tmp_path)
    shown = f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    assert r.returncode == 0, f"{name} exited {r.returncode}\n{shown}"
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, shown
    assert HEADER in r.stdout, shown
    assert EXPECTED[name] in r.stdout, shown
    if name == "bench_web.py" and os.environ.get("ROOFLINE_NO_BROWSER") != "1":  # the browser part ran too
        assert "control change -> redrawn chart" in r.stdout, shown
    assert {p: p.stat().st_mtime_ns for p in docs if p.exists()} == before, f"{name} wrote into docs/ in smoke mode"
    if name in WRITES_DOCS:  # its report went to the temporary directory instead
        assert f"wrote {tmp_path}" in r.stdout, shown


def test_every_benchmark_is_smoke_tested():
    """A new file in benchmarks/ joins EXPECTED (and so runs above), and each one has a smoke mode."""
    found = {p.name for p in BENCHMARKS.iterdir() if p.is_file() and p.suffix in (".py", ".sh")} - NOT_BENCHMARKS
    assert found == set(EXPECTED), f"not smoke-tested: {sorted(found - set(EXPECTED))}; gone: {sorted(set(EXPECTED) - found)}"
    for name in sorted(found):
        assert "smoke" in (BENCHMARKS / name).read_text(encoding="utf-8"), f"{name} has no smoke mode (benchmarks/smoke.py)"


def test_silicon_rows_run_at_their_measured_concurrency():
    """A silicon row's `batch_size` is the engine's max batch per attention-DP rank (aiconfigurator's generator maps it
    to max_batch_size), so the users come from the row's measured concurrency; where the row states none, its
    batch times its ranks."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import silicon_validation as sv

    row = {"silicon_data_source": "source_file=x.csv; silicon_concurrency=64", "id": "run_c64_tp1", "batch_size": "8",
           "attention_dp_size": "8"}
    assert sv.concurrency(row) == 64  # stated
    assert sv.concurrency({**row, "silicon_data_source": "source_file=x.csv"}) == 64  # the id's _c64_
    assert sv.concurrency({**row, "silicon_data_source": "", "id": "run"}) == 8 * 8  # 8 a rank x 8 ranks
    assert sv.concurrency({**row, "silicon_data_source": "", "id": "run", "attention_dp_size": "0"}) == 8  # no DP: 1 rank
    assert "sglang" in sv.MIXED_AS_DEPLOYED  # aiconfigurator's sglang.rule: agg enable_mixed_chunk = true


def test_the_peer_is_timed_again_one_row_at_a_time_on_rows_both_predict(monkeypatch):
    """peer_comparison --time-peer N: the peer run again on N evenly drawn rows both tools predicted (not a refused
    row, nor one the peer failed), our seconds for the same rows beside its own; medians of each."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import peer_comparison as pc

    rows = [{"id": str(i)} for i in range(6)]
    ours = [{"ours_seconds": 0.1 * (i + 1)} for i in range(6)]
    ours[1]["refused"] = "no"
    peer = [{"ttft_s": 1.0, "seconds": 99.0} for _ in range(6)]
    peer[4] = {"error": "failed"}
    ran = []
    monkeypatch.setattr(pc, "run_peer", lambda exe, r: ran.append(r["id"]) or {"seconds": 10.0 + int(r["id"])})
    n, mine, theirs = pc.time_peer("aic", rows, ours, peer, 2)  # both predict rows 0, 2, 3, 5: every second one
    assert (n, ran) == (2, ["0", "3"])
    assert mine == pytest.approx((0.1 + 0.4) / 2) and theirs == pytest.approx((10.0 + 13.0) / 2)
