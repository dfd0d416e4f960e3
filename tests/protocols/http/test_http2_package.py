"""The shape of pcaptools.protocols.http2 (a package: frames, events, observer): the frame
dispatch table, the byte-stream contract, the event base and the names kept at the old path."""

from __future__ import annotations

import dataclasses

import pcaptools.protocols.http2 as h2
from pcaptools.protocols.http2 import frames as h2frames
from pcaptools.protocols.http2.events import (
    H2cUpgrade,
    Http2ConnectionEnded,
    Http2Frame,
    Http2StreamEnded,
)
from pcaptools.protocols.http2.observer import Http2Observer
from pcaptools.tcp.stream import Direction, Event, StreamChunk
from tests.protocols.http.helpers import PREFACE, FrameFactory
from tests.protocols.http.test_http2_observer import REQ, conn, frames, observer

C2S = Direction.CLIENT_TO_SERVER


def test_dispatch_table_names_every_frame_type_and_unknown_types_have_one_handler() -> None:
    from pcaptools.protocols.http2 import observer as h2obs

    table = h2obs._FRAME_HANDLERS
    assert {t: h.__name__ for t, h in table.items()} == {
        0: "_unknown_frame",  # DATA is streamed by _parse, never dispatched
        1: "_header_frame",
        2: "_priority_frame",
        3: "_rst_stream_frame",
        4: "_settings_frame",
        5: "_header_frame",
        6: "_ping_frame",
        7: "_goaway_frame",
        8: "_window_update_frame",
        9: "_continuation_frame",
    }
    assert sorted(table) == list(range(len(h2.FRAME_TYPES)))
    assert h2obs._ON_UNKNOWN_FRAME is Http2Observer._unknown_frame
    # the class's functions, built once: an observer holds no bound method of itself (a
    # reference cycle would keep a finished connection's state until the cycle collector runs)
    assert all(h is getattr(Http2Observer, h.__name__) for h in table.values())
    obs, _ = observer()
    assert not any(getattr(v, "__self__", None) is obs for v in vars(obs).values())


def test_unknown_frame_types_are_recorded_and_parsing_carries_on() -> None:
    ff = FrameFactory()
    unknown = b"\x00\x00\x03\x0a\x05\x00\x00\x00\x01abc"  # type 0x0a, flags 5, stream 1
    big_type = b"\x00\x00\x00\xff\x00\x00\x00\x00\x00"  # type 0xff, empty, stream 0
    headers = ff.headers(1, REQ)  # END_HEADERS only: the request stays open
    data = PREFACE + ff.settings({3: 100}) + unknown + big_type + headers
    obs, diag = observer()
    ev = obs.feed(StreamChunk(direction=C2S, data=data, ts_ns=1, frame=7, offset=0))
    ev += obs.finish(2, 8)
    got = [(f.type, f.type_name, f.flags, f.stream_id, f.length) for f in frames(ev)]
    assert got == [
        (4, "SETTINGS", 0, 0, 6),
        (10, "unknown", 5, 1, 3),
        (255, "unknown", 0, 0, 0),
        (1, "HEADERS", 4, 1, len(headers) - 9),
    ]
    assert diag.rows == []
    assert conn(ev).client_frames == 4


def test_the_observer_implements_the_stream_observer_contract() -> None:
    obs, _ = observer()
    assert obs.wants_bytes is True
    assert obs.feed(StreamChunk(direction=C2S, data=PREFACE, ts_ns=1, frame=1, offset=0)) == []
    assert obs.gap(C2S, 24, 0, 1, 1) == []
    assert obs.close(C2S, 2, 2) == []  # the other direction is still open
    assert obs.wants_bytes is True
    (ended,) = obs.finish(3, 3)
    assert isinstance(ended, Http2ConnectionEnded)
    assert (ended.ts_ns, ended.frame, ended.start) == (3, 3, "preface")
    assert obs.wants_bytes is False and obs.finished
    assert obs.finish(4, 4) == [] and obs.close(C2S, 4, 4, at_eof=True) == []


def test_every_event_derives_from_the_event_base() -> None:
    for cls in (Http2Frame, Http2StreamEnded, Http2ConnectionEnded):
        assert issubclass(cls, Event), cls
        names = [f.name for f in dataclasses.fields(cls)]
        assert names[:2] == ["ts_ns", "frame"], cls
        assert cls.__dictoffset__ == 0, cls  # still slotted: the base adds no __dict__
    f = Http2Frame(ts_ns=1, frame=2, direction=C2S, tcp_stream=0, stream_id=0, type=4, flags=0,
                   length=0)
    assert isinstance(f, Event) and not hasattr(f, "__dict__")
    # the h2c hand-over is an argument of the observer, not an event it returns
    assert not issubclass(H2cUpgrade, Event)


def test_old_import_paths_still_resolve() -> None:
    from pcaptools.protocols.http2 import PREFACE as P
    from pcaptools.protocols.http2 import _plausible

    assert P == b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    assert _plausible is h2frames.plausible_frame_header
    assert h2.Http2Observer is Http2Observer and h2.Http2Frame is Http2Frame
    for name in h2.__all__:
        assert hasattr(h2, name), name
    assert h2._MAX_OPEN_STREAMS == 100_000 and h2._MAX_BUFFERED_FRAME == 1 << 20


def test_frame_header_helpers() -> None:
    hdr = b"\x01\x00\x02\x04\x01\x80\x00\x00\x03"
    assert h2frames.parse_frame_header(b"xx" + hdr, 2) == (0x010002, 4, 1, 0x80000003)
    assert h2frames.FRAME_HEADER.size == h2frames.FRAME_HEADER_LEN == 9
    # plausible: SETTINGS ACK must be empty on stream 0; PING is 8 bytes on stream 0
    assert h2frames.plausible_frame_header(0, h2.SETTINGS, h2.F_ACK, 0, 16384)
    assert not h2frames.plausible_frame_header(6, h2.SETTINGS, h2.F_ACK, 0, 16384)
    assert h2frames.plausible_frame_header(8, h2.PING, 0, 0, 16384)
    assert not h2frames.plausible_frame_header(8, h2.PING, 0, 1, 16384)
    assert not h2frames.plausible_frame_header(0, 10, 0, 1, 16384)
    assert not h2frames.plausible_frame_header(16385, h2.DATA, 0, 1, 16384)
