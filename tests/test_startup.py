"""A start that loads only what it runs (issue 37): `import roofline` and `roofline --version` import
no numpy, `roofline layer` no serving simulator, planner, tracer or web stack, while every public name
still resolves. Which modules load is checked here, in a fresh interpreter; how long a start takes
is benchmarks/bench_cli_startup.py's (timings are no test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")

# the modules of other paths: the numerics, the serving simulator, the planners, the tracer, the edges
HEAVY = ("numpy", "roofline.serving.scheduler", "roofline.serving.search", "roofline.serving.results",
         "roofline.plan.memory", "roofline.plan.precision", "roofline.plan.model_ops", "roofline.plan.step",
         "roofline.trace", "roofline.measured", "roofline.web", "matplotlib", "torch", "fastapi")


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (its output discarded)."""
    probe = ("import contextlib, io, json, sys\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             + "".join(f"    {line}\n" for line in code.splitlines())
             + "print(json.dumps(sorted(sys.modules)))\n")
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    return set(json.loads(out.stdout))


def test_import_roofline_loads_none_of_the_library():
    loaded = loaded_after("import roofline")
    assert sorted(m for m in loaded if m.startswith("roofline")) == ["roofline", "roofline.lazy"]
    assert "numpy" not in loaded


def test_version_loads_no_numpy_and_no_command():
    loaded = loaded_after("from roofline.cli import main\n"
                          "try:\n    main(['--version'])\nexcept SystemExit as stop:\n    assert stop.code == 0\n"
                          "else:\n    raise AssertionError('--version did not exit')")
    assert not {m for m in loaded if m.startswith(HEAVY)}
    assert "roofline.kernels" not in loaded and "roofline.hf_configs" not in loaded


def test_layer_loads_its_path_only():
    loaded = loaded_after("from roofline.cli import main\nassert main(['layer', '--json']) == 0")
    assert {"roofline.blocks", "roofline.cost", "roofline.machines", "numpy"} <= loaded  # its own path
    assert not {m for m in loaded if m.startswith(HEAVY[1:])}


def test_version_answers_as_argparse_did(capsys):
    from roofline.cli import build_parser, main

    with pytest.raises(SystemExit) as fast_exit:
        main(["--version"])
    fast = capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--version"])
    assert fast_exit.value.code == exit_.value.code == 0
    assert capsys.readouterr().out == fast and fast.startswith("roofline ")


@pytest.mark.parametrize("package", ["roofline", "roofline.plan", "roofline.serving"])
def test_every_public_name_resolves(package):
    import importlib

    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module)


def test_a_submodule_does_not_displace_the_name_it_shares():
    import importlib

    import roofline.plan

    importlib.import_module("roofline.plan.model_ops")  # the import system sets roofline.plan.model_ops to it
    from roofline.plan import model_ops

    assert callable(model_ops) and model_ops is sys.modules["roofline.plan.model_ops"].model_ops
    assert roofline.plan.model_ops is model_ops


def test_a_submodule_loads_on_attribute_access_and_a_missing_name_is_refused():
    loaded = loaded_after("import roofline\nassert roofline.units.US == 1e-6\nassert callable(roofline.trace)")
    assert "roofline.units" in loaded
    import roofline

    with pytest.raises(AttributeError, match="no_such_name"):
        roofline.no_such_name  # noqa: B018
