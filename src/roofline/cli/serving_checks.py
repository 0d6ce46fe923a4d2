"""What `roofline serving` is asked (ServingRequest, frozen), read from its flags once: the combinations
the command cannot honour refused in one place (refuse_combinations), by name and before any work.
Each flag's own range is its declaration's (serving.parameters), checked as argparse reads it; what is
left here is which flags go together.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from roofline.cli.args import refuse_unused
from roofline.errors import RooflineError
from roofline.serving.parameters import INPUT_LEN, OUTPUT_LEN, PERCENTILE


@dataclass(frozen=True)
class ServingRequest:
    """The run's flags, checked together: the workload (lengths given, from --lengths FILE, or the
    declared defaults), the kind of run, its deployment and its outputs. The machine, cost model,
    precision and engine are read from the flags beside it (cli.args, serving.parameters.engine_of)."""

    model: str
    input_len: object  # tokens: N, a range (LO, HI) or each request's (a --lengths file)
    output_len: object
    requests: int | None
    rate: float | None
    concurrency: int | None
    sweep: list | None
    slo_ttft: float | None
    slo_tpot: float | None
    percentile: float
    target_rate: float | None
    burstiness: float  # 1: Poisson
    price: float | None
    seed: int
    seeds: int | None
    disagg: tuple | None
    router: str | None
    first_token: str | None
    disagg_search: int | None
    tp_search: list | None
    kv_link: str | None
    draft: str | None
    ep: bool
    attention_dp: int | None  # with --ep: data-parallel attention groups (None: --tp of them)
    tp: int
    pp: int
    tp_link: str | None
    gpus_per_node: int
    attention: str
    breakdown: bool
    json: bool
    csv: bool

    @property
    def slo(self) -> bool:
        return self.slo_ttft is not None or self.slo_tpot is not None

    def attention_tp(self, gpus: int | None = None) -> int:
        """GPUs each data-parallel attention group splits attention over (StepLayout.attention_tp): --tp
        (or ``gpus``) / --attention-dp under --ep, else 1."""
        return (gpus or self.tp) // self.attention_dp if self.ep and self.attention_dp else 1

    @classmethod
    def from_args(cls, args) -> "ServingRequest":
        """The request of ``args``, refusing what the command cannot honour (refuse_combinations)."""
        refuse_combinations(args)
        given = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(cls)}
        if args.lengths is not None:
            from roofline.serving.requests import read_lengths

            given["input_len"], given["output_len"] = read_lengths(args.lengths)
            if args.requests is None:
                given["requests"] = len(given["input_len"])  # the file's requests, once each
        given["input_len"] = INPUT_LEN if given["input_len"] is None else given["input_len"]
        given["output_len"] = OUTPUT_LEN if given["output_len"] is None else given["output_len"]
        given["burstiness"] = 1.0 if args.burstiness is None else args.burstiness
        return cls(**given)


def has_slo(args) -> bool:
    return args.slo_ttft is not None or args.slo_tpot is not None


def is_open_loop(args) -> bool:
    """Arrivals at a rate: --rate, the SLO rate search (without --sweep), --disagg without --concurrency, or
    --disagg-search."""
    return (args.rate is not None or (has_slo(args) and not args.sweep)
            or (args.disagg is not None and args.concurrency is None) or args.disagg_search is not None)


def refuse_combinations(args) -> None:
    """Refuse, naming the flag (RooflineError.field), each combination the run cannot honour."""
    _modes(args)
    _workload(args)
    _outputs(args)
    _cost(args)
    _speculation(args)
    _attention_dp(args)
    if args.tp_search is not None:
        _tp_search(args)
    _disaggregation(args)


def _modes(args) -> None:
    """One of --rate, --concurrency and --sweep; an SLO searches the rate itself."""
    modes = [m for m, v in (("--rate", args.rate), ("--concurrency", args.concurrency), ("--sweep", args.sweep)) if v is not None]
    slo = has_slo(args)
    if len(modes) > 1:
        raise RooflineError(f"give one of --rate, --concurrency and --sweep, not {' and '.join(modes)}", field=modes[1][2:])
    if slo and modes and modes[0] != "--sweep":
        raise RooflineError(f"--slo-ttft/--slo-tpot search the highest rate themselves; {modes[0]} would be ignored "
                            "(with --sweep they mark the concurrencies that meet them)", field=modes[0][2:])
    if args.burstiness is not None and not is_open_loop(args):
        raise RooflineError("--burstiness shapes open-loop arrivals (--rate, the SLO rate search, --disagg); "
                            + ("--concurrency" if args.concurrency is not None else "--sweep" if args.sweep is not None
                               else "without --rate the run is a closed loop of 64 users (--concurrency)")
                            + (" runs a closed loop of users" if args.concurrency is not None or args.sweep is not None else ""),
                            field="burstiness")


def _workload(args) -> None:
    if args.lengths is not None and (args.input_len is not None or args.output_len is not None):
        raise RooflineError("--lengths FILE gives both lengths of every request: drop --input-len/--output-len",
                            field="lengths")
    slo = has_slo(args)
    if args.target_rate is not None and not (slo and not args.sweep):
        raise RooflineError("--target-rate sizes the deployment from the SLO rate search: give --slo-ttft and/or --slo-tpot "
                            "(without --sweep)", field="target_rate")
    if args.percentile != PERCENTILE and not slo:
        raise RooflineError("--percentile is the one the SLO targets hold for: give --slo-ttft and/or --slo-tpot "
                            "(the tables print p50, p90 and p99)", field="percentile")
    if args.seeds is not None and (args.sweep or slo or args.disagg is not None or args.disagg_search is not None):
        raise RooflineError("--seeds reruns a single run (--rate or --concurrency) to show its spread; the sweep, the SLO "
                            "search and --disagg run one seed (--seed)", field="seeds")


def _outputs(args) -> None:
    if args.output and not (args.sweep or has_slo(args)):
        raise RooflineError("-o/--output draws the throughput-latency curve: give --sweep C1,C2,... or an SLO (--slo-ttft/--slo-tpot)",
                            field="output")
    if args.breakdown and args.csv:
        raise RooflineError("--breakdown is a table of ops: use it without --csv (with --json it is the \"breakdown\" key)",
                            field="breakdown")


def _cost(args) -> None:
    if args.tp == 1 and args.pp == 1 and args.tp_search is None:
        refuse_unused(args, {"tp_link": None, "gpus_per_node": 8}, "with --tp 1 (one GPU: no tensor-parallel collectives)")
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


def _speculation(args) -> None:
    if (args.spec_tokens > 0) != (args.draft is not None) or (args.spec_tokens > 0) != (args.acceptance is not None):
        raise RooflineError("speculative decoding takes --spec-tokens K, --acceptance A (or A1,...,AK by position) and "
                            "--draft MODEL (or --draft mtp, the model's own multi-token-prediction module) together",
                            field="spec_tokens")


def _attention_dp(args) -> None:
    d = args.attention_dp
    if d is None:
        return
    if not args.ep:
        raise RooflineError("--attention-dp D splits an expert-parallel group's attention into D data-parallel groups: "
                            "give --ep (without it --tp is tensor parallel throughout)", field="attention_dp")
    if args.tp_search is not None:
        raise RooflineError("--attention-dp with --tp-search is not modelled: the search sets each replica's size; give "
                            "--tp G --ep --attention-dp D", field="attention_dp")
    if args.tp % d:
        raise RooflineError(f"--attention-dp {d} must divide --tp {args.tp} (each group attention tensor-parallel over "
                            "--tp / D GPUs)", field="attention_dp")


def _tp_search(args) -> None:
    others = [f for f, v in (("--sweep", args.sweep), ("--rate", args.rate), ("--concurrency", args.concurrency),
                             ("--disagg", args.disagg), ("--disagg-search", args.disagg_search)) if v is not None]
    if not has_slo(args) or others:
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


def _disaggregation(args) -> None:
    if (args.disagg is not None or args.disagg_search is not None) and args.pp != 1:
        raise RooflineError(f"--pp {args.pp} with {'--disagg' if args.disagg is not None else '--disagg-search'} is not "
                            "modelled: the pools are simulated as tensor-parallel replicas (give --pp 1)", field="pp")
    slo = has_slo(args)
    if args.disagg_search is not None:
        if not slo or args.sweep or args.rate is not None or args.concurrency is not None or args.disagg is not None:
            raise RooflineError("--disagg-search G needs an SLO (--slo-ttft/--slo-tpot) and no --rate, --concurrency, "
                                "--sweep or --disagg", field="disagg_search")
        refuse_unused(args, {"target_rate": None, "price": None, "csv": False, "output": None, "breakdown": False,
                             "draft": None}, "to --disagg-search (it prints the splits' rates)")
    if (args.router is not None or args.first_token is not None) and args.disagg is None:
        raise RooflineError("--router and --first-token describe disaggregated pools: give --disagg P:D",
                            field="router" if args.router is not None else "first_token")
    if args.disagg is not None:
        if (args.rate is None and args.concurrency is None) or args.sweep or slo:
            raise RooflineError("--disagg P:D simulates open-loop arrivals (--rate) or a closed loop of users "
                                "(--concurrency): give one (the sweep and the SLO search run one pool)", field="disagg")
        if args.draft is not None:
            raise RooflineError("--disagg with speculative decoding is not modelled", field="disagg")
