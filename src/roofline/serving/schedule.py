"""The scheduler's choice of one step (scheduler.simulate), as vLLM V1's ``schedule()`` makes it:
every running, decoding sequence first (its next block taken, the newest preempted while the cache
lacks it), then the token budget left to prompts in chunks: the running prompts first, then waiting
requests in arrival order while a sequence slot and cache for the chunk are free (KVPool.fits: or,
reserving in full as TensorRT-LLM does, cache for the request's every token). Where steps are
not mixed (SGLang's new prefill batch first) a step of prompts alone runs while one can start.
With TensorRT-LLM's batch waiting (Engine.batch_wait_steps) the prompts of a step with decodes may
be held, the decodes running alone (_hold); with its attention-DP balance (Engine.adp_timeout_steps)
too, until every data-parallel rank has one (_adp_hold).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from roofline.errors import RooflineError

_NONE = np.zeros(0, dtype=np.int64)


class StepPlan(NamedTuple):
    """One step's work: the decoding slots (each fed T tokens), the prompt chunks as (tokens,
    tokens already cached) with their slots, the chunks' tokens, their sum of tokens x prefix,
    and how many end a prompt (each samples its request's first token)."""

    dec: np.ndarray
    chunks: list
    chunk_slots: list
    fed: int
    fed_prefix: int
    completing: int


def schedule(st) -> StepPlan:
    """The step that RunState ``st`` runs next; the cache for it taken from st.pool."""
    st.held = st.adp_held = False
    pool, waiting = st.pool, st.waiting
    prompts = bool(pool.prefilling or (waiting and pool.free))  # prompt work: running, or one could start
    prefill_only = prompts and not st.mixed_steps
    dec = _NONE if prefill_only else pool.decoding()
    if not prompts:
        if st.adp:  # its counter runs in every step
            _adp_hold(st, (), dec)
        return _plan(StepPlan, (dec, [], [], 0, 0, 0))
    chunks, chunk_slots = [], []
    budget = st.max_tokens - len(dec) * st.T
    if st.wait_steps and len(dec) and _hold(st, budget, len(dec)):  # the decodes alone: the prompts wait to batch
        return _plan(StepPlan, (dec, [], [], 0, 0, 0))
    if st.adp and _adp_hold(st, _prompt_requests(st, budget), dec):  # until every rank has a prompt
        st.adp_held = True
        st.held_steps += 1
        return _plan(StepPlan, (dec, [], [], 0, 0, 0))
    fed, fed_prefix, completing = _prompt_chunks(st, budget, chunks, chunk_slots)
    if prefill_only and not chunks:  # no prompt could start (cache or budget): the decodes run instead
        dec = pool.decoding()
    return _plan(StepPlan, (dec, chunks, chunk_slots, fed, fed_prefix, completing))


def _hold(st, budget: int, decodes: int) -> bool:
    """TensorRT-LLM's batch waiting (Engine.batch_wait_steps N, batch_wait_ratio r; its
    RequestScheduler.schedule_step and _apply_batch_waiting, tensorrt_llm/_torch/pyexecutor/scheduler):
    where a step would run prompts beside ``decodes`` decodes, it holds them (True: the decodes run
    alone, and RunState.wait_count grows by one) while fewer than N steps in a row have held them and
    the step's tokens, the prompts' whole lengths (its len(req.get_tokens(0)), not the chunks) and
    T per decode (a token and the drafts), are under r x max_tokens; else the prompts run and the
    count starts again at 0. Decided before any prompt is admitted (_prompt_requests)."""
    requests = _prompt_requests(st, budget)
    if not requests:  # no prompt could run this step: nothing to hold, the count kept
        return False
    need = st.need
    tokens = sum(need[r] for r in requests) + decodes * st.T
    if st.wait_count < st.wait_steps and tokens < st.wait_tokens:
        st.wait_count += 1
        st.held = True
        st.held_steps += 1
        return True
    st.wait_count = 0
    return False


def _adp_hold(st, prompts, dec) -> bool:
    """TensorRT-LLM's attention-DP balance (Engine.adp_timeout_steps N, adp_batching_steps W; its
    _balance_adp_requests, tensorrt_llm/_torch/pyexecutor, run every step over the ranks' gathered counts):
    whether this step holds its ``prompts`` (the requests whose prompts it would start), the slots ``dec``
    decoding. Each request is on the rank RunState.arrive gave it: every rank has a prompt where the prompts'
    ranks are all the ranks, a decode and a free slot (under max_seqs / ranks decodes) likewise.
    Where every rank has a prompt and a free slot, the timeout count goes to 0 and, every rank decoding too,
    the prompts wait W steps in a row (a second count) before they start; else the count grows by one and the
    prompts wait, unless it reaches N or a rank decodes nothing (then it goes to 0 and they start). The
    count runs in steps without prompts too, so a prompt that comes alone waits for its turn: the steps left
    to the count's next reach of N. The decode-only steps run at once since the last step counted
    (advance.stretch, verify_run) are counted here: with every rank decoding, (c + K) mod N."""
    skipped = st.steps - st.adp_seen - 1
    if skipped > 0:
        st.adp_count = (st.adp_count + skipped) % st.adp_timeout if st.adp_gen and st.adp_timeout else 0
    st.adp_seen = st.steps
    ranks, rank_of = st.adp_ranks, st.rank_of
    per_rank = np.bincount(rank_of[st.pool.req[dec]], minlength=ranks) if len(dec) else np.zeros(ranks, dtype=np.int64)
    every_decodes = st.adp_gen = bool(per_rank.min() > 0)
    if len({int(rank_of[r]) for r in prompts}) == ranks and per_rank.max() < st.engine.max_seqs // ranks:
        st.adp_count = 0
        if every_decodes:
            if st.adp_batch < st.adp_batching:
                st.adp_batch += 1
                st.adp_left = 1  # the batching wait's steps one by one
                return True
            st.adp_batch = 0
        return False
    st.adp_count += 1
    if st.adp_count >= st.adp_timeout or not every_decodes:
        st.adp_count = 0
        return False
    st.adp_left = st.adp_timeout - st.adp_count  # this step and those to the count's reach of N hold them (a stretch)
    return len(prompts) > 0


def _prompt_requests(st, budget: int) -> list:
    """The requests whose prompt chunks _prompt_chunks would feed in a step of ``budget`` tokens, in
    its order, found as it finds them but changing nothing (no block taken, none admitted)."""
    engine, pool, waiting = st.engine, st.pool, st.waiting
    need, done, tab, bs, cap = st.need, st.done, pool.tab, pool.bs, pool.cap
    out, used = [], pool.used
    for slot in pool.prefilling:  # the running prompts, their next chunks
        if budget <= 0:
            break
        r = int(pool.req[slot])
        c = int(min(need[r] - done[r], budget))
        extra = tab[-(-(int(done[r]) + c) // bs)] - tab[pool.blocks[slot]]
        if used + extra > cap:
            break
        used += extra
        out.append(r)
        budget -= c
    free, committed, reserve = len(pool.free), pool.committed, pool.reserve
    for r in waiting:  # waiting requests admitted, in order
        if budget <= 0 or not free:
            break
        start = int(done[r])
        if st.hit and not st.seen[r]:
            start = int(min(math.floor(st.hit * st.inp[r]), st.inp[r] - 1))
        c = int(min(need[r] - start, budget))
        if c < need[r] - start and not engine.chunked_prefill:
            break
        blocks = -(-(start + c) // bs)
        if reserve is None:  # KVPool.fits, beside the ones admitted before it in this step
            if used + tab[blocks] > cap:
                break
        elif committed + reserve[r] > cap:
            break
        else:
            committed += reserve[r]
        used += tab[blocks]
        free -= 1
        out.append(r)
        budget -= c
    return out


_plan = tuple.__new__  # a StepPlan made without NamedTuple's __new__ (a Python call a step: the hot path)


def _prompt_chunks(st, budget: int, chunks: list, chunk_slots: list) -> tuple[int, int, int]:
    """The step's ``budget`` of tokens to prompts: the running prompts' next chunks first, then
    waiting requests admitted in order; each chunk (tokens, tokens cached before) and its slot put
    in ``chunks`` and ``chunk_slots``. Returns the chunks' tokens, their sum of tokens x prefix, and
    how many end a prompt."""
    engine, pool, waiting = st.engine, st.pool, st.waiting
    need, done, tab, bs, cap, free = st.need, st.done, pool.tab, pool.bs, pool.cap, pool.free
    fed = fed_prefix = completing = 0
    if pool.prefilling:  # the running prompts, their next chunks
        req, held, used = pool.req, pool.blocks, pool.used
        for slot in list(pool.prefilling):
            if budget <= 0:
                break
            r = int(req[slot])
            c = int(min(need[r] - done[r], budget))
            blocks = -(-(int(done[r]) + c) // bs)
            extra = tab[blocks] - tab[held[slot]]
            if used + extra > cap:
                break
            used += extra
            held[slot] = blocks
            chunks.append((c, int(done[r])))
            chunk_slots.append(slot)
            budget -= c
            fed, fed_prefix, completing = fed + c, fed_prefix + c * int(done[r]), completing + (done[r] + c >= need[r])
        pool.used = used
    while waiting and budget > 0 and free:  # waiting requests admitted, in order
        r = waiting[0]
        start = int(done[r])
        if st.hit and not st.seen[r]:
            start = int(min(math.floor(st.hit * st.inp[r]), st.inp[r] - 1))
        c = int(min(need[r] - start, budget))
        if c < need[r] - start and not engine.chunked_prefill:  # a whole prompt or none (it waits a step)
            if need[r] - start > engine.max_tokens:
                what = ("a prompt preempted with what it had generated" if need[r] > st.inp[r] else "a prompt")
                raise RooflineError(f"without chunked prefill a prompt is fed whole in one step: {int(need[r] - start):,} "
                                    f"tokens ({what}) exceed the step's budget of {engine.max_tokens:,} (raise "
                                    "max_tokens, or use an engine that chunks prompts: vllm, sglang)",
                                    field="max_tokens", also=("input_len",))
            break
        blocks = -(-(start + c) // bs)
        if not pool.fits(r, blocks):
            break
        waiting.popleft()
        st.seen[r] = True
        done[r] = start
        chunks.append((c, start))
        chunk_slots.append(pool.admit(r, start, blocks))
        budget -= c
        fed, fed_prefix, completing = fed + c, fed_prefix + c * start, completing + (start + c >= need[r])
    return fed, fed_prefix, completing
