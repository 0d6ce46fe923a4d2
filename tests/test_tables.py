"""The notebook half of the result protocol (tables.Tabular): every result type shows itself as
escaped HTML tables and turns into a pandas DataFrame of its rows, both read from its to_dict().

Truths: seed 003's workshop layer (Llama 3 8B, prefill T = 8,192 on an H100 SXM, e_c 0.70,
e_m 0.85) has 12 ops and takes 8,756 us (SPEC; tests/test_blocks.py)."""

import sys

import pytest

from roofline.blocks import layer_report
from roofline.plan.decode import DecodePlan, decode_plan
from roofline.plan.memory import MemoryPlan, inference_memory
from roofline.diagnose.check_report import CheckReport
from roofline.cost import CostModel, WorkloadPrediction
from roofline.diagnose import Diagnosis, diagnose
from roofline.kernels import Kernel, matmul_kernel
from roofline.machines import get_machine
from roofline.plan import ModelPrediction, predict_model
from roofline.serving import ServingResult, ServingSweep, closed_requests, simulate, sweep_concurrency
from roofline.shapes import GemmAdvice
from roofline.plan.step import StepCost
from roofline.plan.sweep import SweepResult, sweep
from roofline.tables import Tabular
from roofline.trace.nsight import NcuReport, NsysReport
from roofline.trace.profiler import ProfileReport
from roofline.trace.result import TraceResult
from roofline.plan.training import TrainPlan, train_plan

pd = pytest.importorskip("pandas")

SEED_OPS = ["attn norm", "QKV proj", "QK^T", "softmax", "PV", "out proj", "residual add", "ffn norm", "gate+up proj",
            "silu*mul", "down proj", "residual add 2"]


@pytest.fixture(scope="module")
def seed():
    return layer_report(tokens=8192)


def test_the_seed_layer_as_html_names_its_twelve_ops_and_its_8756_us(seed):
    html = seed._repr_html_()
    for name in SEED_OPS:
        assert f">{name}</td>" in html
    assert "8,756 µs" in html  # total_s, as seed 003 writes it
    assert "41%" in html  # memory_bound_share: 8 of the 12 ops take 41% of the time
    # self-contained: no script, no stylesheet, nothing fetched
    assert "<script" not in html and "<link" not in html and "http" not in html


def test_the_seed_layer_as_a_dataframe_has_one_row_per_op_summing_to_its_total(seed):
    df = seed.to_pandas()
    assert list(df["name"]) == SEED_OPS
    assert df["time_s"].sum() == pytest.approx(seed.prediction.total_s) == pytest.approx(8756e-6, abs=0.5e-6)
    assert (df["bound"] == "memory").sum() == 8
    assert df.attrs["total_s"] == seed.prediction.total_s and df.attrs["model"] == "llama3-8b"
    # the same columns, in the same order, as the CSV
    assert ",".join(df.columns) == seed.prediction.to_csv().splitlines()[0]


def test_html_escapes_what_it_prints():
    k = Kernel("<b>x</b> & <script>alert(1)</script>", 1e9, 1e6, "matmul", "bf16")
    html = CostModel().predict([k], get_machine("h100-sxm"))._repr_html_()
    assert "<script" not in html and "<b>x" not in html
    assert "&lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;" in html


def test_without_pandas_to_pandas_says_how_to_install_it(seed, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match=r"LayerReport.to_pandas\(\) needs pandas.*pip install pandas"):
        seed.to_pandas()


@pytest.fixture(scope="module")
def step():
    return StepCost("llama3-8b", "h100-sxm", max_tokens=8192, max_seqs=256)


def test_every_result_type_has_the_protocol():
    # the types a user gets from the library, and the extra types built on them
    for cls in (WorkloadPrediction, ModelPrediction, DecodePlan, MemoryPlan, SweepResult, TrainPlan, ServingResult,
                ServingSweep, CheckReport, Diagnosis, GemmAdvice, TraceResult, ProfileReport, NcuReport, NsysReport):
        assert issubclass(cls, Tabular), cls
        # one protocol: JSON and CSV come from the mixin or the type's own, never missing
        assert callable(cls.to_json) and callable(cls.to_csv), cls
    from roofline.blocks import LayerReport
    from roofline.measure.calibrated import CalibratedWorkloadPrediction

    assert issubclass(LayerReport, Tabular) and issubclass(CalibratedWorkloadPrediction, Tabular)
    assert callable(LayerReport.to_table)


def test_csvs_are_rows_and_declared_columns_not_overrides(seed):
    from roofline.measured.predictions import MeasuredWorkloadPrediction

    # results as data: these write rows() and name their columns (CSV_FIELDS); the protocol writes the CSV
    for cls in (WorkloadPrediction, MeasuredWorkloadPrediction, CheckReport, ProfileReport, NcuReport, NsysReport):
        assert not any("to_csv" in vars(c) for c in cls.__mro__ if c is not Tabular), cls
        assert cls.CSV_FIELDS and callable(cls.rows), cls
    # the layer's CSV header is its prediction's columns; its table is its prediction's table
    assert seed.prediction.to_csv().splitlines()[0].split(",") == list(WorkloadPrediction.CSV_FIELDS)
    assert seed.to_table() == seed.prediction.to_table() and "total" in seed.to_table()


@pytest.mark.parametrize("make, rows", [
    (lambda step: decode_plan(batches=(1, 8, 64)), 3),  # one row per batch asked
    (lambda step: inference_memory(), 3),  # weights, KV cache, a step's activations
    (lambda step: sweep(over="batch", values=[1, 2, 4, 8]), 4),
    (lambda step: train_plan(), 1),  # no rows: one row of its figures
    (lambda step: diagnose(matmul_kernel(64, 4096, 4096), "h100-sxm", 1e-4), 7),  # seed 000 section 4's symptom table
    (lambda step: predict_model(batch=8), 13),  # embedding, a layer's 10 ops (x 32), the final norm, the LM head
    (lambda step: simulate(step, closed_requests(4, 10, 128, 16)), 10),  # one row per request
    (lambda step: sweep_concurrency(step, [1, 4], 128, 16, requests=8), 2),  # one per concurrency
])
def test_each_result_renders_and_frames_its_rows(step, make, rows):
    result = make(step)
    html = result._repr_html_()
    assert html.startswith('<div class="roofline-result">') and type(result).__name__ in html
    df = result.to_pandas()
    assert len(df) == rows


def test_frames_carry_the_numbers_in_si(step):
    plan = decode_plan(batches=(1, 8, 64))
    df = plan.to_pandas()
    assert list(df["batch"]) == [1, 8, 64] and list(df["step_s"]) == [r["step_s"] for r in plan.rows()]
    run = simulate(step, closed_requests(4, 10, 128, 16))
    assert list(run.to_pandas()["ttft_s"]) == pytest.approx(list(run.ttft_s))
    mem = inference_memory()
    assert mem.to_pandas()["bytes"].sum() == pytest.approx(mem.total_bytes)


def test_the_csvs_the_rows_refactor_touched_are_unchanged(step):
    run = simulate(step, closed_requests(2, 3, 128, 1))  # one-token answers: no TPOT, an empty cell
    lines = run.to_csv().splitlines()
    assert lines[0] == "request,arrival_s,input_tokens,output_tokens,ttft_s,tpot_s,e2e_s"
    first = lines[1].split(",")
    assert first[0] == "0" and first[2:4] == ["128", "1"] and first[5] == "" and float(first[4]) == run.ttft_s[0]
    mem = inference_memory()
    assert mem.to_csv().splitlines()[-1] == f"total,{mem.total_bytes!r}"


def test_the_mixins_json_is_the_dicts_and_its_csv_the_rows():
    plan = decode_plan(batches=(1, 8))
    import json

    assert json.loads(plan.to_json()) == json.loads(json.dumps(plan.to_dict()))
    lines = plan.to_csv().splitlines()
    assert lines[0].split(",") == list(plan.rows()[0]) and len(lines) == 1 + 2  # a header, a row per batch


def test_a_result_without_rows_writes_the_csv_of_its_frame(seed):
    d = diagnose(matmul_kernel(64, 4096, 4096), "h100-sxm", 1e-4)
    header = d.to_csv().splitlines()[0].split(",")
    assert header == list(d.to_pandas().columns)
    lines = seed.to_csv().splitlines()  # the seed layer: a header and its 12 ops
    assert len(lines) == 1 + 12 and lines[0].split(",") == list(seed.to_pandas().columns)


def test_rows_group_by_their_values_in_the_order_sites_first_come():
    """measured.tables.group_rows (numpy) against a plain pass over the rows: the same sites in the order of their
    first rows, each value a plain str or int (a number truncated), each site's rows in order."""
    import numpy as np

    from roofline.measured.tables import group_rows

    rng = np.random.default_rng(7)
    n = 5_000
    columns = [rng.choice(np.array(["fp8", "nvfp4", "bfloat16"]), n), rng.integers(0, 40, n),
               rng.integers(0, 5, n) * 1.5, np.array([("x", 3, "y")[i % 3] for i in range(n)], dtype=object),
               rng.integers(0, 2, n).astype(bool)]
    truth: dict = {}
    for i in range(n):
        key = tuple(str(c[i]) if isinstance(c[i], str) else int(c[i]) for c in columns)
        truth.setdefault(key, []).append(i)
    got = group_rows(*columns)
    assert list(got) == list(truth)
    assert all(got[k].tolist() == v for k, v in truth.items())
    assert all(type(v) in (str, int) for k in got for v in k)
    assert group_rows(np.array([], dtype=int)) == {}


def test_a_tables_sites_are_built_when_first_read():
    """measured.grid.BuiltOnRead: a site's value is built once, on its first read; keys and ``in`` build nothing."""
    from roofline.measured.grid import BuiltOnRead

    built = []
    sites = BuiltOnRead(a=lambda: built.append("a") or 1.0, b=lambda: built.append("b") or 2.0)
    assert "a" in sites and sorted(sites) == ["a", "b"] and built == []
    assert sites["a"] == 1.0 and sites["a"] == 1.0 and sites.get("b") == 2.0 and sites.get("c") is None
    assert built == ["a", "b"]
