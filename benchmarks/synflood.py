"""Write a capture of N one-SYN TCP connections: what a port scan or a SYN flood looks like.

    python benchmarks/synflood.py /work/bench/syn1m.pcap --connections 1000000

Each connection is one SYN (Ethernet, IPv4, 54-byte frame: no TCP options) from its own
client address and port to one server port, 10 µs apart, so the capture holds N connections
and N frames (about 70 bytes a frame on disk with its pcap record header, the 70 MB of issue
#18 for a million). The frames are generated, not recorded: a SYN is the same bytes whichever
tool sent it, and generating a million takes seconds where recording them takes a flood tool.
Deterministic: the same N gives the same file.

``--answer rst``: each SYN is answered 5 µs later by the server's RST/ACK (a scan of closed
ports, or a server refusing a flood): 2N frames, N connections that each ended at once.

``--answer close``: each connection is complete, within its first 10 µs: handshake, a
102-byte HTTP/1.1 request, a 300-byte answer (200 OK with a 260-byte body), FIN both ways and
the last ACK (9N frames; a busy load balancer's short connections, one at a time).

``--answer keepalive``: the same request and answer, then the client's ACK, and no FIN: the
connection stays open and idle to the end of the capture (7N frames; keep-alive connections
that clients left open, or whose ends the capture does not hold).

``--spacing-us N``: the connections start N µs apart instead of 10 (a load balancer's hour
of a million connections: 3,600 µs). At 10 µs a million connections last 10 s of capture
time, too short for most of them to go quiet before the capture ends; spread out, they end
and go quiet as they would in a real capture.
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

import dpkt

SERVER = bytes([10, 99, 0, 1])
SERVER_PORT = 443
STEP_NS = 10_000  # 10 µs between SYNs
START_NS = 1_764_547_200 * 1_000_000_000  # 2025-12-01 00:00:00 UTC


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _frame(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int,
           window: int, ip_id: int, *, to_server: bool, payload: bytes = b"") -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, window, 0,
                      0) + payload
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", _checksum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), ip_id, 0x4000, 64, 6, 0,
                     src, dst)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    a, b = b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02"
    eth = (a + b if to_server else b + a) + b"\x08\x00"
    return eth + ip + tcp


def _client(i: int) -> tuple[bytes, int, int]:
    """The i-th connection's client address and port, and its SYN's sequence number."""
    return (bytes([10, 100 + (i >> 16) % 100, (i >> 8) & 0xFF, i & 0xFF]), 1024 + i % 60000,
            (i * 2654435761) & 0xFFFFFFFF)


def syn_frame(i: int) -> bytes:
    """The i-th SYN: client 10.(100 + i // 2**16 % 100).x.y, port 1024 + i % 60000."""
    client, sport, seq = _client(i)
    return _frame(client, SERVER, sport, SERVER_PORT, seq, 0, 0x02, 64240, i & 0xFFFF,
                  to_server=True)


def rst_frame(i: int) -> bytes:
    """The server's RST/ACK to the i-th SYN."""
    client, sport, seq = _client(i)
    return _frame(SERVER, client, SERVER_PORT, sport, 0, (seq + 1) & 0xFFFFFFFF, 0x14, 0,
                  0, to_server=False)


REQUEST = b"GET / HTTP/1.1\r\nHost: lb\r\n" + b"x" * 72 + b"\r\n\r\n"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 260\r\n\r\n" + b"y" * 260
SERVER_ISN = 0x5EED0000


def close_frames(i: int, keep_open: bool = False) -> list[tuple[int, bytes]]:
    """The i-th complete connection's frames after its SYN, each with its offset in ns
    (``keep_open``: no FIN; the client acknowledges the answer and the connection stays
    open)."""
    client, sport, cseq = _client(i)
    s, m = SERVER_ISN, 0xFFFFFFFF
    c1, s1 = (cseq + 1) & m, (s + 1) & m
    c2, s2 = (c1 + len(REQUEST)) & m, (s1 + len(ANSWER)) & m

    def up(seq: int, ack: int, flags: int, payload: bytes = b"") -> bytes:
        return _frame(client, SERVER, sport, SERVER_PORT, seq, ack, flags, 64240, i & 0xFFFF,
                      to_server=True, payload=payload)

    def down(seq: int, ack: int, flags: int, payload: bytes = b"") -> bytes:
        return _frame(SERVER, client, SERVER_PORT, sport, seq, ack, flags, 65160, i & 0xFFFF,
                      to_server=False, payload=payload)

    exchange = [(1000, down(s, c1, 0x12)), (2000, up(c1, s1, 0x10)),
                (3000, up(c1, s1, 0x18, REQUEST)), (4000, down(s1, c2, 0x10)),
                (5000, down(s1, c2, 0x18, ANSWER))]
    if keep_open:
        return [*exchange, (6000, up(c2, s2, 0x10))]
    return [*exchange, (6000, up(c2, s2, 0x11)),
            (7000, down(s2, (c2 + 1) & m, 0x11)), (8000, up((c2 + 1) & m, (s2 + 1) & m, 0x10))]


def _at(i: int, step_ns: int, offset: int) -> tuple[int, int]:
    """(seconds, nanoseconds) of a frame ``offset`` ns after the i-th connection's SYN"""
    return divmod(START_NS + i * step_ns + offset, 1_000_000_000)


def write(path: Path, connections: int, *, answer: str | None = None,
          step_ns: int = STEP_NS) -> int:
    """Write the capture (``answer="rst"``: each SYN answered by an RST/ACK; connections
    ``step_ns`` apart); return the number of frames written."""
    with open(path, "wb") as fh:
        # nanosecond pcap: the record header is written here, not by dpkt's Writer, whose float
        # timestamps would move each 10 µs step by a few nanoseconds
        fh.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, dpkt.pcap.DLT_EN10MB))
        for i in range(connections):
            sec, ns = divmod(START_NS + i * step_ns, 1_000_000_000)
            frame = syn_frame(i)
            fh.write(struct.pack("<IIII", sec, ns, len(frame), len(frame)))
            fh.write(frame)
            if answer == "rst":
                frame = rst_frame(i)
                fh.write(struct.pack("<IIII", *_at(i, step_ns, STEP_NS // 2), len(frame),
                                     len(frame)))
                fh.write(frame)
            elif answer in ("close", "keepalive"):
                for offset, frame in close_frames(i, keep_open=answer == "keepalive"):
                    fh.write(struct.pack("<IIII", *_at(i, step_ns, offset), len(frame),
                                         len(frame)))
                    fh.write(frame)
    return connections * {"rst": 2, "close": 9, "keepalive": 7}.get(answer or "", 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--connections", type=int, default=1_000_000)
    ap.add_argument("--answer", choices=["rst", "close", "keepalive"], default=None,
                    help="answer each SYN (rst: the server's RST/ACK; close: a whole "
                    "connection with a request and an answer; keepalive: the same, left "
                    "open)")
    ap.add_argument("--spacing-us", type=int, default=STEP_NS // 1000,
                    help="microseconds between the connections' first frames (at least 10)")
    args = ap.parse_args(argv)
    if args.connections < 1:
        ap.error("--connections must be at least 1")
    if args.spacing_us < 10:
        ap.error("--spacing-us must be at least 10 (a connection's frames span 8 µs)")
    n = write(args.out, args.connections, answer=args.answer, step_ns=args.spacing_us * 1000)
    print(f"{args.out}: {n:,} frames, {args.out.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
