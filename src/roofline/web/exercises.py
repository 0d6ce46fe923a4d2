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
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Callable

from roofline.blocks import layer_report
from roofline.cost import CostModel, seed_cost_model
from roofline.errors import RooflineError, check_number, unknown_name
from roofline.kernels import Kernel, elementwise_kernel, matmul_kernel, rmsnorm_kernel
from roofline.machines import Machine, get_machine, list_machines
from roofline.units import (US, dtype_bytes, format_duration, format_intensity, format_share, format_si, parse_number,
                            parse_time_s)

MAX_SEED = 999_999
MAX_ANSWER_CHARS = 200
LAYER_MODEL = "llama3-8b"  # the workshop's model (the 'Predicting a Kernel's Time' plate)
LAYER_TOKENS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
RIDGE_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")  # int8's peak is OP/s, not FLOP/s
ROOFLINE = CostModel()  # the pure roofline: which limit binds, without efficiencies or launches


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
    def deco(fn):
        if key in KINDS:
            raise RuntimeError(f"exercise kind {key!r} registered twice")
        KINDS[key] = (label, fn)
        return fn

    return deco


def make_exercise(kind_key: str, seed: int) -> Exercise:
    """The exercise of ``kind_key`` numbered ``seed`` (0 to MAX_SEED): the same pair, the same
    exercise, on every machine and run (random.Random seeded with the text "kind:seed")."""
    if kind_key not in KINDS:
        raise unknown_name("exercise kind", kind_key, KINDS, field="kind")
    check_number("seed", seed, minimum=0, strictly=False, maximum=MAX_SEED, integer=True)
    return KINDS[kind_key][1](random.Random(f"{kind_key}:{int(seed)}"), int(seed))


# -- text ------------------------------------------------------------------------------------------

def _flops_s(x: float) -> str:
    return format_si(x, "FLOP/s", 4)


def _bytes_s(x: float) -> str:
    return format_si(x, "B/s", 4)


def _fpb(x: float) -> str:
    return f"{format_intensity(x)} FLOP/byte"


def _bf16_machines() -> list[Machine]:
    return [m for m in list_machines() if "bf16" in m.dtypes]


def _machine_given(m: Machine, dtype: str = "bf16") -> tuple[tuple[str, str], ...]:
    return ((f"{m.name} peak, {dtype} dense", _flops_s(m.peak(dtype))), (f"{m.name} memory bandwidth", _bytes_s(m.bandwidth)))


# -- (a) the ridge -------------------------------------------------------------------------------

@kind("ridge", "Where is the ridge?")
def ridge_exercise(rng: random.Random, seed: int) -> Exercise:
    if seed == 0:
        m, dtype = get_machine("h100-sxm"), "bf16"
    else:
        m = rng.choice(list_machines())
        dtype = rng.choice([d for d in m.dtypes if d in RIDGE_DTYPES])
    ridge = m.ridge(dtype)
    return Exercise(
        kind="ridge", seed=seed, title=f"The ridge of {m.the_name} in {dtype}",
        question=f"The {m.name} peaks at {_flops_s(m.peak(dtype))} dense in {dtype} and reads its main memory at "
                 f"{_bytes_s(m.bandwidth)}. At what arithmetic intensity do its two roofs meet?",
        given=_machine_given(m, dtype),
        ask=Ask("number", "FLOP/byte", "Ridge point (FLOP/byte)", "e.g. 150 or 150 FLOP/byte", tolerance=0.05),
        answer=ridge, answer_text=_fpb(ridge),
        derivation=(
            "ridge = peak / bandwidth",
            f"= {_flops_s(m.peak(dtype))} / {_bytes_s(m.bandwidth)}",
            f"= {_fpb(ridge)}",
            f"An op doing fewer FLOPs per byte than {format_intensity(ridge)} is memory-bound on {m.the_name} in "
            f"{dtype}; one doing more is compute-bound.",
        ),
        setup={"machine": m.key, "dtype": dtype},
    )


# -- (b) memory- or compute-bound ----------------------------------------------------------------

MATMUL_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
MATMUL_NK = (1024, 2048, 4096, 8192, 14336)


def _op(rng: random.Random, seed: int) -> tuple[Kernel, str, str, str, dict]:
    """An op, its description, its FLOPs and bytes as closed forms with the numbers filled in
    (the kernel's docstring formulas), and its shape."""
    w = dtype_bytes("bf16")
    if seed == 0:  # the roofline chapter's exercise 1
        what = "matmul"
        M, N, K = 1, 4096, 4096
    else:
        what = rng.choices(("matmul", "add", "rmsnorm"), weights=(6, 1, 1))[0]
        M, N, K = rng.choice(MATMUL_M), rng.choice(MATMUL_NK), rng.choice(MATMUL_NK)
    if what == "matmul":
        k = matmul_kernel(M, N, K, "bf16")
        return (k, f"a bf16 ({M:,} × {K:,}) @ ({K:,} × {N:,}) matmul",
                f"F = 2MNK = 2 × {M:,} × {N:,} × {K:,}",
                f"bytes = w (MK + KN + MN) = {w:g} × ({M:,}×{K:,} + {K:,}×{N:,} + {M:,}×{N:,})", {"op": what, "M": M, "N": N, "K": K})
    n = M * N
    if what == "add":
        k = elementwise_kernel(n, n_inputs=2, n_outputs=1, flops_per_elem=1.0, bytes_per_elem="bf16", name="add")
        return (k, f"a bf16 elementwise add of two ({M:,} × {N:,}) tensors", f"F = n = {M:,} × {N:,}",
                f"bytes = w n (2 inputs + 1 output) = {w:g} × {n:,} × 3", {"op": what, "n": n})
    k = rmsnorm_kernel(M, N, "bf16")
    return (k, f"a bf16 RMSNorm over ({M:,} tokens × {N:,})", f"F = 4 n = 4 × {M:,} × {N:,}",
            f"bytes = 2 w n (read x, write y) = 2 × {w:g} × {n:,}", {"op": what, "n": n})


@kind("bound", "Memory- or compute-bound?")
def bound_exercise(rng: random.Random, seed: int) -> Exercise:
    machines = _bf16_machines()
    m = get_machine("h100-sxm") if seed == 0 else rng.choice(machines)
    ridge = m.ridge("bf16")
    want = rng.choice(("memory", "compute"))  # either answer as often
    for _ in range(1000):  # an op clearly on that side: its intensity at least 15% from the ridge
        k, what, f_text, b_text, shape = _op(rng, seed)
        p = ROOFLINE.predict_op(k, m)
        if seed == 0 or (p.bound == want and abs(math.log(k.intensity / ridge)) > math.log(1.15)):
            break
    side = "<" if p.bound == "memory" else ">"
    return Exercise(
        kind="bound", seed=seed, title=f"Which roof binds on {m.the_name}?",
        question=f"On {m.the_name}, is {what} memory-bound or compute-bound on the roofline (no efficiencies, "
                 f"no launch overhead)?",
        given=_machine_given(m),
        ask=Ask("choice", "", "The op is", "", choices=("memory", "compute")),
        answer=p.bound, answer_text=f"{p.bound}-bound",
        derivation=(
            f"{f_text} = {format_si(k.flops, 'FLOP')}",
            f"{b_text} = {format_si(k.bytes, 'B')}",
            f"I = F / bytes = {format_si(k.flops, 'FLOP')} / {format_si(k.bytes, 'B')} = {_fpb(k.intensity)}",
            f"ridge = peak / bandwidth = {_flops_s(m.peak('bf16'))} / {_bytes_s(m.bandwidth)} = {_fpb(ridge)}",
            f"I = {format_intensity(k.intensity)} {side} {format_intensity(ridge)}: {p.bound}-bound. Its roofline time is "
            f"max(F / peak, bytes / bandwidth) = max({format_duration(p.compute_s)}, {format_duration(p.memory_s)}) = "
            f"{format_duration(p.time_s)}.",
        ),
        setup={"machine": m.key, "dtype": "bf16", **shape},
    )


# -- (c) a layer's time and (d) at 2x compute --------------------------------------------------------

def _layer(m: Machine, tokens: int):
    return layer_report(LAYER_MODEL, m, tokens=tokens, cost_model=seed_cost_model()).prediction


def _op_table(pred, bounds: bool = False) -> tuple[tuple[str, ...], ...]:
    head = ("op", "FLOPs", "bytes") + (("bound",) if bounds else ())
    return (head, *((o.name, format_si(o.flops, "FLOP"), format_si(o.bytes, "B")) + ((o.bound,) if bounds else ())
                    for o in pred.ops))


def _layer_steps(pred, m: Machine) -> tuple[str, ...]:
    """t = max(F / (e_c peak), B / (e_m BW)) + t_launch, op by op with the numbers, and the sum."""
    c = seed_cost_model()
    e_c, e_m, peak, bw = c.compute_efficiency, c.memory_efficiency, _flops_s(m.peak("bf16")), _bytes_s(m.bandwidth)
    lines = ["t = max(F / (e_c · peak), bytes / (e_m · bandwidth)) + t_launch, for each op:"]
    for o in pred.ops:
        lines.append(f"{o.name}: max({format_si(o.flops, 'FLOP')} / ({e_c:.2f} × {peak}), {format_si(o.bytes, 'B')} / "
                     f"({e_m:.2f} × {bw})) + {format_duration(o.launch_s)} = max({format_duration(o.compute_s)}, "
                     f"{format_duration(o.memory_s)}) + {format_duration(o.launch_s)} = {format_duration(o.time_s)}, "
                     f"{o.bound}-bound")
    lines.append(f"layer = the sum of the {len(pred.ops)} ops = {format_duration(pred.total_s)}: {pred.total_s / pred.flops_only_s:.2f} "
                 f"times the FLOPs-only estimate Σ F / (e_c · peak) = {format_duration(pred.flops_only_s)}; "
                 f"{pred.memory_bound_ops} ops are memory-bound and take {format_share(pred.memory_bound_share)} of the time, "
                 f"launches {format_share(pred.launch_share)}.")
    return tuple(lines)


def _layer_setup(rng: random.Random, seed: int, seeded: dict[int, tuple[str, int]]) -> tuple[Machine, int]:
    if seed in seeded:
        key, tokens = seeded[seed]
        return get_machine(key), tokens
    return rng.choice(_bf16_machines()), rng.choice(LAYER_TOKENS)


def _cost_given() -> tuple[tuple[str, str], ...]:
    c = seed_cost_model()
    return (("compute efficiency e_c", f"{c.compute_efficiency:.2f}"), ("memory efficiency e_m", f"{c.memory_efficiency:.2f}"),
            ("launch overhead per op", format_duration(c.launch_overhead_s)), ("overlap", "perfect: max(compute, memory)"))


TIME_ASK = Ask("number", "µs", "Layer time (µs)", "e.g. 1234, 1234 us or 1.2 ms", tolerance=0.10)


@kind("layer", "Predict a layer's time")
def layer_exercise(rng: random.Random, seed: int) -> Exercise:
    m, tokens = _layer_setup(rng, seed, {0: ("h100-sxm", 8192), 1: ("h100-sxm", 128), 2: ("h100-sxm", 32768)})
    pred = _layer(m, tokens)
    return Exercise(
        kind="layer", seed=seed, title=f"One Llama 3 8B layer, {tokens:,} tokens, on {m.the_name}",
        question=f"Predict the time of one Llama 3 8B layer's forward pass over one {tokens:,}-token sequence on the "
                 f"{m.name} (bf16, attention unfused), with the workshop's cost model: each op takes "
                 f"max(F / (e_c · peak), bytes / (e_m · bandwidth)) + t_launch. Its 12 ops are in the table.",
        given=_machine_given(m) + _cost_given(),
        ask=TIME_ASK, answer=pred.total_s, answer_text=format_duration(pred.total_s),
        derivation=_layer_steps(pred, m), table=_op_table(pred),
        setup={"machine": m.key, "model": LAYER_MODEL, "tokens": tokens, "dtype": "bf16", "attention": "naive"},
    )


@kind("compute_2x", "What changes at 2x compute?")
def compute_2x_exercise(rng: random.Random, seed: int) -> Exercise:
    m, tokens = _layer_setup(rng, seed, {0: ("h100-sxm", 8192), 1: ("h100-sxm", 8192)})
    ask_count = seed == 1 or (seed > 1 and rng.random() < 0.5)
    fast = m.scaled(compute=2.0)
    base, pred = _layer(m, tokens), _layer(fast, tokens)
    moved = [f"{b.name} ({b.bound} → {o.bound})" for b, o in zip(base.ops, pred.ops) if b.bound != o.bound]
    if ask_count:
        ask = Ask("number", "ops", "Memory-bound ops", "e.g. 5")
        answer, answer_text = float(pred.memory_bound_ops), f"{pred.memory_bound_ops} of {len(pred.ops)} ops"
        what = f"how many of its {len(pred.ops)} ops are memory-bound?"
    else:
        ask, answer, answer_text = TIME_ASK, pred.total_s, format_duration(pred.total_s)
        what = "what is the layer's predicted time?"
    return Exercise(
        kind="compute_2x", seed=seed, title=f"The {tokens:,}-token layer at twice {m.the_name}'s compute",
        question=f"On {m.the_name} one Llama 3 8B layer over {tokens:,} tokens takes {format_duration(base.total_s)} with seed "
                 f"003's cost model, {base.memory_bound_ops} of its ops memory-bound (the table). A machine with twice "
                 f"the peak ({_flops_s(fast.peak('bf16'))} bf16) and the same bandwidth runs it: {what}",
        given=_machine_given(m) + (("2x machine peak, bf16 dense", _flops_s(fast.peak("bf16"))),) + _cost_given(),
        ask=ask, answer=answer, answer_text=answer_text,
        derivation=(
            f"ridge = peak / bandwidth: {_fpb(m.ridge('bf16'))} → {_fpb(fast.ridge('bf16'))} (the peak doubles, the "
            f"bandwidth stays)",
            "ops that change side: " + (", ".join(moved) if moved else "none: each compute-bound op stays compute-bound "
                                        "and only its compute time halves; the memory-bound ops do not change at all"),
            *_layer_steps(pred, fast),
            f"{format_duration(base.total_s)} → {format_duration(pred.total_s)}: {base.total_s / pred.total_s:.2f} times faster for "
            f"twice the FLOP/s; memory-bound ops {base.memory_bound_ops} → {pred.memory_bound_ops}.",
        ),
        table=_op_table(base, bounds=True),
        setup={"machine": m.key, "model": LAYER_MODEL, "tokens": tokens, "dtype": "bf16", "attention": "naive",
               "compute_scale": 2.0, "asks": "memory_bound_ops" if ask_count else "time"},
    )


# -- (e) decode intensity at batch B -----------------------------------------------------------------

DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
DECODE_WEIGHTS = (("Llama 3 8B's output projection", 4096, 4096), ("Llama 3 8B's fused QKV projection", 6144, 4096),
                  ("Llama 3 8B's fused gate+up projection", 28672, 4096), ("Llama 3 8B's down projection", 4096, 14336),
                  ("Llama 3 70B's output projection", 8192, 8192))


@kind("decode", "Decode intensity at batch B")
def decode_exercise(rng: random.Random, seed: int) -> Exercise:
    (name, N, K), B = (DECODE_WEIGHTS[0], 64) if seed == 0 else (rng.choice(DECODE_WEIGHTS), rng.choice(DECODE_BATCHES))
    k = matmul_kernel(B, N, K, "bf16", name=name)
    w = dtype_bytes("bf16")
    h100 = get_machine("h100-sxm")
    bound = ROOFLINE.predict_op(k, h100).bound
    return Exercise(
        kind="decode", seed=seed, title=f"Decode at batch {B:,}: {name}",
        question=f"One decode step of {B:,} sequence{'s' if B != 1 else ''} multiplies their activations, a ({B:,} × {K:,}) "
                 f"bf16 matrix, by {name}, a ({K:,} × {N:,}) bf16 weight. What is this matmul's arithmetic "
                 f"intensity? Count exactly (activations and weights read once, the output written once), not "
                 f"the large-weight approximation.",
        given=(("batch B", f"{B:,}"), ("weight K × N", f"{K:,} × {N:,}"), ("dtype", "bf16, w = 2 bytes")),
        ask=Ask("number", "FLOP/byte", "Intensity (FLOP/byte)", "e.g. 12.3", tolerance=0.01),
        answer=k.intensity, answer_text=_fpb(k.intensity),
        derivation=(
            f"F = 2BNK = 2 × {B:,} × {N:,} × {K:,} = {format_si(k.flops, 'FLOP')}",
            f"bytes = w (BK + KN + BN) = {w:g} × ({B:,}×{K:,} + {K:,}×{N:,} + {B:,}×{N:,}) = {format_si(k.bytes, 'B')}",
            f"I = F / bytes = {_fpb(k.intensity)}",
            f"≈ B = {B:,} while the weights' K·N elements dominate the bytes (2 FLOPs per weight for its 2 bytes in "
            f"bf16); the activations' B(K + N) pull it below B as the batch grows.",
            f"On the H100 SXM (ridge {_fpb(h100.ridge('bf16'))}) this matmul is {bound}-bound: decode turns "
            f"compute-bound near B ≈ the ridge.",
        ),
        setup={"B": B, "N": N, "K": K, "dtype": "bf16", "weights": name},
    )


# -- reading and judging an answer -------------------------------------------------------------------

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


def check_answer(kind_key: str, seed: int, text) -> Verdict:
    """Judge ``text`` as the answer to exercise (kind_key, seed): correct within the ask's
    tolerance (relative error), incorrect (with the answer and the derivation), or unreadable (a
    message saying what to write, nothing given away)."""
    ex = make_exercise(kind_key, seed)
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
