"""One declaration per parameter of the layer, model and decode views (issue 37, roofline.parameters):
`roofline layer`'s flags (and `decode`'s, `sweep`'s, `serving`'s cost model), the API's queries and
their OpenAPI schema, /api/options and the library's defaults agree with the declaration, read back
from what argparse, app.openapi() and the library report, not from the table alone."""

from __future__ import annotations

import argparse
import importlib.util

import pytest
from schema_checks import assert_declared_range, schema_bounds

from roofline.cli import build_parser
from roofline.cli.args import shows_default
from roofline.parameters import (MIN_EFFICIENCY, QUERY_DEFAULTS, SEED_COST_MODEL, SEED_DEFAULTS, VIEW_ATTENTION,
                                 VIEW_BY_API, VIEW_PARAMS)

NUMBERS = [p for p in VIEW_PARAMS if not p.text]
VIEWS = ("/api/layer", "/api/model", "/api/decode")
# the cost model's flags, every command that prices ops takes them; the workload's, `layer` and `plot`
COST = ("compute_efficiency", "memory_efficiency", "launch_overhead_s", "overlap")


def _command(name):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _action(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


def _typed(p, value) -> str:
    return f"{value}s" if p.unit == "s" else repr(value) if isinstance(value, float) else str(value)


@pytest.fixture(scope="module")
def layer_parser():
    return _command("layer")


@pytest.fixture(scope="module")
def schemas(client):
    spec = client.app.openapi()["paths"]
    return {view: {p["name"]: p for p in spec[view]["get"]["parameters"]} for view in VIEWS}


# -- the library ------------------------------------------------------------------------------------------

def test_the_seed_cost_model_is_the_declared_one():
    from roofline.cost import CostModel, seed_cost_model

    seed = seed_cost_model()
    # the plate's figures: e_c 0.70, e_m 0.85, 3 us a launch, perfect overlap
    assert (seed.compute_efficiency, seed.memory_efficiency, seed.launch_overhead_s, seed.overlap) == (0.70, 0.85, 3e-6, 1.0)
    for p in VIEW_PARAMS:
        if p.name in COST and p.default is not None:
            assert getattr(seed, p.name) == p.default, p.name
    # the efficiencies' floor is the library's: CostModel takes it and refuses below it
    from roofline.errors import RooflineError

    assert CostModel(compute_efficiency=MIN_EFFICIENCY).compute_efficiency == MIN_EFFICIENCY
    with pytest.raises(RooflineError):
        CostModel(memory_efficiency=MIN_EFFICIENCY / 2)


def test_the_declared_choices_are_the_librarys():
    from roofline.blocks import ATTENTIONS, PHASES

    assert VIEW_BY_API["phase"].choices == PHASES and VIEW_BY_API["attention"].choices == ATTENTIONS
    assert set(VIEW_ATTENTION.values()) <= set(ATTENTIONS)


# -- the CLI ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", VIEW_PARAMS, ids=lambda p: p.flag)
def test_the_layer_flag_has_the_declared_default_and_says_it(layer_parser, p):
    action = _action(layer_parser, p.flag)
    if p.name == "attention":  # the command's own: `layer` the seed's naive
        assert action.default == VIEW_ATTENTION["layer"]
        return
    assert action.default == p.flag_default
    if p.choices:
        assert tuple(action.choices) == p.choices
    if shows_default(action):  # --help appends "(default: X)": X is the declared default
        assert action.default == p.default
    elif p.default is not None and p.name != "launch_overhead_s":
        # the help states it: "(default 8192)", "(default 0.70, ...)"
        shown = f"{p.default:.2f}" if isinstance(p.default, float) else str(p.default)
        assert shown in action.help, p.flag


@pytest.mark.parametrize("command", ["layer", "decode", "sweep", "serving", "kernel"])
@pytest.mark.parametrize("name", COST)
def test_every_command_takes_the_cost_model_over_the_declared_range(command, name):
    p = next(p for p in VIEW_PARAMS if p.name == name)
    action = _action(_command(command), p.flag)
    assert action.type(_typed(p, p.maximum)) == p.maximum
    with pytest.raises(argparse.ArgumentTypeError):
        action.type(_typed(p, p.maximum * 1.5))
    assert action.type(_typed(p, p.minimum)) == p.minimum  # each cost figure's floor is taken (not strictly)
    with pytest.raises(argparse.ArgumentTypeError):
        action.type(_typed(p, p.minimum - 0.5 * max(p.minimum, 1e-3)))


@pytest.mark.parametrize("p", [p for p in NUMBERS if p.name not in COST], ids=lambda p: p.flag)
def test_the_layer_flag_takes_its_declared_range_and_refuses_past_it(layer_parser, p):
    action = _action(layer_parser, p.flag)
    if p.maximum is not None:
        assert action.type(_typed(p, int(p.maximum))) == p.maximum
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(_typed(p, int(p.maximum) + 1))
    if p.strictly:
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(_typed(p, int(p.minimum)))
        assert action.type(_typed(p, int(p.minimum) + 1)) == p.minimum + 1
    else:
        assert action.type(_typed(p, p.minimum)) == p.minimum
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(_typed(p, p.minimum - 1))


# -- the API ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("p", VIEW_PARAMS, ids=lambda p: p.api)
def test_the_schema_states_the_declared_default_range_and_help(schemas, view, p):
    entry = schemas[view].get(p.api)
    if entry is None:  # /api/layer.* takes them all; the plan views all but the layer index
        assert p.api == "layer" and view != "/api/layer"
        return
    assert entry["schema"].get("default") == p.query_default
    assert entry["description"].startswith(p.query_help())  # the decode view adds its CUDA graph's launch
    if p.choices:
        assert tuple(schema_bounds(entry)[3]["enum"]) == p.choices
    if p.text:
        return
    assert_declared_range(entry, p)


def test_the_api_ranges_sit_inside_the_clis():
    """Every schema-valid value is one the CLI (and so the library) takes."""
    for p in NUMBERS:
        lo, hi, _ = p.api_range()
        assert hi / p.api_scale <= (p.maximum if p.maximum is not None else float("inf")), p.name
        assert lo / p.api_scale >= p.minimum, p.name


def test_options_tell_the_page_the_declared_defaults_and_limits(client, schemas):
    options = client.get("/api/options").json()
    assert options["defaults"] == dict(SEED_DEFAULTS) and options["view_attention"] == dict(VIEW_ATTENTION)
    # the page starts where a query left empty does, but for the layer view's naive attention and the seed's launch
    assert {k: v for k, v in options["defaults"].items() if k in QUERY_DEFAULTS} == dict(QUERY_DEFAULTS)
    assert options["defaults"]["launch_overhead_us"] == SEED_COST_MODEL["launch_overhead_s"] * 1e6
    for name in ("tokens", "batch", "launch_overhead_us", "compute_efficiency", "memory_efficiency", "overlap"):
        low, high, exclusive, _ = schema_bounds(schemas["/api/layer"][name])
        assert options["limits"][name] == [low, high] and not exclusive, name


# The combinations an extreme needs (a schema cannot state one parameter's range against another's): the
# longest prompt with one sequence fits a step's token rows (batch x tokens at most 2^30 rows, blocks.py), the
# largest batch a one-token decode, a context of 1 (below the prefill's 8,192 tokens) a decode; a layer index past
# the model's is the library's to refuse
COMPANIONS = {("tokens", "max"): {"batch": 1}, ("batch", "max"): {"phase": "decode", "tokens": 1},
              ("context", "max"): {"phase": "decode"}, ("context", "min"): {"phase": "decode"}}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("p", [p for p in NUMBERS if p.api != "layer"], ids=lambda p: p.api)
@pytest.mark.parametrize("end", ["min", "max"])
def test_a_schema_valid_extreme_is_accepted(client, schemas, view, p, end):
    low, high, exclusive, _ = schema_bounds(schemas[view][p.api])
    value = low if end == "min" else high
    if value is None or exclusive:
        pytest.skip("no inclusive bound at this end")
    params = {"model": "llama3.2-1b", p.api: value, **COMPANIONS.get((p.api, end), {})}
    r = client.get(view, params=params)
    assert r.status_code == 200, (params, r.text[:300])


@pytest.mark.parametrize("p", NUMBERS, ids=lambda p: p.api)
def test_one_step_past_the_schema_is_a_422_naming_the_parameter(client, schemas, p):
    low, high, exclusive, sch = schema_bounds(schemas["/api/layer"][p.api])
    step = 1 if sch["type"] == "integer" else 1e-9 * max(1.0, abs(high))
    for value in (high + step, low if exclusive else low - step):
        r = client.get("/api/layer", params={p.api: value})
        assert r.status_code == 422 and r.json()["field"] == p.api, (p.api, value, r.text[:200])


def test_the_shared_module_loads_without_the_heavy_packages():
    """The CLI reads the declarations at start: they import no numpy, argparse or web stack."""
    import subprocess
    import sys

    code = ("import sys, roofline.parameters; "
            "print(sorted(m for m in ('numpy', 'fastapi', 'argparse', 'roofline.cost') if m in sys.modules))")
    spec = importlib.util.find_spec("roofline")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(spec.submodule_search_locations[0].rsplit("/", 1)[0])})
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ["layer", "decode", "sweep", "memory", "train", "serving"])
def test_every_command_takes_the_declared_tensor_parallel_range(command):
    from roofline.parameters import TENSOR_PARALLEL as tp

    action = _action(_command(command), "--tp")
    assert action.default == tp.default == 1
    assert action.type(str(int(tp.maximum))) == tp.maximum  # 4,096 GPUs
    for past in (str(int(tp.maximum) + 1), "0"):
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(past)


@pytest.mark.parametrize("view", ["/api/model", "/api/decode", "/api/serving"])
def test_the_views_take_the_declared_tensor_parallel_range(client, view):
    from roofline.parameters import TENSOR_PARALLEL as tp

    entry = next(p for p in client.app.openapi()["paths"][view]["get"]["parameters"] if p["name"] == "tp")
    assert (entry["schema"]["minimum"], entry["schema"]["maximum"], entry["schema"]["default"]) == (1, tp.api_maximum, 1)
    assert tp.api_maximum <= tp.maximum  # 64 GPUs on the web, inside the CLI's 4,096


# -- precision: --dtype, --weights, --activations, --kv-cache, --fp8-scaling, --kernels ---------------------

def test_the_declared_precision_choices_are_the_librarys():
    from roofline.measured.model import FP8_SCALINGS, MOE_BACKENDS as MEASURED_MOE_BACKENDS
    from roofline.parameters import MOE_BACKENDS

    assert ("", *MOE_BACKENDS) == MEASURED_MOE_BACKENDS
    from roofline.measured.tables import ENGINES
    from roofline.parameters import ACTIVATIONS, FP8_SCALING, KERNELS, KV_CACHE, LAYER_DTYPE, PLAN_DTYPE, WEIGHTS
    from roofline.plan.limits import QUANT_DTYPES
    from roofline.units import DTYPE_BYTES

    assert LAYER_DTYPE.choices == tuple(DTYPE_BYTES)
    assert PLAN_DTYPE.choices == WEIGHTS.choices == ACTIVATIONS.choices == KV_CACHE.choices == QUANT_DTYPES
    assert FP8_SCALING.choices == FP8_SCALINGS and KERNELS.choices == ENGINES


def _precision(command):
    """The declared precision parameters a command takes (layer and kernel: one width for every tensor)."""
    from roofline.parameters import ACTIVATIONS, FP8_SCALING, KERNELS, KV_CACHE, LAYER_DTYPE, PLAN_DTYPE, WEIGHTS

    if command in ("layer", "kernel", "plot"):
        return (LAYER_DTYPE, *((KERNELS, FP8_SCALING) if command == "layer" else ()))
    return (PLAN_DTYPE, WEIGHTS, ACTIVATIONS, KV_CACHE, *((KERNELS, FP8_SCALING) if command != "memory" else ()))


PRECISION_COMMANDS = ["layer", "kernel", "plot", "decode", "memory", "sweep", "serving"]


@pytest.mark.parametrize("command", PRECISION_COMMANDS)
def test_every_command_takes_the_declared_precision(command):
    from roofline.parameters import KERNELS

    parser = _command(command)
    for p in _precision(command):
        action = _action(parser, p.flag)
        assert action.default is None and p.default is None, (command, p.flag)
        if command not in ("kernel",):  # `kernel` says what its --dtype sets in its own words
            assert action.help == p.cli_help(), (command, p.flag)
        if action.choices is not None:
            assert set(action.choices) == set(p.choices), (command, p.flag)
            continue
        # a type checks the name: --dtype of layer and kernel (its own message), --kernels (a profile's path too)
        for choice in p.choices:
            assert action.type(choice) == choice, (command, p.flag, choice)
        if p is not KERNELS:
            with pytest.raises(argparse.ArgumentTypeError):
                action.type("fp7")


@pytest.mark.parametrize("view", [*VIEWS, "/api/serving"])
def test_the_views_take_the_declared_precision(client, view):
    from roofline.parameters import KERNELS, KV_CACHE, LAYER_DTYPE, PLAN_DTYPE, WEIGHTS

    entries = {p["name"]: p for p in client.app.openapi()["paths"][view]["get"]["parameters"]}
    declared = [LAYER_DTYPE if view == "/api/layer" else PLAN_DTYPE]
    declared += [WEIGHTS, KV_CACHE] if view != "/api/layer" else []
    declared += [KERNELS] if view != "/api/serving" else []
    for p in declared:
        entry = entries[p.api]
        assert entry["schema"]["anyOf"][0]["enum"] == list(p.choices), (view, p.api)
        assert entry["schema"].get("default") is None
        if not (view == "/api/serving" and p is PLAN_DTYPE):  # the serving view's says `roofline serving --dtype`
            assert entry["description"] == p.query_help(), (view, p.api)
    options = client.get("/api/options").json()
    assert (options["dtypes"], options["plan_dtypes"]) == (list(LAYER_DTYPE.choices), list(PLAN_DTYPE.choices))


def test_a_dtype_past_the_declared_choices_is_refused_by_name(client):
    r = client.get("/api/model", params={"dtype": "fp64"})  # the layer view's width, not a plan view's storage
    assert r.status_code == 422 and r.json()["field"] == "dtype"
    assert client.get("/api/layer", params={"dtype": "fp64", "model": "llama3.2-1b"}).status_code == 200


@pytest.mark.parametrize("command", ["layer", "decode", "sweep", "serving", "kernel"])
def test_every_command_takes_the_declared_cuda_graph_switch(command, schemas):
    from roofline.parameters import CUDA_GRAPH

    action = _action(_command(command), CUDA_GRAPH.flag)
    assert (action.nargs, action.default, action.help) == (0, False, CUDA_GRAPH.cli_help())
    for view in VIEWS:
        entry = schemas[view][CUDA_GRAPH.api]
        assert (entry["schema"]["type"], entry["schema"]["default"]) == ("boolean", False)
        assert entry["description"] == CUDA_GRAPH.query_help()


def test_the_cuda_graph_query_takes_a_boolean_and_refuses_anything_else(client):
    params = {"model": "llama3.2-1b", "phase": "decode", "tokens": 1, "batch": 1}
    eager, graph = (client.get("/api/layer", params={**params, "cuda_graph": g}) for g in ("false", "true"))
    assert eager.status_code == graph.status_code == 200
    assert client.get("/api/layer", params={**params, "cuda_graph": "maybe"}).status_code == 422
