"""SGLang's scheduler receive interval in the serving simulator (issue 35): Engine.recv_interval R, its
--scheduler-recv-interval. Its rule (sgl-project/sglang python/sglang/srt/managers/scheduler_recv_skipper.py,
SchedulerRecvSkipper.handle): before each step the scheduler adds the last step's weight to a count (a decode step 1,
a step that fed prompts 1,000 by default, past any interval used here) and polls for new requests only once the count
reaches R, then starts again from 0. InferenceX's DeepSeek-R1 and Qwen3.5 SGLang scripts on B200/B300 pass 10 (30
from 16 users).

Every expected time below is summed from step.seconds of the steps the rule says run, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.cli import main
from roofline.serving import Engine, Requests, closed_requests, simulate

PROMPT, LONG_OUT = 1024, 1000


def _two_users(step, arrive_after: int):
    """A (1,024 in, 1,000 out) at 0; B (1,024 in, 8 out) arrives halfway through A's decode step ``arrive_after``."""
    prefill = step.seconds([], [(PROMPT, 0)])
    ends = prefill + np.cumsum([step.seconds([PROMPT + k]) for k in range(1, arrive_after + 1)])
    t_b = float(ends[-1] - step.seconds([PROMPT + arrive_after]) / 2)
    return Requests([PROMPT, PROMPT], [LONG_OUT, 8], np.array([0.0, t_b]), None, label="two users"), t_b


def _ttft_b(step, t_b: float, k_mixed: int) -> float:
    """B's TTFT when its prompt runs in A's decode step k_mixed (one mixed step of A's decode and B's prompt)."""
    t = step.seconds([], [(PROMPT, 0)])
    for k in range(1, k_mixed):
        t += step.seconds([PROMPT + k])
    return t + step.seconds([PROMPT + k_mixed], [(PROMPT, 0)]) - t_b


@pytest.mark.parametrize("interval, runs_in", [(1, 11), (4, 13), (10, 11), (30, 31)])
def test_a_new_request_waits_for_the_schedulers_next_poll(step, interval, runs_in):
    """A's prompt step counts past any interval, so the scheduler polls before A's decode step 1, then before steps
    1 + R, 1 + 2R, ...; B arrives during step 10: R = 1 sees it before step 11; R = 4 polls before 9 and 13 (B in 13);
    R = 10 before 11; R = 30 before 31."""
    reqs, t_b = _two_users(step, 10)
    res = simulate(step, reqs, Engine(max_tokens=8192, recv_interval=interval))
    assert res.ttft_s[1] == pytest.approx(_ttft_b(step, t_b, runs_in), rel=1e-9)
    assert res.ttft_s[0] == simulate(step, reqs, Engine(max_tokens=8192)).ttft_s[0]  # an idle scheduler polls at once


@pytest.mark.parametrize("users, interval", [(6, 10), (32, 30)])
def test_the_stretched_run_is_the_step_by_step_one(step, users, interval):
    """Decode steps run at once up to the scheduler's next poll while a request waits for it (advance.stretch): 32
    users' closed loop has a request waiting most steps."""
    reqs = closed_requests(users, 6 * users, (819, 1024), (100, 300), seed=3)
    engine = Engine(max_tokens=8192, recv_interval=interval)
    fast, plain = simulate(step, reqs, engine), simulate(step, reqs, engine, stepwise=True)
    np.testing.assert_allclose(fast.ttft_s, plain.ttft_s, rtol=1e-9)
    np.testing.assert_allclose(fast.e2e_s, plain.e2e_s, rtol=1e-9)
    assert fast.steps == plain.steps


@pytest.mark.parametrize("bad", ["0", "-1", "2.5", "nan", "1e9"])
def test_a_bad_interval_is_refused_by_name(bad, capsys):
    code = main(["serving", "--model", "llama3.1-8b", "--machine", "h100-sxm", "--concurrency", "2", "--recv-interval", bad])
    assert code == 2
    assert "recv-interval" in capsys.readouterr().err


@pytest.mark.parametrize("engine, said", [("trtllm", True), ("vllm", True), ("sglang", False)])
def test_an_interval_given_to_another_engine_is_said(engine, said, capsys):
    code = main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--requests", "8",
                 "--engine", engine, "--recv-interval", "10"])
    assert code == 0
    assert ("the receive interval is SGLang's" in capsys.readouterr().out) == said
