"""`roofline serving`'s flags: each declared parameter (serving.parameters.SERVING_PARAMS) becomes its
flag with the declared range, default and help; the flags with a shape of their own (--sweep,
--acceptance, --disagg, --lengths, ...) are added here beside them, in --help's order.
"""

from __future__ import annotations

import argparse

from roofline.cli.args import add_cost_flags, add_declared, add_kernels_flag, add_machine_flags, declared_type, number_arg
from roofline.cli.plan_args import add_format, add_model, add_precision, add_tp, count_list
from roofline.errors import MAX_CONTEXT
from roofline.parameters import TENSOR_PARALLEL, VIEW_ATTENTION
from roofline.serving.parameters import ACCEPTANCE, BY_NAME, Param


def length_arg(flag, maximum=MAX_CONTEXT):
    """'1024' (every request) or '128-2048' (uniform, inclusive), whole numbers from 1 to ``maximum``."""
    one = number_arg(flag, integer=True, maximum=maximum)

    def convert(text):
        t = str(text).strip()
        if "-" in t[1:]:
            lo, _, hi = t.partition("-") if not t.startswith("-") else ("", "", "")
            a, b = one(lo), one(hi)
            if b < a:
                raise argparse.ArgumentTypeError(f"the range {t} runs backwards")
            return (a, b)
        return one(t)

    convert.__name__ = flag
    return convert


def split_arg(text):
    """'2:6' -> (2, 6): prefill and decode replicas, whole numbers >= 1."""
    one = number_arg("--disagg", integer=True, maximum=100_000)
    parts = str(text).split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected P:D (prefill and decode replicas, e.g. 1:3), got {text!r}")
    return one(parts[0]), one(parts[1])


def acceptance_arg(text):
    """--acceptance: one rate (a float) or a comma-separated rate per draft position (a tuple)."""
    one = declared_type(ACCEPTANCE)  # each rate in the declared range, as serving.Engine checks it
    parts = text.split(",")
    return one(text) if len(parts) == 1 else tuple(one(x.strip()) for x in parts)


def param_type(p: Param):
    """The argparse type of a declared parameter: its range, in its unit (a time with its unit)."""
    if p.text:
        return None
    if p.name in ("input_len", "output_len"):
        return length_arg(p.flag, p.maximum)
    return declared_type(p)


def add_param(parser, name: str) -> None:
    """The flag of the declared parameter ``name``."""
    p = BY_NAME[name]
    extra = {"metavar": p.metavar} if p.metavar else {}
    parser.add_argument(p.flag, type=param_type(p), default=p.flag_default, help=p.cli_help(), **extra)


def _lengths(p):
    p.add_argument("--lengths", default=None, metavar="FILE",
                   help="each request's input and output tokens from a file, a request a line ('input,output'; "
                        "a header line allowed): a dataset's measured lengths; --requests defaults to its lines")


def _sweep(p):
    p.add_argument("--sweep", type=count_list("--sweep", maximum=BY_NAME["concurrency"].maximum), default=None,
                   help="concurrencies to run, e.g. 1,4,16,64,256: the throughput-latency curve")


def _speculation(p):
    add_declared(p, ACCEPTANCE, type=acceptance_arg)
    p.add_argument("--draft", default=None, help="the draft model (a preset or config.json), on the same GPUs; or "
                                                 "'mtp': the model's own multi-token-prediction module (DeepSeek-V3)")


def _parallel(p):
    p.add_argument("--ep", action="store_true",
                   help="MoE: expert parallelism over the --tp GPUs with data-parallel attention (all-to-all dispatch "
                        "and combine) instead of tensor parallelism")
    p.add_argument("--disagg", type=split_arg, default=None, metavar="P:D",
                   help="prefill/decode disaggregation: P prefill and D decode replicas of --tp GPUs each (with --rate, "
                        "or --concurrency: a closed loop over both pools)")
    p.add_argument("--router", choices=("random", "round-robin"), default=None,
                   help="with --disagg: how requests spread over each pool's replicas (default random; round-robin is "
                        "Dynamo's default router)")
    p.add_argument("--first-token", choices=("prefill", "decode"), default=None,
                   help="with --disagg: the pool whose token the client sees first (default prefill; decode: tokens "
                        "stream from the decode pool, as Dynamo serves them, so TTFT takes in the KV transfer)")
    p.add_argument("--tp-search", type=count_list("--tp-search", maximum=TENSOR_PARALLEL.maximum), default=None, metavar="S1,S2,...",
                   help="with an SLO: the rate search at each replica size (--tp, or the --ep group), and with "
                        "--target-rate the size needing the fewest GPUs")


def _run_flags(p):
    p.add_argument("--kv-link", default=None,
                   help="link the KV cache crosses from prefill to decode (default: infiniband or roce, else the scale-up link)")
    add_declared(p, "attention", VIEW_ATTENTION["serving"])
    p.add_argument("--eager", action="store_true", help="no CUDA graph: every op of every step pays a launch")


def _breakdown(p):
    p.add_argument("--breakdown", action="store_true",
                   help="also print a decode step and a step with a prompt chunk of the run, op by op")


# --help's order: a declared parameter by its name, the others by the function that adds them
ORDER = ("input_len", "output_len", _lengths, "requests", "rate", "burstiness", "concurrency", _sweep, "slo_ttft",
         "slo_tpot", "percentile", "target_rate", "engine", "max_seqs", "max_tokens", "block_size", "memory_fraction",
         "step_overhead_s", "request_overhead_s", "prefix_hit", "spec_tokens", _speculation, "pipeline_parallel", _parallel, "attention_dp",
         "disagg_search",
         _run_flags, "price_per_gpu_hour", "seed", "seeds", _breakdown)


def register(sub, command):
    p = sub.add_parser("serving", help="a deployment under load: throughput, TTFT/TPOT percentiles, the SLO rate, "
                                       "cost per token (a simulated continuous-batching engine)")
    add_model(p)
    add_machine_flags(p)
    for step in ORDER:
        if isinstance(step, str):
            add_param(p, step)
        else:
            step(p)
    add_precision(p)
    add_tp(p)  # --tp, shared with the planning commands (its range and default: BY_NAME["tensor_parallel"], tested)
    add_cost_flags(p)
    add_kernels_flag(p)
    add_format(p)
    p.set_defaults(func=command)
    return p
