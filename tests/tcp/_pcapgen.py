"""Build small pcap files of hand-made TCP segments (Ethernet + IPv4/IPv6 + TCP), for tests.

:func:`write_pcap` writes packets described by :class:`Pkt`; :func:`simulate` produces a
seeded, semi-realistic bulk transfer with capture loss, retransmissions, reordering,
duplicate ACKs, zero windows, probes and keep-alives, to compare our analysis with tshark on
situations the public corpus lacks.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

A4 = (bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
A6 = (
    bytes.fromhex("20010db8000000000000000000000001"),
    bytes.fromhex("20010db8000000000000000000000002"),
)


@dataclass
class Pkt:
    """One TCP segment to write. ``c2s`` True: from (addrs[0], cport) to (addrs[1], sport)."""

    t_ns: int
    c2s: bool
    flags: int
    seq: int
    ack: int = 0
    win: int = 65535
    plen: int = 0
    opts: bytes = b""
    cport: int = 40000
    sport: int = 80
    v6: bool = False
    icmp_quote: int | None = None
    """if set: instead of the segment, an ICMP(v6) port unreachable sent back by the segment's
    destination, quoting the segment's IP header and this many bytes of its TCP header+data"""


def wscale_opt(shift: int, mss: int = 1460) -> bytes:
    """MSS + NOP + window scale options (8 bytes)."""
    return struct.pack(">BBH", 2, 4, mss) + bytes([1, 3, 3, shift])


def _frame(p: Pkt) -> bytes:
    opts = p.opts + b"\x00" * (-len(p.opts) % 4)
    hlen = 20 + len(opts)
    addrs = A6 if p.v6 else A4
    src, dst = (addrs[0], addrs[1]) if p.c2s else (addrs[1], addrs[0])
    sp, dp = (p.cport, p.sport) if p.c2s else (p.sport, p.cport)
    tcp = (
        struct.pack(
            ">HHIIHHHH",
            sp,
            dp,
            p.seq & 0xFFFFFFFF,
            p.ack & 0xFFFFFFFF,
            ((hlen // 4) << 12) | p.flags,
            p.win & 0xFFFF,
            0,
            0,
        )
        + opts
        + b"x" * p.plen
    )
    if p.v6:
        ip = struct.pack(">IHBB", 0x60000000, len(tcp), 6, 64) + src + dst
        eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x86\xdd"
    else:
        ip = struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0) + src + dst
        eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
    if p.icmp_quote is None:
        return eth + ip + tcp
    quoted = ip + tcp[: p.icmp_quote]
    if p.v6:
        icmp = struct.pack(">BBHI", 1, 4, 0, 0) + quoted
        oip = struct.pack(">IHBB", 0x60000000, len(icmp), 58, 64) + dst + src
    else:
        icmp = struct.pack(">BBHI", 3, 3, 0, 0) + quoted
        oip = struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(icmp), 1, 0, 64, 1, 0) + dst + src
    return eth + oip + icmp


def write_pcap(path: Path, pkts: list[Pkt]) -> Path:
    """Write a nanosecond-resolution little-endian pcap (Ethernet) of the packets, in list order."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    for p in pkts:
        f = _frame(p)
        out.append(
            struct.pack("<IIII", p.t_ns // 1_000_000_000, p.t_ns % 1_000_000_000, len(f), len(f))
        )
        out.append(f)
    path.write_bytes(b"".join(out))
    return path


@dataclass
class _Conn:
    cport: int
    sport: int
    cisn: int
    sisn: int
    cws: int | None
    sws: int | None
    v6: bool
    pkts: list[Pkt] = field(default_factory=list)


def simulate(seed: int, n_conns: int = 3, n_data: int = 60) -> list[Pkt]:
    """A seeded random capture of ``n_conns`` connections (some reusing ports), time-ordered.

    Each connection: optional handshake (sometimes missing, sometimes SYN retransmitted),
    server->client bulk data of MSS-ish segments with random ACK patterns, capture loss,
    retransmissions (timeout and after duplicate ACKs), reordering, zero-window episodes with
    probes, keep-alives, window updates, then FIN/RST. ISNs are random, often near 2**32 so that
    sequence numbers wrap.
    """
    rnd = random.Random(seed)
    out: list[Pkt] = []
    t = 1_700_000_000_000_000_000 + seed * 1_000_000_000
    prev_ports: tuple[int, int] | None = None
    for _ in range(n_conns):
        if prev_ports and rnd.random() < 0.4:
            cport, sport = prev_ports  # port reuse
        else:
            cport, sport = rnd.randrange(30000, 60000), rnd.choice([80, 443, 8080, 5000])
        prev_ports = (cport, sport)
        v6 = rnd.random() < 0.2
        near = rnd.random() < 0.5
        cisn = (0xFFFFFFFF - rnd.randrange(0, 40000)) if near else rnd.randrange(0, 2**32)
        sisn = (
            (0xFFFFFFFF - rnd.randrange(0, 40000))
            if rnd.random() < 0.5
            else rnd.randrange(0, 2**32)
        )
        cws = rnd.choice([None, 0, 2, 7, 8, 15])
        sws = rnd.choice([None, 0, 3, 7, 9])
        t = _one_conn(rnd, out, t, cport, sport, cisn, sisn, cws, sws, v6, n_data)
        t += rnd.choice([1_000, 500_000, 50_000_000, 2_000_000_000])
    return out


def _one_conn(
    rnd: random.Random,
    out: list[Pkt],
    t: int,
    cport: int,
    sport: int,
    cisn: int,
    sisn: int,
    cws: int | None,
    sws: int | None,
    v6: bool,
    n_data: int,
) -> int:
    M = 0xFFFFFFFF
    rtt = rnd.choice([200_000, 2_000_000, 30_000_000])
    lossy = rnd.random() < 0.7

    def keep() -> bool:
        return not lossy or rnd.random() > 0.08

    def emit(p: Pkt, capture: bool = True) -> None:
        p.cport, p.sport, p.v6 = cport, sport, v6
        if capture:
            out.append(p)

    def gap(scale: int = 1) -> int:
        r = rnd.random()
        if r < 0.3:
            return rnd.randrange(1, 50_000)
        if r < 0.6:
            return rnd.randrange(50_000, 3_000_000)
        if r < 0.9:
            return rnd.randrange(3_000_000, 25_000_000) * scale
        return rnd.randrange(25_000_000, 400_000_000) * scale

    handshake = rnd.random() < 0.8
    cnext = (cisn + 1) & M
    snext = (sisn + 1) & M
    cwin, swin = rnd.choice([502, 65535, 1024, 3000]), rnd.choice([235, 65535, 8192, 4000])
    if handshake:
        copt = wscale_opt(cws) if cws is not None else struct.pack(">BBH", 2, 4, 1460)
        sopt = wscale_opt(sws) if sws is not None else struct.pack(">BBH", 2, 4, 1460)
        syn_data = rnd.choice([0, 0, 0, 40])
        emit(Pkt(t, True, SYN, cisn, 0, cwin, syn_data, copt), keep())
        if rnd.random() < 0.25:  # SYN retransmission
            t += rtt * 3
            emit(Pkt(t, True, SYN, cisn, 0, cwin, syn_data, copt))
        t += rtt // 2
        sack = (cisn + 1 + syn_data) & M if rnd.random() < 0.5 else cnext
        emit(Pkt(t, False, SYN | ACK, sisn, sack, swin, 0, sopt), keep())
        if rnd.random() < 0.15:  # SYN-ACK retransmitted, sometimes with another ISN
            t += rtt
            other = sisn if rnd.random() < 0.5 else (sisn + 12345) & M
            emit(Pkt(t, False, SYN | ACK, other, sack, swin, 0, sopt))
        t += rtt // 2
        cnext = sack
        emit(Pkt(t, True, ACK, cnext, snext, cwin), keep())
    else:
        # mid-stream start: first packet from either side
        if rnd.random() < 0.5:
            emit(Pkt(t, True, ACK, cnext, snext, cwin))
    # client request
    t += gap()
    req = rnd.randrange(1, 400)
    emit(Pkt(t, True, ACK | PSH, cnext, snext, cwin, req), keep())
    cnext = (cnext + req) & M
    sent: list[tuple[int, int]] = []  # (seq, len) sent by the server, for retransmissions
    s_acked = snext
    last_ack_sent = snext
    for _ in range(n_data):
        r = rnd.random()
        t += gap()
        if r < 0.55:  # server data
            ln = rnd.choice([1, 100, 536, 1448, 1448, 1448, 2896])
            flags = ACK | (PSH if rnd.random() < 0.3 else 0)
            emit(Pkt(t, False, flags, snext, cnext, swin, ln), keep())
            sent.append((snext, ln))
            snext = (snext + ln) & M
            if rnd.random() < 0.05 and len(sent) >= 2:  # reorder: a previous segment right after
                s_seq, s_len = sent[-2]
                t += rnd.randrange(1, 400_000)
                emit(Pkt(t, False, ACK, s_seq, cnext, swin, s_len))
        elif r < 0.72:  # client ACK (cumulative, sometimes partial, sometimes stale)
            choice = rnd.random()
            if choice < 0.7:
                a = snext
            elif choice < 0.85 and sent:
                s_seq, s_len = rnd.choice(sent)
                a = (s_seq + rnd.randrange(0, s_len + 1)) & M
            else:
                a = last_ack_sent
            if rnd.random() < 0.1:
                cwin = rnd.choice([0, 0, cwin, 1024, 65535])
            emit(Pkt(t, True, ACK, cnext, a, cwin), keep())
            last_ack_sent = a
            s_acked = a
        elif r < 0.80:  # a burst of duplicate ACKs then a (fast) retransmission
            for _i in range(rnd.choice([1, 2, 3, 4])):
                t += rnd.randrange(1, 3_000_000)
                emit(Pkt(t, True, ACK, cnext, s_acked, cwin), keep())
            if sent:
                t += rnd.choice([100_000, 5_000_000, 30_000_000])
                s_seq = s_acked if rnd.random() < 0.7 else rnd.choice(sent)[0]
                emit(Pkt(t, False, ACK, s_seq, cnext, swin, rnd.choice([1448, 1000, 1])), keep())
        elif r < 0.86:  # timeout retransmission of something sent
            if sent:
                s_seq, s_len = rnd.choice(sent)
                t += rnd.randrange(0, 300_000_000)
                emit(Pkt(t, False, ACK, s_seq, cnext, swin, s_len), keep())
        elif r < 0.90:  # zero window episode: ZW, probe(s), probe ack(s), update
            emit(Pkt(t, True, ACK, cnext, snext, 0), keep())
            for _i in range(rnd.choice([1, 2])):
                t += rnd.randrange(1_000_000, 200_000_000)
                emit(Pkt(t, False, ACK, snext, cnext, swin, 1), keep())
                t += rnd.randrange(10_000, 2_000_000)
                emit(Pkt(t, True, ACK, cnext, snext, 0), keep())
            t += rnd.randrange(1_000_000, 50_000_000)
            cwin = rnd.choice([1024, 65535, 4000])
            emit(Pkt(t, True, ACK, cnext, snext, cwin), keep())
        elif r < 0.94:  # keep-alive and its ACK (either side)
            if rnd.random() < 0.5:
                emit(Pkt(t, True, ACK, (cnext - 1) & M, snext, cwin, rnd.choice([0, 1])), keep())
                t += rnd.randrange(10_000, 2_000_000)
                emit(Pkt(t, False, ACK, snext, cnext, swin), keep())
            else:
                emit(Pkt(t, False, ACK, (snext - 1) & M, cnext, swin, rnd.choice([0, 1])), keep())
                t += rnd.randrange(10_000, 2_000_000)
                emit(Pkt(t, True, ACK, cnext, snext, cwin), keep())
        elif r < 0.97:  # server fills the client's window exactly
            shift = cws if (handshake and cws is not None and sws is not None) else 0
            shift = min(shift, 14)
            room = ((s_acked + ((cwin << shift) & M)) - snext) & M
            if 0 < room <= 20000:
                emit(Pkt(t, False, ACK, snext, cnext, swin, room), keep())
                sent.append((snext, room))
                snext = (snext + room) & M
        else:  # client sends more data, server window update
            ln = rnd.randrange(1, 1000)
            emit(Pkt(t, True, ACK | PSH, cnext, snext, cwin, ln), keep())
            cnext = (cnext + ln) & M
            t += rnd.randrange(1, 5_000_000)
            swin = rnd.choice([swin, swin + 1, 4000, 65535])
            emit(Pkt(t, False, ACK, snext, cnext, swin), keep())
    t += gap()
    end = rnd.random()
    if end < 0.5:
        emit(Pkt(t, True, FIN | ACK, cnext, snext, cwin), keep())
        t += rtt
        emit(Pkt(t, False, FIN | ACK, snext, (cnext + 1) & M, swin), keep())
        t += rtt
        emit(Pkt(t, True, ACK, (cnext + 1) & M, (snext + 1) & M, cwin), keep())
        if rnd.random() < 0.3:  # FIN retransmission
            t += rtt
            emit(Pkt(t, False, FIN | ACK, snext, (cnext + 1) & M, swin))
    elif end < 0.8:
        emit(Pkt(t, rnd.random() < 0.5, RST | ACK, cnext, snext, 0), keep())
        if rnd.random() < 0.3:  # data after the RST, RST with data
            t += gap()
            emit(Pkt(t, False, RST, snext, 0, 0, 10))
    return t
