"""What a kernel's ``shape`` says (kernels.py re-exports these): the tags of the tagged shapes a measured
table is read at (a fused attention's, a routed-expert op's, MLA's absorbed decode attention's, a
collective's) and the readers of a shape (a plain matmul's (batch, M, N, K); a collective's GPUs).
"""

from __future__ import annotations


# The tag of a fused attention kernel's shape: (FUSED_ATTENTION, B, T, S, heads, KV heads, head dim, V head dim,
# window (0: none), chunked, decode, KV-cache dtype), what a measured attention table is read at (measured.attention)
FUSED_ATTENTION = "fused attention"
# The tag of a routed-expert op's shape (gate+up, activation, down of one MoE layer): (MOE_EXPERTS, tokens,
# hidden, expert d_ff, top-k, experts, gated, the experts' weight format, the dtype their matmuls compute in),
# what a measured MoE table is read at
MOE_EXPERTS = "moe experts"
# The tag of Gated DeltaNet's two kernels' shape: (GATED_DELTA_NET, part ("conv" or "rule"), B, T, key heads, key
# head dim, value heads, value head dim, conv width, decode, the model's width), what the measured GDN table is read at (measured.gdn)
GATED_DELTA_NET = "gated delta net"
# Kimi Delta Attention's conv and delta rule (Kimi Linear): GATED_DELTA_NET's fields under their own tag, what the
# measured KDA table is read at (measured.linear)
KIMI_DELTA_ATTENTION = "kimi delta attention"
# The tag of Mamba-2's depthwise conv over x, B and C: (MAMBA2_CONV, B, T, channels, conv width, decode, the model's
# width), what the measured Mamba-2 table is read at (measured.linear)
MAMBA2_CONV = "mamba2 conv"


def matmul_dims(shape: tuple) -> tuple | None:
    """(batch, M, N, K) of a matmul whose shape (Kernel.shape) is those four numbers (a block's, a
    traced or a profiled matmul); None for any other shape (a routed expert's, a fused attention's:
    tagged tuples) or none."""
    return shape if len(shape) == 4 and not any(isinstance(x, str) for x in shape) else None


ALL_REDUCE = "all-reduce"  # the tags of a collective kernel's shape (TAG, GPUs, bytes each GPU holds)
# The tag of MLA's absorbed decode attention (FUSED_MLA, B, S, heads, kv_lora_rank, rope dims, KV-cache dtype): what a
# measured MLA generation table is read at (measured.mla)
FUSED_MLA = "fused latent attention"
ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND = "all-gather", "reduce-scatter", "all-to-all", "send"
COLLECTIVES = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND)


def collective_group(kernel):
    """The GPUs a collective kernel runs among (its shape's second entry), or None when unknown."""
    shape = getattr(kernel, "shape", ())
    return shape[1] if len(shape) == 3 and shape[0] in COLLECTIVES else None
