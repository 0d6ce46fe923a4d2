"""A prompt's chunk ops on measured kernels are built and looked up a block of sizes at a time
(plan.step_chunks.ChunkCosts._fresh_block): each size must cost what it costs built and looked up alone
(the op's kernel at that size, read through the table's one-point lookup, grid.LogGrid.estimate)."""

import math

import pytest

from roofline.machines import get_machine
from roofline.measured.model import MeasuredKernels
from roofline.plan.step import StepCost


@pytest.mark.parametrize("model, machine, engine, tp, priced", [
    ("llama3-8b", "h200", "vllm", 1, True),  # fused attention
    ("gpt-oss-120b", "b200", "trtllm", 4, True),  # sliding-window layers beside full ones
    ("qwen3.5-397b-a17b", "h200", "sglang", 8, True),  # Gated DeltaNet's conv and rule
    # MLA's prompt: no table holds its attention (no shape a table reads), nor its expansion (a matmul whose shape
    # the kernel does not carry), at any size: the block holds them unpriced, as each size alone
    ("deepseek-v3", "h200", "sglang", 8, False),
])
def test_a_block_of_prompt_sizes_costs_each_as_alone(model, machine, engine, tp, priced):
    m = get_machine(machine)
    sc = StepCost(model, m, tensor_parallel=tp, cost_model=MeasuredKernels.for_machine(m, engine))
    for C in (1, 2, 255, 256, 257, 1000, 4097, 16_383):
        got = sc._chunk_costs(C, 0)
        for i, ((kind, n, label, _), names) in enumerate(zip(sc._token_kinds, sc._chunk_names)):
            alone = {k.name: k for k in sc._kernels(kind, False, C, 1, C, set(names))}
            for F, B, rates, layers, name, category, t in got[i]:
                k = alone[name[len(label):]]
                assert (F, B, layers, category) == (pytest.approx(float(k.flops), rel=1e-12),
                                                    pytest.approx(float(k.bytes), rel=1e-12), n, k.category)
                assert rates == sc._rates(k)
                one = sc._measured_chunk(k)
                assert (math.isnan(t) and math.isnan(one)) or t == pytest.approx(one, rel=1e-9), (name, C)
    assert any(t == t for kind in sc._chunk_costs(1000, 0) for *_, t in kind) == priced
    assert all(block is not None for block in sc._block_cache.values()) and sc._block_cache


def test_a_decode_tables_one_context_reads_as_numpy_reads_many():
    """A measured decode op's grid (MeasuredSeqOp) read at one context in plain Python gives what
    numpy's np.interp gives for the same context in an array: on the grid, between its points, past
    both ends (clamped), at counts on the exact rows and between the log-spaced ones."""
    import numpy as np

    m = get_machine("h200")
    sc = StepCost("llama3-70b", m, tensor_parallel=4, cost_model=MeasuredKernels.for_machine(m, "vllm"),
                  max_seqs=512)
    tables = [t for _, _, _, fits in sc._decode_fits for *_, t in fits if t is not None]
    assert tables
    contexts = np.array([0.5, 1.0, 3.0, 1000.0, 4096.0, 70_000.5, 2.0**21, 5e6])
    for table in tables:
        for n in (1, 2, 63, 64, 65, 100, 511, 512, 10_000):
            many = table.seconds(n, contexts)
            for s, t in zip(contexts, many):
                assert table.seconds(n, float(s)) == pytest.approx(float(t), rel=1e-12)


@pytest.mark.parametrize("model, machine, engine, tp", [
    ("llama3-8b", "h200", "vllm", 1),
    ("gpt-oss-120b", "b200", "trtllm", 4),  # two kinds (sliding-window layers beside full ones)
    ("qwen3.5-397b-a17b", "h200", "sglang", 8),  # an op the cost model prices beside measured ones
    ("deepseek-v3", "h200", "sglang", 8),  # MLA's prompt ops unpriced at every size
])
def test_a_steps_one_prompt_costs_per_block_what_it_costs_summed_alone(model, machine, engine, tp):
    """A step whose only chunk is a whole prompt (ChunkCosts._one_chunk_block: a block of sizes' seconds in one
    numpy pass) costs, to the last bit, what the step's chunk ops summed one by one (_chunk_share) make it."""
    m = get_machine(machine)
    sc = StepCost(model, m, tensor_parallel=tp, cost_model=MeasuredKernels.for_machine(m, engine))
    for C in (1, 2, 255, 256, 257, 1000, 4097, 16_383):
        got = sc._chunks_seconds([(C, 0)])
        alone = sum(n * (t if t == t else sc._seq_time(F, B, rates)) for F, B, rates, n, t in
                    sc._chunk_share([(C, 0)]).values())
        assert got == alone, (C, got, alone)
    assert len(sc._one_chunk_s) >= 256  # whole blocks kept


@pytest.mark.parametrize("model, flagged", [("deepseek-v3", {"kv_b proj (expand)"}),
                                            ("llama3-8b", set())])
def test_an_op_unpriced_for_what_it_is_is_unpriced_at_every_size(model, flagged):
    """measured.gemm.unpriced_at_every_size names the ops of a measured family the tables price at no size (MLA's
    latent expansion, a matmul of no (batch, M, N, K) shape; its prompt attention carries no shape a table reads, of
    no family): each size alone is unpriced too (NaN), so a block may hold them unpriced rather than go a size at a
    time."""
    from roofline.measured.gemm import unpriced_at_every_size

    m = get_machine("h200")
    cm = MeasuredKernels.for_machine(m, "sglang")
    sc = StepCost(model, m, tensor_parallel=8, cost_model=cm)
    seen = set()
    for (kind, _, _, _), names in zip(sc._token_kinds, sc._chunk_names):
        for C in (1, 100, 5000):
            for k in sc._kernels(kind, False, C, 1, C, set(names)):
                if unpriced_at_every_size(k, cm.family_of(k)):
                    seen.add(k.name)
                    assert math.isnan(sc._measured_chunk(k)), (k.name, C)
    assert seen == flagged
