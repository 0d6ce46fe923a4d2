"""An engine's MoE backends kept apart in the measured MoE table (measured.moe.LANES), and the rows of DeepSeek-R1
in NVFP4 run as InferenceX deployed them (benchmarks/silicon_validation.py). Expected latencies are read from the
installed parquet file here with pyarrow, independently of roofline.measured."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

# DeepSeek-V3's routed experts on 8 GPUs, tensor-parallel (moe_tp 8, moe_ep 1): hidden 7,168, d_ff 2,048 (256 a GPU),
# top-8 of 256, NVFP4, TensorRT-LLM 1.3.0rc20's B200 table, balanced routing
SITE = dict(hidden_size=7168, inter_size=2048, topk=8, num_experts=256, moe_tp_size=8, moe_ep_size=1, moe_dtype="nvfp4",
            distribution="balanced")


def _latency_ms(kernel_source: str, tokens: int) -> float:
    import importlib.util

    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0])
    rows = pa.read_table(root / "systems" / "data" / "b200_sxm" / "moe" / "trtllm" / "1.3.0rc20" / "moe_perf.parquet",
                         filters=[("kernel_source", "=", kernel_source), ("num_tokens", "=", tokens)]).to_pylist()
    hits = [r["latency"] for r in rows if all(r[k] == v for k, v in SITE.items())]
    assert len(hits) == 1, hits
    return hits[0]


def _module_ms(backend: str, tokens: int) -> float:
    """The module's time as measured.moe reads it back: its roofline at the balanced count over the efficiency."""
    from roofline.machines import get_machine
    from roofline.measured.moe import module_roofline_s, moe_table

    eff, _, _, source = moe_table("b200", "trtllm").efficiency("fp4", "fp4", tokens, 7168, 256, 8, 256, backend)
    return float(module_roofline_s(get_machine("b200"), "nvfp4", tokens, 7168, 256, 8, 256)) / eff * 1e3, source


@pytest.mark.parametrize("tokens", [4, 64, 1024])
def test_each_moe_backend_reads_its_own_kernels_rows(tokens):
    """The CUTLASS backend's rows (the engine's default) and the TRTLLM backend's (trtllm-gen, labelled
    moe_torch_flow_min_latency) time the same site 3x apart; each backend reads back its own latency, where one
    grid of both had kept whichever row came first."""
    cutlass, trtllm = _latency_ms("moe_torch_flow_cutlass", tokens), _latency_ms("moe_torch_flow_min_latency", tokens)
    assert trtllm < cutlass / 2  # the two lanes are far apart: a mix-up cannot pass unseen
    got, source = _module_ms("", tokens)
    assert got == pytest.approx(cutlass, rel=1e-6) and "moe_torch_flow_cutlass" in source
    got, source = _module_ms("trtllm", tokens)
    assert got == pytest.approx(trtllm, rel=1e-6) and "moe_torch_flow_min_latency" in source
    assert _module_ms("TRTLLM", tokens)[0] == pytest.approx(trtllm, rel=1e-6)  # TensorRT-LLM's own spelling


def test_a_backend_the_site_lacks_reads_the_default_rows_and_says_so():
    from roofline.measured.moe import moe_table

    _, _, _, source = moe_table("b200", "trtllm").efficiency("fp8", "fp8_block", 4, 7168, 256, 8, 256, "trtllm")
    assert "deepgemm" in source and "trtllm MoE backend's kernels not measured at this site" in source


def test_measured_kernels_price_the_experts_on_the_backend_asked():
    """A decode step of DeepSeek-V3 in NVFP4 on 8 B200s, 4 sequences (4 tokens): the routed experts' time, the
    module's at the table's balanced count over its measured efficiency (4 x 8 = 32 experts touched, our routing
    31), is the CUTLASS rows' 87.5 us a layer against the TRTLLM backend's 25.2 us, so the ratio of the two runs'
    expert time is the ratio of the two latencies read here (the touched experts' share the same in both)."""
    import dataclasses

    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.plan import Precision
    from roofline.plan.step import StepCost

    m = get_machine("b200")
    base = MeasuredKernels.for_machine(m, "trtllm", launch_overhead_s=m.launch_overhead_s, cuda_graph=True)
    experts = {}
    for backend in ("", "trtllm"):
        step = StepCost("deepseek-v3", m, Precision.uniform("fp4", m), 8, None,
                        dataclasses.replace(base, moe_backend=backend), "flash", 8192, 64)
        experts[backend] = sum(op.time_s for op in step.ops([1024.0] * 4) if "expert" in op.name and "shared" not in op.name)
    want = _latency_ms("moe_torch_flow_cutlass", 4) / _latency_ms("moe_torch_flow_min_latency", 4)
    assert experts[""] / experts["trtllm"] == pytest.approx(want, rel=0.02)


def test_inferencex_scripts_moe_backend_by_condition():
    """dsr1_fp4_b200_trt_slurm.sh at 008b91a9d: MOE_BACKEND TRTLLM, CUTLASS at 1k/1k from 256 users."""
    import silicon_validation as sv

    row = {"model_path": "deepseek-ai/DeepSeek-R1", "backend": "trtllm", "system": "b200_sxm", "precision": "fp4",
           "isl": "1024", "osl": "1024", "mode": "agg",
           "silicon_data_source": "source_file=2026-04-06.csv; model=DeepSeek-R1; measured=2026-01-14T00:00:00Z"}
    assert sv._inferencex_date(row) == "2026-01-14"
    assert sv.inferencex_conditions(row, 8, 4, False).get("moe_backend") == "TRTLLM"
    assert sv.inferencex_conditions(row, 8, 256, False).get("moe_backend") == "CUTLASS"


def test_deepseek_nvfp4_rows_serve_the_exports_bf16_projections():
    """An fp4 DeepSeek-R1 row runs as NVIDIA's NVFP4 export stores it: MLA's q_a/q_b/kv_a projections in bf16 (its
    hf_quant_config.json's exclude_modules), the experts in fp4."""
    import silicon_validation as sv

    assert sv.layout({"model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "precision": "fp4", "tp_size": "8",
                      "attention_dp_size": "1", "pp_size": "1", "moe_tp_size": "8", "moe_ep_size": "1",
                      "backend": "trtllm"})[2] == sv.STORED
    step = sv._step("deepseek-v3", "b200", sv.STORED, 8, False, "", 64, 8192, False, "fp8", "trtllm")
    label = step.precision.label()
    assert "q_a_proj" in label and "bf16 in 61 of 61 layers" in label and "experts" in label


def test_gpt_oss_on_h200_ran_tritons_moe_which_the_report_says_no_table_times():
    """gptoss_fp4_h200_trt*.sh at e06929c, f6a9d0b and d8cc89778 write moe_config: backend: TRITON for every run; the
    H200 tables hold gpt-oss's MXFP4 module as CUTLASS's rows only (moe_torch_flow, w4a16_mxfp4: read here from the
    parquet file), so its rows read the default rows, and the report says so."""
    import silicon_validation as sv
    from roofline.measured.tables import data_root

    import importlib.util

    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0])
    for version in ("1.3.0rc10", "1.3.0rc20"):
        rows = pa.read_table(root / "systems" / "data" / "h200_sxm" / "moe" / "trtllm" / version / "moe_perf.parquet",
                             filters=[("hidden_size", "=", 2880), ("moe_dtype", "=", "w4a16_mxfp4")]).to_pylist()
        assert rows and {r["kernel_source"] for r in rows} == {"moe_torch_flow"}
    sample = [r for r in sv.read_rows(data_root().parent / "silicon_sample.csv") if r["model_path"] == "openai/gpt-oss-120b"
              and r["backend"] == "trtllm" and r["system"] == "h200_sxm" and sv.inferencex_deployment(r)]
    dates = {sv._inferencex_date(r) for r in sample}
    assert {"2025-11-02", "2025-12-15", "2026-01-28"} <= dates
    for r in sample:
        assert sv.inferencex_conditions(r, 1, 4, False).get("moe_backend") == "TRITON", r["id"]
    done = [{"moe_backend": "TRITON", "engine": "trtllm", "model": "gpt-oss-120b", "machine": "h200"}] * 3
    assert sv.moe_counts(done) == (" MoE backend TRITON for 3 rows (trtllm's moe_config.backend as the launch script sets "
                                   "it, gpt-oss-120b on h200): no table times its module; their experts read the default "
                                   "rows in its stead.")
    assert sv.moe_counts([{"moe_backend": "TRTLLM", "engine": "trtllm", "model": "deepseek-v3", "machine": "b200"}]) == ""
