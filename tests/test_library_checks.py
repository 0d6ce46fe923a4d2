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


# -- the planning library reads its commands' declarations (roofline.parameters) --------------------------------
# Each call takes the one value given and refuses it before any costly work; where two commands declare one name
# differently (train's --gpus-per-node, a node of 10,000, against the scale-up domain's 10^6), each library check
# reads its own command's declaration.

def _train(**given):
    from roofline.plan.training import train_plan

    return train_plan("llama3-8b", **(dict(tokens=1e12, gpus=8) | given))


def _fake_step():
    from types import SimpleNamespace

    # what simulate reads before the price: no pipeline, no speculation, budgets no engine exceeds
    return SimpleNamespace(pipeline_stages=1, verify_tokens=1, max_tokens=1 << 30, max_seqs=1 << 30)


def _plan_calls():
    from roofline import parameters as P
    from roofline.machines import get_machine
    from roofline.plan.decode import decode_plan
    from roofline.plan.inference import predict_model
    from roofline.plan.parallel import shard, tp_link
    from roofline.plan.step_layout import StepLayout
    from roofline.plan.sweep import sweep
    from roofline.plan.train_memory import make_layout, train_memory
    from roofline.serving.parameters import BY_NAME as SERVING
    from roofline.serving.requests import closed_requests
    from roofline.serving.scheduler import simulate

    tp = P.TENSOR_PARALLEL
    return [
        ("train tokens", P.TRAIN_TOKENS, lambda v: _train(tokens=v)),
        ("train gpus_per_node", P.TRAIN_GPUS_PER_NODE, lambda v: _train(gpus_per_node=v)),
        ("train seq_len", P.SEQ_LEN, lambda v: _train(seq_len=v)),
        ("train price", P.PRICE, lambda v: _train(price_per_gpu_hour=v)),
        ("train_memory seq_len", P.SEQ_LEN, lambda v: train_memory("llama3-8b", seq_len=v, layout=make_layout(1))),
        ("make_layout gpus", P.GPUS, lambda v: make_layout(v)),
        ("tp_link gpus_per_node", P.GPUS_PER_NODE, lambda v: tp_link(get_machine("h100-sxm"), None, 2, v)),
        ("serving price", SERVING["price_per_gpu_hour"],
         lambda v: simulate(_fake_step(), closed_requests(1, 1, 16, 1), price_per_gpu_hour=v)),
        ("shard tp", tp, lambda v: shard("llama3-8b", v)),
        ("predict_model tp", tp, lambda v: predict_model("llama3-8b", tensor_parallel=v)),
        ("decode_plan tp", tp, lambda v: decode_plan("llama3-8b", batches=[1], tensor_parallel=v)),
        ("sweep tp", tp, lambda v: sweep("llama3-8b", values=[1], tensor_parallel=v)),
        ("StepLayout tp", tp, lambda v: StepLayout("llama3-8b", tensor_parallel=v)),
    ]


PLAN_CALLS = ["train tokens", "train gpus_per_node", "train seq_len", "train price", "train_memory seq_len", "make_layout gpus",
              "tp_link gpus_per_node", "serving price", "shard tp", "predict_model tp", "decode_plan tp", "sweep tp",
              "StepLayout tp"]


def test_the_plan_calls_are_those_listed():
    assert [name for name, _, _ in _plan_calls()] == PLAN_CALLS


@pytest.mark.parametrize("label", PLAN_CALLS)
@pytest.mark.parametrize("end", ["min", "max"])
def test_the_planning_library_refuses_one_value_past_its_commands_declared_bound(label, end):
    _, p, call = next(c for c in _plan_calls() if c[0] == label)
    value = _past(p, end)
    if value is None:
        pytest.skip("no bound at this end")
    with pytest.raises(RooflineError) as exc:
        call(value)
    assert exc.value.field == p.name, (label, value, str(exc.value))


def test_train_and_the_scale_up_domain_declare_their_own_node_bounds():
    from roofline import parameters as P
    from roofline.machines import get_machine
    from roofline.plan.parallel import tp_link

    # train refuses a 10,001-GPU node; the scale-up domain takes it (tensor parallel 2 needs no more than the
    # H100 board's 8 GPUs, so a larger domain is not held against the machine)
    assert P.TRAIN_GPUS_PER_NODE.maximum < P.GPUS_PER_NODE.maximum
    assert tp_link(get_machine("h100-sxm"), None, 2, P.TRAIN_GPUS_PER_NODE.maximum + 1) is not None


@pytest.mark.parametrize("end", ["min", "max"])
def test_diagnose_refuses_a_measured_time_past_the_declared_range(end):
    from roofline.diagnose.kernel_diagnosis import diagnose
    from roofline.kernels import matmul_kernel
    from roofline.tool_parameters import MEASURED

    kernel = matmul_kernel(M=8, N=8, K=8)
    with pytest.raises(RooflineError) as exc:
        diagnose(kernel, "h100-sxm", _past(MEASURED, end))
    assert exc.value.field == "measured time"
    assert diagnose(kernel, "h100-sxm", MEASURED.maximum) is not None  # the bound itself is taken
