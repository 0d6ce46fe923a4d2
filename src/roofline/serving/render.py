"""Plain-text tables of the serving results (ServingResult, ServingSweep); latencies in ms or s.
"""

from __future__ import annotations

from roofline.plan.render import note_line
from roofline.tables import grid
from roofline.units import GIGA, format_latency, format_number


def planning_words(e) -> str:
    """The engine line's clause for a scheduler that plans ahead (Engine.schedule_ahead), "" for one that does not."""
    return ("; each step planned while the one before it runs (a request arriving during a step starts in the step "
            "after next: --schedule-ahead)" if e.schedule_ahead else "")


def targets_text(slo: dict) -> str:
    """An SLO's targets in words: 'TTFT p90 <= 500.0 ms and TPOT p90 <= 30.0 ms' (one where one is set)."""
    q = f"p{slo['percentile']:g}"
    return " and ".join(t for t in (f"TTFT {q} <= {format_latency(slo['ttft_s'])}" if slo.get("ttft_s") else "",
                                    f"TPOT {q} <= {format_latency(slo['tpot_s'])}" if slo.get("tpot_s") else "") if t)


def serving_table(r) -> str:
    """One simulated serving run: throughput, latency percentiles, the scheduler's figures."""
    m = r.to_dict()
    e = r.engine
    gpus, groups = int(r.settings.get("kv_cache_gpus", 1)), int(r.settings.get("attention_data_parallel", 1))
    what = r.settings.get("cache", "KV cache")  # "SSM state" for state-space models: no keys and values, no blocks
    lines = [
        r.description,
        f"workload: {r.workload}, {r.requests:,} request{'s' if r.requests != 1 else ''}, {r.input_tokens / r.requests:,.0f} input and "
        f"{r.output_tokens / r.requests:,.0f} output tokens on average",
        f"engine: at most {e.max_seqs:,} sequences and {e.max_tokens:,} tokens per step, {what} "
        f"{r.cache_bytes_per_gpu / GIGA:,.1f} GB per GPU"
        + (f" ({r.replica_cache_bytes / GIGA:,.1f} GB over the replica's {gpus} GPUs"
           + (f", {groups} data-parallel attention groups each caching its own sequences" if groups > 1 else "") + ")"
           if gpus > 1 else "")
        + ((f" in blocks of {e.block_size} tokens" if e.block_size > 1 else ", a token a slot (no blocks)") if what != "SSM state" else ", one fixed-size state per sequence")
        + (f"; new prompts held up to {e.batch_wait_steps:,} steps in a row while a step's tokens are under "
           f"{e.batch_wait_ratio:g} x {e.max_tokens:,} (batch waiting: {r.held_steps:,} steps held them)"
           if e.batch_waiting else "")
        + (f"; new prompts held until each of the {groups} data-parallel ranks has one, at most to the "
           f"{e.adp_timeout_steps:,}-step count's next turn"
           + (f", then {e.adp_batching_steps:,} steps more" if e.adp_batching_steps else "")
           + f" (attention-DP balance: {r.held_steps:,} steps held them)" if e.adp_balance and groups > 1 else "")
        + (f"; new requests seen every {e.recv_interval:,} decode steps (the scheduler's receive interval)"
           if e.recv_interval > 1 else "")
        + planning_words(e),
        "",
        f"throughput  {m['output_tokens_per_s']:,.0f} output tokens/s ({m['output_tokens_per_s_per_gpu']:,.0f} per GPU), "
        f"{m['total_tokens_per_s']:,.0f} tokens/s with the prompts, {m['requests_per_s']:,.2f} requests/s",
        f"per user    {m['per_user_tokens_per_s']:,.1f} tokens/s while streaming (1 / median TPOT)"
        if m["per_user_tokens_per_s"] is not None else "per user    - (every answer is one token)",
        "",
    ]
    rows = [[what, *(format_latency(m[f"{key}_p{p}_s"]) for p in (50, 90, 99)), format_latency(m[f"{key}_mean_s"])]
            for what, key in (("time to first token", "ttft"), ("time per output token", "tpot"),
                              ("inter-token latency", "itl"), ("end to end", "e2e"))]
    lines.append(grid(["latency", "p50", "p90", "p99", "mean"], rows, [False, True, True, True, True]))
    lines += ["",
              f"steps: {r.steps:,} (mean decode batch {r.mean_decode_batch:,.1f}, {r.mean_step_tokens:,.0f} tokens per step); "
              f"{what} {r.kv_mean:.0%} full on average, {r.kv_peak:.0%} at peak; {r.preemptions:,} preemptions"
              + (f"; {r.computed_tokens - r.input_tokens:,} prompt tokens recomputed" if r.computed_tokens > r.input_tokens else "")]
    cost = r.cost_per_million_output_tokens
    if cost is not None:
        lines.append(f"cost: ${cost:,.3f} per million output tokens at ${r.price_per_gpu_hour:,.2f} per GPU-hour x {r.gpus} GPU(s)")
    lines += [note_line(n) for n in r.shown_notes()]
    return "\n".join(lines)


def serving_sweep_table(sw) -> str:
    """The throughput-latency curve, a row per concurrency or rate, with the SLO verdict."""
    first = sw.results[0]
    slo = sw.slo
    kind = first.settings.get("arrivals")
    arrivals = ("" if sw.over == "concurrency" or kind is None else
                "; arrivals Poisson" if kind == "poisson" else
                f"; arrivals with gamma gaps of burstiness {first.settings['burstiness']:g}" if kind == "gamma" else
                f"; arrivals {kind}")
    head = [first.description,
            f"workload: {first.input_tokens / first.requests:,.0f} input and {first.output_tokens / first.requests:,.0f} "
            f"output tokens on average{arrivals}; engine: at most {first.engine.max_seqs:,} sequences, "
            f"{first.engine.max_tokens:,} tokens per step" + planning_words(first.engine), ""]
    label = "users" if sw.over == "concurrency" else "req/s offered"
    hdr = [label, "req/s", "tok/s/GPU", "tok/s/user", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "batch", "preempt"]
    priced = first.price_per_gpu_hour is not None
    if priced:
        hdr.append("$/M out")
    if slo:
        q = f"p{slo['percentile']:g}"
        hdr += [f"TTFT {q}", f"TPOT {q}", "SLO"]
    rows = []
    checked_n = (slo or {}).get("checked_requests") if sw.over == "rate" else None
    for row, run in zip(sw.rows(), sw.results):
        v = row[sw.over]
        # a rate to 4 figures: a search's bisections differ in the 4th
        cells = [f"{v:,}" if sw.over == "concurrency" else format_number(v, 4), f"{row['requests_per_s']:,.2f}",
                 f"{row['output_tokens_per_s_per_gpu']:,.0f}",
                 "-" if row["per_user_tokens_per_s"] is None else f"{row['per_user_tokens_per_s']:,.1f}",
                 format_latency(row["ttft_p50_s"]), format_latency(row["ttft_p99_s"]), format_latency(row["tpot_p50_s"]), format_latency(row["tpot_p99_s"]),
                 f"{row['mean_decode_batch']:,.1f}", f"{row['preemptions']:,}"]
        if priced:
            cost = row.get("cost_per_million_output_tokens")
            cells.append("-" if cost is None else f"{cost:,.3f}")
        if slo:
            verdict = ("yes" if row["meets_slo"] else "no (overloaded)" if row["overloaded"]
                       else "no (over capacity)" if row["over_capacity"] else "no")
            if checked_n and run.requests == checked_n and slo.get("best") is not None:
                verdict += ", longer run"  # the check's own run, which replaced the search's at this rate
            elif row["meets_slo"] and v in (slo.get("short_passes_above") or ()):
                verdict += " (short run only)"  # above the answer: met in the search's short run, not run longer
            cells += [format_latency(row[f"ttft_{q}_s"]), format_latency(row[f"tpot_{q}_s"]), verdict]
        rows.append(cells)
    out = "\n".join(head) + grid(hdr, rows, [True] * len(hdr))
    if slo:
        out += _slo_answer(sw, slo)
    shown = sw.results[sw.values.index(slo["best"])] if slo and slo.get("best") is not None else first  # the answer's notes
    return out + "\n" + "\n".join(note_line(n) for n in (*sw.sweep_notes(), *shown.notes))


def _slo_answer(sw, slo: dict) -> str:
    """Under a sweep's table: the load that meets the SLO (or why none does), and for a rate the
    longer runs that checked it, the capacity and the replicas a target rate needs."""
    out = ""
    targets = targets_text(slo)
    best = slo.get("best")
    if best is None:
        low = sw.results[0]
        q = slo["percentile"]
        out += (f"\n\nno {('concurrency' if sw.over == 'concurrency' else 'rate')} tried meets {targets}: at the lightest "
                f"load tried ({format_number(sw.values[0])}{'' if sw.over == 'concurrency' else ' requests/s'}) TTFT p{q:g} is "
                f"{format_latency(low.percentile('ttft', q))} and TPOT p{q:g} {format_latency(low.percentile('tpot', q))}: a target below "
                "what a request alone takes is not met at any load or replica count")
    elif sw.over == "rate":
        r = sw.results[sw.values.index(best)]
        cost = r.cost_per_million_output_tokens
        out += (f"\n\nhighest rate meeting {targets}: {format_number(best)} requests/s offered (the run served "
                f"{format_number(r.requests_per_s)} requests/s and {r.output_tokens_per_s / r.gpus:,.0f} output tokens/s per GPU "
                "from first arrival to last completion, the drain included"
                + (f": ${cost:,.3f} per million output tokens at that rate)" if cost is not None else ")"))
        if slo.get("checked_requests"):
            failed = slo.get("failed_checks") or []
            passed_above = slo.get("short_passes_above") or []
            out += (f"\nchecked again with {slo['checked_requests']:,} requests ('longer run' rows): near capacity a "
                    "queue settles slowly, so a short sample's latencies can meet a target that a longer run misses"
                    + (f": {', '.join(format_number(v, 4) for v in failed)} requests/s missed them in longer runs, so the answer "
                       f"steps down from the search's ({slo['check_backoff'] - 1:.0%}, then a bisection with longer runs) "
                       "to a rate a longer run meets" if failed else "")
                    + (f"; {', '.join(format_number(v, 4) for v in passed_above)} met them in short runs only (not run longer)"
                       if failed and passed_above else ""))
        if slo.get("capacity_per_s"):
            out += (f"\ncapacity {format_number(slo['capacity_per_s'])} requests/s (all requests at once: the middle half of their "
                    "completions); a rate above it queues without end and meets no target")
        short = r.sample_note()
        if short:
            out += "\n" + note_line(short)
        n = sw.replicas_needed
        if n is not None:
            out += (f"\n{format_number(sw.target_rate)} requests/s need {n:,} replica(s) of {r.gpus} GPU(s): {n * r.gpus:,} GPUs "
                    "(requests spread evenly over identical replicas)")
    else:
        out += f"\n\nhighest concurrency meeting {targets}: {best:,} users"
    return out
