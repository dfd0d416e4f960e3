"""pcaptools benchmarks: one script that records the traffic, measures, plots and writes the README.

    python benchmarks/run.py                        # everything, default sizes (~15-25 min here)
    python benchmarks/run.py --size-mb 50 --repeats 1 --scaling-base-mb 10   # a quick pass
    python benchmarks/run.py --sections tools,readme  # re-measure one part, keep the others

Sections (``--sections``, comma separated, default all, run in this order):

``record``   records ``big.pcap`` (``--size-mb``, default 300 MB) and ``base.pcap``
             (``--scaling-base-mb``) with their TLS key logs: real nginx and curl, HTTP/1.1 and
             HTTP/2 over TLS 1.2/1.3, in two network namespaces (``benchmarks/record_big.py``).
             Skipped when the files exist in ``--work`` unless ``--rerecord``.
``tools``    pcaptools (all tables with keys; ``packets=False``), tshark one pass ``-T fields``
             with TCP analysis fields, tshark two-pass (``-2``), tshark with the key log and
             HTTP/2 fields, pyshark (JSON and default mode, extrapolated from ``--pyshark-packets``
             packets), scapy ``PcapReader`` (extrapolated from ``--scapy-packets``), a bare dpkt
             loop. Each runs ``--repeats`` times in a fresh child process; medians are reported.
``scaling``  the base capture repeated 1x, 2x, 4x, 8x (new ports per copy,
             ``memory_scaling.repeat_capture``): pcaptools full, pcaptools ``packets=False`` and
             tshark one pass; time and peak RSS plotted to ``benchmarks/scaling.html``.
``many``     ``pcaptools.load_many`` on a directory of captures: serial vs process pool.
``dask``     ``pcaptools.distributed.analyse_directory`` on the same directory: serial vs a
             ``LocalCluster`` with one worker per core.
``startup``  fresh interpreters on a small capture (``captures/demo.pcapng``): the interpreter
             alone, ``import pandas``, ``import pcaptools``, and ``import pcaptools`` with
             ``load()``, alternated, ``--startup-runs`` times (issue #20: a small capture's
             load should be interpreter start, not imports).
``profile``  py-spy on pcaptools over the big capture; the hot-spot tables go into the
             generated part of ``benchmarks/PROFILE.md``.
``readme``   ``benchmarks/README.md`` from ``benchmarks/results.json`` (every section stores
             its numbers there, so sections can be re-run one at a time).

Wall time is measured around each child process (interpreter start and imports included, as
a user would see it); peak RSS is the child's ``ru_maxrss`` from ``wait4`` (the largest of the
process and the children it waited for: pyshark's tshark is included). Every child runs under
coreutils ``timeout``. Big files live in ``--work`` (default ``/tmp/pcaptools-bench``), never
in the repository.

Needs, besides ``scripts/setup.sh --test`` (which brings tshark and tcpdump): for ``record``
nginx, curl, openssl, iproute2 and iptables (Debian 12: ``apt-get install nginx-light curl
openssl iproute2 iptables``; the section names what is missing before it starts), for
``profile`` py-spy, and ``tcptrace`` for its row of ``tools`` (left out of the table when it is
not installed, as pyshark and scapy are).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

RESULTS = HERE / "results.json"
README = HERE / "README.md"
PROFILE = HERE / "PROFILE.md"
SCALING_HTML = HERE / "scaling.html"
SECTIONS = ("record", "tools", "scaling", "many", "dask", "startup", "profile", "readme")
CHILD_TIMEOUT_S = 1800

# --------------------------------------------------------------------------- child programs

OWN_SESSION = """
# Linux's autogroup scheduler (kernel.sched_autogroup_enabled=1) gives every *session* one fair
# share of CPU: all processes of one session together get no more than one other busy session.
# On a machine shared with other work a process pool then cannot beat one process. Each worker
# of the measured pools is moved to a session of its own, as if it were alone on its core.
import os
def own_session():
    try:
        os.setsid()
    except OSError:  # already a session leader
        pass
"""


PCAPTOOLS_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import pcaptools
t1 = time.perf_counter()
cap = pcaptools.load(sys.argv[1], **json.loads(sys.argv[2]))
t2 = time.perf_counter()
print(json.dumps({"frames": cap.summary.frames, "import_s": t1 - t0, "load_s": t2 - t1,
                  "accel": pcaptools._accel.summary(),
                  "rows": {n: len(df) for n, df in cap.tables.items()},
                  "table_mb": {n: df.memory_usage(deep=True).sum() / 1e6
                               for n, df in cap.tables.items()}}))
"""

PCAPTOOLS_OUT_CHILD = """
import json, shutil, sys, tempfile, time
t0 = time.perf_counter()
import pcaptools
t1 = time.perf_counter()
out = tempfile.mkdtemp(prefix="pcaptools-bench-out-")
try:
    cap = pcaptools.load(sys.argv[1], out=out, **json.loads(sys.argv[2]))
    t2 = time.perf_counter()
    held = cap._memory  # the per-connection tables it keeps in memory; the others are files
    print(json.dumps({"frames": cap.summary.frames, "import_s": t1 - t0, "load_s": t2 - t1,
                      "accel": pcaptools._accel.summary(), "rows": dict(cap.rows),
                      "table_mb": {n: df.memory_usage(deep=True).sum() / 1e6
                                   for n, df in held.items()}}))
finally:
    shutil.rmtree(out, ignore_errors=True)
"""

PYSHARK_CHILD = """
import json, sys, time
import pyshark
path, n, mode, keylog = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
t = time.perf_counter()
cap = pyshark.FileCapture(path, use_json=mode == "json", keep_packets=False,
                          override_prefs={"tls.keylog_file": keylog} if keylog else None)
k = tcp = 0
for pkt in cap:
    if "TCP" in pkt:
        tcp += int(pkt.tcp.stream) >= 0
    k += 1
    if k >= n:
        break
el = time.perf_counter() - t
cap.close()
print(json.dumps({"packets": k, "tcp": tcp, "seconds": el}))
"""

SCAPY_CHILD = """
import json, sys, time
t = time.perf_counter()
from scapy.layers.inet import TCP
from scapy.utils import PcapReader
n = int(sys.argv[2]); k = tcp = 0
with PcapReader(sys.argv[1]) as r:
    for pkt in r:
        if TCP in pkt:
            tcp += pkt[TCP].seq >= 0
        k += 1
        if k >= n:
            break
print(json.dumps({"packets": k, "tcp": tcp, "seconds": time.perf_counter() - t}))
"""

DPKT_CHILD = """
import json, sys, time
import dpkt
t = time.perf_counter()
k = tcp = payload = 0
with open(sys.argv[1], "rb") as f:
    for ts, buf in dpkt.pcap.Reader(f):
        k += 1
        eth = dpkt.ethernet.Ethernet(buf)
        ip = eth.data
        if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP):
            tcp += 1
            payload += len(ip.data.data)
print(json.dumps({"packets": k, "tcp": tcp, "payload": payload,
                  "seconds": time.perf_counter() - t}))
"""

TSHARK_TCP_FIELDS = (
    "frame.number", "frame.time_epoch", "frame.len", "ip.src", "ip.dst", "tcp.stream",
    "tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.ack", "tcp.len", "tcp.flags",
    "tcp.window_size", "tcp.analysis.retransmission", "tcp.analysis.fast_retransmission",
    "tcp.analysis.duplicate_ack", "tcp.analysis.out_of_order", "tcp.analysis.lost_segment",
    "tcp.analysis.zero_window", "tcp.analysis.ack_rtt", "tcp.analysis.bytes_in_flight",
)
TSHARK_HTTP2_FIELDS = (
    "frame.number", "tcp.stream", "tls.record.content_type", "tls.handshake.type",
    "http2.streamid", "http2.type", "http2.length", "http2.headers.method",
    "http2.headers.path", "http2.headers.status", "http.request.method", "http.response.code",
)
#: The fields behind pcaptools' tables, in one tshark pass with the key log: TCP analysis
#: (connections, handshakes, retransmissions), TLS records and handshakes (version, cipher,
#: SNI, ALPN), HTTP/2 frames and headers, HTTP/1.x requests and WebSocket frames. Metadata only.
TSHARK_ALL_FIELDS = tuple(dict.fromkeys((
    *TSHARK_TCP_FIELDS, "ipv6.src", "ipv6.dst", "tcp.analysis.initial_rtt",
    *TSHARK_HTTP2_FIELDS, "tls.record.length", "tls.handshake.extensions_server_name",
    "tls.handshake.ciphersuite", "tls.handshake.extensions.supported_version",
    "tls.handshake.extensions_alpn_str", "http2.flags", "http2.headers.authority",
    "http2.headers.content_type", "http.request.uri", "http.content_type", "websocket.opcode",
    "websocket.fin", "websocket.payload_length",
)))
#: ... plus the message bodies that pcaptools' SSE and WebSocket tables parse (event data,
#: message text): tshark prints them as hex.
TSHARK_ALL_PAYLOAD_FIELDS = (*TSHARK_ALL_FIELDS, "http2.data.data", "http.file_data")


def _fields(names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for n in names:
        out += ["-e", n]
    return out


# --------------------------------------------------------------------------- measuring


def run_child(argv: list[str], *, stdout_path: Path | None = None,
              timeout_s: int = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Run argv under ``timeout``; returns wall seconds, peak RSS (MB), exit status and stdout.

    Raises RuntimeError when the child fails (its stderr tail in the message).
    """
    full = ["timeout", "-k", "5", str(timeout_s), *argv]
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as cap_out:
        out_fh = open(stdout_path, "wb") if stdout_path else cap_out  # noqa: SIM115
        try:
            t0 = time.perf_counter()
            # its own session, so its own scheduler autogroup (see OWN_SESSION)
            p = subprocess.Popen(full, stdout=out_fh, stderr=err, cwd=ROOT,
                                 start_new_session=True)
            sampler = _TreeRss(p.pid)
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.perf_counter() - t0
            sampler.stop()
            p.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if stdout_path:
                out_fh.close()
        cap_out.seek(0)
        text = cap_out.read().decode(errors="replace")
        err.seek(0)
        etext = err.read().decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}... exited {p.returncode}: {etext[-800:]}")
    return {"wall_s": wall, "peak_rss_mb": ru.ru_maxrss / 1024, "stdout": text,
            "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "minor_faults": ru.ru_minflt,
            "tree_rss_mb": max(sampler.peak_mb, ru.ru_maxrss / 1024)}


class _TreeRss:
    """Samples the summed RSS of a process group every 50 ms (``ru_maxrss`` is the largest
    single process: for ``workers=N`` the processes run at once and their memory adds up)."""

    def __init__(self, pgid: int) -> None:
        self.pgid, self.peak_mb, self._stop = pgid, 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(0.05):
            total = 0
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    with open(f"/proc/{d}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                    if int(fields[2]) == self.pgid:  # field 5 (pgrp), after pid and (comm)
                        total += int(fields[21]) * page  # field 24: rss in pages
                except (OSError, IndexError, ValueError):
                    continue
            self.peak_mb = max(self.peak_mb, total / 2**20)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=2)


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


Tool = dict[str, Any]


def tool_specs(cap: Path, keys: Path, work: Path, args: argparse.Namespace) -> list[Tool]:
    """What the ``tools`` section runs: name, argv, how to read the output."""
    py = sys.executable
    fields_out = work / "tshark.out"
    full = {"keylog": str(keys), "packets": True, "tls_records": True, "payloads": True}
    return [
        {"name": "pcaptools (all tables, key log)", "key": "pcaptools_full",
         "argv": [py, "-c", PCAPTOOLS_CHILD, str(cap), json.dumps(full)], "kind": "pcaptools"},
        {"name": "pcaptools pure Python, no compiled modules (PCAPTOOLS_PURE=1)",
         "key": "pcaptools_pure",
         "argv": ["env", "PCAPTOOLS_PURE=1", py, "-c", PCAPTOOLS_CHILD, str(cap),
                  json.dumps(full)], "kind": "pcaptools"},
        {"name": "pcaptools workers=2 (all tables, key log, 2 processes)",
         "key": "pcaptools_workers2",
         "argv": [py, "-c", PCAPTOOLS_CHILD, str(cap), json.dumps({**full, "workers": 2})],
         "kind": "pcaptools"},
        {"name": "pcaptools out=DIR (all tables streamed to Parquet, key log)",
         "key": "pcaptools_out",
         "argv": [py, "-c", PCAPTOOLS_OUT_CHILD, str(cap), json.dumps(full)], "kind": "pcaptools"},
        {"name": "pcaptools packets=False", "key": "pcaptools_nopackets",
         "argv": [py, "-c", PCAPTOOLS_CHILD, str(cap), json.dumps({**full, "packets": False})],
         "kind": "pcaptools"},
        {"name": "pcaptools payloads=False, packets=False (TCP only)", "key": "pcaptools_tcp",
         "argv": [py, "-c", PCAPTOOLS_CHILD, str(cap),
                  json.dumps({"packets": False, "payloads": False})], "kind": "pcaptools"},
        {"name": "pcap-report with the key log (load, analyses, HTML page)",
         "key": "pcap_report",
         "argv": [py, "-m", "pcaptools.cli", str(cap), "--keylog", str(keys), "-o",
                  str(work / "report.html")], "kind": "report", "out": work / "report.log"},
        {"name": "tshark -T fields, TCP analysis, one pass", "key": "tshark_1pass",
         "argv": ["tshark", "-r", str(cap), "-n", "-T", "fields", *_fields(TSHARK_TCP_FIELDS)],
         "kind": "tshark", "out": fields_out},
        {"name": "tshark -2 (two-pass), same fields", "key": "tshark_2pass",
         "argv": ["tshark", "-2", "-r", str(cap), "-n", "-T", "fields",
                  *_fields(TSHARK_TCP_FIELDS)], "kind": "tshark", "out": fields_out},
        {"name": "tshark + key log, TLS/HTTP/HTTP2 fields", "key": "tshark_keys_http2",
         "argv": ["tshark", "-r", str(cap), "-n", "-o", f"tls.keylog_file:{keys}", "-T",
                  "fields", *_fields(TSHARK_HTTP2_FIELDS)], "kind": "tshark", "out": fields_out},
        {"name": "tshark + key log, the fields of every pcaptools table (metadata)",
         "key": "tshark_keys_all",
         "argv": ["tshark", "-r", str(cap), "-n", "-o", f"tls.keylog_file:{keys}", "-T",
                  "fields", *_fields(TSHARK_ALL_FIELDS)], "kind": "tshark", "out": fields_out},
        {"name": "tshark + key log, the same fields and the HTTP bodies (SSE/WebSocket text)",
         "key": "tshark_keys_all_payload",
         "argv": ["tshark", "-r", str(cap), "-n", "-o", f"tls.keylog_file:{keys}", "-T",
                  "fields", *_fields(TSHARK_ALL_PAYLOAD_FIELDS)], "kind": "tshark",
         "out": fields_out},
        {"name": f"pyshark JSON mode + key log ({args.pyshark_packets:,} packets, extrapolated)",
         "key": "pyshark_json",
         "argv": [py, "-c", PYSHARK_CHILD, str(cap), str(args.pyshark_packets), "json", str(keys)],
         "kind": "sample"},
        {"name": f"pyshark default mode ({args.pyshark_packets:,} packets, extrapolated)",
         "key": "pyshark_default",
         "argv": [py, "-c", PYSHARK_CHILD, str(cap), str(args.pyshark_packets), "pdml", ""],
         "kind": "sample"},
        {"name": f"scapy PcapReader ({args.scapy_packets:,} packets, extrapolated)",
         "key": "scapy",
         "argv": [py, "-c", SCAPY_CHILD, str(cap), str(args.scapy_packets)], "kind": "sample"},
        {"name": "dpkt read + Ethernet/IP/TCP decode loop", "key": "dpkt",
         "argv": [py, "-c", DPKT_CHILD, str(cap)], "kind": "dpkt"},
        {"name": "tcptrace -l -r -n (per-connection TCP statistics, RTT; C)", "key": "tcptrace",
         "argv": ["tcptrace", "-l", "-r", "-n", str(cap)], "kind": "tcptrace",
         "out": fields_out},
    ]


def _tcptrace_connections(path: Path) -> int:
    """The connection count from tcptrace's header ("N TCP connections traced")."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "TCP connections traced" in line:
                    return int(line.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def measure_tool(spec: Tool, frames: int, file_size: int, repeats: int,
                 log: Callable[[str], None]) -> dict[str, Any]:
    """Run one tool ``repeats`` times; returns medians and per-run numbers."""
    runs = []
    for i in range(repeats):
        r = run_child(spec["argv"], stdout_path=spec.get("out"))
        row: dict[str, Any] = {"wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"],
                               "tree_rss_mb": r["tree_rss_mb"], "cpu_s": r["user_s"] + r["sys_s"],
                               "sys_s": r["sys_s"], "minor_faults": r["minor_faults"]}
        if spec["kind"] == "pcaptools":
            info = json.loads(r["stdout"])
            row.update(frames=info["frames"], load_s=info["load_s"], import_s=info["import_s"],
                       rows=info["rows"], table_mb=info["table_mb"], accel=info.get("accel"))
        elif spec["kind"] == "tshark":
            row["frames"] = _count_lines(spec["out"])
        elif spec["kind"] == "report":  # (the page is the output)
            row["frames"] = frames
        elif spec["kind"] == "tcptrace":  # it prints per connection, not per frame
            row["frames"] = frames
            row["connections"] = _tcptrace_connections(spec["out"])
        else:
            info = json.loads(r["stdout"])
            row["frames"] = info["packets"]
            if spec["kind"] == "sample":
                # extrapolate the whole file from the prefix (time inside the child, which
                # excludes interpreter start-up; that is added back once)
                startup = r["wall_s"] - info["seconds"]
                row["sampled_packets"] = info["packets"]
                row["sampled_s"] = info["seconds"]
                scale = frames / max(1, info["packets"])
                row["wall_s"] = startup + info["seconds"] * scale
                row["cpu_s"] = row["cpu_s"] * scale  # start-up scaled too: a slight over-estimate
                row["sys_s"] = row["sys_s"] * scale
                row["minor_faults"] = round(row["minor_faults"] * scale)
                row["frames"] = frames
        runs.append(row)
        log(f"  {spec['key']} run {i + 1}/{repeats}: {row['wall_s']:.2f} s, "
            f"{row['peak_rss_mb']:.0f} MB")
    wall = statistics.median(r["wall_s"] for r in runs)
    res = {"name": spec["name"], "key": spec["key"], "kind": spec["kind"],
           "wall_s": wall, "wall_min_s": min(r["wall_s"] for r in runs),
           "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
           "tree_rss_mb": statistics.median(r["tree_rss_mb"] for r in runs),
           "cpu_s": statistics.median(r["cpu_s"] for r in runs),
           # (system time and page faults, kept so that runs of the same code on two
           # machines can be compared on them too)
           "sys_s": statistics.median(r["sys_s"] for r in runs),
           "minor_faults": statistics.median(r["minor_faults"] for r in runs),
           "frames": runs[0]["frames"], "packets_per_s": frames / wall,
           "mb_per_s": file_size / wall / 1e6, "runs": runs}
    res["packets_per_cpu_s"] = frames / res["cpu_s"]
    res["mb_per_cpu_s"] = file_size / res["cpu_s"] / 1e6
    if spec["kind"] == "pcaptools":
        res["load_s"] = statistics.median(r["load_s"] for r in runs)
        res["rows"] = runs[0]["rows"]
        res["accel"] = runs[0].get("accel")
        res["table_mb"] = runs[0]["table_mb"]
    if spec["kind"] == "sample":
        res["sampled_packets"] = runs[0]["sampled_packets"]
        res["extrapolated"] = True
    return res


# --------------------------------------------------------------------------- sections


def capture_info(path: Path) -> dict[str, Any]:
    """Frames, file size and duration of a capture (capinfos)."""
    out = subprocess.run(["capinfos", "-M", "-c", "-u", "-T", "-r", str(path)],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    parts = out.strip().split("\t")
    return {"path": str(path), "file_size": path.stat().st_size, "frames": int(parts[1]),
            "duration_s": float(parts[2])}


def sec_record(args: argparse.Namespace, res: dict[str, Any], log: Callable[[str], None]) -> None:
    from record_big import missing_tools, record

    for name, size in (("big", args.size_mb), ("base", args.scaling_base_mb)):
        pcap = args.work / f"{name}.pcap"
        if pcap.exists() and pcap.with_suffix(".keys").exists() and not args.rerecord:
            log(f"record: {pcap} exists, kept (--rerecord to record again)")
            facts = json.loads(pcap.with_suffix(".json").read_text())
        else:
            log(f"record: {pcap} ({size} MB)")
            if problem := missing_tools():
                raise SystemExit(f"record: {problem}")
            facts = record(pcap, size_mb=size, max_seconds=args.record_max_seconds)
        facts.update(capture_info(pcap))
        facts.pop("path", None)
        res.setdefault("captures", {})[name] = facts
        log(f"record: {name}: {facts['frames']:,} frames, {facts['file_size'] / 1e6:.1f} MB, "
            f"{facts['tcp_connections']} connections, dropped {facts['packets_dropped']}")


def _cap_paths(args: argparse.Namespace, name: str) -> tuple[Path, Path]:
    pcap = args.work / f"{name}.pcap"
    if not pcap.exists():
        raise SystemExit(f"{pcap} missing: run the record section first")
    return pcap, pcap.with_suffix(".keys")


def sec_tools(args: argparse.Namespace, res: dict[str, Any], log: Callable[[str], None]) -> None:
    cap, keys = _cap_paths(args, "big")
    info = capture_info(cap)
    out: list[dict[str, Any]] = []
    for spec in tool_specs(cap, keys, args.work, args):
        if args.only_tools and spec["key"] not in args.only_tools:
            continue
        log(f"tools: {spec['name']}")
        reps = args.repeats if spec["kind"] != "sample" else max(1, min(args.repeats, 3))
        try:
            out.append(measure_tool(spec, info["frames"], info["file_size"], reps, log))
        except RuntimeError as exc:  # (a tool not installed here: left out of the table)
            if not any(m in str(exc) for m in ("No module named", "not found",
                                                 "failed to run command")):  # (timeout's)
                raise
            log(f"tools: {spec['name']} skipped: {str(exc).strip().splitlines()[-1]}")
    for name in ("tshark.out", "report.html", "report.log"):
        (args.work / name).unlink(missing_ok=True)
    prev = res.get("tools", {})
    # results of other tools are kept only while they were measured on this same capture
    same = {k: prev.get("capture", {}).get(k) for k in ("file_size", "frames")} == {
        k: info.get(k) for k in ("file_size", "frames")}
    old = {t["key"]: t for t in prev.get("results", [])} if same else {}
    old.update({t["key"]: t for t in out})
    res["tools"] = {"capture": info, "repeats": args.repeats, "results": list(old.values())}


SMALL_CAPTURE = ROOT / "captures" / "demo.pcapng"
STARTUP_CODES = {
    "interpreter": "pass",
    "import pandas": "import pandas",
    "import pcaptools": "import pcaptools",
    "import pcaptools and load()": f"import pcaptools; pcaptools.load({str(SMALL_CAPTURE)!r})",
}


def sec_startup(args: argparse.Namespace, res: dict[str, Any], log: Callable[[str], None]) -> None:
    """Wall seconds of fresh interpreters (``python -c CODE``, outside the repository: ``-c``
    puts the working directory first on ``sys.path``), the codes alternated, medians; bytecode
    written as a user's first run leaves it (``PYTHONDONTWRITEBYTECODE`` unset)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs: dict[str, list[float]] = {k: [] for k in STARTUP_CODES}
    log(f"startup: {len(STARTUP_CODES)} codes x {args.startup_runs} fresh interpreters")
    with tempfile.TemporaryDirectory() as cwd:
        for code in STARTUP_CODES.values():  # one unmeasured run each: bytecode written
            subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True)
        for _ in range(args.startup_runs):
            for key, code in STARTUP_CODES.items():
                t0 = time.monotonic()
                subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True)
                runs[key].append(time.monotonic() - t0)
    res["startup"] = {"capture": str(SMALL_CAPTURE.relative_to(ROOT)),
                      "frames": capture_info(SMALL_CAPTURE)["frames"], "runs": args.startup_runs,
                      "accel": _accel_summary(),
                      "median_s": {k: round(statistics.median(v), 3) for k, v in runs.items()},
                      "runs_s": {k: [round(x, 3) for x in v] for k, v in runs.items()}}


def _accel_summary() -> str:
    """which per-frame modules the children import compiled (``pcaptools._accel.summary()``)"""
    return subprocess.run([sys.executable, "-c", "import pcaptools._accel as a; print(a.summary())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def sec_scaling(args: argparse.Namespace, res: dict[str, Any], log: Callable[[str], None]) -> None:
    from memory_scaling import repeat_capture

    base, keys = _cap_paths(args, "base")
    py = sys.executable
    full = {"keylog": str(keys), "packets": True, "tls_records": True, "payloads": True}
    rows = []
    baseline = _baseline_rss()  # before the runs: what every child starts from
    for factor in args.factors:
        path = args.work / f"scale-x{factor}.pcap"
        if factor == 1:
            shutil.copyfile(base, path)
        else:
            repeat_capture(base, path, factor)
        info = capture_info(path)
        specs = [
            ("pcaptools_full", [py, "-c", PCAPTOOLS_CHILD, str(path), json.dumps(full)],
             "pcaptools"),
            ("pcaptools_nopackets", [py, "-c", PCAPTOOLS_CHILD, str(path),
                                     json.dumps({**full, "packets": False})], "pcaptools"),
            ("pcaptools_tcp", [py, "-c", PCAPTOOLS_CHILD, str(path),
                               json.dumps({"packets": False, "payloads": False})], "pcaptools"),
            ("pcaptools_out", [py, "-c", PCAPTOOLS_OUT_CHILD, str(path), json.dumps(full)],
             "pcaptools"),
            ("tshark_1pass", ["tshark", "-r", str(path), "-n", "-T", "fields",
                              *_fields(TSHARK_TCP_FIELDS)], "tshark"),
        ]
        for key, argv, kind in specs:
            spec = {"name": key, "key": key, "argv": argv, "kind": kind}
            if kind == "tshark":
                spec["out"] = args.work / "tshark.out"
            m = measure_tool(spec, info["frames"], info["file_size"], args.scaling_repeats, log)
            row = {"factor": factor, "tool": key, "frames": info["frames"],
                   "file_mb": info["file_size"] / 1e6, "wall_s": m["wall_s"],
                   "peak_rss_mb": m["peak_rss_mb"], "packets_per_s": m["packets_per_s"],
                   "cpu_s": m["cpu_s"], "wall_min_s": m["wall_min_s"]}
            if kind == "pcaptools":
                row["load_s"] = m["load_s"]
                row["connections"] = m["rows"]["connections"]
                row["tables_mb"] = sum(m["table_mb"].values())
                row["table_mb"] = m["table_mb"]
            rows.append(row)
            log(f"scaling x{factor} {key}: {m['wall_s']:.2f} s, {m['peak_rss_mb']:.0f} MB")
        path.unlink()
    for name in ("tshark.out", "report.html", "report.log"):
        (args.work / name).unlink(missing_ok=True)
    res["scaling"] = {"base": capture_info(base), "rows": rows,
                      "baseline_rss_mb": baseline}
    plot_scaling(res["scaling"])


def _baseline_rss() -> float:
    """Peak RSS of an interpreter that imported pcaptools (and pandas) and did nothing."""
    r = run_child([sys.executable, "-c", "import pcaptools"])
    return float(r["peak_rss_mb"])


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares ``y = a + b*x``; returns (a, b, R²)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return a, b, 1 - ss_res / ss_tot if ss_tot else 1.0


def plot_scaling(sc: dict[str, Any]) -> None:
    """benchmarks/scaling.html: time and peak RSS against the repetition factor."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3, subplot_titles=(
        "wall time (s, median; other load on the machine)",
        "CPU time (s, user+sys): linear, dashed = least-squares fit",
        "peak RSS (MB)"))
    tools = list(dict.fromkeys(r["tool"] for r in sc["rows"]))
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
    for i, tool in enumerate(tools):
        color = palette[i % len(palette)]
        rows = [r for r in sc["rows"] if r["tool"] == tool]
        x = [r["factor"] for r in rows]
        fig.add_trace(go.Scatter(x=x, y=[r["wall_s"] for r in rows], mode="lines+markers",
                                 name=tool, legendgroup=tool, line={"color": color}),
                      row=1, col=1)
        if all("cpu_s" in r for r in rows):
            cpu = [r["cpu_s"] for r in rows]
            a, b, r2 = linear_fit([float(f) for f in x], cpu)
            fig.add_trace(go.Scatter(x=x, y=cpu, mode="markers", name=f"{tool} CPU",
                                     legendgroup=tool, showlegend=False,
                                     marker={"color": color, "size": 9}), row=1, col=2)
            fig.add_trace(go.Scatter(x=x, y=[a + b * f for f in x], mode="lines",
                                     name=f"fit {a:.2f} + {b:.2f}·x s (R² {r2:.3f})",
                                     legendgroup=tool,
                                     line={"dash": "dash", "width": 1, "color": color}),
                          row=1, col=2)
        fig.add_trace(go.Scatter(x=x, y=[r["peak_rss_mb"] for r in rows], mode="lines+markers",
                                 name=f"{tool} RSS", legendgroup=tool, showlegend=False,
                                 line={"color": color}), row=1, col=3)
    fig.add_hline(y=sc["baseline_rss_mb"], line_dash="dash", annotation_text="import pcaptools",
                  row=1, col=3)
    base_mb = sc["base"]["file_size"] / 1e6
    fig.update_xaxes(title_text=f"repetitions of the {base_mb:.0f} MB base capture",
                     tickvals=sorted({r["factor"] for r in sc["rows"]}), rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title="pcaptools scaling (same traffic repeated, fresh ports per copy)",
                      height=560, width=1500)
    fig.write_html(SCALING_HTML, include_plotlyjs="cdn", full_html=True,
                   div_id="scaling")  # (a fixed id: the same data gives the same file)


def _dir_of_captures(args: argparse.Namespace) -> tuple[Path, Path]:
    """``--many-files`` copies of the base capture in work/many (one shared key log)."""
    base, keys = _cap_paths(args, "base")
    d = args.work / "many"
    d.mkdir(exist_ok=True)
    for p in d.glob("*.pcap"):
        p.unlink()
    for i in range(args.many_files):
        os.link(base, d / f"capture-{i:02d}.pcap")
    return d, keys


MANY_CHILD = OWN_SESSION + """
import json, sys, time
t0 = time.perf_counter()
import pcaptools
import pcaptools.many as _pm
_orig = _pm._load_one
def _load_one(path, kwargs):  # runs in the pool workers (forked: they see this module)
    own_session()
    return _orig(path, kwargs)
_pm._load_one = _load_one
mode, d, keys, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
from pathlib import Path
files = sorted(Path(d).glob("*.pcap"))
t1 = time.perf_counter()
if mode == "serial":
    caps = [pcaptools.load(f, keylog=keys) for f in files]
    frames = sum(c.summary.frames for c in caps)
    rows = sum(len(c.http2_frames) for c in caps)
else:
    m = pcaptools.load_many(d, workers=workers, keylog=keys)
    frames = int(m.summaries["frames"].sum())
    rows = len(m.http2_frames)
print(json.dumps({"files": len(files), "frames": frames, "http2_frames": rows,
                  "seconds": time.perf_counter() - t1}))
"""

DASK_CHILD = OWN_SESSION + """
import json, sys, time, shutil
mode, d, keys, out, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
shutil.rmtree(out, ignore_errors=True)
from pcaptools.distributed import analyse_directory
t = time.perf_counter()
if mode == "serial":
    r = analyse_directory(d, out, scheduler="synchronous", keylog=keys)
else:
    from dask.distributed import Client, LocalCluster
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(own_session)
        client.run(lambda: bool(__import__("pcaptools.distributed")))  # a warm cluster
        t = time.perf_counter()  # cluster start-up excluded (reported separately)
        r = analyse_directory(d, out, scheduler=client, keylog=keys)
print(json.dumps({"files": len(r.files), "rows": r.rows, "seconds": time.perf_counter() - t}))
"""


BURN_CHILD = OWN_SESSION + """
import sys, time
from concurrent.futures import ProcessPoolExecutor
def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s
if __name__ == "__main__":
    w = int(sys.argv[1])
    out = []
    for workers in (1, w):
        t = time.perf_counter()
        with ProcessPoolExecutor(workers, initializer=own_session) as ex:
            list(ex.map(burn, [15_000_000] * w))
        out.append(time.perf_counter() - t)
    print(out[0] / out[1])
"""


def achievable_speedup(workers: int) -> float:
    """Speed-up of a pure-Python CPU loop in ``workers`` processes over one, measured now: what
    a perfectly parallel job could get from this machine at this moment (other load included)."""
    r = run_child([sys.executable, "-c", BURN_CHILD, str(workers)], timeout_s=300)
    return float(r["stdout"].strip())


def sec_many(args: argparse.Namespace, res: dict[str, Any], log: Callable[[str], None]) -> None:
    d, keys = _dir_of_captures(args)
    ncpu = os.cpu_count() or 1
    ideal = [achievable_speedup(ncpu)]
    rows = []
    for mode, workers in (("serial", 1), ("load_many", 1), ("load_many", ncpu)):
        runs = []
        for _ in range(args.repeats):
            r = run_child([sys.executable, "-c", MANY_CHILD, mode, str(d), str(keys), str(workers)])
            info = json.loads(r["stdout"])
            runs.append({"wall_s": r["wall_s"], "seconds": info["seconds"],
                         "peak_rss_mb": r["peak_rss_mb"], "cpu_s": r["user_s"] + r["sys_s"],
                         **info})
        med = statistics.median(x["wall_s"] for x in runs)
        rows.append({"mode": mode, "workers": workers, "wall_s": med,
                     "wall_min_s": min(x["wall_s"] for x in runs),
                     "cpu_s": statistics.median(x["cpu_s"] for x in runs),
                     "peak_rss_mb": statistics.median(x["peak_rss_mb"] for x in runs),
                     "frames": runs[0]["frames"], "files": runs[0]["files"],
                     "http2_frames": runs[0]["http2_frames"]})
        log(f"many: {mode} workers={workers}: {med:.2f} s")
    serial = rows[0]["wall_s"]
    for r in rows:
        r["speedup"] = serial / r["wall_s"]
    ideal.append(achievable_speedup(ncpu))
    log(f"many: a pure CPU loop got {ideal[0]:.2f}x / {ideal[1]:.2f}x from {ncpu} processes")
    res["many"] = {"files": args.many_files, "achievable_speedup": ideal,
                   "file_mb": capture_info(next(d.glob("*.pcap")))["file_size"] / 1e6,
                   "rows": rows}


def sec_dask(args: argparse.Namespace, res: dict[str, Any], log: Callable[[str], None]) -> None:
    d, keys = _dir_of_captures(args)
    ncpu = os.cpu_count() or 1
    out = args.work / "dask-out"
    ideal = [achievable_speedup(ncpu)]
    rows = []
    for mode, workers in (("serial", 1), ("cluster", ncpu)):
        runs = []
        for _ in range(args.repeats):
            r = run_child([sys.executable, "-c", DASK_CHILD, mode, str(d), str(keys), str(out),
                           str(workers)])
            info = json.loads(r["stdout"])
            runs.append({"wall_s": r["wall_s"], "cpu_s": r["user_s"] + r["sys_s"], **info})
        rows.append({"mode": mode, "workers": workers,
                     "cpu_s": statistics.median(x["cpu_s"] for x in runs),
                     "seconds": statistics.median(x["seconds"] for x in runs),
                     "wall_s": statistics.median(x["wall_s"] for x in runs),
                     "files": runs[0]["files"], "rows": runs[0]["rows"]})
        log(f"dask: {mode} workers={workers}: {rows[-1]['seconds']:.2f} s")
    for r in rows:
        r["speedup"] = rows[0]["seconds"] / r["seconds"]
    shutil.rmtree(out, ignore_errors=True)
    ideal.append(achievable_speedup(ncpu))
    res["dask"] = {"files": args.many_files, "rows": rows, "achievable_speedup": ideal}


def sec_profile(args: argparse.Namespace, res: dict[str, Any], log: Callable[[str], None]) -> None:
    cap, keys = _cap_paths(args, "big")
    raw = args.work / "profile.raw.txt"
    full = {"keylog": str(keys), "packets": True, "tls_records": True, "payloads": True}
    argv = ["py-spy", "record", "-r", str(args.profile_rate), "--format", "raw", "-o", str(raw),
            "--", sys.executable, "-c", PCAPTOOLS_CHILD, str(cap), json.dumps(full)]
    log("profile: py-spy " + " ".join(argv[1:6]))
    # pure Python: py-spy sees no frames inside the compiled modules
    before = os.environ.get("PCAPTOOLS_PURE")
    os.environ["PCAPTOOLS_PURE"] = "1"
    try:
        run_child(argv)
    finally:
        if before is None:
            del os.environ["PCAPTOOLS_PURE"]
        else:
            os.environ["PCAPTOOLS_PURE"] = before
    shutil.copyfile(raw, HERE / "profile.raw.txt") if args.keep_raw_profile else None
    res["profile"] = summarise_profile(raw)
    res["profile"]["file_size"] = cap.stat().st_size
    write_profile_md(res["profile"], res)


def summarise_profile(raw: Path, top: int = 30) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks.

    Shares are of the samples taken inside ``pcaptools.load`` (interpreter start-up and
    imports are reported apart as ``outside_load_pct``)."""
    self_c: Counter[str] = Counter()
    incl_c: Counter[str] = Counter()
    file_c: Counter[str] = Counter()
    total = in_load = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [_func(f) for f in stack.split(";")]
        try:
            start = frames.index("load (pcaptools/capture.py)")
        except ValueError:
            continue
        in_load += n
        frames = frames[start:]
        self_c[frames[-1]] += n
        for f in set(frames):
            incl_c[f] += n
        for f in {_file(fr) for fr in frames}:
            file_c[f] += n

    def pct(c: Counter[str]) -> list[list[Any]]:
        return [[k, round(100 * v / max(1, in_load), 1)] for k, v in c.most_common(top)]

    return {"samples": total, "samples_in_load": in_load,
            "outside_load_pct": round(100 * (total - in_load) / max(1, total), 1),
            "self": pct(self_c), "inclusive": pct(incl_c), "modules": pct(file_c)}


def _func(frame: str) -> str:
    """``name (path/file.py:123)`` -> ``name (path/file.py)``."""
    name, _, loc = frame.partition(" (")
    return f"{name} ({loc.rsplit(':', 1)[0]})" if loc else name


def _file(frame: str) -> str:
    """``name (path/file.py)`` or ``name (path/file.py:12)`` -> ``path/file.py``."""
    _, _, loc = frame.partition(" (")
    return loc.rstrip(")").rsplit(":", 1)[0] if loc else frame


AUTO_START = "<!-- generated by benchmarks/run.py --sections profile: do not edit below -->"
AUTO_END = "<!-- end of generated part -->"


def write_profile_md(prof: dict[str, Any], res: dict[str, Any]) -> None:
    cap = res.get("captures", {}).get("big", {})
    lines = [AUTO_START, "",
             f"py-spy, {prof['samples']:,} samples, `pcaptools.load(big.pcap, keylog=..., "
             f"packets=True, tls_records=True, payloads=True)` with `PCAPTOOLS_PURE=1` (py-spy "
             f"sees no Python frames inside compiled modules) on "
             f"{cap.get('file_size', 0) / 1e6:.0f} MB / {cap.get('frames', 0):,} frames "
             f"({_today()}). Shares are of the {prof['samples_in_load']:,} samples inside "
             f"`load()`; interpreter start-up and imports took the other "
             f"{prof['outside_load_pct']}% of the run.", "",
             "### Self time (where the CPU is)", "", "| function | % self |", "|---|---:|"]
    lines += [f"| `{f}` | {p} |" for f, p in prof["self"][:25]]
    lines += ["", "### Inclusive time (function and what it calls)", "",
              "| function | % incl. |", "|---|---:|"]
    lines += [f"| `{f}` | {p} |" for f, p in prof["inclusive"][:30]]
    lines += ["", "### By module (inclusive)", "", "| module | % |", "|---|---:|"]
    lines += [f"| `{f}` | {p} |" for f, p in prof["modules"][:20]]
    lines += ["", AUTO_END]
    text = PROFILE.read_text() if PROFILE.exists() else "# pcaptools profile\n\n"
    if AUTO_START in text and AUTO_END in text:
        head, _, rest = text.partition(AUTO_START)
        _, _, tail = rest.partition(AUTO_END)
        text = head + "\n".join(lines) + tail
    else:
        text = text.rstrip() + "\n\n" + "\n".join(lines) + "\n"
    PROFILE.write_text(text)


# --------------------------------------------------------------------------- README


def _today() -> str:
    return dt.date.today().isoformat()


CPU_FEATURES = ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "sha_ni", "avx2", "avx512f")
"""CPU flags that change how fast the same code runs (AES-GCM and GHASH in OpenSSL, zlib,
numpy): a virtual machine may hide some, and its model name is often only "AMD EPYC", so two
runs on machines of the same name are compared with these and the clock rate in view"""


def machine() -> dict[str, str]:
    cpu = ""
    mhz = ""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not cpu:
                cpu = value.strip()
            elif key == "cpu MHz" and not mhz:
                mhz = f"{float(value):.0f} MHz"
            elif key == "flags" and not flags:
                flags = set(value.split())
    except (OSError, ValueError):
        pass
    features = " ".join(f for f in CPU_FEATURES if f in flags)  # (the others it lacks)
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    versions: dict[str, str] = {}
    for mod in ("pcaptools", "pandas", "numpy", "dpkt", "pyshark", "scapy", "pyarrow", "dask",
                "cryptography"):
        try:
            from importlib.metadata import version

            versions[mod] = version(mod)
        except Exception:  # not installed
            versions[mod] = "-"
    tshark = subprocess.run(["tshark", "--version"], capture_output=True, text=True,
                            check=False).stdout.splitlines()
    return {"date": _today(), "nproc": str(os.cpu_count()), "cpu": cpu, "cpu_mhz": mhz,
            "cpu_flags": features or "-", "memory": mem,
            "python": platform.python_version(), "kernel": platform.release(),
            "tshark": tshark[0] if tshark else "-",
            "versions": ", ".join(f"{k} {v}" for k, v in versions.items())}


def _fmt(x: float, nd: int = 1) -> str:
    return f"{x:,.{nd}f}"


def _load_note(res: dict[str, Any], section: str) -> str:
    la = res.get("load_average", {}).get(section)
    ideal = res.get(section, {}).get("achievable_speedup")
    ncpu = os.cpu_count() or 1
    note = ""
    if la:
        note += f" 1-minute load average {la[0]} before, {la[1]} after, on {ncpu} cores."
    if ideal:
        note += (f" A pure-Python CPU loop in {ncpu} processes got {ideal[0]:.2f}x / "
                 f"{ideal[1]:.2f}x (before / after the section) over one process: that is the "
                 "most any process pool could get from the machine at the time")
        if min(ideal) < 0.8 * ncpu:
            note += (" (other work was using the cores, so the speed-ups below are bounded by "
                     "it, not by pcaptools)")
        note += "."
    return note


def _rss(t: dict[str, Any]) -> float:
    """Peak RSS of a tool run: all its processes (older results: the largest one)."""
    return float(max(t.get("tree_rss_mb", 0.0), t["peak_rss_mb"]))


def _accel_modules() -> tuple[str, ...]:
    """pcaptools._accel.MODULES, read without importing pcaptools."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_pcaptools_accel_readme",
                                                  ROOT / "pcaptools" / "_accel.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return tuple(mod.MODULES)


def _earlier(measured_on: float | None, current: float | None, section: str) -> list[str]:
    """A warning line when a section's numbers come from another recording than the
    captures listed above (re-run that section to refresh them)."""
    if measured_on is None or current is None or measured_on == current:
        return []
    return [f"**Measured on an earlier recording** (without the WebSocket traffic and the loss "
            f"of the captures above); `python benchmarks/run.py --sections {section},readme` "
            "measures it again.", ""]


def _goals_md(by: dict[str, Any], stages: dict[str, Any] | None,
              setup: dict[str, Any] | None = None,
              startup: dict[str, Any] | None = None) -> list[str]:
    """Issue #20's goals against what was measured, said plainly."""
    out = ["## The goals (issue #20) and where this stands", "",
           "| goal | measured | met |", "|---|---|---|"]
    full, pure = by.get("pcaptools_full"), by.get("pcaptools_pure")
    tsh = by.get("tshark_keys_http2")
    if full and tsh:
        x = tsh["wall_s"] / full["wall_s"]
        xc = tsh["cpu_s"] / full["cpu_s"]
        out.append(f"| full analysis >= 3x faster than tshark with the key log "
                   f"(`tshark_keys_http2`) | {x:.2f}x wall, {xc:.2f}x CPU "
                   f"({full['wall_s']:.1f} s vs {tsh['wall_s']:.1f} s) | "
                   f"{'yes' if x >= 3 else 'no'} |")
        if pure:
            out.append(f"| (pure Python, for comparison) | {tsh['wall_s'] / pure['wall_s']:.2f}x "
                       f"wall ({pure['wall_s']:.1f} s) | - |")
        m = _rss(full) / _rss(tsh)
        out.append(f"| memory <= 1/4 of tshark's | {_rss(full):,.0f} MB vs {_rss(tsh):,.0f} MB "
                   f"({m:.2f}) | {'yes' if m <= 0.25 else 'no'} |")
    w2 = by.get("pcaptools_workers2")
    if w2 and tsh:
        out.append(f"| (`workers=2` on 2 cores) | {tsh['wall_s'] / w2['wall_s']:.2f}x wall "
                   f"({w2['wall_s']:.1f} s) | - |")
    tcp, tt = by.get("pcaptools_tcp"), by.get("tcptrace")
    if tcp and tt:
        inside = ""
        if stages:
            row = {r["stage"]: r for r in stages["rows"]}.get("tcp")
            if row:
                inside = f"; {row['compiled_s']:.1f} CPU s inside load()"
        out.append(f"| TCP-only pass no slower than tcptrace | {tcp['cpu_s']:.1f} CPU s "
                   f"({tcp['wall_s']:.1f} s wall, imports included{inside}) vs "
                   f"{tt['cpu_s']:.1f} CPU s; {tcp['cpu_s'] / tt['cpu_s']:.1f}x slower; "
                   f"{_rss(tcp):,.0f} MB vs {_rss(tt):,.0f} MB | "
                   f"{'yes' if tcp['cpu_s'] <= tt['cpu_s'] else 'no'} |")
    if startup:
        m = startup["median_s"]
        interp, load = m["interpreter"], m["import pcaptools and load()"]
        out.append(f"| a small capture's `load()` dominated by interpreter start, not imports "
                   f"(`{startup['capture']}`, {startup['frames']:,} frames; fresh interpreters, "
                   f"medians of {startup['runs']}) | interpreter {interp:.2f} s; "
                   f"`import pandas` {m['import pandas']:.2f} s; `import pcaptools` "
                   f"{m['import pcaptools']:.2f} s; with `load()` {load:.2f} s: the interpreter's "
                   f"start is {100 * interp / load:.0f} % of it | "
                   f"{'yes' if interp >= load / 2 else 'no'} |")
    for key, what in (("setup", "`scripts/setup.sh`"), ("setup_test", "`scripts/setup.sh --test`")):
        st = (setup or {}).get(key)  # setup_time.py: old, new (, both with no build: --pure)
        if st:
            old, new, *pure = st["configs"]
            no_build = ("; with no build at all (`PCAPTOOLS_PURE=1`): "
                        + ", ".join(f"{c['wall_s']:.0f} s ({c['label'].split(',')[0]})"
                                    for c in pure)) if pure else ""
            out.append(f"| the build does not make setup slower: {what} from a fresh .venv "
                       f"(`setup_time.py`, {st['date']}, medians of {st['runs']}; "
                       f"{st['commits']}) | "
                       f"{new['wall_s']:.0f} s wall ({new['label']}) vs {old['wall_s']:.0f} s "
                       f"({old['label']}: the build after pip, as when #20 was filed)"
                       f"{no_build} | {'yes' if new['wall_s'] <= old['wall_s'] else 'no'} |")
    if stages and full and w2:
        row = {r["stage"]: r for r in stages["rows"]}
        if "decode" in row and "full" in row:
            t_dec, t_full = row["decode"]["compiled_s"], row["full"]["compiled_s"]
            out += ["", "`workers=N`: every worker reads and decodes the whole capture (to find "
                    "the TCP connections whose address pair is its own, `frameloop.shard_of`); "
                    "the TCP analysis, the payload stack and the tables are split by connection, "
                    "and the parent renumbers `tcp_stream` as one process does and merges the "
                    "tables. With the stage times above (read and decode "
                    f"{t_dec:.1f} CPU s of {t_full:.1f}), N workers cannot go below "
                    f"~{t_dec:.1f} s each: on 16 cores about {t_dec + (t_full - t_dec) / 16:.1f} s "
                    f"of loop time against {t_full:.1f} s on one, plus the merge (assuming the "
                    "connections' work spreads evenly over the address pairs, one big "
                    "connection being one worker's, and cores as free as one, which this shared "
                    "machine is not)."]
    out.append("")
    return out


def write_readme(res: dict[str, Any]) -> None:
    m = res.get("machine") or machine()
    cpu = ""
    if m.get("cpu_mhz"):  # (results written before the clock and flags were recorded: none)
        have = m["cpu_flags"].split()
        absent = [f for f in CPU_FEATURES if f not in have]
        cpu = f"; {m['cpu_mhz']}; CPU flags: {' '.join(have) or '-'}" + (
            f" (absent: {' '.join(absent)})" if absent else "")
    L = ["# pcaptools benchmarks", "",
         "Generated by `python benchmarks/run.py` (see its docstring for the sections, the flags "
         "and the programs it needs); "
         "the raw numbers are in `results.json`, the scaling plot in `scaling.html`, the "
         "profile in `PROFILE.md`. Do not edit by hand: re-run the script. Measured by their "
         "own scripts: `SSE_CAPS.md` (the per-record caps, `sse_caps.py`) and `SYNFLOOD.md` "
         "(memory per connection on a million one-SYN connections, issue #18, "
         "`synflood_mem.py`); `setup_time.py` times `scripts/setup.sh` from a fresh "
         "virtualenv, with and without the compiled build (issue #20; its results are in "
         "`results.json` and the goals table below).", "",
         f"- date: {m['date']}",
         f"- machine: {m['nproc']} cores ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}"
         f"{cpu}",
         f"- Python {m['python']}; {m['tshark']}",
         f"- {m['versions']}"]
    if res.get("load_average"):
        L.append("- 1-minute load average before/after each section (other processes on the "
                 "machine make timings noisy; medians of several runs are reported): "
                 + ", ".join(f"{k} {a}/{b}" for k, (a, b) in res["load_average"].items()))
    L.append("")
    caps = res.get("captures", {})
    if caps:
        L += ["## Captures", "",
              "Real traffic recorded by `benchmarks/record_big.py`: nginx 1.22 (TLS 1.2 and 1.3, "
              "HTTP/2 via ALPN) and curl (HTTP/2 multiplexed with `-Z`, HTTP/1.1 keep-alive, "
              "short connections; SSLKEYLOGFILE), WebSocket connections from python "
              "`websockets` (`benchmarks/ws_bench.py`: ws and wss, each with and without "
              "permessage-deflate; JSON token streams, binary audio-sized messages, pings, "
              "close handshakes) in two network namespaces over a veth pair (MTU 1500, no GSO), "
              "random loss of TCP segments on arrival in both namespaces (iptables "
              "`statistic`), tcpdump on the server side.", "",
              "| capture | MB | frames | duration s | TCP connections | WebSocket connections | "
              "HTTP/2 requests | HTTP/1.1 requests | loss | segments dropped | "
              "dropped by tcpdump |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, c in caps.items():
            lost = c.get("segments_dropped")
            lost_n = f"{sum(lost.values()):,}" if isinstance(lost, dict) else "-"
            loss = f"{100 * c['loss']:.1f} %" if "loss" in c else "-"
            L.append(f"| {name}.pcap | {_fmt(c['file_size'] / 1e6)} | {c['frames']:,} | "
                     f"{_fmt(c['duration_s'])} | {c['tcp_connections']} | "
                     f"{c.get('ws_connections', 0)} | {c['http2_requests']} | "
                     f"{c['http1_requests']} | {loss} | {lost_n} | {c['packets_dropped']} |")
        L.append("")
    tools = res.get("tools")
    if tools:
        info = tools["capture"]
        by = {t["key"]: t for t in tools["results"]}
        L += ["## pcaptools vs other tools", "",
              f"`big.pcap`: {info['file_size'] / 1e6:.0f} MB, {info['frames']:,} frames. "
              f"Median of {tools['repeats']} runs (pyshark and scapy: a prefix, extrapolated to "
              "the whole file; their peak RSS is the prefix run's). Times include interpreter "
              "start-up and imports. **CPU s** (user + sys of the child process tree, from "
              "`wait4`) is the number to compare: it hardly moves when other work shares the "
              "machine, while wall time does (see the load averages above); packets/s and MB/s "
              "are per CPU second. Peak RSS: the sum over the tool's processes, sampled every "
              "50 ms (and never below the largest process's `ru_maxrss`). With `workers=2` "
              "CPU s adds both processes: compare its **wall** time.", "",
              "| tool | CPU s | packets / CPU s | MB / CPU s | wall s (median) | wall s (min) | "
              "peak RSS MB | CPU vs pcaptools full |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
        ref = by.get("pcaptools_full", {}).get("cpu_s")
        for t in tools["results"]:
            rel = f"{t['cpu_s'] / ref:.2f}x" if ref else "-"
            L.append(f"| {t['name']} | {_fmt(t['cpu_s'])} | "
                     f"{info['frames'] / t['cpu_s']:,.0f} | "
                     f"{info['file_size'] / t['cpu_s'] / 1e6:,.1f} | {_fmt(t['wall_s'])} | "
                     f"{_fmt(t.get('wall_min_s', 0))} | {_rss(t):,.0f} | {rel} |")
        L.append("")
        accel = {t["key"]: t["accel"] for t in tools["results"] if t.get("accel")}
        if accel:
            L += ["How the pcaptools runs imported their per-frame modules "
                  "(`pcaptools._accel.summary()`; `scripts/build_accel.py` compiles them with "
                  "Cython, `PCAPTOOLS_PURE=1` turns the build off): "
                  + "; ".join(f"{k}: {v}" for k, v in accel.items()) + "."]
        L += ["", "The tshark runs: `tshark_1pass` and `tshark_2pass` print the TCP analysis "
              "fields; `tshark_keys_http2` decrypts and prints 12 TLS and HTTP fields; "
              f"`tshark_keys_all` prints the {len(TSHARK_ALL_FIELDS)} fields behind pcaptools' "
              "tables (TCP analysis, TLS handshakes and records, HTTP/2 frames and headers, "
              "HTTP/1.x, WebSocket frames: the equivalent of `pcaptools_full` without the "
              "bodies); `tshark_keys_all_payload` adds `http2.data.data` and `http.file_data`, "
              "the bodies that pcaptools parses into SSE events and WebSocket messages (tshark "
              "prints them as hex, which is much of its cost).", ""]
        ratios = []
        for a, b in (("pcaptools_full", "tshark_1pass"), ("pcaptools_full", "tshark_2pass"),
                     ("pcaptools_full", "tshark_keys_http2"),
                     ("pcaptools_full", "tshark_keys_all"),
                     ("pcaptools_full", "tshark_keys_all_payload"),
                     ("pcaptools_pure", "tshark_keys_all"),
                     ("pcaptools_full", "pcaptools_pure"), ("pcap_report", "pcaptools_full"),
                     ("pcaptools_workers2", "tshark_1pass"),
                     ("pcaptools_workers2", "tshark_keys_http2"),
                     ("pcaptools_workers2", "tshark_keys_all"),
                     ("pcaptools_nopackets", "tshark_1pass"), ("pcaptools_tcp", "tcptrace"),
                     ("pcaptools_full", "pyshark_json"),
                     ("pcaptools_full", "pyshark_default"), ("pcaptools_full", "scapy"),
                     ("pcaptools_full", "dpkt")):
            if a in by and b in by:
                ratios.append(f"| {a} / {b} | {by[a]['cpu_s'] / by[b]['cpu_s']:.2f} | "
                              f"{by[a]['wall_s'] / by[b]['wall_s']:.2f} | "
                              f"{_rss(by[a]) / _rss(by[b]):.2f} |")
        if ratios:
            L += ["Ratios (below 1: pcaptools is faster / smaller):", "",
                  "| pair | CPU time ratio | wall time ratio (medians) | peak RSS ratio |",
                  "|---|---:|---:|---:|", *ratios, ""]
        if "pcaptools_full" in by:
            full = by["pcaptools_full"]
            mb = full.get("table_mb", {})
            L += ["pcaptools tables on `big.pcap` (rows, and MB held by the DataFrame where "
                  "measured): " + ", ".join(
                      f"{k} {v:,}" + (f" ({mb[k]:.1f} MB)" if k in mb else "")
                      for k, v in full["rows"].items()), ""]
    if tools:
        L += _goals_md({t["key"]: t for t in tools["results"]}, res.get("stages"),
                       {k: res[k] for k in ("setup", "setup_test") if k in res},
                       res.get("startup"))
    st = res.get("stages")
    if st:
        L += ["## Where the per-frame time goes: the chain cut after each stage", "",
              f"`python benchmarks/stages.py` on `{Path(st['capture']).name}` "
              f"({st['file_size'] / 1e6:.0f} MB), {st['date']}: CPU seconds of the loop only "
              "(imports and interpreter start excluded), medians of "
              f"{st['repeats']} alternated runs; 1-minute load average {st['load_average'][0]} "
              f"before, {st['load_average'][-1]} after. Each stage includes the ones above it "
              "(see the script's docstring); `compiled` is the build of "
              "`pcaptools._accel.MODULES`.", "",
              "| stage | frames | compiled CPU s | pure CPU s | compiled / pure | "
              "frames / CPU s (compiled) |", "|---|---:|---:|---:|---:|---:|"]
        for r in st["rows"]:
            L.append(f"| {r['stage']} | {r['frames']:,} | {r['compiled_s']:.2f} | "
                     f"{r['pure_s']:.2f} | {r['compiled_s'] / r['pure_s']:.2f} | "
                     f"{r['frames'] / r['compiled_s']:,.0f} |")
        L.append("")
    mp = res.get("module_pay")
    if mp:
        L += ["## Which compiled modules pay", "",
              f"`python benchmarks/module_pay.py` on `{Path(mp['capture']).name}` "
              f"({mp['file_size'] / 1e6:.0f} MB, same recorder and traffic mix as `big.pcap`), "
              f"{mp['date']}: CPU seconds inside `pcaptools.load(..., keylog=...)` (every "
              f"table), the fastest of {mp.get('inner', 1)} loads in one process, median of "
              f"{mp['repeats']} alternated round(s) over the configurations; "
              f"1-minute load average {mp['load_average'][0]} before, "
              f"{mp['load_average'][-1]} after. Every module of the build compiled: "
              f"{mp['all_s']:.3f} s (runs {', '.join(f'{x:.3f}' for x in mp['all_runs'])}); "
              f"none (pure Python): {mp['none_s']:.3f} s "
              f"(runs {', '.join(f'{x:.3f}' for x in mp['none_runs'])})"]
        if "core_s" in mp:
            L[-1] += (f"; the TCP core alone (the decoder, the TCP modules and the packets "
                      f"table): {mp['core_s']:.3f} s (runs "
                      f"{', '.join(f'{x:.3f}' for x in mp['core_runs'])}). A unit of the core "
                      "saves the median with the core less that unit minus the median of the "
                      "core; a unit outside it saves the median of the core minus the median "
                      "of the core with that unit added")
        else:
            L[-1] += ("; a module's saving is the median with all modules but it compiled, "
                      "minus the median with all of them")
        L[-1] += (f". Its C compile time is the wall time of its compile in the build "
                  f"({mp.get('jobs') or '?'} compiles at a time).")
        L += ["", f"Rule: {mp['rule']}.", ""]
        modules = set(_accel_modules())
        lines = ["| module (or group) | CPU s saved by compiling it | share of load() | "
                 "C compile s | the rule says | in `MODULES` now |", "|---|---:|---:|---:|---|---|"]
        differs = False
        for r in mp["modules"]:
            cs = "-" if r.get("compile_s") is None else f"{r['compile_s']:.0f}"
            members = r.get("modules", [r["module"]])
            now = all(m in modules for m in members)
            differs |= now != r["keep"]
            where = " (core)" if r.get("in_core") else ""
            lines.append(f"| `{r['module']}`{where} | {r['saves_s']:+.3f} | "
                         f"{100 * r['saves_share']:+.1f} % | {cs} | "
                         f"{'keep' if r['keep'] else 'drop'} | {'yes' if now else 'no'} |")
        L += [*lines, ""]
        ms = res.get("module_sets")
        if ms:
            L += [f"Whole sets against each other (`module_pay.py --sets`, {ms['date']}, "
                  f"`{Path(ms['capture']).name}`, median of {ms['repeats']} alternated rounds, "
                  f"1-minute load average {ms['load_average'][0]} before, "
                  f"{ms['load_average'][-1]} after): the per-unit savings above are within "
                  "the spread of one configuration's runs (a few %), so the set is chosen by "
                  "comparing sets whole.", "",
                  "| set | modules compiled | CPU s in load() (median) | runs |",
                  "|---|---:|---:|---|"]
            for r in ms["sets"]:
                L.append(f"| `{r['name']}` | {r['modules']} | {r['median_s']:.3f} | "
                         f"{', '.join(f'{x:.3f}' for x in r['runs_s'])} |")
            L.append("")
        if differs:
            L += ["**`pcaptools._accel.MODULES` differs from the per-unit rule** (the `in "
                  "MODULES now` column): "
                  + ("it is the fastest set of the comparison above." if ms else
                     "the per-unit table alone cannot tell which modules pay."), ""]
    sc = res.get("scaling")
    if sc:
        L += ["## Scaling: the same traffic repeated", "",
              *_earlier(sc["base"].get("file_size"), caps.get("base", {}).get("file_size"),
                        "scaling"),
              f"`base.pcap` ({sc['base']['file_size'] / 1e6:.0f} MB, {sc['base']['frames']:,} "
              "frames) repeated with `memory_scaling.repeat_capture` (each copy shifted in time "
              "and moved to fresh client ports, so the connections are new). Interpreter with "
              f"pcaptools imported: {sc['baseline_rss_mb']:.0f} MB. Plot: `scaling.html`.", "",
              "`tables MB` is what the returned DataFrames hold (`memory_usage(deep=True)`): the "
              "part of the RSS that grows with the traffic by design (one row per frame, TLS "
              "record, HTTP/2 frame, SSE event...). `pcaptools_tcp` (`packets=False, "
              "payloads=False`) keeps only per-connection state and tables. `pcaptools_out` "
              "(`out=DIR`) writes every table to Parquet while reading: its `tables MB` are the "
              "per-connection tables it keeps in memory.", "",
              "| factor | MB | frames | tool | wall s | CPU s | CPU s per 1x | packets/s | "
              "peak RSS MB | tables MB |",
              "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in sc["rows"]:
            tmb = _fmt(r["tables_mb"]) if "tables_mb" in r else "-"
            cpu = r.get("cpu_s")
            L.append(f"| {r['factor']} | {_fmt(r['file_mb'])} | {r['frames']:,} | {r['tool']} | "
                     f"{_fmt(r['wall_s'], 2)} | {_fmt(cpu, 2) if cpu else '-'} | "
                     f"{_fmt(cpu / r['factor'], 2) if cpu else '-'} | "
                     f"{r['packets_per_s']:,.0f} | {r['peak_rss_mb']:,.0f} | {tmb} |")
        L.append("")
        fits = []
        for tool in dict.fromkeys(r["tool"] for r in sc["rows"]):
            rows = [r for r in sc["rows"] if r["tool"] == tool and "cpu_s" in r]
            if len(rows) >= 2:
                fa, fb, r2 = linear_fit([float(r["factor"]) for r in rows],
                                        [r["cpu_s"] for r in rows])
                rss = [r["peak_rss_mb"] for r in rows]
                tab = [r.get("tables_mb") for r in rows]
                growth = (f"{tab[-1] - tab[0]:+,.0f}" if None not in tab else "-")
                fits.append(f"| {tool} | {fa:.2f} | {fb:.2f} | {r2:.4f} | {rss[0]:,.0f} -> "
                            f"{rss[-1]:,.0f} ({rss[-1] - rss[0]:+,.0f}) | {growth} |")
        if fits:
            L += ["Least-squares fit of CPU time against the factor (`a` is start-up: interpreter, "
                  "imports; `b` the cost of one more copy of the traffic); R² near 1 means "
                  "linear. Peak RSS from the smallest to the largest factor, against what the "
                  "returned tables grew by:", "",
                  "| tool | a (CPU s) | b (CPU s per 1x) | R² | peak RSS MB | tables MB growth |",
                  "|---|---:|---:|---:|---|---:|", *fits, ""]
    many = res.get("many")
    base_mb = caps.get("base", {}).get("file_size", 0) / 1e6
    if many:
        L += ["## `load_many`: a directory of captures", "",
              *_earlier(round(many["file_mb"]), round(base_mb) if base_mb else None, "many"),
              f"{many['files']} captures of {many['file_mb']:.0f} MB (copies of `base.pcap`), "
              "all tables with the key log. `serial` is a loop of `pcaptools.load` in one "
              "process. Every measured process and pool worker runs in a session of its own "
              "(`setsid`): with Linux's autogroup scheduling a whole session gets one CPU share, "
              "so while other sessions keep the cores busy a pool in one session cannot beat "
              "one process (see `OWN_SESSION` in `run.py`)." + _load_note(res, "many"), "",
              "| mode | workers | wall s (median) | wall s (min) | speed-up (medians) | "
              "CPU s, all processes | peak RSS MB (largest process) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
        for r in many["rows"]:
            cpu = _fmt(r["cpu_s"], 1) if "cpu_s" in r else "-"
            L.append(f"| {r['mode']} | {r['workers']} | {_fmt(r['wall_s'], 2)} | "
                     f"{_fmt(r.get('wall_min_s', r['wall_s']), 2)} | "
                     f"{r['speedup']:.2f}x | {cpu} | {r['peak_rss_mb']:,.0f} |")
        L.append("")
    dk = res.get("dask")
    if dk:
        L += ["## Dask: `pcaptools.distributed.analyse_directory`", "",
              *_earlier(dk.get("file_mb", round(many["file_mb"]) if many else None),
                        round(base_mb) if base_mb else None, "dask"),
              f"The same {dk['files']} captures, written as Parquet partitioned by capture. "
              "`serial` is dask's synchronous scheduler in one process; `cluster` a "
              "`LocalCluster` with one single-threaded worker process per core (cluster start-up "
              "and the workers' first import of pcaptools excluded; wall s includes them)."
              + _load_note(res, "dask"), "",
              "| mode | workers | analysis s | speed-up | wall s |", "|---|---:|---:|---:|---:|"]
        for r in dk["rows"]:
            L.append(f"| {r['mode']} | {r['workers']} | {_fmt(r['seconds'], 2)} | "
                     f"{r['speedup']:.2f}x | {_fmt(r['wall_s'], 2)} |")
        L.append("")
    L += ["## Scale-out APIs measured here", "",
          "- `pcaptools.load_many(dir_or_files, workers=None, **load_kwargs)`: one process per "
          "core, tables concatenated with a leading `capture` column (`pcaptools/many.py`).",
          "- `pcap-report DIR` or several files: one report per capture plus `index.html`; "
          "`--export DIR` writes the merged tables as Parquet (`--export-format csv`).",
          "- `cap.to_parquet(dir)`, `pcaptools.export.to_parquet/to_csv/write_partition/"
          "read_table` (`pcaptools/export.py`).",
          "- `pcaptools.distributed.analyse_directory(dir, out, scheduler=...)`: one Dask task "
          "per file writing `out/<table>/capture=<file>/part-0.parquet` "
          "(`pcaptools/distributed.py`).", ""]
    if res.get("profile"):
        L += ["## Profile", "",
              *_earlier(res["profile"].get("file_size", 0),
                        caps.get("big", {}).get("file_size"), "profile"),
              "Top self-time functions (details and suggestions: `PROFILE.md`):",
              "", "| function | % self |", "|---|---:|"]
        L += [f"| `{f}` | {p} |" for f, p in res["profile"]["self"][:10]]
        L.append("")
    README.write_text("\n".join(L))


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma separated, from {', '.join(SECTIONS)}")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pcaptools-bench"))
    ap.add_argument("--size-mb", type=float, default=300.0, help="big capture size")
    ap.add_argument("--scaling-base-mb", type=float, default=40.0)
    ap.add_argument("--factors", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scaling-repeats", type=int, default=2)
    ap.add_argument("--pyshark-packets", type=int, default=10_000)
    ap.add_argument("--scapy-packets", type=int, default=50_000)
    ap.add_argument("--many-files", type=int, default=6)
    ap.add_argument("--startup-runs", type=int, default=7,
                    help="fresh interpreters per code in the startup section")
    ap.add_argument("--profile-rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--keep-raw-profile", action="store_true")
    ap.add_argument("--only-tools", nargs="*", help="tool keys for the tools section")
    ap.add_argument("--record-max-seconds", type=float, default=900.0)
    ap.add_argument("--rerecord", action="store_true")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        ap.error(f"unknown sections {bad}")
    args.work.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    funcs = {"record": sec_record, "tools": sec_tools, "scaling": sec_scaling, "many": sec_many,
             "dask": sec_dask, "startup": sec_startup, "profile": sec_profile}
    for s in SECTIONS:
        if s in sections and s in funcs:
            before = os.getloadavg()[0]
            funcs[s](args, res, log)
            # other work on the machine makes timings noisy: keep the 1-minute load average
            res.setdefault("load_average", {})[s] = [round(before, 2),
                                                     round(os.getloadavg()[0], 2)]
            res["machine"] = machine()
            RESULTS.write_text(json.dumps(res, indent=1) + "\n")
    if "readme" in sections:
        if res.get("scaling"):
            plot_scaling(res["scaling"])
        write_readme(res)
        log(f"wrote {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
