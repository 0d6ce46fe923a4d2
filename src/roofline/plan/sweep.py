"""Sweeps (docs/planning.md): one model over prompt tokens, batch, context or machines. Each machine's
series is one vectorised call of plan.predict_model over a numpy array of sizes (no Python loop
per size); the result renders to a table, CSV and JSON, and plots.plot_sweep draws it.
"""

from __future__ import annotations

from roofline.tables import Tabular, jsonable  # noqa: E402

from dataclasses import dataclass
from typing import Callable

import numpy as np

from roofline.cost import CostModel
from roofline.errors import MAX_COUNT, RooflineError, check_choice, check_number
from roofline.parameters import TENSOR_PARALLEL
from roofline.machines import Machine, get_machine
from roofline.plan.limits import MAX_CONTEXT, SEARCH_MAX_BATCH
from roofline.plan.precision import Precision
from roofline.plan.model_ops import default_cost_model
from roofline.plan.memory import inference_weight_bytes, kv_bytes_per_sequence
from roofline.plan.inference import predict_model
from roofline.plan.parallel import tp_link
from roofline.transformer import get_model

AXES = ("tokens", "batch", "context", "machines")
DEFAULT_VALUES = {
    "tokens": tuple(2**i for i in range(7, 16)),  # 128 .. 32,768 prompt tokens
    "batch": tuple(2**i for i in range(11)),  # 1 .. 1,024 sequences
    "context": tuple(2**i for i in range(7, 18)),  # 128 .. 131,072 cached tokens
}
SERIES_FIELDS = ("time_s", "tokens_per_s", "memory_bound_share", "link_share", "intensity", "bound", "weight_bytes", "kv_bytes")


@dataclass(frozen=True)
class SweepSeries:
    """One machine's predictions at each value of the swept size (arrays of equal length)."""

    machine: str
    machine_name: str
    values: np.ndarray
    time_s: np.ndarray
    tokens_per_s: np.ndarray
    memory_bound_share: np.ndarray
    link_share: np.ndarray
    intensity: np.ndarray
    bound: np.ndarray
    weight_bytes: np.ndarray
    kv_bytes: np.ndarray
    precision: Precision | None = None  # as resolved for this machine (see sweep's ``precision``)
    link: str | None = None  # of the tensor-parallel all-reduces (t > 1)
    memory_bytes: np.ndarray | None = None  # weights + the cache of every sequence, per GPU
    fits: np.ndarray | None = None  # memory_bytes within the machine's memory (None: no capacity given)
    priced_by: str = ""  # what prices its ops beyond the plate's cost model (CostModel.priced_by): measured kernels


@dataclass(frozen=True)
class SweepResult(Tabular):
    """A sweep: ``over`` one of tokens, batch, context, machines; the sizes held fixed; a series per
    machine. ``rows()`` flattens it to one row per (machine, value) for CSV and JSON. ``precision`` is
    the first machine's; ``precisions`` lists each machine's when they differ."""

    ROWS_KEY = "rows"

    model: str
    over: str
    phase: str
    fixed: tuple[tuple[str, object], ...]
    attention: str
    precision: Precision
    tensor_parallel: int
    series: tuple[SweepSeries, ...]
    notes: tuple[str, ...] = ()

    @property
    def precisions(self) -> tuple[tuple[str, Precision], ...]:
        """(machine, precision) for each series whose precision differs from ``precision``'s; empty when all agree."""
        if all(s.precision in (None, self.precision) for s in self.series):
            return ()
        return tuple((s.machine, s.precision) for s in self.series)

    @property
    def predictions(self) -> int:
        return sum(len(s.values) for s in self.series)

    def rows(self) -> list[dict]:
        swept = [] if self.over == "machines" else [self.over]
        keys = ["machine", *swept, *SERIES_FIELDS, "memory_bytes", "fits"]
        out = []
        for s in self.series:  # column by column: one tolist() a field (Python numbers), not a numpy scalar a cell
            n = len(s.values)
            cols = [[s.machine] * n, *([np.asarray(s.values).tolist()] if swept else [])]
            cols += [np.asarray(getattr(s, f)).tolist() for f in SERIES_FIELDS]
            cols += [np.asarray(s.memory_bytes, dtype=float).tolist(),
                     [None] * n if s.fits is None else np.asarray(s.fits, dtype=bool).tolist()]
            out += [dict(zip(keys, row)) for row in zip(*cols)]
        return out

    def to_dict(self) -> dict:
        return {"model": self.model, "over": self.over, "phase": self.phase, **{k: jsonable(v) for k, v in self.fixed},
                "attention": self.attention, "precision": self.precision.to_dict(), "tensor_parallel": self.tensor_parallel,
                **({"precision_by_machine": {m: p.to_dict() for m, p in self.precisions}} if self.precisions else {}),
                "tensor_parallel_link": {s.machine: s.link for s in self.series} if self.tensor_parallel > 1 else None,
                "notes": list(self.notes), "rows": self.rows()}

    def to_table(self) -> str:
        from roofline.plan.render import sweep_table

        return sweep_table(self)


def sweep(model="llama3-8b", machines=("h100-sxm",), over="batch", values=None, phase=None, tokens=4096, batch=1,
          context=4096, attention="flash", precision: Precision | Callable[[Machine], Precision] | None = None,
          tensor_parallel=1, link=None, cost_model: CostModel | Callable[[Machine], CostModel] | None = None,
          gpus_per_node: int = 8) -> SweepResult:
    """Sweep ``over`` tokens (prefill: time to first token), batch or context (decode by default)
    at the fixed other sizes, on each machine; or over ``machines`` at fixed sizes. ``cost_model``
    and ``precision`` are one value for all machines or a function of the machine (defaults: seed
    003's fractions with each machine's launch overhead; bf16). ``link`` None is each machine's
    scale-up link; a link named must be one every machine lists."""
    check_choice("over", over, AXES)
    cfg = get_model(model)
    machines = [get_machine(m) for m in ([machines] if isinstance(machines, (str, Machine)) else machines)]
    if not machines:
        raise RooflineError("sweep needs at least one machine", field="machine")
    phase = phase or ("prefill" if over == "tokens" else "decode")
    check_choice("phase", phase, ("prefill", "decode"))
    if over == "tokens" and phase == "decode":
        raise RooflineError("a sweep over prompt tokens is a prefill sweep (decode makes one token per step); "
                            "sweep decode over context", field="phase")
    if over == "context" and phase == "prefill":
        raise RooflineError("prefill attends over its own tokens: sweep prefill over tokens", field="phase")
    if over == "machines":
        values = None
    sizes = {"tokens": tokens, "batch": batch, "context": context}
    bounds = {"tokens": MAX_COUNT, "batch": SEARCH_MAX_BATCH, "context": MAX_CONTEXT}  # decode's and memory's bounds
    if over != "machines":
        values = np.asarray(DEFAULT_VALUES[over] if values is None else values, dtype=float)
        check_number(over, values, maximum=bounds[over], integer=True)
        sizes[over] = values.astype(np.int64)
    for name, v in sizes.items():
        if name != over:
            check_number(name, v, maximum=bounds[name], integer=True)
    series = tuple(_series(cfg, m, phase, sizes, attention, precision, tensor_parallel, link, cost_model, gpus_per_node)
                   for m in machines)
    fixed = tuple((k, v) for k, v in sizes.items() if k != over and not (phase == "decode" and k == "tokens")
                  and not (phase == "prefill" and k == "context"))
    from roofline.plan.memory import cache_notes

    top = sizes["context"] if phase == "decode" else sizes["tokens"]
    priced = tuple(f"{s.machine}: {s.priced_by}" if len(series) > 1 else s.priced_by for s in series if s.priced_by)
    return SweepResult(cfg.key or cfg.name, over, phase, fixed, attention, series[0].precision, int(tensor_parallel), series,
                       priced + cache_notes(cfg, top))


CHUNK = 32768  # sizes per vectorised call: arrays this long stay in cache (1e6 at once is ~3x slower)


def _series(cfg, m, phase, sizes, attention, precision, tensor_parallel, link, cost_model, gpus_per_node=8) -> SweepSeries:
    cm = cost_model(m) if callable(cost_model) else (cost_model or default_cost_model(m))
    precision = precision(m) if callable(precision) else (precision or Precision())
    if link is not None or int(TENSOR_PARALLEL.check(tensor_parallel)) > 1:
        link = tp_link(m, link, tensor_parallel, gpus_per_node)
    axis = next((k for k, v in sizes.items() if np.ndim(v)), None)
    swept = np.asarray(sizes[axis]) if axis else np.asarray([sizes["tokens" if phase == "prefill" else "batch"]])
    cols: dict[str, np.ndarray] = {}  # each field's whole column, made once and filled chunk by chunk (no concatenation)
    for lo in range(0, swept.size, CHUNK):
        chunk = dict(sizes, **({axis: swept[lo:lo + CHUNK]} if axis else {}))
        p = predict_model(cfg, m, phase, chunk["tokens"], chunk["batch"], chunk["context"] if phase == "decode" else None,
                          attention, precision,
                          tensor_parallel, link, cm, gpus_per_node)
        for f in SERIES_FIELDS:
            part = np.asarray(getattr(p, f))
            if f not in cols:
                cols[f] = np.empty(swept.shape, dtype=part.dtype)
            elif np.promote_types(cols[f].dtype, part.dtype) != cols[f].dtype:  # a longer word ("compute" after "memory")
                cols[f] = cols[f].astype(np.promote_types(cols[f].dtype, part.dtype))
            cols[f][lo:lo + CHUNK] = part  # broadcasts a figure that does not vary
    # what one GPU holds at each value: weights + batch sequences of cache (the prompt's in prefill), in place
    S = sizes["context"] if phase == "decode" else sizes["tokens"]
    S = swept if axis == ("context" if phase == "decode" else "tokens") else S
    B = swept if axis == "batch" else sizes["batch"]
    held = np.asarray(B, dtype=float) * np.asarray(kv_bytes_per_sequence(cfg, S, precision, tensor_parallel), dtype=float)
    held += inference_weight_bytes(cfg, precision, tensor_parallel)  # in place: no second full-length array
    held = np.broadcast_to(held, swept.shape)
    fits = None if not m.capacity_bytes else held <= m.capacity_bytes
    return SweepSeries(machine=m.key or m.name, machine_name=m.name, values=swept, **cols, precision=precision,
                       link=link if int(tensor_parallel) > 1 else None, memory_bytes=held, fits=fits,
                       priced_by=cm.priced_by() if hasattr(cm, "priced_by") else "")
