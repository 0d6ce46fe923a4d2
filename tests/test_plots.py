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
