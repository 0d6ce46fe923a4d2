"""GEMM tiles, waves and the tensor-core rule (seed 000 section 2.5), and `roofline gemm`."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.cli import main
from roofline.cost import time_lower_bound
from roofline.errors import RooflineError
from roofline.kernels import matmul_kernel
from roofline.shapes import (
    alignment,
    gemm_advice,
    gemm_estimate,
    pad_to,
    parse_tile,
    tile_count,
    wave_count,
    wave_efficiency,
)


def test_133_tiles_on_132_sms_take_two_waves():
    assert wave_count(133, 132) == 2 and wave_count(132, 132) == 1
    assert wave_efficiency(133, 132) == 133 / 264  # 50.4%: one tile pays for a whole second wave


def test_133_tiles_take_as_long_as_264():
    # 7 x 19 = 133 tiles of 128x128 against 12 x 22 = 264, same K, on the H100's 132 SMs
    few = gemm_estimate(7 * 128, 19 * 128, 8192, "h100-sxm")
    many = gemm_estimate(12 * 128, 22 * 128, 8192, "h100-sxm")
    assert (few.tiles, many.tiles) == (133, 264) and few.waves == many.waves == 2
    assert few.bound == many.bound == "compute"
    assert few.compute_s == many.compute_s  # 2 waves x 132 SMs x 2*128*128*8192 FLOPs / 989e12
    assert few.compute_s == pytest.approx(264 * 2 * 128 * 128 * 8192 / 989e12)
    assert few.efficiency == pytest.approx(133 / 264)  # the roofline has only 133 tiles' worth of FLOPs


def test_tiles_and_padding():
    assert tile_count(8192, 50257) == 64 * 393  # 50257 / 128 = 392.6 -> 393
    assert pad_to(50257, 128) == 50304 == 128 * 393
    assert pad_to(50257, 8) == 50264
    assert (alignment("bf16"), alignment("fp16"), alignment("fp8"), alignment("fp32")) == (8, 8, 16, 4)


def test_a_full_shape_loses_nothing():
    e = gemm_estimate(132 * 128, 128, 4096, "h100-sxm")  # 132 tiles: exactly one full wave
    assert e.tensor_cores and e.waves == 1 and e.wave_efficiency == 1 and e.tile_efficiency == 1
    assert e.time_s == pytest.approx(time_lower_bound(matmul_kernel(132 * 128, 128, 4096), "h100-sxm"))
    assert gemm_advice(132 * 128, 128, 4096).suggestions == ()


def test_vocab_50257_leaves_the_tensor_cores_and_padding_to_50304_brings_it_back():
    # GPT-2's LM head: (8192 tokens x 768) @ (768 x 50,257) in bf16 on an H100
    adv = gemm_advice(8192, 50257, 768, "h100-sxm")
    e = adv.estimate
    assert e.misaligned == ("N",) and not e.tensor_cores  # 50,257 = 8 x 6,282 + 1
    assert e.peak_flops_per_s == 67e12  # the CUDA-core fp32 peak (seed 2.5: ~1/15 of the tensor peak)
    (pad,) = adv.suggestions
    assert pad.change == "pad N 50,257 -> 50,304"
    assert pad.after.tensor_cores and pad.after.tiles == e.tiles  # same 25,152 tiles: the win is alignment
    assert pad.speedup == pytest.approx(989 / 67)  # compute-bound both ways: the ratio of the peaks
    assert "50,304" in adv.to_table() and "tensor-core" in adv.to_table()


def test_a_partial_wave_gets_other_batch_sizes():
    adv = gemm_advice(7 * 128, 19 * 128, 8192, "h100-sxm")  # 133 tiles
    ms = [s.after.M for s in adv.suggestions]
    assert ms == [6 * 128, 13 * 128]  # 114 tiles in one wave; 247 tiles in two
    assert all(s.speedup > 1.05 for s in adv.suggestions)


def test_skinny_and_memory_bound_gemms_are_left_alone():
    e = gemm_estimate(1, 4096, 4096, "h100-sxm")  # batch-1 decode: a GEMV
    assert e.skinny and e.bound == "memory" and e.time_s == e.roofline_s
    assert gemm_advice(1, 4096, 4096).suggestions == ()


def test_machines_without_an_sm_count():
    e = gemm_estimate(4096, 4096, 4096, "tpu-v5e")
    assert e.waves is None and e.wave_efficiency == 1.0


dims = st.integers(min_value=1, max_value=1 << 17)


@settings(max_examples=200, deadline=None)
@given(dims, dims, dims, st.sampled_from(["h100-sxm", "a100-80gb", "mi300x", "tpu-v5e", "l4"]),
       st.sampled_from(["bf16", "fp16", "fp8", "fp32"]))
def test_shapes_never_beat_the_roofline(M, N, K, machine, dtype):
    from roofline.machines import get_machine

    if dtype not in get_machine(machine).dtypes:
        return
    e = gemm_estimate(M, N, K, machine, dtype)
    assert e.time_s >= e.roofline_s * (1 - 1e-12) and 0 < e.efficiency <= 1 + 1e-12
    assert 0 < e.wave_efficiency <= 1 and 0 < e.tile_efficiency <= 1
    assert e.tensor_cores == (not e.misaligned and dtype != "fp32")


@pytest.mark.parametrize("bad", [(0, 1, 1), (1.5, 2, 2), (-3, 4, 4)])
def test_bad_dimensions(bad):
    with pytest.raises(RooflineError):
        gemm_estimate(*bad)


def test_parse_tile():
    assert parse_tile("128x256") == (128, 256) and parse_tile("64") == (64, 64)
    for bad in ("12x", "0x128", "axb", "1x2x3"):
        with pytest.raises(RooflineError, match="--tile"):
            parse_tile(bad)


def test_cli_gemm(capsys):
    assert main(["gemm", "8192", "50,257", "768"]) == 0
    out = capsys.readouterr().out
    assert "pad N 50,257 -> 50,304" in out and "14.76x" in out
    assert main(["gemm", "896", "2432", "8192", "--json", "--tile", "128x128"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tiles"] == 133 and d["waves"] == 2 and len(d["suggestions"]) == 2
    assert main(["gemm", "0", "1", "1"]) == 2 and "argument M" in capsys.readouterr().err
    assert main(["gemm", "8", "8", "8", "--tile", "9x"]) == 2 and "--tile" in capsys.readouterr().err
    assert main(["gemm", "8", "8", "8", "--dtype", "fp7"]) == 2 and "fp7" in capsys.readouterr().err
