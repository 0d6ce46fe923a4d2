"""The PyTorch model `roofline trace` runs on the meta device (docs/tracing.md): a
PACKAGE.MODULE:FACTORY imported and called, or a preset or config.json built by trace.build
(from_config), and the inputs of the step it traces; with what a failure of the user's code or of
the meta device says, in one line.
"""

from __future__ import annotations

import os
import sys

from roofline.errors import RooflineError


def first_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# what torch says when code needs a tensor's values, which the meta device does not have
DATA_DEPENDENT = ("meta tensor", "item()", "no data", "data-dependent", "data-independent", "nonzero")


def data_dependent(exc: BaseException) -> bool:
    """Whether torch failed for want of a tensor's values (DATA_DEPENDENT)."""
    return any(s in str(exc) for s in DATA_DEPENDENT)


def load_factory(spec: str):
    """'package.module:factory' -> the factory (the current directory is importable, as with
    `python -m`)."""
    import importlib
    import os

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise RooflineError(f"model must be PACKAGE.MODULE:FACTORY, e.g. roofline.trace.models:llama2_7b; got {spec!r}",
                            field="model")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except (ImportError, TypeError, ValueError) as exc:  # TypeError: a relative name such as '../x' or '.mod'
        raise RooflineError(f"cannot import {module_name!r} for {spec!r}: {first_line(exc)}", field="model") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise RooflineError(f"{module_name!r} has no callable {attr!r}", field="model")
    return factory


def is_factory(spec: str) -> bool:
    """PACKAGE.MODULE:FACTORY (code to import), rather than a preset or a config.json."""
    return ":" in spec and not spec.lower().endswith(".json")


def build_model(spec: str):
    """Call the factory (or build the preset or config.json with trace.build.from_config) on the
    meta device (no weights allocated) and put the model in eval mode."""
    from roofline.extras import require_torch

    torch = require_torch("roofline trace")
    if not is_factory(spec):
        from roofline.trace.build import from_config
        from roofline.transformer import list_models

        if spec not in {m.key for m in list_models()} and not os.path.exists(spec):
            raise RooflineError(f"model {spec!r} is not a preset (see `roofline models`) or a config.json path; for "
                                "code give PACKAGE.MODULE:FACTORY, e.g. roofline.trace.models:llama2_7b", field="model")
        try:
            with torch.device("meta"):
                return from_config(spec).eval()
        except RooflineError as exc:  # name what the user gave (the builder names the model's own name)
            if spec in str(exc):
                raise
            raise RooflineError(f"model {spec!r}: {exc}", field=exc.field or "model") from None
    factory = load_factory(spec)
    try:
        with torch.device("meta"):
            model = factory()
    except Exception as exc:  # noqa: BLE001 - the user's code: report it in one line
        raise RooflineError(f"{spec}() failed on the meta device: {first_line(exc)}", field="model") from None
    if not isinstance(model, torch.nn.Module):
        raise RooflineError(f"{spec}() returned {type(model).__name__}, not a torch.nn.Module", field="model")
    return model.eval()


def _within_positions(table: int, flag: str, value: int, positions: int) -> None:
    """A prefill or a cache no longer than the model's learned position table (GPT-2's n_positions:
    past it the embedding has no row); 10 million otherwise."""
    from roofline.errors import check_number

    check_number(flag.lstrip("-"), value, integer=True, maximum=10**7)
    if table and positions > table:
        raise RooflineError(f"{flag} {value:,} needs {positions:,} positions and the model learned {table:,} "
                            "(n_positions: its position table has no row past that)", field=flag.lstrip("-"))


def cache_shapes(model, batch: int, context: int) -> list[tuple[int, ...]]:
    """Each layer's K and V, (B, kv heads, S, d), for a decode step against ``context`` tokens: the
    model's own cache_shapes (trace.decoder.Decoder: a sliding layer keeps its window), else all
    layers alike from its TransformerConfig (LlamaLike, GPT2Like)."""
    if hasattr(model, "cache_shapes"):
        return model.cache_shapes(batch, context)
    cfg = model.cfg
    return [(batch, cfg.n_kv_heads or cfg.n_heads, context, cfg.head_dim)] * (2 * cfg.n_layers)


def step_inputs(model, args, torch, dtype):
    """Token ids for a prefill of --tokens at --batch, or one decode step's: one new token per
    sequence and each layer's K and V cache of --context tokens (meta tensors: nothing allocated)."""
    phase, batch = args.phase or "prefill", args.batch or 1
    cfg = getattr(model, "cfg", None)
    table = cfg.max_position_embeddings if cfg is not None else getattr(model, "max_position_embeddings", 0)
    if phase == "prefill":
        if args.context is not None:
            raise RooflineError("--context is the cache a decode step attends to: give --phase decode", field="context")
        tokens = args.tokens or 128
        _within_positions(table, "--tokens", tokens, tokens)
        return [torch.zeros(batch, tokens, dtype=torch.int64, device="meta")]
    if args.tokens is not None:
        raise RooflineError("--tokens is a prefill's length; a decode step makes one token: give --context", field="tokens")
    S = args.context or 4096
    _within_positions(table, "--context", S, S + 1)  # the new token sits at position S
    cache = [torch.zeros(shape, dtype=dtype, device="meta") for shape in cache_shapes(model, batch, S)]
    return [torch.zeros(batch, 1, dtype=torch.int64, device="meta"), *cache]
