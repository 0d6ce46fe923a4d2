"""The KV cache of a serving deployment (docs/serving.md): what one GPU of a StepLayout has for
it after the weights and a full step's activations, and what one sequence holds in k blocks.
roofline.serving's block cache is sized by them.
"""

from __future__ import annotations

import numpy as np

from roofline.errors import RooflineError
from roofline.plan.memory import step_activation_bytes
from roofline.plan.step_layout import StepLayout


def kv_cache_budget(step: StepLayout, memory_fraction: float, of_free: bool = False) -> tuple[float, dict]:
    """(bytes, parts): what one GPU has for the KV cache: its memory times ``memory_fraction`` less
    the weights and the activations of a full step (plan.memory.step_activation_bytes at the step's
    ``max_tokens`` and ``max_seqs``: an estimate, said in the output), as `roofline memory` counts
    what fits; with data-parallel attention (expert parallelism) at its group's share of the step
    (StepLayout.rank_budget), not the whole step's tokens on every rank. ``of_free``: the share is of what the weights and activations leave (TensorRT-LLM's
    free_gpu_memory_fraction) rather than of the whole memory. Parts in bytes."""
    m = step.machine
    if not m.capacity_bytes:
        raise RooflineError(f"{m.the_name} gives no memory capacity: the KV cache cannot be sized", field="machine")
    weights = step.weight_bytes_per_gpu()
    activations = step_activation_bytes(step.sharded, step.precision, *step.rank_budget())
    if of_free:  # the share of what the weights and the step's activations leave
        capacity = m.capacity_bytes
        free = (capacity - weights - activations) * memory_fraction * step._dp
    else:
        capacity = m.capacity_bytes * memory_fraction
        free = (capacity - weights - activations) * step._dp  # data-parallel attention: each GPU caches its sequences
    return max(free, 0.0), {"capacity_bytes": capacity, "weights_bytes": weights, "activations_bytes": activations,
                            "kv_cache_bytes": max(free, 0.0)}


def sequence_cache_bytes(step: StepLayout, block_size: int, max_blocks: int) -> np.ndarray:
    """bytes[k]: the cache one sequence holds in k blocks of ``block_size`` tokens (k = 0 ..
    max_blocks): K and V of every full-attention layer, sliding windows up to their window, MLA
    latents, SSM states (plan.kv_bytes_per_sequence at k x block_size tokens); on one GPU of its
    (attention) tensor-parallel group: 1/t of the kv heads, the latents whole."""
    from roofline.plan.memory import kv_bytes_per_sequence

    k = np.arange(0, max_blocks + 1)
    out = np.asarray(kv_bytes_per_sequence(step.model, np.maximum(k * block_size, 1), step.precision,
                                           step.dense_tp()),
                     dtype=float)
    out = np.broadcast_to(out, k.shape).copy()
    out[0] = 0.0
    return out
