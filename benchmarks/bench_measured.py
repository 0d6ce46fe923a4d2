"""Measured kernel tables (roofline[measured]): how long each family takes to load for one GPU and
engine, how fast a measured op is looked up once loaded, and the process's memory with them all.

For H100 SXM on TensorRT-LLM's default tables: the GEMM grid of each dtype, the context and the
generation attention; then N lookups each at shapes spread over the measured range (interpolated
and exact points alike), and the peak resident memory (ru_maxrss). Targets: a lookup in
microseconds after its family's first load; under 300 MB with every family of one GPU loaded.

    python benchmarks/bench_measured.py [N]

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 200 lookups; the figures mean nothing.
"""

import resource
import sys
import time

import numpy as np

from smoke import announce, smoke_or  # benchmarks/ is on sys.path when run as a script

from roofline.measured.attention import attention_table
from roofline.measured.gemm import gemm_table

MACHINE, KERNELS = "h100-sxm", "trtllm"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def main() -> int:
    announce()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(20_000, 200)
    print(f"measured kernels on {MACHINE}, {KERNELS}: load once per family, then {n:,} lookups each "
          f"(start {rss_mb():,.0f} MB resident)")
    loads = [("gemm bf16", lambda: gemm_table(MACHINE, KERNELS, "bf16")),
             ("gemm fp8", lambda: gemm_table(MACHINE, KERNELS, "fp8")),
             ("attention context", lambda: attention_table(MACHINE, KERNELS, False)),
             ("attention generation", lambda: attention_table(MACHINE, KERNELS, True))]
    tables = {}
    for label, load in loads:
        t0 = time.perf_counter()
        tables[label] = load()
        print(f"  load {label:22s} {time.perf_counter() - t0:8.3f} s")
    rng = np.random.default_rng(0)
    gemm = tables["gemm bf16"]
    shapes = np.exp(rng.uniform(np.log([1, 256, 256]), np.log([16384, 32768, 32768]), size=(n, 3)))
    t0 = time.perf_counter()
    for m, nn, k in shapes:
        gemm.estimate(m, nn, k)
    per = (time.perf_counter() - t0) / n
    print(f"  lookup gemm bf16 (m, n, k)      {per * 1e6:8.1f} us each = {1 / per:,.0f} /s")
    ctx, gen = tables["attention context"], tables["attention generation"]
    lengths = np.exp(rng.uniform(np.log(16), np.log(16384), size=n))
    batches = np.exp(rng.uniform(0, np.log(64), size=n)).round()
    t0 = time.perf_counter()
    for s, b in zip(lengths, batches):
        ctx.estimate("bf16", "bf16", b, s, s, 32, 8, 128, 0)
    per = (time.perf_counter() - t0) / n
    print(f"  lookup context attention        {per * 1e6:8.1f} us each = {1 / per:,.0f} /s")
    t0 = time.perf_counter()
    for s, b in zip(lengths, batches):
        gen.estimate("bf16", "bf16", b, 1, s, 32, 8, 128, 0)
    per = (time.perf_counter() - t0) / n
    print(f"  lookup generation attention     {per * 1e6:8.1f} us each = {1 / per:,.0f} /s")
    print(f"peak resident memory {rss_mb():,.0f} MB (target under 300 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
