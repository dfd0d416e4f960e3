"""Hold-and-replay (pcaptools.protocols._hold.Held), the one buffer ConnectionObserver and
HttpDetector keep while they choose their inner observer."""

from __future__ import annotations

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._hold import Held
from pcaptools.protocols.detect import HttpDetector
from pcaptools.protocols.dispatch import ConnectionObserver
from pcaptools.tcp.stream import Direction, StreamChunk

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def feed(self, chunk: StreamChunk) -> list[object]:
        self.calls.append(("feed", chunk.direction, chunk.data, chunk.frame))
        return [f"event {chunk.frame}"]

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        self.calls.append(("gap", direction, offset, nbytes, frame))
        return []


def _chunk(d: Direction, data: bytes, frame: int, offset: int = 0) -> StreamChunk:
    return StreamChunk(direction=d, data=data, ts_ns=frame * 1000, frame=frame, offset=offset)


def test_replay_in_arrival_order_then_empty() -> None:
    held = Held()
    assert not held
    held.chunk(_chunk(C2S, b"GET", 1))
    held.gap(S2C, 0, 100, 2000, 2)
    held.chunk(_chunk(C2S, b" /", 3, 3))
    assert held
    inner = Recorder()
    assert held.replay(inner) == ["event 1", "event 3"]
    assert inner.calls == [("feed", C2S, b"GET", 1), ("gap", S2C, 0, 100, 2),
                           ("feed", C2S, b" /", 3)]
    assert not held and held.replay(Recorder()) == []


def test_max_gaps_bounds_the_gaps_not_the_chunks() -> None:
    held = Held(max_gaps=2)
    held.gap(C2S, 0, 10, 1, 1)
    held.gap(C2S, 10, 10, 2, 2)
    held.gap(C2S, 20, 10, 3, 3)  # a third item: dropped
    held.chunk(_chunk(C2S, b"x", 4, 30))  # chunks are always kept
    inner = Recorder()
    held.replay(inner)
    assert [c[0] for c in inner.calls] == ["gap", "gap", "feed"]
    held.chunk(_chunk(C2S, b"y", 5))
    held.clear()
    assert not held


def test_the_observers_hold_until_they_choose() -> None:
    diag = Diagnostics()
    conn = ConnectionObserver(tcp_stream=0, diag=diag, keylog=None)
    det = HttpDetector(tcp_stream=0, diag=diag)
    assert isinstance(conn._held, Held) and isinstance(det._held, Held)
    conn.feed(_chunk(C2S, b"GE", 1))  # too short to say TLS or not: held
    assert len(conn._held.items) == 1 and conn.inner is None
    conn.feed(_chunk(C2S, b"T / HTTP/1.1\r\n\r\n", 2, 2))  # not TLS: replayed to the detector
    assert conn.kind == "cleartext" and not conn._held
    assert isinstance(conn.inner, HttpDetector) and conn.inner.kind == "http1"
