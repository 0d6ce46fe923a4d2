"""`--engine` and the kernels it prices with: a user's machine file transferred from the nearest measured
GPU (marked so, in typed fields), or the cost model said; the transferred header naming only the model's
ops; `@VERSION` refusals with the hint that runs; `machines --measured` listing the versions --engine takes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiconfigurator_core")

from roofline.cli import main  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402
from roofline.machines import get_machine  # noqa: E402
from roofline.measured.model import MeasuredKernels, engine_kernels, nearest_measured  # noqa: E402

# A user's GPU: 900 TFLOP/s bf16 over 3.0 TB/s, a ridge point of 900e12 / 3.0e12 = 300 FLOP/B; the H100 SXM's is
# 989e12 / 3.35e12 = 295 (within 20%), the B200's 2,250e12 / 7.7e12 = 292 but 2.5x the peak: the H100 is nearest.
MINE = """
[sources]
ME = "my own measurement"
[machines.mine]
name = "My GPU"
vendor = "NVIDIA"
memory_bytes = { value = 80e9, source = "ME" }
memory_bytes_per_s = { value = %g, source = "ME" }
launch_overhead_s = { value = 3e-6, source = "ME" }
[machines.mine.peak_flops_per_s]
bf16 = { value = 900e12, source = "ME" }
"""
SERVING = ["serving", "--model", "llama3.1-8b", "--engine", "vllm", "--concurrency", "4", "--requests", "8",
           "--seeds", "1", "--input-len", "256", "--output-len", "32"]


def _machine_file(tmp_path, bandwidth=3.0e12):
    path = tmp_path / "mine.toml"
    path.write_text(MINE % bandwidth)
    return str(path)


def _json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_users_machine_file_takes_the_nearest_measured_gpus_kernels_marked_transferred(tmp_path, capsys):
    path = _machine_file(tmp_path)
    near, why = nearest_measured(get_machine(path), "vllm")
    assert near == "h100-sxm" and "295" in why and "300" in why  # the two ridge points, by hand above
    cm = MeasuredKernels.for_machine(get_machine(path), "vllm")
    assert cm.measured_on == "h100-sxm"
    out = _json(capsys, *SERVING, "--machine", path)
    assert out["kernels"] == "vllm" and out["kernels_transferred_from"] == "h100-sxm"
    assert "h100_sxm" in out["kernels_source"]


def test_a_machine_file_near_no_measured_gpu_prices_on_the_cost_model_and_says_so(tmp_path, capsys):
    # 900e12 / 0.5e12 = 1,800 FLOP/B: no measured GPU within 20% (the L40S's 419 is the highest)
    path = _machine_file(tmp_path, bandwidth=0.5e12)
    near, why = nearest_measured(get_machine(path), "vllm")
    assert near is None and "1,800" in why
    kernels, note = engine_kernels("vllm", get_machine(path))
    assert kernels is None and note
    out = _json(capsys, *SERVING, "--machine", path)
    assert out["kernels"] is None and out["kernels_transferred_from"] is None
    assert note in out["notes"]


def test_a_preset_with_its_own_tables_is_not_transferred(capsys):
    out = _json(capsys, *SERVING, "--machine", "h100-sxm")
    assert out["kernels"] == "vllm" and out["kernels_transferred_from"] is None


def test_the_transferred_header_names_only_the_ops_the_model_has():
    """Llama 3 8B on an MI355X (transferred from the GB200): matmuls and fused attention, no experts or DeltaNet."""
    from roofline.transformer import get_model

    cm = MeasuredKernels.for_machine(get_machine("mi355x"), "vllm")
    assert cm.measured_on == "gb200"
    dense = cm.priced_by(get_model("llama3.1-8b"), 1)
    assert dense.startswith("matmuls and fused attention at the efficiencies")
    assert "routed experts" not in dense and "DeltaNet" not in dense and "Mamba" not in dense
    assert cm.priced_by(get_model("qwen3-30b-a3b"), 1).startswith("matmuls, fused attention and routed experts at")


@pytest.mark.parametrize("engine", ["vllm@0.12.0", "sglang@0.5.16"])
def test_an_engine_version_without_tables_is_refused_with_the_flag_that_runs_it(engine, capsys):
    with pytest.raises(RooflineError) as exc:
        engine_kernels(engine, get_machine("h100-sxm"))
    assert f"--kernels {engine.partition('@')[0]}" in str(exc.value) and exc.value.field == "engine"
    assert main([*SERVING[:3], "--engine", engine, *SERVING[5:], "--machine", "h100-sxm"]) == 2
    assert main([*SERVING[:3], "--engine", engine, *SERVING[5:], "--machine", "h100-sxm", "--kernels",
                 engine.partition("@")[0]]) == 0


def test_machines_measured_lists_the_versions_the_engine_flag_takes(capsys):
    """Each listed selectable version resolves GEMM tables; sglang 0.5.16 on the H100 (other families only) is not one."""
    from roofline.measured.tables import resolve

    rows = _json(capsys, "machines", "--measured")
    h100 = next(r for r in rows if r["machine"] == "h100-sxm" and r["engine"] == "sglang")
    assert "0.5.16" in h100["versions"] and "0.5.16" not in h100["selectable_versions"]
    for r in rows:
        for v in r["selectable_versions"] if r["machine"] else ():
            assert resolve(r["machine"], f"{r['engine']}@{v}", "gemm").version == v


def test_a_refusal_names_the_flag_the_user_gave_not_the_engines_default(capsys):
    """TensorRT-LLM feeds a prompt whole: 16,000 tokens past its 8,192-token step is --input-len's when the user
    left --max-tokens to the engine, --max-tokens's when they gave it."""
    argv = ["serving", "--model", "llama3.1-8b", "--machine", "h100-sxm", "--engine", "trtllm", "--input-len", "16000",
            "--concurrency", "2", "--requests", "2", "--seeds", "1"]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("roofline: error: --input-len:")
    assert main([*argv, "--max-tokens", "8192"]) == 2
    assert capsys.readouterr().err.startswith("roofline: error: --max-tokens:")


def test_a_scaled_preset_takes_its_own_chips_kernels_on_the_scaled_roofline(capsys):
    """--compute-scale 1.5 on an H100 (ridge 1.5 x 295 = 443 FLOP/B, nearest the L40S's 419) still reads the H100's
    tables: the same chip, its roofline scaled; an MI300X's scaled, its counterpart's (the H200)."""
    out = _json(capsys, *SERVING, "--machine", "h100-sxm", "--compute-scale", "1.5")
    assert out["kernels_transferred_from"] == "h100-sxm"
    out = _json(capsys, *SERVING, "--machine", "mi300x", "--bandwidth-scale", "2")
    assert out["kernels_transferred_from"] == "h200"
