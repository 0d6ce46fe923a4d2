"""Kernel constructors: tiny shapes with the arithmetic in the comment, relations, bad input."""

import math

import numpy as np
import pytest

from roofline.errors import RooflineError
from roofline.kernels import (
    KERNELS,
    Kernel,
    attention_pv_kernel,
    attention_scores_kernel,
    batched_matmul_kernel,
    decode_step_kernel,
    elementwise_kernel,
    embedding_kernel,
    flash_attention_kernel,
    get_kernel_constructor,
    matmul_kernel,
    naive_attention_kernel,
    register,
    rmsnorm_kernel,
    softmax_kernel,
)


def test_matmul_tiny():
    k = matmul_kernel(2, 3, 4)
    assert k.flops == 48  # 2*2*3*4
    assert k.bytes == 2 * (8 + 12 + 6)  # w (MK + KN + MN) = 2 (2*4 + 4*3 + 2*3) = 52
    assert k.name == "matmul 2x4x3" and k.category == "matmul"


@pytest.mark.parametrize("dtype,w", [("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)])
def test_dtype_names_set_bytes_and_dtype(dtype, w):
    k = matmul_kernel(2, 3, 4, dtype)
    assert k.bytes == w * 26 and k.dtype == dtype
    assert k.flops == 48  # FLOPs do not depend on the dtype


def test_bytes_per_elem_number_maps_to_dtype():
    assert matmul_kernel(2, 3, 4, 4.0).dtype == "fp32"
    assert matmul_kernel(2, 3, 4, 1.0).dtype == "fp8"


def test_batched_matmul_is_batch_times_matmul():
    one = matmul_kernel(3, 5, 7)
    b = batched_matmul_kernel(6, 3, 5, 7)
    assert b.flops == 6 * one.flops and b.bytes == 6 * one.bytes


def test_decode_step():
    k = decode_step_kernel(1000, 4)
    assert k.flops == 8000  # 2 * 1000 * 4
    assert k.bytes == 2000  # 2 bytes * 1000 weights
    assert decode_step_kernel(1000, 4, "fp8").intensity == 8  # 2B/w = 8/1


def test_elementwise_and_norms():
    add = elementwise_kernel(10, n_inputs=2, n_outputs=1)
    assert add.flops == 10 and add.bytes == 60  # 2 bytes * 10 * 3 tensors
    n = rmsnorm_kernel(3, 4)
    assert n.bytes == 2 * 2 * 12  # read and write 12 elements of 2 bytes
    s = softmax_kernel(4, 6)
    assert s.flops == 5 * 24 and s.bytes == 2 * 2 * 24
    assert softmax_kernel(4, 6, causal=True).bytes == s.bytes / 2


def test_embedding_is_a_gather():
    e = embedding_kernel(5, 8)
    assert e.flops == 0 and e.bytes == 2 * 2 * 40  # read 5 rows of 8, write (5, 8)
    assert e.intensity == 0


def test_naive_attention_is_scores_plus_softmax_plus_pv():
    # H=4 heads, K=2 kv heads, B=3, T=16, d=8, causal
    kw = dict(heads=4, kv_heads=2, batch=3, causal=True)
    parts = [
        attention_scores_kernel(16, 8, **kw),
        softmax_kernel(3 * 4 * 16, 16, causal=True),
        attention_pv_kernel(16, 8, **kw),
    ]
    naive = naive_attention_kernel(16, 8, **kw)
    assert naive.flops == sum(p.flops for p in parts)
    assert naive.bytes == sum(p.bytes for p in parts)


def test_single_head_naive_matches_the_seed_formula():
    T, d = 64, 16
    k = naive_attention_kernel(T, d)
    assert k.flops == 4 * T * T * d + 5 * T * T
    assert k.bytes == 2 * (3 * T * d + 4 * T * T + T * d)
    assert flash_attention_kernel(T, d).bytes == 2 * 4 * T * d


def test_gqa_reads_fewer_kv_bytes():
    mha = flash_attention_kernel(128, 64, heads=8, kv_heads=8)
    gqa = flash_attention_kernel(128, 64, heads=8, kv_heads=2)
    assert gqa.flops == mha.flops
    # Q and O: 2*8*128*64; K and V: 2*kv*128*64 -> (16 + 4) vs (16 + 16) units of 128*64*2 bytes
    assert gqa.bytes / mha.bytes == pytest.approx(20 / 32)


def test_causal_halves_score_work():
    full = attention_scores_kernel(32, 8, heads=2)
    half = attention_scores_kernel(32, 8, heads=2, causal=True)
    assert half.flops == full.flops / 2


def test_decode_attention_uses_context():
    # one query token against S = 100 cached keys: n_s = B H T S = 1*2*1*100
    k = attention_scores_kernel(1, 8, heads=2, kv_heads=1, context=100)
    assert k.flops == 2 * 200 * 8
    assert k.bytes == 2 * (2 * 1 * 8 + 1 * 100 * 8 + 200)


def test_arrays_give_the_same_as_a_loop():
    Ts = np.array([16, 128, 1024])
    vec = naive_attention_kernel(Ts, 64, heads=4)
    for i, T in enumerate(Ts):
        one = naive_attention_kernel(int(T), 64, heads=4)
        assert vec.flops[i] == one.flops and vec.bytes[i] == one.bytes


def test_kernel_add_and_scale():
    a, b = Kernel("a", 10, 4), Kernel("b", 6, 4)
    assert (a + b).flops == 16 and (a + b).bytes == 8
    assert a.scaled(3).bytes == 12


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: matmul_kernel(-1, 2, 3), "M must be greater than 0, got -1"),
        (lambda: matmul_kernel(0, 2, 3), "M must be greater than 0, got 0"),
        (lambda: matmul_kernel(math.nan, 2, 3), "M must be a finite number, got nan"),
        (lambda: matmul_kernel(1e20, 2, 3), "M must be at most 1e\\+12, got 1e\\+20"),
        (lambda: matmul_kernel(2, 2, 2, "fp7"), "unknown dtype 'fp7'"),
        (lambda: matmul_kernel(2, 2, 2, -2.0), "bytes_per_elem must be greater than 0, got -2.0"),
        (lambda: matmul_kernel(2, 2, 2, 3), "bytes_per_elem must be one of .* got 3"),
        (lambda: naive_attention_kernel(16, 8, heads=4, kv_heads=3), "heads \\(4\\) must be a multiple of kv_heads \\(3\\)"),
        (lambda: softmax_kernel(2, 2, causal="yes"), "causal must be true or false, got 'yes'"),
        (lambda: Kernel("k", -1, 2), "k: flops must be at least 0, got -1"),
        (lambda: Kernel("k", 1, 0), "k: bytes must be greater than 0, got 0"),
        (lambda: Kernel("k", math.inf, 1), "k: flops must be a finite number, got inf"),
    ],
)
def test_bad_input_names_the_value(call, message):
    with pytest.raises(RooflineError, match=message):
        call()


def test_error_names_parameter_and_value():
    with pytest.raises(RooflineError, match=r"M must be greater than 0, got -3"):
        matmul_kernel(-3, 2, 2)
    with pytest.raises(RooflineError, match="did you mean"):
        matmul_kernel(2, 2, 2, "bf61")


def test_registry_refuses_duplicates_and_lists_close_names():
    assert set(KERNELS) >= {"matmul", "naive_attention", "flash_attention", "decode_step", "rmsnorm", "embedding"}
    with pytest.raises(RuntimeError):
        register("matmul")(lambda: None)
    with pytest.raises(RooflineError, match="matmul"):
        get_kernel_constructor("matmull")


def test_a_kernel_row_is_its_fields_in_order():
    # kernel_row's tuple holds Kernel's fields in declaration order, so a row and its Kernel round-trip
    from dataclasses import fields

    from roofline.kernels import ROW_FIELDS, kernel_row

    assert ROW_FIELDS == tuple(f.name for f in fields(Kernel))
    k = matmul_kernel(2, 3, 4)
    assert Kernel.of_row(k.as_row()) == k
    assert kernel_row("x", 1.0, 2.0, cache_elems=3.0) == Kernel.trusted("x", 1.0, 2.0, cache_elems=3.0).as_row()
