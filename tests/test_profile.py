"""roofline profile: torch.profiler traces recorded here on the CPU, read back and costed with the
same rules as the meta-device trace; a hand-built device trace for the kernel-time path."""

import json

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.machines import Machine

FAST = Machine("far too fast", 1e18, 1e16)  # every real measurement is slower than its bound here
SLOW = Machine("far too slow", 1e3, 1e3)  # every real measurement beats its bound here: impossible


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Chrome traces of tiny Llama and GPT-2 forward passes on the CPU, with the meta traces of the
    same models and inputs."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from roofline.trace import models, trace

    out = {}
    torch.manual_seed(0)
    for name in ("tiny_llama", "tiny_gpt2"):
        model = getattr(models, name)().eval()
        ids = torch.randint(0, 256, (2, 16))
        with torch.no_grad():
            model(ids)  # warm up outside the recording
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                model(ids)
        path = tmp_path_factory.mktemp("traces") / f"{name}.json"
        prof.export_chrome_trace(str(path))
        out[name] = (path, trace(model, ids))
    return out


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_gpt2"])
def test_profile_costs_the_same_flops_as_the_meta_trace(recorded, name):
    from roofline.trace.profile import profile_report

    path, traced = recorded[name]
    rep = profile_report(path, FAST)
    assert rep.unsupported == ()
    assert not rep.device and {op.source for op in rep.ops} == {"cpu"}
    # the CPU ran aten::_scaled_dot_product_flash_attention_for_cpu where the trace recorded the
    # flash kernel; both count 4 B H T S d: every FLOP agrees, matmul by matmul
    profiled = sum(op.flops * op.calls for op in rep.ops)
    assert profiled == traced.total_flops
    mm = sorted(op.flops for op in rep.ops for _ in range(op.calls) if op.category == "matmul")
    assert mm == sorted(op.flops for op in traced.ops if op.category == "matmul")


def test_profile_rows_are_ranked_by_time_lost(recorded):
    from roofline.trace.profile import profile_report

    rep = profile_report(recorded["tiny_llama"][0], FAST)
    lost = [op.lost_s for op in rep.ops]
    assert lost == sorted(lost, reverse=True)
    for op in rep.ops:
        assert op.measured_s > 0 and 0 <= op.speed_of_light < 1 and op.problem is None
        assert op.roofline_s == pytest.approx(op.calls * max(op.flops / FAST.peak_flops, op.bytes / FAST.bandwidth))
    assert rep.measured_s == pytest.approx(sum(op.measured_s for op in rep.ops))
    assert rep.free_calls > 0  # views were seen and cost nothing


def test_a_time_below_the_bound_is_flagged_impossible(recorded):
    from roofline.trace.profile import profile_report

    rep = profile_report(recorded["tiny_gpt2"][0], SLOW)
    assert rep.problems and all(op.speed_of_light > 1 for op in rep.problems)
    assert "units" in rep.problems[0].problem and "sparse" in rep.problems[0].problem
    assert "IMPOSSIBLE" in rep.to_table()


def test_cli_profile_table_json_and_plot(recorded, capsys, tmp_path):
    path = str(recorded["tiny_llama"][0])
    machine = tmp_path / "cpu.toml"
    machine.write_text('[sources]\nME = "test"\n[machines.cpu]\nname = "test CPU"\ndefault_dtype = "fp32"\n'
                       'memory_bytes_per_s = { value = 1e15, source = "ME" }\n'
                       'peak_flops_per_s.fp32 = { value = 1e18, source = "ME" }\n')
    png = tmp_path / "profile.png"
    assert main(["profile", path, "--machine", str(machine), "-o", str(png), "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "aten::mm" in out and "% SoL" in out and "more rows" in out and png.read_bytes()[:4] == b"\x89PNG"
    assert main(["profile", path, "--machine", str(machine), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["measured_from"] == "cpu" and d["unsupported"] == []
    assert {"name", "shapes", "calls", "flops", "bytes", "bound", "roofline_s", "measured_s", "speed_of_light",
            "lost_s", "advice"} <= set(d["ops"][0])
    assert main(["profile", path, "--machine", str(machine), "--csv"]) == 0
    assert capsys.readouterr().out.startswith("name,shapes,")


def test_cli_diagnose_an_op_of_a_profile(recorded, capsys):
    from roofline.trace.profile import profile_report

    path = str(recorded["tiny_llama"][0])
    top = profile_report(path, "h100-sxm").ops[0]
    assert main(["diagnose", "--profile", path, "--rank", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["flops"] == top.flops and d["bytes"] == top.bytes
    assert d["measured_s"] == pytest.approx(top.measured_s / top.calls)  # per call
    assert main(["diagnose", "--profile", path, "--rank", "999"]) == 2 and "--rank" in capsys.readouterr().err


def test_cli_profile_bad_files(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["profile", str(bad)]) == 2 and "not a Chrome trace" in capsys.readouterr().err
    assert main(["profile", str(tmp_path / "none.json")]) == 2 and "not found" in capsys.readouterr().err
    (tmp_path / "empty.json").write_text('{"x": 1}')
    assert main(["profile", str(tmp_path / "empty.json")]) == 2 and "traceEvents" in capsys.readouterr().err


def test_cli_profile_without_torch_names_the_extra(capsys, monkeypatch, tmp_path):
    import sys

    (tmp_path / "t.json").write_text('{"traceEvents": []}')
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    assert main(["profile", str(tmp_path / "t.json")]) == 2
    assert "pip install 'roofline[torch]'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# the device path, on a hand-built trace in torch.profiler's Chrome format
# ---------------------------------------------------------------------------------------------


def _gpu_trace(path):
    cpu = dict(ph="X", cat="cpu_op", pid=1, tid=1)
    events = [
        dict(cpu, name="aten::linear", ts=100.0, dur=50.0, args={"External id": 1}),
        dict(cpu, name="aten::t", ts=101.0, dur=2.0, args={"External id": 2, "Input Dims": [[512, 256]],
                                                          "Input type": ["c10::BFloat16"]}),
        dict(cpu, name="aten::mm", ts=105.0, dur=40.0, args={
            "External id": 3, "Input Dims": [[128, 256], [256, 512]], "Input type": ["c10::BFloat16", "c10::BFloat16"],
            "Input Strides": [[256, 1], [1, 256]], "Concrete Inputs": ["", ""]}),
        dict(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", pid=1, tid=1, ts=110.0, dur=5.0,
             args={"External id": 3, "correlation": 99}),
        dict(ph="X", cat="kernel", name="sm90_xmma_gemm_bf16", pid=0, tid=7, ts=130.0, dur=10.0,
             args={"correlation": 99}),  # no External id: found through the launch's correlation
        dict(cpu, name="mylib::frobnicate", ts=200.0, dur=8.0, args={"External id": 4}),
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_device_kernels_are_the_measured_time(tmp_path):
    pytest.importorskip("torch")
    from roofline.trace.profile import profile_report

    rep = profile_report(_gpu_trace(tmp_path / "gpu.json"), "h100-sxm")
    assert rep.device
    (mm,) = rep.ops
    assert (mm.name, mm.calls, mm.source, mm.dtype) == ("aten::mm", 1, "device", "bf16")
    assert mm.measured_s == pytest.approx(10e-6)  # the kernel, not the 40 us of CPU time
    assert mm.flops == 2 * 128 * 512 * 256  # 33,554,432
    assert mm.bytes == 2 * (128 * 256 + 256 * 512 + 128 * 512)  # 458,752
    assert mm.roofline_s == pytest.approx(458_752 / 3.35e12)  # memory-bound on the H100: 0.137 us
    assert mm.speed_of_light == pytest.approx(458_752 / 3.35e12 / 10e-6)
    # aten::linear has no rule but its children do: covered, not unsupported; a leaf without a rule is listed
    assert [(u.name, u.calls, u.reason) for u in rep.unsupported] == [("mylib::frobnicate", 1, "no rule for this op")]
    assert "mylib::frobnicate x1" in rep.to_table()


def test_op_tree_nests_by_time():
    from roofline.trace.profile import op_tree, select_ops

    events = [dict(ph="X", cat="cpu_op", name=n, ts=ts, dur=d, pid=1, tid=1, args={})
              for n, ts, d in [("aten::linear", 0, 10), ("aten::t", 1, 1), ("aten::addmm", 3, 6), ("aten::copy_", 4, 1),
                               ("aten::to", 20, 1)]]
    roots = op_tree(events)
    assert [r.name for r in roots] == ["aten::linear", "aten::to"]
    assert [c.name for c in roots[0].children] == ["aten::t", "aten::addmm"]
    costed, free, missing = select_ops(roots)
    # addmm is costed whole (its copy_ is part of it); t and a childless aten::to are free views
    assert [n.name for n in costed] == ["aten::addmm"] and [n.name for n in free] == ["aten::t", "aten::to"]
    assert missing == []


def test_load_trace_errors(tmp_path):
    from roofline.trace.profile import load_trace

    with pytest.raises(RooflineError, match="not found"):
        load_trace(tmp_path / "missing.json")


# ---------------------------------------------------------------------------------------------
# malformed traces: one line, never a traceback
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc, words", [
    ([1, 2], "event 0 is 1, not an object"),
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name="aten::mm", ts="abc", dur=1.0)]}, 'ts = "abc", not a number'),
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=None)]}, "dur = null, not a number"),
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=-5)]}, "negative dur"),
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=1.0, args="x")]}, 'args = "x", not an object'),
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=1.0, tid=[1])]}, "tid = [1]"),
])
def test_malformed_events_are_one_line(tmp_path, capsys, doc, words):
    pytest.importorskip("torch")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main(["profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "not a torch.profiler Chrome trace" in err


def test_a_shape_that_cannot_be_rebuilt_is_an_unsupported_row(tmp_path):
    pytest.importorskip("torch")
    from roofline.trace.profile import profile_report

    args = {"Input Dims": [[-2, 3], [3, 4]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}
    weird = {"Input Dims": 5, "Input type": [["float"]]}  # not lists of shapes and type names
    events = [dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::mm", ts=0.0, dur=4.0, args=args),
              dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::mm", ts=10.0, dur=2.0, args=weird)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(path, "h100-sxm")
    assert rep.ops == ()
    assert [(u.name, u.calls, u.reason) for u in rep.unsupported] == [
        ("aten::mm", 2, "could not rebuild the call from the recorded shapes and arguments")]
    assert rep.unsupported[0].measured_s == pytest.approx(6e-6)  # 4 us + 2 us of CPU time


def test_an_op_of_zero_duration_is_flagged_not_a_traceback(tmp_path):
    pytest.importorskip("torch")
    from roofline.trace.profile import profile_report

    args = {"Input Dims": [[128, 256], [256, 512]], "Input type": ["float", "float"]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::mm", ts=0.0,
                                                     dur=0, args=args)]}))
    (mm,) = profile_report(path, "h100-sxm").ops
    assert mm.measured_s == 0 and "no time at all" in mm.problem


def test_profile_output_is_checked_before_reading(tmp_path, capsys):
    path = _gpu_trace(tmp_path / "gpu.json")
    assert main(["profile", str(path), "-o", str(tmp_path / "missing" / "p.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-o/--output" in err and "does not exist" in err
    assert main(["profile", str(path), "-o", str(tmp_path / "p.pdf")]) == 2 and ".png or .svg" in capsys.readouterr().err


def test_plot_profile_draws_each_dtype_at_its_own_roof(tmp_path, monkeypatch):
    import roofline.plots as plots
    from roofline.machines import get_machine
    from roofline.trace.profile import ProfiledOp, ProfileReport

    # H100 SXM: bf16 989 TFLOP/s and fp32 67 TFLOP/s; the fp32 op's stem must end on the fp32 roof
    h100 = get_machine("h100-sxm")
    fp32 = ProfiledOp("aten::mm", "1024x1024, 1024x1024", "fp32", "matmul", 1, 2 * 1024**3, 12 * 1024**2, "compute",
                      1e-5, 1e-4, "device")
    bf16 = ProfiledOp("aten::mm", "1024x1024, 1024x1024", "bf16", "matmul", 1, 2 * 1024**3, 6 * 1024**2, "compute",
                      1e-5, 1e-4, "device")
    report = ProfileReport("t.json", "h100-sxm", True, (fp32, bf16), (), 0, 0.0)
    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig))
    plots.plot_profile(report, h100, str(tmp_path / "p.png"))
    ax = figs[0].axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(lbl.startswith("H100 SXM bf16") for lbl in labels) and any(lbl.startswith("H100 SXM fp32") for lbl in labels)
    # intensity 2 x 1024^3 / (12 x 1024^2) = 170.7 FLOP/B: the fp32 stem tops at 67 TFLOP/s (fp32's
    # peak, under 170.7 x 3.35 TB/s = 572 TFLOP/s), the bf16 one (341.3 FLOP/B) at 341.3 x 3.35 = 1,144 -> 989
    tops = sorted(max(line.get_ydata()) for line in ax.get_lines() if line.get_color() == "0.75")
    assert tops == [pytest.approx(h100.peak("fp32") / 1e12), pytest.approx(h100.peak("bf16") / 1e12)]


def test_profile_with_a_calibrated_profile_puts_its_prediction_next_to_each_op(recorded, capsys, tmp_path):
    """--machine PROFILE: every costed op gets the calibrated prediction and interval (low <= time
    <= high), its class, and the total adds one eager call per free op as its own line."""
    from test_calibrated import synthetic

    from roofline.calibrated import CalibratedModel
    from roofline.machine_profile import write_profile
    from roofline.trace.profile import profile_report

    cal = synthetic()
    path = str(write_profile(cal, tmp_path / "p.toml"))
    trace_path, _ = recorded["tiny_llama"]
    rep = profile_report(trace_path, path, CalibratedModel(cal))
    costed = [op for op in rep.ops if op.bytes > 0]
    assert costed and all(op.calibrated_low_s <= op.calibrated_s <= op.calibrated_high_s for op in costed)
    assert all(op.op_class for op in costed)
    assert {op.op_class for op in costed if op.category == "matmul"} <= {"gemm", "bmm"}
    assert rep.framework_s == pytest.approx(rep.free_calls * cal.launch_s)
    assert rep.calibrated_s == pytest.approx(sum(op.calibrated_s for op in costed) + rep.framework_s)
    assert main(["profile", str(trace_path), "--machine", path]) == 0
    out = capsys.readouterr().out
    assert "calibrated us" in out and "one eager call per free op" in out
    assert main(["profile", str(trace_path)]) == 0  # a preset: no calibrated column
    assert "calibrated us" not in capsys.readouterr().out
