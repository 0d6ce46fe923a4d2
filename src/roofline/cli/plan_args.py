"""Flags and argument types the planning commands share (decode, train, memory, sweep, serving):
model, precision, tensor parallelism, output format, count lists and ranges, and ``flagged``,
which turns a library error's ``field`` into the flag that set it.
"""

from __future__ import annotations

import functools
import sys

from roofline.cli.args import MODEL_NAME, add_deprecated_alias
from roofline.cli.count_lists import count_list  # noqa: F401 (re-exported: the commands import it from here)
from roofline.errors import RooflineError

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
