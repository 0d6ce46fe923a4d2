#!/usr/bin/env bash
# Install everything the tests need, then run them all. Used by CI (.ci/run) and by the README.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m pip install --quiet --disable-pip-version-check -e '.[dev]'
python3 -m pytest "$@"
