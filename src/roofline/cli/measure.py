"""`roofline calibrate` and `roofline check`: measure the local device through PyTorch.

Nothing heavy at import: torch is imported when a command runs, and its absence is one line
naming the extra to install (exit code 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

from roofline.cli.args import check_output
from roofline.cli.args import MODEL_NAME, PREFIXES, add_declared, add_deprecated_alias, number_arg
from roofline.errors import RooflineError
from roofline.extras import require_torch
from roofline.parameters import VIEW_ATTENTION
from roofline.tool_parameters import CALIBRATE_BUDGET, CHECK_BUDGET, D_MODEL, THREADS
from roofline.units import GIGA, US, format_bytes

def default_profile_path(device: str) -> str:
    return f"roofline-{device}.toml"


def write_failed(path: str, exc: OSError) -> RooflineError:
    """An OSError while writing -o/--output as one line naming the flag."""
    return RooflineError(f"-o/--output {path!r}: cannot write: {exc.strerror or exc}", field="output")


def _budget(p):
    """The type of a declared time budget in seconds (roofline.tool_parameters): bare seconds or a unit (90s, 2min),
    in its declared range."""
    from roofline.units import parse_time_s

    return number_arg(p.flag, minimum=p.minimum, strictly=p.strictly, maximum=p.maximum, parser=parse_time_s)


def _common(p):
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to measure (default cpu)")
    p.add_argument("--dtype", default=None, help="fp32 (CPU default), bf16 (CUDA default), fp16")
    add_declared(p, THREADS)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_calibrate(args):
    require_torch("measuring this device")
    from roofline.measure.calibration import calibrate
    from roofline.measure.progress import ProgressBar
    from roofline.measure.measurements import level_bandwidths, main_memory, peaks
    from roofline.measure.machine_file import write_profile

    out = check_output(args.output or default_profile_path(args.device), (".toml",))
    bar = None if args.quiet else ProgressBar("calibrate")
    try:
        cal = calibrate(args.device, args.dtype, args.budget, bar, threads=args.threads, allow_drift=args.allow_drift)
    finally:
        if bar:
            bar.close()
    try:
        write_profile(cal, out)
    except OSError as exc:  # the folder went away or filled up during the measurement
        raise write_failed(out, exc) from None
    dram, _ = main_memory(cal)
    print(f"wrote {out}: {cal.device_name}, {cal.threads} thread(s), torch {cal.torch_version}")
    short = [c.dtype for c in cal.matmul if c.kind == "matmul" and len(c.size) < 3]
    if short or not cal.matmul:  # a peak from one or two sizes is a warm-up, not a rate
        print(f"warning: the budget ({args.budget:g} s) measured {'no matmul' if not cal.matmul else 'under 3 matmul sizes for ' + ', '.join(short)}: "
              "its peaks are far below this device's; calibrate again with --budget 30 or more")
    for dtype, flops in peaks(cal).items():
        print(f"  matmul {dtype:<5} best {flops / GIGA:,.1f} GFLOP/s")
    for name, size, bw in level_bandwidths(cal):
        print(f"  {name:<5} {format_bytes(size):>10}  {bw / GIGA:,.1f} GB/s")
    print(f"  main memory      {dram / GIGA:,.1f} GB/s")
    print(f"  launch overhead  {cal.launch_s / US:,.2f} us")
    if cal.framework_gap_s is not None:
        print(f"  framework        {cal.framework_gap_s / US:,.2f} us per gap between top-level ops (eager Python, "
              "on two tiny models' decode steps)")
    print(f"  {len(cal.probes)} probe ops for the calibrated model")
    if cal.reference is not None:
        print(f"  {cal.reference.text()}")
        if cal.reference.shared and cal.device == "cpu":
            print(f"warning: the machine was busy ({cal.reference.load_text()}): other processes took turns on its "
                  "cores; the medians and the reference resist that, but calibrate again on a quieter machine to be sure")
        if cal.reference.allowed:
            print(f"warning: --allow-drift kept figures measured beside a reference {cal.reference.kept_drift - 1:.0%} "
                  f"slower than its quickest (bound {cal.reference.bound:.0%}): the machine was busy; the profile says so")
    from roofline.measure.measurements import disagreement_text

    noisy = disagreement_text(cal)
    if noisy:
        print(f"warning: {noisy}")
    print(f"use it: roofline check --machine {out}; roofline layer --machine {out}")


def cmd_check(args):
    require_torch("measuring this device")
    from roofline.measure.run_check import run_check
    from roofline.measure.progress import ProgressBar

    if args.output:
        check_output(args.output, (".png", ".svg"))
    profile = args.profile
    if profile is None and Path(default_profile_path(args.device)).is_file():
        profile = default_profile_path(args.device)
    bar = None if (args.quiet or args.json or args.csv) else ProgressBar("check")
    try:
        report = run_check(args.device, args.model, args.d_model, args.tokens, args.batch, args.phase, args.context,
                           args.attention, args.dtype, profile, args.budget, args.cold, args.threads, bar)
    finally:
        if bar:
            bar.close()
    if args.output:
        from roofline.plots import plot_check

        try:
            plot_check(report, args.output)
        except OSError as exc:
            raise write_failed(args.output, exc) from None
    if args.json:
        print(report.to_json())
    elif args.csv:
        sys.stdout.write(report.to_csv())
    else:
        print(report.to_table())
        if args.output:
            print(f"\nwrote {args.output}")


def register(sub):
    p = sub.add_parser("calibrate", help="measure this device (PyTorch) into a machine profile",
                       description="Micro-benchmarks (launch, bandwidth per cache level, matmul FLOP/s by size, "
                                   "the ops of a scaled-down block) written atomically as a machine TOML file: "
                                   "use it as --machine FILE anywhere, `roofline check` included.")
    _common(p)
    add_declared(p, CALIBRATE_BUDGET, type=_budget(CALIBRATE_BUDGET))
    p.add_argument("-o", "--output", default=None, help="profile path (default roofline-DEVICE.toml)")
    p.add_argument("--allow-drift", action="store_true",
                   help="keep the figures even when the reference kernel timed between probe groups drifted beyond "
                        "its bound after the repeats (a busy machine); said in the output and the profile")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("check", help="time one block's ops on this device against the predictions",
                       description="Runs one transformer block as real PyTorch ops (scaled to the device) and "
                                   "prints, per op, the roofline, the workshop's cost model (\"seed\": e_c 0.70, e_m 0.85) and calibrated predictions beside the "
                                   "measured time, each error, % of roofline, and the ops far from their bound.")
    _common(p)
    p.add_argument("--machine", dest="profile", metavar="FILE", default=None,
                   help="a machine profile from `roofline calibrate` (default roofline-DEVICE.toml if present, else a "
                        "quick calibration)")
    add_deprecated_alias(p, "--profile", "--machine")  # the old spelling: one flag names a machine file everywhere
    p.add_argument("--model", default="llama3-8b", type=MODEL_NAME, help="preset or config.json (dense models)")
    add_declared(p, D_MODEL)
    # the sizes and attention of the layer view (roofline.parameters), in check's words
    add_declared(p, "tokens", text="prefill: new tokens per sequence, T (CPU default 512, CUDA 4096)", suffix=PREFIXES)
    add_declared(p, "batch", text="")
    add_declared(p, "phase")
    add_declared(p, "context", text="decode: tokens in the KV cache, S (default --tokens)", suffix=PREFIXES)
    add_declared(p, "attention", VIEW_ATTENTION["layer"])
    add_declared(p, CHECK_BUDGET, type=_budget(CHECK_BUDGET))
    p.add_argument("--cold", action="store_true", help="flush caches before every run (main-memory bandwidth)")
    p.add_argument("-o", "--output", default=None, help="also draw predicted and measured on a roofline: FILE.png|.svg")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    p.set_defaults(func=cmd_check)
