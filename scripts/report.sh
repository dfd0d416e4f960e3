#!/usr/bin/env bash
# Sets up pcaptools and writes the HTML report of the shipped demo capture (or of the capture given).
#   scripts/report.sh                       -> demo.report.html from captures/demo.pcapng
#                                              (decrypted with its key log, captures/demo.keys)
#   scripts/report.sh my.pcapng -o r.html   -> any pcap-report arguments
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -eq 0 ]; then set -- captures/demo.pcapng --keylog captures/demo.keys -o demo.report.html; fi
exec .venv/bin/pcap-report "$@"
