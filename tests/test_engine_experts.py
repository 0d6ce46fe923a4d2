"""An engine's own rule for the routed experts' matmul dtype (data/engines.toml experts_matmul, read by
serving.engines.engine_precision): one rule for `roofline serving --engine`, /api/serving and the validation.

Truth: TensorRT-LLM's MoE Support Matrix for gpt-oss (examples/models/core/gpt_oss/README.md,
https://github.com/NVIDIA/TensorRT-LLM/blob/main/examples/models/core/gpt_oss/README.md): MXFP4 expert weights take
bf16 activations on Hopper (TRITON, CUTLASS backends) and MXFP8 activations on Blackwell (CUTLASS, TRTLLM backends).
vLLM's default on SM100 is its FlashInfer MXFP4 x BF16 backend, MXFP8 opt-in (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1:
vllm/model_executor/layers/quantization/mxfp4.py, get_mxfp4_backend).
"""

from __future__ import annotations

import json

import pytest

from roofline.cli import main
from roofline.machines import get_machine
from roofline.plan import Precision
from roofline.serving.engines import engine_precision

# a tiny run: the precision, not the simulation, is under test
RUN = ["serving", "--model", "gpt-oss-120b", "--concurrency", "1", "--requests", "1", "--seeds", "1",
       "--input-len", "64", "--output-len", "4", "--json"]


def _precision(capsys, machine, engine, *flags):
    assert main([*RUN, "--machine", machine, "--engine", engine, *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_cli_runs_gpt_oss_experts_as_each_engine_does(capsys):
    """gpt-oss-120b as stored (MXFP4 experts): TensorRT-LLM on a B200 feeds them fp8 (MXFP8), on an H200 bf16;
    vLLM on a B200 bf16. The run's description says the experts' dtype and why."""
    b200 = _precision(capsys, "b200", "trtllm")
    assert b200["precision"]["experts_matmul"] == "fp8"
    assert b200["precision"]["weights_stored"][0]["part"] == "experts"
    assert b200["precision"]["weights_stored"][0]["matmul"] == "fp8"
    assert "routed experts' matmuls in fp8" in b200["description"]
    for machine, engine in (("h200", "trtllm"), ("b200", "vllm")):
        out = _precision(capsys, machine, engine)
        assert "experts_matmul" not in out["precision"], (machine, engine)
        assert out["precision"]["weights_stored"][0]["matmul"] == "bf16", (machine, engine)


def test_a_dtype_flag_wins_over_the_engines_rule(capsys):
    """--dtype fp8 sets the checkpoint's storage aside (W8A8 everywhere), and with it the rule for its MXFP4 experts;
    so does --dtype bf16 (on two GPUs: 117B parameters x 2 B do not leave a B200 room for a cache)."""
    out = _precision(capsys, "b200", "trtllm", "--dtype", "fp8")
    assert "experts_matmul" not in out["precision"] and out["precision"]["compute"] == "fp8"
    out = _precision(capsys, "b200", "trtllm", "--dtype", "bf16", "--tp", "2")
    assert "experts_matmul" not in out["precision"] and out["precision"]["compute"] == "bf16"


@pytest.mark.parametrize("machine, engine, expected", [
    ("b200", "trtllm", "fp8"), ("gb200", "trtllm@1.3.0rc20", "fp8"), ("b300", "trtllm", "fp8"),
    ("h200", "trtllm", "bf16"), ("h100-sxm", "trtllm", "bf16"),
    ("b200", "vllm", "bf16"), ("b200", "", "bf16")])
def test_the_rule_reads_the_machine_and_the_engine(machine, engine, expected):
    """Blackwell presets (an fp4 peak) under TensorRT-LLM: fp8 experts; Hopper, another engine or none: bf16."""
    m = get_machine(machine)
    precision = engine_precision(Precision.resolve("gpt-oss-120b", m), engine, m)
    assert precision.compute_for("experts") == expected
    assert precision.compute_for("attention") == "bf16"  # the rest of the checkpoint stays bf16


def test_a_checkpoint_without_mxfp4_experts_is_left_as_it_is():
    """A bf16 model (no stored parts) and a uniform --dtype precision: nothing for the rule to read."""
    m = get_machine("b200")
    for precision in (Precision.resolve("qwen3-30b-a3b", m), Precision.uniform("fp8", m)):
        assert engine_precision(precision, "trtllm", m) is precision


def test_the_web_serving_view_runs_the_clis_rule(client):
    """/api/serving with engine=trtllm on a B200 prices the experts as the CLI does: fp8."""
    pytest.importorskip("fastapi")
    params = {"model": "gpt-oss-120b", "machine": "b200", "engine": "trtllm", "max_users": 1, "input_len": 64,
              "output_len": 4}
    body = client.get("/api/serving", params=params).json()
    assert "routed experts' matmuls in fp8" in body["description"], body.get("detail", body)
    body = client.get("/api/serving", params={**params, "machine": "h200"}).json()
    assert "routed experts' matmuls" not in body["description"]


def test_decode_on_an_engines_kernels_runs_its_moe_activations():
    # `roofline decode --kernels trtllm` on a B200 prices gpt-oss's MXFP4 experts as TensorRT-LLM runs them on
    # Blackwell (MXFP8 activations: NVIDIA/TensorRT-LLM examples/models/core/gpt_oss/README.md, "MoE Support Matrix"),
    # the same rule as `roofline serving --engine trtllm`; on an H200 they stay bf16
    pytest.importorskip("aiconfigurator_core")
    import json
    import subprocess
    import sys

    def experts(machine):
        out = subprocess.run([sys.executable, "-m", "roofline", "decode", "--model", "gpt-oss-120b", "--machine", machine,
                              "--kernels", "trtllm", "--batch", "8", "--json"], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["precision"].get("experts_matmul")

    assert experts("b200") == "fp8"
    assert experts("h200") is None


def test_an_engine_without_a_rule_says_why_its_experts_run_weight_only(capsys):
    """vLLM on a B200 (its default MXFP4 x BF16 backend, above): the header says the experts' inputs stay bf16 and
    that no engine rule of the file quantises them, not the bare dtype."""
    run = [a for a in RUN if a != "--json"]
    assert main([*run, "--machine", "b200", "--engine", "vllm"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "experts weights dequantised into bf16 matmuls (weight-only: their inputs stay bf16" in head
