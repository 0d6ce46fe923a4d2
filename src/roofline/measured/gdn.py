"""Gated DeltaNet's time from measured kernels: an engine's GDN conv and delta-rule kernels, prefill
(context) and decode (generation), as measured on one GPU (linear_attention/<engine>/<version>/
gdn_perf.parquet).

What the table's columns mean (aiconfigurator's collectors, collector/{trtllm,vllm,sglang}/
collect_gdn.py, github.com/ai-dynamo/aiconfigurator): ``phase`` context (B sequences of ``seq_len``
new tokens each, no initial state, ``num_tokens`` = B x seq_len) or generation (one token for each of
``batch_size`` sequences, seq_len 1); ``num_k_heads``, ``head_k_dim``, ``num_v_heads``, ``head_v_dim``
the heads on one GPU (vLLM's and SGLang's rows hold 64/TP value heads of Qwen3.5-397B for TP 1..32),
``d_conv`` the conv width, ``d_model`` and ``model_name`` the model collected (not the kernels' shape, but
the package keys its rows by d_model, and two models of the same heads differ by up to 10%: a query reads
the rows of its own d_model where the table holds them, else those of the nearest d_model, said in its
source); ``kernel_source`` the
kernel timed: causal_conv1d_fn / causal_conv1d_update (the conv, prefill / decode) and
chunk_gated_delta_rule[_flashinfer] / fused_recurrent_gated_delta_rule[_packed_decode] (the rule);
activations bf16, the state fp32 (the collectors' dtypes: read whatever the layer's dtype, as the
engines run these kernels in bf16 under fp8 or fp4 weights); ``latency`` milliseconds. Each point is read
as its efficiency against its own roofline (op_counts.gdn_counts at bf16: the op's FLOPs and bytes) and
interpolated over (seq_len, batch) within its site (grid.LogGrid); a site the table lacks (other heads
or widths) is refused, never borrowed. The prefill rows start from a zero state: a chunk of a longer
prompt (a cached prefix's state) is read as one of its own length.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.op_counts import gdn_counts
from roofline.errors import RooflineError
from roofline.machines import Machine, get_machine
from roofline.measured.gemm import GemmEstimate
from roofline.measured.grid import LogGrid
from roofline.measured.tables import MS, group_rows, read_table, resolve
from roofline.state_mixers import GatedDeltaNet

COLUMNS = ("kernel_source", "phase", "batch_size", "seq_len", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads",
           "head_v_dim", "d_model", "latency")
DTYPE = "bf16"  # the collectors' activations (torch.bfloat16)
PARTS = ("conv", "rule")


def gdn_roofline_s(machine: Machine, part: str, B, T, Hk, dk, Hv, dv, conv, decode: bool):
    """The bound of one GDN kernel (``part`` conv or rule) for B sequences of T tokens at bf16: its
    FLOPs at the bf16 peak or its bytes at the bandwidth (op_counts.gdn_counts); B and T floats or arrays."""
    counts = gdn_counts(GatedDeltaNet(int(Hk), int(Hv), int(dk), int(dv), int(conv)), B, T, decode, 2.0)
    flops, moved, _ = counts[PARTS.index(part)]
    return np.maximum(flops / machine.peak(DTYPE), moved / machine.bandwidth)


@dataclass(frozen=True)
class GdnTable:
    """One engine's measured GDN kernels on one GPU: a LogGrid over (seq_len, batch) per site
    (part, decode, key heads, key head dim, value heads, value head dim, conv width, d_model)."""

    machine: Machine
    source: str
    sites: dict

    def _site(self, part, decode, Hk, dk, Hv, dv, conv, D) -> tuple[LogGrid, str]:
        """The grid of these heads at d_model ``D``, else at the nearest d_model measured, and the
        source saying which."""
        key = (part, bool(decode), int(Hk), int(dk), int(Hv), int(dv), int(conv))
        models = [k[-1] for k in self.sites if k[:-1] == key]
        if not models:
            have = sorted({f"{k[2]}/{k[4]} heads of {k[3]}/{k[5]}" for k in self.sites if k[:2] == key[:2]})
            raise RooflineError(f"no measured Gated DeltaNet {part} with {Hk} key / {Hv} value heads of {dk}/{dv}, conv "
                                f"{conv} ({'decode' if decode else 'prefill'}); measured: {', '.join(have) or 'none'}",
                                field="model")
        near = min(models, key=lambda d: (abs(np.log(d / float(D))), d))
        said = "" if near == int(D) else (f" (rows of d_model {near:,}; none at {int(D):,}: the kernels' time does not "
                                          "depend on it)")
        return self.sites[(*key, near)], self.source + said

    def estimate(self, part, B, T, Hk, dk, Hv, dv, conv, decode, D) -> GemmEstimate:
        """One kernel's measured time at B sequences of T tokens (decode: T = 1) in a model of width D;
        a decode step of T > 1 tokens a sequence (a speculative verify) is refused: the generation rows
        time one."""
        if decode and T != 1:
            raise RooflineError(f"a decode step of {T} tokens a sequence (a verify): the GDN generation rows measured one",
                                field="model")
        grid, source = self._site(part, decode, Hk, dk, Hv, dv, conv, D)
        eff, basis, points = grid.estimate((1.0 if decode else T, B))
        bound = float(gdn_roofline_s(self.machine, part, float(B), float(T), Hk, dk, Hv, dv, conv, decode))
        return GemmEstimate(bound / eff, bound, basis, points, source)

    def times(self, part, B, T, Hk, dk, Hv, dv, conv, decode, D) -> np.ndarray:
        """estimate's time for arrays of B and T (broadcast) in one numpy pass; NaN for a decode of T > 1."""
        grid, _ = self._site(part, decode, Hk, dk, Hv, dv, conv, D)
        B, T = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, T)))
        Tq = np.ones_like(T) if decode else T
        eff = grid.estimate_many(np.stack([Tq.ravel(), B.ravel()], axis=1))[0].reshape(B.shape)
        out = gdn_roofline_s(self.machine, part, B, T, Hk, dk, Hv, dv, conv, decode) / eff
        return np.where(T == 1, out, np.nan) if decode else out


@functools.cache
def gdn_table(machine_key: str, kernels: str) -> GdnTable:
    """The measured GDN kernels of ``kernels`` (ENGINE[@VERSION]) on a preset, refused by name where none are."""
    machine = get_machine(machine_key)
    ts = resolve(machine_key, kernels, "linear_attention")
    if "gdn_perf" not in {name for name, _, _ in ts.tables}:
        raise RooflineError(f"no measured Gated DeltaNet (gdn_perf) of {ts.engine} {ts.version} on {ts.gpu}", field="kernels")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "gdn_perf", COLUMNS)
    part = np.where(np.char.find(np.asarray(cols["kernel_source"]).astype(str), "conv1d") >= 0, "conv", "rule")
    decode = np.asarray(cols["phase"]).astype(str) == "generation"
    B, T = cols["batch_size"].astype(float), cols["seq_len"].astype(float)
    lat = cols["latency"].astype(float) * MS
    dims = [cols[c] for c in ("num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "d_conv", "d_model")]
    sites = {}
    for key, i in group_rows(part, decode.astype(int), *dims).items():
        p, dec, *shape, D = key
        bound = gdn_roofline_s(machine, p, B[i], T[i], *shape, bool(dec))
        sites[(p, bool(dec), *shape, D)] = LogGrid.from_points((T[i], B[i]), bound / lat[i])
    return GdnTable(machine, f"{ts.engine} {ts.version} gdn_perf ({ts.gpu})", sites)
