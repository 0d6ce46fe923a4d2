"""`roofline nsight FILE`: an Nsight Compute (``ncu --csv``) or Nsight Systems (``nsys stats
--report cuda_gpu_kern_sum --format csv``) export against the roofline (roofline.trace.nsight).

Nothing heavy at import; matplotlib only for -o.
"""

from __future__ import annotations

import sys

from roofline.cli.args import add_machine_flags, add_report_flags, check_output, machine_from_args, print_report
from roofline.errors import RooflineError


def _dtype(args, machine) -> str | None:
    if args.dtype is None:
        return None
    from roofline.units import dtype_bytes

    dtype = str(args.dtype).strip().lower()
    try:
        dtype_bytes(dtype)  # an unknown dtype is one line naming it
        machine.peak(dtype)
    except RooflineError as exc:
        raise RooflineError(f"argument --dtype: {exc}", field="dtype") from None
    return dtype


def cmd_nsight(args):
    from types import SimpleNamespace

    from roofline.cli.measure import write_failed
    from roofline.trace.nsight import NsysReport, nsight_report

    machine = machine_from_args(args)
    dtype = _dtype(args, machine)
    if args.output:
        check_output(args.output, (".png", ".svg"))
    report = nsight_report(args.file, machine, dtype)
    if isinstance(report, NsysReport):
        if args.output:
            raise RooflineError(f"-o/--output: {args.file!r} is an nsys kernel summary (times only, no FLOPs or bytes "
                                "to place on the roofline); profile with ncu --csv --page raw to plot", field="output")
        if dtype is not None:
            raise RooflineError(f"--dtype does not apply to {args.file!r}, an nsys kernel summary (times only)",
                                field="dtype")
        for flag in ("compute_scale", "bandwidth_scale"):
            if getattr(args, flag, 1.0) != 1.0:
                raise RooflineError(f"--{flag.replace('_', '-')} does not apply to {args.file!r}, an nsys kernel summary "
                                    "(times only: no roofline to scale)", field=flag)
    if args.machine:  # said first: the table below it compares unlike machines
        from roofline.measure.calibrated import calibrated_model_for

        cal = calibrated_model_for(args.machine)
        if cal is not None and cal.calibration.device == "cpu":  # GPU kernels against a CPU's roof
            print(f"note: {args.file!r} holds GPU kernels (Nsight), and {machine.the_name} is a CPU profile: the % of "
                  "speed of light and the advice compare unlike machines; give --machine the GPU the kernels ran on",
                  file=sys.stderr if (args.json or args.csv) else sys.stdout)
    print_report(args, report)
    if args.output:
        from roofline.plots import plot_profile

        placed = [k for k in report.kernels if k.flops is not None and k.flops > 0 and k.bytes > 0]
        view = SimpleNamespace(ops=placed, device=True, path=report.path)  # the rows carry ProfiledOp's fields
        try:
            plot_profile(view, machine, args.output,
                         title=f"ncu {report.path.split('/')[-1]} on {machine.name}: measured kernels against the roofline")
        except OSError as exc:
            raise write_failed(args.output, exc) from None
        where = sys.stderr if (args.json or args.csv) else sys.stdout
        left = len(report.kernels) - len(placed)
        print(f"wrote {args.output}" + (f" ({left} kernel{'' if left == 1 else 's'} without FLOPs or DRAM bytes not drawn)" if left else ""),
              file=where)


def register(sub):
    p = sub.add_parser("nsight", help="an ncu or nsys CSV export against the roofline: bound, measured, time lost per kernel",
                       description="Reads ncu --csv (--page raw or details) or nsys stats --report cuda_gpu_kern_sum "
                                   "--format csv. Example: roofline nsight kernels.csv --machine h100-sxm -o roof.png")
    p.add_argument("file", help="FILE.csv: an ncu --csv export or an nsys cuda_gpu_kern_sum CSV")
    add_machine_flags(p)
    p.add_argument("--dtype", default=None,
                   help="put every FLOP at this dtype's peak (default: each precision ncu counted at its own peak)")
    add_report_flags(p, "kernels")
    p.set_defaults(func=cmd_nsight)
