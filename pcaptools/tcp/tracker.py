"""The TCP layer's single entry point: every TCP segment goes through :class:`TcpTracker`.

It wires together the tshark-compatible analysis (:mod:`.analysis`: stream index,
relative sequence numbers, analysis flags), Zeek-style connection state and history
(:mod:`.connstate`), TCP options (:mod:`.options`) and, for the connections that a
protocol layer asks for, in-order byte streams (:mod:`.reassembly`). It keeps one small
:class:`Connection` record per ``tcp_stream`` and the rows of the ``tcp_events`` table;
nothing per packet is kept here (the optional ``packets`` table is built by the caller
from the :class:`~.analysis.SegmentAnalysis` that :meth:`TcpTracker.segment` returns).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from .._columns import NA, CodeColumn, IntColumn
from ..diagnostics import Diagnostics
from ..net.packet import ACK, FIN, RST, SYN, TcpSegment
from .analysis import SegmentAnalysis, TcpAnalyzer, TcpConversation
from .connstate import ConnHistory
from .options import parse_options

#: tcp_events kinds that tshark's ``tcp.analysis.retransmission`` display filter matches
RETRANSMISSION_KINDS = frozenset({"retransmission", "fast_retransmission", "spurious_retransmission"})


def addr_text(packed: bytes) -> str:
    """Packed IPv4/IPv6 address -> text, as Wireshark prints it."""
    if len(packed) == 4:
        return socket.inet_ntop(socket.AF_INET, packed)
    return socket.inet_ntop(socket.AF_INET6, packed)


@dataclass(slots=True)
class Handshake:
    syn_frame: int | None = None
    syn_ts: int | None = None
    syn_count: int = 0
    synack_frame: int | None = None
    synack_ts: int | None = None
    synack_count: int = 0
    ack_frame: int | None = None
    ack_ts: int | None = None
    synack_seq_raw: int | None = None
    client_mss: int | None = None
    server_mss: int | None = None
    client_wscale: int | None = None
    server_wscale: int | None = None
    client_sack_perm: bool | None = None
    server_sack_perm: bool | None = None
    client_timestamps: bool | None = None
    server_timestamps: bool | None = None
    tfo_cookie_request: bool | None = None
    tfo_cookie_len: int | None = None
    syn_data_bytes: int = 0
    refused: bool = False


@dataclass(slots=True)
class Connection:
    """Per-connection summary kept by the tracker (one per tcp_stream)."""

    conv: TcpConversation
    first_frame: int
    first_ts: int
    last_frame: int = 0
    last_ts: int = 0
    packets: list[int] = field(default_factory=lambda: [0, 0])
    """[client, server]"""
    payload_bytes: list[int] = field(default_factory=lambda: [0, 0])
    wire_bytes: list[int] = field(default_factory=lambda: [0, 0])
    resent_bytes: list[int] = field(default_factory=lambda: [0, 0])
    retransmissions: int = 0
    fin_frame: list[int | None] = field(default_factory=lambda: [None, None])
    fin_ts: list[int | None] = field(default_factory=lambda: [None, None])
    rst_frame: int | None = None
    rst_ts: int | None = None
    rst_by_client: bool | None = None
    history: ConnHistory = field(default_factory=ConnHistory)
    handshake: Handshake | None = None


class EventColumns:
    """The tcp_events rows as typed columns (see tables.foundation.TCP_EVENTS)."""

    NAMES = ("frame", "ts", "tcp_stream", "seq", "len", "ack", "dup_ack_num", "dup_ack_frame")

    def __init__(self) -> None:
        self.ints = {n: IntColumn() for n in self.NAMES}
        self.direction = CodeColumn()
        self.kind = CodeColumn()
        self._dir = (self.direction.code("client_to_server"), self.direction.code("server_to_client"))
        self._app = tuple(self.ints[n].data.append for n in self.NAMES)

    def __len__(self) -> int:
        return len(self.ints["frame"].data)

    def add(self, seg: TcpSegment, stream: int, d: int, kind: str, rel_seq: int, rel_ack: int,
            dup_num: int | None, dup_frame: int | None) -> None:
        frame, ts, st, seq, ln, ack, dn, df = self._app
        frame(seg.frame)
        ts(seg.ts_ns)
        st(stream)
        seq(rel_seq)
        ln(seg.seg_len)
        ack(rel_ack)
        dn(NA if dup_num is None else dup_num)
        df(NA if dup_frame is None else dup_frame)
        self.direction.data.append(self._dir[d])
        self.kind.data.append(self.kind.code(kind))


class TcpTracker:
    """Feeds segments to the analysis and keeps per-connection records and tcp_events rows."""

    def __init__(self, diag: Diagnostics) -> None:
        self.diag = diag
        self.analyzer = TcpAnalyzer(diag)
        self.connections: list[Connection] = []
        self.events = EventColumns()
        """rows of tcp_events, in typed column arrays (~60 bytes a row)"""

    def segment(self, seg: TcpSegment) -> SegmentAnalysis:
        a = self.analyzer.feed(seg)
        stream = a.tcp_stream
        if stream >= len(self.connections):
            conn = self._new_connection(a, seg)
        else:
            conn = self.connections[stream]
        if conn.packets[0] + conn.packets[1] == 0 and a.conv.client_inferred:
            self.diag.add(
                "tcp.capture_started_mid_stream",
                "first packet of the connection is not a SYN; client/server roles inferred",
                ts_ns=seg.ts_ns, frame=seg.frame, tcp_stream=stream,
            )
        d = 0 if a.from_client else 1
        flags = seg.flags
        conn.last_frame = seg.frame
        conn.last_ts = seg.ts_ns
        conn.packets[d] += 1
        conn.payload_bytes[d] += seg.seg_len
        conn.wire_bytes[d] += seg.frame_len
        kinds = a.kinds
        retrans = False
        if a.resent_bytes:
            conn.resent_bytes[d] += a.resent_bytes
        if flags & (SYN | FIN | RST):
            self._control(conn, seg, a, d)
        elif conn.handshake is not None and conn.handshake.ack_frame is None and d == 0 \
                and conn.handshake.synack_frame is not None and flags & ACK and a.rel_ack == 1:
            conn.handshake.ack_frame = seg.frame
            conn.handshake.ack_ts = seg.ts_ns
        if kinds or a.resent_bytes:
            add = self.events.add
            rel_ack = NA if a.rel_ack is None else a.rel_ack
            for kind in kinds:
                if kind in RETRANSMISSION_KINDS:
                    retrans = True
                if kind == "duplicate_ack":
                    add(seg, stream, d, kind, a.rel_seq, rel_ack, a.dup_ack_num, a.dup_ack_frame)
                else:
                    add(seg, stream, d, kind, a.rel_seq, rel_ack, NA, NA)
            if a.resent_bytes and a.resent_bytes == seg.seg_len:
                add(seg, stream, d, "resent", a.rel_seq, rel_ack, NA, NA)
            if retrans:
                conn.retransmissions += 1
        conn.history.packet(a.from_client, flags, seg.seg_len, retransmission=retrans,
                            zero_window=seg.window == 0, seq=seg.seq)
        return a

    def unanalysed(self, seg: TcpSegment, captured: int) -> SegmentAnalysis | None:
        """A TCP header that is not a segment of its own (quoted in an ICMP error, or cut short):
        tshark gives its frame the connection's tcp.stream without analysing it. Returns the
        analysis (for the stream number) or None; the connection's counters are not touched."""
        a = self.analyzer.feed_unanalysed(seg, captured)
        if a is not None and a.tcp_stream >= len(self.connections):
            self._new_connection(a, seg)
        return a

    def _new_connection(self, a: SegmentAnalysis, seg: TcpSegment) -> Connection:
        # streams are numbered in order of appearance, so the new one is always the next index
        conn = Connection(conv=a.conv, first_frame=seg.frame, first_ts=seg.ts_ns,
                          last_frame=seg.frame, last_ts=seg.ts_ns)
        conn.history = ConnHistory(client_inferred=a.conv.client_inferred)
        self.connections.append(conn)
        return conn

    def _control(self, conn: Connection, seg: TcpSegment, a: SegmentAnalysis, d: int) -> None:
        flags = seg.flags
        if flags & SYN:
            hs = conn.handshake
            if hs is None:
                hs = conn.handshake = Handshake()
            opts = parse_options(seg.options)
            if not flags & ACK:
                hs.syn_count += 1
                if hs.syn_frame is None:
                    hs.syn_frame, hs.syn_ts = seg.frame, seg.ts_ns
                    hs.client_mss = opts.mss
                    hs.client_wscale = opts.wscale
                    hs.client_sack_perm = opts.sack_perm
                    hs.client_timestamps = opts.timestamps is not None
                    hs.tfo_cookie_request = opts.tfo == b""
                    if opts.tfo:
                        hs.tfo_cookie_len = len(opts.tfo)
                    hs.syn_data_bytes = seg.seg_len
            else:
                hs.synack_count += 1
                if hs.synack_frame is None:
                    hs.synack_frame, hs.synack_ts = seg.frame, seg.ts_ns
                    hs.synack_seq_raw = seg.seq
                    hs.server_mss = opts.mss
                    hs.server_wscale = opts.wscale
                    hs.server_sack_perm = opts.sack_perm
                    hs.server_timestamps = opts.timestamps is not None
                    if opts.tfo and hs.tfo_cookie_len is None:
                        hs.tfo_cookie_len = len(opts.tfo)
        if flags & FIN and conn.fin_frame[d] is None:
            conn.fin_frame[d] = seg.frame
            conn.fin_ts[d] = seg.ts_ns
        if flags & RST and conn.rst_frame is None:
            conn.rst_frame, conn.rst_ts, conn.rst_by_client = seg.frame, seg.ts_ns, d == 0
            hs = conn.handshake
            if hs is not None and d == 1 and hs.synack_frame is None and hs.syn_frame is not None:
                hs.refused = True
