"""The per-op builder the layer breakdowns (blocks.py, attention_ops.py) make their kernels with:
a matmul, a norm and an elementwise op at one activation width, each a trusted Kernel (its sizes were
validated once, at the edge: workload.checked_workload).
"""

from __future__ import annotations

from roofline.kernels import FLOPS_PER_ELEMENT, Kernel, dtype_name, norm_flops_per_element
from roofline.units import dtype_bytes

SOFTMAX = FLOPS_PER_ELEMENT["softmax"]  # per score element, in the attention ops
_kernel = Kernel.trusted


class OpBuilder:
    """Builds one layer's kernels at one activation width."""

    def __init__(self, w: float, dtype: str):
        self.w, self.dtype = w, dtype

    def mm(self, name, M, N, K, part="", weights=True):
        """(M, K) @ (K, N): 2MNK FLOPs, w (MK + KN + MN) bytes; the (K, N) operand is a weight."""
        return _kernel(name, 2.0 * M * N * K, self.w * (M * K + K * N + M * N), "matmul", self.dtype, None,
                       K * N if weights else 0.0, 0.0, part if weights else "", (1, M, N, K))

    def norm(self, name, rows, width, kind="rmsnorm"):
        """RMSNorm or LayerNorm (kernels.FLOPS_PER_ELEMENT); read x, write y."""
        n = rows * width
        return _kernel(name, norm_flops_per_element(kind) * n, 2.0 * self.w * n, "norm", self.dtype)

    def ew(self, name, n, n_in=1, n_out=1, flops_per_elem=FLOPS_PER_ELEMENT["elementwise"], category="elementwise", cache=0.0,
           shape=()):
        return _kernel(name, flops_per_elem * n, self.w * n * (n_in + n_out), category, self.dtype, None, 0.0, cache, "",
                       shape)


_OPS: dict[object, OpBuilder] = {}  # one builder per activation dtype (a name or a width), made once


def builder_for(dtype) -> OpBuilder:
    """The builder of ``dtype`` (a name, "bf16", or a width, 2.0), made once."""
    return _OPS.get(dtype) or _OPS.setdefault(dtype, OpBuilder(dtype_bytes(dtype), dtype_name(dtype)))
