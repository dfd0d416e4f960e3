#!/usr/bin/env bash
# Sets up (system packages + .venv) and runs the whole test suite, one pytest process per core.
# Extra arguments go to pytest (scripts/test.sh tests/test_cli.py runs one file; -x stops at the
# first failure).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
if [ $# -eq 0 ]; then
  echo "test: running the whole test suite (about 11 min on 2 idle cores; less with more cores)" >&2
fi
# the tests run in one process per core (pytest-xdist; a file's tests stay in one process, so a
# capture a test module loads once is loaded once); PCAPTOOLS_TEST_WORKERS=0 runs them in this one
exec .venv/bin/python -m pytest -q -n "${PCAPTOOLS_TEST_WORKERS:-auto}" --dist loadfile \
  --durations=15 "$@"
