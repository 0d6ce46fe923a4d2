"""Serving plans (docs/serving.md): what a deployment delivers under load, step by step, from the
per-op costs of roofline.plan.step (StepCost).

    engine.py     Engine: the scheduler's budgets, cache blocks, prefix caching, speculation
    requests.py   Requests: open loop (poisson_requests) or closed loop (closed_requests)
    results.py    ServingResult: latencies per request and per step, as a table, JSON and CSV
    cache.py      the KV cache a replica holds and how it grows
    scheduler.py  simulate: a continuous-batching scheduler (vLLM V1), pipeline stages
    state.py      RunState: the requests' side of a run (arrivals, queue, tokens, finishes, sums)
    kvpool.py     KVPool: sequence slots and their cache blocks (admit, grow, release, preempt)
    schedule.py   schedule: the step's plan (decodes, prompt chunks) -> StepPlan
    advance.py    advance: a step applied (time, tokens, completions); stretch: decode steps at once
    stretch.py    the closed form of a decode-only stretch; the per-step records
    assemble.py   the ServingResult and its notes from a finished run
    search.py     sweep_concurrency, max_rate_within: the curve and the SLO search -> ServingSweep;
                  seed_spread: a run's spread over seeds; best_parallelism: the replica size for a rate
    disagg.py     prefill/decode disaggregation
    render.py     the plain-text tables

Each name below is loaded from its module on first use (roofline.lazy).
"""

from roofline.lazy import lazy_package

__all__ = lazy_package(__name__, {
    "roofline.serving.engine": ("Engine",),
    "roofline.serving.requests": ("MAX_REQUESTS", "Requests", "closed_requests", "lengths", "poisson_requests", "read_lengths"),
    "roofline.serving.results": ("PERCENTILES", "ServingResult", "step_settings"),
    "roofline.serving.scheduler": ("simulate", "simulate_pipelined"),
    "roofline.serving.search": ("SEARCH_STEPS", "ServingSweep", "best_parallelism", "max_rate_within", "meets_slo",
                                "seed_spread", "spread_note", "sweep_concurrency"),
    "roofline.serving.disagg": ("best_disaggregation", "kv_transfer_seconds", "simulate_disaggregated"),
})
