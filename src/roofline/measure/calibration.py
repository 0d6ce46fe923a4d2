"""`roofline calibrate`: micro-benchmarks of the local device into a machine profile.

Four sweeps share one time budget (shares in ``PHASES``):

1. launch: one tiny op (a 1-element in-place add) back to back: the per-op dispatch/launch cost;
2. bandwidth: copy (one read, one write) and add (two reads, one write) over working sets from
   32 KiB doubling to at least 4x the last cache: one bandwidth per cache level, the hierarchical
   roofline of the roofline chapter, section 2.4. The largest working set is timed first, so that even a
   short budget measures main memory;
3. matmul: square n x n x n matmuls per dtype from small to large: the achievable FLOP/s as a
   function of size. The sweep stops where the next size would not fit the budget. Then the
   skinny-M GEMM family (measure.families): M = 1 to 256 rows at a few N = K, decode's shapes,
   with the weight cached (the same weight every call) and streamed (a different weight each call,
   from a pool of twice the last cache: a forward's weights read from main memory); on a CPU a
   few of them again from pools of several sizes up to the last cache (gemm_probes: how much of a
   forward's weights the last cache keeps, measurements.cached_share);
4. probes: the ops of one transformer block (a preset scaled down, see blockops.scale_config) at a
   few sizes, timed in interleaved passes: the fit set of the calibrated model's per-op residuals;
   then the class probes (measure.families: elementwise, norm, softmax, reduction, gather, copy
   ops by working set, fused attention in decode and prefill shapes; on a CPU also as
   torch.profiler records them), the fit set of its per-class residuals; the same class ops again
   with the caches flushed before each call (their operands from main memory, as a forward's
   small ops find them after a GEMM);
5. on a CPU, with the class probes, the framework probe (measure.framework): the eager framework's
   time per gap between top-level ops, on decode steps of two tiny models costed with what was just
   measured.

The profile (roofline.measure.machine_file) is written only after everything is measured, atomically.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from dataclasses import dataclass
from typing import Callable

import torch

from roofline.errors import RooflineError, check_number
from roofline.measure.blockops import block_ops, scale_config
from roofline.measure.families import CPU_GEMM_M, CPU_GEMM_NK, CPU_POOL_M, CPU_POOL_NK, CPU_ROWS, CUDA_GEMM_M, CUDA_GEMM_NK, CUDA_ROWS
from roofline.measure.device import available_memory_bytes, check_threads, default_dtype, device_info, require_device, synchronizer, torch_dtype
from roofline.measure.drift import REFERENCE_N, DriftGuard, kernel_name
from roofline.measure.reference import reference_timer as drift_timer
from roofline.measure.gemm_probes import gemm_family, weight_stream  # noqa: F401 (weight_stream: its old home)
from roofline.measure.timing import bench, bench_round_robin
from roofline.measure.measurements import Calibration, Curve, Probe
from roofline.op_counts import matmul_counts
from roofline.units import DTYPE_BYTES, GIGA, KIB, MIB, US

PHASES = (("launch", 0.05), ("bandwidth", 0.30), ("matmul", 0.35), ("probes", 0.30))
MIN_RUNS = 5  # first call + warm-up + 3 repeats: what a point costs at the least

Progress = Callable[[float, str], object]


@dataclass(frozen=True)
class CalibrationPlan:
    """What to measure. ``probe_sizes`` are (d_model, tokens) of the scaled ``probe_model``."""

    matmul_dtypes: tuple[str, ...]
    matmul_sizes: tuple[int, ...]
    working_sets: tuple[int, ...]
    probe_model: str = "llama3-8b"
    probe_sizes: tuple[tuple[int, int], ...] = ()
    probe_dtype: str = "fp32"
    gemm_m: tuple[int, ...] = ()  # the skinny-M GEMM family: these M at each N = K of gemm_nk
    gemm_nk: tuple[int, ...] = ()
    gemm_pool_m: tuple[int, ...] = ()  # a CPU's GEMMs streamed from pools of several sizes (gemm_probes): these M
    gemm_pool_nk: tuple[int, ...] = ()  # at these N = K (points of the family)
    family_rows: tuple[int, ...] = ()  # class probes at these row counts (none: no class probes)


def working_sets(caches, available_bytes: float, start: float = 32 * KIB, factor: float = 4.0) -> tuple[int, ...]:
    """32 KiB doubling to at least ``factor`` x the last cache (never beyond a quarter of the free
    memory)."""
    last = caches[-1][1] if caches else 64 * 2.0**20
    stop = min(max(factor * last, 256 * 2.0**20), available_bytes / 4)
    out, ws = [], start
    while ws < stop * 1.0001:
        out.append(int(ws))
        ws *= 2
    if out[-1] < stop:
        out.append(int(2 ** math.ceil(math.log2(stop))))
    return tuple(out)


def default_plan(device: str, dtype: str, caches, available_bytes: float) -> CalibrationPlan:
    if device == "cuda":
        return CalibrationPlan(
            matmul_dtypes=tuple(dict.fromkeys((dtype, "bf16", "fp16", "fp32"))),
            matmul_sizes=(128, 256, 512, 1024, 2048, 4096, 8192, 16384),
            working_sets=working_sets(caches, available_bytes, factor=16.0),
            probe_sizes=((2048, 2048), (4096, 1024), (4096, 8192), (8192, 2048)),
            probe_dtype=dtype,
            gemm_m=CUDA_GEMM_M, gemm_nk=CUDA_GEMM_NK, family_rows=CUDA_ROWS,
        )
    return CalibrationPlan(
        matmul_dtypes=tuple(dict.fromkeys((dtype, "fp32", "bf16"))),
        matmul_sizes=(32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048),
        working_sets=working_sets(caches, available_bytes),
        probe_sizes=((512, 256), (768, 768), (1536, 384), (2048, 1024)),
        probe_dtype=dtype,
        gemm_m=CPU_GEMM_M, gemm_nk=CPU_GEMM_NK, family_rows=CPU_ROWS,
        gemm_pool_m=CPU_POOL_M, gemm_pool_nk=CPU_POOL_NK,
    )


class _Clock:
    """The budget of one phase and the progress callback."""

    def __init__(self, budget_s: float, progress: Progress | None):
        import time

        self.now = time.perf_counter
        self.start = self.now()
        self.budget_s = budget_s
        self.progress = progress
        self.done = 0.0

    def phase(self, share: float):
        """Start a phase (again, when a drifted group is measured again: its progress starts over)."""
        self.phase_start, self.phase_share, self.phase_done = self.now(), share, self.done
        self.phase_budget = self.budget_s * share

    def left(self) -> float:
        return self.phase_budget - (self.now() - self.phase_start)

    def report(self, fraction_of_phase: float, label: str):
        if self.progress is not None:
            self.progress(min(1.0, self.done + self.phase_share * min(1.0, fraction_of_phase)), label)

    def end_phase(self):
        self.done = self.phase_done + self.phase_share


def _launch(device, sync, clock: _Clock):
    tiny = torch.zeros(1, device=device)
    t = bench(lambda: tiny.add_(1.0), sync=sync, budget_s=max(clock.left(), 0.05), min_sample_s=2e-3, max_repeats=30)
    clock.report(1.0, f"launch {t.median_s / US:.1f} us")
    return t


def _bandwidth(device, sync, sets, launch_s, clock: _Clock) -> tuple[Curve, ...]:
    order = [sets[-1], *sets[:-1]]  # main memory first: it must be measured even on a short budget
    points: dict[str, dict[int, tuple]] = {"copy": {}, "add": {}}
    rate = None
    for i, ws in enumerate(order):
        for kind in ("copy", "add"):
            if rate and i > 0 and MIN_RUNS * ws / rate > clock.left():
                continue
            n = max(1, ws // (8 if kind == "copy" else 12))
            bufs = [torch.empty(n, device=device).fill_(1.0) for _ in range(2 if kind == "copy" else 3)]
            fn = (lambda a=bufs: a[1].copy_(a[0])) if kind == "copy" else (lambda a=bufs: torch.add(a[0], a[1], out=a[2]))
            per_point = max(clock.left() / max(2 * (len(order) - i), 1), 0.0)
            t = bench(fn, sync=sync, budget_s=per_point, max_repeats=20)
            moved = 4 * n * len(bufs)
            points[kind][ws] = (moved, float(n if kind == "add" else 0), t)
            rate = rate or moved / max(t.median_s - launch_s, t.median_s / 4)
            del bufs, fn
        clock.report((i + 1) / len(order), f"bandwidth {ws / MIB:,.3g} MiB")
    curves = []
    for kind, pts in points.items():
        sizes = sorted(pts)
        if sizes:
            curves.append(Curve(kind, "fp32", tuple(float(s) for s in sizes), tuple(pts[s][1] for s in sizes),
                                tuple(float(pts[s][0]) for s in sizes), tuple(pts[s][2].median_s for s in sizes),
                                tuple(pts[s][2].low_s for s in sizes), tuple(pts[s][2].high_s for s in sizes)))
    return tuple(curves)


def _matmul(device, sync, plan: CalibrationPlan, clock: _Clock) -> tuple[Curve, ...]:
    curves = []
    per_dtype = clock.phase_budget / max(len(plan.matmul_dtypes), 1)
    for j, dtype in enumerate(plan.matmul_dtypes):
        td = torch_dtype(dtype)
        w = DTYPE_BYTES[dtype]
        deadline = clock.phase_start + per_dtype * (j + 1)
        rows, last = [], None
        for n in plan.matmul_sizes:
            left = deadline - clock.now()
            if last is not None and MIN_RUNS * last[1] * (n / last[0]) ** 3 > left:
                break
            a = torch.randn(n, n, device=device).to(td)
            b = torch.randn(n, n, device=device).to(td)
            c = torch.empty(n, n, device=device, dtype=td)
            t = bench(lambda: torch.matmul(a, b, out=c), sync=sync, budget_s=max(left / 6, 0.0), max_repeats=20)
            rows.append((n, *matmul_counts(n, n, n, w), t))  # 2 n^3 FLOPs, w 3 n^2 bytes
            last = (n, t.median_s)
            clock.report((j + plan.matmul_sizes.index(n) / len(plan.matmul_sizes)) / len(plan.matmul_dtypes),
                         f"matmul {dtype} n={n}: {rows[-1][1] / t.median_s / GIGA:,.1f} GFLOP/s")
            del a, b, c
        if rows:
            curves.append(Curve("matmul", dtype, *(tuple(float(r[i]) for r in rows) for i in range(3)),
                                tuple(r[3].median_s for r in rows), tuple(r[3].low_s for r in rows),
                                tuple(r[3].high_s for r in rows)))
    return tuple(curves)


def _families(device, sync, plan: CalibrationPlan, clock: _Clock) -> tuple[Probe, ...]:
    """The class probes (families.class_families and attention_families), timed round robin
    within what is left; on a CPU also recorded under torch.profiler (families.profiled_seconds)."""
    from roofline.measure.families import COLD_REPEATS, attention_families, class_families, profiled_seconds
    from roofline.measure.residuals import COLD, FAMILY, NARROW, STRIDED

    from roofline.measure.device import make_flush

    classes = class_families(device, plan.probe_dtype, plan.family_rows or None)
    ops = classes + attention_families(device, plan.probe_dtype)
    times = bench_round_robin([o.fn for o in ops], sync=sync, budget_s=max(clock.left(), 0.0) * 0.6, max_repeats=15)
    profiled = profiled_seconds(ops) if device == "cpu" else [None] * len(ops)
    clock.report(0.6, f"{len(ops)} class probes")
    # the same class ops with the caches flushed before each call: a forward's small ops find
    # their operands evicted by the GEMMs between them (families.COLD)
    flush = make_flush(device, device_info(device).caches)
    classes = [o for o in classes if not o.shape.startswith((NARROW, STRIDED))]  # a width or stride factor, timed warm
    cold = bench_round_robin([o.fn for o in classes], sync=sync, flush=flush, budget_s=max(clock.left(), 0.0) * 0.5,
                             max_repeats=COLD_REPEATS)
    cold_profiled = (profiled_seconds(classes, COLD_REPEATS, flush) if device == "cpu" else [None] * len(classes))
    clock.report(1.0, f"{len(classes)} class probes cold")
    return (tuple(Probe(o.name, o.category, plan.probe_dtype, o.flops, o.bytes, t.median_s, t.low_s, t.high_s,
                        f"{FAMILY}{o.shape}", o.op, p) for o, t, p in zip(ops, times, profiled))
            + tuple(Probe(o.name, o.category, plan.probe_dtype, o.flops, o.bytes, t.median_s, t.low_s, t.high_s,
                          f"{FAMILY}{COLD}{o.shape}", o.op, p) for o, t, p in zip(classes, cold, cold_profiled)))


def _probes(device, sync, plan: CalibrationPlan, clock: _Clock) -> tuple[Probe, ...]:
    out = []
    sizes = list(plan.probe_sizes)
    for i, (d_model, tokens) in enumerate(sizes):
        if clock.left() <= 0 and out:
            break
        cfg = scale_config(plan.probe_model, d_model)
        specs = block_ops(cfg, "prefill", tokens, 1, None, "naive", plan.probe_dtype, device)
        specs += block_ops(cfg, "prefill", tokens, 1, None, "flash", plan.probe_dtype, device, only={"flash attention"})
        times = bench_round_robin([s.fn for s in specs], sync=sync, budget_s=max(clock.left() / (len(sizes) - i), 0.0),
                                  max_repeats=15)
        for s, t in zip(specs, times):
            k = s.kernel
            out.append(Probe(k.name, k.category, k.dtype, float(k.flops), float(k.bytes), t.median_s, t.low_s, t.high_s,
                             f"d_model {d_model}, T {tokens}: {s.shape}"))
        del specs
        clock.report((i + 1) / len(sizes), f"probes d_model {d_model}, T {tokens}")
    return tuple(out)


def calibrate(device: str = "cpu", dtype: str | None = None, budget_s: float = 60.0, progress: Progress | None = None,
              plan: CalibrationPlan | None = None, threads: int | None = None, allow_drift: bool = False,
              reference_timer=None) -> Calibration:
    """Measure the device (see the module docstring) within about ``budget_s`` seconds (more when
    the reference drifted and groups were measured again: drift.py). ``progress(fraction, label)``
    is called as points finish; an exception it raises (e.g. a KeyboardInterrupt) stops the run with
    nothing written. A drift beyond drift.DRIFT_BOUND after the repeats is a DriftError unless
    ``allow_drift``; ``reference_timer`` replaces the reference's timing (tests)."""
    require_device(device)
    check_number("budget", budget_s)
    if threads is not None:
        torch.set_num_threads(check_threads(threads))
    dtype = dtype or default_dtype(device)
    torch_dtype(dtype)
    info = device_info(device)
    plan = plan or default_plan(device, dtype, info.caches, available_memory_bytes(device))
    if dtype not in plan.matmul_dtypes:
        raise RooflineError(f"the plan measures no {dtype} matmul", field="dtype")
    sync = synchronizer(device)
    clock = _Clock(budget_s, progress)
    when = _dt.datetime.now().astimezone()
    n = REFERENCE_N[device]
    guard = DriftGuard(reference_timer or drift_timer(device, n, sync, min(0.05, max(0.01, 0.005 * budget_s))),
                       kernel_name(n), n, allow=allow_drift, threads=info.threads)
    got = _measure_groups(device, sync, plan, clock, guard)
    cal = Calibration(
        key=f"local-{device}", device=device, device_name=info.name, vendor=info.vendor,
        date=when.strftime("%Y-%m-%d %H:%M %Z").strip(), torch_version=info.torch_version, threads=info.threads,
        budget_s=float(budget_s), default_dtype=dtype, launch_s=got["launch"].median_s, launch_low_s=got["launch"].low_s,
        launch_high_s=got["launch"].high_s, caches=info.caches, matmul=got["matmul"], bandwidth=got["bandwidth"],
        probes=got["probes"] + got["families"], gemm=got["gemm"], memory_bytes=info.memory_bytes, sm_count=info.sm_count,
        extra={"probe_model": plan.probe_model, "probe_sizes": [list(s) for s in plan.probe_sizes]},
    )
    if plan.family_rows and device == "cpu":
        # the eager framework's time between ops, on small models costed with what was just measured
        from roofline.measure.framework import framework_gap

        gap, how = guard.run("framework", lambda: framework_gap(cal, budget_s=min(1.0, max(0.1, 0.02 * budget_s))))
        cal = dataclasses.replace(cal, framework_gap_s=gap, framework_probe=how)
        clock.report(1.0, "framework between ops: " + (f"{gap * 1e6:.1f} us per gap" if gap is not None else how))
    cal = dataclasses.replace(cal, reference=guard.finish(),
                              extra={**cal.extra, "elapsed_s": round(clock.now() - clock.start, 2)})
    clock.report(0.0, f"done in {clock.now() - clock.start:.0f} s")
    return cal


def _measure_groups(device, sync, plan: CalibrationPlan, clock: _Clock, guard: DriftGuard) -> dict:
    """The probe groups in order, each between two reference timings (guard.run), then measured
    again where a later reference showed them disturbed (guard.settle): their figures by name."""
    shares = dict(PHASES)
    got = guard.results

    def phase(name: str, share: float, fn):
        def run():
            clock.phase(share)
            out = fn()
            clock.end_phase()
            return out
        return guard.run(name, run)

    phase("launch", shares["launch"], lambda: _launch(device, sync, clock))
    phase("bandwidth", shares["bandwidth"],
          lambda: _bandwidth(device, sync, plan.working_sets, got["launch"].median_s, clock))
    phase("matmul", shares["matmul"] * (0.6 if plan.gemm_m else 1.0), lambda: _matmul(device, sync, plan, clock))
    for name, share, wanted, fn in (
            ("gemm", shares["matmul"] * 0.4, plan.gemm_m, lambda: gemm_family(device, sync, plan, clock)),
            ("probes", shares["probes"] * (0.6 if plan.family_rows else 1.0), plan.probe_sizes,
             lambda: _probes(device, sync, plan, clock)),
            ("families", shares["probes"] * 0.4, plan.family_rows, lambda: _families(device, sync, plan, clock))):
        if wanted:
            phase(name, share, fn)
        else:  # nothing to measure: no reference timing either
            got[name] = ()
    guard.settle()
    return got
