"""Disaggregated serving in a closed loop (serving/disagg.py): users over a prefill and a decode
pool, the router, which pool's token the client sees first."""

import json

import numpy as np
import pytest

from roofline.cli import main
from roofline.cost import seed_cost_model
from roofline.errors import RooflineError
from roofline.plan.step import StepCost
from roofline.serving import closed_requests, kv_transfer_seconds, simulate_disaggregated
from roofline.serving.engine import Engine

EAGER = seed_cost_model(launch_overhead_s=3e-6)  # no CUDA graph: every op pays 3 us


@pytest.fixture(scope="module")
def step():
    return StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=256)


# Llama 3 8B's KV cache per token: 32 layers x 2 (K, V) x 8 heads x 128 x 2 B = 131,072 B; H100's scale-out
# InfiniBand is 50 GB/s a GPU, at e_m 0.85, plus one collective latency of 46 us
def transfer_s(tokens):
    return 46e-6 + tokens * 131072 / (0.85 * 50e9)


def test_one_user_by_hand(step):
    """One prefill and one decode replica, one user, two requests of 1,024 in and 3 out, tokens
    streamed from the decode pool: TTFT = the prefill step of 1,024 tokens + the transfer + the
    decode pool's first step (a 1-token chunk at prefix 1,024, which gives tokens 1 and 2); then
    one decode step at context 1,024 + 2 = 1,026 gives token 3. TPOT = (end - first token) /
    (3 - 1) = that step / 2, as a benchmark counts it. The user's second request is sent when the
    first ends, so it meets empty pools and takes the same times."""
    r = simulate_disaggregated(step, step, closed_requests(1, 2, 1024, 3), router="round-robin", first_token="decode")
    prefill = step.seconds([], [(1024, 0)])
    first_decode = step.seconds([], [(1, 1024)])
    decode = step.seconds([1026])
    ttft = prefill + transfer_s(1024) + first_decode
    assert r.ttft_s == pytest.approx([ttft, ttft], rel=1e-9)
    assert r.tpot_s == pytest.approx([decode / 2, decode / 2], rel=1e-9)
    assert r.e2e_s == pytest.approx([ttft + decode] * 2, rel=1e-9)
    assert r.arrival_s == pytest.approx([0.0, ttft + decode], rel=1e-9)
    assert r.settings["arrivals"] == "closed loop" and r.settings["concurrency"] == 1
    assert r.gpus == 2
    # the prefill pool's token streamed at once instead: TTFT is the prefill step alone, without the transfer
    p = simulate_disaggregated(step, step, closed_requests(1, 1, 1024, 3), first_token="prefill")
    assert p.ttft_s[0] == pytest.approx(prefill, rel=1e-9)
    assert r.ttft_s[0] - p.ttft_s[0] == pytest.approx(transfer_s(1024) + first_decode, rel=1e-9)


def test_the_closed_loop_keeps_its_users_in_flight(step):
    """8 users, 40 requests of 200 to 2,000 prompt tokens, 2 prefill replicas and 1 decode: the first
    8 requests arrive at 0 and each later one the moment another ends (request 8 + k at the
    (k + 1)-th finish), so until the last request is sent exactly 8 are in the system."""
    reqs = closed_requests(8, 40, (200, 2000), 64, seed=3)
    r = simulate_disaggregated(step, step, reqs, prefill_replicas=2, decode_replicas=1, router="round-robin",
                               first_token="decode")
    finish = r.arrival_s + r.e2e_s
    assert r.arrival_s[:8] == pytest.approx(np.zeros(8))
    assert r.arrival_s[8:] == pytest.approx(np.sort(finish)[:32], rel=1e-9)
    for t in np.linspace(0.0, r.arrival_s.max(), 50, endpoint=False):
        assert int(((r.arrival_s <= t) & (finish > t)).sum()) == 8
    assert r.settings["closed_loop_passes"] >= 2


def test_round_robin_spreads_simultaneous_requests(step):
    """Two users at once on two prefill replicas, round robin: one request each, so both see a lone
    request's prefill (4,096 tokens: no queue); at random both may land on one replica."""
    r = simulate_disaggregated(step, step, closed_requests(2, 2, 4096, 2), prefill_replicas=2, router="round-robin",
                               first_token="prefill")
    assert r.ttft_s == pytest.approx([step.seconds([], [(4096, 0)])] * 2, rel=1e-9)


def test_pools_of_different_layouts_and_refusals(step):
    """A prefill pool of TP 2 and a decode pool of TP 4 send the cache in 2 shards (the smaller
    group's GPUs, one link each), as TP 2 to TP 2 does; an expert-parallel group (data-parallel
    attention: a sequence on one GPU) sends it whole. Unknown routers and first tokens are refused
    by name."""
    tp2 = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=2)
    tp4 = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4)
    ep2 = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=2, expert_parallel=True)
    same, _ = kv_transfer_seconds(tp2, tp2, np.array([1024]))
    mixed, _ = kv_transfer_seconds(tp2, tp4, np.array([1024]))
    whole, _ = kv_transfer_seconds(ep2, tp4, np.array([1024]))
    assert mixed[0] == pytest.approx(same[0]) and (whole[0] - 46e-6) == pytest.approx(2 * (same[0] - 46e-6))
    with pytest.raises(RooflineError) as e:
        simulate_disaggregated(step, step, closed_requests(1, 1, 64, 4), router="least-loaded")
    assert e.value.field == "router"
    with pytest.raises(RooflineError) as e:
        simulate_disaggregated(step, step, closed_requests(1, 1, 64, 4), first_token="both")
    assert e.value.field == "first_token"


def test_cli_disagg_closed_loop(capsys):
    """--disagg with --concurrency: a closed loop over both pools (it was refused: open loop only);
    --router and --first-token without --disagg are refused."""
    assert main(["serving", "--concurrency", "4", "--requests", "16", "--disagg", "1:2", "--router", "round-robin",
                 "--first-token", "decode", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["arrivals"] == "closed loop" and d["concurrency"] == 4 and d["gpus"] == 3
    assert d["router"] == "round-robin" and d["first_token"] == "decode" and d["closed_loop_passes"] >= 1
    assert main(["serving", "--concurrency", "4", "--router", "round-robin"]) == 2
    assert "--disagg" in capsys.readouterr().err


def test_a_tolerance_stops_the_closed_loop_sooner_at_the_same_means(step):
    """The closed loop stopped once no arrival moves by more than 1% of the mean end-to-end latency
    takes no more passes than the exact fixed point, and its mean TTFT and TPOT agree with it to
    2%; a tolerance past 0.5 is refused by name."""
    reqs = closed_requests(32, 128, (500, 3000), 128, seed=5)
    kw = dict(prefill_replicas=1, decode_replicas=2, router="round-robin", first_token="decode")
    exact = simulate_disaggregated(step, step, reqs, **kw)
    loose = simulate_disaggregated(step, step, reqs, tolerance=0.01, **kw)
    assert loose.settings["closed_loop_passes"] <= exact.settings["closed_loop_passes"]
    assert loose.settings["closed_loop_tolerance"] == 0.01 and exact.settings["closed_loop_tolerance"] == 0.0
    assert np.mean(loose.ttft_s) == pytest.approx(np.mean(exact.ttft_s), rel=0.02)
    assert np.mean(loose.tpot_s) == pytest.approx(np.mean(exact.tpot_s), rel=0.02)
    with pytest.raises(RooflineError) as e:
        simulate_disaggregated(step, step, reqs, tolerance=0.9)
    assert e.value.field == "tolerance"
