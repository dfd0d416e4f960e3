"""What :class:`~.observer.Http1Observer` emits: exchanges (a request and its response, each
:class:`HttpRequest` / :class:`HttpResponse` as seen on the wire) and protocol switches.

:class:`HttpExchange` and :class:`ProtocolSwitched` are events
(:class:`~pcaptools.tcp.stream.Event`); the two messages are plain values carried by an
exchange.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...tcp.stream import Direction, Event
from .parse import Headers, header_value

__all__ = ["HttpExchange", "HttpRequest", "HttpResponse", "ProtocolSwitched"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """One HTTP/1.x request as seen on the wire."""

    method: str
    target: str
    version: str
    """e.g. ``1.1``"""
    headers: Headers
    """(lower-cased name, value) in wire order"""
    header_bytes: int
    """start line + header fields + the blank line"""
    body_bytes: int
    """body bytes after de-chunking (bytes lost in gaps included)"""
    wire_bytes: int
    """header_bytes + body bytes as framed on the wire (chunk sizes, trailers)"""
    chunked: bool
    start_frame: int
    start_ts_ns: int
    """capture time of the packet carrying the first byte"""
    head_frame: int
    head_ts_ns: int
    """the header section was complete"""
    end_frame: int | None
    """packet that completed the message (tshark's ``http.request`` frame); None if incomplete"""
    end_ts_ns: int | None
    complete: bool

    def header(self, name: str) -> str | None:
        """First value of header ``name`` (case-insensitive), or None."""
        return header_value(self.headers, name.lower())


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpResponse:
    """One final HTTP/1.x response (1xx interim responses are counted on the exchange)."""

    status: int
    reason: str
    version: str
    headers: Headers
    header_bytes: int
    body_bytes: int
    wire_bytes: int
    chunked: bool
    until_close: bool
    """the body was delimited by the end of the connection"""
    start_frame: int
    start_ts_ns: int
    """first byte of the status line (interim responses excluded)"""
    head_frame: int
    head_ts_ns: int
    end_frame: int | None
    """packet that completed the message (tshark's ``http.response`` frame); None if incomplete"""
    end_ts_ns: int | None
    complete: bool
    content_encoding: str | None = None
    """the Content-Encoding header as sent (field lines joined with ", "); None if absent"""
    decoded_body_bytes: int | None = None
    """body bytes after content decoding (up to where decoding stopped); for an identity body
    ``body_bytes``; None when the body was not decoded (unsupported coding)"""
    content_decoding: str | None = None
    """identity, decoded, corrupt, truncated, gap, limit, unsupported, incomplete (see
    :attr:`pcaptools.protocols.body.Body.status`); None when no body byte was seen"""

    def header(self, name: str) -> str | None:
        """First value of header ``name`` (case-insensitive), or None."""
        return header_value(self.headers, name.lower())


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpExchange(Event):
    """A request and its response (either may be missing)."""

    ts_ns: int
    """when the exchange was settled (response end, or connection end)"""
    frame: int
    direction: Direction | None
    tcp_stream: int
    request_index: int
    """1-based order in which this observer saw the exchange on the connection"""
    position: int | None
    """1-based position of the request on the connection; None when requests may have been
    missed (capture started mid-connection, or bytes lost in the client direction)"""
    request: HttpRequest | None
    response: HttpResponse | None
    interim_statuses: tuple[int, ...]
    """1xx responses before the final one (e.g. (100,) for Expect: 100-continue)"""
    first_response_ts_ns: int | None
    """first byte of the first response (interim included): the time to first byte"""
    first_response_frame: int | None
    upgrade: str | None
    """protocol the connection switched to after this exchange (h2c, websocket, connect...)"""
    sse_events: int
    end_reason: str
    """complete, connection_closed, open_at_eof, desynced, evicted (more than 10 000 requests
    waited for a response: the oldest was given up)"""
    paired: bool = True
    """both a request and the final response that answers it were seen"""
    unpaired_reason: str | None = None
    """why not (None when paired): ``response_not_captured`` (the server direction lost bytes
    where this request's response was), ``no_response`` (nothing was lost, but no response came
    before the connection or the capture ended), ``request_not_captured`` (a response while no
    request was outstanding: its request was sent before the capture began or lost in a capture
    gap, or, rarely, never sent, as for an unsolicited 408), ``ambiguous`` (after a gap on a
    pipelining connection it cannot be told which request a response answers), ``evicted``"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolSwitched(Event):
    """The connection left HTTP/1.x after ``request_index`` (a 101, or a CONNECT answered 2xx)."""

    ts_ns: int
    frame: int
    direction: Direction
    tcp_stream: int
    request_index: int
    protocol: str
    """lower-cased Upgrade token (``h2c``, ``websocket``...) or ``connect``"""
    parsed: bool
    """True when an observer parses the new protocol"""
