"""The ``icmp_errors`` and ``path_mtu`` tables: ICMP errors as the network sent them, and what
each TCP sender did about a path that could not carry its segments.

Comparing with tshark: ``icmp_errors`` rows are the frames of ``icmp.type in {3 4 5 11 12}``
or ``icmpv6.type in {1 2 3 4}``; ``type``, ``code`` and ``mtu`` are ``icmp.type`` /
``icmpv6.type``, ``icmp.code`` / ``icmpv6.code`` and ``icmp.mtu`` / ``icmpv6.mtu``, and
``tcp_stream`` is the ``tcp.stream`` tshark gives the frame from the TCP header it quotes.

``path_mtu`` comes from the TCP tracker (:class:`~pcaptools.tcp.tracker.DirStats`: the first
time a sender re-sent a segment from the same byte in smaller pieces, and the ACK that covered
the end of the original) joined with the "too big" ICMP errors of the connection. With ICMP,
this is path-MTU discovery (RFC 1191 / 8201) working; without any, the sender found the
smaller size by itself (RFC 4821 packetization-layer PMTUD, Linux ``tcp_mtu_probing``), or
its ICMP was not visible where the capture was taken.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..diagnostics import Diagnostics
from ..net.packet import IcmpError, IpPacket
from ..tcp.analysis import SegmentAnalysis
from ..tcp.tracker import Connection, TcpTracker, addr_text
from .schema import TS_DTYPE, Column, TableSchema

__all__ = ["ICMP_ERRORS", "MAX_ICMP_ERROR_ROWS", "PATH_MTU", "IcmpErrorsBuilder", "path_mtu_table"]

MAX_ICMP_ERROR_ROWS = 100_000
"""Rows the ``icmp_errors`` table keeps; later errors are counted in one
``table.icmp_errors_truncated`` row (an ICMP flood must not fill memory)."""

_DIRECTION = Column(
    "direction", "category", None,
    "client_to_server or server_to_client: the direction of the connection the quoted "
    "packet was sent in (its sender is the one told); NA without a connection",
)

ICMP_ERRORS = TableSchema(
    name="icmp_errors",
    grain="one row per ICMP / ICMPv6 error packet (destination unreachable, fragmentation "
    "needed, packet too big, time exceeded, parameter problem, source quench, redirect)",
    key=("frame",),
    columns=(
        Column("frame", "int64", None, "Wireshark frame.number of the ICMP packet"),
        Column("ts", TS_DTYPE, None, "capture time"),
        Column("ip_version", "int64", None, "4 (ICMP) or 6 (ICMPv6)"),
        Column("src", "string", None, "sender of the error (a router, or the destination host)"),
        Column("dst", "string", None, "receiver of the error: the sender of the quoted packet"),
        Column("type", "int64", None, "icmp.type / icmpv6.type"),
        Column("code", "int64", None, "icmp.code / icmpv6.code"),
        Column(
            "kind", "category", None,
            "frag_needed (ICMP 3/4), packet_too_big (ICMPv6 2), port_unreachable, "
            "host_unreachable, net_unreachable, admin_prohibited, unreachable (other codes), "
            "time_exceeded, parameter_problem, source_quench, redirect",
        ),
        Column(
            "mtu", "Int64", "bytes",
            "next-hop MTU of frag_needed (icmp.mtu, RFC 1191; 0 from routers older than it) or "
            "the MTU of packet_too_big (icmpv6.mtu); NA for other kinds",
        ),
        Column(
            "quoted_proto", "Int64", None,
            "IP protocol of the quoted packet (6 TCP, 17 UDP); NA if not quoted",
        ),
        Column("quoted_src", "string", None, "source address of the quoted packet"),
        Column("quoted_dst", "string", None, "destination address of the quoted packet"),
        Column("quoted_sport", "Int64", None, "TCP/UDP source port of the quoted packet"),
        Column("quoted_dport", "Int64", None, "TCP/UDP destination port of the quoted packet"),
        Column(
            "quoted_len", "Int64", "bytes",
            "IP total length of the quoted packet (IPv6: 40 + payload length): for a too-big "
            "error, the size that did not fit",
        ),
        Column("quoted_df", "boolean", None, "DF bit of the quoted IPv4 packet (True for IPv6)"),
        Column(
            "tcp_stream", "Int64", None,
            "tcp.stream of the connection whose TCP header is quoted (as tshark numbers it); "
            "NA when the quoted packet is not TCP or its header is cut short",
        ),
        _DIRECTION,
    ),
)

PATH_MTU = TableSchema(
    name="path_mtu",
    grain="one row per TCP connection direction that re-sent a segment in smaller pieces, "
    "or was told by ICMP that its packets were too big",
    key=("tcp_stream", "direction"),
    columns=(
        Column("tcp_stream", "int64", None, "Wireshark tcp.stream of the connection"),
        Column(
            "direction", "category", None,
            "client_to_server or server_to_client: the sender whose segments were too big",
        ),
        Column("ip_version", "int64", None, "4 or 6"),
        Column(
            "outcome", "category", None,
            "discovered: a too-big ICMP error quoting the connection was captured and the "
            "sender re-sent smaller (path-MTU discovery worked); no_icmp: the sender re-sent "
            "smaller without any such ICMP in the capture (RFC 4821 probing, Linux "
            "tcp_mtu_probing, or an ICMP the capture could not see); icmp_ignored: too-big "
            "ICMP errors arrived but the sender never re-sent smaller in the capture",
        ),
        Column(
            "mtu", "Int64", "bytes",
            "the MTU learnt: the smallest icmp_mtu when there is one (not 0), else the IP "
            "packet size of the smaller re-sent segment (the path carries at least that)",
        ),
        Column(
            "icmp_errors", "int64", "packets",
            "too-big ICMP errors quoting this direction of the connection",
        ),
        Column("icmp_frame", "Int64", None, "first of them"),
        Column("icmp_ts", TS_DTYPE, None, "time of icmp_frame"),
        Column(
            "icmp_mtu", "Int64", "bytes",
            "smallest MTU they reported (0: a router older than RFC 1191)",
        ),
        Column(
            "big_frame", "Int64", None,
            "first transmission of the first segment the sender later re-sent in smaller "
            "pieces (the first segment too big for the path); NA for icmp_ignored",
        ),
        Column("big_ts", TS_DTYPE, None, "time of big_frame"),
        Column("big_seg_bytes", "Int64", "bytes", "tcp.len of big_frame"),
        Column(
            "resend_frame", "Int64", None,
            "first re-send of that segment's start in a smaller segment",
        ),
        Column("resend_ts", TS_DTYPE, None, "time of resend_frame"),
        Column("resend_seg_bytes", "Int64", "bytes", "tcp.len of resend_frame"),
        Column(
            "delivered_frame", "Int64", None,
            "the ACK that covered the last byte of big_frame's data; NA if none was captured",
        ),
        Column("delivered_ts", TS_DTYPE, None, "time of delivered_frame"),
        Column(
            "adapt_ms", "float64", "ms",
            "resend_ts minus big_ts: how long the sender took to send smaller",
        ),
        Column(
            "delivered_ms", "float64", "ms",
            "delivered_ts minus big_ts: how long big_frame's data took to arrive",
        ),
        Column(
            "cost_ms", "float64", "ms",
            "delivered_ms minus the connection's initial RTT (tcp_handshakes.irtt_ms, what a "
            "delivery takes without the problem), at least 0: the time path-MTU discovery "
            "cost; NaN without a delivery or a handshake",
        ),
    ),
)


def _kind(e: IcmpError, v6: bool) -> str:
    t, c = e.type, e.code
    if v6:
        if t == 2:
            return "packet_too_big"
        if t == 1:
            return {4: "port_unreachable", 3: "host_unreachable", 0: "net_unreachable",
                    1: "admin_prohibited"}.get(c, "unreachable")
        return "time_exceeded" if t == 3 else "parameter_problem"
    if t == 3:
        return {4: "frag_needed", 3: "port_unreachable", 1: "host_unreachable",
                0: "net_unreachable", 13: "admin_prohibited", 9: "admin_prohibited",
                10: "admin_prohibited"}.get(c, "unreachable")
    return {4: "source_quench", 5: "redirect", 11: "time_exceeded"}.get(t, "parameter_problem")


class IcmpErrorsBuilder:
    """Collects the ICMP error packets of a capture (``add`` per packet, ``frame`` at the end)."""

    def __init__(self, diag: Diagnostics, *, max_rows: int = MAX_ICMP_ERROR_ROWS) -> None:
        self.diag = diag
        self.max_rows = max_rows
        self.rows: list[tuple[Any, ...]] = []
        self.too_big: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        """(tcp_stream, 0 client | 1 server sent the quoted packet) -> [(frame, ts, mtu)]"""
        self._told = False
        self.offered = 0
        """ICMP errors given a row or, in another worker of a parallel load, not (``mine``)"""

    def add(self, pkt: IpPacket, a: SegmentAnalysis | None, mine: bool = True) -> None:
        """One ICMP error packet (``a``: the analysis of the TCP header it quotes, if any).
        A worker of a parallel load is offered every ICMP error and keeps a row only for its
        own (``mine``), so the workers agree on where :attr:`max_rows` cuts."""
        e = pkt.icmp
        if e is None:
            return
        v6 = pkt.ip_version == 6
        kind = _kind(e, v6)
        stream = a.tcp_stream if a is not None else None
        d = None if a is None else (0 if a.from_client else 1)
        if stream is not None and d is not None and kind in ("frag_needed", "packet_too_big"):
            self.too_big.setdefault((stream, d), []).append((pkt.frame, pkt.ts_ns, e.mtu))
        if self.offered >= self.max_rows:
            if not self._told:
                self._told = True
                self.diag.add(
                    "table.icmp_errors_truncated",
                    f"more than {self.max_rows} ICMP errors: this one and later ones have no "
                    "icmp_errors row (path_mtu still counts them)",
                    ts_ns=pkt.ts_ns, frame=pkt.frame,
                )
            return
        self.offered += 1
        if not mine:
            return
        quoted = e.quoted_version != 0
        self.rows.append((
            pkt.frame, pkt.ts_ns, pkt.ip_version, addr_text(pkt.src), addr_text(pkt.dst),
            e.type, e.code, kind, e.mtu if e.mtu >= 0 else None,
            e.quoted_proto if quoted and e.quoted_proto >= 0 else None,
            addr_text(e.quoted_src) if quoted else None,
            addr_text(e.quoted_dst) if quoted else None,
            e.quoted_sport if e.quoted_sport >= 0 else None,
            e.quoted_dport if e.quoted_dport >= 0 else None,
            e.quoted_len if quoted else None, e.quoted_df if quoted else None,
            stream, None if d is None else ("client_to_server", "server_to_client")[d],
        ))

    def frame(self) -> pd.DataFrame:
        return ICMP_ERRORS.frame(self.rows)


def path_mtu_needs(conn: Connection, tracker: TcpTracker) -> bool:
    """Whether :func:`path_mtu_table` may read ``conn``'s record: it re-sent a segment in
    smaller pieces, or an ICMP error quoted one of its segments (the records of the other
    connections may be dropped before it runs: :func:`~.tcp_tables.record_tables`)."""
    return (conn.side[0].shrink is not None or conn.side[1].shrink is not None
            or conn.conv.tcp_stream in tracker.quoted_streams)


def path_mtu_table(tracker: TcpTracker, icmp: IcmpErrorsBuilder | None) -> pd.DataFrame:
    """The ``path_mtu`` rows from the tracker's per-direction records and the too-big ICMP
    errors ``icmp`` saw (None: no ICMP information). Records dropped (None) are of
    connections without a row (:func:`path_mtu_needs`)."""
    too_big = icmp.too_big if icmp is not None else {}
    rows = []
    for conn in tracker.connections:
        if conn is None:
            continue
        stream = conn.conv.tcp_stream
        irtt = conn.conv.irtt_ns
        for d in (0, 1):
            sh = conn.side[d].shrink
            errs = too_big.get((stream, d), [])
            if sh is None and not errs:
                continue
            mtus = [m for _, _, m in errs if m > 0]
            icmp_mtu = min((m for _, _, m in errs), default=None)
            if sh is None:
                outcome = "icmp_ignored"
            else:
                outcome = "discovered" if any(f < sh[3] for f, _, _ in errs) else "no_icmp"
            mtu = min(mtus) if mtus else (sh[6] if sh is not None else None)
            big: tuple[int | None, int | None] = (None, None)
            res: tuple[int | None, int | None] = (None, None)
            dlv: tuple[int | None, int | None] = (None, None)
            big_len = res_len = None
            adapt = delivered = cost = None
            if sh is not None:
                big, big_len = (sh[0], sh[1]), sh[2]
                res, res_len = (sh[3], sh[4]), sh[5]
                adapt = (sh[4] - sh[1]) / 1e6
                if sh[8]:
                    dlv = (sh[8], sh[9])
                    delivered = (sh[9] - sh[1]) / 1e6
                    if irtt is not None:
                        cost = max(0.0, delivered - irtt / 1e6)
            rows.append((
                stream, ("client_to_server", "server_to_client")[d], conn.conv.ip_version,
                outcome, mtu, len(errs), errs[0][0] if errs else None,
                errs[0][1] if errs else None, icmp_mtu, big[0], big[1], big_len, res[0], res[1],
                res_len, dlv[0], dlv[1], adapt, delivered, cost,
            ))
    return PATH_MTU.frame(rows)
