#!/usr/bin/env bash
# Instructions of one pcaptools.load(), counted by valgrind (cachegrind): the measure that
# resolves a 1 % change on a shared machine, where CPU seconds do not.
#
#   benchmarks/instructions.sh TREE CAPTURE ['LOAD OPTIONS']
#   benchmarks/instructions.sh . /tmp/pcaptools-bench/base.pcap
#   benchmarks/instructions.sh /work/wt-x /tmp/pcaptools-bench/base.pcap 'payloads=False, packets=False'
#
# Prints the G instructions of `load(CAPTURE, keylog=CAPTURE.keys, OPTIONS)` with the pcaptools
# of TREE (its compiled build if it has one; PCAPTOOLS_PURE=1 for pure Python): a child that
# imports and loads minus a child that only imports. The count repeats exactly from run to run
# only with: PYTHONHASHSEED=0 (set and dict order), OPENBLAS_NUM_THREADS=1 (numpy's BLAS
# threads spin while they wait, a different number of instructions every run), no address
# randomisation (setarch -R) and the tree's .pyc files written beforehand (else the first run
# after an edit counts the compiling). Needs valgrind; interpreter: PYTHON, default .venv.
set -euo pipefail
TREE=$(cd "$1" && pwd); CAP=$(realpath "$2"); OPTS=${3:-}
KEYS=${CAP%.*}.keys
PY=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
# The child runs in TREE: ``python -c`` puts its working directory first on sys.path, before
# PYTHONPATH. Until 2026-12-07 it ran where the script was started, so a count for another
# TREE started from a checkout measured that checkout's pcaptools (benchmarks/PROFILE.md).
run() {
  local out; out=$(mktemp)
  (cd "$TREE" && env -u PYTHONDONTWRITEBYTECODE PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 \
    PYTHONPATH="$TREE" setarch "$(uname -m)" -R valgrind --tool=cachegrind --cache-sim=no \
    --cachegrind-out-file=/dev/null "$PY" -c "$1" 2>"$out" >/dev/null)
  grep -E "I\s+refs" "$out" | tr -d ',' | awk '{print $NF}'; rm -f "$out"
}
env -u PYTHONDONTWRITEBYTECODE "$PY" -m compileall -q "$TREE/pcaptools" >/dev/null 2>&1 || true
A=$(run "import pcaptools, pandas")
B=$(run "import pcaptools, pandas; pcaptools.load('$CAP', keylog='$KEYS'${OPTS:+, $OPTS})")
"$PY" -c "print(f'{($B - $A) / 1e9:.4f} G instructions in load()  (import: {$A / 1e9:.4f} G)')"
