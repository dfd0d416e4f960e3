"""HTTP/3 (RFC 9114) and QPACK (RFC 9204) on the streams of a QUIC connection.

    from pcaptools.protocols.http3 import Http3Observer
    obs = Http3Observer(connection=0, diag=diag)
    obs.stream_data(stream_id, direction, offset, data, fin, ts_ns, frame)   # from QUIC
    obs.finish(ts_ns, frame)
    obs.frames, obs.streams, obs.sse     # Http3Frame, Http3StreamEnded, SseEvent

Modules: :mod:`.frames` (varints, frame and stream types, SETTINGS, error codes),
:mod:`.events` (what the observer records), :mod:`.observer` (the per-connection state
machine: stream types, frames, QPACK through ``pylsqpack``, request streams, bodies). The
QUIC tracker creates one observer per connection that negotiated ALPN ``h3`` through the
registry's ``QuicAppEntry`` (:mod:`pcaptools.protocols.builtin`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .events import Headers, Http3Frame, Http3StreamEnded
from .frames import ERROR_CODES, FRAME_TYPES, SETTINGS_NAMES, STREAM_TYPES, error_name

if TYPE_CHECKING:
    from .observer import (
        MAX_HTTP3_FRAME_BYTES,
        MAX_HTTP3_FRAME_ROWS,
        MAX_HTTP3_OPEN_STREAMS,
        MAX_HTTP3_SSE_ROWS,
        MAX_QPACK_PENDING_BYTES,
        Http3Observer,
    )


def __getattr__(name: str) -> Any:
    """The names of :data:`__all__` that :mod:`.observer` defines, imported on first use (PEP
    562; only names not bound here get here): the observer brings pylsqpack, which only a
    capture with HTTP/3 needs."""
    if name in __all__:
        from . import observer

        return getattr(observer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ERROR_CODES",
    "FRAME_TYPES",
    "MAX_HTTP3_FRAME_BYTES",
    "MAX_HTTP3_FRAME_ROWS",
    "MAX_HTTP3_OPEN_STREAMS",
    "MAX_HTTP3_SSE_ROWS",
    "MAX_QPACK_PENDING_BYTES",
    "SETTINGS_NAMES",
    "STREAM_TYPES",
    "Headers",
    "Http3Frame",
    "Http3Observer",
    "Http3StreamEnded",
    "error_name",
]
