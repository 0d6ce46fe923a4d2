"""Reading and judging a learner's answer to a teaching-mode exercise (web.exercises): a number in
the unit asked (a time in µs, ms, ...; an intensity in FLOP/byte; a count of ops) or a choice,
right within the ask's tolerance. A reply that cannot be read says what to write and gives
nothing away. No web stack.
"""

from __future__ import annotations

import math
import re

from roofline.errors import RooflineError
from roofline.units import US, parse_number, parse_time_s
from roofline.web.exercise_types import Ask, Exercise, Verdict

MAX_ANSWER_CHARS = 200  # the longest answer GET /api/exercise/check reads

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_INTENSITY_UNIT = re.compile(r"\s*(flops?|ops?)\s*(/|per)\s*(b|bytes?)\s*$", re.IGNORECASE)
_COUNT_UNIT = re.compile(r"\s*(ops?|operations?)\s*$", re.IGNORECASE)


class AnswerError(ValueError):
    """An answer that cannot be read: the message says what to write."""


def _hint(ask: Ask) -> str:
    if ask.form == "choice":
        return " or ".join(ask.choices)
    if ask.unit == "µs":
        return "a time, like 1234 (µs), 1234 us or 1.2 ms"
    if ask.unit == "ops":
        return "a whole number of ops, like 5"
    return f"a number of {ask.unit}, like 150 or 150 {ask.unit}"


def read_answer(ask: Ask, text) -> object:
    """The answer as a number in SI units (seconds for a time; a bare number is the unit asked,
    µs), or the choice it names. Raises AnswerError with what to write instead."""
    raw = "" if text is None else str(text)
    s = _THOUSANDS.sub("", raw.strip())
    if not s:
        raise AnswerError(f"Write your answer first: {_hint(ask)}.")
    shown = _shown(raw)
    if ask.form == "choice":
        word = s.lower().replace("-", " ").split(" bound")[0].strip(" .!")
        for choice in ask.choices:  # "memory", "memory-bound", "Memory bound", "mem"
            if len(word) >= 3 and choice.startswith(word):
                return choice
        raise AnswerError(f"Cannot read {shown!r}: answer {_hint(ask)}.")
    try:
        if ask.unit == "µs":
            try:
                value = parse_number(s, field="answer") * US  # a bare number is the unit asked
            except RooflineError:
                value = parse_time_s(s, field="answer")
        else:
            value = parse_number((_COUNT_UNIT if ask.unit == "ops" else _INTENSITY_UNIT).sub("", s), field="answer")
    except RooflineError:
        raise AnswerError(f"Cannot read {shown!r} as {_hint(ask)}.") from None
    if not math.isfinite(value):
        raise AnswerError(f"{shown!r} is not a finite number: write {_hint(ask)}.")
    if ask.unit == "ops" and value != round(value):
        raise AnswerError(f"{shown!r} is not a whole number of ops: write {_hint(ask)}.")
    return value


def _shown(text) -> str:
    """The learner's answer as they wrote it, cut to 40 characters."""
    t = str(text).strip()
    return t if len(t) <= 40 else t[:40] + "…"


def judge(ex: Exercise, text) -> Verdict:
    """Judge ``text`` as the answer to ``ex``: correct within the ask's tolerance (relative error),
    incorrect (with the answer and the derivation), or unreadable (a message saying what to write,
    nothing given away)."""
    ask = ex.ask
    try:
        value = read_answer(ask, text)
    except AnswerError as exc:
        return Verdict(ex.kind, ex.seed, "unreadable", str(exc))
    if ask.form == "choice":
        right = value == ex.answer
    else:
        right = abs(value - ex.answer) <= ask.tolerance * abs(ex.answer)
    within = f" (within {ask.tolerance:.0%} counts)" if ask.tolerance else ""
    if right:
        message = f"Correct: {ex.answer_text}" + (f"; you answered {_shown(text)}{within}." if ask.tolerance else ".")
    else:
        off = ""
        if ask.form != "choice" and ask.tolerance:
            error = abs(value - ex.answer) / abs(ex.answer)
            off = f", {error:.0%} off" if error < 10 else ", more than 10 times off"
        yours = f"{value}-bound" if ask.form == "choice" else _shown(text)
        message = f"Not quite: you answered {yours}{off}; the answer is {ex.answer_text}{within}."
    return Verdict(ex.kind, ex.seed, "correct" if right else "incorrect", message, value, ex.answer, ex.answer_text,
                   ex.derivation)
