#!/usr/bin/env bash
# Sets up everything pcaptools needs on a fresh Debian/Ubuntu machine (idempotent):
#   system packages: tshark (Wireshark 4.0.x on Debian 12: our reference), tcpdump; with --test
#   also chromium (headless, for tests/report/test_browser.py)
#   a virtualenv in .venv with pcaptools installed (editable) and the test dependencies
#   the optional compiled per-frame modules (scripts/build_accel.py; skipped with PCAPTOOLS_PURE=1),
#   built in the background while apt and pip install the rest
# Usage: scripts/setup.sh [--test]     (--test also installs the test dependency group)
# Every step says what it does and how long it took; a run with nothing left to do takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }
step_start=$SECONDS
done_step() { say "  done in $((SECONDS - step_start)) s"; step_start=$SECONDS; }

# apt waits this long for a dpkg lock held by another apt/dpkg (unattended-upgrades often runs
# for minutes on a machine that has just booted) instead of failing at once
LOCK_WAIT_S=${PCAPTOOLS_APT_LOCK_WAIT:-600}

need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  # optional: without it (and without root or sudo to install it) the browser test skips
  if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1; then
    need+=(chromium)
  else
    say "chromium is not installed: tests/report/test_browser.py will be skipped"
  fi
fi
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
  say "please install these system packages: ${need[*]}"
  exit 1
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating the virtualenv .venv with $("$PY" --version 2>&1)"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade "pip>=25.1"

# Optional: compile the per-frame modules with Cython (same tables, a third less CPU; needs gcc and
# the Python headers). Without them, or with PCAPTOOLS_PURE=1, pcaptools runs as pure Python.
# The build needs only Cython and the sources, so it runs in the background while apt and pip
# install the rest (its lines, "build_accel: ...", come as it goes); setup waits for it at the
# end. build_accel.py says how long it will take and reports each module as it is compiled.
build_pid=""
trap '[ -n "$build_pid" ] && kill "$build_pid" 2>/dev/null; true' EXIT
if [ -z "${PCAPTOOLS_PURE:-}" ] || [ "${PCAPTOOLS_PURE}" = "0" ]; then
  if .venv/bin/python -m pip install -q --group accel; then
    say "compiling the optional modules in the background while the rest installs"
    .venv/bin/python scripts/build_accel.py --if-stale &
    build_pid=$!
  else
    say "Cython could not be installed: pcaptools runs as pure Python (same results, slower)"
  fi
else
  say "PCAPTOOLS_PURE is set: the optional compiled modules are not built (pure Python)"
fi
done_step

if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  say "installing system packages with apt: ${need[*]} (a minute or two, mostly downloads;" \
      "if another apt or dpkg holds the dpkg lock, waits up to ${LOCK_WAIT_S} s for it)"
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections || true
  # DPkg::Lock::Timeout makes apt wait for the dpkg lock; apt-get update's lock on the package
  # lists is waited for here (every 10 s, at most LOCK_WAIT_S in all)
  apt_opts=(-o "DPkg::Lock::Timeout=${LOCK_WAIT_S}")
  waited=0
  apt_get() {
    local out
    while :; do
      if out=$(DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_opts[@]}" "$@" 2>&1); then
        return 0
      fi
      if grep -qE "Could not get lock|Unable to acquire|is held by process" <<<"$out" \
         && [ "$waited" -lt "$LOCK_WAIT_S" ]; then
        [ "$waited" -eq 0 ] && say "another apt or dpkg holds the apt lock" \
          "($(grep -oE 'held by process [0-9]+( \([^)]*\))?' <<<"$out" | head -n 1 || true)):" \
          "waiting for it (at most ${LOCK_WAIT_S} s)"
        sleep 10; waited=$((waited + 10))
        continue
      fi
      echo "$out" >&2
      return 1
    done
  }
  if ! apt_get update -qq || ! apt_get install -y -qq --no-install-recommends "${need[@]}"; then
    say "apt-get failed (its message is above). If it says the dpkg lock is held, another"
    say "package manager is still running (see: ps -e -o pid,etime,cmd | grep -E 'apt|dpkg'):"
    say "let it finish, or install ${need[*]} yourself, then run $0 again."
    exit 1
  fi
  done_step
fi

if [ "${1:-}" = "--test" ]; then
  say "installing pcaptools and its test dependencies into .venv with pip (a few minutes the" \
      "first time, mostly downloads; seconds when they are there)"
else
  say "installing pcaptools and its dependencies into .venv with pip (about a minute the first" \
      "time, mostly downloads; seconds when they are there)"
fi
# --no-compile: pip would write bytecode for every module of every package (plotly alone ships
# thousands pcaptools never imports: 12 of the 27 s of a fresh install here, 17 of 45 s with
# the test dependencies); the import below writes it for the modules pcaptools runs, once, even
# when PYTHONDONTWRITEBYTECODE is set (pure Python: the build may still be running)
if [ "${1:-}" = "--test" ]; then
  .venv/bin/python -m pip install -q --no-compile -e ".[wireshark,parquet]" --group test
else
  .venv/bin/python -m pip install -q --no-compile -e .
fi
env -u PYTHONDONTWRITEBYTECODE PCAPTOOLS_PURE=1 .venv/bin/python -c \
  "import pcaptools, pcaptools.cli, pcaptools.report, cryptography.hazmat.primitives.ciphers.aead"
done_step

if [ -n "$build_pid" ]; then
  say "waiting for the compiled modules (scripts/build_accel.py, started above)"
  if ! wait "$build_pid"; then
    say "compiled modules not built: pcaptools runs as pure Python (same results, slower)"
  fi
  build_pid=""
  done_step
fi
say "ready: .venv/bin/pcap-report --help (or: source .venv/bin/activate; pcap-report --help)"
