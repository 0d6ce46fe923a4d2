"""Gated DeltaNet priced from the engines' measured GDN kernels (linear_attention/<engine>/<version>/
gdn_perf.parquet: issue 35's measured kernels, Qwen3.5). The expected values are read from the installed
parquet files here with pyarrow, independently of roofline.measured; nothing is pasted from its output."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")
pytest.importorskip("aiconfigurator_core", reason="the measured extra: pip install 'roofline[measured]'")

from roofline.machines import get_machine  # noqa: E402
from roofline.measured.model import MeasuredKernels  # noqa: E402
from roofline.mixers import GatedDeltaNet  # noqa: E402

# Qwen3.5-397B-A17B's linear attention (its config.json: linear_num_key_heads 16, linear_num_value_heads 64,
# linear_key_head_dim 128, linear_value_head_dim 128, linear_conv_kernel_dim 4); on 8 GPUs 2 key and 8 value heads each
QWEN35_GDN_TP8 = GatedDeltaNet(k_heads=2, v_heads=8, k_head_dim=128, v_head_dim=128, conv_kernel=4, split_projections=True)


def _rows(gpu: str, engine: str, version: str, **match) -> list[dict]:
    import importlib.util

    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0]) / "systems" / "data"
    rows = pa.read_table(root / gpu / "linear_attention" / engine / version / "gdn_perf.parquet").to_pylist()
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


def _ops(g: GatedDeltaNet, B, T, decode: bool, D: int = 4096) -> dict:
    from roofline.blocks import layer_kernels
    from roofline.architecture import Layer

    layer = Layer(mixer=g, mlp=None)
    return {k.name: k for k in layer_kernels(layer, D, decode, T, B, T if not decode else 4096, "flash", "bf16")}


def _one(rows: list[dict], source: str) -> float:
    got = [r["latency"] for r in rows if source in r["kernel_source"]]
    assert len(got) == 1
    return got[0] * 1e-3  # the table's latency is in ms (tables.py)


def test_a_prefill_on_the_measured_grid_comes_back_at_its_measured_latency():
    """An 8,192-token prompt on one H200 under SGLang 0.5.14, Qwen3.5-397B's 2 key / 8 value heads a GPU (of
    16 and 64 over 8 GPUs; hidden_size 4096): the conv is the causal_conv1d_fn row and the rule the
    chunk_gated_delta_rule row (batch 1, seq_len 8192, d_model 4096), each plus the 3 us launch."""
    rows = _rows("h200_sxm", "sglang", "0.5.14", phase="context", batch_size=1, seq_len=8192, num_k_heads=2,
                 num_v_heads=8, head_k_dim=128, head_v_dim=128, d_conv=4, d_model=4096)
    m = get_machine("h200")
    cm = MeasuredKernels.for_machine(m, "sglang")
    ops = _ops(QWEN35_GDN_TP8, 1, 8192, False)
    conv, rule = cm.predict_op(ops["conv1d"], m), cm.predict_op(ops["gated delta rule"], m)
    assert (conv.family, rule.family) == ("gdn", "gdn")
    assert (conv.basis, rule.basis) == ("measured", "measured")
    assert conv.time_s == pytest.approx(conv.launch_s + _one(rows, "causal_conv1d_fn"), rel=1e-9)
    assert rule.time_s == pytest.approx(rule.launch_s + _one(rows, "chunk_gated_delta_rule"), rel=1e-9)


def test_a_decode_step_comes_back_at_the_generation_rows():
    """16 sequences decoding on 8 H200s under SGLang: 45 of Qwen3.5-397B's 60 layers are Gated DeltaNet
    (full_attention_interval 4: 60 x 3/4), each running causal_conv1d_update and the fused recurrent rule
    of the generation rows at batch 16, inside the step's CUDA graph (no launch apiece)."""
    from roofline.plan.step import StepCost

    rows = _rows("h200_sxm", "sglang", "0.5.14", phase="generation", batch_size=16, num_k_heads=2, num_v_heads=8,
                 d_model=4096)
    m = get_machine("h200")
    cm = dataclasses.replace(MeasuredKernels.for_machine(m, "sglang"), cuda_graph=True)
    ops = {o.name: o for o in StepCost("qwen3.5-397b-a17b", m, tensor_parallel=8, cost_model=cm).ops([4096.0] * 16)}
    assert ops["A: conv1d (decode)"].time_s == pytest.approx(45 * _one(rows, "causal_conv1d_update"), rel=1e-6)
    assert ops["A: gated delta rule (decode)"].time_s == pytest.approx(45 * _one(rows, "gated_delta_rule"), rel=1e-6)


def test_between_measured_lengths_the_time_lies_between_theirs():
    """vLLM's H200 rows measure 4,096 and 8,192 tokens; 6,000 is read between them, said interpolated."""
    m = get_machine("h200")
    cm = MeasuredKernels.for_machine(m, "vllm")
    match = dict(phase="context", batch_size=1, num_k_heads=2, num_v_heads=8, d_model=4096,
                 kernel_source="chunk_gated_delta_rule_flashinfer")
    lo, hi = (_one(_rows("h200_sxm", "vllm", "0.24.0", seq_len=T, **match), "chunk") for T in (4096, 8192))
    p = cm.predict_op(_ops(QWEN35_GDN_TP8, 1, 6000, False)["gated delta rule"], m)
    assert p.basis == "interpolated"
    assert min(lo, hi) <= p.time_s - p.launch_s <= max(lo, hi)


def test_a_model_width_the_table_lacks_reads_the_nearest_and_says_so():
    """The kernels' shapes hold no d_model, but the tables key their rows by it: a model of width 3,500 with
    Qwen3.5's heads reads the rows of d_model 3,072 (Qwen3.5-122B's, the nearest in ratio to 3,500 of the
    3,072 and 4,096 measured with 2 key / 8 value heads) and its source says so."""
    m = get_machine("h200")
    cm = MeasuredKernels.for_machine(m, "sglang")
    rows = _rows("h200_sxm", "sglang", "0.5.14", phase="context", batch_size=1, seq_len=8192, num_k_heads=2,
                 num_v_heads=8, d_model=3072)
    p = cm.predict_op(_ops(QWEN35_GDN_TP8, 1, 8192, False, D=3500)["gated delta rule"], m)
    assert p.time_s == pytest.approx(p.launch_s + _one(rows, "chunk_gated_delta_rule"), rel=1e-9)
    assert "3,072" in p.source


def test_heads_the_table_lacks_keep_the_cost_model_and_say_why():
    """3 key heads a GPU: no row of them (the tables hold 1, 2, 4, 8 and 16); the ops keep the cost model,
    their source naming the heads."""
    m = get_machine("h200")
    cm = MeasuredKernels.for_machine(m, "vllm")
    g = GatedDeltaNet(k_heads=3, v_heads=12, k_head_dim=128, v_head_dim=128)
    p = cm.predict_op(_ops(g, 1, 8192, False)["gated delta rule"], m)
    assert (p.family, p.basis) == ("gdn", "cost model")
    assert "3 key" in p.source


def test_a_verify_step_keeps_the_cost_model():
    """A decode step of 4 tokens a sequence (speculative decoding's verify): the generation rows time one
    token a sequence, so the rule keeps the cost model."""
    m = get_machine("h200")
    cm = MeasuredKernels.for_machine(m, "sglang")
    p = cm.predict_op(_ops(QWEN35_GDN_TP8, 16, 4, True)["gated delta rule"], m)
    assert (p.family, p.basis) == ("gdn", "cost model")


def test_kimi_delta_attention_is_not_read_from_the_gdn_table():
    """KDA (gate_rank > 0) has its own kernels (kda_perf: tests/test_measured_linear.py): its ops are of the
    kda family, never the GDN table's."""
    kda = GatedDeltaNet(k_heads=2, v_heads=8, k_head_dim=128, v_head_dim=128, gate_rank=128)
    ops = _ops(kda, 1, 8192, False)
    assert MeasuredKernels.family_of(ops["gated delta rule"]) == "kda"


def test_serving_arrays_match_one_by_one():
    """A decode curve's batches read in one numpy pass price each size as a lookup of one does."""
    import numpy as np

    m = get_machine("b200")
    cm = MeasuredKernels.for_machine(m, "trtllm")
    g = GatedDeltaNet(k_heads=16, v_heads=64, k_head_dim=128, v_head_dim=128)
    B = np.array([1.0, 3.0, 64.0, 200.0])
    many = cm._measured_s(_ops(g, B, 1, True)["gated delta rule"], m)
    one = [cm._measured_s(_ops(g, float(b), 1, True)["gated delta rule"], m) for b in B]
    assert np.allclose(many, one, rtol=1e-9)


def test_a_chunk_after_a_prefix_keeps_the_measured_gdn_time():
    """Chunked prefill: 4,096 tokens after 4,096 cached run the same GDN kernels over 4,096 tokens (the prefix
    is in the state), so the chunk's conv and rule take the measured time of a 4,096-token prompt (the rows of
    seq_len 4096, batch 1, d_model 4096); its flash attention, which re-reads the prefix, has none (NaN: the
    context table measured prompts with no prefix)."""
    import math

    from roofline.plan.step import StepCost

    rows = _rows("h200_sxm", "sglang", "0.5.14", phase="context", batch_size=1, seq_len=4096, num_k_heads=2,
                 num_v_heads=8, d_model=4096)
    m = get_machine("h200")
    sc = StepCost("qwen3.5-397b-a17b", m, tensor_parallel=8, cost_model=MeasuredKernels.for_machine(m, "sglang"))
    after = {name: t for kind in sc._chunk_costs(4096, 4096) for *_, name, _, t in kind}
    assert after["A: conv1d"] == pytest.approx(_one(rows, "causal_conv1d_fn"), rel=1e-9)
    assert after["A: gated delta rule"] == pytest.approx(_one(rows, "chunk_gated_delta_rule"), rel=1e-9)
    assert math.isnan(after["B: flash attention"])
