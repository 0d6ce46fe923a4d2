"""What a teaching-mode exercise is (web.exercises): the ask, the exercise and a checked answer's
verdict as frozen records, the seeds' range, and the registry of kinds, one builder per kind. No
web stack.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

MAX_SEED = 999_999


@dataclass(frozen=True)
class Ask:
    """What the learner gives: ``form`` "number" (in ``unit``, right within ``tolerance``, a
    relative error; 0 is exact) or "choice" (one of ``choices``); ``label`` names the input."""

    form: str
    unit: str
    label: str
    example: str
    tolerance: float = 0.0
    choices: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"form": self.form, "unit": self.unit, "label": self.label, "example": self.example,
                "tolerance": self.tolerance, "tolerance_text": f"within {self.tolerance:.0%}" if self.tolerance else "exactly",
                "choices": list(self.choices)}


@dataclass(frozen=True)
class Exercise:
    """One exercise: the question, the givens (label, value) and an optional table of ops, what is
    asked, and (never sent with the question) the answer in SI units or a choice, its text and the
    derivation. ``setup`` names the machine, dtype and shape it was built from."""

    kind: str
    seed: int
    title: str
    question: str
    given: tuple[tuple[str, str], ...]
    ask: Ask
    answer: object
    answer_text: str
    derivation: tuple[str, ...]
    table: tuple[tuple[str, ...], ...] = ()  # the first row is the header
    setup: dict = field(default_factory=dict)

    def public_dict(self) -> dict:
        """The question without its answer: what GET /api/exercise sends."""
        return {"kind": self.kind, "seed": self.seed, "next_seed": (self.seed + 1) % (MAX_SEED + 1), "title": self.title,
                "question": self.question, "given": [{"label": k, "value": v} for k, v in self.given],
                "table": [list(r) for r in self.table], "ask": self.ask.to_dict(), "setup": dict(self.setup),
                "kinds": [{"key": k, "label": label} for k, (label, _) in KINDS.items()]}


@dataclass(frozen=True)
class Verdict:
    """A checked answer: ``status`` "correct", "incorrect" or "unreadable" (then no answer and no
    derivation are given away: the learner tries again); ``value`` is the answer as read and
    ``answer`` the right one (SI units, or the choice)."""

    kind: str
    seed: int
    status: str
    message: str
    value: object = None
    answer: object = None
    answer_text: str | None = None
    derivation: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"kind": self.kind, "seed": self.seed, "status": self.status,
                "correct": None if self.status == "unreadable" else self.status == "correct", "message": self.message,
                "value": self.value, "answer": self.answer, "answer_text": self.answer_text,
                "derivation": list(self.derivation)}


# -- the registry: one builder per kind, refusing duplicates ---------------------------------------

KINDS: dict[str, tuple[str, Callable[[random.Random, int], Exercise]]] = {}


def kind(key: str, label: str):
    """Register the decorated builder (rng, seed) -> Exercise as kind ``key``, shown as ``label``;
    the page lists the kinds in the order they are registered."""

    def deco(fn):
        if key in KINDS:
            raise RuntimeError(f"exercise kind {key!r} registered twice")
        KINDS[key] = (label, fn)
        return fn

    return deco
