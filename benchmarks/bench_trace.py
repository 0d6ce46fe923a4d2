"""How long `roofline.trace` takes on a 7B Llama (and 8B, with grouped-query attention) built on the
meta device, and how much memory it uses. Prints figures; asserts nothing (timings belong here).

    python benchmarks/bench_trace.py [TOKENS]

Memory is measured two ways in this one process: the peak resident set (ru_maxrss, which includes
the ~0.3 GB that `import torch` itself costs, printed separately) and tracemalloc's peak of Python
allocations during the trace alone.

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 8 tokens (both models, still built and traced
whole on the meta device); the figures mean nothing.
"""

import resource
import sys
import time
import tracemalloc

from smoke import announce, smoke_or  # benchmarks/ is on sys.path when run as a script


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def main():
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(128, 8)
    announce()
    base = rss_mb()
    t0 = time.perf_counter()
    import torch

    from roofline.trace import models, trace

    print(f"import torch + roofline.trace  {time.perf_counter() - t0:6.2f} s   peak RSS {rss_mb():7.1f} MB "
          f"(python alone {base:.1f} MB)")
    for name in ("llama2_7b", "llama3_8b"):
        t0 = time.perf_counter()
        with torch.device("meta"):
            model = getattr(models, name)()
        built = time.perf_counter() - t0
        ids = torch.zeros(1, tokens, dtype=torch.long)
        tracemalloc.start()
        t0 = time.perf_counter()
        result = trace(model, ids, dtype="bf16")
        traced = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        t0 = time.perf_counter()
        result = trace(model, ids, dtype="bf16")  # again, without tracemalloc's overhead
        fast = time.perf_counter() - t0
        params = sum(p.numel() for p in model.parameters())
        print(f"{name:10s} {params / 1e9:5.2f}B params, T={tokens}: build {built:5.2f} s, trace {fast:5.2f} s "
              f"({traced:.2f} s under tracemalloc), {len(result.ops):,} ops; tracemalloc peak {peak / 1e6:6.1f} MB; "
              f"peak RSS {rss_mb():7.1f} MB; {result.total_flops / 1e12:.2f} TFLOP, {result.total_bytes / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
