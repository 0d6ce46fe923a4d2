"""Every model config aiconfigurator-core ships (issue 36's test set of what engines serve) loads, or is
refused by name as a family docs/models.md lists under "Not yet supported"; none crashes.

The package ships 117 files in model_configs/: 89 config.json files and 28 ModelOpt
hf_quant_config.json companions, which are read beside their config, never as a model.
"""

import json
import re
from pathlib import Path

import pytest

from roofline.errors import RooflineError
from roofline.model_sources import get_model

aic = pytest.importorskip("aiconfigurator_core")
CONFIGS = Path(aic.__file__).parent / "model_configs"
ROOT = Path(__file__).resolve().parents[1]
COMPANION = "_hf_quant_config.json"


def model_configs() -> list[Path]:
    return sorted(p for p in CONFIGS.glob("*_config.json") if not p.name.endswith(COMPANION))


def not_yet_supported_section() -> str:
    text = (ROOT / "docs" / "models.md").read_text()
    start = text.index("### Not yet supported")
    return text[start:text.index("\n### ", start + 1)]


def model_type(path: Path) -> str:
    raw = json.loads(path.read_text())
    return raw.get("model_type") or ""


def test_every_shipped_config_loads_or_is_refused_as_a_documented_family():
    configs = model_configs()
    assert len(configs) >= 80  # 89 in aiconfigurator-core 0.12.0: the glob found the set
    section = not_yet_supported_section()
    documented = set(re.findall(r"`([a-z0-9_.-]+)`", section))
    refused, loaded = {}, []
    for path in configs:
        try:
            model = get_model(str(path))
        except RooflineError as exc:
            refused[path.name] = (model_type(path), str(exc))
            continue
        loaded.append(path.name)
        assert model.n_layers > 0 and model.d_model > 0
    for name, (kind, message) in refused.items():
        assert "not yet supported" in message, f"{name}: refused without saying it is not yet supported: {message}"
        assert kind in documented, f"{name}: model_type {kind!r} is refused but not listed under Not yet supported"
    # at most 5 families refused (issue 36), each a bullet of the section
    bullets = [b for b in section.split("\n- ")[1:]]
    families = {next(i for i, b in enumerate(bullets) if f"`{kind}`" in b) for kind, _ in refused.values()}
    assert len(families) <= 5, sorted({kind for kind, _ in refused.values()})
    assert len(loaded) >= 75


def test_a_modelopt_companion_is_read_beside_its_config_and_refused_alone():
    """nvidia/Qwen3-235B-A22B-NVFP4 keeps its format in hf_quant_config.json (quant_algo NVFP4): the
    config beside it is priced at NVFP4's 4 bits and one fp8 scale per 16 (0.5625 B a weight, plus a
    few fp32 scalars per matrix); the companion alone is not a model."""
    config = CONFIGS / "nvidia--Qwen3-235B-A22B-NVFP4_config.json"
    if not config.exists():
        pytest.skip("this aiconfigurator-core ships no Qwen3-235B NVFP4")
    model = get_model(str(config))
    widths = {part: width for part, _, width in model.storage.parts}
    assert widths["experts"] == pytest.approx(0.5625, rel=1e-4)
    assert any("hf_quant_config.json" in n for n in model.notes)
    with pytest.raises(RooflineError, match="config.json"):
        get_model(str(CONFIGS / ("nvidia--Qwen3-235B-A22B-NVFP4" + COMPANION)))


def test_kimi_k25_counts_to_its_published_trillion():
    """moonshotai/Kimi-K2.5's card: "1T total parameters, 32B activated" (K2's language model; the
    vision tower apart). Its text model is K2's: 61 layers of MLA (7168 wide), 1 dense + 60 MoE of
    384 experts x 2048 with a shared expert, vocab 163,840."""
    model = get_model(str(CONFIGS / "moonshotai--Kimi-K2.5_config.json"))
    from roofline.transformer import count_params

    total = count_params(model)["total"]
    assert 1.0e12 <= total < 1.05e12  # "1T": 1,026,408,209,408


SERVED = ("Qwen--Qwen3.5-397B-A17B", "zai-org--GLM-5-FP8", "MiniMaxAI--MiniMax-M2.5", "deepseek-ai--DeepSeek-V3.2",
          "moonshotai--Kimi-K2.5")


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["h200", "b200"])
@pytest.mark.parametrize("name", SERVED)
def test_the_newest_families_serve_on_eight_gpus(name, machine, capsys):
    """Issue 36: Qwen3.5-397B-A17B, GLM-5 (its FP8 release: 744B in bf16 is 1.49 TB, more than 8 H200s
    hold), MiniMax-M2.5, DeepSeek-V3.2 and Kimi-K2.5 run under `roofline serving` at tensor parallel 8."""
    from roofline.cli import main

    code = main(["serving", "--model", str(CONFIGS / f"{name}_config.json"), "--machine", machine, "--tp", "8",
                 "--input-len", "1000", "--output-len", "100", "--requests", "40", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)
    assert d["output_tokens_per_s"] > 0 and d["tensor_parallel"] == 8


def test_skip_lists_keep_only_what_they_name():
    """Three published skip lists, read module by module (the second reader's findings):
    - nvidia/Gemma-4-26B-A4B-NVFP4 excludes `layers.N.mlp*`: in Gemma 4 that is the dense block beside the
      experts (`layers.N.experts`), so the experts stay NVFP4 (4 bits + an fp8 scale per 16: 0.5625 B a weight);
    - zai-org/GLM-5-FP8 excludes each layer's `self_attn.indexers_proj` (the indexer's weights projection) and
      the indexer's k_norm weight and bias: only that matrix stays bf16, the rest of the MLA is fp8;
    - nvidia/DeepSeek-V3.2-NVFP4 excludes q_a, q_b, kv_a, kv_b and the indexer, not o_proj: o_proj is NVFP4."""
    gemma = get_model(str(CONFIGS / "nvidia--Gemma-4-26B-A4B-NVFP4_config.json"))
    widths = {part: width for part, _, width in gemma.storage.parts}
    assert widths["experts"] == pytest.approx(0.5625, rel=1e-3) and "shared_experts" not in widths
    glm = get_model(str(CONFIGS / "zai-org--GLM-5-FP8_config.json"))
    kept = next(n for n in glm.notes if n.startswith("left at bf16"))
    assert "indexer.weights_proj of the attention" in kept and "wq_b" not in kept and "wk" not in kept
    ds = get_model(str(CONFIGS / "nvidia--DeepSeek-V3.2-NVFP4_config.json"))
    kept = next(n for n in ds.notes if n.startswith("left at bf16"))
    assert "kv_b_proj" in kept and "o_proj" not in kept
