"""Collective latency by link (data/links.toml): every figure cites a source; a link without one
is costed by bandwidth alone and the note says so."""

import pytest

from roofline.links import _table, collective_latency_s, latency_note


def test_every_latency_cites_a_source_and_is_microseconds():
    table, sources = _table()
    assert table, "no latencies"
    for name, (value, source, note) in table.items():
        assert source in sources and note
        assert 1e-7 < value < 1e-3, name  # a collective's fixed cost is microseconds, not ms or ns


def test_latencies_are_the_published_figures():
    assert collective_latency_s("nvlink") == pytest.approx(6e-6)  # NCCL #1259: "approximately 6us", 2 H100s, NVLS
    assert collective_latency_s("infiniband") == pytest.approx(46e-6)  # NCCL #1244: 46-48 us, 16 H20s over IB NDR
    assert collective_latency_s(None) == 0.0 and collective_latency_s("pcie") == 0.0
    assert "bandwidth alone" in latency_note("pcie") and "6 us" in latency_note("nvlink")
