#!/usr/bin/env python3
"""Instructions of each layer of ``load()``, counted by callgrind: the yardstick for rewriting
the per-frame path one layer at a time (issue #20).

    python benchmarks/layers.py CAPTURE [--keylog KEYS] [--out results.json]

Python functions are invisible to callgrind, and the layers of the payload stack run as
Python in the normal build (``pcaptools._accel.MODULES``). So this script copies
``pcaptools/`` (without its build) and ``scripts/build_accel.py`` into a temporary directory
and builds every candidate module there (``build_accel.py --candidates``, about a minute on 2
cores): every layer then is a C function of its own. Compiling the payload stack unchanged
costs and saves nothing (``benchmarks/PROFILE.md``: 5.2863 against 5.2809 G on ``base.pcap``),
so the counts are those of the normal build, attributed. The checkout and its build are not
touched.

One child process runs ``pcaptools.load(CAPTURE, keylog=KEYS)`` and reads every table, under
``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0``, ``OPENBLAS_NUM_THREADS=1`` and no
address randomisation (``setarch -R``), as ``benchmarks/instructions.sh`` does: the counts
repeat exactly from run to run. About 5 minutes for ``base.pcap`` (55,000 frames).

For each layer the script prints its *inclusive* count: its function together with everything
that function calls, the layers it feeds included. So the rows overlap and do not add up.
Each row also prints instructions per unit (a frame, a TLS record, an event) from the
number of rows of the table that counts that unit.

Needs valgrind (``callgrind_annotate`` comes with it), Cython and a C compiler.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: (label, Cython function of the layer, the table whose rows are its units, unit name).
#: The function is named as Cython names it in C, module and qualified name; a ``cpdef``
#: or ``cdef`` function has a C body (``__pyx_f_``) that both C callers and its Python
#: wrapper call, and that one is taken when present, else the Python wrapper (``__pyx_pw_``).
LAYERS: tuple[tuple[str, str, str, str, str | None, str | None], ...] = (
    ("load_capture: the pass and the tables", "pcaptools.pipeline", "load_capture", "", "packets", "frame"),
    ("frame loop (every layer below but the end)", "pcaptools.frameloop", "feed_frames", "", "packets", "frame"),
    ("pcap reader (batches)", "pcaptools.io.pcap", "PcapParser", "_next_batch", "packets",
     "frame"),
    ("decoder", "pcaptools.net.decode", "PacketDecoder", "decode", "packets", "frame"),
    ("TCP tracker per segment (with the payload stack)", "pcaptools.tcp.tracker", "TcpTracker", "segment", "packets",
     "frame"),
    ("TCP analyser", "pcaptools.tcp.analysis", "TcpAnalyzer", "feed_known", "packets", "frame"),
    ("packets table rows", "pcaptools.tables.packets", "PacketsBuilder", "add_capped",
     "packets", "frame"),
    ("stream bytes to the observers (the payload stack)", "pcaptools.tcp.tracker", "TcpTracker", "_bytes", None,
     None),
    ("TLS observer (the connections' payload inside it)", "pcaptools.protocols.tls.observer",
     "TlsObserver", "feed", None, None),
    ("HTTP/1 observer (and what follows an upgrade)", "pcaptools.protocols.http1.observer",
     "Http1Observer", "feed", None, None),
    ("HTTP/2 observer (SSE of its streams inside it)", "pcaptools.protocols.http2.observer",
     "Http2Observer", "feed", None, None),
    ("SSE parser", "pcaptools.protocols.sse", "SseParser", "feed", "sse_events", "event"),
    ("WebSocket observer", "pcaptools.protocols.websocket.observer", "WebSocketObserver",
     "feed", "ws_frames", "frame"),
    ("events to the table builders (emit)", "pcaptools.pipeline", "_set_up", "emit", None,
     None),
    ("realtime_events builder", "pcaptools.tables.realtime_tables", "RealtimeEventsBuilder",
     "add_all", "realtime_events", "event"),
    ("WebSocket table builders", "pcaptools.tables.ws_tables", "WsTablesBuilder", "add_all",
     "ws_messages", "message"),
    ("HTTP table builders", "pcaptools.tables.http_tables", "HttpTablesBuilder", "add_all",
     None, None),
    ("TLS table builders", "pcaptools.tables.tls_tables", "TlsTablesBuilder", "add",
     "tls_records", "record"),
    ("tables at the end", "pcaptools.pipeline", "_finish_tables", "", None, None),
)

CHILD = r"""
import json, sys
import pcaptools, pcaptools._accel as acc
cap = pcaptools.load(sys.argv[1], keylog=sys.argv[2] or None)
rows = {n: len(df) for n, df in cap.tables.items()}
compiled = [m for m in acc.CANDIDATES
            if not getattr(sys.modules.get(m), "__file__", ".py").endswith(".py")]
print(json.dumps({"rows": rows, "compiled": compiled, "candidates": len(acc.CANDIDATES)}))
"""


def _mangle(module: str, qual: tuple[str, ...]) -> str:
    """Cython's C name prefix: each component as its length and the text, then ``_``."""
    parts = [*module.split("."), *qual]
    return "".join(f"{len(p)}{p}_" for p in parts)


def symbol_patterns(module: str, cls: str, fn: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(C body, Python wrapper) patterns of a function or method as Cython names it."""
    qual = (cls, fn) if fn else (cls,)
    mod = _mangle(module, ())
    name = "_".join(qual)
    c_body = re.compile(rf"__pyx_f_{re.escape(mod)}{len(cls)}{re.escape(name)}$"
                        if fn else rf"__pyx_f_{re.escape(mod)}{re.escape(name)}$")
    # the wrapper carries a number before the last name part: ..._13Http2Observer_3feed,
    # ..._7_set_up_9emit, ..._22load_capture
    last = qual[-1]
    head = "".join(f"{len(p)}{p}_" for p in qual[:-1])
    wrapper = re.compile(rf"__pyx_pw_{re.escape(mod)}{re.escape(head)}\d+{re.escape(last)}$")
    return c_body, wrapper


_LINE = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(?:\S*?:)?(\S+?)(?:'\d+)?\s+\[")


def inclusive_counts(annotated: str) -> dict[str, int]:
    """function -> inclusive instructions, from ``callgrind_annotate --inclusive=yes``
    (a function listed under several files keeps its largest count)."""
    out: dict[str, int] = {}
    for line in annotated.splitlines():
        m = _LINE.match(line)
        if m:
            n = int(m.group(1).replace(",", ""))
            name = m.group(2)
            if n > out.get(name, -1):
                out[name] = n
    return out


def layer_counts(counts: dict[str, int]) -> list[tuple[str, int | None, str]]:
    """(label, inclusive instructions or None when the function was not found, its symbol)"""
    res = []
    for label, module, cls, fn, _table, _unit in LAYERS:
        c_body, wrapper = symbol_patterns(module, cls, fn)
        found = [(n, s) for s, n in counts.items() if c_body.search(s)]
        if not found:
            found = [(n, s) for s, n in counts.items() if wrapper.search(s)]
        if found:
            n, s = max(found)
            res.append((label, n, s))
        else:
            res.append((label, None, ""))
    return res


def _build(tmp: Path) -> None:
    shutil.copytree(ROOT / "pcaptools", tmp / "pcaptools",
                    ignore=shutil.ignore_patterns("_compiled", "__pycache__", "*.so", "*.c"))
    (tmp / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "build_accel.py", tmp / "scripts" / "build_accel.py")
    subprocess.run([sys.executable, str(tmp / "scripts" / "build_accel.py"), "--candidates"],
                   check=True, timeout=1800)


def measure(cap: Path, keys: Path | None, log: Any = print) -> dict[str, Any]:
    for tool in ("valgrind", "callgrind_annotate", "setarch"):
        if shutil.which(tool) is None:
            raise SystemExit(f"layers.py needs {tool} (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="pcaptools-layers-") as d:
        tmp = Path(d)
        log("building every candidate module in a copy of pcaptools/ ...")
        _build(tmp)
        env = dict(os.environ, PYTHONPATH=str(tmp), PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
        for k in ("PCAPTOOLS_PURE", "PYTHONDONTWRITEBYTECODE"):
            env.pop(k, None)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tmp / "pcaptools")],
                       env=env, check=False, capture_output=True)
        out_file = tmp / "callgrind.out"
        log(f"counting load({cap.name}) under callgrind (minutes) ...")
        t0 = time.monotonic()
        r = subprocess.run(
            ["setarch", os.uname().machine, "-R", "valgrind", "--tool=callgrind",
             f"--callgrind-out-file={out_file}", sys.executable, "-c", CHILD, str(cap),
             str(keys) if keys else ""],
            env=env, capture_output=True, text=True, timeout=7200, check=True,
            cwd=tmp)  # (not the caller's directory: ``-c`` puts it first on sys.path)
        child = json.loads(r.stdout.strip().splitlines()[-1])
        if len(child["compiled"]) != child["candidates"]:
            raise SystemExit(f"only {len(child['compiled'])} of {child['candidates']} candidate "
                             "modules ran compiled: the counts would not show every layer")
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out_file)],
            capture_output=True, text=True, check=True).stdout
        total = re.search(r"([\d,]+)\s+\([\s\d.]+%\)\s+PROGRAM TOTALS", annotated)
        counts = inclusive_counts(annotated)
        seconds = time.monotonic() - t0
    rows = child["rows"]
    layers = []
    for (label, n, sym), (_l, _m, _c, _f, table, unit) in zip(layer_counts(counts), LAYERS,
                                                             strict=True):
        units = rows.get(table) if table else None
        layers.append({"layer": label, "instructions": n, "symbol": sym, "unit": unit,
                       "units": units,
                       "per_unit": round(n / units) if n is not None and units else None})
    return {"capture": str(cap), "keylog": str(keys) if keys else None,
            "date": time.strftime("%Y-%m-%d"),
            "program_instructions": int(total.group(1).replace(",", "")) if total else None,
            "callgrind_seconds": round(seconds), "compiled_modules": len(child["compiled"]),
            "candidates": child["candidates"],
            "rows": rows, "layers": layers}


def table(res: dict[str, Any]) -> str:
    lines = ["| layer (inclusive: with what it calls) | G instructions | per unit |",
             "|---|---:|---|"]
    for r in res["layers"]:
        n = r["instructions"]
        g = "not found" if n is None else f"{n / 1e9:.3f}"
        per = f"{r['per_unit']:,} per {r['unit']} ({r['units']:,})" if r["per_unit"] else ""
        lines.append(f"| {r['layer']} | {g} | {per} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--keylog", type=Path, help="default: CAPTURE with .keys, if it exists")
    ap.add_argument("--out", type=Path, help="merge into this JSON file (key layers)")
    args = ap.parse_args(argv)
    keys = args.keylog
    if keys is None and args.capture.with_suffix(".keys").is_file():
        keys = args.capture.with_suffix(".keys")
    res = measure(args.capture, keys)
    print(f"{res['program_instructions'] / 1e9:.3f} G instructions in the whole process "
          f"(interpreter, imports, load, exit); {res['compiled_modules']} of "
          f"{res['candidates']} candidate modules compiled")
    print(table(res))
    if args.out:
        data = json.loads(args.out.read_text()) if args.out.is_file() else {}
        data["layers"] = res
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
