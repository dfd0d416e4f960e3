#!/usr/bin/env bash
# Sets up (system packages + .venv) and runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
exec .venv/bin/python -m pytest -q "$@"
