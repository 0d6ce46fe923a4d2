"""Predicted against published serving benchmarks: every row of
data/serving_benchmarks.toml simulated with ONE set of settings (below), the ratio predicted /
published per row, summarised by source, model and metric, written to docs/serving-validation.md.
No per-case tuning: the settings are the same for every row.

    python benchmarks/serving_validation.py [--out docs/serving-validation.md] [--limit N]

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): only the first row of each kind (load at a
rate, at maximum load or at a concurrency, times each metric), ~10 rows, and the report goes to a
temporary directory, never to docs/. The figures mean nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from roofline.cost import seed_cost_model  # noqa: E402
from roofline.machines import get_machine  # noqa: E402
from roofline.plan import Precision  # noqa: E402
from roofline.serving import Engine, closed_requests, poisson_requests, simulate  # noqa: E402
from roofline.plan.step import StepCost  # noqa: E402
from smoke import SMOKE, announce, output  # noqa: E402  (benchmarks/ is on sys.path as a script)

# The one set of settings for every row (stated in the report).
MAX_SEQS = 2048  # sequences in flight at most (trtllm-bench pads CUDA graphs to batch 8192; vLLM's default is 256)
MAX_TOKENS = 8192  # tokens per step (vLLM and TensorRT-LLM defaults)
MEMORY_FRACTION = 0.95  # TensorRT-LLM's kv_cache_free_gpu_mem_fraction 0.95 (of the memory free after weights; here of all
# of it, as the driver reports it: Machine.capacity_bytes)
MAX_LOAD_REQUESTS = 2000  # "max" rows: this many requests, all queued at t = 0
RATE_REQUESTS = 500  # rows at a request rate: 500 requests (the trtllm-0.14 serving table's count), Poisson
MODELS = {"llama3.1-8b": "llama3-8b", "llama3-8b": "llama3-8b", "llama3.1-70b": "llama3-70b",
          "llama3.3-70b": "llama3-70b", "llama3-70b": "llama3-70b", "mixtral-8x7b": "mixtral-8x7b",
          "deepseek-r1": "deepseek-v3"}
# models with no preset, read from the config.json aiconfigurator-core ships (its model_configs/)
CONFIGS = {"llama3.1-405b": "meta-llama--Meta-Llama-3.1-405B_config.json"}
BLOCK_FP8 = ("deepseek-r1",)  # its own FP8 checkpoint scales weights per 128 x 128 block (config.json weight_block_size)
GPUS = {"h100-sxm": "h100-sxm", "h100": "h100-sxm", "h200": "h200", "mi300x": "mi300x", "mi325x": "mi325x",
        "mi355x": "mi355x"}
# GPUs without measured kernel tables (measured/tables.py NEAREST_MEASURED transfers the H200's onto them): their
# rows are reported apart ("Transferred kernels"), left out of the summaries of the GPUs the tables measured
TRANSFERRED = ("mi300x", "mi325x", "mi355x")
DTYPES = {"fp8": "fp8", "bf16": "bf16", "fp16": "fp16", "unknown": "bf16"}


def settings_text() -> str:
    return (f"the workshop plate's cost model (e_c 0.70, e_m 0.85, launch 3 us, a CUDA graph for decode-only steps), flash "
            f"attention, at most {MAX_SEQS:,} sequences and {MAX_TOKENS:,} tokens per step, memory fraction "
            f"{MEMORY_FRACTION:g} of the memory the driver reports (85.5 GB on an H100, 150.8 GB on an H200), blocks "
            "of 16 tokens, no prefix hits; 'fp8' as `--dtype fp8` means it: W8A8, fp8 weights, matmuls and KV cache with "
            f"bf16 activations between ops; 'max' rows: {MAX_LOAD_REQUESTS:,} requests all "
            f"queued at t = 0 (or the count a source states: 500 for trtllm-0.14-serving, each row's for dstack-r1-vllm-offline); rows at a request rate: that "
            "source's 500 requests arriving as a Poisson process; rows at a "
            "concurrency: that many users in a closed loop, 8 requests each (at least 40); dtype 'unknown' taken as bf16; "
            "'h100' as the SXM card; Llama 3.1 / 3.3 as the Llama 3 preset of the same size (the same shapes)")


THROUGHPUT = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "requests_per_s")


def run_key(r: dict, source: dict):
    rate = r.get("request_rate_per_s")
    return (r["model"], r["gpu"], r["gpus"], r["dtype"], r["input_len"], r["output_len"], str(r["concurrency"]), rate,
            r.get("requests") or source.get("requests"))


_steps: dict = {}


def model_source(model: str) -> str:
    """A row's model as StepCost reads it: our preset, or the config.json aiconfigurator-core ships."""
    if model in CONFIGS:
        from roofline.measured.tables import data_root  # refused by name where the package is missing

        return str(data_root().parent.parent / "model_configs" / CONFIGS[model])
    return MODELS[model]


def step_for(model, gpu, gpus, dtype, kernels="", max_tokens=MAX_TOKENS, max_seqs=MAX_SEQS) -> StepCost:
    """The row's step on the plate's cost model, or with ``kernels`` (ENGINE) on that engine's measured
    kernels: the GPU's own tables, or the nearest measured GPU's transferred (MeasuredKernels)."""
    key = (model, gpu, gpus, dtype, kernels, max_tokens, max_seqs)
    if key not in _steps:
        m = get_machine(GPUS[gpu])
        cm = seed_cost_model(launch_overhead_s=m.launch_overhead_s, cuda_graph=True)
        if kernels:
            from roofline.measured.model import MeasuredKernels

            cm = MeasuredKernels.for_machine(m, kernels, **{k: getattr(cm, k) for k in (
                "compute_efficiency", "memory_efficiency", "launch_overhead_s", "overlap", "cuda_graph")},
                fp8_scaling="block" if dtype == "fp8" and model in BLOCK_FP8 else "tensor")
        _steps[key] = StepCost(model_source(model), m, Precision.uniform(DTYPES[dtype], m), int(gpus), None, cm, "flash",
                               max_tokens, max_seqs)
    return _steps[key]


def engine_key(source: dict) -> str:
    """The source's engine as `--engine` names it (vllm, sglang, trtllm)."""
    first = source.get("engine", "").split()[0].lower()
    return {"tensorrt-llm": "trtllm", "nvidia": "trtllm"}.get(first, first)


def requests_for(r: dict, source: dict):
    isl, osl = int(r["input_len"]), int(r["output_len"])
    # a request count the source states (for the row, or for all its rows) is the row's condition, not a setting
    stated = r.get("requests") or source.get("requests")
    if r.get("request_rate_per_s"):
        return poisson_requests(float(r["request_rate_per_s"]), stated or RATE_REQUESTS, isl, osl)
    if str(r["concurrency"]) == "max":
        n = stated or MAX_LOAD_REQUESTS
        return closed_requests(n, n, isl, osl)
    c = int(r["concurrency"])
    return closed_requests(c, stated or max(40, 8 * c), isl, osl)


def simulate_row(r: dict, source: dict):
    step = step_for(r["model"], r["gpu"], r["gpus"], r["dtype"])
    return simulate(step, requests_for(r, source), Engine(MAX_SEQS, MAX_TOKENS, 16, MEMORY_FRACTION))


def simulate_on_kernels(r: dict, source: dict):
    """The row as `roofline serving --engine ENGINE --kernels ENGINE` runs it: the source's engine with
    its documented defaults and its time per step (data/engines.toml), its max_seqs raised to the row's
    concurrency where that is more, on the engine's measured kernels (transferred on a GPU without tables)."""
    import dataclasses

    from roofline.serving.engines import preset

    key = engine_key(source)
    p = preset(key, get_machine(GPUS[r["gpu"]]))
    engine = p.engine()
    c = 0 if str(r["concurrency"]) == "max" else int(r["concurrency"])  # at max load: the engine's own max_seqs
    engine = dataclasses.replace(engine, max_seqs=max(engine.max_seqs, c))
    step = step_for(r["model"], r["gpu"], r["gpus"], r["dtype"], p.kernels, engine.step_tokens, engine.max_seqs)
    return simulate(step, requests_for(r, source), engine)


def _load(r: dict) -> str:
    """How a row loads the engine: at a request rate, at maximum load, or at a concurrency."""
    return "rate" if r.get("request_rate_per_s") else "max" if str(r["concurrency"]) == "max" else "concurrency"


def predicted(res, metric: str, gpus: int) -> float:
    m = res.metrics()
    return {"output_tokens_per_s": m["output_tokens_per_s"], "output_tokens_per_s_per_gpu": m["output_tokens_per_s"] / gpus,
            "requests_per_s": m["requests_per_s"], "ttft_s": m["ttft_mean_s"], "itl_s": m["itl_mean_s"],
            "tpot_s": m["tpot_mean_s"], "e2e_s": m["e2e_mean_s"]}[metric]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "data" / "serving_benchmarks.toml"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "serving-validation.md"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N rows (a quick look)")
    ap.add_argument("--sources", default="", help="only these sources' rows, comma-separated (a quick look)")
    args = ap.parse_args(argv)
    announce()
    args.out = output(args.out)  # smoke mode: a temporary directory, never docs/
    doc = tomllib.loads(Path(args.data).read_text())
    rows = doc["row"]
    if args.sources:
        wanted = {x.strip() for x in args.sources.split(",")}
        rows = [r for r in rows if r["source"] in wanted]
    rows = rows[: args.limit or None]
    if SMOKE:  # the first row of each kind
        firsts: dict = {}
        for r in rows:
            firsts.setdefault((_load(r), r["metric"]), r)
        rows = list(firsts.values())
    t0 = time.perf_counter()
    cache: dict = {}
    out = []
    for i, r in enumerate(rows):
        k = run_key(r, doc["sources"][r["source"]])
        if k not in cache:
            cache[k] = _run(simulate_row, r, doc["sources"][r["source"]])
        res = cache[k]
        if isinstance(res, str):
            out.append((r, None, res))
        else:
            p = predicted(res, r["metric"], int(r["gpus"]))
            out.append((r, p, res))
        if (i + 1) % 50 == 0:
            print(f"{i + 1} rows, {len(cache)} runs, {time.perf_counter() - t0:.0f} s", flush=True)
    kernels = on_kernels(doc, rows)
    write_report(args, doc, out, time.perf_counter() - t0, len(cache), kernels)
    print(f"wrote {args.out} ({len(out)} rows, {len(cache)} simulated runs, {time.perf_counter() - t0:.1f} s)")
    return 0


def _run(fn, r: dict, source: dict):
    """fn's result for a row, or the refusal's reason (a row the model refuses is reported, not skipped)."""
    try:
        return fn(r, source)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"


def transfer_sources(rows) -> set:
    """The sources with a row on a GPU without measured tables (TRANSFERRED)."""
    return {r["source"] for r in rows if r["gpu"] in TRANSFERRED}


def on_kernels(doc, rows) -> dict:
    """{id(row): predicted value or a refusal's reason}: every row of a source that measured a GPU
    without tables, simulated on its engine's kernels (simulate_on_kernels): the H200's own, transferred
    onto the AMD GPU."""
    cache: dict = {}
    out = {}
    for r in rows:
        if r["source"] not in transfer_sources(rows):
            continue
        source = doc["sources"][r["source"]]
        k = (engine_key(source),) + run_key(r, source)  # the engine's defaults and tables: part of the run
        if k not in cache:
            cache[k] = _run(simulate_on_kernels, r, source)
        res = cache[k]
        out[id(r)] = res if isinstance(res, str) else predicted(res, r["metric"], int(r["gpus"]))
    return out


def _ratio_stats(ratios):
    """(median ratio, median |ratio - 1|, worst ratio (farthest from 1 either way), share within 15%)."""
    if not ratios:
        return "-", "-", "-", "-"
    med = statistics.median(ratios)
    err = statistics.median(abs(x - 1) for x in ratios)
    worst = max(ratios, key=lambda x: max(x, 1 / x))
    within = sum(abs(x - 1) <= 0.15 for x in ratios) / len(ratios)
    return f"{med:.2f}", f"{err:.0%}", f"{worst:.2f}", f"{within:.0%}"


def _config(r: dict) -> tuple:
    return (r["source"], r["model"], r["gpu"], r["gpus"], r["dtype"], r["input_len"], r["output_len"])


def published_capacity(rows) -> dict:
    """Requests/s each configuration served at maximum load, as its own source published it."""
    return {_config(r): r["value"] for r in rows
            if r["metric"] == "requests_per_s" and not r.get("request_rate_per_s") and str(r.get("concurrency")) == "max"}


def past_capacity(r: dict, caps: dict) -> float | None:
    """The published maximum-load rate of a row offered at least that rate (None otherwise): the
    published system could not keep up, so its latency is a queue that grows for as long as the
    run lasts (500 requests), not a steady state."""
    cap = caps.get(_config(r))
    rate = r.get("request_rate_per_s")
    return cap if rate and cap and rate >= cap else None


def write_report(args, doc, out, seconds, runs, kernels=None):
    amd = [(r, p) for r, p, _ in out if r["source"] in transfer_sources(r for r, _, _ in out)]
    out_all, out = out, [x for x in out if x[0]["gpu"] not in TRANSFERRED]
    ok = [(r, p) for r, p, _ in out if p is not None and math.isfinite(p) and r["value"] > 0]
    caps = published_capacity(r for r, _, _ in out)
    below = [p / r["value"] for r, p in ok if past_capacity(r, caps) is None]
    past = sorted(p / r["value"] for r, p in ok if past_capacity(r, caps) is not None)
    past_range = f"{past[0]:.2f}-{past[-1]:.2f}" if past else "none"
    b_med, b_err, b_worst, b_within = _ratio_stats(below)
    refused = [(r, why) for r, p, why in out if p is None]
    ratios = [p / r["value"] for r, p in ok]
    med, err, worst, within = _ratio_stats(ratios)
    # in the direction of performance: > 1 means the model promises more than the engine delivered
    optimism = sorted((p / r["value"]) if r["metric"] in THROUGHPUT else (r["value"] / p) for r, p in ok)
    optimism = optimism or [math.nan]  # (a run of AMD sources alone: --sources)
    opt_med = statistics.median(optimism)
    opt_p90 = optimism[min(len(optimism) - 1, int(0.9 * len(optimism)))]
    opt_share = sum(x > 1 for x in optimism) / len(optimism)
    lines = [
        "# Serving: predicted against published benchmarks",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with `python benchmarks/serving_validation.py` ({runs} simulated runs for "
        f"{len(out)} published rows in {seconds:.0f} s). Ratio = predicted / published; the rows are "
        "`data/serving_benchmarks.toml`, each citing its source.",
        "",
        f"One set of settings for every row: {settings_text()}.",
        "",
        f"**All rows: median ratio {med}, median error {err}, worst ratio {worst}, {within} within 15%** ({len(ok)} rows; "
        f"{len(refused)} refused by the model, listed at the end; the rows on GPUs without measured tables, AMD's, are "
        "reported apart under 'Transferred kernels' and left out of every summary before it).",
        "",
        f"**Rows below the published system's own capacity: median ratio {b_med}, median error {b_err}, worst ratio "
        f"{b_worst}, {b_within} within 15%** ({len(below)} rows). The other {len(ok) - len(below)} are latencies at an "
        "offered rate at or above the requests/s the same source measured for that configuration at maximum load (marked "
        "'past capacity' below): the published system was not keeping up, so its TTFT and ITL are a queue that grows for "
        "as long as the run lasts, which a steady-state comparison cannot match (near a capacity the model puts a few "
        f"per cent higher, the ratio runs low: {past_range} over those rows). They stay in every table.",
        "",
        f"**The bias is one-sided.** In the direction of performance (predicted / published for throughput, published / "
        f"predicted for latencies: above 1, the model promises more than the engine delivered), {opt_share:.0%} of the rows "
        f"are optimistic; median {opt_med:.2f}x, 90th percentile {opt_p90:.2f}x, worst {optimism[-1]:.2f}x. Read the "
        "model as an optimistic bound on what an engine delivers, closest for single-GPU throughput at maximum load.",
        "",
        f"The settings are the validation's, not the CLI defaults (`roofline serving` defaults to 256 sequences and a "
        f"memory fraction of 0.9, vLLM's; here {MAX_SEQS:,} and {MEMORY_FRACTION:g}).",
        "",
        "## By source and metric",
        "",
        "| source | engine, version | metric | rows | median ratio | median error | worst | within 15% |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    groups: dict = {}
    for r, p in ok:
        groups.setdefault((r["source"], r["metric"]), []).append(p / r["value"])
    for (src, metric), rs in sorted(groups.items()):
        s = doc["sources"][src]
        lines.append(f"| {src} | {s.get('engine', '')} {s.get('version', '')} | {metric} | {len(rs)} | "
                     + " | ".join(_ratio_stats(rs)) + " |")
    lines += ["", "## By model, GPU and precision (every metric)", "",
              "| model | GPU | dtype | rows | median ratio | median error | worst | within 15% |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    groups = {}
    for r, p in ok:
        groups.setdefault((r["model"], r["gpu"], r["dtype"]), []).append(p / r["value"])
    for (model, gpu, dtype), rs in sorted(groups.items()):
        lines.append(f"| {model} | {gpu} | {dtype} | {len(rs)} | " + " | ".join(_ratio_stats(rs)) + " |")
    lines += ["", "## What explains the misses", ""] + explain(ok, past)
    if amd:
        lines += [""] + transferred_section(doc, amd, kernels or {})
    out = out_all
    lines += ["", "## Every row", "",
              "| source | model | GPU x n | dtype | ISL / OSL | load | metric | published | predicted | ratio |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r, p, res in out:
        load = f"{r['request_rate_per_s']:g} req/s" if r.get("request_rate_per_s") else str(r["concurrency"])
        cap = past_capacity(r, caps)
        if cap is not None:
            load += f" (past capacity: {cap:g} served)"
        pred = "refused" if p is None else _fmt(p, r["metric"])
        ratio = "-" if p is None or not r["value"] else f"{p / r['value']:.2f}"
        lines.append(f"| {r['source']} | {r['model']} | {r['gpu']} x {r['gpus']} | {r['dtype']} | {r['input_len']} / "
                     f"{r['output_len']} | {load} | {r['metric']} | {_fmt(r['value'], r['metric'])} | {pred} | {ratio} |")
    if refused:
        lines += ["", "## Refused by the model", ""]
        for why in sorted({w for _, w in refused}):
            n = sum(1 for _, w in refused if w == why)
            lines.append(f"- {n} rows: {why}")
    lines += ["", "## Sources", ""]
    for key, s in doc["sources"].items():
        lines.append(f"- `{key}`: {s.get('title', '')}, {s.get('url', '')} ({s.get('engine', '')} {s.get('version', '')}, "
                     f"date {s.get('date', 'unknown')}). Method: {s.get('method', '')}")
    Path(args.out).write_text("\n".join(lines) + "\n")


def _err_stats(ratios) -> str:
    """'median |error| | share within 1.5x | median ratio' of predicted / published ratios."""
    if not ratios:
        return "- | - | -"
    within = sum(1 / 1.5 <= x <= 1.5 for x in ratios) / len(ratios)
    return f"{statistics.median(abs(x - 1) for x in ratios):.0%} | {within:.0%} | {statistics.median(ratios):.2f}"


def transferred_section(doc, amd, kernels: dict) -> list[str]:
    """The rows of the sources that measured a GPU without tables: on the plate, and on the engine's
    kernels (the H200's own on an H200, transferred onto the AMD GPU), side by side."""
    def ratio(r, p):
        return p / r["value"] if isinstance(p, float) and math.isfinite(p) and r["value"] > 0 else None

    lines = ["## Transferred kernels (H200's) on MI300X", "",
             "The rows of the sources that measured an AMD GPU, which no kernel table measured, each simulated twice "
             "with one set of settings: `plate`, as every row above; `kernels`, as `roofline serving --engine ENGINE "
             "--kernels ENGINE` runs it (the source's engine with its documented defaults and its time per step from "
             "data/engines.toml, max_seqs raised to the row's concurrency where that is more, on that engine's measured "
             "kernels: on an H200 its own tables, on an MI300X the H200's with each op's efficiency at its shape applied "
             "to the MI300X's roofline, measured/tables.py NEAREST_MEASURED). Nothing is fitted to these rows. Error = "
             "|predicted / published - 1|; ratio = predicted / published.", "",
             "| source | GPU | kernels | metric | rows | plate: median error | within 1.5x | median ratio | "
             "kernels: median error | within 1.5x | median ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    groups: dict = {}
    for r, p in amd:
        groups.setdefault((r["source"], r["gpu"], r["metric"]), []).append((r, p, kernels.get(id(r))))
    for (src, gpu, metric), g in sorted(groups.items()):
        plate = [x for x in (ratio(r, p) for r, p, _ in g) if x is not None]
        kern = [x for x in (ratio(r, k) for r, _, k in g) if x is not None]
        how = "transferred from h200" if gpu in TRANSFERRED else "own tables"
        lines.append(f"| {src} | {gpu} | {how} | {metric} | {len(g)} | {_err_stats(plate)} | {_err_stats(kern)} |")
    for gpus, label in ((TRANSFERRED, "**all AMD rows (transferred)**"), (("h200",), "**same sources' H200 rows (own)**")):
        sel = [(r, p, kernels.get(id(r))) for r, p in amd if r["gpu"] in gpus]
        if sel:
            plate = [x for x in (ratio(r, p) for r, p, _ in sel) if x is not None]
            kern = [x for x in (ratio(r, k) for r, _, k in sel) if x is not None]
            lines.append(f"| {label} | | | every metric | {len(sel)} | {_err_stats(plate)} | {_err_stats(kern)} |")
    lines += ["", "Where the transfer holds and where it loses:", ""] + transfer_explain(amd, kernels, ratio)
    lines += ["", "| source | model | GPU x n | ISL / OSL | load | metric | published | plate | kernels | plate ratio | "
              "kernels ratio |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    refused = {}
    for r, p in amd:
        k = kernels.get(id(r))
        for name, v in (("plate", p), ("kernels", k)):
            if not isinstance(v, float):
                refused.setdefault(f"{name}: {v}", []).append(r)
        show = [_fmt(v, r["metric"]) if isinstance(v, float) else "refused" for v in (p, k)]
        rat = [f"{x:.2f}" if x is not None else "-" for x in (ratio(r, p), ratio(r, k))]
        lines.append(f"| {r['source']} | {r['model']} | {r['gpu']} x {r['gpus']} | {r['input_len']} / {r['output_len']} | "
                     f"{r['concurrency']} | {r['metric']} | {_fmt(r['value'], r['metric'])} | {show[0]} | {show[1]} | "
                     f"{rat[0]} | {rat[1]} |")
    if refused:
        lines += ["", "Refused:", ""] + [f"- {len(rs)} rows: {why}" for why, rs in sorted(refused.items())]
    return lines


def transfer_explain(amd, kernels: dict, ratio) -> list[str]:
    """The transferred rows' misses by source, with the term each points at (figures from this run)."""
    def med(sel, gpu):
        rs = [x for x in (ratio(r, kernels.get(id(r))) for r, _ in amd if r["gpu"] == gpu and sel(r)) if x is not None]
        return (statistics.median(rs), len(rs)) if rs else (math.nan, 0)

    def pub(gpu, metric, conc):
        return next((r["value"] for r, _ in amd if r["source"] == "dstack-r1-vllm" and r["gpu"] == gpu
                     and r["metric"] == metric and r["concurrency"] == conc and r["output_len"] == 800), math.nan)

    llama70 = med(lambda r: r["source"].startswith("amd-perf"), "mi300x")
    l405 = med(lambda r: r["source"] == "oci-405b-mi300x" and r["metric"] == "e2e_s", "mi300x")
    l405_max = med(lambda r: r["source"] == "oci-405b-mi300x" and r["metric"] != "e2e_s", "mi300x")
    r1 = {(g, m): med(lambda r, m=m: r["source"] == "dstack-r1-vllm" and r["metric"] == m, g)
          for g in ("mi300x", "h200") for m in ("tpot_s", "ttft_s", "output_tokens_per_s")}
    tpot_amd, tpot_nv = pub("mi300x", "tpot_s", 4) * 1e3, pub("h200", "tpot_s", 4) * 1e3
    off = {g: med(lambda r: r["source"] == "dstack-r1-vllm-offline", g) for g in ("mi300x", "h200")}
    sg = med(lambda r: r["source"] == "dstack-r1-sglang" and r["metric"] == "tpot_s", "mi300x")
    pub_sg = next((r["value"] * 1e3 for r, _ in amd if r["source"] == "dstack-r1-sglang" and r["metric"] == "tpot_s"
                   and r["concurrency"] == 4), math.nan)
    top = {g: max((r["value"] for r, _ in amd if r["source"] == "dstack-r1-vllm-offline" and r["gpu"] == g
                   and r["output_len"] == 800), default=math.nan) for g in ("mi300x", "h200")}
    from roofline.serving.engines import preset

    overhead_s = preset("vllm", get_machine("mi300x")).settings["step_overhead_s"]
    # the engine's time per step as a share of the predicted step (e2e / output tokens) on the Llama 3.1 70B rows
    shares = [overhead_s * r["output_len"] / kernels[id(r)] for r, _ in amd
              if r["source"].startswith("amd-perf") and isinstance(kernels.get(id(r)), float)]
    share = f"{statistics.median(shares):.0%}" if shares else "-"
    batch = sorted(((int(r["concurrency"]), r["value"], kernels.get(id(r))) for r, _ in amd
                    if r["source"] == "oci-405b-mi300x" and r["metric"] == "e2e_s" and isinstance(kernels.get(id(r)), float)))
    growth = (f"published {batch[-1][1] / batch[0][1]:.1f}x from batch {batch[0][0]} to {batch[-1][0]}, predicted "
              f"{batch[-1][2] / batch[0][2]:.1f}x") if len(batch) > 1 else "no rows"
    return [
        f"- **Dense Llama on AMD's own vLLM builds holds**: Llama 3.1 70B FP8 on 8 MI300X (AMD's page, vLLM 0.8.5 and "
        f"0.10.2, batch 1-4, 128 in / 2,048 out) runs at a median {llama70[0]:.2f} of the published latency over "
        f"{llama70[1]} rows, a little {'slow' if llama70[0] >= 1 else 'fast'}; the engine's own time per step ({overhead_s * 1e3:.2f} ms, fitted on NVIDIA "
        f"deployments, carried over unchanged) is {share} of the predicted step there. Llama 3.1 405B FP8 (Oracle's "
        f"blog, a vLLM of October 2024, batch 1-256, 128 / 128): {l405[0]:.2f} over {l405[1]} rows, fast by more as the "
        f"batch grows ({growth}); its two maximum-load throughputs are promised {l405_max[0]:.2f}x what the run gave, "
        "and the blog states no engine settings (batch limits, scheduler), which the engine's defaults stand in for.",
        f"- **DeepSeek-R1 on vLLM 0.7 builds loses, on both GPUs**: the same client and grid (dstack) gives the H200, on "
        f"its own tables, TPOT at a median {r1[('h200', 'tpot_s')][0]:.2f} of measured, the MI300X, on the H200's "
        f"transferred, {r1[('mi300x', 'tpot_s')][0]:.2f}. Published, the MI300X's step at concurrency 4 is {tpot_amd:.1f} "
        f"ms against the H200's {tpot_nv:.1f} ms ({tpot_amd / tpot_nv:.1f}x) with 1.1x the bandwidth; the transfer gives "
        "the MI300X the H200's share of its roofline for every GEMM, MoE and attention kernel and so a step as short as "
        "the H200's. Two terms, the engine build on both GPUs and the transfer on the MI300X: the tables hold vLLM "
        "0.24.0's kernels (its block-fp8 projections at the graph-timed rows' time: measured.gemm.EAGER_ROWS), these "
        "runs vLLM 0.7 builds of February 2025, whose decode step on the H200 (0.7.4 on CUDA) took "
        f"{1 / r1[('h200', 'tpot_s')][0]:.1f}x what those kernels put it at, and on the MI300X (the ROCm build 0.7.3, "
        f"rocm/vllm-dev:vllm-ds3-staging-0217) {1 / r1[('mi300x', 'tpot_s')][0]:.1f}x what the transferred ones do. "
        "A GPU's efficiencies carry over only where its engine's kernels are as mature as the measured GPU's; a "
        "calibration on the GPU itself (`roofline calibrate`) replaces the transfer. On SGLang's tables the "
        f"MI300X's SGLang 0.4.2 rows run at {sg[0]:.2f} of their TPOT ({sg[1]} rows). That miss cannot be split "
        "between the transfer and the engine build: the H200's SGLang run of the same CSV used data-parallel "
        "attention, a layout not mapped here, and published a mean TPOT of 43.58 ms at concurrency 4, slower than "
        f"the MI300X's {pub_sg:.2f} ms: the engine build, not the GPU, set these steps.",
        f"- **TTFT on DeepSeek-R1 is missed on both GPUs alike** ({r1[('h200', 'ttft_s')][0]:.2f} on the H200's own "
        f"tables, {r1[('mi300x', 'ttft_s')][0]:.2f} transferred): the published first tokens wait seconds in the server "
        "at every concurrency (1.0-1.3 s at 4 in flight for a 3,200-token prompt whose prefill the tables put at "
        "0.3 s; 67 s on the H200 at 128): something in the served path that no kernel table holds (vLLM 0.7's "
        "DeepSeek prefill, or the server's queue), not the transfer; output throughput follows (H200 "
        f"{r1[('h200', 'output_tokens_per_s')][0]:.2f}, MI300X {r1[('mi300x', 'output_tokens_per_s')][0]:.2f}).",
        f"- **At maximum load the transfer adds nothing**: dstack's offline runs (32-1,024 prompts at once) are promised "
        f"{off['h200'][0]:.2f}x their requests/s on the H200's own tables ({off['h200'][1]} rows) and {off['mi300x'][0]:.2f}x on "
        f"the MI300X, transferred ({off['mi300x'][1]} rows): a miss common to both GPUs, not the transfer's (the tables hold "
        "vLLM 0.24.0's kernels, these runs used vLLM 0.7 builds a year older, on both GPUs). Published, the MI300X serves "
        f"more there than the H200 ({top['mi300x']:.2f} against {top['h200']:.2f} requests/s at 3,200 / 800), so the ROCm "
        "build's shortfall above is at small batches, where a step is most likely its kernels' floors and latencies "
        "more than its bandwidth.",
        "- Not a model term but a condition: of the sources, AMD's page (two revisions) and Oracle's blog are the "
        "vendor's and its cloud partner's; only dstack measured both vendors with one client. AMD's page also has a max-load throughput "
        "table, left out: its 'Throughput (tokens/s)' does not say whether input tokens count.",
    ]


def explain(ok, past=()) -> list[str]:
    """The misses by kind of row, with the term of the model each points at (figures from this run;
    ``past``: the ratios of the rows offered past the published capacity, sorted)."""
    def med(sel):
        rs = [p / r["value"] for r, p in ok if sel(r)]
        return (f"median ratio {statistics.median(rs):.2f} over {len(rs)} rows" if rs else "no rows"), rs

    def low_load(r):
        return r.get("request_rate_per_s", 99) <= 8 or str(r["concurrency"]) in ("1", "5", "8")

    low, _ = med(lambda r: r["metric"] in ("ttft_s", "itl_s", "e2e_s", "tpot_s") and low_load(r))
    # what the published inter-token latency at low load adds to the model's step: the time per step an engine
    # spends beyond the GPU's roofline work (its own scheduling and sampling, kernels' floors), in ms
    gaps = sorted((r["value"] - p) / 1e-3 for r, p in ok if r["metric"] == "itl_s" and low_load(r))
    if gaps:
        q1, q3 = gaps[len(gaps) // 4], gaps[(3 * len(gaps)) // 4]
        gap_text = (f" Over the {len(gaps)} inter-token latencies at low load, the published step is longer than the "
                    f"model's by a median {statistics.median(gaps):.2f} ms (middle half {q1:.2f}-{q3:.2f} ms): the engine "
                    "time per step that `roofline serving --step-overhead` adds when a user knows their engine's (the "
                    "validation keeps it 0, one setting for every row).")
    else:
        gap_text = ""
    dense8, _ = med(lambda r: r["metric"] == "output_tokens_per_s" and str(r["concurrency"]) == "max"
                    and r["model"] == "llama3.1-8b" and r["dtype"] == "fp8")
    dense70, _ = med(lambda r: r["metric"] == "output_tokens_per_s" and str(r["concurrency"]) == "max"
                     and "70b" in r["model"] and r["dtype"] == "fp8")
    moe, _ = med(lambda r: r["metric"] == "output_tokens_per_s" and str(r["concurrency"]) == "max" and r["model"] == "mixtral-8x7b")
    sat, _ = med(lambda r: r["source"] == "trtllm-0.14-serving" and r.get("request_rate_per_s", 0) >= 16
                 and r["metric"] in ("ttft_s", "itl_s"))
    serve_max, _ = med(lambda r: r["source"] == "trtllm-0.14-serving" and str(r["concurrency"]) == "max"
                       and r["metric"] in THROUGHPUT)
    dstack_ttft, dstack_rs = med(lambda r: r["source"].startswith("dstack-") and r["metric"] == "ttft_s")
    dstack_itl, _ = med(lambda r: r["source"].startswith("dstack-") and r["metric"] in ("itl_s", "tpot_s"))
    dstack_worst = max((r["value"] for r, p in ok if r["source"].startswith("dstack-") and r["metric"] == "ttft_s"),
                       default=0.0)

    def by_tp(model):
        out = []
        for t in (1, 2, 4, 8):
            rs = sorted(p / r["value"] for r, p in ok if r["metric"] == "output_tokens_per_s" and str(r["concurrency"]) == "max"
                        and model(r["model"]) and r["dtype"] == "fp8" and int(r["gpus"]) == t)
            if rs:
                out.append(f"TP{t} {rs[0]:.2f}-{rs[-1]:.2f} (median {statistics.median(rs):.2f})")
        return "; ".join(out)

    return [
        f"- **Latency at low load** (TTFT, ITL and end-to-end at 2-8 requests/s or 1-8 in flight): {low}. The model "
        "is faster than every engine here. Its step is the GPU's work alone (weights at e_m 0.85 of the bandwidth, a "
        "CUDA graph launch, and inside the graph each kernel costs only its roofline time: the 1-3 us a real kernel "
        "takes at the least is not counted, which for a model of ~1,500 kernels a step is milliseconds); what it "
        "leaves out too is the engine's own time per step (scheduling, sampling, "
        "detokenising and streaming through the server; TTFT also the request's parsing and tokenisation), a few ms "
        "per step at batch 1-8, and decode GEMMs at small batch reaching less than 0.85 of the bandwidth (an ITL of "
        "7 ms for 16 GB of Llama 3.1 8B weights is 2.3 TB/s, 0.69 of the H100's 3.35 TB/s)." + gap_text,
        f"- **Maximum-load throughput, dense FP8**: Llama 3.1 8B {dense8}; 70B {dense70}. By tensor-parallel size, "
        f"70B: {by_tp(lambda m: '70b' in m)}. Two terms brought these rows in (2026-12-01), each a fact about the "
        "engines rather than a fitted factor. The KV cache is sized from the memory the driver reports (an '80 GB' "
        "H100 has 81,559 MiB = 85.5e9 B; a 141 GB H200, 143,771 MiB = 150.8e9 B, from 2026-12-04): with the datasheet's "
        "80e9 the 70B rows on one H100 ran 0.16-0.42, their cache 5 GB short when the weights nearly fill the card. And FP8 is priced as the engines run it, W8A8 with "
        "bf16 activations between ops, so norms, residual adds and the tensor-parallel all-reduces move bf16: with "
        "fp8 there the TP8 median was 1.50, the all-reduces and small kernels half their real size. What is left "
        "still grows with TP: the GEMMs of a 1/t slice, whose smaller N runs below the e_c 0.70 the model keeps for "
        "every size, and the small kernels of a step (norms, RoPE, activations, residual adds: ~10 a layer), each "
        "costed at its roofline time inside the CUDA graph although a kernel takes a few us at the least; at TP8 "
        "they are a larger share of a shorter step.",
        f"- **Mixture of experts** (Mixtral 8x7B FP8, maximum load): {moe}; {by_tp(lambda m: m == 'mixtral-8x7b')}. "
        "The same growth with TP, on top of expert GEMMs costed as one GEMM over the routed rows at e_c 0.70 with "
        "uniform routing; grouped expert kernels and their imbalance run below that, which the model does not yet "
        "know.",
        f"- **Near saturation** (trtllm-0.14-serving at 16-32 requests/s): {sat}. Where the published system is "
        f"already queueing (its TTFT in seconds) and the model is not, the ratio runs to {past[0] if past else float('nan'):.2f} "
        "over the rows offered past the published capacity. That source's maximum-load throughput "
        f"({serve_max}) shows where: its 202/214-token rows run at 2.0, "
        "because the published request rate barely moves from its 467/256-token rows (Llama 3.1 8B on an H100: 39 "
        "against 37 requests/s) while the model's doubles with half the tokens per request. Something per request "
        "caps the served rate (the served path's own time per request through Triton's TensorRT-LLM backend, or a "
        "batch limit the page does not state), which a model of the engine's GPU work cannot see; near saturation "
        "the queue amplifies it.",
        *([f"- **dstack's DeepSeek-R1 on the H200, time to first token** ({dstack_ttft}; its inter-token latencies "
           f"{dstack_itl}): published TTFTs of up to {dstack_worst:,.0f} s at the larger concurrencies are a queue "
           "(no prefill takes minutes): requests waiting to be admitted, most likely by a limit on running sequences "
           "or cache the source does not state, where the model's closed loop admits each user at once: the lowest ratios of the whole "
           "table, and the tail of the optimism above. A row kept as published, read as the queue it measures."]
          if dstack_rs else []),
        "- Not a model term but a condition: NVIDIA's own pages give most rows (TensorRT-LLM and NIM, which runs it); "
        "vLLM's CI gives 6. Versions of one page differ by a few per cent for the same configuration.",
    ]


def _fmt(v: float, metric: str) -> str:
    if metric.endswith("_s") and metric not in ("output_tokens_per_s", "requests_per_s", "output_tokens_per_s_per_gpu"):
        return f"{v * 1e3:,.1f} ms"
    return f"{v:,.1f}"


if __name__ == "__main__":
    sys.exit(main())
