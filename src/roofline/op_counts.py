"""Pure count rules that kernel constructors (kernels.py, which re-exports them), the layer ops (blocks,
attention_ops, op_builder, plan), the aten rules (trace.rules), the measured tables' rooflines (measured)
and the calibration's probes (measure) share: FLOPs per element of the vector ops; (FLOPs, bytes) of a
matmul, a routed experts' matmul, a row-wise op (norm, softmax), an elementwise op, a gather and fused
attention; the closed forms of MLA's absorbed attention (the ring collectives' are kernels.py's). Inputs in, counts
out; plain numbers or arrays. ``w`` is bytes per element throughout. Each rule is the only place its
formula is written: the checked constructors (kernels.py) and the trusted builders call it.
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


def matmul_flops(M, N, K, batch=1):
    """``batch`` (M, K) @ (K, N) products: 2 b M N K FLOPs (1 FMA = 2 FLOPs; bias and epilogue ignored).
    The one FLOP rule of the dense matmuls: the counts below, the measured tables' rooflines
    (roofline.measured) and the aten rules (trace.rules, whose bytes are the traced tensors')."""
    return 2.0 * batch * M * N * K


def matmul_counts(M, N, K, w, w_out=None):
    """(M, K) @ (K, N): 2 M N K FLOPs; w (M K + K N + M N) bytes, A and B read once, C written once
    (bias and epilogue ignored), or w (M K + K N) + w_out M N where C is written at another width
    ``w_out`` (an fp8 GEMM writing bf16). The roofline chapter, section 2.2."""
    if w_out is None:
        return matmul_flops(M, N, K), w * (M * K + K * N + M * N)
    return matmul_flops(M, N, K), w * (M * K + K * N) + w_out * M * N


def batched_matmul_counts(batch, M, N, K, w):
    """``batch`` independent (M, K) @ (K, N): 2 b M N K FLOPs; w b (M K + K N + M N) bytes."""
    return matmul_flops(M, N, K, batch), w * batch * (M * K + K * N + M * N)


def expert_matmul_counts(rows, D, F, n, touched, w, w_weight=None):
    """A routed experts' matmul over ``rows`` token-expert rows, each (rows, D) @ (D, n F) with the
    weights of the ``touched`` experts read once (n = 2 for a gated gate+up, 1 for an up; a down
    proj is (rows, F) @ (F, D): pass D and F swapped, n = 1): 2 rows D F n FLOPs; w (rows D +
    touched n D F + rows n F) bytes, or w (rows D + rows n F) + w_weight touched n D F where the
    experts' weights are stored at another width ``w_weight`` (MXFP4 weights, bf16 activations)."""
    if w_weight is None:
        return 2.0 * rows * D * F * n, w * (rows * D + touched * n * D * F + rows * n * F)
    return 2.0 * rows * D * F * n, w * (rows * D + rows * n * F) + w_weight * touched * n * D * F


def row_op_counts(n, flops_per_elem, w):
    """A row-wise op (a norm, a materialised softmax) over n elements: f n FLOPs (FLOPS_PER_ELEMENT);
    2 w n bytes, x read and y written (the norm's d-sized weights ignored)."""
    return flops_per_elem * n, 2.0 * w * n


def elementwise_counts(n, n_in, n_out, flops_per_elem, w):
    """An elementwise op on n elements, n_in read and n_out written: f n FLOPs; w n (n_in + n_out) bytes."""
    return flops_per_elem * n, w * n * (n_in + n_out)


def gather_bytes(rows, width, w):
    """An embedding gather of ``rows`` rows of ``width``: no FLOPs (a lookup); 2 w rows width bytes,
    the rows read and the (rows, width) output written (the token ids ignored)."""
    return 2.0 * w * rows * width


def scores_counts(n_s, q, k, d, w):
    """Q K^T materialised: n_s score elements, each a d-wide dot product: 2 n_s d FLOPs; w (q + k +
    n_s) bytes, the q query and k key elements read and the scores written."""
    return 2.0 * n_s * d, w * (q + k + n_s)


def pv_counts(n_s, v, out, dv, w):
    """P V with P materialised: 2 n_s dv FLOPs; w (n_s + v + out) bytes, P and the v value elements
    read and the out output elements written."""
    return 2.0 * n_s * dv, w * (n_s + v + out)


def fused_attention_counts(n_s, q, k, v, out, d, dv, w, softmax_flops):
    """Attention in one kernel (FlashAttention): the scores and PV of n_s score elements and their
    softmax, 2 n_s (d + dv) + s n_s FLOPs; only Q, K, V and O touch memory, w (q + k + v + out)
    bytes (the log-sum-exp statistics ignored)."""
    return fused_attention_flops(n_s, d, dv, softmax_flops), w * (q + k + v + out)


def fused_attention_flops(n_s, d, dv, softmax_flops=0.0):
    """n_s (query, key) score elements of QK^T (d wide) and PV (dv wide) and their softmax (s FLOPs
    an element; 0 where it is not counted, as torch's FlopCounterMode): 2 n_s (d + dv) + s n_s."""
    return 2.0 * n_s * (d + dv) + softmax_flops * n_s


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


def conv1d_counts(C, conv_kernel, B, T, decode: bool, w: float) -> tuple:
    """A depthwise causal conv of width ``conv_kernel`` over C channels for B sequences of T tokens
    (Mamba's, Mamba-2's over x, B and C, Gated DeltaNet's over q, k and v): (FLOPs, bytes, cache
    elements). 2 conv_kernel FLOPs a channel a token; its (BT, C) input read and output written; its
    window of conv_kernel - 1 tokens (B (k - 1) C elements) read and written by a decode step, written
    by a prefill. Elements of ``w`` bytes; the conv's weights and bias ignored. One formula for the
    layers' ops and the measured tables' rooflines (measured.gdn, measured.linear)."""
    M = B * T
    conv_io = (2.0 if decode else 1.0) * B * (conv_kernel - 1) * C
    return 2.0 * conv_kernel * M * C, w * (2 * M * C + conv_io), conv_io


def gdn_counts(g, B, T, decode: bool, w: float) -> tuple[tuple, tuple]:
    """The FLOPs, bytes and cache (state) elements of Gated DeltaNet's two kernels for B sequences of
    T tokens: ((conv1d), (gated delta rule)). The conv: 2 conv_kernel FLOPs a channel of q, k, v
    (conv_channels), reads and writes them, its window of conv_kernel - 1 tokens read and written by
    a decode step (written by a prefill). The rule: GatedDeltaNet.scan_flops_per_token's 7 FLOPs per
    state element (B v_heads k_head_dim v_head_dim); reads q, k, v, g and beta, writes the output; the
    state read and written once per decode step, written once by a prefill. Elements of ``w`` bytes.
    One formula for the layer's ops (_gdn_ops) and the measured GDN table's rooflines (measured.gdn)."""
    M, C, Hv = B * T, g.conv_channels, g.v_heads
    state = B * Hv * g.k_head_dim * g.v_head_dim
    state_io = 2.0 * state if decode else state
    conv = conv1d_counts(C, g.conv_kernel, B, T, decode, w)
    rule = (7.0 * M * Hv * g.k_head_dim * g.v_head_dim,
            w * (M * (C + g.gate_elems_per_token) + M * g.value_dim + state_io), state_io)
    return conv, rule
