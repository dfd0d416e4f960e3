"""Why did a connection end badly? Silent-disconnect verdicts from a capture's tables.

:func:`disconnects` is a pure function of ``Capture`` tables (``connections`` with its
timeline columns, ``tcp_handshakes``, ``tcp_events``, ``ws_connections``, the heartbeats of
:mod:`pcaptools.analyses.heartbeats` when present, ``http2_frames``, ``http_requests``,
``tls_handshakes``): one row per TCP connection that did not end cleanly, with a verdict, the
side it is about, a timeline and the frames to look at. Its columns are documented by
:data:`DISCONNECTS` (``docs/tables.md``). It works with ``load(packets=False)``: nothing here
needs the per-frame table.

Verdicts, in the order they are tried (the first that matches is ``verdict``; every one that
matches is listed in ``signals``); ``peer`` is the side the verdict is about and the other side
is "the sender":

- ``refused``: the SYN was answered by RST (peer: server).
- ``syn_unanswered``: SYNs were sent and never answered (peer: server).
- ``pmtu_black_hole``: segments larger than any the sender ever got acknowledged (and
  larger than 536 bytes, which every IPv4 path carries) were retransmitted at least
  ``pmtu_min_retransmissions`` times, while smaller packets got through (the handshake
  completed, or smaller segments were acknowledged) and the peer was still heard after the
  first of those retransmissions (or a too-big ICMP error for the connection arrived), and
  the sender still had unacknowledged data at the end. With or without ICMP "fragmentation
  needed" / "packet too big" (``icmp_errors``): without, it was dropped on the way (or the
  capture could not see it); with, the sender ignored it. The peer is the side the large
  segments never reached. Seen only where the sender's retransmissions are visible: at the
  receiver the large segments never show up at all. When the sender did lower its segment
  size and got through, ``Capture.path_mtu`` has a row instead (and no verdict here).
- ``peer_vanished`` (black hole): after the peer's last packet the sender retransmitted at
  least ``min_retransmissions`` times and nothing ever came back. ``last_peer_ts`` estimates
  when the path died (the peer's last packet; when the capture holds none, the sender's first
  segment that was never acknowledged), ``noticed_*`` is when the sender gave up (its RST or
  FIN after that, else the end of the capture), ``backoff_ratio`` the median growth of the
  gaps between those retransmissions (about 2 for TCP's exponential RTO backoff).
- ``idle_then_reset``: a silence of at least ``idle_gap_s`` (no packet either way) ended at
  most ``reset_window_s`` before a RST (peer: the RST's sender). This is the classic NAT /
  load-balancer / firewall idle timeout: the first packet after the silence draws a RST.
- ``unanswered_heartbeats``: the sender's last heartbeats (WebSocket Ping, HTTP/2 PING, TCP
  keep-alive) got no answer although the connection lasted at least ``heartbeat_grace``
  seconds after them (a ping answered later, or superseded by a later answered ping, does
  not count; for TCP keep-alives any packet from the peer after the probe is an answer).
- ``abortive_close_after_ws_close``: a WebSocket Close frame was sent, and then a RST from a
  side that had not sent a FIN (peer: the RST's sender) instead of a TCP close.
- ``ws_no_close_frame``: a WebSocket connection whose TCP connection ended (FIN or RST)
  without any Close frame: what browsers report as 1006 (peer: the side that closed TCP
  first).
- ``zero_window_stall``: the peer's last packet advertised a zero receive window (its
  application stopped reading) and it stayed closed for at least ``heartbeat_grace`` to the
  end of the connection or capture.
- ``half_open_at_eof``: no RST, not closed by both sides, and at the end of the capture the
  sender had a segment (data or FIN) unacknowledged for at least ``heartbeat_grace``, with
  fewer retransmissions than ``peer_vanished`` needs (peer: the side not acknowledging).
- ``reset``: any other RST ending (peer: the RST's sender).
- ``one_sided_fin`` (Zeek S2/S3): one side sent FIN, the other neither FIN nor RST, and the
  capture went on for at least ``fin_grace_s`` after that FIN (peer: the side that did not
  answer the FIN).

Clean endings get no row: both sides sent FIN (a RST after that is ignored, as in
``connections.end_reason``) and, for a WebSocket, at least one Close frame was sent. Connections
still open at the end of the capture without any finding (or closing: a lone FIN less than
``fin_grace_s`` before the end) get no row either. Both are counted in the result's ``attrs``:
``clean_connections``, ``open_connections``, ``connections`` (all), ``verdicts`` (rows by
verdict) and ``parameters``.

**QUIC** (``quic=True``; from
``quic_connections``, ``quic_packets`` and the QUIC PING heartbeats of ``quic_frames``): one
row per QUIC connection that did not end cleanly, keyed by ``quic_connection`` (``tcp_stream``
NA, ``transport`` quic). Verdicts, in the order they are tried:

- ``handshake_incomplete``: the client's first Initial was captured and neither a
  HANDSHAKE_DONE (decrypted) nor a 1-RTT packet from the client (it sends one only once it
  has the server's Finished) followed, and the connection ended or the capture went on for
  ``heartbeat_grace`` after its last packet (peer: the server when it never answered, the
  side that sent a CONNECTION_CLOSE during the handshake, e.g. CRYPTO_ERROR
  (no_application_protocol) for an ALPN it refused, else the side that fell silent first).
- ``stateless_reset``: a datagram ended in a stateless reset token the receiver had been
  given (``quic_packets.status`` stateless_reset, RFC 9000 §10.3): the peer (its sender) had
  no state for the connection: restarted, or the packets reached another server.
- ``close_transport_error`` / ``close_application_error``: the first CONNECTION_CLOSE (0x1c /
  0x1d) carries an error code (peer: its sender; ``close_error_code``, ``close_error`` and
  ``close_reason``). Transport NO_ERROR (0x0), application 0x0 and, for HTTP/3, H3_NO_ERROR
  (0x100) are clean closes (aioquic closes its HTTP/3 connections with application code 0).
- ``peer_vanished``: after the peer's last packet the sender sent at least
  ``min_retransmissions`` more datagrams (its PTO probes, with the backoff in
  ``backoff_ratio``: about 2) and nothing came back; ``noticed_how`` close_sent (it closed),
  gave_up (it fell silent for ``heartbeat_grace`` before the end: its idle timeout), or eof.
- ``idle_timeout``: no CONNECTION_CLOSE nor stateless reset, and no packet either way for
  longer than the idle timeout (``idle_timeout_ms``: the smaller non-zero max_idle_timeout of
  the two sides, RFC 9000 §10.1) before the end of the capture: both ends dropped the
  connection silently. Needs decrypted 1-RTT packets (``quic_connections.end`` idle_timeout):
  without them a CONNECTION_CLOSE would not show.
- ``unanswered_heartbeats``: QUIC PINGs of the sender that no ACK answered although the
  connection lasted ``heartbeat_grace`` after them.

The QUIC connections that get no row are counted in ``attrs``: ``quic_clean_connections``
(a clean CONNECTION_CLOSE), ``quic_open_connections`` (still open at the end of the capture,
within its idle timeout; like TCP's open connections, no row) and
``quic_unknown_connections`` (packets not decrypted: how they ended cannot be seen, so no
verdict is guessed), with ``quic_connections`` (all).

``middlebox_hint``: for verdicts that involve a RST, set when the RST's IP TTL is outside the
range of TTLs its supposed sender used on its other packets, or (IPv4) when the RST's IP ID is
non-zero and is not a plausible continuation (within 1024 after) of that side's last IP ID.
Kernels send RSTs of dead sockets with IP ID 0, and Linux continues the socket's IP ID
sequence in the RST of a live socket, so neither is flagged. A hint is a hint: a RST from a
middlebox that copies the server's TTL and ID looks exactly like the server's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..protocols.http3.frames import error_name as h3_error_name
from ..protocols.quic.frames import transport_error_name
from ..tables.schema import TS_DTYPE, Column, TableSchema
from ..tcp.analysis import RETRANSMISSION_KINDS
from ._format import fmt_ms
from .heartbeats import heartbeats
from .overhead import protocol_stacks

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = ["DISCONNECTS", "QUIC_VERDICTS", "VERDICTS", "DisconnectsFrame", "disconnects"]

#: the verdicts of QUIC connections, in the order they are tried (peer_vanished and
#: unanswered_heartbeats are TCP's too, with QUIC rules)
QUIC_VERDICTS: tuple[str, ...] = (
    "handshake_incomplete",
    "stateless_reset",
    "close_transport_error",
    "close_application_error",
    "peer_vanished",
    "idle_timeout",
    "unanswered_heartbeats",
)

#: the TCP verdicts in the order they are tried (QUIC's: QUIC_VERDICTS)
VERDICTS: tuple[str, ...] = (
    "refused",
    "syn_unanswered",
    "pmtu_black_hole",
    "peer_vanished",
    "idle_then_reset",
    "unanswered_heartbeats",
    "abortive_close_after_ws_close",
    "ws_no_close_frame",
    "zero_window_stall",
    "half_open_at_eof",
    "reset",
    "one_sided_fin",
)

DISCONNECTS = TableSchema(
    name="disconnects",
    grain="one row per TCP connection (and, with quic=True, per QUIC connection) that did not "
    "end cleanly: pcaptools.analyses.disconnects(cap), not a Capture attribute (clean and "
    "still-open connections are counted in .attrs)",
    key=("tcp_stream", "quic_connection"),
    columns=(
        Column("tcp_stream", "Int64", None,
               "Wireshark tcp.stream of the connection; NA on QUIC rows"),
        Column("quic_connection", "Int64", None,
               "quic_connections.quic_connection (tshark quic.connection.number); NA on TCP "
               "rows"),
        Column("transport", "category", None, "tcp or quic"),
        Column("client", "string", None, "client address:port ([v6]:port)"),
        Column("server", "string", None, "server address:port"),
        Column(
            "protocol",
            "category",
            None,
            "layers the tables saw, '/'-joined: tls, http1, http2, websocket (e.g. "
            "tls/http1/websocket); tcp when none; quic, or quic/<ALPN> (quic/h3)",
        ),
        Column(
            "verdict",
            "category",
            None,
            "refused, syn_unanswered, pmtu_black_hole, peer_vanished, idle_then_reset, "
            "unanswered_heartbeats, "
            "abortive_close_after_ws_close, ws_no_close_frame, zero_window_stall, "
            "half_open_at_eof, reset, one_sided_fin; QUIC: handshake_incomplete, "
            "stateless_reset, close_transport_error, close_application_error, peer_vanished, "
            "idle_timeout, unanswered_heartbeats (module docstring: exact rules)",
        ),
        Column(
            "signals",
            "string",
            None,
            "every verdict whose rule matched, comma-separated, in priority order (the first is "
            "verdict)",
        ),
        Column(
            "peer",
            "category",
            None,
            "client or server: the side the verdict is about (vanished, did not answer, sent "
            "the RST, closed TCP without a Close frame, stopped reading, did not answer the FIN)",
        ),
        Column(
            "closed_by",
            "category",
            None,
            "client or server: sender of the first RST, else of the first FIN; NA if neither "
            "(QUIC: of the first CONNECTION_CLOSE or stateless reset)",
        ),
        Column("end_reason", "category", None,
               "connections.end_reason (QUIC: quic_connections.end)"),
        Column("conn_state", "category", None, "connections.conn_state (Zeek); NA for QUIC"),
        Column("summary", "string", None, "one plain-English sentence"),
        Column(
            "last_peer_frame",
            "Int64",
            None,
            "last packet from the peer (RSTs excluded, except for peer_vanished where a RST "
            "is life too): for peer_vanished the estimated death of the path; NA if the peer "
            "sent nothing",
        ),
        Column("last_peer_ts", TS_DTYPE, None, "time of last_peer_frame"),
        Column(
            "first_unanswered_frame",
            "Int64",
            None,
            "oldest segment of the sender never acknowledged by the end of the capture "
            "(connections.<sender>_unacked_frame)",
        ),
        Column("first_unanswered_ts", TS_DTYPE, None, "time of first_unanswered_frame"),
        Column(
            "noticed_frame",
            "Int64",
            None,
            "when the sender learned or acted: its RST or FIN (peer_vanished, "
            "unanswered_heartbeats, half_open_at_eof), the peer's RST or FIN (resets, "
            "ws_no_close_frame); NA for the end of the capture",
        ),
        Column(
            "noticed_ts",
            TS_DTYPE,
            None,
            "time of noticed_frame, or of the capture's last packet for eof",
        ),
        Column(
            "noticed_how",
            "category",
            None,
            "rst_sent, fin_sent (by the sender), rst_received, fin_received (from the peer), "
            "icmp_received (an ICMP error answered the SYN), eof; QUIC: close_sent, "
            "close_received (CONNECTION_CLOSE), reset_received (stateless reset), gave_up "
            "(the sender fell silent: noticed_frame is its last packet), idle_timeout (the "
            "negotiated idle timeout after the last packet: noticed_frame NA)",
        ),
        Column(
            "detection_delay_ms",
            "float64",
            "ms",
            "noticed_ts minus last_peer_ts (first_unanswered_ts when the peer sent nothing): "
            "how long the sender lived with a dead connection",
        ),
        Column(
            "retransmissions_after_peer",
            "int64",
            "segments",
            "the sender's retransmissions (tcp.analysis.retransmission) after last_peer_ts",
        ),
        Column(
            "backoff_ratio",
            "float64",
            None,
            "median ratio of consecutive gaps between those retransmissions (about 2 for "
            "exponential RTO backoff); NaN with fewer than 3",
        ),
        Column(
            "idle_gap_ms",
            "float64",
            "ms",
            "idle_then_reset: the silence before the RST; otherwise the connection's longest "
            "silence up to the first RST (connections.max_idle_ms); QUIC: the silence from "
            "the last packet to the end of the capture",
        ),
        Column(
            "heartbeats_unanswered",
            "int64",
            "pings",
            "heartbeats of the sender that got no answer (not superseded, connection lasted "
            "at least heartbeat_grace after them)",
        ),
        Column(
            "heartbeat_mechanisms",
            "string",
            None,
            "mechanisms of those heartbeats: websocket, http2, tcp_keepalive, quic_ping",
        ),
        Column(
            "ws_close_by",
            "category",
            None,
            "WebSocket: who sent the first Close frame (ws_connections.close_by)",
        ),
        Column("ws_close_frame", "Int64", None, "WebSocket: packet of the first Close frame"),
        Column("ws_close_code", "Int64", None, "WebSocket: status code of that Close frame"),
        Column("rst_frame", "Int64", None, "first RST of the connection"),
        Column(
            "middlebox_hint",
            "string",
            None,
            "why the RST may not come from the host it claims (TTL or IP ID unlike that "
            "host's other packets); NA when nothing points that way",
        ),
        Column(
            "evidence_frames", "object", None, "frame numbers to look at (list of int, ascending)"
        ),
        Column(
            "display_filter",
            "string",
            None,
            "Wireshark display filter for the end of the connection, e.g. "
            "tcp.stream eq 4 && frame.number >= 120 (QUIC: quic.connection.number eq 0 && ...)",
        ),
        Column(
            "idle_timeout_ms",
            "Int64",
            "ms",
            "QUIC: the connection's idle timeout, the smaller non-zero max_idle_timeout of the "
            "two sides' transport parameters (RFC 9000 §10.1; the client's alone when the "
            "server's was not decrypted); NA when neither announced one, and on TCP rows",
        ),
        Column(
            "close_error_code",
            "Int64",
            None,
            "QUIC: error code of the first CONNECTION_CLOSE (transport: RFC 9000 §20.1; "
            "application: HTTP/3's, RFC 9114 §8.1)",
        ),
        Column(
            "close_error",
            "string",
            None,
            "QUIC: its name (PROTOCOL_VIOLATION, CRYPTO_ERROR(alert 40), H3_INTERNAL_ERROR, "
            "0x..)",
        ),
        Column(
            "close_reason",
            "string",
            None,
            "QUIC: its reason phrase (quic_connections.close_reason: from the capture, "
            "untrusted text)",
            secret="text",
        ),
    ),
)

_NS = 1_000_000_000
_NAT = np.iinfo(np.int64).min


@dataclass(slots=True)
class _Conn:
    """The facts of one connection the rules use (times in ns, None when unknown)."""

    stream: int
    client: str
    server: str
    end_reason: str | None
    conn_state: str | None
    first_frame: int
    last_frame: int
    last_ts: int
    dir_last: list[tuple[int, int] | None]
    fin: list[tuple[int, int] | None]
    rst: tuple[int, int] | None
    rst_by: int | None
    rst_ttl: int | None
    rst_ip_id: int | None
    ttl_range: list[tuple[int, int] | None]
    ip_id: list[int | None]
    ip_id_sequential: list[bool]
    packets: list[int]
    max_idle: tuple[float, int | None, int | None, int | None]
    last_idle: tuple[float, int | None, int | None, int | None] | None
    unacked: list[tuple[int, int] | None]
    max_acked: list[int] = field(default_factory=lambda: [0, 0])
    """largest segment of each side that was acknowledged (connections.*_max_acked_seg_bytes)"""


@dataclass(slots=True)
class _Finding:
    verdict: str
    peer: int | None
    summary: str = ""
    last_peer: tuple[int, int] | None = None
    first_unanswered: tuple[int, int] | None = None
    noticed: tuple[int | None, int, str] | None = None
    retx_after: int = 0
    backoff: float = float("nan")
    idle_gap_ms: float | None = None
    hb_unanswered: int = 0
    hb_mechanisms: str | None = None
    evidence: list[int] = field(default_factory=list)
    filter_from: int | None = None
    since: tuple[int, int] | None = None
    """start of the trouble for detection_delay_ms when it is not last_peer / first_unanswered"""


def disconnects(
    cap: Capture,
    *,
    idle_gap_s: float = 30.0,
    min_retransmissions: int = 3,
    heartbeat_grace: float = 2.0,
    reset_window_s: float = 5.0,
    fin_grace_s: float = 1.0,
    pmtu_min_retransmissions: int = 2,
    quic: bool = False,
    tcp: bool = True,
) -> pd.DataFrame:
    """One row per connection of ``cap`` that did not end cleanly (schema :data:`DISCONNECTS`),
    ordered by tcp_stream, then (``quic=True``) by quic_connection; the rules are in the
    module docstring.

    ``idle_gap_s``: a silence this long before a RST makes it ``idle_then_reset``. The 30 s
    default sits below common idle timeouts (AWS ALB and nginx ``proxy_read_timeout`` 60 s,
    many NATs and firewalls minutes) and above common WebSocket heartbeat intervals (20-30 s):
    a longer silence means no heartbeat was running. Lower it to match a known timeout.
    ``min_retransmissions``: retransmissions after the peer's last packet that make a
    ``peer_vanished`` verdict (3: with the minimum 200 ms RTO and backoff, about 1.4 s of
    silence; fewer can be ordinary loss). ``heartbeat_grace``: seconds an answer may take (a
    pong, a PING ACK, an ACK of data, a packet after a keep-alive) before its absence counts.
    ``reset_window_s``: how soon after the silence the RST must come to be ``idle_then_reset``.
    ``fin_grace_s``: a lone FIN this close to the end of the capture is a close in progress,
    not ``one_sided_fin``. ``pmtu_min_retransmissions``: retransmissions of too-large
    segments that make a ``pmtu_black_hole`` (2: one retransmission is ordinary loss).

    ``quic``: QUIC connections get rows too (off by default so that callers reading every
    row as a TCP connection, like the report's Disconnects section, keep doing so).
    ``tcp=False`` (with ``quic=True``; alone it raises ``ValueError``) skips the TCP rules:
    the rows and ``quic_*`` attrs are those of the QUIC connections in the ``quic=True``
    result, and the TCP counts (``clean_connections``, ``open_connections``,
    ``connections``) are left out of ``attrs``. The report takes its TCP part from the
    default call and its QUIC part from ``quic=True, tcp=False``.

    The result's ``attrs`` hold ``clean_connections``, ``open_connections``, ``connections``
    (TCP), ``verdicts`` ({verdict: rows}) and ``parameters``; with ``quic=True`` also
    ``quic_connections``, ``quic_clean_connections`` (closed with NO_ERROR / H3_NO_ERROR),
    ``quic_open_connections`` (still open at the end of the capture, no finding) and
    ``quic_unknown_connections`` (not decrypted, no finding: a CONNECTION_CLOSE would not
    show). Missing tables (no WebSocket, no heartbeats) only switch off the rules that need
    them; nothing raises on odd captures.
    """
    if not tcp and not quic:
        raise ValueError("disconnects(tcp=False) needs quic=True: there is nothing else to check")
    params = {
        "idle_gap_s": idle_gap_s,
        "min_retransmissions": min_retransmissions,
        "heartbeat_grace": heartbeat_grace,
        "reset_window_s": reset_window_s,
        "fin_grace_s": fin_grace_s,
        "pmtu_min_retransmissions": pmtu_min_retransmissions,
    }
    eof_ts = cap.summary.last_ts_ns or 0
    limits = _Limits(
        idle_gap_s=idle_gap_s,
        min_retx=min_retransmissions,
        grace=int(heartbeat_grace * _NS),
        reset_window=int(reset_window_s * _NS),
        fin_grace=int(fin_grace_s * _NS),
        pmtu_min_retx=pmtu_min_retransmissions,
    )
    rows: list[tuple[Any, ...]] = []
    counts: dict[str, int] = {}
    if tcp:
        rows, counts = _tcp(cap, limits, eof_ts, heartbeat_grace)
    if quic:
        qrows, qcounts = _quic(cap, limits, eof_ts)
        rows += qrows
        counts.update(qcounts)
    df = DisconnectsFrame(DISCONNECTS.frame(rows))
    df.attrs.update(counts)
    df.attrs["verdicts"] = {v: int(n) for v, n in df["verdict"].value_counts().items() if n}
    df.attrs["parameters"] = params
    return df


def _tcp(
    cap: Capture, limits: _Limits, eof_ts: int, heartbeat_grace: float
) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """Rows of the TCP connections that did not end cleanly, and the attrs counts."""
    conns = cap.connections
    grace = limits.grace
    retx = _by_stream(cap.tcp_events, RETRANSMISSION_KINDS)
    zwin = _by_stream(cap.tcp_events, ("zero_window",))
    wupd = _by_stream(cap.tcp_events, ("window_update",))
    hs = _handshakes(cap.tcp_handshakes)
    ws = _ws_connections(cap)
    pings = _heartbeats(cap, heartbeat_grace)
    proto = protocol_stacks(cap)
    icmp = _icmp_errors(cap.packets)
    retx_len = _retransmitted_lengths(cap.tcp_events)
    too_big = _too_big(_table(cap, "icmp_errors"))
    rows: list[tuple[Any, ...]] = []
    clean = opened = 0
    for c in _facts(conns):
        found: list[_Finding] = []
        h = hs.get(c.stream)
        f = (
            None
            if h is None
            else _handshake_failure(c, h, retx.get(c.stream, ()), icmp.get(c.stream), eof_ts, grace)
        )
        if f is not None and f is not _WAITING:
            found.append(f)
        elif f is None:
            found = _rules(
                _Facts(
                    c,
                    h,
                    ws.get(c.stream),
                    retx.get(c.stream, ()),
                    zwin.get(c.stream, ()),
                    wupd.get(c.stream, ()),
                    pings.get(c.stream, ()),
                    retx_len.get(c.stream, ()),
                    too_big.get(c.stream, {}),
                    eof_ts,
                    limits,
                )
            )
        if not found:
            if c.end_reason == "fin":
                clean += 1
            else:
                opened += 1
            continue
        rows.append(_row(c, found, ws.get(c.stream), proto.get(c.stream, "tcp")))
    return rows, {"clean_connections": clean, "open_connections": opened,
                  "connections": len(conns)}


class DisconnectsFrame(pd.DataFrame):
    """What :func:`disconnects` returns: a DataFrame (its rows, columns and ``attrs`` as
    documented there) whose printed forms, text and notebook HTML, start with one line
    counting the connections checked, e.g. ``disconnects: 0 of 12 TCP connections ended
    badly (10 closed cleanly with FIN; 2 still open at the end of the capture)``, so that an
    empty result reads as "all clean" rather than as nothing. Anything derived from it (a
    column selection, ``query``, ``copy``...) is a plain DataFrame."""

    @property
    def _constructor(self) -> Callable[..., pd.DataFrame]:
        return pd.DataFrame

    def counts_line(self) -> str:
        """The line the printed forms start with (empty when ``attrs`` lost its counts)."""
        a = self.attrs
        quic_only = not isinstance(a.get("connections"), int)  # tcp=False
        if quic_only and not isinstance(a.get("quic_connections"), int):
            return ""
        n, bad = int(a.get("connections", 0)), len(self)
        clean, still = int(a.get("clean_connections", 0)), int(a.get("open_connections", 0))
        conns = "" if quic_only else f"{n:,} TCP connection{'' if n == 1 else 's'}"
        q = a.get("quic_connections")
        if not isinstance(q, int) or (not q and not quic_only):
            q = None  # no QUIC connection (or quic=False): the TCP line as it always was
        else:
            conns += f"{'' if quic_only else ' and '}{q:,} QUIC connection{'' if q == 1 else 's'}"
            n += q
        if not n:
            return f"disconnects: the capture holds no {'QUIC' if quic_only else 'TCP'} connection"
        head = f"disconnects: {bad:,} of {conns} ended badly"
        rest = [f"{clean:,} closed cleanly with FIN"] if clean else []
        if still:
            rest.append(f"{still:,} still open at the end of the capture")
        if q is not None:
            qc = int(a.get("quic_clean_connections", 0))
            qo = int(a.get("quic_open_connections", 0))
            qu = int(a.get("quic_unknown_connections", 0))
            if qc:
                rest.append(f"{qc:,} QUIC closed cleanly with CONNECTION_CLOSE")
            if qo:
                rest.append(f"{qo:,} QUIC still open at the end of the capture")
            if qu:
                rest.append(f"{qu:,} QUIC not decrypted (how they ended cannot be seen)")
        verdicts = a.get("verdicts")
        if bad and isinstance(verdicts, dict) and verdicts:
            rest.insert(0, ", ".join(f"{v}: {k:,}" for v, k in verdicts.items()))
        return head + (f" ({'; '.join(rest)})" if rest else "")

    def __repr__(self) -> str:
        line = self.counts_line()
        body = pd.DataFrame(self).__repr__()
        return f"{line}\n{body}" if line else body

    def _repr_html_(self) -> str | None:
        import html

        plain: Any = pd.DataFrame(self)  # (_repr_html_ is not in pandas-stubs)
        body: str | None = plain._repr_html_()
        line = self.counts_line()
        return f"<p>{html.escape(line)}</p>{body or ''}" if line else body


# ----------------------------------------------------------------------------------- rules

_WAITING = _Finding("", None)
"""_handshake_failure: a SYN still within its grace at the end of the capture (no verdict)"""


def _handshake_failure(
    c: _Conn,
    h: tuple[str, int | None, int],
    retx: Sequence[tuple[int, int, int]],
    icmp: tuple[int, int] | None,
    eof_ts: int,
    grace: int,
) -> _Finding | None:
    result, syn_frame, syn_count = h
    if result == "refused" and c.rst is not None:
        return _Finding(
            "refused",
            1,
            f"the SYN was answered by RST from the server (frame {c.rst[0]})",
            noticed=(c.rst[0], c.rst[1], "rst_received"),
            evidence=_frames(syn_frame, c.rst[0]),
            filter_from=syn_frame or c.first_frame,
        )
    if result == "no_answer" and icmp is not None:
        return _Finding(
            "refused",
            1,
            f"the SYN was answered by an ICMP error (frame {icmp[0]})",
            noticed=(icmp[0], icmp[1], "icmp_received"),
            evidence=_frames(syn_frame, icmp[0]),
            filter_from=syn_frame or c.first_frame,
        )
    if result == "no_answer":
        first_syn = c.unacked[0]
        if first_syn is None or eof_ts - first_syn[1] < grace:
            return _WAITING  # the capture ended before an answer was due
        syns = [fr for ts, fr, d in retx if d == 0]
        noticed = _sender_action(c, 0, after=-1) or (None, eof_ts, "eof")
        return _Finding(
            "syn_unanswered",
            1,
            f"{syn_count} SYN(s) sent and never answered",
            first_unanswered=c.unacked[0],
            noticed=noticed,
            retx_after=len(syns),
            evidence=_frames(syn_frame, *syns),
            filter_from=syn_frame or c.first_frame,
        )
    return None


@dataclass(frozen=True, slots=True)
class _Limits:
    """The parameters of :func:`disconnects`, in the units the rules use (ns)."""

    idle_gap_s: float
    min_retx: int
    grace: int
    reset_window: int
    fin_grace: int
    pmtu_min_retx: int


@dataclass(frozen=True, slots=True)
class _Facts:
    """Everything the rules see of one connection: its :class:`_Conn` and its rows of the other
    tables (times in ns)."""

    c: _Conn
    handshake: tuple[str, int | None, int] | None
    ws: dict[str, Any] | None
    retx: Sequence[tuple[int, int, int]]
    zwin: Sequence[tuple[int, int, int]]
    wupd: Sequence[tuple[int, int, int]]
    pings: Sequence[tuple[int, int, int, str, str]]
    retx_len: Sequence[tuple[int, int, int, int]]
    too_big: dict[int, list[tuple[int, int, int]]]
    eof_ts: int
    limits: _Limits


def _pmtu_rule(f: _Facts) -> _Finding | None:
    """pmtu_black_hole (see :func:`_pmtu_black_hole`)."""
    return _pmtu_black_hole(
        f.c, f.handshake, f.retx_len, f.too_big, f.eof_ts, f.limits.pmtu_min_retx
    )


def _peer_vanished(f: _Facts) -> _Finding | None:
    """peer_vanished: the sender kept retransmitting after the peer's last sign of life (the
    side with more such retransmissions when both did)."""
    c, retx, eof_ts = f.c, f.retx, f.eof_ts
    best: _Finding | None = None
    for s in (0, 1):
        p = 1 - s
        life = c.dir_last[p]
        if c.rst is not None and c.rst_by == p and (life is None or c.rst[1] > life[1]):
            life = c.rst
        since = life[1] if life is not None else -1
        after = [(ts, fr) for ts, fr, d in retx if d == s and ts > since]
        if len(after) < f.limits.min_retx or (
            best is not None and len(after) <= best.retx_after
        ):
            continue
        first_un = c.unacked[s]
        noticed = _sender_action(c, s, after=since, fin_after=after[0][0]) or (None, eof_ts, "eof")
        ref = life if life is not None else first_un
        best = _Finding(
            "peer_vanished",
            p,
            "",
            last_peer=life,
            first_unanswered=first_un,
            noticed=noticed,
            retx_after=len(after),
            backoff=_backoff([ts for ts, _ in after]),
            evidence=_frames(
                life[0] if life else None,
                first_un[0] if first_un else None,
                *(fr for _, fr in after),
                noticed[0],
            ),
            filter_from=(life or first_un or (c.first_frame, 0))[0],
        )
        delay = (
            ""
            if ref is None
            else f" {(noticed[1] - ref[1]) / 1e9:.1f} s after its last sign of life"
        )
        best.summary = (
            f"{_SIDE[p]} went silent{_at(life)}; the {_SIDE[s]} retransmitted "
            f"{len(after)} times into the void{_backoff_text(best.backoff)} and "
            f"{_noticed_text(noticed)}{delay}"
        )
    return best


def _idle_then_reset(f: _Facts) -> _Finding | None:
    """idle_then_reset: a long silence ended shortly before the RST that ended the connection."""
    c = f.c
    if not (c.rst is not None and c.end_reason == "rst" and c.rst_by is not None):
        return None
    for gap_ms, start_fr, end_fr, end_t in [
        g for g in (c.last_idle, c.max_idle) if g is not None
    ]:
        if end_t is None or gap_ms < f.limits.idle_gap_s * 1000:
            continue
        if not 0 <= c.rst[1] - end_t <= f.limits.reset_window:
            continue
        p = c.rst_by
        return _Finding(
            "idle_then_reset",
            p,
            f"{gap_ms / 1000:.1f} s of silence, then a RST from the {_SIDE[p]} side "
            f"{fmt_ms((c.rst[1] - end_t) / 1e6)} after the next packet (frame {end_fr})",
            last_peer=c.dir_last[p],
            noticed=(c.rst[0], c.rst[1], "rst_received"),
            idle_gap_ms=gap_ms,
            evidence=_frames(start_fr, end_fr, c.rst[0]),
            filter_from=start_fr,
        )
    return None


def _unanswered_heartbeats(f: _Facts) -> _Finding | None:
    """unanswered_heartbeats: the sender's last heartbeats got no answer in time."""
    c = f.c
    hb = _unanswered(c, f.pings)
    if hb is None:
        return None
    s, frames, mechs = hb
    p = 1 - s
    noticed = (
        _sender_action(c, s, after=frames[0]) or _peer_action(c, p) or (None, f.eof_ts, "eof")
    )
    return _Finding(
        "unanswered_heartbeats",
        p,
        f"{len(frames)} {'/'.join(mechs)} heartbeat(s) from the {_SIDE[s]} got no answer "
        f"(first: frame {frames[0]}); the {_SIDE[s]} {_noticed_text(noticed)}",
        last_peer=c.dir_last[p],
        first_unanswered=c.unacked[s],
        noticed=noticed,
        hb_unanswered=len(frames),
        hb_mechanisms=",".join(mechs),
        evidence=_frames(*frames, noticed[0]),
        filter_from=frames[0],
    )


def _abortive_close_after_ws_close(f: _Facts) -> _Finding | None:
    """abortive_close_after_ws_close: a WebSocket Close, then a RST instead of a FIN."""
    c, ws = f.c, f.ws
    if ws is None:
        return None
    close_fr = ws.get("close_frame")
    if (
        close_fr is not None
        and c.rst is not None
        and c.rst_by is not None
        and c.rst[0] > close_fr
        and c.fin[c.rst_by] is None
    ):
        p = c.rst_by
        return _Finding(
            "abortive_close_after_ws_close",
            p,
            f"WebSocket Close from the {ws.get('close_by') or '?'} (frame {close_fr}), "
            f"then the {_SIDE[p]} reset the TCP connection (frame {c.rst[0]}) instead "
            "of closing it with FIN",
            last_peer=c.dir_last[p],
            noticed=(c.rst[0], c.rst[1], "rst_received"),
            evidence=_frames(close_fr, c.rst[0]),
            filter_from=close_fr,
        )
    return None


def _ws_no_close_frame(f: _Facts) -> _Finding | None:
    """ws_no_close_frame: the TCP connection of a WebSocket ended without a Close frame."""
    c, ws = f.c, f.ws
    if ws is None or ws.get("end_reason") != "no_close":
        return None
    first = _first_close(c)
    if first is None:
        return None
    fr, ts, p, how = first
    return _Finding(
        "ws_no_close_frame",
        p,
        f"the {_SIDE[p]} ended the TCP connection with {how.upper()} (frame {fr}) "
        "without a WebSocket Close frame (1006 abnormal closure)",
        last_peer=c.dir_last[p],
        noticed=(fr, ts, f"{how}_received"),
        evidence=_frames(fr),
        filter_from=fr,
    )


def _zero_window_stall(f: _Facts) -> _Finding | None:
    """zero_window_stall: the peer's last packet closed its window, and it stayed closed."""
    c, zwin, wupd, eof_ts = f.c, f.zwin, f.wupd, f.eof_ts
    for p in (0, 1):
        last = c.dir_last[p]
        if last is None:
            continue
        zs = [(ts, fr) for ts, fr, d in zwin if d == p]
        if not zs or zs[-1][1] != last[0]:
            continue
        upd = max((ts for ts, _, d in wupd if d == p), default=-1)
        start = next((z for z in zs if z[0] > upd), zs[-1])
        stop = c.rst[1] if c.rst is not None else eof_ts
        if stop - start[0] < f.limits.grace:
            continue
        s = 1 - p
        noticed = _sender_action(c, s, after=start[0]) or (None, eof_ts, "eof")
        return _Finding(
            "zero_window_stall",
            p,
            f"the {_SIDE[p]} advertised a zero window from frame {start[1]} to its last packet "
            f"({(stop - start[0]) / 1e9:.1f} s): its application stopped reading",
            last_peer=last,
            noticed=noticed,
            evidence=_frames(start[1], last[0]),
            filter_from=start[1],
            since=(start[1], start[0]),
        )
    return None


def _half_open_at_eof(f: _Facts) -> _Finding | None:
    """half_open_at_eof: unacknowledged data at the end, no RST, not closed both ways."""
    c, eof_ts = f.c, f.eof_ts
    if c.rst is not None or (c.fin[0] is not None and c.fin[1] is not None):
        return None
    for s in (0, 1):
        un = c.unacked[s]
        if un is None or eof_ts - un[1] < f.limits.grace:
            continue
        p = 1 - s
        life = c.dir_last[p]
        since = life[1] if life is not None else -1
        resent = [fr for ts, fr, d in f.retx if d == s and ts > since]
        return _Finding(
            "half_open_at_eof",
            p,
            f"at the end of the capture the {_SIDE[s]} had been waiting "
            f"{(eof_ts - un[1]) / 1e9:.1f} s for the {_SIDE[p]} to acknowledge frame "
            f"{un[0]}",
            last_peer=life,
            first_unanswered=un,
            noticed=(None, eof_ts, "eof"),
            retx_after=len(resent),
            evidence=_frames(un[0], *resent),
            filter_from=un[0],
        )
    return None


def _reset(f: _Facts) -> _Finding | None:
    """reset: the connection ended with a RST."""
    c = f.c
    if not (c.rst is not None and c.end_reason == "rst" and c.rst_by is not None):
        return None
    p = c.rst_by
    fin = c.fin[p]
    why = (
        f" after closing its side with FIN (frame {fin[0]}): later data hit a closed socket"
        if fin is not None and fin[0] < c.rst[0]
        else ""
    )
    return _Finding(
        "reset",
        p,
        f"the {_SIDE[p]} reset the connection (frame {c.rst[0]}){why}",
        last_peer=c.dir_last[p],
        noticed=(c.rst[0], c.rst[1], "rst_received"),
        evidence=_frames(c.rst[0]),
        filter_from=c.rst[0],
    )


def _one_sided_fin(f: _Facts) -> _Finding | None:
    """one_sided_fin: one side's FIN was never answered by the other's FIN or RST."""
    c, eof_ts = f.c, f.eof_ts
    if c.rst is not None or (c.fin[0] is not None and c.fin[1] is not None):
        return None
    for s in (0, 1):
        fin = c.fin[s]
        if fin is None or eof_ts - fin[1] < f.limits.fin_grace:
            continue
        p = 1 - s
        return _Finding(
            "one_sided_fin",
            p,
            f"the {_SIDE[s]} closed (FIN, frame {fin[0]}); the {_SIDE[p]} never closed its "
            f"side in the {(eof_ts - fin[1]) / 1e9:.1f} s left in the capture",
            last_peer=c.dir_last[p],
            noticed=(None, eof_ts, "eof"),
            evidence=_frames(fin[0]),
            filter_from=fin[0],
        )
    return None


_Rule = Callable[[_Facts], "_Finding | None"]

#: the rules tried on a connection whose handshake did not fail (``refused`` and
#: ``syn_unanswered`` come from :func:`_handshake_failure`, which excludes all of these), as
#: (verdict, rule), in :data:`VERDICTS` order: each returns its finding or None, and every
#: finding is a row's signal (the first one its verdict)
RULES: tuple[tuple[str, _Rule], ...] = (
    ("pmtu_black_hole", _pmtu_rule),
    ("peer_vanished", _peer_vanished),
    ("idle_then_reset", _idle_then_reset),
    ("unanswered_heartbeats", _unanswered_heartbeats),
    ("abortive_close_after_ws_close", _abortive_close_after_ws_close),
    ("ws_no_close_frame", _ws_no_close_frame),
    ("zero_window_stall", _zero_window_stall),
    ("half_open_at_eof", _half_open_at_eof),
    ("reset", _reset),
    ("one_sided_fin", _one_sided_fin),
)


def _rules(f: _Facts) -> list[_Finding]:
    """The findings of :data:`RULES` for one connection, in verdict order."""
    out: list[_Finding] = []
    for _, rule in RULES:
        found = rule(f)
        if found is not None:
            out.append(found)
    return out


_PMTU_SAFE_SEG = 536
"""TCP payload every IPv4 path carries (576-byte minimum MTU, RFC 791 / 1122)"""


def _pmtu_black_hole(
    c: _Conn,
    h: tuple[str, int | None, int] | None,
    retx: Sequence[tuple[int, int, int, int]],
    too_big: dict[int, list[tuple[int, int, int]]],
    eof_ts: int,
    min_retx: int,
) -> _Finding | None:
    """Large segments retransmitted into a path that carries only smaller ones."""
    best: _Finding | None = None
    for s in (0, 1):
        p = 1 - s
        top = c.max_acked[s]
        big = [(ts, fr, ln) for ts, fr, d, ln in retx
               if d == s and ln > top and ln > _PMTU_SAFE_SEG]
        first_un = c.unacked[s]
        if len(big) < min_retx or first_un is None:
            continue
        established = h is not None and h[0] == "established"
        if not (established or top > 0):
            continue  # nothing shows that small packets get through
        icmps = too_big.get(s, [])
        life = c.dir_last[p]
        if c.rst is not None and c.rst_by == p and (life is None or c.rst[1] > life[1]):
            life = c.rst
        if not icmps and (life is None or life[1] <= big[0][0]):
            continue  # the peer went silent: peer_vanished's case, not a size problem
        if best is not None and len(big) <= best.retx_after:
            continue
        sizes = sorted({ln for _, _, ln in big})
        size = f"{sizes[0]}-byte" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}-byte"
        noticed = (_sender_action(c, s, after=big[0][0]) or _peer_action(c, p)
                   or (None, eof_ts, "eof"))
        if icmps:
            mtus = sorted({m for _, _, m in icmps})
            why = (f"{len(icmps)} ICMP too-big error(s) reached the {_SIDE[s]} (first: frame "
                   f"{icmps[0][0]}, MTU {'/'.join(str(m) for m in mtus)}) but it kept sending "
                   "segments that size")
        else:
            why = (f"no ICMP 'fragmentation needed' / 'packet too big' reached the {_SIDE[s]} "
                   "(dropped on the way, or not visible here)")
        acked = f"{top} bytes" if top else "none"
        end = {"rst_received": f"the {_SIDE[p]} reset the connection (frame {noticed[0]})",
               "fin_received": f"the {_SIDE[p]} closed the connection (frame {noticed[0]})",
               }.get(noticed[2], f"the {_SIDE[s]} {_noticed_text(noticed)}")
        best = _Finding(
            "pmtu_black_hole",
            p,
            f"path-MTU black hole toward the {_SIDE[p]}: the {_SIDE[s]}'s {size} segments were "
            f"retransmitted {len(big)} times and never acknowledged while smaller packets got "
            f"through (largest {_SIDE[s]} segment acknowledged: {acked}); {why}. Then {end}",
            last_peer=c.dir_last[p],
            first_unanswered=first_un,
            noticed=noticed,
            retx_after=len(big),
            backoff=_backoff([ts for ts, _, _ in big]),
            evidence=_frames(
                first_un[0], *(fr for _, fr, _ in big), *(fr for fr, _, _ in icmps[:3]),
                noticed[0],
            ),
            filter_from=first_un[0],
        )
    return best


def _retransmitted_lengths(ev: pd.DataFrame) -> dict[int, list[tuple[int, int, int, int]]]:
    """Retransmissions as {tcp_stream: [(ts, frame, 0 client | 1 server, tcp.len)]}."""
    if not len(ev):
        return {}
    sel = ev[ev["kind"].astype("string").isin(list(RETRANSMISSION_KINDS)).fillna(False)
             .to_numpy(bool)]
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    d = (sel["direction"].astype("string") == "server_to_client").fillna(False).to_numpy(bool)
    for st, ts, fr, dd, ln in zip(
        sel["tcp_stream"].to_numpy(np.int64).tolist(),
        _ns(sel["ts"]).tolist(),
        sel["frame"].to_numpy(np.int64).tolist(),
        d.tolist(),
        _ints(sel["len"]),
        strict=True,
    ):
        out.setdefault(st, []).append((ts, fr, 1 if dd else 0, ln or 0))
    for v in out.values():
        v.sort()
    return out


def _too_big(ie: pd.DataFrame | None) -> dict[int, dict[int, list[tuple[int, int, int]]]]:
    """{tcp_stream: {0 client | 1 server: [(frame, ts, mtu)]}} of the too-big ICMP errors
    (icmp_errors kinds frag_needed / packet_too_big) quoting the connection."""
    if ie is None or not len(ie) or "kind" not in ie.columns:
        return {}
    sel = ie[ie["kind"].astype("string").isin(["frag_needed", "packet_too_big"]).fillna(False)
             .to_numpy(bool) & ie["tcp_stream"].notna().to_numpy(bool)]
    out: dict[int, dict[int, list[tuple[int, int, int]]]] = {}
    for st, fr, ts, d, m in zip(
        sel["tcp_stream"].astype("int64").tolist(),
        sel["frame"].to_numpy(np.int64).tolist(),
        _ns(sel["ts"]).tolist(),
        _strs(sel["direction"]),
        _ints(sel["mtu"]),
        strict=True,
    ):
        out.setdefault(st, {}).setdefault(0 if d == "client_to_server" else 1, []).append(
            (fr, ts, m or 0))
    return out


def _unanswered(
    c: _Conn, pings: Sequence[tuple[int, int, int, str, str]]
) -> tuple[int, list[int], list[str]] | None:
    """The sender with the most unanswered heartbeats: (sender, ping frames, mechanisms).

    ``outcome`` unanswered of the heartbeats table; a TCP keep-alive followed by any packet
    of the peer counts as answered (a zero-window ACK answers a probe too, though tshark does
    not call it keep_alive_ack)."""
    best: tuple[int, list[int], list[str]] | None = None
    for s in (0, 1):
        life = c.dir_last[1 - s]
        frames: list[int] = []
        mechs: list[str] = []
        for ts, fr, snd, mech, outcome in pings:
            if snd != s or outcome != "unanswered":
                continue
            if mech == "tcp_keepalive" and life is not None and life[1] > ts:
                continue
            frames.append(fr)
            if mech not in mechs:
                mechs.append(mech)
        if frames and (best is None or len(frames) > len(best[1])):
            best = (s, sorted(frames), mechs)
    return best


# ----------------------------------------------------------------------------------- helpers

_SIDE = ("client", "server")


def _at(life: tuple[int, int] | None) -> str:
    return f" after frame {life[0]}" if life is not None else " (nothing from it in the capture)"


def _backoff(ts: list[int]) -> float:
    if len(ts) < 3:
        return float("nan")
    gaps = np.diff(np.asarray(ts, dtype=np.float64))
    prev, nxt = gaps[:-1], gaps[1:]
    ok = prev > 0
    if not ok.any():
        return float("nan")
    return float(np.median(nxt[ok] / prev[ok]))


def _backoff_text(b: float) -> str:
    return "" if b != b else f" (gaps growing x{b:.1f})"


def _noticed_text(n: tuple[int | None, int, str]) -> str:
    return {
        "rst_sent": f"gave up with RST (frame {n[0]})",
        "fin_sent": f"closed with FIN (frame {n[0]})",
        "rst_received": f"got a RST (frame {n[0]})",
        "fin_received": f"got a FIN (frame {n[0]})",
    }.get(n[2], "was still waiting when the capture ended")


def _frames(*frames: int | None) -> list[int]:
    return sorted({int(f) for f in frames if f is not None})


def _sender_action(
    c: _Conn, s: int, *, after: int, fin_after: int | None = None
) -> tuple[int | None, int, str] | None:
    """The sender's first RST or FIN later than ``after`` (FIN: later than ``fin_after`` too)."""
    cands: list[tuple[int, int, str]] = []
    if c.rst is not None and c.rst_by == s and c.rst[1] > after:
        cands.append((c.rst[1], c.rst[0], "rst_sent"))
    fin = c.fin[s]
    if fin is not None and fin[1] > after and (fin_after is None or fin[1] >= fin_after):
        cands.append((fin[1], fin[0], "fin_sent"))
    if not cands:
        return None
    ts, fr, how = min(cands)
    return fr, ts, how


def _peer_action(c: _Conn, p: int) -> tuple[int | None, int, str] | None:
    if c.rst is not None and c.rst_by == p:
        return c.rst[0], c.rst[1], "rst_received"
    fin = c.fin[p]
    return (fin[0], fin[1], "fin_received") if fin is not None else None


def _first_close(c: _Conn) -> tuple[int, int, int, str] | None:
    """(frame, ts, side, 'rst'|'fin') of the first RST or FIN of the connection."""
    cands: list[tuple[int, int, int, str]] = []
    if c.rst is not None and c.rst_by is not None:
        cands.append((c.rst[0], c.rst[1], c.rst_by, "rst"))
    for s in (0, 1):
        fin = c.fin[s]
        if fin is not None:
            cands.append((fin[0], fin[1], s, "fin"))
    return min(cands) if cands else None


def _middlebox_hint(c: _Conn) -> str | None:
    if c.rst is None or c.rst_by is None:
        return None
    s = c.rst_by
    who = _SIDE[s]
    hints = []
    rng = c.ttl_range[s]
    if c.rst_ttl is not None and rng is not None and not rng[0] <= c.rst_ttl <= rng[1]:
        span = f"{rng[0]}" if rng[0] == rng[1] else f"{rng[0]}-{rng[1]}"
        hints.append(f"RST TTL {c.rst_ttl} but the {who}'s other packets had TTL {span}")
    last = c.ip_id[s]
    if (
        c.rst_ip_id
        and last is not None
        and c.ip_id_sequential[s]
        and (c.rst_ip_id - last) % 65536 > _IP_ID_SLACK
    ):
        hints.append(
            f"RST IP ID {c.rst_ip_id} does not continue the {who}'s sequential IP IDs (last {last})"
        )
    return "; ".join(hints) or None


_IP_ID_SLACK = 1024


def _sequential(first: int | None, last: int | None, packets: int) -> bool:
    """Did a host number its IPv4 packets with a counter (Linux: per socket), judging by the
    first non-zero and the last IP ID of its ``packets`` packets? Random IDs (macOS, some
    BSDs) almost never land within a few steps per packet."""
    if first is None or last is None or last == 0 or packets < 3:
        return False
    return (last - first) % 65536 <= 4 * packets + 16


def _evidence_cells(f: _Finding) -> tuple[Any, ...]:
    """The finding's frame/time cells, in DISCONNECTS order: last_peer_frame/_ts,
    first_unanswered_frame/_ts and the three noticed_* cells (TCP and QUIC rows alike)."""
    lp, fu, n = f.last_peer, f.first_unanswered, f.noticed
    return (lp[0] if lp else None, lp[1] if lp else None, fu[0] if fu else None,
            fu[1] if fu else None, n[0] if n else None, n[1] if n else None,
            n[2] if n else None)


def _row(c: _Conn, found: list[_Finding], ws: dict[str, Any] | None, proto: str) -> tuple[Any, ...]:
    f = found[0]
    ref = f.since or f.last_peer or f.first_unanswered
    delay = None
    if f.noticed is not None and ref is not None:
        delay = (f.noticed[1] - ref[1]) / 1e6
    rst_involved = any(x.verdict in _RST_VERDICTS for x in found)
    first = _first_close(c)
    closed_by = None
    if c.rst is not None and c.rst_by is not None:
        closed_by = _SIDE[c.rst_by]
    elif first is not None:
        closed_by = _SIDE[first[2]]
    idle_f = next((x for x in found if x.idle_gap_ms is not None), None)
    idle = idle_f.idle_gap_ms if idle_f is not None else c.max_idle[0]
    hb = next((x for x in found if x.hb_unanswered), f)
    evidence = f.evidence or [c.last_frame]
    start = f.filter_from if f.filter_from is not None else evidence[0]
    return (
        c.stream,
        None,
        "tcp",
        c.client,
        c.server,
        proto,
        f.verdict,
        ",".join(x.verdict for x in found),
        None if f.peer is None else _SIDE[f.peer],
        closed_by,
        c.end_reason,
        c.conn_state,
        f.summary,
        *_evidence_cells(f),
        delay,
        f.retx_after,
        f.backoff,
        idle,
        hb.hb_unanswered,
        hb.hb_mechanisms,
        ws.get("close_by") if ws else None,
        ws.get("close_frame") if ws else None,
        ws.get("close_code") if ws else None,
        c.rst[0] if c.rst else None,
        _middlebox_hint(c) if rst_involved else None,
        evidence,
        f"tcp.stream eq {c.stream} && frame.number >= {start}",
        None,
        None,
        None,
        None,
    )


_RST_VERDICTS = frozenset(
    {"refused", "idle_then_reset", "abortive_close_after_ws_close", "ws_no_close_frame", "reset"}
)


# ------------------------------------------------------------------------------ table access


def _ns(s: pd.Series) -> np.ndarray:
    """datetime column -> int64 ns (NaT -> _NAT)."""
    if len(s) == 0:
        return np.empty(0, np.int64)
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        s = s.dt.tz_localize(None)
    return s.to_numpy(dtype="datetime64[ns]").view(np.int64)


def _ints(s: pd.Series) -> list[int | None]:
    return [
        None if v is pd.NA or v is None or (isinstance(v, float) and v != v) else int(v)
        for v in s.astype(object).tolist()
    ]


def _strs(s: pd.Series) -> list[str | None]:
    return [
        None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v)
        for v in s.astype(object).tolist()
    ]


def _endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def _facts(conns: pd.DataFrame) -> Iterable[_Conn]:
    if not len(conns):
        return
    col = {
        n: _ints(conns[n])
        for n in (
            "client_last_frame",
            "server_last_frame",
            "client_fin_frame",
            "server_fin_frame",
            "rst_frame",
            "rst_ttl",
            "rst_ip_id",
            "client_ttl_min",
            "client_ttl_max",
            "server_ttl_min",
            "server_ttl_max",
            "client_ip_id",
            "server_ip_id",
            "client_first_ip_id",
            "server_first_ip_id",
            "max_idle_start_frame",
            "max_idle_end_frame",
            "last_idle_start_frame",
            "last_idle_end_frame",
            "client_unacked_frame",
            "server_unacked_frame",
        )
    }
    ts = {
        n: _ns(conns[n])
        for n in (
            "last_ts",
            "client_last_ts",
            "server_last_ts",
            "client_fin_ts",
            "server_fin_ts",
            "rst_ts",
            "max_idle_end_ts",
            "last_idle_end_ts",
            "client_unacked_ts",
            "server_unacked_ts",
        )
    }
    s = {
        n: _strs(conns[n])
        for n in ("client_addr", "server_addr", "end_reason", "conn_state", "rst_by")
    }
    stream = conns["tcp_stream"].to_numpy(np.int64)
    cport = conns["client_port"].to_numpy(np.int64)
    sport = conns["server_port"].to_numpy(np.int64)
    first = conns["first_frame"].to_numpy(np.int64)
    cpk = conns["client_packets"].to_numpy(np.int64)
    spk = conns["server_packets"].to_numpy(np.int64)
    last = conns["last_frame"].to_numpy(np.int64)
    max_idle = conns["max_idle_ms"].to_numpy(np.float64)
    zero = np.zeros(len(conns), np.int64)
    c_acked = (conns["client_max_acked_seg_bytes"].to_numpy(np.int64)
               if "client_max_acked_seg_bytes" in conns.columns else zero)
    s_acked = (conns["server_max_acked_seg_bytes"].to_numpy(np.int64)
               if "server_max_acked_seg_bytes" in conns.columns else zero)
    last_idle = conns["last_idle_ms"].to_numpy(np.float64)

    def pair(fr: int | None, t: int) -> tuple[int, int] | None:
        return None if fr is None or t == _NAT else (fr, int(t))

    def rng(lo: int | None, hi: int | None) -> tuple[int, int] | None:
        return None if lo is None or hi is None else (lo, hi)

    def tsv(t: int) -> int | None:
        return None if t == _NAT else int(t)

    for i in range(len(conns)):
        rb = s["rst_by"][i]
        yield _Conn(
            stream=int(stream[i]),
            client=_endpoint(s["client_addr"][i] or "?", int(cport[i])),
            server=_endpoint(s["server_addr"][i] or "?", int(sport[i])),
            end_reason=s["end_reason"][i],
            conn_state=s["conn_state"][i],
            first_frame=int(first[i]),
            last_frame=int(last[i]),
            last_ts=int(ts["last_ts"][i]),
            dir_last=[
                pair(col["client_last_frame"][i], ts["client_last_ts"][i]),
                pair(col["server_last_frame"][i], ts["server_last_ts"][i]),
            ],
            fin=[
                pair(col["client_fin_frame"][i], ts["client_fin_ts"][i]),
                pair(col["server_fin_frame"][i], ts["server_fin_ts"][i]),
            ],
            rst=pair(col["rst_frame"][i], ts["rst_ts"][i]),
            rst_by=None if rb is None else (0 if rb == "client" else 1),
            rst_ttl=col["rst_ttl"][i],
            rst_ip_id=col["rst_ip_id"][i],
            ttl_range=[
                rng(col["client_ttl_min"][i], col["client_ttl_max"][i]),
                rng(col["server_ttl_min"][i], col["server_ttl_max"][i]),
            ],
            ip_id=[col["client_ip_id"][i], col["server_ip_id"][i]],
            ip_id_sequential=[
                _sequential(col["client_first_ip_id"][i], col["client_ip_id"][i], int(cpk[i])),
                _sequential(col["server_first_ip_id"][i], col["server_ip_id"][i], int(spk[i])),
            ],
            packets=[int(cpk[i]), int(spk[i])],
            max_idle=(
                float(max_idle[i]),
                col["max_idle_start_frame"][i],
                col["max_idle_end_frame"][i],
                tsv(ts["max_idle_end_ts"][i]),
            ),
            last_idle=None
            if last_idle[i] != last_idle[i]
            else (
                float(last_idle[i]),
                col["last_idle_start_frame"][i],
                col["last_idle_end_frame"][i],
                tsv(ts["last_idle_end_ts"][i]),
            ),
            unacked=[
                pair(col["client_unacked_frame"][i], ts["client_unacked_ts"][i]),
                pair(col["server_unacked_frame"][i], ts["server_unacked_ts"][i]),
            ],
            max_acked=[int(c_acked[i]), int(s_acked[i])],
        )


def _by_stream(ev: pd.DataFrame, kinds: Iterable[str]) -> dict[int, list[tuple[int, int, int]]]:
    """tcp_events rows of ``kinds`` as {tcp_stream: [(ts, frame, 0 client | 1 server), ...]},
    in time order."""
    if not len(ev):
        return {}
    sel = ev[ev["kind"].astype("string").isin(list(kinds)).fillna(False).to_numpy(bool)]
    out: dict[int, list[tuple[int, int, int]]] = {}
    if not len(sel):
        return out
    d = (sel["direction"].astype("string") == "server_to_client").fillna(False).to_numpy(bool)
    for st, ts, fr, dd in sorted(
        zip(
            sel["tcp_stream"].to_numpy(np.int64).tolist(),
            _ns(sel["ts"]).tolist(),
            sel["frame"].to_numpy(np.int64).tolist(),
            d.tolist(),
            strict=True,
        )
    ):
        out.setdefault(st, []).append((ts, fr, 1 if dd else 0))
    return out


def _icmp_errors(pk: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """{tcp_stream: (frame, ts)} of the first ICMP/ICMPv6 error quoting a TCP header of the
    connection (tshark gives those frames its tcp.stream); empty without the packets table."""
    if not len(pk):
        return {}
    sel = pk[
        pk["ip_proto"].isin([1, 58]).fillna(False).to_numpy(bool)
        & pk["tcp_stream"].notna().to_numpy(bool)
    ]
    out: dict[int, tuple[int, int]] = {}
    for st, fr, ts in zip(
        sel["tcp_stream"].to_numpy(np.int64).tolist(),
        sel["frame"].to_numpy(np.int64).tolist(),
        _ns(sel["ts"]).tolist(),
        strict=True,
    ):
        out.setdefault(st, (fr, ts))
    return out


def _handshakes(hs: pd.DataFrame) -> dict[int, tuple[str, int | None, int]]:
    if not len(hs):
        return {}
    return {
        int(st): (str(r), fr, int(n))
        for st, r, fr, n in zip(
            hs["tcp_stream"].to_numpy(np.int64),
            _strs(hs["result"]),
            _ints(hs["syn_frame"]),
            hs["syn_count"].to_numpy(np.int64),
            strict=True,
        )
    }


def _table(cap: Capture, name: str) -> pd.DataFrame | None:
    df = getattr(cap, name, None)
    return df if isinstance(df, pd.DataFrame) else None


def _ws_connections(cap: Capture) -> dict[int, dict[str, Any]]:
    """{tcp_stream: facts} of WebSocket connections (first one per TCP connection)."""
    wc = _table(cap, "ws_connections")
    if wc is None or not len(wc) or "close_frame" not in wc.columns:
        return {}
    out: dict[int, dict[str, Any]] = {}
    by = _strs(wc["close_by"])
    cc, sc = _ints(wc["client_close_code"]), _ints(wc["server_close_code"])
    for i, (st, fr, er) in enumerate(
        zip(
            wc["tcp_stream"].to_numpy(np.int64).tolist(),
            _ints(wc["close_frame"]),
            _strs(wc["end_reason"]),
            strict=True,
        )
    ):
        if st in out:
            continue
        code = cc[i] if by[i] == "client" else sc[i] if by[i] == "server" else None
        out[st] = {"close_frame": fr, "close_by": by[i], "close_code": code, "end_reason": er}
    return out


def _heartbeats(cap: Capture, grace_s: float) -> dict[int, list[tuple[int, int, int, str, str]]]:
    """{tcp_stream: [(ping_ts, ping_frame, sender 0|1, mechanism, outcome)]} from
    :func:`pcaptools.analyses.heartbeats.heartbeats` with ``heartbeat_grace`` as the answer
    timeout (a table the capture lacks leaves its mechanism out)."""
    hb = heartbeats(
        _table(cap, "ws_frames"),
        _table(cap, "http2_frames"),
        _table(cap, "tcp_events"),
        connections=cap.connections,
        capture_end=cap.summary.last_ts_ns,
        answer_timeout_ms=grace_s * 1000.0,
    )
    out: dict[int, list[tuple[int, int, int, str, str]]] = {}
    if not len(hb):
        return out
    for st, ts, fr, snd, mech, oc in zip(
        hb["tcp_stream"].to_numpy(np.int64).tolist(),
        _ns(hb["ping_ts"]).tolist(),
        hb["ping_frame"].to_numpy(np.int64).tolist(),
        _strs(hb["sender"]),
        _strs(hb["mechanism"]),
        _strs(hb["outcome"]),
        strict=True,
    ):
        out.setdefault(st, []).append((ts, fr, 0 if snd == "client" else 1, mech or "?", oc or "?"))
    return out


# ------------------------------------------------------------------------------------ QUIC

_CLOSED = ("connection_close_transport", "connection_close_application")


@dataclass(slots=True)
class _Quic:
    """The facts of one QUIC connection the rules use (times in ns)."""

    index: int
    client: str
    server: str
    alpn: str | None
    start_seen: bool
    first_frame: int
    last: tuple[int, int]
    end: str | None
    closed_by: int | None
    close: tuple[int, int] | None
    close_space: str | None
    close_code: int | None
    close_reason: str | None
    reset: tuple[int, int] | None
    handshake_done: bool
    client_1rtt: int
    decrypted: bool
    idle_timeout_ms: int | None
    sent: tuple[list[tuple[int, int]], list[tuple[int, int]]]
    """per side: (ts, frame) of its packets (datagrams), in order"""
    unanswered_pings: tuple[list[int], list[int]]
    """per side: frames of its PINGs with outcome unanswered"""


def _quic(
    cap: Capture, limits: _Limits, eof_ts: int
) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """Rows of the QUIC connections that did not end cleanly, and the attrs counts."""
    qc = _table(cap, "quic_connections")
    counts = {"quic_connections": 0 if qc is None else len(qc), "quic_clean_connections": 0,
              "quic_open_connections": 0, "quic_unknown_connections": 0}
    if qc is None or not len(qc):
        return [], counts
    hb = heartbeats(quic_frames=_table(cap, "quic_frames"), quic_connections=qc,
                    capture_end=eof_ts or None, answer_timeout_ms=limits.grace / 1e6)
    rows: list[tuple[Any, ...]] = []
    for q in _quic_facts(qc, _table(cap, "quic_packets"), hb):
        found = [f for f in (rule(q, limits, eof_ts) for rule in _QUIC_RULES) if f is not None]
        if not found:
            if q.end in _CLOSED:
                counts["quic_clean_connections"] += 1
            elif q.end == "unknown":
                counts["quic_unknown_connections"] += 1
            else:
                counts["quic_open_connections"] += 1
            continue
        rows.append(_quic_row(q, found))
    return rows, counts


def _quic_facts(qc: pd.DataFrame, qp: pd.DataFrame | None, hb: pd.DataFrame) -> Iterable[_Quic]:
    sent: dict[tuple[int, int], list[tuple[int, int]]] = {}
    resets: dict[int, tuple[int, int]] = {}
    if qp is not None and len(qp):
        first = qp[qp["index"].to_numpy(np.int64) == 0]  # one per datagram
        for conn, d, fr, ts in zip(
            first["quic_connection"].to_numpy(np.int64).tolist(),
            (first["direction"].astype("string") == "server_to_client").fillna(False).tolist(),
            first["frame"].to_numpy(np.int64).tolist(), _ns(first["ts"]).tolist(), strict=True,
        ):
            sent.setdefault((conn, int(d)), []).append((ts, fr))
        rs = qp[(qp["status"].astype("string") == "stateless_reset").fillna(False).to_numpy(bool)]
        for conn, fr, ts in zip(rs["quic_connection"].to_numpy(np.int64).tolist(),
                                rs["frame"].to_numpy(np.int64).tolist(), _ns(rs["ts"]).tolist(),
                                strict=True):
            resets.setdefault(conn, (fr, ts))
    pings: dict[tuple[int, int], list[int]] = {}
    if len(hb):
        un = hb[(hb["outcome"].astype("string") == "unanswered").fillna(False).to_numpy(bool)]
        for conn, snd, fr in zip(_ints(un["quic_connection"]), _strs(un["sender"]),
                                 un["ping_frame"].to_numpy(np.int64).tolist(), strict=True):
            if conn is not None:
                pings.setdefault((conn, 0 if snd == "client" else 1), []).append(fr)
    ints = {c: _ints(qc[c]) for c in (
        "close_frame", "client_idle_timeout_ms", "server_idle_timeout_ms", "close_error_code",
        "handshake_done_frame", "client_1rtt_packets", "client_decrypted_packets",
        "server_decrypted_packets", "first_frame", "last_frame", "client_port", "server_port",
        "quic_connection")}
    strs = {c: _strs(qc[c]) for c in ("end", "closed_by", "alpn", "close_reason",
                                      "client_addr", "server_addr")}
    start_seen = qc["start_seen"].astype(bool).tolist()
    last_ts = _ns(qc["last_ts"]).tolist()
    for i in range(len(qc)):
        conn = int(ints["quic_connection"][i] or 0)
        end, by, close_fr = strs["end"][i], strs["closed_by"][i], ints["close_frame"][i]
        timeouts = [t for t in (ints["client_idle_timeout_ms"][i],
                                ints["server_idle_timeout_ms"][i]) if t is not None and t > 0]
        c2s, s2c = sent.get((conn, 0), []), sent.get((conn, 1), [])
        close_ts = None
        if close_fr is not None:
            side = c2s if by == "client" else s2c
            close_ts = next((t for t, f in side if f == close_fr), None)
        yield _Quic(
            index=conn,
            client=_endpoint(strs["client_addr"][i] or "?", ints["client_port"][i] or 0),
            server=_endpoint(strs["server_addr"][i] or "?", ints["server_port"][i] or 0),
            alpn=strs["alpn"][i],
            start_seen=bool(start_seen[i]),
            first_frame=int(ints["first_frame"][i] or 0),
            last=(int(ints["last_frame"][i] or 0), int(last_ts[i])),
            end=end,
            closed_by=None if by is None else (0 if by == "client" else 1),
            close=None if close_fr is None or close_ts is None else (close_fr, close_ts),
            close_space=(None if end not in _CLOSED else end.removeprefix("connection_close_")),
            close_code=ints["close_error_code"][i],
            close_reason=strs["close_reason"][i],
            reset=resets.get(conn),
            handshake_done=ints["handshake_done_frame"][i] is not None,
            client_1rtt=int(ints["client_1rtt_packets"][i] or 0),
            decrypted=(ints["client_decrypted_packets"][i] or 0)
            + (ints["server_decrypted_packets"][i] or 0) > 0,
            idle_timeout_ms=min(timeouts) if timeouts else None,
            sent=(c2s, s2c),
            unanswered_pings=(pings.get((conn, 0), []), pings.get((conn, 1), [])),
        )


def _quic_clean(q: _Quic) -> bool:
    """A CONNECTION_CLOSE without an error: transport NO_ERROR (0x0); application 0x0 or,
    for HTTP/3, H3_NO_ERROR (0x100)."""
    if q.close_space is None or q.close_code is None:
        return False
    if q.close_code == 0:
        return True
    return q.close_space == "application" and q.close_code == 0x100 and q.alpn == "h3"


def _quic_handshake(q: _Quic, lim: _Limits, eof_ts: int) -> _Finding | None:
    """handshake_incomplete: the client's first Initial was seen, and neither a HANDSHAKE_DONE
    (decrypted) nor a 1-RTT packet from the client (it sends one only once it has the
    server's Finished) followed, and the connection ended or the capture went on for at least
    ``heartbeat_grace`` after its last packet."""
    if not q.start_seen or q.handshake_done or q.client_1rtt:
        return None
    ended = q.close is not None or q.reset is not None
    if not ended and eof_ts - q.last[1] < lim.grace:
        return None  # still in progress at the end of the capture
    c2s, s2c = q.sent
    noticed: tuple[int | None, int, str] = (None, eof_ts, "eof")
    if not s2c:
        peer = 1
        what = f"the server never answered the client's {len(c2s)} datagram(s)"
    elif q.close is not None and q.closed_by is not None:
        peer = q.closed_by  # the side that refused the handshake
        what = (f"the {_SIDE[peer]} ended the handshake with a CONNECTION_CLOSE "
                f"({_quic_error_name(q)}) in frame {q.close[0]}")
        noticed = (q.close[0], q.close[1], "close_received")
    else:
        peer = 1 if not c2s or s2c[-1][0] < c2s[-1][0] else 0
        what = (f"the handshake never completed (no HANDSHAKE_DONE, no 1-RTT packet from the "
                f"client); the {_SIDE[peer]} fell silent first")
    if q.reset is not None:
        noticed = (q.reset[0], q.reset[1], "reset_received")
    elif noticed[2] == "eof" and c2s and eof_ts - c2s[-1][0] >= lim.grace:
        noticed = (c2s[-1][1], c2s[-1][0], "gave_up")  # the client stopped trying
    life = (s2c[-1][1], s2c[-1][0]) if peer == 1 and s2c else (
        (c2s[-1][1], c2s[-1][0]) if peer == 0 and c2s else None)
    return _Finding("handshake_incomplete", peer, what, last_peer=life, noticed=noticed,
                    evidence=_frames(q.first_frame, life[0] if life else None, noticed[0]),
                    filter_from=q.first_frame,
                    since=(c2s[0][1], c2s[0][0]) if c2s else None)


def _quic_reset(q: _Quic, lim: _Limits, eof_ts: int) -> _Finding | None:
    """stateless_reset: a datagram ending in a stateless reset token the receiver was given
    (quic_packets.status stateless_reset): its sender has no state for the connection."""
    if q.reset is None:
        return None
    fr, ts = q.reset
    p = next((d for d, side in enumerate(q.sent) if any(f == fr for _t, f in side)), 1)
    before = [(f, t) for t, f in q.sent[p] if t < ts]
    life = before[-1] if before else None
    return _Finding(
        "stateless_reset", p,
        f"the {_SIDE[p]} answered with a stateless reset (frame {fr}): it has no state for "
        "the connection (restarted, or its packets reached another server)",
        last_peer=life, noticed=(fr, ts, "reset_received"),
        evidence=_frames(life[0] if life else None, fr), filter_from=life[0] if life else fr,
        since=life,
    )


def _quic_close_error(q: _Quic, lim: _Limits, eof_ts: int) -> _Finding | None:
    """close_transport_error / close_application_error: the first CONNECTION_CLOSE carries an
    error code (not NO_ERROR, H3_NO_ERROR or application 0)."""
    if q.close_space is None or q.closed_by is None or _quic_clean(q):
        return None
    p = q.closed_by
    name = _quic_error_name(q)
    fr = q.close[0] if q.close is not None else None
    ts = q.close[1] if q.close is not None else q.last[1]
    return _Finding(
        f"close_{q.close_space}_error", p,
        f"the {_SIDE[p]} closed the connection with {q.close_space} error {name} "
        f"(0x{q.close_code or 0:x}) in frame {fr}",
        noticed=(fr, ts, "close_received"), evidence=_frames(fr), filter_from=fr,
    )


def _quic_error_name(q: _Quic) -> str | None:
    if q.close_code is None or q.close_space is None:
        return None
    if q.close_space == "transport":
        return transport_error_name(q.close_code)
    if q.alpn == "h3":
        return h3_error_name(q.close_code)
    return f"0x{q.close_code:x}"


def _quic_vanished(q: _Quic, lim: _Limits, eof_ts: int) -> _Finding | None:
    """peer_vanished (QUIC): after the peer's last packet the sender sent at least
    ``min_retransmissions`` more datagrams (its probes: QUIC retransmits on PTO; a
    CONNECTION_CLOSE of its own not counted), and nothing came back."""
    best: _Finding | None = None
    for s in (0, 1):
        p = 1 - s
        peer = q.sent[p]
        since = peer[-1][0] if peer else -1
        after = [(t, f) for t, f in q.sent[s] if t > since]
        if q.close is not None and q.closed_by == s:
            after = [(t, f) for t, f in after if f != q.close[0]]
        if len(after) < lim.min_retx:
            continue
        if best is not None and len(after) <= best.retx_after:
            continue
        life = (peer[-1][1], peer[-1][0]) if peer else None
        noticed: tuple[int | None, int, str]
        if q.close is not None and q.closed_by == s and q.close[1] > since:
            noticed = (q.close[0], q.close[1], "close_sent")
        elif eof_ts - after[-1][0] >= lim.grace:
            noticed = (after[-1][1], after[-1][0], "gave_up")
        else:
            noticed = (None, eof_ts, "eof")
        b = _backoff([t for t, _ in after])
        how = {"close_sent": f"closed it (frame {noticed[0]})",
               "gave_up": f"gave up after frame {noticed[0]}"}.get(
                   noticed[2], "was still sending when the capture ended")
        best = _Finding(
            "peer_vanished", p,
            f"{_SIDE[p]} went silent{_at(life)}; the {_SIDE[s]} sent {len(after)} more "
            f"datagrams into the void{_backoff_text(b)} and {how}",
            last_peer=life, first_unanswered=(after[0][1], after[0][0]), noticed=noticed,
            retx_after=len(after), backoff=b,
            evidence=_frames(life[0] if life else None, *(f for _, f in after), noticed[0]),
            filter_from=(life or (after[0][1], 0))[0],
        )
    return best


def _quic_idle(q: _Quic, lim: _Limits, eof_ts: int) -> _Finding | None:
    """idle_timeout: no CONNECTION_CLOSE nor stateless reset, and no packet either way for
    longer than the idle timeout (the smaller non-zero max_idle_timeout of the two sides)
    before the end of the capture: both ends dropped the connection silently (RFC 9000
    §10.1). Needs decrypted 1-RTT packets (quic_connections.end idle_timeout): otherwise a
    CONNECTION_CLOSE would not show."""
    if q.end != "idle_timeout" or q.idle_timeout_ms is None:
        return None
    gap = (eof_ts - q.last[1]) / 1e6
    return _Finding(
        "idle_timeout", None,
        f"no packet either way for {gap / 1000:.1f} s after frame {q.last[0]}, longer than the "
        f"idle timeout of {q.idle_timeout_ms / 1000:g} s: both ends dropped the connection "
        "without a CONNECTION_CLOSE",
        last_peer=None, noticed=(None, q.last[1] + q.idle_timeout_ms * 1_000_000,
                                 "idle_timeout"),
        idle_gap_ms=gap, evidence=[q.last[0]], filter_from=q.last[0],
        since=(q.last[0], q.last[1]),
    )


def _quic_pings(q: _Quic, lim: _Limits, eof_ts: int) -> _Finding | None:
    """unanswered_heartbeats (QUIC): PING frames of the sender no ACK answered, though the
    connection lasted at least ``heartbeat_grace`` after them."""
    s = 0 if len(q.unanswered_pings[0]) >= len(q.unanswered_pings[1]) else 1
    frames = sorted(q.unanswered_pings[s])
    if not frames:
        return None
    p = 1 - s
    peer = q.sent[p]
    life = (peer[-1][1], peer[-1][0]) if peer else None
    return _Finding(
        "unanswered_heartbeats", p,
        f"{len(frames)} QUIC PING(s) from the {_SIDE[s]} got no ACK (first: frame {frames[0]})",
        last_peer=life, noticed=(None, eof_ts, "eof"), hb_unanswered=len(frames),
        hb_mechanisms="quic_ping", evidence=_frames(*frames), filter_from=frames[0],
    )


_QUIC_RULES: tuple[Callable[[_Quic, _Limits, int], _Finding | None], ...] = (
    _quic_handshake,
    _quic_reset,
    _quic_close_error,
    _quic_vanished,
    _quic_idle,
    _quic_pings,
)


def _quic_row(q: _Quic, found: list[_Finding]) -> tuple[Any, ...]:
    f = found[0]
    ref = f.since or f.last_peer or f.first_unanswered
    delay = None
    if f.noticed is not None and ref is not None:
        delay = (f.noticed[1] - ref[1]) / 1e6
    closed_by = None
    if q.reset is not None or q.close is not None:
        cands = [(x[1], d) for x, d in ((q.reset, None), (q.close, q.closed_by)) if x is not None]
        first = min(cands, key=lambda c: c[0])
        if first[1] is not None:
            closed_by = _SIDE[first[1]]
        elif q.reset is not None:
            side = next((d for d, s in enumerate(q.sent) if any(fr == q.reset[0] for _t, fr in s)),
                        None)
            closed_by = None if side is None else _SIDE[side]
    hb = next((x for x in found if x.hb_unanswered), f)
    idle = next((x.idle_gap_ms for x in found if x.idle_gap_ms is not None), None)
    evidence = f.evidence or [q.last[0]]
    start = f.filter_from if f.filter_from is not None else evidence[0]
    return (
        None, q.index, "quic", q.client, q.server,
        f"quic/{q.alpn}" if q.alpn else "quic",
        f.verdict, ",".join(x.verdict for x in found),
        None if f.peer is None else _SIDE[f.peer],
        closed_by, q.end, None, f.summary,
        *_evidence_cells(f),
        delay, f.retx_after, f.backoff, idle, hb.hb_unanswered, hb.hb_mechanisms,
        None, None, None, None, None, evidence,
        f"quic.connection.number eq {q.index} && frame.number >= {start}",
        q.idle_timeout_ms, q.close_code, _quic_error_name(q), q.close_reason,
    )
