"""The `roofline` command. Human tables by default, --json / --csv for tools, -o for figures.

Bad input prints one line naming the value (``roofline: error: ...``) and exits with code 2.
Heavy packages (matplotlib) are imported only by the commands that draw.

    args.py      argument types and the flags commands share
    core.py      layer, kernel, machines, models, plot (the core's commands)
    plan.py      decode, train, memory, sweep (plan_args.py: their shared flags)
    serving.py   serving
    measure.py   calibrate, check
    trace.py     trace, profile, gemm, diagnose (trace_model.py: the model trace runs on meta)
    nsight.py    nsight
    workshop.py  serve (the web workshop)

``roofline.cli:main`` is the console entry point; ``python -m roofline`` runs it too.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from roofline.cli.args import (Parser, VersionAction, add_cost_flags, add_declared, add_kernels_flag, add_layer_flags,
                               add_machine_flags, kernel_param, layer_dtype, package_version)
from roofline.cli.core import cmd_kernel, cmd_layer, cmd_machines, cmd_models, cmd_plot
from roofline.cli.plan_args import add_tp, flagged
from roofline.errors import RooflineError


# Commands that live in their own modules: each has register(subparsers).
EXTRA_COMMANDS: tuple[str, ...] = ("roofline.cli.workshop", "roofline.cli.plan", "roofline.cli.measure", "roofline.cli.trace",
                                   "roofline.cli.diagnose",
                                   "roofline.cli.nsight", "roofline.cli.serving")

EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="roofline", description="How fast can it run, and what limits it: the roofline model for ML.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("layer", help="one transformer block op by op (by default the workshop's: Llama 3 8B, 8,192 tokens, e_c 0.7, e_m 0.85, launch 3 µs)")
    add_layer_flags(p)
    add_kernels_flag(p)
    add_tp(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    p.set_defaults(func=flagged(cmd_layer))  # a library error naming tensor_parallel names --tp

    p = sub.add_parser("machines", help="list machine presets")
    p.add_argument("--json", action="store_true")
    p.add_argument("--measured", action="store_true",
                   help="list the measured kernel tables instead (GPU, engine, versions, op families, points): the "
                        "roofline[measured] extra")
    p.set_defaults(func=cmd_machines)

    p = sub.add_parser("models", help="list model presets, or describe one model (a preset or a config.json)")
    p.add_argument("model", nargs="?", default=None, help="a preset key or a config.json path: its layer pattern and notes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_models)

    from roofline.kernels import KERNELS
    from roofline.parameters import LAYER_DTYPE

    from_kernels = ", ".join(KERNELS)
    p = sub.add_parser("kernel", help="one kernel on a machine: intensity, bound, time",
                       description=f"Kernels: {from_kernels}. Example: roofline kernel matmul M=1 N=4096 K=4096")
    p.add_argument("name", help="kernel constructor name")
    p.add_argument("param", nargs="*", type=kernel_param, help="NAME=VALUE, e.g. M=8192 N=4096 K=4096 bytes_per_elem=fp8")
    add_machine_flags(p)
    add_declared(p, LAYER_DTYPE, type=layer_dtype, text="the element width and the peak: bf16, fp8, ... (the "
                 "kernel's bytes_per_elem or bytes_per_param; dtype=NAME among the parameters says the same; default bf16)")
    add_cost_flags(p, launch_default_note="0", seed=False)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_kernel, compute_efficiency=1.0, memory_efficiency=1.0, launch_overhead=0.0)

    p = sub.add_parser("plot", help="draw a figure: roofline, layer, or atlas (measured kernels on the roofline)")
    p.add_argument("what", choices=("roofline", "layer", "atlas"))
    p.add_argument("-o", "--output", required=True, help="FILE.png or FILE.svg")
    p.add_argument("--ops", choices=("seed", "layer"), default="seed",
                   help="roofline: the roofline chapter's seven kernels, or the layer's ops")
    p.add_argument("--kernels", default=None, metavar="ENGINE[@VERSION]",
                   help="atlas: the engine whose measured kernels to draw (trtllm, vllm, sglang); the roofline's "
                        "old --kernels seed|layer is --ops")
    add_layer_flags(p)
    p.set_defaults(func=cmd_plot)

    import importlib

    for module in EXTRA_COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # not built yet
                continue
            raise
        mod.register(sub)
    return parser


STREAMING_COMMANDS = ("serve",)  # prints its URL, then serves until stopped: not buffered


def one_line(message: str) -> str:
    """An error message as one printable line: a control character the user typed (a newline or a
    carriage return in a file name) is shown escaped, as repr() shows it, not obeyed."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def _print_notes(notes) -> None:
    for note in notes:
        print(f"roofline: note: {note}", file=sys.stderr)


def main(argv=None) -> int:
    notes: list[str] = []  # old flag spellings used (args.DeprecatedAlias)
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # a bare `roofline`: what it can do, not "required: COMMAND"
        build_parser().print_help()
        return 0
    if argv[0] == "--version":  # argparse's answer (VersionAction), without building every command's flags first
        print(f"roofline {package_version()}")
        raise SystemExit(0)
    try:
        args = build_parser().parse_args(argv)
        notes = vars(args).setdefault("deprecation_notes", [])  # a command may add one (an old value's spelling)
        if args.command in STREAMING_COMMANDS:
            _print_notes(notes)
            notes = []
            args.func(args)
        else:  # the whole output is checked finite before any of it is printed
            import io

            from roofline.tables import check_finite_text

            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                args.func(args)
            sys.stdout.write(check_finite_text(buffer.getvalue()))
            _print_notes(notes)
    except RooflineError as exc:
        noted = "".join(f" ({note})" for note in notes)
        print(f"roofline: error: {one_line(str(exc))}{noted}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `roofline layer | head`
        return 0
    except OSError as exc:  # e.g. -o into a folder that does not exist: one line, like any bad input
        where = f" {exc.filename!r}" if exc.filename else ""
        print(f"roofline: error: cannot write or read{where}: {one_line(str(exc.strerror or exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("roofline: interrupted", file=sys.stderr)
        return 130
    return 0
