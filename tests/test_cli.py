"""The command line: tables, the --json contract, plots, and bad input (one line, exit 2)."""

import json
import subprocess
import sys

import pytest

from roofline.cli import main

LAYER_KEYS = {"machine", "model", "phase", "tokens", "batch", "context", "compute_efficiency", "memory_efficiency",
              "launch_overhead_s", "total_s", "flops_only_s", "bytes_only_s", "launch_s", "memory_bound_ops",
              "memory_bound_share", "launch_share", "ops"}
OP_KEYS = {"name", "flops", "bytes", "intensity", "compute_s", "memory_s", "launch_s", "time_s", "bound"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_layer_table_default_is_the_seed_workshop(capsys):
    code, out, _ = run(capsys, "layer", "--model", "llama3-8b", "--machine", "h100-sxm", "--tokens", "8192")
    assert code == 0
    assert "8,756" in out and "5,965" in out and "1.47x" in out
    assert "8 of 12 ops" in out and "41%" in out
    assert out.count("memory") >= 8


@pytest.mark.parametrize("tokens,total_us", [(128, 205), (8192, 8756), (32768, 71117)])
def test_layer_json_contract(capsys, tokens, total_us):
    code, out, _ = run(capsys, "layer", "--json", "--tokens", str(tokens))
    assert code == 0
    d = json.loads(out)
    assert LAYER_KEYS <= set(d)
    assert d["machine"] == "h100-sxm" and d["model"] == "llama3-8b" and d["phase"] == "prefill"
    assert round(d["total_s"] * 1e6) == total_us
    assert d["launch_overhead_s"] == 3e-6 and d["compute_efficiency"] == 0.7 and d["memory_efficiency"] == 0.85
    assert len(d["ops"]) == 12 and all(OP_KEYS <= set(op) for op in d["ops"])
    assert {op["bound"] for op in d["ops"]} <= {"memory", "compute"}
    assert sum(op["time_s"] for op in d["ops"]) == pytest.approx(d["total_s"])


def test_layer_flags(capsys):
    code, out, _ = run(capsys, "layer", "--json", "--phase", "decode", "--context", "4096", "--batch", "8",
                       "--attention", "flash", "--launch-overhead", "5us", "--compute-efficiency", "0.5",
                       "--memory-efficiency", "0.9", "--machine", "h200")
    assert code == 0
    d = json.loads(out)
    assert d["phase"] == "decode" and d["context"] == 4096 and d["batch"] == 8 and d["tokens"] == 1
    assert d["launch_overhead_s"] == pytest.approx(5e-6) and d["machine"] == "h200"
    assert len(d["ops"]) == 10  # flash: one attention op


def test_layer_tensor_parallel_is_one_gpus_slice_and_its_all_reduces(capsys):
    """`layer --tp 4`: Llama 3 8B decode at batch 16 on one GPU of four. QKV's weights are
    4096 x (4096 + 2 x 1024) = 25,165,824 bf16 elements, a quarter each: 12,582,912 bytes, plus its
    input 16 x 4096 x 2 = 131,072 and output 16 x 1536 x 2 = 49,152 bytes. Two all-reduces (after
    attention and after the MLP), each a ring over 4 GPUs of 16 x 4096 bf16 (131,072 bytes):
    2 x 3/4 x 131,072 = 196,608 bytes on the link."""
    code, out, _ = run(capsys, "layer", "--json", "--tp", "4", "--phase", "decode", "--batch", "16",
                       "--context", "4096", "--attention", "flash")
    assert code == 0
    d = json.loads(out)
    assert d["tensor_parallel"] == 4
    ops = {op["name"]: op for op in d["ops"]}
    assert ops["QKV proj"]["bytes"] == 12_582_912 + 131_072 + 49_152
    reduces = [op for op in d["ops"] if op["name"].startswith("TP all-reduce")]
    assert len(reduces) == 2 and {op["bytes"] for op in reduces} == {196_608}
    code, out, _ = run(capsys, "layer", "--tp", "4", "--phase", "decode")
    assert "one GPU's 1/4 (tensor parallel; 2 all-reduces over nvlink)" in out
    code, _, err = run(capsys, "layer", "--tp", "3")
    assert code == 2 and "--tp 3 must divide" in err and "heads 32" in err
    code, _, err = run(capsys, "layer", "--tp-link", "pcie")  # a link with no all-reduce to cross it: said
    assert code == 2 and "--tp-link pcie" in err and "--tp 2 or more" in err


def test_launch_overhead_takes_its_unit_as_the_slo_targets_do(capsys):
    """--launch-overhead 3e-6 was taken as seconds while --slo-ttft 500 was refused for having no unit:
    both refuse a bare number now (3 is as likely 3 us as 3 s), a bare 0 is none in any unit."""
    _, a, _ = run(capsys, "layer", "--json", "--launch-overhead", "3e-6s")
    _, b, _ = run(capsys, "layer", "--json", "--launch-overhead", "3us")
    assert json.loads(a)["total_s"] == json.loads(b)["total_s"]
    for argv in (["layer", "--launch-overhead", "3e-6"], ["serving", "--slo-ttft", "500"]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "has no unit" in one_error_line(err) and argv[-1] in err
    assert run(capsys, "layer", "--launch-overhead", "0")[0] == 0


def test_layer_csv(capsys):
    code, out, _ = run(capsys, "layer", "--csv", "--tokens", "128")
    lines = out.strip().splitlines()
    assert code == 0 and lines[0].startswith("name,flops,bytes,intensity") and len(lines) == 13


def test_machines_and_models_list_the_names(capsys):
    code, out, _ = run(capsys, "machines")
    assert code == 0 and all(k in out for k in ("h100-sxm", "a100-80gb", "h200", "mi300x", "tpu-v5p"))
    code, out, _ = run(capsys, "models")
    assert code == 0 and "llama3-8b" in out and "8,030,261,248" in out
    code, out, _ = run(capsys, "machines", "--json")
    h100 = next(m for m in json.loads(out) if m["key"] == "h100-sxm")
    assert h100["peak_flops"] == 989e12 and h100["sources"]


def test_kernel_command(capsys):
    # seed exercise 1: M = 1 -> ~10 us, memory-bound
    code, out, _ = run(capsys, "kernel", "matmul", "M=1", "N=4096", "K=4096", "--json")
    d = json.loads(out)
    assert code == 0 and d["bound"] == "memory" and round(d["roofline_s"] * 1e6, 1) == 10.0
    code, out, _ = run(capsys, "kernel", "flash_attention", "T=4096", "d=128")
    assert code == 0 and "compute-bound" in out


def test_plot_commands(tmp_path, capsys):
    for what, name in (("roofline", "r.png"), ("layer", "l.svg")):
        path = tmp_path / name
        assert main(["plot", what, "-o", str(path)]) == 0
        assert path.stat().st_size > 5000


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["layer", "--tokens", "-5"], "--tokens"),
        (["layer", "--tokens", "0"], "--tokens"),
        (["layer", "--tokens", "nan"], "nan"),
        (["layer", "--tokens", "1e30"], "--tokens"),
        (["layer", "--batch", "2.5"], "--batch"),
        (["layer", "--compute-efficiency", "1.5"], "--compute-efficiency"),
        (["layer", "--memory-efficiency", "0"], "--memory-efficiency"),
        (["layer", "--launch-overhead", "-3us"], "--launch-overhead"),
        (["layer", "--launch-overhead", "3 parsecs"], "parsecs"),
        (["layer", "--machine", "h100"], "h100-sxm"),
        (["layer", "--model", "llama3-7b"], "llama3-8b"),
        (["layer", "--model", "/nonexistent/config.json"], "config.json"),
        (["layer", "--machine", "v100", "--dtype", "bf16"], "fp16"),  # no bf16 on a V100: says which it has
        (["layer", "--phase", "train"], "train"),
        (["kernel", "matmul", "M=-1", "N=2", "K=2"], "M"),
        (["kernel", "matmull", "M=1"], "matmul"),
        (["plot", "layer", "-o", "x.gif"], "x.gif"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("roofline: error:") and needle in lines[0]


def test_malformed_config_file(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "layer", "--model", str(bad))
    assert code == 2 and "not valid JSON" in err
    broken = tmp_path / "m.toml"
    broken.write_text("[machines.x]\nname = 'x'\n")
    code, _, err = run(capsys, "layer", "--machine", str(broken))
    assert code == 2 and "peak_flops_per_s" in err


def test_user_machine_file(tmp_path, capsys):
    f = tmp_path / "mine.toml"
    f.write_text(
        '[sources]\nME = "my datasheet"\n[machines.mine]\nname = "Mine"\n'
        'memory_bytes_per_s = { value = 1e12, source = "ME" }\n'
        'peak_flops_per_s.bf16 = { value = 100e12, source = "ME" }\n'
    )
    code, out, _ = run(capsys, "layer", "--json", "--machine", str(f), "--tokens", "128")
    assert code == 0 and json.loads(out)["machine_name"] == "Mine"


def test_subprocess_no_traceback_and_no_heavy_imports():
    bad = subprocess.run([sys.executable, "-m", "roofline", "layer", "--tokens", "-1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    probe = (
        "import sys; from roofline.cli import main; main(['layer', '--json']);"
        "print('HEAVY', sorted(m for m in ('matplotlib', 'torch', 'fastapi', 'uvicorn', 'plotly') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "HEAVY []"


def test_what_if_machine_flags_exercise_5(capsys):
    # 2x the H100's compute, same bandwidth: ridge 2 * 989 / 3.35 = 590.4
    code, out, _ = run(capsys, "kernel", "naive_attention", "T=4096", "d=128", "--compute-scale", "2", "--json")
    d = json.loads(out)
    assert code == 0 and round(d["ridge_point"], 1) == 590.4 and d["bound"] == "memory"
    code, out, _ = run(capsys, "kernel", "matmul", "M=8192", "N=4096", "K=4096", "--compute-scale", "2", "--json")
    d = json.loads(out)
    assert d["bound"] == "compute" and d["roofline_s"] == pytest.approx(2 * 8192 * 4096 * 4096 / (2 * 989e12))
    assert main(["layer", "--bandwidth-scale", "-1"]) == 2


def test_machine_default_dtype(capsys):
    # a V100 has fp16 tensor cores and no bf16: the layer runs in fp16 unless told otherwise
    code, out, _ = run(capsys, "layer", "--json", "--machine", "v100")
    assert code == 0 and json.loads(out)["dtype"] == "fp16"


def test_unwritable_output_is_one_line_exit_2(capsys, tmp_path):
    code, out, err = run(capsys, "plot", "roofline", "-o", str(tmp_path / "missing-dir" / "x.png"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "missing-dir" in err


def test_efficiency_floor_names_the_flag(capsys):
    code, _, err = run(capsys, "layer", "--compute-efficiency", "0.0005")
    assert code == 2 and "--compute-efficiency" in err and "0.0005" in err


def test_empty_names_in_a_machine_list_are_skipped(capsys, tmp_path):
    assert main(["plot", "roofline", "--machine", "h100-sxm,,", "-o", str(tmp_path / "r.png")]) == 0


def test_int4_is_weight_only_on_a_machine_without_an_int4_peak(capsys):
    # (1 x 4096) @ (4096 x 4096) with 0.5-byte elements: 0.5 (4096 + 4096^2 + 4096) = 8,392,704 bytes,
    # memory-bound: 8,392,704 / 3.35e12 s; the FLOPs run at the bf16 peak
    code, out, _ = run(capsys, "kernel", "matmul", "M=1", "N=4096", "K=4096", "bytes_per_elem=int4", "--json")
    d = json.loads(out)
    assert code == 0 and d["bytes"] == 0.5 * (4096 + 4096**2 + 4096)
    assert d["roofline_s"] == pytest.approx(8_392_704 / 3.35e12)
    code, _, err = run(capsys, "kernel", "matmul", "M=1", "N=2", "K=2", "bytes_per_elem=3")
    assert code == 2 and "got 3" in err


def test_layer_shows_each_layer_kind_with_its_count(capsys):
    code, out, _ = run(capsys, "layer", "--model", "gemma3-27b", "--tokens", "1024")
    # 52 sliding-window layers and 10 full ones (sliding_window_pattern 6 over 62 layers)
    assert code == 0 and "52 of 62 layers" in out and "10 of 62 layers" in out and "left out: vision" in out
    code, out, _ = run(capsys, "layer", "--model", "gemma3-27b", "--layer", "5", "--json")
    d = json.loads(out)
    assert code == 0 and d["layer_index"] == 5 and d["layer_kind"].startswith("full attention") and d["layer_count"] == 10
    code, out, _ = run(capsys, "layer", "--model", "gemma3-27b", "--json")
    assert [k["layer_count"] for k in json.loads(out)["layer_kinds"]] == [52, 10]


@pytest.mark.parametrize("argv, needle", [
    (("--phase", "decode", "--tokens", "5", "--context", "100"), "decode makes one token per sequence"),
    (("--phase", "prefill", "--tokens", "8", "--context", "4"), "context 4 is shorter than the 8 prefill tokens"),
    (("--model", "gemma3-27b", "--layer", "99"), "has layers 0 to 61"),
])
def test_layer_refuses_workloads_it_would_otherwise_ignore(capsys, argv, needle):
    code, _, err = run(capsys, "layer", *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_unknown_model_type_is_refused_at_the_cli(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "rwkv", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10}))
    code, _, err = run(capsys, "models", str(path))
    assert code == 2 and "model_type 'rwkv' is not supported" in err


def test_models_describes_one_model(capsys):
    code, out, _ = run(capsys, "models", "gpt-oss-120b")
    # total from the model card, 116.83B; experts stored as MXFP4
    assert code == 0 and "116,829,156,672" in out and "mxfp4" in out and "18 x [A B]" in out


@pytest.mark.parametrize("argv", [("train", "--tokens", "5e-324"), ("layer", "--compute-scale", "5e-324")])
def test_denormal_inputs_are_refused_by_name(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and "at least 1e-30" in err and argv[1] in err and "nan" not in out.lower()


@pytest.mark.parametrize("argv, needle", [
    (("plot", "layer", "-o", ".png"), "no file name before its extension"),
    (("decode", "-o", ""), "must end in .png or .svg, got ''"),
    (("decode", "-o", "/nonexistent-folder/x.png"), "does not exist"),
    (("gemm", "64", "64", "64", "--dtype", "bogus"), "unknown dtype 'bogus'"),
])
def test_output_paths_and_dtypes_are_checked_before_any_work(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and needle in err and out == ""


def test_gemm_dtype_is_case_insensitive(capsys):
    code, out, _ = run(capsys, "gemm", "4096", "4096", "4096", "--dtype", "BF16")
    assert code == 0 and out


def test_negative_numbers_in_any_notation_reach_the_range_check(capsys):
    # argparse alone reads "-1e3" as a flag ("expected one argument"); the check names the value
    code, _, err = run(capsys, "layer", "--tokens", "-1e3")
    assert code == 2 and "--tokens: must be greater than 0, got -1000" in err
    code, _, err = run(capsys, "layer", "--tokens", "-5")
    assert code == 2 and err.strip().endswith("got -5")


def test_json_output_refuses_non_finite_values():
    from roofline.errors import RooflineError
    from roofline.tables import dump_json

    assert dump_json({"a": 1.0}) == '{\n  "a": 1.0\n}'
    with pytest.raises(RooflineError, match=r"ops\.1\.time_s is NaN or infinite"):
        dump_json({"ops": [{"time_s": 1.0}, {"time_s": float("inf")}]})


@pytest.mark.parametrize("argv, named", [
    (["diagnose", "matmul", "M=64", "N=64", "K=64", "--measured", "12"], "no unit"),  # 12 s? 12 us? say which
    (["layer", "--tokens", "١٢"], "'١٢'"),  # Arabic-Indic digits are not read as 12
    (["layer", "--tokens", "１２"], "'１２'"),  # nor full-width ones
    (["sweep", "--over", "tokens", "--values", "1e12"], "--values"),  # the swept size is the one too large
    (["serve", "--host=--"], "--host"),
])
def test_messages_name_what_is_wrong(capsys, argv, named):
    code, _, err = run(capsys, *argv)
    assert code == 2 and named in err and len(err.strip().splitlines()) == 1, err


def test_threads_are_capped_at_the_cores_available(capsys):
    pytest.importorskip("torch")
    from roofline.measure.device import available_cores

    code, _, err = run(capsys, "check", "--threads", str(available_cores() + 1), "--quiet")
    assert code == 2 and "core(s) available" in err
    code, _, err = run(capsys, "calibrate", "--threads", "3e9", "--quiet")
    assert code == 2 and "threads" in err


def test_a_control_character_in_a_name_stays_on_one_line(capsys):
    code, _, err = run(capsys, "profile", "trace\r\nFAKE LINE.json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "\\r\\n" in err


def test_a_result_that_is_not_finite_is_said_not_printed(capsys, monkeypatch):
    """The edge check: a command whose output holds nan or inf (here a table forced to print one)
    exits 2 with one line quoting it, and prints nothing of the table."""
    import roofline.cli as cli
    from roofline.tables import check_finite_text

    real = cli.cmd_layer
    monkeypatch.setattr(cli, "cmd_layer", lambda args: (real(args), print("total is nanx")))
    code, out, err = run(capsys, "layer")
    assert code == 2 and out == "" and "not finite" in err and "nanx" in err
    for ok in ("info", "inference at 3 ns", "nanoseconds", "Infinite loop? no", "x = 1.5e-3"):
        assert check_finite_text(ok) == ok
    for bad in ("t = inf us", "-inf", "mfu NaN", "12.5 inf%", "(nan)"):
        with pytest.raises(Exception):
            check_finite_text(bad)
    for name in ("LlamaLike (nan.json): 2 layers", "models/inf/config.json", "nan-v2 (llama)"):  # file names, not values
        assert check_finite_text(name) == name


def test_a_config_file_named_nan_and_a_key_holding_infinity_are_read_not_refused(tmp_path, capsys):
    """A reviewer's valid config saved as nan.json was refused as 'not finite', and a config whose
    rope_theta is Infinity (Python's json reads it) turned the note meant for it into that same
    error: the file is named by its file name, the key's note words the value."""
    cfg = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "torch_dtype": "bfloat16"}
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(cfg).rstrip("}") + ', "rope_theta": Infinity, "rms_norm_eps": NaN}')
    code, out, err = run(capsys, "models", str(path))
    assert code == 0 and out.startswith("nan.json (llama)"), err
    code, out, err = run(capsys, "layer", "--model", str(path))
    assert code == 0, err
    assert "config key 'rope_theta' is an infinity, not a finite value" in out + err
    assert "config key 'rms_norm_eps' is not a number, not a finite value" in out + err


# -- a second reader's findings (issue 11 review): each was a traceback, a warning or a false word --

@pytest.mark.parametrize("config, named", [
    ({"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "sliding_window": 16,
      "sliding_window_pattern": 0}, "sliding_window_pattern must be at least 1"),  # was ZeroDivisionError
    ({"model_type": ["llama"]}, "model_type must be a string"),  # was TypeError
    ({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
      "num_attention_heads": 4, "vocab_size": 100, "tie_word_embeddings": "yes"}, "must be true or false"),
    ({"model_type": "gemma3", "text_config": {"model_type": "gemma3"}}, "keeps a 'gemma3_text' language model"),
])
def test_config_values_a_reviewer_found_are_refused_by_key(tmp_path, capsys, config, named):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, _, err = run(capsys, "models", str(path))
    assert code == 2 and named in err and str(path) in err, err


def test_a_config_saved_with_a_byte_order_mark_is_read_and_json_errors_are_in_words(tmp_path, capsys):
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 100}
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(cfg).encode())
    assert run(capsys, "models", str(tmp_path / "bom.json"))[0] == 0
    (tmp_path / "big.json").write_text('{"hidden_size": ' + "9" * 5000 + "}")
    code, _, err = run(capsys, "models", str(tmp_path / "big.json"))
    assert code == 2 and "thousands of digits" in err and "ValueError" not in err


def test_a_relative_module_in_trace_is_one_line(capsys):
    pytest.importorskip("torch")
    code, _, err = run(capsys, "trace", "../x:y")
    assert code == 2 and "cannot import" in err and len(err.strip().splitlines()) == 1


def test_an_unwritable_output_names_the_path_given_not_a_temporary(capsys, monkeypatch, tmp_path):
    import roofline.files as files

    monkeypatch.setattr(files.tempfile, "mkstemp", lambda **k: (_ for _ in ()).throw(OSError(2, "No such file or directory")))
    code, _, err = run(capsys, "plot", "roofline", "-o", str(tmp_path / "x.png"))
    assert code == 2 and f"'{tmp_path / 'x.png'}'" in err and ".tmp" not in err


def test_train_takes_the_machines_own_dtype_and_says_a_chosen_dp_link_plainly(tmp_path, capsys):
    fp8 = tmp_path / "fp8.toml"
    fp8.write_text('[sources]\nME = "x"\n[machines.mine]\nname = "Mine"\ndefault_dtype = "fp8"\n'
                   'memory_bytes_per_s = { value = 1e12, source = "ME" }\n'
                   'peak_flops_per_s.fp8 = { value = 100e12, source = "ME" }\n')
    assert run(capsys, "train", "--machine", str(fp8), "--tokens", "1e12", "--gpus", "16")[0] == 0  # no --peak-dtype bf16 blamed
    code, out, _ = run(capsys, "train", "--tokens", "15e12", "--gpus", "1024", "--dp-link", "nvlink")
    assert code == 0 and "lists no infiniband" not in out and "as --dp-link says" in out


def test_a_quantised_checkpoint_is_not_called_bf16_when_it_does_not_fit(capsys):
    code, out, _ = run(capsys, "memory", "--model", "deepseek-v3")
    assert code == 0 and "bf16 weights alone" not in out and "weights as stored" in out


def test_a_decode_plot_at_one_batch_warns_nothing(tmp_path, capsys):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run(capsys, "decode", "--batch", "1", "-o", str(tmp_path / "d.png"))[0] == 0


@pytest.mark.parametrize("argv, named", [
    (["kernel", "matmul", "M=1.5", "N=1", "K=1"], "M must be a whole number"),
    (["kernel", "matmul", "M=1", "N=1", "K=1", "M=2"], "given twice"),
    (["sweep", "--over", "tokens", "--values", "128", "--context", "100"], "--context does not apply"),
    (["sweep", "--over", "context", "--tokens", "5"], "--tokens does not apply"),
    (["diagnose", "--flops", "1e9", "--bytes", "4e9", "--measured", "1.5ms", "--label", "a\nb"], "--label"),
    (["decode", "--batch", "1,,4"], "empty item in '1,,4'"),
    (["decode", "--machine", "."], "is a directory"),
])
def test_inputs_a_reviewer_saw_ignored_or_mistaken_are_refused(capsys, argv, named):
    code, _, err = run(capsys, *argv)
    assert code == 2 and named in err and len(err.strip().splitlines()) == 1, err


def test_a_machine_name_must_be_one_printable_line(tmp_path, capsys):
    f = tmp_path / "m.toml"
    f.write_text('[sources]\nME = "x"\n[machines.mine]\nname = "My\\nchip"\n'
                 'memory_bytes_per_s = { value = 1e12, source = "ME" }\n'
                 'peak_flops_per_s.bf16 = { value = 100e12, source = "ME" }\n')
    code, _, err = run(capsys, "layer", "--machine", str(f))
    assert code == 2 and "printable" in err and str(f) in err


def test_an_unknown_torch_dtype_is_said_with_what_it_was_taken_as(tmp_path, capsys):
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 100, "torch_dtype": "banana"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "models", str(tmp_path / "config.json"))
    assert code == 0 and "torch_dtype 'banana' not understood: weights taken as bf16" in out


# A config with a key the loader does not understand and one it reads with a note: every command
# that takes the config must say both, in its text and its JSON (a reviewer found `serving` silent).
_NOTED_CFG = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "vocab_size": 100, "torch_dtype": "banana", "frobnicate_layers": 3}


@pytest.mark.parametrize("argv", [
    ("models", "{cfg}"), ("layer", "--model", "{cfg}"), ("decode", "--model", "{cfg}"),
    ("memory", "--model", "{cfg}"),
    ("serving", "--model", "{cfg}", "--requests", "20", "--concurrency", "4", "--input-len", "64",
     "--output-len", "8"),
])
@pytest.mark.parametrize("as_json", [False, True])
def test_every_command_on_a_config_says_what_its_loader_did_not_understand(tmp_path, capsys, argv, as_json):
    (tmp_path / "config.json").write_text(json.dumps(_NOTED_CFG))
    args = [a.format(cfg=tmp_path / "config.json") for a in argv] + (["--json"] if as_json else [])
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "frobnicate_layers" in out and "torch_dtype 'banana' not understood" in out, out


@pytest.mark.parametrize("command", ["decode", "memory", "serving"])
def test_a_config_in_a_folder_named_like_a_preset_is_never_titled_as_the_preset(tmp_path, capsys, command):
    folder = tmp_path / "llama3-8b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_NOTED_CFG))
    extra = ["--requests", "10", "--concurrency", "2", "--input-len", "32", "--output-len", "4"] if command == "serving" else []
    code, out, err = run(capsys, command, "--model", str(folder), *extra)
    assert code == 0, err
    first = out.splitlines()[0]
    assert "Llama 3 8B" not in first and str(folder / "config.json") in first, first


@pytest.mark.parametrize("command", ["layer", "decode", "memory", "serving"])
def test_an_fp32_checkpoint_priced_at_bf16_is_said(tmp_path, capsys, command):
    # torch_dtype float32 stores 4 bytes a weight; every command's default prices bf16's 2: it must say so
    (tmp_path / "config.json").write_text(json.dumps(dict(_NOTED_CFG, torch_dtype="float32")))
    extra = ["--requests", "10", "--concurrency", "2", "--input-len", "32", "--output-len", "4"] if command == "serving" else []
    code, out, err = run(capsys, command, "--model", str(tmp_path / "config.json"), *extra)
    assert code == 0, err
    assert "stores fp32" in out, out
    code, out, _ = run(capsys, "decode", "--model", str(tmp_path / "config.json"), "--weights", "fp32")
    assert code == 0 and "stores fp32" not in out and "weights fp32" in out.splitlines()[0]


def test_absurd_but_legal_widths_get_plain_messages(tmp_path, capsys):
    # hidden 1e8 with one head: 8e16 parameters, 160 PB of bf16 weights on an 85.5 GB H100 (driver figure)
    (tmp_path / "config.json").write_text(json.dumps(dict(_NOTED_CFG, hidden_size=10**8, num_attention_heads=1)))
    code, out, _ = run(capsys, "memory", "--model", str(tmp_path / "config.json"))
    assert code == 0 and "x the memory" in out and "% used" not in out  # 1.9 million x, not '187096858% used'
    code, _, err = run(capsys, "decode", "--model", str(tmp_path / "config.json"))
    assert code == 2 and "100,000,000 wide" in err


def test_version_is_the_installed_packages(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"roofline {version('roofline')}\n"
    out = subprocess.run([sys.executable, "-m", "roofline", "--version"], capture_output=True, text=True, check=True).stdout
    assert out == f"roofline {version('roofline')}\n"


def _subparsers():
    import argparse

    from roofline.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices.items()


def test_every_help_shows_each_default_once():
    """Every option with a default says it in --help, once: appended where its help did not
    already state one, never for None, False or an empty list."""
    import argparse

    from roofline.cli.args import shows_default

    checked = 0
    for name, sp in _subparsers():
        text = " ".join(sp.format_help().split())
        assert not any(f"default: {v}" in text for v in ("None", "False", "[]")), name
        for a in sp._actions:
            if a.help is argparse.SUPPRESS or not a.option_strings:
                continue
            block = " ".join(sp._get_formatter()._format_action(a).split()).lower()
            said = (a.help or "").lower().count("default")
            if a.default not in (None, False, [], argparse.SUPPRESS):
                assert "default" in block, (name, a.option_strings)
            assert block.count("default") == said + shows_default(a), (name, a.option_strings, block)
            checked += 1
    assert checked > 200
    sweep = dict(_subparsers())["layer"].format_help()
    assert "(default: llama3-8b)" in " ".join(sweep.split()) and "sequences, B (default: 1)" in sweep


@pytest.mark.parametrize("old, new, command", [
    ("--profile", "--machine", ["check"]),
    ("--profile", "--trace", ["diagnose"]),
    ("--link", "--tp-link", ["decode"]), ("--link", "--tp-link", ["sweep", "--over", "batch"]),
    ("--link", "--tp-link", ["serving"]),
])
def test_an_old_flag_spelling_still_works_hidden_with_a_note(old, new, command):
    from roofline.cli import build_parser

    parser = build_parser()
    a, b = parser.parse_args([*command, old, "x.toml"]), parser.parse_args([*command, new, "x.toml"])
    assert vars(a).pop("deprecation_notes") == [f"{old} is deprecated and goes in the next release: use {new}"]
    assert vars(a) == vars(b)
    sp = dict(_subparsers())[command[0]]
    assert f"{old} " not in sp.format_help() and new in sp.format_help()


def test_a_deprecated_flag_prints_one_note_and_an_error_stays_one_line(capsys):
    code, out, err = run(capsys, "decode", "--tp", "2", "--link", "pcie", "--batch", "1")
    assert code == 0 and "over pcie" in out
    assert err == "roofline: note: --link is deprecated and goes in the next release: use --tp-link\n"
    code, _, err = run(capsys, "decode", "--link", "pcie")  # --tp 1: the link would change nothing
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("roofline: error: --tp-link does not apply") and "(--link is deprecated" in err


def test_a_users_machine_is_not_given_the(tmp_path, capsys):
    f = tmp_path / "mine.toml"
    f.write_text('[sources]\nME = "x"\n[machines.mine]\nname = "My accelerator"\n'
                 'memory_bytes_per_s = { value = 1.2e12, source = "ME" }\nmemory_bytes = { value = 80e9, source = "ME" }\n'
                 'peak_flops_per_s.bf16 = { value = 400e12, source = "ME" }\n')
    code, out, _ = run(capsys, "memory", "--machine", str(f))
    assert code == 0 and "of My accelerator's" in out and "the My accelerator" not in out
    code, out, _ = run(capsys, "memory")
    assert code == 0 and "of the H100 SXM's" in out


def test_the_time_to_first_token_reads_an_8192_token_prompt(capsys):
    code, out, _ = run(capsys, "decode", "--context", "8192")
    assert code == 0 and "for an 8,192-token prompt" in out
    code, out, _ = run(capsys, "decode", "--context", "1024")
    assert code == 0 and "for a 1,024-token prompt" in out


def test_a_bare_config_json_is_named_after_its_folder(tmp_path, capsys):
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 100}
    (tmp_path / "Tiny-Llama").mkdir()
    (tmp_path / "Tiny-Llama" / "config.json").write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "models", str(tmp_path / "Tiny-Llama" / "config.json"))
    assert code == 0 and out.startswith("Tiny-Llama (llama): ")


@pytest.mark.parametrize("argv, needle", [
    (("serving", "--slo-ttft", "-5ms", "--slo-tpot", "30ms"), "--slo-ttft: must be greater than 0, got -5 ms"),
    (("layer", "--launch-overhead", "-1us"), "--launch-overhead: must be at least 0, got -1 us"),
])
def test_a_negative_value_with_a_unit_is_a_value_named_by_its_range_check(capsys, argv, needle):
    """argparse takes "-5ms" for a flag ("expected one argument"); the parser reads it as the value
    it is, so the range check names it."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and needle in err and "expected one argument" not in err


# -- issue 38: the last tracebacks and silent defaults ------------------------------------------

LLAMA_KEYS = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("roofline: error:"), err
    return lines[0]


@pytest.mark.parametrize("key", ["hidden_size", "rope_theta"])  # a count the loader reads, and a cost-neutral key
@pytest.mark.parametrize("command", [["memory"], ["layer"], ["decode"], ["models"]])
def test_an_integer_too_large_for_a_float_in_config_json_is_one_line(tmp_path, capsys, key, command):
    """hidden_size = 10**400 overflowed the first float() it met (OverflowError, a traceback) in every
    command taking --model: a file's integers are bounded at 64 bits when it is read."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_KEYS, key: 10**400}))
    argv = command + ([str(path)] if command == ["models"] else ["--model", str(path)])
    code, out, err = run(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and out == "" and key in line and "401 digits" in line


def test_a_trace_file_integer_past_64_bits_is_one_line(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0,
                                                 "dur": 10**400, "args": {}}]}))
    code, _, err = run(capsys, "profile", str(path))
    assert code == 2 and "traceEvents[0].dur" in one_error_line(err) and "401 digits" in err


def test_the_key_reader_and_check_number_name_a_huge_integer_without_overflowing():
    from roofline.errors import RooflineError, check_number
    from roofline.hf_configs import from_hf_config

    with pytest.raises(RooflineError, match="hidden_size must be a whole number .* 401 digits"):
        from_hf_config({**LLAMA_KEYS, "hidden_size": 10**400}, "x")  # a dict from an API, not a file
    with pytest.raises(RooflineError, match="x must be a finite number, got an integer of 401 digits"):
        check_number("x", 10**400)


def test_a_machine_file_integer_past_64_bits_is_one_line(tmp_path, capsys):
    f = tmp_path / "m.toml"
    f.write_text('[machines.x]\nname = "x"\nmemory_bytes_per_s = { value = 3000000000000, source = "https://x" }\n'
                 f'[machines.x.peak_flops_per_s]\nbf16 = {{ value = {10**116}, source = "https://x" }}\n')
    code, _, err = run(capsys, "layer", "--machine", str(f))
    assert code == 2 and "peak_flops_per_s.bf16.value" in one_error_line(err) and "117 digits" in err


@pytest.mark.parametrize("argv", [
    ["sweep", "--over", "batch", "--values", "1,2", "--machine", ""],
    ["sweep", "--over", "machines", "--machine", "h100-sxm,,a100-80gb"],
    ["sweep", "--over", "machines", "--machine", ",,"],
    ["plot", "roofline", "--model", "", "-o", "x.png"],
    ["decode", "--model", " "],
    ["layer", "--machine", " "],
])
def test_an_empty_name_is_refused_not_taken_as_the_default(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and "an empty" in one_error_line(err)
    assert not (tmp_path / "x.png").exists()


def test_get_machine_refuses_an_empty_name():
    from roofline.errors import RooflineError
    from roofline.machines import get_machine

    with pytest.raises(RooflineError, match="an empty name"):
        get_machine("  ")


@pytest.mark.parametrize("value", ["-inf", "-Infinity", "-nan"])
def test_a_negative_infinity_is_named_not_taken_for_a_flag(capsys, value):
    code, _, err = run(capsys, "gemm", "8192", value, "768")
    line = one_error_line(err)
    assert code == 2 and value in line and "required" not in line


def test_a_split_search_past_its_budget_is_refused_before_it_runs(capsys):
    """--disagg-search 64 --requests 40 ran past 120 s: 63 splits x (a flood of 8 x 256 x D requests + 16 runs
    of 40 x 64 + 2 checks of 4 x 40 x 64); the floods alone are 8 x 256 x (1 + ... + 63) = 2048 x 2016 = 4,128,768."""
    import time

    from roofline.errors import DISAGG_BUDGET_REQUESTS
    from roofline.serving.disagg import split_search_requests

    assert split_search_requests(64, 40, 256) > 4_128_768 > DISAGG_BUDGET_REQUESTS
    # G = 2: one split, a flood of max(80, 2048) + 16 x 80 + 2 x 320 = 2048 + 1280 + 640
    assert split_search_requests(2, 40, 256) == 3968
    t0 = time.perf_counter()
    code, out, err = run(capsys, "serving", "--requests", "40", "--slo-ttft", "500ms", "--slo-tpot", "30ms",
                         "--disagg-search", "64")
    line = one_error_line(err)
    assert code == 2 and "--disagg-search 64" in line and f"{DISAGG_BUDGET_REQUESTS:,}" in line and "fits" in line
    assert time.perf_counter() - t0 < 10


# -- issue 38: a new user's rough edges ---------------------------------------------------------


def test_machines_given_as_sweep_values_are_pointed_to_machine(capsys):
    code, _, err = run(capsys, "sweep", "--over", "machines", "--values", "h100-sxm,mi300x")
    line = one_error_line(err)
    assert code == 2 and "--machine h100-sxm,mi300x" in line and "expected a number" not in line


def test_kernel_takes_a_dtype_as_a_flag_or_a_parameter(capsys):
    # (1 x 4096) @ (4096 x 4096) in fp8, 1 byte an element: 4096 + 4096^2 + 4096 = 16,785,408 bytes
    for argv in (["--dtype", "fp8"], ["dtype=fp8"]):
        code, out, _ = run(capsys, "kernel", "matmul", "M=1", "N=4096", "K=4096", *argv, "--json")
        from roofline.machines import get_machine

        d = json.loads(out)  # and the FLOPs, 2 x 4096^2, at the fp8 peak
        assert code == 0 and d["bytes"] == 4096 + 4096**2 + 4096
        assert d["compute_s"] == pytest.approx(2 * 4096**2 / get_machine("h100-sxm").peak("fp8"))
    code, _, err = run(capsys, "kernel", "matmul", "M=1", "N=4096", "K=4096", "bytes_per_elem=2", "--dtype", "fp8")
    assert code == 2 and "--dtype fp8" in one_error_line(err)


def test_memory_prints_the_kv_bytes_a_token_in_its_table(capsys):
    # Llama 3 8B: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 B = 131 kB a token
    code, out, _ = run(capsys, "memory")
    assert code == 0 and "kv cache per token (each further one, per GPU): 131 kB" in out


def test_tokens_take_binary_prefixes_and_help_says_8k_is_8000(capsys):
    code, out, _ = run(capsys, "layer", "--tokens", "8Ki", "--json")
    assert code == 0 and json.loads(out)["tokens"] == 8192
    with pytest.raises(SystemExit):
        main(["layer", "--help"])
    assert "8k = 8,000, 8Ki = 8,192" in capsys.readouterr().out


def test_a_mistyped_command_gets_a_suggestion_and_a_bare_roofline_its_usage(capsys):
    code, _, err = run(capsys, "lyer")
    assert code == 2 and "did you mean layer?" in one_error_line(err)
    code, out, _ = run(capsys)
    assert code == 0 and out.startswith("usage: roofline") and "layer" in out


def test_suggestions_rank_names_that_begin_with_the_typed_one_first():
    from roofline.errors import close_names

    assert close_names("h100", ["v100", "h100-sxm", "h200", "h100-nvl"])[:2] == ["h100-nvl", "h100-sxm"]
    assert close_names("lyer", ["layer", "machines"]) == ["layer"]


def test_gemm_on_b200_counts_its_waves(capsys):
    # 4096^3 in 128x128 tiles: 32 x 32 = 1,024 tiles on 148 SMs: 7 waves, the last 1,024 - 6 x 148 = 136
    code, out, _ = run(capsys, "gemm", "4096", "4096", "4096", "--machine", "b200")
    assert code == 0 and "7 on 148 SMs; the last runs 136 of 148 tiles" in out


def test_kernel_says_it_is_the_bare_roofline_and_at_the_plates_model_agrees_with_layer(capsys):
    """Issue 38: `kernel` defaults to the bare roofline while `layer` uses the plate's model, so one
    matmul got two times with no word. kernel's table names the model it priced at, and at the
    plate's settings it gives layer's out proj (8,192 tokens x 4,096 x 4,096) exactly."""
    # 2 x 8192 x 4096 x 4096 = 274.88 GFLOP / 989 TFLOP/s = 277.94 us at e_c 1, e_m 1, no launch
    code, out, _ = run(capsys, "kernel", "matmul", "M=8192", "N=4096", "K=4096")
    assert code == 0 and "277.94 us at e_c 1, e_m 1, launch 0 us" in out
    code, out, _ = run(capsys, "kernel", "matmul", "M=8192", "N=4096", "K=4096", "--compute-efficiency", "0.7",
                       "--memory-efficiency", "0.85", "--launch-overhead", "3us", "--json")
    kernel = json.loads(out)
    assert code == 0 and kernel["time_s"] == pytest.approx(2 * 8192 * 4096**2 / 989e12 / 0.7 + 3e-6, rel=1e-12)
    code, out, _ = run(capsys, "layer", "--json")  # the plate: 8,192 tokens, e_c 0.7, e_m 0.85, 3 us
    (out_proj,) = [op for op in json.loads(out)["ops"] if op["name"] == "out proj"]
    assert out_proj["time_s"] == pytest.approx(kernel["time_s"], rel=1e-12)


def test_sweep_help_says_where_a_list_of_machines_goes(capsys):
    # issue 38: `--over machines --values h100-sxm,mi300x` read the names as numbers, and the help did
    # not say the list goes in --machine A,B,C
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "machines (their list in --machine A,B,C" in " ".join(capsys.readouterr().out.split())
