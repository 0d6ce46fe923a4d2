"""A tensor-parallel all-reduce's time from measured kernels: the engine's own custom all-reduce,
as measured on one GPU's NVLink node of 2, 4 or 8 GPUs.

The table times an all-reduce of a message of bf16 elements (message_size counts elements, not
bytes: 128 to 512 Mi) by GPU count, replayed in a CUDA graph (vLLM's and SGLang's eager rows are
left out, as the engines capture their decode steps). Between sizes the throughput (elements /
latency) is interpolated log-linearly (grid.LogGrid); below the smallest size the smallest's
latency holds (a small all-reduce costs its fixed latency), past the largest its throughput
("extrapolated" either way). Latencies are in milliseconds. A GPU count the table lacks (past one
node) is refused, never borrowed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError
from roofline.measured.gemm import GemmEstimate
from roofline.measured.grid import LogGrid
from roofline.measured.tables import MS, group_rows, read_table, resolve

ELEMENT_BYTES = 2.0  # the table's bf16 elements: a message of b bytes is b / 2 of them


@dataclass(frozen=True)
class AllReduceTable:
    """A LogGrid over message elements per GPU count, and each count's smallest message and its time."""

    source: str
    sites: dict
    smallest: dict

    def estimate(self, gpus, message_bytes) -> GemmEstimate:
        g = int(gpus)
        grid = self._site(g)
        n = float(message_bytes) / ELEMENT_BYTES
        low_n, low_s = self.smallest[g]
        if n < low_n:  # latency-bound: the smallest message's time
            return GemmEstimate(low_s, 0.0, "extrapolated", 1, self.source)
        rate, basis, points = grid.estimate((n,))
        return GemmEstimate(n / rate, 0.0, basis, points, self.source)

    def times(self, gpus, message_bytes) -> np.ndarray:
        """The all-reduce's time for an array of message sizes, in one numpy pass."""
        g = int(gpus)
        n = np.asarray(message_bytes, dtype=float) / ELEMENT_BYTES
        rate = self._site(g).estimate_many(n.reshape(-1, 1))[0].reshape(n.shape)
        low_n, low_s = self.smallest[g]
        return np.where(n < low_n, low_s, n / rate)

    def _site(self, g: int) -> LogGrid:
        grid = self.sites.get(g)
        if grid is None:
            raise RooflineError(f"no measured all-reduce across {g} GPUs: the engine's was measured across "
                                f"{', '.join(map(str, sorted(self.sites)))} (one node)", field="tensor_parallel")
        return grid


@functools.cache
def all_reduce_table(machine_key: str, kernels: str) -> AllReduceTable:
    ts = resolve(machine_key, kernels, "comm")
    if "custom_allreduce_perf" not in {name for name, _, _ in ts.tables}:
        raise RooflineError(f"{ts.engine} {ts.version} measured no all-reduce on {ts.gpu}", field="kernels")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "custom_allreduce_perf",
                      ("kernel_source", "num_gpus", "message_size", "latency"))
    keep = ~np.char.endswith(np.asarray(cols["kernel_source"]).astype(str), "_eager")
    gpus, n = cols["num_gpus"][keep], cols["message_size"][keep].astype(float)
    seconds = cols["latency"][keep].astype(float) * MS
    sites, smallest = {}, {}
    for (g,), i in group_rows(gpus).items():
        sites[g] = LogGrid.from_points((n[i],), n[i] / seconds[i])
        j = i[np.argmin(n[i])]
        smallest[g] = (float(n[j]), float(seconds[j]))
    return AllReduceTable(f"{ts.engine} {ts.version} custom_allreduce_perf ({ts.gpu}, CUDA graph)", sites, smallest)
