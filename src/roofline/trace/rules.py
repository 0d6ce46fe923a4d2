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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from roofline.kernels import FLOPS_PER_ELEMENT

# Bytes per element of the dtypes a trace can carry (roofline dtype names; see units.DTYPE_BYTES).
ITEMSIZE = {
    "fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex128": 16, "complex64": 8, "complex32": 4,
}


@dataclass(frozen=True)
class TensorSpec:
    """A tensor as a rule sees it: shape, dtype name, strides (elements; empty = contiguous)."""

    shape: tuple[int, ...]
    dtype: str = "fp32"
    strides: tuple[int, ...] = ()

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> float:
        return ITEMSIZE.get(self.dtype, 4)

    @property
    def distinct(self) -> int:
        """Elements in memory: stride-0 (expanded) dimensions count once."""
        if not self.strides or len(self.strides) != len(self.shape):
            return self.numel
        return math.prod(n for n, s in zip(self.shape, self.strides) if s != 0)

    @property
    def read_bytes(self) -> float:
        return self.distinct * self.itemsize

    @property
    def write_bytes(self) -> float:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class Call:
    """One op call: ``op`` is the schema name ("aten::mm"); ``args`` the positional arguments with
    tensors as TensorSpec (lists kept as lists); ``inputs`` every tensor argument, flattened;
    ``outputs`` every tensor returned."""

    op: str
    args: tuple = ()
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()

    def tensor(self, i: int) -> TensorSpec:
        a = self.args[i]
        if not isinstance(a, TensorSpec):
            raise TypeError(f"{self.op}: argument {i} is not a tensor")
        return a


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes (to and from main memory) of one call."""

    flops: float = 0.0
    bytes: float = 0.0


@dataclass(frozen=True)
class Rule:
    fn: Callable[[Call], "Cost | None"]
    category: str

    @property
    def free(self) -> bool:
        return self.category == "view"


RULES: dict[str, Rule] = {}


def rule(*names: str, category: str):
    """Register ``fn`` as the rule for every op in ``names``; a name registered twice is an error."""

    def deco(fn):
        for name in names:
            if name in RULES:
                raise RuntimeError(f"op {name!r} has two rules")
            RULES[name] = Rule(fn, category)
        return fn

    return deco


def get_rule(op: str) -> Rule | None:
    return RULES.get(op)


def io_bytes(call: Call) -> float:
    """Inputs read once, outputs written once."""
    return sum(t.read_bytes for t in call.inputs) + sum(t.write_bytes for t in call.outputs)


def written(call: Call) -> float:
    return sum(t.write_bytes for t in call.outputs)


def _out_numel(call: Call) -> int:
    return call.outputs[0].numel if call.outputs else 0


# ---------------------------------------------------------------------------------------------
# matmul family
# ---------------------------------------------------------------------------------------------

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


@rule("aten::mm", "aten::_scaled_mm", category="matmul")
def mm(call: Call) -> Cost:
    """(M, K) @ (K, N): flops = 2MNK."""
    (M, K), (_, N) = call.tensor(0).shape, call.tensor(1).shape
    return Cost(2.0 * M * N * K, io_bytes(call))


@rule("aten::addmm", category="matmul")
def addmm(call: Call) -> Cost:
    """bias + (M, K) @ (K, N): flops = 2MNK (the bias add is not counted)."""
    (M, K), (_, N) = call.tensor(1).shape, call.tensor(2).shape
    return Cost(2.0 * M * N * K, io_bytes(call))


@rule("aten::bmm", category="matmul")
def bmm(call: Call) -> Cost:
    """(b, M, K) @ (b, K, N): flops = 2 b MNK."""
    (b, M, K), (_, _, N) = call.tensor(0).shape, call.tensor(1).shape
    return Cost(2.0 * b * M * N * K, io_bytes(call))


@rule("aten::baddbmm", category="matmul")
def baddbmm(call: Call) -> Cost:
    """self + (b, M, K) @ (b, K, N): flops = 2 b MNK."""
    (b, M, K), (_, _, N) = call.tensor(1).shape, call.tensor(2).shape
    return Cost(2.0 * b * M * N * K, io_bytes(call))


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
    return Cost(2.0 * groups * M * K * N, io_bytes(call))


@rule("aten::mv", category="matmul")
def mv(call: Call) -> Cost:
    """(M, N) @ (N,): flops = 2MN."""
    M, N = call.tensor(0).shape
    return Cost(2.0 * M * N, io_bytes(call))


@rule("aten::addmv", category="matmul")
def addmv(call: Call) -> Cost:
    """self + (M, N) @ (N,): flops = 2MN."""
    M, N = call.tensor(1).shape
    return Cost(2.0 * M * N, io_bytes(call))


@rule("aten::dot", "aten::vdot", category="matmul")
def dot(call: Call) -> Cost:
    """(n,) . (n,): flops = 2n."""
    return Cost(2.0 * call.tensor(0).numel, io_bytes(call))


@rule("aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::_slow_conv2d_forward",
      "aten::convolution_overrideable", "aten::mkldnn_convolution", category="conv")
def convolution(call: Call) -> Cost:
    """x (N, C_in, *spatial) * w (C_out, C_in/groups, *kernel): flops = 2 N C_out (C_in/groups)
    prod(kernel) prod(out spatial); a transposed convolution iterates over the input's spatial
    points instead (FlopCounterMode's conv_flop_count). Bias not counted."""
    x, w = call.tensor(0), call.tensor(1)
    has_flag = call.op in ("aten::convolution", "aten::_convolution", "aten::convolution_overrideable")
    transposed = has_flag and len(call.args) > 6 and call.args[6] is True
    spatial = (x.shape if transposed else call.outputs[0].shape)[2:]
    c_out, c_in, *kernel = w.shape
    return Cost(2.0 * x.shape[0] * c_out * c_in * math.prod(kernel) * math.prod(spatial), io_bytes(call))


# ---------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------


def _attention_flops(q: tuple, k: tuple, v: tuple) -> float:
    """q (B, H, T, d), k (B, K, S, d), v (B, K, S, d_v): QK^T is 2 B H T S d and PV 2 B H T S d_v
    (grouped-query heads broadcast, as FlopCounterMode's sdpa_flop_count)."""
    B, H, T, d = q
    S, d_v = k[2], v[3]
    return 2.0 * B * H * T * S * d + 2.0 * B * H * T * S * d_v


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


# ---------------------------------------------------------------------------------------------
# norms and softmax
# ---------------------------------------------------------------------------------------------


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
    return Cost(FLOPS_PER_ELEMENT["elementwise"] * _out_numel(call), io_bytes(call))


@rule("aten::silu", "aten::silu_", category="elementwise")
def silu(call: Call) -> Cost:
    """x sigmoid(x): FLOPS_PER_ELEMENT["silu"] per element (negate, exp, add, divide)."""
    return Cost(FLOPS_PER_ELEMENT["silu"] * _out_numel(call), io_bytes(call))


@rule("aten::gelu", "aten::gelu_", category="elementwise")
def gelu(call: Call) -> Cost:
    """FLOPS_PER_ELEMENT["gelu"] per element, as the block model's gelu."""
    return Cost(FLOPS_PER_ELEMENT["gelu"] * _out_numel(call), io_bytes(call))


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


# ---------------------------------------------------------------------------------------------
# data movement: no arithmetic, only bytes
# ---------------------------------------------------------------------------------------------


@rule("aten::index_select", "aten::gather", "aten::index", "aten::_unsafe_index", category="gather")
def gather(call: Call) -> Cost:
    """Gather elements of ``self`` at the indices (an MoE dispatch, a row lookup): no FLOPs; the
    indices are read, the gathered elements read and the output written (as many as the output
    holds); the rest of ``self`` is never touched (the embedding rule's count)."""
    indices = sum(t.read_bytes for t in call.inputs[1:])
    return Cost(0.0, indices + 2 * written(call))


@rule(*(f"aten::{n}" for n in "clone _to_copy lift_fresh_copy cat stack index_put "
                                "scatter scatter_add slice_scatter select_scatter "
                                "repeat repeat_interleave tril triu tril_ triu_ flip roll constant_pad_nd "
                                "reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d narrow_copy "
                                "masked_scatter _pdist_forward".split()), category="copy")
def copy(call: Call) -> Cost:
    """No FLOPs; inputs read, outputs written."""
    return Cost(0.0, io_bytes(call))


@rule("aten::copy_", category="copy")
def copy_(call: Call) -> Cost:
    """dst.copy_(src): src read, dst written (dst's old contents are not read)."""
    return Cost(0.0, call.tensor(1).read_bytes + written(call))


@rule("aten::index_put_", "aten::index_copy_", "aten::scatter_", category="copy")
def scatter_(call: Call) -> Cost:
    """In-place scatter into ``self`` (a KV-cache update): the indices and the new values are read
    and as many elements written; the rest of ``self`` is not touched."""
    values = call.inputs[-1]
    indices = sum(t.read_bytes for t in call.inputs[1:-1])
    return Cost(0.0, indices + 2 * values.read_bytes)


@rule("aten::index_add_", "aten::scatter_add_", "aten::scatter_reduce_", category="copy")
def scatter_add_(call: Call) -> Cost:
    """In-place accumulate into ``self`` (an MoE's combine of expert outputs): the indices and the
    new values read, as many elements of ``self`` read, added to and written: 1 FLOP each."""
    values = call.inputs[-1]
    indices = sum(t.read_bytes for t in call.inputs[1:-1])
    return Cost(float(values.numel), indices + 3 * values.read_bytes)


@rule("aten::embedding", category="gather")
def embedding(call: Call) -> Cost:
    """Gather rows of the (V, D) table: no FLOPs; the ids and the gathered rows are read, the
    (..., D) output written; the rest of the table is never touched (kernels.embedding_kernel)."""
    ids = call.tensor(1)
    return Cost(0.0, ids.read_bytes + 2 * written(call))


@rule(*(f"aten::{n}" for n in "fill_ zero_ zeros ones full zeros_like ones_like full_like arange scalar_tensor "
                                "rand randn randint rand_like randn_like normal_ uniform_ bernoulli_ linspace "
                                "new_zeros new_ones new_full".split()), category="fill")
def fill(call: Call) -> Cost:
    """No FLOPs; the output is written, nothing read."""
    return Cost(0.0, written(call))


# ---------------------------------------------------------------------------------------------
# free: views, metadata, allocations (and composites that cost nothing when they dispatch nothing)
# ---------------------------------------------------------------------------------------------

_FREE = """view _unsafe_view _reshape_alias reshape as_strided t transpose permute expand expand_as unsqueeze squeeze
select slice split split_with_sizes unbind chunk narrow detach alias lift_fresh view_as view_as_real
view_as_complex unfold diagonal real imag _conj conj resolve_conj resolve_neg _neg_view flatten unflatten
movedim swapaxes numpy_T mT empty empty_like empty_strided new_empty new_empty_strided resize_ set_
_local_scalar_dense item is_nonzero sym_size sym_stride sym_numel sym_storage_offset size stride numel
dim is_contiguous is_same_size result_type to contiguous dropout type_as detach_ _assert_async
_assert_tensor_metadata record_stream""".split()


@rule(*(f"aten::{n}" for n in _FREE), category="view")
def free(call: Call) -> Cost:
    """Views, metadata and allocations move no data: zero FLOPs, zero bytes."""
    return Cost(0.0, 0.0)
