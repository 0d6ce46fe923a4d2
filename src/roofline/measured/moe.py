"""Routed experts' time from measured kernels: an engine's fused MoE module (the experts' gate+up
GEMM, the activation and the down GEMM in one), as measured on one GPU.

The MoE table times the module for one model's expert shape (its dtype, hidden size, expert d_ff,
top-k and expert count: a site), at a tensor- and expert-parallel split and a routing distribution,
over token counts 1 to 16,384. A site is matched exactly, never borrowed from another model's: the
per-GPU expert d_ff (d_ff / moe_tp) must be ours with expert parallelism 1; routing is the
table's "balanced" distribution, the uniform routing the rest of the tool assumes. Between token
counts the throughput (tokens / latency) is interpolated log-linearly (grid.LogGrid), past the
largest count held (the module's time then grows with its tokens: "extrapolated"). Latencies are
in milliseconds. The module's time is shared among our three ops (gate+up, activation, down) in
proportion to their FLOPs, so that they sum to it.

The table's dtype names the weights and the compute: bfloat16, fp8, fp8_block, nvfp4 (weights and
compute alike), w4a16_mxfp4 (MXFP4 weights, bf16 compute: gpt-oss on Hopper), w4a8_mxfp4_mxfp8
(MXFP4 weights, fp8 compute, Blackwell).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError
from roofline.measured.gemm import GemmEstimate
from roofline.measured.grid import LogGrid
from roofline.measured.tables import MS, group_rows, read_table, resolve

DISTRIBUTION = "balanced"
COLUMNS = ("moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size",
           "distribution", "latency")
# (compute dtype, experts' weight format) -> the table's moe_dtype
TABLE_DTYPE = {("bf16", "bf16"): "bfloat16", ("fp8", "fp8"): "fp8", ("fp4", "fp4"): "nvfp4",
               ("bf16", "mxfp4"): "w4a16_mxfp4", ("fp8", "mxfp4"): "w4a8_mxfp4_mxfp8"}


@dataclass(frozen=True)
class MoETable:
    """One engine's measured MoE modules on one GPU: a LogGrid over tokens per (moe_dtype, hidden,
    per-GPU expert d_ff, top-k, experts), each with the table's inter_size and moe_tp."""

    source: str
    sites: dict

    def estimate(self, compute: str, weights: str, tokens, hidden, d_ff, top_k, experts) -> GemmEstimate:
        """The module's time for ``tokens`` tokens; its roofline_s is left 0 (the op's own is the
        caller's, each op's)."""
        rate, basis, points = self._site(compute, weights, hidden, d_ff, top_k, experts).estimate((tokens,))
        return GemmEstimate(float(tokens) / rate, 0.0, basis, points, self.source)

    def times(self, compute: str, weights: str, tokens, hidden, d_ff, top_k, experts) -> np.ndarray:
        """The module's time for an array of token counts, in one numpy pass."""
        tokens = np.asarray(tokens, dtype=float)
        grid = self._site(compute, weights, hidden, d_ff, top_k, experts)
        return tokens / grid.estimate_many(tokens.reshape(-1, 1))[0].reshape(tokens.shape)

    def _site(self, compute: str, weights: str, hidden, d_ff, top_k, experts) -> LogGrid:
        dtype = TABLE_DTYPE.get((compute, weights))
        if dtype is None:
            have = sorted({k[0] for k in self.sites})
            raise RooflineError(f"no measured MoE with {weights} experts computing in {compute}; measured: "
                                f"{', '.join(have)}", field="dtype")
        grid = self.sites.get((dtype, int(hidden), int(d_ff), int(top_k), int(experts)))
        if grid is None:
            shapes = sorted(k[1:] for k in self.sites if k[0] == dtype)
            have = "; ".join(f"{h:,} x {f:,} top-{k} of {e}" for h, f, k, e in shapes[:8])
            raise RooflineError(f"no measured MoE of hidden {int(hidden):,}, expert d_ff {int(d_ff):,} per GPU, top-{int(top_k)} "
                                f"of {int(experts)} experts in {dtype}; measured in {dtype} (hidden x d_ff per GPU): "
                                f"{have or 'none'}{', ...' if len(shapes) > 8 else ''}", field="model")
        return grid


@functools.cache
def moe_table(machine_key: str, kernels: str) -> MoETable:
    ts = resolve(machine_key, kernels, "moe")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "moe_perf", COLUMNS)
    dist = np.asarray(cols["distribution"]).astype(str)
    rows = (dist == DISTRIBUTION) & (cols["moe_ep_size"] == 1) & (cols["inter_size"] % cols["moe_tp_size"] == 0)
    dtype = np.asarray(cols["moe_dtype"]).astype(str)[rows]
    per_gpu = (cols["inter_size"] // cols["moe_tp_size"])[rows]
    hidden, topk, experts = (cols[c][rows] for c in ("hidden_size", "topk", "num_experts"))
    tokens = cols["num_tokens"][rows].astype(float)
    rate = tokens / (cols["latency"][rows].astype(float) * MS)
    sites = {key: LogGrid.from_points((tokens[i],), rate[i])
             for key, i in group_rows(dtype, hidden, per_gpu, topk, experts).items()}
    return MoETable(f"{ts.engine} {ts.version} moe_perf ({ts.gpu}, {DISTRIBUTION} routing)", sites)
