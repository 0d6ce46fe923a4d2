"""One scalar whole-model analysis in-process: Llama 3 8B on an H100, a prefill of 8,192 tokens
plus one decode step at context 8,192 (two `roofline.plan.predict_model` calls, every op of the
32 layers, embedding and LM head costed). Also a windowed MoE (gpt-oss-120b, weights as stored)
and a hybrid (Jamba). Prints the median of N timed batches per case.

Side by side with LLM-Viewer (github.com/hahnyuan/LLM-Viewer, not on PyPI: give a checkout's path),
the same analysis: its ``ModelAnalyzer.analyze(seqlen=8192, batchsize=1, use_flashattention=True)``
(a prefill of 8,192 and a decode step at 8,192, bf16, Llama 3 8B's config.json values, its
nvidia_H100), timed in alternating batches in this process, and the ratio of the two medians;
the target is at most 0.7. Its ``transformers`` import (AutoConfig, unused here: the config is
given) is stubbed when transformers is not installed. Without the path, its side is skipped.

    python benchmarks/bench_model.py [N] [--llm-viewer PATH]

Wall times move with the machine's load (printed: the 1-minute load average before and after);
an instruction count does not. ``--calls SIDE N`` runs one side's analysis N times after 50 of
warm-up and a full garbage collection (gc.freeze: the collector's later full passes would scan
every imported module's objects, millions of instructions at random moments) and prints nothing:
under callgrind, the count of N = 300 less the count of N = 0, over 300, is one analysis's
instructions (with PYTHONHASHSEED=0 and OPENBLAS_NUM_THREADS=1 two runs count the same to the
instruction; numpy's BLAS threads otherwise add a few million at random):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python benchmarks/bench_model.py \
        --llm-viewer PATH --calls roofline 300

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): one batch of 5 analyses per case after 2 of
warm-up; the figures mean nothing.
"""

import argparse
import gc
import importlib
import os
import statistics
import sys
import time
import tomllib
import types
from importlib import resources

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
TARGET = 0.7  # issue 38: the scalar path at most 0.7x LLM-Viewer's time for the same analysis


def one_core():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        return "pinned to one core"
    return "not pinned (no sched_setaffinity)"


def analysis(model, precision):
    """Both passes, reading each one's time (LLM-Viewer's analyze returns its totals too)."""
    return (predict_model(model, H100, "prefill", 8192, 1, precision=precision).time_s
            + predict_model(model, H100, "decode", 1, 1, 8192, precision=precision).time_s)


def timed(fn, batches: int) -> list[float]:
    """Seconds per call: one figure per batch of PER_BATCH calls, after WARMUP calls."""
    for _ in range(WARMUP):
        fn()
    out = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(PER_BATCH):
            fn()
        out.append((time.perf_counter() - t) / PER_BATCH)
    return out


def llm_viewer(path: str):
    """LLM-Viewer's analysis of Llama 3 8B on its nvidia_H100 as a function of no arguments, or the
    reason it cannot be run from ``path``."""
    if not os.path.isfile(os.path.join(path, "model_analyzer.py")):
        return f"no model_analyzer.py under {path!r} (a checkout of github.com/hahnyuan/LLM-Viewer)"
    sys.path.insert(0, os.path.abspath(path))
    try:
        import transformers  # noqa: F401  (LLM-Viewer imports it; the analysis does not use it)
    except ImportError:
        sys.modules["transformers"] = types.SimpleNamespace(AutoTokenizer=None, AutoConfig=None, AutoModelForCausalLM=None)
    import model_analyzer

    table = tomllib.loads((resources.files("roofline") / "data" / "models.toml").read_text())
    analyzer = object.__new__(model_analyzer.ModelAnalyzer)  # its __init__ fetches the config from the Hub
    analyzer.model_id, analyzer.hardware = "meta-llama/Meta-Llama-3-8B", "nvidia_H100"
    analyzer.model_params = types.SimpleNamespace(**table["models"]["llama3-8b"]["config"])  # the same config.json values
    analyzer.config = importlib.import_module("configs.Llama")
    return lambda: analyzer.analyze(8192, 1, use_flashattention=True)


def side_by_side(path: str | None, batches: int):
    """Our Llama 3 8B analysis and LLM-Viewer's, batches alternating, medians and their ratio."""
    if path is None:
        print("LLM-Viewer: skipped (give --llm-viewer PATH, a checkout of github.com/hahnyuan/LLM-Viewer)")
        return
    theirs = llm_viewer(path)
    if isinstance(theirs, str):
        print(f"LLM-Viewer: skipped ({theirs})")
        return
    model = get_model("llama3-8b")
    ours_s, theirs_s = [], []
    for _ in range(batches):  # alternating, so a busy moment of the machine falls on both
        ours_s += timed(lambda: analysis(model, None), 1)
        theirs_s += timed(theirs, 1)
    ours, peer = statistics.median(ours_s), statistics.median(theirs_s)
    print(f"side by side, Llama 3 8B on an H100, prefill 8192 + decode step at 8192 (median of {batches} alternating "
          f"batches of {PER_BATCH}):")
    print(f"  roofline {ours * 1e3:.3f} ms, LLM-Viewer {peer * 1e3:.3f} ms: ratio {ours / peer:.2f} (target <= {TARGET})")


def calls(side: str, n: int, path: str | None):
    """``n`` of one side's Llama 3 8B analyses after warm-up and gc.freeze, for an instruction count."""
    if side == "roofline":
        model = get_model("llama3-8b")
        fn = lambda: analysis(model, None)  # noqa: E731
    else:
        fn = llm_viewer(path or "")
        if isinstance(fn, str):
            raise SystemExit(f"LLM-Viewer: {fn}")
    for _ in range(50):
        fn()
    gc.collect()
    gc.freeze()
    for _ in range(n):
        fn()


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("batches", nargs="?", type=int, default=smoke_or(7, 1))
    parser.add_argument("--llm-viewer", metavar="PATH", help="a checkout of github.com/hahnyuan/LLM-Viewer")
    parser.add_argument("--calls", nargs=2, metavar=("SIDE", "N"), help="roofline or llm-viewer, N analyses, no output")
    args = parser.parse_args()
    if args.calls:
        side, n = args.calls
        if side not in ("roofline", "llm-viewer") or not n.isdigit():
            parser.error(f"--calls takes roofline or llm-viewer and a count, got {side!r} {n!r}")
        calls(side, int(n), args.llm_viewer)
        return
    announce()
    print(f"one whole-model analysis ({one_core()}, median of {args.batches} batches of {PER_BATCH}; load average {load()})")
    for label, key, prec in CASES:
        model = get_model(key)
        precision = Precision.as_stored(model) if prec == "stored" else None
        times = timed(lambda: analysis(model, precision), args.batches)
        print(f"{label:60s} {statistics.median(times) * 1e3:.3f} ms")
    side_by_side(args.llm_viewer, args.batches)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
