"""The requests' side of a simulated serving run (scheduler.simulate): each request's arrival,
prompt tokens to hold, tokens cached and generated, first token and finish, the queue, and the
run's running sums (time, steps, tokens, the cache and requests in the system integrated over
time); the cache's side is kvpool.KVPool.
"""

from __future__ import annotations

import collections

import numpy as np

from roofline.plan.step import StepCost
from roofline.serving.engine import Engine
from roofline.serving.cache import replica_cache
from roofline.serving.kvpool import KVPool
from roofline.serving.requests import Requests
from roofline.serving.stretch import StepRecords


class RunState:
    """A run in progress: per request its arrival (``arrives``: when it joins the queue, ``lag`` the
    server's time per request later; read a step at a time), ``need`` (prompt tokens to hold before sampling: the prompt, and what it had
    generated after a preemption), ``done`` (tokens cached), ``gen`` (generated), first token and
    finish times and whether it was admitted before (the prefix hit applies to the first admission
    only); ``waiting`` the queue; ``pool`` the cache. Per-request scalars read every step are plain
    lists (cheaper than array elements)."""

    def __init__(self, step: StepCost, requests: Requests, engine: Engine, draft: StepCost | None, stepwise: bool):
        self.step, self.engine, self.draft = step, engine, draft
        self.T, self.E, self.hit = engine.spec_tokens + 1, engine.tokens_per_verify, engine.prefix_hit
        self.lazy = self.T == 1 and not stepwise
        self.speculating = self.T > 1 and not stepwise  # its decode-only steps run at once (advance.verify_run)
        self.mixed_steps, self.max_tokens, self.step_overhead_s = engine.mixed_steps, engine.max_tokens, engine.step_overhead_s
        self.step_seconds, self.needs_contexts = step.step_seconds, step.needs_contexts  # read every step
        # the engine's host time per op outside a CUDA graph (Engine.eager_op_s): a step with prompt chunks pays it per
        # op run; a decode-only step too where no CUDA graph replays it (decode_overhead_s: the engine's time per step)
        self.eager_op_s, self.graph_tokens = engine.eager_op_s, engine.graph_tokens
        self.decode_overhead_s = engine.step_overhead_s + engine.eager_op_s * step.eager_ops(1, False)
        # batch waiting (Engine.batch_wait_steps, schedule.schedule): the steps it may hold prompts in a row (0: never),
        # the step's tokens it holds them under, the steps in a row held so far (TensorRT-LLM's global counter,
        # batch_wait_iters_count), whether the step last scheduled held them, and the steps that did
        self.wait_steps = engine.batch_wait_steps if engine.batch_waiting else 0
        self.wait_tokens = engine.batch_wait_ratio * engine.max_tokens
        self.wait_count, self.held, self.held_steps = 0, False, 0
        # attention-DP balance (Engine.adp_timeout_steps, schedule._adp_hold), with data-parallel attention only: the
        # ranks, the timeout and batching waits, TensorRT-LLM's two counters (adp_ctx_waiting_iters_count,
        # adp_ctx_batching_wait_iters_count), the step last counted and whether every rank decoded in it, whether the
        # step last scheduled held prompts (its held steps are counted in held_steps)
        self.adp = engine.adp_balance and step._dp > 1
        self.adp_ranks, self.adp_timeout, self.adp_batching = step._dp, engine.adp_timeout_steps, engine.adp_batching_steps
        self.adp_count, self.adp_batch, self.adp_seen, self.adp_gen, self.adp_held = 0, 0, -1, False, False
        self.adp_left = 1  # the steps a hold lasts from the step last scheduled, nothing arriving or finishing
        # each request's rank, given as it arrives to the rank with the fewest requests (TensorRT-LLM's
        # _balance_requests_across_ranks gives a new request to a rank under the expected count), and each rank's count
        self.rank_of = np.full(requests.n, -1, dtype=np.int64) if self.adp else None
        self.rank_active = [0] * step._dp
        # SGLang's receive interval (Engine.recv_interval): the scheduler's count of decode steps since it last polled
        # for new requests; it polls (the queue takes what arrived) once the count reaches the interval
        self.recv_every, self.recv_count = engine.recv_interval, engine.recv_interval
        self.recv_seen, self.recv_prompted = 0, False  # the steps counted so far; whether the last one fed prompts
        n = self.n = requests.n
        self.inp = np.asarray(requests.input_tokens, dtype=np.int64)
        self.out = np.asarray(requests.output_tokens, dtype=np.int64)
        cap, self.parts, table, linear = replica_cache(step, engine, self.inp, self.out, draft)
        self.closed = requests.arrival_s is None
        self.arrival = np.full(n, np.inf)
        if self.closed:
            self.arrival[: min(requests.concurrency, n)] = 0.0
        else:
            self.arrival[:] = requests.arrival_s
        self.lag = engine.request_overhead_s  # the server's time per request: it joins the queue this long after it was sent
        self.arrives = (self.arrival + self.lag).tolist()
        self.need = self.inp.tolist()
        self.done = [0] * n
        self.gen = np.zeros(n, dtype=np.int64)
        self.first_t = np.full(n, np.nan)
        # each request's last token not given by a decode step (its prompt's last chunk), or at a preemption its last
        # token: a decoding sequence's last token is at this or at decode_end, the end of the last step with decodes
        # (every such step decodes every decoding sequence), whichever is later; its next token's gap runs from there
        self.token_t = np.full(n, -np.inf)
        self.decode_end = -np.inf
        self.finish_t = np.full(n, np.nan)
        self.seen = np.zeros(n, dtype=bool)
        self.waiting: collections.deque = collections.deque()
        self.next_i = 0  # next request to arrive (arrival times are nondecreasing in request order)
        self.next_closed = min(requests.concurrency, n) if self.closed else n
        reserve = (table[-(-(self.inp + self.out + self.T - 1) // engine.block_size)].tolist()  # each one's last token
                   if engine.admission == "reserve_full" else None)
        self.pool = KVPool(engine.max_seqs, cap, table, linear, engine.block_size, self.T, self.lazy, self.gen,
                           self.out, self.requeue, reserve)
        self.records = StepRecords()  # per step: seconds, decodes, prompt tokens, their mean prefix, chunks
        self.record = self.records.singles.append  # a single step's, as StepRecords.one takes it
        self.now, self.t0, self.dt_decode = 0.0, None, 0.0  # dt_decode: the last decode-only step's seconds
        # when the last step started, and whether the engine is idle (no step ran since it last waited for a request):
        # takes() reads them
        self.ahead, self.last_start, self.idle = engine.schedule_ahead, 0.0, True
        self.steps = self.finished = self.in_system = self.preemptions = 0
        self.kv_integral = self.kv_peak = self.in_system_integral = 0.0

    def takes(self, t: float) -> bool:
        """Whether the plan of the step about to run can take a request that arrived at ``t``: the scheduler plans it
        once the last step has ended (now) or, planning ahead (Engine.schedule_ahead), as the last step started; a
        request that arrives just then (a closed-loop user's next, sent as its last finished) has not reached it, as
        sending one (the client, HTTP, tokenising) takes longer than planning a step, so that time itself is
        excluded. An idle engine takes a request as it arrives."""
        if self.idle:
            return t <= self.now
        return t < (self.last_start if self.ahead else self.now)

    def arrive(self):
        """The requests that the step about to run can take (takes()) join the queue."""
        arrives, now, waiting, takes = self.arrives, self.now, self.waiting, self.takes
        while self.next_i < self.n and takes(arrives[self.next_i]):
            if self.adp:
                active = self.rank_active
                k = active.index(min(active))
                self.rank_of[self.next_i] = k
                active[k] += 1
            waiting.append(self.next_i)
            self.in_system += 1
            self.in_system_integral += now - arrives[self.next_i]
            self.next_i += 1
        if self.t0 is None and waiting:
            self.t0 = now

    def finish(self, r: int, slot: int):
        """Request ``r`` done now: its slot released; in a closed loop its user sends the next."""
        now = self.now
        self.finish_t[r] = now
        self.finished += 1
        self.in_system -= 1
        self.pool.release(slot)
        if self.adp:
            self.rank_active[self.rank_of[r]] -= 1
        if self.closed and self.next_closed < self.n:
            self.arrival[self.next_closed], self.arrives[self.next_closed] = now, now + self.lag
            self.next_closed += 1

    def requeue(self, r: int):
        """Request ``r`` preempted (its cache freed): it waits again at the head of the queue to
        recompute its prompt and what it had generated, as vLLM's recompute preemption does; a
        decoding one's last token kept (token_t), the gap to its next runs from it."""
        if self.done[r] >= self.need[r]:  # its prompt was cached: it was decoding
            self.token_t[r] = max(self.token_t[r], self.decode_end)
        self.need[r] = int(self.inp[r] + self.gen[r])
        self.done[r] = 0
        self.waiting.appendleft(r)
        self.preemptions += 1
