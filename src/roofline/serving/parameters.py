"""One declaration per parameter of `roofline serving` and /api/serving (issue 37): its name, flag,
unit, default, range, help, and which of the two take it (a ``Param``, whose home is roofline.parameters,
with the other views' parameters). The CLI's flags (cli/serving_args.py), the API's query and its OpenAPI schema (web/params.py) and the page's controls (/api/options) are made
from this table, so they cannot disagree; tests/test_serving_parameters.py holds them equal.

Defaults are read from their homes (serving.Engine's fields, plan.limits, errors), never written
again here; where a parameter has no other home (the workload's lengths, the percentile), this is it.
No argparse, FastAPI or numpy: the CLI reads it at start.
"""

from __future__ import annotations

import dataclasses

from roofline.errors import DISAGG_BUDGET_REQUESTS, MAX_CONTEXT, MAX_REQUESTS
from roofline.parameters import (API, BOTH, CLI, MEMORY_FRACTION, PRICE, TENSOR_PARALLEL, WEB_MAX_TOKENS,  # noqa: F401
                                 WEB_MAX_TP, Param)  # (importable from here too)
from roofline.serving.engine import Engine
from roofline.serving.engine_params import (ACCEPTANCE, ADP_BATCHING_STEPS, ADP_TIMEOUT_STEPS, BATCH_WAIT_RATIO, BATCH_WAIT_STEPS, BLOCK_SIZE,  # noqa: F401
                                           EAGER_OP, GRAPH_TOKENS, RECV_INTERVAL, SCHEDULE_AHEAD,
                                           ENGINE_MEMORY, MAX_REQUEST_OVERHEAD_S,
                                           MAX_SEQS, MAX_STEP_OVERHEAD_S, MAX_TOKENS, PREFIX_HIT, REQUEST_OVERHEAD,
                                           SPEC_TOKENS, STEP_OVERHEAD, WEB_MAX_SEQS)

# The workload when none is given, and the percentile SLO targets hold for (serving.search's functions take
# the same 90 as their default: the test holds them equal)
INPUT_LEN, OUTPUT_LEN, PERCENTILE = 1024, 256, 90.0
# requests a run simulates when --requests is not given (the library's functions' default; a sweep: 8 per user,
# search.sweep_concurrency's), and the CLI's per run of a split search (it runs a search per split)
REQUESTS, DISAGG_SEARCH_REQUESTS = 1000, 500
CONCURRENCY = 64  # a run with neither --rate nor --concurrency: a closed loop of 64 users
MAX_USERS = 256  # the page's sweep, 1, 2, 4, ... 256 users
# The web view's tighter bounds: it simulates a sweep within a budget per request (web.compute)
WEB_MAX_OUTPUT_LEN, WEB_MAX_USERS = 32768, 4096


ENGINE_HELP = ("vllm, sglang or trtllm as it runs by default (data/engines.toml, each setting cited): its scheduler, "
               "budgets, cache blocks, memory share and time per step, and its measured kernels (--kernels) where the "
               "tables hold this GPU; any flag below given wins")

SERVING_PARAMS: tuple[Param, ...] = (
    Param("input_len", "--input-len", "input_len", "prompt tokens per request: N or LO-HI (uniform); default {default}",
          INPUT_LEN, maximum=MAX_CONTEXT, integer=True, cli_default=False, api_maximum=WEB_MAX_TOKENS,
          api_help="prompt tokens per request", label="Input tokens"),
    Param("output_len", "--output-len", "output_len", "output tokens per request: N or LO-HI (uniform); default {default}",
          OUTPUT_LEN, maximum=MAX_CONTEXT, integer=True, cli_default=False, api_maximum=WEB_MAX_OUTPUT_LEN,
          api_help="output tokens per request", label="Output tokens"),
    Param("requests", "--requests", None, f"requests simulated (default {REQUESTS:,}; a sweep: 8 per user, 200 to "
          f"20,000; --disagg-search: {DISAGG_SEARCH_REQUESTS})", maximum=MAX_REQUESTS, integer=True),
    Param("rate", "--rate", None, "Poisson arrivals, requests per second", maximum=1e9),
    Param("burstiness", "--burstiness", None, "open-loop arrivals' gamma shape, as vLLM's benchmark_serving: 1 Poisson "
          "(default), below 1 bursts, above 1 more even", minimum=0.01, strictly=False, maximum=1000),
    Param("concurrency", "--concurrency", None, "closed loop: users each sending the next request when the last "
          f"finishes (default {CONCURRENCY})", maximum=1 << 24, integer=True),
    Param("max_users", None, "max_users", "the sweep runs 1, 2, 4, ... concurrent users (closed loop) up to this, and "
          "this", MAX_USERS, minimum=1, strictly=False, maximum=WEB_MAX_USERS, integer=True, label="Concurrent users, up to"),
    Param("slo_ttft", "--slo-ttft", "slo_ttft_ms", "time-to-first-token target, e.g. 500ms: without --sweep, search "
          "the highest rate within the targets", maximum=1e6, unit="s", api_minimum=1e-6,
          api_help="time-to-first-token target in ms (none: no TTFT target)", label="TTFT target (ms)"),
    Param("slo_tpot", "--slo-tpot", "slo_tpot_ms", "time-per-output-token target, e.g. 30ms", maximum=1e6, unit="s",
          api_minimum=1e-6, api_help="time-per-output-token target in ms (none: no TPOT target)",
          label="TPOT target (ms)"),
    Param("percentile", "--percentile", "percentile", "the percentile the targets hold for (default {default})",
          PERCENTILE, maximum=100.0, api_minimum=1, api_help="the percentile the targets hold for",
          label="Percentile of the targets"),
    Param("target_rate", "--target-rate", None, "requests/s to serve: with an SLO, the replicas and GPUs needed",
          maximum=1e9),
    Param("engine", "--engine", "engine", ENGINE_HELP, minimum=None, text=True, metavar="ENGINE[@VERSION]",
          api_help="the scheduler settings of vllm, sglang or trtllm as it runs by default on this GPU (data/engines.toml, "
                   "each cited), any setting given over them, and its measured kernels where the tables hold this GPU or "
                   "transfer onto it (else the cost model, said), as the CLI's --engine; default: none, serving.Engine's "
                   "own settings",
          label="Engine"),
    MAX_SEQS,
    MAX_TOKENS,
    BLOCK_SIZE,
    ENGINE_MEMORY,
    STEP_OVERHEAD,
    EAGER_OP,
    GRAPH_TOKENS,
    REQUEST_OVERHEAD,
    BATCH_WAIT_STEPS,
    BATCH_WAIT_RATIO,
    ADP_TIMEOUT_STEPS,
    ADP_BATCHING_STEPS,
    RECV_INTERVAL,
    SCHEDULE_AHEAD,
    PREFIX_HIT,
    SPEC_TOKENS,
    # pipeline stages of an inference engine (plan.step_layout's bound, 1,024), not `train`'s pipeline parallelism
    Param("pipeline_parallel", "--pp", None, "pipeline stages of --tp GPUs each, a micro-batch per stage in flight "
          "(default {default})", 1, maximum=1024, integer=True),
    Param("attention_dp", "--attention-dp", None, "with --ep: D data-parallel attention groups over the --tp GPUs, each "
          "running attention and the dense ops tensor-parallel over --tp / D GPUs (SGLang's --dp D "
          "--enable-dp-attention; vLLM's data-parallel size); the experts stay split over all --tp. D 1: one group, "
          "attention tensor-parallel over all --tp and no all-to-all (TensorRT-LLM's --tp G --ep G, vLLM's "
          "--enable-expert-parallel without data parallelism). Default --tp: every GPU its own group", maximum=4096,
          integer=True, metavar="D"),
    Param("disagg_search", "--disagg-search", None, "with an SLO: the best split of G replicas into prefill and decode "
          "pools, against co-located; a search past " + f"{DISAGG_BUDGET_REQUESTS:,}" + " simulated requests (about a "
          "minute) is refused, naming the G that fits", minimum=2, strictly=False, maximum=64, integer=True, metavar="G"),
    dataclasses.replace(PRICE, api="price_per_gpu_hour", help="$ per GPU-hour: cost per token", api_minimum=1e-6,
                        api_help="$ per GPU-hour: cost per million output tokens", label="Price ($ per GPU-hour)"),
    Param("seed", "--seed", None, "random seed of arrivals and lengths", 0, strictly=False, maximum=2**32 - 1,
          integer=True),
    Param("seeds", "--seeds", None, "a single run (--rate or --concurrency): also rerun with this many seeds from "
          "--seed and print the spread of throughput, TTFT and TPOT (default 3; 1 for none)", maximum=100, integer=True),
    TENSOR_PARALLEL,  # the planning commands' and views' too: declared in roofline.parameters
)

BY_NAME = {p.name: p for p in SERVING_PARAMS}
BY_API = {p.api: p for p in SERVING_PARAMS if p.api}
# --tp is the planning commands' shared flag (cli.plan_args._add_tp): declared here for its range and default
SHARED_FLAGS = frozenset({"--tp"})

# The flags of `roofline serving` with a shape of their own (a file, a list, a pair, a name, a switch): the CLI's
# alone (cli.serving_args makes each with add_declared); --router's and --first-token's choices and defaults are
# serving.disagg's ROUTERS and FIRST_TOKENS and simulate_disaggregated's (the test holds them equal)
LENGTHS = Param("lengths", "--lengths", None, "each request's input and output tokens from a file, a request a line "
                "('input,output'; a header line allowed): a dataset's measured lengths; --requests defaults to its lines",
                minimum=None, text=True, metavar="FILE")
SWEEP = Param("sweep", "--sweep", None, "concurrencies to run, e.g. 1,4,16,64,256: the throughput-latency curve",
              maximum=BY_NAME["concurrency"].maximum, integer=True, many=True)
DRAFT = Param("draft", "--draft", None, "the draft model (a preset or config.json), on the same GPUs; or 'mtp': the "
              "model's own multi-token-prediction module (DeepSeek-V3)", minimum=None, text=True)
EP = Param("ep", "--ep", None, "MoE: expert parallelism over the --tp GPUs instead of tensor parallelism: the experts "
           "split whole, attention data-parallel (all-to-all dispatch and combine) unless --attention-dp says otherwise",
           False, minimum=None, switch=True)
# P and D replicas, each a whole number in this range (cli.serving_args.split_arg)
DISAGG = Param("disagg", "--disagg", None, "prefill/decode disaggregation: P prefill and D decode replicas of --tp GPUs "
               "each (with --rate, or --concurrency: a closed loop over both pools)", maximum=100_000, integer=True,
               metavar="P:D")
ROUTER = Param("router", "--router", None, "with --disagg: how requests spread over each pool's replicas (default "
               "random; round-robin is Dynamo's default router)", "random", minimum=None, text=True,
               choices=("random", "round-robin"), cli_default=False)
FIRST_TOKEN = Param("first_token", "--first-token", None, "with --disagg: the pool whose token the client sees first "
                    "(default prefill; decode: tokens stream from the decode pool, as Dynamo serves them, so TTFT takes "
                    "in the KV transfer)", "prefill", minimum=None, text=True, choices=("prefill", "decode"),
                    cli_default=False)
TP_SEARCH = Param("tp_search", "--tp-search", None, "with an SLO: the rate search at each replica size (--tp, or the "
                  "--ep group), and with --target-rate the size needing the fewest GPUs", maximum=TENSOR_PARALLEL.maximum,
                  integer=True, many=True, metavar="S1,S2,...")
KV_LINK = Param("kv_link", "--kv-link", None, "link the KV cache crosses from prefill to decode (default: infiniband or "
                "roce, else the scale-up link)", minimum=None, text=True)
EAGER = Param("eager", "--eager", None, "no CUDA graph: every op of every step pays a launch", False, minimum=None,
              switch=True)
BREAKDOWN = Param("breakdown", "--breakdown", None, "also print a decode step and a step with a prompt chunk of the run, "
                  "op by op", False, minimum=None, switch=True)
SERVING_SHAPED = (LENGTHS, SWEEP, DRAFT, EP, DISAGG, ROUTER, FIRST_TOKEN, TP_SEARCH, KV_LINK, EAGER, BREAKDOWN)


def engine_of(name: str | None, machine, layout: dict | None = None, **given) -> Engine:
    """The Engine of a run: engine ``name``'s defaults on ``machine`` for ``layout`` (serving.engines.preset's
    tensor_parallel, pipeline_stages, attention_dp: SGLang sizes its memory share from them) or Engine's own,
    with each setting in ``given`` that is not None over them (the CLI's flags, the API's query)."""
    if name:
        from roofline.serving.engines import preset

        return preset(name, machine, **(layout or {})).engine(**given)
    return Engine(**{k: v for k, v in given.items() if v is not None})
