"""Serving plans (issue 13): the engine step and the simulated scheduler against hand arithmetic.

Truths: Llama 3 8B has 8.03e9 parameters (Meta's model card; the preset's published count), 32
layers, 8 KV heads of 128; the H100 SXM has 989 TFLOP/s dense bf16 and 3.35 TB/s (NVIDIA's
datasheet, data/machines.toml). Seed 003's cost model: e_c 0.70, e_m 0.85."""

import json
import math

import numpy as np
import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.serving import Engine, Requests, closed_requests, poisson_requests, simulate
from roofline.plan.step import StepCost

PARAMS = 8.03e9
PEAK, BW = 989e12, 3.35e12
from serving_common import EAGER  # noqa: E402 (tests/ is on sys.path)


def test_a_decode_step_reads_the_weights_once(step):
    """Batch 1 at context 1: the step reads the 16.06 GB of bf16 weights (2 B x 8.03e9) once at
    0.85 x 3.35 TB/s = 5.64 ms, plus ~290 launches of 3 us (0.9 ms) and a KV read too small to see."""
    floor = 2 * PARAMS / (0.85 * BW)
    t = step.seconds([1])
    assert floor <= t <= floor + 0.0012
    # 64 sequences at 1,024: the weights are still read once; added are the KV reads, 64 x 1,024 x
    # 131,072 B (2 x 32 layers x 8 heads x 128 x 2 B per token) = 8.59 GB, and 64 rows of
    # activations through every op (under 0.8 GB: a few d_model and d_ff wide rows per op and layer)
    kv = 64 * 1024 * 2 * 32 * 8 * 128 * 2 / (0.85 * BW)
    assert t + kv <= step.seconds([1024] * 64) <= t + kv + 0.8e9 / (0.85 * BW)


def test_a_prompt_chunk_is_compute_bound_at_two_flops_per_parameter_per_token(step):
    """1,024 prompt tokens: 2 x 8.03e9 x 1,024 = 1.64e16 FLOPs at 0.70 x 989 TFLOP/s = 23.8 ms
    (the attention and LM head add ~2%)."""
    t = step.seconds([], [(1024, 0)])
    assert t == pytest.approx(2 * PARAMS * 1024 / (0.70 * PEAK), rel=0.04)


def test_one_request_alone_its_ttft_is_its_prefill_and_each_token_one_decode_step(step):
    """Output 3 tokens: the prefill step samples the first, two decode steps (contexts 1,025 and
    1,026 with the fed token) the others."""
    r = simulate(step, closed_requests(1, 1, 1024, 3))
    prefill = step.seconds([], [(1024, 0)])
    assert r.ttft_s[0] == pytest.approx(prefill, rel=1e-12)
    assert r.e2e_s[0] == pytest.approx(prefill + step.seconds([1025]) + step.seconds([1026]), rel=1e-12)
    assert r.tpot_s[0] == pytest.approx((step.seconds([1025]) + step.seconds([1026])) / 2, rel=1e-12)


def test_a_long_prompt_is_fed_in_chunks_of_the_token_budget(step):
    """20,000 tokens with 8,192 per step: chunks 8,192 + 8,192 + 3,616 against prefixes 0, 8,192,
    16,384; only the last samples a token, but each computes its last row's logits (vLLM's gpu_model_runner:
    logits_indices = query_start_loc[1:] - 1, a partial prefill's sample dropped; SGLang's LogitsProcessor
    likewise), so each runs the LM head on one row."""
    r = simulate(step, closed_requests(1, 1, 20000, 1))
    expect = (step.seconds([], [(8192, 0)]) + step.seconds([], [(8192, 8192)]) + step.seconds([], [(3616, 16384)]))
    assert step.seconds([], [(8192, 0)], sampled=0) < step.seconds([], [(8192, 0)])
    assert r.ttft_s[0] == pytest.approx(expect, rel=1e-12) and r.steps == 3


def test_a_full_batch_at_steady_state_delivers_batch_over_step_time(step):
    """8 users, prompts of 1 token, 2,000 tokens each, 8 sequences at most: nearly every step decodes
    all 8 at contexts growing from 1 to 2,000, so output tokens/s = 8 / the mean step time."""
    engine = Engine(max_seqs=8, max_tokens=8192)
    r = simulate(step, closed_requests(8, 8, 1, 2000), engine)
    mean_step = np.mean([step.seconds([c] * 8) for c in range(2, 2001)])
    assert r.output_tokens_per_s == pytest.approx(8 / mean_step, rel=0.01)
    assert r.mean_decode_batch == pytest.approx(8, rel=0.01)


def test_littles_law_holds_on_the_simulated_queue(step):
    """Time-averaged requests in the system x the run's length = the sum of their times in it."""
    r = simulate(step, poisson_requests(20, 400, (128, 2048), (16, 512), seed=3))
    assert r.mean_in_system * r.duration_s == pytest.approx(np.sum(r.e2e_s), rel=1e-9)
    assert np.all(r.ttft_s > 0) and np.all(r.e2e_s >= r.ttft_s)


def test_running_steps_between_events_at_once_changes_nothing(step, monkeypatch):
    """The decode stretches (many steps in one go) give the same run as stepping one at a time."""
    import roofline.serving.scheduler as serving

    reqs = poisson_requests(15, 300, (64, 1500), (8, 400), seed=1)
    fast = simulate(step, reqs)
    monkeypatch.setattr(serving, "STRETCH", 1)
    slow = simulate(step, reqs)
    assert fast.steps == slow.steps and fast.preemptions == slow.preemptions
    for a, b in ((fast.ttft_s, slow.ttft_s), (fast.e2e_s, slow.e2e_s)):
        np.testing.assert_allclose(a, b, rtol=1e-9)
    assert fast.kv_mean == pytest.approx(slow.kv_mean, rel=1e-9) and fast.itl_s == pytest.approx(slow.itl_s, rel=1e-9)


def test_a_sliding_window_model_steps_the_same_at_once_and_one_by_one(monkeypatch):
    """Mistral 7B (every layer a 4,096-token window): contexts cross the window during the run, so
    the stretch's window sums and its non-linear cache table are both exercised."""
    import roofline.serving.scheduler as serving

    s = StepCost("mistral-7b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64)
    reqs = closed_requests(6, 12, (3000, 5000), (200, 2500), seed=2)
    engine = Engine(max_seqs=64)
    fast = simulate(s, reqs, engine)
    monkeypatch.setattr(serving, "STRETCH", 1)
    slow = simulate(s, reqs, engine)
    assert fast.steps == slow.steps
    np.testing.assert_allclose(fast.e2e_s, slow.e2e_s, rtol=1e-9)
    assert fast.kv_mean == pytest.approx(slow.kv_mean, rel=1e-9)


def _small_cache(step, gb):
    """The memory fraction that leaves ``gb`` GB for the KV cache after the weights and activations."""
    from roofline.plan.step import kv_cache_budget

    _, parts = kv_cache_budget(step, 1.0)
    return (parts["weights_bytes"] + parts["activations_bytes"] + gb * 1e9) / parts["capacity_bytes"]


@pytest.mark.parametrize("case", ["poisson", "closed, preempting", "poisson, preempting, small steps",
                                  "whole prompts, preempting", "prefix hits, token slots", "sliding window",
                                  "reserving in full", "batch waiting, reserving in full",
                                  "batch waiting, preempting, chunks"])
def test_the_simulator_gives_the_step_by_step_runs_figures(step, case):
    """Issue 35: the default run (decode stretches, each decoding sequence's state kept relative to a
    step counter, the batch's sums kept between steps) against simulate(..., stepwise=True), which
    advances and sums the per-slot arrays every step: the same steps, preemptions and tokens, and the
    same percentiles and means to 1e-12. A cache of 0.5 GB holds ~3,800 tokens (131,072 B each), so
    8 users of up to 1,500 + 1,500 tokens preempt (or, reserving in full, wait); Mistral 7B's 4,096-token window
    is crossed."""
    engine = Engine()
    if case == "poisson":
        reqs = poisson_requests(15, 300, (64, 1500), (8, 400), seed=1)
    elif case == "closed, preempting":
        reqs, engine = closed_requests(8, 40, (500, 1500), (200, 1500), seed=2), Engine(memory_fraction=_small_cache(step, 0.5))
    elif case == "poisson, preempting, small steps":
        reqs = poisson_requests(30, 200, (100, 3000), (10, 800), seed=4)
        engine = Engine(memory_fraction=_small_cache(step, 0.5), max_tokens=2048)
    elif case == "whole prompts, preempting":
        reqs = closed_requests(16, 60, (100, 2000), (10, 300), seed=3)
        engine = Engine(chunked_prefill=False, mixed_steps=False, memory_fraction=_small_cache(step, 0.5))
    elif case == "prefix hits, token slots":
        reqs, engine = poisson_requests(20, 300, (64, 1500), (8, 400), seed=1), Engine(prefix_hit=0.3, block_size=1)
    elif case == "reserving in full":
        reqs = closed_requests(8, 40, (500, 1500), (200, 1500), seed=2)
        engine = Engine(memory_fraction=_small_cache(step, 0.5), chunked_prefill=False, admission="reserve_full")
    elif case == "batch waiting, reserving in full":  # TensorRT-LLM's way: whole prompts, cache reserved, prompts held
        reqs = poisson_requests(15, 300, (64, 1500), (8, 400), seed=1)
        engine = Engine(chunked_prefill=False, admission="reserve_full", batch_wait_steps=20, batch_wait_ratio=0.5)
    elif case == "batch waiting, preempting, chunks":  # held prompts' fit read from a cache that grows
        reqs = poisson_requests(30, 200, (100, 3000), (10, 800), seed=4)
        engine = Engine(memory_fraction=_small_cache(step, 0.5), max_tokens=2048, batch_wait_steps=7,
                        batch_wait_ratio=0.9)
    else:
        step = StepCost("mistral-7b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64)
        reqs, engine = closed_requests(6, 12, (3000, 5000), (200, 2500), seed=2), Engine(max_seqs=64)
    fast, plain = simulate(step, reqs, engine), simulate(step, reqs, engine, stepwise=True)
    if "preempting" in case:
        assert plain.preemptions > 0
    if case == "reserving in full":
        assert plain.preemptions == 0 and plain.kv_peak < 1.0
    if "batch waiting" in case:
        assert plain.held_steps > 0 and fast.held_steps == plain.held_steps
    a, b = fast.metrics(), plain.metrics()
    for key in ("steps", "preemptions", "computed_prompt_tokens", "requests"):
        assert a[key] == b[key], key
    assert fast.output_tokens == plain.output_tokens and fast.input_tokens == plain.input_tokens
    for key, value in b.items():
        assert a[key] == pytest.approx(value, rel=1e-12, nan_ok=True), key
    np.testing.assert_allclose(fast.e2e_s, plain.e2e_s, rtol=1e-12)
    np.testing.assert_allclose(fast.step_durations_s, plain.step_durations_s, rtol=1e-12)  # every step, in order
    for a, b in ((fast.step_decodes, plain.step_decodes), (fast.step_chunk_tokens, plain.step_chunk_tokens),
                 (fast.step_chunk_prefix, plain.step_chunk_prefix), (fast.step_chunk_count, plain.step_chunk_count)):
        np.testing.assert_array_equal(a, b)


def test_weighted_percentiles_are_those_of_the_values_repeated_by_their_weights():
    """Each value counted its weight times, sorted: the p-th percentile is the element at index
    ceil(p% of the total weight) - 1 (the least value whose weight at or below it reaches p%), ties
    and zero weights included, whatever the spread of the values (over 4,096 of them, binned by value
    without a full sort; a few far outliers put most in one bin, binned again)."""
    from roofline.serving.results import weighted_percentiles

    rng = np.random.default_rng(0)
    for trial in range(100):
        n = int(rng.integers(1, 30000))
        v = np.round(rng.gamma(2.0, 1.0, n) * rng.choice([1.0, 1e-3]), int(rng.integers(1, 6)))
        if trial % 3 == 0:
            v[:10] = 1e3
        if trial % 7 == 0:
            v[:] = 0.5
        w = rng.integers(0, 5, n).astype(float)
        if not w.sum():
            continue
        every = np.sort(np.repeat(v, w.astype(int)))
        for ps in ((0, 50, 100), (50, 90, 99)):  # with p = 0 the values of weight 0 are left out first
            got = weighted_percentiles(v, w, ps)
            for p in ps:
                assert got[p] == every[min(max(math.ceil(p / 100 * w.sum()) - 1, 0), len(every) - 1)], (trial, p)
        assert got["mean"] == pytest.approx(every.mean(), rel=1e-12)


def test_a_full_cache_preempts_and_recomputes(step):
    """A cache of ~0.5 GB (memory fraction just above weights + activations) holds ~4,000 tokens
    (131,072 B each); 8 users of 1,000 + 1,000 tokens cannot all keep theirs: sequences are
    preempted, recompute their prompt and what they had generated, and every request still ends."""
    from roofline.plan.step import kv_cache_budget

    _, parts = kv_cache_budget(step, 1.0)
    frac = (parts["weights_bytes"] + parts["activations_bytes"] + 0.5e9) / parts["capacity_bytes"]
    r = simulate(step, closed_requests(8, 16, 1000, 1000), Engine(memory_fraction=frac))
    assert r.preemptions > 0 and r.computed_tokens > r.input_tokens
    assert np.all(np.isfinite(r.e2e_s)) and r.kv_peak <= 1.0 + 1e-12


def test_prefix_hits_skip_that_share_of_each_prompt(step):
    """A hit rate of 0.5 on 1,001-token prompts: 500 tokens found, 501 computed per request."""
    r = simulate(step, closed_requests(4, 12, 1001, 4), Engine(prefix_hit=0.5))
    assert r.computed_tokens == 12 * 501


def test_bad_engines_and_workloads_are_refused_by_name(step):
    with pytest.raises(RooflineError, match="max_seqs"):
        Engine(max_seqs=1024, max_tokens=512)
    with pytest.raises(RooflineError, match="input_len"):
        closed_requests(1, 1, 0, 4)
    with pytest.raises(RooflineError, match="KV cache"):
        simulate(step, closed_requests(1, 1, 2_000_000, 1), Engine(max_tokens=8192))
    with pytest.raises(RooflineError, match="tensor-parallel GPUs") as exc:
        simulate(StepCost("mixtral-8x7b", "h100-sxm"), closed_requests(1, 1, 16, 1))
    assert exc.value.field == "tensor_parallel"
    with pytest.raises(RooflineError, match="either"):
        Requests(np.array([1]), np.array([1]))


def test_bursty_arrivals_keep_the_rate_and_spread_the_gaps():
    """Gamma gaps of shape b and scale 1 / (rate b) (vLLM's benchmark_serving --burstiness): mean
    1 / rate whatever b, coefficient of variation 1 / sqrt(b): 2 at b = 0.25, 1 (Poisson) at 1,
    0.5 at 4. Burstiness 1 is the Poisson process itself: the same seed draws the same arrivals
    as exponential gaps of mean 1 / rate, scaled (as vLLM scales them) so that the sample offers
    exactly the rate: 500 requests at 10/s, the last at 499 / 10 = 49.9 s, whatever the seed."""
    n, rate = 200_000, 50.0
    for b, cv in ((0.25, 2.0), (1.0, 1.0), (4.0, 0.5)):
        gaps = np.diff(poisson_requests(rate, n, 16, 4, seed=7, burstiness=b).arrival_s)
        assert gaps.mean() == pytest.approx(1 / rate, rel=1e-9)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.03)
    same = np.cumsum(np.random.default_rng(7).exponential(1 / rate, size=1000))
    same -= same[0]
    assert np.allclose(poisson_requests(rate, 1000, 16, 4, seed=7).arrival_s, same * (999 / rate) / same[-1])
    for seed in (0, 1, 2):
        for b in (0.25, 1.0):
            a = poisson_requests(10, 500, 16, 4, seed=seed, burstiness=b).arrival_s
            assert a[0] == 0 and a[-1] == pytest.approx(49.9)
    assert "burstiness 0.25" in poisson_requests(rate, 10, 16, 4, burstiness=0.25).label
    with pytest.raises(RooflineError, match="burstiness"):
        poisson_requests(rate, 10, 16, 4, burstiness=0.0)


def test_bursts_lengthen_the_queue_at_the_same_rate(step):
    """At the same average rate, below saturation, gaps of burstiness 0.2 (CV 2.2) queue requests
    behind each other more often than Poisson ones: the TTFT tail is longer; the same requests are served."""
    poisson = simulate(step, poisson_requests(20, 600, 1024, 64, seed=2))
    bursty = simulate(step, poisson_requests(20, 600, 1024, 64, seed=2, burstiness=0.2))
    assert bursty.percentile("ttft", 99) > 1.5 * poisson.percentile("ttft", 99)
    assert bursty.requests == poisson.requests == 600


def test_the_published_benchmarks_file_is_well_formed():
    """data/serving_benchmarks.toml: every row cites a defined source, names a metric the
    validation knows and a positive value; at least 20 rows from at least 2 engines (issue 13)."""
    import tomllib
    from pathlib import Path

    doc = tomllib.loads((Path(__file__).resolve().parents[1] / "data" / "serving_benchmarks.toml").read_text())
    metrics = {"output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_s", "tpot_s", "itl_s", "e2e_s", "requests_per_s"}
    rows = doc["row"]
    assert len(rows) >= 20
    for r in rows:
        assert r["source"] in doc["sources"] and r["metric"] in metrics and r["value"] > 0, r
        assert int(r["gpus"]) >= 1 and int(r["input_len"]) >= 1 and int(r["output_len"]) >= 1
    engines = {doc["sources"][r["source"]]["engine"].split()[0] for r in rows}
    assert len(engines) >= 2, engines


@pytest.mark.parametrize("model, name", [
    ("mamba2-2.7b", "SSM state"),            # 64 Mamba-2 layers, no attention: a fixed state per sequence
    ("nemotron-h-8b", "KV cache + SSM state"),  # 24 Mamba-2 layers beside 4 attention layers
    ("llama3-8b", "KV cache"),
])
def test_a_state_space_model_serves_from_a_state_not_a_kv_cache(model, name, capsys):
    """A reviewer read "KV cache 7% full, in blocks of 16 tokens" for Mamba-2, which keeps no keys
    or values: the cache is named for what it holds, and a pure state-space model's is not blocks."""
    assert main(["serving", "--model", model, "--concurrency", "4", "--requests", "8", "--output-len", "16"]) == 0
    out = capsys.readouterr().out
    engine = next(line for line in out.splitlines() if line.startswith("engine:"))
    assert f"tokens per step, {name} " in engine
    assert ("in blocks of 16 tokens" in engine) == (name != "SSM state")
    assert main(["serving", "--model", model, "--concurrency", "4", "--requests", "8", "--output-len", "16",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cache"] == name


def test_a_long_run_says_how_far_it_has_got_and_the_cap_is_a_million(step, capsys):
    """A reviewer waited ~28 minutes in silence on 10,000,000 requests: the cap is now a million
    (about a minute and a half here), and a run reports each tenth of its requests finished."""
    seen = []
    # one request a second, each done in well under a second: they finish one by one, so a report
    # at each tenth, 5, 10, ... 45 of 50 (the 50th ends the run)
    simulate(step, poisson_requests(1.0, 50, 128, 8), progress=lambda done, of: seen.append((done, of)))
    assert seen == [(d, 50) for d in range(5, 50, 5)]
    seen.clear()  # eight users finish together: one report per tenth passed, never two for one
    simulate(step, closed_requests(8, 50, 128, 8), progress=lambda done, of: seen.append(done))
    assert seen == [8, 16, 24, 32, 40, 48]
    assert main(["serving", "--requests", "1000001"]) == 2
    assert "argument --requests: must be at most 1,000,000, got 1,000,001" in capsys.readouterr().err
    with pytest.raises(RooflineError, match="at most 1,000,000"):
        closed_requests(4, 1_000_001, 128, 8)


def test_the_engines_own_time_per_step_adds_to_every_step(step, capsys):
    """--step-overhead o: a lone request of 64 output tokens takes 1 prefill step and 63 decode
    steps, so its end-to-end latency grows by 64 o and its TTFT by o (hand arithmetic); the
    breakdown lists it as a row; the default is 0 and the notes say the engine's time is not counted."""
    one = closed_requests(1, 1, 512, 64)
    base = simulate(step, one)
    more = simulate(step, one, Engine(step_overhead_s=2e-3))
    assert more.e2e_s[0] - base.e2e_s[0] == pytest.approx(64 * 2e-3, rel=1e-9)
    assert more.ttft_s[0] - base.ttft_s[0] == pytest.approx(2e-3, rel=1e-9)
    assert any("the engine's own time between steps" in n and "not counted" in n for n in base.notes)
    assert any(n.startswith("each step adds 2 ms of the engine's own time") for n in more.notes)
    assert main(["serving", "--concurrency", "1", "--requests", "2", "--step-overhead", "2ms", "--breakdown", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    row = next(o for o in d["breakdown"]["decode_step"]["ops"] if o["part"] == "engine")
    assert row["name"] == "engine time per step"
    assert row["time_s"] == 2e-3
    assert main(["serving", "--step-overhead", "2s", "--rate", "5"]) == 2
    assert "--step-overhead: must be at most 1 s, got 2 s" in capsys.readouterr().err


def test_the_servers_time_per_request_delays_each_request_into_the_queue(step):
    """Engine.request_overhead_s o: a request joins the queue o after it was sent. One user, 3 requests
    of 512 + 8 tokens: each runs alone, so each TTFT is its prefill plus o and each end-to-end latency
    grows by o (the steps are the same); the next request is sent as the last finishes, so the run,
    timed from when the first joins the queue, lasts 3 e2e + 2 o (hand arithmetic); the notes say it. Open loop, arrivals 1 s apart (each alone):
    the same o on every TTFT."""
    o = 0.05
    base = simulate(step, closed_requests(1, 3, 512, 8))
    more = simulate(step, closed_requests(1, 3, 512, 8), Engine(request_overhead_s=o))
    assert more.ttft_s == pytest.approx(base.ttft_s + o, rel=1e-12)
    assert more.e2e_s == pytest.approx(base.e2e_s + o, rel=1e-12)
    assert more.tpot_s == pytest.approx(base.tpot_s, rel=1e-12)
    assert more.duration_s == pytest.approx(base.duration_s + 2 * o, rel=1e-9)
    assert more.arrival_s[1] == pytest.approx(more.e2e_s[0], rel=1e-12)  # sent as the first one finished
    assert any("of the server's own time before the scheduler sees it" in n for n in more.notes)
    assert not any("server's own time" in n for n in base.notes)
    spaced = Requests(np.full(3, 512), np.full(3, 8), np.array([0.0, 1.0, 2.0]))
    a, b = simulate(step, spaced), simulate(step, spaced, Engine(request_overhead_s=o))
    assert b.ttft_s == pytest.approx(a.ttft_s + o, rel=1e-9)
    with pytest.raises(RooflineError, match="request_overhead_s"):
        Engine(request_overhead_s=-1e-3)
    # disaggregated, one request: the time is spent once, before the prefill pool (not again at the decode pool's
    # handoff), so TTFT and end-to-end latency each grow by o
    from roofline.serving import simulate_disaggregated

    lone = Requests(np.array([512]), np.array([8]), np.array([0.0]))
    d0 = simulate_disaggregated(step, step, lone)
    d1 = simulate_disaggregated(step, step, lone, Engine(request_overhead_s=o), Engine(request_overhead_s=o))
    assert d1.ttft_s == pytest.approx(d0.ttft_s + o, rel=1e-9) and d1.e2e_s == pytest.approx(d0.e2e_s + o, rel=1e-9)


def test_without_chunked_prefill_every_step_feeds_whole_prompts():
    """TensorRT-LLM's default (enable_chunked_prefill False): a prompt is fed whole in one step, so
    with 1,500-token prompts every step's prompt tokens are a multiple of 1,500 and a step of a
    2,048-token budget feeds at most one; with chunking some step feeds a part of one."""
    from roofline.plan.step import StepCost
    from roofline.serving import Engine, closed_requests, simulate

    step = StepCost("llama3-8b", "h100-sxm", max_tokens=2048, max_seqs=64)
    reqs = closed_requests(8, 24, 1500, 50)
    whole = simulate(step, reqs, Engine(64, 2048, chunked_prefill=False))
    fed = whole.step_chunk_tokens[whole.step_chunk_tokens > 0]
    assert len(fed) and all(t == 1500 for t in fed)
    chunked = simulate(step, reqs, Engine(64, 2048))
    fed = chunked.step_chunk_tokens[chunked.step_chunk_tokens > 0]
    assert any(t % 1500 for t in fed)
    assert whole.output_tokens == chunked.output_tokens == 24 * 50


def test_a_prompt_past_the_budget_without_chunked_prefill_is_refused_by_name():
    from roofline.plan.step import StepCost
    from roofline.serving import Engine, closed_requests, simulate

    step = StepCost("llama3-8b", "h100-sxm", max_tokens=2048, max_seqs=64)
    with pytest.raises(RooflineError, match="without chunked prefill.*3,000 tokens.*2,048"):
        simulate(step, closed_requests(2, 4, 3000, 10), Engine(64, 2048, chunked_prefill=False))


def test_prefill_first_steps_never_mix_decodes_and_prompts():
    """SGLang's default (no --enable-mixed-chunk): a step of prompts runs alone, the decodes wait;
    vLLM's mixed steps carry both. Both runs make the same tokens; the waits make the prefill-first
    run's decodes slower per token here, where prompts keep arriving."""
    from roofline.plan.step import StepCost
    from roofline.serving import Engine, closed_requests, simulate

    step = StepCost("llama3-8b", "h100-sxm", max_tokens=2048, max_seqs=64)
    reqs = closed_requests(16, 64, [200, 1800], [20, 200])
    first = simulate(step, reqs, Engine(64, 2048, mixed_steps=False))
    both = (first.step_decodes > 0) & (first.step_chunk_tokens > 0)
    assert first.steps and not both.any() and (first.step_chunk_tokens > 0).any()
    mixed = simulate(step, reqs, Engine(64, 2048))
    assert ((mixed.step_decodes > 0) & (mixed.step_chunk_tokens > 0)).any()
    assert first.output_tokens == mixed.output_tokens


@pytest.mark.parametrize("engine, machine, seqs, tokens", [
    # vLLM's get_batch_defaults: >= 70 GiB and not an A100 -> 1024 sequences, 8192 tokens (the H100's driver
    # reports 85.5e9 B = 79.6 GiB); an A100 80GB keeps 256 and 2048 (PR #17885), and so does the 48 GB L40S
    ("vllm", "h100-sxm", 1024, 8192), ("vllm", "a100-80gb", 256, 2048), ("vllm", "l40s", 256, 2048),
    # SGLang's chunked_prefill_size: 8192 under 160 GiB (H200: 150.8e9 B = 140 GiB), 16384 from it (B200)
    ("sglang", "h200", 4096, 8192), ("sglang", "b200", 4096, 16384),
    ("trtllm", "h100-sxm", 2048, 8192),
])
def test_an_engine_runs_with_its_documented_defaults_on_each_gpu(engine, machine, seqs, tokens):
    from roofline.machines import get_machine
    from roofline.serving.engines import preset

    p = preset(engine, get_machine(machine))
    e = p.engine()
    assert (e.max_seqs, e.max_tokens) == (seqs, tokens)
    assert e.chunked_prefill == (engine != "trtllm") and e.mixed_steps == (engine != "sglang")
    # TensorRT-LLM's free_gpu_memory_fraction is of what the loaded model leaves; the others' of the whole GPU
    assert e.memory_of_free == (engine == "trtllm")
    assert set(p.sources) == {"max_seqs", "max_tokens", "block_size", "memory_fraction", "memory_of_free",
                              "step_overhead_s", "eager_op_s", "graph_tokens", "schedule_ahead", "chunked_prefill",
                              "mixed_steps", "admission"} and all(p.sources.values())
    # each plans a step while the one before runs at its default version (vLLM's async scheduling from v0.14.0,
    # SGLang's and TensorRT-LLM's overlap schedulers: on by default)
    assert e.schedule_ahead == 1
    # vLLM V1 replays a mixed step of up to max_cudagraph_capture_size = min(2 x max_num_seqs, 512) tokens as piecewise
    # CUDA graphs (its FULL_AND_PIECEWISE default); SGLang to v0.5.9 and TensorRT-LLM graph decode batches only
    assert e.graph_tokens == (512 if engine == "vllm" else 0)
    # TensorRT-LLM's capacity_scheduler_policy GUARANTEED_NO_EVICT reserves a request's whole cache at admission
    assert e.admission == ("reserve_full" if engine == "trtllm" else "on_demand")
    assert e.label.startswith("engine: ") and e.preset == engine


def test_tensorrt_llms_cache_is_its_share_of_what_the_model_leaves():
    """TensorRT-LLM's kv_cache_config.free_gpu_memory_fraction 0.9 is of the memory free once the model is
    loaded: Llama 3 70B over 2 H100s, each holding 70,553,706,496 x 2 / 2 = 70.55 GB of weights, and a step's
    activations (8,192 rows of the widest op, max(2 x 28,672 / 2, 4 x 8,192) = 32,768, plus 4 x 8,192, at 2 bytes,
    and 2,048 x 128,256 / 2 fp32 logits) of the 85.52 GB the driver reports: the cache is 0.9 of what is left,
    where vLLM's 0.9 is of the whole 85.52 GB."""
    from roofline.plan.kv_budget import kv_cache_budget

    step = StepCost("llama3-70b", "h100-sxm", tensor_parallel=2, max_tokens=8192, max_seqs=2048)
    whole, parts = kv_cache_budget(step, 0.9)
    free, _ = kv_cache_budget(step, 0.9, of_free=True)
    left = 81_559 * 2**20 - parts["weights_bytes"] - parts["activations_bytes"]
    assert whole == pytest.approx(0.9 * 81_559 * 2**20 - parts["weights_bytes"] - parts["activations_bytes"], rel=1e-12)
    assert free == pytest.approx(0.9 * left, rel=1e-12)
    assert parts["activations_bytes"] == 8192 * (32_768 + 4 * 8192) * 2 + 2048 * 64_128 * 4 == 1_599_078_400
