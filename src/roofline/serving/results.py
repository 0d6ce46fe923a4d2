"""What a simulated serving run delivers (docs/serving.md): ServingResult, per request (TTFT,
TPOT, end-to-end latency) and per step, as a table, JSON and CSV.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from roofline.errors import MAX_REQUESTS
from roofline.transformer import cache_name
from roofline.plan.step import StepCost
from roofline.serving.engine import Engine
from roofline.tables import Tabular
from roofline.units import MEGA, format_latency, format_number


PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class ServingResult(Tabular):
    """One simulated run. Times in seconds; rates per second for the replica
    (``tensor_parallel`` GPUs); ``per_gpu`` figures divide by them."""

    ROWS_KEY = None  # rows(): one per request

    description: str
    workload: str
    engine: Engine
    gpus: int
    ttft_s: np.ndarray = field(repr=False)
    tpot_s: np.ndarray = field(repr=False)
    e2e_s: np.ndarray = field(repr=False)
    itl_s: dict = field(repr=False)  # percentile -> seconds
    duration_s: float = 0.0
    output_tokens: int = 0
    input_tokens: int = 0
    computed_tokens: int = 0  # prompt tokens computed (recomputes included, prefix hits not)
    steps: int = 0
    mean_decode_batch: float = 0.0
    mean_step_tokens: float = 0.0
    kv_mean: float = 0.0
    kv_peak: float = 0.0
    preemptions: int = 0
    mean_in_system: float = 0.0
    cache_bytes: float = 0.0
    notes: tuple = ()
    price_per_gpu_hour: float | None = None
    step_durations_s: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # every step's seconds
    step_decodes: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # sequences it decoded
    arrival_s: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # per request
    request_input: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    request_output: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    settings: dict = field(default_factory=dict, repr=False)  # model, machine, precision, tensor parallel, link
    step_chunk_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # every step's prompt tokens
    step_chunk_prefix: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # ... and their mean prefix
    step_chunk_count: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # ... in how many chunks
    overload: str = ""  # overload_note's words where an open-loop run was offered more than it holds ("": it held)
    scheduler: str = ""  # the run's scheduler note, as notes hold it ("": its notes have none of their own: disaggregated)
    # the inter-token gaps itl_s is taken from, each counted once per delivery that had it (StepRecords.inter_token)
    itl_gaps_s: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    itl_counts: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    held_steps: int = 0  # steps that ran their decodes alone, prompts held (Engine.batch_wait_steps, adp_timeout_steps)

    @property
    def cache_bytes_per_gpu(self) -> float:
        """What each GPU keeps for its cache: ``cache_bytes`` is the scheduler's pool, one GPU's with
        tensor or pipeline parallelism, one GPU of each data-parallel attention group's with those."""
        return self.cache_bytes / self.settings.get("attention_data_parallel", 1)

    @property
    def replica_cache_bytes(self) -> float:
        """The replica's cache over all its GPUs (``kv_cache_gpus``; disaggregated: one decode replica's)."""
        return self.cache_bytes_per_gpu * self.settings.get("kv_cache_gpus", 1)

    @property
    def requests(self) -> int:
        return len(self.e2e_s)

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s

    @property
    def total_tokens_per_s(self) -> float:
        return (self.output_tokens + self.input_tokens) / self.duration_s

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.duration_s

    def chunk_steps(self) -> dict | None:
        """The run's steps that fed prompt tokens, on average: {"steps", "decode_batch", "chunks",
        "chunk", "prefix"} (the mean such step's decodes, its number of prompt chunks, their mean
        tokens and mean prefix); None where the run records no steps by kind (disaggregated and
        pipelined runs) or fed no prompt."""
        ck = self.step_chunk_tokens
        if not len(ck) or len(ck) != len(self.step_decodes) or not (ck > 0).any():
            return None
        m = ck > 0
        chunks = float(self.step_chunk_count[m].mean())
        return {"steps": int(m.sum()), "decode_batch": float(self.step_decodes[m].mean()), "chunks": chunks,
                "chunk": float(ck[m].sum() / self.step_chunk_count[m].sum()),
                "prefix": float((self.step_chunk_prefix[m] * ck[m]).sum() / ck[m].sum())}

    def sample_note(self) -> str | None:
        """sample_note of this run (a rate sample that spans too few end-to-end latencies)."""
        return sample_note(self)

    def shown_notes(self) -> tuple:
        """Every note a report of this run prints: its sample_note first where it has one, then its own."""
        short = self.sample_note()
        return ((short,) if short and short not in self.notes else ()) + tuple(self.notes)

    @property
    def overloaded(self) -> bool:
        """An open-loop run offered more than it holds (overload_note): its latencies are a queue's
        that grows with the sample, so no SLO is met at this rate."""
        return bool(self.overload)

    @property
    def per_user_tokens_per_s(self) -> float:
        """What one user sees while its answer streams: 1 / median TPOT."""
        tp = self.tpot_s[np.isfinite(self.tpot_s)]
        return float(1.0 / np.median(tp)) if len(tp) else float("nan")

    def percentile(self, what: str, p: float) -> float:
        a = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2e": self.e2e_s}[what]
        a = a[np.isfinite(a)]
        return float(np.percentile(a, p)) if len(a) else float("nan")

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        if self.price_per_gpu_hour is None:
            return None
        return self.price_per_gpu_hour * self.gpus / 3600.0 / self.output_tokens_per_s * MEGA

    def metrics(self) -> dict:
        d = {"requests": self.requests, "duration_s": self.duration_s, "requests_per_s": self.requests_per_s,
             "output_tokens_per_s": self.output_tokens_per_s, "total_tokens_per_s": self.total_tokens_per_s,
             "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.gpus,
             "per_user_tokens_per_s": self.per_user_tokens_per_s}
        for what in ("ttft", "tpot", "e2e"):
            for p in PERCENTILES:
                d[f"{what}_p{p}_s"] = self.percentile(what, p)
            a = getattr(self, f"{what}_s")
            a = a[np.isfinite(a)]
            d[f"{what}_mean_s"] = float(a.mean()) if len(a) else float("nan")
        for p in PERCENTILES:
            d[f"itl_p{p}_s"] = self.itl_s.get(p, float("nan"))
        d["itl_mean_s"] = self.itl_s.get("mean", float("nan"))
        d.update(steps=self.steps, mean_decode_batch=self.mean_decode_batch, mean_step_tokens=self.mean_step_tokens,
                 kv_cache_mean=self.kv_mean, kv_cache_peak=self.kv_peak, preemptions=self.preemptions,
                 mean_requests_in_system=self.mean_in_system, kv_cache_bytes=self.replica_cache_bytes,
                 kv_cache_bytes_per_gpu=self.cache_bytes_per_gpu,
                 computed_prompt_tokens=self.computed_tokens, batch_wait_held_steps=self.held_steps)
        cost = self.cost_per_million_output_tokens
        if cost is not None:
            d["cost_per_million_output_tokens"] = cost
        return d

    def to_dict(self) -> dict:
        """Metrics with None where a figure does not exist (TPOT of one-token answers)."""
        metrics = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.metrics().items()}
        lengths = ({"input_tokens_mean": float(np.mean(self.request_input)), "output_tokens_mean": float(np.mean(self.request_output))}
                   if len(self.request_input) else {})
        return {**self.settings, "description": self.description, "workload": self.workload, "gpus": self.gpus, **lengths,
                "engine": dataclasses.asdict(self.engine), **metrics,
                # what the notes say in words, as keys a script can test: the queue grows (no steady state at
                # this rate), and the sample is mostly its ramp and drain
                "overloaded": self.overloaded, "mostly_ramp_and_drain": self.sample_note() is not None,
                "notes": list(self.shown_notes())}

    def to_table(self) -> str:
        from roofline.serving.render import serving_table

        return serving_table(self)

    def rows(self) -> list[dict]:
        """One row per request, in arrival order: arrival time, prompt and output tokens, TTFT, TPOT
        and end-to-end seconds (its queueing is in the TTFT); None where a figure does not exist."""
        n = len(self.e2e_s)
        arr = self.arrival_s if len(self.arrival_s) == n else np.full(n, np.nan)
        ins = self.request_input if len(self.request_input) == n else np.zeros(n)
        outs = self.request_output if len(self.request_output) == n else np.zeros(n)
        return [{"request": i, "arrival_s": _finite(t), "input_tokens": int(ni), "output_tokens": int(no),
                 "ttft_s": _finite(a), "tpot_s": _finite(b), "e2e_s": _finite(c)}
                for i, (t, ni, no, a, b, c) in enumerate(zip(arr, ins, outs, self.ttft_s, self.tpot_s, self.e2e_s))]

    def to_csv(self) -> str:
        """rows() as CSV (a figure that does not exist is an empty cell)."""
        from roofline.tables import rows_to_csv

        return rows_to_csv([{k: "" if v is None else repr(v) if isinstance(v, float) else v for k, v in r.items()}
                            for r in self.rows()])


OVERLOAD_SHARE = 0.9  # a run holding under this share of the rate it is offered is overloaded
OVERLOADED = "overloaded:"  # how overload_note's note begins (ServingResult.overload holds the note itself)


def completion_rate_per_s(arrival_s: np.ndarray, e2e_s: np.ndarray) -> float:
    """Requests/s completed in the middle half of a run's completions (between the 25th and 75th
    percentile completion times): a flood's capacity (every request at once: the engine works
    through them at its pace), and an open-loop run's rate where held_rate_per_s cannot tell. inf
    with too few completions (under 8, or all at one time)."""
    done = np.sort((np.asarray(arrival_s, dtype=float) + np.asarray(e2e_s, dtype=float))[np.isfinite(e2e_s)])
    n = len(done)
    a, b = n // 4, (3 * n) // 4
    if n < 8 or done[b] <= done[a]:
        return float("inf")
    return (b - a) / float(done[b] - done[a])


def held_rate_per_s(arrival_s: np.ndarray, e2e_s: np.ndarray) -> float:
    """Requests/s an open-loop run served while requests still arrived: the offered rate times the
    completions between t0 + L and the last arrival (t0 the first arrival, L the median end-to-end
    latency) over the arrivals between t0 and the last arrival less L, the ones a run keeping pace
    would have completed in that window. A stable run holds its offered rate (the ratio is about 1,
    its ramp included); one offered more than it can serve completes at its capacity however long
    the sample, while its latencies only grow with the sample's length. inf with under 8 arrivals
    in that window: the latencies outlast the arrivals, and the sample cannot tell."""
    a = np.asarray(arrival_s, dtype=float)
    e = np.asarray(e2e_s, dtype=float)
    ok = np.isfinite(e)
    if ok.sum() < 8:
        return float("inf")
    L = float(np.median(e[ok]))
    t0, t1 = float(a.min()), float(a.max())
    expected = int(((a > t0) & (a <= t1 - L)).sum())
    done = (a + e)[ok]
    completed = int(((done > t0 + L) & (done <= t1)).sum())
    if expected < 8:
        return float("inf")
    return offered_rate_per_s(a) * completed / expected


def offered_rate_per_s(arrival_s: np.ndarray) -> float:
    """Requests/s the arrivals offer: (n - 1) over their span (0 for one request or one instant)."""
    a = np.asarray(arrival_s, dtype=float)
    span = float(a.max() - a.min()) if len(a) > 1 else 0.0
    return (len(a) - 1) / span if span > 0 else 0.0


QUEUE_GROWTH = 3.0  # an overloaded run's last quarter of arrivals waits this many times its first quarter's TTFT


def queue_grows(arrival_s: np.ndarray, ttft_s: np.ndarray) -> bool:
    """Whether the requests that arrived last (the last quarter) waited for their first token a
    median QUEUE_GROWTH times the first quarter's: the queue of a run offered more than it serves
    grows for as long as requests arrive, a stable run's does not (a run at 0.95 of its capacity
    here: 0.08 s against 0.04; at 1.1: 2.2 s against 0.06)."""
    a, t = np.asarray(arrival_s, dtype=float), np.asarray(ttft_s, dtype=float)
    order = np.argsort(a, kind="stable")
    q = len(a) // 4
    if q < 2:
        return False
    first, last = t[order[:q]], t[order[-q:]]
    first, last = first[np.isfinite(first)], last[np.isfinite(last)]
    if not len(first) or not len(last):
        return bool(len(first))  # the last quarter never got a first token: the queue never emptied
    return float(np.median(last)) > QUEUE_GROWTH * float(np.median(first))


def overload_note(arrival_s: np.ndarray, e2e_s: np.ndarray, duration_s: float, ttft_s=None) -> str | None:
    """The note of an open-loop run that holds under a share of its offered rate (held_rate_per_s),
    else None. The share is OVERLOAD_SHARE, or 1 - 2 / sqrt(k) where that is lower (k, half the
    completions: Poisson arrivals over a window of k vary by ~sqrt(k)), so that 20 requests (k = 10)
    are called overloaded only under 0.37 of the rate, and 1,000 under 0.9; given ``ttft_s``, its
    queue must also grow (queue_grows). A run whose latencies outlast its arrivals has no such
    window: sample_note says so."""
    offered = offered_rate_per_s(arrival_s)
    held = held_rate_per_s(arrival_s, e2e_s)
    how = "completed while requests arrived (past the ramp)"
    if not math.isfinite(held):  # the latencies outlast the arrivals: the completions' own pace
        held = completion_rate_per_s(arrival_s, e2e_s)
        how = "completed in the middle half of the completions (the latencies outlast the arrivals)"
    k = int(np.isfinite(e2e_s).sum()) // 2
    if not offered or not k or held >= min(OVERLOAD_SHARE, 1.0 - 2.0 / math.sqrt(k)) * offered:
        return None
    if ttft_s is not None and not queue_grows(arrival_s, ttft_s):  # a rate short of the offered one, no queue
        return None
    pace = completion_rate_per_s(arrival_s, e2e_s)  # what it completes at its saturated pace: shown, the window
    # estimate (held) only classifies (an overloaded run's median latency, its window, is itself the queue's)
    shown = (f"it completes about {format_number(pace)} requests/s (the middle half of its completions)" if math.isfinite(pace)
             else f"{format_number(held)} requests/s {how}")
    return (f"{OVERLOADED} {shown} of the {format_number(offered)} offered; "
            f"{format_number(len(e2e_s) / duration_s)} served from first arrival to last completion; the queue grows for as long as "
            "requests arrive, so the latencies depend on --requests, and no SLO is met at this rate")


STEADY_SPANS = 5  # a rate sample reaches a steady state when its arrivals span this many end-to-end latencies


def sample_note(result) -> str | None:
    """Where an open-loop run's arrivals span under STEADY_SPANS of its median end-to-end latency:
    the sample is mostly its ramp and its drain, so a rate it 'meets' says little of a steady state
    (100 requests at 35/s span 2.8 s against 2 s a request); None otherwise."""
    if result.settings.get("rate_per_s") is None or not len(result.arrival_s):
        return None
    span = float(result.arrival_s.max() - result.arrival_s.min())
    e2e = result.percentile("e2e", 50)
    if not math.isfinite(e2e) or span >= STEADY_SPANS * e2e:
        return None
    head = (f"{result.requests:,} requests arrive over {format_latency(span)}, under {STEADY_SPANS} times a request's "
            f"{format_latency(e2e)} end to end: the run is mostly its ramp and drain, not a steady state")
    if result.overloaded:  # its queue grows: no number of requests settles it
        return head + " (and overloaded: no number of requests settles it at this rate)"
    need = int(math.ceil(STEADY_SPANS * e2e * result.settings["rate_per_s"]))
    need = max(need, 2 * result.requests)  # the latency grows with the sample: ask for a clearly longer one
    if need > MAX_REQUESTS:
        return head + f"; even the most --requests, {MAX_REQUESTS:,}, arrive over under {STEADY_SPANS} latencies at this rate"
    return head + f"; give more --requests (about {need:,} at this rate)"


def step_settings(step: StepCost) -> dict:
    """The configuration a result was simulated for, as keys (JSON); "link" is the tensor-parallel
    group's (None for one GPU: no collective), a disaggregated run's KV link is "kv_link"."""
    return {"model": step.model.key or step.model.name, "machine": step.machine.key or step.machine.name,
            "precision": step.precision.to_dict(), "tensor_parallel": step.tensor_parallel, "link": step.link,
            # with expert parallelism tensor_parallel is the group's GPUs: the experts split over them, attention
            # data-parallel across them (no tensor-parallel slicing)
            "expert_parallel": bool(step.expert_parallel),
            "kv_cache_gpus": step.tensor_parallel * step.pipeline_stages,  # the GPUs holding the replica's cache
            # data-parallel attention groups (expert parallelism), each caching its own sequences; else 1
            "attention_data_parallel": step._dp,
            "cache": cache_name(step.model),  # what the cache holds: "KV cache", "SSM state" or both
            **kernel_settings(step.cost_model)}


def kernel_settings(cost_model) -> dict:
    """What priced the ops, as keys: "kernels" (ENGINE[@VERSION] or a profile; None: the plate's cost model),
    "kernels_source" (the tables read) and "kernels_transferred_from" (the measured preset whose kernels'
    efficiencies were applied to this machine's roofline; None where measured on it)."""
    kernels = getattr(cost_model, "kernels", None)
    return {"kernels": kernels or None, "kernels_source": getattr(cost_model, "tables", "") or None if kernels else None,
            "kernels_transferred_from": getattr(cost_model, "measured_on", "") or None}


def _finite(x) -> float | None:
    return float(x) if math.isfinite(float(x)) else None


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, ps) -> dict:
    """Percentiles (and "mean") of ``values`` each counted ``weights`` times: the inter-token
    latency every decoded token saw (a step's duration, once per sequence it decoded). The p-th is
    the least value whose weight at or below it reaches p% of the total (_weighted_select)."""
    total = float(weights.sum())
    if not total > 0:
        return {**{p: float("nan") for p in ps}, "mean": float("nan")}
    v, w = values, weights  # a value of weight 0 is never the least to reach a target above 0 ...
    if min(ps) <= 0:  # ... but is at 0: those left out
        v, w = values[weights > 0], weights[weights > 0]
    out = dict(zip(ps, _weighted_select(v, w, [p / 100.0 * total for p in ps])))
    out["mean"] = float(np.dot(v, w) / total)
    return out


def _weighted_select(v: np.ndarray, w: np.ndarray, targets, base: float = 0.0, depth: int = 0, bins: int = 1024) -> list:
    """For each target, the least of ``v`` whose weight at or below it (``base`` the weight of the
    values below all of ``v``) reaches the target (the largest where none does), without sorting
    them all (a run has millions of steps): the values binned by value, or by its logarithm where all
    are positive (the bins keep their order)
    and the bin where the weight reaches the target searched the same way, until few are left to
    sort. Weights are whole numbers (their sums exact)."""
    lo, hi = float(v.min()), float(v.max())
    if len(v) <= 4 * bins or depth >= 16 or hi == lo:
        order = np.argsort(v)
        vs, cw = v[order], base + np.cumsum(w[order])
        return [float(vs[min(int(np.searchsorted(cw, t, side="left")), len(vs) - 1)]) for t in targets]
    key = v
    if lo > 0:  # a few gaps 1,000 times the rest (a wait through steps of prompts) leave the rest many bins
        key, lo, hi = np.log(v), math.log(lo), math.log(hi)
    idx = np.minimum(((key - lo) * (bins / (hi - lo))).astype(np.int64), bins - 1) if hi > lo else np.zeros(len(v), np.int64)
    below = base + np.cumsum(np.bincount(idx, weights=w, minlength=bins))  # the weight up to bin b
    out = []
    for t in targets:
        b = min(int(np.searchsorted(below, t, side="left")), bins - 1)
        inside = idx == b
        out += _weighted_select(v[inside], w[inside], [t], float(below[b - 1]) if b else base, depth + 1, bins)
    return out
