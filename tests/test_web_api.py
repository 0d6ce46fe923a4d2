"""The workshop's JSON API (SPEC C9) through FastAPI's TestClient: every endpoint, seed 003's
figures, the whole-model and decode-versus-batch views against the planning library and against
independent truths, and bad input (missing, negative, NaN, infinite, huge, unknown names) as a 422
that names the field."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

with warnings.catch_warnings():  # newer Starlette suggests httpx2; httpx works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import roofline.web
from roofline.blocks import layer_report
from roofline.plan.decode import decode_plan
from roofline.plan.memory import inference_memory
from roofline.cost import seed_cost_model
from roofline.errors import RooflineError
from roofline.machines import list_machines
from roofline.plan import DEFAULT_BATCHES, Precision, decode_step, kv_overtakes_weights_context, predict_model, time_to_first_token
from roofline.transformer import list_models
from roofline.web.app import MAX_TOKENS, SEED_DEFAULTS, create_app

LAYER_ENDPOINTS = ("/api/layer", "/api/layer.csv", "/api/layer.json")
PLAN_ENDPOINTS = ("/api/model", "/api/decode")
# Llama 3 8B (Meta's model card: 8.03B parameters): D 4096, L 32, K 8 kv heads of 128, V 128,256
LLAMA3_8B_PARAMS = 8_030_261_248
LLAMA3_8B_EMBEDDING_PARAMS = 128_256 * 4096  # = 525,336,576, the input table (the LM head is untied)
LLAMA3_8B_NORM_PARAMS = (2 * 32 + 1) * 4096  # two RMSNorms per block and the final one = 266,240

MACHINE_FILE = """
[sources]
MINE = "my own measurement"

[machines.my-gpu]
name = "My GPU"
memory_bytes_per_s = { value = 1e12, source = "MINE" }
launch_overhead_s = { value = 5e-6, source = "MINE" }

[machines.my-gpu.peak_flops_per_s]
bf16 = { value = 100e12, source = "MINE" }
"""


# -- /api/machines, /api/models, /api/options ----------------------------------------------------

def test_machines_lists_every_preset_with_its_roofline_numbers(client):
    r = client.get("/api/machines")
    assert r.status_code == 200
    body = r.json()
    assert [m["key"] for m in body] == [m.key for m in list_machines()]
    h100 = next(m for m in body if m["key"] == "h100-sxm")
    assert h100["origin"] == "preset"
    assert h100["peak_flops_per_s"] == 989e12 and h100["bytes_per_s"] == 3.35e12
    assert h100["ridge_flop_per_byte"] == pytest.approx(295.2, abs=0.1)  # 989e12 / 3.35e12
    assert "295 FLOP/byte" in h100["detail"]


def test_models_lists_every_preset(client):
    r = client.get("/api/models")
    assert r.status_code == 200
    body = r.json()
    assert [m["key"] for m in body] == [c.key for c in list_models()]
    llama = next(m for m in body if m["key"] == "llama3-8b")
    assert (llama["d_model"], llama["n_layers"], llama["n_heads"], llama["n_kv_heads"]) == (4096, 32, 32, 8)


def test_options_give_the_seed_defaults_and_log_scale_stops(client):
    body = client.get("/api/options").json()
    assert body["defaults"] == {
        "machine": "h100-sxm", "model": "llama3-8b", "phase": "prefill", "tokens": 8192, "batch": 1,
        "attention": "naive", "compute_efficiency": 0.70, "memory_efficiency": 0.85,
        "launch_overhead_us": 3.0, "overlap": 1.0,
    }
    stops = body["token_stops"]
    # the slider's stops are 2^k and 3 x 2^(k-1) up to 2^17: the 18 powers 1 .. 131,072 and the 16
    # values 3 x 2^j for j = 0 .. 15 (3 .. 98,304; 3 x 2^16 = 196,608 is past the end), 34 in all
    assert stops == sorted({2**k for k in range(18)} | {3 * 2**j for j in range(16)}) and len(stops) == 34
    assert stops[0] == 1 and stops[-1] == MAX_TOKENS == 2**17
    assert all(a < b for a, b in zip(stops, stops[1:]))
    assert {128, 8192, 32768} <= set(stops)
    assert stops[:8] == [1, 2, 3, 4, 6, 8, 12, 16]  # 2^k and 3 2^(k-1)
    assert [v["key"] for v in body["views"]] == ["layer", "model", "decode", "serving"]


# -- /api/layer: the library's contract and seed 003's figures ------------------------------------

def test_layer_defaults_are_the_library_report_plus_the_page_data(client):
    body = client.get("/api/layer").json()
    expected = layer_report(cost_model=seed_cost_model()).to_dict()
    for key, value in expected.items():
        assert body[key] == (pytest.approx(value) if isinstance(value, float) else value), key
    assert body["launch_overhead_us"] == 3.0
    assert {"readouts", "sentence", "chart", "roofline", "caption"} <= set(body)


# Seed 003's workshop written out from SPEC C5, independently of roofline.blocks: one Llama 3 8B
# layer (config.json: D 4096, F 14336, H 32 query heads, K 8 kv heads of 128) prefilling T tokens
# in bf16 (w = 2) on an H100 SXM (hardware.md tables 1-2: 989 TFLOP/s dense BF16, 3.35 TB/s) at
# e_c 0.70, e_m 0.85, 3 us a launch, perfect overlap: each op max(F / (e_c peak), B / (e_m BW)) + 3 us.
SEED_PEAK, SEED_BW, SEED_EC, SEED_EM, SEED_LAUNCH_S = 989e12, 3.35e12, 0.70, 0.85, 3e-6


def _seed_layer(T):
    """[(op, FLOPs, bytes)] of SPEC C5's 12 ops. Matmul (M, K) @ (K, N): 2MKN FLOPs, w (MK + KN + MN)
    bytes. Causal attention counts S = H T^2 / 2 scores. Elementwise FLOPs by plain arithmetic:
    RMSNorm 4 an element (square, sum, scale, weight), softmax 5 (max, subtract, exp, sum, divide),
    SiLU-and-multiply 5 (g / (1 + e^-g) x u: negate, exp, add, divide, multiply), add 1."""
    D, F, H, K, d, w = 4096, 14336, 32, 8, 128, 2

    def mm(M, Kd, N):
        return 2 * M * Kd * N, w * (M * Kd + Kd * N + M * N)

    S = H * T * T // 2
    return [("attn norm", 4 * T * D, w * 2 * T * D), ("QKV proj", *mm(T, D, (H + 2 * K) * d)),
            ("QK^T", 2 * H * T * T * d // 2, w * (H * T * d + K * T * d + S)), ("softmax", 5 * S, w * 2 * S),
            ("PV", 2 * H * T * T * d // 2, w * (S + K * T * d + H * T * d)), ("out proj", *mm(T, H * d, D)),
            ("residual add", T * D, w * 3 * T * D), ("ffn norm", 4 * T * D, w * 2 * T * D),
            ("gate+up proj", *mm(T, D, 2 * F)), ("silu*mul", 5 * T * F, w * 3 * T * F), ("down proj", *mm(T, F, D)),
            ("residual add 2", T * D, w * 3 * T * D)]


def _seed_op_times(flops, nbytes):
    """(compute s, memory s, time s) of one op under seed 003's cost model."""
    compute_s, memory_s = flops / (SEED_EC * SEED_PEAK), nbytes / (SEED_EM * SEED_BW)
    return compute_s, memory_s, max(compute_s, memory_s) + SEED_LAUNCH_S


def _seed_readouts(T):
    """The workshop's readouts for T tokens, from _seed_layer: total, FLOPs-only (sum F / (e_c peak)),
    their ratio, the memory-bound ops and their share of the time, the launches' share."""
    times = [_seed_op_times(f, b) for _, f, b in _seed_layer(T)]
    total_s = sum(t for _, _, t in times)
    flops_only_s = sum(c for c, _, _ in times)
    memory = [t for c, m, t in times if m > c]
    return {"total_s": total_s, "flops_only_s": flops_only_s, "ratio": total_s / flops_only_s,
            "memory_ops": len(memory), "memory_share": sum(memory) / total_s,
            "launch_share": len(times) * SEED_LAUNCH_S / total_s}


def _shows(text, value):
    """``text`` ("8,756 µs", "2.12×", "41% of the time") prints ``value`` at the precision it shows."""
    number = re.match(r"[\d,]+(?:\.\d+)?", text).group().replace(",", "")
    places = len(number.split(".")[1]) if "." in number else 0
    assert round(value, places) == float(number), (text, value)


@pytest.mark.parametrize(
    "tokens, total_us, total, flops_only, ratio, memory_ops, memory_share, launch_share",
    [
        # seed 003: 205 us, 2.53 times FLOPs-only, every op memory-bound, 18% of it launches
        (128, 205, "205 µs", "81 µs", "2.53×", "12 of 12 ops", "100% of the time", "18%"),
        # seed 003: 8,756 us, 1.47 times a FLOPs-only 5,965 us, 8 ops memory-bound taking 41%
        (8192, 8756, "8,756 µs", "5,965 µs", "1.47×", "8 of 12 ops", "41% of the time", "0.4%"),
        # seed 003's 71,117 us; from 10 ms up the page reads in ms at three figures, as every time on it
        (32768, 71117, "71.1 ms", "33.5 ms", "2.12×", "8 of 12 ops", "71% of the time", "0.1%"),
    ],
)
def test_seed_003_figures(client, tokens, total_us, total, flops_only, ratio, memory_ops, memory_share, launch_share):
    want = _seed_readouts(tokens)
    # the seed's figures and the page's texts are the written-out model's, at the precision shown
    assert round(want["total_s"] * 1e6) == total_us
    for text, seconds in ((total, want["total_s"]), (flops_only, want["flops_only_s"])):
        _shows(text, seconds * (1e3 if text.endswith(" ms") else 1e6))
    _shows(ratio, want["ratio"])
    assert memory_ops == f"{want['memory_ops']} of 12 ops"
    _shows(memory_share, 100 * want["memory_share"])
    _shows(launch_share, 100 * want["launch_share"])
    body = client.get("/api/layer", params={"tokens": tokens}).json()
    assert body["total_s"] == pytest.approx(want["total_s"], rel=1e-9)
    assert body["readouts"]["total_us"] == pytest.approx(want["total_s"] * 1e6, rel=1e-9)
    assert body["readouts"]["flops_only_us"] == pytest.approx(want["flops_only_s"] * 1e6, rel=1e-9)
    text = body["readouts"]["text"]
    assert (text["total"], text["flops_only"]) == (total, flops_only)
    assert (text["flops_ratio"], text["memory_bound"], text["memory_share"], text["launch_share"]) == (
        ratio, memory_ops, memory_share, launch_share)


def test_seed_sentence_at_8192_tokens(client):
    body = client.get("/api/layer", params={"tokens": 8192}).json()
    assert body["sentence"] == (
        "For one 8,192-token sequence, the model predicts 8,756 µs for the layer — 1.47 times a "
        "FLOPs-only estimate of 5,965 µs, because 8 of the operations are memory-bound and take 41% of the time."
    )


def test_seed_sentence_at_128_tokens_names_the_launch_share(client):
    sentence = client.get("/api/layer", params={"tokens": 128}).json()["sentence"]
    assert sentence.startswith("For one 128-token sequence, the model predicts 205 µs for the layer — 2.53 times")
    assert "all 12 operations are memory-bound" in sentence
    assert sentence.endswith("18% of the time is launch overhead alone.")


def test_sentence_adapts_to_batch_and_decode(client):
    batch = client.get("/api/layer", params={"tokens": 512, "batch": 4}).json()["sentence"]
    assert batch.startswith("For a batch of 4 sequences of 512 tokens, the model predicts")
    decode = client.get("/api/layer", params={"phase": "decode", "tokens": 8192, "batch": 64}).json()
    assert decode["tokens"] == 1 and decode["context"] == 8192 and decode["batch"] == 64
    assert decode["sentence"].startswith("For one decode step of a batch of 64 sequences at 8,192 tokens of context,")
    ctx = client.get("/api/layer", params={"phase": "decode", "context": 1024}).json()
    assert ctx["context"] == 1024
    assert ctx["sentence"].startswith("For one decode step of one sequence at 1,024 tokens of context,")


def test_flash_attention_is_one_op_and_faster_at_32k(client):
    naive = client.get("/api/layer", params={"tokens": 32768}).json()
    flash = client.get("/api/layer", params={"tokens": 32768, "attention": "flash"}).json()
    assert len(naive["ops"]) == 12 and len(flash["ops"]) == 10  # QK^T, softmax, PV -> one kernel
    assert "flash attention" in flash["chart"]["labels"]
    assert flash["total_s"] < naive["total_s"] / 2


def test_launch_overhead_is_microseconds_at_the_edge(client):
    body = client.get("/api/layer", params={"launch_overhead_us": 10}).json()
    assert body["launch_overhead_s"] == pytest.approx(10e-6)
    assert body["launch_s"] == pytest.approx(12 * 10e-6)  # 12 ops, one launch each
    assert body["readouts"]["launch_us"] == pytest.approx(120)


def test_efficiencies_and_overlap_reach_the_cost_model(client):
    base = client.get("/api/layer", params={"tokens": 8192}).json()
    slow = client.get("/api/layer", params={"tokens": 8192, "compute_efficiency": 0.35}).json()
    # FLOPs-only = sum F / (e_c peak): halving e_c doubles it
    assert slow["flops_only_s"] == pytest.approx(2 * base["flops_only_s"])
    none = client.get("/api/layer", params={"tokens": 8192, "overlap": 0}).json()
    # overlap 0: each op pays compute + memory + launch, so the total is the two estimates + launches
    assert none["total_s"] == pytest.approx(base["flops_only_s"] + base["bytes_only_s"] + base["launch_s"])


def test_chart_series_follow_the_ops(client):
    body = client.get("/api/layer").json()
    chart, ops = body["chart"], body["ops"]
    assert chart["labels"] == [op["name"] for op in ops]
    assert chart["time_us"] == pytest.approx([op["time_s"] * 1e6 for op in ops])
    assert chart["bound"] == [op["bound"] for op in ops]
    softmax = chart["hover"][chart["labels"].index("softmax")]
    for word in ("FLOPs", "bytes", "intensity", "compute", "memory", "launch", "memory-bound"):
        assert word in softmax


def test_roofline_curve_is_the_machines_roof(client):
    roof = client.get("/api/layer").json()["roofline"]
    # the H100 SXM's roof, min(989 TFLOP/s, 3.35 TB/s x I) (hardware.md tables 1-2), turns at
    # I = 989e12 / 3.35e12 = 295.2 FLOP/byte
    assert roof["ridge_flop_per_byte"] == pytest.approx(989 / 3.35, rel=1e-12)
    assert roof["ridge_flop_per_byte"] in roof["intensity"]
    assert roof["peak_tflops_per_s"] == pytest.approx(989)
    assert roof["roof_tflops_per_s"] == pytest.approx([min(989, 3.35 * i) for i in roof["intensity"]], rel=1e-12)
    # the achievable roof is the cost model's: e_m BW below the ridge region, e_c peak on top
    assert roof["achievable_tflops_per_s"][-1] == pytest.approx(0.70 * 989)
    assert roof["achievable_tflops_per_s"][0] == pytest.approx(0.85 * 3.35 * roof["intensity"][0])
    assert min(roof["intensity"]) < min(op["intensity"] for op in client.get("/api/layer").json()["ops"])
    ops = roof["ops"]
    assert len(ops["intensity"]) == 12
    for rate, roof_rate in zip(ops["tflops_per_s"], [min(989, 3.35 * i) for i in ops["intensity"]]):
        assert 0 < rate <= roof_rate  # no op beats the roofline


def test_roofline_follows_the_machine(client):
    a100 = client.get("/api/layer", params={"machine": "a100-80gb"}).json()
    assert a100["machine"] == "a100-80gb" and a100["machine_name"] == "A100 80GB SXM"
    # 312 TFLOP/s dense BF16 over 2.039 TB/s (hardware.md tables 1-2, A100 80GB SXM) = 153.0 FLOP/byte
    assert a100["roofline"]["ridge_flop_per_byte"] == pytest.approx(312 / 2.039, rel=1e-12)


# -- /api/model: the whole model ------------------------------------------------------------------

def _close(actual, expected, path="body"):
    """Equal as JSON, floats to 1e-9 relative (JSON round trips and sums may reorder them)."""
    if isinstance(expected, dict):
        for key, value in expected.items():
            _close(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            _close(a, e, f"{path}[{i}]")
    elif isinstance(expected, float) and not isinstance(expected, bool):
        assert actual == pytest.approx(expected, rel=1e-9, abs=1e-300), path
    else:
        assert actual == expected, path


def _library(**params):
    """The planner's arguments for the API's defaults plus ``params`` (the page's cost model). The
    model and decode views default to flash attention, as `roofline decode` does."""
    q = {**SEED_DEFAULTS, "attention": "flash", **params}
    cost_model = seed_cost_model(compute_efficiency=q["compute_efficiency"], memory_efficiency=q["memory_efficiency"],
                                 launch_overhead_s=q["launch_overhead_us"] * 1e-6, overlap=q["overlap"])
    return q, {"attention": q["attention"], "precision": Precision(), "cost_model": cost_model}


def test_model_prefill_is_the_librarys_time_to_first_token(client):
    body = client.get("/api/model", params={"tokens": 8192}).json()
    _, common = _library()
    expected = predict_model("llama3-8b", "h100-sxm", "prefill", 8192, 1, **common)
    _close(body, json.loads(json.dumps(expected.to_dict())))
    ttft = time_to_first_token("llama3-8b", "h100-sxm", 8192, 1, **common).time_s
    assert body["time_to_first_token_s"] == pytest.approx(ttft) and body["step_s"] is None
    assert body["readouts"]["latency_s"] == pytest.approx(ttft)
    assert body["readouts"]["text"]["latency_name"] == "Time to first token"
    assert body["readouts"]["text"]["latency"] == f"{ttft * 1e3:,.0f} ms"
    # prefill throughput: B T prompt tokens per time to first token
    assert body["tokens_per_s"] == pytest.approx(8192 / ttft)
    assert body["sentence"].startswith("Prefill of one 8,192-token sequence through Llama 3 8B (32 blocks,")


def test_model_parts_are_the_blocks_times_L_embedding_final_norm_and_lm_head(client):
    body = client.get("/api/model", params={"tokens": 2048, "batch": 2}).json()
    parts = body["parts"]
    assert [p["name"] for p in parts] == ["embedding", "32 blocks", "final norm", "LM head"]
    assert sum(p["time_s"] for p in parts) == pytest.approx(body["time_s"])  # the parts add up to the pass
    for p in parts:
        assert p["memory_time_s"] + p["compute_time_s"] + p["link_time_s"] == pytest.approx(p["time_s"])
    # the blocks are one layer's ops, each run L = 32 times: 32 x /api/layer's total, launches included
    # (the model view defaults to flash attention, as `roofline decode`; the layer view to the seed's naive)
    layer = client.get("/api/layer", params={"tokens": 2048, "batch": 2, "attention": "flash"}).json()
    assert parts[1]["time_s"] == pytest.approx(32 * layer["total_s"])
    assert parts[1]["flops"] == pytest.approx(32 * sum(op["flops"] for op in layer["ops"]))
    # the LM head of prefill runs on the last token only: 2 B D V FLOPs = 2*2*4096*128256
    assert parts[3]["flops"] == pytest.approx(2 * 2 * 4096 * 128256)
    chart = body["parts_chart"]
    assert chart["labels"] == [p["name"] for p in parts]
    # the axis is in the unit of the largest part (the blocks, 2 x 2,048 tokens: over 10 ms, under 1 s)
    assert body["time_s"] > 10e-3 and parts[1]["time_s"] < 1.0
    assert (chart["axis"]["unit"], chart["axis"]["title"]) == ("ms", "predicted time (ms)")
    assert chart["total"] == pytest.approx([p["time_s"] * 1e3 for p in parts])
    assert chart["colors"] == {"memory": "#d62728", "compute": "#1f77b4"}


def test_model_decode_is_the_librarys_decode_step(client):
    body = client.get("/api/model", params={"phase": "decode", "tokens": 4096, "batch": 16}).json()
    _, common = _library()
    step = decode_step("llama3-8b", "h100-sxm", 16, 4096, **common)
    _close(body, json.loads(json.dumps(step.to_dict())))
    assert body["step_s"] == pytest.approx(step.time_s) and body["time_to_first_token_s"] is None
    assert body["tokens_per_s"] == pytest.approx(16 / step.time_s)  # B new tokens per step
    assert (body["batch"], body["context"], body["tokens"]) == (16, 4096, 1)
    assert body["readouts"]["text"]["latency_name"] == "Decode step"
    assert body["sentence"].startswith("One decode step of a batch of 16 sequences at 4,096 tokens of context")
    # an explicit context wins over tokens, as in /api/layer
    assert client.get("/api/model", params={"phase": "decode", "tokens": 4096, "context": 512}).json()["context"] == 512


def test_decode_reads_every_weight_once_and_the_kv_cache(client):
    """Independent truth: at batch 1 a decode step reads every matmul weight once (not the input
    embedding table, of which it gathers one row) and the KV cache, 2 L K d_head w per token."""
    body = client.get("/api/model", params={"phase": "decode", "tokens": 8192, "batch": 1, "attention": "flash"}).json()
    matmul_params = LLAMA3_8B_PARAMS - LLAMA3_8B_EMBEDDING_PARAMS - LLAMA3_8B_NORM_PARAMS
    assert body["weight_bytes"] == 2 * matmul_params + 4096 * 2  # bf16, + one embedding row of D
    assert body["kv_bytes"] == 8192 * 2 * 32 * 8 * 128 * 2  # = 1 GiB: S 2 L K d_head w
    assert body["kv_bytes"] == 2**30


def test_model_memory_is_the_librarys_plan(client):
    body = client.get("/api/model", params={"tokens": 8192, "batch": 2}).json()
    _close(body["memory"], inference_memory("llama3-8b", "h100-sxm", 2, 8192, Precision()).to_dict())
    mem = body["memory"]
    # Llama 3 8B's KV cache: 2 (K and V) x 32 layers x 8 kv heads x 128 x 2 bytes = 131,072 B per token
    assert mem["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131_072
    assert mem["kv_cache_bytes"] == 2 * 8192 * 131_072  # two 8,192-token sequences = 2 GiB
    assert mem["weights_bytes"] == 2 * LLAMA3_8B_PARAMS  # bf16
    # 0.9 (an engine's share, as serving's) of nvidia-smi's 81,559 MiB (nccl #1264)
    assert mem["capacity_bytes"] == pytest.approx(0.9 * 81_559 * 2**20) and mem["fits"] is True
    # a step's activations: 8,192 x (2 x 14,336 + 4 x 4,096) x 2 + 256 x 128,256 x 4 = 869,531,648 B; 16.06 + 2.15 + 0.87
    assert mem["activations_bytes"] == 869_531_648
    assert body["fit"]["state"] == "fits" and body["fit"]["text"].startswith("fits: 19.1 GB of the H100 SXM's 77 GB")
    seg = body["memory_chart"]["segments"]
    assert [s["name"] for s in seg] == ["weights", "KV cache", "a step's activations"]
    assert [s["gb"] for s in seg] == pytest.approx([2 * LLAMA3_8B_PARAMS / 1e9, 2 * 8192 * 131_072 / 1e9, 0.869531648])
    assert body["memory_chart"]["capacity_gb"] == pytest.approx(0.9 * 81_559 * 2**20 / 1e9)


def test_a_70b_model_in_bf16_does_not_fit_one_80gb_h100(client):
    body = client.get("/api/model", params={"model": "llama3-70b", "tokens": 1}).json()
    mem = body["memory"]
    assert mem["weights_bytes"] > 81_559 * 2**20  # ~70.6e9 parameters x 2 bytes = 141 GB > 85.5 GB
    assert mem["fits"] is False
    assert body["fit"]["state"] == "does-not-fit"
    assert body["fit"]["text"].startswith("does NOT fit: needs 143 GB per GPU, the H100 SXM has 77 GB (0.9 of its 85.5 GB).")
    assert "weights alone are 141 GB" in body["fit"]["text"]
    assert body["memory_chart"]["fits"] is False and "does not fit" in body["memory_chart"]["total_text"]
    # an H200 reports 143,771 MiB = 150.8 GB, of which an engine's 0.9 is 135.7 GB: short of the 141.1 GB of
    # weights, as vLLM at its default gpu_memory_utilization finds no room for a cache; a 192 GB MI300X holds it
    assert client.get("/api/model", params={"model": "llama3-70b", "machine": "h200", "tokens": 1}).json()["memory"]["fits"] is False
    assert client.get("/api/model", params={"model": "llama3-70b", "machine": "mi300x", "tokens": 1}).json()["memory"]["fits"] is True


def test_model_shows_where_kv_reads_overtake_weight_reads(client):
    crossover = client.get("/api/model", params={"phase": "decode", "batch": 1}).json()["kv_overtakes_weights_context"]
    assert crossover == kv_overtakes_weights_context("llama3-8b", 1)
    # independent: matmul weight bytes over KV bytes per token, rounded up
    assert crossover == math.ceil(2 * (LLAMA3_8B_PARAMS - LLAMA3_8B_EMBEDDING_PARAMS - LLAMA3_8B_NORM_PARAMS) / 131_072)
    assert crossover == 114_512 < MAX_TOKENS  # within the page's context range
    for context, kv_wins in ((crossover - 1, False), (crossover, True)):
        step = client.get("/api/model", params={"phase": "decode", "context": context}).json()
        matmul_weights = step["weight_bytes"] - 4096 * 2  # less the one embedding row gathered
        assert (step["kv_bytes"] >= matmul_weights) == kv_wins, context
    # B sequences read B times the KV cache: the crossover falls as 1/B (ceil)
    assert client.get("/api/model", params={"phase": "decode", "batch": 8}).json()["kv_overtakes_weights_context"] == math.ceil(
        2 * (LLAMA3_8B_PARAMS - LLAMA3_8B_EMBEDDING_PARAMS - LLAMA3_8B_NORM_PARAMS) / (8 * 131_072))


def test_model_follows_machine_batch_and_dtype(client):
    base = client.get("/api/model").json()
    assert client.get("/api/model", params={"machine": "a100-80gb"}).json()["time_s"] > base["time_s"]
    assert client.get("/api/model", params={"batch": 4}).json()["time_s"] > base["time_s"]
    fp8 = client.get("/api/model", params={"dtype": "fp8"}).json()
    # 1 byte each, but the embedding, the untied LM head and the norms stay bf16 (2 bytes) as quantisation tools leave them
    kept = 2 * LLAMA3_8B_EMBEDDING_PARAMS + LLAMA3_8B_NORM_PARAMS
    assert fp8["precision"]["weights"] == "fp8" and fp8["memory"]["weights_bytes"] == LLAMA3_8B_PARAMS + kept
    v100 = client.get("/api/model", params={"machine": "v100"}).json()  # its default dtype
    assert v100["precision"]["weights"] == "fp16"


# -- /api/decode: decode versus batch --------------------------------------------------------------

def _decode_compute_bound_batch():
    """The first batch at which a Llama 3 8B decode step's matmuls take at least as long in arithmetic
    as in bytes on the H100 under seed 003's cost model. Per step the weight matmuls (M = B rows) of
    32 layers, (K, N): QKV (4096, 6144), out (4096, 4096), gate+up (4096, 28672), down (14336, 4096),
    and the LM head (4096, 128256): 2BKN FLOPs at e_c 989 TFLOP/s against 2 (BK + KN + BN) bytes at
    e_m 3.35 TB/s. (The ridge of that cost model is 0.70 x 989 / (0.85 x 3.35) = 243 FLOP/byte; the
    matmuls' intensity B KN / (BK + KN + BN) is below B, so the batch is above 243.)"""
    shapes = [(4096, 6144, 32), (4096, 4096, 32), (4096, 28672, 32), (14336, 4096, 32), (4096, 128256, 1)]
    for B in range(1, 4097):
        flops = sum(n * 2 * B * K * N for K, N, n in shapes)
        nbytes = sum(n * 2 * (B * K + K * N + B * N) for K, N, n in shapes)
        if flops / (SEED_EC * SEED_PEAK) >= nbytes / (SEED_EM * SEED_BW):
            return B


def test_decode_is_the_librarys_plan(client):
    body = client.get("/api/decode", params={"tokens": 4096, "batch": 48}).json()
    _, common = _library()
    plan = decode_plan("llama3-8b", "h100-sxm", (*DEFAULT_BATCHES, 48), 4096, **common)
    _close(body, json.loads(json.dumps(plan.to_dict())))
    assert [r["batch"] for r in body["rows"]] == sorted({*DEFAULT_BATCHES, 48})  # 1, 2, 4, ..., 1,024 and 48
    assert body["context"] == 4096 and body["batch"] == 48
    assert body["compute_bound_batch"] == plan.compute_bound_batch == _decode_compute_bound_batch() == 264
    assert body["max_batch_in_memory"] == plan.max_batch_in_memory
    assert body["kv_overtakes_weights_context"] == kv_overtakes_weights_context("llama3-8b", 48)
    assert body["kv_overtakes_weights_at_context_batch_1"] == kv_overtakes_weights_context("llama3-8b", 1)
    here = next(r for r in body["rows"] if r["batch"] == 48)
    assert body["readouts"]["step_s"] == here["step_s"] and body["readouts"]["tokens_per_s"] == here["tokens_per_s"]


def test_decode_rows_against_independent_truths(client):
    body = client.get("/api/decode", params={"tokens": 4096}).json()
    rows = {r["batch"]: r for r in body["rows"]}
    for b, r in rows.items():
        assert r["tokens_per_s"] == pytest.approx(b / r["step_s"])  # B tokens per step
        assert r["weights_intensity"] == pytest.approx(b)  # seed: decode intensity = batch in bf16
        assert r["memory_bytes"] == 2 * LLAMA3_8B_PARAMS + b * 4096 * 131_072  # weights + B S KV bytes
    # throughput rises with batch while the matmuls are memory-bound
    tps = [rows[b]["tokens_per_s"] for b in sorted(rows)]
    assert all(a < b for a, b in zip(tps, tps[1:]))
    # the matmuls turn compute-bound between 256 and 512 (at 264)
    assert rows[256]["gemm_bound"] == "memory" and rows[512]["gemm_bound"] == "compute"
    # weights, a step's activations (869,531,648 B: test_model_memory_is_the_librarys_plan) and KV fit in 0.9 of the
    # 81,559 MiB an H100 reports, as serving sizes it: floor((0.9 x 85,520,809,984 - 2 x 8.03e9 - 869,531,648) /
    # (4,096 x 131,072)) = floor(60,038,674,841.6 / 536,870,912) = 111
    assert body["max_batch_in_memory"] == int((0.9 * 81_559 * 2**20 - 2 * LLAMA3_8B_PARAMS - 869_531_648)
                                              // (4096 * 131_072)) == 111
    assert rows[64]["fits"] is True and rows[128]["fits"] is False


def test_decode_chart_is_drawn_from_the_plan(client):
    body = client.get("/api/decode", params={"tokens": 4096, "batch": 100}).json()
    chart, rows = body["chart"], {r["batch"]: r for r in body["rows"]}
    batches = chart["batch"]
    assert batches[0] == 1 and batches[-1] == 1024 and batches == sorted(set(batches))
    assert {2**k for k in range(11)} | {264, 111, 100} <= set(batches)  # powers of two and the marks, exactly
    for b in (1, 64, 100, 1024):
        i = batches.index(b)
        assert chart["tokens_per_s"][i] == pytest.approx(rows[b]["tokens_per_s"])
        assert chart["step_time"][i] * chart["axes"]["step_time"]["seconds_per_unit"] == pytest.approx(rows[b]["step_s"])
    assert chart["points"]["batch"] == sorted(rows)
    assert chart["here"]["batch"] == 100 and chart["here"]["tokens_per_s"] == pytest.approx(rows[100]["tokens_per_s"])
    assert chart["compute_bound_batch"] == 264 and chart["compute_bound_log10"] == pytest.approx(math.log10(264))
    assert chart["no_fit_from"] == 111 and "beyond batch 111" in chart["no_fit_text"]  # as test_decode_rows_...
    assert chart["ticks"]["values"] == [2**k for k in range(11)]
    assert chart["axes"]["step_time"]["type"] == "log" and chart["axes"]["tokens_per_s"]["type"] == "linear"
    # the step axis is in the unit of the slowest step, batch 1,024: it reads the 16.1 GB of weights and
    # 1,024 x 4,096 x 131,072 B = 550 GB of KV cache at e_m 3.35 TB/s, at least (16.1 + 550) / 2.85 = 0.199 s
    # (the compute-bound matmuls add their arithmetic), under a second: ms
    assert (2 * LLAMA3_8B_PARAMS + 1024 * 4096 * 131_072) / (0.85 * 3.35e12) <= rows[1024]["step_s"] < 1.0
    assert (chart["axes"]["step_time"]["unit"], chart["axes"]["step_time"]["title"]) == ("ms", "step time (ms)")
    assert chart["colors"]["memory"] == "#d62728" and chart["colors"]["compute"] == "#1f77b4"


def test_decode_follows_context_batch_and_machine(client):
    base = client.get("/api/decode", params={"tokens": 4096}).json()
    longer = client.get("/api/decode", params={"tokens": 4096, "context": 16384}).json()
    assert longer["context"] == 16384 and longer["max_batch_in_memory"] < base["max_batch_in_memory"]
    assert longer["rows"][0]["step_s"] > base["rows"][0]["step_s"]  # more KV cache to read
    h200 = client.get("/api/decode", params={"tokens": 4096, "machine": "h200"}).json()
    assert h200["max_batch_in_memory"] > base["max_batch_in_memory"]  # 141 GB against 80 GB
    big = client.get("/api/decode", params={"tokens": 4096, "batch": 4096}).json()  # beyond the table's 1,024
    assert big["chart"]["x_max"] == 4096 and big["chart"]["batch"][-1] == 4096
    assert big["readouts"]["fits"] is False
    assert big["readouts"]["text"]["step_name"] == "Decode step at batch 4,096"


def test_a_70b_model_decodes_at_no_batch_on_one_h100(client):
    body = client.get("/api/decode", params={"model": "llama3-70b", "tokens": 4096}).json()
    assert body["max_batch_in_memory"] == 0
    assert all(r["fits"] is False for r in body["rows"])
    assert body["chart"]["no_fit_from"] == 1 and "at any batch" in body["chart"]["no_fit_text"]
    assert "do not fit in 77 GB" in body["sentence"]  # 0.9 of the 85.5 GB the driver reports


def test_a_machine_without_a_memory_capacity_gives_no_fit(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(MACHINE_FILE)
    client = TestClient(create_app([str(path)]))
    model = client.get("/api/model", params={"machine": "my-gpu"}).json()
    assert model["memory"]["fits"] is None and model["fit"]["state"] == "unknown"
    assert model["memory_chart"]["capacity_gb"] is None
    decode = client.get("/api/decode", params={"machine": "my-gpu"}).json()
    assert decode["max_batch_in_memory"] is None and decode["chart"]["no_fit_from"] is None


def _answer(client, endpoint: str, params: dict) -> dict:
    """A 200's JSON: eight requests at once may wait past the app's QUEUE_WAIT_S on a loaded machine (the suite on
    every core), answered a 503 with Retry-After, retried here as a client would; any other answer fails."""
    for _ in range(30):
        r = client.get(endpoint, params=params)
        if r.status_code != 503:
            break
        time.sleep(float(r.headers.get("retry-after", 1)))
    assert r.status_code == 200, (endpoint, params, r.status_code, r.text[:200])
    return r.json()


def test_plan_views_share_no_state(client):
    params = [{"tokens": t, "machine": m, "batch": b} for t in (512, 8192) for m in ("h100-sxm", "a100-80gb") for b in (1, 8)]

    def readouts(endpoint, p):
        return _answer(client, endpoint, p)["readouts"]

    for endpoint in PLAN_ENDPOINTS:
        alone = [readouts(endpoint, p) for p in params]
        with ThreadPoolExecutor(max_workers=8) as pool:
            together = list(pool.map(lambda p: readouts(endpoint, p), params * 2))
        assert together == alone * 2, endpoint


# -- downloads ------------------------------------------------------------------------------------

def test_csv_is_the_op_table_with_units_in_the_header_and_a_totals_row(client):
    import csv
    import io

    r = client.get("/api/layer.csv", params={"tokens": 8192})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert 'attachment; filename="layer-llama3-8b-h100-sxm-prefill-8192-b1-naive.csv"' == r.headers["content-disposition"]
    lines = r.text.strip().splitlines()
    assert lines[0] == "op,bound,flops,bytes,intensity_flop_per_byte,compute_us,memory_us,launch_us,time_us"
    rows = list(csv.DictReader(io.StringIO(r.text)))
    ops, total = rows[:-1], rows[-1]
    assert len(ops) == 12 and total["op"] == "total"
    for row, (name, flops, nbytes) in zip(ops, _seed_layer(8192)):  # SPEC C5's ops, written out above
        compute_s, memory_s, time_s = _seed_op_times(flops, nbytes)
        assert (row["op"], row["bound"]) == (name, "memory" if memory_s > compute_s else "compute")
        assert int(row["flops"]) == flops and int(row["bytes"]) == nbytes  # whole numbers, exactly
        assert float(row["time_us"]) == pytest.approx(time_s * 1e6, rel=1e-5)
    # no 17-digit floats: at most 6 significant figures in any cell that is not a whole number
    for row in rows:
        for field in ("intensity_flop_per_byte", "compute_us", "memory_us", "launch_us", "time_us"):
            assert len(row[field].replace(".", "").replace("-", "").lstrip("0")) <= 6, (row["op"], field, row[field])
    # the totals row is the sum of the rows, and seed 003's figures: 8,756 us in all, 5,965 us FLOPs-only
    for field in ("flops", "bytes", "compute_us", "memory_us", "launch_us", "time_us"):
        assert float(total[field]) == pytest.approx(sum(float(row[field]) for row in ops), rel=1e-5), field
    assert round(float(total["time_us"])) == 8756 and round(float(total["compute_us"])) == 5965
    assert float(total["launch_us"]) == 12 * 3  # 12 launches of 3 us
    assert float(total["intensity_flop_per_byte"]) == pytest.approx(float(total["flops"]) / float(total["bytes"]), rel=1e-5)



def test_json_download_is_the_library_report(client):
    r = client.get("/api/layer.json", params={"phase": "decode", "tokens": 4096})
    assert r.status_code == 200
    assert "attachment" in r.headers["content-disposition"] and "ctx4096" in r.headers["content-disposition"]
    expected = layer_report(phase="decode", tokens=4096, cost_model=seed_cost_model()).to_dict()
    assert r.json() == json.loads(json.dumps(expected))


# -- the page and its assets ------------------------------------------------------------------------

def test_index_page_has_the_controls_and_no_cdn(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for element_id in ("machine", "model", "phase", "tokens", "tokens-number", "batch", "attention",
                       "compute-efficiency", "memory-efficiency", "launch-overhead", "overlap",
                       "total", "sentence", "chart", "roofline", "download-csv", "download-json",
                       "view-layer", "view-model", "view-decode", "panel-model", "panel-decode",
                       "model-latency", "model-parts", "model-memory-chart", "model-fit",
                       "decode-throughput-chart", "decode-latency-chart", "decode-compute-bound", "decode-max-batch"):
        assert f'id="{element_id}"' in r.text, element_id
    assert "http://" not in r.text and "https://" not in r.text  # works offline


def test_static_assets_are_served(client):
    js = client.get("/static/app.js")
    assert js.status_code == 200 and all(endpoint in js.text for endpoint in ("/api/layer", *PLAN_ENDPOINTS))
    assert client.get("/static/style.css").status_code == 200
    plotly = client.get("/static/plotly.min.js")
    assert plotly.status_code == 200
    assert len(plotly.content) > 1_000_000 and b"plotly" in plotly.content[:2000].lower()


def test_plotly_is_the_vendored_bar_and_scatter_bundle_gzipped(client):
    """The page's Plotly is plotly.js's basic bundle (bar and scatter traces), from the package; a
    client that accepts gzip gets it compressed to about a third, one that does not gets the file."""
    from roofline.web.app import VENDORED_PLOTLY_JS

    raw = VENDORED_PLOTLY_JS.read_bytes()
    assert b"plotly.js (basic - minified)" in raw[:200]
    plain = client.get("/static/plotly.min.js", headers={"Accept-Encoding": "identity"})
    assert plain.content == raw and "content-encoding" not in plain.headers
    packed = client.get("/static/plotly.min.js", headers={"Accept-Encoding": "gzip"})
    assert packed.headers["content-encoding"] == "gzip" and packed.content == raw  # httpx decodes it
    assert int(packed.headers["content-length"]) < len(raw) / 2 and "Accept-Encoding" in packed.headers["vary"]


def test_without_the_vendored_bundle_the_plotly_packages_full_one_is_served(monkeypatch, tmp_path):
    import roofline.web.app as web_app

    monkeypatch.setattr(web_app, "VENDORED_PLOTLY_JS", tmp_path / "missing.min.js")
    r = TestClient(create_app()).get("/static/plotly.min.js")
    assert r.status_code == 200 and len(r.content) > 3_000_000 and b"plotly.js v" in r.content[:200]


def test_the_package_data_holds_every_static_file_and_plotlys_licence():
    """What a wheel installs: pyproject's package-data globs (glob's rules: ``*`` stays in its folder)
    match every file under web/static of the installed package, the vendored Plotly and its MIT
    licence among them."""
    import glob
    from importlib import resources
    from pathlib import Path

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    package = Path(str(resources.files("roofline")))
    vendor = package / "web" / "static" / "vendor"
    assert (vendor / "plotly-basic.min.js").is_file() and "MIT License" in (vendor / "plotly-basic.LICENSE").read_text()
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["roofline"]
    shipped = {Path(p) for g in globs for p in glob.glob(g, root_dir=package)}
    static = {p.relative_to(package) for p in (package / "web" / "static").rglob("*") if p.is_file()}
    assert static - shipped == set()


def test_responses_are_gzipped_for_a_client_that_accepts_it(client):
    """JSON, the CSV download and the page go compressed past 1 kB; HEAD and small bodies as they are."""
    for url in ("/api/layer", "/api/layer.csv", "/api/layer.json", "/api/options", "/", "/static/app.js"):
        r = client.get(url, headers={"Accept-Encoding": "gzip"})
        assert r.status_code == 200 and r.headers.get("content-encoding") == "gzip", url
    csv = client.get("/api/layer.csv", headers={"Accept-Encoding": "gzip"})
    assert csv.text.startswith(client.get("/api/layer.csv", headers={"Accept-Encoding": "identity"}).text[:40])
    assert "attachment" in csv.headers["content-disposition"]
    head = client.head("/", headers={"Accept-Encoding": "gzip"})
    assert head.status_code == 200 and "content-encoding" not in head.headers
    small = client.get("/api/layer", params={"tokens": 0}, headers={"Accept-Encoding": "gzip"})
    assert small.status_code == 422 and small.json()["field"] == "tokens"


def test_javascript_computes_no_model_numbers(client):
    js = client.get("/static/app.js").text
    # the one exception: the ratio of a pinned baseline's figure to the shown one (two API answers)
    # and the baseline's bars in the shown chart's unit (each payload picks its own); and the roofline
    # labels' pixel geometry (a marker's centre, a label's box around it: no model number)
    for name, divisions in (("ratioOf", 1), ("rescale", 1), ("clearLabels", 6)):
        start, end = js.index(f"function {name}("), js.index(f"}} // end {name}")
        assert js[start:end].count(" / ") == divisions, name
        js = js[:start] + js[end:]
    code = "\n".join(line.split("//")[0] for line in js.splitlines())
    for formula in ("Math.", "1e6", "1e-6", "1e12", " / ", " * "):
        assert formula not in code, formula


def test_openapi_schema_documents_the_layer_parameters(client):
    schema = client.get("/openapi.json").json()
    params = {p["name"]: p for p in schema["paths"]["/api/layer"]["get"]["parameters"]}
    assert set(SEED_DEFAULTS) <= set(params)
    assert "h100-sxm" in json.dumps(params["machine"]["schema"])
    assert params["tokens"]["schema"]["maximum"] == MAX_TOKENS
    assert "422" in schema["paths"]["/api/layer"]["get"]["responses"]


def test_openapi_schema_gives_the_plan_views_the_same_parameters(client):
    """/api/model and /api/decode take /api/layer's parameters (one definition), so the schemathesis
    fuzz (test_web_fuzz.py, which walks every path of this schema) covers them too."""
    paths = client.get("/openapi.json").json()["paths"]
    layer = {p["name"]: p for p in paths["/api/layer"]["get"]["parameters"]}
    for endpoint in PLAN_ENDPOINTS:
        plan = {p["name"]: p for p in paths[endpoint]["get"]["parameters"]}
        assert plan.keys() == layer.keys() | {"weights", "kv_cache", "tp"}, endpoint  # and each part's dtype, GPUs
        assert all(plan[k] == layer[k] for k in layer if k != "dtype"), endpoint
        assert "422" in paths[endpoint]["get"]["responses"] and "503" in paths[endpoint]["get"]["responses"]
    # the plan views store weights and caches in the planner's dtypes: the schema offers no others
    plan_dtypes = paths["/api/model"]["get"]["parameters"]
    enum = next(p for p in plan_dtypes if p["name"] == "dtype")["schema"]["anyOf"][0]["enum"]
    assert "fp64" not in enum and "tf32" not in enum and {"bf16", "fp8", "int4"} <= set(enum)


def _schema_bounds(client, path):
    out = {}
    for p in client.get("/openapi.json").json()["paths"][path]["get"]["parameters"]:
        sch = p["schema"].get("anyOf", [p["schema"]])[0]
        if sch.get("type") in ("integer", "number"):
            out[p["name"]] = (sch.get("minimum", sch.get("exclusiveMinimum")), sch.get("maximum"), sch["type"])
    return out


@pytest.mark.parametrize("path", ["/api/layer", "/api/decode"])
def test_the_schema_states_the_ranges_the_server_enforces(client, path):
    """Each numeric parameter's schema minimum and maximum are the server's: at the bound a 200,
    one step outside a 422 naming the parameter (``layer``'s range depends on the model: left out)."""
    bounds = _schema_bounds(client, path)
    assert bounds["compute_efficiency"][0] == 0.001 and bounds["memory_efficiency"][0] == 0.001
    base = {"phase": "decode", "model": "llama3.2-1b"} if path == "/api/layer" else {"model": "llama3.2-1b"}
    for name, (low, high, kind) in bounds.items():
        if name in ("layer", "tp"):  # tp's range depends on the model's heads too (test_web_knobs.py)
            continue
        step = 1 if kind == "integer" else 1e-9 * max(1.0, abs(high or 1))
        for value in (low, high):
            r = client.get(path, params={**base, name: value})
            assert r.status_code == 200, (name, value, r.text[:300])
        for value in (low - (1 if kind == "integer" else 1e-6), high + step):
            r = client.get(path, params={**base, name: value})
            assert r.status_code == 422 and r.json()["field"] == name, (name, value, r.text[:300])


# -- bad input: a 422 that names the field ---------------------------------------------------------

BAD = [
    # missing (empty) values
    ("tokens", ""), ("batch", ""), ("compute_efficiency", ""), ("machine", ""),
    # negative and zero
    ("tokens", "-5"), ("tokens", "0"), ("batch", "-1"), ("context", "-1"), ("compute_efficiency", "-0.1"),
    ("compute_efficiency", "0"), ("memory_efficiency", "-1"), ("launch_overhead_us", "-1"), ("overlap", "-0.5"),
    # NaN and infinities
    ("compute_efficiency", "nan"), ("memory_efficiency", "NaN"), ("launch_overhead_us", "nan"),
    ("overlap", "nan"), ("tokens", "nan"), ("launch_overhead_us", "inf"), ("launch_overhead_us", "-inf"),
    ("compute_efficiency", "Infinity"),
    # huge and out of range
    ("tokens", "131073"), ("tokens", "1e30"), ("tokens", str(10**40)), ("batch", "1000000000"),
    ("context", "200000"), ("compute_efficiency", "1.5"), ("overlap", "2"), ("launch_overhead_us", "1e308"),
    ("launch_overhead_us", "1e400"), ("memory_efficiency", "1e400"),
    # positive but so small that the predicted time overflows
    ("compute_efficiency", "5e-324"), ("memory_efficiency", "5e-324"),
    # not numbers, fractions where whole numbers are needed
    ("tokens", "8k"), ("tokens", "8192.5"), ("batch", "two"), ("overlap", "full"),
    # unknown names
    ("machine", "h100-sxmm"), ("machine", "../../etc/passwd.toml"), ("model", "llama9"),
    ("phase", "train"), ("attention", "paged"), ("dtype", "fp7"),
]


@pytest.mark.parametrize("endpoint", LAYER_ENDPOINTS + PLAN_ENDPOINTS)
@pytest.mark.parametrize("field, value", BAD)
def test_bad_input_is_a_422_naming_the_field(client, endpoint, field, value):
    r = client.get(endpoint, params={field: value})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == field
    assert body["detail"][0]["loc"] == ["query", field]
    assert body["detail"][0]["msg"]


def test_absent_parameters_take_the_seed_defaults(client):
    assert client.get("/api/layer").json()["total_s"] == client.get("/api/layer", params=SEED_DEFAULTS).json()["total_s"]


def test_library_errors_are_422_naming_their_field(client):
    # V100 has no bf16 peak: the library's RooflineError names dtype
    r = client.get("/api/layer", params={"machine": "v100", "dtype": "bf16"})
    assert r.status_code == 422
    assert r.json()["field"] == "dtype"
    assert "no bf16 peak" in r.json()["detail"][0]["msg"]
    # without a dtype the machine's own default is used
    assert client.get("/api/layer", params={"machine": "v100"}).json()["dtype"] == "fp16"


def test_absurd_sizes_are_422_naming_the_field(client):
    # 65,536 sequences of 131,072 tokens: 8.6e9 token rows, refused by the library as batch
    for endpoint in ("/api/layer", "/api/model"):
        r = client.get(endpoint, params={"tokens": MAX_TOKENS, "batch": 65536})
        assert r.status_code == 422 and r.json()["field"] == "batch", endpoint


def test_library_errors_of_the_planner_are_422_naming_their_field(client):
    for endpoint in PLAN_ENDPOINTS:
        r = client.get(endpoint, params={"machine": "v100", "dtype": "bf16"})  # no bf16 peak
        assert r.status_code == 422 and r.json()["field"] == "dtype", endpoint
        r = client.get(endpoint, params={"dtype": "tf32"})  # a peak's dtype, not a storage width the planner knows
        assert r.status_code == 422 and r.json()["field"] == "dtype", endpoint


@pytest.mark.slow
def test_every_preset_machine_and_model_answers(client):
    for m in list_machines():
        for endpoint in ("/api/layer", *PLAN_ENDPOINTS):
            assert client.get(endpoint, params={"machine": m.key, "tokens": 64}).status_code == 200, (endpoint, m.key)
    for c in list_models():
        for endpoint in ("/api/layer", *PLAN_ENDPOINTS):
            assert client.get(endpoint, params={"model": c.key, "tokens": 64}).status_code == 200, (endpoint, c.key)


# -- machine files, state, packaging -----------------------------------------------------------------

def test_machine_files_join_the_presets(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(MACHINE_FILE)
    client = TestClient(create_app([str(path)]))
    machines = client.get("/api/machines").json()
    mine = machines[-1]
    assert (mine["key"], mine["name"], mine["origin"]) == ("my-gpu", "My GPU", str(path))
    body = client.get("/api/layer", params={"machine": "my-gpu"}).json()
    assert body["machine_name"] == "My GPU"
    assert body["roofline"]["ridge_flop_per_byte"] == pytest.approx(100)  # 100e12 / 1e12


def test_machine_file_errors_name_the_machine_field(tmp_path):
    clash = tmp_path / "clash.toml"
    clash.write_text(MACHINE_FILE.replace("my-gpu", "h100-sxm"))
    with pytest.raises(RooflineError, match="already a preset") as err:
        create_app([str(clash)])
    assert err.value.field == "machine"
    with pytest.raises(RooflineError, match="cannot read machine file"):
        create_app([str(tmp_path / "absent.toml")])


def test_requests_share_no_state(client):
    """Concurrent requests with different parameters get what they would get alone."""
    params = [{"tokens": t, "machine": m, "attention": a}
              for t in (128, 8192) for m in ("h100-sxm", "a100-80gb") for a in ("naive", "flash")]
    alone = [_answer(client, "/api/layer", p)["total_s"] for p in params]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(lambda p: _answer(client, "/api/layer", p)["total_s"], params * 4))
    assert together == alone * 4


def _fake_uvicorn(monkeypatch) -> dict:
    """uvicorn.Server.run records what it was given instead of serving."""
    import uvicorn

    seen = {}

    def run(server, sockets=None):
        seen.update(host=server.config.host, port=server.config.port, app=server.config.app,
                    bound=[s.getsockname()[1] for s in sockets or []])

    monkeypatch.setattr(uvicorn.Server, "run", run)
    return seen


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_prints_the_url_and_runs_uvicorn(monkeypatch, capsys):
    seen = _fake_uvicorn(monkeypatch)
    port = _free_port()
    roofline.web.serve(host="127.0.0.1", port=port)
    assert f"http://127.0.0.1:{port}/" in capsys.readouterr().out
    assert seen["host"] == "127.0.0.1" and seen["port"] == port and seen["bound"] == [port]  # uvicorn gets the socket
    assert seen["app"].title == "roofline workshop"


def test_serve_on_a_port_in_use_is_one_line_naming_the_port(monkeypatch, capsys):
    import socket

    from roofline.cli import main

    seen = _fake_uvicorn(monkeypatch)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and not seen  # no URL printed, uvicorn never started
    assert err.count("\n") == 1 and f"--port {port}" in err and "in use" in err
    assert main(["serve", "--host", "no-such-host.invalid", "--port", str(_free_port())]) == 2
    assert "--host 'no-such-host.invalid'" in capsys.readouterr().err


def test_missing_web_extra_is_a_roofline_error(monkeypatch):
    monkeypatch.delattr(roofline.web, "app", raising=False)
    monkeypatch.delitem(sys.modules, "roofline.web.app", raising=False)
    monkeypatch.setitem(sys.modules, "fastapi", None)  # import fastapi now fails
    with pytest.raises(RooflineError, match=r"pip install 'roofline\[web\]'"):
        roofline.web.create_app()


def test_core_does_not_import_the_web_stack():
    code = textwrap.dedent("""
        import sys, roofline, roofline.cli, roofline.blocks, roofline.cost, roofline.web
        roofline.cli.build_parser()  # registers `serve` without importing the web stack
        bad = [m for m in ("fastapi", "uvicorn", "plotly", "starlette") if m in sys.modules]
        assert not bad, bad
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_serve_starts_the_workshop(monkeypatch, capsys, tmp_path):
    from roofline.cli import main

    seen = _fake_uvicorn(monkeypatch)
    path = tmp_path / "mine.toml"
    path.write_text(MACHINE_FILE)
    port = _free_port()
    assert main(["serve", "--port", str(port), "--machine", str(path)]) == 0
    assert f"http://127.0.0.1:{port}/" in capsys.readouterr().out
    assert TestClient(seen["app"]).get("/api/layer", params={"machine": "my-gpu"}).status_code == 200
    assert main(["serve", "--port", "70000"]) == 2
    assert main(["serve", "--machine", str(tmp_path / "absent.toml")]) == 2
    assert "cannot read machine file" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The CLI and the web give the same numbers for the same inputs
# ---------------------------------------------------------------------------------------------

PARITY_MODELS = ("llama3-8b", "gemma3-27b", "gpt-oss-20b", "deepseek-v3", "jamba", "mamba2-2.7b", "qwen3-30b-a3b")


def _cli_json(*argv):
    import contextlib
    import io

    from roofline.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("machine", [m.key for m in list_machines()])
def test_cli_and_web_agree_machine_by_machine(client, machine):
    """Absent parameters mean the same thing on both sides: the machine's launch overhead and its
    default dtype, naive attention for one layer and flash for the whole model, a quantised
    checkpoint's weights as stored (gpt-oss-20b's MXFP4 experts)."""
    for model in PARITY_MODELS:
        if model != "llama3-8b" and machine not in ("h100-sxm", "mi300x", "tpu-v5p"):
            continue  # every machine with the seed's model, three vendors with every layer kind
        cli = _cli_json("layer", "--model", model, "--machine", machine, "--tokens", "1024", "--layer", "0", "--json")
        web = client.get("/api/layer", params={"model": model, "machine": machine, "tokens": 1024, "layer": 0}).json()
        assert web["total_s"] == pytest.approx(cli["total_s"], rel=1e-12), (model, "layer")
        cli = _cli_json("decode", "--model", model, "--machine", machine, "--context", "4096", "--batch", "8", "--json")
        web = client.get("/api/model", params={"model": model, "machine": machine, "phase": "decode", "tokens": 4096,
                                               "batch": 8}).json()
        step = next(r for r in cli["rows"] if r["batch"] == 8)
        assert web["time_s"] == pytest.approx(step["step_s"], rel=1e-12), (model, "decode")


def test_unknown_query_parameters_are_422_naming_them(client):
    r = client.get("/api/decode", params={"model": "llama3-8b", "max_users": 4, "bogus": 1})  # max_users: /api/serving's
    assert r.status_code == 422 and r.json()["fields"] == ["bogus", "max_users"]


def test_what_a_model_leaves_out_is_in_every_view(client):
    layer = client.get("/api/layer", params={"model": "gemma3-27b", "layer": 5}).json()
    assert any("vision" in n for n in layer["notes"]) and "vision" in layer["caption"]
    decode = client.get("/api/decode", params={"model": "deepseek-v3"}).json()
    assert any("multi-token-prediction" in n for n in decode["notes"])


def test_a_foreign_host_header_is_refused(client):
    # a page on another origin that rebinds its DNS name to 127.0.0.1 sends its own Host header
    assert client.get("/api/machines", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/api/machines", headers={"host": "127.0.0.1:8000"}).status_code == 200
    assert client.get("/docs").status_code == 404  # the CDN-loading docs page is off


def test_a_full_server_answers_503_not_an_unbounded_queue(monkeypatch):
    import roofline.web.app as web_app
    from roofline.web.pool import PoolLimits

    monkeypatch.setattr(web_app, "QUEUE_WAIT_S", 0.01)
    # no worker for a plan computation and no place to wait: every one is told to retry at once
    client = TestClient(web_app.create_app(pool_limits=PoolLimits(workers=0, queued=0, wait_s=0.01, job_s=1)))
    r = client.get("/api/decode")
    assert r.status_code == 503 and r.headers["retry-after"] == "1" and r.json()["reason"] == "queue_full"
    assert client.get("/api/model").status_code == 503 and client.get("/api/serving").status_code == 503
    # the light views have their own places: a slider move is not queued behind a burst of plans
    assert client.get("/api/layer").status_code == 200
    with TestClient(web_app.create_app()) as fresh:
        assert fresh.get("/api/decode").status_code == 200
    # no place for a light computation either: a light request waits its limit and is told to retry
    monkeypatch.setattr(web_app, "LIGHT_INFLIGHT", 0)
    r = TestClient(web_app.create_app()).get("/api/layer")
    assert r.status_code == 503 and r.headers["retry-after"] == "1" and r.json()["reason"] == "queue_wait"


def test_a_half_sent_request_is_closed_after_the_read_timeout(monkeypatch):
    """A connection that never finishes its request head is closed (uvicorn alone waits for ever)."""
    import socket
    import threading
    import time

    import uvicorn

    import roofline.web.app as web_app
    import roofline.web.server as web_server

    monkeypatch.setattr(web_server, "REQUEST_READ_TIMEOUT_S", 0.5)
    sock = web_server.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(web_app.create_app(), log_level="warning", http=web_server.timed_protocol()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(b"GET /api/options HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: the head is unfinished
            t0 = time.monotonic()
            assert c.recv(1024) == b""  # the server closed it
            assert 0.3 < time.monotonic() - t0 < 4
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:  # a whole request is answered
            c.sendall(b"GET /api/options HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert c.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()


def test_a_layer_past_the_models_layers_is_refused_for_every_model(client):
    r = client.get("/api/layer", params={"layer": 1000})  # llama3-8b: one layer kind, 32 layers
    assert r.status_code == 422 and r.json()["field"] == "layer" and "0 to 31" in r.text
    assert client.get("/api/layer", params={"layer": 31}).status_code == 200


def test_head_of_the_page_is_answered(client):
    assert client.head("/").status_code == 200


def test_a_repeated_query_parameter_is_refused_not_the_last_taken(client):
    r = client.get("/api/layer?tokens=1&tokens=2")
    assert r.status_code == 422 and r.json()["field"] == "tokens" and "2 times" in r.text


def test_the_layer_view_says_a_quantised_checkpoint_is_priced_at_its_dtype(client):
    """A reviewer read gpt-oss's note 'the experts are stored in MXFP4' under a layer priced at bf16
    (the CLI says so; the API dropped it): the API's notes carry it."""
    notes = client.get("/api/layer", params={"model": "gpt-oss-120b"}).json()["notes"]
    assert any(n.startswith("every weight is priced at bf16 here; the checkpoint stores experts mxfp4") for n in notes)
    assert not any("priced at" in n for n in client.get("/api/layer").json()["notes"])  # a bf16 checkpoint at bf16


def test_a_context_in_the_link_and_an_unbounded_context_are_said(client):
    """A reviewer's link with context=4096 gave a 512-token layer a 574 us figure under a sentence
    that read as a plain 512-token prefill (404 us); and a windowed model's 'one sequence can grow
    to 16,777,216 tokens' was the search's cap, not a limit."""
    chunk = client.get("/api/layer", params={"tokens": 512, "context": 4096}).json()["sentence"]
    assert chunk.startswith("For one 512-token sequence over a context of 4,096")
    assert "over a context" not in client.get("/api/layer", params={"tokens": 512}).json()["sentence"]
    limits = client.get("/api/model", params={"model": "mistral-7b"}).json()["memory_limits_text"]
    assert "can grow without bound" in limits and "16,777,216 tokens" in limits.split("searched to")[1]
    mla = client.get("/api/layer", params={"model": "deepseek-v3", "machine": "h200"}).json()
    assert mla["attention"] == "flash (MLA: costed fused only, not naive)"


def test_the_workshop_doc_quotes_the_totals_as_the_page_shows_them(client):
    """Issue 38: docs/workshop.md said "71,117 us" where the page reads "71.1 ms". Seed 003's totals,
    205 / 8,756 / 71,117 us at 128 / 8,192 / 32,768 tokens, read in us below 10 ms and in ms at
    three figures from it: 205 µs, 8,756 µs, 71.1 ms."""
    from pathlib import Path

    shown = [client.get("/api/layer", params={"tokens": t}).json()["readouts"]["text"]["total"] for t in (128, 8192, 32768)]
    assert shown == ["205 µs", "8,756 µs", "71.1 ms"]
    doc = " ".join((Path(__file__).parent.parent / "docs" / "workshop.md").read_text().split())
    assert f"the page shows {shown[0]}, {shown[1]} and {shown[2]}" in doc
