"""The in-sync fast path of the record layer and the dispatcher: a record that spans chunks is
kept as its pieces and joined once (RecordReader.need/parts), TlsObserver appends mid-record
chunks without parsing, ConnectionObserver hands ``feed`` to the TLS observer once it knows."""

from __future__ import annotations

import itertools
import random
import struct

from _tls_build import client_hello, record, server_hello, sni_ext
from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.dispatch import ConnectionObserver
from pcaptools.protocols.tls import KeyLog, TlsObserver
from pcaptools.protocols.tls.events import TlsRecord
from pcaptools.protocols.tls.records import DESYNCED, RESYNC, SYNCED, RecordReader

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT

BODIES = [bytes([i % 251]) * n for i, n in enumerate((0, 1, 100, 3000, 16384, 18432, 7))]
TYPES = [22, 20, 23, 23, 23, 23, 21]
STREAM = b"".join(record(t, b) for t, b in zip(TYPES, BODIES, strict=True))
OFFSETS = [sum(5 + len(b) for b in BODIES[:i]) for i in range(len(BODIES))]
EXPECTED = [(o, t, 0x0303, b) for o, t, b in zip(OFFSETS, TYPES, BODIES, strict=True)]


def _feed(r: RecordReader, data: bytes, cuts: list[int], base: int = 0) -> tuple[list, list]:
    out: list = []
    notes: list = []
    edges = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    for a, b in itertools.pairwise(edges):
        recs, nn = r.feed(data[a:b], base + a)
        out += recs
        notes += nn
    return out, notes


@given(st.lists(st.integers(1, len(STREAM) - 1), max_size=30))
@settings(max_examples=150, deadline=None)
def test_any_segmentation_gives_the_same_fragments_as_bytes(cuts: list[int]) -> None:
    r = RecordReader()
    out, notes = _feed(r, STREAM, cuts)
    assert out == EXPECTED and notes == []
    assert all(type(f) is bytes for *_, f in out)
    assert (r.records, r.bytes_seen, r.skipped, r.pending, r.need) == (7, len(STREAM), 0, 0, 0)


def test_pending_counts_header_and_pieces_of_an_incomplete_record() -> None:
    r = RecordReader()
    r.feed(STREAM[: OFFSETS[4] + 5 + 1000], 0)
    assert r.mode == SYNCED and r.pending == 5 + 1000 and r.need == 16384 - 1000
    r.feed(STREAM[OFFSETS[4] + 1005 : OFFSETS[4] + 1007], OFFSETS[4] + 1005)
    assert r.pending == 1007 and r.need == 16384 - 1002
    recs, _ = r.feed(STREAM[OFFSETS[4] + 1007 : OFFSETS[5] + 3], OFFSETS[4] + 1007)
    assert recs == [EXPECTED[4]]
    assert r.pending == 3 and r.need == 0  # 3 bytes of the next header


def test_a_gap_inside_a_split_record_skips_its_pieces() -> None:
    r = RecordReader()
    r.feed(STREAM[: OFFSETS[3] + 5 + 600], 0)
    r.feed(STREAM[OFFSETS[3] + 605 : OFFSETS[3] + 905], OFFSETS[3] + 605)
    r.gap(OFFSETS[3] + 905, 100)
    assert r.mode == RESYNC and r.need == 0 and r.pending == 0
    assert r.skipped == 5 + 900 + 100
    recs, notes = r.feed(STREAM[OFFSETS[3] + 1005 :], OFFSETS[3] + 1005)
    # the records at OFFSETS[4] and [5] are not confirmed: resynchronisation only trusts
    # lengths up to 2^14 + 256, and record 5 (18432 bytes) is longer
    assert [o for o, *_ in recs] == OFFSETS[6:]
    assert notes == [
        (
            "tls.resynchronized",
            f"skipped {OFFSETS[6] - OFFSETS[3] - 1005} bytes to the record boundary at stream "
            f"offset {OFFSETS[6]}",
        )
    ]
    assert r.skipped == 5 + 900 + 100 + OFFSETS[6] - OFFSETS[3] - 1005


@given(st.lists(st.integers(1, len(STREAM) + 40), max_size=12))
@settings(max_examples=100, deadline=None)
def test_bad_header_after_split_records_desyncs_the_same_way(cuts: list[int]) -> None:
    bad = struct.pack(">BHH", 99, 0x0303, 10) + b"z" * 35
    r = RecordReader()
    out, notes = _feed(r, STREAM + bad, cuts)
    assert out == EXPECTED
    assert notes == [("tls.bad_record_type", f"content type 99 at stream offset {len(STREAM)}")]
    assert r.mode == DESYNCED and r.skipped == len(bad)


def test_sslv2_hello_split_before_its_end() -> None:
    body = b"\x01\x00\x02" + b"\x00\x03\x00\x00\x00\x10" + b"\x00\x00\x2f" + b"c" * 16
    hello = bytes([0x80 | (len(body) >> 8), len(body) & 0xFF]) + body
    stream = hello + record(22, b"h" * 50)
    for cut in range(1, len(stream)):
        r = RecordReader()
        out, notes = _feed(r, stream, [cut])
        assert out == [(0, 22, 0x0002, body), (len(hello), 22, 0x0303, b"h" * 50)], cut
        assert notes == []


def _hello_and_app(n_app: int) -> tuple[bytes, bytes]:
    hello = record(22, client_hello(b"r" * 32, [0x1301], [sni_ext("x.example")]))
    shello = record(22, server_hello(b"s" * 32, 0x1301, []))
    app = b"".join(record(23, bytes([i]) * (1000 + i)) for i in range(n_app))
    return hello, shello + app


def test_tls_observer_mid_record_chunks_and_non_bytes_data() -> None:
    """Chunks that complete nothing (bytes, bytearray, memoryview) give the same records."""
    hello, server = _hello_and_app(5)
    results = []
    for kind in (bytes, bytearray, memoryview):
        obs = TlsObserver(tcp_stream=1, diag=Diagnostics(), keylog=None)
        events = obs.feed(StreamChunk(direction=C2S, data=hello, ts_ns=1, frame=1, offset=0))
        rng = random.Random(7)
        pos = 0
        frame = 2
        while pos < len(server):
            n = rng.randint(1, 700)
            data = kind(server[pos : pos + n])
            events += obs.feed(
                StreamChunk(direction=S2C, data=data, ts_ns=frame, frame=frame, offset=pos)  # type: ignore[arg-type]
            )
            pos += n
            frame += 1
        recs = [e for e in events if isinstance(e, TlsRecord)]
        results.append([(r.direction, r.offset, r.content_type, r.length, r.frame) for r in recs])
        assert obs.bytes_skipped(S2C) == 0
    assert results[0] == results[1] == results[2]
    assert [x[1:4] for x in results[0]][1:] == [
        (0, 22, len(server) - sum(5 + 1000 + i for i in range(5)) - 5)
    ] + [(o, 23, 1000 + i) for i, o in enumerate(_app_offsets(server))]


def _app_offsets(server: bytes) -> list[int]:
    offs = []
    pos = 0
    while pos < len(server):
        length = struct.unpack_from(">H", server, pos + 3)[0]
        if server[pos] == 23:
            offs.append(pos)
        pos += 5 + length
    return offs


def test_tls_record_events_equal_the_named_tuple_built_normally() -> None:
    hello, server = _hello_and_app(2)
    obs = TlsObserver(tcp_stream=3, diag=Diagnostics(), keylog=None)
    events = obs.feed(StreamChunk(direction=C2S, data=hello, ts_ns=5, frame=1, offset=0))
    events += obs.feed(StreamChunk(direction=S2C, data=server, ts_ns=6, frame=2, offset=0))
    recs = [e for e in events if isinstance(e, TlsRecord)]
    assert len(recs) == 4
    for rec in recs:
        again = TlsRecord(**{name: getattr(rec, name) for name in TlsRecord._fields})
        assert again == rec and hash(again) == hash(rec) and repr(again) == repr(rec)
        assert type(rec) is TlsRecord and rec._replace(frame=9).frame == 9


def test_connection_observer_hands_feed_to_the_tls_observer() -> None:
    obs = ConnectionObserver(tcp_stream=2, diag=Diagnostics(), keylog=KeyLog())
    assert obs.wants_bytes is True and obs.inner is None
    hello, _ = _hello_and_app(0)
    events = obs.feed(StreamChunk(direction=C2S, data=hello[:2], ts_ns=1, frame=1, offset=0))
    assert events == [] and obs.inner is None
    events = obs.feed(StreamChunk(direction=C2S, data=hello[2:], ts_ns=2, frame=2, offset=2))
    assert obs.kind == "tls" and isinstance(obs.inner, TlsObserver)
    # (feed goes straight to the TLS observer's, held as a function: no bound method of obs)
    assert obs._inner_feed == obs.inner.feed and obs.wants_bytes is True
    assert [(type(e).__name__, getattr(e, "frame", None)) for e in events][:2] == [
        ("TlsRecord", 2),
        ("TlsHandshakeMessage", 2),
    ]


def test_connection_observer_cleartext_gives_up_and_says_so() -> None:
    obs = ConnectionObserver(tcp_stream=2, diag=Diagnostics(), keylog=KeyLog())
    junk = bytes(range(1, 200)) * 400
    for i in range(0, len(junk), 1000):
        chunk = junk[i : i + 1000]
        obs.feed(StreamChunk(direction=C2S, data=chunk, ts_ns=i, frame=i + 1, offset=i))
        if not obs.wants_bytes:
            break
    assert obs.kind == "cleartext"
    assert obs.wants_bytes is False


def test_fingerprints_are_remembered_by_the_fields_they_depend_on() -> None:
    from _tls_build import alpn_ext, ext

    from pcaptools.protocols.tls import handshake as hs
    from pcaptools.protocols.tls.fingerprint import ja3_full, ja3s_full, ja4, ja4_r, ja4s, md5_hex
    from pcaptools.protocols.tls.observer import _client_fingerprints, _server_fingerprints

    def ch(random: bytes, sigs: bytes) -> hs.ClientHello:
        exts = [sni_ext("a.example"), alpn_ext("h2"), ext(13, struct.pack(">H", len(sigs)) + sigs)]
        return hs.parse_client_hello(client_hello(random, [0x0A0A, 0x1301, 0x1302], exts)[4:])

    one, two = ch(b"a" * 32, b"\x04\x03\x08\x04"), ch(b"b" * 32, b"\x04\x03\x08\x04")
    other = ch(b"c" * 32, b"\x04\x03")
    for hello in (one, two, other, one):
        j3 = ja3_full(hello)
        assert j3 is not None
        assert _client_fingerprints(hello) == (j3, md5_hex(j3), ja4(hello), ja4_r(hello))
    assert _client_fingerprints(one) == _client_fingerprints(two)
    assert _client_fingerprints(one)[2] != _client_fingerprints(other)[2]  # JA4 hashes sig algs
    assert _client_fingerprints(one)[0] == "771,4865-4866,0-16-13,,"
    sh = hs.parse_server_hello(server_hello(b"s" * 32, 0x1301, [ext(43, b"\x03\x04")])[4:])
    j3s = ja3s_full(sh)
    assert _server_fingerprints(sh) == (j3s, md5_hex(j3s), ja4s(sh)) == _server_fingerprints(sh)
    assert j3s == "771,4865,43"
