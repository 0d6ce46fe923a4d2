"""`roofline check`'s report: the three predictors beside a measurement, the block's sums, the
flags and the seed 000 section 4 diagnosis. Synthetic measurements, no torch."""

import json

import pytest

from roofline.measure.calibrated import CalibratedModel
from roofline.diagnose.check_report import CheckReport, Measured, OpRun, build_report, diagnose_op
from roofline.cost import CostModel
from roofline.kernels import Kernel, elementwise_kernel, matmul_kernel, softmax_kernel
from roofline.measure.machine_file import parse_profile, render_profile
from test_calibrated import synthetic  # tests/ is on sys.path (rootless test modules)

META = dict(device="cpu", device_name="Test CPU", profile="p.toml", model="m", config="c", phase="prefill", tokens=8,
            batch=1, attention="naive", dtype="fp32", threads=1, date="d")


@pytest.fixture
def setup():
    cal = synthetic()
    machine = parse_profile(render_profile(cal), "t")[0]
    return machine, CalibratedModel(cal)


def _run(kernel, seconds):
    return OpRun(kernel, Measured(seconds, 0.9 * seconds, 1.1 * seconds, 5))


def test_report_predicts_three_ways_and_sums_the_block(setup):
    machine, model = setup
    ks = [matmul_kernel(64, 64, 64, 4.0, name="mm"), elementwise_kernel(100_000, 2, 1, bytes_per_elem=4.0, name="add")]
    report = build_report([_run(ks[0], 1e-4), _run(ks[1], 2e-4)], machine, model, **META)
    for op, k in zip(report.ops, ks):
        assert op.roofline_s == pytest.approx(CostModel().predict_op(k, machine).time_s)
        assert op.seed_s == pytest.approx(CostModel(0.70, 0.85, machine.launch_overhead_s).predict_op(k, machine).time_s)
        assert op.calibrated_s == pytest.approx(model.predict_op(k, machine).time_s)
    b = report.block
    for f in ("measured_s", "roofline_s", "seed_s", "calibrated_s", "calibrated_low_s", "calibrated_high_s", "flops"):
        assert getattr(b, f) == pytest.approx(sum(getattr(o, f) for o in report.ops))
    # by hand, the 64^3 fp32 matmul on the synthetic profile (peak 1e10 FLOP/s, main memory 10 GB/s,
    # launch 0.1 us): 2 x 64^3 = 524,288 FLOPs, 4 x 3 x 64^2 = 49,152 bytes
    mm = report.ops[0]
    assert (mm.flops, mm.bytes) == (524_288, 49_152)
    assert mm.roofline_s == pytest.approx(52.4288e-6)  # compute 524,288 / 1e10 > memory 49,152 / 10e9 = 4.9 us
    assert mm.seed_s == pytest.approx(52.4288e-6 / 0.70 + 0.1e-6)  # 74.998 us
    # calibrated: 524,288 FLOPs is under the sweep's smallest matmul (1e6 FLOPs at 1e9 FLOP/s): clamped there
    assert mm.calibrated_s == pytest.approx(524_288 / 1e9 + 0.1e-6)  # 524.388 us
    # error = predicted / measured - 1 against the 100 us measured: 52.4288 / 100 - 1 = -47.6%
    assert mm.error("roofline") == pytest.approx(-0.475712)


def test_json_contract(setup):
    machine, model = setup
    report = build_report([_run(matmul_kernel(64, 64, 64, 4.0, name="mm"), 1e-4)], machine, model, **META)
    d = json.loads(report.to_json())
    fields = {"name", "measured_s", "roofline_s", "seed_s", "calibrated_s", "calibrated_low_s", "calibrated_high_s"}
    assert d["device"] == "cpu" and fields <= set(d["ops"][0]) and fields <= set(d["block"])
    assert "profile_machine" not in d
    assert report.to_csv().splitlines()[0].startswith("name,flops,bytes,measured_s")
    assert "median |error|" in report.to_table()


def test_faster_than_the_roof_is_flagged_impossible(setup):
    machine, _ = setup
    k = Kernel("mm", 1e9, 1e3, "matmul", "fp32")  # 1e9 FLOPs at the measured 1e10 FLOP/s: 100 ms at best
    flag, why = diagnose_op(k, machine, 0.05, 0.1, "l1d")
    assert flag == "below roof" and "impossible" in why and "FLOP convention" in why


def test_in_cache_is_not_impossible(setup):
    machine, _ = setup
    k = Kernel("add", 0.0, 512 * 2**10, "elementwise", "fp32")
    dram = k.bytes / machine.bandwidth
    flag, why = diagnose_op(k, machine, 0.8 * dram, 0.5 * dram, "l2")
    assert flag == "in cache" and "l2" in why


@pytest.mark.parametrize("kernel, words", [
    (elementwise_kernel(1e6, 2, 1, bytes_per_elem=4.0, name="silu*mul"), "fuse"),
    (softmax_kernel(64, 64, 4.0, causal=True, name="softmax"), "FlashAttention"),
    (matmul_kernel(100, 100, 100, 4.0, name="mm"), "not multiples of 64"),
])
def test_far_from_the_roof_gets_the_symptom_table(setup, kernel, words):
    machine, _ = setup
    bound = max(kernel.flops / machine.peak("fp32"), kernel.bytes / machine.bandwidth)
    flag, why = diagnose_op(kernel, machine, 10 * bound, bound, "main memory", launch_s=1e-9, dims=(100, 100, 100))
    assert flag == "far" and words in why


def test_launch_dominated_op_points_at_launches(setup):
    machine, _ = setup
    k = elementwise_kernel(10, bytes_per_elem=4.0)
    flag, why = diagnose_op(k, machine, 5e-6, 1e-9, "l1d", launch_s=4e-6)
    # a CPU profile (no SMs) is not told to capture CUDA graphs; a GPU is
    assert flag == "far" and "fewer, larger or fused ops" in why and "CUDA" not in why
    from roofline.machines import get_machine

    assert "CUDA graphs" in diagnose_op(k, get_machine("h100-sxm"), 5e-6, 1e-9, "l2", launch_s=4e-6)[1]
    # a per-call floor above the op's whole time is a contradiction said as one, not "305% of it"
    flag, why = diagnose_op(k, machine, 1.1e-6, 1e-9, "l1d", launch_s=3.3e-6)
    assert flag == "far" and "more than this op took" in why and "%" not in why.split(";")[1]


def test_a_vector_op_under_a_matmul_peak_roof_is_told_to_fuse_not_to_check_occupancy(setup):
    """A reviewer's CPU rms_norm whose working set fit L2 sat under the compute roof (the matmul
    peak against L2's bandwidth) and was told to check occupancy and waves: a vector op never
    reaches a matmul peak, so the advice is the elementwise chain's, fuse."""
    machine, _ = setup
    from roofline.kernels import rmsnorm_kernel

    k = rmsnorm_kernel(256, 512, bytes_per_elem=4.0)
    bound = k.flops / machine.peak("fp32")  # the compute term binds where L2's bandwidth outruns the matmul peak
    flag, why = diagnose_op(k, machine, 20 * bound, bound, "l2")
    assert flag == "far" and "compute roof" in why and "Fix: fuse" in why and "occupancy" not in why


def test_coverage_counts_measured_inside_the_interval(setup):
    machine, model = setup
    k = elementwise_kernel(100_000, 2, 1, bytes_per_elem=4.0, name="add")
    p = model.predict_op(k, machine)
    inside = build_report([_run(k, p.time_s)], machine, model, **META)
    outside = build_report([_run(k, 10 * p.high_s)], machine, model, **META)
    assert inside.coverage == 1.0 and outside.coverage == 0.0 and isinstance(inside, CheckReport)


def test_slow_flash_attention_is_not_told_to_use_flash_attention(setup):
    machine, _ = setup
    k = Kernel("flash attention", 1e8, 1e6, "attention", "fp32")
    flag, why = diagnose_op(k, machine, 1.0, 0.01, "main memory")
    assert flag == "far" and "backend" in why and "Fix: FlashAttention" not in why


def test_cold_caches_are_bounded_by_main_memory(setup):
    machine, _ = setup
    cal = synthetic()
    k = Kernel("add", 0.0, 32 * 2**10, "elementwise", "fp32")  # 32 KiB: in l1d (100 GB/s) when warm
    warm = build_report([_run(k, 1e-5)], machine, CalibratedModel(cal), **META)
    cold = build_report([_run(k, 1e-5)], machine, CalibratedModel(cal, cold=True), **META)
    assert (warm.ops[0].bound_level, warm.ops[0].bound_s) == ("l1d", pytest.approx(32_768 / 100e9))  # 0.33 us
    assert (cold.ops[0].bound_level, cold.ops[0].bound_s) == ("main memory", pytest.approx(32_768 / 10e9))  # 3.3 us
    assert cold.cold and "main-memory roofline bound" in cold.to_table() and json.loads(cold.to_json())["cold"] is True
