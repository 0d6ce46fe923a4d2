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

from roofline.cli import serving_args
from roofline.cli.args import cost_model_from_args, machine_from_args
from roofline.cli.plan_args import checked_output, flag_text, flagged, resolve_precision
from roofline.cli.serving_checks import ServingRequest
from roofline.errors import RooflineError
from roofline.serving.parameters import CONCURRENCY, DISAGG_SEARCH_REQUESTS, FIRST_TOKEN, REQUESTS, ROUTER, engine_of
from roofline.units import format_number


PROGRESS_REQUESTS = 200_000  # a run of this many requests or more says how far it has got (stderr)
PROGRESS_SEARCH_REQUESTS = 4_000  # ... and a rate search of this many per run, each run it makes (~20 of them)


def register(sub):
    return serving_args.register(sub, flagged(cmd_serving))


def _requests_progress(done: int, of: int) -> None:
    print(f"  simulated {done:,} of {of:,} requests", file=sys.stderr, flush=True)


def _engine(args, machine=None, req=None):
    """The Engine of the flags: --engine's defaults on the machine for the request's layout (serving.engines;
    SGLang sizes its memory share from it), or serving.Engine's own, with every flag given over them."""
    given = {"max_seqs": args.max_seqs, "max_tokens": args.max_tokens, "block_size": args.block_size,
             "memory_fraction": args.memory_fraction, "step_overhead_s": args.step_overhead,
             "eager_op_s": args.eager_op, "graph_tokens": args.graph_tokens,
             "request_overhead_s": args.request_overhead, "batch_wait_steps": args.batch_wait_steps,
             "batch_wait_ratio": args.batch_wait_ratio, "recv_interval": args.recv_interval,
             "adp_timeout_steps": args.adp_timeout_steps, "adp_batching_steps": args.adp_batching_steps,
             "schedule_ahead": args.schedule_ahead}
    from roofline.plan.step_mtp import MTP_DRAFT

    layout = None if req is None else {"tensor_parallel": req.tp, "pipeline_stages": req.pp,
                                       "attention_dp": req.tp // req.attention_tp() if req.ep else 1,
                                       "draft_model": req.draft not in (None, MTP_DRAFT)}
    return engine_of(getattr(args, "engine", None), machine, layout, **given, prefix_hit=args.prefix_hit,
                     spec_tokens=args.spec_tokens, acceptance=args.acceptance or 0.0)


def _engine_kernels(args, machine) -> None:
    """--engine without --kernels: the engine's measured kernels where the tables hold this GPU or transfer onto
    it (measured.engine.engine_kernels, as /api/serving's); else the cost model, said in a note of the run."""
    if not getattr(args, "engine", None) or args.kernels:
        return
    from roofline.measured.engine import engine_kernels
    from roofline.serving.engines import preset

    kernels, note = engine_kernels(preset(args.engine, machine).kernels, machine)
    if note:
        args.cost_notes = [*getattr(args, "cost_notes", []), note]
    args.kernels = kernels


def with_notes(result, notes):
    """The run (or a sweep's first run, whose notes its JSON and table give) with ``notes`` added."""
    if not notes:
        return result
    if hasattr(result, "results"):
        first = with_notes(result.results[0], notes)
        return dataclasses.replace(result, results=(first, *result.results[1:]))
    if hasattr(result, "notes"):
        return dataclasses.replace(result, notes=tuple(result.notes) + tuple(dict.fromkeys(notes)))
    return result


def cmd_serving(args):
    try:
        return _cmd_serving(args)
    except RooflineError as exc:  # the lengths came from --lengths FILE: name it, not the flags it replaced
        if args.lengths is not None and exc.field in ("input_len", "output_len"):
            raise RooflineError(f"{exc} (a request of the lengths file {args.lengths!r})", field="lengths") from None
        if exc.field and getattr(args, exc.field, 0) is None:  # a setting left to the engine: name a flag the user gave
            given = next((f for f in exc.also if getattr(args, f, None) is not None), None)
            if given:
                raise RooflineError(str(exc), field=given, also=(exc.field,)) from None
        raise


def _cmd_serving(args):
    """The flags read once, at this edge: the request (its combinations checked), the machine, the cost
    model, the engine and the precision; below, functions take them."""
    out = checked_output(args.output)
    req = ServingRequest.from_args(args)
    m = machine_from_args(args)
    _engine_kernels(args, m)
    cm = dataclasses.replace(cost_model_from_args(args, m), cuda_graph=not args.eager)
    engine = _engine(args, m, req)
    from roofline.serving.engines import engine_precision

    precision = engine_precision(resolve_precision(args, m), engine.preset, m).check_engine(engine.preset)
    if hasattr(cm, "scaled_for"):  # measured kernels: the fp8 rows as the checkpoint scales its weights
        cm = cm.scaled_for(precision, getattr(args, "fp8_scaling", None))
    if req.tp_search is not None:
        return _tp_search(req, m, cm, engine, precision, lambda field, text: flag_text(args, field, text),
                          lambda size: _engine(args, m, dataclasses.replace(req, tp=size)))
    step, draft = _steps(req, m, cm, engine, precision)
    if req.disagg_search is not None:
        return _disagg_search(req, step, engine)
    result = with_notes(_simulate(req, step, draft, engine), getattr(args, "cost_notes", []))
    _print_result(req, out, step, result, engine, draft)


def _steps(req, m, cm, engine, precision):
    """The target's StepCost and the draft's (None without speculative decoding)."""
    from roofline.plan.step import StepCost

    step = StepCost(req.model, m, precision, req.tp, req.tp_link, cm, req.attention, engine.step_tokens,
                    engine.max_seqs, req.gpus_per_node, engine.spec_tokens + 1, req.ep, req.pp,
                    attention_tp=req.attention_tp())
    if req.draft is None:
        return step, None
    from roofline.plan.step_mtp import MTP_DRAFT, MtpStepCost

    try:  # the target's own MTP module runs with the target's expert parallelism; a draft model tensor-parallel
        draft = (MtpStepCost(req.model, m, precision, req.tp, req.tp_link, cm, req.attention, engine.step_tokens,
                             engine.max_seqs, req.gpus_per_node, 1, req.ep, attention_tp=req.attention_tp())
                 if req.draft == MTP_DRAFT else
                 StepCost(req.draft, m, precision, req.tp, req.tp_link, cm, req.attention, engine.step_tokens,
                          engine.max_seqs, req.gpus_per_node))
    except RooflineError as exc:  # the draft's model is --draft's, not --model's
        raise RooflineError(str(exc), field="draft" if exc.field == "model" else exc.field) from None
    return step, draft


def _disagg_search(req, step, engine):
    """--disagg-search G: the best split of G replicas into prefill and decode pools."""
    from roofline.cli.serving_tables import split_table
    from roofline.serving.disagg import best_disaggregation

    found = best_disaggregation(step, req.disagg_search, req.input_len, req.output_len, req.slo_ttft, req.slo_tpot,
                                req.percentile, engine, req.requests or DISAGG_SEARCH_REQUESTS, req.seed, req.kv_link,
                                req.price, req.burstiness, progress=lambda done, of, rate: print(
                                    f"  split {done}:{of + 1 - done} searched ({done} of {of})", file=sys.stderr,
                                    flush=True))
    if req.json:
        from roofline.serving.results import step_settings
        from roofline.tables import dump_json

        print(dump_json({"description": step.describe(), **step_settings(step), **found}))
    else:
        print(split_table(step, found))


def _simulate(req, step, draft, engine):
    """The run the flags ask for: --disagg's pools, --sweep's curve, the SLO rate search, or one run."""
    from roofline.serving.search import max_rate_within, sweep_concurrency

    if req.disagg is not None:
        from roofline.serving.disagg import simulate_disaggregated
        from roofline.serving.requests import closed_requests, poisson_requests

        reqs = (poisson_requests(req.rate, req.requests or REQUESTS, req.input_len, req.output_len, req.seed, req.burstiness)
                if req.rate is not None else
                closed_requests(req.concurrency, req.requests or REQUESTS, req.input_len, req.output_len, req.seed))
        return simulate_disaggregated(step, step, reqs, engine, engine, req.disagg[0], req.disagg[1], req.kv_link,
                                      req.seed, req.price, req.router or ROUTER.default, req.first_token or FIRST_TOKEN.default)
    if req.sweep:
        return sweep_concurrency(step, req.sweep, req.input_len, req.output_len, engine, req.requests, req.seed,
                                 req.price, req.slo_ttft, req.slo_tpot, req.percentile, draft)
    n = req.requests or REQUESTS
    if req.slo:
        return max_rate_within(step, req.input_len, req.output_len, req.slo_ttft, req.slo_tpot, req.percentile, engine,
                               n, req.seed, req.price, req.target_rate, draft, req.burstiness,
                               progress=(lambda runs, rate: print(f"  run {runs}: {format_number(rate, 4)} requests/s", file=sys.stderr,
                                                                  flush=True)) if n >= PROGRESS_SEARCH_REQUESTS else None)
    return _single_run(req, step, draft, engine, n)


def _single_run(req, step, draft, engine, n):
    """One run (--rate or --concurrency) of n requests, and its spread over --seeds."""
    from roofline.serving.requests import closed_requests, poisson_requests
    from roofline.serving.scheduler import simulate

    def make(seed):
        return (poisson_requests(req.rate, n, req.input_len, req.output_len, seed, req.burstiness)
                if req.rate is not None else
                closed_requests(req.concurrency or CONCURRENCY, n, req.input_len, req.output_len, seed))

    result = simulate(step, make(req.seed), engine, req.price, draft=draft,
                      progress=_requests_progress if n >= PROGRESS_REQUESTS else None)
    seeds = 3 if req.seeds is None else req.seeds
    spread = None
    # a seed draws only arrivals at a rate and lengths from a range (requests.lengths): a closed loop of fixed lengths
    # or a lengths file draws nothing, so its reruns would repeat the same run
    draws = req.rate is not None or isinstance(req.input_len, tuple) or isinstance(req.output_len, tuple)
    if seeds > 1 and not draws:
        if req.seeds is not None:
            result = dataclasses.replace(result, notes=tuple(result.notes) + (
                f"--seeds {seeds}: this run draws nothing at random (a closed loop of fixed lengths), so every seed "
                "gives the same run: no spread",))
    elif seeds > 1 and not result.overloaded:  # an overloaded run's latencies grow with --requests, not by seed
        from roofline.serving.search import seed_spread, spread_note, spread_seeds

        chosen = spread_seeds(req.seed, seeds)

        def rerun(seed):
            if n >= PROGRESS_REQUESTS:
                print(f"  seed {seed} ({chosen.index(seed) + 1} of {seeds}): the spread", file=sys.stderr, flush=True)
            return simulate(step, make(seed), engine, req.price, draft=draft)

        spread = seed_spread(result, rerun, chosen)
        if spread is not None:  # what the seeds draw: arrivals at a rate, lengths from a range (a file's are fixed)
            ranged = isinstance(req.input_len, tuple) or isinstance(req.output_len, tuple)
            drawn = ("arrivals and lengths" if ranged else "arrivals") if req.rate is not None else "lengths"
            result = dataclasses.replace(result, notes=tuple(result.notes) + (spread_note(spread, drawn),))
    return dataclasses.replace(result, settings={**result.settings, "seed_spread": spread})


def _print_result(req, out, step, result, engine, draft) -> None:
    """The run as a table (with --breakdown's steps), JSON or CSV, and -o's curve."""
    from roofline.cli.serving_tables import breakdown, breakdown_table

    steps = breakdown(step, result, engine, req, draft) if req.breakdown else None
    if req.json:
        from roofline.tables import dump_json

        d = result.to_dict()
        if steps is not None:
            d["breakdown"] = steps
        print(dump_json(d))
    elif req.csv:
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
        print(f"wrote {out}", file=sys.stderr if (req.json or req.csv) else sys.stdout)


def sized_by_layout(engine) -> bool:
    """Whether the engine's memory share was sized from the layout (SGLang's), so differs by replica size."""
    return engine.memory_share is not None and engine.memory_share.basis == "sized"


def _tp_search(req, m, cm, engine, precision, name_flag, engine_for=None):
    """--tp-search: the SLO rate of a replica of each size, and the replicas and GPUs for --target-rate;
    ``engine_for(size)`` the engine of each size where its defaults follow the GPUs (SGLang's memory share)."""
    from roofline.cli.serving_tables import tp_search_table
    from roofline.plan.step import StepCost
    from roofline.serving.search import best_parallelism

    def make(size):
        return StepCost(req.model, m, precision, size, req.tp_link, cm, req.attention, engine.step_tokens,
                        engine.max_seqs, req.gpus_per_node, 1, req.ep)

    found = best_parallelism(make, req.tp_search, req.input_len, req.output_len, req.slo_ttft, req.slo_tpot,
                             req.percentile, engine_for if sized_by_layout(engine) and engine_for else engine,
                             req.requests or REQUESTS, req.seed, req.price, req.target_rate,
                             req.burstiness, progress=lambda done, of, rate: print(
                                 f"  size {req.tp_search[done - 1]} searched ({done} of {of})", file=sys.stderr, flush=True))
    if req.json:
        from roofline.tables import dump_json

        print(dump_json({"model": req.model, "machine": m.key or m.name, "precision": precision.to_dict(),
                         "expert_parallel": bool(req.ep), "engine": dataclasses.asdict(engine), **found}))
    else:
        print(tp_search_table(req, m, cm, precision, found, name_flag))
