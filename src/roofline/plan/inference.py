"""Whole-model inference prediction (docs/planning.md): time to first token and one decode step
of a model on one GPU, as a ModelPrediction (model_ops counted once per kind of op, scaled by its
count); quantisation in precision.py, tensor parallelism in parallel.py.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from roofline.cost import CostModel, WorkloadPrediction, binds
from roofline.parameters import TENSOR_PARALLEL
from roofline.machines import Machine, get_machine
from roofline.plan.model_ops import (CountedOp, Totals, context_of, counted_op, default_cost_model, model_rows,
                                     predict_counted, totals_of_rows)
from roofline.plan.parallel import GPUS_PER_NODE, tp_link
from roofline.plan.precision import Precision
from roofline.tables import Tabular, jsonable
from roofline.transformer import get_model


_BF16 = Precision()  # the default precision, made once (frozen)
_new, _set = object.__new__, object.__setattr__


def _text(x):
    return str(x) if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class ModelPrediction(Tabular):
    """One forward pass of a whole model on one GPU (prefill of ``tokens`` or one decode step at
    ``context``), batch ``batch``. Quantities may be arrays when a size was.

    ``totals`` holds the sums; ``prediction`` (built on first use) the per-op breakdown, each op
    times its count. ``weight_bytes`` and ``kv_bytes`` are the weights (embedding rows included)
    and KV cache read; ``bound`` is the limit that holds most of the time."""

    model: str
    machine: str
    phase: str
    tokens: object
    batch: object
    context: object
    attention: str
    precision: Precision
    tensor_parallel: int
    counted: tuple[tuple, ...]  # each op's CountedOp fields, its kernel a row of Kernel's (model_rows): ``ops``
    machine_spec: Machine
    cost_model: CostModel
    totals: Totals
    config: object = field(default=None, compare=False, repr=False)  # the Model (a config file's has no preset key)

    @functools.cached_property
    def ops(self) -> tuple[CountedOp, ...]:
        """The pass's ops in order, each a kernel with its count (made on first use from ``counted``)."""
        return tuple(counted_op(row) for row in self.counted)

    @functools.cached_property
    def prediction(self) -> WorkloadPrediction:
        return predict_counted(list(self.ops), self.machine_spec, self.cost_model)

    @property
    def time_s(self):
        """Seconds for the pass: the decode step, or the time to first token in prefill."""
        return self.totals.time_s

    @property
    def tokens_per_s(self):
        """Tokens out per second: B per decode step; B T prompt tokens per prefill."""
        made = self.batch if self.phase == "decode" else self.batch * self.tokens
        return made / self.time_s

    @property
    def flops(self):
        return self.totals.flops

    @property
    def bytes(self):
        return self.totals.bytes

    @property
    def weight_bytes(self):
        return self.totals.weight_bytes

    @property
    def kv_bytes(self):
        return self.totals.kv_bytes

    @property
    def intensity(self):
        """FLOPs per byte of the whole pass (weights, KV cache and activations)."""
        return self.flops / self.bytes

    @property
    def weights_intensity(self):
        """Matmul FLOPs per matmul weight byte: the seed's decode view, = B in bf16 for a dense model
        (2 B FLOPs per weight over 2 bytes per weight)."""
        return self.totals.gemm_flops / self.totals.gemm_weight_bytes

    @property
    def memory_bound_share(self):
        return self.totals.memory_time_s / self.time_s

    @property
    def link_share(self):
        return self.totals.link_time_s / self.time_s

    @property
    def launch_share(self):
        """The share of the time that is kernel launches (one per op, or one per pass with a CUDA graph)."""
        return self.totals.launch_s / self.time_s

    @property
    def bound(self):
        """"memory", "compute" or "link": whichever holds the larger share of the time."""
        t = self.totals
        shares = np.stack(np.broadcast_arrays(t.memory_time_s, t.compute_time_s, t.link_time_s))
        return _text(np.array(["memory", "compute", "link"])[np.argmax(shares, axis=0)])

    @property
    def gemm_bound(self):
        """"compute" once the matmuls' arithmetic takes at least as long as their weight reads (binds)."""
        t = self.totals
        return _text(binds(t.gemm_compute_s, t.gemm_memory_s))

    def summary(self) -> dict:
        return {
            "model": self.model, "machine": self.machine, "phase": self.phase, "tokens": self.tokens, "batch": self.batch,
            "context": self.context, "attention": self.attention, "precision": self.precision.to_dict(),
            "tensor_parallel": self.tensor_parallel, "time_s": self.time_s, "tokens_per_s": self.tokens_per_s,
            "flops": self.flops, "bytes": self.bytes, "intensity": self.intensity, "weights_intensity": self.weights_intensity,
            "weight_bytes": self.weight_bytes, "kv_bytes": self.kv_bytes, "bound": self.bound, "gemm_bound": self.gemm_bound,
            "memory_bound_share": self.memory_bound_share, "link_share": self.link_share,
        }

    def to_dict(self) -> dict:
        pred = self.prediction.to_dict()
        pred.pop("machine")
        return {k: jsonable(v) for k, v in {**pred, **self.summary()}.items()}

    def to_csv(self) -> str:
        return self.prediction.to_csv()

    def to_table(self) -> str:
        return self.prediction.to_table()


def time_by_limit(pred: ModelPrediction) -> dict[str, float]:
    """Seconds of one pass (scalar sizes) by what holds each op back: "compute" for compute-bound
    ops, "link" for collectives, and a memory-bound op's time split over "weights", "kv_cache" and
    "activations" in proportion to the bytes of each it moves."""
    out = dict.fromkeys(("compute", "link", "weights", "kv_cache", "activations"), 0.0)
    for p, op in zip(pred.prediction.ops, pred.ops):
        t = float(p.time_s)
        total = float(p.bytes)  # op bytes times its count, as are the parts below
        if p.bound != "memory" or total <= 0:
            out["compute" if p.bound == "memory" else p.bound] += t
            continue
        w, kv = float(op.weight_bytes) * op.count, float(op.kv_bytes) * op.count
        out["weights"] += t * w / total
        out["kv_cache"] += t * kv / total
        out["activations"] += t * max(total - w - kv, 0.0) / total
    return out


def predict_model(model="llama3-8b", machine="h100-sxm", phase="decode", tokens=1, batch=1, context=None,
                  attention="flash", precision=None, tensor_parallel=1, link=None,
                  cost_model: CostModel | None = None, gpus_per_node: int = GPUS_PER_NODE) -> ModelPrediction:
    """Predict one forward pass of the whole model (see model_ops). Default cost model: the workshop's
    fractions with the machine's launch overhead; default link: the machine's scale-up link, its
    scale-out network past ``gpus_per_node`` GPUs (tp_link; a link given is checked against the
    machine's even at t = 1)."""
    cfg = get_model(model)
    m = get_machine(machine)
    precision = (precision or _BF16).check_machine(m)
    cost_model = cost_model or default_cost_model(m)
    one_gpu = type(tensor_parallel) is int and tensor_parallel == 1
    if link is not None or not (one_gpu or int(TENSOR_PARALLEL.check(tensor_parallel)) == 1):
        link = tp_link(m, link, tensor_parallel, gpus_per_node)
    rows = model_rows(cfg, phase, tokens, batch, context, attention, precision, tensor_parallel, link)
    S = context_of(phase, tokens, context)
    plain = type(batch) is int and type(S) is int and (phase == "decode" or type(tokens) is int)  # plain sizes: plain FLOPs and bytes
    pred = _new(ModelPrediction)  # the frozen dataclass's fields set as one dict (its __init__ sets them one by one)
    _set(pred, "__dict__", {
        "model": cfg.key or cfg.name, "machine": m.key or m.name, "phase": phase,
        "tokens": tokens if phase == "prefill" else 1, "batch": batch, "context": S, "attention": attention,
        "precision": precision, "tensor_parallel": int(tensor_parallel), "counted": tuple(rows), "machine_spec": m,
        "cost_model": cost_model, "totals": totals_of_rows(rows, m, cost_model, plain), "config": cfg})
    return pred


def time_to_first_token(model, machine, tokens, batch=1, **kwargs) -> ModelPrediction:
    """Prefill of ``tokens`` prompt tokens for ``batch`` sequences: the time to first token."""
    return predict_model(model, machine, "prefill", tokens, batch, **kwargs)


def decode_step(model, machine, batch=1, context=4096, **kwargs) -> ModelPrediction:
    """One decode step: one new token for each of ``batch`` sequences with ``context`` cached."""
    return predict_model(model, machine, "decode", 1, batch, context, **kwargs)
