"""pcaptools.protocols.websocket as a package: frames.py and inflate.py as pure functions
with values, the StreamObserver contract and Event base of WebSocketObserver, and the import
paths kept by re-export."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pcaptools.protocols.websocket as ws
from pcaptools.limits import LIMITS
from pcaptools.protocols.websocket.frames import (
    header_len,
    parse_close_payload,
    parse_frame_header,
    plausible_frame,
    unmask,
)
from pcaptools.protocols.websocket.inflate import end_inflate, inflate, start_inflate
from pcaptools.protocols.websocket.state import _Dir, _Msg
from pcaptools.tcp.stream import Event
from tests.protocols.ws.helpers import C2S, MASK, S2C, cframe, close_payload, feed, frame, observer


def test_frame_header_lengths_and_mask() -> None:
    short = cframe(1, b"hi")
    assert header_len(short) == 6
    assert parse_frame_header(short, 0) == (0x81, True, MASK, 6, 2, True)
    mid = frame(2, b"x" * 300, fin=False)
    assert parse_frame_header(mid, 0) == (0x02, False, b"", 4, 300, True)
    wide = b"\x00" * 3 + frame(2, b"x" * 10, length=10, ext=64)
    assert header_len(wide, 3) == 10
    assert parse_frame_header(wide, 3) == (0x82, False, b"", 10, 10, False)  # not minimal


def test_unmask_from_any_payload_position() -> None:
    data = b"hello world"
    masked = unmask(data, MASK, 0)
    assert unmask(masked, MASK, 0) == data
    assert unmask(masked[5:], MASK, 5) == data[5:]
    assert unmask(b"", MASK, 3) == b""


@given(st.binary(max_size=600), st.binary(min_size=4, max_size=4), st.integers(0, 2**40))
def test_unmask_is_the_key_xored_byte_by_byte(data: bytes, key: bytes, pos: int) -> None:
    """Each byte XOR the key byte at its payload position (RFC 6455 §5.3), in either build
    (compiled: a C loop into a new bytes object; Python: one big-integer XOR); the input is
    left as it was."""
    before = bytes(data)
    assert unmask(data, key, pos) == bytes(b ^ key[(pos + i) % 4] for i, b in enumerate(data))
    assert data == before
    one = unmask(b"\x01", b"\x01\x00\x00\x00", 0)  # (a new object: no cached byte written)
    assert one == b"\x00" and bytes([1]) == b"\x01"


def test_unmask_refuses_a_key_that_is_not_four_bytes() -> None:
    for key in (b"", b"abc", b"abcde"):
        with pytest.raises(ValueError, match="4 bytes"):
            unmask(b"payload", key, 0)


def test_plausible_frame() -> None:
    ping = frame(9, b"p")
    assert plausible_frame(ping, 0, len(ping), False, False) == 3
    assert plausible_frame(ping, 0, len(ping), True, False) == 0  # masking is wrong
    assert plausible_frame(ping, 0, 1, False, False) == -1  # header incomplete
    assert plausible_frame(frame(3), 0, 2, False, False) == 0  # reserved opcode
    compressed = frame(1, b"abc", rsv=4)
    assert plausible_frame(compressed, 0, 5, False, False) == 0
    assert plausible_frame(compressed, 0, 5, False, True) == 5
    assert plausible_frame(frame(9, b"p", fin=False), 0, 3, False, False) == 0


def test_close_payload_problems_in_order() -> None:
    assert parse_close_payload(b"", 0, 0) == (None, None, ())
    assert parse_close_payload(b"\x03", 1, 0) == (
        None, None, ("Close payload of 1 byte (a status code needs 2)",))
    p = close_payload(1005) + b"\xff"
    assert parse_close_payload(p, len(p), 0) == (1005, "\ufffd", (
        "Close status code 1005 may not be sent (RFC 6455 §7.4)",
        "Close reason is not valid UTF-8"))
    # bytes lost in the reason: no UTF-8 verdict
    assert parse_close_payload(p, len(p), 1)[2] == (
        "Close status code 1005 may not be sent (RFC 6455 §7.4)",)
    assert parse_close_payload(close_payload(1000, "bye"), 5, 0) == (1000, "bye", ())


def _deflate(data: bytes) -> bytes:
    z = zlib.compressobj(wbits=-15)
    return (z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH))[:-4]


def test_inflate_returns_its_anomalies() -> None:
    st = _Dir(S2C)
    m = _Msg(0, 1, (0, 0), 64)
    start_inflate(st, m, no_takeover=False)
    assert m.compressed and m.z is st.z is not None
    payload = _deflate(b"a" * 100)
    assert inflate(st, m, payload, 1000, False) == ()
    assert end_inflate(st, m, True, 1000, False) == ()
    assert (m.decompress, m.zout, m.content_bytes, bytes(m.preview)) == ("ok", 100, 100, b"a" * 64)
    big = _Msg(1, 2, (0, 0), 0)
    start_inflate(st, big, no_takeover=True)
    problems = inflate(st, big, _deflate(b"\x00" * 5000), 1000, True)
    assert [c for c, _ in problems] == ["ws.decompression_limit"]
    assert (big.decompress, big.z, big.zout) == ("limit", None, 1001)
    bad = _Msg(2, 2, (0, 0), 0)
    start_inflate(st, bad, no_takeover=False)
    assert [c for c, _ in inflate(st, bad, b"\xff\xff\xff", 1000, False)] == [
        "ws.decompress_failed"]
    assert st.z_broken and bad.decompress == "failed"
    later = _Msg(3, 2, (0, 0), 0)
    start_inflate(st, later, no_takeover=False)
    assert later.decompress == "skipped" and later.z is None


def test_stream_contract_and_event_base() -> None:
    obs, _ = observer()
    assert obs.wants_bytes
    ev = feed(obs, [(C2S, cframe(1, b"hi")), (S2C, frame(8, close_payload(1000)))])
    assert not obs.wants_bytes and obs.finished
    assert obs.finish(99, 99) == []
    names = [type(e).__name__ for e in ev]
    assert names == ["WsFrame", "WsMessage", "WsFrame", "WsConnectionEnded"]
    assert all(isinstance(e, Event) for e in ev)
    assert not issubclass(ws.WsHandshake, Event)  # a value carried by WsConnectionEnded


def test_the_old_import_paths_still_resolve() -> None:
    for name in ws.__all__:
        assert getattr(ws, name) is not None, name
    homes = {lim.home.split(":")[1]: lim.default for lim in LIMITS if ".websocket:" in lim.home}
    assert homes == {
        "DEFAULT_MAX_FRAME_BYTES": 64 << 20,
        "DEFAULT_MAX_DECOMPRESSED_BYTES": 64 << 20,
        "INFLATE_DRAIN_BYTES": 256 << 20,
        "CONTROL_KEEP_BYTES": 4096,
        "HUNT_BUDGET_BYTES": 1 << 20,
        "DEFAULT_PREVIEW_CHARS": 256,
        "DEFAULT_MAX_JSON_BYTES": 1 << 20,
    }
