"""What torch.profiler's record_shapes does to the forwards it records, on the CPU: page faults per
forward and the ops they land in, against the same forward profiled without shapes and not
profiled at all. Figures are printed, never asserted.

    python benchmarks/profiler_faults.py            # the held-out models of accuracy_models.py, ~1 minute

Why (2026-12-02, 2-core AMD EPYC KVM, torch 2.13.0+cpu, one thread): in `accuracy_models.py` the
prefill GELU of the GPT-2-like model was recorded at ~480 us a call under the profiler with
record_shapes, 160-180 us without shapes or by the wall clock inside the same forward, and ~110 us
alone. The forwards recorded with shapes took ~600 minor page faults each against ~35-100 without:
the profiler's own allocations (the shapes it keeps) move glibc's heap top, freed heap is handed
back to the kernel and the next large activation (a 786 kB GELU output) is faulted in page by page,
inside whichever op allocates it. No trace records this; `roofline profile` predicts the op
without it. Counted with getrusage's ru_minflt around the recorded forwards.

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 2 forwards each, 16 tokens and a cache of 32;
the figures mean nothing.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

import accuracy_models as am  # noqa: E402
from smoke import announce, smoke_or  # noqa: E402

RUNS = smoke_or(10, 2)
TOKENS, CONTEXT = smoke_or((128, 256), (16, 32))


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(fn, shapes: bool | None):
    """(faults per forward, ms per forward, {op: median us per call}) over RUNS forwards: not
    profiled (shapes None), or under torch.profiler with record_shapes=shapes."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    if shapes is None:
        f0, t0 = _faults(), time.perf_counter()
        for _ in range(RUNS):
            fn()
        return (_faults() - f0) / RUNS, (time.perf_counter() - t0) / RUNS * 1e3, {}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as prof:
        f0, t0 = _faults(), time.perf_counter()
        for _ in range(RUNS):
            fn()
        f1, t1 = _faults(), time.perf_counter()
    per_op: dict = {}
    for e in prof.events():
        if e.cpu_parent is None:  # top-level ops: each op's time once
            per_op.setdefault(e.name, []).append(e.cpu_time_total)
    return (f1 - f0) / RUNS, (t1 - t0) / RUNS * 1e3, {k: statistics.median(v) for k, v in per_op.items()}


def main() -> int:
    announce()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, 1 thread, {RUNS} forwards each; faults = minor page faults per forward")
    print(f"{'model':<28} {'phase':<7} {'no profiler':>20} {'profiled, no shapes':>22} {'profiled, shapes':>20}   "
          "op (>= 50 us) slowed most by shapes, us a call")
    for c in am.MODELS:
        model = am.Model(c).eval()
        for phase in ("prefill", "decode"):
            fn = am.runs_of(model, phase, 1, TOKENS, CONTEXT, torch.float32)
            with torch.no_grad():
                plain = measure(fn, None)
                bare = measure(fn, False)
                shaped = measure(fn, True)
            # among ops of at least 50 us a call: the largest ratio (shorter ones are noise on this VM)
            grown = max(((shaped[2][k] / bare[2][k], k) for k in shaped[2] if bare[2].get(k, 0) >= 50), default=(0.0, "-"))
            op = grown[1]
            slow = f"{op} {bare[2].get(op, 0):,.0f} -> {shaped[2].get(op, 0):,.0f}" if op != "-" else "-"
            cell = lambda m: f"{m[0]:>6,.0f} f {m[1]:>7.2f} ms"  # noqa: E731
            print(f"{c.name[:28]:<28} {phase:<7} {cell(plain):>20} {cell(bare):>22} {cell(shaped):>20}   {slow}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
