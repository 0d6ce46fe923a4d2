"""Kimi Delta Attention and Mamba-2's conv priced from the engines' measured kernels (kda/<engine>/<version>/
kda_perf.parquet, linear_attention/trtllm/<version>/mamba2_perf.parquet: issue 35's measured kernels). The
expected values are read from the installed parquet files here with pyarrow, independently of
roofline.measured; nothing is pasted from its output."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")
pytest.importorskip("aiconfigurator_core", reason="the measured extra: pip install 'roofline[measured]'")

from roofline.architecture import Layer  # noqa: E402
from roofline.blocks import layer_kernels  # noqa: E402
from roofline.cost import CostModel  # noqa: E402
from roofline.machines import get_machine  # noqa: E402
from roofline.measured.model import MeasuredKernels  # noqa: E402
from roofline.mixers import GatedDeltaNet, Mamba2  # noqa: E402


def kda(heads: int) -> GatedDeltaNet:
    """A KDA layer of ``heads`` heads of 128 on one GPU, conv 4 (Kimi Linear's linear_attn_config: num_heads 32,
    head_dim 128, short_conv_kernel_size 4; Kimi K3's, whose rows the tables hold: 96 over 1 to 8 GPUs)."""
    return GatedDeltaNet(heads, heads, 128, 128, 4, gate_rank=128)


# Nemotron-H 8B's Mamba-2 (models.toml nemotron-h-8b: mamba_num_heads 128 x mamba_head_dim 64, n_groups 8,
# ssm_state_size 128, conv_kernel 4): 8,192 + 2 x 8 x 128 = 10,240 conv channels, as Nemotron 3 Super's (128 x 64,
# 8 groups of 128) whose rows the TensorRT-LLM tables hold, at the same hidden_size 4,096
NEMOTRON_H_8B = Mamba2(d_inner=8192, d_state=128, n_groups=8, heads=128)


def _root() -> Path:
    return Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0]) / "systems" / "data"


def _latency_s(path: str, **match) -> float:
    """The one row of ``path`` matching ``match``, its latency in seconds (the tables' ms)."""
    rows = [r for r in pa.read_table(_root() / path).to_pylist() if all(r[k] == v for k, v in match.items())]
    assert len(rows) == 1, (path, match, len(rows))
    return rows[0]["latency"] * 1e-3


def _ops(mixer, B, T, decode: bool, D: int) -> dict:
    layer = Layer(mixer=mixer, mlp=None)
    return {k.name: k for k in layer_kernels(layer, D, decode, T, B, T if not decode else 4096, "flash", "bf16")}


SGLANG_H100_KDA = "h100_sxm/kda/sglang/0.5.16/kda_perf.parquet"
TRTLLM_H100_MAMBA2 = "h100_sxm/linear_attention/trtllm/1.3.0rc20/mamba2_perf.parquet"


def test_a_kda_prefill_on_the_measured_grid_comes_back_at_its_measured_latency():
    """An 8,192-token prompt on one H100 under SGLang 0.5.16 with 24 KDA heads a GPU (Kimi K3's 96 over 4): the
    conv is the causal_conv1d_fn_qkv3 row and the rule the chunk_kda row (batch 1, seq_len 8192), each plus the
    launch; basis measured, family kda."""
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "sglang")
    ops = _ops(kda(24), 1, 8192, False, 7168)
    row = dict(phase="context", batch_size=1, seq_len=8192, num_k_heads=24)
    for name, source in (("conv1d", "causal_conv1d_fn_qkv3"), ("gated delta rule", "chunk_kda")):
        p = cm.predict_op(ops[name], m)
        assert (p.family, p.basis) == ("kda", "measured")
        assert p.time_s == pytest.approx(p.launch_s + _latency_s(SGLANG_H100_KDA, kernel_source=source, **row), rel=1e-9)


def test_kimi_linear_heads_between_the_measured_ones_land_between_their_times():
    """Kimi Linear's 32 heads a GPU (TP 1) lie between the 24 and 48 measured: 16 sequences decoding take a
    recurrent-rule time between those of the two rows at batch 16 (fused_recurrent_kda_packed_decode), said
    interpolated, from the rows of Kimi K3's d_model 7,168 (Kimi Linear's is 2,304), which its source names."""
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "sglang")
    lo, hi = (_latency_s(SGLANG_H100_KDA, kernel_source="fused_recurrent_kda_packed_decode", phase="generation",
                         batch_size=16, num_k_heads=h) for h in (24, 48))
    p = cm.predict_op(_ops(kda(32), 16, 1, True, 2304)["gated delta rule"], m)
    assert (p.family, p.basis) == ("kda", "interpolated")
    assert lo < p.time_s - p.launch_s < hi
    assert "7,168" in p.source


def test_heads_outside_the_measured_range_keep_the_cost_model_and_say_why():
    """Kimi Linear over 8 GPUs: 4 heads a GPU, under the 12 measured (Kimi K3's 96 over 8): not extrapolated; the
    rule keeps the cost model's time (the plate's, as without --kernels), its source naming the heads measured."""
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "vllm")
    op = _ops(kda(4), 1, 8192, False, 2304)["gated delta rule"]
    p = cm.predict_op(op, m)
    assert (p.family, p.basis) == ("kda", "cost model")
    assert p.time_s == pytest.approx(CostModel.predict_op(cm, op, m).time_s, rel=1e-12)
    assert "12 to 96 heads" in p.source


def test_an_engine_without_kda_tables_keeps_the_cost_model():
    """TensorRT-LLM measured no KDA kernels (kda/ holds vLLM and SGLang): Kimi Linear's conv and rule keep the
    cost model under --kernels trtllm, each op naming the engines that have them."""
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "trtllm")
    ops = _ops(kda(24), 1, 8192, False, 2304)
    for name in ("conv1d", "gated delta rule"):
        p = cm.predict_op(ops[name], m)
        assert (p.family, p.basis) == ("kda", "cost model")
        assert p.time_s == pytest.approx(CostModel.predict_op(cm, ops[name], m).time_s, rel=1e-12)
        assert "sglang, vllm" in p.source


def test_a_kda_verify_step_keeps_the_cost_model():
    """A decode step of 4 tokens a sequence (a speculative verify): the generation rows time one token."""
    m = get_machine("h100-sxm")
    p = MeasuredKernels.for_machine(m, "sglang").predict_op(_ops(kda(24), 16, 4, True, 7168)["gated delta rule"], m)
    assert (p.family, p.basis) == ("kda", "cost model")


def test_a_mamba2_prefill_conv_comes_back_at_its_measured_latency():
    """Nemotron-H 8B's conv (10,240 channels, Nemotron 3 Super's rows at d_model 4,096) over an 8,192-token
    prompt on an H100 under TensorRT-LLM 1.3.0rc20: the causal_conv1d_fn row at batch 1, seq_len 8192, plus the
    launch; the scan, which the tables did not measure, keeps the cost model."""
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "trtllm")
    ops = _ops(NEMOTRON_H_8B, 1, 8192, False, 4096)
    p = cm.predict_op(ops["conv1d"], m)
    assert (p.family, p.basis) == ("mamba2", "measured")
    row = _latency_s(TRTLLM_H100_MAMBA2, kernel_source="causal_conv1d_fn", batch_size=1, seq_len=8192, nheads=128,
                     d_model=4096)
    assert p.time_s == pytest.approx(p.launch_s + row, rel=1e-9)
    assert cm.predict_op(ops["ssm scan"], m).basis == "cost model"


def test_a_mamba2_decode_step_comes_back_at_the_generation_rows():
    """16 sequences decoding Nemotron-H 8B on one H100 under TensorRT-LLM, inside the step's CUDA graph (no launch
    apiece): its 24 Mamba-2 layers (hybrid_override_pattern's 24 M) each run causal_conv1d_update at batch 16."""
    from roofline.plan.step import StepCost

    m = get_machine("h100-sxm")
    cm = dataclasses.replace(MeasuredKernels.for_machine(m, "trtllm"), cuda_graph=True)
    ops = {o.name: o for o in StepCost("nemotron-h-8b", m, cost_model=cm).ops([4096.0] * 16)}
    row = _latency_s(TRTLLM_H100_MAMBA2, kernel_source="causal_conv1d_update", batch_size=16, nheads=128, d_model=4096)
    assert ops["A: conv1d (decode)"].time_s == pytest.approx(24 * row, rel=1e-6)


def test_channels_between_the_measured_ones_land_between_their_times():
    """Nemotron-H 8B's conv over 2 GPUs: 64 heads of 64 and 4 groups of 128, 4,096 + 1,024 = 5,120 channels, between
    the 1,536 and 6,144 measured: a decode of 64 sequences takes between those rows' times at batch 64 (the 6,144
    channels measured twice, Nemotron 3 Nano's and a generic shape's rows: their geometric mean)."""
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "trtllm")
    lo = _latency_s(TRTLLM_H100_MAMBA2, kernel_source="causal_conv1d_update", batch_size=64, nheads=16)
    hi = [_latency_s(TRTLLM_H100_MAMBA2, kernel_source="causal_conv1d_update", batch_size=64, nheads=64, d_model=d)
          for d in (2688, 8192)]
    p = cm.predict_op(_ops(Mamba2(d_inner=4096, d_state=128, n_groups=4, heads=64), 64, 1, True, 4096)["conv1d"], m)
    assert (p.family, p.basis) == ("mamba2", "interpolated")
    assert lo < p.time_s - p.launch_s < float(np.sqrt(hi[0] * hi[1]))


def test_an_engine_without_a_mamba2_table_keeps_the_cost_model():
    """vLLM measured no Mamba-2 kernels (mamba2_perf is TensorRT-LLM's alone): the conv keeps the cost model's time."""
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "vllm")
    op = _ops(NEMOTRON_H_8B, 1, 8192, False, 4096)["conv1d"]
    p = cm.predict_op(op, m)
    assert (p.family, p.basis) == ("mamba2", "cost model")
    assert p.time_s == pytest.approx(CostModel.predict_op(cm, op, m).time_s, rel=1e-12)
    assert "mamba2_perf" in p.source


@pytest.mark.parametrize("engine, mixer, D", [("sglang", kda(32), 2304), ("trtllm", NEMOTRON_H_8B, 4096)])
def test_serving_arrays_match_one_by_one(engine, mixer, D):
    """A decode curve's batches read in one numpy pass price each size as a lookup of one does."""
    m = get_machine("b200")
    cm = MeasuredKernels.for_machine(m, engine)
    B = np.array([1.0, 3.0, 64.0, 200.0])
    name = "conv1d" if isinstance(mixer, Mamba2) else "gated delta rule"
    many = cm._measured_s(_ops(mixer, B, 1, True, D)[name], m)
    one = [cm._measured_s(_ops(mixer, float(b), 1, True, D)[name], m) for b in B]
    assert np.allclose(many, one, rtol=1e-9)


def test_vllm_preview_prefill_conv_rows_are_not_read():
    """vLLM 0.1.dev19262's causal_conv1d_fn_qkv3 rows time a host-side metadata transfer in each call: on the H100
    its one-token row (24 heads) takes over 0.4 ms for a conv over 3 x 3,072 channels; the prefill conv keeps the
    cost model (its source says why) while the same table's rule (flashkda_fwd) and decode conv are read."""
    one_token = _latency_s("h100_sxm/kda/vllm/0.1.dev19262/kda_perf.parquet", kernel_source="causal_conv1d_fn_qkv3",
                           batch_size=1, seq_len=1, num_k_heads=24)
    assert one_token > 0.4e-3
    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "vllm")
    prefill = _ops(kda(24), 1, 4096, False, 7168)
    assert cm.predict_op(prefill["conv1d"], m).basis == "cost model"
    assert "0.1.dev19262" in cm.predict_op(prefill["conv1d"], m).source
    assert cm.predict_op(prefill["gated delta rule"], m).basis == "measured"
    assert cm.predict_op(_ops(kda(24), 16, 1, True, 7168)["conv1d"], m).basis == "measured"
