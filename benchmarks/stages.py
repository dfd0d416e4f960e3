"""Where the per-frame time goes: the chain of ``load()`` cut after each stage, on one capture.

    python benchmarks/stages.py CAPTURE KEYS [--repeats 3] [--out results.json]

Stages, each a fresh child process timed with ``time.process_time()`` around the loop only
(imports and interpreter start excluded), run round-robin ``--repeats`` times, medians:

``read``     ``open_capture(...).frames()``: the reader alone, one ``RawFrame`` per record;
``decode``   plus ``PacketDecoder.decode`` (link, IP, TCP headers -> ``TcpSegment``);
``analyse``  plus ``TcpAnalyzer.feed`` (Wireshark's tcp.analysis: stream index, sequence
             analysis, flags) on every TCP segment;
``tcp``      ``pcaptools.load(payloads=False, packets=False)``: the TCP-only pass (tracker,
             reassembly bookkeeping, per-connection tables);
``packets``  ``load(payloads=False)``: plus the packets table;
``full``     ``load(keylog=KEYS)``: every table (TLS decryption, HTTP/1, HTTP/2, SSE,
             WebSocket).

Each stage runs with the compiled build when one is there and with ``PCAPTOOLS_PURE=1``, so
the table shows what the build buys at each step. A ``frames`` column checks that every stage
saw the same frames.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
stage, cap, keys = sys.argv[1], sys.argv[2], sys.argv[3]
import pcaptools, pcaptools._accel as acc
from pcaptools.diagnostics import Diagnostics
from pcaptools.io import open_capture
from pcaptools.net.decode import PacketDecoder, TcpSegment
from pcaptools.tcp.analysis import TcpAnalyzer
n = 0
t = time.process_time()
if stage in ("read", "decode", "analyse"):
    diag = Diagnostics()
    dec = PacketDecoder(diag)
    an = TcpAnalyzer(diag)
    with open_capture(cap, diag) as reader:
        if stage == "read":
            for raw in reader.frames():
                n += 1
        elif stage == "decode":
            decode = dec.decode
            for raw in reader.frames():
                n += 1
                decode(raw)
        else:
            decode, feed = dec.decode, an.feed
            for raw in reader.frames():
                n += 1
                pkt = decode(raw)
                if type(pkt) is TcpSegment:
                    feed(pkt)
else:
    kw = {"tcp": {"payloads": False, "packets": False}, "packets": {"payloads": False},
          "full": {"keylog": keys}}[stage]
    c = pcaptools.load(cap, **kw)
    n = c.summary.frames
cpu = time.process_time() - t
print(json.dumps({"cpu_s": cpu, "frames": n, "accel": acc.summary()}))
"""

STAGES = ("read", "decode", "analyse", "tcp", "packets", "full")


def _run(stage: str, cap: Path, keys: Path, pure: bool) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PCAPTOOLS_PURE", None)
    if pure:
        env["PCAPTOOLS_PURE"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD, stage, str(cap), str(keys)], env=env,
                         capture_output=True, text=True, check=True, timeout=1800).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def measure(cap: Path, keys: Path, repeats: int) -> dict[str, Any]:
    runs: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    load = [round(os.getloadavg()[0], 2)]
    for _ in range(repeats):
        for stage in STAGES:
            for pure in (False, True):
                runs.setdefault((stage, pure), []).append(_run(stage, cap, keys, pure))
    load.append(round(os.getloadavg()[0], 2))
    rows = []
    for stage in STAGES:
        c, p = runs[(stage, False)], runs[(stage, True)]
        rows.append({"stage": stage, "frames": c[0]["frames"],
                     "compiled_s": round(statistics.median(r["cpu_s"] for r in c), 3),
                     "pure_s": round(statistics.median(r["cpu_s"] for r in p), 3),
                     "accel": c[0]["accel"]})
    return {"capture": str(cap), "file_size": cap.stat().st_size, "repeats": repeats,
            "date": time.strftime("%Y-%m-%d"), "load_average": load, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("keys", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="merge into this JSON file (key stages)")
    args = ap.parse_args(argv)
    res = measure(args.capture, args.keys, args.repeats)
    for r in res["rows"]:
        print(f"{r['stage']:8} {r['frames']:>9,} frames  compiled {r['compiled_s']:7.2f} s  "
              f"pure {r['pure_s']:7.2f} s")
    if args.out:
        data = json.loads(args.out.read_text()) if args.out.is_file() else {}
        data["stages"] = res
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
