#!/usr/bin/env bash
# Sets up (system packages + .venv) and runs the whole test suite. Extra arguments go to pytest
# (scripts/test.sh tests/test_cli.py runs one file; -x stops at the first failure).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
if [ $# -eq 0 ]; then
  echo "test: running the whole test suite (about 30 min on 2 cores; fewer with more cores)" >&2
fi
exec .venv/bin/python -m pytest -q "$@"
