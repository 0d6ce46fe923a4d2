"""Routed experts' time from measured kernels: an engine's fused MoE module (the experts' gate+up
GEMM, the activation and the down GEMM in one), as measured on one GPU.

The MoE table times the module for one model's expert shape (its dtype, hidden size, expert d_ff,
top-k and expert count: a site), at a tensor- and expert-parallel split and a routing distribution,
over token counts 1 to 16,384. A site is matched exactly, never borrowed from another model's: the
per-GPU expert d_ff (d_ff / (moe_tp x moe_ep), the rows of expert parallelism 1 where the table has
them, else of the least moe_ep: moe_table) must be ours. The rows read are the
"balanced" ones: M tokens' M k expert rows spread evenly, so min(E, M k) experts are touched (all of
them from M k = E on), where the rest of the tool expects random routing to touch E (1 - (1 - k/E)^M)
(blocks.expected_experts_touched): fewer at small batch. So each row is read as its efficiency
against the module's roofline at the balanced count (module_roofline_s), interpolated log-linearly
over tokens (grid.LogGrid); the module's time is that roofline with our touched experts over that
efficiency, each of our ops its share of the FLOPs (MeasuredKernels._expert_op_s): the module's
measured efficiency, not its balanced time. Latencies are in milliseconds. The activation is fused
into the module's GEMMs ("fused": no time of its own).

The table's dtype names the weights and the compute: bfloat16, fp8, fp8_block, nvfp4 (weights and
compute alike), w4a16_mxfp4 (MXFP4 weights, bf16 compute: gpt-oss on Hopper), w4a8_mxfp4_mxfp8
(MXFP4 weights, fp8 compute, Blackwell), int4_wo (INT4 weights, bf16 compute: vLLM's Marlin MoE for a
compressed-tensors W4A16 checkpoint, Kimi-K2.5's experts).

A table may time one site with two engine MoE backends (``kernel_source``): TensorRT-LLM's tables hold
its NVFP4 modules both as the CUTLASS backend's kernels (moe_torch_flow, moe_torch_flow_cutlass) and
as the TRTLLM backend's (trtllm-gen, labelled moe_torch_flow_min_latency by aiconfigurator's
collector, collector/trtllm/collect_moe.py), 3x apart at DeepSeek-V3's site (B200, 8-way tensor
parallel, 4 tokens: 87.5 us and 25.2 us). Each backend is a lane of its own (LANES), never merged
(a merged grid kept whichever row came first): the default lane is every other kernel's rows, the
engine's own default backend (TensorRT-LLM's moe_config.backend: CUTLASS, or AUTO resolving to it
for all but gpt-oss and DeepSeek-V4); MeasuredKernels.moe_backend asks for another where the tables
hold it, and a site without that lane reads the default one, said in the op's source.
"""

import functools
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError
from roofline.machines import get_machine
from roofline.measured.grid import BuiltOnRead, LogGrid
from roofline.measured.tables import MS, group_rows, read_table, resolve
from roofline.op_counts import expert_matmul_counts

DISTRIBUTION = "balanced"
# an engine's MoE backend (MeasuredKernels.moe_backend, lower case) -> the kernel_source of its rows, a lane apart
LANES = {"trtllm": "moe_torch_flow_min_latency"}
ALL_LANES = ("", *LANES.values())  # the default lane ("": every other kernel's rows) first
COLUMNS = ("moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size",
           "distribution", "kernel_source", "latency")
# the table's dtype -> (bytes per weight, bytes per activation, the peak the matmuls compute at): MXFP4 is 4-bit
# values with an 8-bit scale per 32 (4.25 bits), NVFP4 an 8-bit scale per 16 (4.5 bits); block fp8's scales are
# one fp32 per 128 x 128 (left out); INT4 weight-only, 4-bit values with a 16-bit scale per group of 32 (4.5 bits: the
# group size of the one checkpoint the tables' site serves, Kimi-K2.5's compressed-tensors config; vLLM's Marlin kernel)
DTYPE_WIDTHS = {"bfloat16": (2.0, 2.0, "bf16"), "fp8": (1.0, 1.0, "fp8"), "fp8_block": (1.0, 1.0, "fp8"),
                "nvfp4": (0.5625, 0.5625, "fp4"), "w4a16_mxfp4": (0.53125, 2.0, "bf16"),
                "w4a8_mxfp4_mxfp8": (0.53125, 1.0, "fp8"), "int4_wo": (0.5625, 2.0, "bf16")}


def module_roofline_s(machine, dtype: str, tokens, hidden, d_ff, top_k, experts, gated: bool = True, touched=None):
    """The fused module's bound for ``tokens`` tokens routed "balanced": its gate+up and down
    matmuls over M k rows (op_counts.expert_matmul_counts, the layer ops' rule), 2 M k D F (up + 1)
    FLOPs at the compute dtype's peak, or the weights of the min(E, M k) experts touched (or ``touched``) and the
    activations (in, gate+up out, down in, out) over the bandwidth; arrays of tokens allowed."""
    ww, wa, peak_dtype = DTYPE_WIDTHS[dtype]
    up = 2 if gated else 1
    rows = np.asarray(tokens, dtype=float) * top_k
    touched = np.minimum(float(experts), rows) if touched is None else touched
    up_flops, up_bytes = expert_matmul_counts(rows, hidden, d_ff, up, touched, wa, ww)
    down_flops, down_bytes = expert_matmul_counts(rows, d_ff, hidden, 1, touched, wa, ww)
    flops, moved = up_flops + down_flops, up_bytes + down_bytes
    return np.maximum(flops / machine.peak(peak_dtype), moved / machine.bandwidth)


def module_s(machine, dtype: str, tokens, hidden, d_ff, top_k, experts, gated: bool, eff, touched, eff_at):
    """The module's seconds at M ``tokens`` (arrays allowed) reading ``touched`` experts: its roofline with those
    experts over the table's efficiency ``eff`` at M (the table's balanced rows touch min(E, M k), and their
    efficiency is read against that roofline), while ``touched`` is at most min(E, M k) (uniform routing's mean
    always is); more (the busiest GPU under expert parallelism, at a small batch), the time the table measured at
    the t / k tokens whose balanced rows touch as many, t = ``touched`` (the module's roofline over ``eff_at``, the
    efficiency at a token count). A small batch's module is mostly its fixed cost: the busiest GPU's extra experts
    cost what the table says they cost (TensorRT-LLM's gpt-oss-120b module on an H200, 16 of 128 experts a GPU: 80.1
    us at 4 tokens, 99.3 us at 8; the busiest of 8 GPUs touches 3.9 experts at 4 tokens, the balanced rows 2), not
    their weights' share (2x)."""
    M = np.asarray(tokens, dtype=float)
    t = np.asarray(touched, dtype=float)
    out = module_roofline_s(machine, dtype, M, hidden, d_ff, top_k, experts, gated, touched=t) / eff
    over = t > np.minimum(float(experts), M * top_k) * (1.0 + 1e-9)
    if not np.any(over):
        return out
    more = np.where(over, t / top_k, M)
    return np.where(over, module_roofline_s(machine, dtype, more, hidden, d_ff, top_k, experts, gated) / eff_at(more), out)


# (compute dtype, experts' weight format) -> the table's moe_dtype
TABLE_DTYPE = {("bf16", "bf16"): "bfloat16", ("fp8", "fp8"): "fp8", ("fp8", "fp8_block"): "fp8_block", ("fp4", "fp4"): "nvfp4",
               ("bf16", "mxfp4"): "w4a16_mxfp4", ("fp8", "mxfp4"): "w4a8_mxfp4_mxfp8", ("bf16", "int4"): "int4_wo"}


@dataclass(frozen=True)
class MoETable:
    """One engine's measured MoE modules on one GPU: the module's efficiency against its roofline
    (module_roofline_s) as a LogGrid over tokens per (moe_dtype, hidden, per-GPU expert d_ff, top-k,
    experts), and the kernels each site's rows name."""

    source: str
    sites: dict
    kernels: dict

    def efficiency(self, compute: str, weights: str, tokens, hidden, d_ff, top_k, experts,
                   backend: str = "") -> tuple[float, str, int, str]:
        """(efficiency, basis, points, source) of the module at ``tokens`` tokens, from ``backend``'s lane (LANES)
        where the site has it, else the default lane's (said)."""
        key, said = self._lane(self._key(compute, weights, hidden, d_ff, top_k, experts), backend)
        eff, basis, points = self.sites[key].estimate((tokens,))
        return eff, basis, points, f"{self.source}; {self.kernels[key]}{said}"

    def efficiencies(self, compute: str, weights: str, tokens, hidden, d_ff, top_k, experts,
                     backend: str = "") -> np.ndarray:
        """efficiency for an array of token counts, in one numpy pass."""
        tokens = np.asarray(tokens, dtype=float)
        grid = self.sites[self._lane(self._key(compute, weights, hidden, d_ff, top_k, experts), backend)[0]]
        return grid.estimate_many(tokens.reshape(-1, 1))[0].reshape(tokens.shape)

    def _lane(self, key: tuple, backend: str) -> tuple[tuple, str]:
        """(the site's key in ``backend``'s lane, "") where the table times the site with that backend's kernels;
        else the default lane's key and why (a site only the other lane measured is read from it alike)."""
        lane = LANES.get(backend.lower(), "") if backend else ""
        if (lane, *key) in self.sites:
            return (lane, *key), ""
        for alt in ALL_LANES:
            if (alt, *key) in self.sites:
                what = f"the {backend} MoE backend" if backend else "the engine's default MoE backend"
                return (alt, *key), f" ({what}'s kernels not measured at this site: these)"
        raise KeyError(key)  # _key checked the site is measured in some lane

    def _key(self, compute: str, weights: str, hidden, d_ff, top_k, experts) -> tuple:
        dtype = TABLE_DTYPE.get((compute, weights))
        if dtype is None or not any(k[1] == dtype for k in self.sites):
            have = sorted({k[1] for k in self.sites})
            raise RooflineError(f"no measured MoE with {weights} experts computing in {compute}; measured: "
                                f"{', '.join(have)}", field="dtype")
        key = (dtype, int(hidden), int(d_ff), _count(top_k), _count(experts))
        if not any((lane, *key) in self.sites for lane in ALL_LANES):
            shapes = sorted({k[2:] for k in self.sites if k[1] == dtype})
            have = "; ".join(f"{h:,} x {f:,} top-{k:g} of {e:g}" for h, f, k, e in shapes[:8])
            raise RooflineError(f"no measured MoE of hidden {int(hidden):,}, expert d_ff {int(d_ff):,} per GPU, top-"
                                f"{float(top_k):g} of {float(experts):g} experts in {dtype}; measured in {dtype} (hidden x "
                                f"d_ff per GPU): {have or 'none'}{', ...' if len(shapes) > 8 else ''}", field="model")
        return key


def _count(x) -> int | float:
    """A site's top-k or expert count as a key: an int where whole, else the float (an expert-parallel GPU's share
    of the routing, top-k / moe_ep, may be a fraction: top-8 over 16 GPUs is half an expert a token)."""
    x = float(x)
    return int(x) if x.is_integer() else round(x, 9)


@functools.cache
def moe_table(machine_key: str, kernels: str) -> MoETable:
    ts = resolve(machine_key, kernels, "moe")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "moe_perf", COLUMNS)
    dist = np.asarray(cols["distribution"]).astype(str)
    # a GPU's share of the experts: d_ff / (moe_tp x moe_ep) of every expert (moe_ep split whole experts, E / moe_ep a
    # GPU, whose M k / moe_ep balanced rows and min(E, M k) / moe_ep touched experts are the same FLOPs and bytes as
    # every expert's d_ff / moe_ep: module_roofline_s at that d_ff). A split the table measured with moe_ep 1 is read
    # from those rows; else from its rows of the least moe_ep (TensorRT-LLM's gpt-oss MXFP4 module on an H200 was
    # measured at moe_tp 1 only, moe_ep 1 to 128: its tensor-parallel splits read the expert-parallel rows)
    split = cols["moe_tp_size"] * cols["moe_ep_size"]
    rows = (dist == DISTRIBUTION) & (cols["inter_size"] % split == 0)
    ep = cols["moe_ep_size"][rows]
    dtype = np.asarray(cols["moe_dtype"]).astype(str)[rows]
    per_gpu = (cols["inter_size"] // split)[rows]
    hidden, topk, experts = (cols[c][rows] for c in ("hidden_size", "topk", "num_experts"))
    tokens = cols["num_tokens"][rows].astype(float)
    seconds = cols["latency"][rows].astype(float) * MS
    source_names = np.asarray(cols["kernel_source"]).astype(str)[rows]
    machine = get_machine(machine_key)
    sites, kernels = BuiltOnRead(), BuiltOnRead()  # each site's grid and kernels' text built when a run reads it

    def names(i) -> list[str]:
        return sorted(set(source_names[i].tolist()))

    def grid(i, dt, *shape) -> LogGrid:
        gated = not any("nongated" in n for n in names(i))  # TensorRT-LLM names its non-gated MoE kernels so
        return LogGrid.from_points((tokens[i],), module_roofline_s(machine, dt, tokens[i], *shape, gated=gated) / seconds[i])

    def whole(i) -> str:  # a site of every expert's rows (or of the least moe_ep's: whole experts a GPU)
        return "kernel " + ", ".join(names(i)) + (f" (its moe_ep {ep[i[0]]} rows: experts whole, 1/{ep[i[0]]} of them "
                                                  "a GPU)" if ep[i[0]] > 1 else "")

    def split(i, k, e, g, t) -> str:  # an expert-parallel GPU's own site
        return ("kernel " + ", ".join(names(i)) + f" (its moe_ep {g}" + (f" x moe_tp {t}" if t > 1 else "")
                + f" rows: {e // g} of the {e} experts a GPU, top-{k} routing's {k / g:g} of them a token)")

    lane = np.where(np.isin(source_names, list(LANES.values())), source_names, "")
    for key, i in group_rows(lane, dtype, hidden, per_gpu, topk, experts).items():
        if key[1] not in DTYPE_WIDTHS:
            continue
        i = i[ep[i] == ep[i].min()]
        sites[key] = functools.partial(grid, i, *key[1:])
        kernels[key] = functools.partial(whole, i)
    # an expert-parallel GPU's own module (plan.step_layout: E / g experts of d_ff / moe_tp, k / g of each of the M
    # tokens every GPU holds): the rows of that split (moe_tp, moe_ep g) at num_tokens M are one GPU's time for its
    # experts' share of M tokens' routing (the collector's EP rank: 4.3x faster than moe_ep 1 at 16,384 tokens for
    # Qwen3 235B's fp8_block site on an H100, 4x the work); sites keyed by that local shape (top-k and experts over
    # moe_ep), the least moe_ep's rows where two splits give one local shape, a site above kept
    mtp, mep = cols["moe_tp_size"][rows], cols["moe_ep_size"][rows]
    local = (dist == DISTRIBUTION) & (cols["moe_ep_size"] > 1) & (cols["inter_size"] % cols["moe_tp_size"] == 0)
    local = local[rows]
    at = np.flatnonzero(local)  # the local rows' places among the rows read
    for key, i in sorted(group_rows(lane[local], dtype[local], hidden[local], (cols["inter_size"][rows] // mtp)[local],
                                    topk[local], experts[local], mep[local], mtp[local]).items(),
                         key=lambda kv: kv[0][6]):
        lane_, dt, h, f, k, e, g, t = key
        site = (lane_, dt, h, f, _count(k / g), _count(e / g))
        if dt not in DTYPE_WIDTHS or site in sites:
            continue
        i = at[i]
        sites[site] = functools.partial(grid, i, dt, h, f, k / g, e / g)
        kernels[site] = functools.partial(split, i, k, e, g, t)
    return MoETable(f"{ts.engine} {ts.version} moe_perf ({ts.gpu}, balanced routing)", sites, kernels)
