"""`roofline decode`, `train`, `memory` and `sweep`: inference and training plans (docs/planning.md).

Human tables by default, --json (and --csv where rows make sense) for tools, -o FILE.png|.svg for
figures. Bad input is one line naming the flag and the value, exit code 2 (cli.main): the
library's errors name its parameter (``field``), which ``flagged`` turns into the flag.

Their shared flags are in plan_args.py.
"""

from __future__ import annotations

import argparse

from roofline.cli.args import (PREFIXES, add_cost_flags, add_declared, add_kernels_flag, add_machine_flags, calibrated_or_cost_model, machine_from_args,
                               machine_names, refuse_unused)
from roofline.cli.plan_args import (add_format, add_model, add_precision, add_tp,
                                    checked_output, count_list, emit, flagged, resolve_precision)
from roofline.errors import RooflineError
from roofline.parameters import (DECODE_BATCHES, DECODE_BREAKDOWN, DP_LINK, FLOPS_CONVENTION, GLOBAL_BATCH, GPUS, HFU,
                                 MEMORY_FRACTION, MEMORY_MODE, MFU, MICRO_BATCH, MTP, NO_SEQUENCE_PARALLEL, PEAK_DTYPE,
                                 PLAN_ATTENTION, PRICE, RECOMPUTE, SEQ_LEN, SWEEP_MACHINES, SWEEP_OVER, SWEEP_PHASE,
                                 SWEEP_VALUES, TP_LINK, TRAIN_GPUS_PER_NODE, TRAIN_PIPELINE_PARALLEL, TRAIN_TOKENS, ZERO)
from roofline.tables import dump_json


def cmd_decode(args):
    from roofline.plan.decode import decode_plan
    from roofline.plan.decode import DEFAULT_BATCHES
    from roofline.plan.inference import decode_step

    if args.tp == 1:
        refuse_unused(args, {"tp_link": None, "gpus_per_node": 8}, "with --tp 1 (one GPU: no tensor-parallel collectives); give --tp N")
    checked_output(args.output)
    if args.breakdown and args.csv:
        raise RooflineError("--breakdown is a table of ops, not rows of the batch table: use it without --csv "
                            "(with --json it is the \"breakdown\" key)", field="breakdown")
    m = machine_from_args(args)
    cm = calibrated_or_cost_model(args, m)
    precision = resolve_precision(args, m)
    if hasattr(cm, "scaled_for"):  # measured kernels: the fp8 rows as the checkpoint scales its weights
        from roofline.serving.engines import engine_precision

        precision = engine_precision(precision, getattr(args, "kernels", None), m)  # the engine's MoE activations
        cm = cm.scaled_for(precision, getattr(args, "fp8_scaling", None))
    plan = decode_plan(args.model, m, args.batch or DEFAULT_BATCHES, args.context, args.attention, precision, args.tp,
                       args.tp_link, cm, args.memory_fraction, curve="log" if args.output else "none",
                       gpus_per_node=args.gpus_per_node)
    step = None
    if args.breakdown:
        step = decode_step(args.model, m, args.breakdown, args.context, attention=args.attention, precision=precision,
                           tensor_parallel=args.tp, link=args.tp_link, cost_model=cm, gpus_per_node=args.gpus_per_node)
        if not args.json:
            from roofline.measured.model import measured_notes

            print(f"one decode step at batch {args.breakdown:,}, op by op (each op times its count over the layers):\n")
            print(step.to_table() + "\n")
            for line in measured_notes(step.prediction.ops):
                print(f"note: {line}")

    def draw(path):
        from roofline.plots import plot_decode

        plot_decode(plan, path)

    kernel_notes: tuple = ()
    if cm.priced_by() if hasattr(cm, "priced_by") else "":  # measured kernels: what they left to the cost model
        from roofline.measured.model import measured_notes

        at = step if step is not None else decode_step(args.model, m, int(plan.batches[-1]), args.context,
                                                       attention=args.attention, precision=precision,
                                                       tensor_parallel=args.tp, link=args.tp_link, cost_model=cm,
                                                       gpus_per_node=args.gpus_per_node)
        kernel_notes = measured_notes(at.prediction.ops)
    emit(args, _DecodeOutput(plan, step if args.json else None, cm, kernel_notes), draw)
    if not args.json and not args.csv and step is None:  # under --breakdown they follow its table
        for line in kernel_notes:
            print(f"note: {line}")


class _DecodeOutput:
    """A decode plan whose JSON also carries the --breakdown step op by op under "breakdown" and, on
    measured kernels, which priced it ("kernels", "priced_by") and what they left ("kernel_notes")."""

    def __init__(self, plan, step, cost_model, kernel_notes):
        self.plan, self.step, self.cost_model, self.kernel_notes = plan, step, cost_model, kernel_notes

    def to_table(self) -> str:
        return self.plan.to_table()

    def to_csv(self) -> str:
        return self.plan.to_csv()

    def to_json(self) -> str:
        extra = {"breakdown": self.step.to_dict()} if self.step is not None else {}
        if getattr(self.cost_model, "kernels", None):
            extra.update(kernels=self.cost_model.kernels, priced_by=self.cost_model.priced_by(),
                         kernel_notes=list(self.kernel_notes))
        return dump_json({**self.plan.to_dict(), **extra})


def cmd_train(args):
    from roofline.plan.training import train_plan

    if args.tp == 1:  # no tensor-parallel group: nothing for these to shape
        refuse_unused(args, {"tp_link": None, "no_sequence_parallel": False},
                      "with --tp 1 (no tensor-parallel collectives); give --tp N")
    checked_output(args.output)
    m = machine_from_args(args)
    plan = train_plan(args.model, args.tokens, args.gpus, m, args.mfu, args.hfu, args.seq_len, args.recompute, args.flops,
                      args.peak_dtype, args.price, args.tp, args.pp, args.zero, args.micro_batch, args.global_batch,
                      not args.no_sequence_parallel, args.attention, args.tp_link, args.dp_link, args.gpus_per_node)

    def draw(path):
        from roofline.plots import plot_train

        plot_train(plan, _zero_options(args, m), path)

    emit(args, plan, draw)


def _zero_options(args, m):
    """Memory per GPU under each ZeRO stage, without and with full recompute, for the figure."""
    from roofline.plan.train_memory import make_layout, train_memory

    out = []
    for rc in dict.fromkeys((args.recompute, "full")):
        for zero in range(4):
            lay = make_layout(args.gpus, args.tp, args.pp, zero, args.micro_batch, args.seq_len, args.global_batch,
                              not args.no_sequence_parallel)
            label = f"ZeRO {zero}, {'no' if rc == 'none' else rc} recompute"
            label += "  (this plan)" if (zero, rc) == (args.zero, args.recompute) else ""
            out.append((label, train_memory(args.model, m, lay, args.seq_len, rc, args.attention)))
    return out


# Flags of `memory` that only one mode reads, with their defaults: given with the other mode they
# would be silently ignored, so they are refused by name instead.
MEMORY_TRAIN_ONLY = {"gpus": GPUS.default, "pp": TRAIN_PIPELINE_PARALLEL.default, "zero": ZERO.default,
                     "micro_batch": MICRO_BATCH.default, "global_batch": GLOBAL_BATCH.default, "seq_len": SEQ_LEN.default,
                     "recompute": RECOMPUTE.default, "attention": PLAN_ATTENTION}
MEMORY_INFERENCE_ONLY = {"batch": 1, "context": 8192, "memory_fraction": MEMORY_FRACTION.default, "dtype": None,
                         "weights": None, "activations": None, "kv_cache": None, "mtp": MTP.default}


def cmd_memory(args):
    checked_output(args.output)
    m = machine_from_args(args)
    if args.mode == "train":
        from roofline.plan.train_memory import make_layout, train_memory

        lay = make_layout(args.gpus, args.tp, args.pp, args.zero, args.micro_batch, args.seq_len, args.global_batch, True)
        plan = train_memory(args.model, m, lay, args.seq_len, args.recompute, args.attention)
        options = lambda: _zero_options(_train_like(args), m)  # noqa: E731
    else:
        from roofline.plan.memory import inference_memory

        plan = inference_memory(args.model, m, args.batch, args.context, resolve_precision(args, m), args.tp, args.memory_fraction,
                                args.mtp)
        options = lambda: _batch_options(args, m, plan)  # noqa: E731

    def draw(path):
        from roofline.plots import plot_memory

        from roofline.plan.render import model_name

        if args.mode == "train":
            g = dict(plan.settings)
            what = (f"training (data {g['data_parallel']} x tensor {g['tensor_parallel']} x pipeline {g['pipeline_parallel']}, "
                    f"sequence {args.seq_len:,})")
        else:
            what = f"inference at context {args.context:,}"
        plot_memory(options(), path, f"{model_name(plan.model)} {what}: memory per GPU on {m.name}")

    emit(args, plan, draw)


def _train_like(args):
    ns = argparse.Namespace(**vars(args))
    ns.no_sequence_parallel = False
    return ns


def _batch_options(args, m, plan):
    from roofline.plan.memory import inference_memory

    limit = dict(plan.limits).get("max_batch_at_context") or 1
    batches = sorted({args.batch, *(2**i for i in range(0, 11) if 2**i <= max(2 * limit, 8))})
    return [(f"batch {b:,}", inference_memory(args.model, m, b, args.context, resolve_precision(args, m), args.tp, args.memory_fraction))
            for b in batches]


def cmd_sweep(args):
    from roofline.plan.sweep import sweep

    if args.over == "machines":
        refuse_unused(args, {"values": None}, "to --over machines (the machines are --machine A,B,...)")
    default = {"batch": 1, "tokens": 4096, "context": 4096}.get(args.over)
    if default is not None and getattr(args, args.over) != default:  # the swept size comes from --values
        raise RooflineError(f"--{args.over} does not apply to --over {args.over}: the swept {args.over} values are "
                            "--values", field=None)
    phase = args.phase or ("prefill" if args.over == "tokens" else "decode")
    if phase == "prefill" and args.over != "context":  # a prefill attends over its own tokens
        refuse_unused(args, {"context": 4096}, "to a prefill sweep (it attends over its own tokens)")
    if phase == "decode" and args.over != "tokens":  # a decode step makes one token against --context
        refuse_unused(args, {"tokens": 4096}, "to a decode sweep (one new token per step; set --context)")
    checked_output(args.output)
    names = machine_names(args.machine if args.machine is not None else
                          SWEEP_MACHINES if args.over == "machines" else "h100-sxm")
    machines = [machine_from_args(args, n) for n in names]
    result = sweep(args.model, machines, args.over, args.values, args.phase, args.tokens, args.batch, args.context,
                   args.attention, lambda mach: resolve_precision(args, mach), args.tp, args.tp_link,
                   lambda mach: calibrated_or_cost_model(args, mach), args.gpus_per_node)

    def draw(path):
        from roofline.plots import plot_sweep

        plot_sweep(result, path)

    emit(args, result, draw)


# ---------------------------------------------------------------------------------------------


def register(sub):
    _register_decode(sub)
    _register_train(sub)
    _register_memory(sub)
    _register_sweep(sub)


def _register_decode(sub):
    p = sub.add_parser("decode", help="decode latency and throughput versus batch; compute-bound batch; what fits")
    add_model(p)
    add_machine_flags(p)
    add_declared(p, "context", 4096, PREFIXES, "tokens in each sequence's KV cache, S")  # roofline.parameters' range
    add_declared(p, DECODE_BATCHES)
    add_declared(p, "attention", PLAN_ATTENTION)
    add_precision(p)
    add_tp(p)
    add_declared(p, MEMORY_FRACTION)
    add_declared(p, DECODE_BREAKDOWN)
    add_cost_flags(p)
    add_kernels_flag(p)
    add_format(p)
    p.set_defaults(func=flagged(cmd_decode))


def _register_train(sub):
    p = sub.add_parser("train", help="training FLOPs, days, GPU-hours, cost, MFU/HFU, memory per GPU, collectives")
    add_model(p)
    add_machine_flags(p)
    add_declared(p, TRAIN_TOKENS, suffix=PREFIXES, required=True)
    add_declared(p, GPUS, required=True)
    util = p.add_mutually_exclusive_group()
    add_declared(util, MFU)
    add_declared(util, HFU)
    add_declared(p, FLOPS_CONVENTION)
    add_declared(p, RECOMPUTE)
    add_declared(p, SEQ_LEN)
    add_declared(p, "tensor_parallel", text="tensor parallel")
    add_declared(p, TRAIN_PIPELINE_PARALLEL)
    add_declared(p, ZERO, type=int, choices=ZERO.choices)  # a stage is a number: int, then its choices
    add_declared(p, MICRO_BATCH)
    add_declared(p, GLOBAL_BATCH)
    add_declared(p, PRICE)
    add_declared(p, PEAK_DTYPE)
    add_declared(p, "attention", PLAN_ATTENTION, text="naive stores the s x s scores")
    add_declared(p, NO_SEQUENCE_PARALLEL)
    add_declared(p, TP_LINK, text="tensor-parallel link (default: the machine's nvlink, else xgmi, ici, roce, pcie)")
    add_declared(p, DP_LINK)
    add_declared(p, TRAIN_GPUS_PER_NODE)
    add_format(p, csv=False)
    p.set_defaults(func=flagged(cmd_train))


def _register_memory(sub):
    p = sub.add_parser("memory", help="memory per GPU: weights + KV cache (inference) or training states + activations")
    add_model(p)
    add_machine_flags(p)
    add_declared(p, MEMORY_MODE)
    add_declared(p, "batch", text="inference: sequences")
    add_declared(p, "context", 8192, PREFIXES, "inference: tokens in each sequence's KV cache, S")
    add_precision(p)
    add_declared(p, "tensor_parallel", text="tensor parallel")
    add_declared(p, MEMORY_FRACTION, text="inference: the share of the memory an engine uses (default: vLLM's 0.9, as "
                 "`serving`)")
    add_declared(p, MTP)
    add_declared(p, GPUS, text="train: GPUs (default tp x pp)")
    add_declared(p, TRAIN_PIPELINE_PARALLEL, text="train: pipeline parallel")
    add_declared(p, ZERO, type=int, choices=ZERO.choices, text="train: ZeRO stage")
    add_declared(p, MICRO_BATCH, text="train: sequences")
    add_declared(p, GLOBAL_BATCH, suffix="; with --pp it sets the micro-batches in flight", text="train: " + GLOBAL_BATCH.help)
    add_declared(p, SEQ_LEN, text="train: " + SEQ_LEN.help)
    add_declared(p, RECOMPUTE, text="train")
    add_declared(p, "attention", PLAN_ATTENTION, text="train: naive stores the scores")
    add_format(p)
    p.set_defaults(func=flagged(_memory_entry))


def _register_sweep(sub):
    p = sub.add_parser("sweep", help="sweep tokens, batch, context or machines (vectorised); table, CSV, JSON, plot")
    add_model(p)
    add_machine_flags(p, default=None)
    add_declared(p, SWEEP_OVER, required=True)
    add_declared(p, SWEEP_VALUES, type=count_list(SWEEP_VALUES.flag, SWEEP_VALUES.maximum, ranges=True))  # and ranges
    add_declared(p, SWEEP_PHASE)
    add_declared(p, "tokens", 4096, PREFIXES, "prefill: new tokens per sequence, T, when not swept")
    add_declared(p, "batch", text="batch when not swept")
    add_declared(p, "context", 4096, PREFIXES, "decode: tokens in the KV cache, S, when not swept")
    add_declared(p, "attention", PLAN_ATTENTION)
    add_precision(p)
    add_tp(p)
    add_cost_flags(p)
    add_kernels_flag(p)
    add_format(p)
    p.set_defaults(func=flagged(cmd_sweep))


def _memory_entry(args):
    if args.mode == "train":
        refuse_unused(args, MEMORY_INFERENCE_ONLY, "to --mode train (it sizes inference: weights + KV cache)")
    else:
        refuse_unused(args, MEMORY_TRAIN_ONLY, "to --mode inference (it sizes training; add --mode train)")
    if args.gpus is None:
        args.gpus = args.tp * args.pp
    cmd_memory(args)
