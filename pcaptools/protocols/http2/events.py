"""What :class:`~.observer.Http2Observer` emits: one :class:`Http2Frame` per complete frame, one
:class:`Http2StreamEnded` per stream, one :class:`Http2ConnectionEnded` per connection; and
:class:`H2cUpgrade`, what the HTTP/1.1 observer hands over on ``Upgrade: h2c``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from ...tcp.stream import Direction, Event
from .frames import (
    DATA,
    F_ACK,
    F_END_STREAM,
    FRAME_TYPES,
    HEADERS,
    PING,
    SETTINGS,
    parse_settings_payload,
)

__all__ = [
    "H2cUpgrade",
    "Headers",
    "Http2ConnectionEnded",
    "Http2Frame",
    "Http2StreamEnded",
]

Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Http2Frame(Event):
    """One complete HTTP/2 frame. Type-specific fields are None for other types."""

    ts_ns: int
    """capture time of the packet that delivered the frame's last byte"""
    frame: int
    """Wireshark frame number of that packet (tshark attributes the frame to it too)"""
    direction: Direction
    tcp_stream: int
    stream_id: int
    type: int
    """frame type code (0-9 are RFC 9113 types; see :data:`FRAME_TYPES`)"""
    flags: int
    length: int
    """payload length from the frame header"""
    pad_length: int | None = None
    """padding bytes (PADDED flag set), else None"""
    data_bytes: int | None = None
    """DATA: payload bytes excluding padding"""
    header_block_bytes: int | None = None
    """HEADERS / PUSH_PROMISE / CONTINUATION: HPACK fragment bytes carried by this frame"""
    headers: Headers | None = None
    """decoded header list, on the frame that ended a header block (None if undecodable)"""
    priority_exclusive: bool | None = None
    priority_dependency: int | None = None
    priority_weight: int | None = None
    """PRIORITY / HEADERS with PRIORITY: the weight field as sent (0-255; real weight is +1)"""
    settings: tuple[tuple[int, int], ...] | None = None
    """SETTINGS: (identifier, value) pairs in wire order"""
    window_increment: int | None = None
    error_code: int | None = None
    """RST_STREAM / GOAWAY error code"""
    ping_data: bytes | None = None
    ping_rtt_ns: int | None = None
    """PING with ACK: time since the matching PING from the other side, if seen"""
    last_stream_id: int | None = None
    promised_stream_id: int | None = None
    debug_data: bytes | None = None
    """GOAWAY additional debug data"""

    @property
    def type_name(self) -> str:
        return FRAME_TYPES[self.type] if self.type < 10 else "unknown"

    @property
    def end_stream(self) -> bool:
        return self.type in (DATA, HEADERS) and bool(self.flags & F_END_STREAM)

    @property
    def ack(self) -> bool:
        return self.type in (SETTINGS, PING) and bool(self.flags & F_ACK)


@dataclass(frozen=True, slots=True, kw_only=True)
class Http2StreamEnded(Event):
    """Summary of one stream, emitted when it ends (or when the connection ends)."""

    ts_ns: int
    """capture time at which the stream ended (or the connection was finalised)"""
    frame: int
    direction: Direction | None
    """direction of the frame that ended it; None when the connection ended it"""
    tcp_stream: int
    stream_id: int
    pushed: bool
    """server push: the request came from a PUSH_PROMISE"""
    parent_stream_id: int | None
    """for pushed streams: the stream that carried the PUSH_PROMISE"""
    partial: bool
    """True when the stream's opening HEADERS was not seen (capture started mid-stream)"""
    request_headers: Headers | None
    response_headers: Headers | None
    """final (non-1xx) response headers"""
    method: str | None
    scheme: str | None
    authority: str | None
    """``:authority``, else the ``host`` header"""
    path: str | None
    status: int | None
    content_type: str | None
    informational: int
    """1xx responses seen before the final one"""
    first_frame: int
    first_ts_ns: int
    request_frame: int | None
    """frame that completed the request header block (PUSH_PROMISE for pushed streams)"""
    request_ts_ns: int | None
    request_end_ts_ns: int | None
    """END_STREAM from the client (for pushed streams: the promise)"""
    response_headers_frame: int | None
    response_headers_ts_ns: int | None
    first_data_ts_ns: int | None
    """first DATA frame from the server"""
    end_frame: int
    end_ts_ns: int
    client_data_bytes: int
    server_data_bytes: int
    """DATA payload bytes, padding excluded"""
    client_header_bytes: int
    server_header_bytes: int
    """HPACK header block bytes (HEADERS + CONTINUATION fragments)"""
    client_frames: int
    server_frames: int
    end_reason: str
    """end_stream, rst_stream, goaway, connection_closed, open_at_eof, idle (only PRIORITY seen),
    evicted (summarised early: more than 100 000 streams open at once)"""
    rst_error_code: int | None
    rst_by: Direction | None
    sse_events: int
    content_encoding: str | None = None
    """the response's content-encoding header as sent (field lines joined with ", ")"""
    decoded_body_bytes: int | None = None
    """response DATA bytes after content decoding (up to where decoding stopped); for an
    identity body ``server_data_bytes``; None when not decoded (unsupported coding)"""
    content_decoding: str | None = None
    """identity, decoded, corrupt, truncated, gap, limit, unsupported, incomplete (see
    :attr:`pcaptools.protocols.body.Body.status`); None when no response DATA byte was seen"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Http2ConnectionEnded(Event):
    """Connection-level facts, emitted once when the connection is finalised."""

    ts_ns: int
    frame: int
    direction: Direction | None
    tcp_stream: int
    start: str
    """preface, upgrade (h2c via HTTP/1.1 Upgrade), mid_stream"""
    preface_frame: int | None
    client_settings: tuple[tuple[int, int], ...]
    """latest value of each setting the client sent, in first-seen order"""
    server_settings: tuple[tuple[int, int], ...]
    streams: int
    peak_open_streams: int
    client_frames: int
    server_frames: int
    client_bytes: int
    server_bytes: int
    client_skipped_bytes: int
    """bytes not parsed (lost, searched through for alignment, or after desync)"""
    server_skipped_bytes: int
    ping_count: int
    """PING frames answered by an ACK with the same payload"""
    ping_rtt_min_ns: int | None
    ping_rtt_max_ns: int | None
    ping_rtt_sum_ns: int
    goaway_frame: int | None
    goaway_ts_ns: int | None
    goaway_by: Direction | None
    goaway_last_stream_id: int | None
    goaway_error_code: int | None
    client_flow_stalls: int
    """times a flow-control window (connection or stream) of data sent by the client reached 0"""
    server_flow_stalls: int
    client_stalled_ns: int
    """total time the connection-level window for client data stayed at or below 0"""
    server_stalled_ns: int
    flow_control_known: bool
    """False when the connection start was not seen (windows unknown: stall columns are 0)"""
    hpack_errors: int
    desynced: bool
    """True if a direction could not be parsed to its end"""


@dataclass(frozen=True, slots=True, kw_only=True)
class H2cUpgrade:
    """The HTTP/1.1 request upgraded to h2c (RFC 7540 §3.2); it becomes stream 1."""

    method: str
    path: str
    authority: str | None
    headers: Headers
    settings: tuple[tuple[int, int], ...]
    """decoded from the HTTP2-Settings request header"""
    request_frame: int
    request_ts_ns: int
    request_end_frame: int
    request_end_ts_ns: int
    header_bytes: int
    body_bytes: int

    @staticmethod
    def decode_settings_header(value: str) -> tuple[tuple[int, int], ...]:
        """HTTP2-Settings (base64url SETTINGS payload) -> pairs; () if it does not decode."""
        try:
            raw = base64.urlsafe_b64decode(value.strip() + "=" * (-len(value.strip()) % 4))
        except (ValueError, TypeError):
            return ()
        return parse_settings_payload(raw)


# the slot descriptors of the frozen Http2Frame: setting them directly builds the same object as
# Http2Frame(...) (whose __init__ goes through object.__setattr__ for each of its 23 fields),
# several times faster; None when the class no longer has the layout assumed here
_FRAME_BASE = ("ts_ns", "frame", "direction", "tcp_stream", "stream_id", "type", "flags", "length")
_FRAME_SET: dict[str, Any] | None = {
    f.name: vars(Http2Frame)[f.name].__set__ for f in fields(Http2Frame)
}
if (
    tuple(f.name for f in fields(Http2Frame))[:8] != _FRAME_BASE
    or hasattr(Http2Frame, "__post_init__")
    or len(fields(Http2Frame)) != 23
    or any(f.default is not None for f in fields(Http2Frame)[8:])
):  # pragma: no cover
    _FRAME_SET = None
_new_object = object.__new__


def _make_new_frame() -> Callable[[int, int, Direction, int, int, int, int, int], Http2Frame]:
    assert _FRAME_SET is not None
    s0, s1, s2, s3, s4, s5, s6, s7 = (_FRAME_SET[name] for name in _FRAME_BASE)
    rest = [setter for name, setter in _FRAME_SET.items() if name not in _FRAME_BASE]
    r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14 = rest

    def new_frame(
        ts: int, frame: int, direction: Direction, tcp_stream: int, sid: int, typ: int,
        flags: int, length: int,
    ) -> Http2Frame:
        """An Http2Frame with these base fields and every type-specific field None."""
        ev: Http2Frame = _new_object(Http2Frame)
        s0(ev, ts)
        s1(ev, frame)
        s2(ev, direction)
        s3(ev, tcp_stream)
        s4(ev, sid)
        s5(ev, typ)
        s6(ev, flags)
        s7(ev, length)
        r0(ev, None)
        r1(ev, None)
        r2(ev, None)
        r3(ev, None)
        r4(ev, None)
        r5(ev, None)
        r6(ev, None)
        r7(ev, None)
        r8(ev, None)
        r9(ev, None)
        r10(ev, None)
        r11(ev, None)
        r12(ev, None)
        r13(ev, None)
        r14(ev, None)
        return ev

    return new_frame


_new_frame = _make_new_frame() if _FRAME_SET is not None else None
_set_pad_length: Any = _FRAME_SET["pad_length"] if _FRAME_SET is not None else None
_set_data_bytes: Any = _FRAME_SET["data_bytes"] if _FRAME_SET is not None else None
