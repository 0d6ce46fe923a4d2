"""'This kernel is slow': where it sits on the roofline, how far below its bound it runs, and which
fixes are even possible (the roofline chapter, section 4: its procedure and symptom table; docs/tracing.md).

``measurement_problem`` is the one check that a measured time is possible at all: nothing runs
faster than the roofline, so a time below it is a mistake in the units, the FLOP convention or the
peak (a 2:4-sparse datasheet figure), or data that came from cache rather than main memory. Every
place where a measured time meets a bound (diagnose, profile, check) calls it.
"""

from __future__ import annotations

from roofline.tables import Tabular  # noqa: E402

from dataclasses import dataclass

from roofline.cost import roofline_bound, time_lower_bound
from roofline.kernels import Kernel
from roofline.machines import Machine, get_machine
from roofline.tool_parameters import MEASURED
from roofline.units import MEGA, MS, US, indefinite_article


def measurement_problem(roofline_s: float, measured_s: float, bytes_moved: float | None = None,
                        machine: Machine | None = None, bound_name: str = "roofline bound",
                        flops: float | None = None, bound: str | None = None) -> str | None:
    """None when ``measured_s`` >= ``roofline_s``; else why the measurement cannot be right
    (``bound_name``: what the bound is, in the message). With ``bound`` "compute" (the op's FLOPs
    set its bound) a warm cache cannot explain it, and the peak itself can: an op that ran
    ``flops`` / ``measured_s`` above a measured peak (a calibrated profile's best matmul rate)."""
    if measured_s >= roofline_s:
        return None
    if measured_s <= 0:  # no unit, convention or cache makes a kernel take no time: the timer did
        return (f"impossible: measured 0 us is no time at all against the {bound_name} {roofline_s / US:,.3g} us: a "
                "zero duration is the timer's resolution (an op shorter than its tick) or an op timed elsewhere "
                "(its work in a kernel or a callee the trace charged to another op)")
    causes = [
        "units (a time in ms read as us, or a per-iteration time divided twice)",
        "the FLOP convention (1 FMA = 2 FLOPs; causal attention counted in full or in half)",
        "a sparse peak (vendors print 2:4-sparse TFLOP/s, twice the dense figure the roofline needs)",
    ]
    if bound == "compute" and flops and measured_s > 0:
        causes.append(f"the peak: this op ran {flops / measured_s / 1e9:,.3g} GFLOP/s, above the machine's figure (a "
                      "calibrated profile's peak is its best measured matmul rate, which this shape beat)")
    l2 = getattr(machine, "l2_bytes", None)
    if bound != "compute" and bytes_moved is not None and l2 and bytes_moved <= l2:
        causes.append(f"cache: its {bytes_moved / MEGA:,.3g} MB fit in the {l2 / MEGA:,.0f} MB L2, so a repeated "
                      "measurement never touched main memory (flush the cache between runs)")
    return (f"impossible: measured {measured_s / US:,.3g} us is {roofline_s / measured_s:,.2f}x faster than the "
            f"{bound_name} {roofline_s / US:,.3g} us. Check " + "; ".join(causes) + ".")


def check_measured(kernel: Kernel, machine, measured_s: float) -> str | None:
    """measurement_problem for a kernel on a machine."""
    machine = get_machine(machine)
    return measurement_problem(time_lower_bound(kernel, machine), measured_s, kernel.bytes, machine)


# ---------------------------------------------------------------------------------------------
# The roofline chapter, section 4: the symptom table
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Symptom:
    symptom: str
    cause: str
    fix: str


SYMPTOMS = (
    Symptom("Tensor-core utilisation ~0, high HBM traffic", "memory-bound elementwise chain",
            "fuse (torch.compile, custom kernel)"),
    Symptom("Big GEMM at 40 % of peak", "K too small, or M/N not multiples of 64/128",
            "pad shapes; pick better tile sizes"),
    Symptom("Decode step much slower than wP/BW", "kernel launch overhead, Python in the loop",
            "CUDA graphs, fewer/fused kernels"),
    Symptom("Throughput drops at one specific batch size", "wave quantisation (a partial last wave)",
            "choose batch/tile so tiles ~ multiple of SM count"),
    Symptom("Host->device copy dominates", "pageable memory, synchronous copies",
            "pinned buffers, async copies on a side stream"),
    Symptom("Attention dominates at long context", "O(T^2) traffic in naive attention",
            "FlashAttention; then it is O(T^2) compute only"),
    Symptom("Multi-GPU step slow, kernels fine", "collective on the wrong link",
            "keep TP on NVLink; check topology with the vendor tools"),
)

ELEMENTWISE = ("elementwise", "norm", "softmax", "gather", "copy", "reduction", "fill")


@dataclass(frozen=True)
class Finding:
    """One symptom-table row applied: ``applies`` is True, False, or None (cannot tell from one
    kernel and a time)."""

    symptom: Symptom
    applies: bool | None
    why: str

    def to_dict(self) -> dict:
        return {"symptom": self.symptom.symptom, "cause": self.symptom.cause, "fix": self.symptom.fix,
                "applies": self.applies, "why": self.why}


class AgainstBound:
    """A measurement against its roofline bound, for a result type with ``measured_s`` and
    ``roofline_s`` fields (nsight's MeasuredKernel, the profiler's ProfiledOp): the time lost to the
    bound and, where the measurement beat it, by how much (one home for both)."""

    @property
    def lost_s(self) -> float:
        """Time lost to the bound: measured - roofline, never below 0 (a measurement that beats the
        bound lost nothing; by how much it beat it is beat_bound_s)."""
        return max(0.0, self.measured_s - self.roofline_s)

    @property
    def beat_bound_s(self) -> float:
        """How much faster than the roofline bound the measurement ran (0 when it did not): the bound
        is not a bound there (a cache-resident working set, a unit or FLOP-convention slip; ``problem``)."""
        return max(0.0, self.roofline_s - self.measured_s)


class AgainstBoundTotals:
    """A report of AgainstBound rows (nsight's NcuReport, its kernels; the profiler's ProfileReport,
    its ops): their summed measured and roofline seconds and the rows whose measurement has a
    ``problem``. The rows are the field that ROWS_KEY names (Tabular's key of them in to_dict)."""

    ROWS_KEY = "ops"

    @property
    def measured_s(self) -> float:
        return sum(r.measured_s for r in getattr(self, self.ROWS_KEY))

    @property
    def roofline_s(self) -> float:
        return sum(r.roofline_s for r in getattr(self, self.ROWS_KEY))

    @property
    def problems(self) -> tuple:
        return tuple(r for r in getattr(self, self.ROWS_KEY) if r.problem)


@dataclass(frozen=True)
class Diagnosis(Tabular):
    """A kernel, a machine and a measured time, read with the roofline chapter, section 4. Quantities in SI:
    FLOPs, bytes, seconds, FLOP/s, bytes/s; ``speed_of_light`` = roofline_s / measured_s."""

    ROWS_KEY = "findings"

    kernel: str
    machine: str
    dtype: str
    category: str
    flops: float
    bytes: float
    intensity: float
    ridge: float
    bound: str
    roofline_s: float
    measured_s: float
    speed_of_light: float
    gap_s: float  # measured - roofline, never below 0: a measurement that beats the bound lost nothing ...
    beat_bound_s: float  # ... and says here by how much it beat it (the bound is not a bound there: ``problem``)
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    problem: str | None
    steps: tuple[str, ...]
    helps: tuple[str, ...]
    cannot_help: tuple[str, ...]
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "findings"}
        d["steps"], d["helps"], d["cannot_help"] = list(self.steps), list(self.helps), list(self.cannot_help)
        d["findings"] = [f.to_dict() for f in self.findings]
        return d

    def to_table(self) -> str:
        return diagnosis_text(self)


def _us(s: float) -> str:
    return f"{s / US:,.3g} us" if s < 1e-3 else f"{s / MS:,.3g} ms"


def _steps(d: dict, machine: Machine, gemm) -> list[str]:
    """Seed section 4's four steps with this kernel's numbers in them."""
    side = "left" if d["bound"] == "memory" else "right"
    from roofline.units import format_intensity

    steps = [f"1. I = {format_intensity(d['intensity'])} FLOP/B against the ridge {d['ridge']:,.0f}: {side} of it, {d['bound']}-bound."]
    sol, gap = d["speed_of_light"], d["gap_s"]
    if d["problem"]:
        steps.append(f"2. The measured time is below the bound: {d['problem']}")
    elif sol >= 0.8:
        steps.append(f"2. {sol:.0%} of speed of light: at the roof. Only moving the kernel (fewer bytes, more reuse, "
                     "lower precision) makes it faster.")
    else:
        launch = machine.launch_overhead_s
        extra = ""
        if launch and gap <= 3 * launch:
            extra = f" The gap is {gap / launch:.1f} launch overheads ({launch / US:g} us each): launch-bound."
        steps.append(f"2. {sol:.1%} of speed of light, {_us(gap)} lost ({1 / sol:,.1f}x the bound): not reaching the roof; "
                     f"check occupancy, tile/wave quantisation, launch overhead and synchronisation.{extra}")
    if d["bound"] == "memory":
        steps.append("3. Memory-bound: fuse, quantise, tile into SRAM, increase reuse (batch), or change the algorithm "
                     "(FlashAttention).")
    else:
        tc = ""
        if gemm is not None:
            where = ("on tensor cores" if gemm.tensor_cores else
                     f"{', '.join(gemm.misaligned)} not multiples of {gemm.alignment}: off tensor cores" if gemm.misaligned
                     else f"{gemm.dtype}: no tensor-core path")
            tc = (f" Shapes: {where}"
                  + ("" if gemm.skinny or gemm.waves is None else f"; {gemm.tiles:,} tiles in {gemm.waves} waves on {gemm.sm_count} SMs, "
                     f"wave efficiency {gemm.wave_efficiency:.0%}") + ".")
        steps.append("4. Compute-bound: check you are on tensor cores (dtype and shape multiples), check for partial "
                     f"waves, consider lower precision.{tc}")
    return steps


def _fixes(d: dict, machine: Machine) -> tuple[list[str], list[str]]:
    return fixes(d["bound"], d["category"], d["bytes"], machine)


def fixes(bound: str, category: str, bytes_moved: float, machine: Machine) -> tuple[list[str], list[str]]:
    """(what can shorten an op on this side of the ridge, what cannot and why)."""
    d = {"bound": bound, "category": category, "bytes": bytes_moved}
    if d["bound"] == "memory":
        helps = ["fewer bytes: fuse with the neighbouring ops, quantise (fp8/int8/int4 halve or quarter the traffic), "
                 "keep tiles in SRAM", "more reuse per byte: a larger batch moves the kernel right"]
        if d["category"] == "attention":
            helps.append("FlashAttention: the scores never reach memory")
        cannot = [f"fewer FLOPs: left of the ridge the time is bytes / bandwidth "
                  f"({_us(d['bytes'] / machine.bandwidth)}); halving the arithmetic changes nothing"]
    else:
        helps = ["tensor cores: a 16-bit or 8-bit dtype and dimensions in multiples of 8",
                 "full waves: tiles a multiple of the SM count", "lower precision: the fp8 peak is twice bf16's"]
        cannot = ["fewer bytes: right of the ridge the time is FLOPs / peak; fusion and quantised storage do not "
                  "shorten it (lower-precision arithmetic does)"]
    return helps, cannot


def _findings(d: dict, machine: Machine, gemm) -> list[Finding]:
    mem, cat, sol = d["bound"] == "memory", d["category"], d["speed_of_light"]
    launch = machine.launch_overhead_s
    rows = []
    for s in SYMPTOMS:
        if s is SYMPTOMS[0]:
            ok = mem and cat in ELEMENTWISE
            why = f"{cat} op at I = {d['intensity']:.2g}" if ok else ("compute-bound" if not mem else f"a {cat} op, not an elementwise chain")
        elif s is SYMPTOMS[1]:
            ok = cat == "matmul" and not mem and sol < 0.6
            why = f"{sol:.0%} of speed of light" if cat == "matmul" and not mem else "not a compute-bound GEMM"
            if ok and gemm is not None:
                odd = [n for n, v in (("M", gemm.M), ("N", gemm.N)) if v % 64]
                why += f"; {', '.join(odd)} not multiples of 64" if odd else "; M and N are multiples of 64"
        elif s is SYMPTOMS[2]:
            small = d["roofline_s"] < 20e-6 and launch and d["gap_s"] >= 0.5 * launch
            ok = bool(mem and (cat == "decode" or small))
            why = (f"bound {_us(d['roofline_s'])} and {_us(d['gap_s'])} lost, comparable to {indefinite_article(launch / US)} {launch / US:g} us launch"
                   if ok else "the gap is not launch-sized")
        elif s is SYMPTOMS[3]:
            if cat != "matmul" or mem:
                ok, why = False, "not a GEMM" if cat != "matmul" else "memory-bound: waves of compute do not matter"
            elif gemm is None or gemm.skinny or gemm.waves is None:
                ok, why = None, "needs the GEMM shape (matmul M= N= K=) and the machine's SM count"
            else:
                ok = gemm.wave_efficiency < 0.9
                why = f"{gemm.tiles:,} tiles on {gemm.sm_count} SMs: {gemm.waves} waves, {gemm.wave_efficiency:.0%} busy"
        elif s is SYMPTOMS[5]:
            ok = cat == "attention" and mem
            why = "attention left of the ridge: the scores go through memory" if ok else "not memory-bound attention"
        else:
            ok, why = None, "not visible in one kernel: look at the whole profile"
        rows.append(Finding(s, ok, why))
    return rows


def diagnose(kernel: Kernel, machine, measured_s: float, shape: tuple[int, int, int] | None = None) -> Diagnosis:
    """Seed section 4 applied to ``kernel`` measured at ``measured_s`` seconds on ``machine``.
    ``shape`` (M, N, K) of a GEMM adds the tile, wave and tensor-core checks (shapes.py)."""
    machine = get_machine(machine)
    MEASURED.check(measured_s, "measured time")  # `diagnose --measured`'s range
    bound_s = time_lower_bound(kernel, machine)
    ridge = machine.ridge(kernel.dtype)
    d = dict(kernel=kernel.name, machine=machine.name, dtype=kernel.dtype, category=kernel.category,
             flops=kernel.flops, bytes=kernel.bytes, intensity=kernel.intensity, ridge=ridge,
             bound=roofline_bound(kernel, machine), roofline_s=bound_s, measured_s=measured_s,
             speed_of_light=bound_s / measured_s, gap_s=max(0.0, measured_s - bound_s),
             beat_bound_s=max(0.0, bound_s - measured_s),
             achieved_flops_per_s=kernel.flops / measured_s, achieved_bytes_per_s=kernel.bytes / measured_s,
             problem=measurement_problem(bound_s, measured_s, kernel.bytes, machine))
    gemm = None
    if shape is not None:
        from roofline.shapes import gemm_estimate

        gemm = gemm_estimate(*shape, machine=machine, dtype=kernel.dtype)
    helps, cannot = _fixes(d, machine)
    return Diagnosis(**d, steps=tuple(_steps(d, machine, gemm)), helps=tuple(helps), cannot_help=tuple(cannot),
                     findings=tuple(_findings(d, machine, gemm)))


def advice(bound: str, category: str, speed_of_light: float, gpu: bool = True) -> str:
    """One line of what to do, for a row of a profile table (``gpu``: the machine has SMs and
    tensor cores)."""
    if speed_of_light > 1:
        return "impossible: check units, FLOP convention, dense peak"
    if bound == "memory":
        head = "FlashAttention / fuse" if category == "attention" else ("fuse" if category in ELEMENTWISE else "fewer bytes, batch")
        return f"{head} (fewer FLOPs won't help)"
    if speed_of_light >= 0.6:
        return "at the roof: lower precision"
    return "tensor cores, x8 shapes, full waves" if gpu else "larger ops, lower precision (fewer bytes won't help)"


def diagnosis_text(d: Diagnosis) -> str:
    from roofline.tables import grid
    from roofline.units import format_intensity, format_si

    lines = [
        f"{d.kernel} on {d.machine} ({d.dtype}), measured {_us(d.measured_s)}",
        f"  FLOPs {format_si(d.flops, 'FLOP')}, bytes {format_si(d.bytes, 'B')}, intensity {format_intensity(d.intensity)} FLOP/B",
        f"  roofline {_us(d.roofline_s)} ({d.bound}-bound); measured {_us(d.measured_s)}: "
        f"{d.speed_of_light:.1%} of speed of light, "
        + (f"beats the bound by {_us(d.beat_bound_s)}" if d.beat_bound_s > 0 else f"gap {_us(d.gap_s)}"),
        f"  achieved {format_si(d.achieved_flops_per_s, 'FLOP/s')}, {format_si(d.achieved_bytes_per_s, 'B/s')}",
    ]
    if d.problem:
        lines.append(f"\n  ** {d.problem}")
    lines += ["", "Procedure (seed section 4):", *(f"  {s}" for s in d.steps), "", "Fixes that can help:",
              *(f"  + {h}" for h in d.helps), "Fixes that cannot:", *(f"  - {c}" for c in d.cannot_help), "",
              "Symptom table (seed section 4):"]
    mark = {True: "yes", False: "no", None: "?"}
    rows = [[f.symptom.symptom, mark[f.applies], f.symptom.fix if f.applies else "", f.why] for f in d.findings]
    lines.append(grid(["symptom", "here", "fix", "why"], rows, [False] * 4))
    return "\n".join(lines)
