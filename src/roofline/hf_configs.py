"""Hugging Face ``config.json`` files to Models, one loader per ``model_type``.

Each loader maps the keys its family's transformers config class defines, with that class's
default where a key is absent, and says what it did not use:

- a key the loader does not know is named in ``Model.notes`` ("not understood: ignored"), never
  silently dropped; keys that change no parameter, cache or FLOP count (epsilons, rotary bases,
  token ids, dropouts, initialisers) are listed as cost-neutral and pass without a word;
- an unknown ``model_type`` is refused with the list of supported ones, never read as a Llama;
- a nested ``text_config`` (Gemma 3, Llama 4) is read, and the vision tower it sits beside is
  named in ``Model.omitted``;
- ``quantization_config`` sets the stored width of the modules the format quantises
  (WeightStorage); a quantisation method it does not know is refused by name.

Defaults are those of transformers' configuration_<family>.py (v4.5x-5.x) and the modules of
modeling_<family>.py; each loader's docstring says which.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

from roofline.architecture import (
    MLP,
    Attention,
    LatentAttention,
    Layer,
    Mamba,
    Mamba2,
    Model,
    MoE,
    WeightStorage,
)
from roofline.errors import RooflineError

# keys that change no count the tool makes (numerics, positions' frequencies, ids, training knobs)
COST_NEUTRAL = frozenset("""
architectures model_type transformers_version torch_dtype dtype _name_or_path auto_map bos_token_id eos_token_id
pad_token_id sep_token_id decoder_start_token_id initializer_range initializer_factor rms_norm_eps layer_norm_eps
layer_norm_epsilon norm_epsilon rope_theta rope_scaling rope_parameters rope_local_base_freq rope_type
max_position_embeddings use_cache attention_dropout hidden_dropout embd_pdrop resid_pdrop attn_pdrop summary_type
summary_use_proj summary_activation summary_proj_to_labels summary_first_dropout scale_attn_weights
reorder_and_upcast_attn scale_attn_by_inverse_layer_idx output_router_logits router_aux_loss_coef router_jitter_noise
pretraining_tp tokenizer_class task_specific_params is_encoder_decoder return_dict output_hidden_states
output_attentions id2label label2id problem_type finetuning_task torchscript tie_encoder_decoder
use_bfloat16 bad_words_ids prefix chunk_size_feed_forward use_return_dict classifier_dropout rotary_emb_base
rotary_pct partial_rotary_factor rotary_dim query_pre_attn_scalar attn_logit_softcapping final_logit_softcapping
hidden_activation hidden_act activation_function cache_implementation pad_vocab_size_multiple norm_topk_prob
routed_scaling_factor scoring_func topk_method n_group topk_group aux_loss_alpha seq_aux ep_size rope_interleave
router_temperature swiglu_limit use_qk_norm_eps attn_temperature_tuning floor_scale attn_scale time_step_min
time_step_max time_step_floor time_step_limit time_step_rank rescale_prenorm_residual residual_in_fp32
use_mamba_kernels mamba_chunk_size chunk_size num_logits_to_keep boi_token_index eoi_token_index image_token_index
mm_tokens_per_image image_token_id boa_token_id audio_token_id video_token_id initializer_cutoff_factor
initial_context_length swiglu_alpha for_llm_compressor attn_logit_softcapping mlp_only_layers_ids original_max_position_embeddings
""".split())

SUPPORTED: dict[str, Callable] = {}
MAX_DIM = 10**8  # a width, count or vocabulary beyond this is a typo
MAX_LAYERS = 10_000  # published models have at most a few hundred


def loader(*model_types: str):
    def deco(fn):
        for t in model_types:
            if t in SUPPORTED:
                raise RuntimeError(f"model_type {t!r} registered twice")
            SUPPORTED[t] = fn
        return fn

    return deco


class _Keys:
    """A config dict that records which keys a loader read, so the rest can be reported."""

    def __init__(self, raw: dict, name: str):
        self.raw, self.name, self.read = raw, name, set()
        self.defaults: dict = {}  # the config class's defaults for keys a published file may omit

    def get(self, key, default=None):
        self.read.add(key)
        value = self.raw.get(key)
        if value is None:
            value = self.defaults.get(key)
        return default if value is None else value

    def has(self, key) -> bool:
        self.read.add(key)
        return self.raw.get(key) is not None

    def need(self, key):
        value = self.get(key)
        if value is None:
            raise RooflineError(f"{self.name}: config.json lacks {key!r} (model_type {self.raw.get('model_type')!r})",
                                field="model")
        return value

    def int(self, key, default=None) -> int:
        v = self.need(key) if default is None else self.get(key, default)
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) or v < 0
                or v > MAX_DIM):
            raise RooflineError(f"{self.name}: config key {key} must be a whole number from 0 to {MAX_DIM:,}, got {v!r}",
                                field="model")
        return int(v)

    def flag(self, key, default: bool) -> bool:
        """A true/false key: JSON true or false only ("yes" or 1 is refused, not guessed)."""
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise RooflineError(f"{self.name}: config key {key} must be true or false, got {v!r}", field="model")
        return v

    def pos(self, key, default=None) -> int:
        """A size that must be at least 1 (hidden_size, heads, layers, vocab)."""
        v = self.int(key, default)
        if v < 1:
            raise RooflineError(f"{self.name}: config key {key} must be at least 1, got {v}", field="model")
        return v

    def not_understood(self) -> list[str]:
        return sorted(k for k in self.raw if k not in self.read and k not in COST_NEUTRAL and not k.startswith("_"))


# ---------------------------------------------------------------------------------------------
# shared pieces
# ---------------------------------------------------------------------------------------------


def _act(c: _Keys, default="silu") -> str:
    return str(c.get("hidden_activation") or c.get("hidden_act", default))


def _gqa(c: _Keys, D: int, heads: int) -> tuple[int, int]:
    kv = c.int("num_key_value_heads", heads)
    head_dim = c.get("head_dim")
    if head_dim is None:
        if D % heads:
            raise RooflineError(f"{c.name}: hidden_size {D} is not divisible by num_attention_heads {heads} and "
                                "head_dim is absent", field="model")
        head_dim = D // heads
    return kv, int(head_dim)


def _layer_types(c: _Keys, n: int, default: Callable[[int], str]) -> list[str]:
    """``layer_types`` as published, or the class default per layer index."""
    types = c.get("layer_types")
    if types is None:
        return [default(i) for i in range(n)]
    if not isinstance(types, list) or len(types) != n:
        raise RooflineError(f"{c.name}: layer_types must list {n} layers", field="model")
    known = {"full_attention", "sliding_attention", "chunked_attention"}
    bad = sorted(set(types) - known)
    if bad:
        raise RooflineError(f"{c.name}: layer_types {bad} not understood (known: {', '.join(sorted(known))})",
                            field="model")
    return list(types)


def _assemble(c: _Keys, layers: list[Layer], D: int, V: int, tied: bool, **extra) -> Model:
    if len(layers) > MAX_LAYERS:
        raise RooflineError(f"{c.name}: {len(layers):,} layers; at most {MAX_LAYERS:,} are read", field="model")
    kinds: list[Layer] = []
    order = []
    for layer in layers:
        if layer not in kinds:
            kinds.append(layer)
        order.append(kinds.index(layer))
    notes = list(extra.pop("notes", ()))
    for k in c.not_understood():
        notes.append(f"config key {k!r} not understood: ignored")
    return Model(name=c.name, d_model=D, vocab=V, kinds=tuple(kinds), order=tuple(order), tied_embeddings=tied,
                 notes=tuple(notes), model_type=str(c.raw.get("model_type", "")), **extra)


def _windowed(types: list[str], i: int, window: int, chunk: int = 0) -> tuple[int, int]:
    t = types[i]
    if t == "sliding_attention":
        return window, 0
    if t == "chunked_attention":
        return 0, chunk
    return 0, 0


# ---------------------------------------------------------------------------------------------
# Llama-like families
# ---------------------------------------------------------------------------------------------


def _llama_like(c: _Keys, *, tie_default=False, qkv_bias=None, out_bias=None, qk_norm="", sliding_default=None,
                n_norms=-1, types_default=None, moe: Callable[[int], MoE | None] | None = None,
                dense_ff: int | None = None, head_dim_default=None, gated=True, windowed=True, vocab_default=None) -> Model:
    D = c.pos("hidden_size")
    L = c.pos("num_hidden_layers")
    H = c.pos("num_attention_heads")
    V = c.int("vocab_size", vocab_default)
    if head_dim_default is not None and not c.has("head_dim"):
        kv, d = c.int("num_key_value_heads", H), head_dim_default
    else:
        kv, d = _gqa(c, D, H)
    bias = bool(c.get("attention_bias", False))
    qkv_bias = bias if qkv_bias is None else qkv_bias
    out_bias = bias if out_bias is None else out_bias
    window = (c.get("sliding_window", sliding_default) or 0) if windowed else 0
    types = _layer_types(c, L, types_default or (lambda i: "sliding_attention" if window else "full_attention"))
    F = dense_ff if dense_ff is not None else c.pos("intermediate_size")
    mlp_bias = bool(c.get("mlp_bias", False))
    act = _act(c)
    layers, built = [], {}
    dense = MLP(F, gated, mlp_bias, act)
    for i in range(L):
        w, ch = _windowed(types, i, int(window))
        if types[i] == "sliding_attention" and not w:
            raise RooflineError(f"{c.name}: layer {i} is sliding_attention but sliding_window is absent", field="model")
        ff = moe(i) if moe else None
        key = (w, ch, ff)
        if key not in built:  # one object per distinct kind
            attn = Attention(H, kv, d, window=w, chunk=ch, qkv_bias=qkv_bias, out_bias=out_bias, qk_norm=qk_norm)
            built[key] = Layer(attn, ff or dense, n_norms=n_norms)
        layers.append(built[key])
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", tie_default))


@loader("llama")
def _llama(c: _Keys) -> Model:
    """LlamaConfig: tie_word_embeddings False; attention_bias (q, k, v, o) and mlp_bias False;
    head_dim = hidden_size / heads; no sliding window (LlamaAttention reads none: a sliding_window
    key is reported as not understood)."""
    return _llama_like(c, windowed=False)


@loader("mistral")
def _mistral(c: _Keys) -> Model:
    """MistralConfig: as Llama, with sliding_window (default 4096; null = full attention) on every layer."""
    return _llama_like(c, sliding_default=4096 if "sliding_window" not in c.raw else None)


@loader("mixtral")
def _mixtral(c: _Keys) -> Model:
    """MixtralConfig: num_local_experts (8), num_experts_per_tok (2), expert d_ff intermediate_size,
    router (D, E) without bias; sliding_window default None."""
    E, k, F = c.int("num_local_experts", 8), c.int("num_experts_per_tok", 2), c.pos("intermediate_size")
    moe = MoE(E, k, F)
    return _llama_like(c, moe=lambda i: moe)


def _qwen_types(c: _Keys, L: int):
    """Qwen2/3: sliding layers only when use_sliding_window, from max_window_layers on."""
    use = bool(c.get("use_sliding_window", False))
    first = c.int("max_window_layers", L)
    return lambda i: "sliding_attention" if use and i >= first else "full_attention"


@loader("qwen2")
def _qwen2(c: _Keys) -> Model:
    """Qwen2Config: biases on q, k, v (not o); tie_word_embeddings False; sliding only with use_sliding_window."""
    L = c.pos("num_hidden_layers")
    c.get("sliding_window")  # read either way: it applies only with use_sliding_window
    return _llama_like(c, qkv_bias=True, out_bias=False, types_default=_qwen_types(c, L),
                       windowed=bool(c.get("use_sliding_window", False)))


def _qwen_moe_layers(c: _Keys, L: int, shared: bool) -> Callable[[int], MoE | None]:
    E = c.pos("num_experts")
    k = c.pos("num_experts_per_tok")
    F = c.pos("moe_intermediate_size")
    step = c.int("decoder_sparse_step", 1)
    dense = set(c.get("mlp_only_layers", []) or [])
    shared_ff = c.int("shared_expert_intermediate_size") if shared else 0
    moe = MoE(E, k, F, shared_d_ff=shared_ff, shared_gate=shared) if E else None

    def at(i):
        if i in dense or not E or (i + 1) % step:
            return None
        return moe

    return at


@loader("qwen2_moe")
def _qwen2_moe(c: _Keys) -> Model:
    """Qwen2MoeConfig: q, k, v biases; MoE on layers (i + 1) % decoder_sparse_step == 0 not in
    mlp_only_layers, each with a shared expert (shared_expert_intermediate_size) and its sigmoid
    gate (D, 1); dense layers use intermediate_size."""
    L = c.pos("num_hidden_layers")
    return _llama_like(c, qkv_bias=True, out_bias=False, types_default=_qwen_types(c, L),
                       moe=_qwen_moe_layers(c, L, shared=True))


@loader("qwen3")
def _qwen3(c: _Keys) -> Model:
    """Qwen3Config: q_norm and k_norm (RMSNorm of head_dim); attention_bias False; head_dim given (default 128)."""
    L = c.pos("num_hidden_layers")
    return _llama_like(c, qk_norm="rmsnorm", types_default=_qwen_types(c, L), head_dim_default=128)


@loader("qwen3_moe")
def _qwen3_moe(c: _Keys) -> Model:
    """Qwen3MoeConfig: Qwen3 attention; MoE as Qwen2-MoE without shared experts."""
    L = c.pos("num_hidden_layers")
    return _llama_like(c, qk_norm="rmsnorm", types_default=_qwen_types(c, L), head_dim_default=128,
                       moe=_qwen_moe_layers(c, L, shared=False))


# ---------------------------------------------------------------------------------------------
# Gemma
# ---------------------------------------------------------------------------------------------


@loader("gemma")
def _gemma(c: _Keys) -> Model:
    """GemmaConfig: head_dim 256, tie_word_embeddings True, gated GELU MLP, no biases."""
    return _llama_like(c, tie_default=True, head_dim_default=256)


@loader("gemma2")
def _gemma2(c: _Keys) -> Model:
    """Gemma2Config: tie True; head_dim 256; sliding_window 4096 on even layers (layer_types
    default: sliding when (i + 1) % 2); 4 RMSNorms per layer (input, post-attention,
    pre-feedforward, post-feedforward)."""
    window = c.int("sliding_window", 4096)
    if c.has("sliding_window_size") and int(c.raw["sliding_window_size"]) != window:  # an older alias
        raise RooflineError(f"{c.name}: sliding_window {window} and sliding_window_size {c.raw['sliding_window_size']} "
                            "disagree", field="model")
    return _llama_like(c, tie_default=True, n_norms=4, head_dim_default=256, sliding_default=window,
                       types_default=lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention")


@loader("gemma3_text")
def _gemma3_text(c: _Keys) -> Model:
    """Gemma3TextConfig: tie True; head_dim 256; q_norm and k_norm; 4 norms per layer;
    sliding_window 4096, on all layers but every sliding_window_pattern-th (default 6);
    the class's sizes where a text_config omits them (vocab_size 262208, absent from Gemma 3 27B's;
    heads 8, kv heads 4, head_dim 256, absent from Gemma 3 4B's)."""
    c.defaults = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                  "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072}
    window = c.int("sliding_window", 4096)
    pattern = c.pos("sliding_window_pattern", 6)
    return _llama_like(c, tie_default=True, n_norms=4, qk_norm="rmsnorm", head_dim_default=256, vocab_default=262208,
                       sliding_default=window, types_default=lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention")


# ---------------------------------------------------------------------------------------------
# Llama 4, DeepSeek, gpt-oss
# ---------------------------------------------------------------------------------------------


@loader("llama4_text")
def _llama4_text(c: _Keys) -> Model:
    """Llama4TextConfig: MoE every interleave_moe_layer_step-th layer (layer i is MoE when
    (i + 1) % step == 0, or as listed in moe_layers): num_local_experts routed experts of
    intermediate_size, top num_experts_per_tok (1), plus a shared expert of intermediate_size;
    other layers are dense MLPs of intermediate_size_mlp. Layers with rotary positions
    (no_rope_layers[i] = 1; default every layer but each 4th) use chunked attention of
    attention_chunk_size (8192) and an L2 q/k norm (use_qk_norm, no weights); the others are full
    (NoPE) attention. tie False."""
    L = c.pos("num_hidden_layers")
    E, k, F = c.int("num_local_experts", 16), c.int("num_experts_per_tok", 1), c.pos("intermediate_size")
    F_dense = c.int("intermediate_size_mlp", F)
    step = c.int("interleave_moe_layer_step", 1)
    moe_layers = c.get("moe_layers")
    moe_set = set(moe_layers) if moe_layers is not None else {i for i in range(L) if (i + 1) % step == 0}
    rope = c.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(L)]
    chunk = c.int("attention_chunk_size", 8192)
    qk = "l2" if c.get("use_qk_norm", True) else ""
    D, H, V = c.pos("hidden_size"), c.pos("num_attention_heads"), c.pos("vocab_size")
    kv, d = _gqa(c, D, H)
    bias = bool(c.get("attention_bias", False))
    layers = []
    for i in range(L):
        attn = Attention(H, kv, d, chunk=chunk if rope[i] else 0, qkv_bias=bias, out_bias=bias, qk_norm=qk if rope[i] else "")
        ff = MoE(E, k, F, shared_d_ff=F) if i in moe_set else MLP(F_dense)
        layers.append(Layer(attn, ff))
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))


@loader("deepseek_v3", "deepseek_v2", "kimi_k2")
def _deepseek(c: _Keys) -> Model:
    """DeepseekV3Config (also Kimi K2, which reuses it): multi-head latent attention (q_lora_rank,
    kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim); the first first_k_dense_replace
    layers dense (intermediate_size), then MoE every moe_layer_freq-th: n_routed_experts of
    moe_intermediate_size, top num_experts_per_tok, n_shared_experts x moe_intermediate_size shared,
    a router (D, E) (V3's e_score_correction_bias is a buffer, not counted). tie False. The multi-token-prediction
    module (num_nextn_predict_layers) is not instantiated by transformers and is left out."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    mla = LatentAttention(H, c.pos("kv_lora_rank"), c.pos("qk_nope_head_dim"), c.pos("qk_rope_head_dim"),
                          c.pos("v_head_dim"), c.int("q_lora_rank", 0))
    if c.get("attention_bias", False):
        raise RooflineError(f"{c.name}: attention_bias true in an MLA model is not supported", field="model")
    c.get("num_key_value_heads")  # MLA has no kv heads of its own; the key is a leftover
    E, k, F = c.pos("n_routed_experts"), c.pos("num_experts_per_tok"), c.pos("moe_intermediate_size")
    shared = c.int("n_shared_experts", 0) * F
    first_dense, freq = c.int("first_k_dense_replace", 0), c.int("moe_layer_freq", 1)
    dense = MLP(c.pos("intermediate_size"))
    layers = [Layer(mla, MoE(E, k, F, shared_d_ff=shared)
                    if (i >= first_dense and i % freq == 0) else dense) for i in range(L)]
    omitted = ()
    if c.int("num_nextn_predict_layers", 0):
        omitted = (f"multi-token-prediction module ({c.raw['num_nextn_predict_layers']} layer): not instantiated by "
                   "transformers, not counted",)
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", False), omitted=omitted)


@loader("gpt_oss")
def _gpt_oss(c: _Keys) -> Model:
    """GptOssConfig: attention with biases on q, k, v, o and a learned sink per head; layer_types
    alternate sliding_window (128) and full attention (default: sliding on even layers); MoE on
    every layer: num_local_experts experts of intermediate_size with biases (gate_up 2F, down D),
    top num_experts_per_tok (experts_per_token), router (D, E) with bias. tie False."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    kv, d = c.int("num_key_value_heads"), c.int("head_dim", 64)
    window = c.int("sliding_window", 128)
    types = _layer_types(c, L, lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")
    E = c.pos("num_local_experts")
    k = c.pos("num_experts_per_tok") if c.has("num_experts_per_tok") else c.int("experts_per_token", 4)
    if c.has("experts_per_token") and c.int("experts_per_token") != k:
        raise RooflineError(f"{c.name}: experts_per_token {c.raw['experts_per_token']} and num_experts_per_tok {k} disagree",
                            field="model")
    bias = bool(c.get("attention_bias", True))
    moe = MoE(E, k, c.pos("intermediate_size"), bias=True, router_bias=True)
    layers = [Layer(Attention(H, kv, d, window=_windowed(types, i, window)[0], qkv_bias=bias, out_bias=bias, sinks=True), moe)
              for i in range(L)]
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))


# ---------------------------------------------------------------------------------------------
# Phi, GPT-2, GPT-NeoX
# ---------------------------------------------------------------------------------------------


@loader("phi")
def _phi(c: _Keys) -> Model:
    """PhiConfig (Phi-1/1.5/2): parallel attention and MLP off one LayerNorm; biases on q, k, v and
    dense; plain MLP fc1/fc2 with biases (gelu_new); a final LayerNorm; an LM head with a bias;
    qk_layernorm (default False) adds LayerNorms of head_dim on q and k. tie False."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    kv, d = _gqa(c, D, H)
    if c.get("qk_layernorm", False):
        raise RooflineError(f"{c.name}: qk_layernorm true (LayerNorm on q and k) is not supported", field="model")
    layer = Layer(Attention(H, kv, d, qkv_bias=True, out_bias=True), MLP(c.pos("intermediate_size"), False, True, _act(c, "gelu_new")),
                  norm="layernorm", parallel=True)
    return _assemble(c, [layer] * L, D, V, c.flag("tie_word_embeddings", False), final_norm="layernorm",
                     lm_head_bias=True)


@loader("phi3")
def _phi3(c: _Keys) -> Model:
    """Phi3Config (Phi-3, Phi-4): fused qkv_proj and gate_up_proj without biases, 2 RMSNorms,
    sliding_window on every layer when set (null: full). tie False."""
    return _llama_like(c)


@loader("gpt2")
def _gpt2(c: _Keys) -> Model:
    """GPT2Config: learned positions (n_positions), LayerNorm, biases everywhere, plain GELU MLP of
    n_inner (default 4 n_embd), tie_word_embeddings True."""
    D, L, H, V = c.pos("n_embd"), c.pos("n_layer"), c.pos("n_head"), c.pos("vocab_size")
    F = c.get("n_inner") or 4 * D
    layer = Layer(Attention(H, H, D // H, qkv_bias=True, out_bias=True), MLP(int(F), False, True, "gelu"), norm="layernorm")
    return _assemble(c, [layer] * L, D, V, c.flag("tie_word_embeddings", True), final_norm="layernorm",
                     positions=c.int("n_positions", 1024))


@loader("gpt_neox")
def _gpt_neox(c: _Keys) -> Model:
    """GPTNeoXConfig (Pythia): fused query_key_value and dense with biases (attention_bias True),
    plain GELU MLP with biases, two LayerNorms per layer, parallel residual by default
    (use_parallel_residual True), a final LayerNorm, an untied embed_out (tie False)."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    bias = bool(c.get("attention_bias", True))
    layer = Layer(Attention(H, H, D // H, qkv_bias=bias, out_bias=bias), MLP(c.pos("intermediate_size"), False, True, "gelu"),
                  norm="layernorm", n_norms=2, parallel=bool(c.get("use_parallel_residual", True)))
    return _assemble(c, [layer] * L, D, V, c.flag("tie_word_embeddings", False), final_norm="layernorm")


# ---------------------------------------------------------------------------------------------
# State-space and hybrid
# ---------------------------------------------------------------------------------------------


@loader("mamba2")
def _mamba2(c: _Keys) -> Model:
    """Mamba2Config: every layer one Mamba-2 mixer after one RMSNorm; d_inner = expand x
    hidden_size (= num_heads x head_dim); use_bias False, use_conv_bias True; a final norm_f;
    tie_word_embeddings False in the class (True in mamba_ssm checkpoints, which set it)."""
    D, L, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("vocab_size")
    heads, hd = c.pos("num_heads"), c.int("head_dim", 64)
    inner = c.int("expand", 2) * D
    if heads * hd != inner:
        raise RooflineError(f"{c.name}: num_heads x head_dim = {heads * hd} differs from expand x hidden_size = {inner}",
                            field="model")
    mixer = Mamba2(inner, c.int("state_size", 128), c.int("n_groups", 1), heads, c.int("conv_kernel", 4),
                   bool(c.get("use_conv_bias", True)), bool(c.get("use_bias", False)))
    return _assemble(c, [Layer(mixer, None)] * L, D, V, c.flag("tie_word_embeddings", False))


@loader("mamba_ssm")
def _mamba_ssm(c: _Keys) -> Model:
    """state-spaces' mamba_ssm config (no model_type; d_model, n_layer, ssm_cfg): Mamba-2 layers
    (ssm_cfg layer "Mamba2": d_state 128, headdim 64, ngroups 1, expand 2, d_conv 4, conv_bias True,
    bias False) with one RMSNorm each, vocab padded up to pad_vocab_size_multiple (16), tied
    embeddings (default True). Only Mamba-2 layers without attention (attn_layer_idx empty) and
    d_intermediate 0 are read."""
    D, L = c.pos("d_model"), c.pos("n_layer")
    mult = c.int("pad_vocab_size_multiple", 16) or 1
    V = int(math.ceil(c.pos("vocab_size") / mult) * mult)
    ssm = dict(c.get("ssm_cfg", {}) or {})
    if ssm.get("layer", "Mamba1") != "Mamba2":
        raise RooflineError(f"{c.name}: mamba_ssm config with layer {ssm.get('layer', 'Mamba1')!r}; only Mamba2 is supported",
                            field="model")
    if c.get("attn_layer_idx") or c.get("d_intermediate", 0):
        raise RooflineError(f"{c.name}: mamba_ssm hybrids (attn_layer_idx, d_intermediate) are not supported", field="model")
    c.get("attn_cfg"), c.get("rms_norm"), c.get("fused_add_norm"), c.get("residual_in_fp32")
    known = {"layer", "d_state", "headdim", "ngroups", "expand", "d_conv", "conv_bias", "bias"}
    inner = int(ssm.get("expand", 2)) * D
    hd = int(ssm.get("headdim", 64))
    mixer = Mamba2(inner, int(ssm.get("d_state", 128)), int(ssm.get("ngroups", 1)), inner // hd, int(ssm.get("d_conv", 4)),
                   bool(ssm.get("conv_bias", True)), bool(ssm.get("bias", False)))
    notes = [f"ssm_cfg key {k!r} not understood: ignored" for k in sorted(set(ssm) - known)]
    return _assemble(c, [Layer(mixer, None)] * L, D, V, bool(c.get("tie_embeddings", True)), notes=notes)


@loader("jamba")
def _jamba(c: _Keys) -> Model:
    """JambaConfig: attention on layers i % attn_layer_period == attn_layer_offset (8, 4), Mamba
    (v1) elsewhere (mamba_d_state 16, mamba_d_conv 4, mamba_expand 2, mamba_dt_rank "auto" =
    ceil(D / 16), mamba_conv_bias True, mamba_proj_bias False, dt/B/C RMSNorms); MoE on layers
    i % expert_layer_period == expert_layer_offset (2, 1) with num_experts (16) of
    intermediate_size, top num_experts_per_tok (2); dense MLPs elsewhere; 2 RMSNorms per layer;
    attention without biases or rotary positions; vocab_size 65536 and tie True in the class."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.int("vocab_size", 65536)
    kv, d = _gqa(c, D, H)
    c.get("sliding_window")  # JambaAttention has none; null in published configs
    ap, ao = c.int("attn_layer_period", 8), c.int("attn_layer_offset", 4)
    ep, eo = c.int("expert_layer_period", 2), c.int("expert_layer_offset", 1)
    F = c.pos("intermediate_size")
    E, k = c.int("num_experts", 16), c.int("num_experts_per_tok", 2)
    rank = c.get("mamba_dt_rank", "auto")
    rank = math.ceil(D / 16) if rank == "auto" else int(rank)
    mamba = Mamba(c.int("mamba_expand", 2) * D, c.int("mamba_d_state", 16), rank, c.int("mamba_d_conv", 4),
                  bool(c.get("mamba_conv_bias", True)), bool(c.get("mamba_proj_bias", False)), inner_norms=True)
    attn = Attention(H, kv, d)
    layers = [Layer(attn if i % ap == ao else mamba, MoE(E, k, F) if (E > 1 and i % ep == eo) else MLP(F))
              for i in range(L)]
    return _assemble(c, layers, D, V, c.flag("tie_word_embeddings", True))


@loader("nemotron_h")
def _nemotron_h(c: _Keys) -> Model:
    """NemotronHConfig: hybrid_override_pattern, one character a layer: M a Mamba-2 mixer
    (mamba_num_heads x mamba_head_dim inner, ssm_state_size, n_groups, conv_kernel, use_conv_bias,
    mamba_proj_bias), * attention (num_attention_heads, num_key_value_heads, head_dim, attention_bias),
    - a plain MLP (intermediate_size, relu2, mlp_bias); each layer one RMSNorm; a final norm_f. tie False."""
    D, V = c.pos("hidden_size"), c.pos("vocab_size")
    pattern = str(c.need("hybrid_override_pattern"))
    L = c.int("num_hidden_layers", len(pattern))
    if len(pattern) != L:
        raise RooflineError(f"{c.name}: hybrid_override_pattern has {len(pattern)} layers, num_hidden_layers {L}", field="model")
    bad = sorted(set(pattern) - set("M*-"))
    if bad:
        raise RooflineError(f"{c.name}: hybrid_override_pattern layer codes {bad} not supported (known: M mamba2, "
                            "* attention, - MLP)", field="model")
    H = c.pos("num_attention_heads")
    kv = c.int("num_key_value_heads", H)
    d = c.int("head_dim", 0) or c.int("attention_head_dim", D // H)
    bias = bool(c.get("attention_bias", False))
    heads, hd = c.pos("mamba_num_heads"), c.pos("mamba_head_dim")
    mamba = Mamba2(heads * hd, c.pos("ssm_state_size"), c.int("n_groups", 8), heads, c.int("conv_kernel", 4),
                   bool(c.get("use_conv_bias", True)), bool(c.get("mamba_proj_bias", c.get("use_bias", False))))
    c.get("expand"), c.get("mamba_hidden_act"), c.get("use_bias"), c.get("mlp_hidden_act")
    mlp = MLP(c.pos("intermediate_size"), gated=False, bias=bool(c.get("mlp_bias", False)), activation="relu2")
    kinds = {"M": Layer(mamba, None), "*": Layer(Attention(H, kv, d, qkv_bias=bias, out_bias=bias), None), "-": Layer(None, mlp)}
    return _assemble(c, [kinds[ch] for ch in pattern], D, V, c.flag("tie_word_embeddings", False))


# ---------------------------------------------------------------------------------------------
# Nesting and quantisation
# ---------------------------------------------------------------------------------------------

NESTED = {"gemma3": "gemma3_text", "llama4": "llama4_text"}
QUANTISED_PARTS = ("attention", "ssm", "mlp", "experts", "shared_experts")


_PART_PATTERNS = (("shared_expert", "shared_experts"), ("experts", "experts"), ("router", "router"),
                  ("mlp.gate", "router"), ("self_attn", "attention"), ("attn", "attention"), ("mixer", "ssm"),
                  ("mamba", "ssm"), ("embed", "embedding"), ("lm_head", "lm_head"), ("mlp", "mlp"))


def _skipped_parts(skip: list[str], name: str) -> set[str]:
    """The parameter parts a modules_to_not_convert / ignored_layers list names; a pattern that
    names none is refused rather than guessed."""
    parts = set()
    for pattern in skip:
        hit = next((part for key, part in _PART_PATTERNS
                    if (pattern.endswith(key) if key == "mlp.gate" else key in pattern)), None)
        if hit is None:
            raise RooflineError(f"{name}: quantization_config skips {pattern!r}, which names no module this tool "
                                "prices apart (attention, mlp, experts, shared experts, ssm, router, embedding, "
                                "lm_head)", field="model")
        if hit == "mlp" and "expert" not in pattern:
            parts |= {"mlp", "experts", "shared_experts"} if pattern.rstrip(".*").endswith("mlp") else {"mlp"}
        else:
            parts.add(hit)
    return parts


def _positive_number(q: dict, key: str, default, name: str, whole: bool = True):
    v = q.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0 or (whole and v != int(v)):
        raise RooflineError(f"{name}: quantization_config {key} must be a positive whole number, got {v!r}", field="model")
    return int(v) if whole else float(v)


def _storage(q: dict, name: str, default: str) -> tuple[WeightStorage, list[str]]:
    """WeightStorage from a quantization_config, and notes on what it assumed."""
    if not isinstance(q, dict):
        raise RooflineError(f"{name}: quantization_config must be an object", field="model")
    method = str(q.get("quant_method", "")).lower()
    skip_list = q.get("modules_to_not_convert") or q.get("ignored_layers") or []
    if not isinstance(skip_list, list):
        raise RooflineError(f"{name}: quantization_config modules_to_not_convert must be a list", field="model")
    skip = [str(m) for m in skip_list]
    if method == "mxfp4":
        # OCP MX: 32 FP4 (E2M1) values share one 8-bit E8M0 scale: (32 x 4 + 8) / 32 = 4.25 bits
        if "experts" in _skipped_parts(skip, name):
            raise RooflineError(f"{name}: mxfp4 with the experts in modules_to_not_convert is not understood", field="model")
        parts = (("experts", "mxfp4 (4.25 bits: 4-bit values, one 8-bit scale per 32)", 4.25 / 8),)
        return WeightStorage(default, parts, "mxfp4"), ["mxfp4: the routed experts' weight matrices are stored in "
                                                        "MXFP4; attention, router, embedding, LM head and biases at "
                                                        f"{default} (transformers' Mxfp4 quantizer converts experts only)"]
    if method == "fp8":
        block = q.get("weight_block_size")
        if block:
            if not isinstance(block, list) or len(block) != 2:
                raise RooflineError(f"{name}: quantization_config weight_block_size must be [rows, cols], got {block!r}",
                                    field="model")
            bh, bw = (_positive_number({"weight_block_size": b}, "weight_block_size", None, name) for b in block)
            width = 1.0 + 4.0 / (bh * bw)  # fp8 values + one fp32 scale per block
            fmt = f"fp8 ({bh}x{bw} blocks, fp32 scales)"
        else:
            width, fmt = 1.0, "fp8 (per-tensor scale)"
        kept = f"embedding, LM head, router and norms at {default}"
    elif method in ("gptq", "awq"):
        bits = _positive_number(q, "bits" if "bits" in q else "w_bit", 4, name)
        if bits not in (2, 3, 4, 8):
            raise RooflineError(f"{name}: {method} bits {bits} is not one of 2, 3, 4, 8", field="model")
        group = q.get("group_size", q.get("q_group_size", 128))
        if group == -1:
            raise RooflineError(f"{name}: {method} group_size -1 (one scale per output channel) is not supported",
                                field="model")
        group = _positive_number({"group_size": group}, "group_size", None, name)
        width = bits / 8 + (2.0 + bits / 8) / group  # packed values + an fp16 scale and a packed zero per group
        fmt = f"int{bits} ({method}, group {group}: fp16 scale + zero per group)"
        kept = f"embedding and LM head at {default}"
    else:
        raise RooflineError(f"{name}: quantization_config quant_method {method or '(none)'!r} is not understood "
                            "(known: mxfp4, fp8, gptq, awq); remove it and set the weight width with --weights",
                            field="model")
    skipped = _skipped_parts(skip, name)
    parts = tuple((p, fmt, width) for p in QUANTISED_PARTS if p not in skipped)
    said = f"; left at {default} by modules_to_not_convert: {', '.join(sorted(skipped))}" if skipped else ""
    return WeightStorage(default, parts, method), [f"{method}: linear layers of the blocks stored as {fmt}; {kept}{said}"]


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _dtype(raw: dict) -> str:
    d = str(raw.get("torch_dtype") or raw.get("dtype") or "bfloat16")
    return TORCH_DTYPES.get(d, "bf16")


def _dtype_note(raw: dict) -> list[str]:
    """A torch_dtype the loader does not know is said, with what it was taken as."""
    d = raw.get("torch_dtype") or raw.get("dtype")
    if d is None or str(d) in TORCH_DTYPES:
        return []
    return [f"torch_dtype {d!r} not understood: weights taken as bf16 (use --weights/--dtype to say otherwise)"]


def from_hf_config(raw: dict, name: str = "model") -> Model:
    """A Model from a config.json dict (see the module docstring)."""
    if not isinstance(raw, dict):
        raise RooflineError(f"{name}: a config.json must hold a JSON object", field="model")
    model_type = raw.get("model_type")
    if model_type is None and "ssm_cfg" in raw:
        model_type = "mamba_ssm"
    omitted: list[str] = []
    outer_notes: list[str] = []
    top = raw
    if model_type is not None and not isinstance(model_type, str):
        raise RooflineError(f"{name}: model_type must be a string such as \"llama\", got {model_type!r}", field="model")
    if model_type in NESTED:
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise RooflineError(f"{name}: model_type {model_type!r} keeps its language model in text_config, which is "
                                "missing", field="model")
        if raw.get("vision_config") is not None:
            omitted.append("vision tower and multimodal projector (vision_config): not counted; costs are the "
                           "language model's")
        inner = dict(text)
        inner.setdefault("model_type", NESTED[model_type])
        if inner["model_type"] != NESTED[model_type]:
            raise RooflineError(f"{name}: a {model_type!r} config keeps a {NESTED[model_type]!r} language model in "
                                f"text_config; its model_type is {inner['model_type']!r}", field="model")
        for k in ("tie_word_embeddings", "torch_dtype", "quantization_config"):
            if k in raw and k not in inner:
                inner[k] = raw[k]
        known_top = {"text_config", "vision_config", "tie_word_embeddings", "torch_dtype", "quantization_config"}
        outer_notes = [f"config key {k!r} not understood: ignored" for k in sorted(raw)
                       if k not in known_top and k not in COST_NEUTRAL and not k.startswith("_")]
        raw, model_type = inner, inner["model_type"]
    if model_type not in SUPPORTED:
        shown = "(none)" if model_type is None else repr(model_type)
        raise RooflineError(f"{name}: model_type {shown} is not supported; supported: {', '.join(sorted(SUPPORTED))}",
                            field="model")
    keys = _Keys({k: v for k, v in raw.items() if k != "quantization_config"}, str(top.get("_name_or_path") or name))
    try:
        model = SUPPORTED[model_type](keys)
    except RooflineError as exc:  # a layer's own check: say which config it came from
        if keys.name in str(exc):
            raise
        raise RooflineError(f"{keys.name} (model_type {model_type!r}): {exc}", field="model") from None
    storage, qnotes = (WeightStorage(_dtype(raw)), [])
    if raw.get("quantization_config") is not None:
        storage, qnotes = _storage(raw["quantization_config"], name, _dtype(raw))
        present = {p for layer in model.kinds for p, n in layer.parts(model.d_model).items() if n}
        if storage.method == "mxfp4" and "experts" not in present:
            raise RooflineError(f"{name}: quantization_config mxfp4 quantises experts, and this model has none",
                                field="model")
        storage = dataclasses.replace(storage, parts=tuple(p for p in storage.parts if p[0] in present))
    top_context = keys.get("max_position_embeddings") or keys.get("n_positions") or 0
    if isinstance(top_context, bool) or not isinstance(top_context, int) or top_context < 0:
        top_context = 0
    return dataclasses.replace(model, storage=storage, omitted=model.omitted + tuple(omitted),
                               notes=tuple(outer_notes) + model.notes + tuple(qnotes) + tuple(_dtype_note(raw)),
                               model_type=str(model_type),
                               max_context=int(top_context))
