"""Right and readable (issue 14): one formatter for every number on the page (roofline.units), chart
axes in the unit of their largest value, the CSV download with its units in the header and a totals
row, the ops that cannot run on the machine, and where a decode step turns compute-bound and back.
Expected values come from arithmetic in the comments, the seed or the machine's datasheet."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")


from roofline.units import (format_duration, format_number, format_plain, format_rate, format_ratio,  # noqa: E402
                            format_si, time_unit)

H100_PEAK_BF16, H100_BYTES_PER_S = 989e12, 3.35e12  # NVIDIA H100 SXM datasheet (dense bf16)
H100_MEMORY_BYTES = 81_559 * 2**20  # what nvidia-smi reports for the "80 GB" H100 SXM (NVIDIA/nccl issue #1264)


# -- the formatter --------------------------------------------------------------------------------

@pytest.mark.parametrize("seconds, text", [
    (8756.37e-6, "8,756 µs"),  # seed 003: the layer at 8,192 tokens
    (5964.84e-6, "5,965 µs"),  # seed 003: its FLOPs-only estimate
    (204.656e-6, "205 µs"),  # seed 003: the layer at 128 tokens
    (3.4e-6, "3.4 µs"),  # below 10 µs: three figures, trailing zeros dropped
    (3e-6, "3 µs"),
    (0.194e-6, "194 ns"),
    (35.7e-3, "35.7 ms"),  # from 10 ms: ms
    (357_346e-6, "357 ms"),  # was '357,346 µs'
    (2.0149, "2.01 s"),  # from 1 s: s
    (35.7, "35.7 s"),
    (300.0, "5 min"),  # 300 s / 60
    (2.5 * 3600, "2.5 h"),
    (20.6 * 86400, "20.6 days"),
    (9999.6e-6, "10 ms"),  # rounds to 10,000 µs: the next unit
    (None, "—"),
    (float("inf"), "—"),
])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize("ratio, text", [(1.4667, "1.47×"), (24.43, "24.4×"), (244.33, "244×"), (2533.3, "2,533×"),
                                         (None, "—")])
def test_format_ratio(ratio, text):
    assert format_ratio(ratio) == text


def test_numbers_rates_sizes_and_csv_cells():
    assert [format_number(v) for v in (0.1943, 1638.4, 1e-5)] == ["0.194", "1,638", "0.00001"]  # never an exponent
    assert format_rate(4616.2) == "4,616 tokens/s" and format_rate(0.5234) == "0.523 tokens/s"
    assert format_si(80e9, "B") == "80 GB" and format_si(1.0995e12, "B") == "1.1 TB"  # decimal SI bytes
    assert format_plain(34359738368.0) == "34359738368" and format_plain(8756.123456) == "8756.12"
    assert format_plain(0.19430119) == "0.194301"


def test_time_unit_of_an_axis():
    # the bar axis the issue saw as '0.8M µs' (a largest bar of 0.8 s) and the model axis as '300k ms' (300 s)
    assert time_unit(0.8) == ("ms", 1e-3) and time_unit(300.0) == ("min", 60.0)
    assert time_unit(8e-3) == ("µs", 1e-6) and time_unit(2.0) == ("s", 1.0)


# -- the layer view at 131,072 tokens: readouts, the bar axis, the warnings -------------------------

def test_the_bar_axis_takes_the_unit_of_the_largest_bar(client):
    body = client.get("/api/layer", params={"tokens": 131072}).json()
    chart = body["chart"]
    # the largest bar is the softmax: it reads and writes w S = 2 x 32 x 131,072^2 / 2 bytes each,
    # 4 x 274,877,906,944 = 1.0995e12 B at e_m x 3.35 TB/s: 1.0995e12 / 2.8475e12 = 386 ms (> 10 ms, < 1 s)
    softmax_s = 4 * 32 * 131072**2 / 2 / (0.85 * H100_BYTES_PER_S)
    i = chart["labels"].index("softmax")
    assert max(chart["time_us"]) == chart["time_us"][i] == pytest.approx(softmax_s * 1e6, rel=1e-3)
    assert chart["axis"] == {"unit": "ms", "seconds_per_unit": 1e-3, "title": "predicted time (ms)"}
    assert chart["time"] == pytest.approx([t / 1e3 for t in chart["time_us"]])
    assert chart["time_text"][i] == "386 ms"
    # every time on the cards in one style: nothing in µs past 10 ms
    text = body["readouts"]["text"]
    for key in ("total", "flops_only", "bytes_only"):
        assert text[key].endswith(" ms") or text[key].endswith(" s"), text[key]
    assert text["flops_ratio"] == format_ratio(body["total_s"] / body["flops_only_s"])


def test_the_seed_layer_keeps_its_microseconds(client):
    chart = client.get("/api/layer", params={"tokens": 8192}).json()["chart"]
    # the largest op at 8,192 tokens is gate+up: 2 x 8,192 x 4,096 x 28,672 FLOPs / (0.70 x 989 TFLOP/s) = 2,779 us
    assert max(chart["time_us"]) == pytest.approx(2 * 8192 * 4096 * 28672 / (0.7 * H100_PEAK_BF16) * 1e6 + 3, rel=1e-3)
    assert chart["axis"]["title"] == "predicted time (µs)" and chart["time"] == pytest.approx(chart["time_us"])


def test_unfused_attention_at_131072_tokens_does_not_fit_an_h100(client):
    body = client.get("/api/layer", params={"tokens": 131072, "machine": "h100-sxm"}).json()
    warnings = {w["op"]: w for w in body["warnings"]}
    # S = H T^2 / 2 = 32 x 131,072^2 / 2 = 274,877,906,944 scores (causal); w = 2 bytes
    S = 32 * 131072**2 // 2
    # softmax reads and writes the scores: 2 w S = 1,099,511,627,776 B, against the H100's 85.5 GB
    assert warnings["softmax"]["bytes"] == 4 * S and warnings["softmax"]["memory_bytes"] == H100_MEMORY_BYTES
    # QK^T: w (H T d + K T d + S) = 2 (32 x 131,072 x 128 + 8 x 131,072 x 128 + S) = 551 GB
    assert warnings["QK^T"]["bytes"] == 2 * (32 * 131072 * 128 + 8 * 131072 * 128 + S)
    assert set(warnings) == {"QK^T", "softmax", "PV"}  # the projections and the MLP move a few GB each
    text = warnings["softmax"]["text"]
    assert "softmax" in text and "1.1 TB" in text and "85.5 GB" in text and "H100 SXM" in text
    assert "inputs and outputs" in text  # it says what the working set is: the bytes the op moves


def test_no_warning_where_the_ops_fit(client):
    # at 8,192 tokens the softmax moves 4 x 32 x 8,192^2 / 2 = 4.3 GB, well under 80 GB
    assert client.get("/api/layer", params={"tokens": 8192}).json()["warnings"] == []
    # flash attention keeps the scores on chip: at 131,072 tokens nothing exceeds the memory
    assert client.get("/api/layer", params={"tokens": 131072, "attention": "flash"}).json()["warnings"] == []


def test_the_model_view_warns_too(client):
    naive = client.get("/api/model", params={"tokens": 131072, "attention": "naive"}).json()
    assert {"QK^T", "softmax", "PV"} <= {w["op"] for w in naive["warnings"]}
    assert client.get("/api/model", params={"tokens": 131072}).json()["warnings"] == []  # flash, the view's default
    # the whole-model axis (the '300k ms'): the unit of the largest part, here the 32 blocks
    chart = naive["parts_chart"]
    largest_s = max(p["time_s"] for p in naive["parts"])
    assert chart["axis"]["unit"] == time_unit(largest_s)[0] and chart["axis"]["title"].endswith(f"({chart['axis']['unit']})")
    assert max(chart["total"]) == pytest.approx(largest_s / chart["axis"]["seconds_per_unit"])


# -- decode: where the whole step turns compute-bound, and where it turns back -----------------------

# Llama 3 70B on the H100 at 4,096 tokens of context with e_c 0.3, e_m 0.5 and no overlap: the
# matmuls turn compute-bound near batch 180, but the KV-cache reads (growing as B S) outweigh them
# again a few dozen batches later.
TURNING = {"model": "llama3-70b", "tokens": 4096, "compute_efficiency": 0.3, "memory_efficiency": 0.5, "overlap": 0}


def _step_bound(client, batch: int) -> str:
    """The step's bound at ``batch`` from its ops' FLOPs and bytes alone: an op is memory-bound when
    bytes / (e_m BW) > FLOPs / (e_c peak); with overlap 0 it takes the sum of both and its launches;
    the step is bound by whichever set of ops holds more of the time."""
    ops = client.get("/api/model", params={**TURNING, "phase": "decode", "batch": batch}).json()["ops"]
    held = {"memory": 0.0, "compute": 0.0}
    for op in ops:
        compute_s = op["flops"] / (0.3 * H100_PEAK_BF16)
        memory_s = op["bytes"] / (0.5 * H100_BYTES_PER_S)
        held["memory" if memory_s > compute_s else "compute"] += compute_s + memory_s + op["launch_s"]
    return max(held, key=held.get)


def test_decode_card_names_where_the_step_turns_compute_bound_and_back(client):
    body = client.get("/api/decode", params=TURNING).json()
    runs = body["readouts"]["step_bound_runs"]
    assert [r["bound"] for r in runs] == ["memory", "compute", "memory"]
    assert runs[0]["first"] == 1 and runs[-1]["last"] == 65536  # the library's search range
    first, last = runs[1]["first"], runs[1]["last"]
    assert body["readouts"]["text"]["compute_bound_sub"] == (
        f"whole step compute-bound for batches {first:,}–{last:,}; memory-bound again from {last + 1:,}")
    # the turning points, checked from FLOPs, bytes, peak and bandwidth on either side of each
    assert [_step_bound(client, b) for b in (first - 1, first, last, last + 1)] == ["memory", "compute", "compute", "memory"]
    # and the payload's own table (batches 1, 2, 4, ..., 1,024) agrees with the runs
    for row in body["rows"]:
        inside = next(r for r in runs if r["first"] <= row["batch"] <= r["last"])
        assert row["bound"] == inside["bound"], row["batch"]


def test_decode_card_where_the_step_stays_compute_bound(client):
    body = client.get("/api/decode", params={"tokens": 128}).json()
    runs = body["readouts"]["step_bound_runs"]
    assert [r["bound"] for r in runs] == ["memory", "compute"]
    assert body["readouts"]["text"]["compute_bound_sub"] == f"whole step compute-bound from batch {runs[1]['first']:,}"
    assert runs[1]["first"] == body["step_compute_bound_batch"]  # the library's first compute-bound batch


def test_bound_runs_finds_each_turn_exactly():
    from roofline.plan.decode import bound_runs

    # a bound that turns compute at 254, back to memory at 449 and compute again from 5,000
    def bounds_at(batches):
        return ["compute" if 254 <= b <= 448 or b >= 5000 else "memory" for b in batches]

    assert bound_runs(bounds_at, 65536) == [(1, 253, "memory"), (254, 448, "compute"), (449, 4999, "memory"),
                                            (5000, 65536, "compute")]
    assert bound_runs(lambda batches: ["memory"] * len(batches), 1024) == [(1, 1024, "memory")]
