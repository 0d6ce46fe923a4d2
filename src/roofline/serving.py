"""Serving plans (docs/serving.md): what a deployment delivers under load, step by step, from the per-op
costs of roofline.step.

``simulate`` runs a continuous-batching scheduler in the manner of vLLM's (V1, chunked prefill on):

- requests arrive open loop (Poisson at a rate, or at given times) or closed loop (a fixed number
  of users, each sending its next request when the last one finishes);
- every step first gives each running, decoding sequence one token (its KV cache grows by a block
  of ``block_size`` tokens when it fills one); then the budget left (``max_tokens`` per step, less
  one per decode) goes to prompts in chunks: the running prompt first, then waiting requests in
  arrival order, while a sequence slot (``max_seqs``) and cache for the chunk are free;
- the KV cache is the memory left after the weights and a full step's activations
  (step.kv_cache_budget); when a decode cannot get its next block, the most recently admitted
  sequence is preempted (its cache freed; it waits again at the head of the queue and recomputes
  its prompt and what it had generated, as vLLM's recompute preemption does);
- a prefix-cache hit rate h skips the first h of each prompt (at least its last token is computed);
  the skipped tokens still hold cache (shared blocks are not modelled: an upper bound on memory);
- a step's time is StepCost.seconds of its decodes and chunks; the step that completes a prompt
  samples the request's first token, each later step one more.

Per request: TTFT (first token - arrival), TPOT ((finish - first token) / (output - 1)), end-to-end
latency; per step: the inter-token latency every decoding sequence saw. One replica on
``tensor_parallel`` GPUs; rates are for that replica.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from roofline.errors import MAX_COUNT, RooflineError, check_fraction, check_number
from roofline.plan.step import StepCost, kv_cache_budget, sequence_cache_bytes
from roofline.tables import Tabular, dump_json
from roofline.units import GIGA, MEGA, MS

PERCENTILES = (50, 90, 99)
STRETCH = 4096  # decode-only steps run at once between events, at most
MAX_REQUESTS = 10_000_000


@dataclass(frozen=True)
class Engine:
    """The scheduler's settings (vLLM's names: max_num_seqs, max_num_batched_tokens, block_size,
    gpu_memory_utilization, prefix caching)."""

    max_seqs: int = 256
    max_tokens: int = 8192
    block_size: int = 16
    memory_fraction: float = 0.9
    prefix_hit: float = 0.0
    spec_tokens: int = 0  # speculative decoding: draft tokens proposed per sequence and step (0: none)
    acceptance: float = 0.0  # the chance each draft token is accepted (independent positions)

    @property
    def tokens_per_verify(self) -> float:
        """Expected tokens a sequence emits per step: sum_{i=0..k} a^i = (1 - a^(k+1)) / (1 - a)
        (Leviathan et al. 2023, the accepted drafts and the one corrected or bonus token); 1 without
        speculation."""
        k, a = self.spec_tokens, self.acceptance
        return float(sum(a ** i for i in range(k + 1)))

    def __post_init__(self):
        check_number("max_seqs", self.max_seqs, maximum=1 << 20, integer=True)
        check_number("max_tokens", self.max_tokens, maximum=1 << 20, integer=True)
        check_number("block_size", self.block_size, maximum=1 << 16, integer=True)
        check_fraction("memory_fraction", self.memory_fraction)
        check_number("prefix_hit", self.prefix_hit, strictly=False, maximum=1.0)
        check_number("spec_tokens", self.spec_tokens, strictly=False, maximum=16, integer=True)
        if self.spec_tokens:
            check_number("acceptance", self.acceptance, maximum=0.999)
        elif self.acceptance:
            raise RooflineError("acceptance applies to speculative decoding: give spec_tokens too", field="acceptance")
        if self.max_seqs * (self.spec_tokens + 1) > self.max_tokens:
            raise RooflineError(f"max_seqs {self.max_seqs:,} x {self.spec_tokens + 1} tokens each is more than the token budget "
                                f"max_tokens {self.max_tokens:,}: every decoding sequence needs its tokens of the budget",
                                field="max_seqs")


@dataclass(frozen=True)
class Requests:
    """The workload: per request its prompt and output lengths; ``arrival_s`` for open loop, or
    ``concurrency`` users for closed loop (arrival_s None)."""

    input_tokens: np.ndarray
    output_tokens: np.ndarray
    arrival_s: np.ndarray | None = None
    concurrency: int | None = None
    label: str = ""

    def __post_init__(self):
        n = len(self.input_tokens)
        if n == 0 or len(self.output_tokens) != n or (self.arrival_s is not None and len(self.arrival_s) != n):
            raise RooflineError("requests need as many input lengths, output lengths and arrival times, at least one",
                                field="requests")
        if n > MAX_REQUESTS:
            raise RooflineError(f"{n:,} requests: at most {MAX_REQUESTS:,}", field="requests")
        for what, a in (("input_len", self.input_tokens), ("output_len", self.output_tokens)):
            a = np.asarray(a)
            if a.min() < 1 or a.max() > MAX_COUNT or not np.all(np.isfinite(a)):
                raise RooflineError(f"{what} lengths must be whole numbers of at least 1 token; got {a.min():g} to {a.max():g}",
                                    field=what)
        if (self.arrival_s is None) == (self.concurrency is None):
            raise RooflineError("give either arrival times (open loop) or a concurrency (closed loop)", field="rate")

    @property
    def n(self) -> int:
        return len(self.input_tokens)


def lengths(spec, n: int, rng: np.random.Generator, what: str) -> np.ndarray:
    """n lengths from ``spec``: a whole number (all the same), (lo, hi) (uniform, inclusive), or an array."""
    if isinstance(spec, (int, np.integer)) or (isinstance(spec, float) and spec.is_integer()):
        v = int(check_number(what, spec, maximum=MAX_COUNT, integer=True))
        return np.full(n, v, dtype=np.int64)
    if isinstance(spec, tuple) and len(spec) == 2:
        lo = int(check_number(what, spec[0], maximum=MAX_COUNT, integer=True))
        hi = int(check_number(what, spec[1], maximum=MAX_COUNT, integer=True))
        if hi < lo:
            raise RooflineError(f"{what} range {lo}-{hi}: the upper end is below the lower", field=what)
        return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    a = np.asarray(spec, dtype=np.int64)
    if a.ndim != 1 or len(a) == 0:
        raise RooflineError(f"{what}: expected a length, a range or a list of lengths", field=what)
    return np.resize(a, n)


def poisson_requests(rate_per_s: float, n: int, input_tokens, output_tokens, seed: int = 0) -> Requests:
    """n requests arriving as a Poisson process of ``rate_per_s`` (exponential gaps), lengths from
    ``lengths``."""
    check_number("rate", rate_per_s, maximum=1e9)
    n = int(check_number("requests", n, maximum=MAX_REQUESTS, integer=True))
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate_per_s, size=n))
    arrivals -= arrivals[0]
    return Requests(lengths(input_tokens, n, rng, "input_len"), lengths(output_tokens, n, rng, "output_len"), arrivals,
                    label=f"Poisson {rate_per_s:g} req/s")


def closed_requests(concurrency: int, n: int, input_tokens, output_tokens, seed: int = 0) -> Requests:
    """n requests from ``concurrency`` users, each sending its next when its last one finishes."""
    c = int(check_number("concurrency", concurrency, maximum=1 << 24, integer=True))
    n = int(check_number("requests", n, maximum=MAX_REQUESTS, integer=True))
    rng = np.random.default_rng(seed)
    return Requests(lengths(input_tokens, n, rng, "input_len"), lengths(output_tokens, n, rng, "output_len"), None, c,
                    label=f"concurrency {c:,}")


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
                 mean_requests_in_system=self.mean_in_system, kv_cache_bytes=self.cache_bytes,
                 computed_prompt_tokens=self.computed_tokens)
        cost = self.cost_per_million_output_tokens
        if cost is not None:
            d["cost_per_million_output_tokens"] = cost
        return d

    def to_dict(self) -> dict:
        """Metrics with None where a figure does not exist (TPOT of one-token answers)."""
        metrics = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.metrics().items()}
        lengths = ({"input_tokens_mean": float(np.mean(self.request_input)), "output_tokens_mean": float(np.mean(self.request_output))}
                   if len(self.request_input) else {})
        return {"model": self.description, "workload": self.workload, "gpus": self.gpus, **self.settings, **lengths,
                "engine": dataclasses.asdict(self.engine), **metrics, "notes": list(self.notes)}

    def to_json(self) -> str:
        return dump_json(self.to_dict())

    def to_table(self) -> str:
        from roofline.plan.render import serving_table

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


def step_settings(step: StepCost) -> dict:
    """The configuration a result was simulated for, as keys (JSON)."""
    return {"model_key": step.model.key or step.model.name, "machine": step.machine.key or step.machine.name,
            "precision": step.precision.to_dict(), "tensor_parallel": step.tensor_parallel, "link": step.link}


def _finite(x) -> float | None:
    return float(x) if math.isfinite(float(x)) else None


def _cache_growth(table, linear: bool, ctx0: np.ndarray, blocks0: np.ndarray, K: int, bs: int) -> np.ndarray:
    """Cache bytes the decoding sequences add over K steps (index k: after step k's growth):
    sum_i table[ceil((ctx0_i + 1 + k) / bs)] - table[blocks0_i]. With a linear table (bytes per
    block constant: full-attention models) in closed form from the contexts' residues mod bs;
    otherwise element by element."""
    if linear:
        # a sequence takes a new block at step x (holding ctx0 + x tokens) when ctx0 + x = 1 mod bs:
        # the growth is a running count of the contexts' residues (step 1's growth is already in blocks0)
        hist = np.bincount(ctx0 % bs, minlength=bs)
        inc = hist[(1 - np.arange(2, K + 1)) % bs]
        return table[1] * np.concatenate(([0], np.cumsum(inc)))
    x = np.arange(1, K + 1)
    return (table[-(-(ctx0[None, :] + x[:, None]) // bs)] - table[blocks0][None, :]).sum(axis=1)


def _weighted_percentiles(values: np.ndarray, weights: np.ndarray, ps) -> dict:
    """Percentiles (and "mean") of ``values`` each counted ``weights`` times: the inter-token
    latency every decoded token saw (a step's duration, once per sequence it decoded)."""
    keep = weights > 0
    if not keep.any():
        return {**{p: float("nan") for p in ps}, "mean": float("nan")}
    v, w = values[keep], weights[keep]
    order = np.argsort(v)
    v, cw = v[order], np.cumsum(w[order])
    out = {p: float(v[min(np.searchsorted(cw, p / 100.0 * cw[-1]), len(v) - 1)]) for p in ps}
    out["mean"] = float((v * w[order]).sum() / cw[-1])
    return out


def simulate(step: StepCost, requests: Requests, engine: Engine = Engine(), price_per_gpu_hour: float | None = None,
             max_steps: int = 50_000_000, draft: StepCost | None = None, _stage_engine: bool = False) -> ServingResult:
    """Run the scheduler of the module docstring over ``requests``; see ServingResult.

    Speculative decoding (``engine.spec_tokens`` k > 0, a ``draft`` model's StepCost built for one
    token per step, and ``step`` built with verify_tokens k + 1): each decode step runs the draft k
    times (one token per sequence each, against the growing context) and then the target once over
    k + 1 tokens per sequence; each sequence emits engine.tokens_per_verify tokens on average
    (carried as a fraction from step to step: the expected value, not a random draw). The draft's
    weights and its KV cache share the GPUs' memory."""
    if step.pipeline_stages > 1 and not _stage_engine:
        if draft is not None:
            raise RooflineError("speculative decoding with pipeline stages is not modelled", field="pipeline_stages")
        return simulate_pipelined(step, requests, engine, 0, price_per_gpu_hour)
    T = engine.spec_tokens + 1
    if step.verify_tokens != T:
        raise RooflineError(f"the step model feeds {step.verify_tokens} tokens per decoding sequence; the engine's "
                            f"speculation needs {T} (StepCost(..., verify_tokens={T}))", field="spec_tokens")
    if (draft is None) != (T == 1):
        raise RooflineError("speculative decoding needs a draft model (and a draft model needs spec_tokens > 0); "
                            "multi-token-prediction heads are not modelled", field="draft")
    if engine.max_tokens > step.max_tokens or engine.max_seqs > step.max_seqs:
        raise RooflineError(f"the step model was built for {step.max_tokens:,} tokens and {step.max_seqs:,} sequences per "
                            f"step; the engine asks {engine.max_tokens:,} and {engine.max_seqs:,}", field="max_tokens")
    if price_per_gpu_hour is not None:
        check_number("price_per_gpu_hour", price_per_gpu_hour, maximum=1e6)
    cap, parts = kv_cache_budget(step, engine.memory_fraction)
    bs = engine.block_size
    n = requests.n
    inp = np.asarray(requests.input_tokens, dtype=np.int64)
    out = np.asarray(requests.output_tokens, dtype=np.int64)
    longest = int((inp + out).max()) + T
    max_blocks = -(-longest // bs)
    table = sequence_cache_bytes(step, bs, max_blocks)
    E = engine.tokens_per_verify
    if draft is not None:
        from roofline.plan.memory import inference_weight_bytes

        if draft.model.vocab != step.model.vocab:
            raise RooflineError(f"the draft {draft.model.name} has a vocabulary of {draft.model.vocab:,}, the target "
                                f"{step.model.name} {step.model.vocab:,}: a draft must share the target's tokenizer",
                                field="draft")
        from roofline.transformer import count_params

        if count_params(draft.model)["total"] >= count_params(step.model)["total"]:
            raise RooflineError(f"the draft {draft.model.name} is not smaller than the target {step.model.name}",
                                field="draft")
        if draft.verify_tokens != 1 or draft.max_tokens < engine.max_tokens or draft.max_seqs < engine.max_seqs:
            raise RooflineError("the draft's step model must feed one token per sequence and hold the engine's tokens and "
                                "sequences", field="draft")
        parts["draft_weights_bytes"] = inference_weight_bytes(draft.model, draft.precision, draft.tensor_parallel)
        cap = max(cap - parts["draft_weights_bytes"], 0.0)
        table = table + sequence_cache_bytes(draft, bs, max_blocks)
    linear_table = bool(np.allclose(table, np.arange(len(table)) * table[1], rtol=1e-12, atol=0.0))
    if cap <= 0:
        raise RooflineError(f"{step.model.name}: the weights ({parts['weights_bytes'] / GIGA:,.1f} GB) and activations leave no "
                            f"memory for a KV cache on one {step.machine.name} at memory_fraction {engine.memory_fraction:g}; "
                            "use more tensor-parallel GPUs or narrower weights", field="tensor_parallel")
    biggest = int(np.argmax(inp + out))
    if table[-(-int(inp[biggest] + out[biggest]) // bs)] > cap:
        raise RooflineError(f"one request of {int(inp[biggest]):,} + {int(out[biggest]):,} tokens needs "
                            f"{table[-(-int(inp[biggest] + out[biggest]) // bs)] / GIGA:,.2f} GB of KV cache; the "
                            f"{step.machine.name} has {cap / GIGA:,.2f} GB for it", field="input_len")

    closed = requests.arrival_s is None
    arrival = np.full(n, np.inf)
    if closed:
        arrival[: min(requests.concurrency, n)] = 0.0
    else:
        arrival[:] = requests.arrival_s
    need = inp.copy()  # prompt tokens to hold before sampling (prompt + generated after a preemption)
    done = np.zeros(n, dtype=np.int64)
    gen = np.zeros(n, dtype=np.int64)
    first_t = np.full(n, np.nan)
    finish_t = np.full(n, np.nan)
    seen = np.zeros(n, dtype=bool)  # admitted before (the prefix hit applies to the first admission only)

    S = engine.max_seqs
    s_req = np.full(S, -1, dtype=np.int64)
    s_ctx = np.zeros(S, dtype=np.int64)  # tokens whose KV is cached
    s_blocks = np.zeros(S, dtype=np.int64)
    s_dec = np.zeros(S, dtype=bool)
    s_order = np.zeros(S, dtype=np.int64)
    s_credit = np.zeros(S)  # speculation: the fraction of an expected token carried to the next step
    free_slots = list(range(S - 1, -1, -1))
    prefilling: list[int] = []  # slots, in admission order
    waiting: collections.deque = collections.deque()
    used = 0.0
    order = 0
    next_i = 0  # next request to arrive (arrival times are nondecreasing in request order)
    next_closed = min(requests.concurrency, n) if closed else n
    now = 0.0
    t0 = None
    step_dt, step_nd = [], []
    steps = 0
    tokens_sum = 0
    kv_integral = kv_peak = 0.0
    in_system_integral = 0.0
    in_system = 0
    preemptions = 0
    computed = 0
    finished = 0
    hit = engine.prefix_hit

    def release(slot):
        nonlocal used
        used -= table[s_blocks[slot]]
        s_req[slot] = -1
        s_dec[slot] = False
        s_blocks[slot] = 0
        s_ctx[slot] = 0
        free_slots.append(slot)

    def finish(r, slot):
        nonlocal finished, in_system, next_closed
        finish_t[r] = now
        finished += 1
        in_system -= 1
        release(slot)
        if closed and next_closed < n:
            arrival[next_closed] = now
            next_closed += 1

    while finished < n:
        if steps >= max_steps:
            raise RooflineError(f"the simulation ran {max_steps:,} steps without finishing", field="requests")
        while next_i < n and arrival[next_i] <= now:
            waiting.append(next_i)
            in_system += 1
            in_system_integral += now - arrival[next_i]  # it arrived during the last step
            next_i += 1
        if t0 is None and waiting:
            t0 = now
        dec = np.flatnonzero(s_dec)
        # the decodes' next blocks, preempting the newest sequences while they do not fit
        while len(dec):
            grow_to = -(-(s_ctx[dec] + T) // bs)  # blocks to hold the ctx + T tokens the step writes
            extra = float((table[grow_to] - table[s_blocks[dec]]).sum())
            if used + extra <= cap:
                s_blocks[dec] = grow_to
                used += extra
                break
            active = np.flatnonzero(s_req >= 0)
            victim = int(active[np.argmax(s_order[active])])
            r = int(s_req[victim])
            if victim in prefilling:
                prefilling.remove(victim)
            release(victim)
            need[r] = inp[r] + gen[r]
            done[r] = 0
            waiting.appendleft(r)
            preemptions += 1
            dec = np.flatnonzero(s_dec)
        budget = engine.max_tokens - len(dec) * T
        chunks, chunk_slots = [], []
        for slot in list(prefilling):
            if budget <= 0:
                break
            r = int(s_req[slot])
            c = int(min(need[r] - done[r], budget))
            blocks = -(-(int(done[r]) + c) // bs)
            extra = table[blocks] - table[s_blocks[slot]]
            if used + extra > cap:
                break
            used += extra
            s_blocks[slot] = blocks
            chunks.append((c, int(done[r])))
            chunk_slots.append(slot)
            budget -= c
        while waiting and budget > 0 and free_slots:
            r = waiting[0]
            start = int(done[r])
            if not seen[r] and hit:
                start = int(min(math.floor(hit * inp[r]), inp[r] - 1))
            c = int(min(need[r] - start, budget))
            blocks = -(-(start + c) // bs)
            if used + table[blocks] > cap:
                break
            waiting.popleft()
            seen[r] = True
            done[r] = start
            slot = free_slots.pop()
            s_req[slot], s_ctx[slot], s_blocks[slot], s_dec[slot] = r, start, blocks, False
            s_order[slot] = order
            order += 1
            used += table[blocks]
            prefilling.append(slot)
            chunks.append((c, start))
            chunk_slots.append(slot)
            budget -= c
        nd = len(dec)
        if not nd and not chunks:
            if next_i < n and np.isfinite(arrival[next_i]):
                now = max(now, float(arrival[next_i]))
                continue
            raise RooflineError("the scheduler is stuck: nothing can run and nothing will arrive (the cache holds no "
                                "waiting request)", field="requests")
        if nd and not chunks and T == 1:  # decodes only: run steps up to the next event in one go (same arithmetic)
            reqs = s_req[dec]
            K = int(min((out[reqs] - gen[reqs]).min(), STRETCH))
            if K > 1:
                ctx0 = s_ctx[dec]  # step k feeds one token against ctx0 + 1 + k
                times = step.decode_steps_seconds(ctx0, K)
                cum = np.cumsum(times)
                if next_i < n and np.isfinite(arrival[next_i]):  # stop at the step during which one arrives
                    K = min(K, int(np.searchsorted(cum, arrival[next_i] - now, side="left")) + 1)
                used_k = used + _cache_growth(table, linear_table, ctx0, s_blocks[dec], K, bs)
                over = np.flatnonzero(used_k > cap)
                if len(over):
                    K = int(over[0])  # the steps before the cache runs out (at least this one: it fit above)
                if K > 1:
                    dts = times[:K]
                    span = float(cum[K - 1])
                    in_system_integral += in_system * span
                    kv_integral += float((used_k[:K] * dts).sum())
                    kv_peak = max(kv_peak, float(used_k[K - 1]))
                    used = float(used_k[K - 1])
                    s_blocks[dec] = -(-(ctx0 + K) // bs)
                    now += span
                    steps += K
                    tokens_sum += nd * K
                    step_dt.append(dts)
                    step_nd.append(np.full(K, nd))
                    s_ctx[dec] += K
                    gen[reqs] += K
                    for slot in dec[gen[reqs] >= out[reqs]]:
                        finish(int(s_req[slot]), int(slot))
                    continue
        ctx1 = s_ctx[dec] + T
        M = nd * T + sum(c for c, _ in chunks)
        completing = sum(1 for (c, p), slot in zip(chunks, chunk_slots) if p + c >= need[s_req[slot]])
        dt = step.step_seconds(nd, float(ctx1.sum()), ctx1, M, nd * T + completing, chunks)
        if draft is not None:  # k draft decode steps, and the draft's own prefill of the chunks
            if nd:
                dt += float(draft.decode_steps_seconds(s_ctx[dec], T - 1).sum())
            if chunks:
                dt += draft.step_seconds(0, 0.0, (), M - nd * T, 0, chunks)
        in_system_integral += in_system * dt
        now += dt
        steps += 1
        tokens_sum += M
        step_dt.append(np.array([dt]))
        step_nd.append(np.array([nd]))
        kv_integral += used * dt
        kv_peak = max(kv_peak, used)
        computed += M - nd * T
        if nd and T == 1:
            s_ctx[dec] += 1
            reqs = s_req[dec]
            gen[reqs] += 1
            for slot in dec[gen[reqs] >= out[reqs]]:
                finish(int(s_req[slot]), int(slot))
        elif nd:  # speculation: each emits its expected tokens (carried as a fraction), at least the one verified
            reqs = s_req[dec]
            s_credit[dec] += E
            emitted = np.minimum(np.floor(s_credit[dec] + 1e-9).astype(np.int64), out[reqs] - gen[reqs])
            s_credit[dec] -= emitted
            s_ctx[dec] += emitted
            gen[reqs] += emitted
            keep = -(-s_ctx[dec] // bs)  # the rejected drafts' cache is given back
            used -= float((table[s_blocks[dec]] - table[keep]).sum())
            s_blocks[dec] = keep
            for slot in dec[gen[reqs] >= out[reqs]]:
                finish(int(s_req[slot]), int(slot))
        for (c, p), slot in zip(chunks, chunk_slots):
            r = int(s_req[slot])
            done[r] = p + c
            s_ctx[slot] = p + c
            if done[r] >= need[r]:
                prefilling.remove(slot)
                if np.isnan(first_t[r]):
                    first_t[r] = now
                gen[r] += 1
                if gen[r] >= out[r]:
                    finish(r, slot)
                else:
                    s_dec[slot] = True
                    s_credit[slot] = 0.0
    t_start = t0 or 0.0
    duration = float(np.nanmax(finish_t)) - t_start
    real_arrival = arrival
    ttft = first_t - real_arrival
    e2e = finish_t - real_arrival
    tpot = np.where(out > 1, (finish_t - first_t) / np.maximum(out - 1, 1), np.nan)
    dts, nds = np.concatenate(step_dt), np.concatenate(step_nd).astype(float)
    busy = float(dts.sum())
    pooled = step._dp * step.pipeline_stages
    notes = (f"KV cache {cap / GIGA:,.1f} GB {'for the replica' if pooled > 1 else 'per GPU'}"
             + (f" ({pooled} GPUs' share)" if pooled > 1 else "")
             + f": {engine.memory_fraction:g} of {step.machine.memory_bytes / GIGA:,.0f} GB less "
             f"weights {parts['weights_bytes'] / GIGA:,.1f} GB"
             + (f", the draft's {parts['draft_weights_bytes'] / GIGA:,.1f} GB" if "draft_weights_bytes" in parts else "")
             + f" and a full step's activations {parts['activations_bytes'] / GIGA:,.2f} GB (an estimate: "
             f"{engine.max_tokens:,} rows of the widest op) per GPU",
             "scheduler: decodes first, then prompt chunks within max_tokens (vLLM V1 with chunked prefill); "
             "preemption recomputes the newest sequence; cache in blocks of "
             f"{engine.block_size} tokens" + (f"; prefix hits skip {hit:.0%} of each prompt (its cache still held)" if hit else ""),
             "one replica; a decode-only step replays a CUDA graph (one launch)" if step.cost_model.cuda_graph
             else "one replica; every op of a step pays a launch (no CUDA graph)")
    past = step.model.context_note(inp + out)
    if past:
        notes = (past,) + notes
    mean_seq = float(np.mean(inp + out))
    holds = cap / max(float(table[-(-int(mean_seq) // bs)]), 1.0)
    demand = min(engine.max_seqs, requests.concurrency if closed else n)
    if holds < demand / 2:
        notes = (f"memory-bound batch: the {cap / GIGA:,.2f} GB KV cache holds about {holds:,.0f} sequence(s) of the mean "
                 f"length ({mean_seq:,.0f} tokens), under half of the {demand:,} that could run at once: more GPUs or a narrower "
                 "cache would batch more",) + notes
    if not closed and duration > 0:
        offered = (n - 1) / max(float(arrival[-1] - arrival[0]), 1e-300) if n > 1 else 0.0
        served = (n - 1) / max(duration - float(np.nanmedian(e2e)), 1e-300)  # less one request's time: the drain
        if offered and served < 0.9 * offered:
            notes = (f"overloaded: {n / duration:,.3g} requests/s served of the {offered:,.3g} offered; the queue grows for as long "
                     "as requests arrive, so the latencies depend on --requests",) + notes
    if draft is not None:
        notes += (f"speculative decoding: {draft.model.name} drafts {T - 1} tokens per step, each accepted with probability "
                  f"{engine.acceptance:g}: {E:.2f} tokens per sequence and step on average (the expected value, carried "
                  "from step to step; acceptance is not drawn at random); inter-token latency is the gap between a "
                  "sequence's deliveries, several tokens each; the draft's weights "
                  f"({parts['draft_weights_bytes'] / GIGA:,.1f} GB) and KV cache share the memory",)
    notes += step.notes()
    return ServingResult(
        step.describe(), requests.label, engine, step.tensor_parallel, ttft, tpot, e2e,
        _weighted_percentiles(dts, nds, PERCENTILES), duration, int(out.sum()), int(inp.sum()), int(computed), steps,
        float((dts * nds).sum() / busy) if busy else 0.0, tokens_sum / max(steps, 1),
        kv_integral / busy / cap if busy else 0.0, kv_peak / cap, preemptions,
        in_system_integral / max(float(np.nanmax(finish_t)) - t_start, 1e-300), cap, notes, price_per_gpu_hour, dts, nds,
        arrival.copy(), inp, out, step_settings(step))


# ---------------------------------------------------------------------------------------------
# sweeps and the SLO search
# ---------------------------------------------------------------------------------------------


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
                            "meets_slo": meets_slo(r, self.slo)} if self.slo else {})})
        return out

    def to_dict(self) -> dict:
        first = self.results[0]
        out = {"model": first.description, "gpus": first.gpus, "engine": dataclasses.asdict(first.engine),
               "over": self.over, "points": self.rows(), "slo": self.slo, "notes": list(first.notes)}
        if self.target_rate is not None:
            n = self.replicas_needed
            out["target"] = {"requests_per_s": self.target_rate, "replicas": n, "gpus": None if n is None else n * first.gpus}
        return out

    def to_json(self) -> str:
        return dump_json(self.to_dict())

    def to_csv(self) -> str:
        from roofline.tables import rows_to_csv

        return rows_to_csv([{k: ("" if v is None else v) for k, v in r.items()} for r in self.rows()])

    def to_table(self) -> str:
        from roofline.plan.render import serving_sweep_table

        return serving_sweep_table(self)


def _none_if_nan(x: float):
    return None if not math.isfinite(x) else x


def meets_slo(result: ServingResult, slo: dict | None) -> bool:
    """Both percentiles within their targets (a target of None is no constraint)."""
    if not slo:
        return True
    p = slo["percentile"]
    ok = True
    if slo.get("ttft_s") is not None:
        ok &= result.percentile("ttft", p) <= slo["ttft_s"]
    if slo.get("tpot_s") is not None:
        t = result.percentile("tpot", p)
        ok &= (not math.isfinite(t)) or t <= slo["tpot_s"]
    return bool(ok)


def _slo(ttft_s, tpot_s, percentile) -> dict | None:
    if ttft_s is None and tpot_s is None:
        return None
    for name, v in (("slo_ttft", ttft_s), ("slo_tpot", tpot_s)):
        if v is not None:
            check_number(name, v, maximum=1e6)
    check_number("percentile", percentile, maximum=100.0)
    return {"ttft_s": ttft_s, "tpot_s": tpot_s, "percentile": float(percentile)}


def sweep_concurrency(step: StepCost, concurrencies, input_tokens, output_tokens, engine: Engine = Engine(),
                      requests: int | None = None, seed: int = 0, price_per_gpu_hour: float | None = None,
                      ttft_s=None, tpot_s=None, percentile=90.0, draft: StepCost | None = None) -> ServingSweep:
    """Closed-loop runs at each concurrency, ``requests`` each (default: 8 per user, 200 to 20,000)."""
    slo = _slo(ttft_s, tpot_s, percentile)
    values = tuple(int(check_number("concurrency", c, maximum=1 << 24, integer=True)) for c in concurrencies)
    results = tuple(simulate(step, closed_requests(c, requests or min(max(200, 8 * c), 20_000), input_tokens, output_tokens, seed),
                             engine, price_per_gpu_hour, draft=draft) for c in values)
    if slo:
        ok = [v for v, r in zip(values, results) if meets_slo(r, slo)]
        slo["best"] = max(ok) if ok else None
    return ServingSweep("concurrency", values, results, slo)


SEARCH_STEPS = 14  # bisections of the rate search (log scale): ~2% resolution


def max_rate_within(step: StepCost, input_tokens, output_tokens, ttft_s=None, tpot_s=None, percentile=90.0,
                    engine: Engine = Engine(), requests: int = 1000, seed: int = 0,
                    price_per_gpu_hour: float | None = None, target_rate: float | None = None,
                    draft: StepCost | None = None) -> ServingSweep:
    """The highest Poisson rate whose TTFT and TPOT percentiles meet the targets, by bisection in
    log rate between a rate that meets them and the engine's saturated throughput (closed loop
    at max_seqs users) x 1.5; every rate tried is a point of the returned sweep, the best in
    ``slo["best"]`` (None when even the lowest rate misses: the targets are below one request
    alone). With ``target_rate``, the replicas (and GPUs) that serve it: ServingSweep.replicas_needed
    (requests spread evenly over identical replicas)."""
    slo = _slo(ttft_s, tpot_s, percentile)
    if slo is None:
        raise RooflineError("the rate search needs a target: a TTFT or a TPOT", field="slo_ttft")
    if target_rate is not None:
        check_number("target_rate", target_rate, maximum=1e9)
    sat = simulate(step, closed_requests(engine.max_seqs, max(requests, 2 * engine.max_seqs), input_tokens, output_tokens,
                                         seed), engine, draft=draft)
    return _rate_search(lambda rate: simulate(step, poisson_requests(rate, requests, input_tokens, output_tokens, seed), engine,
                                              price_per_gpu_hour, draft=draft),
                        1.5 * sat.requests_per_s, slo, target_rate)


def _rate_search(run_at, hi: float, slo: dict, target_rate=None) -> ServingSweep:
    """Bisection in log rate between hi / 1000 and ``hi`` for the highest rate whose run (run_at(rate)
    -> ServingResult) meets ``slo``; every run is a point of the sweep, the best in slo["best"]."""
    lo = hi / 1000.0
    tried = {}

    def run(rate):
        tried[rate] = run_at(rate)
        return meets_slo(tried[rate], slo)

    best = None
    if run(lo):
        best = lo
        if run(hi):
            best = hi
        else:
            for _ in range(SEARCH_STEPS):
                mid = math.sqrt(lo * hi)
                if run(mid):
                    lo = best = mid
                else:
                    hi = mid
    slo["best"] = best
    values = tuple(sorted(tried))
    return ServingSweep("rate", values, tuple(tried[v] for v in values), slo, target_rate)


# ---------------------------------------------------------------------------------------------
# prefill/decode disaggregation
# ---------------------------------------------------------------------------------------------


def kv_transfer_seconds(prefill: StepCost, decode: StepCost, input_tokens: np.ndarray, link: str | None = None) -> np.ndarray:
    """Seconds to move each request's KV cache (its prompt's) from the prefill replica to the
    decode replica: each of the prefill group's t GPUs sends its 1/t shard at the same time over
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
    shards = 1 if prefill.expert_parallel else prefill.tensor_parallel  # data-parallel attention: one GPU holds a sequence
    return collective_latency_s(link) + per_seq / shards / bw, link


def simulate_disaggregated(prefill: StepCost, decode: StepCost, requests: Requests, prefill_engine: Engine = Engine(),
                           decode_engine: Engine = Engine(), prefill_replicas: int = 1, decode_replicas: int = 1,
                           kv_link: str | None = None, seed: int = 0,
                           price_per_gpu_hour: float | None = None) -> ServingResult:
    """Prefill and decode on separate pools (DistServe, Splitwise; vLLM and SGLang's disaggregated
    serving): each request is prefilled on one of ``prefill_replicas`` (picked at random: a Poisson
    stream splits into Poisson streams), which samples its first token; its KV cache then moves to
    one of ``decode_replicas`` (kv_transfer_seconds), which feeds that first token against the
    transferred cache and generates the rest. Each pool is this module's scheduler; the decode pool
    never runs a prompt chunk, so its inter-token latency is free of prefill interference. Open
    loop only (a closed loop's next arrival depends on both pools)."""
    if requests.arrival_s is None:
        raise RooflineError("disaggregated serving is simulated for open-loop arrivals: give a request rate", field="rate")
    for name, v in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas)):
        check_number(name, v, maximum=100_000, integer=True)
    if prefill.model.name != decode.model.name:
        raise RooflineError("the prefill and decode pools must serve the same model", field="model")
    if kv_link is not None:
        from roofline.plan.parallel import GPUS_PER_NODE, NODE_LINKS

        total = int(prefill_replicas) * prefill.tensor_parallel + int(decode_replicas) * decode.tensor_parallel
        if str(kv_link).strip().lower() in NODE_LINKS and total > GPUS_PER_NODE:
            raise RooflineError(f"kv_link {kv_link}: {total} GPUs span more than one node of {GPUS_PER_NODE}, and "
                                f"{kv_link} does not leave a node: give infiniband or roce", field="kv_link")
    rng = np.random.default_rng(seed)
    n = requests.n
    inp = np.asarray(requests.input_tokens, dtype=np.int64)
    out = np.asarray(requests.output_tokens, dtype=np.int64)
    arrival = np.asarray(requests.arrival_s, dtype=float)
    first = np.full(n, np.nan)
    p_results, d_results = [], []
    pool = rng.integers(0, prefill_replicas, size=n)
    for i in range(int(prefill_replicas)):
        idx = np.flatnonzero(pool == i)
        if len(idx) == 0:
            continue
        r = simulate(prefill, Requests(inp[idx], np.ones(len(idx), dtype=np.int64), arrival[idx] - arrival[idx][0], None,
                                       label="prefill"), prefill_engine)
        first[idx] = arrival[idx] + r.ttft_s
        p_results.append(r)
    transfer, link = kv_transfer_seconds(prefill, decode, inp, kv_link)
    finish = first.copy()  # one-token answers end at their first token
    cont = np.flatnonzero(out > 1)
    d_arrival = first + transfer
    dpool = rng.integers(0, decode_replicas, size=n)
    hit_engine = dataclasses.replace(decode_engine, prefix_hit=1.0)  # the prompt's cache arrives: only the first token is fed
    for i in range(int(decode_replicas)):
        idx = cont[dpool[cont] == i]
        if len(idx) == 0:
            continue
        order = idx[np.argsort(d_arrival[idx], kind="stable")]
        t0 = d_arrival[order][0]
        r = simulate(decode, Requests(inp[order] + 1, out[order] - 1, d_arrival[order] - t0, None, label="decode"), hit_engine)
        finish[order] = d_arrival[order] + r.e2e_s
        d_results.append(r)
    ttft = first - arrival
    e2e = finish - arrival
    tpot = np.where(out > 1, (finish - first) / np.maximum(out - 1, 1), np.nan)
    durations = np.concatenate([r.step_durations_s for r in d_results]) if d_results else np.zeros(0)
    decodes = np.concatenate([r.step_decodes for r in d_results]) if d_results else np.zeros(0)
    t_start, t_end = float(arrival.min()), float(np.nanmax(finish))
    duration = t_end - t_start
    gpus = int(prefill_replicas) * prefill.tensor_parallel + int(decode_replicas) * decode.tensor_parallel
    busy = float(durations.sum())
    notes = (f"disaggregated: {prefill_replicas} prefill replica(s) of {prefill.tensor_parallel} GPU(s) and {decode_replicas} "
             f"decode replica(s) of {decode.tensor_parallel} GPU(s); each request's KV cache moves over {link} in "
             f"{np.mean(transfer) / MS:,.2f} ms on average (each GPU of the prefill group sends its shard at e_m of the link, "
             "plus one collective latency); the first token comes from the prefill pool, the rest from the decode pool, "
             "which runs no prompt (it feeds the first token against the transferred cache); both pools at the same "
             "tensor-parallel size; requests are spread over the replicas at random",) \
        + (p_results[0].notes[1:] if p_results else ())
    offered = (n - 1) / max(float(arrival.max() - arrival.min()), 1e-300) if n > 1 else 0.0
    served = (n - 1) / max(duration - float(np.nanmedian(e2e)), 1e-300)  # less one request's time: the drain
    if offered and served < 0.9 * offered:
        notes = (f"overloaded: {n / duration:,.3g} requests/s served of the {offered:,.3g} offered; the queue grows for as "
                 "long as requests arrive, so the latencies depend on --requests",) + notes
    last = d_results[-1] if d_results else p_results[-1]
    return ServingResult(
        f"{decode.describe()} (decode pool); prefill pool {prefill.machine.name} x {prefill.tensor_parallel}",
        requests.label, decode_engine, gpus, ttft, tpot, e2e, _weighted_percentiles(durations, decodes, PERCENTILES),
        duration, int(out.sum()), int(inp.sum()), int(sum(r.computed_tokens for r in p_results)),
        int(sum(r.steps for r in p_results + d_results)),
        float((durations * decodes).sum() / busy) if busy else 0.0,
        float(np.mean([r.mean_step_tokens for r in d_results])) if d_results else 0.0,
        float(np.mean([r.kv_mean for r in d_results])) if d_results else 0.0,
        float(max([r.kv_peak for r in d_results], default=0.0)), int(sum(r.preemptions for r in p_results + d_results)),
        float(np.nansum(e2e) / duration), last.cache_bytes, notes, price_per_gpu_hour, durations, decodes,
        arrival.copy(), inp, out, {**step_settings(decode), "disaggregated": [int(prefill_replicas), int(decode_replicas)]})


def best_disaggregation(step: StepCost, replicas: int, input_tokens, output_tokens, ttft_s=None, tpot_s=None,
                        percentile=90.0, engine: Engine = Engine(), requests: int = 1000, seed: int = 0,
                        kv_link: str | None = None, price_per_gpu_hour: float | None = None) -> dict:
    """The split of ``replicas`` groups (of step.tensor_parallel GPUs) into P prefill and D decode
    replicas that serves the highest Poisson rate within the targets, against all ``replicas`` as
    plain (co-located) replicas: {"splits": [(P, D, best rate)], "best": (P, D, rate),
    "colocated": rate of replicas x one replica's best}. Each split's rate comes from the same
    bisection as max_rate_within, on simulate_disaggregated."""
    slo = _slo(ttft_s, tpot_s, percentile)
    if slo is None:
        raise RooflineError("the split search needs a target: a TTFT or a TPOT", field="slo_ttft")
    g = int(check_number("replicas", replicas, minimum=2, strictly=False, maximum=64, integer=True))
    one = max_rate_within(step, input_tokens, output_tokens, ttft_s, tpot_s, percentile, engine, requests, seed)
    colocated = None if one.slo["best"] is None else g * one.slo["best"]
    hi = 1.5 * g * max(one.values)
    splits = []
    for p in range(1, g):
        d = g - p
        # as many requests per replica as the co-located search runs on one: g x requests in all
        sw = _rate_search(lambda rate, p=p, d=d: simulate_disaggregated(
            step, step, poisson_requests(rate, requests * g, input_tokens, output_tokens, seed), engine, engine, p, d,
            kv_link, seed, price_per_gpu_hour), hi, dict(slo))
        splits.append((p, d, sw.slo["best"]))
    ok = [s for s in splits if s[2] is not None]
    return {"splits": splits, "best": max(ok, key=lambda s: s[2]) if ok else None, "colocated": colocated,
            "gpus": g * step.tensor_parallel, "slo": slo}


# ---------------------------------------------------------------------------------------------
# pipeline parallelism
# ---------------------------------------------------------------------------------------------


def simulate_pipelined(step: StepCost, requests: Requests, engine: Engine = Engine(), seed: int = 0,
                       price_per_gpu_hour: float | None = None) -> ServingResult:
    """A replica of p = step.pipeline_stages stages (each on the tensor-parallel group) running p
    micro-batches in flight, as vLLM's pipeline-parallel scheduler does (one virtual engine per
    stage): every virtual engine is this module's scheduler over its share of the requests (users
    split evenly in a closed loop, arrivals at random in an open one), its step the whole model's
    time at its own batch plus the p - 1 sends between stages (StepCost with pipeline_stages), and
    its KV cache one stage GPU's free memory (each GPU holds 1/p of the layers of every sequence,
    so p engines share p GPUs' worth). Balanced stages and micro-batches are assumed: a stage never
    waits for another engine's (said in the notes). Fewer requests in flight than p leave stages
    idle: the pipeline bubble at low load."""
    p = step.pipeline_stages
    if p < 2:
        return simulate(step, requests, engine, price_per_gpu_hour, _stage_engine=True)
    n = requests.n
    inp = np.asarray(requests.input_tokens, dtype=np.int64)
    out = np.asarray(requests.output_tokens, dtype=np.int64)
    closed = requests.arrival_s is None
    if closed:  # users spread over the engines; an engine without users gets no requests (the bubble)
        users = [requests.concurrency // p + (1 if i < requests.concurrency % p else 0) for i in range(p)]
        active = [i for i in range(p) if users[i]]
        share = np.asarray(active)[np.arange(n) % len(active)]
    else:
        share = np.random.default_rng(seed).integers(0, p, size=n)
    ttft, tpot, e2e, arrival = (np.full(n, np.nan) for _ in range(4))
    parts = []
    for i in range(p):
        idx = np.flatnonzero(share == i)
        if len(idx) == 0 or (closed and users[i] == 0):
            continue
        sub = (Requests(inp[idx], out[idx], None, users[i], label="virtual engine") if closed else
               Requests(inp[idx], out[idx], np.asarray(requests.arrival_s)[idx], None, label="virtual engine"))
        r = simulate(step, sub, engine, price_per_gpu_hour, _stage_engine=True)
        ttft[idx], tpot[idx], e2e[idx], arrival[idx] = r.ttft_s, r.tpot_s, r.e2e_s, r.arrival_s
        parts.append(r)
    finish = arrival + e2e
    t0 = float(np.nanmin(arrival))
    duration = float(np.nanmax(finish)) - t0
    durations = np.concatenate([r.step_durations_s for r in parts])
    decodes = np.concatenate([r.step_decodes for r in parts])
    notes = (f"pipeline: {p} stages of about {step.model.n_layers / p:.3g} layers, each on {step.tensor_parallel} GPU(s), "
             f"{p} micro-batches in flight (one virtual engine per stage); balanced stages and micro-batches assumed; "
             f"fewer requests than stages leave stages idle",) + parts[0].notes
    return ServingResult(
        step.describe(), requests.label, engine, step.tensor_parallel * p, ttft, tpot, e2e,
        _weighted_percentiles(durations, decodes, PERCENTILES), duration, int(out.sum()), int(inp.sum()),
        int(sum(r.computed_tokens for r in parts)), int(sum(r.steps for r in parts)),
        float((durations * decodes).sum() / duration) if duration else 0.0,  # sequences decoding at once, all engines
        float(np.mean([r.mean_step_tokens for r in parts])), float(np.mean([r.kv_mean for r in parts])),
        float(max(r.kv_peak for r in parts)), int(sum(r.preemptions for r in parts)), float(np.nansum(e2e) / duration),
        parts[0].cache_bytes * p, notes, price_per_gpu_hour, durations, decodes, arrival, inp, out,
        {**step_settings(step), "pipeline_stages": p})
