"""Decode versus batch (docs/planning.md): latency and throughput, the batch where decode turns
compute-bound, the largest batch that fits (``decode_plan``), on top of inference.decode_step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.cost import CostModel
from roofline.errors import MAX_COUNT, check_choice, check_number
from roofline.parameters import TENSOR_PARALLEL
from roofline.machines import get_machine
from roofline.plan.inference import ModelPrediction, decode_step, time_by_limit, time_to_first_token
from roofline.plan.limits import ENGINE_MEMORY_FRACTION, MAX_CONTEXT, SEARCH_MAX_BATCH
from roofline.plan.memory import (MemoryPlan, inference_memory, kv_bytes_per_sequence, kv_bytes_read_per_sequence,
                                  kv_overtakes_weights_context)
from roofline.plan.model_ops import default_cost_model
from roofline.plan.parallel import tp_link
from roofline.plan.precision import Precision
from roofline.tables import Tabular, jsonable
from roofline.transformer import get_model


DEFAULT_BATCHES = tuple(2**i for i in range(11))  # 1 .. 1,024


CURVES = ("every", "log", "none")
LOG_CURVE_POINTS = 256


def max_plan_context(cfg) -> int:
    """The longest context decode_plan takes: 2^24 tokens, less for a model so wide that the
    time-to-first-token prefill of that many tokens would pass block_kernels' limit of MAX_COUNT
    for token rows x max(D, F). (At 2^24 its other limit, 1e18 attention scores, holds up to 3,552
    heads for the prefill and far beyond for the 65,536-batch search.)"""
    widest = max([cfg.d_model] + [max(getattr(k.mlp, "d_ff", 0), getattr(k.mlp, "shared_d_ff", 0)) for k in cfg.kinds])
    return int(min(MAX_CONTEXT, MAX_COUNT // widest))


def _first_batch(mask_fn, batches) -> int | None:
    hit = np.flatnonzero(mask_fn)
    return int(batches[hit[0]]) if hit.size else None


def first_batches(masks, top: int) -> list[int | None]:
    """The first batch in 1..``top`` where each predicate holds, found without evaluating all
    ``top`` batches: ``masks(batches)`` returns one boolean array per predicate; they are
    evaluated on a log grid of about 256 batches, then at every batch in the gap before each
    predicate's first hit on the grid. Exact when a predicate turns true once and stays true,
    which the compute-bound tests do: an op's arithmetic grows as B while its bytes grow as
    W + cB, so its compute/memory ratio only rises with the batch (tests compare this with the
    search over every batch)."""
    grid = log_batches(top)
    out = []
    for mask in masks(grid):
        first = _first_batch(mask, grid)
        if first is not None and first > 1:
            before = int(grid[np.searchsorted(grid, first) - 1])
            gap = np.arange(before + 1, first + 1)
            first = _first_batch(masks(gap)[len(out)], gap)
        out.append(first)
    return out


def bound_runs(bounds_at, top: int) -> list[tuple[int, int, str]]:
    """The runs of one bound over the batches 1 to ``top``, in order: [(first, last, bound), ...].
    ``bounds_at(batches)`` gives the bound (a string) at each batch. It is evaluated on the log grid
    of about 256 batches, then at every batch in each gap whose ends differ, so each change found
    is placed exactly; a run that begins and ends inside one gap (narrower than the grid's step,
    about 4% of the batch) with one bound at both ends is not seen. Unlike first_batches this holds
    for a bound that turns and turns back: a decode step's matmuls turn compute-bound as the batch
    grows, and its KV-cache reads, growing as B S, can outweigh them again."""
    grid = log_batches(top)
    bounds = np.asarray(bounds_at(grid)).astype(str)
    batches, values = [grid], [bounds]
    for i in np.flatnonzero(bounds[1:] != bounds[:-1]):
        gap = np.arange(grid[i] + 1, grid[i + 1])
        if gap.size:
            batches.append(gap)
            values.append(np.asarray(bounds_at(gap)).astype(str))
    b, v = np.concatenate(batches), np.concatenate(values)
    order = np.argsort(b)
    b, v = b[order], v[order]
    starts = np.concatenate([[0], np.flatnonzero(v[1:] != v[:-1]) + 1])
    ends = np.concatenate([b[starts[1:]] - 1, [top]])
    return [(int(b[i]), int(e), str(v[i])) for i, e in zip(starts, ends)]


def step_bound_runs(model, plan: "DecodePlan", top: int = SEARCH_MAX_BATCH) -> list[tuple[int, int, str]]:
    """Where a decode plan's whole step is memory-, compute- or link-bound (ModelPrediction.bound:
    the limit holding most of its time) at the batches 1 to ``top``: bound_runs of the plan's
    step, at its context, precision and cost model. ``model`` is the plan's model (a Model or a
    preset name). E.g. [(1, 253, "memory"), (254, 448, "compute"), (449, 65536, "memory")]."""
    s = plan.step
    common = dict(attention=s.attention, precision=s.precision, tensor_parallel=s.tensor_parallel, link=plan.link,
                  cost_model=s.cost_model)
    cfg = get_model(model)
    return bound_runs(lambda batches: decode_step(cfg, s.machine_spec, batches, int(s.context), **common).bound, top)


def log_batches(top: int, marked=()) -> np.ndarray:
    """About 256 batches log-spaced from 1 to ``top``, with each marked batch up to ``top`` exactly."""
    grid = np.round(np.geomspace(1, top, LOG_CURVE_POINTS)).astype(np.int64)
    extra = np.asarray([int(b) for b in marked if b is not None and 1 <= b <= top], dtype=np.int64)
    return np.unique(np.concatenate([grid, extra, [top]]))


@dataclass(frozen=True)
class DecodePlan(Tabular):
    """Decode at ``context`` for each batch in ``batches``, with the batch where the weight
    matmuls turn compute-bound, the batch where the step as a whole does (None: not up to
    SEARCH_MAX_BATCH, and ``step_limit`` says what holds it there: "link", "kv_cache", "weights"
    or "activations"), and the largest batch whose weights + KV cache fit (None without a
    capacity). ``prefill`` is the time to first token of a prompt of ``context`` tokens at batch 1.
    ``experts`` is (E, k) for a mixture of experts; ``link`` the tensor-parallel link (t > 1)."""

    ROWS_KEY = "rows"  # one per batch asked

    step: ModelPrediction
    memory: MemoryPlan
    compute_bound_batch: int | None
    step_compute_bound_batch: int | None
    max_batch_in_memory: int | None
    kv_per_sequence_bytes: float
    kv_crossover_context: int
    prefill: ModelPrediction | None = None
    curve: ModelPrediction | None = None  # for plots: every batch from 1 to the largest asked, or a log grid
    step_limit: str | None = None
    experts: tuple[int, int] | None = None
    kv_read_per_sequence_bytes: float | None = None  # what a step reads of it, where less (DSA); None: all of it
    link: str | None = None
    @property
    def batches(self):
        return np.asarray(self.step.batch)

    def rows(self) -> list[dict]:
        s = self.step
        n = self.batches.size
        arr = {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in dict(
            step_s=s.time_s, tokens_per_s=s.tokens_per_s, intensity=s.intensity, bound=s.bound, gemm_bound=s.gemm_bound,
            weights_intensity=s.weights_intensity, weight_bytes=s.weight_bytes, kv_bytes=s.kv_bytes,
            memory_bound_share=s.memory_bound_share, link_share=s.link_share, launch_share=s.launch_share).items()}
        weights = self.memory.parts[0].bytes
        out = []
        for i, b in enumerate(self.batches):
            row = {"batch": int(b)}
            row.update({k: jsonable(v[i]) for k, v in arr.items()})
            row["memory_bytes"] = weights + int(b) * self.kv_per_sequence_bytes
            row["fits"] = None if self.max_batch_in_memory is None else bool(b <= self.max_batch_in_memory)
            out.append(row)
        return out

    def to_dict(self) -> dict:
        s = self.step
        return {
            "model": s.model, "machine": s.machine, "context": int(s.context), "attention": s.attention,
            "precision": s.precision.to_dict(), "tensor_parallel": s.tensor_parallel,
            "compute_efficiency": s.cost_model.compute_efficiency, "memory_efficiency": s.cost_model.memory_efficiency,
            "launch_overhead_s": s.cost_model.launch_overhead_s, "cuda_graph": s.cost_model.cuda_graph,
            "compute_bound_batch": self.compute_bound_batch, "step_compute_bound_batch": self.step_compute_bound_batch,
            "max_batch_in_memory": self.max_batch_in_memory, "weights_bytes": self.memory.parts[0].bytes,
            "kv_bytes_per_sequence": self.kv_per_sequence_bytes, "capacity_bytes": self.memory.capacity_bytes,
            "kv_overtakes_weights_at_context_batch_1": self.kv_crossover_context,
            "step_limit": self.step_limit, "tensor_parallel_link": self.link, "notes": list(self.memory.notes),
            "time_to_first_token_s": None if self.prefill is None else float(self.prefill.time_s),
            "rows": self.rows(),
        }

    def to_table(self) -> str:
        from roofline.plan.render import decode_table

        return decode_table(self)


def _kv_read_if_less(cfg, context, precision, tensor_parallel) -> float | None:
    """What a decode step reads of one sequence's cache, where less than the whole (DSA); else None."""
    read = float(kv_bytes_read_per_sequence(cfg, context, precision, tensor_parallel))
    return read if read < float(kv_bytes_per_sequence(cfg, context, precision, tensor_parallel)) else None


def decode_plan(model="llama3-8b", machine="h100-sxm", batches=DEFAULT_BATCHES, context=4096, attention="flash",
                precision: Precision | None = None, tensor_parallel=1, link=None, cost_model: CostModel | None = None,
                memory_fraction: float = ENGINE_MEMORY_FRACTION, curve: str = "every", gpus_per_node: int = 8) -> DecodePlan:
    """Decode latency and throughput versus batch (each at most SEARCH_MAX_BATCH) at one context
    (one vectorised call), with the compute-bound batches, the largest batch that fits, and the
    time to first token of a prompt of ``context`` tokens at batch 1. ``curve`` "every" adds the
    step at every batch from 1 to the largest asked (what the web view indexes), "log" at about
    256 log-spaced batches (what a plot needs), "none" nothing."""
    cfg = get_model(model)
    m = get_machine(machine)
    precision = (precision or Precision()).check_machine(m)
    cost_model = cost_model or default_cost_model(m)
    check_choice("curve", curve, CURVES)
    check_number("batch", batches, maximum=SEARCH_MAX_BATCH, integer=True)
    check_number("context", context, maximum=max_plan_context(cfg), integer=True)
    batches = np.unique(np.asarray(batches, dtype=float).astype(np.int64))
    if link is not None or int(TENSOR_PARALLEL.check(tensor_parallel)) > 1:
        link = tp_link(m, link, tensor_parallel, gpus_per_node)
    common = dict(attention=attention, precision=precision, tensor_parallel=tensor_parallel, link=link, cost_model=cost_model,
                  gpus_per_node=gpus_per_node)
    step = decode_step(cfg, m, batches, context, **common)
    def compute_bound_masks(search):
        wide = decode_step(cfg, m, search, context, **common)
        return np.asarray(wide.gemm_bound) == "compute", np.asarray(wide.bound) == "compute"

    compute_bound, step_compute_bound = first_batches(compute_bound_masks, SEARCH_MAX_BATCH)
    mem = inference_memory(cfg, m, 1, context, precision, tensor_parallel, memory_fraction)
    limits = dict(mem.limits)
    step_limit = None
    if step_compute_bound is None:  # what holds the step at the largest batch searched
        at_max = time_by_limit(decode_step(cfg, m, SEARCH_MAX_BATCH, context, **common))
        at_max.pop("compute")
        step_limit = max(at_max, key=at_max.get)
    top = int(batches.max())
    grid = {"every": np.arange(1, top + 1), "none": None,
            "log": log_batches(top, (*batches, compute_bound, step_compute_bound, limits.get("max_batch_at_context")))}[curve]
    return DecodePlan(
        step=step,
        memory=mem,
        compute_bound_batch=compute_bound,
        step_compute_bound_batch=step_compute_bound,
        max_batch_in_memory=limits.get("max_batch_at_context"),
        kv_per_sequence_bytes=float(kv_bytes_per_sequence(cfg, context, precision, tensor_parallel)),
        kv_crossover_context=kv_overtakes_weights_context(cfg, 1, precision, tensor_parallel),
        kv_read_per_sequence_bytes=_kv_read_if_less(cfg, context, precision, tensor_parallel),
        prefill=time_to_first_token(cfg, m, context, 1, **common),
        curve=None if grid is None else decode_step(cfg, m, grid, context, **common),
        step_limit=step_limit,
        experts=next(((k.mlp.n_experts, k.mlp.top_k) for k in cfg.kinds if k.is_moe), None),
        link=link if int(tensor_parallel) > 1 else None,
    )
