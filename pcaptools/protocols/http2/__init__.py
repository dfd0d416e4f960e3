"""HTTP/2 (RFC 9113): frames, HPACK header blocks, streams and connection facts.

    from pcaptools.protocols.http2 import Http2Observer
    obs = Http2Observer(tcp_stream=0, diag=diag)
    events = obs.feed(chunk)            # Http2Frame, Http2StreamEnded, Http2ConnectionEnded, ...

Modules: :mod:`.frames` (the frame layer: type codes, flags, names, the frame header and the
alignment check), :mod:`.events` (what the observer emits), :mod:`.observer` (the state
machine: per-direction parsers, HPACK, streams, flow control).

Every name of the module this package replaced stays importable from here, the private ones
too: ``_plausible`` (protocols/detect.py) and the limit constants listed in
:mod:`pcaptools.limits` (readable here; the observer reads them from :mod:`.observer`, so
that is where a test patches them).
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
    flags_text,
    parse_frame_header,
    parse_settings_payload,
    plausible_frame_header,
)
from .frames import _plausible as _plausible
from .observer import _HPACK_MAX_HEADER_LIST as _HPACK_MAX_HEADER_LIST
from .observer import _HPACK_MAX_TABLE as _HPACK_MAX_TABLE
from .observer import _MAX_BUFFERED_FRAME as _MAX_BUFFERED_FRAME
from .observer import _MAX_HEADER_BLOCK as _MAX_HEADER_BLOCK
from .observer import _MAX_OPEN_STREAMS as _MAX_OPEN_STREAMS
from .observer import _MAX_PENDING_PINGS as _MAX_PENDING_PINGS
from .observer import Http2Observer

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
    "H2cUpgrade",
    "Headers",
    "Http2ConnectionEnded",
    "Http2Frame",
    "Http2Observer",
    "Http2StreamEnded",
    "flags_text",
    "parse_frame_header",
    "parse_settings_payload",
    "plausible_frame_header",
]
