"""Teaching mode's exercises on a layer's time (web.exercises; the 'Predicting a Kernel's Time'
plate): (c) predict a Llama 3 8B layer's time at T tokens with the seed's cost model (e_c, e_m, a
launch per op), from its op table; (d) the same layer on a machine with twice the peak: its time,
or how many of its ops stay memory-bound. Seed 0 of ``layer`` is the workshop's 8,192-token layer
of 8,756 us, seeds 1 and 2 its 128 and 32,768 tokens; seed 0 of ``compute_2x`` is exercise 5's.
"""

from __future__ import annotations

import random

from roofline.blocks import layer_report
from roofline.cost import seed_cost_model
from roofline.machines import Machine, get_machine
from roofline.units import format_duration, format_share, format_si
from roofline.web.exercise_givens import bf16_machines, bytes_s, flops_s, fpb, machine_given
from roofline.web.exercise_types import Ask, Exercise, kind

LAYER_MODEL = "llama3-8b"  # the workshop's model (the 'Predicting a Kernel's Time' plate)
LAYER_TOKENS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


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
    e_c, e_m, peak, bw = c.compute_efficiency, c.memory_efficiency, flops_s(m.peak("bf16")), bytes_s(m.bandwidth)
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
    return rng.choice(bf16_machines()), rng.choice(LAYER_TOKENS)


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
        given=machine_given(m) + _cost_given(),
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
                 f"the peak ({flops_s(fast.peak('bf16'))} bf16) and the same bandwidth runs it: {what}",
        given=machine_given(m) + (("2x machine peak, bf16 dense", flops_s(fast.peak("bf16"))),) + _cost_given(),
        ask=ask, answer=answer, answer_text=answer_text,
        derivation=(
            f"ridge = peak / bandwidth: {fpb(m.ridge('bf16'))} → {fpb(fast.ridge('bf16'))} (the peak doubles, the "
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
