"""What :class:`~.observer.WebSocketObserver` emits: one :class:`WsFrame` per frame, one
:class:`WsMessage` per data message, one :class:`WsConnectionEnded` per connection (with the
:class:`WsHandshake` the opening handshake negotiated, a plain value, not an event).

:class:`WsFrame` and :class:`WsMessage` are named tuples, as
:class:`~pcaptools.protocols.sse.SseEvent` is: the observer makes one per frame and message
with a single C call (``tuple.__new__`` on the tuple of its values: :data:`new_event`),
where a frozen dataclass costs a Python call and a slot assignment per field (their share
of the WebSocket pass: benchmarks/PROFILE.md). Read them by attribute, build one with
keywords, change one with ``_replace``; they are events
(:class:`~pcaptools.tcp.stream.Event`) like every other. The once-per-connection
:class:`WsConnectionEnded` and :class:`WsHandshake` stay frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ...tcp.stream import Direction, Event

__all__ = ["WsConnectionEnded", "WsFrame", "WsHandshake", "WsMessage"]

Headers = tuple[tuple[str, str], ...]
"""(lower-cased name, value) in wire order"""


@dataclass(frozen=True, slots=True, kw_only=True)
class WsHandshake:
    """What the opening handshake negotiated, and whether it was consistent."""

    request_frame: int | None
    """packet that completed the Upgrade request (None: request not captured)"""
    request_ts_ns: int | None
    response_frame: int | None
    """packet that completed the ``101`` response (HTTP/2: the 200 HEADERS)"""
    response_ts_ns: int | None
    http_version: str
    """``1.1`` (Upgrade + 101) or ``2`` (RFC 8441 extended CONNECT)"""
    path: str | None
    host: str | None
    origin: str | None
    version: str | None
    """Sec-WebSocket-Version of the request (13)"""
    key: str | None
    accept: str | None
    accept_ok: bool | None
    """Sec-WebSocket-Accept matches the key; None when there is nothing to check"""
    offered_protocols: str | None
    """Sec-WebSocket-Protocol of the request, as sent"""
    protocol: str | None
    """subprotocol the server selected"""
    offered_extensions: str | None
    """Sec-WebSocket-Extensions of the request, as sent"""
    extensions: str | None
    """Sec-WebSocket-Extensions of the response, as sent (what is in effect)"""
    permessage_deflate: bool
    client_no_context_takeover: bool
    """the client resets its compressor after each message"""
    server_no_context_takeover: bool
    client_max_window_bits: int | None
    server_max_window_bits: int | None
    other_extensions: tuple[str, ...]
    """accepted extensions pcaptools does not decode (their RSV bits are not reported)"""
    problems: tuple[tuple[str, str], ...]
    """(anomaly code, detail) found in the handshake"""


class _WsFrameFields(NamedTuple):
    """The fields of :class:`WsFrame` (a NamedTuple cannot have another base)."""

    ts_ns: int
    frame: int
    """packet that delivered the frame's last byte (tshark shows the frame there)"""
    direction: Direction
    tcp_stream: int
    stream_id: int | None
    """HTTP/2 stream (RFC 8441); None over HTTP/1.1"""
    index: int  # type: ignore[assignment]  # a field, not tuple.index
    """0-based number of the frame in its direction"""
    start_ts_ns: int
    start_frame: int
    """packet that delivered the frame's first byte"""
    fin: bool
    rsv: int
    """the three reserved bits, RSV1 = 4, RSV2 = 2, RSV3 = 1 (tshark's websocket.rsv)"""
    opcode: int
    masked: bool
    payload_len: int
    """announced payload length (may exceed what was captured; up to 2^64 - 1)"""
    header_bytes: int
    """2 + extended length (0, 2 or 8) + masking key (0 or 4)"""
    lost_bytes: int
    """payload bytes never captured (gaps inside the frame)"""
    complete: bool
    """False when the connection (or capture) ended inside the frame"""
    message_index: int | None
    """the data message this frame belongs to (WsMessage.index); None for control frames"""
    close_code: int | None
    close_reason: str | None
    """Close reason, UTF-8 (invalid bytes replaced)"""
    control_payload: bytes | None
    """unmasked payload of a control frame (first 125 bytes)"""


class WsFrame(_WsFrameFields, Event):
    """One WebSocket frame (a named tuple: see the module's docstring)."""

    __slots__ = ()


class _WsMessageFields(NamedTuple):
    """The fields of :class:`WsMessage` (a NamedTuple cannot have another base)."""

    ts_ns: int
    frame: int
    """packet that completed the message (its last frame)"""
    direction: Direction
    tcp_stream: int
    stream_id: int | None
    index: int  # type: ignore[assignment]  # a field, not tuple.index
    """0-based number of the message in its direction"""
    type: str
    """text, binary, or unknown (continuation frames whose start was not seen)"""
    fragments: int
    first_ts_ns: int
    first_frame: int
    """packet that delivered the first byte of the first frame"""
    wire_bytes: int
    """frame headers + payloads"""
    payload_bytes: int
    """payload bytes (compressed size for compressed messages); a frame cut off by the end of
    the connection counts the bytes that were sent, not its announced length"""
    lost_bytes: int
    compressed: bool
    """RSV1 on the first frame with permessage-deflate negotiated"""
    decompress: str | None
    """None (not compressed), ok, failed, limit (stopped at the cap), skipped (bytes lost or
    not inspected, or an earlier failure broke the shared compression context),
    incomplete (the message never ended)"""
    decompressed_bytes: int | None
    """bytes inflated (for ``limit``: the cap plus one; None when nothing was inflated)"""
    complete: bool
    end_reason: str
    """fin, interrupted (a new message started before FIN), connection_closed,
    open_at_eof, lost_sync (bytes lost between frames)"""
    utf8_ok: bool | None
    """text messages: valid UTF-8; None when not text or not fully seen"""
    preview: str | None
    """text messages: the first characters (invalid UTF-8 replaced)"""
    preview_truncated: bool
    json_type: str | None
    """value of the first ``"type": "..."`` in the preview (realtime APIs name events so)"""
    json_text: bytes | None = None
    """the whole text (decompressed, UTF-8) of a text message that starts like a JSON object
    (``{`` after whitespace), when it was complete, fully captured, valid UTF-8 and at most
    ``max_json_bytes`` long; None otherwise (the preview still has its start)"""


class WsMessage(_WsMessageFields, Event):
    """One data message: a text or binary frame and its continuation frames (a named tuple:
    see the module's docstring)."""

    __slots__ = ()


new_event = tuple.__new__
"""``new_event(WsFrame, values)``: the event from the tuple of its values in field order,
without the keyword-argument ``__new__`` of a named tuple (one C call)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class WsConnectionEnded(Event):
    """A WebSocket connection is over (both directions ended, or the capture did)."""

    ts_ns: int
    frame: int
    tcp_stream: int
    stream_id: int | None
    handshake: WsHandshake
    client_frames: int
    server_frames: int
    client_messages: int
    server_messages: int
    client_payload_bytes: int
    server_payload_bytes: int
    client_wire_bytes: int
    server_wire_bytes: int
    client_pings: int
    server_pings: int
    client_pongs: int
    server_pongs: int
    client_mask_errors: int
    """client frames without a mask (RFC 6455 §5.1: the client MUST mask)"""
    server_mask_errors: int
    """server frames with a mask"""
    client_lost_bytes: int
    server_lost_bytes: int
    client_skipped_bytes: int
    """bytes not parsed (searched for a frame boundary, or after the direction desynced)"""
    server_skipped_bytes: int
    close_by: Direction | None
    """who sent the first Close frame"""
    close_frame: int | None
    close_ts_ns: int | None
    client_close_code: int | None
    client_close_reason: str | None
    server_close_code: int | None
    server_close_reason: str | None
    client_close_frame: int | None
    server_close_frame: int | None
    end_reason: str
    """close_handshake (both sent Close), close_unanswered (one side only), no_close
    (the TCP connection ended without Close frames), open_at_eof, desynced"""
    desynced: bool
