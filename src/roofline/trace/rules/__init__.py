"""FLOPs and bytes of one aten op from its shapes: one small pure function per op, registered by
a decorator that refuses duplicates. No torch here: a rule sees shapes, dtypes and plain values,
so the same rule costs an op recorded on the meta device (trace) and one read back from a
profiler trace (profile).

Conventions (the roofline chapter, section 2.3; the style of torch/utils/flop_counter.py):

- 1 FMA = 2 FLOPs; matmul = 2MNK; bias adds and epilogues are not counted (as FlopCounterMode and
  kernels.matmul_kernel).
- Attention counts QK^T and PV in full, 2 B H T S (d_qk + d_v), even when causal: FlopCounterMode's
  and the PaLM / Megatron convention. The softmax inside a fused attention kernel is not counted.
- Elementwise ops, softmax, norms and activations: FLOPs per element from kernels.FLOPS_PER_ELEMENT,
  the table the block model counts with (1 per output element for plain pointwise ops).
  Reductions: 1 per input element.
- bytes = every distinct input element read once + every output element written once, at the
  tensors' own dtypes. An expanded (stride-0) dimension is read once: the copies come from cache.
  Views, metadata and allocations cost nothing and are registered at zero, explicitly.

An op with no rule is never costed as zero: the recorder lists it as unsupported.

    registry.py   TensorSpec, Call, Cost, Rule and the decorator; RULES, get_rule
    matmul.py     mm, addmm, bmm, grouped mm, mv, dot, convolution (and gemm_shape, kernel_shape)
    attention.py  fused attention
    vector.py     norms, softmax, elementwise, reductions
    movement.py   gathers, copies, fills; views at zero

Importing this package registers every rule.
"""

from roofline.trace.rules.registry import (ITEMSIZE, RULES, Call, Cost, Rule, TensorSpec, get_rule, io_bytes, out_numel,
                                           rule, written)
from roofline.trace.rules import attention, matmul, movement, vector  # noqa: E402 - each registers its rules
from roofline.trace.rules.matmul import gemm_shape, kernel_shape

__all__ = ["ITEMSIZE", "RULES", "Call", "Cost", "Rule", "TensorSpec", "attention", "gemm_shape", "get_rule", "kernel_shape", "io_bytes",
           "matmul", "movement", "out_numel", "rule", "vector", "written"]
