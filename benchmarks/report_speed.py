"""How long the HTML report of a small capture takes, and how big it is.

Each capture is measured in a fresh Python process (so the first render pays what a
``pcap-report`` run pays: imports, template compilation, plotly.js read from disk), repeated
``--repeat`` times; the median of each phase is printed:

- ``import``: ``import pcaptools`` and ``pcaptools.report`` (start-up)
- ``load``: ``pcaptools.load(capture, keylog=...)`` (the key log beside it, ``X.keys``, if any)
- ``report``: ``render_report(cap)`` the first time in the process (the work beyond start-up)
- ``again``: a second ``render_report(cap)`` in the same process (no first-use costs)
- ``cpu``: the CPU time of the first ``render_report`` (less sensitive than the wall time to
  a machine shared with other work)
- ``MB``: the size of the page

    python benchmarks/report_speed.py captures/http1-basic.pcap captures/demo.pcapng
    python benchmarks/report_speed.py --tree /path/to/other/checkout captures/demo.pcapng

``--tree`` measures another checkout's pcaptools (e.g. main before a change) with the same
interpreter. The machine's load shows in every number: compare runs made together.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import pcaptools
from pcaptools.report import render_report
t1 = time.perf_counter()
path = sys.argv[1]
keys = os.path.splitext(path)[0] + ".keys"
cap = pcaptools.load(path, keylog=keys if os.path.isfile(keys) else None)
t2, c2 = time.perf_counter(), time.process_time()
page = render_report(cap)
t3, c3 = time.perf_counter(), time.process_time()
render_report(cap)
t4 = time.perf_counter()
print(json.dumps({"file": pcaptools.__file__, "import": t1 - t0, "load": t2 - t1,
                  "report": t3 - t2, "again": t4 - t3, "cpu": c3 - c2,
                  "MB": len(page.encode()) / 1e6}))
"""


def measure(tree: Path, capture: Path, repeat: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    runs = []
    for _ in range(repeat):
        # cwd: ``python -c`` puts the working directory first on sys.path
        out = subprocess.run([sys.executable, "-c", CHILD, str(capture.resolve())], env=env,
                             cwd=tree, capture_output=True, text=True, check=True, timeout=600)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[0]["file"].startswith(str(tree.resolve())), runs[0]["file"]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "file"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout to measure (default: this)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'capture':28} {'import s':>9} {'load s':>7} {'report s':>9} {'again s':>8} "
          f"{'cpu s':>6} {'MB':>6}   ({args.tree}, median of {args.repeat})")
    for c in args.captures:
        m = measure(args.tree, c, args.repeat)
        print(f"{c.name:28} {m['import']:9.2f} {m['load']:7.2f} {m['report']:9.2f} "
              f"{m['again']:8.2f} {m['cpu']:6.2f} {m['MB']:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
