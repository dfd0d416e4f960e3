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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._columns import NA, CodeColumn, IntColumn
from .._slots import slots_eq, slots_repr
from ..diagnostics import Diagnostics
from ..net.packet import ACK, FIN, RST, SYN, TcpSegment
from .analysis import RETRANSMISSION_KINDS as RETRANSMISSION_KINDS  # (re-exported: its home)
from .analysis import SegmentAnalysis, TcpAnalyzer, TcpConversation
from .cold import ColdSyns, cold_eligible, pair_hash
from .connstate import ConnHistory
from .frozen import Deadlines, FreezePolicy, FrozenConnections, RecordCodec
from .gaps import Gap, SeqFollower
from .losses import DSACK_WAIT_NS, NOP_NOP_TS, LossDirection, LossRecorder, vantage
from .options import parse_options
from .packing import StreamPacker
from .reassembly import Reassembler, StreamGap
from .stream import Direction, StreamChunk, StreamObserver

_M32 = 0xFFFFFFFF
_GAP_REASONS_IN_HISTORY = frozenset({"acked", "snaplen"})


class _Guarded:
    """The observer boundary: a bug in a protocol observer costs one connection's payload
    parsing (a ``tcp.observer_error`` row), never the whole load(). Once it raised, the
    connection wants no more bytes, so the tracker stops reassembling it."""

    __slots__ = ("_diag", "_obs", "_tcp_stream", "failed")

    def __init__(self, obs: StreamObserver, diag: Diagnostics, tcp_stream: int) -> None:
        self._obs, self._diag, self._tcp_stream = obs, diag, tcp_stream
        self.failed = False

    def _fail(self, exc: Exception, where: str, ts_ns: int, frame: int) -> list[object]:
        self.failed = True
        self._diag.add(
            "tcp.observer_error",
            f"{type(exc).__name__} in {type(self._obs).__name__}.{where}: {str(exc)[:200]}",
            ts_ns=ts_ns, frame=frame, tcp_stream=self._tcp_stream,
        )
        return []

    @property
    def wants_bytes(self) -> bool:
        return not self.failed and self._obs.wants_bytes

    @property
    def done(self) -> bool:
        """the observer has said all it will (:class:`~.stream.StreamObserver`'s optional
        ``done``), or it raised: nothing it would be given could add a row"""
        return self.failed or bool(getattr(self._obs, "done", False))

    def feed(self, chunk: StreamChunk) -> list[object]:
        if self.failed:
            return []
        try:
            return self._obs.feed(chunk)
        except Exception as exc:  # the boundary: any bug becomes a row
            return self._fail(exc, "feed", chunk.ts_ns, chunk.frame)

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        if self.failed:
            return []
        try:
            return self._obs.gap(direction, offset, nbytes, ts_ns, frame)
        except Exception as exc:
            return self._fail(exc, "gap", ts_ns, frame)

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        if self.failed:
            return []
        try:
            return self._obs.close(direction, ts_ns, frame, at_eof=at_eof)
        except Exception as exc:
            return self._fail(exc, "close", ts_ns, frame)

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        if self.failed:
            return []
        try:
            return self._obs.finish(ts_ns, frame)
        except Exception as exc:
            return self._fail(exc, "finish", ts_ns, frame)


ObserverFactory = Callable[[int, bool], "StreamObserver | None"]
"""(tcp_stream, started mid-connection) -> the observer of that connection's bytes
(None: no payload work for it)"""
EventSink = Callable[[list[Any]], None]


class _Streams:
    """Per-connection byte-stream state, only for connections an observer wants.

    (A class with ``__slots__``, not a dataclass: the compiled build makes it an extension type,
    tracker.pxd, so that ``_bytes`` reads its fields and calls its observer as C.)"""

    __slots__ = ("closed", "observer", "reasm", "seq_hi")

    def __init__(self, observer: _Guarded, reasm: tuple[Reassembler, Reassembler],
                 seq_hi: list[int] | None = None, closed: list[bool] | None = None) -> None:
        self.observer = observer
        self.reasm = reasm
        self.seq_hi: list[int] = [-1, -1] if seq_hi is None else seq_hi
        """last unwrapped relative sequence number per direction (-1: none yet)"""
        self.closed: list[bool] = [False, False] if closed is None else closed

    def __repr__(self) -> str:
        return slots_repr(self)

    def __eq__(self, other: Any) -> Any:
        return slots_eq(self, other)

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as the dataclass)


MAX_BUFFER_BYTES = 4 << 20
"""out-of-order bytes a connection's reassembler holds per direction by default
(``TcpTracker(max_buffer_bytes=...)``; a module constant, which :mod:`pcaptools.limits` reads:
the compiled TcpTracker has no inspectable ``__init__`` signature)"""

_SFR = SYN | FIN | RST
_SFRA = SYN | FIN | RST | ACK
_WRAP = 1 << 32
_HALF_WRAP = 1 << 31


def _unwrap(hi: int, rel: int) -> int:
    """The integer congruent to ``rel`` mod 2**32 nearest to ``hi`` (streams longer than 4 GiB)."""
    if hi < 0:
        return rel
    base = hi - (hi & _M32)
    v = base + rel
    if v - hi > 1 << 31:
        v -= 1 << 32
    elif hi - v > 1 << 31:
        v += 1 << 32
    return v if v >= 0 else rel

_MAX_BIG = 16
"""DirStats.big: unacknowledged large segments followed per direction (path-MTU bookkeeping)"""

IDLE_FLOOR_NS = 1_000_000_000
"""silences shorter than this are not recorded as Connection.idle_last_* (the longest one is)"""


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


class DirStats:
    """Timeline and overhead counters of one direction of a connection (the CONNECTIONS
    columns after end_ts; analyses.disconnects and analyses.overhead read them).

    Written with ``__slots__`` rather than as a dataclass (as :class:`Connection`): the
    compiled build makes it an extension type (``tracker.pxd``). Its fields in ``__slots__``
    order are ``__init__``'s parameters (:class:`~.frozen.RecordCodec` makes one from them)."""

    __slots__ = (
        "last_frame",
        "last_ts",
        "ttl",
        "ttl_min",
        "ttl_max",
        "ip_id",
        "ip_id_first",
        "handshake_bytes",
        "teardown_bytes",
        "pure_ack_packets",
        "pure_ack_bytes",
        "max_seg",
        "max_acked",
        "no_df_packets",
        "big",
        "shrink",
        "packets",
        "payload_bytes",
        "wire_bytes",
        "resent_bytes",
    )

    def __init__(self, last_frame: int = 0, last_ts: int = 0, ttl: int = -1, ttl_min: int = -1,
                 ttl_max: int = -1, ip_id: int = -1, ip_id_first: int = -1,
                 handshake_bytes: int = 0, teardown_bytes: int = 0, pure_ack_packets: int = 0,
                 pure_ack_bytes: int = 0, max_seg: int = 0, max_acked: int = 0,
                 no_df_packets: int = 0, big: list[list[int]] | None = None,
                 shrink: list[int] | None = None, packets: int = 0, payload_bytes: int = 0,
                 wire_bytes: int = 0, resent_bytes: int = 0) -> None:
        self.last_frame = last_frame
        """last packet, RSTs excluded (0: none)"""
        self.last_ts = last_ts
        self.ttl = ttl
        """TTL / hop limit of the last non-RST packet (-1: none)"""
        self.ttl_min = ttl_min
        self.ttl_max = ttl_max
        self.ip_id = ip_id
        """IPv4 identification of the last non-RST packet (-1: none or IPv6)"""
        self.ip_id_first = ip_id_first
        """first non-zero IPv4 identification of non-RST packets (< 1: none yet)"""
        self.handshake_bytes = handshake_bytes
        """frame bytes minus payload of SYN / SYN-ACK packets and of the handshake-completing
        ACK"""
        self.teardown_bytes = teardown_bytes
        """frame bytes minus payload of FIN / RST packets, plus payload-less ACKs after the
        peer's FIN"""
        self.pure_ack_packets = pure_ack_packets
        """packets without payload and without SYN/FIN/RST (teardown ACKs excluded)"""
        self.pure_ack_bytes = pure_ack_bytes
        self.max_seg = max_seg
        """largest payload (tcp.len) of a segment sent"""
        self.max_acked = max_acked
        """largest payload of a segment the peer acknowledged (its last byte covered by an ACK,
        and not re-sent in smaller pieces before that)"""
        self.no_df_packets = no_df_packets
        """packets with payload sent without the IPv4 DF bit"""
        self.big = big
        """segments larger than max_acked not yet acknowledged, at most _MAX_BIG:
        [rel_seq, rel_end, len, frame, ts]"""
        self.shrink = shrink
        """the first time the sender re-sent a segment in smaller pieces: [big frame, big ts,
        big len, resend frame, resend ts, resend len, resend IP packet size, big rel_end,
        delivered frame (0: not yet), delivered ts]"""
        self.packets = packets
        """packets sent (the connections table's client_packets / server_packets)"""
        self.payload_bytes = payload_bytes
        """TCP payload bytes sent (retransmitted ones included)"""
        self.wire_bytes = wire_bytes
        """frame bytes sent (frame.len)"""
        self.resent_bytes = resent_bytes
        """payload bytes sent again (SegmentAnalysis.resent_bytes)"""

    def __repr__(self) -> str:
        return slots_repr(self)

    def __eq__(self, other: object) -> bool:
        return slots_eq(self, other)  # type: ignore[no-any-return]

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as a dataclass)


class Connection:
    """Per-connection summary kept by the tracker (one per tcp_stream).

    Written with ``__slots__`` rather than as a dataclass: the compiled build makes it an
    extension type (``tracker.pxd``), whose fields :meth:`TcpTracker.segment` reads as C struct
    fields. Its fields in ``__slots__`` order are ``__init__``'s parameters
    (:class:`~.frozen.RecordCodec` makes one from them)."""

    __slots__ = (
        "conv",
        "first_frame",
        "first_ts",
        "history",
        "side",
        "last_frame",
        "last_ts",
        "retransmissions",
        "fin",
        "rst_frame",
        "rst_ts",
        "rst_by_client",
        "handshake",
        "streams",
        "packed",
        "follow",
        "syn_pending",
        "syn_pending_peer",
        "rst_ttl",
        "rst_ip_id",
        "idle_max_ns",
        "idle_max_start_frame",
        "idle_max_end_frame",
        "idle_max_end_ts",
        "idle_last_ns",
        "idle_last_start_frame",
        "idle_last_end_frame",
        "idle_last_end_ts",
        "loss",
    )

    def __init__(self, conv: TcpConversation, first_frame: int, first_ts: int,
                 history: ConnHistory, side: tuple[DirStats, DirStats], last_frame: int = 0,
                 last_ts: int = 0, retransmissions: int = 0,
                 fin: list[int | None] | None = None, rst_frame: int | None = None,
                 rst_ts: int | None = None, rst_by_client: bool | None = None,
                 handshake: Handshake | None = None, streams: _Streams | None = None,
                 packed: bytes | bool | None = None, follow: SeqFollower | None = None,
                 syn_pending: int = -1, syn_pending_peer: int = -1, rst_ttl: int = -1,
                 rst_ip_id: int = -1, idle_max_ns: int = 0, idle_max_start_frame: int = 0,
                 idle_max_end_frame: int = 0, idle_max_end_ts: int = 0, idle_last_ns: int = 0,
                 idle_last_start_frame: int = 0, idle_last_end_frame: int = 0,
                 idle_last_end_ts: int = 0,
                 loss: tuple[LossDirection, LossDirection] | None = None) -> None:
        self.conv = conv
        self.first_frame = first_frame
        self.first_ts = first_ts
        self.history = history
        self.side = side
        """(client, server): per-direction timeline and overhead counters"""
        self.last_frame = last_frame
        self.last_ts = last_ts
        self.retransmissions = retransmissions
        self.fin = fin
        """[client FIN frame, server FIN frame, client FIN ts, server FIN ts] of the first FIN
        each way, made at the first FIN (None: no FIN yet)"""
        self.rst_frame = rst_frame
        self.rst_ts = rst_ts
        self.rst_by_client = rst_by_client
        self.handshake = handshake
        self.streams = streams
        """reassembly and the observer, for a connection an observer parses (see ``follow``)"""
        self.packed = packed
        """while frozen idle: ``streams`` packed (:mod:`.packing`), or True when that is kept by
        the tracker (it holds TLS state, never written to disk); None: nothing packed"""
        self.follow = follow
        """sequence-space follower of a connection no observer parses (content gaps, no
        payload). Neither ``streams`` nor ``follow`` exists while the connection has sent
        nothing they would act on: payload-less SYNs, and payload-less ACKs and RSTs at the
        start of the sequence spaces (a port scan, a SYN flood, a refused or reset handshake:
        most such connections never get further); they are made at its first other segment
        (:meth:`TcpTracker._attach`), which replays the SYNs (:meth:`TcpTracker._defer`)"""
        self.syn_pending = syn_pending
        """while neither ``streams`` nor ``follow`` exists: the payload-less SYN seen first, as
        ``rel_seq * 2 + direction`` (-1: none), replayed into them when they are made"""
        self.syn_pending_peer = syn_pending_peer
        """likewise, the other direction's (a SYN-ACK)"""
        self.rst_ttl = rst_ttl
        self.rst_ip_id = rst_ip_id
        self.idle_max_ns = idle_max_ns
        """longest silence (no packet either way) before the first RST, and the packets around
        it"""
        self.idle_max_start_frame = idle_max_start_frame
        self.idle_max_end_frame = idle_max_end_frame
        self.idle_max_end_ts = idle_max_end_ts
        self.idle_last_ns = idle_last_ns
        """most recent silence of at least IDLE_FLOOR_NS before the first RST (0: none)"""
        self.idle_last_start_frame = idle_last_start_frame
        self.idle_last_end_frame = idle_last_end_frame
        self.idle_last_end_ts = idle_last_end_ts
        self.loss = loss
        """(client, server): sequence-space state of the tcp_losses table, made at the first
        payload or ACK (None before: :data:`NO_LOSS` holds its values)"""

    @property
    def counts(self) -> list[int]:
        """[client, server] packets, then payload bytes, frame bytes and resent payload bytes:
        the connections table's columns in this order. (Counted in the two :class:`DirStats`,
        C integers in the compiled build, not in a list of Python ints, one new int object
        per addition.)"""
        c, s = self.side
        return [c.packets, s.packets, c.payload_bytes, s.payload_bytes, c.wire_bytes,
                s.wire_bytes, c.resent_bytes, s.resent_bytes]

    def vantage(self) -> str:
        """Where the capture was taken for this connection (see :func:`.losses.vantage`)."""
        hs = self.handshake
        if hs is None:
            return "unknown"
        return vantage(hs.syn_ts, hs.synack_ts, hs.ack_ts)

    def __repr__(self) -> str:
        return slots_repr(self)

    def __eq__(self, other: object) -> bool:
        return slots_eq(self, other)  # type: ignore[no-any-return]

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as a dataclass)


RECORDS = RecordCodec(Connection, DirStats, Handshake)
"""packs a record for :mod:`.frozen`"""

NO_LOSS = (LossDirection(), LossDirection())
"""the tcp_losses state of a connection that sent no payload and no ACK (Connection.loss
None): read only"""


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
    """Feeds segments to the analysis and keeps per-connection records and tcp_events rows.

    A connection that has sent one payload-less SYN and nothing else is kept cold
    (:mod:`.cold`): a packed row in :attr:`cold`, None in :attr:`connections`,
    no conversation in the analyzer, until a second segment of its address pair makes it
    (:meth:`_warm`). ``spill_cold``: the oldest cold rows go to a temporary database on disk
    (:class:`~.cold.ColdSyns` ``spill``; the streaming export's choice, so that its memory
    stays flat however many connections stay cold)."""

    cold_syns = True
    """keep one-SYN connections cold (False: every connection gets its record at its first
    segment, the reference the cold rows are tested against)"""

    def __init__(
        self,
        diag: Diagnostics,
        *,
        observer_factory: ObserverFactory | None = None,
        emit: EventSink | None = None,
        max_buffer_bytes: int = MAX_BUFFER_BYTES,
        spill_cold: bool = False,
        freeze_policy: FreezePolicy | None = None,
    ) -> None:
        self.diag = diag
        self.observer_factory = observer_factory
        self.emit: EventSink = emit if emit is not None else (lambda events: None)
        self.max_buffer_bytes = max_buffer_bytes
        self.analyzer = TcpAnalyzer(diag)
        self.connections: list[Connection | None] = []
        """the record of every tcp_stream (None: the connection is cold, or its record was
        dropped once its table rows were made)"""
        self.cold: ColdSyns | None = ColdSyns(spill_cold) if self.cold_syns else None
        """the connections that sent one payload-less SYN and nothing else (None: not kept
        cold, or let go: :meth:`drop_cold`)"""
        self._warming = False
        self.events = EventColumns()
        """rows of tcp_events, in typed column arrays (~60 bytes a row)"""
        self.losses = LossRecorder(diag)
        """rows of tcp_losses (segments resent, capture drops)"""
        self.quoted_streams: set[int] = set()
        """tcp_streams of the TCP headers :meth:`unanalysed` saw (quoted in ICMP errors)"""
        self.freeze_policy = freeze_policy
        self.frozen: FrozenConnections | None = \
            FrozenConnections(RECORDS, spill_cold) if freeze_policy is not None else None
        """the connections frozen (:mod:`.frozen`; None: none is, ``freeze_policy`` None)"""
        self.packer: StreamPacker | None = StreamPacker() if freeze_policy is not None else None
        """packs the parsers of idle connections (:mod:`.packing`)"""
        self._packed: dict[int, bytes] = {}
        """tcp_stream -> the packed byte-stream state of a connection frozen while idle that
        holds TLS state (keys): kept here, in memory, not in its record (which may be moved
        to disk); the others' is in their record (``Connection.packed``)"""
        self.packs = 0
        """connections whose parsers were packed (a connection packed, unpacked and packed
        again counts twice)"""
        self._ended_q = Deadlines()
        """connections that ended (RST, FIN both ways), to freeze once quiet"""
        self._idle_q = Deadlines()
        """every connection, to freeze once idle"""
        self._countdown = freeze_policy.every if freeze_policy is not None else 0
        """segments until the next look for connections to freeze"""
        self._records = 0
        """records in :attr:`connections` (with ``freeze_policy``: made and thawed, less
        those frozen)"""
        self.row_maker: Callable[[Connection], bytes | None] | None = None
        """a record's table rows, packed, made when it is frozen (the tables layer sets it;
        None: made at the end from the thawed record, as are those it returns None for)"""

    def segment(self, seg: TcpSegment) -> SegmentAnalysis:
        if self.frozen is not None and not self._warming:
            self._countdown -= 1
            if self._countdown <= 0:
                self._sweep(seg.ts_ns)
        a = self.analyzer.feed_known(seg)
        if a is None:  # (the first segment of its address pair, or of a cold connection)
            a = self._first(seg)
            if a.conv is None:  # (kept cold)
                return a
        stream = a.tcp_stream
        conns = self.connections
        conn = conns[stream] if stream < len(conns) else None
        if conn is None:
            conn = self._new_connection(a, seg)
        from_client = a.from_client
        side = conn.side
        sd = side[0]
        peer = side[1]
        if sd.packets + peer.packets == 0 and a.conv is not None and a.conv.client_inferred:
            self.diag.add(
                "tcp.capture_started_mid_stream",
                "first packet of the connection is not a SYN; client/server roles inferred",
                ts_ns=seg.ts_ns, frame=seg.frame, tcp_stream=stream,
            )
        d = 0 if from_client else 1
        flags = seg.flags
        ts = seg.ts_ns
        frame = seg.frame
        seg_len = seg.seg_len
        frame_len = seg.frame_len
        gap = ts - conn.last_ts
        if (gap > conn.idle_max_ns or gap >= IDLE_FLOOR_NS) and conn.rst_frame is None:
            self._idle(conn, gap, seg)
        conn.last_frame = frame
        conn.last_ts = ts
        if d:
            sd, peer = peer, sd
        sd.packets += 1
        sd.payload_bytes += seg_len
        sd.wire_bytes += frame_len
        if not flags & RST:
            sd.last_frame = frame
            sd.last_ts = ts
            sd.ip_id = ip_id = seg.ip_id
            if sd.ip_id_first < 1:
                sd.ip_id_first = ip_id
            if seg.ttl != sd.ttl:
                self._ttl(sd, seg.ttl)
        if seg_len:
            if not seg.df:
                sd.no_df_packets += 1
            if seg_len > sd.max_acked or (sd.big and a.resent_bytes):
                self._big(sd, seg, a)
        if peer.big is not None and flags & ACK and a.rel_ack is not None:
            self._acked(peer, a.rel_ack, seg)
        kinds = a.kinds
        resent = a.resent_bytes
        if resent:
            sd.resent_bytes += resent
        if flags & _SFR:
            self._control(conn, seg, a, d)
        else:
            hs = conn.handshake
            # (the cheap tests first: the handshake record's fields are looked up by name)
            if d == 0 and flags & ACK and a.rel_ack == 1 and hs is not None \
                    and hs.ack_frame is None and hs.synack_frame is not None:
                hs.ack_frame = frame
                hs.ack_ts = ts
                if not seg_len:
                    sd.handshake_bytes += frame_len
            elif seg_len:
                pass
            elif conn.fin is not None and conn.fin[1 - d] is not None:
                sd.teardown_bytes += frame_len
            else:
                sd.pure_ack_packets += 1
                sd.pure_ack_bytes += frame_len
        retrans = False
        if kinds or resent:
            add = self.events.add
            rel_ack = NA if a.rel_ack is None else a.rel_ack
            for kind in kinds:
                if kind in RETRANSMISSION_KINDS:
                    retrans = True
                if kind == "duplicate_ack":
                    add(seg, stream, d, kind, a.rel_seq, rel_ack, a.dup_ack_num, a.dup_ack_frame)
                else:
                    add(seg, stream, d, kind, a.rel_seq, rel_ack, NA, NA)
            if resent and resent == seg_len:
                add(seg, stream, d, "resent", a.rel_seq, rel_ack, NA, NA)
            if retrans:
                conn.retransmissions += 1
        hist = conn.history
        if flags & _SFR or retrans or not seg.window:
            hist.packet(from_client, flags, seg_len, retransmission=retrans,
                        zero_window=seg.window == 0, seq=seg.seq)
        else:
            hist.plain(from_client, flags, seg_len)
        loss = conn.loss
        if loss is None and (seg_len or a.rel_ack is not None):
            loss = conn.loss = (LossDirection(), LossDirection())
        if seg_len and not flags & RST:  # tcp_losses: in-order data only moves the highest byte seen
            assert loss is not None
            ld = loss[d]
            h = ld.hi
            if h >= 0 and not (a.rel_seq - h) & _M32 and not flags & SYN:
                ld.hi = h + seg_len
            else:
                self._loss_data(conn, ld, seg, a, d)
        ra = a.rel_ack
        if ra is not None:  # the ACK of the other direction's data (tcp_losses)
            assert loss is not None
            lp = loss[1 - d]
            if ra != lp.ack_last:
                lp.ack_last = ra
                lp.same_acks = 0
            elif not seg_len:
                lp.same_acks += 1
            lp.ack_opts = seg.options
            if lp.holes:
                self.losses.acked(lp, ra, stream, 1 - d, seg)
            pend = lp.pending
            if pend:
                # (LossRecorder.dsack acts on an ACK that may carry a SACK block, or once the
                # oldest resend waited at least the shortest wait; the others skip the call)
                hl = seg.header_len
                if (hl > 20 and not (hl == 32 and seg.options[:4] == NOP_NOP_TS)) \
                        or seg.ts_ns - pend[0][3] > DSACK_WAIT_NS:
                    self.losses.dsack(lp, seg, conn.conv.irtt_ns)
        st = conn.streams
        if st is not None:
            self._bytes(conn, st, seg, a, d)
        elif conn.follow is not None:
            self._follow(conn, conn.follow, seg, a, d)
        elif not seg_len and not flags & FIN and self._defer(conn, flags, a, d):
            pass  # (nothing to reassemble yet)
        else:
            self._attach(conn)
            st = conn.streams
            if st is not None:
                self._bytes(conn, st, seg, a, d)
            elif conn.follow is not None:
                self._follow(conn, conn.follow, seg, a, d)
        return a

    def _first(self, seg: TcpSegment) -> SegmentAnalysis:
        """:meth:`segment`'s analysis of a segment of an address pair the analyzer does not
        know: a cold connection's second segment makes it (its SYN replayed first); a
        :func:`~.cold.cold_eligible` SYN is kept cold (the result has no ``conv``)."""
        cold = self.cold
        if cold is not None and not self._warming:
            row = cold.find(seg)
            if row != -1:  # (a handle: a row in memory, or spilled)
                self._warm(row)
            elif self._thaw(seg):
                pass
            elif cold_eligible(seg):
                a = cold.add(seg, len(self.connections))
                if a is not None:
                    self.connections.append(None)
                    self.analyzer.reserve()  # (the same number: one conversation a record)
                    return a
        elif cold is None:
            self._thaw(seg)
        return self.analyzer.feed(seg)

    # ------------------------------------------------------------ frozen connections

    def _sweep(self, now: int) -> None:
        """Freeze the connections whose time came (:class:`~.frozen.FreezePolicy`)."""
        pol = self.freeze_policy
        assert pol is not None
        self._countdown = pol.every
        if self._records <= pol.min_records:
            return
        conns = self.connections
        for q, wait in ((self._ended_q, pol.ended_ns), (self._idle_q, pol.idle_ns)):
            for stream in q.due(now):
                conn = conns[stream]
                if conn is None:  # (cold, frozen already, or dropped)
                    continue
                at = conn.last_ts + wait
                if at > now:  # (it sent something since: look again then)
                    q.add(stream, at)
                elif conn.streams is None or self._release(conn, conn.streams):
                    self._freeze(conn)
                elif q is self._idle_q:
                    if self._pack(conn, conn.streams):
                        self._freeze(conn)
                    else:  # (its parsers may let it go, or be packed, later)
                        q.add(stream, now + wait)

    def _pack(self, conn: Connection, st: _Streams) -> bool:
        """Pack the byte-stream state of an idle connection (:mod:`.packing`), to freeze it:
        made again (:meth:`_unpack`) when a segment of it comes, or at the end. False: it
        holds something that is not packed, and stays as it is."""
        packer = self.packer
        assert packer is not None
        blob = packer.pack(st)
        if blob is None:
            return False
        if packer.secret:
            self._packed[conn.conv.tcp_stream] = blob
            conn.packed = True
        else:
            conn.packed = blob
        self.packs += 1
        conn.streams = None
        return True

    def _unpack(self, conn: Connection) -> None:
        """A thawed record gets its packed byte-stream state back. (Should that fail, a bug, it
        is reported as an observer's bug is, and the connection is followed unparsed.)"""
        p = conn.packed
        assert self.packer is not None and p is not None
        conn.packed = None
        try:
            conn.streams = self.packer.unpack(
                p if isinstance(p, bytes) else self._packed.pop(conn.conv.tcp_stream))
        except Exception as exc:  # (the observer boundary, as _Guarded's)
            self.diag.add(
                "tcp.observer_error",
                f"unpacking the parsers of an idle connection failed ({type(exc).__name__}: "
                f"{str(exc)[:200]}): its later payload is not parsed",
                ts_ns=conn.last_ts, frame=conn.last_frame, tcp_stream=conn.conv.tcp_stream)
            conn.follow = SeqFollower()

    def _release(self, conn: Connection, st: _Streams) -> bool:
        """Let the byte-stream state of a connection go, to freeze it, when nothing it could
        still be given would add a row: both directions ended (a FIN reached with every byte
        before it delivered, or an RST), neither reassembler holds anything
        (:attr:`~.reassembly.Reassembler.empty`: only bytes never captured so far could still
        reach the observer) and the observer is done (the stream contract's ``done``: its
        ``finish``, ``gap`` and ``close`` would add nothing). The connection is followed from
        then on, as one whose observer stopped wanting bytes (the same gaps, reported the same
        way); new bytes, which the observer would have been given, are reported
        (:meth:`_follow`)."""
        r0, r1 = st.reasm
        if not (st.closed[0] and st.closed[1] and r0.empty and r1.empty
                and st.observer.done):
            return False
        conn.streams = None
        self._start_following(conn, st)
        assert conn.follow is not None
        conn.follow.released = True
        return True

    def _freeze(self, conn: Connection, at_end: bool = False) -> None:
        """Freeze ``conn`` (``at_end``: finished at the end of the capture, when no segment
        can thaw it and the analyzer no longer has its address pair)."""
        fz = self.frozen
        assert fz is not None and conn.streams is None
        blob = RECORDS.freeze(conn)
        c = conn.conv
        at_finish = conn.packed is not None or (
            conn.loss is not None and bool(conn.loss[0].holes or conn.loss[1].holes))
        if not at_finish and conn.follow is not None:
            out: list[Gap] = []
            conn.follow.finish(out)  # (this follower is let go: the blob has its state)
            at_finish = bool(out)
        key = pair_hash(c.client_addr, c.client_port, c.server_addr, c.server_port) \
            if not at_end and self.analyzer.forget(c) else None
        self.connections[c.tcp_stream] = None
        self._records -= 1
        rows = self.row_maker(conn) if self.row_maker is not None and not at_finish else None
        fz.put(c.tcp_stream, blob, key, at_finish, rows)

    def _thaw(self, seg: TcpSegment) -> bool:
        """Thaw the frozen connection of ``seg``'s address pair, if there is one."""
        fz = self.frozen
        if fz is None or not fz.n:
            return False
        src, sport, dst, dport = seg.src, seg.sport, seg.dst, seg.dport

        def same(conn: Connection) -> bool:
            c = conn.conv
            return (c.client_port == sport and c.server_port == dport and c.client_addr == src
                    and c.server_addr == dst) or (c.client_port == dport and c.server_port == sport
                                                  and c.client_addr == dst and c.server_addr == src)

        conn = fz.take(src, sport, dst, dport, same)
        if conn is None:
            return False
        if conn.packed is not None:
            self._unpack(conn)
        c = conn.conv
        self.connections[c.tcp_stream] = conn
        self._records += 1
        self.analyzer.restore(c)
        pol = self.freeze_policy
        assert pol is not None
        now = seg.ts_ns
        self._idle_q.add(c.tcp_stream, now + pol.idle_ns)
        if conn.rst_frame is not None or (conn.fin is not None and conn.fin[0] is not None
                                          and conn.fin[1] is not None):
            self._ended_q.add(c.tcp_stream, now + pol.ended_ns)
        return True

    def records(self, start: int, end: int) -> list[Connection]:
        """The records of tcp_streams [start, end) in order, frozen ones thawed (and no longer
        frozen: the caller puts back those it keeps) but for those frozen with their table
        rows (:attr:`row_maker`; :meth:`~.frozen.FrozenConnections.take_rows`); cold
        connections have none."""
        conns = self.connections
        fz = self.frozen
        if fz is None or not fz.n:
            return [c for c in conns[start:end] if c is not None]
        out = []
        for i in range(start, min(end, len(conns))):
            c = conns[i]
            if c is None:
                c = fz.pop(i, with_rows=False)
            if c is not None:
                out.append(c)
        return out

    def conversation(self, stream: int) -> TcpConversation | None:
        """The conversation of ``stream`` (None: the connection is cold or its record was
        dropped), a frozen one's as a thawed copy (it stays frozen)."""
        conns = self.connections
        conn = conns[stream] if stream < len(conns) else None
        if conn is None and self.frozen is not None:
            conn = self.frozen.peek(stream)
        return conn.conv if conn is not None else None

    def _warm(self, row: int) -> None:
        """Make the cold connection of ``row`` (a :meth:`~.cold.ColdSyns.find` handle): its
        SYN goes through :meth:`segment` again, as when it came, under the ``tcp_stream`` it
        was given then (the packets table already has that frame's row; the SYN makes no
        warning, event or observer call)."""
        assert self.cold is not None
        syn, stream = self.cold.pop(row)
        self.analyzer.reserved = stream
        self._warming = True
        try:
            self.segment(syn)
        finally:
            self._warming = False
            self.analyzer.reserved = -1

    @staticmethod
    def _defer(conn: Connection, flags: int, a: SegmentAnalysis, d: int) -> bool:
        """Whether a payload-less segment (no FIN) of a connection with no byte-stream state
        yet may leave it without: a SYN or SYN-ACK, the first of its direction (kept in
        ``syn_pending``/``syn_pending_peer`` to be replayed by :meth:`_attach`: it only sets
        where the direction's stream starts); an ACK or RST at the start of its sequence
        space (relative sequence 0 or 1) acknowledging at most the other direction's SYN,
        which is pending (its reassembler's start then comes from that SYN, as it would
        have). Made earlier, the state would have seen nothing of these but the SYNs: no
        byte, no gap, and an observer fed nothing reports nothing on ``close``/``finish``
        (``tests/tcp/test_lazy_state.py``)."""
        p, q = conn.syn_pending, conn.syn_pending_peer
        if flags & SYN:
            if flags & RST or a.rel_seq < 0 or q >= 0 or (p >= 0 and p & 1 == d):
                return False
            if a.rel_ack is not None and (a.rel_ack > 1 or p < 0):
                return False
            if p < 0:
                conn.syn_pending = a.rel_seq * 2 + d
            else:
                conn.syn_pending_peer = a.rel_seq * 2 + d
            return True
        if a.rel_seq not in (0, 1):
            return False
        if a.rel_ack is None:
            return not flags & ACK
        return a.rel_ack <= 1 and ((p >= 0 and p & 1 != d) or (q >= 0 and q & 1 != d))

    def _attach(self, conn: Connection) -> None:
        """Make the byte-stream state of a connection at its first segment that is not a
        payload-less SYN: the observer and reassemblers, or the follower (as
        :meth:`_new_connection` would have made them), then replay the SYN seen before (a
        payload-less SYN only sets where the direction's stream starts; its ``ts`` and
        ``frame`` are not used). A connection that never gets here is skipped at
        :meth:`finish`: a reassembler of nothing but SYNs has nothing to flush, and an
        observer fed no chunk and no gap reports nothing on ``close``/``finish``."""
        c = conn.conv
        tcp_stream = c.tcp_stream
        if self.observer_factory is not None:
            obs = self.observer_factory(tcp_stream, c.client_inferred)
            if obs is not None:
                obs = _Guarded(obs, self.diag, tcp_stream)
                mb = self.max_buffer_bytes
                conn.streams = _Streams(obs, (Reassembler(Direction.CLIENT_TO_SERVER, max_buffer_bytes=mb),
                                              Reassembler(Direction.SERVER_TO_CLIENT, max_buffer_bytes=mb)))
        if conn.streams is None:
            self._start_following(conn, None)
        pending = (conn.syn_pending, conn.syn_pending_peer)
        conn.syn_pending = conn.syn_pending_peer = -1
        for p in pending:
            if p < 0:
                continue
            d, rel_seq = p & 1, p >> 1
            st = conn.streams
            if st is not None:  # _bytes() of the SYN
                seq = st.seq_hi[d] = _unwrap(st.seq_hi[d], rel_seq)
                st.reasm[d].segment(seq, b"", 0, 0, syn=True, fin=False, seg_len=0)
                if not st.observer.wants_bytes:
                    conn.streams = None
                    self._start_following(conn, st)
            else:  # _follow() of the SYN
                f = conn.follow
                assert f is not None
                hi = f.hi
                seq = hi[d] = _unwrap(hi[d], rel_seq)
                out: list[Gap] = []
                f.segment(d, seq, 0, 0, True, False, out)
                assert not out  # (a payload-less SYN finds no gap)

    def _follow(self, conn: Connection, f: SeqFollower, seg: TcpSegment, a: SegmentAnalysis,
                d: int) -> None:
        """A connection nobody parses: follow its sequence space for content gaps."""
        flags = seg.flags
        if flags & RST:
            return
        hi = f.hi
        out: list[Gap] = []
        if seg.seg_len or flags & (SYN | FIN):
            seq = hi[d] = _unwrap(hi[d], a.rel_seq)
            if f.released and seg.seg_len and seq + seg.seg_len > f.dirs[d].nxt:
                late = seq + seg.seg_len - max(seq, f.dirs[d].nxt)
                self.diag.add(
                    "tcp.payload_after_release",
                    f"{late} bytes of payload after the end (FIN or RST) of a connection whose "
                    "parser had finished (let go once the connection ended, to keep memory to "
                    "live connections): not parsed",
                    ts_ns=seg.ts_ns, frame=seg.frame, tcp_stream=conn.conv.tcp_stream,
                    direction=Direction(d).label, nbytes=late,
                )
            f.segment(d, seq, seg.seg_len, len(seg.payload), flags & SYN != 0,
                      flags & FIN != 0, out)
        rel_ack = a.rel_ack
        if flags & ACK and rel_ack is not None:
            f.acked(1 - d, _unwrap(hi[1 - d], rel_ack), out)
        if out:
            self._gaps(conn, out, seg.ts_ns, seg.frame)

    def _gaps(self, conn: Connection, gaps: list[Gap], ts_ns: int, frame: int) -> None:
        """Report a followed connection's gaps as the reassembler's are reported."""
        for x, off, n, reason in gaps:
            direction = Direction(x)
            self.diag.add(
                "tcp.reassembly_gap",
                f"{n} bytes at stream offset {off} never captured ({reason})",
                ts_ns=ts_ns, frame=frame, tcp_stream=conn.conv.tcp_stream,
                direction=direction.label,
            )
            if reason in _GAP_REASONS_IN_HISTORY:
                conn.history.content_gap(x == 0)

    @staticmethod
    def _start_following(conn: Connection, st: _Streams | None) -> None:
        """No observer wants the connection's bytes (any more): follow it without payload."""
        if st is None:
            conn.follow = SeqFollower()
            return
        r = st.reasm
        conn.follow = SeqFollower.from_reassembly(
            (r[0].base, r[1].base), (r[0].next_offset, r[1].next_offset),
            (r[0].buffered_ranges, r[1].buffered_ranges), (r[0].fin_offset, r[1].fin_offset))
        conn.follow.hi = list(st.seq_hi)

    def bad_checksum(self, seg: TcpSegment, a: SegmentAnalysis) -> None:
        """``load(check_checksums=True)`` found the segment's checksum bad: a ``tcp_events`` row
        of kind ``bad_checksum`` and a ``tcp.bad_checksum`` warning (the segment was analysed
        as any other, as tshark does)."""
        d = 0 if a.from_client else 1
        self.events.add(seg, a.tcp_stream, d, "bad_checksum", a.rel_seq,
                        NA if a.rel_ack is None else a.rel_ack, NA, NA)
        self.diag.add(
            "tcp.bad_checksum",
            f"TCP checksum of the segment is wrong ({seg.seg_len} payload bytes): corrupted on "
            "the way to the capture point; tshark analyses it, Zeek drops it",
            ts_ns=seg.ts_ns, frame=seg.frame, tcp_stream=a.tcp_stream,
            direction=("client_to_server", "server_to_client")[d],
        )

    def _loss_data(self, conn: Connection, ld: LossDirection, seg: TcpSegment,
                   a: SegmentAnalysis, d: int) -> None:
        c = conn.conv
        fwd, peer = (c.c2s, c.s2c) if d == 0 else (c.s2c, c.c2s)
        self.losses.data(ld, seg, a, d, fwd, peer, c.irtt_ns)

    def _bytes(self, conn: Connection, st: _Streams, seg: TcpSegment, a: SegmentAnalysis, d: int) -> None:
        """Reassemble this segment's direction and hand the in-order bytes to the observer."""
        flags = seg.flags
        if not flags & _SFR:
            # the common case, as below without the SYN/FIN/RST steps, and one chunk handed
            # over without a list when the payload is next in order
            seq_hi = st.seq_hi
            hi = seq_hi[d]
            rel = a.rel_seq
            if hi <= _M32:  # _unwrap() for streams shorter than 4 GiB
                seq = rel + _WRAP if hi - rel > _HALF_WRAP else rel
            else:
                seq = _unwrap(hi, rel)
            seq_hi[d] = seq
            chunk: StreamChunk | None = None
            out: list[StreamChunk | StreamGap] | None = None
            payload = seg.payload
            if seg.seg_len:
                mine = st.reasm[d]
                if len(payload) == seg.seg_len:
                    chunk = mine.in_order(seq, payload, seg.ts_ns, seg.frame)
                if chunk is None:
                    out = mine.segment(seq, payload, seg.ts_ns, seg.frame, seg_len=seg.seg_len)
            rel_ack = a.rel_ack
            if flags & ACK and rel_ack is not None:
                hi = seq_hi[1 - d]
                if hi <= _M32:
                    ack = rel_ack + _WRAP if hi - rel_ack > _HALF_WRAP else rel_ack
                else:
                    ack = _unwrap(hi, rel_ack)
                other = st.reasm[1 - d]
                more = other.acked(ack, seg.ts_ns, seg.frame)
                if more:
                    if out is None:
                        out = [] if chunk is None else [chunk]
                    out += more
            obs = st.observer
            if out is not None:
                if out:
                    self._deliver(conn, st, out)
            elif chunk is not None:
                self.emit(obs.feed(chunk))
            if obs.failed or not obs._obs.wants_bytes:  # (not obs.wants_bytes, inlined)
                conn.streams = None  # nothing parses this connection: stop reassembling it
                self._start_following(conn, st)
            return
        mine, peer = st.reasm[d], st.reasm[1 - d]
        items: list[StreamChunk | StreamGap] = []
        if not flags & RST:
            seq = st.seq_hi[d] = _unwrap(st.seq_hi[d], a.rel_seq)
            if seg.seg_len or flags & (SYN | FIN):
                items = mine.segment(seq, seg.payload, seg.ts_ns, seg.frame, syn=flags & SYN != 0,
                                     fin=flags & FIN != 0, seg_len=seg.seg_len)
            if flags & ACK and a.rel_ack is not None:
                ack = _unwrap(st.seq_hi[1 - d], a.rel_ack)
                items += peer.acked(ack, seg.ts_ns, seg.frame)
        if items:
            self._deliver(conn, st, items)
        if flags & FIN and not st.closed[d]:
            fin = mine.fin_offset
            if fin is not None and mine.next_offset >= fin:
                st.closed[d] = True
                self.emit(st.observer.close(Direction(d), seg.ts_ns, seg.frame))
        if flags & RST:
            for x in (0, 1):
                if not st.closed[x]:
                    st.closed[x] = True
                    self.emit(st.observer.close(Direction(x), seg.ts_ns, seg.frame))
        if not st.observer.wants_bytes:
            conn.streams = None  # nothing parses this connection: stop reassembling it
            self._start_following(conn, st)

    def _deliver(self, conn: Connection, st: _Streams, items: list[StreamChunk | StreamGap]) -> None:
        obs = st.observer
        emit = self.emit
        for it in items:
            if type(it) is StreamChunk:
                emit(obs.feed(it))
            else:
                assert isinstance(it, StreamGap)
                self.diag.add(
                    "tcp.reassembly_gap",
                    f"{it.nbytes} bytes at stream offset {it.offset} never captured ({it.reason})",
                    ts_ns=it.ts_ns, frame=it.frame, tcp_stream=conn.conv.tcp_stream,
                    direction=it.direction.label,
                )
                if it.reason == "limit":  # say why, with the code documented for this limit
                    self.diag.add(
                        "tcp.reassembly_limit",
                        f"more than {self.max_buffer_bytes} bytes (or 65536 segments) waited "
                        f"behind a hole at stream offset {it.offset}; the hole was given up",
                        ts_ns=it.ts_ns, frame=it.frame, tcp_stream=conn.conv.tcp_stream,
                        direction=it.direction.label,
                    )
                if it.reason in _GAP_REASONS_IN_HISTORY:
                    conn.history.content_gap(it.direction == Direction.CLIENT_TO_SERVER)
                emit(obs.gap(it.direction, it.offset, it.nbytes, it.ts_ns, it.frame))

    def finish(self, ts_ns: int, frame: int) -> None:
        """End of capture: flush every byte stream and let the observers report what is open.
        The analyzer's address-pair index goes (no segment comes after the end; each record
        keeps its conversation for the tables)."""
        self.analyzer = TcpAnalyzer(self.diag)
        if self.cold is not None:
            self.cold.forget_pairs()  # (likewise: the cold rows stay for the tables)
            if self.cold.spill_error is not None:
                self.diag.add("tcp.cold_spill_failed", self.cold.spill_error[:200],
                              ts_ns=ts_ns, frame=frame)
        fz = self.frozen
        thaw = bytearray()
        if fz is not None:  # (those the end must see: thawed in tcp_stream order, below)
            thaw = fz.finish
            fz.forget_pairs()
            if fz.spill_error is not None:
                self.diag.add("tcp.frozen_spill_failed", fz.spill_error[:200], ts_ns=ts_ns,
                              frame=frame)
        conns = self.connections
        n_thaw = len(thaw)
        for stream, conn in enumerate(conns):
            if conn is not None:
                self._finish_one(conn, ts_ns, frame)
            elif stream < n_thaw and thaw[stream]:  # (frozen: one at a time, frozen again)
                assert fz is not None
                conn = conns[stream] = fz.pop(stream)
                if conn is not None:
                    self._records += 1
                    self._finish_one(conn, ts_ns, frame)
                    self._freeze(conn, at_end=True)

    def _finish_one(self, conn: Connection, ts_ns: int, frame: int) -> None:
        """End of capture for one connection: flush its byte streams, let its observer report
        what is open, its follower the gaps it found, the loss table its holes."""
        if conn.packed is not None:
            self._unpack(conn)
        loss = conn.loss
        if loss is not None:
            for x in (0, 1):
                if loss[x].holes:
                    self.losses.finish(loss[x], conn.conv.tcp_stream, x)
        st = conn.streams
        if st is None:
            if conn.follow is not None:
                out: list[Gap] = []
                conn.follow.finish(out)
                conn.follow = None
                if out:
                    self._gaps(conn, out, ts_ns, frame)
            return
        items = st.reasm[0].finish(ts_ns, frame) + st.reasm[1].finish(ts_ns, frame)
        if items:
            self._deliver(conn, st, items)
        for x in (0, 1):
            if not st.closed[x]:
                st.closed[x] = True
                self.emit(st.observer.close(Direction(x), ts_ns, frame, at_eof=True))
        self.emit(st.observer.finish(ts_ns, frame))
        conn.streams = None

    def release(self) -> None:
        """After the tables are built (:func:`pcaptools.pipeline.run`): drop the per-connection
        records and the analyzer's conversations, so that what follows (coverage, redaction,
        the report) does not hold them as well as the tables made of them. The rows of
        ``tcp_events`` and ``tcp_losses`` stay (a streaming export drains them)."""
        self.connections = []
        self.drop_cold()
        self.analyzer = TcpAnalyzer(self.diag)

    def drop_cold(self) -> None:
        """Let the cold connections and the frozen records go (their rows are in the
        tables), closing the databases of those spilled."""
        if self.cold is not None:
            self.cold.close()
            self.cold = None
        if self.frozen is not None:
            self.frozen.close()
            self.frozen = FrozenConnections(RECORDS)

    def unanalysed(self, seg: TcpSegment, captured: int) -> SegmentAnalysis | None:
        """A TCP header that is not a segment of its own (quoted in an ICMP error, or cut short):
        tshark gives its frame the connection's tcp.stream without analysing it. Returns the
        analysis (for the stream number) or None; the connection's counters are not touched."""
        cold = self.cold
        if cold is not None:
            row = cold.find(seg)
            if row != -1:
                self._warm(row)
        if self.frozen is not None and not self.analyzer.knows(seg.src, seg.sport, seg.dst,
                                                               seg.dport):
            self._thaw(seg)
        a = self.analyzer.feed_unanalysed(seg, captured)
        if a is not None:
            self.quoted_streams.add(a.tcp_stream)
            if a.tcp_stream >= len(self.connections):
                self._new_connection(a, seg)
        return a

    def _new_connection(self, a: SegmentAnalysis, seg: TcpSegment) -> Connection:
        conv = a.conv
        assert conv is not None
        conn = Connection(conv, seg.frame, seg.ts_ns,
                          ConnHistory(client_inferred=conv.client_inferred),
                          (DirStats(), DirStats()),
                          last_frame=seg.frame, last_ts=seg.ts_ns)
        # (its byte-stream state: _attach(), when needed)
        conns = self.connections
        if a.tcp_stream < len(conns):  # a cold connection's place
            conns[a.tcp_stream] = conn
        else:  # streams are numbered in order of appearance: the next index
            conns.append(conn)
        pol = self.freeze_policy
        if pol is not None:
            self._idle_q.add(a.tcp_stream, seg.ts_ns + pol.idle_ns)
            self._records += 1
        return conn

    @staticmethod
    def _idle(conn: Connection, gap: int, seg: TcpSegment) -> None:
        """A silence of ``gap`` ns ends with ``seg`` (called before conn.last_* move on)."""
        if gap > conn.idle_max_ns:
            conn.idle_max_ns = gap
            conn.idle_max_start_frame = conn.last_frame
            conn.idle_max_end_frame = seg.frame
            conn.idle_max_end_ts = seg.ts_ns
        if gap >= IDLE_FLOOR_NS:
            conn.idle_last_ns = gap
            conn.idle_last_start_frame = conn.last_frame
            conn.idle_last_end_frame = seg.frame
            conn.idle_last_end_ts = seg.ts_ns

    @staticmethod
    def _big(sd: DirStats, seg: TcpSegment, a: SegmentAnalysis) -> None:
        """A segment larger than any the peer acknowledged so far (path-MTU bookkeeping)."""
        n = seg.seg_len
        if n > sd.max_seg:
            sd.max_seg = n
        start = a.rel_seq
        big = sd.big
        if big is None:
            big = sd.big = []
        if a.resent_bytes:
            again = smaller = False
            for b in big:
                if b[0] != start:
                    continue
                if b[2] > n:  # re-sent from the same byte, in smaller pieces
                    if sd.shrink is None:
                        ip_hdr = 20 if seg.ip_version == 4 else 40
                        sd.shrink = [b[3], b[4], b[2], seg.frame, seg.ts_ns, n,
                                     n + seg.header_len + ip_hdr, b[1], 0, 0]
                    b[2] = 0  # an ACK of its end no longer proves that its size got through
                    smaller = True
                elif b[2] == n:
                    again = True  # the same segment again
            if smaller:
                big[:] = [b for b in big if b[2]]
            if again:
                return
        if n > sd.max_acked and len(big) < _MAX_BIG:
            big.append([start, (start + n) & _M32, n, seg.frame, seg.ts_ns])

    @staticmethod
    def _acked(sd: DirStats, ack: int, seg: TcpSegment) -> None:
        """The peer acknowledged up to ``ack``: segments of ``sd`` it covers were delivered."""
        big = sd.big
        assert big is not None
        keep = []
        top = sd.max_acked
        for b in big:
            if (ack - b[1]) & _M32 < _HALF_WRAP:
                if b[2] > top:
                    top = b[2]
            else:
                keep.append(b)
        sd.max_acked = top
        sh = sd.shrink
        if sh is not None and not sh[8] and (ack - sh[7]) & _M32 < _HALF_WRAP:
            sh[8], sh[9] = seg.frame, seg.ts_ns
        big[:] = [b for b in keep if b[2] > top]
        if not big and (sh is None or sh[8]):
            sd.big = None

    @staticmethod
    def _ttl(sd: DirStats, ttl: int) -> None:
        sd.ttl = ttl
        if sd.ttl_min < 0 or ttl < sd.ttl_min:
            sd.ttl_min = ttl
        if ttl > sd.ttl_max:
            sd.ttl_max = ttl

    def _control(self, conn: Connection, seg: TcpSegment, a: SegmentAnalysis, d: int) -> None:
        flags = seg.flags
        if flags & SYN:
            conn.side[d].handshake_bytes += seg.frame_len - seg.seg_len
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
        else:  # FIN or RST
            conn.side[d].teardown_bytes += seg.frame_len - seg.seg_len
        if flags & FIN:
            fin = conn.fin
            if fin is None:
                fin = conn.fin = [None, None, None, None]
            if fin[d] is None:
                fin[d] = seg.frame
                fin[2 + d] = seg.ts_ns
        if flags & RST and conn.rst_frame is None:
            conn.rst_frame, conn.rst_ts, conn.rst_by_client = seg.frame, seg.ts_ns, d == 0
            conn.rst_ttl, conn.rst_ip_id = seg.ttl, seg.ip_id
            hs = conn.handshake
            if hs is not None and d == 1 and hs.synack_frame is None and hs.syn_frame is not None:
                hs.refused = True
            if self.freeze_policy is not None:
                self._ended_q.add(conn.conv.tcp_stream, seg.ts_ns + self.freeze_policy.ended_ns)
        elif flags & FIN and self.freeze_policy is not None and conn.rst_frame is None:
            fin = conn.fin
            assert fin is not None
            if (fin[0] == seg.frame and fin[1] is not None) or (
                    fin[1] == seg.frame and fin[0] is not None):  # (the second way's first FIN)
                self._ended_q.add(conn.conv.tcp_stream, seg.ts_ns + self.freeze_policy.ended_ns)
