"""Attention's time from measured kernels: an engine's fused attention kernels, prefill (context)
and decode (generation), as measured on one GPU.

The context table times B sequences of T new tokens attending causally to themselves (no cached
prefix), by (attention dtype, KV-cache dtype, KV heads, head dim, window), then heads, T and B. The
generation table times one new token for each of B sequences reading S cached tokens (its kv tokens
= isl + step), by (KV-cache dtype, KV heads, head dim, window), then heads, S and B. Latencies are in
milliseconds. Each point is read as its efficiency against its roofline: max(4 B H P d / peak,
w (2 B H T d + 2 B K S' d) / bandwidth) with P the attended (query, key) pairs per head and
sequence (attention_pairs.attended_pairs: causal, within the window) and S' the keys read; the
query's efficiency is interpolated over (heads, length, batch) within its site (grid.LogGrid).
A site the table lacks (another KV-head count, head dim or window) is refused, never borrowed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.attention_pairs import attended_pairs
from roofline.errors import RooflineError
from roofline.machines import Machine, get_machine
from roofline.measured.gemm import GemmEstimate
from roofline.measured.grid import BuiltOnRead, LogGrid
from roofline.measured.profile import is_profile
from roofline.measured.tables import MS, group_rows, read_table, resolve
from roofline.op_counts import fused_attention_counts
from roofline.units import DTYPE_BYTES

TABLE_DTYPE = {"bf16": "bfloat16", "fp8": "fp8"}
COLUMNS = ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "window_size", "attn_dtype",
           "kv_cache_dtype", "step", "latency")


def attention_roofline_s(machine: Machine, dtype: str, B, T, S, H, K, d, window: int, decode: bool):
    """The fused attention's bound for B sequences of T queries over S keys (decode: T = 1): plain
    floats in, a float out (a lookup's microseconds), or arrays in, an array out (a table's points).
    The counts are op_counts.fused_attention_counts' (the softmax not counted): B H P score elements,
    Q and O of B H T d elements, K and V of B K S' d."""
    pairs = attended_pairs(T, S, int(window), causal=not decode)
    keys = (np.minimum(S, window) if np.ndim(S) else min(S, window)) if window else S
    q, kv = B * H * T * d, B * K * keys * d
    flops, moved = fused_attention_counts(B * H * pairs, q, kv, kv, q, d, d, DTYPE_BYTES[dtype], 0.0)
    peak, bw = machine.peak(dtype), machine.bandwidth
    return np.maximum(flops / peak, moved / bw) if np.ndim(flops) else max(flops / peak, moved / bw)


@dataclass(frozen=True)
class AttentionTable:
    """One engine's measured attention of one phase on one GPU: a LogGrid over (heads, length,
    batch) per site."""

    machine: Machine
    decode: bool
    source: str
    sites: dict

    def estimate(self, dtype: str, kv_dtype: str, B, T, S, H, K, d, window: int) -> GemmEstimate:
        """The fused attention computing in ``dtype`` over a ``kv_dtype`` cache (decode: the cache's
        dtype alone keys the table)."""
        if not self.decode and T != S:
            raise RooflineError("a prefill over a cached prefix: the context table measured T = S only", field="context")
        grid = self._site(dtype, kv_dtype, K, d, window)
        eff, basis, points = grid.estimate((H, S, B))
        bound = attention_roofline_s(self.machine, self._bound_dtype(dtype, kv_dtype),
                                     *(float(x) for x in (B, T, S, H, K, d)), window, self.decode)
        return GemmEstimate(bound / eff, bound, basis, points, self.source)

    def _bound_dtype(self, dtype: str, kv_dtype: str) -> str:
        """The dtype of the roofline a query's efficiency is applied to: the one its site's points were read against
        (attention_table: decode's the cache's, prefill's the attention's), or an fp8 cache's efficiency, read
        against a roofline of 1-byte keys, would be applied to one of 2-byte keys and the time come out doubled."""
        return kv_dtype if self.decode else dtype

    def times(self, dtype: str, kv_dtype: str, B, T, S, H, K, d, window: int) -> np.ndarray:
        """estimate's time for arrays of B, T and S (broadcast) in one numpy pass; NaN for a prefill
        over a cached prefix (T < S), which the context table did not measure."""
        grid = self._site(dtype, kv_dtype, K, d, window)
        B, T, S = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, T, S)))
        Hs = np.full(B.shape, float(H))
        eff = grid.estimate_many(np.stack([Hs.ravel(), S.ravel(), B.ravel()], axis=1))[0].reshape(B.shape)
        bound = attention_roofline_s(self.machine, self._bound_dtype(dtype, kv_dtype), B, T, S, Hs, float(K), float(d),
                                     window, self.decode)
        out = bound / eff
        return out if self.decode else np.where(T == S, out, np.nan)

    def _measured(self, key: tuple) -> str:
        """What the table holds nearest a site it lacks, in words: the KV-head counts at its head dim
        and window, else the windows at its head dim, else the head dims, else the dtypes."""
        same = [k[-3:] for k in self.sites if k[:-3] == key[:-3]]  # (KV heads, head dim, window) in these dtypes
        K, d, window = key[-3:]
        if not same:
            return "measured dtypes (attention, cache): " + ", ".join(sorted({"/".join(k[:-3]) for k in self.sites}))
        heads = sorted({k for k, dd, w in same if dd == d and w == window})
        if heads:
            return f"measured at head dim {d}, window {window}: {', '.join(map(str, heads))} KV heads"
        windows = sorted({w for k, dd, w in same if dd == d})
        if windows:
            return f"measured windows at head dim {d}: {', '.join(map(str, windows))}"
        return f"measured head dims: {', '.join(map(str, sorted({dd for _, dd, _ in same})))}"

    def _site(self, dtype: str, kv_dtype: str, K, d, window: int) -> LogGrid:
        if dtype not in TABLE_DTYPE or kv_dtype not in TABLE_DTYPE:
            bad = dtype if dtype not in TABLE_DTYPE else f"{kv_dtype} KV-cache"
            raise RooflineError(f"no measured {bad} attention", field="dtype")
        key = ((TABLE_DTYPE[dtype],) if not self.decode else ()) + (TABLE_DTYPE[kv_dtype], int(K), int(d), int(window))
        grid = self.sites.get(key)
        if grid is None:
            raise RooflineError(f"no measured {'decode' if self.decode else 'prefill'} attention with {K} KV heads of "
                                f"{d} and window {window} in {dtype}" + (f" over a {kv_dtype} cache" if kv_dtype != dtype
                                                                         else "") + "; " + self._measured(key),
                                field="model")
        return grid


@functools.cache
def attention_table(machine_key: str, kernels: str, decode: bool) -> AttentionTable:
    """The measured context (``decode`` False) or generation attention of ``kernels`` on a preset
    (or a calibration profile's probes, measured.profile)."""
    if is_profile(kernels):  # a user's calibration: the same table from its probes
        from roofline.measured import profile

        machine, points, source = profile.attention_points(machine_key, kernels, decode, TABLE_DTYPE)
        sites = {}
        for key, rows in points.items():
            T, S, H, d = (np.asarray([r[i] for r in rows]) for i in range(4))
            bound = attention_roofline_s(machine, rows[0][4], 1.0, T, S, H, H, d, 0, decode)
            sites[key] = LogGrid.from_points((H, S, np.ones_like(S)), bound / np.asarray([r[5] for r in rows]))
        return AttentionTable(machine, decode, source, sites)
    machine = get_machine(machine_key)
    ts = resolve(machine_key, kernels, "attention")
    name = "generation_attention_perf" if decode else "context_attention_perf"
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, name, COLUMNS, (("window_size", 0),))
    B, H, K, d, win = (cols[c].astype(float) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim",
                                                        "window_size"))
    T = np.ones_like(B) if decode else cols["isl"].astype(float)
    S = cols["isl"].astype(float) + cols["step"].astype(float) if decode else T
    lat = cols["latency"].astype(float) * MS
    attn, kv = np.asarray(cols["attn_dtype"]).astype(str), np.asarray(cols["kv_cache_dtype"]).astype(str)
    ours = {v: k for k, v in TABLE_DTYPE.items()}
    site_columns = ((kv,) if decode else (attn, kv)) + (K, d, win)
    def grid(i, dtype, window):
        bound = attention_roofline_s(machine, dtype, B[i], T[i], S[i], H[i], K[i], d[i], window, decode)
        return LogGrid.from_points((H[i], S[i], B[i]), bound / lat[i])

    sites = BuiltOnRead()  # each site's grid built when a run first reads it
    for key, i in group_rows(*site_columns).items():
        dtype = ours.get(key[0])
        if dtype is None:
            continue
        sites[key] = functools.partial(grid, i, dtype, key[-1])
    return AttentionTable(machine, decode, f"{ts.engine} {ts.version} {name} ({ts.gpu})", sites)
