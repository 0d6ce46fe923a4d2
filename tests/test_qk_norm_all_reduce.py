"""A layer-wide q/k RMSNorm under tensor parallelism (MiniMax-M2's per_layer qk norm: each GPU holds 1/t of the heads
the norm runs over) all-reduces each token's q and k variances once a layer (vLLM's MiniMaxText01RMSNormTP /
minimax_qk_norm_fusion): model_ops.qk_norm_all_reduce_op, in the serving step, the model planner and `roofline layer`."""

from __future__ import annotations

import pytest

from roofline.plan.model_ops import qk_norm_all_reduces
from roofline.plan.parallel import shard
from roofline.plan.step import StepCost
from roofline.transformer import get_model


def _ops(model: str, tp: int, decodes: int = 4):
    step = StepCost(model, "b200", tensor_parallel=tp, max_tokens=8192, max_seqs=64)
    return step, {o.name: o for o in step.ops(decode_contexts=[1536] * decodes)}


def test_minimax_reduces_its_qk_variances_once_a_layer():
    # MiniMax-M2.5: 62 layers (config.json num_hidden_layers), every one full attention with qk_norm_type per_layer
    step, ops = _ops("minimax-m2.5", 4)
    ar = ops["TP q/k-norm all-reduce (nvlink)"]
    assert ar.count == 62 and qk_norm_all_reduces(shard(get_model("minimax-m2.5"), 4)) == 62
    # 4 tokens x 2 fp32 variances = 32 bytes summed over 4 GPUs: a ring sends 2 x 3/4 x 32 = 48 bytes a GPU, 62 times
    assert ar.bytes == pytest.approx(62 * 48)
    assert ar.time_s > 0


@pytest.mark.parametrize("model, tp", [("minimax-m2.5", 1), ("qwen3-32b", 4), ("llama3-8b", 2)])
def test_no_such_all_reduce_on_one_gpu_or_a_per_head_norm(model, tp):
    _, ops = _ops(model, tp)
    assert not any("q/k-norm" in name for name in ops)


def test_a_prompt_step_dispatches_them_too():
    """Outside a CUDA graph each is one more op the host dispatches: 62 more than the same layers without them."""
    step = StepCost("minimax-m2.5", "b200", tensor_parallel=4, max_tokens=8192, max_seqs=64)
    alone = StepCost("minimax-m2.5", "b200", tensor_parallel=1, max_tokens=8192, max_seqs=64)
    assert step.eager_ops(0, True) - alone.eager_ops(0, True) == 62 + step._reduces


def test_the_layer_command_lists_it():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "roofline", "layer", "--model", "minimax-m2.5", "--machine", "b200",
                          "--tp", "4", "--tokens", "16"], capture_output=True, text=True, check=True).stdout
    assert "2 all-reduces and 1 of the q/k norm's variances over nvlink" in out
    assert "TP q/k-norm all-reduce (nvlink)" in out


def test_olmo2_gathers_q_and_k_instead_and_says_so(tmp_path):
    """OLMo-2's q/k norm spans all heads too, but vLLM and SGLang all-gather q and k for it (Olmo2Attention.
    _apply_qk_norm), not the variances: no variance all-reduce is costed, and the run's notes say what is left out.
    The config: OLMo-2 7B's published config.json keys (allenai/OLMo-2-1124-7B)."""
    import json

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_size": 4096,
                               "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
                               "num_hidden_layers": 32, "vocab_size": 100352, "rms_norm_eps": 1e-06,
                               "rope_theta": 500000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
                               "hidden_act": "silu", "attention_bias": False, "torch_dtype": "bfloat16"}))
    step = StepCost(str(cfg), "h100-sxm", tensor_parallel=4, max_tokens=8192, max_seqs=64)
    ops = {o.name for o in step.ops(decode_contexts=[1024] * 4)}
    assert not any("q/k-norm" in name for name in ops)
    assert any("all-gather q and k" in n for n in step.notes())
    assert not any("all-gather q and k" in n for n in StepCost(str(cfg), "h100-sxm", max_tokens=8192).notes())


@pytest.mark.parametrize("recompute, per_layer", [("none", 2), ("full", 3)])
def test_training_reduces_the_variances_forward_and_backward(recompute, per_layer):
    """A training step under TP 8: once forward, once backward (the norm's gradient sums over the whole width), once
    more when full recompute reruns the forward; MiniMax-M2.5's 62 layers, one micro-batch of 8,192 tokens."""
    from roofline.plan.train_memory import make_layout
    from roofline.plan.training import step_collectives

    ops, _, _ = step_collectives("minimax-m2.5", "h100-sxm", make_layout(64, tensor_parallel=8), 8192, recompute)
    qk = {o.kernel.name: o.count for o in ops}
    assert qk["TP q/k-norm all-reduce (nvlink)"] == per_layer * 62
    ops, _, _ = step_collectives("qwen3-32b", "h100-sxm", make_layout(64, tensor_parallel=8), 8192, recompute)
    assert not any("q/k-norm" in o.kernel.name for o in ops)  # a per-head norm needs no reduction
