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


def test_reserving_in_full_admits_while_every_admitted_requests_last_token_fits():
    """Blocks of 16 tokens, 100 B each, a 1,000 B cache (10 blocks); requests of 40 prompt + 24 output
    tokens. On demand (vLLM) a request needs its prompt's ceil(40 / 16) = 3 blocks: 3 are admitted
    (900 B), a fourth would make 1,200 B. Reserving in full (TensorRT-LLM's GUARANTEED_NO_EVICT) each
    reserves ceil((40 + 24) / 16) = 4 blocks (400 B): 2 are admitted (800 B), a third would make
    1,200 B; the first released gives its 400 B back and one more fits."""
    def admitted(reserve):
        gen, out = np.zeros(4, dtype=np.int64), np.full(4, 24)
        pool = KVPool(4, 1000.0, np.arange(10) * 100.0, True, 16, 1, False, gen, out, None, reserve)
        slots = []
        for r in range(4):
            if not pool.fits(r, 3):
                break
            slots.append(pool.admit(r, 40, 3))
        return pool, slots

    pool, slots = admitted(None)
    assert len(slots) == 3 and pool.used == 900.0
    pool, slots = admitted([400.0] * 4)
    assert len(slots) == 2 and pool.used == 600.0 and pool.committed == 800.0
    pool.release(slots[0])
    assert pool.committed == 400.0 and pool.committed_peak == 800.0 and pool.fits(2, 3)


def test_an_engine_that_reserves_in_full_never_preempts(step_8b):
    """Llama 3 8B's cache is 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B a token, 2,097,152 B a
    block of 16; a cache of 0.5 GB holds 500,000,000 / 2,097,152 = 238.4 blocks. 8 users of 1,000 + 500
    tokens: reserving in full each takes ceil(1,500 / 16) = 94 blocks, so 2 decode at once (188; 3 would be
    282), none preempted, each prompt computed once, and the cache peaks at 188 x 2,097,152 / 5e8 = 0.7885;
    on demand 3 prompts of ceil(1,000 / 16) = 63 blocks start (189; 4 would be 252) and their growth preempts."""
    from roofline.plan.step import kv_cache_budget
    from roofline.serving import simulate

    _, parts = kv_cache_budget(step_8b, 1.0)
    frac = (parts["weights_bytes"] + parts["activations_bytes"] + 0.5e9) / parts["capacity_bytes"]
    reqs = closed_requests(8, 16, 1000, 500)
    full = simulate(step_8b, reqs, Engine(memory_fraction=frac, admission="reserve_full"))
    assert full.preemptions == 0 and full.step_decodes.max() == 2 and full.computed_tokens == 16 * 1000
    assert full.kv_peak == pytest.approx(188 * 2_097_152 / 5e8, rel=1e-9) and full.engine.admission == "reserve_full"
    demand = simulate(step_8b, reqs, Engine(memory_fraction=frac))
    assert demand.preemptions > 0 and demand.step_decodes.max() == 3 and demand.computed_tokens > 16 * 1000


def test_an_unknown_admission_is_refused_by_name():
    from roofline.errors import RooflineError

    with pytest.raises(RooflineError) as e:
        Engine(admission="greedy")
    assert e.value.field == "admission"


@pytest.fixture
def step_8b():
    return StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=256)
