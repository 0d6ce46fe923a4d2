"""Attention token mixers (mixers.py re-exports them): Attention (full causal, sliding window W, chunked
local C; GQA, q/k norms, biases, sinks, a sigmoid output gate, MiniMax's block-sparse MSA) and
LatentAttention (DeepSeek's MLA, with DSA's indexer), each with its parameters, cache and per-token
cost, by the conventions in architecture.py's docstring.

Dimension letters: D d_model, H heads, K kv heads, d head dim, W window, C chunk.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from roofline.errors import RooflineError, check_counts, check_counts_or_zero


@dataclass(frozen=True)
class Attention:
    """Multi-head attention with ``kv_heads`` key/value heads (GQA; = heads for MHA).

    ``window`` W > 0: sliding window, each query sees the last W positions (itself included);
    ``chunk`` C > 0: chunked local attention, each query sees its own chunk of C positions so far
    (Llama 4). ``qk_norm``: "" none, "rmsnorm" (a d-wide scale on q and on k: Qwen3, Gemma 3),
    "rmsnorm_full" (one norm over all heads' q and one over all k, scales H d and K d wide: MiniMax-M2's
    qk_norm_type per_layer), "l2" (no weights: Llama 4). ``sinks``: one learned logit per head (gpt-oss).
    ``output_gate``: q_proj is twice as wide (D, 2 H d), its second half a gate g applied to the
    attention output before o_proj, out * sigmoid(g) (Qwen3-Next and Qwen3.5's gated attention).

    ``index_topk`` k > 0: MiniMax Sparse Attention (MSA, MiniMax-M3): each query attends to at most
    k keys, the top k / ``index_block`` blocks of ``index_block`` keys (sparse_topk_blocks x
    sparse_block_size) that a block indexer picks: index_q_proj (D -> H_I d_I) and index_k_proj (D ->
    d_I, one key head), a Gemma RMSNorm of d_I on each (the rotary too, no weights). The indexer
    scores every cached key, so its keys (d_I a token) are cached beside K and V; the whole cache is
    kept (``span`` stays 0), only the attention reads k keys of it (min(p, k) counted: the query's
    own block, forced into the top-k, holds only the keys up to it, so this is at most one block over)."""

    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int = 0  # 0: head_dim
    window: int = 0
    chunk: int = 0
    qkv_bias: bool = False
    out_bias: bool = False
    qk_norm: str = ""
    sinks: bool = False
    output_gate: bool = False
    k_eq_v: bool = False
    index_topk: int = 0
    index_heads: int = 0
    index_head_dim: int = 0
    index_block: int = 0

    def __post_init__(self):
        check_counts("attention", heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim)
        check_counts_or_zero("attention", v_head_dim=self.v_head_dim, window=self.window, chunk=self.chunk,
                             index_topk=self.index_topk, index_heads=self.index_heads,
                             index_head_dim=self.index_head_dim, index_block=self.index_block)
        if bool(self.index_topk) != bool(self.index_heads) or bool(self.index_heads) != bool(self.index_head_dim) \
                or bool(self.index_head_dim) != bool(self.index_block):
            raise RooflineError("attention: a block indexer needs index_topk, index_heads, index_head_dim and index_block")
        if self.index_topk and (self.index_topk % self.index_block or self.window or self.chunk):
            raise RooflineError(f"attention: index_topk {self.index_topk} must be whole blocks of {self.index_block}, "
                                "on a layer with no window or chunk")
        if self.heads % self.kv_heads:
            raise RooflineError(f"attention: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.window and self.chunk:
            raise RooflineError("attention: a layer is sliding-window or chunked, not both")
        if self.qk_norm not in ("", "rmsnorm", "rmsnorm_full", "l2"):
            raise RooflineError(f"attention: qk_norm must be '', 'rmsnorm', 'rmsnorm_full' or 'l2', got {self.qk_norm!r}")
        if not self.v_head_dim:
            object.__setattr__(self, "v_head_dim", self.head_dim)
        if self.output_gate and self.v_head_dim != self.head_dim:
            raise RooflineError(f"attention: an output gate multiplies the output (H x v_head_dim {self.v_head_dim}) by "
                                f"q_proj's gate half (H x head_dim {self.head_dim}); they must be equal")
        if self.k_eq_v and self.v_head_dim != self.head_dim:
            raise RooflineError("attention: values taken from the keys (k_eq_v) need v_head_dim = head_dim")

    @property
    def kind(self) -> str:
        if self.index_topk:
            return (f"sparse attention (MSA top-{self.index_topk // self.index_block} blocks of {self.index_block}, "
                    f"indexer {self.index_heads}x{self.index_head_dim})")
        if self.window:
            return f"sliding {self.window}"
        if self.chunk:
            return f"chunked {self.chunk}"
        return "full attention (values = keys)" if self.k_eq_v else "full attention"

    @property
    def span(self) -> int:
        """The most keys a query sees (0: unlimited)."""
        return self.window or self.chunk

    def attended(self, context):
        """Keys one query's attention reads of ``context`` cached: all (min(S, W) windowed), or min(S, k)
        under MSA."""
        k = self.index_topk or self.span
        if not k:
            return context
        return min(context, k) if type(context) in (int, float) else np.minimum(context, k)

    @functools.cached_property
    def qkv_width(self) -> int:
        """Output width of the q, k and v projections: H d (2 H d with an output gate: q_proj carries
        the gate too) + K d + K d_v (no K d_v when k_eq_v)."""
        q = self.heads * self.head_dim * (2 if self.output_gate else 1)
        return q + self.kv_heads * (self.head_dim + (0 if self.k_eq_v else self.v_head_dim))

    def params(self, d_model: int) -> int:
        D, H, K, d, dv = d_model, self.heads, self.kv_heads, self.head_dim, self.v_head_dim
        n = D * self.qkv_width + H * dv * D  # Wq, Wk, Wv (none when k_eq_v), Wo
        if self.qkv_bias:
            n += self.qkv_width
        if self.out_bias:
            n += D
        if self.qk_norm == "rmsnorm":
            n += 2 * d
        elif self.qk_norm == "rmsnorm_full":
            n += H * d + K * d
        if self.sinks:
            n += H
        return n + self.indexer_params(d_model)

    def indexer_params(self, d_model: int) -> int:
        """MSA's block indexer: index_q_proj (D, H_I d_I), index_k_proj (D, d_I), their norms' scales
        (2 d_I); 0 without one."""
        HI, dI = self.index_heads, self.index_head_dim
        return d_model * (HI * dI + dI) + 2 * dI

    def cache_elems_per_token(self) -> int:
        """K and V of one cached token: K (d + d_v) elements; and MSA's index key (d_I), at the
        cache's width."""
        return self.kv_heads * (self.head_dim + self.v_head_dim) + self.index_head_dim


@dataclass(frozen=True)
class LatentAttention:
    """Multi-head latent attention (DeepSeek-V2/V3, arXiv:2405.04434 section 2.1). Queries: a
    low-rank path D -> q_lora_rank -> H (nope + rope) with a norm between (or a plain D -> H
    (nope + rope) projection when q_lora_rank is 0). Keys and values: D -> kv_lora_rank + rope (the
    latent and a shared rotary key, the cached part), a norm, then kv_lora_rank -> H (nope + v).

    ``index_topk`` k > 0: DeepSeek Sparse Attention (DSA; DeepSeek-V3.2-Exp report, GLM-5): each
    query attends to at most k latent tokens, chosen by a lightning indexer of ``index_heads`` heads
    of ``index_head_dim`` d_I: wq_b (q_lora_rank -> H_I d_I) from the query latent, wk (D -> d_I)
    with a LayerNorm (weight and bias) on k, weights_proj (D -> H_I). The indexer scores every
    cached token, so its keys (d_I a token) are cached beside the latent. ``index_heads`` 0 with a
    k: the layer reuses an earlier layer's top-k (GLM-5.2's "shared" layers), no indexer of its
    own. The whole cache is kept (``span`` stays 0); only the attention reads k tokens of it."""

    heads: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0
    index_topk: int = 0
    index_heads: int = 0
    index_head_dim: int = 0

    def __post_init__(self):
        check_counts("latent attention", heads=self.heads, kv_lora_rank=self.kv_lora_rank,
                  qk_nope_head_dim=self.qk_nope_head_dim, qk_rope_head_dim=self.qk_rope_head_dim,
                  v_head_dim=self.v_head_dim)
        check_counts_or_zero("latent attention", q_lora_rank=self.q_lora_rank, index_topk=self.index_topk,
                             index_heads=self.index_heads, index_head_dim=self.index_head_dim)
        if (self.index_heads or self.index_head_dim) and not self.index_topk:
            raise RooflineError("latent attention: an indexer (index_heads, index_head_dim) needs index_topk")
        if bool(self.index_heads) != bool(self.index_head_dim):
            raise RooflineError("latent attention: the indexer needs both index_heads and index_head_dim")
        if self.index_heads and not self.q_lora_rank:
            raise RooflineError("latent attention: the DSA indexer reads the query latent; q_lora_rank is 0")

    span = 0

    @property
    def kind(self) -> str:
        if not self.index_topk:
            return "latent attention (MLA)"
        own = f"indexer {self.index_heads}x{self.index_head_dim}" if self.index_heads else "shared top-k"
        return f"sparse latent attention (MLA + DSA top-{self.index_topk}, {own})"

    def attended(self, context):
        """Keys one query's attention reads of ``context`` cached: all of them, or min(S, k) under DSA."""
        if not self.index_topk:
            return context
        return min(context, self.index_topk) if type(context) in (int, float) else np.minimum(context, self.index_topk)

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def params(self, d_model: int) -> int:
        D, H, r = d_model, self.heads, self.kv_lora_rank
        if self.q_lora_rank:
            q = D * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * H * self.qk_head_dim
        else:
            q = D * H * self.qk_head_dim
        kv = D * (r + self.qk_rope_head_dim) + r + r * H * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + H * self.v_head_dim * D + self.indexer_params(d_model)

    def indexer_params(self, d_model: int) -> int:
        """The DSA indexer: wq_b (q_lora_rank, H_I d_I), wk (D, d_I), k_norm's weight and bias (2 d_I),
        weights_proj (D, H_I); 0 without one."""
        HI, dI = self.index_heads, self.index_head_dim
        return self.q_lora_rank * HI * dI + d_model * dI + 2 * dI + d_model * HI

    def cache_elems_per_token(self) -> int:
        """The latent and the shared rotary key: kv_lora_rank + qk_rope_head_dim; and the indexer's
        key (index_head_dim) where the layer has one, at the cache's width (DeepSeek's kernels keep
        it FP8 with an fp32 scale per 128: 132 bytes for 128, which an FP8 cache prices as 128)."""
        return self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim
