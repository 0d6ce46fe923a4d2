"""Read a torch.profiler Chrome trace (recorded with ``record_shapes=True``) and put every op's
measured time against its roofline bound on a machine.

Which ops are costed: the trace nests ops (``aten::linear`` calls ``aten::t`` and
``aten::addmm``, which calls ``aten::copy_``). Walking down from the top, the first op that has a
rule (rules/) is costed as a whole, with everything it called; ops without a rule are
composites whose children are walked; free ops (views) cost nothing unless something under them
does. An op with no rule and nothing under it is unsupported, and listed.

FLOPs and bytes come from the same rules as ``roofline.trace``: the op is rebuilt on the meta
device from the recorded shapes, strides, dtypes and scalar arguments, run there for its output
shapes, and costed. An op whose call cannot be rebuilt (an argument the profiler does not record)
is listed as unsupported with that reason.

Measured time: the device kernels the op launched (matched by the profiler's "External id" or
correlation id) when the trace has any, else the op's own wall time on the CPU.

Device time is never dropped: in a trace with device events (kernels, memcpy, memset) their total
(a plain sum of durations: streams that overlap count each) = the time of the costed ops' kernels
+ that of the unsupported ops' + the unattributed rest, which is listed by class: CUDA graph
replays (a graph's kernels carry its ``cudaGraphLaunch``'s correlation; no op of the trace launched
them, so they are never an op's time), NCCL collectives, memcpy, memset, Triton kernels of
torch.compile, and other kernels (launched outside any op, or by a free op or a composite itself).

Reading the trace is in chrome_trace.py, rebuilding a call in rebuild.py.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from roofline.cost import binds, hierarchical_lower_bound, op_times, time_lower_bound
from roofline.diagnose.kernel_diagnosis import AgainstBound, advice, measurement_problem
from roofline.kernels import Kernel
from roofline.errors import RooflineError, check_number
from roofline.machines import get_machine
from roofline.tables import Tabular, dump_json
from roofline.trace.chrome_trace import (DeviceEvent, GRAPH_REPLAY, Node, PROFILER_DTYPES, _is_id, _seconds_by_ext,
                                         between_ops, device_class, device_events, load_trace, op_tree,
                                         profiler_steps, repeats, select_ops)
from roofline.trace.rebuild import rebuild
from roofline.trace.result import peak_dtype
from roofline.trace.rules.matmul import STRIDED, kernel_shape
from roofline.trace.rules.registry import LOST_CALLEE, get_rule, lost_callee_rule
from roofline.units import US


OUTLIER_RATIO = 20.0  # a call this many times its row's median is a warm-up, not a steady-state time
COMPARISON_OPS = ("aten::sort", "aten::argsort", "aten::msort", "aten::topk", "aten::kthvalue", "aten::median")


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
    def advice(self) -> str:
        if self.flops == 0 and self.name in COMPARISON_OPS:
            return "bytes-only bound: its comparisons are no FLOPs (a sort is n log n of them): a floor, not a target"
        if self.speed_of_light > 1 and not self.problem:
            # faster than the main-memory roof, within a cache level's (measurement_problem passed it)
            return "in cache: beats main memory's roof, not its cache's (a warm working set)"
        return advice(self.bound, self.category, self.speed_of_light, self.gpu)

    def to_dict(self) -> dict:
        return {"name": self.name, "shapes": self.shapes, "dtype": self.dtype, "category": self.category,
                "calls": self.calls, "flops": self.flops, "bytes": self.bytes,  # per call; the times are over all calls
                "flops_total": self.flops * self.calls, "bytes_total": self.bytes * self.calls, "intensity": self.intensity,
                "bound": self.bound, "roofline_s": self.roofline_s, "measured_s": self.measured_s,
                "speed_of_light": self.speed_of_light if self.measured_s > 0 else None,  # no time: no ratio
                "lost_s": self.lost_s, "beat_bound_s": self.beat_bound_s, "source": self.source,
                "advice": self.advice, "problem": self.problem, "op_class": self.op_class,
                "calibrated_s": self.calibrated_s, "calibrated_low_s": self.calibrated_low_s,
                "calibrated_high_s": self.calibrated_high_s, "calibrated_basis": self.calibrated_basis,
                "extrapolated": self.extrapolated}


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
class ProfileReport(Tabular):
    """Every costed op of a trace against its bound on ``machine``, ranked by time lost.

    ``device`` says the trace has device events. Their total ``device_s`` (a plain sum: streams that
    overlap count each) = ``costed_device_s`` (the costed ops' kernels) + ``unsupported_device_s``
    + ``unattributed_s`` (the sum of ``unattributed``, by class, largest first); all 0 without."""

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
    def measured_s(self) -> float:
        return sum(op.measured_s for op in self.ops)

    @property
    def roofline_s(self) -> float:
        return sum(op.roofline_s for op in self.ops)

    @property
    def calibrated_s(self) -> float | None:
        """The calibrated prediction of the costed ops plus the framework line (None without a profile)."""
        if not self.calibrated:
            return None
        return sum(op.calibrated_s or 0.0 for op in self.ops) + (self.framework_s or 0.0)

    @property
    def problems(self) -> tuple[ProfiledOp, ...]:
        return tuple(op for op in self.ops if op.problem)

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

    def to_json(self) -> str:
        return dump_json(self.to_dict())

    def to_csv(self) -> str:
        """A row per costed op (kind "op"), then the time outside them, so that the measured_s column
        sums to what was measured: the views, the wrappers' own time, each unsupported op, the time
        between top-level ops (CPU), the unattributed device time (GPU); with a calibrated profile the
        framework line's prediction (calibrated_s)."""
        from roofline.tables import rows_to_csv

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
        return rows_to_csv(rows + other, list(rows[0]) if rows else ["kind", "name", "calls", "measured_s", "calibrated_s"])

    def to_table(self, limit: int | None = 20) -> str:
        return profile_table(self, limit)


def _shapes_text(args: dict) -> str:
    """Tensor input shapes: '2x16x64, 64'; a tensor list in brackets; a 0-d tensor as ()."""
    parts = []
    for d, t in zip(args.get("Input Dims") or [], args.get("Input type") or []):
        if t == "TensorList":
            parts.append("[" + ", ".join("x".join(map(str, x)) for x in d) + "]")
        elif t in PROFILER_DTYPES:
            parts.append("x".join(map(str, d)) or "()")
    return ", ".join(parts)


def profile_report(path, machine, calibrated=None, forwards: int | None = None) -> ProfileReport:
    """Read the Chrome trace at ``path`` and cost each op on ``machine`` (see module docstring).
    With ``calibrated`` (a CalibratedModel, e.g. of the profile given as the machine) every op also
    gets the calibrated prediction and its interval, and the free ops a framework line: one eager
    call (the calibrated launch) each. ``forwards``: how many forwards the trace holds (totals are
    also given per forward); by default its ProfilerStep spans, else one, with a note where its
    top-level ops repeat end to end (k forwards and one forward of k identical blocks look alike)."""
    from roofline.extras import require_torch

    machine = get_machine(machine)
    events = load_trace(path)["traceEvents"]
    require_torch("roofline profile")  # to rebuild the calls on the meta device
    from roofline.trace.record import apply_rule

    roots = op_tree(events)
    devs = device_events(events)
    if not roots and not devs:
        raise RooflineError(f"{str(path)!r} holds no op events (cpu_op) and no device kernels: record it with "
                            "torch.profiler, activities=[ProfilerActivity.CPU] (and CUDA on a GPU), record_shapes=True",
                            field="trace")
    dev = _seconds_by_ext(devs)
    claimed: set = set()  # External ids whose device time an op (costed or unsupported) has taken

    def take(n: Node) -> float:
        """The device time of the kernels ``n`` and its callees launched, each External id once."""
        s = 0.0
        for m in n.subtree():
            x = m.args.get("External id")
            if _is_id(x) and x not in claimed and x in dev:
                claimed.add(x)
                s += dev[x]
        return s

    if roots and not any("Input Dims" in n.args for r in roots for n in r.subtree()):
        raise RooflineError(f"{str(path)!r} was recorded without the ops' input shapes: record it with "
                            "torch.profiler's record_shapes=True (no op can be costed without them)", field="trace")
    wrappers: list = []  # ops with no rule walked into: their own time outside their callees is listed below
    rebuilt_not: dict = {}  # id of a wrapper whose own call could not be rebuilt -> why
    costed, free, missing = select_ops(roots, wrappers)
    cache: dict = {}
    rows: dict = {}
    unsupported: dict = {}
    costed_device_s = 0.0
    lost_callee: dict = {}  # composite op -> calls recorded without their callee (costed by its rule)
    queue = list(costed)
    while queue:
        n = queue.pop(0)
        kids = [(c.name, c.args.get("Input type"), c.args.get("Input Dims")) for c in n.children] \
            if n.name in ("aten::index", "aten::nonzero") else None
        key = (n.name, json.dumps([n.args.get(k) for k in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides")]
                                  + [kids]))
        if key not in cache:
            cache[key] = rebuild(n.name, n.args, n.children)
        got = cache[key]
        if isinstance(got, str) and n.children:
            # an overload the rule's call cannot be rebuilt for (``where(mask)`` is ``nonzero``, not
            # the pointwise ``where``): its callees are costed instead, as for an op without a rule,
            # and its own time is listed like such an op's (below)
            wrappers.append(n)
            rebuilt_not[id(n)] = got
            c2, f2, m2 = select_ops(n.children, wrappers)
            queue[:0] = c2
            free += f2
            missing += m2
            continue
        if isinstance(got, str):
            u = unsupported.setdefault((n.name, got), [0, 0.0, 0.0])
            u[0] += 1
            u[1] += n.dur * US
            u[2] += take(n)
            continue
        call, dtype = got
        rule = get_rule(n.name)
        if rule is None:  # a composite whose callee's event the trace lost (select_ops costed it)
            rule = lost_callee_rule(n.name, {c.name for c in n.subtree()})
            lost_callee[n.name] = lost_callee.get(n.name, 0) + 1
        cost = apply_rule(rule, call)
        if cost is None:
            u = unsupported.setdefault((n.name, "its rule does not cover these arguments"), [0, 0.0, 0.0])
            u[0] += 1
            u[1] += n.dur * US
            u[2] += take(n)
            continue
        device_s = take(n) if dev else 0.0
        costed_device_s += device_s
        measured, source = (device_s, "device") if device_s > 0 else (n.dur * US, "cpu")
        shapes = _shapes_text(n.args)
        kshape = kernel_shape(n.name, n.args.get("Input Dims") or [], n.args.get("Input Strides"))
        if kshape == (STRIDED,):
            shapes += " (strided)"  # a non-contiguous input: its own row, corrected by the strided probes
        r = rows.setdefault((n.name, shapes, dtype, cost.flops, cost.bytes), dict(category=rule.category, calls=0, flops=cost.flops, bytes=cost.bytes,
                                                           roofline_s=0.0, measured_s=0.0, source=source, shape=kshape))
        r["calls"] += 1
        r["measured_s"] += measured
        r.setdefault("each", []).append(measured)
        if cost.bytes > 0:
            k = Kernel(n.name, cost.flops, cost.bytes, rule.category, peak_dtype(dtype, machine))
            r["roofline_s"] += time_lower_bound(k, machine)
            # what a measurement cannot beat: the bound at the cache level that holds the op's bytes (a
            # calibrated profile's levels), else main memory's
            r["floor_s"] = r.get("floor_s", 0.0) + hierarchical_lower_bound(k, machine)[0]
        if source == "device":
            r["source"] = "device"
    for n in missing:
        u = unsupported.setdefault((n.name, "no rule for this op"), [0, 0.0, 0.0])
        u[0] += 1
        u[1] += n.dur * US
        u[2] += take(n)
    wrapper_s, wrapper_calls = 0.0, 0
    for n in wrappers:  # their own time: a kernel of their own is unsupported, a wrapper's few us its own line
        ruled = get_rule(n.name) is not None and id(n) not in rebuilt_not  # a view or other free op: never a kernel
        if n.does_own_work and not ruled:
            why = rebuilt_not.get(id(n), "no rule for this op") + "; its own time, outside the ops it called"
            u = unsupported.setdefault((n.name, why), [0, 0.0, 0.0])
            u[0] += 1
            u[1] += n.own_us * US
        else:
            wrapper_s += n.own_us * US
            wrapper_calls += 1
    repeat = repeats(roots)
    steps = profiler_steps(events)
    if forwards is None:  # said by the user, else the ProfilerStep spans; a bare repetition is ambiguous
        forwards = steps or 1
    else:
        forwards = int(check_number("forwards", forwards, maximum=1e6, integer=True))
    if calibrated is not None:  # a forward's weights are cold when what it moves outgrows the cache
        calibrated = calibrated.for_forward(sum(r["bytes"] * r["calls"] for r in rows.values()) / forwards)
    ops = []
    unprofiled = 0.0  # the costed ops as a clock without the profiler would time them (the wall-clock probes)
    for (name, shapes, dtype, _, _), r in rows.items():
        floor = r.get("floor_s", r["roofline_s"])  # the bound at the cache level that holds its bytes, where known
        compute_s, memory_s, _ = op_times(r["flops"], r["bytes"], machine.peak(peak_dtype(dtype, machine)), machine.bandwidth)
        bound = binds(compute_s, memory_s)
        extra = {}
        if calibrated is not None and r["bytes"] > 0:
            k = Kernel(name, r["flops"], r["bytes"], r["category"], peak_dtype(dtype, machine), shape=r["shape"])
            # an op timed on the CPU by the profiler is predicted as the profiler records it (its own cost per op in)
            p = calibrated.measured_by("profiler" if r["source"] == "cpu" else "wall").predict_op(k, machine)
            unprofiled += (calibrated.measured_by("wall").predict_op(k, machine).time_s if r["source"] == "cpu"
                           else p.time_s) * r["calls"]
            extra = dict(calibrated_s=p.time_s * r["calls"], calibrated_low_s=p.low_s * r["calls"],
                         calibrated_high_s=p.high_s * r["calls"], op_class=p.op_class, calibrated_basis=p.basis,
                         extrapolated=bool(p.extrapolated))
        ops.append(ProfiledOp(name, shapes, dtype, r["category"], r["calls"], r["flops"], r["bytes"], bound,
                              r["roofline_s"], r["measured_s"], r["source"],
                              measurement_problem(floor, r["measured_s"], r["bytes"], machine,
                                                  "roofline bound" if floor >= r["roofline_s"]
                                                  else "bound at the cache level that holds its bytes",
                                                  r["flops"] * r["calls"], bound),
                              machine.sm_count is not None, r["shape"], **extra))
    ops.sort(key=lambda o: -o.lost_s)
    gap_s, gaps = between_ops(events)
    framework = calibrated.framework_s(gaps, len(free)) if calibrated is not None else None
    notes = []
    if forwards > 1:
        odd = [(name, r["calls"]) for (name, *_), r in rows.items() if r["calls"] % forwards]
        if odd:
            name, calls = max(odd, key=lambda x: x[1])
            notes.append(f"{forwards} forwards do not divide the calls of {len(odd)} of {len(rows)} rows (e.g. {name}: "
                         f"{calls:,} calls): the trace may not hold {forwards} forwards"
                         + (f" (its top-level ops repeat {repeat} times)" if repeat > 1 and repeat != forwards else "")
                         + "; the figures per forward divide by it all the same")
    if repeat > 1 and forwards == 1:
        notes.append(f"the trace's top-level ops repeat {repeat} times end to end: {repeat} forwards recorded in a loop, "
                     f"or one forward of {repeat} identical blocks (the trace cannot tell); the totals are the whole "
                     f"trace's: give --forwards {repeat} (or mark each forward with prof.step()) for figures per forward")
    if framework and gaps and not devs and calibrated.calibration.framework_gap_s is not None and framework > gap_s:
        notes.append(f"the framework probe's {framework / gaps / US:,.1f} us per gap is more than this trace's own gaps "
                     f"({gap_s / gaps / US:,.1f} us each, the profiler's recording in them): this program's Python is "
                     "leaner than the probe's models, so the framework line overstates it; the prediction without the "
                     "profiler takes the measured gaps instead (an upper bound: they hold the profiler's recording)")
    if framework and gaps and not devs and calibrated.calibration.framework_gap_s is not None and gap_s > 2 * framework:
        notes.append(f"the profiled gaps between ops average {gap_s / gaps / US:,.1f} us against the framework probe's "
                     f"{framework / gaps / US:,.1f} us: under torch.profiler each gap also holds the profiler's own recording, "
                     "which the framework line (a forward's time without the profiler) leaves out")
    outliers = [(max(r["each"]), statistics.median(r["each"]), name) for (name, *_), r in rows.items()
                if len(r["each"]) >= 3 and max(r["each"]) > OUTLIER_RATIO * statistics.median(r["each"]) > 0]
    if outliers:
        big, med, name = max(outliers)
        notes.append(f"{len(outliers)} row(s) hold a call over {OUTLIER_RATIO:g}x the row's median (the largest: {name} "
                     f"{big / US:,.0f} us against {med / US:,.1f}): a first call's warm-up (allocation, code loading) "
                     "inside the recording; warm up under the profiler (torch.profiler.schedule(wait=0, warmup=2, "
                     "active=1) with prof.step() per forward) and record again")
    for name, calls in lost_callee.items():
        notes.append(f"{calls:,} call(s) of {name} were recorded without the {LOST_CALLEE[name]} each makes (the "
                     f"profiler lost that event): costed by {LOST_CALLEE[name]}'s rule on {name}'s own time")
    if not any("Input Strides" in n.args for n in costed):
        notes.append("this trace records no input strides (an older torch, or record_shapes off): calls on "
                     "non-contiguous views are not told apart, nor corrected by the strided probes")
    return ProfileReport(str(path), machine.key or machine.name, bool(devs), tuple(ops),
                         tuple(Unsupported(k[0], v[0], v[1], k[1], v[2])
                               for k, v in sorted(unsupported.items(), key=lambda kv: -kv[1][1])),
                         len(free), sum(n.dur for n in free) * US,
                         (calibrated.measured_by("wall" if devs else "profiler").describe()
                          if calibrated is not None else ""),
                         framework,
                         sum(d.seconds for d in devs), costed_device_s, sum(v[2] for v in unsupported.values()),
                         unattributed_device_time(devs, claimed), gap_s, gaps,
                         calibrated.framework_text if calibrated is not None else "",
                         calibrated is not None and calibrated.calibration.framework_gap_s is not None,
                         sum(n.dur for n in roots) * US, wrapper_s, wrapper_calls,
                         # the profiled gaps hold the framework and the profiler's recording: an upper bound on it
                         unprofiled + (min(framework, gap_s) if gaps and not devs else framework)
                         if calibrated is not None else None,
                         tuple(notes), forwards)


def unattributed_device_time(devs: list[DeviceEvent], claimed=frozenset()) -> tuple[Unattributed, ...]:
    """The device events no op took (a graph replay's, one without an External id, or one whose
    External id is not in ``claimed``), grouped by ``device_class``, largest first; each class
    names its three most time-consuming kernels."""
    groups: dict = {}
    for d in devs:
        if d.graph or d.ext is None or d.ext not in claimed:
            g = groups.setdefault(device_class(d), dict(calls=0, launches=set(), seconds=0.0, names={}))
            g["calls"] += 1
            g["launches"].add(d.corr if d.corr is not None else ("event", g["calls"]))
            g["seconds"] += d.seconds
            g["names"][d.name] = g["names"].get(d.name, 0.0) + d.seconds
    out = [Unattributed(kind, g["calls"], len(g["launches"]), g["seconds"],
                        tuple(n for n, _ in sorted(g["names"].items(), key=lambda kv: -kv[1])[:3]))
           for kind, g in groups.items()]
    return tuple(sorted(out, key=lambda u: -u.seconds))


def profile_table(rep: ProfileReport, limit: int | None = 20) -> str:
    from roofline.tables import _us, grid
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
