"""Read NVIDIA Nsight Compute (``ncu --csv``) and Nsight Systems (``nsys stats``) CSV exports and
put the measured kernels against their roofline bound on a machine (docs/nsight.md).

Formats read (the header decides which; anything else is refused naming what was expected):

* ``ncu --csv --page details`` (long: one row per metric). Columns used: "ID", "Kernel Name",
  "Metric Name", "Metric Unit", "Metric Value" (ncu also writes "Process ID", "Process Name",
  "Host Name", "Context", "Stream", "Section Name", ...; those are ignored). Metric names are the
  raw names (``gpu__time_duration.sum``) when collected with ``--metrics`` or printed with
  ``--print-metric-name name``; of the default labels only "Duration" is understood.
* ``ncu --csv --page raw`` (wide: one row per kernel launch). The header names the columns ("ID",
  "Kernel Name", ... then one column per metric); the row right after it gives each column's unit
  ("nsecond", "byte", ...); then one row per kernel.
* ``nsys stats --report cuda_gpu_kern_sum --format csv`` (older name ``gpukernsum``): "Time (%)",
  "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)",
  "Name"; older releases wrote "Time(%)", "Average", "Minimum", "Maximum". Times only: nsys counts
  no FLOPs or bytes, so its kernels get shares of time, never a roofline position.

Metrics read from ncu, per kernel launch:

* time: ``gpu__time_duration.sum`` (required);
* DRAM bytes: ``dram__bytes.sum``, else ``dram__bytes_read.sum`` + ``dram__bytes_write.sum``
  (required);
* FLOPs per precision, ncu's own roofline convention: FLOPs = 2 x FMA + ADD + MUL, from
  ``sm__sass_thread_inst_executed_op_{d,f,h}{fma,add,mul}_pred_on.sum`` (``smsp__`` accepted too;
  d = fp64, f = fp32, h = fp16). An FMA is two FLOPs: NVIDIA's roofline section counts
  ``..._ffma_pred_on`` x 2 ("a FMA instruction has two floating point operations", NVIDIA staff
  on forums.developer.nvidia.com/t/about-the-flops-in-ncu-report/215350, citing
  SpeedOfLight_RooflineChart.section) and nvprof's ``flop_count_sp`` ("each multiply-accumulate
  operation contributes 2 to the count") is the same sum. A family is all three counters or none:
  one or two of them is refused by name, never counted as zero;
* tensor-core math: ``sm__ops_path_tensor_src_<src>[_dst_<dst>].sum`` (src bf16, fp16, tf32, fp64,
  fp8, int8; NVIDIA staff point to these "for calculating the FLOPs" at
  forums.developer.nvidia.com/t/number-of-floating-point-operations-in-one-hmma-instruction/275450).
  Each op is counted as one FLOP: NOT CONFIRMED in NVIDIA's documentation (whether an "op" is one
  FLOP or one multiply-add could not be confirmed here). ``_sparsity_on/off`` splits and int1/int4
  sources are not read. Tensor-pipe instruction counts (``sm__inst_executed_pipe_tensor*``) are not
  FLOPs (the ops per instruction vary by instruction and architecture, per the same thread) and are
  never converted.

A kernel without any FLOP metric has ``flops`` None and is "bytes only": its bound is B / BW, its
intensity and FLOP/s are not given. Nothing is ever silently zero, NaN or infinite.

Units: times nsecond/usecond/msecond/second (or ns/us/ms/s); bytes byte/Kbyte/Mbyte/Gbyte/Tbyte,
read as powers of 1000 (ncu's "Kbyte" is 1,000 bytes: seen in its exports, e.g. 65,536 bytes shown
as 65.54 Kbyte; the documentation pages reachable here did not state it, so this is observed, not
confirmed), KB/MB/GB also 1000, KiB/MiB/GiB 1024; counts as given ("inst", "", or K/M/G-prefixed).
Numbers may have thousands separators ("1,234.5"); a comma not followed by three digits ("9,00", a
decimal comma) is refused rather than guessed. Confirmed from NVIDIA's Nsight Systems Analysis Guide
(docs.nvidia.com/nsight-systems/AnalysisGuide): its reports give times in nanoseconds unless
``--timeunit`` says otherwise. The ncu page names (details, raw) and the ``--csv`` option are from the
Nsight Compute CLI guide (docs.nvidia.com/nsight-compute/NsightComputeCli); the exact column lists
above could not be read from NVIDIA's pages here and follow ncu's and nsys's own exports.

The bound of a kernel with F_d FLOPs at precision d and B DRAM bytes on machine m is
``max(max_d F_d / m.peak(d), B / m.bandwidth)`` (pipes of different precisions may overlap, so the
largest, not the sum, is the lower bound); with ``dtype`` given, every FLOP is at that dtype's peak.
FP32/FP64/FP16 SASS instructions run on the CUDA cores, whose peak is below a preset's tensor-core
fp16 peak: a bound from the preset's fp16 peak is still a lower bound, just a loose one.

Reading the exports is in nsight_files.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.cost import binds, overlapped_s
from roofline.diagnose.kernel_diagnosis import AgainstBound, AgainstBoundTotals
from roofline.errors import RooflineError
from roofline.tables import Tabular
from roofline.trace.nsight_files import NcuKernel, NsysKernel, PRECISIONS, quoted_path, read_nsight


def _kernels(n: int) -> str:
    return f"{n:,} kernel{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class MeasuredKernel(AgainstBound):
    """One ncu kernel launch against its bound: ``flops`` (None: bytes only) and ``bytes`` per
    launch, ``roofline_s`` and ``measured_s`` in seconds, ``speed_of_light`` = roofline_s /
    measured_s (the fraction of the roof achieved). Field names follow roofline.trace.profiler's
    ProfiledOp, so the profile's plot draws these rows too."""

    id: str
    name: str
    dtype: str  # the peak that bounds it (its slowest precision), or the --dtype given
    flops: float | None
    bytes: float
    bound: str  # "memory", "compute" or "bytes only"
    roofline_s: float
    measured_s: float
    flops_by_dtype: tuple[tuple[str, float], ...] = ()
    problem: str | None = None
    gpu: bool = True
    calls: int = 1
    shapes: str = ""
    tensor: bool = False  # some FLOPs ran on tensor cores (else CUDA-core instructions only)

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.flops is not None and self.bytes > 0 else None

    @property
    def speed_of_light(self) -> float:
        return self.roofline_s / self.measured_s

    @property
    def achieved_flops_per_s(self) -> float | None:
        return None if self.flops is None else self.flops / self.measured_s

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bytes / self.measured_s

    @property
    def advice(self) -> str:
        from roofline.diagnose.kernel_diagnosis import advice

        if self.bound == "bytes only":
            return "collect FLOP metrics to know the compute side"
        if self.bound == "compute" and self.gpu and not self.tensor and self.speed_of_light < 0.6:
            return "CUDA-core math: fewer instructions, occupancy (tensor cores only if it is a matmul)"
        return advice(self.bound, "other", self.speed_of_light, self.gpu)

    def to_dict(self) -> dict:
        by = dict(self.flops_by_dtype)
        return {"id": self.id, "name": self.name, "dtype": None if self.flops is None else self.dtype,
                "flops": self.flops, "bytes": self.bytes,
                "intensity": self.intensity, "bound": self.bound, "roofline_s": self.roofline_s,
                "measured_s": self.measured_s, "speed_of_light": self.speed_of_light, "lost_s": self.lost_s,
                "beat_bound_s": self.beat_bound_s,
                "achieved_flops_per_s": self.achieved_flops_per_s, "achieved_bytes_per_s": self.achieved_bytes_per_s,
                "advice": self.advice, "problem": self.problem, **{f"flops_{d}": by.get(d) for d in PRECISIONS}}


def measured_kernel(k: NcuKernel, machine, dtype: str | None = None, path="") -> MeasuredKernel:
    """``k`` against its bound on ``machine`` (the module docstring's formula)."""
    from roofline.diagnose.kernel_diagnosis import measurement_problem

    memory_s = k.dram_bytes / machine.bandwidth
    compute_s, peak = 0.0, dtype or machine.default_dtype
    if k.flops is not None:
        if dtype is not None:
            compute_s = k.total_flops / machine.peak(dtype)
        else:
            for d, f in k.flops:
                try:
                    t = f / machine.peak(d)
                except RooflineError as exc:
                    raise RooflineError(f"{quoted_path(path)}: kernel {k.id} {k.name[:60]!r} has {d} FLOPs: {exc} "
                                        "(--dtype puts every FLOP at one peak)", field="dtype") from None
                if t >= compute_s:
                    compute_s, peak = t, d
    roofline_s = overlapped_s(compute_s, memory_s)
    bound = "bytes only" if k.flops is None else binds(compute_s, memory_s)
    return MeasuredKernel(k.id, k.name, peak, k.total_flops, k.dram_bytes, bound, roofline_s, k.duration_s,
                          k.flops or (), measurement_problem(roofline_s, k.duration_s, k.dram_bytes, machine),
                          machine.sm_count is not None, tensor=k.tensor)


@dataclass(frozen=True)
class NcuReport(AgainstBoundTotals, Tabular):
    """Every kernel launch of an ncu export against its bound on ``machine``, ranked by time lost
    (measured_s, roofline_s and problems over the kernels: AgainstBoundTotals)."""

    ROWS_KEY = "kernels"
    CSV_FIELDS = ("id", "name", "dtype", "flops", "bytes", "intensity", "bound", "roofline_s", "measured_s", "speed_of_light",
                  "lost_s", "beat_bound_s", "achieved_flops_per_s", "achieved_bytes_per_s", "advice", "problem",
                  *(f"flops_{d}" for d in PRECISIONS))  # to_csv (Tabular): rows() in these columns

    path: str
    layout: str  # "raw" or "details"
    machine: str
    dtype: str | None
    kernels: tuple[MeasuredKernel, ...]

    @property
    def bytes_only(self) -> tuple[MeasuredKernel, ...]:
        return tuple(k for k in self.kernels if k.flops is None)

    def to_dict(self) -> dict:
        return {"file": self.path, "source": f"ncu --page {self.layout}", "machine": self.machine, "dtype": self.dtype,
                "measured_s": self.measured_s, "roofline_s": self.roofline_s, "bytes_only": len(self.bytes_only),
                "kernels": self.rows()}

    def rows(self) -> list[dict]:
        """A dict per kernel launch (MeasuredKernel.to_dict)."""
        return [k.to_dict() for k in self.kernels]

    def to_table(self, limit: int | None = 20) -> str:
        from roofline.tables import grid
        from roofline.units import format_us_cell as _us
        from roofline.units import format_intensity, format_si

        shown = self.kernels if limit is None else self.kernels[:limit]
        rows = []
        for k in shown:
            sol = k.speed_of_light
            rows.append([k.id, k.name[:40] + ("..." if len(k.name) > 40 else ""), "-" if k.flops is None else k.dtype,
                         "-" if k.flops is None else format_si(k.flops, ""), format_si(k.bytes, "B"),
                         "-" if k.intensity is None else format_intensity(k.intensity), k.bound, _us(k.roofline_s),
                         _us(k.measured_s), f"{sol:.1%}" if sol < 10 else f"{sol:,.0f}x", "-" if k.problem else _us(k.lost_s),
                         "IMPOSSIBLE" if k.problem else k.advice])
        lines = [f"{self.path} (ncu --page {self.layout}) on {self.machine}: measured = gpu__time_duration.sum per launch"
                 + (f"; every FLOP at the {self.dtype} peak" if self.dtype else ""),
                 grid(["id", "kernel", "peak", "FLOPs", "bytes", "FLOP/B", "bound", "roofline us", "measured us",
                       "% of roof", "lost us", "what to do"], rows,
                      [True, False, False, True, True, True, False, True, True, True, True, False])]
        if limit is not None and len(self.kernels) > limit:
            rest = self.kernels[limit:]
            lines.append(f"... {len(rest)} more kernels, {_us(sum(k.lost_s for k in rest))} us lost (--limit 0 shows all)")
        lines.append(f"\n{_kernels(len(self.kernels))}: measured {_us(self.measured_s)} us against a roofline of "
                     f"{_us(self.roofline_s)} us ({self.roofline_s / self.measured_s:.1%} of speed of light)")
        if self.bytes_only:
            lines.append(f"bytes only (no FLOP metrics in the export, bound = DRAM bytes / bandwidth): {len(self.bytes_only)} "
                         f"kernel{'s' if len(self.bytes_only) != 1 else ''}; "
                         "collect sm__sass_thread_inst_executed_op_{f,d,h}{fma,add,mul}_pred_on.sum")
        shown = self.problems if limit is None or limit <= 0 else self.problems[:limit]
        for k in shown:
            lines.append(f"!! kernel {k.id} {k.name[:60]}: {k.problem}")
        if len(shown) < len(self.problems):  # a big export's findings, as its table: the first --limit of them
            lines.append(f"!! ... {len(self.problems) - len(shown)} more kernels with such a finding (--limit 0 shows "
                         "all; --json lists each)")
        return "\n".join(lines)


@dataclass(frozen=True)
class NsysReport(Tabular):
    """An nsys kernel summary: times and shares only (nsys counts no FLOPs or bytes)."""

    ROWS_KEY = "kernels"
    CSV_FIELDS = ("name", "instances", "total_s", "avg_s", "med_s", "min_s", "max_s", "stddev_s", "time_pct", "share")

    path: str
    kernels: tuple[NsysKernel, ...]

    @property
    def total_s(self) -> float:
        return sum(k.total_s for k in self.kernels)

    def share(self, k: NsysKernel) -> float:
        return k.total_s / self.total_s if self.total_s > 0 else 0.0

    @property
    def notes(self) -> tuple[str, ...]:
        """Where the file's own Time (%) column disagrees with the shares of its Total Time column
        (the shares shown): a summary cut to some of its rows, or edited."""
        given = [k for k in self.kernels if k.time_pct is not None]
        if not given:
            return ()
        total = sum(k.time_pct for k in given)
        if len(given) == len(self.kernels) and abs(total - 100.0) > 1.0:
            return (f"the file's Time (%) column sums to {total:,.1f}%, not 100%: it counts GPU time of kernels the file "
                    f"does not list (a summary cut to some rows?); the shares shown are of the {len(self.kernels)} kernels "
                    "listed, from their Total Time",)
        off = [k for k in given if abs(k.time_pct - 100.0 * self.share(k)) > 1.0]
        if off:
            k = max(off, key=lambda k: abs(k.time_pct - 100.0 * self.share(k)))
            return (f"the file's Time (%) disagrees with its Total Time for {len(off)} kernel(s) (e.g. {k.name[:40]!r}: "
                    f"{k.time_pct:.1f}% given, {self.share(k):.1%} of the listed total): the shares shown are from "
                    "Total Time",)
        return ()

    def to_dict(self) -> dict:
        return {"file": self.path, "source": "nsys stats cuda_gpu_kern_sum", "total_s": self.total_s,
                "note": "times only: nsys has no FLOPs or bytes, so no roofline bound (profile with ncu for that)",
                "notes": list(self.notes),
                "kernels": self.rows()}

    def rows(self) -> list[dict]:
        """A dict per kernel (NsysKernel.to_dict) with its share of the listed total."""
        return [{**k.to_dict(), "share": self.share(k)} for k in self.kernels]

    def to_table(self, limit: int | None = 20) -> str:
        from roofline.tables import grid
        from roofline.units import format_us_cell as _us

        def us(x):
            return "-" if x is None else _us(x)

        shown = self.kernels if limit is None else self.kernels[:limit]
        rows = [[k.name[:48] + ("..." if len(k.name) > 48 else ""), f"{k.instances:,}", _us(k.total_s), us(k.avg_s),
                 us(k.med_s), us(k.min_s), us(k.max_s), f"{self.share(k):.1%}"] for k in shown]
        lines = [f"{self.path} (nsys cuda_gpu_kern_sum): {_kernels(len(self.kernels))}, {_us(self.total_s)} us of GPU time",
                 grid(["kernel", "launches", "total us", "avg us", "med us", "min us", "max us", "share"], rows,
                      [False] + [True] * 7)]
        if limit is not None and len(self.kernels) > limit:
            rest = self.kernels[limit:]
            lines.append(f"... {len(rest)} more kernels, {_us(sum(k.total_s for k in rest))} us (--limit 0 shows all)")
        lines.append("times only: nsys counts no FLOPs or bytes, so these kernels have no roofline bound; "
                     "profile them with ncu --csv --page raw for that")
        from roofline.plan.render import note_line

        lines += [note_line(n) for n in self.notes]
        return "\n".join(lines)


def nsight_report(path, machine, dtype: str | None = None):
    """An NcuReport (ncu export, ranked by time lost) or an NsysReport (nsys summary, by time) of
    the file at ``path`` on ``machine``."""
    from roofline.machines import get_machine

    machine = get_machine(machine)
    tool, layout, kernels = read_nsight(path)
    if tool == "nsys":
        return NsysReport(str(path), tuple(kernels))
    rows = sorted((measured_kernel(k, machine, dtype, path) for k in kernels), key=lambda r: -r.lost_s)
    return NcuReport(str(path), layout, machine.key or machine.name, dtype, tuple(rows))
