"""How calibrate's probes are read by the fits (residuals.py, layout_factors.py): the shape tags
of the class probes (measure.families), the class an op is calibrated by (op_class, fit_class,
fit_op), whether its FLOPs are costed at the matmul rate at its size (sized), a probe's time by instrument, and what a fit reads of the model it corrects (BodyModel).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from roofline.kernels import Kernel, matmul_dims
from roofline.measure.measurements import Calibration


class BodyModel(Protocol):
    """What the fits read of the model they correct (calibrated.CalibratedModel): its calibration,
    its instrument, an op's body before any correction and an op's fixed cost per call."""

    @property
    def calibration(self) -> Calibration: ...

    @property
    def instrument(self) -> str: ...

    def base_body_s(self, kernel: Kernel, machine=None, cold: bool | None = None) -> tuple: ...

    def floor_band(self, kernel: Kernel, cold: bool = False) -> tuple[float, float, float] | None: ...


MIN_PROBE_LAUNCHES = 1.5  # a probe shorter than this many launch overheads is not fitted


FAMILY = "family: "  # the shape text of a class probe (measure.families), as the profile stores it
TINY = "tiny "  # ... and of a tiny one, after FAMILY or FAMILY + COLD
COLD = "cold "  # ... and of one timed with the caches flushed before each call, after FAMILY
NARROW = "narrow "  # ... and of a row-wise one on narrower rows than the others' 1,024, after FAMILY
STRIDED = "strided "  # ... and of an elementwise one on non-contiguous inputs (chunk views), after FAMILY
WIDE = 1024  # the row width of the other class probes (measure.families.WIDTH)


def op_class(kernel: Kernel) -> str:
    """The class an op is calibrated by: its category, with matmuls split into "gemm" (one matrix
    product, or unknown shape) and "bmm" (a batch of them). Every op has one: a block op, a traced
    aten op and a profiled one alike."""
    if kernel.category == "matmul":
        dims = matmul_dims(kernel.shape)
        return "bmm" if dims and is_scalar(dims[0]) and dims[0] > 1 else "gemm"
    return kernel.category


def aten_name(kernel: Kernel) -> str:
    """The aten op a kernel was costed as: its name, less the module path a traced op's kernel is
    named by ('model.layers.0.mlp: aten::mm' -> 'aten::mm', TraceResult.to_kernels), so that the
    probes of that op are found whether the op comes from a trace, a profile or a probe."""
    return kernel.name.rsplit(": ", 1)[-1]


def is_scalar(x) -> bool:
    return np.ndim(x) == 0


# at most: an attention op reads its K, V once per few query rows (decode's shape). FLOPs per
# element of operands are ~2 r for r query rows per K/V head (4 r S d FLOPs over 2 S d + 2 r d
# elements, S >> r): 16 is r = 8, the geometric midpoint between the decode probes' one row and
# the smallest prefill probe's 64, so that a grouped-query decode step (4 query heads per KV head:
# Mixtral, Llama 3 8B; 8: Llama 3 70B) is a decode, as an MHA one is (until 2026-12-02 the
# threshold was 8, under which an 8:1 GQA decode, ~16 FLOPs per element, was read as a prefill)
ATTENTION_DECODE_FLOPS_PER_ELEMENT = 16.0


def fit_class(kernel: Kernel) -> str:
    """The class whose probes correct an op: op_class, with attention split into its decode shape
    (a few query rows per pass over K and V: memory-bound, FLOPs per element of operands at most
    ATTENTION_DECODE_FLOPS_PER_ELEMENT) and its prefill shape (many query rows: compute-bound),
    whose measured corrections differ several-fold at the same bytes."""
    cls = op_class(kernel)
    if cls != "attention" or not np.max(kernel.bytes):
        return cls
    from roofline.units import DTYPE_BYTES

    per_element = float(np.max(kernel.flops)) * DTYPE_BYTES.get(kernel.dtype, 2) / float(np.max(kernel.bytes))
    return "attention decode" if per_element <= ATTENTION_DECODE_FLOPS_PER_ELEMENT else "attention prefill"


SIZED_CATEGORIES = ("matmul", "attention", "decode")


def sized(kernel: Kernel) -> bool:
    """Whether the op's FLOPs are costed at the matmul rate at its size (SIZED_CATEGORIES): not a
    decode-shaped attention (fit_class), whose time follows the K and V it reads, not its FLOPs,
    which grow with the query heads per KV head (base_body_s caps its compute at its memory term). On the 2-core EPYC of
    docs/accuracy-models.md a decode step of 8 query heads over 2 KV heads (4x the FLOPs per byte
    of the MHA decode probes) ran 77 us against 405 predicted at the matmul rate of its FLOPs, the
    time of an MHA decode reading the same 267 kB (fp32, one thread, 2026-12-02)."""
    return kernel.category in SIZED_CATEGORIES and fit_class(kernel) != "attention decode"


def fit_op(kernel: Kernel) -> str:
    """The key of an op's own probe curve ("aten" residuals): its aten op, and for an attention its
    shape too (fit_class), as the class curves split it: one SDPA kernel serves decode and prefill,
    whose corrections differ several-fold at the same bytes (and SDPA's kernels are one op: SDPA), so one curve over both read a 4:1
    grouped-query prefill of 327 kB (Qwen2-like, 8 heads of 32 over 2, T 128) between the decode
    probes of 266 kB and 1 MB: 1,720 us predicted against 755 measured on the EPYC of
    docs/accuracy-models.md (2026-12-02)."""
    op = aten_name(kernel)
    if op_class(kernel) != "attention":
        return op
    if op.startswith(SDPA_PREFIX):  # the probe is labelled by the meta trace's kernel, not the one that ran
        op = SDPA
    return f"{op} ({fit_class(kernel)})"


# SDPA's kernels (_scaled_dot_product_flash_attention_for_cpu, _efficient_attention, _flash_attention,
# _cudnn_attention): one curve. A probe is labelled by the kernel its meta trace records (efficient
# attention), while the device ran its own (on a CPU flash_attention_for_cpu), as a profiled forward records it.
SDPA_PREFIX = "aten::_scaled_dot_product_"
SDPA = "aten::scaled_dot_product_attention"


def probe_seconds(p, instrument: str) -> float:
    """A probe's time per call as ``instrument`` measures it: torch.profiler's where it was
    profiled and that is asked for, else the timed loop's median."""
    return p.profiled_s if instrument == "profiler" and p.profiled_s else p.measured_s
