"""An engine's memory share as the engine sets it (serving.engine_memory, serving.engines, data/engines.toml).

SGLang's arithmetic is python/sglang/srt/server_args.py v0.5.9, ServerArgs._handle_gpu_memory_settings, in MiB
(gpu_mem: nvidia-smi's memory.total): chunked_prefill_size 2048 under 35 GiB (35,840 MiB), 4096 under 60 GiB, 8192
under 160 GiB (163,840 MiB), else 16384; cuda_graph_max_bs 24 under 35 GiB (80 from tp 4), 256 under 160 GiB
(512 from tp 4), else 512;
    reserved_mem = 512 + max(chunked_prefill_size, 2048) * 1.5 + cuda_graph_max_bs * 2 + tp_size * pp_size / 8 * 1024
    (+ cuda_graph_max_bs * dp_size * 3, and * 1.5 more where cuda_graph_max_bs > 300, with enable_dp_attention)
    reserved_mem = max(reserved_mem, 10 * 1024) if gpu_mem > 60 * 1024;  + 2 * 1024 with an EAGLE/MTP draft
    mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3)
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from roofline.cli import main
from roofline.machines import get_machine
from roofline.serving.engines import preset

B200_MIB = 183_359  # the b200 preset's driver figure: 183,359 MiB as nvidia-smi reports it (NVIDIA/TensorRT-LLM#10278)


@pytest.mark.parametrize("machine, tp, dp, reserved, fraction, chunk, graph_bs", [
    # H100 SXM, 81,559 MiB as nvidia-smi reports it (the preset's driver figure), under 90 GiB (92,160 MiB):
    # tp 1: 512 + 8192 x 1.5 (12,288) + 256 x 2 (512) + 1/8 x 1024 (128) = 13,440 MiB (above the 10,240 floor);
    #       (81,559 - 13,440) / 81,559 = 68,119 / 81,559 = 0.8352 -> 0.835
    ("h100-sxm", 1, 1, 13_440, 0.835, 8192, 256),
    # tp 8: 512 + 12,288 + 512 x 2 (1,024) + 8/8 x 1024 (1,024) = 14,848; 66,711 / 81,559 = 0.8179 -> 0.818
    ("h100-sxm", 8, 1, 14_848, 0.818, 8192, 512),
    # B200, 183,359 MiB, from 160 GiB (163,840 MiB): chunk 16,384, graph batch 512 at any tp
    # tp 1: 512 + 16,384 x 1.5 (24,576) + 1,024 + 128 = 26,240; 157,119 / 183,359 = 0.8569 -> 0.857
    ("b200", 1, 1, 26_240, 0.857, 16384, 512),
    # tp 4: 512 + 24,576 + 1,024 + 4/8 x 1024 (512) = 26,624; 156,735 / 183,359 = 0.8548 -> 0.855
    ("b200", 4, 1, 26_624, 0.855, 16384, 512),
    # tp 8 with DP attention over 8 ranks: 512 + 24,576 + 1,024 + 1,024 = 27,136, + 512 x 8 x 3 (12,288)
    # + 512 x 8 x 1.5 (6,144, as 512 > 300) = 45,568; 137,791 / 183,359 = 0.7515 -> 0.751
    ("b200", 8, 8, 45_568, 0.751, 16384, 512),
    # L4, 23,034 MiB, under 35 GiB: chunk 2048, graph batch 24 (tp 1): 512 + 3,072 + 48 + 128 = 3,760 (no floor:
    # the GPU is under 60 GiB); (23,034 - 3,760) / 23,034 = 19,274 / 23,034 = 0.8368 -> 0.837
    ("l4", 1, 1, 3_760, 0.837, 2048, 24),
])
def test_sglang_sizes_its_memory_share_from_the_gpu_and_the_layout(machine, tp, dp, reserved, fraction, chunk, graph_bs):
    p = preset("sglang", get_machine(machine), tp, attention_dp=dp)
    m = p.memory
    assert (m.basis, m.reserved_mib, m.fraction, m.chunked_prefill_size, m.cuda_graph_max_bs) == (
        "sized", reserved, fraction, chunk, graph_bs)
    e = p.engine()
    assert e.memory_fraction == fraction and e.max_tokens == chunk and e.memory_share == m
    assert (m.tensor_parallel, m.attention_dp) == (tp, dp)


def test_the_b200_share_reads_the_capacity_in_mib():
    m = preset("sglang", get_machine("b200")).memory
    assert m.gpu_mib == pytest.approx(B200_MIB, rel=1e-12)


def test_a_draft_model_reserves_two_gib_more():
    # H100 tp 1 with EAGLE/MTP drafts: 13,440 + 2,048 = 15,488 MiB; (81,559 - 15,488) / 81,559 = 0.8101 -> 0.81
    e = preset("sglang", get_machine("h100-sxm")).engine(spec_tokens=2, acceptance=0.7)
    assert e.memory_share.speculative and e.memory_share.reserved_mib == 15_488 and e.memory_fraction == 0.81


def test_without_the_gpus_memory_sglang_falls_back_to_its_fixed_share():
    # gpu_mem None: mem_fraction_static 0.88, chunked_prefill_size 4096, cuda_graph_max_bs 160
    bare = dataclasses.replace(get_machine("h100-sxm"), memory_bytes=None, usable_memory_bytes=None)
    p = preset("sglang", bare)
    assert (p.memory.fraction, p.memory.chunked_prefill_size, p.memory.gpu_mib) == (0.88, 4096, None)
    assert p.engine().max_tokens == 4096


def test_an_explicit_memory_fraction_wins_and_says_so():
    e = preset("sglang", get_machine("b200"), 4).engine(memory_fraction=0.93)
    assert e.memory_fraction == 0.93 and e.memory_share.basis == "given" and e.memory_share.fraction == 0.93
    assert "sized as the engine sizes it" not in e.label
    assert e.max_tokens == 16384  # the chunk is still SGLang's for the GPU


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_vllm_and_tensorrt_llm_keep_a_fixed_share(engine):
    # vLLM CacheConfig.gpu_memory_utilization 0.9; TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction 0.9:
    # neither depends on the GPU or the layout
    shares = {preset(engine, get_machine(m), tp).memory for m in ("h100-sxm", "b200") for tp in (1, 8)}
    assert {(s.fraction, s.basis) for s in shares} == {(0.9, "fixed")}


def test_the_rule_bands_rise():
    from roofline.serving.engines import _doc

    bands = _doc()["engines"]["sglang"]["memory_rule"]["bands"]
    edges = [b["below_mib"] for b in bands[:-1]]
    assert edges == sorted(edges) and "below_mib" not in bands[-1]


def test_the_cli_records_the_share_it_used(capsys):
    base = ["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--requests", "4",
            "--input-len", "128", "--output-len", "8", "--engine", "sglang", "--json"]
    assert main(base) == 0
    got = json.loads(capsys.readouterr().out)["engine"]
    assert got["memory_fraction"] == 0.835 and got["memory_share"]["basis"] == "sized"
    assert main([*base, "--memory-fraction", "0.8"]) == 0
    got = json.loads(capsys.readouterr().out)["engine"]
    assert got["memory_fraction"] == 0.8 and got["memory_share"]["basis"] == "given"


@pytest.mark.parametrize("bad", ["0", "1.5", "-0.2", "abc"])
def test_a_bad_memory_fraction_is_refused(bad, capsys):
    assert main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--concurrency", "2", "--requests", "4",
                 "--engine", "sglang", "--memory-fraction", bad]) == 2
    assert "memory-fraction" in capsys.readouterr().err


@pytest.mark.parametrize("asked, outside", [("0.5.9", False), ("0.5.6.post2", False), ("0.5.10.post1", True),
                                            ("0.5.1.post1", True)])
def test_a_version_the_rule_does_not_cover_is_said(asked, outside):
    # v0.5.6.post2 and v0.5.9 size the share by the same lines; v0.5.1.post1 reserves (9.5 + tp x pp / 2) GiB on an
    # H100 and v0.5.10 adds the piecewise CUDA graph's reserve: the share is v0.5.9's, and the words say so
    m = preset(f"sglang@{asked}", get_machine("h100-sxm")).memory
    assert m.version_asked == (asked if outside else "") and m.rule_versions == "0.5.6-0.5.9"
    assert (f"version {asked} asked" in m.words()) == outside


def test_on_an_amd_gpu_the_aiter_term_is_said_not_applied():
    # MI300X: SGLang v0.5.9 multiplies the share by 0.85 under its aiter backend for a model past 8k context, a term
    # the preset cannot apply without the model: the words say so
    m = preset("sglang", get_machine("mi300x")).memory
    assert m.left_out and "not applied" in m.words() and not preset("sglang", get_machine("h100-sxm")).memory.left_out


def test_the_tp_search_sizes_sglangs_share_for_each_replica(capsys):
    # H100 tp 1: 0.835 (above); tp 2: 512 + 12,288 + 512 + 2/8 x 1024 (256) = 13,568; 67,991 / 81,559 = 0.8336 -> 0.834
    assert main(["serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--input-len", "128", "--output-len", "8",
                 "--engine", "sglang", "--tp-search", "1,2", "--slo-tpot", "50ms", "--requests", "20", "--json"]) == 0
    sizes = json.loads(capsys.readouterr().out)["sizes"]
    assert [(s["gpus_per_replica"], s["memory_fraction"]) for s in sizes] == [(1, 0.835), (2, 0.834)]
