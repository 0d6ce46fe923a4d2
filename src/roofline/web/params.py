"""What the API's requests take: each parameter's limits and seed defaults, the validated queries
(LayerQuery, ServingQuery), the FastAPI query dependencies that check and build them, and what
/api/options tells the page about them.

FastAPI is imported only inside query_dependencies, when an app is built: the limits and defaults
read without the web stack.
"""

# No ``from __future__ import annotations``: FastAPI reads the dependencies' annotations, which name
# Literal types built inside query_dependencies.

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Literal, Optional

from roofline.blocks import ATTENTIONS, PHASES
from roofline.parameters import (CUDA_GRAPH, KERNELS, KV_CACHE, LAYER_DTYPE, MIN_EFFICIENCY, PLAN_DTYPE,  # noqa: F401 (read
                                 QUERY_DEFAULTS, SEED_DEFAULTS, TENSOR_PARALLEL, VIEW_ATTENTION, VIEW_BY_API,  # from
                                 WEB_MAX_BATCH, WEB_MAX_TOKENS, WEB_MAX_TP, WEIGHTS)  # here too)
from roofline.serving.parameters import BY_API, WEB_MAX_OUTPUT_LEN, WEB_MAX_USERS

# The layer, model and decode views' parameters are declared once, with the CLI's flags, in roofline.parameters:
# their queries' defaults, ranges and descriptions are made from them (view_query below). SEED_DEFAULTS: the
# workshop of the 'Predicting a Kernel's Time' plate (Llama 3 8B on an H100, one 8,192-token sequence, attention
# unfused, e_c = 0.70, e_m = 0.85, 3 µs per launch, perfect overlap), the page's starting values; QUERY_DEFAULTS:
# what a query leaving them out takes, as the CLI does (VIEW_ATTENTION: each view's command's attention; the
# machine's preset launch).
MAX_TOKENS = WEB_MAX_TOKENS  # the slider's range, 2^17
CUSTOM_MAX_CHARS = 1000  # a custom machine's figures in the URL: a dozen KEY=VALUE pairs fit in a tenth of this
MAX_BATCH = WEB_MAX_BATCH
MAX_LAUNCH_US = VIEW_BY_API["launch_overhead_us"].api_range()[1]  # the library's limit: one second per launch

VIEWS = (("layer", "One layer"), ("model", "Whole model"), ("decode", "Decode vs batch"), ("serving", "Serving"))

# The serving view (/api/serving): `roofline serving --sweep 1,2,4,...,U` with the page's limits. Its
# parameters are declared once, with the CLI's, in serving.parameters: the query, its schema and the
# page's controls are made from them (serving_parameters below).
MAX_INPUT_LEN, MAX_OUTPUT_LEN, MAX_USERS = WEB_MAX_TOKENS, WEB_MAX_OUTPUT_LEN, WEB_MAX_USERS
MAX_TP = WEB_MAX_TP
# What the page starts with beyond the API's own defaults: targets of TTFT p90 <= 500 ms and TPOT p90 <= 30 ms
# (the API's own leave them out).
PAGE_TARGETS = MappingProxyType({"slo_ttft_ms": 500.0, "slo_tpot_ms": 30.0})
# The serving view's parameters (the API's names, in the order the page shows them); the others of
# /api/serving (machine, model, precision, cost model) are the other views' too, declared below
SERVING_API = ("tp", "input_len", "output_len", "max_users", "slo_ttft_ms", "slo_tpot_ms", "percentile", "engine",
               "max_seqs", "max_tokens", "memory_fraction", "step_overhead_ms", "prefix_hit", "price_per_gpu_hour")


PAGE_GIVEN = ("input_len", "output_len", "max_users")  # the page sends these always, from their declared defaults


def serving_defaults() -> dict:
    """The serving view's controls' starting values: the workload's declared defaults, the page's targets,
    and "" for the others: left out of the query, the API's own default (an engine setting's: the engine's)."""
    out = {name: BY_API[name].query_default for name in PAGE_GIVEN}
    return {**out, **PAGE_TARGETS, **{name: "" for name in SERVING_API[1:] if name not in out and name not in PAGE_TARGETS}}


def token_stops(maximum: int = MAX_TOKENS) -> list[int]:
    """The log-scale slider's positions: 1, 2, 3, 4, 6, 8, 12, ... (2^k and 3 2^(k-1)) up to
    ``maximum``. The typed entry takes any whole number in between."""
    stops, k = [1], 1
    while 2**k <= maximum:
        stops += [v for v in (3 * 2 ** (k - 2) if k >= 2 else 0, 2**k) if v > stops[-1]]
        k += 1
    return stops


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
    kernels: Optional[str] = None  # an engine's measured kernels price the ops of their families (`--kernels`)


@dataclass(frozen=True)
class ServingQuery:
    """/api/serving's parameters, validated: the workload, the engine, the targets and the cost model.
    An engine setting left out (None) is the engine's own: ``engine``'s defaults on the machine, else
    serving.Engine's (serving.parameters.engine_of)."""

    machine: str
    model: str
    dtype: Optional[str]
    tp: int
    input_len: int
    output_len: int
    max_users: int
    max_seqs: Optional[int]
    max_tokens: Optional[int]
    memory_fraction: Optional[float]
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
    weights: Optional[str] = None  # each part's storage over dtype, as the plan views
    kv_cache: Optional[str] = None
    step_overhead_ms: Optional[float] = None  # the engine's own time per step, as `roofline serving --step-overhead`
    engine: Optional[str] = None  # an engine's defaults (serving.engines), as `roofline serving --engine`

    def engine_of(self, machine):
        """The Engine of the query: ``engine``'s defaults on ``machine`` (or Engine's own), the settings given over them."""
        from roofline.serving.parameters import engine_of

        overhead = None if self.step_overhead_ms is None else self.step_overhead_ms / BY_API["step_overhead_ms"].api_scale
        return engine_of(self.engine, machine, {"tensor_parallel": self.tp}, max_seqs=self.max_seqs, max_tokens=self.max_tokens,
                         memory_fraction=self.memory_fraction, step_overhead_s=overhead, prefix_hit=self.prefix_hit)


def query_bounds(p) -> dict:
    """A declared parameter's range as Query's keywords (ge, gt, le), in the API's unit: an integer's
    strict minimum as the next whole number (ge=1, not gt=0)."""
    if p.text:
        return {}
    lo, hi, strictly = p.api_range()
    bounds = {} if hi is None else {"le": hi}
    if lo is not None and p.integer:
        bounds["ge"] = int(lo) + 1 if strictly else int(lo)
    elif lo is not None:
        bounds["gt" if strictly else "ge"] = lo
    return bounds


def serving_engines() -> tuple:
    """The engines /api/serving's engine= takes (serving.engines: data/engines.toml)."""
    from roofline.serving.engines import names

    return names()


def serving_controls() -> list[dict]:
    """The serving view's controls as /api/options tells the page: each declared parameter's name, label,
    unit, default (None: none, or the engine's own where ``engine_setting``, then ``engine_default`` with
    no engine), range and help; the engine's choices."""
    out = []
    for name in SERVING_API:
        p = BY_API[name]
        bounds = query_bounds(p)
        out.append({"name": name, "label": p.label or name, "unit": "ms" if p.unit == "s" else p.unit,
                    "default": p.query_default, "engine_setting": p.engine,
                    "engine_default": p.default * p.api_scale if p.engine else None,
                    "min": bounds.get("ge", bounds.get("gt")), "max": bounds.get("le"), "integer": p.integer,
                    "help": p.query_help(), "choices": list(serving_engines()) if p.text else None})
    return out


def declared_parameter(name: str, Query, engines):
    """The query parameter of the declared serving parameter ``name`` (serving.parameters): its range,
    in the API's unit, as Query's bounds (the schema's and the server's check, one and the same); an
    engine setting's default None, the engine's own. ``engines``: the engine names the schema lists."""
    import inspect

    p = BY_API[name]
    bounds = query_bounds(p)
    if p.text:
        annotation, default = Optional[Literal[engines]], None
    else:
        kind = int if p.integer else float
        default = p.query_default
        annotation = kind if default is not None else Optional[kind]
        if not p.integer:
            bounds["allow_inf_nan"] = False
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=Query(default, description=p.query_help(), **bounds))


def view_query(Query, name, annotated: bool = False, description: str = ""):
    """The Query of the declared view parameter ``name`` (a Param, or the query name of one of
    roofline.parameters.VIEW_PARAMS): its default (none where ``annotated``: an Annotated type's default is
    its signature's), its description and its range in the API's unit (the schema's and the server's check,
    one and the same); a name's choices are its Literal type's (query_dependencies)."""
    p = name if not isinstance(name, str) else TENSOR_PARALLEL if name == "tp" else VIEW_BY_API[name]
    extra = {} if p.integer or p.text or p.switch else {"allow_inf_nan": False}
    return Query(*(() if annotated else (p.query_default,)), description=description or p.query_help(),
                 **query_bounds(p), **extra)


def _launch_overhead(Query, description: str):
    return Annotated[Optional[float], view_query(Query, "launch_overhead_us", True, description)]


def _storage_parts(Query, PlanDtype) -> tuple:
    """Each part's storage over dtype (weights, KV cache), in the model, decode and serving views alike."""
    return (Annotated[Optional[PlanDtype], view_query(Query, WEIGHTS, True)],
            Annotated[Optional[PlanDtype], view_query(Query, KV_CACHE, True)])


# web.catalog.CUSTOM_PREFIX, then KEY=VALUE pairs, each value a number with its SI prefix and unit (989TFLOP/s, 3µs)
CUSTOM_PATTERN = r"^custom:[a-z0-9]+=[0-9A-Za-z.+/µ-]+(,[a-z0-9]+=[0-9A-Za-z.+/µ-]+)*$"


def machine_type(machines):
    """The machine query's type: a key of ``machines`` (the schema lists them, as a Literal would) or a
    machine given by its figures, 'custom:KEY=VALUE,...' (web.catalog.custom_machine builds and checks it:
    a bad figure is its 422). One error, a Literal's, for anything else."""
    import re

    from pydantic import PlainValidator, WithJsonSchema
    from pydantic_core import PydanticCustomError

    keys = tuple(machines)
    expected = " or ".join(filter(None, (", ".join(map(repr, keys[:-1])), repr(keys[-1]))))
    custom = re.compile(CUSTOM_PATTERN)

    def check(value):
        if isinstance(value, str) and (value in keys or (len(value) <= CUSTOM_MAX_CHARS and custom.fullmatch(value))):
            return value
        raise PydanticCustomError("literal_error", "Input should be {expected}, or custom:KEY=VALUE,... (a machine given "
                                  "by its figures)", {"expected": expected})

    schema = {"anyOf": [{"enum": list(keys), "type": "string"},
                        {"type": "string", "pattern": CUSTOM_PATTERN, "maxLength": CUSTOM_MAX_CHARS}]}
    return Annotated[str, PlainValidator(check), WithJsonSchema(schema)]


def query_dependencies(machines, models) -> tuple:
    """The FastAPI dependencies (layer_query, plan_query, serving_query) that read and validate each
    endpoint's query parameters, with ``machines`` and ``models`` the keys they accept (the OpenAPI
    schema lists the choices)."""
    from fastapi import Depends, Query

    ModelKey = Literal[tuple(models)]
    Phase = Literal[PHASES]
    Attention = Literal[ATTENTIONS]
    Dtype = Literal[LAYER_DTYPE.choices]
    PlanDtype = Literal[PLAN_DTYPE.choices]
    Engine = Literal[KERNELS.choices]

    # The parameters the layer, whole-model and serving queries share, declared once as Annotated
    # types: the Query holds the validation and the description, each signature the default
    # (https://fastapi.tiangolo.com/tutorial/query-params-str-validations/).
    MachineParam = Annotated[machine_type(machines), view_query(Query, "machine", True)]
    ModelParam = Annotated[ModelKey, view_query(Query, "model", True)]
    ComputeEfficiency = Annotated[float, view_query(Query, "compute_efficiency", True)]
    MemoryEfficiency = Annotated[float, view_query(Query, "memory_efficiency", True)]
    Overlap = Annotated[float, view_query(Query, "overlap", True)]

    launch_help = VIEW_BY_API["launch_overhead_us"].query_help()
    LaunchOverhead = _launch_overhead(Query, launch_help)
    StepLaunchOverhead = _launch_overhead(Query, launch_help + "; a decode-only step replays a CUDA graph, one launch")

    def query_dependency(Dtype):
        """The query parameters, with ``Dtype`` the dtypes the endpoint takes (the plan views store
        weights and caches only in QUANT_DTYPES: no fp64 or tf32)."""

        def query(
            machine: MachineParam = SEED_DEFAULTS["machine"],
            model: ModelParam = SEED_DEFAULTS["model"],
            phase: Phase = view_query(Query, "phase"),
            tokens: int = view_query(Query, "tokens"),
            batch: int = view_query(Query, "batch"),
            context: Optional[int] = view_query(Query, "context"),
            attention: Optional[Attention] = view_query(Query, "attention"),
            dtype: Optional[Dtype] = view_query(Query, LAYER_DTYPE),  # the plan views' PLAN_DTYPE says the same
            compute_efficiency: ComputeEfficiency = SEED_DEFAULTS["compute_efficiency"],
            memory_efficiency: MemoryEfficiency = SEED_DEFAULTS["memory_efficiency"],
            launch_overhead_us: LaunchOverhead = None,
            overlap: Overlap = SEED_DEFAULTS["overlap"],
            layer: Optional[int] = view_query(Query, "layer"),
            cuda_graph: bool = view_query(Query, CUDA_GRAPH),
            kernels: Optional[Engine] = view_query(Query, KERNELS),
        ) -> LayerQuery:
            return LayerQuery(machine, model, phase, tokens, batch, context, attention, dtype,
                              compute_efficiency, memory_efficiency, launch_overhead_us, overlap, layer, cuda_graph,
                              kernels=kernels)

        return query

    layer_query = query_dependency(Dtype)
    Weights, KvCache = _storage_parts(Query, PlanDtype)

    def plan_query(
        q: LayerQuery = Depends(query_dependency(PlanDtype)),
        weights: Weights = None,
        kv_cache: KvCache = None,
        tp: int = view_query(Query, "tp", description="tensor-parallel GPUs per model copy, over the machine's link "
                             "(its nvlink, else xgmi, ...; past 8 GPUs its infiniband or roce), as `--tp`; the heads must split"),
    ) -> LayerQuery:
        """The whole-model views' query: the layer view's, with each part's precision and tensor parallelism."""
        return dataclasses.replace(q, weights=weights, kv_cache=kv_cache, tp=tp)

    shared = dict(MachineParam=MachineParam, ModelParam=ModelParam, PlanDtype=PlanDtype, Attention=Attention,
                  ComputeEfficiency=ComputeEfficiency, MemoryEfficiency=MemoryEfficiency, Overlap=Overlap,
                  StepLaunchOverhead=StepLaunchOverhead, Weights=Weights, KvCache=KvCache)
    return layer_query, plan_query, serving_dependency(Query, **shared)


# the serving view's dtype is PLAN_DTYPE, described as `roofline serving --dtype` (a quantised checkpoint as stored)
SERVING_DTYPE_HELP = ("weights, activations and KV cache (default: the machine's; a quantised checkpoint's weights as "
                      "stored), as `roofline serving --dtype`")


def serving_dependency(Query, *, MachineParam, ModelParam, PlanDtype, Attention, ComputeEfficiency, MemoryEfficiency,
                       Overlap, StepLaunchOverhead, Weights, KvCache):
    """/api/serving's dependency: the views' shared parameters (their Annotated types, from
    query_dependencies), then each declared serving parameter (declared_parameter), as its signature."""
    import inspect

    def serving_query(**given) -> ServingQuery:
        return ServingQuery(**given)

    shared = [("machine", MachineParam, SEED_DEFAULTS["machine"]), ("model", ModelParam, SEED_DEFAULTS["model"]),
              ("dtype", Optional[PlanDtype], view_query(Query, PLAN_DTYPE, description=SERVING_DTYPE_HELP)),
              ("attention", Optional[Attention], view_query(Query, "attention", description="flash (default, as "
                                                                     "`roofline serving`) or naive")),
              ("compute_efficiency", ComputeEfficiency, SEED_DEFAULTS["compute_efficiency"]),
              ("memory_efficiency", MemoryEfficiency, SEED_DEFAULTS["memory_efficiency"]),
              ("launch_overhead_us", StepLaunchOverhead, None), ("overlap", Overlap, SEED_DEFAULTS["overlap"]),
              ("weights", Weights, None), ("kv_cache", KvCache, None)]
    serving_query.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d) for n, a, d in shared]
        + [declared_parameter(n, Query, serving_engines()) for n in SERVING_API], return_annotation=ServingQuery)

    return serving_query


VIEW_LIMITS = ("tokens", "batch", "launch_overhead_us", "compute_efficiency", "memory_efficiency", "overlap")


def _limits(p) -> list:
    """A declared parameter's [lowest, highest] value as the query takes it (a count's strict 0: 1)."""
    bounds = query_bounds(p)
    return [bounds.get("ge", bounds.get("gt")), bounds["le"]]


def options_payload(endpoint_names: dict) -> dict:
    """/api/options: the seed defaults, the choices and limits of the controls, the token slider's
    stops, and the query parameters each view's endpoint takes (``endpoint_names``: each /api/
    path's, from the app's schema)."""
    controls = serving_controls()
    return {
        "defaults": dict(SEED_DEFAULTS),
        "view_attention": dict(VIEW_ATTENTION),
        "phases": list(PHASES),
        "attentions": list(ATTENTIONS),
        "dtypes": list(LAYER_DTYPE.choices),
        "plan_dtypes": list(PLAN_DTYPE.choices),  # what the model, decode and serving views store weights and caches in
        "token_stops": token_stops(),
        "views": [{"key": key, "label": label} for key, label in VIEWS],
        # the query parameters each view's endpoint takes: the page sends each view only its own
        "view_parameters": {key: sorted(endpoint_names[f"/api/{key}"]) for key, _ in VIEWS},
        "serving_defaults": serving_defaults(),
        "serving_controls": controls,  # the serving view's controls, from serving.parameters' declarations
        "limits": {**{name: _limits(VIEW_BY_API[name]) for name in VIEW_LIMITS}, "tp": [1, MAX_TP],
                   **{c["name"]: [c["min"], c["max"]] for c in controls if c["max"] is not None}},
    }
