"""``load(max_events_per_connection=N)``: a bound on the per-record rows one connection adds.

The tables that grow with a connection's traffic get one row per TLS record, HTTP/2 frame,
SSE event, WebSocket frame and WebSocket message. A hostile or pathological connection (a
flood of 9-byte HTTP/2 frames, an SSE stream of empty events) can make millions of them.
Past ``N`` such rows for one connection, its further per-record events are dropped and one
``table.events_truncated`` row says from which frame; the connection's summary rows
(handshakes, requests, HTTP/2 streams, WebSocket connections) are kept, and its TCP
analysis is not affected. ``None`` (the default) keeps every row: ``load(out=...)`` is the
way to keep them all with bounded memory.
"""

from __future__ import annotations

from .diagnostics import Diagnostics
from .protocols.http2 import Http2Frame
from .protocols.sse import SseEvent
from .protocols.tls.events import TlsRecord
from .protocols.websocket import WsFrame, WsMessage

#: the events that become rows of the per-record tables (tls_records, http2_frames,
#: sse_events, ws_frames, ws_messages): the ones the cap drops
PER_RECORD_EVENTS: frozenset[type] = frozenset(
    {TlsRecord, Http2Frame, SseEvent, WsFrame, WsMessage})


class EventCap:
    """Counts per-record events per tcp_stream and drops them past ``limit`` (one warning
    row per connection that hit it)."""

    __slots__ = ("counts", "diag", "limit")

    def __init__(self, limit: int, diag: Diagnostics) -> None:
        if limit < 0:
            raise ValueError(f"max_events_per_connection must be >= 0, got {limit}")
        self.limit = limit
        self.diag = diag
        self.counts: dict[int, int] = {}

    def __call__(self, events: list[object]) -> list[object]:
        """``events`` (one observer call's, all of one connection) without the per-record
        events beyond the limit."""
        kinds = PER_RECORD_EVENTS
        n = 0
        for e in events:
            if type(e) in kinds:
                n += 1
        if not n:
            return events
        stream: int = getattr(next(e for e in events if type(e) in kinds), "tcp_stream", -1)
        seen = self.counts.get(stream, 0)
        self.counts[stream] = seen + n
        if seen + n <= self.limit:
            return events
        room = max(0, self.limit - seen)
        out: list[object] = []
        for e in events:
            if type(e) in kinds:
                if room == 0:
                    if seen <= self.limit:  # the first event over the limit: say so once
                        seen = self.limit + 1
                        self.diag.add(
                            "table.events_truncated",
                            f"more than {self.limit:,} per-record events (TLS records, HTTP/2 "
                            f"frames, SSE events, WebSocket frames/messages) on this connection: "
                            f"its later ones are not in those tables "
                            f"(max_events_per_connection)",
                            ts_ns=getattr(e, "ts_ns", None), frame=getattr(e, "frame", None),
                            tcp_stream=stream,
                        )
                    continue
                room -= 1
            out.append(e)
        return out
