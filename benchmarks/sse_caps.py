"""Memory of a capture with millions of SSE events, with and without the default per-record caps.

    python benchmarks/sse_caps.py [--events 5000000] [--connections 1] [--work DIR]

Writes a synthetic capture (``sse-<events>x<connections>.pcap`` in ``--work``, default a
temporary folder): ``--connections`` HTTP/1.1 cleartext connections on port 8080, each a
``GET /v1/chat`` answered ``200`` with ``Content-Type: text/event-stream`` and an even share of
``--events`` OpenAI-style chunks (``data: {"choices":[{"delta":{"content":"ab"}}]}``, 47 bytes
on the wire each) in full-sized segments (1448 bytes of payload, one client ACK every 16),
closed with FIN. The packets are built here (no recording: the point is the count, and a real
5-million-event stream takes hours to record), timestamps 20 us apart.

Then it loads the capture in a child process, once with the defaults (``max_events_per_connection``
1,000,000, ``max_record_rows`` 2,000,000: :mod:`pcaptools._eventcap`) and once with both caps off
(``None``), and prints the peak RSS (``ru_maxrss``), the load time, the ``sse_events`` rows and
what ``summary.extra`` says was dropped. ``--markdown FILE`` writes the result table there.
The load runs with ``packets=False`` unless ``--packets`` (the packets table grows with frames,
a separate cap: ``max_packet_rows``).
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MSS = 1448
EVENT = b'data: {"choices":[{"delta":{"content":"ab"}}]}\n\n'
CLIENT_MAC, SERVER_MAC = b"\x02\x00\x00\x00\x00\x10", b"\x02\x00\x00\x00\x00\x20"
CLIENT_IP, SERVER_IP = bytes([192, 0, 2, 10]), bytes([192, 0, 2, 20])


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _frame(c2s: bool, cport: int, seq: int, ack: int, flags: int, payload: bytes = b"") -> bytes:
    src, dst = (CLIENT_IP, SERVER_IP) if c2s else (SERVER_IP, CLIENT_IP)
    sport, dport = (cport, 8080) if c2s else (8080, cport)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4,
                      flags, 65535, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
    ck = _csum(pseudo + tcp + payload)
    tcp = tcp[:16] + struct.pack("!H", ck) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6,
                     0, src, dst)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    eth = (SERVER_MAC + CLIENT_MAC if c2s else CLIENT_MAC + SERVER_MAC) + b"\x08\x00"
    return eth + ip + tcp + payload


def write_capture(path: Path, events: int, connections: int) -> int:
    """Write the capture; return its frame count."""
    syn, ack_f, psh, fin = 0x02, 0x10, 0x08, 0x01
    ts = 1_800_000_000_000_000  # microseconds
    n = 0
    per = [events // connections + (1 if i < events % connections else 0)
           for i in range(connections)]
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))

        def put(frame: bytes) -> None:
            nonlocal ts, n
            ts += 20
            fh.write(struct.pack("<IIII", ts // 1_000_000, ts % 1_000_000, len(frame), len(frame)))
            fh.write(frame)
            n += 1

        for i, count in enumerate(per):
            cport = 40000 + i
            c, s = 1000, 5000
            put(_frame(True, cport, c, 0, syn))
            put(_frame(False, cport, s, c + 1, syn | ack_f))
            c, s = c + 1, s + 1
            put(_frame(True, cport, c, s, ack_f))
            req = (b"GET /v1/chat HTTP/1.1\r\nHost: 192.0.2.20:8080\r\n"
                   b"Accept: text/event-stream\r\n\r\n")
            put(_frame(True, cport, c, s, psh | ack_f, req))
            c += len(req)
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n")
            per_seg = MSS // len(EVENT)
            left = count
            body = head
            segs = 0
            while left or body:
                k = min(per_seg, left)
                if len(body) + k * len(EVENT) > MSS:
                    k = max(0, (MSS - len(body)) // len(EVENT))
                body += EVENT * k
                left -= k
                put(_frame(False, cport, s, c, psh | ack_f, body))
                s += len(body)
                body = b""
                segs += 1
                if segs % 16 == 0:
                    put(_frame(True, cport, c, s, ack_f))
            put(_frame(False, cport, s, c, fin | ack_f))
            s += 1
            put(_frame(True, cport, c, s, fin | ack_f))
            put(_frame(False, cport, s, c + 1, ack_f))
    return n


CHILD = """
import json, resource, sys, time
import pcaptools
caps = json.loads(sys.argv[2])
t = time.perf_counter()
cap = pcaptools.load(sys.argv[1], packets=sys.argv[3] == '1', **caps)
dt = time.perf_counter() - t
ex = cap.summary.extra
print(json.dumps({"seconds": dt, "frames": cap.summary.frames,
                  "sse_events": len(cap.sse_events),
                  "rows_dropped": ex.get("rows_dropped", {}).get("sse_events", 0),
                  "warnings": sorted(set(cap.warnings["code"])),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

BASELINE = ("import resource, pcaptools; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")


def measure(path: Path, caps: dict[str, int | None], packets: bool) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), json.dumps(caps),
                          "1" if packets else "0"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    res: dict[str, object] = json.loads(out.stdout)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--packets", action="store_true")
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        path = work / f"sse-{args.events}x{args.connections}.pcap"
        t = time.perf_counter()
        if not path.exists():
            frames = write_capture(path, args.events, args.connections)
            print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {frames:,} frames) in "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
        base = float(subprocess.run([sys.executable, "-c", BASELINE], capture_output=True,
                                    text=True, check=True, cwd=ROOT).stdout)
        rows = []
        for label, caps in (("default caps", {}),
                            ("no caps", {"max_events_per_connection": None,
                                         "max_record_rows": None})):
            r = measure(path, caps, args.packets)
            rows.append((label, r))
            print(label, json.dumps(r), flush=True)
    lines = [
        f"{args.events:,} SSE events on {args.connections} connection(s), "
        f"{path.stat().st_size / 1e6 if path.exists() else float('nan'):.0f} MB capture, "
        f"packets={args.packets}; interpreter with pcaptools imported: {base:.0f} MB",
        "",
        "| load | sse_events rows | rows dropped | warnings | peak RSS MB | load s |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for label, r in rows:
        lines.append(f"| {label} | {r['sse_events']:,} | {r['rows_dropped']:,} | "
                     f"{', '.join(r['warnings']) or '-'} | {r['peak_rss_mb']:.0f} | "  # type: ignore[arg-type]
                     f"{r['seconds']:.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown is not None:
        with open(args.markdown, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
