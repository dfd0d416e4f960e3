"""pcaptools.tables.http_tables: schemas and the builder, from observer events."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.http1 import Http1Observer
from pcaptools.protocols.http2 import Http2Observer
from pcaptools.tables.http_tables import HTTP_TABLES, HttpTablesBuilder
from tests.protocols.http.helpers import C2S, PREFACE, S2C, FrameFactory, feed_conversation

T0 = 1_000_000_000  # feed_conversation: segment i has ts T0 + i ms and frame i + 1


def build(*event_lists: list[object]) -> dict[str, pd.DataFrame]:
    b = HttpTablesBuilder()
    for evs in event_lists:
        b.add_all(evs)
    b.add("not an event")
    tables = b.tables()
    for name, df in tables.items():
        HTTP_TABLES[name].check(df)
    return tables


def h2_events() -> list[object]:
    ff = FrameFactory()
    obs = Http2Observer(tcp_stream=9, diag=Diagnostics())
    return feed_conversation(
        obs,
        [
            (
                C2S,
                PREFACE
                + ff.settings({3: 100, 4: 1 << 20})
                + ff.headers(
                    1,
                    [
                        (":method", "POST"),
                        (":scheme", "https"),
                        (":authority", "api"),
                        (":path", "/v1/chat"),
                    ],
                ),
            ),
            (C2S, ff.data(1, b"{}", end_stream=True)),
            (
                S2C,
                ff.settings({3: 250})
                + ff.headers(
                    1, [(":status", "200"), ("content-type", "text/event-stream")], direction=S2C
                ),
            ),
            (S2C, ff.data(1, b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n', padding=4)),
            (C2S, ff.ping(b"\x01" * 8)),
            (
                S2C,
                ff.ping(b"\x01" * 8, ack=True) + ff.data(1, b"data: [DONE]\n\n", end_stream=True),
            ),
            (
                C2S,
                ff.headers(
                    3,
                    [
                        (":method", "GET"),
                        (":scheme", "https"),
                        (":authority", "api"),
                        (":path", "/x"),
                    ],
                ),
            ),
            (S2C, ff.rst(3, 8) + ff.goaway(3, 2, b"oops")),
        ],
    )


def test_empty_tables_keep_their_schema() -> None:
    tables = HttpTablesBuilder().tables()
    assert sorted(tables) == sorted(HTTP_TABLES)
    for name, df in tables.items():
        assert len(df) == 0
        HTTP_TABLES[name].check(df)


def test_http2_tables() -> None:
    t = build(h2_events())
    fr = t["http2_frames"]
    assert list(fr["type"].astype(str)) == [
        "SETTINGS",
        "HEADERS",
        "DATA",
        "SETTINGS",
        "HEADERS",
        "DATA",
        "PING",
        "PING",
        "DATA",
        "HEADERS",
        "RST_STREAM",
        "GOAWAY",
    ]
    assert list(fr["frame"]) == [1, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 8]
    assert fr.loc[0, "settings"] == "MAX_CONCURRENT_STREAMS=100;INITIAL_WINDOW_SIZE=1048576"
    assert (fr.loc[1, "method"], fr.loc[1, "path"], fr.loc[1, "flag_names"]) == (
        "POST",
        "/v1/chat",
        "END_HEADERS",
    )
    assert fr.loc[4, "status"] == 200 and fr.loc[2, "end_stream"]
    assert (fr.loc[5, "pad_length"], fr.loc[5, "data_bytes"], fr.loc[5, "flag_names"]) == (
        4,
        47,
        "PADDED",
    )
    assert (fr.loc[7, "ack"], fr.loc[7, "ping_data"], fr.loc[7, "ping_rtt_ms"]) == (
        True,
        "01" * 8,
        1.0,
    )
    assert (fr.loc[10, "error"], fr.loc[10, "error_code"]) == ("CANCEL", 8)
    assert (fr.loc[11, "error"], fr.loc[11, "last_stream_id"], fr.loc[11, "goaway_debug"]) == (
        "INTERNAL_ERROR",
        3,
        "oops",
    )
    assert fr["ts"].iloc[0] == pd.Timestamp(T0, unit="ns", tz="UTC")
    st = t["http2_streams"].set_index("stream_id")
    s1 = st.loc[1]
    assert (s1["method"], s1["path"], s1["status"], s1["end_reason"], s1["sse_events"]) == (
        "POST",
        "/v1/chat",
        200,
        "end_stream",
        2,
    )
    # request ended at frame 2 (T0+1ms), response HEADERS frame 3 (+2ms), first DATA 4, end 6
    assert (s1["ttfb_ms"], s1["first_data_ms"], s1["duration_ms"]) == (1.0, 2.0, 5.0)
    s3 = st.loc[3]
    assert (s3["end_reason"], s3["rst_error"], s3["rst_by"], s3["status"] is pd.NA) == (
        "rst_stream",
        "CANCEL",
        "server",
        True,
    )
    assert math.isnan(s3["ttfb_ms"])
    c = t["http2_connections"].iloc[0]
    assert (
        c["start"],
        c["preface_frame"],
        c["client_max_concurrent_streams"],
        c["server_max_concurrent_streams"],
        c["client_initial_window_size"],
    ) == ("preface", 1, 100, 250, 1 << 20)
    assert (
        c["ping_count"],
        c["ping_rtt_avg_ms"],
        c["goaway_by"],
        c["goaway_error"],
        c["streams"],
    ) == (1, 1.0, "server", "INTERNAL_ERROR", 2)
    assert (c["client_flow_stalls"], c["end_frame"]) == (0, 10)
    sse = t["sse_events"]
    assert list(sse["delta_text"].astype(object).where(sse["delta_text"].notna(), None)) == [
        "x",
        None,
    ]
    assert list(sse["http_version"].astype(str)) == ["2", "2"]
    assert list(sse["stream_id"]) == [1, 1] and sse["request_index"].isna().all()
    assert list(sse["frame"]) == [4, 6] and list(sse["done"]) == [False, True]


def test_http_requests_table() -> None:
    obs = Http1Observer(tcp_stream=4, diag=Diagnostics())
    ev = feed_conversation(
        obs,
        [
            (C2S, b"POST /v1/chat HTTP/1.1\r\nHost: api\r\nContent-Length: 2\r\n\r\n{}"),
            (
                S2C,
                b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Type: text/plain\r\n"
                b"Content-Length: 4\r\n\r\nslow",
            ),
            (C2S, b"GET /v1/models HTTP/1.1\r\nHost: api\r\n\r\n"),
            (
                S2C,
                b"HTTP/1.1 503 Busy\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n"
                b"Date: Wed, 21 Oct 2015 07:27:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n",
            ),
            (S2C, b"2\r\nno\r\n0\r\n\r\n"),
            (C2S, b"GET /never HTTP/1.1\r\nHost: api\r\n\r\n"),
        ],
    )
    t = build(ev)
    rq = t["http_requests"]
    assert list(rq["request_index"]) == [1, 2, 3] and list(rq["position"]) == [1, 2, 3]
    assert list(rq["status"].astype(object).where(rq["status"].notna(), None)) == [429, 503, None]
    assert list(rq["request_frame"]) == [1, 3, 6]
    assert list(rq["response_frame"].astype(object).where(rq["response_frame"].notna(), None)) == [
        2,
        5,
        None,
    ]
    assert list(rq["retry_after_s"].fillna(-1)) == [7.0, 60.0, -1]
    assert list(rq["ttfb_ms"].fillna(-1)) == [1.0, 1.0, -1]
    assert list(rq["duration_ms"].fillna(-1)) == [1.0, 2.0, -1]
    assert list(rq["end_reason"].astype(str)) == ["complete", "complete", "connection_closed"]
    assert (
        rq.loc[1, "chunked"],
        rq.loc[1, "response_body_bytes"],
        rq.loc[0, "host"],
        rq.loc[0, "http_version"],
    ) == (True, 2, "api", "1.1")
    assert rq.loc[0, "request_headers"] == (("host", "api"), ("content-length", "2"))
    assert rq.loc[0, "request_body_bytes"] == 2 and rq.loc[0, "content_type"] == "text/plain"


def _sse_events(n: int) -> list[object]:
    from pcaptools.protocols.sse import SseParser

    out: list[object] = []
    for sid, rix in ((5, None), (None, 2)):
        p = SseParser(tcp_stream=4, stream_id=sid, request_index=rix)
        body = b"".join(
            b'id: %d\nevent: %s\nretry: %d\ndata: {"choices":[{"delta":{"content":"w%d"}}]}\n\n'
            % (i, b"message" if i % 3 else b"ping", i, i)
            for i in range(n)
        ) + b"data: [DONE]\n\ndata: {bad\n\ndata: \xff\n\n"
        for i in range(0, len(body), 97):
            out += p.feed(body[i : i + 97], T0 + i, 1 + i)
    return out


def test_sse_table_is_the_same_whatever_the_block_size_and_string_storage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pcaptools import _columns
    from pcaptools.tables import http_tables

    events = _sse_events(50)
    ref = build(events)["sse_events"]
    assert len(ref) == 106
    assert list(ref["http_version"].astype(str).unique()) == ["2", "1.1"]
    assert ref["json_ok"].tolist()[-3:] == [pd.NA, False, pd.NA]
    assert ref["event"].tolist()[:3] == ["ping", "message", "message"]
    assert ref["data_bytes"].tolist()[-1] == 1
    monkeypatch.setattr(http_tables, "_SSE_BLOCK", 7)
    b = HttpTablesBuilder()
    for e in events:
        b.add(e)  # single adds flush too
    pd.testing.assert_frame_equal(b.tables()["sse_events"], ref, check_exact=True)
    monkeypatch.setattr(_columns, "_ARROW_STRINGS", False)
    pd.testing.assert_frame_equal(build(events)["sse_events"], ref, check_exact=True)


def test_sse_int_columns_hold_the_int64_extremes() -> None:
    """The int columns are packed by struct (http_tables._extend_ints), not array.extend: the
    values come back as they went in, the extremes of the Int64 retry_ms column included."""
    from pcaptools.protocols.sse import SseParser

    p = SseParser(tcp_stream=2**40, stream_id=7)
    body = (b"retry: 9223372036854775807\ndata: a\n\nretry: 0\ndata: {}\n\n"
            b"retry: 9223372036854775808\ndata: [DONE]\n\n")
    events = p.feed(body, 2**62, 123456789)
    t = build(events)["sse_events"]
    assert t["retry_ms"].tolist() == [2**63 - 1, 0, pd.NA]
    assert t["tcp_stream"].tolist() == [2**40] * 3 and t["frame"].tolist() == [123456789] * 3
    assert t["ts"].astype("int64").tolist() == [2**62] * 3
    assert t["index"].tolist() == [0, 1, 2] and t["done"].tolist() == [False, False, True]
    assert t["json_ok"].tolist() == [pd.NA, True, pd.NA]
