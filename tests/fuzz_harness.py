"""Adversarial inputs for every command (issue 11): hypothesis strategies that build a command line
from the CLI's own parser (every subcommand, every flag, its choices), values drawn from hostile
pools (denormals, 1e308, NaN, unicode digits, empty strings, sci-notation negatives, huge
integers, units), and hostile input files (not UTF-8, integers beyond float range, deep JSON, a
FIFO, a link to /dev/zero, a folder, bad tables). ``run_case`` runs one command in-process and
returns what broke the contract, or None:

- exit code 0 or 2, never a traceback, never a Python warning;
- an error is exactly one line "roofline: error: ..." that names a flag, a value or a file given;
- no NaN or infinity printed; a --json result parses as strict JSON.

Used by tests/test_cli_fuzz.py (a bounded sample in CI) and benchmarks/fuzz.py (>= 10,000 cases).
The measuring commands (calibrate, check) and serve are stopped at the first step after their
inputs are validated (the timing loops, uvicorn's run): what is fuzzed is their validation.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import warnings
from pathlib import Path

from hypothesis import strategies as st

from roofline.cli import build_parser, main, one_line

NAN_INF = re.compile(r"(?<![A-Za-z_])(nan|inf|infinity)(?![A-Za-z_])", re.IGNORECASE)

# Numbers and near-numbers a user (or a script gone wrong) types.
SPECIAL_VALUES = [
    "0", "-0", "1", "-1", "2", "3", "0.5", "1.5", "7", "64", "128", "4096", "8192", "65536", "131072",
    "5e-324", "1e-300", "2.2e-308", "1e-30", "1e308", "1.8e308", "1e12", "3e9", "1e18", "-1e3", "-5",
    "nan", "NaN", "inf", "-inf", "Infinity", "", " ", "  1", "1 ", "1_000", "0x10", "1e", "e3", "--",
    "١٢", "٣", "１２", "²", "½", "12ms", "3us", "1.5 ms", "2e-3", "12", "12s", "400us", "1h", "-3us",
    "10" * 30, "9" * 400, "0.1", "0.001", "0.0001", "1.0000000001", "True", "None", "null", "[]", "{}",
    "a=b", "M=8192", "N=0", "K=-1", "M=1e308", "=", "M=", "\x00", "\u202e12", "../../etc/passwd",
]
NAME_VALUES = [
    "h100-sxm", "a100-80gb", "mi300x", "b200", "H100-SXM", "h100", "cpu", "cuda", "llama3-8b", "gpt-oss-120b",
    "deepseek-v3", "jamba", "mamba2-2.7b", "gemma3-27b", "qwen3-30b-a3b", "gpt2", "bf16", "fp16", "fp32",
    "fp8", "int4", "fp4", "tf32", "fp64", "BF16", "matmul", "flash_attention", "decode_step", "layernorm",
    "all_reduce", "nvlink", "pcie", "tokens", "batch", "context", "roofline.trace.models:tiny_llama",
    "roofline.trace.models:tiny_gpt2", "os:getcwd", "nope:nope", "roofline.trace.models", ":",
]


def hostile_files(folder: Path) -> list[str]:
    """Write the hostile (and a few good) input files into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    good_machine = ('[sources]\nME = "my datasheet"\n[machines.mine]\nname = "Mine"\n'
                    'memory_bytes_per_s = { value = 1e12, source = "ME" }\n'
                    'peak_flops_per_s.bf16 = { value = 100e12, source = "ME" }\n')
    tiny_config = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    files = {
        "good_machine.toml": good_machine,
        "not_utf8.toml": b"\xff\xfe[machines.x]\nname = '\xe9'\n",
        "huge_int.toml": good_machine.replace("1e12", "1" + "0" * 400),
        "links5.toml": good_machine + "links = 5\n",
        "cache5.toml": good_machine + "cache_levels = 5\n",
        "denormal.toml": good_machine.replace("100e12", "5e-324"),
        "absurd.toml": good_machine.replace("1e12", "1e300"),
        "nan.toml": good_machine.replace("1e12", "nan"),
        "broken.toml": "[machines.x\nname = 'x'\n",
        "empty.toml": "",
        "config.json": json.dumps(tiny_config),
        "config_strings.json": json.dumps({**tiny_config, "hidden_size": "2"}),
        "config_nan.json": json.dumps(tiny_config).replace("256", "NaN"),
        "config_huge.json": json.dumps(tiny_config).replace("256", "9" * 5000),
        "config_unknown.json": json.dumps({**tiny_config, "model_type": "starship"}),
        "config_zero_heads.json": json.dumps({**tiny_config, "num_attention_heads": 0}),
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "trace_huge_ts.json": json.dumps({"traceEvents": [{"ph": "X", "name": "aten::mm", "cat": "cpu_op",
                                                           "ts": 1, "dur": 1}]}).replace('"dur": 1', '"dur": ' + "9" * 400),
        "trace_empty.json": json.dumps({"traceEvents": []}),
        "trace_bad.json": json.dumps({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": "x", "dur": -5,
                                                       "args": {"Input Dims": [[1e308, -1]]}}]}),
        "binary.bin": bytes(range(256)) * 4,
        "plain.txt": "hello\n",
    }
    from test_calibrated import synthetic  # a small calibrated profile, as `roofline calibrate` writes one

    from roofline.measure.machine_file import render_profile

    files["good_profile.toml"] = render_profile(synthetic())
    out = []
    for name, content in files.items():
        p = folder / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        out.append(str(p))
    folder_in = folder / "a_folder.toml"
    folder_in.mkdir(exist_ok=True)
    fifo = folder / "fifo.toml"
    if not fifo.exists():
        os.mkfifo(fifo)
    zero = folder / "zero.toml"
    if not zero.exists():
        zero.symlink_to("/dev/zero")
    out += [str(folder_in), str(fifo), str(zero), str(folder / "missing.toml"), str(folder / "ünïcode ✓.toml")]
    return out


def outputs(folder: Path) -> list[str]:
    """Paths for -o: good ones in ``folder`` and bad ones."""
    (folder / "out").mkdir(parents=True, exist_ok=True)
    o = folder / "out"
    return [str(o / "a.png"), str(o / "b.svg"), str(o / "c.toml"), str(o / "d.txt"), "", ".png", str(o / ".png"),
            str(o / "missing" / "x.png"), str(o), "/proc/x.png", str(o / "x.PNG")]


def _parser_table():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    table = {}
    for name, sp in sub.choices.items():
        positionals, options = [], []
        for a in sp._actions:
            if a.dest == "help":
                continue
            (options if a.option_strings else positionals).append(a)
        table[name] = (positionals, options)
    return table


TABLE = _parser_table()
FILE_DESTS = {"machine", "profile", "trace", "model", "tp_link", "dp_link", "link"}


def value_strategy(action, files: list[str], outs: list[str]):
    pools = [st.sampled_from(SPECIAL_VALUES), st.text(max_size=10),
             st.integers(-(10**20), 10**20).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr)]
    if action.choices:
        choices = [str(c) for c in action.choices]
        return st.one_of(st.sampled_from(choices), st.sampled_from(choices), *pools[:2])
    if action.dest == "output":
        return st.sampled_from(outs)
    if action.dest in FILE_DESTS:
        return st.one_of(st.sampled_from(NAME_VALUES), st.sampled_from(files), *pools[:2])
    if action.dest in ("name", "dtype", "input_dtype", "category", "label", "host", "what", "kernels"):
        return st.one_of(st.sampled_from(NAME_VALUES), *pools[:2])
    return st.one_of(*pools, st.sampled_from(NAME_VALUES))


@st.composite
def command_lines(draw, files: list[str], outs: list[str], commands=None):
    """One argv: a command, its positionals, up to four of its options with values."""
    name = draw(st.sampled_from(sorted(commands or TABLE)))
    positionals, options = TABLE[name]
    argv = [name]
    for a in positionals:
        n = 1 if a.nargs in (None, 1) else draw(st.integers(0 if a.nargs in ("*", "?") else 1, 3))
        argv += [draw(value_strategy(a, files, outs)) for _ in range(n)]
    for a in draw(st.lists(st.sampled_from(options), max_size=4, unique_by=lambda a: a.dest)):
        flag = draw(st.sampled_from(a.option_strings))
        if a.nargs == 0:
            argv.append(flag)
        else:
            value = draw(value_strategy(a, files, outs))
            argv += [f"{flag}={value}"] if value.startswith("-") and draw(st.booleans()) else [flag, value]
    return argv


class Stopped(Exception):
    """Raised where a measuring command would start measuring (or serve would start serving)."""


@contextlib.contextmanager
def stop_before_measuring():
    """calibrate, check and serve stop right after their inputs are validated."""
    import roofline.web.app as web_app

    patches = [(web_app, "uvicorn_config", None)]
    try:
        import roofline.measure.calibration as cal
        import roofline.measure.run_check as chk

        patches += [(cal, "_launch", None), (chk, "bench_round_robin", None), (chk, "block_ops", None)]
    except ImportError:  # no torch: the commands say so in one line
        pass

    def stop(*a, **k):
        raise Stopped

    saved = [(mod, attr, getattr(mod, attr)) for mod, attr, _ in patches]
    import uvicorn

    saved.append((uvicorn.Server, "run", uvicorn.Server.run))
    try:
        for mod, attr, _ in patches:
            setattr(mod, attr, stop)
        uvicorn.Server.run = stop
        yield
    finally:
        for mod, attr, old in saved:
            setattr(mod, attr, old)


def _torch_threads():
    import sys

    torch = sys.modules.get("torch")
    return None if torch is None else torch.get_num_threads()


def run_case(argv: list[str]) -> str | None:
    """Run ``roofline *argv`` in-process: None when it kept the contract, else what broke it."""
    out, err = io.StringIO(), io.StringIO()
    threads = _torch_threads()
    stopped = False
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            code = main(list(argv))
        except Stopped:
            code, stopped = 0, True
        except SystemExit as exc:  # argparse's --help, or a command that exits itself
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - a traceback is exactly what we look for
            import traceback

            return f"raised {type(exc).__name__}: {exc}\n{''.join(traceback.format_exception(exc))[-1500:]}"
        finally:
            if threads is not None and _torch_threads() != threads:
                import torch

                torch.set_num_threads(threads)
    stdout, stderr = out.getvalue(), err.getvalue()
    ours = [w for w in caught if "roofline" in str(w.filename) or issubclass(w.category, RuntimeWarning)]
    if ours:
        return f"warning: {ours[0].category.__name__}: {ours[0].message} ({ours[0].filename}:{ours[0].lineno})"
    if code not in (0, 2):
        return f"exit code {code}; stderr {stderr[-500:]!r}"
    if "Traceback" in stdout + stderr:
        return f"traceback printed: {(stdout + stderr)[-1500:]}"
    if code == 2:
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("roofline: error:"):
            return f"error is not one line: {stderr[-800:]!r}"
        if not _names_an_input(lines[0], argv):
            return f"error names no flag, value or file given: {lines[0]!r}"
        return None
    if stopped:
        return None
    hit = NAN_INF.search(stdout)
    if hit:
        return f"printed {hit.group(0)!r}: ...{stdout[max(0, hit.start() - 200):hit.end() + 100]!r}"
    if "--json" in argv and stdout.strip():
        try:
            json.loads(stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as exc:
            return f"--json output is not strict JSON: {exc}"
    return None


def _names_an_input(line: str, argv: list[str]) -> bool:
    """The error mentions something the user gave: a flag (or its name without dashes, or a word
    of it), a value, a file's name, or the command (for a missing argument, argparse names it)."""
    text = line.lower()
    positionals, options = TABLE.get(argv[0], ([], [])) if argv else ([], [])
    if any(f"argument {a.dest.lower()}" in text for a in positionals):  # argparse names a positional so
        return True
    for token in argv:
        if repr(token).lower() in text:
            return True
        t = token.split("=", 1)[0] if token.startswith("--") else token
        t = t.strip().lower()
        if not t:
            continue
        if t in text or Path(t).name in text or t.lstrip("-") in text or t.lstrip("-").replace("-", "_") in text:
            return True
        if repr(token).lower() in text or one_line(t) in text or repr(t)[1:-1] in text:
            return True
        try:  # a number echoed in another spelling: 1e12 as 1000000000000 or 1e+12
            x = float(t)
            if math.isfinite(x) and (f"{x:g}" in text or (x == int(x) and str(int(x)) in text)):
                return True
        except (ValueError, OverflowError):
            pass
    # argparse: "the following arguments are required", "expected one argument", "invalid choice"
    return any(k in text for k in ("required", "expected one argument", "unrecognized arguments", "invalid choice",
                                   "not allowed with argument", "ambiguous option"))
