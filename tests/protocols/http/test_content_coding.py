"""Content codings of HTTP bodies (gzip, deflate zlib/raw, br, zstd, stacked), decoded as they
arrive, and the hand-off of decoded SSE bodies by both HTTP observers. Hand-built streams for
the edge cases; the recorded captures are in test_content_coding_captures.py."""

from __future__ import annotations

import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.body import open_body
from pcaptools.protocols.content_coding import ContentDecoder, parse_content_encoding
from pcaptools.protocols.http1 import Http1Observer, HttpExchange
from pcaptools.protocols.http2 import Http2Observer, Http2StreamEnded
from pcaptools.protocols.sse import SseEvent
from tests.protocols.http.helpers import (
    C2S,
    PREFACE,
    S2C,
    FrameFactory,
    feed_conversation,
    resegment,
    strip_times,
)

EVENTS = [
    f'data: {{"choices":[{{"delta":{{"content":"tok{i}"}}}}]}}\n\n'.encode() for i in range(6)
]


class _Coder:
    """A server-side streaming compressor that flushes after every write (as nginx's gzip
    filter does for proxy_buffering off, and brotli/zstd servers with flush)."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name in ("gzip", "deflate", "deflate-raw"):
            self.z = zlib.compressobj(6, zlib.DEFLATED, {"gzip": 31, "deflate": 15}.get(name, -15))
        elif name == "br":
            self.b = brotli.Compressor()
        else:
            self.c = zstandard.ZstdCompressor().compressobj()

    def write(self, data: bytes) -> bytes:
        if self.name == "br":
            return bytes(self.b.process(data) + self.b.flush())
        if self.name == "zstd":
            return bytes(self.c.compress(data) + self.c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
        return self.z.compress(data) + self.z.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        if self.name == "br":
            return bytes(self.b.finish())
        if self.name == "zstd":
            return bytes(self.c.flush())
        return self.z.flush()


def _pieces(name: str, events: list[bytes] = EVENTS) -> list[bytes]:
    """One compressed piece per event, then the end of the stream."""
    c = _Coder(name)
    return [c.write(e) for e in events] + [c.finish()]


CODINGS = ["gzip", "deflate", "deflate-raw", "br", "zstd"]


def _header(name: str) -> tuple[str, ...]:
    return parse_content_encoding(["deflate" if name == "deflate-raw" else name])


@pytest.mark.parametrize("name", CODINGS)
def test_each_flushed_event_is_decoded_when_its_bytes_arrive(name: str) -> None:
    d = ContentDecoder(_header(name))
    pieces = _pieces(name)
    got = [d.feed(p) for p in pieces]
    assert got[:-1] == EVENTS  # no event waits for a later packet
    assert got[-1] == b""
    assert d.end() == "decoded"
    assert d.decoded_bytes == sum(map(len, EVENTS))
    assert d.wire_bytes == sum(map(len, pieces))


@pytest.mark.parametrize("name", CODINGS)
def test_byte_by_byte_gives_the_same_bytes(name: str) -> None:
    d = ContentDecoder(_header(name))
    wire = b"".join(_pieces(name))
    out = b"".join(d.feed(wire[i : i + 1]) for i in range(len(wire)))
    assert out == b"".join(EVENTS)
    assert d.end() == "decoded"


def test_stacked_codings_are_undone_in_reverse_order() -> None:
    g, b = _Coder("gzip"), brotli.Compressor()
    pieces = [bytes(b.process(g.write(e)) + b.flush()) for e in EVENTS]
    pieces.append(bytes(b.process(g.finish()) + b.finish()))
    assert parse_content_encoding(["gzip, br"]) == ("gzip", "br")
    assert parse_content_encoding(["gzip", "identity, BR "]) == ("gzip", "br")
    d = ContentDecoder(("gzip", "br"))
    assert [d.feed(p) for p in pieces][:-1] == EVENTS
    assert d.end() == "decoded"


def test_concatenated_gzip_members_and_zstd_frames() -> None:
    two = _gzip(b"first ") + _gzip(b"second")
    d = ContentDecoder(("gzip",))
    assert d.feed(two) == b"first second" and d.end() == "decoded"
    z = zstandard.ZstdCompressor()
    d = ContentDecoder(("zstd",))
    assert d.feed(z.compress(b"one ") + z.compress(b"two")) == b"one two"
    assert d.end() == "decoded"


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def test_corrupt_stream_keeps_what_came_before() -> None:
    pieces = _pieces("gzip")
    d = ContentDecoder(("gzip",))
    assert d.feed(pieces[0]) == EVENTS[0]
    assert d.feed(b"\xde\xad\xbe\xef" * 4) == b""
    assert d.status == "corrupt" and d.problem is not None
    assert d.feed(pieces[1]) == b""  # nothing after the damage
    assert d.decoded_bytes == len(EVENTS[0])
    assert d.wire_bytes == len(pieces[0]) + 16 + len(pieces[1])


def test_body_ending_before_its_stream_is_truncated() -> None:
    pieces = _pieces("br")
    d = ContentDecoder(("br",))
    for p in pieces[:3]:
        d.feed(p)
    assert d.end() == "truncated"
    assert d.decoded_bytes == sum(map(len, EVENTS[:3]))


def test_decoded_bytes_are_bounded() -> None:
    bomb = zlib.compress(b"\0" * (4 << 20))  # 4 MiB of zeros in ~4 KiB
    d = ContentDecoder(("deflate",), max_decoded_bytes=1 << 20)
    out = d.feed(bomb)
    assert len(out) == 1 << 20 and d.decoded_bytes == 1 << 20 and d.status == "limit"
    z = zstandard.ZstdCompressor().compress(b"\0" * (4 << 20))
    d = ContentDecoder(("zstd",), max_decoded_bytes=1 << 20)
    assert len(d.feed(z)) == 1 << 20 and d.status == "limit"
    b = brotli.compress(b"\0" * (4 << 20))
    d = ContentDecoder(("br",), max_decoded_bytes=1 << 20)
    assert len(d.feed(b)) == 1 << 20 and d.status == "limit"


def test_unknown_coding_and_gap() -> None:
    d = ContentDecoder(("compress",))
    assert d.status == "unsupported" and d.feed(b"xyz") == b"" and d.wire_bytes == 3
    d = ContentDecoder(("gzip",))
    pieces = _pieces("gzip")
    assert d.feed(pieces[0]) == EVENTS[0]
    d.lose(100)
    assert (
        d.status == "gap"
        and d.feed(pieces[2]) == b""
        and d.wire_bytes == len(pieces[0]) + 100 + len(pieces[2])
    )


def test_deflate_told_apart_zlib_raw_and_gzip() -> None:
    for wire in (zlib.compress(b"hello"), _raw(b"hello"), _gzip(b"hello")):
        d = ContentDecoder(("deflate",))
        assert d.feed(wire[:1]) + d.feed(wire[1:]) == b"hello"
        assert d.end() == "decoded"


def _raw(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=300),
    name=st.sampled_from(["gzip", "deflate", "br", "zstd", "gzip, br"]),
)
def test_random_bytes_never_raise(data: bytes, name: str) -> None:
    d = ContentDecoder(parse_content_encoding([name]), max_decoded_bytes=1 << 16)
    out = d.feed(data[:150]) + d.feed(data[150:])
    d.end()
    assert len(out) <= 1 << 16
    assert d.status in ("decoded", "corrupt", "truncated", "limit", "decoding")


def test_open_body_only_when_there_is_something_to_do() -> None:
    diag = Diagnostics()
    assert open_body((("content-type", "text/html"),), tcp_stream=0, diag=diag) is None
    b = open_body(
        (("content-encoding", "identity"), ("content-type", "text/plain")), tcp_stream=0, diag=diag
    )
    assert b is None
    b = open_body((("content-encoding", "gzip"),), tcp_stream=0, diag=diag)
    assert b is not None and b.consumer is None and b.encoding == "gzip"


# --------------------------------------------------------------------------- HTTP/1.1 observer


def _h1_segments(name: str, *, corrupt_at: int | None = None) -> list[tuple[object, bytes]]:
    coding = "deflate" if name == "deflate-raw" else name
    req = b"GET /v1/stream HTTP/1.1\r\nHost: lab\r\nAccept-Encoding: gzip, br, zstd\r\n\r\n"
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        f"Content-Encoding: {coding}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    segs: list[tuple[object, bytes]] = [(C2S, req), (S2C, head)]
    for i, p in enumerate(_pieces(name)):
        if i == corrupt_at:
            p = b"\xde\xad\xbe\xef" * 4
        if p:
            segs.append((S2C, b"%x\r\n%s\r\n" % (len(p), p)))
    segs.append((S2C, b"0\r\n\r\n"))
    return segs


@pytest.mark.parametrize("name", CODINGS)
def test_http1_sse_over_a_coded_chunked_body(name: str) -> None:
    diag = Diagnostics()
    obs = Http1Observer(tcp_stream=7, diag=diag)
    events = feed_conversation(obs, _h1_segments(name))  # type: ignore[arg-type]
    sse = [e for e in events if isinstance(e, SseEvent)]
    assert [e.delta_text for e in sse] == [f"tok{i}" for i in range(6)]
    # event i is completed by the packet that carried its compressed bytes: frame 3 + i
    assert [e.frame for e in sse] == [3 + i for i in range(6)]
    ex = next(e for e in events if isinstance(e, HttpExchange))
    r = ex.response
    assert r is not None and ex.sse_events == 6
    assert r.content_decoding == "decoded"
    assert r.decoded_body_bytes == sum(map(len, EVENTS))
    assert r.body_bytes == sum(map(len, _pieces(name)))
    assert r.content_encoding == ("deflate" if name == "deflate-raw" else name)
    assert diag.rows == []


def test_http1_corrupt_stream_keeps_earlier_events_and_warns_once() -> None:
    diag = Diagnostics()
    obs = Http1Observer(tcp_stream=7, diag=diag)
    events = feed_conversation(obs, _h1_segments("gzip", corrupt_at=2))  # type: ignore[arg-type]
    sse = [e for e in events if isinstance(e, SseEvent)]
    assert [e.delta_text for e in sse] == ["tok0", "tok1"]
    codes = [a.code for a in diag.rows]
    assert codes == ["http.content_decoding_failed"]  # and no sse.incomplete_event
    assert diag.rows[0].frame == 5 and diag.rows[0].tcp_stream == 7
    ex = next(e for e in events if isinstance(e, HttpExchange))
    assert ex.response is not None and ex.response.content_decoding == "corrupt"
    assert ex.response.decoded_body_bytes == len(EVENTS[0]) + len(EVENTS[1])


def test_http1_unsupported_coding_parses_no_events_and_says_so() -> None:
    diag = Diagnostics()
    obs = Http1Observer(tcp_stream=1, diag=diag)
    segs = _h1_segments("gzip")
    segs[1] = (S2C, segs[1][1].replace(b"Content-Encoding: gzip", b"Content-Encoding: lzma"))
    events = feed_conversation(obs, segs)  # type: ignore[arg-type]
    assert not [e for e in events if isinstance(e, SseEvent)]
    assert [a.code for a in diag.rows] == ["http.content_encoding_unsupported"]
    ex = next(e for e in events if isinstance(e, HttpExchange))
    assert ex.response is not None
    assert (ex.response.content_decoding, ex.response.decoded_body_bytes) == ("unsupported", None)


def test_http1_identity_body_columns() -> None:
    obs = Http1Observer(tcp_stream=1)
    segs = [
        (C2S, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        (S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
    ]
    ex = next(e for e in feed_conversation(obs, segs) if isinstance(e, HttpExchange))  # type: ignore[arg-type]
    assert ex.response is not None
    assert (
        ex.response.content_encoding,
        ex.response.decoded_body_bytes,
        ex.response.content_decoding,
    ) == (None, 5, "identity")


def test_http1_coded_body_cut_by_the_capture_end_is_not_a_warning() -> None:
    diag = Diagnostics()
    obs = Http1Observer(tcp_stream=1, diag=diag)
    segs = _h1_segments("zstd")[:5]
    events = feed_conversation(obs, segs, at_eof=True)  # type: ignore[arg-type]
    assert len([e for e in events if isinstance(e, SseEvent)]) == 3
    assert diag.rows == []
    ex = next(e for e in events if isinstance(e, HttpExchange))
    assert ex.response is not None and ex.response.content_decoding == "incomplete"


def test_http1_gap_in_a_coded_body() -> None:
    diag = Diagnostics()
    obs = Http1Observer(tcp_stream=1, diag=diag)
    pieces = _pieces("gzip")
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n" % sum(map(len, pieces))
    )
    from pcaptools.protocols._base import StreamChunk

    out: list[object] = []
    out += obs.feed(StreamChunk(direction=C2S, data=req, ts_ns=1, frame=1, offset=0))
    out += obs.feed(StreamChunk(direction=S2C, data=head + pieces[0], ts_ns=2, frame=2, offset=0))
    off = len(head) + len(pieces[0])
    out += obs.gap(S2C, off, len(pieces[1]), 3, 3)
    off += len(pieces[1])
    rest = b"".join(pieces[2:])
    out += obs.feed(StreamChunk(direction=S2C, data=rest, ts_ns=4, frame=4, offset=off))
    sse = [e for e in out if isinstance(e, SseEvent)]
    assert [e.delta_text for e in sse] == ["tok0"]
    assert [a.code for a in diag.rows] == ["http.content_decoding_gap"]
    ex = next(e for e in out if isinstance(e, HttpExchange))
    assert ex.response is not None and ex.response.content_decoding == "gap"
    assert ex.response.body_bytes == sum(map(len, pieces))


# --------------------------------------------------------------------------- HTTP/2 observer


@pytest.mark.parametrize("name", ["gzip", "br", "zstd"])
def test_http2_sse_over_coded_data_frames(name: str) -> None:
    ff = FrameFactory()
    req = [(":method", "GET"), (":path", "/v1/stream"), (":scheme", "http"), (":authority", "lab")]
    resp = [(":status", "200"), ("content-type", "text/event-stream"), ("content-encoding", name)]
    pieces = _pieces(name)
    segs = [
        (C2S, PREFACE + ff.settings() + ff.headers(1, req, flags=("END_HEADERS", "END_STREAM"))),
        (S2C, ff.settings() + ff.headers(1, resp, direction=S2C)),
    ]
    segs += [(S2C, ff.data(1, p, end_stream=i == len(pieces) - 1)) for i, p in enumerate(pieces)]
    diag = Diagnostics()
    events = feed_conversation(Http2Observer(tcp_stream=3, diag=diag), segs)  # type: ignore[arg-type]
    sse = [e for e in events if isinstance(e, SseEvent)]
    assert [e.delta_text for e in sse] == [f"tok{i}" for i in range(6)]
    assert [e.frame for e in sse] == [3 + i for i in range(6)]
    end = next(e for e in events if isinstance(e, Http2StreamEnded))
    assert end.sse_events == 6 and end.content_encoding == name
    assert end.content_decoding == "decoded"
    assert end.decoded_body_bytes == sum(map(len, EVENTS))
    assert end.server_data_bytes == sum(map(len, pieces))
    assert diag.rows == []


def test_http2_rst_stream_mid_body_is_incomplete_not_a_warning() -> None:
    ff = FrameFactory()
    from hyperframe.frame import RstStreamFrame

    req = [(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "lab")]
    resp = [(":status", "200"), ("content-type", "text/event-stream"), ("content-encoding", "gzip")]
    pieces = _pieces("gzip")
    rst = RstStreamFrame(1)
    rst.error_code = 8
    segs = [
        (C2S, PREFACE + ff.settings() + ff.headers(1, req, flags=("END_HEADERS", "END_STREAM"))),
        (S2C, ff.settings() + ff.headers(1, resp, direction=S2C) + ff.data(1, pieces[0])),
        (C2S, rst.serialize()),
    ]
    diag = Diagnostics()
    events = feed_conversation(Http2Observer(tcp_stream=3, diag=diag), segs)  # type: ignore[arg-type]
    end = next(e for e in events if isinstance(e, Http2StreamEnded))
    assert end.content_decoding == "incomplete" and end.sse_events == 1
    assert [a.code for a in diag.rows] == []


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(0, 4000), max_size=25),
    name=st.sampled_from(["gzip", "deflate-raw", "br", "zstd"]),
)
def test_http1_coded_sse_does_not_depend_on_segmentation(cuts: list[int], name: str) -> None:
    segs = _h1_segments(name)
    whole = feed_conversation(Http1Observer(tcp_stream=7), segs)  # type: ignore[arg-type]
    split = feed_conversation(Http1Observer(tcp_stream=7), resegment(segs, cuts))  # type: ignore[arg-type]
    assert strip_times(split) == strip_times(whole)
