"""A step applied (scheduler.simulate): its time from the step model, the clock, the run's sums
and records moved on; each decoding sequence given its token (or, speculating, its expected
tokens), each prompt chunk's tokens cached, a prompt's last chunk sampling its first token, and the
requests that end finished. ``stretch`` applies a run of decode-only steps at once, and
``verify_run`` a run of speculating ones.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.serving.stretch import accepted_tokens, decode_stretch, verify_stretch


def advance(st, plan):
    """RunState ``st`` moved past the step of StepPlan ``plan``: its seconds, the sums, the tokens
    (the run's token counts are summed from its records at the end)."""
    dec, chunks, chunk_slots, fed, fed_prefix, _ = plan
    pool, T = st.pool, st.T
    nd = len(dec)
    if st.lazy:
        tick1 = pool.tick + 1
        sum1 = pool.sum_base + nd * tick1  # the contexts the step's decodes attend
        ctx1 = pool.ctx[dec] + tick1 if nd and st.needs_contexts else None
    else:
        ctx1 = pool.ctx[dec] + T
        sum1 = float(ctx1.sum())
    M = nd * T + fed
    # logits: each decode's T rows and the last row of every chunk, a prompt's partial chunk too (vLLM's
    # gpu_model_runner: logits_indices = query_start_loc[1:] - 1, "we do so for simplicity"; SGLang's
    # LogitsProcessor: last_index = cumsum(extend_seq_lens) - 1)
    dt = st.step_seconds(nd, float(sum1), ctx1, M, nd * T + len(chunks), chunks) + st.step_overhead_s
    if st.eager_op_s:  # the host dispatching each op of a step no CUDA graph replays
        dt += st.eager_op_s * st.step.eager_ops(nd, bool(chunks), nd * T + len(chunks) > 0, M, st.graph_tokens)
    if st.draft is not None:
        dt = _with_draft(dt, st.draft, pool.ctx[dec], T, nd, fed, chunks)
    if nd and st.decode_end < st.now:  # the step before had no decodes: some may have waited through it
        _waited(st, dec, dt)
    st.in_system_integral += st.in_system * dt
    st.last_start, st.idle = st.now, False
    now = st.now = st.now + dt
    st.steps += 1
    st.record((dt, nd, fed, fed_prefix / fed if fed else 0.0, len(chunks)))
    used = pool.used
    st.kv_integral += used * dt
    if used > st.kv_peak:
        st.kv_peak = used
    if not chunks:
        st.dt_decode = dt
    if nd:
        st.decode_end = now
    if nd and st.lazy:  # one token each: the tick moves; those whose last token it was finish
        tick = pool.tick = pool.tick + 1
        if pool.fins and pool.fins[0][0] <= tick:
            for r, slot in pool.due():
                st.finish(r, slot)
    elif nd:
        _advance_slots(st, dec)
    if chunks:
        _feed(st, chunks, chunk_slots, now)


def _waited(st, dec: np.ndarray, dt: float):
    """The decodes of the step about to run (``dec``, ``dt`` its seconds) that waited since their
    last token (at RunState.token_t or decode_end, the later) through steps without decodes (a
    step of prompts alone, SGLang's prefill first): their gaps recorded as that wait and this step,
    at this step (StepRecords.waited)."""
    wait = st.now - np.maximum(st.token_t[st.pool.req[dec]], st.decode_end)
    late = wait[wait > 0]
    if len(late):
        st.records.waited(st.steps, late + dt)


def _with_draft(dt: float, draft, ctx, T: int, nd: int, prompt_tokens: int, chunks) -> float:
    """A speculating step's seconds ``dt`` with the draft's work added: k = T - 1 draft decode
    steps, and its own prefill of the chunks."""
    if nd:
        dt += float(draft.decode_steps_seconds(ctx, T - 1).sum())
    if chunks:
        dt += draft.step_seconds(0, 0.0, (), prompt_tokens, 0, chunks)
    return dt


def _feed(st, chunks: list, chunk_slots: list, now: float):
    """The chunks' tokens cached; a prompt's last chunk samples its request's first token, and the
    request finishes (one token wanted) or starts decoding."""
    pool, need, done, gen, out, first_t = st.pool, st.need, st.done, st.gen, st.out, st.first_t
    req, ctx = pool.req, pool.ctx
    for (c, p), slot in zip(chunks, chunk_slots):
        r = int(req[slot])
        done[r] = p + c
        ctx[slot] = p + c
        if done[r] >= need[r]:
            pool.prefilling.remove(slot)
            if first_t[r] != first_t[r]:  # NaN: its first token
                first_t[r] = now
            else:  # recomputed after a preemption: its next token, the gap from its last before
                st.records.waited(-1, np.array([now - st.token_t[r]]))
            st.token_t[r] = now
            gen[r] += 1
            if gen[r] >= out[r]:
                st.finish(r, slot)
            else:
                pool.start_decoding(slot, r)


def _advance_slots(st, dec: np.ndarray):
    """The decoding slots' per-slot arrays advanced as they are: one token each (the stepwise
    reference), or speculating, each its expected tokens (stretch.accepted_tokens of its verify
    steps: carried as a fraction, the expected value, not a random draw), at least the one
    verified, the rejected drafts' cache given back."""
    pool, gen, out = st.pool, st.gen, st.out
    reqs = pool.req[dec]
    if st.T == 1:
        pool.ctx[dec] += 1
        gen[reqs] += 1
    else:
        v = pool.verified[dec]
        emitted = np.minimum(accepted_tokens(v + 1, st.E) - accepted_tokens(v, st.E), out[reqs] - gen[reqs])
        pool.verified[dec] = v + 1
        pool.ctx[dec] += emitted
        gen[reqs] += emitted
        keep = -(-pool.ctx[dec] // pool.bs)
        pool.used -= float((pool.table[pool.blocks[dec]] - pool.table[keep]).sum())
        pool.blocks[dec] = keep
    for slot in dec[gen[reqs] >= out[reqs]]:
        st.finish(int(pool.req[slot]), int(slot))


def stretch(st, dec: np.ndarray, most: int) -> bool:
    """Up to ``most`` decode-only steps of the slots ``dec`` run at once (stretch.decode_stretch:
    to the next finish, the step during which the next request arrives, the cache's end; prompts
    held by batch waiting, also before the cache held changes where their fit reads it); False,
    nothing done, where that is a single step."""
    pool, nd, tick = st.pool, len(dec), st.pool.tick
    # step k feeds one token against ctx0 + 1 + k; the contexts themselves only where a sum will not do
    ctx0 = pool.ctx[dec] + tick if st.step.needs_contexts or not pool.linear else None
    K, dts, end, used_k = decode_stretch(
        st.step, st.decode_overhead_s, most, st.now, st.arrives[st.next_i] if st.next_i < st.n else math.inf,
        (nd, pool.sum_base + nd * tick), ctx0, (pool.used, pool.cap, pool.table, pool.linear), pool.res, tick, pool.bs,
        # SGLang's receive interval: a request joins at the scheduler's next poll (scheduler._polls), every-th steps on
        (st.recv_every - st.recv_count, st.recv_every) if st.recv_every > 1 else None)
    # the held prompts' fit reads the cache held: stop
    if (st.held or st.adp_held) and (pool.reserve is None or pool.prefilling):
        moved = np.flatnonzero(used_k[1:K] != used_k[0])    # before it changes (the step after would decide anew)
        if len(moved):
            K = int(moved[0]) + 1
            dts, used_k = dts[:K], used_k[:K]
            end = float(np.cumsum(np.concatenate(([st.now], dts)))[-1])  # summed as decode_stretch sums its ends
    if K <= 1:
        return False
    if st.held:  # each step after the first held the prompts too (the first was counted as it was scheduled)
        st.wait_count += K - 1
        st.held_steps += K - 1
    elif st.adp_held:  # likewise; the balance's count catches up as the next step is scheduled (schedule._adp_hold)
        st.held_steps += K - 1
    if st.decode_end < st.now:
        _waited(st, dec, float(dts[0]))
    st.decode_end = end
    st.in_system_integral += st.in_system * (end - st.now)
    st.last_start, st.idle = end - float(dts[-1]), False
    st.kv_integral += float(np.dot(used_k, dts))
    pool.used = float(used_k[-1])
    st.kv_peak = max(st.kv_peak, pool.used)
    st.now = end
    st.steps += K
    st.records.stretch(dts, nd)
    st.dt_decode = float(dts[-1])
    pool.tick += K
    for r, slot in pool.due():
        st.finish(r, slot)
    return True


def verify_run(st, dec: np.ndarray, most: int) -> bool:
    """Speculating: up to ``most`` decode-only steps of the slots ``dec`` run at once
    (stretch.verify_stretch: to the first finish, the step during which the next request arrives, the
    cache's end), the slots left as _advance_slots leaves them step by step; False, nothing done,
    where that is a single step or a sequence's own context is needed (a window: not in closed form)."""
    pool, draft = st.pool, st.draft
    if st.step.needs_contexts or (draft is not None and draft.needs_contexts):
        return False
    reqs = pool.req[dec]
    ctx0, left, table = pool.ctx[dec], st.out[reqs] - st.gen[reqs], pool.table
    held = float(table[pool.blocks[dec]].sum())  # the decodes' blocks, taken for the first step's tokens
    run = verify_stretch(st.step, draft, st.decode_overhead_s, most, st.now,
                         st.arrives[st.next_i] if st.next_i < st.n else math.inf, ctx0, pool.verified[dec], left, st.E,
                         (pool.used, pool.used - held, pool.cap, table, pool.bs), st.dt_decode)
    if run is None:
        return False
    K, dts, end, used_k, before_last, emitted = run
    if st.decode_end < st.now:
        _waited(st, dec, float(dts[0]))
    st.decode_end = end
    st.in_system_integral += st.in_system * (end - st.now)
    st.last_start, st.idle = end - float(dts[-1]), False
    st.kv_integral += float(np.dot(used_k, dts))
    st.kv_peak = max(st.kv_peak, float(used_k.max()))
    st.now = end
    st.steps += K
    st.records.stretch(dts, len(dec))
    st.dt_decode = float(dts[-1])
    grown = -(-(ctx0 + before_last + st.T) // pool.bs)  # the blocks the last step took
    pool.verified[dec] += K
    pool.ctx[dec] = ctx = ctx0 + emitted
    st.gen[reqs] += emitted
    keep = -(-ctx // pool.bs)
    pool.used = float(used_k[-1]) - float((table[grown] - table[keep]).sum())  # the rejected drafts' blocks back
    pool.blocks[dec] = keep
    for slot in dec[st.gen[reqs] >= st.out[reqs]]:
        st.finish(int(pool.req[slot]), int(slot))
    return True
