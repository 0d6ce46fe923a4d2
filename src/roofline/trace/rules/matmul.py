"""Rules of the matmul family: mm, addmm, bmm, baddbmm, grouped mm, mv, dot, convolution; 1 FMA =
2 FLOPs, matmul = 2MNK (op_counts.matmul_flops, the kernels' rule), bias and epilogue not counted.
"""

from __future__ import annotations

import math

from roofline.op_counts import matmul_flops
from roofline.trace.rules.registry import Call, Cost, get_rule, io_bytes, rule


# Where each matmul op keeps its operands among its inputs: (index of A, index of B).
_GEMM_OPERANDS = {"aten::mm": (0, 1), "aten::_scaled_mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1),
                  "aten::baddbmm": (1, 2), "aten::mv": (0, 1)}


def gemm_shape(op: str, shapes) -> tuple:
    """(batch, M, N, K) of a matmul op from its tensor input shapes (the profiler's "Input Dims" or
    a traced call's), () when the op is not a plain GEMM or the shapes do not say: what a
    calibrated GEMM rate is read at (a skinny M runs at another rate than a square matmul)."""
    where = _GEMM_OPERANDS.get(op)
    if where is None:
        return ()
    try:
        a, b = tuple(shapes[where[0]]), tuple(shapes[where[1]])
        if op == "aten::mv":
            return (1, int(a[0]), 1, int(a[1]))
        if len(a) == 2 and len(b) == 2:
            return (1, int(a[0]), int(b[1]), int(a[1]))
        if len(a) == 3 and len(b) == 3:
            return (int(a[0]), int(a[1]), int(b[2]), int(a[2]))
    except (IndexError, TypeError, ValueError):
        pass
    return ()


ROW_OPS = frozenset({"aten::_softmax", "aten::_log_softmax", "aten::_safe_softmax", "aten::topk",
                     "aten::_fused_rms_norm", "aten::native_layer_norm", "aten::sum", "aten::mean", "aten::amax"})


STRIDED = "strided"  # kernel_shape of an op reading a non-contiguous input: (STRIDED,)


def is_strided(dims, strides) -> bool:
    """Whether a tensor of these dims and strides is a non-contiguous view (a chunk, a slice, a
    transpose): some dimension longer than 1 steps by other than the row-major stride. A
    broadcast (stride 0) is not: it reads less, not scattered."""
    try:
        dims, strides = [int(d) for d in dims], [int(s) for s in strides]
    except (TypeError, ValueError):
        return False
    if len(dims) != len(strides):
        return False
    step = 1
    for d, st in zip(reversed(dims), reversed(strides)):
        if d > 1 and st not in (step, 0):
            return True
        step *= max(d, 1)
    return False


def kernel_shape(op: str, shapes, strides=None) -> tuple:
    """What a calibrated rate is read at: a matmul's (batch, M, N, K) (gemm_shape), or a row-wise
    op's (rows, width) from its first input, the width its last dimension (softmax, top-k, norms
    and sums over the last dimension, as transformer code runs them: a router's softmax over 8
    experts runs many times slower per byte than one over 1,024 columns); (STRIDED,) for an
    elementwise op with a non-contiguous tensor input when ``strides`` (the profiler's "Input Strides", one
    per input) say so (on a CPU a strided silu read after a cache flush ran ~2x a contiguous
    one); () otherwise."""
    got = gemm_shape(op, shapes)
    if got:
        return got
    if op not in ROW_OPS:
        rule = get_rule(op)
        if (strides and rule is not None and rule.category == "elementwise"
                and any(is_strided(d, st) for d, st in zip(shapes, strides)
                        if isinstance(d, (list, tuple)) and isinstance(st, (list, tuple)) and d)):
            return (STRIDED,)
        return ()
    try:
        first = tuple(int(x) for x in shapes[0])
    except (IndexError, TypeError, ValueError):
        return ()
    if len(first) < 1 or min(first, default=0) < 1:
        return ()
    rows = 1
    for x in first[:-1]:
        rows *= x
    return (rows, first[-1])


@rule("aten::mm", "aten::_scaled_mm", category="matmul")
def mm(call: Call) -> Cost:
    """(M, K) @ (K, N): flops = 2MNK."""
    (M, K), (_, N) = call.tensor(0).shape, call.tensor(1).shape
    return Cost(matmul_flops(M, N, K), io_bytes(call))


@rule("aten::addmm", category="matmul")
def addmm(call: Call) -> Cost:
    """bias + (M, K) @ (K, N): flops = 2MNK (the bias add is not counted)."""
    (M, K), (_, N) = call.tensor(1).shape, call.tensor(2).shape
    return Cost(matmul_flops(M, N, K), io_bytes(call))


@rule("aten::bmm", category="matmul")
def bmm(call: Call) -> Cost:
    """(b, M, K) @ (b, K, N): flops = 2 b MNK."""
    (b, M, K), (_, _, N) = call.tensor(0).shape, call.tensor(1).shape
    return Cost(matmul_flops(M, N, K, b), io_bytes(call))


@rule("aten::baddbmm", category="matmul")
def baddbmm(call: Call) -> Cost:
    """self + (b, M, K) @ (b, K, N): flops = 2 b MNK."""
    (b, M, K), (_, _, N) = call.tensor(1).shape, call.tensor(2).shape
    return Cost(matmul_flops(M, N, K, b), io_bytes(call))


@rule("aten::_grouped_mm", "aten::_scaled_grouped_mm", category="matmul")
def grouped_mm(call: Call) -> Cost:
    """torch._grouped_mm(A, B, offs): G matmuls in one kernel (a MoE layer's routed experts; the
    scaled variant is its fp8 form, scales read too). The four layouts, each group g of size n_g:

    - A (M, K) @ B (G, K, N), offs the ends of each group's rows of A: out (M, N), 2 sum n_g K N;
    - A (G, M, K) @ B (K, N), offs splitting N: out (M, N), 2 M K sum n_g;
    - A (M, K) @ B (K, N), offs splitting K (a weight gradient): out (G, M, N), 2 M N sum n_g;
    - A (G, M, K) @ B (G, K, N), no offs: a bmm, out (G, M, N), 2 G M K N.

    The offsets are data, unknown on the meta device, so the split dimension is taken as fully
    assigned (sum n_g = M, N or K): flops = 2MKN (2GMKN batched), however the rows are routed.
    bytes = w (A + B + out) + the G int32 offsets: every input read once, B whole, i.e. all G
    experts' weights (a decode step that routes its tokens to fewer experts reads fewer: an upper
    bound there). Bias not counted. FlopCounterMode (torch 2.13) has no formula for this op and
    counts it as zero, so the tests check it against per-group mm calls instead."""
    a, b = call.tensor(0).shape, call.tensor(1).shape
    if len(a) == 3 and len(b) == 3:
        groups, (M, K), N = a[0], a[1:], b[2]
    elif len(a) in (2, 3) and len(b) in (2, 3):
        groups, (M, K), N = 1, a[-2:], b[-1]
    else:
        raise ValueError(f"{call.op}: A and B must be 2D or 3D")
    return Cost(matmul_flops(M, N, K, groups), io_bytes(call))


@rule("aten::mv", category="matmul")
def mv(call: Call) -> Cost:
    """(M, N) @ (N,): flops = 2MN, an (M, N) @ (N, 1) matmul."""
    M, N = call.tensor(0).shape
    return Cost(matmul_flops(M, 1, N), io_bytes(call))


@rule("aten::addmv", category="matmul")
def addmv(call: Call) -> Cost:
    """self + (M, N) @ (N,): flops = 2MN, an (M, N) @ (N, 1) matmul."""
    M, N = call.tensor(1).shape
    return Cost(matmul_flops(M, 1, N), io_bytes(call))


@rule("aten::dot", "aten::vdot", category="matmul")
def dot(call: Call) -> Cost:
    """(n,) . (n,): flops = 2n, a (1, n) @ (n, 1) matmul."""
    return Cost(matmul_flops(1, 1, call.tensor(0).numel), io_bytes(call))


@rule("aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::_slow_conv2d_forward",
      "aten::convolution_overrideable", "aten::mkldnn_convolution", category="conv")
def convolution(call: Call) -> Cost:
    """x (N, C_in, *spatial) * w (C_out, C_in/groups, *kernel): flops = 2 N C_out (C_in/groups)
    prod(kernel) prod(out spatial); a transposed convolution iterates over the input's spatial
    points instead (FlopCounterMode's conv_flop_count): the implicit GEMM (N prod(spatial), C_in/groups
    prod(kernel)) @ (C_in/groups prod(kernel), C_out). Bias not counted."""
    x, w = call.tensor(0), call.tensor(1)
    has_flag = call.op in ("aten::convolution", "aten::_convolution", "aten::convolution_overrideable")
    transposed = has_flag and len(call.args) > 6 and call.args[6] is True
    spatial = (x.shape if transposed else call.outputs[0].shape)[2:]
    c_out, c_in, *kernel = w.shape
    return Cost(matmul_flops(x.shape[0] * math.prod(spatial), c_out, c_in * math.prod(kernel)), io_bytes(call))
