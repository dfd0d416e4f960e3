"""Shared vocabulary of the protocol observers: directions and in-order byte chunks."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


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
