"""Shared vocabulary of the protocol observers: directions and in-order byte chunks."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol


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


class Observer(Protocol):
    """What every protocol observer looks like (TLS, HTTP/1.1, HTTP/2, WebSocket).

    One instance per TCP connection (and protocol), watching both directions. It is a
    *watcher*, not a participant: it never raises on wire data, copes with captures that
    start mid-connection, and records what it could not parse through the Diagnostics sink
    it was built with (code, detail, frame, tcp_stream, direction), then resynchronises or
    marks that direction DESYNCED (bytes still counted, no longer parsed).

    Results are returned as lists of small frozen event dataclasses (nouns for wire units:
    ``TlsRecord``, ``Http2Frame``; past-tense verbs for state changes: ``HandshakeCompleted``,
    ``StreamEnded``) that carry ``ts_ns``, ``frame`` and ``direction``; the pipeline turns
    them into table rows. A layer that carries another (TLS -> HTTP/2, HTTP/1.1 Upgrade ->
    WebSocket) hands plaintext to an inner observer as ``StreamChunk`` objects with offsets
    in the plaintext stream, so inner observers cannot tell whether TLS was there.
    """

    def feed(self, chunk: StreamChunk) -> list[object]:
        """In-order bytes of one direction."""
        ...

    def gap(self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int) -> list[object]:
        """``nbytes`` bytes at ``offset`` of ``direction`` were never captured."""
        ...

    def close(self, direction: Direction, ts_ns: int, frame: int) -> list[object]:
        """``direction`` ended (FIN or RST seen, or end of capture)."""
        ...
