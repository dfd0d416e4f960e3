"""Hand-built HTTP/3 edge cases: varints, SETTINGS, grease and unknown frames and streams,
malformed frames (the stream stops, the connection carries on), gaps, FIN inside a frame,
and arbitrary bytes (never raises)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pylsqpack import Encoder

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.http3 import Http3Observer
from pcaptools.protocols.http3.frames import (
    Http3FrameError,
    error_name,
    frame_type_name,
    is_reserved,
    parse_settings,
    read_varint,
    settings_text,
)
from pcaptools.tcp.stream import Direction

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def v(n: int) -> bytes:
    """QUIC varint (RFC 9000 §16)."""
    if n < 0x40:
        return bytes([n])
    if n < 0x4000:
        return (0x4000 | n).to_bytes(2, "big")
    if n < 0x40000000:
        return (0x80000000 | n).to_bytes(4, "big")
    return (0xC000000000000000 | n).to_bytes(8, "big")


def frame(t: int, payload: bytes) -> bytes:
    return v(t) + v(len(payload)) + payload


def static_block(headers: list[tuple[bytes, bytes]]) -> bytes:
    """A field section that uses the static table only (a fresh encoder, no capacity)."""
    _, block = Encoder().encode(0, headers)
    return block


SETTINGS_NONE = frame(0x04, b"")
REQ = static_block([(b":method", b"GET"), (b":scheme", b"https"),
                    (b":authority", b"a.test"), (b":path", b"/x")])
RESP = static_block([(b":status", b"200"), (b"content-type", b"text/event-stream")])


def conversation(obs: Http3Observer, *, request: bytes | None = None,
                 response: bytes | None = None) -> None:
    obs.stream_data(2, C2S, 0, v(0) + SETTINGS_NONE, False, 1_000, 1)
    obs.stream_data(3, S2C, 0, v(0) + SETTINGS_NONE, False, 2_000, 2)
    obs.stream_data(0, C2S, 0, request if request is not None else frame(1, REQ), True,
                    3_000, 3)
    body = frame(0, b"data: hi\n\n") + frame(0, b"data: there\n\n")
    obs.stream_data(0, S2C, 0, response if response is not None else frame(1, RESP) + body,
                    True, 4_000, 4)
    obs.finish(5_000, 5)


def test_varints_and_settings() -> None:
    for n in (0, 37, 63, 64, 15293, 16383, 16384, 494878333, 2**62 - 1):
        assert read_varint(v(n), 0) == (n, len(v(n)))
        assert read_varint(v(n)[:-1], 0) is None or len(v(n)) == 1
    assert read_varint(b"", 0) is None
    assert parse_settings(v(1) + v(4096) + v(7) + v(16) + v(0x21) + v(5)) == (
        (1, 4096), (7, 16), (0x21, 5))
    assert settings_text(((1, 4096), (7, 16), (0x21, 5), (0x99, 1))) == (
        "QPACK_MAX_TABLE_CAPACITY=4096;QPACK_BLOCKED_STREAMS=16;reserved_0x21=5;0x99=1")
    for bad in (v(1), v(1) + v(2) + v(1) + v(3), v(3) + v(1)):
        try:
            parse_settings(bad)
        except Http3FrameError:
            pass
        else:  # pragma: no cover
            raise AssertionError(bad)
    assert is_reserved(0x21) and is_reserved(0x21 + 0x1F * 7) and not is_reserved(0x22)
    assert frame_type_name(1) == "HEADERS" and frame_type_name(0x40) == "reserved"
    assert frame_type_name(0x06) == "http2_only" and frame_type_name(0x2A) == "unknown"
    assert error_name(0x10C) == "H3_REQUEST_CANCELLED" and error_name(0x999) == "0x999"


def test_a_plain_request_with_static_qpack() -> None:
    obs = Http3Observer(connection=0, diag=Diagnostics())
    conversation(obs)
    (s,) = obs.streams
    assert (s.method, s.path, s.authority, s.status) == ("GET", "/x", "a.test", 200)
    assert s.sse_events == 2 and [e.data for e in obs.sse] == ["hi", "there"]
    assert s.end_reason == "end_stream" and s.end_frame == 4 and s.request_frame == 3
    assert s.response_headers_frame == 4 and s.server_data_bytes == 23
    assert obs.diag.rows == []


def test_grease_and_unknown_frames_are_skipped_and_counted() -> None:
    obs = Http3Observer(connection=0, diag=Diagnostics())
    grease = frame(0x21 + 0x1F * 3, b"xyz") + frame(0x2A, b"12345")
    conversation(obs, response=grease + frame(1, RESP) + grease + frame(0, b"data: a\n\n"))
    (s,) = obs.streams
    assert s.status == 200 and s.sse_events == 1 and s.server_frames == 6
    assert obs.reserved_frames == 2 and obs.unknown_frames == 2
    assert [f.type for f in obs.frames if f.stream_id == 0 and f.direction == S2C] == [
        0x21 + 0x1F * 3, 0x2A, 1, 0x21 + 0x1F * 3, 0x2A, 0]
    assert obs.diag.rows == []


def test_malformed_frame_stops_that_stream_only() -> None:
    obs = Http3Observer(connection=4, diag=Diagnostics())
    obs.stream_data(2, C2S, 0, v(0) + frame(0x04, v(1) + v(4096) + v(1) + v(0)), False, 1, 1)
    obs.stream_data(3, S2C, 0, v(0) + SETTINGS_NONE, False, 2, 2)
    obs.stream_data(0, C2S, 0, frame(1, REQ), True, 3, 3)
    obs.stream_data(0, S2C, 0, frame(1, RESP) + frame(0, b"data: ok\n\n"), True, 4, 4)
    obs.finish(5, 5)
    codes = [r.code for r in obs.diag.rows]
    assert codes == ["http3.malformed_frame"]
    assert "sent twice" in obs.diag.rows[0].detail
    (s,) = obs.streams
    assert s.status == 200 and s.sse_events == 1 and not s.desynced


def test_frames_not_allowed_where_they_are() -> None:
    obs = Http3Observer(connection=0, diag=Diagnostics())
    obs.stream_data(2, C2S, 0, v(0) + frame(0, b"oops") + SETTINGS_NONE + SETTINGS_NONE,
                    False, 1, 1)
    obs.stream_data(0, C2S, 0, frame(0x04, b"") + frame(0x08, b"\x00") + frame(1, REQ),
                    True, 2, 2)
    obs.finish(3, 3)
    details = [r.detail for r in obs.diag.rows]
    assert [r.code for r in obs.diag.rows] == ["http3.frame_unexpected"] * 4
    assert "not SETTINGS" in details[0] and "a second SETTINGS" in details[1]
    assert "SETTINGS" in details[2] and "http2_only (0x8)" in details[3]
    (s,) = obs.streams
    assert s.method == "GET" and s.end_reason == "open_at_end" and s.status is None


def test_fin_inside_a_frame_and_gaps() -> None:
    obs = Http3Observer(connection=0, diag=Diagnostics())
    obs.stream_data(2, C2S, 0, v(0) + SETTINGS_NONE, False, 1, 1)
    obs.stream_data(3, S2C, 0, v(0) + SETTINGS_NONE, False, 1, 1)
    obs.stream_data(0, C2S, 0, frame(1, REQ)[:-2], True, 2, 2)  # FIN inside HEADERS
    head = frame(1, RESP) + v(0) + v(40)
    obs.stream_data(4, C2S, 0, frame(1, REQ), True, 3, 3)
    obs.stream_data(4, S2C, 0, head + b"data: one\n\n", False, 4, 4)  # 11 of 40 bytes
    obs.stream_gap(4, S2C, len(head) + 11, 10, 5, 5)  # lost inside the DATA payload
    obs.stream_data(4, S2C, len(head) + 21, b"x" * 17 + b"\n\n" + frame(0, b"data: two\n\n"),
                    True, 6, 6)
    obs.stream_data(8, C2S, 0, frame(1, REQ), True, 7, 7)
    obs.stream_gap(8, S2C, 0, 5, 8, 8)  # the response's start was lost
    obs.stream_data(8, S2C, 5, b"anything", True, 9, 9)
    obs.finish(10, 10)
    codes = [r.code for r in obs.diag.rows]
    assert codes == ["http3.frame_truncated", "http3.stream_gap", "http3.stream_gap"]
    st_ = {s.stream_id: s for s in obs.streams}
    assert st_[0].method is None and st_[0].desynced
    s4 = st_[4]
    assert s4.server_data_bytes == 40 + 11 and s4.status == 200 and not s4.desynced
    assert [e.data for e in obs.sse] == ["one", "two"]  # the event hit by the gap is dropped
    assert st_[8].status is None and st_[8].desynced and st_[8].end_reason == "end_stream"


def test_unidirectional_stream_types() -> None:
    obs = Http3Observer(connection=0, diag=Diagnostics())
    obs.stream_data(2, C2S, 0, v(0) + SETTINGS_NONE, False, 1, 1)
    obs.stream_data(6, C2S, 0, v(0x21 + 0x1F) + b"grease stream", True, 2, 2)
    obs.stream_data(10, C2S, 0, v(0x54) + b"unknown", True, 3, 3)
    obs.stream_data(14, C2S, 0, v(0) + SETTINGS_NONE, False, 4, 4)  # a second control
    obs.stream_data(1, S2C, 0, b"server bidi", False, 5, 5)
    obs.stream_data(15, S2C, 0, v(1) + v(0) + frame(1, RESP), True, 6, 6)  # push stream
    obs.stream_reset(2, C2S, 0x104, 3, 7, 7)
    obs.finish(8, 8)
    codes = [r.code for r in obs.diag.rows]
    assert codes == ["http3.unexpected_stream", "http3.unexpected_stream",
                     "http3.critical_stream_closed"]
    push = [f for f in obs.frames if f.stream_kind == "push"]
    assert [(f.type, f.headers) for f in push] == [
        (1, ((":status", "200"), ("content-type", "text/event-stream")))]
    assert obs.streams == []


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from([0, 2, 3, 4, 7]), st.booleans(), st.binary(
    max_size=40)), max_size=12))
def test_arbitrary_bytes_never_raise(chunks: list[tuple[int, bool, bytes]]) -> None:
    obs = Http3Observer(connection=0, diag=Diagnostics())
    offsets: dict[tuple[int, Direction], int] = {}
    for i, (sid, server, data) in enumerate(chunks):
        d = S2C if server else C2S
        off = offsets.get((sid, d), 0)
        obs.stream_data(sid, d, off, data, i == len(chunks) - 1, i, i + 1)
        offsets[(sid, d)] = off + len(data)
    obs.finish(99, 99)
    assert all(r.code.startswith("http3.") for r in obs.diag.rows)


def test_push_promise_is_not_the_response() -> None:
    obs = Http3Observer(connection=0, diag=Diagnostics())
    pushed = static_block([(b":method", b"GET"), (b":scheme", b"https"),
                           (b":authority", b"a.test"), (b":path", b"/style.css")])
    conversation(obs, request=frame(1, REQ) + frame(5, v(0) + pushed),
                 response=frame(5, v(3) + pushed) + frame(1, RESP) + frame(0, b"data: x\n\n"))
    (s,) = obs.streams
    assert (s.status, s.content_type, s.sse_events, s.path) == (
        200, "text/event-stream", 1, "/x")
    (promise,) = [f for f in obs.frames if f.type == 5 and f.direction == S2C]
    assert promise.push_id == 3 and dict(promise.headers or ())[":path"] == "/style.css"
    assert [r.code for r in obs.diag.rows] == ["http3.frame_unexpected"]  # the client's one


def test_row_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from pcaptools.protocols.http3 import observer as mod

    monkeypatch.setattr(mod, "MAX_HTTP3_SSE_ROWS", 1)
    obs = Http3Observer(connection=0, diag=Diagnostics(), max_frame_rows=3)
    conversation(obs)
    (s,) = obs.streams
    assert s.sse_events == 2 and len(obs.sse) == 1 and obs.sse_rows_dropped == 1
    assert len(obs.frames) == 3 and obs.frame_rows_dropped == 3
    assert [r.code for r in obs.diag.rows] == ["http3.frame_rows_capped", "http3.sse_rows_capped"]
