"""The plan views' knobs (issue 14 item 4): weights and KV-cache precision apart from the
activations, tensor parallelism and a CUDA graph, on /api/model and /api/decode, and a CUDA graph
on /api/layer; each checked against arithmetic from the model's published shape, and each bad value
a 422 naming its field."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

with warnings.catch_warnings():  # newer Starlette suggests httpx2; httpx works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from roofline.plan import QUANT_DTYPES
from roofline.web.app import MAX_TP

# Llama 3 8B (Meta's model card, 8.03B parameters; its config.json): D 4096, L 32, H 32 heads and
# K 8 kv heads of d_head 128, F 14,336, V 128,256, untied LM head.
D, L, K, D_HEAD, F, V = 4096, 32, 8, 128, 14336, 128_256
EMBEDDING = V * D  # 525,336,576, and the LM head the same
NORMS = (2 * L + 1) * D  # two RMSNorms a block and the final one: 266,240
# a block: q and o 4096 x 4096, k and v 4096 x 1024, the MLP's three 4096 x 14,336, two norms
BLOCK = 2 * D * D + 2 * D * K * D_HEAD + 3 * D * F  # 218,103,808 without its norms
PARAMS = L * BLOCK + 2 * EMBEDDING + NORMS  # = 8,030,261,248
assert PARAMS == 8_030_261_248
# quantisation tools leave the embedding, the LM head and the norms at bf16 (Precision.kept)
KEPT = 2 * EMBEDDING + NORMS
INT4_WEIGHT_BYTES = (PARAMS - KEPT) * 0.5 + KEPT * 2  # = 5,591,539,712
H100_LAUNCH_S = 3e-6  # the h100-sxm preset's launch overhead (seed 003's 3 µs)


def get(client, path, **params):
    r = client.get(path, params=params)
    assert r.status_code == 200, r.text[:400]
    return r.json()


def test_int4_weights_hold_a_quarter_of_the_bf16_weights(client):
    bf16 = get(client, "/api/model")["memory"]
    int4 = get(client, "/api/model", weights="int4")
    # bf16: 8,030,261,248 x 2 B = 16.06 GB; int4: x 0.5 B but the embedding, LM head and norms at 2 B: 5.59 GB
    assert bf16["weights_bytes"] == pytest.approx(PARAMS * 2, rel=1e-12)
    assert int4["memory"]["weights_bytes"] == pytest.approx(INT4_WEIGHT_BYTES, rel=1e-12)
    assert int4["memory"]["kv_cache_bytes"] == bf16["kv_cache_bytes"]  # the cache stays at the precision's bf16
    # the memory card reads the new total, and the caption names each part's dtype
    # (and a step's activations, at the activations' bf16 either way)
    assert int4["memory"]["activations_bytes"] == bf16["activations_bytes"]
    assert int4["readouts"]["memory_total_bytes"] == pytest.approx(INT4_WEIGHT_BYTES + bf16["kv_cache_bytes"]
                                                                   + bf16["activations_bytes"], rel=1e-12)
    assert "weights int4, activations bf16, KV bf16" in int4["caption"]
    # weights-only quantisation: the matmuls still compute in bf16, so the prefill FLOPs are unchanged
    assert int4["precision"]["compute"] == "bf16"


def test_fp8_kv_cache_halves_the_cache(client):
    B, S = 4, 8192
    bf16 = get(client, "/api/model", batch=B, tokens=S)["memory"]
    fp8 = get(client, "/api/model", batch=B, tokens=S, kv_cache="fp8")
    # 2 (K and V) x L 32 x K 8 x d_head 128 x w: 131,072 B a token in bf16, 65,536 in fp8
    assert bf16["kv_bytes_per_token"] == 2 * L * K * D_HEAD * 2
    assert fp8["memory"]["kv_bytes_per_token"] == 2 * L * K * D_HEAD * 1
    # B x S x per token: 4 x 8,192 x 65,536 = 2,147,483,648 B
    assert fp8["memory"]["kv_cache_bytes"] == B * S * 2 * L * K * D_HEAD * 1
    assert fp8["memory"]["weights_bytes"] == bf16["weights_bytes"]
    assert "KV fp8" in fp8["caption"]


def test_weights_and_kv_cache_override_dtype_part_by_part(client):
    body = get(client, "/api/decode", dtype="fp8", weights="int4", kv_cache="bf16", tokens=1024)
    # dtype fp8 is W8A8 (bf16 between ops); int4 weights under it dequantise into fp8 matmuls (W4A8)
    assert body["precision"] == {"weights": "int4", "activations": "bf16", "kv_cache": "bf16", "compute": "fp8"}
    assert body["weights_bytes"] == pytest.approx(INT4_WEIGHT_BYTES, rel=1e-12)
    # one sequence of 1,024 tokens at 2 x 32 x 8 x 128 x 2 B = 131,072 B a token: 134,217,728 B
    assert body["kv_bytes_per_sequence"] == 1024 * 2 * L * K * D_HEAD * 2


def test_tp_2_halves_each_gpus_weights(client):
    one = get(client, "/api/model")
    two = get(client, "/api/model", tp=2)
    # Megatron slices: heads, d_ff and the vocabulary split 2 ways (128,256 / 2 = 64,128), the norms
    # replicated: (8,030,261,248 - 266,240) / 2 + 266,240 = 4,015,263,744 parameters, x 2 B
    per_gpu = (PARAMS - NORMS) // 2 + NORMS
    assert two["memory"]["weights_bytes"] == pytest.approx(per_gpu * 2, rel=1e-12)
    assert two["memory"]["weights_bytes"] == pytest.approx(one["memory"]["weights_bytes"] / 2, rel=1e-4)
    # 8 kv heads split 4 a GPU: each GPU caches half the KV
    assert two["memory"]["kv_bytes_per_token"] == one["memory"]["kv_bytes_per_token"] / 2
    assert two["tensor_parallel"] == 2
    assert "tensor-parallel over 2 GPUs joined by nvlink" in two["caption"]
    assert "× 2 (tensor-parallel)" in two["sentence"]
    decode = get(client, "/api/decode", tp=2)
    assert decode["weights_bytes"] == two["memory"]["weights_bytes"] and decode["tensor_parallel_link"] == "nvlink"
    assert "tensor-parallel over 2 GPUs" in decode["caption"]


def test_a_cuda_graph_makes_the_layers_launches_one(client):
    eager = get(client, "/api/layer")
    graph = get(client, "/api/layer", cuda_graph="true")
    # seed 003's layer: 12 ops of 3 µs each = 36 µs eager; one graph launch = 3 µs, spread over the 12
    assert len(eager["ops"]) == 12
    assert eager["launch_s"] == pytest.approx(12 * H100_LAUNCH_S, rel=1e-12)
    assert graph["launch_s"] == pytest.approx(H100_LAUNCH_S, rel=1e-12)
    assert graph["total_s"] == pytest.approx(eager["total_s"] - 11 * H100_LAUNCH_S, rel=1e-12)
    assert graph["cuda_graph"] is True and "per pass (one CUDA graph launch)" in graph["caption"]
    assert "graph" not in str(graph["fix_first"])  # a graph already on is not offered again
    assert "graph" in str(eager["fix_first"]) or "graph" in str(eager["fixes"])


def test_a_cuda_graph_makes_the_whole_models_launches_one(client):
    body = get(client, "/api/model", cuda_graph="true", phase="decode", tokens=4096)
    assert body["launch_s"] == pytest.approx(H100_LAUNCH_S, rel=1e-12)
    assert body["cuda_graph"] is True and "per pass (one CUDA graph launch)" in body["caption"]
    decode = get(client, "/api/decode", cuda_graph="true")
    assert "per pass (one CUDA graph launch)" in decode["caption"]


@pytest.mark.parametrize("path, field, value", [
    ("/api/model", "weights", "fp64"), ("/api/model", "kv_cache", "int3"), ("/api/decode", "weights", ""),
    ("/api/model", "tp", "0"), ("/api/decode", "tp", str(MAX_TP + 1)), ("/api/model", "tp", "1.5"),
    ("/api/model", "tp", "3"),  # 32 heads do not split 3 ways, as the library refuses
    ("/api/decode", "tp", "6"), ("/api/model", "cuda_graph", "maybe"), ("/api/layer", "cuda_graph", "2"),
    ("/api/layer", "weights", "int4"), ("/api/layer", "kv_cache", "fp8"), ("/api/layer", "tp", "2"),  # not the layer's
    ("/api/serving", "cuda_graph", "true"),  # serving always replays a graph for decode
])
def test_bad_values_are_422_naming_the_field(client, path, field, value):
    r = client.get(path, params={field: value})
    assert r.status_code == 422 and r.json()["field"] == field, r.text[:400]


def test_tp_reaches_its_bound_where_the_heads_split(client):
    # Llama 3 70B: 64 heads, 8 kv heads (replicated 8 ways at t = 64); 64 GPUs span 8 nodes of 8,
    # so the all-reduces cross the H100's infiniband
    body = get(client, "/api/model", model="llama3-70b", tp=MAX_TP, phase="decode")
    assert MAX_TP == 64 and body["tensor_parallel"] == 64
    assert "tensor-parallel over 64 GPUs joined by infiniband" in body["caption"]


def test_a_refused_tp_says_which_heads(client):
    r = client.get("/api/model", params={"tp": 3})
    assert "tp 3 must divide" in r.json()["detail"][0]["msg"] and "32" in r.json()["detail"][0]["msg"]


def test_the_page_is_told_the_new_parameters_and_their_range(client):
    options = client.get("/api/options").json()
    for view in ("model", "decode"):
        assert {"weights", "kv_cache", "tp", "cuda_graph"} <= set(options["view_parameters"][view])
    assert "cuda_graph" in options["view_parameters"]["layer"]
    assert not {"weights", "kv_cache", "tp"} & set(options["view_parameters"]["layer"])
    assert options["limits"]["tp"] == [1, MAX_TP]
    schema = client.get("/openapi.json").json()["paths"]["/api/model"]["get"]["parameters"]
    weights = next(p for p in schema if p["name"] == "weights")["schema"]["anyOf"][0]
    assert weights["enum"] == list(QUANT_DTYPES)
