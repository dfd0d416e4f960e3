"""Shared vocabulary of the protocol observers, owned by the TCP layer
(:mod:`pcaptools.tcp.stream`) and re-exported here under its historical import path."""

from __future__ import annotations

from ..tcp.stream import Direction, Event, StreamChunk, StreamObserver

Observer = StreamObserver
"""the one observer contract (:class:`~pcaptools.tcp.stream.StreamObserver`), old name"""

__all__ = ["Direction", "Event", "Observer", "StreamChunk", "StreamObserver"]
