"""Message bodies: content decoding, then the hand-off to the parser of the body's media type.

Both HTTP observers (HTTP/1.x bodies after de-chunking, HTTP/2 DATA payloads) give the body
bytes of a message to one :class:`Body`, made by :func:`open_body` from the message's
headers. A body first goes through a :class:`~.content_coding.ContentDecoder` when it has a
``Content-Encoding``, then, decoded as it arrives, to the consumer :func:`body_consumer`
picks for its media type and direction (the registry's :class:`~.registry.MediaTypeEntry`
rows, registered in :mod:`.builtin`):

- ``text/event-stream`` responses -> :class:`~.sse.SseParser` (events as they arrive);
- ``application/dns-message`` requests and responses (DNS over HTTPS) -> a
  :class:`BodyCollector`, which keeps the whole decoded body (up to
  :data:`MAX_COLLECTED_BODY_BYTES`) and returns one :class:`HttpBody` event when the message
  ends (read by :class:`~.doh.DohCollector`).

:func:`body_consumer` is the one place where a media type is given a parser: a new body
format is one more ``MediaTypeEntry`` in :mod:`.builtin`, and a class with the
:class:`~.registry.BodyConsumer` methods.
Whatever the consumer returns from ``feed``/``close`` goes into the observer's event list.
Response bodies are always opened (their decoding is summarised in the HTTP tables); a
request body is opened only when a consumer wants it (today: DNS over HTTPS POST), and is
then decoded the same way.

Decoding problems become warning rows (``http.content_decoding_failed``,
``http.content_decoding_limit``, ``http.content_decoding_gap``,
``http.content_encoding_unsupported``), one per body: the consumer keeps what was decoded
before the problem and is told of a gap (so a half-decoded SSE event is dropped, never
dispatched, and a collected body is marked incomplete).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..diagnostics import Diagnostics
from ._base import Direction, Event
from .content_coding import DEFAULT_MAX_DECODED_BYTES, ContentDecoder, parse_content_encoding
from .registry import REGISTRY, BodyConsumer
from .sse import DEFAULT_MAX_LINE_BYTES, SseParser

__all__ = [
    "DNS_MESSAGE",
    "MAX_COLLECTED_BODY_BYTES",
    "Body",
    "BodyCollector",
    "BodyConsumer",
    "HttpBody",
    "body_consumer",
    "media_type",
    "open_body",
]

Headers = tuple[tuple[str, str], ...]

_CODE_OF_STATUS = {
    "corrupt": "http.content_decoding_failed",
    "truncated": "http.content_decoding_failed",
    "limit": "http.content_decoding_limit",
    "gap": "http.content_decoding_gap",
    "unsupported": "http.content_encoding_unsupported",
}


DNS_MESSAGE: Final = "application/dns-message"
"""the DNS over HTTPS media type (RFC 8484 §6)"""

MAX_COLLECTED_BODY_BYTES: Final = 65535
"""a collected body that decodes to more than this is not kept (``HttpBody.complete`` False):
the largest DNS message"""


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpBody(Event):
    """The whole decoded body of one HTTP message handed to a :class:`BodyCollector` (media
    type ``application/dns-message``), emitted when the message ends."""

    ts_ns: int
    """capture time of the packet that completed the message"""
    frame: int
    """that packet (tshark shows the body's dissection in this frame)"""
    direction: Direction
    tcp_stream: int | None
    """None over HTTP/3 (a QUIC connection)"""
    request_index: int | None
    """HTTP/1.x: the exchange's request_index (None on HTTP/2)"""
    stream_id: int | None
    """HTTP/2: the stream id (None on HTTP/1.x)"""
    content_type: str
    """the media type, lower case, parameters removed"""
    data: bytes
    """the body after de-chunking and content decoding; empty when it was not kept (see
    ``complete``)"""
    complete: bool
    """every byte was captured and decoded, and the body fit in
    :data:`MAX_COLLECTED_BODY_BYTES`"""


class BodyCollector:
    """A :class:`BodyConsumer` that keeps a whole body, for formats read only once the body
    has ended (DNS over HTTPS). Nothing is returned before ``close``; a message that ended
    (not cut, not at the end of the capture) gives one :class:`HttpBody`."""

    __slots__ = (
        "_direction",
        "_request_index",
        "_stream_id",
        "_tcp_stream",
        "content_type",
        "data",
        "lost",
    )

    def __init__(
        self,
        content_type: str,
        *,
        tcp_stream: int | None,
        stream_id: int | None,
        request_index: int | None,
        direction: Direction,
    ) -> None:
        self.content_type = content_type
        self.data = bytearray()
        self.lost = False
        """bytes are missing (not captured, not decodable) or the body was too long"""
        self._tcp_stream = tcp_stream
        self._stream_id = stream_id
        self._request_index = request_index
        self._direction = direction

    def feed(self, data: bytes, ts_ns: int, frame: int) -> list[Any]:
        if not self.lost:
            if len(self.data) + len(data) > MAX_COLLECTED_BODY_BYTES:
                self.gap(ts_ns, frame)
            else:
                self.data += data
        return []

    def gap(self, ts_ns: int, frame: int) -> None:
        self.lost = True
        self.data = bytearray()

    def close(
        self, ts_ns: int, frame: int, *, at_eof: bool = False, complete: bool = True
    ) -> list[Any]:
        if at_eof or not complete:
            return []  # the message did not end: no body to hand over
        return [
            HttpBody(
                ts_ns=ts_ns,
                frame=frame,
                direction=self._direction,
                tcp_stream=self._tcp_stream,
                request_index=self._request_index,
                stream_id=self._stream_id,
                content_type=self.content_type,
                data=bytes(self.data),
                complete=not self.lost,
            )
        ]


def media_type(content_type: str | None) -> str | None:
    """``text/event-stream; charset=utf-8`` -> ``text/event-stream`` (None if absent)."""
    if content_type is None:
        return None
    return content_type.split(";", 1)[0].strip().lower()


def body_consumer(
    mtype: str | None,
    *,
    tcp_stream: int | None,
    stream_id: int | None,
    request_index: int | None,
    direction: Direction,
    diag: Diagnostics,
    sse_max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> BodyConsumer | None:
    """The parser of a (decoded) body of media type ``mtype`` sent in ``direction``, or None
    when its bytes are only counted.

    The parser is the one :data:`~.registry.REGISTRY` has for the media type and direction
    (:class:`~.registry.MediaTypeEntry`; the built-in ones are in :mod:`.builtin`)."""
    if mtype is None:
        return None
    make = REGISTRY.body_parser(mtype, direction)
    if make is None:
        return None
    return make(
        mtype,
        tcp_stream=tcp_stream,
        stream_id=stream_id,
        request_index=request_index,
        direction=direction,
        diag=diag,
        sse_max_line_bytes=sse_max_line_bytes,
    )


class Body:
    """One message body on its way to its consumer. Never raises on wire data.

    ``feed``/``gap``/``close`` take the body bytes as framed by HTTP (after de-chunking,
    DATA padding removed); the decoded byte count and the decoding status are read from it
    when the message is summarised.
    """

    __slots__ = (
        "_closed",
        "_diag",
        "_direction",
        "_tcp_stream",
        "_told",
        "_where",
        "consumer",
        "decoder",
        "encoding",
    )

    def __init__(
        self,
        *,
        encoding: str | None,
        decoder: ContentDecoder | None,
        consumer: BodyConsumer | None,
        tcp_stream: int | None,
        where: str,
        direction: Direction,
        diag: Diagnostics,
    ) -> None:
        self.encoding = encoding
        """the Content-Encoding header as sent (field lines joined with ", "); None if absent"""
        self.decoder = decoder
        """None for an identity body"""
        self.consumer = consumer
        self._tcp_stream = tcp_stream
        self._where = where
        self._direction = direction
        self._diag = diag
        self._closed = False
        self._told = False
        """the warning of a decoding problem was written (one per body)"""

    # ------------------------------------------------------------------ facts

    @property
    def sse_count(self) -> int:
        """events the SSE parser dispatched (0 when the body is not an event stream)"""
        c = self.consumer
        return c.count if isinstance(c, SseParser) else 0

    @property
    def needs_every_byte(self) -> bool:
        """a hole anywhere in the body spoils it (a coded stream, or a collected body), so
        whole frames lost on the connection must be reported to it"""
        return self.decoder is not None or isinstance(self.consumer, BodyCollector)

    @property
    def decoded_bytes(self) -> int | None:
        """body bytes after content decoding; None for an identity body (its wire count is
        its decoded count) and for one not decoded at all (unsupported coding)"""
        d = self.decoder
        if d is None or d.status == "unsupported":
            return None
        return d.decoded_bytes

    @property
    def status(self) -> str | None:
        """identity, decoded, corrupt, truncated, gap, limit, unsupported, incomplete (the body
        did not end: the capture ended or the message was cut first); None when no body byte
        came"""
        d = self.decoder
        if d is None:
            return "identity"
        if d.wire_bytes == 0:
            return None
        return "incomplete" if d.status == "decoding" else d.status

    # ------------------------------------------------------------------ input

    def feed(self, data: bytes, ts_ns: int, frame: int) -> list[Any]:
        """The next body bytes, delivered by packet ``frame`` -> the consumer's events."""
        d = self.decoder
        c = self.consumer
        if d is None:
            return c.feed(data, ts_ns, frame) if c is not None else []
        out = d.feed(data)
        events: list[Any] = c.feed(out, ts_ns, frame) if out and c is not None else []
        if not d.active and not self._told:
            self._stopped(ts_ns, frame)
        return events

    def gap(self, nbytes: int, ts_ns: int, frame: int) -> None:
        """``nbytes`` of the body were never captured."""
        d = self.decoder
        if d is not None:
            d.lose(nbytes)
            if not self._told:
                self._stopped(ts_ns, frame)
        c = self.consumer
        if c is not None:
            c.gap(ts_ns, frame)

    def close(
        self, ts_ns: int, frame: int, *, at_eof: bool = False, complete: bool = True
    ) -> list[Any]:
        """The body ended (``at_eof``: the capture ended first; ``complete=False``: the
        message was cut, e.g. by RST_STREAM, and that is reported elsewhere) -> the
        consumer's events. A coded stream left unfinished by a complete message is
        ``truncated`` (a warning row); otherwise it stays ``incomplete``. Idempotent."""
        if self._closed:
            return []
        self._closed = True
        d = self.decoder
        if d is not None and d.active and d.wire_bytes and not at_eof and complete:
            d.end()
            self._stopped(ts_ns, frame)
        c = self.consumer
        if c is None:
            return []
        return c.close(ts_ns, frame, at_eof=at_eof, complete=complete) or []

    def _stopped(self, ts_ns: int, frame: int) -> None:
        """Report why decoding stopped (once per body), and tell the consumer of the gap."""
        d = self.decoder
        if d is None or d.problem is None or self._told:
            return
        code = _CODE_OF_STATUS.get(d.status)
        if code is None:
            return
        self._told = True
        self._diag.add(
            code,
            f"{self._where} (Content-Encoding: {self.encoding}): {d.problem}",
            ts_ns=ts_ns,
            frame=frame,
            tcp_stream=self._tcp_stream,
            direction=self._direction.label,
        )
        if self.consumer is not None:
            self.consumer.gap(ts_ns, frame)


def open_body(
    headers: Headers | None,
    *,
    tcp_stream: int | None,
    stream_id: int | None = None,
    request_index: int | None = None,
    direction: Direction = Direction.SERVER_TO_CLIENT,
    diag: Diagnostics,
    sse_max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES,
) -> Body | None:
    """The :class:`Body` of a message with these (lower-cased) headers sent in ``direction``,
    or None when there is nothing to do with it: identity coding and no parser for its media
    type, or a request body no parser wants (its bytes are only counted by the observer)."""
    if not headers:
        return None
    ctype = None
    encodings: list[str] = []
    for k, v in headers:
        if k == "content-type":
            if ctype is None:
                ctype = v
        elif k == "content-encoding":
            encodings.append(v)
    codings = parse_content_encoding(encodings)
    where = (
        f"stream {stream_id}"
        if stream_id is not None
        else (f"request {request_index}" if request_index is not None else "response")
    )
    if direction == Direction.CLIENT_TO_SERVER:
        where += " (request body)"
    consumer = body_consumer(
        media_type(ctype),
        tcp_stream=tcp_stream,
        stream_id=stream_id,
        request_index=request_index,
        direction=direction,
        diag=diag,
        sse_max_line_bytes=sse_max_line_bytes,
    )
    if consumer is None and (not codings or direction == Direction.CLIENT_TO_SERVER):
        return None
    return Body(
        encoding=", ".join(encodings) if encodings else None,
        decoder=ContentDecoder(codings, max_decoded_bytes=max_decoded_bytes) if codings else None,
        consumer=consumer,
        tcp_stream=tcp_stream,
        where=where,
        direction=direction,
        diag=diag,
    )
