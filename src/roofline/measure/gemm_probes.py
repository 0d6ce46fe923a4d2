"""calibrate's skinny-M GEMM family (measure.families' M and N = K): warm (the same weight every
call), with the weight streamed from main memory (a different weight each call), and on a CPU from
pools of several sizes up to the last cache (how much of a forward's weights the last cache keeps,
measurements.cached_share). ``clock`` is calibration's phase clock (its budget and progress)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from roofline.measure.device import torch_dtype
from roofline.measure.measurements import Curve
from roofline.measure.timing import bench, bench_round_robin
from roofline.op_counts import matmul_counts
from roofline.units import DTYPE_BYTES, MIB


def gemm_family(device, sync, plan, clock) -> tuple[Curve, ...]:
    """The skinny-M GEMM family (plan.gemm_m x plan.gemm_nk, from measure.families) per dtype, within what is left of the phase."""
    ms, nks = plan.gemm_m, plan.gemm_nk
    curves = []
    for j, dtype in enumerate(plan.matmul_dtypes):
        td = torch_dtype(dtype)
        rows = []
        share = clock.left() / max(len(plan.matmul_dtypes) - j, 1)
        pooled = device == "cpu" and plan.gemm_pool_m and plan.gemm_pool_nk
        warm_share = share * (5 / 12 if pooled else 1 / 2)  # warm, cold, and a sixth for the pools on a CPU
        per_point = max(warm_share / max(len(ms) * len(nks), 1), 0.0)
        for nk in nks:
            b = torch.randn(nk, nk, device=device).to(td)
            for m in ms:
                a, c = torch.randn(m, nk, device=device).to(td), torch.empty(m, nk, device=device, dtype=td)
                t = bench(lambda: torch.matmul(a, b, out=c), sync=sync, budget_s=per_point, max_repeats=15)
                rows.append((m, nk, nk, *matmul_counts(m, nk, nk, DTYPE_BYTES[dtype]), t))
                del a, c
            del b
            clock.report(1.0, f"gemm {dtype} N = K = {nk}: M {ms[0]} to {ms[-1]}")
        if rows:
            col = lambda i: tuple(float(r[i]) for r in rows)  # noqa: E731
            curves.append(Curve("gemm", dtype, col(0), col(3), col(4), tuple(r[5].median_s for r in rows),
                                tuple(r[5].low_s for r in rows), tuple(r[5].high_s for r in rows), n=col(1), k=col(2)))
            cold = _gemm_cold(device, sync, td, rows, warm_share, clock)
            curves.append(Curve("gemm_cold", dtype, col(0), col(3), col(4), tuple(t.median_s for t in cold),
                                tuple(t.low_s for t in cold), tuple(t.high_s for t in cold), n=col(1), k=col(2)))
            if pooled:
                curves.append(_gemm_pool(device, td, dtype, [r for r in rows if r[0] in plan.gemm_pool_m
                                                             and r[1] in plan.gemm_pool_nk], share / 6, clock))
    return tuple(curves)


POOL_POINTS = 6  # pool sizes from twice a core's own cache to the last cache, geometric


def pool_sizes(caches) -> tuple[float, ...]:
    """The weight pools of _gemm_pool: POOL_POINTS sizes, geometric from twice the level below the
    last cache (a core's own) to the last cache itself; () with fewer than two levels known."""
    if len(caches) < 2:
        return ()
    lo, hi = 2.0 * float(caches[-2][1]), float(caches[-1][1])
    if hi <= lo:
        return (hi,)
    return tuple(float(x) for x in np.geomspace(lo, hi, POOL_POINTS))


def _gemm_pool(device, td, dtype: str, rows, budget_s: float, clock) -> Curve:
    """A few decode GEMMs with their weight streamed from pools of pool_sizes(): the rate of a
    weight read again after P bytes of other weights, which a forward of P bytes does (its weights
    in turn, then the next forward). Each point is timed alone (interleaving would add the other
    points' pools to its reuse distance), after one whole cycle of its pool. On the Xeon VM of
    2026-12-02 (105 MiB L3) a (1, 1536) x (1536, 512) fp32 GEMM took 140 us warm, 141 us from an
    8 MiB pool, 231 us from 26 MiB and 314-328 us from 52 MiB up: the last cache holds much less
    than its size for one process (other tenants), which the pools measure rather than assume."""
    from roofline.measure.device import device_info

    sizes = pool_sizes(device_info(device).caches)
    itemsize = torch.empty((), dtype=td).element_size()
    per_point = max(budget_s / max(len(rows) * len(sizes), 1), 0.0)
    out = []  # (m, n, k, pool bytes, timing)
    for size in sizes:
        pool = torch.randn(int(max(size // itemsize, max(n * k for _, n, k, *_ in rows))), device=device).to(td)
        for m, n, k, *_ in rows:
            nxt = weight_stream(pool, n, k)
            a, c = torch.randn(m, k, device=device).to(td), torch.empty(m, n, device=device, dtype=td)
            for _ in range(pool.numel() // (n * k)):  # one whole cycle: every slice read once
                torch.mm(a, nxt().t(), out=c)
            t = bench(lambda: torch.mm(a, nxt().t(), out=c), budget_s=per_point, max_repeats=15)
            out.append((m, n, k, pool.numel() * itemsize, t))
        del pool
        clock.report(1.0, f"gemm {dtype} weights from a {size / MIB:,.0f} MiB pool: {len(rows)} points")
    col = lambda i: tuple(float(r[i]) for r in out)  # noqa: E731
    counts = [matmul_counts(m, n, k, DTYPE_BYTES[dtype]) for m, n, k, *_ in out]
    return Curve("gemm_pool", dtype, col(0), tuple(f for f, _ in counts),
                 tuple(b for _, b in counts), tuple(r[4].median_s for r in out),
                 tuple(r[4].low_s for r in out), tuple(r[4].high_s for r in out), n=col(1), k=col(2), pool=col(3))


def weight_stream(pool: torch.Tensor, n: int, k: int) -> Callable[[], torch.Tensor]:
    """A function returning the next (n, k) weight of ``pool`` (a flat tensor) at each call: the
    pool's consecutive slices in turn, back to the first after the last (at least one slice)."""
    n, k = int(n), int(k)
    count = pool.numel() // (n * k)
    if count < 1:
        raise ValueError(f"a pool of {pool.numel()} elements holds no ({n}, {k}) weight")
    views = [pool[i * n * k:(i + 1) * n * k].view(n, k) for i in range(count)]
    at = [-1]

    def nxt() -> torch.Tensor:
        at[0] = (at[0] + 1) % count
        return views[at[0]]

    return nxt


def _gemm_cold(device, sync, td, rows, budget_s: float, clock):
    """The same GEMMs with their weight streamed from main memory, as a forward reads its weights:
    each call multiplies by a different (N, K) weight, the next slice of one pool of twice the last
    cache (device.flush_bytes), so a weight comes back only after the whole pool has been read,
    while the dispatcher's code and the small activations stay cached. The layout is nn.Linear's
    (x @ W.T). A flush before every call instead (the cold class probes' method) also evicts the
    code: on the 2-core EPYC of docs/accuracy-models.md it added ~100 us to every cold call (a
    (1, 256) @ (256, 256) 118 us flushed against 39 us streamed), where decode GEMMs inside a forward
    measured 31-40 us; streamed and in-forward times of ten decode and MoE expert shapes agreed
    within ~15% (one thread, fp32, 2026-12-02; the shapes of benchmarks/accuracy_models.py's models)."""
    from roofline.measure.device import device_info, flush_bytes

    pool_bytes = flush_bytes(device_info(device).caches)
    itemsize = torch.empty((), dtype=td).element_size()
    largest = max(n * k for _, n, k, *_ in rows)
    pool = torch.randn(int(max(pool_bytes // itemsize, 4 * largest)), device=device).to(td)
    streams = {}  # the calls of one (N, K) share a stream: a slice returns only after the whole pool
    for _, n, k, *_ in rows:
        streams.setdefault((n, k), weight_stream(pool, n, k))
    fns, keep = [], []
    for m, n, k, *_ in rows:
        a, c = torch.randn(m, k, device=device).to(td), torch.empty(m, n, device=device, dtype=td)
        keep.append((a, c))
        fns.append(lambda a=a, c=c, nxt=streams[(n, k)]: torch.mm(a, nxt().t(), out=c))
    times = bench_round_robin(fns, sync=sync, budget_s=max(budget_s, 0.0), max_repeats=15)
    clock.report(1.0, f"gemm streamed weights: {len(rows)} points")
    return times
