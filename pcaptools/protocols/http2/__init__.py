"""HTTP/2 (RFC 9113): frames, HPACK header blocks, streams and connection facts.

    from pcaptools.protocols.http2 import Http2Observer
    obs = Http2Observer(tcp_stream=0, diag=diag)
    events = obs.feed(chunk)            # Http2Frame, Http2StreamEnded, Http2ConnectionEnded, ...

Modules: :mod:`.frames` (the frame layer: type codes, flags, names, the frame header and the
alignment check), :mod:`.events` (what the observer emits), :mod:`.observer` (the state
machine: per-direction parsers, HPACK, streams, flow control).
"""

from __future__ import annotations

from .events import H2cUpgrade, Headers, Http2ConnectionEnded, Http2Frame, Http2StreamEnded
from .frames import (
    CONTINUATION,
    DATA,
    ERROR_CODES,
    F_ACK,
    F_END_HEADERS,
    F_END_STREAM,
    F_PADDED,
    F_PRIORITY,
    FRAME_TYPES,
    GOAWAY,
    HEADERS,
    PING,
    PREFACE,
    PRIORITY,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    SETTINGS_NAMES,
    WINDOW_UPDATE,
    _plausible,
    flags_text,
    parse_frame_header,
    parse_settings_payload,
    plausible_frame_header,
)
from .observer import (
    _HPACK_MAX_HEADER_LIST,
    _HPACK_MAX_TABLE,
    _MAX_BUFFERED_FRAME,
    _MAX_HEADER_BLOCK,
    _MAX_OPEN_STREAMS,
    _MAX_PENDING_PINGS,
    Http2Observer,
)

# the names this module had before it became a package, kept for their importers:
# ``_plausible`` (protocols/detect.py) and the limit constants (read, not settable, here: the
# observer reads them from :mod:`.observer`)
__all__ = [
    "CONTINUATION",
    "DATA",
    "ERROR_CODES",
    "FRAME_TYPES",
    "F_ACK",
    "F_END_HEADERS",
    "F_END_STREAM",
    "F_PADDED",
    "F_PRIORITY",
    "GOAWAY",
    "HEADERS",
    "PING",
    "PREFACE",
    "PRIORITY",
    "PUSH_PROMISE",
    "RST_STREAM",
    "SETTINGS",
    "SETTINGS_NAMES",
    "WINDOW_UPDATE",
    "_HPACK_MAX_HEADER_LIST",
    "_HPACK_MAX_TABLE",
    "_MAX_BUFFERED_FRAME",
    "_MAX_HEADER_BLOCK",
    "_MAX_OPEN_STREAMS",
    "_MAX_PENDING_PINGS",
    "H2cUpgrade",
    "Headers",
    "Http2ConnectionEnded",
    "Http2Frame",
    "Http2Observer",
    "Http2StreamEnded",
    "_plausible",
    "flags_text",
    "parse_frame_header",
    "parse_settings_payload",
    "plausible_frame_header",
]
