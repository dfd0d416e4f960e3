"""pcaptools.protocols.detect: which observer for a stream, and the HttpDetector wrapper."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import StreamChunk
from pcaptools.protocols.detect import HttpDetector, detect, observer_for, tls_inner_factory
from pcaptools.protocols.http1 import Http1Observer, HttpExchange
from pcaptools.protocols.http2 import Http2ConnectionEnded, Http2Frame, Http2Observer
from tests.protocols.http.helpers import C2S, PREFACE, S2C, FrameFactory, feed_conversation


@pytest.mark.parametrize(
    ("data", "direction", "midstream", "want"),
    [
        (PREFACE, C2S, False, "http2"),
        (PREFACE[:10], C2S, False, "need_more"),
        (b"", C2S, False, "need_more"),
        (b"GET / HTTP/1.1\r\n", C2S, False, "http1"),
        (b"POST /v1/chat/completions HTTP/1.1\n", C2S, False, "http1"),
        (b"GE", C2S, False, "need_more"),
        (b"GET /very/long/path?q=1", C2S, False, "need_more"),
        (b"get / HTTP/1.1\r\n", C2S, False, "unknown"),
        (b"\x16\x03\x01\x02\x00\x01", C2S, False, "unknown"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", C2S, False, "unknown"),
        (b"HTTP/1.1 200 OK\r\n", S2C, False, "http1"),
        (b"HTTP/1.", S2C, False, "need_more"),
        (b"\x00\x00\x12\x04\x00\x00\x00\x00\x00", S2C, False, "http2"),
        (b"\x00\x00", S2C, False, "need_more"),
        (b"220 mail.example ESMTP\r\n", S2C, False, "unknown"),
        (b"xx\r\nGET /a HTTP/1.1\r\n", C2S, True, "http1"),
        (b"body-bytes", C2S, True, "need_more"),
        (b"...\r\nHTTP/1.1 404 Not Found\r\n", S2C, True, "http1"),
        (FrameFactory.window_update(0, 5) + FrameFactory.ping(), S2C, True, "http2"),
    ],
)
def test_detect(data: bytes, direction: object, midstream: bool, want: str) -> None:
    assert detect(data, direction, midstream=midstream) == want  # type: ignore[arg-type]


def test_observer_for_kinds_and_alpn() -> None:
    diag = Diagnostics()
    assert isinstance(observer_for("h2", tcp_stream=1, diag=diag), Http2Observer)
    assert isinstance(observer_for("http2", tcp_stream=1, diag=diag), Http2Observer)
    assert isinstance(observer_for("http/1.1", tcp_stream=1, diag=diag), Http1Observer)
    assert observer_for("imap", tcp_stream=1, diag=diag) is None
    make = tls_inner_factory(tcp_stream=3, diag=diag)
    assert isinstance(make("h2"), Http2Observer)
    assert isinstance(make(None), HttpDetector)
    assert make("spdy/3") is None


def test_detector_replays_held_bytes_to_http1() -> None:
    det = HttpDetector(tcp_stream=4, diag=Diagnostics())
    ev = feed_conversation(
        det,
        [
            (C2S, b"GE"),
            (C2S, b"T /x HT"),
            (C2S, b"TP/1.1\r\nHost: h\r\n\r\n"),
            (S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ],
    )
    assert det.kind == "http1" and isinstance(det.inner, Http1Observer)
    (ex,) = [e for e in ev if isinstance(e, HttpExchange)]
    assert ex.request is not None and ex.response is not None
    assert (
        ex.tcp_stream,
        ex.request.target,
        ex.request.start_frame,
        ex.request.end_frame,
        ex.response.end_frame,
    ) == (4, "/x", 1, 3, 4)


def test_detector_http2_from_the_server_side_first() -> None:
    ff = FrameFactory()
    det = HttpDetector(tcp_stream=4, diag=Diagnostics())
    ev = feed_conversation(det, [(S2C, ff.settings({3: 10})), (C2S, PREFACE + ff.settings({}))])
    assert det.kind == "http2"
    assert [(f.frame, f.direction) for f in ev if isinstance(f, Http2Frame)] == [(1, S2C), (2, C2S)]
    assert isinstance(ev[-1], Http2ConnectionEnded)


def test_detector_gives_up_on_other_protocols_and_on_close() -> None:
    det = HttpDetector(tcp_stream=1, diag=Diagnostics())
    assert (
        det.feed(StreamChunk(direction=S2C, data=b"220 smtp\r\n", ts_ns=1, frame=1, offset=0)) == []
    )
    assert det.kind is None  # the client has not spoken yet
    assert (
        det.feed(StreamChunk(direction=C2S, data=b"EHLO x\r\n", ts_ns=2, frame=2, offset=0)) == []
    )
    assert det.kind == "none" and det.inner is None
    assert (
        det.feed(
            StreamChunk(direction=C2S, data=b"GET / HTTP/1.1\r\n\r\n", ts_ns=3, frame=3, offset=8)
        )
        == []
    )
    det = HttpDetector(tcp_stream=1, diag=Diagnostics())
    det.feed(StreamChunk(direction=C2S, data=b"GET", ts_ns=1, frame=1, offset=0))
    assert det.close(C2S, 2, 2) == [] and det.kind == "none"


def test_detector_budget_and_midstream() -> None:
    det = HttpDetector(tcp_stream=1, diag=Diagnostics(), midstream=True, max_probe_bytes=1000)
    for i in range(3):
        det.feed(StreamChunk(direction=S2C, data=b"x" * 400, ts_ns=i, frame=i + 1, offset=400 * i))
    assert det.kind == "none"
    det = HttpDetector(tcp_stream=1, diag=Diagnostics(), midstream=True)
    ev = feed_conversation(det, [(S2C, b"end of a body\r\nHTTP/1.1 204 No Content\r\n\r\n")])
    assert det.kind == "http1"
    (ex,) = [e for e in ev if isinstance(e, HttpExchange)]
    assert ex.request is None and ex.response is not None and ex.response.status == 204


@given(
    st.lists(st.tuples(st.booleans(), st.binary(max_size=120)), max_size=8),
    st.booleans(),
    st.sampled_from([b"", b"GET / HTTP/1.1\r\n", PREFACE, b"HTTP/1.1 200 OK\r\n"]),
)
def test_detector_random_bytes_never_raise(
    parts: list[tuple[bool, bytes]], midstream: bool, lead: bytes
) -> None:
    det = HttpDetector(tcp_stream=1, diag=Diagnostics(), midstream=midstream, max_probe_bytes=300)
    off = [0, 0]
    parts = [(lead.startswith(b"HTTP"), lead), *parts]
    for i, (server, data) in enumerate(parts):
        d = S2C if server else C2S
        det.feed(StreamChunk(direction=d, data=data, ts_ns=i, frame=i + 1, offset=off[d]))
        off[d] += len(data)
        if i == 2:
            det.gap(d, off[d], 3, i, i + 1)
            off[d] += 3
    det.finish(len(parts), len(parts) + 1)
    assert det.kind in ("http1", "http2", "none", None)
