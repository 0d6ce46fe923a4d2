"""Serving simulation speed: 10,000 requests through the simulated engine, and a
24-point concurrency sweep, on one core. Targets: 10,000 requests well under a second; the sweep
in about a second; and issue 35's: 2,000 requests at 1k in / 32k out in under 2 s, 10,000 near
capacity under 0.3 s, 100,000 under 3 s (TARGETS). Prints the best of N runs per case and the
simulated steps per second; last, the silicon validation's seconds a row on a fixed sample of its rows
(validation_row_seconds: as a run meets them, with the tables read, with the step models kept; target 100x
AIConfigurator's seconds a row, PEER_S), skipped without aiconfigurator-core.

    python benchmarks/bench_serving.py [N]

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 200 requests a case, a sweep of the first 3
concurrencies, one run; the figures mean nothing.
"""

import os
import platform
import sys
import time

from bench_model import one_core  # benchmarks/ is on sys.path when run as a script
from roofline.serving import closed_requests, poisson_requests, simulate, sweep_concurrency
from roofline.plan.step import StepCost
from smoke import announce, smoke_or  # benchmarks/ is on sys.path as a script

REQUESTS = smoke_or(10_000, 200)

CASES = [
    ("llama3-8b, Poisson 10 req/s (light load: short decode stretches), 1,024 in / 256 out",
     lambda: poisson_requests(10, REQUESTS, 1024, 256)),
    ("llama3-8b, Poisson 40 req/s (saturated), 1,024 in / 256 out", lambda: poisson_requests(40, REQUESTS, 1024, 256)),
    ("llama3-8b, 256 users, 512 in / 256 out", lambda: closed_requests(256, REQUESTS, 512, 256)),
    ("llama3-8b, 64 users, lengths uniform 100-2,000 in / 10-500 out",
     lambda: closed_requests(64, REQUESTS, (100, 2000), (10, 500))),
]
# issue 35's targets (seconds) for long outputs and many requests
LONG = smoke_or(2000, 20)
MANY = smoke_or(100_000, 500)
TARGETS = [
    (f"llama3-8b, {LONG:,} requests all queued (max load), 1,024 in / 32,768 out", 2.0,
     lambda: closed_requests(LONG, LONG, 1024, 32768)),
    (f"llama3-8b, Poisson 20 req/s (near capacity), {REQUESTS:,} requests, 1,024 in / 256 out", 0.3,
     lambda: poisson_requests(20, REQUESTS, 1024, 256)),
    (f"llama3-8b, Poisson 20 req/s (near capacity), {MANY:,} requests, 1,024 in / 256 out", 3.0,
     lambda: poisson_requests(20, MANY, 1024, 256)),
]
SPECULATIVE = smoke_or(2000, 40)
SWEEP = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512, 768, 1024]
SWEEP = smoke_or(SWEEP, SWEEP[:3])


def best_of(runs, fn):
    best, out = float("inf"), None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def speculative(runs):
    """Speculative decoding (Llama 3.2 1B drafting 3 tokens for Llama 3 8B, each accepted with 0.7), run
    in stretches (the default) and step by step (stepwise=True: how speculation ran before 2026-12-06, once):
    per case its label, (seconds, result) of each."""
    from roofline.serving import Engine

    engine = Engine(max_seqs=256, spec_tokens=3, acceptance=0.7)
    target = StepCost("llama3-8b", "h100-sxm", max_tokens=8192, max_seqs=256, verify_tokens=4)
    draft = StepCost("llama3.2-1b", "h100-sxm", max_tokens=8192, max_seqs=256)
    cases = [(f"64 users, {SPECULATIVE:,} requests, 1,024 in / 1,024 out", closed_requests(64, SPECULATIVE, 1024, 1024)),
             (f"{SPECULATIVE // 2:,} requests all queued (max load: recompute preemption), 1,024 in / 8,192 out",
              closed_requests(SPECULATIVE // 2, SPECULATIVE // 2, 1024, 8192))]
    for label, reqs in cases:
        yield (f"llama3-8b speculating (llama3.2-1b drafts 3 at 0.7), {label}",
               best_of(runs, lambda: simulate(target, reqs, engine, draft=draft)),
               best_of(1, lambda: simulate(target, reqs, engine, draft=draft, stepwise=True)))


VALIDATION_EVERY = smoke_or(100, 5000)  # the silicon validation's rows it times: every K-th of those the tool can express


PEER_S = 5.6  # AIConfigurator's cli_estimate, seconds a row: peer_comparison.py --time-peer 20, one row at a time, 2 idle cores, 2026-12-07


def validation_row_seconds():
    """Seconds a row of benchmarks/silicon_validation.py takes as benchmarks/peer_comparison.py times it (the engine's
    kernels with its time per step and host time per op: run_row(r, overheads, eager)) on a fixed sample, every
    VALIDATION_EVERY-th row it can express, three times in one process: as a run meets them ("as met": each table
    read and each step model built when a row first needs it), again with the tables read but every row's step model
    built anew ("tables read"), and again with the step models kept ("steps kept": the simulation alone, each step
    model's caches filled). Issue 35's target: 100x the peer, PEER_S / 100 a row. {phase: (median, mean)} and the
    rows, or None without aiconfigurator-core (the rows and tables are its)."""
    try:
        import aiconfigurator_core  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return None
    import statistics

    import silicon_validation as sv  # benchmarks/ is on sys.path as a script
    from roofline.measured.tables import data_root

    rows = [r for r in sv.read_rows(data_root().parent / "silicon_sample.csv") if not isinstance(sv.layout(r), str)]
    rows = rows[::VALIDATION_EVERY]
    overheads, eager = sv.fitted_in_file(), sv.eager_in_file()
    sv._STEPS.clear()
    out = {}
    for phase in ("as met", "tables read", "steps kept"):
        if phase == "tables read":
            sv._STEPS.clear()
        secs = []
        for r in rows:
            t = time.perf_counter()
            sv.run_row(r, overheads=overheads, eager=eager)
            secs.append(time.perf_counter() - t)
        out[phase] = (statistics.median(secs), statistics.mean(secs))
    return len(rows), out


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(3, 1)
    announce()
    print(f"serving simulation ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, {one_core()}, "
          f"best of {runs}, {time.strftime('%Y-%m-%d')})")
    t0 = time.perf_counter()
    step = StepCost("llama3-8b", "h100-sxm", max_tokens=8192, max_seqs=1024)
    print(f"  step model built in {(time.perf_counter() - t0) * 1e3:.1f} ms")
    for label, make in CASES:
        reqs = make()
        secs, r = best_of(runs, lambda: simulate(step, reqs))
        print(f"  {label}: {secs:.3f} s for {reqs.n:,} requests ({r.steps:,} steps, {r.steps / secs:,.0f} steps/s)")
    narrow = StepCost("llama3-8b", "h100-sxm", max_tokens=8192, max_seqs=256)  # vLLM's older 256 sequences
    for label, target, make in TARGETS:
        reqs = make()
        secs, r = best_of(1 if reqs.n > 10_000 else runs, lambda: simulate(narrow, reqs))
        print(f"  {label}: {secs:.3f} s ({r.steps:,} steps; target {target:g} s: {'met' if secs <= target else 'missed'})")
    for label, (secs, r), (plain_s, _) in speculative(runs):
        print(f"  {label}: {secs:.3f} s ({r.steps:,} steps, {r.steps / secs:,.0f} steps/s; step by step {plain_s:.3f} s)")
    secs, sw = best_of(runs, lambda: sweep_concurrency(step, SWEEP, 1024, 256))
    print(f"  sweep of {len(SWEEP)} concurrencies ({SWEEP[0]:,} to {SWEEP[-1]:,} users, 8 per user, 200 to 20,000 requests each): {secs:.2f} s "
          f"({sum(r.requests for r in sw.results):,} requests)")
    got = validation_row_seconds()
    if got is None:
        print("  silicon validation rows: skipped (needs aiconfigurator-core and pyarrow: pip install roofline[measured])")
        return
    n, phases = got
    print(f"  silicon validation (benchmarks/silicon_validation.py), every {VALIDATION_EVERY}th row it can express ({n} rows), "
          f"a row as peer_comparison.py times it; issue 35's target {PEER_S / 100:.3f} s a row (100x the peer's {PEER_S:g} s):")
    for phase, (median_s, mean_s) in phases.items():
        print(f"    {phase}: {median_s:.3f} s a row median, {mean_s:.3f} s mean")

if __name__ == "__main__":
    main()
