"""A scheduler that plans ahead (Engine.schedule_ahead; vLLM's async scheduling, SGLang's overlap schedule,
TensorRT-LLM's overlap scheduler): step k+1 is planned as step k starts, so a request that arrives while step k runs
starts in step k+2, not k+1; and a request sent just as a step ends (a closed-loop user's next) misses the step the
scheduler plans then, unless the engine is idle. Truths: the schedule each rule gives a hand-built run, its times
composed from the run's own steps' seconds; and the stretches against step by step."""

import subprocess
import sys

import numpy as np
import pytest

from roofline.plan.step import StepCost
from roofline.serving import Engine, Requests, closed_requests, simulate
from roofline.serving.engines import preset
from roofline.machines import get_machine

from serving_common import EAGER  # noqa: E402 (tests/ is on sys.path)


@pytest.fixture(scope="module")
def step():
    return StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=2048, max_seqs=64)


def _engine(ahead):
    return Engine(max_seqs=64, max_tokens=2048, schedule_ahead=ahead)


@pytest.mark.parametrize("ahead", [0, 1])
def test_a_request_arriving_during_a_step_starts_one_step_later_when_the_scheduler_plans_ahead(step, ahead):
    """A: 100 prompt tokens, 4 out, at 0; B: 100 in, 1 out, arriving half-way through step 2 (A's first decode).
    Planned once the last step ends, step 3 takes B's prompt beside A's decode; planned as step 2 starts (before B
    came), step 3 is A's decode alone and B's prompt waits for step 4. B's TTFT: from its arrival to the end of the
    step with its prompt."""
    alone = simulate(step, Requests(np.array([100]), np.array([4]), np.array([0.0])), _engine(ahead)).step_durations_s
    half_way = alone[0] + alone[1] / 2
    r = simulate(step, Requests(np.array([100, 100]), np.array([4, 1]), np.array([0.0, half_way])), _engine(ahead))
    np.testing.assert_array_equal(r.step_chunk_tokens, [100, 0, 100, 0] if ahead == 0 else [100, 0, 0, 100])
    ends = np.cumsum(r.step_durations_s)
    b_step = 2 + ahead  # the step (0-based) that ran B's prompt
    assert r.ttft_s[1] == pytest.approx(ends[b_step] - half_way, rel=1e-12)


@pytest.mark.parametrize("ahead", [0, 1])
def test_a_closed_loop_users_next_request_misses_the_step_planned_as_its_last_finished(step, ahead):
    """Two users; A (100 in, 2 out) and B (100 in, 10 out) start at 0, C (100 in, 1 out) is A's user's next, sent as
    A finishes at the end of step 2. The step planned then (step 3, or with planning ahead step 4: step 3's was
    planned as step 2 started) does not have it: sending a request takes longer than planning a step. So C's prompt
    runs in step 4 (step 5 planning ahead), its TTFT the steps from 3 to that one."""
    reqs = Requests(np.array([100, 100, 100]), np.array([2, 10, 1]), None, 2)
    r = simulate(step, reqs, _engine(ahead))
    c_step = 3 + ahead  # 0-based
    expected = [200, 0, 0, 0, 0, 0][: c_step] + [100]
    np.testing.assert_array_equal(r.step_chunk_tokens[: c_step + 1], expected)
    d = r.step_durations_s
    assert r.ttft_s[2] == pytest.approx(d[2: c_step + 1].sum(), rel=1e-12)


@pytest.mark.parametrize("ahead", [0, 1])
def test_an_idle_engine_takes_a_request_as_it_arrives(step, ahead):
    """One user, two requests of 100 in and 3 out: the second is sent as the first finishes, with nothing else
    running, so its prompt runs at once: both TTFTs one prompt step, whether the scheduler plans ahead or not."""
    r = simulate(step, closed_requests(1, 2, 100, 3), _engine(ahead))
    np.testing.assert_array_equal(r.step_chunk_tokens, [100, 0, 0, 100, 0, 0])
    assert r.ttft_s[1] == pytest.approx(r.ttft_s[0], rel=1e-12)
    assert r.ttft_s[0] == pytest.approx(r.step_durations_s[0], rel=1e-12)


@pytest.mark.parametrize("how", [dict(), dict(mixed_steps=False), dict(chunked_prefill=False)])
def test_planning_ahead_gives_the_same_run_on_stretches_as_step_by_step(step, how):
    """24 users of 100-1,500 prompt tokens and 30-300 out, planning ahead: the decode stretches (summed at once between
    events) give every request the TTFT and TPOT the step-by-step reference gives."""
    engine = Engine(max_seqs=64, max_tokens=2048, schedule_ahead=1, **how)
    reqs = closed_requests(24, 120, (100, 1500), (30, 300), seed=5)
    fast, slow = simulate(step, reqs, engine), simulate(step, reqs, engine, stepwise=True)
    np.testing.assert_allclose(fast.ttft_s, slow.ttft_s, rtol=1e-9)
    np.testing.assert_allclose(fast.tpot_s, slow.tpot_s, rtol=1e-9)
    assert fast.steps == slow.steps


def test_each_engine_plans_ahead_as_its_source_says():
    """vLLM: async scheduling the default from v0.14.0 (its release notes), synchronous before; SGLang's overlap
    schedule and TensorRT-LLM's overlap scheduler on by default (disable_overlap_schedule / disable_overlap_scheduler
    False)."""
    h100 = get_machine("h100-sxm")
    assert preset("vllm", h100).settings["schedule_ahead"] == 1
    assert preset("vllm@0.14.0", h100).settings["schedule_ahead"] == 1
    assert preset("vllm@0.12.0", h100).settings["schedule_ahead"] == 0
    for key, words in (("sglang", "disable_overlap_schedule"), ("trtllm", "disable_overlap_scheduler")):
        p = preset(key, h100)
        assert p.settings["schedule_ahead"] == 1
        assert words in p.sources["schedule_ahead"]
    assert preset("sglang", h100).engine(schedule_ahead=0).schedule_ahead == 0  # the flag over the default


def test_the_flag_refuses_what_is_not_modelled():
    """--schedule-ahead 2 (more than a step ahead is not modelled): exit 2 naming the value, no traceback."""
    p = subprocess.run([sys.executable, "-m", "roofline", "serving", "--schedule-ahead", "2"], capture_output=True,
                       text=True)
    assert p.returncode == 2
    assert "--schedule-ahead" in p.stderr and "2" in p.stderr and "Traceback" not in p.stderr


def test_planning_ahead_given_against_vllms_version_says_the_time_per_step_stays_the_versions():
    """vLLM's version switches both (v0.14.0: async scheduling, planning ahead, its time per step hidden): given
    --schedule-ahead alone, the time per step stays the version's and the note says so; given both, nothing is said."""
    h100 = get_machine("h100-sxm")
    e = preset("vllm", h100).engine(schedule_ahead=0)
    assert e.schedule_ahead == 0 and e.step_overhead_s == 0.0
    assert "--schedule-ahead 0 given: the time per step stays this version's (0 ms)" in e.since_note
    old = preset("vllm@0.12", h100).engine(schedule_ahead=1)
    assert old.step_overhead_s > 0 and "--schedule-ahead 1 given" in old.since_note
    assert "--schedule-ahead" not in preset("vllm", h100).engine(schedule_ahead=0, step_overhead_s=2e-3).since_note
    assert "--schedule-ahead" not in preset("vllm", h100).engine().since_note


def test_a_sweep_says_its_engine_plans_ahead(capsys):
    from roofline.cli import main

    assert main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--engine", "sglang", "--sweep", "1,4",
                 "--requests", "16"]) == 0
    head = capsys.readouterr().out.splitlines()[1]
    assert "each step planned while the one before it runs" in head
    assert main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--sweep", "1,4", "--requests", "16"]) == 0
    assert "planned while" not in capsys.readouterr().out.splitlines()[1]


def test_vllm_with_pipeline_stages_schedules_synchronously():
    """vLLM v0.14.0's release notes: async scheduling is the default except with pipeline parallelism. With --pp 2 its
    scheduler plans no step ahead and takes the synchronous scheduler's fitted time per step, whatever the version;
    SGLang's and TensorRT-LLM's defaults do not change with it."""
    from roofline.serving.engines import fitted_step_overhead_s

    h100 = get_machine("h100-sxm")
    e = preset("vllm", h100, pipeline_stages=2).engine()
    assert e.schedule_ahead == 0 and e.step_overhead_s == fitted_step_overhead_s("vllm") > 0
    assert "pipeline parallelism" in e.since_note
    assert preset("vllm", h100, pipeline_stages=1).engine().schedule_ahead == 1
    assert preset("sglang", h100, pipeline_stages=2).engine().schedule_ahead == 1


def test_vllm_with_a_draft_model_schedules_synchronously(capsys):
    """The same release notes: async scheduling with speculative decoding by MTP or EAGLE only. A draft model of its
    own (--draft MODEL) plans no step ahead and takes the synchronous time per step; --draft mtp stays async."""
    from roofline.cli import main
    from roofline.serving.engines import fitted_step_overhead_s

    h100 = get_machine("h100-sxm")
    e = preset("vllm", h100, draft_model=True).engine()
    assert e.schedule_ahead == 0 and e.step_overhead_s == fitted_step_overhead_s("vllm") > 0
    assert "draft model" in e.since_note
    assert preset("vllm@0.12", h100, draft_model=True).engine().schedule_ahead == 0  # synchronous before 0.14 anyway
    assert preset("sglang", h100, draft_model=True).engine().schedule_ahead == 1
    args = ["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--engine", "vllm", "--concurrency", "2",
            "--requests", "4", "--input-len", "256", "--output-len", "16"]
    assert main(args + ["--draft", "llama3.2-1b", "--spec-tokens", "3", "--acceptance", "0.7"]) == 0
    out = capsys.readouterr().out
    assert "MTP or EAGLE only" in out or "draft model" in out
    assert main(["serving", "--model", "deepseek-v3", "--machine", "h200", "--tp", "8", "--engine", "vllm", "--dtype",
                 "fp8", "--concurrency", "2", "--requests", "4", "--input-len", "256", "--output-len", "16", "--draft",
                 "mtp", "--spec-tokens", "1", "--acceptance", "0.8"]) == 0
    assert "draft model" not in capsys.readouterr().out
