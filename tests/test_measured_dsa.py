"""DeepSeek Sparse Attention's prompt step on measured modules (measured.dsa, StepCost._dsa_module_s): GLM-5's
attention block as SGLang 0.5.14 runs it on a B200. Expected latencies are read from the installed parquet file here
with pyarrow, independently of roofline.measured."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow.parquet", reason="the measured extra: pip install 'roofline[measured]'")


def _module_ms(isl: int, batch: int, heads: int = 8, kv: str = "fp8") -> float:
    """The row of zai-org/GLM-5-FP8 (block-fp8 GEMMs) for whole prompts (step 0), ``heads`` a GPU, not a skip-indexer
    layer's: exactly one."""
    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0])
    rows = pa.read_table(root / "systems" / "data" / "b200_sxm" / "sparse_attention" / "sglang" / "0.5.14" /
                         "dsa_context_module_perf.parquet",
                         filters=[("isl", "=", isl), ("batch_size", "=", batch), ("num_heads", "=", heads),
                                  ("step", "=", 0), ("kv_cache_dtype", "=", kv), ("gemm_type", "=", "fp8_block")]).to_pylist()
    hits = [r["latency"] for r in rows if r["architecture"] == "GlmMoeDsaForCausalLM" and "skip" not in r["kernel_source"]
            and r["model"] == "zai-org/GLM-5-FP8"]
    assert len(hits) == 1, hits
    return hits[0]


def _floor_ms(heads: int = 8, kv: str = "fp8") -> float:
    """The site's floor: the least latency of any GlmMoeDsaForCausalLM whole-prompt row of block-fp8 GEMMs, this cache
    and heads (every checkpoint of that architecture), skip-indexer layers left out."""
    root = Path(list(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)[0])
    rows = pa.read_table(root / "systems" / "data" / "b200_sxm" / "sparse_attention" / "sglang" / "0.5.14" /
                         "dsa_context_module_perf.parquet",
                         filters=[("num_heads", "=", heads), ("step", "=", 0), ("kv_cache_dtype", "=", kv),
                                  ("gemm_type", "=", "fp8_block")]).to_pylist()
    return min(r["latency"] for r in rows if r["architecture"] == "GlmMoeDsaForCausalLM" and "skip" not in r["kernel_source"])


def _glm5_attention():
    from roofline.plan.parallel import shard
    from roofline.transformer import get_model

    model = shard(get_model("glm-5"), 8)
    return model.d_model, model.kinds[-1].mixer  # a layer of 64 / 8 heads a GPU


def test_the_module_is_read_at_its_rows():
    """At a measured point the module's time is that row's latency; an 8k prompt's (the sparse path) is past the host's
    floor, a 1k prompt's (dense MHA, 0.7-0.8 ms whatever its size) is the floor."""
    from roofline.measured.dsa import dsa_module_table

    table = dsa_module_table("b200", "sglang")
    D, a = _glm5_attention()
    key = table.site(D, a, "fp8_block", "fp8")
    for isl, b in ((8192, 1), (4096, 2), (1024, 1)):
        assert table.seconds(key, b, isl) * 1e3 == pytest.approx(_module_ms(isl, b), rel=1e-9)
    # the kernels' time: the host's floor H taken out as from a soft maximum, sqrt(T^2 - H^2)
    T, H = _module_ms(8192, 1), _floor_ms()
    assert table.kernels_s(key, 1, 8192) * 1e3 == pytest.approx((T * T - H * H) ** 0.5, rel=1e-9)
    assert table.kernels_s(key, 1, 1024) * 1e3 < 0.3 * _module_ms(1024, 1)  # a 1k prompt's module: mostly the host's
    # 8,192 tokens take 3x a 1,024-token prompt's module here (2.35 ms against 0.78 ms): the sparse kernel's time
    assert _module_ms(8192, 1) > 2.5 * _module_ms(1024, 1)


def test_a_layer_the_tables_did_not_collect_is_refused_by_name():
    from roofline.errors import RooflineError
    from roofline.measured.dsa import dsa_module_table

    table = dsa_module_table("b200", "sglang")
    D, a = _glm5_attention()
    with pytest.raises(RooflineError, match="KV cache fp4"):
        table.site(D, a, "fp8_block", "fp4")
    with pytest.raises(RooflineError, match="shape the module tables did not collect"):
        table.site(D + 128, a, "fp8_block", "fp8")


def _step(kv: str = "fp8", machine: str = "b200", kernels: str = "sglang"):
    from roofline.measured.model import MeasuredKernels
    from roofline.machines import get_machine
    from roofline.plan.precision import Precision
    from roofline.plan.step import StepCost

    m = get_machine(machine)
    cm = MeasuredKernels.for_machine(m, kernels, launch_overhead_s=m.launch_overhead_s, fp8_scaling="block")
    return StepCost("glm-5", machine, Precision("fp8", "fp8", kv), tensor_parallel=8, cost_model=cm,
                    max_tokens=16384, max_seqs=64)


def test_an_8k_prompt_step_prices_the_dsa_layers_at_the_module():
    """A step of one whole 8,192-token prompt: each of GLM-5's 75 MoE layers' attention ops (its projections and norms,
    the indexer, top-k, expansion and attention) sum to the measured module's kernels' time, its 2.35 ms with the
    host's floor taken out (sqrt(T^2 - H^2)), less a launch an op."""
    step = _step()
    ops = step.ops(chunks=[(8192, 0)])
    names = ("q_a proj", "q_a norm", "q_b proj", "kv_a proj", "kv_a norm", "index q proj (wq_b)", "index k proj (wk)",
             "index k norm", "index weights proj", "out proj", "indexer scores (chunks)", "top-k select (chunks)",
             "kv_b proj (expand) (chunks)", "flash attention (chunks)")
    mine = [o for o in ops if o.name.startswith("B: ") and o.name[3:] in names]
    assert len(mine) == len(names) and all(o.count == 75 for o in mine)
    launch = step.cost_model.launch_overhead_s
    per_layer = sum(o.time_s for o in mine) / 75 - len(names) * launch
    T, H = _module_ms(8192, 1), _floor_ms()
    assert per_layer * 1e3 == pytest.approx((T * T - H * H) ** 0.5, rel=1e-6)
    assert any("DSA prompt attention: sglang 0.5.14 dsa_context_module_perf" in n for n in step.notes())


def test_one_more_chunk_never_makes_a_step_cheaper():
    """A step with a whole prompt and a chunk after a cached prefix prices the prompt on the module and the chunk on
    the module's growth from its prefix: never less than the prompt alone, and a later chunk of a long prompt (more
    keys to score and attend) no cheaper than its first."""
    step = _step()
    alone = step.seconds(chunks=[(8192, 0)])
    assert step.seconds(chunks=[(8192, 0), (1, 8191)]) >= alone
    assert step.seconds(chunks=[(8192, 0), (4096, 4096)]) > alone
    assert step.seconds(chunks=[(8192, 8192)]) > alone
    # continuous where the module leaves its host floor: no jump between neighbouring prompt lengths
    assert step.seconds(chunks=[(3150, 0)]) / step.seconds(chunks=[(3100, 0)]) < 1.03


def test_a_short_prompt_keeps_the_cost_model():
    """A 1,024-token prompt's module is the host's floor (its kernels' time not told apart): the chunk ops are the
    cost model's, whose sum is far under the module's 0.78 ms."""
    step = _step()
    ops = {o.name: o for o in step.ops(chunks=[(1024, 0)])}
    chunk = sum(ops[f"B: {n} (chunks)"].time_s for n in ("indexer scores", "top-k select", "kv_b proj (expand)",
                                                         "flash attention")) / 75
    assert chunk < 0.5 * _module_ms(1024, 1) / 1e3


def test_a_cache_the_tables_lack_keeps_the_cost_model_and_says_so():
    """TensorRT-LLM's H100 module rows hold a bf16 cache only: an fp8 cache's chunk ops are the cost model's, said in
    the notes."""
    step = _step("fp8", "h100-sxm", "trtllm")
    step.ops(chunks=[(8192, 0)])
    assert any(n.startswith("DSA prompt attention: the cost model (") for n in step.notes())


def test_weights_computing_wider_than_stored_are_not_read_as_the_tables_gemms():
    """fp8 weights under bf16 activations (W8A16) are neither the table's bf16 nor its block-fp8 GEMMs: refused by
    name, the cost model kept."""
    from roofline.measured.model import MeasuredKernels
    from roofline.machines import get_machine
    from roofline.plan.precision import Precision
    from roofline.plan.step import StepCost

    m = get_machine("b200")
    cm = MeasuredKernels.for_machine(m, "sglang", launch_overhead_s=m.launch_overhead_s, fp8_scaling="block")
    step = StepCost("glm-5", "b200", Precision("fp8", "bf16", "fp8"), tensor_parallel=8, cost_model=cm, max_tokens=16384)
    step.ops(chunks=[(8192, 0)])
    assert any("fp8 weights computing in bf16 GEMMs" in n for n in step.notes())


def test_a_site_timed_by_two_kernel_sources_is_refused_by_name():
    """Where a table times two backends at the same shapes, which one the engine runs is not read from it."""
    import dataclasses

    from roofline.errors import RooflineError
    from roofline.measured.dsa import dsa_module_table

    table = dsa_module_table("b200", "sglang")
    D, a = _glm5_attention()
    key = table.site(D, a, "fp8_block", "fp8")
    doubled = dataclasses.replace(table, ambiguous={key: ["FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"]})
    with pytest.raises(RooflineError, match="FLASHINFER_MLA_SPARSE and FLASHMLA_SPARSE"):
        doubled.site(D, a, "fp8_block", "fp8")


def test_a_prompt_past_the_tables_longest_says_it_is_extrapolated():
    """SGLang's B200 module rows stop at 16,384 tokens (the parquet's isl column): a prompt longer than that (here a
    chunk of 8,192 after 12,000 cached) is read at the edge, and the notes say so; a shorter one says nothing of it."""
    step = _step()
    step.seconds(chunks=[(8192, 0)])
    assert not any("past the module table's longest" in n for n in step.notes())
    step.seconds(chunks=[(8192, 12000)])
    assert any("20,192 tokens is past the module table's longest prompt (16,384)" in n for n in step.notes())


def test_the_header_names_the_module_for_a_sparse_model_only():
    """The run's line of what the measured kernels price names DSA's prompt module for GLM-5 (its index_topk layers),
    not for DeepSeek-V3, whose latent attention is dense."""
    from roofline.machines import get_machine
    from roofline.measured.model import MeasuredKernels
    from roofline.transformer import get_model

    m = get_machine("b200")
    cm = MeasuredKernels.for_machine(m, "sglang", launch_overhead_s=m.launch_overhead_s)
    assert "DSA's prompt module" in cm.priced_by(get_model("glm-5"), 8)
    assert "DSA" not in cm.priced_by(get_model("deepseek-v3"), 8)
    assert "MLA decode" in cm.priced_by(get_model("deepseek-v3"), 8)


def test_decode_ops_no_table_measures_take_at_least_the_kernel_floor():
    """GLM-5's decode on 8 B200s, 4 sequences at 1,500 tokens: the indexer's scores, the top-k, the absorbed batched
    matmuls and the sparse attention over min(S, 2,048) latents (4 x 1,500 x 656 B of fp8 cache = 3.9 MB: 0.5 us at
    8 TB/s) are each a kernel in the engine's CUDA graph: each takes the engine's kernel floor (measured.floor, tested
    against its table's rows in test_measured_floor.py) a layer; 64 sequences at 100k tokens read their 2,048 latents each
    (64 x 2,048 x 576 B of fp8 latents = 75 MB a layer: ~9 us at 8 TB/s), over it: the cost model's time as before."""
    from roofline.measured.floor import kernel_floor

    floor = kernel_floor("b200", "sglang").seconds
    step = _step()
    ops = {o.name: o for o in step.ops([1500] * 4)}
    names = ("indexer scores (decode)", "top-k select (decode)", "q absorb (W_UK) (decode)", "out absorb (W_UV) (decode)",
             "sparse latent attention (decode)")
    launch = step.cost_model.launch_overhead_s  # this step launches each kernel (no CUDA graph): counted apart
    for n in names:
        assert ops["B: " + n].time_s / ops["B: " + n].count - launch == pytest.approx(floor, rel=1e-6), n
    assert any(n.startswith("decode ops no table measures: the cost model, at least the kernel floor") for n in step.notes())
    big = {o.name: o for o in step.ops([100_000] * 64)}["B: sparse latent attention (decode)"]
    assert big.time_s / big.count - launch > 3 * floor
    assert big.bytes / big.count > 64 * 2048 * 576


def test_the_modules_projections_are_read_from_the_steps_token_ops_as_one_size_prices_them():
    """_dsa_module_s takes the module's projections and norms (token ops: their time is their rows') from one pass over
    every row count of a step (_dsa_projections), read as one size at a time reads them (the scalar table read, within
    the vectorised read's 1e-12); a prompt past the step's token budget is priced one size at a time, the same."""
    import math

    from roofline.measured.model import MeasuredKernels
    from roofline.machines import get_machine
    from roofline.plan.precision import Precision
    from roofline.plan.step import StepCost

    step = _step()
    i = next(j for j in range(len(step._token_kinds)) if step._dsa_kind(j))
    kind = step._token_kinds[i][0]
    mine, _, _ = step._dsa_setup(i, step._kernels(kind, False, 8, 1, 8))
    assert {"q_a proj", "kv_a proj", "index k proj (wk)", "out proj"} <= mine
    table = step._dsa_projections(i, mine)
    for tokens, b in ((1, 1), (3100, 1), (1024, 4), (8192, 2), (16384, 1)):
        one = sum(float(step._op_time(k)[2]) for k in step._kernels(kind, False, tokens, b, tokens) if k.name in mine)
        assert math.isclose(table[tokens * b], one, rel_tol=1e-12), (tokens, b)
    m = get_machine("b200")
    cm = MeasuredKernels.for_machine(m, "sglang", launch_overhead_s=m.launch_overhead_s, fp8_scaling="block")
    small = StepCost("glm-5", "b200", Precision("fp8", "fp8", "fp8"), tensor_parallel=8, cost_model=cm, max_tokens=2048,
                     max_seqs=64)
    for C, b, P in ((1024, 1, 8192), (2048, 1, 4096), (4096, 1, 0), (4096, 2, 0)):
        got, alone = step._dsa_module_s(i, C, b, P), small._dsa_module_s(i, C, b, P)
        assert got.keys() == alone.keys() and got
        assert all(math.isclose(got[k], alone[k], rel_tol=1e-12) for k in got), (C, b, P)
