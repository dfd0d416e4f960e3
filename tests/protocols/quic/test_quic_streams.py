"""The QUIC side of the application contract (protocols/quic/streams.py): STREAM frames
reassembled per stream and direction and handed in order to the observer registered for the
connection's ALPN, checked with a recording observer on the recorded h3-sse-chat capture
(stream ids, body bytes, SSE events and tokens against the client's timeline in its facts),
and on hand-built frames (out of order, duplicates, a hole, RESET_STREAM, a raising observer).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pcaptools
from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.quic.reassembly import QuicStreamAssembler
from pcaptools.protocols.quic.streams import QuicAppContext
from pcaptools.protocols.registry import REGISTRY, QuicAppEntry
from pcaptools.tcp.stream import Direction
from tests.conftest import CAPTURES

CHAT = CAPTURES / "h3-sse-chat.pcapng"
C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


class Recorder:
    """A QuicStreamObserver that records every call."""

    def __init__(self, ctx: QuicAppContext) -> None:
        self.ctx = ctx
        self.calls: list[tuple[Any, ...]] = []
        self.data: dict[tuple[int, Direction], bytearray] = {}
        self.fins: set[tuple[int, Direction]] = set()
        self.finished = False

    def stream_data(self, stream_id: int, direction: Direction, offset: int, data: bytes,
                    fin: bool, ts_ns: int, frame: int) -> None:
        buf = self.data.setdefault((stream_id, direction), bytearray())
        assert offset == len(buf)  # in order, contiguous
        buf += data
        if fin:
            assert (stream_id, direction) not in self.fins
            self.fins.add((stream_id, direction))
        self.calls.append(("data", stream_id, direction, offset, bytes(data), fin, frame))

    def stream_gap(self, stream_id: int, direction: Direction, offset: int, nbytes: int,
                   ts_ns: int, frame: int) -> None:
        buf = self.data.setdefault((stream_id, direction), bytearray())
        buf += b"?" * nbytes
        self.calls.append(("gap", stream_id, direction, offset, nbytes))

    def stream_reset(self, stream_id: int, direction: Direction, error_code: int,
                     final_size: int, ts_ns: int, frame: int) -> None:
        self.calls.append(("reset", stream_id, direction, error_code, final_size))

    def finish(self, ts_ns: int, frame: int) -> None:
        assert not self.finished
        self.finished = True


@pytest.fixture(scope="module")
def chat() -> Iterator[tuple[pcaptools.Capture, list[Recorder]]]:
    if not CHAT.exists():
        pytest.skip("h3-sse-chat.pcapng is absent")
    made: list[Recorder] = []

    def factory(ctx: QuicAppContext) -> Recorder:
        made.append(Recorder(ctx))
        return made[-1]

    old = REGISTRY._quic_apps.get("h3")
    if old is not None:
        REGISTRY.remove(old)
    entry = QuicAppEntry(alpn="h3", factory=factory)
    REGISTRY.add(entry)
    try:
        cap = pcaptools.load(CHAT, keylog=CHAT.with_suffix(".keys"))
    finally:
        REGISTRY.remove(entry)
        if old is not None:
            REGISTRY.add(old)
    yield cap, made


def _h3_data(stream: bytes) -> bytes:
    """The payloads of the HTTP/3 DATA frames (type 0) of a request stream (RFC 9114 §7)."""
    def varint(i: int) -> tuple[int, int]:
        n = 1 << (stream[i] >> 6)
        return int.from_bytes(bytes([stream[i] & 0x3F]) + stream[i + 1:i + n], "big"), i + n
    out, i = b"", 0
    while i < len(stream):
        ftype, i = varint(i)
        length, i = varint(i)
        if ftype == 0:
            out += stream[i:i + length]
        i += length
    return out


def test_one_observer_per_connection_with_its_context(chat: Any) -> None:
    cap, made = chat
    assert [(r.ctx.connection, r.ctx.alpn, r.ctx.midstream) for r in made] == [
        (0, "h3", False), (1, "h3", False)]
    assert all(r.finished for r in made)
    assert cap.quic_connections["stream_gaps"].tolist() == [0, 0]
    assert not cap.warnings["code"].astype(str).str.startswith("quic.").any()


def test_request_streams_equal_the_timeline(chat: Any) -> None:
    cap, made = chat
    facts = json.loads(Path(f"{CHAT}.facts.json").read_text())
    conns = [c for c in facts["connections"] if c.get("transport") == "quic"]
    assert len(conns) == len(made) == 2
    for rec, c in zip(made, conns, strict=True):
        requests = sorted({sid for sid, d in rec.data if sid % 4 == 0})
        assert requests == [r["quic_stream_id"] for r in c["requests"]]
        for r in c["requests"]:
            sid = r["quic_stream_id"]
            assert (sid, C2S) in rec.fins and (sid, S2C) in rec.fins
            body = _h3_data(bytes(rec.data[(sid, S2C)]))
            assert len(body) == r["body_bytes"]
            events = [e for e in body.decode().split("\n\n") if e]
            assert len(events) == r["sse_events_received"]
            tokens = [e for e in events if e != "data: [DONE]"
                      and "content" in json.loads(e[6:])["choices"][0]["delta"]]
            assert len(tokens) == r["tokens_received"]
        # unidirectional streams of both sides (HTTP/3 control and QPACK): client 2, 6, 10;
        # server 3, 7, 11
        assert {sid for sid, d in rec.data if sid % 4 == 2} == {2, 6, 10}
        assert {sid for sid, d in rec.data if sid % 4 == 3} == {3, 7, 11}
    qc = cap.quic_connections
    for rec, row in zip(made, qc.itertuples(), strict=True):
        assert row.client_stream_bytes == sum(len(b) for (s, d), b in rec.data.items()
                                              if d == C2S)
        assert row.server_stream_bytes == sum(len(b) for (s, d), b in rec.data.items()
                                              if d == S2C)


def test_the_first_0rtt_request_arrives_in_0rtt_packets(chat: Any) -> None:
    cap, _ = chat
    qf = cap.quic_frames
    early = qf[(qf["packet_type"] == "0rtt") & (qf["frame_type"] == "STREAM")]
    assert set(early["quic_connection"]) == {1} and 0 in set(early["stream_id"])
    qc = cap.quic_connections
    assert qc["handshake_kind"].tolist() == ["1rtt", "0rtt"]
    assert qc["zero_rtt"].astype(object).tolist()[1] == "accepted"


# ----------------------------------------------------------------- hand-built edge cases

def _assembler(factory: Any = None) -> tuple[QuicStreamAssembler, list[Recorder], Diagnostics]:
    made: list[Recorder] = []
    diag = Diagnostics()

    def make(ctx: QuicAppContext) -> Recorder:
        made.append(Recorder(ctx))
        return made[-1]

    ctx = QuicAppContext(connection=0, alpn="h3", diag=diag, midstream=False)
    return QuicStreamAssembler(ctx, factory or make, max_buffer=16), made, diag


def test_out_of_order_and_duplicates_are_delivered_once_in_order() -> None:
    asm, made, _ = _assembler()
    asm.stream(1, 0, 6, b"world", True, 3, 3)  # ahead: waits
    asm.stream(1, 0, 0, b"hel", False, 1, 1)
    asm.stream(1, 0, 0, b"hel", False, 2, 2)  # a duplicate
    asm.stream(1, 0, 3, b"lo ", False, 4, 4)  # fills the hole: all is delivered
    rec = made[0]
    assert bytes(rec.data[(0, S2C)]) == b"hello world"
    assert rec.calls == [("data", 0, S2C, 0, b"hel", False, 1),
                         ("data", 0, S2C, 3, b"lo ", False, 4),
                         ("data", 0, S2C, 6, b"world", True, 4)]
    assert asm.dup_bytes(1) == 3 and asm.stream_bytes(1) == 11
    asm.finish(5, 5)
    assert rec.finished and asm.gaps() == 0


def test_a_hole_beyond_the_buffer_is_a_gap_then_the_bytes_after_it() -> None:
    asm, made, _ = _assembler()
    asm.stream(0, 4, 0, b"ab", False, 1, 1)
    asm.stream(0, 4, 10, b"0123456789", False, 2, 2)
    asm.stream(0, 4, 20, b"abcdefghij", False, 3, 3)  # 20 bytes waiting > 16: give up the hole
    rec = made[0]
    assert ("gap", 4, C2S, 2, 8) in rec.calls
    assert bytes(rec.data[(4, C2S)]) == b"ab" + b"?" * 8 + b"0123456789abcdefghij"
    assert asm.gaps() == 1


def test_reset_and_the_end_flush_a_stream_that_never_completed() -> None:
    asm, made, _ = _assembler()
    asm.stream(0, 0, 0, b"GET", False, 1, 1)
    asm.reset(0, 0, 0x10C, 3, 2, 2)
    asm.stream(0, 0, 3, b"late", False, 3, 3)  # after the reset: not delivered
    asm.stream(1, 1, 4, b"tail", True, 4, 4)  # 0-3 never seen
    asm.finish(9, 9)
    rec = made[0]
    assert ("reset", 0, C2S, 0x10C, 3) in rec.calls
    assert bytes(rec.data[(0, C2S)]) == b"GET"
    assert rec.calls[-2:] == [("gap", 1, S2C, 0, 4), ("data", 1, S2C, 4, b"tail", True, 9)]
    assert rec.finished


def test_a_raising_observer_is_a_warning_and_quic_goes_on() -> None:
    class Bad(Recorder):
        def stream_data(self, *a: Any) -> None:
            raise RuntimeError("bug")

    asm, _, diag = _assembler(Bad)
    asm.stream(0, 0, 0, b"x", False, 1, 7)
    asm.stream(0, 0, 1, b"y", False, 2, 8)  # counted only from here
    assert diag.counts["quic.app_observer_error"] == 1
    assert asm.stream_bytes(0) == 2


def test_without_an_entry_for_the_alpn_streams_are_counted_only() -> None:
    ctx = QuicAppContext(connection=0, alpn="ping/1.0", diag=Diagnostics(), midstream=False)
    asm = QuicStreamAssembler(ctx, None)
    asm.stream(0, 0, 5, b"later", False, 1, 1)
    asm.stream(0, 0, 0, b"first", False, 2, 2)
    assert asm.stream_bytes(0) == 10 and asm.streams == 1
