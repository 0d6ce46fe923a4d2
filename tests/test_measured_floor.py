"""measured.floor: the least time a kernel takes in an engine's CUDA graph, under every norm and
element-wise kernel the tables do not measure. Truths: the H200 TensorRT-LLM GEMM table's own rows
(aiconfigurator-core 0.12.0, systems/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet: its least
bf16 row, m 8 n 32 k 64, 0.00244 ms) and aiconfigurator's own 3 us a memory-bound op
(systems/h200_sxm.yaml, mem_empirical_constant_latency); skipped without the package."""

from __future__ import annotations

import pytest

from roofline.cost import seed_cost_model
from roofline.kernels import Kernel
from roofline.machines import get_machine

pytest.importorskip("aiconfigurator_core")

from roofline.measured.floor import kernel_floor  # noqa: E402
from roofline.measured.model import MeasuredKernels  # noqa: E402


def model(machine="h200", kernels="trtllm"):
    m = get_machine(machine)
    base = seed_cost_model(launch_overhead_s=m.launch_overhead_s, cuda_graph=True)
    return m, MeasuredKernels.for_machine(m, kernels, **{k: getattr(base, k) for k in (
        "compute_efficiency", "memory_efficiency", "launch_overhead_s", "overlap", "cuda_graph")})


def norm(tokens, d=2880, name="attn norm"):
    # an RMSNorm of tokens x d bf16 values: read and written once, 2 x 2 bytes a value
    return Kernel.trusted(name, 4.0 * tokens * d, 4.0 * tokens * d, "norm", "bf16")


def test_the_floor_lies_between_the_tables_least_kernel_and_aiconfigurators_constant():
    f = kernel_floor("h200", "trtllm")
    assert 2.44e-6 <= f.seconds <= 3.0e-6
    assert f.rows > 100


def test_a_decode_steps_norm_takes_the_floor_and_a_long_prefills_its_bandwidth_time():
    m, cm = model()
    f = kernel_floor("h200", "trtllm").seconds
    small = cm.predict_op(norm(4), m, 0.0)
    # 4 x 2,880 x 4 bytes = 46 kB: 0.01 us at 4.8 TB/s, far under the floor
    assert small.basis == "floor" and small.time_s == pytest.approx(f)
    # 8,192 x 2,880 x 4 bytes = 94.4 MB: 19.7 us at 4.8 TB/s, over it; the cost model's e_m prices it
    big = cm.predict_op(norm(8192), m, 0.0)
    assert big.time_s == pytest.approx(94.37e6 / (cm.memory_efficiency * m.bandwidth), rel=1e-3)
    assert big.time_s > f


def test_a_residual_add_is_fused_into_the_next_norm_and_a_moe_activation_into_its_module():
    _, cm = model()
    add = Kernel.trusted("residual add", 1.0, 6.0, "elementwise", "bf16")
    assert not cm.floored(add)
    assert cm.floored(Kernel.trusted("silu*mul", 1.0, 6.0, "elementwise", "bf16"))
    assert not cm.floored(Kernel.trusted("silu*mul", 1.0, 6.0, "elementwise", "bf16",
                                         shape=("moe experts", 4.0, 2880, 2880, 4, 128, True, "mxfp4", "bf16")))


def test_a_transferred_machine_keeps_the_cost_model():
    m = get_machine("mi300x")
    cm = MeasuredKernels.for_machine(m, "vllm", launch_overhead_s=m.launch_overhead_s, cuda_graph=True)
    p = cm.predict_op(norm(4), m, 0.0)
    assert p.basis == "cost model"
