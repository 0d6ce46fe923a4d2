"""`roofline serving`: a deployment under load (docs/serving.md), simulated step by step from the per-op
costs (roofline.plan.step, roofline.serving). Not `roofline serve`, the web server.

    roofline serving --model llama3-8b --machine h100-sxm --input-len 1024 --output-len 256 --concurrency 64
    roofline serving ... --rate 10 --requests 2000
    roofline serving ... --sweep 1,4,16,64,256 -o curve.png        # the throughput-latency curve
    roofline serving ... --slo-ttft 500ms --slo-tpot 30ms           # the highest rate within the targets
"""

from __future__ import annotations

import argparse
import sys

from roofline.cli.args import (add_cost_flags, add_kernels_flag, add_machine_flags, cost_model_from_args, machine_from_args,
                               number_arg, refuse_unused)
from roofline.cli.plan_args import (MEMORY_FRACTION_ARG, _add_format, _add_model, _add_precision, _add_tp, _flagged, _output, _precision,
                                    count_list)
from roofline.errors import DISAGG_BUDGET_REQUESTS, MAX_CONTEXT, MAX_REQUESTS, RooflineError
from roofline.plan.limits import ENGINE_MEMORY_FRACTION, ENGINE_STEP_SEQS, ENGINE_STEP_TOKENS
from roofline.serving.engine import MAX_STEP_OVERHEAD_S
from roofline.units import MS, US, parse_time_s


PROGRESS_REQUESTS = 200_000  # a run of this many requests or more says how far it has got (stderr)
PROGRESS_SEARCH_REQUESTS = 4_000  # ... and a rate search of this many per run, each run it makes (~20 of them)


def _requests_progress(done: int, of: int) -> None:
    print(f"  simulated {done:,} of {of:,} requests", file=sys.stderr, flush=True)


def length_arg(flag):
    """'1024' (every request) or '128-2048' (uniform, inclusive), whole numbers >= 1."""
    one = number_arg(flag, integer=True, maximum=MAX_CONTEXT)

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


def _split_arg(text):
    """'2:6' -> (2, 6): prefill and decode replicas, whole numbers >= 1."""
    one = number_arg("--disagg", integer=True, maximum=100_000)
    parts = str(text).split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected P:D (prefill and decode replicas, e.g. 1:3), got {text!r}")
    return one(parts[0]), one(parts[1])


def _given(args) -> dict:
    """The scheduler settings given on the command line (None: not given)."""
    return {"max_seqs": args.max_seqs, "max_tokens": args.max_tokens, "block_size": args.block_size,
            "memory_fraction": args.memory_fraction, "step_overhead_s": args.step_overhead}


def _engine(args, machine=None):
    """The Engine of the flags: --engine's defaults on the machine (serving.engines), or serving.Engine's own,
    with every flag given over them."""
    from roofline.serving.engine import Engine

    rest = {"prefix_hit": args.prefix_hit, "spec_tokens": args.spec_tokens, "acceptance": args.acceptance or 0.0}
    if getattr(args, "engine", None):
        from roofline.serving.engines import preset

        return preset(args.engine, machine).engine(**_given(args), **rest)
    return Engine(**{k: v for k, v in _given(args).items() if v is not None}, **rest)


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


def _cmd_serving(args):
    from roofline.serving.requests import closed_requests, poisson_requests
    from roofline.serving.search import max_rate_within, sweep_concurrency
    from roofline.serving.scheduler import simulate
    from roofline.plan.step import StepCost

    out = _output(args.output)
    modes = [m for m, v in (("--rate", args.rate), ("--concurrency", args.concurrency), ("--sweep", args.sweep)) if v is not None]
    slo = args.slo_ttft is not None or args.slo_tpot is not None
    if len(modes) > 1:
        raise RooflineError(f"give one of --rate, --concurrency and --sweep, not {' and '.join(modes)}", field=modes[1][2:])
    if slo and modes and modes[0] != "--sweep":
        raise RooflineError(f"--slo-ttft/--slo-tpot search the highest rate themselves; {modes[0]} would be ignored "
                            "(with --sweep they mark the concurrencies that meet them)", field=modes[0][2:])
    open_loop = args.rate is not None or (slo and not args.sweep) or (args.disagg is not None and args.concurrency is None) \
        or args.disagg_search is not None
    if args.burstiness is not None and not open_loop:
        raise RooflineError("--burstiness shapes open-loop arrivals (--rate, the SLO rate search, --disagg); "
                            + ("--concurrency" if args.concurrency is not None else "--sweep" if args.sweep is not None
                               else "without --rate the run is a closed loop of 64 users (--concurrency)")
                            + (" runs a closed loop of users" if args.concurrency is not None or args.sweep is not None else ""),
                            field="burstiness")
    burstiness = 1.0 if args.burstiness is None else args.burstiness
    if args.lengths is not None:
        if args.input_len is not None or args.output_len is not None:
            raise RooflineError("--lengths FILE gives both lengths of every request: drop --input-len/--output-len",
                                field="lengths")
        from roofline.serving.requests import read_lengths

        args.input_len, args.output_len = read_lengths(args.lengths)
        if args.requests is None:
            args.requests = len(args.input_len)  # the file's requests, once each
    args.input_len = 1024 if args.input_len is None else args.input_len
    args.output_len = 256 if args.output_len is None else args.output_len
    if args.target_rate is not None and not (slo and not args.sweep):
        raise RooflineError("--target-rate sizes the deployment from the SLO rate search: give --slo-ttft and/or --slo-tpot "
                            "(without --sweep)", field="target_rate")
    if out and not (args.sweep or slo):
        raise RooflineError("-o/--output draws the throughput-latency curve: give --sweep C1,C2,... or an SLO (--slo-ttft/--slo-tpot)",
                            field="output")
    if args.breakdown and args.csv:
        raise RooflineError("--breakdown is a table of ops: use it without --csv (with --json it is the \"breakdown\" key)",
                            field="breakdown")
    if args.tp == 1 and args.pp == 1 and args.tp_search is None:
        refuse_unused(args, {"tp_link": None, "gpus_per_node": 8}, "with --tp 1 (one GPU: no tensor-parallel collectives)")
    m = machine_from_args(args)
    _engine_kernels(args, m)
    cm = cost_model_from_args(args, m)
    import dataclasses

    if args.eager and args.cuda_graph:
        raise RooflineError("--eager and --cuda-graph contradict each other (serving replays a CUDA graph for decode-only "
                            "steps unless --eager)", field="eager")
    if args.cuda_graph:  # the cost flags' --cuda-graph is one launch per workload: not what an engine does
        raise RooflineError("--cuda-graph does not apply to serving: it replays a CUDA graph for decode-only steps by "
                            "default, as engines do (--eager turns that off), and launches each kernel of a step "
                            "with a prompt chunk", field="cuda_graph")
    if args.kv_link is not None and args.disagg is None and args.disagg_search is None:
        raise RooflineError("--kv-link is the link the KV cache moves over between disaggregated pools: give --disagg "
                            "P:D or --disagg-search G", field="kv_link")
    if (args.router is not None or args.first_token is not None) and args.disagg is None:
        raise RooflineError("--router and --first-token describe disaggregated pools: give --disagg P:D",
                            field="router" if args.router is not None else "first_token")
    if args.percentile != 90.0 and not slo:
        raise RooflineError("--percentile is the one the SLO targets hold for: give --slo-ttft and/or --slo-tpot "
                            "(the tables print p50, p90 and p99)", field="percentile")
    cm = dataclasses.replace(cm, cuda_graph=not args.eager)
    if (args.spec_tokens > 0) != (args.draft is not None) or (args.spec_tokens > 0) != (args.acceptance is not None):
        raise RooflineError("speculative decoding takes --spec-tokens K, --acceptance A (or A1,...,AK by position) and "
                            "--draft MODEL (or --draft mtp, the model's own multi-token-prediction module) together",
                            field="spec_tokens")
    engine = _engine(args, m)
    precision = _precision(args, m)
    if args.tp_search is not None:
        others = [f for f, v in (("--sweep", args.sweep), ("--rate", args.rate), ("--concurrency", args.concurrency),
                                 ("--disagg", args.disagg), ("--disagg-search", args.disagg_search)) if v is not None]
        if not slo or others:
            raise RooflineError("--tp-search S1,S2,... compares replica sizes by the SLO rate search: give --slo-ttft "
                                "and/or --slo-tpot" + (f", without {' and '.join(others)}" if others else ""),
                                field="tp_search")
        if args.tp != 1:
            raise RooflineError("--tp-search sets each replica's --tp itself: drop --tp", field="tp_search")
        if args.pp != 1:
            raise RooflineError("--tp-search searches tensor-parallel (or --ep) sizes of one-stage replicas: drop --pp",
                                field="tp_search")
        refuse_unused(args, {"csv": False, "output": None, "breakdown": False, "draft": None},
                      "to --tp-search (it prints a replica size a row)")
        return _tp_search(args, m, cm, engine, precision, burstiness)
    step = StepCost(args.model, m, precision, args.tp, args.tp_link, cm, args.attention, engine.step_tokens,
                    engine.max_seqs, args.gpus_per_node, engine.spec_tokens + 1, args.ep, args.pp)
    draft = None
    if args.draft is not None:
        from roofline.plan.step_mtp import MTP_DRAFT, MtpStepCost

        try:  # the target's own MTP module runs with the target's expert parallelism; a draft model tensor-parallel
            draft = (MtpStepCost(args.model, m, precision, args.tp, args.tp_link, cm, args.attention, engine.step_tokens,
                                 engine.max_seqs, args.gpus_per_node, 1, args.ep) if args.draft == MTP_DRAFT else
                     StepCost(args.draft, m, precision, args.tp, args.tp_link, cm, args.attention, engine.step_tokens,
                              engine.max_seqs, args.gpus_per_node))
        except RooflineError as exc:  # the draft's model is --draft's, not --model's
            raise RooflineError(str(exc), field="draft" if exc.field == "model" else exc.field) from None
    if (args.disagg is not None or args.disagg_search is not None) and args.pp != 1:
        raise RooflineError(f"--pp {args.pp} with {'--disagg' if args.disagg is not None else '--disagg-search'} is not "
                            "modelled: the pools are simulated as tensor-parallel replicas (give --pp 1)", field="pp")
    if args.seeds is not None and (args.sweep or slo or args.disagg is not None or args.disagg_search is not None):
        raise RooflineError("--seeds reruns a single run (--rate or --concurrency) to show its spread; the sweep, the SLO "
                            "search and --disagg run one seed (--seed)", field="seeds")
    if args.disagg_search is not None:
        if not slo or args.sweep or args.rate is not None or args.concurrency is not None or args.disagg is not None:
            raise RooflineError("--disagg-search G needs an SLO (--slo-ttft/--slo-tpot) and no --rate, --concurrency, "
                                "--sweep or --disagg", field="disagg_search")
        refuse_unused(args, {"target_rate": None, "price": None, "csv": False, "output": None, "breakdown": False,
                             "draft": None}, "to --disagg-search (it prints the splits' rates)")
        from roofline.serving.disagg import best_disaggregation

        found = best_disaggregation(step, args.disagg_search, args.input_len, args.output_len, args.slo_ttft, args.slo_tpot,
                                    args.percentile, engine, args.requests or 500, args.seed, args.kv_link, args.price,
                                    burstiness, progress=lambda done, of, rate: print(
                                        f"  split {done}:{of + 1 - done} searched ({done} of {of})", file=sys.stderr,
                                        flush=True))
        if args.json:
            from roofline.tables import dump_json

            from roofline.serving.results import step_settings

            print(dump_json({"description": step.describe(), **step_settings(step), **found}))
        else:
            print(_split_table(step, found))
        return None
    if args.disagg is not None:
        from roofline.serving.disagg import simulate_disaggregated

        if (args.rate is None and args.concurrency is None) or args.sweep or slo:
            raise RooflineError("--disagg P:D simulates open-loop arrivals (--rate) or a closed loop of users "
                                "(--concurrency): give one (the sweep and the SLO search run one pool)", field="disagg")
        if draft is not None:
            raise RooflineError("--disagg with speculative decoding is not modelled", field="disagg")
        reqs = (poisson_requests(args.rate, args.requests or 1000, args.input_len, args.output_len, args.seed, burstiness)
                if args.rate is not None else
                closed_requests(args.concurrency, args.requests or 1000, args.input_len, args.output_len, args.seed))
        result = simulate_disaggregated(step, step, reqs, engine, engine, args.disagg[0], args.disagg[1], args.kv_link,
                                        args.seed, args.price, args.router or "random", args.first_token or "prefill")
    elif args.sweep:
        result = sweep_concurrency(step, args.sweep, args.input_len, args.output_len, engine, args.requests, args.seed,
                                   args.price, args.slo_ttft, args.slo_tpot, args.percentile, draft)
    elif slo:
        n = args.requests or 1000
        result = max_rate_within(step, args.input_len, args.output_len, args.slo_ttft, args.slo_tpot, args.percentile, engine,
                                 n, args.seed, args.price, args.target_rate, draft, burstiness,
                                 progress=(lambda runs, rate: print(f"  run {runs}: {rate:,.4g} requests/s", file=sys.stderr,
                                                                    flush=True)) if n >= PROGRESS_SEARCH_REQUESTS else None)
    else:
        n = args.requests or 1000

        def make(seed):
            return (poisson_requests(args.rate, n, args.input_len, args.output_len, seed, burstiness)
                    if args.rate is not None else
                    closed_requests(args.concurrency or 64, n, args.input_len, args.output_len, seed))

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
        result = dataclasses.replace(result, settings={**result.settings, "seed_spread": spread})
    breakdown = _breakdown(step, result, engine, args, draft) if args.breakdown else None
    if args.json:
        from roofline.tables import dump_json

        d = result.to_dict()
        if breakdown is not None:
            d["breakdown"] = breakdown
        print(dump_json(d))
    elif args.csv:
        from roofline.cli.args import print_csv_notes

        sys.stdout.write(result.to_csv())
        print_csv_notes(result.to_dict()["notes"])
    else:
        print(result.to_table())
        if breakdown is not None:
            print("\n" + _breakdown_table(breakdown))
    if out:
        from roofline.plots import plot_serving

        plot_serving(result, out)
        print(f"wrote {out}", file=sys.stderr if (args.json or args.csv) else sys.stdout)


def _tp_search(args, m, cm, engine, precision, burstiness):
    """--tp-search: the SLO rate of a replica of each size, and the replicas and GPUs for --target-rate."""
    from roofline.plan.step import StepCost
    from roofline.serving.search import best_parallelism

    def make(size):
        return StepCost(args.model, m, precision, size, args.tp_link, cm, args.attention, engine.step_tokens,
                        engine.max_seqs, args.gpus_per_node, 1, args.ep)

    found = best_parallelism(make, args.tp_search, args.input_len, args.output_len, args.slo_ttft, args.slo_tpot,
                             args.percentile, engine, args.requests or 1000, args.seed, args.price, args.target_rate,
                             burstiness, progress=lambda done, of, rate: print(
                                 f"  size {args.tp_search[done - 1]} searched ({done} of {of})", file=sys.stderr, flush=True))
    if args.json:
        import dataclasses

        from roofline.tables import dump_json

        print(dump_json({"model": args.model, "machine": m.key or m.name, "precision": precision.to_dict(),
                         "expert_parallel": bool(args.ep), "engine": dataclasses.asdict(engine), **found}))
        return None
    from roofline.serving.render import targets_text
    from roofline.tables import grid
    from roofline.plan.render import note_line
    from roofline.serving.search import CHECK_FACTOR
    from roofline.transformer import get_model

    targets = targets_text(found["slo"])

    kind = "expert-parallel" if args.ep else "tensor-parallel"
    target = found["target_rate"]
    arrivals = "Poisson" if burstiness == 1.0 else f"gamma gaps of burstiness {burstiness:g}"
    head = (f"{get_model(args.model).name} on {m.name}, {precision.label()}; {cm.describe('decode-only step')}\n"
            f"the highest request rate per replica within {targets}, by {kind} size"
            + (f", and the replicas for {target:,.4g} requests/s" if target is not None else "")
            + f" ({found['requests']:,} requests a run, each answer checked with "
               f"{found['checked_requests'] or CHECK_FACTOR * found['requests']:,}; arrivals {arrivals})")
    hdr = ["GPUs per replica", "req/s per replica", "req/s per GPU", "tok/s/GPU"]
    if target is not None:
        hdr += ["replicas", "GPUs"]
    if args.price is not None:
        hdr.append("$/M out at target" if target is not None else "$/M out")
    rows = []
    for r in found["sizes"]:
        if r["refused"]:
            rows.append([f"{r['gpus_per_replica']:,}", "refused"] + [""] * (len(hdr) - 2))
            continue
        if r["rate_per_s"] is None:
            rows.append([f"{r['gpus_per_replica']:,}", "-", "-", "-"] + ["-"] * (len(hdr) - 4))
            continue
        cells = [f"{r['gpus_per_replica']:,}", f"{r['rate_per_s']:,.3g}", f"{r['rate_per_gpu']:,.3g}",
                 f"{r['output_tokens_per_s_per_gpu']:,.0f}"]
        if target is not None:
            cells += [f"{r['replicas']:,}", f"{r['gpus']:,}"]
        if args.price is not None:
            c = r.get("cost_at_target_per_million_output_tokens") if target is not None else r["cost_per_million_output_tokens"]
            cells.append("-" if c is None else f"{c:,.3f}")
        rows.append(cells)
    lines = [head, "", grid(hdr, rows, [True] * len(hdr)), ""]
    best = found["best_index"]
    if best is None and all(r["refused"] for r in found["sizes"]):
        lines.append("no replica size could be costed: each is refused (below)")
    elif best is None:
        lines.append("no replica size meets the targets (a target below what a request alone takes is met by none)")
    else:
        b = found["sizes"][best]
        lines.append(f"best: replicas of {b['gpus_per_replica']} GPU(s)"
                     + (f", {b['replicas']:,} of them: {b['gpus']:,} GPUs for {target:,.4g} requests/s" if target is not None
                        else f", {b['rate_per_gpu']:,.3g} requests/s per GPU")
                     + ("; $/M out at target: the GPUs of the row serving the target's output tokens"
                        if target is not None and args.price is not None else ""))
    from roofline.cli.plan_args import flag_text

    for r in found["sizes"]:
        if r["refused"]:  # named as the CLI names it (tensor_parallel -> --tp: the size the row tried)
            lines.append(f"size {r['gpus_per_replica']} refused: {flag_text(args, r.get('refused_field'), r['refused'])}")
    lines += [note_line(n) for n in found["notes"]]
    print("\n".join(lines))
    return None


def _slo_time_s(text, field):
    """An SLO target with its unit (500ms, 0.5s): args.time_with_unit."""
    from roofline.cli.args import time_with_unit

    return time_with_unit(text, field)


def _split_table(step, found: dict) -> str:
    from roofline.serving.render import _lat, targets_text
    from roofline.tables import grid

    slo = found["slo"]
    targets = targets_text(slo)
    rows = [[f"{p}:{d}", "-" if r is None else f"{r:,.3g}"] for p, d, r in found["splits"]]
    co = found["colocated"]
    rows.append(["co-located", "-" if co is None else f"{co:,.3g}"])
    g = found["gpus"]
    arrivals = ("arrivals Poisson" if found.get("arrivals", "poisson") == "poisson" else
                f"arrivals with gamma gaps of burstiness {found['burstiness']:g}")
    lines = [step.describe(), f"{g} GPUs in replicas of {step.tensor_parallel}: the highest request rate within {targets}; "
             f"{arrivals}", "", grid(["prefill:decode replicas", "requests/s"], rows, [False, True]), ""]
    best = found["best"]
    if best is None:
        low = found["lightest"]
        q = slo["percentile"]
        lines.append(f"no split meets the targets: co-located at the lightest load tried ({low['rate_per_s']:,.3g} requests/s) "
                     f"TTFT p{q:g} is {_lat(low['ttft_s'])} and TPOT p{q:g} {_lat(low['tpot_s'])}; a target below what a "
                     "request alone takes is not met at any split")
    else:
        p, d, r = best
        better = co is None or r > co
        lines.append(f"best: {p} prefill + {d} decode replicas, {r:,.3g} requests/s"
                     + (f" ({r / co:.2f}x the co-located replicas)" if co else "")
                     + ("" if better else "; co-located replicas serve more"))
        if found.get("checked_requests"):
            refused = "; ".join(f"{k} {', '.join(f'{v:,.4g}' for v in vs)}" for k, vs in found.get("failed_checks", {}).items())
            lines.append(f"each split's answer checked again with {found['checked_requests']:,} requests"
                         + (f" (the co-located one with {found['colocated_checked_requests']:,} on one replica)"
                            if found.get("colocated_checked_requests") else "")
                         + ": near capacity a short run's queue has not settled"
                         + (f"; rates a longer run refused, each answer then stepped down: {refused} requests/s"
                            if refused else ""))
    from roofline.plan.render import note_line

    lines += [note_line(n) for n in found.get("notes", ())]
    return "\n".join(lines)


def _representative(result):
    """The run a breakdown describes: the one simulated, the SLO's best rate, or the sweep's last point."""
    from roofline.serving.search import ServingSweep

    if not isinstance(result, ServingSweep):
        return result
    best = (result.slo or {}).get("best")
    return result.results[result.values.index(best)] if best is not None else result.results[-1]


def _breakdown(step, result, engine, args, draft=None) -> dict:
    """Two steps of the run op by op: a decode step at its mean decode batch and mean context, and a
    step that feeds a prompt chunk: the mean of the run's steps that fed one (ServingResult.chunk_steps:
    their decodes, prompt tokens and prefix), or where the run does not record them the first chunk of
    a mean-length prompt beside the mean batch."""
    r = _representative(result)
    batch = max(1, round(r.mean_decode_batch))
    mean_in = r.input_tokens / r.requests
    mean_out = r.output_tokens / r.requests
    context = max(1, round(mean_in + mean_out / 2))  # a decoding sequence is halfway through its answer on average
    chunk = int(min(mean_in, engine.max_tokens - batch)) if engine.max_tokens > batch else 0
    T = step.verify_tokens
    out = {"decode_step": {"decode_batch": batch, "context": context, "tokens_fed_per_sequence": T,
                           "ops": [o.to_dict() for o in step.ops([context + T - 1] * batch)],
                           "time_s": step.seconds([context + T - 1] * batch)}}
    if draft is not None:
        import numpy as np

        d = float(draft.decode_steps_seconds(np.full(batch, context - 1), T - 1).sum())
        out["decode_step"]["draft_s"] = d
        out["decode_step"]["time_s"] += d
        out["decode_step"]["ops"] += _draft_ops(draft, batch, context, T - 1)
    if args.disagg is not None and chunk > 0:  # the pools run apart: the prefill pool's step is a chunk alone
        chunk = int(min(mean_in, engine.max_tokens))
        out["prefill_step"] = {"decode_batch": 0, "context": 0, "chunk": chunk, "prefix": 0,
                               "ops": [o.to_dict() for o in step.ops([], [(chunk, 0)])],
                               "time_s": step.seconds([], [(chunk, 0)])}
    elif chunk > 0:
        # the run's own steps that fed a prompt, on average (their decodes, prompt tokens and prefix: a prefix
        # hit's skipped tokens, a long prompt's earlier chunks); else a mean prompt's first chunk beside the batch
        seen = r.chunk_steps()
        prefix, count = 0, 1
        if seen is not None:
            batch_c, chunk, prefix = round(seen["decode_batch"]), max(1, round(seen["chunk"])), round(seen["prefix"])
            count = max(1, round(seen["chunks"]))
        else:
            batch_c = batch
        # means of steps each within the budget can round past it together (a long prompt's chunks fill what the
        # decodes leave): the representative step keeps to the budget, its chunks trimmed to what is left
        room = max(1, engine.max_tokens - batch_c * T)
        count = min(count, room)
        chunk = max(1, min(chunk, room // count))
        ctx = [context + T - 1] * batch_c
        fed = [(chunk, prefix)] * count
        out["mixed_step"] = {"decode_batch": batch_c, "context": context if batch_c else 0, "chunk": chunk, "prefix": prefix,
                             "chunks": count, "tokens_fed_per_sequence": T,
                             "ops": [o.to_dict() for o in step.ops(ctx, fed)], "time_s": step.seconds(ctx, fed)}
        if seen is not None:
            out["mixed_step"]["mean_of_steps"] = seen["steps"]
        if draft is not None:
            import numpy as np

            d = (float(draft.decode_steps_seconds(np.full(batch_c, context - 1), T - 1).sum()) if batch_c else 0.0) + \
                draft.seconds([], fed, sampled=0)  # a step of chunks alone runs no draft decodes
            out["mixed_step"]["draft_s"] = d
            out["mixed_step"]["time_s"] += d
            out["mixed_step"]["ops"] += _draft_ops(draft, batch_c, context, T - 1, fed)
    row = engine.overhead_op()
    if row is not None:  # the engine's own time, a row of each step as the simulator adds it
        for s in out.values():
            s["ops"].append(row.to_dict())
            s["time_s"] += row.time_s
    return out


def _draft_ops(draft, batch: int, context: int, k: int, chunks=()) -> list[dict]:
    """The draft's work in a step op by op, each op summed over its k runs (run i feeds each of the
    ``batch`` sequences one token against context + i, as the simulator's draft steps) and, with
    ``chunks``, its own prefill of the step's prompt chunks; each op named "draft: ...", part "draft"."""
    runs = [draft.ops([context + i] * batch) for i in range(k) if batch] + ([draft.ops([], chunks, 0)] if chunks else [])
    merged: dict = {}
    for ops in runs:
        for o in ops:
            row = merged.setdefault(o.name, {"name": f"draft: {o.name}", "part": "draft", "count": 0, "flops": 0.0,
                                             "bytes": 0.0, "time_s": 0.0, "bound": o.bound})
            row["count"] += o.count
            row["flops"] += o.flops
            row["bytes"] += o.bytes
            row["time_s"] += o.time_s
    return list(merged.values())


def _breakdown_table(b: dict) -> str:
    from roofline.tables import grid
    from roofline.units import format_si

    parts = []
    for key, title in (("decode_step", "a decode step"), ("mixed_step", "a step with a prompt chunk"),
                       ("prefill_step", "a step of the prefill pool")):
        s = b.get(key)
        if not s:
            continue
        what = f"{s['decode_batch']:,} decodes at context {s['context']:,}" if s["decode_batch"] else "no decodes"
        if s.get("tokens_fed_per_sequence", 1) > 1:
            what += f", each verifying {s['tokens_fed_per_sequence']} tokens"
        if "chunk" in s:
            what += (f" + {s['chunks']:,} chunks of {s['chunk']:,} prompt tokens each" if s.get("chunks", 1) > 1
                     else f" + a chunk of {s['chunk']:,} prompt tokens")
            if s.get("prefix"):
                what += f" after {s['prefix']:,} cached or earlier ones"
            if s.get("mean_of_steps"):
                what += f"; the mean of the run's {s['mean_of_steps']:,} steps that fed a prompt"
        if "draft_s" in s:
            what += f"; the draft's work adds {s['draft_s'] / MS:,.3f} ms (its ops: part draft, summed over its runs)"
        rows = [[o["name"], o["part"], f"{o['count']:,}", format_si(o["flops"], "FLOP"), format_si(o["bytes"], "B"),
                 o["bound"], f"{o['time_s'] / US:,.1f}"] for o in s["ops"]]
        parts.append(f"{title} ({what}): {s['time_s'] / MS:,.3f} ms, op by op (each op summed over its layers)\n"
                     + grid(["op", "part", "runs", "FLOPs", "bytes", "bound", "us"], rows,
                            [False, False, True, True, True, False, True]))
    return "\n\n".join(parts)


def _acceptance_arg(text):
    """--acceptance: one rate (a float) or a comma-separated rate per draft position (a tuple)."""
    one = number_arg("--acceptance", maximum=0.999)
    parts = text.split(",")
    return one(text) if len(parts) == 1 else tuple(one(x.strip()) for x in parts)


def register(sub):
    p = sub.add_parser("serving", help="a deployment under load: throughput, TTFT/TPOT percentiles, the SLO rate, "
                                       "cost per token (a simulated continuous-batching engine)")
    _add_model(p)
    add_machine_flags(p)
    p.add_argument("--input-len", type=length_arg("--input-len"), default=None,
                   help="prompt tokens per request: N or LO-HI (uniform); default 1024")
    p.add_argument("--output-len", type=length_arg("--output-len"), default=None,
                   help="output tokens per request: N or LO-HI (uniform); default 256")
    p.add_argument("--lengths", default=None, metavar="FILE",
                   help="each request's input and output tokens from a file, a request a line ('input,output'; "
                        "a header line allowed): a dataset's measured lengths; --requests defaults to its lines")
    p.add_argument("--requests", type=number_arg("--requests", integer=True, maximum=MAX_REQUESTS), default=None,
                   help="requests simulated (default 1,000; a sweep: 8 per user, 200 to 20,000)")
    p.add_argument("--rate", type=number_arg("--rate", maximum=1e9), default=None, help="Poisson arrivals, requests per second")
    p.add_argument("--burstiness", type=number_arg("--burstiness", minimum=0.01, strictly=False, maximum=1000), default=None,
                   help="open-loop arrivals' gamma shape, as vLLM's benchmark_serving: 1 Poisson (default), "
                        "below 1 bursts, above 1 more even")
    p.add_argument("--concurrency", type=number_arg("--concurrency", integer=True, maximum=1 << 24), default=None,
                   help="closed loop: users each sending the next request when the last finishes (default 64)")
    p.add_argument("--sweep", type=count_list("--sweep", maximum=1 << 24), default=None,
                   help="concurrencies to run, e.g. 1,4,16,64,256: the throughput-latency curve")
    p.add_argument("--slo-ttft", type=number_arg("--slo-ttft", maximum=1e6, parser=_slo_time_s, seconds=True), default=None,
                   help="time-to-first-token target, e.g. 500ms: without --sweep, search the highest rate within the targets")
    p.add_argument("--slo-tpot", type=number_arg("--slo-tpot", maximum=1e6, parser=_slo_time_s, seconds=True), default=None,
                   help="time-per-output-token target, e.g. 30ms")
    p.add_argument("--percentile", type=number_arg("--percentile", maximum=100.0), default=90.0,
                   help="the percentile the targets hold for (default 90)")
    p.add_argument("--target-rate", type=number_arg("--target-rate", maximum=1e9), default=None,
                   help="requests/s to serve: with an SLO, the replicas and GPUs needed")
    p.add_argument("--engine", default=None, metavar="ENGINE[@VERSION]",
                   help="vllm, sglang or trtllm as it runs by default (data/engines.toml, each setting cited): its "
                        "scheduler, budgets, cache blocks, memory share and time per step, and its measured kernels "
                        "(--kernels) where the tables hold this GPU; any flag below given wins")
    p.add_argument("--max-seqs", type=number_arg("--max-seqs", integer=True, maximum=1 << 20), default=None,
                   help=f"sequences running at once (vLLM max_num_seqs; default {ENGINE_STEP_SEQS}, or --engine's)")
    p.add_argument("--max-tokens", type=number_arg("--max-tokens", integer=True, maximum=1 << 20), default=None,
                   help=f"tokens per step (vLLM max_num_batched_tokens; default {ENGINE_STEP_TOKENS:,}, or --engine's)")
    p.add_argument("--block-size", type=number_arg("--block-size", integer=True, maximum=1 << 16), default=None,
                   help="tokens per KV-cache block (default 16, or --engine's)")
    p.add_argument("--memory-fraction", type=MEMORY_FRACTION_ARG, default=None,
                   help=f"share of GPU memory the engine takes (vLLM gpu_memory_utilization; default {ENGINE_MEMORY_FRACTION:g}, "
                        "or --engine's)")
    p.add_argument("--step-overhead", type=number_arg("--step-overhead", strictly=False, maximum=MAX_STEP_OVERHEAD_S, parser=_slo_time_s,
                                                                  seconds=True),
                   default=None, help="the engine's own time per step, not overlapped with the GPU (scheduling, sampling, "
                                      "detokenising), e.g. 2ms (default 0: the GPU's work alone; --engine's fitted one)")
    p.add_argument("--prefix-hit", type=number_arg("--prefix-hit", strictly=False, maximum=1.0), default=0.0,
                   help="share of each prompt found in the prefix cache (default 0)")
    p.add_argument("--spec-tokens", type=number_arg("--spec-tokens", strictly=False, integer=True, maximum=16), default=0,
                   help="speculative decoding: draft tokens per sequence and step (with --draft and --acceptance)")
    p.add_argument("--acceptance", type=_acceptance_arg, default=None, metavar="A or A1,...,AK",
                   help="the chance each draft token is accepted, e.g. 0.7; or the rate per draft position as engines "
                        "report it (vLLM's accepted tokens per position over drafts: non-increasing), e.g. 0.85,0.7,0.6 "
                        "(no default: measure it for your data)")
    p.add_argument("--draft", default=None, help="the draft model (a preset or config.json), on the same GPUs; or "
                                                 "'mtp': the model's own multi-token-prediction module (DeepSeek-V3)")
    p.add_argument("--pp", type=number_arg("--pp", integer=True, maximum=1024), default=1,
                   help="pipeline stages of --tp GPUs each, a micro-batch per stage in flight (default 1)")
    p.add_argument("--ep", action="store_true",
                   help="MoE: expert parallelism over the --tp GPUs with data-parallel attention (all-to-all dispatch "
                        "and combine) instead of tensor parallelism")
    p.add_argument("--disagg", type=_split_arg, default=None, metavar="P:D",
                   help="prefill/decode disaggregation: P prefill and D decode replicas of --tp GPUs each (with --rate, "
                        "or --concurrency: a closed loop over both pools)")
    p.add_argument("--router", choices=("random", "round-robin"), default=None,
                   help="with --disagg: how requests spread over each pool's replicas (default random; round-robin is "
                        "Dynamo's default router)")
    p.add_argument("--first-token", choices=("prefill", "decode"), default=None,
                   help="with --disagg: the pool whose token the client sees first (default prefill; decode: tokens "
                        "stream from the decode pool, as Dynamo serves them, so TTFT takes in the KV transfer)")
    p.add_argument("--tp-search", type=count_list("--tp-search", maximum=4096), default=None, metavar="S1,S2,...",
                   help="with an SLO: the rate search at each replica size (--tp, or the --ep group), and with "
                        "--target-rate the size needing the fewest GPUs")
    p.add_argument("--disagg-search", type=number_arg("--disagg-search", minimum=2, strictly=False, integer=True, maximum=64),
                   default=None, metavar="G",
                   help="with an SLO: the best split of G replicas into prefill and decode pools, against co-located; a search "
                        f"past {DISAGG_BUDGET_REQUESTS:,} simulated requests (about a minute) is refused, naming the G that fits")
    p.add_argument("--kv-link", default=None,
                   help="link the KV cache crosses from prefill to decode (default: infiniband or roce, else the scale-up link)")
    p.add_argument("--attention", choices=("flash", "naive"), default="flash")
    p.add_argument("--eager", action="store_true", help="no CUDA graph: every op of every step pays a launch")
    p.add_argument("--price", type=number_arg("--price", maximum=1e6), default=None, help="$ per GPU-hour: cost per token")
    p.add_argument("--seed", type=number_arg("--seed", strictly=False, integer=True, maximum=2**32 - 1), default=0,
                   help="random seed of arrivals and lengths")
    p.add_argument("--seeds", type=number_arg("--seeds", integer=True, maximum=100), default=None,
                   help="a single run (--rate or --concurrency): also rerun with this many seeds from --seed and print "
                        "the spread of throughput, TTFT and TPOT (default 3; 1 for none)")
    p.add_argument("--breakdown", action="store_true",
                   help="also print a decode step and a step with a prompt chunk of the run, op by op")
    _add_precision(p)
    _add_tp(p)
    add_cost_flags(p)
    add_kernels_flag(p)
    _add_format(p)
    p.set_defaults(func=_flagged(cmd_serving))
