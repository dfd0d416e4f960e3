"""Start-up cost of ``import pcaptools`` and of a small load (issue #20): wall time of fresh
interpreters, median of N runs alternated between two checkouts (before/after).

    PCAPTOOLS_PURE=1 python benchmarks/imports.py BEFORE_DIR AFTER_DIR [N]

Each run is ``python -c CODE`` with ``PYTHONPATH`` set to one checkout and the working
directory outside both (``-c`` puts the working directory first on ``sys.path``). Set
``PCAPTOOLS_PURE=1`` when only one checkout has the compiled modules. Results in
``benchmarks/IMPORTS.md``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CAPTURE = Path(__file__).resolve().parents[1] / "captures" / "http1-basic.pcap"
CODES = {
    "import pcaptools": "import pcaptools",
    "load(http1-basic.pcap)": f"import pcaptools; pcaptools.load({str(CAPTURE)!r})",
}


def main(argv: list[str]) -> None:
    trees = {"before": argv[0], "after": argv[1]}
    n = int(argv[2]) if len(argv) > 2 else 7
    runs: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in CODES}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(n):
            for what, code in CODES.items():
                for tree, path in trees.items():
                    env = dict(os.environ, PYTHONPATH=path)
                    t0 = time.perf_counter()
                    subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True)
                    runs[(tree, what)].append(time.perf_counter() - t0)
    print(f"median of {n} alternated runs, PCAPTOOLS_PURE={os.environ.get('PCAPTOOLS_PURE', '')}")
    for what in CODES:
        for tree in trees:
            v = runs[(tree, what)]
            print(f"{what:24} {tree:6} {statistics.median(v):.3f} s "
                  f"(min {min(v):.3f}, max {max(v):.3f})")


if __name__ == "__main__":
    main(sys.argv[1:])
