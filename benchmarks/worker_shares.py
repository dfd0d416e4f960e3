"""CPU seconds of each worker of a ``load(path, workers=N)``, one worker at a time.

    python benchmarks/worker_shares.py CAPTURE KEYS N [--only K ...] [--tree DIR ...]

Runs ``pipeline.run(CAPTURE, LoadOptions(keylog=KEYS, shard=(k, N)))`` for each worker ``k``
in a fresh child process, one after the other (so each has the machine to itself), and prints
its CPU seconds (the pass and its tables, imports excluded), connections and packets rows.
The slowest worker bounds the wall time of the parallel load on N free cores; a worker with
few connections (``--only``, with a large N) shows the floor every worker pays whatever its
share (reading and decoding every frame). ``--tree`` runs the pcaptools of other checkouts
(``PYTHONPATH``, each with its own build), alternately, to compare them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
from pcaptools import pipeline
from pcaptools.pipeline import LoadOptions
k, n = int(sys.argv[2]), int(sys.argv[3])
t = time.process_time()
r = pipeline.run(sys.argv[1], LoadOptions(keylog=sys.argv[4], shard=(k, n)))
print(json.dumps({"cpu_s": time.process_time() - t, "connections": len(r.tables["connections"]),
                  "packets": len(r.tables["packets"])}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("keys", type=Path)
    ap.add_argument("n", type=int, help="number of workers")
    ap.add_argument("--only", type=int, nargs="*", help="these workers only (default all)")
    ap.add_argument("--tree", nargs="*", default=[str(Path(__file__).resolve().parent.parent)],
                    help="pcaptools checkouts to run (default this one)")
    args = ap.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for tree in args.tree:
        rows = []
        for k in (args.only if args.only else range(args.n)):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.capture.resolve()), str(k), str(args.n),
                 str(args.keys.resolve())],
                cwd="/", env={**env, "PYTHONPATH": tree}, capture_output=True, text=True,
                check=True)
            d = json.loads(out.stdout)
            rows.append(d["cpu_s"])
            print(f"{tree}: worker {k} of {args.n}: {d['cpu_s']:.2f} CPU s, "
                  f"{d['connections']} connections, {d['packets']} packets rows", flush=True)
        print(f"{tree}: slowest {max(rows):.2f} s, mean {sum(rows) / len(rows):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
