"""MLA's decode attention from measured kernels: an engine's absorbed multi-head latent attention
kernel (FlashMLA, TensorRT-LLM's MLA generation kernel), as measured on one GPU.

The generation MLA table times B sequences of one new token each reading S cached latents (its kv
tokens = isl + step), by KV-cache dtype, then heads per GPU, S and B, for DeepSeek-V3's latent shape
(kv_lora_rank 512, rope dims 64: the models the table was collected for; another shape is refused).
Latencies are in milliseconds. Each point is read as its efficiency against its roofline, the
kernel's own FLOPs and bytes (op_counts.latent_decode_cost) at the preset's peak and bandwidth, and a
query's efficiency is interpolated over (heads, length, batch) (grid.LogGrid). vLLM measured no MLA
kernel: its ops keep the cost model. A prefill's MLA (expanded, a different kernel) is not read here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError
from roofline.op_counts import FLOPS_PER_ELEMENT, latent_decode_cost
from roofline.machines import Machine, get_machine
from roofline.measured.gemm import GemmEstimate
from roofline.measured.grid import LogGrid
from roofline.measured.tables import MS, group_rows, read_table, resolve
from roofline.units import DTYPE_BYTES

TABLE_DTYPE = {"bf16": "bfloat16", "fp8": "fp8"}  # the KV cache's dtype, as the table names it
LATENT, ROPE = 512, 64  # DeepSeek-V3's kv_lora_rank and qk_rope_head_dim: the shape the tables measured
COLUMNS = ("mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step", "latency")


def mla_roofline_s(machine: Machine, kv_dtype: str, B, S, H, r: int = LATENT, rope: int = ROPE):
    """The absorbed MLA decode kernel's bound: its FLOPs at the bf16 peak (the tables' mla_dtype) or
    its bytes (the cache in ``kv_dtype``) over the bandwidth, as op_counts.latent_decode_cost counts them."""
    flops, nbytes, _ = latent_decode_cost(B, S, H, r, rope, DTYPE_BYTES[kv_dtype], FLOPS_PER_ELEMENT["softmax"])
    t = np.maximum(flops / machine.peak("bf16"), nbytes / machine.bandwidth)
    return float(t) if np.ndim(t) == 0 else t


@dataclass(frozen=True)
class MLATable:
    """One engine's measured MLA decode kernel on one GPU: a LogGrid over (heads, length, batch) per
    KV-cache dtype."""

    machine: Machine
    source: str
    sites: dict

    def _site(self, kv_dtype: str, r: int, rope: int) -> LogGrid:
        if (r, rope) != (LATENT, ROPE):
            raise RooflineError(f"no measured MLA with kv_lora_rank {r} and rope dims {rope}: the tables measured "
                                f"DeepSeek-V3's {LATENT} and {ROPE}", field="model")
        grid = self.sites.get(TABLE_DTYPE.get(kv_dtype, kv_dtype))
        if grid is None:
            raise RooflineError(f"no measured MLA over a {kv_dtype} KV cache; measured: {', '.join(sorted(self.sites))}",
                                field="dtype")
        return grid

    def estimate(self, kv_dtype: str, B, S, H, r: int, rope: int) -> GemmEstimate:
        eff, basis, points = self._site(kv_dtype, r, rope).estimate((H, S, B))
        bound = mla_roofline_s(self.machine, kv_dtype, float(B), float(S), float(H), r, rope)
        return GemmEstimate(bound / eff, bound, basis, points, self.source)

    def times(self, kv_dtype: str, B, S, H, r: int, rope: int) -> np.ndarray:
        """estimate's time for arrays of B and S (broadcast) in one numpy pass."""
        grid = self._site(kv_dtype, r, rope)
        B, S = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, S)))
        Hs = np.full(B.shape, float(H))
        eff = grid.estimate_many(np.stack([Hs.ravel(), S.ravel(), B.ravel()], axis=1))[0].reshape(B.shape)
        return mla_roofline_s(self.machine, kv_dtype, B, S, Hs, r, rope) / eff


@functools.cache
def mla_table(machine_key: str, kernels: str) -> MLATable:
    """The measured MLA generation kernel of ``kernels`` (ENGINE[@VERSION]) on a preset."""
    machine = get_machine(machine_key)
    ts = resolve(machine_key, kernels, "mla")
    if "generation_mla_perf" not in {name for name, _, _ in ts.tables}:
        raise RooflineError(f"{ts.engine} {ts.version} measured no MLA decode kernel on {ts.gpu}", field="kernels")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "generation_mla_perf", COLUMNS)
    keep = np.asarray(cols["mla_dtype"]).astype(str) == "bfloat16"
    kv = np.asarray(cols["kv_cache_dtype"]).astype(str)[keep]
    H, B = (cols[c][keep].astype(float) for c in ("num_heads", "batch_size"))
    S = (cols["isl"] + cols["step"])[keep].astype(float)
    lat = cols["latency"][keep].astype(float) * MS
    ours = {v: k for k, v in TABLE_DTYPE.items()}
    sites = {}
    for (dtype,), i in group_rows(kv).items():
        if dtype in ours:
            bound = mla_roofline_s(machine, ours[dtype], B[i], S[i], H[i])
            sites[dtype] = LogGrid.from_points((H[i], S[i], B[i]), bound / lat[i])
    return MLATable(machine, f"{ts.engine} {ts.version} generation_mla_perf ({ts.gpu})", sites)
