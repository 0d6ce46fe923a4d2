"""Teaching mode's exercise on decode (web.exercises): (e) a decode matmul's arithmetic intensity
at batch B in bf16, about B while the weights dominate the bytes. Seed 0 is the chapter's decode
matmul at B = 64, of I = 62.
"""

from __future__ import annotations

import random

from roofline.kernels import matmul_kernel
from roofline.machines import get_machine
from roofline.units import dtype_bytes, format_si
from roofline.web.exercise_givens import ROOFLINE, fpb
from roofline.web.exercise_types import Ask, Exercise, kind


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
        answer=k.intensity, answer_text=fpb(k.intensity),
        derivation=(
            f"F = 2BNK = 2 × {B:,} × {N:,} × {K:,} = {format_si(k.flops, 'FLOP')}",
            f"bytes = w (BK + KN + BN) = {w:g} × ({B:,}×{K:,} + {K:,}×{N:,} + {B:,}×{N:,}) = {format_si(k.bytes, 'B')}",
            f"I = F / bytes = {fpb(k.intensity)}",
            f"≈ B = {B:,} while the weights' K·N elements dominate the bytes (2 FLOPs per weight for its 2 bytes in "
            f"bf16); the activations' B(K + N) pull it below B as the batch grows.",
            f"On the H100 SXM (ridge {fpb(h100.ridge('bf16'))}) this matmul is {bound}-bound: decode turns "
            f"compute-bound near B ≈ the ridge.",
        ),
        setup={"B": B, "N": N, "K": K, "dtype": "bf16", "weights": name},
    )
