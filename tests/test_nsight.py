"""roofline nsight: ncu --csv exports (--page raw and --page details) and nsys cuda_gpu_kern_sum CSVs
read, checked and put against the roofline. Expected values are worked out by hand in the comments.

Where the column names come from: the ncu page names ("raw", "details") and --csv are in NVIDIA's
Nsight Compute CLI guide (docs.nvidia.com/nsight-compute/NsightComputeCli); the header lines below
are written the way ncu and nsys write them ("ID","Process ID",...,"Kernel Name",... then metric
columns and a units row for --page raw; ...,"Section Name","Metric Name","Metric Unit","Metric Value"
for --page details; "Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)",
"Max (ns)","StdDev (ns)","Name" for nsys stats --report cuda_gpu_kern_sum --format csv, nanoseconds
by default per NVIDIA's Nsight Systems Analysis Guide). Metric names are ncu's:
gpu__time_duration.sum, dram__bytes_read.sum / dram__bytes_write.sum / dram__bytes.sum,
sm__sass_thread_inst_executed_op_{f,d,h}{fma,add,mul}_pred_on.sum, sm__ops_path_tensor_src_*_dst_*.
"""

import json

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.machines import Machine
from roofline.trace.nsight_files import load_ncu_csv, load_nsys_kernel_summary, parse_value, unit_scale
from roofline.trace.nsight import measured_kernel, nsight_report

# A machine with round numbers: 1 TFLOP/s fp32, 0.5 fp64, 4 fp16, 8 bf16; 100 GB/s.
M = Machine("test gpu", 1e12, 1e11, default_dtype="fp32",
            peaks=(("fp64", 5e11), ("fp32", 1e12), ("fp16", 4e12), ("bf16", 8e12)), sm_count=10)

RAW_HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
            '"Device","CC","dram__bytes.sum","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum",'
            '"sm__ops_path_tensor_src_bf16_dst_fp32.sum",'
            '"sm__sass_thread_inst_executed_op_fadd_pred_on.sum","sm__sass_thread_inst_executed_op_ffma_pred_on.sum",'
            '"sm__sass_thread_inst_executed_op_fmul_pred_on.sum","sm__sass_thread_inst_executed_op_hadd_pred_on.sum",'
            '"sm__sass_thread_inst_executed_op_hfma_pred_on.sum","sm__sass_thread_inst_executed_op_hmul_pred_on.sum"')
RAW_UNITS = '"","","","","","","","","","","","Mbyte","byte","byte","nsecond","","inst","inst","inst","inst","inst","inst"'
# axpy: 4,600 ns; 60,000 + 40,000 = 100,000 bytes; ffma 1e6, fadd 2e5, fmul 1e5.
AXPY = ('"0","4242","app","node1","void axpy<float>(int, float, float const*, float*)","1","7","(256, 1, 1)",'
        '"(4096, 1, 1)","0","9.0","","60,000","40,000","4,600","","200,000","1,000,000","100,000","","",""')
# hgemm: 2,000,000 ns; 1 Mbyte = 1e6 bytes; hfma 1e9, hadd 0, hmul 0; bf16 tensor ops 8e9.
HGEMM = ('"1","4242","app","node1","ampere_h16816gemm_128x128","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0",'
         '"1","","","2,000,000","8e9","","","","0","1e9","0"')
# copy: 2,500 ns; 0.2 Mbyte = 200,000 bytes; no FLOP metric at all (bytes only).
COPY = ('"2","4242","app","node1","copy_kernel","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0",'
        '"0.2","","","2,500","","","","","","",""')

DETAILS_HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
                '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def details_row(kid, name, section, metric, unit, value):
    return (f'"{kid}","4242","app","node1","{name}","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0",'
            f'"{section}","{metric}","{unit}","{value}"')


DETAILS = [
    # kernel 0 "scale": Duration 3.5 usecond = 3.5e-6 s (the Speed Of Light label); 0.25 Mbyte = 250,000 bytes;
    # dfma 1e5, dadd 5e4, dmul 5e4 -> fp64 FLOPs 2e5 + 5e4 + 5e4 = 3e5
    details_row(0, "scale", "GPU Speed Of Light Throughput", "Duration", "usecond", "3.50"),
    details_row(0, "scale", "Launch Statistics", "Function Cache Configuration", "", "CachePreferNone"),
    details_row(0, "scale", "Command line profiler metrics", "dram__bytes.sum", "Mbyte", "0.25"),
    details_row(0, "scale", "Command line profiler metrics", "sm__sass_thread_inst_executed_op_dfma_pred_on.sum", "inst", "100,000"),
    details_row(0, "scale", "Command line profiler metrics", "sm__sass_thread_inst_executed_op_dadd_pred_on.sum", "inst", "50,000"),
    details_row(0, "scale", "Command line profiler metrics", "sm__sass_thread_inst_executed_op_dmul_pred_on.sum", "inst", "50,000"),
    # kernel 1 "zero_fill": 1.2 msecond = 1.2e-3 s; 0.064 Gbyte = 6.4e7 bytes; no FLOP metric: bytes only
    details_row(1, "zero_fill", "Command line profiler metrics", "gpu__time_duration.sum", "msecond", "1.2"),
    details_row(1, "zero_fill", "Command line profiler metrics", "dram__bytes.sum", "Gbyte", "0.064"),
]

NSYS_HEAD = '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"'
NSYS_ROWS = [
    '"25.0","100","1","100.0","100.0","100","100","0.0","small_kernel"',
    '"75.0","300","3","100.0","100.0","90","110","10.0","big_kernel(float*, int)"',
]


def write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(p)


@pytest.fixture
def raw(tmp_path):
    return write(tmp_path, "raw.csv", ["==PROF== Connected to process 4242", RAW_HEAD, RAW_UNITS, AXPY, HGEMM, COPY,
                                       "==PROF== Disconnected from process 4242"])


@pytest.fixture
def details(tmp_path):
    return write(tmp_path, "details.csv", [DETAILS_HEAD, *DETAILS])


@pytest.fixture
def nsys(tmp_path):
    return write(tmp_path, "kern_sum.csv", [NSYS_HEAD, *NSYS_ROWS])


# -- reading -----------------------------------------------------------------------------------


def test_raw_page_kernels(raw):
    ks = {k.id: k for k in load_ncu_csv(raw)}
    axpy = ks["0"]
    assert axpy.name.startswith("void axpy<float>(int, float")
    assert axpy.duration_s == pytest.approx(4.6e-6)  # 4,600 ns
    assert axpy.dram_bytes == pytest.approx(1e5)  # 60,000 + 40,000
    assert axpy.flops == (("fp32", pytest.approx(2.3e6)),)  # 2 * 1e6 + 2e5 + 1e5
    hgemm = ks["1"]
    assert hgemm.duration_s == pytest.approx(2e-3) and hgemm.dram_bytes == pytest.approx(1e6)  # 1 Mbyte = 1e6 B
    # bf16 tensor ops 8e9; fp16: 2 * 1e9 + 0 + 0 = 2e9
    assert dict(hgemm.flops) == {"bf16": pytest.approx(8e9), "fp16": pytest.approx(2e9)}
    copy = ks["2"]
    assert copy.flops is None and copy.bytes_only and copy.total_flops is None  # bytes only, never zero
    assert copy.dram_bytes == pytest.approx(2e5) and copy.duration_s == pytest.approx(2.5e-6)


def test_details_page_kernels(details):
    scale, fill = load_ncu_csv(details)
    assert scale.duration_s == pytest.approx(3.5e-6)  # 3.50 usecond
    assert scale.dram_bytes == pytest.approx(2.5e5)  # 0.25 Mbyte, K/M = 1000
    assert scale.flops == (("fp64", pytest.approx(3e5)),)  # 2 * 1e5 + 5e4 + 5e4
    assert fill.duration_s == pytest.approx(1.2e-3) and fill.dram_bytes == pytest.approx(6.4e7) and fill.flops is None


def test_nsys_summary(nsys, tmp_path):
    big, small = load_nsys_kernel_summary(nsys)  # longest first
    assert big.name == "big_kernel(float*, int)" and big.instances == 3
    assert big.total_s == pytest.approx(300e-9) and big.min_s == pytest.approx(90e-9) and big.stddev_s == pytest.approx(1e-8)
    assert small.total_s == pytest.approx(100e-9) and small.time_pct == 25.0
    # older nsys (gpukernsum): "Time(%)", "Average", no median; a title line and thousands separators
    old = write(tmp_path, "old.csv", ["CUDA Kernel Statistics:", "",
                                      '"Time(%)","Total Time (ns)","Instances","Average","Minimum","Maximum","Name"',
                                      '58.5,"5,850,000",50,"117,000.0",100000,130000,"void k<double>(double*)"'])
    (k,) = load_nsys_kernel_summary(old)
    assert k.total_s == pytest.approx(5.85e-3) and k.avg_s == pytest.approx(1.17e-4)  # 117,000 ns
    assert k.med_s is None and k.stddev_s is None and k.time_pct == 58.5


def test_units_and_numbers():
    assert unit_scale("nsecond", "time") == 1e-9 and unit_scale("msecond", "time") == 1e-3
    assert unit_scale("Kbyte", "bytes") == 1e3 and unit_scale("Gbyte", "bytes") == 1e9  # ncu: K = 1000
    assert unit_scale("KiB", "bytes") == 1024 and unit_scale("byte", "bytes") == 1
    assert unit_scale("Minst", "count") == 1e6 and unit_scale("inst", "count") == 1
    assert unit_scale("byte", "time") is None and unit_scale("%", "count") is None
    assert parse_value("1,234.5") == 1234.5 and parse_value("1e9") == 1e9 and parse_value("n/a") is None
    for bad in ("9,00", "1,23,456", "abc", "nan", "inf", "1e999", "١٢"):  # a decimal comma is not guessed
        with pytest.raises(ValueError):
            parse_value(bad)


# -- against the roofline ----------------------------------------------------------------------


def test_report_on_a_round_machine(raw):
    rep = nsight_report(raw, M)
    by = {k.id: k for k in rep.kernels}
    axpy = by["0"]
    # compute 2.3e6 / 1e12 = 2.3e-6 s; memory 1e5 / 1e11 = 1e-6 s -> compute-bound at 2.3 us
    assert axpy.bound == "compute" and axpy.dtype == "fp32"
    assert axpy.roofline_s == pytest.approx(2.3e-6)
    assert axpy.speed_of_light == pytest.approx(0.5)  # 2.3 / 4.6
    assert axpy.lost_s == pytest.approx(2.3e-6)
    assert axpy.intensity == pytest.approx(23.0)  # 2.3e6 / 1e5
    assert axpy.achieved_flops_per_s == pytest.approx(5e11)  # 2.3e6 / 4.6e-6
    assert axpy.achieved_bytes_per_s == pytest.approx(1e5 / 4.6e-6)
    hgemm = by["1"]
    # fp16 2e9 / 4e12 = 0.5 ms; bf16 8e9 / 8e12 = 1 ms (the larger: the bound); memory 1e6 / 1e11 = 10 us
    assert hgemm.dtype == "bf16" and hgemm.bound == "compute" and hgemm.roofline_s == pytest.approx(1e-3)
    assert hgemm.flops == pytest.approx(1e10) and hgemm.lost_s == pytest.approx(1e-3)  # 2 ms - 1 ms
    copy = by["2"]
    # bytes only: 2e5 / 1e11 = 2 us against 2.5 us measured
    assert copy.bound == "bytes only" and copy.flops is None and copy.intensity is None
    assert copy.achieved_flops_per_s is None and copy.roofline_s == pytest.approx(2e-6)
    assert copy.speed_of_light == pytest.approx(0.8)
    # ranked by time lost: 1 ms, 2.3 us, 0.5 us
    assert [k.id for k in rep.kernels] == ["1", "0", "2"]
    assert rep.measured_s == pytest.approx(2e-3 + 4.6e-6 + 2.5e-6) and not rep.problems
    assert len(rep.bytes_only) == 1


def test_the_reports_frame_their_kernels(raw, nsys):
    pytest.importorskip("pandas")
    rep = nsight_report(raw, M)
    frame = rep.to_pandas()  # a row per kernel launch (AXPY, HGEMM, COPY), ranked by time lost
    assert list(frame["id"]) == ["1", "0", "2"] and frame.attrs["measured_s"] == pytest.approx(rep.measured_s)
    assert rep._repr_html_().count("<tr>") >= 1 + 3
    summary = nsight_report(nsys, M)
    assert list(summary.to_pandas()["instances"]) == [3, 1]  # big_kernel's 3 launches first, small_kernel's 1


def test_one_dtype_for_every_flop(raw):
    hgemm = next(k for k in load_ncu_csv(raw) if k.id == "1")
    # all 1e10 FLOPs at the fp16 peak: 1e10 / 4e12 = 2.5 ms > 2 ms measured: impossible, and said so
    row = measured_kernel(hgemm, M, "fp16")
    assert row.roofline_s == pytest.approx(2.5e-3) and row.problem and "impossible" in row.problem


def test_a_precision_the_machine_lacks_is_one_line(details):
    no_fp64 = Machine("no fp64", 1e12, 1e11, default_dtype="fp32", peaks=(("fp32", 1e12),))
    with pytest.raises(RooflineError, match="details.csv.*fp64") as exc:
        nsight_report(details, no_fp64)
    assert "\n" not in str(exc.value)


def test_outputs_are_finite_and_complete(raw):
    rep = nsight_report(raw, M)
    d = json.loads(rep.to_json())
    assert d["bytes_only"] == 1 and len(d["kernels"]) == 3
    copy = next(k for k in d["kernels"] if k["id"] == "2")
    assert copy["flops"] is None and copy["intensity"] is None and copy["bound"] == "bytes only"
    lines = rep.to_csv().splitlines()
    assert lines[0].startswith("id,name,dtype,flops,bytes,intensity,bound,roofline_s,measured_s") and len(lines) == 4
    table = rep.to_table()
    assert "axpy" in table and "bytes only" in table and "% of roof" in table


# -- malformed files: one line naming the file -------------------------------------------------

BAD = {
    "empty.csv": [""],
    "wrong_header.csv": ['"a","b","c"', '"1","2","3"'],
    "no_units_row.csv": [RAW_HEAD, AXPY],
    "no_kernels.csv": [RAW_HEAD, RAW_UNITS],
    "no_time.csv": [RAW_HEAD.replace('"gpu__time_duration.sum"', '"gpu__cycles_elapsed.max"'), RAW_UNITS, AXPY],
    "no_bytes.csv": [DETAILS_HEAD, details_row(0, "k", "s", "gpu__time_duration.sum", "nsecond", "100")],
    "not_a_number.csv": [RAW_HEAD, RAW_UNITS, AXPY.replace('"4,600"', '"fast"')],
    "decimal_comma.csv": [RAW_HEAD, RAW_UNITS, AXPY.replace('"4,600"', '"4,6"')],
    "bad_unit.csv": [RAW_HEAD, RAW_UNITS.replace('"nsecond"', '"cycle"'), AXPY],
    "negative.csv": [RAW_HEAD, RAW_UNITS, AXPY.replace('"4,600"', '"-4600"')],
    "zero_time.csv": [RAW_HEAD, RAW_UNITS, AXPY.replace('"4,600"', '"0"')],
    "partial_flops.csv": [DETAILS_HEAD, details_row(0, "k", "s", "gpu__time_duration.sum", "nsecond", "100"),
                          details_row(0, "k", "s", "dram__bytes.sum", "byte", "100"),
                          details_row(0, "k", "s", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "10")],
    "short_row.csv": [RAW_HEAD, RAW_UNITS, '"0","4242","app"'],
    "nsys_bad_instances.csv": [NSYS_HEAD, '"100.0","100","1.5","66.7","66.7","60","70","1.0","k"'],
    "nsys_no_rows.csv": [NSYS_HEAD],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_malformed_files_are_one_line_naming_the_file(tmp_path, name):
    path = write(tmp_path, name, BAD[name])
    with pytest.raises(RooflineError) as exc:
        nsight_report(path, M)
    msg = str(exc.value)
    assert name in msg and "\n" not in msg


def test_the_wrong_reader_says_which(raw, nsys):
    with pytest.raises(RooflineError, match="nsys kernel summary"):
        load_ncu_csv(nsys)
    with pytest.raises(RooflineError, match="ncu CSV export"):
        load_nsys_kernel_summary(raw)


@pytest.mark.parametrize("name,words", [
    ("no_units_row.csv", "units row"), ("no_time.csv", "gpu__time_duration.sum"), ("no_bytes.csv", "dram__bytes"),
    ("not_a_number.csv", "'fast' is not a number"), ("partial_flops.csv", "fadd"), ("wrong_header.csv", "ncu CSV export"),
    ("empty.csv", "is empty"), ("bad_unit.csv", "'cycle'"), ("decimal_comma.csv", "'4,6' is not a number"),
])
def test_the_refusals_name_what_is_wrong(tmp_path, name, words):
    with pytest.raises(RooflineError, match=words):
        nsight_report(write(tmp_path, name, BAD[name]), M)


# -- the command -------------------------------------------------------------------------------


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_table(capsys, raw):
    code, out, err = run(capsys, "nsight", raw, "--machine", "h100-sxm")
    assert code == 0 and err == ""
    assert "ampere_h16816gemm_128x128" in out and "copy_kernel" in out and "bytes only" in out


def test_cli_json_on_a_preset(capsys, raw):
    code, out, _ = run(capsys, "nsight", raw, "--machine", "h100-sxm", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["machine"] == "h100-sxm" and d["source"] == "ncu --page raw"
    axpy = next(k for k in d["kernels"] if k["id"] == "0")
    # H100 SXM preset: fp32 67 TFLOP/s, 3.35 TB/s. compute 2.3e6 / 67e12 = 3.43e-8 s; memory 1e5 / 3.35e12 = 2.99e-8 s
    assert axpy["bound"] == "compute" and axpy["roofline_s"] == pytest.approx(2.3e6 / 67e12)


def test_cli_csv_and_limit(capsys, raw):
    code, out, _ = run(capsys, "nsight", raw, "--csv")
    assert code == 0 and len(out.splitlines()) == 4
    code, out, _ = run(capsys, "nsight", raw, "--limit", "1")
    assert code == 0 and "2 more kernels" in out


def test_cli_plot(capsys, raw, tmp_path):
    png = tmp_path / "roof.png"
    code, out, _ = run(capsys, "nsight", raw, "-o", str(png))
    assert code == 0 and f"wrote {png}" in out and "(1 kernel without FLOPs" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_nsys(capsys, nsys, tmp_path):
    code, out, _ = run(capsys, "nsight", nsys)
    assert code == 0 and "big_kernel" in out and "75.0%" in out and "times only" in out  # 300 of 400 ns
    code, out, _ = run(capsys, "nsight", nsys, "--json")
    d = json.loads(out)
    assert d["kernels"][0]["share"] == pytest.approx(0.75) and d["total_s"] == pytest.approx(4e-7)
    code, _, err = run(capsys, "nsight", nsys, "-o", str(tmp_path / "x.png"))
    assert code == 2 and err.startswith("roofline: error:") and "nsys kernel summary" in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "nsight", nsys, "--dtype", "bf16")
    assert code == 2 and "--dtype" in err


@pytest.mark.parametrize("argv,words", [
    (["--dtype", "fp7"], "fp7"),
    (["--dtype", "fp8", "--machine", "a100-80gb"], "--dtype"),
    (["-o", "plot.txt"], "-o/--output"),
    (["--limit", "-1"], "--limit"),
])
def test_cli_bad_flags(capsys, raw, argv, words):
    code, _, err = run(capsys, "nsight", raw, *argv)
    assert code == 2 and err.startswith("roofline: error:") and words in err and len(err.splitlines()) == 1


def test_cli_bad_files(capsys, tmp_path):
    for name in ("wrong_header.csv", "no_units_row.csv"):
        code, _, err = run(capsys, "nsight", write(tmp_path, name, BAD[name]))
        assert code == 2 and name in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "nsight", str(tmp_path / "missing.csv"))
    assert code == 2 and "missing.csv" in err


def test_every_hostile_file_keeps_the_contract(tmp_path):
    """The suite's hostile files (not UTF-8, a FIFO, /dev/zero, a folder, ...) through `nsight`."""
    fh = pytest.importorskip("fuzz_harness")
    for f in fh.hostile_files(tmp_path / "in"):
        why = fh.run_case(["nsight", f])
        assert why is None, f"roofline nsight {f!r}: {why}"


@pytest.mark.parametrize("row, words", [
    # Avg 120 ns with Max 110 ns: no set of launches has a mean above its largest
    ('"75.0","360","3","120.0","100.0","90","110","10.0","k"', "Avg 0.120 us is above Max 0.110 us"),
    ('"75.0","300","3","100.0","80.0","90","110","10.0","k"', "Med 0.080 us is below Min 0.090 us"),
    ('"75.0","300","3","100.0","100.0","120","110","10.0","k"', "Min 0.120 us is above Max 0.110 us"),
    # 3 launches of 100 ns on average are 300 ns, not 500
    ('"75.0","500","3","100.0","100.0","90","110","10.0","k"', "Avg 0.100 us x 3 launches = 0.300 us, but Total Time is 0.500 us"),
    ('"175.0","300","3","100.0","100.0","90","110","10.0","k"', "Time \\(%\\) = '175.0' is out of range \\(0 to 100\\)"),
])
def test_a_summary_row_that_cannot_be_true_is_refused_by_its_line(tmp_path, row, words):
    """A reviewer fed max < avg and a share of 175% and was shown them: each is refused, naming the
    file's line and the figures that disagree."""
    path = write(tmp_path, "kern_sum.csv", [NSYS_HEAD, NSYS_ROWS[0], row])
    with pytest.raises(RooflineError, match=words) as exc:
        load_nsys_kernel_summary(path)
    assert "kern_sum.csv' line 3: " in str(exc.value)


def test_a_time_share_column_that_disagrees_is_said_not_replaced_silently(tmp_path, capsys):
    """The shares shown are Total Time over the listed total; where the file's own Time (%) says
    otherwise (rows cut from a longer summary: 25% + 40% = 65%), the report says so in text, JSON
    and beside the CSV."""
    cut = write(tmp_path, "cut.csv", [NSYS_HEAD, NSYS_ROWS[0], NSYS_ROWS[1].replace('"75.0"', '"40.0"')])
    code, out, _ = run(capsys, "nsight", cut)
    assert code == 0 and "sums to 65.0%, not 100%" in out
    code, out, _ = run(capsys, "nsight", cut, "--json")
    assert any("sums to 65.0%" in n for n in json.loads(out)["notes"])
    code, out, err = run(capsys, "nsight", cut, "--csv")
    assert "sums to 65.0%" in err and "sums" not in out
    code, out, _ = run(capsys, "nsight", write(tmp_path, "whole.csv", [NSYS_HEAD, *NSYS_ROWS]))
    assert code == 0 and "Time (%)" not in out  # 25% and 75% are the listed shares: nothing to say
    # the shares sum to 100 but not row by row: 50% given for the kernel that is 25% of the total
    swapped = write(tmp_path, "swapped.csv", [NSYS_HEAD, NSYS_ROWS[0].replace('"25.0"', '"50.0"'),
                                               NSYS_ROWS[1].replace('"75.0"', '"50.0"')])
    code, out, _ = run(capsys, "nsight", swapped)
    assert "disagrees with its Total Time for 2 kernel(s)" in out and "50.0% given, 75.0% of the listed total" in out


def test_a_bytes_only_kernel_names_no_peak_and_cuda_core_math_gets_no_tensor_core_advice(raw, capsys):
    """A reviewer read "bf16" as the peak of a copy with no FLOP metrics, and "tensor cores, x8
    shapes" for an fp32 axpy whose FLOPs are SASS instructions: the copy has no peak ("-", null in
    JSON); the axpy (2.3 MFLOP / 100 kB = 23 FLOP/B, past H100's fp32 ridge of 67e12 / 3.35e12 = 20)
    is compute-bound on CUDA cores and told so; the HGEMM, with tensor-pipe FLOPs, keeps the
    tensor-core advice."""
    code, out, _ = run(capsys, "nsight", raw, "--machine", "h100-sxm", "--json")
    ks = {k["id"]: k for k in json.loads(out)["kernels"]}
    assert ks["2"]["bound"] == "bytes only" and ks["2"]["dtype"] is None
    assert ks["0"]["bound"] == "compute" and ks["0"]["advice"].startswith("CUDA-core math")
    assert ks["1"]["advice"] == "tensor cores, x8 shapes, full waves"
    code, out, _ = run(capsys, "nsight", raw, "--machine", "h100-sxm")
    copy = next(line for line in out.splitlines() if "copy_kernel" in line)
    assert copy.split()[2] == "-" and "bf16" not in copy
    assert "1 kernel; collect" in out


def test_an_older_summary_in_microseconds_reads_its_unitless_columns_in_the_totals_unit(tmp_path, capsys):
    """nsys stats --timeunit usec on an older release writes "Total Time (us)" beside a bare
    "Average": that column is microseconds too (a reviewer's file was refused, its average read as
    nanoseconds: 3 x 0.2 us against 600.5 us); and an nsys summary refuses the roofline's what-if
    scales, as it refuses -o and --dtype (times only)."""
    path = write(tmp_path, "old_us.csv", ['"Time(%)","Total Time (us)","Instances","Average","Minimum","Maximum","Name"',
                                          '100.0,"600.5",3,"200.2",190,210,"k"'])
    (k,) = load_nsys_kernel_summary(path)
    assert k.avg_s == pytest.approx(200.2e-6) and k.min_s == pytest.approx(190e-6) and k.max_s == pytest.approx(210e-6)
    code, out, _ = run(capsys, "nsight", path)
    assert code == 0 and "1 kernel, 600 us of GPU time" in out
    code, _, err = run(capsys, "nsight", path, "--compute-scale", "2")
    assert code == 2 and "--compute-scale does not apply" in err


def test_findings_are_listed_as_far_as_the_table_is(raw):
    """Five kernels each measured faster than their bound print five '!!' findings; under --limit 2 the
    report lists two and counts the other three, as its table does (a 20,000-kernel export printed one
    line a kernel)."""
    import dataclasses

    from roofline.trace.nsight import NcuReport

    hgemm = next(k for k in load_ncu_csv(raw) if k.id == "1")
    row = measured_kernel(hgemm, M, "fp16")  # 1e10 FLOPs at 4e12/s: 2.5 ms bound, 2 ms measured
    rows = tuple(dataclasses.replace(row, id=str(i)) for i in range(5))
    rep = NcuReport("x.csv", "raw", "m", "fp16", rows)
    assert sum(line.startswith("!! kernel") for line in rep.to_table(None).splitlines()) == 5
    short = rep.to_table(2).splitlines()
    assert sum(line.startswith("!! kernel") for line in short) == 2
    assert "!! ... 3 more kernels with such a finding" in short[-1]
