"""Peak memory and time of ``load()``, ``pcap-report`` and tshark on a capture of one-SYN
connections.

    python benchmarks/synflood.py /work/bench/syn100k.pcap --connections 100000
    python benchmarks/synflood_mem.py /work/bench/syn100k.pcap [--tree DIR] [--modes ...]

Issue #18 (memory per connection): a port scan or SYN flood is the worst case per connection
(every connection one frame). Each measurement runs in its own child process: ``load`` modes
call ``pcaptools.load(capture, ...)`` and report the child's peak RSS (``ru_maxrss``) and the
wall time of the call (imports excluded); ``report`` runs ``pcap-report capture -o X.html``
(``pcaptools.cli.main``, imports included) and reports the HTML size; ``tshark`` runs
``tshark -r capture -T fields -e frame.number -e tcp.stream`` (output to /dev/null) under
``/usr/bin/time -v`` (its "Maximum resident set size" and elapsed time).

Modes: ``nopackets`` (``packets=False``), ``tcponly`` (``packets=False, payloads=False``),
``default`` (every table), ``out``
(``out=DIR``: the streaming export to Parquet), ``report``, ``tshark``. ``--tree DIR`` runs
pcaptools from another checkout (e.g. the commit before a change, for before/after numbers);
``PCAPTOOLS_PURE`` is passed through. Prints one JSON line per measurement and, with
``--markdown``, a table. Peak memory hardly moves with CPU load; wall times do (other work on
the machine), so note the load average (printed first and last).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_LOAD = r"""
import json, resource, sys, tempfile, time
import pcaptools
path, mode = sys.argv[1], sys.argv[2]
kw = {"nopackets": {"packets": False}, "default": {}, "out": {"out": tempfile.mkdtemp()},
      "tcponly": {"packets": False, "payloads": False}}[mode]
t0 = time.perf_counter()
cap = pcaptools.load(path, **kw)
wall = time.perf_counter() - t0
rows = len(cap.connections) if mode != "out" else cap.rows["connections"]
print(json.dumps({"wall_s": round(wall, 2), "rss_mb": round(
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), "connections": rows}))
"""

_REPORT = r"""
import json, os, resource, sys, time
from pcaptools.cli import main
path, out = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
rc = main([path, "-o", out])
wall = time.perf_counter() - t0
print(json.dumps({"rc": rc, "wall_s": round(wall, 2), "rss_mb": round(
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    "html_mb": round(os.path.getsize(out) / 1e6, 2)}))
"""


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _child(code: str, args: list[str], tree: Path) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    # (-P: not the current directory first on sys.path, so ``tree`` is the pcaptools imported)
    out = subprocess.run([sys.executable, "-P", "-c", code, *args], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _tshark(capture: Path) -> dict[str, object]:
    with open(os.devnull, "w") as null:
        p = subprocess.run(["/usr/bin/time", "-v", "tshark", "-r", str(capture), "-T", "fields",
                            "-e", "frame.number", "-e", "tcp.stream"], stdout=null,
                           stderr=subprocess.PIPE, text=True, check=True)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))  # type: ignore[union-attr]
    el = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", p.stderr)
    parts = [float(x) for x in el.group(1).split(":")]  # type: ignore[union-attr]
    wall = sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
    return {"wall_s": round(wall, 2), "rss_mb": round(rss / 1024)}


def measure(capture: Path, mode: str, tree: Path, html: Path | None = None) -> dict[str, object]:
    if mode == "tshark":
        return _tshark(capture)
    if mode == "report":
        if html is not None:
            html.mkdir(parents=True, exist_ok=True)
            return _child(_REPORT, [str(capture), str(html / f"{capture.stem}.html")], tree)
        with tempfile.TemporaryDirectory() as d:
            return _child(_REPORT, [str(capture), str(Path(d) / "r.html")], tree)
    return _child(_LOAD, [str(capture), mode], tree)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--tree", type=Path, default=ROOT,
                    help="the pcaptools checkout to run (default: this one)")
    ap.add_argument("--modes", default="nopackets,default,out,report,tshark")
    ap.add_argument("--label", default="", help="a name for the tree in the output")
    ap.add_argument("--html", type=Path, help="keep the reports in this folder")
    args = ap.parse_args(argv)
    print(json.dumps({"loadavg_before": _loadavg(), "tree": str(args.tree),
                      "pure": os.environ.get("PCAPTOOLS_PURE", "")}))
    for capture in args.captures:
        for mode in [m for m in args.modes.split(",") if m]:
            t0 = time.monotonic()
            r = measure(capture, mode, args.tree, args.html)
            print(json.dumps({"capture": capture.name, "mode": mode, "label": args.label, **r,
                              "loadavg": _loadavg(),
                              "elapsed_s": round(time.monotonic() - t0, 1)}), flush=True)
    print(json.dumps({"loadavg_after": _loadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
