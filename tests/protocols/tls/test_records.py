"""The record layer: splitting across segments, garbage, overflow, resynchronisation, SSLv2 hellos."""

from __future__ import annotations

import _rfc8448 as rfc
from _tls_build import record
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.protocols.tls.records import (
    DESYNCED,
    MAX_RECORD_LENGTH,
    RESYNC,
    RESYNC_BUDGET,
    SYNCED,
    RecordReader,
)

STREAM = b"".join(b for d, b in rfc.CONVERSATION if d == 1)  # the server's records of RFC 8448
SERVER_RECORDS = [
    (0, 22, 0x0303, 90),
    (95, 23, 0x0303, 674),
    (774, 23, 0x0303, 222),
    (1001, 23, 0x0303, 67),
    (1073, 23, 0x0303, 19),
]


def _feed_all(
    data: bytes, sizes: list[int], offset: int = 0
) -> tuple[list[tuple[int, int, int, int]], list]:
    r = RecordReader()
    out, notes = [], []
    pos = 0
    i = 0
    while pos < len(data):
        n = max(1, sizes[i % len(sizes)])
        recs, nn = r.feed(data[pos : pos + n], offset + pos)
        out += [(o, t, v, len(f)) for o, t, v, f in recs]
        notes += nn
        pos += n
        i += 1
    return out, notes


def test_whole_stream_at_once() -> None:
    out, notes = _feed_all(STREAM, [len(STREAM)])
    assert out == SERVER_RECORDS and notes == []


def test_byte_by_byte() -> None:
    out, notes = _feed_all(STREAM, [1])
    assert out == SERVER_RECORDS and notes == []


@given(st.lists(st.integers(min_value=1, max_value=900), min_size=1, max_size=20))
def test_any_segmentation_gives_the_same_records(sizes: list[int]) -> None:
    assert _feed_all(STREAM, sizes) == (SERVER_RECORDS, [])


def test_record_overflow_desyncs_the_direction_but_counts_bytes() -> None:
    r = RecordReader()
    good = record(22, b"\x01\x00\x00\x00")
    bad = bytes([23, 3, 3]) + (MAX_RECORD_LENGTH + 1).to_bytes(2, "big") + b"x" * 100
    recs, notes = r.feed(good + bad, 0)
    assert [(o, t) for o, t, _, _ in recs] == [(0, 22)]
    assert notes == [
        (
            "tls.record_overflow",
            f"record length {MAX_RECORD_LENGTH + 1} > {MAX_RECORD_LENGTH} at stream offset 9",
        )
    ]
    assert r.mode == DESYNCED
    assert r.feed(good * 3, 114) == ([], [])
    assert (r.bytes_seen, r.skipped) == (9 + 105 + 27, 105 + 27)


def test_bad_content_type_and_version_after_sync() -> None:
    r = RecordReader()
    recs, notes = r.feed(record(22, b"ab") + b"\x63\x03\x03\x00\x01x", 0)
    assert len(recs) == 1 and notes == [
        ("tls.bad_record_type", "content type 99 at stream offset 7")
    ]
    r = RecordReader()
    recs, notes = r.feed(record(22, b"ab") + b"\x17\x05\x01\x00\x01x", 0)
    assert notes == [("tls.bad_record_version", "record version 0x0501 at stream offset 7")]


def test_capture_starting_mid_record_resynchronises() -> None:
    tail = STREAM[500:]  # inside the 674-byte server flight record
    out, notes = _feed_all(tail, [100], offset=500)
    assert out == SERVER_RECORDS[2:]
    assert notes == [
        ("tls.resynchronized", "skipped 274 bytes to the record boundary at stream offset 774")
    ]


def test_gap_then_resync_at_next_boundary() -> None:
    r = RecordReader()
    recs, _ = r.feed(STREAM[:300], 0)
    assert [o for o, *_ in recs] == [0]
    r.gap(300, 200)  # bytes 300..499 never captured
    assert r.mode == RESYNC
    recs, notes = r.feed(STREAM[500:], 500)
    assert [o for o, *_ in recs] == [774, 1001, 1073]
    assert notes == [
        ("tls.resynchronized", "skipped 274 bytes to the record boundary at stream offset 774")
    ]
    assert r.mode == SYNCED
    assert r.skipped == 205 + 200 + 274  # the partial record, the gap, the skipped tail


def test_not_tls_at_all_gives_up_after_the_budget() -> None:
    r = RecordReader()
    junk = bytes(range(256)).replace(b"\x03", b"\x04") * (RESYNC_BUDGET // 256 + 2)
    notes = []
    for i in range(0, len(junk), 1000):
        notes += r.feed(junk[i : i + 1000], i)[1]
    assert r.mode == DESYNCED
    assert notes == [
        (
            "tls.resync_failed",
            f"no TLS record boundary found in {RESYNC_BUDGET} bytes; direction no longer parsed",
        )
    ]


def test_sslv2_client_hello_first_record() -> None:
    msg = (
        b"\x01\x03\x01\x00\x09\x00\x00\x00\x10"
        + b"\x00\x00\x04\x01\x00\x80\x00\x00\xff"
        + b"C" * 16
    )
    data = bytes([0x80 | (len(msg) >> 8), len(msg) & 0xFF]) + msg
    r = RecordReader()
    recs, notes = r.feed(data[:10], 0)
    assert recs == [] and notes == []
    recs, notes = r.feed(data[10:] + record(22, b"zz"), 10)
    assert [(o, t, v, f) for o, t, v, f in recs] == [
        (0, 22, 0x0002, msg),
        (len(data), 22, 0x0303, b"zz"),
    ]


def test_looks_like_tls() -> None:
    from pcaptools.protocols.tls import looks_like_tls

    assert looks_like_tls(rfc.CLIENT_HELLO_RECORD) is True
    assert looks_like_tls(rfc.SERVER_FLIGHT_RECORD) is True
    assert looks_like_tls(b"\x16\x03") is None
    assert looks_like_tls(b"GET / HTTP/1.1\r\n") is False
    assert looks_like_tls(b"PRI * HTTP/2.0\r\n") is False
    assert looks_like_tls(b"\x16\x03\x01\xff\xff") is False  # absurd length
    assert looks_like_tls(b"\x17\x03\x00\x00\x10") is True  # SSLv3 application data
    assert looks_like_tls(b"\x18\x03\x03\x00\x10") is False  # heartbeat: not a first record
    assert looks_like_tls(b"\x80\x2e\x01\x03\x01") is True  # SSLv2-format ClientHello
