"""Side by side with NVIDIA's AIConfigurator on measured deployments: a fixed sample of the
silicon sample's aggregated rows (every n-th row this tool can express, by id), each predicted by
`roofline serving --engine` (as benchmarks/silicon_validation.py runs it: the engine's defaults,
its measured kernels and its fitted time per step) and by AIConfigurator's own estimator
(`aiconfigurator cli estimate`, same engine, version where its database holds it, layout and
quantisation), with the time each tool takes a row. A benchmark run by hand, not in CI: the peer
takes seconds a row and is installed apart (its `aiconfigurator` distribution, e.g. in a virtual
environment: `python -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12.0`).

    python benchmarks/peer_comparison.py --aiconfigurator /tmp/aic/bin/aiconfigurator [--rows 120 | --per-slice K] [--out FILE]

With ROOFLINE_BENCH_SMOKE=1: two rows, and without the peer installed only this tool's side.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from smoke import announce, output, smoke_or  # noqa: E402
import silicon_validation as sv  # noqa: E402  (benchmarks/ is on sys.path as a script)

NUMBER = r"([0-9.]+) ms"
# the sample's model paths the peer knows under another name (its model_configs/ ship Meta-Llama-3.1-*)
PEER_MODEL = {"meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
              "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B"}
# checkpoints whose config.json carries their own quantization_config: the peer reads it; the row's modes are
# passed only for models the engine quantises on load
OWN_QUANTISATION = {"openai/gpt-oss-120b", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-235B-A22B-FP8",
                    "MiniMaxAI/MiniMax-M2.5", "nvidia/Llama-3.1-8B-Instruct-FP8", "nvidia/Qwen3-32B-NVFP4",
                    "nvidia/DeepSeek-R1-NVFP4", "nvidia/DeepSeek-V3.1-NVFP4"}


def sample(rows: list[dict], n: int) -> list[dict]:
    """Every k-th of the rows this tool can express, ordered by id: a fixed sample of about n."""
    ok = sorted((r for r in rows if not isinstance(sv.layout(r), str)), key=lambda r: r["id"])
    step = max(1, len(ok) // n)
    return ok[::step][:n]


def _slice(r: dict) -> tuple:
    """A row's (engine, GPU, model preset): issue 35's slice."""
    return r["backend"], r["system"], sv.layout(r)[0]


def sample_by_slice(rows: list[dict], k: int, largest: int = 0) -> list[dict]:
    """Every j-th row of each (engine, GPU, model) slice, ordered by id: about k a slice (all of a smaller
    slice), so that each slice with k or more rows can be compared on its own; with ``largest`` only the
    slices with the most rows, that many."""
    ok = sorted((r for r in rows if not isinstance(sv.layout(r), str)), key=lambda r: r["id"])
    slices: dict[tuple, list[dict]] = {}
    for r in ok:
        slices.setdefault(_slice(r), []).append(r)
    kept = sorted(slices.values(), key=len, reverse=True)[:largest or None]
    return sorted((r for s in kept for r in s[::max(1, len(s) // k)][:k]), key=lambda r: r["id"])


def peer_layout(r: dict) -> tuple[int, int, int, int, int]:
    """(tp, attention dp, MoE tp, MoE ep, batch per attention-DP rank) the peer is given for a row: the layout
    our side runs. The sample's, except InferenceX's rows whose launch scripts laid them out otherwise, which both
    tools take as the scripts did (silicon_validation.script_layout: InferenceX's vLLM rows, and its TensorRT-LLM rows
    of the scripts that chose EP_SIZE and DP_ATTENTION themselves): tensor-parallel on the script's GPUs ("tp"),
    experts split over them ("tp_ep"), data-parallel attention with them ("dp_ep"), the row's users spread over the
    ranks."""
    launched = sv.script_layout(r)
    if launched is None or launched["layout"] == "unknown" or int(launched["gpus"]) == 1:
        return (sv._int(r["tp_size"]), sv._int(r["attention_dp_size"]), sv._int(r["moe_tp_size"]),
                sv._int(r["moe_ep_size"]), sv._int(r["batch_size"]))
    g, users = int(launched["gpus"]), sv.concurrency(r)
    return {"tp": (g, 1, g, 1, users), "tp_ep": (g, 1, 1, g, users)}.get(launched["layout"], (1, g, 1, g, max(1, users // g)))


def peer_args(r: dict) -> list[str]:
    """The row as `aiconfigurator cli estimate` flags: its engine and version, layout (peer_layout), quantisation."""
    tp, dp, mtp, mep, batch = peer_layout(r)
    args = ["estimate", "--model-path", PEER_MODEL.get(r["model_path"], r["model_path"]), "--system", r["system"], "--backend", r["backend"],
            "--isl", r["isl"], "--osl", r["osl"], "--batch-size", str(batch), "--estimate-mode", "agg",
            "--tp-size", str(tp), "--attention-dp-size", str(dp), "--moe-tp-size", str(mtp), "--moe-ep-size", str(mep),
            "--log-level", "ERROR"]
    if (r["backend_version"] or "").strip():
        args += ["--perf-db-version", r["backend_version"].strip()]
    for flag, col in (("--gemm-quant-mode", "gemm_quant_mode"), ("--moe-quant-mode", "moe_quant_mode")):
        if (r[col] or "").strip() and r["model_path"] not in OWN_QUANTISATION:
            args += [flag, r[col].strip()]
    return args


def run_peer(exe: str, r: dict) -> dict:
    """The peer's TTFT and TPOT (s) and its seconds, or why it gave none. A version its database
    lacks is retried at its default version (said in the result)."""
    t0 = time.perf_counter()
    args = peer_args(r)
    out = subprocess.run([exe, "cli", *args], capture_output=True, text=True, timeout=600)
    note = ""
    if out.returncode and "--perf-db-version" in args:
        i = args.index("--perf-db-version")
        out = subprocess.run([exe, "cli", *(args[:i] + args[i + 2:])], capture_output=True, text=True, timeout=600)
        note = "its default version"
    seconds = time.perf_counter() - t0
    ttft = re.search(r"TTFT:\s+" + NUMBER, out.stdout)
    tpot = re.search(r"TPOT:\s+" + NUMBER, out.stdout)
    if out.returncode or not (ttft and tpot):
        last = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": last[0][:160], "seconds": seconds}
    return {"ttft_s": float(ttft.group(1)) / 1e3, "tpot_s": float(tpot.group(1)) / 1e3, "seconds": seconds, "note": note}


def main(argv=None) -> int:
    announce()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aiconfigurator", default=shutil.which("aiconfigurator") or "",
                    help="the peer's command (its own virtual environment's bin/aiconfigurator)")
    ap.add_argument("--rows", type=int, default=120)
    ap.add_argument("--per-slice", type=int, default=0, metavar="K",
                    help="draw about K rows from each (engine, GPU, model) slice instead of --rows over all")
    ap.add_argument("--largest", type=int, default=0, metavar="N",
                    help="with --per-slice: only the N slices with the most rows")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default=str(ROOT / "docs" / "serving-peer-comparison.md"))
    ap.add_argument("--time-peer", type=int, default=0, metavar="N",
                    help="time the peer again, one row at a time, on N of the rows both predict, beside our time for "
                         "the same rows in this run (the cached peer seconds may come from runs beside other work)")
    ap.add_argument("--peer-rows", default=None, metavar="FILE",
                    help="the peer's results as JSON lines, each with the flags it was run with: a row whose flags match is "
                         "read from FILE, the others run and added to it")
    args = ap.parse_args(argv)
    from roofline.measured.tables import data_root

    every = sv.read_rows(data_root().parent / "silicon_sample.csv")
    rows = sample_by_slice(every, args.per_slice, args.largest) if args.per_slice else sample(every, smoke_or(args.rows, 2))
    ours = []
    for r in rows:
        t0 = time.perf_counter()
        d = sv.run_row(r, overheads=sv.fitted_in_file(), eager=sv.eager_in_file())
        d["ours_seconds"] = time.perf_counter() - t0
        ours.append(d)
    peer = [{} for _ in rows]
    import json

    cached = Path(args.peer_rows) if args.peer_rows else None
    got = {d["id"]: d for d in map(json.loads, cached.read_text().splitlines())} if cached and cached.is_file() else {}
    # a cached result stands for its row only if the peer was asked the same (its flags: a layout read anew reruns it)
    peer = [got[r["id"]] if got.get(r["id"], {}).get("args") == peer_args(r) else {} for r in rows]
    todo = [i for i, p in enumerate(peer) if not p]
    if todo and args.aiconfigurator:
        print(f"the peer: {len(todo)} of {len(rows)} rows to run ({len(rows) - len(todo)} cached)", flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for i, p in zip(todo, pool.map(lambda i: run_peer(args.aiconfigurator, rows[i]), todo)):
                peer[i] = {**p, "args": peer_args(rows[i])}
                if cached is not None:  # kept as it comes: a run cut short resumes where it stopped
                    got[rows[i]["id"]] = {"id": rows[i]["id"], **peer[i]}
                    cached.write_text("".join(json.dumps(d) + "\n" for d in got.values()))
    args.timed = time_peer(args.aiconfigurator, rows, ours, peer, args.time_peer) if args.time_peer and args.aiconfigurator \
        else None
    args.total = len(every)
    args.accepted = sum(1 for r in every if not isinstance(sv.layout(r), str))
    lines = report(rows, ours, peer, args)
    path = output(Path(args.out))
    path.write_text("\n".join(lines) + "\n")
    for line in lines[:10]:
        print(line)
    print(f"wrote {path}")
    return 0


def time_peer(exe: str, rows, ours, peer, n: int) -> tuple[int, float, float]:
    """(rows, our median seconds, the peer's median seconds) on n rows both predict, evenly drawn, the peer run again
    one row at a time now (its cached seconds may come from runs that shared the cores), ours as timed in this run."""
    both = [i for i, (o, p) in enumerate(zip(ours, peer)) if "refused" not in o and "ttft_s" in p]
    pick = both[::max(1, len(both) // n)][:n]
    print(f"timing the peer again on {len(pick)} rows, one at a time", flush=True)
    theirs = [run_peer(exe, rows[i])["seconds"] for i in pick]
    return len(pick), statistics.median(ours[i]["ours_seconds"] for i in pick), statistics.median(theirs)


def _err(pred, meas):
    return abs(pred / meas - 1.0)


def slice_table(both) -> list[str]:
    """Median |error| of each tool by (engine, GPU, model) slice: issue 35 asks for slices of 20 rows or more."""
    slices: dict[tuple, list] = {}
    for x in both:
        slices.setdefault((x[1]["engine"], x[1]["machine"], x[1]["model"]), []).append(x)
    big = sum(1 for v in slices.values() if len(v) >= 20)
    def wins(k, least=0):
        return sum(1 for xs in slices.values() if len(xs) >= least and statistics.median(
            _err(o["kernels+engine"][k], o[k]) for r, o, p in xs) <= statistics.median(_err(p[k], o[k]) for r, o, p in xs))
    lines = ["", f"By (engine, GPU, model) slice: {len(slices)} slices, {big} with the 20 or more rows issue 35 asks "
             "for (a slice of fewer rows is a hint, not a verdict); our median error is at most AIConfigurator's in "
             f"{wins('tpot_s')} of the {len(slices)} for TPOT and {wins('ttft_s')} for TTFT, in {wins('tpot_s', 20)} and "
             f"{wins('ttft_s', 20)} of the {big} with 20 rows or more. TPOT and TTFT median abs. error by slice:",
             "", "| engine | GPU | model | n | TPOT ours | TPOT AIConfigurator | TTFT ours | TTFT AIConfigurator |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (engine, gpu, model), xs in sorted(slices.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        med = [statistics.median(_err(f(o, p)[key], o[key]) for r, o, p in xs)
               for key in ("tpot_s", "ttft_s") for f in (lambda o, p: o["kernels+engine"], lambda o, p: p)]
        lines.append(f"| {engine} | {gpu} | {model} | {len(xs)} | " + " | ".join(f"{m:.0%}" for m in med) + " |")
    return lines


def report(rows, ours, peer, args) -> list[str]:
    both = [(r, o, p) for r, o, p in zip(rows, ours, peer) if "refused" not in o and "ttft_s" in p]
    lines = ["# Serving: roofline against AIConfigurator on measured deployments", "",
             f"Measured {time.strftime('%Y-%m-%d')} with `python benchmarks/peer_comparison.py` on {os.cpu_count()} CPU "
             f"core(s): {len(rows)} rows of aiconfigurator-core's silicon sample ("
             + (f"every j-th of each (engine, GPU, model) slice's aggregated rows, about {args.per_slice} a slice, by id"
                + (f", in the {args.largest} slices with the most rows" if args.largest else "")
                if args.per_slice else "every n-th aggregated row this tool can express, by id")
             + f"), {len(both)} predicted by both. The draw is taken from the {args.accepted:,} of "
             f"{args.total:,} aggregated rows read as "
             "benchmarks/silicon_validation.py reads them (normalised, and accepted by its layout()): a change in that "
             "reading changes which rows are drawn, so runs of different days compare different rows. Ours: `roofline serving --engine ENGINE` as "
             "benchmarks/silicon_validation.py runs it (the engine's defaults, its measured kernels, its time per step "
             "and host time per op outside a CUDA graph from data/engines.toml, vLLM's time per step hidden on the rows "
             "that ran async scheduling). The peer: `aiconfigurator cli estimate --estimate-mode agg` with the row's engine "
             "and version (its default where its database lacks the version), the layout ours runs (the sample's; InferenceX's "
             "rows as their launch scripts laid them out where the sample records otherwise: its vLLM rows, benchmarks/"
             "inferencex_layouts.toml, and its TensorRT-LLM rows of 2025-11-02, inferencex_conditions.toml) and quantisation "
             "modes. Each tool's seconds a row are its own when the row ran (the peer's read from its cache of earlier runs, "
             "some of them beside other work on the same cores)" + (
                 f"; timed again in this run, one row at a time, on {args.timed[0]} of the rows both predict: ours a median "
                 f"{args.timed[1]:.2f} s a row, the peer's {args.timed[2]:.1f} s ({args.timed[2] / args.timed[1]:.0f}x)"
                 if getattr(args, "timed", None) else "") + ".", ""]
    if both:
        held = [x for x in both if x[1]["model"] not in sv.FIT_MODELS]
        lines += [f"Our time per step per engine and host time per op were fitted on the rows of {', '.join(sv.FIT_MODELS)} "
                  "(benchmarks/silicon_validation.py); the second block is the rows of the other models, which that fit "
                  "did not see.", "",
                  "| rows | tool | n | TPOT median abs. error | TPOT within 1.5x | TTFT median abs. error | seconds a row (median) |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for label, subset in (("all", both), ("held-out models", held)):
            if not subset:
                continue
            for name, pick, secs in (("roofline", lambda o, p: o["kernels+engine"], lambda o, p: o["ours_seconds"]),
                                     ("AIConfigurator", lambda o, p: p, lambda o, p: p["seconds"])):
                tp = [_err(pick(o, p)["tpot_s"], o["tpot_s"]) for r, o, p in subset]
                tf = [_err(pick(o, p)["ttft_s"], o["ttft_s"]) for r, o, p in subset]
                within = sum(1 for r, o, p in subset if 1 / 1.5 <= pick(o, p)["tpot_s"] / o["tpot_s"] <= 1.5) / len(subset)
                lines.append(f"| {label} | {name} | {len(subset)} | {statistics.median(tp):.0%} | {within:.0%} | "
                             f"{statistics.median(tf):.0%} | {statistics.median(secs(o, p) for r, o, p in subset):.2f} |")
        lines += slice_table(both)
        lines += ["", "| row | measured TPOT ms | roofline | AIConfigurator | measured TTFT ms | roofline | AIConfigurator |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r, o, p in both:
            lines.append(f"| {r['id'][:70]} | {o['tpot_s'] * 1e3:.2f} | {o['kernels+engine']['tpot_s'] * 1e3:.2f} | "
                         f"{p['tpot_s'] * 1e3:.2f} | {o['ttft_s'] * 1e3:.1f} | {o['kernels+engine']['ttft_s'] * 1e3:.1f} | "
                         f"{p['ttft_s'] * 1e3:.1f} |")
    misses = [(r, o, p) for r, o, p in zip(rows, ours, peer) if "refused" in o or "error" in p or not p]
    if misses:
        lines += ["", "## Rows one tool could not predict", "", "| row | roofline | AIConfigurator |", "| --- | --- | --- |"]
        for r, o, p in misses:
            lines.append(f"| {r['id'][:70]} | {o.get('refused', 'ok')[:120]} | "
                         f"{p.get('error', 'ok') if p else 'not run'} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
