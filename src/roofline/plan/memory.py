"""Memory for inference (docs/planning.md): weights and KV cache per GPU, the largest batch and
context that fit (``inference_memory``), and the context where the KV cache overtakes the weights.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from roofline.architecture import Attention, GatedDeltaNet, LatentAttention
from roofline.errors import RooflineError, check_number
from roofline.machines import get_machine, the_name
from roofline.plan.limits import (ENGINE_MEMORY_FRACTION, ENGINE_STEP_SEQS, ENGINE_STEP_TOKENS, MAX_CONTEXT,  # noqa: F401
                                  SEARCH_MAX_BATCH, check_memory_fraction)
from roofline.plan.model_ops import model_ops_without_links
from roofline.plan.parallel import shard
from roofline.plan.precision import Precision
from roofline.tables import Tabular, jsonable
from roofline.transformer import cache_bytes_per_sequence, count_params, get_model, kv_cache_bytes_per_token
from roofline.units import DTYPE_BYTES, dtype_bytes




def step_activation_bytes(model, precision: Precision, max_tokens: int, max_seqs: int) -> float:
    """The activations of an engine step of ``max_tokens`` tokens over ``max_seqs`` sequences on one
    GPU of ``model`` (a tensor-parallel slice where there is one): max_tokens rows of the widest op
    (2 d_ff of a gated MLP or expert, or 4 d_model) plus 4 d_model of residual and attention rows, at
    the activations' width, and fp32 logits of max_seqs rows. An estimate (engines measure theirs in
    a profiling run), said wherever it is counted."""
    w = DTYPE_BYTES[precision.activations]
    widest = max([getattr(k.mlp, "d_ff", 0) * 2 for k in model.kinds] + [model.d_model * 4])
    return float(max_tokens * (widest + 4 * model.d_model) * w + max_seqs * model.vocab * 4.0)


def inference_weight_bytes(model, precision: Precision | None = None, tensor_parallel: int = 1) -> float:
    """Weights one GPU holds: every parameter (all experts) of its tensor-parallel slice, each part
    at its width (Precision.weight_width: the precision's weight width, the stored width of weights
    as stored, bf16 for the parts quantisation tools leave unquantised)."""
    precision = precision or Precision()
    p = count_params(shard(model, tensor_parallel))
    return float(sum(v * precision.weight_width(k) for k, v in p.items() if k != "total"))


def mtp_weight_bytes(model, precision: Precision | None = None, tensor_parallel: int = 1, expert_parallel: bool = False,
                     attention_tp: int = 1) -> float:
    """The multi-token-prediction module's own weights one GPU holds (Model.mtp, every depth; 0 without
    one): its block's tensor-parallel slice, and eh_proj (2D x D) and its RMSNorms whole (replicated, as
    vLLM's deepseek_mtp runs them: an nn.Linear), each part at its width (eh_proj as part "mtp": the
    checkpoint's dtype, DeepSeek-V3's bf16). The embedding and LM head are the model's, in
    inference_weight_bytes. With ``expert_parallel`` over G = tensor_parallel GPUs the block is laid out
    as the main model's MoE layers are, since both engines build it from the main model's layer class
    under the same groups (vLLM's deepseek_mtp: mtp_block = DeepseekV2DecoderLayer; SGLang's
    deepseek_nextn: decoder = DeepseekV2DecoderLayer): its attention, dense parts and shared experts
    split over the attention group's ``attention_tp`` t GPUs (plan.parallel.shard, experts whole), its
    routed experts over the G (1/G of them on each)."""
    cfg = get_model(model)
    if cfg.mtp is None:
        return 0.0
    precision = precision or Precision()
    D = cfg.d_model
    block = cfg.mtp.as_model(cfg)
    p = count_params(shard(block, attention_tp, experts=False) if expert_parallel else shard(block, tensor_parallel))
    own = sum(v * precision.weight_width(k) for k, v in p.items() if k not in ("total", "embedding", "lm_head"))
    if expert_parallel:  # the routed experts (whole in the slice above): 1/G of them on each GPU
        own -= p["experts"] * precision.weight_width("experts") * (1.0 - 1.0 / tensor_parallel)
    own += 2 * D * D * precision.weight_width("mtp") + 2 * D * precision.weight_width("norms")
    return float(cfg.mtp.depth * own)


def kv_bytes_per_token(model, precision: Precision | None = None, tensor_parallel: int = 1) -> float:
    """What each further cached token adds on one GPU at long context (full-attention and MLA
    layers; windowed and state-space layers add nothing past their window): 2 L K d_head w for a
    plain model."""
    precision = precision or Precision()
    return kv_cache_bytes_per_token(shard(model, tensor_parallel), precision.kv_cache)


def kv_bytes_per_sequence(model, context, precision: Precision | None = None, tensor_parallel: int = 1):
    """The whole cache of one sequence of ``context`` tokens on one GPU: K and V of min(S, W)
    tokens per attention layer, MLA latents, SSM states (transformer.cache_bytes_per_sequence)."""
    precision = precision or Precision()
    return cache_bytes_per_sequence(shard(model, tensor_parallel), context, precision.kv_cache)


def kv_bytes_read_per_sequence(model, context, precision: Precision | None = None, tensor_parallel: int = 1):
    """What a decode step reads of one sequence's cache at ``context`` on one GPU: the whole cache
    (kv_bytes_per_sequence), less the latents DeepSeek Sparse Attention keeps but does not read
    (S - min(S, k) a DSA or MSA layer; its indexer reads every index key, its attention k latents or
    keys and values)."""
    precision = precision or Precision()
    whole = kv_bytes_per_sequence(model, context, precision, tensor_parallel)
    sparse = [(k.mixer, n) for k, n in shard(model, tensor_parallel).kind_counts()  # one GPU's heads (MSA's kv heads)
              if isinstance(k.mixer, (LatentAttention, Attention)) and k.mixer.index_topk]
    if not sparse:
        return whole
    S = np.asarray(context, dtype=float)
    unread = sum(n * (S - a.attended(S)) * (a.cache_elems_per_token() - a.index_head_dim) for a, n in sparse)
    return whole - unread * dtype_bytes(precision.kv_cache)


def max_context_within(model, free_bytes: float, batch: int, precision: Precision | None = None,
                       tensor_parallel: int = 1, limit: int = 2**24) -> int:
    """The longest context S (at most ``limit``) whose cache for ``batch`` sequences fits in
    ``free_bytes`` (0 when not even one token's does). The cache grows with S, piecewise linearly
    (windows cap their layers), so a bisection finds the exact integer."""
    def fits(S):
        return batch * float(kv_bytes_per_sequence(model, S, precision, tensor_parallel)) <= free_bytes

    if not fits(1):
        return 0
    if fits(limit):
        return limit
    lo, hi = 1, limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def kv_overtakes_weights_context(model, batch=1, precision: Precision | None = None, tensor_parallel: int = 1):
    """The smallest context S at which a decode step reads at least as much cache (B times what it
    reads of one sequence's cache at S: kv_bytes_read_per_sequence) as weights. Weight bytes read
    are the matmul weights (the experts a batch of B touches, for MoE), not the embedding table. None when the cache stops growing before
    it gets there (windowed and state-space layers only), up to 2^24 tokens."""
    precision = precision or Precision()
    step = model_ops_without_links(model, "decode", 1, batch, 1, "flash", precision, tensor_parallel, None)
    read = sum(op.weight_bytes * op.count for op in step if op.kernel.category == "matmul")  # the LM head included

    def crossover(read_b, b):
        per_token = kv_bytes_per_token(model, precision, tensor_parallel)
        if per_token > 0:
            guess = int(np.ceil(read_b / (b * per_token)))
            if float(b * kv_bytes_read_per_sequence(model, guess, precision, tensor_parallel)) >= read_b:
                lo, hi = 0, guess  # windows only add bytes: the exact S is at or below the full-attention guess
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if float(b * kv_bytes_read_per_sequence(model, mid, precision, tensor_parallel)) >= read_b else (mid, hi)
                return hi
        top = 2**24
        if float(b * kv_bytes_read_per_sequence(model, top, precision, tensor_parallel)) < read_b:
            return None
        lo, hi = 0, top
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if float(b * kv_bytes_read_per_sequence(model, mid, precision, tensor_parallel)) >= read_b else (mid, hi)
        return hi

    if np.ndim(read) == 0 and np.ndim(batch) == 0:
        return crossover(float(read), float(batch))
    reads, batches = np.broadcast_arrays(np.asarray(read, dtype=float), np.asarray(batch, dtype=float))
    out = [crossover(r, b) for r, b in zip(reads.ravel(), batches.ravel())]
    return np.array([-1 if x is None else x for x in out], dtype=np.int64).reshape(reads.shape)


@dataclass(frozen=True)
class MemoryPart:
    name: str
    bytes: float


@dataclass(frozen=True)
class MemoryPlan(Tabular):
    """Memory one GPU needs, part by part, against its capacity (``capacity_bytes`` None when the
    machine gives none). ``advice`` says what would make it fit when it does not."""

    ROWS_KEY = None  # rows(): one per part

    mode: str
    model: str
    machine: str
    parts: tuple[MemoryPart, ...]
    capacity_bytes: float | None
    settings: tuple[tuple[str, object], ...] = ()
    limits: tuple[tuple[str, object], ...] = ()
    advice: str = ""
    notes: tuple[str, ...] = ()
    machine_name: str = ""

    @property
    def total_bytes(self) -> float:
        return float(sum(p.bytes for p in self.parts))

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_bytes is None else bool(self.total_bytes <= self.capacity_bytes)

    @property
    def verdict(self) -> str:
        from roofline.units import format_si

        total = format_si(self.total_bytes, "B")
        name = self.machine_name or self.machine
        the = the_name(name)
        if self.capacity_bytes is None:
            return f"needs {total} per GPU ({name} gives no memory capacity)"
        cap = format_si(self.capacity_bytes, "B")
        share = dict(self.settings).get("memory_fraction")
        of = f"{share:g} of its {format_si(self.capacity_bytes / share, 'B')}" if share is not None else ""
        if self.fits:  # the capacity is the share given of the card's memory, where one is given
            return f"fits: {total} of {the}'s {cap} ({self.total_bytes / self.capacity_bytes:.0%}{'; ' + of if of else ''})"
        return f"does NOT fit: needs {total} per GPU, {the} has {cap}{' (' + of + ')' if of else ''}. {self.advice}".rstrip()

    def to_dict(self) -> dict:
        d = {"mode": self.mode, "model": self.model, "machine": self.machine}
        d.update({k: jsonable(v) for k, v in self.settings})
        d.update({f"{p.name}_bytes": float(p.bytes) for p in self.parts})
        d.update(total_bytes=self.total_bytes, capacity_bytes=self.capacity_bytes, fits=self.fits, verdict=self.verdict)
        d.update({k: jsonable(v) for k, v in self.limits})
        d["notes"] = list(self.notes)
        return d

    def to_table(self) -> str:
        from roofline.plan.render import memory_table

        return memory_table(self)

    def rows(self) -> list[dict]:
        return [{"part": p.name, "bytes": p.bytes} for p in self.parts]

    def to_csv(self) -> str:
        from roofline.tables import rows_to_csv

        return rows_to_csv(self.rows() + [{"part": "total", "bytes": self.total_bytes}])


def _max_count(free_bytes: float, per_unit_bytes: float) -> int:
    return max(0, int(math.floor(free_bytes / per_unit_bytes))) if per_unit_bytes > 0 else 0


def inference_memory(model="llama3-8b", machine="h100-sxm", batch=1, context=8192, precision: Precision | None = None,
                     tensor_parallel: int = 1, memory_fraction: float = ENGINE_MEMORY_FRACTION,
                     mtp: bool = False) -> MemoryPlan:
    """Weights + KV cache of ``batch`` sequences of ``context`` tokens on one GPU, and the
    activations of an engine's largest step (step_activation_bytes at ENGINE_STEP_TOKENS and
    ENGINE_STEP_SEQS), with the largest batch (at this context) and the largest context (at this
    batch) that fit in ``memory_fraction`` of the machine's memory: what `roofline serving` gives
    its KV cache, the same way. The runtime's workspace (CUDA graphs, NCCL buffers) is left to the
    memory outside the fraction. ``mtp``: the model's multi-token-prediction module held too, as for
    speculative decoding with it (`serving --draft mtp`): its own weights (mtp_weight_bytes) and its
    blocks' cache of each sequence; refused for a model without one."""
    cfg = get_model(model)
    m = get_machine(machine)
    if mtp and cfg.mtp is None:
        left_out = cfg.leaves_out("mtp")
        raise RooflineError(f"{cfg.name}" + ("'s multi-token-prediction module is left out of the count and not "
                                             "modelled yet" if left_out else " has no multi-token-prediction module")
                            + " to hold (mtp)", field="mtp")
    kept = cfg.mtp.with_model(cfg) if mtp else cfg  # the cache: the module's blocks cache as the model's layers do
    precision = precision or Precision()
    check_number("batch", batch, maximum=SEARCH_MAX_BATCH, integer=True)  # decode's own bounds
    check_number("context", context, maximum=MAX_CONTEXT, integer=True)
    check_memory_fraction(memory_fraction)
    weights = inference_weight_bytes(cfg, precision, tensor_parallel)
    extra = mtp_weight_bytes(cfg, precision, tensor_parallel) if mtp else 0.0
    per_token = kv_bytes_per_token(kept, precision, tensor_parallel)
    per_seq = float(kv_bytes_per_sequence(kept, context, precision, tensor_parallel))
    acts = step_activation_bytes(shard(cfg, tensor_parallel), precision, ENGINE_STEP_TOKENS, ENGINE_STEP_SEQS)
    parts = ((MemoryPart("weights", weights),) + ((MemoryPart("mtp_weights", extra),) if mtp else ())
             + (MemoryPart("kv_cache", batch * per_seq), MemoryPart("activations", acts)))
    capacity = m.capacity_bytes * memory_fraction if m.capacity_bytes else None
    limits, advice = (), ""
    if capacity is not None:
        free = capacity - weights - extra - acts
        limits = (("max_batch_at_context", _max_count(free, per_seq)),
                  ("max_context_at_batch", max_context_within(kept, free, int(batch), precision, tensor_parallel, MAX_CONTEXT)))
        advice = _fit_advice(cfg, m, capacity, weights + extra, int(batch), int(context), precision, tensor_parallel,
                             engine_share=memory_fraction == 1.0, mtp=mtp)
    settings = (("batch", int(batch)), ("context", int(context)), ("precision", precision.to_dict()),
                ("tensor_parallel", int(tensor_parallel)), ("kv_bytes_per_token", per_token),
                ("kv_bytes_per_sequence", per_seq)) + ((("memory_fraction", float(memory_fraction)),)
                                                       if memory_fraction != 1.0 else ()) + ((("mtp", True),) if mtp else ())
    scales = precision.scales_left_out().removeprefix("; ")  # what a 4-bit flag leaves out of the bytes
    stored = precision.storage_note(m)
    notes = m.capacity_notes + cache_notes(cfg, context) + ((precision.replaces,) if precision.replaces else ()) + (
        (scales,) if scales else ()) + ((stored,) if stored else ()) + (
        f"usable: {memory_fraction:g} of the memory less the activations of an engine step of {ENGINE_STEP_TOKENS:,} tokens "
        f"and {ENGINE_STEP_SEQS} sequences (an estimate), as `roofline serving` sizes its KV cache by default"
        + ("; the runtime's workspace (CUDA graphs, NCCL buffers) is left to the rest" if memory_fraction < 1 else
           "; the runtime's workspace (CUDA graphs, NCCL buffers) is not counted"),)
    if mtp:
        notes += (f"held for speculative decoding: the multi-token-prediction module's own weights ({cfg.mtp.depth} x "
                  f"{cfg.mtp.layer.label} + eh_proj and 3 RMSNorms; the embedding and LM head are the model's) and its "
                  "blocks' cache of each sequence, in the KV cache",)
    longest = dict(limits).get("max_context_at_batch", 0)
    if cfg.max_context and longest > cfg.max_context:
        notes += (f"the longest context that fits ({longest:,}) is past {cfg.name}'s max_position_embeddings "
                  f"{cfg.max_context:,}: memory allows it, the model was not trained for it",)
    return MemoryPlan("inference", cfg.key or cfg.name, m.key or m.name, parts, capacity, settings, limits, advice,
                      notes=notes, machine_name=m.name)


def cache_notes(cfg, context) -> tuple[str, ...]:
    """What every plan of this model says: what the loader left out or noted, a context past the
    model's trained length, and how the cache was counted where it is not L x 2 K d_head per token."""
    notes = list(cfg.header_lines())
    past = cfg.context_note(context)
    if past:
        notes.append(past)
    windows = sorted({k.mixer.span for k in cfg.kinds if (k.is_attention or k.is_parallel_hybrid) and k.mixer.span})
    if windows:
        notes.append(f"windowed/chunked layers keep at most {', '.join(f'{w:,}' for w in windows)} tokens of KV each")
    if any(k.keeps_state for k in cfg.kinds):
        notes.append("state-space layers keep a constant state per sequence (SSM state + conv window), stored at the KV dtype"
                     + (" (Gated DeltaNet's recurrent state included)" if any(isinstance(k.mixer, GatedDeltaNet) for k in cfg.kinds)
                        else ""))
    if any(k.is_parallel_hybrid for k in cfg.kinds):
        notes.append("parallel hybrid layers (attention beside Mamba-2) keep both: K and V of every token and the SSM state")
    if any(isinstance(k.mixer, LatentAttention) for k in cfg.kinds):
        notes.append("MLA layers cache the compressed latent (kv_lora_rank + qk_rope_head_dim per token)")
    if any(isinstance(k.mixer, LatentAttention) and k.mixer.index_heads for k in cfg.kinds):
        notes.append("DSA layers also cache the indexer's key (index_head_dim per token, at the KV dtype; DeepSeek's "
                     "kernels store it FP8 with an fp32 scale per 128) and keep every token: only attention reads the top-k")
    if any(isinstance(k.mixer, Attention) and k.mixer.index_topk for k in cfg.kinds):
        notes.append("MSA layers also cache the block indexer's key (index_head_dim per token, at the KV dtype; vLLM keeps "
                     "it at the model dtype under an fp8 KV cache) and keep every token: only attention reads the top-k")
    return tuple(notes)


def _fit_advice(cfg, m, capacity, weights, batch, context, precision, tensor_parallel, engine_share=True,
                mtp: bool = False) -> str:
    """Where it fits if it does not: more GPUs, then narrower weights. ``engine_share``: say when a
    fit is past the ENGINE_MEMORY_FRACTION of the memory an engine uses (off when the caller gave a
    memory_fraction of its own: the capacity is already that share)."""
    from roofline.units import format_si

    head = ""
    if weights > capacity:
        stored = f"weights as stored ({precision.stored.label()})" if precision.stored is not None else f"{precision.weights} weights"
        shown, room = format_si(weights, 'B'), format_si(capacity, 'B')
        if shown == room:  # 141.1 GB of weights on a 141 GB card both print "141 GB"
            shown, room = f"{weights / 1e9:,.2f} GB", f"{capacity / 1e9:,.2f} GB"
        head = f"{cfg.name}'s {stored} alone are {shown}, more than {room}. "
    def need(t, weights_dtype):
        p = precision if weights_dtype is None else dataclasses.replace(precision, weights=weights_dtype, stored=None)
        kept = cfg.mtp.with_model(cfg) if mtp else cfg  # with the MTP module: its weights and its blocks' cache
        return (inference_weight_bytes(cfg, p, t) + (mtp_weight_bytes(cfg, p, t) if mtp else 0.0)
                + batch * float(kv_bytes_per_sequence(kept, context, p, t))
                + step_activation_bytes(shard(cfg, t), p, ENGINE_STEP_TOKENS, ENGINE_STEP_SEQS))

    widest = None  # the most GPUs tried whose split the model takes (its heads must divide)
    advice = ""
    for t in (2, 4, 8, 16, 32, 64):
        try:
            n = need(tensor_parallel * t, None)
        except RooflineError:
            continue
        widest = tensor_parallel * t
        if n <= capacity:
            advice = head + f"It fits on {tensor_parallel * t} GPUs with tensor parallelism (--tp {tensor_parallel * t}: {format_si(n, 'B')} each)"
            break
    if not advice:
        kv = getattr(cfg.first_attention, "kv_heads", 0)
        replicated = (f"; past {kv} GPUs, its KV heads, each holds a whole head's cache, so the cache per GPU stops shrinking there"
                      if kv and widest and widest > kv else "")
        advice = head + (f"It does not fit even on {widest} tensor-parallel GPUs (the widest split of {cfg.name} up to "
                         f"{tensor_parallel * 64}{replicated})." if widest else
                         f"It does not fit, and {cfg.name} takes no wider tensor-parallel split.")
    for q in ("fp8", "int4"):
        if DTYPE_BYTES[q] < DTYPE_BYTES[precision.weights] and precision.stored is None and need(tensor_parallel, q) <= capacity:
            n = need(tensor_parallel, q)
            tight = (f": {n / capacity:.0%} of the memory, past the {ENGINE_MEMORY_FRACTION:g} of it an engine such as "
                     "vLLM uses by default" if engine_share and n > ENGINE_MEMORY_FRACTION * capacity else "")
            return advice.rstrip(".") + f", or on {tensor_parallel} with {q} weights ({format_si(n, 'B')}{tight})."
    return advice.rstrip(".") + "."
