"""Rules of the vector ops: norms and softmax, elementwise ops and activations (FLOPs per element
from op_counts.FLOPS_PER_ELEMENT), reductions (1 FLOP per input element).
"""

from __future__ import annotations

from roofline.op_counts import FLOPS_PER_ELEMENT
from roofline.trace.rules.registry import Call, Cost, out_numel, io_bytes, rule


@rule("aten::_softmax", "aten::_log_softmax", "aten::_safe_softmax", category="softmax")
def softmax(call: Call) -> Cost:
    """FLOPS_PER_ELEMENT["softmax"] per element (max, subtract, exp, sum, divide), as kernels.softmax_kernel."""
    return Cost(FLOPS_PER_ELEMENT["softmax"] * call.tensor(0).numel, io_bytes(call))


@rule("aten::native_layer_norm", "aten::native_group_norm", "aten::native_batch_norm",
      "aten::_native_batch_norm_legit", category="norm")
def layer_norm(call: Call) -> Cost:
    """FLOPS_PER_ELEMENT["layernorm"] per element (mean, variance, normalise, scale and shift), as
    kernels.layernorm_kernel."""
    return Cost(FLOPS_PER_ELEMENT["layernorm"] * call.tensor(0).numel, io_bytes(call))


@rule("aten::_native_batch_norm_legit_no_training", category="norm")
def batch_norm_inference(call: Call) -> Cost:
    """Inference batch norm with stored statistics: FLOPS_PER_ELEMENT["batchnorm"] per element
    (subtract, scale, multiply, add)."""
    return Cost(FLOPS_PER_ELEMENT["batchnorm"] * call.tensor(0).numel, io_bytes(call))


@rule("aten::_fused_rms_norm", category="norm")
def rms_norm(call: Call) -> Cost:
    """FLOPS_PER_ELEMENT["rmsnorm"] per element (square, sum, scale by the reciprocal root, weight), as
    kernels.rmsnorm_kernel."""
    return Cost(FLOPS_PER_ELEMENT["rmsnorm"] * call.tensor(0).numel, io_bytes(call))


# ---------------------------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------------------------

_POINTWISE = """add sub rsub mul div neg abs reciprocal sqrt rsqrt pow exp exp2 expm1 log log1p log2 log10
sin cos tan tanh sigmoid erf erfc relu relu6 hardtanh leaky_relu elu threshold clamp clamp_min
clamp_max maximum minimum fmax fmin where masked_fill eq ne lt le gt ge logical_and logical_or
logical_not logical_xor bitwise_and bitwise_or bitwise_not bitwise_xor sign sgn floor ceil round trunc
frac fmod remainder floor_divide lerp addcmul addcdiv copysign atan2 hypot square nan_to_num softplus hardsigmoid
hardswish mish""".split()


@rule(*(f"aten::{n}{s}" for n in _POINTWISE for s in ("", "_")), category="elementwise")
def pointwise(call: Call) -> Cost:
    """FLOPS_PER_ELEMENT["elementwise"] (1) per output element."""
    return Cost(FLOPS_PER_ELEMENT["elementwise"] * out_numel(call), io_bytes(call))


@rule("aten::silu", "aten::silu_", category="elementwise")
def silu(call: Call) -> Cost:
    """x sigmoid(x): FLOPS_PER_ELEMENT["silu"] per element (negate, exp, add, divide)."""
    return Cost(FLOPS_PER_ELEMENT["silu"] * out_numel(call), io_bytes(call))


@rule("aten::gelu", "aten::gelu_", category="elementwise")
def gelu(call: Call) -> Cost:
    """FLOPS_PER_ELEMENT["gelu"] per element, as the block model's gelu."""
    return Cost(FLOPS_PER_ELEMENT["gelu"] * out_numel(call), io_bytes(call))


@rule("aten::native_dropout", category="elementwise")
def dropout(call: Call) -> Cost:
    """Random mask and scale: FLOPS_PER_ELEMENT["dropout"] per element; the mask is written too."""
    return Cost(FLOPS_PER_ELEMENT["dropout"] * call.tensor(0).numel, io_bytes(call))


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------


@rule(*(f"aten::{n}" for n in "sum mean amax amin max min argmax argmin prod any all cumsum cumprod "
                                "logsumexp nansum aminmax".split()), category="reduction")
def reduction(call: Call) -> Cost:
    """1 FLOP per input element."""
    return Cost(float(call.tensor(0).numel), io_bytes(call))


@rule("aten::topk", "aten::sort", "aten::argsort", "aten::kthvalue", "aten::median", "aten::mode", category="reduction")
def select_k(call: Call) -> Cost:
    """Selection and sorting (MoE routing's top-k): comparisons are not FLOPs; the input is read and
    the values and indices written."""
    return Cost(0.0, io_bytes(call))


@rule("aten::histc", "aten::bincount", category="reduction")
def histogram(call: Call) -> Cost:
    """Counts per bin (an MoE's tokens per expert): one comparison per input, not FLOPs; the input
    read and the bins written."""
    return Cost(0.0, io_bytes(call))


@rule("aten::nonzero", "aten::argwhere", category="reduction")
def nonzero(call: Call) -> Cost:
    """Indices of the non-zero elements (``torch.where(mask)``, an MoE's token list per expert): the
    mask is read and the (n, ndim) int64 indices written. n depends on the data: a call rebuilt
    from a profile takes it from what the op wrote (its output's shape, profile.rebuild), and on
    the meta device the op cannot run, so a traced model lists it as unsupported."""
    return Cost(0.0, io_bytes(call))


@rule("aten::var", "aten::std", "aten::var_mean", "aten::std_mean", "aten::linalg_vector_norm", "aten::norm",
      category="reduction")
def moments(call: Call) -> Cost:
    """Two passes' worth of arithmetic: ~3 FLOPs per input element."""
    return Cost(3.0 * call.tensor(0).numel, io_bytes(call))
