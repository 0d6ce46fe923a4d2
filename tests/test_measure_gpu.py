"""The GPU tier of roofline.measure: calibrate and check on CUDA in bf16 at small sizes. Skipped
where torch or a CUDA device is missing (the suite's skip guard lets only GPU tests skip)."""

import json

import pytest

torch = pytest.importorskip("torch", reason="the GPU tier needs torch with CUDA")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device (GPU tier)", allow_module_level=True)

from roofline.cli import main  # noqa: E402
from roofline.machines import get_machine  # noqa: E402
from roofline.measure import CalibrationPlan, calibrate, write_profile  # noqa: E402

SMALL = CalibrationPlan(
    matmul_dtypes=("bf16",),
    matmul_sizes=(256, 512, 1024, 2048, 4096),
    working_sets=tuple(2**20 * 2**i for i in range(10)),  # 1 MiB .. 512 MiB: past any L2
    probe_sizes=((1024, 512), (2048, 1024), (1024, 2048)),
    probe_dtype="bf16",
)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "cuda.toml"
    cal = calibrate("cuda", "bf16", 10.0, None, plan=SMALL, allow_drift=True)  # a GPU's clocks ramp: kept, recorded
    assert cal.reference is not None and cal.reference.kernel == "fp32 matmul 1024x1024x1024"
    write_profile(cal, path)
    return path


def test_gpu_profile_is_a_machine(profile):
    m = get_machine(str(profile))
    assert m.default_dtype == "bf16" and m.sm_count and m.levels[0].name == "l2"


def test_gpu_check_contract_and_calibrated_beats_the_roofline(profile, capsys):
    args = ["check", "--device", "cuda", "--machine", str(profile), "--d-model", "1536", "--tokens", "1024",
            "--budget", "2", "--json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["device"] == "cuda" and d["dtype"] == "bf16"
    for f in ("measured_s", "roofline_s", "seed_s", "calibrated_s", "calibrated_low_s", "calibrated_high_s"):
        assert d["block"][f] == pytest.approx(sum(op[f] for op in d["ops"]))
    cal = sorted(abs(op["calibrated_error"]) for op in d["ops"])
    roof = sorted(abs(op["roofline_error"]) for op in d["ops"])
    assert cal[len(cal) // 2] < roof[len(roof) // 2]
