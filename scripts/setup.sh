#!/usr/bin/env bash
# Sets up everything pcaptools needs on a fresh Debian/Ubuntu machine (idempotent):
#   system packages: tshark (Wireshark 4.0.x on Debian 12: our reference), tcpdump; with --test
#   also chromium (headless, for tests/report/test_browser.py)
#   a virtualenv in .venv with pcaptools installed (editable) and the test dependencies
#   the optional compiled per-frame modules (scripts/build_accel.py; skipped with PCAPTOOLS_PURE=1)
# Usage: scripts/setup.sh [--test]     (--test also installs the test dependency group)
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  # optional: without it (and without root or sudo to install it) the browser test skips
  if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1; then
    need+=(chromium)
  else
    echo "setup: chromium is not installed: tests/report/test_browser.py will be skipped" >&2
  fi
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "setup: please install these system packages: ${need[*]}" >&2
    exit 1
  fi
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing system packages: ${need[*]}" >&2
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections || true
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade "pip>=25.1"
if [ "${1:-}" = "--test" ]; then
  .venv/bin/python -m pip install -q -e ".[wireshark,parquet]" --group test
else
  .venv/bin/python -m pip install -q -e .
fi

# Optional: compile the per-frame modules with Cython (same tables, a quarter less CPU; needs gcc and
# the Python headers). Without them, or with PCAPTOOLS_PURE=1, pcaptools runs as pure Python.
if [ -z "${PCAPTOOLS_PURE:-}" ] || [ "${PCAPTOOLS_PURE}" = "0" ]; then
  if ! { .venv/bin/python -m pip install -q --group accel \
         && .venv/bin/python scripts/build_accel.py --if-stale; }; then
    echo "setup: compiled modules not built: pcaptools runs as pure Python (same results, slower)" >&2
  fi
fi
