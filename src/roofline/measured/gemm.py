"""A GEMM's time from measured kernels: the engine's GEMM table on one GPU, read as each measured
point's efficiency against its roofline, interpolated between points.

A GEMM of m x k by k x n in the table's dtype was measured on a grid of (m, n, k); its roofline is
max(2 m n k / peak, bytes / bandwidth) with the machine preset's datasheet peak and bandwidth and
bytes = b (m k + k n) + 2 m n (b bytes per input element, bf16 out). Each point's efficiency is
roofline / measured, interpolated in log(m), log(n), log(k) (grid.LogGrid), and a query's time is
its own roofline / that efficiency: on a grid point exactly the measured latency ("measured"),
between points "interpolated", past the measured range "extrapolated". TensorRT-LLM's per-tensor
fp8 rows are read less the fixed time per call of the on-the-fly input quantisation its collector
ran and its FP8 checkpoints do not (DYNAMIC_FP8_INPUT, input_quantisation_s).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError, check_number
from roofline.machines import Machine, get_machine
from roofline.measured import profile
from roofline.measured.grid import LogGrid
from roofline.measured.profile import is_profile
from roofline.measured.tables import MS, read_table, resolve
from roofline.op_counts import matmul_counts
from roofline.units import DTYPE_BYTES

# Our dtypes and the GEMM table's gemm_dtype: per-tensor fp8 (fp8_block, DeepSeek's 128-blocks, is
# its own row set), nvfp4 on Blackwell.
TABLE_DTYPE = {"bf16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8_block", "fp4": "nvfp4"}
PEAK_DTYPE = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4"}
INPUT_BYTES = {"bf16": DTYPE_BYTES["bf16"], "fp8": 1.0, "fp8_block": 1.0, "fp4": 0.5}
OUTPUT_BYTES = DTYPE_BYTES["bf16"]
# Engines whose per-tensor fp8 rows time a quantisation of the bf16 input that a deployment does not run: TensorRT-LLM's
# (aiconfigurator's collector/trtllm/collect_gemm.py loads the fp8 Linear with no input_scale, so its
# FP8QDQLinearMethod.apply, tensorrt_llm/_torch/modules/linear.py, takes the dynamic branch,
# quantize_e4m3_per_tensor: an amax pass and a quantising pass before cublas_scaled_mm, on every call), where the
# FP8 checkpoints it serves (ModelOpt exports) carry a calibrated input_scale (the static branch, or an fp8 input
# from the fused norm, no quantising at all). vLLM's and SGLang's fp8 rows time the on-the-fly quantisation their
# fp8 deployments of bf16 checkpoints do run.
DYNAMIC_FP8_INPUT = ("trtllm",)
# The shapes where a GEMM is its launch: m <= 16 and n, k <= 256 (at most 8 MFLOP, 136 kB), where what an fp8 row
# takes over the bf16 row of the same shape is the fp8 path's fixed cost per call
SMALL_M, SMALL_NK = 16, 256


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
    """The GEMM's bound: max(2 m n k / peak, (b (m k + k n) + 2 m n) / bandwidth) (op_counts.matmul_counts,
    the inputs at b bytes, the bf16 output at 2); plain floats in,
    a float out (a lookup), or arrays in, an array out (a table's points)."""
    flops, moved = matmul_counts(m, n, k, INPUT_BYTES[dtype], OUTPUT_BYTES)
    peak, bw = machine.peak(PEAK_DTYPE[dtype]), machine.bandwidth
    return np.maximum(flops / peak, moved / bw) if np.ndim(flops) else max(flops / peak, moved / bw)


@dataclass(frozen=True)
class GemmTable:
    """One engine's measured GEMMs of one dtype on one GPU: their efficiencies on the (m, n, k)
    grid (grid.LogGrid), NaN where a point was not measured."""

    machine: Machine
    dtype: str
    source: str
    grid: LogGrid

    def estimate(self, m: float, n: float, k: float) -> GemmEstimate:
        m, n, k = float(m), float(n), float(k)
        if not all(0.0 < v < math.inf for v in (m, n, k)):  # the message from the one validator
            for name, v in (("m", m), ("n", n), ("k", k)):
                check_number(f"GEMM {name}", v)
        eff, basis, points = self.grid.estimate((m, n, k))
        bound = roofline_s(self.machine, self.dtype, m, n, k)
        return GemmEstimate(bound / eff, bound, basis, points, self.source)

    def times(self, m, n, k) -> np.ndarray:
        """The measured-basis time of each of many GEMMs (arrays, broadcast), in one numpy pass."""
        m, n, k = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (m, n, k)))
        eff = self.grid.estimate_many(np.stack([m.ravel(), n.ravel(), k.ravel()], axis=1))[0].reshape(m.shape)
        return roofline_s(self.machine, self.dtype, m, n, k) / eff


def input_quantisation_s(cols: dict) -> float:
    """A table's fixed seconds per call of quantising an fp8 GEMM's input on the fly (DYNAMIC_FP8_INPUT): the median,
    over the shapes measured in both fp8 and bf16 with m <= 16 and n, k <= 256 (each GEMM there its launch), of the fp8
    latency less the bf16 one, at least 0 (0 where no such shape was measured). TensorRT-LLM 1.3.0rc20 on the H100:
    12.1 us the fastest tiny fp8 GEMM against 2.5 us in bf16."""
    small = (cols["m"] <= SMALL_M) & (cols["n"] <= SMALL_NK) & (cols["k"] <= SMALL_NK)
    def by_shape(dtype):
        rows = small & (cols["gemm_dtype"] == dtype)
        return {(int(m), int(n), int(k)): float(t) for m, n, k, t in
                zip(cols["m"][rows], cols["n"][rows], cols["k"][rows], cols["latency"][rows])}
    fp8, bf16 = by_shape(TABLE_DTYPE["fp8"]), by_shape(TABLE_DTYPE["bf16"])
    excess = [fp8[s] - bf16[s] for s in fp8.keys() & bf16.keys()]
    return max(float(np.median(excess)), 0.0) * MS if excess else 0.0


@functools.cache
def gemm_table(machine_key: str, kernels: str, dtype: str) -> GemmTable:
    """The measured GEMM grid of ``kernels`` (ENGINE[@VERSION], or a calibration profile's path) for a machine preset and our dtype
    (bf16, fp8, fp8_block, fp4), read once per process."""
    if dtype not in TABLE_DTYPE:
        raise RooflineError(f"no measured GEMMs in {dtype}: the tables hold {', '.join(TABLE_DTYPE)}", field="dtype")
    if is_profile(kernels):  # a user's calibration: the same table from its own points
        machine, (m, n, k), body, source = profile.gemm_points(machine_key, kernels, dtype)
        return GemmTable(machine, dtype, source, LogGrid.from_points((m, n, k), roofline_s(machine, dtype, m, n, k) / body))
    machine = get_machine(machine_key)
    ts = resolve(machine_key, kernels, "gemm")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "gemm_perf", ("gemm_dtype", "m", "n", "k", "latency"))
    rows = cols["gemm_dtype"] == TABLE_DTYPE[dtype]
    if not rows.any():
        have = sorted({k for k, v in TABLE_DTYPE.items() if (cols["gemm_dtype"] == v).any()})
        raise RooflineError(f"{ts.engine} {ts.version} measured no {dtype} GEMMs on {machine.name}; it has "
                            f"{', '.join(have)}", field="dtype")
    m, n, k, lat = (cols[c][rows] for c in ("m", "n", "k", "latency"))
    bound = roofline_s(machine, dtype, *(v.astype(float) for v in (m, n, k)))
    lat_s, source = lat.astype(float) * MS, f"{ts.engine} {ts.version} gemm_perf {TABLE_DTYPE[dtype]} ({ts.gpu})"
    quantise_s = input_quantisation_s(cols) if dtype == "fp8" and ts.engine in DYNAMIC_FP8_INPUT else 0.0
    if quantise_s:  # each row less the input's on-the-fly quantisation, never under its roofline
        lat_s = np.maximum(lat_s - quantise_s, bound)
        source += f", less {quantise_s * 1e6:.1f} us a call of on-the-fly input quantisation (static-scaled checkpoints)"
    eff = bound / lat_s
    return GemmTable(machine, dtype, source, LogGrid.from_points((m, n, k), eff))


def gemm_time(machine_key: str, kernels: str, dtype: str, m: float, n: float, k: float) -> GemmEstimate:
    """One GEMM (m x k by k x n) priced from the measured tables: gemm_table(...).estimate(m, n, k)."""
    return gemm_table(machine_key, kernels, dtype).estimate(m, n, k)
