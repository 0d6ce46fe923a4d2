"""Teaching mode's exercises on one op against the ridge (web.exercises; the roofline chapter's
section 7): (a) where machine M's ridge is in dtype D, peak / bandwidth; (b) whether a matmul,
elementwise add or RMSNorm is memory- or compute-bound on the roofline. Seed 0 of each is the
chapter's own example: the H100 ridge of 295 FLOP/byte, exercise 1's 1 x 4096 x 4096 matmul.
"""

from __future__ import annotations

import math
import random

from roofline.kernels import Kernel, elementwise_kernel, matmul_kernel, rmsnorm_kernel
from roofline.machines import get_machine, list_machines
from roofline.units import dtype_bytes, format_duration, format_intensity, format_si
from roofline.web.exercise_givens import ROOFLINE, bf16_machines, bytes_s, flops_s, fpb, machine_given
from roofline.web.exercise_types import Ask, Exercise, kind

RIDGE_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")  # int8's peak is OP/s, not FLOP/s


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
        question=f"The {m.name} peaks at {flops_s(m.peak(dtype))} dense in {dtype} and reads its main memory at "
                 f"{bytes_s(m.bandwidth)}. At what arithmetic intensity do its two roofs meet?",
        given=machine_given(m, dtype),
        ask=Ask("number", "FLOP/byte", "Ridge point (FLOP/byte)", "e.g. 150 or 150 FLOP/byte", tolerance=0.05),
        answer=ridge, answer_text=fpb(ridge),
        derivation=(
            "ridge = peak / bandwidth",
            f"= {flops_s(m.peak(dtype))} / {bytes_s(m.bandwidth)}",
            f"= {fpb(ridge)}",
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
    machines = bf16_machines()
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
        given=machine_given(m),
        ask=Ask("choice", "", "The op is", "", choices=("memory", "compute")),
        answer=p.bound, answer_text=f"{p.bound}-bound",
        derivation=(
            f"{f_text} = {format_si(k.flops, 'FLOP')}",
            f"{b_text} = {format_si(k.bytes, 'B')}",
            f"I = F / bytes = {format_si(k.flops, 'FLOP')} / {format_si(k.bytes, 'B')} = {fpb(k.intensity)}",
            f"ridge = peak / bandwidth = {flops_s(m.peak('bf16'))} / {bytes_s(m.bandwidth)} = {fpb(ridge)}",
            f"I = {format_intensity(k.intensity)} {side} {format_intensity(ridge)}: {p.bound}-bound. Its roofline time is "
            f"max(F / peak, bytes / bandwidth) = max({format_duration(p.compute_s)}, {format_duration(p.memory_s)}) = "
            f"{format_duration(p.time_s)}.",
        ),
        setup={"machine": m.key, "dtype": "bf16", **shape},
    )
