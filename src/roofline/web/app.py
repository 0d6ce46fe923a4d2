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

Here: the app factory, its error answers and the limits on concurrent work. The plan views (whole
model, decode, serving) run in a pool of worker processes (web.pool, the jobs in web.jobs), so the
process answering requests is never held by them: a light request (a layer, the options, the page)
is answered while they compute. The routes by view are in web.routes, the server in web.server.
Each request's parameters and their validation are in web.params, the library run behind each
endpoint in web.compute, the machine and model lists in web.catalog, and what each view shows in
web.payload and web.explain (the layer view), web.model_view, web.decode_view and web.serving_view.
"""

import asyncio
import contextlib
import functools
import gzip
import os
import weakref
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from roofline.errors import RooflineError
from roofline.transformer import list_models
from roofline.web import jobs, routes
from roofline.web.catalog import machine_table
from roofline.web.compute import SWEEP_BUDGET_S, Workshop, concurrencies, requests_per_point, simulation_cost_s
from roofline.web.params import MAX_BATCH, MAX_TOKENS, MAX_TP, SEED_DEFAULTS, query_dependencies, token_stops
from roofline.web.pool import Busy, PoolLimits, WorkerPool
from roofline.web.server import MAX_CONNECTIONS, REQUEST_READ_TIMEOUT_S, listen, uvicorn_config

# Names other modules and the tests import from here: the request limits and defaults (web.params),
# the serving view's bounded sweep (web.compute) and the server's (web.server).
__all__ = ["create_app", "serve", "listen", "LOOPBACK_HOSTS", "LIGHT_INFLIGHT", "QUEUE_WAIT_S", "HEAVY_POOL",
           "REQUEST_READ_TIMEOUT_S", "MAX_CONNECTIONS", "STATIC_DIR", "VENDORED_PLOTLY_JS", "MAX_BATCH", "MAX_TOKENS",
           "MAX_TP", "SEED_DEFAULTS", "token_stops", "SWEEP_BUDGET_S", "concurrencies", "requests_per_point",
           "simulation_cost_s"]

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

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver")  # testserver: Starlette's test client

# Bounded work. A request waits at most QUEUE_WAIT_S for a place, then gets a 503 with Retry-After.
# The light views (one layer, the option lists, exercises; a few ms each) run in the answering
# process, at most LIGHT_INFLIGHT at once, the others waiting in the event loop (no thread held).
# The plan views (whole model, decode vs batch, serving; 10 to 300 ms each here) run in HEAVY_POOL:
# a worker process per core (at most 4), 8 requests queued per worker, QUEUE_WAIT_S, and a job
# stopped after 10 s (the serving sweep's bound is ~0.4 s of simulation: 25 times that).
LIGHT_INFLIGHT = 4
QUEUE_WAIT_S = 1.0
HEAVY_WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
HEAVY_POOL = PoolLimits(workers=HEAVY_WORKERS, queued=8 * HEAVY_WORKERS, wait_s=QUEUE_WAIT_S, job_s=10.0)
RETRY_AFTER_S = {"queue_full": 1, "queue_wait": 1, "time_limit": 10, "worker_died": 1, "closed": 5}


def _error_response(errors: list[dict]) -> JSONResponse:
    """A 422: ``field`` the first parameter named, ``fields`` every one, a combination's others too
    (RooflineError.also, in an error's ``also``)."""
    fields = [e["loc"][-1] for e in errors if e.get("loc")]
    fields += [f for e in errors for f in e.get("also", ()) if f not in fields]
    return JSONResponse(status_code=422, content={"field": fields[0] if fields else None, "fields": fields, "detail": errors})


def _light_slot(running: int):
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
            raise Busy(f"busy: {running} light computations are running and more waited {QUEUE_WAIT_S:g} s; retry",
                       "queue_wait", QUEUE_WAIT_S) from None
        try:
            yield
        finally:
            sem.release()

    return slot


def _add_error_handlers(app: FastAPI, endpoint_names: dict) -> None:
    """422 for invalid parameters (FastAPI's validation and RooflineError, naming ``field``); 503
    with Retry-After when the worker pool refuses or stops a job (web.pool.Busy: ``reason``)."""

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in exc.errors()]
        return _error_response(errors)

    @app.exception_handler(RooflineError)
    async def _roofline_error(request: Request, exc: RooflineError):
        field = _API_FIELD.get(exc.field or "", exc.field) or "query"
        error = {"loc": ["query", field], "msg": str(exc), "type": "roofline_error"}
        takes = endpoint_names.get(request.url.path, frozenset())  # a combination's parameters this endpoint has
        also = [a for a in dict.fromkeys(_API_FIELD.get(f, f) for f in exc.also) if a != field and a in takes]
        return _error_response([{**error, "also": also} if also else error])

    @app.exception_handler(Busy)
    async def _busy(request: Request, exc: Busy):
        return _busy_response(exc)


class _ParameterCheck:
    """ASGI middleware: a query parameter the endpoint does not take is a 422 naming it, never
    silently ignored: /api/serving refuses tokens=, /api/layer input_len=. The names are each
    endpoint's own, as its OpenAPI schema lists them (a path that is no endpoint is left to its 404)."""

    def __init__(self, app, endpoint_names: dict):
        self.app, self.endpoint_names = app, endpoint_names

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.startswith("/api/") and path in self.endpoint_names:
            errors = self.errors(path, Request(scope).query_params)
            if errors:
                return await _error_response(errors)(scope, receive, send)
        await self.app(scope, receive, send)

    def errors(self, path: str, query) -> list[dict]:
        takes = self.endpoint_names[path]
        names = [k for k, _ in query.multi_items()]
        repeated = sorted({k for k in names if names.count(k) > 1} & takes)
        if repeated:  # which one would count is a guess: say so instead
            return [{"loc": ["query", name], "msg": f"query parameter {name!r} is given {names.count(name)} times; "
                     "give it once", "type": "repeated_parameter"} for name in repeated]
        unknown = sorted(set(query) - takes)
        what = f"takes {', '.join(sorted(takes))}" if takes else "takes no query parameters"
        return [{"loc": ["query", name or "query"], "msg": f"unknown query parameter {name!r}; {path} {what}",
                 "type": "unknown_parameter"} for name in unknown]


class _BusyFirst:
    """ASGI middleware: a plan request that the pool would refuse now (web.pool.WorkerPool.refusal)
    is answered its 503 before its parameters are read, so a burst of them costs the answering
    process little."""

    def __init__(self, app, pool: WorkerPool, paths: frozenset):
        self.app, self.pool, self.paths = app, pool, paths

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("path") in self.paths:
            busy = self.pool.refusal()
            if busy is not None:
                return await _busy_response(busy)(scope, receive, send)
        await self.app(scope, receive, send)


def _busy_response(exc: Busy) -> JSONResponse:
    return JSONResponse(status_code=503, content={"detail": str(exc), "reason": exc.reason, "limit_s": exc.limit_s},
                        headers={"Retry-After": str(RETRY_AFTER_S.get(exc.reason, 1))})


def create_app(machine_files: list[str] | None = None, allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
               pool_limits: PoolLimits | None = None) -> FastAPI:
    """The workshop app. ``machine_files`` are TOML machine files whose machines join the presets.
    Requests whose Host header is not in ``allowed_hosts`` get a 400: a web page elsewhere cannot
    read this server through a DNS-rebound name. ``/docs`` and ``/redoc`` (which load scripts from a
    CDN) are off; the schema is at ``/openapi.json``. The plan views run in a WorkerPool with
    ``pool_limits`` (default HEAVY_POOL), its workers started on first use and stopped with the app
    (its lifespan's end, else when the app is collected or the interpreter exits): ``app.state.pool``."""
    machines, origins = machine_table(machine_files)
    models = MappingProxyType({c.key: c for c in list_models()})
    pool = WorkerPool(pool_limits or HEAVY_POOL, jobs.start, (dict(machines),), preload=("roofline.web.jobs",))

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        pool.close()

    app = FastAPI(
        title="roofline workshop",
        version="1",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        responses={503: {"description": "Busy: the computations allowed at once are running and this request "
                         "waited its limit, or its computation ran past its time limit and was stopped; retry after "
                         "the Retry-After header's seconds"}},
        description="The workshop (the 'Predicting a Kernel's Time' plate): the predicted time of each op of one transformer layer, of the whole "
                    "model, and of decode versus batch.",
    )
    app.state.pool = pool
    weakref.finalize(app, pool.close)
    endpoint_names: dict[str, frozenset] = {}  # each /api/ path's query parameters, from the schema (filled below)
    _add_error_handlers(app, endpoint_names)

    from starlette.middleware.gzip import GZipMiddleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    app.add_middleware(_BusyFirst, pool=pool, paths=routes.PLAN_PATHS)  # the last added is the outermost
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    # Bodies past 1 kB go gzip-compressed to a client that accepts it (zlib's default level: the
    # largest JSON, ~30 kB, in under a millisecond); Plotly is compressed once (below) and passes as is.
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES, compresslevel=6)
    app.add_middleware(_ParameterCheck, endpoint_names=endpoint_names)

    layer_query, plan_query, serving_query = query_dependencies(machines, models)
    light_slot = _light_slot(LIGHT_INFLIGHT)
    routes.add_catalog_routes(app, machines, origins, models, endpoint_names, light_slot)
    routes.add_layer_routes(app, Workshop(machines, models), layer_query, light_slot)
    routes.add_plan_routes(app, pool, plan_query, serving_query)
    routes.add_exercise_routes(app, light_slot)
    _add_page_routes(app)
    for path, item in app.openapi()["paths"].items():  # the parameters each endpoint documents are those it takes
        if path.startswith("/api/") and "get" in item:
            endpoint_names[path] = frozenset(p["name"] for p in item["get"].get("parameters", []) if p.get("in") == "query")
    return app


def _add_page_routes(app: FastAPI) -> None:
    """The page, Plotly (gzipped once for a client that accepts it) and the static files."""

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


def serve(host: str = "127.0.0.1", port: int = 8000, machine_files: list[str] | None = None) -> None:
    """Start the workshop with uvicorn and print its URL. The port is bound first: one that is
    in use is one line naming --port (exit 2), not a URL followed by uvicorn's error. The heavy
    views' worker processes stop with the server (the app's lifespan)."""
    import uvicorn

    wildcard = host in ("0.0.0.0", "::", "")
    app = create_app(machine_files, ("*",) if wildcard else tuple(dict.fromkeys((*LOOPBACK_HOSTS, host))))
    sock = listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"roofline workshop: http://{shown}:{port}/  (Ctrl-C to stop)", flush=True)
    try:
        uvicorn.Server(uvicorn_config(app, host, port)).run(sockets=[sock])
    finally:
        sock.close()
        app.state.pool.close()
