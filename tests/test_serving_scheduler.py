"""The scheduler's plain parts (serving/kvpool.py, schedule.py, advance.py): the KV pool's block
accounting and preemption, and the step plans a long prompt is fed in, against hand arithmetic."""

import numpy as np
import pytest

from roofline.plan.step import StepCost
from roofline.serving import Engine, closed_requests
from roofline.serving.advance import advance
from roofline.serving.kvpool import KVPool
from roofline.serving.schedule import schedule
from roofline.serving.state import RunState

from serving_common import EAGER  # noqa: E402 (tests/ is on sys.path)


def test_the_pool_counts_blocks_and_preempts_the_newest_when_a_decode_lacks_one():
    """Blocks of 16 tokens, 100 B each, a 500 B cache: a sequence of 40 cached tokens holds
    ceil(40 / 16) = 3 blocks (300 B), one of 32 holds 2 (200 B): the cache is full. Decoding, the
    first writes token 41 into its third block (no growth), the second token 33 into a new block
    (+100 B: 600 > 500), so the newest (the second) is preempted: its 200 B given back, 300 B held."""
    gen, out, requeued = np.zeros(2, dtype=np.int64), np.array([10, 10]), []
    pool = KVPool(4, 500.0, np.arange(10) * 100.0, True, 16, 1, False, gen, out, requeued.append)
    first, second = pool.admit(0, 40, 3), pool.admit(1, 32, 2)
    assert pool.used == 500.0 and pool.prefilling == [first, second]
    for slot, r in ((first, 0), (second, 1)):
        pool.prefilling.remove(slot)
        pool.start_decoding(slot, r)
    assert list(pool.decoding()) == [first]
    assert requeued == [1] and pool.used == 300.0 and pool.req[second] == -1 and second in pool.free
    pool.release(first)
    assert pool.used == 0.0 and sorted(pool.free) == [0, 1, 2, 3]


def test_a_long_prompt_is_planned_in_chunks_of_the_budget_and_its_last_samples_the_first_token():
    """20,000 prompt tokens, a budget of 8,192 a step: chunks of 8,192 (none cached before), 8,192
    (8,192 cached) and 20,000 - 16,384 = 3,616 (16,384 cached), the last ending the prompt; each
    plan is frozen (a tuple)."""
    step = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=256)
    st = RunState(step, closed_requests(1, 1, 20000, 2), Engine(max_tokens=8192), None, False)
    st.arrive()
    plans = []
    for _ in range(3):
        plans.append(schedule(st))
        advance(st, plans[-1])
    assert [p.chunks for p in plans] == [[(8192, 0)], [(8192, 8192)], [(3616, 16384)]]
    assert [p.completing for p in plans] == [0, 0, 1] and [p.fed for p in plans] == [8192, 8192, 3616]
    assert st.gen[0] == 1 and st.first_t[0] == st.now and st.steps == 3
    with pytest.raises(AttributeError):
        plans[0].fed = 1
