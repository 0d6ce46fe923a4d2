"""Collective latency by link (data/links.toml): every figure cites a source; a link without one
is costed by bandwidth alone and the note says so."""

import math

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


# -- the measured all-reduce table ([all_reduce.nvlink]: sglang PR #2904, H100) -------------------

def test_the_all_reduce_table_is_the_published_one():
    """sglang PR #2904's 'custom allreduce' table (ms, TP 2/4/8, 512 to 1,048,576 fp32 elements,
    so 2 KiB to 4 MiB): at TP 8, 0.0059 / 0.0057 / 0.0078 / 0.0167 / 0.0221 / 0.0338 ms."""
    from roofline.links import _all_reduce_tables

    tab = _all_reduce_tables()["nvlink"]
    assert list(tab.gpus) == [2, 4, 8] and list(tab.message_bytes) == [4 * n for n in (512, 4096, 32768, 262144,
                                                                                        524288, 1048576)]
    assert tab.source in _table()[1] and tab.link_bytes_per_s == 450e9
    # rows are made non-decreasing: TP 8's 5.9 us at 2 KiB holds at 16 KiB (5.7 measured)
    assert list(tab.seconds[2]) == pytest.approx([5.9e-6, 5.9e-6, 7.8e-6, 16.7e-6, 22.1e-6, 33.8e-6])


def test_an_all_reduce_reads_the_table_by_gpus_and_size():
    from roofline.links import all_reduce_s

    bw, e_m = 450e9, 0.85
    assert all_reduce_s("nvlink", 8, 4 * 1048576, bw, e_m) == pytest.approx(33.8e-6)  # a measured point
    assert all_reduce_s("nvlink", 2, 4 * 512, bw, e_m) == pytest.approx(3.7e-6)
    assert all_reduce_s("nvlink", 8, 100, bw, e_m) == pytest.approx(5.9e-6)  # below 2 KiB: the smallest's time
    # halfway in log size between 1 MiB (16.7 us) and 2 MiB (22.1 us) at 8 GPUs: sqrt(2) MiB -> 19.4 us
    assert all_reduce_s("nvlink", 8, 2**20 * 2**0.5, bw, e_m) == pytest.approx((16.7e-6 + 22.1e-6) / 2)
    # 6 GPUs: halfway in log GPU count between 4 and 8 would be 4 sqrt(2); 6 is log2(6) - 2 = 0.585 of the way
    f = math.log(6 / 4) / math.log(2)
    assert all_reduce_s("nvlink", 6, 4 * 1048576, bw, e_m) == pytest.approx(31.1e-6 + f * (33.8e-6 - 31.1e-6))
    # past 4 MiB: the 4 MiB time plus the ring's extra 2 x 7/8 x 4 MiB at 0.85 x 450 GB/s
    assert all_reduce_s("nvlink", 8, 8 * 2**20, bw, e_m) == pytest.approx(33.8e-6 + 1.75 * 4 * 2**20 / (0.85 * 450e9))
    assert all_reduce_s("nvlink", 16, 4 * 1048576, bw, e_m) == pytest.approx(33.8e-6)  # past 8 GPUs: the 8-GPU row
    # the times include the call's launch (measured without CUDA graphs): the cost model's is taken off
    assert all_reduce_s("nvlink", 8, 4 * 1048576, bw, e_m, launch_s=3e-6) == pytest.approx(30.8e-6)
    # another NVLink generation (B200: 900 GB/s): the part above the smallest message's 5.9 us halves
    assert all_reduce_s("nvlink", 8, 4 * 1048576, 900e9, e_m) == pytest.approx(5.9e-6 + (33.8e-6 - 5.9e-6) / 2)
    # another link, or one GPU: no table
    assert all_reduce_s("infiniband", 8, 4096, 50e9, e_m) is None and all_reduce_s("nvlink", 1, 4096, bw, e_m) is None


def test_the_cost_model_charges_the_measured_all_reduce_less_its_own_launch():
    """An 8-way all-reduce of 2M bf16 elements (4 MiB), seed cost model (launch 3 us, counted apart):
    on an H100 (NVLink 4) the measured 33.8 us less the launch, 30.8 us, plus the 3 us launch;
    on a B200 (NVLink 5, 900 GB/s per direction) 5.9 + (33.8 - 5.9) / 2 - 3 = 16.85 us, above its
    bytes at 0.85 x 900 GB/s (9.6 us). The notes of a TP serving step name the table, and the
    fixed latency as the other collectives'."""
    from roofline.cost import seed_cost_model
    from roofline.kernels import all_reduce_kernel
    from roofline.machines import get_machine

    k = all_reduce_kernel(2 * 2**20, 8, "nvlink", 2.0)
    assert k.shape == ("all-reduce", 8, 4 * 2**20)
    cm = seed_cost_model()
    h100, b200 = get_machine("h100-sxm"), get_machine("b200")
    assert h100.link("nvlink") == 450e9 and b200.link("nvlink") == 900e9
    h = cm.predict_op(k, h100)
    assert h.memory_s == pytest.approx(30.8e-6) and h.time_s == pytest.approx(33.8e-6)
    assert 1.75 * 4 * 2**20 / (0.85 * 900e9) < 16.85e-6
    assert cm.predict_op(k, b200).memory_s == pytest.approx(5.9e-6 + (33.8e-6 - 5.9e-6) / 2 - 3e-6)
    from roofline.plan.step import StepCost

    notes = " ".join(StepCost("llama3-70b", "h100-sxm", tensor_parallel=8).notes())
    assert "measured times by GPU count" in notes and "sglang" in notes.lower() and "other collectives over nvlink" in notes
