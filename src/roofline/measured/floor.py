"""The least time a kernel takes inside a CUDA graph, read from an engine's measured GEMM table: the
floor under every small kernel the tables do not measure (norms, activations and the other
element-wise ops, which their bandwidth time alone prices at 0.01-0.3 us in a decode step).

A GEMM whose roofline (its FLOPs at the bf16 peak, its operands at the bandwidth) is under 1% of its
measured time does no work worth the name: its time is the GPU's cost of running one kernel in the
engine's CUDA graph (the tables replay each GEMM in a graph: aiconfigurator's collector, bf16 rows).
The floor is the median of those rows' latencies (H200: 2.7-2.9 us over 880-940 such rows of each
engine's table; B200 2.2 us; aiconfigurator itself adds 3 us to every memory-bound op,
mem_empirical_constant_latency in its systems/*.yaml, "based on observations"). Latencies are in
milliseconds. Not transferred to another GPU (a launch's cost is the GPU's and its driver's).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.cost import time_lower_bound
from roofline.errors import RooflineError
from roofline.machines import get_machine
from roofline.measured.gemm import GemmEstimate
from roofline.measured.tables import MS, read_table, resolve

LATENCY_BOUND = 0.01  # a row whose roofline is under this share of its measured time is all floor


@dataclass(frozen=True)
class KernelFloor:
    """The floor in seconds, the rows it is the median of, and its source."""

    seconds: float
    rows: int
    source: str


@functools.cache
def kernel_floor(machine_key: str, kernels: str) -> KernelFloor:
    """The floor of ``kernels`` (ENGINE[@VERSION]) on a machine preset: the median latency of its bf16
    GEMM rows whose roofline is under LATENCY_BOUND of their time (refused by name without a table)."""
    ts = resolve(machine_key, kernels, "gemm")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "gemm_perf", ("gemm_dtype", "m", "n", "k", "latency"))
    bf16 = np.asarray(cols["gemm_dtype"]).astype(str) == "bfloat16"
    m, n, k = (cols[c][bf16].astype(float) for c in ("m", "n", "k"))
    seconds = cols["latency"][bf16].astype(float) * MS
    machine = get_machine(machine_key)
    # (M, K) @ (K, N): 2 M N K FLOPs; A, B read once and C written once at 2 bytes
    roofline_s = np.maximum(2.0 * m * n * k / machine.peak("bf16"), 2.0 * (m * k + k * n + m * n) / machine.bandwidth)
    idle = roofline_s < LATENCY_BOUND * seconds
    if not idle.any():
        return KernelFloor(0.0, 0, f"{ts.engine} {ts.version} gemm_perf ({ts.gpu}): no latency-bound bf16 rows")
    return KernelFloor(float(np.median(seconds[idle])), int(idle.sum()),
                       f"{ts.engine} {ts.version} gemm_perf ({ts.gpu}): median of its {int(idle.sum())} bf16 GEMMs "
                       "of under 1% roofline, the least a kernel takes in its CUDA graph")


def floor_estimate(kernel, machine, kernels: str, body_s):
    """(estimate, why not) of a floored op (MeasuredKernels.floored) of ``body_s`` on the cost model: at
    least ``kernels``' floor on ``machine``, basis "floor"; None with the reason where the engine has no
    table or the body is over the floor at every size (the cost model's time as it was)."""
    try:
        floor = kernel_floor(machine.key, kernels)
    except RooflineError as exc:
        return None, str(exc)
    if np.all(np.asarray(body_s) >= floor.seconds):
        return None, f"no measured {kernel.category} family yet (over the kernel floor)"
    return GemmEstimate(np.maximum(body_s, floor.seconds), time_lower_bound(kernel, machine), "floor", floor.rows,
                        f"at least the kernel floor {floor.seconds * 1e6:.2f} us: {floor.source}"), None
