"""A Zeek-shaped connection log: one row per connection as Zeek would log it (``conn.log``).

``connections`` has one row per Wireshark ``tcp.stream``. Zeek draws connection boundaries
differently, and its ``conn_state`` / ``history`` are only comparable with Zeek's own when its
boundaries are used. :func:`conn_log` replays every TCP segment of the ``packets`` table through
Zeek's rules and returns one row per Zeek connection, each with the ``tcp_stream`` of the
Wireshark connection it came from. The rules, with the Zeek source they follow (zeek/zeek,
BSD licensed; paths relative to its repository):

Connection boundaries
    * **A SYN starts a new connection** when the 4-tuple's connection has closed or reset, or
      when it is a SYN with a new initial sequence number on an open one
      (``TCPSessionAdapter::IsReuse``, ``src/packet_analysis/protocol/tcp/
      TCPSessionAdapter.cc``: a SYN-ACK only when the originator sent nothing; the same SYN
      again is not a reuse). Three refused attempts on one 4-tuple are three ``REJ`` rows.
    * **An unanswered attempt ends** ``attempt_delay_s`` after its SYN when the responder
      sent nothing (``TCPSessionAdapter::AttemptTimer``; ``tcp_attempt_delay = 5 secs`` in
      ``scripts/base/init-bare.zeek``): the next packet of the 4-tuple starts a new connection.
    * **A closed connection ends** ``close_delay_s`` after the packet that completed the close
      (both sides closed, or a side closed while the other sent nothing;
      ``TCPSessionAdapter::UpdateResetState`` + ``ConnDeleteTimer``, ``tcp_close_delay = 5
      secs``), and ``close_delay_s`` after a RST (``ResetTimer``, ``tcp_reset_delay = 5 secs``).
    * **An idle connection ends** after ``inactivity_timeout_s`` without a packet
      (``tcp_inactivity_timeout = 5 min``, ``Connection::InactivityTimer`` in ``src/Conn.cc``).
    * Timers are checked when the 4-tuple's next packet arrives, with the state after the
      packet before it, which is what Zeek's timer manager (advanced by network time) sees.

Roles (``^``)
    * The originator is the sender of the connection's first packet, unless that packet is not
      a pure SYN and its source port is a likely server port (``TCPAnalyzer::WantConnection``,
      ``src/packet_analysis/protocol/tcp/TCP.cc``): then the roles flip, except when both ports
      are likely server ports and the packet is a SYN-ACK or the source port is the higher one.
      ``likely_server_ports`` defaults to :data:`LIKELY_SERVER_PORTS`, the TCP ports that
      Zeek's ``scripts/base/protocols/*/main.zeek`` register (a ``zeek -b`` run loads fewer).
      A flip at the start logs ``^`` first (``Connection::FlipRoles``, ``src/Conn.cc``).
    * A SYN from the responder while the originator has sent only a SYN-ACK, with the
      sequence number the responder started with, flips the roles (``UpdateInactiveState``,
      the "SYN/SYN-ACK reversal"): ``^`` after the responder's letter.

Letters (see :mod:`pcaptools.tcp.connstate` for the rest)
    * ``T``/``t``: Zeek's sequence-space rule, not tshark's heuristic: a segment with payload
      whose end (sequence number + payload + SYN + FIN) is at or below the highest end seen
      from that side (``update_last_seq`` in ``TCPSessionAdapter.cc``; ignored once the side
      reset, for a SYN/RST jumping more than 2**20, and for a FIN right after the SYN). A FIN
      captured before the data it ends therefore gives ``t`` to that data.
    * ``G``/``g``: content gaps, bytes the peer acknowledged that the capture never saw
      (:class:`pcaptools.tcp.gaps.SeqFollower`, the rule of ``TCP_Reassembler``), only while
      both sides are established (``TCP_Endpoint::Gap``); ``missed_bytes`` counts every gap.
    * ``C``/``c``: a segment whose checksum is bad (``TCPAnalyzer::ValidateChecksum``): Zeek
      drops it, so it changes nothing else and is not counted in ``*_packets``. Needs a load
      with ``check_checksums=True`` (the ``tcp_events`` rows of kind ``bad_checksum``).
    * ``X``: an analysis limit was reached on the connection (``Connection::
      LimitReachedWeird``): here a warnings row of one of :data:`LIMIT_CODES` for its
      ``tcp_stream``, at that row's frame.

Bytes: ``client_bytes`` / ``server_bytes`` are Zeek's ``orig_bytes`` / ``resp_bytes``, taken
from sequence numbers (``TCP_Endpoint::Size``: the highest sequence number sent or
acknowledged minus the first, SYN and FIN excluded), not the sum of payloads.

Needs the ``packets`` table (``load(packets=True)``, the default): ``ValueError`` otherwise. If
the packets table was cut (``max_packet_rows``), connections reaching past its last frame are
marked ``complete = False``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from ..net.packet import ACK, FIN, RST, SYN
from ..tables.schema import TS_DTYPE, Column, TableSchema
from ..tcp.connstate import ConnHistory
from ..tcp.gaps import Gap, SeqFollower

if TYPE_CHECKING:
    from ..result import Capture

__all__ = ["CONN_LOG", "LIKELY_SERVER_PORTS", "LIMIT_CODES", "conn_log"]

#: TCP ports registered by Zeek's base protocol scripts (``scripts/base/protocols/*/main.zeek``
#: ``const ports``/``*_ports``), which make up ``likely_server_ports`` in a default ``zeek`` run
LIKELY_SERVER_PORTS: frozenset[int] = frozenset({
    21, 22, 25, 53, 79, 80, 81, 88, 135, 139, 143, 443, 445, 465, 502, 514, 563, 585, 587,
    614, 631, 636, 989, 990, 992, 993, 995, 1080, 1434, 1883, 2811, 3128, 3306, 3389, 5222,
    5223, 5269, 6379, 6666, 6667, 6668, 6669, 8000, 8080, 8888, 20000,
})

#: warning codes that mean an analysis limit was reached on a connection (Zeek's ``X``)
LIMIT_CODES: frozenset[str] = frozenset({
    "tcp.reassembly_limit", "tcp.loss_holes_limit", "tcp.unacked_limit",
    "table.events_truncated",
})

_TOO_LARGE_SEQ_DELTA = 1048576  # TCPSessionAdapter.cc
_M32 = 0xFFFFFFFF

_END_REASONS = ("eof", "reused", "attempt_timeout", "closed", "reset", "inactivity_timeout")

CONN_LOG = TableSchema(
    name="conn_log",
    grain="one row per connection as Zeek logs it (conn.log): pcaptools.analyses.conn_log(cap) "
    "or cap.conn_log(), not a table of load(); several rows can share a tcp_stream",
    key=("tcp_stream", "part"),
    columns=(
        Column("tcp_stream", "int64", None,
               "Wireshark tcp.stream of the connection's first packet (join with connections for "
               "its handshake, TTL and timeline columns)"),
        Column("part", "int64", None,
               "0, 1, 2... for the Zeek connections cut from one tcp_stream, in capture order"),
        Column("ip_version", "int64", None, "4 or 6"),
        Column("client_addr", "string", None,
               "Zeek's originator (id.orig_h): the first packet's sender unless Zeek's heuristics "
               "flipped the roles"),
        Column("client_port", "int64", None, "id.orig_p"),
        Column("server_addr", "string", None, "Zeek's responder (id.resp_h)"),
        Column("server_port", "int64", None, "id.resp_p"),
        Column("flipped", "bool", None,
               "True when the originator is not the connections table's client of tcp_stream"),
        Column("first_frame", "int64", None, "frame of the connection's first packet"),
        Column("last_frame", "int64", None, "frame of its last packet"),
        Column("first_ts", TS_DTYPE, None, "ts: time of the first packet"),
        Column("last_ts", TS_DTYPE, None, "time of the last packet"),
        Column("duration_ms", "float64", "ms", "duration: last_ts - first_ts"),
        Column("client_packets", "int64", "packets",
               "orig_pkts: packets from the originator (bad-checksum segments not counted, as Zeek"
               " drops them)"),
        Column("server_packets", "int64", "packets", "resp_pkts"),
        Column("client_bytes", "int64", "bytes",
               "orig_bytes: from sequence numbers, as Zeek (TCP_Endpoint::Size), not the sum of "
               "payloads"),
        Column("server_bytes", "int64", "bytes", "resp_bytes"),
        Column("client_wire_bytes", "int64", "bytes",
               "frame.len summed over the originator's packets (Zeek's orig_ip_bytes counts IP "
               "bytes only)"),
        Column("server_wire_bytes", "int64", "bytes",
               "frame.len summed over the responder's packets"),
        Column("missed_bytes", "int64", "bytes",
               "bytes in content gaps (acknowledged but never captured, cut by the snaplen, or "
               "holes left at the end)"),
        Column("conn_state", "category", None,
               "Zeek conn_state: S0 S1 SF REJ S2 S3 RSTO RSTR RSTOS0 RSTRH SH SHR OTH"),
        Column("history", "string", None,
               "Zeek history (originator upper case); T/t by Zeek's sequence rule, C/c bad "
               "checksums, X limits"),
        Column("bad_checksums", "int64", "segments",
               "segments dropped for a bad checksum (0 unless loaded with check_checksums=True)"),
        Column("end_reason", "category", None,
               "eof (open at the end of the capture), reused (a new SYN started the next "
               "connection), attempt_timeout, closed (tcp_close_delay after the close), reset "
               "(tcp_reset_delay after a RST), inactivity_timeout"),
        Column("complete", "bool", None,
               "False when the packets table was cut (max_packet_rows) before the connection's "
               "end"),
    ),
)


class _Ep:
    """One endpoint's sequence state (TCP_Endpoint: start_seq, last_seq, ack_seq), unwrapped."""

    __slots__ = ("ack", "did_close", "fin_cnt", "last", "start")

    def __init__(self) -> None:
        self.start: int | None = None
        self.last = 0
        self.ack = 0
        self.fin_cnt = 0
        self.did_close = False


def _unwrap(ref: int, raw: int) -> int:
    d = (raw - ref) & _M32
    if d >= 0x80000000:
        d -= 0x100000000
    return ref + d


class _ZConn:
    __slots__ = ("attempt_at", "bad", "close_at", "end_reason", "eps", "first_frame", "first_ts",
                 "follow", "hi", "hist", "ip_version", "last_frame", "last_ts", "missed", "orig",
                 "pkts", "resp", "tcp_stream", "wire")

    def __init__(self, orig: tuple[str, int], resp: tuple[str, int], tcp_stream: int,
                 frame: int, ts: int, ip_version: int) -> None:
        self.orig = orig
        self.resp = resp
        self.ip_version = ip_version
        self.tcp_stream = tcp_stream
        self.first_frame = self.last_frame = frame
        self.first_ts = self.last_ts = ts
        self.hist = ConnHistory()
        self.eps = (_Ep(), _Ep())
        self.follow = SeqFollower()
        self.hi = [-1, -1]
        self.pkts = [0, 0]
        self.wire = [0, 0]
        self.bad = 0
        self.missed = 0
        self.attempt_at: int | None = None
        self.close_at: int | None = None
        self.end_reason = "eof"

    def states(self) -> tuple[str, str]:
        return self.hist.orig_state, self.hist.resp_state

    def expired(self, ts: int, inactivity_ns: int) -> str | None:
        """Which timer removed the connection before a packet at ``ts`` (None: none)."""
        o, r = self.states()
        if self.attempt_at is not None and ts >= self.attempt_at \
                and o in ("SYN_SENT", "SYN_ACK_SENT") and r == "INACTIVE":
            return "attempt_timeout"
        if self.close_at is not None and ts >= self.close_at:
            return "reset" if "RESET" in (o, r) else "closed"
        if inactivity_ns > 0 and ts - self.last_ts >= inactivity_ns:
            return "inactivity_timeout"
        return None

    def is_reuse(self, flags: int, seq: int) -> bool:
        """TCPSessionAdapter::IsReuse for a packet of this 4-tuple."""
        if not flags & SYN:
            return False
        o, r = self.states()
        conn_orig = self.eps[0]
        if flags & ACK:
            if o != "INACTIVE":
                return False
            conn_orig = self.eps[1]
        if not (self.eps[0].did_close or self.eps[1].did_close):
            if conn_orig.start is not None and (seq & _M32) == (conn_orig.start & _M32):
                return False
            rs = self.eps[1].start
            if not flags & ACK and o == "SYN_ACK_SENT" and r == "INACTIVE" \
                    and rs is not None and (seq & _M32) == (rs & _M32):
                return False
        return True


def conn_log(
    cap: Capture,
    *,
    attempt_delay_s: float = 5.0,
    inactivity_timeout_s: float = 300.0,
    close_delay_s: float = 5.0,
    check_checksums: bool | None = None,
    likely_server_ports: frozenset[int] | set[int] | None = None,
) -> pd.DataFrame:
    """One row per Zeek connection of the capture's TCP segments (schema ``CONN_LOG``).

    ``attempt_delay_s``: Zeek's ``tcp_attempt_delay`` (0: attempts never time out);
    ``inactivity_timeout_s``: ``tcp_inactivity_timeout`` (0: never); ``close_delay_s``:
    ``tcp_close_delay`` and ``tcp_reset_delay``; ``check_checksums``: None applies the bad
    checksums the load found (none unless ``load(check_checksums=True)``), False ignores them
    (``zeek -C``), True requires a load that validated them (``ValueError`` otherwise);
    ``likely_server_ports``: defaults to :data:`LIKELY_SERVER_PORTS`. Raises ``ValueError``
    when the capture has TCP connections but no ``packets`` table. See the module docstring
    for every rule and the Zeek source it follows.
    """
    pk = cap.packets
    conns = cap.connections
    if len(pk) == 0:
        if len(conns):
            raise ValueError("conn_log needs the packets table: load(..., packets=True)")
        return CONN_LOG.frame([])
    validated = "tcp_checksums" in cap.summary.extra
    if check_checksums and not validated:
        raise ValueError("conn_log(check_checksums=True) needs load(..., check_checksums=True)")
    use_bad = validated if check_checksums is None else check_checksums
    ports = LIKELY_SERVER_PORTS if likely_server_ports is None else frozenset(likely_server_ports)
    tcp = pk[(pk["ip_proto"] == 6) & pk["tcp_flags"].notna()]
    bad: set[int] = set()
    if use_bad:
        ev = cap.tcp_events
        bad = set(ev.loc[ev["kind"] == "bad_checksum", "frame"].tolist())
    limits: dict[int, int] = {}
    w = cap.warnings
    if len(w):
        lw = w[w["code"].isin(LIMIT_CODES) & w["tcp_stream"].notna()]
        for st, fr in zip(lw["tcp_stream"].tolist(), lw["frame"].tolist(), strict=True):
            if fr is not None and not pd.isna(fr) and (st not in limits or fr < limits[st]):
                limits[int(st)] = int(fr)
    last_pk_frame = int(pk["frame"].iloc[-1])
    truncated = bool(len(w)) and bool((w["code"] == "table.packets_truncated").any())
    clients = {}
    if len(conns):
        clients = dict(zip(conns["tcp_stream"].tolist(),
                           zip(conns["client_addr"].tolist(), conns["client_port"].tolist(),
                               strict=True), strict=True))
    cols = [tcp[c].to_numpy() for c in ("frame", "sport", "dport", "tcp_stream", "tcp_flags",
                                        "seq_raw", "ack_raw", "tcp_len", "window", "frame_len",
                                        "cap_len", "ip_version")]
    ts_ns = pd.DatetimeIndex(tcp["ts"]).asi8
    src = tcp["src"].astype(str).to_numpy()
    dst = tcp["dst"].astype(str).to_numpy()
    attempt_ns = int(attempt_delay_s * 1e9)
    inact_ns = int(inactivity_timeout_s * 1e9)
    close_ns = int(close_delay_s * 1e9)
    active: dict[tuple[Any, ...], _ZConn] = {}
    done: list[_ZConn] = []
    limit_done: set[int] = set()
    gaps: list[Gap] = []
    for i in range(len(ts_ns)):
        frame = int(cols[0][i])
        sport, dport = int(cols[1][i]), int(cols[2][i])
        stream, flags = int(cols[3][i]), int(cols[4][i])
        seq = int(cols[5][i])
        ack_v = cols[6][i]
        ack = None if pd.isna(ack_v) else int(ack_v)
        seg_len = int(cols[7][i])
        win = cols[8][i]
        frame_len, cap_len = int(cols[9][i]), int(cols[10][i])
        ts = int(ts_ns[i])
        a, b = (src[i], sport), (dst[i], dport)
        key = (a, b) if a <= b else (b, a)
        zc = active.get(key)
        if zc is not None:
            why = zc.expired(ts, inact_ns)
            if why is None and zc.is_reuse(flags, seq):
                why = "reused"
            if why is not None:
                zc.end_reason = why
                done.append(zc)
                zc = None
        if zc is None:
            flip = False
            if (not flags & SYN or flags & ACK) and sport in ports:  # WantConnection
                flip = (not flags & SYN and sport < dport) if dport in ports else True
            zc = active[key] = _ZConn(b if flip else a, a if flip else b, stream, frame, ts,
                                      int(cols[11][i]))
        from_orig = a == zc.orig
        d = 0 if from_orig else 1
        zc.last_frame, zc.last_ts = frame, ts
        hist = zc.hist
        if frame in bad:
            zc.bad += 1
            hist.packet(from_orig, flags, seg_len, bad_checksum=True)
            continue
        zc.pkts[d] += 1
        zc.wire[d] += frame_len
        ep, peer = zc.eps[d], zc.eps[1 - d]
        syn, fin, rst = flags & SYN != 0, flags & FIN != 0, flags & RST != 0
        o_state, r_state = zc.states()
        my_state = o_state if from_orig else r_state
        # init_endpoint (sequence numbers of this side)
        one_past_len = seg_len + syn + fin
        if ep.start is None:
            if syn:
                ep.start = ep.ack = seq
                ep.last = seq + one_past_len
            else:
                ep.start = ep.ack = seq - 1
                ep.last = seq
        elif syn and my_state in ("SYN_SENT", "SYN_ACK_SENT", "ESTABLISHED", "PARTIAL") \
                and (seq & _M32) != (ep.start & _M32):
            ep.start = ep.ack = _unwrap(ep.start, seq)
            ep.last = ep.start + one_past_len
        useq = _unwrap(ep.last, seq)
        one_past = useq + one_past_len
        # update_ack_seq (the peer's ack_seq), not from RSTs
        if flags & ACK and ack is not None and not rst and peer.start is not None:
            uack = _unwrap(peer.ack, ack)
            if uack > peer.ack:
                peer.ack = uack
        # update_last_seq: Zeek's retransmission rule
        rxmit = False
        delta = one_past - ep.last
        if (syn or rst) and abs(delta) > _TOO_LARGE_SEQ_DELTA:
            pass
        elif fin and ep.last == ep.start + 1:
            ep.last = one_past
        elif my_state == "RESET":
            pass
        elif delta > 0:
            ep.last = one_past
        elif seg_len > 0:
            rxmit = True
        if fin:
            ep.fin_cnt += 1
        reversal = (not from_orig and syn and not flags & ACK and o_state == "SYN_ACK_SENT"
                    and r_state == "INACTIVE")
        if from_orig and syn and not flags & ACK and o_state == "INACTIVE" and attempt_ns > 0:
            zc.attempt_at = ts + attempt_ns
        hist.packet(from_orig, flags, seg_len, retransmission=rxmit,
                    zero_window=not pd.isna(win) and int(win) == 0, seq=seq)
        if reversal:
            hist.flip_roles()
            zc.orig, zc.resp = a, b
            zc.eps = (zc.eps[1], zc.eps[0])
            zc.pkts.reverse()
            zc.wire.reverse()
            zc.follow.dirs = (zc.follow.dirs[1], zc.follow.dirs[0])
            zc.hi.reverse()
            from_orig, d = True, 0
        if (fin or rst) and not ep.did_close:  # UpdateResetState
            ep.did_close = True
            o2, r2 = zc.states()
            mine, theirs = (o2, r2) if from_orig else (r2, o2)
            if zc.close_at is None and (mine == "RESET" or peer.did_close or theirs == "INACTIVE"):
                zc.close_at = ts + close_ns
        if rst and zc.close_at is None:
            zc.close_at = ts + close_ns
        # content gaps (TCP_Reassembler), in this Zeek connection's own sequence space
        if not rst:
            hi = zc.hi
            if seg_len or syn or fin:
                hi[d] = s_un = _unwrap(hi[d], seq) if hi[d] >= 0 else seq
                captured = max(0, seg_len - max(0, frame_len - cap_len))
                zc.follow.segment(d, s_un, seg_len, captured, syn, fin, gaps)
            if flags & ACK and ack is not None and hi[1 - d] >= 0:
                zc.follow.acked(1 - d, _unwrap(hi[1 - d], ack), gaps)
            if gaps:
                for x, _off, n, reason in gaps:
                    zc.missed += n
                    if reason in ("acked", "snaplen"):
                        hist.content_gap(x == 0)
                gaps.clear()
        lim = limits.get(stream)
        if lim is not None and frame >= lim and stream not in limit_done:
            limit_done.add(stream)
            hist.analysis_limit()
    done.extend(active.values())
    done.sort(key=lambda z: z.first_frame)
    rows: list[tuple[object, ...]] = []
    parts: dict[int, int] = {}
    for zc in done:
        zc.follow.finish(gaps)
        zc.missed += sum(g[2] for g in gaps)
        gaps.clear()
        (oa, op) = zc.orig
        part = parts.get(zc.tcp_stream, 0)
        parts[zc.tcp_stream] = part + 1
        client = clients.get(zc.tcp_stream)
        flipped = client is not None and (client[0], int(client[1])) != (oa, op)
        rows.append((
            zc.tcp_stream, part, zc.ip_version, oa, op, zc.resp[0], zc.resp[1], flipped,
            zc.first_frame, zc.last_frame, zc.first_ts, zc.last_ts,
            (zc.last_ts - zc.first_ts) / 1e6, zc.pkts[0], zc.pkts[1],
            _size(zc.eps[0], zc.eps[1], zc.hist.orig_state, zc.hist.resp_state, True),
            _size(zc.eps[1], zc.eps[0], zc.hist.resp_state, zc.hist.orig_state, False),
            zc.wire[0], zc.wire[1], zc.missed, zc.hist.conn_state(), zc.hist.history, zc.bad,
            zc.end_reason, not (truncated and zc.last_frame >= last_pk_frame),
        ))
    return CONN_LOG.frame(rows)


def _size(ep: _Ep, peer: _Ep, state: str, peer_state: str, _orig: bool) -> int:
    """TCP_Endpoint::Size (src/analyzer/protocol/tcp/TCP_Endpoint.cc)."""
    if ep.start is None:
        return 0
    # (prev_state SYN_SENT, now RESET, peer INACTIVE: a half-open connection aborted)
    if state == "RESET" and peer_state == "INACTIVE" and ep.ack == ep.start:
        return 0
    top = ep.last if ep.last > ep.ack else ep.ack
    size = top - ep.start
    if size != 0:
        size -= 1
    if ep.fin_cnt > 0 and size != 0:
        size -= 1
    return max(size, 0)
