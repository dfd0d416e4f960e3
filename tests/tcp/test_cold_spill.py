"""Spilled cold connections (issue #18, ``ColdSyns(spill=True)``, the streaming export's):
the oldest cold rows move to a temporary sqlite database. Every table must be what the rows
kept in memory give, on captures/, the SYN-shapes capture, the scan, a 40,000-SYN flood and
SYNs answered (SYN-ACK, retransmitted SYN, RST, ICMP error, FIN) after their row was spilled;
a key collision or a Bloom-filter false positive never takes the wrong row; ``load(out=DIR)``
spills and reads back as ``load()``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
import pcaptools.tcp.tracker as tracker_module
from pcaptools.diagnostics import Diagnostics
from pcaptools.export import StreamedCapture
from pcaptools.net.packet import TcpSegment
from pcaptools.tcp.cold import ColdSyns
from pcaptools.tcp.tracker import TcpTracker
from tests.conftest import shipped_captures
from tests.tcp._compare import tcp_items
from tests.tcp._made import made_fixture  # noqa: F401  (the fixture ``made``)
from tests.tcp._pcapgen import ACK, FIN, RST, SYN, Pkt, write_pcap, wscale_opt
from tests.test_streaming_export import assert_same_tables


@pytest.fixture
def spilled(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Count the cold rows moved to a database (the rows of each spilled page that were cold)."""
    counts: list[int] = []
    spill_page = ColdSyns._spill_page

    def counting(self: ColdSyns, page: int) -> bool:
        before = self.n_spilled
        done = spill_page(self, page)
        counts.append(self.n_spilled - before)
        return done

    monkeypatch.setattr(ColdSyns, "_spill_page", counting)
    yield counts


def _tiny_pages(m: pytest.MonkeyPatch, page_rows: int, pages_in_memory: int = 1,
                always: bool = True) -> None:
    """The tracker's cold connections in pages of ``page_rows`` (spilling whatever the
    pipeline asks when ``always``)."""
    def make(spill: bool = False) -> ColdSyns:
        return ColdSyns(always or spill, page_rows=page_rows, pages_in_memory=pages_in_memory)

    m.setattr(tracker_module, "ColdSyns", make)


def _same_spilled(path: Path, monkeypatch: pytest.MonkeyPatch, page_rows: int,
                  pages_in_memory: int = 1) -> pcaptools.Capture:
    keys = path.with_suffix(".keys")
    kw = {"keylog": keys if keys.exists() else None, "check_checksums": True}
    want = pcaptools.load(path, **kw)  # type: ignore[arg-type]
    with monkeypatch.context() as m:
        _tiny_pages(m, page_rows, pages_in_memory)
        got = pcaptools.load(path, **kw)  # type: ignore[arg-type]
    assert list(got.tables) == list(want.tables)
    for name, df in got.tables.items():
        pd.testing.assert_frame_equal(df, want.tables[name], check_exact=True,
                                      obj=f"{path.name}: {name}")
    return got


def test_spilled_tables_equal_memory_tables_on_shipped_captures(
        monkeypatch: pytest.MonkeyPatch, spilled: list[int]) -> None:
    """Pages of one row, one page in memory: every cold SYN not answered before the next
    one comes is spilled, and comes back from the database when answered."""
    paths = shipped_captures()
    assert len(paths) >= 20
    for path in paths:
        _same_spilled(path, monkeypatch, page_rows=1)
    assert sum(spilled) > 0


def test_spilled_tables_equal_memory_tables_on_made_captures(
        made: dict[str, Path], monkeypatch: pytest.MonkeyPatch, spilled: list[int]) -> None:
    for name, page_rows in (("syns", 1), ("syns", 3), ("scan", 2), ("flood", 7)):
        spilled.clear()
        _same_spilled(made[name], monkeypatch, page_rows=page_rows)
        assert sum(spilled) > 0, name
    assert sum(spilled) > 39_000  # (the flood: all but the last pages' rows)


def _answered_late() -> list[Pkt]:
    """Seven cold SYNs (client ports 1-7), then answers to six of them: with pages of two
    rows and one page in memory, the first six are in the database by then."""
    t = 1_000_000_000
    return [
        *(Pkt(t + i * 1000, True, SYN, 100 * i, cport=i, opts=wscale_opt(i))
          for i in range(1, 8)),
        Pkt(t + 1_000_000, False, SYN | ACK, 5000, 101, cport=1, opts=wscale_opt(2)),
        Pkt(t + 2_000_000, True, ACK, 101, 5001, cport=1),
        Pkt(t + 3_000_000, True, SYN, 200, cport=2, opts=wscale_opt(2)),  # (resent)
        Pkt(t + 4_000_000, False, RST | ACK, 0, 301, cport=3),
        Pkt(t + 5_000_000, True, SYN, 400, cport=4, icmp_quote=28),
        Pkt(t + 6_000_000, True, FIN | ACK, 501, 1, cport=5),
        Pkt(t + 7_000_000, False, SYN | ACK, 9000, 701, cport=7),  # (in memory)
    ]


def test_a_spilled_syn_answered_later_keeps_its_tcp_stream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pcap(tmp_path / "late.pcap", _answered_late())
    tracker = TcpTracker(Diagnostics(), spill_cold=True)
    tracker.cold = ColdSyns(True, page_rows=2, pages_in_memory=1)
    items = list(tcp_items(path))
    for seg, captured in items[:7]:
        assert captured is None
        tracker.segment(seg)
    cold = tracker.cold
    assert (cold.n_live, cold.n_spilled, len(cold.buf)) == (7, 6, 61)
    assert len(cold.keys) == 2  # (both directions of port 7's pair: the others left memory)
    streams = [tracker.segment(seg).tcp_stream if captured is None
               else tracker.unanalysed(seg, captured).tcp_stream  # type: ignore[union-attr]
               for seg, captured in items[7:]]
    assert streams == [0, 0, 1, 2, 3, 4, 6]
    assert (cold.n_live, cold.n_spilled) == (1, 1)  # (port 6's SYN, never answered)
    store = cold._store
    assert store is not None
    tracker.release()
    assert tracker.cold is None
    with pytest.raises(sqlite3.ProgrammingError):  # (closed: its temporary file is gone)
        store.db.execute("SELECT 1")

    cap = _same_spilled(path, monkeypatch, page_rows=2)
    c = cap.connections
    assert c["tcp_stream"].tolist() == list(range(7))
    assert c["client_port"].tolist() == list(range(1, 8))
    assert c["history"].tolist() == ["ShA", "S", "Sr", "S", "SF", "S", "Sh"]
    assert c["conn_state"].tolist() == ["S1", "S0", "REJ", "S0", "SH", "S0", "S1"]
    assert c["last_frame"].tolist() == [9, 10, 11, 4, 13, 6, 14]
    p = cap.packets
    assert p["tcp_stream"].tolist() == [0, 1, 2, 3, 4, 5, 6, 0, 0, 1, 2, 3, 4, 6]
    hs = cap.tcp_handshakes
    assert hs["syn_count"].tolist() == [1, 2, 1, 1, 1, 1, 1]
    assert hs["client_wscale"].tolist() == list(range(1, 8))
    assert hs["server_wscale"].tolist()[0] == 2


def _syn(frame: int, src: int, sport: int, dst: int = 200, dport: int = 80,
         flags: int = SYN) -> TcpSegment:
    return TcpSegment(frame, frame * 1000, 54, 4, bytes([10, 0, 0, src]), bytes([10, 0, 1, dst]),
                      64, frame, sport, dport, 1000 + frame, 0, flags, 1024, 20, b"", 0, b"", 54,
                      True)


def _reply(seg: TcpSegment, frame: int) -> TcpSegment:
    return TcpSegment(frame, frame * 1000, 54, 4, seg.dst, seg.src, 64, frame, seg.dport,
                      seg.sport, 7, seg.seq + 1, SYN | ACK, 1024, 20, b"", 0, b"", 54, True)


def test_a_key_collision_never_takes_the_wrong_row() -> None:
    """Every address pair has the same key (a colliding hash): the spilled rows are told
    apart by their addresses and ports, in either direction, and a pair never seen is not
    found."""
    cold = ColdSyns(True, page_rows=1, pages_in_memory=1, key_hash=lambda *pair: 42)
    syns = [_syn(1, 1, 5000), _syn(2, 1, 5001), _syn(3, 2, 5000), _syn(4, 2, 5000, dport=443),
            _syn(5, 3, 6000)]
    for stream, seg in enumerate(syns):
        assert cold.add(seg, stream) is not None
    assert (cold.n_live, cold.n_spilled) == (5, 4)
    assert cold.find(_syn(9, 1, 5002)) == -1  # (a key match, no address match)
    assert cold.find(_syn(9, 1, 5000, dst=201)) == -1
    assert cold.find(_syn(9, 4, 5000)) == -1
    for stream in (2, 0):  # (out of order, found from the answer's direction)
        handle = cold.find(_reply(syns[stream], 10 + stream))
        assert handle == -2 - stream
        seg, got = cold.pop(handle)
        assert got == stream and seg == syns[stream]
        assert cold.find(syns[stream]) == -1  # (taken: no longer cold)
    first, second = cold.find(syns[3]), cold.find(syns[1])  # (two handles at once)
    assert (first, second) == (-5, -3)
    assert cold.pop(first) == (syns[3], 3)
    assert cold.pop(second) == (syns[1], 1)
    assert (cold.n_live, cold.n_spilled) == (1, 0)
    store = cold._store
    assert store is not None
    assert store.db.execute("SELECT count(*) FROM cold_key").fetchone() == (0,)
    handle = cold.find(syns[4])  # (in memory)
    assert handle == 4 and cold.pop(handle) == (syns[4], 4)
    assert cold.batch(0, 100) is None
    cold.close()


def test_a_bloom_filter_false_positive_finds_nothing() -> None:
    """A Bloom filter of 8 bits is all ones after a few keys: every new pair costs a query,
    which finds no row of its address pair; with the full-size filter a pair never spilled
    costs no query at all."""
    small = ColdSyns(True, page_rows=1, pages_in_memory=1, bloom_bits=8)
    big = ColdSyns(True, page_rows=1, pages_in_memory=1)
    syns = [_syn(i, i, 5000 + i) for i in range(1, 40)]
    for cold in (small, big):
        for stream, seg in enumerate(syns):
            cold.add(seg, stream)
        assert cold.n_spilled == len(syns) - 1
        store = cold._store
        assert store is not None
        queries: list[str] = []
        store.db.set_trace_callback(queries.append)
        for i in range(100, 140):
            assert cold.find(_syn(i, i, 5000 + i)) == -1
        assert (len(queries) == 40) if cold is small else not queries
        assert cold.find(_reply(syns[7], 200)) == -2 - 7
        assert cold.pop(-2 - 7) == (syns[7], 7)
        assert any(q.startswith("DELETE") for q in queries)
        cold.close()


def test_without_spill_nothing_goes_to_a_database() -> None:
    cold = ColdSyns(page_rows=1, pages_in_memory=1)  # (pages only with spill)
    for stream in range(100):
        cold.add(_syn(stream + 1, stream % 250, 1000 + stream), stream)
    assert cold._store is None and cold.n_spilled == 0 and len(cold.live) == 100
    assert len(cold.keys) == 200


def test_batches_merge_the_database_and_memory_in_tcp_stream_order() -> None:
    cold = ColdSyns(True, page_rows=3, pages_in_memory=2)
    syns = [_syn(i + 1, i + 1, 4000 + i) for i in range(20)]
    for stream, seg in enumerate(syns):
        cold.add(seg, stream * 2)  # (streams 0, 2, .., 38: others are not cold)
    assert cold.n_spilled == 15  # (pages 0-4; pages 5 and 6 in memory)
    for stream in (4, 5, 17):  # (two spilled, one in memory)
        cold.pop(cold.find(_reply(syns[stream], 100)))
    assert (cold.n_live, cold.n_spilled) == (17, 13)
    whole = cold.batch(0, 40)
    assert whole is not None
    left = [s for s in range(20) if s not in (4, 5, 17)]
    assert whole.col("stream").tolist() == [2 * s for s in left]
    assert whole.src == [syns[s].src for s in left]
    assert whole.col("sport").tolist() == [4000 + s for s in left]
    parts = [cold.batch(a, a + 7) for a in range(0, 40, 7)]
    assert [f for p in parts if p is not None for f in p.col("frame").tolist()] \
        == [s + 1 for s in left]
    assert cold.batch(40, 80) is None
    cold.close()


def test_the_streaming_export_spills_and_reads_back_as_load(
        made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        spilled: list[int]) -> None:
    """``load(out=DIR)`` spills (pages of 64 rows here), ``load()`` does not: the same
    tables."""
    _tiny_pages(monkeypatch, 64, pages_in_memory=2, always=False)
    ref = pcaptools.load(made["flood"])
    assert not spilled
    cap = pcaptools.load(made["flood"], out=tmp_path / "out", chunk_rows=5000)
    assert isinstance(cap, StreamedCapture)
    assert sum(spilled) == 623 * 64  # (625 pages, the last two in memory)
    assert_same_tables(cap, ref)
    assert len(ref.connections) == 40_000


def test_a_failed_load_closes_the_database(
        made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception while the tables are built (here: in the middle of them) still closes
    the spilled rows' database at once."""
    import pcaptools.pipeline as pipeline

    _tiny_pages(monkeypatch, 64, pages_in_memory=2, always=False)
    stores = []

    def failing(s: object, *args: object) -> None:
        cold = s.tracker.cold  # type: ignore[attr-defined]
        assert cold is not None and cold.n_spilled > 0
        stores.append(cold._store)
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "_assemble", failing)
    with pytest.raises(RuntimeError, match="boom"):
        pcaptools.load(made["flood"], out=tmp_path / "out")
    assert len(stores) == 1 and stores[0] is not None
    with pytest.raises(sqlite3.ProgrammingError):
        stores[0].db.execute("SELECT 1")


def test_a_database_that_cannot_be_written_keeps_the_rows_in_memory(
        made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary database failing (a full disk, no temporary directory) at the third
    page: the two pages spilled before stay spilled, spilling stops, the other rows stay in
    memory, one ``tcp.cold_spill_failed`` warning row says why, and the tables are still
    load()'s."""
    import pcaptools.tcp.cold as cold_module

    _tiny_pages(monkeypatch, 64, pages_in_memory=2, always=False)
    ref = pcaptools.load(made["flood"])
    put = cold_module._SpillStore.put
    calls: list[int] = []

    def full_disk(self: object, rows: list[object], keys: list[int]) -> None:
        calls.append(len(rows))
        if len(calls) == 3:
            raise sqlite3.OperationalError("database or disk is full")
        put(self, rows, keys)  # type: ignore[arg-type]

    monkeypatch.setattr(cold_module._SpillStore, "put", full_disk)
    cap = pcaptools.load(made["flood"], out=tmp_path / "out", chunk_rows=5000)
    assert calls == [64, 64, 64]  # (no page offered after the failure)
    w = cap.warnings
    rows = w[w["code"] == "tcp.cold_spill_failed"]
    assert len(rows) == 1
    assert rows["detail"].iloc[0] == "OperationalError: database or disk is full"
    ref_w = ref.warnings
    assert len(w) == len(ref_w) + 1
    for name in ref.tables:
        if name == "warnings":
            continue
        pd.testing.assert_frame_equal(cap.read(name), ref.tables[name], check_exact=True,
                                      obj=name)
