"""Expert parallelism on measured MoE kernels (measured.moe's expert-parallel sites) and under one attention
group (StepLayout.one_group: `--ep --attention-dp 1`, the engines' TP + EP without data-parallel attention).
Expected latencies are read from the installed parquet file here with pyarrow, independently of roofline.measured."""

from __future__ import annotations

import subprocess
import sys

import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")

# Qwen3 235B-A22B's routed experts (hidden 4,096, d_ff 1,536, top-8 of 128) in block fp8, TensorRT-LLM 1.3.0rc20's
# H100 table, balanced routing
SITE = dict(hidden_size=4096, inter_size=1536, topk=8, num_experts=128, moe_dtype="fp8_block", distribution="balanced")


def _latency_ms(tokens: int, moe_tp: int, moe_ep: int) -> float:
    import importlib.util
    from pathlib import Path

    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0])
    rows = pa.read_table(root / "systems" / "data" / "h100_sxm" / "moe" / "trtllm" / "1.3.0rc20" / "moe_perf.parquet",
                         filters=[("num_tokens", "=", tokens), ("moe_tp_size", "=", moe_tp),
                                  ("moe_ep_size", "=", moe_ep)]).to_pylist()
    hits = [r["latency"] for r in rows if all(r[k] == v for k, v in SITE.items())]
    assert len(hits) == 1, hits
    return hits[0]


def _module_ms(tokens: int, d_ff: int, top_k: float, experts: float) -> tuple[float, str]:
    """One GPU's module time as measured.moe reads it back: its roofline at the balanced count over the efficiency."""
    from roofline.machines import get_machine
    from roofline.measured.moe import module_roofline_s, moe_table

    eff, _, _, source = moe_table("h100-sxm", "trtllm").efficiency("fp8", "fp8_block", tokens, 4096, d_ff, top_k, experts)
    return float(module_roofline_s(get_machine("h100-sxm"), "fp8_block", tokens, 4096, d_ff, top_k, experts)) / eff * 1e3, \
        source


@pytest.mark.parametrize("tokens", [16, 1024, 4096])
def test_an_expert_parallel_gpu_reads_its_splits_rows(tokens):
    """Four GPUs each holding 32 whole experts (moe_ep 4) run a GPU's module over the step's tokens, 2 of each
    token's 8 experts theirs: the table's moe_ep 4 row, where the tensor-parallel rows (moe_tp 4: every expert, 384
    wide) are 2.3x slower at 4,096 tokens for the same FLOPs."""
    ep, tp = _latency_ms(tokens, 1, 4), _latency_ms(tokens, 4, 1)
    got, source = _module_ms(tokens, 1536, 2, 32)
    assert got == pytest.approx(ep, rel=1e-6) and "moe_ep 4 rows" in source
    assert _module_ms(tokens, 384, 8, 128)[0] == pytest.approx(tp, rel=1e-6)  # the tensor-parallel site as before
    if tokens == 4096:
        assert ep < tp / 2


def test_a_gpu_share_of_under_one_expert_a_token_is_a_site_too():
    """Over 16 GPUs each holds 8 experts and takes half of one a token on average (top-8 / 16): a fractional key."""
    got, source = _module_ms(256, 1536, 0.5, 8)
    assert got == pytest.approx(_latency_ms(256, 1, 16), rel=1e-6) and "moe_ep 16 rows" in source


def _step(**layout):
    from roofline.cost import seed_cost_model
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.plan import Precision
    from roofline.plan.step import StepCost

    m = get_machine("h100-sxm")
    cm = seed_cost_model(launch_overhead_s=m.launch_overhead_s, cuda_graph=True)
    cm = MeasuredKernels.for_machine(m, "trtllm", **{k: getattr(cm, k) for k in (
        "compute_efficiency", "memory_efficiency", "launch_overhead_s", "overlap", "cuda_graph")}, fp8_scaling="block")
    return StepCost("qwen3-235b-a22b", m, Precision.uniform("fp8", m), 4, None, cm, "flash", 8192, 64, **layout)


def test_one_attention_group_sums_the_experts_by_its_all_reduce():
    """TP attention with the experts split whole over the same 4 GPUs: no all-to-all (the tokens are on every GPU),
    the same all-reduces as tensor parallelism, and each GPU's experts at the moe_ep 4 row's time (94 layers)."""
    tp, ep = _step(), _step(expert_parallel=True, attention_tp=4, expert_tp=1)
    assert ep.one_group() and not tp.one_group()
    names = {o.name: o for o in ep.ops([], [(1024, 1024)] * 4)}
    assert not any("all-to-all" in n or "all-gather" in n for n in names)
    tp_ops = {o.name: o for o in tp.ops([], [(1024, 1024)] * 4)}
    reduce = next(n for n in names if "all-reduce" in n)
    assert names[reduce].time_s == pytest.approx(tp_ops[reduce].time_s)
    experts_ms = (names["expert gate+up proj"].time_s + names["expert down proj"].time_s) / 94 * 1e3
    # 4,096 tokens touch all 32 of a GPU's experts: random routing's count is the balanced one; launches aside
    assert experts_ms == pytest.approx(_latency_ms(4096, 1, 4), rel=0.02)
    assert "one attention group" in ep.describe() and any("no all-to-all" in n for n in ep.notes())


def test_the_cli_runs_tensor_parallel_attention_beside_expert_parallel_moe():
    out = subprocess.run([sys.executable, "-m", "roofline", "serving", "--model", "qwen3-235b-a22b", "--machine",
                          "h100-sxm", "--tp", "4", "--ep", "--attention-dp", "1", "--kernels", "trtllm", "--dtype", "fp8",
                          "--concurrency", "2", "--requests", "4", "--input-len", "512", "--output-len", "16"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "expert-parallel 4 under tensor-parallel attention (one attention group)" in out.stdout
    assert "no all-to-all" in out.stdout and "Traceback" not in out.stderr


def test_the_busiest_gpu_takes_the_tables_time_at_the_tokens_that_touch_its_experts():
    """Under expert parallelism the busiest GPU touches more experts than the mean. Qwen3 235B-A22B over 8 GPUs (16
    experts a GPU, top-1 of them a token): at 4 tokens the balanced rows touch 4 experts; a GPU touching 6 takes the
    module's measured time at 6 tokens (the table's 6-token row where it has one, else between its 4 and 8: at least
    the 4-token row, at most the 8-token one), not 1.5x the 4-token row's; a GPU touching the balanced 4 takes the
    4-token row's time (read against the same roofline); one touching 3 less (fewer experts' weights)."""
    import numpy as np

    from roofline.machines import get_machine
    from roofline.measured.moe import module_s, moe_table

    m = get_machine("h100-sxm")
    table = moe_table("h100-sxm", "trtllm")

    def eff(x):
        return table.efficiencies("fp8", "fp8_block", x, 4096, 1536, 1, 16)

    def at(tokens, touched):
        return float(module_s(m, "fp8_block", np.array([float(tokens)]), 4096, 1536, 1, 16, True, eff(np.array([float(tokens)])),
                              np.array([float(touched)]), eff)[0])

    t4, t8 = _latency_ms(4, 1, 8) * 1e-3, _latency_ms(8, 1, 8) * 1e-3
    assert at(4, 4) == pytest.approx(t4, rel=1e-9)
    assert t4 < at(4, 6) < t8 < 1.5 * t4  # 50.7, 63.9 and 75.3 us: 6 experts cost 1.26x, not 1.5x
    assert at(4, 6) == pytest.approx(at(6, 6), rel=1e-12)  # the time of 6 tokens, whose balanced rows touch 6
    assert at(4, 3) == pytest.approx(t4 * 0.75, rel=0.05)  # 3 of the 4 experts' weights (plus the same activations)
    assert at(4, 8) == pytest.approx(t8, rel=1e-9)
