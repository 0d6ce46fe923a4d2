"""Probe families of `roofline calibrate` (docs/measuring.md): ops timed by class and size, not by name,
so that the calibrated model can correct any op of that class (a traced aten op, a profiled one,
a block op) from measured points of the same class.

- the GEMM family (CPU_GEMM_M x CPU_GEMM_NK, CUDA_...): (M, K) @ (K, N) with the skinny M of decode (1 to 256 rows) at a few N = K:
  a CPU's GEMV path for M = 1 and its packed GEMM path for M = 4 differ several-fold, which a
  sweep of square matmuls cannot see;
- ``class_families``: one-kernel eager ops of each class (elementwise: add, mul, silu, gelu, cos, exp; norm:
  rms_norm, layer_norm; softmax; reduction: sum, topk; gather: embedding, index_select, index
  (x[rows]); copy: a transpose made contiguous, cat, clone, index_add_; fill: zeros; the MoE
  routing ops among them: topk, x[rows], index_add_) at working sets from tens of KiB to tens of
  MiB, and each on a (1, 32) tensor: what one eager call of that class costs whatever its size
  (argument checks, output allocation, dispatch), the floor of the class's ops; on that tensor
  only, TINY_EXTRA_OPS too (the small ops of RoPE, masks and routing: their floors by aten op);
- ``attention_families``: fused attention (``scaled_dot_product_attention``, the kernel eager
  PyTorch picks) in decode's shape (one query token against S cached ones, S = 64 to 4096) and
  prefill's (T = S causal), 8 heads of 64: a fixed cost per call well above one elementwise op's,
  and a rate that differs between the memory-bound decode and the compute-bound prefill;
- on a CPU each class probe is also recorded under torch.profiler (``profiled_seconds``), the way
  `roofline profile` reads a user's trace: the profiler's own cost per recorded op (several us, tens
  for composites such as ``rms_norm`` that record their children) is then part of what is fitted
  for ops measured that way, and left out of what is fitted for the wall clock;
- the GEMM family is timed warm (the same B each run) and cold (caches flushed between runs):
  a model's forward reads each weight once, from main memory when its weights outgrow the cache;
- ``class_families`` are timed cold too (``COLD``: the caches flushed before each call, outside the
  timed window): inside a forward the small ops run after GEMMs that evicted their operands, and
  on the 2-core EPYC of docs/accuracy-models.md a (512, 1408) fp32 mul ran 92 us warm, 313 us
  after a flush and 275 us after a GEMM. A flush also evicts the dispatcher's code and data: a cold
  (1, 32) add costs ~30 us against ~2 us warm, so the cold tiny probe is subtracted as the cold
  call's own cost (the data-cold, code-warm case of a forward; residuals.fit_residuals).

Each class probe is costed by tracing it on the meta device with the same rules (roofline.trace)
that cost a user's traced or profiled model, so the measured / modelled ratio fitted here is the
one those ops need. Outputs are allocated as eager code allocates them (no ``out=``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from roofline.measure.device import torch_dtype
from roofline.measure.residuals import NARROW, STRIDED, TINY, WIDE  # the shape texts' tags have one home, residuals.py
from roofline.units import US

WIDTH = WIDE  # columns of the (rows, WIDTH) activations of the class probes
TINY_WIDTH = 32  # each op also on a (1, 32) tensor: its eager dispatch cost, the class's floor
COLD_REPEATS = 5  # calls of each cold probe timed (each after a flush of twice the last cache)
CPU_ROWS = (16, 64, 256, 1024, 4096)  # 64 KiB to 16 MiB per fp32 operand
CUDA_ROWS = (64, 512, 4096, 32768)
CPU_GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CPU_GEMM_NK = (256, 512, 1024, 2048)
CPU_POOL_M = (1, 8)  # the GEMMs timed with weights from pools of several sizes (calibration._gemm_pool)
CPU_POOL_NK = (512, 1024)
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
    op: str = ""  # the aten op the trace rules costed ("" when several)


def _ops(rows: int, device: str, dtype: str, gen: torch.Generator, width: int = WIDTH, strided: bool = False):
    td = torch_dtype(dtype)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(td)

    WIDTH = width  # noqa: N806 - the closures below read it
    if strided:  # x and y the two halves of one (rows, 2 WIDTH) tensor, as chunk(2, -1) gives a SwiGLU's gate and up
        x, y = rnd(rows, 2 * WIDTH).chunk(2, dim=-1)
    else:
        x, y = rnd(rows, WIDTH), rnd(rows, WIDTH)
    w, b = 1.0 + rnd(WIDTH), rnd(WIDTH)
    table = rnd(max(4 * rows, 1024), WIDTH)
    idx = torch.randint(0, table.shape[0], (rows,), generator=gen, device=device)
    picks = torch.randperm(rows, generator=gen, device=device)[: max(rows // 4, 1)]  # an expert's share of the rows
    acc = torch.zeros(rows, WIDTH, device=device, dtype=td)
    return {
        "zeros": ("fill", lambda: torch.zeros(rows, WIDTH, device=device, dtype=td)),
        "add": ("elementwise", lambda: torch.add(x, y)),
        "mul": ("elementwise", lambda: torch.mul(x, y)),
        "silu": ("elementwise", lambda: F.silu(x)),
        "gelu": ("elementwise", lambda: F.gelu(x)),
        "cos": ("elementwise", lambda: torch.cos(x)),  # a transcendental: RoPE's tables, a few ns per element
        "exp": ("elementwise", lambda: torch.exp(x)),
        "rms_norm": ("norm", lambda: F.rms_norm(x, (WIDTH,), w, 1e-5)),
        "layer_norm": ("norm", lambda: F.layer_norm(x, (WIDTH,), w, b)),
        "softmax": ("softmax", lambda: torch.softmax(x, -1)),
        "sum": ("reduction", lambda: x.sum(-1)),
        "topk": ("reduction", lambda: x.topk(2, dim=-1)),  # MoE routing: the top-k experts of each row
        "index": ("gather", lambda: x[picks]),  # MoE dispatch: an expert's rows gathered
        "index_add": ("copy", lambda: acc.index_add_(0, picks, y[: len(picks)])),  # MoE combine
        "embedding": ("gather", lambda: F.embedding(idx, table)),
        "index_select": ("gather", lambda: table.index_select(0, idx)),
        "transpose copy": ("copy", lambda: x.t().contiguous()),
        "cat": ("copy", lambda: torch.cat([x, y])),
        "clone": ("copy", lambda: x.clone()),
    }


TINY_EXTRA_OPS = ("sub", "mul scalar", "div scalar", "pow scalar base", "reciprocal", "rsqrt", "sin",
                  "neg", "eq scalar", "where", "to float", "arange", "zeros_like")


def _tiny_extra_ops(device: str, dtype: str, gen: torch.Generator):
    """More elementwise and fill ops, on a (1, 32) tensor only: their eager call's own cost, which
    differs by op more than by class (a python scalar operand is wrapped into a tensor first, a
    transcendental runs its own loop): on the 2-core EPYC of docs/accuracy-models.md, interleaved
    with the other tiny probes, a div by a scalar took 8-13 us and a pow of a scalar base 10-13,
    against an add's 4-6 (fp32, one thread, 2026-12-02). The ops of RoPE's position table, an
    attention mask and an MoE router's selection (TINY_EXTRA_OPS; cos and exp, whose cost per
    element is their own, are probed at every size with the other class ops)."""
    td = torch_dtype(dtype)
    x = torch.randn(1, TINY_WIDTH, generator=gen, device=device, dtype=torch.float32).to(td)
    y = torch.randn(1, TINY_WIDTH, generator=gen, device=device, dtype=torch.float32).to(td)
    ids = torch.randint(0, 8, (1, TINY_WIDTH), generator=gen, device=device)
    mask = ids > 3
    ops = {
        "sub": ("elementwise", lambda: x - y),
        "mul scalar": ("elementwise", lambda: x * 0.5),
        "div scalar": ("elementwise", lambda: x / 32),
        "pow scalar base": ("elementwise", lambda: 10000.0 ** x),
        "reciprocal": ("elementwise", lambda: x.reciprocal()),
        "rsqrt": ("elementwise", lambda: x.rsqrt()),
        "sin": ("elementwise", lambda: x.sin()),
        "neg": ("elementwise", lambda: -x),
        "eq scalar": ("elementwise", lambda: ids == 3),
        "where": ("elementwise", lambda: torch.where(mask, x, y)),
        "to float": ("copy", lambda: ids.float()),
        "arange": ("fill", lambda: torch.arange(TINY_WIDTH, device=device, dtype=td)),
        "zeros_like": ("fill", lambda: torch.zeros_like(x)),
    }
    assert tuple(ops) == TINY_EXTRA_OPS
    return ops


class _One(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self):
        return self.fn()


def _traced_cost(fn) -> tuple[float, float, str, str]:
    """(FLOPs, bytes, category, aten op) of one probe as roofline.trace costs it (the closure's
    tensors are recorded as they are: the ops are small, running them once costs nothing); the op
    is "" when several were costed."""
    from roofline.trace import trace

    result = trace(_One(fn))
    costed = [op for op in result.ops if op.bytes > 0]
    cats = {op.category for op in costed}
    names = {op.name for op in costed}
    return (float(sum(op.flops for op in costed)), float(sum(op.bytes for op in costed)),
            cats.pop() if len(cats) == 1 else "mixed", names.pop() if len(names) == 1 else "")


NARROW_WIDTHS = (8, 32, 128)  # row-wise ops also on rows this narrow (a router's experts, a head's dim)
NARROW_OPS = ("softmax", "topk", "rms_norm", "layer_norm", "sum")  # the row-wise class probes
STRIDED_OPS = ("add", "mul", "silu", "gelu")  # also on the chunk views of a SwiGLU's gate and up (shape text STRIDED)


def class_families(device: str, dtype: str, rows=None) -> list[FamilyOp]:
    """The class probes at each row count (CPU_ROWS / CUDA_ROWS by default), costed by the trace
    rules; the row-wise ones (NARROW_OPS) also on NARROW_WIDTHS-wide rows at the two smallest
    sizes' element counts (shape text NARROW): per byte, a softmax over 8 columns ran ~30x slower
    than over 1,024 on the EPYC of docs/accuracy-models.md (scalar code per short row); the
    elementwise ones (STRIDED_OPS) also on non-contiguous inputs, the halves of a (rows, 2,048)
    tensor (shape text STRIDED): on that EPYC, after a cache flush, a silu of a (512, 1408) chunk
    view ran 924 us against 427 us contiguous, a mul of two 640 against 443 (warm: 306 / 295 and
    99 / 60), one thread, fp32, 2026-12-02."""
    rows = rows or (CUDA_ROWS if device == "cuda" else CPU_ROWS)
    gen = torch.Generator(device=device).manual_seed(0)
    out = []
    narrow = [(r * WIDTH // w, w, NARROW) for r in rows[:2] for w in NARROW_WIDTHS]
    strided = [(r, WIDTH, STRIDED) for r in rows]
    for r, width, tag in [(1, TINY_WIDTH, TINY), *((r, WIDTH, "") for r in rows), *narrow, *strided]:
        made = _ops(r, device, dtype, gen, width, strided=tag == STRIDED)
        if tag == TINY:
            made.update(_tiny_extra_ops(device, dtype, gen))
        for name, (category, fn) in made.items():
            if (tag == NARROW and name not in NARROW_OPS) or (tag == STRIDED and name not in STRIDED_OPS):
                continue
            flops, nbytes, traced_cat, op = _traced_cost(fn)
            if nbytes <= 0:  # nothing ran (a (1, n) transpose is already contiguous)
                continue
            out.append(FamilyOp(name, traced_cat if traced_cat != "mixed" else category,
                                f"{tag}({r}, {width}) {dtype}", fn, flops, nbytes, op))
    return out


ATTENTION_HEADS, ATTENTION_HEAD_DIM = 8, 64
CPU_ATTENTION_DECODE_S = (64, 256, 1024, 4096)  # one query token against S cached
CPU_ATTENTION_PREFILL_T = (64, 256, 512)  # T = S, causal
CUDA_ATTENTION_DECODE_S = (256, 2048, 16384, 65536)
CUDA_ATTENTION_PREFILL_T = (512, 2048, 8192)


def attention_families(device: str, dtype: str, decode_s=None, prefill_t=None) -> list[FamilyOp]:
    """Fused attention probes (module docstring): decode (T = 1 against S) and causal prefill
    (T = S), batch 1, ATTENTION_HEADS x ATTENTION_HEAD_DIM, plus a tiny one (T = S = 1) for the
    class's floor; costed by the trace rules like the other class probes."""
    cuda = device == "cuda"
    decode_s = decode_s or (CUDA_ATTENTION_DECODE_S if cuda else CPU_ATTENTION_DECODE_S)
    prefill_t = prefill_t or (CUDA_ATTENTION_PREFILL_T if cuda else CPU_ATTENTION_PREFILL_T)
    td = torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(0)
    h, d = ATTENTION_HEADS, ATTENTION_HEAD_DIM

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(td)

    cases = [(TINY, 1, 1, False)] + [("decode ", 1, s, False) for s in decode_s] + [("prefill ", t, t, True) for t in prefill_t]
    out = []
    for tag, t, s, causal in cases:
        q, k, v = rnd(1, h, t, d), rnd(1, h, s, d), rnd(1, h, s, d)
        fn = (lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c))
        meta = [torch.empty(x.shape, dtype=td, device="meta") for x in (q, k, v)]  # the trace's own SDPA route is meta-only
        flops, nbytes, cat, op = _traced_cost(lambda m=meta, c=causal: F.scaled_dot_product_attention(*m, is_causal=c))
        if nbytes > 0:
            out.append(FamilyOp("sdpa", cat if cat != "mixed" else "attention", f"{tag}attention T {t} S {s} "
                                f"{h}x{d} {dtype}", fn, flops, nbytes, op))
    return out


PROFILED_CALLS = 10  # calls of each probe recorded by torch.profiler
# passes of a size's probes run under the profiler before those calls, outside any annotation: the
# first calls of an op under torch.profiler run slow (on the EPYC of docs/accuracy-models.md a
# (1, 8, 1, 64) x 64-cached decode attention recorded 308, 133, 59 us in its first three calls, ~40
# after them, 2026-12-02), so a median of ten calls from a cold start is pulled up
PROFILED_WARMUP = 3


def _size_groups(ops: Sequence[FamilyOp]) -> dict[str, list[int]]:
    """The probes of one size together, as a forward runs ops of a size: a class op's group is its
    "(rows, width" ; an attention probe (shape text without one) joins the class group whose median
    bytes are nearest its own, in log (one alone where there is none). In a forward other ops run
    between two calls of an attention and evict part of its K and V: on the EPYC of
    docs/accuracy-models.md a (1, 6, 1, 64) x 257 decode recorded 50-112 us in forwards, the nearest
    decode probes 22 and 53 us back to back and 118 and 186 us interleaved with the 4,096-token one
    (fp32, one thread, 2026-12-02)."""
    import math
    import statistics

    groups: dict[str, list[int]] = {}
    loose = []
    for i, o in enumerate(ops):
        if ") " in o.shape:
            groups.setdefault(o.shape.split(") ")[0], []).append(i)
        else:
            loose.append(i)
    sizes = {k: statistics.median(ops[i].bytes for i in members) for k, members in groups.items()}
    for i in loose:
        b = max(ops[i].bytes, 1.0)
        near = min(sizes, key=lambda k: abs(math.log(max(sizes[k], 1.0) / b)), default=None)
        groups.setdefault(near if near is not None else ops[i].shape, []).append(i)
    return groups


def profiled_seconds(ops: Sequence[FamilyOp], calls: int = PROFILED_CALLS, flush=None) -> list[float | None]:
    """Per call, the time torch.profiler (``record_shapes=True``, CPU activity: what `roofline
    profile` needs) records for each probe's ops, as `roofline profile` selects them (the first op
    with a rule, walking down from the top); the median over ``calls`` calls, each probe in its own
    user annotation of one profiling session. None where nothing was selected. ``flush`` (a cache
    flush, measure.device.make_flush) runs before each call, outside its annotation: cold operands."""
    import json
    import os
    import statistics
    import tempfile

    from torch.profiler import ProfilerActivity, profile, record_function

    from roofline.measure.device import quiet_profiler
    from roofline.trace.chrome_trace import op_tree, select_ops

    quiet_profiler()
    for o in ops:
        o.fn()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        groups = _size_groups(ops)
        for members in groups.values():
            for _ in range(PROFILED_WARMUP):  # recorded but in no annotation: the profiler's first calls of an op are slow
                for i in members:
                    ops[i].fn()
            for _ in range(calls):  # interleaved: one call of each probe of the size per pass, as a forward runs them
                for i in members:
                    if flush is not None:
                        flush()
                    with record_function(f"roofline-probe-{i}-call"):
                        ops[i].fn()
    fd, path = tempfile.mkstemp(prefix="roofline-probes-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    windows: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        name = str(e.get("name", ""))
        if name.startswith("roofline-probe-") and name.endswith("-call") and "dur" in e and e.get("ph", "X") == "X":
            windows.setdefault(int(name.split("-")[2]), []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    roots = op_tree(events)
    starts = sorted((r.ts, j) for j, r in enumerate(roots))
    out: list[float | None] = []
    for i in range(len(ops)):
        per_call = []
        for t0, t1 in sorted(set(windows.get(i, []))):
            inside = [roots[j] for ts, j in starts if t0 <= ts and roots[j].end <= t1 + 1e-3]
            costed, _, _ = select_ops(inside)
            if costed:
                per_call.append(sum(n.dur for n in costed) * US)
        out.append(statistics.median(per_call) if per_call else None)
    return out

