"""How long `roofline layer --json` takes from a fresh interpreter (the CLI must start fast: no
matplotlib, torch or web import on that path). Prints the median of N runs and, for scale, a bare
`python -c pass` measured in the same run, so the ratio is comparable across noisy machines.

    python benchmarks/bench_cli_startup.py [N]

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 2 runs each, the plot once; the figures mean
nothing.
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from smoke import announce, smoke_or  # benchmarks/ is on sys.path when run as a script


def timed(argv, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out.append(time.perf_counter() - t0)
    return statistics.median(out), max(out)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(10, 2)
    announce()
    bare, _ = timed([sys.executable, "-c", "pass"], n)
    layer, worst = timed([sys.executable, "-m", "roofline", "layer", "--json"], n)
    with tempfile.TemporaryDirectory() as tmp:
        png = str(Path(tmp) / "roofline-bench.png")
        plot, _ = timed([sys.executable, "-m", "roofline", "plot", "layer", "-o", png], smoke_or(max(3, n // 3), 1))
    print(f"python -c pass            median {bare * 1e3:7.1f} ms")
    print(f"roofline layer --json     median {layer * 1e3:7.1f} ms  (max {worst * 1e3:.1f} ms, {layer / bare:.1f}x bare python)")
    print(f"roofline plot layer       median {plot * 1e3:7.1f} ms  (imports matplotlib)")


if __name__ == "__main__":
    main()
