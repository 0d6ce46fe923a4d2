"""Property (issue 11): whatever command line a user types, with whatever files, the CLI answers
with a result (exit 0) or one line naming the bad flag, value or file (exit 2): never a traceback,
a warning, NaN or infinity, or invalid JSON. A bounded sample of tests/fuzz_harness.py's command
lines (every command and flag, from the parser itself) runs here; benchmarks/fuzz.py runs >= 10,000."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, seed, settings

import fuzz_harness as fh


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    return fh.hostile_files(folder / "in"), fh.outputs(folder)


@pytest.fixture(autouse=True)
def _stopped(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # calibrate's default output lands here
    with fh.stop_before_measuring():
        yield


SHARDS = 4  # 1,200 command lines in four seeded shards of 300: pytest-xdist spreads them over its workers


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_command_line_keeps_the_contract(hostile, shard):
    files, outs = hostile

    @seed(shard)
    @settings(max_examples=1200 // SHARDS, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fh.command_lines(files, outs))
    def prop(argv):
        why = fh.run_case(argv)
        assert why is None, f"roofline {' '.join(map(repr, argv))}: {why}"

    prop()


FILE_COMMANDS = [
    ["layer", "--machine"], ["decode", "--model"], ["memory", "--model"], ["profile"], ["serve", "--machine"],
    ["diagnose", "--measured", "1ms", "--trace"], ["check", "--machine"], ["train", "--machine"],
    ["gemm", "4096", "4096", "4096", "--machine"], ["sweep", "--model"], ["nsight"],
]


@pytest.mark.parametrize("command", FILE_COMMANDS, ids=lambda c: " ".join(c))
def test_every_hostile_file_is_one_line_naming_it(hostile, command):
    """Each hostile file (not UTF-8, a FIFO, a link to /dev/zero, a folder, integers past float
    range, deep JSON, absurd magnitudes, bad tables) given to each command that reads files."""
    files, _ = hostile
    for f in files:
        argv = command + [f]
        why = fh.run_case(argv)
        assert why is None, f"roofline {' '.join(argv)}: {why}"


def test_the_harness_catches_what_it_looks_for(monkeypatch):
    """The contract checks can fail: a command that raises, prints NaN, or says nothing useful."""
    import roofline.cli as cli

    monkeypatch.setattr(cli, "main", lambda argv: (_ for _ in ()).throw(ZeroDivisionError("x")))
    monkeypatch.setattr(fh, "main", cli.main)
    assert "ZeroDivisionError" in fh.run_case(["layer"])
    monkeypatch.setattr(fh, "main", lambda argv: print("total is nan x") or 0)
    assert "nan" in fh.run_case(["layer"])
    monkeypatch.setattr(fh, "main", lambda argv: print('{"mfu": NaN}') or 0)
    assert fh.run_case(["layer", "--json"])  # NaN: printed, and not strict JSON
    import sys

    monkeypatch.setattr(fh, "main", lambda argv: print("roofline: error: something is wrong", file=sys.stderr) or 2)
    assert "names no flag" in fh.run_case(["layer", "--tokens", "5"])
