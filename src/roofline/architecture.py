"""A model as a stack of layers: what each layer holds, what it caches, what it costs per token.

A ``Model`` is an embedding, a list of layers and an LM head. Layers that repeat are stored
once: ``kinds`` holds each distinct ``Layer`` and ``order`` gives, layer by layer, the index of its
kind (Gemma 3 27B: 2 kinds, sliding and full, in a 5:1 pattern over 62 layers).

A layer has a token mixer, a channel mixer, or both (mixers.py: Attention, LatentAttention, Mamba2,
Mamba, GatedDeltaNet, ParallelMixer (attention and Mamba-2 side by side: Falcon-H1); MLP, MoE). This module re-exports them, and attention_pairs.attended_pairs, so that
``from roofline.architecture import ...`` names every piece of a model.

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
  constant state per sequence (SSM state + convolution window), whatever the context, and so does
  Gated DeltaNet (its recurrent state + convolution window): it is in the state-space family. A
  parallel mixer (Falcon-H1) keeps both its attention's K and V per token and its SSM's state.
- Attention pairs for T new tokens that are the last T of S positions, causal: the closed forms of
  attention_pairs.py (full attention's T S - T (T - 1) / 2; T S / 2 when T = S).

Dimension letters: D d_model, V vocab, H heads, K kv heads, d head dim, F d_ff, E experts,
N SSM state size, G SSM groups, W window, C chunk.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from roofline.attention_pairs import attended_pairs
from roofline.errors import RooflineError, check_counts, check_counts_or_zero
from roofline.mixers import (
    ATTENTION_MIXERS,
    MLP,
    SSM_MIXERS,
    Attention,
    ChannelMixer,
    GatedDeltaNet,
    LatentAttention,
    Mamba,
    Mamba2,
    Mixer,
    MoE,
    ParallelMixer,
    token_mixers,
)

NORMS = ("rmsnorm", "layernorm")


def _norm_params(kind: str, width: int) -> int:
    """RMSNorm has a scale (width); LayerNorm a scale and a bias (2 width)."""
    return 2 * width if kind == "layernorm" else width


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
    def tp_all_reduces(self) -> int:
        """All-reduces of this layer under tensor parallelism (Megatron-LM): one after each mixer's
        row-parallel output projection, one for a parallel block (attention and MLP summed first); a
        parallel mixer's attention and SSM reduce apart, two (vLLM's FalconH1 o_proj and out_proj)."""
        return 1 if self.parallel else len(token_mixers(self.mixer)) + (self.mlp is not None)

    @property
    def mixers(self) -> tuple:
        """The single token mixers this layer runs: a parallel mixer's attention and SSM, else its
        one mixer (none without one)."""
        return token_mixers(self.mixer)

    @property
    def is_parallel_hybrid(self) -> bool:
        """Attention and an SSM side by side on one input (Falcon-H1): neither is_attention nor is_ssm."""
        return isinstance(self.mixer, ParallelMixer)

    @functools.cached_property
    def attends(self) -> bool:
        """Some attention runs in this layer (alone or beside an SSM); kept once asked (the planner asks per pass)."""
        return any(isinstance(m, ATTENTION_MIXERS) for m in self.mixers)

    @property
    def keeps_state(self) -> bool:
        """Some state-space mixer runs in this layer (alone or beside attention)."""
        return any(isinstance(m, SSM_MIXERS) for m in self.mixers)

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
        weight matrices, and the latent projections around them where the MoE has them), expert_biases
        (their biases, gpt-oss), shared_experts, router, norms."""
        out = dict.fromkeys(("attention", "ssm", "mlp", "experts", "expert_biases", "shared_experts", "router", "norms"), 0)
        for m in self.mixers:
            out["ssm" if isinstance(m, SSM_MIXERS) else "attention"] = m.params(d_model)
        if isinstance(self.mlp, MoE):
            width = self.mlp.expert_width(d_model)  # the latent R where the experts work at one
            matrices = MLP(self.mlp.d_ff, self.mlp.gated).params(width)
            out["experts"] = self.mlp.n_experts * matrices + self.mlp.latent_params(d_model)
            out["expert_biases"] = self.mlp.n_experts * (self.mlp.expert.params(width) - matrices)
            out["shared_experts"] = self.mlp.shared_params(d_model)
            out["router"] = self.mlp.router_params(d_model)
        elif self.mlp is not None:
            out["mlp"] = self.mlp.params(d_model)
        out["norms"] = self.n_norms * _norm_params(self.norm, d_model)
        return out

    def cache_elems(self, context) -> object:
        """Elements this layer caches for one sequence of ``context`` tokens (arrays broadcast): a
        parallel mixer's attention K and V and its SSM state together."""
        m = self.mixer
        if m is None:
            return 0.0
        if isinstance(m, ParallelMixer):
            return sum(Layer(part, None).cache_elems(context) for part in m.parts)
        if isinstance(m, SSM_MIXERS):
            return float(m.state_elems()) + 0.0 * np.asarray(context, dtype=float)
        kept = np.minimum(context, m.span) if m.span else context
        return np.asarray(kept, dtype=float) * m.cache_elems_per_token()


@dataclass(frozen=True)
class WeightStorage:
    """How the checkpoint stores weights (from its quantization_config), by part (attention, ssm, mlp, experts, ...):
    (part, format label, bytes per parameter); parts not listed at ``default`` (the checkpoint's dtype)."""

    default: str = "bf16"
    parts: tuple[tuple[str, str, float], ...] = ()
    method: str = ""
    assumed: bool = False  # the config names no torch_dtype: ``default`` is the loader's assumption, not the file's
    kv_cache: str = ""  # the KV-cache dtype the checkpoint calibrates (ModelOpt's kv_cache_quant_algo), "" where none

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
class MtpModule:
    """A multi-token-prediction module (DeepSeek-V3, arXiv:2412.19437 section 2.2; the checkpoint's
    model.layers.61, README_WEIGHTS.md): ``depth`` modules in sequence, each an RMSNorm on the previous
    depth's hidden state (hnorm) and one on the next token's embedding (enorm), their concatenation
    projected by M (2D -> D, eh_proj), one transformer block ``layer`` (the main model's layer kind), and
    the RMSNorm before the output head (shared_head.norm). The embedding and the output head are the
    main model's, shared: not counted here. ``source``: the config key that set ``depth``."""

    layer: Layer
    depth: int = 1
    source: str = "num_nextn_predict_layers"

    def __post_init__(self):
        check_counts("multi-token-prediction module", depth=self.depth)

    def params_per_depth(self, d_model: int) -> int:
        """One module's own parameters: the block's + eh_proj 2 D x D + 3 RMSNorms of D (enorm,
        hnorm, shared_head.norm)."""
        return sum(self.layer.parts(d_model).values()) + 2 * d_model * d_model + 3 * d_model

    def params(self, d_model: int) -> int:
        """Every module's own parameters (depth x params_per_depth; the shared embedding and head out)."""
        return self.depth * self.params_per_depth(d_model)

    def as_model(self, main: "Model") -> "Model":
        """One module as a one-layer model of ``main``'s width and vocabulary: its block, ``main``'s
        embedding and LM head (the same weights, shared) and its RMSNorm before the head as the final
        norm (eh_proj, enorm and hnorm are not in it: plan.step_mtp prices them)."""
        return Model(name=f"{main.name} MTP", d_model=main.d_model, vocab=main.vocab, kinds=(self.layer,), order=(0,),
                     tied_embeddings=main.tied_embeddings, final_norm="rmsnorm", storage=main.storage,
                     model_type=main.model_type, max_context=main.max_context)

    def with_model(self, main: "Model") -> "Model":
        """``main`` with the modules' blocks as layers after its own (what the cache holds when they
        run: each block caches its context as the main model's layers of its kind do)."""
        k = len(main.kinds)
        return dataclasses.replace(main, name=f"{main.name} with MTP", kinds=main.kinds + (self.layer,),
                                   order=main.order + (k,) * self.depth, mtp=None)


LEFT_OUT_PARTS = ("mtp", "vision", "audio")  # what a loader leaves out of a checkpoint's count (LeftOut.part)


@dataclass(frozen=True)
class LeftOut:
    """A part of the checkpoint its loader leaves out of the count: ``part`` which (LEFT_OUT_PARTS:
    a multi-token-prediction module, a vision or an audio tower), ``key`` the config key that
    declares it, ``words`` what a report says of it (after "left out: ")."""

    part: str
    key: str
    words: str

    def __post_init__(self):
        if self.part not in LEFT_OUT_PARTS:
            raise ValueError(f"LeftOut part {self.part!r}: one of {', '.join(LEFT_OUT_PARTS)}")


@dataclass(frozen=True)
class Model:
    """A decoder: embedding (V, D), learned positions (``positions`` x D, 0 for rotary), the
    layers (``kinds[order[i]]`` is layer i), a final norm and an LM head (V, D; tied shares the
    embedding; ``lm_head_bias``). ``omitted`` names what the loader left out of the count (LeftOut:
    a vision tower, a multi-token-prediction module); ``notes`` what it assumed. ``mtp``: the
    multi-token-prediction module the checkpoint ships beside the model (None: none), counted apart
    from the model's total (the published totals leave it out: DeepSeek-V3's 671B)."""

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
    omitted: tuple[LeftOut, ...] = ()
    notes: tuple[str, ...] = ()
    ignored_keys: tuple[str, ...] = ()  # config keys the loader did not understand and ignored (each said in notes)
    key: str = ""
    model_type: str = ""
    max_context: int = 0  # the config's max_position_embeddings (0: not given)
    mtp: MtpModule | None = None

    def __post_init__(self):
        check_counts(self.name, d_model=self.d_model, vocab=self.vocab)
        check_counts_or_zero(self.name, positions=self.positions)
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

    @functools.cached_property
    def size_bounds(self) -> tuple[int, int]:
        """(most query heads of any layer kind, at least 1; the widest op's width: D or the widest d_ff of
        an MLP, an expert or a shared expert): what workload.check_size bounds a workload by, kept once asked."""
        heads = max([getattr(k.mixer, "heads", 0) for k in self.kinds] + [1])
        widest = max([self.d_model] + [max(getattr(k.mlp, "d_ff", 0), getattr(k.mlp, "shared_d_ff", 0)) for k in self.kinds])
        return heads, widest

    @property
    def is_uniform(self) -> bool:
        return len(set(self.order)) == 1

    @property
    def is_moe(self) -> bool:
        return any(k.is_moe for k in self.kinds)

    @property
    def has_attention(self) -> bool:
        return any(k.attends for k in self.kinds)  # a parallel hybrid's attention too

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
        return tuple(f"left out: {x.words}" for x in self.omitted) + tuple(f"note: {x}" for x in self.notes)

    def leaves_out(self, part: str) -> bool:
        """Whether the loader left a part of the checkpoint (LEFT_OUT_PARTS) out of the count."""
        return any(x.part == part for x in self.omitted)

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
            for m in k.mixers:
                if isinstance(m, ATTENTION_MIXERS):
                    return m
        return None


__all__ = [
    "NORMS", "Layer", "WeightStorage", "Model", "MtpModule", "LeftOut", "LEFT_OUT_PARTS",
    "Attention", "LatentAttention", "Mamba2", "Mamba", "GatedDeltaNet", "ParallelMixer", "Mixer", "SSM_MIXERS", "ATTENTION_MIXERS", "MLP", "MoE", "ChannelMixer",
    "attended_pairs",
]
