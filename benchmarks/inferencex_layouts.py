"""How InferenceX's vLLM runs of aiconfigurator-core's silicon sample laid out their GPUs, from their launch scripts.

The sample's tp_size, attention_dp_size and moe_ep_size for InferenceX's vLLM rows are not the server's: the same
InferenceX config (MiniMax-M2.5 FP8 on 4 B200s, `{ tp: 4, ep: 4 }`) appears once as tp 4 with moe_ep 4 and once as
tp 4 x attention_dp 4 with moe_ep 16 (16 GPUs, on an 8-GPU node), its `ep` read as data parallelism and multiplied in.
The server ran what the script passed: `vllm serve --tensor-parallel-size=$TP` on InferenceX's `tp` GPUs, with
`--enable-expert-parallel` where the script adds it (always, as `[ "$EP_SIZE" -ge 1 ]` does, only where the config's
`ep` is over 1, or never: Kimi-K2.5's and gpt-oss-120b's scripts split the experts tensor-parallel), and data-parallel
attention (`--tensor-parallel-size=1 --data-parallel-size=$TP --enable-expert-parallel`) only where a script takes it
from the config's `dp-attn` (MiniMax-M2.5's FP4 scripts). A row is matched as benchmarks/inferencex_speculation.py
matches it (its image, lengths and users to the configs of the last commit on or before its measured date) to the
entries of its tensor parallelism; its script is the one benchmarks/inferencex_deployments.toml names. Written out
(benchmarks/inferencex_layouts.toml), for every InferenceX vLLM aggregated row whose script was found:

- "tp": tensor-parallel over `tp` GPUs, the experts split tensor-parallel too;
- "tp_ep": tensor-parallel attention over `tp` GPUs, the experts split whole over the same GPUs (one group);
- "dp_ep": `tp` data-parallel attention ranks of one GPU each, the experts split over them;
- "unknown": the script takes dp-attn from the config and the configs matched run it both ways (or no config
  matched): which one measured the row is not in the sample.

silicon_validation.layout() reads it for InferenceX's vLLM rows (and refuses the "unknown" ones by name).

Run by hand with a clone of github.com/SemiAnalysisAI/InferenceX (no network here):

    python benchmarks/inferencex_layouts.py --inferencex PATH/TO/InferenceX [--out FILE]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

OUT = Path(__file__).with_name("inferencex_layouts.toml")
LAYOUTS = ("tp", "tp_ep", "dp_ep", "unknown")


def expert_rule(script: str) -> str:
    """How a vLLM launch script turns expert parallelism on: "always" (the flag outside a condition, or under
    `-ge 1`, which every EP_SIZE meets), "above_1" (under `[ "$EP_SIZE" -gt 1 ]`) or "never"."""
    if "--enable-expert-parallel" not in script.replace("--data-parallel-size=$TP --enable-expert-parallel", ""):
        return "never"
    if re.search(r'EP_SIZE"?\s*-gt\s*1', script):
        return "above_1"
    return "always"


def dp_rule(script: str) -> bool:
    """Whether the script runs data-parallel attention when the config says dp-attn (MiniMax-M2.5's FP4 scripts:
    `if [ "${DP_ATTENTION}" = "true" ]; then PARALLEL_ARGS="--tensor-parallel-size=1 --data-parallel-size=$TP ..."`)."""
    return "DP_ATTENTION" in script and "--data-parallel-size" in script


def decide(script: str, ep_over_1: bool, dp_attn: set) -> str:
    """A row's layout from its script and the dp-attn values of the config entries it matched (see the docstring)."""
    if dp_rule(script):
        if dp_attn == {True}:
            return "dp_ep"
        if dp_attn != {False}:
            return "unknown"
    rule = expert_rule(script)
    return "tp_ep" if rule == "always" or (rule == "above_1" and ep_over_1) else "tp"


def classify(repo: Path, rows: list[dict]) -> dict:
    """{row id: (layout, gpus, sorted config names, script, commit)}."""
    import functools

    import inferencex_speculation as ix
    import silicon_validation as sv

    git, configs = ix.config_reader(repo)

    @functools.cache
    def script(commit: str, paths: tuple) -> str:
        return "".join(git("show", f"{commit}:{p}") for p in paths)

    out = {}
    for r in rows:
        dep, got = sv.inferencex_deployment(r), ix.date_and_image(r)
        if dep is None or got is None:
            continue
        text = script(dep["commit"], tuple(dep["scripts"]))
        if not text:
            continue
        tp, ep_over_1 = int(r["tp_size"] or 1), int(r["moe_ep_size"] or 1) > 1
        hits = [(name, s) for name, s in ix.matching(r, got[1], configs(got[0])[1])
                if s.get("tp") == tp and (int(s.get("ep", 1)) > 1) == ep_over_1]
        out[r["id"]] = (decide(text, ep_over_1, {bool(s.get("dp-attn", False)) for _, s in hits}), tp,
                        sorted({n for n, _ in hits}), ", ".join(dep["scripts"]), dep["commit"][:9])
    return out


def write(found: dict, path: Path) -> None:
    import inferencex_speculation as ix

    ix.write_rows(path, ["How InferenceX's vLLM aggregated rows of aiconfigurator-core's silicon sample laid out their GPUs: \"tp\",",
                         "\"tp_ep\" (the experts split whole over the tensor-parallel GPUs), \"dp_ep\" (data-parallel attention, one GPU",
                         "a rank) or \"unknown\", on `gpus` GPUs, from the launch script at `commit` and the InferenceX configs the row",
                         "matched; written by benchmarks/inferencex_layouts.py (its docstring says how), read by",
                         "silicon_validation.layout()."],
                  {rid: {"layout": kind, "gpus": gpus, "configs": list(names), "script": scripts, "commit": commit}
                   for rid, (kind, gpus, names, scripts, commit) in found.items()})


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    import inferencex_speculation as ix

    args = ix.arguments(__doc__, OUT, argv)
    rows = ix.sample_rows(lambda r: r["backend"] == "vllm")
    found = classify(args.inferencex, rows)
    write(found, args.out)
    kinds = [k for k, *_ in found.values()]
    print(f"{len(rows):,} InferenceX vLLM aggregated rows, {len(found):,} with their script: "
          + ", ".join(f"{kinds.count(k)} {k}" for k in LAYOUTS) + f"; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
