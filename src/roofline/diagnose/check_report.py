"""`roofline check`'s result: predicted against measured, op by op, and what to look at.

Three predictors for each op of a block, all from one machine profile:

- roofline: the pure bound, max(F / peak, B / BW) with the profile's peak and main-memory bandwidth
  (e = 1, no launch);
- seed: the workshop's cost model, e_c 0.70 and e_m 0.85 (the 'Predicting a Kernel's Time' plate), plus the profile's launch overhead (what
  `roofline layer --machine PROFILE --compute-efficiency 0.7 --memory-efficiency 0.85` prints);
- calibrated: roofline.measure.calibrated.CalibratedModel, with its interval (what `roofline layer
  --machine PROFILE` prints: a profile without efficiency flags predicts with its calibration).

Each op's error is predicted / measured - 1. "% of roof" is the hierarchical bound (the bandwidth
of the memory level that holds the op's working set) over the measured time. An op measured below
that bound is impossible and flagged (units, FLOP convention or a sparse peak); an op far from it
gets the diagnosis of the roofline chapter, section 4. Pure numpy: the timings come from roofline.measure.
"""

from __future__ import annotations

from roofline.tables import Tabular  # noqa: E402

from dataclasses import dataclass, field, fields
from typing import Sequence

import numpy as np

from roofline.cost import CostModel, binds, bytes_bind, hierarchical_lower_bound, seed_cost_model, time_lower_bound
from roofline.diagnose.kernel_diagnosis import measurement_problem
from roofline.kernels import Kernel
from roofline.machines import Machine
from roofline.units import MIB, US

# the calibrated model (roofline.measure.calibrated.CalibratedModel) is passed in: diagnose does not import the
# measure wing, not even for a type (measure.timing imports this module)

FAR_FROM_ROOF = 0.5  # below this fraction of its bound an op is "far from its bound"
BELOW_ROOF = 0.95  # measured under this fraction of the bound: faster than the roof (noise aside)
PREDICTORS = ("roofline", "seed", "calibrated")


@dataclass(frozen=True)
class Measured:
    """One op's timing: median and 10th/90th percentiles in seconds."""

    median_s: float
    low_s: float
    high_s: float
    samples: int = 0


@dataclass(frozen=True)
class TimedOp:
    """One op timed on a device: its FLOPs and bytes as the kernel constructors count them and its
    median ``measured_s``. The fields a check's row (CheckOp) and a calibration's probe
    (measure.measurements.Probe) begin with, declared once."""

    name: str
    category: str
    dtype: str
    flops: float
    bytes: float
    measured_s: float


@dataclass(frozen=True)
class CheckOp(TimedOp):
    """One op (or the block's sum): FLOPs, bytes, measured and predicted seconds, the flag and
    the diagnosis. ``shape`` is the op's tensor shapes in words; ``dims`` its matmul M, N, K."""

    measured_low_s: float
    measured_high_s: float
    roofline_s: float
    seed_s: float
    calibrated_s: float
    calibrated_low_s: float
    calibrated_high_s: float
    bound_s: float  # hierarchical roofline
    bound_level: str
    bound: str  # "memory" or "compute" under the hierarchical roof
    residual_source: str = ""
    flag: str = ""  # "", "below roof", "in cache", "far"
    diagnosis: str = ""
    shape: str = ""
    calibrated_basis: str = ""  # which measured points the calibrated prediction came from (CalibratedOpPrediction.basis)
    extrapolated: bool = False  # ... and whether the op lies outside them (its interval widened)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    def error(self, predictor: str) -> float:
        """predicted / measured - 1 (negative: the predictor is optimistic)."""
        return getattr(self, f"{predictor}_s") / self.measured_s - 1.0

    @property
    def roof_fraction(self) -> float:
        """Hierarchical bound / measured: 1 is at the roof ("speed of light")."""
        return self.bound_s / self.measured_s

    @property
    def inside(self) -> bool:
        return self.calibrated_low_s <= self.measured_s <= self.calibrated_high_s

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["intensity"] = self.intensity
        d.update({f"{p}_error": self.error(p) for p in PREDICTORS})
        d["roof_fraction"] = self.roof_fraction
        d["inside_interval"] = self.inside
        return d


@dataclass(frozen=True)
class CheckReport(Tabular):
    """A block checked on a device: ``ops`` in execution order and ``block``, their sum."""

    CSV_FIELDS = ("name", "flops", "bytes", "measured_s", "roofline_s", "seed_s", "calibrated_s", "calibrated_low_s",
                  "calibrated_high_s", "bound_s", "roof_fraction", "flag")  # to_csv (Tabular): rows() in these columns

    device: str
    device_name: str
    machine: str
    profile: str
    model: str
    config: str  # the scaled config in words
    phase: str
    tokens: int
    batch: int
    attention: str
    dtype: str
    threads: int
    date: str
    ops: tuple[CheckOp, ...]
    block: CheckOp
    notes: tuple[str, ...] = ()
    profile_machine: Machine | None = field(default=None, compare=False, repr=False)  # for the plot
    cold: bool = False  # caches flushed before every run: the bound is main memory's
    context: int | None = None  # tokens each new token attends to (the cache plus the new ones); None: tokens
    reference_then_s: float | None = None  # the profile's reference kernel when calibrated and now (measure.drift);
    reference_now_s: float | None = None  # None: a quick calibration, or a profile without one
    machine_moved: bool | None = None  # the two beyond the profile's drift bound

    @property
    def workload_text(self) -> str:
        """'prefill T=512', 'prefill T=512 against S=2,048' or 'decode against S=512 cached tokens'."""
        S = self.context if self.context is not None else self.tokens
        if self.phase == "decode":
            return f"decode against S={S:,} cached tokens"
        return f"{self.phase} T={self.tokens:,}" + (f" against S={S:,}" if S != self.tokens else "")

    def median_abs_error(self, predictor: str) -> float:
        return float(np.median([abs(op.error(predictor)) for op in self.ops]))

    @property
    def coverage(self) -> float:
        """Share of ops whose measured time falls inside the calibrated interval."""
        return float(np.mean([op.inside for op in self.ops]))

    def to_dict(self) -> dict:
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("ops", "block", "notes", "profile_machine")}
        return {
            **head,
            "notes": list(self.notes),
            "median_abs_error": {p: self.median_abs_error(p) for p in PREDICTORS},
            "coverage": self.coverage,
            "ops": [op.to_dict() for op in self.ops],
            "block": self.block.to_dict(),
        }

    def rows(self) -> list[dict]:
        """A dict per op (CheckOp.to_dict), then the block's sum."""
        return [op.to_dict() for op in (*self.ops, self.block)]

    def to_table(self) -> str:
        from roofline.tables import grid
        from roofline.units import format_us_cell as us

        def err(op, p):
            return f"{op.error(p):+.0%}"

        rows = []
        for op in (*self.ops, self.block):
            rows.append([
                op.name, f"{op.intensity:,.1f}", us(op.measured_s),
                us(op.roofline_s), err(op, "roofline"), us(op.seed_s), err(op, "seed"),
                f"{us(op.calibrated_s)} [{us(op.calibrated_low_s)}-{us(op.calibrated_high_s)}]", err(op, "calibrated"),
                f"{op.roof_fraction:.0%}", op.flag,
            ])
        headers = ["op", "FLOP/B", "measured us", "roofline us", "err", "seed us", "err", "calibrated us [range]",
                   "err", "% roof", "flag"]
        lines = [
            f"{self.model} ({self.config}), {self.workload_text}, batch {self.batch}, {self.attention} attention, "
            f"{self.dtype}, on {self.device_name} ({self.device}, {self.threads} thread(s))",
            f"profile: {self.profile}",
            "",
            grid(headers, rows, [False] + [True] * 9 + [False]),
            "",
            "error = predicted / measured - 1; % roof = "
            + ("main-memory roofline bound / measured (cold caches)" if self.cold
               else "hierarchical roofline bound / measured"),
            "median |error| over ops: " + ", ".join(f"{p} {self.median_abs_error(p):.0%}" for p in PREDICTORS),
            f"measured inside the calibrated range: {sum(op.inside for op in self.ops)} of {len(self.ops)} ops; "
            f"block {'inside' if self.block.inside else 'outside'}",
        ]
        flagged = [op for op in self.ops if op.diagnosis]
        if flagged:
            lines += ["", "Flagged (the roofline chapter, section 4):"]
            lines += [f"- {op.name} [{op.flag}]: {op.diagnosis}" for op in flagged]
        if self.notes:
            lines += ["", *[f"note: {n}" for n in self.notes]]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Diagnosis (the roofline chapter, section 4: symptoms and fixes)
# ---------------------------------------------------------------------------------------------


def diagnose_op(kernel: Kernel, machine: Machine, measured_s: float, bound_s: float, level: str,
             launch_s: float = 0.0, dims: Sequence[int] = (), causal_counted: bool = False) -> tuple[str, str]:
    """(flag, diagnosis) for one measured op.

    1. Below the bound: impossible; a units, FLOP-convention or sparse-peak mistake (or a
       calibration whose best was not the machine's best).
    2. Faster than the main-memory roof but not the cache's: the working set fits in cache.
    3. Under FAR_FROM_ROOF of the bound: the symptom table of the roofline chapter, section 4, picked by which
       roof the op sits under (its intensity against the ridge) and its category."""
    roof_fraction = bound_s / measured_s
    plain = time_lower_bound(kernel, machine)
    if measured_s < BELOW_ROOF * bound_s:  # the one impossibility check, shared with profile/diagnose
        return "below roof", (measurement_problem(bound_s, measured_s, kernel.bytes, machine)
                              + " With a measured profile the calibration's best may be low (the machine was "
                              "busy while it ran: calibrate again).")
    if measured_s < plain:
        return "in cache", (f"faster than the main-memory roof ({plain / US:,.1f} us), as it may be: the "
                            f"{kernel.bytes / MIB:,.3g} MiB working set fits in {level} (hierarchical roofline)")
    if roof_fraction >= FAR_FROM_ROOF:
        return "", ""
    memory_bound = bytes_bind(kernel.flops / machine.peak(kernel.dtype), bound_s)  # bound_s is the larger term
    head = f"{roof_fraction:.0%} of its {'memory' if memory_bound else 'compute'} roof ({level})"
    gpu = machine.sm_count is not None
    if launch_s and launch_s > measured_s:
        return "far", (f"{head}; the profile's {launch_s / US:.1f} us per-call floor is more than this op took "
                       f"({measured_s / US:.1f} us): the floor was timed apart from this block (calibrate again on an idle "
                       "machine); either way the op is dispatch, not work. Fix: fewer, fused ops")
    if launch_s and launch_s >= 0.5 * measured_s:
        return "far", (f"{head}; the {launch_s / US:.1f} us launch/dispatch is {launch_s / measured_s:.0%} of it: "
                       "launch overhead, Python in the loop. Fix: "
                       + ("CUDA graphs, fewer/fused kernels" if gpu else "fewer, larger or fused ops (torch.compile)"))
    if "flash" in kernel.name:
        return "far", (f"{head}: fused attention well below its roof. Check which attention backend ran (a math "
                       "fallback materialises the scores), the head dim and dtype it supports, and causal masking")
    if kernel.category == "attention" or kernel.name in ("softmax", "QK^T", "PV"):
        extra = (" The dense op computes all T x S scores where the causal count is half: a causal kernel "
                 "halves it.") if causal_counted else ""
        return "far", f"{head}: O(T^2) traffic of naive attention. Fix: FlashAttention (fused, scores stay on chip).{extra}"
    if kernel.category in ("elementwise", "norm", "softmax", "gather"):
        # a vector op: its few FLOPs never reach a matmul peak, so whichever roof binds, the fix is fewer passes
        return "far", ((f"{head}: memory-bound elementwise chain (eager runs it as several passes). " if memory_bound
                        else f"{head} (a matmul peak no vector op reaches): an eager vector op, several passes and its "
                             "dispatch. ")
                       + "Fix: fuse (torch.compile, a custom kernel)")
    if kernel.category == "matmul" and not memory_bound:
        odd = [d for d in dims if d % 64]
        shapes = (f" M/N/K {', '.join(str(d) for d in odd)} not multiples of 64." if odd
                  else " Shapes are multiples of 64: check K is not too small, and partial waves.")
        return "far", (f"{head}: a GEMM well below peak.{shapes} Fix: pad shapes, pick better tiles; "
                       "check tensor cores (dtype) and consider lower precision")
    if kernel.category == "matmul":
        return "far", f"{head}: memory-bound matmul (few rows). Fix: more rows per call (batch), quantised weights"
    return "far", (f"{head}: check occupancy, tile/wave quantisation, launch overhead and synchronisation" if gpu
                   else f"{head}: check threads, vectorisation at this dtype, and per-call overhead")


# ---------------------------------------------------------------------------------------------
# Building a report
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpRun:
    """One op as run: its kernel (the count), the measurement, and its shape for the diagnosis."""

    kernel: Kernel
    measured: Measured
    shape: str = ""
    dims: tuple[int, ...] = ()
    causal_counted: bool = False


def build_report(runs: Sequence[OpRun], machine: Machine, calibrated, **meta) -> CheckReport:
    """Predict every op three ways on ``machine`` and put the measurements beside them. The bound
    is the hierarchical roofline's, or main memory's when ``calibrated.cold`` (caches flushed)."""
    kernels = [r.kernel for r in runs]
    roof = CostModel().predict(kernels, machine)
    seed = seed_cost_model(launch_overhead_s=machine.launch_overhead_s).predict(kernels, machine)
    cal = calibrated.predict(kernels, machine)
    ops = []
    for run, r, s, c in zip(runs, roof.ops, seed.ops, cal.ops):
        k, m = run.kernel, run.measured
        if calibrated.cold:
            bound_s, level = time_lower_bound(k, machine), "main memory"
        else:
            bound_s, level = hierarchical_lower_bound(k, machine)
        flag, why = diagnose_op(k, machine, m.median_s, bound_s, level, calibrated.launch_overhead_s, run.dims,
                             run.causal_counted)
        ops.append(CheckOp(
            name=k.name, category=k.category, dtype=k.dtype, flops=k.flops, bytes=k.bytes,
            measured_s=m.median_s, measured_low_s=m.low_s, measured_high_s=m.high_s,
            roofline_s=r.time_s, seed_s=s.time_s, calibrated_s=c.time_s, calibrated_low_s=c.low_s,
            calibrated_high_s=c.high_s, bound_s=bound_s, bound_level=level,
            bound=binds(k.flops / machine.peak(k.dtype), bound_s),
            residual_source=c.residual_source, flag=flag, diagnosis=why, shape=run.shape,
            calibrated_basis=getattr(c, "basis", ""), extrapolated=bool(getattr(c, "extrapolated", False)),
        ))
    return CheckReport(ops=tuple(ops), block=block_sum(ops), machine=machine.name, profile_machine=machine,
                       cold=calibrated.cold, **meta)


def block_sum(ops: Sequence[CheckOp]) -> CheckOp:
    """The block as one row: FLOPs, bytes and every time summed."""
    total = lambda f: float(sum(getattr(o, f) for o in ops))  # noqa: E731
    return CheckOp(
        name="block", category="block", dtype=ops[0].dtype if ops else "", flops=total("flops"), bytes=total("bytes"),
        measured_s=total("measured_s"), measured_low_s=total("measured_low_s"), measured_high_s=total("measured_high_s"),
        roofline_s=total("roofline_s"), seed_s=total("seed_s"), calibrated_s=total("calibrated_s"),
        calibrated_low_s=total("calibrated_low_s"), calibrated_high_s=total("calibrated_high_s"),
        bound_s=total("bound_s"), bound_level="", bound="",
    )
