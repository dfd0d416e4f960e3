"""What :class:`~.observer.Http3Observer` records: one :class:`Http3Frame` per HTTP/3 frame and
one :class:`Http3StreamEnded` per request stream (client-initiated bidirectional stream);
server-sent events of ``text/event-stream`` responses are the SSE parser's own
:class:`~pcaptools.protocols.sse.SseEvent` (``stream_id`` is the QUIC stream id,
``tcp_stream`` None).

Times are capture times in integer ns; ``frame`` is the Wireshark frame number of the packet
that delivered the last byte of what the event describes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...tcp.stream import Direction, Event

__all__ = ["Headers", "Http3Frame", "Http3StreamEnded"]

Headers = tuple[tuple[str, str], ...]


@dataclass(slots=True, kw_only=True)
class Http3Frame(Event):
    """One HTTP/3 frame (RFC 9114 §7). Type-specific fields are None for other types. Not
    frozen: the header list of a HEADERS or PUSH_PROMISE frame whose QPACK block waited for
    encoder-stream bytes is filled in when it is decoded."""

    ts_ns: int
    frame: int
    direction: Direction
    quic_connection: int
    stream_id: int
    stream_kind: str
    """request, push, control (the stream the frame is on)"""
    type: int
    """frame type code (:data:`~.frames.FRAME_TYPES`)"""
    length: int
    """payload length from the frame header"""
    headers: Headers | None = None
    """HEADERS / PUSH_PROMISE: the decoded field section (None until or unless decoded)"""
    qpack: str | None = None
    """HEADERS / PUSH_PROMISE: decoded, blocked (decoded later: see ``decoded_frame``),
    failed, never_decoded, too_long"""
    decoded_frame: int | None = None
    """the packet whose bytes made the field section decodable (``frame`` when at once; the
    encoder-stream packet when the block was blocked)"""
    settings: tuple[tuple[int, int], ...] | None = None
    """SETTINGS: (identifier, value) pairs in wire order"""
    goaway_id: int | None = None
    """GOAWAY: the stream id (from the server) or push id (from the client)"""
    push_id: int | None = None
    """PUSH_PROMISE, CANCEL_PUSH, MAX_PUSH_ID: the push id"""


@dataclass(slots=True, kw_only=True)
class Http3StreamEnded(Event):
    """One HTTP/3 request stream, summarised when both sides have ended (FIN or
    RESET_STREAM) or when the connection ends."""

    ts_ns: int
    frame: int
    direction: Direction | None
    quic_connection: int
    stream_id: int
    partial: bool
    """the start of the request was not captured (the stream's first bytes were missing)"""
    request_headers: Headers | None
    response_headers: Headers | None
    method: str | None
    scheme: str | None
    authority: str | None
    path: str | None
    status: int | None
    content_type: str | None
    informational: int
    first_frame: int
    first_ts_ns: int
    request_frame: int | None
    request_ts_ns: int | None
    request_end_ts_ns: int | None
    response_headers_frame: int | None
    response_headers_ts_ns: int | None
    first_data_ts_ns: int | None
    end_frame: int
    end_ts_ns: int
    client_data_bytes: int
    server_data_bytes: int
    client_header_bytes: int
    server_header_bytes: int
    client_frames: int
    server_frames: int
    end_reason: str
    reset_error_code: int | None
    reset_by: Direction | None
    desynced: bool
    sse_events: int
    content_encoding: str | None
    decoded_body_bytes: int | None
    content_decoding: str | None
