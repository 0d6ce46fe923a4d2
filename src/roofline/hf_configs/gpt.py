"""Loaders of Phi, Phi-3, GPT-2 and GPT-NeoX: LayerNorm models with biases, some with a parallel
residual (Phi-3 is read as a Llama)."""

from __future__ import annotations

from roofline.architecture import MLP, Attention, Layer, Model
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.llama import llama_like
from roofline.hf_configs.shared import activation_name, assemble, gqa_heads, loader


@loader("phi")
def _phi(c: Keys) -> Model:
    """PhiConfig (Phi-1/1.5/2): parallel attention and MLP off one LayerNorm; biases on q, k, v and
    dense; plain MLP fc1/fc2 with biases (gelu_new); a final LayerNorm; an LM head with a bias;
    qk_layernorm (default False) adds LayerNorms of head_dim on q and k. tie False."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    kv, d = gqa_heads(c, D, H)
    if c.get("qk_layernorm", False):
        raise RooflineError(f"{c.name}: qk_layernorm true (LayerNorm on q and k) is not supported", field="model")
    layer = Layer(Attention(H, kv, d, qkv_bias=True, out_bias=True), MLP(c.pos("intermediate_size"), False, True, activation_name(c, "gelu_new")),
                  norm="layernorm", parallel=True)
    return assemble(c, [layer] * L, D, V, c.flag("tie_word_embeddings", False), final_norm="layernorm",
                     lm_head_bias=True)


@loader("phi3")
def _phi3(c: Keys) -> Model:
    """Phi3Config (Phi-3, Phi-4): fused qkv_proj and gate_up_proj without biases, 2 RMSNorms,
    sliding_window on every layer when set (null: full). tie False."""
    return llama_like(c)


@loader("gpt2")
def _gpt2(c: Keys) -> Model:
    """GPT2Config: learned positions (n_positions), LayerNorm, biases everywhere, plain GELU MLP of
    n_inner (default 4 n_embd), tie_word_embeddings True."""
    D, L, H, V = c.pos("n_embd"), c.pos("n_layer"), c.pos("n_head"), c.pos("vocab_size")
    if D % H:
        raise RooflineError(f"{c.name}: n_embd {D} is not divisible by n_head {H}", field="model")
    F = c.pos("n_inner") if c.get("n_inner") is not None else 4 * D
    positions = c.int("n_positions", 1024)
    notes = []
    if c.get("n_ctx") is not None and c.int("n_ctx") != positions:  # GPT-2's old key: transformers reads n_positions
        notes.append(f"n_ctx {c.raw['n_ctx']:,} differs from n_positions {positions:,}: transformers ignores n_ctx; "
                     "the learned positions are n_positions")
    layer = Layer(Attention(H, H, D // H, qkv_bias=True, out_bias=True), MLP(F, False, True, "gelu"), norm="layernorm")
    return assemble(c, [layer] * L, D, V, c.flag("tie_word_embeddings", True), final_norm="layernorm",
                     positions=positions, notes=notes)


@loader("gpt_neox")
def _gpt_neox(c: Keys) -> Model:
    """GPTNeoXConfig (Pythia): fused query_key_value and dense with biases (attention_bias True),
    plain GELU MLP with biases, two LayerNorms per layer, parallel residual by default
    (use_parallel_residual True), a final LayerNorm, an untied embed_out (tie False)."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    bias = bool(c.get("attention_bias", True))
    layer = Layer(Attention(H, H, D // H, qkv_bias=bias, out_bias=bias), MLP(c.pos("intermediate_size"), False, True, "gelu"),
                  norm="layernorm", n_norms=2, parallel=bool(c.get("use_parallel_residual", True)))
    return assemble(c, [layer] * L, D, V, c.flag("tie_word_embeddings", False), final_norm="layernorm")
