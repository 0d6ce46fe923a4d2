"""The library's own checks read the declarations (issue 37: "the same bound checked again and again"):
serving.Engine, the workload's requests (serving.requests) and the searches (serving.search) bound what
they take with each parameter's declared range (Param.check), the one the CLI's flag and the API's query
state. Here: the checks name the declared parameters, and one value just past each declared bound is
refused naming the parameter, the bound itself taken."""

from __future__ import annotations

import dataclasses

import pytest

from roofline.errors import RooflineError
from roofline.serving.engine import CHECKED, Engine
from roofline.serving.parameters import ACCEPTANCE, BY_NAME, SERVING_PARAMS

DECLARED = {**BY_NAME, "acceptance": ACCEPTANCE}


def _past(p, end):
    """The value just past the declared bound at ``end``; None where that end is open."""
    if end == "max":
        return None if p.maximum is None else p.maximum + 1 if p.integer else p.maximum * (1 + 1e-6)
    if p.minimum is None:
        return None
    return p.minimum if p.strictly else p.minimum - (1 if p.integer else 1e-6 * max(p.minimum, 1e-3))


def test_the_engine_checks_each_declared_setting_with_its_declaration():
    fields = {f.name for f in dataclasses.fields(Engine)}
    assert set(CHECKED) == {p.name for p in SERVING_PARAMS if p.name in fields}


def test_the_burstiness_range_is_the_declared_one():
    from roofline.serving.requests import BURSTINESS_RANGE

    p = BY_NAME["burstiness"]
    assert BURSTINESS_RANGE == (p.minimum, p.maximum) and not p.strictly


def _poisson(**given):
    from roofline.serving.requests import poisson_requests

    args = dict(rate_per_s=10.0, n=4, input_tokens=16, output_tokens=8, burstiness=1.0) | given
    return poisson_requests(**args)


def _closed(**given):
    from roofline.serving.requests import closed_requests

    return closed_requests(**(dict(concurrency=2, n=4, input_tokens=16, output_tokens=8) | given))


def _sweep(**given):
    from roofline.serving.search import sweep_concurrency

    # the checks come before any step runs: no step is needed to be refused
    return sweep_concurrency(None, given.pop("concurrencies", [1]), 16, 8, **(dict(ttft_s=0.5) | given))


def _search(**given):
    from roofline.serving.search import max_rate_within

    return max_rate_within(None, 16, 8, **(dict(ttft_s=0.5) | given))


# (the declared parameter, how the library takes it): each a call with that one value given
CALLS = [
    ("rate", lambda v: _poisson(rate_per_s=v)),
    ("requests", lambda v: _poisson(n=v)),
    ("requests", lambda v: _closed(n=v)),
    ("burstiness", lambda v: _poisson(burstiness=v)),
    ("input_len", lambda v: _poisson(input_tokens=v)),
    ("output_len", lambda v: _closed(output_tokens=(1, v))),
    ("concurrency", lambda v: _closed(concurrency=v)),
    ("concurrency", lambda v: _sweep(concurrencies=[1, v])),
    ("slo_ttft", lambda v: _sweep(ttft_s=v)),
    ("slo_tpot", lambda v: _search(tpot_s=v)),
    ("percentile", lambda v: _sweep(percentile=v)),
    ("target_rate", lambda v: _search(target_rate=v)),
    ("burstiness", lambda v: _search(burstiness=v)),
    *[(name, lambda v, name=name: Engine(**{name: v})) for name in CHECKED],
    ("acceptance", lambda v: Engine(spec_tokens=2, acceptance=v)),
    ("acceptance", lambda v: Engine(spec_tokens=2, acceptance=(0.5, v) if v < 0.5 else (v, 0.5))),
]


@pytest.mark.parametrize("name, call", CALLS, ids=[name for name, _ in CALLS])
@pytest.mark.parametrize("end", ["min", "max"])
def test_one_value_past_each_declared_bound_is_refused_naming_the_parameter(name, call, end):
    value = _past(DECLARED[name], end)
    if value is None:
        pytest.skip("no bound at this end")
    with pytest.raises(RooflineError) as exc:
        call(value)
    assert exc.value.field == name, (name, value, str(exc.value))


# the bound itself, where taking it is cheap (a million requests or a 2^24-token prompt is not run here)
AT_BOUND = [("rate", "max", _poisson), ("burstiness", "min", _poisson), ("burstiness", "max", _poisson),
            ("concurrency", "max", _closed)]


@pytest.mark.parametrize("name, end, make", AT_BOUND, ids=[f"{n}-{e}" for n, e, _ in AT_BOUND])
def test_the_declared_bound_itself_is_taken(name, end, make):
    p = BY_NAME[name]
    value = p.maximum if end == "max" else p.minimum
    keyword = {"rate": "rate_per_s", "burstiness": "burstiness", "concurrency": "concurrency"}[name]
    assert make(**{keyword: value}) is not None


def test_the_acceptance_flag_takes_the_range_the_engine_checks():
    import argparse

    from roofline.cli.serving_args import acceptance_arg

    assert Engine(spec_tokens=1, acceptance=ACCEPTANCE.maximum).acceptance == ACCEPTANCE.maximum
    assert acceptance_arg(str(ACCEPTANCE.maximum)) == ACCEPTANCE.maximum
    assert acceptance_arg(f"{ACCEPTANCE.maximum},0.5") == (ACCEPTANCE.maximum, 0.5)
    for past in (str(ACCEPTANCE.maximum + 1e-4), "0", f"0.5,{ACCEPTANCE.maximum + 1e-4}"):
        with pytest.raises(argparse.ArgumentTypeError):
            acceptance_arg(past)
