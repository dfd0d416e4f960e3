"""The byte-stream contract of the TCP layer: what it hands to the protocol observers.

The TCP layer (:class:`~.tracker.TcpTracker`) reassembles the connections a protocol layer
asks for and feeds each one's in-order bytes to one :class:`StreamObserver` as
:class:`StreamChunk` objects, reports bytes never captured through :meth:`~StreamObserver.gap`
and the end of a direction through :meth:`~StreamObserver.close`. Every protocol observer
implements this contract in full (TLS, HTTP/1.x, HTTP/2, WebSocket, DNS over TCP, the
protocol detectors), so a layer that carries another (TLS -> HTTP/2, HTTP/1.1 Upgrade ->
WebSocket) calls its inner observer the same way the tracker calls it, and the inner
observer cannot tell whether TLS was there.

Everything an observer returns is a list of :class:`Event` objects: small frozen
dataclasses (nouns for wire units: ``TlsRecord``, ``Http2Frame``; past-tense verbs for state
changes: ``HandshakeCompleted``, ``StreamEnded``) that carry ``ts_ns`` and ``frame``; the
table builders turn them into rows.

This module sits below ``protocols/``: the TCP layer owns its output types.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

__all__ = ["Direction", "Event", "StreamChunk", "StreamObserver"]


class Direction(IntEnum):
    """Direction of a byte stream, relative to the TCP client (the SYN sender)."""

    CLIENT_TO_SERVER = 0
    SERVER_TO_CLIENT = 1

    @property
    def label(self) -> str:
        return "client_to_server" if self is Direction.CLIENT_TO_SERVER else "server_to_client"

    def reverse(self) -> Direction:
        return Direction(1 - self)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamChunk:
    """In-order bytes of one direction of a TCP connection.

    Retransmitted and overlapping bytes are delivered once; bytes never captured
    arrive through a gap notification, never as silent zeros.
    """

    direction: Direction
    data: bytes
    ts_ns: int
    """capture time of the segment that delivered the last byte"""
    frame: int
    """Wireshark frame.number of that segment"""
    offset: int
    """stream offset (relative sequence number - 1) of the first byte of ``data``"""


class Event:
    """Base class of every event a protocol observer returns.

    Subclasses are frozen, slotted dataclasses; every one has ``ts_ns`` (capture time, integer
    ns since the epoch) and ``frame`` (Wireshark's frame.number of the packet it was seen in).
    The base adds no fields and no per-instance cost (``__slots__ = ()``)."""

    __slots__ = ()

    ts_ns: int
    frame: int


class StreamObserver(Protocol):
    """What the TCP layer feeds a connection's in-order bytes to, and what every protocol
    observer is.

    One instance per TCP connection (and protocol), watching both directions. It is a
    *watcher*, not a participant: it never raises on wire data, copes with captures that
    start mid-connection, and records what it could not parse through the Diagnostics sink
    it was built with (code, detail, frame, tcp_stream, direction), then resynchronises or
    marks that direction desynchronised (bytes still counted, no longer parsed). The tracker
    wraps it in a guard that turns an exception (a bug) into a ``tcp.observer_error`` row.
    """

    @property
    def wants_bytes(self) -> bool:
        """False once this observer will parse no more of the connection's bytes: the TCP
        layer then stops reassembling it (gaps and closes are still reported)."""
        ...

    def feed(self, chunk: StreamChunk) -> list[object]:
        """In-order bytes of one direction."""
        ...

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        """``nbytes`` bytes at ``offset`` of ``direction`` were never captured."""
        ...

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        """``direction`` ended: FIN or RST seen (``at_eof`` False), or the capture ended with
        the direction still open (``at_eof`` True: an unfinished message is no anomaly)."""
        ...

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        """End of the capture: the last events of whatever is still open (called once,
        after every close)."""
        ...
