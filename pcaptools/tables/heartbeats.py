"""Heartbeats: pings, their pongs, and how long connections stayed silent.

Three mechanisms keep long-lived connections (LLM streams, realtime WebSockets) alive and
detect dead peers; all three become rows of the same shape (:data:`HEARTBEATS`, the schema
of ``Capture.ws_heartbeats``), one row per probe:

- ``websocket``: Ping frames (``ws_frames`` opcode 9) answered by a Pong (opcode 10) from
  the other side with the same payload;
- ``http2``: PING frames (``http2_frames`` type PING without ACK) answered by a PING with
  ACK from the other side with the same 8 bytes;
- ``tcp_keepalive``: tshark's keep-alive probes (``tcp_events`` kind ``keep_alive``)
  answered by a ``keep_alive_ack`` from the other side acknowledging the probe
  (ack = probe seq + 1);
- ``quic_ping``: QUIC PING frames (``quic_frames``, decrypted packets only: a key log is
  needed for 1-RTT), answered by the first ACK frame from the other side, in the same packet
  number space, whose ranges include the packet number of the packet carrying the PING. A
  PING is an ack-eliciting probe: an endpoint sends one to keep a connection alive or as a
  PTO probe (RFC 9000 §19.2, RFC 9002 §6.2.4). HTTP/3 has no PING frame of its own (RFC
  9114 §7.2 leaves liveness to QUIC): QUIC PING is what an HTTP/3 connection's heartbeat is.
  Keyed by ``quic_connection`` (``tcp_stream`` NA); the end of observation is the first
  CONNECTION_CLOSE or stateless reset (``quic_connections.close_frame`` and ``end``), else
  the end of the capture.

Matching: a pong goes to the most recent unanswered ping of the other side, sent before
it, with the same payload (TCP: the acknowledged sequence number). RFC 6455 §5.5.3 lets an
endpoint answer only the most recent of several pings, and allows unsolicited pongs (a
one-way heartbeat): a pong whose payload matches no waiting ping matches nothing. With
equal payloads (empty WebSocket pings are common) an unsolicited pong can still be taken
for an answer: the data cannot tell them apart.

A ping without a pong is ``superseded`` when a later ping of the same sender was answered
within ``answer_timeout_ms``; ``cut_off`` (``answered`` NA) when the connection ended
(FIN/RST; from ``connections``) or the capture ended less than ``answer_timeout_ms`` after
it; ``unanswered`` otherwise.

:func:`heartbeats` (all mechanisms) and :func:`websocket_heartbeats` /
:func:`http2_heartbeats` / :func:`tcp_keepalive_heartbeats` are pure functions of the
tables; :func:`heartbeat_summary` condenses them per connection (observed ping interval,
pong latency p50/p95, missed pongs, longest silence per direction).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from .schema import TS_DTYPE, Column, TableSchema
from .ws_tables import HEARTBEATS

__all__ = [
    "DEFAULT_ANSWER_TIMEOUT_MS",
    "HEARTBEATS",
    "HEARTBEAT_SUMMARY",
    "MAX_ACKS_PER_QUIC_PING",
    "heartbeat_summary",
    "heartbeats",
    "http2_heartbeats",
    "quic_ping_heartbeats",
    "tcp_keepalive_heartbeats",
    "websocket_heartbeats",
]

DEFAULT_ANSWER_TIMEOUT_MS = 2_000.0
"""a ping without a pong is ``unanswered`` when the connection was observed for at least this
long after it (a healthy peer answers within a round trip; a pong that does come later is
still matched, whatever its delay), ``cut_off`` otherwise"""

_NAT = np.iinfo(np.int64).min

# a probe or an answer: (connection key, side 0 client / 1 server, frame, ts_ns, match key, payload)
_Event = tuple[Any, int, int, int, Any, str | None]


def _ns(series: pd.Series) -> np.ndarray:
    """A datetime column as int64 ns (NaT -> the int64 minimum)."""
    if len(series) == 0:
        return np.empty(0, np.int64)
    s = series if isinstance(series.dtype, pd.DatetimeTZDtype) else pd.to_datetime(series, utc=True)
    naive = s.dt.tz_convert("UTC").dt.tz_localize(None)
    return naive.to_numpy(dtype="datetime64[ns]").view(np.int64)


def _side(direction: Iterable[object]) -> list[int]:
    return [0 if str(d) == "client_to_server" else 1 for d in direction]


def _end_of_observation(
    keys: set[Any],
    connections: pd.DataFrame | None,
    capture_end_ns: int | None,
    latest_ns: int,
) -> dict[Any, int]:
    """tcp_stream -> the time after which no pong could be observed."""
    horizon: dict[Any, int] = {}
    cap_end = capture_end_ns
    conn_end: dict[int, int] = {}
    if connections is not None and len(connections):
        last = _ns(connections["last_ts"])
        if cap_end is None:
            cap_end = int(last.max())
        end = _ns(connections["end_ts"])
        reasons = connections["end_reason"].astype(object).tolist()
        for tcp, r, e in zip(connections["tcp_stream"].tolist(), reasons, end, strict=True):
            if r in ("fin", "rst") and e != _NAT:
                conn_end[int(tcp)] = int(e)
    if cap_end is None:
        cap_end = latest_ns
    for k in keys:
        tcp = k[0] if isinstance(k, tuple) else k
        horizon[k] = conn_end.get(int(tcp), cap_end)
    return horizon


def _match(
    mechanism: str,
    pings: list[_Event],
    pongs: list[_Event],
    *,
    connections: pd.DataFrame | None,
    capture_end_ns: int | None,
    answer_timeout_ms: float,
) -> pd.DataFrame:
    """Rows of :data:`HEARTBEATS` for one mechanism."""
    if not pings:
        return HEARTBEATS.frame([])
    # process in capture order; at equal frames a ping comes first
    events = [(p[2], 0, i) for i, p in enumerate(pings)]
    events += [(q[2], 1, i) for i, q in enumerate(pongs)]
    events.sort()
    waiting: dict[tuple[Any, int, Any], list[int]] = {}
    pong_of: list[int | None] = [None] * len(pings)
    for _frame, kind, i in events:
        if kind == 0:
            p = pings[i]
            waiting.setdefault((p[0], p[1], p[4]), []).append(i)
        else:
            q = pongs[i]
            stack = waiting.get((q[0], 1 - q[1], q[4]))
            if stack:
                pong_of[stack.pop()] = i
    timeout_ns = int(answer_timeout_ms * 1e6)
    latest = max([p[3] for p in pings] + [q[3] for q in pongs])
    horizon = _end_of_observation({p[0] for p in pings}, connections, capture_end_ns, latest)
    # pings of each (connection, sender) in order, for intervals and superseded
    by_sender: dict[tuple[Any, int], list[int]] = {}
    for i in sorted(range(len(pings)), key=lambda i: (pings[i][2], pings[i][3])):
        by_sender.setdefault((pings[i][0], pings[i][1]), []).append(i)
    interval: list[float | None] = [None] * len(pings)
    outcome: list[str] = [""] * len(pings)
    big = np.iinfo(np.int64).max
    for (key, _), idx in by_sender.items():
        prev_ts: int | None = None
        for i in idx:
            ts = pings[i][3]
            interval[i] = None if prev_ts is None else (ts - prev_ts) / 1e6
            prev_ts = ts
        # earliest pong time among this ping and the later ones (suffix minimum)
        later_pong = big
        for i in reversed(idx):
            qi = pong_of[i]
            if qi is not None:
                outcome[i] = "answered"
            elif later_pong <= pings[i][3] + timeout_ns:
                outcome[i] = "superseded"
            elif horizon[key] - pings[i][3] < timeout_ns:
                outcome[i] = "cut_off"
            else:
                outcome[i] = "unanswered"
            if qi is not None:
                later_pong = min(later_pong, pongs[qi][3])
    rows = []
    for i, p in enumerate(pings):
        qi = pong_of[i]
        pong = pongs[qi] if qi is not None else None
        oc = outcome[i]
        rows.append(
            (
                mechanism,
                p[0][0] if isinstance(p[0], tuple) else p[0],
                None,
                "client" if p[1] == 0 else "server",
                p[2],
                p[3],
                p[5],
                pong[2] if pong is not None else None,
                pong[3] if pong is not None else None,
                (pong[3] - p[3]) / 1e6 if pong is not None else None,
                interval[i],
                None if oc == "cut_off" else oc == "answered",
                oc,
            )
        )
    rows.sort(key=lambda r: (r[4], r[1]))
    return HEARTBEATS.frame(rows)


def _capture_end(capture_end: Any) -> int | None:
    if capture_end is None:
        return None
    if isinstance(capture_end, (int, np.integer)):
        return int(capture_end)
    return int(pd.Timestamp(capture_end).value)


def websocket_heartbeats(
    ws_frames: pd.DataFrame,
    *,
    connections: pd.DataFrame | None = None,
    capture_end: Any = None,
    answer_timeout_ms: float = DEFAULT_ANSWER_TIMEOUT_MS,
) -> pd.DataFrame:
    """WebSocket Ping frames and their Pongs (:data:`HEARTBEATS` rows, mechanism
    ``websocket``). ``connections`` (the connections table) tells when each connection
    ended; ``capture_end`` (ns or a Timestamp; default: the last packet of ``connections``,
    else the last frame given) when the capture did. Frames cut off by the end of the
    connection (``complete`` False) are ignored."""
    f = ws_frames
    if len(f) == 0:
        return HEARTBEATS.frame([])
    sel = f[f["opcode"].isin([9, 10]) & f["complete"].astype(bool)]
    ts = _ns(sel["ts"])
    sides = _side(sel["direction"])
    sid = sel["stream_id"].astype(object).where(sel["stream_id"].notna(), None).tolist()
    pings: list[_Event] = []
    pongs: list[_Event] = []
    for tcp, s, side, frame, t, op, payload in zip(
        sel["tcp_stream"].tolist(), sid, sides, sel["frame"].tolist(), ts,
        sel["opcode"].tolist(), sel["control_payload"].astype(object).tolist(), strict=True,
    ):
        hexp = payload if isinstance(payload, str) else ""
        ev: _Event = ((int(tcp), s), side, int(frame), int(t), hexp, hexp)
        (pings if op == 9 else pongs).append(ev)
    return _match("websocket", pings, pongs, connections=connections,
                  capture_end_ns=_capture_end(capture_end), answer_timeout_ms=answer_timeout_ms)


def http2_heartbeats(
    http2_frames: pd.DataFrame,
    *,
    connections: pd.DataFrame | None = None,
    capture_end: Any = None,
    answer_timeout_ms: float = DEFAULT_ANSWER_TIMEOUT_MS,
) -> pd.DataFrame:
    """HTTP/2 PING frames and their ACKs (:data:`HEARTBEATS` rows, mechanism ``http2``)."""
    f = http2_frames
    if len(f) == 0:
        return HEARTBEATS.frame([])
    sel = f[f["type"].astype(object) == "PING"]
    ts = _ns(sel["ts"])
    pings: list[_Event] = []
    pongs: list[_Event] = []
    for tcp, side, frame, t, ack, data in zip(
        sel["tcp_stream"].tolist(), _side(sel["direction"]), sel["frame"].tolist(), ts,
        sel["ack"].tolist(), sel["ping_data"].astype(object).tolist(), strict=True,
    ):
        hexp = data if isinstance(data, str) else ""
        ev: _Event = ((int(tcp), None), side, int(frame), int(t), hexp, hexp)
        (pongs if ack else pings).append(ev)
    return _match("http2", pings, pongs, connections=connections,
                  capture_end_ns=_capture_end(capture_end), answer_timeout_ms=answer_timeout_ms)


def tcp_keepalive_heartbeats(
    tcp_events: pd.DataFrame,
    *,
    connections: pd.DataFrame | None = None,
    capture_end: Any = None,
    answer_timeout_ms: float = DEFAULT_ANSWER_TIMEOUT_MS,
) -> pd.DataFrame:
    """TCP keep-alive probes and the ACKs answering them (:data:`HEARTBEATS` rows,
    mechanism ``tcp_keepalive``; payload NA). An ACK answers the probe whose relative
    sequence number is one below its acknowledgement number."""
    ev = tcp_events
    if len(ev) == 0:
        return HEARTBEATS.frame([])
    sel = ev[ev["kind"].astype(object).isin(["keep_alive", "keep_alive_ack"])]
    ts = _ns(sel["ts"])
    pings: list[_Event] = []
    pongs: list[_Event] = []
    for tcp, side, frame, t, kind, seq, ack in zip(
        sel["tcp_stream"].tolist(), _side(sel["direction"]), sel["frame"].tolist(), ts,
        sel["kind"].astype(object).tolist(), sel["seq"].astype(object).tolist(),
        sel["ack"].astype(object).tolist(), strict=True,
    ):
        if kind == "keep_alive":
            key = None if seq is None or seq is pd.NA else int(seq) + 1
            pings.append(((int(tcp), None), side, int(frame), int(t), key, None))
        else:
            key = None if ack is None or ack is pd.NA else int(ack)
            pongs.append(((int(tcp), None), side, int(frame), int(t), key, None))
    return _match("tcp_keepalive", pings, pongs, connections=connections,
                  capture_end_ns=_capture_end(capture_end), answer_timeout_ms=answer_timeout_ms)


_SPACES = {"initial": 0, "handshake": 1, "0rtt": 2, "1rtt": 2}
MAX_ACKS_PER_QUIC_PING = 256
"""ACK frames of the peer a QUIC PING is checked against: an ACK this many frames later no
longer answers it (peers stop repeating old ranges), and the matching stays linear"""


def _ranges(text: object) -> list[tuple[int, int]]:
    """quic_frames.ack_ranges ('7-9,3,0-1') as [(lo, hi), ...]."""
    out: list[tuple[int, int]] = []
    if not isinstance(text, str):
        return out
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if lo:
            out.append((int(lo), int(hi or lo)))
    return out


def quic_ping_heartbeats(
    quic_frames: pd.DataFrame,
    *,
    quic_connections: pd.DataFrame | None = None,
    capture_end: Any = None,
    answer_timeout_ms: float = DEFAULT_ANSWER_TIMEOUT_MS,
) -> pd.DataFrame:
    """QUIC PING frames and the ACK frames answering them (:data:`HEARTBEATS` rows,
    mechanism ``quic_ping``, keyed by ``quic_connection``). A PING is answered by the first
    ACK frame of the other side after it, in the packet number space of its packet (Initial,
    Handshake, application), whose ranges include that packet's number. A packet with two
    PING frames is one probe. ``quic_connections`` gives each connection's end (its first
    CONNECTION_CLOSE or stateless reset); ``capture_end`` (ns or a Timestamp; default: the
    last packet of ``quic_connections``, else the last frame given) the capture's."""
    f = quic_frames
    if len(f) == 0:
        return HEARTBEATS.frame([])
    types = f["frame_type"].astype(object)
    sel = f[types.isin(["PING", "ACK"]).to_numpy(bool)]
    if not len(sel) or not bool((sel["frame_type"].astype(object) == "PING").any()):
        return HEARTBEATS.frame([])
    ts = _ns(sel["ts"])
    pings: dict[tuple[int, int, int, int], tuple[int, int, str]] = {}
    acks: dict[tuple[int, int, int], list[tuple[int, int, object]]] = {}
    for conn, side, frame, t, ftype, ptype, pn, rng in zip(
        sel["quic_connection"].tolist(), _side(sel["direction"]), sel["frame"].tolist(), ts,
        sel["frame_type"].astype(object).tolist(), sel["packet_type"].astype(object).tolist(),
        sel["packet_number"].tolist(), sel["ack_ranges"].astype(object).tolist(), strict=True,
    ):
        space = _SPACES.get(str(ptype), 2)
        if ftype == "PING":
            key = (int(conn), side, space, int(pn))
            if key not in pings:
                pings[key] = (int(frame), int(t), f"{ptype}:{int(pn)}")
        else:
            acks.setdefault((int(conn), side, space), []).append((int(frame), int(t), rng))
    pong: dict[tuple[int, int, int, int], tuple[int, int]] = {}
    by_group: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for (conn, side, space, pn), (frame, _t, _p) in pings.items():
        by_group.setdefault((conn, side, space), []).append((frame, pn))
    for (conn, side, space), plist in by_group.items():
        answers = acks.get((conn, 1 - side, space), [])
        plist.sort()
        k = 0
        pending: list[tuple[int, int, int]] = []  # (frame, packet number, ACKs seen since)
        for afr, at, rng in answers:
            while k < len(plist) and plist[k][0] < afr:
                pending.append((*plist[k], 0))
                k += 1
            if not pending:
                if k >= len(plist):
                    break
                continue
            ranges = _ranges(rng)
            still = []
            for pfr, pn, seen in pending:
                if any(lo <= pn <= hi for lo, hi in ranges):
                    pong[(conn, side, space, pn)] = (afr, at)
                elif seen < MAX_ACKS_PER_QUIC_PING:
                    still.append((pfr, pn, seen + 1))
            pending = still
    end = _quic_ends(quic_connections, _capture_end(capture_end), int(ts.max()))
    timeout_ns = int(answer_timeout_ms * 1e6)
    order = sorted(pings.items(), key=lambda kv: (kv[1][0], kv[0]))
    by_sender: dict[tuple[int, int], list[int]] = {}
    for i, ((conn, side, _s, _pn), _v) in enumerate(order):
        by_sender.setdefault((conn, side), []).append(i)
    interval: list[float | None] = [None] * len(order)
    outcome: list[str] = [""] * len(order)
    big = np.iinfo(np.int64).max
    for (conn, _sender), idx in by_sender.items():
        prev: int | None = None
        for i in idx:
            t = order[i][1][1]
            interval[i] = None if prev is None else (t - prev) / 1e6
            prev = t
        later = big
        horizon = end.get(conn, end[-1])
        for i in reversed(idx):
            key, (_fr, t, _p) = order[i]
            answer = pong.get(key)
            if answer is not None:
                outcome[i] = "answered"
                later = min(later, answer[1])
            elif later <= t + timeout_ns:
                outcome[i] = "superseded"
            elif horizon - t < timeout_ns:
                outcome[i] = "cut_off"
            else:
                outcome[i] = "unanswered"
    rows = []
    for i, (key, (frame, t, payload)) in enumerate(order):
        answer = pong.get(key)
        oc = outcome[i]
        rows.append((
            "quic_ping", None, key[0], "client" if key[1] == 0 else "server", frame, t,
            payload,
            answer[0] if answer is not None else None,
            answer[1] if answer is not None else None,
            (answer[1] - t) / 1e6 if answer is not None else None,
            interval[i],
            None if oc == "cut_off" else oc == "answered",
            oc,
        ))
    return HEARTBEATS.frame(rows)


def _quic_ends(qc: pd.DataFrame | None, capture_end: int | None, latest: int) -> dict[int, int]:
    """quic_connection -> the time after which no ACK could be observed (-1: the default)."""
    cap_end = capture_end
    out: dict[int, int] = {}
    if qc is not None and len(qc):
        last = _ns(qc["last_ts"])
        if cap_end is None:
            cap_end = int(last.max())
        ends = qc["end"].astype(object).tolist()
        for conn, e, t in zip(qc["quic_connection"].tolist(), ends, last, strict=True):
            if e in ("connection_close_transport", "connection_close_application",
                     "stateless_reset"):
                out[int(conn)] = int(t)
    out[-1] = latest if cap_end is None else cap_end
    return out


def heartbeats(
    ws_frames: pd.DataFrame | None = None,
    http2_frames: pd.DataFrame | None = None,
    tcp_events: pd.DataFrame | None = None,
    *,
    connections: pd.DataFrame | None = None,
    capture_end: Any = None,
    quic_frames: pd.DataFrame | None = None,
    quic_connections: pd.DataFrame | None = None,
    answer_timeout_ms: float = DEFAULT_ANSWER_TIMEOUT_MS,
) -> pd.DataFrame:
    """Every heartbeat of the mechanisms (:data:`HEARTBEATS` columns), in capture order.
    Any table may be None (that mechanism is left out): QUIC PINGs are included when
    ``quic_frames`` is given (with ``quic_connections`` for each connection's end). Without
    ``connections`` the end of each connection is unknown and only the end of the capture
    (``capture_end``, else the latest time in the tables given) bounds the wait for a pong.

        hb = heartbeats(cap.ws_frames, cap.http2_frames, cap.tcp_events,
                        connections=cap.connections, quic_frames=cap.quic_frames,
                        quic_connections=cap.quic_connections)
    """
    kw: dict[str, Any] = {"connections": connections, "answer_timeout_ms": answer_timeout_ms}
    if capture_end is None:
        if connections is None:
            latest = [
                int(_ns(t["ts"]).max()) for t in (ws_frames, http2_frames, tcp_events)
                if t is not None and len(t)
            ]
            capture_end = max(latest) if latest else None
            kw["capture_end"] = capture_end
        else:
            kw["capture_end"] = None
        quic_end = _capture_end(capture_end)
        for t in (connections, quic_connections):
            if t is not None and len(t):
                last = int(_ns(t["last_ts"]).max())
                quic_end = last if quic_end is None else max(quic_end, last)
        if quic_end is None and quic_frames is not None and len(quic_frames):
            quic_end = int(_ns(quic_frames["ts"]).max())
    else:
        kw["capture_end"] = capture_end
        quic_end = _capture_end(capture_end)
    parts = []
    if ws_frames is not None:
        parts.append(websocket_heartbeats(ws_frames, **kw))
    if http2_frames is not None:
        parts.append(http2_heartbeats(http2_frames, **kw))
    if tcp_events is not None:
        parts.append(tcp_keepalive_heartbeats(tcp_events, **kw))
    if quic_frames is not None:
        parts.append(quic_ping_heartbeats(quic_frames, quic_connections=quic_connections,
                                          capture_end=quic_end,
                                          answer_timeout_ms=answer_timeout_ms))
    parts = [p for p in parts if len(p)]
    if not parts:
        return HEARTBEATS.frame([])
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    out = out.sort_values(["ping_frame", "tcp_stream", "quic_connection"],
                          kind="stable").reset_index(drop=True)
    # concat may widen categories: rebuild with the schema's dtypes
    return HEARTBEATS.frame(columns={c: _values(out[c]) for c in HEARTBEATS.names})


def _values(s: pd.Series) -> Any:
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        return _nullable_ns(s)
    return s.astype(object).where(s.notna(), None).tolist()


def _nullable_ns(s: pd.Series) -> list[int | None]:
    a = _ns(s)
    return [None if v == _NAT else int(v) for v in a]


# --------------------------------------------------------------------------- summary

HEARTBEAT_SUMMARY = TableSchema(
    name="heartbeat_summary",
    grain="one row per (connection, heartbeat mechanism): "
    "pcaptools.analyses.heartbeats.heartbeat_summary(), not a Capture attribute",
    key=("tcp_stream", "quic_connection", "mechanism"),
    columns=(
        Column("tcp_stream", "Int64", None,
               "Wireshark tcp.stream of the connection; NA for quic_ping"),
        Column("quic_connection", "Int64", None,
               "quic_connections.quic_connection (quic_ping); NA for the TCP mechanisms"),
        Column("mechanism", "category", None, "websocket, http2, tcp_keepalive or quic_ping"),
        *(
            col
            for who in ("client", "server")
            for col in (
                Column(f"{who}_pings", "int64", "pings", f"pings sent by the {who}"),
                Column(f"{who}_answered", "int64", "pings", f"{who} pings answered"),
                Column(f"{who}_missed", "int64", "pings",
                       f"{who} pings unanswered (outcome unanswered: no pong although the "
                       "connection lived on for the answer timeout)"),
                Column(f"{who}_superseded", "int64", "pings",
                       f"{who} pings not answered while a later one was"),
                Column(f"{who}_cut_off", "int64", "pings",
                       f"{who} pings whose connection or capture ended before the answer "
                       "timeout"),
                Column(f"{who}_interval_ms", "float64", "ms",
                       f"median time between consecutive {who} pings (the observed ping interval)"),
                Column(f"{who}_interval_max_ms", "float64", "ms",
                       f"longest time between consecutive {who} pings"),
                Column(f"{who}_rtt_p50_ms", "float64", "ms",
                       f"median ping-to-pong time of {who} pings (linear interpolation)"),
                Column(f"{who}_rtt_p95_ms", "float64", "ms", "95th percentile of the same"),
                Column(f"{who}_rtt_max_ms", "float64", "ms", "largest ping-to-pong time"),
                Column(f"{who}_last_ping_ts", TS_DTYPE, None, f"time of the last {who} ping"),
            )
        ),
        Column("client_longest_silence_ms", "float64", "ms",
               "longest time without a payload-carrying packet from the client, from the "
               "connection's first packet to its end (last FIN/RST, or the capture's end if "
               "open); NaN without the packets table. quic_ping rows: without an "
               "ack-eliciting QUIC packet (one with a frame other than ACK, PADDING and "
               "CONNECTION_CLOSE: QUIC's pure ACKs are not payload, as TCP's are not), from "
               "the connection's first packet to its end (its last packet when it ended with "
               "a CONNECTION_CLOSE or stateless reset, else the capture's end); NaN without "
               "quic_packets and quic_connections, or when a packet not decrypted (its frames "
               "unknown) falls inside the longest silence and could have broken it"),
        Column("client_silence_start_ts", TS_DTYPE, None, "when that silence began"),
        Column("server_longest_silence_ms", "float64", "ms", "same for the server"),
        Column("server_silence_start_ts", TS_DTYPE, None, "when that silence began"),
    ),
)


def _silences(
    packets: pd.DataFrame | None, connections: pd.DataFrame | None, capture_end_ns: int | None
) -> dict[tuple[int, int], tuple[float, int]]:
    """(tcp_stream, side) -> (longest silence ms, start ns), from payload-carrying packets."""
    out: dict[tuple[int, int], tuple[float, int]] = {}
    if packets is None or connections is None or not len(packets) or not len(connections):
        return out
    pk = packets[["tcp_stream", "direction", "ts"]][
        packets["tcp_stream"].notna() & (packets["tcp_len"].fillna(0) > 0)]
    first = dict(zip(connections["tcp_stream"].tolist(), _ns(connections["first_ts"]),
                     strict=True))
    last = _ns(connections["last_ts"])
    cap_end = capture_end_ns
    if cap_end is None:
        cap_end = int(last.max()) if len(last) else 0
    ends: dict[int, int] = {}
    for tcp, reason, e in zip(connections["tcp_stream"].tolist(),
                              connections["end_reason"].astype(object).tolist(),
                              _ns(connections["end_ts"]), strict=True):
        ends[int(tcp)] = int(e) if reason in ("fin", "rst") and e != _NAT else cap_end
    # each (connection, side)'s payload times in frame order: a stable sort by the pair
    tcps = pk["tcp_stream"].to_numpy(np.int64)
    pair = tcps * 2 + (pk["direction"].astype(object).to_numpy() != "client_to_server")
    order = np.argsort(pair, kind="stable")
    pair, t_all = pair[order], _ns(pk["ts"])[order]
    for tcp in first:
        for side in (0, 1):
            k2 = int(tcp) * 2 + side
            lo, hi = np.searchsorted(pair, k2, "left"), np.searchsorted(pair, k2, "right")
            arr = np.concatenate(([int(first[tcp])], t_all[lo:hi],
                                  [ends.get(int(tcp), cap_end)])).astype(np.int64)
            gaps = np.diff(arr)
            if len(gaps):
                k = int(np.argmax(gaps))
                out[(int(tcp), side)] = (float(gaps[k]) / 1e6, int(arr[k]))
    return out


_NOT_ELICITING = frozenset({"ACK", "PADDING", "CONNECTION_CLOSE"})
"""QUIC frames that do not make a packet ack-eliciting (RFC 9002 §2): the rest is data"""

#: quic_packets.status values whose frames are unknown (not decrypted)
_QUIC_UNKNOWN = frozenset(
    {"no_key", "no_epoch_key", "unknown_cid", "no_client_initial", "decrypt_failed",
     "unsupported_version"}
)


def _quic_silences(
    quic_packets: pd.DataFrame | None, quic_connections: pd.DataFrame | None,
    capture_end_ns: int | None,
) -> dict[tuple[int, int], tuple[float, int] | None]:
    """(quic_connection, side) -> (longest silence ms, start ns), or None when a packet not
    decrypted may have broken it: the gaps between the connection's first packet, the side's
    ack-eliciting packets and the connection's end (:func:`_quic_ends`). Packets whose frames
    are unknown count as nothing; a gap holding none of them is exact, and when one such gap
    is at least as long as every gap holding one, it is the longest silence whatever those
    packets carried."""
    out: dict[tuple[int, int], tuple[float, int] | None] = {}
    if quic_packets is None or quic_connections is None or not len(quic_connections):
        return out
    qc = quic_connections
    ends = _quic_ends(qc, capture_end_ns, int(_ns(qc["last_ts"]).max()))
    data: dict[tuple[int, int], list[int]] = {}
    unknown: dict[tuple[int, int], list[int]] = {}
    if len(quic_packets):
        status = quic_packets["status"].astype(object).tolist()
        frames = quic_packets["frames"].astype(object).tolist()
        for conn, side, t, st, fr in zip(
            quic_packets["quic_connection"].astype("int64").tolist(),
            _side(quic_packets["direction"]), _ns(quic_packets["ts"]), status, frames,
            strict=True,
        ):
            key = (int(conn), side)
            if st == "decrypted":
                names = set() if fr is None or pd.isna(fr) else set(str(fr).split(","))
                if names - _NOT_ELICITING:
                    data.setdefault(key, []).append(int(t))
            elif st in _QUIC_UNKNOWN:
                unknown.setdefault(key, []).append(int(t))
    for conn, first in zip(qc["quic_connection"].tolist(), _ns(qc["first_ts"]), strict=True):
        end = ends.get(int(conn), ends[-1])
        for side in (0, 1):
            key = (int(conn), side)
            arr = np.asarray([int(first), *data.get(key, []), end], dtype=np.int64)
            arr.sort()
            gaps = np.diff(arr)
            if not len(gaps):
                continue
            hidden = np.asarray(sorted(unknown.get(key, [])), dtype=np.int64)
            # gaps holding a packet whose frames are unknown (strictly inside)
            lo = np.searchsorted(hidden, arr[:-1], side="right")
            hi = np.searchsorted(hidden, arr[1:], side="left")
            dirty = hi > lo
            clean = np.where(dirty, -1, gaps)
            k = int(np.argmax(clean))
            if clean[k] < 0 or (dirty.any() and int(gaps[dirty].max()) > int(clean[k])):
                out[key] = None
            else:
                out[key] = (float(gaps[k]) / 1e6, int(arr[k]))
    return out


def heartbeat_summary(
    hb: pd.DataFrame,
    *,
    connections: pd.DataFrame | None = None,
    packets: pd.DataFrame | None = None,
    capture_end: Any = None,
    ws_connections: pd.DataFrame | None = None,
    http2_connections: pd.DataFrame | None = None,
    quic_connections: pd.DataFrame | None = None,
    quic_packets: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per (tcp_stream, mechanism) of ``hb`` (the output of :func:`heartbeats` or
    ``Capture.ws_heartbeats``), columns :data:`HEARTBEAT_SUMMARY`: pings per sender and
    their outcomes, the observed ping interval, pong latency percentiles, and the longest
    silence of each direction (needs ``connections`` and ``packets``; NaN otherwise; for
    quic_ping rows ``quic_connections`` and ``quic_packets``, counting ack-eliciting packets).

    ``ws_connections`` / ``http2_connections`` (the Capture tables) add a row, with zero
    pings, for every WebSocket / HTTP/2 connection that sent no ping at all: an idle
    connection without heartbeats is what a middlebox times out. ``quic_connections`` adds
    one (``quic_ping``) for every QUIC connection with decrypted packets after its Initials
    (where a PING could have been seen) that sent none. TCP rows come first (by tcp_stream),
    then QUIC rows (by quic_connection)."""
    keys: set[tuple[int, int, str]] = set()
    """(0 TCP / 1 QUIC, tcp_stream or quic_connection, mechanism)"""
    groups: dict[tuple[int, int, str], np.ndarray] = {}
    """key -> the positions of its pings in ``cols``"""
    cols: tuple[np.ndarray, ...] = ()
    if len(hb):
        quic = hb["quic_connection"].notna().to_numpy(bool)
        conn = np.where(quic, hb["quic_connection"].astype("Int64").fillna(-1).to_numpy(np.int64),
                        hb["tcp_stream"].astype("Int64").fillna(-1).to_numpy(np.int64))
        h = hb.assign(_ts=_ns(hb["ping_ts"]), mechanism=hb["mechanism"].astype(object),
                      sender=hb["sender"].astype(object), outcome=hb["outcome"].astype(object),
                      _q=quic.astype(np.int64), _c=conn)
        indices: dict[Any, Any] = h.groupby(["_q", "_c", "mechanism"], sort=True).indices
        for (q, c, mech), at in indices.items():
            k = (int(q), int(c), str(mech))
            groups[k] = at
            keys.add(k)
        cols = (h["sender"].to_numpy(object), h["outcome"].to_numpy(object),
                h["rtt_ms"].to_numpy(np.float64, na_value=np.nan),
                h["interval_ms"].to_numpy(np.float64, na_value=np.nan), h["_ts"].to_numpy(np.int64))
    for table, mech in ((ws_connections, "websocket"), (http2_connections, "http2")):
        if table is not None:
            keys.update((0, int(t), mech) for t in table["tcp_stream"].tolist())
    if quic_connections is not None and len(quic_connections):
        qc = quic_connections
        seen = (qc["client_decrypted_packets"].to_numpy(np.int64)
                + qc["server_decrypted_packets"].to_numpy(np.int64)) > 0
        keys.update((1, int(q), "quic_ping") for q in qc["quic_connection"][seen].tolist())
    if not keys:
        return HEARTBEAT_SUMMARY.frame([])
    sil = _silences(packets, connections, _capture_end(capture_end))
    qsil = _quic_silences(quic_packets, quic_connections, _capture_end(capture_end))
    rows: list[tuple[Any, ...]] = []
    for q, tcp, mech in sorted(keys):
        pos = groups.get((q, tcp, mech))
        row: list[Any] = [None, tcp, mech] if q else [tcp, None, mech]
        if pos is None:  # (no ping either way)
            row += _NO_PINGS
        else:
            row += _sender_stats(cols, pos, "client") + _sender_stats(cols, pos, "server")
        for side in (0, 1):
            v = qsil.get((tcp, side)) if q else sil.get((tcp, side))
            row += [v[0], v[1]] if v is not None else [None, None]
        rows.append(tuple(row))
    return HEARTBEAT_SUMMARY.frame(rows)


_NO_PINGS = [0, 0, 0, 0, 0, None, None, None, None, None, None] * 2
"""what :func:`_sender_stats` says of both senders of a connection without pings"""


def _sender_stats(cols: tuple[np.ndarray, ...], pos: np.ndarray, who: str) -> list[Any]:
    """The summary's pings, outcomes, interval, pong latency and last ping of ``who``'s pings
    among the pings at ``pos`` (one connection's and mechanism's) of the heartbeats' columns
    ``cols`` (sender, outcome, rtt_ms, interval_ms, ping ns)."""
    sender, outcome, rtt_ms, interval_ms, ping_ns = cols
    mine = pos[sender[pos] == who]
    oc = outcome[mine]
    rtt = rtt_ms[mine]
    rtt = rtt[~np.isnan(rtt)]
    iv = interval_ms[mine]
    iv = iv[~np.isnan(iv)]
    return [
        len(mine),
        int((oc == "answered").sum()),
        int((oc == "unanswered").sum()),
        int((oc == "superseded").sum()),
        int((oc == "cut_off").sum()),
        float(np.median(iv)) if len(iv) else None,
        float(iv.max()) if len(iv) else None,
        float(np.percentile(rtt, 50)) if len(rtt) else None,
        float(np.percentile(rtt, 95)) if len(rtt) else None,
        float(rtt.max()) if len(rtt) else None,
        int(ping_ns[mine].max()) if len(mine) else None,
    ]
