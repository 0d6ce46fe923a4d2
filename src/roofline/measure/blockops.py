"""One transformer block as real PyTorch ops, mirroring roofline.blocks.block_kernels op by op.

``block_ops`` returns, for every kernel block_kernels lists (same names, same order), a callable
that runs that op on preallocated tensors of the right shapes (``out=`` where PyTorch has it, so
that a run times the op and not the allocator), with the op's shape in words. The kernel stays the
count the predictions use; what the eager op really does may differ and is said in ``note``:

- QK^T, softmax and P V are dense: they compute all T x S scores where the causal count is half;
- GQA attention runs as one batched matmul per kv head (queries of a group stacked as rows), so
  K and V are never copied;
- SiLU-and-multiply is two eager kernels (silu, then multiply), RMSNorm what F.rms_norm does.

Values do not change the timings; they are small random numbers from a fixed seed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from roofline.blocks import block_kernels
from roofline.errors import RooflineError
from roofline.kernels import Kernel
from roofline.measure.device import torch_dtype
from roofline.transformer import TransformerConfig, uniform_config


@dataclass(frozen=True)
class OpSpec:
    """A kernel (the count) and the PyTorch callable that runs it."""

    kernel: Kernel
    fn: Callable[[], object]
    shape: str
    dims: tuple[int, ...] = ()
    causal_counted: bool = False


def scale_config(cfg, d_model: int | None = None) -> TransformerConfig:
    """The model with d_model scaled (heads, kv heads and d_ff in proportion, head dim kept),
    one layer: a block that fits a small device but keeps the preset's shape ratios. Models whose
    layers are not one plain attention + MLP kind are refused by name."""
    cfg = cfg if isinstance(cfg, TransformerConfig) else uniform_config(cfg, "check")
    if d_model is None or d_model == cfg.d_model:
        return dataclasses.replace(cfg, n_layers=1)
    d = cfg.head_dim if cfg.head_dim <= d_model else d_model
    heads = max(1, round(d_model * cfg.attn_dim / cfg.d_model / d))
    group = max(1, cfg.n_heads // cfg.n_kv_heads)
    kv = max(1, heads // group)
    while heads % kv:
        kv -= 1
    d_ff = max(64, round(cfg.d_ff * d_model / cfg.d_model / 64) * 64)
    return dataclasses.replace(cfg, name=f"{cfg.name} at d_model {d_model}", key=f"{cfg.key or cfg.name}@{d_model}",
                               d_model=d_model, n_layers=1, n_heads=heads, n_kv_heads=kv, head_dim=d, d_ff=d_ff,
                               expert_d_ff=d_ff)


def planned_bytes(cfg, phase: str = "prefill", tokens: int = 512, batch: int = 1, context: int | None = None,
                  attention: str = "naive", dtype: str = "fp32", only=None) -> float:
    """Bytes that block_ops with these arguments allocates: the same builders run on the meta
    device (no memory), every buffer counted. For a check before the real allocation."""
    allocated: list[float] = []
    block_ops(cfg, phase, tokens, batch, context, attention, dtype, "meta", only, _allocated=allocated)
    return float(sum(allocated))


def block_ops(cfg, phase: str = "prefill", tokens: int = 512, batch: int = 1, context: int | None = None,
              attention: str = "naive", dtype: str = "fp32", device: str = "cpu", only=None, seed: int = 0,
              _allocated: list | None = None) -> list[OpSpec]:
    """The ops of block_kernels(cfg, ...) as PyTorch callables on ``device``. ``only``: a set of
    op names to build (the others are skipped, nothing is allocated for them). ``_allocated``
    collects the bytes of every buffer (see planned_bytes)."""
    cfg = cfg if isinstance(cfg, TransformerConfig) else uniform_config(cfg, "check")
    if cfg.is_moe:
        raise RooflineError(f"{cfg.name} is a mixture of experts: check times dense blocks only", field="model")
    kernels = block_kernels(cfg, phase, tokens, batch, context, attention, dtype)
    prefill = phase == "prefill"
    T = tokens if prefill else 1
    S = tokens if (prefill or context is None) else context
    builders = _builders(cfg, _Tensors(device, torch_dtype(dtype), seed, _allocated), batch, T, S, prefill)
    out = []
    for k in kernels:
        if only is not None and k.name not in only:
            continue
        if k.name not in builders:
            raise RooflineError(f"no PyTorch op for block op {k.name!r}", field="model")
        fn, shape, dims = builders[k.name]()
        causal = prefill and k.name in ("QK^T", "softmax", "PV")
        out.append(OpSpec(k, fn, shape, dims, causal))
    return out


class _Tensors:
    """The buffers of block_ops on ``device`` in dtype ``td``: ``empty`` and ``rnd`` (small random
    values from a generator seeded with ``seed``, drawn on the device: a GPU block's tensors are too
    big to draw on the host); on "meta" nothing is allocated. Every buffer's bytes go to ``allocated``."""

    def __init__(self, device: str, td, seed: int, allocated: list | None):
        self.device, self.td, self.allocated = device, td, allocated
        self.meta = device == "meta"
        self.gen = None if self.meta else torch.Generator(device=device).manual_seed(seed)

    def _count(self, t):
        if self.allocated is not None:
            self.allocated.append(float(t.numel() * t.element_size()))
        return t

    def empty(self, *shape):
        return self._count(torch.empty(*shape, device=self.device, dtype=self.td))

    def rnd(self, *shape):
        if self.meta:
            return self.empty(*shape)
        return self._count(torch.randn(*shape, generator=self.gen, device=self.device, dtype=self.td).mul_(0.05))


def _builders(cfg: TransformerConfig, t: _Tensors, B: int, T: int, S: int, prefill: bool) -> dict:
    """Block op name -> a function building its (callable, shape in words, matmul dims) on ``t``'s
    buffers: B sequences of T new tokens against S (cached and new)."""
    rnd, empty = t.rnd, t.empty
    D, H, K, d, Fd = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff
    G, M = H // K, B * T

    def norm():
        x, w = rnd(M, D), 1.0 + rnd(D)
        if cfg.norm == "layernorm":
            b = rnd(D)
            return lambda: F.layer_norm(x, (D,), w, b), f"layer_norm ({M}, {D})", ()
        return lambda: F.rms_norm(x, (D,), w, 1e-5), f"rms_norm ({M}, {D})", ()

    def linear(n_out, n_in):
        def build():
            x, w, y = rnd(M, n_in), rnd(n_in, n_out), empty(M, n_out)
            return lambda: torch.matmul(x, w, out=y), f"({M}, {n_in}) @ ({n_in}, {n_out})", (M, n_out, n_in)
        return build

    def scores():
        q, kt, s = rnd(B, K, G * T, d), rnd(B, K, d, S), empty(B, K, G * T, S)
        return lambda: torch.matmul(q, kt, out=s), f"{B * K} x ({G * T}, {d}) @ ({d}, {S})", (G * T, S, d)

    def softmax():
        s, p = rnd(B, K, G * T, S), empty(B, K, G * T, S)
        return lambda: torch.softmax(s, -1, out=p), f"softmax ({B * H * T}, {S})", ()

    def pv():
        p, v, o = rnd(B, K, G * T, S), rnd(B, K, S, d), empty(B, K, G * T, d)
        return lambda: torch.matmul(p, v, out=o), f"{B * K} x ({G * T}, {S}) @ ({S}, {d})", (G * T, d, S)

    def flash():
        q, k, v = rnd(B, H, T, d), rnd(B, K, S, d), rnd(B, K, S, d)
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=prefill, enable_gqa=K != H),
                f"sdpa q ({B}, {H}, {T}, {d}), kv ({B}, {K}, {S}, {d})", ())

    def add():
        a, b, c = rnd(M, D), rnd(M, D), empty(M, D)
        return lambda: torch.add(a, b, out=c), f"({M}, {D}) + ({M}, {D})", ()

    def silu_mul():
        gu, tmp, h = rnd(M, 2 * Fd), empty(M, Fd), empty(M, Fd)
        g, u = gu[:, :Fd], gu[:, Fd:]

        def run():
            torch.ops.aten.silu.out(g, out=tmp)
            return torch.mul(tmp, u, out=h)

        return run, f"silu(g) * u, ({M}, {Fd}) halves of ({M}, {2 * Fd})", ()

    def gelu():
        h, y = rnd(M, Fd), empty(M, Fd)
        return lambda: torch.ops.aten.gelu.out(h, out=y), f"gelu ({M}, {Fd})", ()

    return {
        "attn norm": norm, "ffn norm": norm,
        "QKV proj": linear(cfg.attn_dim + 2 * cfg.kv_dim, D),
        "QK^T": scores, "softmax": softmax, "PV": pv, "flash attention": flash,
        "out proj": linear(D, cfg.attn_dim),
        "residual add": add, "residual add 2": add,
        "gate+up proj": linear(2 * Fd, D), "silu*mul": silu_mul,
        "up proj": linear(Fd, D), "gelu": gelu, "down proj": linear(D, Fd),
    }
