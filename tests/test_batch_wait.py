"""TensorRT-LLM's delayed prompt batching in the serving simulator (issue 35): Engine.batch_wait_steps N and
batch_wait_ratio r, its LLM API's batch_wait_timeout_iters and batch_wait_max_tokens_ratio. Its rule
(tensorrt_llm/_torch/pyexecutor/scheduler, RequestScheduler.schedule_step and _apply_batch_waiting,
https://github.com/NVIDIA/TensorRT-LLM): a step with prompts and decodes runs the decodes alone while the count of
such steps in a row is under N and the prompts' tokens plus a token per decode are under r x max_num_tokens.

Every expected time below is summed from step.seconds of the steps the rule says run, by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.serving import Engine, Requests, simulate

PROMPT, LONG_OUT = 1024, 1000  # A: a 1,024-token prompt, then 1,000 tokens of decode


def _two_users(step, arrive_after: int):
    """A arrives at 0 (1,024 prompt tokens, 1,000 out); B (1,024 in, 8 out) arrives halfway through A's decode step
    ``arrive_after`` (its k-th decode step feeds context 1,024 + k). Returns the requests, B's arrival and the end of
    A's decode step ``arrive_after``, where B joins the queue."""
    prefill = step.seconds([], [(PROMPT, 0)])  # A's prompt, sampling its first token
    ends = prefill + np.cumsum([step.seconds([PROMPT + k]) for k in range(1, arrive_after + 1)])
    t_b = float(ends[-1] - step.seconds([PROMPT + arrive_after]) / 2)
    return Requests([PROMPT, PROMPT], [LONG_OUT, 8], np.array([0.0, t_b]), None, label="two users"), t_b


def _ttft_b(step, t_b: float, held: int, arrive_after: int = 10) -> float:
    """B's TTFT by hand: A's prefill and its decode steps 1 .. arrive_after + held alone, then a step of A's next decode
    and B's whole prompt, which samples B's first token."""
    k_mixed = arrive_after + held + 1
    t = step.seconds([], [(PROMPT, 0)])
    for k in range(1, k_mixed):
        t += step.seconds([PROMPT + k])
    return t + step.seconds([PROMPT + k_mixed], [(PROMPT, 0)]) - t_b


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "whole prompts"])
def test_a_new_prompt_beside_a_decode_waits_n_steps(step, chunked):
    """N = 20, r = 0.9 of max_tokens 8,192 (7,372.8): B's step would take 1,024 + 1 = 1,025 tokens, under it, so it
    waits 20 of A's decode steps (11 .. 30) and runs in step 31; without batch waiting it runs in step 11."""
    reqs, t_b = _two_users(step, 10)
    base = dict(max_tokens=8192, chunked_prefill=chunked)
    off = simulate(step, reqs, Engine(**base))
    on = simulate(step, reqs, Engine(**base, batch_wait_steps=20, batch_wait_ratio=0.9))
    assert off.ttft_s[1] == pytest.approx(_ttft_b(step, t_b, 0), rel=1e-9)
    assert on.ttft_s[1] == pytest.approx(_ttft_b(step, t_b, 20), rel=1e-9)
    assert on.ttft_s[0] == off.ttft_s[0]  # A's prompt ran with no decode beside it: never held
    assert (on.held_steps, off.held_steps) == (20, 0)
    assert on.steps == off.steps  # the same steps, B's prompt in a later one


@pytest.mark.parametrize("n", [1, 5])
def test_the_wait_is_n_steps(step, n):
    """N = 1: one of A's decode steps alone (step 11), B in step 12; N = 5: steps 11 .. 15, B in 16."""
    reqs, t_b = _two_users(step, 10)
    on = simulate(step, reqs, Engine(max_tokens=8192, batch_wait_steps=n, batch_wait_ratio=0.9))
    assert on.ttft_s[1] == pytest.approx(_ttft_b(step, t_b, n), rel=1e-9)
    assert on.held_steps == n


def test_a_step_at_the_ratio_is_not_held(step):
    """r = 0.125: 0.125 x 8,192 = 1,024 tokens, and B's step takes 1,024 + 1 = 1,025, not under it: B runs at once.
    r = 0.126 (1,032.2 tokens): under it, held."""
    reqs, t_b = _two_users(step, 10)
    at = simulate(step, reqs, Engine(max_tokens=8192, batch_wait_steps=20, batch_wait_ratio=0.125))
    above = simulate(step, reqs, Engine(max_tokens=8192, batch_wait_steps=20, batch_wait_ratio=0.126))
    assert at.ttft_s[1] == pytest.approx(_ttft_b(step, t_b, 0), rel=1e-9) and at.held_steps == 0
    assert above.ttft_s[1] == pytest.approx(_ttft_b(step, t_b, 20), rel=1e-9)


def test_with_no_decode_running_a_prompt_is_never_held(step):
    """One request alone: its prompt's step has no decode beside it, so its TTFT is that step's time,
    step.seconds of its 1,024 tokens; the same for a second user arriving after the first finished."""
    lone = Requests([PROMPT], [4], np.array([0.0]), None, label="alone")
    r = simulate(step, lone, Engine(batch_wait_steps=20, batch_wait_ratio=0.9))
    assert r.ttft_s[0] == pytest.approx(step.seconds([], [(PROMPT, 0)]), rel=1e-12) and r.held_steps == 0
    after = Requests([PROMPT, PROMPT], [4, 4], np.array([0.0, 10.0]), None, label="apart")
    r = simulate(step, after, Engine(batch_wait_steps=20, batch_wait_ratio=0.9))
    assert r.ttft_s[1] == pytest.approx(step.seconds([], [(PROMPT, 0)]), rel=1e-12) and r.held_steps == 0


def test_either_setting_at_zero_is_off(step):
    """TensorRT-LLM holds a prompt only while the count is under N and the tokens under r x max_num_tokens: N = 0 or
    r = 0 holds none (its defaults)."""
    reqs, t_b = _two_users(step, 10)
    for engine in (Engine(batch_wait_steps=20), Engine(batch_wait_ratio=0.9), Engine()):
        r = simulate(step, reqs, engine)
        assert r.ttft_s[1] == pytest.approx(_ttft_b(step, t_b, 0), rel=1e-9) and r.held_steps == 0


def test_what_is_counted_is_what_the_step_would_feed(step, monkeypatch):
    """schedule._prompt_requests, which decides without admitting, names the requests _prompt_chunks then feeds,
    in order, in a run with chunks, a cache that runs out and preemptions."""
    from roofline.plan.step import kv_cache_budget
    from roofline.serving import poisson_requests, schedule as sched

    _, parts = kv_cache_budget(step, 1.0)
    fraction = (parts["weights_bytes"] + parts["activations_bytes"] + 0.5e9) / parts["capacity_bytes"]
    real, seen = sched._prompt_chunks, []

    def checked(st, budget, chunks, chunk_slots):
        want = sched._prompt_requests(st, budget)
        got = real(st, budget, chunks, chunk_slots)
        seen.append(want == [int(st.pool.req[s]) for s in chunk_slots])
        return got

    monkeypatch.setattr(sched, "_prompt_chunks", checked)
    r = simulate(step, poisson_requests(30, 200, (100, 3000), (10, 800), seed=4),
                 Engine(memory_fraction=fraction, max_tokens=2048))
    assert r.preemptions > 0 and len(seen) > 100 and all(seen)


def test_speculating_the_held_steps_match_the_step_by_step_run():
    """Speculating (3 drafts of a 1B model, each accepted at 0.7), TensorRT-LLM's way (whole prompts, cache reserved),
    N = 10, r = 0.5: the default run (held steps one by one, the others in verify stretches) holds the prompts in the
    same steps as simulate(..., stepwise=True) and gives the same figures."""
    from roofline.plan.step import StepCost
    from roofline.serving import poisson_requests
    from serving_common import EAGER

    target = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64, verify_tokens=4)
    draft = StepCost("llama3.2-1b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64)
    reqs = poisson_requests(10, 200, (64, 1500), (8, 400), seed=1)
    engine = Engine(max_seqs=64, spec_tokens=3, acceptance=0.7, chunked_prefill=False, admission="reserve_full",
                    batch_wait_steps=10, batch_wait_ratio=0.5)
    fast, plain = simulate(target, reqs, engine, draft=draft), simulate(target, reqs, engine, draft=draft, stepwise=True)
    assert plain.held_steps > 0 and (fast.held_steps, fast.steps) == (plain.held_steps, plain.steps)
    np.testing.assert_allclose(fast.e2e_s, plain.e2e_s, rtol=1e-12)
    np.testing.assert_allclose(fast.ttft_s, plain.ttft_s, rtol=1e-12)


@pytest.mark.parametrize("given, field", [
    (dict(batch_wait_steps=-1), "batch_wait_steps"), (dict(batch_wait_steps=2.5), "batch_wait_steps"),
    (dict(batch_wait_ratio=-0.1), "batch_wait_ratio"), (dict(batch_wait_ratio=1.5), "batch_wait_ratio"),
    (dict(batch_wait_ratio=math.nan), "batch_wait_ratio"),
    (dict(batch_wait_steps=4, batch_wait_ratio=0.5, mixed_steps=False), "batch_wait_steps")])
def test_the_engine_refuses_bad_settings(given, field):
    with pytest.raises(RooflineError) as err:
        Engine(**given)
    assert err.value.field == field


ARGS = ["serving", "--model", "llama3.2-1b", "--machine", "h100-sxm", "--input-len", "512", "--output-len", "64",
        "--concurrency", "4", "--requests", "16", "--seeds", "1"]


@pytest.mark.parametrize("flag, value", [("--batch-wait-ratio", "1.5"), ("--batch-wait-ratio", "nan"),
                                         ("--batch-wait-ratio", "-0.1"), ("--batch-wait-steps", "-1"),
                                         ("--batch-wait-steps", "2.5")])
def test_the_flags_refuse_bad_values_with_exit_2(capsys, flag, value):
    assert main(ARGS + [flag, value]) == 2
    assert flag in capsys.readouterr().err


def test_the_flags_reach_the_engine_and_its_line(capsys):
    """The flags set the Engine's fields (the JSON's engine) and the engine line under the run says them; without
    them the line says nothing of it."""
    assert main(ARGS + ["--batch-wait-steps", "12", "--batch-wait-ratio", "0.75", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["engine"]["batch_wait_steps"], d["engine"]["batch_wait_ratio"]) == (12, 0.75)
    assert d["batch_wait_held_steps"] >= 0
    assert main(ARGS + ["--batch-wait-steps", "12", "--batch-wait-ratio", "0.75"]) == 0
    assert "batch waiting" in capsys.readouterr().out
    assert main(ARGS) == 0
    assert "batch waiting" not in capsys.readouterr().out


def test_attention_data_parallelism_is_refused(capsys):
    """TensorRT-LLM checks batch waiting only without attention DP (schedule_step: not enable_attention_dp): the
    simulator refuses the pair there rather than hold prompts the engine would not; exit 2."""
    argv = ["serving", "--model", "gpt-oss-20b", "--machine", "h100-sxm", "--tp", "2", "--ep", "--attention-dp", "2",
            "--requests", "8", "--concurrency", "2", "--input-len", "256", "--output-len", "16", "--seeds", "1"]
    assert main(argv + ["--batch-wait-steps", "5", "--batch-wait-ratio", "0.5"]) == 2
    assert "batch_wait_steps" in capsys.readouterr().err


@pytest.mark.parametrize("flags, said", [
    (["--batch-wait-steps", "20"], "one is given, so none is held"),
    (["--batch-wait-ratio", "0.5"], "one is given, so none is held"),
    (["--batch-wait-steps", "20", "--batch-wait-ratio", "0.5", "--engine", "vllm"], "applied as given to the vllm engine"),
    (["--batch-wait-steps", "20", "--batch-wait-ratio", "0.5"], "applied as given to the simulated engine (no --engine)"),
])
def test_batch_waiting_half_given_or_given_to_another_engine_is_said(flags, said, capsys):
    code = main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--requests", "8",
                 *flags])
    assert code == 0
    assert said in capsys.readouterr().out


def test_batch_waiting_given_to_tensorrt_llm_says_nothing_more(capsys):
    main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--requests", "8",
          "--engine", "trtllm", "--batch-wait-steps", "20", "--batch-wait-ratio", "0.5"])
    assert "applied as given" not in capsys.readouterr().out
