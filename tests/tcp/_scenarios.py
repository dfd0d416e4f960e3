"""Hand-made TCP captures for corner cases the public corpus lacks (compared with tshark)."""

from __future__ import annotations

from collections.abc import Callable

from tests.tcp._pcapgen import ACK, FIN, PSH, RST, SYN, Pkt, wscale_opt

M = 0xFFFFFFFF
T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def wrap_exact_zero() -> list[Pkt]:
    """ISN 2**32-1: the SYN's next sequence number is 0, Wireshark's "unset" value; data wraps."""
    c, s = M, 0x7FFFFFF0
    p = [
        Pkt(T0, True, SYN, c, 0, 1000, 0, wscale_opt(2)),
        Pkt(T0 + 1 * MS, False, SYN | ACK, s, 0, 2000, 0, wscale_opt(1)),
        Pkt(T0 + 2 * MS, True, ACK, 0, s + 1, 1000),
    ]
    t = T0 + 3 * MS
    seq = 0
    for _ in range(6):
        p.append(Pkt(t, True, ACK | PSH, seq, s + 1, 1000, 100))
        seq = (seq + 100) & M
        t += MS
    p.append(Pkt(t, True, ACK, 100, s + 1, 1000, 100))  # old data again
    p.append(Pkt(t + MS, False, ACK, s + 1, 600, 2000))
    p.append(Pkt(t + 2 * MS, False, ACK, s + 1, 600, 2000))
    return p


def wrap_data() -> list[Pkt]:
    """Data crossing 2**32 in both directions, with loss, retransmission and out-of-order."""
    c, s = M - 3000, M - 10
    p = [
        Pkt(T0, True, SYN, c, 0, 502, 0, wscale_opt(7)),
        Pkt(T0 + 5 * MS, False, SYN | ACK, s, c + 1, 65535, 0, wscale_opt(7)),
        Pkt(T0 + 10 * MS, True, ACK, c + 1, s + 1, 502),
    ]
    t = T0 + 11 * MS
    seq = (s + 1) & M
    segs = []
    for _ in range(8):
        segs.append((seq, 1448))
        seq = (seq + 1448) & M
    order = [0, 1, 3, 2, 4, 6, 7, 5, 1]
    for k in order:
        sq, ln = segs[k]
        p.append(Pkt(t, False, ACK, sq, (c + 1) & M, 65535, ln))
        t += 100_000 if k != 1 or len(p) < 8 else 50 * MS
    p.append(Pkt(t, True, ACK, (c + 1) & M, seq, 502))
    p.append(Pkt(t + MS, True, ACK | FIN, (c + 1) & M, seq, 502))
    p.append(Pkt(t + 2 * MS, False, ACK | FIN, seq, (c + 2) & M, 65535))
    p.append(Pkt(t + 3 * MS, True, ACK, (c + 2) & M, (seq + 1) & M, 502))
    return p


def port_reuse() -> list[Pkt]:
    """Three connections on one port pair: new ISN after FIN, SYN sent again, SYN-ACK re-based."""
    p: list[Pkt] = []
    t = T0
    for n, (cisn, sisn) in enumerate([(1000, 5000), (900000, 7000), (900000, 8000)]):
        p.append(Pkt(t, True, SYN, cisn, 0, 1000, 0, wscale_opt(3)))
        if n == 1:
            p.append(
                Pkt(t + 1000 * MS, True, SYN, cisn, 0, 1000, 0, wscale_opt(3))
            )  # same ISN again
            t += 1000 * MS
        p.append(Pkt(t + MS, False, SYN | ACK, sisn, cisn + 1, 2000, 0, wscale_opt(4)))
        if n == 2:
            p.append(Pkt(t + 2 * MS, False, SYN | ACK, sisn + 99, cisn + 1, 2000, 0, wscale_opt(4)))
        p.append(Pkt(t + 3 * MS, True, ACK, cisn + 1, sisn + 1, 1000))
        p.append(Pkt(t + 4 * MS, True, ACK | PSH, cisn + 1, sisn + 1, 1000, 50))
        p.append(Pkt(t + 5 * MS, False, ACK, sisn + 1, cisn + 51, 2000, 300))
        p.append(Pkt(t + 6 * MS, True, ACK | FIN, cisn + 51, sisn + 301, 1000))
        p.append(Pkt(t + 7 * MS, False, ACK | FIN, sisn + 301, cisn + 52, 2000))
        p.append(Pkt(t + 8 * MS, True, ACK, cisn + 52, sisn + 302, 1000))
        t += 2000 * MS
    # a server-side SYN on the same ports (roles swap) and the IPv6 twin of the 4-tuple
    p.append(Pkt(t, False, SYN, 4242, 0, 1000))
    p.append(Pkt(t + MS, True, SYN | ACK, 31337, 4243, 1000))
    p.append(Pkt(t + 2 * MS, True, SYN, 1000, 0, 1000, v6=True))
    return p


def window_scaling() -> list[Pkt]:
    """Connections with scaling in both SYNs, only in the SYN, only in the SYN-ACK, shift > 14,
    a missing SYN, and a window scale option on a non-SYN segment."""
    p: list[Pkt] = []
    t = T0
    variants = [(5, 6), (5, None), (None, 6), (15, 20), ("nosyn", 6), (2, "late")]
    for n, (cw, sw) in enumerate(variants):
        cp = 41000 + n
        if cw != "nosyn":
            p.append(
                Pkt(
                    t,
                    True,
                    SYN,
                    100,
                    0,
                    1000,
                    0,
                    wscale_opt(cw) if isinstance(cw, int) else b"",
                    cport=cp,
                )
            )
        p.append(
            Pkt(
                t + MS,
                False,
                SYN | ACK,
                500,
                101,
                1000,
                0,
                wscale_opt(sw) if isinstance(sw, int) else b"",
                cport=cp,
            )
        )
        p.append(Pkt(t + 2 * MS, True, ACK, 101, 501, 100, cport=cp))
        opts = wscale_opt(9) if sw == "late" else b""
        p.append(Pkt(t + 3 * MS, False, ACK, 501, 101, 30, 1448, opts, cport=cp))
        p.append(Pkt(t + 4 * MS, False, ACK, 1949, 101, 30, 1448, cport=cp))
        # fill the client's advertised window exactly (if scaled by 2**5 it is 3200 bytes)
        p.append(Pkt(t + 5 * MS, True, ACK, 101, 3397, 100, cport=cp))
        for k in range(3):
            p.append(Pkt(t + 6 * MS + k, False, ACK, 3397 + k * 1600, 101, 30, 1600, cport=cp))
        p.append(Pkt(t + 7 * MS, True, ACK, 101, 3397 + 4800, 0, cport=cp))
        p.append(Pkt(t + 8 * MS, True, ACK, 101, 3397 + 4800, 1000, cport=cp))
        t += 100 * MS
    return p


def unacked_limit() -> list[Pkt]:
    """10050 unacknowledged segments in one direction (tshark tracks at most 10000), then ACKs."""
    p = [
        Pkt(T0, True, SYN, 1, 0, 65535),
        Pkt(T0 + MS, False, SYN | ACK, 100, 2, 65535),
        Pkt(T0 + 2 * MS, True, ACK, 2, 101, 65535),
    ]
    t = T0 + 3 * MS
    seq = 101
    for _ in range(10050):
        p.append(Pkt(t, False, ACK, seq, 2, 65535, 10))
        seq += 10
        t += 1000
    p.append(Pkt(t, True, ACK, 2, 101 + 10 * 9999, 65535))
    p.append(Pkt(t + 1000, True, ACK, 2, 101 + 10 * 10000, 65535))
    p.append(Pkt(t + 2000, True, ACK, 2, seq, 65535))
    p.append(Pkt(t + 3000, False, ACK | FIN, seq, 2, 65535))
    p.append(Pkt(t + 4000, True, ACK, 2, seq + 1, 65535))
    return p


def odd_timing_and_flags() -> list[Pkt]:
    """Time going backwards, a SYN at time 0, a zero handshake RTT, SYN+FIN, RST with data,
    an ACK number without the ACK flag, keep-alive with one byte, duplicate ACKs >20 ms apart."""
    p = [
        Pkt(0, True, SYN, 10, 0, 1000),
        Pkt(5 * MS, False, SYN | ACK, 20, 11, 1000),
        Pkt(10 * MS, True, ACK, 11, 21, 1000),
    ]
    t = T0
    p += [
        Pkt(t, True, SYN, 100, 0, 1000, cport=42000),
        Pkt(t, False, SYN | ACK, 200, 101, 1000, cport=42000),
        Pkt(t, True, ACK, 101, 201, 1000, cport=42000),
        Pkt(t + MS, True, ACK, 101, 201, 1000, cport=42000),
        Pkt(t + 2 * MS, False, ACK, 201, 101, 1000, 500, cport=42000),
        Pkt(t + 2 * MS - 500_000, False, ACK, 701, 101, 1000, 500, cport=42000),
        Pkt(t + 1 * MS, False, ACK, 201, 101, 1000, 500, cport=42000),
        Pkt(t + 3 * MS, True, ACK, 101, 201, 1000, cport=42000),
        Pkt(t + 4 * MS, True, ACK, 101, 201, 1000, cport=42000),
        Pkt(t + 30 * MS, True, ACK, 101, 201, 1000, cport=42000),
        Pkt(t + 55 * MS, False, ACK, 201, 101, 1000, 500, cport=42000),
        Pkt(t + 56 * MS, True, 0, 101, 77777, 1000, 0, cport=42000),
        Pkt(t + 57 * MS, True, ACK, 100, 1201, 1000, 1, cport=42000),
        Pkt(t + 58 * MS, False, ACK, 1201, 101, 1000, cport=42000),
        Pkt(t + 59 * MS, True, SYN | FIN, 100, 0, 1000, 5, cport=42000),
        Pkt(t + 60 * MS, False, RST, 1201, 0, 0, 20, cport=42000),
        Pkt(t + 61 * MS, False, RST | ACK, 1201, 101, 0, 0, cport=42000),
        Pkt(t + 62 * MS, False, ACK, 1201, 101, 1000, 100, cport=42000),
    ]
    return p


def zero_window_dance() -> list[Pkt]:
    """Zero window, probes and their ACKs, keep-alive ACKs, window update/full, ACKed unseen."""
    p = [
        Pkt(T0, True, SYN, 1, 0, 4000, 0, wscale_opt(0)),
        Pkt(T0 + MS, False, SYN | ACK, 1000, 2, 4000, 0, wscale_opt(0)),
        Pkt(T0 + 2 * MS, True, ACK, 2, 1001, 4000),
    ]
    t = T0 + 3 * MS
    p += [
        Pkt(t, False, ACK, 1001, 2, 4000, 4000),
        Pkt(t + MS, True, ACK, 2, 5001, 0),
        Pkt(t + 200 * MS, False, ACK, 5001, 2, 4000, 1),
        Pkt(t + 201 * MS, True, ACK, 2, 5001, 0),
        Pkt(t + 400 * MS, False, ACK, 5001, 2, 4000, 1),
        Pkt(t + 401 * MS, True, ACK, 2, 5001, 0),
        Pkt(t + 500 * MS, True, ACK, 2, 5001, 2000),
        Pkt(t + 501 * MS, False, ACK, 5001, 2, 4000, 2000),
        Pkt(t + 502 * MS, True, ACK, 2, 9001, 3000),
        Pkt(t + 600 * MS, True, ACK, 1, 9001, 3000),
        Pkt(t + 601 * MS, False, ACK, 9001, 2, 4000),
        Pkt(t + 602 * MS, False, ACK, 9001, 2, 4000),
        Pkt(t + 700 * MS, False, ACK, 9000, 2, 4000, 1),
        Pkt(t + 701 * MS, True, ACK, 2, 9001, 3000),
        Pkt(t + 702 * MS, True, ACK, 2, 12001, 3000),
        Pkt(t + 703 * MS, True, ACK, 2, 12001, 3000),
        Pkt(t + 704 * MS, False, ACK, 12001, 2, 4000, 100),
        Pkt(t + 705 * MS, True, ACK, 2, 14001, 3000),
        Pkt(t + 706 * MS, False, ACK, 12101, 2, 4000, 100),
    ]
    return p


def icmp_quoted() -> list[Pkt]:
    """ICMP / ICMPv6 errors quoting TCP headers: tshark gives them a tcp.stream (creating one
    for an unseen connection, or a new one for a SYN with another ISN) but no analysis."""
    t = T0
    q = 40  # the whole TCP header with options
    return [
        # A: SYN then the error quoting it (same stream)
        Pkt(t, True, SYN, 100, 0, 1000, 0, wscale_opt(7), cport=43001),
        Pkt(t + MS, True, SYN, 100, 0, 1000, 0, wscale_opt(7), cport=43001, icmp_quote=q),
        # B: the error first (creates the stream), then the SYN sent again, answered
        Pkt(t + 2 * MS, True, SYN, 200, 0, 1000, 0, wscale_opt(2), cport=43002, icmp_quote=q),
        Pkt(t + 3 * MS, True, SYN, 200, 0, 1000, 0, wscale_opt(2), cport=43002),
        Pkt(t + 4 * MS, False, SYN | ACK, 900, 201, 1000, 0, wscale_opt(3), cport=43002),
        Pkt(t + 5 * MS, True, ACK, 201, 901, 1000, cport=43002),
        # C: only 8 bytes of TCP quoted: no stream
        Pkt(t + 6 * MS, True, SYN, 300, 0, 1000, 0, b"", cport=43003, icmp_quote=8),
        # D: established connection, then an error quoting a data segment (an ACK)
        Pkt(t + 7 * MS, True, SYN, 400, 0, 1000, 0, wscale_opt(1), cport=43004),
        Pkt(t + 8 * MS, False, SYN | ACK, 800, 401, 1000, 0, wscale_opt(1), cport=43004),
        Pkt(t + 9 * MS, False, ACK, 801, 401, 1000, 100, cport=43004, icmp_quote=q),
        Pkt(t + 10 * MS, True, ACK, 401, 801, 1000, cport=43004),
        Pkt(t + 11 * MS, False, ACK, 801, 401, 1000, 100, cport=43004),
        # E: an error quoting a SYN with a new ISN on a used port pair: new stream, reused ports
        Pkt(t + 12 * MS, True, SYN, 4000, 0, 1000, 0, wscale_opt(1), cport=43004, icmp_quote=q),
        Pkt(t + 13 * MS, True, ACK, 401, 801, 1000, cport=43004),
        # F: ICMPv6, header quoted with its options cut off, and a SYN-ACK quoted
        Pkt(t + 14 * MS, True, SYN, 500, 0, 1000, 0, wscale_opt(4), cport=43005, v6=True),
        Pkt(
            t + 15 * MS,
            False,
            SYN | ACK,
            700,
            501,
            1000,
            0,
            wscale_opt(4),
            cport=43005,
            v6=True,
            icmp_quote=24,
        ),
        Pkt(
            t + 16 * MS,
            False,
            SYN | ACK,
            777,
            501,
            1000,
            0,
            wscale_opt(4),
            cport=43005,
            v6=True,
            icmp_quote=q,
        ),
        Pkt(t + 17 * MS, True, ACK, 501, 778, 1000, cport=43005, v6=True),
        Pkt(t + 18 * MS, True, ACK, 501, 778, 1000, 10, cport=43005, v6=True, icmp_quote=18),
    ]


SCENARIOS: dict[str, Callable[[], list[Pkt]]] = {
    "icmp_quoted": icmp_quoted,
    "wrap_exact_zero": wrap_exact_zero,
    "wrap_data": wrap_data,
    "port_reuse": port_reuse,
    "window_scaling": window_scaling,
    "unacked_limit": unacked_limit,
    "odd_timing_and_flags": odd_timing_and_flags,
    "zero_window_dance": zero_window_dance,
}
