"""What an op priced from measured kernels rests on (measured.model.MeasuredKernels prices it):
MeasuredOpPrediction, the workload of them, and measured_notes, which words under a table what the
reader should be told."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from roofline.cost import OP_FIELDS, OpPrediction, WorkloadPrediction, time_lower_bound
from roofline.tables import jsonable


@dataclass(frozen=True)
class MeasuredOpPrediction(OpPrediction):
    """An OpPrediction with what it rests on: ``basis`` ("measured", "interpolated", "extrapolated"
    for a measured family's op, "cost model" for the rest), ``source`` (the table, or why none),
    the measured ``points`` used, and ``roofline_s``, the op's speed of light (no efficiency, no
    launch), so that its share of it shows how far the kernel sits from its bound."""

    basis: str = "cost model"
    source: str = ""
    points: int = 0
    roofline_s: float = 0.0
    family: str = ""  # the measured family the op belongs to ("gemm", "attention"), whether or not it priced it
    beat_roofline: float = 0.0  # the table's time was under the op's roofline: its roofline / that time (taken at the roofline)
    transferred_from: str = ""  # the preset whose kernels' efficiencies priced it, when not this machine's own

    def times(self, n) -> "MeasuredOpPrediction":
        return dataclasses.replace(super().times(n), roofline_s=self.roofline_s * n)

    @property
    def speed_of_light(self) -> float:
        """roofline / (time - launch): the share of the bound the kernel itself reaches."""
        body = np.asarray(self.time_s - self.launch_s, dtype=float)
        share = np.divide(self.roofline_s, body, out=np.zeros_like(body), where=body > 0)
        return float(share) if share.ndim == 0 else share

    def to_dict(self) -> dict:
        out = {**super().to_dict(), **{k: jsonable(getattr(self, k)) for k in MEASURED_FIELDS}}
        if self.basis == "fused":  # no time of its own: no share of a roofline either
            out["speed_of_light"] = None
        return out


IMPLAUSIBLY_SLOW = 0.02  # a measured kernel under this share of its roofline is said (measured_notes)
MEASURED_FIELDS = ("roofline_s", "speed_of_light", "basis", "family", "points", "source", "beat_roofline")  # what a measured op adds to OP_FIELDS


@dataclass(frozen=True)
class MeasuredWorkloadPrediction(WorkloadPrediction):
    """A WorkloadPrediction whose JSON says which tables priced it: "model": "measured kernels",
    "kernels" as asked (ENGINE[@VERSION]) and ``kernels_source``, the tables the matmuls read."""

    def to_dict(self) -> dict:
        ops = [o for o in self.ops if isinstance(o, MeasuredOpPrediction) and o.points]
        return {**super().to_dict(), "model": "measured kernels", "kernels": self.model.kernels,
                "fp8_scaling": self.model.fp8_scaling, "kernels_transferred_from": self.model.measured_on or None,
                "kernels_source": sorted({o.source for o in ops}), "kernel_notes": list(measured_notes(self.ops))}

    CSV_FIELDS = (*OP_FIELDS, *MEASURED_FIELDS)


def measured_notes(ops) -> tuple[str, ...]:
    """What a measured table's rows rest on that the reader should be told: the ops priced past the
    measured shapes (extrapolated: the nearest edge's efficiency), those whose table time beat their
    roofline (taken at it), and the ops the tables could not price, grouped by the reason (an
    attention's or a matmul's; the plain vector ops have no family and need no word). Empty for other
    models' ops."""
    ops = [o for o in ops if isinstance(o, MeasuredOpPrediction)]
    out = []
    moved = sorted({o.transferred_from for o in ops if o.transferred_from and o.points})
    if moved:
        out.append(f"the measured ops' times are transferred from the {', '.join(moved)}'s kernels: each shape's "
                   "efficiency there applied to this machine's roofline, not measured on it")
    outside = [o.name for o in ops if o.basis == "extrapolated"]
    if outside:
        out.append(f"{', '.join(outside)}: past the measured shapes, at the efficiency of the nearest measured edge "
                   "(extrapolated)")
    slow = [o for o in ops if o.points and o.basis in ("measured", "interpolated", "extrapolated")
            and np.ndim(o.speed_of_light) == 0 and 0 < float(o.speed_of_light) < IMPLAUSIBLY_SLOW]
    if slow:
        out.append(f"{', '.join(o.name for o in slow)}: the table's kernel reaches under {IMPLAUSIBLY_SLOW:.0%} of its "
                   f"roofline ({', '.join(f'{float(o.speed_of_light):.1%}' for o in slow)}), a fallback path in the engine's "
                   "benchmark, or a row timed without a CUDA graph, more likely than its served kernel: taken as measured; "
                   "compare another engine's tables")
    for o in ops:
        if o.beat_roofline:
            out.append(f"{o.name}: the table's time beats its roofline {o.beat_roofline:.2f}x, faster than the datasheet "
                       "allows (its operands cached between the benchmark's runs, or a mislabelled row): taken at its "
                       "roofline")
    left: dict[str, list[str]] = {}
    for o in ops:
        if o.basis == "cost model" and (o.family or o.category in ("attention", "matmul")):
            left.setdefault(o.source, []).append(o.name)
    out += [f"{', '.join(names)}: the cost model ({why})" for why, names in left.items()]
    return tuple(out)


def at_least_roofline(kernel_s, kernel, machine):
    """A table's kernel time, never under the op's roofline (time_lower_bound, our FLOPs and bytes at
    the datasheet's peak and bandwidth): a row that beats it measured a kernel whose operands sat in
    cache between runs (an L40S's 96 MB L2 holds an 8B model's QKV weights), or is mislabelled; in a
    model's forward its operands come from memory. A fused op's 0 stays 0 (its time is its module's)."""
    sol = time_lower_bound(kernel, machine)
    return np.where(np.asarray(kernel_s) > 0, np.maximum(kernel_s, sol), kernel_s) if np.ndim(kernel_s) or np.ndim(sol) \
        else (max(kernel_s, sol) if kernel_s > 0 else kernel_s)
