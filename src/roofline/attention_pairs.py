"""Attention pairs: how many (query, key) pairs T new tokens at the end of S positions attend.

Causal: a query at position p attends to p keys (full attention), to min(p, W) keys (sliding
window W), or to the keys of its own chunk so far, ((p - 1) mod C) + 1 (chunked local attention,
chunk C). For T new tokens that are the last T of S positions, full attention's sum is
T S - T (T - 1) / 2. When T = S (a prompt with no cache) the seed's convention T S / 2 is kept
(the exact T (T + 1) / 2 differs by a factor 1 + 1/T). The kernels (kernels.py) and the layer ops
(blocks.py) count score elements with it.
"""

from __future__ import annotations

import numpy as np


def _sum_to(n):
    n = np.asarray(n, dtype=float)
    return n * (n + 1.0) / 2.0


def _chunk_prefix(n, C):
    """Sum over positions p = 1..n of the keys p sees in chunked attention: ((p - 1) mod C) + 1."""
    n = np.asarray(n, dtype=float)
    q, r = np.floor(n / C), np.mod(n, C)
    return q * C * (C + 1.0) / 2.0 + r * (r + 1.0) / 2.0


def attended_pairs(T, S, span: int = 0, chunked: bool = False, causal: bool = True):
    """(query, key) pairs per head for T queries that are positions S-T+1..S.

    Not causal: T min(S, span). Causal, full: T S / 2 when T = S (the seed's convention), else
    T S - T (T - 1) / 2. Sliding window W: sum of min(p, W). Chunked C: sum of ((p-1) mod C) + 1."""
    if type(T) in (int, float) and type(S) in (int, float):
        return _pairs_scalar(float(T), float(S), span, chunked, causal)
    T = np.asarray(T, dtype=float)
    S = np.asarray(S, dtype=float)
    if not causal:
        return T * (np.minimum(S, span) if span else S)
    first = S - T  # positions before the first query
    exact = T * S - T * (T - 1.0) / 2.0
    full = np.where(T == S, T * S / 2.0, exact)
    if not span:
        return full
    W = float(span)
    if chunked:
        limited = _chunk_prefix(S, W) - _chunk_prefix(first, W)
    else:  # positions first+1 .. min(S, W) see p keys each; positions past W see W
        limited = _sum_to(np.minimum(S, W)) - _sum_to(np.minimum(first, W)) + W * np.maximum(0.0, S - np.maximum(first, W))
    return np.where(S <= W, full, limited)


def _pairs_scalar(T: float, S: float, span: int, chunked: bool, causal: bool) -> float:
    """attended_pairs for plain numbers, the same closed forms without numpy."""
    if not causal:
        return T * (min(S, span) if span else S)
    full = T * S / 2.0 if T == S else T * S - T * (T - 1.0) / 2.0
    if not span or S <= span:
        return full
    W, first = float(span), S - T
    if chunked:
        def prefix(n):
            q, r = n // W, n % W
            return q * W * (W + 1.0) / 2.0 + r * (r + 1.0) / 2.0
        return prefix(S) - prefix(first)
    lo = min(first, W)
    return (W * (W + 1.0) / 2.0 - lo * (lo + 1.0) / 2.0) + W * max(0.0, S - max(first, W))
