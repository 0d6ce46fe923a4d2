"""Probe families of `roofline calibrate` (issue 12): ops timed by class and size, not by name,
so that the calibrated model can correct any op of that class (a traced aten op, a profiled one,
a block op) from measured points of the same class.

- the GEMM family (CPU_GEMM_M x CPU_GEMM_NK, CUDA_...): (M, K) @ (K, N) with the skinny M of decode (1 to 256 rows) at a few N = K:
  a CPU's GEMV path for M = 1 and its packed GEMM path for M = 4 differ several-fold, which a
  sweep of square matmuls cannot see;
- ``class_families``: one-kernel eager ops of each class (elementwise: add, mul, silu, gelu; norm:
  rms_norm, layer_norm; softmax; reduction: sum; gather: embedding, index_select; copy: a
  transpose made contiguous, cat, clone; fill: zeros) at working sets from tens of KiB to tens of
  MiB, and each on a (1, 32) tensor: what one eager call of that class costs whatever its size
  (argument checks, output allocation, dispatch), the floor of the class's ops;
- the GEMM family is timed warm (the same B each run) and cold (caches flushed between runs):
  a model's forward reads each weight once, from main memory when its weights outgrow the cache.

Each class probe is costed by tracing it on the meta device with the same rules (roofline.trace)
that cost a user's traced or profiled model, so the measured / modelled ratio fitted here is the
one those ops need. Outputs are allocated as eager code allocates them (no ``out=``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from roofline.measure.device import torch_dtype
from roofline.units import DTYPE_BYTES

WIDTH = 1024  # columns of the (rows, WIDTH) activations of the class probes
TINY_WIDTH = 32  # each op also on a (1, 32) tensor: its eager dispatch cost, the class's floor
TINY = "tiny "  # the shape text of those probes starts so (after "family: ")
CPU_ROWS = (16, 64, 256, 1024, 4096)  # 64 KiB to 16 MiB per fp32 operand
CUDA_ROWS = (64, 512, 4096, 32768)
CPU_GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CPU_GEMM_NK = (256, 512, 1024, 2048)
CUDA_GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CUDA_GEMM_NK = (1024, 4096, 8192)


@dataclass(frozen=True)
class FamilyOp:
    """One class probe: the callable, its name and class (the trace rule's category), and the
    FLOPs and bytes its trace on the meta device counts."""

    name: str
    category: str
    shape: str
    fn: Callable[[], object]
    flops: float
    bytes: float


def _ops(rows: int, device: str, dtype: str, gen: torch.Generator, width: int = WIDTH):
    td = torch_dtype(dtype)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(td)

    WIDTH = width  # noqa: N806 - the closures below read it
    x, y = rnd(rows, WIDTH), rnd(rows, WIDTH)
    w, b = 1.0 + rnd(WIDTH), rnd(WIDTH)
    table = rnd(max(4 * rows, 1024), WIDTH)
    idx = torch.randint(0, table.shape[0], (rows,), generator=gen, device=device)
    return {
        "zeros": ("fill", lambda: torch.zeros(rows, WIDTH, device=device, dtype=td)),
        "add": ("elementwise", lambda: torch.add(x, y)),
        "mul": ("elementwise", lambda: torch.mul(x, y)),
        "silu": ("elementwise", lambda: F.silu(x)),
        "gelu": ("elementwise", lambda: F.gelu(x)),
        "rms_norm": ("norm", lambda: F.rms_norm(x, (WIDTH,), w, 1e-5)),
        "layer_norm": ("norm", lambda: F.layer_norm(x, (WIDTH,), w, b)),
        "softmax": ("softmax", lambda: torch.softmax(x, -1)),
        "sum": ("reduction", lambda: x.sum(-1)),
        "embedding": ("gather", lambda: F.embedding(idx, table)),
        "index_select": ("gather", lambda: table.index_select(0, idx)),
        "transpose copy": ("copy", lambda: x.t().contiguous()),
        "cat": ("copy", lambda: torch.cat([x, y])),
        "clone": ("copy", lambda: x.clone()),
    }


class _One(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self):
        return self.fn()


def _traced_cost(fn) -> tuple[float, float, str]:
    """(FLOPs, bytes, category) of one probe as roofline.trace costs it (the closure's tensors are
    recorded as they are: the ops are small, running them once costs nothing)."""
    from roofline.trace import trace

    result = trace(_One(fn))
    costed = [op for op in result.ops if op.bytes > 0]
    cats = {op.category for op in costed}
    return (float(sum(op.flops for op in costed)), float(sum(op.bytes for op in costed)),
            cats.pop() if len(cats) == 1 else "mixed")


def class_families(device: str, dtype: str, rows=None) -> list[FamilyOp]:
    """The class probes at each row count (CPU_ROWS / CUDA_ROWS by default), costed by the trace rules."""
    rows = rows or (CUDA_ROWS if device == "cuda" else CPU_ROWS)
    gen = torch.Generator(device=device).manual_seed(0)
    out = []
    for r, width, tag in [(1, TINY_WIDTH, TINY), *((r, WIDTH, "") for r in rows)]:
        for name, (category, fn) in _ops(r, device, dtype, gen, width).items():
            flops, nbytes, traced_cat = _traced_cost(fn)
            if nbytes <= 0:  # nothing ran (a (1, n) transpose is already contiguous)
                continue
            out.append(FamilyOp(name, traced_cat if traced_cat != "mixed" else category,
                                f"{tag}({r}, {width}) {dtype}", fn, flops, nbytes))
    return out


def gemm_bytes(M: int, N: int, K: int, dtype: str) -> float:
    """w (MK + KN + MN): A and B read once, C written (the matmul rule's count)."""
    return DTYPE_BYTES[dtype] * (M * K + K * N + M * N)
