#!/usr/bin/env bash
# Install everything the tests need, then run them all. CI (.ci/run) runs exactly this.
#   - Debian's chromium for the browser tests (nothing downloads a browser): skipped when it is at
#     /usr/bin/chromium, on PATH or at $ROOFLINE_CHROMIUM; apt-get runs through sudo for a user
#     who is not root; without any, the browser tests are skipped with a note (outside CI only),
#   - the CPU build of PyTorch 2.13.0: pip's find-links folder holds its wheel
#     (torch-2.13.0+cpu, a file already on disk), which satisfies ==2.13.0; a bare `torch` from the
#     index would pull a CUDA build,
#   - the package with its web, test, dev and measured extras, at the exact versions of constraints.txt
#     (tools/update-constraints.sh re-pins them), so a release overnight changes nothing here.
# ./test.sh --fast: the edit loop, the same install then everything but the slow, browser, fuzz and
# docs tiers (pyproject.toml's markers); both on every core; further arguments go to pytest.
# Every test must run: a skip (other than the GPU tier on a machine without CUDA, and the browser
# tests where test.sh found no Chromium) fails the run.
set -euo pipefail
cd "$(dirname "$0")"
have_chromium() {  # the places tests/web_harness.py's chromium_path looks
    { [ -n "${ROOFLINE_CHROMIUM:-}" ] && [ -f "$ROOFLINE_CHROMIUM" ] && [ -x "$ROOFLINE_CHROMIUM" ]; } ||
        [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1
}
if ! have_chromium && command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        as_root=(env)
    elif command -v sudo >/dev/null 2>&1; then
        as_root=(sudo env)
    else
        as_root=()
    fi
    if [ ${#as_root[@]} -gt 0 ]; then
        "${as_root[@]}" apt-get update -qq &&
            "${as_root[@]}" DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ||
            echo "test.sh: apt-get install chromium failed" >&2
    fi
fi
if ! have_chromium; then
    if [ "${CI:-}" = true ]; then
        echo "test.sh: no Chromium, and CI must run the browser tests" >&2
        exit 1
    fi
    echo "test.sh: no Chromium found: the browser tests are skipped. Install it (Debian: sudo apt-get install" \
         "chromium) or set ROOFLINE_CHROMIUM=/path/to/chromium, then run ./test.sh again." >&2
    export ROOFLINE_NO_BROWSER=1  # tests/conftest.py: then a browser test's skip does not fail the run
fi
# A Python that pip may not install into (a normal user's system Python, or Debian's own, which is
# "externally managed", PEP 668) gets a virtual environment in .venv, made once and reused; inside
# a venv already (the README's way) or as root on a Python of its own (CI), the tests use that one.
in_venv() { python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; }
externally_managed() {
    python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'
}
if ! in_venv && { [ "$(id -u)" -ne 0 ] || externally_managed; }; then
    if [ ! -x .venv/bin/python3 ]; then
        echo "test.sh: making a virtual environment in .venv for the test dependencies" >&2
        python3 -m venv .venv || {
            echo "test.sh: python3 -m venv failed: install the venv module (Debian: sudo apt-get install python3-venv)" \
                 "or activate a virtual environment yourself, then run ./test.sh again." >&2
            exit 1
        }
    fi
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
pip() { python3 -m pip --disable-pip-version-check --quiet "$@"; }
pip install torch==2.13.0
pip install -c constraints.txt -e '.[web,web-test,torch,dev,measured]'
if [ "${1:-}" = --fast ]; then
    shift
    exec python3 -m pytest -m 'not (slow or browser or fuzz or docs)' -n auto "$@"
fi
# every core (pytest-xdist): one worker took 16-17 min on the 2-core machine, past CI's 15; two, 9.5 min
ROOFLINE_NO_SKIP=1 python3 -m pytest -n auto --dist worksteal "$@"
