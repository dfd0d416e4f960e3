"""The TCP layer's shortcuts give exactly what the general code gives.

``TcpAnalyzer.feed`` takes a shortcut for the common in-order ACK/data segment and falls back to
``TcpAnalyzer._feed`` (Wireshark's logic, statement by statement) for everything else;
``TcpTracker.segment`` records plain segments with ``ConnHistory.plain`` instead of
``ConnHistory.packet``. Here the same segments go through both, and every per-segment result,
the final per-direction analysis state, the Diagnostics rows and the connections / events tables
must be identical; the shortcuts must also be taken for most segments (or the test proves
nothing). Inputs: the public corpus, captures/ and the seeded simulations (loss, reordering,
zero windows, keep-alives, port reuse, sequence wraparound) of the tshark comparison tests.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.net.packet import ACK, FIN, PSH, RST, SYN, TcpSegment
from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.tables.tcp_tables import events_table, record_tables
from pcaptools.tcp.analysis import SegmentAnalysis, TcpAnalyzer, TcpDirection
from pcaptools.tcp.chunk import new_chunk
from pcaptools.tcp.connstate import ConnHistory
from pcaptools.tcp.tracker import TcpTracker, _unwrap
from tests.conftest import corpus_files, shipped_captures
from tests.tcp._compare import feed, tcp_items
from tests.tcp._pcapgen import simulate, write_pcap
from tests.tcp._scenarios import SCENARIOS
from tests.tcp._tracker_patch import patched_tracker


class _GeneralOnly(TcpAnalyzer):
    """The analyzer without its shortcut: every segment through ``_feed``."""

    __slots__ = ()

    def feed(self, seg: TcpSegment) -> SegmentAnalysis:
        return self._feed(seg, self._table.get((seg.src, seg.sport, seg.dst, seg.dport)))


class _Counting(TcpAnalyzer):
    """The real analyzer, counting the segments that miss the shortcut."""

    __slots__ = ("general",)

    def __init__(self, diag: Diagnostics) -> None:
        super().__init__(diag)
        self.general = 0

    def _feed(self, seg: TcpSegment, conv: Any) -> SegmentAnalysis:
        self.general += 1
        return super()._feed(seg, conv)


def _result(a: SegmentAnalysis | None) -> tuple[object, ...] | None:
    if a is None:
        return None
    return (
        a.tcp_stream, a.from_client, a.rel_seq, a.rel_ack, a.window, a.kinds, a.dup_ack_num,
        a.dup_ack_frame, a.ack_rtt_ns, a.acked_frame, a.resent_bytes, a.new_stream,
        a.conv.irtt_ns, a.conv.ts_mru_syn,
    )


def _state(d: TcpDirection) -> tuple[object, ...]:
    return tuple(
        [list(map(list, v)) if k == "unacked" else v
         for k in TcpDirection.__slots__ for v in [getattr(d, k)]]
    )


def _analyse(an: TcpAnalyzer, items: list[tuple[TcpSegment, int | None]]) -> list[object]:
    out: list[object] = []
    for seg, captured in items:
        if captured is None:
            out.append(_result(an.feed(seg)))
        else:
            out.append(_result(an.feed_unanalysed(seg, captured)))
    out.append([(_state(c.c2s), _state(c.s2c), c.irtt_ns) for c in an.conversations])
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("fast_paths")
    paths = [*shipped_captures(), *corpus_files()]
    for name, build in SCENARIOS.items():
        paths.append(write_pcap(d / f"scenario_{name}.pcap", build()))
    for seed in range(24):
        paths.append(
            write_pcap(d / f"sim_{seed:03d}.pcap",
                       simulate(seed, n_conns=2 + seed % 4, n_data=40 + seed % 80))
        )
    return paths


def test_analyzer_shortcut_is_exact(inputs: list[Path]) -> None:
    segments = general = 0
    for path in inputs:
        items = list(tcp_items(path))
        ref_diag, diag = Diagnostics(), Diagnostics()
        counting = _Counting(diag)
        assert _analyse(counting, items) == _analyse(_GeneralOnly(ref_diag), items), path.name
        assert diag.rows == ref_diag.rows, path.name
        segments += sum(1 for _, c in items if c is None)
        general += counting.general
    assert segments > 20_000
    assert general < segments / 2  # the shortcut is the common case


class _PacketOnlyHistory(ConnHistory):
    """The reference history: every segment through :meth:`ConnHistory.packet`."""

    __slots__ = ()

    def plain(self, from_client: bool, flags: int, seg_len: int) -> None:
        self.packet(from_client, flags, seg_len)


def _tables(path: Path, reference: bool, monkeypatch: pytest.MonkeyPatch) -> list[pd.DataFrame]:
    with monkeypatch.context() as m:
        tracker_class = TcpTracker
        if reference:
            def general_init(self: TcpTracker, diag: Diagnostics) -> None:
                TcpTracker.__init__(self, diag)
                self.analyzer = _GeneralOnly(diag)

            def packet_only(self: TcpTracker, a: SegmentAnalysis, seg: TcpSegment) -> Any:
                conn = TcpTracker._new_connection(self, a, seg)
                conn.history = _PacketOnlyHistory(client_inferred=conn.history.client_inferred)
                return conn

            # (the connections' histories of a subclass: in the compiled build ConnHistory is
            # an extension type, whose methods cannot be set on the class)
            tracker_class = patched_tracker(m, __init__=general_init, _new_connection=packet_only)
        diag = Diagnostics()
        tracker = tracker_class(diag)
        feed(tracker, path)
        tracker.finish(0, 0)
    rows = pd.DataFrame([(r.code, r.frame, r.ts_ns, r.detail) for r in diag.rows])
    return [record_tables(tracker)[0], events_table(tracker), rows]


def test_tracker_shortcuts_are_exact(inputs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    n_events = 0
    for path in inputs:
        ours = _tables(path, False, monkeypatch)
        ref = _tables(path, True, monkeypatch)
        for a, b in zip(ours, ref, strict=True):
            pd.testing.assert_frame_equal(a, b, check_exact=True, obj=path.name)
        n_events += len(ours[1])
    assert n_events > 1000


_FLAG_SETS = [
    ACK, ACK | PSH, 0, PSH, SYN, SYN | ACK, FIN | ACK, RST, RST | ACK, FIN | RST, SYN | FIN,
]


@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(_FLAG_SETS), st.sampled_from([0, 0, 1, 100])),
        max_size=40,
    )
)
def test_history_plain_is_packet(packets: list[tuple[bool, int, int]]) -> None:
    """``ConnHistory.plain`` == ``ConnHistory.packet`` for the segments the tracker gives it."""
    ours, ref = ConnHistory(), ConnHistory()
    for from_client, flags, seg_len in packets:
        ref.packet(from_client, flags, seg_len, seq=7)
        if flags & (SYN | FIN | RST):
            ours.packet(from_client, flags, seg_len, seq=7)
        else:
            ours.plain(from_client, flags, seg_len)
    assert (ours.history, ours.orig_state, ours.resp_state, ours.conn_state()) == (
        ref.history, ref.orig_state, ref.resp_state, ref.conn_state(),
    )
    assert (ours._orig.data_bytes, ours._resp.data_bytes) == (
        ref._orig.data_bytes, ref._resp.data_bytes,
    )


# --------------------------------------------------------------------------- byte streams


class _Recorder:
    """A stream observer that records every call (and keeps wanting bytes)."""

    def __init__(self, log: list[object], stream: int) -> None:
        self.log, self.stream = log, stream

    @property
    def wants_bytes(self) -> bool:
        return True

    def feed(self, chunk: StreamChunk) -> list[object]:
        assert type(chunk) is StreamChunk
        self.log.append((self.stream, "feed", chunk, hash(chunk), repr(chunk)))
        return []

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        self.log.append((self.stream, "gap", direction, offset, nbytes, ts_ns, frame))
        return []

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        self.log.append((self.stream, "close", direction, ts_ns, frame, at_eof))
        return []

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        self.log.append((self.stream, "finish", ts_ns, frame))
        return []


def _reference_bytes(self: TcpTracker, conn: Any, st: Any, seg: TcpSegment, a: SegmentAnalysis,
                     d: int) -> None:
    """TcpTracker._bytes before its shortcut (every segment through Reassembler.segment)."""
    flags = seg.flags
    mine, peer = st.reasm[d], st.reasm[1 - d]
    items: list[Any] = []
    if not flags & RST:
        seq = st.seq_hi[d] = _unwrap(st.seq_hi[d], a.rel_seq)
        if seg.seg_len or flags & (SYN | FIN):
            items = mine.segment(seq, seg.payload, seg.ts_ns, seg.frame, syn=bool(flags & SYN),
                                 fin=bool(flags & FIN), seg_len=seg.seg_len)
        if flags & ACK and a.rel_ack is not None:
            ack = _unwrap(st.seq_hi[1 - d], a.rel_ack)
            items += peer.acked(ack, seg.ts_ns, seg.frame)
    if items:
        self._deliver(conn, st, items)
    if flags & FIN and not st.closed[d]:
        fin = mine.fin_offset
        if fin is not None and mine.next_offset >= fin:
            st.closed[d] = True
            self.emit(st.observer.close(Direction(d), seg.ts_ns, seg.frame))
    if flags & RST:
        for x in (0, 1):
            if not st.closed[x]:
                st.closed[x] = True
                self.emit(st.observer.close(Direction(x), seg.ts_ns, seg.frame))
    if not st.observer.wants_bytes:
        conn.streams = None


def _streams(path: Path, reference: bool, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    log: list[object] = []
    with monkeypatch.context() as m:
        tracker_class = patched_tracker(m, _bytes=_reference_bytes) if reference else TcpTracker
        diag = Diagnostics()
        tracker = tracker_class(diag, observer_factory=lambda s, _mid: _Recorder(log, s))
        last = feed(tracker, path)
        log.append([
            (r.next_offset, r.buffered_bytes, r.delivered_bytes, r.gap_bytes, r.dropped_bytes,
             r.duplicate_bytes, r.inconsistent_bytes, r.base, r.fin_offset, r._high)
            for c in tracker.connections if c is not None and c.streams is not None
            for r in c.streams.reasm
        ])
        tracker.finish(0, last)
    log.append([(r.code, r.frame, r.detail) for r in diag.rows])
    return log


def test_stream_shortcut_is_exact(inputs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = 0
    for path in inputs:
        ours = _streams(path, False, monkeypatch)
        assert ours == _streams(path, True, monkeypatch), path.name
        chunks += sum(1 for x in ours if isinstance(x, tuple) and x[1] == "feed")
    assert chunks > 5000


def test_cheap_chunks_are_stream_chunks() -> None:
    made = new_chunk(Direction.SERVER_TO_CLIENT, b"abc", 5, 7, 11)
    usual = StreamChunk(
        direction=Direction.SERVER_TO_CLIENT, data=b"abc", ts_ns=5, frame=7, offset=11
    )
    assert type(made) is StreamChunk
    assert made == usual and hash(made) == hash(usual) and repr(made) == repr(usual)
    assert (made.direction, made.data, made.ts_ns, made.frame, made.offset) == (
        Direction.SERVER_TO_CLIENT, b"abc", 5, 7, 11,
    )
    with pytest.raises(FrozenInstanceError):
        made.data = b"x"  # type: ignore[misc]
