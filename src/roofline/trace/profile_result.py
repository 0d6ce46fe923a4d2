"""The result of ``roofline profile`` (profiler.profile_report): each costed op of a torch.profiler
trace against its bound, the ops that could not be costed, the device time no op accounts for, and
the table that renders them."""

from __future__ import annotations

from dataclasses import dataclass

from roofline.diagnose.kernel_diagnosis import AgainstBound, AgainstBoundTotals, advice
from roofline.tables import Tabular
from roofline.trace.chrome_trace import GRAPH_REPLAY

COMPARISON_OPS = ("aten::sort", "aten::argsort", "aten::msort", "aten::topk", "aten::kthvalue", "aten::median")
# what ProfiledOp.to_dict writes, in order: FLOPs and bytes per call, the totals and times over all calls
OP_FIELDS = ("name", "shapes", "dtype", "category", "calls", "flops", "bytes", "flops_total", "bytes_total", "intensity",
             "bound", "roofline_s", "measured_s", "speed_of_light", "lost_s", "beat_bound_s", "source", "advice", "problem",
             "op_class", "calibrated_s", "calibrated_low_s", "calibrated_high_s", "calibrated_basis", "extrapolated")


@dataclass(frozen=True)
class ProfiledOp(AgainstBound):
    """Calls of one op at one set of input shapes. ``flops`` and ``bytes`` are per call; times
    (s) are summed over the calls; ``speed_of_light`` = roofline_s / measured_s."""

    name: str
    shapes: str
    dtype: str
    category: str
    calls: int
    flops: float
    bytes: float
    bound: str
    roofline_s: float
    measured_s: float
    source: str  # "device" (kernel time) or "cpu" (the op's wall time)
    problem: str | None = None
    gpu: bool = True  # the machine has SMs and tensor cores (for the advice)
    kernel_shape: tuple = ()  # a matmul's (batch, M, N, K), a row-wise op's (rows, width): what a calibrated rate is read at
    calibrated_s: float | None = None  # with a calibrated profile: its prediction, summed over the calls
    calibrated_low_s: float | None = None
    calibrated_high_s: float | None = None
    op_class: str = ""
    calibrated_basis: str = ""  # which measured points the calibrated prediction came from (CalibratedOpPrediction.basis)
    extrapolated: bool = False  # the op lies outside those points: its interval is widened

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def speed_of_light(self) -> float:
        return self.roofline_s / self.measured_s if self.measured_s > 0 else float("inf")

    @property
    def flops_total(self) -> float:
        return self.flops * self.calls

    @property
    def bytes_total(self) -> float:
        return self.bytes * self.calls

    @property
    def advice(self) -> str:
        if self.flops == 0 and self.name in COMPARISON_OPS:
            return "bytes-only bound: its comparisons are no FLOPs (a sort is n log n of them): a floor, not a target"
        if self.speed_of_light > 1 and not self.problem:
            # faster than the main-memory roof, within a cache level's (measurement_problem passed it)
            return "in cache: beats main memory's roof, not its cache's (a warm working set)"
        return advice(self.bound, self.category, self.speed_of_light, self.gpu)

    def to_dict(self) -> dict:
        """OP_FIELDS; no speed of light without a measured time."""
        d = {k: getattr(self, k) for k in OP_FIELDS}
        if not self.measured_s > 0:
            d["speed_of_light"] = None
        return d


@dataclass(frozen=True)
class Unsupported:
    """Calls of an op that could not be costed: ``measured_s`` their CPU wall time, ``device_s`` the
    device time of the kernels they launched (0 in a CPU-only trace)."""

    name: str
    calls: int
    measured_s: float
    reason: str
    device_s: float = 0.0


@dataclass(frozen=True)
class Unattributed:
    """Device time of one class (``device_class``) that no op of the trace accounts for: ``calls``
    device events from ``launches`` launches (distinct correlation ids: a graph's replays), summed
    in ``seconds``; ``examples`` the names that took most of it."""

    kind: str
    calls: int
    launches: int
    seconds: float
    examples: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"class": self.kind, "calls": self.calls, "launches": self.launches, "seconds": self.seconds,
                "examples": list(self.examples)}


@dataclass(frozen=True)
class ProfileReport(AgainstBoundTotals, Tabular):
    """Every costed op of a trace against its bound on ``machine``, ranked by time lost (measured_s,
    roofline_s and problems over the ops: AgainstBoundTotals).

    ``device`` says the trace has device events. Their total ``device_s`` (a plain sum: streams that
    overlap count each) = ``costed_device_s`` (the costed ops' kernels) + ``unsupported_device_s``
    + ``unattributed_s`` (the sum of ``unattributed``, by class, largest first); all 0 without."""

    CSV_FIELDS = ("kind", *OP_FIELDS)  # to_csv (Tabular): rows() in these columns

    path: str
    machine: str
    device: bool
    ops: tuple[ProfiledOp, ...]
    unsupported: tuple[Unsupported, ...]
    free_calls: int
    free_s: float
    calibrated: str = ""  # the calibrated profile's description when its predictions are in the ops
    framework_s: float | None = None  # calibrated: the eager framework's time (CalibratedModel.framework_s), its own line
    device_s: float = 0.0
    costed_device_s: float = 0.0
    unsupported_device_s: float = 0.0
    unattributed: tuple[Unattributed, ...] = ()
    between_ops_s: float = 0.0  # measured: the CPU threads' time between their top-level ops (chrome_trace.between_ops)
    between_ops_gaps: int = 0
    framework_basis: str = ""  # how framework_s was counted (CalibratedModel.framework_text)
    framework_per_gap: bool = False  # framework_s counts the gaps between ops (the profile has a framework probe)
    top_level_s: float = 0.0  # measured: the CPU time of the top-level ops (wrappers' own time, views and all)
    wrapper_s: float = 0.0  # measured: the own time of ops with no rule that called others (aten::linear's, outside its addmm)
    wrapper_calls: int = 0
    unprofiled_s: float | None = None  # calibrated: costed ops at the wall-clock probes' times + framework
    notes: tuple[str, ...] = ()
    forwards: int = 1  # the top-level op sequence repeats this many times (chrome_trace.repeats): totals are over all

    @property
    def measured_total_s(self) -> float:
        """What the calibrated total is compared with: on a CPU trace with a framework probe, the
        top-level ops' time and the time between them (the forward's span on its thread); else
        the costed ops and the views (device kernels on a GPU trace)."""
        if not self.device and self.framework_per_gap:
            return self.top_level_s + self.between_ops_s
        return self.measured_s + self.free_s

    @property
    def unattributed_s(self) -> float:
        return sum((u.seconds for u in self.unattributed), 0.0)

    @property
    def calibrated_s(self) -> float | None:
        """The calibrated prediction of the costed ops plus the framework line (None without a profile)."""
        if not self.calibrated:
            return None
        return sum(op.calibrated_s or 0.0 for op in self.ops) + (self.framework_s or 0.0)

    def to_dict(self) -> dict:
        return {"trace": self.path, "machine": self.machine, "measured_from": "device" if self.device else "cpu",
                "measured_s": self.measured_s, "roofline_s": self.roofline_s, "free_calls": self.free_calls,
                "free_s": self.free_s, "calibrated": self.calibrated or None,
                "calibrated_s": self.calibrated_s, "framework_s": self.framework_s,
                "ops": [op.to_dict() for op in self.ops],
                "unsupported": [{"name": u.name, "calls": u.calls, "measured_s": u.measured_s, "reason": u.reason,
                                 "device_s": u.device_s} for u in self.unsupported],
                "device_s": self.device_s, "costed_device_s": self.costed_device_s,
                "unsupported_device_s": self.unsupported_device_s, "unattributed_s": self.unattributed_s,
                "unattributed": [u.to_dict() for u in self.unattributed],
                "between_ops_s": self.between_ops_s, "between_ops_gaps": self.between_ops_gaps,
                "top_level_s": self.top_level_s, "wrapper_s": self.wrapper_s, "wrapper_calls": self.wrapper_calls,
                "measured_total_s": self.measured_total_s,
                "calibrated_error": (self.calibrated_s / self.measured_total_s - 1.0
                                     if self.calibrated_s is not None and self.measured_total_s > 0 else None),
                "unprofiled_s": self.unprofiled_s, "notes": list(self.notes), "forwards": self.forwards}

    def rows(self) -> list[dict]:
        """A row per costed op (kind "op"), then the time outside them, so that the CSV's measured_s
        column sums to what was measured: the views, the wrappers' own time, each unsupported op, the
        time between top-level ops (CPU), the unattributed device time (GPU); with a calibrated profile
        the framework line's prediction (calibrated_s)."""
        rows = [{"kind": "op", **op.to_dict()} for op in self.ops]
        other = [{"kind": "views", "name": "free ops (views, metadata)", "calls": self.free_calls, "measured_s": self.free_s},
                 {"kind": "wrappers", "name": "wrappers' own time", "calls": self.wrapper_calls, "measured_s": self.wrapper_s}]
        other += [{"kind": "unsupported", "name": u.name, "calls": u.calls, "measured_s": u.device_s if self.device else u.measured_s,
                   "advice": u.reason} for u in self.unsupported]
        if self.device:
            other += [{"kind": "unattributed", "name": u.kind, "calls": u.calls, "measured_s": u.seconds} for u in self.unattributed]
        else:
            other.append({"kind": "between ops", "name": "time between top-level ops", "calls": self.between_ops_gaps,
                          "measured_s": self.between_ops_s})
        if self.framework_s is not None:
            other.append({"kind": "framework", "name": "framework (predicted)", "calibrated_s": self.framework_s})
        return rows + other

    def to_table(self, limit: int | None = 20) -> str:
        return profile_table(self, limit)

def profile_table(rep: ProfileReport, limit: int | None = 20) -> str:
    from roofline.tables import grid
    from roofline.units import format_us_cell as _us
    from roofline.units import format_intensity

    rows = []
    shown = rep.ops if limit is None else rep.ops[:limit]
    cal = bool(rep.calibrated)
    for op in shown:
        sol = op.speed_of_light
        row = [op.name, op.shapes[:34] + ("..." if len(op.shapes) > 34 else ""), op.calls,
               format_intensity(op.intensity), op.bound, _us(op.roofline_s), _us(op.measured_s)]
        if cal:
            row += ["" if op.calibrated_s is None else
                    f"{_us(op.calibrated_s)} [{_us(op.calibrated_low_s)}-{_us(op.calibrated_high_s)}]",
                    "" if op.calibrated_s is None or not op.measured_s else f"{op.calibrated_s / op.measured_s - 1:+.0%}"]
        rows.append(row + ["no time" if op.measured_s <= 0 else f"{sol:.1%}" if sol < 10 else f"{sol:,.0f}x",
                           "-" if op.problem or op.beat_bound_s > 0 else _us(op.lost_s),  # beats the roof: no time lost
                           "IMPOSSIBLE" if op.problem else op.advice])
    src = ("device kernels (an op that launched none: its CPU wall time)" if rep.device
           else "CPU wall time of each op (no device kernels in the trace)")
    head = ["op", "input shapes", "calls", "FLOP/B", "bound", "roofline us", "measured us"]
    head += ["calibrated us [range]", "error"] if cal else []
    head += ["% SoL", "lost us", "what to do"]
    right = [False, False, True, True, False, True, True] + ([True, True] if cal else []) + [True, True, False]
    lines = [f"{rep.path} on {rep.machine}: measured = {src}"]
    if cal:
        lines.append(f"calibrated: {rep.calibrated}; error = calibrated / measured - 1; each op's basis (the measured "
                     "points it came from) is in --json (calibrated_basis)")
    lines.append(grid(head, rows, right))
    if limit is not None and len(rep.ops) > limit:
        rest = rep.ops[limit:]
        lines.append(f"... {len(rest)} more rows, {_us(sum(o.lost_s for o in rest))} us lost (--limit 0 shows all)")
    if rep.forwards > 1:
        lines.append(f"\nthe trace holds {rep.forwards} forwards: the totals below are over all of them")
    lines.append(f"\ncosted ops: measured {_us(rep.measured_s)} us against a roofline of {_us(rep.roofline_s)} us "
                 f"({rep.roofline_s / rep.measured_s:.1%} of speed of light)" if rep.measured_s else
                 f"\ncosted ops: {len(rep.ops)} row(s) measured at no time at all against a roofline of "
                 f"{_us(rep.roofline_s)} us (zero durations: see below)" if rep.ops else "\nno costed ops")
    lines.append(f"free ops (views, metadata): {rep.free_calls} calls, {_us(rep.free_s)} us")
    if rep.wrapper_calls:
        lines.append(f"wrappers' own time: {_us(rep.wrapper_s)} us in {rep.wrapper_calls} calls (ops with no rule of "
                     "their own, such as aten::linear, outside the ops they called)")
    if rep.between_ops_gaps:
        lines.append(f"between ops: {_us(rep.between_ops_s)} us in {rep.between_ops_gaps} gaps between top-level ops "
                     f"({_us(rep.between_ops_s / rep.between_ops_gaps)} us each; measured: Python, module calls, the "
                     "framework outside any op, the profiler's own recording)")
    if rep.device:
        lines.append(f"device time: {_us(rep.device_s)} us total = {_us(rep.costed_device_s)} costed + "
                     f"{_us(rep.unsupported_device_s)} unsupported + {_us(rep.unattributed_s)} unattributed "
                     "(a plain sum of the device events: overlapping streams count each)")
        for u in rep.unattributed:
            how = f"{u.launches} replays, {u.calls} kernels" if u.kind == GRAPH_REPLAY else f"{u.calls} calls"
            eg = ", ".join(n[:60] + ("..." if len(n) > 60 else "") for n in u.examples)
            lines.append(f"unattributed device time: {u.kind}: {_us(u.seconds)} us in {how}" + (f" (e.g. {eg})" if eg else ""))
    if cal and rep.measured_s:
        gaps = rep.framework_per_gap and not rep.device  # a framework line for the time between ops
        measured = rep.measured_total_s
        what = ("the top-level ops and the time between them, the profiler's own cost in both" if gaps
                else "the costed ops and the views")
        left_out = sum(u.measured_s for u in rep.unsupported)
        lines.append(f"calibrated: costed ops {_us(rep.calibrated_s - rep.framework_s)} us + framework "
                     f"{_us(rep.framework_s)} us ({rep.framework_basis}) = {_us(rep.calibrated_s)} us against "
                     f"{_us(measured)} us measured ({what}; {rep.calibrated_s / measured - 1:+.1%})"
                     + (f"; it leaves out the unsupported ops' {_us(left_out)} us, which no model costs"
                        if gaps and left_out > 0 else ""))
        if not rep.device and rep.unprofiled_s is not None:
            lines.append(f"without the profiler (the wall-clock probes): {_us(rep.unprofiled_s)} us predicted for "
                         + ("the same forward, what a clock around it unprofiled should read" if rep.forwards == 1 else
                            f"the trace's {rep.forwards} forwards, {_us(rep.unprofiled_s / rep.forwards)} us each: what a "
                            "clock around one unprofiled should read"))
    for note in rep.notes:
        lines.append(f"note: {note}")
    for op in rep.problems:
        lines.append(f"!! {op.name} {op.shapes}: {op.problem}")
    if rep.unsupported:
        lines.append("unsupported (no FLOPs or bytes counted): " + "; ".join(
            f"{u.name} x{u.calls} ({_us(u.measured_s)} us{f' CPU, {_us(u.device_s)} us device' if rep.device else ''}, "
            f"{u.reason})" for u in rep.unsupported))
    return "\n".join(lines)
