"""Serving plans (docs/serving.md): what a deployment delivers under load, step by step, from the
per-op costs of roofline.plan.step (StepCost).

    engine.py     Engine: the scheduler's budgets, cache blocks, prefix caching, speculation
    requests.py   Requests: open loop (poisson_requests) or closed loop (closed_requests)
    results.py    ServingResult: latencies per request and per step, as a table, JSON and CSV
    cache.py      the KV cache a replica holds and how it grows
    scheduler.py  simulate: a continuous-batching scheduler (vLLM V1), pipeline stages
    search.py     sweep_concurrency, max_rate_within: the curve and the SLO search -> ServingSweep;
                  seed_spread: a run's spread over seeds; best_parallelism: the replica size for a rate
    disagg.py     prefill/decode disaggregation
    render.py     the plain-text tables
"""

from roofline.serving.engine import Engine
from roofline.serving.requests import MAX_REQUESTS, Requests, closed_requests, lengths, poisson_requests, read_lengths
from roofline.serving.results import PERCENTILES, ServingResult, step_settings
from roofline.serving.scheduler import simulate, simulate_pipelined
from roofline.serving.search import (SEARCH_STEPS, ServingSweep, best_parallelism, max_rate_within, meets_slo, seed_spread,
                                     spread_note, sweep_concurrency)
from roofline.serving.disagg import best_disaggregation, kv_transfer_seconds, simulate_disaggregated

__all__ = ["Engine", "MAX_REQUESTS", "PERCENTILES", "Requests", "SEARCH_STEPS", "ServingResult", "ServingSweep",
           "best_disaggregation", "best_parallelism", "closed_requests", "kv_transfer_seconds", "lengths", "max_rate_within", "meets_slo",
           "poisson_requests", "read_lengths", "seed_spread", "simulate", "simulate_disaggregated", "simulate_pipelined",
           "spread_note", "step_settings", "sweep_concurrency"]
