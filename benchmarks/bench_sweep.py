"""Sweep throughput: whole-model predictions (configuration x size) per second on one core.

Each case is one `roofline.plan.sweep.sweep` call: a model on one or several machines over 10^6 sizes
(batch, prompt tokens or context), every size a full prediction of the whole model (L blocks,
embedding, final norm, LM head; per-op compute, memory and launch time; bound; memory-bound
share). Prints the best of N runs per case; the target is at least 1,000,000 per second.

    python benchmarks/bench_sweep.py [N]
"""

import os
import sys
import time

import numpy as np

from roofline.plan.sweep import sweep

SIZES = 1_000_000
CASES = [
    ("llama3-8b decode over batch 1..1e6", dict(model="llama3-8b", machines=["h100-sxm"], over="batch")),
    ("llama3-8b prefill over tokens 1..1e6", dict(model="llama3-8b", machines=["h100-sxm"], over="tokens")),
    ("llama3-8b decode over context 1..1e6", dict(model="llama3-8b", machines=["h100-sxm"], over="context")),
    ("mixtral-8x7b decode over batch, 4 machines x 250k",
     dict(model="mixtral-8x7b", machines=["h100-sxm", "h200", "mi300x", "b200"], over="batch", n=SIZES // 4)),
    ("llama3-70b TP 8 decode over batch 1..1e6", dict(model="llama3-70b", machines=["h100-sxm"], over="batch", tensor_parallel=8)),
]


def one_core():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        return "pinned to one core"
    return "not pinned (no sched_setaffinity)"


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"whole-model predictions per second ({one_core()}, best of {runs})")
    rates = []
    for label, case in CASES:
        case = dict(case)
        n = case.pop("n", SIZES)
        values = np.arange(1, n + 1)
        best = float("inf")
        for _ in range(runs):
            t0 = time.perf_counter()
            result = sweep(values=values, **case)
            best = min(best, time.perf_counter() - t0)
        assert result.predictions == n * len(case["machines"])
        rate = result.predictions / best
        rates.append(rate)
        print(f"  {label:<52} {result.predictions:>9,} in {best:6.3f} s = {rate:>12,.0f} /s")
    print(f"slowest case: {min(rates):,.0f} predictions/s (target >= 1,000,000)")
    cli_values(runs)


def cli_values(runs):
    """`roofline sweep --over batch --values ...` with 20,000 values, in process, stage by stage."""
    import contextlib
    import io

    from roofline.cli import main
    from roofline.cli.plan_args import count_list
    from roofline.tables import check_finite_text

    def best(fn):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        return min(times), out

    listed = ",".join(str(i) for i in range(1, 20_001))
    print(f"roofline sweep --values with 20,000 values, in process (best of {runs})")
    for label, text in (("parse a comma list of 20,000", listed), ("parse the range 1:20000:lin:20000", "1:20000:lin:20000")):
        t, values = best(lambda: count_list("--values", ranges=True)(text))
        print(f"  {label:<40} {t * 1e3:8.1f} ms  ({len(values):,} values)")
    result = sweep("llama3-8b", ["h100-sxm"], "batch", np.arange(1, 20_001))
    for label, fmt in (("table", result.to_table), ("CSV", result.to_csv), ("JSON", result.to_json)):
        t, text = best(fmt)
        t_check, _ = best(lambda: check_finite_text(text))
        print(f"  render the {label:<5} ({len(text) / 1e6:4.1f} MB)  {t * 1e3:8.1f} ms, then its finite check {t_check * 1e3:6.1f} ms")
    for flag in ("", "--csv", "--json"):
        argv = ["sweep", "--over", "batch", "--values", listed] + ([flag] if flag else [])
        with contextlib.redirect_stdout(io.StringIO()):
            t, _ = best(lambda: main(argv))
        print(f"  whole command {flag or '(table)':<8} {t * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
