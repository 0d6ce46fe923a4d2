"""The workshop's explanations: each op's bound stated against the ridge at e_c and e_m, the
fixes that can and cannot move it, and the one change to make first with what it saves.
Truths from SPEC (the seed layer 8,756 µs unfused, 6,477 µs with flash attention) and arithmetic
on the H100 SXM datasheet figures (989 TFLOP/s bf16 dense, 3.35 TB/s)."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient



def test_fix_first_at_the_seed_names_flash_attention_with_the_spec_times(client):
    body = client.get("/api/layer").json()
    options = {o["change"]: o for o in body["fix_first"]["options"]}
    flash = options["fused (flash) attention"]
    assert (flash["before"], flash["after"]) == ("8,756 µs", "6,477 µs")  # SPEC: unfused and flash layer times
    assert flash["saves"] == "26%"  # (8,756 - 6,477) / 8,756 = 26.0%
    # the line leads with the largest saving, and every option saves something
    savings = [o["after_s"] for o in body["fix_first"]["options"]]
    assert savings == sorted(savings) and all(s < body["total_s"] for s in savings)
    assert body["fix_first"]["text"].startswith(f"Fix this first: {body['fix_first']['options'][0]['change']}: 8,756 µs to ")


def test_no_fix_left_says_so(client):
    # flash attention already, a TPU (no fp8 peak, no CUDA graph), no launch overhead: nothing on the list applies
    body = client.get("/api/layer", params={"attention": "flash", "machine": "tpu-v5e", "launch_overhead_us": 0}).json()
    assert body["fix_first"]["options"] == []
    assert body["fix_first"]["text"].startswith("Nothing on this page's list")


def test_each_op_row_states_its_bound_against_the_ridge_at_these_efficiencies(client):
    body = client.get("/api/layer").json()
    rows = body["ops_table"]
    assert [r["name"] for r in rows] == body["chart"]["labels"]
    assert [r["bound"] for r in rows] == body["chart"]["bound"]
    # e_c peak / (e_m bandwidth) = 0.7 * 989e12 / (0.85 * 3.35e12) = 243.1 FLOP/byte
    ridge = 0.7 * 989e12 / (0.85 * 3.35e12)
    assert f"{ridge:.1f}" == "243.1"
    for r, op in zip(rows, body["ops"]):
        side = "<" if op["intensity"] < ridge else ">"
        assert f" {side} ridge 243.1" in r["why"], r
        assert r["bound"] == ("memory" if op["intensity"] < ridge else "compute")  # the seed's overlap 1: max of the two
        if r["bound"] == "memory":
            assert "fewer bytes" in r["helps"] and r["cannot"] == "fewer FLOPs"
        else:
            assert "lower precision" in r["helps"] and r["cannot"] == "fewer bytes"
    assert "FlashAttention" in rows[2]["helps"]  # QK^T: attention, memory-bound unfused
    assert "243.1 FLOP/byte (295.2 at peak)" in body["fixes"]["ridge"]  # 989 / 3.35 = 295.2


def test_roofline_points_carry_the_op_tables_numbers_and_repeats_share_a_label(client):
    body = client.get("/api/layer").json()
    numbers = body["roofline"]["ops"]["number"]
    # the seed layer runs some ops twice at the same shape: the two norms (ops 1 and 8), QK^T and PV
    # (3 and 5: the same FLOPs and bytes, SPEC C5) and the two residual adds (7 and 12)
    assert numbers[0] == "1, 8" and numbers[2] == "3, 5" and numbers[6] == "7, 12"
    assert numbers[7] == numbers[4] == numbers[11] == ""  # drawn once, under the first one's label
    shown = sorted(int(n) for label in numbers if label for n in label.split(", "))
    assert shown == list(range(1, 13))  # every op's number appears exactly once
    assert [r["index"] for r in body["ops_table"]] == list(range(1, 13))


def test_a_storage_only_dtype_in_the_layer_view_says_how_it_is_priced(client):
    # the H100 has no int4 peak (NVIDIA lists fp8 and int8 tensor peaks, no int4): the layer is priced
    # at the bf16 peak with 0.5-byte tensors, and the page says so
    texts = [w["text"] for w in client.get("/api/layer", params={"dtype": "int4"}).json()["warnings"]]
    assert any(t.startswith("int4 has no compute peak on the H100 SXM") and "0.5 bytes an element" in t for t in texts)
    assert client.get("/api/layer", params={"dtype": "int8"}).json()["warnings"] == []  # int8 has its own peak
