"""Prefill/decode disaggregation (docs/serving.md): prefill and decode on separate replicas, the
KV cache sent between them over a link, and the best split of a number of replicas.
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from roofline.errors import DISAGG_BUDGET_REQUESTS, MAX_REQUESTS, RooflineError, check_number
from roofline.plan.step import StepCost
from roofline.serving.engine import Engine
from roofline.serving.requests import Requests, poisson_requests
from roofline.serving.results import PERCENTILES, ServingResult, overload_note, step_settings, weighted_percentiles
from roofline.serving.scheduler import simulate
from roofline.serving.search import CHECK_FACTOR, FLOOD_BATCHES, SEARCH_STEPS, max_rate_within, rate_search, slo_targets
from roofline.units import MS


def kv_transfer_seconds(prefill: StepCost, decode: StepCost, input_tokens: np.ndarray, link: str | None = None) -> np.ndarray:
    """Seconds to move each request's KV cache (its prompt's) from the prefill replica to the
    decode replica: the cache in t shards, t the smaller group's GPUs holding one (for data-parallel
    attention the GPUs of a sequence's attention group, attention_tp: one by default), each sent at the same time over
    ``link`` (default: the machine's scale-out infiniband or roce, else its scale-up link), at
    e_m of the link's bandwidth, plus one collective latency (links.collective_latency_s)."""
    from roofline.links import collective_latency_s
    from roofline.plan.parallel import CROSS_NODE_LINKS, resolve_link
    from roofline.plan.memory import kv_bytes_per_sequence

    from roofline.plan.parallel import NODE_LINKS

    m = prefill.machine
    names = [n for n, _ in m.links]
    if link is None:
        link = next((n for n in CROSS_NODE_LINKS if n in names), None)
        if link is None and m.nvlink_gpus:  # bridged cards: past the pair it is PCIe
            link = "pcie" if "pcie" in names else None
    link = resolve_link(m, link, field="kv_link")
    if link in NODE_LINKS and m.nvlink_gpus and prefill.tensor_parallel + decode.tensor_parallel > m.nvlink_gpus:
        raise RooflineError(f"kv_link {link}: {m.the_name}'s NVLink bridge joins {m.nvlink_gpus} cards; a prefill and a "
                            f"decode group of {prefill.tensor_parallel} + {decode.tensor_parallel} GPUs are not all on it",
                            field="kv_link")
    per_seq = np.asarray(kv_bytes_per_sequence(prefill.model, np.asarray(input_tokens), prefill.precision, 1), dtype=float)
    bw = prefill.cost_model.memory_efficiency * m.link(link)
    # data-parallel attention (expert parallel): one attention group holds a sequence (one GPU, or its attention_tp);
    # else each of the group's GPUs a shard, and the smaller group's GPUs each send or take theirs (one link each)
    shards = min(s.dense_tp() for s in (prefill, decode))
    return collective_latency_s(link) + per_seq / shards / bw, link


ROUTERS = ("random", "round-robin")  # how requests are spread over a pool's replicas
FIRST_TOKENS = ("prefill", "decode")  # which pool's token a client sees first
# the closed loop's fixed point: past this many passes refused (where a pool queues, half a round of users settles a
# pass: 1,000 requests of 64 users on 2:2 pools of 4,096-token prompts took 23 to 39)
CLOSED_LOOP_PASSES = 80
# stop when no arrival moves by more than this share of the mean end-to-end latency (the exact fixed point settles one
# round of users a pass: a latency jumps by a step as its arrival crosses a step's start; docs/serving.md)
CLOSED_LOOP_TOLERANCE = 0.01


def _pool_notes(p_results, d_results, closed: bool = False) -> tuple[str, ...]:
    """Both pools' notes, every replica's, each once: those the pools share as they are (the model's,
    the collectives'), the rest named by pool; the decode pool's scheduler line is left out (its
    'prefix hits' are the transferred cache, which the disaggregation note describes). In a closed
    loop a pool's overload note is left out: its queue is bounded by the users, the run's own."""
    def unique(results):
        return list(dict.fromkeys(n for r in results for n in r.notes if not (closed and n == r.overload)))

    p_notes, d_notes = unique(p_results), unique(d_results)
    d_schedulers = {r.scheduler for r in d_results}
    shared = [n for n in p_notes if n in d_notes]
    return tuple(shared + [f"prefill pool: {n}" for n in p_notes if n not in d_notes]
                 + [f"decode pool: {n}" for n in d_notes if n not in p_notes and n not in d_schedulers])


def _round_robin(times: np.ndarray, replicas: int) -> np.ndarray:
    """Each request's replica, handed out in turn in order of ``times`` (ties in request order): the
    router's round robin, Dynamo's default (--router-mode round-robin, docs.nvidia.com/dynamo/v1.2.0/
    user-guides/kv-cache-aware-routing)."""
    w = np.empty(len(times), dtype=np.int64)
    w[np.argsort(times, kind="stable")] = np.arange(len(times)) % int(replicas)
    return w


@dataclasses.dataclass(frozen=True)
class _Pools:
    """One pass of both pools over given arrival times: per request the prefill pool's token
    (first_s), the decode pool's first (second_s) and last (finish_s), absolute seconds."""

    first_s: np.ndarray
    second_s: np.ndarray
    finish_s: np.ndarray
    p_results: list
    d_results: list


def _random_routes(rng, n: int, prefill_replicas: int, decode_replicas: int, router: str):
    """Each request's prefill and decode replica at random (the "random" router; (None, None) for
    round robin): drawn once, so a closed loop's passes route a request alike (redrawn, never settled)."""
    if router != "random":
        return None, None
    return rng.integers(0, prefill_replicas, size=n), rng.integers(0, decode_replicas, size=n)


def _run_pools(prefill, decode, inp, out, arrival, transfer, prefill_engine, decode_engine, prefill_replicas,
               decode_replicas, routes) -> _Pools:
    """Each prefill replica's requests through simulate (one output token: the one it samples), then,
    after each cache's transfer, each decode replica's (the prompt plus that token, its cache arrived:
    only the token is fed; the rest of the output). ``routes``: _random_routes's replicas, or
    (None, None) for round robin."""
    n = len(inp)
    first = np.full(n, np.nan)
    p_results, d_results = [], []
    pool = routes[0] if routes[0] is not None else _round_robin(arrival, prefill_replicas)
    for i in range(int(prefill_replicas)):
        idx = np.flatnonzero(pool == i)
        if len(idx) == 0:
            continue
        idx = idx[np.argsort(arrival[idx], kind="stable")]
        r = simulate(prefill, Requests(inp[idx], np.ones(len(idx), dtype=np.int64), arrival[idx] - arrival[idx][0], None,
                                       label="prefill"), prefill_engine)
        first[idx] = arrival[idx] + r.ttft_s
        p_results.append(r)
    finish = first.copy()  # one-token answers end at their first token
    second = np.full(n, np.nan)
    cont = np.flatnonzero(out > 1)
    d_arrival = first + transfer
    dpool = routes[1] if routes[1] is not None else np.full(n, -1)
    if routes[1] is None:
        dpool[cont] = _round_robin(d_arrival[cont], decode_replicas)
    # the cache arrives: the first token fed (a decode step, no op-by-op dispatch), no server time, no prompts held
    hit_engine = dataclasses.replace(decode_engine, prefix_hit=1.0, request_overhead_s=0, batch_wait_steps=0, eager_op_s=0,
                                     **dict.fromkeys(("adp_timeout_steps", "adp_batching_steps"), 0))
    for i in range(int(decode_replicas)):
        idx = cont[dpool[cont] == i]
        if len(idx) == 0:
            continue
        order = idx[np.argsort(d_arrival[idx], kind="stable")]
        t0 = d_arrival[order][0]
        r = simulate(decode, Requests(inp[order] + 1, out[order] - 1, d_arrival[order] - t0, None, label="decode"), hit_engine)
        finish[order] = d_arrival[order] + r.e2e_s
        second[order] = d_arrival[order] + r.ttft_s  # the decode pool's first token: the request's second
        d_results.append(r)
    return _Pools(first, second, finish, p_results, d_results)


def _closed_arrivals(finish_s: np.ndarray, concurrency: int) -> np.ndarray:
    """A closed loop's arrival times given each request's finish: the first ``concurrency`` at 0,
    then request C + k at the (k+1)-th finish (a user sends its next request when one ends)."""
    k = min(int(concurrency), len(finish_s))
    return np.concatenate([np.zeros(k), np.sort(finish_s)[: len(finish_s) - k]])


def _arrivals_at_latencies(latency_s: np.ndarray, concurrency: int) -> np.ndarray:
    """A closed loop's arrivals were each request to take ``latency_s`` whatever the others do: the
    first ``concurrency`` at 0, request C + k at the (k+1)-th finish, the users' next finishes in a
    heap (one pushed is never before the one popped, so they pop in order, as _closed_arrivals sorts)."""
    n, c, lat = len(latency_s), min(int(concurrency), len(latency_s)), latency_s.tolist()
    arrival = np.zeros(n)
    due = sorted(lat[:c])  # a sorted list is a heap
    for r in range(c, n):
        arrival[r] = t = heapq.heappop(due)
        heapq.heappush(due, t + lat[r])
    return arrival


def _closed_loop(prefill, decode, inp, out, concurrency, transfer, engines, replicas, router, routes, tolerance):
    """(arrivals, _Pools, passes) of a closed loop over both pools: the pools run on guessed arrival
    times, the next guess the loop's arrivals were each request to take its latency in that pass
    again (_arrivals_at_latencies; set from the finishes instead, as before 2026-12-06, one round
    of users settled a pass), until the arrivals the finishes set (_closed_arrivals) move by no more
    than ``tolerance`` x the mean end-to-end latency (0: 1e-9 of the run). The first guess: the
    first ``concurrency`` requests alone, each later round a mean latency of theirs apart. Past
    CLOSED_LOOP_PASSES passes refused, naming the last move and the requests that had settled."""
    n, c = len(inp), int(concurrency)
    k = min(c, n)
    head = _run_pools(prefill, decode, inp[:k], out[:k], np.zeros(k), transfer[:k], *engines, *replicas,
                      _random_routes(np.random.default_rng(0), k, *replicas, router))
    if k == n:
        return np.zeros(n), head, 1
    f = np.sort(head.finish_s)
    j = np.arange(n - k)
    arrival = np.concatenate([np.zeros(k), np.sort(f[j % k] + (j // k) * float(f.mean()))])
    for passes in range(1, CLOSED_LOOP_PASSES + 1):
        pools = _run_pools(prefill, decode, inp, out, arrival, transfer, *engines, *replicas, routes)
        new = _closed_arrivals(pools.finish_s, c)
        moves, mean_e2e = np.abs(new - arrival), float(np.mean(pools.finish_s - arrival))
        within = max(1e-9 * max(1.0, float(new.max())), tolerance * mean_e2e)
        moved = float(moves.max())
        if moved <= within:
            return (new if tolerance == 0 else arrival), pools, passes + 1
        arrival = _arrivals_at_latencies(pools.finish_s - arrival, c)
    settled = int(np.argmax(moves > within))  # the requests sent before the first arrival still moving had settled
    raise RooflineError(f"the closed loop of {c:,} users over the two pools did not settle in {CLOSED_LOOP_PASSES} passes: "
                        f"an arrival still moved {moved:.3g} s ({moved / mean_e2e:.2%} of the mean end-to-end latency) "
                        f"from one pass to the next (the arrivals of the first {settled:,} of {n:,} requests had "
                        f"settled): give --requests {max(settled, c):,} or fewer (fewer rounds of users), or an open loop "
                        "(a rate)",
                        field="concurrency", also=("requests",))


def simulate_disaggregated(prefill: StepCost, decode: StepCost, requests: Requests, prefill_engine: Engine = Engine(),
                           decode_engine: Engine = Engine(), prefill_replicas: int = 1, decode_replicas: int = 1,
                           kv_link: str | None = None, seed: int = 0,
                           price_per_gpu_hour: float | None = None, router: str = "random",
                           first_token: str = "prefill", tolerance: float = CLOSED_LOOP_TOLERANCE) -> ServingResult:
    """Prefill and decode on separate pools (DistServe, Splitwise; vLLM and SGLang's disaggregated
    serving): each request is prefilled on one of ``prefill_replicas``, which samples its first
    token; its KV cache then moves to one of ``decode_replicas`` (kv_transfer_seconds), which feeds
    that first token against the transferred cache and generates the rest. Each pool is this
    module's scheduler; the decode pool never runs a prompt chunk, so its inter-token latency is free
    of prefill interference. The pools may differ in size and layout (tensor or expert parallel).

    ``router``: "random" (a Poisson stream splits into Poisson streams) or "round-robin" (each
    pool's replicas in turn, in order of arrival at the pool: Dynamo's default router).
    ``first_token``: "prefill", the prefill pool's token streams to the client at once; or
    "decode", the client's stream comes from the decode pool (Dynamo's PrefillRouter flow: "Decode
    -->> Frontend: Stream tokens", docs/design_docs/disagg_serving.md), so TTFT takes in the
    transfer, the decode pool's queue and its first step, which emits the first two tokens together
    (TPOT then (end - first token) / (output - 1), as benchmarks measure it).

    Open loop (``requests.arrival_s``), or a closed loop of ``requests.concurrency`` users, each
    sending its next request when its last one ends: the pools are run to a fixed point of the
    arrival times (_closed_loop; the passes it took, the first round's alone counted, are
    ``settings["closed_loop_passes"]``), until no arrival moves by more than ``tolerance`` x the mean
    end-to-end latency (0: none moves; a tolerance reports the last pass, run on the arrivals it was
    given)."""
    for name, v in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas)):
        check_number(name, v, maximum=100_000, integer=True)
    if router not in ROUTERS:
        raise RooflineError(f"router {router!r}: one of {', '.join(ROUTERS)}", field="router")
    if first_token not in FIRST_TOKENS:
        raise RooflineError(f"first_token {first_token!r}: one of {', '.join(FIRST_TOKENS)} (the pool whose token the "
                            "client sees first)", field="first_token")
    if prefill.model.name != decode.model.name:
        raise RooflineError("the prefill and decode pools must serve the same model", field="model")
    if kv_link is not None:
        from roofline.plan.parallel import GPUS_PER_NODE, NODE_LINKS

        total = int(prefill_replicas) * prefill.tensor_parallel + int(decode_replicas) * decode.tensor_parallel
        if str(kv_link).strip().lower() in NODE_LINKS and total > GPUS_PER_NODE:
            raise RooflineError(f"kv_link {kv_link}: {total} GPUs span more than one node of {GPUS_PER_NODE}, and "
                                f"{kv_link} does not leave a node: give infiniband or roce", field="kv_link")
    rng = np.random.default_rng(seed)
    inp = np.asarray(requests.input_tokens, dtype=np.int64)
    out = np.asarray(requests.output_tokens, dtype=np.int64)
    transfer, link = kv_transfer_seconds(prefill, decode, inp, kv_link)
    engines, replicas = (prefill_engine, decode_engine), (prefill_replicas, decode_replicas)
    closed = requests.arrival_s is None
    if closed:
        check_number("tolerance", tolerance, strictly=False, maximum=0.5)
        arrival, pools, passes = _closed_loop(prefill, decode, inp, out, requests.concurrency, transfer, engines, replicas,
                                              router, _random_routes(rng, len(inp), *replicas, router), float(tolerance))
    else:
        arrival, passes = np.asarray(requests.arrival_s, dtype=float), None
        pools = _run_pools(prefill, decode, inp, out, arrival, transfer, *engines, *replicas,
                           _random_routes(rng, len(inp), *replicas, router))
    return _result(prefill, decode, requests, pools, arrival, transfer, link, decode_engine, replicas, router, first_token,
                   passes, tolerance, price_per_gpu_hour)


def _result(prefill, decode, requests, pools, arrival, transfer, link, decode_engine, replicas, router, first_token,
            passes, tolerance, price_per_gpu_hour) -> ServingResult:
    """The run's ServingResult from its pools' pass."""
    prefill_replicas, decode_replicas = replicas
    p_results, d_results, first, second, finish = pools.p_results, pools.d_results, pools.first_s, pools.second_s, pools.finish_s
    inp = np.asarray(requests.input_tokens, dtype=np.int64)
    out = np.asarray(requests.output_tokens, dtype=np.int64)
    seen = np.where(np.isfinite(second), second, first) if first_token == "decode" else first  # the client's first token
    ttft = seen - arrival
    e2e = finish - arrival
    tpot = np.where(out > 1, (finish - seen) / np.maximum(out - 1, 1), np.nan)
    durations = np.concatenate([r.step_durations_s for r in d_results]) if d_results else np.zeros(0)
    decodes = np.concatenate([r.step_decodes for r in d_results]) if d_results else np.zeros(0)
    # inter-token latency: the decode pool's gaps after its first token (its steps, and a preempted sequence's wait:
    # ServingResult.itl_gaps_s), and each request's gap between its first
    # token and its second: the prefill pool's token to the decode pool's (the transfer, the decode pool's queue and
    # step), or none where both come from the decode pool's first step
    gaps = (second - seen)[np.isfinite(second)]
    t_start, t_end = float(arrival.min()), float(np.nanmax(finish))
    duration = t_end - t_start
    gpus = int(prefill_replicas) * prefill.tensor_parallel + int(decode_replicas) * decode.tensor_parallel
    busy = float(durations.sum())
    spread = "at random" if router == "random" else "round robin, in order of arrival at each pool"
    shown = ("the first token comes from the prefill pool, the rest from the decode pool" if first_token == "prefill" else
             "the client's tokens stream from the decode pool (its first step gives the first two together), so TTFT "
             "takes in the prefill, the transfer and the decode pool's queue and first step")
    notes = (f"disaggregated: {prefill_replicas} prefill replica(s) of {prefill.tensor_parallel} GPU(s) and {decode_replicas} "
             f"decode replica(s) of {decode.tensor_parallel} GPU(s); each request's KV cache moves over {link} in "
             f"{np.mean(transfer) / MS:,.2f} ms on average (each GPU holding a shard sends it at e_m of the link, "
             f"plus one collective latency); {shown}; the decode pool runs no prompt (it feeds the first token against "
             f"the transferred cache); requests are spread over the replicas {spread}",) \
        + ((f"closed loop over the two pools: the arrivals settled after {passes} pass(es) of both pools"
            + (f" (to {tolerance:g} of the mean end-to-end latency)" if tolerance else ""),) if passes else ()) \
        + _pool_notes(p_results, d_results, closed=passes is not None)
    over = overload_note(arrival, e2e, duration, ttft) if passes is None and duration > 0 else None
    if over:
        notes = (over,) + notes
    last = d_results[-1] if d_results else p_results[-1]
    return ServingResult(
        f"{decode.describe()} (decode pool, {decode_replicas} replica(s)); prefill pool {prefill_replicas} replica(s) of "
        f"{prefill.machine.name} x {prefill.tensor_parallel}",
        requests.label, decode_engine, gpus, ttft, tpot, e2e, weighted_percentiles(np.concatenate([r.itl_gaps_s for r in d_results] + [gaps]), np.concatenate([r.itl_counts for r in d_results] + [np.ones(len(gaps))]), PERCENTILES),
        duration, int(out.sum()), int(inp.sum()), int(sum(r.computed_tokens for r in p_results)),
        int(sum(r.steps for r in p_results + d_results)),
        float((durations * decodes).sum() / busy) if busy else 0.0,
        float(np.mean([r.mean_step_tokens for r in d_results])) if d_results else 0.0,
        float(np.mean([r.kv_mean for r in d_results])) if d_results else 0.0,
        float(max([r.kv_peak for r in d_results], default=0.0)), int(sum(r.preemptions for r in p_results + d_results)),
        float(np.nansum(e2e) / duration), last.cache_bytes, notes, price_per_gpu_hour, durations, decodes,
        arrival.copy(), inp, out, {**step_settings(decode), **requests.settings,
                                   "disaggregated": [int(prefill_replicas), int(decode_replicas)],
                                   "prefill_tensor_parallel": prefill.tensor_parallel,
                                   "prefill_expert_parallel": bool(prefill.expert_parallel),
                                   "kv_link": link, "kv_transfer_mean_s": float(np.mean(transfer)),
                                   "router": router, "first_token": first_token, "closed_loop_passes": passes,
                                   "closed_loop_tolerance": float(tolerance) if passes else None},
        overload=over or "")


def split_search_requests(replicas: int, requests: int, max_seqs: int) -> int:
    """About how many requests best_disaggregation simulates for its splits: per split P:D a flood
    of max(requests x G, FLOOD_BATCHES x max_seqs x D), SEARCH_STEPS + 2 runs of requests x G (the
    bisection and its ends) and two checks of CHECK_FACTOR times that (the typical path; the
    co-located search is a split's worth more)."""
    g, n = int(replicas), int(requests) * int(replicas)
    floods = sum(max(n, FLOOD_BATCHES * int(max_seqs) * d) for d in range(1, g))
    return floods + (g - 1) * ((SEARCH_STEPS + 2) * n + 2 * min(CHECK_FACTOR * n, MAX_REQUESTS))


def check_split_budget(replicas: int, requests: int, max_seqs: int) -> None:
    """Refuse a split search past DISAGG_BUDGET_REQUESTS before any of it runs, naming its size and
    the largest G that fits."""
    work = split_search_requests(replicas, requests, max_seqs)
    if work <= DISAGG_BUDGET_REQUESTS:
        return
    fits = max((g for g in range(2, int(replicas)) if split_search_requests(g, requests, max_seqs) <= DISAGG_BUDGET_REQUESTS),
               default=None)
    hint = (f"--disagg-search {fits} fits with --requests {requests:,}" if fits else
            f"no G fits with --requests {requests:,} and --max-seqs {max_seqs:,}")
    raise RooflineError(f"--disagg-search {replicas} would simulate about {work:,} requests ({replicas - 1} splits, each a "
                        f"rate search over runs of {requests * replicas:,} and a flood of {FLOOD_BATCHES} full batches of "
                        f"--max-seqs {max_seqs:,} a decode replica), past the split search's budget of "
                        f"{DISAGG_BUDGET_REQUESTS:,} (about a minute on a 2-core CPU): {hint}; fewer --requests or "
                        "--max-seqs search more splits", field="disagg_search")


def best_disaggregation(step: StepCost, replicas: int, input_tokens, output_tokens, ttft_s=None, tpot_s=None,
                        percentile=90.0, engine: Engine = Engine(), requests: int = 1000, seed: int = 0,
                        kv_link: str | None = None, price_per_gpu_hour: float | None = None,
                        burstiness: float = 1.0, progress=None) -> dict:
    """The split of ``replicas`` groups (of step.tensor_parallel GPUs) into P prefill and D decode
    replicas that serves the highest Poisson rate (gamma gaps of ``burstiness``) within the targets, against all ``replicas`` as
    plain (co-located) replicas: {"splits": [(P, D, best rate)], "best": (P, D, rate),
    "colocated": rate of replicas x one replica's best, "notes": the co-located search's and the
    best split's notes, once each}. Each split's rate comes from the same bisection as max_rate_within,
    on simulate_disaggregated, its answer checked the same way (a run CHECK_FACTOR times longer, the
    rate lowered until one meets the targets), so split and co-located answers compare alike; ``progress(done, of, rate)`` is called after each split.
    A search past DISAGG_BUDGET_REQUESTS simulated requests (split_search_requests) is refused before it runs."""
    slo = slo_targets(ttft_s, tpot_s, percentile)
    if slo is None:
        raise RooflineError("the split search needs a target: a TTFT or a TPOT", field="slo_ttft")
    g = int(check_number("replicas", replicas, minimum=2, strictly=False, maximum=64, integer=True))
    check_split_budget(g, requests, engine.max_seqs)
    one = max_rate_within(step, input_tokens, output_tokens, ttft_s, tpot_s, percentile, engine, requests, seed,
                          burstiness=burstiness)
    colocated = None if one.slo["best"] is None else g * one.slo["best"]
    hi = 1.5 * g * max(one.values)
    splits, split_notes, failed = [], {}, {}
    checked = min(CHECK_FACTOR * requests * g, MAX_REQUESTS)
    for p in range(1, g):
        d = g - p
        # as many requests per replica as the co-located search runs on one: g x requests in all
        sw = rate_search(lambda rate, n=requests * g, p=p, d=d: simulate_disaggregated(
            step, step, poisson_requests(rate, n, input_tokens, output_tokens, seed, burstiness), engine, engine, p, d,
            kv_link, seed, price_per_gpu_hour), hi, dict(slo), flood_requests=max(requests * g, FLOOD_BATCHES * engine.max_seqs * d),
            check_requests=checked)  # checked as the co-located answer is
        splits.append((p, d, sw.slo["best"]))
        if sw.slo.get("failed_checks"):
            failed[f"{p}:{d}"] = list(sw.slo["failed_checks"])
        if progress is not None:
            progress(p, g - 1, sw.slo["best"])
        if sw.slo["best"] is not None:  # the split's own notes at its best rate (the KV transfer, each pool's)
            split_notes[(p, d)] = sw.results[sw.values.index(sw.slo["best"])].notes
    ok = [s for s in splits if s[2] is not None]
    best = max(ok, key=lambda s: s[2]) if ok else None
    notes = list(one.to_dict()["notes"]) + list(split_notes.get(best[:2], ()) if best else ())
    low = one.results[0]
    q = slo["percentile"]
    return {"splits": splits, "best": best, "colocated": colocated,
            # each answer was run again this long (None where no rate met the targets: nothing to check)
            "checked_requests": checked if ok else None,
            "colocated_checked_requests": one.slo.get("checked_requests") if colocated is not None else None,
            "failed_checks": failed, "arrivals": "poisson" if burstiness == 1.0 else "gamma", "burstiness": float(burstiness),
            "lightest": {"rate_per_s": float(one.values[0]), "ttft_s": low.percentile("ttft", q),
                         "tpot_s": low.percentile("tpot", q)},  # the co-located search's lightest load: why none may meet
            "gpus": g * step.tensor_parallel, "slo": slo, "notes": list(dict.fromkeys(notes))}
