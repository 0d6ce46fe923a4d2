"""Small Llama-style and GPT-2-style nn.Modules built from a roofline TransformerConfig: something
real to trace without a transformers dependency or a download. Build them under
``with torch.device("meta"):`` and a 7B model costs no memory.

LlamaLike follows the layout of efficient implementations (gpt-fast, vLLM): one fused QKV
projection and one fused gate+up projection, RMSNorm, rotary embeddings (rotate-half form, as
Hugging Face), scaled_dot_product_attention with grouped-query heads, SwiGLU. GPT2Like follows
nanoGPT: one c_attn projection with biases, LayerNorm, learned positions, tanh GELU, tied LM head.

LlamaMoE is Hugging Face's eager Mixtral block (router, softmax, top-k, each expert's rows
gathered and added back), routed uniformly on the meta device.

Factories (zero-argument, for ``roofline trace roofline.trace.models:FACTORY``): llama2_7b,
llama3_8b, gpt2, tiny_llama, tiny_gpt2, tiny_mixtral. ``from_config`` builds a preset or a
config.json: these for one repeated plain block, trace.decoder.Decoder for the other attention
families (layer kinds, q/k norms, post- and sandwich norms, gated shared experts, MLA).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from roofline.transformer import TransformerConfig, uniform_config


def as_uniform_config(cfg) -> TransformerConfig:
    """A uniform TransformerConfig: one as given, or a preset / Model's (refused by name when its
    layers are not one plain attention + MLP kind)."""
    return cfg if isinstance(cfg, TransformerConfig) else uniform_config(cfg, "the torch module builder")


# ---------------------------------------------------------------------------------------------
# Llama
# ---------------------------------------------------------------------------------------------


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        cfg = as_uniform_config(cfg)
        self.cfg = cfg
        self.wqkv = nn.Linear(cfg.d_model, cfg.attn_dim + 2 * cfg.kv_dim, bias=cfg.attention_bias)
        self.wo = nn.Linear(cfg.attn_dim, cfg.d_model, bias=cfg.attention_out_bias)

    def forward(self, x, cos, sin, cache=None):
        B, T, _ = x.shape
        c = self.cfg
        q, k, v = self.wqkv(x).split([c.attn_dim, c.kv_dim, c.kv_dim], dim=-1)
        q = q.view(B, T, c.n_heads, c.head_dim).transpose(1, 2)  # (B, H, T, d)
        k = k.view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)  # (B, K, T, d)
        v = v.view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:  # decode: the new token's k and v appended to the cache, as eager engines do
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None, enable_gqa=c.n_kv_heads != c.n_heads)
        return self.wo(y.transpose(1, 2).reshape(B, T, c.attn_dim))


ACTIVATIONS = {  # config.json's hidden_act -> the eager call Hugging Face's ACT2FN makes
    "silu": F.silu, "swish": F.silu, "relu": F.relu, "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"), "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
}


def activation(name: str, default: str):
    """The MLP's activation function for config.json's name (``default`` when none is named); a
    name not in ACTIVATIONS is refused by name (tracing another op in its place would cost it
    under the wrong name)."""
    from roofline.errors import RooflineError

    name = name or default
    if name not in ACTIVATIONS:
        raise RooflineError(f"MLP activation {name!r}: the torch module builder traces {', '.join(ACTIVATIONS)}; for "
                            "another give a PACKAGE.MODULE:FACTORY that builds the model", field="model")
    return ACTIVATIONS[name]


class LlamaMLP(nn.Module):
    def __init__(self, cfg: TransformerConfig, d_ff: int | None = None):
        super().__init__()
        cfg = as_uniform_config(cfg)
        d_ff = d_ff or cfg.d_ff
        self.w13 = nn.Linear(cfg.d_model, 2 * d_ff, bias=cfg.mlp_bias)  # gate and up, fused
        self.w2 = nn.Linear(d_ff, cfg.d_model, bias=cfg.mlp_bias)
        self.act = activation(cfg.activation, "silu")  # SwiGLU; a GeGLU (Gemma) with gelu

    def forward(self, x):
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(self.act(gate) * up)


UNIFORM_ROUTING = ("MoE routing assumed uniform: the tokens x {k} (token, expert) pairs are spread evenly over the "
                   "{E} experts (the meta device has no values to route by; with fewer pairs than experts, as in a "
                   "small decode step, only that many experts run); a real router's imbalance makes the busiest "
                   "expert, and so the layer, slower")


class LlamaMoE(nn.Module):
    """Top-k routing as Hugging Face's Mixtral block runs it in eager mode: a linear router, softmax
    in fp32, the top k of each token renormalised, then for each expert its rows gathered
    (``x[rows]``), its SwiGLU MLP, scaled by the routing weight and added back (``index_add_``);
    a shared expert, if any, on every token. On the meta device there are no values to route by:
    each expert gets an equal share of the N x k (token, slot) pairs (the first N k mod E one more),
    uniform routing (UNIFORM_ROUTING, which `roofline trace` prints)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        cfg = as_uniform_config(cfg)
        self.n_experts, self.top_k = cfg.n_experts, cfg.experts_per_token
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = nn.ModuleList(LlamaMLP(cfg, cfg.expert_d_ff) for _ in range(cfg.n_experts))
        self.shared = LlamaMLP(cfg, cfg.n_shared_experts * cfg.expert_d_ff) if cfg.n_shared_experts else None

    def forward(self, x):
        B, T, D = x.shape
        flat = x.reshape(-1, D)
        out = route_uniform(flat, self.router, self.experts, self.top_k)
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view(B, T, D)


def route_uniform(flat, router, experts, k: int):
    """Top-k routing of ``flat`` (N, D) as Hugging Face's eager Mixtral block runs it (LlamaMoE's
    docstring), each expert given its uniform share of the N k pairs: (N, D), the shared expert not
    added."""
    N, E = flat.shape[0], len(experts)
    weights, _ = torch.softmax(router(flat), dim=-1, dtype=torch.float32).topk(k, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).to(flat.dtype).reshape(-1)
    out = torch.zeros_like(flat)
    pairs = N * k
    for e, expert in enumerate(experts):
        n = pairs // E + (1 if e < pairs % E else 0)
        if n == 0:  # no token chose this expert: its weights are not read
            continue
        rows = torch.arange(n, device=flat.device) % N  # the uniform share (LlamaMoE's docstring)
        y = expert(flat[rows]) * weights[:n, None]
        out.index_add_(0, rows, y)
    return out


class LlamaBlock(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        cfg = as_uniform_config(cfg)
        self.attn_norm = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.attn = LlamaAttention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.mlp = LlamaMoE(cfg) if cfg.is_moe else LlamaMLP(cfg)

    def forward(self, x, cos, sin, cache=None):
        x = x + self.attn(self.attn_norm(x), cos, sin, cache)
        return x + self.mlp(self.ffn_norm(x))


def rope_tables(T: int, head_dim: int, theta: float = 10000.0, device=None, dtype=None, start: int = 0):
    """cos and sin of the rotary angles of positions start .. start + T - 1, (T, head_dim), in the
    rotate-half layout."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(start, start + T, device=device, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


class LlamaLike(nn.Module):
    """A decoder-only Llama: token ids (B, T) -> logits (B, T, V); with experts (a Mixtral-like
    config) each block's MLP is a LlamaMoE, routed uniformly on the meta device (``notes``)."""

    def __init__(self, cfg):
        super().__init__()
        cfg = as_uniform_config(cfg)
        if not cfg.gated_mlp or cfg.norm != "rmsnorm":
            raise ValueError(f"{cfg.name}: LlamaLike builds SwiGLU RMSNorm models only")
        self.notes = ([UNIFORM_ROUTING.format(E=cfg.n_experts, k=cfg.experts_per_token)] if cfg.is_moe else [])
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.layers = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        if cfg.tied_embeddings:
            self.lm_head.weight = self.embed.weight

    def forward(self, ids, *cache):
        """``cache``: for a decode step, each layer's K and V, (B, kv heads, S, head dim), in order
        (2 x layers tensors); the step's ids are the new token(s) at positions S, S + 1, ..."""
        x = self.embed(ids)
        S = cache[0].shape[2] if cache else 0
        cos, sin = rope_tables(ids.shape[1], self.cfg.head_dim, device=x.device, dtype=x.dtype, start=S)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache[2 * i:2 * i + 2] if cache else None)
        return self.lm_head(self.norm(x))


# ---------------------------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------------------------


class GPT2Block(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        cfg = as_uniform_config(cfg)
        self.cfg = cfg
        D = cfg.d_model
        self.ln_1 = nn.LayerNorm(D)
        self.c_attn = nn.Linear(D, 3 * D, bias=cfg.attention_bias)
        self.c_proj = nn.Linear(D, D, bias=cfg.attention_out_bias)
        self.ln_2 = nn.LayerNorm(D)
        self.c_fc = nn.Linear(D, cfg.d_ff, bias=cfg.mlp_bias)
        self.mlp_proj = nn.Linear(cfg.d_ff, D, bias=cfg.mlp_bias)
        self.act = activation(cfg.activation, "gelu_new")  # GPT-2's tanh approximation

    def forward(self, x, cache=None):
        B, T, D = x.shape
        H = self.cfg.n_heads
        q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=-1)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp_proj(self.act(self.c_fc(self.ln_2(x))))


class GPT2Like(nn.Module):
    """nanoGPT's GPT-2: token ids (B, T) -> logits (B, T, V), LM head tied to the embedding."""

    def __init__(self, cfg):
        super().__init__()
        cfg = as_uniform_config(cfg)
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.max_position_embeddings or 1024, cfg.d_model)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids, *cache):
        """``cache`` as LlamaLike's: each layer's K and V for a decode step."""
        S = cache[0].shape[2] if cache else 0
        pos = torch.arange(S, S + ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for i, block in enumerate(self.h):
            x = block(x, cache[2 * i:2 * i + 2] if cache else None)
        return self.lm_head(self.ln_f(x))


# ---------------------------------------------------------------------------------------------
# factories
# ---------------------------------------------------------------------------------------------


def llama2_7b() -> LlamaLike:
    """Llama 2 7B (the llama2-7b preset): 6,738,415,616 parameters."""
    return LlamaLike("llama2-7b")


def llama3_8b() -> LlamaLike:
    """Llama 3 8B (the llama3-8b preset, grouped-query attention)."""
    return LlamaLike("llama3-8b")


def gpt2() -> GPT2Like:
    """GPT-2 small (the gpt2 preset), 124M."""
    return GPT2Like("gpt2")


def tiny_llama() -> LlamaLike:
    """Two layers, d_model 64, 4 heads over 2 kv heads, vocab 256: small enough to run for real."""
    return LlamaLike(TransformerConfig("tiny llama", d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=128,
                                       vocab=256))


def tiny_mixtral() -> LlamaLike:
    """Two layers, d_model 64, 4 heads over 2 kv heads, 8 experts of 128 with top-2, vocab 256."""
    return LlamaLike(TransformerConfig("tiny mixtral", d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=128,
                                       vocab=256, n_experts=8, experts_per_token=2, expert_d_ff=128))


def tiny_gpt2() -> GPT2Like:
    """Two layers, d_model 64, 4 heads, vocab 256, 64 positions."""
    base = as_uniform_config("gpt2")
    return GPT2Like(dataclasses.replace(base, name="tiny gpt2", key="", d_model=64, n_layers=2, n_heads=4, n_kv_heads=None, d_ff=256,
                                        head_dim=None, vocab=256, max_position_embeddings=64, expert_d_ff=None))
