"""Property tests that fill the gaps left by the per-observer suites.

Already covered elsewhere (random bytes, random segmentation): TlsObserver
(tests/protocols/tls/test_observer.py), Http1Observer, Http2Observer, SseParser, HttpDetector
(tests/protocols/http/), WebSocketObserver (tests/protocols/ws/test_ws_properties.py), the
packet decoder (tests/net) and the reassembler (tests/tcp).

Here: :class:`ConnectionObserver` (the dispatcher every TCP connection gets), fed random
bytes after realistic openings and resegmented at random; and the whole pipeline, random
TCP payloads written into a pcap and loaded beside the good connection."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

import pcaptools
from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.dispatch import ConnectionObserver
from pcaptools.protocols.tls import KeyLog
from tests.protocols.http.helpers import PREFACE, FrameFactory, resegment, strip_times
from tests.protocols.tls._tls_build import alpn_ext, client_hello, record, server_hello, sni_ext
from tests.robustness._build import C2S, S2C, Conv, assert_good_unchanged, good_conv, later, pcap

D = (Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT)
HELLO = record(22, client_hello(b"r" * 32, [0x1301], [sni_ext("x.example"), alpn_ext("h2")]))
SHELLO = record(22, server_hello(b"s" * 32, 0x1301, []))
UPGRADE = (
    b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
)
SWITCHED = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
)
_FF = FrameFactory()
H2_OPENING = [
    (
        D[0],
        PREFACE
        + _FF.settings({})
        + _FF.headers(
            1, [(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "/")]
        ),
    ),
    (
        D[1],
        _FF.settings({})
        + _FF.headers(
            1, [(":status", "200"), ("content-type", "text/event-stream")], direction=D[1]
        ),
    ),
]

#: openings the random bytes follow, so the fuzzing reaches each inner observer
OPENINGS: dict[str, list[tuple[Direction, bytes]]] = {
    "none": [],
    "tls": [(D[0], HELLO), (D[1], SHELLO)],
    "http1": [
        (D[0], b"POST /v1/chat HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"),
        (D[1], b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: a\n\n"),
    ],
    "websocket": [(D[0], UPGRADE), (D[1], SWITCHED)],
    "http2": H2_OPENING,
}

_CHUNK = st.tuples(st.integers(0, 1), st.binary(max_size=300))
_ACTION = st.one_of(
    _CHUNK.map(lambda c: ("feed", c)),
    st.integers(1, 5000).map(lambda n: ("gap", n)),
    st.integers(0, 1).map(lambda d: ("close", d)),
)


def _observer(midstream: bool = False) -> tuple[ConnectionObserver, Diagnostics]:
    diag = Diagnostics()
    return ConnectionObserver(tcp_stream=7, diag=diag, keylog=KeyLog(), midstream=midstream), diag


def _play(obs: ConnectionObserver, items: list[tuple[Direction, bytes]]) -> list[object]:
    off, out = [0, 0], []
    for i, (d, data) in enumerate(items):
        out += obs.feed(StreamChunk(direction=d, data=data, ts_ns=i, frame=i + 1, offset=off[d]))
        off[d] += len(data)
    return out


@settings(max_examples=150)
@given(st.sampled_from(sorted(OPENINGS)), st.lists(_ACTION, max_size=15), st.booleans())
def test_connection_observer_never_raises(
    opening: str, actions: list[tuple[str, object]], midstream: bool
) -> None:
    obs, diag = _observer(midstream)
    off = [0, 0]
    events = _play(obs, OPENINGS[opening])
    for direction, data in OPENINGS[opening]:
        off[direction] += len(data)
    closed = [False, False]
    n = 100
    for kind, arg in actions:
        n += 1
        if kind == "feed":
            d, data = cast("tuple[int, bytes]", arg)
            if closed[d] or not data:
                continue
            events += obs.feed(
                StreamChunk(direction=D[d], data=data, ts_ns=n, frame=n, offset=off[d])
            )
            off[d] += len(data)
        elif kind == "gap":
            d = n % 2
            if not closed[d]:
                events += obs.gap(D[d], off[d], int(arg), n, n)  # type: ignore[call-overload]
                off[d] += int(arg)  # type: ignore[call-overload]
        elif not closed[int(arg)]:  # type: ignore[call-overload]
            closed[int(arg)] = True  # type: ignore[call-overload]
            events += obs.close(D[int(arg)], n, n)  # type: ignore[call-overload]
    for d in (0, 1):
        if not closed[d]:
            events += obs.close(D[d], n + 1, n + 1, at_eof=True)
    events += obs.finish(n + 2, n + 2)
    assert obs.kind in (None, "tls", "cleartext")
    assert "tls.internal_error" not in diag.counts
    for e in events:  # every event is a small frozen dataclass with a frame number
        assert isinstance(getattr(e, "frame", None), int), e


def _conversation(name: str) -> list[tuple[Direction, bytes]]:
    if name == "websocket":
        text = bytes([0x81, 5]) + b"hello"
        masked = (
            bytes([0x81, 0x82]) + b"abcd" + bytes(a ^ b for a, b in zip(b"hi", b"ab", strict=True))
        )
        return [*OPENINGS["websocket"], (D[0], masked), (D[1], text * 3)]
    if name == "http2":
        ff = FrameFactory()
        return [
            (
                D[0],
                PREFACE
                + ff.settings({})
                + ff.headers(
                    1,
                    [(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "/s")],
                    flags=("END_HEADERS", "END_STREAM"),
                ),
            ),
            (
                D[1],
                ff.settings({})
                + ff.headers(
                    1, [(":status", "200"), ("content-type", "text/event-stream")], direction=D[1]
                )
                + ff.data(1, b"data: one\n\ndata: two\n\n", end_stream=True),
            ),
        ]
    return OPENINGS[name]


@given(
    st.sampled_from(["tls", "http1", "websocket", "http2"]),
    st.lists(st.integers(1, 600), max_size=25),
)
def test_connection_observer_segmentation_invariance(name: str, cuts: list[int]) -> None:
    conv = _conversation(name)
    total = sum(len(b) for _, b in conv)
    whole_obs, whole_diag = _observer()
    whole = _play(whole_obs, conv)
    split_obs, split_diag = _observer()
    split = _play(split_obs, resegment(conv, [c % total for c in cuts if c % total]))
    for obs in (whole_obs, split_obs):
        for d in (0, 1):
            (whole if obs is whole_obs else split).extend(obs.close(D[d], 10**6, 10**6))
    assert strip_times(split) == strip_times(whole)
    assert [r.code for r in split_diag.rows] == [r.code for r in whole_diag.rows]
    assert whole  # each conversation produces events


# --------------------------------------------------------------------------- whole pipeline

_REF: dict[str, pcaptools.Capture] = {}


def _reference(tmp: Path) -> pcaptools.Capture:
    if "ref" not in _REF:
        p = tmp / "ref.pcap"
        p.write_bytes(pcap(good_conv()))
        _REF["ref"] = pcaptools.load(p)
    return _REF["ref"]


@settings(max_examples=60)
@given(
    st.sampled_from([80, 443, 8080, 5000]),
    st.sampled_from(sorted(OPENINGS)),
    st.lists(_CHUNK, min_size=1, max_size=12),
    st.booleans(),
)
def test_random_payloads_through_load(
    port: int, opening: str, chunks: list[tuple[int, bytes]], fin: bool
) -> None:
    """A second connection carrying an opening then random bytes, in a pcap, through load():
    never raises, the good connection's rows are unchanged."""
    bad = Conv(sport=41999, dport=port, t0=later(1)).handshake()
    for direction, data in OPENINGS[opening]:
        bad.send(C2S if direction == D[0] else S2C, data)
    for d, data in chunks:
        if data:
            bad.send(d, data, acks=bool(d))
    if fin:
        bad.close()
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "r.pcap"
        p.write_bytes(pcap(good_conv(), bad))
        cap = pcaptools.load(p)
        assert_good_unchanged(cap, _reference(Path(tmp)))
    assert len(cap.connections) == 2
    counts = cap.summary.extra["warning_counts"]
    assert isinstance(counts, dict) and "tls.internal_error" not in counts
