"""Decode attention over an fp8 KV cache read from the generation table at its own rows (issue 35). The expected
values are read from the installed parquet files here with pyarrow; nothing is pasted from roofline's output."""

from __future__ import annotations

from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")
pytest.importorskip("aiconfigurator_core")


def _generation_latency_s(gpu: str, engine: str, version: str, kv: str, B: int, S: int, H: int, K: int, d: int) -> float:
    import importlib.util

    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0])
    rows = pa.read_table(root / "systems" / "data" / gpu / "attention" / engine / version /
                         "generation_attention_perf.parquet").to_pylist()
    hits = [r["latency"] * 1e-3 for r in rows if (r["kv_cache_dtype"], r["batch_size"], r["isl"] + r["step"],
                                                   r["num_heads"], r["num_key_value_heads"], r["head_dim"],
                                                   r.get("window_size", 0)) == (kv, B, S, H, K, d, 0)]
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_decode_attention_on_a_measured_row_comes_back_at_its_latency_whatever_the_cache_dtype(kv):
    """Llama 3.1 70B's decode on 4 H100s (64 / 4 = 16 query heads, 8 / 4 = 2 KV heads of 128), 4 sequences at 4,096
    cached tokens: vLLM's row for each cache dtype. An fp8 cache's efficiency was read against a roofline of 1-byte
    keys and applied to one of 2-byte keys: 37 us for the row's 18 us."""
    from roofline.measured.attention import attention_table

    table = {"bf16": "bfloat16", "fp8": "fp8"}[kv]
    want = _generation_latency_s("h100_sxm", "vllm", "0.24.0", table, 4, 4096, 16, 2, 128)
    t = attention_table("h100-sxm", "vllm", True)
    e = t.estimate("bf16", kv, 4, 1, 4096, 16, 2, 128, 0)
    assert e.basis == "measured" and e.time_s == pytest.approx(want, rel=1e-9)
    assert t.times("bf16", kv, 4, 1, 4096, 16, 2, 128, 0) == pytest.approx(want, rel=1e-9)
    # a cache of 4 x 4096 keys and values of 2 heads x 128 at 1 or 2 bytes: read under the H100's 3.35 TB/s
    assert 4 * 4096 * 2 * 2 * 128 * {"bf16": 2, "fp8": 1}[kv] / want < 3.35e12
