"""Serving plans (issue 13): the engine step and the simulated scheduler against hand arithmetic.

Truths: Llama 3 8B has 8.03e9 parameters (Meta's model card; the preset's published count), 32
layers, 8 KV heads of 128; the H100 SXM has 989 TFLOP/s dense bf16 and 3.35 TB/s (NVIDIA's
datasheet, data/machines.toml). Seed 003's cost model: e_c 0.70, e_m 0.85."""

import dataclasses
import json
import math

import numpy as np
import pytest

from roofline.cli import main
from roofline.cost import seed_cost_model
from roofline.errors import RooflineError
from roofline.serving import (Engine, Requests, closed_requests, max_rate_within, meets_slo, poisson_requests, simulate,
                              sweep_concurrency)
from roofline.plan.step import StepCost

PARAMS = 8.03e9
PEAK, BW = 989e12, 3.35e12
EAGER = seed_cost_model(launch_overhead_s=3e-6)  # no CUDA graph: every op pays 3 us


@pytest.fixture(scope="module")
def step():
    return StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=256)


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
    16,384; only the last samples a token (the first two run no LM head)."""
    r = simulate(step, closed_requests(1, 1, 20000, 1))
    expect = (step.seconds([], [(8192, 0)], sampled=0) + step.seconds([], [(8192, 8192)], sampled=0)
              + step.seconds([], [(3616, 16384)]))
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
                                  "whole prompts, preempting", "prefix hits, token slots", "sliding window"])
def test_the_simulator_gives_the_step_by_step_runs_figures(step, case):
    """Issue 35: the default run (decode stretches, each decoding sequence's state kept relative to a
    step counter, the batch's sums kept between steps) against simulate(..., stepwise=True), which
    advances and sums the per-slot arrays every step: the same steps, preemptions and tokens, and the
    same percentiles and means to 1e-12. A cache of 0.5 GB holds ~3,800 tokens (131,072 B each), so
    8 users of up to 1,500 + 1,500 tokens preempt; Mistral 7B's 4,096-token window is crossed."""
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
    else:
        step = StepCost("mistral-7b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64)
        reqs, engine = closed_requests(6, 12, (3000, 5000), (200, 2500), seed=2), Engine(max_seqs=64)
    fast, plain = simulate(step, reqs, engine), simulate(step, reqs, engine, stepwise=True)
    if "preempting" in case:
        assert plain.preemptions > 0
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
    from roofline.serving.results import _weighted_percentiles

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
            got = _weighted_percentiles(v, w, ps)
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


def test_the_slo_search_returns_a_rate_that_meets_the_targets(step):
    sw = max_rate_within(step, 512, 128, ttft_s=0.5, tpot_s=0.02, requests=150)
    best = sw.slo["best"]
    assert best is not None and meets_slo(sw.results[sw.values.index(best)], sw.slo)
    assert any(v > best and not meets_slo(r, sw.slo) for v, r in zip(sw.values, sw.results))


def test_impossible_targets_say_so(step):
    sw = max_rate_within(step, 1024, 64, ttft_s=1e-3, requests=50)  # a 1,024-token prefill alone takes ~24 ms
    assert sw.slo["best"] is None and "no rate tried meets" in sw.to_table()


def test_sweep_rows_and_cost_per_million_tokens(step):
    """$2 per GPU-hour at X output tokens/s: 2 / 3600 / X x 1e6 dollars per million."""
    sw = sweep_concurrency(step, [1, 16], 256, 64, requests=40, price_per_gpu_hour=2.0)
    for row, r in zip(sw.rows(), sw.results):
        assert row["cost_per_million_output_tokens"] == pytest.approx(2.0 / 3600 / r.output_tokens_per_s * 1e6)
    assert sw.rows()[1]["output_tokens_per_s_per_gpu"] > sw.rows()[0]["output_tokens_per_s_per_gpu"]


def test_tensor_parallel_splits_the_weights_and_adds_all_reduces():
    """TP 2 over NVLink: each GPU reads half the weights and KV per step and adds two all-reduces
    per layer; the launches (~290 x 3 us = 0.9 ms of the 6.6 ms) are not split, and the 64
    all-reduces each pay a launch and 6 us of latency (0.6 ms): between half and 0.7 of one GPU's."""
    one = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER)
    two = StepCost("llama3-8b", "h100-sxm", tensor_parallel=2, cost_model=EAGER)
    names = [o.name for o in two.ops([1024] * 8)]
    assert any("all-reduce" in n for n in names)
    assert 0.5 * one.seconds([1024] * 8) < two.seconds([1024] * 8) < 0.7 * one.seconds([1024] * 8)


def test_mla_and_moe_models_reduce_to_closed_form():
    """DeepSeek-V3 (MLA decode absorbed, MoE) on 8 H200s: the decode ops are linear in the
    sequences and their contexts (checked at a point the fit did not use), so it builds; a mixed
    step costs more than its decode part alone."""
    s = StepCost("deepseek-v3", "h200", tensor_parallel=8, max_tokens=4096, max_seqs=64)
    assert s.seconds([2048] * 16, [(1024, 0)]) > s.seconds([2048] * 16) > 0


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


# -- the command ----------------------------------------------------------------------------------

def test_cli_serving_table_json_csv(capsys):
    assert main(["serving", "--concurrency", "4", "--requests", "12", "--input-len", "256", "--output-len", "32"]) == 0
    out = capsys.readouterr().out
    assert "time to first token" in out and "output tokens/s" in out
    assert main(["serving", "--rate", "2", "--requests", "10", "--json", "--breakdown"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["requests"] == 10 and d["breakdown"]["decode_step"]["ops"] and d["ttft_p50_s"] > 0
    assert main(["serving", "--concurrency", "2", "--requests", "6", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "request,arrival_s,input_tokens,output_tokens,ttft_s,tpot_s,e2e_s"
    assert lines[1].split(",")[:4] == ["0", "0.0", "1024", "256"]
    assert main(["serving", "--concurrency", "2", "--requests", "4", "--output-len", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tpot_p50_s"] is None  # one-token answers have no TPOT


def test_cli_sweep_draws_the_curve(tmp_path, capsys):
    png = tmp_path / "curve.png"
    assert main(["serving", "--sweep", "1,8", "--requests", "16", "--input-len", "128", "--output-len", "16",
                 "--slo-tpot", "50ms", "-o", str(png)]) == 0
    assert png.stat().st_size > 10_000 and "highest concurrency meeting" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["--rate", "0"], "--rate"),
    (["--input-len", "0"], "--input-len"),
    (["--input-len", "10-5"], "--input-len"),
    (["--rate", "5", "--concurrency", "4"], "--concurrency"),
    (["--rate", "5", "--slo-ttft", "1s"], "--rate"),
    (["-o", "x.png"], "-o"),
    (["--max-seqs", "1024", "--max-tokens", "512"], "--max-tokens"),
    (["--model", "mixtral-8x7b"], "--tp"),
    (["--tp-link", "nvlink"], "--tp-link"),
    (["--slo-ttft", "-1s"], "--slo-ttft"),
    (["--rate", "5", "--burstiness", "0.001"], "burstiness"),
    (["--rate", "5", "--burstiness", "nan"], "--burstiness"),
    (["--concurrency", "4", "--burstiness", "0.5"], "--burstiness"),
    (["--sweep", "1,2", "--burstiness", "0.5"], "--burstiness"),
])
def test_cli_serving_bad_input_is_one_line(argv, words, capsys):
    assert main(["serving", "--requests", "4", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


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


def test_a_result_and_a_rate_search_say_how_requests_arrived(step):
    """The JSON of a run and of an SLO rate search carry the arrivals (Poisson, gamma of a
    burstiness, closed loop), and the search's table says them: the same 27 req/s reads
    differently under bursts."""
    r = simulate(step, poisson_requests(5, 20, 256, 8, burstiness=0.5))
    assert r.to_dict()["arrivals"] == "gamma" and r.to_dict()["burstiness"] == 0.5 and r.to_dict()["rate_per_s"] == 5
    assert simulate(step, closed_requests(2, 6, 128, 4)).to_dict()["arrivals"] == "closed loop"
    sw = max_rate_within(step, 256, 16, None, 0.05, 90.0, Engine(max_tokens=8192), 60, burstiness=0.5)
    assert sw.to_dict()["arrivals"] == "gamma" and sw.to_dict()["burstiness"] == 0.5
    assert "gamma gaps of burstiness 0.5" in sw.to_table()


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


def test_a_target_rate_gives_the_replicas_and_gpus_needed(step, capsys):
    """The best rate one replica sustains within the SLO is r; a target T needs ceil(T / r)
    replicas of tensor-parallel t GPUs each."""
    sw = max_rate_within(step, 512, 128, ttft_s=0.5, tpot_s=0.02, requests=150, target_rate=100.0)
    best = sw.slo["best"]
    assert sw.replicas_needed == math.ceil(100.0 / best) and sw.to_dict()["target"]["gpus"] == sw.replicas_needed
    assert main(["serving", "--slo-tpot", "30ms", "--target-rate", "50", "--requests", "60", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["target"]
    assert t["requests_per_s"] == 50 and t["replicas"] >= 1 and t["gpus"] == t["replicas"]


# -- speculative decoding -------------------------------------------------------------------------

def test_expected_tokens_per_verify_step():
    """k = 4 drafts each accepted with 0.8: 1 + 0.8 + 0.64 + 0.512 + 0.4096 = 3.3616
    = (1 - 0.8^5) / (1 - 0.8) (Leviathan et al. 2023)."""
    assert Engine(spec_tokens=4, acceptance=0.8, max_seqs=64).tokens_per_verify == pytest.approx(3.3616)
    assert Engine().tokens_per_verify == 1.0
    with pytest.raises(RooflineError, match="acceptance"):
        Engine(acceptance=0.5)


def test_a_verify_step_costs_what_chunks_of_k_plus_1_tokens_cost():
    """Verifying 5 tokens per sequence against S attended positions is, op by op, a chunk of 5
    prompt tokens against S - 5 cached for each sequence, with 5 rows of logits each."""
    one = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER)
    five = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, verify_tokens=5)
    assert five.seconds([1004] * 32) == pytest.approx(one.seconds([], [(5, 999)] * 32, sampled=160), rel=1e-12)


def test_speculation_emits_the_expected_tokens_per_step():
    """One request, 1,024 in, 337 out, 4 drafts at 0.8: the prefill emits the first token, then
    each step 3.3616 on average carried as a fraction: floor(100 x 3.3616) = 336, so exactly 100
    decode steps, each the target's verify step plus 4 draft decode steps."""
    engine = Engine(max_seqs=16, spec_tokens=4, acceptance=0.8)
    target = StepCost("llama3-70b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=16, verify_tokens=5)
    draft = StepCost("llama3.2-1b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=16)
    r = simulate(target, closed_requests(1, 1, 1024, 337), engine, draft=draft)
    assert r.steps == 101
    lo = target.seconds([1024 + 5]) + float(draft.decode_steps_seconds(np.array([1024]), 4).sum())
    assert 100 * lo <= r.e2e_s[0] - r.ttft_s[0] <= 100 * lo * 1.1  # contexts grow by ~336 of 1,024 over the run
    plain = simulate(StepCost("llama3-70b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=16),
                     closed_requests(1, 1, 1024, 337), Engine(max_seqs=16))
    assert r.tpot_s[0] < plain.tpot_s[0] / 2  # at batch 1 verification is nearly free: 3.36 tokens per step
    assert any("speculative decoding" in n for n in r.notes)


def test_cli_speculation_flags_come_together(capsys):
    assert main(["serving", "--spec-tokens", "4", "--requests", "4"]) == 2
    assert "--draft" in capsys.readouterr().err
    assert main(["serving", "--spec-tokens", "2", "--acceptance", "0.6", "--draft", "llama3.2-1b", "--concurrency", "2",
                 "--requests", "4", "--output-len", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 4
    assert main(["serving", "--model", "gemma3-27b", "--spec-tokens", "2", "--acceptance", "0.5", "--draft", "gemma3-1b",
                 "--requests", "4"]) == 2
    assert "sliding-window" in capsys.readouterr().err


# -- prefill/decode disaggregation ------------------------------------------------------------------

def test_disaggregated_request_alone_is_prefill_transfer_then_decode(step):
    """One request, 1,024 in, 3 out: the prefill pool samples the first token after the prefill
    step; the KV cache (1,024 x 131,072 B = 134.2 MB) crosses InfiniBand at 0.85 x 50 GB/s plus
    46 us; the decode pool feeds the first token against it (a 1-token chunk at prefix 1,024) and
    decodes the third at context 1,026."""
    from roofline.serving import simulate_disaggregated

    req = Requests(np.array([1024]), np.array([3]), np.array([0.0]))
    r = simulate_disaggregated(step, step, req)
    prefill = step.seconds([], [(1024, 0)])
    transfer = 46e-6 + 1024 * 131072 / (0.85 * 50e9)
    assert r.ttft_s[0] == pytest.approx(prefill, rel=1e-12)
    assert r.e2e_s[0] == pytest.approx(prefill + transfer + step.seconds([], [(1, 1024)]) + step.seconds([1026]), rel=1e-9)
    assert r.gpus == 2


def test_disaggregation_frees_decodes_from_prefill_interference(step):
    """Long prompts at a steady rate: on one pool every prompt chunk stalls the decodes (the
    inter-token p99 jumps to a prefill step); split, the decode pool's p99 stays a decode step."""
    from roofline.serving import simulate_disaggregated

    reqs = poisson_requests(8, 300, 4096, 128, seed=4)
    one = simulate(step, reqs)
    split = simulate_disaggregated(step, step, reqs)
    assert split.itl_s[99] < one.itl_s[99] / 3


def test_what_a_reviewer_found_taken_silently_is_said_or_refused(tmp_path, capsys):
    """A lengths header naming the columns the other way round was read by position; 64 users over
    10 requests and a 5,000-user sweep point over 100 were labelled as if that many ran; a bare
    --slo-ttft 500 meant 500 s."""
    from roofline.serving import read_lengths

    f = tmp_path / "l.csv"
    f.write_text("output_tokens,input_tokens\n100,3000\n120,2500\n")
    inp, out = read_lengths(f)
    assert list(inp) == [3000, 2500] and list(out) == [100, 120]
    f.write_text("output,completion\n3,4\n")
    with pytest.raises(RooflineError, match="both columns"):
        read_lengths(f)
    assert main(["serving", "--concurrency", "64", "--requests", "10"]) == 0
    assert "10 in flight at most" in capsys.readouterr().out
    assert main(["serving", "--sweep", "1,512", "--requests", "100", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("512 users (100 requests)" in n for n in notes) and any("256 sequences (512)" in n for n in notes)
    assert main(["serving", "--slo-ttft", "500"]) == 2
    assert "no unit" in capsys.readouterr().err
    # identical requests in a closed loop move in lockstep (p50 = p99): said; a spread of lengths is not
    assert main(["serving", "--concurrency", "4", "--requests", "20"]) == 0
    assert "move in step" in capsys.readouterr().out
    assert main(["serving", "--concurrency", "4", "--requests", "20", "--input-len", "500-1500"]) == 0
    assert "move in step" not in capsys.readouterr().out


def test_cli_disagg(capsys):
    assert main(["serving", "--rate", "5", "--requests", "20", "--disagg", "1:2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpus"] == 3 and any(n.startswith("disaggregated") for n in d["notes"])
    # the KV link is named in the JSON (a reviewer read "link": null, the one-GPU group's): H100's
    # scale-out is 400 Gb/s InfiniBand, 50 GB/s per GPU; a 1,024-token Llama 3 8B prompt's cache is
    # 1,024 x 2 (K, V) x 32 layers x 8 heads x 128 x 2 B = 134.2 MB, at 0.85 x 50 GB/s = 3.16 ms + 46 us
    assert d["link"] is None and d["kv_link"] == "infiniband"
    assert d["kv_transfer_mean_s"] == pytest.approx(1024 * 2 * 32 * 8 * 128 * 2 / (0.85 * 50e9) + 46e-6, rel=1e-6)
    # the pools' own notes are kept (a reviewer found the prefill pool's first one dropped): the KV
    # cache line both pools share, and the 20-request sample's ramp note
    assert any(n.startswith("KV cache") for n in d["notes"]) and any("ramp and drain" in n for n in d["notes"])
    assert main(["serving", "--disagg", "1:1", "--requests", "4"]) == 2  # neither --rate nor --concurrency
    assert "--rate" in capsys.readouterr().err


@pytest.mark.slow
def test_the_best_split_is_the_fastest_of_the_splits_tried(step, capsys):
    """G = 3 replicas: the splits 1:2 and 2:1 each get a rate search; the best is the larger, and
    co-located is 3 x one replica's best rate (identical replicas, requests spread evenly)."""
    from roofline.serving import best_disaggregation, max_rate_within

    found = best_disaggregation(step, 3, 2048, 64, ttft_s=1.0, tpot_s=0.03, requests=80)
    assert [(p, d) for p, d, _ in found["splits"]] == [(1, 2), (2, 1)]
    rates = [r for _, _, r in found["splits"] if r is not None]
    assert found["best"][2] == max(rates)
    one = max_rate_within(step, 2048, 64, ttft_s=1.0, tpot_s=0.03, requests=80)
    assert found["colocated"] == pytest.approx(3 * one.slo["best"])
    assert main(["serving", "--disagg-search", "2", "--requests", "40"]) == 2  # needs an SLO
    assert "--disagg-search" in capsys.readouterr().err


# -- expert parallelism ---------------------------------------------------------------------------

def test_expert_parallelism_holds_a_share_of_the_experts_and_pays_two_all_to_alls():
    """Mixtral 8x7B (46,702,792,704 parameters, 45,097,156,608 of them routed experts) over 4 GPUs
    with data-parallel attention: each GPU holds everything but 3/4 of the experts,
    2 x (46,702,792,704 - 3/4 x 45,097,156,608) = 25,759,850,496 B in bf16. A step of 64 tokens
    sends each GPU's 16 tokens' 2 hidden rows (4,096 x 2 B), 3/4 of them to other GPUs, at each
    of 32 MoE layers, each way: 16 x 2 x 4,096 x 2 x 3/4 x 32 = 6,291,456 B."""
    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    assert ep.weight_bytes_per_gpu() == pytest.approx(25_759_850_496)
    ops = {o.name: o for o in ep.ops([2048] * 64)}
    assert ops["EP all-to-all dispatch (nvlink)"].bytes == pytest.approx(6_291_456)
    assert ops["EP all-to-all combine (nvlink)"].bytes == pytest.approx(6_291_456)
    assert "QKV proj" in ops and not any("all-reduce" in n for n in ops)  # attention is data parallel: no TP all-reduce
    one = {o.name: o for o in StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=1, max_seqs=256).ops([2048] * 64)}
    # each GPU attends for a quarter of the sequences, with all the heads
    assert ops["flash attention (decode)"].flops == pytest.approx(one["flash attention (decode)"].flops / 4)
    with pytest.raises(RooflineError, match="MoE"):
        StepCost("llama3-8b", "h100-sxm", tensor_parallel=2, expert_parallel=True)
    with pytest.raises(RooflineError, match="must divide"):
        StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=3, expert_parallel=True)


def test_expert_parallel_serving_pools_the_cache_over_the_gpus(capsys):
    """With data-parallel attention each GPU caches its own sequences whole: the replica's cache is
    4 x one GPU's free memory."""
    from roofline.plan.step import kv_cache_budget

    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    cap, parts = kv_cache_budget(ep, 0.9)
    assert cap == pytest.approx(4 * (parts["capacity_bytes"] - parts["weights_bytes"] - parts["activations_bytes"]))
    assert main(["serving", "--model", "mixtral-8x7b", "--tp", "4", "--ep", "--concurrency", "16", "--requests", "32",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpus"] == 4 and "expert-parallel 4" in d["description"] and d["model"] == "mixtral-8x7b" and any("expert parallelism" in n for n in d["notes"])


# -- pipeline parallelism ---------------------------------------------------------------------------

def test_pipeline_stages_hold_a_share_of_the_weights_and_send_between_stages():
    """Llama 3 70B over 4 stages of 1 GPU: each holds 2 x 70,553,706,496 / 4 = 35,276,853,248 B. A
    decode step of one sequence crosses the stages' 3 boundaries, each a send of one token's
    8,192 x 2 B over NVLink: 6 us + 16,384 / (0.85 x 450 GB/s), and a launch of 3 us (eager)."""
    pp = StepCost("llama3-70b", "h100-sxm", cost_model=EAGER, pipeline_stages=4)
    one = StepCost("llama3-70b", "h100-sxm", cost_model=EAGER)
    assert pp.weight_bytes_per_gpu() == pytest.approx(35_276_853_248)
    send = 6e-6 + 16384 / (0.85 * 450e9) + 3e-6
    assert pp.seconds([2048]) - one.seconds([2048]) == pytest.approx(3 * send, rel=1e-9)


def test_a_pipeline_runs_a_micro_batch_per_stage_and_idles_below_that():
    """4 stages, 64 users: 4 virtual engines of 16 identical users each deliver 4 x one engine's
    tokens/s; with 1 user only one engine works (the bubble): the same as one engine alone."""
    from roofline.serving import simulate_pipelined

    pp = StepCost("llama3-70b", "h100-sxm", cost_model=EAGER, pipeline_stages=4)
    full = simulate(pp, closed_requests(64, 128, 512, 64))
    alone = simulate(pp, closed_requests(16, 32, 512, 64), _stage_engine=True)
    assert full.gpus == 4 and full.output_tokens_per_s == pytest.approx(4 * alone.output_tokens_per_s, rel=1e-9)
    single = simulate_pipelined(pp, closed_requests(1, 4, 512, 64))
    lone = simulate(pp, closed_requests(1, 4, 512, 64), _stage_engine=True)
    assert single.output_tokens_per_s == pytest.approx(lone.output_tokens_per_s, rel=1e-9)
    assert any("pipeline: 4 stages" in n for n in full.notes)
    # the mean decode batch is what one micro-batch's step runs (16 users an engine), not the 64 in flight
    assert full.mean_decode_batch == pytest.approx(alone.mean_decode_batch, rel=1e-9) and full.mean_decode_batch <= 16


def test_review_refusals_for_drafts_and_kv_links(step):
    """A draft with another vocabulary, or one not smaller than the target, is refused; NVLink as
    the KV link of pools spanning two nodes is refused; with expert parallelism a sequence's cache
    moves whole (one GPU holds it): twice TP 2's per-GPU shard."""
    from roofline.serving import kv_transfer_seconds, simulate_disaggregated

    target = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_seqs=16, verify_tokens=3)
    engine = Engine(max_seqs=16, spec_tokens=2, acceptance=0.5)
    with pytest.raises(RooflineError, match="vocabulary"):
        simulate(target, closed_requests(1, 1, 64, 4), engine, draft=StepCost("gpt2", "h100-sxm", max_seqs=16))
    with pytest.raises(RooflineError, match="not smaller"):
        simulate(target, closed_requests(1, 1, 64, 4), engine, draft=StepCost("llama3-8b", "h100-sxm", max_seqs=16))
    with pytest.raises(RooflineError, match="more than one node"):
        simulate_disaggregated(step, step, poisson_requests(5, 4, 64, 4), prefill_replicas=5, decode_replicas=5,
                               kv_link="nvlink")
    tp = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=2)
    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=2, expert_parallel=True)
    t_tp, _ = kv_transfer_seconds(tp, tp, np.array([1024]))
    t_ep, _ = kv_transfer_seconds(ep, ep, np.array([1024]))
    assert (t_ep[0] - 46e-6) == pytest.approx(2 * (t_tp[0] - 46e-6))


def test_expert_parallel_step_runs_at_its_busiest_gpu():
    """Data-parallel attention puts a sequence on one GPU: a lone 1,024-token prompt runs its
    attention and dense ops there with whole weights (8 x a TP-8 GPU's share), so it is slower
    than under TP 8; 64 decodes over 8 GPUs put 8 on each."""
    ep = StepCost("qwen3-30b-a3b", "h100-sxm", tensor_parallel=8, expert_parallel=True)
    tp = StepCost("qwen3-30b-a3b", "h100-sxm", tensor_parallel=8)
    assert ep.seconds([], [(1024, 0)]) > tp.seconds([], [(1024, 0)])
    assert ep.busiest_rows(64, []) == 8 and ep.busiest_rows(3, [(1024, 0)]) == 1024


def test_gpus_per_node_past_the_scale_up_domain_is_refused_by_name(capsys):
    """An HGX H100's NVLink joins 8 GPUs (scale_up_gpus, cited): --gpus-per-node 16 would put a
    TP 16 ring on NVLink, so it is refused, naming the flag and the domain; a GB200 NVL72 joins 72
    (TP 16 rides NVLink there); TP 8 with --gpus-per-node 16 needs no more than the domain."""
    from roofline.cli import main
    from roofline.machines import get_machine
    from roofline.plan.step import StepCost

    assert get_machine("h100-sxm").scale_up_gpus == 8 and get_machine("gb200").scale_up_gpus == 72
    for argv in (["decode", "--model", "llama3-70b", "--machine", "h100-sxm", "--tp", "16", "--gpus-per-node", "16"],
                 ["serving", "--model", "llama3-70b", "--machine", "h100-sxm", "--tp", "16", "--gpus-per-node", "16"],
                 ["serving", "--model", "llama3-70b", "--machine", "h100-sxm", "--tp", "8", "--pp", "2",
                  "--gpus-per-node", "16"],
                 ["train", "--model", "llama3-8b", "--machine", "h100-sxm", "--tokens", "1e12", "--gpus", "32",
                  "--gpus-per-node", "16"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "--gpus-per-node 16" in err and "at most 8 GPUs" in err and "Traceback" not in err, argv
    assert StepCost("llama3-70b", "gb200", tensor_parallel=16, gpus_per_node=72).link == "nvlink"
    assert StepCost("llama3-70b", "h100-sxm", tensor_parallel=16).link == "infiniband"  # default 8 per node
    assert StepCost("llama3-70b", "h100-sxm", tensor_parallel=8, gpus_per_node=16).link == "nvlink"


def test_the_busiest_expert_parallel_gpu_reads_whole_experts():
    """Mixtral 8x7B over 4 GPUs, 2 experts each: one token picks 2 of the 8, so the step touches
    T = 8 (1 - (1 - 2/8)^1) = 2 experts and the busiest GPU holds at least ceil(2 / 4) = 1 of them,
    a whole expert's gate+up weights (2 x 4,096 x 14,336 elements), not the mean half of one.
    At 64 tokens T = 8 (1 - 0.75^64) ~ 8: each GPU's 2 experts, the cap."""
    from roofline.transformer import get_model

    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    kind = get_model("mixtral-8x7b").kinds[0]
    one = ep._token_kernels(kind, 1.0)["expert gate+up proj"]
    assert float(one.weight_elems) == pytest.approx(1 * 2 * 4096 * 14336)
    many = ep._token_kernels(kind, 64.0)["expert gate+up proj"]
    assert float(many.weight_elems) == pytest.approx(2 * 2 * 4096 * 14336, rel=1e-6)


def test_a_sweep_runs_each_concurrency_once_in_increasing_order():
    from roofline.serving import sweep_concurrency

    step = StepCost("llama3-8b", "h100-sxm")
    sw = sweep_concurrency(step, [4, 1, 1], 128, 16, requests=8)
    assert sw.values == (1, 4) and len(sw.results) == 2


# -- overload: a rate the run does not hold meets no SLO (2026-12-02 review) ------------------------

def test_the_held_rate_counts_completions_while_requests_arrive_past_the_ramp():
    """Arrivals every 0.1 s (0 to 9.9 s, 10 offered a second), each done 1 s later: L = 1 s, the
    arrivals in (0, 8.9] are 89 and the completions in (1, 9.9] 89: 10 held whatever the latency."""
    from roofline.serving.results import completion_rate_per_s, held_rate_per_s, offered_rate_per_s

    arrival = np.arange(100) * 0.1
    assert held_rate_per_s(arrival, np.ones(100)) == pytest.approx(10.0)
    assert offered_rate_per_s(arrival) == pytest.approx(10.0)
    # a queue: request a waits a more (done at 1 + 2a: 5 a second). L = 1 + 4.95 s (the median);
    # arrivals in (0, 9.9 - 5.95] are a = 0.1 ... 3.9, 39 of them; completions 1 + 2a in (5.95, 9.9]
    # are a = 2.5 ... 4.4, 20: 10 x 20 / 39 held, about half the offered rate
    assert held_rate_per_s(arrival, 1.0 + arrival) == pytest.approx(10 * 20 / 39)
    # latencies longer than the arrivals last: no window to tell
    assert held_rate_per_s(arrival, np.full(100, 20.0)) == math.inf
    # the completions' middle half (a flood's capacity): done at 1 + 2a, 5 a second
    assert completion_rate_per_s(arrival, 1.0 + arrival) == pytest.approx(5.0)
    assert completion_rate_per_s(np.zeros(10), np.ones(10)) == math.inf
    assert completion_rate_per_s(arrival[:7], np.ones(7)) == math.inf


def test_a_rate_over_capacity_is_overloaded_and_meets_no_slo(step):
    """The closed loop at 256 users is the replica's capacity; offered three times that, an open
    loop holds about the capacity (its middle half) and is overloaded, so even a target of an
    hour is not met; at half the capacity it is not overloaded."""
    cap = simulate(step, closed_requests(256, 1024, 1024, 128)).requests_per_s
    over = simulate(step, poisson_requests(3 * cap, 1000, 1024, 128))
    assert over.overloaded and over.overload.startswith("overloaded:") and over.overload in over.notes  # a field, shown as a note
    assert not meets_slo(over, {"ttft_s": 3600.0, "tpot_s": None, "percentile": 90.0})
    under = simulate(step, poisson_requests(cap / 2, 1000, 1024, 128))
    assert not under.overloaded and meets_slo(under, {"ttft_s": 3600.0, "tpot_s": None, "percentile": 90.0})


def test_a_rate_just_under_capacity_is_not_called_overloaded_and_a_short_flood_says_it_is_all_ramp(step, capsys):
    """A reviewer saw 0.97 of capacity flagged 'overloaded' (a held rate below the served one) and
    100/s offered to a 23/s replica in 300 requests flagged nothing. Just under the closed loop's
    capacity the queue does not grow: no overload; a flood whose latencies outlast its arrivals
    cannot show a held rate, and the report says the run is its ramp and drain (text, JSON, and the
    CSV's stderr)."""
    cap = simulate(step, closed_requests(256, 1024, 1024, 256)).requests_per_s
    near = simulate(step, poisson_requests(0.9 * cap, 1000, 1024, 256))
    assert not near.overloaded
    flood = simulate(step, poisson_requests(4 * cap, 300, 1024, 256))
    assert flood.sample_note() and flood.sample_note() in flood.to_dict()["notes"]
    assert main(["serving", "--rate", "100", "--requests", "300", "--csv"]) == 0
    out, err = capsys.readouterr()
    assert "ramp and drain" in err and "ramp" not in out and out.startswith("request")


def test_a_short_rate_sample_is_called_so(capsys):
    """100 requests at tens per second arrive over a few seconds, about a request's own end to end
    (1,024 in, 256 out: ~1.4 s alone, more in a batch): the search's answer says the sample is
    mostly ramp and drain."""
    assert main(["serving", "--slo-ttft", "1s", "--requests", "100", "--output-len", "256"]) == 0
    assert "not a steady state; give more --requests" in capsys.readouterr().out


@pytest.mark.slow
def test_the_split_search_with_a_ttft_target_only_reports_rates_the_split_holds(step):
    """TTFT comes from the prefill pool, so a TTFT target alone never sees the decode pool's queue:
    each split's best rate must be one its run holds (not overloaded), at most 1.1x what the
    same split serves offered twice that rate (its capacity)."""
    from roofline.serving import best_disaggregation, simulate_disaggregated

    found = best_disaggregation(step, 4, 1024, 256, ttft_s=1.0, requests=300)
    for p, d, rate in found["splits"]:
        if rate is None:
            continue
        at = simulate_disaggregated(step, step, poisson_requests(rate, 1200, 1024, 256), prefill_replicas=p,
                                    decode_replicas=d)
        assert not at.overloaded, (p, d, rate)
        flood = simulate_disaggregated(step, step, poisson_requests(2 * rate, 1200, 1024, 256), prefill_replicas=p,
                                       decode_replicas=d)
        from roofline.serving.results import held_rate_per_s

        assert rate <= 1.1 * held_rate_per_s(flood.arrival_s, flood.e2e_s), (p, d, rate)


def test_disaggregated_inter_token_latency_includes_the_gap_to_the_decode_pool(step):
    """Fixed output lengths: the mean inter-token latency over every token after the first is
    (last token - first token) / (n - 1) averaged over requests, the TPOT mean, so the gap
    between the prefill pool's token and the decode pool's (the transfer, its queue) is in it."""
    from roofline.serving import simulate_disaggregated

    r = simulate_disaggregated(step, step, poisson_requests(30, 600, 1024, 64), prefill_replicas=3, decode_replicas=1)
    assert r.to_dict()["itl_mean_s"] == pytest.approx(float(np.mean(r.tpot_s)), rel=1e-9)


def test_cli_pipeline_stages_are_refused_with_disaggregation(capsys):
    assert main(["serving", "--model", "llama3-70b", "--tp", "2", "--pp", "2", "--disagg", "2:2", "--rate", "5"]) == 2
    assert "--pp 2 with --disagg is not modelled" in capsys.readouterr().err
    assert main(["serving", "--pp", "2", "--disagg-search", "4", "--slo-ttft", "1s"]) == 2
    assert "--disagg-search is not modelled" in capsys.readouterr().err


def test_a_microsecond_target_is_printed_as_itself():
    from roofline.serving.render import _lat

    assert _lat(1e-6) == "0.001 ms" and _lat(0.0123) == "12.3 ms" and _lat(12.0) == "12.0 s"


def test_the_cache_note_and_the_engine_line_give_one_figure(capsys):
    """Llama 3 70B on 4 H100s with a Llama 3.2 1B draft: per GPU 0.9 x 85.5 GB less a quarter of
    the 141.1 GB of bf16 weights (35.3 GB), a quarter of the draft's 2.47 GB (0.62 GB) and the
    activations (about 1.1 GB): ~40 GB, the same in the engine line, the note and the JSON."""
    args = ["serving", "--model", "llama3-70b", "--tp", "4", "--spec-tokens", "4", "--acceptance", "0.8",
            "--draft", "llama3.2-1b", "--requests", "20"]
    assert main(args) == 0
    out = capsys.readouterr().out
    engine = float(out.split("KV cache ", 1)[1].split(" GB per GPU")[0])
    note = float(out.split("note: KV cache ", 1)[1].split(" GB per GPU")[0])
    assert engine == note and abs(engine - (0.9 * 85.5 - 35.3 - 0.62 - 1.1)) < 0.3
    assert main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_cache_bytes"] / 1e9 == pytest.approx(engine, abs=0.05)


def test_the_breakdown_shows_the_steps_the_run_took(capsys):
    """One user alone never decodes beside a prompt: its prompt step has no decodes and takes its
    TTFT. With 90% prefix hits a 1,024-token prompt computes ~103 tokens after ~921 cached ones."""
    assert main(["serving", "--concurrency", "1", "--requests", "3", "--breakdown", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    mixed = d["breakdown"]["mixed_step"]
    assert mixed["decode_batch"] == 0 and mixed["chunk"] == 1024 and mixed["prefix"] == 0
    assert mixed["time_s"] == pytest.approx(d["ttft_p50_s"], rel=1e-9)
    assert main(["serving", "--prefix-hit", "0.9", "--requests", "200", "--breakdown", "--json"]) == 0
    mixed = json.loads(capsys.readouterr().out)["breakdown"]["mixed_step"]
    assert 100 <= mixed["chunk"] <= 106 and 918 <= mixed["prefix"] <= 924


# -- lengths from a file ----------------------------------------------------------------------------

def test_lengths_come_from_a_file_a_request_a_line(tmp_path, capsys):
    """A header, a comment, a blank line, commas, a tab and spaces: three requests, each keeping its
    own line's pair, in order; --requests defaults to the file's lines, and more repeat them."""
    from roofline.serving import read_lengths

    f = tmp_path / "lengths.csv"
    f.write_text("input_len,output_len\n# measured\n512,128\n2048, 64\n\n100\t300\n")
    inp, out = read_lengths(f)
    assert inp.tolist() == [512, 2048, 100] and out.tolist() == [128, 64, 300]
    assert main(["serving", "--lengths", str(f), "--concurrency", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["requests"] == 3 and d["input_tokens_mean"] * 3 == pytest.approx(512 + 2048 + 100)
    assert d["output_tokens_mean"] * 3 == pytest.approx(128 + 64 + 300)
    assert main(["serving", "--lengths", str(f), "--concurrency", "1", "--csv"]) == 0
    rows = [line.split(",") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(int(r[2]), int(r[3])) for r in rows] == [(512, 128), (2048, 64), (100, 300)]  # each line's own pair
    assert main(["serving", "--lengths", str(f), "--rate", "2", "--requests", "7", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["requests"] == 7 and d["input_tokens_mean"] * 7 == pytest.approx(2 * (512 + 2048 + 100) + 512)


@pytest.mark.parametrize("text, says", [
    ("512,abc\n", "line 1: 'abc' is not a whole number"),
    ("1,2\n3,4,5\n", "line 2: expected two lengths"),
    ("0,5\n", "line 1: '0' is not"),
    ("2.5,5\n", "'2.5' is not"),
    ("nan,5\n", "'nan' is not"),
    ("", "holds no lengths"),
    ("# only a comment\n", "holds no lengths"),
])
def test_a_bad_lengths_file_is_refused_by_its_line(tmp_path, capsys, text, says):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    assert main(["serving", "--lengths", str(f)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_lengths_from_a_file_and_on_the_command_line_conflict(tmp_path, capsys):
    f = tmp_path / "l.csv"
    f.write_text("5,5\n")
    assert main(["serving", "--lengths", str(f), "--output-len", "8"]) == 2
    assert "drop --input-len/--output-len" in capsys.readouterr().err
    assert main(["serving", "--lengths", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("spec, says", [([100.7, 200.2], "100.7 (item 0) is not a whole number"), ("abc", "not 'abc'"),
                                        ([float("nan")], "nan (item 0)"), ([5, 0], "0 (item 1)"), ([], "expected a length")])
def test_library_lengths_are_refused_by_name_not_truncated(spec, says):
    with pytest.raises(RooflineError, match=says.replace("(", r"\(").replace(")", r"\)")):
        closed_requests(2, 4, spec, 16)


def test_the_curve_marks_overloaded_points_and_the_capacity(step):
    """A rate search tries rates past the flood's capacity (its queue grows without end): the
    figure crosses those points out on both panels and draws the capacity on the load axis, so a
    reader does not take a point that never settles for a steady state."""
    pytest.importorskip("matplotlib")
    from roofline.plots.plan_figures import plot_serving

    sw = max_rate_within(step, 512, 128, ttft_s=0.5, tpot_s=0.02, requests=150)
    over = [r for r in sw.rows() if r["overloaded"] or r["over_capacity"]]
    assert over, "the search tried no rate past capacity"
    fig = plot_serving(sw)
    left, right = fig.axes[:2]
    assert "overloaded: its queue grows" in [t.get_text() for t in left.get_legend().get_texts()]
    from matplotlib.colors import to_rgba
    from roofline.palette import MEMORY_RED

    where = sorted((r["per_user_tokens_per_s"], r["output_tokens_per_s_per_gpu"]) for r in over)
    red = [sorted(map(tuple, c.get_offsets().tolist())) for c in left.collections
           if len(c.get_offsets()) and tuple(c.get_facecolor()[0]) == to_rgba(MEMORY_RED)]
    assert len(red) == 1 and len(red[0]) == len(where), "the overloaded points are not the red marks"
    for mark, point in zip(red[0], where):  # pytest.approx takes no nested lists (pytest 9.2): point by point
        assert mark == pytest.approx(point), "an overloaded point is not at its red mark"
    labels = [t.get_text() for t in right.get_legend().get_texts()]
    assert any(t.startswith(f"capacity {sw.slo['capacity_per_s']:,.4g}/s") for t in labels)
    clean = sweep_concurrency(step, [1, 4], 256, 16, requests=8)
    assert not any(r["overloaded"] for r in clean.rows())
    assert plot_serving(clean).axes[0].get_legend() is None  # nothing to key: no SLO, nothing overloaded


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


def test_the_rate_search_checks_its_answer_with_a_longer_run(step):
    """A reviewer found the search's 97%-of-capacity answer meeting a 2 s TTFT at 1,000 requests
    and missing it three times over at 4,000 (a queue near capacity settles slowly). The best rate
    is run again with CHECK_FACTOR times the requests and that longer run is the point shown: the
    answer meets the targets there, and every rate refused by a longer run is below capacity and
    above the answer."""
    from roofline.serving.search import CHECK_FACTOR

    sw = max_rate_within(step, 1024, 256, ttft_s=0.2, requests=300)
    best = sw.slo["best"]
    assert best is not None and sw.slo["checked_requests"] == CHECK_FACTOR * 300
    shown = sw.results[sw.values.index(best)]
    assert shown.requests == CHECK_FACTOR * 300 and meets_slo(shown, sw.slo)
    for v in sw.slo["failed_checks"]:
        r = sw.results[sw.values.index(v)]
        assert r.requests == CHECK_FACTOR * 300 and not meets_slo(r, sw.slo) and best < v
    # the bisection stops at 1%: no two tried rates below the answer's bracket closer than that
    rates = sorted(v for v in sw.values if v < 1e8)
    assert all(b / a > 1.0 + 0.5 * 0.01 for a, b in zip(rates, rates[1:]))


@pytest.mark.parametrize("argv, words", [
    (["--output-len", "1e12"], "argument --output-len: must be at most 16,777,216"),
    (["--input-len", "1e12"], "argument --input-len: must be at most 16,777,216"),
    (["--input-len", "10000000", "--output-len", "10000000"], "at most 16,777,216 in all"),
    (["--output-len", "16000000"], "--output-len"),  # a cache that outgrows the GPU, named by the flag at fault
    (["--burstiness", "0.25"], "closed loop of 64 users"),  # the default run is a closed loop: nothing to shape
])
def test_absurd_lengths_and_a_burstiness_with_nothing_to_shape_are_refused(argv, words, capsys):
    """A reviewer's --output-len 1e12 ended in numpy's 466 GiB allocation error (a traceback), a
    16M-token output was blamed on --input-len, and --burstiness on the default closed loop was
    silently ignored."""
    assert main(["serving", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_lengths_file_row_past_the_limit_or_the_cache_names_the_file(tmp_path, capsys):
    f = tmp_path / "len.csv"
    f.write_text("input,output\n100,20\n10000000,10000000\n")
    assert main(["serving", "--lengths", str(f)]) == 2
    assert "line 3: 10,000,000 + 10,000,000 tokens is past 16,777,216" in capsys.readouterr().err
    f.write_text("input,output\n100,20\n10000000,10\n")  # fits the limit, not an H100's cache
    assert main(["serving", "--lengths", str(f)]) == 2
    err = capsys.readouterr().err
    assert "needs 1,310.72 GB" in err and "len.csv" in err and "--input-len" not in err


def test_an_overloaded_run_shows_the_pace_it_completes_at(step):
    """A reviewer read "overloaded: 0 requests/s completed" for a run serving 23/s: the note
    shows the middle half of the completions' pace, within a few percent of the closed loop's
    capacity when offered twice that."""
    cap = simulate(step, closed_requests(256, 1024, 1024, 256)).requests_per_s
    over = simulate(step, poisson_requests(2 * cap, 1000, 1024, 256))
    note = next(n for n in over.notes if n.startswith("overloaded:"))
    pace = float(note.split("completes about ")[1].split(" ")[0])
    assert pace == pytest.approx(cap, rel=0.1)


def test_pipeline_stages_report_one_gpus_cache_and_the_replicas_own_overload(capsys):
    """A reviewer read 'KV cache 9.6 GB per GPU' for PP 2 (two stage GPUs' 4.8 GB) and an overload
    note of one virtual engine's rate (0.93 offered, where the run was offered 2). Llama 3 70B in
    bf16 over 2 stages: each GPU holds half the 141.1 GB of weights, 70.6 GB, and caches in what
    is left of 0.9 x 85.5 GB; the engine line, the JSON and the memory note agree on it, and the
    overload note is of the 2 requests/s offered."""
    assert main(["serving", "--model", "llama3-70b", "--pp", "2", "--rate", "2", "--requests", "400", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    per_gpu = d["kv_cache_bytes"]
    assert per_gpu / 1e9 == pytest.approx(0.9 * 85.52 - 141.1 / 2 - 1.6, abs=0.3)
    kv_note = next(n for n in d["notes"] if n.startswith("KV cache"))
    assert kv_note.startswith(f"KV cache {per_gpu / 1e9:,.1f} GB per GPU (2 GPUs in the replica")
    over = [n for n in d["notes"] if n.startswith("overloaded:")]
    assert over and "of the 2 offered" in over[0]
    assert all(not n.startswith("memory-bound batch: ") for n in d["notes"])  # said as each virtual engine's


def test_a_disaggregated_prefill_pool_is_not_called_memory_bound(capsys):
    """The prefill pool keeps no sequence decoding: its cache never fills, so the 'memory-bound
    batch' note (a cache holding under half the sequences that could run) is left to pools whose
    cache did fill or preempt; the header counts each pool's replicas."""
    assert main(["serving", "--rate", "5", "--input-len", "4096", "--disagg", "3:1", "--requests", "300", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert not any(n.startswith("prefill pool: memory-bound") for n in d["notes"])
    assert "prefill pool 3 replica(s) of H100 SXM x 1" in d["description"]


def test_a_single_runs_json_says_overloaded_and_short_samples_as_keys(capsys):
    """Sweep points carried 'overloaded'; a single run said it only inside its notes' words."""
    assert main(["serving", "--rate", "50", "--json"]) == 0  # about twice the 23/s an H100 holds
    d = json.loads(capsys.readouterr().out)
    assert d["overloaded"] is True and any(n.startswith("overloaded:") for n in d["notes"])
    assert main(["serving", "--rate", "2", "--requests", "2000", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["overloaded"] is False and d["mostly_ramp_and_drain"] is False
    assert main(["serving", "--rate", "30", "--requests", "100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mostly_ramp_and_drain"] is True


def test_expert_parallelism_across_nodes_sends_a_token_once_per_remote_node(capsys):
    """EP 16 on H100 nodes of 8 (DeepEP's internode kernels): a token crosses InfiniBand once per
    remote node holding one of its experts, not once per remote expert. Qwen3 235B-A22B, 128
    experts, top 8, two nodes of 64: 1 - C(64, 8) / C(128, 8) = 1 - prod (64 - i) / (128 - i) for
    i < 8 = 0.99690 remote nodes per token; the dispatch sends fp8 with an fp32 scale per 128
    values under W8A8 (1 + 4/128 B), the combine bf16. D = 4,096: 64 rows dispatch 64 x 4,096 x
    1.03125 x 0.99637 B, combine 64 x 4,096 x 2 x 0.99637 B."""
    from roofline.plan.precision import Precision

    r = 1.0 - math.prod((64 - i) / (128 - i) for i in range(8))
    assert StepCost.remote_nodes_per_token(128, 8, 2) == pytest.approx(r) and r == pytest.approx(0.99690, abs=1e-5)
    # DeepSeek-V3 (256 experts, top 8) over 4 nodes: each of 3 remote nodes is missed with C(192, 8) / C(256, 8)
    miss = math.prod((192 - i) / (256 - i) for i in range(8))
    assert StepCost.remote_nodes_per_token(256, 8, 4) == pytest.approx(3 * (1 - miss))
    from roofline.machines import get_machine

    p = Precision.resolve("qwen3-235b-a22b", get_machine("h100-sxm"), "fp8")
    ep16 = StepCost("qwen3-235b-a22b", "h100-sxm", p, 16, expert_parallel=True, max_tokens=256, max_seqs=64)
    moe = next(k for k in ep16.sharded.kinds if k.mlp is not None)
    dispatch, combine = ep16._all_to_alls(moe, 64.0)
    assert ep16.link == "infiniband" and dispatch.dtype == "fp8" and combine.dtype == "bf16"
    assert dispatch.bytes == pytest.approx(64 * 4096 * (1 + 4 / 128) * r)
    assert combine.bytes == pytest.approx(64 * 4096 * 2 * r)
    ep8 = StepCost("qwen3-235b-a22b", "h100-sxm", p, 8, expert_parallel=True, max_tokens=256, max_seqs=64)
    d8, c8 = ep8._all_to_alls(moe, 64.0)  # within a node: every remote expert, 8 x 7/8 copies a row
    assert d8.bytes == pytest.approx(64 * 4096 * (1 + 4 / 128) * 8 * 7 / 8) and c8.bytes == pytest.approx(64 * 4096 * 2 * 7)
    argv = ["serving", "--model", "qwen3-235b-a22b", "--dtype", "fp8", "--ep", "--concurrency", "16", "--requests", "32"]
    assert main([*argv, "--tp", "16"]) == 0
    out = capsys.readouterr().out
    assert "spans 2 nodes of 8: a token crosses infiniband once per remote node" in out and "1.00 of 1" in out
    assert main([*argv, "--tp", "8"]) == 0
    assert "spans" not in capsys.readouterr().out


def test_a_single_run_gives_its_spread_over_seeds(step, capsys):
    """A Poisson run is one sample: the CLI reruns it with the next seeds (3 by default) and reports
    each metric's low and high; the spread's ends are the seeds' own runs (checked here by running
    each seed through the library), a closed loop of fixed lengths draws nothing and prints none."""
    from roofline.serving import seed_spread

    runs = [simulate(step, poisson_requests(10, 200, 1024, 128, seed)) for seed in (5, 6, 7)]
    spread = seed_spread(runs[0], lambda seed: runs[seed - 5], [5, 6, 7])
    tput = sorted(r.output_tokens_per_s for r in runs)
    assert spread["seeds"] == [5, 6, 7] and spread["output_tokens_per_s"] == [tput[0], tput[-1]]
    p99 = sorted(r.percentile("ttft", 99) for r in runs)
    assert spread["ttft_p99_s"] == [p99[0], p99[-1]] and p99[0] < p99[-1]  # Poisson samples differ
    same = simulate(step, closed_requests(4, 16, 256, 16))
    assert seed_spread(same, lambda seed: same, [0, 1]) is None
    assert main(["serving", "--rate", "10", "--requests", "200", "--input-len", "1024", "--output-len", "128",
                 "--seed", "5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["seed_spread"]["seeds"] == [5, 6, 7] and any(n.startswith("seed spread: over seeds 5-7") for n in d["notes"])
    assert main(["serving", "--rate", "10", "--requests", "200", "--seeds", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["seed_spread"] is None and not any(n.startswith("seed spread") for n in d["notes"])
    assert main(["serving", "--sweep", "1,2", "--seeds", "3"]) == 2
    assert "--seeds reruns a single run" in capsys.readouterr().err
    # every seed named can be rerun: at --seed's bound, 2^32 - 1, the spread takes the seeds below it
    from roofline.serving.search import spread_seeds

    assert spread_seeds(2**32 - 1, 3) == [2**32 - 1, 2**32 - 2, 2**32 - 3] and spread_seeds(7, 3) == [7, 8, 9]
    # a closed loop of fixed lengths draws nothing: --seeds asked for says so
    assert main(["serving", "--concurrency", "8", "--requests", "16", "--seeds", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["seed_spread"] is None and any(n.startswith("--seeds 4: this run draws nothing at random") for n in d["notes"])


@pytest.mark.slow
def test_the_rate_search_table_marks_its_longer_runs(capsys):
    """The SLO search's check replaces the short run at the rate it checks: that row is the longer
    run (marked so), and short-run passes above a refused answer are named, not left to contradict it."""
    assert main(["serving", "--slo-ttft", "500ms", "--slo-tpot", "30ms", "--requests", "300"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.rstrip().endswith(("yes", "no", "longer run", ")"))]
    assert any(r.rstrip().endswith("yes, longer run") for r in rows)  # the answer's own check
    assert "('longer run' rows)" in out


def test_the_split_search_reports_as_other_searches_do(capsys):
    """--disagg-search's JSON carries the preset keys every --json has (model, machine, ...), how
    requests arrived, and what was checked; with a target no split meets it says why."""
    assert main(["serving", "--disagg-search", "2", "--slo-ttft", "1s", "--requests", "60", "--burstiness", "0.5",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"] == "llama3-8b" and d["machine"] == "h100-sxm" and d["description"].startswith("Llama 3 8B")
    assert d["arrivals"] == "gamma" and d["burstiness"] == 0.5 and d["expert_parallel"] is False
    assert d["checked_requests"] == 4 * 60 * 2 if d["best"] else d["checked_requests"] is None
    assert main(["serving", "--disagg-search", "2", "--slo-tpot", "1ms", "--requests", "40"]) == 0
    out = capsys.readouterr().out
    assert "no split meets the targets: co-located at the lightest load tried" in out
    assert "arrivals Poisson" in out.splitlines()[1]


def test_expert_parallel_runs_say_so_and_what_their_all_to_alls_send(capsys):
    """JSON tells an EP run from a TP one; the all-to-alls send fp8 (with scales) only under fp8
    W8A8; an int8 W8A8 run sends bf16 and says an int8 dispatch is not modelled; fp8 activations
    throughout send fp8 both ways."""
    argv = ["serving", "--model", "qwen3-235b-a22b", "--ep", "--tp", "8", "--concurrency", "8", "--requests", "16"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["expert_parallel"] is True
    assert main([*argv, "--dtype", "int8"]) == 0
    out = capsys.readouterr().out
    assert "send bf16 both ways: an int8 dispatch is not modelled" in out and "DeepEP's fp8 dispatch under W8A8" not in out
    assert main([*argv, "--activations", "fp8"]) == 0
    assert "all-to-alls send the activations' fp8 both ways" in capsys.readouterr().out


def test_a_splits_answer_is_checked_by_a_longer_run_as_the_co_located_one_is(step):
    """--disagg-search compared a split's short-run answer with a co-located answer checked by a run
    4x longer (2:2 on 4 H100s read 18.3 requests/s, 17.4 once checked): each split's best rate now
    meets the targets in a run of checked_requests too."""
    from roofline.serving import best_disaggregation, simulate_disaggregated
    from roofline.serving.search import CHECK_FACTOR

    found = best_disaggregation(step, 2, 1024, 128, ttft_s=0.5, tpot_s=0.02, requests=100)
    assert found["checked_requests"] == CHECK_FACTOR * 100 * 2
    p, d, rate = found["best"]
    long = simulate_disaggregated(step, step, poisson_requests(rate, found["checked_requests"], 1024, 128), prefill_replicas=p,
                                  decode_replicas=d)
    assert meets_slo(long, found["slo"])


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


def test_serving_request_overhead_flag_adds_to_each_ttft(capsys):
    """--request-overhead 20ms, one user: each TTFT is 20 ms longer than without (hand arithmetic: a lone
    request waits for nothing else); a negative time is refused by name, exit 2."""
    argv = ["serving", "--concurrency", "1", "--requests", "2", "--input-len", "256", "--output-len", "4", "--json"]
    assert main(argv) == 0
    base = json.loads(capsys.readouterr().out)
    assert main(argv + ["--request-overhead", "20ms"]) == 0
    more = json.loads(capsys.readouterr().out)
    assert more["engine"]["request_overhead_s"] == pytest.approx(0.02)
    assert more["ttft_mean_s"] == pytest.approx(base["ttft_mean_s"] + 0.02, rel=1e-9)
    assert main(argv + ["--request-overhead", "-5ms"]) == 2
    err = capsys.readouterr().err
    assert "--request-overhead" in err and "Traceback" not in err


@pytest.mark.slow
def test_the_parallelism_search_finds_the_size_needing_the_fewest_gpus(capsys):
    """--tp-search 1,2,4 --target-rate 30: each size's rate is the SLO search's at that --tp (the same
    search run alone), its replicas ceil(30 / rate) and GPUs replicas x size (hand arithmetic), the
    best the fewest GPUs; a size the model cannot split is refused by name, not dropped."""
    from roofline.serving import max_rate_within

    argv = ["serving", "--model", "llama3-8b", "--slo-ttft", "500ms", "--slo-tpot", "20ms", "--requests", "200"]
    assert main([*argv, "--tp-search", "1,2,3", "--target-rate", "30", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    one, two, three = d["sizes"]
    assert three["refused"] and "must divide" in three["refused"]
    alone = max_rate_within(StepCost("llama3-8b", "h100-sxm", tensor_parallel=2, cost_model=dataclasses.replace(
        seed_cost_model(), cuda_graph=True)), 1024, 256, 0.5, 0.02, requests=200)
    assert two["rate_per_s"] == pytest.approx(alone.slo["best"], rel=1e-12)
    for r in (one, two):
        assert r["replicas"] == math.ceil(30 / r["rate_per_s"]) and r["gpus"] == r["replicas"] * r["gpus_per_replica"]
    best = d["sizes"][d["best_index"]]
    assert best["gpus"] == min(one["gpus"], two["gpus"]) and d["best"] == best["gpus_per_replica"]
    assert d["arrivals"] == "poisson" and d["requests"] == 200 and d["checked_requests"] == 800
    assert d["engine"]["step_overhead_s"] == 0.0
    assert main([*argv, "--tp-search", "1,2", "--rate", "5"]) == 2
    assert "--rate would be ignored" in capsys.readouterr().err
    assert main(["serving", "--tp-search", "1,2", "--concurrency", "4"]) == 2
    assert "--tp-search S1,S2,... compares replica sizes by the SLO rate search" in capsys.readouterr().err
    # expert-parallel sizes from the CLI (the default --tp 1 is no EP group: it is not built first), a price at the target
    assert main(["serving", "--model", "qwen3-235b-a22b", "--dtype", "fp8", "--ep", "--tp-search", "8", "--slo-ttft", "1s",
                 "--requests", "100", "--target-rate", "10", "--price", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    row = d["sizes"][0]
    assert d["expert_parallel"] is True and row["rate_per_s"] is not None
    # 2 $/GPU-hour x the row's GPUs over the target's output tokens (10 requests/s x 256 tokens) a second, per million
    assert row["cost_at_target_per_million_output_tokens"] == pytest.approx(2 * row["gpus"] / 3600 / (10 * 256) * 1e6)


def test_a_search_whose_longer_runs_refuse_every_step_down_still_answers():
    """Qwen3 235B-A22B fp8 on 8 H100s (EP), a 1 s TTFT, 100 requests a run: the short search's
    answer (~42/s, at the 42.7/s capacity) and every 5% step down missed in the 400-request runs,
    and eight such steps ended in no answer, which read as 'a target below what a request alone
    takes' though the lightest load's TTFT p90 is 55 ms. The check now bisects with longer runs: an
    answer that a longer run meets, below every rate a longer run refused."""
    from roofline.machines import get_machine
    from roofline.plan.precision import Precision

    m = get_machine("h100-sxm")
    ep8 = StepCost("qwen3-235b-a22b", m, Precision.resolve("qwen3-235b-a22b", m, "fp8"), 8,
                   cost_model=dataclasses.replace(seed_cost_model(), cuda_graph=True), expert_parallel=True)
    sw = max_rate_within(ep8, 1024, 256, ttft_s=1.0, requests=100)
    best = sw.slo["best"]
    assert best is not None and len(sw.slo["failed_checks"]) >= 2
    shown = sw.results[sw.values.index(best)]
    assert shown.requests == 400 and meets_slo(shown, sw.slo) and best < min(sw.slo["failed_checks"])


def test_the_spread_note_says_what_the_seeds_draw(tmp_path, capsys):
    """Seeds draw Poisson arrivals and lengths from a range; a lengths file's rows are taken in
    order, so with a file at a rate only the arrivals are drawn."""
    f = tmp_path / "lengths.csv"
    f.write_text("input,output\n100,20\n2000,300\n500,50\n")
    for argv, drawn in ((["--lengths", str(f), "--requests", "60", "--rate", "5"], "arrivals,"),
                        (["--rate", "5", "--requests", "60", "--input-len", "100-900"], "arrivals and lengths,"),
                        (["--concurrency", "4", "--requests", "40", "--input-len", "100-900"], "lengths,")):
        assert main(["serving", *argv]) == 0
        assert f"seed spread: over seeds 0-2 of these {drawn}" in capsys.readouterr().out


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
                              "step_overhead_s", "chunked_prefill", "mixed_steps"} and all(p.sources.values())
    assert e.label.startswith("engine: ") and e.preset == engine


def test_serving_engine_flag_takes_the_defaults_and_a_given_flag_wins(capsys):
    argv = ["serving", "--concurrency", "4", "--requests", "8", "--input-len", "512", "--output-len", "32", "--seeds", "1",
            "--engine", "trtllm", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    text = json.dumps(out)
    assert "TensorRT-LLM" in text and "whole prompts" in text
    assert main(argv[:-1] + ["--max-seqs", "8"]) == 0
    assert "at most 8 sequences" in capsys.readouterr().out
    assert main(argv[:-1] + ["--input-len", "9000"]) == 2
    err = capsys.readouterr().err
    assert "without chunked prefill" in err and "9,000" in err and "Traceback" not in err
    assert main(["serving", "--engine", "tgi"]) == 2
    assert "unknown engine 'tgi'" in capsys.readouterr().err


def test_an_nvidia_only_engine_on_another_vendors_gpu_is_refused(capsys):
    assert main(["serving", "--machine", "mi300x", "--engine", "trtllm", "--concurrency", "2", "--requests", "4"]) == 2
    err = capsys.readouterr().err
    assert "trtllm runs on NVIDIA GPUs only" in err and "Traceback" not in err


def test_the_breakdown_of_a_run_with_long_prompts_keeps_to_the_step_budget(capsys):
    """9,000-token prompts are chunked under an 8,192 budget: the breakdown's mean prompt step stays
    within it (its mean chunk and decodes could round past it together)."""
    assert main(["serving", "--concurrency", "16", "--input-len", "9000", "--output-len", "128", "--seeds", "1",
                 "--requests", "100", "--breakdown"]) == 0
    assert "a step with a prompt chunk" in capsys.readouterr().out


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

