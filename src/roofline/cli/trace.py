"""`roofline trace` and `roofline profile` (docs/tracing.md; `gemm` and `diagnose` are in diagnose.py).

Nothing heavy at import: torch is imported when trace or profile runs, and its absence is one line
naming the extra to install (exit code 2). The model trace runs, and its inputs, are built by
trace_model.py.
"""

from __future__ import annotations

import dataclasses

import sys

from roofline.cli.args import (PREFIXES, add_cost_flags, add_declared, add_machine_flags, add_report_flags,
                               cost_model_from_args, grouped_count_arg, machine_from_args, print_csv_notes, print_report,
                               refuse_unused)
from roofline.cli.trace_model import build_model, data_dependent, first_line, is_factory, step_inputs
from roofline.errors import RooflineError
from roofline.tool_parameters import FORWARDS, TRACE_BATCH
from roofline.units import US


# ---------------------------------------------------------------------------------------------
# trace
# ---------------------------------------------------------------------------------------------


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(p) for p in str(text).replace("x", ",").split(",") if p.strip())
    except ValueError:
        dims = ()
    if not dims or min(dims) <= 0 or max(dims) > 1e9:
        import argparse

        raise argparse.ArgumentTypeError(f"must be positive sizes like 1,128, got {text!r}")
    return dims


_shape.__name__ = "--input-shape"


def _config_notes(args, dtype_given: bool) -> list[str]:
    """What a traced preset or config.json says beyond the builder's notes: weights traced at
    another width than the checkpoint stores, and a context past its max_position_embeddings."""
    from roofline.blocks import storage_note
    from roofline.transformer import get_model

    cfg = get_model(args.model)
    stored = storage_note(cfg, args.dtype, dtype_given, "traced")
    notes = [stored] if stored else []
    decode = (args.phase or "prefill") == "decode"
    past = cfg.context_note((args.context or 4096) + 1 if decode else (args.tokens or 128))
    if past:
        notes.append(past)
    return notes


def cmd_trace(args):
    from roofline.extras import require_torch

    torch = require_torch("roofline trace")
    machine = machine_from_args(args)
    dtype_given = args.dtype is not None
    model, result, factory = _traced(args, machine, torch)
    cost_model = _trace_cost_model(args, machine, result)
    pred = result.predict(machine, cost_model)
    notes = _trace_notes(args, model, factory, cost_model, dtype_given)
    if args.json:
        print(result.to_json(machine=machine.key or machine.name, weights_dtype=args.dtype,
                             phase=None if factory else (args.phase or "prefill"), predicted_s=pred.total_s,
                             roofline_s=result.predict(machine).total_s, notes=notes,
                             groups=result.group_rows(machine, args.by, cost_model)))
        return
    if args.csv:
        sys.stdout.write(result.to_csv(machine, cost_model))
        print_csv_notes(notes)
        return
    _print_trace(args, result, factory, machine, cost_model, pred, notes)


def _traced(args, machine, torch):
    """(model, TraceResult, factory) for ``trace``: the model built from args.model and run on the
    meta device at its inputs (a factory's --input-shape, else a step of --phase); sets args.dtype
    to the machine's where not given."""
    from roofline.trace.record import DTYPE_BY_NAME, trace

    if args.dtype is None:  # the machine's, as layer and plan take it (a CPU profile's fp32), else bf16
        args.dtype = machine.default_dtype if machine.default_dtype in DTYPE_BY_NAME else "bf16"
    for flag, name in (("--dtype", args.dtype), ("--input-dtype", args.input_dtype)):
        if name not in DTYPE_BY_NAME:
            raise RooflineError(f"argument {flag}: unknown dtype {name!r}; known: {', '.join(DTYPE_BY_NAME)}")
    factory = is_factory(args.model)
    if factory:
        refuse_unused(args, {"phase": None, "tokens": None, "batch": None, "context": None},
                      "to a PACKAGE.MODULE:FACTORY (its inputs are --input-shape)")
    else:
        refuse_unused(args, {"input_shape": None, "input_dtype": "int64"},
                      "to a preset or config.json (give --phase, --tokens, --batch, --context)")
    model = build_model(args.model)
    inputs = []
    if factory:
        for shape in args.input_shape or [(1, 128)]:
            dt = DTYPE_BY_NAME[args.input_dtype]
            inputs.append(torch.zeros(shape, dtype=dt, device="meta"))
    else:
        inputs = step_inputs(model, args, torch, DTYPE_BY_NAME[args.dtype])
    try:  # the inputs keep --input-dtype: the header says what ran
        result = trace(model, *inputs, dtype=DTYPE_BY_NAME[args.dtype], fused=not args.unfused, cast_inputs=False)
    except RooflineError:
        raise
    except Exception as exc:  # noqa: BLE001
        why = (" (data-dependent code, such as .item() or a shape read from values, cannot run on meta)"
               if data_dependent(exc) else "")
        raise RooflineError(f"running {args.model} on the meta device failed: {first_line(exc)}{why}",
                            field="model") from None
    return model, result, factory


def _trace_cost_model(args, machine, result):
    """The flags' cost model; a measured profile without explicit efficiencies predicts with its
    calibrated model, as layer does."""
    cost_model = cost_model_from_args(args, machine)
    explicit = any(getattr(args, f, None) is not None for f in ("compute_efficiency", "memory_efficiency", "launch_overhead"))
    if args.machine and not explicit:
        from roofline.measure.calibrated import calibrated_model_for

        calibrated = calibrated_model_for(args.machine)
        if calibrated is not None:  # the forward's weights are cold when what it moves outgrows the cache
            cost_model = calibrated.for_forward(result.total_bytes)
    return cost_model


def _trace_notes(args, model, factory: bool, cost_model, dtype_given: bool) -> list[str]:
    """What the builder assumed, what the prediction leaves out, and what the config implies."""
    notes = list(getattr(model, "notes", []))  # what the builder assumed (trace.models: MoE routing)
    if not factory and (args.phase or "prefill") == "prefill" and hasattr(model, "prefill_notes"):
        notes += model.prefill_notes(args.tokens or 128)  # trace.decoder: a window shorter than the prefill
    if getattr(cost_model, "calibration", None) is not None:
        gap = cost_model.calibration.framework_gap_s
        notes.append("the eager framework's time between ops (Python, module calls) is not in this prediction: "
                     + (f"calibrate measured {gap / US:.1f} us per gap between top-level ops, and `roofline profile` "
                        "of a recorded torch.profiler trace counts the gaps and adds that line"
                        if gap is not None else "this profile has no framework probe (calibrate again to measure one)"))
    if not factory:
        notes += _config_notes(args, dtype_given)
    return notes


def _print_trace(args, result, factory: bool, machine, cost_model, pred, notes: list[str]) -> None:
    """trace's text output: what ran, the totals, the op table, the prediction and the notes."""
    from roofline.units import format_bytes, format_si, format_time

    if factory:
        ins = ", ".join("x".join(map(str, s)) for s in result.inputs) + f" {args.input_dtype}"
    elif (args.phase or "prefill") == "prefill":
        ins = f"a prefill of {result.inputs[0][1]:,} tokens at batch {result.inputs[0][0]}"
    else:
        S = args.context or 4096
        windowed = any(shape[2] < S for shape in result.inputs[1:])  # trace.decoder: a sliding layer keeps its window
        ins = (f"one decode step at batch {result.inputs[0][0]} against a KV cache of {S:,} tokens "
               f"({len(result.inputs) - 1} cache tensors{', sliding layers keeping their window' if windowed else ''}, "
               "appended with cat as eager code does)")
    free = sum(1 for op in result.ops if op.bytes == 0)
    if result.fused:  # name the fused kernels the model has (a GPT-2 has attention and LayerNorm, no RMSNorm)
        kinds = [k for k, key in (("attention", "attention"), ("RMSNorm", "rms_norm"))
                 if any(key in op.name for op in result.ops)]
        fusion = f"fused {' and '.join(kinds)}" if kinds else "no attention or RMSNorm to fuse"
    else:
        fusion = "attention and RMSNorm unfused (the meta dispatcher's ops)"
    print(f"{result.model} ({args.model}): inputs {ins}, weights {args.dtype}, {fusion}")
    print(f"{len(result.ops):,} ops ({free:,} free views), {format_si(result.total_flops, 'FLOP')}, "
          f"{format_si(result.total_bytes, 'B')} moved ({format_bytes(result.total_bytes)}), "
          f"intensity {result.intensity:,.1f} FLOP/B\n")
    print(result.to_table(machine, by=args.by, model=cost_model))
    if getattr(cost_model, "calibration", None) is not None:
        print("range: the calibrated interval, summed over the calls; * some calls lie outside the measured points (their "
              "range widened); class: the probes that corrected them; which points each came from: --json "
              "(groups[].basis) or --csv")
    roof = result.predict(machine).total_s
    m = cost_model
    how = (f"by the {m.describe()}" if m.compute_efficiency is None else
           f"at e_c {m.compute_efficiency:g}, e_m {m.memory_efficiency:g}, launch {m.launch_overhead_s / US:.3g} us x "
           f"{len(pred.ops):,} kernels")
    print(f"\non {machine.name}: roofline {format_time(roof)}; predicted {format_time(pred.total_s)} {how}; "
          f"{pred.memory_bound_ops:,} memory-bound ops take {pred.memory_bound_share:.0%}")
    if result.unsupported:
        calls = dict(result.unsupported_calls)
        print("unsupported (no rule; not counted): " + ", ".join(f"{n} x{calls[n]}" for n in result.unsupported))
    else:
        print("unsupported: none (every op had a rule)")
    for note in notes:
        print(f"note: {note}")


# ---------------------------------------------------------------------------------------------
# profile
# ---------------------------------------------------------------------------------------------


def cmd_profile(args):
    from roofline.trace.profiler import profile_report

    from roofline.cli.measure import check_output, write_failed

    machine = machine_from_args(args)
    if args.output:
        check_output(args.output, (".png", ".svg"))
    from roofline.measure.calibrated import calibrated_model_for

    calibrated = calibrated_model_for(args.machine) if args.machine else None
    report = profile_report(args.trace, machine, calibrated, args.forwards)
    from roofline.measure.reference import moved_note

    moved = moved_note(calibrated.calibration if calibrated else None)  # the reference timed again here
    if moved:
        report = dataclasses.replace(report, notes=(moved, *report.notes))
    if not report.device and machine.sm_count is not None:  # CPU-timed ops against a GPU's roof: in every mode
        report = dataclasses.replace(report, notes=(
            f"this trace timed its ops on the CPU (no device kernels), and {machine.the_name}'s roofline is a GPU's: "
            "the % of speed of light and the advice compare unlike machines; give --machine a profile from `roofline "
            "calibrate` (this CPU) to compare like with like",) + tuple(report.notes))
    print_report(args, report)
    if args.output:
        from roofline.plots import plot_profile

        try:
            plot_profile(report, machine, args.output)
        except OSError as exc:
            raise write_failed(args.output, exc) from None
        from roofline.plots.measured import not_drawn

        left, left_s = not_drawn(report)
        print(f"wrote {args.output}" + (f" ({left} row{'s' if left != 1 else ''} with no FLOPs, bytes or time, "
                                        f"{left_s * 1e6:,.1f} us, not drawn)" if left else ""),
              file=sys.stderr if (args.json or args.csv) else sys.stdout)


# ---------------------------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------------------------


def register(sub):
    p = sub.add_parser("trace", help="trace a PyTorch model on the meta device: FLOPs and bytes per aten op",
                       description="Examples: roofline trace roofline.trace.models:llama2_7b --input-shape 1,128; "
                                   "roofline trace llama3-8b --phase decode --context 8192 --batch 8; "
                                   "roofline trace path/to/config.json --tokens 2048")
    p.add_argument("model", help="PACKAGE.MODULE:FACTORY (a zero-argument function returning an nn.Module), or a "
                                 "preset or config.json of an attention model (built on meta; docs/tracing.md lists the families)")
    # the views' sizes (roofline.parameters), in trace's words; its batch up to the largest planned
    add_declared(p, "phase", None, text="preset/config: a prefill of --tokens, or one decode step against a KV cache "
                 "of --context")
    add_declared(p, "tokens", text="prefill: new tokens per sequence, T (default 128)", suffix=PREFIXES)
    add_declared(p, TRACE_BATCH)
    add_declared(p, "context", text="decode: tokens in the KV cache, S (default 4096)", suffix=PREFIXES)
    p.add_argument("--input-shape", type=_shape, action="append", metavar="1,128",
                   help="shape of one input tensor (repeat for several inputs; default 1,128)")
    p.add_argument("--input-dtype", default="int64",
                   help="dtype of the inputs, kept as given (default int64: token ids; float inputs: usually --dtype's)")
    p.add_argument("--dtype", default=None, help="dtype of the weights and floating activations (default: the "
                   "machine's, bf16 on the GPU presets, a CPU profile's fp32)")
    p.add_argument("--unfused", action="store_true",
                   help="record what the meta dispatcher does for attention and RMSNorm instead of the fused GPU kernels")
    p.add_argument("--by", choices=("op", "module"), default="op", help="table rows: per op name or per module path")
    add_machine_flags(p)
    add_cost_flags(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="every op with its FLOPs and bytes")
    fmt.add_argument("--csv", action="store_true")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("profile", help="a torch.profiler trace against the roofline: bound, measured, time lost per op",
                       description="Reads a Chrome trace from torch.profiler with record_shapes=True.")
    p.add_argument("trace", help="TRACE.json written by prof.export_chrome_trace()")
    add_declared(p, FORWARDS, type=grouped_count_arg(FORWARDS.flag))
    add_machine_flags(p)
    add_report_flags(p, "ops")
    p.set_defaults(func=cmd_profile)
