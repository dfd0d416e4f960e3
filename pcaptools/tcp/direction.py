"""The :class:`Direction` of a byte stream: part of the byte-stream contract of
:mod:`pcaptools.tcp.stream` (which exports it), in a module of its own so that
:mod:`pcaptools.tcp.chunk` can name it without importing the contract it belongs to."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Direction"]


class Direction(IntEnum):
    """Direction of a byte stream, relative to the TCP client (the SYN sender)."""

    CLIENT_TO_SERVER = 0
    SERVER_TO_CLIENT = 1

    @property
    def label(self) -> str:
        return "client_to_server" if self is Direction.CLIENT_TO_SERVER else "server_to_client"

    def reverse(self) -> Direction:
        return Direction(1 - self)
