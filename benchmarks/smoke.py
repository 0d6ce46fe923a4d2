"""Smoke mode for the benchmarks (not a benchmark): with ROOFLINE_BENCH_SMOKE=1 in the environment
each benchmark runs its own code path at a tiny size (a few iterations, tiny budgets, the first
rows), prints its figures as usual under the line HEADER and exits 0, so CI runs every benchmark in
seconds (tests/test_benchmarks.py) and none can rot unseen. The figures of a smoke run mean nothing,
and a smoke run writes nothing into this checkout (``output``): a report meant for docs/ goes to a
temporary directory instead, never over a committed file.

This module is the one place the variable is read (gpu_check.sh asks it too). The benchmarks run
as ``python benchmarks/X.py``, so benchmarks/ is on sys.path and ``from smoke import ...`` works.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SMOKE = os.environ.get("ROOFLINE_BENCH_SMOKE") == "1"
ROOT = Path(__file__).resolve().parents[1]  # the checkout a smoke run must not write into
HEADER = "smoke mode: sizes cut, figures not meaningful"

__all__ = ["SMOKE", "HEADER", "smoke_or", "announce", "output", "smoke_dir"]


def smoke_or(full, tiny):
    """``full`` normally, ``tiny`` in smoke mode."""
    return tiny if SMOKE else full


def announce(file=None) -> None:
    """Print HEADER first thing in smoke mode (nothing otherwise)."""
    if SMOKE:
        print(HEADER, file=file, flush=True)


_DIR: Path | None = None


def smoke_dir() -> Path:
    """One temporary directory per process for whatever a smoke run writes."""
    global _DIR
    if _DIR is None:
        _DIR = Path(tempfile.mkdtemp(prefix="roofline-bench-smoke-"))
    return _DIR


def output(path):
    """Where to write ``path`` (a str or a Path; None stays None): itself normally, and in smoke mode
    when it lies outside this checkout (gpu_check.sh's $OUT); in smoke mode a path inside the
    checkout (docs/accuracy.md, the default of several) becomes the same file name in smoke_dir(),
    so a smoke run never writes over a committed file."""
    if not SMOKE or path is None:
        return path
    if not Path(path).resolve().is_relative_to(ROOT):
        return path
    return type(path)(smoke_dir() / Path(path).name)


if __name__ == "__main__":  # gpu_check.sh: `python3 benchmarks/smoke.py` prints 1 in smoke mode, else 0
    print(int(SMOKE))
