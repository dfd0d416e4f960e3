"""pcaptools.protocols.http1.Http1Observer on hand-written HTTP/1.x conversations."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.http1 import (
    Http1Observer,
    HttpExchange,
    HttpRequest,
    HttpResponse,
    ProtocolSwitched,
    parse_retry_after,
)
from pcaptools.protocols.http2 import Http2Frame, Http2StreamEnded
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


def observer(**kw: object) -> tuple[Http1Observer, Diagnostics]:
    diag = Diagnostics()
    return Http1Observer(tcp_stream=2, diag=diag, **kw), diag  # type: ignore[arg-type]


def exchanges(events: list[object]) -> list[HttpExchange]:
    return sorted((e for e in events if isinstance(e, HttpExchange)), key=lambda e: e.request_index)


def summary(events: list[object]) -> list[tuple[object, ...]]:
    """(index, position, method, target, request end frame, status, response end frame,
    response body bytes, end_reason) per exchange"""
    out = []
    for e in exchanges(events):
        q, r = e.request, e.response
        out.append(
            (
                e.request_index,
                e.position,
                q.method if q else None,
                q.target if q else None,
                q.end_frame if q else None,
                r.status if r else None,
                r.end_frame if r else None,
                r.body_bytes if r else None,
                e.end_reason,
            )
        )
    return out


def test_get_with_content_length() -> None:
    obs, diag = observer()
    ev = feed_conversation(
        obs,
        [
            (C2S, b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\n"),
            (S2C, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10\r\n\r\n01234"),
            (S2C, b"56789"),
        ],
    )
    assert summary(ev) == [(1, 1, "GET", "/index.html", 1, 200, 3, 10, "complete")]
    (e,) = exchanges(ev)
    assert e.request is not None and e.response is not None
    assert e.request.header("HOST") == "example.com" and e.request.header_bytes == 62
    assert (e.request.start_ts_ns, e.request.end_ts_ns) == (1_000_000_000, 1_000_000_000)
    assert (e.response.start_frame, e.response.head_frame, e.response.header_bytes) == (2, 2, 64)
    assert (e.first_response_frame, e.first_response_ts_ns) == (2, 1_001_000_000)
    assert (e.response.chunked, e.response.until_close, e.response.wire_bytes) == (False, False, 74)
    assert e.frame == 3 and e.direction == S2C
    assert diag.rows == []


def test_pipelining_head_204_304_and_chunked() -> None:
    obs, diag = observer()
    ev = feed_conversation(
        obs,
        [
            (
                C2S,
                b"HEAD /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n"
                b"GET /c HTTP/1.1\r\nHost: h\r\n\r\nGET /d HTTP/1.1\r\nHost: h\r\n\r\n",
            ),
            (
                S2C,
                # HEAD: no body despite the length
                b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"
                b"HTTP/1.1 204 No Content\r\n\r\n"
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n",
            ),
            (
                S2C,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                b"4;ext=1\r\nabcd\r\n0A\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n",
            ),
        ],
    )
    assert summary(ev) == [
        (1, 1, "HEAD", "/a", 1, 200, 2, 0, "complete"),
        (2, 2, "GET", "/b", 1, 204, 2, 0, "complete"),
        (3, 3, "GET", "/c", 1, 304, 2, 0, "complete"),
        (4, 4, "GET", "/d", 1, 200, 3, 14, "complete"),
    ]
    last = exchanges(ev)[3].response
    assert (
        last is not None
        and last.chunked
        and last.wire_bytes
        == len(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
            b"4;ext=1\r\nabcd\r\n0A\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
        )
    )
    assert diag.rows == []


def test_request_bodies_and_100_continue() -> None:
    obs, _ = observer()
    ev = feed_conversation(
        obs,
        [
            (
                C2S,
                b"POST /upload HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                b"Content-Length: 6\r\n\r\n",
            ),
            (S2C, b"HTTP/1.1 100 Continue\r\n\r\n"),
            (C2S, b"abcdef"),
            (S2C, b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"),
            (C2S, b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
            (S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ],
    )
    assert summary(ev) == [
        (1, 1, "POST", "/upload", 3, 201, 4, 0, "complete"),
        (2, 2, "PUT", "/x", 5, 200, 6, 2, "complete"),
    ]
    e = exchanges(ev)
    assert e[0].interim_statuses == (100,) and e[0].first_response_frame == 2
    assert e[0].response is not None and e[0].response.start_frame == 4
    assert e[0].request is not None and e[0].request.body_bytes == 6
    assert e[1].request is not None and (e[1].request.chunked, e[1].request.body_bytes) == (True, 3)


def test_body_until_close_ends_at_the_fin_and_is_open_at_end_of_capture() -> None:
    conv = [
        (C2S, b"GET / HTTP/1.0\r\n\r\n"),
        (S2C, b"HTTP/1.0 200 OK\r\n\r\nhello "),
        (S2C, b"world"),
    ]
    obs, diag = observer()
    ev = feed_conversation(obs, conv)
    # feed_conversation closes C2S at frame 4 and S2C at frame 5: the body ends at the server's FIN
    assert summary(ev) == [(1, 1, "GET", "/", 1, 200, 5, 11, "complete")]
    assert exchanges(ev)[0].response.until_close  # type: ignore[union-attr]
    obs, diag = observer()
    ev = feed_conversation(obs, conv, at_eof=True)
    assert summary(ev) == [(1, 1, "GET", "/", 1, 200, None, 11, "open_at_eof")]
    assert diag.rows == []


def test_truncated_message_at_close() -> None:
    obs, diag = observer()
    ev = feed_conversation(
        obs,
        [
            (C2S, b"GET / HTTP/1.1\r\n\r\n"),
            (S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"),
        ],
    )
    assert summary(ev) == [(1, 1, "GET", "/", 1, 200, None, 5, "connection_closed")]
    assert [(r.code, r.frame, r.direction) for r in diag.rows] == [
        ("http1.truncated_message", 4, "server_to_client")
    ]


class FakeWs:
    """Records what a WebSocket observer would receive."""

    def __init__(self, request: HttpRequest | None, response: HttpResponse) -> None:
        self.request, self.response = request, response
        self.chunks: list[StreamChunk] = []
        self.closed: list[Direction] = []

    def feed(self, chunk: StreamChunk) -> list[object]:
        self.chunks.append(chunk)
        return [("ws", chunk.direction, chunk.data)]

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        return [("gap", direction, offset, nbytes)]

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        self.closed.append(direction)
        return []


WS_REQ = (
    b"GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
WS_RESP = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
)


def test_websocket_upgrade_hands_the_rest_to_the_factory() -> None:
    made: list[FakeWs] = []

    def factory(req: HttpRequest | None, resp: HttpResponse) -> FakeWs:
        made.append(FakeWs(req, resp))
        return made[-1]

    obs, diag = observer(websocket_factory=factory)
    ev = feed_conversation(
        obs,
        [
            (C2S, WS_REQ + b"\x81\x85early"),  # the client did not wait for the 101
            (S2C, WS_RESP + b"\x81\x02hi"),
            (C2S, b"more"),
        ],
    )
    (ws,) = made
    assert ws.request is not None and ws.request.target == "/chat" and ws.response.status == 101
    assert [(c.direction, c.data, c.offset, c.frame) for c in ws.chunks] == [
        (C2S, b"\x81\x85early", 0, 1),
        (S2C, b"\x81\x02hi", 0, 2),
        (C2S, b"more", 7, 3),
    ]
    assert ws.closed == [C2S, S2C]
    sw = [e for e in ev if isinstance(e, ProtocolSwitched)]
    assert [(s.frame, s.protocol, s.parsed, s.request_index) for s in sw] == [
        (2, "websocket", True, 1)
    ]
    assert summary(ev) == [(1, 1, "GET", "/chat", 1, 101, 2, 0, "complete")]
    assert exchanges(ev)[0].upgrade == "websocket"
    assert ("ws", S2C, b"\x81\x02hi") in ev
    assert diag.rows == []
    assert obs.inner is ws


def test_upgrade_without_a_factory_is_counted_only() -> None:
    obs, diag = observer()
    ev = feed_conversation(
        obs, [(C2S, WS_REQ), (S2C, WS_RESP + b"\x81\x02hi"), (C2S, b"\x81\x80abcd")]
    )
    assert [(s.protocol, s.parsed) for s in ev if isinstance(s, ProtocolSwitched)] == [
        ("websocket", False)
    ]
    assert [(r.code, r.frame) for r in diag.rows] == [("http1.upgrade_not_followed", 2)]
    assert len(exchanges(ev)) == 1


def test_h2c_upgrade_continues_as_http2_with_stream_1() -> None:
    ff = FrameFactory()
    obs, diag = observer()
    ev = feed_conversation(
        obs,
        [
            (
                C2S,
                b"GET /robots.txt HTTP/1.1\r\nHost: nghttp2.org\r\n"
                b"Connection: Upgrade, HTTP2-Settings\r\n"
                b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
            ),
            (
                S2C,
                b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
                + ff.settings({3: 100}),
            ),
            (C2S, PREFACE + ff.settings({}) + ff.settings(ack=True)),
            (
                S2C,
                ff.headers(1, [(":status", "200"), ("content-length", "2")], direction=S2C)
                + ff.data(1, b"ok", end_stream=True),
            ),
        ],
    )
    assert summary(ev) == [(1, 1, "GET", "/robots.txt", 1, 101, 2, 0, "complete")]
    assert [(f.frame, f.direction, f.type_name) for f in ev if isinstance(f, Http2Frame)] == [
        (2, S2C, "SETTINGS"),
        (3, C2S, "SETTINGS"),
        (3, C2S, "SETTINGS"),
        (4, S2C, "HEADERS"),
        (4, S2C, "DATA"),
    ]
    (s,) = [e for e in ev if isinstance(e, Http2StreamEnded)]
    assert (s.stream_id, s.method, s.path, s.authority, s.status, s.end_reason) == (
        1,
        "GET",
        "/robots.txt",
        "nghttp2.org",
        200,
        "end_stream",
    )
    assert diag.rows == []


def test_declined_upgrade_keeps_http1() -> None:
    obs, diag = observer()
    ev = feed_conversation(
        obs,
        [
            (C2S, b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"),
            (C2S, b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n"),  # held back until the answer is known
            (S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA"),
            (S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB"),
        ],
    )
    assert summary(ev) == [
        (1, 1, "GET", "/", 1, 200, 3, 1, "complete"),
        (2, 2, "GET", "/next", 2, 200, 4, 1, "complete"),
    ]
    assert diag.rows == []


def test_connect_tunnel() -> None:
    obs, diag = observer()
    ev = feed_conversation(
        obs,
        [
            (C2S, b"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n"),
            (S2C, b"HTTP/1.1 200 Connection established\r\n\r\n"),
            (C2S, b"\x16\x03\x01\x00\x05hello"),
            (S2C, b"\x16\x03\x03\x00\x02hi"),
        ],
    )
    assert summary(ev) == [(1, 1, "CONNECT", "api.example:443", 1, 200, 2, 0, "complete")]
    assert [(s.protocol, s.parsed) for s in ev if isinstance(s, ProtocolSwitched)] == [
        ("connect", False)
    ]
    assert [r.code for r in diag.rows] == ["http1.upgrade_not_followed"]


def test_sse_over_chunked_body() -> None:
    obs, _ = observer()
    body = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
    ev = feed_conversation(
        obs,
        [
            (
                C2S,
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nContent-Length: 2\r\n\r\n{}",
            ),
            (
                S2C,
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n",
            ),
            (S2C, f"{len(body):x}\r\n".encode() + body + b"\r\n"),
            (S2C, b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"),
        ],
    )
    sse = [e for e in ev if isinstance(e, SseEvent)]
    assert [(e.frame, e.request_index, e.stream_id, e.delta_text, e.done) for e in sse] == [
        (3, 1, None, "Hi", False),
        (4, 1, None, None, True),
    ]
    assert exchanges(ev)[0].sse_events == 2


def test_mid_connection_start_resynchronises() -> None:
    obs, diag = observer(midstream=True)
    ev = feed_conversation(
        obs,
        [
            (S2C, b"tail of an earlier body\r\n"),
            (C2S, b"rest of a request body"),
            (C2S, b"GET /two HTTP/1.1\r\nHost: h\r\n\r\n"),
            (S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        ],
    )
    assert summary(ev) == [(1, None, "GET", "/two", 3, 200, 4, 0, "complete")]
    assert [(r.code, r.frame, r.direction) for r in diag.rows] == [
        ("http1.resynchronised", 3, "client_to_server"),
        ("http1.resynchronised", 4, "server_to_client"),
    ]


def test_response_without_request_and_bad_message() -> None:
    obs, diag = observer()
    ev = feed_conversation(
        obs,
        [
            (C2S, b"BAD REQUEST LINE\r\n\r\nGET /ok HTTP/1.1\r\n\r\n"),
            (
                S2C,
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            ),
        ],
    )
    assert summary(ev) == [
        (1, None, "GET", "/ok", 1, 200, 2, 0, "complete"),
        (2, None, None, None, None, 404, 2, 0, "complete"),
    ]
    assert [(r.code, r.frame) for r in diag.rows] == [("http1.bad_message", 1)]


def test_gaps_inside_a_body_stay_in_step_and_elsewhere_resync() -> None:
    obs, diag = observer()
    ev: list[object] = []
    req = b"GET / HTTP/1.1\r\n\r\n"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n"
    ev += obs.feed(StreamChunk(direction=C2S, data=req, ts_ns=1, frame=1, offset=0))
    ev += obs.feed(StreamChunk(direction=S2C, data=resp + b"01234", ts_ns=2, frame=2, offset=0))
    ev += obs.gap(S2C, len(resp) + 5, 10, 3, 3)
    ev += obs.feed(
        StreamChunk(direction=S2C, data=b"56789", ts_ns=4, frame=4, offset=len(resp) + 15)
    )
    assert summary(ev) == [(1, 1, "GET", "/", 1, 200, 4, 20, "complete")]
    # a hole in a header section: the next start line is searched for
    ev = obs.feed(
        StreamChunk(direction=C2S, data=b"GET /x HTTP/1.1\r\nHo", ts_ns=5, frame=5, offset=len(req))
    )
    ev += obs.gap(C2S, len(req) + 19, 30, 6, 6)
    ev += obs.feed(
        StreamChunk(
            direction=C2S,
            data=b"lost\r\n\r\nGET /y HTTP/1.1\r\n\r\n",
            ts_ns=7,
            frame=7,
            offset=len(req) + 49,
        )
    )
    ev += obs.feed(
        StreamChunk(
            direction=S2C,
            data=b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            ts_ns=8,
            frame=8,
            offset=len(resp) + 20,
        )
    )
    ev += obs.close(C2S, 9, 9, at_eof=True)
    # the hole hit /x before its header section was complete: no exchange for it. The server
    # direction lost nothing, so the next response answers the oldest request sent, which may
    # be /x or another request lost with it, not necessarily /y: neither is paired
    assert summary(ev) == [
        (2, None, "GET", "/y", 7, None, None, None, "desynced"),
        (3, None, None, None, None, 200, 8, 0, "complete"),
    ]
    assert [(e.paired, e.unpaired_reason) for e in exchanges(ev)] == [
        (False, "ambiguous"),
        (False, "ambiguous"),
    ]
    assert [(r.code, r.frame) for r in diag.rows] == [("http1.resynchronised", 7)]


def test_header_section_too_large() -> None:
    obs, diag = observer(max_head_bytes=100)
    ev = feed_conversation(
        obs,
        [
            (C2S, b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 200),
            (C2S, b"\r\n\r\nGET /2 HTTP/1.1\r\n\r\n"),
        ],
    )
    assert [r.code for r in diag.rows] == ["http1.header_too_large", "http1.resynchronised"]
    assert summary(ev) == [(1, None, "GET", "/2", 2, None, None, None, "connection_closed")]


def test_retry_after() -> None:
    assert parse_retry_after("120") == 120.0
    assert (
        parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:27:30 GMT") == 30.0
    )
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert parse_retry_after("soon", "x") is None and parse_retry_after(None) is None
    assert parse_retry_after("\u00b9") is None


CONVERSATION = [
    (
        C2S,
        b'POST /v1/chat HTTP/1.1\r\nHost: api\r\nContent-Length: 11\r\n\r\n{"a": true}'
        b"GET /models HTTP/1.1\r\nHost: api\r\n\r\n",
    ),
    (
        S2C,
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        b"10\r\ndata: one\r\n\r\n\r\n\r\n"
        b"1b;x=y\r\nevent: e\nid: 7\ndata: two\n\n\r\n0\r\nT: v\r\n\r\n",
    ),
    (S2C, b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 4\r\n\r\nslow"),
    (
        C2S,
        b"GET /ws HTTP/1.1\r\nHost: api\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nEARLY",
    ),
    (S2C, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nSERVER"),
    (C2S, b"LATE"),
]
TOTAL = sum(len(b) for _, b in CONVERSATION)


def _run(segs: list[tuple[Direction, bytes]]) -> tuple[list[object], Diagnostics]:
    made: list[FakeWs] = []

    def factory(req: HttpRequest | None, resp: HttpResponse) -> FakeWs:
        made.append(FakeWs(req, resp))
        return made[-1]

    obs, diag = observer(websocket_factory=factory)
    ev = feed_conversation(obs, segs)
    data = [(c.direction, c.data) for ws in made for c in ws.chunks]
    joined = {d: b"".join(b for dd, b in data if dd == d) for d in (C2S, S2C)}
    return [e for e in ev if type(e) is not tuple] + [joined], diag


def test_conversation_reference() -> None:
    ev, diag = _run(CONVERSATION)
    assert summary(ev[:-1]) == [
        (1, 1, "POST", "/v1/chat", 1, 200, 2, 43, "complete"),
        (2, 2, "GET", "/models", 1, 429, 3, 4, "complete"),
        (3, 3, "GET", "/ws", 4, 101, 5, 0, "complete"),
    ]
    assert [e.data for e in ev if isinstance(e, SseEvent)] == ["one", "two"]
    assert ev[-1] == {C2S: b"EARLYLATE", S2C: b"SERVER"}
    assert diag.rows == []


@given(st.lists(st.integers(1, TOTAL - 1), max_size=30))
def test_segmentation_invariance(cuts: list[int]) -> None:
    whole, whole_diag = _run(CONVERSATION)
    split, split_diag = _run(resegment(CONVERSATION, cuts))
    assert strip_times(split) == strip_times(whole)
    assert split_diag.rows == whole_diag.rows == []


@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=200)), max_size=10), st.booleans())
def test_random_bytes_never_raise(parts: list[tuple[bool, bytes]], midstream: bool) -> None:
    obs, _ = observer(midstream=midstream, websocket_factory=FakeWs)
    off = [0, 0]
    for i, (server, data) in enumerate(parts):
        d = S2C if server else C2S
        obs.feed(StreamChunk(direction=d, data=data, ts_ns=i, frame=i + 1, offset=off[d]))
        off[d] += len(data)
        if i == 3:
            obs.gap(d, off[d], 5, i, i + 1)
            off[d] += 5
    for e in obs.finish():
        assert not isinstance(e, HttpExchange) or e.end_reason in (
            "complete",
            "connection_closed",
            "open_at_eof",
            "desynced",
        )
    assert obs.finished


def test_pending_requests_are_bounded(monkeypatch: object) -> None:
    import pcaptools.protocols.http1.observer as h1mod

    monkeypatch.setattr(h1mod, "_MAX_AWAITING", 2)  # type: ignore[attr-defined]
    obs, _ = observer()
    ev = feed_conversation(obs, [(C2S, b"GET /1 HTTP/1.1\r\n\r\n" * 4)], close=False)
    assert [(e.request_index, e.end_reason) for e in exchanges(ev)] == [
        (1, "evicted"),
        (2, "evicted"),
    ]


def _h2c_conversation() -> list[tuple[Direction, bytes]]:
    ff = FrameFactory()
    return [
        (
            C2S,
            b"POST /v1/chat HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
            b"Content-Length: 4\r\n\r\n{..}",
        ),
        (S2C, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n" + ff.settings({3: 5})),
        (C2S, PREFACE + ff.settings({}) + ff.settings(ack=True)),
        (
            S2C,
            ff.settings(ack=True)
            + ff.headers(
                1, [(":status", "200"), ("content-type", "text/event-stream")], direction=S2C
            ),
        ),
        (
            S2C,
            ff.data(1, b"data: a\n\ndata: b\n\n")
            + ff.data(1, b"data: [DONE]\n\n", end_stream=True),
        ),
        (C2S, ff.goaway(0)),
    ]


H2C = _h2c_conversation()


@given(st.lists(st.integers(1, sum(len(b) for _, b in H2C) - 1), max_size=30))
def test_segmentation_invariance_through_an_h2c_upgrade(cuts: list[int]) -> None:
    whole_obs, whole_diag = observer()
    whole = feed_conversation(whole_obs, H2C)
    split_obs, split_diag = observer()
    split = feed_conversation(split_obs, resegment(H2C, cuts))
    assert strip_times(split) == strip_times(whole)
    assert split_diag.rows == whole_diag.rows == []
    assert [e.data for e in whole if isinstance(e, SseEvent)] == ["a", "b", "[DONE]"]
    (stream,) = [e for e in whole if isinstance(e, Http2StreamEnded)]
    assert (stream.stream_id, stream.method, stream.status, stream.sse_events) == (
        1,
        "POST",
        200,
        3,
    )
    assert stream.client_data_bytes == 4  # the request body went over HTTP/1.1
    assert summary(whole) == [(1, 1, "POST", "/v1/chat", 1, 101, 2, 0, "complete")]
