"""A step's token ops are tabulated a block of step sizes at a time, as the run's steps first reach them
(plan.step.StepCost._fill_tokens): each size must cost what the step's op list costs at that size alone (the
ops built at one M and read through the tables' one-point lookup, StepCost.ops), and a block no step reached
is never built."""

import pytest

from roofline.machines import get_machine
from roofline.measured.model import MeasuredKernels
from roofline.plan.step import _TOKEN_BLOCK, StepCost


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
    sc = StepCost(model, m, cost_model=cm, max_tokens=3 * _TOKEN_BLOCK + 7, **layout)
    built = [M for M, t in enumerate(sc._token_s) if t is not None]
    assert built == list(range(_TOKEN_BLOCK))  # the first block only, before any step
    for M in (1, 2, 17, _TOKEN_BLOCK - 1, _TOKEN_BLOCK, 2 * _TOKEN_BLOCK + 3, 3 * _TOKEN_BLOCK + 7):
        got = sc._tokens_at(M) + (sc._experts_at(M) if sc.expert_parallel else 0.0)
        assert got == pytest.approx(_alone(sc, M), rel=1e-9), M
    # blocks 0, 1 (at 512), 2 (at 1027) and 3 (at 1543) reached; the step of no tokens costs nothing
    assert all(t is not None for t in sc._token_s) and sc._tokens_at(0) == 0.0


def test_a_block_no_step_reaches_is_never_built():
    m = get_machine("h200")
    sc = StepCost("llama3-8b", m, cost_model=MeasuredKernels.for_machine(m, "vllm"), max_tokens=16_384)
    sc.seconds([1000.0] * 8)  # a decode step of 8 tokens
    sc.seconds([1000.0] * 8, chunks=[(4000, 0)])  # 4,008 tokens: block 7
    blocks = {M // _TOKEN_BLOCK for M, t in enumerate(sc._token_s) if t is not None}
    assert blocks == {0, 4008 // _TOKEN_BLOCK}
