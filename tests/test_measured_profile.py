"""A user's own calibration profile as measured kernels (issue 34, item 2): `--kernels PROFILE.toml`
reads the profile's GEMMs and attention probes into the measured families' own tables, so an
engine's tables and a calibration are interchangeable inputs. The profile here is synthetic, its
times chosen by hand, so every expected time below is worked out in the comments. Needs no extra:
a profile is read without aiconfigurator-core or pyarrow."""

from __future__ import annotations

import json

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.kernels import FUSED_ATTENTION, Kernel
from roofline.measure.machine_file import write_profile
from roofline.measure.measurements import Calibration, Curve, Probe

LAUNCH = 4e-6
MIB, GIB = 2.0**20, 2.0**30
DRAM = 2e12  # B/s: the copy sweep's best past twice the L2
PEAK = 6e14  # bf16 FLOP/s: the square sweep's best (n = 8192)


def _curve(kind, sizes, flops, bytes_, bodies, **kw):
    secs = tuple(b + LAUNCH for b in bodies)
    return Curve(kind, kw.pop("dtype", "bf16"), tuple(map(float, sizes)), tuple(map(float, flops)),
                 tuple(map(float, bytes_)), secs, tuple(0.95 * s for s in secs), tuple(1.1 * s for s in secs), **kw)


# skinny-M GEMMs with their weights streamed: M and N = K, and each one's body by hand
GEMMS = {(1, 4096): 20e-6, (16, 4096): 22e-6, (1, 8192): 70e-6, (16, 8192): 75e-6}
SQUARE = {2048: 2 * 2048**3 / 4e14, 8192: 2 * 8192**3 / PEAK}  # bodies at 400 and 600 TFLOP/s
ATTENTION = {("decode", 1, 2048): 12e-6, ("decode", 1, 16384): 45e-6, ("prefill", 2048, 2048): 90e-6}


def calibration() -> Calibration:
    matmul = _curve("matmul", SQUARE, [2.0 * n**3 for n in SQUARE], [6.0 * n * n for n in SQUARE], SQUARE.values())
    ms, nk = [m for m, _ in GEMMS], [x for _, x in GEMMS]
    gemm = _curve("gemm_cold", ms, [2.0 * m * x * x for m, x in GEMMS], [2.0 * (2 * m * x + x * x) for m, x in GEMMS],
                  GEMMS.values(), n=tuple(map(float, nk)), k=tuple(map(float, nk)))
    ws = (8 * MIB, 1 * GIB)
    copy = _curve("copy", ws, (0, 0), ws, (ws[0] / 4e12, ws[1] / DRAM))
    probes = tuple(Probe("sdpa", "attention", "bf16", 1.0, 1.0, body + LAUNCH, body + LAUNCH, body + LAUNCH,
                         f"{phase} attention T {t} S {s} 8x64 bf16") for (phase, t, s), body in ATTENTION.items())
    return Calibration(key="my-gpu", device="cuda", device_name="Test GPU", date="2026-12-06 00:00 UTC",
                       torch_version="x", threads=1, budget_s=1.0, default_dtype="bf16", launch_s=LAUNCH,
                       launch_low_s=LAUNCH, launch_high_s=LAUNCH, caches=(("L2", 50 * MIB),), matmul=(matmul,),
                       bandwidth=(copy,), gemm=(gemm,), probes=probes, vendor="Test", memory_bytes=80 * GIB)


@pytest.fixture
def profile(tmp_path):
    return str(write_profile(calibration(), tmp_path / "my-gpu.toml"))


def _model(profile):
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels

    machine = get_machine(profile)
    return MeasuredKernels.for_machine(machine, profile, launch_overhead_s=LAUNCH), machine


def _matmul(m, n, k):
    return Kernel("proj", 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n), "matmul", "bf16", shape=(1, m, n, k))


def test_a_measured_gemm_comes_back_at_its_body_plus_the_launch(profile):
    """M = 16 against 8192 x 8192: the profile's body is 75 us, so launch + 75 us = 79 us; its
    roofline on the profile's machine is max(2 x 16 x 8192^2 / 6e14 = 3.6 us, 2 (2 x 16 x 8192 +
    8192^2) B / 2e12 B/s = 67.4 us) = 67.4 us, 90% of the speed of light."""
    model, machine = _model(profile)
    p = model.predict_op(_matmul(16, 8192, 8192), machine)
    assert p.time_s == pytest.approx(LAUNCH + 75e-6)
    assert p.basis == "measured" and "roofline calibrate 2026-12-06" in p.source and "streamed" in p.source
    assert p.roofline_s == pytest.approx(2 * (2 * 16 * 8192 + 8192**2) / DRAM)
    # the square sweep is on the same grid: 2048^3 at its 400 TFLOP/s
    q = model.predict_op(_matmul(2048, 2048, 2048), machine)
    assert q.time_s == pytest.approx(LAUNCH + 2 * 2048**3 / 4e14) and q.basis == "measured"


def test_the_profile_fills_the_same_table_an_engine_does(profile):
    """One representation: the profile's GEMMs are a gemm.GemmTable, its attention an
    attention.AttentionTable, interpolated by the same LogGrid."""
    from roofline.measured.attention import AttentionTable, attention_table
    from roofline.measured.gemm import GemmTable, gemm_table

    model, machine = _model(profile)
    assert isinstance(gemm_table(machine.key, profile, "bf16"), GemmTable)
    assert isinstance(attention_table(machine.key, profile, True), AttentionTable)
    # between measured M = 1 and 16 at N = K = 4096, the efficiency is interpolated in log M
    e = gemm_table(machine.key, profile, "bf16").estimate(4, 4096, 4096)
    assert e.basis == "interpolated" and e.points == 2


def test_attention_probes_price_a_fused_attention_at_their_site(profile):
    """Decode, one sequence of 8 heads of 64 over 2,048 cached keys: the probe's body, 12 us, plus
    the launch. A head dim the probes did not measure (128) keeps the cost model, saying why."""
    model, machine = _model(profile)
    shape = (FUSED_ATTENTION, 1, 1, 2048, 8, 8, 64, 64, 0, False, True, "bf16")
    k = Kernel("attention", 4.0 * 8 * 2048 * 64, 2.0 * (2 * 8 * 64 + 2 * 8 * 2048 * 64), "attention", "bf16",
               shape=shape)
    p = model.predict_op(k, machine)
    assert p.time_s == pytest.approx(LAUNCH + 12e-6) and p.basis == "measured"
    other = (FUSED_ATTENTION, 1, 1, 2048, 32, 8, 128, 128, 0, False, True, "bf16")
    q = model.predict_op(Kernel("attention", 1e9, 1e7, "attention", "bf16", shape=other), machine)
    assert q.basis == "cost model" and "head dims: 64" in q.source


def test_a_profile_of_another_machine_or_no_profile_is_refused_by_name(profile, tmp_path):
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels

    with pytest.raises(RooflineError, match="measured on Test GPU.*give --machine"):
        MeasuredKernels.for_machine(get_machine("h100-sxm"), profile)
    with pytest.raises(RooflineError, match="no such profile file"):
        MeasuredKernels.for_machine(get_machine("h100-sxm"), str(tmp_path / "missing.toml"))


def test_the_cli_prices_a_layers_matmuls_from_the_profile(profile, capsys):
    """`roofline layer --machine P --kernels P --phase decode`: every projection of a Llama 3 8B
    decode step at batch 16 (M = 16) is priced from the profile's GEMMs; the MoE/all-reduce
    families are absent, and the attention (head dim 128) keeps the cost model with its reason."""
    rc = main(["layer", "--machine", profile, "--kernels", profile, "--phase", "decode", "--batch", "16",
               "--tokens", "2048", "--attention", "flash", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    ops = {o["name"]: o for o in out["ops"]}
    mm = [o for o in out["ops"] if o["family"] == "gemm"]
    assert len(mm) == 4 and all(o["basis"] in ("measured", "interpolated", "extrapolated") for o in mm)
    assert all("roofline calibrate" in o["source"] for o in mm)
    # the out projection, 16 x 4096 by 4096 x 4096, is a measured point: launch 4 us + its 22 us
    assert ops["out proj"]["basis"] == "measured" and ops["out proj"]["time_s"] == pytest.approx(LAUNCH + 22e-6)
    attn = [o for o in ops.values() if o["family"] == "attention"]
    assert attn and all(o["basis"] == "cost model" and "head dims: 64" in o["source"] for o in attn)


def test_a_plain_machine_file_as_kernels_is_refused(tmp_path, capsys):
    """A machine file with no [calibration]: the profile's text with that table cut off."""
    text = (tmp_path / "full.toml")
    write_profile(calibration(), text)
    plain = tmp_path / "plain.toml"
    plain.write_text(text.read_text().split("[calibration.")[0])
    rc = main(["layer", "--machine", str(plain), "--kernels", str(plain)])
    err = capsys.readouterr().err
    assert rc == 2 and "no [calibration]" in err and "Traceback" not in err
