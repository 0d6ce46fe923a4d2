"""One declaration per serving parameter (issue 37, serving.parameters): the CLI's flag, the API's query
and its OpenAPI schema, /api/options and the library's defaults agree with the declaration, read
back from what argparse, app.openapi() and the library report, not from the table alone."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

import pytest
from schema_checks import assert_declared_range, schema_bounds

from roofline.cli import build_parser
from roofline.cli.args import shows_default
from roofline.errors import RooflineError
from roofline.plan.limits import ENGINE_MEMORY_FRACTION, ENGINE_STEP_SEQS, ENGINE_STEP_TOKENS
from roofline.serving.engine import Engine
from roofline.serving.parameters import (BY_API, BY_NAME, PERCENTILE, REQUESTS, SERVING_PARAMS, SERVING_SHAPED,
                                         engine_of)

FLAGGED = [p for p in SERVING_PARAMS if p.flag]
QUERIED = [p for p in SERVING_PARAMS if p.api]


def _serving_parser():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["serving"]


def _action(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


@pytest.fixture(scope="module")
def serving_parser():
    return _serving_parser()


@pytest.fixture(scope="module")
def schema(client):
    return {p["name"]: p for p in client.app.openapi()["paths"]["/api/serving"]["get"]["parameters"]}


# -- the CLI ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", FLAGGED, ids=lambda p: p.flag)
def test_the_flag_has_the_declared_default_and_says_it_in_help(serving_parser, p):
    action = _action(serving_parser, p.flag)
    assert action.default == p.flag_default
    if shows_default(action):  # --help appends "(default: X)": X is the declared default
        assert action.default == p.default
    elif p.default is not None and p.flag != "--tp":  # the help states it ("default 8,192, or --engine's")
        assert p.shown_default() in action.help, p.flag


def _typed(p, value) -> str:
    return f"{value}s" if p.unit == "s" else repr(value) if isinstance(value, float) else str(value)


@pytest.mark.parametrize("p", [p for p in FLAGGED if not p.text], ids=lambda p: p.flag)
def test_the_flag_takes_its_declared_range_and_refuses_past_it(serving_parser, p):
    action = _action(serving_parser, p.flag)
    top = action.type(_typed(p, p.maximum))
    assert (top[0] if isinstance(top, tuple) else top) == p.maximum
    with pytest.raises(argparse.ArgumentTypeError):
        action.type(_typed(p, p.maximum + 1 if p.integer else p.maximum * 1.5))
    low = p.minimum
    if p.strictly:
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(_typed(p, low))
    else:
        assert action.type(_typed(p, low)) == low
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(_typed(p, low - 1 if p.integer else low - 0.5 * max(low, 1e-3)))


def test_an_engine_setting_left_out_is_the_engines_own_and_one_given_wins():
    from roofline.machines import get_machine

    h100 = get_machine("h100-sxm")
    # serving.Engine's own settings are the declared defaults, and plan.limits' (their home)
    plain = engine_of(None, h100)
    assert (plain.max_seqs, plain.max_tokens, plain.memory_fraction) == (ENGINE_STEP_SEQS, ENGINE_STEP_TOKENS,
                                                                        ENGINE_MEMORY_FRACTION)
    assert {p.name: getattr(plain, p.name) for p in SERVING_PARAMS if p.engine} == \
        {p.name: p.default for p in SERVING_PARAMS if p.engine}
    # vLLM on an 80 GB H100: max_num_seqs 1,024 and max_num_batched_tokens 8,192 (data/engines.toml, VLLM-ARGS)
    vllm = engine_of("vllm", h100)
    assert (vllm.max_seqs, vllm.max_tokens, vllm.preset) == (1024, 8192, "vllm")
    assert engine_of("vllm", h100, max_seqs=64, max_tokens=None).max_seqs == 64


def test_the_library_functions_take_the_declared_defaults():
    from roofline.serving.search import best_parallelism, max_rate_within, sweep_concurrency

    for fn in (max_rate_within, sweep_concurrency, best_parallelism):
        assert inspect.signature(fn).parameters["percentile"].default == PERCENTILE, fn.__name__
        assert inspect.signature(fn).parameters["seed"].default == BY_NAME["seed"].default, fn.__name__
    for fn in (max_rate_within, best_parallelism):
        assert inspect.signature(fn).parameters["requests"].default == REQUESTS, fn.__name__
    fields = {f.name: f.default for f in dataclasses.fields(Engine)}
    for p in SERVING_PARAMS:
        if p.name in fields:
            assert p.default == fields[p.name], p.name


@pytest.mark.parametrize("p", SERVING_SHAPED, ids=lambda p: p.flag)
def test_a_flag_of_its_own_shape_has_its_declared_default_help_and_choices(serving_parser, p):
    action = _action(serving_parser, p.flag)
    assert (action.default, action.help, action.metavar) == (p.flag_default, p.cli_help(), p.metavar)
    assert (action.nargs == 0) == p.switch
    assert action.choices == (list(p.choices) if p.choices else None)
    if p.many:  # a list of counts, each in the declared range
        assert action.type(f"1,{p.maximum}") == [1, p.maximum]
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(str(p.maximum + 1))


def test_the_disaggregated_pools_take_the_declared_replicas_router_and_first_token(serving_parser):
    from roofline.serving.disagg import FIRST_TOKENS, ROUTERS, simulate_disaggregated
    from roofline.serving.parameters import DISAGG, FIRST_TOKEN, ROUTER

    assert (ROUTER.choices, FIRST_TOKEN.choices) == (ROUTERS, FIRST_TOKENS)
    signature = inspect.signature(simulate_disaggregated).parameters
    assert (signature["router"].default, signature["first_token"].default) == (ROUTER.default, FIRST_TOKEN.default)
    split = _action(serving_parser, "--disagg").type
    assert split(f"1:{DISAGG.maximum}") == (1, DISAGG.maximum)
    for past in (f"1:{DISAGG.maximum + 1}", "0:1"):
        with pytest.raises(argparse.ArgumentTypeError):
            split(past)


# -- the API ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", QUERIED, ids=lambda p: p.api)
def test_the_schema_states_the_declared_default_range_and_help(schema, p):
    entry = schema[p.api]
    assert entry["schema"].get("default") == p.query_default
    assert entry["description"] == p.query_help()
    if p.text:  # the engine: its choices, the engines of data/engines.toml
        from roofline.serving.engines import names

        assert sorted(schema_bounds(entry)[3]["enum"]) == sorted(names())
        return
    assert_declared_range(entry, p)


def test_options_tell_the_page_each_declared_control(client, schema):
    options = client.get("/api/options").json()
    controls = {c["name"]: c for c in options["serving_controls"]}
    assert set(controls) <= set(BY_API) and set(controls) >= {"percentile", "prefix_hit", "memory_fraction", "max_seqs",
                                                              "max_tokens", "price_per_gpu_hour", "engine"}
    for name, c in controls.items():
        low, high, _, _ = schema_bounds(schema[name])
        assert (c["min"], c["max"]) == (low, high), name
        assert c["default"] == schema[name]["schema"].get("default"), name
        if c["max"] is not None:
            assert options["limits"][name] == [low, high], name
        # the page's start: the declared default, a target, or empty (left out: the API's own, the engine's)
        assert options["serving_defaults"].get(name, c["default"]) in (c["default"], "", 500.0, 30.0), name
    assert controls["max_seqs"]["engine_setting"] and controls["max_seqs"]["engine_default"] == ENGINE_STEP_SEQS
    assert controls["step_overhead_ms"]["engine_default"] == 0


# The combinations each extreme needs (a schema cannot state one parameter's range against another's):
# a step's token budget holds a token of each sequence (max_tokens 1 with max_seqs 1, and short requests to
# simulate a token a step within the view's bound); the longest prompt needs the most tokens a step and one
# output token to simulate within the bound; 64 GPUs split the heads of a model with 64 (Llama 3 70B); the
# smallest memory share (0.001 of 80 GB, 80 MB) holds no model's weights: left to the test below it.
COMPANIONS = {("max_tokens", "min"): {"max_seqs": 1, "input_len": 8, "output_len": 8},
              ("input_len", "max"): {"output_len": 1, "max_tokens": 131072}, ("max_seqs", "max"): {"max_tokens": 8192},
              ("output_len", "max"): {"input_len": 16}, ("tp", "max"): {"model": "llama3-70b"}}


@pytest.mark.parametrize("p", [p for p in QUERIED if not p.text and p.name != "memory_fraction"], ids=lambda p: p.api)
@pytest.mark.parametrize("end", ["min", "max"])
def test_a_schema_valid_extreme_is_accepted(client, schema, p, end):
    low, high, exclusive, _ = schema_bounds(schema[p.api])
    value = low if end == "min" else high
    if value is None or exclusive:
        pytest.skip("no inclusive bound at this end")
    params = {"model": "llama3.2-1b", "max_users": 1, p.api: value, **COMPANIONS.get((p.api, end), {})}
    r = client.get("/api/serving", params=params)
    assert r.status_code == 200, (params, r.text[:300])


def test_an_engine_of_the_schema_is_accepted_and_its_settings_said(client):
    r = client.get("/api/serving", params={"model": "llama3.2-1b", "max_users": 2, "engine": "vllm"})
    assert r.status_code == 200
    engine = r.json()["engine"]
    # vLLM on an H100 80 GB: 1,024 sequences and 8,192 tokens a step; no time per step, its async scheduling (on by
    # default from v0.14.0, its release notes) hiding it under the GPU's (data/engines.toml)
    assert (engine["preset"], engine["max_seqs"], engine["max_tokens"], engine["step_overhead_s"]) == \
        ("vllm", 1024, 8192, 0.0)
    plain = client.get("/api/serving", params={"model": "llama3.2-1b", "max_users": 2}).json()["engine"]
    assert (plain["preset"], plain["max_seqs"], plain["step_overhead_s"]) == ("", ENGINE_STEP_SEQS, 0.0)
    given = client.get("/api/serving", params={"model": "llama3.2-1b", "max_users": 2, "engine": "vllm",
                                               "max_seqs": 64, "step_overhead_ms": 1}).json()["engine"]
    assert (given["preset"], given["max_seqs"], given["max_tokens"], given["step_overhead_s"]) == ("vllm", 64, 8192, 1e-3)
    r = client.get("/api/serving", params={"engine": "nope"})
    assert r.status_code == 422


def test_a_refused_library_value_never_passes_the_schema():
    """The API's ranges sit inside the library's: every schema-valid value is one the library takes."""
    for p in QUERIED:
        if p.text:
            continue
        lo, hi, strictly = p.api_range()
        scale = p.api_scale
        assert hi / scale <= p.maximum, p.name
        assert lo / scale > p.minimum if p.strictly and not strictly else lo / scale >= p.minimum, p.name


# what each Engine setting needs beside its extreme: a step's budget holds every sequence's tokens, a draft
# token an acceptance rate
ENGINE_COMPANIONS = {"max_seqs": {"max_tokens": 1 << 20}, "spec_tokens": {"acceptance": 0.5, "max_tokens": 1 << 20}}


@pytest.mark.parametrize("p", [p for p in SERVING_PARAMS if p.name in {f.name for f in dataclasses.fields(Engine)}],
                         ids=lambda p: p.name)
def test_the_engine_takes_the_declared_range_and_refuses_past_it(p):
    """serving.Engine checks its settings itself (a library caller's): its bounds are the declared ones."""
    extra = ENGINE_COMPANIONS.get(p.name, {})
    assert getattr(Engine(**{p.name: p.maximum}, **extra), p.name) == p.maximum
    with pytest.raises(RooflineError):
        Engine(**{p.name: p.maximum + 1 if p.integer else p.maximum * 1.5}, **extra)
    if not p.strictly:
        assert getattr(Engine(**{p.name: p.minimum}), p.name) == p.minimum
    with pytest.raises(RooflineError):
        Engine(**{p.name: p.minimum if p.strictly else p.minimum - (1 if p.integer else 1e-4)}, **extra)


@pytest.mark.parametrize("p", [p for p in QUERIED if not p.text], ids=lambda p: p.api)
def test_one_step_past_the_schema_is_a_422_naming_the_parameter(client, schema, p):
    low, high, exclusive, sch = schema_bounds(schema[p.api])
    step = 1 if sch["type"] == "integer" else 1e-9 * max(1.0, abs(high))
    for value in (high + step, low if exclusive else low - step):
        r = client.get("/api/serving", params={p.api: value})
        assert r.status_code == 422 and r.json()["field"] == p.api, (p.api, value)


# -- the page ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_url_web():
    from test_web_serving import _browser_or_skip

    _browser_or_skip()
    from web_harness import background_server

    from roofline.web.app import create_app

    with background_server(create_app()) as url:
        yield url


def test_the_serving_view_has_a_control_for_each_declared_parameter_and_sends_it(page, base_url_web):
    from test_web_serving import _renders, _type, _wait

    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(base_url_web + "/?view=serving&max_users=4")
    _wait(page, 0, "view=serving")
    declared = page.evaluate("fetch('/api/options').then(r => r.json()).then(o => o.serving_controls)")
    for c in declared:  # each one a named control in the serving view (tp: the plan views' control, shared)
        if c["name"] != "tp":
            assert page.locator(f"#serving-controls [name={c['name']}]").count() == 1, c["name"]
    query = page.evaluate("document.body.dataset.query")
    assert "max_seqs" not in query and "engine" not in query  # left empty: the engine's own, not sent
    assert page.get_attribute("[name=max_seqs]", "placeholder") == f"the engine's ({ENGINE_STEP_SEQS} without one)"
    before = _renders(page)
    page.select_option("[name=engine]", "vllm")
    _wait(page, before, "engine=vllm")
    _type(page, "[name=max_seqs]", 64, "max_seqs=64")
    _type(page, "[name=percentile]", 95, "percentile=95")
    query = page.evaluate("document.body.dataset.query")
    api = page.request.get(base_url_web + "/api/serving?" + query.split("&", 1)[1]).json()
    assert (api["engine"]["preset"], api["engine"]["max_seqs"], api["percentile"]) == ("vllm", 64, 95)
    page.fill("[name=max_seqs]", "5000")  # past the view's 4,096: refused in the page, naming the control
    page.press("[name=max_seqs]", "Enter")
    page.wait_for_selector("#error:not([hidden])")
    assert page.inner_text("#error").startswith('Max sequences: "5000" is not a whole number from 1 to 4,096')
    assert errors == []
