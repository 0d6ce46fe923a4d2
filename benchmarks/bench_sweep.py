"""Sweep throughput: whole-model predictions (configuration x size) per second on one core.

Each case is one `roofline.plan.sweep.sweep` call: a model on one or several machines over 10^6
sizes, every size a full prediction of the whole model (L blocks, embedding, final norm, LM head;
per-op compute, memory and launch time; bound; memory-bound share). The library refuses a size past
its bounds (a decode batch past roofline.plan.limits.SEARCH_MAX_BATCH, 65,536; a context past
MAX_CONTEXT; a prompt past roofline.errors.MAX_COUNT), so a case whose axis is bounded below 10^6
sweeps every size 1..bound, repeated (the values tiled) until the call holds 10^6 of them: still
10^6 predictions in one call, but of at most `bound` distinct sizes (the header line of each case
says which). Prints the best of N runs per case; the target is at least 1,000,000 per second. Then,
in one more run per case under tracemalloc, the memory a prediction takes: at the call's peak and
what the result holds (its columns; the sweep fills them chunk by chunk, CHUNK sizes at a time).
Then `roofline sweep --values` with 20,000 values, in process, stage by stage.

    python benchmarks/bench_sweep.py [N]

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 100,000 sizes a case (still past the batch
bound, so tiled), 2,000 values for the CLI and one run; the figures mean nothing.
"""

import os
import sys
import time

import numpy as np

from roofline.errors import MAX_COUNT
from roofline.plan.limits import MAX_CONTEXT, SEARCH_MAX_BATCH
from roofline.plan.sweep import sweep
from smoke import announce, smoke_or  # benchmarks/ is on sys.path when run as a script

SIZES = smoke_or(1_000_000, 100_000)  # predictions per case (a case over several machines splits them)
CLI_VALUES = smoke_or(20_000, 2_000)
BOUNDS = {"tokens": MAX_COUNT, "batch": SEARCH_MAX_BATCH, "context": MAX_CONTEXT}  # what sweep() accepts per axis
CASES = [
    ("llama3-8b decode over batch", dict(model="llama3-8b", machines=["h100-sxm"], over="batch")),
    ("llama3-8b prefill over tokens", dict(model="llama3-8b", machines=["h100-sxm"], over="tokens")),
    ("llama3-8b decode over context", dict(model="llama3-8b", machines=["h100-sxm"], over="context")),
    ("mixtral-8x7b decode over batch, 4 machines x",
     dict(model="mixtral-8x7b", machines=["h100-sxm", "h200", "mi300x", "b200"], over="batch")),
    ("llama3-70b TP 8 decode over batch", dict(model="llama3-70b", machines=["h100-sxm"], over="batch", tensor_parallel=8)),
]


def one_core():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        return "pinned to one core"
    return "not pinned (no sched_setaffinity)"


def memory_per_point(values: np.ndarray, case: dict) -> tuple[float, float]:
    """(bytes the result holds, bytes allocated at the peak of the call) per prediction, by tracemalloc
    (numpy's arrays included), in a run of its own: tracemalloc slows allocation, so it is not timed."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = sweep(values=values, **case)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return held / result.predictions, peak / result.predictions


def case_values(over: str, n: int) -> tuple[np.ndarray, str]:
    """``n`` sizes for a sweep over ``over``: 1..n, or, past the axis's bound, 1..bound tiled to n
    values; and the words that say which."""
    top = int(min(n, BOUNDS[over]))
    values = np.resize(np.arange(1, top + 1), n)  # repeats 1..top cyclically up to n values
    if top == n:
        return values, f"1..{n:,}"
    return values, f"1..{top:,} tiled to {n:,}"


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(3, 1)
    announce()
    print(f"whole-model predictions per second ({one_core()}, best of {runs}); {SIZES:,} predictions a case, "
          f"an axis bounded below that (batch <= {SEARCH_MAX_BATCH:,}) sweeps 1..bound tiled to {SIZES:,} values")
    rates = []
    for label, case in CASES:
        case = dict(case)
        n = SIZES // len(case["machines"])
        values, sizes = case_values(case["over"], n)
        label = f"{label} {sizes}"
        best = float("inf")
        for _ in range(runs):
            t0 = time.perf_counter()
            result = sweep(values=values, **case)
            best = min(best, time.perf_counter() - t0)
        assert result.predictions == n * len(case["machines"])
        rate = result.predictions / best
        rates.append(rate)
        del result
        held, peak = memory_per_point(values, case)
        print(f"  {label:<74} {n * len(case['machines']):>9,} in {best:6.3f} s = {rate:>12,.0f} /s; "
              f"{peak:.0f} B a prediction at peak ({held:.0f} B the result holds)")
    print(f"slowest case: {min(rates):,.0f} predictions/s (target >= 1,000,000)")
    cli_values(runs)


def cli_values(runs):
    """`roofline sweep --over batch --values ...` with CLI_VALUES values, in process, stage by stage."""
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

    n = min(CLI_VALUES, SEARCH_MAX_BATCH)  # batches: within the decode batch bound
    listed = ",".join(str(i) for i in range(1, n + 1))
    print(f"roofline sweep --values with {n:,} values, in process (best of {runs})")
    for label, text in ((f"parse a comma list of {n:,}", listed), (f"parse the range 1:{n}:lin:{n}", f"1:{n}:lin:{n}")):
        t, values = best(lambda: count_list("--values", ranges=True)(text))
        print(f"  {label:<40} {t * 1e3:8.1f} ms  ({len(values):,} values)")
    result = sweep("llama3-8b", ["h100-sxm"], "batch", np.arange(1, n + 1))
    for label, fmt in (("table", result.to_table), ("CSV", result.to_csv), ("JSON", result.to_json)):
        t, text = best(fmt)
        t_check, _ = best(lambda: check_finite_text(text))
        print(f"  render the {label:<5} ({len(text) / 1e6:4.1f} MB)  {t * 1e3:8.1f} ms, then its finite check {t_check * 1e3:6.1f} ms")
    for flag in ("", "--csv", "--json"):
        argv = ["sweep", "--over", "batch", "--values", listed] + ([flag] if flag else [])
        with contextlib.redirect_stdout(io.StringIO()):
            t, code = best(lambda: main(argv))
        assert not code, f"roofline {' '.join(argv[:4])} ... exited {code}"
        print(f"  whole command {flag or '(table)':<8} {t * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
