"""WebSocket (RFC 6455) with permessage-deflate (RFC 7692), sans-IO.

    from pcaptools.protocols.websocket import websocket_factory
    make_ws = websocket_factory(tcp_stream=0, diag=diag)   # for Http1Observer
    obs = make_ws(request, response)                       # on the 101
    events = obs.feed(chunk)            # WsFrame, WsMessage, WsConnectionEnded

Modules: :mod:`.frames` (frame header, masking, Close payloads, frame search: pure
functions of bytes), :mod:`.handshake` (the opening handshake: key/accept, subprotocol,
extensions), :mod:`.inflate` (permessage-deflate), :mod:`.state` (per-direction and
per-message state), :mod:`.observer` (the state machine), :mod:`.events` (what it emits).
"""

from __future__ import annotations

from .events import WsConnectionEnded, WsFrame, WsHandshake, WsMessage
from .frames import OPCODE_NAMES, opcode_name, valid_close_code
from .handshake import accept_for_key, handshake_from_headers, parse_extensions, parse_handshake
from .inflate import INFLATE_DRAIN_BYTES
from .observer import (
    CONTROL_KEEP_BYTES,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_JSON_BYTES,
    DEFAULT_PREVIEW_CHARS,
    HUNT_BUDGET_BYTES,
    WebSocketObserver,
    websocket_factory,
)

__all__ = [
    "CONTROL_KEEP_BYTES",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_JSON_BYTES",
    "DEFAULT_PREVIEW_CHARS",
    "HUNT_BUDGET_BYTES",
    "INFLATE_DRAIN_BYTES",
    "OPCODE_NAMES",
    "WebSocketObserver",
    "WsConnectionEnded",
    "WsFrame",
    "WsHandshake",
    "WsMessage",
    "accept_for_key",
    "handshake_from_headers",
    "opcode_name",
    "parse_extensions",
    "parse_handshake",
    "valid_close_code",
    "websocket_factory",
]
