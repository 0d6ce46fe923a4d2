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
from roofline.cost import MIN_EFFICIENCY
from roofline.plan.limits import ENGINE_MEMORY_FRACTION, ENGINE_STEP_SEQS, ENGINE_STEP_TOKENS, MIN_MEMORY_FRACTION
from roofline.plan.precision import QUANT_DTYPES
from roofline.serving.engine import MAX_STEP_OVERHEAD_S
from roofline.measured.tables import ENGINES as KERNEL_ENGINES  # no pyarrow imported: the extra is read when used
from roofline.units import DTYPE_BYTES

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

VIEWS = (("layer", "One layer"), ("model", "Whole model"), ("decode", "Decode vs batch"), ("serving", "Serving"))

# The serving view (/api/serving): `roofline serving --sweep 1,2,4,...,U` with the page's limits.
MAX_INPUT_LEN, MAX_OUTPUT_LEN, MAX_USERS = MAX_TOKENS, 32768, 4096
MAX_TP = 64
MAX_SEQS, MAX_STEP_TOKENS = 4096, MAX_TOKENS
MIN_TARGET_MS, MIN_PRICE = 1e-3, 1e-6  # a microsecond; a millionth of a dollar (5e-324 passes "> 0" and underflows)
# What the page starts with (the API's own defaults leave the targets out): the workshop's model and
# machine, the CLI's workload (1,024 in, 256 out), targets of TTFT p90 <= 500 ms, TPOT p90 <= 30 ms.
SERVING_DEFAULTS = MappingProxyType({"input_len": 1024, "output_len": 256, "max_users": 256, "slo_ttft_ms": 500.0,
                                     "slo_tpot_ms": 30.0, "step_overhead_ms": 0.0})
MAX_STEP_OVERHEAD_MS = MAX_STEP_OVERHEAD_S * 1e3  # the engine's bound (the CLI's --step-overhead), in ms
SERVING_QUERY_DEFAULTS = MappingProxyType({"max_seqs": ENGINE_STEP_SEQS, "max_tokens": ENGINE_STEP_TOKENS,
                                           "memory_fraction": ENGINE_MEMORY_FRACTION, "prefix_hit": 0.0,
                                           "percentile": 90.0, "tp": 1})


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
    weights: Optional[str] = None  # each part's storage over dtype, as the plan views
    kv_cache: Optional[str] = None
    step_overhead_ms: float = 0.0  # the engine's own time per step, as `roofline serving --step-overhead`


def query_dependencies(machines, models) -> tuple:
    """The FastAPI dependencies (layer_query, plan_query, serving_query) that read and validate each
    endpoint's query parameters, with ``machines`` and ``models`` the keys they accept (the OpenAPI
    schema lists the choices)."""
    from fastapi import Depends, Query

    MachineKey = Literal[tuple(machines)]  # the OpenAPI schema lists the choices
    ModelKey = Literal[tuple(models)]
    Phase = Literal[PHASES]
    Attention = Literal[ATTENTIONS]
    Dtype = Literal[tuple(DTYPE_BYTES)]
    PlanDtype = Literal[QUANT_DTYPES]
    Engine = Literal[KERNEL_ENGINES]

    # The parameters the layer, whole-model and serving queries share, declared once as Annotated
    # types: the Query holds the validation and the description, each signature the default
    # (https://fastapi.tiangolo.com/tutorial/query-params-str-validations/).
    MachineParam = Annotated[MachineKey, Query(description="machine preset or file machine key")]
    ModelParam = Annotated[ModelKey, Query(description="model preset")]
    ComputeEfficiency = Annotated[float, Query(ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False,
                                               description="e_c, achievable fraction of peak FLOP/s")]
    MemoryEfficiency = Annotated[float, Query(ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False,
                                              description="e_m, achievable fraction of peak bandwidth")]
    Overlap = Annotated[float, Query(ge=0, le=1, allow_inf_nan=False,
                                     description="1: max(compute, memory) (perfect overlap, the roofline's); 0: their sum")]

    def launch_overhead(description: str):
        return Annotated[Optional[float], Query(ge=0, le=MAX_LAUNCH_US, allow_inf_nan=False, description=description)]

    launch_help = "microseconds per kernel launch (default: the machine's preset, as the CLI)"
    LaunchOverhead = launch_overhead(launch_help)
    StepLaunchOverhead = launch_overhead(launch_help + "; a decode-only step replays a CUDA graph, one launch")

    def query_dependency(Dtype):
        """The query parameters, with ``Dtype`` the dtypes the endpoint takes (the plan views store
        weights and caches only in QUANT_DTYPES: no fp64 or tf32)."""

        def query(
            machine: MachineParam = SEED_DEFAULTS["machine"],
            model: ModelParam = SEED_DEFAULTS["model"],
            phase: Phase = Query(SEED_DEFAULTS["phase"], description="prefill (T tokens) or decode (one token at context S)"),
            tokens: int = Query(SEED_DEFAULTS["tokens"], ge=1, le=MAX_TOKENS, description="prefill: tokens per sequence T; decode: the context S unless context is given"),
            batch: int = Query(SEED_DEFAULTS["batch"], ge=1, le=MAX_BATCH, description="sequences B"),
            context: Optional[int] = Query(None, ge=1, le=MAX_TOKENS, description="decode: tokens already in the KV cache, S (default: tokens); prefill: positions attended, S >= tokens (a chunked-prefill step; default tokens)"),
            attention: Optional[Attention] = Query(None, description="naive (QK^T, softmax, PV unfused) or flash (default: "
                                                   "naive for the layer view, as `roofline layer`; flash for the model and "
                                                   "decode views, as `roofline decode`)"),
            dtype: Optional[Dtype] = Query(None, description="default: the machine's default dtype"),
            compute_efficiency: ComputeEfficiency = SEED_DEFAULTS["compute_efficiency"],
            memory_efficiency: MemoryEfficiency = SEED_DEFAULTS["memory_efficiency"],
            launch_overhead_us: LaunchOverhead = None,
            overlap: Overlap = SEED_DEFAULTS["overlap"],
            layer: Optional[int] = Query(None, ge=0, le=1000, description="the layer view: layer index (default 0; models with one layer kind ignore it)"),
            cuda_graph: bool = Query(False, description="one launch for the whole pass, shared by its ops (a CUDA graph "
                                     "replayed), as the CLI's --cuda-graph; default: one launch per op"),
            kernels: Optional[Engine] = Query(None, description="price matmuls, fused attention, routed experts and "
                                              "all-reduces from this engine's measured kernels (the roofline[measured] "
                                              "extra), as the CLI's --kernels; default: the cost model alone"),
        ) -> LayerQuery:
            return LayerQuery(machine, model, phase, tokens, batch, context, attention, dtype,
                              compute_efficiency, memory_efficiency, launch_overhead_us, overlap, layer, cuda_graph,
                              kernels=kernels)

        return query

    layer_query = query_dependency(Dtype)
    # each part's storage over dtype, in the model, decode and serving views alike
    Weights = Annotated[Optional[PlanDtype], Query(description="weight storage dtype (default: dtype; a quantised "
                                                   "checkpoint's weights as stored when neither is given), as `--weights`")]
    KvCache = Annotated[Optional[PlanDtype], Query(description="KV-cache storage dtype (default: dtype), as `--kv-cache`")]

    def plan_query(
        q: LayerQuery = Depends(query_dependency(PlanDtype)),
        weights: Weights = None,
        kv_cache: KvCache = None,
        tp: int = Query(1, ge=1, le=MAX_TP, description="tensor-parallel GPUs per model copy, over the machine's link "
                        "(its nvlink, else xgmi, ...; past 8 GPUs its infiniband or roce), as `--tp`; the heads must split"),
    ) -> LayerQuery:
        """The whole-model views' query: the layer view's, with each part's precision and tensor parallelism."""
        return dataclasses.replace(q, weights=weights, kv_cache=kv_cache, tp=tp)

    def serving_query(
        machine: MachineParam = SEED_DEFAULTS["machine"],
        model: ModelParam = SEED_DEFAULTS["model"],
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
        memory_fraction: float = Query(SERVING_QUERY_DEFAULTS["memory_fraction"], ge=MIN_MEMORY_FRACTION, le=1, allow_inf_nan=False,
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
        compute_efficiency: ComputeEfficiency = SEED_DEFAULTS["compute_efficiency"],
        memory_efficiency: MemoryEfficiency = SEED_DEFAULTS["memory_efficiency"],
        launch_overhead_us: StepLaunchOverhead = None,
        overlap: Overlap = SEED_DEFAULTS["overlap"],
        weights: Weights = None,
        kv_cache: KvCache = None,
        step_overhead_ms: float = Query(SERVING_DEFAULTS["step_overhead_ms"], ge=0, le=MAX_STEP_OVERHEAD_MS, allow_inf_nan=False, description="the engine's own time per "
                                        "step in ms, not overlapped with the GPU (scheduling, sampling, detokenising), as "
                                        "`roofline serving --step-overhead`; default 0: the GPU's work alone"),
    ) -> ServingQuery:
        return ServingQuery(machine, model, dtype, tp, input_len, output_len, max_users, max_seqs, max_tokens, memory_fraction,
                            prefix_hit, slo_ttft_ms, slo_tpot_ms, percentile, price_per_gpu_hour, attention,
                            compute_efficiency, memory_efficiency, launch_overhead_us, overlap, weights, kv_cache,
                            step_overhead_ms)

    return layer_query, plan_query, serving_query


def options_payload(endpoint_names: dict) -> dict:
    """/api/options: the seed defaults, the choices and limits of the controls, the token slider's
    stops, and the query parameters each view's endpoint takes (``endpoint_names``: each /api/
    path's, from the app's schema)."""
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
                   "tp": [1, MAX_TP], "step_overhead_ms": [0, MAX_STEP_OVERHEAD_MS]},
    }
