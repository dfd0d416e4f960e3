"""The contract between QUIC and the application protocol on top of it (HTTP/3 first).

A QUIC connection whose packets decrypt (with a key log) carries STREAM frames. The QUIC
tracker reassembles each stream per direction and hands the application observer the bytes
**in order**, once, with the time and frame number of the packet that completed them; what
never arrived (lost and not retransmitted in the capture, or a packet that did not decrypt)
is reported as a gap, so the observer can stop parsing that stream instead of guessing.

The application observer is chosen by the connection's negotiated ALPN (the ServerHello's,
else the only one the ClientHello offered) through a :class:`QuicAppEntry` of the protocol
registry (``"h3"`` -> the HTTP/3 observer); one observer per QUIC connection, created when
the first stream byte of that connection is ready.

Stream ids are QUIC's (RFC 9000 §2.1): bit 0 the initiator (0 client, 1 server), bit 1 the
direction (0 bidirectional, 1 unidirectional). ``direction`` is who sent the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...diagnostics import Diagnostics
from ...tcp.stream import Direction

__all__ = ["QuicAppContext", "QuicAppFactory", "QuicStreamObserver"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuicAppContext:
    """What the QUIC tracker knows of a connection when it creates its application observer."""

    connection: int
    """the QUIC connection index (``quic_connections.connection``)"""
    alpn: str
    """the ALPN protocol id the observer was chosen by"""
    diag: Diagnostics
    midstream: bool
    """True when the capture started inside the connection (no client Initial seen)"""


class QuicStreamObserver(Protocol):
    """The application side of one QUIC connection. Sans-IO; never raises on wire data
    (anomalies are ``diag`` rows). Every call carries the packet's capture time (ns) and
    Wireshark frame number."""

    def stream_data(self, stream_id: int, direction: Direction, offset: int, data: bytes,
                    fin: bool, ts_ns: int, frame: int) -> None:
        """In-order bytes of ``stream_id`` starting at stream ``offset`` (contiguous with what
        came before, after any :meth:`stream_gap`); ``fin``: the stream ends after ``data``
        (``data`` may then be empty)."""
        ...

    def stream_gap(self, stream_id: int, direction: Direction, offset: int, nbytes: int,
                   ts_ns: int, frame: int) -> None:
        """``nbytes`` bytes of ``stream_id`` from ``offset`` were never seen (0: unknown
        length, up to the end of the stream); bytes after the gap may follow."""
        ...

    def stream_reset(self, stream_id: int, direction: Direction, error_code: int,
                     final_size: int, ts_ns: int, frame: int) -> None:
        """RESET_STREAM from the sender of ``direction`` (or, for STOP_SENDING, the reader's
        request: the tracker reports only RESET_STREAM here)."""
        ...

    def finish(self, ts_ns: int, frame: int) -> None:
        """The connection ended (CONNECTION_CLOSE, or the end of the capture): last call."""
        ...


class QuicAppFactory(Protocol):
    """Builds the application observer of one QUIC connection."""

    def __call__(self, ctx: QuicAppContext) -> QuicStreamObserver: ...
