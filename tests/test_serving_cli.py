"""`roofline serving` at the command line: tables, JSON and CSV, lengths files, the engine presets
and their flags, the breakdown, and bad input refused in one line."""

import json

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.serving import closed_requests


def test_cli_serving_table_json_csv(capsys):
    assert main(["serving", "--concurrency", "4", "--requests", "12", "--input-len", "256", "--output-len", "32"]) == 0
    out = capsys.readouterr().out
    assert "time to first token" in out and "output tokens/s" in out
    assert main(["serving", "--rate", "2", "--requests", "10", "--json", "--breakdown"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["requests"] == 10 and d["breakdown"]["decode_step"]["ops"] and d["ttft_p50_s"] > 0
    assert main(["serving", "--concurrency", "2", "--requests", "6", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "request,arrival_s,input_tokens,output_tokens,ttft_s,tpot_s,e2e_s"
    assert lines[1].split(",")[:4] == ["0", "0.0", "1024", "256"]
    assert main(["serving", "--concurrency", "2", "--requests", "4", "--output-len", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tpot_p50_s"] is None  # one-token answers have no TPOT


@pytest.mark.parametrize("argv, words", [
    (["--rate", "0"], "--rate"),
    (["--input-len", "0"], "--input-len"),
    (["--input-len", "10-5"], "--input-len"),
    (["--rate", "5", "--concurrency", "4"], "--concurrency"),
    (["--rate", "5", "--slo-ttft", "1s"], "--rate"),
    (["-o", "x.png"], "-o"),
    (["--max-seqs", "1024", "--max-tokens", "512"], "--max-tokens"),
    (["--model", "mixtral-8x7b"], "--tp"),
    (["--tp-link", "nvlink"], "--tp-link"),
    (["--slo-ttft", "-1s"], "--slo-ttft"),
    (["--rate", "5", "--burstiness", "0.001"], "burstiness"),
    (["--rate", "5", "--burstiness", "nan"], "--burstiness"),
    (["--concurrency", "4", "--burstiness", "0.5"], "--burstiness"),
    (["--sweep", "1,2", "--burstiness", "0.5"], "--burstiness"),
])
def test_cli_serving_bad_input_is_one_line(argv, words, capsys):
    assert main(["serving", "--requests", "4", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_what_a_reviewer_found_taken_silently_is_said_or_refused(tmp_path, capsys):
    """A lengths header naming the columns the other way round was read by position; 64 users over
    10 requests and a 5,000-user sweep point over 100 were labelled as if that many ran; a bare
    --slo-ttft 500 meant 500 s."""
    from roofline.serving import read_lengths

    f = tmp_path / "l.csv"
    f.write_text("output_tokens,input_tokens\n100,3000\n120,2500\n")
    inp, out = read_lengths(f)
    assert list(inp) == [3000, 2500] and list(out) == [100, 120]
    f.write_text("output,completion\n3,4\n")
    with pytest.raises(RooflineError, match="both columns"):
        read_lengths(f)
    assert main(["serving", "--concurrency", "64", "--requests", "10"]) == 0
    assert "10 in flight at most" in capsys.readouterr().out
    assert main(["serving", "--sweep", "1,512", "--requests", "100", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("512 users (100 requests)" in n for n in notes) and any("256 sequences (512)" in n for n in notes)
    assert main(["serving", "--slo-ttft", "500"]) == 2
    assert "no unit" in capsys.readouterr().err
    # identical requests in a closed loop move in lockstep (p50 = p99): said; a spread of lengths is not
    assert main(["serving", "--concurrency", "4", "--requests", "20"]) == 0
    assert "move in step" in capsys.readouterr().out
    assert main(["serving", "--concurrency", "4", "--requests", "20", "--input-len", "500-1500"]) == 0
    assert "move in step" not in capsys.readouterr().out


def test_a_microsecond_target_is_printed_as_itself():
    from roofline.units import format_latency

    assert format_latency(1e-6) == "0.001 ms" and format_latency(0.0123) == "12.3 ms" and format_latency(12.0) == "12.0 s"


def test_the_cache_note_and_the_engine_line_give_one_figure(capsys):
    """Llama 3 70B on 4 H100s with a Llama 3.2 1B draft: per GPU 0.9 x 85.5 GB less a quarter of
    the 141.1 GB of bf16 weights (35.3 GB), a quarter of the draft's 2.47 GB (0.62 GB) and the
    activations (about 1.1 GB): ~40 GB, the same in the engine line, the note and the JSON."""
    args = ["serving", "--model", "llama3-70b", "--tp", "4", "--spec-tokens", "4", "--acceptance", "0.8",
            "--draft", "llama3.2-1b", "--requests", "20"]
    assert main(args) == 0
    out = capsys.readouterr().out
    engine = float(out.split("KV cache ", 1)[1].split(" GB per GPU")[0])
    note = float(out.split("note: KV cache ", 1)[1].split(" GB per GPU")[0])
    assert engine == note and abs(engine - (0.9 * 85.5 - 35.3 - 0.62 - 1.1)) < 0.3
    assert main(args + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kv_cache_bytes_per_gpu"] / 1e9 == pytest.approx(engine, abs=0.05)
    assert d["kv_cache_bytes"] == pytest.approx(4 * d["kv_cache_bytes_per_gpu"], rel=1e-12) and d["kv_cache_gpus"] == 4


def test_the_breakdown_shows_the_steps_the_run_took(capsys):
    """One user alone never decodes beside a prompt: its prompt step has no decodes and takes its
    TTFT. With 90% prefix hits a 1,024-token prompt computes ~103 tokens after ~921 cached ones."""
    assert main(["serving", "--concurrency", "1", "--requests", "3", "--breakdown", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    mixed = d["breakdown"]["mixed_step"]
    assert mixed["decode_batch"] == 0 and mixed["chunk"] == 1024 and mixed["prefix"] == 0
    assert mixed["time_s"] == pytest.approx(d["ttft_p50_s"], rel=1e-9)
    assert main(["serving", "--prefix-hit", "0.9", "--requests", "200", "--breakdown", "--json"]) == 0
    mixed = json.loads(capsys.readouterr().out)["breakdown"]["mixed_step"]
    assert 100 <= mixed["chunk"] <= 106 and 918 <= mixed["prefix"] <= 924


def test_lengths_come_from_a_file_a_request_a_line(tmp_path, capsys):
    """A header, a comment, a blank line, commas, a tab and spaces: three requests, each keeping its
    own line's pair, in order; --requests defaults to the file's lines, and more repeat them."""
    from roofline.serving import read_lengths

    f = tmp_path / "lengths.csv"
    f.write_text("input_len,output_len\n# measured\n512,128\n2048, 64\n\n100\t300\n")
    inp, out = read_lengths(f)
    assert inp.tolist() == [512, 2048, 100] and out.tolist() == [128, 64, 300]
    assert main(["serving", "--lengths", str(f), "--concurrency", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["requests"] == 3 and d["input_tokens_mean"] * 3 == pytest.approx(512 + 2048 + 100)
    assert d["output_tokens_mean"] * 3 == pytest.approx(128 + 64 + 300)
    assert main(["serving", "--lengths", str(f), "--concurrency", "1", "--csv"]) == 0
    rows = [line.split(",") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(int(r[2]), int(r[3])) for r in rows] == [(512, 128), (2048, 64), (100, 300)]  # each line's own pair
    assert main(["serving", "--lengths", str(f), "--rate", "2", "--requests", "7", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["requests"] == 7 and d["input_tokens_mean"] * 7 == pytest.approx(2 * (512 + 2048 + 100) + 512)


@pytest.mark.parametrize("text, says", [
    ("512,abc\n", "line 1: 'abc' is not a whole number"),
    ("1,2\n3,4,5\n", "line 2: expected two lengths"),
    ("0,5\n", "line 1: '0' is not"),
    ("2.5,5\n", "'2.5' is not"),
    ("nan,5\n", "'nan' is not"),
    ("", "holds no lengths"),
    ("# only a comment\n", "holds no lengths"),
])
def test_a_bad_lengths_file_is_refused_by_its_line(tmp_path, capsys, text, says):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    assert main(["serving", "--lengths", str(f)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_lengths_from_a_file_and_on_the_command_line_conflict(tmp_path, capsys):
    f = tmp_path / "l.csv"
    f.write_text("5,5\n")
    assert main(["serving", "--lengths", str(f), "--output-len", "8"]) == 2
    assert "drop --input-len/--output-len" in capsys.readouterr().err
    assert main(["serving", "--lengths", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("spec, says", [([100.7, 200.2], "100.7 (item 0) is not a whole number"), ("abc", "not 'abc'"),
                                        ([float("nan")], "nan (item 0)"), ([5, 0], "0 (item 1)"), ([], "expected a length")])
def test_library_lengths_are_refused_by_name_not_truncated(spec, says):
    with pytest.raises(RooflineError, match=says.replace("(", r"\(").replace(")", r"\)")):
        closed_requests(2, 4, spec, 16)


@pytest.mark.parametrize("argv, words", [
    (["--output-len", "1e12"], "argument --output-len: must be at most 16,777,216"),
    (["--input-len", "1e12"], "argument --input-len: must be at most 16,777,216"),
    (["--input-len", "10000000", "--output-len", "10000000"], "at most 16,777,216 in all"),
    (["--output-len", "16000000"], "--output-len"),  # a cache that outgrows the GPU, named by the flag at fault
    (["--burstiness", "0.25"], "closed loop of 64 users"),  # the default run is a closed loop: nothing to shape
])
def test_absurd_lengths_and_a_burstiness_with_nothing_to_shape_are_refused(argv, words, capsys):
    """A reviewer's --output-len 1e12 ended in numpy's 466 GiB allocation error (a traceback), a
    16M-token output was blamed on --input-len, and --burstiness on the default closed loop was
    silently ignored."""
    assert main(["serving", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_lengths_file_row_past_the_limit_or_the_cache_names_the_file(tmp_path, capsys):
    f = tmp_path / "len.csv"
    f.write_text("input,output\n100,20\n10000000,10000000\n")
    assert main(["serving", "--lengths", str(f)]) == 2
    assert "line 3: 10,000,000 + 10,000,000 tokens is past 16,777,216" in capsys.readouterr().err
    f.write_text("input,output\n100,20\n10000000,10\n")  # fits the limit, not an H100's cache
    assert main(["serving", "--lengths", str(f)]) == 2
    err = capsys.readouterr().err
    assert "needs 1,310.72 GB" in err and "len.csv" in err and "--input-len" not in err


def test_serving_request_overhead_flag_adds_to_each_ttft(capsys):
    """--request-overhead 20ms, one user: each TTFT is 20 ms longer than without (hand arithmetic: a lone
    request waits for nothing else); a negative time is refused by name, exit 2."""
    argv = ["serving", "--concurrency", "1", "--requests", "2", "--input-len", "256", "--output-len", "4", "--json"]
    assert main(argv) == 0
    base = json.loads(capsys.readouterr().out)
    assert main(argv + ["--request-overhead", "20ms"]) == 0
    more = json.loads(capsys.readouterr().out)
    assert more["engine"]["request_overhead_s"] == pytest.approx(0.02)
    assert more["ttft_mean_s"] == pytest.approx(base["ttft_mean_s"] + 0.02, rel=1e-9)
    assert main(argv + ["--request-overhead", "-5ms"]) == 2
    err = capsys.readouterr().err
    assert "--request-overhead" in err and "Traceback" not in err


def test_serving_engine_flag_takes_the_defaults_and_a_given_flag_wins(capsys):
    argv = ["serving", "--concurrency", "4", "--requests", "8", "--input-len", "512", "--output-len", "32", "--seeds", "1",
            "--engine", "trtllm", "--json"]
    assert main(argv) == 0
    engine = json.loads(capsys.readouterr().out)["engine"]
    # TensorRT-LLM's defaults: whole prompts (no chunked prefill), beside the decodes in a step
    assert engine["preset"] == "trtllm" and engine["chunked_prefill"] is False and engine["mixed_steps"] is True
    assert main(argv + ["--max-seqs", "8"]) == 0
    given = json.loads(capsys.readouterr().out)["engine"]
    same = {k for k in engine if k not in ("max_seqs", "label")}  # the label says the figures it runs at
    assert given["max_seqs"] == 8 != engine["max_seqs"] and all(given[k] == engine[k] for k in same)
    assert main(argv[:-1] + ["--input-len", "9000"]) == 2
    err = capsys.readouterr().err
    assert "without chunked prefill" in err and "9,000" in err and "Traceback" not in err
    assert main(["serving", "--engine", "tgi"]) == 2
    assert "unknown engine 'tgi'" in capsys.readouterr().err


def test_an_nvidia_only_engine_on_another_vendors_gpu_is_refused(capsys):
    assert main(["serving", "--machine", "mi300x", "--engine", "trtllm", "--concurrency", "2", "--requests", "4"]) == 2
    err = capsys.readouterr().err
    assert "trtllm runs on NVIDIA GPUs only" in err and "Traceback" not in err


def test_the_breakdown_of_a_run_with_long_prompts_keeps_to_the_step_budget(capsys):
    """9,000-token prompts are chunked under an 8,192 budget: the breakdown's mean prompt step stays
    within it (its mean chunk and decodes could round past it together)."""
    assert main(["serving", "--concurrency", "16", "--input-len", "9000", "--output-len", "128", "--seeds", "1",
                 "--requests", "100", "--breakdown", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    mixed = d["breakdown"]["mixed_step"]  # one token a decode, and its chunks' prompt tokens
    assert mixed["chunks"] >= 1 and mixed["decode_batch"] + mixed["chunks"] * mixed["chunk"] <= d["engine"]["max_tokens"]


def test_a_run_past_the_step_budget_is_refused_before_it_runs(capsys):
    """Fuzzing found `serving --eager --output-len 80898 --max-seqs 1` simulating 50,000,000 steps before it gave up
    (a minute and more). 1,000 requests x 80,898 output tokens at one sequence a step need at least 80,898,000 steps,
    past the 50,000,000 the simulation allows: refused at once, naming the lengths and the sequences."""
    from roofline.cli import main

    assert main(["serving", "--eager", "--output-len", "80898", "--max-seqs", "1"]) == 2
    err = capsys.readouterr().err  # the up-front refusal's count (the run's own limit says only that it ran out)
    assert "80,898,000 steps" in err and "output_len" in err and "max_seqs 1" in err
