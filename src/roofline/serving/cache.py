"""The KV cache of one serving replica (docs/serving.md): the bytes left for it after the weights
(and a draft model's) and a full step's activations, the cache bytes by blocks held, and how the
decoding sequences' cache grows over a run of steps.
"""

from __future__ import annotations

import numpy as np

from roofline.errors import RooflineError
from roofline.plan.memory import inference_weight_bytes
from roofline.transformer import cache_name
from roofline.plan.step import StepCost, kv_cache_budget, sequence_cache_bytes
from roofline.plan.step_mtp import MtpStepCost
from roofline.serving.engine import Engine
from roofline.units import GIGA


def cache_growth(table, ctx0: np.ndarray, blocks0: np.ndarray, K: int, bs: int) -> np.ndarray:
    """Cache bytes the decoding sequences add over K steps (index k: after step k's growth):
    sum_i table[ceil((ctx0_i + 1 + k) / bs)] - table[blocks0_i], element by element (the simulator
    counts a linear table's blocks in closed form: stretch.decode_stretch)."""
    x = np.arange(1, K + 1)
    return (table[-(-(ctx0[None, :] + x[:, None]) // bs)] - table[blocks0][None, :]).sum(axis=1)


def replica_cache(step: StepCost, engine: Engine, inp: np.ndarray, out: np.ndarray, draft: StepCost | None = None):
    """(bytes for the KV cache, the memory parts, the cache bytes of one sequence by blocks held,
    whether that table is linear) of one replica serving requests of ``inp`` + ``out`` tokens, the
    draft model's weights and cache included; refuses a replica with no memory left for a cache, or
    a request whose cache alone outgrows it."""
    T = engine.spec_tokens + 1
    cap, parts = kv_cache_budget(step, engine.memory_fraction, engine.memory_of_free)
    bs = engine.block_size
    longest = int((inp + out).max()) + T
    max_blocks = -(-longest // bs)
    table = sequence_cache_bytes(step, bs, max_blocks)
    mtp = isinstance(draft, MtpStepCost)  # the target's own multi-token-prediction module
    if mtp and draft.target.name != step.model.name:
        raise RooflineError(f"the multi-token-prediction draft is {draft.target.name}'s, the target {step.model.name}",
                            field="draft")
    if draft is not None and not mtp:
        if draft.model.vocab != step.model.vocab:
            raise RooflineError(f"the draft {draft.model.name} has a vocabulary of {draft.model.vocab:,}, the target "
                                f"{step.model.name} {step.model.vocab:,}: a draft must share the target's tokenizer",
                                field="draft")
        from roofline.transformer import count_params

        if count_params(draft.model)["total"] >= count_params(step.model)["total"]:
            raise RooflineError(f"the draft {draft.model.name} is not smaller than the target {step.model.name}",
                                field="draft")
    if draft is not None:
        if draft.verify_tokens != 1 or draft.max_tokens < engine.max_tokens or draft.max_seqs < engine.max_seqs:
            raise RooflineError("the draft's step model must feed one token per sequence and hold the engine's tokens and "
                                "sequences", field="draft")
        # an MTP module's own weights (the embedding and LM head are the target's), else the draft model's
        parts["draft_weights_bytes"] = (draft.held_weight_bytes() if mtp else
                                        inference_weight_bytes(draft.model, draft.precision, draft.tensor_parallel))
        cap = max(cap - parts["draft_weights_bytes"] * step._dp, 0.0)  # each GPU holds the draft (a data-parallel group's cache: dp GPUs)
        # an MTP draft: each of the depth modules' blocks caches the context (engines allocate every module's)
        table = table + sequence_cache_bytes(draft, bs, max_blocks) * (draft.target.mtp.depth if mtp else 1)
    linear_table = bool(np.allclose(table, np.arange(len(table)) * table[1], rtol=1e-12, atol=0.0))
    if cap <= 0:
        gpus = step.tensor_parallel * step.pipeline_stages
        whole = (f" per GPU, of the model's {inference_weight_bytes(step.model, step.precision) / GIGA:,.1f} GB over {gpus}"
                 if gpus > 1 else "")
        more = ("a larger expert-parallel group (--tp 2x with --ep: more GPUs hold the experts)" if step.expert_parallel
                else "more tensor-parallel GPUs (or pipeline stages)")
        raise RooflineError(f"{step.model.name}: the weights ({parts['weights_bytes'] / GIGA:,.1f} GB{whole}) and activations "
                            f"leave no memory for a {cache_name(step.model)} on one {step.machine.name} at memory_fraction "
                            f"{engine.memory_fraction:g}; use {more} or narrower weights"
                            + (", or a larger memory_fraction" if engine.memory_fraction < 0.9 else ""),
                            field="memory_fraction" if engine.memory_fraction < 0.9 else "tensor_parallel",
                            also=("memory_fraction", "tensor_parallel", "model", "machine", "dtype"))
    biggest = int(np.argmax(inp + out))
    if table[-(-int(inp[biggest] + out[biggest]) // bs)] > cap:
        raise RooflineError(f"one request of {int(inp[biggest]):,} + {int(out[biggest]):,} tokens needs "
                            f"{table[-(-int(inp[biggest] + out[biggest]) // bs)] / GIGA:,.2f} GB of {cache_name(step.model)}; the "
                            f"{step.machine.name} has {cap / GIGA:,.2f} GB for it",
                            field="output_len" if out[biggest] > inp[biggest] else "input_len")
    return cap, parts, table, linear_table
