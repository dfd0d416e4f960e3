"""Hold-and-replay: what an observer that has not chosen its inner observer yet keeps of the
connection, and gives to the chosen one in arrival order (the buffering layer of mitmproxy's
``next_layer``, written once).

:class:`~.dispatch.ConnectionObserver` (TLS or not) and :class:`~.detect.HttpDetector`
(HTTP/1.x or HTTP/2) both hold the chunks and gaps that arrive while they look, then replay
them into the observer they chose.
"""

from __future__ import annotations

from typing import Protocol

from ..tcp.stream import Direction, StreamChunk

__all__ = ["Held"]

_Gap = tuple[Direction, int, int, int, int]
"""(direction, offset, nbytes, ts_ns, frame) of a gap, the arguments of ``gap()``"""


class _Inner(Protocol):
    """The part of :class:`~pcaptools.tcp.stream.StreamObserver` a replay calls."""

    def feed(self, chunk: StreamChunk) -> list[object]: ...
    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]: ...


class Held:
    """Chunks and gaps in arrival order, replayed into one observer.

    ``max_gaps``: gaps held beyond this many items in all are dropped (None: no bound)."""

    __slots__ = ("items", "max_gaps")

    def __init__(self, max_gaps: int | None = None) -> None:
        self.items: list[StreamChunk | _Gap] = []
        self.max_gaps = max_gaps

    def __bool__(self) -> bool:
        return bool(self.items)

    def chunk(self, chunk: StreamChunk) -> None:
        self.items.append(chunk)

    def gap(self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int) -> None:
        if self.max_gaps is None or len(self.items) < self.max_gaps:
            self.items.append((direction, offset, nbytes, ts_ns, frame))

    def clear(self) -> None:
        self.items.clear()

    def replay(self, inner: _Inner) -> list[object]:
        """Feed everything held to ``inner`` (chunks to ``feed``, gaps to ``gap``), in arrival
        order, and forget it: ``inner``'s events."""
        items, self.items = self.items, []
        out: list[object] = []
        for item in items:
            if isinstance(item, StreamChunk):
                out += inner.feed(item)
            else:
                out += inner.gap(*item)
        return out
