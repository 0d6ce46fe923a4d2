"""Plots render to real files (PNG and SVG) with the kernels and ops drawn."""

import pytest

pytest.importorskip("matplotlib")

from roofline import H100_SXM, get_machine
from roofline.blocks import layer_report
from roofline.plots import plot_layer, plot_roofline, seed_kernels


def test_seed_seven_kernels_on_the_h100(tmp_path):
    ks = seed_kernels()
    assert len(ks) == 7
    # exercise 5's list: which are left and right of the H100 ridge
    left = {k.name for k in ks if k.intensity < H100_SXM.ridge_point}
    assert "naive attention T=4096" in left and "decode B=1" in left and "decode B=256" in left
    path = tmp_path / "roof.png"
    plot_roofline(H100_SXM, ks, str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 40_000


def test_several_machines_svg(tmp_path):
    path = tmp_path / "roof.svg"
    plot_roofline([H100_SXM, get_machine("a100-80gb"), get_machine("mi300x")], seed_kernels(), str(path))
    text = path.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    # SVG text is kept as text (svg.fonttype = none), so the labels are searchable
    for label in ("ridge 295 FLOP/B", "flash attention T=4096", "decode B=1 ", "MI300X", "A100 80GB SXM"):
        assert label in text


def test_layer_bar_chart(tmp_path):
    path = tmp_path / "layer.png"
    plot_layer(layer_report(tokens=128), str(path))
    assert path.stat().st_size > 30_000


def _label_boxes(fig, texts):
    """Display-space boxes of the annotations whose text is in ``texts`` (the text alone, not its leader)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return {t.get_text(): Text.get_window_extent(t, renderer) for ax in fig.axes for t in ax.texts if t.get_text() in texts}


def test_a_plot_returns_its_figure_and_writes_only_when_given_a_path(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    monkeypatch.chdir(tmp_path)
    fig = plot_layer(layer_report(tokens=128))
    assert isinstance(fig, Figure) and list(tmp_path.iterdir()) == []
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"  # Jupyter shows it without pyplot
    assert plot_roofline(H100_SXM, seed_kernels(), tmp_path / "r.png") is not None and (tmp_path / "r.png").exists()


def test_plotting_leaves_matplotlibs_global_state_alone():
    # a fresh interpreter: no pyplot, the backend as it was, svg.fonttype untouched by an SVG save
    import subprocess
    import sys

    code = ("import sys, tempfile, matplotlib as mpl\n"
            "before = (mpl.rcParams._get('backend'), mpl.rcParams['svg.fonttype'])\n"
            "from roofline.plots import plot_roofline, seed_kernels\n"
            "plot_roofline('h100-sxm', seed_kernels(), tempfile.mktemp(suffix='.svg'))\n"
            "print('matplotlib.pyplot' in sys.modules, before == (mpl.rcParams._get('backend'), mpl.rcParams['svg.fonttype']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def test_the_seed_kernels_labels_do_not_overlap():
    # the seven kernels: decode matmul B=64 (I = 62.1) and naive attention (62.7) sit on one point,
    # the prefill GEMM (1,638) and flash attention (2,068) side by side on the flat roof
    ks = seed_kernels()
    fig = plot_roofline(H100_SXM, ks)
    boxes = _label_boxes(fig, {f"{k.name} (I={k.intensity:,.1f})" for k in ks})
    assert len(boxes) == 7
    frame = fig.axes[0].get_window_extent(fig.canvas.get_renderer())
    names = sorted(boxes)
    for i, a in enumerate(names):
        assert frame.contains(boxes[a].x0, boxes[a].y0) and frame.contains(boxes[a].x1, boxes[a].y1), a
        for b in names[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)


def test_check_levels_at_one_bandwidth_share_a_label_and_op_labels_do_not_overlap():
    import dataclasses

    from roofline.measure.calibrated import CalibratedModel
    from roofline.diagnose.check_report import Measured, OpRun, build_report
    from roofline.kernels import elementwise_kernel, matmul_kernel
    from roofline.measure.machine_file import parse_profile, render_profile
    from roofline.plots import plot_check
    from test_calibrated import synthetic

    cal = synthetic()
    machine = parse_profile(render_profile(cal), "t")[0]
    # l1d and l2 measured at the same 100 GB/s (as on the README's CPU): one roof, one label naming both
    machine = dataclasses.replace(machine, levels=tuple(dataclasses.replace(lvl, bytes_per_s=100e9) for lvl in machine.levels))
    meta = dict(device="cpu", device_name="Test CPU", profile="p.toml", model="m", config="c", phase="prefill", tokens=8,
                batch=1, attention="naive", dtype="fp32", threads=1, date="d")
    runs = [OpRun(matmul_kernel(64, 64, 64 + 8 * i, 4.0, name=f"matmul {i}"), Measured(1e-4 * (1 + i / 10), 9e-5, 1.1e-4, 5))
            for i in range(4)]
    runs += [OpRun(elementwise_kernel(100_000, 2, 1, bytes_per_elem=4.0, name=f"add {i}"), Measured(2e-4 * (1 + i / 10), 1.8e-4,
                                                                                                     2.2e-4, 5)) for i in range(3)]
    report = build_report(runs, machine, CalibratedModel(cal), **meta)
    fig = plot_check(report)
    # named once, in the legend (at their knees two roofs' labels printed into each other)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert [t for t in legend if "l1d" in t or "l2" in t] == ["cache roof: l1d (0.0625 MiB), l2 (1 MiB) 100 GB/s"]
    assert not [t.get_text() for t in fig.axes[0].texts if "GB/s" in t.get_text()]
    labels = {f"{op.name} {op.roof_fraction:.0%}" for op in report.ops}
    boxes = _label_boxes(fig, labels)
    assert len(boxes) == 7
    for i, a in enumerate(sorted(boxes)):
        for b in sorted(boxes)[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)


def test_a_profile_figure_label_is_cut_with_its_parentheses_closed():
    """A reviewer read 'mul 512x1024, 512x1024 (stri fp32': a shape cut inside its parenthesis."""
    from roofline.plots.measured import _short

    assert _short("512x1024, 512x1024 (strided)", 24) == "512x1024, 512x1024 (s...)"
    assert _short("64x64", 24) == "64x64" and len(_short("x" * 40, 28)) == 28


def test_a_sweeps_points_that_do_not_fit_are_hollow():
    """Llama 3 8B at context 4,096: 16.1 GB of weights and 537 MB of KV per sequence (32 layers x
    2 x 8 x 128 x 2 B x 4,096) fit 85.5 GB up to batch 129, so batches 256 and 512 do not: the
    table says 'no', and the figure draws those two points hollow and says so in its title."""
    from roofline.plan.sweep import sweep
    from roofline.plots import plot_sweep

    result = sweep("llama3-8b", "h100-sxm", over="batch", values=[1, 64, 256, 512])
    assert list(result.series[0].fits) == [True, True, False, False]
    fig = plot_sweep(result)
    ax = fig.axes[0]
    hollow = [c for c in ax.collections if len(c.get_facecolors()) and (c.get_facecolors()[:, :3] == 1.0).all()]
    assert len(hollow) == 1 and len(hollow[0].get_offsets()) == 2
    assert "hollow: needs more memory than one GPU has" in fig._suptitle.get_text()
    full = plot_sweep(sweep("llama3-8b", "h100-sxm", over="batch", values=[1, 64]))
    assert "hollow" not in full._suptitle.get_text()
