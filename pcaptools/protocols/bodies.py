"""Finished HTTP message bodies of the content types some consumer asked for.

The HTTP observers (:mod:`.http1`, :mod:`.http2`) keep no bodies, except for the few content
types in :data:`BODY_CONTENT_TYPES`: for those, one :class:`BodyCollector` per message gathers
the body (up to :data:`MAX_BODY_BYTES`), and when the message ends the observer emits one
:class:`HttpBody` event. This is the one place a consumer of whole bodies hooks in (today:
DNS over HTTPS, ``application/dns-message``, read by :mod:`.doh`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ._base import Direction

__all__ = ["BODY_CONTENT_TYPES", "MAX_BODY_BYTES", "BodyCollector", "HttpBody", "collector_for"]

BODY_CONTENT_TYPES: Final = frozenset({"application/dns-message"})
"""media types (lower case, no parameters) whose bodies the HTTP observers hand over"""

MAX_BODY_BYTES: Final = 65535
"""a collected body longer than this is not kept (``HttpBody.complete`` False): the largest
DNS message"""


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpBody:
    """The body of one HTTP message whose media type is in :data:`BODY_CONTENT_TYPES`."""

    ts_ns: int
    """capture time of the packet that completed the message"""
    frame: int
    """that packet (tshark shows the body's dissection in this frame)"""
    direction: Direction
    tcp_stream: int
    request_index: int | None
    """HTTP/1.x: the exchange's request_index (None on HTTP/2)"""
    stream_id: int | None
    """HTTP/2: the stream id (None on HTTP/1.x)"""
    content_type: str
    """the media type, lower case, parameters removed"""
    data: bytes
    """the body after de-chunking; empty when it was not kept (see ``complete``)"""
    complete: bool
    """every byte was captured and the body fit in :data:`MAX_BODY_BYTES`"""


class BodyCollector:
    """Gathers one message body (see :func:`collector_for`)."""

    __slots__ = ("content_type", "data", "lost")

    def __init__(self, content_type: str) -> None:
        self.content_type = content_type
        self.data = bytearray()
        self.lost = False

    def add(self, data: bytes | bytearray | memoryview) -> None:
        if not self.lost:
            if len(self.data) + len(data) > MAX_BODY_BYTES:
                self.gap()
            else:
                self.data += data

    def gap(self) -> None:
        """Some body bytes were not captured (or the body is too long): it is not kept."""
        self.lost = True
        self.data = bytearray()

    def event(
        self, *, ts_ns: int, frame: int, direction: Direction, tcp_stream: int,
        request_index: int | None = None, stream_id: int | None = None,
    ) -> HttpBody:
        return HttpBody(
            ts_ns=ts_ns, frame=frame, direction=direction, tcp_stream=tcp_stream,
            request_index=request_index, stream_id=stream_id, content_type=self.content_type,
            data=bytes(self.data), complete=not self.lost,
        )


def collector_for(content_type: str | None) -> BodyCollector | None:
    """A collector when the ``Content-Type`` value names a media type in
    :data:`BODY_CONTENT_TYPES`, else None (the common case: nothing is kept)."""
    if content_type is None:
        return None
    media = content_type.split(";", 1)[0].strip().lower()
    return BodyCollector(media) if media in BODY_CONTENT_TYPES else None
