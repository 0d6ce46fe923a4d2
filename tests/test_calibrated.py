"""The calibrated cost model and the profile file, on a synthetic calibration whose numbers are
chosen so that every prediction can be worked out by hand (no torch, no timing)."""

import dataclasses
import math

import pytest
from hypothesis import given, settings, strategies as st

from roofline.measure.calibrated import CalibratedModel
from roofline.cost import hierarchical_lower_bound
from roofline.errors import RooflineError
from roofline.kernels import Kernel, elementwise_kernel
from roofline.machines import get_machine
from roofline.measure.measurements import Calibration, Curve, Probe, level_bandwidths, main_memory, peaks, timing_spread
from roofline.measure.machine_file import load_profile, parse_profile, render_profile, write_profile

LAUNCH = 1e-7
KIB, MIB = 2**10, 2**20


def _curve(kind, dtype, sizes, flops, bytes_, bodies):
    secs = tuple(b + LAUNCH for b in bodies)
    return Curve(kind, dtype, tuple(map(float, sizes)), tuple(map(float, flops)), tuple(map(float, bytes_)), secs,
                 tuple(0.9 * s for s in secs), tuple(1.2 * s for s in secs))


def synthetic(probes=()):
    # matmul fp32: 1e6 FLOPs at 1e9 FLOP/s, 1e8 FLOPs at 1e10 FLOP/s (bodies 1 ms and 10 ms)
    mm = _curve("matmul", "fp32", (79, 368), (1e6, 1e8), (7.5e4, 1.6e6), (1e6 / 1e9, 1e8 / 1e10))
    # copy: 32 KiB at 100 GB/s, 512 KiB at 50 GB/s, 8 MiB at 10 GB/s; add: slower everywhere
    ws = (32 * KIB, 512 * KIB, 8 * MIB)
    copy = _curve("copy", "fp32", ws, (0, 0, 0), ws, (ws[0] / 100e9, ws[1] / 50e9, ws[2] / 10e9))
    add = _curve("add", "fp32", ws, (1, 1, 1), ws, (ws[0] / 50e9, ws[1] / 25e9, ws[2] / 5e9))
    return Calibration(
        key="local-cpu", device="cpu", device_name="Test CPU", date="2026-01-01 00:00 UTC", torch_version="x",
        threads=1, budget_s=1.0, default_dtype="fp32", launch_s=LAUNCH, launch_low_s=LAUNCH, launch_high_s=LAUNCH,
        caches=(("l1d", 64 * KIB), ("l2", 1 * MIB)), matmul=(mm,), bandwidth=(copy, add), probes=tuple(probes),
        vendor="Test", memory_bytes=8e9,
    )


def test_derived_numbers_are_the_best_measured():
    cal = synthetic()
    assert peaks(cal) == {"fp32": pytest.approx(1e10)}
    # main memory: working sets >= 2 x the 1 MiB last cache -> only 8 MiB, copy's 10 GB/s
    assert main_memory(cal)[0] == pytest.approx(10e9)
    # l1d holds 32 KiB (100 GB/s); l2 holds 512 KiB (50 GB/s)
    assert [(n, s, pytest.approx(b)) for n, s, b in level_bandwidths(cal)] == [("l1d", 64 * KIB, 100e9), ("l2", MIB, 50e9)]
    # every low is 0.9 x its median and every high 1.2 x
    assert timing_spread(cal) == pytest.approx((0.9, 1.2))


def test_profile_round_trips_and_loads_as_a_machine(tmp_path):
    cal = synthetic([Probe("silu*mul", "elementwise", "fp32", 1e3, 4e5, 3e-5, 2.8e-5, 3.5e-5, "x")])
    path = write_profile(cal, tmp_path / "p.toml")
    machine, back = load_profile(path)
    assert back == cal
    m = get_machine(str(path))
    assert m == machine and m.peak("fp32") == pytest.approx(1e10) and m.bandwidth == pytest.approx(10e9)
    assert m.launch_overhead_s == LAUNCH and [l.name for l in m.levels] == ["l1d", "l2"]
    assert all(src.startswith("measured") for name, src in m.sources if name.startswith(("peak", "memory_bytes_per_s")))


def test_interrupted_write_leaves_the_old_profile_and_no_temp_file(tmp_path, monkeypatch):
    import roofline.files as files

    target = tmp_path / "p.toml"
    target.write_text("old")

    def boom(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "fsync", boom)
    with pytest.raises(KeyboardInterrupt):
        write_profile(synthetic(), target)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]
    target.unlink()
    with pytest.raises(KeyboardInterrupt):
        write_profile(synthetic(), target)
    assert list(tmp_path.iterdir()) == []


def test_a_plain_machine_file_is_not_a_profile():
    text = '[machines.m]\nname = "M"\nmemory_bytes_per_s = { value = 1e12, source = "seed" }\n' \
           'peak_flops_per_s.bf16 = { value = 1e14, source = "seed" }\n'
    with pytest.raises(RooflineError, match="roofline calibrate"):
        parse_profile(text, "m.toml")


def test_rates_interpolate_in_log_log_by_size():
    model = CalibratedModel(synthetic())
    # halfway in log FLOPs between 1e6 and 1e8 -> halfway in log rate: sqrt(1e9 * 1e10)
    assert model.achieved_flops_per_s(1e7, "fp32") == pytest.approx(math.sqrt(1e19))
    # clamped beyond the sweep
    assert model.achieved_flops_per_s(1e12, "fp32") == pytest.approx(1e10)
    # 512 KiB is measured: the better of copy (50 GB/s) and add (25 GB/s)
    assert model.bandwidth_bytes_per_s(512 * KIB) == pytest.approx(50e9)
    # 2 MiB: a quarter of the way in log size from 512 KiB to 8 MiB -> 50e9 * (10/50)^(1/2)
    assert model.bandwidth_bytes_per_s(2 * MIB) == pytest.approx(50e9 * (10 / 50) ** 0.5)
    assert CalibratedModel(synthetic(), cold=True).bandwidth_bytes_per_s(32 * KIB) == pytest.approx(10e9)


def test_prediction_without_probes_is_launch_plus_body_with_the_timing_spread():
    cal = synthetic()
    machine = parse_profile(render_profile(cal), "t")[0]
    k = elementwise_kernel(512 * KIB // 12, n_inputs=2, n_outputs=1, bytes_per_elem=4.0)  # 3 x 4 bytes per element
    body = k.bytes / model_bw(cal, k.bytes)
    op = CalibratedModel(cal).predict([k], machine).ops[0]
    assert op.time_s == pytest.approx(LAUNCH + body)
    # no probe of its class: outside what was measured, so the timing spread (0.9-1.2) is widened 1.5x each way
    assert (op.low_s, op.high_s) == (pytest.approx(LAUNCH + 0.9 / 1.5 * body), pytest.approx(LAUNCH + 1.2 * 1.5 * body))
    assert op.residual_source == "none" and op.bound == "memory" and op.extrapolated
    # a what-if machine with twice the bandwidth halves the memory time
    op2 = CalibratedModel(cal).predict([k], machine.scaled(bandwidth=2)).ops[0]
    assert op2.time_s == pytest.approx(LAUNCH + body / 2)


def model_bw(cal, ws):
    return CalibratedModel(cal).bandwidth_bytes_per_s(ws)


def test_per_op_residuals_are_measured_over_modelled():
    cal0 = synthetic()
    m0 = CalibratedModel(cal0)
    probes = []
    for n in (10_000, 40_000):  # silu*mul measured at exactly twice its modelled body
        k = elementwise_kernel(n, n_inputs=2, n_outputs=1, bytes_per_elem=4.0, name="silu*mul")
        body = float(m0.base_body_s(k)[2])
        t = LAUNCH + 2 * body
        probes.append(Probe("silu*mul", "elementwise", "fp32", k.flops, k.bytes, t, t, t))
    model = CalibratedModel(synthetic(probes))
    machine = parse_profile(render_profile(model.calibration), "t")[0]
    held_out = elementwise_kernel(20_000, n_inputs=2, n_outputs=1, bytes_per_elem=4.0, name="silu*mul")
    body = float(model.base_body_s(held_out, machine)[2])
    op = model.predict([held_out], machine).ops[0]
    assert op.residual == pytest.approx(2.0) and op.residual_source == "op"
    assert op.time_s == pytest.approx(LAUNCH + 2 * body)
    # another elementwise op falls back to its category's residual (the same 2); a matmul to none
    other = model.predict([elementwise_kernel(20_000, bytes_per_elem=4.0, name="gelu")], machine).ops[0]
    assert other.residual == pytest.approx(2.0) and other.residual_source == "category"
    assert model.predict([Kernel("mm", 1e7, 1e5, "matmul", "fp32")], machine).ops[0].residual == 1.0


def test_workload_totals_carry_the_interval():
    cal = synthetic()
    machine = parse_profile(render_profile(cal), "t")[0]
    ks = [elementwise_kernel(n, bytes_per_elem=4.0) for n in (1000, 100_000)]
    pred = CalibratedModel(cal).predict(ks, machine)
    assert pred.total_s == pytest.approx(sum(o.time_s for o in pred.ops))
    assert pred.total_low_s == pytest.approx(sum(o.low_s for o in pred.ops))
    assert pred.total_high_s == pytest.approx(sum(o.high_s for o in pred.ops))
    d = pred.to_dict()
    assert d["ops"][0]["low_s"] == pred.ops[0].low_s and "total_high_s" in d


def test_hierarchical_bound_uses_the_level_that_holds_the_working_set():
    machine = parse_profile(render_profile(synthetic()), "t")[0]
    small = Kernel("s", 0.0, 32 * KIB, "elementwise", "fp32")
    mid = Kernel("m", 0.0, 512 * KIB, "elementwise", "fp32")
    big = Kernel("b", 0.0, 4 * MIB, "elementwise", "fp32")
    assert hierarchical_lower_bound(small, machine) == (pytest.approx(32 * KIB / 100e9), "l1d")
    assert hierarchical_lower_bound(mid, machine) == (pytest.approx(512 * KIB / 50e9), "l2")
    assert hierarchical_lower_bound(big, machine) == (pytest.approx(4 * MIB / 10e9), "main memory")


def test_without_a_profile_nothing_changes():
    # a preset keeps the plain cost model: the seed's figure is untouched (seed 003: 8,756 us)
    from roofline.blocks import layer_report

    assert layer_report(tokens=8192).prediction.total_s * 1e6 == pytest.approx(8756, abs=1)
    from roofline.measure.calibrated import calibrated_model_for

    assert calibrated_model_for("h100-sxm") is None


def test_a_broken_profile_is_an_error_naming_the_file_not_the_seed_model(tmp_path, capsys):
    from roofline.measure.calibrated import calibrated_model_for
    from roofline.cli import main

    path = write_profile(synthetic(), tmp_path / "p.toml")
    text = path.read_text()
    plain = tmp_path / "plain.toml"
    plain.write_text(text[: text.index("\n[calibration.")])
    assert calibrated_model_for(str(plain)) is None  # a machine file: the cost model, as before
    broken = tmp_path / "broken.toml"
    broken.write_text(text.replace("launch_s = ", "launch_seconds = ", 1))
    with pytest.raises(RooflineError, match="broken.toml.*missing 'launch_s'"):
        calibrated_model_for(str(broken))
    assert main(["layer", "--machine", str(broken)]) == 2
    assert "broken.toml" in capsys.readouterr().err


@settings(max_examples=300, deadline=None)
@given(flops=st.floats(0, 1e12), nbytes=st.floats(1, 1e10), cat=st.sampled_from(["matmul", "elementwise", "norm"]))
def test_interval_contains_the_prediction(flops, nbytes, cat):
    cal = synthetic([Probe("x", "elementwise", "fp32", 1e3, 1e5, 5e-6, 4e-6, 7e-6),
                     Probe("x", "elementwise", "fp32", 1e4, 1e6, 9e-5, 8e-5, 1e-4)])
    machine = parse_profile(render_profile(cal), "t")[0]
    op = CalibratedModel(cal).predict([Kernel("k", flops, nbytes, cat, "fp32")], machine).ops[0]
    assert LAUNCH <= op.low_s <= op.time_s <= op.high_s
    # never far below the speed of light of the level that holds the working set (in cache, the
    # synthetic machine's 100 GB/s is 10x its main memory's 10 GB/s: the plain roofline is no bound there)
    assert op.time_s >= hierarchical_lower_bound(Kernel("k", flops, nbytes, cat, "fp32"), machine)[0] * 0.25


def test_cold_applies_the_warm_fitted_residual_to_the_main_memory_time():
    # silu*mul probed warm at a 32 KiB working set: the stream curve's 100 GB/s there, measured at
    # twice that body: t = 1e-7 + 2 x 32,768 / 100e9 = 1e-7 + 6.5536e-7 s, so r = 2
    nbytes = 32 * KIB
    t = LAUNCH + 2 * nbytes / 100e9
    cal = synthetic([Probe("silu*mul", "elementwise", "fp32", 0.0, nbytes, t, t, t)])
    machine = parse_profile(render_profile(cal), "t")[0]
    k = Kernel("silu*mul", 0.0, nbytes, "elementwise", "fp32")
    warm = CalibratedModel(cal).predict_op(k, machine)
    cold = CalibratedModel(cal, cold=True).predict_op(k, machine)
    assert warm.residual == pytest.approx(2.0) and cold.residual == pytest.approx(2.0)
    assert warm.time_s == pytest.approx(LAUNCH + 2 * nbytes / 100e9)  # 0.756 us
    # cold: main memory's 10 GB/s, the same r: 1e-7 + 2 x 32,768 / 10e9 = 6.65 us (not the warm 0.756 us)
    assert cold.time_s == pytest.approx(LAUNCH + 2 * nbytes / 10e9)


def test_vector_flops_get_the_best_matmul_rate_not_the_largest_size():
    # rates 1e9, 1e10 and 5e9 FLOP/s at 1e6, 1e8 and 2e9 FLOPs: the best (1e10) is not the largest
    mm = _curve("matmul", "fp32", (79, 368, 1000), (1e6, 1e8, 2e9), (7.5e4, 1.6e6, 1.2e7),
                (1e6 / 1e9, 1e8 / 1e10, 2e9 / 5e9))
    cal = dataclasses.replace(synthetic(), matmul=(mm,))
    machine = parse_profile(render_profile(cal), "t")[0]
    k = Kernel("softmax", 1e6, 1.0, "softmax", "fp32")  # compute-bound: 1e6 FLOPs, 1 byte
    op = CalibratedModel(cal).predict_op(k, machine)
    assert op.flops_per_s == pytest.approx(1e10) and op.compute_s == pytest.approx(1e6 / 1e10)  # 100 us, not 200
    # a matmul-like op keeps the rate at its size: 2e9 FLOPs at 5e9 FLOP/s
    assert CalibratedModel(cal).predict_op(Kernel("mm", 2e9, 1.0, "matmul", "fp32"), machine).flops_per_s == pytest.approx(5e9)


def test_a_smaller_cache_is_never_slower_than_a_larger_one():
    # copy at 32 KiB (in l1d) measures 40 GB/s, dispatch-dominated; 512 KiB (l2) 50 GB/s, 8 MiB 10 GB/s
    ws = (32 * KIB, 512 * KIB, 8 * MIB)
    copy = _curve("copy", "fp32", ws, (0, 0, 0), ws, (ws[0] / 40e9, ws[1] / 50e9, ws[2] / 10e9))
    cal = dataclasses.replace(synthetic(), bandwidth=(copy,))
    # l1d takes l2's 50 GB/s (at least as fast as any larger level); l2 keeps its own
    assert [(n, pytest.approx(b)) for n, _, b in level_bandwidths(cal)] == [("l1d", 50e9), ("l2", 50e9)]
    # a machine file with a slower small level: the bound uses the faster larger level that also holds it
    from roofline.machines import Machine, MemoryLevel

    m = Machine("m", 1e12, 10e9, default_dtype="fp32",
                levels=(MemoryLevel("l1d", 64 * KIB, 40e9), MemoryLevel("l2", MIB, 50e9)))
    small = Kernel("s", 0.0, 32 * KIB, "elementwise", "fp32")
    assert hierarchical_lower_bound(small, m) == (pytest.approx(32 * KIB / 50e9), "l2")  # 0.655 us, not 0.819


def test_probes_shorter_than_one_and_a_half_launches_are_not_fitted():
    nbytes = 32 * KIB  # warm body 32,768 / 100e9 = 0.33 us
    short = Probe("silu*mul", "elementwise", "fp32", 0.0, nbytes, 1.4 * LAUNCH, LAUNCH, 2 * LAUNCH)
    model = CalibratedModel(synthetic([short]))
    assert model.residual(Kernel("silu*mul", 0.0, nbytes, "elementwise", "fp32")).source == "none"
    # at 1.5 launches it is fitted, without the t/4 floor: r = (1.5e-7 - 1e-7) / 3.2768e-7 = 0.1526
    ok = Probe("silu*mul", "elementwise", "fp32", 0.0, nbytes, 1.5 * LAUNCH, LAUNCH, 2 * LAUNCH)
    res = CalibratedModel(synthetic([ok])).residual(Kernel("silu*mul", 0.0, nbytes, "elementwise", "fp32"))
    assert res.source == "op" and res.ratio == pytest.approx(0.5 * LAUNCH / (nbytes / 100e9))


def test_profile_mode_follows_the_umask_and_the_directory_is_synced(tmp_path, monkeypatch):
    import os
    import stat

    import roofline.files as files

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (synced.append(stat.S_ISDIR(os.fstat(fd).st_mode)), real_fsync(fd)))
    old = os.umask(0o027)
    try:
        path = write_profile(synthetic(), tmp_path / "p.toml")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # 0666 & ~0027, not mkstemp's 0600
    assert synced == [False, True]  # the file, then its directory after the rename


def test_sigterm_during_the_write_leaves_no_temp_file_and_restores_the_handler(tmp_path, monkeypatch):
    import os
    import signal

    import roofline.files as files

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(files.os, "fsync", lambda fd: os.kill(os.getpid(), signal.SIGTERM))
    with pytest.raises(SystemExit) as exc:
        write_profile(synthetic(), tmp_path / "p.toml")
    assert exc.value.code == 128 + signal.SIGTERM  # 143, as a shell reports a SIGTERM
    assert list(tmp_path.iterdir()) == [] and signal.getsignal(signal.SIGTERM) == before


def test_the_planner_uses_a_calibrated_model_when_given_one(tmp_path):
    """decode, memory and sweeps sum cost_model.op_seconds: a calibrated model's measured rates,
    never the seed fractions it has none of."""
    from roofline.plan import Precision, decode_step

    cal = synthetic()
    model = CalibratedModel(cal)
    path = write_profile(cal, tmp_path / "p.toml")
    machine = get_machine(str(path))
    fp32 = Precision("fp32", "fp32", "fp32")
    step = decode_step("gpt2", machine, 2, 64, precision=fp32, cost_model=model)
    # the pass is the sum over its ops of (launch + residual x max(compute, memory)) x count
    expected = sum(model.op_seconds(op.kernel, machine, LAUNCH)[2] * op.count for op in step.ops)
    assert step.time_s == pytest.approx(expected)
    assert step.prediction.total_s == pytest.approx(expected)  # the per-op breakdown agrees with the sums
    seed = decode_step("gpt2", machine, 2, 64, precision=fp32)
    assert step.time_s != pytest.approx(seed.time_s)


def test_the_decode_command_reads_a_profile_as_its_cost_model(tmp_path, capsys):
    from roofline.cli import main

    path = write_profile(synthetic(), tmp_path / "p.toml")
    code = main(["decode", "--model", "gpt2", "--machine", str(path), "--dtype", "fp32", "--context", "64",
                 "--batch", "1,2"])
    out = capsys.readouterr().out
    assert code == 0 and "calibrated model of the profile measured 2026-01-01" in out


# -- issue 12: classes, the skinny-M GEMM family, columns that add up ------------------------------

def _gemm_curve():
    """fp32 (M, K) @ (K, N) at M = 1, 4 and N = K = 256, 1024, with rates chosen by hand:
    M=1: 1e9 FLOP/s at both sizes; M=4: 4e9 at N=K=256, 8e9 at N=K=1024."""
    pts = [(1, 256, 1e9), (4, 256, 4e9), (1, 1024, 1e9), (4, 1024, 8e9)]
    flops = [2.0 * m * nk * nk for m, nk, _ in pts]
    bodies = [f / r for f, (_, _, r) in zip(flops, pts)]
    c = _curve("gemm", "fp32", [m for m, _, _ in pts], flops, [4.0 * (m * nk + nk * nk + m * nk) for m, nk, _ in pts],
               bodies)
    return dataclasses.replace(c, n=tuple(float(nk) for _, nk, _ in pts), k=tuple(float(nk) for _, nk, _ in pts))


def test_gemm_rate_is_bilinear_in_log_m_and_log_nk_and_clamped_outside():
    cal = dataclasses.replace(synthetic(), gemm=(_gemm_curve(),))
    model = CalibratedModel(cal)
    at = lambda M, N, K: model.gemm_rate(Kernel("mm", 2.0 * M * N * K, 4.0 * (M * K + K * N + M * N), "matmul", "fp32",  # noqa: E731
                                                shape=(1, M, N, K)))
    assert at(4, 1024, 1024)[0] == pytest.approx(8e9) and at(4, 1024, 1024)[1] is False
    # M = 2 is halfway between 1 and 4 in log: sqrt(1e9 x 8e9) at N = K = 1024
    assert at(2, 1024, 1024)[0] == pytest.approx(math.sqrt(1e9 * 8e9))
    # N K = 256 x 1024 is halfway in log between 256^2 and 1024^2: at M = 4, sqrt(4e9 x 8e9)
    assert at(4, 256, 1024)[0] == pytest.approx(math.sqrt(4e9 * 8e9))
    # beyond the grid in N K: clamped to the edge and said
    rate, outside, basis = at(4, 4096, 4096)
    assert rate == pytest.approx(8e9) and outside and "outside" in basis
    # past the largest M measured, or without a shape: the square sweep's rate by size holds
    assert at(64, 1024, 1024) is None
    assert model.gemm_rate(Kernel("mm", 1e6, 1e5, "matmul", "fp32")) is None


def test_a_traced_op_of_a_probed_class_gets_the_class_correction():
    """Class probes (shape "family: ...") of elementwise ops that ran at twice the modelled time:
    an aten op named nothing like them (no block-op name matches) is corrected by 2."""
    model0 = CalibratedModel(synthetic())
    probes = []
    for ws in (64 * KIB, 256 * KIB, 1 * MIB):
        k = Kernel("add", ws / 12, ws, "elementwise", "fp32")
        base = float(model0.base_body_s(k, cold=False)[2])
        probes.append(Probe("add", "elementwise", "fp32", k.flops, ws, LAUNCH + 2 * base, LAUNCH + 2 * base,
                            LAUNCH + 2 * base, "family: (x, 1024) fp32"))
    model = CalibratedModel(synthetic(probes))
    traced = Kernel("layers.0.mlp: aten::add", 256 * KIB / 12, 256 * KIB, "elementwise", "fp32")
    res = model.residual(traced)
    assert res.source == "class" and res.ratio == pytest.approx(2.0) and not res.extrapolated
    far = model.residual(Kernel("aten::mul", 1.0, 64 * MIB, "elementwise", "fp32"))
    assert far.source == "class" and far.extrapolated and far.high >= 1.5  # outside the probes: widened
    pred = model.predict_op(traced, get_machine("h100-sxm"))
    assert pred.op_class == "elementwise" and "elementwise probes" in pred.basis


def test_calibrated_columns_add_up_to_the_time():
    """compute and memory carry the correction: time = launch + max(compute, memory), so a table
    never shows an op faster than its own compute column."""
    probe = Probe("silu*mul", "elementwise", "fp32", 1e3, 4e5, 3e-5, 2.8e-5, 3.5e-5, "x")
    model = CalibratedModel(synthetic([probe]))
    machine = get_machine("h100-sxm")
    for k in (Kernel("silu*mul", 1e3, 4e5, "elementwise", "fp32"), Kernel("mm", 1e8, 1.6e6, "matmul", "fp32")):
        p = model.predict_op(k, machine)
        assert p.time_s == pytest.approx(p.launch_s + max(p.compute_s, p.memory_s))


def test_every_op_has_a_class():
    from roofline.measure.residuals import op_class

    assert op_class(Kernel("x", 1, 1, "matmul", shape=(8, 4, 4, 4))) == "bmm"
    assert op_class(Kernel("x", 1, 1, "matmul", shape=(1, 4, 4, 4))) == "gemm"
    assert op_class(Kernel("x", 1, 1, "matmul")) == "gemm"
    assert op_class(Kernel("x", 0, 1, "gather")) == "gather"


def test_gemm_family_round_trips_through_the_profile(tmp_path):
    cal = dataclasses.replace(synthetic(), gemm=(_gemm_curve(),))
    _, back = load_profile(write_profile(cal, tmp_path / "p.toml"))
    assert back.gemm == cal.gemm


def test_every_command_that_takes_a_machine_reads_a_profile(tmp_path, capsys):
    """A calibrated profile as --machine: the layer table says it is calibrated (it raised a
    TypeError formatting the missing e_c before), and decode/memory/sweep/plot run on it."""
    from roofline.cli import main

    path = str(write_profile(synthetic(), tmp_path / "p.toml"))
    for argv in (["layer", "--tokens", "64"], ["layer", "--json"], ["decode"], ["memory"], ["sweep", "--over", "batch"],
                 ["plot", "layer", "-o", str(tmp_path / "l.png")]):
        assert main([*argv, "--machine", path]) == 0, argv
    out = capsys.readouterr().out
    assert "calibrated model of the profile measured" in out and "fitted correction" in out


def test_a_class_costs_at_least_its_tiny_probe_per_call():
    """The class's floor: an elementwise op on a (1, 32) tensor took 5 us (2 us above the
    calibration's tiny in-place add): every elementwise op pays 5 us per call, not the launch."""
    tiny = Probe("mul", "elementwise", "fp32", 32.0, 384.0, 5e-6, 4e-6, 6e-6, "family: tiny (1, 32) fp32")
    model = CalibratedModel(synthetic([tiny]))
    k = Kernel("aten::mul", 32.0, 384.0, "elementwise", "fp32")
    assert model.launch_of(k) == pytest.approx(5e-6)
    assert model.predict_op(k, get_machine("h100-sxm")).launch_s == pytest.approx(5e-6)
    assert model.launch_of(Kernel("aten::mm", 1.0, 1.0, "matmul", "fp32")) == pytest.approx(LAUNCH)  # no gemm tiny probe
    assert model.launch_of(k, 7e-6) == pytest.approx(7e-6)  # a launch the user gives wins


def test_a_forward_that_outgrows_the_cache_reads_its_weights_cold():
    """synthetic(): last cache 1 MiB. A forward moving over a quarter of it (256 KiB) runs its
    matmuls at the cold GEMM family's rate; one moving less at the warm one."""
    warm = _gemm_curve()
    cold = dataclasses.replace(warm, kind="gemm_cold", seconds=tuple(4 * s for s in warm.seconds))
    model = CalibratedModel(dataclasses.replace(synthetic(), gemm=(warm, cold)))
    k = Kernel("mm", 2.0 * 4 * 1024 * 1024, 4.0 * (8 * 1024 + 1024 * 1024), "matmul", "fp32", shape=(1, 4, 1024, 1024))
    assert not model.for_forward(100 * KIB).weights_cold and model.for_forward(600 * KIB).weights_cold
    assert not model.for_forward(200 * KIB).weights_cold and model.for_forward(300 * KIB).weights_cold
    warm_rate = model.for_forward(100 * KIB).gemm_rate(k)[0]
    cold_rate = model.for_forward(600 * KIB).gemm_rate(k)[0]
    # cold times are 4 x (body + launch); the rate is FLOPs over the time less one launch:
    # f / (4 f / 8e9 + 3 launch), with f = 2 x 4 x 1024 x 1024
    f = 2.0 * 4 * 1024 * 1024
    assert warm_rate == pytest.approx(8e9) and cold_rate == pytest.approx(f / (4 * f / 8e9 + 3 * LAUNCH))


# -- issue 12: aten-op corrections, the profiler as an instrument, attention by shape --------------

def _family(model0, name, op, ws, ratio, profiled_ratio=None, floor=LAUNCH, cat="elementwise"):
    """A class probe of ``op`` at working set ``ws`` that ran at ``ratio`` x its modelled body
    (wall) and, under the profiler, ``profiled_ratio`` x (None: not profiled), each over ``floor``."""
    k = Kernel(op, ws / 12, ws, cat, "fp32")
    base = float(model0.base_body_s(k, cold=False)[2])
    t = floor + ratio * base
    p = None if profiled_ratio is None else floor + profiled_ratio * base
    return Probe(name, cat, "fp32", k.flops, ws, t, t, t, "family: (x, 1024) fp32", op, p)


def test_an_aten_op_that_was_probed_gets_its_own_correction_before_the_class_mean():
    """add ran at 1x, gelu at 4x its body: aten::gelu is corrected by 4, aten::add by 1, and an
    unprobed aten::sin by the class curve (the mean of the logs at each size: sqrt(1 x 4) = 2)."""
    m0 = CalibratedModel(synthetic())
    probes = [_family(m0, n, op, ws, r) for ws in (64 * KIB, 256 * KIB)
              for n, op, r in (("add", "aten::add", 1.0), ("gelu", "aten::gelu", 4.0))]
    model = CalibratedModel(synthetic(probes))
    at = 128 * KIB
    for name, source, ratio in (("aten::gelu", "aten", 4.0), ("aten::add", "aten", 1.0), ("aten::sin", "class", 2.0)):
        res = model.residual(Kernel(name, at / 12, at, "elementwise", "fp32"))
        assert (res.source, res.ratio) == (source, pytest.approx(ratio)), name
    assert "aten::gelu probes" in model.predict_op(Kernel("aten::gelu", at / 12, at, "elementwise", "fp32"),
                                                   get_machine("h100-sxm")).basis


def test_the_profiler_as_instrument_uses_the_profiled_probe_times():
    """A probe ran at 2x its body in the timed loop and 3x under torch.profiler; its tiny probe
    took 1 us in the loop and 6 us profiled. The wall model predicts 1 us + 2 x body, the
    profiler model 6 us + 3 x body; a profile without profiled times keeps the wall ones, and says so."""
    m0 = CalibratedModel(synthetic())
    ws = 256 * KIB
    tiny = Probe("add", "elementwise", "fp32", 32.0, 384.0, 1e-6, 1e-6, 1e-6, "family: tiny (1, 32) fp32", "aten::add", 6e-6)
    wall_floor, prof_floor = 1e-6, 6e-6
    k = Kernel("aten::add", ws / 12, ws, "elementwise", "fp32")
    base = float(m0.base_body_s(k, cold=False)[2])
    probe = Probe("add", "elementwise", "fp32", k.flops, ws, wall_floor + 2 * base, wall_floor + 2 * base,
                  wall_floor + 2 * base, "family: (x, 1024) fp32", "aten::add", prof_floor + 3 * base)
    wall = CalibratedModel(synthetic([tiny, probe]))
    prof = wall.measured_by("profiler")
    assert wall.launch_of(k) == pytest.approx(1e-6) and prof.launch_of(k) == pytest.approx(6e-6)
    assert wall.residual(k).ratio == pytest.approx(2.0) and prof.residual(k).ratio == pytest.approx(3.0)
    assert "torch.profiler records" in prof.describe() and "torch.profiler" not in wall.describe()
    unprofiled = CalibratedModel(synthetic([dataclasses.replace(tiny, profiled_s=None),
                                            dataclasses.replace(probe, profiled_s=None)])).measured_by("profiler")
    assert unprofiled.launch_of(k) == pytest.approx(1e-6) and "no profiled probes" in unprofiled.describe()
    with pytest.raises(ValueError, match="instrument"):
        wall.measured_by("stopwatch")


def test_the_interval_spans_the_class_floors_when_the_op_was_not_probed():
    """Tiny probes of the class took 1 us (add) and 10 us (gelu): an unprobed elementwise op's
    fixed cost is their median (5.5 us) with the interval's ends at 1 and 10 us."""
    tinies = [Probe(n, "elementwise", "fp32", 32.0, 384.0, t, t, t, "family: tiny (1, 32) fp32", op)
              for n, op, t in (("add", "aten::add", 1e-6), ("gelu", "aten::gelu", 10e-6))]
    model = CalibratedModel(synthetic(tinies))
    k = Kernel("aten::sin", 32.0, 256.0, "elementwise", "fp32")
    assert model.floor_band(k) == pytest.approx((5.5e-6, 1e-6, 10e-6))
    p = model.predict_op(k, get_machine("h100-sxm"))
    assert p.launch_s == pytest.approx(5.5e-6) and p.low_s < 1.01e-6 + (p.time_s - p.launch_s) and p.high_s >= 10e-6
    assert model.floor_band(Kernel("aten::gelu", 32.0, 256.0, "elementwise", "fp32")) == pytest.approx((10e-6,) * 3)


def test_a_traced_kernel_named_by_its_module_finds_its_aten_ops_probes():
    """TraceResult.to_kernels names a kernel 'module: aten::op'; its fixed cost and correction are
    those of aten::op's own probes (here a 2 us tiny mul, against a 10 us gelu in the class), the
    same as for the bare name a profile gives."""
    tinies = [Probe(n, "elementwise", "fp32", 32.0, 384.0, t, t, t, "family: tiny (1, 32) fp32", op)
              for n, op, t in (("mul", "aten::mul", 2e-6), ("gelu", "aten::gelu", 10e-6))]
    model = CalibratedModel(synthetic(tinies))
    bare = Kernel("aten::mul", 32.0, 256.0, "elementwise", "fp32")
    traced = Kernel("model.layers.0.mlp: aten::mul", 32.0, 256.0, "elementwise", "fp32")
    assert model.floor_band(traced) == model.floor_band(bare) == pytest.approx((2e-6,) * 3)
    m = get_machine("h100-sxm")
    assert model.predict_op(traced, m).time_s == pytest.approx(model.predict_op(bare, m).time_s)


def test_the_bound_is_the_roofline_s_not_the_larger_measured_column():
    """A GEMV, (1, 512) @ (512, 512) fp32: 2 x 512^2 = 524,288 FLOPs over 4 x (512 + 512^2 + 512) B
    = 1.05 MB, 0.5 FLOP per byte. The synthetic profile's machine peaks at its best matmul rate,
    1e10 FLOP/s, over 10 GB/s of main memory: a ridge of 1 FLOP per byte, so the roofline calls the
    GEMV memory-bound; its measured matmul rate at that size (1e9 FLOP/s: 524 us) puts the compute
    column far above the memory one (1.05 MB at ~40 GB/s: ~26 us)."""
    model = CalibratedModel(synthetic([]))
    machine = parse_profile(render_profile(model.calibration), "t")[0]
    n = 512
    k = Kernel("aten::mm", 2.0 * n * n, 4.0 * (n + n * n + n), "matmul", "fp32", shape=(1, 1, n, n))
    p = model.predict_op(k, machine)
    assert p.compute_s > 10 * p.memory_s  # the measured rates' columns alone would say compute
    assert p.bound == "memory"


def test_an_aten_op_probed_twice_takes_the_median_of_its_tiny_probes():
    """A mul of two tensors took 2 us and a mul by a python scalar 4 us: aten::mul's fixed cost is
    their median, 3 us, the interval's ends at 2 and 4 us."""
    tinies = [Probe(n, "elementwise", "fp32", 32.0, b, t, t, t, "family: tiny (1, 32) fp32", "aten::mul")
              for n, b, t in (("mul", 384.0, 2e-6), ("mul scalar", 256.0, 4e-6))]
    model = CalibratedModel(synthetic(tinies))
    assert model.floor_band(Kernel("aten::mul", 32.0, 256.0, "elementwise", "fp32")) == pytest.approx((3e-6, 2e-6, 4e-6))


def test_attention_is_corrected_by_its_shape_decode_or_prefill():
    """fp32, 8 heads of 64. Decode, one query against S = 256: 4 S d h = 524,288 FLOPs over
    (2 S + 2) d h x 4 B = 1,052,672 B: 2 FLOPs per element, under 8 -> decode. Prefill T = S = 256:
    4 T S d h = 134,217,728 FLOPs over 4 T d h x 4 B = 2,097,152 B: 256 per element -> prefill."""
    from roofline.measure.residuals import fit_class

    h, d, s = 8, 64, 256
    decode = Kernel("sdpa", 4 * s * d * h, (2 * s + 2) * d * h * 4, "attention", "fp32")
    prefill = Kernel("sdpa", 4 * s * s * d * h, 4 * s * d * h * 4, "attention", "fp32")
    assert fit_class(decode) == "attention decode" and fit_class(prefill) == "attention prefill"
    # grouped-query decode, 8 query heads over 2 KV heads (4 rows per K/V pass): 4 S d x 8 = 524,288
    # FLOPs over (2 S x 2 + 2 x 8) d x 4 B = 266,240 B: 7.9 per element, a decode; 8 query heads
    # over one KV head (Llama 3 70B's ratio, 8 rows): the same FLOPs over (2 S + 16) d x 4 B =
    # 135,168 B: 15.5 per element, a decode too
    gqa4 = Kernel("sdpa", 4 * s * d * h, (2 * s * 2 + 2 * h) * d * 4, "attention", "fp32")
    gqa8 = Kernel("sdpa", 4 * s * d * 8, (2 * s * 1 + 2 * 8) * d * 4, "attention", "fp32")
    assert fit_class(gqa4) == "attention decode" and fit_class(gqa8) == "attention decode"
    # a prefill of 64 tokens, MHA: 4 T S d h with T = S = 64 over 4 T d h x 4 B: 64 per element
    short = Kernel("sdpa", 4 * 64 * 64 * d * h, 4 * 64 * d * h * 4, "attention", "fp32")
    assert fit_class(short) == "attention prefill"
    assert fit_class(Kernel("x", 1, 1, "elementwise")) == "elementwise"


def test_probe_aten_op_and_profiled_time_round_trip(tmp_path):
    probe = Probe("gelu", "elementwise", "fp32", 1e3, 4e5, 3e-5, 2.8e-5, 3.5e-5, "family: (16, 1024) fp32",
                  "aten::gelu", 4.5e-5)
    cal = synthetic([probe, Probe("x", "elementwise", "fp32", 1.0, 2.0, 3e-6, 2e-6, 4e-6, "x")])
    path = write_profile(cal, tmp_path / "p.toml")
    assert load_profile(path)[1] == cal
    text = path.read_text().replace("profiled_s = 4.5e-05", "profiled_s = -1.0")
    assert "profiled_s = -1.0" in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(RooflineError, match="profiled_s"):
        load_profile(bad)


def test_cold_weights_interval_reaches_down_to_the_warm_rate(tmp_path):
    """A forward past the cold threshold predicts its matmuls at the cold GEMM family's rate, but
    a shared cache may still hold part of the weights: the interval's low end is the warm time."""
    warm = _gemm_curve()
    cold = dataclasses.replace(warm, kind="gemm_cold", seconds=tuple(4 * s for s in warm.seconds))
    cal = dataclasses.replace(synthetic(), gemm=(warm, cold))
    model = CalibratedModel(cal)
    k = Kernel("mm", 2.0 * 4 * 1024 * 1024, 4.0 * (8 * 1024 + 1024 * 1024), "matmul", "fp32", shape=(1, 4, 1024, 1024))
    machine = get_machine(str(write_profile(cal, tmp_path / "p.toml")))  # the measured machine itself
    w, c = model.for_forward(100 * KIB).predict_op(k, machine), model.for_forward(600 * KIB).predict_op(k, machine)
    assert c.time_s > 2 * w.time_s and c.low_s == pytest.approx(w.low_s) and c.high_s > w.high_s
    assert "partly cached" in c.basis and "partly cached" not in w.basis


def _cold_probes(m0, k, warm_cold=40e-6):
    """aten::mul at k's working set: 1 us + 1 x its warm body warm, ``warm_cold`` after a cache
    flush; its tiny (1, 32) call 1 us warm and 30 us after a flush."""
    warm_base = float(m0.base_body_s(k, cold=False)[2])
    t = 1e-6 + warm_base
    return [Probe("mul", "elementwise", "fp32", 32.0, 384.0, 1e-6, 1e-6, 1e-6, "family: tiny (1, 32) fp32", "aten::mul"),
            Probe("mul", "elementwise", "fp32", 32.0, 384.0, 30e-6, 30e-6, 30e-6, "family: cold tiny (1, 32) fp32",
                  "aten::mul"),
            Probe("mul", "elementwise", "fp32", k.flops, k.bytes, t, t, t, "family: (64, 1024) fp32", "aten::mul"),
            Probe("mul", "elementwise", "fp32", k.flops, k.bytes, warm_cold, warm_cold, warm_cold,
                  "family: cold (64, 1024) fp32", "aten::mul")]


def test_a_cold_forward_costs_its_small_ops_from_the_cold_class_probes(tmp_path):
    """Synthetic profile, main memory 10 GB/s (the 8 MiB copy point). The cold curve of aten::mul
    is (40 - 30) us over its main-memory body (256 KiB / 10 GB/s = 26.2 us). On the measured
    machine, in a forward past the cache threshold (a quarter of the 1 MiB last cache), the op at
    the probe's size costs the warm call plus that: 1 + 10 = 11 us; its interval reaches down to
    the warm prediction (1 us + the warm body at 256 KiB: log-log between 100 GB/s at 32 KiB and
    50 GB/s at 512 KiB, 100 x 2^(-3/4) = 59.5 GB/s, 4.4 us) and up to the cold call's 30 us. A
    small forward, and a matmul, are untouched; --cold (every byte from main memory) uses the same
    cold curve."""
    m0 = CalibratedModel(synthetic())
    ws = 256 * KIB
    k = Kernel("aten::mul", ws / 12, ws, "elementwise", "fp32")
    assert float(m0.base_body_s(k, cold=True)[2]) == pytest.approx(ws / 10e9)
    cal = synthetic(_cold_probes(m0, k))
    machine = get_machine(str(write_profile(cal, tmp_path / "p.toml")))
    model = CalibratedModel(cal)
    small, big = model.for_forward(100 * KIB), model.for_forward(600 * KIB)
    assert not small.reads_cold(k) and big.reads_cold(k) and big.operands_cold and not small.operands_cold
    assert not big.reads_cold(Kernel("mm", 1e6, ws, "matmul", "fp32"))
    res = big.residual(k, cold=True)
    assert res.source == "aten-cold" and res.ratio == pytest.approx(10e-6 / (ws / 10e9))
    w, c = small.predict_op(k, machine), big.predict_op(k, machine)
    assert w.residual_source == "aten" and w.time_s == pytest.approx(1e-6 + ws / (100e9 * 2 ** -0.75))
    assert c.time_s == pytest.approx(11e-6) and c.residual_source == "aten-cold"
    assert c.low_s == pytest.approx(w.low_s) and "partly cached" in c.basis
    assert c.high_s >= 30e-6 and "dispatcher evicted" in c.basis
    assert c.launch_s + max(c.compute_s, c.memory_s) == pytest.approx(c.time_s)  # the columns add up
    assert CalibratedModel(cal, cold=True).predict_op(k, machine).time_s == pytest.approx(11e-6)
    assert "operands read cold" in big.describe() and "operands read cold" not in small.describe()


def test_a_cold_probe_near_its_cold_call_is_not_fitted():
    """A cold probe under 1.2 cold calls of its tiny one (33 us against 30 us) is mostly that call:
    no cold curve, so the op keeps the warm probes' correction."""
    m0 = CalibratedModel(synthetic())
    k = Kernel("aten::mul", 256 * KIB / 12, 256 * KIB, "elementwise", "fp32")
    model = CalibratedModel(synthetic(_cold_probes(m0, k, warm_cold=33e-6))).for_forward(600 * KIB)
    assert not model.reads_cold(k) and model.predict_op(k, get_machine("h100-sxm")).residual_source == "aten"


def test_a_row_wise_op_on_narrow_rows_gets_the_narrow_probes_width_factor():
    """aten::_softmax probed at 256 KiB on 1,024-wide rows at 1 x its body and on 8-wide rows at
    16 x (scalar code per short row): the width factor is 16 at 8 columns, 1 at 1,024 and above,
    and 16^(3/7) = 3.28 at 128 columns (log2 128 = 7 lies 4/7 of the way from log2 8 = 3 to
    log2 1,024 = 10, so 3/7 of log 16 is left); an op without a known width, or another op, is
    untouched."""
    m0 = CalibratedModel(synthetic())
    ws = 256 * KIB
    wide = _family(m0, "softmax", "aten::_softmax", ws, 1.0, cat="softmax")
    narrow = dataclasses.replace(_family(m0, "softmax", "aten::_softmax", ws, 16.0, cat="softmax"),
                                 shape="family: narrow (8192, 8) fp32")
    model = CalibratedModel(synthetic([wide, narrow]))

    def k(shape):
        return Kernel("aten::_softmax", ws / 12, ws, "softmax", "fp32", shape=shape)

    assert model.residual(k(())).ratio == pytest.approx(1.0)
    assert model.residual(k((8192, 8))).ratio == pytest.approx(16.0) and model.residual(k((8192, 8))).width == 8
    assert model.residual(k((64, 1024))).ratio == pytest.approx(1.0)
    assert model.residual(k((64, 4096))).ratio == pytest.approx(1.0)
    assert model.residual(k((16384, 4))).ratio == pytest.approx(16.0)  # below the narrowest: clamped
    assert model.residual(k((100, 128))).ratio == pytest.approx(16 ** (3 / 7))
    p = model.predict_op(k((8192, 8)), get_machine("h100-sxm"))
    assert "rows of 8" in p.basis
    other = Kernel("aten::gelu", ws / 12, ws, "elementwise", "fp32", shape=(8192, 8))
    assert model.residual(other).width == 0


def test_kernel_shape_reads_rows_and_width_of_row_wise_ops():
    from roofline.trace.rules import kernel_shape

    assert kernel_shape("aten::_softmax", [(4, 128, 8)]) == (512, 8)  # 4 x 128 rows of 8
    assert kernel_shape("aten::_fused_rms_norm", [(1, 128, 512), (512,)]) == (128, 512)
    assert kernel_shape("aten::mm", [(4, 64), (64, 32)]) == (1, 4, 32, 64)  # matmuls: gemm_shape
    assert kernel_shape("aten::add", [(4, 8), (4, 8)]) == ()  # not row-wise
    assert kernel_shape("aten::_softmax", []) == () and kernel_shape("aten::_softmax", [()]) == ()


def test_no_interval_reaches_below_the_profiles_own_speed_of_light():
    """The synthetic profile's best stream bandwidth is 100 GB/s (copy at 32 KiB) and its best
    matmul 1e10 FLOP/s: a 2 MB elementwise op cannot take less than 2e6 / 100e9 = 20 us, whatever
    the leave-one-out bands say (here a probe 10x faster than its class widens the band down)."""
    m0 = CalibratedModel(synthetic())
    ws = 2e6
    fast = _family(m0, "add", "aten::add", 256 * KIB, 0.1)
    slow = _family(m0, "add", "aten::add", 1 * MIB, 1.0)
    model = CalibratedModel(synthetic([fast, slow]))
    k = Kernel("aten::add", ws / 12, ws, "elementwise", "fp32")
    cal = synthetic([fast, slow])
    import tempfile
    from pathlib import Path

    machine = get_machine(str(write_profile(cal, Path(tempfile.mkdtemp()) / "p.toml")))
    p = model.predict_op(k, machine)
    assert p.low_s >= min(ws / 100e9, p.time_s) - 1e-15
    assert model.fastest_s(k, machine) == pytest.approx(ws / 100e9)


def test_an_op_on_a_chunk_view_gets_the_strided_probes_factor():
    """aten::silu probed contiguous at 1 x its body and on chunk views at 2 x (at 64 and 256 KiB):
    an op the profiler saw with a non-contiguous input (kernel_shape (STRIDED,)) gets 2 x the
    contiguous correction, by its own op's probes; aten::gelu (no strided probe of its own) the
    class's factor (the mean over the class's strided probes, here silu's 2); a contiguous op, a
    row-wise op and a matmul are untouched."""
    from roofline.trace.rules.matmul import STRIDED

    m0 = CalibratedModel(synthetic())
    probes = []
    for ws in (64 * KIB, 256 * KIB):
        probes.append(_family(m0, "silu", "aten::silu", ws, 1.0))
        probes.append(dataclasses.replace(_family(m0, "silu", "aten::silu", ws, 2.0), shape="family: strided (x, 1024) fp32"))
        probes.append(_family(m0, "gelu", "aten::gelu", ws, 3.0))
    model = CalibratedModel(synthetic(probes))
    at = 128 * KIB

    def k(name, shape=(), cat="elementwise"):
        return Kernel(name, at / 12, at, cat, "fp32", shape=shape)

    assert model.residual(k("aten::silu")).ratio == pytest.approx(1.0)
    res = model.residual(k("aten::silu", (STRIDED,)))
    assert res.ratio == pytest.approx(2.0) and res.strided == "aten::silu"
    gelu = model.residual(k("aten::gelu", (STRIDED,)))
    assert gelu.ratio == pytest.approx(3.0 * 2.0) and gelu.strided == "elementwise"
    assert model.residual(k("aten::_softmax", (64, 512), "softmax")).strided == ""
    p = model.predict_op(k("aten::silu", (STRIDED,)), get_machine("h100-sxm"))
    assert "non-contiguous input: x2.00 by the aten::silu probes" in p.basis
    assert p.launch_s + max(p.compute_s, p.memory_s) == pytest.approx(p.time_s)  # the columns add up


def test_kernel_shape_marks_non_contiguous_inputs_from_their_strides():
    """A chunk(2, -1) half of a (64, 256) tensor has dims (64, 128) and strides (256, 1): strided;
    a contiguous (64, 128) has strides (128, 1); a broadcast (stride 0) is not strided; a
    transpose of a (128, 64) ((64, 128) with strides (1, 64)) is; size-1 dims do not count."""
    from roofline.trace.rules.matmul import STRIDED, is_strided, kernel_shape

    assert is_strided((64, 128), (256, 1)) and not is_strided((64, 128), (128, 1))
    assert not is_strided((4, 32), (0, 1)) and is_strided((64, 128), (1, 64))
    assert not is_strided((1, 8, 1, 32), (999, 32, 7, 1))  # size-1 dims: any stride
    assert not is_strided((2, 3), (3,)) and not is_strided(("a",), (1,))  # malformed: not claimed
    assert kernel_shape("aten::silu", [(64, 128)], [(256, 1)]) == (STRIDED,)
    assert kernel_shape("aten::mul", [(64, 128), (64, 128)], [(128, 1), (256, 1)]) == (STRIDED,)
    assert kernel_shape("aten::mul", [(64, 128), ()], [(128, 1), ()]) == ()
    assert kernel_shape("aten::silu", [(64, 128)]) == ()  # no strides recorded: nothing claimed
    assert kernel_shape("aten::mm", [(4, 64), (64, 32)], [(1, 4), (32, 1)]) == (1, 4, 32, 64)  # matmuls keep their shape
    assert kernel_shape("aten::_softmax", [(4, 8)], [(16, 1)]) == (4, 8)  # row-wise ops keep (rows, width)


def test_a_profiled_forward_gets_a_framework_line_of_its_gaps(tmp_path):
    """A profile whose framework probe measured 5 us per gap, and a CPU trace of three top-level
    ops (a silu at [0, 10) us, a view at [15, 16), a silu at [30, 40)): 2 gaps, a framework line of
    10 us, and the total's line says it counts gaps; the measured side adds the 19 us between ops."""
    import json

    from roofline.trace.profiler import profile_report

    cal = dataclasses.replace(synthetic(), framework_gap_s=5e-6, framework_probe="test")
    machine = get_machine(str(write_profile(cal, tmp_path / "p.toml")))
    args = {"Input Dims": [[64, 64]], "Input type": ["float"], "Concrete Inputs": [""], "Input Strides": [[64, 1]]}
    cpu = dict(ph="X", cat="cpu_op", pid=1, tid=1)
    events = [dict(cpu, name="aten::silu", ts=0.0, dur=10.0, args={**args, "External id": 1}),
              dict(cpu, name="aten::view", ts=15.0, dur=1.0, args={"External id": 2, "Input Dims": [[64, 64], [1]],
                                                                  "Input type": ["float", "ScalarList"]}),
              dict(cpu, name="aten::silu", ts=30.0, dur=10.0, args={**args, "External id": 3})]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(path, machine, calibrated=CalibratedModel(cal))
    assert rep.between_ops_gaps == 2 and rep.between_ops_s == pytest.approx(19e-6)
    assert rep.framework_s == pytest.approx(10e-6) and "per gap" in rep.framework_basis
    line = [ln for ln in rep.to_table().splitlines() if ln.startswith("calibrated: costed ops")][0]
    assert "framework 10.0 us" in line and "40.0 us measured" in line and "time between them" in line  # 10 + 1 + 10 + 19
    d = json.loads(rep.to_json())
    assert d["measured_total_s"] == pytest.approx(40e-6) and d["top_level_s"] == pytest.approx(21e-6)
    assert d["calibrated_error"] == pytest.approx(rep.calibrated_s / 40e-6 - 1)
    assert d["unprofiled_s"] == pytest.approx(rep.unprofiled_s) and rep.unprofiled_s > rep.framework_s
    assert d["notes"] == []  # the trace records strides
    # a probe of 15 us per gap against this trace's 9.5 us gaps (the profiler's recording in them): the
    # unprofiled prediction takes the measured 19 us, not 30, and says why (a reviewer's was +19% off)
    slow = dataclasses.replace(cal, framework_gap_s=15e-6)
    rep2 = profile_report(path, machine, calibrated=CalibratedModel(slow))
    assert rep2.framework_s == pytest.approx(30e-6)
    assert rep2.unprofiled_s == pytest.approx(rep.unprofiled_s - 10e-6 + 19e-6)
    assert any(n.startswith("the framework probe's 15.0 us per gap is more than this trace's own gaps (9.5 us each")
               for n in rep2.notes)


def test_an_op_faster_than_main_memory_but_not_than_its_cache_is_not_impossible(tmp_path):
    """The synthetic profile's machine: main memory 10 GB/s, its l1d (64 KiB) 100 GB/s, 1e10 FLOP/s.
    A silu of (64, 128) fp32 moves 65,536 B (read and write) and counts 32,768 FLOPs: 6.55 us from
    main memory, max(0.655 us from l1d, 3.28 us of compute) = 3.28 us in cache. Measured at 4 us it
    is in cache, not impossible; at 2 us it beats even that: impossible."""
    import json

    from roofline.trace.profiler import profile_report

    machine = get_machine(str(write_profile(synthetic(), tmp_path / "p.toml")))
    for dur_us, impossible in ((4.0, False), (2.0, True)):
        ev = dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::silu", ts=0.0, dur=dur_us,
                  args={"Input Dims": [[64, 128]], "Input type": ["float"], "Concrete Inputs": [""],
                        "Input Strides": [[128, 1]], "External id": 1})
        (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [ev]}))
        (op,) = profile_report(tmp_path / "t.json", machine).ops
        assert op.roofline_s == pytest.approx(65_536 / 10e9)
        assert (op.problem is not None) == impossible, (dur_us, op.problem)


def test_attention_probe_curves_are_split_by_shape_and_shared_by_sdpa_kernels():
    """One SDPA kernel serves decode and prefill, whose corrections differ several-fold at the same
    bytes: an op's own curve is keyed by its shape (fit_class) too, and the meta trace's efficient
    attention (the probes' label) and the CPU's flash_attention_for_cpu (what a profile records)
    read the same one. A 4:1 GQA prefill (T = S = 128, 8 heads of 32 over 2: 16.8 MFLOP over 327 kB,
    ~205 FLOPs per 4-byte element) is a prefill; one query row against 256 cached is a decode."""
    from roofline.kernels import Kernel
    import numpy as np

    from roofline.measure.residuals import Residual, fit_op, lookup_residual

    prefill = Kernel("aten::_scaled_dot_product_flash_attention_for_cpu", 4 * 8 * 128 * 128 * 32,
                     4 * (8 * 128 * 32 * 2 + 2 * 2 * 128 * 32), "attention", "fp32")
    decode = Kernel("model.layers.0: aten::_scaled_dot_product_efficient_attention", 4 * 8 * 256 * 64,
                    4 * (2 * 8 * 64 + 2 * 8 * 256 * 64), "attention", "fp32")
    assert fit_op(prefill) == "aten::scaled_dot_product_attention (attention prefill)"
    assert fit_op(decode) == "aten::scaled_dot_product_attention (attention decode)"
    assert fit_op(Kernel("aten::add", 1, 8, "elementwise", "fp32")) == "aten::add"
    x = np.log([1e4, 1e7])
    curves = {("aten", "fp32", "aten::scaled_dot_product_attention (attention prefill)"): (x, np.log([2.0, 2.0])),
              ("aten", "fp32", "aten::scaled_dot_product_attention (attention decode)"): (x, np.log([5.0, 5.0]))}
    r = lookup_residual(curves, {}, {}, (1.0, 1.0), prefill)
    assert isinstance(r, Residual) and r.ratio == pytest.approx(2.0) and r.source == "aten"
    assert lookup_residual(curves, {}, {}, (1.0, 1.0), decode).ratio == pytest.approx(5.0)


def test_a_weight_reused_after_p_bytes_takes_the_next_pool_ups_cached_share(tmp_path):
    """Warm 10 us, streamed (twice the last cache) 30 us: a pool whose GEMM took 15 us avoided
    (30 - 15) / (30 - 10) = 75% of the streaming cost, one at 28 us 10%. A forward of 8 MiB reads
    as the 12 MiB pool (the smallest at least its bytes), one of 20 MiB as the 40 MiB pool, one past
    the largest pool streams; the blended time is 0.25 x 30 + 0.75 x 10 = 15 us."""
    from roofline.measure.measurements import cached_share

    mib = 2.0 ** 20
    shape = dict(n=(512.0,), k=(512.0,))
    flops = (2.0 * 512 * 512,)
    warm = Curve("gemm", "fp32", (1.0,), flops, (1e6,), (10e-6,), (9e-6,), (11e-6,), **shape)
    cold = Curve("gemm_cold", "fp32", (1.0,), flops, (1e6,), (30e-6,), (29e-6,), (31e-6,), **shape)
    pool = Curve("gemm_pool", "fp32", (1.0, 1.0), flops * 2, (1e6, 1e6), (15e-6, 28e-6), (15e-6, 28e-6), (15e-6, 28e-6),
                 n=(512.0, 512.0), k=(512.0, 512.0), pool=(12 * mib, 40 * mib))
    cal = dataclasses.replace(synthetic(), gemm=(warm, cold, pool), caches=(("l1", 48 * 1024.0), ("l2", 2 * mib), ("l3", 64 * mib)))
    assert cached_share(cal, "fp32", 8 * mib)[0] == pytest.approx(0.75)
    assert cached_share(cal, "fp32", 20 * mib)[0] == pytest.approx(0.10)
    assert cached_share(cal, "fp32", 41 * mib)[0] == 0.0
    assert cached_share(cal, "bf16", 8 * mib) is None
    _, back = load_profile(write_profile(cal, tmp_path / "p.toml"))
    assert back.gemm == cal.gemm  # the pools round-trip
    model = CalibratedModel(cal).for_forward(8 * mib)
    k = Kernel("aten::mm", 2.0 * 512 * 512, 1e6, "matmul", "fp32", shape=(1, 1, 512, 512))
    rate, _, basis = model.gemm_rate(k)
    streamed_rate = CalibratedModel(cal).for_forward(100 * mib).gemm_rate(k)[0]
    warm_rate = CalibratedModel(cal).gemm_rate(k)[0]
    # time blended 0.25 streamed + 0.75 warm (in body terms): between the two, nearer the warm
    assert 1 / rate == pytest.approx(0.25 / streamed_rate + 0.75 / warm_rate)
    assert warm_rate > rate > streamed_rate
    assert "75% of the streaming cost avoided" in basis


def test_probes_of_one_op_far_apart_are_said():
    """A reviewer's profile held the same rms_norm (256, 512) as 'attn norm' at 299 us and 'ffn norm'
    at 84 us, silently: two block probes of one kernel more than 1.5x apart are named (a class
    probe's variants, a transposed copy beside a clone, are not one op)."""
    from roofline.measure.measurements import Probe, disagreeing_probes, disagreement_text

    norm = dict(category="norm", dtype="fp32", flops=4 * 256 * 512, bytes=8 * 256 * 512, shape="rms_norm (256, 512)")
    copy = dict(category="copy", dtype="fp32", flops=0.0, bytes=8e6, shape="(1000, 1000)", op="aten::copy_")
    cal = dataclasses.replace(synthetic(), probes=(
        Probe("attn norm", measured_s=299e-6, low_s=290e-6, high_s=310e-6, **norm),
        Probe("ffn norm", measured_s=83.9e-6, low_s=80e-6, high_s=90e-6, **norm),
        Probe("transpose copy", measured_s=8e-3, low_s=7e-3, high_s=9e-3, **copy),
        Probe("clone", measured_s=0.8e-3, low_s=0.7e-3, high_s=0.9e-3, **copy)))
    (pair,) = disagreeing_probes(cal)
    assert [p.name for p in pair] == ["attn norm", "ffn norm"]
    assert "attn norm 299.0 us and ffn norm 83.9 us" in disagreement_text(cal)
    assert disagreement_text(dataclasses.replace(cal, probes=cal.probes[:1] + cal.probes[2:])) is None


def test_a_curve_with_no_points_is_one_error_and_no_numpy_warning(tmp_path, capsys):
    """A profile whose curve arrays are empty: numpy's max/median of nothing warned (RuntimeWarning)
    before the error; the reader refuses the curve by name first."""
    import warnings

    from roofline.cli import main

    text = write_profile(synthetic(), tmp_path / "p.toml").read_text()
    head, rest = text.split("[calibration.local-cpu.matmul.fp32]\n", 1)
    body, tail = rest.split("\n[", 1)
    empty = "\n".join(line.split("=")[0] + "= []" if line.split(" =")[0] in ("size", "flops", "bytes", "seconds", "low_s",
                                                                               "high_s") else line
                      for line in body.splitlines())
    path = tmp_path / "empty.toml"
    path.write_text(head + "[calibration.local-cpu.matmul.fp32]\n" + empty + "\n[" + tail)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["layer", "--machine", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "matmul curve at fp32 has no points" in err[0] and "empty.toml" in err[0]


def test_a_dtype_without_probes_borrows_another_dtypes_category_mean_widened():
    """A bf16 op whose fp32 twin is priced by its category's mean (its own block probes left out:
    on a busy machine a short norm probe fell under 1.5 launches) borrows that mean, as fp32 does,
    with the band widened 1.5 x 1.5 each way, and says whose it is; it went uncorrected before."""
    from roofline.measure.residuals import OUTSIDE_WIDENING

    cal = synthetic([Probe("ffn norm", "norm", "fp32", 1e3, 4e5, 3e-5, 2.8e-5, 3.5e-5, "x")])
    model = CalibratedModel(cal)
    fp = model.residual(Kernel("attn norm", 1e3, 4e5, "norm", "fp32"))
    bf = model.residual(Kernel("attn norm", 1e3, 2e5, "norm", "bf16"))
    assert fp.source == bf.source == "category" and bf.borrowed == "fp32" and not fp.borrowed
    assert bf.ratio == fp.ratio and bf.extrapolated
    assert bf.low == pytest.approx(fp.low / OUTSIDE_WIDENING**2) and bf.high == pytest.approx(fp.high * OUTSIDE_WIDENING**2)
