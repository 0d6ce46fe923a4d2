"""The per-op builder the layer breakdowns (blocks.py, attention_ops.py) make their kernels with:
a matmul, a norm and an elementwise op at one activation width, each a trusted Kernel (its sizes were
validated once, at the edge: workload.checked_workload), or that Kernel's fields as a plain tuple
(kernels.kernel_row) for a whole-model analysis, which makes Kernel objects only when asked.
"""

from __future__ import annotations

from roofline.kernels import Kernel, dtype_name, kernel_row
from roofline.op_counts import FLOPS_PER_ELEMENT, elementwise_counts, matmul_counts, norm_flops_per_element, row_op_counts
from roofline.units import dtype_bytes

SOFTMAX = FLOPS_PER_ELEMENT["softmax"]  # per score element, in the attention ops
_trusted = Kernel.trusted


class OpBuilder:
    """Builds one layer's kernels at one activation width: Kernels, or with ``rows`` their fields as
    plain tuples (kernels.kernel_row). ``kernel`` makes an op written out from Kernel's fields
    (positional, or by keyword as Kernel.trusted takes them). The three ops below write their row
    out (a call apiece saved on the whole-model planner's path) and make a Kernel of it unless ``rows``."""

    def __init__(self, w: float, dtype: str, rows: bool = False):
        self.w, self.dtype, self.rows = w, dtype, rows
        self.kernel = kernel_row if rows else Kernel.trusted

    def mm(self, name, M, N, K, part="", weights=True):
        """(M, K) @ (K, N) (op_counts.matmul_counts); the (K, N) operand is a weight."""
        flops, moved = matmul_counts(M, N, K, self.w)
        row = (name, flops, moved, "matmul", self.dtype, None, K * N if weights else 0.0, 0.0, part if weights else "",
               (1, M, N, K))
        return row if self.rows else _trusted(*row)

    def norm(self, name, rows, width, kind="rmsnorm"):
        """RMSNorm or LayerNorm over (rows, width) (op_counts.row_op_counts); read x, write y."""
        flops, moved = row_op_counts(rows * width, norm_flops_per_element(kind), self.w)
        row = (name, flops, moved, "norm", self.dtype, None, 0.0, 0.0, "", ())
        return row if self.rows else _trusted(*row)

    def ew(self, name, n, n_in=1, n_out=1, flops_per_elem=FLOPS_PER_ELEMENT["elementwise"], category="elementwise", cache=0.0,
           shape=()):
        """An elementwise op on n elements, n_in read and n_out written (op_counts.elementwise_counts)."""
        flops, moved = elementwise_counts(n, n_in, n_out, flops_per_elem, self.w)
        row = (name, flops, moved, category, self.dtype, None, 0.0, cache, "", shape)
        return row if self.rows else _trusted(*row)


_OPS: dict[object, OpBuilder] = {}  # one builder per activation dtype (a name or a width), made once
_ROWS: dict[object, OpBuilder] = {}  # the same, making rows


def builder_for(dtype) -> OpBuilder:
    """The builder of ``dtype`` (a name, "bf16", or a width, 2.0), made once."""
    return _OPS.get(dtype) or _OPS.setdefault(dtype, OpBuilder(dtype_bytes(dtype), dtype_name(dtype)))


def row_builder_for(dtype) -> OpBuilder:
    """builder_for's twin whose ops are rows (kernels.kernel_row), made once."""
    return _ROWS.get(dtype) or _ROWS.setdefault(dtype, OpBuilder(dtype_bytes(dtype), dtype_name(dtype), rows=True))
