"""`roofline diagnose`: seed 000 section 4's procedure and symptom table applied to a kernel and a
measured time; the impossible-measurement check."""

import json

import pytest

from roofline.cli import main
from roofline.diagnose import SYMPTOMS, advice, check_measured, diagnose, measurement_problem
from roofline.errors import RooflineError
from roofline.kernels import elementwise_kernel, layernorm_kernel, matmul_kernel, naive_attention_kernel


def findings(d):
    return {f.symptom.symptom: f.applies for f in d.findings}


def test_below_the_roofline_is_impossible():
    assert measurement_problem(10e-6, 10e-6) is None and measurement_problem(10e-6, 11e-6) is None
    msg = measurement_problem(10e-6, 1e-6)
    assert msg.startswith("impossible") and "10.00x" in msg
    for cause in ("units", "FLOP convention", "sparse"):
        assert cause in msg
    # 33.6 MB of a batch-1 matvec fit in the H100's 50 MB L2: a warm cache is a fourth explanation
    assert "L2" in check_measured(matmul_kernel(1, 4096, 4096), "h100-sxm", 1e-6)
    assert "L2" not in check_measured(matmul_kernel(8192, 8192, 8192), "h100-sxm", 1e-6)
    # a zero time (a profiler event of dur 0) is impossible too, and said without dividing by it;
    # no unit or cache takes a kernel to no time, so the message names the timer, not those
    zero = measurement_problem(10e-6, 0.0)
    assert "no time at all" in zero and "timer's resolution" in zero and "units" not in zero


def test_memory_bound_elementwise():
    # y = x + 1 on 1e9 bf16 elements: I = 0.25 (seed 000), bound = 4e9 B / 3.35e12 B/s = 1.194 ms
    d = diagnose(elementwise_kernel(1e9), "h100-sxm", 1.5e-3)
    assert d.intensity == 0.25 and d.bound == "memory" and d.problem is None
    assert d.roofline_s == pytest.approx(4e9 / 3.35e12)
    assert d.speed_of_light == pytest.approx(4e9 / 3.35e12 / 1.5e-3)
    assert d.gap_s == pytest.approx(1.5e-3 - 4e9 / 3.35e12) and d.beat_bound_s == 0
    assert any("fewer FLOPs" in c for c in d.cannot_help)  # left of the ridge FLOPs do not matter
    assert any("fuse" in h for h in d.helps)
    assert findings(d)["Tensor-core utilisation ~0, high HBM traffic"] is True
    assert findings(d)["Big GEMM at 40 % of peak"] is False
    assert d.steps[0].startswith("1. I = 0.25 FLOP/B against the ridge 295: left of it")


def test_compute_bound_gemm_with_a_partial_wave():
    # 7 x 19 = 133 tiles on 132 SMs, measured at 80 us against a 36 us roofline
    d = diagnose(matmul_kernel(896, 2432, 8192), "h100-sxm", 80e-6, shape=(896, 2432, 8192))
    assert d.bound == "compute" and d.speed_of_light < 0.6
    f = findings(d)
    assert f["Big GEMM at 40 % of peak"] is True
    assert f["Throughput drops at one specific batch size"] is True
    assert any("fewer bytes" in c for c in d.cannot_help)
    assert "133 tiles in 2 waves" in d.steps[-1]


def test_seed_exercise_1_at_the_roof():
    # M = 512: I about 410 and 17 us on the H100 roofline (seed 000 exercise 1); measured 17.5 us
    d = diagnose(matmul_kernel(512, 4096, 4096), "h100-sxm", 17.5e-6)
    assert round(d.intensity) == 410 and d.roofline_s == pytest.approx(17.4e-6, rel=0.01)
    assert d.speed_of_light > 0.95 and "at the roof" in d.steps[1]


def test_launch_sized_gap_and_naive_attention():
    d = diagnose(layernorm_kernel(64, 4096), "h100-sxm", 4e-6)  # a 0.3 us kernel that takes 4 us
    assert findings(d)["Decode step much slower than wP/BW"] is True and "launch" in d.steps[1]
    d = diagnose(naive_attention_kernel(4096, 128), "h100-sxm", 60e-6)  # 41 us bound (seed 000)
    assert d.roofline_s == pytest.approx(41e-6, rel=0.02)
    assert findings(d)["Attention dominates at long context"] is True
    assert any("FlashAttention" in h for h in d.helps)


def test_whole_step_symptoms_are_not_guessed():
    d = diagnose(elementwise_kernel(1e6), "h100-sxm", 1e-3)
    f = findings(d)
    assert f["Host->device copy dominates"] is None and f["Multi-GPU step slow, kernels fine"] is None
    assert len(d.findings) == len(SYMPTOMS) == 7


def test_impossible_measurement_in_the_diagnosis():
    d = diagnose(layernorm_kernel(4096, 4096), "h100-sxm", 5e-6)  # bound 20 us
    assert d.problem and d.speed_of_light > 1 and "below the bound" in d.steps[1]
    assert "impossible" in advice(d.bound, "norm", d.speed_of_light)


def test_diagnosis_renders():
    d = diagnose(matmul_kernel(8192, 4096, 4096), "h100-sxm", 400e-6)
    j = json.loads(d.to_json())
    assert j["bound"] == "compute" and len(j["findings"]) == 7 and j["measured_s"] == 400e-6
    text = d.to_table()
    # I = 2MNK / (2 (MK + KN + MN)) = 8192 x 4096 x 4096 / (8192 x 4096 + 4096 x 4096 + 8192 x 4096)
    #   = 4096 x 8192 / 20480 = 1,638.4 FLOP/byte
    assert "Procedure (seed section 4)" in text and "Symptom table" in text and "1,638.4" in text
    with pytest.raises(RooflineError):
        diagnose(matmul_kernel(1, 1, 1), "h100-sxm", 0.0)


def test_cli_diagnose(capsys):
    assert main(["diagnose", "matmul", "M=8192", "N=4096", "K=4096", "--measured", "400us"]) == 0
    out = capsys.readouterr().out
    # I = 1,638.4 FLOP/B is right of the H100's ridge 295: compute-bound, so the roofline time is
    # 2 x 8192 x 4096 x 4096 FLOPs / 989 TFLOP/s = 274,877,906,944 / 989e12 = 277.9 us; measured
    # 400 us: speed of light = 277.9 / 400 = 69.5%
    sol = 2 * 8192 * 4096 * 4096 / 989e12 / 400e-6
    assert f"{sol:.1%}" == "69.5%" and f"{sol:.1%} of speed of light" in out and "compute-bound" in out
    assert main(["diagnose", "--flops", "1e9", "--bytes", "4e9", "--measured", "1.5ms", "--json",
                 "--category", "elementwise"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["bound"] == "memory" and d["intensity"] == 0.25
    assert main(["diagnose", "layernorm", "n_tokens=4096", "d=4096", "--measured", "5us"]) == 0
    assert "impossible" in capsys.readouterr().out


@pytest.mark.parametrize("argv,needle", [
    (["--measured", "1us"], "give a kernel"),
    (["--flops", "1e9", "--measured", "1us"], "give a kernel"),
    (["matmul", "M=1", "--measured", "1us"], "its parameters are"),
    (["matmul", "M=1", "N=1", "K=1", "--flops", "1", "--measured", "1us"], "not both"),
    (["matmul", "M=1", "N=1", "K=1", "--measured", "soon"], "--measured"),
    (["nosuch", "--measured", "1us"], "unknown kernel"),
])
def test_cli_diagnose_bad_input(capsys, argv, needle):
    assert main(["diagnose", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_a_measurement_that_beats_the_bound_lost_no_time_and_says_by_how_much():
    """gap_s was negative (-0.194 ms) when the measurement beat the prediction: time lost is never
    below 0, and beat_bound_s says by how much the bound was beaten (the bound is not a bound there)."""
    # bound 4e9 B / 3.35e12 B/s = 1.194 ms, measured 1.0 ms: beaten by 0.194 ms
    d = diagnose(elementwise_kernel(1e9), "h100-sxm", 1.0e-3)
    assert d.gap_s == 0 and d.beat_bound_s == pytest.approx(4e9 / 3.35e12 - 1.0e-3) and d.problem
    assert json.loads(d.to_json())["gap_s"] == 0 and json.loads(d.to_json())["beat_bound_s"] > 0


def test_nsight_and_profile_rows_clamp_lost_time_at_zero():
    from roofline.trace.nsight import MeasuredKernel
    from roofline.trace.profiler import ProfiledOp

    # roofline 2 us, measured 1 us: beaten by 1 us, nothing lost
    k = MeasuredKernel("0", "k", "bf16", 1e6, 1e6, "memory", 2e-6, 1e-6)
    op = ProfiledOp("aten::add", "x", "bf16", "elementwise", 1, 1e6, 1e6, "memory", 2e-6, 1e-6, "device")
    for row in (k, op):
        assert row.lost_s == 0 and row.beat_bound_s == pytest.approx(1e-6)
        assert row.to_dict()["lost_s"] == 0 and row.to_dict()["beat_bound_s"] == pytest.approx(1e-6)
