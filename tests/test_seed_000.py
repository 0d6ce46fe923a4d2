"""Every worked number of seed 000 (the roofline chapter), from the library.

Expected values are the seed's own figures (quoted in the comments), or arithmetic written out.
"""

import pytest

from roofline import (
    A100_80GB,
    H100_SXM,
    Machine,
    decode_step_kernel,
    elementwise_kernel,
    flash_attention_kernel,
    get_machine,
    layernorm_kernel,
    matmul_kernel,
    naive_attention_kernel,
    time_lower_bound,
)

US = 1e-6


def test_h100_ridge_about_295():
    # seed: "989 TFLOP/s dense BF16, 3.35 TB/s -> ridge ~ 295 FLOP/byte"; 989e12 / 3.35e12 = 295.2
    assert H100_SXM.ridge_point == pytest.approx(295.2, abs=0.1)
    assert H100_SXM.peak_flops == 989e12 and H100_SXM.bandwidth == 3.35e12


def test_a100_ridge_about_156_with_the_seeds_2_tb_s():
    # seed: "312 TFLOP/s BF16, 2.04 TB/s (taken as 2.0) -> ridge ~ 156"
    seed_a100 = Machine("A100 80GB (seed)", 312e12, 2.0e12)
    assert seed_a100.ridge_point == pytest.approx(156, abs=0.5)
    # the preset keeps the datasheet's 2,039 GB/s: 312 / 2.039 = 153.0
    assert A100_80GB.ridge_point == pytest.approx(153.0, abs=0.1)


def test_ridge_point_is_peak_over_bandwidth():
    m = Machine("toy", 100.0, 4.0)
    assert m.ridge_point == 25.0
    assert m.attainable(1.0) == 4.0  # below the ridge: I x BW
    assert m.attainable(1000.0) == 100.0  # above: the peak


def test_y_equals_x_plus_1_is_memory_bound_by_1000x():
    # 1e9 elements, 1 FLOP each, read + write 2 bytes each: 1e9 / 4e9 = 0.25
    k = elementwise_kernel(1e9, flops_per_elem=1, bytes_per_elem=2.0)
    assert k.flops == 1e9 and k.bytes == 4e9
    assert k.intensity == 0.25
    assert H100_SXM.ridge_point / k.intensity == pytest.approx(1181, rel=0.01)  # "memory, by 1000x" (order)


def test_big_matmul_intensity_about_1638():
    # (8192x4096)@(4096x4096): 2*8192*4096*4096 = 2.75e11 FLOPs; 2*(8192*4096*2 + 4096^2) = 1.68e8 bytes
    k = matmul_kernel(8192, 4096, 4096)
    assert k.flops == 2 * 8192 * 4096 * 4096
    assert k.bytes == 2 * (8192 * 4096 + 4096 * 4096 + 8192 * 4096)
    assert k.intensity == pytest.approx(1638.4)
    assert k.intensity > H100_SXM.ridge_point


def test_decode_7b_batch_1_intensity_is_1():
    k = decode_step_kernel(7e9, 1)
    assert k.flops == pytest.approx(1.4e10) and k.bytes == pytest.approx(1.4e10)
    assert k.intensity == 1.0


@pytest.mark.parametrize("batch", [1, 2, 8, 64, 256, 1024])
def test_decode_intensity_equals_batch_in_bf16(batch):
    assert decode_step_kernel(8e9, batch).intensity == pytest.approx(batch)


def test_matmul_intensity_grows_with_m_and_collapses_at_m_1():
    intensities = [matmul_kernel(M, 4096, 4096).intensity for M in (1, 8, 64, 512, 4096)]
    assert intensities == sorted(intensities)
    assert intensities[0] == pytest.approx(1.0, rel=0.001)  # M = 1: 2NK / 2(K + NK + N) ~ 1
    n = 3072
    assert matmul_kernel(n, n, n).intensity == pytest.approx(n / 3)  # square: n/3


def test_attention_at_4096_naive_62_7_flash_2068():
    # seed 2.2: "At T = 4096, d = 128 ... I_naive = 62.7 and I_flash = 2068 ... 41 us vs 8.8 us"
    naive = naive_attention_kernel(4096, 128)
    flash = flash_attention_kernel(4096, 128)
    assert naive.flops == flash.flops  # identical arithmetic
    assert naive.intensity == pytest.approx(62.7, abs=0.05)
    assert flash.intensity == pytest.approx(2068, abs=1)
    assert naive.bytes / flash.bytes > 10  # "> 10x fewer bytes"
    assert time_lower_bound(naive, H100_SXM) / US == pytest.approx(41, abs=0.5)
    assert time_lower_bound(flash, H100_SXM) / US == pytest.approx(8.8, abs=0.05)


def test_naive_attention_limit_is_d_over_2_flash_grows_with_t():
    # exercise 3: I_naive -> d/2 = 64 as T grows (never below LayerNorm's 2); I_flash ~ T/2.
    # I_naive = T^2 (4d + 5) / (2 (4Td + 4T^2)) = T (4d + 5) / (8 (T + d)): it RISES toward the
    # limit (4d + 5) / 8 (the seed's solution says "decreases"; the arithmetic says otherwise).
    d = 128
    naive = [naive_attention_kernel(T, d).intensity for T in (4096, 65536, 1 << 20)]
    assert all(a < b for a, b in zip(naive, naive[1:]))
    assert all(i < (4 * d + 5) / 8 for i in naive)
    assert naive[-1] == pytest.approx(d / 2 + 5 / 8, rel=0.01)  # (4d + 5) / 8 with the softmax FLOPs
    assert min(naive) > layernorm_kernel(4096, 4096).intensity
    flash = [flash_attention_kernel(T, d).intensity for T in (1024, 4096, 16384)]
    assert flash == sorted(flash) and flash[-1] == pytest.approx(16384 / 2, rel=0.02)


def test_layernorm_intensity_2_and_bound_is_the_memory_term():
    k = layernorm_kernel(4096, 4096)
    assert k.intensity == 2.0  # 8n / 4n
    assert time_lower_bound(k, H100_SXM) == k.bytes / H100_SXM.bandwidth


def test_exercise_1_matvec_and_m_512():
    # M=1: bytes 2(4096 + 4096^2 + 4096) = 33.6 MB, I ~ 1.0, 33.6 MB / 3.35 TB/s = 10 us, memory-bound
    k1 = matmul_kernel(1, 4096, 4096)
    assert k1.bytes == pytest.approx(33.6e6, rel=0.001)
    assert k1.intensity == pytest.approx(1.0, abs=0.01)
    assert time_lower_bound(k1, H100_SXM) / US == pytest.approx(10.0, abs=0.1)
    assert k1.intensity < H100_SXM.ridge_point
    # M=512: FLOPs 1.7e10, bytes ~ 42 MB, I ~ 410, compute-bound, 1.7e10 / 9.89e14 = 17 us
    k512 = matmul_kernel(512, 4096, 4096)
    assert k512.flops == pytest.approx(1.72e10, rel=0.01)
    assert k512.bytes == pytest.approx(42e6, rel=0.01)
    assert k512.intensity == pytest.approx(410, abs=1)
    assert time_lower_bound(k512, H100_SXM) / US == pytest.approx(17.4, abs=0.1)
    # "512x the work for 1.7x the time"
    assert time_lower_bound(k512, H100_SXM) / time_lower_bound(k1, H100_SXM) == pytest.approx(1.7, abs=0.05)


def test_exercise_2_roof_at_i_40_is_134_tflops():
    # 40 x 3.35e12 = 134 TFLOP/s; 120 TFLOP/s is 90% of it
    roof = H100_SXM.attainable(40)
    assert roof == pytest.approx(134e12)
    assert 120e12 / roof == pytest.approx(0.90, abs=0.01)


def test_exercise_5_twice_the_compute_ridge_590_and_who_changes_side():
    fast = H100_SXM.scaled(compute=2.0)
    assert fast.ridge_point == pytest.approx(590.4, abs=0.1)
    assert fast.bandwidth == H100_SXM.bandwidth
    memory_side = [decode_step_kernel(7e9, 256), matmul_kernel(64, 4096, 4096), naive_attention_kernel(4096, 128)]
    compute_side = [matmul_kernel(8192, 4096, 4096), flash_attention_kernel(4096, 128)]
    assert all(k.intensity < fast.ridge_point for k in memory_side)
    assert all(k.intensity > fast.ridge_point for k in compute_side)
    for k in compute_side:  # "now achieve 2x"
        assert time_lower_bound(k, H100_SXM) / time_lower_bound(k, fast) == pytest.approx(2.0)
    for k in memory_side:  # memory-bound kernels do not improve at all
        assert time_lower_bound(k, fast) == time_lower_bound(k, H100_SXM)


def test_seed_machine_form_and_named_presets_agree():
    assert get_machine("h100-sxm") is H100_SXM
    seed_form = Machine("H100 SXM (BF16 dense, HBM3)", 989e12, 3.35e12)
    k = matmul_kernel(1, 4096, 4096)
    assert time_lower_bound(k, seed_form) == time_lower_bound(k, H100_SXM)
