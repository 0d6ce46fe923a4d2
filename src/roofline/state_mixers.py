"""State-space token mixers (mixers.py re-exports them): Mamba2 (SSD), Mamba (v1, Jamba's),
GatedDeltaNet (Qwen3-Next's linear attention, Kimi Delta Attention), each with its parameters,
fixed state and per-token cost; and ParallelMixer (attention and Mamba-2 side by side on one
input: Falcon-H1).

Dimension letters: D d_model, H heads, N SSM state size, G SSM groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.attention_mixers import Attention
from roofline.errors import RooflineError, check_counts, check_counts_or_zero


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
