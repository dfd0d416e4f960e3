"""Shared vocabulary of the protocol observers, owned by the TCP layer
(:mod:`pcaptools.tcp.stream`) and re-exported here under its historical import path."""

from __future__ import annotations

from typing import Protocol

from ..tcp.stream import Direction, Event, StreamChunk, StreamObserver

__all__ = ["Direction", "Event", "Observer", "StreamChunk", "StreamObserver"]


class Observer(Protocol):
    """The part of :class:`~pcaptools.tcp.stream.StreamObserver` every observer implements
    today (being replaced by the full contract)."""

    def feed(self, chunk: StreamChunk) -> list[object]: ...
    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]: ...
    def close(self, direction: Direction, ts_ns: int, frame: int) -> list[object]: ...
