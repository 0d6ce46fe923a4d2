"""Sweep throughput: whole-model predictions (configuration x size) per second on one core.

Each case is one `roofline.sweep.sweep` call: a model on one or several machines over 10^6 sizes
(batch, prompt tokens or context), every size a full prediction of the whole model (L blocks,
embedding, final norm, LM head; per-op compute, memory and launch time; bound; memory-bound
share). Prints the best of N runs per case; the target is at least 1,000,000 per second.

    python benchmarks/bench_sweep.py [N]
"""

import os
import sys
import time

import numpy as np

from roofline.sweep import sweep

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


if __name__ == "__main__":
    main()
