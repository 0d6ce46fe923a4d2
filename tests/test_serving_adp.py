"""TensorRT-LLM's attention-DP balance in the serving simulator (Engine.adp_timeout_steps, adp_batching_steps;
serving.schedule._adp_hold): its counter, run every step, and its waits, against the rule as TensorRT-LLM's
_balance_adp_requests states it (tensorrt_llm/_torch/pyexecutor): where every rank has a prompt the count goes to 0
(and with every rank decoding the prompts wait batching_wait_iters steps more); else it grows by one and the
prompts wait, until it reaches timeout_iters or a rank decodes nothing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from roofline.cost import seed_cost_model
from roofline.errors import RooflineError
from roofline.machines import get_machine
from roofline.plan import Precision
from roofline.plan.step import StepCost
from roofline.serving import closed_requests, simulate
from roofline.serving.engine import Engine
from roofline.serving.requests import Requests

RANKS = 8  # DeepSeek-V3 on 8 H200s, attention data-parallel over all 8 (attention TP 1), experts over the 8


@pytest.fixture(scope="module")
def dp_step():
    m = get_machine("h200")
    cm = seed_cost_model(launch_overhead_s=m.launch_overhead_s, cuda_graph=True)
    return StepCost("deepseek-v3", m, Precision.uniform("fp8", m), 8, None, cm, "flash", 16384, 256, gpus_per_node=8,
                    expert_parallel=True, attention_tp=1, expert_tp=1)


# TensorRT-LLM's way: whole prompts, the cache reserved in full, steps mixing prompts and decodes
TRT = Engine(max_seqs=256, max_tokens=16384, chunked_prefill=False, admission="reserve_full")


def _chunk_steps(r) -> list[int]:
    return np.flatnonzero(np.asarray(r.step_chunk_tokens) > 0).tolist()


def _step_of(r, t: float) -> int:
    """The first step that starts at or after time ``t`` (when the scheduler first sees a request that arrived at t)."""
    starts = np.concatenate(([0.0], np.cumsum(r.step_durations_s)))
    return int(np.searchsorted(starts, t, side="left"))


def _requests(late: int, at_s: float) -> Requests:
    """RANKS requests at 0 (a prompt for every rank: they start at once), decoding 300 tokens, and ``late`` more at
    ``at_s``, of 10."""
    n = RANKS + late
    return Requests(np.full(n, 512), np.array([300] * RANKS + [10] * late), np.array([0.0] * RANKS + [at_s] * late))


def test_a_prompt_that_comes_alone_waits_for_the_counts_turn(dp_step):
    # Step 0 starts the first RANKS prompts (every rank has one: the count at 0). Every later step has RANKS decodes
    # and no prompt on the other ranks, so the count grows by one a step: 1 after step 1, ..., 60 at step 60, where
    # it reaches timeout_iters 60 and the lone prompt, waiting since its arrival a few steps in, starts.
    r = simulate(dp_step, _requests(1, 0.05), dataclasses.replace(TRT, adp_timeout_steps=60))
    arrived = _step_of(r, 0.05)
    assert 0 < arrived < 60
    assert _chunk_steps(r) == [0, 60]
    assert r.held_steps == 60 - arrived
    # without the balance it starts in the step that first sees it
    off = simulate(dp_step, _requests(1, 0.05), TRT)
    assert _chunk_steps(off) == [0, _step_of(off, 0.05)] and off.held_steps == 0
    assert r.metrics()["ttft_mean_s"] > off.metrics()["ttft_mean_s"]


def test_a_prompt_for_every_rank_starts_at_once_or_after_the_batching_wait(dp_step):
    # RANKS prompts together: every rank has one, so none waits for the count; with batching_wait_iters 3 and every
    # rank decoding, they wait three steps in a row and start in the fourth.
    reqs = _requests(RANKS, 0.05)
    now = simulate(dp_step, reqs, dataclasses.replace(TRT, adp_timeout_steps=60))
    assert _chunk_steps(now) == [0, _step_of(now, 0.05)] and now.held_steps == 0
    waited = simulate(dp_step, reqs, dataclasses.replace(TRT, adp_timeout_steps=60, adp_batching_steps=3))
    assert _chunk_steps(waited) == [0, _step_of(waited, 0.05) + 3] and waited.held_steps == 3


def test_as_many_prompts_as_ranks_on_fewer_ranks_wait_for_the_counts_turn(dp_step):
    # Three requests a rank at 0: each arrival goes to the rank with the fewest (the first of the least on a tie), so
    # request k runs on rank k mod RANKS. Rank 0's first two (requests 0 and RANKS) end early, its third decodes on,
    # so every rank still decodes. RANKS late requests then go: three to rank 0 (1 -> 4 requests; the third on a tie
    # at 3), one each to ranks 1 to RANKS - 3, none to the last two: as many prompts as ranks, not one a rank, so they
    # wait for the count, 0 at step 0 (every rank had a prompt) and RANKS decoding since: its reach of 60 at step 60.
    n = 3 * RANKS
    out = np.array([20] + [300] * (RANKS - 1) + [20] + [300] * (n - RANKS - 1) + [10] * RANKS)
    reqs = Requests(np.full(n + RANKS, 512), out, np.array([0.0] * n + [0.6] * RANKS))
    got = simulate(dp_step, reqs, dataclasses.replace(TRT, adp_timeout_steps=60))
    arrived = _step_of(got, 0.6)
    assert 20 < arrived < 60
    assert _chunk_steps(got) == [0, 60] and got.held_steps == 60 - arrived
    # the same late requests where every rank lost one early (requests 0 to RANKS - 1): one a rank, at once
    out = np.array([20] * RANKS + [300] * (n - RANKS) + [10] * RANKS)
    now = simulate(dp_step, Requests(np.full(n + RANKS, 512), out, np.array([0.0] * n + [0.6] * RANKS)),
                   dataclasses.replace(TRT, adp_timeout_steps=60))
    assert _chunk_steps(now) == [0, _step_of(now, 0.6)] and now.held_steps == 0


def test_the_balance_gives_the_step_by_step_runs_figures(dp_step):
    """The decode-only stretches run at once count the steps the balance's counter would have counted one by one:
    the same steps, held steps and percentiles as simulate(..., stepwise=True), on staggered closed-loop finishes
    (lengths drawn from 0.8-1x, as InferenceX's client draws them)."""
    reqs = closed_requests(64, 320, (819, 1024), (819, 1024))
    for engine in (dataclasses.replace(TRT, adp_timeout_steps=60), dataclasses.replace(TRT, adp_timeout_steps=50,
                                                                                        adp_batching_steps=10)):
        fast, plain = simulate(dp_step, reqs, engine), simulate(dp_step, reqs, engine, stepwise=True)
        assert plain.held_steps > 0 and fast.held_steps == plain.held_steps
        a, b = fast.metrics(), plain.metrics()
        assert a["steps"] == b["steps"]
        for key, value in b.items():
            assert a[key] == pytest.approx(value, rel=1e-12, nan_ok=True), key
        np.testing.assert_allclose(fast.step_durations_s, plain.step_durations_s, rtol=1e-12)


def test_the_balance_needs_data_parallel_attention_and_mixed_steps(dp_step):
    with pytest.raises(RooflineError, match="data-parallel attention") as e:
        simulate(StepCost("llama3-8b", "h100-sxm", max_tokens=16384), _requests(1, 0.05),
                 dataclasses.replace(TRT, adp_timeout_steps=60))
    assert e.value.field == "adp_timeout_steps"
    with pytest.raises(RooflineError, match="mix prompts and decodes"):
        Engine(mixed_steps=False, adp_timeout_steps=60)
    with pytest.raises(RooflineError):
        Engine(adp_timeout_steps=-1)


def test_the_cli_takes_the_balance_and_says_it_held_prompts():
    base = [sys.executable, "-m", "roofline", "serving", "--model", "deepseek-v3", "--machine", "h200", "--dtype", "fp8",
            "--tp", "8", "--ep", "--attention-dp", "8", "--concurrency", "64", "--requests", "256", "--input-len",
            "1000", "--output-len", "500", "--engine", "trtllm"]
    out = subprocess.run(base + ["--adp-timeout-steps", "60", "--adp-batching-steps", "0"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "data-parallel ranks has one" in out.stdout and "attention-DP balance" in out.stdout
    bad = subprocess.run(base[:-2] + ["--adp-timeout-steps", "-3"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "adp-timeout-steps" in bad.stderr and "Traceback" not in bad.stderr
