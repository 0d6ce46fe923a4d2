"""gpt-oss-120b's decode step as its engines run it (issue 35: TensorRT-LLM on an H200 predicted 2x too
fast): its checkpoint's MXFP4 experts priced on the engine's measured MXFP4 MoE module, a tensor-parallel
split the table measured only as expert parallelism read from those rows, and TensorRT-LLM on Blackwell
feeding the experts MXFP8. Expected times are the tables' own rows (aiconfigurator-core 0.12.0,
systems/data/<gpu>/moe/trtllm/1.3.0rc20/moe_perf.parquet, "balanced" routing, hidden 2,880, d_ff 2,880,
top-4 of 128: gpt-oss-120b's experts), quoted in the comments; skipped without the package."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from roofline.plan.precision import Precision

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import silicon_validation as sv  # noqa: E402


def gpt_oss_row(backend, system):
    # the columns layout() reads, as systems/silicon_sample.csv gives gpt-oss's rows (precision fp4, quant modes nvfp4)
    return {"id": "x", "silicon_data_source": "", "backend": backend, "model_path": "openai/gpt-oss-120b",
            "system": system, "precision": "fp4", "tp_size": "1", "pp_size": "1", "attention_dp_size": "1",
            "moe_tp_size": "1", "moe_ep_size": "1", "batch_size": "4"}


def test_gpt_oss_rows_are_served_as_the_checkpoint_stores_them():
    # the row's "fp4" is the checkpoint's own MXFP4 experts (bf16 the rest), not --dtype fp4 (NVFP4 everywhere);
    # TensorRT-LLM on Blackwell feeds the experts MXFP8 (its gpt_oss README's MoE support matrix), bf16 on Hopper:
    # the engine's rule (serving.engines.engine_precision), which _step applies as the CLI does
    for backend, system in (("trtllm", "h200_sxm"), ("vllm", "b200_sxm"), ("trtllm", "b200_sxm")):
        assert sv.layout(gpt_oss_row(backend, system))[2] == "as stored"
    experts = {(engine, machine): sv._step("gpt-oss-120b", machine, "as stored", 1, None, "", 256, 8192, False, "bf16",
                                           engine).precision.compute_for("experts")
               for engine, machine in (("trtllm", "h200"), ("vllm", "b200"), ("trtllm", "b200"))}
    assert experts == {("trtllm", "h200"): "bf16", ("vllm", "b200"): "bf16", ("trtllm", "b200"): "fp8"}
    other = {**gpt_oss_row("trtllm", "h200_sxm"), "model_path": "Qwen/Qwen3-32B"}
    assert sv.layout(other)[2] == "fp4"


def test_experts_matmul_sets_the_experts_compute_only():
    p = dataclasses.replace(Precision.as_stored("gpt-oss-120b"), experts_matmul="fp8")
    assert p.compute_for("experts") == "fp8"
    assert p.compute_for("attention") == "bf16" and p.compute == "bf16"
    assert Precision.as_stored("gpt-oss-120b").compute_for("experts") == "bf16"


def _module_us(machine, dtype, gpus, tokens=4):
    """The routed experts' seconds (gate+up and down, the activation fused) of one layer at ``tokens``, in us."""
    pytest.importorskip("aiconfigurator_core")
    step = sv._step("gpt-oss-120b", machine, dtype, gpus, None, "trtllm", 256, 8192, False, "bf16", "trtllm")
    kind = step._token_kinds[0][0]
    ks = step._token_kernels(kind, float(tokens), float(tokens))
    ops = [ks[n] for n in ("expert gate+up proj", "expert down proj")]
    preds = [step.cost_model.predict_op(k, step.machine, 0.0) for k in ops]
    assert all(p.basis != "cost model" for p in preds), [p.source for p in preds]
    return sum(p.time_s for p in preds) * 1e6, preds


def test_h200_tensorrt_llm_prices_gpt_oss_experts_on_its_mxfp4_module():
    # h200_sxm w4a16_mxfp4, moe_tp 1, moe_ep 1, 4 tokens: 0.1247 ms. Ours reads the module's efficiency at its 16
    # balanced experts and applies it to the 128 (1 - (1 - 4/128)^4) = 15.3 random routing touches: within 10%
    us, _ = _module_us("h200", "as stored", 1)
    assert us == pytest.approx(124.7, rel=0.10)


def test_a_tensor_parallel_split_measured_only_as_expert_parallel_reads_those_rows():
    # TensorRT-LLM's gpt-oss module on an H200 was measured at moe_tp 1 only; 8 GPUs each holding d_ff / 8 of every
    # expert do the FLOPs and read the bytes of 8 each holding 16 whole experts (balanced): the moe_ep 8 row,
    # 4 tokens: 0.0801 ms (the module's floor: 0.0726 ms at 1 token), not the 1/8 of moe_ep 1's 0.1247 ms a
    # bandwidth-bound rule gives
    us, _ = _module_us("h200", "as stored", 8)
    assert us == pytest.approx(80.1, rel=0.10)


def test_tensorrt_llm_on_blackwell_prices_the_mxfp8_lane():
    # b200_sxm moe_tp 1, moe_ep 1, 4 tokens: w4a8_mxfp4_mxfp8 0.0519 ms (w4a16_mxfp4 0.1808 ms)
    us, _ = _module_us("b200", "as stored", 1)
    assert us == pytest.approx(51.9, rel=0.10)
