"""Serving sweeps and the SLO search (docs/serving.md): the throughput versus latency curve over
concurrencies or rates, and the highest rate one replica sustains within a TTFT / TPOT target.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from roofline.errors import MAX_REQUESTS, RooflineError
from roofline.plan.step import StepCost
from roofline.serving.engine import Engine
from roofline.serving.parameters import BY_NAME  # the declared ranges: the CLI's, the API's and these checks'
from roofline.serving.requests import check_burstiness, closed_requests, poisson_requests
from roofline.serving.results import ServingResult, completion_rate_per_s
from roofline.serving.scheduler import simulate
from roofline.tables import Tabular


@dataclass(frozen=True)
class ServingSweep(Tabular):
    """Simulated runs at several concurrencies (closed loop) or rates (open loop): the throughput
    versus latency curve (per GPU against per user tokens/s)."""

    ROWS_KEY = "points"

    over: str  # "concurrency" or "rate"
    values: tuple
    results: tuple  # ServingResult per value
    slo: dict | None = None  # {"ttft_s", "tpot_s", "percentile", "best": value or None}
    target_rate: float | None = None  # requests/s the deployment must serve (rate search): replicas_needed

    @property
    def replicas_needed(self) -> int | None:
        """Data-parallel replicas (each the searched tensor-parallel group) that serve
        ``target_rate`` within the SLO: ceil(target / the best rate one replica sustains)."""
        best = (self.slo or {}).get("best")
        if self.target_rate is None or best is None or self.over != "rate":
            return None
        return int(math.ceil(self.target_rate / best - 1e-9))

    def sweep_notes(self) -> tuple[str, ...]:
        """What the points of a concurrency sweep do not do as labelled: users past the requests a
        point simulated (never that many in flight), or past the engine's max sequences (they queue)."""
        if self.over != "concurrency":
            return ()
        out = []
        short = [(v, r.requests) for v, r in zip(self.values, self.results) if v > r.requests]
        if short:
            out.append("fewer requests than users at " + ", ".join(f"{v:,} users ({n:,} requests)" for v, n in short)
                       + ": those points never have that many in flight (give --requests at least the users)")
        seqs = self.results[0].engine.max_seqs
        over = [v for v in self.values if v > seqs]
        if over:
            out.append(f"users past the engine's {seqs:,} sequences ({', '.join(f'{v:,}' for v in over)}) wait in its "
                       "queue: their TTFT includes the wait (--max-seqs)")
        return tuple(out)

    def rows(self) -> list[dict]:
        out = []
        for v, r in zip(self.values, self.results):
            m = r.to_dict()
            out.append({self.over: v, "requests_per_s": m["requests_per_s"],
                        "output_tokens_per_s_per_gpu": m["output_tokens_per_s_per_gpu"],
                        "per_user_tokens_per_s": m["per_user_tokens_per_s"], "ttft_p50_s": m["ttft_p50_s"],
                        "ttft_p99_s": m["ttft_p99_s"], "tpot_p50_s": m["tpot_p50_s"], "tpot_p99_s": m["tpot_p99_s"],
                        "mean_decode_batch": m["mean_decode_batch"], "kv_cache_peak": m["kv_cache_peak"],
                        "preemptions": m["preemptions"],
                        **({"cost_per_million_output_tokens": m["cost_per_million_output_tokens"]}
                           if "cost_per_million_output_tokens" in m else {}),
                        **({f"ttft_p{self.slo['percentile']:g}_s": r.percentile("ttft", self.slo["percentile"]),
                            f"tpot_p{self.slo['percentile']:g}_s": _none_if_nan(r.percentile("tpot", self.slo["percentile"])),
                            "meets_slo": meets_slo(r, self.slo)} if self.slo else {}),
                        "overloaded": r.overloaded,
                        "over_capacity": self.slo is not None and r.settings.get("rate_per_s", 0.0)
                        > self.slo.get("capacity_per_s", math.inf)})
        return out

    def to_dict(self) -> dict:
        first = self.results[0]
        arrivals = {k: first.settings[k] for k in ("arrivals", "burstiness") if k in first.settings}
        out = {**{k: first.settings[k] for k in ("model", "machine")},
               **{k: first.settings[k] for k in ("kernels", "kernels_source", "kernels_transferred_from") if k in first.settings},
               "description": first.description, "gpus": first.gpus,
               "engine": dataclasses.asdict(first.engine), **arrivals,
               "over": self.over, "points": self.rows(), "slo": self.slo,
               "notes": list(self.sweep_notes()) + list(first.notes)}
        if self.over == "rate" and (self.slo or {}).get("best") is not None:
            short = self.results[self.values.index(self.slo["best"])].sample_note()
            if short:
                out["notes"] = [short] + out["notes"]
        if self.target_rate is not None:
            n = self.replicas_needed
            out["target"] = {"requests_per_s": self.target_rate, "replicas": n, "gpus": None if n is None else n * first.gpus}
        return out

    def to_csv(self) -> str:
        from roofline.tables import rows_to_csv

        return rows_to_csv([{k: ("" if v is None else v) for k, v in r.items()} for r in self.rows()])

    def to_table(self) -> str:
        from roofline.serving.render import serving_sweep_table

        return serving_sweep_table(self)


def _none_if_nan(x: float):
    return None if not math.isfinite(x) else x


def meets_slo(result: ServingResult, slo: dict | None) -> bool:
    """Both percentiles within their targets (a target of None is no constraint), at a rate the run
    holds: an overloaded run (ServingResult.overloaded) meets none, whatever its sample's
    percentiles (a short sample, or a TTFT target that a decode pool's queue never reaches)."""
    if not slo:
        return True
    if result.overloaded or result.settings.get("rate_per_s", 0.0) > slo.get("capacity_per_s", math.inf):
        return False
    p = slo["percentile"]
    ok = True
    if slo.get("ttft_s") is not None:
        ok &= result.percentile("ttft", p) <= slo["ttft_s"]
    if slo.get("tpot_s") is not None:
        t = result.percentile("tpot", p)
        ok &= (not math.isfinite(t)) or t <= slo["tpot_s"]
    return bool(ok)


def slo_targets(ttft_s, tpot_s, percentile) -> dict | None:
    """The targets a search meets, checked: {"ttft_s", "tpot_s", "percentile"} (the searches add
    their answer to it), None without a TTFT or a TPOT target."""
    if ttft_s is None and tpot_s is None:
        return None
    for name, v in (("slo_ttft", ttft_s), ("slo_tpot", tpot_s)):
        if v is not None:
            BY_NAME[name].check(v)
    BY_NAME["percentile"].check(percentile)
    return {"ttft_s": ttft_s, "tpot_s": tpot_s, "percentile": float(percentile)}


def sweep_concurrency(step: StepCost, concurrencies, input_tokens, output_tokens, engine: Engine = Engine(),
                      requests: int | None = None, seed: int = 0, price_per_gpu_hour: float | None = None,
                      ttft_s=None, tpot_s=None, percentile=90.0, draft: StepCost | None = None) -> ServingSweep:
    """Closed-loop runs at each concurrency, ``requests`` each (default: 8 per user, 200 to 20,000);
    the concurrencies in increasing order, each once (a curve is read left to right)."""
    slo = slo_targets(ttft_s, tpot_s, percentile)
    values = tuple(sorted({int(BY_NAME["concurrency"].check(c)) for c in concurrencies}))
    results = tuple(simulate(step, closed_requests(c, requests or min(max(200, 8 * c), 20_000), input_tokens, output_tokens, seed),
                             engine, price_per_gpu_hour, draft=draft) for c in values)
    if slo:
        ok = [v for v, r in zip(values, results) if meets_slo(r, slo)]
        slo["best"] = max(ok) if ok else None
    return ServingSweep("concurrency", values, results, slo)


FLOOD_RATE_PER_S = 1e9  # requests/s offered to find a rate search's capacity: every request at once
FLOOD_BATCHES = 8  # ... and at least this many full batches (max_seqs) of them, so that its middle half is saturated
SEARCH_STEPS = 14  # bisections of the rate search (log scale), at most
SEARCH_RESOLUTION = 0.01  # ... it stops when the bracket is this close (its seeds alone move the answer ~3%)
CHECK_FACTOR = 4  # the best rate is run again with this many times the requests (a queue near capacity settles slowly)
CHECK_BACKOFF = 1.05  # ... and, where the longer run misses, tried this much lower, then bisected with longer runs


def max_rate_within(step: StepCost, input_tokens, output_tokens, ttft_s=None, tpot_s=None, percentile=90.0,
                    engine: Engine = Engine(), requests: int = 1000, seed: int = 0,
                    price_per_gpu_hour: float | None = None, target_rate: float | None = None,
                    draft: StepCost | None = None, burstiness: float = 1.0, progress=None) -> ServingSweep:
    """The highest Poisson rate (gamma gaps of ``burstiness``, requests.poisson_requests) whose TTFT and TPOT percentiles meet the targets, by bisection in
    log rate between a rate that meets them and the engine's saturated throughput (closed loop
    at max_seqs users) x 1.5; every rate tried is a point of the returned sweep, the best in
    ``slo["best"]`` (None when even the lowest rate misses: the targets are below one request
    alone). With ``target_rate``, the replicas (and GPUs) that serve it: ServingSweep.replicas_needed
    (requests spread evenly over identical replicas). The best rate found is run again with
    CHECK_FACTOR times the requests (rate_search's check); ``progress(runs, rate)`` after each run."""
    slo = slo_targets(ttft_s, tpot_s, percentile)
    if slo is None:
        raise RooflineError("the rate search needs a target: a TTFT or a TPOT", field="slo_ttft")
    check_burstiness(burstiness)
    if target_rate is not None:
        BY_NAME["target_rate"].check(target_rate)
    sat = simulate(step, closed_requests(engine.max_seqs, max(requests, 2 * engine.max_seqs), input_tokens, output_tokens,
                                         seed), engine, draft=draft)
    return rate_search(lambda rate, n=requests: simulate(step, poisson_requests(rate, n, input_tokens, output_tokens, seed,
                                                                                burstiness), engine, price_per_gpu_hour,
                                                         draft=draft),
                        1.5 * sat.requests_per_s, slo, target_rate, flood_requests=max(requests, FLOOD_BATCHES * engine.max_seqs),
                        check_requests=min(CHECK_FACTOR * requests, MAX_REQUESTS), progress=progress)


def rate_search(run_at, hi: float, slo: dict, target_rate=None, flood_requests: int | None = None,
                 check_requests: int | None = None, progress=None) -> ServingSweep:
    """Bisection in log rate between hi / 1000 and ``hi`` for the highest rate whose run (run_at(rate)
    -> ServingResult) meets ``slo``; every run is a point of the sweep, the best in slo["best"].
    First the capacity, slo["capacity_per_s"]: run_at(FLOOD_RATE_PER_S, flood_requests) (every request
    at once, FLOOD_BATCHES full batches of them at least) holds its saturated throughput in the
    middle half of its completions; a rate above it meets no target (meets_slo). The bisection
    stops at SEARCH_RESOLUTION. With ``check_requests``, the best is run again with that many
    requests (run_at(rate, check_requests)): near capacity a short sample's queue has not settled,
    and its latencies meet targets a longer run misses; where the longer run misses, the rate is
    lowered by CHECK_BACKOFF, and where that misses too the answer is bisected with longer runs
    between the lightest rate and it (slo["checked_requests"], slo["failed_checks"]: the rates the
    longer runs refused; those points of the sweep are the longer runs). A 100-request search of
    Qwen3 235B on 8 H100s met a 1 s TTFT at 42/s, its longer runs at no 5% step down to 30/s: the
    old eight steps ended in no answer, which read as a target no load meets."""
    lo = hi / 1000.0
    tried = {}
    # the most it holds: a flood (all requests at once) run at its saturated throughput in the middle half of
    # its completions; a rate above that queues without end however short the sample shows it
    flood = run_at(FLOOD_RATE_PER_S) if flood_requests is None else run_at(FLOOD_RATE_PER_S, flood_requests)
    cap = completion_rate_per_s(flood.arrival_s, flood.e2e_s)
    if math.isfinite(cap):  # too few requests to tell: no cap
        slo["capacity_per_s"] = cap

    def run(rate, n=None):
        tried[rate] = run_at(rate) if n is None else run_at(rate, n)
        if progress is not None:
            progress(len(tried), rate)
        return meets_slo(tried[rate], slo)

    def bisect(low, high, n=None):
        """The highest rate in (low, high) whose run of n requests meets the targets, low (which met
        them) where none does, to SEARCH_RESOLUTION in log rate; and the rates refused."""
        found, refused = low, []
        for _ in range(SEARCH_STEPS):
            if high / low < 1.0 + SEARCH_RESOLUTION:
                break
            mid = math.sqrt(low * high)
            if run(mid, n):
                low = found = mid
            else:
                high = mid
                refused.append(mid)
        return found, refused

    best = None
    floor = lo
    if run(lo):
        best = hi if run(hi) else bisect(lo, hi)[0]
    if best is not None and check_requests:
        failed = []
        if not run(best, check_requests):  # one step down, where the short sample was a little optimistic ...
            failed.append(best)
            step_down = best / CHECK_BACKOFF
            if step_down > floor and run(step_down, check_requests):
                best = step_down
            else:  # ... else a bisection with longer runs, from the lightest rate (which must pass one) up
                if step_down > floor:
                    failed.append(step_down)
                if not run(floor, check_requests):
                    best = None
                else:
                    best, refused = bisect(floor, min(step_down, failed[-1]), check_requests)
                    failed += refused
        slo["checked_requests"], slo["failed_checks"] = int(check_requests), sorted(failed, reverse=True)
        slo["check_backoff"] = CHECK_BACKOFF
        # the short runs that met the targets above the answer and were not run longer (said under the table)
        slo["short_passes_above"] = [] if best is None else sorted(
            v for v, r in tried.items() if v > best and r.requests != check_requests and meets_slo(r, slo))
    slo["best"] = best
    values = tuple(sorted(tried))
    return ServingSweep("rate", values, tuple(tried[v] for v in values), slo, target_rate)


SPREAD_METRICS = (("output tokens/s", "output_tokens_per_s", None), ("TTFT p90", "ttft", 90), ("TTFT p99", "ttft", 99),
                  ("TPOT p90", "tpot", 90), ("TPOT p99", "tpot", 99))  # (words, what, percentile)


def _spread_key(what: str, p) -> str:
    return what if p is None else f"{what}_p{p}_s"


def seed_spread(result: ServingResult, rerun, seeds) -> dict | None:
    """How much of a run is its random sample: ``rerun(seed)`` simulates the same configuration with
    another seed's arrivals and lengths, for each of ``seeds`` (``result`` is the first seed's run).
    Returns {"seeds", key: [low, high], ...} over all of them (output_tokens_per_s; ttft_p90_s,
    ttft_p99_s, tpot_p90_s, tpot_p99_s in seconds), or None when every seed gives the same run (a closed
    loop of fixed lengths draws nothing). Each metric's spread is the sampling's, not the model's."""
    runs = [result] + [rerun(s) for s in seeds[1:]]
    out = {"seeds": list(seeds)}
    for label, what, p in SPREAD_METRICS:
        vals = [r.output_tokens_per_s if p is None else r.percentile(what, p) for r in runs]
        vals = [v for v in vals if math.isfinite(v)]
        if vals:
            out[_spread_key(what, p)] = [min(vals), max(vals)]
    if all(v[1] - v[0] <= 1e-12 * max(abs(v[1]), 1e-30) for k, v in out.items() if k != "seeds"):
        return None
    return out


def spread_seeds(seed: int, count: int, largest: int = 2**32 - 1) -> list[int]:
    """The seeds a spread runs: ``seed`` and the next count - 1, or, where those would pass
    ``largest`` (the CLI's --seed bound), the ones below it, so every seed named can be rerun."""
    seeds = list(range(seed, seed + count))
    return seeds if seeds[-1] <= largest else [seed - i for i in range(count)]


def spread_note(spread: dict, drawn: str = "arrivals and lengths") -> str:
    """seed_spread in words: 'over seeds 0-2 of these arrivals and lengths: 2,470-2,490 output
    tokens/s; ...' (``drawn``: what the seeds draw, 'lengths' for a closed loop)."""
    seeds = spread["seeds"]
    which = f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[0] + len(seeds))) else ", ".join(map(str, seeds))
    parts = []
    for label, what, p in SPREAD_METRICS:
        if _spread_key(what, p) not in spread:
            continue
        lo, hi = spread[_spread_key(what, p)]
        if p is None:
            a, b, unit = f"{lo:,.0f}", f"{hi:,.0f}", "output tokens/s"
        else:
            unit, scale = ("s", 1.0) if hi >= 10 else ("ms", 1e-3)  # one unit for both ends
            top = hi / scale
            places = max(0, 2 - math.floor(math.log10(top))) if top > 0 else 0  # both ends to the high end's 3 figures
            a, b = f"{lo / scale:,.{places}f}", f"{top:,.{places}f}"
        parts.append(" ".join(x for x in (label if p is not None else "", a if a == b else f"{a}-{b}", unit) if x))
    return (f"seed spread: over seeds {which} of these {drawn}, " + "; ".join(parts)
            + " (the sample's spread, not the model's error; --seeds N for more, --requests for a longer sample)")


def best_parallelism(make_step, sizes, input_tokens, output_tokens, ttft_s=None, tpot_s=None, percentile=90.0,
                     engine: Engine = Engine(), requests: int = 1000, seed: int = 0, price_per_gpu_hour=None,
                     target_rate=None, burstiness: float = 1.0, progress=None) -> dict:
    """The replica size that serves a target rate within the SLO on the fewest GPUs: for each of
    ``sizes`` (GPUs per replica), ``make_step(size)`` -> StepCost (or a RooflineError: that size is
    refused, its reason kept), max_rate_within its best rate per replica, and with ``target_rate``
    the replicas ceil(target / best) and GPUs replicas x size (``engine``: an Engine, or size -> Engine where
    its defaults follow the replica's GPUs, as SGLang's memory share does). The best: the fewest GPUs for the
    target (ties: the higher rate per GPU), or without a target the highest rate per GPU. Returns
    {"sizes": [{"gpus_per_replica", "memory_fraction" (the engine's share at that size), "rate_per_s", "rate_per_gpu", "replicas", "gpus", "cost_per_million_output_tokens",
    "output_tokens_per_s_per_gpu", "refused", and with a target and a price "cost_at_target_per_million_output_tokens":
    the row's GPUs serving the target's output tokens}], "best": the best size (GPUs per replica) or None, "best_index",
    "slo", "target_rate", "requests", "checked_requests", "arrivals", "burstiness", "notes": the best size's run's}."""
    slo = slo_targets(ttft_s, tpot_s, percentile)
    if slo is None:
        raise RooflineError("the parallelism search needs a target: a TTFT or a TPOT", field="slo_ttft")
    rows, notes = [], []
    sizes = list(dict.fromkeys(int(x) for x in sizes))  # each size once, in the order given
    checked = None
    for i, size in enumerate(sizes):
        row = {"gpus_per_replica": int(size), "rate_per_s": None, "rate_per_gpu": None, "replicas": None, "gpus": None,
               "cost_per_million_output_tokens": None, "output_tokens_per_s_per_gpu": None, "refused": None}
        try:
            step = make_step(int(size))
            sized = engine(int(size)) if callable(engine) else engine  # an engine whose memory share follows the size
            row["memory_fraction"] = sized.memory_fraction
            sw = max_rate_within(step, input_tokens, output_tokens, ttft_s, tpot_s, percentile, sized, requests, seed,
                                 price_per_gpu_hour, target_rate, burstiness=burstiness)
        except RooflineError as exc:
            row["refused"], row["refused_field"] = str(exc), exc.field
            rows.append(row)
            notes.append([])
            if progress is not None:
                progress(i + 1, len(sizes), None)
            continue
        best = sw.slo["best"]
        checked = sw.slo.get("checked_requests", checked)
        if best is not None:
            r = sw.results[sw.values.index(best)]
            row.update(rate_per_s=best, rate_per_gpu=best / size, output_tokens_per_s_per_gpu=r.output_tokens_per_s / r.gpus,
                       cost_per_million_output_tokens=r.cost_per_million_output_tokens)
            if target_rate is not None:
                row["replicas"] = sw.replicas_needed
                row["gpus"] = sw.replicas_needed * int(size)
                if price_per_gpu_hour is not None:  # the GPUs the row needs, serving the target's output tokens
                    tokens_per_s = target_rate * r.output_tokens / r.requests
                    row["cost_at_target_per_million_output_tokens"] = (price_per_gpu_hour * row["gpus"] / 3600.0
                                                                       / tokens_per_s * 1e6)
            notes.append(list(r.notes))
        else:
            notes.append([])
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(sizes), best)
    ok = [i for i, r in enumerate(rows) if r["rate_per_s"] is not None]
    if not ok:
        best = None
    elif target_rate is not None:
        best = min(ok, key=lambda i: (rows[i]["gpus"], -rows[i]["rate_per_gpu"]))
    else:
        best = max(ok, key=lambda i: rows[i]["rate_per_gpu"])
    return {"sizes": rows, "best": None if best is None else rows[best]["gpus_per_replica"], "best_index": best,
            "slo": slo, "target_rate": target_rate, "requests": int(requests), "checked_requests": checked,
            "arrivals": "poisson" if burstiness == 1.0 else "gamma", "burstiness": float(burstiness),
            "notes": notes[best] if best is not None else []}  # the best size's own notes (its cache, its links)
