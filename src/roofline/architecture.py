"""A model as a stack of layers: what each layer holds, what it caches, what it costs per token.

A ``Model`` is an embedding, a list of layers and an LM head. Layers that repeat are stored
once: ``kinds`` holds each distinct ``Layer`` and ``order`` gives, layer by layer, the index of its
kind (Gemma 3 27B: 2 kinds, sliding and full, in a 5:1 pattern over 62 layers).

A layer has a token mixer, a channel mixer, or both:

    token mixers    Attention (full causal, sliding window W, chunked local C; GQA, q/k norms,
                    biases, sinks), LatentAttention (DeepSeek's MLA), Mamba2 (SSD), Mamba (v1,
                    Jamba's), each with the parameters, cache and per-token cost below;
    channel mixers  MLP (gated or not), MoE (routed experts, shared experts, router).

Conventions (said once here, used everywhere):
- Parameters are what transformers instantiates (``num_parameters()``): buffers such as rotary
  tables are not parameters; a multi-token-prediction head the loader leaves out is named in
  ``Model.omitted``.
- Active parameters: those one token touches, embedding and LM head included (the convention of
  the gpt-oss and DeepSeek-V3 model cards); ``active_params(model, embeddings=False)`` leaves the
  embedding table out.
- Cache: attention keeps K and V of each cached token (K d_head + K d_v elements); sliding and
  chunked layers keep at most W (C) tokens; MLA keeps its compressed latent, kv_lora_rank +
  qk_rope_head_dim elements per token (the absorbed form engines run); state-space layers keep a
  constant state per sequence (SSM state + convolution window), whatever the context.
- Attention pairs for T new tokens that are the last T of S positions, causal: a query at
  position p attends to min(p, W) keys (sliding) or to the keys of its own chunk so far (chunked);
  full attention's sum is T S - T (T - 1) / 2. When T = S (a prompt with no cache) the seed's
  convention T S / 2 is kept (the exact T (T + 1) / 2 differs by a factor 1 + 1/T).

Dimension letters: D d_model, V vocab, H heads, K kv heads, d head dim, F d_ff, E experts,
N SSM state size, G SSM groups, W window, C chunk.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from roofline.errors import MAX_COUNT, RooflineError, check_number

NORMS = ("rmsnorm", "layernorm")


def _norm_params(kind: str, width: int) -> int:
    """RMSNorm has a scale (width); LayerNorm a scale and a bias (2 width)."""
    return 2 * width if kind == "layernorm" else width


def _positive(owner: str, **values):
    if all(type(v) is int and 0 < v <= MAX_COUNT for v in values.values()):
        return
    for name, v in values.items():
        check_number(f"{owner}: {name}", v, minimum=0, maximum=MAX_COUNT, integer=True)


def _non_negative(owner: str, **values):
    if all(type(v) is int and 0 <= v <= MAX_COUNT for v in values.values()):
        return
    for name, v in values.items():
        check_number(f"{owner}: {name}", v, minimum=0, strictly=False, maximum=MAX_COUNT, integer=True)


# ---------------------------------------------------------------------------------------------
# Token mixers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attention:
    """Multi-head attention with ``kv_heads`` key/value heads (GQA; = heads for MHA).

    ``window`` W > 0: sliding window, each query sees the last W positions (itself included);
    ``chunk`` C > 0: chunked local attention, each query sees its own chunk of C positions so far
    (Llama 4). ``qk_norm``: "" none, "rmsnorm" (a d-wide scale on q and on k: Qwen3, Gemma 3),
    "l2" (no weights: Llama 4). ``sinks``: one learned logit per head (gpt-oss)."""

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

    def __post_init__(self):
        _positive("attention", heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim)
        _non_negative("attention", v_head_dim=self.v_head_dim, window=self.window, chunk=self.chunk)
        if self.heads % self.kv_heads:
            raise RooflineError(f"attention: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.window and self.chunk:
            raise RooflineError("attention: a layer is sliding-window or chunked, not both")
        if self.qk_norm not in ("", "rmsnorm", "l2"):
            raise RooflineError(f"attention: qk_norm must be '', 'rmsnorm' or 'l2', got {self.qk_norm!r}")
        if not self.v_head_dim:
            object.__setattr__(self, "v_head_dim", self.head_dim)

    @property
    def kind(self) -> str:
        if self.window:
            return f"sliding {self.window}"
        if self.chunk:
            return f"chunked {self.chunk}"
        return "full attention"

    @property
    def span(self) -> int:
        """The most keys a query sees (0: unlimited)."""
        return self.window or self.chunk

    def params(self, d_model: int) -> int:
        D, H, K, d, dv = d_model, self.heads, self.kv_heads, self.head_dim, self.v_head_dim
        n = D * H * d + D * K * d + D * K * dv + H * dv * D  # Wq, Wk, Wv, Wo
        if self.qkv_bias:
            n += H * d + K * d + K * dv
        if self.out_bias:
            n += D
        if self.qk_norm == "rmsnorm":
            n += 2 * d
        if self.sinks:
            n += H
        return n

    def cache_elems_per_token(self) -> int:
        """K and V of one cached token: K (d + d_v) elements."""
        return self.kv_heads * (self.head_dim + self.v_head_dim)


@dataclass(frozen=True)
class LatentAttention:
    """Multi-head latent attention (DeepSeek-V2/V3, arXiv:2405.04434 section 2.1). Queries: a
    low-rank path D -> q_lora_rank -> H (nope + rope) with a norm between (or a plain D -> H
    (nope + rope) projection when q_lora_rank is 0). Keys and values: D -> kv_lora_rank + rope (the
    latent and a shared rotary key, the cached part), a norm, then kv_lora_rank -> H (nope + v)."""

    heads: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0

    def __post_init__(self):
        _positive("latent attention", heads=self.heads, kv_lora_rank=self.kv_lora_rank,
                  qk_nope_head_dim=self.qk_nope_head_dim, qk_rope_head_dim=self.qk_rope_head_dim,
                  v_head_dim=self.v_head_dim)
        _non_negative("latent attention", q_lora_rank=self.q_lora_rank)

    kind = "latent attention (MLA)"
    span = 0

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
        return q + kv + H * self.v_head_dim * D

    def cache_elems_per_token(self) -> int:
        """The latent and the shared rotary key: kv_lora_rank + qk_rope_head_dim."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class Mamba2:
    """Mamba-2's SSD mixer (arXiv:2405.21060; transformers Mamba2Mixer). in_proj D -> 2 d_inner +
    2 G N + heads (z, x, B, C, dt); a depthwise conv of width ``conv_kernel`` over x, B, C; dt_bias,
    A_log and D per head; a gated RMSNorm over d_inner; out_proj d_inner -> D."""

    d_inner: int
    d_state: int
    n_groups: int
    heads: int
    conv_kernel: int = 4
    conv_bias: bool = True
    proj_bias: bool = False

    def __post_init__(self):
        _positive("mamba2", d_inner=self.d_inner, d_state=self.d_state, n_groups=self.n_groups, heads=self.heads,
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
        n += 3 * self.heads + self.d_inner  # dt_bias, A_log, D; the gated norm's scale
        n += self.d_inner * D + (D if self.proj_bias else 0)
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
        _positive("mamba", d_inner=self.d_inner, d_state=self.d_state, dt_rank=self.dt_rank, conv_kernel=self.conv_kernel)

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


Mixer = Union[Attention, LatentAttention, Mamba2, Mamba]
SSM_MIXERS = (Mamba2, Mamba)
ATTENTION_MIXERS = (Attention, LatentAttention)


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
        _positive("mlp", d_ff=self.d_ff)

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
    DeepSeek-V3's e_score_correction_bias is a buffer, not a parameter, and is not counted."""

    n_experts: int
    top_k: int
    d_ff: int
    gated: bool = True
    bias: bool = False  # biases inside each expert (gpt-oss)
    shared_d_ff: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    activation: str = "silu"

    def __post_init__(self):
        _positive("moe", n_experts=self.n_experts, top_k=self.top_k, d_ff=self.d_ff)
        _non_negative("moe", shared_d_ff=self.shared_d_ff)
        if self.top_k > self.n_experts:
            raise RooflineError(f"moe: top_k {self.top_k} exceeds n_experts {self.n_experts}")

    @property
    def kind(self) -> str:
        shared = f" + shared {self.shared_d_ff}" if self.shared_d_ff else ""
        return f"MoE {self.top_k} of {self.n_experts} x {self.d_ff}{shared}"

    @property
    def expert(self) -> MLP:
        return MLP(self.d_ff, self.gated, self.bias, self.activation)

    @property
    def shared(self) -> MLP | None:
        return MLP(self.shared_d_ff, self.gated, False, self.activation) if self.shared_d_ff else None

    def router_params(self, d_model: int) -> int:
        return d_model * self.n_experts + (self.n_experts if self.router_bias else 0)

    def shared_params(self, d_model: int) -> int:
        return (self.shared.params(d_model) if self.shared_d_ff else 0) + (d_model if self.shared_gate else 0)

    def params(self, d_model: int) -> int:
        return self.n_experts * self.expert.params(d_model) + self.shared_params(d_model) + self.router_params(d_model)


ChannelMixer = Union[MLP, MoE]


# ---------------------------------------------------------------------------------------------
# Layers and models
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """One block: pre-norm residual ``x + mixer(norm(x))`` then ``x + mlp(norm(x))``; with
    ``parallel`` both read one norm's output and add to the residual together (GPT-J, NeoX, Phi-2).
    ``n_norms`` norms of width D (default: one per sub-layer; Gemma 2/3 have 4)."""

    mixer: Mixer | None
    mlp: ChannelMixer | None
    norm: str = "rmsnorm"
    n_norms: int = -1
    parallel: bool = False

    def __post_init__(self):
        if self.mixer is None and self.mlp is None:
            raise RooflineError("a layer needs a token mixer, a channel mixer or both")
        if self.norm not in NORMS:
            raise RooflineError(f"layer norm must be one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.n_norms < 0:
            object.__setattr__(self, "n_norms", 1 if self.parallel else (self.mixer is not None) + (self.mlp is not None))

    @property
    def label(self) -> str:
        parts = [p.kind for p in (self.mixer, self.mlp) if p is not None]
        return " + ".join(parts)

    @property
    def is_attention(self) -> bool:
        return isinstance(self.mixer, ATTENTION_MIXERS)

    @property
    def is_ssm(self) -> bool:
        return isinstance(self.mixer, SSM_MIXERS)

    @property
    def is_moe(self) -> bool:
        return isinstance(self.mlp, MoE)

    def parts(self, d_model: int) -> dict[str, int]:
        """Parameters by part: attention or ssm (the mixer), mlp (dense), experts (all routed experts'
        weight matrices), expert_biases (their biases, gpt-oss), shared_experts, router, norms."""
        out = dict.fromkeys(("attention", "ssm", "mlp", "experts", "expert_biases", "shared_experts", "router", "norms"), 0)
        if self.mixer is not None:
            out["ssm" if self.is_ssm else "attention"] = self.mixer.params(d_model)
        if isinstance(self.mlp, MoE):
            matrices = MLP(self.mlp.d_ff, self.mlp.gated).params(d_model)
            out["experts"] = self.mlp.n_experts * matrices
            out["expert_biases"] = self.mlp.n_experts * (self.mlp.expert.params(d_model) - matrices)
            out["shared_experts"] = self.mlp.shared_params(d_model)
            out["router"] = self.mlp.router_params(d_model)
        elif self.mlp is not None:
            out["mlp"] = self.mlp.params(d_model)
        out["norms"] = self.n_norms * _norm_params(self.norm, d_model)
        return out

    def cache_elems(self, context) -> object:
        """Elements this layer caches for one sequence of ``context`` tokens (arrays broadcast)."""
        m = self.mixer
        if m is None:
            return 0.0
        if isinstance(m, SSM_MIXERS):
            return float(m.state_elems()) + 0.0 * np.asarray(context, dtype=float)
        kept = np.minimum(context, m.span) if m.span else context
        return np.asarray(kept, dtype=float) * m.cache_elems_per_token()


@dataclass(frozen=True)
class WeightStorage:
    """How the checkpoint stores weights, by part (attention, ssm, mlp, experts, shared_experts,
    router, embedding, lm_head): (part, format label, bytes per parameter). Parts not listed are
    stored at ``default`` (the checkpoint's dtype). From a config's quantization_config."""

    default: str = "bf16"
    parts: tuple[tuple[str, str, float], ...] = ()
    method: str = ""

    def width(self, part: str, default_bytes: float) -> float:
        for name, _, b in self.parts:
            if name == part:
                return b
        return default_bytes

    def label(self) -> str:
        if not self.parts:
            return self.default
        by_format: dict[str, list[str]] = {}
        for name, fmt, _ in self.parts:
            by_format.setdefault(fmt, []).append(name.replace("_", " "))
        quant = "; ".join(f"{', '.join(names)} {fmt}" for fmt, names in by_format.items())
        return f"{quant}; the rest {self.default}"


@dataclass(frozen=True)
class Model:
    """A decoder: embedding (V, D), learned positions (``positions`` x D, 0 for rotary), the
    layers (``kinds[order[i]]`` is layer i), a final norm and an LM head (V, D; tied shares the
    embedding; ``lm_head_bias``). ``omitted`` names what the loader left out of the count (a
    vision tower, a multi-token-prediction module); ``notes`` what it assumed."""

    name: str
    d_model: int
    vocab: int
    kinds: tuple[Layer, ...]
    order: tuple[int, ...]
    tied_embeddings: bool = False
    final_norm: str = "rmsnorm"
    positions: int = 0
    lm_head_bias: bool = False
    storage: WeightStorage = field(default_factory=WeightStorage)
    omitted: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    key: str = ""
    model_type: str = ""
    max_context: int = 0  # the config's max_position_embeddings (0: not given)

    def __post_init__(self):
        _positive(self.name, d_model=self.d_model, vocab=self.vocab)
        _non_negative(self.name, positions=self.positions)
        if not self.kinds or not self.order:
            raise RooflineError(f"{self.name}: a model needs at least one layer")
        if any(not (0 <= i < len(self.kinds)) for i in self.order):
            raise RooflineError(f"{self.name}: layer order names a kind that does not exist")
        if self.final_norm not in NORMS:
            raise RooflineError(f"{self.name}: final norm must be one of {', '.join(NORMS)}")

    # -- the layer list ---------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return len(self.order)

    @property
    def layers(self) -> tuple[Layer, ...]:
        return tuple(self.kinds[i] for i in self.order)

    def layer(self, index: int) -> Layer:
        if not (0 <= int(index) < self.n_layers):
            raise RooflineError(f"layer {index}: {self.name} has layers 0 to {self.n_layers - 1}", field="layer")
        return self.kinds[self.order[int(index)]]

    def kind_counts(self) -> tuple[tuple[Layer, int], ...]:
        """Each distinct layer kind with how many layers have it, in order of first appearance."""
        return self._kind_counts

    @functools.cached_property
    def _kind_counts(self) -> tuple[tuple[Layer, int], ...]:
        counts = Counter(self.order)
        return tuple((self.kinds[i], counts[i]) for i in sorted(counts, key=self.order.index))

    @property
    def is_uniform(self) -> bool:
        return len(set(self.order)) == 1

    @property
    def is_moe(self) -> bool:
        return any(k.is_moe for k in self.kinds)

    @property
    def has_attention(self) -> bool:
        return any(k.is_attention for k in self.kinds)

    def pattern(self) -> str:
        """The layer list, compactly: '32 x full attention + gated MLP 14336' for one kind, else
        the repeating unit in letters with a legend, e.g. '10 x [A A A A A B] + A A (A = sliding
        1024 + ..., B = full attention + ...)'."""
        if len(self.kinds) == 1:
            return f"{self.n_layers} x {self.kinds[0].label}"
        order, n = self.order, self.n_layers
        period = next(p for p in range(1, n + 1) if all(order[i] == order[i % p] for i in range(n)))
        letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        if period == n:  # no repeating unit: runs, "3 x A + 58 x B"
            runs: list[list[int]] = []
            for i in order:
                if runs and runs[-1][0] == i:
                    runs[-1][1] += 1
                else:
                    runs.append([i, 1])
            if len(runs) <= 12:
                legend = "; ".join(f"{letters[i]} = {k.label}" for i, k in enumerate(self.kinds))
                return " + ".join(f"{c} x {letters[i]}" for i, c in runs) + f" ({legend})"
        unit = " ".join(letters[i] for i in order[:period])
        reps, rest = divmod(n, period)
        seq = f"{reps} x [{unit}]" if reps > 1 else unit
        if reps > 1 and rest:
            seq += " + " + " ".join(letters[i] for i in order[:rest])
        legend = "; ".join(f"{letters[i]} = {k.label}" for i, k in enumerate(self.kinds))
        return f"{seq} ({legend})"

    # -- uniform-model views (what the seed's one-block workshop and the torch checks need) ------
    def header_lines(self) -> tuple[str, ...]:
        """What the loader left out and what it noted, one line each: every command prints these."""
        return tuple(f"left out: {x}" for x in self.omitted) + tuple(f"note: {x}" for x in self.notes)

    def context_note(self, context) -> str | None:
        """A line when ``context`` passes the config's max_position_embeddings, else None."""
        top = float(np.max(context)) if np.size(context) else 0.0
        if self.max_context and top > self.max_context:
            return (f"context {top:,.0f} is past {self.name}'s max_position_embeddings {self.max_context:,}: the numbers "
                    "extrapolate a model that was not trained that long")
        return None

    def only_kind(self, what: str = "this", hint: str = "pick one with --layer N") -> Layer:
        """The one layer kind of a uniform model; a message naming the kinds (and ``hint``, what to do) otherwise."""
        if not self.is_uniform:
            kinds = "; ".join(f"{n} x {k.label}" for k, n in self.kind_counts())
            raise RooflineError(f"{self.name} has {len(self.kinds)} layer kinds ({kinds}); {what} needs one "
                                f"repeated layer: {hint}", field="layer")
        return self.kinds[self.order[0]]

    @property
    def first_attention(self) -> Attention | LatentAttention | None:
        for k in self.kinds:
            if k.is_attention:
                return k.mixer
        return None


# ---------------------------------------------------------------------------------------------
# Attention pairs (query, key) for T new tokens at the end of S positions
# ---------------------------------------------------------------------------------------------


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
