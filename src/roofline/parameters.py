"""One declaration per parameter (issue 37): its name, flag, query name, unit, default, range and help,
and which commands and views take it. The CLI's flags (cli.args, cli.serving_args), the API's queries
and their OpenAPI schema (web.params) and the page's controls (/api/options) are made from these
tables, so they cannot disagree; tests/test_view_parameters.py and tests/test_serving_parameters.py
read them back from argparse, app.openapi() and the library.

Here: ``Param``, and the parameters of the layer, model and decode views and of the commands that
take the same (`roofline layer`, `decode`, `memory`, `sweep`, `serving`): machine, model, phase,
tokens, batch, context, layer, attention, the cost model (e_c, e_m, launch, overlap). The seed cost
model's figures and the efficiencies' floor live here, their one home (cost.py reads them). The
serving parameters are serving.parameters'. No argparse, FastAPI or numpy: the CLI reads it at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from roofline.plan.limits import ENGINE_MEMORY_FRACTION, MIN_MEMORY_FRACTION, QUANT_DTYPES, SEARCH_MAX_BATCH
from roofline.units import DTYPE_BYTES

CLI, API = "cli", "api"
BOTH = frozenset((CLI, API))

# The workshop's cost model (the 'Predicting a Kernel's Time' plate): e_c 0.70, e_m 0.85, 3 us a launch, perfect
# overlap; cost.seed_cost_model builds it from these
SEED_COST_MODEL = MappingProxyType(dict(compute_efficiency=0.70, memory_efficiency=0.85, launch_overhead_s=3e-6,
                                        overlap=1.0))
MIN_EFFICIENCY = 1e-3  # below 0.1% of peak is a typo (a percentage given as a fraction twice), not a kernel
MAX_LAUNCH_S = 1.0  # one second per launch: past it, a unit slip (3 for 3 us)
COUNT_MAX = 1e12  # the CLI's counts (tokens, batch, context); the library's own checks bound the work
# The web's tighter bounds: a request's work within a budget (the token slider's range, 2^17; the batch; layers;
# tensor-parallel GPUs)
WEB_MAX_TOKENS, WEB_MAX_BATCH, WEB_MAX_LAYER, WEB_MAX_TP = 131072, 65536, 1000, 64
# The seed's workload (the plate's: Llama 3 8B on an H100, one 8,192-token sequence)
SEED_MACHINE, SEED_MODEL, SEED_TOKENS = "h100-sxm", "llama3-8b", 8192
PHASES = ("prefill", "decode")  # blocks.PHASES (the test holds them equal)
ATTENTIONS = ("naive", "flash")  # blocks.ATTENTIONS
# The attention each view's command takes when none is given: `layer` the seed's naive; `decode`, the whole
# model and serving: flash (the API takes the same when a query leaves it out)
PLAN_ATTENTION = "flash"  # the planning commands' (decode, train, memory, sweep, serving): engines run flash
VIEW_ATTENTION = MappingProxyType({"layer": "naive", "model": PLAN_ATTENTION, "decode": PLAN_ATTENTION,
                                   "serving": PLAN_ATTENTION})


def _scaled(x, scale):
    """A bound in the query's unit: a count stays as it is (an int stays an int)."""
    if x is None or scale == 1:
        return x
    return int(x * scale) if isinstance(x, int) else x * scale


@dataclass(frozen=True)
class Param:
    """A parameter: ``name`` the library's (RooflineError.field), ``flag`` the CLI's and ``api`` the
    query's (None: not taken there). The range is check_number's: ``minimum`` (excluded when
    ``strictly``) to ``maximum`` inclusive; ``api_minimum``/``api_maximum`` the API's where it differs
    (the view bounds its simulation work; a positive float the schema must bound away from 0).
    ``unit`` "s": the CLI takes a time with its unit (500ms), the API a number of ``api_unit``, ms or us
    (``api`` ends _ms or _us). ``default`` is the library's; ``engine``: an Engine setting, whose default is the engine's own
    (--engine's, else Engine's), so neither the flag nor the query has one (None). ``cli_default`` False:
    the flag's value stays None until the command has checked what it combines with (the help says
    the default). ``text``: a name, not a number. ``help`` may name ``{default}``; ``api_help`` is the query's where it differs;
    ``label`` the page's control for it (none: no generated control)."""

    name: str
    flag: str | None
    api: str | None
    help: str
    default: object = None
    minimum: float | None = 0.0
    maximum: float | None = None
    strictly: bool = True
    integer: bool = False
    unit: str = ""
    engine: bool = False
    cli_default: bool = True
    api_minimum: float | None = None
    api_maximum: float | None = None
    api_help: str = ""
    label: str = ""
    text: bool = False  # a name (ENGINE[@VERSION]), not a number: no range
    metavar: str | None = None
    api_unit: str = "ms"  # a time's unit in the query: ms, or us (a kernel launch)
    choices: tuple | None = None  # a name's choices, where they are fixed
    many: bool = False  # the CLI takes a comma-separated list of counts (cli.count_lists.count_list), each in range
    switch: bool = False  # a flag without a value (store_true): False unless given

    @property
    def api_scale(self) -> float:
        """The query's number per library unit: 1,000 for a time in ms, 10^6 in us, else 1."""
        return {"ms": 1e3, "us": 1e6}[self.api_unit] if self.unit == "s" else 1

    @property
    def flag_default(self):
        """The argparse default: None for an engine setting or one filled in later."""
        return None if self.engine or not self.cli_default else self.default

    @property
    def query_default(self):
        """The API's default: None for an engine setting (the engine's own) or none at all."""
        if self.engine or self.default is None:
            return None
        return self.default * self.api_scale if self.unit == "s" else self.default

    def api_range(self) -> tuple[float | None, float | None, bool]:
        """(minimum, maximum, strictly) as the query takes it, in its unit."""
        lo = self.api_minimum if self.api_minimum is not None else self.minimum
        hi = self.api_maximum if self.api_maximum is not None else self.maximum
        scale = self.api_scale if self.unit == "s" else 1  # a count stays an int
        strictly = self.strictly and self.api_minimum is None
        return (_scaled(lo, scale), _scaled(hi, scale), strictly)

    def shown_default(self) -> str:
        """The default as help text writes it: 8,192, 0.9, 0 (a time in ms: 3.27 ms)."""
        v = self.default
        if isinstance(v, (bool, str)) or v is None:
            return str(v)
        if isinstance(v, int):
            return f"{v:,}"
        return f"{v * 1e3:g} ms" if self.unit == "s" and v else f"{v:g}"

    def check(self, value, name: str | None = None):
        """``value`` if it is within the declared range (errors.check_number), else a RooflineError naming the
        parameter (``name``, where the library calls it otherwise): the library's own check of what it takes,
        the same bound the flag and the query state."""
        from roofline.errors import check_number

        return check_number(name or self.name, value, minimum=self.minimum, strictly=self.strictly,
                            maximum=self.maximum, integer=self.integer)

    def cli_help(self) -> str:
        return self.help.format(default=self.shown_default())

    def query_help(self) -> str:
        text = (self.api_help or self.help).format(default=self.shown_default())
        return text + (f"; default: the engine's own ({self.shown_default()} with no engine)" if self.engine else "")


E_C_HELP = "achievable fraction of peak FLOP/s, e_c"
E_M_HELP = "achievable fraction of peak bandwidth, e_m"
LAUNCH_HELP = "microseconds per kernel launch (default: the machine's preset, as the CLI)"

# The layer, model and decode views' parameters (/api/layer, /api/model, /api/decode; /api/serving shares the
# machine, model and cost model) and the flags of `roofline layer` (add_layer_flags, add_cost_flags) that mean the
# same. Where a command's default differs (decode's --context 4096), the command says it beside its flag.
VIEW_PARAMS: tuple[Param, ...] = (
    Param("machine", "--machine", "machine", "preset (see `roofline machines`) or a machine TOML file", SEED_MACHINE,
          minimum=None, text=True, api_help="machine preset or file machine key, or a machine given by its figures: "
          "custom:bf16=989TFLOP/s,bw=3.35TB/s,mem=80GB,launch=3us,nvlink=450GB/s (a dtype's peak, the memory's "
          "bandwidth and size, the time per launch, a link's bandwidth per direction; SI units, 989e12 alike)"),
    Param("model", "--model", "model", "preset (see `roofline models`) or a config.json path", SEED_MODEL,
          minimum=None, text=True, api_help="model preset"),
    Param("phase", "--phase", "phase", "", "prefill", minimum=None, text=True, choices=PHASES,
          api_help="prefill (T tokens) or decode (one token at context S)"),
    Param("tokens", "--tokens", "tokens", f"prefill: new tokens per sequence, T (default {SEED_TOKENS}); decode: the "
          "context S when --context is not given", SEED_TOKENS, maximum=COUNT_MAX, integer=True, cli_default=False,
          api_maximum=WEB_MAX_TOKENS,
          api_help="prefill: tokens per sequence T; decode: the context S unless context is given"),
    Param("batch", "--batch", "batch", "sequences, B", 1, maximum=COUNT_MAX, integer=True, api_maximum=WEB_MAX_BATCH,
          api_help="sequences B"),
    Param("context", "--context", "context", "decode: tokens already in the KV cache, S (default: --tokens, else "
          "4096); prefill: the positions attended, S >= T (default T; larger is a chunked-prefill step over a cache "
          "of S - T)", maximum=COUNT_MAX, integer=True, api_maximum=WEB_MAX_TOKENS,
          api_help="decode: tokens already in the KV cache, S (default: tokens); prefill: positions attended, S >= "
                   "tokens (a chunked-prefill step; default tokens)"),
    Param("layer", "--layer", "layer", "one layer by index (0-based); default: each distinct layer kind with its count",
          minimum=0, strictly=False, integer=True, api_maximum=WEB_MAX_LAYER,
          api_help="the layer view: layer index (default 0; models with one layer kind ignore it)"),
    Param("attention", "--attention", "attention", "", minimum=None, text=True, choices=ATTENTIONS,
          api_help="naive (QK^T, softmax, PV unfused) or flash (default: naive for the layer view, as `roofline "
                   "layer`; flash for the model and decode views, as `roofline decode`)"),
    Param("compute_efficiency", "--compute-efficiency", "compute_efficiency", E_C_HELP,
          SEED_COST_MODEL["compute_efficiency"], minimum=MIN_EFFICIENCY, strictly=False, maximum=1,
          cli_default=False, api_help="e_c, achievable fraction of peak FLOP/s"),
    Param("memory_efficiency", "--memory-efficiency", "memory_efficiency", E_M_HELP,
          SEED_COST_MODEL["memory_efficiency"], minimum=MIN_EFFICIENCY, strictly=False, maximum=1,
          cli_default=False, api_help="e_m, achievable fraction of peak bandwidth"),
    # the library's default is the machine's preset launch (Machine.launch_overhead_s); the seed's 3 us where it has none
    Param("launch_overhead_s", "--launch-overhead", "launch_overhead_us", "time per kernel launch, with its unit: 3us, "
          "0.003ms (a bare number is refused, as for --slo-ttft; 0 is none)", minimum=0, strictly=False,
          maximum=MAX_LAUNCH_S, unit="s", api_unit="us", api_help=LAUNCH_HELP),
    Param("overlap", "--overlap", "overlap", "overlap of compute and memory time: 1 = max() (the roofline's perfect "
          "overlap), 0 = sum", SEED_COST_MODEL["overlap"], minimum=0, strictly=False, maximum=1,
          api_help="1: max(compute, memory) (perfect overlap, the roofline's); 0: their sum"),
)

# one launch for the whole pass (a CUDA graph replayed): every command that prices ops (add_cost_flags) and the views
CUDA_GRAPH = Param("cuda_graph", "--cuda-graph", "cuda_graph", "one launch for the whole workload", False, minimum=None,
                   switch=True, api_help="one launch for the whole pass, shared by its ops (a CUDA graph replayed), as "
                   "the CLI's --cuda-graph; default: one launch per op")

# Tensor-parallel GPUs: `layer`, `decode`, `sweep` and `serving` take --tp (cli.plan_args._add_tp), the model, decode
# and serving views tp; serving.parameters lists it among its own
TENSOR_PARALLEL = Param("tensor_parallel", "--tp", "tp", "tensor-parallel GPUs per model copy (2 all-reduces per block; 3 where a q/k norm spans all heads: MiniMax-M2)",
                        1, maximum=4096, integer=True, api_maximum=WEB_MAX_TP, api_help="tensor-parallel GPUs per replica")

VIEW_BY_NAME = {p.name: p for p in (*VIEW_PARAMS, TENSOR_PARALLEL)}
VIEW_BY_API = {p.api: p for p in VIEW_PARAMS if p.api}
# What a query of the layer, model and decode views takes when it leaves a parameter out (attention: VIEW_ATTENTION;
# launch: the machine's preset), and the page's starting values: those, the layer view's naive attention and the
# seed's 3 us launch
QUERY_DEFAULTS = MappingProxyType({p.api: p.query_default for p in VIEW_PARAMS if p.query_default is not None})
SEED_DEFAULTS = MappingProxyType({**{k: QUERY_DEFAULTS[k] for k in ("machine", "model", "phase", "tokens", "batch")},
                                  "attention": VIEW_ATTENTION["layer"],
                                  **{k: QUERY_DEFAULTS[k] for k in ("compute_efficiency", "memory_efficiency")},
                                  "launch_overhead_us": SEED_COST_MODEL["launch_overhead_s"] * 1e6,
                                  "overlap": QUERY_DEFAULTS["overlap"]})


# -- precision: the dtypes a command prices and stores in, and the measured kernels that price its ops ----------
# `layer` and `kernel` price every tensor at one dtype the units know (units.DTYPE_BYTES: fp64 and tf32 too); the
# planning commands and their views store weights, activations and caches in plan.limits.QUANT_DTYPES (a
# Precision's widths). Two declarations of --dtype, since the two mean different things (one tensor width and
# its peak; W8A8 as engines run it, or weights only where the machine has no peak).
LAYER_DTYPE = Param("dtype", "--dtype", "dtype", "every tensor and the peak, as the workshop plate prices one layer: "
                    "bf16, fp16, fp8, int8, fp32, ... (default: the machine's, bf16 on most); engines' W8A8 is "
                    "`roofline decode --dtype fp8`", minimum=None, text=True, choices=tuple(DTYPE_BYTES),
                    api_help="default: the machine's default dtype")
PLAN_DTYPE = Param("dtype", "--dtype", "dtype", "weights, activations and KV cache (default: the machine's, bf16 on "
                   "most); fp8, int8 or fp4 where the machine computes in it are W8A8 (W4A4) as engines run it: weights, "
                   "matmuls and KV cache in it, bf16 between ops; a dtype the machine has no peak for (int4, fp4 before "
                   "Blackwell) means weights only, with bf16 activations, KV cache and matmuls", minimum=None, text=True,
                   choices=QUANT_DTYPES, api_help="default: the machine's default dtype")
WEIGHTS = Param("weights", "--weights", "weights", "weight storage dtype (default --dtype, or as the checkpoint stores "
                "them when its config.json has a quantization_config: MXFP4 experts, block fp8, int4 groups)",
                minimum=None, text=True, choices=QUANT_DTYPES, api_help="weight storage dtype (default: dtype; a "
                "quantised checkpoint's weights as stored when neither is given), as `--weights`")
ACTIVATIONS = Param("activations", "--activations", None, "activation dtype between ops, one the machine computes in "
                    "(default --dtype, bf16 under W8A8)", minimum=None, text=True, choices=QUANT_DTYPES)
KV_CACHE = Param("kv_cache", "--kv-cache", "kv_cache", "KV-cache storage dtype (default --dtype)", minimum=None,
                 text=True, choices=QUANT_DTYPES, api_help="KV-cache storage dtype (default: dtype), as `--kv-cache`")
# measured.model.FP8_SCALINGS and measured.tables.ENGINES (numpy's modules: the test holds them equal)
FP8_SCALINGS, KERNEL_ENGINES = ("tensor", "block"), ("trtllm", "vllm", "sglang")
FP8_SCALING = Param("fp8_scaling", "--fp8-scaling", None, "with --kernels: fp8 weights scaled per tensor (default; "
                    "ModelOpt and the engines' on-the-fly fp8) or per 128 x 128 block (DeepSeek-V3/R1's and Qwen3's FP8 "
                    "checkpoints): each has its own kernels and table rows", minimum=None, text=True, choices=FP8_SCALINGS)
# measured.model.MOE_BACKENDS less its "" (the engine's default; the test holds them equal)
MOE_BACKENDS = ("cutlass", "trtllm")
MOE_BACKEND = Param("moe_backend", "--moe-backend", None, "with --kernels: the MoE backend whose measured kernels time "
                    "the routed experts, as TensorRT-LLM's moe_config.backend names them: cutlass (its default, and "
                    "the one kernel the other engines' tables hold) or trtllm (its trtllm-gen kernels, where the tables "
                    "time the model's experts with them: NVFP4 on Blackwell; elsewhere the default's, said)",
                    minimum=None, text=True, choices=MOE_BACKENDS)
# the CLI's --kernels also takes a calibration profile's path (cli.args.kernels_arg checks it); the API an engine
KERNELS = Param("kernels", "--kernels", "kernels", "price matmuls from an engine's measured kernels (trtllm, vllm, "
                "sglang; e.g. vllm@0.24.0; `roofline machines --measured` lists them), or from the GEMMs and attention "
                "of your own `roofline calibrate` profile (PROFILE.toml, with --machine PROFILE.toml); the other ops "
                "keep the cost model", minimum=None, text=True, choices=KERNEL_ENGINES,
                metavar="ENGINE[@VERSION]|PROFILE", api_help="price matmuls, fused attention, routed experts and "
                "all-reduces from this engine's measured kernels (the roofline[measured] extra), as the CLI's "
                "--kernels; default: the cost model alone")
PRECISION_PARAMS = (LAYER_DTYPE, PLAN_DTYPE, WEIGHTS, ACTIVATIONS, KV_CACHE, FP8_SCALING, KERNELS)


# -- the flags the planning commands repeat (cli.plan, cli.plan_args, cli.serving_args; cli.args.add_declared makes
# each flag). What-if scales of the machine: every command that takes --machine
COMPUTE_SCALE = Param("compute_scale", "--compute-scale", None, "what-if: multiply every peak by this (the roofline "
                      "chapter's exercise 5: 2)", 1.0, maximum=1e3)
BANDWIDTH_SCALE = Param("bandwidth_scale", "--bandwidth-scale", None, "what-if: multiply memory bandwidth by this", 1.0,
                        maximum=1e3)
# `decode` tabulates a list of batches (the views' --batch is one)
DECODE_BATCHES = Param("batch", "--batch", None, f"batches to tabulate, each at most {SEARCH_MAX_BATCH:,} (default "
                       "1,2,4,...,1024)", maximum=SEARCH_MAX_BATCH, integer=True, many=True)
# the links and the scale-up domain of tensor (and data) parallelism: `layer`, `decode`, `sweep`, `serving` (add_tp)
# and `train`, which says them in its own words
TP_LINK = Param("tp_link", "--tp-link", None, "link of the tensor-parallel all-reduces (default: the machine's nvlink, "
                "else xgmi, ici, roce, pcie; past --gpus-per-node, its infiniband or roce)", minimum=None, text=True)
DP_LINK = Param("dp_link", "--dp-link", None, "data-parallel link (default: the tensor-parallel default within a node; "
                "across nodes infiniband, else roce, ici, pcie)", minimum=None, text=True)
GPUS_PER_NODE = Param("gpus_per_node", "--gpus-per-node", None, "GPUs one NVLink/xGMI domain joins (default 8, an HGX "
                      "node; 72 for a GB200 NVL72)", 8, maximum=1_000_000, integer=True)  # plan.parallel.check_scale_up's
# `train`'s: plan.training.train_plan bounds its node at 10,000 GPUs (a training cluster's node, not a scale-up
# domain searched for inference)
TRAIN_GPUS_PER_NODE = Param("gpus_per_node", "--gpus-per-node", None, "", 8, maximum=10_000, integer=True)
# `train` and `memory --mode train`: pipeline parallelism of a training run (serving's --pp, pipeline stages of an
# inference engine up to 1,024, is serving.parameters')
TRAIN_PIPELINE_PARALLEL = Param("pipeline_parallel", "--pp", None, "pipeline parallel", 1, maximum=4096, integer=True)
# the share of a GPU's memory an engine takes: `decode` and `memory` plan with vLLM's 0.9 (as `serving`); serving's
# own (serving.parameters) is this range, its default the engine's
MEMORY_FRACTION = Param("memory_fraction", "--memory-fraction", "memory_fraction", "the share of the memory an engine "
                        "uses for weights, a step's activations and the KV cache (default: vLLM's 0.9, as `serving`)",
                        ENGINE_MEMORY_FRACTION, minimum=MIN_MEMORY_FRACTION, strictly=False, maximum=1.0)
# $ per GPU-hour: `train` (the run's cost) and `serving` (serving.parameters: cost per token, over this range)
PRICE = Param("price_per_gpu_hour", "--price", None, "$ per GPU-hour", maximum=1e6)
MTP = Param("mtp", "--mtp", None, "inference: hold the model's multi-token-prediction module too (its weights and "
            "cache), as `serving --draft mtp` does", False, minimum=None, switch=True)
# a training run's layout: `train` and `memory --mode train` (plan.train_memory.make_layout's bounds: 10^7 GPUs,
# 10^8 tokens a sequence); memory says "train:" before each
GPUS = Param("gpus", "--gpus", None, "", maximum=10_000_000, integer=True)
SEQ_LEN = Param("seq_len", "--seq-len", None, "tokens per training sequence, T", 8192, maximum=100_000_000, integer=True)
ZERO = Param("zero", "--zero", None, "ZeRO stage over the data-parallel ranks", 0, minimum=None, text=True,
             choices=(0, 1, 2, 3))
MICRO_BATCH = Param("micro_batch", "--micro-batch", None, "sequences per micro-batch", 1, maximum=COUNT_MAX, integer=True)
GLOBAL_BATCH = Param("global_batch", "--global-batch", None, "tokens per optimizer step (default: one micro-batch per "
                     "data-parallel rank)", maximum=1e15)
RECOMPUTE = Param("recompute", "--recompute", None, "", "none", minimum=None, text=True,
                  choices=("none", "selective", "full"))

# `train`'s own: the run's tokens (plan.training.train_plan's bound, 10^18), the utilisation (MFU or HFU: one of the
# two; the library's default MFU 0.40), the FLOPs convention (plan.train_memory.CONVENTIONS) and the peak's dtype
TRAIN_MFU = 0.40
TRAIN_TOKENS = Param("tokens", "--tokens", None, "training tokens in all, D of 6ND, e.g. 15e12 (not a sequence's length: "
                     "that is --seq-len)", maximum=1e18)
MFU = Param("mfu", "--mfu", None, f"model FLOPs utilisation (default {TRAIN_MFU:.2f})", TRAIN_MFU, maximum=1.0,
            cli_default=False)
HFU = Param("hfu", "--hfu", None, "hardware FLOPs utilisation, recomputation included (instead of --mfu)", maximum=1.0)
FLOPS_CONVENTION = Param("convention", "--flops", None, "6nd: 6N per token (the roofline chapter's 6ND); full: "
                         "6N_matmul + 12Lhs (attention, PaLM/Megatron)", "6nd", minimum=None, text=True,
                         choices=("6nd", "full"))
PEAK_DTYPE = Param("peak_dtype", "--peak-dtype", None, "dtype whose dense peak the utilisation is of (one the machine "
                   "has a peak for)", minimum=None, text=True, choices=QUANT_DTYPES)
NO_SEQUENCE_PARALLEL = Param("no_sequence_parallel", "--no-sequence-parallel", None, "tensor parallel without sequence "
                             "parallelism", False, minimum=None, switch=True)
# `memory`'s mode; `decode`'s step op by op at one of its batches
MEMORY_MODE = Param("mode", "--mode", None, "", "inference", minimum=None, text=True, choices=("inference", "train"))
DECODE_BREAKDOWN = Param("breakdown", "--breakdown", None, "also print the whole step op by op at this batch (--json: "
                         "the \"breakdown\" key)", maximum=SEARCH_MAX_BATCH, integer=True, metavar="BATCH")
# `sweep`'s axis (plan.sweep.AXES: the test holds them equal) and its sizes (a list, ranges or @FILE: cli.count_lists)
SWEEP_MACHINES = "h100-sxm,h200,b200,a100-80gb,mi300x,l40s"  # --over machines without --machine
SWEEP_OVER = Param("over", "--over", None, "what varies: tokens, batch or context (their sizes in --values), or machines "
                   f"(their list in --machine A,B,C; default {SWEEP_MACHINES})", minimum=None, text=True,
                   choices=("tokens", "batch", "context", "machines"))
SWEEP_VALUES = Param("values", "--values", None, "sizes: a list 128,1024,8192; a range START:STOP:lin|log:COUNT, ends "
                     "included, rounded to whole numbers, repeats dropped (1:131072:log:18 = 1,2,4,...,131072); or @FILE, "
                     "one a line or comma-separated, # comments (default: powers of 2)", maximum=COUNT_MAX, integer=True,
                     many=True)
SWEEP_PHASE = Param("phase", "--phase", None, "default: prefill for tokens, else decode", minimum=None, text=True,
                    choices=PHASES)
