"""Pure count rules that kernel constructors (kernels.py, which re-exports them), the layer ops (blocks,
attention_ops, plan) and the aten rules (trace.rules) share: FLOPs per element of the vector ops, and
the closed forms of MLA's absorbed attention. Inputs in, counts out; plain numbers or arrays.
"""

from __future__ import annotations


# FLOPs per element of the vector ops: the one table that the constructors below, the layer ops
# (blocks, plan, step) and the aten rules (trace.rules) read. Each counts the arithmetic done on
# one element, an exp, tanh or reciprocal root as one FLOP; none of it runs on the tensor cores.
FLOPS_PER_ELEMENT = {
    "elementwise": 1.0,  # add, mul, relu, ...: one per output element
    "softmax": 5.0,  # max, subtract, exp, sum, divide
    "layernorm": 8.0,  # mean, variance, normalise, scale and shift
    "rmsnorm": 4.0,  # square, sum, scale by the reciprocal root, multiply by the weight
    "batchnorm": 4.0,  # inference, stored statistics: subtract, scale, multiply, add
    "gated_rmsnorm": 6.0,  # Mamba-2's norm of y gated by silu(z)
    "silu": 4.0,  # x sigmoid(x): negate, exp, add, divide
    "gelu": 8.0,  # the tanh form: x^3, the multiply-adds inside, tanh, 1 +, x / 2 (also any ungated activation in blocks)
    "gated_activation": 5.0,  # act(gate) * up: silu's 4 and the multiply
    "dropout": 2.0,  # random mask and scale
}


def norm_flops_per_element(kind: str) -> float:
    """FLOPs per element of a model's norm: "layernorm", else RMSNorm (a config's final_norm)."""
    return FLOPS_PER_ELEMENT["layernorm" if kind == "layernorm" else "rmsnorm"]


def latent_attention_cost(queries, scores, cache, H, r, rope, bytes_per_elem, softmax_flops):
    """(FLOPs, bytes) of MLA's absorbed attention (DeepSeek-V2, arXiv:2405.04434 section 2.1): each of
    ``scores`` (query, key) pairs, over all heads, scores an (r + rope)-wide query against a cached
    latent and rope key (2 (r + rope) FLOPs), weights the r-wide latent (2 r) and takes a softmax; it
    reads the ``queries`` x H queries and the ``cache`` elements and writes H r outputs a query.
    Plain numbers or arrays."""
    flops = 2.0 * scores * (r + rope) + 2.0 * scores * r + softmax_flops * scores
    return flops, bytes_per_elem * (queries * H * (r + rope) + cache + queries * H * r)


def latent_decode_cost(B, S, H, r, rope, bytes_per_elem, softmax_flops):
    """latent_attention_cost of one query token per sequence over its S cached latents (the kernel
    the MLA generation tables measured): (FLOPs, bytes, cached elements)."""
    cache = B * S * (r + rope)
    flops, nbytes = latent_attention_cost(B, B * H * S, cache, H, r, rope, bytes_per_elem, softmax_flops)
    return flops, nbytes, cache
