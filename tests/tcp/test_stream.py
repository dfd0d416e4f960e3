"""tcp/stream.py: the shared per-direction cursor (StreamCursor) and the Event base."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.tcp.stream import Event, StreamCursor


def test_a_new_cursor_accepts_whatever_comes_first() -> None:
    cur = StreamCursor()
    assert cur.next_offset == -1
    assert cur.align(1000, b"abc") == (0, b"abc") and cur.next_offset == 1000


def test_in_order_chunks_need_no_alignment() -> None:
    cur = StreamCursor(0)
    assert cur.align(0, b"abc") == (0, b"abc") and cur.next_offset == 0
    cur.next_offset += 3
    assert cur.next_offset == 3


def test_a_chunk_beyond_the_cursor_reports_the_hole_first() -> None:
    cur = StreamCursor(10)
    assert cur.align(15, b"xyz") == (5, b"xyz")
    assert cur.next_offset == 10  # at the first byte of the hole
    assert cur.skip(10, 5) == 5  # the observer's gap() for that hole: 5 bytes lost
    assert cur.next_offset == 15  # at the first byte of the data returned


def test_an_overlapping_chunk_is_trimmed() -> None:
    cur = StreamCursor(10)
    assert cur.align(7, b"abcdef") == (0, b"def") and cur.next_offset == 10
    assert cur.align(3, b"abcdefg") == (0, b"") and cur.next_offset == 10  # all seen before
    assert cur.align(3, b"abcdefgh") == (0, b"h")


def test_skip_moves_past_a_gap_and_never_back() -> None:
    cur = StreamCursor()
    assert cur.skip(100, 20) == 20  # nothing seen yet: all of it is lost
    assert cur.next_offset == 120
    assert cur.skip(50, 10) == 0  # before the cursor: seen already
    assert cur.next_offset == 120
    assert cur.skip(120, 1) == 1
    assert cur.next_offset == 121
    assert cur.skip(111, 20) == 10  # 10 bytes before the cursor were seen, 10 are lost
    assert cur.next_offset == 131
    assert cur.skip(140, 5) == 5  # past the cursor: its own bytes (131..140 unreported)
    assert cur.next_offset == 145


@given(
    st.lists(st.tuples(st.integers(0, 64), st.integers(0, 16)), max_size=30),
)
def test_aligned_bytes_are_each_stream_byte_once_in_order(chunks: list[tuple[int, int]]) -> None:
    """Whatever chunks (offset, length) of one stream arrive, the bytes handed on plus the
    holes reported cover the stream from the first offset without overlap, in order."""
    stream = bytes(range(256)) * 2
    cur = StreamCursor()
    got: list[tuple[int, int | bytes]] = []
    for offset, n in chunks:
        hole, data = cur.align(offset, stream[offset : offset + n])
        if hole:
            got.append((cur.next_offset, hole))
            assert cur.skip(cur.next_offset, hole) == hole and cur.next_offset == offset
        if data:
            got.append((cur.next_offset, data))
        cur.next_offset += len(data)
    pos = None
    for off, item in got:
        if pos is not None:
            assert off == pos
        size = item if isinstance(item, int) else len(item)
        if isinstance(item, bytes):
            assert item == stream[off : off + size]
        pos = off + size
    if pos is not None:
        assert cur.next_offset == pos


def test_cursor_and_event_are_slotted() -> None:
    assert StreamCursor.__slots__ == ("next_offset",) and Event.__slots__ == ()
    with pytest.raises(AttributeError):
        StreamCursor().other = 1  # type: ignore[attr-defined]


def test_every_tls_sse_and_body_event_is_an_event() -> None:
    from pcaptools.protocols.body import HttpBody
    from pcaptools.protocols.sse import SseEvent
    from pcaptools.protocols.tls import events

    classes = [
        events.TlsRecord, events.TlsHandshakeMessage, events.TlsAlert,
        events.TlsHandshakeCompleted, events.TlsSession, SseEvent, HttpBody,
    ]
    for cls in classes:
        assert issubclass(cls, Event), cls
        assert "__slots__" in vars(cls), cls  # the base adds no per-instance dict
    assert issubclass(SseEvent, tuple) and SseEvent._fields[:2] == ("ts_ns", "frame")
