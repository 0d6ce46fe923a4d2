"""GEMM tables read as the deployments run them (issue 35: Llama 3.1 70B fp8 on TensorRT-LLM priced slow at
decode). The expected values are read from the installed parquet files here with pyarrow, or written by hand;
nothing is pasted from roofline's output."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")
pytest.importorskip("aiconfigurator_core")


def _latency_s(gpu: str, engine: str, version: str) -> dict:
    """{(dtype, m, n, k): seconds} of one GEMM table (its latency column is in ms)."""
    import importlib.util

    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0])
    rows = pa.read_table(root / "systems" / "data" / gpu / "gemm" / engine / version / "gemm_perf.parquet",
                         columns=["gemm_dtype", "m", "n", "k", "latency"]).to_pylist()
    return {(r["gemm_dtype"], r["m"], r["n"], r["k"]): r["latency"] * 1e-3 for r in rows}


def _tiny_fp8_excess_s(table: dict) -> float:
    """The fp8 rows' time over the bf16 rows' at the shapes where a GEMM is its launch (m <= 16, n and k <= 256)."""
    return statistics.median(t - table[("bfloat16", m, n, k)] for (d, m, n, k), t in table.items()
                             if d == "fp8" and m <= 16 and n <= 256 and k <= 256 and ("bfloat16", m, n, k) in table)


def test_tensorrt_llm_fp8_rows_are_read_less_the_on_the_fly_input_quantisation():
    """TensorRT-LLM's collector times its fp8 Linear with no input_scale (the dynamic quantize_e4m3_per_tensor
    branch); an FP8 checkpoint's static scale does not run it. Llama 3.1 70B's down projection at decode on 4 H100s
    (m = 4 tokens, n = 8192, k = 28672 / 4 = 7168) comes back at its row less that fixed time per call."""
    from roofline.measured import gemm_time

    table = _latency_s("h100_sxm", "trtllm", "1.3.0rc20")
    excess = _tiny_fp8_excess_s(table)
    # the fastest tiny fp8 row 12.1 us against 2.5 us in bf16: some 9-10 us a call that is not the GEMM
    assert 8e-6 < excess < 11e-6
    e = gemm_time("h100-sxm", "trtllm", "fp8", 4, 8192, 7168)
    assert e.basis == "measured" and e.time_s == pytest.approx(table[("fp8", 4, 8192, 7168)] - excess, rel=1e-9)
    # 8192 x 7168 fp8 bytes = 58.7 MB read in what is left: under the H100's 3.35 TB/s, as a kernel must be
    assert 8192 * 7168 / e.time_s < 3.35e12
    # the bf16 rows are as measured
    b = gemm_time("h100-sxm", "trtllm", "bf16", 4, 8192, 7168)
    assert b.time_s == pytest.approx(table[("bfloat16", 4, 8192, 7168)], rel=1e-9)


def test_vllm_fp8_rows_stay_as_measured_since_its_fp8_deployments_quantise_on_the_fly():
    from roofline.measured import gemm_time

    table = _latency_s("h100_sxm", "vllm", "0.24.0")
    e = gemm_time("h100-sxm", "vllm", "fp8", 4, 8192, 7168)
    assert e.basis == "measured" and e.time_s == pytest.approx(table[("fp8", 4, 8192, 7168)], rel=1e-9)
    assert "less" not in e.source


def test_a_launch_sized_fp8_gemm_less_its_quantisation_costs_about_the_bf16_one():
    """At 1 x 32 x 32 (64 kFLOP, 2 kB) either GEMM is its launch: with the fixed quantising time taken out the fp8
    row is within 1.5 us of the bf16 row of the same shape, and above its roofline (2 x 32 x 32 / 1,979 TFLOP/s)."""
    from roofline.measured import gemm_time

    table = _latency_s("h100_sxm", "trtllm", "1.3.0rc20")
    e = gemm_time("h100-sxm", "trtllm", "fp8", 1, 32, 32)
    assert abs(e.time_s - table[("bfloat16", 1, 32, 32)]) < 1.5e-6
    assert e.time_s > 2 * 32 * 32 / 1979e12
