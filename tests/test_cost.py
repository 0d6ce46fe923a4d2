"""The cost model: properties (hypothesis), overlap, launch, CUDA graphs, vectorised sweeps."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import H100_SXM, CostModel, Kernel, Machine, predict, seed_cost_model, speed_of_light, time_lower_bound
from roofline.cost import op_times
from roofline.errors import RooflineError

flops = st.floats(min_value=1.0, max_value=1e18)
nbytes = st.floats(min_value=1.0, max_value=1e15)
frac = st.floats(min_value=0.05, max_value=1.0)
launch = st.floats(min_value=0.0, max_value=1e-3)
overlap = st.floats(min_value=0.0, max_value=1.0)


@given(flops, nbytes, frac, frac, launch, overlap)
@settings(max_examples=300, deadline=None)
def test_never_below_the_roofline(f, b, ec, em, t_launch, ov):
    k = Kernel("k", f, b)
    op = CostModel(ec, em, t_launch, ov).predict_op(k, H100_SXM)
    assert op.time_s >= time_lower_bound(k, H100_SXM) * (1 - 1e-12)


@given(flops, nbytes, frac, frac, launch, st.floats(min_value=1.0, max_value=10.0))
@settings(max_examples=200, deadline=None)
def test_monotone_in_flops_and_bytes(f, b, ec, em, t_launch, factor):
    model = CostModel(ec, em, t_launch)
    base = model.predict_op(Kernel("k", f, b), H100_SXM).time_s
    assert model.predict_op(Kernel("k", f * factor, b), H100_SXM).time_s >= base
    assert model.predict_op(Kernel("k", f, b * factor), H100_SXM).time_s >= base


@given(flops, nbytes)
@settings(max_examples=200, deadline=None)
def test_equals_the_bound_at_full_efficiency_and_no_launch(f, b):
    k = Kernel("k", f, b)
    assert CostModel().predict_op(k, H100_SXM).time_s == pytest.approx(time_lower_bound(k, H100_SXM), rel=1e-12)


@given(flops, nbytes, frac, frac)
@settings(max_examples=100, deadline=None)
def test_no_overlap_is_the_sum(f, b, ec, em):
    op = CostModel(ec, em, 0.0, overlap=0.0).predict_op(Kernel("k", f, b), H100_SXM)
    assert op.time_s == pytest.approx(op.compute_s + op.memory_s, rel=1e-12)


def test_worked_example_with_efficiency_and_launch():
    m = Machine("toy", 100.0, 10.0)  # 100 FLOP/s, 10 B/s
    k = Kernel("k", 140.0, 17.0)
    op = CostModel(0.7, 0.85, 0.5).predict_op(k, m)
    assert op.compute_s == pytest.approx(2.0)  # 140 / (0.7 * 100)
    assert op.memory_s == pytest.approx(2.0)  # 17 / (0.85 * 10)
    assert op.time_s == pytest.approx(2.5)  # max + launch
    assert CostModel(0.7, 0.85, 0.5, overlap=0.5).predict_op(k, m).time_s == pytest.approx(3.5)  # 2 + 0.5*2 + 0.5


def test_workload_summary_fields():
    m = Machine("toy", 100.0, 10.0)
    ks = [Kernel("mem", 10.0, 100.0), Kernel("cmp", 1000.0, 10.0)]
    w = CostModel(1.0, 1.0, 1.0).predict(ks, m)
    # mem: c 0.1, m 10 -> 11 s; cmp: c 10, m 1 -> 11 s
    assert w.total_s == pytest.approx(22.0)
    assert w.flops_only_s == pytest.approx(10.1)
    assert w.bytes_only_s == pytest.approx(11.0)
    assert w.memory_bound_ops == 1 and w.memory_bound_share == pytest.approx(0.5)
    assert w.launch_s == 2.0 and w.launch_share == pytest.approx(2 / 22)
    assert [o.bound for o in w.ops] == ["memory", "compute"]


def test_cuda_graph_pays_one_launch():
    ks = [Kernel(f"k{i}", 1.0, 1.0) for i in range(10)]
    eager = CostModel(1, 1, 3e-6).predict(ks, H100_SXM)
    graph = CostModel(1, 1, 3e-6, cuda_graph=True).predict(ks, H100_SXM)
    assert eager.launch_s == pytest.approx(30e-6)
    assert graph.launch_s == pytest.approx(3e-6)


def test_dtype_picks_its_peak():
    k8 = Kernel("fp8 gemm", 1979e12, 1.0, dtype="fp8")
    kb = Kernel("bf16 gemm", 1979e12, 1.0, dtype="bf16")
    assert time_lower_bound(k8, H100_SXM) == pytest.approx(1.0)  # 1,979 dense fp8 TFLOP/s
    assert time_lower_bound(kb, H100_SXM) == pytest.approx(1979 / 989)  # 989 dense bf16


def test_vectorised_sweep_equals_loop():
    F = np.array([1e9, 1e12, 1e15])
    B = np.array([1e9, 1e8, 1e7])
    c, mem, t = op_times(F, B, 989e12, 3.35e12, 0.7, 0.85, 3e-6)
    for i in range(3):
        op = seed_cost_model().predict_op(Kernel("k", float(F[i]), float(B[i])), H100_SXM)
        assert t[i] == pytest.approx(op.time_s) and c[i] == pytest.approx(op.compute_s)


def test_speed_of_light():
    k = Kernel("k", 989e12, 1.0)  # 1 s at peak
    assert speed_of_light(k, H100_SXM, 2.0) == pytest.approx(0.5)
    assert speed_of_light(k, H100_SXM, 0.5) > 1  # impossible: faster than the roof


@pytest.mark.parametrize(
    "kwargs",
    [dict(compute_efficiency=0), dict(compute_efficiency=1.2), dict(memory_efficiency=float("nan")),
     dict(launch_overhead_s=-1e-6), dict(overlap=2.0)],
)
def test_bad_cost_model(kwargs):
    with pytest.raises(RooflineError):
        CostModel(**kwargs)


def test_json_and_csv_from_one_object():
    w = predict([Kernel("a", 1e9, 1e9), Kernel("b", 1e12, 1e6)], H100_SXM, seed_cost_model())
    import json

    d = json.loads(w.to_json())
    assert [o["name"] for o in d["ops"]] == ["a", "b"]
    assert d["total_s"] == pytest.approx(w.total_s)
    lines = w.to_csv().strip().splitlines()
    assert lines[0].startswith("name,flops,bytes") and len(lines) == 3
