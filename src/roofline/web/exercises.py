"""Teaching mode (docs/workshop.md): the seed chapter's exercises, answered first, checked, with the
derivation shown. Pure functions, no web stack: ``make_exercise(kind, seed)`` builds one exercise
deterministically from its kind and a seed integer, and ``check_answer(kind, seed, text)`` reads a
learner's answer and judges it.

Every number in a question, an answer and a derivation comes from the library: ``Machine.ridge``,
the kernels' FLOPs and bytes, the cost model's per-op times and ``layer_report``'s totals. The
derivation writes the formula with those numbers filled in; it computes nothing of its own.

Kinds (the roofline chapter's exercises, section 7, and the 'Predicting a Kernel's Time' plate):

    ridge        where is the ridge of machine M in dtype D: peak / bandwidth, FLOP/byte
    bound        is this matmul or elementwise op memory- or compute-bound on the roofline
    layer        predict a Llama 3 8B layer's time at T tokens with the seed's e_c, e_m, launch
    compute_2x   the same layer on a machine with twice the peak: its time, or its memory-bound ops
    decode       a decode matmul's intensity at batch B in bf16 (about B when the weights dominate)

Seed 0 of each kind is the seed chapter's own example (the H100 ridge of 295 FLOP/byte, exercise
1's 1 x 4096 x 4096 matmul, the workshop's 8,192-token layer of 8,756 us, exercise 5's 2x compute,
the decode matmul at B = 64 of I = 62); seeds 1 and 2 of ``layer`` are the workshop's 128 and
32,768 tokens.

Here: making an exercise from its kind and seed, and checking an answer to it. What an exercise is
(Ask, Exercise, Verdict, the registry of kinds) is in web.exercise_types; the kinds in
web.exercise_ridge (ridge, bound), web.exercise_layer (layer, compute_2x) and web.exercise_decode
(decode), with the givens they share in web.exercise_givens; reading and judging an answer in
web.exercise_answers.
"""

from __future__ import annotations

import random

from roofline.errors import check_number, unknown_name
from roofline.web.exercise_answers import MAX_ANSWER_CHARS, AnswerError, judge, read_answer
from roofline.web.exercise_types import KINDS, MAX_SEED, Ask, Exercise, Verdict, kind
# The kinds register themselves as they are imported, in the order the page lists them.
from roofline.web.exercise_ridge import bound_exercise, ridge_exercise
from roofline.web.exercise_layer import compute_2x_exercise, layer_exercise
from roofline.web.exercise_decode import decode_exercise

__all__ = ["MAX_SEED", "MAX_ANSWER_CHARS", "KINDS", "Ask", "Exercise", "Verdict", "AnswerError", "kind", "make_exercise",
           "check_answer", "read_answer", "ridge_exercise", "bound_exercise", "layer_exercise", "compute_2x_exercise",
           "decode_exercise"]


def make_exercise(kind_key: str, seed: int) -> Exercise:
    """The exercise of ``kind_key`` numbered ``seed`` (0 to MAX_SEED): the same pair, the same
    exercise, on every machine and run (random.Random seeded with the text "kind:seed")."""
    if kind_key not in KINDS:
        raise unknown_name("exercise kind", kind_key, KINDS, field="kind")
    check_number("seed", seed, minimum=0, strictly=False, maximum=MAX_SEED, integer=True)
    return KINDS[kind_key][1](random.Random(f"{kind_key}:{int(seed)}"), int(seed))


def check_answer(kind_key: str, seed: int, text) -> Verdict:
    """Judge ``text`` as the answer to exercise (kind_key, seed): correct within the ask's
    tolerance (relative error), incorrect (with the answer and the derivation), or unreadable (a
    message saying what to write, nothing given away)."""
    return judge(make_exercise(kind_key, seed), text)
