"""Serving plans (docs/serving.md): what a deployment delivers under load, step by step, from the per-op
costs of roofline.plan.step.

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

Sweeps and the SLO search are in search.py, prefill/decode disaggregation in disagg.py.
"""

from __future__ import annotations

import collections
import heapq
import math

import numpy as np

from roofline.errors import RooflineError, check_number
from roofline.plan.step import StepCost
from roofline.serving.cache import cache_growth, replica_cache
from roofline.serving.engine import Engine
from roofline.serving.requests import Requests
from roofline.transformer import cache_name
from roofline.serving.results import (PERCENTILES, ServingResult, _weighted_percentiles, overload_note,
                                      step_settings)
from roofline.units import GIGA, format_typed_ms


STRETCH = 4096  # decode-only steps run at once between events, at most


# what every serving figure carries: its validation's direction (docs/serving-validation.md)
MEASURED_VALIDATION_NOTE = ("against 3,108 measured deployments (docs/serving-validation-measured.md), an engine's "
                            "defaults (--engine) on its measured kernels predicted time per output token within a median "
                            "23% on models held out of its one fitted figure (79% of rows within 1.5x), time to first "
                            "token within a median 41%")
VALIDATION_NOTE = ("against published engine benchmarks (docs/serving-validation.md) this model is optimistic in most "
                   "rows, most where a server queues and for multi-GPU latency: read its throughput as an upper bound "
                   "and its latencies as a lower bound on what an engine delivers")


def _kernel_version_words(step, engine) -> str:
    """Where an engine's defaults (cited for the versions engines.toml names) meet its measured
    kernels of another version: said, with what is assumed."""
    tables = getattr(step.cost_model, "tables", "") if step.measured else ""
    if not tables or not engine.preset or not tables.lower().startswith(engine.preset + " "):
        return ""
    from roofline.serving.engines import versions_cover

    version = tables.split(" ")[1]
    if versions_cover(engine.preset, version):
        return ""
    return (f"; its kernels are the measured tables of {tables}, a version past those these defaults were read "
            "for: the defaults are assumed unchanged in it")


def validation_note(step, engine) -> str:
    """What the run's figures were validated against: an engine's defaults on its own measured
    kernels (the measured deployments), measured kernels alone or moved to another GPU (not
    validated as such: said), or the plate's model (the published benchmarks)."""
    if not step.measured:
        return VALIDATION_NOTE
    moved = getattr(step.cost_model, "measured_on", "")
    if moved:
        from roofline.machines import get_machine

        return (f"kernels transferred from the {get_machine(moved).name}: the measured deployments (docs/serving-validation-measured.md) "
                "ran on the GPUs their tables were measured on, so this GPU's forecast is not validated; read it as an "
                "estimate of the measured GPU's efficiency on this one's roofline")
    if not engine.preset:
        return (MEASURED_VALIDATION_NOTE + "; this run took measured kernels without an engine's defaults (--engine), "
                "which that validation did not cover")
    return MEASURED_VALIDATION_NOTE


class _StepRecords:
    """Every step's seconds, decodes, prompt tokens, their mean prefix and chunks: a single step kept
    as a tuple, a stretch of decode-only steps as its seconds and its decodes, until the end, so that
    a step or a stretch costs no array of its own."""

    def __init__(self):
        self.singles: list[tuple] = []  # each single step's (seconds, decodes, prompt tokens, mean prefix, chunks)
        self.runs: list[tuple] = []  # each stretch's (single steps before it, seconds, decodes)

    def one(self, dt, nd, fed, prefix, chunks):
        self.singles.append((dt, nd, fed, prefix, chunks))

    def stretch(self, dts: np.ndarray, nd: int):
        """K decode-only steps of ``nd`` decodes each, their seconds ``dts``."""
        self.runs.append((len(self.singles), dts, nd))

    def arrays(self) -> list[np.ndarray]:
        """The five columns in step order: segments (a single step, or a stretch) placed in order,
        repeated by their lengths; a stretch's seconds put in between the single steps'."""
        one = np.array(self.singles, dtype=float).reshape(-1, 5)
        if not self.runs:
            return [column.copy() for column in one.T]
        at = np.array([k for k, _, _ in self.runs], dtype=np.int64)
        n1, R = len(one), len(at)
        segments = np.zeros((5, n1 + R))
        seg_len = np.ones(n1 + R, dtype=np.int64)
        singles_at = np.arange(n1) + np.searchsorted(at, np.arange(n1), side="right")  # runs placed before each
        runs_at = at + np.arange(R)
        segments[:, singles_at] = one.T
        segments[1, runs_at] = [nd for _, _, nd in self.runs]
        seg_len[runs_at] = [len(dts) for _, dts, _ in self.runs]
        pieces, prev = [], 0
        for k, dts, _ in self.runs:
            if k > prev:
                pieces.append(one[prev:k, 0])
                prev = k
            pieces.append(dts)
        pieces.append(one[prev:, 0])
        return [np.concatenate(pieces), *np.repeat(segments[1:], seg_len, axis=1)]


def _decode_stretch(step: StepCost, overhead_s: float, K: int, now: float, arrives: float, totals, ctx0, cache,
                    res: list, tick: int, bs: int):
    """The decode-only steps to run at once from ``now``: at most K (up to the next finish), to the
    one during which the next request ``arrives``, and before the cache runs out (``cache``: bytes
    used, the capacity, the bytes by blocks held, whether those are linear). ``totals`` (sequences,
    their contexts' sum) and ``ctx0`` (the contexts, or None where the sum will do) as
    StepCost.decode_steps_seconds takes them; with a linear table the blocks come from ``res``, the
    decoding slots counted by context - tick mod bs (a block each for those at a multiple of bs
    before step 2 .. K). Returns (the steps, their seconds, the last one's end, the cache held during
    each)."""
    used, cap, table, linear = cache
    if linear and table[1] > 0:  # past the cache's end at most: n blocks taken every bs steps
        K = min(K, bs * -(-(int((cap - used) // table[1]) + 2) // totals[0]) + 1)
    times = step.decode_steps_seconds(ctx0, K, totals)
    if overhead_s:
        times += overhead_s
    ends = np.cumsum(np.concatenate(([now], times)))[1:]  # each step's end, summed as step by step
    if arrives < math.inf:  # stop at the step during which one arrives
        K = min(K, int(np.searchsorted(ends, arrives, side="left")) + 1)
    if linear:
        inc = np.asarray(res)[(-1 - tick - np.arange(K - 1)) % bs]
        used_k = used + table[1] * np.concatenate(([0], np.cumsum(inc)))
    else:
        used_k = used + cache_growth(table, ctx0, -(-(ctx0 + 1) // bs), K, bs)
    if used_k[K - 1] > cap:  # the steps before the cache runs out (at least the first: it fit)
        K = int(np.flatnonzero(used_k > cap)[0])
    return K, times[:K], float(ends[K - 1]), used_k[:K]


def scheduler_words(engine: Engine) -> str:
    """How the engine makes a step, in words (the run's scheduler note)."""
    feed = "prompt chunks" if engine.chunked_prefill else "whole prompts"
    if engine.mixed_steps:
        how = f"decodes first, then {feed} within max_tokens in the same step"
        return how + (" (vLLM V1 with chunked prefill)" if engine.chunked_prefill else " (TensorRT-LLM without chunked prefill)")
    return f"a step of {feed} alone (within max_tokens) whenever one can start, the decodes waiting it out; else a decode step"


def simulate(step: StepCost, requests: Requests, engine: Engine = Engine(), price_per_gpu_hour: float | None = None,
             max_steps: int = 50_000_000, draft: StepCost | None = None, _stage_engine: bool = False,
             progress=None, stepwise: bool = False) -> ServingResult:
    """Run the scheduler of the module docstring over ``requests``; see ServingResult.

    Speculative decoding (``engine.spec_tokens`` k > 0, a ``draft`` model's StepCost built for one
    token per step, or the target's own multi-token-prediction module's MtpStepCost, and ``step``
    built with verify_tokens k + 1): each decode step runs the draft k
    times (one token per sequence each, against the growing context) and then the target once over
    k + 1 tokens per sequence; each sequence emits engine.tokens_per_verify tokens on average
    (carried as a fraction from step to step: the expected value, not a random draw). The draft's
    weights and its KV cache share the GPUs' memory.

    ``progress(finished, n)``, when given, is called each time another tenth of the requests has
    finished (a long run's sign of life).

    ``stepwise``: every step on its own, the per-slot arrays advanced and summed as they are (no
    decode stretches, no sums kept between steps): the plain reference the default is tested
    against (tests/test_serving.py); far slower."""
    if step.pipeline_stages > 1 and not _stage_engine:
        if draft is not None:
            raise RooflineError("speculative decoding with pipeline stages is not modelled", field="pipeline_stages")
        return simulate_pipelined(step, requests, engine, 0, price_per_gpu_hour)
    T = engine.spec_tokens + 1
    if step.verify_tokens != T:
        raise RooflineError(f"the step model feeds {step.verify_tokens} tokens per decoding sequence; the engine's "
                            f"speculation needs {T} (StepCost(..., verify_tokens={T}))", field="spec_tokens")
    if (draft is None) != (T == 1):
        raise RooflineError("speculative decoding needs a draft (a draft model's StepCost, or plan.step_mtp's MtpStepCost "
                            "of the model's own multi-token-prediction module), and a draft needs spec_tokens > 0",
                            field="draft")
    if engine.max_tokens > step.max_tokens or engine.max_seqs > step.max_seqs:
        raise RooflineError(f"the step model was built for {step.max_tokens:,} tokens and {step.max_seqs:,} sequences per "
                            f"step; the engine asks {engine.max_tokens:,} and {engine.max_seqs:,}", field="max_tokens")
    if price_per_gpu_hour is not None:
        check_number("price_per_gpu_hour", price_per_gpu_hour, maximum=1e6)
    bs, n, E = engine.block_size, requests.n, engine.tokens_per_verify
    inp = np.asarray(requests.input_tokens, dtype=np.int64)
    out = np.asarray(requests.output_tokens, dtype=np.int64)
    cap, parts, table, linear_table = replica_cache(step, engine, inp, out, draft)
    tab = table.tolist()

    closed = requests.arrival_s is None
    arrival = np.full(n, np.inf)
    if closed:
        arrival[: min(requests.concurrency, n)] = 0.0
    else:
        arrival[:] = requests.arrival_s
    lag = engine.request_overhead_s  # the server's time per request: it joins the queue this long after it was sent
    arrives = (arrival + lag).tolist()  # when each joins the queue, read a step at a time
    need = inp.tolist()  # prompt tokens to hold before sampling (prompt + generated after a preemption)
    done = [0] * n  # (per-request scalars as lists, the cache bytes by blocks too: plain numbers cost less a step)
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
    records = _StepRecords()  # per step: seconds, decodes, prompt tokens, their mean prefix, chunks (--breakdown)
    steps = 0
    tokens_sum = 0
    kv_integral = kv_peak = 0.0
    in_system_integral = 0.0
    in_system = 0
    preemptions = 0
    computed = 0
    finished = 0
    hit = engine.prefix_hit
    # one token per step (T == 1): every decoding slot advances each decode step, so its state is kept
    # relative to ``tick`` (the decode steps run): s_ctx = context - tick, gen = generated - tick, s_fin =
    # the tick it finishes at (``fins`` a heap of (tick, slot), stale ones skipped), its blocks ceil(context
    # / bs) (into s_blocks when it stops); ``res`` counts them by s_ctx mod bs (those at a multiple of bs
    # take a block next step), ``sum_base`` sums s_ctx
    lazy = T == 1 and not stepwise
    tick = sum_base = 0
    res = [0] * bs
    s_fin = [math.inf] * S
    fins: list[tuple[int, int]] = []
    running = np.zeros(0, dtype=np.int64)  # lazy: the decoding slots (flatnonzero(s_dec)) ...
    running_stale = False  # ... to be recomputed
    dt_decode = 0.0  # the last decode-only step's seconds

    def start_decoding(slot, r):
        nonlocal sum_base, running_stale
        s_dec[slot] = True
        s_credit[slot] = 0.0
        running_stale = True
        if lazy:
            base = int(s_ctx[slot]) - tick
            s_ctx[slot] = base
            gen[r] -= tick
            s_fin[slot] = int(out[r] - gen[r])
            heapq.heappush(fins, (s_fin[slot], slot))
            res[base % bs] += 1
            sum_base += base

    def stop_decoding(slot):
        nonlocal sum_base, running_stale
        running_stale = True
        if lazy:
            base = int(s_ctx[slot])
            res[base % bs] -= 1
            sum_base -= base
            s_ctx[slot] = base + tick
            gen[s_req[slot]] += tick
            s_blocks[slot] = -(-(base + tick) // bs)
            s_fin[slot] = math.inf

    def release(slot):
        nonlocal used
        if s_dec[slot]:
            stop_decoding(slot)
        used -= tab[s_blocks[slot]]
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
            arrival[next_closed], arrives[next_closed] = now, now + lag
            next_closed += 1

    def preempt_newest():
        """The most recently admitted sequence preempted: its cache freed, it waits again at the head
        of the queue to recompute its prompt and what it had generated."""
        nonlocal preemptions
        active = np.flatnonzero(s_req >= 0)
        victim = int(active[np.argmax(s_order[active])])
        r = int(s_req[victim])
        if victim in prefilling:
            prefilling.remove(victim)
        release(victim)
        need[r] = int(inp[r] + gen[r])
        done[r] = 0
        waiting.appendleft(r)
        preemptions += 1

    def grow_decodes():
        """The decoding slots, their next blocks taken; the newest sequences preempted while those do
        not fit."""
        nonlocal used
        dec = np.flatnonzero(s_dec)
        while len(dec):
            grow_to = -(-(s_ctx[dec] + T) // bs)  # blocks to hold the ctx + T tokens the step writes
            extra = float((table[grow_to] - table[s_blocks[dec]]).sum())
            if used + extra <= cap:
                s_blocks[dec] = grow_to
                used += extra
                break
            preempt_newest()
            dec = np.flatnonzero(s_dec)
        return dec

    def decoding():
        """grow_decodes(); with one token per step (lazy) from the kept counts: in O(1) while no
        decoding slot needs a block or the cache holds those that do (a linear table: a block each)."""
        nonlocal used, running, running_stale
        if not lazy:
            return grow_decodes()
        while True:
            if running_stale:
                running = s_dec.nonzero()[0]
                running_stale = False
            crossing = res[-tick % bs]
            if not crossing:
                return running
            if linear_table:
                extra = tab[1] * crossing
            else:
                ctx = s_ctx[running] + tick
                extra = float((table[-(-(ctx + 1) // bs)] - table[-(-ctx // bs)]).sum())
            if used + extra <= cap:
                used += extra
                return running
            preempt_newest()

    def finish_decodes():
        """Lazy: the decoding slots whose last token this tick gave finish (in slot order)."""
        while fins and fins[0][0] <= tick:
            fin, slot = heapq.heappop(fins)
            if s_fin[slot] == fin:
                finish(int(s_req[slot]), slot)

    def next_finish() -> float:
        """Lazy: the tick at which the next decoding slot finishes."""
        while fins and s_fin[fins[0][1]] != fins[0][0]:
            heapq.heappop(fins)
        return fins[0][0] if fins else math.inf

    report_every = max(n // 10, 1)
    next_report = report_every
    while finished < n:
        if progress is not None and finished >= next_report:
            progress(finished, n)
            next_report = (finished // report_every + 1) * report_every
        if steps >= max_steps:
            raise RooflineError(f"the simulation ran {max_steps:,} steps without finishing", field="requests")
        while next_i < n and arrives[next_i] <= now:
            waiting.append(next_i)
            in_system += 1
            in_system_integral += now - arrives[next_i]  # it arrived during the last step
            next_i += 1
        if t0 is None and waiting:
            t0 = now
        # a step of prompts alone (not mixed_steps: SGLang's new prefill batch first) while there is prompt work
        prefill_only = not engine.mixed_steps and bool(prefilling or (waiting and free_slots))
        dec = np.zeros(0, dtype=np.int64) if prefill_only else decoding()
        budget = engine.max_tokens - len(dec) * T
        chunks, chunk_slots = [], []
        fed = fed_prefix = completing = 0  # the chunks' tokens, their tokens x prefix, those that end a prompt
        for slot in list(prefilling):
            if budget <= 0:
                break
            r = int(s_req[slot])
            c = int(min(need[r] - done[r], budget))
            blocks = -(-(int(done[r]) + c) // bs)
            extra = tab[blocks] - tab[s_blocks[slot]]
            if used + extra > cap:
                break
            used += extra
            s_blocks[slot] = blocks
            chunks.append((c, int(done[r])))
            chunk_slots.append(slot)
            budget -= c
            fed, fed_prefix, completing = fed + c, fed_prefix + c * int(done[r]), completing + (done[r] + c >= need[r])
        while waiting and budget > 0 and free_slots:
            r = waiting[0]
            start = int(done[r])
            if not seen[r] and hit:
                start = int(min(math.floor(hit * inp[r]), inp[r] - 1))
            c = int(min(need[r] - start, budget))
            if c < need[r] - start and not engine.chunked_prefill:  # a whole prompt or none (it waits a step)
                if need[r] - start > engine.max_tokens:
                    raise RooflineError(f"without chunked prefill a prompt is fed whole in one step: {int(need[r] - start):,} "
                                        f"tokens (a prompt, or one preempted with what it had generated) exceed the step's "
                                        f"budget of {engine.max_tokens:,} (raise max_tokens, or use an engine that chunks prompts: vllm, sglang)",
                                        field="max_tokens", also=("input_len",))
                break
            blocks = -(-(start + c) // bs)
            if used + tab[blocks] > cap:
                break
            waiting.popleft()
            seen[r] = True
            done[r] = start
            slot = free_slots.pop()
            s_req[slot], s_ctx[slot], s_blocks[slot], s_dec[slot] = r, start, blocks, False
            s_order[slot] = order
            order += 1
            used += tab[blocks]
            prefilling.append(slot)
            chunks.append((c, start))
            chunk_slots.append(slot)
            budget -= c
            fed, fed_prefix, completing = fed + c, fed_prefix + c * start, completing + (start + c >= need[r])
        if prefill_only and not chunks:  # no prompt could start (cache or budget): the decodes run instead
            dec = decoding()
        nd = len(dec)
        if not nd and not chunks:
            if next_i < n and arrives[next_i] < math.inf:
                now = max(now, arrives[next_i])
                continue
            raise RooflineError("the scheduler is stuck: nothing can run and nothing will arrive (the cache holds no "
                                "waiting request)", field="requests")
        # decodes only: run the steps up to the next event in one go (same arithmetic), unless one arrives
        # within four steps (a stretch's arrays cost about as much as four steps)
        if (nd and not chunks and lazy and STRETCH > 1 and not (next_i < n and arrives[next_i] - now < 4.0 * dt_decode)
                and next_finish() - tick > 1):
            # step k feeds one token against ctx0 + 1 + k; the contexts themselves only where a sum will not do
            ctx0 = s_ctx[dec] + tick if step.needs_contexts or not linear_table else None
            K, dts, end, used_k = _decode_stretch(
                step, engine.step_overhead_s, int(min(next_finish() - tick, STRETCH)), now,
                arrives[next_i] if next_i < n else math.inf, (nd, sum_base + nd * tick), ctx0,
                (used, cap, table, linear_table), res, tick, bs)
            if K > 1:
                in_system_integral += in_system * (end - now)
                kv_integral += float(np.dot(used_k, dts))
                used = float(used_k[-1])
                kv_peak = max(kv_peak, used)
                now = end
                steps += K
                tokens_sum += nd * K
                records.stretch(dts, nd)
                dt_decode = float(dts[-1])
                tick += K
                finish_decodes()
                continue
        if lazy:
            sum1 = sum_base + nd * (tick + 1)  # the contexts the step's decodes attend
            ctx1 = s_ctx[dec] + (tick + 1) if nd and step.needs_contexts else None
        else:
            ctx1 = s_ctx[dec] + T
            sum1 = float(ctx1.sum())
        M = nd * T + fed
        dt = step.step_seconds(nd, float(sum1), ctx1, M, nd * T + completing, chunks) + engine.step_overhead_s
        if draft is not None:  # k draft decode steps, and the draft's own prefill of the chunks
            if nd:
                dt += float(draft.decode_steps_seconds(s_ctx[dec], T - 1).sum())
            if chunks:
                dt += draft.step_seconds(0, 0.0, (), M - nd * T, 0, chunks)
        in_system_integral += in_system * dt
        now += dt
        steps += 1
        tokens_sum += M
        records.one(dt, nd, fed, fed_prefix / fed if fed else 0.0, len(chunks))
        if not chunks:
            dt_decode = dt
        kv_integral += used * dt
        kv_peak = max(kv_peak, used)
        computed += M - nd * T
        if nd and lazy:
            tick += 1
            if fins and fins[0][0] <= tick:
                finish_decodes()
        elif nd and T == 1:  # stepwise: the per-slot arrays advanced as they are
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
                if first_t[r] != first_t[r]:  # NaN: its first token
                    first_t[r] = now
                gen[r] += 1
                if gen[r] >= out[r]:
                    finish(r, slot)
                else:
                    start_decoding(slot, r)
    t_start = t0 or 0.0
    duration = float(np.nanmax(finish_t)) - t_start
    real_arrival = arrival
    ttft = first_t - real_arrival
    e2e = finish_t - real_arrival
    tpot = np.where(out > 1, (finish_t - first_t) / np.maximum(out - 1, 1), np.nan)
    dts, nds, step_ck, step_pf, step_nc = records.arrays()
    busy = float(dts.sum())
    per_gpu = cap / step._dp  # what each GPU keeps for its cache (the draft's weights out): the engine line's
    gpus = step.tensor_parallel * step.pipeline_stages  # the replica's GPUs
    what = cache_name(step.model)
    notes = (f"{what} {per_gpu / GIGA:,.1f} GB per GPU"
             + (f" ({gpus} GPUs in the replica: {per_gpu * gpus / GIGA:,.1f} GB)" if gpus > 1 else "")
             + (f": {engine.memory_fraction:g} of what {step.machine.capacity_text} leaves after " if engine.memory_of_free
                else f": {engine.memory_fraction:g} of {step.machine.capacity_text} less ")
             + f"weights {parts['weights_bytes'] / GIGA:,.1f} GB"
             + (f", the draft's {parts['draft_weights_bytes'] / GIGA:,.1f} GB" if "draft_weights_bytes" in parts else "")
             + f" and a full step's activations {parts['activations_bytes'] / GIGA:,.2f} GB (an estimate: "
             f"{step.max_tokens:,} rows of the widest op and fp32 logits for {step.max_seqs:,} sequences) per GPU; not counted: the CUDA context, NCCL buffers and "
             "CUDA graph pools" + (" (vLLM logs 0.1 GiB of non-torch memory at tensor-parallel 1, up to ~2 GiB at 8)"
                                   if engine.preset in ("", "vllm") else ""),
             *((engine.label + _kernel_version_words(step, engine),) if engine.label else ()),
             "scheduler: " + scheduler_words(engine) + "; preemption recomputes the newest sequence; "
             + ((f"cache in blocks of {engine.block_size} tokens" if engine.block_size > 1 else "cache a token a slot (no blocks)") if what != "SSM state" else
                "one state per sequence, its size fixed (no blocks)") + (f"; prefix hits skip {hit:.0%} of each prompt (its cache still held)" if hit else ""),
             "each replica simulated alone; a decode-only step replays a CUDA graph (one launch); a step with a "
             f"prompt chunk launches each kernel ({step.cost_model.launch_overhead_s / 1e-6:g} us each), as engines "
             "capture decode batches only"
             if step.cost_model.cuda_graph else "each replica simulated alone; every op of a step pays a launch (no CUDA graph)")
    if not engine.chunked_prefill and int(inp.max()) > engine.max_tokens // 2:
        notes += (f"without chunked prefill a prompt of up to {int(inp.max()):,} tokens starts only in a step whose decodes "
                  f"leave it room in max_tokens {engine.max_tokens:,}: under load it waits for decodes to end (a "
                  "TensorRT-LLM deployment of such lengths raises max_num_tokens or enables chunked prefill: "
                  "--max-tokens)",)
    notes += (validation_note(step, engine),)
    if engine.step_overhead_s:
        notes += (f"each step adds {format_typed_ms(engine.step_overhead_s)} of the engine's own time (scheduling, inputs, "
                  "sampling, detokenising), not overlapped with the GPU's work",)
    else:
        notes += ("a step is the GPU's work alone: the engine's own time between steps (scheduling, sampling, "
                  "detokenising; a few ms at small batch in the published runs, docs/serving-validation.md) is not "
                  "counted (the CLI's --step-overhead adds it)",)
    if lag:
        notes += (f"each request adds {format_typed_ms(lag)} of the server's own time before the scheduler sees it "
                  "(HTTP, tokenising, routing), counted in its TTFT",)
    if closed and n > 1 and np.ptp(inp) == 0 and np.ptp(out) == 0:
        notes += ("a closed loop of identical requests: several users start together and resubmit as they finish, so "
                  "they move in step, one prompt wave after another: the percentiles are a few waves repeated, not a spread "
                  "(the first wave, every user's prompt at once, is the slowest); lengths drawn from a range or a dataset "
                  "give the spread a real workload has (the CLI's --input-len LO-HI or --lengths FILE)",)
    past = step.model.context_note(inp + out)
    if past:
        notes = (past,) + notes
    mean_seq = float(np.mean(inp + out))
    holds = cap / max(float(table[-(-int(mean_seq) // bs)]), 1.0)
    demand = min(engine.max_seqs, requests.concurrency if closed else n)
    if holds < demand / 2 and (preemptions > 0 or kv_peak >= 0.9 * cap):  # ... and the cache did fill
        notes = (f"memory-bound batch: the {cap / GIGA:,.2f} GB {what} holds {int(holds):,} sequence(s) of the mean "
                 f"length ({mean_seq:,.0f} tokens), under half of the {demand:,} that could run at once: more GPUs or a narrower "
                 "cache would batch more",) + notes
    over = overload_note(arrival, e2e, duration, ttft) if not closed and duration > 0 else None
    if over:
        notes = (over,) + notes
    if draft is not None:
        notes += (f"speculative decoding: {draft.model.name} drafts {T - 1} tokens per step, each accepted with probability "
                  f"{engine.acceptance_words()}: {E:.2f} tokens per sequence and step on average (the expected value, carried "
                  "from step to step; acceptance is not drawn at random); inter-token latency is the gap between a "
                  "sequence's deliveries, several tokens each; the draft's weights "
                  f"({parts['draft_weights_bytes'] / GIGA:,.1f} GB) and KV cache share the memory",)
    notes += step.notes() + step.model.header_lines()
    if draft is not None:  # the draft's loader notes too, named as the draft's
        notes += tuple(f"draft {draft.model.name}: {line}" for line in draft.model.header_lines())
    return ServingResult(
        step.describe(), requests.label, engine, step.tensor_parallel, ttft, tpot, e2e,
        _weighted_percentiles(dts, nds, PERCENTILES), duration, int(out.sum()), int(inp.sum()), int(computed), steps,
        float((dts * nds).sum() / busy) if busy else 0.0, tokens_sum / max(steps, 1),
        kv_integral / busy / cap if busy else 0.0, kv_peak / cap, preemptions,
        in_system_integral / max(float(np.nanmax(finish_t)) - t_start, 1e-300), cap, notes, price_per_gpu_hour, dts, nds,
        arrival.copy(), inp, out, {**step_settings(step), **requests.settings},
        step_ck, step_pf, step_nc, overload=over or "")


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
             f"fewer requests than stages leave stages idle; the mean decode batch is one micro-batch's (sequences "
             f"decoding at once: {(durations * decodes).sum() / duration if duration else 0.0:,.1f} over the "
             f"{p})",)
    for note in parts[0].notes:  # the first engine's: the memory line is every stage GPU's; its own load is not the replica's
        if note == parts[0].overload:
            continue  # judged below on the replica's requests
        if note.startswith("memory-bound batch: "):
            note = f"memory-bound batch, each of the {p} virtual engines: " + note[len("memory-bound batch: "):]
        notes += (note,)
    over = overload_note(arrival, e2e, duration, ttft) if not closed and duration > 0 else None
    if over:
        notes = (over,) + notes
    return ServingResult(
        step.describe(), requests.label, engine, step.tensor_parallel * p, ttft, tpot, e2e,
        _weighted_percentiles(durations, decodes, PERCENTILES), duration, int(out.sum()), int(inp.sum()),
        int(sum(r.computed_tokens for r in parts)), int(sum(r.steps for r in parts)),
        # the batch one step runs (one micro-batch's), the virtual engines' mean: the breakdown costs a step at it
        float(np.mean([r.mean_decode_batch for r in parts])),
        float(np.mean([r.mean_step_tokens for r in parts])), float(np.mean([r.kv_mean for r in parts])),
        float(max(r.kv_peak for r in parts)), int(sum(r.preemptions for r in parts)), float(np.nansum(e2e) / duration),
        parts[0].cache_bytes, notes, price_per_gpu_hour, durations, decodes, arrival, inp, out,
        {**step_settings(step), **requests.settings, "pipeline_stages": p}, overload=over or "")
