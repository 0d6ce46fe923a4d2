"""`roofline gemm` and `roofline diagnose`: one kernel's tiles and waves, and one kernel's measured
time against its bound (docs/tracing.md)."""

from __future__ import annotations

from roofline.cli.args import (add_declared, add_deprecated_alias, add_machine_flags, grouped_count_arg, kernel_params,
                               machine_from_args, number_arg, refuse_unused)
from roofline.errors import RooflineError
from roofline.tool_parameters import BYTES, FLOPS, MEASURED, RANK


# ---------------------------------------------------------------------------------------------
# gemm
# ---------------------------------------------------------------------------------------------


def cmd_gemm(args):
    from roofline.shapes import gemm_advice, parse_tile

    from roofline.units import dtype_bytes

    machine = machine_from_args(args)
    dtype = None if args.dtype is None else str(args.dtype).strip().lower()
    if dtype is not None:
        dtype_bytes(dtype)  # an unknown dtype is one line naming it
    advice = gemm_advice(args.M, args.N, args.K, machine, dtype, parse_tile(args.tile))
    print(advice.to_json() if args.json else advice.to_table())


# ---------------------------------------------------------------------------------------------
# diagnose
# ---------------------------------------------------------------------------------------------


def _diagnose_kernel(args):
    from roofline.kernels import Kernel, build_kernel, get_kernel_constructor

    if args.name:
        if args.flops is not None or args.bytes is not None or args.dtype is not None:
            raise RooflineError("give a kernel (NAME K=V ..., with bytes_per_elem=bf16 for its dtype) or "
                                "--flops/--bytes/--dtype, not both")
        ctor = get_kernel_constructor(args.name)
        params = kernel_params(args.param)
        kernel = build_kernel(args.name, params)
        shape = None
        if ctor.__name__ == "matmul_kernel" and all(k in params for k in "MNK"):
            shape = (params["M"], params["N"], params["K"])
        return kernel, shape
    if args.flops is None or args.bytes is None:
        raise RooflineError("give a kernel (e.g. matmul M=8192 N=4096 K=4096) or both --flops and --bytes")
    return Kernel(args.label or "kernel", args.flops, args.bytes, args.category, args.dtype or "bf16"), None


def _profiled_op(args, machine):
    """The kernel, per-call measured time and GEMM shape of row ``--rank`` of a profile."""
    from roofline.kernels import Kernel
    from roofline.trace.profiler import profile_report
    from roofline.trace.result import peak_dtype

    if args.name or args.flops is not None or args.bytes is not None:
        raise RooflineError("give --trace TRACE.json --rank N, or a kernel, not both")
    report = profile_report(args.trace, machine)
    if not 1 <= args.rank <= len(report.ops):
        raise RooflineError(f"argument --rank: the trace {str(args.trace)!r} has {len(report.ops)} costed ops; got {args.rank}")
    op = report.ops[args.rank - 1]
    kernel = Kernel(f"{op.name} {op.shapes}", op.flops, op.bytes, op.category, peak_dtype(op.dtype, machine))
    shape = None
    mats = [tuple(int(n) for n in s.split("x")) for s in op.shapes.split(", ") if s.count("x") == 1]
    if op.name in ("aten::mm", "aten::addmm") and len(mats) == 2:
        (M, K), (_, N) = mats
        shape = (M, N, K)
    return kernel, op.measured_s / op.calls, shape


def cmd_diagnose(args):
    from roofline.diagnose.kernel_diagnosis import diagnose

    if not args.trace:
        refuse_unused(args, {"rank": RANK.default}, "without --trace (it picks an op of a torch.profiler trace)")
    if args.label is not None and (not args.label.isprintable() or not args.label.strip()):
        raise RooflineError(f"--label must be one line of printable text, got {args.label!r}", field="label")
    machine = machine_from_args(args)
    if args.trace:
        kernel, measured, shape = _profiled_op(args, machine)
    else:
        if args.measured is None:
            raise RooflineError("argument --measured is required (or --trace TRACE.json --rank N)")
        kernel, shape = _diagnose_kernel(args)
        measured = args.measured
    d = diagnose(kernel, machine, measured, shape=shape)
    print(d.to_json() if args.json else d.to_table())


# ---------------------------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------------------------


def measured_time_s(text, field="--measured"):
    """A measured time must carry its unit (parse_time_s with unit_required)."""
    from roofline.units import parse_time_s

    return parse_time_s(text, field, unit_required=True)


def register(sub):
    from roofline.cli.args import kernel_param

    p = sub.add_parser("gemm", help="a GEMM's tiles, waves and tensor-core alignment, and what padding buys",
                       description="Example: roofline gemm 8192 50257 768 (GPT-2's LM head: pad the vocabulary to 50,304)")
    p.add_argument("M", type=grouped_count_arg("M"))
    p.add_argument("N", type=grouped_count_arg("N"))
    p.add_argument("K", type=grouped_count_arg("K"))
    add_machine_flags(p)
    p.add_argument("--dtype", default=None, help="default: the machine's (bf16 on most GPUs)")
    p.add_argument("--tile", default="128x128", help="output tile of the GEMM kernel (default 128x128)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_gemm)

    p = sub.add_parser("diagnose", help="a kernel and its measured time: bound, gap, and which fixes can help",
                       description="Examples: roofline diagnose matmul M=8192 N=4096 K=4096 --measured 400us; "
                                   "roofline diagnose --flops 1e9 --bytes 4e9 --measured 1.5ms; "
                                   "roofline diagnose --trace trace.json --rank 1")
    p.add_argument("name", nargs="?", default=None, help="kernel constructor (as in `roofline kernel`)")
    p.add_argument("param", nargs="*", type=kernel_param, help="NAME=VALUE, e.g. M=8192 N=4096 K=4096")
    # its unit required, as --slo-ttft's, but an error says the seconds as given
    add_declared(p, MEASURED, type=number_arg(MEASURED.flag, maximum=MEASURED.maximum, parser=measured_time_s))
    p.add_argument("--trace", default=None, metavar="TRACE.json",
                   help="instead of a kernel: an op of this torch.profiler trace (as `roofline profile` reads) ...")
    add_deprecated_alias(p, "--profile", "--trace")  # the old spelling: --profile named a machine file in `check`
    add_declared(p, RANK)
    add_declared(p, FLOPS)
    add_declared(p, BYTES)
    p.add_argument("--dtype", default=None, help="with --flops/--bytes: the peak to use (default bf16)")
    p.add_argument("--category", default="other", help="with --flops/--bytes: matmul, attention, elementwise, ...")
    p.add_argument("--label", default=None, help="with --flops/--bytes: a name for the kernel")
    add_machine_flags(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_diagnose)
