"""Every example in README.md and docs/*.md runs as shown. Each page's code blocks run in order in
one scratch folder, so a block can use a file an earlier block of the same page wrote:

- a block of `$ roofline ...` lines (a plain fence): each command runs in-process and must print
  exactly the lines under it, up to the next `$ ` line or the fence; a line `...` stands for any
  number of lines the page leaves out;
- a ```bash block: runs in bash (`roofline` is this Python's `-m roofline`) and must exit 0;
- a ```python block: runs as a script and must not raise;
- a block right under `<!-- file: NAME -->` is written to NAME (a machine file, a sample export).

A block right under `<!-- not run: WHY -->` is skipped (it installs, serves, needs a GPU or an
NVIDIA profiler, or measures for minutes: the reason says which and which test covers it); under
`<!-- output not compared: WHY -->` its commands run and must exit 0, but what they print is measured
on the machine that runs them. Any other fence (output, text, a formula) is not a command.
"""

import os
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from roofline.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*(not run|output not compared|file):\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    info: str  # the fence's language ("" for a plain fence)
    text: str
    marker: str | None  # "not run", "output not compared", "file" or None
    note: str  # the marker's reason or file name


def blocks(path: Path) -> list[Block]:
    lines, found, i = path.read_text().splitlines(), [], 0
    while i < len(lines):
        fence = re.fullmatch(r"```(\w*)", lines[i])
        if not fence:
            i += 1
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = MARKER.fullmatch(lines[j].strip()) if j >= 0 else None
        end = lines.index("```", i + 1)
        found.append(Block(path.name, i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n",
                           mark.group(1) if mark else None, mark.group(2) if mark else ""))
        i = end + 1
    return found


def transcript(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a block of `$ ` lines."""
    pairs = []
    for part in re.split(r"^\$ ", text, flags=re.M)[1:]:
        command, _, output = part.partition("\n")
        pairs.append((command, output))
    # a blank line parts two commands of one block
    return [(c, o[:-1] if i < len(pairs) - 1 and o.endswith("\n\n") else o) for i, (c, o) in enumerate(pairs)]


def matches(expected: str, out: str) -> bool:
    pattern = "".join(r"(?:.*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected.splitlines())
    return re.fullmatch(pattern, out) is not None


def console_commands() -> list[str]:
    return [c for p in PAGES for b in blocks(p) if b.info == "" for c, _ in transcript(b.text)]


def run_block(block: Block, capsys):
    where = f"{block.page}:{block.line}"
    if block.marker == "file":
        Path(block.note).parent.mkdir(parents=True, exist_ok=True)
        Path(block.note).write_text(block.text)
    elif block.info in ("bash", "sh"):
        script = f'roofline() {{ "{sys.executable}" -m roofline "$@"; }}\nset -e\n' + block.text
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{where}: exit {done.returncode}\n{done.stderr[-2000:]}"
    elif block.info == "python":
        Path("block.py").write_text(block.text)
        runpy.run_path("block.py", run_name="__main__")
        capsys.readouterr()
    elif block.info == "":
        for command, expected in transcript(block.text):
            argv = shlex.split(command)
            assert argv[0] == "roofline", f"{where}: `$ {command}` is not a roofline command"
            capsys.readouterr()
            code = main(argv[1:])
            out, err = capsys.readouterr()
            assert code == 0, f"{where}: `{command}` exited {code}: {err}"
            if block.marker != "output not compared":
                assert matches(expected, out), f"{where}: `{command}` prints\n{out}\nthe page shows\n{expected}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_example_runs_as_shown(page, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for block in blocks(page):
        if block.marker != "not run":
            run_block(block, capsys)


def test_markers_say_why():
    for page in PAGES:
        for block in blocks(page):
            assert block.marker is None or block.note, f"{block.page}:{block.line}: a marker without a reason"
            if block.info in ("bash", "sh", "python") or transcript(block.text):
                continue
            assert block.marker in (None, "file"), f"{block.page}:{block.line}: a marker on a block that is not run"


def test_the_shown_outputs_are_all_checked():
    # the examples test_cli and test_plan_cli once located in README by hand are among those run here
    commands = set(console_commands())
    for command in ("roofline layer --model llama3-8b --machine h100-sxm --tokens 8192",
                    "roofline kernel matmul M=1 N=4096 K=4096",
                    "roofline decode --model llama3-8b --machine h100-sxm",
                    "roofline train --model llama3-8b --tokens 15e12 --gpus 1024 --mfu 0.4",
                    "roofline memory --model llama3-70b --machine h100-sxm",
                    "roofline serving --model llama3-8b --machine h100-sxm --concurrency 64 --price 2.5",
                    "roofline sweep --over tokens --machine h100-sxm,mi300x --values 128,512,2048,8192,32768",
                    "roofline sweep --over machines",
                    "roofline sweep --over tokens --machine h100-sxm,mi300x --values 128,1024 --csv",
                    "roofline sweep --over batch --values 1:1024:log:11"):
        assert command in commands, command
    first_screen = (ROOT / "README.md").read_text().splitlines()[:60]
    assert any(line.startswith("pip install . && roofline layer") for line in first_screen)
    assert any(line.startswith("./test.sh") for line in first_screen)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_pages_link_only_to_files_and_headings_that_exist():
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
            if "://" in target:
                continue
            path = (page.parent / target) if target else page
            assert path.exists(), f"{page.name}: link to {target}"
            if anchor and path.suffix == ".md":
                assert anchor in anchors(path), f"{page.name}: link to {target}#{anchor}"
