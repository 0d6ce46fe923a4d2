"""One transformer block as a list of kernels (seed 003's workshop, SPEC C5).

Prefill: T tokens per sequence, batch B, causal attention over the T tokens.
Decode: one new token per sequence at context S (keys already cached), batch B.
Attention is "naive" (QK^T, softmax and PV as three kernels with the scores in memory, as
seed 003's workshop has it) or "flash" (one kernel; only Q, K, V and O touch memory).

Byte counts (w bytes per element): matmul w (MK + KN + MN); RMSNorm reads and writes the
(BT, D) activations; the residual add reads two and writes one; SiLU-and-multiply reads 2 BT F
and writes BT F. Weights of norms are ignored. The new token's K and V are counted as part of the
QKV projection's output; appending them to the cache is not a separate op.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.cost import CostModel, WorkloadPrediction, seed_cost_model
from roofline.errors import MAX_COUNT, RooflineError, check_choice, check_number
from roofline.kernels import (
    Kernel,
    attention_pv_kernel,
    attention_scores_kernel,
    elementwise_kernel,
    flash_attention_kernel,
    layernorm_kernel,
    matmul_kernel,
    rmsnorm_kernel,
    softmax_kernel,
)
from roofline.machines import Machine, get_machine
from roofline.transformer import TransformerConfig, get_model
from roofline.units import dtype_bytes

PHASES = ("prefill", "decode")
ATTENTIONS = ("naive", "flash")


def expected_experts_touched(n_experts, experts_per_token, n_tokens):
    """Experts that n tokens, each routed to k of E uniformly, are expected to touch:
    E (1 - (1 - k/E)^n)."""
    return n_experts * (1.0 - (1.0 - experts_per_token / n_experts) ** np.asarray(n_tokens, dtype=float))


def _norm(cfg: TransformerConfig, n_tokens, w, name) -> Kernel:
    if cfg.norm == "layernorm":
        return layernorm_kernel(n_tokens, cfg.d_model, w, name=name)
    return rmsnorm_kernel(n_tokens, cfg.d_model, w, name=name)


def _mlp(cfg: TransformerConfig, M, w) -> list[Kernel]:
    """The feed-forward half's matmuls and activation for M = B T token rows."""
    D, F = cfg.d_model, cfg.expert_d_ff
    if cfg.is_moe:
        wb = dtype_bytes(w)
        k, E = cfg.experts_per_token, cfg.n_experts
        touched = expected_experts_touched(E, k, M) + cfg.n_shared_experts
        rows = M * (k + cfg.n_shared_experts)  # token-expert pairs
        n_mats = 3 if cfg.gated_mlp else 2
        ops = [matmul_kernel(M, E, D, w, name="router")]
        up = n_mats - 1
        ops.append(Kernel("expert gate+up proj" if cfg.gated_mlp else "expert up proj",
                          2.0 * rows * D * F * up, wb * (rows * D + touched * up * D * F + rows * up * F), "matmul", w))
        if cfg.gated_mlp:
            ops.append(elementwise_kernel(rows * F, n_inputs=2, n_outputs=1, flops_per_elem=5.0, bytes_per_elem=w, name="silu*mul"))
        else:
            ops.append(elementwise_kernel(rows * F, flops_per_elem=8.0, bytes_per_elem=w, name="gelu"))
        ops.append(Kernel("expert down proj", 2.0 * rows * F * D, wb * (rows * F + touched * F * D + rows * D), "matmul", w))
        return ops
    if cfg.gated_mlp:
        return [
            matmul_kernel(M, 2 * F, D, w, name="gate+up proj"),
            elementwise_kernel(M * F, n_inputs=2, n_outputs=1, flops_per_elem=5.0, bytes_per_elem=w, name="silu*mul"),
            matmul_kernel(M, D, F, w, name="down proj"),
        ]
    return [
        matmul_kernel(M, F, D, w, name="up proj"),
        elementwise_kernel(M * F, flops_per_elem=8.0, bytes_per_elem=w, name="gelu"),
        matmul_kernel(M, D, F, w, name="down proj"),
    ]


def block_kernels(
    cfg,
    phase: str = "prefill",
    tokens=8192,
    batch=1,
    context=None,
    attention: str = "naive",
    dtype: str = "bf16",
) -> list[Kernel]:
    """The ops of one block, in execution order. ``tokens`` is T (prefill); ``context`` is S
    (decode: keys already in the cache, default ``tokens``). Sizes may be numpy arrays."""
    cfg = get_model(cfg)
    check_choice("phase", phase, PHASES)
    check_choice("attention", attention, ATTENTIONS)
    dtype_bytes(dtype)
    w = dtype
    check_number("batch", batch, maximum=MAX_COUNT, integer=True)
    if phase == "prefill":
        check_number("tokens", tokens, maximum=MAX_COUNT, integer=True)
        T, S, causal = tokens, tokens, True
    else:
        S = tokens if context is None else context
        check_number("context", S, maximum=MAX_COUNT, integer=True)
        T, causal = 1, False
    B, D, H, K, d = batch, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    M = B * T  # token rows through the matmuls
    rows = np.asarray(M, dtype=float)
    if np.any(rows * max(D, cfg.d_ff) > MAX_COUNT):
        raise RooflineError(f"batch x tokens = {np.max(rows):.3g} token rows is too large for a {cfg.name} block", field="batch")
    if np.any(rows * H * np.asarray(S, dtype=float) > 1e18):
        raise RooflineError(f"batch x heads x tokens x context = {np.max(rows * H * np.asarray(S, dtype=float)):.3g} "
                            "attention scores is too large", field="context" if phase == "decode" else "tokens")
    att = dict(heads=H, kv_heads=K, batch=B, causal=causal, context=S, bytes_per_elem=w)
    if attention == "naive":
        attn_ops = [
            attention_scores_kernel(T, d, name="QK^T", **att),
            softmax_kernel(B * H * T, S, w, causal=causal, name="softmax"),
            attention_pv_kernel(T, d, name="PV", **att),
        ]
    else:
        attn_ops = [flash_attention_kernel(T, d, w, heads=H, kv_heads=K, batch=B, causal=causal, context=S,
                                           name="flash attention")]
    return [
        _norm(cfg, M, w, "attn norm"),
        matmul_kernel(M, cfg.attn_dim + 2 * cfg.kv_dim, D, w, name="QKV proj"),
        *attn_ops,
        matmul_kernel(M, D, cfg.attn_dim, w, name="out proj"),
        elementwise_kernel(M * D, n_inputs=2, n_outputs=1, bytes_per_elem=w, name="residual add"),
        _norm(cfg, M, w, "ffn norm"),
        *_mlp(cfg, M, w),
        elementwise_kernel(M * D, n_inputs=2, n_outputs=1, bytes_per_elem=w, name="residual add 2"),
    ]


@dataclass(frozen=True)
class LayerReport:
    """One block's prediction with the configuration that produced it."""

    machine_key: str
    model: str
    phase: str
    tokens: int
    batch: int
    context: int
    attention: str
    dtype: str
    prediction: WorkloadPrediction

    def to_dict(self) -> dict:
        pred = self.prediction.to_dict()
        cost_model = pred.pop("model", "roofline cost model")
        pred.setdefault("compute_efficiency", None)  # a calibrated model has measured rates instead
        pred.setdefault("memory_efficiency", None)
        head = {
            "machine": self.machine_key,
            "machine_name": pred.pop("machine"),
            "model": self.model,
            "phase": self.phase,
            "tokens": self.tokens,
            "batch": self.batch,
            "context": self.context,
            "attention": self.attention,
            "dtype": self.dtype,
        }
        return {**head, "cost_model": cost_model, **pred}


def layer_report(
    model="llama3-8b",
    machine="h100-sxm",
    phase: str = "prefill",
    tokens: int = 8192,
    batch: int = 1,
    context: int | None = None,
    attention: str = "naive",
    dtype: str = "bf16",
    cost_model: CostModel | None = None,
) -> LayerReport:
    """Predict one block of ``model`` on ``machine`` (defaults: seed 003's workshop, with the
    machine's preset launch overhead when no cost model is given)."""
    cfg = get_model(model)
    m: Machine = get_machine(machine)
    if cost_model is None:
        cost_model = seed_cost_model(launch_overhead_s=m.launch_overhead_s)
    kernels = block_kernels(cfg, phase, tokens, batch, context, attention, dtype)
    S = tokens if (phase == "prefill" or context is None) else context
    return LayerReport(
        machine_key=m.key or m.name,
        model=cfg.key or cfg.name,
        phase=phase,
        tokens=tokens if phase == "prefill" else 1,
        batch=batch,
        context=S,
        attention=attention,
        dtype=dtype,
        prediction=cost_model.predict(kernels, m),
    )
