"""The pure count rules (op_counts) and their one home: the checked constructors (kernels), the layer
builder (op_builder) and the whole-model ops of the planner (plan.model_ops) and the serving step
(plan.step_layout) all give the same FLOPs and bytes for the same op."""

import pytest

from roofline import op_counts as oc
from roofline.kernels import (embedding_kernel, flash_attention_kernel, matmul_kernel, naive_attention_kernel,
                              rmsnorm_kernel)
from roofline.op_builder import builder_for
from roofline.plan.model_ops import embedding_op, logits_ops, model_ops, tp_all_reduces
from roofline.plan.step import StepCost
from roofline.transformer import get_model


def test_rules_by_hand():
    # (2, 4) @ (4, 3) in bf16: 2 x 2 x 3 x 4 = 48 FLOPs; 2 B x (2x4 + 4x3 + 2x3 = 26) = 52 bytes
    assert oc.matmul_counts(2, 3, 4, 2.0) == (48.0, 52.0)
    # 5 of them: 240 FLOPs, 260 bytes
    assert oc.batched_matmul_counts(5, 2, 3, 4, 2.0) == (240.0, 260.0)
    # 6 rows to 3 touched experts of (D 4 -> 2 x F 5), gated: 2 x 6 x 4 x 5 x 2 = 480 FLOPs;
    # 1 B x (6x4 + 3x2x4x5 + 6x2x5 = 24 + 120 + 60) = 204 bytes
    assert oc.expert_matmul_counts(6, 4, 5, 2, 3, 1.0) == (480.0, 204.0)
    # RMSNorm over 10 elements: 4 x 10 = 40 FLOPs; 2 x 2 B x 10 = 40 bytes
    assert oc.row_op_counts(10, 4.0, 2.0) == (40.0, 40.0)
    # a residual add of 10 elements, 2 read and 1 written: 10 FLOPs, 2 B x 10 x 3 = 60 bytes
    assert oc.elementwise_counts(10, 2, 1, 1.0, 2.0) == (10.0, 60.0)
    # 3 rows of 8 gathered: 2 x 2 B x 3 x 8 = 96 bytes
    assert oc.gather_bytes(3, 8, 2.0) == 96.0
    # 12 score elements of d 4: 2 x 12 x 4 = 96 FLOPs; 2 B x (q 8 + k 16 + 12) = 72 bytes
    assert oc.scores_counts(12, 8, 16, 4, 2.0) == (96.0, 72.0)
    assert oc.pv_counts(12, 16, 8, 4, 2.0) == (96.0, 72.0)
    # fused: 2 x 12 x (4 + 4) + 5 x 12 = 252 FLOPs; 2 B x (8 + 16 + 16 + 8) = 96 bytes
    assert oc.fused_attention_counts(12, 8, 16, 16, 8, 4, 4, 2.0, 5.0) == (252.0, 96.0)


def test_constructors_share_the_rules():
    o = builder_for("bf16")
    k, b = matmul_kernel(64, 128, 256), o.mm("x", 64, 128, 256)
    assert (k.flops, k.bytes) == (b.flops, b.bytes) == oc.matmul_counts(64, 128, 256, 2.0)
    k, b = rmsnorm_kernel(64, 4096), o.norm("x", 64, 4096)
    assert (k.flops, k.bytes) == (b.flops, b.bytes)
    assert embedding_kernel(64, 4096).bytes == embedding_op(64, 4096, "bf16").bytes
    # naive attention = flash attention's FLOPs; its bytes add the scores and P written and read: 4 x 2 B x n_s
    n_s = 2 * 32 * 512 * 512 / 2  # batch 2, 32 heads, causal T = S = 512: T S / 2 pairs a head
    f, n = flash_attention_kernel(512, 128, heads=32, kv_heads=8, batch=2, causal=True), \
        naive_attention_kernel(512, 128, heads=32, kv_heads=8, batch=2, causal=True)
    assert n.flops == f.flops and n.bytes - f.bytes == pytest.approx(4 * 2.0 * n_s)


def test_planner_and_serving_step_share_the_whole_model_ops():
    cfg = get_model("llama3-8b")
    ops = {op.kernel.name: op for op in model_ops(cfg, "decode", 1, 16, 1024)}
    step = StepCost(cfg, "h100-sxm", max_tokens=64, max_seqs=32)
    norm, head = step._logits(16.0)
    assert (norm.flops, norm.bytes) == (ops["final norm"].kernel.flops, ops["final norm"].kernel.bytes)
    assert (head.flops, head.bytes) == (ops["LM head"].kernel.flops, ops["LM head"].kernel.bytes)
    # LM head of 16 rows: 2 x 16 x 128,256 x 4,096 FLOPs
    assert head.flops == 2 * 16 * 128256 * 4096
    emb = step._embedding(16.0)
    assert (emb.flops, emb.bytes) == (ops["embedding"].kernel.flops, ops["embedding"].kernel.bytes)
    assert [k.name for k in logits_ops(1, cfg, "bf16")] == ["final norm", "LM head"]
    # Llama 3 8B: 32 layers x 2 all-reduces (after attention's out proj, after the MLP's down proj)
    assert tp_all_reduces(cfg) == 64


def test_mixed_widths_and_flop_rules_by_hand():
    # (2, 4) @ (4, 3): 2 x 2 x 3 x 4 = 48 FLOPs; five of them 240
    assert oc.matmul_flops(2, 3, 4) == 48.0 and oc.matmul_flops(2, 3, 4, 5) == 240.0
    # fp8 inputs (1 B) writing bf16 (2 B): 1 x (2x4 + 4x3) + 2 x (2x3) = 20 + 12 = 32 bytes
    assert oc.matmul_counts(2, 3, 4, 1.0, 2.0) == (48.0, 32.0)
    # 6 rows, 3 touched experts (D 4 -> 2 x F 5), bf16 activations, 0.5 B weights:
    # 2 x (6x4 + 6x2x5 = 84) + 0.5 x (3x2x4x5 = 120) = 168 + 60 = 228 bytes
    assert oc.expert_matmul_counts(6, 4, 5, 2, 3, 2.0, 0.5) == (480.0, 228.0)
    # 12 score elements, d 4, dv 4: 2 x 12 x 8 = 192 FLOPs; with a 5-FLOP softmax + 60
    assert oc.fused_attention_flops(12, 4, 4) == 192.0 and oc.fused_attention_flops(12, 4, 4, 5.0) == 252.0


def test_measured_rooflines_take_the_rules():
    from roofline.machines import get_machine
    from roofline.measured.attention import attention_roofline_s
    from roofline.measured.gemm import roofline_s
    from roofline.measured.moe import module_roofline_s

    m = get_machine("h100-sxm")
    # fp8 GEMM 1024^3: 2 x 2^30 FLOPs; 1 B x (2^20 + 2^20) + 2 B x 2^20 = 4 x 2^20 bytes
    assert roofline_s(m, "fp8", 1024, 1024, 1024) == max(2.0 * 2**30 / m.peak("fp8"), 4.0 * 2**20 / m.bandwidth)
    # bf16 module, 4 tokens top-2 of 3 experts, D 8, F 4, gated: rows 8, touched 3;
    # 2 x 8 x 8 x 4 x 3 = 1,536 FLOPs; 2 B x 3 x 3 x 8 x 4 = 576 weights + 2 B x 8 x (16 + 12) = 448 activations
    assert module_roofline_s(m, "bfloat16", 4.0, 8, 4, 2, 3) == max(1536.0 / m.peak("bf16"), 1024.0 / m.bandwidth)
    # decode, B 2, S 10, H 4, K 2, d 8: 4 x 2 x 4 x 10 x 8 = 2,560 FLOPs;
    # 2 B x (2 x 2x4x1x8 + 2 x 2x2x10x8 = 128 + 640) = 1,536 bytes
    got = attention_roofline_s(m, "bf16", 2.0, 1.0, 10.0, 4.0, 2.0, 8.0, 0, True)
    assert got == max(2560.0 / m.peak("bf16"), 1536.0 / m.bandwidth)
