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

The run in plain parts, as vLLM V1's scheduler reads: state.RunState (the requests: arrivals, queue,
tokens, finishes, the run's sums), kvpool.KVPool (slots and cache blocks: admit, grow, release,
preempt), schedule.schedule (the step's plan, a StepPlan), advance.advance (the step applied: time,
tokens, completions) and advance.stretch (decode-only steps at once, stretch.decode_stretch), then
assemble.assemble (the ServingResult and its notes).

Sweeps and the SLO search are in search.py, prefill/decode disaggregation in disagg.py.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.errors import RooflineError
from roofline.parameters import PRICE
from roofline.plan.step import StepCost
from roofline.serving.advance import advance, stretch, verify_run
from roofline.serving.assemble import assemble
from roofline.serving.engine import Engine
from roofline.serving.requests import Requests
from roofline.serving.results import PERCENTILES, ServingResult, overload_note, step_settings, weighted_percentiles
from roofline.serving.schedule import schedule
from roofline.serving.state import RunState


STRETCH = 4096  # decode-only steps run at once between events, at most


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
    if engine.batch_waiting and step._dp > 1:
        raise RooflineError("batch waiting (batch_wait_steps, batch_wait_ratio) is TensorRT-LLM's for tensor parallelism "
                            "alone: with attention data parallelism it holds no prompts that way (its own "
                            "attention_dp_batching_wait_iters is not modelled); leave the two out",
                            field="batch_wait_steps", also=("batch_wait_ratio", "attention_dp"))
    if engine.adp_balance and step._dp == 1:
        raise RooflineError("attention-DP balance (adp_timeout_steps, adp_batching_steps) balances prompts over "
                            "data-parallel attention ranks: this step has none (" + (
                                "--attention-dp 1 is one attention group: nothing to balance" if step.expert_parallel
                                else "give --ep, with --attention-dp D over 1") + "), or leave the two out", field="adp_timeout_steps", also=("adp_batching_steps", "attention_dp"))
    if price_per_gpu_hour is not None:
        PRICE.check(price_per_gpu_hour)
    st = RunState(step, requests, engine, draft, stepwise)  # (refuses a cache the requests outgrow)
    _check_work(requests, engine, max_steps)
    _run(st, max_steps, progress)
    return assemble(st, requests, price_per_gpu_hour)


def _check_work(requests: Requests, engine: Engine, max_steps: int):
    """A run whose fewest possible steps exceed ``max_steps`` refused before it starts (issue 38: a search's
    or a run's work bounded and its budget said): every output token takes a step of its sequence, at most
    max_seqs sequences a step, each step at most spec_tokens + 1 tokens of a sequence."""
    out = float(np.sum(np.asarray(requests.output_tokens, dtype=float)))
    fewest = out / (engine.max_seqs * (engine.spec_tokens + 1))
    if fewest > max_steps:
        raise RooflineError(f"{len(requests.output_tokens):,} requests of {out / len(requests.output_tokens):,.0f} output "
                            f"tokens on average (output_len), at most max_seqs {engine.max_seqs:,} sequences a step, need "
                            f"at least {fewest:,.0f} steps, past the simulation's {max_steps:,}: fewer requests, shorter "
                            "outputs or more sequences a step", field="requests", also=("output_len", "max_seqs"))


def _run(st: RunState, max_steps: int, progress):
    """The steps of ``st`` until every request has finished: arrivals queued, the step scheduled
    and applied; decode-only stretches (no arrival within four steps: a stretch's arrays cost about
    as much as four steps) run at once, while prompts are held (batch waiting) only to the step whose
    count reaches Engine.batch_wait_steps (advance.stretch counts the steps; speculating, step by step)."""
    n, pool, arrives = st.n, st.pool, st.arrives
    report_every = max(n // 10, 1)
    next_report = report_every
    while st.finished < n:
        if progress is not None and st.finished >= next_report:
            progress(st.finished, n)
            next_report = (st.finished // report_every + 1) * report_every
        if st.steps >= max_steps:
            raise RooflineError(f"the simulation ran {max_steps:,} steps without finishing", field="requests")
        if st.recv_every > 1:
            if _polls(st) and st.next_i < n and st.takes(arrives[st.next_i]):
                st.arrive()
        elif st.next_i < n and st.takes(arrives[st.next_i]):
            st.arrive()
        plan = schedule(st)
        dec, chunks = plan.dec, plan.chunks
        if not chunks:
            if not len(dec):  # nothing can run: wait for the next arrival
                if st.next_i < n and arrives[st.next_i] < math.inf:
                    st.now = max(st.now, arrives[st.next_i])
                    st.idle = True  # nothing runs: the scheduler takes the request as it arrives
                    st.recv_count = st.recv_every  # an idle scheduler's loop polls at once
                    continue
                raise RooflineError("the scheduler is stuck: nothing can run and nothing will arrive (the cache holds no "
                                    "waiting request)", field="requests")
            # prompts held (batch waiting): this step and at most the steps still to hold them, as one by one
            # (attention-DP balance: to its count's reach of N; its batching wait step by step)
            most = st.adp_left if st.adp_held else STRETCH if not st.held else 1 + st.wait_steps - st.wait_count
            # a request due within four steps: step by step, unless the scheduler takes requests only as it polls
            # every few steps (the steps to its next poll run at once: advance.stretch)
            soon = st.next_i < n and arrives[st.next_i] - st.now < 4.0 * st.dt_decode
            if STRETCH > 1 and (st.recv_every > 1 or not soon) and (
                    (st.lazy and pool.next_finish() - pool.tick > 1
                     and stretch(st, dec, int(min(pool.next_finish() - pool.tick, most))))
                    or (st.speculating and not st.held and not st.adp_held and verify_run(st, dec, STRETCH))):
                continue
        advance(st, plan)
        st.recv_prompted = bool(chunks)


def _polls(st) -> bool:
    """Whether SGLang's scheduler polls for new requests before this step (SchedulerRecvSkipper.handle, every
    Engine.recv_interval counted steps): its count since the last look, a decode step counting 1 (after K of them from
    count c, with a poll and a reset at every reach of the interval between: (c + K - 1) mod interval + 1) and a step
    that fed prompts the whole interval; it polls, and starts again from 0, once the count reaches the interval."""
    d = st.steps - st.recv_seen
    if d:
        st.recv_count = st.recv_every if st.recv_prompted else (st.recv_count + d - 1) % st.recv_every + 1
        st.recv_seen, st.recv_prompted = st.steps, False
    if st.recv_count >= st.recv_every:
        st.recv_count = 0
        return True
    return False


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
    gaps, counts = np.concatenate([r.itl_gaps_s for r in parts]), np.concatenate([r.itl_counts for r in parts])
    notes = (f"pipeline: {p} stages of about {step.model.n_layers / p:.3g} layers, each on {step.tensor_parallel} GPU(s), "
             f"{p} micro-batches in flight (one virtual engine per stage); balanced stages and micro-batches assumed; "
             f"fewer requests than stages leave stages idle; the mean decode batch is one micro-batch's (sequences "
             f"decoding at once: {(durations * decodes).sum() / duration if duration else 0.0:,.1f} over the "
             f"{p})",)
    # the first engine's: the memory line is every stage GPU's (a memory-bound one says each virtual engine is:
    # assemble.memory_bound_head); its own load is not the replica's
    notes += tuple(n for n in parts[0].notes if n != parts[0].overload)  # the overload judged below on the replica's requests
    over = overload_note(arrival, e2e, duration, ttft) if not closed and duration > 0 else None
    if over:
        notes = (over,) + notes
    return ServingResult(
        step.describe(), requests.label, engine, step.tensor_parallel * p, ttft, tpot, e2e,
        weighted_percentiles(gaps, counts, PERCENTILES), duration, int(out.sum()), int(inp.sum()),
        int(sum(r.computed_tokens for r in parts)), int(sum(r.steps for r in parts)),
        # the batch one step runs (one micro-batch's), the virtual engines' mean: the breakdown costs a step at it
        float(np.mean([r.mean_decode_batch for r in parts])),
        float(np.mean([r.mean_step_tokens for r in parts])), float(np.mean([r.kv_mean for r in parts])),
        float(max(r.kv_peak for r in parts)), int(sum(r.preemptions for r in parts)), float(np.nansum(e2e) / duration),
        parts[0].cache_bytes, notes, price_per_gpu_hour, durations, decodes, arrival, inp, out,
        {**step_settings(step), **requests.settings, "pipeline_stages": p}, overload=over or "",
        scheduler=parts[0].scheduler, itl_gaps_s=gaps, itl_counts=counts)
