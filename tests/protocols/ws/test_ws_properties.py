"""Property tests: wire data never raises, any segmentation gives the same frames and
messages, and decompression bombs stay bounded."""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.protocols._base import StreamChunk
from pcaptools.protocols.websocket import WsConnectionEnded, WsFrame, WsMessage
from tests.protocols.ws.helpers import (
    C2S,
    S2C,
    Deflater,
    cframe,
    close_payload,
    feed,
    frame,
    frames_of,
    messages_of,
    observer,
    resegment,
    websockets_conversation,
)

EXT = "permessage-deflate; client_max_window_bits=10"


def _untimed(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_untimed(x) for x in obj]
    if isinstance(obj, (WsFrame, WsMessage)):  # (named tuples)
        return obj._replace(**{
            n: 0 for n, v in zip(obj._fields, obj, strict=True)
            if (n in ("ts_ns", "frame") or n.endswith(("_ts_ns", "_frame"))) and v is not None})
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if (f.name in ("ts_ns", "frame") or f.name.endswith(("_ts_ns", "_frame"))) and (
                v is not None
            ):
                changes[f.name] = 0
            elif dataclasses.is_dataclass(v):
                changes[f.name] = _untimed(v)
        return dataclasses.replace(obj, **changes)
    return obj


def _reference() -> list[tuple[Any, bytes]]:
    srv, cli = Deflater(), Deflater(wbits=10)
    long_text = ("token " * 3000).encode()
    comp = srv.message(long_text)
    return [
        (C2S, cframe(1, cli.message(b'{"type":"session.update"}'), rsv=4)),
        (S2C, frame(1, srv.message(b'{"type":"session.created"}'), rsv=4)),
        (S2C, frame(9, b"ping-1")),
        (C2S, cframe(10, b"ping-1") + cframe(2, b"\x00" * 300)),
        (
            S2C,
            frame(1, comp[:7], rsv=4, fin=False)
            + frame(9, b"ping-2")
            + frame(0, comp[7:20], fin=False)
            + frame(0, comp[20:]),
        ),
        (C2S, cframe(10, b"ping-2") + cframe(1, ("é" * 1000).encode())),
        (S2C, frame(2, b"\x01" * 70_000)),
        (C2S, cframe(8, close_payload(1000, "done"))),
        (S2C, frame(8, close_payload(1000, "done"))),
    ]


REFERENCE = _reference()
TOTAL = sum(len(d) for _, d in REFERENCE)


def _run(segments: list[tuple[Any, bytes]], **kw: Any) -> list[object]:
    obs, _ = observer(extensions=EXT, offered=EXT, **kw)
    return feed(obs, segments)


def test_reference_conversation() -> None:
    ev = _run(REFERENCE)
    msgs = messages_of(ev)
    assert [
        (m.direction, m.type, m.fragments, m.decompress, m.decompressed_bytes, m.json_type)
        for m in msgs
    ] == [
        (C2S, "text", 1, "ok", 25, "session.update"),
        (S2C, "text", 1, "ok", 26, "session.created"),
        (C2S, "binary", 1, None, None, None),
        (S2C, "text", 3, "ok", 18_000, None),
        (C2S, "text", 1, None, None, None),
        (S2C, "binary", 1, None, None, None),
    ]
    assert len(frames_of(ev)) == 14


@given(st.lists(st.integers(min_value=1, max_value=TOTAL - 1), max_size=40))
def test_segmentation_invariance(cuts: list[int]) -> None:
    assert _untimed(_run(resegment(REFERENCE, cuts))) == _untimed(_run(REFERENCE))


def test_byte_by_byte_equals_whole() -> None:
    small = REFERENCE[:5]
    total = sum(len(d) for _, d in small)
    assert _untimed(_run(resegment(small, range(1, total)))) == _untimed(_run(small))


_ITEM = st.one_of(
    st.tuples(st.booleans(), st.binary(min_size=0, max_size=300)),
    st.tuples(st.booleans(), st.integers(min_value=1, max_value=5000)),  # a gap
    # frame-like starts: plausible header bytes followed by random data
    st.tuples(
        st.booleans(),
        st.builds(
            lambda b0, b1, rest: bytes([b0, b1]) + rest,
            st.sampled_from([0x81, 0x82, 0x01, 0x00, 0x80, 0x88, 0x89, 0x8A, 0xC1, 0xF3, 0x83]),
            st.integers(min_value=0, max_value=255),
            st.binary(max_size=40),
        ),
    ),
)


@settings(max_examples=300)
@given(st.lists(_ITEM, max_size=30), st.booleans(), st.sampled_from([16, 1000, 1 << 26]))
def test_random_bytes_never_raise(
    items: list[tuple[bool, Any]], deflate: bool, max_frame: int
) -> None:
    obs, diag = observer(
        extensions=EXT if deflate else None,
        offered=EXT,
        max_frame_bytes=max_frame,
        max_decompressed_bytes=4096,
    )
    ev: list[object] = []
    off = [0, 0]
    for i, (server, data) in enumerate(items):
        d = S2C if server else C2S
        if isinstance(data, int):
            ev += obs.gap(d, off[d], data, i, i + 1)
            off[d] += data
        else:
            ev += obs.feed(StreamChunk(direction=d, data=data, ts_ns=i, frame=i + 1, offset=off[d]))
            off[d] += len(data)
    ev += obs.close(C2S, 10**6, 10**6)
    ev += obs.close(S2C, 10**6, 10**6)
    assert obs.finish() == []
    (end,) = [e for e in ev if isinstance(e, WsConnectionEnded)]
    fr = [e for e in ev if isinstance(e, WsFrame)]
    assert end.client_frames == sum(1 for f in fr if f.direction == C2S)
    assert end.server_frames == sum(1 for f in fr if f.direction == S2C)
    assert all(f.header_bytes in (2, 4, 6, 8, 10, 14) for f in fr)
    for m in ev:
        if isinstance(m, WsMessage) and m.decompressed_bytes is not None:
            assert m.decompressed_bytes <= 4097
    assert set(diag.counts) <= {c for c in diag.counts if c.startswith("ws.")}


@settings(max_examples=40)
@given(
    st.integers(min_value=1 << 10, max_value=1 << 16),
    st.sampled_from([-1, 0, 1, 2, 50]),
    st.lists(st.integers(min_value=1, max_value=4000), max_size=5),
    st.booleans(),
)
def test_bombs_are_bounded(limit: int, extra: int, cuts: list[int], takeover: bool) -> None:
    """A message inflating to ``limit + extra`` bytes (extra = 50: fifty times the limit)."""
    size = limit * 50 if extra == 50 else limit + extra
    ext = "permessage-deflate" + ("" if takeover else "; server_no_context_takeover")
    obs, diag = observer(extensions=ext, max_decompressed_bytes=limit)
    d = Deflater(takeover=takeover)
    payload = d.message(b"A" * size)
    bounds = sorted({c for c in cuts if c < len(payload)})
    parts = [payload[a:b] for a, b in zip([0, *bounds], [*bounds, len(payload)], strict=True)]
    frames = [
        frame(0 if i else 1, p, rsv=4 if i == 0 else 0, fin=i == len(parts) - 1)
        for i, p in enumerate(parts)
    ]
    ev = feed(obs, [(S2C, f) for f in frames] + [(S2C, frame(1, d.message(b"next"), rsv=4))])
    m0, m1 = messages_of(ev)
    if size > limit:
        assert (m0.decompress, m0.decompressed_bytes) == ("limit", limit + 1)
        assert diag.counts["ws.decompression_limit"] == 1
        assert (m1.decompress, m1.preview) == ("ok", "next")  # the context survives the limit
    else:
        assert (m0.decompress, m0.decompressed_bytes) == ("ok", size)
        assert (m1.decompress, m1.preview) == ("ok", "next")
        assert not diag.rows


def test_zero_output_message_inflates_to_zero() -> None:
    obs, _ = observer(extensions="permessage-deflate")
    empty = Deflater().message(b"")
    ev = feed(obs, [(S2C, frame(1, empty, rsv=4))])
    (m,) = messages_of(ev)
    assert (m.decompress, m.decompressed_bytes, m.preview, m.utf8_ok) == ("ok", 0, "", True)
    assert zlib.decompressobj(-15).decompress(empty + b"\x00\x00\xff\xff") == b""


_LIB = websockets_conversation()
_LIB_TOTAL = sum(len(d) for _, d in _LIB)


def _through_http1(segments: list[tuple[Any, bytes]]) -> list[object]:
    from pcaptools.diagnostics import Diagnostics
    from pcaptools.protocols.http1 import Http1Observer
    from pcaptools.protocols.websocket import websocket_factory
    from tests.protocols.ws.helpers import chunks

    obs = Http1Observer(
        tcp_stream=0, websocket_factory=websocket_factory(tcp_stream=0, diag=Diagnostics())
    )
    ev: list[object] = []
    for c in chunks(segments):
        ev += obs.feed(c)
    ev += obs.close(C2S, 10**10, 10**5)
    ev += obs.close(S2C, 10**10, 10**5 + 1)
    return [e for e in ev if isinstance(e, (WsFrame, WsMessage, WsConnectionEnded))]


@settings(max_examples=60)
@given(st.lists(st.integers(min_value=1, max_value=_LIB_TOTAL - 1), max_size=30))
def test_segmentation_invariance_through_the_http1_upgrade(cuts: list[int]) -> None:
    """The websockets library's session (handshake included), cut anywhere."""
    whole = _through_http1(_LIB)
    assert len(frames_of(whole)) == 13 and len(messages_of(whole)) == 5
    assert _untimed(_through_http1(resegment(_LIB, cuts))) == _untimed(whole)
