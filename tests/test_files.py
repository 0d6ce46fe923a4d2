"""Output files (files.write_atomically, used by every -o and by calibrate): the old file or the
whole new one, permissions and symlinks kept, no temporary file left, stale ones cleaned."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from roofline.cli import main
from roofline.files import write_atomically, write_text_atomically


def test_an_existing_file_keeps_its_permissions(tmp_path):
    out = tmp_path / "profile.toml"
    out.write_text("old")
    os.chmod(out, 0o600)
    write_text_atomically(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_new_file_gets_what_open_gives(tmp_path):
    mask = os.umask(0o022)
    try:
        write_text_atomically(tmp_path / "a.toml", "x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "a.toml").stat().st_mode) == 0o644


def test_a_symlink_stays_a_link_and_its_target_is_replaced(tmp_path):
    real = tmp_path / "real" / "plot.png"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "plot.png"
    link.symlink_to(real)
    assert write_atomically(link, lambda tmp: open(tmp, "w").write("new")) == real
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in real.parent.iterdir()) == ["plot.png"]  # no temporary file left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "x.png"
    out.write_text("old")

    def fails(tmp):
        open(tmp, "w").write("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomically(out, fails)
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.png"]


def test_a_killed_writers_temporary_is_removed_on_the_next_write_a_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that is gone (reaped)
    stale = tmp_path / f".p.toml.{dead.pid}.abc123.tmp"
    live = tmp_path / f".p.toml.{os.getppid()}.def456.tmp"  # our parent is alive
    stale.write_text("half")
    live.write_text("half")
    write_text_atomically(tmp_path / "p.toml", "whole")
    assert not stale.exists() and live.exists() and (tmp_path / "p.toml").read_text() == "whole"


def test_plot_writes_through_a_symlink_and_prints_the_path_given(tmp_path, capsys):
    real = tmp_path / "target.svg"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "roof.svg"
    link.symlink_to(real)
    assert main(["plot", "roofline", "--machine", "h100-sxm", "-o", str(link)]) == 0
    assert link.is_symlink() and real.read_text().lstrip().startswith("<?xml")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert f"wrote {link}" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["check", "--machine", ""], ["check", "--machine", " "], ["decode", "--model", ""],
                                  ["check", "--machine", "\x00"], ["decode", "--model", "x\x00.json"]])
def test_an_empty_path_is_named_as_given_not_read_as_the_working_directory(argv, capsys):
    # pathlib reads "" as ".", the folder the command runs in, and os.stat raises ValueError on a NUL:
    # the error must be one line naming what was typed
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("roofline: error:") and "'.'" not in err and repr(argv[-1]) in err
