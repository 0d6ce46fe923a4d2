"""Argument types and shared flags for the `roofline` command and its extension commands.

Every type names its flag in the error (argparse prints ``argument --flag: ...``); bad values are
one line and exit code 2 (see cli.main). The parser itself (Parser, --help's defaults, --version,
deprecated spellings) is parser.py; its names are importable from here too.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from roofline.cli.parser import (DefaultsHelpFormatter, DeprecatedAlias, Parser, VersionAction,  # noqa: F401 (re-exported)
                                 add_deprecated_alias, package_version, shows_default)
from roofline.cli.numbers import number_arg  # noqa: F401 (re-exported)
from roofline.errors import RooflineError
from roofline.parameters import COUNT_MAX


# -- argument types: each names the flag in its message ------------------------------------------

def time_with_unit(text, field):
    """A latency or overhead with its unit (3us, 500ms, 0.5s): a bare 500 is as likely ms as s and a
    bare 3 as likely us as s, so it is refused, for --launch-overhead as for --slo-ttft (a bare 0 is
    none in any unit). Run budgets (--budget 60) stay bare seconds."""
    from roofline.units import parse_time_s

    if str(text).strip() in ("0", "0.0"):
        return 0.0
    return parse_time_s(text, field, unit_required=True)


def time_arg(flag):
    return number_arg(flag, strictly=False, maximum=1.0, parser=time_with_unit, seconds=True)


COUNT = dict(integer=True, maximum=COUNT_MAX)  # roofline.parameters' tokens, batch and context
PREFIXES = "; counts take SI or binary prefixes: 8k = 8,000, 8Ki = 8,192"  # --tokens 8k is not 8,192: said in --help


def grouped_count_arg(flag):
    """A COUNT that may be written with thousands separators (50,257 or 50_257: a GEMM's sizes)."""
    convert = number_arg(flag, **COUNT)

    def parse(text):
        return convert(str(text).replace(",", "").replace("_", ""))

    parse.__name__ = flag
    return parse


def declared_type(p):
    """The argparse type of a declared parameter (roofline.parameters, serving.parameters): its range, in
    its unit (a time with its unit)."""
    timed = dict(parser=time_with_unit, seconds=True) if p.unit == "s" else {}
    return number_arg(p.flag, minimum=p.minimum, strictly=p.strictly, maximum=p.maximum, integer=p.integer, **timed)


_DECLARED = object()


def add_declared(parser, name, default=_DECLARED, suffix: str = "", text: str | None = None, **extra) -> None:
    """The flag of the declared parameter ``name`` (a Param, or the name of one of roofline.parameters'
    VIEW_PARAMS and TENSOR_PARALLEL): its range as its type (a name: its choices, the default first; a
    ``type`` in ``extra`` checks the name instead), its declared default unless the command has its own
    ``default``, its help (the command's own ``text`` where it means more there; with ``suffix``);
    ``extra`` argparse's other keywords (a name's type)."""
    from roofline.parameters import VIEW_BY_NAME

    p = name if not isinstance(name, str) else VIEW_BY_NAME[name]
    default = p.flag_default if default is _DECLARED else default
    if p.switch:
        kind = {"action": "store_true"}
    elif p.choices and "type" not in extra:
        kind = {"choices": sorted(p.choices, key=lambda c: c != default)}  # as --help lists them: the default first
    elif p.many:  # a comma-separated list, each in the declared range
        from roofline.cli.count_lists import count_list

        kind = {"type": count_list(p.flag, maximum=p.maximum)}
    else:
        kind = {} if p.text else {"type": declared_type(p)}
    if p.metavar:
        kind["metavar"] = p.metavar
    parser.add_argument(p.flag, default=default, help=((p.cli_help() if text is None else text) + suffix) or None,
                        **{**kind, **extra})


def add_cost_flags(p, launch_default_note="the machine's preset", seed=True):
    """The cost model's flags (declared in roofline.parameters); ``seed`` False for a command that defaults
    to the bare roofline (e_c = e_m = 1: `roofline kernel`), so that its --help says so."""
    from roofline.parameters import CUDA_GRAPH, SEED_COST_MODEL as S

    e_c, e_m = ((f"{S['compute_efficiency']:.2f}, the workshop's cost model: e_c {S['compute_efficiency']:.2f}, e_m "
                 f"{S['memory_efficiency']:.2f}, launch {S['launch_overhead_s'] * 1e6:g} us on a GPU preset",
                 f"{S['memory_efficiency']:.2f}, the workshop's cost model") if seed
                else ("1: the bare roofline", "1: the bare roofline"))
    add_declared(p, "compute_efficiency", suffix=f" (default {e_c})")
    add_declared(p, "memory_efficiency", suffix=f" (default {e_m})")
    add_declared(p, "launch_overhead_s", suffix=f" (default: {launch_default_note})")
    add_declared(p, "overlap")
    add_declared(p, CUDA_GRAPH)


def cost_model_from_args(args, machine):
    from roofline.cost import seed_cost_model

    seed = seed_cost_model(launch_overhead_s=machine.launch_overhead_s)  # e_c 0.70, e_m 0.85 (the workshop's cost model)
    changes = {"overlap": args.overlap, "cuda_graph": args.cuda_graph}
    for flag, field in (("compute_efficiency", "compute_efficiency"), ("memory_efficiency", "memory_efficiency"),
                        ("launch_overhead", "launch_overhead_s")):
        if getattr(args, flag) is not None:
            changes[field] = getattr(args, flag)
    model = dataclasses.replace(seed, **changes)
    scaling, moe = getattr(args, "fp8_scaling", None), getattr(args, "moe_backend", None)
    if getattr(args, "kernels", None):  # an engine's measured kernels price the ops of their families
        from roofline.measured.model import MeasuredKernels

        return MeasuredKernels.for_machine(machine, args.kernels, **dataclasses.asdict(model),
                                           **({"fp8_scaling": scaling} if scaling else {}),
                                           **({"moe_backend": moe} if moe else {}))
    if scaling or moe:
        what = "--fp8-scaling picks the measured tables' fp8 rows (per-tensor or 128-blocks)" if scaling else \
            "--moe-backend picks the measured tables' MoE kernels"
        raise RooflineError(f"{what}: give --kernels ENGINE too", field="fp8_scaling" if scaling else "moe_backend",
                            also=("kernels",))
    return model


def calibrated_or_cost_model(args, machine):
    """A measured profile passed as --machine (from `roofline calibrate`) predicts with its
    calibrated model, unless efficiencies or a launch overhead are given on the command line;
    anything else uses the plain cost model from the flags."""
    explicit = [f for f in ("compute_efficiency", "memory_efficiency", "launch_overhead") if getattr(args, f, None) is not None]
    if str(args.machine).endswith(".toml") and not getattr(args, "kernels", None):  # --kernels: measured kernels price
        from roofline.measure.calibrated import calibrated_model_for

        model = calibrated_model_for(args.machine)
        if model is not None and explicit:  # the plate's model on the profile's peaks: said, not silently swapped
            notes = getattr(args, "cost_notes", None)
            if notes is not None:
                notes.append(f"{', '.join('--' + f.replace('_', '-') for f in explicit)} given: the plate's cost model "
                             "(e_c, e_m, launch on the profile's peaks and bandwidth) prices the ops, not the profile's "
                             "calibrated model (drop the flag for that)")
            model = None
        if model is not None and (getattr(args, "cuda_graph", False) or getattr(args, "overlap", 1.0) != 1.0):
            flag = "--cuda-graph" if getattr(args, "cuda_graph", False) else "--overlap"
            raise RooflineError(f"{flag} shapes the plate's cost model; {args.machine!r} is a calibrated profile, whose "
                                "model times each op as measured (eager calls, its own overlap): drop the flag, or give "
                                "--launch-overhead/--compute-efficiency to price with the plate's model on this machine",
                                field=flag[2:].replace("-", "_"))
        if model is not None:  # a step reads the whole model's weights: cold once they outgrow the cache
            from roofline.transformer import count_params
            from roofline.units import DTYPE_BYTES

            dtype = getattr(args, "dtype", None) or machine.default_dtype
            weights = count_params(getattr(args, "model", None) or "llama3-8b")["total"] * DTYPE_BYTES.get(dtype, 2.0)
            return model.for_forward(weights)
    return cost_model_from_args(args, machine)


def kernels_arg(text: str) -> str:
    """--kernels' type: ENGINE[@VERSION] checked (measured.tables.parse_kernels, without reading any
    table) and written as the tables name it: trtllm, trtllm@1.3.0rc20; or a calibration profile's
    path (measured.profile), read when the model is built."""
    from roofline.measured.profile import is_profile
    from roofline.measured.tables import parse_kernels

    if is_profile(text):
        return text.strip()

    try:
        engine, version = parse_kernels(text)
    except RooflineError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--kernels {text!r}").lstrip(": ")) from None
    return f"{engine}@{version}" if version else engine


def add_kernels_flag(p):
    """--kernels ENGINE[@VERSION]: the roofline[measured] extra's measured kernels (measured.model); --fp8-scaling and
    --moe-backend (declared in roofline.parameters)."""
    from roofline.parameters import FP8_SCALING, KERNELS, MOE_BACKEND

    add_declared(p, KERNELS, type=kernels_arg)
    add_declared(p, FP8_SCALING)
    add_declared(p, MOE_BACKEND)


def add_layer_flags(p):
    """`roofline layer`'s (and `plot`'s) workload flags, declared in roofline.parameters."""
    from roofline.parameters import LAYER_DTYPE, VIEW_ATTENTION

    add_machine_flags(p)
    add_declared(p, "model", type=MODEL_NAME)
    add_declared(p, "phase")
    add_declared(p, "tokens", suffix=PREFIXES)
    add_declared(p, "batch")
    add_declared(p, "context", suffix=PREFIXES)
    add_declared(p, "layer")
    add_declared(p, "attention", default=VIEW_ATTENTION["layer"])
    add_declared(p, LAYER_DTYPE, type=layer_dtype)
    add_cost_flags(p)




def name_arg(what: str, listing: str, many: bool = False):
    """--model's and --machine's type: the text as given, refused when it names nothing (empty, or
    with ``many`` an empty entry between commas, `--machine 'a,,b'`; trailing commas, `a,b,`, are
    dropped): Path('') is the working folder and '' split on commas is no machine, so an empty name
    silently took the default."""
    def convert(text: str) -> str:
        names = _listed(text) if many else [text]
        if not names or any(not n.strip() for n in names):
            where = ("" if len(names) <= 1 else
                     f" (entry {next(i for i, n in enumerate(names) if not n.strip()) + 1:,} of {len(names):,} is empty)")
            raise argparse.ArgumentTypeError(f"an empty {what} name {text!r}{where}; give a preset ({listing} lists them) "
                                             "or a file's path")
        return text

    convert.__name__ = what
    return convert


def _listed(text: str) -> list[str]:
    """A comma-separated list's entries, less trailing empty ones (`a,b,`)."""
    names = text.split(",")
    while names and not names[-1].strip():
        names.pop()
    return names


MODEL_NAME = name_arg("model", "`roofline models`")


def machine_names(text: str) -> list[str]:
    """The machines of a --machine A,B,C list (name_arg refused empty entries), stripped."""
    return [n.strip() for n in _listed(text)]


def add_machine_flags(p, default=_DECLARED):
    from roofline.parameters import BANDWIDTH_SCALE, COMPUTE_SCALE

    add_declared(p, "machine", default, type=name_arg("machine", "`roofline machines`", many=True))
    add_declared(p, COMPUTE_SCALE)
    add_declared(p, BANDWIDTH_SCALE)


def layer_dtype(text: str) -> str:
    """--dtype of `layer` and `kernel`: one of roofline.parameters.LAYER_DTYPE's choices, the dtypes the units
    know (argparse names the flag on a refusal)."""
    from roofline.parameters import LAYER_DTYPE

    if text not in LAYER_DTYPE.choices:
        raise argparse.ArgumentTypeError(f"{text!r} is not a dtype; known: {', '.join(sorted(LAYER_DTYPE.choices))}")
    return text


def machine_from_args(args, name=None):
    """The machine named by --machine (or ``name``), scaled by --compute-scale / --bandwidth-scale."""
    from roofline.machines import get_machine

    m = get_machine(name or args.machine)
    cs, bs = getattr(args, "compute_scale", 1.0), getattr(args, "bandwidth_scale", 1.0)
    if cs != 1.0 or bs != 1.0:
        import dataclasses

        key = m.key
        m = dataclasses.replace(m.scaled(compute=cs, bandwidth=bs), key=f"{key} x{cs:g} compute x{bs:g} bandwidth" if key else "")
    return m


def kernel_param(text):
    try:
        return parse_kernel_param(text)
    except RooflineError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


kernel_param.__name__ = "NAME=VALUE"


def kernel_params(pairs) -> dict:
    """NAME=VALUE pairs as keyword arguments; a name given twice is refused (not the last one taken)."""
    out = {}
    for key, value in pairs or []:
        if key in out:
            raise RooflineError(f"kernel parameter {key} is given twice ({out[key]!r} and {value!r})", field="param")
        out[key] = value
    return out


def parse_kernel_param(text):
    if "=" not in text:
        raise RooflineError(f"kernel parameter {text!r} must be NAME=VALUE, e.g. M=8192")
    key, value = text.split("=", 1)
    key = key.strip()
    if value.strip().lower() in ("true", "false"):
        return key, value.strip().lower() == "true"
    if key in ("name", "link", "dtype"):
        return key, value.strip()
    if key in ("bytes_per_elem", "bytes_per_param") and not value.replace(".", "", 1).isdigit():
        return key, value.strip()
    from roofline.errors import check_number
    from roofline.units import parse_number

    number = parse_number(value, key)
    check_number(key, number, minimum=0, strictly=False)
    return key, int(number) if float(number).is_integer() else number


def check_output(path: str, suffixes: tuple[str, ...]) -> str:
    """``path`` if -o/--output can be written there: the suffix is one of ``suffixes`` and the
    folder exists and is writable. Checked before anything is measured, so that a typo does not
    cost the measurement; a RooflineError naming the flag otherwise."""
    if not str(path).lower().endswith(suffixes):
        raise RooflineError(f"-o/--output must end in {' or '.join(suffixes)}, got {path!r}", field="output")
    p = Path(path)
    if p.name.startswith(".") and p.name.lower() in suffixes:  # matplotlib would write '.png.png'
        raise RooflineError(f"-o/--output {path!r} has no file name before its extension", field="output")
    if p.is_symlink():  # the link is kept and its target replaced: that folder must take the new file
        p = Path(os.path.realpath(p))
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise RooflineError(f"-o/--output {path!r} is a folder, not a file", field="output")
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise RooflineError(f"-o/--output {path!r}: {str(folder)!r} {why}", field="output")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RooflineError(f"-o/--output {path!r}: folder {str(folder)!r} is not writable", field="output")
    return path


def refuse_unused(args, unused: dict, why: str) -> None:
    """A RooflineError naming the first flag in ``unused`` (dest -> default) that was given a value
    other than its default: it would not change the result."""
    for dest, default in unused.items():
        if getattr(args, dest, default) != default:
            flag = "--" + dest.replace("_", "-")
            raise RooflineError(f"{flag} does not apply {why}", field=dest)


def print_csv_notes(notes) -> None:
    """A CSV's notes, kept off the CSV and never dropped: one line each on stderr ('note: ...'; a
    'left out:' line as it is)."""
    import sys

    from roofline.plan.render import note_line

    for n in notes:
        print(note_line(str(n)), file=sys.stderr)


def print_report(args, report) -> None:
    """A report as --json, --csv or its table (at most --limit rows; 0: all)."""
    import sys

    if args.json:
        print(report.to_json())
    elif getattr(args, "csv", False):
        sys.stdout.write(report.to_csv())
        print_csv_notes(getattr(report, "notes", ()))
    else:
        print(report.to_table(limit=args.limit or None))


def add_report_flags(p, what: str) -> None:
    """--limit, -o and --json | --csv of the commands that print a ranked report (profile, nsight)."""
    from roofline.tool_parameters import LIMIT

    add_declared(p, LIMIT)
    p.add_argument("-o", "--output", default=None, help=f"also draw the measured {what} on the roofline: FILE.png or .svg")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
