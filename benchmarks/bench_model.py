"""One scalar whole-model analysis in-process: Llama 3 8B on an H100, a prefill of 8,192 tokens
plus one decode step at context 8,192 (two `roofline.plan.predict_model` calls, every op of the
32 layers, embedding and LM head costed). Also a windowed MoE (gpt-oss-120b, weights as stored)
and a hybrid (Jamba). Prints the median of N timed batches per case; the target for the Llama
case is at most 0.1 ms.

    python benchmarks/bench_model.py [N]

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): one batch of 5 analyses per case after 2 of
warm-up; the figures mean nothing.
"""

import os
import statistics
import sys
import time

from smoke import announce, smoke_or  # benchmarks/ is on sys.path when run as a script

from roofline.machines import get_machine
from roofline.plan import Precision, predict_model
from roofline.transformer import get_model

H100 = get_machine("h100-sxm")
PER_BATCH = smoke_or(500, 5)
WARMUP = smoke_or(100, 2)
CASES = [
    ("llama3-8b prefill 8192 + decode step", "llama3-8b", None),
    ("gpt-oss-120b (MXFP4 as stored) prefill 8192 + decode step", "gpt-oss-120b", "stored"),
    ("jamba prefill 8192 + decode step", "jamba", None),
]


def one_core():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        return "pinned to one core"
    return "not pinned (no sched_setaffinity)"


def analysis(model, precision):
    predict_model(model, H100, "prefill", 8192, 1, precision=precision)
    predict_model(model, H100, "decode", 1, 1, 8192, precision=precision)


def main():
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(7, 1)
    announce()
    print(f"one whole-model analysis ({one_core()}, median of {batches} batches of {PER_BATCH})")
    for label, key, prec in CASES:
        model = get_model(key)
        precision = Precision.as_stored(model) if prec == "stored" else None
        for _ in range(WARMUP):
            analysis(model, precision)
        times = []
        for _ in range(batches):
            t = time.perf_counter()
            for _ in range(PER_BATCH):
                analysis(model, precision)
            times.append((time.perf_counter() - t) / PER_BATCH)
        print(f"{label:60s} {statistics.median(times) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
