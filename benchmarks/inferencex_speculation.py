"""Which of InferenceX's aggregated rows in aiconfigurator-core's silicon sample ran speculative decoding (MTP).

The sample states no speculation. InferenceX's configs do: its `.github/configs/nvidia-master.yaml` and
`amd-master.yaml` name, for each config, its engine image, GPU runner, precision and search space, and an entry of the
search space with `spec-decoding: mtp` ran MTP (DeepSeek-R1 FP8 on B200 with TensorRT-LLM: the config
`dsr1-fp8-b200-trt-mtp`, image release:1.2.0rc6.post3, "MTP=3 (or MTP=1 when DP_ATTN=true)", beside
`dsr1-fp8-b200-trt` on release:1.2.0rc6.post2). A row is matched by the image its source names to the configs of the
last commit on or before its measured date (same model, framework, precision, GPU, not multi-node), then by its input and
output length and its concurrency within an entry's range. Written out (benchmarks/inferencex_speculation.toml):

- "mtp": every matching entry runs MTP;
- "unknown": the row's image serves entries with and without MTP at its lengths and concurrency (which one measured
  it is not in the sample).

Rows no config matches, or whose matches all run without speculation, are not listed. silicon_validation.layout()
refuses the listed rows: a run with MTP is priced by its acceptance, which the sample does not give.

Run by hand with a clone of github.com/SemiAnalysisAI/InferenceX (no network here):

    python benchmarks/inferencex_speculation.py --inferencex PATH/TO/InferenceX [--out FILE]
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
from pathlib import Path

FRAMEWORKS = {"trt": "trtllm", "vllm": "vllm", "sglang": "sglang"}  # a config's framework -> the sample's backend
# the sample's checkpoint -> InferenceX's model-prefix (its DeepSeek-R1 runs appear under both DeepSeek names; Llama
# 3.1 70B ran before the configs had prefixes: none matched)
PREFIXES = {"deepseek-ai/DeepSeek-R1": "dsr1", "deepseek-ai/DeepSeek-V3": "dsr1", "Qwen/Qwen3.5-397B-A17B": "qwen3.5",
            "MiniMaxAI/MiniMax-M2.5": "minimaxm2.5", "moonshotai/Kimi-K2.5": "kimik2.5", "zhipuai/GLM-5": "glm5",
            "openai/gpt-oss-120b": "gptoss"}
OUT = Path(__file__).with_name("inferencex_speculation.toml")


def _image(text: str) -> str:
    return text.replace("#", "/").strip()  # the sample and the configs write the registry's separator either way


def config_reader(repo: Path):
    """(git, configs): a git runner in the clone ``repo``, and configs(date) -> (commit, {name: config}) of the last
    commit on or before ``date`` (its nvidia- and amd-master.yaml), cached."""
    import yaml

    def git(*args) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False).stdout

    @functools.cache
    def configs(date: str) -> tuple[str, dict]:
        commit = git("rev-list", "-1", f"--before={date}T23:59:59Z", "HEAD").strip()
        found = {}
        if not commit:  # no commit by then
            return "", found
        for name in ("nvidia-master.yaml", "amd-master.yaml"):
            found.update(yaml.safe_load(git("show", f"{commit}:.github/configs/{name}") or "{}") or {})
        return commit, found

    return git, configs


def date_and_image(r: dict):
    """A row's measured date and its image (`image=...` in the nightly exports, the last field of a database dump's
    source), or None."""
    source = r["silicon_data_source"]
    date, image = re.search(r"measured=(\d{4}-\d\d-\d\d)", source), re.search(r"(?:image=|; )([^;\s=]+/[^;\s=]+:[^;\s]+)\s*$", source)
    return (date.group(1), image.group(1)) if date and image else None


def matching(r: dict, image: str, every: dict) -> list[tuple[str, dict]]:
    """(config name, search-space entry) of the configs ``every`` that could have measured row ``r``: not multi-node,
    its image, framework, precision, model prefix and GPU runner, then its input and output length and its
    concurrency within the entry's range."""
    import silicon_validation as sv

    gpu, users = r["system"].split("_")[0], sv.concurrency(r)
    isl, osl = int(r["isl"]), int(r["osl"])
    hits = []
    for name, cfg in every.items():
        if not isinstance(cfg, dict) or cfg.get("multinode") or _image(str(cfg.get("image", ""))) != _image(image):
            continue
        if (FRAMEWORKS.get(cfg.get("framework")), cfg.get("precision"), cfg.get("model-prefix")) != (
                r["backend"], r["precision"], PREFIXES.get(r["model_path"])) or not str(cfg.get("runner", "")).startswith(gpu):
            continue
        for lengths in cfg.get("seq-len-configs", []):
            if (lengths.get("isl"), lengths.get("osl")) == (isl, osl):
                hits += [(name, s) for s in lengths.get("search-space", [])
                         if s.get("conc-start", 0) <= users <= s.get("conc-end", 1 << 30)]
    return hits


def classify(repo: Path, rows: list[dict]) -> dict:
    """{row id: (speculation, sorted config names, commit)} for the rows listed (see the module's docstring)."""
    _, configs = config_reader(repo)
    out = {}
    for r in rows:
        got = date_and_image(r)
        if got is None:
            continue
        commit, every = configs(got[0])
        hits = [(name, s.get("spec-decoding", "none")) for name, s in matching(r, got[1], every)]
        kinds = {k for _, k in hits}
        if "mtp" in kinds:
            out[r["id"]] = ("mtp" if kinds == {"mtp"} else "unknown", sorted({n for n, _ in hits}), commit[:9])
    return out


def _toml(v) -> str:
    return str(v) if isinstance(v, int) else "[" + ", ".join(_toml(x) for x in v) + "]" if isinstance(v, list) else f'"{v}"'


def write_rows(path: Path, header: list[str], rows: dict) -> None:
    """A table of rows (benchmarks/inferencex_*.toml): the comment lines ``header``, then `[rows]` and each row id's
    fields as an inline table, in id order."""
    lines = [f"# {h}" for h in header] + ["", "[rows]"]
    lines += [f'"{rid}" = {{ ' + ", ".join(f"{k} = {_toml(v)}" for k, v in fields.items()) + " }"
              for rid, fields in sorted(rows.items())]
    path.write_text("\n".join(lines) + "\n")


def sample_rows(keep=lambda r: True) -> list[dict]:
    """The silicon sample's aggregated rows InferenceX measured (and ``keep`` keeps)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import silicon_validation as sv
    from roofline.measured.tables import data_root

    return [r for r in sv.read_rows(data_root().parent / "silicon_sample.csv")
            if sv.is_inferencex(r) and r.get("mode") == "agg" and keep(r)]


def arguments(doc: str, out: Path, argv=None):
    """The hand-run tools' flags: --inferencex (a clone of InferenceX) and --out."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--inferencex", type=Path, required=True, help="a git clone of SemiAnalysisAI/InferenceX")
    ap.add_argument("--out", type=Path, default=out)
    return ap.parse_args(argv)


def write(found: dict, path: Path) -> None:
    write_rows(path, ["InferenceX's aggregated rows of aiconfigurator-core's silicon sample that ran MTP speculative decoding",
                      "(\"mtp\"), or whose image served configs with and without it at the row's lengths and concurrency",
                      "(\"unknown\"), with the configs matched and the InferenceX commit read; written by",
                      "benchmarks/inferencex_speculation.py (its docstring says how), read by silicon_validation.layout()."],
               {rid: {"speculation": kind, "configs": list(names), "commit": commit}
                for rid, (kind, names, commit) in found.items()})


def main(argv=None) -> int:
    args = arguments(__doc__, OUT, argv)
    rows = sample_rows()
    found = classify(args.inferencex, rows)
    write(found, args.out)
    kinds = [k for k, _, _ in found.values()]
    print(f"{len(rows):,} InferenceX aggregated rows: {kinds.count('mtp')} ran MTP, {kinds.count('unknown')} unknown; "
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
