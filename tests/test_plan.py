"""Whole-model planning: published figures, the seed's worked numbers, relations and properties.

Every expected number is a published figure or arithmetic written in the comment next to it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import H100_SXM, CostModel, seed_cost_model
from roofline.blocks import block_kernels
from roofline.plan.decode import decode_plan
from roofline.plan.memory import inference_memory
from roofline.cost import time_lower_bound
from roofline.errors import RooflineError
from roofline.kernels import (
    Kernel,
    all_gather_kernel,
    all_reduce_kernel,
    decode_step_kernel,
    embedding_kernel,
    matmul_kernel,
    reduce_scatter_kernel,
    rmsnorm_kernel,
)
from roofline.plan import (
    Precision,
    decode_step,
    kv_bytes_per_token,
    kv_overtakes_weights_context,
    predict_counted,
    predict_model,
    shard,
    time_to_first_token,
)
from roofline.plan.sweep import sweep
from roofline.plan.train_memory import activation_bytes_per_layer, train_flops_per_token
from roofline.transformer import model_state_bytes
from roofline.plan.training import train_plan
from roofline.transformer import active_params, count_params, get_model, matmul_params

PURE = CostModel()  # the roofline: e_c = e_m = 1, no launch

# Llama 3 8B (config.json): L 32, D 4096, H 32, K 8, d_head 128, F 14336, V 128256.
LLAMA_EMBED = 128256 * 4096  # 525,336,576
LLAMA_MATMUL = 8_030_261_248 - LLAMA_EMBED - 65 * 4096  # total - embedding - 65 RMSNorm weights = 7,504,658,432


# ---------------------------------------------------------------------------------------------
# Published figures and the seed's worked numbers
# ---------------------------------------------------------------------------------------------


def test_gpt3_training_flops_is_3_14e23():
    # Brown et al. 2020, Table D.1: GPT-3 175B, 300B tokens, 3.14e23 training FLOPs (6 N D)
    plan = train_plan("gpt3-175b", tokens=300e9, gpus=1024, seq_len=2048)
    assert plan.training_flops == pytest.approx(3.14e23, rel=0.005)


def test_llama3_8b_kv_cache_is_128_kib_per_token_and_1_gib_per_8k_sequence():
    # 2 (K and V) x 32 layers x 8 kv heads x 128 d_head x 2 bytes = 131,072 B = 128 KiB
    assert kv_bytes_per_token("llama3-8b") == 128 * 1024
    mem = inference_memory("llama3-8b", "h100-sxm", batch=1, context=8192)
    assert dict((p.name, p.bytes) for p in mem.parts)["kv_cache"] == 2**30  # 8,192 x 128 KiB = 1 GiB
    assert kv_bytes_per_token("llama3-8b", Precision(kv_cache="fp8")) == 64 * 1024  # fp8 halves it


def test_seed_exercise_4_training_time():
    # 6 x 8.03e9 x 15e12 = 7.23e23 FLOPs; / (1024 x 989e12 x 0.40) = 1.784e6 s = 20.6 days
    plan = train_plan("llama3-8b", 15e12, 1024, "h100-sxm", mfu=0.40)
    assert plan.training_flops == pytest.approx(6 * 8_030_261_248 * 15e12)
    assert round(plan.days, 1) == 20.6
    assert plan.gpu_hours == pytest.approx(plan.seconds * 1024 / 3600)
    # full recompute executes 8 N per token (4/3 of 6 N): at 40% MFU the HFU is 53%
    assert round(train_plan("llama3-8b", 15e12, 1024, mfu=0.40, recompute="full").hfu, 2) == 0.53
    # ...or, with the hardware saturated at 40% HFU, 20.6 x 4/3 = 27.5 days and MFU 30%
    held = train_plan("llama3-8b", 15e12, 1024, hfu=0.40, recompute="full")
    assert round(held.days, 1) == 27.5 and held.mfu == pytest.approx(0.30)


def test_full_convention_is_6n_matmul_plus_12_lhs():
    # 6 x 7,504,658,432 + 12 x 32 x 4096 x 8192 = 45,027,950,592 + 12,884,901,888 per token
    model, hw = train_flops_per_token("llama3-8b", 8192, "full", "full")
    assert model == 6 * LLAMA_MATMUL + 12 * 32 * 4096 * 8192
    assert hw == 8 * LLAMA_MATMUL + 16 * 32 * 4096 * 8192


def test_decode_intensity_equals_the_batch():
    # seed 000: a decode step does 2 FLOPs per weight per sequence and reads each 2-byte weight once
    for b in (1, 8, 64, 1024):
        assert decode_step_kernel(7e9, b).intensity == b
        assert decode_step("llama3-8b", H100_SXM, b, 4096).weights_intensity == pytest.approx(b, rel=1e-12)
    # vectorised: the same in one call
    np.testing.assert_allclose(decode_step("llama3-8b", H100_SXM, np.array([1, 3, 300]), 128).weights_intensity, [1, 3, 300])


def test_mixtral_total_and_active_parameters():
    # Mistral AI, "Mixtral of experts" (2024): 46.7B parameters in all, 12.9B active per token
    cfg = get_model("mixtral-8x7b")
    assert count_params(cfg)["total"] / 1e9 == pytest.approx(46.7, abs=0.05)
    assert active_params(cfg) / 1e9 == pytest.approx(12.9, abs=0.05)


def test_moe_flops_use_active_params_and_decode_reads_the_touched_experts():
    cfg = get_model("mixtral-8x7b")
    one = decode_step(cfg, H100_SXM, 1, 1, cost_model=PURE)
    # one token touches 8 (1 - (6/8)^1) = 2 experts: exactly the active matmul weights, 2 bytes each
    assert one.totals.gemm_weight_bytes == pytest.approx(2 * matmul_params(cfg))
    assert one.totals.gemm_flops == pytest.approx(2 * matmul_params(cfg))  # 2 FLOPs per active weight
    # 1,024 tokens touch all 8 (1 - 0.75^1024 = 1): every weight but the embedding table and norms
    many = decode_step(cfg, H100_SXM, 1024, 1, cost_model=PURE)
    p = count_params(cfg)
    assert many.totals.gemm_weight_bytes == pytest.approx(2 * (p["total"] - p["embedding"] - p["norms"]), rel=1e-9)
    # memory holds all of them: 46.7B x 2 bytes
    assert inference_memory(cfg, "h200").parts[0].bytes == 2 * p["total"]


def test_70b_bf16_weights_do_not_fit_one_80_gb_gpu():
    # 70,553,706,496 parameters x 2 bytes = 141.1 GB > the 81,559 MiB = 85.5 GB an "80 GB" H100 reports
    mem = inference_memory("llama3-70b", "h100-sxm", batch=1, context=8192)
    assert mem.fits is False
    assert mem.parts[0].bytes == 2 * 70_553_706_496
    assert "does NOT fit" in mem.verdict and "weights alone are 141 GB" in mem.verdict and "85.5 GB" in mem.verdict
    assert "--tp 2" in mem.verdict  # 70.6 GB of weights + 1.3 GB of KV cache per GPU on 2
    assert dict(mem.limits)["max_batch_at_context"] == 0
    assert inference_memory("llama3-70b", "h100-sxm", precision=Precision(weights="fp8")).fits  # 70.6 + 2.7 GB


# ---------------------------------------------------------------------------------------------
# Collectives and the link in the cost model
# ---------------------------------------------------------------------------------------------


def test_ring_collective_bytes():
    # 1e9 bf16 elements on 8 GPUs: all-reduce 2 x 7/8 x 2e9 = 3.5e9 bytes sent per GPU
    k = all_reduce_kernel(1e9, 8, "nvlink")
    assert k.bytes == pytest.approx(3.5e9) and k.flops == pytest.approx(0.875e9) and k.link == "nvlink"
    assert all_gather_kernel(1e9, 8).bytes == pytest.approx(1.75e9)  # 7/8 x 2e9
    rs = reduce_scatter_kernel(1e9, 8, "infiniband", "fp32")
    assert rs.bytes == pytest.approx(3.5e9) and rs.flops == pytest.approx(0.875e9)  # 7/8 x 4e9; 7/8 x 1e9 adds


@given(st.integers(min_value=2, max_value=4096), st.integers(min_value=1, max_value=10**9))
@settings(max_examples=100, deadline=None)
def test_ring_all_reduce_moves_2_n_minus_1_over_n(gpus, n):
    assert all_reduce_kernel(n, gpus, bytes_per_elem=1.0).bytes == pytest.approx(2 * (gpus - 1) / gpus * n, rel=1e-12)
    assert all_gather_kernel(n, gpus, bytes_per_elem=1.0).bytes == pytest.approx((gpus - 1) / gpus * n, rel=1e-12)


def test_collective_is_timed_over_its_link_and_bound_by_it():
    k = all_reduce_kernel(1e9, 8, "nvlink")
    op = PURE.predict_op(k, H100_SXM)
    # H100 NVLink: 450 GB/s per direction. An all-reduce there takes the measured engine all-reduce
    # (data/links.toml, SGLang PR #2904): 33.8 us at 8 GPUs and 4 MiB, then the ring's extra bytes,
    # 2 x 7/8 x (2e9 - 4,194,304) B, at e_m 1 x 450 GB/s
    assert op.memory_s == pytest.approx(33.8e-6 + 1.75 * (2e9 - 4_194_304) / 450e9)
    assert op.bound == "link" and time_lower_bound(k, H100_SXM) == pytest.approx(3.5e9 / 450e9)  # speed of light: no latency
    ib = PURE.predict_op(all_reduce_kernel(1e9, 8, "infiniband"), H100_SXM)
    assert ib.memory_s == pytest.approx(3.5e9 / 50e9 + 46e-6)  # one NDR port: 50 GB/s; 46 us (NCCL issue #1244)
    with pytest.raises(RooflineError, match="no 'ici' link"):
        PURE.predict_op(all_reduce_kernel(1e9, 8, "ici"), H100_SXM)
    with pytest.raises(RooflineError, match="gpus"):
        all_reduce_kernel(1e9, 1)


def test_tensor_parallel_decode_has_two_all_reduces_per_block():
    step = decode_step("llama3-70b", H100_SXM, 8, 4096, tensor_parallel=8)
    (ar,) = [op for op in step.prediction.ops if op.name.startswith("TP all-reduce")]
    assert ar.name.endswith("x160")  # 2 x 80 layers
    # each moves 2 x 7/8 x (8 x 8192 elements x 2 bytes) = 229,376 bytes per GPU
    assert ar.bytes == pytest.approx(160 * 2 * 7 / 8 * 8 * 8192 * 2)
    assert ar.bound == "link" and step.link_share > 0
    # the slice: 64/8 query heads, 8/8 kv heads, 28672/8 d_ff, 128256/8 vocab
    sh = shard("llama3-70b", 8)
    (layer,) = sh.kinds
    assert (layer.mixer.heads, layer.mixer.kv_heads, layer.mlp.d_ff, sh.vocab) == (8, 1, 3584, 16032)
    with pytest.raises(RooflineError, match="tensor_parallel 3"):
        shard("llama3-8b", 3)


def test_gradient_all_reduce_over_infiniband_in_a_training_step():
    plan = train_plan("llama3-8b", 15e12, 1024, mfu=0.4)
    (ar,) = plan.step.ops
    # bf16 gradients of 8,030,261,248 params, ring over 1,024 ranks: 2 x 1023/1024 x 2 x 8.03e9 bytes at 50 GB/s
    assert ar.bytes == pytest.approx(2 * 1023 / 1024 * 2 * 8_030_261_248)
    assert ar.time_s == pytest.approx(ar.bytes / 50e9 + 46e-6) and ar.bound == "link"  # + one IB all-reduce's latency
    one_node = train_plan("llama3-8b", 1e9, 8, mfu=0.4)
    assert "nvlink" in one_node.step.ops[0].name  # 8 GPUs: one node, NVLink
    assert plan.tensor_parallel_ops == 0 and plan.step_tensor_parallel_s == 0.0  # data parallel alone


def test_a_training_step_keeps_apart_the_tensor_parallel_collectives_on_its_critical_path():
    # tp 8 x dp 8: the TP all-reduce first (step_collectives builds it first), then the gradients'
    plan = train_plan("llama3-8b", 1e12, 64, tensor_parallel=8, mfu=0.4)
    tp, dp = plan.step.ops
    assert plan.tensor_parallel_ops == 1 and tp.category == dp.category == "collective"
    assert plan.step_tensor_parallel_s == tp.time_s and plan.step_communication_s == pytest.approx(tp.time_s + dp.time_s)


# ---------------------------------------------------------------------------------------------
# Whole model: relations
# ---------------------------------------------------------------------------------------------


def test_prefill_is_l_blocks_plus_embedding_final_norm_and_lm_head():
    cm = seed_cost_model()
    whole = time_to_first_token("llama3-8b", H100_SXM, 8192, attention="naive", cost_model=cm)
    block = cm.predict(block_kernels("llama3-8b", "prefill", 8192), H100_SXM).total_s  # seed 003: 8,756 us
    extras = [embedding_kernel(8192, 4096), rmsnorm_kernel(1, 4096), matmul_kernel(1, 128256, 4096)]
    assert whole.time_s == pytest.approx(32 * block + sum(cm.predict_op(k, H100_SXM).time_s for k in extras), rel=1e-12)


def test_decode_bytes_are_weights_plus_kv_cache_plus_activations():
    step = decode_step("llama3-8b", H100_SXM, 4, 1000, cost_model=PURE)
    assert step.kv_bytes == 4 * 1000 * 131072  # B S x 128 KiB
    assert step.weight_bytes == 2 * LLAMA_MATMUL + 2 * 4 * 4096  # matmul weights + 4 embedding rows
    activations = step.bytes - step.weight_bytes - step.kv_bytes
    assert 0 < activations < 0.01 * step.bytes  # ~1.3 MB of B-row activations per layer: 0.3%


def test_kv_cache_overtakes_weights():
    # 2 x 7,504,658,432 = 15,009,316,864 bytes of matmul weights = 131,072 x 114,512 exactly
    assert kv_overtakes_weights_context("llama3-8b", 1) == 114_512
    assert kv_overtakes_weights_context("llama3-8b", 8) == 14_314  # 114,512 / 8
    assert kv_overtakes_weights_context("llama3-8b", 3) == 38_171  # 114,512 / 3 = 38,170.7
    at, before = (decode_step("llama3-8b", H100_SXM, 1, s, cost_model=PURE) for s in (114_512, 114_511))
    assert at.kv_bytes >= at.totals.gemm_weight_bytes and before.kv_bytes < before.totals.gemm_weight_bytes


def test_quantisation_reprices_each_part_and_uses_the_matching_peak():
    base = decode_step("llama3-8b", H100_SXM, 16, 4096, cost_model=PURE)
    w4 = decode_step("llama3-8b", H100_SXM, 16, 4096, cost_model=PURE, precision=Precision(weights="int4"))
    # 0.5 of 2 bytes, but the LM head (128,256 x 4,096) and the 16 embedding rows a step reads stay
    # bf16, as quantisation tools leave them: 2 - 0.5 = 1.5 bytes more for each of those elements
    assert w4.weight_bytes == pytest.approx(base.weight_bytes / 4 + 1.5 * (128_256 * 4_096 + 16 * 4_096))
    assert w4.kv_bytes == base.kv_bytes
    assert Precision(weights="int4").compute == "bf16"  # weight-only int4 computes in bf16
    assert Precision(weights="fp8").compute_for("lm_head") == "bf16" and Precision(weights="fp8").compute_for("mlp") == "bf16"
    assert Precision.uniform("fp8").compute_for("lm_head") == "bf16" and Precision.uniform("fp8").compute_for("mlp") == "fp8"
    assert "LM head, embeddings, norms and any MoE router bf16" in Precision(weights="int4").label() and not Precision().kept("lm_head")
    kv8 = decode_step("llama3-8b", H100_SXM, 16, 4096, cost_model=PURE, precision=Precision(kv_cache="fp8"))
    assert kv8.kv_bytes == base.kv_bytes / 2 and kv8.weight_bytes == base.weight_bytes
    # all fp8: matmuls at the fp8 peak, 1,979 dense TFLOP/s against 989 for bf16
    big = dict(cost_model=PURE)
    b16 = time_to_first_token("llama3-8b", H100_SXM, 8192, **big)
    f8 = time_to_first_token("llama3-8b", H100_SXM, 8192, precision=Precision.uniform("fp8"), **big)
    gemm = lambda p: p.totals.gemm_compute_s  # noqa: E731
    lm = next(o.kernel.flops * o.count for o in b16.ops if o.kernel.name == "LM head") / 989e12  # stays bf16
    assert gemm(f8) == pytest.approx((gemm(b16) - lm) * 989 / 1979 + lm)
    with pytest.raises(RooflineError, match="weights dtype"):
        Precision(weights="int3")


def test_largest_batch_in_memory():
    # (0.9 (vLLM's gpu_memory_utilization, as serving) x 81,559 MiB = 76,968,728,985.6 B of the 85,520,809,984
    # the driver reports - 16,060,522,496 bytes of weights - 869,531,648 of a step's activations) /
    # (4,096 x 131,072 bytes per sequence) = 111.8;
    # Llama 3 8B's activations of an engine step (serving's): 8,192 tokens x (2 x 14,336 + 4 x 4,096) x 2 B
    # = 738,197,504 plus 256 sequences of fp32 logits, 256 x 128,256 x 4 = 131,334,144: 869,531,648 B
    plan = decode_plan("llama3-8b", "h100-sxm", context=4096)
    assert plan.max_batch_in_memory == 111
    rows = plan.rows()
    assert [r["batch"] for r in rows] == [2**i for i in range(11)]
    assert all(r["fits"] == (r["batch"] <= 111) for r in rows)
    # the whole card, as before engines' share: (85,520,809,984 - 16,060,522,496 - 869,531,648) / 536,870,912 = 127.8
    assert decode_plan("llama3-8b", "h100-sxm", context=4096, memory_fraction=1.0).max_batch_in_memory == 127


def test_compute_bound_batch_is_where_the_matmuls_cross_the_ridge():
    plan = decode_plan("llama3-8b", "h100-sxm", context=4096)
    b = plan.compute_bound_batch
    # weights-only intensity = B must pass the ridge scaled by e_c / e_m: 295 x 0.70 / 0.85 = 243
    assert 243 <= b <= 300
    cm = seed_cost_model(launch_overhead_s=3e-6)
    at, below = (decode_step("llama3-8b", H100_SXM, x, 4096, cost_model=cm).totals for x in (b, b - 1))
    assert at.gemm_compute_s >= at.gemm_memory_s and below.gemm_compute_s < below.gemm_memory_s
    # at 4,096 tokens of context the KV-cache reads keep the whole step memory-bound at any batch
    assert plan.step_compute_bound_batch is None
    # with almost no context the whole step does turn compute-bound
    assert decode_plan("llama3-8b", "h100-sxm", context=1).step_compute_bound_batch is not None


@pytest.mark.parametrize("model, machine, context, kw", [
    ("llama3-8b", "h100-sxm", 4096, {}),
    ("llama3-8b", "h100-sxm", 1, {}),
    ("llama3-8b", "a100-80gb", 64, {"tensor_parallel": 2}),
    ("gpt-oss-120b", "h100-sxm", 512, {}),
    ("jamba", "mi300x", 16, {}),
    ("mamba2-2.7b", "h100-sxm", 1, {}),
])
def test_compute_bound_search_equals_checking_every_batch(model, machine, context, kw):
    """The log-grid-then-gap search finds the same first batches as evaluating all 65,536."""
    from roofline.plan.decode import first_batches
    from roofline.plan import SEARCH_MAX_BATCH, resolve_link
    from roofline.machines import get_machine

    m = get_machine(machine)
    if kw.get("tensor_parallel", 1) > 1:
        kw = {**kw, "link": resolve_link(m, None)}
    every = np.arange(1, SEARCH_MAX_BATCH + 1)

    def masks(b):
        t = decode_step(model, m, b, context, **kw)
        return (np.asarray(t.totals.gemm_compute_s) >= np.asarray(t.totals.gemm_memory_s), np.asarray(t.bound) == "compute")

    brute = [int(every[np.flatnonzero(x)[0]]) if x.any() else None for x in masks(every)]
    assert first_batches(masks, SEARCH_MAX_BATCH) == brute
    assert brute[0] is not None  # the matmuls do cross the ridge in each case


def test_vectorised_sweep_equals_one_call_per_size():
    res = sweep("llama3-8b", ["h100-sxm", "mi300x"], "batch", [1, 16, 256])
    for s in res.series:
        for b, t in zip(s.values, s.time_s):
            assert t == pytest.approx(decode_step("llama3-8b", s.machine, int(b), 4096).time_s, rel=1e-12)
    tok = sweep("llama3-8b", "h100-sxm", "tokens", [128, 8192])
    assert tok.series[0].time_s[1] == pytest.approx(time_to_first_token("llama3-8b", H100_SXM, 8192).time_s)
    assert len(res.rows()) == 6 and res.to_csv().splitlines()[0].startswith("machine,batch,time_s")


def test_a_longer_sweep_allocates_no_more_temporaries():
    """Issue 38: a 1e6-point sweep built full-length float64 arrays op by op (~400 bytes a point).
    The sweep fills its columns chunk by chunk, so what it allocates beyond the result it returns
    (tracemalloc's peak less what the result holds) is the same for 100,000 and 400,000 sizes."""
    import tracemalloc

    extra = []
    for n in (100_000, 400_000):
        values = np.resize(np.arange(1, 4097), n)  # batches 1..4,096 repeated to n sizes
        tracemalloc.start()
        try:
            result = sweep("llama3-8b", "h100-sxm", "batch", values)
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert result.predictions == n
        extra.append(peak - held)
    assert extra[1] < 1.25 * extra[0], extra  # full-length temporaries would be 4x


def test_totals_match_the_op_by_op_prediction():
    step = decode_step("mixtral-8x7b", H100_SXM, 64, 2048, tensor_parallel=2)
    pred = predict_counted(list(step.ops), H100_SXM, step.cost_model)
    assert step.time_s == pytest.approx(pred.total_s, rel=1e-12)
    assert step.memory_bound_share == pytest.approx(pred.memory_bound_share, rel=1e-12)
    assert step.flops == pytest.approx(sum(op.flops for op in pred.ops), rel=1e-12)


def test_cuda_graph_pays_one_launch_for_the_whole_step():
    eager = decode_step("llama3-8b", H100_SXM, 1, 128, cost_model=CostModel(0.7, 0.85, 3e-6))
    graph = decode_step("llama3-8b", H100_SXM, 1, 128, cost_model=CostModel(0.7, 0.85, 3e-6, cuda_graph=True))
    assert eager.totals.launch_s == pytest.approx(3e-6 * (1 + 32 * 10 + 2))  # embedding, 10 ops x 32 layers, norm, head
    assert graph.totals.launch_s == pytest.approx(3e-6)


def test_sweep_bad_input():
    with pytest.raises(RooflineError, match="prefill"):
        sweep("llama3-8b", "h100-sxm", "tokens", phase="decode")
    with pytest.raises(RooflineError, match="over"):
        sweep("llama3-8b", "h100-sxm", "heads")
    with pytest.raises(RooflineError, match="batch"):
        sweep("llama3-8b", "h100-sxm", "batch", [0, 4])


# ---------------------------------------------------------------------------------------------
# Training memory
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("zero,total_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_stages_against_the_paper(zero, total_gb):
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64 GPUs, K = 12: 120, 31.4, 16.6, 1.9 GB
    assert sum(model_state_bytes(7.5e9, 64, zero).values()) / 1e9 == pytest.approx(total_gb, abs=0.05)


def test_korthikanti_activation_formula_tiny():
    s, b, h, a = 2, 1, 4, 2  # sbh = 8; 5as/h = 5 x 2 x 2 / 4 = 5
    assert activation_bytes_per_layer(s, b, h, a) == 8 * (34 + 5)  # 312
    assert activation_bytes_per_layer(s, b, h, a, tensor_parallel=2) == 8 * (17 + 2.5)  # SP: 34/t + 5as/(ht)
    assert activation_bytes_per_layer(s, b, h, a, 2, sequence_parallel=False) == 8 * (10 + 12 + 2.5)
    assert activation_bytes_per_layer(s, b, h, a, recompute="selective") == 8 * 34
    assert activation_bytes_per_layer(s, b, h, a, attention="flash") == 8 * 34  # scores never stored
    assert activation_bytes_per_layer(s, b, h, a, recompute="full") == 2 * 8  # the layer input only


def test_train_memory_parts_and_advice():
    plan = train_plan("llama3-8b", 15e12, 1024, mfu=0.4)
    parts = dict((p.name, p.bytes) for p in plan.memory.parts)
    assert parts["weights"] == parts["gradients"] == 2 * 8_030_261_248
    assert parts["optimizer"] == 12 * 8_030_261_248
    assert parts["activations"] == 32 * 8192 * 4096 * 34  # L s h 34, flash attention
    assert parts["output_layer"] == 4 * 8192 * 4096 * (1 + 128_256 / 4096)  # 4sbh (1 + v/h), Korthikanti 4.3
    assert plan.memory.fits is False and "ZeRO 1" in plan.memory.verdict
    assert train_plan("llama3-8b", 15e12, 1024, mfu=0.4, zero=1).memory.fits


def test_train_plan_renders_json_csv_and_table():
    import json

    plan = train_plan("llama3-8b", 15e12, 1024, mfu=0.4, price_per_gpu_hour=2.0)
    assert json.loads(plan.to_json())["cost"] == pytest.approx(plan.gpu_hours * 2.0)
    assert "days," in plan.to_csv() and "20.6 days" in plan.to_table()


def test_train_bad_input():
    with pytest.raises(RooflineError, match="multiple of tensor_parallel"):
        train_plan("llama3-8b", 1e12, 100, tensor_parallel=8)
    with pytest.raises(RooflineError, match="HFU of 1.20"):
        train_plan("llama3-8b", 1e12, 8, mfu=0.9, recompute="full")  # 0.9 x 8/6 = 1.2
    with pytest.raises(RooflineError, match="mfu or hfu"):
        train_plan("llama3-8b", 1e12, 8, mfu=0.4, hfu=0.4)


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


@given(st.integers(min_value=1, max_value=2048), st.integers(min_value=1, max_value=2048), st.integers(min_value=1, max_value=65536))
@settings(max_examples=60, deadline=None)
def test_throughput_rises_with_batch_until_compute_bound(b1, b2, context):
    lo, hi = sorted((b1, b2))
    step = decode_step("llama3-8b", H100_SXM, np.array([lo, hi]), context, cost_model=CostModel(0.7, 0.85, 0.0))
    t_lo, t_hi = step.tokens_per_s
    assert t_hi >= t_lo * (1 - 1e-12)  # never falls
    gemm_lo = step.gemm_bound[0] if np.ndim(step.gemm_bound) else step.gemm_bound
    if hi > lo and gemm_lo == "memory":  # while the weight reads bind, batching is close to free
        assert t_hi > t_lo


def test_throughput_is_flat_once_every_op_is_compute_bound():
    # no context and no launch: past the ridge every matmul is compute-bound and the rest scale with B
    step = decode_step("llama3-8b", H100_SXM, np.array([4096, 8192, 16384]), 1, cost_model=PURE)
    assert set(step.gemm_bound) == {"compute"}
    np.testing.assert_allclose(step.tokens_per_s, step.tokens_per_s[0], rtol=1e-3)


@given(st.integers(min_value=1, max_value=256), st.integers(min_value=1, max_value=40000))
@settings(max_examples=60, deadline=None)
def test_memory_grows_linearly_with_context(batch, context):
    f = lambda s: inference_memory("llama3-8b", "h100-sxm", batch, s).total_bytes  # noqa: E731
    assert f(3 * context) - f(2 * context) == f(2 * context) - f(context) == batch * context * 131072


def test_every_block_op_has_a_traffic_rule():
    for model in ("llama3-8b", "gpt2", "mixtral-8x7b"):
        for phase in ("prefill", "decode"):
            for attention in ("naive", "flash"):
                predict_model(model, H100_SXM, phase, 16, 2, 64, attention)


def test_kernel_link_survives_add_and_scale():
    k = all_reduce_kernel(1000, 4, "infiniband")
    assert k.scaled(3).link == "infiniband" and (k + k).link == "infiniband"
    assert Kernel("plain", 1.0, 1.0).link is None


def test_shared_experts_are_always_read():
    from roofline.transformer import TransformerConfig

    # tiny MoE: D 8, 2 layers, 2 heads, E 4 routed (k = 1) + 1 shared expert of d_ff 16, vocab 10
    cfg = TransformerConfig("tiny-moe", d_model=8, n_layers=2, n_heads=2, vocab=10, d_ff=16, n_experts=4,
                            experts_per_token=1, n_shared_experts=1)
    step = decode_step(cfg, H100_SXM, 1, 4, cost_model=PURE)
    # per layer: QKV 8 x 24 + out 8 x 8 + router 8 x 4 + (1 routed + 1 shared) x 3 x 8 x 16; LM head 8 x 10
    per_layer = 8 * 24 + 8 * 8 + 8 * 4 + 2 * 3 * 8 * 16
    assert step.totals.gemm_weight_bytes == pytest.approx(2 * (2 * per_layer + 8 * 10))


# ---------------------------------------------------------------------------------------------
# Review fixes: what holds the step, MoE reads, pipelines, global batch, links, limits, int4
# ---------------------------------------------------------------------------------------------

from roofline.machines import get_machine  # noqa: E402
from roofline.plan import SEARCH_MAX_BATCH, context_of, default_cost_model, model_ops, resolve_link  # noqa: E402
from roofline.plan.train_memory import make_layout, train_memory  # noqa: E402

H200, MI300X, B200 = (get_machine(k) for k in ("h200", "mi300x", "b200"))


def test_the_step_limit_is_the_link_when_tp_all_reduces_over_pcie_bind():
    plan = decode_plan("llama3-70b", "h100-sxm", (1, 1024), context=16, tensor_parallel=8, link="pcie", curve="none")
    assert plan.step_compute_bound_batch is None and plan.step_limit == "link" and plan.link == "pcie"
    text = plan.to_table()
    assert "its tensor-parallel all-reduces over pcie take longer than its FLOPs" in text
    assert "KV-cache reads (" not in text
    # at batch 65,536: 2 x 80 all-reduces of 2 x 7/8 x 65,536 x 8,192 x 2 bytes over PCIe's 64 GB/s
    # = 160 x 1,879,048,192 / 64e9 = 4.70 s, longer than the step's matmul arithmetic
    top = decode_step("llama3-70b", H100_SXM, SEARCH_MAX_BATCH, 16, tensor_parallel=8, link="pcie", cost_model=PURE)
    assert top.totals.link_time_s == pytest.approx(160 * 2 * 7 / 8 * 65536 * 8192 * 2 / 64e9)
    assert top.totals.link_time_s > top.totals.compute_time_s
    # at 4,096 tokens of context the KV cache holds a single GPU's step instead
    assert decode_plan("llama3-8b", "h100-sxm", (1,), context=4096, curve="none").step_limit == "kv_cache"


def test_moe_decode_header_gives_the_experts_read_not_all_weights():
    plan = decode_plan("mixtral-8x7b", H200, (1, 8, 64), curve="none")
    # batch 1 touches k = 2 of 8 experts per layer. Per layer: QKV 4096 x (4096 + 2 x 1024) = 25,165,824,
    # out 4096 x 4096 = 16,777,216, router 4096 x 8 = 32,768, experts 2 x 3 x 4096 x 14336 = 352,321,536:
    # 394,297,344 x 32 layers = 12,617,515,008; + LM head 4096 x 32000 = 131,072,000 + one embedding row
    # 4,096 = 12,748,591,104 weights x 2 bytes = 25,497,182,208 bytes (of 93.4 GB held)
    assert plan.rows()[0]["weight_bytes"] == pytest.approx(25_497_182_208, rel=1e-12)
    text = plan.to_table()
    assert "all 8 experts; a step reads the 8(1 - (1 - 2/8)^B) per layer that its tokens touch: 25.50 GB at batch 1" in text
    assert "reads all but the embedding table" not in text and "for a dense model" not in text
    assert "batch x 2 / experts touched" in text
    dense = decode_plan("llama3-8b", "h100-sxm", (1,), curve="none").to_table()
    assert "a step reads all but the embedding table" in dense and "experts" not in dense


def test_pipeline_activations_hold_min_p_m_micro_batches_of_l_over_p_layers():
    per_layer = 8192 * 1 * 4096 * 34  # Llama 3 8B, s b h x 34 (flash attention, t = 1)

    output = 4 * 8192 * (4096 + 128_256)  # the output layer, 4sbh (1 + v/h): Korthikanti 4.3, 4,336,910,336 B

    def parts(global_batch):
        lay = make_layout(4, pipeline_parallel=4, seq_len=8192, global_batch_tokens=global_batch)
        return dict((p.name, p.bytes) for p in train_memory("llama3-8b", "h100-sxm", lay, 8192).parts)

    def acts(global_batch):
        return parts(global_batch)["activations"]

    # m = 1: the first stage holds 1 micro-batch x 32/4 layers, the last the same 8 layers plus the
    # output layer's 4.34 GB: the last stage is the larger, and its output layer is a part of its own
    assert acts(None) == 1 * 8 * per_layer and parts(None)["output_layer"] == output
    assert acts(2 * 8192) == 2 * 8 * per_layer  # m = 2 < p = 4: 18.2 GB over the last stage's 9.1 + 4.3
    assert "output_layer" not in parts(2 * 8192)
    assert acts(8 * 8192) == 4 * 8 * per_layer  # m = 8 >= p: p x L/p = L layers (Korthikanti 4.2.3)
    whole = dict((p.name, p.bytes) for p in train_memory("llama3-8b", "h100-sxm", make_layout(1), 8192).parts)
    assert whole["activations"] == 32 * per_layer and whole["output_layer"] == output  # p = 1: one GPU holds both
    with pytest.raises(RooflineError, match="pipeline_parallel 64 is more stages than Llama 3 8B's 32 layers"):
        train_plan("llama3-8b", 1e12, 64, pipeline_parallel=64)


def test_unequal_pipeline_stages_are_costed_at_the_largest():
    """Llama 3.1 405B: 126 layers over 16 stages: 14 of 8 and 2 of 7 (Meta's end stages one layer
    short). Memory and collectives are the 8-layer stage's: its params are 8/126 of the whole."""
    lay = make_layout(16, pipeline_parallel=16, seq_len=8192)
    mem = train_memory("llama3-405b", "h100-sxm", lay, 8192)
    assert dict(mem.settings)["layers_per_stage"] == 8
    # a middle stage holds 8 whole layers: attention 16,384 x (16,384 + 2 x 1,024) + 16,384^2, MLP
    # 3 x 16,384 x 53,248, norms 2 x 16,384: 3,187,703,808 a layer, 25,501,630,464 for 8; an end stage's
    # 7 layers and the 128,256 x 16,384 embedding (or LM head) are fewer (24.4e9)
    layer = 16384 * (16384 + 2 * 1024) + 16384**2 + 3 * 16384 * 53248 + 2 * 16384
    assert dict(mem.settings)["params_per_gpu"] == 8 * layer == 25_501_630_464
    assert 7 * layer + 128256 * 16384 + 16384 < 8 * layer
    assert any("14 of 8 and 2 of 7" in n for n in mem.notes)
    plan = train_plan("llama3-405b", 1e12, 16, pipeline_parallel=16)
    assert any("14 of 8 and 2 of 7" in n for n in plan.memory.notes)
    assert plan.to_table().count("14 of 8 and 2 of 7") == 1  # said once, with the memory table (it was twice)


def test_zero3_gathers_the_weights_for_every_micro_batch():
    """ZeRO 3 over 8 data ranks, 4 micro-batches per step: the weights are all-gathered for each
    micro-batch's forward and backward (8 per step) and the gradients reduce-scattered after each
    backward (4): m times the traffic of gathering once per step."""
    plan = train_plan("llama3-8b", 1e12, 8, zero=3, micro_batch=1, seq_len=8192, global_batch_tokens=8 * 4 * 8192)
    counts = {op.name.split(" x")[0]: op for op in plan.step.ops}
    ag = next(v for k, v in counts.items() if k.startswith("weight all-gather"))
    rs = next(v for k, v in counts.items() if k.startswith("gradient reduce-scatter"))
    assert ag.name.endswith("x8") and rs.name.endswith("x4")


def test_global_batch_must_be_whole_micro_batches():
    # 16 GPUs / tp 2 = 8 data ranks x 1 x 8,192 = 65,536 tokens a round; 100,000 / 65,536 = 1.53
    with pytest.raises(RooflineError, match="multiple of data 8 x micro-batch 1 x sequence 8,192 = 65,536 tokens "
                                            r"\(e.g. 65,536 or 131,072\)") as err:
        train_plan("llama3-8b", 1e12, 16, tensor_parallel=2, global_batch_tokens=100_000)
    assert err.value.field == "global_batch"
    plan = train_plan("llama3-8b", 1e12, 16, tensor_parallel=2, global_batch_tokens=131_072)
    (tp,) = [op for op in plan.step.ops if op.name.startswith("TP")]
    assert tp.name.endswith("x256")  # m = 131,072 / 65,536 = 2 micro-batches x 4 all-reduces x 32 layers


def test_amd_training_costs_xgmi_and_says_which_link_crosses_nodes():
    plan = train_plan("llama3-8b", 1e12, 64, "mi300x", tensor_parallel=8)
    names = [op.name for op in plan.step.ops]
    assert names == ["TP all-reduce (xgmi) x128", "gradient all-reduce (pcie)"]  # 4 x 32 layers x 1 micro-batch
    # each TP all-reduce: 2 x 7/8 x (8,192 x 4,096) x 2 bytes = 117,440,512 bytes at 448 GB/s (pure cost model)
    assert plan.step.ops[0].time_s == pytest.approx(128 * 117_440_512 / 448e9)
    assert any("no infiniband or roce link" in n and "pcie" in n for n in plan.notes)
    one_node = train_plan("llama3-8b", 1e9, 8, "mi300x")
    assert [op.name for op in one_node.step.ops] == ["gradient all-reduce (xgmi)"]
    assert train_plan("llama3-8b", 1e9, 16, "tpu-v4").step.ops[0].name == "gradient all-reduce (ici)"
    with pytest.raises(RooflineError, match="dp_link 'foo': the H100 SXM has no such link; it has nvlink, pcie, infiniband"):
        train_plan("llama3-8b", 1e9, 64, dp_link="foo")


def test_tensor_parallel_link_defaults_to_the_machines_scale_up_link_and_checks_names():
    assert resolve_link(MI300X, None) == "xgmi" and resolve_link(get_machine("l40s"), None) == "pcie"
    assert resolve_link(get_machine("tpu-v4"), None) == "ici" and resolve_link(H100_SXM, None) == "nvlink"
    step = decode_step("llama3-70b", MI300X, 1, 128, tensor_parallel=8)
    assert any(op.kernel.name == "TP all-reduce (xgmi)" for op in step.ops)
    res = sweep("llama3-8b", ["h100-sxm", "mi300x", "l40s"], "machines", tensor_parallel=2)
    assert [s.link for s in res.series] == ["nvlink", "xgmi", "pcie"]
    for bad in ({"link": "foo"}, {"link": "nvlink", "machine": MI300X}):
        with pytest.raises(RooflineError, match="has no such link; it has"):
            decode_step("llama3-8b", bad.get("machine", H100_SXM), 1, 128, link=bad["link"])  # checked even at t = 1
    with pytest.raises(RooflineError, match="needs the link"):
        model_ops("llama3-8b", tensor_parallel=2)


def test_decode_plan_limits_batch_and_context_and_builds_the_curve_only_when_asked():
    with pytest.raises(RooflineError, match="batch must be at most 65,536") as err:
        decode_plan("llama3-8b", "h100-sxm", (1, SEARCH_MAX_BATCH + 1))
    assert err.value.field == "batch"
    with pytest.raises(RooflineError, match="context must be at most 16,777,216") as err:
        decode_plan("llama3-8b", "h100-sxm", (1,), context=10**12)  # checked before the 65,536-batch search
    assert err.value.field == "context"
    assert decode_plan("llama3-8b", "h100-sxm", (1,), context=2**24, curve="none").step.kv_bytes == 2**24 * 131072
    assert decode_plan("llama3-8b", "h100-sxm", (1, 4096), curve="none").curve is None
    log = decode_plan("llama3-8b", "h100-sxm", (1, 4096), curve="log")
    b = np.asarray(log.curve.batch)
    assert b[0] == 1 and b[-1] == 4096 and len(b) <= 256 + 4 and log.compute_bound_batch in b
    assert np.asarray(decode_plan("llama3-8b", "h100-sxm", (1, 5)).curve.batch).tolist() == [1, 2, 3, 4, 5]  # "every"


def test_int4_is_weight_only_storage_computing_in_bf16():
    assert Precision.uniform("int4", H100_SXM) == Precision("int4", "bf16", "bf16")
    assert Precision.uniform("fp4", H100_SXM) == Precision("fp4", "bf16", "bf16")  # no fp4 peak before Blackwell
    # B200 computes in fp4: W4A4, fp4 weights and matmuls, bf16 between ops; the KV cache fp8, as the engines keep it
    # by default (vLLM's kv_cache_dtype has no fp4; SGLang's and TensorRT-LLM's fp4 caches are opt-in)
    assert Precision.uniform("fp4", B200) == Precision("fp4", "bf16", "fp8", matmul="fp4")
    assert Precision.uniform("fp8", get_machine("a100-80gb")) == Precision("fp8", "bf16", "bf16")
    w4 = decode_step("llama3-8b", H100_SXM, 4, 1024, precision=Precision.uniform("int4", H100_SXM), cost_model=PURE)
    bf = decode_step("llama3-8b", H100_SXM, 4, 1024, cost_model=PURE)
    # 0.5 of 2 bytes a weight; the LM head (128,256 x 4,096) and the 4 embedding rows read stay bf16 (1.5 bytes more)
    assert w4.weight_bytes == pytest.approx(bf.weight_bytes / 4 + 1.5 * (128_256 * 4_096 + 4 * 4_096))
    assert w4.kv_bytes == bf.kv_bytes and w4.totals.gemm_flops == bf.totals.gemm_flops
    assert w4.totals.gemm_compute_s == pytest.approx(bf.totals.gemm_compute_s)  # the same bf16 peak
    assert "weight-only int4: matmuls compute in bf16" in Precision.uniform("int4", H100_SXM).label()
    with pytest.raises(RooflineError, match="activations dtype int4: the H100 SXM has no int4 peak") as err:
        decode_step("llama3-8b", H100_SXM, 1, 128, precision=Precision(activations="int4"))
    assert err.value.field == "activations dtype"
    with pytest.raises(RooflineError, match="peak_dtype int4: the H100 SXM has no int4 peak"):
        train_plan("llama3-8b", 1e12, 8, dtype="int4")


def test_shared_helpers():
    assert default_cost_model(H100_SXM) == seed_cost_model(launch_overhead_s=H100_SXM.launch_overhead_s)
    # prefill with a context is a chunked-prefill step (8 new tokens of 99 positions), never ignored
    assert (context_of("prefill", 8, 99), context_of("decode", 8, None), context_of("decode", 8, 99)) == (99, 8, 99)
    norm = model_ops("gpt2", "decode", 1, 2, 16)[-2].kernel  # GPT-2's final LayerNorm, from blocks._norm
    assert norm.name == "final norm" and norm.category == block_kernels("gpt2", "decode", 1, 2, 16)[0].category
    mem = inference_memory("llama3-8b", "h100-sxm", 1, 8192)
    # 8,030,261,248 x 2 bytes of weights; 8,192 x 128 KiB = 2^30 of KV cache; a step's activations:
    # 8,192 x (2 x 14,336 + 4 x 4,096) x 2 + 256 x 128,256 x 4 = 869,531,648; total 18,003,795,968
    assert mem.to_csv() == ("part,bytes\nweights,16060522496.0\nkv_cache,1073741824.0\nactivations,869531648.0\n"
                            "total,18003795968.0\n")
    assert train_plan("llama3-8b", 1e12, 8).to_csv().startswith("quantity,value\nmodel,llama3-8b\n")


def test_bridged_pcie_cards_cross_pcie_past_a_pair():
    """An H100 PCIe's NVLink bridge joins 2 cards (HPCT-H100): TP 2 runs over nvlink, TP 4 and 8
    over PCIe (64 GB/s per direction), and --tp-link nvlink for TP 8 is refused by name."""
    from roofline.machines import get_machine
    from roofline.plan import tp_link

    m = get_machine("h100-pcie")
    assert m.nvlink_gpus == 2
    assert tp_link(m, None, 2) == "nvlink" and tp_link(m, None, 4) == "pcie" and tp_link(m, None, 8) == "pcie"
    with pytest.raises(RooflineError, match="bridge joins 2 cards"):
        tp_link(m, "nvlink", 8)
    assert tp_link(get_machine("h100-sxm"), None, 8) == "nvlink"  # an HGX node: all 8 on NVLink


def test_a_data_parallel_ring_of_bridged_pcie_cards_crosses_pcie_past_a_pair():
    """Training's data-parallel collectives follow the same bridge rule: ZeRO 3 over 8 H100 PCIe
    cards is a ring over PCIe (the bridge joins 2, HPCT-H100), over 2 it stays on NVLink; naming
    nvlink for 8 is refused. Llama 3 8B's gradient reduce-scatter: 8,030,261,248 bf16 parameters,
    7/8 of 2 x 8,030,261,248 B = 14.05 GB per GPU over pcie's 64 GB/s per direction."""
    plan8 = train_plan("llama3-8b", 1e9, 8, machine="h100-pcie", zero=3)
    links8 = {op.name.split(" x")[0] for op in plan8.step.ops}
    assert links8 == {"gradient reduce-scatter (pcie)", "weight all-gather (pcie)"}
    rs = next(op for op in plan8.step.ops if op.name.startswith("gradient"))
    assert rs.time_s == pytest.approx(7 / 8 * 2 * 8_030_261_248 / 64e9, rel=1e-3)
    plan2 = train_plan("llama3-8b", 1e9, 2, machine="h100-pcie", zero=3)
    assert {op.name.split(" x")[0] for op in plan2.step.ops} == {"gradient reduce-scatter (nvlink)", "weight all-gather (nvlink)"}
    with pytest.raises(RooflineError, match="dp_link nvlink: the H100 PCIe's NVLink bridge joins 2 cards, and the 8 data-parallel ranks"):
        train_plan("llama3-8b", 1e9, 8, machine="h100-pcie", zero=3, dp_link="nvlink")
    assert {op.name.split(" x")[0] for op in train_plan("llama3-8b", 1e9, 8, zero=3).step.ops} == {
        "gradient reduce-scatter (nvlink)", "weight all-gather (nvlink)"}  # an HGX H100 SXM node: NVLink for all 8


def test_a_point_to_point_mesh_gives_a_group_of_g_gpus_g_minus_1_peer_links():
    """MI300X: xGMI is 7 links of 64 GB/s per direction, one to each peer (MLE-NET; its measured
    all-reduce bus bandwidth is 47.7 GB/s at 2 GPUs and 312.9 at 8). A ring of 2 gets one link, 64
    GB/s, not the 448 GB/s all-to-all figure; of 4, 3 x 64 = 192; of 8, 448. An all-reduce of 1e8
    bf16 elements at 2 GPUs: 2 x 1/2 x 2e8 B / 64 GB/s = 3.125 ms (PURE: e_m 1, no latency figure for
    xgmi). NVLink (switched) has no peer limit."""
    from roofline.kernels import all_gather_kernel

    mi = get_machine("mi300x")
    assert mi.link("xgmi") == 448e9 and dict(mi.peer_links) == {"xgmi": 64e9}
    assert [mi.group_link("xgmi", g) for g in (2, 4, 8)] == [64e9, 192e9, 448e9]
    assert PURE.predict_op(all_reduce_kernel(1e8, 2, "xgmi"), mi).memory_s == pytest.approx(2e8 / 64e9)
    assert PURE.predict_op(all_reduce_kernel(1e8, 8, "xgmi"), mi).memory_s == pytest.approx(2 * 7 / 8 * 2e8 / 448e9)
    assert PURE.predict_op(all_gather_kernel(1e8, 4, "xgmi"), mi).memory_s == pytest.approx(3 / 4 * 2e8 / 192e9)
    assert H100_SXM.group_link("nvlink", 2) == H100_SXM.link("nvlink") == 450e9
    assert H100_SXM.group_link("pcie", 2) == H100_SXM.link("pcie")



def test_fit_advice_says_when_the_fit_is_past_an_engines_memory_budget():
    """Llama 3 70B with fp8 weights on one H100 at batch 1 and 32,768 tokens: weights 68,451,041,280 B
    at fp8 plus the embedding and LM head (2 x 128,256 x 8,192) and 80 x 2 + 1 norms of 8,192 at bf16
    = 72,656,371,712 B, and a bf16 cache of 32,768 x 327,680 B = 10,737,418,240 B: 83.4 GB, which
    fits the 85,520,809,984 B the card reports but is 97.5% of it, past the 0.9 vLLM's
    gpu_memory_utilization lets an engine use; the advice says so. serving's Engine takes that 0.9."""
    from roofline.plan.memory import ENGINE_MEMORY_FRACTION, inference_memory
    from roofline.serving import Engine

    assert ENGINE_MEMORY_FRACTION == 0.9 == Engine().memory_fraction
    # the whole card (memory_fraction 1; the default is the engine's 0.9 already), plus a step's activations:
    # 8,192 x (2 x 28,672 + 4 x 8,192) x 2 + 256 x 128,256 x 4 = 1,476,395,008 + 131,334,144 B: 84.99 GB, 99%
    advice = inference_memory("llama3-70b", "h100-sxm", batch=1, context=32768, memory_fraction=1.0).advice
    assert "or on 1 with fp8 weights (85 GB: 99% of the memory, past the 0.9" in advice
    whole = dict(memory_fraction=1.0)
    assert "past the" not in inference_memory("llama3-70b", "h100-sxm", batch=1, context=8192, **whole).advice  # 76.9 GB: 90%
    assert "past the" not in inference_memory("llama3-70b", "h200", batch=1, context=8192, **whole).advice  # 141 GB: room to spare


def test_fp8_is_w8a8_with_bf16_between_ops():
    """--dtype fp8 on an H100 as engines run it (vLLM FP8 W8A8, TensorRT-LLM FP8): fp8 weights, KV
    cache and matmuls; the tensors between ops bf16. So at B = 16, S = 1,024, t = 2 over NVLink
    every non-matmul op (norms, residual adds, silu*mul, the all-reduce of B x 4,096 values) moves
    the same bytes as in bf16; each projection's weights are half (1 byte a weight, not 2) and run
    at the fp8 peak; the KV cache half (65,536 B a token, not 131,072)."""
    B, S = 16, 1024
    kw = dict(tensor_parallel=2, cost_model=PURE)
    f8 = decode_step("llama3-8b", H100_SXM, B, S, precision=Precision.uniform("fp8", H100_SXM), **kw)
    b16 = decode_step("llama3-8b", H100_SXM, B, S, **kw)
    ops8, ops16 = ({o.kernel.name: o for o in p.ops} for p in (f8, b16))
    for name in ("attn norm", "residual add", "silu*mul", "TP all-reduce (nvlink)"):
        assert ops8[name].kernel.bytes == ops16[name].kernel.bytes and ops8[name].kernel.dtype == "bf16", name
    assert ops16["TP all-reduce (nvlink)"].kernel.bytes > 0
    for name in ("QKV proj", "gate+up proj", "down proj"):
        assert ops8[name].weight_bytes == ops16[name].weight_bytes / 2 and ops8[name].kernel.dtype == "fp8", name
    assert ops8["LM head"].kernel.dtype == "bf16"  # kept unquantised, as ModelOpt leaves it
    assert f8.totals.kv_bytes == b16.totals.kv_bytes / 2 == B * S * 2 * 32 * 8 * 128 / 2  # per GPU of 2
    # --activations fp8 keeps every activation at fp8 as well
    all8 = Precision.resolve("llama3-8b", H100_SXM, "fp8", activations="fp8")
    assert all8 == Precision("fp8", "fp8", "fp8", matmul="fp8") and all8.compute == "fp8"


def test_a_dtype_flag_over_a_quantised_checkpoint_says_what_it_set_aside():
    # gpt-oss-20b's config.json stores its experts in MXFP4 (its quantization_config); --dtype fp8
    # prices fp8 instead, and the label must say the checkpoint's own storage was set aside
    flagged = Precision.resolve("gpt-oss-20b", H100_SXM, "fp8")
    assert flagged.stored is None and "mxfp4" in flagged.replaces
    assert "set aside the checkpoint's own storage (experts mxfp4" in flagged.label()
    stored = Precision.resolve("gpt-oss-20b", H100_SXM)
    assert stored.stored is not None and stored.replaces == "" and "set aside" not in stored.label()
    assert Precision.resolve("llama3-8b", H100_SXM, "fp8").replaces == ""  # nothing stored to set aside


def test_pipeline_stages_hold_their_layers_and_the_ends_the_embedding_and_head():
    """A reviewer's `train --tp 8 --pp 16` on Llama 3.1 405B with data parallel ranks failed ('n
    must be a whole number, got 3221288927.49': the stage's share of the parameters, prorated), and
    the stage's weights spread the embedding and LM head over every layer. Llama 3 8B over 4
    stages: a layer is 4,096 x (4,096 + 2 x 1,024) + 4,096^2 (attention) + 3 x 4,096 x 14,336 (MLP) +
    2 x 4,096 (norms) = 218,112,000; the last stage holds 8 of them, the 128,256 x 4,096 LM head and
    the final norm: 2,270,277,632, the largest (the first holds the embedding, the same size, no norm)."""
    from roofline.plan.train_memory import make_layout, stage_layers, stage_params

    assert stage_layers(126, 16) == [7] + [8] * 14 + [7]  # Meta's 405B: the end stages one layer short
    assert stage_layers(32, 4) == [8] * 4 and sum(stage_layers(61, 4)) == 61
    layer = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336 + 2 * 4096
    assert stage_params("llama3-8b", make_layout(4, pipeline_parallel=4)) == 8 * layer + 128256 * 4096 + 4096
    assert stage_params("llama3-8b", make_layout(1)) == 8_030_261_248
    # the 405B recipe, TP 8 x PP 16 x DP 128 with ZeRO 1, plans (its gradient all-reduce a whole stage's)
    plan = train_plan("llama3-405b", 15.6e12, 16384, tensor_parallel=8, pipeline_parallel=16, zero=1,
                      global_batch_tokens=16777216)
    tp, grads = plan.to_dict()["communication"]  # the TP group's all-reduces first, then the data ranks' gradients
    assert plan.tensor_parallel_ops == 1 and grads["name"].startswith("gradient all-reduce") and grads["time_s"] > 0
    assert plan.step_communication_s == pytest.approx(tp["time_s"] + grads["time_s"])


def test_a_4_bit_flag_says_its_block_scales_are_not_counted():
    """4-bit formats carry block scales (NVFP4: an fp8 per 16 values, +1/16 B a value = 12.5% of
    0.5 B; int4 AWQ: an fp16 per 128, 2/128 B = 3.1%), which 0.5 B a value leaves out: the label
    says so for 4-bit weights or KV set by a flag, not for 8-bit, and once in a sweep over machines."""
    from roofline.plan.precision import Precision

    assert "block scales not counted" in Precision("int4", "bf16", "bf16").label()
    assert "4-bit KV at 0.5 B" in Precision("bf16", "bf16", "fp4").label()
    assert "block scales" not in Precision("fp8", "fp8", "fp8").label()
    assert "block scales" not in Precision("int4", "bf16", "bf16").label(scales=False)
    from roofline.plan.render import sweep_table

    table = sweep_table(sweep("llama3-8b", ["b200", "h100-sxm"], over="machines",
                              precision=lambda m: Precision.resolve("llama3-8b", m, "fp4")))
    assert table.splitlines()[0].count("block scales not counted") == 1 and "4-bit values at 0.5 B" in table
    assert "MXFP4's per 32 6.25%" in table  # an 8-bit scale per 32 4-bit values: 8/32 = 0.25 bit of 4
    from roofline.plan.memory import inference_memory

    assert any("4-bit weights at 0.5 B a value, block scales not counted" in n
               for n in inference_memory(precision=Precision("int4", "bf16", "bf16")).notes)


def test_a_kv_cache_in_a_dtype_the_gpu_cannot_compute_in_is_said_to_be_storage():
    """An fp4 KV cache on an H100 (no fp4 peak on the datasheet) or fp8 on an A100 is costed as
    storage the attention dequantises as it reads it: the notes say so, and what to check; on a
    B200 (fp4 peak) and for fp8 on an H100 nothing is said."""
    from roofline.plan.memory import inference_memory

    def noted(machine, kv):
        return [n for n in inference_memory("llama3-8b", machine, precision=Precision("bf16", "bf16", kv)).notes
                if "which has no" in n]

    assert noted("h100-sxm", "fp4") == ["KV cache fp4 on the H100 SXM, which has no fp4 arithmetic: costed as 0.5 B a "
                                        "value of storage that the attention dequantises to bf16 as it reads it; check "
                                        "that your engine's attention kernels read an fp4 cache on this GPU"]
    assert noted("a100-80gb", "fp8") and not noted("b200", "fp4") and not noted("h100-sxm", "fp8")


@pytest.mark.parametrize("model", ["llama3-8b", "gemma3-27b", "mamba2-2.7b", "deepseek-v3"])
def test_a_chunks_closed_form_costs_what_its_kernels_cost(model):
    """A prompt chunk's sequence ops from their closed form in (C, P) equal the same ops built as
    kernels, with and without a cached prefix, far past the fitting points; a windowed kind has no
    closed form (its sums are not polynomial past the window) and builds its kernels."""
    from roofline.plan.step import StepCost

    fast = StepCost(model, "h200", tensor_parallel=8 if model == "deepseek-v3" else 1)
    slow = StepCost(model, "h200", tensor_parallel=8 if model == "deepseek-v3" else 1)
    slow._chunk_fits = [(None, None)] * len(slow._chunk_fits)
    for C, P in [(1, 0), (7, 0), (1000, 0), (3, 5), (512, 70_000), (8192, 131_072)]:
        for a, b in zip(fast._chunk_costs(C, P), slow._chunk_costs(C, P)):
            for x, y in zip(a, b):
                assert x[0] == pytest.approx(y[0], rel=1e-9) and x[1] == pytest.approx(y[1], rel=1e-9)
    if model == "gemma3-27b":
        assert fast._chunk_fits[0] == (None, None)  # its sliding-window kind


@pytest.mark.parametrize("key", ["llama3-8b", "gpt-oss-120b", "deepseek-v3", "jamba"])
def test_predict_model_ops_are_model_ops(key):
    # predict_model carries rows and makes its ops on demand: the same ops model_ops builds, re-priced alike
    from roofline.plan import predict_model
    from roofline.plan.model_ops import requantised, requantised_row

    cfg = get_model(key)
    link = resolve_link(get_machine("h100-sxm"), None)
    for precision in (None, Precision(weights="fp8", kv_cache="fp8")):
        for args in (("prefill", 512, 2, 1024), ("decode", 1, 4, 2048)):
            pred = predict_model(cfg, "h100-sxm", *args, precision=precision, tensor_parallel=2, link=link)
            assert list(pred.ops) == model_ops(cfg, *args, precision=precision, tensor_parallel=2, link=link)
    k = model_ops(cfg, "decode", 1, 4, 2048)[1].kernel
    q, weight_bytes, kv_bytes = requantised(k, Precision(weights="fp8"))
    assert (q.as_row(), weight_bytes, kv_bytes) == requantised_row(k.as_row(), Precision(weights="fp8"))


def test_plain_sizes_skip_the_per_op_check_and_agree_with_the_checked_and_general_paths():
    # predict_model vouches for int sizes (plain=True); the same rows looked at op by op, and a numpy
    # size (the general path, op by op through cost.op_times), give the same totals
    from roofline.plan import predict_model
    from roofline.plan.model_ops import model_rows, totals_of_rows

    m = get_machine("h100-sxm")
    cm = default_cost_model(m)
    rows = model_rows(get_model("gpt-oss-120b"), "decode", 1, 8, 4096, "flash", None, 1, None)
    assert totals_of_rows(rows, m, cm, plain=True) == totals_of_rows(rows, m, cm)
    one = predict_model("gpt-oss-120b", "h100-sxm", "decode", 1, 8, 4096)
    both = predict_model("gpt-oss-120b", "h100-sxm", "decode", 1, np.array([8, 16]), 4096)
    assert both.time_s[0] == pytest.approx(one.time_s, rel=1e-12)
    assert both.flops[0] == pytest.approx(one.flops, rel=1e-12)
