"""Parallel serving replicas: tensor-parallel all-reduces, expert parallelism (its share of the
experts, all-to-alls within and across nodes, the busiest GPU), pipeline stages as virtual engines."""

import json
import math

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.serving import closed_requests, simulate
from roofline.plan.step import StepCost

from serving_common import EAGER  # noqa: E402 (tests/ is on sys.path)


def test_tensor_parallel_splits_the_weights_and_adds_all_reduces():
    """TP 2 over NVLink: each GPU reads half the weights and KV per step and adds two all-reduces
    per layer; the launches (~290 x 3 us = 0.9 ms of the 6.6 ms) are not split, and the 64
    all-reduces each pay a launch and 6 us of latency (0.6 ms): between half and 0.7 of one GPU's."""
    one = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER)
    two = StepCost("llama3-8b", "h100-sxm", tensor_parallel=2, cost_model=EAGER)
    names = [o.name for o in two.ops([1024] * 8)]
    assert any("all-reduce" in n for n in names)
    assert 0.5 * one.seconds([1024] * 8) < two.seconds([1024] * 8) < 0.7 * one.seconds([1024] * 8)


def test_mla_and_moe_models_reduce_to_closed_form():
    """DeepSeek-V3 (MLA decode absorbed, MoE) on 8 H200s: the decode ops are linear in the
    sequences and their contexts (checked at a point the fit did not use), so it builds; a mixed
    step costs more than its decode part alone."""
    s = StepCost("deepseek-v3", "h200", tensor_parallel=8, max_tokens=4096, max_seqs=64)
    assert s.seconds([2048] * 16, [(1024, 0)]) > s.seconds([2048] * 16) > 0


def test_expert_parallelism_holds_a_share_of_the_experts_and_pays_two_all_to_alls():
    """Mixtral 8x7B (46,702,792,704 parameters, 45,097,156,608 of them routed experts) over 4 GPUs
    with data-parallel attention: each GPU holds everything but 3/4 of the experts,
    2 x (46,702,792,704 - 3/4 x 45,097,156,608) = 25,759,850,496 B in bf16. A step of 64 tokens
    sends each GPU's 16 tokens' 2 hidden rows (4,096 x 2 B), 3/4 of them to other GPUs, at each
    of 32 MoE layers, each way: 16 x 2 x 4,096 x 2 x 3/4 x 32 = 6,291,456 B."""
    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    assert ep.weight_bytes_per_gpu() == pytest.approx(25_759_850_496)
    ops = {o.name: o for o in ep.ops([2048] * 64)}
    assert ops["EP all-to-all dispatch (nvlink)"].bytes == pytest.approx(6_291_456)
    assert ops["EP all-to-all combine (nvlink)"].bytes == pytest.approx(6_291_456)
    assert "QKV proj" in ops and not any("all-reduce" in n for n in ops)  # attention is data parallel: no TP all-reduce
    one = {o.name: o for o in StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=1, max_seqs=256).ops([2048] * 64)}
    # each GPU attends for a quarter of the sequences, with all the heads
    assert ops["flash attention (decode)"].flops == pytest.approx(one["flash attention (decode)"].flops / 4)
    with pytest.raises(RooflineError, match="MoE"):
        StepCost("llama3-8b", "h100-sxm", tensor_parallel=2, expert_parallel=True)
    with pytest.raises(RooflineError, match="must divide"):
        StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=3, expert_parallel=True)


def test_expert_parallel_serving_pools_the_cache_over_the_gpus(capsys):
    """With data-parallel attention each GPU caches its own sequences whole: the replica's cache is
    4 x one GPU's free memory."""
    from roofline.plan.step import kv_cache_budget

    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    cap, parts = kv_cache_budget(ep, 0.9)
    assert cap == pytest.approx(4 * (parts["capacity_bytes"] - parts["weights_bytes"] - parts["activations_bytes"]))
    assert main(["serving", "--model", "mixtral-8x7b", "--tp", "4", "--ep", "--concurrency", "16", "--requests", "32",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpus"] == 4 and "expert-parallel 4" in d["description"] and d["model"] == "mixtral-8x7b" and any("expert parallelism" in n for n in d["notes"])


def test_pipeline_stages_hold_a_share_of_the_weights_and_send_between_stages():
    """Llama 3 70B over 4 stages of 1 GPU: each holds 2 x 70,553,706,496 / 4 = 35,276,853,248 B. A
    decode step of one sequence crosses the stages' 3 boundaries, each a send of one token's
    8,192 x 2 B over NVLink: 6 us + 16,384 / (0.85 x 450 GB/s), and a launch of 3 us (eager)."""
    pp = StepCost("llama3-70b", "h100-sxm", cost_model=EAGER, pipeline_stages=4)
    one = StepCost("llama3-70b", "h100-sxm", cost_model=EAGER)
    assert pp.weight_bytes_per_gpu() == pytest.approx(35_276_853_248)
    send = 6e-6 + 16384 / (0.85 * 450e9) + 3e-6
    assert pp.seconds([2048]) - one.seconds([2048]) == pytest.approx(3 * send, rel=1e-9)


def test_a_pipeline_runs_a_micro_batch_per_stage_and_idles_below_that():
    """4 stages, 64 users: 4 virtual engines of 16 identical users each deliver 4 x one engine's
    tokens/s; with 1 user only one engine works (the bubble): the same as one engine alone."""
    from roofline.serving import simulate_pipelined

    pp = StepCost("llama3-70b", "h100-sxm", cost_model=EAGER, pipeline_stages=4)
    full = simulate(pp, closed_requests(64, 128, 512, 64))
    alone = simulate(pp, closed_requests(16, 32, 512, 64), _stage_engine=True)
    assert full.gpus == 4 and full.output_tokens_per_s == pytest.approx(4 * alone.output_tokens_per_s, rel=1e-9)
    single = simulate_pipelined(pp, closed_requests(1, 4, 512, 64))
    lone = simulate(pp, closed_requests(1, 4, 512, 64), _stage_engine=True)
    assert single.output_tokens_per_s == pytest.approx(lone.output_tokens_per_s, rel=1e-9)
    assert any("pipeline: 4 stages" in n for n in full.notes)
    # the mean decode batch is what one micro-batch's step runs (16 users an engine), not the 64 in flight
    assert full.mean_decode_batch == pytest.approx(alone.mean_decode_batch, rel=1e-9) and full.mean_decode_batch <= 16


def test_expert_parallel_step_runs_at_its_busiest_gpu():
    """Data-parallel attention puts a sequence on one GPU: a lone 1,024-token prompt runs its
    attention and dense ops there with whole weights (8 x a TP-8 GPU's share), so it is slower
    than under TP 8; 64 decodes over 8 GPUs put 8 on each."""
    ep = StepCost("qwen3-30b-a3b", "h100-sxm", tensor_parallel=8, expert_parallel=True)
    tp = StepCost("qwen3-30b-a3b", "h100-sxm", tensor_parallel=8)
    assert ep.seconds([], [(1024, 0)]) > tp.seconds([], [(1024, 0)])
    assert ep.busiest_rows(64, []) == 8 and ep.busiest_rows(3, [(1024, 0)]) == 1024


def test_gpus_per_node_past_the_scale_up_domain_is_refused_by_name(capsys):
    """An HGX H100's NVLink joins 8 GPUs (scale_up_gpus, cited): --gpus-per-node 16 would put a
    TP 16 ring on NVLink, so it is refused, naming the flag and the domain; a GB200 NVL72 joins 72
    (TP 16 rides NVLink there); TP 8 with --gpus-per-node 16 needs no more than the domain."""
    from roofline.cli import main
    from roofline.machines import get_machine
    from roofline.plan.step import StepCost

    assert get_machine("h100-sxm").scale_up_gpus == 8 and get_machine("gb200").scale_up_gpus == 72
    for argv in (["decode", "--model", "llama3-70b", "--machine", "h100-sxm", "--tp", "16", "--gpus-per-node", "16"],
                 ["serving", "--model", "llama3-70b", "--machine", "h100-sxm", "--tp", "16", "--gpus-per-node", "16"],
                 ["serving", "--model", "llama3-70b", "--machine", "h100-sxm", "--tp", "8", "--pp", "2",
                  "--gpus-per-node", "16"],
                 ["train", "--model", "llama3-8b", "--machine", "h100-sxm", "--tokens", "1e12", "--gpus", "32",
                  "--gpus-per-node", "16"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "--gpus-per-node 16" in err and "at most 8 GPUs" in err and "Traceback" not in err, argv
    assert StepCost("llama3-70b", "gb200", tensor_parallel=16, gpus_per_node=72).link == "nvlink"
    assert StepCost("llama3-70b", "h100-sxm", tensor_parallel=16).link == "infiniband"  # default 8 per node
    assert StepCost("llama3-70b", "h100-sxm", tensor_parallel=8, gpus_per_node=16).link == "nvlink"


def test_the_busiest_expert_parallel_gpu_reads_whole_experts():
    """Mixtral 8x7B over 4 GPUs, 2 experts each: one token picks 2 of the 8, so the step touches
    T = 8 (1 - (1 - 2/8)^1) = 2 experts, the mean GPU half of one. The step waits for the busiest GPU:
    each expert touched with p = 0.25, a GPU's two touched Binomial(2, 0.25) (P(0) = 0.5625, P(<= 1) =
    0.9375), the busiest of 4 expected to touch (1 - 0.5625^4) + (1 - 0.9375^4) = 1.1274 experts (routing
    exactly, the two picks on one GPU with probability 4 / C(8, 2) = 1/7: 1 + 1/7 = 1.143), more than the
    whole expert the pigeonhole gives: 1.1274 x 2 x 4,096 x 14,336 gate+up weights. At 64 tokens T = 8
    (1 - 0.75^64) ~ 8: each GPU's 2 experts, the cap."""
    from roofline.transformer import get_model

    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    kind = get_model("mixtral-8x7b").kinds[0]
    one = ep._token_kernels(kind, 1.0)["expert gate+up proj"]
    busiest = (1 - 0.5625**4) + (1 - 0.9375**4)
    assert float(one.weight_elems) == pytest.approx(busiest * 2 * 4096 * 14336)
    many = ep._token_kernels(kind, 64.0)["expert gate+up proj"]
    assert float(many.weight_elems) == pytest.approx(2 * 2 * 4096 * 14336, rel=1e-6)


def test_pipeline_stages_report_one_gpus_cache_and_the_replicas_own_overload(capsys):
    """A reviewer read 'KV cache 9.6 GB per GPU' for PP 2 (two stage GPUs' 4.8 GB) and an overload
    note of one virtual engine's rate (0.93 offered, where the run was offered 2). Llama 3 70B in
    bf16 over 2 stages: each GPU holds half the 141.1 GB of weights, 70.6 GB, and caches in what
    is left of 0.9 x 85.5 GB; the engine line, the JSON and the memory note agree on it, and the
    overload note is of the 2 requests/s offered."""
    assert main(["serving", "--model", "llama3-70b", "--pp", "2", "--rate", "2", "--requests", "400", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    per_gpu = d["kv_cache_bytes_per_gpu"]
    assert d["kv_cache_bytes"] == pytest.approx(2 * per_gpu, rel=1e-12)  # the replica's 2 stage GPUs
    assert per_gpu / 1e9 == pytest.approx(0.9 * 85.52 - 141.1 / 2 - 1.6, abs=0.3)
    kv_note = next(n for n in d["notes"] if n.startswith("KV cache"))
    assert kv_note.startswith(f"KV cache {per_gpu / 1e9:,.1f} GB per GPU (2 GPUs in the replica")
    over = [n for n in d["notes"] if n.startswith("overloaded:")]
    assert over and "of the 2 offered" in over[0]
    assert all(not n.startswith("memory-bound batch: ") for n in d["notes"])  # said as each virtual engine's


def test_a_pipelines_memory_bound_note_is_each_virtual_engines():
    """Llama 3 8B over 2 L4 stages: each GPU caches in what half the weights leave of its 24 GB
    (12.8 GB); a sequence of 8,192 + 64 tokens at 128 KiB a token is 1.08 GB, so about 11 fit
    against the 32 users of each virtual engine: memory-bound, said of each virtual engine (the
    head rendered from step.pipeline_stages, not a note rewritten by its prefix); the replica's
    scheduler line is its stage engines'."""
    from roofline.serving import Engine
    from roofline.serving.assemble import memory_bound_head, scheduler_note

    pp = StepCost("llama3-8b", "l4", cost_model=EAGER, pipeline_stages=2)
    r = simulate(pp, closed_requests(64, 128, 8192, 64))
    head = memory_bound_head(pp)
    assert head == "memory-bound batch, each of the 2 virtual engines"
    assert sum(n.startswith(head + ": ") for n in r.notes) == 1
    assert not any(n.startswith("memory-bound batch: ") for n in r.notes)
    assert r.scheduler == scheduler_note(pp, Engine()) and r.scheduler in r.notes


def test_expert_parallelism_across_nodes_sends_a_token_once_per_remote_node(capsys):
    """EP 16 on H100 nodes of 8 (DeepEP's internode kernels): a token crosses InfiniBand once per
    remote node holding one of its experts, not once per remote expert. Qwen3 235B-A22B, 128
    experts, top 8, two nodes of 64: 1 - C(64, 8) / C(128, 8) = 1 - prod (64 - i) / (128 - i) for
    i < 8 = 0.99690 remote nodes per token; the dispatch sends fp8 with an fp32 scale per 128
    values under W8A8 (1 + 4/128 B), the combine bf16. D = 4,096: 64 rows dispatch 64 x 4,096 x
    1.03125 x 0.99637 B, combine 64 x 4,096 x 2 x 0.99637 B."""
    from roofline.plan.precision import Precision

    r = 1.0 - math.prod((64 - i) / (128 - i) for i in range(8))
    assert StepCost.remote_nodes_per_token(128, 8, 2) == pytest.approx(r) and r == pytest.approx(0.99690, abs=1e-5)
    # DeepSeek-V3 (256 experts, top 8) over 4 nodes: each of 3 remote nodes is missed with C(192, 8) / C(256, 8)
    miss = math.prod((192 - i) / (256 - i) for i in range(8))
    assert StepCost.remote_nodes_per_token(256, 8, 4) == pytest.approx(3 * (1 - miss))
    from roofline.machines import get_machine

    p = Precision.resolve("qwen3-235b-a22b", get_machine("h100-sxm"), "fp8")
    ep16 = StepCost("qwen3-235b-a22b", "h100-sxm", p, 16, expert_parallel=True, max_tokens=256, max_seqs=64)
    moe = next(k for k in ep16.sharded.kinds if k.mlp is not None)
    dispatch, combine = ep16._all_to_alls(moe, 64.0)
    assert ep16.link == "infiniband" and dispatch.dtype == "fp8" and combine.dtype == "bf16"
    assert dispatch.bytes == pytest.approx(64 * 4096 * (1 + 4 / 128) * r)
    assert combine.bytes == pytest.approx(64 * 4096 * 2 * r)
    ep8 = StepCost("qwen3-235b-a22b", "h100-sxm", p, 8, expert_parallel=True, max_tokens=256, max_seqs=64)
    d8, c8 = ep8._all_to_alls(moe, 64.0)  # within a node: every remote expert, 8 x 7/8 copies a row
    assert d8.bytes == pytest.approx(64 * 4096 * (1 + 4 / 128) * 8 * 7 / 8) and c8.bytes == pytest.approx(64 * 4096 * 2 * 7)
    argv = ["serving", "--model", "qwen3-235b-a22b", "--dtype", "fp8", "--ep", "--concurrency", "16", "--requests", "32"]
    assert main([*argv, "--tp", "16"]) == 0
    out = capsys.readouterr().out
    assert "spans 2 nodes of 8: a token crosses infiniband once per remote node" in out and "1.00 of 1" in out
    assert main([*argv, "--tp", "8"]) == 0
    assert "spans" not in capsys.readouterr().out


def test_expert_parallel_runs_say_so_and_what_their_all_to_alls_send(capsys):
    """JSON tells an EP run from a TP one; the all-to-alls send fp8 (with scales) only under fp8
    W8A8; an int8 W8A8 run sends bf16 and says an int8 dispatch is not modelled; fp8 activations
    throughout send fp8 both ways."""
    argv = ["serving", "--model", "qwen3-235b-a22b", "--ep", "--tp", "8", "--concurrency", "8", "--requests", "16"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["expert_parallel"] is True
    assert main([*argv, "--dtype", "int8"]) == 0
    out = capsys.readouterr().out
    assert "send bf16 both ways: an int8 dispatch is not modelled" in out and "DeepEP's fp8 dispatch under W8A8" not in out
    assert main([*argv, "--activations", "fp8"]) == 0
    assert "all-to-alls send the activations' fp8 both ways" in capsys.readouterr().out


def test_attention_tensor_parallel_groups_inside_an_expert_parallel_group():
    """Mixtral 8x7B over 4 GPUs as 2 data-parallel groups of attention TP 2 (SGLang's --tp 4 --dp 2
    --enable-dp-attention), the experts split over all 4. Each GPU holds half the attention
    (32 x (2 x 4,096^2 + 2 x 4,096 x 1,024) / 2 = 671,088,640), half the vocabulary's embedding
    and LM head (2 x 16,000 x 4,096 = 131,072,000), the router and norms whole (32 x 4,096 x 8 +
    (2 x 32 + 1) x 4,096 = 1,314,816) and a quarter of the 45,097,156,608 routed-expert
    parameters (11,274,289,152): 12,077,764,608 x 2 B = 24,155,529,216 B. A step of 64 decodes
    puts 32 on each group: two all-reduces a layer over the group's 2 GPUs, 2 x 1/2 x 32 x 4,096
    x 2 B = 262,144 B each, x 64 = 16,777,216 B; each GPU dispatches its 16 of the group's rows:
    16 x 2 x 4,096 x 2 B x 3/4 x 32 layers = 6,291,456 B each way, as at attention TP 1."""
    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, attention_tp=2)
    assert ep.weight_bytes_per_gpu() == pytest.approx(24_155_529_216)
    ops = {o.name: o for o in ep.ops([2048] * 64)}
    assert ops["TP all-reduce (nvlink)"].bytes == pytest.approx(16_777_216) and ops["TP all-reduce (nvlink)"].count == 64
    assert ops["EP all-to-all dispatch (nvlink)"].bytes == pytest.approx(6_291_456)
    assert ep.busiest_rows(64, []) == 32
    # a group's 32 sequences with half the heads: a quarter of one GPU's attention over all 64
    one = {o.name: o for o in StepCost("mixtral-8x7b", "h100-sxm", max_seqs=256).ops([2048] * 64)}
    assert ops["flash attention (decode)"].flops == pytest.approx(one["flash attention (decode)"].flops / 4)
    # the dense projections: the group's 32 rows against half the QKV weights, 2 x 32 x 4,096 x 6,144 / 2
    assert ops["QKV proj"].flops == pytest.approx(32 * 2 * 32 * 4096 * 6144 / 2)
    # attention TP 1 (the default) is today's layout, to the byte
    base = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    same = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, attention_tp=1)
    assert same.seconds([2048] * 64, [(512, 0)]) == base.seconds([2048] * 64, [(512, 0)])


def test_attention_tensor_parallel_caches_a_share_of_the_heads_and_reserves_a_ranks_activations():
    """Each GPU of an attention group caches 4 of Mixtral's 8 kv heads: a token costs 2 x 32 layers
    x 4 x 128 x 2 B = 65,536 B there (131,072 B at attention TP 1). The replica's cache is its 2
    groups' worth of one GPU's free memory. The activations reserved are one rank's share of the
    step (8,192 tokens, 256 sequences over 2 groups: 4,096 and 128): 4,096 x (2 x 14,336 + 4 x
    4,096) x 2 B + 128 x 16,000 x 4 B (fp32 logits of the GPU's half of the vocabulary) =
    369,098,752 + 8,192,000 = 377,290,752 B."""
    from roofline.plan.step import kv_cache_budget, sequence_cache_bytes

    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, attention_tp=2,
                  max_tokens=8192, max_seqs=256)
    assert sequence_cache_bytes(ep, 16, 1)[1] == pytest.approx(16 * 65_536)
    cap, parts = kv_cache_budget(ep, 0.9)
    assert parts["activations_bytes"] == pytest.approx(377_290_752)
    assert cap == pytest.approx(2 * (parts["capacity_bytes"] - parts["weights_bytes"] - parts["activations_bytes"]))


def test_expert_parallel_activations_are_a_ranks_share_of_the_step():
    """Under data-parallel attention each rank runs its share of the step, not all of it: Mixtral
    over 4 GPUs at 8,192 tokens and 256 sequences reserves 2,048 x (2 x 14,336 + 4 x 4,096) x 2 B
    + 64 x 32,000 x 4 B = 184,549,376 + 8,192,000 = 192,741,376 B a GPU (the whole step on every
    GPU was 4 x that and more)."""
    from roofline.plan.step import kv_cache_budget

    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, max_tokens=8192, max_seqs=256)
    assert kv_cache_budget(ep, 0.9)[1]["activations_bytes"] == pytest.approx(192_741_376)
    assert ep.rank_budget() == (2048, 64)


def test_experts_split_tensor_parallel_inside_expert_parallelism_gather_and_scatter():
    """MoE TP 2 x EP 2 over 4 GPUs with attention data-parallel over the 4 (TensorRT-LLM's
    moe_tp_size 2, moe_ep_size 2): each GPU holds 4 of the 8 experts at half their d_ff, a quarter
    of the expert weights as under EP 4 (2 x (46,702,792,704 - 3/4 x 45,097,156,608) =
    25,759,850,496 B). No all-to-all: TensorRT-LLM all-gathers the step's 64 rows over the 4 GPUs
    and reduce-scatters the outputs, 3/4 x 64 x 4,096 x 2 B = 393,216 B each per layer, x 32 =
    12,582,912 B. One token touches 2 experts; each group's 4 touched Binomial(4, 0.25) (distribution
    function 0.3164, 0.7383, 0.9492, 0.9961 at 0-3), the busiest of 2 groups expected to touch
    sum_j (1 - F(j)^2) = 1.4616 experts (exactly 1 + 2 C(4, 2) / C(8, 2) = 1.4286), each half an expert:
    1.4616 x 2 x 4,096 x 7,168 gate+up weights."""
    from roofline.transformer import get_model

    mt = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, expert_tp=2)
    assert mt.weight_bytes_per_gpu() == pytest.approx(25_759_850_496)
    ops = {o.name: o for o in mt.ops([2048] * 64)}
    assert not any("all-to-all" in n for n in ops)
    assert ops["MoE all-gather dispatch (nvlink)"].bytes == pytest.approx(12_582_912)
    assert ops["MoE reduce-scatter combine (nvlink)"].bytes == pytest.approx(12_582_912)
    ep = {o.name: o for o in StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True).ops([2048] * 64)}
    assert ops["expert down proj"].flops == pytest.approx(ep["expert down proj"].flops)  # M k 2 D F / G either way
    kind = get_model("mixtral-8x7b").kinds[0]
    F = [0.75**4, 0.75**4 + 4 * 0.25 * 0.75**3, 1 - 4 * 0.25**3 * 0.75 - 0.25**4, 1 - 0.25**4]  # Binomial(4, 0.25)
    busiest = sum(1 - f**2 for f in F)
    assert busiest == pytest.approx(1.4616, abs=1e-4)
    assert float(mt._token_kernels(kind, 1.0)["expert gate+up proj"].weight_elems) == pytest.approx(busiest * 2 * 4096 * 7168)


def test_mixed_layouts_that_do_not_divide_are_refused_by_name():
    with pytest.raises(RooflineError, match="attention_tp 3 must divide") as e:
        StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, attention_tp=3)
    assert e.value.field == "attention_tp"
    with pytest.raises(RooflineError, match="attention heads 32") as e:  # Qwen3-30B-A3B: 32 heads, 128 experts
        StepCost("qwen3-30b-a3b", "h100-sxm", tensor_parallel=64, expert_parallel=True, attention_tp=64)
    assert e.value.field == "attention_tp"
    with pytest.raises(RooflineError, match="expert_tp 3 must divide"):
        StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, expert_tp=3)
    with pytest.raises(RooflineError, match="8 experts") as e:  # 32 GPUs, MoE TP 2: 16 expert groups for 8 experts
        StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=32, expert_parallel=True, expert_tp=2)
    assert e.value.field == "expert_tp"
    with pytest.raises(RooflineError, match="expert_parallel") as e:
        StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, attention_tp=2)
    assert e.value.field == "attention_tp"


def test_attention_dp_flag_splits_the_ep_group_and_is_refused_where_it_does_not_apply(capsys):
    """--tp 4 --ep --attention-dp 2: two groups of attention TP 2; the flag needs --ep and must divide --tp."""
    argv = ["serving", "--model", "mixtral-8x7b", "--tp", "4", "--concurrency", "8", "--requests", "16"]
    assert main([*argv, "--ep", "--attention-dp", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "2 groups of attention tensor-parallel 2" in d["description"] and d["gpus"] == 4
    for extra, flag in ((["--attention-dp", "2"], "--ep"), (["--ep", "--attention-dp", "3"], "--attention-dp 3")):
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert flag in err and "Traceback" not in err


def test_a_disaggregated_kv_transfer_splits_over_an_attention_groups_gpus():
    """An attention group of 2 GPUs holds each sequence's kv heads half on each: both send theirs, so
    the transfer's bytes per link are half of a one-GPU group's (the same latency on top)."""
    from roofline.serving.disagg import kv_transfer_seconds

    one = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True)
    two = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=4, expert_parallel=True, attention_tp=2)
    lat = kv_transfer_seconds(one, one, [0])[0]  # no tokens: the latency alone
    t1, t2 = kv_transfer_seconds(one, one, [4096])[0], kv_transfer_seconds(two, two, [4096])[0]
    assert t2 - lat == pytest.approx((t1 - lat) / 2)
