"""Loaders of NVIDIA's own families outside Nemotron-H: the Llama-Nemotron models found by neural
architecture search (nemotron-nas, DeciLM's code), whose layers each keep or drop attention and
size their own MLP."""

from __future__ import annotations

from roofline.architecture import MLP, Attention, Layer, Model
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.shared import activation_name, assemble, loader

NAS_ATTENTION_KEYS = {"n_heads_in_group", "no_op", "replace_with_linear", "sparsify", "num_sink_tokens", "unshifted_sink",
                      "use_prefill_window_in_sink_attention", "window_length"}
NAS_FFN_KEYS = {"ffn_mult", "no_op", "replace_with_linear", "sparsify", "intermediate_size"}


def _ffn_width(mult: float, d_model: int) -> int:
    """DeciLM's _ffn_mult_to_intermediate_size: int(2 mult D / 3) rounded up to a multiple of 256."""
    n = int(2 * mult * d_model / 3)
    return -(-n // 256) * 256


def _nas_block(c: Keys, i: int, block, H: int, D: int, act: str, mlp_bias: bool, attention_bias: bool) -> Layer:
    """One entry of block_configs as a Layer: attention unless no_op (kv heads H / n_heads_in_group),
    a gated MLP unless no_op (ffn_mult, or intermediate_size); a norm before each part kept."""
    where = f"{c.name}: block_configs[{i}]"
    if not isinstance(block, dict) or not isinstance(block.get("attention"), dict) or not isinstance(block.get("ffn"), dict):
        raise RooflineError(f"{where} must hold an 'attention' and an 'ffn' object", field="model")
    attn, ffn = block["attention"], block["ffn"]
    unknown = sorted((set(attn) - NAS_ATTENTION_KEYS) | (set(ffn) - NAS_FFN_KEYS) | (set(block) - {"attention", "ffn"}))
    if unknown:
        raise RooflineError(f"{where}: keys {unknown} not understood; this loader reads attention "
                            f"{sorted(NAS_ATTENTION_KEYS)} and ffn {sorted(NAS_FFN_KEYS)}", field="model")
    for part, conf in (("attention", attn), ("ffn", ffn)):
        for key in ("replace_with_linear", "sparsify"):
            if conf.get(key):
                raise RooflineError(f"{where}: {part} {key} {conf[key]!r} is not yet supported (a layer replaced by "
                                    "one linear map, or sparsified, has no rule here)", field="model")
    if attn.get("window_length") or attn.get("num_sink_tokens") or attn.get("unshifted_sink") \
            or attn.get("use_prefill_window_in_sink_attention"):
        raise RooflineError(f"{where}: windowed or sink attention (window_length, num_sink_tokens) is not yet supported",
                            field="model")
    mixer = None
    if not attn.get("no_op"):
        group = attn.get("n_heads_in_group")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1 or H % group:
            raise RooflineError(f"{where}: attention n_heads_in_group must divide num_attention_heads {H}, got {group!r}",
                                field="model")
        mixer = Attention(H, H // group, D // H, qkv_bias=attention_bias, out_bias=attention_bias)
    mlp = None
    if not ffn.get("no_op"):
        if ffn.get("intermediate_size") is not None:
            width = ffn["intermediate_size"]
        else:
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult < 1000:
                raise RooflineError(f"{where}: ffn ffn_mult must be a positive number, got {mult!r}", field="model")
            width = _ffn_width(mult, D)
        mlp = MLP(int(width), bias=mlp_bias, activation=act)
    if mixer is None and mlp is None:
        raise RooflineError(f"{where}: attention and ffn are both no_op (an identity layer) - not yet supported",
                            field="model")
    return Layer(mixer, mlp)


@loader("nemotron-nas")
def _nemotron_nas(c: Keys) -> Model:
    """DeciLMConfig (Llama-3.1/3.3-Nemotron Nano, Super, Ultra; NVIDIA's modeling_decilm.py): Llama
    with a block_configs entry per layer. attention: no_op drops the attention and its input norm;
    otherwise num_attention_heads query heads of hidden_size / heads, num_attention_heads /
    n_heads_in_group kv heads, attention_bias on q, k, v and o. ffn: no_op drops the MLP and its
    norm; otherwise a gated MLP of _ffn_width(ffn_mult, D). intermediate_size and
    num_key_value_heads at the top are null (per layer instead). tie False."""
    D, L, H, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("num_attention_heads"), c.pos("vocab_size")
    if D % H:
        raise RooflineError(f"{c.name}: hidden_size {D} is not divisible by num_attention_heads {H}", field="model")
    blocks = c.need("block_configs")
    if not isinstance(blocks, list) or len(blocks) != L:
        raise RooflineError(f"{c.name}: block_configs must list {L} layers (num_hidden_layers)", field="model")
    for key in ("intermediate_size", "num_key_value_heads"):
        if c.get(key) is not None:
            raise RooflineError(f"{c.name}: {key} {c.raw[key]!r} at the top of a nemotron-nas config: the sizes are "
                                "per layer, in block_configs", field="model")
    act, mlp_bias, attention_bias = activation_name(c), c.flag("mlp_bias", False), c.flag("attention_bias", False)
    built: dict = {}
    layers = []
    for i, block in enumerate(blocks):
        layer = _nas_block(c, i, block, H, D, act, mlp_bias, attention_bias)
        layers.append(built.setdefault(layer, layer))
    return assemble(c, layers, D, V, c.flag("tie_word_embeddings", False))
