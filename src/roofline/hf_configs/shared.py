"""The loader registry (SUPPORTED, filled by @loader, one loader per model_type) and the pieces every
loader builds with: activation, grouped-query heads, layer_types, windows and the final Model."""

from __future__ import annotations

import math

from typing import Callable

from roofline.architecture import Layer, Model
from roofline.errors import RooflineError
from roofline.hf_configs.keys import MAX_LAYERS, Keys

SUPPORTED: dict[str, Callable] = {}
MODULE_PARTS: dict[str, dict[str, tuple[str, ...]]] = {}  # model_type -> {checkpoint module: the parts it holds}


def loader(*model_types: str, module_parts: dict[str, tuple[str, ...]] | None = None):
    """Register the decorated function as the loader of ``model_types``. ``module_parts``: the
    checkpoint's layer modules that hold other parts than their usual names say (a skip list naming
    one keeps those parts: quant_parts.skip_rules), e.g. {"mlp": ("mlp", "shared_experts")}."""

    def deco(fn):
        for t in model_types:
            if t in SUPPORTED:
                raise RuntimeError(f"model_type {t!r} registered twice")
            SUPPORTED[t] = fn
            if module_parts:
                MODULE_PARTS[t] = dict(module_parts)
        return fn

    return deco


def activation_name(c: Keys, default="silu") -> str:
    return str(c.get("hidden_activation") or c.get("hidden_act", default))


def gqa_heads(c: Keys, D: int, heads: int) -> tuple[int, int]:
    kv = c.int("num_key_value_heads", heads)
    head_dim = c.get("head_dim")
    if head_dim is None:
        if D % heads:
            raise RooflineError(f"{c.name}: hidden_size {D} is not divisible by num_attention_heads {heads} and "
                                "head_dim is absent", field="model")
        head_dim = D // heads
    return kv, int(head_dim)


def read_layer_types(c: Keys, n: int, default: Callable[[int], str]) -> list[str]:
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


def ignored_key_note(key: str) -> str:
    """The note of a config key the loader does not understand (Model.ignored_keys)."""
    return f"config key {key!r} not understood: ignored"


def assemble(c: Keys, layers: list[Layer], D: int, V: int, tied: bool, **extra) -> Model:
    if len(layers) > MAX_LAYERS:
        raise RooflineError(f"{c.name}: {len(layers):,} layers; at most {MAX_LAYERS:,} are read", field="model")
    kinds: list[Layer] = []
    order = []
    for layer in layers:
        if layer not in kinds:
            kinds.append(layer)
        order.append(kinds.index(layer))
    notes = list(extra.pop("notes", ()))
    ignored = tuple(c.not_understood())
    notes += [ignored_key_note(k) for k in ignored]
    for k in c.not_finite():
        what = "not a number" if math.isnan(c.raw[k]) else "an infinity"  # worded, not printed: output is checked finite
        notes.append(f"config key {k!r} is {what}, not a finite value: the file is likely broken (the key does "
                     "not change the cost, so nothing here is affected)")
    return Model(name=c.name, d_model=D, vocab=V, kinds=tuple(kinds), order=tuple(order), tied_embeddings=tied,
                 notes=tuple(notes), ignored_keys=ignored, model_type=str(c.raw.get("model_type", "")), **extra)


def layer_window(types: list[str], i: int, window: int, chunk: int = 0) -> tuple[int, int]:
    t = types[i]
    if t == "sliding_attention":
        return window, 0
    if t == "chunked_attention":
        return 0, chunk
    return 0, 0
