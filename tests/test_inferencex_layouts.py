"""InferenceX's vLLM runs laid out as their launch scripts ran them (benchmarks/inferencex_layouts.py), not as the
silicon sample records their tensor, data and expert parallelism (silicon_validation.layout)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import inferencex_layouts as ixl  # noqa: E402
import silicon_validation as sv  # noqa: E402

# the parallel flags of InferenceX's vLLM launch scripts, as they read (benchmarks/single_node/ at the commits named)
EP_ABOVE_1 = """if [ "$EP_SIZE" -gt 1 ]; then
  EP=" --enable-expert-parallel"
else
  EP=" "
fi
vllm serve $MODEL --port $PORT \\
--tensor-parallel-size=$TP \\
$EP \\"""  # minimaxm2.5_fp8_b200.sh at 8c3eb5b86
EP_ALWAYS = EP_ABOVE_1.replace("-gt 1", "-ge 1")  # minimaxm2.5_fp8_b200.sh at 626932a11: every EP_SIZE is >= 1
TP_ONLY = """vllm serve $MODEL --host 0.0.0.0 --port $PORT \\
--tensor-parallel-size=$TP \\
--gpu-memory-utilization 0.90 \\"""  # kimik2.5_fp4_b200.sh at 79a42e20a
DP_ATTENTION = """if [ "${DP_ATTENTION}" = "true" ]; then
  PARALLEL_ARGS="--tensor-parallel-size=1 --data-parallel-size=$TP --enable-expert-parallel"
elif [ "$EP_SIZE" -gt 1 ]; then
  PARALLEL_ARGS="--tensor-parallel-size=$TP --enable-expert-parallel"
else
  PARALLEL_ARGS="--tensor-parallel-size=$TP"
fi"""  # minimaxm2.5_fp4_b200.sh at 8c3eb5b86


def test_the_scripts_flags_decide_the_layout():
    assert ixl.expert_rule(EP_ABOVE_1) == "above_1" and ixl.expert_rule(EP_ALWAYS) == "always"
    assert ixl.expert_rule(TP_ONLY) == "never" and not ixl.dp_rule(TP_ONLY)
    assert ixl.dp_rule(DP_ATTENTION) and ixl.expert_rule(DP_ATTENTION) == "above_1"
    assert ixl.decide(EP_ABOVE_1, True, set()) == "tp_ep" and ixl.decide(EP_ABOVE_1, False, set()) == "tp"
    assert ixl.decide(EP_ALWAYS, False, {False}) == "tp_ep"  # expert parallelism at ep 1 too
    assert ixl.decide(TP_ONLY, True, {False}) == "tp"  # the config's ep: 4 never reached the server
    assert ixl.decide(DP_ATTENTION, True, {True}) == "dp_ep" and ixl.decide(DP_ATTENTION, True, {False}) == "tp_ep"
    assert ixl.decide(DP_ATTENTION, True, {True, False}) == "unknown" and ixl.decide(DP_ATTENTION, True, set()) == "unknown"


def _row(rid: str) -> dict:
    from roofline.measured.tables import data_root

    return next(r for r in sv.read_rows(data_root().parent / "silicon_sample.csv") if r["id"] == rid)


def test_a_run_recorded_as_sixteen_gpus_runs_on_its_configs_four():
    """Kimi-K2.5 NVFP4 on B200s, InferenceX's `{ tp: 4, ep: 4 }`: recorded tp 4 x attention_dp 4 with moe_ep 16 (16 GPUs
    on an 8-GPU node); its script passes --tensor-parallel-size=$TP alone: 4 GPUs, the experts tensor-parallel."""
    rows = [r for r in _rows() if r["model_path"] == "moonshotai/Kimi-K2.5" and r["system"] == "b200_sxm"
            and (r["tp_size"], r["attention_dp_size"], r["moe_ep_size"]) == ("4", "4", "16") and sv.is_inferencex(r)]
    assert len(rows) == 30
    for r in rows:
        _, _, _, gpus, ep, label = sv.layout(r)
        assert (gpus, ep, label) == (4, False, "TP")


def test_minimax_fp8_on_b200_runs_its_experts_over_its_tensor_parallel_gpus():
    """MiniMax-M2.5 FP8 on B200s at 512 users, InferenceX's `{ tp: 2, ep: 2 }`: recorded tp 2 x attention_dp 2 with
    moe_ep 4; its script adds --enable-expert-parallel for an EP_SIZE over 1: 2 GPUs, one attention group."""
    r = _row("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c512_cfg690")
    assert (r["tp_size"], r["attention_dp_size"], r["moe_ep_size"]) == ("2", "2", "4")
    _, _, _, gpus, ep, label = sv.layout(r)
    assert (gpus, ep, label) == (2, (2, 1), "TP, MoE EP")


def _rows():
    from roofline.measured.tables import data_root

    return sv.read_rows(data_root().parent / "silicon_sample.csv")


def test_every_listed_row_is_an_inferencex_vllm_row_of_its_recorded_tensor_parallelism():
    rows = {r["id"]: r for r in _rows()}
    listed = sv._vllm_layouts()
    assert listed and set(listed) <= set(rows)
    for rid, got in listed.items():
        r = rows[rid]
        assert sv.is_inferencex(r) and r["backend"] == "vllm" and got["layout"] in ixl.LAYOUTS
        assert got["gpus"] == int(r["tp_size"])
