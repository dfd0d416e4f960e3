"""``pcaptools.wireshark``: the direct tshark engine against the pyshark engine, a few fields.

    python benchmarks/wireshark_fields.py                    # captures/h2-sse-chat + base.pcap
    python benchmarks/wireshark_fields.py --runs 3 --pyshark-runs 1
    python benchmarks/wireshark_fields.py --capture x.pcapng --keylog x.keys

For each capture and engine: the median wall time of ``--runs`` calls (after one warm-up call,
so the cached ``tshark -G fields`` glossary and ``tshark -v`` are not counted; the first call of a
session pays them once, printed separately), the CPU seconds of this process and its children
(tshark) for those calls, frames per wall second, and whether both engines returned the same
DataFrame. ``/tmp/pcaptools-bench/base.pcap`` (41 MB, 37,689 frames, recorded by
``benchmarks/record_big.py``) is skipped when absent. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pcaptools  # noqa: E402
from pcaptools.wireshark import Engine, find_tshark, tshark_version  # noqa: E402

FIELDS = [
    "frame.number",
    "frame.time_epoch",
    "tcp.stream",
    "tcp.flags",
    "http2.streamid",
    "http2.type",
]
BENCH = Path("/tmp/pcaptools-bench")


def _cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _frames(path: Path) -> int:
    return len(pcaptools.wireshark(path, ["frame.number"]))


def measure(path: Path, keylog: Path | None, engine: Engine, runs: int) -> dict[str, Any]:
    pcaptools.wireshark(path, FIELDS, keylog=keylog, engine=engine, max_frames=10)  # warm-up
    walls = []
    cpu0 = _cpu()
    df = None
    for _ in range(runs):
        t = time.perf_counter()
        df = pcaptools.wireshark(path, FIELDS, keylog=keylog, engine=engine)
        walls.append(time.perf_counter() - t)
    cpu = (_cpu() - cpu0) / runs
    assert df is not None
    return {
        "engine": engine,
        "rows": len(df),
        "wall": statistics.median(walls),
        "cpu": cpu,
        "df": df,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--runs", type=int, default=3, help="timed calls per capture and engine (median)"
    )
    ap.add_argument(
        "--pyshark-runs",
        type=int,
        default=None,
        help="timed pyshark calls on captures above 10,000 frames (default: --runs)",
    )
    ap.add_argument("--capture", type=Path, action="append", help="measure this capture instead")
    ap.add_argument("--engines", default="tshark,pyshark", help="comma separated (default both)")
    ap.add_argument(
        "--keylog", type=Path, action="append", help="key log of each --capture, in order"
    )
    args = ap.parse_args(argv)

    if args.capture:
        keys = list(args.keylog or []) + [None] * len(args.capture)
        cases = list(zip(args.capture, keys[: len(args.capture)], strict=True))
    else:
        cases = [(ROOT / "captures" / "h2-sse-chat.pcapng", ROOT / "captures" / "h2-sse-chat.keys")]
        base = BENCH / "base.pcap"
        if base.is_file():
            cases.append((base, BENCH / "base.keys" if (BENCH / "base.keys").is_file() else None))
        else:
            print(f"({base} absent: run benchmarks/record_big.py to record it)")

    tshark = find_tshark()
    t = time.perf_counter()
    version = tshark_version(tshark)
    first = time.perf_counter() - t
    t = time.perf_counter()
    pcaptools.wireshark(cases[0][0], ["frame.number"], max_frames=1)
    first_call = time.perf_counter() - t
    print(
        f"{version}; pyshark engine through pyshark.FileCapture (PDML); {os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"fields: {', '.join(FIELDS)}; TLS decrypted with the key log when there is one")
    print(
        f"first call of a session: tshark -v {first:.2f} s, then a 1-frame call {first_call:.2f} s "
        "(field glossary from the disk cache, or tshark -G fields when not cached)\n"
    )
    head = (
        f"{'capture':<34} {'MB':>6} {'frames':>7}  {'engine':<8} {'rows':>6} {'wall s':>7} "
        f"{'CPU s':>7} {'frames/s':>9}  same"
    )
    print(head)
    print("-" * len(head))
    for path, keylog in cases:
        frames = _frames(path)
        results = []
        engines = [e for e in ("tshark", "pyshark") if e in args.engines.split(",")]
        for engine in engines:
            runs = args.runs
            if engine == "pyshark" and frames > 10_000 and args.pyshark_runs is not None:
                runs = args.pyshark_runs
            results.append((measure(path, keylog, engine, runs), runs))  # type: ignore[arg-type]
        same = len(results) < 2 or results[0][0]["df"].equals(results[1][0]["df"])
        name = path.name if path.parent == ROOT / "captures" else str(path)
        for r, runs in results:
            print(
                f"{name[-34:]:<34} {path.stat().st_size / 1e6:>6.1f} {frames:>7}  {r['engine']:<8} "
                f"{r['rows']:>6} {r['wall']:>7.2f} {r['cpu']:>7.2f} {frames / r['wall']:>9,.0f}  "
                f"{'yes' if same else 'NO'}  (median of {runs})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
