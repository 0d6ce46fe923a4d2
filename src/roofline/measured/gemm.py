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

One row set was timed without a CUDA graph (EAGER_ROWS): each of its rows is the longer of the host's
time to issue one call and the kernels' time, where the engines replay their linear layers in a
graph. Its rows within HOST_BOUND x the host's time a call are read at the same engine's graph-timed
rows of the dtype named there (host_bound_replaced), never over their own time; the table says so.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError, check_number
from roofline.kernels import matmul_dims
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
# Row sets timed eagerly, and the same engine's graph-timed dtype that prices their host-bound rows.
# aiconfigurator's vLLM GEMM collector runs the block-fp8 linear without a CUDA graph (ai-dynamo/aiconfigurator,
# collector/vllm/collect_gemm.py: benchmark_with_power(..., use_cuda_graph=gemm_type != "fp8_block"), PR #999 of
# 2026-05-11): its GEMMs of under TINY_S of roofline take a median 90 us on an H100 or H200, 179-369 us on the
# Blackwells and 340 us on an L40S in vLLM 0.24.0's fp8_block rows, 3-15 us in every graph-timed row set of the
# same tables (bf16, fp8, nvfp4, and SGLang's and TensorRT-LLM's fp8_block): the host's time per call, which a
# served step's graph does not pay. vLLM's per-tensor fp8 rows stand in: the same engine's weight bytes, an
# activation quantisation and one GEMM a call, as its block-fp8 linear (7.7 us at a tiny GEMM on a B200,
# SGLang's and TensorRT-LLM's fp8_block 7.7 and 7.2 us); where the block rows outlast the host (over 4x the
# table's fastest), the fp8 rows of the same shape take a median 0.99-1.09 of their time on the H100, H200, B200,
# B300 and GB200.
EAGER_ROWS = {("vllm", "fp8_block"): "fp8"}
TINY_S = 1e-6  # a GEMM under this roofline: its eager row times the host alone (the floor's rows)
HOST_BOUND = 2.0  # a row under this multiple of the floor timed the host, at least in part
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
    seconds = lat.astype(float) * MS
    source = f"{ts.engine} {ts.version} gemm_perf {TABLE_DTYPE[dtype]} ({ts.gpu})"
    stand_in = EAGER_ROWS.get((ts.engine, TABLE_DTYPE[dtype]))
    if stand_in:
        seconds, said = host_bound_replaced(cols, stand_in, machine, dtype, (m, n, k), seconds)
        source += said
    quantise_s = input_quantisation_s(cols) if dtype == "fp8" and ts.engine in DYNAMIC_FP8_INPUT else 0.0
    if quantise_s:  # each row less the input's on-the-fly quantisation, never under its roofline
        seconds = np.maximum(seconds - quantise_s, bound)
        source += f", less {quantise_s * 1e6:.1f} us a call of on-the-fly input quantisation (static-scaled checkpoints)"
    eff = bound / seconds
    return GemmTable(machine, dtype, source, LogGrid.from_points((m, n, k), eff))


def host_bound_replaced(cols, stand_in: str, machine: Machine, dtype: str, mnk, seconds):
    """(seconds, words) of an eagerly timed row set (EAGER_ROWS): the host's floor a call is the
    median time of its rows of under TINY_S of roofline (its fastest without one); a row under HOST_BOUND x that floor takes the
    ``stand_in`` rows' time at its (m, n, k) where that is less (left out, NaN, where none was measured
    there); the others keep their own (the kernels outlast the host there)."""
    m, n, k = (np.asarray(v).astype(np.int64) for v in mnk)
    tiny = roofline_s(machine, dtype, m * 1.0, n * 1.0, k * 1.0) < TINY_S
    floor_s = float(np.median(seconds[tiny])) if tiny.any() else float(seconds.min())
    host = seconds < HOST_BOUND * floor_s
    other = cols["gemm_dtype"] == stand_in
    graph = dict(zip(zip(*(cols[c][other].astype(np.int64).tolist() for c in ("m", "n", "k"))),
                     (cols["latency"][other].astype(float) * MS).tolist()))
    out = seconds.copy()
    out[host] = np.minimum(seconds[host], [graph.get(key, np.nan) for key in zip(m[host].tolist(), n[host].tolist(),
                                                                                   k[host].tolist())])
    return out, (f"; timed without a CUDA graph: its {int(host.sum()):,} rows under {HOST_BOUND:g}x the host's "
                 f"{floor_s * 1e6:.0f} us a call at the {TABLE_DTYPE[stand_in]} rows' graph-timed time")


def gemm_time(machine_key: str, kernels: str, dtype: str, m: float, n: float, k: float) -> GemmEstimate:
    """One GEMM (m x k by k x n) priced from the measured tables: gemm_table(...).estimate(m, n, k)."""
    return gemm_table(machine_key, kernels, dtype).estimate(m, n, k)


def unpriced_at_every_size(kernel, family: str) -> bool:
    """Whether the tables price an op of measured ``family`` (MeasuredKernels.family_of) at none of its sizes, for
    what it is, not its size: a fused attention whose V head dim is not its K one, or chunked (the tables measured
    neither); a matmul of no (batch, M, N, K) shape, of a batch of matrices at every size, or of a dtype no GEMM
    table holds. MeasuredKernels._times and _gemm refuse these alike, an op of many sizes or of one."""
    if family == "attention":
        _, _, _, _, _, _, d, dv, _, chunked, _, _ = kernel.shape
        return bool(dv != d or chunked)
    if family == "gemm":
        dims = matmul_dims(kernel.shape)
        return dims is None or bool(np.all(np.asarray(dims[0]) != 1)) or kernel.dtype not in TABLE_DTYPE
    return False
