"""Measured kernel tables (issue 34, first step: the tables listed, GEMMs priced from them). The
expected values are read from the installed parquet files here with pyarrow, independently of
roofline.measured; nothing is pasted from its output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")

from roofline.cli import main  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402


def _data() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("aiconfigurator_core")
    assert spec is not None, "the measured extra is not installed: pip install 'roofline[measured]'"
    return Path(list(spec.submodule_search_locations)[0]) / "systems" / "data"


def _gemm_rows(gpu="h100_sxm", engine="trtllm", version="1.3.0rc20"):
    t = pa.read_table(_data() / gpu / "gemm" / engine / version / "gemm_perf.parquet").to_pylist()
    return t


def test_a_gemm_on_the_measured_grid_comes_back_at_its_measured_latency():
    """Rows of trtllm 1.3.0rc20's H100 table (the package's default trtllm version): the latency
    column is in ms (a bf16 8192^3 GEMM, 1.1e12 FLOPs, cannot run in 1.1 us or 1.1 s: ms it is)."""
    from roofline.measured import gemm_time

    rows = _gemm_rows()
    picks = [r for r in rows if r["gemm_dtype"] == "bfloat16" and (r["m"], r["n"], r["k"]) in
             {(8192, 8192, 8192), (1, 4096, 4096), (16, 12288, 4096)}]
    picks += [r for r in rows if r["gemm_dtype"] == "fp8" and (r["m"], r["n"], r["k"]) == (4096, 4096, 4096)]
    assert len(picks) == 4
    for r in picks:
        dtype = {"bfloat16": "bf16", "fp8": "fp8"}[r["gemm_dtype"]]
        e = gemm_time("h100-sxm", "trtllm", dtype, r["m"], r["n"], r["k"])
        assert e.basis == "measured" and e.points == 1
        assert e.time_s == pytest.approx(r["latency"] * 1e-3, rel=1e-9), r
        # the bound: 2 m n k at the datasheet's 989.4 TFLOP/s bf16 (1,979 fp8), or the bytes at 3.35 TB/s
        assert e.roofline_s <= e.time_s * 1.0001 and 0 < e.speed_of_light <= 1.0001
    big = next(r for r in picks if r["m"] == 8192)
    assert 2 * 8192**3 / (big["latency"] * 1e-3) < 989.4e12  # measured under the peak, in ms


def test_between_grid_points_the_time_lies_between_the_measured_neighbours():
    from roofline.measured import gemm_time

    rows = {(r["m"], r["n"], r["k"]): r["latency"] * 1e-3 for r in _gemm_rows() if r["gemm_dtype"] == "bfloat16"}
    lo, hi = rows[(2048, 4096, 4096)], rows[(4096, 4096, 4096)]
    e = gemm_time("h100-sxm", "trtllm", "bf16", 3000, 4096, 4096)
    assert e.basis == "interpolated" and e.points == 2 and lo < e.time_s < hi


def test_outside_the_measured_range_the_estimate_says_it_is_extrapolated():
    from roofline.measured import gemm_time

    m_max = max(r["m"] for r in _gemm_rows())
    e = gemm_time("h100-sxm", "trtllm", "bf16", 2 * m_max, 4096, 4096)
    assert e.basis == "extrapolated" and e.time_s > gemm_time("h100-sxm", "trtllm", "bf16", m_max, 4096, 4096).time_s


def test_a_gpu_engine_or_version_without_tables_is_refused_by_name_with_what_exists():
    from roofline.measured import gemm_time

    with pytest.raises(RooflineError, match=r"no measured kernel tables for mi300x: they exist for .*h100-sxm"):
        gemm_time("mi300x", "trtllm", "bf16", 1, 4096, 4096)
    with pytest.raises(RooflineError, match="unknown kernel engine 'tensorrt'"):
        gemm_time("h100-sxm", "tensorrt", "bf16", 1, 4096, 4096)
    with pytest.raises(RooflineError, match=r"no trtllm 9.9 gemm tables on h100-sxm; measured versions: .*1.3.0rc20"):
        gemm_time("h100-sxm", "trtllm@9.9", "bf16", 1, 4096, 4096)
    with pytest.raises(RooflineError, match="measured no fp4 GEMMs"):  # NVFP4 is Blackwell's
        gemm_time("h100-sxm", "trtllm", "fp4", 1, 4096, 4096)


def test_without_the_extra_the_reader_says_how_to_install_it(monkeypatch):
    import importlib.util

    from roofline.measured import tables

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == tables.PACKAGE else real(name, *a))
    with pytest.raises(RooflineError, match=r"pip install 'roofline\[measured\]'"):
        tables.data_root()


def test_machines_measured_lists_each_gpu_engine_and_family_with_its_points(capsys):
    assert main(["machines", "--measured", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    h100 = next(r for r in rows if r["machine"] == "h100-sxm" and r["engine"] == "trtllm")
    gemm_rows = pa.read_metadata(_data() / "h100_sxm" / "gemm" / "trtllm" / "1.3.0rc20" / "gemm_perf.parquet").num_rows
    assert h100["families"]["gemm"] == {"version": "1.3.0rc20", "points": gemm_rows}
    assert "1.3.0rc20" in h100["versions"]
    assert {r["machine"] for r in rows} >= {"h100-sxm", "h200", "b200"}
    assert main(["machines", "--measured"]) == 0
    assert "h100-sxm" in capsys.readouterr().out
