"""Write a capture of N one-SYN TCP connections: what a port scan or a SYN flood looks like.

    python benchmarks/synflood.py /work/bench/syn1m.pcap --connections 1000000

Each connection is one SYN (Ethernet, IPv4, 54-byte frame: no TCP options) from its own
client address and port to one server port, 10 µs apart, so the capture holds N connections
and N frames (about 70 bytes a frame on disk with its pcap record header, the 70 MB of issue
#18 for a million). The frames are generated, not recorded: a SYN is the same bytes whichever
tool sent it, and generating a million takes seconds where recording them takes a flood tool.
Deterministic: the same N gives the same file.
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


def syn_frame(i: int) -> bytes:
    """The i-th SYN: client 10.(100 + i // 2**16 % 100).x.y, port 1024 + i % 60000."""
    client = bytes([10, 100 + (i >> 16) % 100, (i >> 8) & 0xFF, i & 0xFF])
    sport = 1024 + i % 60000
    seq = (i * 2654435761) & 0xFFFFFFFF
    tcp = struct.pack("!HHIIBBHHH", sport, SERVER_PORT, seq, 0, 5 << 4, 0x02, 64240, 0, 0)
    pseudo = client + SERVER + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", _checksum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), i & 0xFFFF, 0x4000, 64, 6, 0,
                     client, SERVER)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    eth = b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + b"\x08\x00"
    return eth + ip + tcp


def write(path: Path, connections: int) -> int:
    """Write the capture; return the number of frames written."""
    with open(path, "wb") as fh:
        # nanosecond pcap: the record header is written here, not by dpkt's Writer, whose float
        # timestamps would move each 10 µs step by a few nanoseconds
        fh.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, dpkt.pcap.DLT_EN10MB))
        for i in range(connections):
            sec, ns = divmod(START_NS + i * STEP_NS, 1_000_000_000)
            frame = syn_frame(i)
            fh.write(struct.pack("<IIII", sec, ns, len(frame), len(frame)))
            fh.write(frame)
    return connections


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--connections", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    if args.connections < 1:
        ap.error("--connections must be at least 1")
    n = write(args.out, args.connections)
    print(f"{args.out}: {n:,} SYN frames, {args.out.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
