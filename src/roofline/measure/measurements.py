"""What `roofline calibrate` measured (docs/measuring.md): matmul and bandwidth curves and probe
ops (Curve, Probe, Calibration), and the numbers derived from them (peaks, bandwidth per cache
level, timing spread). Every time is first reduced to its body, t - launch (at least a quarter of
t), because the cost model adds the launch back. Pure numpy; machine_file.py reads and writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roofline.diagnose.check_report import TimedOp
from roofline.errors import RooflineError
from roofline.measure.drift import ReferenceRun
from roofline.units import KIB, MIB


BANDWIDTH_KINDS = ("copy", "add")
MIN_BODY_SHARE = 0.25  # a time's body (t - launch) is at least this share of t


@dataclass(frozen=True)
class Curve:
    """One micro-benchmark over a size sweep. ``kind`` is "matmul" (``size`` = n of a square
    n x n x n matmul in ``dtype``), "gemm" (``size`` = M of an (M, K) @ (K, N) with the skinny M
    of decode, ``n`` and ``k`` per point) or "copy"/"add" (``size`` = working set in bytes). ``seconds``
    are medians, ``low_s``/``high_s`` the 10th/90th percentiles of the repeats."""

    kind: str
    dtype: str
    size: tuple[float, ...]
    flops: tuple[float, ...]
    bytes: tuple[float, ...]
    seconds: tuple[float, ...]
    low_s: tuple[float, ...]
    high_s: tuple[float, ...]
    n: tuple[float, ...] = ()  # kind "gemm": size is M of an (M, K) @ (K, N), these N and K
    k: tuple[float, ...] = ()
    pool: tuple[float, ...] = ()  # kind "gemm_pool": the bytes of the weight pool each point cycled through


@dataclass(frozen=True)
class Probe(TimedOp):
    """One op of a scaled-down block, timed during calibration: FLOPs and bytes as the kernel
    constructors count them, median and 10th/90th-percentile seconds."""

    low_s: float
    high_s: float
    shape: str = ""
    op: str = ""  # a class probe's aten op, as the trace rules name it (e.g. "aten::_fused_rms_norm")
    profiled_s: float | None = None  # a CPU class probe's time per call as torch.profiler records it


@dataclass(frozen=True)
class Calibration:
    """Everything one `roofline calibrate` run measured. ``caches`` are (name, bytes) from the
    smallest level up, sized for the threads used (per-core caches times the cores in use)."""

    key: str
    device: str
    device_name: str
    date: str
    torch_version: str
    threads: int
    budget_s: float
    default_dtype: str
    launch_s: float
    launch_low_s: float
    launch_high_s: float
    caches: tuple[tuple[str, float], ...]
    matmul: tuple[Curve, ...]
    bandwidth: tuple[Curve, ...]
    probes: tuple[Probe, ...] = ()
    gemm: tuple[Curve, ...] = ()  # skinny-M GEMMs per dtype, warm ("gemm"), weights streamed ("gemm_cold") and
    # streamed from pools of several sizes ("gemm_pool", CPU); older profiles have none or fewer
    vendor: str = ""
    memory_bytes: float | None = None
    sm_count: int | None = None
    notes: str = ""
    framework_gap_s: float | None = None  # eager framework time per gap between top-level ops (measure.framework)
    framework_probe: str = ""  # how it was measured
    reference: ReferenceRun | None = None  # the reference kernel's drift and the machine's load (drift.py); older: None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def source(self) -> str:
        return f"measured: roofline calibrate on {self.date}"


# ---------------------------------------------------------------------------------------------
# Derived numbers
# ---------------------------------------------------------------------------------------------


def body_s(seconds, launch_s: float):
    """The part of a measured time the roofline explains: max(t - launch, t / 4)."""
    t = np.asarray(seconds, dtype=float)
    return np.maximum(t - launch_s, MIN_BODY_SHARE * t)


def matmul_rates(cal: Calibration, dtype: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(FLOPs, achieved FLOP/s) of the dtype's matmul sweep, sorted by FLOPs; None if unmeasured."""
    for c in cal.matmul:
        if c.dtype == dtype and c.flops and c.kind == "matmul":
            f = np.asarray(c.flops, dtype=float)
            rate = f / body_s(c.seconds, cal.launch_s)
            order = np.argsort(f)
            return f[order], rate[order]
    return None


def gemm_points(cal: Calibration, dtype: str, cold: bool = False):
    """(M, N x K, achieved FLOP/s) of the dtype's skinny-M GEMM family, timed warm (the same
    weight every call) or with its weights streamed from main memory (``cold``: a different weight
    each call; profiles written before 2026-12-02 flushed the caches instead), or None if unmeasured."""
    kind = "gemm_cold" if cold else "gemm"
    for c in cal.gemm:
        if c.dtype == dtype and c.flops and c.kind == kind:
            m, nk = np.asarray(c.size, dtype=float), np.asarray(c.n, dtype=float) * np.asarray(c.k, dtype=float)
            return m, nk, np.asarray(c.flops, dtype=float) / body_s(c.seconds, cal.launch_s)
    return None


def grid_rate(pts, M: float, NK: float):
    """(FLOP/s, outside, (Ms, NKs)) of a GEMM family's points (gemm_points) at (M, N x K), bilinear
    in (log M, log N K) and clamped at the grid's edges (outside); None past its largest M or on a
    grid with holes."""
    if pts is None:
        return None
    ms, nks, rates = pts
    mu, nku = np.unique(ms), np.unique(nks)
    if M > mu.max() or len(mu) * len(nku) != len(ms):
        return None
    grid = np.full((len(nku), len(mu)), np.nan)
    grid[np.searchsorted(nku, nks), np.searchsorted(mu, ms)] = np.log(rates)
    lm, lnk = np.log(max(M, 1.0)), np.log(max(NK, 1.0))
    along_m = np.array([np.interp(lm, np.log(mu), row) for row in grid])
    outside = not (mu.min() <= M <= mu.max() and nku.min() <= NK <= nku.max())
    return float(np.exp(np.interp(lnk, np.log(nku), along_m))), outside, (mu, nku)


POOL_GAP_SHARE = 0.2  # a pool shape counts where streaming its weight costs at least this share of its time


def cached_share(cal: Calibration, dtype: str, reuse_bytes: float):
    """(phi, basis) for a forward that reads each weight again only after ``reuse_bytes`` (its
    bytes): the share of the streaming penalty (cold - warm time of the skinny-M GEMM family) that
    its weights avoid, from the "gemm_pool" points (the same GEMMs with the weight streamed from a
    pool of P bytes: a pool that stays in the last cache reads near the warm time, one that
    outgrows it near the cold). Per pool, phi = median over its shapes of (cold - t_P) / (cold - warm),
    clipped to [0, 1], over the shapes whose cold time is at least POOL_GAP_SHARE above the warm.
    A forward takes the phi of the smallest pool at least its bytes (0 past the largest): a cache
    holding weights read in turn keeps them all until they outgrow it and then almost none, so
    between two pools the truth is either, and interpolating would put it halfway; the next pool
    up is the cautious side. On the Xeon VM of 2026-12-02 (105 MiB L3), 13-27 MiB decode forwards
    ran their GEMMs near the 28-37 MiB pools' phi (0.1-0.2), while interpolating at their bytes gave
    0.2-0.5 and GEMMs 22-27% fast. None where the profile has no pool points at this dtype."""
    pool = next((c for c in cal.gemm if c.kind == "gemm_pool" and c.dtype == dtype and c.pool), None)
    if pool is None or not cal.caches:
        return None
    times = {}
    for kind in ("gemm", "gemm_cold"):
        for c in cal.gemm:
            if c.kind == kind and c.dtype == dtype:
                times[kind] = {(m, n, k): t for m, n, k, t in zip(c.size, c.n, c.k, c.seconds)}
    if len(times) < 2:
        return None
    by_pool: dict[float, list[float]] = {}
    for m, n, k, p, t in zip(pool.size, pool.n, pool.k, pool.pool, pool.seconds):
        warm, cold = times["gemm"].get((m, n, k)), times["gemm_cold"].get((m, n, k))
        if warm is None or cold is None or cold - warm < POOL_GAP_SHARE * cold:
            continue
        by_pool.setdefault(p, []).append(min(max((cold - t) / (cold - warm), 0.0), 1.0))
    if not by_pool:
        return None
    sizes = sorted(by_pool)
    at = next((p for p in sizes if p >= reuse_bytes), None)
    if at is None:
        return 0.0, (f"streamed: a weight read again after {reuse_bytes / MIB:,.1f} MiB, past the largest pool "
                     f"probed ({sizes[-1] / MIB:,.0f} MiB)")
    phi = float(np.median(by_pool[at]))
    basis = (f"{phi:.0%} of the streaming cost avoided: a weight read again after {reuse_bytes / MIB:,.1f} MiB, "
             f"as from the {at / MIB:,.1f} MiB pool (pools of {sizes[0] / MIB:,.0f}-{sizes[-1] / MIB:,.0f} MiB probed)")
    return phi, basis


PEAK_LAUNCH_SHARE = 0.1  # a size's rate counts for the peak where the launch it subtracts is at most this share of its time


def best_rate(cal: Calibration, dtype: str) -> float | None:
    """The best achieved matmul FLOP/s of the dtype's sweep, over the sizes whose launch is at most
    PEAK_LAUNCH_SHARE of their time (all sizes where none is that long): a small matmul's rate,
    FLOPs / (t - launch), leans on a launch measured on another op (a 1-element add), and on the
    2-core EPYC of docs/accuracy-models.md a 64^3 fp32 matmul of 6.9 us less 2.6 us of launch
    read 121 GFLOP/s where no larger size beat 100 (2026-12-02). None if unmeasured."""
    for c in cal.matmul:
        if c.dtype == dtype and c.flops and c.kind == "matmul":
            t = np.asarray(c.seconds, dtype=float)
            rate = np.asarray(c.flops, dtype=float) / body_s(t, cal.launch_s)
            long = cal.launch_s <= PEAK_LAUNCH_SHARE * t
            return float(rate[long].max() if long.any() else rate.max())
    return None


def peaks(cal: Calibration) -> dict[str, float]:
    """Best achieved matmul FLOP/s per dtype (best_rate): the profile's peak_flops_per_s."""
    out = {}
    for c in cal.matmul:
        best = best_rate(cal, c.dtype)
        if best is not None:
            out[c.dtype] = best
    return out


def stream_curve(cal: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """(working set bytes, bytes/s): at each working set the better of copy and add."""
    best: dict[float, float] = {}
    for c in cal.bandwidth:
        rate = np.asarray(c.bytes, dtype=float) / body_s(c.seconds, cal.launch_s)
        for ws, r in zip(c.size, rate):
            best[float(ws)] = max(best.get(float(ws), 0.0), float(r))
    ws = np.array(sorted(best))
    return ws, np.array([best[w] for w in ws])


def main_memory(cal: Calibration) -> tuple[float, str]:
    """(bytes/s, note) of main memory: the best stream bandwidth at working sets of at least twice
    the last cache; if the sweep stopped short of that, the largest working set's."""
    ws, bw = stream_curve(cal)
    if not ws.size:
        raise RooflineError("calibration has no bandwidth measurements", field="profile")
    llc = cal.caches[-1][1] if cal.caches else 0.0
    beyond = ws >= 2 * llc
    if beyond.any():
        return float(bw[beyond].max()), f"best copy/add at working sets {_mib(ws[beyond].min())}-{_mib(ws.max())} (>= 2x last cache {_mib(llc)})"
    return float(bw[-1]), f"largest working set measured, {_mib(ws[-1])}: short of 2x the last cache ({_mib(llc)})"


def level_bandwidths(cal: Calibration) -> list[tuple[str, float, float]]:
    """(name, size bytes, bytes/s) per cache level: the best stream bandwidth over the working sets
    that fit the level and not the one below, raised to the best of every larger level and of main
    memory. Data in a small cache is never slower to reach than in a larger one: a small level that
    measures slower (its working sets are so short that dispatch dominates them) takes the larger
    level's bandwidth. Levels with no such working set are left out."""
    ws, bw = stream_curve(cal)
    measured, below = [], 0.0
    for name, size in cal.caches:
        inside = (ws > below) & (ws <= size)
        if inside.any():
            measured.append((name, float(size), float(bw[inside].max())))
        below = size
    out, floor = [], main_memory(cal)[0] if ws.size else 0.0
    for name, size, rate in reversed(measured):  # largest level first: each is at least the ones above it
        floor = max(floor, rate)
        out.append((name, size, floor))
    return out[::-1]


def timing_spread(cal: Calibration) -> tuple[float, float]:
    """Median of (10th percentile / median) and of (90th percentile / median) over every
    measurement of the calibration: how much a repeat of one op varies on this machine."""
    lo, hi = [], []
    for c in (*cal.matmul, *cal.bandwidth):
        lo += [l / s for l, s in zip(c.low_s, c.seconds)]
        hi += [h / s for h, s in zip(c.high_s, c.seconds)]
    lo += [p.low_s / p.measured_s for p in cal.probes]
    hi += [p.high_s / p.measured_s for p in cal.probes]
    if not lo:
        return 1.0, 1.0
    return min(1.0, float(np.median(lo))), max(1.0, float(np.median(hi)))


def _mib(n: float) -> str:
    return f"{n / MIB:,.3g} MiB" if n >= MIB else f"{n / KIB:,.3g} KiB"


PROBE_DISAGREEMENT = 1.5  # two probes of one op at one shape, in one calibration, further apart than this: noise


def disagreeing_probes(cal, ratio: float = PROBE_DISAGREEMENT) -> list[tuple[Probe, Probe]]:
    """Pairs of the calibration's probes that time the same op (category, dtype, FLOPs, bytes and
    shape) more than ``ratio`` apart: a busy machine, or the op's place in the block (the same
    rms_norm at (256, 512) took 299 us as the attention's norm and 84 us as the MLP's in one run);
    each pair once, the widest first."""
    groups: dict = {}
    for p in cal.probes:
        # block probes of one kernel under two names (attn norm, ffn norm) are one op; a class probe's name is
        # its variant (a transposed copy is not a clone), so those pair only with their own repeats
        groups.setdefault((p.category, p.dtype, p.flops, p.bytes, p.shape, p.op, p.name if p.op else ""), []).append(p)
    out = []
    for ps in groups.values():
        if len(ps) > 1:
            lo, hi = min(ps, key=lambda p: p.measured_s), max(ps, key=lambda p: p.measured_s)
            if lo.measured_s > 0 and hi.measured_s > ratio * lo.measured_s:
                out.append((hi, lo))
    return sorted(out, key=lambda pair: -pair[0].measured_s / pair[1].measured_s)


def disagreement_text(cal) -> str | None:
    """One line on disagreeing_probes, or None."""
    pairs = disagreeing_probes(cal)
    if not pairs:
        return None
    hi, lo = pairs[0]
    return (f"{len(pairs)} pair(s) of probes time the same op at the same shape more than {PROBE_DISAGREEMENT:g}x apart "
            f"(e.g. {hi.name} {hi.measured_s * 1e6:,.1f} us and {lo.name} {lo.measured_s * 1e6:,.1f} us, {hi.shape}): a busy "
            "machine, or the ops before each (one runs after a GEMM that evicted its input); each keeps its own "
            "correction, and an op priced by the other's carries the difference (calibrate again on an idle machine "
            "to tell which)")
