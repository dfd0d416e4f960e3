"""WebSocket (RFC 6455) with permessage-deflate (RFC 7692), sans-IO.

    from pcaptools.protocols.websocket import websocket_factory
    make_ws = websocket_factory(tcp_stream=0, diag=diag)   # for Http1Observer
    obs = make_ws(request, response)                       # on the 101
    events = obs.feed(chunk)            # WsFrame, WsMessage, WsConnectionEnded

Modules: :mod:`.observer` (the state machine).
"""

from __future__ import annotations

from .observer import (
    CONTROL_KEEP_BYTES,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_PREVIEW_CHARS,
    HUNT_BUDGET_BYTES,
    INFLATE_DRAIN_BYTES,
    OPCODE_NAMES,
    WebSocketObserver,
    WsConnectionEnded,
    WsFrame,
    WsHandshake,
    WsMessage,
    accept_for_key,
    handshake_from_headers,
    opcode_name,
    parse_extensions,
    parse_handshake,
    valid_close_code,
    websocket_factory,
)

__all__ = [
    "CONTROL_KEEP_BYTES",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
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
