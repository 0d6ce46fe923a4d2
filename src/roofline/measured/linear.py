"""Kimi Delta Attention's and Mamba-2's conv from measured kernels: an engine's KDA conv and delta-rule
kernels (kda/<engine>/<version>/kda_perf.parquet: vLLM and SGLang) and Mamba-2's causal conv
(linear_attention/trtllm/<version>/mamba2_perf.parquet), prefill (context) and decode (generation), as
measured on one GPU.

What the tables' columns mean (aiconfigurator's collectors, collector/{vllm,sglang}/collect_kda.py and
collector/trtllm/collect_mamba2.py, github.com/ai-dynamo/aiconfigurator; the package's query,
aiconfigurator_core/sdk/operations/mamba.py KDAKernel and Mamba2Kernel, keys rows by the same columns):
``phase`` context (``batch_size`` sequences of ``seq_len`` new tokens each, from a zero state) or
generation (one token for each of ``batch_size`` sequences; the ``verify`` rows, several tokens a
sequence, are not read); ``latency`` milliseconds; activations bf16, the recurrent state fp32.

- kda_perf: ``num_k_heads`` = ``num_v_heads`` heads on one GPU of ``head_k_dim`` = ``head_v_dim``
  (Kimi K3's 96 heads of 128 over 1, 2, 4 and 8 GPUs: 96, 48, 24, 12), ``d_conv`` the conv width,
  ``d_model`` 7,168 (Kimi K3's; the kernels do not see it). ``kernel_source``: the conv,
  causal_conv1d_fn_qkv3 (three calls, q, k and v; vLLM 0.1.dev19262's rows are not read, UNREAD)
  and causal_conv1d_update; the rule, flashkda_fwd (vLLM), chunk_kda (SGLang) or chunk_kda_with_fused_gate
  (vLLM's Triton fallback) and fused_recurrent_kda_packed_decode. The one-kernel decodes that also run
  the gated norm (vLLM's fused_kda_decode, SGLang's kda_fused_decode) are not read: our layer's conv,
  rule and norm are three ops. Kimi K3's kernels compute the decay from the raw gate inside the rule
  (Kimi Linear's vLLM runs that gate apart; its activations are left out of our layer): the same
  recurrence over the same (heads x 128 x 128) fp32 state, so Kimi Linear's layers read these rows.
- mamba2_perf: ``nheads`` x ``head_dim``, ``n_groups``, ``d_state``, ``d_conv``, ``chunk_size`` and
  ``d_model`` of the model collected (Nemotron-H 56B, Nemotron 3 Nano, Super and Ultra, two generic
  shapes; full, unsharded widths); ``kernel_source`` causal_conv1d_fn or causal_conv1d_update, the
  depthwise conv over d_inner + 2 n_groups d_state channels: all the conv sees of the shape. The
  shipped tables hold no row of the scan (mamba_chunk_scan_combined, selective_state_update), which
  keeps the cost model.

Each point is read as its efficiency against its own roofline (op_counts.gdn_counts and
op_counts.conv1d_counts at bf16) and interpolated log-linearly over (seq_len, batch, width) within its
site (grid.LogGrid), the width being the heads (KDA) or the channels (Mamba-2's conv): like the batch,
they count independent states or channels of one kernel (the KDA generation rows take the same time
at the same heads x batch: 12 heads at batch 64 and 96 at batch 8 within 15% on the H100). A width
outside those measured, another head dim or conv width, and a decode step of several tokens a sequence
(a verify) are refused, never extrapolated: the op keeps the cost model and says why. Points measured
twice (two models of one channel count) take their geometric mean.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.op_counts import conv1d_counts, gdn_counts
from roofline.errors import RooflineError
from roofline.machines import Machine, get_machine
from roofline.measured.gemm import GemmEstimate
from roofline.measured.grid import LogGrid
from roofline.measured.tables import MS, group_rows, read_table, resolve
from roofline.state_mixers import GatedDeltaNet

DTYPE = "bf16"  # the collectors' activations (torch.bfloat16)
PARTS = ("conv", "rule")
KDA_COLUMNS = ("kernel_source", "phase", "batch_size", "seq_len", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads",
               "head_v_dim", "d_model", "latency")
MAMBA2_COLUMNS = ("kernel_source", "phase", "batch_size", "seq_len", "d_conv", "nheads", "head_dim", "n_groups",
                  "d_state", "d_model", "latency")
# kernel_source -> the op it times: (part, decode); rows of other kernels (and the verify rows) are not read
KDA_KERNELS = {"causal_conv1d_fn_qkv3": ("conv", False), "causal_conv1d_update": ("conv", True),
               "flashkda_fwd": ("rule", False), "chunk_kda": ("rule", False),
               "chunk_kda_with_fused_gate": ("rule", False), "fused_recurrent_kda_packed_decode": ("rule", True)}
MAMBA2_KERNELS = {"causal_conv1d_fn": ("conv", False), "causal_conv1d_update": ("conv", True)}
# Rows not read, by (engine, version, kernel_source), and why (said in the op's source). vLLM's Kimi K3 preview timed
# its prefill conv with a host-side metadata transfer in each of the three calls (collector/vllm/collect_kda.py passes
# no metadata): 0.41 to 1.02 ms at one token on every GPU it measured, where vLLM 0.27.0's rows (GB300) take 7 us at
# 1,024 tokens; vLLM's Kimi Linear layer passes its step's metadata (vllm/model_executor/layers/kda.py), no transfer.
UNREAD = {("vllm", "0.1.dev19262", "causal_conv1d_fn_qkv3"):
          "vLLM 0.1.dev19262's KDA prefill conv rows time a host-side metadata transfer in each call (0.41-1.02 ms at one "
          "token), which vLLM's Kimi Linear layer does not make: not read"}


def kda_roofline_s(machine: Machine, part: str, B, T, H, dk, dv, conv, decode: bool):
    """The bound of one KDA kernel (``part`` conv or rule) for B sequences of T tokens over H heads at
    bf16 (op_counts.gdn_counts of a KDA layer: its decay a key channel); B and T floats or arrays."""
    g = GatedDeltaNet(int(H), int(H), int(dk), int(dv), int(conv), gate_rank=int(dk))  # any rank: the kernels see none
    flops, moved, _ = gdn_counts(g, B, T, decode, 2.0)[PARTS.index(part)]
    return np.maximum(flops / machine.peak(DTYPE), moved / machine.bandwidth)


def conv_roofline_s(machine: Machine, B, T, C, conv, decode: bool):
    """The bound of a depthwise causal conv over C channels at bf16 (op_counts.conv1d_counts); arrays broadcast."""
    flops, moved, _ = conv1d_counts(C, conv, B, T, decode, 2.0)
    return np.maximum(flops / machine.peak(DTYPE), moved / machine.bandwidth)


@dataclass(frozen=True)
class LinearTable:
    """One engine's measured kernels of one family (``what``) on one GPU: per site (part, decode and the
    shape's fixed dims) a LogGrid over (seq_len, batch, width), ``width`` naming that axis (heads,
    channels); ``models`` the d_models each site's rows were collected at."""

    machine: Machine
    source: str
    what: str
    width: str
    sites: dict
    models: dict
    unread: dict  # {(part, decode): why its rows were not read}

    @staticmethod
    def label_of(key) -> str:
        """A site's key in words."""
        return " ".join(map(str, key))

    def _site(self, key, W, D, label) -> tuple[LogGrid, str]:
        """The grid of ``key`` if it measured widths around W, and the source saying what it read (the
        rows' d_model where the query's differs); refused by name otherwise."""
        grid = self.sites.get(key)
        if grid is None and key[:2] in self.unread:
            raise RooflineError(self.unread[key[:2]], field="model")
        if grid is None:
            have = sorted({self.label_of(k) for k in self.sites if k[:2] == key[:2]})
            raise RooflineError(f"no measured {self.what} {label} ({'decode' if key[1] else 'prefill'}); measured: "
                                f"{', '.join(have) or 'none'}", field="model")
        lo, hi = grid.axes[2][0], grid.axes[2][-1]
        if not lo <= W <= hi:
            raise RooflineError(f"{self.what} at {W:,.0f} {self.width}: the table measured {lo:,.0f} to {hi:,.0f} "
                                f"{self.width} ({label}); not extrapolated", field="model")
        models = self.models[key]
        said = "" if int(D) in models else (f" (rows of d_model {', '.join(f'{d:,}' for d in sorted(models))}; none at "
                                            f"{int(D):,}: the kernels do not see it)")
        return grid, self.source + said

    def _estimate(self, key, B, T, W, D, decode, bound_s, label) -> GemmEstimate:
        if decode and T != 1:
            raise RooflineError(f"a decode step of {T} tokens a sequence (a verify): the {self.what} generation rows "
                                "measured one", field="model")
        grid, source = self._site(key, W, D, label)
        eff, basis, points = grid.estimate((1.0 if decode else T, B, W))
        bound = float(bound_s(float(B), float(T)))
        return GemmEstimate(bound / eff, bound, basis, points, source)

    def _times(self, key, B, T, W, D, decode, bound_s, label) -> np.ndarray:
        grid, _ = self._site(key, W, D, label)
        B, T = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, T)))
        Tq = np.ones_like(T) if decode else T
        pts = np.stack([Tq.ravel(), B.ravel(), np.full(B.size, float(W))], axis=1)
        out = bound_s(B, T) / grid.estimate_many(pts)[0].reshape(B.shape)
        return np.where(T == 1, out, np.nan) if decode else out


class KdaTable(LinearTable):
    """Kimi Delta Attention's conv and rule: sites (part, decode, head_k_dim, head_v_dim, conv width)."""

    def _args(self, part, B, T, Hk, dk, Hv, dv, conv, decode, D):
        if Hk != Hv:
            raise RooflineError(f"KDA with {Hk} key and {Hv} value heads: the table measured equal ones", field="model")
        key = (part, bool(decode), int(dk), int(dv), int(conv))
        bound = functools.partial(kda_roofline_s, self.machine, part, H=Hk, dk=dk, dv=dv, conv=conv, decode=decode)
        return key, B, T, float(Hk), D, decode, bound, self.label_of(key)

    @staticmethod
    def label_of(key) -> str:
        return f"{key[0]}, heads of {key[2]}/{key[3]}, conv {key[4]}"

    def estimate(self, *shape) -> GemmEstimate:
        """One kernel's measured time at the shape of a KIMI_DELTA_ATTENTION op: (part, B, T, key heads,
        key head dim, value heads, value head dim, conv width, decode, d_model)."""
        return self._estimate(*self._args(*shape))

    def times(self, *shape) -> np.ndarray:
        """estimate's time for arrays of B and T (broadcast) in one numpy pass; NaN for a decode of T > 1."""
        return self._times(*self._args(*shape))


class Mamba2Table(LinearTable):
    """Mamba-2's depthwise conv: sites ("conv", decode, conv width)."""

    def _args(self, B, T, C, conv, decode, D):
        bound = functools.partial(conv_roofline_s, self.machine, C=C, conv=conv, decode=decode)
        key = ("conv", bool(decode), int(conv))
        return key, B, T, float(C), D, decode, bound, self.label_of(key)

    @staticmethod
    def label_of(key) -> str:
        return f"width {key[2]}"

    def estimate(self, *shape) -> GemmEstimate:
        """The conv's measured time at the shape of a MAMBA2_CONV op: (B, T, channels, conv width, decode, d_model)."""
        return self._estimate(*self._args(*shape))

    def times(self, *shape) -> np.ndarray:
        """estimate's time for arrays of B and T (broadcast) in one numpy pass; NaN for a decode of T > 1."""
        return self._times(*self._args(*shape))


def _sites(keys, T, B, W, eff, D) -> tuple[dict, dict]:
    """{site: LogGrid over (T, B, W)} and {site: d_models} of rows grouped by their site ``keys``
    (a tuple per row); a point measured twice takes the geometric mean of its efficiencies."""
    sites, models = {}, {}
    for key, i in group_rows(*zip(*keys)).items() if keys else ():
        points = group_rows(T[i], B[i], W[i])
        t, b, w = (np.array([p[j] for p in points], dtype=float) for j in range(3))
        e = np.array([np.exp(np.mean(np.log(eff[i][j]))) for j in points.values()])
        sites[key], models[key] = LogGrid.from_points((t, b, w), e), frozenset(int(d) for d in D[i])
    return sites, models


def _rows(cols, kernels: dict, ts) -> tuple[list, dict]:
    """The rows of the kernels read, (index, part, decode) where the row's phase is the kernel's, and
    {(part, decode): why} of those left out (UNREAD)."""
    src, phase = (np.asarray(cols[c]).astype(str) for c in ("kernel_source", "phase"))
    unread = {kernels[s]: UNREAD[(ts.engine, ts.version, s)] for s in set(src) & set(kernels)
              if (ts.engine, ts.version, s) in UNREAD}
    keep = [(i, *kernels[s]) for i, (s, p) in enumerate(zip(src, phase))
            if s in kernels and p == ("generation" if kernels[s][1] else "context") and kernels[s] not in unread]
    return keep, unread


@functools.cache
def kda_table(machine_key: str, kernels: str) -> KdaTable:
    """The measured KDA kernels of ``kernels`` (ENGINE[@VERSION]) on a preset, refused by name where none are."""
    machine = get_machine(machine_key)
    ts = resolve(machine_key, kernels, "kda")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "kda_perf", KDA_COLUMNS)
    keep, unread = _rows(cols, KDA_KERNELS, ts)
    idx = np.array([k[0] for k in keep], dtype=int)
    B, T, H = (cols[c][idx].astype(float) for c in ("batch_size", "seq_len", "num_k_heads"))
    dk, dv, conv = (cols[c][idx].astype(int) for c in ("head_k_dim", "head_v_dim", "d_conv"))
    lat = cols["latency"][idx].astype(float) * MS
    bound = np.empty(len(idx))
    for j, (part, dec) in enumerate((k[1], k[2]) for k in keep):
        bound[j] = kda_roofline_s(machine, part, B[j], T[j], H[j], dk[j], dv[j], conv[j], dec)
    keys = [(k[1], k[2], int(a), int(b), int(c)) for k, a, b, c in zip(keep, dk, dv, conv)]
    sites, models = _sites(keys, T, B, H, bound / lat, cols["d_model"][idx])
    return KdaTable(machine, f"{ts.engine} {ts.version} kda_perf ({ts.gpu})", "Kimi Delta Attention", "heads", sites, models,
                    unread)


@functools.cache
def mamba2_table(machine_key: str, kernels: str) -> Mamba2Table:
    """The measured Mamba-2 conv of ``kernels`` (ENGINE[@VERSION]) on a preset, refused by name where none is."""
    machine = get_machine(machine_key)
    ts = resolve(machine_key, kernels, "linear_attention")
    if "mamba2_perf" not in {name for name, _, _ in ts.tables}:
        raise RooflineError(f"no measured Mamba-2 conv (mamba2_perf) of {ts.engine} {ts.version} on {ts.gpu}",
                            field="kernels")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "mamba2_perf", MAMBA2_COLUMNS)
    keep, unread = _rows(cols, MAMBA2_KERNELS, ts)
    idx = np.array([k[0] for k in keep], dtype=int)
    B, T = cols["batch_size"][idx].astype(float), cols["seq_len"][idx].astype(float)
    C = (cols["nheads"][idx] * cols["head_dim"][idx] + 2 * cols["n_groups"][idx] * cols["d_state"][idx]).astype(float)
    conv = cols["d_conv"][idx].astype(int)
    dec = np.array([k[2] for k in keep], dtype=bool)
    bound = np.array([float(conv_roofline_s(machine, b, t, c, k, d)) for b, t, c, k, d in zip(B, T, C, conv, dec)])
    keys = [("conv", bool(d), int(k)) for d, k in zip(dec, conv)]
    sites, models = _sites(keys, T, B, C, bound / (cols["latency"][idx].astype(float) * MS), cols["d_model"][idx])
    return Mamba2Table(machine, f"{ts.engine} {ts.version} mamba2_perf ({ts.gpu})", "Mamba-2 conv", "channels", sites,
                       models, unread)
