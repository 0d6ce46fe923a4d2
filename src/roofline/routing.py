"""How tokens routed to experts spread over the experts and over the GPUs holding them: the statistics the
MoE ops and expert parallelism read. Routing is taken as uniform: each token picks its k of E experts at
random (a trained router is more skewed; the engines' balanced benchmarks less)."""

from __future__ import annotations

import math

import numpy as np


def expected_experts_touched(n_experts, experts_per_token, n_tokens):
    """Experts that n tokens, each routed to k of E uniformly, are expected to touch:
    E (1 - (1 - k/E)^n)."""
    if type(n_tokens) in (int, float):
        return n_experts * (1.0 - (1.0 - experts_per_token / n_experts) ** n_tokens)
    return n_experts * (1.0 - (1.0 - experts_per_token / n_experts) ** np.asarray(n_tokens, dtype=float))


def expected_busiest_touched(n_experts, experts_per_token, n_tokens, groups: int):
    """The experts the busiest of ``groups`` GPUs is expected to touch when E experts are split whole over
    them (E / g each) and n tokens each pick k of E uniformly: E[max over the g GPUs of the experts each
    touches], each expert touched with p = 1 - (1 - k/E)^n, independently (the k picks of one token exclude
    each other: a slight negative correlation left out), so each GPU's count is Binomial(E / g, p) and
    E[max] = sum_{j < E/g} (1 - F(j)^g), F its distribution function. A step of expert parallelism waits for
    its busiest GPU: at 16 tokens, top-8 of 128 experts over 8 GPUs, each holds 16 and touches 10.3 on
    average, the busiest 13.0. One GPU (g = 1), or E / g not whole: the mean, expected_experts_touched / g."""
    E, k, g = float(n_experts), float(experts_per_token), int(groups)
    n = E / g
    if g <= 1 or not float(n).is_integer():
        return expected_experts_touched(E, k, n_tokens) / max(g, 1)
    n = int(n)
    M = np.asarray(n_tokens, dtype=float)
    p_all = np.clip(1.0 - (1.0 - k / E) ** M, 0.0, 1.0)
    # where p rounds to 1 (past about 570 tokens at top-8 of 128) every expert is touched: the maximum is n exactly,
    # as the sum below gives it; the sum is taken at the other sizes only
    out = np.full(np.shape(p_all), float(n))
    live = np.atleast_1d(p_all < 1.0)
    p = np.atleast_1d(p_all)[live][:, None]
    j = np.arange(n + 1, dtype=float)
    log_c = np.array([math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) for x in range(n + 1)])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = log_c + np.where(j > 0, j * np.log(p), 0.0) + np.where(j < n, (n - j) * np.log1p(-p), 0.0)
    cdf = np.minimum(np.cumsum(np.exp(log_pmf), axis=-1), 1.0)
    flat = np.atleast_1d(out)  # a view of out (or out itself, 1-d or more)
    flat[live] = (1.0 - cdf[:, :n] ** g).sum(axis=-1)
    out = flat.reshape(np.shape(p_all))
    return float(out) if np.ndim(out) == 0 and type(n_tokens) in (int, float) else out
