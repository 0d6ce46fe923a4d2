"""Where a Model comes from: a preset (data/models.toml), a Hugging Face config.json, or a
TransformerConfig (a uniform decoder described in a few numbers); get_model takes any of them.

A preset is its model's published config.json keys, read by the family's loader (hf_configs), with
the preset's name and source. A config.json is read from disk only: nothing is fetched from the
network. TransformerConfig.to_model and uniform_config go between a uniform Model and the few
numbers the torch module builders (trace, check) need.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from roofline.architecture import MLP, Attention, Layer, Model, MoE
from roofline.errors import MAX_COUNT, RooflineError, check_choice, check_number, unknown_name
from roofline.hf_configs import from_hf_config

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
    activation: str = ""  # the MLP's, as config.json names it (silu, gelu_pytorch_tanh, ...); "" the builder's usual

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
    elif a.span or a.index_topk or a.qk_norm or a.sinks or a.output_gate or a.v_head_dim != a.head_dim or a.k_eq_v:
        kind = a.kind if "attention" in a.kind else f"attention {a.kind}"
        problems.append(f"{kind}{' with q/k norms' if a.qk_norm else ''}{' with sinks' if a.sinks else ''}"
                        f"{' with an output gate' if a.output_gate else ''}{' with values from the keys' if a.k_eq_v else ''}")
    if ff is None:
        problems.append("no MLP")
    elif isinstance(ff, MoE) and (ff.shared_gate or ff.router_bias or ff.bias or ff.latent or ff.router_scales):
        what_moe = [w for w, on in (("a shared-expert gate", ff.shared_gate), ("a router bias", ff.router_bias),
                                    ("expert biases", ff.bias), ("latent projections", ff.latent),
                                    ("router scales", ff.router_scales)) if on]
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
        expert_d_ff=ff.d_ff, key=m.key, activation=ff.activation)


# ---------------------------------------------------------------------------------------------
# Presets and Hugging Face config.json files
# ---------------------------------------------------------------------------------------------

PRESET_KEYS = {"name", "source", "config", "config_file", "aliases", "notes"}


def preset_from_table(key: str, table: dict, origin: str = "data/models.toml") -> Model:
    """A preset: its published config.json keys (``config``, or ``config_file``: a JSON file under
    data/ in the package, for configs too long to write as TOML) read by the family's loader, with
    the preset's ``name`` and ``source``."""
    unknown = set(table) - PRESET_KEYS
    if unknown or ("config" in table) == ("config_file" in table) or "name" not in table or "source" not in table:
        raise RooflineError(f"{origin}: models.{key} needs name, source and one of config or config_file (unknown "
                            f"keys: {sorted(unknown)})", field="model")
    raw = _config_file(key, table["config_file"], origin) if "config_file" in table else dict(table["config"])
    m = from_hf_config(raw, name=str(table["name"]), preset=True)
    return dataclasses.replace(m, name=str(table["name"]), key=key)


def _config_file(key: str, rel, origin: str) -> dict:
    """The config.json a preset names by ``config_file``: a path under the package's data/ folder
    (configs/NAME.json), read as JSON."""
    parts = str(rel).split("/")
    if not isinstance(rel, str) or not rel.endswith(".json") or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise RooflineError(f"{origin}: models.{key}.config_file {rel!r} must be a relative path to a .json file "
                            "under data/ (configs/NAME.json)", field="model")
    try:
        return json.loads(resources.files("roofline").joinpath("data", *parts).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RooflineError(f"{origin}: models.{key}.config_file {rel!r} could not be read ({exc})", field="model") from None


@functools.lru_cache(maxsize=1)
def _preset_tables() -> dict[str, dict]:
    text = resources.files("roofline").joinpath("data/models.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["models"]


@functools.lru_cache(maxsize=1)
def preset_aliases() -> dict[str, str]:
    """Other keys a preset answers to (its table's ``aliases``): {alias: key}. An old name kept
    working (llama3-405b, for the model whose name is Llama 3.1 405B)."""
    tables, out = _preset_tables(), {}
    for key, table in tables.items():
        for alias in table.get("aliases", ()):
            if not isinstance(alias, str) or alias in tables or alias in out:
                raise RooflineError(f"data/models.toml: models.{key}.aliases: {alias!r} is already a preset key or "
                                    "alias", field="model")
            out[alias] = key
    return out


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
    name = _config_name(raw, path)
    if name.strip().lstrip("+-").lower() in ("nan", "inf", "infinity"):  # a name that reads as a number's failure:
        return path.name if path.stem.lower() != "config" else f"{path.resolve().parent.name}/{path.name}"  # the file's
    return name


def _config_name(raw, path: Path) -> str:
    raw = raw if isinstance(raw, dict) else {}
    given = str(raw.get("_name_or_path") or "").strip().rstrip("/\\")
    if given.startswith(("/", ".", "~")) or "\\" in given:  # a local checkpoint folder, not a hub id
        given = Path(given.replace("\\", "/")).name.strip(".")
    if given:
        return given
    if path.stem.lower() != "config":
        return path.stem
    return path.resolve().parent.name or str(raw.get("model_type") or "") or "model"


_LOADED: dict = {}  # (path as given, resolved, its text, its companion's) -> Model (load_hf_config)


def load_hf_config(path: str | Path) -> Model:
    """Read a local Hugging Face ``config.json``; nothing is fetched from the network. A file read before
    with the same text (and the same ModelOpt companion beside it), by the same path, returns the Model
    read then (a frozen value): a sweep over deployments of one model parses its config once."""
    from roofline.files import read_text

    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    text = read_text(p, "model config", "model", 16 * 2**20)
    c = _companion_path(p)
    try:
        beside = read_text(c, "ModelOpt quantization config", "model", 16 * 2**20) if c is not None else None
    except RooflineError:  # _with_companion says why, where it reads it
        beside = False
    key = (str(path), str(p.resolve()), text, beside)
    got = _LOADED.get(key)
    if got is None:
        got = _read_hf_config(p, text)
        if len(_LOADED) >= 64:
            _LOADED.clear()
        _LOADED[key] = got
    return got


def _read_hf_config(p: Path, text: str) -> Model:
    """load_hf_config's Model from ``text``, the config.json at ``p``."""
    from roofline.files import check_file_numbers, json_failure

    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{str(p)!r} is not valid JSON ({exc.msg} at line {exc.lineno})", field="model") from None
    except (ValueError, RecursionError) as exc:  # integers of thousands of digits, nesting past the recursion limit
        raise RooflineError(f"{str(p)!r} could not be read as JSON ({json_failure(exc)})", field="model") from None
    check_file_numbers(raw, f"model config {str(p)!r}", "model")
    raw, companion = _with_companion(raw, p)
    name = config_name(raw, p)
    if _preset_key(name) is not None:  # a folder named like a preset: the name would title the preset's results
        name = f"{name} ({p})"
    if isinstance(raw, dict) and raw.get("_name_or_path"):  # from_hf_config names a model by it: the shortened one
        raw = {**raw, "_name_or_path": name}
    try:
        model = hf_config_to_model(raw, name=name)
        return dataclasses.replace(model, notes=model.notes + companion) if companion else model
    except RooflineError as exc:  # say which file: the model's name is its folder's, often not the file's
        msg = str(exc)
        msg = msg[len(name) + 2:] if msg.startswith(f"{name}: ") else msg
        raise RooflineError(f"model config {str(p)!r}: {msg}", field=exc.field or "model") from None


def _companion_path(p: Path) -> Path | None:
    """The ModelOpt companion beside a config.json: hf_quant_config.json in its folder, or, for a
    file named NAME_config.json, NAME_hf_quant_config.json (as collections of configs name them)."""
    stem = p.name[: -len("_config.json")] if p.name.endswith("_config.json") else None
    for c in ((p.parent / f"{stem}_hf_quant_config.json") if stem else None, p.parent / "hf_quant_config.json"):
        if c is not None and c.is_file() and c.resolve() != p.resolve():
            return c
    return None


def _with_companion(raw, p: Path) -> tuple[object, tuple[str, ...]]:
    """``raw`` with the quantization_config of the ModelOpt hf_quant_config.json beside it, where
    config.json has none of its own (NVIDIA's FP8 and NVFP4 exports keep it there alone), and a
    note saying it was read (or why not)."""
    from roofline.files import check_file_numbers, read_text
    from roofline.hf_configs.quant_formats import modelopt_companion

    c = _companion_path(p)
    if c is None or not isinstance(raw, dict):
        return raw, ()
    held = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if held is not None:
        return raw, (f"{c.name} beside the config not read: the config's own quantization_config is",)
    try:
        companion = json.loads(read_text(c, "ModelOpt quantization config", "model", 16 * 2**20))
    except (ValueError, RecursionError):
        raise RooflineError(f"{str(c)!r} (the ModelOpt quantization config beside {p.name}) is not valid JSON",
                            field="model") from None
    check_file_numbers(companion, f"{str(c)!r}", "model")
    q = modelopt_companion(companion, str(c))
    return {**raw, "quantization_config": q}, (f"quantisation read from {c.name} beside the config (ModelOpt "
                                               f"{q.get('quant_algo')})",)


def _preset_key(name) -> str | None:
    """The preset key ``name`` spells ('Llama3_8B' -> 'llama3-8b'), or None."""
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    return key if key in _preset_tables() else preset_aliases().get(key)


def get_model(name) -> Model:
    """A preset by key ('llama3-8b'), a Model as is, a TransformerConfig (uniform) as its Model,
    or a local config.json path (or a folder holding one)."""
    if isinstance(name, Model):
        return name
    if isinstance(name, TransformerConfig):
        return name.to_model()
    presets = _preset_tables()
    if not str(name).strip():  # Path("") is ".": the folder the command runs in, never what was meant
        raise RooflineError(f"model {str(name)!r}: an empty name; give a preset (see `roofline models`) or a "
                            "config.json path", field="model")
    if "\x00" in str(name):
        raise RooflineError(f"model {str(name)!r}: a name cannot contain a NUL character", field="model")
    key = _preset_key(name)
    if key is not None:
        return _preset(key)
    if str(name).endswith(".json") or Path(str(name)).is_file() or (Path(str(name)) / "config.json").is_file():
        return load_hf_config(name)
    if Path(str(name)).is_dir():
        raise RooflineError(f"model folder {str(name)!r} has no config.json", field="model")
    raise unknown_name("model", name, presets)
