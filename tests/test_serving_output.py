"""What `roofline serving` prints and returns (issue 35): the KV cache as the replica's total and
per GPU, the same in the engine line, the notes and --json, under data-parallel attention too."""

import json

import pytest

from roofline.cli import main
from roofline.plan.step import StepCost, kv_cache_budget

MIXTRAL_KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # 32 layers x 8 kv heads x 128 x (K, V) x 2 B = 131,072


def test_attention_data_parallel_cache_is_the_replicas_over_all_its_gpus(capsys):
    """Mixtral 8x7B over 4 H100s, experts parallel, attention in 2 data-parallel groups of 2: each GPU
    caches in what 0.5 of its memory leaves after its weights and activations; the replica's cache is
    4 GPUs of that (the groups each hold their own sequences, a group's 2 GPUs half the kv heads each),
    not the 2 GPUs' the scheduler's pool counts. 30,000 + 64 tokens a sequence at 131,072 B a token
    (blocks of 16: 30,064 = 1,879 x 16) is 3.94 GB, so the replica holds total // 3.94e9 of them,
    under half of 256 users: the memory-bound note says that many, with the total."""
    step = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, attention_tp=2,
                    max_tokens=8192, max_seqs=256)
    _, parts = kv_cache_budget(step, 0.5)
    per_gpu = parts["capacity_bytes"] - parts["weights_bytes"] - parts["activations_bytes"]
    args = ["serving", "--model", "mixtral-8x7b", "--tp", "4", "--ep", "--attention-dp", "2", "--concurrency", "256",
            "--requests", "300", "--input-len", "30000", "--output-len", "64", "--memory-fraction", "0.5"]
    assert main(args + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kv_cache_gpus"] == 4 and d["attention_data_parallel"] == 2
    assert d["kv_cache_bytes_per_gpu"] == pytest.approx(per_gpu, rel=1e-9)
    assert d["kv_cache_bytes"] == pytest.approx(4 * per_gpu, rel=1e-9)
    holds = int(d["kv_cache_bytes"] // (30_064 * MIXTRAL_KV_BYTES_PER_TOKEN))
    assert 0 < holds < 128
    assert main(args) == 0
    out = capsys.readouterr().out
    engine = out.split("engine: ", 1)[1].split("\n", 1)[0]
    assert f"KV cache {per_gpu / 1e9:,.1f} GB per GPU ({4 * per_gpu / 1e9:,.1f} GB over the replica's 4 GPUs" in engine
    assert f"the {4 * per_gpu / 1e9:,.2f} GB KV cache holds {holds:,} sequence(s)" in out


def test_a_long_runs_text_holds_no_exponent(capsys):
    """300 requests of 1,024 + 32,768 tokens offered at 0.5/s to one H100 (Llama 3.1 8B): they arrive
    over 598 s and queue for thousands of seconds (overloaded, mostly ramp and drain), the figures a
    reviewer read as '4e+03 s' and '3.58e+04 s': times as the latency table writes them, rates whole
    from 1,000 (the JSON's flags say both notes are there)."""
    args = ["serving", "--model", "llama3.1-8b", "--engine", "vllm", "--rate", "0.5", "--requests", "300",
            "--input-len", "1024", "--output-len", "32768", "--seeds", "1"]
    assert main(args + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["overloaded"] and d["mostly_ramp_and_drain"] and d["e2e_p50_s"] > 1000
    assert not any("e+" in n for n in d["notes"])
    assert main(args) == 0
    assert "e+" not in capsys.readouterr().out


def test_rates_keep_their_figures_without_an_exponent():
    """format_number: 3 figures (4 for a search's rates, whose bisections differ in the 4th), whole
    numbers with separators from 100 (1,000 at 4 figures), where :.3g writes '1.64e+03'."""
    from roofline.units import format_number

    assert [format_number(v) for v in (0.0264, 12.345, 1638.4, 35_820.1)] == ["0.0264", "12.3", "1,638", "35,820"]
    assert [format_number(v, 4) for v in (0.5, 12.345, 999.6, 12_345.6)] == ["0.5", "12.35", "999.6", "12,346"]
