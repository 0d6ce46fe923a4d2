"""Flags and argument types the planning commands share (decode, train, memory, sweep, serving):
model, precision, tensor parallelism, output format, count lists and ranges, and ``flagged``,
which turns a library error's ``field`` into the flag that set it.
"""

from __future__ import annotations

import argparse
import functools
import sys

from roofline.cli.args import COUNT, MODEL_NAME, add_deprecated_alias, number_arg
from roofline.errors import RooflineError


SWEEP_MACHINES = "h100-sxm,h200,b200,a100-80gb,mi300x,l40s"

# The library's parameter names (RooflineError.field) and the flags that set them.
FLAGS = {
    "tensor_parallel": "--tp", "pipeline_parallel": "--pp", "global_batch": "--global-batch", "micro_batch": "--micro-batch",
    "gpus": "--gpus", "gpus_per_node": "--gpus-per-node", "seq_len": "--seq-len", "mfu": "--mfu", "hfu": "--hfu",
    "peak_dtype": "--peak-dtype", "link": "--tp-link", "tp_link": "--tp-link", "dp_link": "--dp-link", "batch": "--batch",
    "context": "--context", "tokens": "--tokens", "model": "--model", "machine": "--machine",
    "memory_fraction": "--memory-fraction", "price_per_gpu_hour": "--price",
    # roofline serving
    "max_seqs": "--max-seqs", "max_tokens": "--max-tokens", "block_size": "--block-size", "prefix_hit": "--prefix-hit",
    "rate": "--rate", "concurrency": "--concurrency", "requests": "--requests", "input_len": "--input-len",
    "output_len": "--output-len", "slo_ttft": "--slo-ttft", "slo_tpot": "--slo-tpot", "percentile": "--percentile",
    "gpus_per_node": "--gpus-per-node", "target_rate": "--target-rate", "spec_tokens": "--spec-tokens",
    "acceptance": "--acceptance", "draft": "--draft", "disagg": "--disagg", "kv_link": "--kv-link",
    "prefill_replicas": "--disagg", "decode_replicas": "--disagg", "disagg_search": "--disagg-search",
    "replicas": "--disagg-search", "eager": "--eager", "expert_parallel": "--ep", "pipeline_stages": "--pp",
    "attention_tp": "--attention-dp",
    "mtp": "--mtp", "router": "--router", "first_token": "--first-token",
}


def _flags_for(args) -> dict:
    flags = dict(FLAGS)
    for part, flag in (("weights", "--weights"), ("activations", "--activations"), ("kv_cache", "--kv-cache")):
        flags[f"{part} dtype"] = flag if getattr(args, part, None) else "--dtype"
    if args.command == "decode":
        flags["tokens"] = "--context"  # the time to first token is a prefill of --context tokens
    if args.command == "sweep" and args.over != "machines":
        flags[args.over] = "--values"
    return flags


def flagged(command):
    """Run a command; a RooflineError naming a parameter is re-raised naming its flag: the leading
    parameter name becomes the flag ("tensor_parallel 3 must ..." -> "--tp 3 must ..."), or the
    flag is put in front."""

    @functools.wraps(command)
    def run(args):
        try:
            return command(args)
        except RooflineError as exc:
            field, text = exc.field, str(exc)
            flag = _flags_for(args).get(field)
            if flag:
                text = flag_text(args, field, text)
            elif not _values_too_large(args, text):
                raise
            if _values_too_large(args, text):
                text += f" (--values sets {args.over})"  # the swept size may be the one too large
            raise RooflineError(text, field=field) from None

    return run


def flag_text(args, field, text: str) -> str:
    """A library message naming a parameter, as the CLI names it: the leading parameter name becomes
    its flag ("tensor_parallel 3 must ..." -> "--tp 3 must ..."), or the flag is put in front."""
    flag = _flags_for(args).get(field)
    if flag and text.startswith(f"{field} "):
        return flag + text[len(field):]
    if flag and not text.startswith(flag):
        return f"{flag}: {text}"
    return text


def _values_too_large(args, text: str) -> bool:
    """A sweep's size limit hit by the size --values sets (the message names the size, not the flag)."""
    return (args.command == "sweep" and args.over in text and "--values" not in text
            and ("too large" in text or "at most" in text))


RANGE_MAX_COUNT = 10_000_000  # values one START:STOP:lin|log:COUNT range may ask for


def count_list(flag, maximum=COUNT["maximum"], ranges=False):
    """'1,2,4,1024' -> [1, 2, 4, 1024], each a whole number > 0 and at most ``maximum`` (named in the
    error). With ``ranges`` (sweep --values) an item may also be a range START:STOP:lin|log:COUNT (see
    count_range), and the whole value @FILE: the items of a file, one a line or comma-separated, a #
    starting a comment; an error names the range, or the file and line, it is in."""
    one = number_arg(flag, integer=True, maximum=maximum)

    def item(t):
        # the common case, a plain whole number (20,000 from a script), skips parse_number and numpy
        if len(t) < 16 and t.isascii() and t.isdigit() and 0 < int(t) <= maximum:
            return [int(t)]
        if ranges and ":" in t:
            return count_range(t, one)
        return [one(t)]

    def convert(text):
        text = str(text)
        if ranges and text.startswith("@"):
            return _values_file(text[1:], item)
        items = text.replace(" ", "").split(",")
        if items and items[-1] == "":
            items.pop()  # a trailing comma ("1,2,") is harmless; an empty item inside is a typo
        if not items or "" in items:
            raise argparse.ArgumentTypeError(
                ("empty item in " + repr(text) + ": " if items else "") + "expected a comma-separated list like 1,2,4"
                + (", a range like 1:1024:log:11 or @FILE" if ranges else ""))
        try:
            return [v for t in items for v in item(t)]
        except argparse.ArgumentTypeError:
            if ranges and _names_machines(items):  # `sweep --over machines --values h100-sxm,mi300x`
                raise argparse.ArgumentTypeError(f"{text!r} names machines, not sizes: a sweep over machines takes them "
                                                 f"as --machine {','.join(items)} (--values lists sizes: tokens, batch "
                                                 "or context)") from None
            raise

    convert.__name__ = flag
    return convert


def _names_machines(items) -> bool:
    """Whether every item is a machine preset's key (or a .toml file)."""
    from roofline.machines import list_machines

    keys = {m.key for m in list_machines()}
    return all(t.strip().lower() in keys or t.strip().endswith(".toml") for t in items)


def count_range(text: str, one) -> list[int]:
    """'START:STOP:lin|log:COUNT' -> COUNT values from START to STOP, both included, evenly spaced
    (lin) or in a geometric progression (log), each rounded half up to a whole number (the swept
    sizes are counts), the ends exactly START and STOP. Values that rounding makes equal (a log range
    over small numbers: 1:1024:log:100 starts 1.00, 1.07, ..., 2.16, six 1s and six 2s) are kept once, so
    a range can yield fewer than COUNT values (75 there). ``one`` checks START and STOP as the flag's single values."""
    import numpy as np

    parts = text.split(":")
    if len(parts) != 4:
        raise argparse.ArgumentTypeError(f"range {text!r} must be START:STOP:lin|log:COUNT, e.g. 1:131072:log:18")
    ends = []
    for name, part in zip(("start", "stop"), parts[:2]):
        try:
            ends.append(one(part))
        except argparse.ArgumentTypeError as exc:
            why = str(exc)
            raise argparse.ArgumentTypeError(f"range {text!r}: {name} {why}" if why.startswith("must ")
                                             else f"range {text!r}: {name}: {why}") from None
    spacing, count = parts[2], parts[3]
    if spacing not in ("lin", "log"):
        raise argparse.ArgumentTypeError(f"range {text!r}: spacing {spacing!r} must be lin or log")
    if not (count.isascii() and count.isdigit() and len(count) < 9 and 2 <= int(count) <= RANGE_MAX_COUNT):
        raise argparse.ArgumentTypeError(f"range {text!r}: count {count!r} must be a whole number from 2 to "
                                         f"{RANGE_MAX_COUNT:,}")
    start, stop = ends
    grid = (np.linspace if spacing == "lin" else np.geomspace)(start, stop, int(count))
    values = np.floor(grid + 0.5).astype(np.int64)
    values[0], values[-1] = start, stop
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = values[1:] != values[:-1]  # the values are monotonic: equal ones are neighbours
    return values[keep].tolist()


def _values_file(path: str, item) -> list[int]:
    """The values of ``path`` (``@path`` on the command line), each item as on the command line."""
    from pathlib import Path

    if not path:
        raise argparse.ArgumentTypeError("@ needs a file name, e.g. @values.txt")
    if not Path(path).is_file():
        why = "is not a file" if Path(path).exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"@{path}: {path!r} {why}")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"@{path}: cannot read {path!r} ({getattr(exc, 'strerror', None) or exc})") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for t in line.split("#", 1)[0].replace(",", " ").split():
            try:
                out.extend(item(t))
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"@{path} line {number}: {exc}") from None
    if not out:
        raise argparse.ArgumentTypeError(f"@{path} holds no values (one a line or comma-separated; # starts a comment)")
    return out


def checked_output(path):
    """-o checked before any work: None when not given; '' or an unwritable path is an error."""
    from roofline.cli.args import check_output

    return None if path is None else check_output(path, (".png", ".svg"))


def add_model(p):
    from roofline.cli.args import add_declared

    add_declared(p, "model", type=MODEL_NAME)


def add_precision(p):
    """--dtype, --weights, --activations and --kv-cache, declared in roofline.parameters."""
    from roofline.cli.args import add_declared
    from roofline.parameters import ACTIVATIONS, KV_CACHE, PLAN_DTYPE, WEIGHTS

    for param in (PLAN_DTYPE, WEIGHTS, ACTIVATIONS, KV_CACHE):
        add_declared(p, param)


def resolve_precision(args, machine):
    """--dtype on this machine (Precision.uniform), with --weights, --activations, --kv-cache over it;
    a quantised checkpoint's stored widths when neither --dtype nor --weights is given."""
    from roofline.plan.precision import Precision

    return Precision.resolve(getattr(args, "model", "llama3-8b"), machine, args.dtype, args.weights, args.activations,
                             args.kv_cache)


def add_tp(p):
    from roofline.cli.args import add_declared

    from roofline.parameters import GPUS_PER_NODE, TP_LINK

    add_declared(p, "tensor_parallel")  # roofline.parameters.TENSOR_PARALLEL: its range, default and help
    add_declared(p, TP_LINK)
    add_declared(p, GPUS_PER_NODE)
    add_deprecated_alias(p, "--link", "--tp-link")  # the old spelling: `train` spells it --tp-link


def add_format(p, csv=True):
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    if csv:
        fmt.add_argument("--csv", action="store_true")
    p.add_argument("-o", "--output", default=None, help="also draw the figure to FILE.png or FILE.svg")


def emit(args, result, draw=None):
    out = checked_output(args.output)
    if args.json:
        print(result.to_json())
    elif getattr(args, "csv", False):
        sys.stdout.write(result.to_csv())
    else:
        print(result.to_table())
    if out and draw:
        draw(out)
        print(f"wrote {out}", file=sys.stderr if (args.json or getattr(args, "csv", False)) else sys.stdout)
