"""`roofline serving`'s flags: each declared parameter (serving.parameters.SERVING_PARAMS) becomes its
flag with the declared range, default and help; the flags with a shape of their own (--sweep,
--acceptance, --disagg, --lengths, ...) are added here beside them, in --help's order.
"""

from __future__ import annotations

import argparse

from roofline.cli.args import add_cost_flags, add_declared, add_kernels_flag, add_machine_flags, declared_type, number_arg
from roofline.cli.plan_args import add_format, add_model, add_precision, add_tp
from roofline.errors import MAX_CONTEXT
from roofline.parameters import VIEW_ATTENTION
from roofline.serving.parameters import (ACCEPTANCE, BREAKDOWN, BY_NAME, DISAGG, DRAFT, EAGER, EP, FIRST_TOKEN, KV_LINK,
                                         LENGTHS, ROUTER, SWEEP, TP_SEARCH, Param)


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
    one = number_arg(DISAGG.flag, integer=True, maximum=DISAGG.maximum)  # each pool's replicas, in the declared range
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
    add_declared(parser, p, type=param_type(p))  # a length's type takes LO-HI too


def _lengths(p):
    add_declared(p, LENGTHS)


def _sweep(p):
    add_declared(p, SWEEP)


def _speculation(p):
    add_declared(p, ACCEPTANCE, type=acceptance_arg)
    add_declared(p, DRAFT)


def _parallel(p):
    add_declared(p, EP)
    add_declared(p, DISAGG, type=split_arg)
    add_declared(p, ROUTER)
    add_declared(p, FIRST_TOKEN)
    add_declared(p, TP_SEARCH)


def _run_flags(p):
    add_declared(p, KV_LINK)
    add_declared(p, "attention", VIEW_ATTENTION["serving"])
    add_declared(p, EAGER)


def _breakdown(p):
    add_declared(p, BREAKDOWN)


# --help's order: a declared parameter by its name, the others by the function that adds them
ORDER = ("input_len", "output_len", _lengths, "requests", "rate", "burstiness", "concurrency", _sweep, "slo_ttft",
         "slo_tpot", "percentile", "target_rate", "engine", "max_seqs", "max_tokens", "block_size", "memory_fraction",
         "step_overhead_s", "eager_op_s", "graph_tokens", "request_overhead_s", "batch_wait_steps", "batch_wait_ratio", "adp_timeout_steps", "adp_batching_steps", "recv_interval", "schedule_ahead", "prefix_hit", "spec_tokens", _speculation, "pipeline_parallel", _parallel, "attention_dp",
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
