"""The parts of a layer: token mixers (attention and state-space) and channel mixers (MLP, MoE).

    token mixers    Attention (full causal, sliding window W, chunked local C; GQA, q/k norms,
                    biases, sinks, a sigmoid output gate, MiniMax's block-sparse MSA), LatentAttention (DeepSeek's MLA), Mamba2
                    (SSD), Mamba (v1, Jamba's), GatedDeltaNet (Qwen3-Next's linear attention), each
                    with its parameters, cache and per-token cost; ParallelMixer (attention and
                    Mamba-2 side by side on one input: Falcon-H1);
    channel mixers  MLP (gated or not), MoE (routed experts, shared experts, router).

Each part counts its parameters at a model width D (``params(d_model)``) and each token mixer its
cache, by the conventions in architecture.py's docstring; architecture.Layer puts one of each
together.

Dimension letters: D d_model, H heads, K kv heads, d head dim, F d_ff, E experts, N SSM state
size, G SSM groups, W window, C chunk.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Union

import numpy as np

from roofline.errors import RooflineError, check_counts, check_counts_or_zero

# ---------------------------------------------------------------------------------------------
# Token mixers
# ---------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Mamba2:
    """Mamba-2's SSD mixer (arXiv:2405.21060; transformers Mamba2Mixer). in_proj D -> 2 d_inner +
    2 G N + heads (z, x, B, C, dt); a depthwise conv of width ``conv_kernel`` over x, B, C; dt_bias,
    A_log and D per head; a gated RMSNorm over d_inner; out_proj d_inner -> D.

    ``gated_norm`` False: no norm, the scan's output is gated as y * silu(z) (Falcon-H1's
    mamba_rms_norm false). ``out_bias``: out_proj's bias when it differs from in_proj's (Falcon-H1
    sets in_proj's by mamba_proj_bias, out_proj's by projectors_bias); None: ``proj_bias`` for both."""

    d_inner: int
    d_state: int
    n_groups: int
    heads: int
    conv_kernel: int = 4
    conv_bias: bool = True
    proj_bias: bool = False
    gated_norm: bool = True
    out_bias: bool | None = None

    def __post_init__(self):
        check_counts("mamba2", d_inner=self.d_inner, d_state=self.d_state, n_groups=self.n_groups, heads=self.heads,
                  conv_kernel=self.conv_kernel)
        if self.d_inner % self.heads:
            raise RooflineError(f"mamba2: d_inner {self.d_inner} is not a multiple of heads {self.heads}")

    kind = "mamba2 (SSD)"
    span = 0

    @property
    def conv_channels(self) -> int:
        return self.d_inner + 2 * self.n_groups * self.d_state

    @property
    def in_proj_width(self) -> int:
        return 2 * self.d_inner + 2 * self.n_groups * self.d_state + self.heads

    def params(self, d_model: int) -> int:
        D, C = d_model, self.conv_channels
        n = D * self.in_proj_width + (self.in_proj_width if self.proj_bias else 0)
        n += C * self.conv_kernel + (C if self.conv_bias else 0)
        n += 3 * self.heads + (self.d_inner if self.gated_norm else 0)  # dt_bias, A_log, D; the gated norm's scale
        out_bias = self.proj_bias if self.out_bias is None else self.out_bias
        n += self.d_inner * D + (D if out_bias else 0)
        return n

    def state_elems(self) -> int:
        """Per sequence: the SSM state (d_inner N) and the conv window ((k - 1) channels)."""
        return self.d_inner * self.d_state + (self.conv_kernel - 1) * self.conv_channels

    def scan_flops_per_token(self) -> float:
        """Recurrent form: h <- a h + dt B x and y = C h: 6 FLOPs per state element (a multiply, two
        FMAs), plus the depthwise conv (2 k per channel)."""
        return 6.0 * self.d_inner * self.d_state + 2.0 * self.conv_kernel * self.conv_channels


@dataclass(frozen=True)
class Mamba:
    """Mamba (v1) selective scan as Jamba uses it (transformers JambaMambaMixer): in_proj D ->
    2 d_inner; a depthwise conv over d_inner; x_proj d_inner -> dt_rank + 2 N; dt_proj dt_rank ->
    d_inner (with bias); A_log (d_inner, N); D (d_inner); out_proj d_inner -> D; Jamba adds RMSNorms
    on dt (dt_rank), B and C (N each) when ``inner_norms``."""

    d_inner: int
    d_state: int
    dt_rank: int
    conv_kernel: int = 4
    conv_bias: bool = True
    proj_bias: bool = False
    inner_norms: bool = False

    def __post_init__(self):
        check_counts("mamba", d_inner=self.d_inner, d_state=self.d_state, dt_rank=self.dt_rank, conv_kernel=self.conv_kernel)

    kind = "mamba (selective scan)"
    span = 0

    def params(self, d_model: int) -> int:
        D, I, N, R = d_model, self.d_inner, self.d_state, self.dt_rank
        n = D * 2 * I + (2 * I if self.proj_bias else 0)
        n += I * self.conv_kernel + (I if self.conv_bias else 0)
        n += I * (R + 2 * N) + R * I + I  # x_proj; dt_proj with its bias
        n += I * N + I  # A_log, D
        n += I * D + (D if self.proj_bias else 0)
        if self.inner_norms:
            n += R + 2 * N
        return n

    def state_elems(self) -> int:
        return self.d_inner * self.d_state + (self.conv_kernel - 1) * self.d_inner

    def scan_flops_per_token(self) -> float:
        """As Mamba2.scan_flops_per_token over d_inner x N state elements, plus the conv."""
        return 6.0 * self.d_inner * self.d_state + 2.0 * self.conv_kernel * self.d_inner


@dataclass(frozen=True)
class GatedDeltaNet:
    """Gated DeltaNet linear attention (Yang et al. 2024, arXiv:2412.06464; transformers
    Qwen3NextGatedDeltaNet, Qwen3_5GatedDeltaNet). Projections D -> q, k (``k_heads`` x
    ``k_head_dim`` each), v and the output gate z (``v_heads`` x ``v_head_dim`` each), b and a (one
    per value head): Qwen3-Next fuses them as in_proj_qkvz and in_proj_ba, Qwen3.5 splits them as
    in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, the same widths; a depthwise causal conv of width
    ``conv_kernel`` over the q, k, v channels, no bias; dt_bias and A_log per value head; an RMSNorm
    over v_head_dim gated by silu(z), one scale shared by the heads; out_proj v_heads v_head_dim -> D.
    Each value head keeps a (k_head_dim x v_head_dim) state; a key head serves v_heads / k_heads of them.
    ``split_projections``: the checkpoint stores the four split matrices (Qwen3.5), not the two fused
    ones; the same parameters, but a quantised format keeps scales per matrix.

    ``gate_rank`` r > 0: Kimi Delta Attention (Kimi Linear, arXiv:2510.26692; vLLM's
    KimiDeltaAttention): the decay is per channel, not per head, and it and the output gate come
    through rank-r projections (f_a_proj D -> r, f_b_proj r -> key_dim; g_a_proj D -> r, g_b_proj
    r -> value_dim); b_proj D -> v_heads; dt_bias per key channel, A_log per head; q, k and v convolved
    apart (the same channels); the norm gated by a sigmoid. The same state and delta rule."""

    k_heads: int
    v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_kernel: int = 4
    split_projections: bool = False
    gate_rank: int = 0

    def __post_init__(self):
        check_counts("gated deltanet", k_heads=self.k_heads, v_heads=self.v_heads, k_head_dim=self.k_head_dim,
                     v_head_dim=self.v_head_dim, conv_kernel=self.conv_kernel)
        if self.v_heads % self.k_heads:
            raise RooflineError(f"gated deltanet: value heads {self.v_heads} are not a multiple of key heads {self.k_heads}")
        check_counts_or_zero("gated deltanet", gate_rank=self.gate_rank)

    span = 0

    @property
    def kind(self) -> str:
        return "kimi delta attention (linear attention)" if self.gate_rank else "gated deltanet (linear attention)"

    @property
    def key_dim(self) -> int:
        return self.k_heads * self.k_head_dim

    @property
    def value_dim(self) -> int:
        return self.v_heads * self.v_head_dim

    @property
    def conv_channels(self) -> int:
        """q, k and v: 2 k_heads k_head_dim + v_heads v_head_dim."""
        return 2 * self.key_dim + self.value_dim

    @property
    def in_proj_width(self) -> int:
        """The projections from D: q, k, v, z, b, a: 2 key_dim + 2 value_dim + 2 v_heads; under KDA q, k,
        v, b and the two rank-r gate inputs: 2 key_dim + value_dim + v_heads + 2 r."""
        if self.gate_rank:
            return 2 * self.key_dim + self.value_dim + self.v_heads + 2 * self.gate_rank
        return 2 * self.key_dim + 2 * self.value_dim + 2 * self.v_heads

    @property
    def gate_up_width(self) -> int:
        """KDA's projections from its rank-r gate inputs: the decay (key_dim) and the output gate
        (value_dim); 0 for Gated DeltaNet."""
        return self.key_dim + self.value_dim if self.gate_rank else 0

    @property
    def gate_elems_per_token(self) -> int:
        """What the delta rule reads a token beside q, k, v: the decay and beta, one each a value head
        (KDA: the decay per key channel)."""
        return (self.key_dim if self.gate_rank else self.v_heads) + self.v_heads

    def params(self, d_model: int) -> int:
        D = d_model
        n = D * self.in_proj_width + self.gate_rank * self.gate_up_width  # no biases
        n += self.conv_channels * self.conv_kernel  # depthwise conv, no bias
        n += (self.key_dim if self.gate_rank else self.v_heads) + self.v_heads  # dt_bias (per head; KDA per channel), A_log
        n += self.v_head_dim  # the gated norm's scale
        n += self.value_dim * D  # out_proj
        return n

    def state_elems(self) -> int:
        """Per sequence: the recurrent state, v_heads x k_head_dim x v_head_dim, and the conv window,
        (conv_kernel - 1) x conv_channels (vLLM's gated_delta_net_state_shape)."""
        return self.v_heads * self.k_head_dim * self.v_head_dim + (self.conv_kernel - 1) * self.conv_channels

    def scan_flops_per_token(self) -> float:
        """The delta rule in its recurrent form, per value head, state S (d_k x d_v):
        S <- exp(g) S (d_k d_v multiplies), u = k^T S (2 d_k d_v), S <- S + k (beta (v - u))^T (2 d_k d_v),
        o = q^T S (2 d_k d_v): 7 FLOPs per state element, plus the depthwise conv (2 k per channel).
        The O(d) terms per head (v - u, the beta scaling, the q and k L2 norms, the decay's exp and
        softplus) are left out: 2 d_v / (7 d_k d_v), 0.2% at d_k = 128. Prefill kernels run the chunked
        form (WY representation, chunks of 64), which does more FLOPs than this."""
        return 7.0 * self.v_heads * self.k_head_dim * self.v_head_dim + 2.0 * self.conv_kernel * self.conv_channels


@dataclass(frozen=True)
class ParallelMixer:
    """Attention and a Mamba-2 mixer side by side on the same normed input, their outputs (each
    scaled by a constant multiplier) summed into the residual (Falcon-H1, arXiv:2507.22448; transformers
    FalconH1DecoderLayer: self_attn and mamba). Its parameters are both mixers'; its cache the
    attention's K and V per token plus the SSM's fixed state per sequence; its ops both mixers' ops
    and the sum of their two outputs. The multipliers are constants (mup_vector is a buffer, not a
    parameter): no weights, and an elementwise scale each the model leaves uncounted."""

    attention: Attention
    ssm: Mamba2

    def __post_init__(self):
        if not isinstance(self.attention, Attention) or not isinstance(self.ssm, Mamba2):
            raise RooflineError("a parallel mixer pairs an Attention with a Mamba2 mixer")

    @property
    def kind(self) -> str:
        return f"{self.attention.kind} || {self.ssm.kind}"

    @property
    def parts(self) -> tuple:
        """The two mixers, attention first."""
        return (self.attention, self.ssm)

    @property
    def span(self) -> int:
        """The attention's (0: unlimited)."""
        return self.attention.span

    def params(self, d_model: int) -> int:
        return self.attention.params(d_model) + self.ssm.params(d_model)


Mixer = Union[Attention, LatentAttention, Mamba2, Mamba, GatedDeltaNet, ParallelMixer]
SSM_MIXERS = (Mamba2, Mamba, GatedDeltaNet)
ATTENTION_MIXERS = (Attention, LatentAttention)


def token_mixers(mixer) -> tuple:
    """The single mixers a layer's token mixer runs: a parallel mixer's two, else the mixer itself
    (none for a layer without one)."""
    if mixer is None:
        return ()
    return mixer.parts if isinstance(mixer, ParallelMixer) else (mixer,)


# ---------------------------------------------------------------------------------------------
# Channel mixers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MLP:
    """Feed-forward: gated (gate, up, down: 3 D F) or plain (up, down: 2 D F), optional biases.
    ``activation`` is a label (silu, gelu, relu2) costed as one elementwise op."""

    d_ff: int
    gated: bool = True
    bias: bool = False
    activation: str = "silu"

    def __post_init__(self):
        check_counts("mlp", d_ff=self.d_ff)

    @property
    def kind(self) -> str:
        return f"{'gated ' if self.gated else ''}MLP {self.d_ff}"

    def params(self, d_model: int) -> int:
        D, F = d_model, self.d_ff
        if self.gated:
            return 3 * D * F + ((2 * F + D) if self.bias else 0)
        return 2 * D * F + ((F + D) if self.bias else 0)


@dataclass(frozen=True)
class MoE:
    """Mixture of experts: a router (D, E) picks ``top_k`` of ``n_experts`` routed experts, each an
    MLP of ``d_ff``; ``shared_d_ff`` > 0 adds an always-active shared MLP of that width (DeepSeek's
    n_shared_experts x moe_intermediate_size; Llama 4's and Qwen2-MoE's shared expert), with a
    sigmoid gate (D, 1) when ``shared_gate`` (Qwen2-MoE). ``router_bias``: the router's bias (E).
    ``router_scales``: Gemma 4's router scales its normed input (D) and each expert's weight (E).
    DeepSeek-V3's e_score_correction_bias is a buffer, not a parameter, and is not counted.
    ``latent`` R > 0: the routed experts work at width R, between a down projection (D, R) and an up
    projection (R, D) every token takes (Nemotron-3 Super/Ultra's moe_latent_size; no biases); the
    router and the shared expert still read width D."""

    n_experts: int
    top_k: int
    d_ff: int
    gated: bool = True
    bias: bool = False  # biases inside each expert (gpt-oss)
    shared_d_ff: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    activation: str = "silu"
    latent: int = 0
    router_scales: bool = False

    def __post_init__(self):
        check_counts("moe", n_experts=self.n_experts, top_k=self.top_k, d_ff=self.d_ff)
        check_counts_or_zero("moe", shared_d_ff=self.shared_d_ff, latent=self.latent)
        if self.top_k > self.n_experts:
            raise RooflineError(f"moe: top_k {self.top_k} exceeds n_experts {self.n_experts}")

    @property
    def kind(self) -> str:
        shared = f" + shared {self.shared_d_ff}" if self.shared_d_ff else ""
        latent = f" at latent {self.latent}" if self.latent else ""
        return f"MoE {self.top_k} of {self.n_experts} x {self.d_ff}{latent}{shared}"

    def expert_width(self, d_model: int) -> int:
        """The width the routed experts read and write: the latent R, or D."""
        return self.latent or d_model

    def latent_params(self, d_model: int) -> int:
        """The latent down and up projections: 2 D R (0 without a latent)."""
        return 2 * d_model * self.latent

    @property
    def expert(self) -> MLP:
        return MLP(self.d_ff, self.gated, self.bias, self.activation)

    @property
    def shared(self) -> MLP | None:
        return MLP(self.shared_d_ff, self.gated, False, self.activation) if self.shared_d_ff else None

    def router_params(self, d_model: int) -> int:
        return (d_model * self.n_experts + (self.n_experts if self.router_bias else 0)
                + (d_model + self.n_experts if self.router_scales else 0))

    def shared_params(self, d_model: int) -> int:
        return (self.shared.params(d_model) if self.shared_d_ff else 0) + (d_model if self.shared_gate else 0)

    def params(self, d_model: int) -> int:
        return (self.n_experts * self.expert.params(self.expert_width(d_model)) + self.latent_params(d_model)
                + self.shared_params(d_model) + self.router_params(d_model))


ChannelMixer = Union[MLP, MoE]
