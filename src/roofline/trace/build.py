"""A preset key or config.json as a torch module for tracing (from_config): the plain blocks of
trace.models (LlamaLike, GPT2Like) where they fit, else trace.decoder.Decoder built layer by layer
from the Model; apart from both so that neither imports the other's builder.
"""

from __future__ import annotations

from roofline.trace.models import GPT2Like, LlamaLike, TransformerConfig, as_uniform_config


def _model_notes(model) -> tuple:
    """The notes of the Model a preset key or config.json loads into (keys not understood, dtypes
    assumed: hf_configs), for the trace's output."""
    from roofline.model_sources import get_model

    m = get_model(model)
    notes = tuple(getattr(m, "notes", ()))
    if str(getattr(m, "model_type", "")).startswith("gemma"):
        notes += ("Gemma traced with its GELU MLP: its embedding scale (x sqrt(d_model), one "
                  "elementwise op a forward) and its norms' (1 + w) weights are not traced",)
    return notes


def from_config(model):
    """A preset key, a config.json path (or a Model) as one of these torch modules, for tracing:
    SwiGLU RMSNorm models of one plain block, dense or with experts (Mixtral-like), as LlamaLike;
    LayerNorm GELU models with learned positions as GPT2Like; any other attention model (layer
    kinds, q/k norms, post- or sandwich norms, a gated shared expert) as decoder.Decoder, built
    layer by layer from its Model; what none builds is refused by name (give a
    PACKAGE.MODULE:FACTORY for it)."""
    from roofline.errors import RooflineError

    if isinstance(model, TransformerConfig):
        cfg = model
    else:
        try:
            cfg = as_uniform_config(model)
        except RooflineError:
            return _decoder(model)
    notes = [] if isinstance(model, TransformerConfig) else list(_model_notes(model))
    built = None
    if cfg.gated_mlp and cfg.norm == "rmsnorm":
        built = LlamaLike(cfg)
    elif not cfg.is_moe and not cfg.gated_mlp and cfg.norm == "layernorm" and cfg.n_kv_heads in (None, cfg.n_heads):
        built = GPT2Like(cfg)
    if built is None and not isinstance(model, TransformerConfig):
        return _decoder(model)
    if built is not None:
        built.notes = notes + list(getattr(built, "notes", []))  # what the config's loader ignored or assumed
        return built
    raise RooflineError(f"{cfg.name}: roofline trace builds Llama-like (SwiGLU, RMSNorm; dense or MoE) and GPT-2-like "
                        "(GELU, LayerNorm) models from a config; for this one give a PACKAGE.MODULE:FACTORY "
                        "that builds it", field="model")


def _decoder(model):
    """The Model of a preset key or config.json as a decoder.Decoder, with its loader's notes."""
    from roofline.model_sources import get_model
    from roofline.trace.decoder import Decoder

    built = Decoder(get_model(model))
    built.notes = list(_model_notes(model)) + built.notes
    return built
