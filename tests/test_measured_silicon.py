"""How benchmarks/silicon_validation.py reads aiconfigurator-core's silicon sample: each row's layout,
users and KV-cache dtype as deployed. The rows are written inline (the few columns read), copied from
systems/silicon_sample.csv of aiconfigurator-core 0.12.0, so the tests stand without the package."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import silicon_validation as sv  # noqa: E402

COLUMNS = ("id", "silicon_data_source", "backend", "model_path", "system", "precision", "tp_size", "pp_size",
           "attention_dp_size", "moe_tp_size", "moe_ep_size", "batch_size")


def row(rid, tp, dp, mtp, mep, batch, source=""):
    return dict(zip(COLUMNS, (rid, source, "trtllm", "deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", tp, "1", dp, mtp, mep,
                              batch)))


def test_a_run_recorded_as_the_square_of_its_moe_split_is_its_gpus(monkeypatch):
    # the layout alone: the 1252 run's image served configs with and without MTP (refused: inferencex_speculation.toml)
    monkeypatch.setattr(sv, "_speculated", lambda: {})
    # The sample holds one run twice, TTFT 493.9807895803824 ms and TPOT 8.583777779094092 ms both times:
    # ..._1024x1024_c4_tp8_0_ep8_0_1252 as tp 8, moe_tp 1, moe_ep 8, and ..._1024x1024_c4_tp8_ep8_954 as tp 64,
    # moe_tp 8, moe_ep 8 (8 x 8 = 64). Both are 8 GPUs: attention TP 8, experts EP 8.
    as_8 = row("2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c4_tp8_0_ep8_0_1252", "8", "1", "1", "8", "4")
    as_64 = row("2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c4_tp8_ep8_954", "64", "1", "8", "8", "4")
    assert sv.layout(sv.normalised(as_64)) == sv.layout(sv.normalised(as_8)) == sv.layout(as_8)
    assert sv.layout(as_8)[3] == 8  # GPUs
    assert sv.concurrency(sv.normalised(as_64)) == sv.concurrency(as_8) == 4


def test_data_parallel_attention_recorded_as_a_square_is_its_gpus_and_its_users():
    # One run twice, TTFT 906.6183994952098 ms, TPOT 21.374843718536397 ms: dsr1_b200_trtllm_fp4_agg_1024x8192_c256_cfg191
    # as attention DP 64, moe 8 x 8, batch_size 4, and ..._c256_tp8_0_ep8_0_1080 as DP 8, moe 1 x 8, batch_size 32;
    # both say 256 users (64 x 4 = 8 x 32 = 256), on 8 GPUs.
    as_8 = row("2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x8192_c256_tp8_0_ep8_0_1080", "1", "8", "1", "8", "32")
    as_64 = row("dsr1_b200_trtllm_fp4_agg_1024x8192_c256_cfg191", "1", "64", "8", "8", "4")
    assert sv.layout(sv.normalised(as_64)) == sv.layout(as_8)
    assert sv.layout(as_8)[3:5] == (8, (1, 1))  # 8 GPUs, expert parallel: attention TP 1 in each of 8 DP groups, each expert whole
    assert sv.concurrency(sv.normalised(as_64)) == sv.concurrency(as_8) == 256


def test_a_plain_layout_is_left_as_it_is():
    # tp 8 with the experts tensor-parallel (moe_tp 8, moe_ep 1): not a square of a split; 2 x 4 of 8 neither
    plain = row("x_c16_tp8", "8", "1", "8", "1", "16")
    uneven = row("x_c16_tp8_ep4", "8", "1", "2", "4", "16")
    assert sv.normalised(plain) == plain and sv.normalised(uneven) == uneven
    assert sv.concurrency(plain) == 16


def test_inferencex_multi_node_runs_recorded_as_one_tp_are_refused_by_name():
    # The sample's row 2026_04_06_deepseek_r1_gb200_trtllm_fp4_agg_1024x1024_c32_tp36_ep1_11: "agg", tp 36, ep 1, from
    # InferenceX's export; 36 GPUs is its Dynamo run's prefill and decode workers summed (benchmark-multinode-tmpl.yml's
    # TP=$gpus), which no single tensor-parallel engine of DeepSeek-R1 runs. The same layout from another source,
    # and InferenceX's single-node rows, are read as before.
    src = "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=32; measured=2025-11-17T00:00:00.000Z"
    multi = {**row("2026_04_06_deepseek_r1_gb200_trtllm_fp4_agg_1024x1024_c32_tp36_ep1_11", "36", "1", "36", "1", "32",
                   src), "system": "gb200", "precision": "fp4", "mode": "agg"}
    why = sv.layout(multi)
    assert isinstance(why, str) and "multi-node disaggregated" in why and "gb200" in why
    assert isinstance(sv.layout({**multi, "silicon_data_source": ""}), tuple)  # not InferenceX's: read as a TP 36
    assert isinstance(sv.layout({**multi, "system": "b200_sxm", "tp_size": "8", "moe_tp_size": "8"}), tuple)


def _build_row(rid, version, tp, tpot_ms, measured):
    """A row of the sample's columns that silicon_twins reads; the values of the first two are the sample's own
    (DeepSeek-R1 fp8 on 8 B200s, 1k/1k at 4 users: ids 2026_03_25_..._1190 on 1.2.0rc6.post2, TPOT 10.302 ms, and
    ..._1021 on 1.2.0rc6.post3, 5.380 ms)."""
    return {"id": rid, "silicon_data_source": f"silicon_concurrency=4; measured={measured}T00:00:00Z",
            "backend": "trtllm", "backend_version": version, "system": "b200_sxm", "model_path": "deepseek-ai/DeepSeek-R1",
            "precision": "fp8", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "isl": "1024", "osl": "1024",
            "tp_size": tp, "pp_size": "1", "attention_dp_size": "1", "moe_tp_size": tp, "moe_ep_size": "1",
            "batch_size": "4", "silicon_ttft_ms": "190", "silicon_tpot_ms": str(tpot_ms)}


def test_one_deployment_under_two_builds_is_a_group_and_its_spread_the_ratio_of_its_tpots():
    import silicon_twins as tw

    rows = [_build_row("a", "1.2.0rc6.post2", "8", 10.302094042642429, "2026-01-29"),
            _build_row("a-again", "1.2.0rc6.post2", "8", 10.302094042642429, "2026-01-29"),  # recorded twice: one run
            _build_row("b", "1.2.0rc6.post3", "8", 5.380109785005379, "2026-02-05"),
            _build_row("c", "1.2.0rc6.post3", "4", 6.0, "2026-02-05")]  # another layout: no twin
    groups = tw.groups(rows)
    assert [sorted(r["id"] for r in g) for g in groups] == [["a", "b"]]
    # 10.302 / 5.380 = 1.915
    assert abs(tw.spread(groups[0], "silicon_tpot_ms") - 10.302094042642429 / 5.380109785005379) < 1e-12
    assert tw.spread(groups[0], "silicon_ttft_ms") == 1.0
    assert tw.groups(rows[:2] + rows[3:]) == []  # one build only: not a group

def kv_row(rid, backend, version, model_path, precision):
    return {"id": rid, "backend": backend, "backend_version": version, "model_path": model_path, "precision": precision}


def test_tensorrt_llm_runs_a_modelopt_checkpoints_fp8_kv_cache():
    # TensorRT-LLM's KvCacheConfig.dtype default 'auto' follows the checkpoint's metadata (tensorrt_llm/llmapi/llm_args.py,
    # KvCacheConfig.dtype: "Use 'auto' to follow checkpoint metadata"); nvidia/DeepSeek-V3.1-NVFP4's hf_quant_config.json
    # says "kv_cache_quant_algo": "FP8" (aiconfigurator-core model_configs/nvidia--DeepSeek-V3.1-NVFP4_hf_quant_config.json)
    r = kv_row("nvidia_deepseek_v3_1_nvfp4_nvidia_deepseek_v3_1_nvfp4_b200_sxm_trtllm_agg_4000x1000_c448_tp8_epnone_1",
               "trtllm", "1.3.0rc5", "nvidia/DeepSeek-V3.1-NVFP4", "fp4")
    assert sv.kv_cache_dtype(r)[0] == "fp8"


def test_vllm_reads_the_checkpoints_kv_dtype_only_from_0_13():
    # vLLM 0.12.0's 'auto' is the model's dtype (gpu_model_runner.py: kv_cache_dtype = model_config.dtype when
    # cache_dtype == "auto"); resolving 'auto' from a ModelOpt kv_cache_quant_algo came with vllm-project/vllm PR #30785,
    # merged 2025-12-16, after 0.12.0. The row below ran vLLM 0.12.0, so its cache was bf16 though its checkpoint is FP8.
    r = kv_row("nvidia_llama_3_1_8b_instruct_fp8_nvidia_llama_3_1_8b_instruct_fp8_h200_sxm_vllm_agg_1000x100_c112_tp1_epnone_1",
               "vllm", "0.12.0", "nvidia/Llama-3.1-8B-Instruct-FP8", "fp8")
    assert sv.kv_cache_dtype(r)[0] == "bf16"
    assert sv.kv_cache_dtype({**r, "backend_version": "0.13.0"})[0] == "fp8"  # the same checkpoint on 0.13.0


def test_sglang_keeps_a_bf16_cache_for_a_checkpoint_stating_no_kv_quantisation():
    # DeepSeek-R1's own FP8 checkpoint: its config.json quantization_config (quant_method fp8, weight_block_size
    # [128, 128]) states no kv_cache_quant_algo, and SGLang's ModelRunner.configure_kv_cache_dtype takes 'auto' to FP8
    # only where the quant config's kv_cache_quant_algo is "FP8" (python/sglang/srt/model_executor/model_runner.py): bf16
    r = kv_row("2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c8_tp8_0_ep1_0_249", "sglang", "0.5.9",
               "deepseek-ai/DeepSeek-R1", "fp8")
    assert sv.kv_cache_dtype(r)[0] == "bf16"


def test_the_modelopt_kv_dtypes_read_from_the_package_agree_with_its_files():
    import json

    pytest.importorskip("aiconfigurator_core")
    from roofline.measured.tables import data_root

    for path, (kv, source) in sv.MODELOPT_KV.items():
        if source is not None:
            quant = json.loads((data_root().parent.parent / "model_configs" / source).read_text())["quantization"]
            assert str(quant["kv_cache_quant_algo"]).lower() == kv, path


# A row InferenceX measured, as the sample holds it (2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_1024x8192_c64_tp1_ep1_600)
IX_SOURCE = "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=64; measured=2025-10-29T00:00:00.000Z; wip=False"


def ix_row(**over):
    r = {"id": "2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_1024x8192_c64_tp1_ep1_600", "silicon_data_source": IX_SOURCE,
         "backend": "trtllm", "backend_version": "", "model_path": "meta-llama/Llama-3.1-70B", "system": "b200_sxm",
         "precision": "fp8", "mode": "agg", "isl": "1024", "osl": "8192"}
    return {**r, **over}


def test_an_inferencex_row_runs_the_kv_cache_its_launch_script_sets():
    # InferenceX's benchmarks/70b_fp8_b200_trt_slurm.sh (and _docker.sh) at 9596d23d7 (2025-10-29) write
    # `kv_cache_config:\n  dtype: fp8` into the extra LLM API options; the row's model_path names a bf16 checkpoint
    # whose 'auto' would be bf16. The measured TTFT of 0.35 s with 64 users of 1,024 + 8,192 tokens on one B200 says the
    # same: a bf16 cache of 64 x 9,216 tokens x 327,680 B (80 layers x 8 KV heads x 128 x 2 x 2 B) is 193 GB, which
    # beside 70 GB of fp8 weights is over the GPU's 192 GB (183,359 MiB), so a bf16 run would have queued users for a
    # whole 8k generation; an fp8 cache (97 GB) fits.
    kv, basis = sv.kv_cache_dtype(ix_row())
    assert kv == "fp8" and "InferenceX" in basis
    assert "benchmarks/70b_fp8_b200_trt_slurm.sh" in sv.inferencex_deployment(ix_row())["scripts"]
    assert sv.kv_cache_dtype(ix_row(silicon_data_source=""))[0] == "bf16"  # the same row from no known source: 'auto'
    assert sv.inferencex_deployment(ix_row(mode="disagg")) is None  # the table holds the single-node scripts only


def test_an_inferencex_row_is_driven_by_its_client_and_other_rows_by_fixed_lengths():
    # benchmark_serving.py --random-range-ratio 0.8 --num-prompts CONC x 10: lengths from int(0.8 L) to L, ten a user
    assert sv.client(ix_row()) == ("inferencex", 10, (819, 1024), (6553, 8192))
    assert sv.client(ix_row(silicon_data_source="source_file=/x/aic-auto-gap-analysis/data/a.csv; silicon_concurrency=64"),
                     per_user=4) == ("fixed", 4, 1024, 8192)


def test_the_inferencex_table_holds_only_settings_the_tool_can_run():
    for d in sv._inferencex_deployments():
        assert d["kv_cache"] in ("fp8", "auto"), d
        assert 0 < d.get("memory_fraction", 0.9) <= 1, d
        assert d["engine"] in ("vllm", "sglang", "trtllm") and len(d["commit"]) == 40 and d["scripts"], d
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d", x) for x in d["measured"]), d
        assert all(isinstance(d.get(k, 1), int) and d.get(k, 1) > 0 for k in ("max_tokens",)), d


def test_an_inferencex_rows_step_tokens_follow_its_script():
    # InferenceX's benchmarks/dsr1_fp8_b200_docker.sh at 189ae51cc (2025-11-18) launches SGLang with
    # `--chunked-prefill-size 32768 --max-prefill-tokens 32768` (SGLang's default on a B200: 16,384 and 16,384)
    src = "source_file=2026-04-06.csv; silicon_concurrency=64; measured=2025-11-18T00:00:00.000Z; wip=False"
    row = ix_row(backend="sglang", model_path="deepseek-ai/DeepSeek-R1", silicon_data_source=src)
    assert sv.inferencex_deployment(row)["max_tokens"] == 32768
    # 70b_fp8_b200_trt_slurm.sh at 9596d23d7 passes --max_num_tokens 16384 (inferencex_conditions.toml says so too)
    assert sv.inferencex_deployment(ix_row())["max_tokens"] == 16384
    # vLLM's gptoss_fp4_h100.sh at 79a42e20 computes nothing and writes max-num-batched-tokens: 8192 in its config
    gpt = ix_row(backend="vllm", model_path="openai/gpt-oss-120b", system="h100_sxm", precision="fp4",
                 silicon_data_source=src.replace("2025-11-18", "2026-03-27"))
    assert sv.inferencex_deployment(gpt)["max_tokens"] == 8192
    # ... and passes --max-cudagraph-capture-size 2048 and --max-num-seqs $CONC: vLLM replays a step with prompts of up
    # to 2,048 tokens as piecewise CUDA graphs (Engine.graph_tokens)
    assert sv.inferencex_deployment(gpt)["graph_tokens"] == 2048 and sv.inferencex_deployment(gpt)["max_seqs_users"]


def test_a_vllm_rows_piecewise_graphs_follow_vllms_rule():
    # kimik2.5_int4_h200.sh at 749096c4 passes --max-num-seqs $CONC and no capture size: vLLM's default
    # max_cudagraph_capture_size is min(2 x max_num_seqs, 512) = 8 at 4 users; gpt-oss-120b's script at 79a42e20 sets 2048
    pytest.importorskip("aiconfigurator_core")
    src = "source_file=2026-04-06.csv; silicon_concurrency=4; measured=2026-03-02T00:00:00.000Z; wip=False"
    kimi = ix_row(id="kimi_c4", backend="vllm", model_path="moonshotai/Kimi-K2.5", system="h200_sxm", precision="int4",
                  silicon_data_source=src, osl="1024", tp_size="8", pp_size="1", attention_dp_size="1", moe_tp_size="1",
                  moe_ep_size="1", batch_size="4", silicon_ttft_ms="300", silicon_tpot_ms="15")
    assert sv.inferencex_deployment(kimi)["max_seqs_users"]
    assert sv.run_row(kimi, overheads=sv.fitted_in_file(), eager=sv.eager_in_file())["graph_tokens"] == 8


def test_an_inferencex_rows_conditional_settings_follow_its_script():
    # InferenceX's benchmarks/70b_fp8_b200_trt_slurm.sh at 9596d23d7: `if [[ "$ISL" == "1024" && "$OSL" == "1024" &&
    # ${TP} -lt 8 ]]` writes batch_wait_max_tokens_ratio: 0.9 and batch_wait_timeout_iters: 20; every run passes
    # --max_num_tokens 16384
    one_k = ix_row(id="2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_1024x1024_c4_tp1_ep1_1", osl="1024")
    assert sv.inferencex_conditions(one_k, 1, 4, False) == {"batch_wait_steps": 20, "batch_wait_ratio": 0.9,
                                                            "max_tokens": 16384}
    assert sv.inferencex_conditions(one_k, 8, 4, False) == {"max_tokens": 16384}  # TP 8: no batch waiting
    assert sv.inferencex_conditions(ix_row(), 1, 4, False) == {"max_tokens": 16384}  # 1k/8k: none either
    assert sv.inferencex_conditions(ix_row(silicon_data_source=""), 1, 4, False) == {}  # not InferenceX's row


def test_an_inferencex_tensorrt_llm_run_balances_its_attention_dp_ranks_as_its_script_sets():
    # InferenceX's benchmarks/dsr1_fp8_b200_trt.sh at d7dbd045b: `if [[ "$DP_ATTENTION" == "true" ]]` appends
    # attention_dp_config: batching_wait_iters: 0, enable_balance: true, timeout_iters: 60; gptoss_fp4_b200_trt.sh at
    # the same commit appends enable_balance: true alone (TensorRT-LLM's AttentionDpConfig defaults: 50 and 10)
    src = "source_file=2026-04-06.csv; silicon_concurrency=64; measured=2026-02-05T00:00:00.000Z; wip=False"
    dsr1 = {"id": "x", "backend": "trtllm", "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
            "precision": "fp8", "mode": "agg", "isl": "8192", "osl": "1024", "silicon_data_source": src}
    adp = ("adp_timeout_steps", "adp_batching_steps")
    got = sv.inferencex_conditions(dsr1, 1, 64, True)
    assert {k: got[k] for k in adp} == {"adp_timeout_steps": 60, "adp_batching_steps": 0}
    assert "adp_timeout_steps" not in sv.inferencex_conditions(dsr1, 8, 64, False)  # no attention DP: not written
    oss = {**dsr1, "model_path": "openai/gpt-oss-120b", "precision": "fp4"}
    got = sv.inferencex_conditions(oss, 1, 64, True)
    assert {k: got[k] for k in adp} == {"adp_timeout_steps": 50, "adp_batching_steps": 10}


def test_an_inferencex_sglang_run_polls_as_its_script_sets():
    # InferenceX's benchmarks/single_node/dsr1_fp4_b200.sh at 12ba0ae07: SCHEDULER_RECV_INTERVAL=30 if [[ $CONC -ge 16 ]]
    # else 10, passed as --scheduler-recv-interval
    r = {"id": "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c4_tp4_ep1_38", "backend": "sglang",
         "backend_version": "0.5.9", "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "precision": "fp4",
         "mode": "agg", "isl": "1024", "osl": "1024",
         "silicon_data_source": "source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=4; "
                                "measured=2026-03-25T00:00:00.000Z; wip=False"}
    assert sv.inferencex_conditions(r, 4, 4, False) == {"recv_interval": 10}
    assert sv.inferencex_conditions(r, 4, 16, False) == {"recv_interval": 30}


def test_a_run_whose_id_names_its_tensor_parallelism_keeps_its_gpus():
    # qwen_..._h100_sxm_trtllm_agg_128x128_c16_tp4_epnone_16: tp_size 4, moe_tp 2, moe_ep 2, its id "tp4". Read as the
    # square of a 2-GPU split it asked 118 GB of weights of each of 2 H100s (Qwen3-235B-A22B-FP8: 235 GB); 4 GPUs
    rid = "qwen_qwen3_235b_a22b_fp8_qwen_qwen3_235b_a22b_fp8_h100_sxm_trtllm_agg_128x128_c16_tp4_epnone_16"
    r = {**row(rid, "4", "", "2", "2", "16"), "model_path": "Qwen/Qwen3-235B-A22B-FP8", "system": "h100_sxm"}
    assert sv.normalised(r) == r
    got = sv.layout(r)
    assert got[3] == 4 and got[4] == (4, 2)  # 4 GPUs: attention TP 4, each expert over 2 of them
