"""tshark-compatible TCP analysis: ``tcp.stream`` numbering and the ``tcp.analysis.*`` flags.

:class:`TcpAnalyzer` is fed every TCP segment once, in capture order, and returns one
:class:`SegmentAnalysis` per segment. It reproduces what ``tshark -r FILE`` (Wireshark 4.0,
single pass, default preferences) computes in ``dissect_tcp()`` and
``tcp_analyze_sequence_number()`` of ``epan/dissectors/packet-tcp.c``:

* **Stream numbering** (``tcp.stream``): one conversation per address/port pair, in order
  of first appearance. A SYN (without ACK) whose sequence number differs from the base
  sequence number already recorded for its sender starts a *new* conversation on the same
  ports (flag ``reused_ports``). A SYN-ACK whose sequence number differs from its sender's
  base sequence number only re-bases that direction (also ``reused_ports``). A SYN that
  repeats the recorded ISN restores the sender's ``nextseq`` from ``maxseqtobeacked``.
* **Relative numbers** (``tcp.seq`` / ``tcp.ack``): a direction's base is its SYN's sequence
  number, or ``seq - 1`` of its first segment when the SYN was not seen, or ``ack - 1`` of
  the first ACK-carrying segment of the other direction if that comes first.
* **Window** (``tcp.window_size``): raw for SYNs; otherwise shifted by the sender's window
  scale when known, raw when unknown (SYN not seen: ``-1``) or unused (``-2``). The scale of a
  segment's own options applies from the next segment on, as in tshark.
* **Flags**, one per tshark field. Wireshark's precedence and ``goto`` jumps are kept: a zero
  window probe skips every other forward check; keep-alive ACK / zero-window-probe ACK skip
  the duplicate ACK check; a keep-alive is never a retransmission; spurious retransmission
  (data entirely below the last ACK seen from the peer) is checked first, then fast
  retransmission (>= 2 duplicate ACKs from the peer, ``seq`` equal to their ACK, within
  20 ms), then out-of-order (within the first handshake RTT of the highest segment, 3 ms if
  no handshake RTT is known), then plain retransmission.

**Retransmission kinds are mutually exclusive here.** tshark's ``tcp.analysis.retransmission``
field is present on plain, fast *and* spurious retransmissions; in :attr:`SegmentAnalysis.kinds`
``retransmission`` means only the plain (timeout) kind, and ``fast_retransmission`` /
``spurious_retransmission`` are separate. The "retransmissions" view is the union of the
three (``RETRANSMISSION_KINDS``); ``out_of_order`` is never part of it.

``ack_rtt`` / ``acks_frame`` come from the per-direction list of unacknowledged segments
(at most 10000 per direction, as tshark; further segments are not tracked, reported once as
``tcp.unacked_limit``). An ACK equal to a segment's next sequence number acknowledges it
(the oldest such segment is reported); a partial ACK trims the segment. ``initial_rtt`` is
the time from the most recent SYN to the first ACK-without-SYN segment in either direction.

Wireshark quirks reproduced on purpose (each checked against tshark 4.0.17): a sequence
number state of 0 means "unset" (data ending exactly at 2**32 disables the next comparisons);
the duplicate-ACK counter is unsigned, so the -1 that "ACKed unseen segment" stores counts as
">= 2 duplicate ACKs" for fast retransmission; a SYN at time 0 or a zero handshake RTT leave
the initial RTT unset; time deltas are compared as unsigned 64-bit values (a timestamp going
backwards is "long ago"); the analysis uses the raw (unscaled) window fields.

TCP headers that tshark numbers but does not analyse (quoted in ICMP errors, shorter than
their header, in unreassembled IP fragments) go through :meth:`TcpAnalyzer.feed_unanalysed`,
so that stream numbers stay aligned with tshark's.

Not modelled: MPTCP's tolerance of duplicate ACKs, preferences other than the defaults,
conversations that other dissectors create (e.g. FTP data channels).

Memory: per connection two small direction records; the unacknowledged-segment list holds
only data in flight (bounded by 10000) and the seen-bytes interval set used for
``resent_bytes`` is capped at :data:`MAX_SEEN_INTERVALS` intervals per direction.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .._slots import slots_eq, slots_repr
from ..diagnostics import Diagnostics
from ..net.packet import ACK, FIN, RST, SYN, TcpSegment

__all__ = [
    "KIND_NAMES",
    "MAX_SEEN_INTERVALS",
    "MAX_UNACKED_SEGMENTS",
    "RETRANSMISSION_KINDS",
    "SegmentAnalysis",
    "TcpAnalyzer",
    "TcpConversation",
    "TcpDirection",
]

_M32 = 0xFFFFFFFF
_HALF = 0x80000000
_M64 = 0xFFFFFFFFFFFFFFFF

#: tshark's TCP_MAX_UNACKED_SEGMENTS
MAX_UNACKED_SEGMENTS = 10000
#: cap on the seen-bytes intervals kept per direction for ``resent_bytes``
MAX_SEEN_INTERVALS = 1000

# analysis flag bits (internal)
_RETRANS = 0x0001
_LOST = 0x0002
_ACK_LOST = 0x0004
_KEEP_ALIVE = 0x0008
_DUP_ACK = 0x0010
_ZERO_WIN = 0x0020
_ZWP = 0x0040
_ZWP_ACK = 0x0080
_KA_ACK = 0x0100
_OOO = 0x0200
_FAST = 0x0400
_WIN_UPDATE = 0x0800
_WIN_FULL = 0x1000
_REUSED = 0x2000
_SPURIOUS = 0x4000

_BIT_NAMES: tuple[tuple[int, str], ...] = (
    (_RETRANS, "retransmission"),
    (_FAST, "fast_retransmission"),
    (_SPURIOUS, "spurious_retransmission"),
    (_OOO, "out_of_order"),
    (_LOST, "lost_segment"),
    (_ACK_LOST, "ack_lost_segment"),
    (_DUP_ACK, "duplicate_ack"),
    (_KEEP_ALIVE, "keep_alive"),
    (_KA_ACK, "keep_alive_ack"),
    (_ZERO_WIN, "zero_window"),
    (_ZWP, "zero_window_probe"),
    (_ZWP_ACK, "zero_window_probe_ack"),
    (_WIN_FULL, "window_full"),
    (_WIN_UPDATE, "window_update"),
    (_REUSED, "reused_ports"),
)

#: every name that can appear in :attr:`SegmentAnalysis.kinds`, in the order they appear there
KIND_NAMES: tuple[str, ...] = tuple(name for _, name in _BIT_NAMES)
#: the kinds that tshark's ``tcp.analysis.retransmission`` field covers
RETRANSMISSION_KINDS = frozenset(
    {"retransmission", "fast_retransmission", "spurious_retransmission"}
)

_KINDS_CACHE: dict[int, tuple[str, ...]] = {0: ()}
_SFRA = SYN | FIN | RST | ACK
#: the usual TCP options of a data segment: NOP, NOP, timestamps (kind 8, length 10)
_NOP_NOP_TS = b"\x01\x01\x08\x0a"


def _kinds(bits: int) -> tuple[str, ...]:
    """Flag bits -> tuple of kind names (cached: the same tuple object for the same bits)."""
    t = _KINDS_CACHE.get(bits)
    if t is None:
        t = tuple(name for bit, name in _BIT_NAMES if bits & bit)
        _KINDS_CACHE[bits] = t
    return t


def _ack_one(e: list[int], ack: int) -> int:
    """Wireshark's treatment of one unacked segment for an ACK number.

    Returns 0: acknowledged exactly (ack == its nextseq; removed), 1: kept (partially acked
    segments get their start moved to ``ack``), 2: removed (acknowledged by a later ACK).
    """
    ns = e[2]
    if ack == ns:
        return 0
    if ((e[1] - ack) & _M32) >= _HALF:  # GT_SEQ(ack, seq)
        d = (ack - ns) & _M32
        if d == 0 or d >= _HALF:  # LE_SEQ(ack, nextseq): partial ack
            e[1] = ack
            return 1
    if ((ack - ns) & _M32) >= _HALF:  # GT_SEQ(nextseq, ack): not acknowledged yet
        return 1
    return 2


def _ack_segments(rev: TcpDirection, rua: list[list[int]], ack: int) -> list[int] | None:
    """Apply an ACK number to the other direction's unacked list; return the acked segment.

    The acked segment is the oldest whose nextseq equals ``ack`` (Wireshark walks its list
    newest first and keeps the last match). Segments at or below ``ack`` are removed, a
    partially acked one is trimmed. When the list is ascending and spans less than 2**30
    (the usual case) only the affected prefix is visited: the result is identical to the
    full walk, because every later segment starts at or above ``ack`` and is left alone.
    """
    hit: list[int] | None = None
    if rev.ua_mono:
        base = rua[0][1]
        span = (rua[-1][2] - base) & _M32
        if span < 0x40000000:
            a = (ack - base) & _M32
            if a >= _HALF:
                a -= 0x100000000
            if a - span > -_HALF:
                n = len(rua)
                i = 0
                while i < n and ((rua[i][1] - ack) & _M32) >= _HALF:  # GT_SEQ(ack, seq)
                    i += 1
                if i:
                    # _ack_one for segments that start below ack: acknowledged exactly (the
                    # hit), partially (trimmed, kept) or by a later ACK (removed)
                    kept: list[list[int]] = []
                    for e in rua[:i]:
                        ns = e[2]
                        if ack == ns:
                            if hit is None:
                                hit = e
                        elif ((ack - ns) & _M32) >= _HALF:
                            e[1] = ack
                            kept.append(e)
                    rua[:i] = kept
                return hit
    keep: list[list[int]] = []
    mono = True
    prev_next = -1
    for e in rua:
        r = _ack_one(e, ack)
        if r == 1:
            if prev_next >= 0:
                d = (prev_next - e[1]) & _M32
                if d and d < _HALF:
                    mono = False
            prev_next = e[2]
            keep.append(e)
        elif r == 0 and hit is None:
            hit = e
    rev.unacked = keep
    rev.ua_mono = mono
    return hit


#: ports that are taken for the server side when a connection is seen without its SYN
_SERVER_PORTS = frozenset({
    80, 443, 1080, 1433, 1521, 1883, 2375, 2376, 3000, 3128, 3306, 3389, 4000, 4443, 5000, 5001,
    5432, 5672, 5900, 6379, 6443, 7000, 7860, 8000, 8008, 8080, 8081, 8443, 8888, 9000, 9090,
    9092, 9200, 9443, 11211, 11434, 27017,
})


def _sender_is_client(sport: int, dport: int) -> bool:
    """Role guess for a connection first seen without SYN: True if the sender looks like the client.

    A side whose port is below 1024 or a well-known service port is the server; otherwise the
    lower port is the server; with equal ports the first sender is taken for the client.
    """
    s_srv = sport < 1024 or sport in _SERVER_PORTS
    d_srv = dport < 1024 or dport in _SERVER_PORTS
    if s_srv != d_srv:
        return d_srv
    if sport != dport:
        return sport > dport
    return True


class TcpDirection:
    """Analysis state of one direction of a connection (Wireshark's tcp_flow_t + seq info).

    Sequence-number fields hold raw 32-bit values; 0 means "not seen yet" exactly as in
    Wireshark (which is why a real ``nextseq`` of 0 behaves like an unset one there too).
    """

    __slots__ = (
        "base_seq",
        "base_set",
        "dupacknum",
        "is_first_ack",
        "lastack",
        "lastack_ts",
        "lastflags",
        "lastnondupack",
        "maxseqtobeacked",
        "nextseq",
        "nextseq_ts",
        "seen_ends",
        "seen_hi",
        "seen_starts",
        "ua_mono",
        "unacked",
        "unacked_limit_hit",
        "win_scale",
        "window",
    )

    def __init__(self) -> None:
        self.base_seq = 0
        """raw sequence number that relative numbers count from"""
        self.base_set = False
        self.win_scale = -1
        """window scale shift: >=0 known, -1 unknown (no SYN seen), -2 not used"""
        self.window = _M32
        """raw window of the last segment sent in this direction (0xFFFFFFFF before any)"""
        self.is_first_ack = False
        """True after a SYN until this direction sends an ACK without SYN"""
        self.nextseq = 0
        self.nextseq_ts = 0
        self.maxseqtobeacked = 0
        self.lastack = 0
        self.lastack_ts = 0
        self.lastnondupack = 0
        self.dupacknum = 0
        self.lastflags = 0
        self.unacked: list[list[int]] = []
        """unacknowledged segments, oldest first: [frame, seq, nextseq, ts_ns]"""
        self.ua_mono = True
        """True while each unacked segment starts at or after the previous one's end"""
        self.unacked_limit_hit = False
        self.seen_starts: list[int] | None = None
        """sorted disjoint intervals of payload bytes seen (unwrapped 64-bit sequence space)"""
        self.seen_ends: list[int] | None = None
        self.seen_hi = 0
        """unwrapped end of the highest payload seen (anchor for unwrapping)"""

    def resent(self, seq: int, n: int) -> int:
        """Record payload bytes [seq, seq+n) (raw seq) as seen; return how many were seen before.

        Sequence numbers are unwrapped to 64 bits around the highest byte seen so far, so
        wraparound at 2**32 is handled. When more than :data:`MAX_SEEN_INTERVALS` disjoint
        intervals accumulate, the lowest one is forgotten: bytes resent from it later are
        counted as new (documented approximation).
        """
        starts = self.seen_starts
        if starts is None:
            self.seen_starts = [seq]
            self.seen_ends = [seq + n]
            self.seen_hi = seq + n
            return 0
        ends = self.seen_ends
        assert ends is not None
        hi = self.seen_hi
        delta = (seq - hi) & _M32
        if delta >= _HALF:
            delta -= 0x100000000
        start = hi + delta
        end = start + n
        last_end = ends[-1]
        if start >= last_end:  # fast path: in order, new data
            if start == last_end:
                ends[-1] = end
            else:
                starts.append(start)
                ends.append(end)
                if len(starts) > MAX_SEEN_INTERVALS:
                    del starts[0]
                    del ends[0]
            if end > hi:
                self.seen_hi = end
            return 0
        # general path: count the overlap, then merge [start, end) into the set
        i = bisect_right(ends, start)  # first interval whose end > start
        j = i
        covered = 0
        new_start = start
        new_end = end
        k = len(starts)
        while j < k and starts[j] <= end:
            s = starts[j]
            e = ends[j]
            lo = s if s > start else start
            up = e if e < end else end
            if up > lo:
                covered += up - lo
            if s < new_start:
                new_start = s
            if e > new_end:
                new_end = e
            j += 1
        starts[i:j] = [new_start]
        ends[i:j] = [new_end]
        if len(starts) > MAX_SEEN_INTERVALS:
            del starts[0]
            del ends[0]
        if end > hi:
            self.seen_hi = end
        return covered


class TcpConversation:
    """One TCP connection as tshark numbers it (``tcp.stream`` == :attr:`tcp_stream`)."""

    __slots__ = (
        "c2s",
        "client_addr",
        "client_inferred",
        "client_port",
        "ip_version",
        "irtt_ns",
        "s2c",
        "server_addr",
        "server_port",
        "tcp_stream",
        "ts_mru_syn",
    )

    def __init__(
        self, tcp_stream: int, ip_version: int, client_addr: bytes, client_port: int,
        server_addr: bytes, server_port: int, client_inferred: bool,
    ) -> None:
        self.tcp_stream = tcp_stream
        self.ip_version = ip_version
        self.client_addr = client_addr
        """packed address of the client (SYN sender, or the inferred one)"""
        self.client_port = client_port
        self.server_addr = server_addr
        self.server_port = server_port
        self.client_inferred = client_inferred
        """True when the first segment had no SYN flag and roles were guessed from the ports"""
        self.irtt_ns: int | None = None
        """tshark's tcp.analysis.initial_rtt: last SYN -> first ACK without SYN (None: none)"""
        self.ts_mru_syn = 0
        """time of the most recent SYN (without ACK); 0 = none, as Wireshark"""
        self.c2s = TcpDirection()
        """state of the client -> server direction"""
        self.s2c = TcpDirection()
        """state of the server -> client direction"""

    @property
    def client_base_seq(self) -> int | None:
        """raw sequence number the client's relative numbers count from (None before any)"""
        return self.c2s.base_seq if self.c2s.base_set else None

    @property
    def server_base_seq(self) -> int | None:
        """raw sequence number the server's relative numbers count from (None before any)"""
        return self.s2c.base_seq if self.s2c.base_set else None

    def __repr__(self) -> str:
        return (f"TcpConversation(tcp_stream={self.tcp_stream}, client_port={self.client_port}, "
                f"server_port={self.server_port}, client_inferred={self.client_inferred}, "
                f"irtt_ns={self.irtt_ns})")


class SegmentAnalysis:
    """What the analysis says about one segment. A new object per segment (safe to keep).

    (A class with ``__slots__``, not a dataclass: the compiled build makes it an extension type,
    ``analysis.pxd``, one per TCP frame; ``repr`` and ``==`` are a dataclass's.)
    """

    __slots__ = ("tcp_stream", "conv", "from_client", "rel_seq", "rel_ack", "window", "kinds",
                 "dup_ack_num", "dup_ack_frame", "ack_rtt_ns", "acked_frame", "resent_bytes",
                 "new_stream")

    tcp_stream: int
    """tcp.stream"""
    conv: TcpConversation | None
    """the connection's analysis state (None: a SYN kept cold, :mod:`.cold`)"""
    from_client: bool
    """True if sent by the client (SYN sender; inferred when no SYN was seen)"""
    rel_seq: int
    """tcp.seq (relative)"""
    rel_ack: int | None
    """tcp.ack (relative); None without the ACK flag (tshark then shows the raw field)"""
    window: int
    """tcp.window_size: scaled when the scale is known, raw otherwise and on SYNs"""
    kinds: tuple[str, ...]
    """analysis flags of this frame (names in :data:`KIND_NAMES`); retransmission kinds exclusive"""
    dup_ack_num: int | None
    """tcp.analysis.duplicate_ack_num"""
    dup_ack_frame: int | None
    """tcp.analysis.duplicate_ack_frame"""
    ack_rtt_ns: int | None
    """tcp.analysis.ack_rtt in ns (None when tshark shows none: nothing acked, or a zero delta)"""
    acked_frame: int | None
    """tcp.analysis.acks_frame"""
    resent_bytes: int
    """payload bytes of this segment already seen earlier in the same direction"""
    new_stream: bool
    """True for the first segment of this tcp_stream"""

    def __init__(self, tcp_stream: int, conv: TcpConversation | None, from_client: bool,
                 rel_seq: int, rel_ack: int | None, window: int, kinds: tuple[str, ...],
                 dup_ack_num: int | None, dup_ack_frame: int | None, ack_rtt_ns: int | None,
                 acked_frame: int | None, resent_bytes: int, new_stream: bool) -> None:
        self.tcp_stream = tcp_stream
        self.conv = conv
        self.from_client = from_client
        self.rel_seq = rel_seq
        self.rel_ack = rel_ack
        self.window = window
        self.kinds = kinds
        self.dup_ack_num = dup_ack_num
        self.dup_ack_frame = dup_ack_frame
        self.ack_rtt_ns = ack_rtt_ns
        self.acked_frame = acked_frame
        self.resent_bytes = resent_bytes
        self.new_stream = new_stream

    def __repr__(self) -> str:
        return slots_repr(self)

    def __eq__(self, other: Any) -> Any:
        return slots_eq(self, other)

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as the dataclass)


def _parse_wscale(options: bytes, opt_len: int) -> tuple[int | None, bool]:
    """Window scale shift from TCP options as tshark's option loop reads them.

    ``opt_len`` is the option length the header announces; ``options`` the captured bytes
    (possibly fewer). Returns (shift capped at 14 or None, truncated) where truncated means
    the captured bytes ended inside an option (tshark then stops dissecting the segment).
    Malformed options end the loop without error, as in tshark.
    """
    shift: int | None = None
    off = 0
    cap = len(options)
    remaining = opt_len
    eol_seen = False
    while remaining > 0:
        if off >= cap:
            return shift, True
        kind = options[off]
        if eol_seen and kind != 0:
            return shift, False
        remaining -= 1
        if kind == 0 or kind == 1:
            if kind == 0:
                eol_seen = True
            off += 1
            continue
        if remaining == 0:
            return shift, False
        if off + 1 >= cap:
            return shift, True
        olen = options[off + 1]
        remaining -= 1
        if olen < 2 or olen - 2 > remaining:
            return shift, False
        if off + olen > cap:
            return shift, True
        if kind == 3 and olen == 3:
            s = options[off + 2]
            shift = 14 if s > 14 else s
        off += olen
        remaining -= olen - 2
    return shift, False


def new_analysis(tcp_stream: int, conv: TcpConversation | None, from_client: bool,
                 rel_seq: int, rel_ack: int | None, window: int, kinds: tuple[str, ...],
                 dup_ack_num: int | None, dup_ack_frame: int | None, ack_rtt_ns: int | None,
                 acked_frame: int | None, resent_bytes: int, new_stream: bool) -> SegmentAnalysis:
    """``SegmentAnalysis(...)`` for the analyzer's in-order shortcut (once a segment): in the
    compiled build a C function that fills the new object's fields, without the argument
    parsing of a call to the class."""
    a = SegmentAnalysis.__new__(SegmentAnalysis)
    a.tcp_stream = tcp_stream
    a.conv = conv
    a.from_client = from_client
    a.rel_seq = rel_seq
    a.rel_ack = rel_ack
    a.window = window
    a.kinds = kinds
    a.dup_ack_num = dup_ack_num
    a.dup_ack_frame = dup_ack_frame
    a.ack_rtt_ns = ack_rtt_ns
    a.acked_frame = acked_frame
    a.resent_bytes = resent_bytes
    a.new_stream = new_stream
    return a

class TcpAnalyzer:
    """Assigns ``tcp.stream`` numbers and computes tshark's per-segment TCP analysis.

    Call :meth:`feed` once per TCP segment in capture order. Never raises on segment data.
    """

    __slots__ = ("_diag", "_last_conv", "_last_dport", "_last_dst", "_last_sport", "_last_src",
                 "_table", "conversations", "reserved")

    def __init__(self, diag: Diagnostics) -> None:
        self._diag = diag
        self._table: dict[tuple[bytes, int, bytes, int], TcpConversation] = {}
        # the address pair :meth:`feed_known` found last (sent from _last_src, _last_sport to
        # _last_dst, _last_dport) and its conversation: consecutive segments are mostly of one
        # connection (87 to 90 % of the frames of the benchmark captures), whose conversation
        # is then found by four comparisons, not by hashing a new key; forgotten whenever the
        # index changes (_forget_last), so it always gives what the index gives
        self._last_conv: TcpConversation | None = None
        self._last_src: bytes = b""
        self._last_dst: bytes = b""
        self._last_sport = -1
        self._last_dport = -1
        self.conversations: list[TcpConversation | None] = []
        """every connection, index == tcp_stream (None: a number :meth:`reserve` gave)"""
        self.reserved = -1
        """the tcp_stream the next new conversation takes (-1: the next number)"""

    def reserve(self) -> int:
        """A tcp_stream number for a connection whose conversation is made later (a cold SYN:
        :class:`~.tracker.TcpTracker`); set :attr:`reserved` to it before feeding that
        connection's first segment."""
        self.conversations.append(None)
        return len(self.conversations) - 1

    def knows(self, src: bytes, sport: int, dst: bytes, dport: int) -> bool:
        """Whether a segment of this address pair would be analysed with a conversation the
        analyzer has (:meth:`feed_known` would not return None)."""
        return (src, sport, dst, dport) in self._table

    def _forget_last(self) -> None:
        """The index changes: :meth:`feed_known` looks the next address pair up in it."""
        self._last_conv = None
        self._last_sport = self._last_dport = -1

    def forget(self, conv: TcpConversation) -> bool:
        """Let ``conv`` go (a frozen connection: :mod:`.frozen`): from :attr:`conversations`,
        and its address pair from the index while the pair is still its own; returns whether
        it was (False: a later connection took the address pair over)."""
        self.conversations[conv.tcp_stream] = None
        key = (conv.client_addr, conv.client_port, conv.server_addr, conv.server_port)
        table = self._table
        if table.get(key) is not conv:
            return False
        self._forget_last()
        del table[key]
        del table[(conv.server_addr, conv.server_port, conv.client_addr, conv.client_port)]
        return True

    def restore(self, conv: TcpConversation) -> None:
        """Take back a conversation :meth:`forget` let go, with its address pair."""
        self.conversations[conv.tcp_stream] = conv
        self._forget_last()
        table = self._table
        table[(conv.client_addr, conv.client_port, conv.server_addr, conv.server_port)] = conv
        table[(conv.server_addr, conv.server_port, conv.client_addr, conv.client_port)] = conv

    def _new_conv(self, seg: TcpSegment) -> TcpConversation:
        flags = seg.flags
        if flags & SYN:
            sender_client = not flags & ACK
            inferred = False
        else:
            sender_client = _sender_is_client(seg.sport, seg.dport)
            inferred = True
        convs = self.conversations
        stream = self.reserved
        if stream < 0:
            stream = len(convs)
            convs.append(None)
        else:
            self.reserved = -1
        if sender_client:
            conv = TcpConversation(stream, seg.ip_version, seg.src, seg.sport, seg.dst,
                                   seg.dport, inferred)
        else:
            conv = TcpConversation(stream, seg.ip_version, seg.dst, seg.dport, seg.src,
                                   seg.sport, inferred)
        convs[stream] = conv
        self._forget_last()
        table = self._table
        table[(seg.src, seg.sport, seg.dst, seg.dport)] = conv
        table[(seg.dst, seg.dport, seg.src, seg.sport)] = conv
        return conv

    def feed(self, seg: TcpSegment) -> SegmentAnalysis:
        """Analyse the next segment in capture order; return its :class:`SegmentAnalysis`
        (:meth:`feed_known`, or the first segment of a new conversation)."""
        a = self.feed_known(seg)
        return self._feed(seg, None) if a is None else a

    def feed_known(self, seg: TcpSegment) -> SegmentAnalysis | None:
        """:meth:`feed` of a segment of an address pair the analyzer knows; None, with nothing
        changed, for one it does not (:meth:`feed` then makes its conversation).

        The common case of a bulk transfer, an ACK (no SYN/FIN/RST) of a known connection
        whose sequence number is the next one expected, with a non-zero window, payload or a
        new acknowledgement number, and no zero window probe possible, takes a shortcut that
        skips the checks that cannot fire for it (lost segment, keep-alive, duplicate ACK,
        window update, zero window, every retransmission kind but the spurious one). All
        other segments take :meth:`_feed`, the statement of Wireshark's logic. Both give the
        same result for the common case (the tshark comparison tests cover both).
        """
        src = seg.src
        sport = seg.sport
        dst = seg.dst
        last = self._last_conv
        if last is not None and ((seg.sport == self._last_sport and seg.dport == self._last_dport
                                  and src == self._last_src and dst == self._last_dst) or (
                seg.sport == self._last_dport and seg.dport == self._last_sport
                and src == self._last_dst and dst == self._last_src)):
            conv = last
        else:
            found = self._table.get((src, sport, dst, seg.dport))
            if found is None:
                return None
            self._last_conv = conv = found
            self._last_src, self._last_sport = src, seg.sport
            self._last_dst, self._last_dport = dst, seg.dport
        flags = seg.flags
        if flags & _SFRA != ACK:
            return self._feed(seg, conv)
        if sport == conv.client_port and src == conv.client_addr:
            from_client = True
            fwd = conv.c2s
            rev = conv.s2c
        else:
            from_client = False
            fwd = conv.s2c
            rev = conv.c2s
        seq = seg.seq & _M32
        ack = seg.ack & _M32
        seglen = seg.seg_len
        win = seg.window
        fnext = fwd.nextseq
        # (a non-zero nextseq means this direction has sent before, so its base is set)
        if (
            seq != fnext
            or not fnext
            or not win
            or not rev.base_set
            or (seglen == 1 and rev.window == 0)
            or (not seglen and ack == fwd.lastack)
        ):
            return self._feed(seg, conv)
        ts = seg.ts_ns
        frame = seg.frame
        bits = 0
        if ack != fwd.lastack:
            fwd.lastnondupack = frame
            fwd.dupacknum = 0
        rmax = rev.maxseqtobeacked
        if rmax and ((rmax - ack) & _M32) >= _HALF:
            rnext = rev.nextseq
            if ((rmax - rnext) & _M32) >= _HALF:
                rev.maxseqtobeacked = rnext
                bits = _ACK_LOST
            else:
                if rev.dupacknum == 0:
                    bits = _ACK_LOST
                rev.dupacknum = -1
        fmax = fwd.maxseqtobeacked
        if seglen:
            nextseq = (seq + seglen) & _M32
            rlast = rev.lastack
            rws = rev.win_scale
            if rws != -1:
                shift = 0 if (rev.is_first_ack or rws == -2) else rws
                if nextseq == (rlast + ((rev.window << shift) & _M32)) & _M32:
                    bits |= _WIN_FULL
            if rlast:
                d = (nextseq - rlast) & _M32
                if d == 0 or d >= _HALF:
                    bits |= _SPURIOUS
            ua = fwd.unacked
            if len(ua) < MAX_UNACKED_SEGMENTS:
                if not ua:
                    fwd.ua_mono = True
                elif fwd.ua_mono:
                    d = (ua[-1][2] - seq) & _M32
                    if d and d < _HALF:
                        fwd.ua_mono = False
                ua.append([frame, seq, nextseq, ts])
            elif not fwd.unacked_limit_hit:
                self._unacked_limit(fwd, conv, from_client, ts, frame)
            if ((fnext - nextseq) & _M32) >= _HALF:
                fwd.nextseq = nextseq
                fwd.nextseq_ts = ts
                if seq == fmax or not fmax:
                    fwd.maxseqtobeacked = nextseq
            elif seq == fmax or not fmax:
                fwd.maxseqtobeacked = fnext
        elif seq == fmax or not fmax:  # (no payload: nextseq stays)
            fwd.maxseqtobeacked = fnext
        fwd.window = win
        fwd.lastack = ack
        fwd.lastack_ts = ts
        fwd.lastflags = bits

        acked_frame: int | None = None
        ack_rtt: int | None = None
        rua = rev.unacked
        if rua:
            hit = _ack_segments(rev, rua, ack)
            if hit is not None:
                acked_frame = hit[0]
                rtt = ts - hit[3]
                if rtt:
                    ack_rtt = rtt

        ws = fwd.win_scale
        if conv.ts_mru_syn and not conv.irtt_ns:
            irtt = ts - conv.ts_mru_syn
            if irtt:
                conv.irtt_ns = irtt
        fwd.is_first_ack = False
        hl = seg.header_len
        if hl > 20:
            # only the window scale option matters here (no SYN): skip the usual
            # NOP, NOP, timestamps layout without walking it
            opts = seg.options
            if 3 in opts and not (hl == 32 and opts[:4] == _NOP_NOP_TS and len(opts) == 12):
                ws_opt = _parse_wscale(opts, hl - 20)[0]
                if ws_opt is not None:
                    fwd.win_scale = ws_opt

        resent = 0
        if seglen:
            starts = fwd.seen_starts
            ends = fwd.seen_ends
            hi = fwd.seen_hi
            if starts is not None and ends is not None and ends[-1] == hi and not (seq - hi) & _M32:
                ends[-1] = fwd.seen_hi = hi + seglen  # in order, right after the highest byte
            else:
                resent = fwd.resent(seq, seglen)

        return new_analysis(
            conv.tcp_stream, conv, from_client, (seq - fwd.base_seq) & _M32,
            (ack - rev.base_seq) & _M32, win << ws if ws > 0 else win,
            (_KINDS_CACHE.get(bits) or _kinds(bits)) if bits else (), None, None,
            ack_rtt, acked_frame, resent, False,
        )

    def _unacked_limit(
        self, fwd: TcpDirection, conv: TcpConversation, from_client: bool, ts: int, frame: int
    ) -> None:
        fwd.unacked_limit_hit = True
        self._diag.add(
            "tcp.unacked_limit",
            f"more than {MAX_UNACKED_SEGMENTS} unacknowledged segments in one direction",
            ts_ns=ts, frame=frame, tcp_stream=conv.tcp_stream,
            direction="client_to_server" if from_client else "server_to_client",
        )

    def _feed(self, seg: TcpSegment, conv: TcpConversation | None) -> SegmentAnalysis:
        """:meth:`feed` for every segment (``conv``: the connection of its address pair, if
        any): Wireshark's logic statement by statement."""
        src = seg.src
        sport = seg.sport
        flags = seg.flags
        seq = seg.seq & _M32
        ack = seg.ack & _M32
        ts = seg.ts_ns
        frame = seg.frame
        new_stream = False
        bits = 0
        if conv is None:
            conv = self._new_conv(seg)
            new_stream = True
        if sport == conv.client_port and src == conv.client_addr:
            from_client = True
            fwd = conv.c2s
            rev = conv.s2c
        else:
            from_client = False
            fwd = conv.s2c
            rev = conv.c2s

        syn = flags & SYN
        if syn:
            if not flags & ACK:
                if fwd.base_set:
                    if seq != fwd.base_seq:
                        # a new connection on the same ports: new conversation
                        conv = self._new_conv(seg)
                        new_stream = True
                        bits = _REUSED
                        from_client = True
                        fwd = conv.c2s
                        rev = conv.s2c
                    else:
                        # same ISN again (SYN retransmission): restore nextseq (issue 17616)
                        fwd.nextseq = fwd.maxseqtobeacked
            elif fwd.base_set and seq != fwd.base_seq:
                fwd.base_seq = seq
                bits = _REUSED

        # base sequence numbers
        if not fwd.base_set:
            fwd.base_seq = seq if syn else (seq - 1) & _M32
            fwd.base_set = True
        if not rev.base_set and flags & ACK:
            rev.base_seq = (ack - 1) & _M32
            rev.base_set = True

        seglen = seg.seg_len
        win = seg.window
        fnext = fwd.nextseq
        dup_num: int | None = None
        dup_frame: int | None = None
        sfr = flags & (SYN | FIN | RST)

        # ---- forward checks (tcp_analyze_sequence_number) ----
        if seglen == 1 and seq == fnext and rev.window == 0:
            bits |= _ZWP
        else:
            if win == 0 and not sfr:
                bits |= _ZERO_WIN
            if fnext and ((fnext - seq) & _M32) >= _HALF and not flags & RST:
                bits |= _LOST
            if seglen <= 1 and not sfr and seq == ((fnext - 1) & _M32):
                bits |= _KEEP_ALIVE
            if seglen == 0:
                if not sfr and seq == fnext and ack == fwd.lastack:
                    fwin = fwd.window
                    if win and win != fwin:
                        bits |= _WIN_UPDATE
                    if win and win == fwin and rev.lastflags & _KEEP_ALIVE:
                        bits |= _KA_ACK
                    elif win == 0 and fwin == 0 and rev.lastflags & _ZWP:
                        bits |= _ZWP_ACK
                    elif win and win == fwin:
                        d = fwd.dupacknum
                        d = 1 if d == -1 else d + 1
                        fwd.dupacknum = d
                        bits |= _DUP_ACK
                        dup_num = d
                        dup_frame = fwd.lastnondupack
            elif not sfr and rev.win_scale != -1:
                rws = rev.win_scale
                shift = 0 if (rev.is_first_ack or rws == -2) else rws
                edge = (rev.lastack + ((rev.window << shift) & _M32)) & _M32
                if ((seq + seglen) & _M32) == edge:
                    bits |= _WIN_FULL

        # finished_fwd:
        if ack != fwd.lastack:
            fwd.lastnondupack = frame
            fwd.dupacknum = 0

        rmax = rev.maxseqtobeacked
        if rmax and flags & ACK and ((rmax - ack) & _M32) >= _HALF:
            rnext = rev.nextseq
            if ((rmax - rnext) & _M32) >= _HALF:
                rev.maxseqtobeacked = rnext
                bits |= _ACK_LOST
            else:
                if rev.dupacknum == 0:
                    bits |= _ACK_LOST
                rev.dupacknum = -1

        if (seglen or flags & (SYN | FIN)) and not bits & _KEEP_ALIVE:
            sna = fnext != 0 and ((seq - fnext) & _M32) >= _HALF
            if seglen > 1 and ((fnext - 1) & _M32) == seq:
                sna = False
            rlast = rev.lastack
            if seglen and rlast and (((seq + seglen - rlast) & _M32) == 0
                                     or ((seq + seglen - rlast) & _M32) >= _HALF):
                bits |= _SPURIOUS
            elif sna:
                # dupacknum is unsigned in Wireshark: the -1 that "ACKed unseen segment" sets
                # counts as >= 2
                if ((rev.dupacknum >= 2 or rev.dupacknum == -1) and rlast == seq
                        and ((ts - rev.lastack_ts) & _M64) < 20_000_000):
                    bits |= _FAST
                else:
                    first_rtt = conv.irtt_ns
                    thres = 3_000_000 if not first_rtt else first_rtt & _M64
                    nxt = (seq + seglen + (1 if flags & (SYN | FIN) else 0)) & _M32
                    if ((ts - fwd.nextseq_ts) & _M64) < thres and fnext != nxt:
                        bits |= _OOO
                    else:
                        bits |= _RETRANS

        # finished_checking_retransmission_type:
        nextseq = (seq + seglen) & _M32
        if seglen or flags & (SYN | FIN):
            ua = fwd.unacked
            if len(ua) < MAX_UNACKED_SEGMENTS:
                if flags & (SYN | FIN):
                    nextseq = (nextseq + 1) & _M32
                if not ua:
                    fwd.ua_mono = True
                elif fwd.ua_mono:
                    d = (ua[-1][2] - seq) & _M32
                    if d and d < _HALF:  # starts below the previous segment's end
                        fwd.ua_mono = False
                ua.append([frame, seq, nextseq, ts])
            elif not fwd.unacked_limit_hit:
                self._unacked_limit(fwd, conv, from_client, ts, frame)
        if not bits & _ZWP:
            if not fnext or ((fnext - nextseq) & _M32) >= _HALF:
                fwd.nextseq = nextseq
                fwd.nextseq_ts = ts
            fmax = fwd.maxseqtobeacked
            if seq == fmax or not fmax:
                fwd.maxseqtobeacked = fwd.nextseq
        fwd.window = win
        fwd.lastack = ack
        fwd.lastack_ts = ts
        fwd.lastflags = bits

        # segments of the other direction that this acknowledges
        acked_frame: int | None = None
        ack_rtt: int | None = None
        rua = rev.unacked
        if rua:
            hit = _ack_segments(rev, rua, ack)
            if hit is not None:
                acked_frame = hit[0]
                rtt = ts - hit[3]
                if rtt:
                    ack_rtt = rtt

        # ---- after the analysis: relative numbers, window, handshake bookkeeping ----
        rel_seq = (seq - fwd.base_seq) & _M32
        rel_ack = (ack - rev.base_seq) & _M32 if flags & ACK else None
        window = win
        if not syn:
            ws = fwd.win_scale
            if ws > 0:
                window = win << ws
        else:
            if not flags & ACK:
                conv.ts_mru_syn = ts
            fwd.is_first_ack = True
        if flags & (SYN | ACK) == ACK:
            if conv.ts_mru_syn and not conv.irtt_ns:
                irtt = ts - conv.ts_mru_syn
                if irtt:
                    conv.irtt_ns = irtt
            fwd.is_first_ack = False

        # options (window scale) and, for SYNs, the window scaling verification
        if seg.header_len > 20:
            opts = seg.options
            truncated = False
            if 3 in opts:
                ws_opt, truncated = _parse_wscale(opts, seg.header_len - 20)
                if ws_opt is not None:
                    fwd.win_scale = ws_opt
            elif len(opts) < seg.header_len - 20:
                truncated = _parse_wscale(opts, seg.header_len - 20)[1]
            if syn and not truncated:
                self._verify_window_scaling(fwd, rev, bool(flags & ACK))
        elif syn:
            self._verify_window_scaling(fwd, rev, bool(flags & ACK))

        resent = fwd.resent((seq + 1) & _M32 if syn else seq, seglen) if seglen else 0

        kinds = _KINDS_CACHE.get(bits)
        if kinds is None:
            kinds = _kinds(bits)
        return SegmentAnalysis(
            conv.tcp_stream, conv, from_client, rel_seq, rel_ack, window, kinds, dup_num,
            dup_frame, ack_rtt, acked_frame, resent, new_stream,
        )

    def feed_unanalysed(self, seg: TcpSegment, captured: int) -> SegmentAnalysis | None:
        """A TCP header that tshark dissects *without* sequence analysis; returns its stream.

        tshark gives such headers a ``tcp.stream`` (creating a conversation if needed) and
        applies the port-reuse checks, the SYN bookkeeping (most recent SYN time, initial RTT)
        and the window scale option, but no analysis: a header quoted inside an ICMP/ICMPv6
        error, a segment shorter than its header, the first fragment of an IP datagram that
        was never reassembled. ``captured`` is the number of TCP header bytes available
        (``seg.options`` holds the captured option bytes). Returns None when fewer than 16
        bytes are there (tshark stops before the stream lookup). The result has the raw
        ``seq``/``ack``/window (as tshark shows them there), no flags other than
        ``reused_ports``, and must not be counted as a segment of the connection.
        """
        if captured < 16:
            return None
        src = seg.src
        sport = seg.sport
        conv = self._table.get((src, sport, seg.dst, seg.dport))
        flags = seg.flags
        seq = seg.seq & _M32
        new_stream = False
        bits = 0
        if conv is None:
            conv = self._new_conv(seg)
            new_stream = True
        if sport == conv.client_port and src == conv.client_addr:
            from_client, fwd, rev = True, conv.c2s, conv.s2c
        else:
            from_client, fwd, rev = False, conv.s2c, conv.c2s
        syn = flags & SYN
        if syn and fwd.base_set:
            if not flags & ACK:
                if seq != fwd.base_seq:
                    conv = self._new_conv(seg)
                    new_stream, bits, from_client = True, _REUSED, True
                    fwd, rev = conv.c2s, conv.s2c
                else:
                    fwd.nextseq = fwd.maxseqtobeacked
            elif seq != fwd.base_seq:
                fwd.base_seq = seq
                bits = _REUSED
        result = SegmentAnalysis(
            conv.tcp_stream, conv, from_client, seq, seg.ack & _M32 if flags & ACK else None,
            seg.window, _kinds(bits), None, None, None, None, 0, new_stream,
        )
        if seg.header_len < 20 or captured < 20:
            return result
        if syn:
            if not flags & ACK:
                conv.ts_mru_syn = seg.ts_ns
            fwd.is_first_ack = True
        if flags & (SYN | ACK) == ACK:
            if conv.ts_mru_syn and not conv.irtt_ns:
                irtt = seg.ts_ns - conv.ts_mru_syn
                if irtt:
                    conv.irtt_ns = irtt
            fwd.is_first_ack = False
        opt_len = seg.header_len - 20
        truncated = False
        if opt_len:
            opts = seg.options[: max(captured - 20, 0)]
            shift, truncated = _parse_wscale(opts, opt_len)
            if shift is not None:
                fwd.win_scale = shift
        if syn and not truncated:
            self._verify_window_scaling(fwd, rev, bool(flags & ACK))
        return result

    @staticmethod
    def _verify_window_scaling(fwd: TcpDirection, rev: TcpDirection, is_synack: bool) -> None:
        """tshark's verify_tcp_window_scaling(): a SYN / SYN-ACK without the option disables it."""
        if fwd.win_scale == -1:
            fwd.win_scale = -2
            rev.win_scale = -2
        elif is_synack and rev.win_scale == -2:
            fwd.win_scale = -2
