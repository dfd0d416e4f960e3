#!/usr/bin/env bash
# Run every fuzz harness for SECONDS each (default 20), one after the other, from the repo root.
# Corpora and crash files go to $PCAPTOOLS_FUZZ_WORK (default /tmp/pcaptools-fuzz); a summary
# line per harness (executions, corpus size, crashes) is printed at the end.
# Usage: fuzz/run.sh [SECONDS] [HARNESS...]
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-20}
shift || true
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
WORK=${PCAPTOOLS_FUZZ_WORK:-/tmp/pcaptools-fuzz}
export PCAPTOOLS_FUZZ_WORK=$WORK
mkdir -p "$WORK/logs"
if ! "$PY" -c "import atheris" 2>/dev/null; then
  echo "fuzz/run.sh: atheris is not installed (pip install atheris)" >&2
  exit 1
fi
NAMES=("$@")
[ ${#NAMES[@]} -eq 0 ] && mapfile -t NAMES < <("$PY" -m fuzz list)
status=0
for name in "${NAMES[@]}"; do
  log="$WORK/logs/$name.log"
  "$PY" -m fuzz run "$name" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=60 \
      -print_final_stats=1 >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(ls "$WORK/corpus/$name" 2>/dev/null | wc -l)
  crashes=$(ls "$WORK/crashes/$name" 2>/dev/null | wc -l)
  echo "$name: rc=$rc executions=$execs corpus=$corpus crash_files=$crashes log=$log"
  [ $rc -ne 0 ] && status=1
done
exit $status
