"""The disaggregated rows (``mode == disagg``) of aiconfigurator-core's ``systems/silicon_sample.csv``
for benchmarks/silicon_validation.py: each a Dynamo deployment of P prefill and D decode workers,
each worker its own layout, driven by a closed loop of the row's concurrency, with its measured
mean TTFT and TPOT; simulated by ``simulate_disaggregated`` with the aggregated rows' one set of
settings (silicon_validation: the engine as it runs, its measured kernels, its time per step from
data/engines.toml), nothing fitted on these rows. Reported in a section of its own.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import time
from collections import defaultdict

import silicon_validation as sv

# aiconfigurator's own estimator needs these to run a disagg row, "older dumps lack them"
# (ai-dynamo/aiconfigurator tools/accuracy_tracking/make_silicon_refs.py, REQUIRED_DISAGG_FIELDS)
REQUIRED = ("prefill_batch_size", "prefill_num_workers", "decode_batch_size", "decode_num_workers")
POOL_KEYS = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
ROUTER = "round-robin"  # Dynamo's default --router-mode (docs.nvidia.com/dynamo/v1.2.0/user-guides/kv-cache-aware-routing)
# engines whose sequence and token budgets hold per attention-DP rank (each rank its own scheduler and KV cache: Dynamo's
# DP Rank Routing page, docs.nvidia.com/dynamo/v1.3.0/additional-resources/tensor-rt-llm-details/dp-rank-routing; vLLM's
# data-parallel ranks are engine cores of their own); SGLang's --chunked-prefill-size and --max-running-requests are the
# worker's, divided among its ranks (sglang server_args.py _handle_data_parallelism: chunked_prefill_size // dp_size)
RANK_BUDGETS = ("trtllm", "vllm")
# the closed loop stops when no arrival moves by more than this share of the mean end-to-end latency: each pass
# reruns every pool, and on rows of thousands of users the last passes move the means by under 0.1%
# Requests a user in the disaggregated rows' closed loop: 4, where the aggregated rows run aiperf's 20
# (silicon_validation.REQUESTS_PER_USER). At 20 a user the largest rows' fixed-point runs outgrew this 23 GB machine
# (a worker killed for memory at 13 GB, 2026-12-07, after 100 minutes): the disaggregated figures stay at 4 until
# that memory is looked into (not yet: which row and which structure grew is not known).
REQUESTS_PER_USER = 4
TOLERANCE = 0.01
FIRST_TOKEN = "decode"  # Dynamo streams the decode worker's tokens (docs/design_docs/disagg_serving.md: "Decode -->> Frontend")


def settings_text() -> str:
    return ("each row's KV cache as the aggregated rows' (silicon_validation.kv_cache_dtype: the engine's 'auto' on the "
            "checkpoint the row names); each row's P prefill and D decode workers (`prefill_num_workers`, `decode_num_workers`), each pool in its own "
            "layout as the aggregated rows map one (`prefill_*`/`decode_*` tp, attention-DP, MoE tp/ep), on the same GPU; "
            "each worker the row's engine as it runs by default with its measured kernels and its time per step from "
            "data/engines.toml (`kernels+engine`; nothing fitted on these rows); each worker's max sequences and token "
            "budget the engine's defaults, per attention-DP rank for TensorRT-LLM and vLLM (a scheduler a rank), for the "
            "worker for SGLang (it divides them among its ranks), the sequences raised to the row's batch x attention-DP "
            "where that is more (`prefill_batch_size`, 1 in "
            "every row: aiconfigurator's adapters assume 1 where a deployment declares no max batch, "
            "sdk/config_adapter/dynamo.py _worker_settings, so it is not read as the worker's limit; "
            "`decode_batch_size`, aiconfigurator's concurrency / (workers x attention-DP)), and an engine that feeds "
            "whole prompts its prefill worker's token budget raised to one prompt; a closed loop of the row's "
            f"`silicon_concurrency` users, {REQUESTS_PER_USER} requests a user (at least {sv.MIN_REQUESTS}), run to a "
            f"fixed point over both pools (until no arrival moves by more than {TOLERANCE:g} of the mean end-to-end "
            f"latency); requests spread {ROUTER} (Dynamo's default router); the KV cache sent over the "
            "GPU's scale-out network (InfiniBand: a GB200 NVL72's NVLink between workers is not assumed), the smaller "
            "group's GPUs each sending a shard; the client's tokens streamed from the decode worker (Dynamo's flow), so "
            "TTFT is the prefill, its queue, the transfer and the decode worker's first step")


def read_rows(path) -> list[dict]:
    import csv

    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["mode"] == "disagg"]


def concurrency(r: dict) -> int | None:
    m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
    return int(m.group(1)) if m else None


def pools(r: dict):
    """((prefill layout, decode layout), concurrency) as silicon_validation.layout gives one, or a
    refusal's reason (a str)."""
    missing = [k for k in REQUIRED if not r[k]]
    if missing:
        return (f"the row states no {', '.join(missing)} (aiconfigurator's own estimator refuses these rows too: "
                "an older dump)")
    c = concurrency(r)
    if c is None:
        return "the row states no silicon_concurrency"
    got = []
    for pool in ("prefill", "decode"):
        one = sv.layout({**r, **{k: r[f"{pool}_{k}"] for k in POOL_KEYS}})
        if isinstance(one, str):
            return one if one.startswith("no ") else f"{pool} pool: {one}"
        got.append(one)
    return tuple(got), c


def engines(r: dict, layouts, overhead_s: float, ahead: int | None = None):
    """(prefill Engine, decode Engine) for the row's engine on its GPU, as settings_text says; ``ahead`` the steps its
    scheduler plans ahead where the row says (vLLM's async scheduling), else the engine's default."""
    from roofline.machines import get_machine
    from roofline.serving.engines import preset

    machine, isl = layouts[0][1], sv._int(r["isl"])
    out = []
    for (_, _, _, gpus, ep, _), batch in zip(layouts, (r["prefill_batch_size"], r["decode_batch_size"])):
        ranks = gpus // ep[0] if ep else 1  # attention-DP ranks: the expert-parallel group's attention groups
        defaults = preset(r["backend"], get_machine(machine), gpus, attention_dp=ranks).engine(step_overhead_s=overhead_s)
        per_rank = ranks if r["backend"] in RANK_BUDGETS else 1
        seqs = max(defaults.max_seqs * per_rank, sv._int(batch) * ranks)
        if not out:  # prefill: a whole prompt must fit an engine that does not chunk
            tokens = max(defaults.max_tokens, 0 if defaults.chunked_prefill else isl) * per_rank
        else:
            tokens = max(defaults.max_tokens * per_rank, seqs if defaults.mixed_steps else 0)
        e = dataclasses.replace(defaults, max_seqs=seqs, max_tokens=tokens,
                                schedule_ahead=defaults.schedule_ahead if ahead is None else ahead)
        out.append(e)
    return tuple(out)


def _pool_label(label: str, gpus: int) -> str:
    """A pool's layout with its GPU count: TP8, EP16, "TP, MoE EP8"; a mixed layout names its own sizes."""
    return f"{label}{gpus}" if label in ("TP", "EP", "TP, MoE EP") else f"({label})"


def run_row(r: dict, overheads: dict) -> dict:
    """One disagg row on the engine's kernels with its time per step: predicted mean TTFT and TPOT
    (s), or the refusal's reason."""
    from roofline.errors import RooflineError
    from roofline.serving import closed_requests, simulate_disaggregated

    out = {"id": r["id"], "ttft_s": float(r["silicon_ttft_ms"]) / 1e3, "tpot_s": float(r["silicon_tpot_ms"]) / 1e3}
    got = pools(r)
    if isinstance(got, str):
        return {**out, "refused": got}
    layouts, c = got
    (model, machine, dtype, pg, pep, plabel), (_, _, _, dg, dep, dlabel) = layouts
    P, D, isl, osl = sv._int(r["prefill_num_workers"]), sv._int(r["decode_num_workers"]), sv._int(r["isl"]), sv._int(r["osl"])
    kv, _ = sv.kv_cache_dtype(r)
    out.update(model=model, machine=machine, dtype=dtype, engine=r["backend"], concurrency=c, gpus=P * pg + D * dg, isl=isl, osl=osl,
               layout=f"{P}x{_pool_label(plabel, pg)} + {D}x{_pool_label(dlabel, dg)}", kv_cache=kv)
    t0 = time.perf_counter()
    try:
        # vLLM's async scheduling hides its time per step (silicon_validation.vllm_async: the row's version's default)
        hidden = r["backend"] == "vllm" and sv.vllm_async(r, {})[0]
        out["async_scheduling"] = hidden
        pe, de = engines(r, layouts, 0.0 if hidden else overheads[r["backend"]],
                         int(hidden) if r["backend"] == "vllm" else None)
        kernels = sv.kernels_for(r, machine)
        block = dtype == "fp8" and r["model_path"] in sv.BLOCK_FP8
        steps = [sv._step(model, machine, dtype, g, ep, kernels, e.max_seqs, e.step_tokens, block, kv, r["backend"])
                 for (_, _, _, g, ep, _), e in zip(layouts, (pe, de))]
        res = simulate_disaggregated(steps[0], steps[1], closed_requests(c, max(sv.MIN_REQUESTS, REQUESTS_PER_USER * c),
                                                                         isl, osl),
                                     pe, de, P, D, router=ROUTER, first_token=FIRST_TOKEN, tolerance=TOLERANCE)
    except RooflineError as exc:
        return {**out, "refused": str(exc)}
    m = res.metrics()
    out["kernels+engine"] = {"ttft_s": m["ttft_mean_s"], "tpot_s": m["tpot_mean_s"], "kernels": kernels,
                             "passes": res.settings["closed_loop_passes"],
                             "kv_transfer_s": res.settings["kv_transfer_mean_s"]}
    out["seconds"] = time.perf_counter() - t0
    return out


def _share(ratios, lo, hi) -> float:
    return sum(1 for x in ratios if lo <= x <= hi) / len(ratios)


def headline(done: list[dict]) -> str:
    """Median |error| of TPOT and TTFT, each's share within 1.5x and beyond 2x, and median ratio."""
    parts = []
    for what in ("tpot", "ttft"):
        ratio = [d["kernels+engine"][f"{what}_s"] / d[f"{what}_s"] for d in done]
        parts.append(f"{what.upper()} median |error| {statistics.median(abs(x - 1) for x in ratio):.0%} (median ratio "
                     f"{statistics.median(ratio):.2f}, {_share(ratio, 1 / 1.5, 1.5):.0%} within 1.5x, "
                     f"{1 - _share(ratio, 0.5, 2.0):.0%} beyond 2x)")
    return "; ".join(parts)


def table(title: str, done: list[dict], key) -> list[str]:
    groups = defaultdict(list)
    for d in done:
        groups[key(d)].append(d)
    out = [f"### Disaggregated, by {title}", "", f"| {title} | rows | TPOT err | TPOT in 1.5x | TPOT ratio | TTFT err | "
           "TTFT in 1.5x | TTFT ratio |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k in sorted(groups, key=str):
        g, cells = groups[k], []
        for what in ("tpot", "ttft"):
            ratio = [d["kernels+engine"][f"{what}_s"] / d[f"{what}_s"] for d in g]
            cells += [f"{statistics.median(abs(x - 1) for x in ratio):.0%}", f"{_share(ratio, 1 / 1.5, 1.5):.0%}",
                      f"{statistics.median(ratio):.2f}"]
        label = " ".join(map(str, k)) if isinstance(k, tuple) else str(k)
        out.append(f"| {label} | {len(g)} | " + " | ".join(cells) + " |")
    return out + [""]


def report(results: list[dict], wall_s: float, overheads: dict) -> list[str]:
    """The disaggregated section of the report."""
    skipped = [d for d in results if "skipped" in d]
    results = [d for d in results if "skipped" not in d]
    done = [d for d in results if "refused" not in d]
    refused = defaultdict(int)
    for d in results:
        if "refused" in d:
            refused[d["refused"]] += 1
    fitted = ", ".join(f"{e} {s * 1e3:.2f} ms" for e, s in overheads.items())
    from roofline.serving.engines import fitted_eager_op_s

    eager = ", ".join(f"{e} {fitted_eager_op_s(e) * 1e6:g} us" for e in overheads)
    lines = ["## Disaggregated rows", "",
             f"{len(results) + len(skipped):,} disaggregated rows (`mode == disagg`), {len(done):,} simulated, "
             f"{len(results) - len(done):,} refused"
             + (f", {len(skipped):,} not run ({skipped[0]['skipped']}: the closed loop reruns every pool each pass, and "
                "its cost grows with the users and the output length)" if skipped else "")
             + f"; {wall_s:.0f} s in all (one closed-loop simulation a row, on `kernels+engine`: each engine's time "
             f"per step as data/engines.toml holds it, {fitted}, and its host time per op outside a CUDA graph, "
             f"{eager}, fitted on aggregated rows only; vLLM's time per step hidden on the "
             f"{sum(1 for d in done if d.get('async_scheduling')):,} rows that ran async scheduling).", "",
             f"Settings: {settings_text()}.", ""]
    if done:
        lines += [f"**All {len(done):,} simulated rows:** {headline(done)}.", ""]
        passes = [d["kernels+engine"]["passes"] for d in done]
        lines += [f"The closed loop settled in a median of {statistics.median(passes):.0f} passes of both pools "
                  f"(at most {max(passes)}); the KV transfer's mean per row: median "
                  f"{statistics.median(d['kernels+engine']['kv_transfer_s'] for d in done) * 1e3:.2f} ms.", ""]
        lines += table("engine", done, lambda d: d["engine"])
        lines += table("GPU", done, lambda d: d["machine"])
        lines += table("model", done, lambda d: d["model"])
        lines += table("concurrency", done, lambda d: sv._band(d["concurrency"]))
        lines += table("input and output length", done, lambda d: f"{d['isl']}/{d['osl']}")
        lines += table("engine, GPU and model", done, lambda d: (d["engine"], d["machine"], d["model"]))
    lines += ["### Disaggregated rows refused", "", "| reason | rows |", "| --- | --- |"]
    lines += [f"| {why} | {k} |" for why, k in sorted(refused.items(), key=lambda x: -x[1])]
    secs = [d["seconds"] for d in done]
    if secs:
        lines += ["", f"Time per disaggregated row: median {statistics.median(secs):.2f} s, max {max(secs):.1f} s."]
    return lines + [""]


def subset(rows: list[dict], limit: int, cheapest: bool = False) -> list[dict]:
    """``limit`` of the rows the tool can express, spread evenly over the sample (a quick look), or
    the ``cheapest`` (fewest users, then shortest output: a smoke run)."""
    ok = [r for r in rows if not isinstance(pools(r), str)]
    if cheapest:
        ok = sorted(ok, key=lambda r: (concurrency(r), sv._int(r["osl"]), sv._int(r["isl"])))[:limit]
    if not limit or limit >= len(ok):
        return ok
    return [ok[int(i * len(ok) / limit)] for i in range(limit)]
