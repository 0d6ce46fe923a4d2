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

Reading the trace is in chrome_trace.py, rebuilding a call in rebuild.py, the result and its table in
profile_result.py.
"""

from __future__ import annotations

import json
import statistics

from roofline.cost import binds, hierarchical_lower_bound, op_times, time_lower_bound
from roofline.diagnose.kernel_diagnosis import measurement_problem
from roofline.kernels import Kernel
from roofline.errors import RooflineError, check_number
from roofline.machines import get_machine
from roofline.trace.chrome_trace import (DeviceEvent, Node, PROFILER_DTYPES, between_ops, device_class, device_events,
                                         is_event_id, load_trace, op_tree, profiler_steps, repeats, seconds_by_ext,
                                         select_ops)
from roofline.trace.profile_result import ProfiledOp, ProfileReport, Unattributed, Unsupported  # noqa: F401 (re-exported)
from roofline.trace.rebuild import rebuild
from roofline.trace.result import peak_dtype
from roofline.trace.rules.matmul import STRIDED, kernel_shape
from roofline.trace.rules.registry import LOST_CALLEE, get_rule, lost_callee_rule
from roofline.units import US


OUTLIER_RATIO = 20.0  # a call this many times its row's median is a warm-up, not a steady-state time


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
    roots = op_tree(events)
    devs = device_events(events)
    if not roots and not devs:
        raise RooflineError(f"{str(path)!r} holds no op events (cpu_op) and no device kernels: record it with "
                            "torch.profiler, activities=[ProfilerActivity.CPU] (and CUDA on a GPU), record_shapes=True",
                            field="trace")
    walk = _Walk(machine, seconds_by_ext(devs))
    if roots and not any("Input Dims" in n.args for r in roots for n in r.subtree()):
        raise RooflineError(f"{str(path)!r} was recorded without the ops' input shapes: record it with "
                            "torch.profiler's record_shapes=True (no op can be costed without them)", field="trace")
    walk.walk(roots)
    wrapper_s, wrapper_calls = walk.finish()
    rows, unsupported = walk.rows, walk.unsupported
    repeat = repeats(roots)
    steps = profiler_steps(events)
    if forwards is None:  # said by the user, else the ProfilerStep spans; a bare repetition is ambiguous
        forwards = steps or 1
    else:
        forwards = int(check_number("forwards", forwards, maximum=1e6, integer=True))
    if calibrated is not None:  # a forward's weights are cold when what it moves outgrows the cache
        calibrated = calibrated.for_forward(sum(r["bytes"] * r["calls"] for r in rows.values()) / forwards)
    ops, unprofiled = _profiled_ops(rows, machine, calibrated)
    gap_s, gaps = between_ops(events)
    framework = calibrated.framework_s(gaps, len(walk.free)) if calibrated is not None else None
    notes = _forward_notes(rows, forwards, repeat)
    if framework and gaps and not devs and calibrated.calibration.framework_gap_s is not None:
        notes += _framework_notes(framework, gap_s, gaps)
    notes += _trace_notes(rows, walk.lost_callee, walk.costed)
    return ProfileReport(str(path), machine.key or machine.name, bool(devs), tuple(ops),
                         tuple(Unsupported(k[0], v[0], v[1], k[1], v[2])
                               for k, v in sorted(unsupported.items(), key=lambda kv: -kv[1][1])),
                         len(walk.free), sum(n.dur for n in walk.free) * US,
                         (calibrated.measured_by("wall" if devs else "profiler").describe()
                          if calibrated is not None else ""),
                         framework,
                         sum(d.seconds for d in devs), walk.costed_device_s, sum(v[2] for v in unsupported.values()),
                         unattributed_device_time(devs, walk.claimed), gap_s, gaps,
                         calibrated.framework_text if calibrated is not None else "",
                         calibrated is not None and calibrated.calibration.framework_gap_s is not None,
                         sum(n.dur for n in roots) * US, wrapper_s, wrapper_calls,
                         # the profiled gaps hold the framework and the profiler's recording: an upper bound on it
                         unprofiled + (min(framework, gap_s) if gaps and not devs else framework)
                         if calibrated is not None else None,
                         tuple(notes), forwards)


class _Walk:
    """profile_report's walk down the op tree. ``rows``: the costed calls, keyed by (name, shapes,
    dtype, flops, bytes); ``unsupported``: (name, why) -> [calls, CPU s, device s]; ``claimed``:
    the External ids whose device time an op (costed or unsupported) has taken; ``dev``: device
    seconds by External id."""

    def __init__(self, machine, dev: dict):
        self.machine, self.dev = machine, dev
        self.claimed: set = set()
        self.cache: dict = {}
        self.rows: dict = {}
        self.unsupported: dict = {}
        self.costed_device_s = 0.0
        self.lost_callee: dict = {}  # composite op -> calls recorded without their callee (costed by its rule)
        self.wrappers: list = []  # ops with no rule walked into: their own time outside their callees is listed
        self.rebuilt_not: dict = {}  # id of a wrapper whose own call could not be rebuilt -> why
        self.costed: list = []
        self.free: list = []
        self.missing: list = []

    def take(self, n: Node) -> float:
        """The device time of the kernels ``n`` and its callees launched, each External id once."""
        s = 0.0
        for m in n.subtree():
            x = m.args.get("External id")
            if is_event_id(x) and x not in self.claimed and x in self.dev:
                self.claimed.add(x)
                s += self.dev[x]
        return s

    def refuse(self, n: Node, why: str) -> None:
        """A call of ``n`` that could not be costed: its CPU wall time and its kernels' device time."""
        u = self.unsupported.setdefault((n.name, why), [0, 0.0, 0.0])
        u[0] += 1
        u[1] += n.dur * US
        u[2] += self.take(n)

    def walk(self, roots) -> None:
        self.costed, self.free, self.missing = select_ops(roots, self.wrappers)
        queue = list(self.costed)
        while queue:
            self.cost(queue.pop(0), queue)

    def cost(self, n: Node, queue: list) -> None:
        """Cost one call ``n`` into a row, or list it as unsupported, or (an overload its rule cannot
        be rebuilt for) put its callees at the head of ``queue``."""
        from roofline.trace.record import apply_rule

        kids = [(c.name, c.args.get("Input type"), c.args.get("Input Dims")) for c in n.children] \
            if n.name in ("aten::index", "aten::nonzero") else None
        key = (n.name, json.dumps([n.args.get(k) for k in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides")]
                                  + [kids]))
        if key not in self.cache:
            self.cache[key] = rebuild(n.name, n.args, n.children)
        got = self.cache[key]
        if isinstance(got, str) and n.children:
            # an overload the rule's call cannot be rebuilt for (``where(mask)`` is ``nonzero``, not
            # the pointwise ``where``): its callees are costed instead, as for an op without a rule,
            # and its own time is listed like such an op's (finish)
            self.wrappers.append(n)
            self.rebuilt_not[id(n)] = got
            c2, f2, m2 = select_ops(n.children, self.wrappers)
            queue[:0] = c2
            self.free += f2
            self.missing += m2
            return
        if isinstance(got, str):
            return self.refuse(n, got)
        call, dtype = got
        rule = get_rule(n.name)
        if rule is None:  # a composite whose callee's event the trace lost (select_ops costed it)
            rule = lost_callee_rule(n.name, {c.name for c in n.subtree()})
            self.lost_callee[n.name] = self.lost_callee.get(n.name, 0) + 1
        cost = apply_rule(rule, call)
        if cost is None:
            return self.refuse(n, "its rule does not cover these arguments")
        self.add_row(n, rule, cost, dtype)

    def add_row(self, n: Node, rule, cost, dtype: str) -> None:
        """One costed call of ``n`` into its row: calls, measured and roofline time."""
        device_s = self.take(n) if self.dev else 0.0
        self.costed_device_s += device_s
        measured, source = (device_s, "device") if device_s > 0 else (n.dur * US, "cpu")
        shapes = _shapes_text(n.args)
        kshape = kernel_shape(n.name, n.args.get("Input Dims") or [], n.args.get("Input Strides"))
        if kshape == (STRIDED,):
            shapes += " (strided)"  # a non-contiguous input: its own row, corrected by the strided probes
        r = self.rows.setdefault((n.name, shapes, dtype, cost.flops, cost.bytes),
                                 dict(category=rule.category, calls=0, flops=cost.flops, bytes=cost.bytes,
                                      roofline_s=0.0, measured_s=0.0, source=source, shape=kshape))
        r["calls"] += 1
        r["measured_s"] += measured
        r.setdefault("each", []).append(measured)
        if cost.bytes > 0:
            k = Kernel(n.name, cost.flops, cost.bytes, rule.category, peak_dtype(dtype, self.machine))
            r["roofline_s"] += time_lower_bound(k, self.machine)
            # what a measurement cannot beat: the bound at the cache level that holds the op's bytes (a
            # calibrated profile's levels), else main memory's
            r["floor_s"] = r.get("floor_s", 0.0) + hierarchical_lower_bound(k, self.machine)[0]
        if source == "device":
            r["source"] = "device"

    def finish(self) -> tuple[float, int]:
        """List the ops with no rule, and the wrappers' own time: a kernel of their own is
        unsupported, a wrapper's few us its own line. Returns (wrapper_s, wrapper_calls)."""
        for n in self.missing:
            self.refuse(n, "no rule for this op")
        wrapper_s, wrapper_calls = 0.0, 0
        for n in self.wrappers:
            ruled = get_rule(n.name) is not None and id(n) not in self.rebuilt_not  # a view or other free op: never a kernel
            if n.does_own_work and not ruled:
                why = self.rebuilt_not.get(id(n), "no rule for this op") + "; its own time, outside the ops it called"
                u = self.unsupported.setdefault((n.name, why), [0, 0.0, 0.0])
                u[0] += 1
                u[1] += n.own_us * US
            else:
                wrapper_s += n.own_us * US
                wrapper_calls += 1
        return wrapper_s, wrapper_calls


def _profiled_ops(rows: dict, machine, calibrated) -> tuple[list[ProfiledOp], float]:
    """The rows as ProfiledOps, most time lost first, and the costed ops' time as a clock without
    the profiler would read it (the wall-clock probes; 0 without ``calibrated``)."""
    ops = []
    unprofiled = 0.0
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
    return ops, unprofiled


def _forward_notes(rows: dict, forwards: int, repeat: int) -> list[str]:
    """Notes on how many forwards the trace holds: calls that ``forwards`` does not divide, or top-level
    ops that repeat end to end (``repeat`` times) with no count given."""
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
    return notes


def _framework_notes(framework: float, gap_s: float, gaps: int) -> list[str]:
    """A CPU trace with a framework probe: notes where the probe's time per gap between ops (``framework``
    over ``gaps``) and the trace's own (``gap_s``) differ."""
    notes = []
    if framework > gap_s:
        notes.append(f"the framework probe's {framework / gaps / US:,.1f} us per gap is more than this trace's own gaps "
                     f"({gap_s / gaps / US:,.1f} us each, the profiler's recording in them): this program's Python is "
                     "leaner than the probe's models, so the framework line overstates it; the prediction without the "
                     "profiler takes the measured gaps instead (an upper bound: they hold the profiler's recording)")
    if gap_s > 2 * framework:
        notes.append(f"the profiled gaps between ops average {gap_s / gaps / US:,.1f} us against the framework probe's "
                     f"{framework / gaps / US:,.1f} us: under torch.profiler each gap also holds the profiler's own recording, "
                     "which the framework line (a forward's time without the profiler) leaves out")
    return notes


def _trace_notes(rows: dict, lost_callee: dict, costed: list) -> list[str]:
    """Notes on the recording: warm-up calls inside it, callee events the profiler lost, no strides."""
    notes = []
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
    return notes


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

