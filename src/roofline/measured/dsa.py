"""DeepSeek Sparse Attention's prompt step from measured modules: an engine's whole DSA attention
block, as measured on one GPU (sparse_attention/<engine>/<version>/dsa_context_module_perf.parquet).

What the table's rows mean (aiconfigurator's collectors and its DeepSeekV32 model,
sdk/models/deepseek_v32.py, github.com/ai-dynamo/aiconfigurator): one row times the attention module
of one layer between its two add-norms: the query, latent and indexer projections with their norms,
the lightning indexer's scores and top-k, the attention kernel the engine runs at that prompt length,
and the output projection; ``batch_size`` prompts of ``isl`` tokens each after ``step`` cached
(``step`` 0: whole prompts, the rows read here), ``num_heads`` attention heads on the GPU (SGLang's rows
hold 64/TP of GLM-5's at TP 1..8), by ``kv_cache_dtype`` and ``gemm_type`` (the projections' GEMMs:
bfloat16, fp8_block), ``architecture`` the model collected (its shape: SHAPES), ``kernel_source`` the
path the engine ran: SGLang's dense ragged MHA for prompts of at most the top-k (its rows stop at
2,048) and its sparse kernel past it (flashmla_sparse for a bf16 cache, TensorRT-LLM's kernel on
Blackwell or FlashMLA's paged kernel on Hopper for an fp8 one), the ``skip_indexer`` rows for layers
that reuse an earlier layer's top-k (GLM-5.2; not read: GLM-5's every layer indexes).
``latency`` milliseconds.

A module's time is read as measured: its tokens' throughput (prompts x isl / latency) is interpolated
log-linearly over (isl, prompts) within a site (grid.LogGrid; both paths' rows in one site, each at the
lengths the engine runs it). The rows were timed op by op from the host: the smallest ones (0.7-0.8 ms
whatever the shape, the host dispatching the module's kernels) are the site's floor H, and a module's
kernels' time is read as sqrt(T^2 - H^2) (kernels_s: the host's dispatch and the kernels overlap, the
longer one showing; StepCost counts the host's time per op apart, through the engine's time per op).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError
from roofline.measured.grid import LogGrid
from roofline.measured.tables import MS, group_rows, read_table, resolve

COLUMNS = ("kernel_source", "architecture", "kv_cache_dtype", "gemm_type", "num_heads", "batch_size", "isl", "step",
           "latency")
# the shapes the tables' architectures were collected for (their config.json: hidden_size, q_lora_rank, kv_lora_rank,
# qk_nope_head_dim, qk_rope_head_dim, v_head_dim, index_topk, index_n_heads, index_head_dim); a layer of another shape
# is not read from them
SHAPES = {
    "DeepseekV32ForCausalLM": (7168, 1536, 512, 128, 64, 128, 2048, 64, 128),  # deepseek-ai/DeepSeek-V3.2
    "GlmMoeDsaForCausalLM": (6144, 2048, 512, 192, 64, 256, 2048, 32, 128),  # zai-org/GLM-5
}
KV_DTYPE = {"bf16": "bfloat16", "fp8": "fp8"}  # our KV-cache dtype -> the table's


def shape_key(d_model: int, a) -> tuple:
    """A DSA layer's shape as SHAPES lists them (``a`` a LatentAttention)."""
    return (int(d_model), a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim,
            a.index_topk, a.index_heads, a.index_head_dim)


@dataclass(frozen=True)
class DsaModuleTable:
    """One engine's measured DSA prompt modules on one GPU: per site (architecture, gemm type, KV dtype,
    heads on the GPU) a LogGrid of tokens per second over (isl, prompts), and the site's floor (seconds)."""

    source: str
    sites: dict
    floors: dict
    ambiguous: dict  # site -> the kernel sources that timed its same shapes (vLLM's two sparse backends on Blackwell)

    def site(self, d_model: int, attention, gemm: str, kv_dtype: str) -> tuple:
        """The site of a DSA layer (``attention`` one GPU's LatentAttention) in ``gemm`` and ``kv_dtype``, refused
        by name where the table holds none."""
        arch = next((a for a, s in SHAPES.items() if s == shape_key(d_model, attention)), None)
        if arch is None:
            raise RooflineError("a DSA layer of a shape the module tables did not collect (DeepSeek-V3.2's and "
                                "GLM-5's)", field="model")
        key = (arch, gemm, KV_DTYPE.get(kv_dtype, kv_dtype), int(attention.heads))
        if key in self.ambiguous:
            raise RooflineError(f"the DSA module table times {' and '.join(self.ambiguous[key])} at the same shapes "
                                f"({arch}, {gemm} GEMMs, KV cache {kv_dtype}, {attention.heads} heads): which the engine "
                                "runs is not read here", field="kernels")
        if key not in self.sites:
            combos = sorted({(k[1], k[2]) for k in self.sites if k[0] == arch})
            heads = {gc: ", ".join(str(h) for h in sorted(k[3] for k in self.sites if k[:3] == (arch, *gc))) for gc in combos}
            have = "; ".join(f"{g} GEMMs with KV cache {c} ({heads[(g, c)]} heads)" for g, c in combos)
            hint = " (block-scaled fp8 checkpoints: --fp8-scaling block)" if gemm == "fp8" else ""
            raise RooflineError(f"no measured {arch} DSA module with {gemm} GEMMs, KV cache {kv_dtype} and "
                                f"{attention.heads} heads a GPU{hint}; measured: {have or 'none'}", field="model")
        return key

    def seconds(self, key: tuple, b, isl) -> float:
        """Seconds of the module for ``b`` prompts of ``isl`` tokens, as measured (its host's dispatch in it)."""
        rate, _, _ = self.sites[key].estimate((float(isl), float(b)))
        return float(b) * float(isl) / rate

    def longest(self, key: tuple) -> int:
        """The longest prompt the site measured: past it a module's time is its edge's throughput (extrapolated)."""
        return int(self.sites[key].axes[0][-1])

    def kernels_s(self, key: tuple, b, isl) -> float:
        """The module's kernels' seconds for ``b`` prompts of ``isl`` tokens: its measured time T with the host's
        dispatch H (the site's floor) taken out as from a soft maximum, sqrt(T^2 - H^2) (T = max(H, G) where
        either dominates; continuous between: a module at its floor gives 0, one far past it its own time)."""
        t, h = self.seconds(key, b, isl), self.floors[key]
        return float(np.sqrt(max(t * t - h * h, 0.0)))


@functools.cache
def dsa_module_table(machine_key: str, kernels: str) -> DsaModuleTable:
    """The measured DSA prompt modules of ``kernels`` (ENGINE[@VERSION]) on a preset, refused by name where none are."""
    ts = resolve(machine_key, kernels, "sparse_attention")
    if "dsa_context_module_perf" not in {name for name, _, _ in ts.tables}:
        raise RooflineError(f"no measured DSA module (dsa_context_module_perf) of {ts.engine} {ts.version} on {ts.gpu}",
                            field="kernels")
    cols = read_table(ts.gpu, ts.family, ts.engine, ts.version, "dsa_context_module_perf", COLUMNS)
    src = np.asarray(cols["kernel_source"]).astype(str)
    keep = (cols["step"].astype(float) == 0) & (np.char.find(src, "skip_indexer") < 0)
    isl, b = cols["isl"][keep].astype(float), cols["batch_size"][keep].astype(float)
    seconds = cols["latency"][keep].astype(float) * MS
    dims = [np.asarray(cols[c])[keep] for c in ("architecture", "gemm_type", "kv_cache_dtype", "num_heads")]
    src = src[keep]
    sites, floors, ambiguous = {}, {}, {}
    for (arch, gemm, kv, heads), i in group_rows(*dims).items():
        key = (str(arch), str(gemm), str(kv), int(heads))
        sites[key] = LogGrid.from_points((isl[i], b[i]), b[i] * isl[i] / seconds[i])
        floors[key] = float(seconds[i].min())
        # a shape timed by two kernel sources: the engine's choice between them is not in the table
        shape = np.unique(np.stack([isl[i], b[i]], axis=1), axis=0, return_inverse=True)[1].ravel()
        pairs = np.unique(np.stack([shape, np.unique(src[i], return_inverse=True)[1].ravel()], axis=1), axis=0)
        twice = np.flatnonzero(np.bincount(pairs[:, 0]) > 1)
        if len(twice):
            ambiguous[key] = sorted(set(src[i][np.isin(shape, twice)]))
    return DsaModuleTable(f"{ts.engine} {ts.version} dsa_context_module_perf ({ts.gpu})", sites, floors, ambiguous)
