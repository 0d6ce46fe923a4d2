"""How long the CLI takes to start, from a fresh interpreter: `roofline --version` (loads no numpy)
and `roofline layer --json` (its own path only: no serving simulator, planner, tracer, matplotlib,
torch or web import; tests/test_startup.py checks which modules load). Prints the median of N runs (wall
time, and the CPU time the run used, which a busy machine inflates much less) and, for scale, a bare
`python -c pass` measured in the same run, so the ratio is comparable across noisy machines.

    python benchmarks/bench_cli_startup.py [N]

Every run reads its bytecode from a private cache (PYTHONPYCACHEPREFIX in a temporary directory,
filled by one untimed run of each command first), as an installed package runs from its compiled
files, also where the environment says PYTHONDONTWRITEBYTECODE; nothing is written into the checkout.

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 2 runs each, the plot once; the figures mean
nothing.
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from smoke import announce, smoke_or  # benchmarks/ is on sys.path when run as a script


def cpu_s() -> float:
    """The CPU seconds (user + system) of this process's finished children."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv, n, env):
    """The median and the largest wall time of ``n`` runs of ``argv``, and their median CPU time: on a
    busy machine the wall time grows with the load, the CPU time much less."""
    subprocess.run(argv, check=True, capture_output=True, env=env)  # untimed: fills the bytecode cache
    wall, cpu = [], []
    for _ in range(n):
        c0, t0 = cpu_s(), time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        wall.append(time.perf_counter() - t0)
        cpu.append(cpu_s() - c0)
    return statistics.median(wall), max(wall), statistics.median(cpu)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else smoke_or(10, 2)
    announce()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        bare, _, bare_cpu = timed([sys.executable, "-c", "pass"], n, env)
        version, _, version_cpu = timed([sys.executable, "-m", "roofline", "--version"], n, env)
        layer, worst, layer_cpu = timed([sys.executable, "-m", "roofline", "layer", "--json"], n, env)
        png = str(Path(tmp) / "roofline-bench.png")
        plot, _, _ = timed([sys.executable, "-m", "roofline", "plot", "layer", "-o", png], smoke_or(max(3, n // 3), 1), env)

    def ratios(wall, cpu):
        return f"{wall / bare:.1f}x bare python; CPU {cpu * 1e3:.0f} ms, {cpu / bare_cpu:.1f}x"

    print(f"python -c pass            median {bare * 1e3:7.1f} ms  (CPU {bare_cpu * 1e3:.0f} ms)")
    print(f"roofline --version        median {version * 1e3:7.1f} ms  ({ratios(version, version_cpu)})")
    print(f"roofline layer --json     median {layer * 1e3:7.1f} ms  (max {worst * 1e3:.1f} ms, {ratios(layer, layer_cpu)})")
    print(f"roofline plot layer       median {plot * 1e3:7.1f} ms  (imports matplotlib)")


if __name__ == "__main__":
    main()
