"""The engine's host time per op outside a CUDA graph in the serving simulator (issue 35): Engine.eager_op_s, the
CLI's --eager-op. Engines capture decode batches in CUDA graphs only; a step with prompt chunks runs its ops one by
one, each dispatched by Python and the framework on the host, and where the GPU's kernels are short the GPU waits
for it. The simulator adds eager_op_s for each op run of such a step (StepCost.eager_ops), and for every step where
no CUDA graph is used at all.

Expected counts are by hand from Llama 3 8B's architecture (32 decoder layers): per layer the attention norm, the QKV
projection, attention, the output projection, the residual add, the FFN norm, the gate+up projection, SiLU x mul,
the down projection and the second residual add (10 ops), plus the embedding, the final norm and the LM head:
32 x 10 + 3 = 323 op runs in a step of prompt chunks alone."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.cli import main
from roofline.cost import seed_cost_model
from roofline.plan.step import StepCost
from roofline.serving import Engine, Requests, closed_requests, simulate

LLAMA3_8B_PROMPT_OPS = 32 * 10 + 3
HOST_S = 50e-6


@pytest.fixture(scope="module")
def graphed():
    """Llama 3 8B on an H100 with decode steps replayed as CUDA graphs."""
    return StepCost("llama3-8b", "h100-sxm", cost_model=seed_cost_model(cuda_graph=True), max_tokens=8192, max_seqs=256)


def _one(input_tokens: int, output_tokens: int) -> Requests:
    return Requests([input_tokens], [output_tokens], np.array([0.0]), None, label="one request")


def test_a_prompt_step_runs_each_op_of_each_layer_once(graphed):
    assert graphed.eager_ops(0, True) == LLAMA3_8B_PROMPT_OPS
    # decodes beside the prompt chunks share the attention call of each layer (one call for the mixed batch)
    assert graphed.eager_ops(8, True) == LLAMA3_8B_PROMPT_OPS
    assert graphed.eager_ops(4, False) == 0  # a decode-only step is one CUDA graph replay


def test_the_prompt_step_pays_the_host_time_per_op_and_the_graphed_decodes_do_not(graphed):
    """One request of 1,024 tokens in, 16 out, alone: its prompt step (which samples its first token) grows by
    323 x 50 us = 16.15 ms; its 15 decode steps, CUDA graphs, by nothing."""
    reqs = _one(1024, 16)
    base = simulate(graphed, reqs, Engine(max_tokens=8192))
    host = simulate(graphed, reqs, Engine(max_tokens=8192, eager_op_s=HOST_S))
    assert host.ttft_s[0] - base.ttft_s[0] == pytest.approx(LLAMA3_8B_PROMPT_OPS * HOST_S, rel=1e-9)
    assert host.e2e_s[0] - base.e2e_s[0] == pytest.approx(LLAMA3_8B_PROMPT_OPS * HOST_S, rel=1e-9)


def test_without_cuda_graphs_every_step_pays_it(step):
    """The eager step (no CUDA graph): the prompt step as above, and each of the 15 decode steps its own ops, the
    same 323 (32 x 9 token ops and the decode's attention per layer, with the embedding, final norm and LM head)."""
    reqs = _one(1024, 16)
    base = simulate(step, reqs, Engine(max_tokens=8192))
    host = simulate(step, reqs, Engine(max_tokens=8192, eager_op_s=HOST_S))
    assert step.eager_ops(1, False) == LLAMA3_8B_PROMPT_OPS
    assert host.e2e_s[0] - base.e2e_s[0] == pytest.approx(16 * LLAMA3_8B_PROMPT_OPS * HOST_S, rel=1e-9)


@pytest.mark.parametrize("graph", [True, False])
def test_the_stretched_run_is_the_step_by_step_one(step, graphed, graph):
    s = graphed if graph else step
    reqs = closed_requests(6, 36, (819, 1024), (100, 300), seed=3)
    engine = Engine(max_tokens=2048, eager_op_s=HOST_S, step_overhead_s=1e-3)
    fast, plain = simulate(s, reqs, engine), simulate(s, reqs, engine, stepwise=True)
    np.testing.assert_allclose(fast.ttft_s, plain.ttft_s, rtol=1e-9)
    np.testing.assert_allclose(fast.e2e_s, plain.e2e_s, rtol=1e-9)
    assert fast.steps == plain.steps


def test_the_run_says_it_and_the_breakdown_shows_it(capsys):
    code = main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--requests", "8",
                 "--eager-op", "50us", "--breakdown"])
    out = capsys.readouterr().out
    assert code == 0
    assert "50 µs of the engine's host time" in out and f"runs {LLAMA3_8B_PROMPT_OPS:,} ops" in out
    assert "engine host time, ops outside a CUDA graph" in out


@pytest.mark.parametrize("bad", ["-1us", "nan", "2ms", "abc"])
def test_a_bad_host_time_is_refused_by_name(bad, capsys):
    code = main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--eager-op", bad])
    assert code == 2
    assert "eager-op" in capsys.readouterr().err


@pytest.mark.parametrize("version, hidden", [("", True), ("0.19", True), ("0.14.0", True), ("0.13", False),
                                             ("0.12.0", False)])
def test_vllms_time_per_step_is_hidden_from_the_version_that_schedules_async(version, hidden):
    """vLLM v0.14.0's release notes: async scheduling on by default, overlapping the engine core's scheduling with the
    GPU's execution; before it the synchronous scheduler's time per step (the fitted figure of data/engines.toml). No
    version asked: the newest the file reads (async). The run says why where it is hidden."""
    from roofline.machines import get_machine
    from roofline.serving.engines import fitted_step_overhead_s, preset

    e = preset("vllm" + (f"@{version}" if version else ""), get_machine("h100-sxm")).engine()
    assert e.step_overhead_s == (0.0 if hidden else fitted_step_overhead_s("vllm"))
    assert ("async scheduling hides" in e.since_note) == hidden
    assert ("the synchronous scheduler's, fitted" in e.since_note) == (not hidden)
    given = preset("vllm@0.19", get_machine("h100-sxm")).engine(step_overhead_s=1e-3)
    assert given.step_overhead_s == 1e-3 and "step_overhead" not in given.since_note


@pytest.mark.parametrize("bad", ["vllm@abc", "sglang@x.y"])
def test_an_engine_version_that_is_not_numbers_is_refused(bad, capsys):
    code = main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--engine", bad,
                 "--kernels", "vllm"])
    assert code == 2
    assert "a version is numbers" in capsys.readouterr().err


def test_a_version_asked_is_named_and_one_outside_the_files_said():
    from roofline.machines import get_machine
    from roofline.serving.engines import preset

    m = get_machine("h100-sxm")
    assert "(as vllm@0.12)" in preset("vllm@0.12", m).engine().label
    assert "synchronous scheduler" in preset("vllm@0.12", m).engine().since_note
    assert "outside the versions these defaults were read for" in preset("vllm@0.8", m).engine().label


def test_a_decode_pool_admits_a_transferred_prompt_without_dispatching_it_op_by_op(graphed):
    """Disaggregated: the prompt's cache arrives at the decode pool, which feeds only the first token (a decode
    step, replayed as a CUDA graph): the host time per op changes the prefill pool's steps (the TTFT) and not the
    decode pool's (the time per output token)."""
    from roofline.serving import simulate_disaggregated

    reqs = closed_requests(4, 16, 1024, 64, seed=1)
    base = simulate_disaggregated(graphed, graphed, reqs, Engine(max_tokens=8192), Engine(max_tokens=8192))
    host = simulate_disaggregated(graphed, graphed, reqs, Engine(max_tokens=8192, eager_op_s=HOST_S),
                                  Engine(max_tokens=8192, eager_op_s=HOST_S))
    assert float(np.nanmean(host.ttft_s)) > float(np.nanmean(base.ttft_s))
    np.testing.assert_allclose(np.sort(host.tpot_s), np.sort(base.tpot_s), rtol=1e-9)


def test_a_small_mixed_step_replays_a_piecewise_cuda_graph(graphed):
    """vLLM V1 replays a step with prompt chunks of at most max_cudagraph_capture_size tokens as piecewise CUDA graphs
    (Engine.graph_tokens, --graph-tokens): the host launches each layer's attention and each graph piece between
    them, 32 x 2 + 1 = 65 ops for Llama 3 8B (the last piece holds the final norm and LM head); a larger step runs
    all 323 eagerly."""
    assert graphed.eager_ops(0, True, True, 512, 512) == 2 * 32 + 1
    assert graphed.eager_ops(0, True, True, 513, 512) == LLAMA3_8B_PROMPT_OPS
    assert graphed.eager_ops(0, True, True, 256, 0) == LLAMA3_8B_PROMPT_OPS  # no piecewise graphs: every op
    # one request of 256 tokens: its prompt step of 256 tokens pays 65 x 50 us, one of 1,024 (over 512) 323 x 50 us
    for prompt, ops in ((256, 2 * 32 + 1), (1024, LLAMA3_8B_PROMPT_OPS)):
        reqs = _one(prompt, 16)
        base = simulate(graphed, reqs, Engine(max_tokens=8192, graph_tokens=512))
        host = simulate(graphed, reqs, Engine(max_tokens=8192, eager_op_s=HOST_S, graph_tokens=512))
        assert host.ttft_s[0] - base.ttft_s[0] == pytest.approx(ops * HOST_S, rel=1e-9)


def test_graph_tokens_is_a_flag_and_a_declared_range(capsys):
    from roofline.errors import RooflineError

    with pytest.raises(RooflineError, match="graph_tokens"):
        Engine(graph_tokens=-1)
    assert main(["serving", "--graph-tokens", "-5"]) == 2
    assert "--graph-tokens" in capsys.readouterr().err


def test_vllms_capture_size_follows_its_max_num_seqs():
    # vLLM's default max_cudagraph_capture_size is min(2 x max_num_seqs, 512) (at most max_num_batched_tokens): 512 at
    # its default 1,024 sequences on an H100, 16 at --max-seqs 8; the engine's note says the figure the run took
    from roofline.machines import get_machine
    from roofline.serving.engines import preset

    p = preset("vllm", get_machine("h100-sxm"))
    assert p.engine().graph_tokens == 512
    small = p.engine(max_seqs=8)
    assert small.graph_tokens == 16 and "graph_tokens 16" in small.label
    assert p.engine(max_seqs=8, graph_tokens=2048).graph_tokens == 2048  # --graph-tokens wins
    # with speculation each decode verifies 1 + k tokens: min(2 x 8 x 4, 512) = 64 at --spec-tokens 3
    assert p.engine(max_seqs=8, spec_tokens=3, acceptance=0.7).graph_tokens == 64
