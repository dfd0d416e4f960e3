"""HTTP/2 fast paths: a chunk is parsed in place when nothing is held (only its unparsed tail is
kept), and Http2Frame events are built by setting their slots. Both must be invisible."""

from __future__ import annotations

from dataclasses import fields

from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.protocols._base import StreamChunk
from pcaptools.protocols.http2 import Http2Frame
from tests.protocols.http.helpers import conversation_items, resegment
from tests.protocols.http.test_http2_observer import (
    CONVERSATION,
    TOTAL,
    frames,
    llm_conversation,
    observer,
)


def _feed(chunks: list[StreamChunk], kind: type) -> tuple[list[object], list[object]]:
    obs, diag = observer()
    events: list[object] = []
    for c in chunks:
        data = kind(c.data)
        events += obs.feed(
            StreamChunk(
                direction=c.direction, data=data, ts_ns=c.ts_ns, frame=c.frame, offset=c.offset
            )
        )
    events += obs.finish()
    return events, diag.rows


def test_frames_equal_the_dataclass_built_normally() -> None:
    obs, _ = observer()
    events: list[object] = []
    for c in conversation_items(llm_conversation()):
        events += obs.feed(c)
    fs = frames(events)
    assert [f.type_name for f in fs][:6] == [
        "SETTINGS", "WINDOW_UPDATE", "SETTINGS", "SETTINGS", "SETTINGS", "HEADERS",
    ]
    for f in fs:
        again = Http2Frame(**{x.name: getattr(f, x.name) for x in fields(Http2Frame)})
        assert again == f and hash(again) == hash(f) and repr(again) == repr(f)
    assert {f.tcp_stream for f in fs} == {5}


@given(st.lists(st.integers(1, TOTAL - 1), max_size=25))
@settings(max_examples=60, deadline=None)
def test_bytes_bytearray_and_memoryview_chunks_give_the_same_events(cuts: list[int]) -> None:
    chunks = conversation_items(resegment(CONVERSATION, cuts))
    ref = _feed(chunks, bytes)
    assert ref[1] == []
    assert len(frames(ref[0])) == 14
    assert _feed(chunks, bytearray) == ref
    assert _feed(chunks, memoryview) == ref
