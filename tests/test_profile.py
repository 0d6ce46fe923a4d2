"""roofline profile: torch.profiler traces recorded here on the CPU, read back and costed with the
same rules as the meta-device trace; a hand-built device trace for the kernel-time path."""

import json

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.machines import Machine, MemoryLevel

FAST = Machine("far too fast", 1e18, 1e16)  # every real measurement is slower than its bound here
SLOW = Machine("far too slow", 1e3, 1e3)  # every real measurement beats its bound here: impossible
# A recording is retaken when a wrapper (aten::layer_norm around native_layer_norm) was descheduled
# long enough to read as a kernel of its own (>= 80% of >= 20 us outside its callee: seen once on a
# loaded CI machine); an op with no rule is unsupported in every recording, so it still fails.
RECORDINGS = 3


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Chrome traces of tiny Llama and GPT-2 forward passes on the CPU, with the meta traces of the
    same models and inputs."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from roofline.trace import models, trace

    from roofline.trace.profiler import profile_report

    out = {}
    torch.manual_seed(0)
    for name in ("tiny_llama", "tiny_gpt2"):
        model = getattr(models, name)().eval()
        ids = torch.randint(0, 256, (2, 16))
        path = tmp_path_factory.mktemp("traces") / f"{name}.json"
        for _ in range(RECORDINGS):
            with torch.no_grad():
                model(ids)  # warm up outside the recording
                with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                    model(ids)
            prof.export_chrome_trace(str(path))
            if profile_report(path, FAST).unsupported == ():
                break  # else the scheduler stalled a wrapper past its callee (on a busy machine): record again
        out[name] = (path, trace(model, ids))
    return out


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_gpt2"])
def test_profile_costs_the_same_flops_as_the_meta_trace(recorded, name):
    from roofline.trace.profiler import profile_report

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
    from roofline.trace.profiler import profile_report

    rep = profile_report(recorded["tiny_llama"][0], FAST)
    lost = [op.lost_s for op in rep.ops]
    assert lost == sorted(lost, reverse=True)
    for op in rep.ops:
        assert op.measured_s > 0 and 0 <= op.speed_of_light < 1 and op.problem is None
        assert op.roofline_s == pytest.approx(op.calls * max(op.flops / FAST.peak_flops, op.bytes / FAST.bandwidth))
    assert rep.measured_s == pytest.approx(sum(op.measured_s for op in rep.ops))
    assert rep.free_calls > 0  # views were seen and cost nothing


def test_a_time_below_the_bound_is_flagged_impossible(recorded):
    from roofline.trace.profiler import profile_report

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
    text = capsys.readouterr().out
    assert text.startswith("kind,name,shapes,")
    import csv

    rows = list(csv.DictReader(text.splitlines()))
    # the ops, then the time outside them: the column sums to the top-level ops and the time between them
    kinds = [r["kind"] for r in rows]
    assert kinds[0] == "op" and {"views", "wrappers", "between ops"} <= set(kinds)
    assert sum(float(r["measured_s"] or 0) for r in rows) == pytest.approx(d["top_level_s"] + d["between_ops_s"], rel=1e-6)
    op = next(r for r in rows if r["kind"] == "op")
    assert float(op["flops_total"]) == pytest.approx(float(op["flops"]) * int(op["calls"]))  # flops is per call


def test_cli_diagnose_an_op_of_a_profile(recorded, capsys):
    from roofline.trace.profiler import profile_report

    path = str(recorded["tiny_llama"][0])
    top = profile_report(path, "h100-sxm").ops[0]
    assert main(["diagnose", "--trace", path, "--rank", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["flops"] == top.flops and d["bytes"] == top.bytes
    assert d["measured_s"] == pytest.approx(top.measured_s / top.calls)  # per call
    assert main(["diagnose", "--trace", path, "--rank", "999"]) == 2 and "--rank" in capsys.readouterr().err


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
    from roofline.trace.profiler import profile_report

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
    from roofline.trace.chrome_trace import op_tree, select_ops

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
    from roofline.trace.chrome_trace import load_trace

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
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=1e30)]}, "over 12 days"),
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name="aten::linear", ts=0.0, dur=20.0),
                      dict(ph="X", cat="cpu_op", name="aten::addmm", ts=2.0, dur=1e6)]}, "overlap without nesting"),
    ({"traceEvents": [dict(ph="X", cat="cpu_op", name=n, ts=1.0, dur=0) for n in ("aten::linear", "aten::addmm")]},
     "every one of its 2 op events has dur = 0"),
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
    from roofline.trace.profiler import profile_report

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
    from roofline.trace.profiler import profile_report

    args = {"Input Dims": [[128, 256], [256, 512]], "Input type": ["float", "float"]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::mm", ts=0.0,
                                                     dur=0, args=args)]}))
    rep = profile_report(path, "h100-sxm")
    (mm,) = rep.ops
    assert mm.measured_s == 0 and "no time at all" in mm.problem
    # a reviewer read "lost us -0.0" beside it: an op measured below its bound lost no time to speak of
    row = next(line for line in rep.to_table().splitlines() if line.startswith("aten::mm"))
    assert row.split()[-2:] == ["-", "IMPOSSIBLE"] and "-0.0" not in row
    assert "no costed ops" not in rep.to_table() and "1 row(s) measured at no time at all" in rep.to_table()


def test_profile_output_is_checked_before_reading(tmp_path, capsys):
    path = _gpu_trace(tmp_path / "gpu.json")
    assert main(["profile", str(path), "-o", str(tmp_path / "missing" / "p.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-o/--output" in err and "does not exist" in err
    assert main(["profile", str(path), "-o", str(tmp_path / "p.pdf")]) == 2 and ".png or .svg" in capsys.readouterr().err


def test_plot_profile_draws_each_dtype_at_its_own_roof(tmp_path, monkeypatch):
    import roofline.plots as plots
    from roofline.machines import get_machine
    from roofline.trace.profiler import ProfiledOp, ProfileReport

    # H100 SXM: bf16 989 TFLOP/s and fp32 67 TFLOP/s; the fp32 op's stem must end on the fp32 roof
    h100 = get_machine("h100-sxm")
    fp32 = ProfiledOp("aten::mm", "1024x1024, 1024x1024", "fp32", "matmul", 1, 2 * 1024**3, 12 * 1024**2, "compute",
                      1e-5, 1e-4, "device")
    bf16 = ProfiledOp("aten::mm", "1024x1024, 1024x1024", "bf16", "matmul", 1, 2 * 1024**3, 6 * 1024**2, "compute",
                      1e-5, 1e-4, "device")
    report = ProfileReport("t.json", "h100-sxm", True, (fp32, bf16), (), 0, 0.0)
    figs = []
    import roofline.plots.figure as figure

    monkeypatch.setattr(figure, "_save", lambda fig, path: figs.append(fig))
    plots.plot_profile(report, h100, str(tmp_path / "p.png"))
    ax = figs[0].axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(lbl.startswith("H100 SXM bf16") for lbl in labels) and any(lbl.startswith("H100 SXM fp32") for lbl in labels)
    # intensity 2 x 1024^3 / (12 x 1024^2) = 170.7 FLOP/B: the fp32 stem tops at 67 TFLOP/s (fp32's
    # peak, under 170.7 x 3.35 TB/s = 572 TFLOP/s), the bf16 one (341.3 FLOP/B) at 341.3 x 3.35 = 1,144 -> 989
    (stems,) = ax.collections  # the stems are one LineCollection, not a Line2D an op
    tops = sorted(max(seg[:, 1]) for seg in stems.get_segments())
    assert tops == [pytest.approx(h100.peak("fp32") / 1e12), pytest.approx(h100.peak("bf16") / 1e12)]


def test_plot_profile_draws_a_fixed_number_of_artists_however_many_ops(tmp_path, monkeypatch):
    """20,000 ncu kernels took minutes with -o: two Line2D an op (40,000 artists) to lay out and draw.
    The stems are one collection and the points one line per bound, so 2 ops and 2,000 draw alike."""
    import roofline.plots as plots
    import roofline.plots.figure as figure
    from roofline.machines import get_machine
    from roofline.trace.profiler import ProfiledOp, ProfileReport

    figs = []
    monkeypatch.setattr(figure, "_save", lambda fig, path: figs.append(fig))
    for n in (2, 2000):
        ops = tuple(ProfiledOp("aten::mm", "x", "bf16", "matmul", 1, 1e9 * (i + 1), 1e7, "compute" if i % 2 else "memory",
                               1e-5, 1e-4, "device") for i in range(n))
        plots.plot_profile(ProfileReport("t.json", "h100-sxm", True, ops, (), 0, 0.0), get_machine("h100-sxm"),
                           str(tmp_path / "p.png"))
    few, many = (len(f.axes[0].get_lines()) + len(f.axes[0].collections) for f in figs)
    assert few == many and len(figs[1].axes[0].collections[0].get_segments()) == 2000


def test_profile_with_a_calibrated_profile_puts_its_prediction_next_to_each_op(recorded, capsys, tmp_path):
    """--machine PROFILE: every costed op gets the calibrated prediction and interval (low <= time
    <= high), its class, and the total adds one eager call per free op as its own line."""
    from test_calibrated import synthetic

    from roofline.measure.calibrated import CalibratedModel
    from roofline.measure.machine_file import write_profile
    from roofline.trace.profiler import profile_report

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


# ---------------------------------------------------------------------------------------------
# all device time accounted for: costed + unsupported + unattributed (by class) = the total
# ---------------------------------------------------------------------------------------------


def _mixed_gpu_trace(path):
    """The hand-built device trace above plus every kind of device time no costed op launched.

    Device events (us): gemm 10 (aten::mm, costed) | frob_kernel 3 (mylib::frobnicate, unsupported)
    | NCCL all-reduce 20 | Triton 6 | memcpy 4 | memset 1 | a kernel aten::linear launched itself
    (a composite: other kernel) 2 | two replays of one CUDA graph, 5 + 7 each: 24.
    Total 10 + 3 + 20 + 6 + 4 + 1 + 2 + 24 = 70 = 10 costed + 3 unsupported + 57 unattributed."""
    cpu = dict(ph="X", cat="cpu_op", pid=1, tid=1)

    def launch(name, ts, corr, ext=None, cat="cuda_runtime"):
        args = {"correlation": corr} | ({"External id": ext} if ext is not None else {})
        return dict(ph="X", cat=cat, name=name, pid=1, tid=1, ts=ts, dur=1.0, args=args)

    def device(name, ts, dur, corr, cat="kernel", tid=7):
        return dict(ph="X", cat=cat, name=name, pid=0, tid=tid, ts=ts, dur=dur, args={"correlation": corr})

    events = json.loads(_gpu_trace(path).read_text())["traceEvents"] + [
        launch("cudaLaunchKernel", 102.0, 107, ext=1), device("some_kernel", 104.0, 2.0, 107),
        launch("cudaLaunchKernel", 201.0, 100, ext=4), device("frob_kernel", 210.0, 3.0, 100),
        launch("cudaLaunchKernel", 300.0, 101),
        device("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 300.0, 20.0, 101, tid=20),
        launch("cuLaunchKernel", 330.0, 106, cat="cuda_driver"), device("triton_poi_fused_add_mul_0", 335.0, 6.0, 106),
        launch("cudaMemcpyAsync", 350.0, 102), device("Memcpy HtoD (Pageable -> Device)", 351.0, 4.0, 102, "gpu_memcpy"),
        launch("cudaMemsetAsync", 360.0, 103), device("Memset (Device)", 361.0, 1.0, 103, "gpu_memset"),
        launch("cudaGraphLaunch", 400.0, 104), device("ampere_sgemm_128x64_tn", 401.0, 7.0, 104),
        device("void at::native::vectorized_elementwise_kernel<4>", 408.0, 5.0, 104),
        launch("cudaGraphLaunch", 420.0, 105), device("ampere_sgemm_128x64_tn", 421.0, 7.0, 105),
        device("void at::native::vectorized_elementwise_kernel<4>", 428.0, 5.0, 105),
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_device_time_is_costed_plus_unsupported_plus_unattributed(tmp_path):
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    rep = profile_report(_mixed_gpu_trace(tmp_path / "gpu.json"), "h100-sxm")
    (mm,) = rep.ops
    assert mm.measured_s == pytest.approx(10e-6) and mm.source == "device"  # unchanged by the other kernels
    assert rep.device_s == pytest.approx(70e-6)
    assert rep.costed_device_s == pytest.approx(10e-6) and rep.unsupported_device_s == pytest.approx(3e-6)
    assert rep.unattributed_s == pytest.approx(57e-6)
    assert rep.costed_device_s + rep.unsupported_device_s + rep.unattributed_s == pytest.approx(rep.device_s, rel=1e-12)
    got = [(u.kind, u.calls, u.launches, round(u.seconds / 1e-6, 6)) for u in rep.unattributed]
    assert got == [("CUDA graph replay", 4, 2, 24.0), ("collective (NCCL)", 1, 1, 20.0), ("compiled (Triton)", 1, 1, 6.0),
                   ("memcpy", 1, 1, 4.0), ("other kernel", 1, 1, 2.0), ("memset", 1, 1, 1.0)]
    graph = rep.unattributed[0]
    assert graph.examples == ("ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel<4>")
    (frob,) = rep.unsupported
    assert (frob.name, frob.measured_s, frob.device_s) == ("mylib::frobnicate", pytest.approx(8e-6), pytest.approx(3e-6))
    table = rep.to_table()
    assert "device time: 70.0 us total = 10.0 costed + 3.0 unsupported + 57.0 unattributed" in table
    assert "unattributed device time: CUDA graph replay: 24.0 us in 2 replays, 4 kernels (e.g. ampere_sgemm" in table
    assert "unattributed device time: collective (NCCL): 20.0 us in 1 calls (e.g. ncclDevKernel_AllReduce" in table
    assert sum(line.startswith("unattributed device time: ") for line in table.splitlines()) == 6
    assert "mylib::frobnicate x1 (8.0 us CPU, 3.0 us device, no rule for this op)" in table


def test_device_time_in_the_json(tmp_path, capsys):
    pytest.importorskip("torch")
    path = _mixed_gpu_trace(tmp_path / "gpu.json")
    assert main(["profile", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["measured_from"] == "device" and d["device_s"] == pytest.approx(70e-6)
    assert d["costed_device_s"] + d["unsupported_device_s"] + d["unattributed_s"] == pytest.approx(d["device_s"])
    assert [u["class"] for u in d["unattributed"]][:2] == ["CUDA graph replay", "collective (NCCL)"]
    assert d["unattributed"][0] == {"class": "CUDA graph replay", "calls": 4, "launches": 2, "seconds": pytest.approx(24e-6),
                                    "examples": ["ampere_sgemm_128x64_tn",
                                                 "void at::native::vectorized_elementwise_kernel<4>"]}
    assert d["unsupported"][0]["device_s"] == pytest.approx(3e-6)
    assert main(["profile", str(path)]) == 0 and "57.0 unattributed" in capsys.readouterr().out  # no NaN or inf


def test_a_graph_only_trace_has_device_kernels_all_unattributed(tmp_path):
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    # one replay of a three-kernel graph: 3 + 4 + 5 = 12 us, no op in the trace
    events = [dict(ph="X", cat="cuda_runtime", name="cudaGraphLaunch", pid=1, tid=1, ts=0.0, dur=2.0,
                   args={"correlation": 7})]
    events += [dict(ph="X", cat="kernel", name=f"k{i}", pid=0, tid=7, ts=10.0 + 10 * i, dur=float(d),
                    args={"correlation": 7}) for i, d in enumerate((3, 4, 5))]
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(path, "h100-sxm")
    assert rep.device and rep.ops == () and rep.unsupported == ()
    assert rep.device_s == pytest.approx(12e-6) and rep.costed_device_s == 0 and rep.unsupported_device_s == 0
    ((kind, calls, launches, seconds, examples),) = [(u.kind, u.calls, u.launches, u.seconds, u.examples)
                                                      for u in rep.unattributed]
    assert (kind, calls, launches, seconds, examples) == ("CUDA graph replay", 3, 1, pytest.approx(12e-6), ("k2", "k1", "k0"))
    table = rep.to_table()
    assert "no device kernels" not in table and "measured = device kernels" in table
    assert "device time: 12.0 us total = 0.0 costed + 0.0 unsupported + 12.0 unattributed" in table
    assert "unattributed device time: CUDA graph replay: 12.0 us in 1 replays, 3 kernels (e.g. k2, k1, k0)" in table


def test_a_graph_launched_under_a_costed_op_is_not_its_time(tmp_path):
    """A graph's kernels were captured elsewhere: the op around the replay did not launch them."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    events = json.loads(_gpu_trace(tmp_path / "gpu.json").read_text())["traceEvents"] + [
        dict(ph="X", cat="cuda_runtime", name="cudaGraphLaunch", pid=1, tid=1, ts=120.0, dur=1.0,
             args={"External id": 3, "correlation": 50}),
        dict(ph="X", cat="kernel", name="graph_kernel", pid=0, tid=7, ts=150.0, dur=9.0,
             args={"External id": 3, "correlation": 50})]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(path, "h100-sxm")
    assert rep.ops[0].measured_s == pytest.approx(10e-6) and rep.costed_device_s == pytest.approx(10e-6)
    assert [(u.kind, u.seconds) for u in rep.unattributed] == [("CUDA graph replay", pytest.approx(9e-6))]


def test_device_events_and_their_classes_without_torch():
    from roofline.trace.chrome_trace import device_class, device_events, device_seconds
    from roofline.trace.profiler import unattributed_device_time

    events = [dict(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=0.0, dur=1.0, args={"External id": 1, "correlation": 9}),
              dict(ph="X", cat="kernel", name="gemm", ts=1.0, dur=2.0, args={"correlation": 9}),
              dict(ph="X", cat="kernel", name="ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", ts=1.0, dur=3.0,
                   args={"External id": 2}),
              dict(ph="X", cat="gpu_memset", name="Memset (Device)", ts=5.0, dur=0.5, args={}),
              dict(ph="X", cat="cpu_op", name="aten::mm", ts=0.0, dur=9.0, args={"External id": 1})]
    devs = device_events(events)
    assert [(d.name[:6], d.ext, d.graph) for d in devs] == [("gemm", 1, False), ("ncclKe", 2, False), ("Memset", None, False)]
    assert [device_class(d) for d in devs] == ["other kernel", "collective (NCCL)", "memset"]
    assert device_seconds(events) == {1: pytest.approx(2e-6), 2: pytest.approx(3e-6)}
    # op 1 took its kernel; the NCCL kernel's External id is no op's, the memset has none
    left = unattributed_device_time(devs, {1})
    assert [(u.kind, u.calls, u.seconds) for u in left] == [("collective (NCCL)", 1, pytest.approx(3e-6)),
                                                            ("memset", 1, pytest.approx(0.5e-6))]
    assert device_events([e for e in events if e["cat"] == "cpu_op"]) == []


def test_a_cpu_only_trace_has_no_device_time_lines(recorded, capsys):
    from roofline.trace.profiler import profile_report

    path = recorded["tiny_llama"][0]
    rep = profile_report(path, FAST)
    assert not rep.device and rep.device_s == 0 and rep.unattributed == () and rep.unattributed_s == 0
    assert all(u.device_s == 0 for u in rep.unsupported)
    table = rep.to_table()
    assert "no device kernels in the trace" in table and "device time:" not in table and "unattributed" not in table
    assert main(["profile", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["device_s"], d["unattributed_s"], d["unattributed"]) == (0.0, 0, [])


def test_an_op_recorded_with_zero_duration_is_listed_not_divided_by(tmp_path, capsys):
    """A cpu_op with dur 0 (the profiler's clock did not tick) would be an infinite % of speed of
    light: the table says "no time", the JSON null, and the op is flagged."""
    pytest.importorskip("torch")
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 0, "pid": 1, "tid": 1,
               "args": {"Input Dims": [[4, 4], [4, 4], []], "Input type": ["float", "float", "Scalar"],
                        "Concrete Inputs": ["", "", "1"]}}]
    path = tmp_path / "zero.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["profile", str(path), "--machine", "h100-sxm"]) == 0
    assert "no time" in capsys.readouterr().out
    assert main(["profile", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ops"][0]["speed_of_light"] is None


def test_moe_routing_ops_are_rebuilt_and_costed(tmp_path):
    """An MoE's eager dispatch: top-2 of 8 router scores, ``torch.where`` on the expert mask, the
    chosen rows gathered with ``x[rows]``. The profiler records neither ``index``'s index list nor
    ``nonzero``'s output size; both are read off their children. By hand, with 8 of the 32 mask
    rows true (16 bool mask entries over (32, 2)):
    - topk of a (32, 8) fp32 tensor, k = 2: 1,024 B read; 256 B of values + 512 B of int64 indices
      written: 1,792 B;
    - nonzero of the (32, 2) bool mask with 8 true: 64 B read, (8, 2) int64 = 128 B written: 192 B;
    - x[rows], x (32, 256) fp32, rows 8 int64: 64 B of indices read, 8 x 256 x 4 = 8,192 B gathered
      and written: 64 + 2 x 8,192 = 16,448 B."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from roofline.trace.profiler import profile_report

    scores = torch.randn(32, 8)
    x = torch.randn(32, 256)
    mask = torch.zeros(32, 2, dtype=torch.bool)
    mask[:8, 0] = True

    def step():
        scores.topk(2, dim=-1)
        rows, _ = torch.where(mask)
        return x[rows]

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    path = tmp_path / "moe.json"
    prof.export_chrome_trace(str(path))
    rep = profile_report(path, FAST)
    got = {op.name: op.bytes for op in rep.ops}
    assert got.get("aten::topk") == 1792 and got.get("aten::nonzero") == 192 and got.get("aten::index") == 16448, got
    assert not rep.unsupported, rep.unsupported


def test_a_strided_call_is_its_own_row_marked_in_its_shapes(tmp_path):
    """Two aten::silu calls on (64, 128) inputs, one contiguous (strides (128, 1)) and one a chunk
    view (strides (256, 1), a half of a (64, 256) tensor): two rows, the second's shapes marked
    '(strided)' and its kernel_shape (STRIDED,), both costed the same bytes (2 x 64 x 128 x 4 =
    65,536: read and write)."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report
    from roofline.trace.rules.matmul import STRIDED

    cpu = dict(ph="X", cat="cpu_op", pid=1, tid=1)
    args = {"Input Dims": [[64, 128]], "Input type": ["float"], "Concrete Inputs": [""]}
    events = [dict(cpu, name="aten::silu", ts=0.0, dur=10.0, args={**args, "External id": 1, "Input Strides": [[128, 1]]}),
              dict(cpu, name="aten::silu", ts=20.0, dur=20.0, args={**args, "External id": 2, "Input Strides": [[256, 1]]})]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(path, FAST)
    rows = {op.shapes: op for op in rep.ops}
    assert set(rows) == {"64x128", "64x128 (strided)"}
    assert rows["64x128 (strided)"].kernel_shape == (STRIDED,) and rows["64x128"].kernel_shape == ()
    assert rows["64x128"].bytes == rows["64x128 (strided)"].bytes == 65_536
    assert rows["64x128 (strided)"].measured_s == pytest.approx(20e-6)


def test_between_ops_sums_the_gaps_between_top_level_ops():
    """Thread 1: top-level ops at [0, 10) and [15, 20) (aten::t nested inside the first), then
    [32, 40): gaps of 5 and 12 us; thread 2: [0, 4) and [10, 11): a gap of 6 us. Time before the
    first op and after the last is not counted. 23 us in 3 gaps."""
    from roofline.trace.chrome_trace import between_ops

    def ev(ts, dur, tid=1, name="aten::add"):
        return dict(ph="X", cat="cpu_op", name=name, ts=ts, dur=dur, pid=1, tid=tid, args={})

    events = [ev(0, 10), ev(2, 3, name="aten::t"), ev(15, 5), ev(32, 8), ev(0, 4, tid=2), ev(10, 1, tid=2),
              dict(ph="X", cat="kernel", name="k", ts=50, dur=100, pid=0, tid=7, args={})]
    seconds, gaps = between_ops(events)
    assert seconds == pytest.approx(23e-6) and gaps == 3
    assert between_ops([]) == (0.0, 0) and between_ops([ev(0, 5)]) == (0.0, 0)


def test_profile_reports_the_measured_time_between_ops(recorded):
    """A real CPU trace: the gaps between top-level ops are positive, in the table and the JSON,
    and they lie within the trace's span less its top-level ops' time."""
    from roofline.trace.profiler import profile_report

    rep = profile_report(recorded["tiny_llama"][0], FAST)
    assert rep.between_ops_gaps > 10 and rep.between_ops_s > 0
    assert "between ops:" in rep.to_table()
    d = json.loads(rep.to_json())
    assert d["between_ops_s"] == pytest.approx(rep.between_ops_s) and d["between_ops_gaps"] == rep.between_ops_gaps
    from roofline.trace.chrome_trace import op_tree

    roots = op_tree(json.loads(recorded["tiny_llama"][0].read_text())["traceEvents"])
    span = max(n.end for n in roots) - min(n.ts for n in roots)
    assert rep.between_ops_s <= (span - sum(n.dur for n in roots)) * 1e-6 + 1e-7  # float microseconds: 0.1 us slack


def test_a_trace_with_no_ops_is_refused_with_how_to_record_one(tmp_path, capsys):
    pytest.importorskip("torch")
    for text in ('{"traceEvents": []}', "[]", '{"traceEvents": [{"ph": "X", "cat": "python_function", "name": "f", "ts": 0, "dur": 1}]}'):
        (tmp_path / "t.json").write_text(text)
        assert main(["profile", str(tmp_path / "t.json")]) == 2
        err = capsys.readouterr().err
        assert "no op events" in err and "record_shapes=True" in err and len(err.strip().splitlines()) == 1


def test_a_trace_without_strides_says_what_it_cannot_tell(tmp_path):
    """The same silu call as above with no "Input Strides": one row, and a note."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    ev = dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::silu", ts=0.0, dur=10.0,
              args={"Input Dims": [[64, 128]], "Input type": ["float"], "Concrete Inputs": [""], "External id": 1})
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [ev]}))
    rep = profile_report(tmp_path / "t.json", FAST)
    assert len(rep.ops) == 1 and any("no input strides" in n for n in rep.notes)
    assert "note: this trace records no input strides" in rep.to_table()


def test_an_op_with_no_rule_that_does_its_own_work_keeps_all_its_time(tmp_path):
    """An LSTM as torch records it: aten::lstm (100 us) calls aten::mkldnn_rnn_layer (90 us), whose
    own child is a 2 us copy; aten::linear (20 us) wraps a 16 us addmm. The rnn layer spends 88 of
    its 90 us outside its callees (at least 80%, and 20 us): those 88 us are unsupported, its copy
    costed; lstm (10 us of its own) and linear (4 us) are wrappers: their own 14 us on the wrappers'
    line. Every microsecond of the 120 us of top-level ops is on one line: 18 costed + 88
    unsupported + 14 wrappers."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    def ev(name, ts, dur, dims, scalars=()):
        return dict(ph="X", cat="cpu_op", pid=1, tid=1, name=name, ts=ts, dur=dur,
                    args={"Input Dims": dims + [[]] * len(scalars),
                          "Input type": ["float"] * len(dims) + ["Scalar"] * len(scalars),
                          "Concrete Inputs": [""] * len(dims) + list(scalars)})

    events = [ev("aten::lstm", 0.0, 100.0, [[4, 8, 16]]), ev("aten::mkldnn_rnn_layer", 5.0, 90.0, [[4, 8, 16]]),
              ev("aten::copy_", 10.0, 2.0, [[4, 16], [4, 16]]),
              ev("aten::linear", 110.0, 20.0, [[4, 16], [32, 16], [32]]),
              ev("aten::addmm", 112.0, 16.0, [[32], [4, 16], [16, 32]], ("1", "1"))]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(tmp_path / "t.json", FAST)
    assert sorted((op.name, op.calls) for op in rep.ops) == [("aten::addmm", 1), ("aten::copy_", 1)]
    assert [(u.name, u.calls, round(u.measured_s * 1e6, 6)) for u in rep.unsupported] == [("aten::mkldnn_rnn_layer", 1, 88.0)]
    assert "its own time, outside the ops it called" in rep.unsupported[0].reason
    assert rep.wrapper_calls == 2 and rep.wrapper_s == pytest.approx(14e-6)
    assert rep.measured_s + rep.free_s + sum(u.measured_s for u in rep.unsupported) + rep.wrapper_s == pytest.approx(
        rep.top_level_s)
    assert "wrappers' own time: 14.0 us in 2 calls" in rep.to_table()


def test_a_trace_recorded_without_shapes_is_refused(tmp_path, capsys):
    """No op's input shapes: nothing can be costed, so the whole trace is refused, naming the option."""
    events = [dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::addmm", ts=0.0, dur=16.0, args={"External id": 1}),
              dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::gelu", ts=20.0, dur=4.0, args={})]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert "record_shapes=True" in err and "Traceback" not in err and err.count("\n") == 1


def test_an_op_faster_than_main_memory_but_not_its_cache_is_not_called_impossible(tmp_path):
    """A (64, 128) fp32 add: 3 x 32 KiB = 96 KiB read and written, in a 512 KiB L2. At 1 us it
    beats a 10 GB/s main memory's bound (9.8 us) but not a 1 TB/s L2's (0.1 us): no problem, and
    the advice says "in cache", not "impossible"."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    m = Machine("small cpu", 1e11, 10e9, default_dtype="fp32", levels=(MemoryLevel("l2", 512 * 1024, 1e12),))
    ev = dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::add", ts=0.0, dur=1.0,
              args={"Input Dims": [[64, 128], [64, 128], []], "Input type": ["float", "float", "Scalar"],
                    "Concrete Inputs": ["", "", "1"]})
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [ev]}))
    (add,) = profile_report(tmp_path / "t.json", m).ops
    assert add.speed_of_light > 1 and add.problem is None
    assert add.advice.startswith("in cache") and "impossible" not in add.advice


def test_a_sort_is_advised_as_a_bytes_only_floor(tmp_path):
    """aten::sort is costed at 0 FLOPs (comparisons are not FLOPs): its roofline is its bytes
    alone, a floor the op cannot approach, and the advice says so instead of 'fuse'."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    ev = dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::sort", ts=0.0, dur=2000.0,
              args={"Input Dims": [[4, 64, 256], [], []], "Input type": ["float", "Scalar", "Scalar"],
                    "Concrete Inputs": ["", "-1", "False"]})
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [ev]}))
    (op,) = profile_report(tmp_path / "t.json", "h100-sxm").ops
    assert op.flops == 0 and op.advice.startswith("bytes-only bound")


def _add_event(ts, dur, tid=1, dims=((64, 128), (64, 128))):
    return dict(ph="X", cat="cpu_op", pid=1, tid=tid, name="aten::add", ts=ts, dur=dur,
                args={"Input Dims": [list(d) for d in dims] + [[]], "Input type": ["float", "float", "Scalar"],
                      "Concrete Inputs": ["", "", "1"]})


def _mm_event(ts, dur):
    return dict(ph="X", cat="cpu_op", pid=1, tid=1, name="aten::mm", ts=ts, dur=dur,
                args={"Input Dims": [[64, 128], [128, 64]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]})


def test_a_trace_of_several_forwards_says_how_many():
    """mm, add, add recorded three times over: three forwards (the sequence repeats end to end);
    one more add at the end breaks the repetition: one."""
    from roofline.trace.chrome_trace import op_tree, repeats

    one = [_mm_event(0.0, 5.0), _add_event(10.0, 1.0), _add_event(20.0, 1.0)]
    three = [dict(e, ts=e["ts"] + 100.0 * k) for k in range(3) for e in one]
    assert repeats(op_tree(three)) == 3
    assert repeats(op_tree(three + [_add_event(400.0, 1.0)])) == 1
    assert repeats(op_tree(one)) == 1


def test_a_cpu_trace_against_a_gpu_says_so_in_json_and_beside_csv(recorded, capsys):
    path = str(recorded["tiny_llama"][0])
    assert main(["profile", path, "--json"]) == 0
    out, _ = capsys.readouterr()
    assert any("timed its ops on the CPU" in n for n in json.loads(out)["notes"])
    assert main(["profile", path, "--csv"]) == 0
    out, err = capsys.readouterr()
    assert "timed its ops on the CPU" in err and "timed its ops" not in out


def test_a_repeating_trace_is_not_divided_into_forwards_unless_said(tmp_path, capsys):
    """mm, add recorded four times over: four forwards in a loop, or one forward of four identical
    blocks (a reviewer's Sequential of 4 x (Linear, ReLU) was reported as 4 forwards, a quarter of
    its time each). The trace cannot tell: totals stay the whole trace's, with a note, until
    --forwards (or ProfilerStep spans) says how many."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    one = [_mm_event(0.0, 5.0), _add_event(10.0, 1.0)]
    events = [dict(e, ts=e["ts"] + 100.0 * k) for k in range(4) for e in one]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(tmp_path / "t.json", FAST)
    assert rep.forwards == 1 and any("repeat 4 times" in n and "--forwards 4" in n for n in rep.notes)
    said = profile_report(tmp_path / "t.json", FAST, forwards=4)
    assert said.forwards == 4 and said.to_dict()["forwards"] == 4 and "the trace holds 4 forwards" in said.to_table()
    steps = [dict(ph="X", cat="user_annotation", pid=1, tid=1, name=f"ProfilerStep#{k}", ts=100.0 * k - 1, dur=99.0)
             for k in range(4)]
    (tmp_path / "s.json").write_text(json.dumps({"traceEvents": events + steps}))
    assert profile_report(tmp_path / "s.json", FAST).forwards == 4  # marked by prof.step()
    assert not any("do not divide" in n for n in said.notes)
    # a reviewer's --forwards 7 on such a trace was taken as given: 4 calls of each op are not 7 forwards
    seven = profile_report(tmp_path / "t.json", FAST, forwards=7)
    assert any(n.startswith("7 forwards do not divide the calls of 2 of 2 rows") and "repeat 4 times" in n
               for n in seven.notes)
    assert main(["profile", str(tmp_path / "t.json"), "--forwards", "0"]) == 2
    assert "--forwards" in capsys.readouterr().err


def test_a_call_far_above_its_rows_median_is_called_a_warm_up(tmp_path):
    """Four calls of one add: 2 ms, then three of 10 us: 200x the median, a first call's warm-up
    inside the recording, which a note names with how to record past it."""
    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    events = [_add_event(0.0, 2000.0)] + [_add_event(3000.0 + 100 * k, 10.0) for k in range(3)]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    rep = profile_report(tmp_path / "t.json", FAST)
    assert any("over 20x the row's median" in n and "aten::add 2,000 us" in n and "schedule" in n for n in rep.notes)
    events = [_add_event(100.0 * k, 10.0 + k) for k in range(4)]  # steady calls: no note
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    assert not any("median" in n for n in profile_report(tmp_path / "t.json", FAST).notes)


def test_an_impossible_compute_bound_op_blames_the_peak_not_the_cache():
    """A (64, 128) @ (128, 64) fp32 mm: 2 x 64 x 128 x 64 = 1.05 MFLOP over 96 KiB. On a 1 GFLOP/s
    machine (1 TB/s) its bound is 1.05 ms of compute; measured in 100 us it ran 10.5 GFLOP/s: the
    peak is the suspect, and a cache that holds its bytes is no explanation of beating a compute bound."""
    from roofline.diagnose.kernel_diagnosis import measurement_problem

    m = Machine("slow peak", 1e9, 1e12, default_dtype="fp32", l2_bytes=1 << 20)
    flops, nbytes = 2 * 64 * 128 * 64, 3 * 64 * 128 * 4
    msg = measurement_problem(flops / 1e9, 100e-6, nbytes, m, flops=flops, bound="compute")
    assert "this op ran 10.5 GFLOP/s" in msg and "L2" not in msg
    assert "L2" in measurement_problem(flops / 1e9, 100e-6, nbytes, m, bound="memory")


def test_a_gzipped_trace_is_read_through(tmp_path, capsys):
    """torch.profiler's export_chrome_trace("t.json.gz") writes gzip: read as the plain file is;
    a truncated one is one line, exit 2."""
    import gzip

    pytest.importorskip("torch")
    from roofline.trace.profiler import profile_report

    events = [_mm_event(0.0, 5.0), _add_event(10.0, 1.0)]
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_text(json.dumps({"traceEvents": events}))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert profile_report(packed, FAST).to_dict()["ops"] == profile_report(plain, FAST).to_dict()["ops"]
    (tmp_path / "cut.json.gz").write_bytes(packed.read_bytes()[:20])
    assert main(["profile", str(tmp_path / "cut.json.gz")]) == 2
    err = capsys.readouterr().err
    assert "gzip file that cannot be read through" in err and "Traceback" not in err


def test_a_layer_norm_whose_callee_the_profiler_lost_is_costed_by_that_rule_and_said(recorded, tmp_path):
    """Under load torch.profiler once wrote aten::layer_norm without the aten::native_layer_norm it
    calls (seen twice in full test runs): the wrapper is costed by its callee's rule (the same
    FLOPs: 8 per element, kernels.layernorm_kernel) instead of being left out, and the report says so."""
    from roofline.trace.profiler import profile_report

    path, traced = recorded["tiny_gpt2"]
    whole = profile_report(path, FAST)
    data = json.loads(path.read_text())
    lost = [e for e in data["traceEvents"] if e.get("name") == "aten::native_layer_norm"]
    assert lost, "the recording has no native_layer_norm to lose"
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("name") != "aten::native_layer_norm"]
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(data))
    rep = profile_report(cut, FAST)
    assert rep.unsupported == ()
    assert sum(op.flops * op.calls for op in rep.ops) == sum(op.flops * op.calls for op in whole.ops) == traced.total_flops
    assert any(n.startswith(f"{len(lost)} call(s) of aten::layer_norm were recorded without") for n in rep.notes)
    assert not any("recorded without" in n for n in whole.notes)


def test_a_profile_without_costed_ops_keeps_every_column():
    from roofline.trace.profile_result import OP_FIELDS, ProfileReport, Unsupported

    # one unsupported op of 2 calls and 1 ms: its reason is its row's advice, whatever ops were costed
    rep = ProfileReport("t.json", "cpu", False, (), (Unsupported("aten::foo", 2, 1e-3, "no rule"),), 0, 0.0)
    lines = rep.to_csv().splitlines()
    assert lines[0].split(",") == ["kind", *OP_FIELDS]
    row = dict(zip(lines[0].split(","), lines[3].split(",")))  # views, wrappers, then the unsupported op
    assert row["kind"] == "unsupported" and row["advice"] == "no rule" and float(row["measured_s"]) == 1e-3
