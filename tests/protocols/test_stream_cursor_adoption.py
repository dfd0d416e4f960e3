"""The HTTP/1.x, HTTP/2 and WebSocket observers line chunks up as tcp.stream.StreamCursor
says: an overlapping chunk is trimmed, a chunk past a hole is that hole as a gap first, a gap
after an overlap starts where the trimmed chunk ended; and each observer's per-direction
cursor moves exactly as a StreamCursor driven by align()/skip() does."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.http1 import Http1Observer
from pcaptools.protocols.http2 import Http2Observer
from pcaptools.protocols.websocket import WebSocketObserver, WsConnectionEnded
from pcaptools.tcp.stream import Direction, StreamChunk, StreamCursor
from tests.protocols.http.helpers import PREFACE, FrameFactory
from tests.protocols.ws.helpers import cframe, frame
from tests.protocols.ws.helpers import observer as ws_observer

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
Obs = Http1Observer | Http2Observer | WebSocketObserver


def _h1() -> tuple[Obs, Diagnostics, bytes, bytes]:
    diag = Diagnostics()
    c2s = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n" + b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
    body = bytes(range(48, 48 + 60))
    s2c = (b"HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n" + body) * 2
    return Http1Observer(diag=diag), diag, c2s, s2c


def _h2() -> tuple[Obs, Diagnostics, bytes, bytes]:
    diag = Diagnostics()
    ff = FrameFactory()
    req = [(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "/")]
    c2s = PREFACE + ff.settings({}) + ff.headers(1, req, flags=("END_HEADERS", "END_STREAM"))
    s2c = (
        ff.settings({})
        + ff.headers(1, [(":status", "200")], direction=S2C)
        + ff.data(1, bytes(range(100)))
        + ff.data(1, b"tail", end_stream=True)
    )
    return Http2Observer(diag=diag), diag, c2s, s2c


def _ws() -> tuple[Obs, Diagnostics, bytes, bytes]:
    obs, diag = ws_observer()
    c2s = cframe(1, b"hello") + cframe(1, b"again")
    s2c = frame(2, bytes(range(100))) + frame(1, b"one") + frame(1, b"two")
    return obs, diag, c2s, s2c


MAKERS: dict[str, Callable[[], tuple[Obs, Diagnostics, bytes, bytes]]] = {
    "http1": _h1,
    "http2": _h2,
    "websocket": _ws,
}
HOLE_AT = 50
"""a stream offset of the server's bytes inside the body / DATA payload / binary frame"""


def _cursor(obs: Obs, d: Direction) -> int:
    sides = obs._sides if isinstance(obs, Http1Observer) else obs._dirs
    return sides[d].next_offset


def _chunk(d: Direction, data: bytes, n: int, offset: int) -> StreamChunk:
    return StreamChunk(direction=d, data=data, ts_ns=n * 1000, frame=n, offset=offset)


def _lost(obs: Obs, events: list[object]) -> int:
    """Server bytes the observer counts as lost or skipped: HTTP/1.x stays in step inside a
    body of known length and skips nothing (``_Side.skipped``); HTTP/2 counts every byte it
    did not parse (``_Dir.skipped``); WebSocket reports lost payload bytes per connection."""
    if isinstance(obs, Http1Observer):
        return obs._sides[S2C].skipped
    if isinstance(obs, Http2Observer):
        return obs._dirs[S2C].skipped
    (end,) = [e for e in events if isinstance(e, WsConnectionEnded)]
    return end.server_lost_bytes + end.server_skipped_bytes


LOST_IN_HOLE = {"http1": 0, "http2": 10, "websocket": 10}
"""what ``_lost`` says after the 10-byte hole at HOLE_AT"""


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_overlapping_chunks_give_the_events_of_clean_ones(name: str) -> None:
    clean, cdiag, c2s, s2c = MAKERS[name]()
    over, odiag, _, _ = MAKERS[name]()
    ce: list[object] = clean.feed(_chunk(C2S, c2s, 1, 0))
    oe: list[object] = over.feed(_chunk(C2S, c2s, 1, 0))
    for i, lo in enumerate(range(0, len(s2c), 30)):
        ce += clean.feed(_chunk(S2C, s2c[lo : lo + 30], 2 + i, lo))
        start = max(0, lo - 13)  # each piece repeats the 13 bytes before it
        oe += over.feed(_chunk(S2C, s2c[start : lo + 30], 2 + i, start))
        oe += over.feed(_chunk(S2C, s2c[start : lo + 5], 2 + i, start))  # all seen before
        assert _cursor(over, S2C) == _cursor(clean, S2C) == min(lo + 30, len(s2c))
    ce += clean.finish(99_000, 99)
    oe += over.finish(99_000, 99)
    assert oe == ce and len(ce) >= 2
    assert odiag.rows == cdiag.rows
    assert _lost(over, oe) == _lost(clean, ce) == 0


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_chunk_past_a_hole_is_that_hole_as_a_gap_first(name: str) -> None:
    gapped, gdiag, c2s, s2c = MAKERS[name]()
    holed, hdiag, _, _ = MAKERS[name]()
    ge: list[object] = gapped.feed(_chunk(C2S, c2s, 1, 0))
    he: list[object] = holed.feed(_chunk(C2S, c2s, 1, 0))
    ge += gapped.feed(_chunk(S2C, s2c[:HOLE_AT], 2, 0))
    he += holed.feed(_chunk(S2C, s2c[:HOLE_AT], 2, 0))
    ge += gapped.gap(S2C, HOLE_AT, 10, 3000, 3)
    assert _cursor(gapped, S2C) == HOLE_AT + 10
    ge += gapped.feed(_chunk(S2C, s2c[HOLE_AT + 10 :], 3, HOLE_AT + 10))
    he += holed.feed(_chunk(S2C, s2c[HOLE_AT + 10 :], 3, HOLE_AT + 10))  # no gap() call
    assert _cursor(holed, S2C) == _cursor(gapped, S2C) == len(s2c)
    ge += gapped.finish(99_000, 99)
    he += holed.finish(99_000, 99)
    assert he == ge
    assert hdiag.rows == gdiag.rows
    assert _lost(holed, he) == _lost(gapped, ge) == LOST_IN_HOLE[name]


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_gap_after_an_overlap_starts_where_the_trimmed_chunk_ended(name: str) -> None:
    clean, cdiag, c2s, s2c = MAKERS[name]()
    over, odiag, _, _ = MAKERS[name]()
    ce: list[object] = clean.feed(_chunk(C2S, c2s, 1, 0))
    oe: list[object] = over.feed(_chunk(C2S, c2s, 1, 0))
    ce += clean.feed(_chunk(S2C, s2c[:30], 2, 0))
    oe += over.feed(_chunk(S2C, s2c[:30], 2, 0))
    ce += clean.feed(_chunk(S2C, s2c[30:HOLE_AT], 3, 30))
    oe += over.feed(_chunk(S2C, s2c[10:HOLE_AT], 3, 10))  # 20 bytes repeated
    assert _cursor(over, S2C) == HOLE_AT
    ce += clean.gap(S2C, HOLE_AT, 10, 4000, 4)
    oe += over.gap(S2C, HOLE_AT, 10, 4000, 4)
    assert _cursor(over, S2C) == HOLE_AT + 10
    ce += clean.feed(_chunk(S2C, s2c[HOLE_AT + 10 :], 5, HOLE_AT + 10))
    oe += over.feed(_chunk(S2C, s2c[HOLE_AT + 5 :], 5, HOLE_AT + 5))  # 5 of them again
    assert _cursor(over, S2C) == len(s2c)
    ce += clean.finish(99_000, 99)
    oe += over.finish(99_000, 99)
    assert oe == ce
    assert odiag.rows == cdiag.rows
    assert _lost(over, oe) == _lost(clean, ce) == LOST_IN_HOLE[name]


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_gap_reaching_back_before_the_cursor_loses_only_the_bytes_after_it(name: str) -> None:
    """The bytes of a gap that lie before the cursor were seen: a gap over [40, 60) after
    [0, 50) was fed is the gap [50, 60); a gap wholly before the cursor is nothing."""
    back, bdiag, c2s, s2c = MAKERS[name]()
    fwd, fdiag, _, _ = MAKERS[name]()
    be: list[object] = back.feed(_chunk(C2S, c2s, 1, 0))
    fe: list[object] = fwd.feed(_chunk(C2S, c2s, 1, 0))
    be += back.feed(_chunk(S2C, s2c[:HOLE_AT], 2, 0))
    fe += fwd.feed(_chunk(S2C, s2c[:HOLE_AT], 2, 0))
    assert back.gap(S2C, 20, 10, 2500, 2) == []  # [20, 30): seen
    assert _cursor(back, S2C) == HOLE_AT
    be += back.gap(S2C, HOLE_AT - 10, 20, 3000, 3)
    fe += fwd.gap(S2C, HOLE_AT, 10, 3000, 3)
    assert _cursor(back, S2C) == _cursor(fwd, S2C) == HOLE_AT + 10
    be += back.feed(_chunk(S2C, s2c[HOLE_AT + 10 :], 4, HOLE_AT + 10))
    fe += fwd.feed(_chunk(S2C, s2c[HOLE_AT + 10 :], 4, HOLE_AT + 10))
    be += back.finish(99_000, 99)
    fe += fwd.finish(99_000, 99)
    assert be == fe
    assert bdiag.rows == fdiag.rows
    assert _lost(back, be) == LOST_IN_HOLE[name]


_STEPS = st.lists(
    st.tuples(st.booleans(), st.integers(-40, 40), st.integers(0, 30)), min_size=1, max_size=25
)


@pytest.mark.parametrize("name", sorted(MAKERS))
@settings(max_examples=60, deadline=None)
@given(steps=_STEPS)
def test_each_observer_moves_its_cursor_as_stream_cursor_says(
    name: str, steps: list[tuple[bool, int, int]]
) -> None:
    """Feeds and gaps at offsets around the cursor (before it, at it, past it), on junk
    bytes: after every call the observer's cursor is where a StreamCursor's is."""
    obs = MAKERS[name]()[0]
    ref = StreamCursor()
    for n, (is_gap, delta, size) in enumerate(steps):
        offset = max(0, (ref.next_offset if ref.next_offset >= 0 else 0) + delta)
        if is_gap:
            if size:
                obs.gap(S2C, offset, size, n, n + 1)
                ref.skip(offset, size)
        else:
            data = bytes([0x41 + n % 26]) * size
            obs.feed(_chunk(S2C, data, n + 1, offset))
            hole, rest = ref.align(offset, data)
            if hole:
                ref.skip(offset - hole, hole)
            ref.next_offset += len(rest)
        if ref.next_offset >= 0:
            assert _cursor(obs, S2C) == ref.next_offset
