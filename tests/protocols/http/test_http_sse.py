"""pcaptools.protocols.sse: WHATWG event-stream rules, LLM chunk fields, limits, invariance."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.sse import SseEvent, SseParser, llm_fields
from tests.protocols.http.helpers import strip_times


def parse(data: bytes | list[bytes], **kw: object) -> tuple[list[SseEvent], Diagnostics]:
    diag = Diagnostics()
    p = SseParser(tcp_stream=7, stream_id=3, diag=diag, **kw)  # type: ignore[arg-type]
    out: list[SseEvent] = []
    for i, part in enumerate([data] if isinstance(data, bytes) else data):
        out += p.feed(part, 1000 + i, 10 + i)
    p.close(9999, 99)
    return out, diag


def test_fields_multiline_data_comments_and_defaults() -> None:
    evs, diag = parse(
        b": keep-alive comment\n"
        b"event: update\n"
        b"id: 42\n"
        b"retry: 1500\n"
        b"data: line one\n"
        b"data:line two\n"
        b"data\n"
        b"unknown: ignored\n"
        b"\n"
        b"data: second\n\n"
    )
    assert [(e.event_type, e.event_id, e.retry_ms, e.data, e.index) for e in evs] == [
        ("update", "42", 1500, "line one\nline two\n", 0),
        ("message", "42", None, "second", 1),  # the id persists, event type and retry do not
    ]
    assert evs[0].data_bytes == len(b"line one\nline two\n")
    assert (evs[0].tcp_stream, evs[0].stream_id, evs[0].request_index) == (7, 3, None)
    assert diag.rows == []


def test_line_endings_crlf_lf_cr_and_a_cr_split_from_its_lf() -> None:
    evs, _ = parse([b"data: a\r\n\r\ndata: b\rdata: c\r\r", b"data: d\r", b"\n\r\n"])
    assert [e.data for e in evs] == ["a", "b\nc", "d"]


def test_bom_is_stripped_once_even_when_split() -> None:
    evs, _ = parse([b"\xef", b"\xbb", b"\xbfdata: x\n\n\xef\xbb\xbfdata: y\n\n"])
    # only the stream's first BOM is dropped; a later one makes the line an unknown field
    assert [e.data for e in evs] == ["x"]


def test_empty_data_does_not_dispatch_and_id_with_nul_is_ignored() -> None:
    evs, _ = parse(b"event: ping\n\nid: a\x00b\ndata: z\n\nid\ndata: w\n\n")
    assert [(e.event_type, e.event_id, e.data) for e in evs] == [
        ("message", None, "z"),
        ("message", "", "w"),
    ]


def test_retry_must_be_digits() -> None:
    evs, _ = parse(b"retry: 10s\ndata: a\n\nretry: 20\ndata: b\n\n")
    assert [e.retry_ms for e in evs] == [None, 20]


def test_a_retry_beyond_int64_is_reported_and_left_out() -> None:
    """The sse_events.retry_ms column is Int64: a longer run of digits used to crash the
    table's flush (OverflowError); it is now a warning row and an NA."""
    evs, diag = parse(b"retry: 9223372036854775807\ndata: a\n\n"
                      b"retry: 9223372036854775808\ndata: b\n\n"
                      b"retry: 000000000000000000000000042\ndata: c\n\n")
    assert [e.retry_ms for e in evs] == [2**63 - 1, None, 42]
    assert [(r.code, r.frame, r.tcp_stream) for r in diag.rows] == [("sse.bad_retry", 10, 7)]
    assert "event 1" in diag.rows[0].detail


def test_invalid_utf8_is_replaced() -> None:
    evs, _ = parse(b"data: \xff\xfeok\n\n")
    assert evs[0].data == "\ufffd\ufffdok"


def test_openai_anthropic_responses_chunks_and_done() -> None:
    chunk = {
        "id": "c1",
        "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}],
    }
    last = {"choices": [{"delta": {}, "finish_reason": "stop"}]}
    anthropic = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "lo"},
    }
    responses = {"type": "response.output_text.delta", "delta": "!"}
    body = b"".join(
        f"data: {json.dumps(x)}\n\n".encode() for x in (chunk, last, anthropic, responses)
    )
    evs, diag = parse(body + b"data: [DONE]\n\n")
    assert [(e.json_ok, e.delta_text, e.done, e.finish_reason) for e in evs] == [
        (True, "Hel", False, None),
        (True, None, False, "stop"),
        (True, "lo", False, None),
        (True, "!", False, None),
        (None, None, True, None),
    ]
    assert diag.rows == []


def test_bad_json_is_a_row_not_a_crash() -> None:
    evs, diag = parse(b'data: {"choices": [\n\ndata: plain text\n\n')
    assert [(e.json_ok, e.delta_text) for e in evs] == [(False, None), (None, None)]
    assert [(r.code, r.frame, r.tcp_stream, r.direction) for r in diag.rows] == [
        ("sse.bad_json", 10, 7, "server_to_client")
    ]


def test_llm_fields_edge_cases() -> None:
    assert llm_fields("[1, 2]") == (True, None, False, None)
    assert llm_fields('{"choices": "x"}') == (True, None, False, None)
    assert llm_fields('{"choices": [{"text": "abc"}]}') == (True, "abc", False, None)
    assert llm_fields("  [DONE] ") == (None, None, True, None)
    assert llm_fields("[" * 100_000) == (
        False,
        None,
        False,
        None,
    )  # deep nesting: no RecursionError


def test_line_over_the_limit_is_reported_and_skipped_with_bounded_memory() -> None:
    diag = Diagnostics()
    p = SseParser(tcp_stream=1, diag=diag, max_line_bytes=100)
    out = p.feed(b"data: " + b"x" * 80, 1, 1)
    out += p.feed(b"y" * 80, 2, 2)  # the line is now longer than 100 bytes
    assert len(p._buf) == 0
    out += p.feed(b"z" * 1000, 3, 3)
    assert len(p._buf) == 0
    out += p.feed(b"\n\ndata: ok\n\n", 4, 4)
    assert [e.data for e in out] == ["ok"]
    assert [(r.code, r.frame) for r in diag.rows] == [("sse.unterminated_event", 2)]


def test_event_data_over_the_limit_is_dropped() -> None:
    diag = Diagnostics()
    p = SseParser(tcp_stream=1, diag=diag, max_line_bytes=50)
    out = p.feed(b"".join(b"data: 0123456789\n" for _ in range(10)) + b"\ndata: next\n\n", 5, 6)
    assert [e.data for e in out] == ["next"]
    assert [r.code for r in diag.rows] == ["sse.unterminated_event"]


def test_stream_ending_inside_an_event() -> None:
    evs, diag = parse(b"data: a\n\ndata: half")
    assert [e.data for e in evs] == ["a"]
    assert [(r.code, r.frame) for r in diag.rows] == [("sse.incomplete_event", 99)]
    diag = Diagnostics()
    p = SseParser(diag=diag)
    p.feed(b"data: half\n", 1, 1)
    p.close(2, 2, at_eof=True)  # the capture ended, not the stream: no anomaly
    assert diag.rows == []


def test_gap_drops_the_event_in_progress() -> None:
    p = SseParser()
    out = p.feed(b"data: a\n\ndata: b", 1, 1)
    p.gap(2, 2)
    out += p.feed(b"tail of a lost line\ndata: c\n\ndata: d\n\n", 3, 3)
    assert [e.data for e in out] == ["a", "d"]


def test_event_frame_and_ts_are_those_of_the_blank_line() -> None:
    p = SseParser()
    assert p.feed(b"data: a\n", 100, 1) == []
    (e,) = p.feed(b"\n", 200, 2)
    assert (e.ts_ns, e.frame) == (200, 2)


STREAM = (
    b"\xef\xbb\xbf: hi\r\nevent: e\r\nid: 1\r\n"
    b'data: {"choices":[{"delta":{"content":"a"}}]}\r\n\r\n'
    b"data: x\rdata: y\r\rretry: 5\ndata: [DONE]\n\ndata: {bad\n\n"
)


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_segmentation_invariance(cuts: list[int]) -> None:
    whole, whole_diag = parse(STREAM)
    bounds = [0, *sorted(cuts), len(STREAM)]
    parts = [STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    split, split_diag = parse(parts)
    assert strip_times(split) == strip_times(whole)
    assert (
        [r.code for r in split_diag.rows] == [r.code for r in whole_diag.rows] == ["sse.bad_json"]
    )
    assert len(whole) == 4


@given(st.lists(st.binary(max_size=200), max_size=8), st.integers(8, 64))
def test_random_bytes_never_raise(parts: list[bytes], limit: int) -> None:
    diag = Diagnostics()
    p = SseParser(diag=diag, max_line_bytes=limit)
    for i, part in enumerate(parts):
        for e in p.feed(part, i, i):
            assert isinstance(e, SseEvent)
        if i == 3:
            p.gap(i, i)
    p.close(99, 99)
    assert len(p._buf) <= limit + 200


def test_data_bytes_counts_the_bytes_received_even_when_utf8_is_invalid() -> None:
    evs, _ = parse(b"data: \xff\xfeok\ndata: \xc3\xa9\n\n")
    assert evs[0].data == "\ufffd\ufffdok\n\u00e9"
    assert evs[0].data_bytes == 4 + 1 + 2  # as received; len(data.encode()) would be 11


def test_lone_surrogate_escapes_become_replacement_characters() -> None:
    body = (
        b'data: {"choices":[{"delta":{"content":"a\\ud800b\\ud83d\\ude00"},'
        b'"finish_reason":"\\udfff"}]}\n\n'
    )
    evs, diag = parse(body)
    assert [(e.json_ok, e.delta_text, e.finish_reason) for e in evs] == [
        (True, "a\ufffdb\U0001f600", "\ufffd")
    ]
    assert diag.rows == []


def _split_lines(stream: bytes, ending: bytes) -> bytes:
    return stream.replace(b"\n", ending)


@given(
    st.lists(
        st.sampled_from(
            [b"data: x", b"data:y", b"data", b"id: 7", b"id", b"event: e", b": c", b"retry: 9",
             b"", b"", b"data: {\"choices\":[{\"text\":\"t\"}]}", b"data: \xc3", b"\xa9z"]
        ),
        max_size=30,
    ),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
    st.lists(st.integers(0, 400), max_size=8),
)
def test_lf_crlf_and_cr_streams_parse_alike(
    lines: list[bytes], ending: bytes, cuts: list[int]
) -> None:
    # LF-only chunks take the bytes.split fast path, CR/CRLF ones the regex path
    lf = b"\n".join(lines) + b"\n\n"
    other = _split_lines(lf, ending)
    bounds = [0, *sorted(c for c in cuts if c <= len(other)), len(other)]
    whole, whole_diag = parse(lf)
    split, split_diag = parse([other[a:b] for a, b in itertools.pairwise(bounds)])
    assert strip_times(split) == strip_times(whole)
    assert [r.code for r in split_diag.rows] == [r.code for r in whole_diag.rows]


LLM_CASES = [
    '{"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}',
    '{"choices":[{"delta":{"content":"a"}}],"x":NaN}',  # json only: orjson rejects NaN
    '{"choices":[{"text":"b"}],"n":123456789012345678901234567890}',
    '{"choices":[{"text":"c"}],"f":1e400}',
    '{"type":"response.output_text.delta","delta":"d","type":"x"}',
    '{"delta":{"text":"\\ud800"}}',
    '{"choices":[{"delta":{"content":"e"}}]',
    "[" * 990 + "]" * 990,  # orjson would accept it, json may run out of recursion: json decides
    "[" * 200 + "]" * 200,
    "[" * 100 + "]" * 100,  # short: orjson
    '{"a":' * 300 + "1" + "}" * 300,
    "{}",
    "[]",
    " [DONE] ",
    "{bad",
]


def test_llm_fields_is_the_same_with_and_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    from pcaptools.protocols import sse

    with_fast = [llm_fields(c) for c in LLM_CASES]
    monkeypatch.setattr(sse, "_orjson_loads", None)
    assert [llm_fields(c) for c in LLM_CASES] == with_fast
    assert with_fast[:6] == [
        (True, "hi", False, None),
        (True, "a", False, None),
        (True, "b", False, None),
        (True, "c", False, None),
        (True, None, False, None),  # duplicate key: the last one counts ("x")
        (True, "\ufffd", False, None),
    ]
    assert with_fast[6] == (False, None, False, None)
