"""What one forward pass of a layer computes, validated once at the edge: ``Workload`` (phase,
batch B, new tokens T, context S) and the checks that refuse sizes that are typos.

Prefill: the T new tokens are the last T of S positions (S = T for a prompt with no cache; S > T
is a chunked-prefill step over a cache of S - T tokens). Decode: one new token per sequence with
S tokens cached. ``attention`` is how the scores are costed, "naive" (scores in memory) or
"flash" (one kernel). The CLI, the web and blocks.py build the workload the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.architecture import Model
from roofline.errors import MAX_COUNT, RooflineError, check_choice, check_number, is_count
from roofline.units import dtype_bytes

PHASES = ("prefill", "decode")
ATTENTIONS = ("naive", "flash")


def _checked(cls, phase, tokens, batch, context) -> "Workload":
    """A Workload of sizes already checked, its fields set in place (the frozen __init__ sets them one by one)."""
    w = object.__new__(cls)
    d = w.__dict__
    d["phase"] = phase
    d["tokens"] = tokens
    d["batch"] = batch
    d["context"] = context
    return w


@dataclass(frozen=True)
class Workload:
    """What one forward pass computes: ``phase``, ``batch`` B, ``tokens`` T new per sequence (1 in
    decode), ``context`` S positions attended (prefill: S >= T, default T; decode: S cached).
    ``Workload.of`` validates and fills the defaults; the CLI and the web build it the same way."""

    phase: str = "prefill"
    tokens: object = 8192
    batch: object = 1
    context: object = 8192

    @classmethod
    def of(cls, phase: str = "prefill", tokens=None, batch=1, context=None) -> "Workload":
        if phase == "decode" and (tokens is None or tokens == 1) and is_count(batch, context):
            return _checked(cls, phase, 1, batch, context)  # the hot path: plain whole numbers in range
        if phase == "prefill" and is_count(batch, tokens) and (context is None or (is_count(context) and context >= tokens)):
            return _checked(cls, phase, tokens, batch, tokens if context is None else context)
        check_choice("phase", phase, PHASES)
        check_number("batch", batch, maximum=MAX_COUNT, integer=True)
        if phase == "prefill":
            T = 8192 if tokens is None else tokens
            check_number("tokens", T, maximum=MAX_COUNT, integer=True)
            S = T if context is None else context
            check_number("context", S, maximum=MAX_COUNT, integer=True)
            if np.any(np.asarray(S) < np.asarray(T)):
                raise RooflineError(f"context {S} is shorter than the {T} prefill tokens: a chunked-prefill step has "
                                    "context >= tokens (the cache plus the new tokens)", field="context")
            return cls(phase, T, batch, S)
        if tokens is not None and context is not None and np.any(np.asarray(tokens) != 1):
            raise RooflineError(f"decode makes one token per sequence; tokens {tokens} with context {context} is not a "
                                "decode step (for T new tokens against a cache use --phase prefill --context S)",
                                field="tokens")
        S = (4096 if tokens is None else tokens) if context is None else context
        check_number("context", S, maximum=MAX_COUNT, integer=True)
        return cls(phase, 1, batch, S)

    @property
    def decode(self) -> bool:
        return self.phase == "decode"


def check_size(model: Model, w: Workload):
    """Refuse workloads whose token rows or attention scores are typos, not workloads."""
    heads, widest = model.size_bounds
    if is_count(w.batch, w.tokens, w.context) and w.batch * w.tokens * w.context * heads <= 1e18 \
            and w.batch * w.tokens * widest <= MAX_COUNT:
        return  # plain numbers inside both limits
    rows = np.asarray(w.batch, dtype=float) * np.asarray(w.tokens, dtype=float)
    if np.any(rows * widest > MAX_COUNT):
        raise RooflineError(f"batch x tokens = {np.max(rows):,.0f} token rows is too large for {model.name}: its widest "
                            f"op ({widest:,} wide) would hold {np.max(rows) * widest:.3g} elements, past the "
                            f"{MAX_COUNT:.0e} this tool prices", field="batch")
    if np.any(rows * heads * np.asarray(w.context, dtype=float) > 1e18):
        raise RooflineError(f"batch x heads x tokens x context = {np.max(rows * heads * np.asarray(w.context, dtype=float)):.3g} "
                            "attention scores is too large", field="context" if w.decode else "tokens")


def checked_workload(model: Model, phase, tokens, batch, context, attention, dtype) -> Workload:
    """The workload validated once, at the edge (decode's context defaults to ``tokens``)."""
    check_choice("attention", attention, ATTENTIONS)
    dtype_bytes(dtype)
    if phase == "decode" and context is None:
        tokens, context = None, tokens
    w = Workload.of(phase, tokens, batch, context)
    check_size(model, w)
    return w
