#!/usr/bin/env bash
# Install everything the tests need, then run them all. CI (.ci/run) runs exactly this.
#   - Debian's chromium for the browser test (nothing downloads a browser),
#   - the CPU build of PyTorch 2.13.0 (a file already on disk; a bare `torch` would pull a CUDA build),
#   - the package with its web, test and dev extras.
# Every test must run: a skip (other than the GPU tier on a machine without CUDA) fails the run.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
pip() { python3 -m pip --disable-pip-version-check --quiet "$@"; }
pip install torch==2.13.0
pip install -e '.[web,web-test,torch,dev]'
ROOFLINE_NO_SKIP=1 python3 -m pytest "$@"
