"""Read a torch.profiler Chrome trace (recorded with ``record_shapes=True``) and put every op's
measured time against its roofline bound on a machine.

Which ops are costed: the trace nests ops (``aten::linear`` calls ``aten::t`` and
``aten::addmm``, which calls ``aten::copy_``). Walking down from the top, the first op that has a
rule (rules.py) is costed as a whole, with everything it called; ops without a rule are
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
"""

from __future__ import annotations

from roofline.tables import Tabular, dump_json  # noqa: E402

import ast
import json
import math
from dataclasses import dataclass, field

from roofline.cost import binds, op_times, time_lower_bound
from roofline.diagnose.kernel import advice, measurement_problem
from roofline.errors import RooflineError
from roofline.kernels import Kernel
from roofline.machines import get_machine
from roofline.trace.result import peak_dtype
from roofline.trace.rules import gemm_shape, get_rule
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


# ---------------------------------------------------------------------------------------------
# reading the trace (no torch)
# ---------------------------------------------------------------------------------------------


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


def load_trace(path) -> dict:
    from roofline.files import json_failure, read_text

    import os

    if not os.path.exists(path):
        raise RooflineError(f"trace file not found: {str(path)!r}", field="trace")
    text = read_text(path, "trace file", "trace")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{str(path)!r} is not a Chrome trace JSON file ({exc})", field="trace") from None
    except (ValueError, RecursionError) as exc:
        raise RooflineError(f"{str(path)!r} could not be read as JSON ({json_failure(exc)})", field="trace") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        raise RooflineError(f"{str(path)!r} has no traceEvents: not a torch.profiler Chrome trace", field="trace")
    for i, e in enumerate(events):
        problem = _event_problem(e)
        if problem:
            raise RooflineError(f"{str(path)!r}: trace event {i} {problem}: not a torch.profiler Chrome trace", field="trace")
    return {"traceEvents": events}


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
    if "args" in e and e["args"] is not None and not isinstance(e["args"], dict):
        return f"has args = {json.dumps(e['args'])[:40]}, not an object"
    for key in ("pid", "tid"):
        if key in e and e[key] is not None and not _is_id(e[key]):
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
            (stack[-1].children if stack else roots).append(n)
            stack.append(n)
    return roots


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
            if _is_id(a.get("correlation")):
                launch[a["correlation"]] = (a.get("External id"), "graphlaunch" in str(e.get("name", "")).lower())
    out = []
    for e in events:
        if _cat(e) in DEVICE_CATEGORIES and "dur" in e:
            a = e.get("args") or {}
            corr = a.get("correlation") if _is_id(a.get("correlation")) else None
            ext_of_launch, graph = launch.get(corr, (None, False)) if corr is not None else (None, False)
            ext = a["External id"] if "External id" in a else ext_of_launch
            out.append(DeviceEvent(str(e.get("name", "")), _cat(e), float(e["dur"]) * US,
                                   ext if _is_id(ext) else None, corr, graph))
    return out


def device_seconds(events: list[dict]) -> dict:
    """Device time (s) per External id of the CPU op that launched it; empty for a CPU-only trace.
    A graph replay's kernels belong to no op (they were captured elsewhere) and are left out."""
    return _seconds_by_ext(device_events(events))


def _seconds_by_ext(devs: list[DeviceEvent]) -> dict:
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


def _is_id(x) -> bool:
    """An External id or correlation id: a number or a string (anything else cannot be matched)."""
    return isinstance(x, (int, float, str)) and not isinstance(x, bool)


def select_ops(roots: list[Node]):
    """(costed, free, unsupported) nodes, by the walk in the module docstring."""
    costed, free, unsupported = [], [], []

    def walk(n: Node):
        rule = get_rule(n.name)
        if rule is not None and not rule.free:
            costed.append(n)
            return
        if n.children:
            for c in n.children:
                walk(c)
            return
        (free if rule is not None else unsupported).append(n)

    for r in roots:
        walk(r)
    return costed, free, unsupported


# ---------------------------------------------------------------------------------------------
# rebuilding a call on the meta device (torch)
# ---------------------------------------------------------------------------------------------

_MISSING = object()


def _scalar(text):
    if text in ("", None):
        return _MISSING
    if text in ("True", "False"):
        return text == "True"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _recorded_values(args: dict, torch):
    """Positional values from Input Dims / Input type / Concrete Inputs / Input Strides."""
    from roofline.trace.record import DTYPE_BY_NAME

    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    concrete = args.get("Concrete Inputs") or [""] * len(dims)
    strides = args.get("Input Strides") or [None] * len(dims)
    first = next((PROFILER_DTYPES[t] for t in types if t in PROFILER_DTYPES), "fp32")
    out = []
    for i, (d, t) in enumerate(zip(dims, types)):
        st = strides[i] if i < len(strides) else None
        if t in PROFILER_DTYPES:
            dt = DTYPE_BY_NAME.get(PROFILER_DTYPES[t], torch.float32)
            out.append(torch.empty_strided(d, st, dtype=dt, device="meta") if st and len(st) == len(d)
                       else torch.empty(d, dtype=dt, device="meta"))
        elif t == "TensorList":
            dt = DTYPE_BY_NAME.get(first, torch.float32)  # the list's dtype is not recorded: the call's
            out.append([torch.empty(s, dtype=dt, device="meta") for s in d])
        else:
            out.append(_scalar(concrete[i] if i < len(concrete) else ""))
    return out


_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16", 23: "float8_e5m2", 24: "float8_e4m3fn"}


def _convert(value, arg, torch):
    kind = str(arg.type)
    if value is _MISSING:
        value = arg.default_value if arg.has_default_value() else None
    if "device" in arg.name:
        return torch.device("meta") if value is not None or "Device" in kind else value
    if isinstance(value, int) and not isinstance(value, bool):
        if "ScalarType" in kind:
            return getattr(torch, _SCALAR_TYPES.get(value, "float32"))
        if "Layout" in kind:
            return torch.strided
        if "MemoryFormat" in kind:
            return (torch.contiguous_format, torch.preserve_format, torch.channels_last, torch.channels_last_3d)[min(value, 3)]
    return value


INTEGER_TYPES = ("long int", "int", "short int", "signed char", "unsigned char")  # index dtypes as the profiler names them


def _child_shapes(children, names) -> list[list]:
    """Input shapes of the integer-typed children named ``names`` (profiler dims), in order."""
    out = []
    for c in children or ():
        types, dims = c.args.get("Input type") or [], c.args.get("Input Dims") or []
        if c.name in names and types and types[0] in INTEGER_TYPES and dims and isinstance(dims[0], list):
            out.append(dims[0])
    return out


def _data_dependent(name: str, args: dict, children, torch):
    """(Call, dtype) for the ops whose recorded arguments do not say what they moved, read off their
    children, or None. ``aten::index``: the profiler records a ``Tensor?[]`` argument as nothing;
    on the CPU each index tensor goes through a ``reshape`` (or ``view``) child, whose shape is the
    index's. ``aten::nonzero``: its output's row count depends on the data; its ``as_strided_``
    child resizes the output to (n, ndim)."""
    from roofline.trace.record import compute_dtype, make_call

    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    if not dims or not types or types[0] not in PROFILER_DTYPES:
        return None
    dt = DTYPE_BY_NAME_FN(torch).get(PROFILER_DTYPES[types[0]], torch.float32)
    self_t = torch.empty(dims[0], dtype=dt, device="meta")
    if name == "aten::index" and len(dims) == 2 and types[1] in ("", "GenericList", "TensorList"):
        shapes = _child_shapes(children, ("aten::reshape", "aten::view", "aten::_reshape_alias"))
        if not shapes or len(shapes) > len(dims[0]):
            return None
        fn = torch.ops.aten.index.Tensor
        idx = [torch.zeros(s, dtype=torch.int64, device="meta") for s in shapes]
        try:
            out = fn(self_t, idx)
        except Exception:  # noqa: BLE001 - shapes that do not broadcast: not the call it was
            return None
        call = make_call(fn, [self_t, idx], {}, out)
        return call, compute_dtype(call)
    if name == "aten::nonzero" and len(dims) == 1:
        rows = [c.args["Input Dims"][0] for c in children or () if c.name == "aten::as_strided_"
                and (c.args.get("Input Dims") or [None])[0] and len(c.args["Input Dims"][0]) == 2]
        if not rows or rows[-1][1] != len(dims[0]):
            return None
        fn = torch.ops.aten.nonzero.default
        out = torch.empty(rows[-1], dtype=torch.int64, device="meta")
        call = make_call(fn, [self_t], {}, out)
        return call, compute_dtype(call)
    return None


def DTYPE_BY_NAME_FN(torch):  # noqa: N802 - the record module's table, imported with torch
    from roofline.trace.record import DTYPE_BY_NAME

    return DTYPE_BY_NAME


def rebuild(name: str, args: dict, children=()):
    """(Call, dtype) of a recorded op replayed on meta, or a reason string when it cannot be. The
    ops whose arguments the profiler does not fully record (``aten::index``'s index list,
    ``aten::nonzero``'s data-dependent output) are rebuilt from their ``children`` when those say."""
    import torch

    from roofline.trace.record import compute_dtype, make_call

    ns, _, op = name.partition("::")
    packet = getattr(getattr(torch.ops, ns, None), op, None) if op else None
    if packet is None:
        return "not a torch operator"
    if "Input Dims" not in args:
        return "no shapes recorded (record_shapes=True)"
    if name in ("aten::index", "aten::nonzero"):
        got = _data_dependent(name, args, children, torch)
        if got is not None:
            return got
        if name == "aten::nonzero":
            return "its output size depends on the data and no child op recorded it"
    try:
        values = _recorded_values(args, torch)
    except Exception:  # noqa: BLE001 - a shape or type the profiler would not write (negative, not a list)
        return "could not rebuild the call from the recorded shapes and arguments"
    for overload in packet.overloads():
        fn = getattr(packet, overload)
        schema = fn._schema
        if len(schema.arguments) != len(values):
            continue
        pos, kw = [], {}
        for v, a in zip(values, schema.arguments):
            v = _convert(v, a, torch)
            (kw.__setitem__(a.name, v) if a.kwarg_only else pos.append(v))
        try:
            out = fn(*pos, **kw)
        except Exception:  # noqa: BLE001 - wrong overload or an argument the profiler did not record
            continue
        call = make_call(fn, pos, kw, out)
        return call, compute_dtype(call)
    return "could not rebuild the call from the recorded shapes and arguments"


# ---------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfiledOp:
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
    gemm: tuple = ()  # a matmul's (batch, M, N, K), what a calibrated GEMM rate is read at
    calibrated_s: float | None = None  # with a calibrated profile: its prediction, summed over the calls
    calibrated_low_s: float | None = None
    calibrated_high_s: float | None = None
    op_class: str = ""

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def speed_of_light(self) -> float:
        return self.roofline_s / self.measured_s if self.measured_s > 0 else float("inf")

    @property
    def lost_s(self) -> float:
        return self.measured_s - self.roofline_s

    @property
    def advice(self) -> str:
        return advice(self.bound, self.category, self.speed_of_light, self.gpu)

    def to_dict(self) -> dict:
        return {"name": self.name, "shapes": self.shapes, "dtype": self.dtype, "category": self.category,
                "calls": self.calls, "flops": self.flops, "bytes": self.bytes, "intensity": self.intensity,
                "bound": self.bound, "roofline_s": self.roofline_s, "measured_s": self.measured_s,
                "speed_of_light": self.speed_of_light if self.measured_s > 0 else None,  # no time: no ratio
                "lost_s": self.lost_s, "source": self.source,
                "advice": self.advice, "problem": self.problem, "op_class": self.op_class,
                "calibrated_s": self.calibrated_s, "calibrated_low_s": self.calibrated_low_s,
                "calibrated_high_s": self.calibrated_high_s}


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
    framework_s: float | None = None  # calibrated: one eager call per free op (views), its own line
    device_s: float = 0.0
    costed_device_s: float = 0.0
    unsupported_device_s: float = 0.0
    unattributed: tuple[Unattributed, ...] = ()

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
                "unattributed": [u.to_dict() for u in self.unattributed]}

    def to_json(self) -> str:
        return dump_json(self.to_dict())

    def to_csv(self) -> str:
        from roofline.tables import rows_to_csv

        rows = [op.to_dict() for op in self.ops]
        return rows_to_csv(rows, None if rows else ["name"])

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


def profile_report(path, machine, calibrated=None) -> ProfileReport:
    """Read the Chrome trace at ``path`` and cost each op on ``machine`` (see module docstring).
    With ``calibrated`` (a CalibratedModel, e.g. of the profile given as the machine) every op also
    gets the calibrated prediction and its interval, and the free ops a framework line: one eager
    call (the calibrated launch) each."""
    from roofline.trace import require_torch

    machine = get_machine(machine)
    events = load_trace(path)["traceEvents"]
    require_torch("roofline profile")  # to rebuild the calls on the meta device
    from roofline.trace.record import apply_rule

    roots = op_tree(events)
    devs = device_events(events)
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

    costed, free, missing = select_ops(roots)
    cache: dict = {}
    rows: dict = {}
    unsupported: dict = {}
    costed_device_s = 0.0
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
            # the pointwise ``where``): its callees are costed instead, as for an op without a rule
            c2, f2, m2 = select_ops(n.children)
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
        r = rows.setdefault((n.name, shapes, dtype, cost.flops, cost.bytes), dict(category=rule.category, calls=0, flops=cost.flops, bytes=cost.bytes,
                                                           roofline_s=0.0, measured_s=0.0, source=source,
                                                           gemm=gemm_shape(n.name, n.args.get("Input Dims") or [])))
        r["calls"] += 1
        r["measured_s"] += measured
        if cost.bytes > 0:
            r["roofline_s"] += time_lower_bound(Kernel(n.name, cost.flops, cost.bytes, rule.category,
                                                       peak_dtype(dtype, machine)), machine)
        if source == "device":
            r["source"] = "device"
    for n in missing:
        u = unsupported.setdefault((n.name, "no rule for this op"), [0, 0.0, 0.0])
        u[0] += 1
        u[1] += n.dur * US
        u[2] += take(n)
    if calibrated is not None:  # a forward's weights are cold when what it moves outgrows the cache
        calibrated = calibrated.for_forward(sum(r["bytes"] * r["calls"] for r in rows.values()))
    ops = []
    for (name, shapes, dtype, _, _), r in rows.items():
        compute_s, memory_s, _ = op_times(r["flops"], r["bytes"], machine.peak(peak_dtype(dtype, machine)), machine.bandwidth)
        bound = binds(compute_s, memory_s)
        extra = {}
        if calibrated is not None and r["bytes"] > 0:
            from roofline.measure.residuals import op_class

            k = Kernel(name, r["flops"], r["bytes"], r["category"], peak_dtype(dtype, machine), shape=r["gemm"])
            # an op timed on the CPU by the profiler is predicted as the profiler records it (its own cost per op in)
            p = calibrated.measured_by("profiler" if r["source"] == "cpu" else "wall").predict_op(k, machine)
            extra = dict(calibrated_s=p.time_s * r["calls"], calibrated_low_s=p.low_s * r["calls"],
                         calibrated_high_s=p.high_s * r["calls"], op_class=op_class(k))
        ops.append(ProfiledOp(name, shapes, dtype, r["category"], r["calls"], r["flops"], r["bytes"], bound,
                              r["roofline_s"], r["measured_s"], r["source"],
                              measurement_problem(r["roofline_s"], r["measured_s"], r["bytes"], machine),
                              machine.sm_count is not None, r["gemm"], **extra))
    ops.sort(key=lambda o: -o.lost_s)
    return ProfileReport(str(path), machine.key or machine.name, bool(devs), tuple(ops),
                         tuple(Unsupported(k[0], v[0], v[1], k[1], v[2])
                               for k, v in sorted(unsupported.items(), key=lambda kv: -kv[1][1])),
                         len(free), sum(n.dur for n in free) * US,
                         (calibrated.measured_by("wall" if devs else "profiler").describe()
                          if calibrated is not None else ""),
                         len(free) * calibrated.launch_overhead_s if calibrated is not None else None,
                         sum(d.seconds for d in devs), costed_device_s, sum(v[2] for v in unsupported.values()),
                         unattributed_device_time(devs, claimed))


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
            row += ["" if op.calibrated_s is None else _us(op.calibrated_s),
                    "" if op.calibrated_s is None or not op.measured_s else f"{op.calibrated_s / op.measured_s - 1:+.0%}"]
        rows.append(row + ["no time" if op.measured_s <= 0 else f"{sol:.1%}" if sol < 10 else f"{sol:,.0f}x", _us(op.lost_s),
                           "IMPOSSIBLE" if op.problem else op.advice])
    src = ("device kernels (an op that launched none: its CPU wall time)" if rep.device
           else "CPU wall time of each op (no device kernels in the trace)")
    head = ["op", "input shapes", "calls", "FLOP/B", "bound", "roofline us", "measured us"]
    head += ["calibrated us", "error"] if cal else []
    head += ["% SoL", "lost us", "what to do"]
    right = [False, False, True, True, False, True, True] + ([True, True] if cal else []) + [True, True, False]
    lines = [f"{rep.path} on {rep.machine}: measured = {src}"]
    if cal:
        lines.append(f"calibrated: {rep.calibrated}; error = calibrated / measured - 1")
    lines.append(grid(head, rows, right))
    if limit is not None and len(rep.ops) > limit:
        rest = rep.ops[limit:]
        lines.append(f"... {len(rest)} more rows, {_us(sum(o.lost_s for o in rest))} us lost (--limit 0 shows all)")
    lines.append(f"\ncosted ops: measured {_us(rep.measured_s)} us against a roofline of {_us(rep.roofline_s)} us "
                 f"({rep.roofline_s / rep.measured_s:.1%} of speed of light)" if rep.measured_s else "\nno costed ops")
    lines.append(f"free ops (views, metadata): {rep.free_calls} calls, {_us(rep.free_s)} us")
    if rep.device:
        lines.append(f"device time: {_us(rep.device_s)} us total = {_us(rep.costed_device_s)} costed + "
                     f"{_us(rep.unsupported_device_s)} unsupported + {_us(rep.unattributed_s)} unattributed "
                     "(a plain sum of the device events: overlapping streams count each)")
        for u in rep.unattributed:
            how = f"{u.launches} replays, {u.calls} kernels" if u.kind == GRAPH_REPLAY else f"{u.calls} calls"
            eg = ", ".join(n[:60] + ("..." if len(n) > 60 else "") for n in u.examples)
            lines.append(f"unattributed device time: {u.kind}: {_us(u.seconds)} us in {how}" + (f" (e.g. {eg})" if eg else ""))
    if cal and rep.measured_s:
        measured = rep.measured_s + rep.free_s
        lines.append(f"calibrated: costed ops {_us(rep.calibrated_s - rep.framework_s)} us + framework "
                     f"{_us(rep.framework_s)} us (one eager call per free op) = {_us(rep.calibrated_s)} us against "
                     f"{_us(measured)} us measured ({rep.calibrated_s / measured - 1:+.1%})")
    for op in rep.problems:
        lines.append(f"!! {op.name} {op.shapes}: {op.problem}")
    if rep.unsupported:
        lines.append("unsupported (no FLOPs or bytes counted): " + "; ".join(
            f"{u.name} x{u.calls} ({_us(u.measured_s)} us{f' CPU, {_us(u.device_s)} us device' if rep.device else ''}, "
            f"{u.reason})" for u in rep.unsupported))
    return "\n".join(lines)
