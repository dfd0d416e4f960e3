"""pcaptools.protocols.http2.Http2Observer on frames built with hyperframe + hpack."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import StreamChunk
from pcaptools.protocols.http2 import (
    H2cUpgrade,
    Http2ConnectionEnded,
    Http2Frame,
    Http2Observer,
    Http2StreamEnded,
    flags_text,
    parse_settings_payload,
)
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

REQ = [
    (":method", "POST"),
    (":scheme", "https"),
    (":authority", "api.example"),
    (":path", "/v1/chat/completions"),
    ("content-type", "application/json"),
]
RESP_SSE = [(":status", "200"), ("content-type", "text/event-stream")]


def observer(**kw: object) -> tuple[Http2Observer, Diagnostics]:
    diag = Diagnostics()
    return Http2Observer(tcp_stream=5, diag=diag, **kw), diag  # type: ignore[arg-type]


def frames(events: list[object]) -> list[Http2Frame]:
    return [e for e in events if isinstance(e, Http2Frame)]


def streams(events: list[object]) -> dict[int, Http2StreamEnded]:
    return {e.stream_id: e for e in events if isinstance(e, Http2StreamEnded)}


def conn(events: list[object]) -> Http2ConnectionEnded:
    (c,) = [e for e in events if isinstance(e, Http2ConnectionEnded)]
    return c


TOKENS = [
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n',
    b"data: [DONE]\n\n",
]


def llm_conversation(ff: FrameFactory | None = None) -> list[tuple[object, bytes]]:
    """A streamed chat completion over HTTP/2: preface, settings, POST, SSE reply, ping, goaway."""
    ff = ff or FrameFactory()
    tokens = TOKENS
    return [
        (C2S, PREFACE + ff.settings({3: 100, 4: 65535}) + ff.window_update(0, 1 << 20)),
        (S2C, ff.settings({3: 128, 5: 16384}) + ff.settings(ack=True)),
        (C2S, ff.settings(ack=True) + ff.headers(1, REQ, flags=("END_HEADERS",))),
        (C2S, ff.data(1, b'{"model":"m","stream":true}', end_stream=True)),
        (S2C, ff.headers(1, RESP_SSE)),
        (S2C, ff.data(1, tokens[0])),
        (S2C, ff.data(1, tokens[1], padding=7)),
        (C2S, ff.ping(b"pingpong")),
        (S2C, ff.ping(b"pingpong", ack=True) + ff.data(1, tokens[2], end_stream=True)),
        (S2C, ff.goaway(1, 0, b"bye")),
    ]


def test_factory_frames_parse_back() -> None:
    ff = FrameFactory()
    fs = ff.parse(ff.headers(1, REQ) + ff.data(1, b"x", padding=3) + ff.settings({4: 10}))
    assert [type(f).__name__ for f in fs] == ["HeadersFrame", "DataFrame", "SettingsFrame"]


def test_llm_stream_frames_streams_sse_and_connection_facts() -> None:
    obs, diag = observer()
    ev = feed_conversation(obs, llm_conversation())
    assert diag.rows == []
    got = [(f.frame, f.direction, f.stream_id, f.type_name, f.flags) for f in frames(ev)]
    assert got == [
        (1, C2S, 0, "SETTINGS", 0),
        (1, C2S, 0, "WINDOW_UPDATE", 0),
        (2, S2C, 0, "SETTINGS", 0),
        (2, S2C, 0, "SETTINGS", 1),
        (3, C2S, 0, "SETTINGS", 1),
        (3, C2S, 1, "HEADERS", 4),
        (4, C2S, 1, "DATA", 1),
        (5, S2C, 1, "HEADERS", 4),
        (6, S2C, 1, "DATA", 0),
        (7, S2C, 1, "DATA", 8),
        (8, C2S, 0, "PING", 0),
        (9, S2C, 0, "PING", 1),
        (9, S2C, 1, "DATA", 1),
        (10, S2C, 0, "GOAWAY", 0),
    ]
    f = frames(ev)
    assert f[0].settings == ((3, 100), (4, 65535))
    assert f[1].window_increment == 1 << 20
    assert f[5].headers == tuple(REQ) and f[5].header_block_bytes == f[5].length
    assert (f[9].pad_length, f[9].data_bytes, f[9].length) == (
        7,
        len(TOKENS[1]),
        len(TOKENS[1]) + 8,
    )
    assert f[11].ping_data == b"pingpong" and f[11].ping_rtt_ns == 1_000_000
    assert (f[13].last_stream_id, f[13].error_code, f[13].debug_data) == (1, 0, b"bye")
    sse = [e for e in ev if isinstance(e, SseEvent)]
    assert [(e.frame, e.stream_id, e.delta_text, e.done) for e in sse] == [
        (6, 1, "Hel", False),
        (7, 1, "lo", False),
        (9, 1, None, True),
    ]
    s = streams(ev)[1]
    assert (s.method, s.scheme, s.authority, s.path, s.status, s.content_type) == (
        "POST",
        "https",
        "api.example",
        "/v1/chat/completions",
        200,
        "text/event-stream",
    )
    assert (s.request_frame, s.response_headers_frame, s.end_frame, s.end_reason) == (
        3,
        5,
        9,
        "end_stream",
    )
    assert (s.request_ts_ns, s.request_end_ts_ns, s.first_data_ts_ns) == (
        1_002_000_000,
        1_003_000_000,
        1_005_000_000,
    )
    assert (s.client_data_bytes, s.server_data_bytes, s.sse_events) == (
        27,
        sum(map(len, TOKENS)),
        3,
    )
    assert (s.client_frames, s.server_frames) == (2, 4)
    c = conn(ev)
    assert (c.start, c.preface_frame, c.streams, c.peak_open_streams) == ("preface", 1, 1, 1)
    assert c.client_settings == ((3, 100), (4, 65535)) and c.server_settings == (
        (3, 128),
        (5, 16384),
    )
    assert (
        c.ping_count,
        c.ping_rtt_min_ns,
        c.goaway_frame,
        c.goaway_by,
        c.goaway_last_stream_id,
    ) == (1, 1_000_000, 10, S2C, 1)
    assert (c.client_frames, c.server_frames, c.hpack_errors, c.desynced) == (6, 8, 0, False)
    assert ev[-1] is c  # the connection summary comes last


def test_continuation_priority_push_promise_and_rst() -> None:
    ff = FrameFactory()
    block = ff.headers_block([*REQ, ("x-long", "v" * 40)])
    segs = [
        (C2S, PREFACE + ff.settings({})),
        (C2S, ff.priority(3, 0, 200) + ff.priority(5, 3, 0, exclusive=True)),
        (
            C2S,
            ff.headers_raw(7, block[:10], flags=("END_STREAM",)) + ff.continuation(7, block[10:30]),
        ),
        (C2S, ff.continuation(7, block[30:], flags=("END_HEADERS",))),
        (
            S2C,
            ff.push_promise(
                7,
                2,
                [
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":authority", "a"),
                    (":path", "/style.css"),
                ],
            ),
        ),
        (
            S2C,
            ff.headers(7, [(":status", "200")], direction=S2C)
            + ff.data(7, b"page", end_stream=True),
        ),
        (S2C, ff.headers(2, [(":status", "200")], direction=S2C) + ff.data(2, b"css")),
        (C2S, ff.rst(2, 8)),
    ]
    obs, diag = observer()
    ev = feed_conversation(obs, segs)
    assert diag.rows == []
    f = frames(ev)
    assert [(x.frame, x.stream_id, x.type_name) for x in f[1:6]] == [
        (2, 3, "PRIORITY"),
        (2, 5, "PRIORITY"),
        (3, 7, "HEADERS"),
        (3, 7, "CONTINUATION"),
        (4, 7, "CONTINUATION"),
    ]
    assert (f[2].priority_exclusive, f[2].priority_dependency, f[2].priority_weight) == (True, 3, 0)
    assert f[3].headers is None and f[5].headers == (*REQ, ("x-long", "v" * 40))
    assert [x.header_block_bytes for x in f[3:6]] == [10, 20, len(block) - 30]
    assert f[6].promised_stream_id == 2
    s = streams(ev)
    assert set(s) == {2, 3, 5, 7}
    assert (s[7].method, s[7].path, s[7].status, s[7].end_reason, s[7].client_header_bytes) == (
        "POST",
        "/v1/chat/completions",
        200,
        "end_stream",
        len(block),
    )
    assert (s[7].request_frame, s[7].request_end_ts_ns) == (4, 1_003_000_000)
    assert (s[2].pushed, s[2].parent_stream_id, s[2].path, s[2].status) == (
        True,
        7,
        "/style.css",
        200,
    )
    assert (s[2].end_reason, s[2].rst_error_code, s[2].rst_by, s[2].end_frame) == (
        "rst_stream",
        8,
        C2S,
        8,
    )
    assert s[3].end_reason == s[5].end_reason == "idle"
    assert conn(ev).peak_open_streams == 2


def test_goaway_ends_streams_above_last_stream_id_and_open_streams_at_close() -> None:
    ff = FrameFactory()
    segs = [
        (C2S, PREFACE + ff.settings({})),
        (C2S, ff.headers(1, REQ) + ff.headers(3, REQ) + ff.headers(5, REQ)),
        (S2C, ff.goaway(3, 0)),
    ]
    obs, _ = observer()
    ev = feed_conversation(obs, segs)
    s = streams(ev)
    assert (s[5].end_reason, s[5].end_frame) == ("goaway", 3)
    assert (s[1].end_reason, s[3].end_reason) == ("connection_closed", "connection_closed")
    assert s[1].end_frame == 5  # the FIN that closed the second direction
    obs, _ = observer()
    ev = feed_conversation(obs, segs[:2], at_eof=True)
    s = streams(ev)
    assert [s[i].end_reason for i in (1, 3, 5)] == ["open_at_eof"] * 3
    assert s[1].end_frame == 2  # its last frame
    assert conn(ev).peak_open_streams == 3


def test_flow_control_stalls() -> None:
    ff = FrameFactory()
    chunk = b"x" * 16384
    segs: list[tuple[object, bytes]] = [
        (C2S, PREFACE + ff.settings({}) + ff.headers(1, REQ)),
        (S2C, ff.settings({}) + ff.headers(1, [(":status", "200")], direction=S2C)),
    ]
    segs += [(S2C, ff.data(1, chunk)) for _ in range(3)]
    segs += [(S2C, ff.data(1, b"y" * (65535 - 3 * 16384)))]  # windows now exactly 0: stalled
    segs += [(C2S, ff.window_update(0, 1000))]  # connection window opens 3 frames later...
    segs += [(C2S, ff.window_update(1, 1000))]
    segs += [(S2C, ff.data(1, b"z", end_stream=True))]
    obs, _ = observer()
    ev = feed_conversation(obs, segs)
    c = conn(ev)
    assert c.flow_control_known
    assert (c.server_flow_stalls, c.client_flow_stalls) == (2, 0)  # connection + stream window
    assert (
        c.server_stalled_ns == 1_000_000
    )  # frame 6 (stall) -> frame 7 (WINDOW_UPDATE on stream 0)


def test_mid_connection_start_finds_alignment_and_recovers_hpack() -> None:
    ff = FrameFactory()
    # the encoder has already indexed REQ's custom header before the capture starts
    ff.headers(1, REQ)
    ff.headers(1, [(":status", "200"), ("x-custom", "one")], direction=S2C)
    junk = b"\x00\x01garbage-tail-of-an-earlier-frame"
    late = [
        (S2C, junk + ff.data(1, b"abc")),
        (
            S2C,
            ff.headers(3, [(":status", "200"), ("x-custom", "one")], direction=S2C),
        ),  # refers to unseen entries
        (
            S2C,
            ff.headers(5, [(":status", "204"), ("x-new", "two")], direction=S2C),
        ),  # literals only: decodable
        (
            S2C,
            ff.headers(7, [(":status", "204"), ("x-new", "two")], direction=S2C),
        ),  # refers to an entry seen
    ]
    obs, diag = observer(midstream=True)
    ev = feed_conversation(obs, late)
    f = frames(ev)
    assert [(x.frame, x.stream_id, x.type_name) for x in f] == [
        (1, 1, "DATA"),
        (2, 3, "HEADERS"),
        (3, 5, "HEADERS"),
        (4, 7, "HEADERS"),
    ]
    assert f[1].headers is None
    assert f[2].headers == ((":status", "204"), ("x-new", "two"))
    assert f[3].headers == ((":status", "204"), ("x-new", "two"))
    codes = [(r.code, r.frame) for r in diag.rows]
    assert codes == [("http2.resynchronised", 1), ("http2.hpack_decode_failed", 2)]
    s = streams(ev)
    assert s[1].partial and s[3].partial and s[3].status is None and s[5].status == 204
    c = conn(ev)
    assert (c.start, c.server_skipped_bytes, c.hpack_errors, c.flow_control_known) == (
        "mid_stream",
        len(junk),
        1,
        False,
    )


def test_no_preface_from_offset_zero_is_reported_then_aligned() -> None:
    ff = FrameFactory()
    obs, diag = observer()
    ev = feed_conversation(obs, [(C2S, b"GARBAGE!" + ff.settings({1: 1}) + ff.ping(b"12345678"))])
    assert [x.type_name for x in frames(ev)] == ["SETTINGS", "PING"]
    assert [r.code for r in diag.rows] == ["http2.bad_preface", "http2.resynchronised"]


def test_server_stream_not_starting_with_a_frame_is_searched() -> None:
    ff = FrameFactory()
    obs, diag = observer()
    ev = feed_conversation(obs, [(S2C, b"\xff" * 20 + ff.settings({}) + ff.settings(ack=True))])
    assert [x.type_name for x in frames(ev)] == ["SETTINGS", "SETTINGS"]
    assert [r.code for r in diag.rows] == ["http2.resynchronised"]
    assert conn(ev).start == "mid_stream"


def test_gap_inside_data_keeps_alignment_and_elsewhere_resyncs() -> None:
    ff = FrameFactory()
    obs, diag = observer()
    ev: list[object] = []
    head = PREFACE + ff.settings({}) + ff.headers(1, REQ)
    ev += obs.feed(StreamChunk(direction=C2S, data=head, ts_ns=1, frame=1, offset=0))
    resp = ff.headers(1, RESP_SSE)
    ev += obs.feed(StreamChunk(direction=S2C, data=resp, ts_ns=2, frame=2, offset=0))
    data = ff.data(1, b"data: a\n\ndata: b\n\n" + b"data: c\n\n")
    off = len(resp)
    ev += obs.feed(StreamChunk(direction=S2C, data=data[:14], ts_ns=3, frame=3, offset=off))
    ev += obs.gap(S2C, off + 14, 10, 4, 4)  # "\n\ndata: b\n": inside the DATA payload
    ev += obs.feed(StreamChunk(direction=S2C, data=data[24:], ts_ns=5, frame=5, offset=off + 24))
    follow = ff.data(1, b"data: d\n\n", end_stream=True)
    ev += obs.feed(
        StreamChunk(direction=S2C, data=follow, ts_ns=6, frame=6, offset=off + len(data))
    )
    assert [(x.frame, x.type_name, x.data_bytes) for x in frames(ev)[-2:]] == [
        (5, "DATA", 27),
        (6, "DATA", 9),
    ]
    assert [e.data for e in ev if isinstance(e, SseEvent)] == [
        "c",
        "d",
    ]  # a and b were hit by the hole
    # a hole over a frame header: alignment is searched for again
    nxt = off + len(data) + len(follow)
    ev2 = obs.gap(S2C, nxt, 5, 7, 7)
    ev2 += obs.feed(
        StreamChunk(
            direction=S2C,
            data=b"tail" + ff.ping(b"abcdefgh") + ff.ping(b"abcdefgh", ack=True),
            ts_ns=8,
            frame=8,
            offset=nxt + 5,
        )
    )
    assert [x.type_name for x in frames(ev2)] == ["PING", "PING"]
    assert [r.code for r in diag.rows] == ["http2.resynchronised"]
    end = obs.close(C2S, 9, 9, at_eof=True)
    assert streams(end)[1].server_data_bytes == 36  # the lost bytes were DATA payload: counted
    assert conn(end).server_skipped_bytes == 10 + 5 + 4


def test_implicit_gap_from_chunk_offsets() -> None:
    ff = FrameFactory()
    obs, diag = observer()
    payload = ff.data(1, b"0123456789")
    ev = obs.feed(
        StreamChunk(direction=S2C, data=ff.settings({}) + payload[:12], ts_ns=1, frame=1, offset=0)
    )
    ev += obs.feed(
        StreamChunk(direction=S2C, data=payload[15:], ts_ns=2, frame=2, offset=9 + 12 + 3)
    )
    assert [(x.type_name, x.data_bytes, x.frame) for x in frames(ev)] == [
        ("SETTINGS", None, 1),
        ("DATA", 10, 2),
    ]
    assert diag.rows == []


def test_bad_frames_are_recorded_and_parsing_continues() -> None:
    ff = FrameFactory()
    segs = [
        (
            C2S,
            PREFACE
            + ff.raw(5, 4, 0, 0, b"\0" * 5)  # SETTINGS length not a multiple of 6
            + ff.raw(4, 6, 0, 0, b"abcd")  # PING of 4 bytes
            + ff.raw(3, 3, 0, 1, b"\0\0\0")  # RST_STREAM of 3 bytes
            + ff.raw(4, 8, 0, 0, b"\0\0\0\0")  # WINDOW_UPDATE increment 0
            + ff.raw(2, 0, 0x08, 1, b"\x05x")  # DATA padding beyond the payload
            + ff.raw(0, 9, 4, 1, b"")  # CONTINUATION without a header block
            + ff.raw(3, 0xFA, 0, 0, b"xyz")  # unknown type
            + ff.raw(0, 0, 0, 0, b"")  # DATA on stream 0
            + ff.raw(20000, 1, 4, 9, b"\0" * 20000)  # longer than SETTINGS_MAX_FRAME_SIZE
            + ff.ping(b"12345678"),
        )
    ]
    obs, diag = observer()
    ev = feed_conversation(obs, segs)
    assert [(x.type, x.length) for x in frames(ev)] == [
        (4, 5),
        (6, 4),
        (3, 3),
        (8, 4),
        (0, 2),
        (9, 0),
        (0xFA, 3),
        (0, 0),
        (1, 20000),
        (6, 8),
    ]
    assert frames(ev)[6].type_name == "unknown"
    assert [r.code for r in diag.rows] == [
        "http2.bad_frame",
        "http2.bad_frame",
        "http2.bad_frame",
        "http2.bad_frame",
        "http2.bad_frame",
        "http2.bad_frame",
        "http2.bad_frame",
        "http2.frame_too_large",
        "http2.hpack_decode_failed",
    ]


def test_header_block_interrupted_by_another_frame() -> None:
    ff = FrameFactory()
    block = ff.headers_block(REQ)
    segs = [
        (
            C2S,
            PREFACE
            + ff.headers_raw(1, block[:5], flags=())
            + ff.ping(b"xxxxxxxx")
            + ff.headers(
                3, [(":method", "GET"), (":path", "/b"), (":scheme", "http"), (":authority", "h")]
            ),
        )
    ]
    obs, diag = observer()
    ev = feed_conversation(obs, segs)
    assert [r.code for r in diag.rows] == ["http2.bad_frame"]
    assert streams(ev)[3].path == "/b"


def test_truncated_frame_at_close_and_not_at_end_of_capture() -> None:
    ff = FrameFactory()
    obs, diag = observer()
    feed_conversation(obs, [(C2S, PREFACE + ff.data(1, b"x" * 100)[:50])])
    assert [(r.code, r.frame) for r in diag.rows] == [("http2.truncated_frame", 2)]
    obs, diag = observer()
    feed_conversation(obs, [(C2S, PREFACE + ff.data(1, b"x" * 100)[:50])], at_eof=True)
    assert diag.rows == []


def test_h2c_upgrade_makes_the_request_stream_1() -> None:
    ff = FrameFactory()
    up = H2cUpgrade(
        method="GET",
        path="/",
        authority="h",
        headers=(("host", "h"),),
        settings=H2cUpgrade.decode_settings_header("AAMAAABkAARAAAAAAAIAAAAA"),
        request_frame=1,
        request_ts_ns=10,
        request_end_frame=1,
        request_end_ts_ns=10,
        header_bytes=100,
        body_bytes=0,
    )
    assert up.settings == ((3, 100), (4, 1 << 30), (2, 0))
    obs, diag = observer(upgrade=up)
    ev = obs.feed(
        StreamChunk(
            direction=S2C,
            data=ff.settings({})
            + ff.headers(1, [(":status", "200")], direction=S2C)
            + ff.data(1, b"hi", end_stream=True),
            ts_ns=20,
            frame=2,
            offset=300,
        )
    )
    ev += obs.feed(
        StreamChunk(direction=C2S, data=PREFACE + ff.settings({}), ts_ns=30, frame=3, offset=200)
    )
    ev += obs.close(C2S, 40, 4, at_eof=True)
    s = streams(ev)[1]
    assert (s.method, s.path, s.authority, s.status, s.request_frame, s.end_reason) == (
        "GET",
        "/",
        "h",
        200,
        1,
        "end_stream",
    )
    c = conn(ev)
    assert (c.start, c.preface_frame, c.client_settings) == (
        "upgrade",
        3,
        ((3, 100), (4, 1 << 30), (2, 0)),
    )
    assert diag.rows == []
    assert H2cUpgrade.decode_settings_header("!!!") == ()


def test_finish_is_idempotent_and_later_calls_return_nothing() -> None:
    obs, _ = observer()
    ff = FrameFactory()
    obs.feed(
        StreamChunk(direction=C2S, data=PREFACE + ff.headers(1, REQ), ts_ns=5, frame=3, offset=0)
    )
    ev = obs.finish()
    assert streams(ev)[1].end_reason == "open_at_eof" and conn(ev).frame == 3
    assert obs.finish() == [] and obs.finished
    assert obs.feed(StreamChunk(direction=C2S, data=b"x", ts_ns=6, frame=4, offset=100)) == []


def test_helpers() -> None:
    assert flags_text(1, 0x25) == "END_STREAM|END_HEADERS|PRIORITY"
    assert flags_text(4, 1) == "ACK" and flags_text(0, 0x40) == "0x40"
    assert parse_settings_payload(b"\x00\x03\x00\x00\x00\x64\x00") == ((3, 100),)


def test_desync_budget() -> None:
    obs, diag = observer(midstream=True, hunt_budget=1000)
    ev: list[object] = []
    for i in range(5):
        ev += obs.feed(
            StreamChunk(direction=S2C, data=b"\xff" * 500, ts_ns=i, frame=i + 1, offset=500 * i)
        )
    assert [r.code for r in diag.rows] == ["http2.desynced"]
    c = conn(obs.finish())
    assert c.desynced and c.server_skipped_bytes == 2500


CONVERSATION = llm_conversation()
TOTAL = sum(len(b) for _, b in CONVERSATION)


@given(st.lists(st.integers(1, TOTAL - 1), max_size=25))
@settings(max_examples=int(os.environ.get("PCAPTOOLS_HYPOTHESIS_EXAMPLES", "100")))
def test_segmentation_invariance(cuts: list[int]) -> None:
    whole_obs, whole_diag = observer()
    whole = feed_conversation(whole_obs, CONVERSATION)
    split_obs, split_diag = observer()
    split = feed_conversation(split_obs, resegment(CONVERSATION, cuts))
    assert strip_times(split) == strip_times(whole)
    assert split_diag.rows == whole_diag.rows == []


@given(
    st.lists(st.tuples(st.booleans(), st.binary(max_size=300)), max_size=10),
    st.booleans(),
    st.booleans(),
)
def test_random_bytes_never_raise(
    parts: list[tuple[bool, bytes]], preface: bool, midstream: bool
) -> None:
    obs, _ = observer(midstream=midstream)
    off = [0, 0]
    events: list[object] = []
    if preface:
        events += obs.feed(StreamChunk(direction=C2S, data=PREFACE, ts_ns=0, frame=1, offset=0))
        off[0] = len(PREFACE)
    for i, (server, data) in enumerate(parts):
        d = S2C if server else C2S
        events += obs.feed(StreamChunk(direction=d, data=data, ts_ns=i, frame=i + 2, offset=off[d]))
        off[d] += len(data)
        if i == 4:
            events += obs.gap(d, off[d], 7, i, i + 2)
            off[d] += 7
    events += obs.close(C2S, 99, 99)
    events += obs.close(S2C, 99, 100)
    assert isinstance(events[-1], Http2ConnectionEnded)


@given(
    st.lists(st.integers(1, TOTAL - 1), max_size=6), st.integers(0, 255), st.integers(0, TOTAL - 1)
)
def test_corrupted_conversation_never_raises(cuts: list[int], value: int, where: int) -> None:
    data = bytearray(b"".join(b for _, b in CONVERSATION))
    data[where] = value
    pos = 0
    corrupted = []
    for d, b in CONVERSATION:
        corrupted.append((d, bytes(data[pos : pos + len(b)])))
        pos += len(b)
    obs, _ = observer()
    ev = feed_conversation(obs, resegment(corrupted, cuts))
    assert isinstance(ev[-1], Http2ConnectionEnded)


def test_memory_bounds_header_block_and_open_streams(monkeypatch: object) -> None:
    import pcaptools.protocols.http2.observer as h2mod

    ff = FrameFactory()
    obs, diag = observer()
    ev = obs.feed(
        StreamChunk(
            direction=C2S,
            data=PREFACE + ff.headers_raw(1, b"\x82", flags=()),
            ts_ns=1,
            frame=1,
            offset=0,
        )
    )
    off = len(PREFACE) + 10
    for i in range(70):
        cont = ff.continuation(1, b"\x00" * 16000)
        ev += obs.feed(StreamChunk(direction=C2S, data=cont, ts_ns=2 + i, frame=2 + i, offset=off))
        off += len(cont)
    assert [r.code for r in diag.rows] == ["http2.bad_frame"]
    assert obs._dirs[0].hb is None
    mp = monkeypatch  # type: ignore[assignment]
    mp.setattr(h2mod, "_MAX_OPEN_STREAMS", 3)  # type: ignore[attr-defined]
    obs, _ = observer()
    data = PREFACE + b"".join(ff.headers(sid, REQ) for sid in (1, 3, 5, 7, 9))
    ev = obs.feed(StreamChunk(direction=C2S, data=data, ts_ns=1, frame=1, offset=0))
    assert [(s.stream_id, s.end_reason) for s in streams(ev).values()] == [
        (1, "evicted"),
        (3, "evicted"),
    ]
