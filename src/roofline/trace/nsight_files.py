"""Reading Nsight Compute (``ncu --csv``, the raw or details page) and Nsight Systems (``nsys stats``
cuda_gpu_kern_sum) exports: units, values, one kernel per row (docs/nsight.md; the units and
sources are in nsight.py's docstring).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from roofline.errors import MAX_BYTES, MAX_FLOPS, RooflineError
from roofline.trace.nsight_units import MISSING_TEXT, parse_value, unit_scale  # noqa: F401 (re-exported)
from roofline.units import MS, NS, US


FIELD = "nsight"

# -- metric names ------------------------------------------------------------------------------

TIME_METRIC = "gpu__time_duration.sum"
TIME_LABEL = "Duration"  # the details page's label for gpu__time_duration.sum
BYTES_METRIC = "dram__bytes.sum"
BYTES_READ, BYTES_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
SASS_PRECISIONS = (("d", "fp64"), ("f", "fp32"), ("h", "fp16"))
SASS_OPS = ("fma", "add", "mul")
TENSOR_METRIC = re.compile(r"^sm__ops_path_tensor_src_([a-z0-9]+?)(?:_dst_([a-z0-9]+))?\.sum$")
TENSOR_DTYPES = {"bf16": "bf16", "fp16": "fp16", "tf32": "tf32", "fp64": "fp64", "fp8": "fp8", "int8": "int8"}
TENSOR_PIPE_PREFIXES = ("sm__inst_executed_pipe_tensor", "smsp__inst_executed_pipe_tensor")
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")  # column order of the CSV
SUGGESTED_METRICS = ("gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
                     "sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,"
                     "sm__sass_thread_inst_executed_op_fmul_pred_on.sum")


def sass_metric(unit: str, prec: str, op: str) -> str:
    return f"{unit}__sass_thread_inst_executed_op_{prec}{op}_pred_on.sum"


# -- the measured kernels (the units and numbers are in nsight_units.py) -------------------------


@dataclass(frozen=True)
class NcuKernel:
    """One kernel launch from ncu: ``duration_s`` (gpu__time_duration.sum), ``dram_bytes`` and
    ``flops`` as (precision, FLOPs) pairs, or None when the export has no FLOP metric for it."""

    id: str
    name: str
    duration_s: float
    dram_bytes: float
    flops: tuple[tuple[str, float], ...] | None
    tensor: bool = False  # some of its FLOPs are tensor-core instructions (sm__inst_executed_pipe_tensor...)

    @property
    def total_flops(self) -> float | None:
        return None if self.flops is None else sum(f for _, f in self.flops)

    @property
    def bytes_only(self) -> bool:
        return self.flops is None


@dataclass(frozen=True)
class NsysKernel:
    """One row of an nsys kernel summary: every launch of one kernel name. Times in seconds;
    ``None`` where the export has no such column."""

    name: str
    instances: int
    total_s: float
    avg_s: float | None = None
    med_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    stddev_s: float | None = None
    time_pct: float | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "instances": self.instances, "total_s": self.total_s, "avg_s": self.avg_s,
                "med_s": self.med_s, "min_s": self.min_s, "max_s": self.max_s, "stddev_s": self.stddev_s,
                "time_pct": self.time_pct}


# -- reading -----------------------------------------------------------------------------------


def quoted_path(path) -> str:
    """The file as its messages name it: its path, quoted."""
    return repr(str(path))


def _lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the text, without ncu's own '==PROF==' / '==WARNING==' lines."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("=="):
            continue
        out.append((i, line))
    return out


def _cells(path, lineno: int, line: str) -> list[str]:
    try:
        rows = list(csv.reader([line]))
    except csv.Error as exc:
        raise RooflineError(f"{quoted_path(path)} line {lineno}: not CSV ({exc})", field=FIELD) from None
    return [c.strip() for c in rows[0]] if rows else []


def _kind(cells: list[str]) -> str | None:
    names = set(cells)
    if {"ID", "Kernel Name", "Metric Name", "Metric Value"} <= names:
        return "details"
    if {"ID", "Kernel Name"} <= names and any("__" in c for c in cells):
        return "raw"
    if "Name" in names and "Instances" in names and any(_TOTAL.fullmatch(c) for c in cells):
        return "nsys"
    return None


EXPECTED = ('an ncu CSV export (ncu --csv --page raw: a header with "ID","Kernel Name" and metric columns, '
            'then a units row; or --page details: "ID","Kernel Name",...,"Metric Name","Metric Unit","Metric Value") '
            'or an nsys kernel summary (nsys stats --report cuda_gpu_kern_sum --format csv: "Time (%)",'
            '"Total Time (ns)","Instances",...,"Name")')


def _header(path, text: str):
    """(kind, header cells, header line number, data lines) of an export, or a RooflineError."""
    lines = _lines(text)
    for k, (lineno, line) in enumerate(lines):
        if not line.strip():
            continue
        cells = _cells(path, lineno, line)
        kind = _kind(cells)
        if kind is not None:
            return kind, cells, lineno, lines[k + 1:]
    what = "is empty; expected" if not text.strip() else "has no header of"
    raise RooflineError(f"{quoted_path(path)} {what} {EXPECTED}", field=FIELD)


def _read(path, what: str) -> str:
    from roofline.files import read_text

    return read_text(path, what, FIELD)


def read_nsight(path):
    """('ncu', layout, kernels) or ('nsys', 'cuda_gpu_kern_sum', kernels) for the export at ``path``."""
    text = _read(path, "Nsight CSV export")
    kind, header, lineno, rest = _header(path, text)
    if kind == "nsys":
        return "nsys", "cuda_gpu_kern_sum", _nsys_rows(path, header, rest)
    return "ncu", kind, (_details_rows if kind == "details" else _raw_rows)(path, header, rest)


def load_ncu_csv(path) -> list[NcuKernel]:
    """The kernel launches of an ``ncu --csv`` export (``--page raw`` or ``--page details``), in
    file order; a RooflineError naming the file (and line) for anything malformed."""
    text = _read(path, "ncu CSV")
    kind, header, _, rest = _header(path, text)
    if kind == "nsys":
        raise RooflineError(f"{quoted_path(path)} is an nsys kernel summary, not an ncu CSV export "
                            "(load_nsys_kernel_summary reads it)", field=FIELD)
    return (_details_rows if kind == "details" else _raw_rows)(path, header, rest)


def load_nsys_kernel_summary(path) -> list[NsysKernel]:
    """The rows of ``nsys stats --report cuda_gpu_kern_sum --format csv`` (or ``gpukernsum``), by
    total time, longest first."""
    text = _read(path, "nsys CSV")
    kind, header, _, rest = _header(path, text)
    if kind != "nsys":
        raise RooflineError(f"{quoted_path(path)} is an ncu CSV export, not an nsys kernel summary "
                            "(load_ncu_csv reads it)", field=FIELD)
    return _nsys_rows(path, header, rest)


def _data_rows(path, header: list[str], rest):
    """(line number, cells) of each non-blank row after the header, each as wide as the header."""
    for lineno, line in rest:
        if not line.strip():
            continue
        cells = _cells(path, lineno, line)
        if len(cells) != len(header):
            raise RooflineError(f"{quoted_path(path)} line {lineno}: {len(cells)} columns where the header has "
                                f"{len(header)} (a line of program output mixed in? write ncu's CSV with --log-file)",
                                field=FIELD)
        yield lineno, cells


def _details_rows(path, header, rest) -> list[NcuKernel]:
    col = {name: header.index(name) for name in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")}
    kernels: dict[str, dict] = {}
    for lineno, cells in _data_rows(path, header, rest):
        kid = cells[col["ID"]]
        k = kernels.setdefault(kid, {"name": cells[col["Kernel Name"]], "metrics": {}, "line": lineno})
        metric = cells[col["Metric Name"]]
        k["metrics"].setdefault(metric, (cells[col["Metric Unit"]], cells[col["Metric Value"]], lineno))
    if not kernels:
        raise RooflineError(f"{quoted_path(path)} has an ncu details header but no metric rows", field=FIELD)
    return [_kernel(path, kid, k["name"], k["metrics"]) for kid, k in kernels.items()]


def _raw_rows(path, header, rest) -> list[NcuKernel]:
    rows = list(_data_rows(path, header, rest))
    id_col, name_col = header.index("ID"), header.index("Kernel Name")
    if not rows:
        raise RooflineError(f"{quoted_path(path)} has an ncu raw header but no units row and no kernels", field=FIELD)
    unit_line, units = rows[0]
    if units[id_col] != "" or units[name_col] != "":
        raise RooflineError(f"{quoted_path(path)} line {unit_line}: expected the units row right after the header "
                            "(ncu --page raw --csv writes one: empty ID and Kernel Name, each metric's unit); "
                            f"found ID {units[id_col][:20]!r}", field=FIELD)
    if len(rows) == 1:
        raise RooflineError(f"{quoted_path(path)} has an ncu raw header and units row but no kernels", field=FIELD)
    out = []
    for lineno, cells in rows[1:]:
        # an empty cell is a metric this launch does not have (another launch in the file does)
        metrics = {h: (units[i], cells[i], lineno) for i, h in enumerate(header)
                   if "__" in h and cells[i].strip().lower() not in MISSING_TEXT}
        out.append(_kernel(path, cells[id_col], cells[name_col], metrics))
    return out


def _checked(text: str, at: str, what: str, scale: float, limit: float, required: bool, shown: str = "") -> float | None:
    """One cell as a number times ``scale``, in 0..``limit``: None when empty and not ``required``,
    else a RooflineError naming ``at`` and ``what``."""
    try:
        v = parse_value(text)
    except ValueError:
        raise RooflineError(f"{at}: {what} = {text[:30]!r} is not a number", field=FIELD) from None
    if v is None:
        if required:
            raise RooflineError(f"{at}: {what} has no value ({text!r})", field=FIELD)
        return None
    if v < 0 or v * scale > limit:
        raise RooflineError(f"{at}: {what} = {text[:30]!r}{shown} is out of range (0 to {limit / scale:g}{shown})",
                            field=FIELD)
    return v * scale


def _value(path, kid, name, metrics, metric, kind, required=True) -> float | None:
    """``metric`` of a kernel in SI units (seconds, bytes, counts); None when absent and not
    ``required``; a RooflineError naming file, line, kernel and metric otherwise."""
    who = f"kernel {kid} {name[:60]!r}"
    if metric not in metrics:
        if required:
            raise RooflineError(f"{quoted_path(path)}: {who} has no {metric} (collect it: ncu --metrics {SUGGESTED_METRICS} "
                                "--csv --page raw)", field=FIELD)
        return None
    unit, text, lineno = metrics[metric]
    at = f"{quoted_path(path)} line {lineno}: {who}"
    scale = unit_scale(unit, kind)
    if scale is None:
        raise RooflineError(f"{at}: {metric} has unit {unit[:20]!r}, not a {kind} unit this reader knows", field=FIELD)
    limit = {"time": 1e5, "bytes": MAX_BYTES}.get(kind, MAX_FLOPS)
    return _checked(text, at, metric, scale, limit, required, f" {unit[:20]}")


def _kernel(path, kid: str, name: str, metrics: dict) -> NcuKernel:
    """One NcuKernel from its metrics (name -> (unit, text, line)), as the module docstring says."""
    if TIME_METRIC in metrics or TIME_LABEL not in metrics:
        duration = _value(path, kid, name, metrics, TIME_METRIC, "time")
    else:
        duration = _value(path, kid, name, metrics, TIME_LABEL, "time")
    if duration <= 0:
        raise RooflineError(f"{quoted_path(path)}: kernel {kid} {name[:60]!r} has a zero duration", field=FIELD)
    if BYTES_METRIC in metrics:
        dram = _value(path, kid, name, metrics, BYTES_METRIC, "bytes")
    elif BYTES_READ in metrics or BYTES_WRITE in metrics:
        dram = (_value(path, kid, name, metrics, BYTES_READ, "bytes")
                + _value(path, kid, name, metrics, BYTES_WRITE, "bytes"))
    else:
        _value(path, kid, name, metrics, BYTES_METRIC, "bytes")  # raises: names what to collect
    flops: dict[str, float] = {}
    for prec, dtype in SASS_PRECISIONS:
        unit = next((u for u in ("sm", "smsp") if any(sass_metric(u, prec, op) in metrics for op in SASS_OPS)), None)
        if unit is None:
            continue
        counts = {}
        for op in SASS_OPS:
            m = sass_metric(unit, prec, op)
            if m not in metrics:
                have = ", ".join(sass_metric(unit, prec, o) for o in SASS_OPS if sass_metric(unit, prec, o) in metrics)
                raise RooflineError(f"{quoted_path(path)}: kernel {kid} {name[:60]!r} has {have} but not {m}: collect all "
                                    f"three of {dtype}'s fma, add and mul counters", field=FIELD)
            counts[op] = _value(path, kid, name, metrics, m, "count")
        flops[dtype] = flops.get(dtype, 0.0) + 2 * counts["fma"] + counts["add"] + counts["mul"]
    tensor = False
    for metric in metrics:
        hit = TENSOR_METRIC.match(metric)
        if hit and "sparsity" not in metric and hit.group(1) in TENSOR_DTYPES:
            dtype = TENSOR_DTYPES[hit.group(1)]
            count = _value(path, kid, name, metrics, metric, "count")
            flops[dtype] = flops.get(dtype, 0.0) + count
            tensor = tensor or count > 0
    if any(f > MAX_FLOPS for f in flops.values()):
        raise RooflineError(f"{quoted_path(path)}: kernel {kid} {name[:60]!r} has more than {MAX_FLOPS:g} FLOPs", field=FIELD)
    ordered = tuple((d, flops[d]) for d in PRECISIONS if d in flops)
    return NcuKernel(kid, name, duration, dram, ordered or None, tensor)


_TOTAL = re.compile(r"Total Time(?: \((ns|us|ms|s)\))?")
_NSYS_COLUMNS = {  # field -> header spellings (nsys 2022+ first, then older releases)
    "avg_s": ("Avg", "Average"), "med_s": ("Med", "Median"), "min_s": ("Min", "Minimum"), "max_s": ("Max", "Maximum"),
    "stddev_s": ("StdDev",),
}
_NSYS_UNIT = {"ns": NS, "us": US, "ms": MS, "s": 1.0}


def _consistent(at: str, instances: int, total_s: float, times: dict) -> None:
    """Refuse a row whose statistics cannot all be true: min <= med, avg <= max, and the average
    times the launches equal to the total (to the export's rounding: half a unit of the column, 1 ns,
    per launch, and 1%)."""
    lo, hi = times.get("min_s"), times.get("max_s")
    if lo is not None and hi is not None and lo > hi * (1 + 1e-6) + 1e-9:
        raise RooflineError(f"{at}: Min {lo / US:,.3f} us is above Max {hi / US:,.3f} us", field=FIELD)
    for field, label in (("avg_s", "Avg"), ("med_s", "Med")):
        v = times.get(field)
        if v is None:
            continue
        if lo is not None and v < lo * (1 - 1e-6) - 1e-9:
            raise RooflineError(f"{at}: {label} {v / US:,.3f} us is below Min {lo / US:,.3f} us: not one kernel's "
                                "statistics", field=FIELD)
        if hi is not None and v > hi * (1 + 1e-6) + 1e-9:
            raise RooflineError(f"{at}: {label} {v / US:,.3f} us is above Max {hi / US:,.3f} us: not one kernel's "
                                "statistics", field=FIELD)
    avg = times.get("avg_s")
    if avg is not None and abs(avg * instances - total_s) > 0.01 * total_s + 1e-9 * instances:
        raise RooflineError(f"{at}: Avg {avg / US:,.3f} us x {instances:,} launches = {avg * instances / US:,.3f} us, "
                            f"but Total Time is {total_s / US:,.3f} us: not one kernel's statistics", field=FIELD)


def _nsys_rows(path, header, rest) -> list[NsysKernel]:
    cols = {}
    for i, h in enumerate(header):
        m = re.fullmatch(r"(.+?)(?: \((ns|us|ms|s|%)\))?", h)
        base, unit = (m.group(1), m.group(2)) if m else (h, None)
        cols[base.replace(" ", "")] = (i, unit)
    name_col, inst_col = header.index("Name"), header.index("Instances")
    total_col, total_unit = cols["TotalTime"]
    pct_col = cols.get("Time(%)", cols.get("Time", (None, None)))[0]
    out = []
    for lineno, cells in _data_rows(path, header, rest):
        at = f"{quoted_path(path)} line {lineno}"

        def num(i, what, scale=1.0, required=True):
            return _checked(cells[i], at, what, scale, 1e7, required)

        inst = num(inst_col, "Instances")
        if inst < 1 or inst != int(inst) or inst > 1e12:
            raise RooflineError(f"{at}: Instances = {cells[inst_col][:30]!r} is not a whole number of launches", field=FIELD)
        times = {}
        for field, spellings in _NSYS_COLUMNS.items():
            hit = next((cols[s] for s in spellings if s in cols), None)
            # a column without a unit is in the Total Time's (older nsys wrote "Average" beside "Total Time (us)")
            times[field] = None if hit is None else num(hit[0], header[hit[0]], _NSYS_UNIT[hit[1] or total_unit or "ns"], False)
        pct = None if pct_col is None else _checked(cells[pct_col], at, header[pct_col], 1.0, 100.0, False)
        _consistent(at, int(inst), num(total_col, header[total_col], _NSYS_UNIT[total_unit or "ns"]), times)
        out.append(NsysKernel(cells[name_col], int(inst), num(total_col, header[total_col], _NSYS_UNIT[total_unit or "ns"]),
                              time_pct=pct, **times))
    if not out:
        raise RooflineError(f"{quoted_path(path)} has an nsys kernel summary header but no kernels", field=FIELD)
    out.sort(key=lambda k: -k.total_s)
    return out


# -- against the roofline ----------------------------------------------------------------------
