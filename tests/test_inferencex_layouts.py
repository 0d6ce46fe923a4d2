"""InferenceX's runs laid out as their launch scripts ran them (vLLM's: benchmarks/inferencex_layouts.py; TensorRT-LLM's
of the scripts that chose their own: inferencex_conditions.toml's `layout`), not as the silicon sample records their
tensor, data and expert parallelism (silicon_validation.layout, script_layout)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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


def test_tensorrt_llm_runs_of_scripts_that_chose_their_experts_layout_run_it():
    """InferenceX's TensorRT-LLM scripts at e06929c (the runs measured 2025-11-02) set the layout themselves: dsr1_fp8_h200_
    trt_slurm.sh `EP_SIZE="$TP"` and DP_ATTENTION=true at 8192/1024 over CONC 32; dsr1_fp4_b200_trt_slurm.sh EP_SIZE="1",
    at TP 8 1024/1024 `EP_SIZE="$TP"` over CONC 8; gptoss_fp4_h200_trt_slurm.sh `--ep_size=$TP`. The sample records all
    of them tp TP, moe_tp TP, moe_ep 1. The same DeepSeek-R1 FP8 run on 8 H200s at 1k/1k and 16 users appears as one such
    row (20.39 ms a token) and as a run recorded tp 8 x moe_ep 8 (config 181: 20.19 ms)."""
    rows = {r["id"]: r for r in _rows()}
    h200 = rows["2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c16_tp8_ep1_62"]
    assert (h200["tp_size"], h200["moe_tp_size"], h200["moe_ep_size"]) == ("8", "8", "1")
    assert sv.layout(h200)[3:] == (8, (8, 1), "TP, MoE EP")
    twin = rows["dsr1_h200_trtllm_fp8_agg_1024x1024_c16_cfg181"]
    assert sv.layout(twin)[3:] == (8, (8, 1), "TP, MoE EP")  # recorded with its experts whole over 8 GPUs
    assert float(h200["silicon_tpot_ms"]) == pytest.approx(float(twin["silicon_tpot_ms"]), rel=0.02)

    def one(pred):
        return next(r for r in rows.values() if r["backend"] == "trtllm" and sv.is_inferencex(r) and pred(r)
                    and "2025-11-02" in r["silicon_data_source"])

    dp = one(lambda r: r["system"] == "h200_sxm" and r["isl"] == "8192" and sv.concurrency(r) == 64)
    assert sv.layout(dp)[3:] == (8, (1, 1), "EP")  # DP_ATTENTION=true: 8 ranks of one GPU
    assert sv.layout(one(lambda r: r["system"] == "h200_sxm" and r["isl"] == "8192" and sv.concurrency(r) == 32))[3:] \
        == (8, (8, 1), "TP, MoE EP")
    fp4 = lambda c: one(lambda r: r["system"] == "b200_sxm" and r["precision"] == "fp4" and r["tp_size"] == "8"  # noqa: E731
                        and "DeepSeek" in r["model_path"] and r["isl"] == r["osl"] == "1024" and sv.concurrency(r) == c)
    assert sv.layout(fp4(16))[3:] == (8, (8, 1), "TP, MoE EP")  # over CONC 8
    assert sv.layout(fp4(256))[3:] == (8, (1, 1), "EP")  # from CONC 256: DP_ATTENTION=true too
    oss = one(lambda r: r["system"] == "h200_sxm" and r["model_path"] == "openai/gpt-oss-120b" and r["tp_size"] == "4")
    assert sv.layout(oss)[3:] == (4, (4, 1), "TP, MoE EP")
    later = rows["2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c16_tp8_ep1_62"] | {
        "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=16; measured=2026-01-28T00:00:00.000Z"}
    assert sv.layout(later)[3:] == (8, False, "TP")  # a later script takes EP_SIZE from the config: the sample's
