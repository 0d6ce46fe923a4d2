"""The LM head in a serving step (issue 35): priced on a measured GEMM table at the rows that compute
logits, with its tensor-parallel (vocab-parallel) split, and one row per prompt chunk."""

import dataclasses

import numpy as np
import pytest

from roofline.hf_configs import from_hf_config

pytest.importorskip("aiconfigurator_core")
pa = pytest.importorskip("pyarrow.parquet")

# A Llama-shaped model whose LM head on 2 tensor-parallel GPUs is a GEMM of the H100 trtllm table's grid:
# vocab 131,072 / 2 = 65,536 columns, d_model 4,096 deep
WIDE_VOCAB = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 2,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072, "tie_word_embeddings": False}


def _gemm_latency_s(m, n, k):
    """The bf16 row (m, n, k) of aiconfigurator-core's trtllm 1.3.0rc20 H100 GEMM table, in seconds (its latency
    column is in ms)."""
    import os

    import aiconfigurator_core

    path = os.path.join(os.path.dirname(aiconfigurator_core.__file__), "systems", "data", "h100_sxm", "gemm", "trtllm",
                        "1.3.0rc20", "gemm_perf.parquet")
    rows = [r for r in pa.read_table(path).to_pylist()
            if r["gemm_dtype"] == "bfloat16" and (r["m"], r["n"], r["k"]) == (m, n, k)]
    assert len(rows) == 1
    return rows[0]["latency"] * 1e-3


def _step(**kw):
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.plan.step import StepCost

    m = get_machine("h100-sxm")
    cm = dataclasses.replace(MeasuredKernels.for_machine(m, "trtllm"), cuda_graph=True)
    return StepCost(from_hf_config(WIDE_VOCAB, "wide vocab"), m, cost_model=cm, tensor_parallel=2, **kw)


def test_the_lm_head_is_the_gemm_tables_row_at_its_rows_and_vocab_share():
    """16 decodes: the head is (16, 4,096) @ (4,096, 65,536) on each of the 2 GPUs (vocab-parallel), the table's
    row m 16, n 65,536, k 4,096 (inside the decode step's CUDA graph: no launch of its own); a step of one
    prompt chunk computes one row of logits: the row m 1; the simulator's tabulated step agrees with the op list."""
    step = _step()
    ops = {o.name: o for o in step.ops([4096.0] * 16)}
    assert ops["LM head"].time_s == pytest.approx(_gemm_latency_s(16, 65536, 4096), rel=1e-9)
    assert step.seconds([4096.0] * 16) == pytest.approx(sum(o.time_s for o in ops.values()), rel=1e-12)
    assert float(step.decode_steps_seconds(np.full(16, 4095.0), 1)[0]) == pytest.approx(step.seconds([4096.0] * 16),
                                                                                      rel=1e-12)
    eager = {o.name: o for o in step.ops((), [(1024, 0)])}  # a prompt step runs eagerly: the launch added
    assert eager["LM head"].time_s == pytest.approx(_gemm_latency_s(1, 65536, 4096) + step.cost_model.launch_overhead_s,
                                                    rel=1e-9)
    assert step.seconds((), [(1024, 0)]) == pytest.approx(sum(o.time_s for o in eager.values()), rel=1e-12)


def test_every_prompt_chunk_computes_a_row_of_logits_in_the_simulator():
    """One request of 3,000 prompt tokens under a budget of 1,024 a step: chunks of 1,024, 1,024 and 952, each
    step one row of logits (vLLM's gpu_model_runner: logits_indices = query_start_loc[1:] - 1 for every scheduled
    request, a partial prefill's too; SGLang's LogitsProcessor the last index of every extend), so each step is
    StepCost.seconds of its chunk with one sampled row, not none for the two partial chunks."""
    from roofline.serving import Engine, closed_requests, simulate

    step = _step(max_tokens=1024, max_seqs=8)
    r = simulate(step, closed_requests(1, 1, 3000, 1), Engine(max_tokens=1024, max_seqs=8))
    expected = [step.seconds((), [(1024, 0)], sampled=1), step.seconds((), [(1024, 1024)], sampled=1),
                step.seconds((), [(952, 2048)], sampled=1)]
    np.testing.assert_allclose(r.step_durations_s, expected, rtol=1e-12)
    assert step.seconds((), [(1024, 0)], sampled=0) < expected[0]  # the head's 0.5 GB of weights is read
