"""Rules of fused attention (SDPA flash / efficient / cuDNN and the varlen forwards): QK^T and PV
counted in full, 2 B H T S (d_qk + d_v), even when causal; the softmax inside is not counted.
"""

from __future__ import annotations

import math

from roofline.op_counts import fused_attention_flops
from roofline.trace.rules.registry import Call, Cost, TensorSpec, io_bytes, rule


def _attention_flops(q: tuple, k: tuple, v: tuple) -> float:
    """q (B, H, T, d), k (B, K, S, d), v (B, K, S, d_v): QK^T is 2 B H T S d and PV 2 B H T S d_v
    (grouped-query heads broadcast, as FlopCounterMode's sdpa_flop_count): op_counts.fused_attention_flops
    of B H T S score elements, the softmax not counted."""
    B, H, T, d = q
    S, d_v = k[2], v[3]
    return fused_attention_flops(B * H * T * S, d, d_v)


def _attention_bytes(call: Call, out_shape: tuple) -> float:
    """Inputs read once, outputs written once, O at ``out_shape``: its head dim is V's, d_v. The
    meta kernels of the flash family return O shaped like Q (torch's flash kernel needs one head
    dim for Q, K and V), which with MLA's d_qk != d_v would count O at d_qk."""
    if not call.outputs:
        return io_bytes(call)
    out = call.outputs[0]
    return io_bytes(call) - out.write_bytes + math.prod(out_shape) * out.itemsize


@rule("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
      "aten::_scaled_dot_product_cudnn_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
      "aten::_scaled_dot_product_fused_attention_overrideable", category="attention")
def fused_attention(call: Call) -> Cost:
    """Fused attention (flash / memory-efficient / cuDNN), q (B, H, T, d), k (B, K, S, d), v (B, K,
    S, d_v): flops = 2 B H T S d (QK^T) + 2 B H T S d_v (PV), full even when causal; bytes = Q, K,
    V (and a mask) read at their own shapes, O (B, H, T, d_v) and the log-sum-exp written: the
    T x S scores never reach memory."""
    q, k, v = (call.tensor(i).shape for i in range(3))
    return Cost(_attention_flops(q, k, v), _attention_bytes(call, q[:3] + v[3:]))


# where the cumulative sequence lengths of a ragged batch sit in each kernel's schema:
# _flash_attention_forward(q, k, v, cum_seq_q, cum_seq_k, ...),
# _efficient_attention_forward(q, k, v, bias, cu_seqlens_q, cu_seqlens_k, ...)
_CU_SEQLENS = {"aten::_flash_attention_forward": (3, 4), "aten::_efficient_attention_forward": (4, 5)}


@rule(*_CU_SEQLENS, category="attention")
def attention_forward(call: Call) -> Cost | None:
    """The flash-attn / xformers kernels, (B, T, H, d) layout: flops = 2 B H T S (d + d_v); bytes =
    Q, K, V and the efficient kernel's additive bias (when given) read, O (B, T, H, d_v) and the
    log-sum-exp written. Dense batches only (a ragged batch, with cumulative sequence lengths, is
    reported as unsupported)."""
    if any(i < len(call.args) and isinstance(call.args[i], TensorSpec) for i in _CU_SEQLENS[call.op]):
        return None
    (B, T, H, d), (_, S, K, _), (_, _, _, d_v) = (call.tensor(i).shape for i in range(3))
    return Cost(_attention_flops((B, H, T, d), (B, K, S, d), (B, K, S, d_v)), _attention_bytes(call, (B, T, H, d_v)))
