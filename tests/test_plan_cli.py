"""`roofline decode`, `train`, `memory`, `sweep`: the --json contract, the seed's figures through
the command line, tables, figures, and bad input (one line naming the value, exit 2)."""

import contextlib
import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.cli import main

TRAIN_KEYS = {"training_flops", "seconds", "days", "gpu_hours", "mfu", "gpus"}
ROW_KEYS = {"batch", "step_s", "tokens_per_s", "intensity", "bound"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_train_json_contract_and_seed_exercise_4(capsys):
    code, out, _ = run(capsys, "train", "--model", "llama3-8b", "--tokens", "15e12", "--gpus", "1024", "--mfu", "0.4", "--json")
    assert code == 0
    d = json.loads(out)
    assert TRAIN_KEYS <= set(d)
    # 6 x 8.03e9 x 15e12 = 7.2e23 FLOPs; / (1024 x 989e12 x 0.4) = 20.6 days (seed 000, exercise 4)
    assert round(d["training_flops"] / 1e23, 1) == 7.2 and round(d["days"], 1) == 20.6
    assert d["gpus"] == 1024 and d["mfu"] == pytest.approx(0.4)
    assert d["gpu_hours"] == pytest.approx(d["seconds"] * 1024 / 3600)
    assert d["communication"][0]["bound"] == "link"


def test_train_recompute_at_40_percent_hfu_is_27_5_days(capsys):
    code, out, _ = run(capsys, "train", "--tokens", "15e12", "--gpus", "1024", "--recompute", "full", "--hfu", "0.4", "--json")
    d = json.loads(out)
    assert code == 0 and round(d["days"], 1) == 27.5 and d["mfu"] == pytest.approx(0.3)  # 20.6 x 8/6; 0.4 x 6/8


def test_train_table_and_cost(capsys):
    code, out, _ = run(capsys, "train", "--model", "llama3-8b", "--tokens", "15e12", "--gpus", "1024", "--mfu", "0.4",
                       "--price", "2")
    assert code == 0
    assert "20.6 days" in out and "7.23e+23" in out and "GPU-hours" in out and "MFU" in out and "HFU" in out
    assert "$1,014,947" in out  # 1,784,087 s x 1,024 / 3,600 = 507,474 GPU-hours x $2
    assert "gradient all-reduce (infiniband)" in out and "link" in out


def test_decode_json_contract(capsys):
    code, out, _ = run(capsys, "decode", "--model", "llama3-8b", "--machine", "h100-sxm", "--json")
    assert code == 0
    d = json.loads(out)
    assert {"rows", "compute_bound_batch", "max_batch_in_memory"} <= set(d)
    assert [r["batch"] for r in d["rows"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert all(ROW_KEYS <= set(r) for r in d["rows"])
    assert all(r["bound"] in ("memory", "compute", "link") for r in d["rows"])
    # (0.9 x 85.52e9 as the driver reports - 16.06e9 of weights - 0.87e9 of a step's activations) / (4,096 x 128 KiB)
    # = 111.8 sequences at the default context 4,096 (test_plan.test_largest_batch_in_memory has the bytes)
    assert d["max_batch_in_memory"] == 111 and d["context"] == 4096
    assert 243 <= d["compute_bound_batch"] <= 300  # ridge 295 x e_c 0.70 / e_m 0.85 = 243, plus activations
    steps = [r["tokens_per_s"] for r in d["rows"]]
    assert steps == sorted(steps)
    # batch 1: 15.0 GB of matmul weights at 0.85 x 3.35 TB/s = 5.27 ms, plus KV and launches
    assert 5.27e-3 < d["rows"][0]["step_s"] < 8e-3


def test_decode_table_plot_and_breakdown(capsys, tmp_path):
    png = tmp_path / "decode.png"
    code, out, _ = run(capsys, "decode", "--model", "llama3-8b", "--machine", "h100-sxm", "-o", str(png))
    assert code == 0
    assert "matmuls turn compute-bound at batch" in out and "largest batch whose weights, KV cache and a step's activations fit" in out
    assert "time to first token" in out and "KV-cache reads overtake weight reads at context 114,512" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run(capsys, "decode", "--model", "llama3-70b", "--tp", "8", "--batch", "1,64", "--breakdown", "1")
    assert code == 0 and "TP all-reduce (nvlink) x160" in out and "link-bound" in out


def test_decode_quantised_and_csv(capsys):
    code, out, _ = run(capsys, "decode", "--weights", "int4", "--kv-cache", "fp8", "--batch", "1,8", "--csv")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("batch,step_s,tokens_per_s,intensity,bound") and len(lines) == 3


def test_memory_json_has_parts_and_total(capsys):
    code, out, _ = run(capsys, "memory", "--model", "llama3-8b", "--context", "8192", "--json")
    d = json.loads(out)
    assert code == 0 and d["kv_cache_bytes"] == 2**30  # 8,192 tokens x 128 KiB
    assert d["total_bytes"] == d["weights_bytes"] + d["kv_cache_bytes"] + d["activations_bytes"] and d["fits"] is True
    code, out, _ = run(capsys, "memory", "--mode", "train", "--gpus", "8", "--zero", "3", "--json")
    d = json.loads(out)
    parts = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "output_layer_bytes")
    assert all(p in d for p in parts) and d["total_bytes"] == pytest.approx(sum(d[p] for p in parts))
    assert d["optimizer_bytes"] == pytest.approx(12 * 8_030_261_248 / 8)  # ZeRO 3 over 8 ranks


def test_70b_does_not_fit_one_h100(capsys, tmp_path):
    code, out, _ = run(capsys, "memory", "--model", "llama3-70b", "--machine", "h100-sxm", "-o", str(tmp_path / "m.svg"))
    assert code == 0 and (tmp_path / "m.svg").read_text().lstrip().startswith("<?xml")
    code, out, _ = run(capsys, "memory", "--model", "llama3-70b", "--machine", "h100-sxm", "--json")
    d = json.loads(out)
    # 0.9 of the 85.52 GB the driver reports is 76.97 GB: an engine's share, as serving's; the bf16 weights
    # alone (70,553,706,496, the HF safetensors total of meta-llama/Llama-3.1-70B, x 2 B = 141.1 GB) pass it
    assert code == 0 and d["fits"] is False and d["capacity_bytes"] == pytest.approx(0.9 * 85.52e9, rel=1e-3)
    assert d["weights_bytes"] == 2 * 70_553_706_496 > d["capacity_bytes"]
    assert "--tp 2" in d["verdict"]  # the advice: half the weights a GPU fits


def test_train_plot(capsys, tmp_path):
    png = tmp_path / "train.png"
    code, _, _ = run(capsys, "train", "--tokens", "15e12", "--gpus", "1024", "-o", str(png))
    assert code == 0 and png.stat().st_size > 30_000


@pytest.mark.parametrize("over", ["tokens", "batch", "context", "machines"])
def test_sweep_json_and_plot(capsys, tmp_path, over):
    png = tmp_path / f"{over}.png"
    code, out, err = run(capsys, "sweep", "--over", over, "--machine", "h100-sxm,mi300x", "--json", "-o", str(png))
    assert code == 0
    d = json.loads(out)
    assert d["over"] == over and len(d["rows"]) >= 2
    assert {r["machine"] for r in d["rows"]} == {"h100-sxm", "mi300x"}
    assert png.read_bytes()[:4] == b"\x89PNG" and "wrote" in err


def test_sweep_table_over_tokens_shows_the_memory_bound_share(capsys):
    code, out, _ = run(capsys, "sweep", "--over", "tokens", "--values", "128,8192")
    assert code == 0 and "TTFT ms" in out and "mem-bound" in out and "8,192" in out


def test_sweep_values_ranges():
    from roofline.cli.plan_args import count_list

    values = count_list("--values", ranges=True)
    assert values("1:131072:log:18") == [2**k for k in range(18)]  # ratio 131,072^(1/17) = 2: the powers of two
    assert values("1:10:lin:4") == [1, 4, 7, 10]  # step (10 - 1) / 3 = 3
    assert values("1:4:lin:3") == [1, 3, 4]  # 1, 2.5, 4: the middle rounded half up
    # 100 geometric values 2^(10k / 99), k = 0 .. 99, from 1 to 1,024: whole numbers, each once
    distinct = sorted({math.floor(2 ** (10 * k / 99) + 0.5) for k in range(100)})
    assert values("1:1024:log:100") == distinct and distinct[:3] == [1, 2, 3] and len(distinct) < 100
    assert values("1:1Ki:log:11,3000") == [2**k for k in range(11)] + [3000]  # prefixes; ranges mix with values
    assert values("10:1:lin:4") == [10, 7, 4, 1]  # descending, as asked
    assert values("128, 1024") == [128, 1024]  # the plain list as before


@given(st.integers(1, 10**9), st.integers(1, 10**9), st.integers(2, 400), st.sampled_from(["lin", "log"]))
@settings(max_examples=200, deadline=None)
def test_sweep_value_ranges_keep_their_ends_and_order(start, stop, count, spacing):
    from roofline.cli.plan_args import count_list

    v = count_list("--values", ranges=True)(f"{start}:{stop}:{spacing}:{count}")
    assert v[0] == start and v[-1] == stop and len(v) <= count
    steps = [b - a for a, b in zip(v, v[1:])]
    assert all(d > 0 for d in steps) if stop >= start else all(d < 0 for d in steps)  # each value once, in order
    if spacing == "lin" and abs(stop - start) >= count - 1:  # steps of 1 or more never round onto each other
        assert len(v) == count


def test_sweep_values_from_a_file(capsys, tmp_path):
    path = tmp_path / "sizes.txt"
    path.write_text("# batch sizes\n1\n2, 4  # two on a line\n\n8:32:log:3\n")
    code, out, _ = run(capsys, "sweep", "--over", "batch", "--values", f"@{path}", "--csv")
    assert code == 0 and [line.split(",")[1] for line in out.splitlines()[1:]] == ["1", "2", "4", "8", "16", "32"]
    # 30,000 values as a list: 9 + 90 x 2 + 900 x 3 + 9,000 x 4 + 20,001 x 5 = 138,894 digits and 29,999
    # commas, 168,893 bytes: past what one argument can hold (Linux MAX_ARG_STRLEN, 131,072)
    big = tmp_path / "big.txt"
    big.write_text("\n".join(str(v) for v in range(1, 30_001)))
    assert len(",".join(str(v) for v in range(1, 30_001))) == 168_893
    code, out, _ = run(capsys, "sweep", "--over", "batch", "--values", f"@{big}", "--csv")
    assert code == 0 and len(out.splitlines()) == 1 + 30_000 and out.splitlines()[-1].startswith("h100-sxm,30000,")


@pytest.mark.parametrize("value, words", [
    ("1:131072:log", "range '1:131072:log' must be START:STOP:lin|log:COUNT, e.g. 1:131072:log:18"),
    ("1:10:geo:5", "range '1:10:geo:5': spacing 'geo' must be lin or log"),
    ("0:10:lin:5", "range '0:10:lin:5': start must be greater than 0, got 0"),
    ("1:2e12:log:5", "range '1:2e12:log:5': stop must be at most 1e+12"),
    ("x:10:lin:5", "range 'x:10:lin:5': start: cannot read 'x'"),
    ("1:10:lin:1", "range '1:10:lin:1': count '1' must be a whole number from 2 to 10,000,000"),
    ("1:10:lin:2.5", "range '1:10:lin:2.5': count '2.5' must be a whole number"),
    ("1,2:4:lin", "range '2:4:lin' must be"),
    ("@", "@ needs a file name"),
    ("@no-such-sizes.txt", "@no-such-sizes.txt: 'no-such-sizes.txt' does not exist"),
])
def test_sweep_values_errors_name_the_bad_part(capsys, value, words):
    code, out, err = run(capsys, "sweep", "--over", "batch", "--values", value)
    assert code == 2 and out == "" and err.count("\n") == 1 and f"argument --values: {words}" in err, err


def test_sweep_values_file_errors_name_the_line(capsys, tmp_path):
    bad, empty = tmp_path / "bad.txt", tmp_path / "empty.txt"
    bad.write_text("1\n2  # fine\n2.5\n")
    empty.write_text("# nothing yet\n\n")
    for path, words in ((bad, f"@{bad} line 3: must be a whole number, got 2.5"),
                        (empty, f"@{empty} holds no values"), (tmp_path, "is not a file")):
        code, _, err = run(capsys, "sweep", "--over", "batch", "--values", f"@{path}")
        assert code == 2 and err.count("\n") == 1 and words in err, err


@pytest.mark.parametrize(
    "argv,named",
    [
        (["decode", "--batch", "0,4"], "--batch"),
        (["decode", "--context", "-5"], "--context"),
        (["decode", "--model", "llama3-8b", "--tp", "3"], "--tp 3"),
        (["decode", "--weights", "int3"], "--weights"),
        (["decode", "-o", "plot.txt"], "-o/--output"),
        (["train", "--tokens", "1e12", "--gpus", "8", "--mfu", "1.5"], "--mfu"),
        (["train", "--gpus", "8"], "--tokens"),
        (["train", "--tokens", "1e12", "--gpus", "100", "--tp", "8"], "gpus 100"),
        (["train", "--tokens", "1e12", "--gpus", "8", "--mfu", "0.9", "--recompute", "full"], "HFU"),
        (["memory", "--model", "llama9"], "llama9"),
        (["sweep", "--over", "tokens", "--phase", "decode"], "prefill"),
        (["sweep", "--over", "batch", "--values", "1,x"], "--values"),
        (["sweep", "--over", "batch", "--machine", "h100-sxm,nope"], "nope"),
        (["decode", "--tp", "2", "--tp-link", "foo"], "--tp-link 'foo': the H100 SXM has no such link; it has nvlink, pcie, infiniband"),
        (["decode", "--machine", "mi300x", "--tp", "2", "--tp-link", "nvlink"], "--tp-link 'nvlink': the MI300X has no such link"),
        (["sweep", "--over", "machines", "--tp", "2", "--tp-link", "nvlink"], "it has xgmi, pcie"),
        (["train", "--tokens", "1e12", "--gpus", "64", "--dp-link", "foo"], "--dp-link 'foo'"),
        (["train", "--tokens", "1e12", "--gpus", "64", "--tp", "8", "--tp-link", "ib"], "--tp-link 'ib'"),
        (["train", "--tokens", "1e12", "--gpus", "64", "--pp", "64"], "--pp 64 is more stages than Llama 3 8B's 32 layers"),
        (["train", "--tokens", "1e12", "--gpus", "16", "--tp", "2", "--global-batch", "100000"],
         "--global-batch 100,000 tokens is not a whole number of micro-batches"),
        (["memory", "--mode", "train", "--gpus", "8", "--global-batch", "1000"], "--global-batch 1,000 tokens"),
        (["train", "--tokens", "1e12", "--gpus", "8", "--peak-dtype", "int4"], "--peak-dtype int4: the H100 SXM has no int4 peak"),
        (["decode", "--activations", "int4"], "--activations int4: the H100 SXM has no int4 peak"),
        (["decode", "--machine", "tpu-v4", "--dtype", "fp32"], "--dtype fp32: the TPU v4 has no fp32 peak"),
        (["decode", "--batch", "1e7"], "--batch"),
        (["decode", "--batch", "65537"], "--batch"),
        (["decode", "--context", "1e12"], "--context must be at most"),
        # memory and sweep keep decode's bounds (2^24 = 16,777,216 tokens, batch 65,536): a 1e12 batch was a 1.07e+03 EB plan
        (["memory", "--context", "1e12"], "--context must be at most 16,777,216, got 1e+12"),
        (["memory", "--batch", "65537"], "--batch must be at most 65,536"),
        (["sweep", "--over", "context", "--values", "1024,1e12"], "--values must be at most 16,777,216, got 1e+12 (value 2 of 2)"),
        (["sweep", "--over", "batch", "--values", "1,1e6"], "--values must be at most 65,536, got 1,000,000 (value 2 of 2)"),
        (["sweep", "--over", "batch", "--context", "1e12"], "--context must be at most 16,777,216"),
        (["decode", "--breakdown", "4", "--csv"], "--breakdown"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, named):
    code, out, err = run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("roofline: error:") and named in lines[0]


PLAN_FLAGS = [("decode", "--context"), ("decode", "--batch"), ("decode", "--tp"), ("decode", "--memory-fraction"),
              ("train", "--gpus"), ("train", "--mfu"), ("train", "--seq-len"), ("train", "--price"),
              ("memory", "--context"), ("sweep", "--values")]


@given(st.sampled_from(PLAN_FLAGS), st.one_of(st.text(max_size=10), st.floats(allow_nan=True).map(repr),
                                               st.integers(min_value=-10**15, max_value=10**15).map(str)))
@pytest.mark.fuzz
@settings(max_examples=120, deadline=None)
def test_plan_flags_never_crash(command_flag, value):
    command, flag = command_flag
    argv = [command, "--json", flag, value]
    argv += {"train": ["--tokens", "1e9"] + (["--gpus", "8"] if flag != "--gpus" else []), "sweep": ["--over", "batch"]}.get(command, [])
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (0, 2)
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("roofline: error:")


def test_decode_summary_says_the_link_holds_the_step(capsys):
    code, out, _ = run(capsys, "decode", "--model", "llama3-70b", "--tp", "8", "--tp-link", "pcie", "--context", "16",
                       "--batch", "1,1024,65536")
    assert code == 0 and "tensor parallel 8 over pcie" in out
    assert "never turns compute-bound up to batch 65,536: its tensor-parallel all-reduces over pcie" in out
    assert "KV-cache reads (" not in out


def test_decode_moe_header(capsys):
    code, out, _ = run(capsys, "decode", "--model", "mixtral-8x7b", "--machine", "h200", "--batch", "1,8,64")
    # 93.4 GB held (46.7B x 2 bytes); batch 1 reads 2 of 8 experts a layer: 25.50 GB (see test_plan)
    assert code == 0 and "weights 93.4 GB per GPU (all 8 experts; a step reads" in out and "25.50 GB at batch 1" in out


def test_amd_machines_default_to_xgmi(capsys):
    code, out, _ = run(capsys, "sweep", "--over", "machines", "--tp", "2", "--json")
    d = json.loads(out)
    assert code == 0 and d["tensor_parallel_link"]["mi300x"] == "xgmi" and d["tensor_parallel_link"]["h100-sxm"] == "nvlink"
    code, out, _ = run(capsys, "train", "--tokens", "1e12", "--gpus", "64", "--tp", "8", "--machine", "mi300x", "--json")
    names = [op["name"] for op in json.loads(out)["communication"]]
    assert code == 0 and names == ["TP all-reduce (xgmi) x128", "gradient all-reduce (pcie)"]


def test_int4_everywhere_is_int4_weights_with_bf16_compute(capsys):
    code, out, _ = run(capsys, "decode", "--dtype", "int4", "--batch", "1", "--json")
    d = json.loads(out)
    assert code == 0 and d["precision"] == {"weights": "int4", "activations": "bf16", "kv_cache": "bf16", "compute": "bf16"}
    # 7,504,658,432 matmul weights at 0.5 bytes, but the LM head's 128,256 x 4,096 = 525,336,576 and
    # the 1 embedding row of 4,096 read stay bf16 (2 bytes), as quantisation tools leave them
    lm = 128_256 * 4_096
    assert d["rows"][0]["weight_bytes"] == pytest.approx((7_504_658_432 - lm) * 0.5 + (lm + 4096) * 2)
    code, out, _ = run(capsys, "decode", "--dtype", "int4", "--batch", "1")
    head = out.splitlines()[0]
    assert code == 0 and "weights int4, activations bf16, KV bf16 (weight-only int4: matmuls compute in bf16)" in head
    code, out, _ = run(capsys, "sweep", "--over", "batch", "--values", "1,8", "--dtype", "int4")
    assert code == 0 and "weight-only int4" in out.splitlines()[0]
    code, out, _ = run(capsys, "memory", "--dtype", "int4", "--json")
    d = json.loads(out)
    kept = 2 * 128_256 * 4_096 + 65 * 4_096  # the embedding, the untied LM head and 65 norms stay bf16
    assert code == 0 and d["weights_bytes"] == (8_030_261_248 - kept) * 0.5 + kept * 2
    assert d["kv_cache_bytes"] == 8192 * 131072  # KV stays bf16
    code, out, _ = run(capsys, "sweep", "--over", "machines", "--machine", "b200,h100-sxm", "--dtype", "fp4")
    assert code == 0 and ("b200: fp4 weights and matmuls, activations bf16 between ops (W4A4), KV fp8 (under --dtype fp4"
                          in out) and "norms and any MoE router bf16; h100-sxm: weights fp4, activations bf16" in out


def test_breakdown_goes_into_the_json(capsys):
    code, out, _ = run(capsys, "decode", "--batch", "1,8", "--breakdown", "8", "--json")
    d = json.loads(out)
    assert code == 0 and [r["batch"] for r in d["rows"]] == [1, 8]
    # the breakdown is the batch-8 step: the same time as the table's batch-8 row
    assert d["breakdown"]["batch"] == 8 and d["breakdown"]["time_s"] == pytest.approx(d["rows"][1]["step_s"], rel=1e-12)


def test_memory_train_global_batch_sets_the_micro_batches_in_flight(capsys):
    # 4 stages, 1 data rank: 8 x 8,192 tokens = 8 micro-batches >= 4 in flight x 8 layers = 32 layers x s h 34
    code, out, _ = run(capsys, "memory", "--mode", "train", "--gpus", "4", "--pp", "4", "--global-batch", "65536", "--json")
    d = json.loads(out)
    assert code == 0 and d["activations_bytes"] == 32 * 8192 * 4096 * 34 and d["micro_batches_in_flight"] == 4


@pytest.mark.parametrize("argv, flag", [
    (["memory", "--gpus", "7"], "--gpus"), (["memory", "--zero", "3"], "--zero"),
    (["memory", "--micro-batch", "4"], "--micro-batch"), (["memory", "--recompute", "full"], "--recompute"),
    (["memory", "--mode", "train", "--context", "5"], "--context"),
    (["memory", "--mode", "train", "--kv-cache", "fp8"], "--kv-cache"),
    (["memory", "--mode", "train", "--batch", "4"], "--batch"),
])
def test_memory_refuses_a_flag_its_mode_ignores(capsys, argv, flag):
    """A flag that would not change the result is named, not silently dropped."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith(f"roofline: error: {flag} does not apply"), err


@pytest.mark.parametrize("argv, flag", [
    (["decode", "--tp-link", "pcie"], "--tp-link"),  # one GPU: the link would change nothing
    (["sweep", "--over", "machines", "--values", "1,2"], "--values"),
    (["diagnose", "matmul", "M=64", "N=64", "K=64", "--measured", "1ms", "--rank", "3"], "--rank"),
])
def test_a_flag_that_would_change_nothing_is_refused(capsys, argv, flag):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith(f"roofline: error: {flag} does not apply"), err


def test_train_prices_its_tensor_parallel_ring_on_the_link_it_crosses_and_says_what_cannot_be(capsys):
    """A reviewer's TP 16 on H100 nodes of 8 was priced over NVLink (444 GB/s for a ring that leaves
    the node); decode said InfiniBand. And a run whose links outlast its compute, or whose pipeline
    holds 1 micro-batch for 4 stages (a 75% bubble, (4 - 1) / (1 + 4 - 1)), printed its 40% MFU without
    a word."""
    assert main(["train", "--model", "llama3-405b", "--tokens", "1e12", "--gpus", "32", "--tp", "16"]) == 0
    out = capsys.readouterr().out
    assert "TP all-reduce (infiniband)" in out and "TP all-reduce (nvlink)" not in out
    assert "!! link-bound:" in out and "MFU at most" in out
    assert main(["train", "--model", "llama3-70b", "--tokens", "1e12", "--gpus", "64", "--tp", "8", "--pp", "4"]) == 0
    out = capsys.readouterr().out
    assert "leave each stage idle 75% of a step" in out and "!! pipeline:" in out and "MFU can be at most 25%" in out
    assert "TP all-reduces" in out and "sit on the critical path" in out
    assert main(["train", "--tokens", "1e12", "--gpus", "64", "--tp", "8"]) == 0
    assert "!!" not in capsys.readouterr().out  # one node's NVLink, no pipeline: nothing it cannot be


def test_decode_shows_its_launch_share_where_launches_are_much_of_a_step(capsys):
    """A reviewer's DeepSeek-V3 TP 8 batch-1 step spent 4.0 of its 5.83 ms launching kernels (69%,
    by the breakdown's launch column) under a table that named only 'memory': the share is a column
    where some batch spends 10% or more launching, and a line says how engines avoid it."""
    assert main(["decode", "--model", "deepseek-v3", "--machine", "h200", "--tp", "8", "--batch", "1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["launch_share"] == pytest.approx(0.69, abs=0.02)
    assert main(["decode", "--model", "deepseek-v3", "--machine", "h200", "--tp", "8", "--batch", "1"]) == 0
    out = capsys.readouterr().out
    assert "launch  fits" in out and "launches are 69% of the step at batch 1" in out
    assert main(["decode", "--model", "deepseek-v3", "--machine", "h200", "--tp", "8", "--batch", "1", "--cuda-graph"]) == 0
    assert "launches are" not in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["train", "--tokens", "1e12", "--gpus", "8", "--tp-link", "infiniband"], "--tp-link does not apply with --tp 1"),
    (["train", "--tokens", "1e12", "--gpus", "8", "--no-sequence-parallel"], "--no-sequence-parallel does not apply"),
    (["sweep", "--over", "batch", "--batch", "8"], "--batch does not apply to --over batch"),
    (["sweep", "--over", "tokens", "--tokens", "999"], "--tokens does not apply to --over tokens"),
    (["sweep", "--over", "context", "--context", "999"], "--context does not apply to --over context"),
])
def test_flags_that_would_change_nothing_are_refused(argv, words, capsys):
    """A reviewer's flags accepted and ignored: a TP link without a TP group, the swept size's own flag."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_decode_names_a_state_space_models_cache_and_a_tied_heads_reads(capsys):
    """Mamba-2's decode header said 'flash attention' and 'KV cache' (it has neither), its table's
    'KV read' column held the state read and written back; and a tied-embedding model was said to
    read 'all but the embedding table' (its LM head is that table: Llama 3.2 1B reads all 2.47 GB)."""
    assert main(["decode", "--model", "mamba2-2.7b", "--batch", "1"]) == 0
    out = capsys.readouterr().out
    assert "no attention (state-space layers)" in out and "SSM state 86 MB per sequence" in out
    assert "state r+w GB" in out and "KV read GB" not in out and "flash attention" not in out
    assert main(["decode", "--model", "llama3.2-1b", "--batch", "1"]) == 0
    assert "a step reads all of them: the LM head is the tied embedding table" in capsys.readouterr().out
    assert main(["decode", "--batch", "1"]) == 0
    assert "a step reads all but the embedding table" in capsys.readouterr().out


def test_a_moes_compute_bound_batch_says_it_is_the_matmuls_summed(capsys):
    """Mixtral on an MI300X 'turns compute-bound at batch 794' while its expert GEMMs, 794 x 2 / 8 =
    198.5 FLOP/B, are still under the 203 of e_c/e_m: the verdict is the step's matmuls summed."""
    assert main(["decode", "--model", "mixtral-8x7b", "--machine", "mi300x", "--batch", "794"]) == 0
    assert "summed over every matmul of the step" in capsys.readouterr().out


def test_a_token_budget_under_one_global_batch_is_said_not_printed_as_zero(capsys):
    """1e6 tokens on 1,024 GPUs (a global batch of 1,024 x 8,192 = 8,388,608 tokens) printed 'time
    0.0 days 0 s', 'GPU-hours 0': 6 x 8.03e9 x 1e6 FLOPs / (1,024 x 0.4 x 989e12) = 0.119 s."""
    assert main(["train", "--tokens", "1e6", "--gpus", "1024"]) == 0
    out = capsys.readouterr().out
    assert "0.119 s" in out and "0.12 of one global batch (8,388,608 tokens)" in out
    assert "0.0 days" not in out


def test_naming_the_w8a8_default_activations_changes_nothing(capsys):
    """--activations is 'the dtype between ops (default --dtype, bf16 under W8A8)': a reviewer's
    --dtype fp8 --activations bf16 switched to weight-only fp8 (TTFT 98 ms, not 57)."""
    assert main(["decode", "--dtype", "fp8", "--batch", "1", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["decode", "--dtype", "fp8", "--activations", "bf16", "--batch", "1", "--json"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert named["rows"] == plain["rows"] and named["precision"] == plain["precision"]
    assert main(["decode", "--dtype", "fp8", "--activations", "fp16", "--batch", "1"]) == 0
    assert "weight-only fp8" in capsys.readouterr().out  # another dtype between ops is another mode, said
