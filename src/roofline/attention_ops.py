"""The attention family's kernels for blocks.layer_kernels: standard attention (naive or flash, windows,
chunks, q/k norms, an output gate), MiniMax's block-sparse MSA with its block indexer, and multi-head
latent attention (prefill expanded, decode absorbed) with DeepSeek's sparse DSA indexer; blocks.py's
module docstring says how each is costed. Sizes are trusted (validated once, at the edge).

Letters: B batch, T new tokens per sequence, S context, H query heads, K kv heads, d head dim.
"""

from __future__ import annotations

import numpy as np

from roofline.attention_pairs import attended_pairs
from roofline.kernels import FLOPS_PER_ELEMENT, FUSED_ATTENTION, FUSED_MLA, Kernel, latent_attention_cost
from roofline.op_counts import (batched_matmul_counts, fused_attention_counts, matmul_counts, pv_counts, row_op_counts,
                                scores_counts)
from roofline.mixers import Attention, LatentAttention
from roofline.op_builder import SOFTMAX, OpBuilder


def _keys_read(S, T, span):
    """Keys one sequence's queries read: all S, or at most the window behind the first query."""
    if not span:
        return S
    return min(S, T + span - 1) if type(S) is int and type(T) is int else np.minimum(S, T + span - 1)


def _at_least_0(x):
    return max(x, 0) if type(x) is int else np.maximum(x, 0)


def attention_ops(o: OpBuilder, a: Attention, B, T, S, decode: bool, attention: str, D) -> list[Kernel]:
    H, K, d, dv, span = a.heads, a.kv_heads, a.head_dim, a.v_head_dim, a.span
    M = B * T
    w = o.w
    pairs = attended_pairs(T, S, a.index_topk or span, bool(a.chunk), not decode)  # per head, per sequence (causal)
    n_s = B * H * pairs
    keys = _keys_read(S, T, span) if span else S
    cached = keys if decode else _at_least_0(keys - T)  # keys that come from the cache
    ops = [o.mm("QKV proj", M, a.qkv_width, D, "attention")]
    if a.qk_norm:
        ops.append(o.norm("q/k norm", M * (H + K), d))
    if a.index_topk:
        ops += _block_indexer_ops(o, a, B, T, S, decode, D)
        keys = a.attended(S) if decode else S  # decode reads its top k; a prefill chunk's queries together all S
    q, k_, v, out = B * H * T * d, B * K * keys * d, B * K * keys * dv, B * H * T * dv
    if a.index_topk:  # one sparse kernel whatever ``attention`` says (MiniMax's MSA kernels)
        ops.append(o.kernel(SPARSE_GQA, *fused_attention_counts(n_s, q, k_, v, out, d, dv, w, SOFTMAX), "attention",
                            o.dtype, cache_elems=B * K * (keys if decode else _at_least_0(S - T)) * (d + dv)))
    elif attention == "naive":
        ops += [o.kernel("QK^T", *scores_counts(n_s, q, k_, d, w), "attention", o.dtype, cache_elems=B * K * cached * d),
                o.kernel("softmax", *row_op_counts(n_s, SOFTMAX, w), "softmax", o.dtype),
                o.kernel("PV", *pv_counts(n_s, v, out, dv, w), "attention", o.dtype, cache_elems=B * K * cached * dv)]
    else:
        ops.append(o.kernel("flash attention", *fused_attention_counts(n_s, q, k_, v, out, d, dv, w, SOFTMAX),
                            "attention", o.dtype, None, 0.0, B * K * cached * (d + dv), "",
                            (FUSED_ATTENTION, B, T, S, H, K, d, dv, span, bool(a.chunk), decode, o.dtype)))
    if a.output_gate:  # out * sigmoid(gate), the gate from q_proj's second half
        ops.append(o.ew("output gate (sigmoid*mul)", M * H * dv, 2, 1, FLOPS_PER_ELEMENT["gated_activation"]))
    ops.append(o.mm("out proj", M, D, H * dv, "attention"))
    return ops


def latent_ops(o: OpBuilder, a: LatentAttention, B, T, S, decode: bool, D) -> list[Kernel]:
    """MLA: prefill expanded, decode absorbed (module docstring); under DSA, the indexer's ops
    (_indexer_ops) and an attention that reads each query's top-k latents only."""
    H, r, rope, nope, dv = a.heads, a.kv_lora_rank, a.qk_rope_head_dim, a.qk_nope_head_dim, a.v_head_dim
    M = B * T
    w = o.w
    ops = []
    if a.q_lora_rank:
        ops += [o.mm("q_a proj", M, a.q_lora_rank, D, "attention"), o.norm("q_a norm", M, a.q_lora_rank),
                o.mm("q_b proj", M, H * a.qk_head_dim, a.q_lora_rank, "attention")]
    else:
        ops.append(o.mm("q proj", M, H * a.qk_head_dim, D, "attention"))
    ops += [o.mm("kv_a proj", M, r + rope, D, "attention"), o.norm("kv_a norm", M, r)]
    if a.index_heads:  # a layer sharing an earlier layer's top-k (GLM-5.2) reads its positions: not an op of its own
        ops += _indexer_ops(o, a, B, T, S, decode, D)
    pairs = attended_pairs(T, S, a.index_topk, causal=not decode)  # top-k: min(p, k) keys a query, as a window's count
    n_s = B * H * pairs
    if decode:
        cache = B * a.attended(S) * (r + rope)
        flops, nbytes = latent_attention_cost(M, n_s, cache, H, r, rope, w, SOFTMAX)
        one_query = type(T) in (int, float) and T == 1  # the absorbed decode kernel the MLA tables measured
        core = o.kernel(SPARSE_ATTENTION if a.index_topk else "latent attention", flops, nbytes, "attention", o.dtype,
                        cache_elems=cache,
                        shape=(FUSED_MLA, B, S, H, r, rope, o.dtype) if one_query and not a.index_topk else ())
        ops += [o.kernel("q absorb (W_UK)", *batched_matmul_counts(H, M, r, nope, w), "matmul",  # per head (M, nope) @ (nope, r)
                         o.dtype, weight_elems=H * nope * r, part="attention"),
                core,
                o.kernel("out absorb (W_UV)", *batched_matmul_counts(H, M, dv, r, w), "matmul",  # per head (M, r) @ (r, dv)
                         o.dtype, weight_elems=H * r * dv, part="attention")]
    else:
        keys = B * S
        cached = B * _at_least_0(S - T) * (r + rope)
        ops += [o.kernel("kv_b proj (expand)", *matmul_counts(keys, H * (nope + dv), r, w), "matmul", o.dtype,
                         weight_elems=r * H * (nope + dv), part="attention", cache_elems=cached),
                o.kernel("flash attention", *fused_attention_counts(n_s, M * H * a.qk_head_dim, keys * H * a.qk_head_dim,
                                                                    keys * H * dv, M * H * dv, a.qk_head_dim, dv, w, SOFTMAX),
                         "attention", o.dtype)]
    ops.append(o.mm("out proj", M, D, H * dv, "attention"))
    return ops


SPARSE_ATTENTION = "sparse latent attention"  # DSA's decode attention: reads min(S, k) latents a query
INDEX_SCORE_BYTES = 4.0  # the indexer's logits are fp32 (DeepGEMM's fp8_mqa_logits, DeepSeek's fp8_index)
INDEX_BYTES = 4.0  # the top-k positions are int32


def _indexer_ops(o: OpBuilder, a: LatentAttention, B, T, S, decode: bool, D) -> list[Kernel]:
    """DSA's lightning indexer (DeepSeek-V3.2-Exp report, section 2.1): per token wq_b (q_lora_rank ->
    H_I d_I), wk (D -> d_I) and its LayerNorm, weights_proj (D -> H_I); then each query scores every
    key it may see (the causal pairs, all S in decode), sum_h w_h relu(q_h . k): 2 d_I + 3 FLOPs per
    head and pair, reading the index keys of the S positions (the cached S - T from the cache, d_I
    each) and writing one fp32 logit a pair; then the top-k selection over those logits."""
    HI, dI = a.index_heads, a.index_head_dim
    M = B * T
    pairs = B * attended_pairs(T, S, causal=not decode)  # scores, summed over heads: one per (query, key)
    cached = B * (S if decode else _at_least_0(S - T)) * dI
    score = o.kernel("indexer scores", (2.0 * dI + 3.0) * HI * pairs,
                     o.w * (M * HI * dI + M * HI + B * S * dI) + INDEX_SCORE_BYTES * pairs, "attention", o.dtype,
                     cache_elems=cached)
    return [o.mm("index q proj (wq_b)", M, HI * dI, a.q_lora_rank, "attention"),
            o.mm("index k proj (wk)", M, dI, D, "attention"), o.norm("index k norm", M, dI, "layernorm"),
            o.mm("index weights proj", M, HI, D, "attention"), score, _topk_op(o, a, B, T, S, decode)]


def _topk_op(o: OpBuilder, a: LatentAttention, B, T, S, decode: bool) -> Kernel:
    """Top-k selection over each query's indexer logits: one compare a logit (a radix select reads
    each once); reads the fp32 logits and writes k int32 positions a query (a buffer k wide, padded
    where fewer than k keys exist, as vLLM's and DeepSeek's kernels keep it)."""
    pairs = B * attended_pairs(T, S, causal=not decode)
    chosen = B * T * a.index_topk
    return o.kernel("top-k select", pairs, INDEX_SCORE_BYTES * pairs + INDEX_BYTES * chosen, "elementwise", o.dtype)


SPARSE_GQA = "sparse attention"  # MSA's attention: each query reads its top min(S, k) keys


def _block_indexer_ops(o: OpBuilder, a: Attention, B, T, S, decode: bool, D) -> list[Kernel]:
    """MSA's block indexer (MiniMax-M3; vLLM's MiniMaxM3SparseAttention): per token index_q_proj
    (D -> H_I d_I) and index_k_proj (D -> d_I) and their norms; each query scores every key it may
    see (the causal pairs, all S in decode), q_h . k for each of H_I heads, 2 d_I FLOPs a head and
    pair, pooled on chip to one fp32 score a block of ``index_block`` keys (the max, one compare a
    head and pair), reading the index keys of the S positions (the cached S - T from the cache);
    then the top k / index_block blocks of each query's scores. Blocks counted as p / block a query
    (linear in the contexts; a partial last block is under one score short)."""
    HI, dI, bs = a.index_heads, a.index_head_dim, a.index_block
    M = B * T
    pairs = B * attended_pairs(T, S, causal=not decode)
    blocks = pairs / bs  # p / block scores a query at position p (its last, partial block counted in part)
    cached = B * (S if decode else _at_least_0(S - T)) * dI
    score = o.kernel("indexer block scores", (2.0 * dI + 1.0) * HI * pairs,
                     o.w * (M * HI * dI + B * S * dI) + INDEX_SCORE_BYTES * blocks, "attention", o.dtype,
                     cache_elems=cached)
    top = o.kernel("top-k blocks", blocks, INDEX_SCORE_BYTES * blocks + INDEX_BYTES * M * (a.index_topk // bs),
                   "elementwise", o.dtype)
    return [o.mm("index q/k proj", M, HI * dI + dI, D, "attention"), o.norm("index q/k norm", M * (HI + 1), dI),
            score, top]
