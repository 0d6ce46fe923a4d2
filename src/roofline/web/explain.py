"""Why each op of a layer sits where it does and what would move it, and which single change to
make first: the workshop's explanations. Pure functions (a LayerReport in, plain dicts out).

Each op is placed by the cost model's own comparison: memory-bound when its bytes take longer at
e_m x bandwidth than its FLOPs at e_c x peak, which is the same as its intensity lying left of the
ridge at those efficiencies, e_c peak / (e_m bandwidth). The fixes that can and cannot help are
``diagnose.fixes``, the same lists `roofline diagnose` prints.
"""

from __future__ import annotations

from typing import Callable

from roofline.blocks import LayerReport
from roofline.cost import CostModel
from roofline.diagnose.kernel_diagnosis import fixes
from roofline.machines import Machine
from roofline.units import format_intensity, format_si
from roofline.web.payload import format_share, format_us, format_us_fine


def effective_ridge(machine: Machine, dtype: str, cost_model: CostModel) -> float:
    """FLOP/byte where e_c x peak / (e_m x bandwidth) puts the bend of the achievable roof."""
    return cost_model.compute_efficiency * machine.peak(dtype) / (cost_model.memory_efficiency * machine.bandwidth)


def _heads(items: list[str]) -> str:
    """'fewer bytes: fuse ...', 'more reuse per byte: ...' -> 'fewer bytes; more reuse per byte'."""
    return "; ".join(item.split(":")[0] for item in items)


def op_rows(report: LayerReport, machine: Machine, cost_model: CostModel) -> list[dict]:
    """One row per op, in execution order, as text: its time and share, FLOPs, bytes, intensity,
    bound, why it has that bound (its intensity against the ridge at e_c and e_m, its two times)
    and, in short, what can and cannot shorten it (``fixes`` words them in full)."""
    p = report.prediction
    ridge = effective_ridge(machine, report.dtype, cost_model)
    rows = []
    for i, op in enumerate(p.ops, 1):
        sign = "<" if op.bound == "memory" else ">"
        why = (f"{format_intensity(op.intensity)} {sign} ridge {format_intensity(ridge)}: bytes "
               f"{format_us_fine(op.memory_s)}, FLOPs {format_us_fine(op.compute_s)}")
        if op.launch_s > max(op.compute_s, op.memory_s):
            why += f"; the launch ({format_us_fine(op.launch_s)}) is longer than both"
        basis = getattr(op, "basis", None)  # priced from measured kernels (measured.model): what it rests on
        if basis is not None:
            why += (f"; {basis} ({op.source}), {format_share(op.speed_of_light)} of its roofline"
                    if op.points or basis == "fused" else f"; the cost model ({op.source})")
        helps, cannot = fixes(op.bound, op.category, op.bytes, machine)
        rows.append({
            "index": i,
            "name": op.name,
            "time": format_us_fine(op.time_s),
            "share": format_share(op.time_s / p.total_s) if p.total_s > 0 else "—",
            "flops": format_si(op.flops, "FLOP"),
            "bytes": format_si(op.bytes, "B"),
            "intensity": format_intensity(op.intensity),
            "bound": op.bound,
            "why": why,
            "helps": _heads(helps),
            "cannot": _heads(cannot),
        })
    return rows


def fix_lists(report: LayerReport, machine: Machine, cost_model: CostModel) -> dict:
    """What can and cannot shorten a memory-bound and a compute-bound op, in full, and the ridge
    the ops are placed by (the legend under the op table)."""
    ridge = effective_ridge(machine, report.dtype, cost_model)
    out = {"ridge": (f"The ridge at e_c = {cost_model.compute_efficiency:g} and e_m = {cost_model.memory_efficiency:g} is "
                     f"e_c·peak ÷ (e_m·bandwidth) = {format_intensity(ridge)} FLOP/byte "
                     f"({format_intensity(machine.ridge(report.dtype))} at peak): an op left of it waits on memory, "
                     "right of it on arithmetic.")}
    for bound in ("memory", "compute"):
        helps, cannot = fixes(bound, "attention" if bound == "memory" else "matmul", 0.0, machine)
        # the memory side's "cannot" names one op's bytes / bandwidth; the legend states the rule alone
        out[bound] = {"helps": helps, "cannot": [f"{c.split(' (')[0]}; halving the arithmetic changes nothing"
                                                 if c.startswith("fewer FLOPs") else c for c in cannot]}
    return out


def fix_first(report: LayerReport, alternatives: list[tuple[str, Callable[[], LayerReport]]]) -> dict:
    """Of the changes in ``alternatives`` (a description and how to get the layer with it), the one
    that saves the most, with the layer's time before and after; the others in order. A change
    that saves nothing is left out; none left: the line says so."""
    now = report.prediction.total_s
    tried = []
    for what, build in alternatives:
        after = build().prediction.total_s
        if after < now:
            tried.append((now - after, what, after))
    tried.sort(reverse=True)
    options = [{"change": what, "before": format_us(now), "after": format_us(after, unit_of=now),
                "saves": format_share(saved / now), "after_s": after} for saved, what, after in tried]
    if not options:
        return {"text": "Nothing on this page's list (flash attention, fp8, CUDA graphs) shortens this layer.",
                "options": []}
    best = options[0]
    text = f"Fix this first: {best['change']}: {best['before']} to {best['after']} (saves {best['saves']})."
    if len(options) > 1:  # each change tried alone against the layer as it is, not one after the other
        text += " Each of the others alone: " + "; ".join(
            f"{o['change']}: {o['after']}, saves {o['saves']}" for o in options[1:]) + "."
    return {"text": text, "options": options}
