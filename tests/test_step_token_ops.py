"""A step's token ops are tabulated over every step size in one numpy pass (plan.step.StepCost._build): each size
must cost what the step's op list costs at that size alone (the ops built at one M and read through the tables'
one-point lookup, StepCost.ops)."""

import pytest

from roofline.machines import get_machine
from roofline.measured.model import MeasuredKernels
from roofline.plan.step import StepCost

SIZES = 1_543  # a step budget, and sizes over it: 1, 2, 17, 511, 512, 1,027, the budget


def _alone(sc: StepCost, M: int) -> float:
    """The token ops' seconds of one prompt chunk of M tokens from the step's op list, launches taken out."""
    launch = sc.cost_model.launch_overhead_s
    return sum(op.time_s - launch * op.count for op in sc.ops(chunks=[(M, 0)]) if op.part == "token")


@pytest.mark.parametrize("model, machine, engine, layout", [
    ("llama3-70b", "h200", "vllm", {"tensor_parallel": 4}),  # GEMMs and all-reduces on measured tables
    ("qwen3-235b-a22b", "h200", "trtllm", {"tensor_parallel": 8, "expert_parallel": True}),  # busiest GPU's experts
    ("gpt-oss-120b", "b200", "", {"tensor_parallel": 2}),  # the plate's cost model
    ("llama3-8b", "h100-sxm", "", {"tensor_parallel": 2, "pipeline_stages": 2}),  # a send between stages
])
def test_each_step_size_costs_its_token_ops_as_alone(model, machine, engine, layout):
    m = get_machine(machine)
    cm = MeasuredKernels.for_machine(m, engine) if engine else None
    sc = StepCost(model, m, cost_model=cm, max_tokens=SIZES, **layout)
    for M in (1, 2, 17, 511, 512, 1_027, SIZES):
        got = sc._token_s[M] + (float(sc._expert_body[M]) if sc.expert_parallel else 0.0)
        assert got == pytest.approx(_alone(sc, M), rel=1e-9), M
    assert sc._token_s[0] == 0.0  # the step of no tokens costs nothing
