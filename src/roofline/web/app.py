"""The workshop's web app (docs/workshop.md): a JSON API over ``layer_report`` and the page that draws it.

GET /api/machines, /api/models, /api/options    what the controls offer, and the seed defaults
GET /api/layer                                  LayerReport.to_dict() + readouts, sentence, chart
GET /api/layer.csv, /api/layer.json             the op table as a download
GET /api/model                                  the whole model (plan.predict_model): time to first
                                                token or one decode step, its parts, memory fit
GET /api/decode                                 decode versus batch (plan.decode.decode_plan)
GET /api/serving                                a deployment under load (serving.sweep_concurrency):
                                                throughput against per-user speed, TTFT/TPOT, the SLO
GET /api/exercise, /api/exercise/check          teaching mode (web.exercises): a question from its
                                                kind and seed; an answer checked, with the derivation
GET /, /static/...                              the page; Plotly.js (the vendored bar + scatter bundle, else
                                                the installed plotly package's full one)

Every invalid parameter gets a 422 whose body names ``field`` (FastAPI's validation and the
library's RooflineError alike); a query parameter the endpoint does not take, or one given twice,
too. The app keeps no state between requests: the machine table is built once in ``create_app``
and only read.
"""

# No ``from __future__ import annotations``: FastAPI reads the endpoint annotations, which name
# Literal types built inside create_app.

import asyncio
import contextlib
import dataclasses
import functools
import gzip
import weakref
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Optional

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from roofline.blocks import ATTENTIONS, PHASES, layer_report
from roofline.plan.decode import decode_plan, step_bound_runs
from roofline.plan.memory import inference_memory
from roofline.cost import MIN_EFFICIENCY, CostModel
from roofline.errors import RooflineError, unknown_name
from roofline.machines import Machine, list_machines, load_machine_file
from roofline.plan.decode import DEFAULT_BATCHES
from roofline.plan.precision import QUANT_DTYPES, Precision
from roofline.plan.inference import decode_step, predict_model
from roofline.plan.memory import kv_overtakes_weights_context
from roofline.plan.parallel import tp_link
from roofline.architecture import Model
from roofline.transformer import list_models, model_summary
from roofline.units import DTYPE_BYTES, MS, US, format_si
from roofline.web.explain import fix_first, fix_lists, op_rows
from roofline.web.payload import json_safe, layer_csv, layer_payload
from roofline.web.plan_payload import curve_batches, decode_payload, model_payload, serving_payload
from roofline.web.exercises import KINDS as EXERCISE_KINDS, MAX_ANSWER_CHARS, MAX_SEED, check_answer, make_exercise

STATIC_DIR = Path(__file__).parent / "static"
# plotly.js's "basic" partial bundle (npm plotly.js-basic-dist-min 4.1.1, the plotly.js of the
# Python plotly package; MIT, its LICENSE beside it): the page draws only bar and scatter traces.
VENDORED_PLOTLY_JS = STATIC_DIR / "vendor" / "plotly-basic.min.js"
GZIP_MIN_BYTES = 1000
MAX_TOKENS = 131072  # the slider's range, 2^17
MAX_BATCH = 65536
MAX_LAUNCH_US = 1e6  # the library's limit: one second per launch

# The workshop of the 'Predicting a Kernel's Time' plate: Llama 3 8B on an H100, one 8,192-token sequence, attention unfused,
# e_c = 0.70, e_m = 0.85, 3 µs per launch, perfect overlap.
SEED_DEFAULTS = MappingProxyType(
    {
        "machine": "h100-sxm",
        "model": "llama3-8b",
        "phase": "prefill",
        "tokens": 8192,
        "batch": 1,
        "attention": "naive",
        "compute_efficiency": 0.70,
        "memory_efficiency": 0.85,
        "launch_overhead_us": 3.0,
        "overlap": 1.0,
    }
)
# What the API takes when a query leaves them out, as the CLI does: the attention of each view's
# command (`layer`: the seed's naive; `decode`, the whole model: flash) and the machine's preset launch.
VIEW_ATTENTION = MappingProxyType({"layer": "naive", "model": "flash", "decode": "flash", "serving": "flash"})
QUERY_DEFAULTS = MappingProxyType({k: v for k, v in SEED_DEFAULTS.items() if k not in ("attention", "launch_overhead_us")})

# Library field names that the API spells differently (the planner's Precision names each part's
# dtype; the API has one dtype for all three, with weights and kv_cache over it in the plan views:
# library_call names those when the query gave them).
_API_FIELD = {"launch_overhead_s": "launch_overhead_us", "weights dtype": "dtype", "activations dtype": "dtype",
              "kv_cache dtype": "dtype", "tensor_parallel": "tp", "gpus_per_node": "tp"}
VIEWS = (("layer", "One layer"), ("model", "Whole model"), ("decode", "Decode vs batch"), ("serving", "Serving"))

# The serving view (/api/serving): `roofline serving --sweep 1,2,4,...,U` with the page's limits.
MAX_INPUT_LEN, MAX_OUTPUT_LEN, MAX_USERS = MAX_TOKENS, 32768, 4096
MAX_TP = 64
MAX_SEQS, MAX_STEP_TOKENS = 4096, MAX_TOKENS
MIN_TARGET_MS, MIN_PRICE = 1e-3, 1e-6  # a microsecond; a millionth of a dollar (5e-324 passes "> 0" and underflows)
# What the page starts with (the API's own defaults leave the targets out): the workshop's model and
# machine, the CLI's workload (1,024 in, 256 out), targets of TTFT p90 <= 500 ms, TPOT p90 <= 30 ms.
SERVING_DEFAULTS = MappingProxyType({"input_len": 1024, "output_len": 256, "max_users": 256, "slo_ttft_ms": 500.0,
                                     "slo_tpot_ms": 30.0})
SERVING_QUERY_DEFAULTS = MappingProxyType({"max_seqs": 256, "max_tokens": 8192, "memory_fraction": 0.9, "prefix_hit": 0.0,
                                           "percentile": 90.0, "tp": 1})
# The library's field names that /api/serving spells differently.
_SERVING_FIELD = {"tensor_parallel": "tp", "concurrency": "max_users", "requests": "max_users", "slo_ttft": "slo_ttft_ms",
                  "slo_tpot": "slo_tpot_ms", "link": "tp", "gpus_per_node": "tp", "block_size": "max_tokens"}


def token_stops(maximum: int = MAX_TOKENS) -> list[int]:
    """The log-scale slider's positions: 1, 2, 3, 4, 6, 8, 12, ... (2^k and 3 2^(k-1)) up to
    ``maximum``. The typed entry takes any whole number in between."""
    stops, k = [1], 1
    while 2**k <= maximum:
        stops += [v for v in (3 * 2 ** (k - 2) if k >= 2 else 0, 2**k) if v > stops[-1]]
        k += 1
    return stops


def _machine_table(machine_files: list[str] | None) -> tuple[MappingProxyType, MappingProxyType]:
    """{key: Machine} for the presets and every machine in ``machine_files``, and {key: origin}."""
    machines: dict[str, Machine] = {m.key: m for m in list_machines()}
    origin = {key: "preset" for key in machines}
    for path in machine_files or []:
        for key, m in load_machine_file(path).items():
            if key in machines:
                raise RooflineError(
                    f"machine file {str(path)!r} defines {key!r}, which is already "
                    f"{'a preset' if origin[key] == 'preset' else 'in ' + origin[key]}; rename it",
                    field="machine",
                )
            machines[key] = m
            origin[key] = str(path)
    return MappingProxyType(machines), MappingProxyType(origin)


def _machine_dict(m: Machine, origin: str) -> dict:
    return {
        "key": m.key,
        "name": m.name,
        "vendor": m.vendor,
        "origin": origin,
        "default_dtype": m.default_dtype,
        "dtypes": list(m.dtypes),
        "peak_flops_per_s": m.peak_flops,
        "bytes_per_s": m.bandwidth,
        "ridge_flop_per_byte": m.ridge_point,
        "launch_overhead_s": m.launch_overhead_s,
        "launch_overhead_us": (m.launch_overhead_s or 0.0) / US,
        "label": m.name,
        "detail": f"{format_si(m.peak_flops, 'FLOP/s')} {m.default_dtype} · {format_si(m.bandwidth, 'B/s')} · "
                  f"ridge {m.ridge_point:,.0f} FLOP/byte",
    }


def _model_dict(c: Model) -> dict:
    """A model as the page lists it: model_summary (layers, kinds, totals), with the attention shape
    of its first attention layer and its experts (None where it has none)."""
    a = c.first_attention
    moe = next((k.mlp for k in c.kinds if k.is_moe), None)
    return {
        **model_summary(c),
        "n_layers": c.n_layers,
        "n_heads": getattr(a, "heads", None),
        "n_kv_heads": getattr(a, "kv_heads", None),
        "head_dim": getattr(a, "head_dim", getattr(a, "qk_head_dim", None)),
        "n_experts": moe.n_experts if moe else 1,
        "experts_per_token": moe.top_k if moe else 1,
        "uniform": c.is_uniform,
        "label": c.name,
    }


@dataclass(frozen=True)
class LayerQuery:
    """One request's parameters (/api/layer, /api/model, /api/decode), validated."""

    machine: str
    model: str
    phase: str
    tokens: int
    batch: int
    context: Optional[int]
    attention: Optional[str]
    dtype: Optional[str]
    compute_efficiency: float
    memory_efficiency: float
    launch_overhead_us: Optional[float]
    overlap: float
    layer: Optional[int] = None
    cuda_graph: bool = False  # one launch per pass (`--cuda-graph`)
    weights: Optional[str] = None  # the plan views: weights and KV cache over dtype, tensor-parallel GPUs
    kv_cache: Optional[str] = None
    tp: int = 1


@dataclass(frozen=True)
class ServingQuery:
    """/api/serving's parameters, validated: the workload, the engine, the targets and the cost model."""

    machine: str
    model: str
    dtype: Optional[str]
    tp: int
    input_len: int
    output_len: int
    max_users: int
    max_seqs: int
    max_tokens: int
    memory_fraction: float
    prefix_hit: float
    slo_ttft_ms: Optional[float]
    slo_tpot_ms: Optional[float]
    percentile: float
    price_per_gpu_hour: Optional[float]
    attention: Optional[str]
    compute_efficiency: float
    memory_efficiency: float
    launch_overhead_us: Optional[float]
    overlap: float


def concurrencies(max_users: int) -> list[int]:
    """The users a sweep runs: 1, 2, 4, ... below ``max_users``, and ``max_users``."""
    out, c = [], 1
    while c < max_users:
        out.append(c)
        c *= 2
    return out + [max_users]


# The serving view's bound: one /api/serving request simulates at most about SWEEP_BUDGET_S of this
# machine's CPU time (the whole sweep), so a request stays well under a second. Each point runs
# requests_per_point(users) requests; the points past the budget are left out and the answer says so
# (`roofline serving --sweep` has no bound).
SWEEP_BUDGET_S = 0.4
REQUESTS_PER_USER, MAX_REQUESTS_PER_POINT = 8, 2000
_REFERENCE_OPS = 27  # ops of a decode step and of a prompt chunk's step of Llama 3 8B, on which the costs were timed


def requests_per_point(users: int) -> int:
    """8 requests per user, at most 2,000, but at least one per user (past 2,000 users)."""
    return min(REQUESTS_PER_USER * users, max(MAX_REQUESTS_PER_POINT, users))


def simulation_cost_s(users: int, requests: int, input_len: int, output_len: int, engine, fit: int, ops: int) -> float:
    """An estimate (from the workload, not a clock) of the CPU seconds the simulator takes for one
    closed-loop point, timed on this project's machine across models and lengths (within 0.4 to 2.4
    times): decode steps at about 0.6 us each (they run in vectorised stretches), a step that feeds
    prompt chunks about 60 us, a preemption its recompute, 10 us per request; scaled by the ops of
    a step. ``fit`` is how many whole requests the KV cache holds at once."""
    running = max(1, min(users, engine.max_seqs, requests))
    batch = max(1, min(running, fit))
    decode_steps = requests * output_len / batch
    chunk_steps = requests * input_len / engine.max_tokens + requests / batch
    grow = output_len / (input_len + output_len)
    preemptions = 2.0 * grow**3 * min(max(0.0, running / max(fit, 1) - 1.0), 4.0) * requests
    weight = ops / _REFERENCE_OPS
    us = weight * (0.6 * decode_steps + 60.0 * chunk_steps
                   + preemptions * (150.0 + 60.0 * (input_len + output_len / 2) / engine.max_tokens))
    return us * US + 10.0 * US * requests + 0.003


def _finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


def _check_finite(p) -> None:
    """A positive but vanishing efficiency (5e-324 passes "greater than 0") overflows the times to
    infinity: reject it as the field that caused it rather than answer with nulls. ``p`` is a
    WorkloadPrediction (its sizes may be arrays)."""
    if _finite(p.total_s) and _finite(p.flops_only_s) and _finite(p.bytes_only_s):
        return
    field = "compute_efficiency" if not _finite(p.flops_only_s) else "memory_efficiency"
    raise RooflineError(f"{field} {getattr(p.model, field)!r} is too small: the predicted time overflows", field=field)


def _error_response(errors: list[dict]) -> JSONResponse:
    fields = [e["loc"][-1] for e in errors if e.get("loc")]
    return JSONResponse(status_code=422, content={"field": fields[0] if fields else None, "fields": fields, "detail": errors})


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver")  # testserver: Starlette's test client


# Bounded work: the plan views (whole model, decode vs batch; ~10 ms each here) and the light views
# (one layer, the option lists) each run at most this many at once; more wait in the event loop (no
# thread held) up to QUEUE_WAIT_S, then get a 503 with Retry-After. Separate pools keep a burst of
# decode requests from queueing a slider move on the layer view behind it.
MAX_INFLIGHT = {"plan": 2, "light": 4}
QUEUE_WAIT_S = 1.0
REQUEST_READ_TIMEOUT_S = 10.0  # a connection must finish sending a request's head within this
MAX_CONNECTIONS = 1024  # uvicorn answers 503 past this many connections and tasks at once


def _pool(running: int, name: str):
    """A FastAPI dependency that holds one of ``running`` places while its request computes. The
    semaphore is made per event loop (the test client starts one per request)."""
    semaphores: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = weakref.WeakKeyDictionary()

    async def slot():
        loop = asyncio.get_running_loop()
        sem = semaphores.get(loop)
        if sem is None:
            sem = semaphores[loop] = asyncio.Semaphore(running)
        try:
            await asyncio.wait_for(sem.acquire(), QUEUE_WAIT_S)
        except TimeoutError:
            raise HTTPException(status_code=503, detail=f"busy: {running} {name} computations are running and more "
                                f"waited {QUEUE_WAIT_S:g} s; retry", headers={"Retry-After": "1"}) from None
        try:
            yield
        finally:
            sem.release()

    return slot


def create_app(machine_files: list[str] | None = None, allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
               max_inflight: dict | None = None) -> FastAPI:
    """The workshop app. ``machine_files`` are TOML machine files whose machines join the presets.
    Requests whose Host header is not in ``allowed_hosts`` get a 400: a web page elsewhere cannot
    read this server through a DNS-rebound name. ``/docs`` and ``/redoc`` (which load scripts from a
    CDN) are off; the schema is at ``/openapi.json``."""
    machines, origins = _machine_table(machine_files)
    models = MappingProxyType({c.key: c for c in list_models()})
    MachineKey = Literal[tuple(machines)]  # the OpenAPI schema lists the choices
    ModelKey = Literal[tuple(models)]
    Phase = Literal[PHASES]
    Attention = Literal[ATTENTIONS]
    Dtype = Literal[tuple(DTYPE_BYTES)]
    PlanDtype = Literal[QUANT_DTYPES]

    app = FastAPI(
        title="roofline workshop",
        version="1",
        docs_url=None,
        redoc_url=None,
        responses={503: {"description": "Busy: the computations allowed at once are running and this request "
                         "waited its limit; retry after the Retry-After header's seconds"}},
        description="The workshop (the 'Predicting a Kernel's Time' plate): the predicted time of each op of one transformer layer, of the whole "
                    "model, and of decode versus batch.",
    )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in exc.errors()]
        return _error_response(errors)

    from starlette.middleware.gzip import GZipMiddleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    running = {**MAX_INFLIGHT, **(max_inflight or {})}
    plan_slot, light_slot = _pool(running["plan"], "plan"), _pool(running["light"], "light")

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    # Bodies past 1 kB go gzip-compressed to a client that accepts it (zlib's default level: the
    # largest JSON, ~30 kB, in under a millisecond); Plotly is compressed once (below) and passes as is.
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES, compresslevel=6)
    endpoint_names: dict[str, frozenset] = {}  # each /api/ path's query parameters, from the schema (filled below)

    @app.middleware("http")
    async def _unknown_parameters(request: Request, call_next):
        """A query parameter the endpoint does not take is a 422 naming it, never silently ignored:
        /api/serving refuses tokens=, /api/layer input_len=. The names are each endpoint's own, as
        its OpenAPI schema lists them (a path that is no endpoint is left to its 404)."""
        path = request.url.path
        if path.startswith("/api/") and path in endpoint_names:
            takes = endpoint_names[path]
            names = [k for k, _ in request.query_params.multi_items()]
            repeated = sorted({k for k in names if names.count(k) > 1} & takes)
            if repeated:  # which one would count is a guess: say so instead
                return _error_response([{"loc": ["query", name], "msg": f"query parameter {name!r} is given "
                                         f"{names.count(name)} times; give it once", "type": "repeated_parameter"}
                                        for name in repeated])
            unknown = sorted(set(request.query_params) - takes)
            if unknown:
                what = f"takes {', '.join(sorted(takes))}" if takes else "takes no query parameters"
                return _error_response([{"loc": ["query", name or "query"], "msg": f"unknown query parameter {name!r}; "
                                         f"{path} {what}", "type": "unknown_parameter"}
                                        for name in unknown])
        return await call_next(request)

    @app.exception_handler(RooflineError)
    async def _roofline_error(request: Request, exc: RooflineError):
        field = _API_FIELD.get(exc.field or "", exc.field) or "query"
        return _error_response([{"loc": ["query", field], "msg": str(exc), "type": "roofline_error"}])

    def query_dependency(Dtype):
        """The query parameters, with ``Dtype`` the dtypes the endpoint takes (the plan views store
        weights and caches only in QUANT_DTYPES: no fp64 or tf32)."""

        def query(
            machine: MachineKey = Query(SEED_DEFAULTS["machine"], description="machine preset or file machine key"),
            model: ModelKey = Query(SEED_DEFAULTS["model"], description="model preset"),
            phase: Phase = Query(SEED_DEFAULTS["phase"], description="prefill (T tokens) or decode (one token at context S)"),
            tokens: int = Query(SEED_DEFAULTS["tokens"], ge=1, le=MAX_TOKENS, description="prefill: tokens per sequence T; decode: the context S unless context is given"),
            batch: int = Query(SEED_DEFAULTS["batch"], ge=1, le=MAX_BATCH, description="sequences B"),
            context: Optional[int] = Query(None, ge=1, le=MAX_TOKENS, description="decode: tokens already in the KV cache, S (default: tokens); prefill: positions attended, S >= tokens (a chunked-prefill step; default tokens)"),
            attention: Optional[Attention] = Query(None, description="naive (QK^T, softmax, PV unfused) or flash (default: "
                                                   "naive for the layer view, as `roofline layer`; flash for the model and "
                                                   "decode views, as `roofline decode`)"),
            dtype: Optional[Dtype] = Query(None, description="default: the machine's default dtype"),
            compute_efficiency: float = Query(SEED_DEFAULTS["compute_efficiency"], ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False, description="e_c, achievable fraction of peak FLOP/s"),
            memory_efficiency: float = Query(SEED_DEFAULTS["memory_efficiency"], ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False, description="e_m, achievable fraction of peak bandwidth"),
            launch_overhead_us: Optional[float] = Query(None, ge=0, le=MAX_LAUNCH_US, allow_inf_nan=False, description="microseconds per kernel launch (default: the machine's preset, as the CLI)"),
            overlap: float = Query(SEED_DEFAULTS["overlap"], ge=0, le=1, allow_inf_nan=False, description="1: max(compute, memory) (perfect overlap, the roofline's); 0: their sum"),
            layer: Optional[int] = Query(None, ge=0, le=1000, description="the layer view: layer index (default 0; models with one layer kind ignore it)"),
            cuda_graph: bool = Query(False, description="one launch for the whole pass, shared by its ops (a CUDA graph "
                                     "replayed), as the CLI's --cuda-graph; default: one launch per op"),
        ) -> LayerQuery:
            return LayerQuery(machine, model, phase, tokens, batch, context, attention, dtype,
                              compute_efficiency, memory_efficiency, launch_overhead_us, overlap, layer, cuda_graph)

        return query

    layer_query = query_dependency(Dtype)

    def plan_query(
        q: LayerQuery = Depends(query_dependency(PlanDtype)),
        weights: Optional[PlanDtype] = Query(None, description="weight storage dtype (default: dtype; a quantised "
                                             "checkpoint's weights as stored when neither is given), as `--weights`"),
        kv_cache: Optional[PlanDtype] = Query(None, description="KV-cache storage dtype (default: dtype), as `--kv-cache`"),
        tp: int = Query(1, ge=1, le=MAX_TP, description="tensor-parallel GPUs per model copy, over the machine's link "
                        "(its nvlink, else xgmi, ...; past 8 GPUs its infiniband or roce), as `--tp`; the heads must split"),
    ) -> LayerQuery:
        """The whole-model views' query: the layer view's, with each part's precision and tensor parallelism."""
        return dataclasses.replace(q, weights=weights, kv_cache=kv_cache, tp=tp)

    def serving_query(
        machine: MachineKey = Query(SEED_DEFAULTS["machine"], description="machine preset or file machine key"),
        model: ModelKey = Query(SEED_DEFAULTS["model"], description="model preset"),
        dtype: Optional[PlanDtype] = Query(None, description="weights, activations and KV cache (default: the machine's; "
                                           "a quantised checkpoint's weights as stored), as `roofline serving --dtype`"),
        tp: int = Query(SERVING_QUERY_DEFAULTS["tp"], ge=1, le=MAX_TP, description="tensor-parallel GPUs per replica"),
        input_len: int = Query(SERVING_DEFAULTS["input_len"], ge=1, le=MAX_INPUT_LEN, description="prompt tokens per request"),
        output_len: int = Query(SERVING_DEFAULTS["output_len"], ge=1, le=MAX_OUTPUT_LEN, description="output tokens per request"),
        max_users: int = Query(SERVING_DEFAULTS["max_users"], ge=1, le=MAX_USERS, description="the sweep runs 1, 2, 4, ... "
                               "concurrent users (closed loop) up to this, and this"),
        max_seqs: int = Query(SERVING_QUERY_DEFAULTS["max_seqs"], ge=1, le=MAX_SEQS, description="sequences running at once "
                              "(vLLM max_num_seqs; at most max_tokens)"),
        max_tokens: int = Query(SERVING_QUERY_DEFAULTS["max_tokens"], ge=1, le=MAX_STEP_TOKENS, description="tokens per "
                                "step (vLLM max_num_batched_tokens)"),
        memory_fraction: float = Query(SERVING_QUERY_DEFAULTS["memory_fraction"], ge=0.001, le=1, allow_inf_nan=False,
                                       description="share of GPU memory the engine takes (vLLM gpu_memory_utilization)"),
        prefix_hit: float = Query(SERVING_QUERY_DEFAULTS["prefix_hit"], ge=0, le=1, allow_inf_nan=False,
                                  description="share of each prompt found in the prefix cache"),
        slo_ttft_ms: Optional[float] = Query(None, ge=MIN_TARGET_MS, le=1e9, allow_inf_nan=False, description="time-to-first-token "
                                             "target in ms (none: no TTFT target)"),
        slo_tpot_ms: Optional[float] = Query(None, ge=MIN_TARGET_MS, le=1e9, allow_inf_nan=False, description="time-per-output-token "
                                             "target in ms (none: no TPOT target)"),
        percentile: float = Query(SERVING_QUERY_DEFAULTS["percentile"], ge=1, le=100, allow_inf_nan=False,
                                  description="the percentile the targets hold for"),
        price_per_gpu_hour: Optional[float] = Query(None, ge=MIN_PRICE, le=1e6, allow_inf_nan=False, description="$ per GPU-hour: "
                                                    "cost per million output tokens"),
        attention: Optional[Attention] = Query(None, description="flash (default, as `roofline serving`) or naive"),
        compute_efficiency: float = Query(SEED_DEFAULTS["compute_efficiency"], ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False, description="e_c, achievable fraction of peak FLOP/s"),
        memory_efficiency: float = Query(SEED_DEFAULTS["memory_efficiency"], ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False, description="e_m, achievable fraction of peak bandwidth"),
        launch_overhead_us: Optional[float] = Query(None, ge=0, le=MAX_LAUNCH_US, allow_inf_nan=False, description="microseconds per kernel launch (default: the machine's preset, as the CLI); a decode-only step replays a CUDA graph, one launch"),
        overlap: float = Query(SEED_DEFAULTS["overlap"], ge=0, le=1, allow_inf_nan=False, description="1: max(compute, memory) (perfect overlap, the roofline's); 0: their sum"),
    ) -> ServingQuery:
        return ServingQuery(machine, model, dtype, tp, input_len, output_len, max_users, max_seqs, max_tokens, memory_fraction,
                            prefix_hit, slo_ttft_ms, slo_tpot_ms, percentile, price_per_gpu_hour, attention,
                            compute_efficiency, memory_efficiency, launch_overhead_us, overlap)

    def settle(q, view: str):
        """The query with what it left out filled as the CLI fills it (VIEW_ATTENTION, the machine's launch)."""
        launch = q.launch_overhead_us
        if launch is None:
            launch = machine_of(q).launch_overhead_s / US
        return dataclasses.replace(q, attention=q.attention or VIEW_ATTENTION[view], launch_overhead_us=launch)

    def machine_of(q) -> Machine:
        machine = machines.get(q.machine)
        if machine is None:  # unreachable through the schema; kept for direct callers
            raise unknown_name("machine", q.machine, machines)
        return machine

    def cost_model_of(q) -> CostModel:
        return CostModel(q.compute_efficiency, q.memory_efficiency, q.launch_overhead_us * US, q.overlap,
                         getattr(q, "cuda_graph", False))

    @contextlib.contextmanager
    def library_call(q: LayerQuery):
        """Overflow is checked afterwards and named as a field; decode's context came from tokens
        when the query gave none, so the error names tokens."""
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                yield
        except RooflineError as exc:
            if exc.field == "context" and q.context is None:
                exc.field = "tokens"
            part = {"weights dtype": "weights", "kv_cache dtype": "kv_cache"}.get(exc.field)
            if part and getattr(q, part):  # the part the query gave, else the dtype it came from
                exc.field = part
            if exc.field == "tensor_parallel":  # as this API spells it: "tp 3 must divide ..."
                raise RooflineError(str(exc).replace("tensor_parallel", "tp"), field="tp") from None
            raise

    def compute(q: LayerQuery):
        machine, cost_model = machine_of(q), cost_model_of(q)
        n_layers = models[q.model].n_layers
        if q.layer is not None and q.layer >= n_layers:  # refused as the CLI refuses it, for every model
            raise RooflineError(f"layer {q.layer}: {models[q.model].name} has layers 0 to {n_layers - 1}", field="layer")
        with library_call(q):
            report = layer_report(
                model=models[q.model], machine=machine, phase=q.phase,
                tokens=None if (q.phase == "decode" and q.context is not None) else q.tokens, batch=q.batch,
                context=q.context, attention=q.attention, dtype=q.dtype or machine.default_dtype,
                cost_model=cost_model, layer=None if models[q.model].is_uniform else (q.layer or 0),
            )
        _check_finite(report.prediction)
        return report, machine, cost_model

    def layer_alternatives(q: LayerQuery, machine: Machine, dtype: str) -> list:
        """The single changes the layer view tries for its "fix this first" line: fused attention,
        fp8 where the machine has an fp8 peak, and a graph of the layer's kernels (launches at no
        cost: the most a CUDA/HIP graph can save)."""
        def layer(**change):
            return lambda: compute(dataclasses.replace(q, **change))[0]

        out = []
        if q.attention == "naive":
            out.append(("fused (flash) attention", layer(attention="flash")))
        if dtype in ("bf16", "fp16") and "fp8" in dict(machine.peaks):
            out.append(("fp8 weights and activations (check the accuracy)", layer(dtype="fp8")))
        graph = {"NVIDIA": "a CUDA graph", "AMD": "a HIP graph"}.get(machine.vendor)
        if graph and q.launch_overhead_us > 0 and not q.cuda_graph:
            out.append((f"{graph} for the layer, at most (launch overhead to zero)", layer(launch_overhead_us=0.0)))
        return out

    def precision_of(q, machine: Machine) -> Precision:
        """One dtype for weights, activations and KV cache (default: the machine's), with the
        query's weights and kv_cache over it (the plan views); a quantised checkpoint's weights as
        stored when the query names neither dtype nor weights, as the CLI (Precision.resolve)."""
        return Precision.resolve(models[q.model], machine, q.dtype, getattr(q, "weights", None), None,
                                 getattr(q, "kv_cache", None))

    def plan_inputs(q: LayerQuery) -> dict:
        """The planner's arguments shared by /api/model and /api/decode: with tp > 1, the link the
        all-reduces cross (tp_link: the machine's scale-up link, its network past a node)."""
        machine = machine_of(q)
        with library_call(q):
            precision = precision_of(q, machine)
            link = tp_link(machine, None, q.tp) if q.tp > 1 else None
        return {"machine": machine, "attention": q.attention, "precision": precision, "cost_model": cost_model_of(q),
                "tensor_parallel": q.tp, "link": link}

    def context_of(q: LayerQuery) -> int:
        """Tokens in each sequence's KV cache: the prompt in prefill; in decode the context, or
        tokens when none is given (as /api/layer)."""
        return q.context or q.tokens

    def compute_model(q: LayerQuery):
        common = plan_inputs(q)
        cfg, S = models[q.model], context_of(q)
        with library_call(q):
            if q.phase == "prefill":
                pred = predict_model(cfg, phase="prefill", tokens=q.tokens, batch=q.batch, context=q.context, **common)
            else:
                pred = predict_model(cfg, phase="decode", tokens=1, batch=q.batch, context=S, **common)
            memory = inference_memory(cfg, common["machine"], q.batch, S, common["precision"], q.tp)
            crossover = kv_overtakes_weights_context(cfg, q.batch, common["precision"], q.tp)
        _check_finite(pred.prediction)
        return pred, memory, crossover

    def compute_decode(q: LayerQuery):
        common = plan_inputs(q)
        cfg = models[q.model]
        S = q.context or q.tokens  # this view is decode whatever the phase: tokens is the context
        with library_call(q):
            plan = decode_plan(cfg, batches=(*DEFAULT_BATCHES, q.batch), context=S, curve="none", **common)
            # the curves at the ~250 batches the chart draws, not at every batch up to the largest
            top = int(max(*DEFAULT_BATCHES, q.batch))
            shown = curve_batches(top, (plan.compute_bound_batch, plan.max_batch_in_memory, q.batch))
            plan = dataclasses.replace(plan, curve=decode_step(cfg, batch=shown, context=S, **common))
            crossover = kv_overtakes_weights_context(cfg, q.batch, common["precision"], q.tp)
        _check_finite(plan.step.prediction)
        return plan, crossover

    @contextlib.contextmanager
    def serving_call():
        """The library's errors named as /api/serving spells its fields."""
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                yield
        except RooflineError as exc:
            exc.field = _SERVING_FIELD.get(exc.field or "", exc.field)
            raise

    def compute_serving(q: ServingQuery):
        """`roofline serving --sweep 1,2,4,...,U --json` for the query, point by point (each with
        requests_per_point(users) requests, as `--sweep C --requests N`), the points past
        SWEEP_BUDGET_S left out. Returns the sweep, the StepCost, the engine and the bound's account."""
        from roofline.serving.engine import Engine
        from roofline.serving.search import ServingSweep, meets_slo, sweep_concurrency
        from roofline.plan.step import StepCost, kv_cache_budget, sequence_cache_bytes

        machine = machine_of(q)
        with serving_call():
            precision = precision_of(q, machine)
            cost_model = dataclasses.replace(cost_model_of(q), cuda_graph=True)  # `roofline serving` without --eager
            engine = Engine(max_seqs=q.max_seqs, max_tokens=q.max_tokens, memory_fraction=q.memory_fraction,
                            prefix_hit=q.prefix_hit)
            step = StepCost(models[q.model], machine, precision, tensor_parallel=q.tp, cost_model=cost_model,
                            attention=q.attention, max_tokens=engine.max_tokens, max_seqs=engine.max_seqs)
            cap, _ = kv_cache_budget(step, engine.memory_fraction)
            per_request = sequence_cache_bytes(step, engine.block_size, -(-(q.input_len + q.output_len) // engine.block_size))[-1]
            fit = int(cap // per_request) if per_request > 0 else engine.max_seqs
            ops = len(step.ops([1])) + len(step.ops([], [(1, 0)]))  # a decode step's ops and a prompt chunk's
            wanted = concurrencies(q.max_users)
            swept, counts, spent = [], [], 0.0
            for users in wanted:
                n = requests_per_point(users)
                cost = simulation_cost_s(users, n, q.input_len, q.output_len, engine, fit, ops)
                if not swept and cost > SWEEP_BUDGET_S and fit >= 1:  # not even one user fits the bound
                    chunks = q.input_len / engine.max_tokens
                    field = "max_tokens" if chunks * 60 > q.output_len / max(1, min(fit, engine.max_seqs)) else "output_len"
                    raise RooflineError(
                        f"one user sending {n:,} requests of {q.input_len:,} + {q.output_len:,} tokens "
                        f"({engine.max_tokens:,} token{'s' if engine.max_tokens != 1 else ''} a step) would take about {cost:,.1f} s to simulate, past this "
                        f"view's bound of {SWEEP_BUDGET_S:g} s a request: "
                        + ("raise max_tokens or shorten input_len" if field == "max_tokens" else "shorten output_len")
                        + " (`roofline serving` has no bound)", field=field)
                if swept and spent + cost > SWEEP_BUDGET_S:
                    break
                swept.append(users)
                counts.append(n)
                spent += cost
            ttft_s = None if q.slo_ttft_ms is None else q.slo_ttft_ms * MS
            tpot_s = None if q.slo_tpot_ms is None else q.slo_tpot_ms * MS
            points = [sweep_concurrency(step, [users], q.input_len, q.output_len, engine, requests=n, seed=0,
                                        price_per_gpu_hour=q.price_per_gpu_hour, ttft_s=ttft_s, tpot_s=tpot_s,
                                        percentile=q.percentile)
                      for users, n in zip(swept, counts)]
        slo = None
        if points[0].slo is not None:  # the targets as the library states them; best over every point
            slo = {k: v for k, v in points[0].slo.items() if k != "best"}
            ok = [users for users, p in zip(swept, points) if meets_slo(p.results[0], slo)]
            slo["best"] = max(ok) if ok else None
        sweep = ServingSweep("concurrency", tuple(swept), tuple(p.results[0] for p in points), slo)
        bound = {"requests": counts, "left_out": wanted[len(swept):], "estimated_cpu_s": spent, "budget_s": SWEEP_BUDGET_S,
                 "requests_in_kv_cache": fit}
        return sweep, step, engine, bound

    def filename(q: LayerQuery, ext: str) -> str:
        size = f"{q.tokens}" if q.phase == "prefill" else f"ctx{q.context or q.tokens}"
        return f"layer-{q.model}-{q.machine}-{q.phase}-{size}-b{q.batch}-{q.attention}.{ext}"

    @app.get("/api/machines", summary="Machines the page offers: every preset and each machine file's")
    def api_machines(_slot: None = Depends(light_slot)) -> list[dict]:
        return [_machine_dict(m, origins[k]) for k, m in machines.items()]

    @app.get("/api/models", summary="Model presets")
    def api_models(_slot: None = Depends(light_slot)) -> list[dict]:
        return [_model_dict(c) for c in models.values()]

    @app.get("/api/options", summary="Seed defaults, limits, the token slider's stops and each view's parameters")
    def api_options(_slot: None = Depends(light_slot)) -> dict:
        return {
            "defaults": dict(SEED_DEFAULTS),
            "view_attention": dict(VIEW_ATTENTION),
            "phases": list(PHASES),
            "attentions": list(ATTENTIONS),
            "dtypes": list(DTYPE_BYTES),
            "plan_dtypes": list(QUANT_DTYPES),  # what the model, decode and serving views store weights and caches in
            "token_stops": token_stops(),
            "views": [{"key": key, "label": label} for key, label in VIEWS],
            # the query parameters each view's endpoint takes: the page sends each view only its own
            "view_parameters": {key: sorted(endpoint_names[f"/api/{key}"]) for key, _ in VIEWS},
            "serving_defaults": dict(SERVING_DEFAULTS),
            "limits": {"tokens": [1, MAX_TOKENS], "batch": [1, MAX_BATCH], "launch_overhead_us": [0, MAX_LAUNCH_US],
                       "input_len": [1, MAX_INPUT_LEN], "output_len": [1, MAX_OUTPUT_LEN], "max_users": [1, MAX_USERS],
                       "compute_efficiency": [MIN_EFFICIENCY, 1], "memory_efficiency": [MIN_EFFICIENCY, 1],
                       "overlap": [0, 1], "slo_ttft_ms": [MIN_TARGET_MS, 1e9], "slo_tpot_ms": [MIN_TARGET_MS, 1e9],
                       "tp": [1, MAX_TP]},
        }

    @app.get("/api/layer", summary="One layer op by op: LayerReport.to_dict() plus readouts, sentence, chart and roofline")
    def api_layer(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> dict:
        q = settle(q, "layer")
        report, machine, cost_model = compute(q)
        body = layer_payload(report, machine, cost_model, q.launch_overhead_us, models[q.model].name)
        body["ops_table"] = op_rows(report, machine, cost_model)
        body["fixes"] = fix_lists(report, machine, cost_model)
        body["fix_first"] = fix_first(report, layer_alternatives(q, machine, report.dtype))
        body["notes"] = list(models[q.model].header_lines())  # what the loader left out or noted, shown under the charts
        if body["notes"]:
            body["caption"] += " " + " ".join(n[0].upper() + n[1:] + "." for n in body["notes"])
        return body

    @app.get("/api/layer.csv", response_class=PlainTextResponse, summary="The op table as CSV: a row per op and a totals row, "
             "each column's unit in its name (time_us, flops, bytes, intensity_flop_per_byte)",
             responses={200: {"content": {"text/csv": {}}}})
    def api_layer_csv(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> Response:
        q = settle(q, "layer")
        report, _, _ = compute(q)
        return Response(layer_csv(report), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{filename(q, "csv")}"'})

    @app.get("/api/layer.json", summary="LayerReport.to_dict() as a download")
    def api_layer_json(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> JSONResponse:
        q = settle(q, "layer")
        report, _, _ = compute(q)
        return JSONResponse(json_safe(report.to_dict()),
                            headers={"Content-Disposition": f'attachment; filename="{filename(q, "json")}"'})

    @app.get("/api/model", summary="The whole model (L blocks, embedding, final norm, LM head): time to first token "
             "or one decode step, tokens/s, time by part and weights + KV cache against the machine's memory")
    def api_model(q: LayerQuery = Depends(plan_query), _slot: None = Depends(plan_slot)) -> dict:
        q = settle(q, "model")
        pred, memory, crossover = compute_model(q)
        return model_payload(pred, memory, crossover, models[q.model].name, models[q.model].n_layers, q.launch_overhead_us)

    @app.get("/api/decode", summary="Decode latency and throughput versus batch (1 to 1,024 and the query's batch) at a "
             "context (context, else tokens): compute-bound batch, largest batch in memory, KV-overtakes-weights context")
    def api_decode(q: LayerQuery = Depends(plan_query), _slot: None = Depends(plan_slot)) -> dict:
        q = settle(q, "decode")
        plan, crossover = compute_decode(q)
        with library_call(q):
            runs = step_bound_runs(models[q.model], plan)  # where the whole step is compute-bound, and where not
        return decode_payload(plan, q.batch, crossover, models[q.model].name, q.launch_overhead_us, runs)

    @app.get("/api/serving", summary="A deployment under load, as `roofline serving --sweep 1,2,4,...,max_users`: "
             "output tokens/s per GPU against tokens/s per user, TTFT and TPOT percentiles against concurrent users, "
             "the highest concurrency within the targets and one decode step of it op by op (a bounded sweep: "
             "8 requests per user, at most 2,000 a point, about 0.4 s of simulation a request)")
    def api_serving(q: ServingQuery = Depends(serving_query), _slot: None = Depends(plan_slot)) -> dict:
        q = settle(q, "serving")
        sweep, step, engine, bound = compute_serving(q)
        with serving_call():
            return serving_payload(sweep, step, engine, q, bound, models[q.model].name)

    # Teaching mode (roofline.web.exercises, docs/workshop.md): an exercise from its kind and seed, then the
    # learner's answer checked, with the derivation.
    ExerciseKind = Literal[tuple(EXERCISE_KINDS)]
    exercise_kind = Query("ridge", description="ridge, bound, layer, compute_2x or decode")
    exercise_seed = Query(0, ge=0, le=MAX_SEED, description="which exercise of the kind (the same seed, the same exercise)")

    @app.get("/api/exercise", summary="An exercise: the question, its givens and what is asked, without the answer")
    def api_exercise(kind: ExerciseKind = exercise_kind, seed: int = exercise_seed,
                     _slot: None = Depends(light_slot)) -> dict:
        return json_safe(make_exercise(kind, seed).public_dict())

    @app.get("/api/exercise/check", summary="The learner's answer to an exercise checked: correct, incorrect (with the "
             "answer and the derivation) or unreadable (what to write instead)")
    def api_exercise_check(kind: ExerciseKind = exercise_kind, seed: int = exercise_seed,
                           answer: str = Query(..., max_length=MAX_ANSWER_CHARS, description="the answer as typed: "
                                               "'295', '295 FLOP/byte', '8.7 ms', '8756 us', 'memory'"),
                           _slot: None = Depends(light_slot)) -> dict:
        return json_safe(check_answer(kind, seed, answer).to_dict())

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    plotly_js = _plotly_js()

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly(request: Request) -> Response:
        if plotly_js is None:
            return PlainTextResponse("plotly.min.js not found: pip install 'roofline[web]'", status_code=404)
        headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):  # GZipMiddleware's own test
            return Response(_gzipped(plotly_js, plotly_js.stat().st_mtime_ns), media_type="text/javascript",
                            headers={**headers, "Content-Encoding": "gzip"})
        return FileResponse(plotly_js, media_type="text/javascript", headers=headers)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for path, item in app.openapi()["paths"].items():  # the parameters each endpoint documents are those it takes
        if path.startswith("/api/") and "get" in item:
            endpoint_names[path] = frozenset(p["name"] for p in item["get"].get("parameters", []) if p.get("in") == "query")
    return app


def _plotly_js() -> Optional[Path]:
    """The Plotly.js the page loads (no CDN): VENDORED_PLOTLY_JS, plotly.js's basic bundle (bar and
    scatter traces, 1.2 MB), else the full bundle (4.8 MB) shipped inside the installed ``plotly``
    package."""
    if VENDORED_PLOTLY_JS.is_file():
        return VENDORED_PLOTLY_JS
    try:
        root = resources.files("plotly")
    except ModuleNotFoundError:
        return None
    for rel in ("package_data/plotly.min.js", "offline/plotly.min.js"):
        candidate = Path(str(root.joinpath(rel)))
        if candidate.is_file():
            return candidate
    return None


@functools.lru_cache(maxsize=2)
def _gzipped(path: Path, mtime_ns: int) -> bytes:
    """``path`` gzip-compressed, made once a process (on the first request; ~50 ms for Plotly's
    1.2 MB) and once more if the file changes (``mtime_ns``). No timestamp: the same bytes each time."""
    return gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)


def listen(host: str, port: int):
    """A TCP socket bound to ``host``:``port`` and listening: a port in use or a host that does not
    resolve is a RooflineError naming the flag, before anything is printed."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise RooflineError(f"--host {host!r}: cannot resolve it ({getattr(exc, 'strerror', None) or exc})",
                            field="host") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: no wait after a restart
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise RooflineError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror or exc})",
                            field="port") from None
    return sock


def _timed_protocol():
    """uvicorn's h11 protocol with a deadline on reading a request: a connection that has not sent a
    whole request head REQUEST_READ_TIMEOUT_S after it opened (or after its last response, for a
    kept-alive one) is closed. uvicorn alone waits on a half-sent request for ever."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _read_deadline = None

        def _awaiting_request(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._read_deadline is None:
                self._read_deadline = self.loop.call_later(REQUEST_READ_TIMEOUT_S, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _read_timed_out(self) -> None:
            self._read_deadline = None
            if self._awaiting_request() and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._awaiting_request():
                self._arm()
            super().data_received(data)
            if not self._awaiting_request():  # a whole request head arrived: the app has it now
                self._disarm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

    return TimedH11Protocol


def serve(host: str = "127.0.0.1", port: int = 8000, machine_files: list[str] | None = None) -> None:
    """Start the workshop with uvicorn and print its URL. The port is bound first: one that is
    in use is one line naming --port (exit 2), not a URL followed by uvicorn's error."""
    import uvicorn

    wildcard = host in ("0.0.0.0", "::", "")
    app = create_app(machine_files, ("*",) if wildcard else tuple(dict.fromkeys((*LOOPBACK_HOSTS, host))))
    sock = listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"roofline workshop: http://{shown}:{port}/  (Ctrl-C to stop)", flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", http=_timed_protocol(),
                                      limit_concurrency=MAX_CONNECTIONS)).run(sockets=[sock])
    finally:
        sock.close()
