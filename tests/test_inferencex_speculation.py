"""InferenceX's runs with MTP speculative decoding, told apart by the configs that ran them
(benchmarks/inferencex_speculation.py), and refused by the validation (silicon_validation.layout)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import inferencex_speculation as ixs  # noqa: E402
import silicon_validation as sv  # noqa: E402

# InferenceX's .github/configs/nvidia-master.yaml at 95877f5bf (2026-02-05), cut to the two DeepSeek-R1 FP8 B200
# TensorRT-LLM configs: the plain one on release:1.2.0rc6.post2, the MTP one ("MTP=3 (or MTP=1 when DP_ATTN=true)")
# on release:1.2.0rc6.post3
MASTER = """
dsr1-fp8-b200-trt:
  image: nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2
  model-prefix: dsr1
  runner: b200-trt
  precision: fp8
  framework: trt
  multinode: false
  seq-len-configs:
  - isl: 1024
    osl: 8192
    search-space:
    - { tp: 8, ep: 8, dp-attn: true, conc-start: 256, conc-end: 256}
    - { tp: 8, ep: 1, conc-start: 4, conc-end: 128 }
dsr1-fp8-b200-trt-mtp:
  image: nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3
  model-prefix: dsr1
  runner: b200-trt
  precision: fp8
  framework: trt
  multinode: false
  seq-len-configs:
  - isl: 1024
    osl: 8192
    search-space:
    - { tp: 8, ep: 1, conc-start: 4, conc-end: 64, spec-decoding: mtp }
    - { tp: 8, ep: 8, dp-attn: true, conc-start: 128, conc-end: 256, spec-decoding: mtp }
"""


def _row(rid, image, users, date="2026-02-05"):
    return {"id": rid, "silicon_data_source": f"source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency={users}; "
            f"measured={date}T19:55:05Z; wip=False; image={image}", "backend": "trtllm", "model_path": "deepseek-ai/DeepSeek-R1",
            "system": "b200_sxm", "precision": "fp8", "isl": "1024", "osl": "8192", "tp_size": "8", "pp_size": "1", "attention_dp_size": "1",
            "moe_tp_size": "1", "moe_ep_size": "1", "batch_size": str(users)}


def test_a_row_is_matched_to_its_config_by_its_image(tmp_path):
    yaml = pytest.importorskip("yaml")
    assert yaml
    repo = tmp_path / "InferenceX"
    (repo / ".github" / "configs").mkdir(parents=True)
    (repo / ".github" / "configs" / "nvidia-master.yaml").write_text(MASTER)
    env = {"GIT_AUTHOR_DATE": "2026-02-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-02-01T00:00:00Z", "HOME": str(tmp_path)}
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True, env={**env, "PATH": "/usr/bin:/bin"})
    rows = [_row("mtp", "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3", 4),
            _row("plain", "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2", 4),
            _row("mtp past its range", "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3", 512),
            _row("before the configs", "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3", 4, date="2026-01-01")]
    found = ixs.classify(repo, rows)
    assert set(found) == {"mtp"}
    assert found["mtp"][:2] == ("mtp", ["dsr1-fp8-b200-trt-mtp"])
    out = tmp_path / "spec.toml"
    ixs.write(found, out)
    import tomllib

    assert tomllib.loads(out.read_text())["rows"]["mtp"]["speculation"] == "mtp"


def test_the_validation_refuses_the_runs_that_ran_mtp_by_name():
    # measured 2026-02-05 on release:1.2.0rc6.post3 (the MTP config's image): TPOT 4.37 ms at 4 users, 1k/8k, where the
    # plain config's run of 2026-01-29 (rc6.post2) measured 10.1 ms: as MTP, not as the plain engine
    mtp = _row("2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x8192_c4_tp8_ep1_68",
               "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3", 4)
    why = sv.layout(mtp)
    assert isinstance(why, str) and "MTP speculative decoding" in why and "dsr1-fp8-b200-trt-mtp" in why
    plain = _row("dsr1_b200_trtllm_fp8_agg_1024x8192_c4_cfg75", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post2", 4)
    assert isinstance(sv.layout(plain), tuple)


def test_the_table_lists_only_rows_of_the_sample_and_known_kinds():
    entries = sv._speculated()
    assert entries and {e["speculation"] for e in entries.values()} <= {"mtp", "unknown"}
    assert all(any(c.endswith("-mtp") for c in e["configs"]) for e in entries.values())
