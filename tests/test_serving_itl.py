"""Inter-token latency (issue 35): the gap between a sequence's consecutive tokens, a step of prompts
alone included for the sequences that sat through it (SGLang's prefill first), and a preempted
sequence's wait until its recomputed prompt gives its next token. Truths: the gaps of a hand-built
run, composed from its steps' seconds; and, gaps summing per sequence, their total is every
request's time from its first token to its last (end to end less TTFT), so with equal output
lengths the inter-token mean is the TPOT mean."""

import numpy as np
import pytest

from roofline.plan.step import StepCost, kv_cache_budget
from roofline.serving import Engine, Requests, closed_requests, simulate

from serving_common import EAGER  # noqa: E402 (tests/ is on sys.path)

PREFILL_FIRST = dict(max_seqs=64, max_tokens=2048, mixed_steps=False)  # SGLang's: a step of prompts alone


@pytest.fixture(scope="module")
def step():
    return StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=2048, max_seqs=64)


def test_a_prompt_only_step_between_two_decodes_is_in_the_gap_of_the_sequences_that_waited(step):
    """A: 100 prompt tokens, 3 out; B: 100 in, 1 out, arriving half-way through A's first decode.
    Steps: (1) A's prompt (its first token), (2) A decodes (token 2) while B arrives, (3) B's
    prompt alone (B's one token), A waiting, (4) A decodes (token 3). A's gaps: step 2, and steps
    3 + 4 together; B has none. Two gaps: p50 the smaller (step 2), p90 and p99 the larger, the
    mean their sum over 2 = A's TPOT, (end of 4 - end of 1) / 2."""
    engine = Engine(**PREFILL_FIRST)
    alone = simulate(step, Requests(np.array([100]), np.array([3]), np.array([0.0])), engine).step_durations_s
    half_way = alone[0] + alone[1] / 2
    r = simulate(step, Requests(np.array([100, 100]), np.array([3, 1]), np.array([0.0, half_way])), engine)
    np.testing.assert_array_equal(r.step_decodes, [0, 1, 0, 1])
    np.testing.assert_array_equal(r.step_chunk_tokens, [100, 0, 100, 0])
    d = r.step_durations_s
    assert d[:2] == pytest.approx(alone[:2], rel=1e-12)
    assert r.itl_s[50] == pytest.approx(d[1], rel=1e-12)
    assert r.itl_s[90] == r.itl_s[99] == pytest.approx(d[2] + d[3], rel=1e-12)
    assert r.itl_s["mean"] == pytest.approx((d[1] + d[2] + d[3]) / 2, rel=1e-12)
    assert r.tpot_s[0] == pytest.approx(r.itl_s["mean"], rel=1e-12)


def _small_cache(step, gb):
    """The memory fraction that leaves ``gb`` GB for the KV cache after the weights and activations."""
    _, parts = kv_cache_budget(step, 1.0)
    return (parts["weights_bytes"] + parts["activations_bytes"] + gb * 1e9) / parts["capacity_bytes"]


@pytest.mark.parametrize("how", ["prefill first", "mixed steps", "whole prompts"])
@pytest.mark.parametrize("stepwise", [False, True])
def test_the_gaps_sum_to_each_requests_first_to_last_token_on_every_scheduler(step, how, stepwise):
    """16 users of 100-2,000 prompt tokens and 200 out each on a 0.5 GB cache (~3,800 tokens of
    131,072 B: it preempts): each request's gaps sum to its last token less its first, so the gaps
    (their count the 199 later tokens of every request) sum to sum(e2e - TTFT) and the inter-token
    mean is the TPOT mean, on the stretches and step by step, whatever the scheduler."""
    engine = Engine(memory_fraction=_small_cache(step, 0.5), **{
        "prefill first": PREFILL_FIRST, "mixed steps": dict(max_seqs=64, max_tokens=2048),
        "whole prompts": dict(max_seqs=64, max_tokens=2048, chunked_prefill=False)}[how])
    r = simulate(step, closed_requests(16, 60, (100, 2000), 200, seed=3), engine, stepwise=stepwise)
    assert r.preemptions > 0
    assert r.itl_counts.sum() == 60 * 199
    assert float(np.dot(r.itl_gaps_s, r.itl_counts)) == pytest.approx(float(np.sum(r.e2e_s - r.ttft_s)), rel=1e-12)
    assert r.itl_s["mean"] == pytest.approx(float(np.mean(r.tpot_s)), rel=1e-12)


def test_prefill_first_decodes_wait_out_the_prompts_in_their_gaps_as_vllms_are_slowed_by_them(step):
    """16 users, prompts of 200-1,800 tokens and 20-200 out: a prefill-first run's decodes sit
    through every step of prompts, so its p99 gap is at least one such step with a decode step
    after it; a stepwise run gives the same percentiles as the stretches."""
    reqs = closed_requests(16, 64, (200, 1800), (20, 200))
    first = simulate(step, reqs, Engine(**PREFILL_FIRST))
    plain = simulate(step, reqs, Engine(**PREFILL_FIRST), stepwise=True)
    assert first.itl_s == pytest.approx(plain.itl_s, rel=1e-12)
    prompt_only = first.step_durations_s[first.step_decodes == 0]
    decode = first.step_durations_s[first.step_decodes > 0]
    assert first.itl_s[99] >= float(np.median(prompt_only)) + float(decode.min())


def test_speculating_the_gaps_are_between_deliveries_and_still_sum_to_first_to_last_token():
    """Llama 3 70B on 4 H100s drafting 4 tokens with Llama 3.2 1B, prefill first: a delivery is a
    verify step's accepted tokens, and the gaps, waits through steps of prompts included, still sum
    to sum(e2e - TTFT); the verify stretches give the step-by-step run's percentiles."""
    target = StepCost("llama3-70b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=64, max_tokens=2048,
                      verify_tokens=5)
    draft = StepCost("llama3.2-1b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=64, max_tokens=2048)
    engine = Engine(spec_tokens=4, acceptance=0.8, **PREFILL_FIRST)
    reqs = closed_requests(16, 48, (200, 1800), (20, 300), seed=1)
    fast = simulate(target, reqs, engine, draft=draft)
    plain = simulate(target, reqs, engine, draft=draft, stepwise=True)
    assert float(np.dot(fast.itl_gaps_s, fast.itl_counts)) == pytest.approx(float(np.sum(fast.e2e_s - fast.ttft_s)), rel=1e-12)
    assert fast.itl_s == pytest.approx(plain.itl_s, rel=1e-12)
    assert fast.itl_counts.sum() < float(np.sum(fast.request_output - 1))  # several tokens a delivery
