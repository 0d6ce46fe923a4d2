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
    # (TensorRT-LLM's fp8 rows come back less their input's quantisation: tests/test_measured_gemm.py)
    picks += [r for r in _gemm_rows(engine="vllm", version="0.24.0") if r["gemm_dtype"] == "fp8"
              and (r["m"], r["n"], r["k"]) == (4096, 4096, 4096)]
    assert len(picks) == 4
    for r in picks:
        dtype = {"bfloat16": "bf16", "fp8": "fp8"}[r["gemm_dtype"]]
        e = gemm_time("h100-sxm", "vllm" if dtype == "fp8" else "trtllm", dtype, r["m"], r["n"], r["k"])
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


def test_layer_with_kernels_gives_every_op_a_basis_and_a_measured_gemm_its_latency(capsys):
    """Llama 3 70B's QKV projection at a prefill of 8,192 tokens is an fp8 GEMM of m 8192, n (64 + 2 x 8)
    x 128 = 10,240, k 8192: a point of the H100 table, so its time is that row's latency plus the
    3 us launch (vLLM's: TensorRT-LLM's fp8 rows come back less their input's quantisation,
    tests/test_measured_gemm.py). The attention and the norms keep the cost model, and say so."""
    rows = {(r["m"], r["n"], r["k"]): r["latency"] * 1e-3 for r in _gemm_rows(engine="vllm", version="0.24.0")
            if r["gemm_dtype"] == "fp8"}
    code = main(["layer", "--model", "llama3-70b", "--machine", "h100-sxm", "--dtype", "fp8", "--kernels", "vllm",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["cost_model"] == "measured kernels" and out["kernels"] == "vllm"
    ops = {op["name"]: op for op in out["ops"]}
    assert all(op["basis"] in ("measured", "interpolated", "extrapolated", "cost model") for op in ops.values())
    qkv = ops["QKV proj"]
    assert qkv["basis"] == "measured" and qkv["source"] == "vllm 0.24.0 gemm_perf fp8 (h100_sxm)"
    assert qkv["time_s"] - qkv["launch_s"] == pytest.approx(rows[(8192, 10240, 8192)], rel=1e-9)
    assert 0 < qkv["speed_of_light"] <= 1 and qkv["roofline_s"] < qkv["time_s"]
    assert ops["attn norm"]["basis"] == "cost model" and "norm" in ops["attn norm"]["source"]
    assert sum(op["time_s"] for op in ops.values()) == pytest.approx(out["total_s"])


def test_layer_table_shows_each_ops_roofline_and_basis(capsys):
    assert main(["layer", "--kernels", "trtllm"]) == 0
    out = capsys.readouterr().out
    assert "from the measured kernels of trtllm 1.3.0rc20 on h100_sxm (aiconfigurator-core)" in out
    assert "roofline us" in out and "basis" in out
    qkv = next(line for line in out.splitlines() if line.startswith("QKV proj"))
    assert qkv.split()[-1] == "measured"


@pytest.mark.parametrize("argv, needle", [
    (["--machine", "v100"], "no measured kernel tables for v100: they exist for"),
    (["--machine", "mi300x"], "trtllm runs on NVIDIA GPUs only"),
    (["--kernels", "tensorrt"], "unknown kernel engine 'tensorrt'"),
    (["--kernels", "vllm@0.0.1"], "no vllm 0.0.1 gemm tables on h100-sxm; measured versions:"),
])
def test_layer_kernels_without_tables_is_one_line_naming_what_exists(capsys, argv, needle):
    args = ["layer", "--kernels", "trtllm", *argv]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_ops_outside_the_gemm_table_keep_the_cost_model_and_say_why():
    """A batched matmul (8 matrices: the GEMM table measured single ones), an fp16 matmul (no fp16
    rows) and an attention op (no attention family yet) are priced as the cost model prices them."""
    from roofline.cost import CostModel
    from roofline.kernels import Kernel
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels

    m = get_machine("h100-sxm")
    cm, plain = MeasuredKernels.for_machine(m, "trtllm"), CostModel()
    cases = [(Kernel("bmm", 2 * 8 * 64**3, 8 * 3 * 64 * 64 * 2, "matmul", "bf16", shape=(8, 64, 64, 64)), "batched matmul"),
             (Kernel("half", 2 * 64**3, 3 * 64 * 64 * 2, "matmul", "fp16", shape=(1, 64, 64, 64)), "no measured fp16"),
             (Kernel("qk", 2 * 64**3, 3 * 64 * 64 * 2, "attention", "bf16"), "unfused attention (QK^T, PV)")]
    for k, why in cases:
        got = cm.predict_op(k, m)
        assert got.basis == "cost model" and why in got.source and got.time_s == pytest.approx(plain.predict_op(k, m).time_s)


def _attention_rows(table):
    path = _data() / "h100_sxm" / "attention" / "trtllm" / "1.3.0rc20" / f"{table}.parquet"
    return pa.read_table(path).to_pylist()


@pytest.mark.parametrize("phase, argv, table, key", [
    # Llama 3 8B: 32 heads, 8 KV heads of 128, no window. Prefill of 8,192 tokens: the context row of
    # isl 8192, batch 1, bf16 attention and cache.
    ("prefill", ["--tokens", "8192"], "context_attention_perf",
     dict(batch_size=1, isl=8192, num_heads=32, num_key_value_heads=8, head_dim=128, window_size=0,
          attn_dtype="bfloat16", kv_cache_dtype="bfloat16")),
    # decode of 16 sequences over 4,096 cached tokens: the generation row of isl 1 + step 4095
    ("decode", ["--batch", "16", "--context", "4096"], "generation_attention_perf",
     dict(batch_size=16, isl=1, step=4095, num_heads=32, num_key_value_heads=8, head_dim=128, window_size=0,
          kv_cache_dtype="bfloat16")),
])
def test_a_fused_attention_on_the_measured_grid_comes_back_at_its_measured_latency(capsys, phase, argv, table, key):
    row = [r for r in _attention_rows(table) if all(r[k] == v for k, v in key.items())]
    assert len(row) == 1
    assert main(["layer", "--kernels", "trtllm", "--attention", "flash", "--phase", phase, *argv, "--json"]) == 0
    op = next(o for o in json.loads(capsys.readouterr().out)["ops"] if o["name"] == "flash attention")
    assert op["basis"] == "measured" and op["family"] == "attention" and table in op["source"]
    assert op["time_s"] - op["launch_s"] == pytest.approx(row[0]["latency"] * 1e-3, rel=1e-9)
    assert 0 < op["speed_of_light"] <= 1


def test_an_attention_the_tables_lack_keeps_the_cost_model_and_the_note_says_why(capsys):
    """Gemma 3's sliding layers attend within 1,024 tokens: TensorRT-LLM's H100 tables measured
    windows of 128 and 8,192 only; a prefill over a cached prefix is not in the context table."""
    assert main(["layer", "--kernels", "trtllm", "--attention", "flash", "--model", "gemma3-27b"]) == 0
    out = capsys.readouterr().out
    assert "flash attention: the cost model (no measured prefill attention with 16 KV heads of 128 and window 1024" in out
    assert main(["layer", "--kernels", "trtllm", "--attention", "flash", "--tokens", "2048", "--context", "4096"]) == 0
    assert "a prefill over a cached prefix: the context table measured T = S only" in capsys.readouterr().out


def test_the_atlas_places_each_measured_op_under_its_roofline():
    """No measured kernel beats its bound: roofline_s <= kernel time for every point (the tables'
    latencies in ms, the presets' datasheet peaks); both families and both phases are drawn."""
    from roofline.measured.atlas import atlas

    a = atlas("llama3-70b", "h100-sxm", "trtllm", "fp8")
    assert {(p.family, p.phase) for p in a.points} == {("gemm", "prefill"), ("gemm", "decode"),
                                                     ("attention", "prefill"), ("attention", "decode")}
    assert all(p.roofline_s <= p.kernel_s * 1.0001 for p in a.points)
    assert all(p.basis in ("measured", "interpolated", "extrapolated") for p in a.points)
    # 3 prefill lengths + 4 decode batches, each with QKV, out, gate+up and down projections, the LM head and one
    # attention (each summed over the 80 layers)
    assert len(a.points) == 7 * 6 and a.left_out == ()


def test_plot_atlas_draws_and_names_what_it_left_out(capsys, tmp_path):
    out = tmp_path / "atlas.png"
    # (--dtype fp4 keeps an fp8 KV cache, as the engines do, whose attention is measured: MLA's absorbed batched
    # matmuls are what a GEMM table of single matrices leaves out)
    assert main(["plot", "atlas", "--machine", "b200", "--kernels", "trtllm", "--model", "deepseek-v3", "--dtype", "fp4",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.stat().st_size > 10_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "note: B: q absorb (W_UK) x58 left out: a matmul of unknown shape" in printed
    assert main(["plot", "atlas", "-o", str(out)]) == 2
    assert "give --kernels trtllm, vllm or sglang" in capsys.readouterr().err


def test_the_roofline_plots_old_kernels_flag_still_draws_and_says_it_is_now_ops(capsys, tmp_path):
    assert main(["plot", "roofline", "--kernels", "layer", "-o", str(tmp_path / "r.png")]) == 0
    assert "--kernels layer is deprecated and goes in the next release: use --ops layer" in capsys.readouterr().err


def test_decode_with_kernels_prices_each_batch_from_the_tables(capsys):
    """A decode step at batch 64 is the sum of its ops; its QKV projection is a GEMM of m 64, n 6,144
    ((32 + 2 x 8) x 128), k 4,096, a point of the table, run 32 times, each at that row's latency plus
    the 3 us launch. The batch table's step at 64 (the vectorised path) is the same sum."""
    rows = {(r["m"], r["n"], r["k"]): r["latency"] * 1e-3 for r in _gemm_rows() if r["gemm_dtype"] == "bfloat16"}
    assert main(["decode", "--kernels", "trtllm", "--batch", "1,64", "--breakdown", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ops = {op["name"]: op for op in out["breakdown"]["ops"]}
    qkv = ops["QKV proj x32"]
    assert qkv["basis"] == "measured"
    assert qkv["time_s"] == pytest.approx(32 * (rows[(64, 6144, 4096)] + 3e-6), rel=1e-9)
    assert qkv["roofline_s"] < qkv["time_s"]
    step = next(r for r in out["rows"] if r["batch"] == 64)
    assert step["step_s"] == pytest.approx(out["breakdown"]["total_s"], rel=1e-9)
    assert out["compute_efficiency"] == 0.7  # the cost model still prices the ops with no table


def test_decode_kernels_on_a_gpu_without_tables_is_one_line(capsys):
    assert main(["decode", "--kernels", "trtllm", "--machine", "v100"]) == 2  # no tables, no counterpart to transfer from
    err = capsys.readouterr().err
    assert "no measured kernel tables for v100: they exist for" in err and len(err.strip().splitlines()) == 1


def test_decode_prices_gpt_oss_mxfp4_experts_from_the_moe_table(capsys):
    """gpt-oss-120b's experts are MXFP4 with bf16 compute on Hopper: the MoE table's w4a16_mxfp4
    module of hidden 2,880, d_ff 2,880, top-4 of 128, at 64 tokens (balanced routing: 256 expert rows
    touch all 128 experts). Its roofline on the H200 (4.8 TB/s, 989 TFLOP/s bf16): weights 128 x 3 x
    2,880^2 x 0.53125 B (MXFP4: 4.25 bits) = 1.6913e9 B, activations 2 B x 256 x (2 x 2,880 + 3 x 2,880)
    = 7.373e6 B, over 4.8e12 B/s = 353.9 us, above 2 x 256 x 2,880^2 x 3 / 989e12 = 12.9 us: the
    measured time over it is the module's efficiency. Our random routing touches 128 (1 - (1 - 4/128)^64)
    = 111.22 experts: the module's time is the same roofline with 111.22 experts' weights over that
    efficiency, gate+up 2/3 of it (its FLOPs: 2 x 2 of the module's 2 x 3), down 1/3, 18 layers of
    each kind plus a 3 us launch; the activation is fused into the module (no time, no launch of its own)."""
    path = _data() / "h200_sxm" / "moe" / "trtllm" / "1.3.0rc20" / "moe_perf.parquet"
    row = [r for r in pa.read_table(path).to_pylist()
           if (r["moe_dtype"], r["num_tokens"], r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"],
               r["moe_tp_size"], r["moe_ep_size"], r["distribution"]) ==
           ("w4a16_mxfp4", 64, 2880, 2880, 4, 128, 1, 1, "balanced")]
    assert len(row) == 1
    activations = 2 * 256 * 5 * 2880
    efficiency = (128 * 3 * 2880**2 * 0.53125 + activations) / 4.8e12 / (row[0]["latency"] * 1e-3)
    touched = 128 * (1 - (1 - 4 / 128) ** 64)
    module_s = (touched * 3 * 2880**2 * 0.53125 + activations) / 4.8e12 / efficiency
    assert main(["decode", "--model", "gpt-oss-120b", "--machine", "h200", "--kernels", "trtllm", "--breakdown", "64",
                 "--json"]) == 0
    ops = {op["name"]: op for op in json.loads(capsys.readouterr().out)["breakdown"]["ops"]}
    up, down, act = ops["A: expert gate+up proj x18"], ops["A: expert down proj x18"], ops["A: silu*mul x18"]
    assert up["family"] == "moe" and up["basis"] == "measured" and "moe_perf" in up["source"]
    for op, share in ((up, 2 / 3), (down, 1 / 3)):
        assert op["time_s"] == pytest.approx(18 * share * module_s + 18 * 3e-6, rel=1e-9)
    assert act["basis"] == "fused" and act["time_s"] == 0.0  # inside the module's kernel: no launch of its own


def test_an_fp4_prefill_s_experts_take_the_module_s_measured_time():
    """DeepSeek-V3's experts in NVFP4 on a B200 under TensorRT-LLM at TP 8 (d_ff 2,048 / 8 = 256 per
    GPU, hidden 7,168, top-8 of 256) at 8,192 tokens: every expert is touched either way (8,192 x 8 rows
    >> 256), so gate+up and down together take the table's measured module time at 8,192 tokens (read
    from its row: the first of its two, moe_torch_flow_cutlass, as the grid keeps the first of a repeated
    point), not each op's own roofline (activations at 16 bits) over the module's efficiency, which was
    twice it."""
    from roofline.cost import seed_cost_model
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.plan import Precision
    from roofline.plan.step import StepCost

    path = _data() / "b200_sxm" / "moe" / "trtllm" / "1.3.0rc20" / "moe_perf.parquet"
    row = [r for r in pa.read_table(path).to_pylist()
           if (r["moe_dtype"], r["num_tokens"], r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"],
               r["moe_tp_size"], r["moe_ep_size"], r["distribution"]) ==
           ("nvfp4", 8192, 7168, 2048, 8, 256, 8, 1, "balanced")]
    assert row[0]["kernel_source"] == "moe_torch_flow_cutlass"
    m = get_machine("b200")
    cm = MeasuredKernels.for_machine(m, "trtllm", **{k: getattr(seed_cost_model(), k) for k in (
        "compute_efficiency", "memory_efficiency", "launch_overhead_s", "overlap", "cuda_graph")})
    step = StepCost("deepseek-v3", m, Precision.uniform("fp4", m), 8, None, cm, "flash", 8192, 8)
    kind = next(k for k in step.sharded.kinds if k.is_moe)
    ks = step._token_kernels(kind, 8192.0, 8192.0)
    body_s = sum(cm.predict_op(k, m).time_s - cm.launch_overhead_s for name, k in ks.items()
                 if name in ("expert gate+up proj", "expert down proj"))
    assert body_s == pytest.approx(row[0]["latency"] * 1e-3, rel=1e-6)


def test_a_moe_the_table_lacks_keeps_the_cost_model_and_says_why(capsys):
    """Qwen3 30B-A3B's expert shape (hidden 2,048, d_ff 768, top-8 of 128) is in the H200 MoE table,
    but no MoE with int4 weights is (TensorRT-LLM's table: bf16, fp8, fp8_block, MXFP4)."""
    assert main(["decode", "--model", "qwen3-30b-a3b", "--machine", "h200", "--kernels", "trtllm", "--weights", "int4",
                 "--breakdown", "8"]) == 0
    out = capsys.readouterr().out
    assert ("expert gate+up proj x48, silu*mul x48, expert down proj x48: the cost model (no measured MoE with int4 "
            "experts computing in bf16; measured: bfloat16, fp8, fp8_block, w4a16_mxfp4)") in out


def test_a_tensor_parallel_all_reduce_comes_back_at_the_engines_measured_latency(capsys):
    """Llama 3 70B over 4 GPUs: each layer all-reduces the attention and the MLP outputs, 64 tokens
    x 8,192 x 2 bytes = 1 MiB = 524,288 bf16 elements (message_size counts elements), 160 times a
    step; TensorRT-LLM's custom all-reduce across 4 GPUs at that size, plus the 3 us launch."""
    path = _data() / "h100_sxm" / "comm" / "trtllm" / "1.3.0rc20" / "custom_allreduce_perf.parquet"
    row = [r for r in pa.read_table(path).to_pylist() if r["num_gpus"] == 4 and r["message_size"] == 524288]
    assert len(row) == 1
    assert main(["decode", "--model", "llama3-70b", "--tp", "4", "--dtype", "fp8", "--kernels", "trtllm",
                 "--breakdown", "64", "--json"]) == 0
    ops = {op["name"]: op for op in json.loads(capsys.readouterr().out)["breakdown"]["ops"]}
    ar = ops["TP all-reduce (nvlink) x160"]
    assert ar["family"] == "all-reduce" and ar["basis"] == "measured" and "custom_allreduce_perf" in ar["source"]
    assert ar["time_s"] == pytest.approx(160 * (row[0]["latency"] * 1e-3 + 3e-6), rel=1e-9)


def test_a_sweep_on_measured_kernels_says_so_and_agrees_with_decode(capsys):
    """The sweep's step at batch 64 is decode's (one vectorised table read each), and a note names
    the tables."""
    assert main(["sweep", "--over", "batch", "--values", "1,64", "--kernels", "trtllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any("measured kernels of trtllm 1.3.0rc20 on h100_sxm" in n for n in out["notes"])
    assert main(["decode", "--kernels", "trtllm", "--batch", "64", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["rows"][0]["step_s"]
    swept = next(r for r in out["rows"] if r["batch"] == 64)["time_s"]
    assert swept == pytest.approx(step, rel=1e-12)


def test_many_lookups_at_once_equal_one_at_a_time():
    """The vectorised grid read (decode curves, sweeps) gives each point what the scalar read gives:
    points on, between and past the H100 bf16 GEMM grid (m past 32,768, n and k past 65,536 and
    under 32)."""
    import numpy as np

    from roofline.measured.gemm import gemm_table
    from roofline.measured.grid import BASES

    grid = gemm_table("h100-sxm", "trtllm", "bf16").grid
    rng = np.random.default_rng(1)
    pts = np.exp(rng.uniform(np.log([1, 16, 16]), np.log([70000, 100000, 100000]), size=(500, 3)))
    pts[:3] = [[4096, 4096, 4096], [3000, 4096, 4096], [1, 32, 32]]
    eff, basis, used = grid.estimate_many(pts)
    for i, p in enumerate(pts):
        e, b, u = grid.estimate(p)
        assert eff[i] == pytest.approx(e, rel=1e-12) and BASES[basis[i]] == b and used[i] == u


def test_many_lookups_sharing_a_size_equal_one_at_a_time():
    """A step's token counts against one weight (n and k the same for every point, on the H100 grid's lines or
    between them): the vectorised read places the shared axes once and skips corners of no weight, and still
    gives each point what the scalar read gives; so on a 3 x 3 grid with holes (NaN) around the points."""
    import numpy as np

    from roofline.measured.gemm import gemm_table
    from roofline.measured.grid import BASES, LogGrid

    grid = gemm_table("h100-sxm", "trtllm", "bf16").grid
    ms = np.arange(1.0, 20_000.0, 37.0)
    for n, k in [(4096, 4096), (3000, 4096), (5000, 7000), (200_000, 8)]:
        pts = np.stack([ms, np.full_like(ms, n), np.full_like(ms, k)], axis=1)
        eff, basis, used = grid.estimate_many(pts)
        for i in range(0, len(ms), 17):
            e, b, u = grid.estimate(pts[i])
            assert eff[i] == pytest.approx(e, rel=1e-12) and BASES[basis[i]] == b and used[i] == u
    # each axis keeps its last column's placement: the same token counts read again, then counts of the same length
    # but other values (and the same values on another axis) are placed anew
    for cols in [(ms, 4096.0, 4096.0), (ms, 3000.0, 4096.0), (ms + 0.5, 4096.0, 4096.0), (ms[::-1], 4096.0, 4096.0),
                 (np.full_like(ms, 64.0), ms, 4096.0)]:
        pts = np.stack(np.broadcast_arrays(*cols), axis=1)
        eff, basis, used = grid.estimate_many(pts)
        for i in range(0, len(ms), 23):
            e, b, u = grid.estimate(pts[i])
            assert eff[i] == pytest.approx(e, rel=1e-12) and BASES[basis[i]] == b and used[i] == u
    holes = LogGrid.from_points((np.array([1, 4, 16, 1, 16, 4, 16]), np.array([1, 1, 1, 4, 4, 16, 16])),
                                np.array([0.5, 0.6, 0.7, 0.4, 0.8, 0.3, 0.9]))  # (4, 4), (1, 16) not measured
    for y in (1.0, 4.0, 6.0, 16.0):
        pts = np.stack([np.geomspace(0.5, 32, 41), np.full(41, y)], axis=1)
        eff, basis, used = holes.estimate_many(pts)
        for p, e0, b0, u0 in zip(pts, eff, basis, used):
            e, b, u = holes.estimate(p)
            assert e0 == pytest.approx(e, rel=1e-12) and BASES[b0] == b and u0 == u


def test_a_point_with_no_measured_corner_takes_the_nearest_measured_one_at_once_and_alone():
    """A 3 x 3 grid on 1, 4, 16 with only two points measured, (1, 1) at 0.5 and (16, 16) at 0.8:
    (1.5, 6) and (2, 12) have no measured corner (theirs are (1 or 4, 4 or 16)). In log shape (1.5, 6)
    lies nearer (1, 1) (sqrt(ln 1.5^2 + ln 6^2) = 1.84 against sqrt(ln 10.7^2 + ln 2.67^2) = 2.56), (2, 12)
    nearer (16, 16) (2.58 against sqrt(ln 8^2 + ln 1.33^2) = 2.10); both extrapolated from one point,
    vectorised or alone."""
    import numpy as np

    from roofline.measured.grid import BASES, LogGrid

    grid = LogGrid.from_points((np.array([1, 16, 4]), np.array([1, 16, 4])), np.array([0.5, 0.8, np.nan]))
    eff, basis, used = grid.estimate_many([[1.5, 6], [2, 12]])
    assert eff.tolist() == [0.5, 0.8] and [BASES[b] for b in basis] == ["extrapolated"] * 2 and used.tolist() == [1, 1]
    assert grid.estimate((1.5, 6)) == (0.5, "extrapolated", 1) and grid.estimate((2, 12)) == (0.8, "extrapolated", 1)



@pytest.mark.parametrize("n_axes", [1, 2, 3, 4])
def test_the_nearest_measured_point_is_the_one_numpy_norm_finds_first(n_axes):
    """grid.LogGrid._nearest (the first two axes' squares summed once per pair of values, then gathered per measured
    point) against np.linalg.norm over every measured point, the first in flat order among equal distances: random
    grids with 20%, 60% and 90% holes, queries anywhere and queries on grid values (many exact ties)."""
    import numpy as np

    from roofline.measured.grid import LogGrid

    rng = np.random.default_rng(n_axes)
    for trial in range(6):
        axes = tuple(np.unique(rng.integers(1, 300, rng.integers(2, 12))).astype(float) for _ in range(n_axes))
        eff = rng.uniform(0.1, 1.0, [len(a) for a in axes])
        eff[rng.uniform(size=eff.shape) < (0.2, 0.6, 0.9)[trial % 3]] = np.nan
        eff.ravel()[0] = 0.5  # at least one measured point
        q = np.log(rng.uniform(0.5, 400, (600, n_axes)) if trial % 2 else
                   np.stack([rng.choice(a, 600) for a in axes], axis=1))
        flat = np.flatnonzero(np.isfinite(eff))
        pts = np.stack([np.log(a)[i] for a, i in zip(axes, np.unravel_index(flat, eff.shape))], axis=1)
        want = eff.ravel()[flat[np.argmin(np.linalg.norm(pts[None, :, :] - q[:, None, :], axis=2), axis=1)]]
        assert LogGrid(axes, eff)._nearest(q).tolist() == want.tolist()


@pytest.mark.parametrize("n_axes", [2, 3, 4])
def test_the_nearest_on_a_grid_measured_in_runs_is_the_one_numpy_norm_finds_first(n_axes):
    """A table measured up to a length (each line along the last axis one run of measured points, some lines
    unmeasured): grid.LogGrid._nearest takes each line's nearest point at its run's value nearest the query's
    (_nearest_by_lines), every point only where two lie within rounding of the least distance. Against
    np.linalg.norm over every measured point, the first in flat order among equal distances: queries anywhere,
    on grid values (on axes of powers of 2, exact ties between lines and inside one) and on grid values nudged by
    one rounding step."""
    import numpy as np

    from roofline.measured.grid import LogGrid

    rng = np.random.default_rng(10 + n_axes)
    plain = fallback = 0
    for trial in range(8):
        axes = tuple(2.0 ** np.arange(rng.integers(2, 10)) if trial % 2 else  # powers of 2: distances tie exactly
                     np.unique(rng.integers(1, 300, rng.integers(2, 12))).astype(float) for _ in range(n_axes))
        eff = rng.uniform(0.1, 1.0, [len(a) for a in axes])
        lines = eff.reshape(-1, eff.shape[-1])
        for i, line in enumerate(lines):  # a run [lo, hi] of each line measured, or none (the first line's from 0)
            lo, hi = sorted(rng.integers(0, line.size, 2))
            line[:0 if i == 0 else lo] = np.nan
            line[hi + 1:] = np.nan
            if i and rng.uniform() < 0.2:
                line[:] = np.nan
        q = np.log(np.stack([rng.choice(a, 600) for a in axes], axis=1))
        if trial % 3 == 1:
            q = np.log(rng.uniform(0.5, 400, (600, n_axes)))
        elif trial % 3 == 2:
            q = np.nextafter(q, q + rng.choice([-1.0, 1.0], q.shape))
        grid = LogGrid(axes, eff)
        assert grid._near_points()[5] is not None  # the lines' path is the one taken
        flat = np.flatnonzero(np.isfinite(eff))
        pts = np.stack([np.log(a)[i] for a, i in zip(axes, np.unravel_index(flat, eff.shape))], axis=1)
        want = eff.ravel()[flat[np.argmin(np.linalg.norm(pts[None, :, :] - q[:, None, :], axis=2), axis=1)]]
        assert grid._nearest(q).tolist() == want.tolist()
        sq = [(la[None, :] - q[:256, a:a + 1]) ** 2 for a, la in enumerate(grid._near_points()[2])]
        got, ok = grid._nearest_by_lines(sq)
        plain, fallback = plain + int(ok.sum()), fallback + int((~ok).sum())
        assert got[ok].tolist() == want[:256][ok].tolist()
    assert plain and fallback  # both paths met: ties are left to every point


def test_a_far_point_whose_distances_to_a_line_round_to_one_takes_the_lines_first():
    """A query 10^6 away in log on the first axis: its squared distances to a line's points (10^12 plus a few
    10^-11) round to one value, so all tie, and np.linalg.norm's first in flat order is the run's first point,
    not the one nearest on the last axis (the lines' path leaves such a query to every point)."""
    import numpy as np

    from roofline.measured.grid import LogGrid

    axes = (np.array([1.0, 2.0]), np.array([1e6, 1e6 + 1, 1e6 + 2, 1e6 + 3]))
    eff = np.array([[np.nan, 0.1, 0.2, 0.3], [0.4, 0.5, 0.6, 0.7]])
    q = np.array([[-1e6, np.log(1e6 + 5)]])
    pts = np.array([[np.log(axes[0][i]), np.log(axes[1][j])] for i in range(2) for j in range(4) if eff[i, j] == eff[i, j]])
    d = np.linalg.norm(pts - q, axis=1)
    assert d[0] == d[2] and np.argmin(d) == 0  # the tie, and norm's first: (1, 10^6 + 1) at 0.1
    grid = LogGrid(axes, eff)
    assert grid._near_points()[5] is not None and grid._nearest(q).tolist() == [0.1]


def test_a_table_time_under_the_roofline_is_taken_at_the_roofline_and_said(capsys):
    """TensorRT-LLM's L40S row for Llama 3 8B's QKV projection at 64 tokens (m 64, n 6,144, k 4,096)
    beats its roofline: 51.6 MB of weights and activations at the L40S's 864 GB/s take 59.8 us, the row
    less (its 96 MB L2 holds the weights between the benchmark's runs). The op is taken at its roofline
    and the note says by how much the table beat it."""
    rows = {(r["m"], r["n"], r["k"]): r["latency"] * 1e-3 for r in _gemm_rows("l40s", "trtllm", "1.3.0rc20")
            if r["gemm_dtype"] == "bfloat16"}
    assert main(["layer", "--kernels", "trtllm", "--machine", "l40s", "--phase", "decode", "--batch", "64",
                 "--context", "4096", "--json"]) == 0
    qkv = next(o for o in json.loads(capsys.readouterr().out)["ops"] if o["name"] == "QKV proj")
    assert rows[(64, 6144, 4096)] < qkv["roofline_s"]  # the table's row beats the bound
    assert qkv["time_s"] - qkv["launch_s"] == pytest.approx(qkv["roofline_s"], rel=1e-12)
    assert qkv["beat_roofline"] == pytest.approx(qkv["roofline_s"] / rows[(64, 6144, 4096)], rel=1e-9)
    assert main(["layer", "--kernels", "trtllm", "--machine", "l40s", "--phase", "decode", "--batch", "64",
                 "--context", "4096"]) == 0
    assert "QKV proj: the table's time beats its roofline" in capsys.readouterr().out


def test_the_web_api_takes_kernels_beside_the_machine():
    """/api/layer, /api/model and /api/decode take kernels= as the CLI's --kernels: the op table says
    what each op rests on, the notes name the tables; a machine without tables is a 422 naming the
    machine and the kernels together (their combination is refused, not either value)."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from roofline.web.app import create_app

    client = TestClient(create_app())
    body = client.get("/api/layer", params={"kernels": "trtllm", "attention": "flash"}).json()
    whys = {row["name"]: row["why"] for row in body["ops_table"]}
    assert "measured (trtllm 1.3.0rc20 gemm_perf bfloat16 (h100_sxm))" in whys["QKV proj"]
    assert "the cost model" in whys["attn norm"]
    assert any("measured kernels of trtllm 1.3.0rc20 on h100_sxm" in n for n in body["notes"])
    for path in ("/api/model", "/api/decode"):  # the caption says what priced the view
        r = client.get(path, params={"kernels": "vllm"})
        assert r.status_code == 200 and "measured kernels of vllm 0.24.0 on h100_sxm" in r.json()["caption"]
        assert "measured kernels" not in client.get(path).json()["caption"]
    r = client.get("/api/layer", params={"kernels": "trtllm", "machine": "mi300x"})
    assert r.status_code == 422 and r.json()["fields"] == ["machine", "kernels"]
    assert client.get("/api/layer", params={"kernels": "tensorrt"}).json()["field"] == "kernels"
    options = client.get("/api/options").json()
    assert "kernels" in options["view_parameters"]["layer"] and "kernels" not in options["view_parameters"]["serving"]


def test_a_serving_step_prices_its_decode_attention_and_gemms_from_the_tables():
    """A decode step of Llama 3 8B on one H100 with trtllm's kernels, 16 sequences at 4,096
    positions each: its attention is the generation row of batch 16, isl 1 + step 4095 (32 layers of
    it), its QKV projection the GEMM row m 16, n 6,144 (32 + 2 x 8 heads of 128), k 4,096; no
    launch inside the decode step's CUDA graph."""
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.plan.step import StepCost

    m = get_machine("h100-sxm")
    cm = MeasuredKernels.for_machine(m, "trtllm")
    step = StepCost("llama3-8b", m, cost_model=__import__("dataclasses").replace(cm, cuda_graph=True))
    ops = {o.name: o for o in step.ops([4096.0] * 16)}
    key = dict(batch_size=16, isl=1, step=4095, num_heads=32, num_key_value_heads=8, head_dim=128, window_size=0,
               kv_cache_dtype="bfloat16")
    row = [r for r in _attention_rows("generation_attention_perf") if all(r[k] == v for k, v in key.items())]
    assert len(row) == 1
    assert ops["flash attention (decode)"].time_s == pytest.approx(32 * row[0]["latency"] * 1e-3, rel=1e-6)
    gemm = [r for r in _gemm_rows() if r["gemm_dtype"] == "bfloat16" and (r["m"], r["n"], r["k"]) == (16, 6144, 4096)]
    assert len(gemm) == 1
    assert ops["QKV proj"].time_s == pytest.approx(32 * gemm[0]["latency"] * 1e-3, rel=1e-9)
    # the simulator's hot path agrees with the op list, and a stretch of decode steps with both
    total = sum(o.time_s for o in ops.values())
    assert step.seconds([4096.0] * 16) == pytest.approx(total, rel=1e-9)
    import numpy as np

    stretch = step.decode_steps_seconds(np.full(16, 4095.0), 3)
    assert stretch[0] == pytest.approx(total, rel=1e-9)
    assert stretch[2] == pytest.approx(step.seconds([4098.0] * 16), rel=1e-9)


def test_serving_with_kernels_says_what_priced_it_and_refuses_a_gpu_without_tables(capsys):
    argv = ["serving", "--concurrency", "4", "--requests", "16", "--input-len", "512", "--output-len", "64",
            "--seeds", "1", "--kernels", "trtllm"]
    assert main(argv) == 0
    assert "from the measured kernels of trtllm 1.3.0rc20 on h100_sxm" in capsys.readouterr().out
    assert main(argv + ["--machine", "v100"]) == 2
    err = capsys.readouterr().err
    assert "no measured kernel tables for v100" in err and "Traceback" not in err


def test_block_scaled_fp8_reads_the_tables_fp8_block_rows(capsys):
    """--fp8-scaling block: an fp8 GEMM of the H100 trtllm table at m 16, n 4096, k 4096 comes back
    at the fp8_block row's latency, not the per-tensor one's; without --kernels the flag is refused."""
    rows = {r["gemm_dtype"]: r["latency"] for r in _gemm_rows() if (r["m"], r["n"], r["k"]) == (16, 4096, 4096)}
    assert {"fp8", "fp8_block"} <= set(rows) and rows["fp8"] != rows["fp8_block"]
    from roofline.kernels import Kernel
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels

    m = get_machine("h100-sxm")
    k = Kernel("proj", 2.0 * 16 * 4096 * 4096, 16 * 4096 + 4096 * 4096 + 2 * 16 * 4096, "matmul", "fp8",
               shape=(1, 16, 4096, 4096))
    for scaling, table in (("tensor", "fp8"), ("block", "fp8_block")):
        p = MeasuredKernels.for_machine(m, "trtllm", fp8_scaling=scaling).predict_op(k, m)
        if scaling == "block":
            assert p.time_s - p.launch_s == pytest.approx(max(rows[table] * 1e-3, p.roofline_s), rel=1e-9)
        else:  # the per-tensor row less its input's on-the-fly quantisation (tests/test_measured_gemm.py)
            assert p.roofline_s <= p.time_s - p.launch_s < rows[table] * 1e-3
        assert f"gemm_perf {table} " in p.source
    assert main(["layer", "--dtype", "fp8", "--fp8-scaling", "block"]) == 2
    assert "give --kernels" in capsys.readouterr().err
    assert main(["layer", "--dtype", "fp8", "--kernels", "trtllm", "--fp8-scaling", "block", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fp8_scaling"] == "block"  # the run says which rows priced it


def test_a_gpu_without_tables_takes_the_nearest_measured_gpus_efficiencies_marked_transferred(capsys):
    """MI300X (no tables) with vllm: a bf16 GEMM of 16 x 4096 by 4096 x 6144 keeps the efficiency of
    vLLM's H200 row at that shape and runs at the MI300X's roofline over it. Rooflines by hand from the
    presets' datasheet figures: bytes 2 (16 x 4096 + 4096 x 6144 + 16 x 6144) = 50,659,328 (memory-bound
    on both: 805M FLOPs take under 1 us at their peaks), over 4.8 TB/s (H200) and 5.3 TB/s (MI300X)."""
    rows = [r for r in _gemm_rows("h200_sxm", "vllm", "0.24.0") if r["gemm_dtype"] == "bfloat16"
            and (r["m"], r["n"], r["k"]) == (16, 6144, 4096)]
    assert len(rows) == 1
    moved = 2 * (16 * 4096 + 4096 * 6144 + 16 * 6144)
    eff = (moved / 4.8e12) / (rows[0]["latency"] * 1e-3)
    from roofline.kernels import Kernel
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels

    m = get_machine("mi300x")
    cm = MeasuredKernels.for_machine(m, "vllm")
    assert cm.measured_on == "h200"
    k = Kernel("proj", 2.0 * 16 * 6144 * 4096, moved, "matmul", "bf16", shape=(1, 16, 6144, 4096))
    p = cm.predict_op(k, m)
    assert p.time_s - p.launch_s == pytest.approx((moved / 5.3e12) / eff, rel=1e-9)
    assert "transferred to MI300X" in p.source
    assert main(["layer", "--machine", "mi300x", "--kernels", "vllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernels_transferred_from"] == "h200" and any("transferred" in n for n in out["kernel_notes"])
    assert main(["layer", "--machine", "mi300x", "--kernels", "trtllm"]) == 2
    assert "NVIDIA GPUs only" in capsys.readouterr().err
    assert main(["decode", "--machine", "mi300x", "--kernels", "sglang", "--model", "llama3-70b", "--tp", "4",
                 "--breakdown", "8"]) == 0
    assert "not transferred from h200" in capsys.readouterr().out  # the all-reduce: its machine's interconnect


@pytest.mark.parametrize("gpu, preset, host_s", [("b200_sxm", "b200", 100e-6), ("h200_sxm", "h200", 50e-6)])
def test_vllm_block_fp8_rows_timed_without_a_cuda_graph_take_the_graph_timed_fp8_rows_time(gpu, preset, host_s):
    """vLLM 0.24.0's block-fp8 GEMMs were timed eagerly (ai-dynamo/aiconfigurator collector/vllm/collect_gemm.py:
    use_cuda_graph=gemm_type != "fp8_block"): at m 8, n 2048, k 3072 (MiniMax-M2.5's QKV over TP4) its row is the
    host's time a call (over 100 us on a B200, 50 on an H200), where the engine's per-tensor fp8 row of that shape,
    graph-timed, takes under 20 us for the same bytes (8 x 3072 + 3072 x 2048 + 2 x 8 x 2048 = 6,348,800: 0.82 us at
    7.7 TB/s); the op takes the fp8 row's latency. A GEMM that outlasts the host keeps its own row: m 4,096,
    n 65,536, k 16,384 (2 x 4096 x 65536 x 16384 = 8.8e12 FLOPs, 1.95 ms at the B200's 4.5 PFLOP/s fp8)."""
    rows = {(r["gemm_dtype"], r["m"], r["n"], r["k"]): r["latency"] * 1e-3 for r in _gemm_rows(gpu, "vllm", "0.24.0")
            if r["gemm_dtype"] in ("fp8", "fp8_block")}
    small, big = (8, 2048, 3072), (4096, 65536, 16384)
    assert rows[("fp8_block", *small)] > host_s and rows[("fp8", *small)] < 20e-6
    assert rows[("fp8_block", *big)] > 10 * rows[("fp8_block", *small)]  # kernel-bound: the host's time is lost in it
    from roofline.kernels import Kernel
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels

    m = get_machine(preset)
    cm = MeasuredKernels.for_machine(m, "vllm", fp8_scaling="block")
    for (M, N, K), want in ((small, rows[("fp8", *small)]), (big, rows[("fp8_block", *big)])):
        k = Kernel("proj", 2.0 * M * N * K, M * K + K * N + 2 * M * N, "matmul", "fp8", shape=(1, M, N, K))
        p = cm.predict_op(k, m)
        assert p.basis == "measured" and p.time_s - p.launch_s == pytest.approx(max(want, p.roofline_s), rel=1e-9)


def test_a_kernel_far_under_its_roofline_is_said_not_corrected():
    """TensorRT-LLM's H100 bf16 GEMM at m 1, n 64, k 128: its row's latency against its roofline (bytes
    2 (1 x 128 + 128 x 64 + 1 x 64) = 16,768 at 3.35 TB/s: 5.0 ns) is under 2%; the op keeps that time and a
    note says so."""
    rows = [r for r in _gemm_rows() if r["gemm_dtype"] == "bfloat16" and (r["m"], r["n"], r["k"]) == (1, 64, 128)]
    assert len(rows) == 1
    bound = 2 * (1 * 128 + 128 * 64 + 1 * 64) / 3.35e12
    assert bound / (rows[0]["latency"] * 1e-3) < 0.02
    from roofline.kernels import Kernel
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels, measured_notes

    m = get_machine("h100-sxm")
    k = Kernel("QKV proj", 2.0 * 64 * 128, 2 * (128 + 128 * 64 + 64), "matmul", "bf16", shape=(1, 1, 64, 128))
    p = MeasuredKernels.for_machine(m, "trtllm").predict_op(k, m)
    assert p.time_s - p.launch_s == pytest.approx(rows[0]["latency"] * 1e-3, rel=1e-9)
    assert 0 < p.speed_of_light < 0.02 and any(n.startswith("QKV proj:") for n in measured_notes([p]))


def test_mla_decode_attention_comes_back_at_the_engines_measured_latency():
    """DeepSeek-V3 over 8 H200s decodes 16 heads a GPU (128 / 8): a decode step of 16 sequences at
    4,096 positions reads TensorRT-LLM's generation MLA row of 16 heads, batch 16, isl + step 4,096
    (bf16 cache), once for each of the 58 MoE layers (kind B) inside the step's CUDA graph."""
    import dataclasses

    path = _data() / "h200_sxm" / "mla" / "trtllm" / "1.3.0rc20" / "generation_mla_perf.parquet"
    rows = [r for r in pa.read_table(path).to_pylist() if r["num_heads"] == 16 and r["batch_size"] == 16
            and r["isl"] + r["step"] == 4096 and r["kv_cache_dtype"] == "bfloat16" and r["mla_dtype"] == "bfloat16"]
    assert len(rows) == 1
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.plan.step import StepCost

    m = get_machine("h200")
    cm = dataclasses.replace(MeasuredKernels.for_machine(m, "trtllm"), cuda_graph=True)
    ops = {o.name: o for o in StepCost("deepseek-v3", m, tensor_parallel=8, cost_model=cm).ops([4096.0] * 16)}
    assert ops["B: latent attention (decode)"].time_s == pytest.approx(58 * rows[0]["latency"] * 1e-3, rel=1e-6)


def test_a_step_of_whole_prompts_prices_their_attention_as_one_batch():
    """Eight prompts of 1,024 tokens with no prefix in one vLLM step on an H200 (Llama 3.1 8B: 32
    query heads, 8 KV heads of 128, 32 layers): their attention is one kernel over a batch of 8, the
    context table's time at B = 8 (read from the table here), 32 layers of it plus a 3 us launch each;
    not 8 times one prompt's (the table's B = 1 time is more than an eighth of B = 8's)."""
    from roofline.cost import seed_cost_model
    from roofline.machines import get_machine
    from roofline.measured.attention import attention_table
    from roofline.measured.model import MeasuredKernels
    from roofline.plan import Precision
    from roofline.plan.step import StepCost

    m = get_machine("h200")
    cm = MeasuredKernels.for_machine(m, "vllm", **{k: getattr(seed_cost_model(), k) for k in (
        "compute_efficiency", "memory_efficiency", "launch_overhead_s", "overlap", "cuda_graph")})
    step = StepCost("llama3-8b", m, Precision.uniform("bf16", m), 1, None, cm, "flash", 8192, 8)
    table = attention_table("h200", "vllm", False)
    batch_s = table.estimate("bf16", "bf16", 8, 1024, 1024, 32, 8, 128, 0).time_s
    one_s = table.estimate("bf16", "bf16", 1, 1024, 1024, 32, 8, 128, 0).time_s
    assert 8 * one_s > 1.2 * batch_s  # one short prompt leaves part of the GPU idle (282 us against 223 us)
    ops = {o.name: o for o in step.ops((), [(1024, 0)] * 8)}
    assert ops["flash attention (chunks)"].time_s == pytest.approx(32 * (batch_s + cm.launch_overhead_s), rel=1e-9)
    ops = {o.name: o for o in step.ops((), [(1024, 0)])}
    assert ops["flash attention (chunks)"].time_s == pytest.approx(32 * (one_s + cm.launch_overhead_s), rel=1e-9)
