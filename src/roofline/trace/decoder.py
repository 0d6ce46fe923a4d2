"""A decoder built layer by layer from a roofline Model (architecture.Model, what a config.json's
loader reads): the torch module `roofline trace CONFIG.json` runs for the attention families that
LlamaLike (one repeated plain block) does not build: several layer kinds (Gemma 2/3's sliding and
full layers, dense layers among MoE ones), q/k norms (Qwen3 and Gemma 3 per head; OLMo-2 and
MiniMax-M2 over the whole projection; Llama 4's L2 without weights), Gemma's four norms a layer,
OLMo-2's norms after each sub-layer, a MoE with a sigmoid-gated shared expert (Qwen2-MoE), and
DeepSeek-V2/V3's latent attention (MLA, a prefill: LatentAttentionModule).

Built from the same Model the analytic counts read, its parameters are ``count_params(model)``'s,
so its traced FLOPs and bytes compare with the analytic ones (tests/test_trace.py, tests/test_trace_moe.py).
Attention is scaled_dot_product_attention (the fused kernel, costed by the attention rule); a
sliding layer's prefill longer than its window W adds a (T, T) band mask (the fused kernel then
computes the full square, as eager PyTorch does: SLIDING_NOTE), and its decode step attends the
last W positions of a cache of min(S, W) tokens. A MoE runs as models.LlamaMoE does, routed
uniformly (models.UNIFORM_ROUTING). What it does not build is refused by name (``unbuildable``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from roofline.architecture import MLP, Attention, LatentAttention, Layer, Model, MoE
from roofline.errors import RooflineError
from roofline.trace.models import UNIFORM_ROUTING, activation, rope_tables, rotate_half, route_uniform

POST_NORM_TYPES = ("olmo2",)  # model_types whose two norms follow their sub-layer: x + norm(f(x)) (Olmo2DecoderLayer)

SLIDING_NOTE = ("sliding-window layers (window {W}) ran a prefill of {T} tokens as eager PyTorch does, attention with a "
                "band mask: the fused kernel's FLOPs count the full {T} x {T} square, the masked scores included; a "
                "windowed kernel (FlashAttention's window_size) skips them, and the analytic count (`roofline layer`, "
                "flops_per_token) counts the window's pairs only")


def _norm(kind: str, width: int) -> nn.Module:
    return nn.LayerNorm(width) if kind == "layernorm" else nn.RMSNorm(width)


def unbuildable(model: Model) -> list[str]:
    """What in ``model`` this decoder does not build, each named (empty: it builds it)."""
    problems = []
    if model.positions:
        problems.append(f"learned positions ({model.positions})")
    for layer, _ in model.kind_counts():
        a, ff = layer.mixer, layer.mlp
        if isinstance(a, LatentAttention):
            if a.index_topk:
                problems.append(f"token mixer {a.kind}")
        elif not isinstance(a, Attention):
            problems.append(f"token mixer {getattr(a, 'kind', 'none')}")
        else:
            extra = [w for w, on in (("chunked attention", a.chunk), ("attention sinks", a.sinks),
                                     ("an output gate", a.output_gate), ("values from the keys", a.k_eq_v),
                                     (f"v_head_dim {a.v_head_dim} != head_dim {a.head_dim}",
                                      a.v_head_dim != a.head_dim)) if on]
            problems += extra
        if ff is None:
            problems.append("a layer without an MLP")
        elif isinstance(ff, MoE):
            problems += [w for w, on in (("latent MoE projections", ff.latent), ("router scales", ff.router_scales))
                         if on]
        if layer.parallel:
            problems.append("parallel attention + MLP")
        elif a is not None and ff is not None and layer.n_norms not in (2, 4):
            problems.append(f"{layer.n_norms} norms a layer")
    return list(dict.fromkeys(problems))


class FFN(nn.Module):
    """An MLP of width F: gated (gate and up fused in w13, then act(gate) * up) or plain (w1, act)."""

    def __init__(self, d_model: int, mlp: MLP):
        super().__init__()
        self.gated = mlp.gated
        self.w13 = nn.Linear(d_model, (2 if mlp.gated else 1) * mlp.d_ff, bias=mlp.bias)
        self.w2 = nn.Linear(mlp.d_ff, d_model, bias=mlp.bias)
        self.act = activation(mlp.activation, "silu")

    def forward(self, x):
        if not self.gated:
            return self.w2(self.act(self.w13(x)))
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(self.act(gate) * up)


class RoutedMoE(nn.Module):
    """A router (D, E) and its top-k experts (route_uniform), plus a shared expert on every token,
    scaled by sigmoid(shared_gate(x)) when the MoE has that gate (Qwen2MoeSparseMoeBlock)."""

    def __init__(self, d_model: int, moe: MoE):
        super().__init__()
        self.top_k = moe.top_k
        self.router = nn.Linear(d_model, moe.n_experts, bias=moe.router_bias)
        self.experts = nn.ModuleList(FFN(d_model, moe.expert) for _ in range(moe.n_experts))
        self.shared = FFN(d_model, moe.shared) if moe.shared_d_ff else None
        self.shared_gate = nn.Linear(d_model, 1, bias=False) if moe.shared_gate else None

    def forward(self, x):
        B, T, D = x.shape
        flat = x.reshape(-1, D)
        out = route_uniform(flat, self.router, self.experts, self.top_k)
        if self.shared is not None:
            shared = self.shared(flat)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(flat)) * shared
            out = out + shared
        return out.view(B, T, D)


class DecoderAttention(nn.Module):
    """Grouped-query attention with a fused q, k, v projection, the Model's q/k norm, rotary
    embeddings (rotate-half) and SDPA; a window W as the module docstring says."""

    def __init__(self, d_model: int, a: Attention):
        super().__init__()
        self.a = a
        H, K, d = a.heads, a.kv_heads, a.head_dim
        self.wqkv = nn.Linear(d_model, (H + 2 * K) * d, bias=a.qkv_bias)
        self.wo = nn.Linear(H * d, d_model, bias=a.out_bias)
        if a.qk_norm == "rmsnorm":  # one d-wide scale, on each head (Qwen3, Gemma 3)
            self.q_norm, self.k_norm = nn.RMSNorm(d), nn.RMSNorm(d)
        elif a.qk_norm == "rmsnorm_full":  # over all heads' q and all k (OLMo-2, MiniMax-M2 per_layer)
            self.q_norm, self.k_norm = nn.RMSNorm(H * d), nn.RMSNorm(K * d)

    def forward(self, x, cos, sin, mask=None, cache=None):
        B, T, _ = x.shape
        a = self.a
        H, K, d = a.heads, a.kv_heads, a.head_dim
        q, k, v = self.wqkv(x).split([H * d, K * d, K * d], dim=-1)
        if a.qk_norm == "rmsnorm_full":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.view(B, T, H, d), k.view(B, T, K, d), v.view(B, T, K, d)
        if a.qk_norm == "rmsnorm":
            q, k = self.q_norm(q), self.k_norm(k)
        elif a.qk_norm == "l2":  # no weights (Llama 4's L2Norm: x / rms(x))
            q, k = F.rms_norm(q, (d,)), F.rms_norm(k, (d,))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, d)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:  # decode: appended to the cache (min(S, W) tokens), then the last W seen
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            if a.window:
                k, v = k[:, :, -a.window:], v[:, :, -a.window:]
        causal = cache is None and mask is None
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=K != H)
        return self.wo(y.transpose(1, 2).reshape(B, T, H * d))


class LatentAttentionModule(nn.Module):
    """DeepSeek-V2/V3's multi-head latent attention as transformers' eager DeepseekV3Attention runs
    a prefill (the expanded form, as training runs it and the analytic count takes it): q through
    the q_lora_rank latent and its norm (or one projection), the kv latent (kv_lora_rank) and one
    shared rotary key from kv_a, the latent normed and expanded per head by kv_b to keys' nope part
    and values, rotary on the rope parts, SDPA with d_qk = nope + rope and d_v."""

    def __init__(self, d_model: int, a: LatentAttention):
        super().__init__()
        self.a = a
        H, r = a.heads, a.kv_lora_rank
        if a.q_lora_rank:
            self.q_a = nn.Linear(d_model, a.q_lora_rank, bias=False)
            self.q_a_norm = nn.RMSNorm(a.q_lora_rank)
            self.q_b = nn.Linear(a.q_lora_rank, H * a.qk_head_dim, bias=False)
        else:
            self.q_proj = nn.Linear(d_model, H * a.qk_head_dim, bias=False)
        self.kv_a = nn.Linear(d_model, r + a.qk_rope_head_dim, bias=False)
        self.kv_a_norm = nn.RMSNorm(r)
        self.kv_b = nn.Linear(r, H * (a.qk_nope_head_dim + a.v_head_dim), bias=False)
        self.wo = nn.Linear(H * a.v_head_dim, d_model, bias=False)

    def forward(self, x, cos, sin, mask=None, cache=None):
        B, T, _ = x.shape
        a = self.a
        H, nope, rope, dv = a.heads, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim
        q = self.q_b(self.q_a_norm(self.q_a(x))) if a.q_lora_rank else self.q_proj(x)
        q_nope, q_rot = q.view(B, T, H, nope + rope).transpose(1, 2).split([nope, rope], dim=-1)
        latent, k_rot = self.kv_a(x).split([a.kv_lora_rank, rope], dim=-1)
        kv = self.kv_b(self.kv_a_norm(latent)).view(B, T, H, nope + dv).transpose(1, 2)
        k_nope, v = kv.split([nope, dv], dim=-1)
        k_rot = k_rot.view(B, 1, T, rope)
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        q = torch.cat([q_nope, q_rot], dim=-1)
        k = torch.cat([k_nope, k_rot.expand(B, H, T, rope)], dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, H * dv))


class DecoderBlock(nn.Module):
    """One Layer: pre-norm (x + f(norm(x))), Gemma's sandwich of four norms (x + post(f(pre(x)))),
    or OLMo-2's post-norm (x + norm(f(x)))."""

    def __init__(self, d_model: int, layer: Layer, post_norm: bool):
        super().__init__()
        self.post_norm, self.sandwich = post_norm, layer.n_norms == 4
        self.attn_norm, self.ffn_norm = _norm(layer.norm, d_model), _norm(layer.norm, d_model)
        if self.sandwich:
            self.attn_post_norm, self.ffn_post_norm = _norm(layer.norm, d_model), _norm(layer.norm, d_model)
        latent = isinstance(layer.mixer, LatentAttention)
        self.attn = (LatentAttentionModule if latent else DecoderAttention)(d_model, layer.mixer)
        self.mlp = RoutedMoE(d_model, layer.mlp) if isinstance(layer.mlp, MoE) else FFN(d_model, layer.mlp)

    def forward(self, x, cos, sin, mask=None, cache=None):
        if self.post_norm:
            x = x + self.attn_norm(self.attn(x, cos, sin, mask, cache))
            return x + self.ffn_norm(self.mlp(x))
        if self.sandwich:
            x = x + self.attn_post_norm(self.attn(self.attn_norm(x), cos, sin, mask, cache))
            return x + self.ffn_post_norm(self.mlp(self.ffn_norm(x)))
        x = x + self.attn(self.attn_norm(x), cos, sin, mask, cache)
        return x + self.mlp(self.ffn_norm(x))


def band_mask(T: int, window: int, device) -> torch.Tensor:
    """(T, T) bool: query i sees keys i - W + 1 .. i (causal, the last W positions)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril().triu(1 - window)


class Decoder(nn.Module):
    """Token ids (B, T) -> logits (B, T, V) for a Model of attention layers of any kinds (module
    docstring); refused by name where ``unbuildable`` names something."""

    def __init__(self, model: Model):
        super().__init__()
        problems = unbuildable(model)
        if problems:
            raise RooflineError(f"{model.name}: roofline trace does not build {'; '.join(problems)} from a config: give "
                                "a PACKAGE.MODULE:FACTORY that builds the model (docs/tracing.md)", field="model")
        self.model = model
        post = model.model_type in POST_NORM_TYPES
        self.embed = nn.Embedding(model.vocab, model.d_model)
        self.layers = nn.ModuleList(DecoderBlock(model.d_model, layer, post) for layer in model.layers)
        self.norm = _norm(model.final_norm, model.d_model)
        self.lm_head = nn.Linear(model.d_model, model.vocab, bias=model.lm_head_bias)
        if model.tied_embeddings:
            self.lm_head.weight = self.embed.weight
        moe = [ly.mlp for ly in model.kinds if isinstance(ly.mlp, MoE)]
        self.notes = [UNIFORM_ROUTING.format(E=moe[0].n_experts, k=moe[0].top_k)] if moe else []
        self.max_position_embeddings = 0  # rotary: no table to run past

    def cache_shapes(self, batch: int, context: int) -> list[tuple[int, ...]]:
        """Each layer's K and V for a decode step against ``context`` tokens: (B, kv heads, S, d),
        S = min(context, W) on a sliding layer (what it keeps)."""
        shapes = []
        if any(isinstance(ly.mixer, LatentAttention) for ly in self.model.kinds):
            raise RooflineError(f"{self.model.name}: a decode step of latent attention (MLA) is not built: engines run "
                                "it absorbed over the latent cache, and the eager form would expand every cached token "
                                "per head; trace a prefill (--phase prefill)", field="phase")
        for layer in self.model.layers:
            a = layer.mixer
            S = min(context, a.window) if a.window else context
            shapes += [(batch, a.kv_heads, S, a.head_dim)] * 2
        return shapes

    def prefill_notes(self, tokens: int) -> list[str]:
        """SLIDING_NOTE for each window shorter than a prefill of ``tokens``."""
        windows = sorted({ly.mixer.span for ly in self.model.kinds if 0 < ly.mixer.span < tokens})
        return [SLIDING_NOTE.format(W=w, T=tokens) for w in windows]

    def forward(self, ids, *cache):
        """``cache``: for a decode step, each layer's K and V (cache_shapes), in order; the step's
        ids are the new token(s) after the longest cache."""
        x = self.embed(ids)
        T = ids.shape[1]
        S = max(c.shape[2] for c in cache) if cache else 0
        tables, masks = {}, {}
        for i, (layer, block) in enumerate(zip(self.model.layers, self.layers)):
            a = layer.mixer
            rotary = a.qk_rope_head_dim if isinstance(a, LatentAttention) else a.head_dim
            if rotary not in tables:
                tables[rotary] = rope_tables(T, rotary, device=x.device, dtype=x.dtype, start=S)
            W = a.span  # a window (LatentAttention has none)
            if not cache and W and W < T and W not in masks:
                masks[W] = band_mask(T, W, x.device)
            mask = None if cache else masks.get(W)
            x = block(x, *tables[rotary], mask, cache[2 * i:2 * i + 2] if cache else None)
        return self.lm_head(self.norm(x))
