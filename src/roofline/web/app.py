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

Here: the app factory and its routes, the limits on concurrent work, and the server. Each request's
parameters and their validation are in web.params, the library run behind each endpoint in
web.compute, the machine and model lists in web.catalog, and what each view shows in web.payload
and web.explain (the layer view), web.model_view, web.decode_view and web.serving_view.
"""

# No ``from __future__ import annotations``: FastAPI reads the endpoint annotations, which name
# Literal types built inside create_app.

import asyncio
import functools
import gzip
import weakref
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Optional

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from roofline.errors import RooflineError
from roofline.plan.decode import step_bound_runs
from roofline.transformer import list_models
from roofline.web.catalog import machine_dict, machine_table, model_dict
from roofline.web.compute import (SWEEP_BUDGET_S, Workshop, concurrencies, library_call, requests_per_point, serving_call,
                                  simulation_cost_s)
from roofline.web.decode_view import decode_payload
from roofline.web.explain import fix_first, fix_lists, op_rows
from roofline.web.model_view import model_payload
from roofline.web.params import (MAX_BATCH, MAX_TOKENS, MAX_TP, SEED_DEFAULTS, LayerQuery, ServingQuery, options_payload,
                                 query_dependencies, token_stops)
from roofline.web.payload import json_safe, layer_csv, layer_payload
from roofline.web.serving_view import serving_payload
from roofline.web.exercises import KINDS as EXERCISE_KINDS, MAX_ANSWER_CHARS, MAX_SEED, check_answer, make_exercise

# Names other modules and the tests import from here: the request limits and defaults (web.params)
# and the serving view's bounded sweep (web.compute).
__all__ = ["create_app", "serve", "listen", "LOOPBACK_HOSTS", "MAX_INFLIGHT", "QUEUE_WAIT_S", "REQUEST_READ_TIMEOUT_S",
           "MAX_CONNECTIONS", "STATIC_DIR", "VENDORED_PLOTLY_JS", "MAX_BATCH", "MAX_TOKENS", "MAX_TP", "SEED_DEFAULTS",
           "token_stops", "SWEEP_BUDGET_S", "concurrencies", "requests_per_point", "simulation_cost_s"]

STATIC_DIR = Path(__file__).parent / "static"
# plotly.js's "basic" partial bundle (npm plotly.js-basic-dist-min 4.1.1, the plotly.js of the
# Python plotly package; MIT, its LICENSE beside it): the page draws only bar and scatter traces.
VENDORED_PLOTLY_JS = STATIC_DIR / "vendor" / "plotly-basic.min.js"
GZIP_MIN_BYTES = 1000

# Library field names that the API spells differently (the planner's Precision names each part's
# dtype; the API has one dtype for all three, with weights and kv_cache over it in the plan views:
# library_call names those when the query gave them).
_API_FIELD = {"launch_overhead_s": "launch_overhead_us", "weights dtype": "dtype", "activations dtype": "dtype",
              "kv_cache dtype": "dtype", "tensor_parallel": "tp", "gpus_per_node": "tp"}


def _error_response(errors: list[dict]) -> JSONResponse:
    """A 422: ``field`` the first parameter named, ``fields`` every one, a combination's others too
    (RooflineError.also, in an error's ``also``)."""
    fields = [e["loc"][-1] for e in errors if e.get("loc")]
    fields += [f for e in errors for f in e.get("also", ()) if f not in fields]
    return JSONResponse(status_code=422, content={"field": fields[0] if fields else None, "fields": fields, "detail": errors})


def _priced(body: dict, cost_model, ops) -> dict:
    """A view's body with what priced it beyond the cost model said in its caption (measured kernels:
    CostModel.priced_by) and, for the ops given, what the tables left to the cost model."""
    said = cost_model.priced_by() if hasattr(cost_model, "priced_by") else ""
    if said:
        from roofline.measured.model import measured_notes

        body["caption"] = " ".join([body["caption"], *(n[0].upper() + n[1:] + "." for n in (said, *measured_notes(ops)))])
    return body


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
    machines, origins = machine_table(machine_files)
    models = MappingProxyType({c.key: c for c in list_models()})

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
        error = {"loc": ["query", field], "msg": str(exc), "type": "roofline_error"}
        takes = endpoint_names.get(request.url.path, frozenset())  # a combination's parameters this endpoint has
        also = [a for a in dict.fromkeys(_API_FIELD.get(f, f) for f in exc.also) if a != field and a in takes]
        return _error_response([{**error, "also": also} if also else error])

    layer_query, plan_query, serving_query = query_dependencies(machines, models)
    workshop = Workshop(machines, models)

    def filename(q: LayerQuery, ext: str) -> str:
        size = f"{q.tokens}" if q.phase == "prefill" else f"ctx{q.context or q.tokens}"
        return f"layer-{q.model}-{q.machine}-{q.phase}-{size}-b{q.batch}-{q.attention}.{ext}"

    @app.get("/api/machines", summary="Machines the page offers: every preset and each machine file's")
    def api_machines(_slot: None = Depends(light_slot)) -> list[dict]:
        return [machine_dict(m, origins[k]) for k, m in machines.items()]

    @app.get("/api/models", summary="Model presets")
    def api_models(_slot: None = Depends(light_slot)) -> list[dict]:
        return [model_dict(c) for c in models.values()]

    @app.get("/api/options", summary="Seed defaults, limits, the token slider's stops and each view's parameters")
    def api_options(_slot: None = Depends(light_slot)) -> dict:
        return options_payload(endpoint_names)

    @app.get("/api/layer", summary="One layer op by op: LayerReport.to_dict() plus readouts, sentence, chart and roofline")
    def api_layer(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> dict:
        q = workshop.settle(q, "layer")
        report, machine, cost_model = workshop.compute(q)
        body = layer_payload(report, machine, cost_model, q.launch_overhead_us, models[q.model].name)
        body["ops_table"] = op_rows(report, machine, cost_model)
        body["fixes"] = fix_lists(report, machine, cost_model)
        body["fix_first"] = fix_first(report, workshop.layer_alternatives(q, machine, report.dtype))
        from roofline.blocks import storage_note

        stored = storage_note(models[q.model], report.dtype, True)  # a quantised checkpoint priced at the page's dtype
        body["notes"] = list(models[q.model].header_lines()) + ([stored] if stored else [])  # shown under the charts
        if cost_model.priced_by():  # measured kernels: which tables, and what they left to the cost model
            from roofline.measured.model import measured_notes

            body["notes"] += [cost_model.priced_by(), *measured_notes(report.prediction.ops)]
        if body["notes"]:
            body["caption"] += " " + " ".join(n[0].upper() + n[1:] + "." for n in body["notes"])
        return body

    @app.get("/api/layer.csv", response_class=PlainTextResponse, summary="The op table as CSV: a row per op and a totals row, "
             "each column's unit in its name (time_us, flops, bytes, intensity_flop_per_byte)",
             responses={200: {"content": {"text/csv": {}}}})
    def api_layer_csv(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> Response:
        q = workshop.settle(q, "layer")
        report, _, _ = workshop.compute(q)
        return Response(layer_csv(report), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{filename(q, "csv")}"'})

    @app.get("/api/layer.json", summary="LayerReport.to_dict() as a download")
    def api_layer_json(q: LayerQuery = Depends(layer_query), _slot: None = Depends(light_slot)) -> JSONResponse:
        q = workshop.settle(q, "layer")
        report, _, _ = workshop.compute(q)
        return JSONResponse(json_safe(report.to_dict()),
                            headers={"Content-Disposition": f'attachment; filename="{filename(q, "json")}"'})

    @app.get("/api/model", summary="The whole model (L blocks, embedding, final norm, LM head): time to first token "
             "or one decode step, tokens/s, time by part and weights + KV cache against the machine's memory")
    def api_model(q: LayerQuery = Depends(plan_query), _slot: None = Depends(plan_slot)) -> dict:
        q = workshop.settle(q, "model")
        pred, memory, crossover = workshop.compute_model(q)
        return _priced(model_payload(pred, memory, crossover, models[q.model].name, models[q.model].n_layers,
                                     q.launch_overhead_us), pred.cost_model, pred.prediction.ops)

    @app.get("/api/decode", summary="Decode latency and throughput versus batch (1 to 1,024 and the query's batch) at a "
             "context (context, else tokens): compute-bound batch, largest batch in memory, KV-overtakes-weights context")
    def api_decode(q: LayerQuery = Depends(plan_query), _slot: None = Depends(plan_slot)) -> dict:
        q = workshop.settle(q, "decode")
        plan, crossover = workshop.compute_decode(q)
        with library_call(q):
            runs = step_bound_runs(models[q.model], plan)  # where the whole step is compute-bound, and where not
        return _priced(decode_payload(plan, q.batch, crossover, models[q.model].name, q.launch_overhead_us, runs),
                       plan.step.cost_model, ())

    @app.get("/api/serving", summary="A deployment under load, as `roofline serving --sweep 1,2,4,...,max_users`: "
             "output tokens/s per GPU against tokens/s per user, TTFT and TPOT percentiles against concurrent users, "
             "the highest concurrency within the targets and one decode step of it op by op (a bounded sweep: "
             "8 requests per user, at most 2,000 a point, about 0.4 s of simulation a request)")
    def api_serving(q: ServingQuery = Depends(serving_query), _slot: None = Depends(plan_slot)) -> dict:
        q = workshop.settle(q, "serving")
        sweep, step, engine, bound = workshop.compute_serving(q)
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
