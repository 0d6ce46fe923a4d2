"""What the workshop's serving view shows (/api/serving), built from the library's
serving.ServingSweep with its plan.step.StepCost: the targets' verdict, readouts, a sentence, the
throughput curve, the latencies against users and one decode step's breakdown. Pure functions
(results in, plain dict out) and no web stack, so the page's JavaScript only places numbers and
text it is given.

Times are the library's seconds, written by roofline.units (format_duration: about three
significant figures, auto-scaled), the latency chart's axis in the unit of the slowest latency or
target (payload.time_axis).
"""

from __future__ import annotations

import math

from roofline.palette import COMPUTE_BLUE, INK, MISS_GREY, TPOT_COLOR, TTFT_COLOR
from roofline.units import format_duration, format_number, format_rate, format_share, format_typed_ms
from roofline.web.catalog import CUSTOM_PREFIX
from roofline.web.payload import json_safe, time_axis
from roofline.web.plan_shared import PAD_LOG10, log2_ticks, log_ticks_125


def _users(n: int) -> str:
    return f"{n:,} user" + ("" if n == 1 else "s")


def _pct(p: float) -> str:
    return f"p{p:g}"


def targets_text(slo: dict | None) -> str:
    """'TTFT p90 <= 500 ms and TPOT p90 <= 30 ms' (the targets given)."""
    if not slo:
        return "no targets"
    p = _pct(slo["percentile"])
    parts = [f"{what} {p} ≤ {format_typed_ms(slo[key])}" for what, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"))
             if slo.get(key) is not None]
    return " and ".join(parts)


def serving_representative(sweep) -> int:
    """The index of the point the readouts and the breakdown describe: the highest concurrency that
    meets the targets, else the last (as `roofline serving --breakdown`)."""
    best = (sweep.slo or {}).get("best")
    return sweep.values.index(best) if best is not None else len(sweep.values) - 1


def serving_breakdown(step, result, users: int) -> dict:
    """One decode step of a point op by op, as `roofline serving --breakdown` gives it: its mean
    decode batch at its mean context (a decoding sequence halfway through its answer), with a table
    of the ops by time (the engine's own time per step a row of it, where given)."""
    batch = max(1, round(result.mean_decode_batch))
    context = max(1, round(result.input_tokens / result.requests + result.output_tokens / result.requests / 2))
    ops = step.ops([context] * batch)
    time_s = step.seconds([context] * batch)
    engine_rows = result.engine.overhead_ops(step)
    ops, time_s = ops + engine_rows, time_s + sum(r.time_s for r in engine_rows)
    total = sum(o.time_s for o in ops) or 1.0
    ranked = sorted(ops, key=lambda o: o.time_s, reverse=True)
    shown, rest = ranked[:10], ranked[10:]
    rows = [{"name": o.name, "runs": f"{o.count:,}", "time": format_duration(o.time_s), "share": format_share(o.time_s / total),
             "bound": o.bound} for o in shown]
    if rest:
        rest_s = sum(o.time_s for o in rest)
        rows.append({"name": f"{len(rest)} other ops", "runs": "", "time": format_duration(rest_s),
                     "share": format_share(rest_s / total), "bound": ""})
    return {
        "users": users, "decode_batch": batch, "context": context, "time_s": time_s,
        "ops": [o.to_dict() for o in ops],
        "table": rows,
        "title": (f"One decode step at {_users(users)}: {batch:,} sequence{'s' if batch != 1 else ''} at "
                  f"{context:,} tokens of context take {format_duration(time_s)}"),
    }


def _point_hover(row: dict, result, percentile: float) -> str:
    p = _pct(percentile)
    lines = [f"<b>{_users(row['concurrency'])}</b>",
             f"{format_rate(row['output_tokens_per_s_per_gpu'])} per GPU · {format_rate(row['per_user_tokens_per_s'])} per user",
             f"TTFT p50 {format_duration(row['ttft_p50_s'])} · {p} {format_duration(result.percentile('ttft', percentile))}"
             f" · p99 {format_duration(row['ttft_p99_s'])}",
             f"TPOT p50 {format_duration(row['tpot_p50_s'])} · {p} {format_duration(result.percentile('tpot', percentile))}",
             f"mean decode batch {row['mean_decode_batch']:.1f} · {result.settings.get('cache', 'KV cache')} peak {format_share(row['kv_cache_peak'])}"
             f" · {row['preemptions']:,} preemptions",
             f"{result.requests:,} requests simulated"]
    if "meets_slo" in row:
        lines.append("meets the targets" if row["meets_slo"] else "misses the targets")
    return "<br>".join(lines)


def _users_ticks(top: int) -> dict:
    ticks = log2_ticks(top)
    if top not in ticks["values"]:
        ticks = {"values": ticks["values"] + [top], "text": ticks["text"] + [f"{top:,}"]}
    return ticks


def point_labels(users, xs, ys, x_span: float, y_span: float, near: float = 0.025) -> list[str]:
    """Each point's label (its users), one label for a run of points that sit on one another (a
    saturated engine: '16–64' at the last of them, the others unlabelled)."""
    labels = [f"{u:,}" for u in users]
    start = 0
    for i in range(1, len(users) + 1):
        same = (i < len(users) and xs[i] is not None and xs[start] is not None
                and abs(xs[i] - xs[start]) <= near * x_span and abs(ys[i] - ys[start]) <= near * y_span)
        if same:
            continue
        if i - 1 > start:
            for j in range(start, i - 1):
                labels[j] = ""
            labels[i - 1] = f"{users[start]:,}–{users[i - 1]:,}"
        start = i
    return labels


def serving_charts(sweep, best_index: int | None, percentile: float) -> dict:
    """The curve (output tokens/s per GPU against tokens/s per user, each point labelled by its
    users, filled where it meets the targets) and the latencies against users (TTFT p50 and p99,
    TPOT p50 in the unit of the slowest, ``axis``; the targets as lines)."""
    rows = sweep.rows()
    users = [r["concurrency"] for r in rows]
    top = max(users)
    meets = [r.get("meets_slo", True) for r in rows]
    gpu = [r["output_tokens_per_s_per_gpu"] for r in rows]
    per_user = [r["per_user_tokens_per_s"] for r in rows]
    per_user = [None if v is None or not math.isfinite(v) else v for v in per_user]
    hover = [_point_hover(r, res, percentile) for r, res in zip(rows, sweep.results)]
    known = [v for v in per_user if v is not None]
    x_range, y_range = [0.0, (max(known) if known else 1.0) * 1.12], [0.0, max(gpu) * 1.15]
    curve = {
        "users": users, "output_tokens_per_s_per_gpu": gpu, "per_user_tokens_per_s": per_user, "meets_slo": meets,
        "text": point_labels(users, per_user, gpu, x_range[1], y_range[1]), "hover": hover, "best": best_index,
        "x_range": x_range, "y_range": y_range,
        "x_title": "tokens/s per user (1 / median TPOT)", "y_title": "output tokens/s per GPU",
        "colors": {"meets": COMPUTE_BLUE, "misses": MISS_GREY, "line": INK},
        "empty_text": None if known else "one output token per request: no TPOT, so no per-user rate to place",
    }
    known = lambda v: v is not None and math.isfinite(v)  # noqa: E731
    # p50 and p99 as benchmarks print them, and the percentile the cards and targets use (p90)
    seconds = {"ttft_p50": [r["ttft_p50_s"] for r in rows], "ttft_p99": [r["ttft_p99_s"] for r in rows],
               "tpot_p50": [r["tpot_p50_s"] for r in rows],
               "ttft_at": [res.percentile("ttft", percentile) for res in sweep.results],
               "tpot_at": [res.percentile("tpot", percentile) for res in sweep.results]}
    slo = sweep.slo or {}
    given = [(what, key, color) for what, key, color in (("TTFT", "ttft_s", TTFT_COLOR), ("TPOT", "tpot_s", TPOT_COLOR))
             if slo.get(key) is not None]
    shown_s = [v for s in seconds.values() for v in s if known(v) and v > 0] + [slo[key] for _, key, _ in given]
    axis = time_axis(shown_s, "latency")  # the unit of the slowest latency or target
    unit = axis["seconds_per_unit"]
    series = {k: [v / unit if known(v) else None for v in s] for k, s in seconds.items()}
    targets = [{"name": what, "value": slo[key] / unit, "value_log10": math.log10(slo[key] / unit), "color": color,
                "text": f"{what} {_pct(slo['percentile'])} target {format_typed_ms(slo[key])}"}
               for what, key, color in given]
    lo, hi = min(shown_s) / unit, max(shown_s) / unit
    ticks = log_ticks_125(lo, hi)
    latency = {
        "users": users, **series, "axis": axis,
        "hover": {k: [f"{_users(u)}: {name} {format_duration(v)}" for u, v in zip(users, seconds[k])]
                  for k, name in (("ttft_p50", "TTFT p50"), ("ttft_p99", "TTFT p99"), ("tpot_p50", "TPOT p50"),
                                  ("ttft_at", f"TTFT {_pct(percentile)}"), ("tpot_at", f"TPOT {_pct(percentile)}"))},
        "percentile_name": _pct(percentile),
        "targets": targets,
        "x_range_log10": [-PAD_LOG10, math.log10(top) + PAD_LOG10] if top > 1 else [-0.5, 0.5],
        "ticks": _users_ticks(top),
        "y_range_log10": [math.log10(lo) - 0.1, math.log10(hi) + 0.1],
        "y_ticks": ticks,
        "colors": {"ttft": TTFT_COLOR, "tpot": TPOT_COLOR},
    }
    return {"curve": curve, "latency": latency}


def left_out_text(left_out) -> str:
    """' 128 and 256 users are left out: ...' (empty when the whole sweep ran)."""
    if not left_out:
        return ""
    names = f"{', '.join(f'{u:,}' for u in left_out[:-1])} and {left_out[-1]:,}" if len(left_out) > 1 else f"{left_out[0]:,}"
    return (f" {names} users {'are' if len(left_out) > 1 else 'is'} left out: they would take longer to simulate than "
            "this view allows (see the note below).")


def slo_verdict(sweep, percentile: float, left_out=()) -> dict:
    """The targets' verdict: met up to some concurrency, met by none, or no targets given; and the
    points the bound left out."""
    verdict = _slo_verdict(sweep, percentile)
    verdict["text"] += left_out_text(list(left_out))
    return verdict


def _slo_verdict(sweep, percentile: float) -> dict:
    slo = sweep.slo
    lo, hi = sweep.values[0], sweep.values[-1]
    if not slo:
        return {"state": "none", "mark": "–", "headline": "No targets",
                "text": "No TTFT or TPOT target: set one to find the highest concurrency within it."}
    best = slo.get("best")
    if best is not None:
        return {"state": "meets", "mark": "✓", "headline": f"Meets the targets up to {_users(best)}",
                "text": f"Up to {_users(best)} meet{'s' if best == 1 else ''} {targets_text(slo)} ({lo:,} to {_users(hi)} swept)."}
    first = sweep.results[0]
    return {"state": "misses", "mark": "✗", "headline": "No concurrency meets the targets",
            "text": (f"No concurrency from {lo:,} to {_users(hi)} meets {targets_text(slo)}: {_users(lo)} alone sees "
                     f"TTFT {_pct(percentile)} {format_duration(first.percentile('ttft', percentile))} and TPOT "
                     f"{_pct(percentile)} {format_duration(first.percentile('tpot', percentile))}.")}


def serving_readouts(sweep, index: int, percentile: float, left_out=()) -> dict:
    """The serving view's readouts as numbers and as the text the page shows, for the point
    ``index`` (serving_representative)."""
    slo = sweep.slo
    best = (slo or {}).get("best")
    row, r = sweep.rows()[index], sweep.results[index]
    users = sweep.values[index]
    p = _pct(percentile)
    ttft, tpot = r.percentile("ttft", percentile), r.percentile("tpot", percentile)
    cost = row.get("cost_per_million_output_tokens")
    numbers = {
        "best_users": best, "users": users, "requests_per_s": row["requests_per_s"],
        "output_tokens_per_s_per_gpu": row["output_tokens_per_s_per_gpu"], "per_user_tokens_per_s": row["per_user_tokens_per_s"],
        "ttft_s": ttft, "tpot_s": tpot, "percentile": percentile, "cost_per_million_output_tokens": cost,
    }
    at = f"at {_users(users)}"
    gpu_sub = f"{at}; {format_rate(row['requests_per_s'], 'requests/s')}"
    if cost is not None:
        gpu_sub += f"; ${format_number(cost)} per million output tokens"
    target = lambda key: "" if not slo or slo.get(key) is None else f"; target {format_typed_ms(slo[key])}"  # noqa: E731
    text = {
        "best_name": "Best concurrency within the SLO" if slo else "Highest concurrency swept",
        "best": _users(best) if best is not None else ("none" if slo else _users(users)),
        "best_sub": (targets_text(slo) if best is not None else
                     (f"none of {sweep.values[0]:,} to {sweep.values[-1]:,} users meets {targets_text(slo)}" if slo
                      else "no TTFT or TPOT target given")) + ("" if not left_out else
                                                               f"; {_users(left_out[-1])} left out (bound)"),
        "gpu": format_rate(row["output_tokens_per_s_per_gpu"]),
        "gpu_sub": gpu_sub,
        "user": format_rate(row["per_user_tokens_per_s"]),
        "user_sub": (f"{at}: 1 / median TPOT ({format_duration(row['tpot_p50_s'])})" if row["tpot_p50_s"] is not None
                     else f"{at}: one output token, no TPOT"),
        "ttft_name": f"TTFT {p}",
        "ttft": format_duration(ttft),
        "ttft_sub": f"{at}; p50 {format_duration(row['ttft_p50_s'])}" + target("ttft_s"),
        "tpot_name": f"TPOT {p}",
        "tpot": format_duration(tpot),
        "tpot_sub": f"{at}; p50 {format_duration(row['tpot_p50_s'])}" + target("tpot_s"),
    }
    return {**numbers, "text": text}


def serving_sentence(sweep, index: int, model_name: str, machine_name: str, gpus: int, input_len: int, output_len: int,
                     percentile: float) -> str:
    """E.g. 'Llama 3 8B on one H100 SXM, 1,024-token prompts and 256-token answers: up to 128
    concurrent users meet TTFT p90 <= 500 ms and TPOT p90 <= 30 ms, at 6,935 output tokens/s per GPU
    and 55 tokens/s per user.'"""
    where = f"{model_name} on {'one' if gpus == 1 else f'{gpus:,}'} {machine_name}{'' if gpus == 1 else 's'}"
    work = f"{input_len:,}-token prompt{'s' if input_len != 1 else ''} and {output_len:,}-token answer{'s' if output_len != 1 else ''}"
    row, r = sweep.rows()[index], sweep.results[index]
    users = sweep.values[index]
    speeds = f"{format_rate(row['output_tokens_per_s_per_gpu']).replace('tokens/s', 'output tokens/s')} per GPU"
    if row["per_user_tokens_per_s"] is not None:
        speeds += f" and {format_rate(row['per_user_tokens_per_s'])} per user"
    slo = sweep.slo
    if slo and slo.get("best") is not None:
        return f"{where}, {work}: up to {users:,} concurrent user{'s' if users != 1 else ''} meet {targets_text(slo)}, at {speeds}."
    if slo:
        first = sweep.results[0]
        return (f"{where}, {work}: no concurrency from {sweep.values[0]:,} to {_users(sweep.values[-1])} meets "
                f"{targets_text(slo)}; {_users(sweep.values[0])} alone sees TTFT {_pct(percentile)} "
                f"{format_duration(first.percentile('ttft', percentile))} and TPOT {_pct(percentile)} "
                f"{format_duration(first.percentile('tpot', percentile))}.")
    return (f"{where}, {work}: at {_users(users)}, {speeds}, TTFT {_pct(percentile)} "
            f"{format_duration(r.percentile('ttft', percentile))}.")


def cli_flags(q) -> str:
    """The `roofline serving` flags of the query's model, machine, engine and workload (a point adds
    --sweep C --requests N); the settings given besides (targets, engine settings, efficiencies) take
    their own flags."""
    machine = "FILE.toml" if q.machine.startswith(CUSTOM_PREFIX) else q.machine  # a machine of given figures: its file
    flags = [f"--model {q.model}", f"--machine {machine}"] + ([f"--engine {q.engine}"] if q.engine else [])
    flags += [f"--tp {q.tp}"] if q.tp != 1 else []
    flags += [f"--dtype {q.dtype}"] if q.dtype else []
    return " ".join(["roofline serving", *flags, f"--input-len {q.input_len}", f"--output-len {q.output_len}"])


def bound_text(bound: dict, cli: str = "roofline serving") -> str:
    """What the view's bound did: the requests per point, and the points it left out; ``cli`` the
    command (cli_flags) that reproduces a point with --sweep C --requests N."""
    text = ("Each point simulates 8 requests per user, at most 2,000 (one per user past 2,000 users), seed 0, "
            f"the whole sweep within about {bound['budget_s']:g} s of simulation; "
            f"`{cli} --sweep C --requests N` reproduces a point")
    if bound["left_out"]:
        left = bound["left_out"]
        text += (f"; {', '.join(f'{u:,}' for u in left)} users left out (they would simulate past that bound: "
                 f"`roofline serving --sweep ... --requests N` runs them)")
    return text + "."


def serving_payload(sweep, step, engine, q, bound: dict, model_name: str) -> dict:
    """The /api/serving body: the library's ``ServingSweep.to_dict()`` plus what the page draws."""
    index = serving_representative(sweep)
    best = (sweep.slo or {}).get("best")
    m = step.machine
    gpus = sweep.results[0].gpus
    charts = serving_charts(sweep, index if best is not None else None, q.percentile)
    notes = list(sweep.to_dict()["notes"]) + list(step.model.header_lines())  # the CLI's, word for word
    body = {
        **sweep.to_dict(),
        "model_name": model_name,
        "machine_name": m.name,
        "tensor_parallel": step.tensor_parallel,
        "input_len": q.input_len,
        "output_len": q.output_len,
        "max_users": q.max_users,
        "percentile": q.percentile,
        "launch_overhead_us": q.launch_overhead_us,
        "concurrencies": list(sweep.values),
        "requests_per_point": list(bound["requests"]),
        "bound": {**bound, "text": bound_text(bound, cli_flags(q))},
        "best_users": best,
        "shown_users": sweep.values[index],
        "verdict": slo_verdict(sweep, q.percentile, bound["left_out"]),
        "readouts": serving_readouts(sweep, index, q.percentile, bound["left_out"]),
        "sentence": serving_sentence(sweep, index, model_name, m.name, gpus, q.input_len, q.output_len, q.percentile),
        "chart": charts["curve"],
        "latency_chart": charts["latency"],
        "breakdown": serving_breakdown(step, sweep.results[index], sweep.values[index]),
        "notes": notes,
        # the description names the precision as simulated (fp8 on an A100 is weight-only, on an H100 W8A8)
        "caption": (f"{sweep.results[0].description}. Closed loop: each user sends its next request when the last one "
                    f"finishes; engine max_seqs {engine.max_seqs:,}, max_tokens {engine.max_tokens:,}, memory fraction "
                    f"{engine.memory_fraction:g}, prefix hits {engine.prefix_hit:g}. "
                    f"{bound_text(bound, cli_flags(q))}"),
    }
    return json_safe(body)
