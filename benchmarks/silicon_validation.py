"""Predicted against measured deployments: the aggregated (co-located prefill and decode) rows of
``systems/silicon_sample.csv`` shipped with aiconfigurator-core (the roofline[measured] extra), each
a real engine run at a fixed concurrency with its measured mean TTFT and TPOT, simulated by
`roofline serving` with ONE set of settings (below), twice: on the plate's cost model and on the
engine's measured kernels (``--kernels ENGINE``). Nothing is fitted or tuned per row. The report
(median |error| by engine, GPU, model, concurrency band and GPU count, the refusals with their
reasons) goes to docs/serving-validation-measured.md.

    python benchmarks/silicon_validation.py [--out FILE] [--limit N] [--jobs J] [--mode agg|disagg|both]

The disaggregated rows (benchmarks/silicon_disagg.py) are reported in a section of their own.

With ROOFLINE_BENCH_SMOKE=1: a handful of rows, the report to a temporary directory.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from smoke import SMOKE, announce, output, smoke_or  # noqa: E402
import silicon_twins  # noqa: E402
from roofline.parameters import MOE_BACKENDS  # noqa: E402  (the MoE backends the measured tables tell apart)

# Our presets for the sample's models (DeepSeek-R1 is DeepSeek-V3's architecture), or a config aiconfigurator-core
# ships (CONFIGS): Qwen3.5-397B (Gated DeltaNet hybrid), Kimi-K2.5 (its compressed-tensors INT4 experts as stored
# where the row gives no narrower precision), GLM-5 (DeepSeek Sparse Attention).
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama3.1-8b", "nvidia/Llama-3.1-8B-Instruct-FP8": "llama3.1-8b",
          "meta-llama/Llama-3.1-70B": "llama3.1-70b", "Qwen/Qwen3-32B": "qwen3-32b", "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
          "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b", "deepseek-ai/DeepSeek-R1": "deepseek-v3",
          "deepseek-ai/DeepSeek-V3": "deepseek-v3", "nvidia/DeepSeek-R1-NVFP4": "deepseek-v3",
          "nvidia/DeepSeek-V3.1-NVFP4": "deepseek-v3", "openai/gpt-oss-120b": "gpt-oss-120b",
          "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5", "Qwen/Qwen3.5-397B-A17B": "qwen3.5-397b-a17b",
          "moonshotai/Kimi-K2.5": "kimi-k2.5", "zhipuai/GLM-5": "glm-5"}
# models read from the config.json aiconfigurator-core ships (its model_configs/), by our label
CONFIGS = {"minimax-m2.5": "MiniMaxAI--MiniMax-M2.5_config.json", "qwen3.5-397b-a17b": "Qwen--Qwen3.5-397B-A17B_config.json",
           "kimi-k2.5": "moonshotai--Kimi-K2.5_config.json", "glm-5": "zai-org--GLM-5_config.json"}
GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "gb200": "gb200", "b300_sxm": "b300", "gb300": "gb300"}
DTYPES = {"fp8": "fp8", "fp4": "fp4", "bf16": "bf16", "": "bf16", "int4": "int4"}  # the row's precision; none: bf16
# Checkpoints whose own storage the row's precision names: (model_path, precision) -> served as stored (STORED), not as
# --dtype. openai/gpt-oss-120b ships MXFP4 experts and bf16 the rest (its config.json quantization_config mxfp4, with
# attention, router, embeddings and LM head in modules_to_not_convert); the sample labels its rows fp4 / nvfp4, and the
# engines serve the checkpoint as it is (aiconfigurator-core maps mxfp4 to bf16 GEMMs and w4a16_mxfp4 experts:
# sdk/models/helpers.py). As --dtype fp4 its experts were NVFP4, which no MoE table on Hopper holds: priced on the
# plate's cost model at 2.7x under the measured w4a16_mxfp4 module (h200 trtllm, 4 tokens: 125 us a layer, issue 35).
# The routed experts then compute as the row's engine runs them: serving.engines.engine_precision, the rule of
# data/engines.toml that `roofline serving --engine` and /api/serving apply too (TensorRT-LLM on Blackwell: MXFP8
# activations into the MXFP4 experts, its tables' w4a8_mxfp4_mxfp8 rows; bf16 elsewhere).
# DeepSeek-R1/V3's fp4 rows (all InferenceX's) ran NVIDIA's ModelOpt NVFP4 exports (InferenceX's configs name
# nvidia/DeepSeek-R1-0528-FP4-v2, and -FP4 at older commits), which keep MLA's low-rank projections (q_a, q_b,
# kv_a_proj_with_mqa, kv_b) in bf16 (exclude_modules) and store the rest of the layers' matmuls in NVFP4 (the v2 its
# attention output projection too, the v1 not: huggingface.co/nvidia/DeepSeek-R1-0528-NVFP4-v2 model card). Served as
# stored from the export of the same architecture aiconfigurator-core ships with its hf_quant_config.json
# (STORED_CONFIGS: nvidia/DeepSeek-V3.1-NVFP4, the v2 layout), where --dtype fp4 had run every matmul in fp4 (the
# projections' small-batch NVFP4 GEMMs 19 us each on a B200 against 8 us in bf16).
# moonshotai/Kimi-K2.5 is INT4 as Moonshot ships it: compressed-tensors W4A16 (group 32) on the routed experts only, its
# ignore list keeping attention, the shared experts, the dense layer's MLP and the LM head bf16 (the config.json
# aiconfigurator-core ships); the sample labels its rows int4 (gemm_quant_mode int4_wo), which as --dtype int4 had
# run every matmul as INT4 weights. vLLM runs the experts on its Marlin W4A16 MoE (the tables' int4_wo rows).
STORED = "as stored"  # the dtype of an AS_STORED row
AS_STORED = {("openai/gpt-oss-120b", "fp4"), ("deepseek-ai/DeepSeek-R1", "fp4"), ("deepseek-ai/DeepSeek-V3", "fp4"),
             ("nvidia/DeepSeek-R1-NVFP4", "fp4"), ("nvidia/DeepSeek-V3.1-NVFP4", "fp4"), ("moonshotai/Kimi-K2.5", "int4")}
STORED_CONFIGS = {"deepseek-v3": "nvidia--DeepSeek-V3.1-NVFP4_config.json"}  # model -> the checkpoint served as stored
# Checkpoints whose config.json quantization_config scales fp8 weights per 128 x 128 block ("weight_block_size":
# [128, 128]: DeepSeek-V3 and R1, Qwen3's own -FP8 releases): their GEMMs and experts read the tables' fp8_block rows
# (MeasuredKernels.fp8_scaling "block"); every other fp8 row is per-tensor (ModelOpt checkpoints, and the base
# models quantised by the engine on load).
BLOCK_FP8 = {"deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-235B-A22B-FP8", "MiniMaxAI/MiniMax-M2.5",
             "Qwen/Qwen3.5-397B-A17B", "zhipuai/GLM-5"}  # Qwen3.5 and GLM-5: the sample's own moe_quant_mode fp8_block
# The KV cache's dtype as each deployment ran it (kv_cache_dtype): the sample states none, so each row's engine's default
# 'auto' applied to the checkpoint the row names (`model_path`). The ModelOpt exports the sample names, with the
# kv_cache_quant_algo of their hf_quant_config.json: aiconfigurator-core ships the file for one of them (model_configs/,
# checked by tests/test_measured_silicon.py); the other three are NVIDIA's ModelOpt exports whose file it does not ship,
# taken as FP8, as every single-format NVIDIA export whose file it ships states (21 of 21, among them
# nvidia--Llama-3.1-70B-Instruct-FP8, the 70B sibling of the 8B export, and nvidia--Qwen3-235B-A22B-NVFP4) and as
# nvidia/Qwen3-30B-A3B-NVFP4's does (vllm-project/vllm issue #34752): assumed, said in the report. Every other checkpoint
# the sample names states no KV quantisation (its config.json quantization_config has none: DeepSeek-V3/R1, the -FP8
# releases; MXFP4 gpt-oss; compressed-tensors Kimi-K2.5 without a kv_cache_scheme; the rest bf16).
MODELOPT_KV = {"nvidia/DeepSeek-V3.1-NVFP4": ("fp8", "nvidia--DeepSeek-V3.1-NVFP4_hf_quant_config.json"),
               "nvidia/DeepSeek-R1-NVFP4": ("fp8", None), "nvidia/Qwen3-32B-NVFP4": ("fp8", None),
               "nvidia/Llama-3.1-8B-Instruct-FP8": ("fp8", None)}
VLLM_FOLLOWS_CHECKPOINT_KV = (0, 13)  # vLLM resolves 'auto' from a ModelOpt kv_cache_quant_algo from this release on


@functools.lru_cache(maxsize=None)
def _inferencex_table(name: str, key: str) -> tuple[dict, ...]:
    """The entries (``key``) of benchmarks/``name``: InferenceX's scripts as read for its rows."""
    import tomllib

    with open(Path(__file__).with_name(name), "rb") as f:
        return tuple(tomllib.load(f)[key])


def _inferencex_deployments() -> tuple[dict, ...]:
    return _inferencex_table("inferencex_deployments.toml", "deployment")


@functools.cache
def _speculated() -> dict:
    """{row id: entry} of InferenceX's rows that ran MTP, or may have (benchmarks/inferencex_speculation.toml)."""
    import tomllib

    with open(Path(__file__).with_name("inferencex_speculation.toml"), "rb") as f:
        return tomllib.load(f)["rows"]


# InferenceX's vLLM rows: the sample's tp_size, attention_dp_size and moe_ep_size are not the server's (the same config,
# MiniMax-M2.5 FP8 on 4 B200s with `ep: 4`, recorded once as tp 4 with moe_ep 4 and once as tp 4 x attention_dp 4 with
# moe_ep 16: 16 GPUs on an 8-GPU node), so their layout is read from the launch script that ran them
# (benchmarks/inferencex_layouts.py: tensor-parallel over the config's tp GPUs, the experts whole over them where the
# script passes --enable-expert-parallel, data-parallel attention only where it passes --data-parallel-size).
VLLM_LAYOUTS = Path(__file__).with_name("inferencex_layouts.toml")


@functools.cache
def _vllm_layouts() -> dict:
    """{row id: entry} of InferenceX's vLLM rows as their launch scripts laid them out (VLLM_LAYOUTS)."""
    import tomllib

    with open(VLLM_LAYOUTS, "rb") as f:
        return tomllib.load(f)["rows"]


def speculation_refusal(r: dict) -> str | None:
    """Why a row InferenceX ran with MTP speculative decoding (or with an image that served configs with and without
    it) is not simulated: its acceptance, which sets its time per output token, is not in the sample; else None."""
    got = _speculated().get(r.get("id", ""))
    if got is None:
        return None
    configs = ", ".join(got["configs"])
    if got["speculation"] == "mtp":
        return (f"InferenceX ran it with MTP speculative decoding ({configs} at {got['commit']}): the acceptance it "
                "saw is not in the sample (benchmarks/inferencex_speculation.py)")
    return (f"InferenceX's configs at {got['commit']} serve its image with and without MTP at its lengths and users "
            f"({configs}): which measured it is not in the sample (benchmarks/inferencex_speculation.py)")


def is_inferencex(r: dict) -> bool:
    """Whether InferenceX measured the row (its source: INFERENCEX_SOURCE)."""
    return bool(INFERENCEX_SOURCE.match(r.get("silicon_data_source", "")))


def _inferencex_date(r: dict) -> str | None:
    """The measured date of an aggregated row InferenceX measured (its single-node scripts'), else None."""
    m = re.search(r"measured=(\d{4}-\d\d-\d\d)", r.get("silicon_data_source", ""))
    return m.group(1) if m and is_inferencex(r) and r.get("mode") == "agg" else None


def inferencex_deployment(r: dict) -> dict | None:
    """The InferenceX launch script's settings for a row it measured (inferencex_deployments.toml: the script at the
    last commit on or before the row's measured date), or None (not an InferenceX row, or its script not found)."""
    date = _inferencex_date(r)
    if date is None:
        return None
    for d in _inferencex_deployments():
        if (d["model_path"], d["engine"], d["system"], d["precision"]) == (
                r["model_path"], r["backend"], r["system"], r["precision"]) and date in d["measured"]:
            return d
    return None


# vLLM's async scheduling: on by default from v0.14.0 ("Async scheduling is now enabled by default", vLLM v0.14.0's
# release notes, PR #27614: "overlaps engine core scheduling with GPU execution"), opt-in (--async-scheduling) before
VLLM_ASYNC_FROM = (0, 14)
VLLM_ASYNC_RELEASED = "2026-01-20"  # v0.14.0's release: a nightly measured after it has the default


def vllm_async(r: dict, deployed: dict) -> tuple[bool, str]:
    """Whether a vLLM row ran with async scheduling, and why: its launch script's setting where InferenceX's
    script sets one (inferencex_deployments.toml async_scheduling), else vLLM's default at the row's version
    (backend_version, or the image its source names; a nightly by its measured date), else off (the
    version unknown: the default before v0.14.0)."""
    said = deployed.get("async_scheduling")
    if said in ("on", "off"):
        return said == "on", f"its launch script turns async scheduling {said}"
    src = r.get("silicon_data_source", "")
    version = (r.get("backend_version") or "").strip()
    image = re.search(r"vllm-openai:v([\d.]+)", src)
    if image and not re.match(r"\d", version):
        version = image.group(1)
    if re.match(r"\d", version):
        on = tuple(int(x) for x in re.findall(r"\d+", version)[:2]) >= VLLM_ASYNC_FROM
        return on, f"vLLM {version}'s default ({'on from' if on else 'off before'} v0.14.0)"
    date = re.search(r"measured=(\d{4}-\d\d-\d\d)", src)
    if version.startswith("nightly") and date:
        on = date.group(1) > VLLM_ASYNC_RELEASED
        return on, f"a nightly of {date.group(1)}: vLLM's default then ({'on' if on else 'off'})"
    return False, "the version unknown: vLLM's default before v0.14.0 (off)"


def inferencex_conditions(r: dict, tp: int, users: int, attention_dp: bool) -> dict:
    """The settings InferenceX's launch script gave this row's run under its conditions (inferencex_conditions.toml:
    read by hand from the script), merged in file order; {} for a row InferenceX did not measure or none applies."""
    date = _inferencex_date(r)
    if date is None:
        return {}
    out: dict = {}
    for c in _inferencex_table("inferencex_conditions.toml", "condition"):
        w = c["when"]
        if (c["model_path"], c["engine"]) != (r["model_path"], r["backend"]) or r["system"] not in c["systems"] \
                or r["precision"] not in c["precisions"] or date not in c["measured"]:
            continue
        if ("isl" in w and _int(r["isl"]) != w["isl"]) or ("osl" in w and _int(r["osl"]) != w["osl"]) or \
                ("tp" in w and tp != w["tp"]) or ("tp_below" in w and tp >= w["tp_below"]) or ("conc_from" in w and users < w["conc_from"]) or \
                ("conc_below" in w and users >= w["conc_below"]) or \
                ("attention_dp" in w and attention_dp != w["attention_dp"]):
            continue
        out.update({k: v for k, v in c.items() if k in ("batch_wait_steps", "batch_wait_ratio", "max_tokens",
                                                          "recv_interval", "moe_backend", "adp_timeout_steps",
                                                          "adp_batching_steps", "layout")})
    return out


def script_layout(r: dict) -> dict | None:
    """How an InferenceX run laid out its GPUs where its launch script, not the sample, says so: {"layout": "tp",
    "tp_ep", "dp_ep" or "unknown", "gpus": N, "basis": where it was read}, else None (the sample's layout stands).
    vLLM's rows from inferencex_layouts.toml (benchmarks/inferencex_layouts.py); TensorRT-LLM's rows of the scripts that
    chose EP_SIZE and DP_ATTENTION themselves (inferencex_conditions.toml's `layout`), where the sample records the
    run as plain tensor parallelism (tp = moe_tp, moe_ep 1, no attention DP)."""
    if not is_inferencex(r):
        return None
    if r["backend"] == "vllm":
        got = _vllm_layouts().get(r.get("id", ""))
        return None if got is None else {**got, "basis": f"{got['script']} at {got['commit']} (inferencex_layouts.toml)"}
    tp = _int(r["tp_size"])
    if r["backend"] != "trtllm" or _int(r["attention_dp_size"]) != 1 or _int(r["moe_ep_size"]) != 1 or \
            _int(r["moe_tp_size"]) != tp:
        return None
    got = inferencex_conditions(r, tp, concurrency(r), False).get("layout")
    if got is None:
        return None
    return {"layout": got, "gpus": tp, "basis": "its script's EP_SIZE and DP_ATTENTION (inferencex_conditions.toml)"}


def kv_cache_dtype(r: dict) -> tuple[str, str]:
    """(the KV cache's dtype, why) for a row as its engine ran it: the engine's default kv-cache dtype 'auto' (also what
    aiconfigurator's generator writes for a bf16 cache: generator/config/backend_config_mapping.yaml, kv_cache_dtype)
    applied to the checkpoint the row names: its kv_cache_quant_algo (MODELOPT_KV) where the engine reads it, else the
    model's dtype, bf16. Where each engine's 'auto' reads the checkpoint:
    - TensorRT-LLM (the PyTorch backend, every version in the sample): KvCacheConfig.dtype "'auto' to follow checkpoint
      metadata" (tensorrt_llm/llmapi/llm_args.py, KvCacheConfig.dtype; the PyTorch flow reads hf_quant_config.json's
      kv_cache_quant_algo into its QuantConfig);
    - vLLM from 0.13.0: CacheConfig resolves 'auto' to a ModelOpt checkpoint's kv_cache_quant_algo (vllm-project/vllm
      PR #30785, merged 2025-12-16, after 0.12.0: vllm/engine/arg_utils.py with resolve_kv_cache_dtype_string in
      vllm/utils/torch_utils.py); 0.12.0 and older: 'auto' is the model's dtype (gpu_model_runner.py: kv_cache_dtype =
      model_config.dtype); a version the row does not state (or a nightly): the newer rule;
    - SGLang: ModelRunner.configure_kv_cache_dtype, 'auto' with the quant config's kv_cache_quant_algo FP8 gives
      fp8_e4m3 (python/sglang/srt/model_executor/model_runner.py); no SGLang row names a ModelOpt export.
    Not assumed: that a deployment set --kv-cache-dtype itself (aiconfigurator's generator writes its estimate's
    kvcache_quant_mode, generator/module_bridge.py, which it infers as fp8 for any fp8 or fp4 checkpoint since its PR
    #338 of 2026-02-11; the sample does not say which rows the generator deployed)."""
    deployed = inferencex_deployment(r)
    if deployed is not None and deployed["kv_cache"] != "auto":
        return deployed["kv_cache"], "InferenceX's launch script sets it (benchmarks/inferencex_deployments.toml)"
    kv, source = MODELOPT_KV.get(r["model_path"], (None, None))
    if kv is None:
        return "bf16", "the checkpoint the row names states no KV quantisation: 'auto' is the model's dtype"
    engine, version = r["backend"], (r.get("backend_version") or "").strip()
    stated = f"{r['model_path']} states kv_cache_quant_algo FP8" + (f" ({source})" if source else " (assumed: "
                                                                                                   "NVIDIA's exports do)")
    if engine == "vllm" and re.match(r"\d", version) and tuple(map(int, re.findall(r"\d+", version)[:2])) < \
            VLLM_FOLLOWS_CHECKPOINT_KV:
        return "bf16", f"{stated}, but vLLM {version}'s 'auto' is the model's dtype (read from the checkpoint from 0.13.0)"
    return kv, f"{stated} and {engine}'s 'auto' follows it"

# The one set of settings for every row (stated in the report).
# Tensor-parallel attention with the experts split over the same GPUs (the engines' expert parallelism without
# data-parallel attention): `--ep --attention-dp 1`, one attention group (StepLayout.one_group: the all-reduce after
# the MoE sums the experts' outputs, no all-to-all), each GPU's experts timed by the tables' rows of that split
# (moe_ep, moe_tp: measured.moe's expert-parallel sites), where costing them as tensor parallelism read the moe_tp
# rows, d_ff / g wide: 2.3x slower at 4,096 tokens for Qwen3 235B on an H100 (TensorRT-LLM's fp8_block module).
# Routing imbalance is not modelled. Its rows are shown apart ("TP, MoE EP").
# Each row's engine as it runs by default (`--engine`: data/engines.toml, serving/engines.py), driven by the row's
# measured concurrency (concurrency(): `batch_size` is the engine's batch per attention-DP rank, so an 8-rank row of
# batch 8 ran 64 users), its max_seqs raised to that concurrency where that is more (a deployment benchmarked at
# concurrency c admits c: on the rows whose concurrency is over batch x ranks, measured TPOTs of 3-10x the lone
# batch's say the engine ran them all rather than queueing them).
# The one constant fitted from these rows: each engine's own time per step (scheduling, sampling, detokenising,
# streaming: what a step costs beyond the GPU's work), the median over the FIT_MODELS rows of measured minus predicted
# TPOT on the engine's kernels (a step adds its time to every output token), at least 0; reported on the other models.
# The second (--fit-eager): the host's time per op of a step outside a CUDA graph (Engine.eager_op_s: a prompt step's
# ops, dispatched one by one), one figure for the three engines: of EAGER_GRID, the one whose run on the FIT_MODELS
# rows, each engine's time per step refitted with it as above, gives the least sum of the median |error| of TPOT and
# of TTFT over all of them; reported on the other models. The grid's table shows each engine's errors apart too: the
# engines dispatch their prompt steps unalike (vLLM runs its torch.compile'd graph, SGLang eager PyTorch, TensorRT-LLM
# its fused custom ops), but a figure per engine, each fitted on its own fitting rows (tried 2026-12-07: TensorRT-LLM
# 60 us, SGLang 120 us, vLLM 0 us), took the held-out TTFT from 25% to 38%: vLLM's fitting rows (aiconfigurator's own
# v0.12 runs, their client a stand-in) over-predict its first token at every figure (77% at none), pulling its figure
# to 0, where InferenceX's held-out vLLM runs want about 80 us (docs/serving-validation.md).
FIT_MODELS = ("llama3.1-8b", "qwen3-32b", "deepseek-v3")
EAGER_GRID = tuple(i * 20e-6 for i in range(9))  # 0, 20, ..., 160 us an op
# Engines whose aggregated deployments ran prompt chunks beside the decodes in one step though the engine's own default
# does not: aiconfigurator's generator sets SGLang's --enable-mixed-chunk for every aggregated worker
# (ai-dynamo/aiconfigurator src/aiconfigurator/generator/rule_plugin/sglang.rule and benchmark/sglang.rule,
# `agg enable_mixed_chunk = true`, since PR #258 of 2026-01-19). Applied to the rows the sample does not attribute
# (the generator's pipeline may have deployed them); not to InferenceX's rows, whose SGLang scripts pass no
# --enable-mixed-chunk (none under its benchmarks/ at the rows' commits): SGLang's own default for those.
MIXED_AS_DEPLOYED = ("sglang",)
# The client as aiconfigurator's generated benchmark runs it (ai-dynamo/aiconfigurator, src/aiconfigurator/generator/
# config/backend_templates/benchmark/bench_run.sh.j2): `aiperf profile --concurrency C --num-requests C x 20
# --warmup-request-count C x 2 --streaming`, ignore_eos; aiperf's warmup phase drains before its profiling phase starts
# (ai-dynamo/aiperf, aiperf/timing/credit_issuing_strategy.py, _execute_phases), which sends C requests at once and
# each user its next as its last ends: 20 requests a user, all measured, from an idle engine. For the rows InferenceX
# measured (below) the client is known and run as it ran (client()); for the rest the sample does not say
# which client measured its older rows: they are run as aiconfigurator's benchmark runs aiperf, 20 requests a user.
# Until 2026-12-07 the report kept 4 a user as a stand-in (a deterministic loop's later waves staggered perfectly and
# put the TTFT under the measured); since the ninth pass (engines planning ahead, a closed loop's send missing the
# step planned as it is sent) 20 leaves the held-out figures unchanged and takes the fitting rows' TTFT from 44% to
# 34% off (docs/serving-validation.md, the ninth and tenth passes).
REQUESTS_PER_USER = 20  # closed loop: each of the row's users sends this many requests (at least MIN_REQUESTS in all)
MIN_REQUESTS = 32
# The rows InferenceX measured (SemiAnalysisAI/InferenceX, formerly InferenceMAX): the sample's dated exports
# (`source_file=2026-03-25.csv`, `2026-04-06.csv`) and its database dump (`db-dump/...; workflow_run_id=...; IMAGE`)
# are that project's nightly sweeps: its models (Llama 3.1 70B until it was dropped on 2025-10-29, the last date these
# rows were measured; DeepSeek-R1, gpt-oss-120b, Qwen3.5-397B, GLM-5, Kimi-K2.5, MiniMax-M2.5), its three lengths
# (1k/1k, 1k/8k, 8k/1k) and its concurrencies (4-64 and up). Its client, every script through benchmarks/
# benchmark_lib.sh: utils/bench_serving/benchmark_serving.py --dataset-name random --random-range-ratio 0.8
# (.github/workflows/benchmark-tmpl.yml RANDOM_RANGE_RATIO) --num-prompts CONC x 10 --max-concurrency CONC
# --request-rate inf --ignore-eos, with 2 x CONC warm-up requests drained first: each prompt and output length drawn
# uniform from [0.8 L, L] (sample_random_requests: np.random.randint(int(L x 0.8), L + 1)), ten requests a user.
INFERENCEX_SOURCE = re.compile(r"^(source_file=\d{4}-\d\d-\d\d\.csv;|db-dump/)")
INFERENCEX_PER_USER, INFERENCEX_RANGE_RATIO = 10, 0.8


CLIENTS = ("as-measured", "fixed")  # --client: each row's own where its source names it, or the fixed stand-in for all


def client(r: dict, per_user: int = REQUESTS_PER_USER, kind: str = "as-measured") -> tuple[str, int, object, object]:
    """(which client, requests a user, prompt lengths, output lengths) as closed_requests takes them: InferenceX's
    benchmark_serving for its rows (``kind`` "as-measured"), else fixed lengths with ``per_user`` requests a user (the
    stand-in above)."""
    isl, osl = _int(r["isl"]), _int(r["osl"])
    if kind == "as-measured" and is_inferencex(r):
        ratio = INFERENCEX_RANGE_RATIO
        return "inferencex", INFERENCEX_PER_USER, (int(isl * ratio), isl), (int(osl * ratio), osl)
    return "fixed", per_user, isl, osl


def settings_text(per_user: int = REQUESTS_PER_USER, kind: str = "as-measured") -> str:
    return ("flash attention; each row's engine as it runs by default (`--engine ENGINE`: its scheduler, chunked "
            "prefill or not (SGLang with --enable-mixed-chunk on the rows not InferenceX's, as aiconfigurator's generator deploys it), token budget, cache blocks and memory share, each cited in data/engines.toml), its "
            "max_seqs raised to the row's concurrency where that is more (under attention data parallelism the "
            "sequence and token budgets a rank's for TensorRT-LLM and vLLM, times the ranks), and an engine that feeds whole prompts "
            "(TensorRT-LLM) its token budget raised to a prompt plus a token per user where that is more (else a long "
            "prompt never starts beside the decodes); a CUDA graph for decode-only steps; a closed loop of the row's "
            f"measured concurrency (`silicon_concurrency`, or the id's c; the sample's batch_size is an attention-DP rank's) "
            + ("driven as its client drove it where the sample's source names the client (InferenceX's rows: "
               f"benchmark_serving, {INFERENCEX_PER_USER} requests a user, each prompt and output length drawn uniform "
               f"from {INFERENCEX_RANGE_RATIO:g}-1x the row's), else " if kind == "as-measured" else "") +
            f"{per_user} requests a user (at least {MIN_REQUESTS}) of the row's input and output length ("
            + ("as aiconfigurator's generated benchmark runs aiperf; the sample does not name the client of these rows"
               if kind == "as-measured" else "--client fixed, for every row") + "); InferenceX's rows also as its launch "
            "scripts set them (benchmarks/inferencex_deployments.toml: their KV-cache dtype and a memory share given as "
            "one number, SGLang without mixed chunks; benchmarks/inferencex_conditions.toml, where a script sets them "
            "under conditions of the run: TensorRT-LLM's batch waiting (--batch-wait-steps, --batch-wait-ratio), its "
            "attention-DP balance (--adp-timeout-steps, --adp-batching-steps) and "
            "--max_num_tokens, SGLang's --scheduler-recv-interval (--recv-interval)); the row's precision as `--dtype` (fp8: W8A8); any other row's KV cache as its engine's default 'auto' "
            "ran it on the checkpoint the row names (the sample states none; kv_cache_dtype()): fp8 where that checkpoint "
            "is a ModelOpt export stating kv_cache_quant_algo FP8 and the engine reads it (TensorRT-LLM, SGLang, vLLM "
            "from 0.13.0; nvidia/DeepSeek-V3.1-NVFP4 read from the file aiconfigurator-core ships, the other nvidia/ "
            "exports' FP8 assumed, as every NVIDIA export whose file it ships states), else bf16 (no row's own "
            "--kv-cache-dtype is assumed); no precision given: bf16; fp8 as "
            "block-scaled (`--fp8-scaling block`) for the checkpoints that are (DeepSeek-V3/R1, Qwen3-235B-A22B-FP8, MiniMax-M2.5: "
            "weight_block_size [128, 128] in their config.json; Qwen3.5-397B and GLM-5: the sample's moe_quant_mode "
            "fp8_block), else per-tensor; a GB200's 72 GPUs joined by its NVLink (--gpus-per-node 72); the row's tensor parallelism (its experts "
            "split over the same GPUs: `--ep --attention-dp 1`, the experts timed at the row's MoE split, 'TP, MoE EP'), or with attention data "
            "parallelism `--ep` over the tp x dp GPUs with the row's attention TP (`--attention-dp`) and MoE TP "
            "(each expert split over moe_tp GPUs: all-gather and reduce-scatter, TensorRT-LLM's; a vLLM row with "
            "data parallelism and no MoE layout stated: MoE TP over all its GPUs, vLLM's default without expert "
            "parallelism); InferenceX's vLLM rows on the GPUs and layout their launch scripts ran (benchmarks/"
            "inferencex_layouts.toml: the config's tp GPUs, tensor-parallel, the experts whole over them where the script "
            "passes --enable-expert-parallel, data-parallel attention where it passes --data-parallel-size; the sample "
            "records a config's ep as data parallelism), and its TensorRT-LLM rows of 2025-11-02 as their scripts chose "
            "EP_SIZE and DP_ATTENTION (inferencex_conditions.toml `layout`; the sample records them tensor-parallel, "
            "moe_ep 1); mean TTFT and TPOT compared. "
            "`plate`: the workshop plate's cost model (e_c 0.70, e_m 0.85, launch 3 us); `kernels`: the row's engine's "
            "measured kernels on its GPU at the row's engine version where the tables hold it, else the version the "
            "package queries by default")


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [normalised(r) for r in csv.DictReader(f) if r["mode"] == "agg"]


def normalised(r: dict) -> dict:
    """The row with its layout as deployed: where a run is recorded with its tensor (or attention data)
    parallelism as the product of its MoE split, X x X for X GPUs (tp_size X^2, moe_tp_size X, moe_ep_size
    X: the sample holds the same run again as tp X with moe_ep X, the same TTFT and TPOT to every digit,
    80 runs recorded both ways), the X GPUs' layout: attention TP X (or DP X, its per-rank batch_size
    times X), experts EP X. Every other row as it is, and a row whose id names its tensor parallelism as its
    tp_size (`_tp4_` for tp_size 4, moe 2 x 2: Qwen3-235B-A22B-FP8 on H100s, whose 235 GB of weights two GPUs cannot
    hold) as it is recorded: 4 GPUs, MoE TP 2 x EP 2."""
    tp, dp, mtp, mep = (_int(r[k]) for k in ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"))
    named = re.search(r"_tp(\d+)_", r.get("id", ""))
    if not mtp == mep > 1 or (named and int(named.group(1)) == tp):
        return r
    if dp == 1 and tp == mtp * mep:
        return {**r, "tp_size": str(mtp), "moe_tp_size": "1"}
    if tp == 1 and dp == mtp * mep:
        return {**r, "attention_dp_size": str(mtp), "moe_tp_size": "1", "batch_size": str(_int(r["batch_size"]) * mtp)}
    return r


def _int(x: str, default: int = 1) -> int:
    try:
        v = float(x)
    except ValueError:
        return default
    return int(v) if v == v and v > 0 else default


# InferenceX's GB200 rows are its multi-node runs: Dynamo's disaggregated deployments (.github/workflows/gb200-tests.yml,
# frameworks dynamo-trtllm and dynamo-sglang, through runners/launch_gb200-nv.sh's submit_disagg.sh, at the rows'
# measured date 2025-11-17), whose results .github/workflows/benchmark-multinode-tmpl.yml records with `TP=$gpus
# EP_SIZE=1 DP_ATTENTION=false`: the prefill and decode workers' GPUs summed as one tensor-parallel size (12-72), as an
# aggregated row. Their split in prefill and decode workers, each worker's layout and MTP are not in the sample: refused.
INFERENCEX_MULTI_NODE = ("gb200",)


def layout(r: dict):
    """(model, machine, dtype, gpus, expert_parallel, label) for a row, or a refusal's reason (a str).
    Tensor-parallel attention with the experts split over the same GPUs (MoE EP, or MoE TP x EP) is
    one attention group of tp GPUs, (tp, moe_tp) (the comment above run_row's settings). With attention data parallelism (aiconfigurator's
    tp_size x attention_dp_size GPUs = moe_tp_size x moe_ep_size), ``expert_parallel`` is the pair
    (attention_tp, expert_tp) of StepLayout: attention tensor-parallel over tp_size in each of
    attention_dp_size groups, each expert over moe_tp_size GPUs, the experts over moe_ep_size; False
    without expert parallelism."""
    model = MODELS.get(r["model_path"])
    if model is None:
        return f"no preset for {r['model_path']} (issue 36)"
    machine = GPUS.get(r["system"])
    if machine is None:
        return f"no machine preset for {r['system']}"
    speculated = speculation_refusal(r)
    if speculated:
        return speculated
    if r["system"] in INFERENCEX_MULTI_NODE and is_inferencex(r) and r.get("mode") == "agg":
        return (f"InferenceX's {r['system']} runs are multi-node disaggregated (Dynamo) deployments, their GPUs summed "
                "as one TP: the prefill/decode split is not in the sample")
    prec = (r["precision"] or "").strip()
    if prec not in DTYPES:
        return f"precision {prec!r}"
    tp, dp, pp = _int(r["tp_size"]), _int(r["attention_dp_size"]), _int(r["pp_size"])
    mtp, mep = _int(r["moe_tp_size"]), _int(r["moe_ep_size"])
    if pp > 1:
        return "pipeline parallelism in the sample (not mapped)"
    dtype = STORED if (r["model_path"], prec) in AS_STORED else DTYPES[prec]
    launched = script_layout(r)
    if launched is not None:  # InferenceX's runs as their launch scripts laid them out (script_layout)
        g = int(launched["gpus"])
        if launched["layout"] == "unknown":
            return (f"InferenceX's launch script ({launched['basis']}) takes data-parallel attention "
                    f"from the config, and the configs matched ({', '.join(launched['configs']) or 'none'}) run it both ways "
                    "or none matched: which one measured it is not in the sample (benchmarks/inferencex_layouts.py)")
        if launched["layout"] == "dp_ep" and g > 1:
            return model, machine, dtype, g, (1, 1), "EP"
        if launched["layout"] == "tp_ep" and g > 1:
            return model, machine, dtype, g, (g, 1), "TP, MoE EP"
        return model, machine, dtype, g, False, "TP"
    if dp == 1 and mep == 1:
        return model, machine, dtype, tp, False, "TP"
    if tp == 1 and dp == mep and mtp == 1:
        return model, machine, dtype, dp, (1, 1), "EP"
    if dp == 1 and mtp * mep == tp:
        return model, machine, dtype, tp, (tp, mtp), "TP, MoE EP"
    g = tp * dp
    if dp > 1 and r["backend"] == "vllm" and _int(r["moe_tp_size"], 0) == _int(r["moe_ep_size"], 0) == 0:
        # no MoE layout stated: vLLM's data parallelism without --enable-expert-parallel splits the experts
        # tensor-parallel over all DP x TP GPUs (docs.vllm.ai/en/latest/serving/data_parallel_deployment.html)
        mtp, mep = g, 1
    if dp > 1 and mtp * mep == g:
        label = (f"attn TP{tp} x DP{dp}, MoE " + (f"TP{mtp} x " if mtp > 1 else "") + f"EP{mep}") if mep > 1 else \
            f"attn TP{tp} x DP{dp}, MoE TP{mtp}"
        return model, machine, dtype, g, (tp, mtp), label
    return f"attention TP {tp} x DP {dp} with MoE TP {mtp} x EP {mep}: the GPUs do not agree (tp x dp != moe tp x ep)"


def concurrency(r: dict) -> int:
    """The row's users: its measured concurrency (`silicon_concurrency=` in silicon_data_source, or the id's
    `_c<N>_`), else its batch size times its attention-DP ranks. `batch_size` is the engine's max batch per
    attention-DP rank (aiconfigurator's generator maps it to max_batch_size / max-num-seqs / max-running-requests:
    generator/config/backend_config_mapping.yaml), so an 8-rank row of batch 8 ran 64 users (168 of the 169 rows
    with data-parallel attention that state a silicon_concurrency state batch_size x attention_dp_size). 41 rows
    without data-parallel attention state more users than their batch_size (GB200 and H100 runs, c288 for batch_size
    144): run here as one engine of that many users (their measured TPOTs, 3-10x a lone batch_size's, say the engine
    ran more than batch_size at once; engines behind one router is the other reading, not taken)."""
    m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"]) or re.search(r"_c(\d+)_", r["id"])
    return int(m.group(1)) if m else _int(r["batch_size"]) * _int(r["attention_dp_size"])


def kernels_for(r: dict, machine: str) -> str:
    """The row's engine at its version where the tables hold that version's GEMMs, else its default."""
    from roofline.errors import RooflineError
    from roofline.measured.tables import resolve

    engine, version = r["backend"], (r["backend_version"] or "").strip()
    if version:
        try:
            resolve(machine, f"{engine}@{version}", "gemm")
            return f"{engine}@{version}"
        except RooflineError:
            pass
    return engine


_STEPS: dict = {}


def _step(model, machine, dtype, gpus, ep, kernels, max_seqs, max_tokens, block, kv_cache, engine="", moe_backend=""):
    from roofline.cost import seed_cost_model
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.plan import Precision
    from roofline.plan.step import StepCost

    import dataclasses

    from roofline.serving.engines import engine_precision

    engine = engine if dtype == STORED else ""  # the engine's rule reads a checkpoint as stored (engine_precision)
    key = (model, machine, dtype, gpus, ep, kernels, max_seqs, max_tokens, block, kv_cache, engine, moe_backend)
    if key not in _STEPS:
        m = get_machine(machine)
        cm = seed_cost_model(launch_overhead_s=m.launch_overhead_s, cuda_graph=True)
        if kernels:
            cm = MeasuredKernels.for_machine(m, kernels, **{k: getattr(cm, k) for k in (
                "compute_efficiency", "memory_efficiency", "launch_overhead_s", "overlap", "cuda_graph")},
                fp8_scaling="block" if block else "tensor", moe_backend=moe_backend)
        source = model
        config = STORED_CONFIGS.get(model) if dtype == STORED else CONFIGS.get(model)
        if config:
            from roofline.measured.tables import data_root

            source = str(data_root().parent.parent / "model_configs" / config)
        precision = (engine_precision(Precision.as_stored(source, "bf16", kv_cache), engine, m) if dtype == STORED else
                     dataclasses.replace(Precision.uniform(dtype, m), kv_cache=kv_cache))
        # a GB200 NVL72's NVLink joins its 72 GPUs (the row's system), an HGX node's 8
        _STEPS[key] = StepCost(source, m, precision, gpus, None, cm, "flash", max_tokens, max_seqs,
                               gpus_per_node=m.scale_up_gpus or 8, expert_parallel=bool(ep),
                               attention_tp=ep[0] if ep else 1, expert_tp=ep[1] if ep else 1)
    return _STEPS[key]


def run_row(r: dict, overheads: dict | None = None, per_user: int = REQUESTS_PER_USER, client_kind: str = "as-measured",
            eager: dict | None = None) -> dict:
    """One row simulated on the plate and on the engine's kernels: its predicted mean TTFT and TPOT
    (s), or the refusal's reason; with ``overheads`` ({engine: seconds per step}) only on the
    engine's kernels with its time per step and ``eager``'s host time per op outside a CUDA graph
    ({engine: seconds}, 0 where not given) ("kernels+engine")."""
    from roofline.errors import RooflineError
    from roofline.machines import get_machine
    from roofline.serving import closed_requests, simulate
    from roofline.serving.engines import preset

    out = {"id": r["id"], "ttft_s": float(r["silicon_ttft_ms"]) / 1e3, "tpot_s": float(r["silicon_tpot_ms"]) / 1e3}
    got = layout(r)
    if isinstance(got, str):
        return {**out, "refused": got}
    model, machine, dtype, gpus, ep, label = got
    c, isl, osl = concurrency(r), _int(r["isl"]), _int(r["osl"])
    kv, basis = kv_cache_dtype(r)
    out.update(model=model, machine=machine, dtype=dtype, gpus=gpus, ep=ep, layout=label, engine=r["backend"],
               concurrency=c, kv_cache=kv, kv_basis=basis)
    deployed = inferencex_deployment(r) or {}
    if deployed:  # the InferenceX launch script(s) read for this row, and the client that measured it
        out["deployment"] = f"{', '.join(deployed['scripts'])} at {deployed['commit'][:9]}"
    out["client"] = client(r, per_user, client_kind)[0]
    # vLLM's async scheduling overlaps the host's work of a step with the GPU's (as TensorRT-LLM's overlap scheduler,
    # whose fitted time per step is 0): its time per step is then hidden, the fitted one (synchronous rows) not added
    hidden = vllm_async(r, deployed) if r["backend"] == "vllm" else (False, "")
    if r["backend"] == "vllm":
        out["async_scheduling"], out["async_basis"] = hidden
    the_preset = preset(r["backend"], get_machine(machine), gpus, attention_dp=gpus // ep[0] if ep else 1)
    defaults = the_preset.engine(step_overhead_s=0.0, eager_op_s=0.0, memory_fraction=deployed.get("memory_fraction"))
    # an engine that feeds whole prompts must fit one beside the running decodes, or a long prompt never starts:
    # a deployment of these lengths is configured so (the budget raised to the prompt plus a token per user)
    need = 0 if defaults.chunked_prefill else isl + c
    # InferenceX's SGLang scripts pass no --enable-mixed-chunk (none of its benchmarks/ at the rows' commits): its default
    mixed = defaults.mixed_steps or (r["backend"] in MIXED_AS_DEPLOYED and not is_inferencex(r))
    # attention data parallelism: TensorRT-LLM's and vLLM's budgets hold per rank (silicon_disagg.RANK_BUDGETS)
    from silicon_disagg import RANK_BUDGETS

    per_rank = gpus // ep[0] if ep and r["backend"] in RANK_BUDGETS else 1
    # the settings InferenceX's script gave this run under its conditions (its --max_num_tokens, say)
    conds = inferencex_conditions(r, ep[0] if ep else gpus, c, bool(ep) and gpus // ep[0] > 1)
    if conds.get("moe_backend"):  # TensorRT-LLM's moe_config.backend as the script set it (measured.moe.LANES)
        out["moe_backend"] = conds["moe_backend"]
    # the step's tokens as the launch script states them (inferencex_deployments.toml max_tokens: SGLang's chunk, say),
    # under the run's conditions first; else the engine's default
    engine = dataclasses.replace(defaults, max_seqs=max(defaults.max_seqs * per_rank, c), mixed_steps=mixed, max_tokens=max(
        conds.get("max_tokens", deployed.get("max_tokens", defaults.max_tokens)) * per_rank, c if mixed else 0, need),
        batch_wait_steps=conds.get("batch_wait_steps", 0), batch_wait_ratio=conds.get("batch_wait_ratio", 0.0),
        recv_interval=conds.get("recv_interval", 1), adp_timeout_steps=conds.get("adp_timeout_steps", 0),
        adp_batching_steps=conds.get("adp_batching_steps", 0),
        # vLLM plans each step while the last runs where it ran async scheduling (vllm_async), else once it has ended;
        # SGLang's and TensorRT-LLM's overlap schedulers: their defaults (on; no InferenceX script at the rows' commits
        # turns them off)
        schedule_ahead=int(hidden[0]) if r["backend"] == "vllm" else defaults.schedule_ahead)
    # the largest mixed step the engine replays as a piecewise CUDA graph (vLLM: the script's
    # --max-cudagraph-capture-size, else min(2 x max_num_seqs, 512) with the script's --max-num-seqs $CONC or the
    # default), a rank's figure times its ranks (the simulated step holds every rank's tokens)
    graph = deployed.get("graph_tokens") or the_preset.graph_tokens_for(
        c if deployed.get("max_seqs_users") else defaults.max_seqs, engine.max_tokens // per_rank)
    engine = dataclasses.replace(engine, graph_tokens=graph * per_rank)
    out["graph_tokens"] = engine.graph_tokens
    _, n_user, lens_in, lens_out = client(r, per_user, client_kind)
    reqs = closed_requests(c, max(MIN_REQUESTS, n_user * c), lens_in, lens_out)
    t0 = time.perf_counter()
    runs = (("plate", ""), ("kernels", kernels_for(r, machine))) if overheads is None else \
        (("kernels+engine", kernels_for(r, machine)),)
    for name, kernels in runs:
        try:
            block = dtype == "fp8" and r["model_path"] in BLOCK_FP8
            if overheads is not None:
                engine = dataclasses.replace(engine, step_overhead_s=0.0 if hidden[0] else overheads[r["backend"]],
                                             eager_op_s=(eager or {}).get(r["backend"], 0.0))
            # DEEPGEMM: the default rows, which on Blackwell time TensorRT-LLM's block-fp8 modules with DeepGEMM
            moe = conds.get("moe_backend", "").lower()
            step = _step(model, machine, dtype, gpus, ep, kernels, engine.max_seqs, engine.step_tokens, block, kv,
                         r["backend"], moe if moe in MOE_BACKENDS else "")
            res = simulate(step, reqs, engine)
            m = res.metrics()
            out[name] = {"ttft_s": m["ttft_mean_s"], "tpot_s": m["tpot_mean_s"], "kernels": kernels}
        except RooflineError as exc:
            return {**out, "refused": f"{name}: {exc}"}
    out["seconds"] = time.perf_counter() - t0
    return out


def fitted_in_file() -> dict:
    """{engine: seconds per step} as data/engines.toml holds them (the last fit's figures)."""
    from roofline.serving.engines import fitted_step_overhead_s, names

    return {e: fitted_step_overhead_s(e) for e in names()}


def eager_in_file() -> dict:
    """{engine: host seconds per op outside a CUDA graph} as data/engines.toml holds them (the last fit's)."""
    from roofline.serving.engines import fitted_eager_op_s, names

    return {e: fitted_eager_op_s(e) for e in names()}


def fit_overheads(results: list[dict], key: str = "kernels") -> dict:
    """{engine: seconds per step}: the median of measured minus predicted TPOT (on the engine's
    kernels: ``key``'s run) over the FIT_MODELS rows of each engine, at least 0; 0 for an engine with
    no such rows."""
    res: dict = defaultdict(list)
    for d in results:  # the rows whose host time per step is not hidden (vLLM's async scheduling: run_row)
        if "refused" not in d and d["model"] in FIT_MODELS and not d.get("async_scheduling"):
            res[d["engine"]].append(d["tpot_s"] - d[key]["tpot_s"])
    return {e: max(0.0, statistics.median(res[e])) if res[e] else 0.0 for e in ("trtllm", "vllm", "sglang")}


ZERO = {"trtllm": 0.0, "vllm": 0.0, "sglang": 0.0}


def fit_with_eager(pool, rows: list[dict], eager: dict, run) -> dict:
    """Each engine's time per step fitted (fit_overheads) with ``eager``'s host time per op in place:
    the FIT_MODELS rows run on the engine's kernels with no time per step."""
    fit_rows = [r for r in rows if isinstance(layout(r), tuple) and layout(r)[0] in FIT_MODELS]
    got = list(pool.map(functools.partial(run, overheads=ZERO, eager=eager), fit_rows, chunksize=4))
    return fit_overheads(got, "kernels+engine")


def fit_eager(pool, rows: list[dict], run) -> tuple[dict, dict, list[str]]:
    """The host time per op (one figure for every engine) of EAGER_GRID whose run on the FIT_MODELS rows, each engine's
    time per step refitted with it, gives the least sum of the median |error| of TPOT and of TTFT over all of them:
    ({engine: seconds per op}, {engine: seconds per step}, the grid's table as lines: each engine's errors apart and
    the sum over all rows, the basis of the choice)."""
    fit_rows = [r for r in rows if isinstance(layout(r), tuple) and layout(r)[0] in FIT_MODELS]
    lines = ["| host time per op | " + " | ".join(f"{e}: time per step, TPOT err, TTFT err" for e in ZERO) +
             " | all: TPOT err, TTFT err, sum |", "| --- |" + " --- |" * (len(ZERO) + 1)]
    best = None
    for op_s in EAGER_GRID:
        eager = dict.fromkeys(ZERO, op_s)
        steps = fit_with_eager(pool, rows, eager, run)
        got = [d for d in pool.map(functools.partial(run, overheads=steps, eager=eager), fit_rows, chunksize=4)
               if "refused" not in d]
        cells = []
        for e in ZERO:
            mine = [d for d in got if d["engine"] == e]
            tp = statistics.median(_err(d["kernels+engine"]["tpot_s"], d["tpot_s"]) for d in mine) if mine else 0.0
            tf = statistics.median(_err(d["kernels+engine"]["ttft_s"], d["ttft_s"]) for d in mine) if mine else 0.0
            cells.append(f"{steps[e] * 1e3:.2f} ms, {tp:.1%}, {tf:.1%}" if mine else "no rows")
        tp = statistics.median(_err(d["kernels+engine"]["tpot_s"], d["tpot_s"]) for d in got) if got else 0.0
        tf = statistics.median(_err(d["kernels+engine"]["ttft_s"], d["ttft_s"]) for d in got) if got else 0.0
        cells.append(f"{tp:.1%}, {tf:.1%}, {tp + tf:.1%}" if got else "no rows")
        lines.append(f"| {op_s * 1e6:g} us | " + " | ".join(cells) + " |")
        print(f"  host time per op {op_s * 1e6:g} us: " + "; ".join(f"{e} {c}" for e, c in zip((*ZERO, "all"), cells)),
              file=sys.stderr, flush=True)
        if best is None or tp + tf < best[0]:
            best = (tp + tf, op_s, steps)
    return dict.fromkeys(ZERO, best[1]), best[2], lines


def _err(pred: float, meas: float) -> float:
    return abs(pred / meas - 1.0)


def _band(c: int) -> str:
    return "1-4" if c <= 4 else "8-32" if c <= 32 else "64-256" if c <= 256 else "512+"


MODELS_SHOWN = ("plate", "kernels", "kernels+engine")
BANDS = ("1-4", "8-32", "64-256", "512+")


def _order(k) -> tuple:
    """A group's place in a table: concurrency bands in their order, the rest by their text."""
    return (BANDS.index(k), "") if k in BANDS else (len(BANDS), str(k))


def summarise(done: list[dict], key) -> list[tuple]:
    """Per group: (key, rows, then for each of MODELS_SHOWN its median |error| of TPOT and of TTFT,
    its share of TPOTs within 1.5x and its median TPOT ratio)."""
    groups = defaultdict(list)
    for d in done:
        groups[key(d)].append(d)
    rows = []
    for k in sorted(groups, key=_order):
        g = groups[k]
        cells = [k, len(g)]
        for name in MODELS_SHOWN:
            ratios = [d[name]["tpot_s"] / d["tpot_s"] for d in g]
            cells += [statistics.median(_err(d[name]["tpot_s"], d["tpot_s"]) for d in g),
                      statistics.median(_err(d[name]["ttft_s"], d["ttft_s"]) for d in g),
                      sum(1 for x in ratios if 1 / 1.5 <= x <= 1.5) / len(g), statistics.median(ratios)]
        rows.append(tuple(cells))
    return rows


def table(title: str, rows: list[tuple]) -> list[str]:
    head = " | ".join(f"{name} TPOT err | TTFT err | TPOT in 1.5x | TPOT ratio" for name in MODELS_SHOWN)
    out = [f"## By {title}", "", f"| {title} | rows | {head} |", "| --- | --- |" + " --- |" * (4 * len(MODELS_SHOWN))]
    for k, n, *cells in rows:
        label = " ".join(map(str, k)) if isinstance(k, tuple) else str(k)
        text = []
        for i in range(0, len(cells), 4):
            pt, pf, within, ratio = cells[i:i + 4]
            text += [f"{pt:.0%}", f"{pf:.0%}", f"{within:.0%}", f"{ratio:.2f}"]
        out.append(f"| {label} | {n} | " + " | ".join(text) + " |")
    return out + [""]


def headline(done: list[dict], name: str) -> str:
    n = len(done)
    tp = [_err(d[name]["tpot_s"], d["tpot_s"]) for d in done]
    tf = [_err(d[name]["ttft_s"], d["ttft_s"]) for d in done]
    ratio = [d[name]["tpot_s"] / d["tpot_s"] for d in done]
    within = sum(1 for x in ratio if 1 / 1.5 <= x <= 1.5) / n
    beyond = sum(1 for x in ratio if not 0.5 <= x <= 2.0) / n
    return (f"TPOT median |error| {statistics.median(tp):.0%} (median ratio {statistics.median(ratio):.2f}, {within:.0%} "
            f"within 1.5x, {beyond:.0%} beyond 2x); TTFT median |error| {statistics.median(tf):.0%}")


def main(argv=None) -> int:
    announce()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "serving-validation-measured.md"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N rows the tool can express (a quick look)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--requests-per-user", type=int, default=REQUESTS_PER_USER, help="closed loop: requests each user "
                    f"sends (default {REQUESTS_PER_USER}; aiperf as aiconfigurator's benchmark runs it: 20)")
    ap.add_argument("--client", choices=CLIENTS, default="as-measured", help="as-measured: InferenceX's benchmark client "
                    "for the rows it measured (lengths drawn from 0.8-1x, ten requests a user), the fixed stand-in for the "
                    "rest; fixed: every row the row's lengths, --requests-per-user a user")
    ap.add_argument("--every", type=int, default=1, metavar="K", help="only every K-th row the tool can express (a quick "
                    "sample that spans every engine, GPU and model)")
    ap.add_argument("--rows", default=None, metavar="FILE", help="also write each row's measured and predicted figures "
                    "as JSON lines")
    ap.add_argument("--mode", choices=("agg", "disagg", "both"), default="both",
                    help="the aggregated rows, the disaggregated ones (silicon_disagg.py: a section of their own) or both")
    ap.add_argument("--fit-eager", action="store_true", help="fit the engines' host time per op outside a CUDA graph "
                    "(of 0-160 us, on the fitting rows: FIT_MODELS) rather than take data/engines.toml's: about nine "
                    "more runs of the fitting rows")
    ap.add_argument("--max-users", type=int, default=0, help="disaggregated rows of more users than this are listed as "
                    "not run (a quick look: the closed loop's cost grows with the users; 0: run all)")
    args = ap.parse_args(argv)
    if args.mode == "disagg":
        return main_disagg(args)
    from roofline.measured.tables import data_root

    sample = data_root().parent / "silicon_sample.csv"
    rows = read_rows(sample)
    limit = smoke_or(args.limit, 6)
    if limit or args.every > 1:
        rows = [r for r in rows if not isinstance(layout(r), str)][::max(1, args.every)][:limit or None]
    t0 = time.perf_counter()
    run = functools.partial(run_row, per_user=args.requests_per_user, client_kind=args.client)
    grid = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(run, rows, chunksize=4))
        if args.fit_eager:
            eager, overheads, grid = fit_eager(pool, rows, run)
        else:
            eager = eager_in_file()
            overheads = fit_with_eager(pool, rows, eager, run) if any(eager.values()) else fit_overheads(results)
        second = list(pool.map(functools.partial(run, overheads=overheads, eager=eager), rows, chunksize=4))
    for d, e in zip(results, second):
        if "refused" not in d and "refused" not in e:
            d["kernels+engine"] = e["kernels+engine"]
        elif "refused" not in d:
            d["refused"] = e["refused"]
    wall = time.perf_counter() - t0
    done = [d for d in results if "refused" not in d]
    refused = defaultdict(int)
    for d in results:
        if "refused" in d:
            refused[d["refused"]] += 1
    lines = write_report(args, sample, results, done, refused, wall, overheads, eager, grid)
    if args.mode == "both":
        disagg = run_disagg(args, sample)
        lines += [""] + disagg["lines"]
        results = results + disagg["results"]
    if args.rows:
        import json

        Path(args.rows).write_text("".join(json.dumps(d) + "\n" for d in results))
    path = output(Path(args.out))
    path.write_text("\n".join(lines) + "\n")
    for line in lines[:24]:
        print(line)
    from roofline.serving.engines import _doc

    for e, sec in overheads.items():
        print(f"fitted {e} time per step {sec * 1e3:.2f} ms (data/engines.toml: "
              f"{_doc()['engines'][e]['step_overhead_s']['value'] * 1e3:.2f} ms), host time per op "
              f"{eager[e] * 1e6:g} us ({'fitted' if args.fit_eager else 'data/engines.toml'}: "
              f"{_doc()['engines'][e]['eager_op_s']['value'] * 1e6:g} us in the file)")
    print(f"wrote {path}")
    return 0


def run_disagg(args, sample) -> dict:
    """The disaggregated rows (silicon_disagg.py) on the engines' kernels with data/engines.toml's time
    per step: {"results": one dict a row, "lines": the report's section}."""
    import silicon_disagg as sd

    rows = sd.read_rows(sample)
    limit = smoke_or(args.limit, 2)
    if limit:
        rows = sd.subset(rows, limit, cheapest=SMOKE)
    overheads = fitted_in_file()
    skipped = [r for r in rows if args.max_users and not isinstance(sd.pools(r), str) and sd.concurrency(r) > args.max_users]
    rows = [r for r in rows if r not in skipped]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(functools.partial(sd.run_row, overheads=overheads), rows, chunksize=1))
    results += [{"id": r["id"], "skipped": f"more than --max-users {args.max_users:,} users"} for r in skipped]
    for d in results:
        d["mode"] = "disagg"
    return {"results": results, "lines": sd.report(results, time.perf_counter() - t0, overheads)}


def main_disagg(args) -> int:
    """--mode disagg: only the disaggregated rows, their section alone to --out."""
    import importlib.metadata as md

    from roofline.measured.tables import data_root

    sample = data_root().parent / "silicon_sample.csv"
    got = run_disagg(args, sample)
    lines = ["# Serving: predicted against measured disaggregated deployments (aiconfigurator-core's silicon sample)", "",
             f"Measured {time.strftime('%Y-%m-%d')} with `python benchmarks/silicon_validation.py --mode disagg` on "
             f"{os.cpu_count()} CPU core(s), aiconfigurator-core {md.version('aiconfigurator-core')}.", ""] + got["lines"]
    if args.rows:
        import json

        Path(args.rows).write_text("".join(json.dumps(d) + "\n" for d in got["results"]))
    path = output(Path(args.out))
    path.write_text("\n".join(lines) + "\n")
    for line in lines[:24]:
        print(line)
    print(f"wrote {path}")
    return 0


def kv_counts(done: list[dict]) -> str:
    """The report's line on the KV dtypes the simulated rows ran (kv_cache_dtype), with the reason of each."""
    why = defaultdict(list)
    for d in done:
        why[(d["kv_cache"], d.get("kv_basis", ""))].append(d)
    return "KV cache: " + "; ".join(f"{kv} for {len(g):,} rows ({basis})" for (kv, basis), g in
                                     sorted(why.items(), key=lambda x: -len(x[1]))) + "."


def moe_counts(done: list[dict]) -> str:
    """The report's line on the rows whose launch script set a MoE backend the tables time no module of (their
    experts read the default rows in its stead), or "" where none did."""
    unmeasured = defaultdict(list)
    for d in done:
        if d.get("moe_backend") and d["moe_backend"].lower() not in MOE_BACKENDS:
            unmeasured[(d["moe_backend"], d["engine"], d["model"], d["machine"])].append(d)
    return "".join(f" MoE backend {b} for {len(g):,} rows ({engine}'s moe_config.backend as the launch script sets it, "
                   f"{model} on {machine}): no table times its module; their experts read the default rows in its stead."
                   for (b, engine, model, machine), g in sorted(unmeasured.items()))


def ratio_table(held: list[dict]) -> list[str]:
    """The held-out rows by engine and concurrency band on kernels+engine: median |error| and median ratio
    (predicted / measured) of TPOT and of TTFT: which way each misses."""
    out = ["## Held out, by engine and concurrency (kernels+engine)", "",
           "| engine | users | rows | TPOT err | TPOT ratio | TTFT err | TTFT ratio |", "| --- | --- | --- | --- | --- | --- | --- |"]
    groups = defaultdict(list)
    for d in held:
        groups[(d["engine"], "all")].append(d)
        groups[(d["engine"], _band(d["concurrency"]))].append(d)
    for (engine, band), g in sorted(groups.items(), key=lambda kv: (kv[0][0], _order(kv[0][1]) if kv[0][1] != "all" else (-1, ""))):
        k = "kernels+engine"
        cells = [statistics.median(_err(d[k][m], d[m]) for d in g) for m in ("tpot_s",)] + \
                [statistics.median(d[k]["tpot_s"] / d["tpot_s"] for d in g)] + \
                [statistics.median(_err(d[k]["ttft_s"], d["ttft_s"]) for d in g),
                 statistics.median(d[k]["ttft_s"] / d["ttft_s"] for d in g)]
        out.append(f"| {engine} | {band} | {len(g):,} | {cells[0]:.0%} | {cells[1]:.2f} | {cells[2]:.0%} | {cells[3]:.2f} |")
    return out + [""]


def eager_text(eager: dict, fitted: bool) -> str:
    """The host time per op as the report says it: its figure(s) and where they came from."""
    values = sorted(set(eager.values()))
    said = (f"{values[0] * 1e6:g} us for every engine" if len(values) == 1
            else ", ".join(f"{e} {v * 1e6:g} us" for e, v in eager.items()))
    return said + (" (fitted in this run: the table below)" if fitted else " (data/engines.toml's, fitted by "
                   "`--fit-eager`: the least sum of TPOT and TTFT median |error| on the fitting rows)")


def write_report(args, sample, results, done, refused, wall, overheads, eager, grid=()) -> list[str]:
    import importlib.metadata as md

    version = md.version("aiconfigurator-core")
    n = len(done)
    held = [d for d in done if d["model"] not in FIT_MODELS]
    fit = [d for d in done if d["model"] in FIT_MODELS]
    fitted = ", ".join(f"{e} {s * 1e3:.2f} ms" for e, s in overheads.items())
    lines = ["# Serving: predicted against measured deployments (aiconfigurator-core's silicon sample)", "",
             f"Measured {time.strftime('%Y-%m-%d')} with `python benchmarks/silicon_validation.py` on "
             f"{os.cpu_count()} CPU core(s): {len(results):,} aggregated rows of `systems/silicon_sample.csv` "
             f"(aiconfigurator-core {version}), {n:,} simulated, {len(results) - n:,} refused; {wall:.0f} s in all "
             "(three simulations a row).", "",
             f"One set of settings for every row: {settings_text(args.requests_per_user, args.client)}. {kv_counts(done)}"
             f"{moe_counts(done)}", "",
             "Three models, the same settings otherwise: `plate`, the workshop plate's cost model; `kernels`, the row's "
             "engine's measured kernels (`--kernels ENGINE`); `kernels+engine`, the same plus each engine's own time per "
             f"step (`--step-overhead`), fitted on the rows of {', '.join(FIT_MODELS)} (the median of measured minus "
             f"predicted TPOT on the engine's kernels, at least 0): {fitted}; and the host's time per op of a step outside "
             f"a CUDA graph (`--eager-op`: a prompt step's ops), {eager_text(eager, bool(grid))}. The held-out rows (the "
             "other models) are the test of those fits; the fitting rows are shown apart.", ""]
    hidden = [d for d in done if d.get("async_scheduling")]
    lines += [f"vLLM's time per step is not added to its {len(hidden):,} rows that ran async scheduling (of "
              f"{sum(1 for d in done if d['engine'] == 'vllm'):,} vLLM rows; `vllm_async()`: the launch script's setting, "
              "else vLLM's default at the row's version, on from v0.14.0), which hides it under the GPU's work; the "
              "fitted figure is the synchronous rows'.", ""]
    if grid:
        lines += ["The host time per op, fitted: each value's run of the fitting rows (each engine's time per step "
                  "refitted with it), each engine's errors apart and all together, the least sum over all taken:", "",
                  *grid, ""]
    if n:
        for label, rows in ((f"held out ({len(held):,} rows, models not used in the fit)", held),
                            (f"fitting rows ({len(fit):,})", fit), (f"all {n:,} rows", done)):
            if not rows:
                continue
            lines.append(f"**{label}:**")
            lines.append("")
            lines += [f"- {name}: {headline(rows, name)}" for name in MODELS_SHOWN]
            lines.append("")
        lines += ratio_table(held)
        lines += table("engine", summarise(done, lambda d: d["engine"]))
        lines += table("GPU", summarise(done, lambda d: d["machine"]))
        lines += table("model", summarise(done, lambda d: d["model"]))
        lines += table("concurrency", summarise(done, lambda d: _band(d["concurrency"])))
        lines += table("GPUs", summarise(done, lambda d: (d["gpus"], d["layout"])))
        lines += table("engine, GPU and model", summarise(done, lambda d: (d["engine"], d["machine"], d["model"])))
        lines += silicon_twins.section(read_rows(sample), done)
    lines += ["## Refused", "", "| reason | rows |", "| --- | --- |"]
    lines += [f"| {why} | {k} |" for why, k in sorted(refused.items(), key=lambda x: -x[1])]
    secs = [d["seconds"] for d in done]
    if secs:
        lines += ["", f"Time per row (plate and kernels): median {statistics.median(secs):.2f} s, max {max(secs):.1f} s."]
    return lines


if __name__ == "__main__":
    sys.exit(main())
