"""Transformer accounting: configs, parameter counts, FLOPs per token, training FLOPs and time,
memory by dtype (seed 000 sections 2.3 and 3.2).

Dimension letters: D d_model, F d_ff, H query heads, K kv heads, d_head head dim, L layers,
V vocab, E experts, s sequence length.

FLOPs convention: one multiply-accumulate is 2 FLOPs. The attention term 4 L h s (h = H d_head)
counts QK^T and PV in full, ignoring causal masking: the PaLM / Megatron convention used for MFU.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from roofline.errors import MAX_COUNT, RooflineError, check_choice, check_fraction, check_number, unknown_name
from roofline.units import DTYPE_BYTES, dtype_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer. Fields left as None take the usual default in __post_init__:
    n_kv_heads = n_heads, head_dim = d_model / n_heads, d_ff = 4 d_model."""

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    vocab: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    d_ff: int | None = None
    gated_mlp: bool = True  # SwiGLU: gate, up and down matrices; else up and down
    tied_embeddings: bool = False
    norm: str = "rmsnorm"  # "rmsnorm" (a scale) or "layernorm" (scale and bias)
    attention_bias: bool = False  # biases on the q, k, v projections
    attention_out_bias: bool = False  # bias on the output projection
    mlp_bias: bool = False
    max_position_embeddings: int = 0  # learned absolute positions (GPT-2/3); 0 for rotary
    n_experts: int = 1  # MoE: routed experts per layer (1 = dense)
    experts_per_token: int = 1
    n_shared_experts: int = 0  # always-active experts (DeepSeek-style)
    expert_d_ff: int | None = None  # hidden size of each expert (default d_ff)
    key: str = ""

    def __post_init__(self):
        for f in ("d_model", "n_layers", "n_heads", "vocab"):
            check_number(f"{self.name}: {f}", getattr(self, f), minimum=0, maximum=MAX_COUNT, integer=True)
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise RooflineError(f"{self.name}: d_model {self.d_model} is not divisible by n_heads {self.n_heads}; give head_dim")
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        if self.expert_d_ff is None:
            object.__setattr__(self, "expert_d_ff", self.d_ff)
        for f in ("n_kv_heads", "head_dim", "d_ff", "n_experts", "experts_per_token", "expert_d_ff"):
            check_number(f"{self.name}: {f}", getattr(self, f), minimum=0, maximum=MAX_COUNT, integer=True)
        check_number(f"{self.name}: n_shared_experts", self.n_shared_experts, minimum=0, strictly=False, integer=True)
        check_number(f"{self.name}: max_position_embeddings", self.max_position_embeddings, minimum=0, strictly=False, integer=True)
        if self.n_heads % self.n_kv_heads:
            raise RooflineError(f"{self.name}: n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.experts_per_token > self.n_experts:
            raise RooflineError(f"{self.name}: experts_per_token {self.experts_per_token} exceeds n_experts {self.n_experts}")
        check_choice(f"{self.name}: norm", self.norm, ("rmsnorm", "layernorm"))
        for f in ("d_model", "n_layers", "n_heads", "vocab", "n_kv_heads", "head_dim", "d_ff", "expert_d_ff",
                  "n_experts", "experts_per_token", "n_shared_experts", "max_position_embeddings"):
            object.__setattr__(self, f, int(getattr(self, f)))

    @property
    def attn_dim(self) -> int:
        """h = H d_head, the width of the attention (equals d_model for most models)."""
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """K d_head, the width of the keys (and of the values)."""
        return self.n_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1


# ---------------------------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------------------------


def _mlp_params(cfg: TransformerConfig, d_ff: int) -> int:
    """One MLP: gated = gate + up + down = 3 D F; plain = up + down = 2 D F; plus biases."""
    D = cfg.d_model
    if cfg.gated_mlp:
        return 3 * D * d_ff + ((2 * d_ff + D) if cfg.mlp_bias else 0)
    return 2 * D * d_ff + ((d_ff + D) if cfg.mlp_bias else 0)


def _layer_parts(cfg: TransformerConfig) -> dict[str, int]:
    """Parameters of one block by part (all experts counted)."""
    D, h, kv = cfg.d_model, cfg.attn_dim, cfg.kv_dim
    attention = D * h + 2 * D * kv + h * D  # Wq (D, h), Wk and Wv (D, K d_head), Wo (h, D)
    if cfg.attention_bias:
        attention += h + 2 * kv
    if cfg.attention_out_bias:
        attention += D
    mlp = cfg.n_experts * _mlp_params(cfg, cfg.expert_d_ff) + cfg.n_shared_experts * _mlp_params(cfg, cfg.expert_d_ff)
    router = D * cfg.n_experts if cfg.is_moe else 0  # (D, E) gate
    per_norm = 2 * D if cfg.norm == "layernorm" else D
    return {"attention": attention, "mlp": mlp, "router": router, "norms": 2 * per_norm}


def count_params(cfg: TransformerConfig) -> dict[str, int]:
    """Parameter count by part, with ``total``. Parts: embedding (V D), position (learned
    positions), attention, mlp (all experts), router, norms (two per block and the final one),
    lm_head (V D, zero when tied to the embedding)."""
    L, D, V = cfg.n_layers, cfg.d_model, cfg.vocab
    layer = _layer_parts(cfg)
    parts = {
        "embedding": V * D,
        "position": cfg.max_position_embeddings * D,
        "attention": L * layer["attention"],
        "mlp": L * layer["mlp"],
        "router": L * layer["router"],
        "norms": L * layer["norms"] + (2 * D if cfg.norm == "layernorm" else D),
        "lm_head": 0 if cfg.tied_embeddings else V * D,
    }
    parts["total"] = sum(parts.values())
    return parts


def active_params(cfg: TransformerConfig) -> int:
    """Parameters one token touches: every expert counts only if routed to (experts_per_token of
    n_experts) or shared. Equals count_params(cfg)['total'] for a dense model."""
    p = count_params(cfg)
    inactive = cfg.n_layers * (cfg.n_experts - cfg.experts_per_token) * _mlp_params(cfg, cfg.expert_d_ff)
    return p["total"] - inactive


def matmul_params(cfg: TransformerConfig) -> int:
    """Parameters one token multiplies by: attention, the active MLP experts, the router and the LM
    head (a matmul against the vocabulary even when tied). The input embedding is a gather and
    norms are elementwise, so neither counts."""
    p = count_params(cfg)
    active_mlp = cfg.n_layers * (cfg.experts_per_token + cfg.n_shared_experts) * _mlp_params(cfg, cfg.expert_d_ff)
    return p["attention"] + active_mlp + p["router"] + cfg.vocab * cfg.d_model


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------


def attention_flops_per_token_forward(cfg: TransformerConfig, seq_len) -> float:
    """4 L h s: QK^T (2 s h per token per layer) and PV (2 s h), forward, full (non-causal) count."""
    check_number("seq_len", seq_len, minimum=0, strictly=False, maximum=MAX_COUNT)
    return 4.0 * cfg.n_layers * cfg.attn_dim * seq_len


def flops_per_token(cfg: TransformerConfig, seq_len, mode: str = "train", recompute: bool = False) -> float:
    """FLOPs per token. forward = 2 N_matmul + 4 L h s; train = 3 x forward (backward = 2 x
    forward); with full activation recompute the forward runs twice, 4 x forward."""
    check_choice("mode", mode, ("forward", "train"))
    fwd = 2.0 * matmul_params(cfg) + attention_flops_per_token_forward(cfg, seq_len)
    if mode == "forward":
        return fwd
    return (4.0 if recompute else 3.0) * fwd


def training_flops(cfg: TransformerConfig, tokens, seq_len, recompute: bool = False) -> float:
    """Total training FLOPs: (6 N_matmul + 12 L h s) x tokens (8 N + 16 L h s with recompute)."""
    check_number("tokens", tokens)
    return flops_per_token(cfg, seq_len, "train", recompute) * tokens


def six_nd(n_params, tokens) -> float:
    """The back-of-envelope C = 6 N D (ignores the attention term)."""
    check_number("n_params", n_params)
    check_number("tokens", tokens)
    return 6.0 * n_params * tokens


def training_time_s(total_flops, n_gpus, peak_flops_per_s, utilization) -> float:
    """Wall-clock seconds to execute ``total_flops`` on ``n_gpus`` at a utilisation of their peak.
    Model FLOPs with MFU give the plan; hardware FLOPs (with recompute) with HFU give the same
    wall-clock when both describe one run."""
    check_number("total_flops", total_flops)
    check_number("gpus", n_gpus, maximum=1e8)
    check_number("peak_flops_per_s", peak_flops_per_s)
    check_fraction("mfu", utilization)
    return total_flops / (n_gpus * peak_flops_per_s * utilization)


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------

ADAM_TRAINING_BYTES_PER_PARAM = 16.0  # bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam m, v 8


def weight_bytes(cfg: TransformerConfig, dtype: str = "bf16") -> float:
    """All weights at ``dtype`` (fp32 4, bf16 2, fp8 1, int4 0.5 bytes per parameter)."""
    return count_params(cfg)["total"] * dtype_bytes(dtype)


def training_state_bytes(cfg: TransformerConfig) -> float:
    """Weights, gradients and Adam state in mixed precision: 16 bytes per parameter."""
    return count_params(cfg)["total"] * ADAM_TRAINING_BYTES_PER_PARAM


def kv_cache_bytes_per_token(cfg: TransformerConfig, dtype: str = "bf16") -> float:
    """2 L K d_head w: one key and one value vector per layer per kv head."""
    return 2.0 * cfg.n_layers * cfg.kv_dim * dtype_bytes(dtype)


# ---------------------------------------------------------------------------------------------
# Presets and Hugging Face config.json files
# ---------------------------------------------------------------------------------------------

_FIELDS = {f.name for f in dataclasses.fields(TransformerConfig)} - {"key"}


def config_from_dict(key: str, spec: dict, origin: str = "models") -> TransformerConfig:
    """A config from one preset table (only what differs from the defaults)."""
    if not isinstance(spec, dict):
        raise RooflineError(f"{origin}.{key}: expected a table, got {spec!r}", field="model")
    spec = {k: v for k, v in spec.items() if k != "source"}
    unknown = set(spec) - _FIELDS
    if unknown:
        raise RooflineError(f"{origin}.{key}: unknown keys {sorted(unknown)}", field="model")
    for needed in ("name", "d_model", "n_layers", "n_heads", "vocab"):
        if needed not in spec:
            raise RooflineError(f"{origin}.{key}: missing {needed!r}", field="model")
    return TransformerConfig(key=key, **spec)


@functools.lru_cache(maxsize=1)
def _presets() -> dict[str, TransformerConfig]:
    text = resources.files("roofline").joinpath("data/models.toml").read_text(encoding="utf-8")
    doc = tomllib.loads(text)
    return {k: config_from_dict(k, v, "data/models.toml") for k, v in doc["models"].items()}


def list_models() -> list[TransformerConfig]:
    """Every preset model, in the data file's order."""
    return list(_presets().values())


def _hf_get(raw: dict, *names, default=None):
    for n in names:
        if raw.get(n) is not None:
            return raw[n]
    return default


def hf_config_to_model(raw: dict, name: str = "model") -> TransformerConfig:
    """Map a Hugging Face ``config.json`` (Llama, Mistral, Mixtral, Qwen2, GPT-2 families) to a
    TransformerConfig."""
    if not isinstance(raw, dict):
        raise RooflineError(f"{name}: a config.json must hold a JSON object", field="model")
    model_type = str(raw.get("model_type", ""))
    d_model = _hf_get(raw, "hidden_size", "n_embd", "d_model")
    n_layers = _hf_get(raw, "num_hidden_layers", "n_layer", "num_layers")
    n_heads = _hf_get(raw, "num_attention_heads", "n_head")
    vocab = _hf_get(raw, "vocab_size")
    missing = [k for k, v in (("hidden_size", d_model), ("num_hidden_layers", n_layers), ("num_attention_heads", n_heads), ("vocab_size", vocab)) if v is None]
    if missing:
        raise RooflineError(f"{name}: config.json lacks {', '.join(missing)}", field="model")
    if "kv_lora_rank" in raw or "first_k_dense_replace" in raw or model_type.startswith(("deepseek", "qwen2_moe", "qwen3_moe")):
        raise RooflineError(f"{name}: model_type {model_type!r} (latent attention, dense first layers or shared-expert "
                            "gates) is not supported; supported: Llama, Mistral, Mixtral, Qwen2, GPT-2 families", field="model")
    is_gpt2 = model_type in ("gpt2", "gpt_neo", "gptj") or "n_embd" in raw
    n_experts = _hf_get(raw, "num_local_experts", "n_routed_experts", "num_experts", default=1)
    kwargs = dict(
        name=str(raw.get("_name_or_path") or name),
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        vocab=vocab,
        n_kv_heads=_hf_get(raw, "num_key_value_heads", default=None),
        head_dim=_hf_get(raw, "head_dim", default=None),
        d_ff=_hf_get(raw, "intermediate_size", "n_inner", "ffn_dim", default=None),
        tied_embeddings=bool(raw.get("tie_word_embeddings", is_gpt2)),
        n_experts=n_experts,
        experts_per_token=_hf_get(raw, "num_experts_per_tok", default=1) if n_experts != 1 else 1,
        n_shared_experts=_hf_get(raw, "n_shared_experts", default=0) or 0,
        expert_d_ff=_hf_get(raw, "moe_intermediate_size", default=None) if n_experts != 1 else None,
    )
    if is_gpt2:
        kwargs.update(gated_mlp=False, norm="layernorm", attention_bias=True, attention_out_bias=True, mlp_bias=True,
                      max_position_embeddings=_hf_get(raw, "n_positions", "max_position_embeddings", default=1024))
    else:
        qkv_bias = model_type == "qwen2" or bool(raw.get("attention_bias", False))
        kwargs.update(attention_bias=qkv_bias, attention_out_bias=bool(raw.get("attention_bias", False)),
                      mlp_bias=bool(raw.get("mlp_bias", False)))
    try:
        return TransformerConfig(**kwargs)
    except TypeError as exc:
        raise RooflineError(f"{name}: malformed config.json ({exc})", field="model") from None


def load_hf_config(path: str | Path) -> TransformerConfig:
    """Read a local Hugging Face ``config.json``; nothing is fetched from the network."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RooflineError(f"cannot read model config {str(p)!r}: {exc.strerror}", field="model") from None
    except UnicodeDecodeError:
        raise RooflineError(f"{str(p)!r} is not a UTF-8 text file (expected a config.json)", field="model") from None
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{str(p)!r} is not valid JSON ({exc.msg} at line {exc.lineno})", field="model") from None
    return hf_config_to_model(raw, name=p.parent.name or p.stem)


def get_model(name) -> TransformerConfig:
    """A preset by key ('llama3-8b'), a TransformerConfig as is, or a local config.json path."""
    if isinstance(name, TransformerConfig):
        return name
    presets = _presets()
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    if key in presets:
        return presets[key]
    if str(name).endswith(".json") or Path(str(name)).is_file():
        return load_hf_config(name)
    raise unknown_name("model", name, presets)


__all__ = [
    "TransformerConfig", "count_params", "active_params", "matmul_params", "attention_flops_per_token_forward",
    "flops_per_token", "training_flops", "six_nd", "training_time_s", "weight_bytes", "training_state_bytes",
    "kv_cache_bytes_per_token", "get_model", "list_models", "load_hf_config", "hf_config_to_model", "DTYPE_BYTES",
]
