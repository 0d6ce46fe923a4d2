"""Transformer accounting: configs, parameter counts, FLOPs per token, training FLOPs and time,
memory by dtype (the roofline chapter, sections 2.3 and 3.2).

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

from roofline.architecture import MLP, Attention, LatentAttention, Layer, Mamba, Mamba2, Model, MoE
from roofline.errors import MAX_COUNT, RooflineError, check_choice, check_fraction, check_number, unknown_name
from roofline.hf_configs import from_hf_config
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

    def to_model(self) -> Model:
        """The Model this uniform description stands for: n_layers copies of one layer."""
        attn = Attention(self.n_heads, self.n_kv_heads, self.head_dim, qkv_bias=self.attention_bias,
                         out_bias=self.attention_out_bias)
        act = "silu" if self.gated_mlp else "gelu"
        if self.is_moe:
            ff = MoE(self.n_experts, self.experts_per_token, self.expert_d_ff, self.gated_mlp, self.mlp_bias,
                     shared_d_ff=self.n_shared_experts * self.expert_d_ff, activation=act)
        else:
            ff = MLP(self.d_ff, self.gated_mlp, self.mlp_bias, act)
        layer = Layer(attn, ff, norm=self.norm)
        return Model(self.name, self.d_model, self.vocab, (layer,), (0,) * self.n_layers, self.tied_embeddings,
                     self.norm, self.max_position_embeddings, key=self.key)


def uniform_config(model, what: str = "this") -> TransformerConfig:
    """The TransformerConfig of a model whose layers are all one kind of plain attention (full
    causal, no window, chunk, q/k norm or sinks) with a dense MLP or a plain MoE: what the torch
    module builders (trace, check) can build. A message naming what does not fit otherwise."""
    m = get_model(model)
    factory = "give a PACKAGE.MODULE:FACTORY that builds it (docs/tracing.md)"
    layer = m.only_kind(what, hint=factory)
    a, ff = layer.mixer, layer.mlp
    problems = []
    if not isinstance(a, Attention):
        problems.append(f"token mixer {getattr(a, 'kind', 'none')}")
    elif a.span or a.qk_norm or a.sinks or a.v_head_dim != a.head_dim:
        problems.append(f"attention {a.kind}{' with q/k norms' if a.qk_norm else ''}{' with sinks' if a.sinks else ''}")
    if ff is None:
        problems.append("no MLP")
    elif isinstance(ff, MoE) and (ff.shared_gate or ff.router_bias or ff.bias):
        what_moe = [w for w, on in (("a shared-expert gate", ff.shared_gate), ("a router bias", ff.router_bias),
                                    ("expert biases", ff.bias)) if on]
        problems.append(f"a mixture of experts ({ff.kind}) with {' and '.join(what_moe)}")
    if layer.parallel or m.lm_head_bias or layer.n_norms != 2:
        problems.append("parallel attention + MLP, extra norms or an LM-head bias")
    if problems:
        raise RooflineError(f"{m.name}: {what} builds pre-norm blocks of full causal attention and a dense MLP or a "
                            f"plain mixture of experts; this model has {'; '.join(problems)}: {factory}", field="model")
    moe = isinstance(ff, MoE)
    shared = ff.shared_d_ff // ff.d_ff if moe and ff.shared_d_ff else 0
    if moe and shared * ff.d_ff != ff.shared_d_ff:
        raise RooflineError(f"{m.name}: shared expert width {ff.shared_d_ff} is not a multiple of the expert width", field="model")
    return TransformerConfig(
        name=m.name, d_model=m.d_model, n_layers=m.n_layers, n_heads=a.heads, vocab=m.vocab, n_kv_heads=a.kv_heads,
        head_dim=a.head_dim, d_ff=ff.d_ff, gated_mlp=ff.gated, tied_embeddings=m.tied_embeddings, norm=layer.norm,
        attention_bias=a.qkv_bias, attention_out_bias=a.out_bias, mlp_bias=ff.bias, max_position_embeddings=m.positions,
        n_experts=ff.n_experts if moe else 1, experts_per_token=ff.top_k if moe else 1, n_shared_experts=shared,
        expert_d_ff=ff.d_ff, key=m.key)


# ---------------------------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------------------------

PARTS = ("embedding", "position", "attention", "ssm", "mlp", "experts", "expert_biases", "shared_experts", "router", "norms",
         "lm_head")


def count_params(model) -> dict[str, int]:
    """Parameter count by part, with ``total``. Parts: embedding (V D), position (learned
    positions), attention and ssm (token mixers), mlp (dense), experts (every routed expert's weight
    matrices) and expert_biases, shared_experts, router, norms (each layer's and the final one), lm_head (V D and its bias; zero
    when tied to the embedding)."""
    m = get_model(model)
    D, V = m.d_model, m.vocab
    parts = dict.fromkeys(PARTS, 0)
    for layer, n in m.kind_counts():
        for k, v in layer.parts(D).items():
            parts[k] += n * v
    parts["embedding"] = V * D
    parts["position"] = m.positions * D
    parts["norms"] += 2 * D if m.final_norm == "layernorm" else D
    parts["lm_head"] = (0 if m.tied_embeddings else V * D) + (V if m.lm_head_bias else 0)
    parts["total"] = sum(parts.values())
    return parts


def _inactive_experts(m: Model) -> int:
    """Parameters of the routed experts one token does not use: (E - k) experts per MoE layer."""
    return sum(n * (k.mlp.n_experts - k.mlp.top_k) * k.mlp.expert.params(m.d_model) for k, n in m.kind_counts() if k.is_moe)


def active_params(model, embeddings: bool = True) -> int:
    """Parameters one token touches: every routed expert counts only if routed to (top_k of
    n_experts); shared experts always. Embedding and LM head are in (the model cards' convention);
    ``embeddings=False`` leaves the input embedding table (and learned positions) out. Equals
    count_params(model)['total'] for a dense model."""
    m = get_model(model)
    p = count_params(m)
    n = p["total"] - _inactive_experts(m)
    return n if embeddings else n - p["embedding"] - p["position"]


def _matmul_params_of(layer: Layer, D: int) -> int:
    """Weights one token multiplies by in a layer: the mixer's projections (an SSM's in/out
    projections, not its conv, A, D or norm), the active experts, shared experts, router, dense MLP."""
    n = 0
    mixer = layer.mixer
    if isinstance(mixer, Mamba2):
        n += D * mixer.in_proj_width + mixer.d_inner * D
    elif isinstance(mixer, Mamba):
        n += D * 2 * mixer.d_inner + mixer.d_inner * (mixer.dt_rank + 2 * mixer.d_state) + mixer.dt_rank * mixer.d_inner \
            + mixer.d_inner * D
    elif isinstance(mixer, Attention):
        a = mixer
        n += D * a.heads * a.head_dim + D * a.kv_heads * (a.head_dim + a.v_head_dim) + a.heads * a.v_head_dim * D
    elif isinstance(mixer, LatentAttention):
        n += mixer.params(D) - mixer.q_lora_rank - mixer.kv_lora_rank  # less the two norms
    ff = layer.mlp
    if isinstance(ff, MoE):
        n += ff.top_k * 2 * D * ff.d_ff * (1.5 if ff.gated else 1.0)
        n += (ff.shared.params(D) - (0 if not ff.shared.bias else 0)) if ff.shared_d_ff else 0
        n += D * ff.n_experts + (D if ff.shared_gate else 0)
    elif ff is not None:
        n += (3 if ff.gated else 2) * D * ff.d_ff
    return int(n)


def matmul_params(model) -> int:
    """Parameters one token multiplies by: every layer's projections (the active experts for MoE),
    the routers and the LM head (a matmul against the vocabulary even when tied). The input
    embedding is a gather, and norms, biases, convs and SSM decay terms are elementwise, so none
    counts."""
    m = get_model(model)
    return sum(n * _matmul_params_of(k, m.d_model) for k, n in m.kind_counts()) + m.vocab * m.d_model


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------


def attention_flops_per_token_forward(model, seq_len) -> float:
    """Attention's context term per token, forward, full (non-causal) count: per attention layer
    2 H (d_qk + d_v) s_eff, QK^T and PV, with s_eff = min(s, W) for sliding and chunked layers.
    For a plain model (d_qk = d_v = d_head, h = H d_head) that is the 4 L h s of the MFU convention.
    MLA counts its expanded per-head form (d_qk = nope + rope, d_v), as training runs it."""
    check_number("seq_len", seq_len, minimum=0, strictly=False, maximum=MAX_COUNT)
    m = get_model(model)
    total = 0.0
    for layer, n in m.kind_counts():
        a = layer.mixer
        if isinstance(a, Attention):
            s = min(seq_len, a.span) if a.span else seq_len
            total += n * 2.0 * a.heads * (a.head_dim + a.v_head_dim) * s
        elif isinstance(a, LatentAttention):
            total += n * 2.0 * a.heads * (a.qk_head_dim + a.v_head_dim) * seq_len
    return total


def scan_flops_per_token_forward(model) -> float:
    """State-space layers' scan and conv per token (Mamba2.scan_flops_per_token), forward."""
    m = get_model(model)
    return sum(n * k.mixer.scan_flops_per_token() for k, n in m.kind_counts() if k.is_ssm)


def train_flops_per_forward(recompute: bool = False) -> float:
    """Training FLOPs as a multiple of the forward's: 3 (the backward pass does 2 x the forward's
    matmul FLOPs, gradients of the inputs and of the weights); 4 with full activation recompute,
    the forward run a second time before the backward (Korthikanti et al. 2022, arXiv:2205.05198)."""
    return 4.0 if recompute else 3.0


def flops_per_token(model, seq_len, mode: str = "train", recompute: bool = False) -> float:
    """FLOPs per token. forward = 2 N_matmul + attention's context term + SSM scans; train =
    train_flops_per_forward x forward: 3 x, 4 x with full activation recompute."""
    check_choice("mode", mode, ("forward", "train"))
    m = get_model(model)
    fwd = 2.0 * matmul_params(m) + attention_flops_per_token_forward(m, seq_len) + scan_flops_per_token_forward(m)
    if mode == "forward":
        return fwd
    return train_flops_per_forward(recompute) * fwd


def training_flops(model, tokens, seq_len, recompute: bool = False) -> float:
    """Total training FLOPs: flops_per_token(train) x tokens ((6 N_matmul + 12 L h s) x tokens for
    a plain model; 8 N + 16 L h s with recompute)."""
    check_number("tokens", tokens)
    return flops_per_token(model, seq_len, "train", recompute) * tokens


def six_nd(n_params, tokens) -> float:
    """The back-of-envelope C = 6 N D: 2 N per token forward, train_flops_per_forward x that
    (Kaplan et al. 2020, arXiv:2001.08361, section 2.1; ignores the attention term)."""
    check_number("n_params", n_params)
    check_number("tokens", tokens)
    return train_flops_per_forward() * 2.0 * n_params * tokens


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

# Mixed-precision Adam (Rajbhandari et al. 2020, "ZeRO", arXiv:1910.02054, section 3.1):
# 2 psi bf16 weights + 2 psi bf16 gradients + K psi optimizer states, K = 12 (fp32 master weights,
# Adam momentum and variance): 16 bytes per parameter.
WEIGHT_BYTES_PER_PARAM = 2.0
GRADIENT_BYTES_PER_PARAM = 2.0
OPTIMIZER_BYTES_PER_PARAM = 12.0


def weight_bytes(model, dtype: str | None = None) -> float:
    """All weights: at ``dtype`` (fp32 4, bf16 2, fp8 1, int4 0.5 bytes per parameter), or as the
    checkpoint stores them (Model.storage: quantised parts at their width, the rest at the
    checkpoint's dtype) when dtype is None."""
    m = get_model(model)
    p = count_params(m)
    if dtype is not None:
        return p["total"] * dtype_bytes(dtype)
    base = dtype_bytes(m.storage.default)
    return float(sum(p[part] * m.storage.width(part, base) for part in PARTS))


def model_state_bytes(n_params, data_parallel: int = 1, zero: int = 0) -> dict[str, float]:
    """Weights, gradients and Adam state per GPU for ``n_params`` parameters, ZeRO stage ``zero``
    over ``data_parallel`` ranks: stage 1 shards the optimizer states, stage 2 the gradients too,
    stage 3 the weights too (ZeRO section 5; 7.5B params on 64 GPUs: 120, 31.4, 16.6, 1.88 GB)."""
    check_number("params", n_params)
    check_number("data_parallel", data_parallel, maximum=1e7, integer=True)
    check_choice("zero", zero, (0, 1, 2, 3))
    n, d = float(n_params), float(data_parallel)
    return {
        "weights": WEIGHT_BYTES_PER_PARAM * n / (d if zero >= 3 else 1.0),
        "gradients": GRADIENT_BYTES_PER_PARAM * n / (d if zero >= 2 else 1.0),
        "optimizer": OPTIMIZER_BYTES_PER_PARAM * n / (d if zero >= 1 else 1.0),
    }


def training_state_bytes(model) -> float:
    """Weights, gradients and Adam state in mixed precision on one GPU: 16 bytes per parameter
    (model_state_bytes without ZeRO)."""
    return sum(model_state_bytes(count_params(model)["total"]).values())


def cache_elems_per_sequence(model, context) -> object:
    """Elements one sequence of ``context`` tokens keeps in the cache, over all layers: K and V of
    min(S, W) tokens per attention layer (W the window or chunk, unlimited for full attention), MLA's
    latent, and each state-space layer's constant state. Arrays broadcast."""
    m = get_model(model)
    return sum(n * layer.cache_elems(context) for layer, n in m.kind_counts())


def cache_bytes_per_sequence(model, context, dtype: str = "bf16") -> object:
    """cache_elems_per_sequence x the cache dtype's width (SSM states too, at that width)."""
    return cache_elems_per_sequence(model, context) * dtype_bytes(dtype)


def kv_cache_bytes_per_token(model, dtype: str = "bf16") -> float:
    """What each further token adds to the cache at long context: K and V (K (d + d_v) w) of every
    full-attention layer, MLA's (kv_lora_rank + rope) w. Windowed, chunked and state-space layers
    add nothing past their window: use cache_bytes_per_sequence for the whole cache at a context.
    2 L K d_head w for a plain model."""
    m = get_model(model)
    per = sum(n * k.mixer.cache_elems_per_token() for k, n in m.kind_counts() if k.is_attention and not k.mixer.span)
    return float(per) * dtype_bytes(dtype)


# ---------------------------------------------------------------------------------------------
# Presets and Hugging Face config.json files
# ---------------------------------------------------------------------------------------------

PRESET_KEYS = {"name", "source", "config", "notes"}


def preset_from_table(key: str, table: dict, origin: str = "data/models.toml") -> Model:
    """A preset: its published config.json keys (``config``) read by the family's loader, with the
    preset's ``name`` and ``source``."""
    unknown = set(table) - PRESET_KEYS
    if unknown or "config" not in table or "name" not in table or "source" not in table:
        raise RooflineError(f"{origin}: models.{key} needs name, source and config (unknown keys: {sorted(unknown)})",
                            field="model")
    m = from_hf_config(dict(table["config"]), name=str(table["name"]))
    return dataclasses.replace(m, name=str(table["name"]), key=key)


@functools.lru_cache(maxsize=1)
def _preset_tables() -> dict[str, dict]:
    text = resources.files("roofline").joinpath("data/models.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["models"]


@functools.lru_cache(maxsize=None)
def _preset(key: str) -> Model:
    """One preset, built on first use (a command needs one, not all forty)."""
    return preset_from_table(key, _preset_tables()[key])


def _presets() -> dict[str, Model]:
    return {k: _preset(k) for k in _preset_tables()}


def list_models() -> list[Model]:
    """Every preset model, in the data file's order."""
    return list(_presets().values())


def hf_config_to_model(raw: dict, name: str = "model") -> Model:
    """A Model from a Hugging Face ``config.json`` dict: hf_configs.from_hf_config (one loader per
    model_type; unknown families refused by name)."""
    return from_hf_config(raw, name)


def config_name(raw, path: Path) -> str:
    """What a model read from ``path`` is called: its ``_name_or_path`` ('meta-llama/Meta-Llama-3-8B';
    a local path by its last folder), else the file's own name unless that is the generic 'config'
    (llama.json -> 'llama'), else its folder's (models/Llama-3-8B/config.json -> 'Llama-3-8B', the
    working folder's for a bare config.json), else its model_type."""
    raw = raw if isinstance(raw, dict) else {}
    given = str(raw.get("_name_or_path") or "").strip().rstrip("/\\")
    if given.startswith(("/", ".", "~")) or "\\" in given:  # a local checkpoint folder, not a hub id
        given = Path(given.replace("\\", "/")).name.strip(".")
    if given:
        return given
    if path.stem.lower() != "config":
        return path.stem
    return path.resolve().parent.name or str(raw.get("model_type") or "") or "model"


def load_hf_config(path: str | Path) -> Model:
    """Read a local Hugging Face ``config.json``; nothing is fetched from the network."""
    from roofline.files import json_failure, read_text

    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    text = read_text(p, "model config", "model", 16 * 2**20)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{str(p)!r} is not valid JSON ({exc.msg} at line {exc.lineno})", field="model") from None
    except (ValueError, RecursionError) as exc:  # integers of thousands of digits, nesting past the recursion limit
        raise RooflineError(f"{str(p)!r} could not be read as JSON ({json_failure(exc)})", field="model") from None
    name = config_name(raw, p)
    if isinstance(raw, dict) and raw.get("_name_or_path"):  # from_hf_config names a model by it: the shortened one
        raw = {**raw, "_name_or_path": name}
    try:
        return hf_config_to_model(raw, name=name)
    except RooflineError as exc:  # say which file: the model's name is its folder's, often not the file's
        msg = str(exc)
        msg = msg[len(name) + 2:] if msg.startswith(f"{name}: ") else msg
        raise RooflineError(f"model config {str(p)!r}: {msg}", field=exc.field or "model") from None


def get_model(name) -> Model:
    """A preset by key ('llama3-8b'), a Model as is, a TransformerConfig (uniform) as its Model,
    or a local config.json path (or a folder holding one)."""
    if isinstance(name, Model):
        return name
    if isinstance(name, TransformerConfig):
        return name.to_model()
    presets = _preset_tables()
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    if key in presets:
        return _preset(key)
    if str(name).endswith(".json") or Path(str(name)).is_file() or (Path(str(name)) / "config.json").is_file():
        return load_hf_config(name)
    if Path(str(name)).is_dir():
        raise RooflineError(f"model folder {str(name)!r} has no config.json", field="model")
    raise unknown_name("model", name, presets)


def model_summary(model) -> dict:
    """What a listing shows of a model: name, type, layers and their kinds, totals, cache."""
    m = get_model(model)
    p = count_params(m)
    return {
        "key": m.key, "name": m.name, "model_type": m.model_type, "layers": m.n_layers, "d_model": m.d_model,
        "vocab": m.vocab, "params": p["total"], "active_params": active_params(m) if m.is_moe else p["total"],
        "layer_kinds": [{"kind": k.label, "count": n, "first_layer": m.layers.index(k)} for k, n in m.kind_counts()],
        "pattern": m.pattern(),
        "weights_stored": m.storage.label(), "omitted": list(m.omitted), "notes": list(m.notes),
        "kv_bytes_per_token_past_windows_bf16": kv_cache_bytes_per_token(m),
        "cache_bytes_per_sequence_bf16": {str(S): float(cache_bytes_per_sequence(m, S)) for S in (4096, 32768, 131072)},
        "max_context": m.max_context or None,
    }


__all__ = [
    "TransformerConfig", "Model", "count_params", "active_params", "matmul_params", "attention_flops_per_token_forward",
    "flops_per_token", "training_flops", "six_nd", "training_time_s", "weight_bytes", "training_state_bytes",
    "model_state_bytes", "train_flops_per_forward",
    "kv_cache_bytes_per_token", "cache_bytes_per_sequence", "get_model", "list_models", "load_hf_config",
    "hf_config_to_model", "uniform_config", "model_summary", "DTYPE_BYTES",
]
