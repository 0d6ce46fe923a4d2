"""Reading a torch.profiler Chrome trace (no torch): its events, the op tree they nest into, the
device events (kernels, memcpy, memset) and their classes, and which ops are costed (the first op
down each branch that has a rule; profiler.py puts them against their bounds).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from roofline.errors import RooflineError
from roofline.trace.rules.registry import get_rule, lost_callee_rule
from roofline.units import US


DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "runtime", "hip_runtime")

# Profiler type strings -> roofline dtype names
PROFILER_DTYPES = {
    "float": "fp32", "double": "fp64", "c10::BFloat16": "bf16", "c10::Half": "fp16", "long int": "int64",
    "int": "int32", "short int": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::complex<float>": "complex64", "c10::complex<double>": "complex128", "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8",
}


@dataclass
class Node:
    """One cpu_op event with its children (mutable while the tree is built)."""

    name: str
    ts: float  # microseconds, as the trace has them
    dur: float
    args: dict
    children: list = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def subtree(self):
        yield self
        for c in self.children:
            yield from c.subtree()

    @property
    def own_us(self) -> float:
        """Its time outside the ops it called (its children), microseconds, at least 0."""
        return max(self.dur - sum(c.dur for c in self.children), 0.0)

    @property
    def does_own_work(self) -> bool:
        """Whether its own time (outside the ops it called) is at least OWN_WORK_SHARE of its time
        and OWN_WORK_US: a kernel of its own (an LSTM's mkldnn_rnn_layer, whose children are a few
        empties and copies), not a wrapper that dispatches to others (aten::linear's few us
        around its addmm)."""
        own = self.own_us
        return self.dur > 0 and own >= OWN_WORK_SHARE * self.dur and own >= OWN_WORK_US


OWN_WORK_SHARE = 0.8  # the ops it called take under a fifth of its time (a wrapper's profiler overhead is far less)
OWN_WORK_US = 20.0


def load_trace(path) -> dict:
    from roofline.files import check_file_numbers, json_failure, read_text

    import os

    if not os.path.exists(path):
        raise RooflineError(f"trace file not found: {str(path)!r}", field="trace")
    text = read_text(path, "trace file", "trace", gzipped=True)  # export_chrome_trace("x.json.gz") writes gzip
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{str(path)!r} is not a Chrome trace JSON file ({exc})", field="trace") from None
    except (ValueError, RecursionError) as exc:
        raise RooflineError(f"{str(path)!r} could not be read as JSON ({json_failure(exc)})", field="trace") from None
    check_file_numbers(doc, f"trace file {str(path)!r}", "trace")
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        raise RooflineError(f"{str(path)!r} has no traceEvents: not a torch.profiler Chrome trace", field="trace")
    for i, e in enumerate(events):
        problem = _event_problem(e)
        if problem:
            raise RooflineError(f"{str(path)!r}: trace event {i} {problem}: not a torch.profiler Chrome trace", field="trace")
    ops = [e for e in events if _cat(e) == "cpu_op" and "dur" in e]
    if len(ops) > 1 and not any(e["dur"] > 0 for e in ops):
        # ops that take no time cannot nest: every callee would be costed again beside its caller
        raise RooflineError(f"{str(path)!r}: every one of its {len(ops):,} op events has dur = 0: not a torch.profiler "
                            "Chrome trace (its ops are timed)", field="trace")
    return {"traceEvents": events}


MAX_DUR_US = 1e12  # an event longer than this (11.6 days, in the trace's microseconds) is not a profiled op


def _is_number(x) -> bool:
    """A finite JSON number (an integer past float range is not: math.isfinite would overflow)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return abs(x) < 1e300 if isinstance(x, int) else math.isfinite(x)


def _event_problem(e) -> str | None:
    """What is wrong with one trace event for this reader (None: nothing): an object whose
    ``ts`` and ``dur`` are finite numbers (``dur`` not negative), whose ``args`` is an object and
    whose ``pid`` and ``tid`` are numbers or names."""
    if not isinstance(e, dict):
        return f"is {json.dumps(e)[:40]}, not an object"
    for key in ("ts", "dur"):
        if key in e and not _is_number(e[key]):
            return f"has {key} = {json.dumps(e[key])[:40]}, not a number"
    if "dur" in e and e["dur"] < 0:
        return f"has a negative dur ({e['dur']})"
    if "dur" in e and e["dur"] > MAX_DUR_US:
        return f"has dur = {e['dur']:.3g} us, over {MAX_DUR_US / 86400e6:.0f} days (durations are microseconds)"
    if "args" in e and e["args"] is not None and not isinstance(e["args"], dict):
        return f"has args = {json.dumps(e['args'])[:40]}, not an object"
    for key in ("pid", "tid"):
        if key in e and e[key] is not None and not is_event_id(e[key]):
            return f"has {key} = {json.dumps(e[key])[:40]}, not a number or a name"
    return None


def _cat(e: dict) -> str:
    return str(e.get("cat", "")).lower()


def op_tree(events: list[dict]) -> list[Node]:
    """The cpu_op events nested by time, per thread; returns the roots."""
    by_thread: dict = {}
    for e in events:
        if _cat(e) == "cpu_op" and e.get("ph", "X") == "X" and "dur" in e and "ts" in e:
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(
                Node(str(e.get("name", "")), float(e["ts"]), float(e["dur"]), e.get("args") or {}))
    roots: list[Node] = []
    for nodes in by_thread.values():
        nodes.sort(key=lambda n: (n.ts, -n.dur))
        stack: list[Node] = []
        for n in nodes:
            while stack and n.ts >= stack[-1].end - 1e-3:
                stack.pop()
            if stack and n.end > stack[-1].end + 1.0 + 0.01 * stack[-1].dur:
                p = stack[-1]
                raise RooflineError(f"op events overlap without nesting: {n.name} at ts {n.ts:.3f} us starts inside "
                                    f"{p.name} (ts {p.ts:.3f}, dur {p.dur:.3f}) and ends {n.end - p.end:,.3f} us after "
                                    "it: not a torch.profiler Chrome trace (its calls nest)", field="trace")
            (stack[-1].children if stack else roots).append(n)
            stack.append(n)
    return roots


def repeats(roots: list[Node]) -> int:
    """How many times the trace's top-level ops (by start time, by name and input shapes) repeat one
    sequence end to end: the forwards a trace recorded in a loop (`for _ in range(3): model(x)`),
    so that totals can be given per forward; 1 when the sequence is not an exact repetition (one
    forward, forwards that differ, another thread's ops interleaved)."""
    seq = [(n.name, repr(n.args.get("Input Dims"))) for n in sorted(roots, key=lambda n: n.ts)]
    n = len(seq)
    for p in range(1, n // 2 + 1):
        if n % p == 0 and seq == seq[:p] * (n // p):
            return n // p
    return 1


def profiler_steps(events: list[dict]) -> int:
    """How many ProfilerStep#N spans the trace holds (torch.profiler's ``prof.step()``, one per
    iteration of a schedule): the forwards a user marked, where a repeating op sequence cannot tell
    k forwards from one forward of k identical blocks."""
    return len({e.get("name") for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
                and e.get("ph", "X") == "X"})


def between_ops(events: list[dict]) -> tuple[float, int]:
    """(seconds, gaps) of the time each CPU thread spent between its top-level ops (the cpu_op
    events no other op encloses), summed over the threads: the framework's own time between ops
    (Python, module calls, the dispatcher outside any op) and the profiler's own recording cost.
    Only the gaps between one top-level op and the next count: time before the first and after
    the last is outside the recorded ops altogether."""
    by_thread: dict = {}
    for e in events:
        if _cat(e) == "cpu_op" and e.get("ph", "X") == "X" and "dur" in e and "ts" in e:
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    total, gaps = 0.0, 0
    for spans in by_thread.values():
        spans.sort()
        end = None
        for ts, te in spans:
            if end is not None and ts >= end:
                total += ts - end
                gaps += 1
            end = te if end is None else max(end, te)
    return total * 1e-6, gaps


@dataclass(frozen=True)
class DeviceEvent:
    """One device event (a kernel, memcpy or memset): ``ext`` is the External id of the CPU op that
    launched it (its own, else its launch's through the correlation id; None when neither has one),
    ``graph`` that a graph launch (``cudaGraphLaunch``, ``cuGraphLaunch``, ``hipGraphLaunch``) ran it."""

    name: str
    cat: str
    seconds: float
    ext: object
    corr: object
    graph: bool = False


def device_events(events: list[dict]) -> list[DeviceEvent]:
    """Every event of DEVICE_CATEGORIES with a duration, in trace order, matched to its launch."""
    launch = {}
    for e in events:
        if _cat(e) in RUNTIME_CATEGORIES:
            a = e.get("args") or {}
            if is_event_id(a.get("correlation")):
                launch[a["correlation"]] = (a.get("External id"), "graphlaunch" in str(e.get("name", "")).lower())
    out = []
    for e in events:
        if _cat(e) in DEVICE_CATEGORIES and "dur" in e:
            a = e.get("args") or {}
            corr = a.get("correlation") if is_event_id(a.get("correlation")) else None
            ext_of_launch, graph = launch.get(corr, (None, False)) if corr is not None else (None, False)
            ext = a["External id"] if "External id" in a else ext_of_launch
            out.append(DeviceEvent(str(e.get("name", "")), _cat(e), float(e["dur"]) * US,
                                   ext if is_event_id(ext) else None, corr, graph))
    return out


def device_seconds(events: list[dict]) -> dict:
    """Device time (s) per External id of the CPU op that launched it; empty for a CPU-only trace.
    A graph replay's kernels belong to no op (they were captured elsewhere) and are left out."""
    return seconds_by_ext(device_events(events))


def seconds_by_ext(devs: list[DeviceEvent]) -> dict:
    """Device seconds per External id of ``devs``, a graph replay's left out (device_seconds)."""
    out: dict = {}
    for d in devs:
        if d.ext is not None and not d.graph:
            out[d.ext] = out.get(d.ext, 0.0) + d.seconds
    return out


GRAPH_REPLAY, NCCL, MEMCPY, MEMSET, TRITON, OTHER_KERNEL = (
    "CUDA graph replay", "collective (NCCL)", "memcpy", "memset", "compiled (Triton)", "other kernel")


def device_class(d: DeviceEvent) -> str:
    """The readable class of a device event no op accounts for, the first that fits: run by a graph
    launch; a memcpy or memset (by category, or a name starting so); an NCCL kernel (``nccl`` in the
    name: ncclKernel_*, ncclDevKernel_*); a Triton kernel (``triton`` in the name, as torch.compile's
    triton_poi_/red_/per_/tem_ kernels are); else another kernel."""
    low = d.name.lower()
    if d.graph:
        return GRAPH_REPLAY
    if d.cat == "gpu_memcpy" or low.startswith("memcpy"):
        return MEMCPY
    if d.cat == "gpu_memset" or low.startswith("memset"):
        return MEMSET
    if "nccl" in low:
        return NCCL
    if "triton" in low:
        return TRITON
    return OTHER_KERNEL


def is_event_id(x) -> bool:
    """An External id or correlation id: a number or a string (anything else cannot be matched)."""
    return isinstance(x, (int, float, str)) and not isinstance(x, bool)


def select_ops(roots: list[Node], wrappers: list | None = None):
    """(costed, free, unsupported) nodes, by the walk in the module docstring: down each branch
    the first op with a rule is costed; an op without one (or a free one) that called others is
    walked into and appended to ``wrappers``: its own time (own_us) is not in its callees' rows
    (profile_report lists it)."""
    costed, free, unsupported = [], [], []

    def walk(n: Node):
        rule = get_rule(n.name) or lost_callee_rule(n.name, {c.name for c in n.subtree()})
        if rule is not None and not rule.free:
            costed.append(n)
            return
        if n.children:
            if wrappers is not None:
                wrappers.append(n)
            for c in n.children:
                walk(c)
            return
        (free if rule is not None else unsupported).append(n)

    for r in roots:
        walk(r)
    return costed, free, unsupported
