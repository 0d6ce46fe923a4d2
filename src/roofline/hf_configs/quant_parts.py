"""What a quantised checkpoint stores, matrix by matrix: a Scheme (the bytes of one quantised
weight matrix of N outputs x K inputs: values, scales, zero points, per-tensor scalars, group
indices), the weight matrices of each part of a layer (their shapes), the modules a skip or ignore
list names (parts, layers, single matrices), and the WeightStorage these price: each part at the
mean width of its bytes as stored over its parameters."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from roofline.architecture import WeightStorage
from roofline.errors import RooflineError
from roofline.hf_configs.shared import MODULE_PARTS
from roofline.mixers import MLP, Attention, GatedDeltaNet, LatentAttention, Mamba, Mamba2, MoE, ParallelMixer
from roofline.units import DTYPE_BYTES

QUANTISED_PARTS = ("attention", "ssm", "mlp", "experts", "shared_experts")
LAYER_PARTS = QUANTISED_PARTS + ("router",)


@dataclass(frozen=True)
class Scheme:
    """How a format stores one quantised weight matrix of N outputs x K inputs, in bytes:
    N K bits / 8 for the values; a scale (and a zero point, ``zero_bytes`` > 0 for asymmetric
    formats) per ``group`` inputs of each row (N ceil(K / g) of them), per ``block`` (ceil(N / bh)
    ceil(K / bw)) or per row (``rows``: N); ``tensor_bytes`` whatever its size (per-tensor and
    global scales, a static input scale, a stored shape); ``input_bytes`` per input column (GPTQ's
    g_idx, int32). ``label`` begins with the stored value type (fp8, int4, fp4, mxfp4, nf4).
    ``acts``: the dtype the serving engines quantise the matmul's inputs to and compute it in,
    where they run the format so (fp8 W8A8, NVFP4 W4A4 on a GPU with that arithmetic); "" for a
    weight-only format, whose weights are dequantised into 16-bit matmuls."""

    label: str
    bits: float
    scale_bytes: float = 0.0
    zero_bytes: float = 0.0
    group: int = 0
    block: tuple[int, int] | None = None
    rows: bool = False
    tensor_bytes: float = 0.0
    input_bytes: float = 0.0
    acts: str = ""

    def matrix_bytes(self, n: int, k: int) -> float:
        """N K bits/8 + scales x (scale + zero bytes) + tensor_bytes + K input_bytes."""
        if self.group:
            scales = n * math.ceil(k / self.group)
        elif self.block:
            scales = math.ceil(n / self.block[0]) * math.ceil(k / self.block[1])
        else:
            scales = n if self.rows else 0
        return n * k * self.bits / 8 + scales * (self.scale_bytes + self.zero_bytes) + self.tensor_bytes + k * self.input_bytes

    def per_value(self) -> float:
        """Bytes a weight where the matrices' shapes are not known: values and group or block
        scales spread over them (per-row, per-tensor and per-column terms left out)."""
        w = self.bits / 8
        if self.group:
            w += (self.scale_bytes + self.zero_bytes) / self.group
        elif self.block:
            w += self.scale_bytes / (self.block[0] * self.block[1])
        return w

    @property
    def shape_terms(self) -> bool:
        return bool(self.rows or self.tensor_bytes or self.input_bytes)


@dataclass(frozen=True)
class RunStorage(WeightStorage):
    """A WeightStorage read from a quantization_config, with the parts whose matmuls the serving
    engines run narrower than the checkpoint's dtype, inputs quantised too (fp8 W8A8, NVFP4 W4A4:
    Scheme.acts), as (part, dtype), and how those fp8 weights are scaled ("block", "tensor", ""
    without fp8 matmuls): matmuls_run. Precision.as_stored reads them."""

    matmuls: tuple[tuple[str, str], ...] = ()
    fp8_scaling: str = ""


def _mlp_matrices(mlp: MLP, d: int, count: int = 1) -> list[tuple[str, int, int, int]]:
    gated = [("gate_proj", mlp.d_ff, d, count)] if mlp.gated else []
    return gated + [("up_proj", mlp.d_ff, d, count), ("down_proj", d, mlp.d_ff, count)]


def layer_matrices(layer, d: int) -> dict[str, list[tuple[str, int, int, int]] | None]:
    """The weight matrices of each part of a layer as (name, N out, K in, how many), the names
    transformers gives them; None for a part whose mixer this reader does not know."""
    out: dict[str, list | None] = {}
    m = layer.mixer
    if isinstance(m, ParallelMixer):  # Falcon-H1: self_attn's and mamba's matrices, each its own part
        for part in m.parts:
            out.update(layer_matrices(type(layer)(part, None), d))
        m = None
    if isinstance(m, Attention):
        H, K, hd, vd = m.heads, m.kv_heads, m.head_dim, m.v_head_dim
        q = H * hd * (2 if m.output_gate else 1)  # a gated attention's q_proj carries the gate too (Qwen3-Next)
        v = [] if m.k_eq_v else [("v_proj", K * vd, d, 1)]  # Gemma 4's full layers take values from the keys
        index = [("index_q_proj", m.index_heads * m.index_head_dim, d, 1), ("index_k_proj", m.index_head_dim, d, 1)]
        out["attention"] = [("q_proj", q, d, 1), ("k_proj", K * hd, d, 1), *v, ("o_proj", d, H * vd, 1),
                            *(index if m.index_topk else [])]  # MiniMax-M3's MSA block indexer
    elif isinstance(m, LatentAttention):
        H, r, q = m.heads, m.kv_lora_rank, m.q_lora_rank
        query = ([("q_a_proj", q, d, 1), ("q_b_proj", H * m.qk_head_dim, q, 1)] if q
                 else [("q_proj", H * m.qk_head_dim, d, 1)])
        out["attention"] = query + [("kv_a_proj_with_mqa", r + m.qk_rope_head_dim, d, 1),
                                    ("kv_b_proj", H * (m.qk_nope_head_dim + m.v_head_dim), r, 1),
                                    ("o_proj", d, H * m.v_head_dim, 1)]
        if m.index_heads:  # DSA's lightning indexer (vLLM's and DeepSeek's names; GLM-5 calls weights_proj indexers_proj)
            HI, dI = m.index_heads, m.index_head_dim
            out["attention"] += [(INDEXER_MATRICES[0], HI * dI, q, 1), (INDEXER_MATRICES[1], dI, d, 1),
                                 (INDEXER_MATRICES[2], HI, d, 1)]
    elif isinstance(m, GatedDeltaNet) and m.gate_rank:  # Kimi Delta Attention (vLLM's names)
        r = m.gate_rank
        out["ssm"] = [("q_proj", m.key_dim, d, 1), ("k_proj", m.key_dim, d, 1), ("v_proj", m.value_dim, d, 1),
                      ("b_proj", m.v_heads, d, 1), ("f_a_proj", r, d, 1), ("f_b_proj", m.key_dim, r, 1),
                      ("g_a_proj", r, d, 1), ("g_b_proj", m.value_dim, r, 1), ("o_proj", d, m.value_dim, 1)]
    elif isinstance(m, GatedDeltaNet) and m.split_projections:  # Qwen3.5's names
        out["ssm"] = [("in_proj_qkv", 2 * m.key_dim + m.value_dim, d, 1), ("in_proj_z", m.value_dim, d, 1),
                      ("in_proj_b", m.v_heads, d, 1), ("in_proj_a", m.v_heads, d, 1), ("out_proj", d, m.value_dim, 1)]
    elif isinstance(m, GatedDeltaNet):  # Qwen3-Next's fused names
        out["ssm"] = [("in_proj_qkvz", 2 * m.key_dim + 2 * m.value_dim, d, 1), ("in_proj_ba", 2 * m.v_heads, d, 1),
                      ("out_proj", d, m.value_dim, 1)]
    elif isinstance(m, Mamba2):
        out["ssm"] = [("in_proj", m.in_proj_width, d, 1), ("out_proj", d, m.d_inner, 1)]
    elif isinstance(m, Mamba):
        I, N, R = m.d_inner, m.d_state, m.dt_rank
        out["ssm"] = [("in_proj", 2 * I, d, 1), ("x_proj", R + 2 * N, I, 1), ("dt_proj", I, R, 1), ("out_proj", d, I, 1)]
    elif m is not None:
        out["ssm" if layer.is_ssm else "attention"] = None
    f = layer.mlp
    if isinstance(f, MoE):
        w = f.expert_width(d)  # a latent MoE's experts work at its latent R, between two projections (Nemotron-3)
        out["experts"] = _mlp_matrices(f.expert, w, f.n_experts) + (
            [("fc1_latent_proj", f.latent, d, 1), ("fc2_latent_proj", d, f.latent, 1)] if f.latent else [])
        shared = _mlp_matrices(f.shared, d) if f.shared_d_ff else []
        out["shared_experts"] = shared + ([("shared_expert_gate", 1, d, 1)] if f.shared_gate else [])
        out["router"] = [("gate", f.n_experts, d, 1)]
    elif isinstance(f, MLP):
        out["mlp"] = _mlp_matrices(f, d)
    elif f is not None:
        out["mlp"] = None
    return out


# ---------------------------------------------------------------------------------------------
# Skip and ignore lists
# ---------------------------------------------------------------------------------------------

_PART_PATTERNS = (("shared_expert", "shared_experts"), ("experts", "experts"), ("router", "router"),
                  ("mlp.gate", "router"), ("linear_attn", "ssm"), ("self_attn", "attention"), ("attn", "attention"), ("mixer", "ssm"),
                  ("mamba", "ssm"), ("embed", "embedding"), ("lm_head", "lm_head"), ("mlp", "mlp"),
                  ("feed_forward", "mlp"), ("block_sparse_moe", "mlp"))
_MLP_BLOCKS = ("mlp", "feed_forward", "block_sparse_moe")  # a layer's whole channel mixer (Llama 4's, Mixtral's names)
# modules the loader leaves out of the count (a vision tower, multi-token prediction): skipping them changes nothing priced
_UNPRICED_PATTERNS = ("visual", "vision", "multi_modal", "mm_projector", "patch_merge", "mtp")
# weights no format here quantises (not Linear layers): naming them changes nothing
_NEVER_QUANTISED = ("norm", "conv1d", "e_score_correction_bias", "rotary_emb", "a_log", "dt_bias")
_ATTENTION_MATRICES = ("q_proj", "k_proj", "v_proj", "o_proj")
INDEXER_MATRICES = ("indexer.wq_b", "indexer.wk", "indexer.weights_proj")  # DSA's indexer, as layer_matrices names them
_INDEXER_NAMES = {"wq_b": INDEXER_MATRICES[0], "wk": INDEXER_MATRICES[1], "weights_proj": INDEXER_MATRICES[2],
                  "indexers_proj": INDEXER_MATRICES[2]}  # a skip list's last name -> the matrix (GLM-5: indexers_proj)
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)(?=[.*]|$)")
_MATRIX = re.compile(r"\.(\w+_proj(?:_with_mqa|_qkvz?|_z|_ba|_b|_a)?|shared_expert_gate)$")  # in_proj_qkv: Gated DeltaNet
_PROJECTION = re.compile(r"\.(\w*_proj|fc\d|w\d|dense\w*|c_fc|c_proj)$")


@dataclass(frozen=True)
class Skip:
    """One entry of a skip list as read: the part it names, the layers (None: all) and the one
    matrix (None: the whole part) it keeps unquantised; or, with a ``scheme``, one entry of a
    per-module listing (ModelOpt's MIXED_PRECISION), which stores those matrices so."""

    part: str
    layers: frozenset[int] | None = None
    matrix: str | None = None
    scheme: Scheme | None = None


def _plain(pattern: str) -> str:
    """A name, glob or ``re:`` regex reduced to the dotted text the part patterns look for."""
    low = pattern.strip().lower()
    if low.startswith("re:"):
        low = low[3:].lstrip("^").rstrip("$").replace("\\.", ".").replace(".*", "*")
    return low.strip("*").rstrip(".")


def skip_rules(skip: list[str], name: str, n_layers: int, key: str = "modules_to_not_convert",
               mtp_layers: int = 0, model_type: str = "") -> tuple[list[Skip], list[str]]:
    """The Skip rules a modules_to_not_convert / ignored_layers / ignore / exclude_modules list
    names, and notes on what was read loosely. A name of a weight no format quantises (a norm) or
    of a module left out of the count (a vision tower, one of the ``mtp_layers`` multi-token-prediction
    layers numbered after the model's) changes nothing; one that names no module is refused rather
    than guessed; one naming a layer past those is refused."""
    rules: list[Skip] = []
    notes: list[str] = []
    for pattern in skip:
        low = _plain(str(pattern))
        if low.rsplit(".", 1)[-1] in ("weight", "bias") and "." in low:  # a module's tensor: the module it belongs to
            low = low.rsplit(".", 1)[0]
        last = low.rsplit(".", 1)[-1]
        if any(u in low for u in _UNPRICED_PATTERNS) or any(n in last for n in _NEVER_QUANTISED):
            continue
        index = _LAYER_INDEX.search(low)
        layers = None
        if index:
            i = int(index.group(1))
            if n_layers <= i < n_layers + mtp_layers:
                continue  # a multi-token-prediction layer, left out of the count
            if i >= n_layers:
                raise RooflineError(f"{name}: quantization_config {key} names {pattern!r}, layer {i}, and the model has "
                                    f"layers 0 to {n_layers - 1}", field="model")
            layers = frozenset((i,))
        if last == "gate" and "shared" not in low:  # a bare "gate" (MiniMax's, Mixtral's block_sparse_moe.gate): the router
            rules.append(Skip("router", layers))
            continue
        hit = next((part for k, part in _PART_PATTERNS if (low.endswith(k) if k == "mlp.gate" else k in low)), None)
        if hit == "ssm" and last in _ATTENTION_MATRICES:
            hit = "attention"  # Nemotron-H names every layer's token mixer "mixer": its attention's q, k, v, o too
        if hit is None and index and low[index.end():].strip(".*") == "":
            rules += [Skip(p, layers) for p in LAYER_PARTS]  # "model.layers.0*": the whole layer
            continue
        if hit is None:
            raise RooflineError(f"{name}: quantization_config {key} names {pattern!r}, which names no module this tool "
                                "prices apart (attention, mlp, experts, shared experts, ssm, router, embedding, "
                                "lm_head) nor a weight left unquantised anyway (norms)", field="model")
        if hit == "attention" and ("indexer" in low or last == "indexers_proj"):  # DSA's indexer: its matrices only
            named = _INDEXER_NAMES.get(last)
            rules += [Skip("attention", layers, m) for m in ((named,) if named else INDEXER_MATRICES)]
            continue
        matrix = _MATRIX.search(low)
        if matrix and hit in QUANTISED_PARTS:
            rules.append(Skip(hit, layers, matrix.group(1)))
            continue
        if _PROJECTION.search(low) and hit in QUANTISED_PARTS:
            notes.append(f"{key} names {pattern!r}, one matrix of the {hit.replace('_', ' ')}: taken as the whole "
                         f"{hit.replace('_', ' ')} (its other matrices are priced unquantised too)")
        hits = [hit]
        if hit == "mlp" and "expert" not in low and low.endswith(_MLP_BLOCKS):
            # a layer's whole MLP block: its experts too, unless the loader says what the block holds (shared.loader)
            block = next(b for b in _MLP_BLOCKS if low.endswith(b))
            hits = list(MODULE_PARTS.get(model_type, {}).get(block, ("mlp", "experts", "shared_experts")))
        rules += [Skip(h, layers) for h in hits]
    return rules, notes


def _layers_text(indices) -> str:
    shown = sorted(indices)
    return ", ".join(map(str, shown[:8])) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")


def _units(model, part: str):
    """(layer index, parameters, matrices) of ``part`` in each layer; the LM head as layer -1."""
    if part == "lm_head":
        yield -1, (0 if model.tied_embeddings else model.vocab * model.d_model), [("lm_head", model.vocab, model.d_model, 1)]
        return
    for i, layer in enumerate(model.layers):
        yield i, layer.parts(model.d_model).get(part, 0), layer_matrices(layer, model.d_model).get(part)


def priced(model, schemes: dict[str, Scheme], rules: list[Skip], default: str, method: str,
           kept_by: str = "the checkpoint's skip list") -> tuple[WeightStorage, list[str]]:
    """The WeightStorage of ``model`` whose parts in ``schemes`` are stored so, except the matrices
    ``rules`` keep at ``default`` or store by their own scheme (the first rule naming a matrix
    decides; a part no scheme names keeps the matrices no rule names at ``default``), and a note per
    part kept whole or in some layers (``kept_by`` says why). Each part's width is its bytes as
    stored over its parameters: its matrices by Scheme.matrix_bytes, its other parameters (biases,
    norm scales inside it) at ``default``; a part whose matrices this reader does not know takes
    Scheme.per_value for all its parameters (said). Exact for the bytes (what memory and a
    memory-bound step read); a step prices every layer at the part's mean width. A rule with a
    scheme that names no matrix of the model is refused: its bytes would go unpriced."""
    parts, kept_whole, kept_some, notes, used, run = [], [], [], [], set(), {}
    for p in dict.fromkeys([*schemes, *(r.part for r in rules if r.scheme is not None)]):
        scheme = schemes.get(p)
        t = _part_bytes(model, p, scheme, rules, DTYPE_BYTES[default], used)
        if not t.total:
            continue
        width = t.stored / t.total
        label = p.replace("_", " ")
        if t.stray:
            notes.append(f"the skip list names {', '.join(sorted(t.stray))}, which the {label} does not hold apart here: "
                         f"the whole {label} of those layers taken as kept")
        if not t.labels:
            if t.kept_layers:
                kept_whole.append(label)
            continue
        fmt = " + ".join(t.labels)
        if t.kept_layers:
            what = f"{', '.join(sorted(t.kept_mats))} of the {label}" if t.kept_mats else label
            where = "every layer" if len(t.kept_layers) == t.held else f"layer(s) {_layers_text(t.kept_layers)}"
            fmt += f" ({', '.join(sorted(t.kept_mats)) or 'all'} at {default} in {len(t.kept_layers)} of {t.held} layers)"
            kept_some.append(f"{what} in {where}")
        parts.append((p, fmt, width))
        run[p] = (t, label)
        if t.unknown and scheme.shape_terms:
            notes.append(f"{label}: its matrices' shapes are not known to the quantisation reader; their per-row or "
                         "per-tensor scales are not counted")
    missed = [r for r in rules if r.scheme is not None and r not in used]
    if missed:
        r = missed[0]
        where = "every layer" if r.layers is None else f"layer(s) {_layers_text(r.layers)}"
        raise RooflineError(f"{model.name}: the quantisation listing stores {r.matrix or 'the whole'} of the "
                            f"{r.part.replace('_', ' ')} in {where} as {r.scheme.label}, and this model holds no such "
                            "matrix there: its bytes would go unpriced", field="model")
    said = []
    if kept_whole or kept_some:
        said.append(f"left at {default} by {kept_by}: {', '.join(kept_whole + kept_some)}"
                    + (" (each part priced at its mean width over its layers: exact for the bytes)" if kept_some else ""))
    matmuls, scaling, words = matmuls_run(run, default)
    return RunStorage(default, tuple(parts), method, matmuls=matmuls, fp8_scaling=scaling), said + notes + words


def matmuls_run(run: dict, default: str) -> tuple[tuple[tuple[str, str], ...], str, list[str]]:
    """The parts whose matmuls the engines run narrower than ``default`` (Scheme.acts: every quantised
    matrix of the part by a scheme of one acts, none kept at ``default``), as (part, dtype); how their
    fp8 weights are scaled ("block" where every fp8 scheme is block-scaled, "tensor" otherwise, ""
    without fp8 matmuls: MeasuredKernels.fp8_scaling); and a note for a part left in 16-bit matmuls
    although some of its matrices would run narrower."""
    matmuls, fp8, notes = [], [], []
    for p, (t, label) in run.items():
        acts = {s.acts for s in t.schemes.values()}
        if len(acts) == 1 and "" not in acts and not t.kept_layers:
            matmuls.append((p, acts.pop()))
            fp8 += [s.block is not None for s in t.schemes.values() if s.acts == "fp8"]
        elif acts - {""}:
            notes.append(f"the {label}'s matmuls are priced in {default} (its weights dequantised): some of its matrices "
                         f"are stored at {default} or weight-only, others in a format engines run narrower")
    scaling = "" if not fp8 else ("block" if all(fp8) else "tensor")
    if fp8 and scaling == "tensor" and any(fp8):
        notes.append("fp8 weights scaled per block in some parts and per tensor in others: the measured tables' "
                     "per-tensor fp8 rows price them all")
    return tuple(matmuls), scaling, notes


@dataclass
class _PartBytes:
    """One part's tally over the layers (priced): ``total`` parameters, ``stored`` bytes; the layers
    and matrices kept at the default width; whether a layer's matrices were unknown; the layers that
    hold it; skip-list matrices it does not hold apart; the scheme labels used (in order)."""

    total: float = 0.0
    stored: float = 0.0
    kept_layers: set = field(default_factory=set)
    kept_mats: set = field(default_factory=set)
    unknown: bool = False
    held: int = 0
    stray: set = field(default_factory=set)
    labels: dict = field(default_factory=dict)
    schemes: dict = field(default_factory=dict)  # label -> Scheme, of the matrices stored quantised


def _part_bytes(model, p: str, scheme: Scheme | None, rules: list[Skip], base: float, used: set) -> _PartBytes:
    """Part ``p``'s parameters and bytes as stored, layer by layer (``base``: bytes per parameter at
    the default width); the rules with a scheme that named a matrix here are added to ``used``."""
    t = _PartBytes()
    for i, n, mats in _units(model, p):
        if not n:
            continue
        t.held += 1
        t.total += n
        applies = [r for r in rules if r.part == p and (r.layers is None or i in r.layers)]
        if mats is None:
            if any(r.scheme is not None for r in applies):
                raise RooflineError(f"{model.name}: the quantisation listing names modules of the "
                                    f"{p.replace('_', ' ')} of layer {i}, whose matrices this reader does not "
                                    "know: not priced", field="model")
            if applies or scheme is None:
                t.kept_layers.add(i)
                t.stored += n * base
            else:
                t.unknown = True
                t.stored += n * scheme.per_value()
                t.labels[scheme.label] = None
                t.schemes[scheme.label] = scheme
            continue
        names = {m[0] for m in mats}
        used.update(r for r in applies if r.scheme is not None and r.matrix in (None, *names))
        t.stray.update(r.matrix for r in applies if r.matrix and r.matrix not in names and r.scheme is None)
        elems = sum(c * a * b for _, a, b, c in mats)
        layer_bytes = (n - elems) * base
        for mname, a, b, c in mats:
            rule = next((r for r in applies if r.matrix in (None, mname)
                         or (r.scheme is None and r.matrix not in names)), None)
            chosen = rule.scheme if rule is not None else scheme
            if chosen is None:
                t.kept_layers.add(i)
                if rule is None or rule.matrix == mname:
                    t.kept_mats.add(mname)
                layer_bytes += c * a * b * base
            else:
                t.labels[chosen.label] = None
                t.schemes[chosen.label] = chosen
                layer_bytes += c * chosen.matrix_bytes(a, b)
        t.stored += layer_bytes
    return t
