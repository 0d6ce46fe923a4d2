"""Timing: warm-up, repeats to a time budget, median and spread (10th and 90th percentiles).

The habits of Triton's ``do_bench``: a budget instead of a fixed count, a cache flush between runs
where it matters (cold-cache timings), quantiles rather than a mean. Short ops are called several
times per sample so that one sample lasts at least ``min_sample_s`` (timer resolution, Python
overhead and the device synchronisation amortised); ``sync`` waits for an asynchronous device
(CUDA) before the clock is read. The calls per sample are estimated after the first call, as
Triton's ``do_bench`` does: the first call pays the lazy setup (allocation, CUDA module loading)
and would make a microsecond op look like a millisecond one. ``bench_round_robin`` times several ops in interleaved passes, so that a burst of load on a
shared machine lands on all of them rather than on whichever op was being timed. No torch here:
the device specifics come in as ``sync`` and ``flush``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from roofline.diagnose.check_report import Measured

MAX_INNER = 10_000
ESTIMATE_CALLS = 5  # warm calls timed back to back for the per-call estimate of a short op


@dataclass(frozen=True)
class Timing(Measured):
    """Seconds per call: median and 10th/90th percentiles over ``samples`` samples (Measured, what
    a check reads) of ``inner`` back-to-back calls each."""

    inner: int = 1


def _stats(samples: Sequence[float], inner: int) -> Timing:
    a = np.asarray(samples, dtype=float)
    lo, med, hi = np.percentile(a, [10, 50, 90])
    return Timing(float(med), float(lo), float(hi), int(a.size), inner)


def _nothing():
    return None


def _calls_per_sample(fn, sync, min_sample_s: float, clock) -> int:
    """Calls per sample so that a sample lasts ``min_sample_s``: one warm call timed; if it is
    shorter than that, ESTIMATE_CALLS more back to back with one synchronisation (so that a short
    device op is not estimated by the synchronisation's cost)."""
    t0 = clock()
    fn()
    sync()
    per_call = clock() - t0
    if per_call < min_sample_s:
        t0 = clock()
        for _ in range(ESTIMATE_CALLS):
            fn()
        sync()
        per_call = (clock() - t0) / ESTIMATE_CALLS
    return int(min(MAX_INNER, max(1, math.ceil(min_sample_s / max(per_call, 1e-9)))))


def bench(fn: Callable[[], object], *, sync: Callable[[], object] | None = None,
          flush: Callable[[], object] | None = None, warmup: int = 1, min_repeats: int = 3, max_repeats: int = 50,
          budget_s: float = 0.5, min_sample_s: float = 1e-3, clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Time ``fn``: one call for the lazy setup, one warm call (and ESTIMATE_CALLS more for a
    short op) to estimate the calls per sample, ``warmup`` samples thrown away, then samples
    until ``budget_s`` has passed (at least ``min_repeats``, at most ``max_repeats``). With
    ``flush`` every sample is one call after a flush (not timed) and nothing is estimated."""
    return bench_round_robin([fn], sync=sync, flush=flush, warmup=warmup, min_repeats=min_repeats,
                             max_repeats=max_repeats, budget_s=budget_s, min_sample_s=min_sample_s, clock=clock)[0]


def bench_round_robin(fns: Sequence[Callable[[], object]], *, sync=None, flush=None, warmup: int = 1,
                      min_repeats: int = 3, max_repeats: int = 50, budget_s: float = 1.0, min_sample_s: float = 1e-3,
                      clock: Callable[[], float] = time.perf_counter, progress: Callable[[float, str], object] | None = None,
                      labels: Sequence[str] = ()) -> list[Timing]:
    """Time several ops in interleaved passes (one sample of each per pass) until ``budget_s`` is
    spent; see ``bench``. Returns one Timing per op, in order."""
    sync = sync or _nothing
    inners = []
    for fn in fns:
        fn()  # first call: allocation, lazy init (CUDA module loading); not part of the estimate
        sync()
        inners.append(1 if flush else _calls_per_sample(fn, sync, min_sample_s, clock))

    def sample(fn, inner):
        if flush:
            flush()
            sync()
        t0 = clock()
        for _ in range(inner):
            fn()
        sync()
        return (clock() - t0) / inner

    for _ in range(warmup):
        for fn, inner in zip(fns, inners):
            sample(fn, inner)
    samples: list[list[float]] = [[] for _ in fns]
    start = clock()
    passes = 0
    while passes < max_repeats:
        for i, (fn, inner) in enumerate(zip(fns, inners)):
            samples[i].append(sample(fn, inner))
        passes += 1
        spent = clock() - start
        if progress is not None:
            progress(min(1.0, max(spent / budget_s if budget_s > 0 else 1.0, passes / max_repeats)),
                     f"pass {passes}")
        if passes >= min_repeats and spent >= budget_s:
            break
    return [_stats(s, inner) for s, inner in zip(samples, inners)]
