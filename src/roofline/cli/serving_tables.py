"""`roofline serving`'s tables beyond the run's own (ServingResult.to_table): the replica sizes of
--tp-search, the splits of --disagg-search, and --breakdown's steps op by op (and their table).
"""

from __future__ import annotations

from roofline.units import MS, US, format_latency, format_number


def tp_search_table(req, m, cm, precision, found: dict, name_flag) -> str:
    """--tp-search's table: a replica size a row, the best one, the refused ones (their messages as
    ``name_flag(field, text)`` names the flag) and the notes."""
    from roofline.serving.render import targets_text
    from roofline.tables import grid
    from roofline.plan.render import note_line
    from roofline.serving.search import CHECK_FACTOR
    from roofline.transformer import get_model

    targets = targets_text(found["slo"])

    kind = "expert-parallel" if req.ep else "tensor-parallel"
    target = found["target_rate"]
    arrivals = "Poisson" if req.burstiness == 1.0 else f"gamma gaps of burstiness {req.burstiness:g}"
    head = (f"{get_model(req.model).name} on {m.name}, {precision.label()}; {cm.describe('decode-only step')}\n"
            f"the highest request rate per replica within {targets}, by {kind} size"
            + (f", and the replicas for {format_number(target, 4)} requests/s" if target is not None else "")
            + f" ({found['requests']:,} requests a run, each answer checked with "
               f"{found['checked_requests'] or CHECK_FACTOR * found['requests']:,}; arrivals {arrivals})")
    hdr = ["GPUs per replica", "req/s per replica", "req/s per GPU", "tok/s/GPU"]
    if target is not None:
        hdr += ["replicas", "GPUs"]
    if req.price is not None:
        hdr.append("$/M out at target" if target is not None else "$/M out")
    rows = []
    for r in found["sizes"]:
        if r["refused"]:
            rows.append([f"{r['gpus_per_replica']:,}", "refused"] + [""] * (len(hdr) - 2))
            continue
        if r["rate_per_s"] is None:
            rows.append([f"{r['gpus_per_replica']:,}", "-", "-", "-"] + ["-"] * (len(hdr) - 4))
            continue
        cells = [f"{r['gpus_per_replica']:,}", format_number(r['rate_per_s']), format_number(r['rate_per_gpu']),
                 f"{r['output_tokens_per_s_per_gpu']:,.0f}"]
        if target is not None:
            cells += [f"{r['replicas']:,}", f"{r['gpus']:,}"]
        if req.price is not None:
            c = r.get("cost_at_target_per_million_output_tokens") if target is not None else r["cost_per_million_output_tokens"]
            cells.append("-" if c is None else f"{c:,.3f}")
        rows.append(cells)
    lines = [head, "", grid(hdr, rows, [True] * len(hdr)), ""]
    best = found["best_index"]
    if best is None and all(r["refused"] for r in found["sizes"]):
        lines.append("no replica size could be costed: each is refused (below)")
    elif best is None:
        lines.append("no replica size meets the targets (a target below what a request alone takes is met by none)")
    else:
        b = found["sizes"][best]
        lines.append(f"best: replicas of {b['gpus_per_replica']} GPU(s)"
                     + (f", {b['replicas']:,} of them: {b['gpus']:,} GPUs for {format_number(target, 4)} requests/s" if target is not None
                        else f", {format_number(b['rate_per_gpu'])} requests/s per GPU")
                     + ("; $/M out at target: the GPUs of the row serving the target's output tokens"
                        if target is not None and req.price is not None else ""))
    for r in found["sizes"]:
        if r["refused"]:  # named as the CLI names it (tensor_parallel -> --tp: the size the row tried)
            lines.append(f"size {r['gpus_per_replica']} refused: {name_flag(r.get('refused_field'), r['refused'])}")
    lines += [note_line(n) for n in found["notes"]]
    return "\n".join(lines)


def split_table(step, found: dict) -> str:
    from roofline.serving.render import targets_text
    from roofline.tables import grid

    slo = found["slo"]
    targets = targets_text(slo)
    rows = [[f"{p}:{d}", "-" if r is None else format_number(r)] for p, d, r in found["splits"]]
    co = found["colocated"]
    rows.append(["co-located", "-" if co is None else format_number(co)])
    g = found["gpus"]
    arrivals = ("arrivals Poisson" if found.get("arrivals", "poisson") == "poisson" else
                f"arrivals with gamma gaps of burstiness {found['burstiness']:g}")
    lines = [step.describe(), f"{g} GPUs in replicas of {step.tensor_parallel}: the highest request rate within {targets}; "
             f"{arrivals}", "", grid(["prefill:decode replicas", "requests/s"], rows, [False, True]), ""]
    best = found["best"]
    if best is None:
        low = found["lightest"]
        q = slo["percentile"]
        lines.append(f"no split meets the targets: co-located at the lightest load tried ({format_number(low['rate_per_s'])} requests/s) "
                     f"TTFT p{q:g} is {format_latency(low['ttft_s'])} and TPOT p{q:g} {format_latency(low['tpot_s'])}; "
                     "a target below what a request alone takes is not met at any split")
    else:
        p, d, r = best
        better = co is None or r > co
        lines.append(f"best: {p} prefill + {d} decode replicas, {format_number(r)} requests/s"
                     + (f" ({r / co:.2f}x the co-located replicas)" if co else "")
                     + ("" if better else "; co-located replicas serve more"))
        if found.get("checked_requests"):
            refused = "; ".join(f"{k} {', '.join(format_number(v, 4) for v in vs)}" for k, vs in found.get("failed_checks", {}).items())
            lines.append(f"each split's answer checked again with {found['checked_requests']:,} requests"
                         + (f" (the co-located one with {found['colocated_checked_requests']:,} on one replica)"
                            if found.get("colocated_checked_requests") else "")
                         + ": near capacity a short run's queue has not settled"
                         + (f"; rates a longer run refused, each answer then stepped down: {refused} requests/s"
                            if refused else ""))
    from roofline.plan.render import note_line

    lines += [note_line(n) for n in found.get("notes", ())]
    return "\n".join(lines)


def _representative(result):
    """The run a breakdown describes: the one simulated, the SLO's best rate, or the sweep's last point."""
    from roofline.serving.search import ServingSweep

    if not isinstance(result, ServingSweep):
        return result
    best = (result.slo or {}).get("best")
    return result.results[result.values.index(best)] if best is not None else result.results[-1]


def breakdown(step, result, engine, req, draft=None) -> dict:
    """Two steps of the run op by op: a decode step at its mean decode batch and mean context, and a
    step that feeds a prompt chunk: the mean of the run's steps that fed one (ServingResult.chunk_steps:
    their decodes, prompt tokens and prefix), or where the run does not record them the first chunk of
    a mean-length prompt beside the mean batch."""
    r = _representative(result)
    batch = max(1, round(r.mean_decode_batch))
    mean_in = r.input_tokens / r.requests
    mean_out = r.output_tokens / r.requests
    context = max(1, round(mean_in + mean_out / 2))  # a decoding sequence is halfway through its answer on average
    chunk = int(min(mean_in, engine.max_tokens - batch)) if engine.max_tokens > batch else 0
    T = step.verify_tokens
    out = {"decode_step": {"decode_batch": batch, "context": context, "tokens_fed_per_sequence": T,
                           "ops": [o.to_dict() for o in step.ops([context + T - 1] * batch)],
                           "time_s": step.seconds([context + T - 1] * batch)}}
    if draft is not None:
        import numpy as np

        d = float(draft.decode_steps_seconds(np.full(batch, context - 1), T - 1).sum())
        out["decode_step"]["draft_s"] = d
        out["decode_step"]["time_s"] += d
        out["decode_step"]["ops"] += _draft_ops(draft, batch, context, T - 1)
    if req.disagg is not None and chunk > 0:  # the pools run apart: the prefill pool's step is a chunk alone
        chunk = int(min(mean_in, engine.max_tokens))
        out["prefill_step"] = {"decode_batch": 0, "context": 0, "chunk": chunk, "prefix": 0,
                               "ops": [o.to_dict() for o in step.ops([], [(chunk, 0)])],
                               "time_s": step.seconds([], [(chunk, 0)])}
    elif chunk > 0:
        # the run's own steps that fed a prompt, on average (their decodes, prompt tokens and prefix: a prefix
        # hit's skipped tokens, a long prompt's earlier chunks); else a mean prompt's first chunk beside the batch
        seen = r.chunk_steps()
        prefix, count = 0, 1
        if seen is not None:
            batch_c, chunk, prefix = round(seen["decode_batch"]), max(1, round(seen["chunk"])), round(seen["prefix"])
            count = max(1, round(seen["chunks"]))
        else:
            batch_c = batch
        # means of steps each within the budget can round past it together (a long prompt's chunks fill what the
        # decodes leave): the representative step keeps to the budget, its chunks trimmed to what is left
        room = max(1, engine.max_tokens - batch_c * T)
        count = min(count, room)
        chunk = max(1, min(chunk, room // count))
        ctx = [context + T - 1] * batch_c
        fed = [(chunk, prefix)] * count
        out["mixed_step"] = {"decode_batch": batch_c, "context": context if batch_c else 0, "chunk": chunk, "prefix": prefix,
                             "chunks": count, "tokens_fed_per_sequence": T,
                             "ops": [o.to_dict() for o in step.ops(ctx, fed)], "time_s": step.seconds(ctx, fed)}
        if seen is not None:
            out["mixed_step"]["mean_of_steps"] = seen["steps"]
        if draft is not None:
            import numpy as np

            d = (float(draft.decode_steps_seconds(np.full(batch_c, context - 1), T - 1).sum()) if batch_c else 0.0) + \
                draft.seconds([], fed, sampled=0)  # a step of chunks alone runs no draft decodes
            out["mixed_step"]["draft_s"] = d
            out["mixed_step"]["time_s"] += d
            out["mixed_step"]["ops"] += _draft_ops(draft, batch_c, context, T - 1, fed)
    for key, s in out.items():  # the engine's own time, rows of each step as the simulator adds them
        tokens = s["decode_batch"] * s.get("tokens_fed_per_sequence", 1) + s.get("chunk", 0) * s.get("chunks", 1)
        for row in engine.overhead_ops(step, s["decode_batch"], key != "decode_step", int(tokens)):
            s["ops"].append(row.to_dict())
            s["time_s"] += row.time_s
    return out


def _draft_ops(draft, batch: int, context: int, k: int, chunks=()) -> list[dict]:
    """The draft's work in a step op by op, each op summed over its k runs (run i feeds each of the
    ``batch`` sequences one token against context + i, as the simulator's draft steps) and, with
    ``chunks``, its own prefill of the step's prompt chunks; each op named "draft: ...", part "draft"."""
    runs = [draft.ops([context + i] * batch) for i in range(k) if batch] + ([draft.ops([], chunks, 0)] if chunks else [])
    merged: dict = {}
    for ops in runs:
        for o in ops:
            row = merged.setdefault(o.name, {"name": f"draft: {o.name}", "part": "draft", "count": 0, "flops": 0.0,
                                             "bytes": 0.0, "time_s": 0.0, "bound": o.bound})
            row["count"] += o.count
            row["flops"] += o.flops
            row["bytes"] += o.bytes
            row["time_s"] += o.time_s
    return list(merged.values())


def breakdown_table(b: dict) -> str:
    from roofline.tables import grid
    from roofline.units import format_si

    parts = []
    for key, title in (("decode_step", "a decode step"), ("mixed_step", "a step with a prompt chunk"),
                       ("prefill_step", "a step of the prefill pool")):
        s = b.get(key)
        if not s:
            continue
        what = f"{s['decode_batch']:,} decodes at context {s['context']:,}" if s["decode_batch"] else "no decodes"
        if s.get("tokens_fed_per_sequence", 1) > 1:
            what += f", each verifying {s['tokens_fed_per_sequence']} tokens"
        if "chunk" in s:
            what += (f" + {s['chunks']:,} chunks of {s['chunk']:,} prompt tokens each" if s.get("chunks", 1) > 1
                     else f" + a chunk of {s['chunk']:,} prompt tokens")
            if s.get("prefix"):
                what += f" after {s['prefix']:,} cached or earlier ones"
            if s.get("mean_of_steps"):
                what += f"; the mean of the run's {s['mean_of_steps']:,} steps that fed a prompt"
        if "draft_s" in s:
            what += f"; the draft's work adds {s['draft_s'] / MS:,.3f} ms (its ops: part draft, summed over its runs)"
        rows = [[o["name"], o["part"], f"{o['count']:,}", format_si(o["flops"], "FLOP"), format_si(o["bytes"], "B"),
                 o["bound"], f"{o['time_s'] / US:,.1f}"] for o in s["ops"]]
        parts.append(f"{title} ({what}): {s['time_s'] / MS:,.3f} ms, op by op (each op summed over its layers)\n"
                     + grid(["op", "part", "runs", "FLOPs", "bytes", "bound", "us"], rows,
                            [False, False, True, True, True, False, True]))
    return "\n\n".join(parts)
