"""A GEMM's time from measured kernels: the engine's GEMM table on one GPU, read as each measured
point's efficiency against its roofline, interpolated between points.

A GEMM of m x k by k x n in the table's dtype was measured on a grid of (m, n, k); its roofline is
max(2 m n k / peak, bytes / bandwidth) with the machine preset's datasheet peak and bandwidth and
bytes = b (m k + k n) + 2 m n (b bytes per input element, bf16 out). Each point's efficiency is
roofline / measured. A query's efficiency is interpolated in log(m), log(n), log(k) between the
up to eight grid points around it (log-linear in the efficiency; corners not measured left out and
the rest reweighted), and its time is its own roofline / that efficiency: on a grid point exactly
the measured latency ("measured"), between points "interpolated", and outside the measured range
of any axis the efficiency of the nearest edge ("extrapolated", said in the basis).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError, check_number
from roofline.machines import Machine, get_machine
from roofline.measured.tables import MS, read_table, resolve
from roofline.units import DTYPE_BYTES

# Our dtypes and the GEMM table's gemm_dtype: per-tensor fp8 (fp8_block, DeepSeek's 128-blocks, is
# its own row set), nvfp4 on Blackwell.
TABLE_DTYPE = {"bf16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8_block", "fp4": "nvfp4"}
PEAK_DTYPE = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4"}
INPUT_BYTES = {"bf16": DTYPE_BYTES["bf16"], "fp8": 1.0, "fp8_block": 1.0, "fp4": 0.5}
OUTPUT_BYTES = DTYPE_BYTES["bf16"]


@dataclass(frozen=True)
class GemmEstimate:
    """One GEMM priced from the tables: ``time_s``, its ``roofline_s`` at the preset's peaks,
    ``basis`` (measured, interpolated or extrapolated) and the measured ``points`` it came from."""

    time_s: float
    roofline_s: float
    basis: str
    points: int
    source: str  # "trtllm 1.3.0rc20 gemm_perf (h100_sxm)"

    @property
    def speed_of_light(self) -> float:
        """The share of the roofline's speed reached: roofline / time."""
        return self.roofline_s / self.time_s


def roofline_s(machine: Machine, dtype: str, m, n, k):
    """The GEMM's bound: max(2 m n k / peak, (b (m k + k n) + 2 m n) / bandwidth)."""
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    flops = 2.0 * m * n * k
    moved = INPUT_BYTES[dtype] * (m * k + k * n) + OUTPUT_BYTES * m * n
    return np.maximum(flops / machine.peak(PEAK_DTYPE[dtype]), moved / machine.bandwidth)


@dataclass(frozen=True)
class GemmTable:
    """One engine's measured GEMMs of one dtype on one GPU, on their grid: ``latency_s`` and
    ``efficiency`` by (m, n, k) index, NaN where a point was not measured."""

    machine: Machine
    dtype: str
    source: str
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    latency_s: np.ndarray
    efficiency: np.ndarray

    def estimate(self, m: float, n: float, k: float) -> GemmEstimate:
        for name, v in (("m", m), ("n", n), ("k", k)):
            check_number(f"GEMM {name}", v)
        axes = []
        outside = False
        for axis, x in ((self.m, m), (self.n, n), (self.k, k)):
            lx, la = np.log(x), np.log(axis)
            if x <= axis[0] or x >= axis[-1]:
                outside |= not (x == axis[0] or x == axis[-1])
                i = 0 if x <= axis[0] else len(axis) - 1
                axes.append(((i, 1.0),))
                continue
            j = int(np.searchsorted(axis, x, side="right")) - 1
            w = float((lx - la[j]) / (la[j + 1] - la[j]))
            axes.append(((j, 1.0 - w), (j + 1, w)))
        weights, logs = [], []
        for corner in itertools.product(*axes):
            w = float(np.prod([cw for _, cw in corner]))
            e = self.efficiency[tuple(i for i, _ in corner)]
            if w > 0 and np.isfinite(e):
                weights.append(w)
                logs.append(np.log(e))
        bound = float(roofline_s(self.machine, self.dtype, m, n, k))
        if weights and sum(weights) > 1e-9:
            eff = float(np.exp(np.dot(weights, logs) / sum(weights)))
            exact = len(weights) == 1 and abs(weights[0] - 1.0) < 1e-12
            basis = "extrapolated" if outside else ("measured" if exact else "interpolated")
            return GemmEstimate(bound / eff, bound, basis, len(weights), self.source)
        # no measured corner around it: the nearest measured point's efficiency, in log-shape distance
        grid = np.stack(np.meshgrid(np.log(self.m), np.log(self.n), np.log(self.k), indexing="ij"), axis=-1)
        d = np.linalg.norm(grid - np.log([m, n, k]), axis=-1)
        d[~np.isfinite(self.efficiency)] = np.inf
        eff = float(self.efficiency.flat[int(np.argmin(d))])
        return GemmEstimate(bound / eff, bound, "extrapolated", 1, self.source)


@functools.cache
def gemm_table(machine_key: str, kernels: str, dtype: str) -> GemmTable:
    """The measured GEMM grid of ``kernels`` (ENGINE[@VERSION]) for a machine preset and our dtype
    (bf16, fp8, fp8_block, fp4), read once per process."""
    if dtype not in TABLE_DTYPE:
        raise RooflineError(f"no measured GEMMs in {dtype}: the tables hold {', '.join(TABLE_DTYPE)}", field="dtype")
    machine = get_machine(machine_key)
    ts = resolve(machine_key, kernels, "gemm")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "gemm_perf", ("gemm_dtype", "m", "n", "k", "latency"))
    rows = cols["gemm_dtype"] == TABLE_DTYPE[dtype]
    if not rows.any():
        have = sorted({k for k, v in TABLE_DTYPE.items() if (cols["gemm_dtype"] == v).any()})
        raise RooflineError(f"{ts.engine} {ts.version} measured no {dtype} GEMMs on {machine.name}; it has "
                            f"{', '.join(have)}", field="dtype")
    m, n, k, lat = (cols[c][rows] for c in ("m", "n", "k", "latency"))
    axes = [np.unique(v).astype(float) for v in (m, n, k)]
    idx = tuple(np.searchsorted(a, v) for a, v in zip(axes, (m, n, k)))
    latency = np.full([len(a) for a in axes], np.nan)
    seconds = lat.astype(float) * MS
    order = np.arange(len(seconds))[::-1]  # the first row of a repeated key wins, as the package reads them
    latency[tuple(i[order] for i in idx)] = seconds[order]
    mm, nn, kk = np.meshgrid(*axes, indexing="ij")
    eff = roofline_s(machine, dtype, mm, nn, kk) / latency
    source = f"{ts.engine} {ts.version} gemm_perf ({ts.gpu})"
    return GemmTable(machine, dtype, source, *axes, latency, eff)


def gemm_time(machine_key: str, kernels: str, dtype: str, m: float, n: float, k: float) -> GemmEstimate:
    """One GEMM (m x k by k x n) priced from the measured tables: gemm_table(...).estimate(m, n, k)."""
    return gemm_table(machine_key, kernels, dtype).estimate(m, n, k)
