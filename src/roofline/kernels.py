"""Kernels: a name, FLOPs, bytes moved to and from main memory, and one constructor per op.

Every constructor encodes one honest byte count (the roofline chapter, section 3.1): the FLOPs and the bytes
are closed forms in the shape, written in its docstring. Sizes may be numpy arrays, so a sweep
over tokens is one call. ``bytes_per_elem`` takes bytes (2.0) or a dtype name ("bf16", "fp8",
"int4"); the kernel remembers the dtype so the cost model uses the matching peak.

Letters: B batch, T query tokens, S keys (context), H query heads, K kv heads, d head dim.
``causal``: only the lower triangle of the scores is computed: T S / 2 pairs when S = T (the
seed's convention), T S - T (T - 1) / 2 when the T queries are the last T of S > T positions.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import numpy as np

from roofline.attention_pairs import attended_pairs
from roofline.errors import MAX_COUNT, MAX_BYTES, MAX_FLOPS, RooflineError, check_number, unknown_name
from roofline.kernel_shapes import (ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, COLLECTIVES, FUSED_ATTENTION, FUSED_MLA,  # noqa: F401
                                    MOE_EXPERTS, REDUCE_SCATTER, SEND, collective_group, matmul_dims)  # re-exported
from roofline.op_counts import (FLOPS_PER_ELEMENT, batched_matmul_counts, elementwise_counts, fused_attention_counts,  # noqa: F401
                                gather_bytes, latent_attention_cost, latent_decode_cost, matmul_counts, norm_flops_per_element,
                                pv_counts, row_op_counts, scores_counts)
from roofline.units import DTYPE_BYTES

PLAIN_SCALARS = (float, int, np.float64)  # scalars whose bounds two comparisons check (NaN fails them)
_BYTES_TO_DTYPE = {4.0: "fp32", 2.0: "bf16", 1.0: "fp8", 0.5: "int4", 8.0: "fp64"}
_new = object.__new__  # a frozen object made without its per-field __setattr__ (Kernel.trusted)


@dataclass(frozen=True)
class Kernel:
    """One kernel: ``flops`` (FLOPs) and ``bytes`` (bytes to and from main memory).

    ``category`` groups ops (matmul, attention, norm, elementwise, ...); ``dtype`` picks the
    machine peak the cost model divides by. ``link`` names the interconnect a collective's bytes
    cross (nvlink, infiniband, pcie, ...; see Machine.links); None is main memory.
    """

    name: str
    flops: float
    bytes: float
    category: str = "other"
    dtype: str = "bf16"
    link: str | None = None
    weight_elems: object = 0.0  # elements of weights among the bytes (parameter part ``part``)
    cache_elems: object = 0.0  # elements of KV cache or SSM state read or written among the bytes
    part: str = ""
    shape: tuple = ()  # a matmul's (batch, M, N, K), a row-wise op's (rows, width), an all-reduce's ("all-reduce", GPUs, bytes), a fused attention's (FUSED_ATTENTION, ...): what a measured rate is read at

    def __post_init__(self):
        f, b = self.flops, self.bytes
        if type(f) in PLAIN_SCALARS and type(b) in PLAIN_SCALARS and 0.0 <= f <= MAX_FLOPS and 0.0 < b <= MAX_BYTES:
            return  # the common scalar case, checked without the general validator
        check_number(f"{self.name}: flops", f, minimum=0, strictly=False, maximum=MAX_FLOPS)
        check_number(f"{self.name}: bytes", b, minimum=0, maximum=MAX_BYTES)

    @classmethod
    def trusted(cls, name, flops, bytes, category="other", dtype="bf16", link=None, weight_elems=0.0, cache_elems=0.0,
                part="", shape=()) -> "Kernel":
        """A Kernel without the per-kernel validation, for builders whose sizes were validated once
        at the edge (workload.checked_workload): the hot path of a whole-model analysis. Same fields,
        same frozen object."""
        k = _new(cls)
        d = k.__dict__  # filled in place, in field order: the fastest way CPython has to set ten attributes
        d["name"] = name
        d["flops"] = flops
        d["bytes"] = bytes
        d["category"] = category
        d["dtype"] = dtype
        d["link"] = link
        d["weight_elems"] = weight_elems
        d["cache_elems"] = cache_elems
        d["part"] = part
        d["shape"] = shape
        return k

    @classmethod
    def of_row(cls, row: tuple) -> "Kernel":
        """The Kernel of a row (kernel_row's tuple of its fields), trusted as the row's builder was."""
        return cls.trusted(*row)

    def as_row(self) -> tuple:
        """The kernel's fields as a plain tuple, in field order (kernel_row's form)."""
        return (self.name, self.flops, self.bytes, self.category, self.dtype, self.link, self.weight_elems, self.cache_elems,
                self.part, self.shape)

    @property
    def intensity(self):
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.bytes

    def __add__(self, other: "Kernel") -> "Kernel":
        """Two kernels fused: FLOPs and bytes add (an upper bound on a fusion's traffic)."""
        return Kernel(f"{self.name} + {other.name}", self.flops + other.flops, self.bytes + other.bytes, self.category, self.dtype,
                      self.link, self.weight_elems + other.weight_elems, self.cache_elems + other.cache_elems,
                      self.part if self.part == other.part else "")

    def scaled(self, n) -> "Kernel":
        """``n`` independent copies (e.g. the same op in n layers)."""
        check_number("scale", n)
        shape = (self.shape[0] * n, *self.shape[1:]) if self.shape else ()  # n more matrices of the same GEMM
        return Kernel(self.name, self.flops * n, self.bytes * n, self.category, self.dtype, self.link, self.weight_elems * n,
                      self.cache_elems * n, self.part, shape)


def kernel_row(name, flops, bytes, category="other", dtype="bf16", link=None, weight_elems=0.0, cache_elems=0.0, part="",
               shape=()) -> tuple:
    """Kernel.trusted's fields as a plain tuple, in field order: the lean form a whole-model analysis
    carries (a fifth of a Kernel's cost to make), each made a Kernel (Kernel.of_row) only when a
    caller asks for the ops. ROW_FIELDS names its entries."""
    return (name, flops, bytes, category, dtype, link, weight_elems, cache_elems, part, shape)


ROW_FIELDS = ("name", "flops", "bytes", "category", "dtype", "link", "weight_elems", "cache_elems", "part", "shape")

# -- Registry (one decorator, refuses duplicates; the CLI builds `roofline kernel NAME` from it) ------------------

KERNELS: dict[str, Callable[..., Kernel]] = {}


def register(name: str):
    def deco(fn):
        if name in KERNELS:
            raise RuntimeError(f"kernel {name!r} registered twice")
        KERNELS[name] = fn
        return fn

    return deco


def get_kernel_constructor(name: str) -> Callable[..., Kernel]:
    key = name.strip().lower().replace("-", "_")
    if key not in KERNELS:
        raise unknown_name("kernel", name, KERNELS)
    return KERNELS[key]


def kernel_parameters(name: str) -> list[inspect.Parameter]:
    """The constructor's parameters, for building CLI flags and API fields."""
    return list(inspect.signature(get_kernel_constructor(name)).parameters.values())


def build_kernel(name: str, params: dict) -> Kernel:
    """The named kernel built from ``params``; a parameter it does not take (or one missing) is an
    error that lists the parameters it does take."""
    try:
        return get_kernel_constructor(name)(**params)
    except TypeError as exc:
        names = ", ".join(p.name for p in kernel_parameters(name))
        raise RooflineError(f"kernel {name}: {exc}; its parameters are {names}") from None


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _elem(bytes_per_elem) -> tuple[float, str]:
    """(bytes per element, dtype name) from 2.0 or 'bf16'."""
    if isinstance(bytes_per_elem, str):
        key = bytes_per_elem.strip().lower()
        if key not in DTYPE_BYTES:
            raise unknown_name("dtype", bytes_per_elem, DTYPE_BYTES)
        return DTYPE_BYTES[key], key
    check_number("bytes_per_elem", bytes_per_elem, maximum=16)
    w = float(bytes_per_elem)
    if w not in _BYTES_TO_DTYPE:
        widths = ", ".join(f"{b:g}" for b in sorted(_BYTES_TO_DTYPE))
        raise RooflineError(f"bytes_per_elem must be one of {widths} or a dtype name ({', '.join(DTYPE_BYTES)}); "
                            f"got {bytes_per_elem!r}", field="bytes_per_elem")
    return w, _BYTES_TO_DTYPE[w]


def dtype_name(bytes_per_elem) -> str:
    """The dtype name of 2.0 or 'bf16' (trusted input)."""
    return bytes_per_elem.strip().lower() if isinstance(bytes_per_elem, str) else _BYTES_TO_DTYPE[float(bytes_per_elem)]


def _dims(**dims):
    """Sizes are whole numbers (a matmul of 1.5 rows is a typo, not a kernel)."""
    for name, value in dims.items():
        check_number(name, value, minimum=0, maximum=MAX_COUNT, integer=True)


def _causal(causal) -> float:
    if not isinstance(causal, (bool, np.bool_)):
        raise RooflineError(f"causal must be true or false, got {causal!r}", field="causal")
    return 0.5 if causal else 1.0


def _heads(heads, kv_heads):
    kv = heads if kv_heads is None else kv_heads
    _dims(heads=heads, kv_heads=kv)
    if np.any(np.asarray(heads) % np.asarray(kv)):
        raise RooflineError(f"heads ({heads}) must be a multiple of kv_heads ({kv})", field="kv_heads")
    return kv


# ---------------------------------------------------------------------------------------------
# matmuls
# ---------------------------------------------------------------------------------------------


@register("matmul")
def matmul_kernel(M, N, K, bytes_per_elem=2.0, name=None) -> Kernel:
    """(M, K) @ (K, N). flops = 2MNK; bytes = w (MK + KN + MN): A and B read once, C written once.
    Ignores bias and epilogue. The roofline chapter, section 2.2."""
    _dims(M=M, N=N, K=K)
    w, dtype = _elem(bytes_per_elem)
    flops, moved = matmul_counts(M, N, K, w)
    return Kernel(name or f"matmul {M}x{K}x{N}", flops, moved, "matmul", dtype, shape=(1, M, N, K))


@register("batched_matmul")
def batched_matmul_kernel(batch, M, N, K, bytes_per_elem=2.0, name=None) -> Kernel:
    """``batch`` independent (M, K) @ (K, N). flops = 2 b MNK; bytes = w b (MK + KN + MN)."""
    _dims(batch=batch, M=M, N=N, K=K)
    w, dtype = _elem(bytes_per_elem)
    return Kernel(name or f"bmm {batch}x{M}x{K}x{N}", *batched_matmul_counts(batch, M, N, K, w), "matmul", dtype,
                  shape=(batch, M, N, K))


@register("decode_step")
def decode_step_kernel(n_params, batch, bytes_per_param=2.0) -> Kernel:
    """One LLM decode step as a single kernel: flops = 2 P B; bytes = w P (every weight read once;
    activations and KV cache ignored). Intensity 2B/w = B in bf16. The roofline chapter, section 2.2."""
    _dims(n_params=n_params, batch=batch)
    w, dtype = _elem(bytes_per_param)
    return Kernel(f"decode B={batch}", 2.0 * n_params * batch, w * n_params, "decode", dtype)


# ---------------------------------------------------------------------------------------------
# elementwise, norms, softmax, gather (FLOPs per element: op_counts.FLOPS_PER_ELEMENT)
# ---------------------------------------------------------------------------------------------

@register("elementwise")
def elementwise_kernel(n, n_inputs=1, n_outputs=1, flops_per_elem=FLOPS_PER_ELEMENT["elementwise"], bytes_per_elem=2.0, name=None) -> Kernel:
    """An elementwise op on n elements with n_inputs read and n_outputs written.
    flops = f n; bytes = w n (n_inputs + n_outputs). y = x + 1 on 1e9 bf16 elements: I = 0.25."""
    _dims(n=n, n_inputs=n_inputs, n_outputs=n_outputs)
    check_number("flops_per_elem", flops_per_elem, minimum=0, strictly=False, maximum=1e6)
    w, dtype = _elem(bytes_per_elem)
    return Kernel(name or f"elementwise n={n}", *elementwise_counts(n, n_inputs, n_outputs, flops_per_elem, w), "elementwise",
                  dtype)


@register("layernorm")
def layernorm_kernel(n_tokens, d, bytes_per_elem=2.0, name=None) -> Kernel:
    """LayerNorm over (n_tokens, d): ~8 FLOPs per element (mean, variance, normalise, scale and
    shift); bytes = 2 w n: read x, write y. Ignores the d-sized weights. I = 8n / 4n = 2 in bf16."""
    _dims(n_tokens=n_tokens, d=d)
    w, dtype = _elem(bytes_per_elem)
    n = n_tokens * d
    return Kernel(name or f"layernorm {n_tokens}x{d}", *row_op_counts(n, FLOPS_PER_ELEMENT["layernorm"], w), "norm", dtype)


@register("rmsnorm")
def rmsnorm_kernel(n_tokens, d, bytes_per_elem=2.0, name=None) -> Kernel:
    """RMSNorm over (n_tokens, d): ~4 FLOPs per element (square, sum, scale by the reciprocal
    root, multiply by the weight); bytes = 2 w n: read x, write y (the 'Predicting a Kernel's Time' plate). Ignores the weights."""
    _dims(n_tokens=n_tokens, d=d)
    w, dtype = _elem(bytes_per_elem)
    n = n_tokens * d
    return Kernel(name or f"rmsnorm {n_tokens}x{d}", *row_op_counts(n, FLOPS_PER_ELEMENT["rmsnorm"], w), "norm", dtype)


@register("softmax")
def softmax_kernel(rows, cols, bytes_per_elem=2.0, causal=False, name=None) -> Kernel:
    """Row softmax over (rows, cols), materialised in memory: ~5 FLOPs per element (max,
    subtract, exp, sum, divide); bytes = 2 w n: read the scores, write the probabilities. With
    ``causal`` only the lower triangle, n = rows cols / 2."""
    _dims(rows=rows, cols=cols)
    w, dtype = _elem(bytes_per_elem)
    n = rows * cols * _causal(causal)
    return Kernel(name or f"softmax {rows}x{cols}", *row_op_counts(n, FLOPS_PER_ELEMENT["softmax"], w), "softmax", dtype)


@register("embedding")
def embedding_kernel(n_tokens, d, bytes_per_elem=2.0, name=None) -> Kernel:
    """Embedding gather: flops = 0 (a lookup, not a matmul); bytes = 2 w T d: T rows of the table
    read, the (T, d) output written. Ignores the token ids."""
    _dims(n_tokens=n_tokens, d=d)
    w, dtype = _elem(bytes_per_elem)
    return Kernel(name or f"embedding {n_tokens}x{d}", 0.0, gather_bytes(n_tokens, d, w), "gather", dtype)


# ---------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------


def _attention_sizes(T, d, heads, kv_heads, batch, causal, context, bytes_per_elem):
    """The checked sizes of an attention kernel: S (``context``, default T), the kv heads, the
    element width and dtype, and the score elements n_s = B H P with P (query, key) pairs per head:
    T S; causal, the T queries being the last T of S positions, T S - T (T - 1) / 2, and the seed's
    T S / 2 when S = T (attention_pairs.attended_pairs)."""
    S = T if context is None else context
    _dims(T=T, d=d, batch=batch, context=S)
    kv = _heads(heads, kv_heads)
    w, dtype = _elem(bytes_per_elem)
    _causal(causal)
    if causal and np.any(np.asarray(S) < np.asarray(T)):
        raise RooflineError(f"causal attention of {T} queries needs at least as many keys; got context {S}", field="context")
    return S, kv, w, dtype, batch * heads * attended_pairs(T, S, causal=bool(causal))


@register("attention_scores")
def attention_scores_kernel(T, d, heads=1, kv_heads=None, batch=1, causal=False, context=None, bytes_per_elem=2.0, name=None) -> Kernel:
    """Scores Q K^T materialised: n_s = B H T S score elements (S = context, default T; halved
    when causal). flops = 2 n_s d; bytes = w (B H T d + B K S d + n_s): read Q and K, write the
    scores. The 'Predicting a Kernel's Time' plate: QK^T moves w (H T d + K T d + S)."""
    S, kv, w, dtype, n_s = _attention_sizes(T, d, heads, kv_heads, batch, causal, context, bytes_per_elem)
    return Kernel(name or f"QK^T T={T}", *scores_counts(n_s, batch * heads * T * d, batch * kv * S * d, d, w), "attention", dtype)


@register("attention_pv")
def attention_pv_kernel(T, d, heads=1, kv_heads=None, batch=1, causal=False, context=None, bytes_per_elem=2.0, name=None) -> Kernel:
    """P V with P materialised: flops = 2 n_s d; bytes = w (n_s + B K S d + B H T d): read P and
    V, write the output, as the 'Predicting a Kernel's Time' plate counts it."""
    S, kv, w, dtype, n_s = _attention_sizes(T, d, heads, kv_heads, batch, causal, context, bytes_per_elem)
    return Kernel(name or f"PV T={T}", *pv_counts(n_s, batch * kv * S * d, batch * heads * T * d, d, w), "attention", dtype)


@register("naive_attention")
def naive_attention_kernel(T, d, bytes_per_elem=2.0, heads=1, kv_heads=None, batch=1, causal=False, context=None) -> Kernel:
    """Unfused attention, the (T, S) matrix written and re-read: QK^T, softmax, PV.
    flops = 4 n_s d + 5 n_s; bytes = w (2 B H T d + 2 B K S d + 4 n_s): Q, K, V in; scores out
    and in; probabilities out and in; O out. Single head, S = T: w (4 T d + 4 T^2), the roofline chapter, section 2.2."""
    S, kv, w, dtype, n_s = _attention_sizes(T, d, heads, kv_heads, batch, causal, context, bytes_per_elem)
    q, k = batch * heads * T * d, batch * kv * S * d  # Q and O; K and V
    flops, moved = fused_attention_counts(n_s, q, k, k, q, d, d, w, FLOPS_PER_ELEMENT["softmax"])
    return Kernel(f"naive attention T={T}", flops, moved + 4.0 * w * n_s, "attention", dtype)  # + scores and P out and in


@register("flash_attention")
def flash_attention_kernel(T, d, bytes_per_elem=2.0, heads=1, kv_heads=None, batch=1, causal=False, context=None,
                           name=None) -> Kernel:
    """FlashAttention: the same FLOPs as naive, but the scores never leave SRAM, so only Q, K, V
    and O touch memory: bytes = w (2 B H T d + 2 B K S d). Single head: w 4 T d, the roofline chapter, section 2.2.
    Ignores the log-sum-exp statistics (B H T floats)."""
    S, kv, w, dtype, n_s = _attention_sizes(T, d, heads, kv_heads, batch, causal, context, bytes_per_elem)
    q, k = batch * heads * T * d, batch * kv * S * d  # Q and O; K and V
    return Kernel(name or f"flash attention T={T}", *fused_attention_counts(n_s, q, k, k, q, d, d, w, FLOPS_PER_ELEMENT["softmax"]),
                  "attention", dtype)


# ---------------------------------------------------------------------------------------------
# collectives (multi-GPU): bytes are what each GPU sends over ``link`` (per direction)
# ---------------------------------------------------------------------------------------------
# Ring algorithms, as NCCL's performance notes count them (nccl-tests doc/PERFORMANCE.md: bus
# bandwidth = algorithm bandwidth x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather and
# reduce-scatter). Each GPU sends and receives the same amount at once, so the time is the bytes
# sent over the link's per-direction bandwidth. Latency terms (alpha) and in-network reduction
# (NVLink SHARP) are ignored.


def _collective(n, gpus, link, bytes_per_elem):
    _dims(n=n)
    check_number("gpus", gpus, minimum=1, maximum=1e6, integer=True)
    if not isinstance(link, str) or not link.strip():
        raise RooflineError(f"link must name an interconnect (nvlink, infiniband, pcie, ...), got {link!r}", field="link")
    w, dtype = _elem(bytes_per_elem)
    return (np.asarray(gpus, dtype=float) - 1.0) / gpus, w, dtype, link.strip().lower()


@register("all_reduce")
def all_reduce_kernel(n, gpus, link="nvlink", bytes_per_elem=2.0, name=None) -> Kernel:
    """Ring all-reduce of n elements across ``gpus`` GPUs over ``link``: a reduce-scatter then an
    all-gather. bytes = 2 (g-1)/g w n sent per GPU; flops = (g-1)/g n (the additions of the
    reduce-scatter half). 8 GPUs, 1e9 bf16 elements: 2 x 7/8 x 2e9 = 3.5e9 bytes. Needs g >= 2.
    ``shape`` is ("all-reduce", g, w n): what a measured all-reduce time is read at
    (links.all_reduce_s, through cost.link_latency_s)."""
    share, w, dtype, link = _collective(n, gpus, link, bytes_per_elem)
    return Kernel(name or f"all-reduce {n} x{gpus}", share * n, 2.0 * share * w * n, "collective", dtype, link,
                  shape=(ALL_REDUCE, gpus, w * n))


@register("all_gather")
def all_gather_kernel(n, gpus, link="nvlink", bytes_per_elem=2.0, name=None) -> Kernel:
    """Ring all-gather of a tensor of n elements in total (n / g per GPU) over ``link``:
    bytes = (g-1)/g w n sent per GPU; flops = 0. Needs g >= 2."""
    share, w, dtype, link = _collective(n, gpus, link, bytes_per_elem)
    return Kernel(name or f"all-gather {n} x{gpus}", 0.0, share * w * n, "collective", dtype, link,
                  shape=(ALL_GATHER, gpus, w * n))


@register("reduce_scatter")
def reduce_scatter_kernel(n, gpus, link="nvlink", bytes_per_elem=2.0, name=None) -> Kernel:
    """Ring reduce-scatter of n elements (each GPU ends with n / g reduced) over ``link``:
    bytes = (g-1)/g w n sent per GPU; flops = (g-1)/g n additions. Needs g >= 2."""
    share, w, dtype, link = _collective(n, gpus, link, bytes_per_elem)
    return Kernel(name or f"reduce-scatter {n} x{gpus}", share * n, share * w * n, "collective", dtype, link,
                  shape=(REDUCE_SCATTER, gpus, w * n))
