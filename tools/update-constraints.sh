#!/usr/bin/env bash
# Re-pin the test environment: every package the tests install (the web, web-test, torch, dev and
# measured extras and all they pull in), resolved afresh in a new virtual environment from today's releases,
# written to constraints.txt with its exact versions. test.sh installs with `-c constraints.txt`, so
# CI and every developer's ./test.sh take these versions until this script is run again and its
# change committed (run the suite with it first). The runtime dependencies in pyproject.toml keep
# their ranges: a user's `pip install .` is not pinned.
#
#   tools/update-constraints.sh         # about 5 minutes on a 2-core machine; needs the package index
#
# torch is left out: test.sh pins it itself (==2.13.0, the CPU wheel on disk), and a pin of its
# local version (2.13.0+cpu) would exist on no index. Generated with Python 3.11, the machines'.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
pip() { "$tmp/venv/bin/python3" -m pip --disable-pip-version-check --quiet "$@"; }
pip install torch==2.13.0
pip install '.[web,web-test,torch,dev,measured]'
{
    echo "# The test environment's exact versions: test.sh installs with -c constraints.txt."
    echo "# Made by tools/update-constraints.sh on $(date -u +%Y-%m-%d) with $("$tmp/venv/bin/python3" -V);"
    echo "# run it again to move to newer releases, then ./test.sh, then commit both."
    pip freeze --all --exclude-editable | grep -viE '^(roofline|torch|pip|setuptools|wheel|nvidia-.*|triton)(==| @)' | LC_ALL=C sort -f
} > constraints.txt.new
mv constraints.txt.new constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) packages pinned"
