"""`roofline serving`: a deployment under load (docs/serving.md), simulated step by step from the per-op
costs (roofline.plan.step, roofline.serving). Not `roofline serve`, the web server.

    roofline serving --model llama3-8b --machine h100-sxm --input-len 1024 --output-len 256 --concurrency 64
    roofline serving ... --rate 10 --requests 2000
    roofline serving ... --sweep 1,4,16,64,256 -o curve.png        # the throughput-latency curve
    roofline serving ... --slo-ttft 500ms --slo-tpot 30ms           # the highest rate within the targets

Its flags are made from the declarations of serving.parameters (cli/serving_args.py), the combinations
it cannot honour refused in cli/serving_checks.py, its extra tables drawn in cli/serving_tables.py.
"""

from __future__ import annotations

import dataclasses
import sys

from roofline.cli.args import cost_model_from_args, machine_from_args
from roofline.cli.plan_args import _flagged, _output, _precision
from roofline.cli.serving_args import register as _register
from roofline.cli.serving_checks import has_slo, refuse_combinations
from roofline.errors import RooflineError
from roofline.serving.parameters import (CONCURRENCY, DISAGG_SEARCH_REQUESTS, INPUT_LEN, OUTPUT_LEN, REQUESTS,
                                         engine_of)


PROGRESS_REQUESTS = 200_000  # a run of this many requests or more says how far it has got (stderr)
PROGRESS_SEARCH_REQUESTS = 4_000  # ... and a rate search of this many per run, each run it makes (~20 of them)


def register(sub):
    return _register(sub, _flagged(cmd_serving))


def _requests_progress(done: int, of: int) -> None:
    print(f"  simulated {done:,} of {of:,} requests", file=sys.stderr, flush=True)


def _engine(args, machine=None):
    """The Engine of the flags: --engine's defaults on the machine (serving.engines), or serving.Engine's own,
    with every flag given over them."""
    given = {"max_seqs": args.max_seqs, "max_tokens": args.max_tokens, "block_size": args.block_size,
             "memory_fraction": args.memory_fraction, "step_overhead_s": args.step_overhead}
    return engine_of(getattr(args, "engine", None), machine, **given, prefix_hit=args.prefix_hit,
                     spec_tokens=args.spec_tokens, acceptance=args.acceptance or 0.0)


def _engine_kernels(args, machine) -> None:
    """--engine without --kernels: the engine's measured kernels where the tables hold this GPU (and
    the extra is installed), said in a note; else the cost model, said too."""
    if not getattr(args, "engine", None) or args.kernels:
        return
    from roofline.measured.model import MeasuredKernels
    from roofline.serving.engines import preset

    kernels = preset(args.engine, machine).kernels
    try:
        MeasuredKernels.for_machine(machine, kernels)  # its own tables, or the nearest measured GPU's transferred
    except RooflineError as exc:
        if "version" in str(exc) or "measured versions" in str(exc):
            raise  # an engine version the tables lack: refused by name, as --kernels would be
        args.cost_notes = [*getattr(args, "cost_notes", []), f"--engine {args.engine}: no measured kernels ({exc}); the "
                           "plate's cost model prices the ops"]
        return
    args.kernels = kernels


def cmd_serving(args):
    try:
        return _cmd_serving(args)
    except RooflineError as exc:  # the lengths came from --lengths FILE: name it, not the flags it replaced
        if args.lengths is not None and exc.field in ("input_len", "output_len"):
            raise RooflineError(f"{exc} (a request of the lengths file {args.lengths!r})", field="lengths") from None
        raise


def _read_lengths(args) -> None:
    """--lengths FILE's lengths (and its requests, once each), else the flags' or the declared defaults."""
    if args.lengths is not None:
        from roofline.serving.requests import read_lengths

        args.input_len, args.output_len = read_lengths(args.lengths)
        if args.requests is None:
            args.requests = len(args.input_len)  # the file's requests, once each
    args.input_len = INPUT_LEN if args.input_len is None else args.input_len
    args.output_len = OUTPUT_LEN if args.output_len is None else args.output_len


def _cmd_serving(args):
    out = _output(args.output)
    refuse_combinations(args)
    _read_lengths(args)
    m = machine_from_args(args)
    _engine_kernels(args, m)
    cm = dataclasses.replace(cost_model_from_args(args, m), cuda_graph=not args.eager)
    engine = _engine(args, m)
    precision = _precision(args, m)
    burstiness = 1.0 if args.burstiness is None else args.burstiness
    if args.tp_search is not None:
        return _tp_search(args, m, cm, engine, precision, burstiness)
    step, draft = _steps(args, m, cm, engine, precision)
    if args.disagg_search is not None:
        return _disagg_search(args, step, engine, burstiness)
    result = _simulate(args, step, draft, engine, burstiness)
    _print_result(args, out, step, result, engine, draft)


def _steps(args, m, cm, engine, precision):
    """The target's StepCost and the draft's (None without speculative decoding)."""
    from roofline.plan.step import StepCost

    step = StepCost(args.model, m, precision, args.tp, args.tp_link, cm, args.attention, engine.step_tokens,
                    engine.max_seqs, args.gpus_per_node, engine.spec_tokens + 1, args.ep, args.pp)
    if args.draft is None:
        return step, None
    from roofline.plan.step_mtp import MTP_DRAFT, MtpStepCost

    try:  # the target's own MTP module runs with the target's expert parallelism; a draft model tensor-parallel
        draft = (MtpStepCost(args.model, m, precision, args.tp, args.tp_link, cm, args.attention, engine.step_tokens,
                             engine.max_seqs, args.gpus_per_node, 1, args.ep) if args.draft == MTP_DRAFT else
                 StepCost(args.draft, m, precision, args.tp, args.tp_link, cm, args.attention, engine.step_tokens,
                          engine.max_seqs, args.gpus_per_node))
    except RooflineError as exc:  # the draft's model is --draft's, not --model's
        raise RooflineError(str(exc), field="draft" if exc.field == "model" else exc.field) from None
    return step, draft


def _disagg_search(args, step, engine, burstiness):
    """--disagg-search G: the best split of G replicas into prefill and decode pools."""
    from roofline.cli.serving_tables import split_table
    from roofline.serving.disagg import best_disaggregation

    found = best_disaggregation(step, args.disagg_search, args.input_len, args.output_len, args.slo_ttft, args.slo_tpot,
                                args.percentile, engine, args.requests or DISAGG_SEARCH_REQUESTS, args.seed, args.kv_link,
                                args.price, burstiness, progress=lambda done, of, rate: print(
                                    f"  split {done}:{of + 1 - done} searched ({done} of {of})", file=sys.stderr,
                                    flush=True))
    if args.json:
        from roofline.serving.results import step_settings
        from roofline.tables import dump_json

        print(dump_json({"description": step.describe(), **step_settings(step), **found}))
    else:
        print(split_table(step, found))


def _simulate(args, step, draft, engine, burstiness):
    """The run the flags ask for: --disagg's pools, --sweep's curve, the SLO rate search, or one run."""
    from roofline.serving.search import max_rate_within, sweep_concurrency

    if args.disagg is not None:
        from roofline.serving.disagg import simulate_disaggregated
        from roofline.serving.requests import poisson_requests

        reqs = poisson_requests(args.rate, args.requests or REQUESTS, args.input_len, args.output_len, args.seed, burstiness)
        return simulate_disaggregated(step, step, reqs, engine, engine, args.disagg[0], args.disagg[1], args.kv_link,
                                      args.seed, args.price)
    if args.sweep:
        return sweep_concurrency(step, args.sweep, args.input_len, args.output_len, engine, args.requests, args.seed,
                                 args.price, args.slo_ttft, args.slo_tpot, args.percentile, draft)
    n = args.requests or REQUESTS
    if has_slo(args):
        return max_rate_within(step, args.input_len, args.output_len, args.slo_ttft, args.slo_tpot, args.percentile, engine,
                               n, args.seed, args.price, args.target_rate, draft, burstiness,
                               progress=(lambda runs, rate: print(f"  run {runs}: {rate:,.4g} requests/s", file=sys.stderr,
                                                                  flush=True)) if n >= PROGRESS_SEARCH_REQUESTS else None)
    return _single_run(args, step, draft, engine, burstiness, n)


def _single_run(args, step, draft, engine, burstiness, n):
    """One run (--rate or --concurrency) of n requests, and its spread over --seeds."""
    from roofline.serving.requests import closed_requests, poisson_requests
    from roofline.serving.scheduler import simulate

    def make(seed):
        return (poisson_requests(args.rate, n, args.input_len, args.output_len, seed, burstiness)
                if args.rate is not None else
                closed_requests(args.concurrency or CONCURRENCY, n, args.input_len, args.output_len, seed))

    result = simulate(step, make(args.seed), engine, args.price, draft=draft,
                      progress=_requests_progress if n >= PROGRESS_REQUESTS else None)
    seeds = 3 if args.seeds is None else args.seeds
    spread = None
    if seeds > 1 and not result.overloaded:  # an overloaded run's latencies grow with --requests, not by seed
        from roofline.serving.search import seed_spread, spread_note, spread_seeds

        chosen = spread_seeds(args.seed, seeds)

        def rerun(seed):
            if n >= PROGRESS_REQUESTS:
                print(f"  seed {seed} ({chosen.index(seed) + 1} of {seeds}): the spread", file=sys.stderr, flush=True)
            return simulate(step, make(seed), engine, args.price, draft=draft)

        spread = seed_spread(result, rerun, chosen)
        if spread is not None:  # what the seeds draw: arrivals at a rate, lengths from a range (a file's are fixed)
            ranged = isinstance(args.input_len, tuple) or isinstance(args.output_len, tuple)
            drawn = ("arrivals and lengths" if ranged else "arrivals") if args.rate is not None else "lengths"
            result = dataclasses.replace(result, notes=tuple(result.notes) + (spread_note(spread, drawn),))
        elif args.seeds is not None:
            result = dataclasses.replace(result, notes=tuple(result.notes) + (
                f"--seeds {seeds}: this run draws nothing at random (a closed loop of fixed lengths), so every seed "
                "gives the same run: no spread",))
    return dataclasses.replace(result, settings={**result.settings, "seed_spread": spread})


def _print_result(args, out, step, result, engine, draft) -> None:
    """The run as a table (with --breakdown's steps), JSON or CSV, and -o's curve."""
    from roofline.cli.serving_tables import breakdown, breakdown_table

    steps = breakdown(step, result, engine, args, draft) if args.breakdown else None
    if args.json:
        from roofline.tables import dump_json

        d = result.to_dict()
        if steps is not None:
            d["breakdown"] = steps
        print(dump_json(d))
    elif args.csv:
        from roofline.cli.args import print_csv_notes

        sys.stdout.write(result.to_csv())
        print_csv_notes(result.to_dict()["notes"])
    else:
        print(result.to_table())
        if steps is not None:
            print("\n" + breakdown_table(steps))
    if out:
        from roofline.plots import plot_serving

        plot_serving(result, out)
        print(f"wrote {out}", file=sys.stderr if (args.json or args.csv) else sys.stdout)


def _tp_search(args, m, cm, engine, precision, burstiness):
    """--tp-search: the SLO rate of a replica of each size, and the replicas and GPUs for --target-rate."""
    from roofline.cli.serving_tables import tp_search_table
    from roofline.plan.step import StepCost
    from roofline.serving.search import best_parallelism

    def make(size):
        return StepCost(args.model, m, precision, size, args.tp_link, cm, args.attention, engine.step_tokens,
                        engine.max_seqs, args.gpus_per_node, 1, args.ep)

    found = best_parallelism(make, args.tp_search, args.input_len, args.output_len, args.slo_ttft, args.slo_tpot,
                             args.percentile, engine, args.requests or REQUESTS, args.seed, args.price, args.target_rate,
                             burstiness, progress=lambda done, of, rate: print(
                                 f"  size {args.tp_search[done - 1]} searched ({done} of {of})", file=sys.stderr, flush=True))
    if args.json:
        from roofline.tables import dump_json

        print(dump_json({"model": args.model, "machine": m.key or m.name, "precision": precision.to_dict(),
                         "expert_parallel": bool(args.ep), "engine": dataclasses.asdict(engine), **found}))
    else:
        print(tp_search_table(args, m, cm, precision, burstiness, found))
