"""How close are the predictions on this device? Calibrate, then check held-out block sizes, and
write the figures to a Markdown report (docs/accuracy.md by default).

The calibration's probe ops (the fit set of the calibrated model) are a scaled Llama 3 8B block at
the plan's (d_model, tokens) sizes; the checks run other sizes (held out), and every predictor
(plain roofline, seed defaults, calibrated) is scored on the same measurements of the same run.
Figures are printed and written, never asserted: timings belong here, not in the tests.

    python benchmarks/accuracy.py                                  # CPU, fp32, 1 thread, ~2-3 minutes
    python benchmarks/accuracy.py --device cuda --dtype bf16 --out $OUT/accuracy-h200.md

Targets (docs/accuracy.md): calibrated per block within 10% of measured on a CPU (5% on a GPU); per-op
median absolute error 20% on a CPU (10% on a GPU).

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): a tiny calibration plan and budget, two small
held-out blocks, 0.3 s of timing each; every file (the report, --json, --plot, --profile-out) goes
to a temporary directory, never to docs/. The figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from roofline.diagnose.check_report import PREDICTORS  # noqa: E402
from smoke import SMOKE, announce, output, smoke_or  # noqa: E402  (benchmarks/ is on sys.path as a script)

HELD_OUT = {  # (d_model, tokens, attention): none of these is a calibration probe size
    "cpu": [(1024, 512, "naive"), (1280, 640, "naive"), (640, 1536, "naive"), (1024, 512, "flash")],
    "cuda": [(4096, 4096, "naive"), (3072, 2048, "naive"), (2048, 8192, "naive"), (4096, 4096, "flash")],
}
if SMOKE:  # small blocks, the naive and the flash path each once
    HELD_OUT = {"cpu": [(192, 96, "naive"), (192, 96, "flash")], "cuda": [(512, 256, "naive"), (512, 256, "flash")]}
TARGETS = {"cpu": (0.10, 0.20), "cuda": (0.05, 0.10)}  # (block, per-op median)


def hardware(device: str, cal) -> list[str]:
    import torch

    lines = [f"- torch {torch.__version__}, {cal.threads} thread(s); Python {sys.version.split()[0]}"]
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        lines.insert(0, f"- GPU: {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs, "
                        f"CUDA {torch.version.cuda}")
        return lines
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        keep = ("Model name", "CPU(s)", "Thread(s) per core", "Hypervisor vendor", "L1d cache", "L2 cache", "L3 cache")
        rows = [l.strip() for l in out.splitlines() if l.split(":")[0].strip() in keep]
        lines.insert(0, "- CPU (lscpu): " + "; ".join(" ".join(r.split()) for r in rows))
    except (OSError, subprocess.CalledProcessError):
        lines.insert(0, f"- CPU: {cal.device_name}")
    return lines


def pct(x: float) -> str:
    return f"{x:+.1%}"


def us(s: float) -> str:
    v = s * 1e6
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def op_table(report) -> list[str]:
    head = "| op | FLOP/B | measured us | roofline us | err | seed us | err | calibrated us [range] | err | inside | % roof | flag |"
    out = [head, "|" + "---|" * 12]
    for op in (*report.ops, report.block):
        out.append(
            f"| {op.name} | {op.intensity:,.1f} | {us(op.measured_s)} | {us(op.roofline_s)} | {pct(op.error('roofline'))} "
            f"| {us(op.seed_s)} | {pct(op.error('seed'))} | {us(op.calibrated_s)} [{us(op.calibrated_low_s)}-"
            f"{us(op.calibrated_high_s)}] | {pct(op.error('calibrated'))} | {'yes' if op.inside else 'no'} "
            f"| {op.roof_fraction:.0%} | {op.flag} |")
    return out


def write_json(path: Path, reports) -> None:
    """Every report so far as a JSON list, replacing the file in one rename (never half written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps([r.to_dict() for r in reports], indent=2), encoding="utf-8")
    tmp.replace(path)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--dtype", default=None, help="default fp32 on cpu, bf16 on cuda")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default 1 on cpu: see the report)")
    ap.add_argument("--budget", type=float, default=None, help="calibration seconds (default 60 cpu, 90 cuda)")
    ap.add_argument("--check-budget", type=float, default=None, help="timing seconds per check (default 15 cpu, 10 cuda)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "accuracy.md"))
    ap.add_argument("--profile", default=None, help="use this profile from `roofline calibrate` instead of calibrating")
    ap.add_argument("--profile-out", default=None, help="keep the profile here (default: a temporary file)")
    ap.add_argument("--json", default=None, help="also write every report as JSON here (rewritten as each check completes)")
    ap.add_argument("--plot", default=None, help="also draw the first held-out check here (PNG/SVG)")
    args = ap.parse_args(argv)
    announce()
    for name in ("out", "profile_out", "json", "plot"):  # smoke mode: into a temporary directory
        setattr(args, name, output(getattr(args, name)))

    from roofline.measure import calibrate, write_profile
    from roofline.measure.run_check import run_check  # the module's name: `from roofline.measure import run_check` is it
    from roofline.measure.progress import ProgressBar
    from roofline.measure.measurements import level_bandwidths, main_memory, peaks

    device = args.device
    dtype = args.dtype or ("fp32" if device == "cpu" else "bf16")
    threads = args.threads if args.threads is not None else (1 if device == "cpu" else None)
    budget = smoke_or(args.budget or (60.0 if device == "cpu" else 90.0), 1.0)
    check_budget = smoke_or(args.check_budget or (15.0 if device == "cpu" else 10.0), 0.3)
    command = "python benchmarks/accuracy.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))

    started = time.time()
    if args.profile:
        from roofline.measure.machine_file import load_profile

        profile = Path(args.profile)
        cal = load_profile(profile)[1]
        dtype, threads, budget = cal.default_dtype, cal.threads, cal.budget_s
        fit = (f"roofline calibrate --device {cal.device} --dtype {dtype} --threads {threads} --budget {budget:g} "
               f"-o {profile.name}   # {cal.date}")
    else:
        bar = ProgressBar("calibrate")
        plan = None
        if SMOKE:  # bench_check_errors.py's tiny plan (tests/test_measure.py's), in this dtype
            import dataclasses

            from bench_check_errors import TINY

            plan = dataclasses.replace(TINY, matmul_dtypes=(dtype,), probe_dtype=dtype)
        cal = calibrate(device, dtype, budget, bar, plan=plan, threads=threads, allow_drift=True)
        bar.close()
        print(cal.reference.text() + (" (beyond its bound: the figures below were measured on a moving machine)"
                                       if cal.reference.beyond else ""), flush=True)
        profile = Path(args.profile_out) if args.profile_out else Path(tempfile.mkdtemp()) / f"roofline-{device}.toml"
        write_profile(cal, profile)
        fit = ""
    reports = []
    for d_model, tokens, attention in HELD_OUT[device]:
        print(f"check d_model {d_model}, T {tokens}, {attention}", file=sys.stderr, flush=True)
        reports.append(run_check(device, "llama3-8b", d_model, tokens, 1, "prefill", None, attention, dtype, profile,
                                 check_budget, threads=threads))
        if args.json:  # as each check completes: a run cut short keeps the checks it finished
            write_json(Path(args.json), reports)
    elapsed = time.time() - started

    block_target, op_target = TARGETS[device]
    all_ops = [op for r in reports for op in r.ops]
    med = {p: median([abs(op.error(p)) for op in all_ops]) for p in PREDICTORS}
    inside = sum(op.inside for op in all_ops)
    blocks_inside = sum(r.block.inside for r in reports)
    within = sum(abs(r.block.error("calibrated")) <= block_target for r in reports)

    dram, _ = main_memory(cal)
    lines = [
        f"# Prediction accuracy on {'this CPU' if device == 'cpu' else cal.device_name}",
        "",
        f"Written by `benchmarks/accuracy.py` on {cal.date} ({elapsed:.0f} s). Re-run it to refresh; nothing here is",
        "asserted by a test. Command:",
        "",
        "```",
        *([fit] if fit else []),
        command.strip(),
        "```",
        "",
        "This page holds out block *sizes*. Held-out *models* (a GPT-2-like, a Llama-like with grouped-query "
        "attention and an MoE, prefill and decode at batch 1 and 4, measured through `roofline profile` as a user "
        "would): [accuracy-models.md](accuracy-models.md) (one thread, fp32), "
        "[two threads](accuracy-models-2threads.md), [bf16](accuracy-models-bf16.md).",
        "",
        "## Hardware",
        "",
        *hardware(device, cal),
        "- calibrated: " + "; ".join([
            *(f"matmul {d} best {f / 1e9:,.1f} GFLOP/s" for d, f in peaks(cal).items()),
            *(f"{n} ({s / 2**20:,.3g} MiB) {b / 1e9:,.0f} GB/s" for n, s, b in level_bandwidths(cal)),
            f"main memory {dram / 1e9:,.1f} GB/s", f"launch {cal.launch_s * 1e6:.2f} us"]),
        "",
        "## Method",
        "",
        f"- Fit: calibrate (device {device}, {dtype}, budget {budget:g} s, {threads} thread(s)): matmul sweep,",
        "  copy/add bandwidth from 32 KiB to >= 4x the last cache, launch overhead, and the ops of a Llama 3 8B block",
        f"  scaled to (d_model, tokens) = {', '.join(str(tuple(s)) for s in cal.extra.get('probe_sizes', []))} (the probes).",
        "- Held out: `run_check` at "
        + ", ".join(f"d_model {d}, T {t} ({a})" for d, t, a in HELD_OUT[device])
        + f", {check_budget:g} s of timing each; the ops are timed in interleaved passes (median of the passes).",
        "- Predictors, same measurements: **roofline** = the profile's peak and main-memory bandwidth at e = 1, no",
        "  launch; **seed** = e_c 0.70, e_m 0.85 and the profile's launch (what `roofline layer --machine PROFILE",
        "  --compute-efficiency 0.7 --memory-efficiency 0.85` prints); **calibrated** =",
        "  roofline.measure.calibrated.CalibratedModel with its interval (what `roofline layer --machine PROFILE` prints).",
        "- error = predicted / measured - 1.",
        *([
            "- One thread on a CPU by default: on a small shared machine a second OpenMP thread waits on a core",
            "  that another process holds, and a parallel region then stalls by orders of magnitude (a 128 x 128",
            "  matmul went from tens of microseconds to ~10 ms while developing this). `--threads N` measures N.",
        ] if device == "cpu" and threads == 1 else []),
        "",
        "## Summary",
        "",
        "| held-out block | measured us | roofline err | seed err | calibrated err | calibrated inside range | per-op median abs err: roofline / seed / calibrated | ops inside range |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r, (d_model, tokens, attention) in zip(reports, HELD_OUT[device]):
        b = r.block
        lines.append(
            f"| d_model {d_model}, T {tokens}, {attention} | {us(b.measured_s)} | {pct(b.error('roofline'))} | "
            f"{pct(b.error('seed'))} | {pct(b.error('calibrated'))} | {'yes' if b.inside else 'no'} | "
            f"{r.median_abs_error('roofline'):.0%} / {r.median_abs_error('seed'):.0%} / {r.median_abs_error('calibrated'):.0%} | "
            f"{sum(op.inside for op in r.ops)} of {len(r.ops)} |")
    lines += [
        "",
        f"Over all {len(all_ops)} held-out ops, median absolute error: roofline {med['roofline']:.1%}, "
        f"seed {med['seed']:.1%}, calibrated {med['calibrated']:.1%}. Measured time inside the calibrated interval: "
        f"{inside} of {len(all_ops)} ops ({inside / len(all_ops):.0%}), {blocks_inside} of {len(reports)} blocks.",
        "",
        f"Targets: calibrated block within {block_target:.0%}: **{within} of {len(reports)}** blocks "
        f"({'met' if within == len(reports) else 'missed'}); per-op median abs error {op_target:.0%}: "
        f"**{med['calibrated']:.1%}** ({'met' if med['calibrated'] <= op_target else 'missed'}).",
        "",
    ]
    for r, (d_model, tokens, attention) in zip(reports, HELD_OUT[device]):
        lines += [f"## Held out: d_model {d_model}, T {tokens}, {attention} attention", "",
                  f"{r.config}; {r.dtype}; {r.threads} thread(s); checked {r.date}.", "", *op_table(r), ""]
        flagged = [op for op in r.ops if op.diagnosis]
        if flagged:
            lines += ["Flagged (the roofline chapter, section 4: what the measurement says):", ""] + [f"- {op.name} [{op.flag}]: {op.diagnosis}" for op in flagged] + [""]
        if r.notes:
            lines += [f"Note: {n}." for n in r.notes] + [""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    if args.plot:
        from roofline.plots import plot_check

        plot_check(reports[0], args.plot)

    print(f"wrote {out} (profile {profile})")
    print(f"{'held-out block':<28} {'measured us':>12} {'roofline':>9} {'seed':>8} {'calibr.':>8} {'op med cal':>11}")
    for r, (d_model, tokens, attention) in zip(reports, HELD_OUT[device]):
        b = r.block
        print(f"{f'd {d_model} T {tokens} {attention}':<28} {us(b.measured_s):>12} {pct(b.error('roofline')):>9} "
              f"{pct(b.error('seed')):>8} {pct(b.error('calibrated')):>8} {r.median_abs_error('calibrated'):>11.1%}")
    print(f"per-op median |err| over {len(all_ops)} ops: " + ", ".join(f"{p} {med[p]:.1%}" for p in PREDICTORS)
          + f"; inside calibrated range {inside}/{len(all_ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
