"""Frozen connections (issue #18, :mod:`pcaptools.tcp.frozen`) change no number and no row.

Every input goes through a tracker that freezes every connection it may (no byte-stream
observer) before each segment (``FreezePolicy(0, 0, 1, 0)``: each segment of a frozen connection
thaws it, so every record goes through :meth:`RecordCodec.freeze`/``thaw`` once per segment) and
through one that never freezes: the connections, handshakes, events and losses tables, the
Diagnostics rows and the observer calls must be identical. Inputs: captures/, the public
corpus, the tshark-comparison scenarios, seeded simulations and a scan-like capture, with an
observer for every other connection (the others are frozen) and without observers; with
observers that are done once both directions closed (the tracker lets them go and freezes
their connections); and load() of every shipped and corpus capture with freezing at once.
"""

from __future__ import annotations

import marshal
from pathlib import Path

import pandas as pd
import pytest

from pcaptools.diagnostics import Diagnostics
from pcaptools.tables.tcp_tables import events_table, losses_table, packed_rows, record_tables
from pcaptools.tcp.frozen import FreezePolicy, FrozenConnections
from pcaptools.tcp.stream import StreamChunk
from pcaptools.tcp.tracker import RECORDS, TcpTracker
from tests.tcp._compare import feed
from tests.tcp._pcapgen import write_pcap
from tests.tcp._tracker_patch import count_freezes, patched_tracker
from tests.tcp.test_fast_paths import _Recorder
from tests.tcp.test_lazy_state import _scan
from tests.tcp.test_lazy_state import inputs as inputs  # (the fixture: the same inputs)

ALWAYS = FreezePolicy(0, 0, 1, 0)


class _DoneRecorder(_Recorder):
    """A recording observer that is done (the stream contract's ``done``) once both directions
    were closed, as the protocol observers are once they emitted their last events. Its
    ``gap`` and ``finish`` calls once done (which add nothing, by the contract) are logged as
    such: a tracker that let it go does not make them. A ``feed`` once done (bytes beyond a
    FIN, or after an RST) is logged as such too: a tracker that let it go reports those bytes
    instead (``tcp.payload_after_release``)."""

    def __init__(self, log: list[object], stream: int) -> None:
        super().__init__(log, stream)
        self.closed: set[int] = set()

    @property
    def done(self) -> bool:
        return len(self.closed) == 2

    def close(self, direction, ts_ns, frame, *, at_eof=False):  # type: ignore[no-untyped-def]
        self.closed.add(int(direction))
        return super().close(direction, ts_ns, frame, at_eof=at_eof)

    def feed(self, chunk: StreamChunk) -> list[object]:
        if self.done:
            self.log.append((self.stream, _FEED_ONCE_DONE, chunk.frame))
            return []
        return super().feed(chunk)

    def gap(self, direction, offset, nbytes, ts_ns, frame):  # type: ignore[no-untyped-def]
        if self.done:
            self.log.append((self.stream, _ONCE_DONE))
            return []
        return super().gap(direction, offset, nbytes, ts_ns, frame)

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        if self.done:
            self.log.append((self.stream, _ONCE_DONE))
            return []
        return super().finish(ts_ns, frame)


_ONCE_DONE = "gap or finish once done"
_FEED_ONCE_DONE = "feed once done"


class _Counting(TcpTracker):
    """Counts the freezes, thaws and observers let go."""

    frozen_n = 0
    thawed_n = 0
    released_n = 0

    def _release(self, conn, st):  # type: ignore[no-untyped-def]
        got = super()._release(conn, st)
        self.released_n += got
        return got

    def _freeze(self, conn, at_end=False):  # type: ignore[no-untyped-def]
        if not at_end:  # (frozen again once finished at the end: not counted)
            self.frozen_n += 1
            self.__dict__.setdefault("streams_frozen", set()).add(conn.conv.tcp_stream)
        super()._freeze(conn, at_end)

    def _thaw(self, seg):  # type: ignore[no-untyped-def]
        got = super()._thaw(seg)
        self.thawed_n += got
        return got


class _SharedLog(list):  # type: ignore[type-arg]
    """The log of every observer: shared, so a packed observer refers to it."""

    _packing_ = "shared"


class _PackableRecorder(_Recorder):
    """A recording observer whose state may be packed while its connection is idle (a
    plugin's opt-in, :mod:`pcaptools.tcp.packing`): the log it writes to is shared."""

    _packing_ = "packable"


def _run(path: Path, policy: FreezePolicy | None, observe: bool, early: bool = False,
         spill: bool = False, done: bool = False, packable: bool = False,
         ) -> tuple[list[object], list[pd.DataFrame], list[object], _Counting]:
    """``done``: the observers are :class:`_DoneRecorder` (let go once done: the log leaves
    out their ``finish`` calls once done, which a tracker that let them go does not make).
    ``packable``: they are :class:`_PackableRecorder` (packed while idle)."""
    log: list[object] = _SharedLog()
    diag = Diagnostics()
    rec = _DoneRecorder if done else _PackableRecorder if packable else _Recorder
    factory = (lambda s, _mid: rec(log, s) if s % 2 == 0 else None) if observe else None
    tracker = _Counting(diag, observer_factory=factory, freeze_policy=policy)
    if policy is not None and early:  # (as the pipeline: the rows made when frozen)
        tracker.row_maker = lambda conn: packed_rows(conn, lambda c: c.conv.tcp_stream % 7 == 0)
    if spill:  # (pages of 2 records go to disk; an 8-bit Bloom filter: false positives)
        tracker.frozen = FrozenConnections(RECORDS, True, page_rows=2, bloom_bits=8)
    last = feed(tracker, path)
    tracker.finish(0, last)
    tables = [*record_tables(tracker), events_table(tracker), losses_table(tracker)]
    log = [x for x in log if x[1] != _ONCE_DONE]  # type: ignore[index]
    return log, tables, [(r.code, r.frame, r.detail) for r in diag.rows], tracker


def _count_releases(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(observer class, its inner observer's class) of every connection whose parsers a
    TcpTracker lets go from now on (in the test)."""
    import pcaptools.pipeline as pipeline

    released: list[tuple[str, str]] = []
    real = pipeline.TcpTracker._release

    def counting(self, conn, st):  # type: ignore[no-untyped-def]
        obs = st.observer._obs
        kind, inner = type(obs).__name__, type(getattr(obs, "inner", None)).__name__
        got = real(self, conn, st)
        if got:
            released.append((kind, inner))
        return got

    patched_tracker(monkeypatch, _release=counting)
    return released


def _count_packs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(the dispatcher's inner observer class, where the packed state went: "record" or
    "memory") of every connection whose parsers a TcpTracker packs from now on (in the
    test)."""
    import pcaptools.pipeline as pipeline

    packed: list[tuple[str, str]] = []
    real = pipeline.TcpTracker._pack

    def counting(self, conn, st):  # type: ignore[no-untyped-def]
        inner = type(getattr(st.observer._obs, "inner", None)).__name__
        got = real(self, conn, st)
        if got:
            packed.append((inner, "memory" if conn.packed is True else "record"))
        return got

    patched_tracker(monkeypatch, _pack=counting)
    return packed


@pytest.mark.parametrize(("observe", "early", "spill", "done"),
                         [(True, False, False, False), (False, False, False, False),
                          (False, True, False, False), (False, True, True, False),
                          (True, False, True, False), (True, True, True, True)],
                         ids=["observer", "no_observer", "rows_when_frozen", "spilled",
                              "observer_spilled", "observer_let_go"])
def test_freezing_every_connection_changes_nothing(inputs: list[Path], observe: bool,
                                                   early: bool, spill: bool, done: bool) -> None:
    frozen = thawed = released = late = 0
    for path in inputs:
        log, tables, rows, tracker = _run(path, ALWAYS, observe, early, spill, done)
        want_log, want_tables, want_rows, _ = _run(path, None, observe, done=done)
        if done:  # bytes beyond a FIN, given to a done observer, or reported once it was let go
            fed = [x for x in want_log
                   if x[1] == _FEED_ONCE_DONE and x not in log]  # type: ignore[index]
            want_log = [x for x in want_log if x not in fed]
            told = [r for r in rows if r[0] == "tcp.payload_after_release"]
            rows = [r for r in rows if r[0] != "tcp.payload_after_release"]
            assert bool(fed) == bool(told), path.name
            late += bool(told)
        assert log == want_log, path.name
        for got, want in zip(tables, want_tables, strict=True):
            pd.testing.assert_frame_equal(got, want, check_exact=True, obj=path.name)
        assert rows == want_rows, path.name
        frozen += tracker.frozen_n
        thawed += tracker.thawed_n
        released += tracker.released_n
    assert thawed > 1000 and frozen > thawed  # (a late segment thaws; most stay frozen at the end)
    assert (released > 50) if done else not released  # (observers let go only once done)
    assert late == (1 if done else 0)  # (bytes beyond a FIN: a simulation's, reported)


def test_idle_observers_packed_change_nothing(inputs: list[Path]) -> None:
    """Observers whose state may be packed (:mod:`pcaptools.tcp.packing`), packed before every
    segment (``FreezePolicy(0, 0, 1, 0)``: every connection is idle at once; the segment's own
    connection is made again for it), and also with records moved to disk: the observer calls,
    the tables and the warnings are those of no freezing. The observers write to one shared
    log, so a copy made instead of a reference would lose calls. Observers that do not opt in
    are never packed (the other tests: their connections are never frozen while open).
    Inputs: all but two. The corpus is packed with the real parsers by
    ``test_parsed_connections_let_go_at_once_change_no_table``. The unacked-limit scenario
    holds thousands of segments for one connection, and packing it at each of them packs
    every held segment again each time (work quadratic in the segments; outside a test a
    connection is packed once per idle period). Records are moved to disk for the generated
    inputs."""
    from tests.conftest import CORPUS

    packs = 0
    for path in inputs:
        if path.parent == CORPUS or path.name == "scenario_unacked_limit.pcap":
            continue
        want_log, want_tables, want_rows, _ = _run(path, None, True, packable=True)
        generated = path.name.startswith(("sim_", "scenario_", "scan"))
        for spill in (False, True) if generated else (False,):
            log, tables, rows, tracker = _run(path, ALWAYS, True, spill=spill, packable=True)
            assert log == want_log, path.name
            for got, want in zip(tables, want_tables, strict=True):
                pd.testing.assert_frame_equal(got, want, check_exact=True, obj=path.name)
            assert rows == want_rows, path.name
            assert tracker.packer is not None and not tracker.packer.refused
            assert not tracker.packer.secret and not tracker._packed
            packs += tracker.packs
    assert packs > 1000


def test_parsers_that_fail_to_unpack_are_reported_not_fatal(
        inputs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Should making packed parsers again fail (a bug), the connection's later payload is not
    parsed and a ``tcp.observer_error`` row says so, as for an observer that raised; the TCP
    tables are those of no freezing."""
    from pcaptools.tcp.packing import StreamPacker

    def broken(self, blob):  # type: ignore[no-untyped-def]
        raise ValueError("broken on purpose")

    path = next(p for p in inputs if p.name == "compare-h1.pcapng")
    _, want_tables, _, _ = _run(path, None, True, packable=True)
    monkeypatch.setattr(StreamPacker, "unpack", broken)
    _, tables, rows, tracker = _run(path, ALWAYS, True, packable=True)
    errors = [r for r in rows if r[0] == "tcp.observer_error"]
    assert tracker.packs > 0 and len(errors) == tracker.packs, (len(errors), tracker.packs)
    assert all("broken on purpose" in r[2] for r in errors)
    for got, want in zip(tables, want_tables, strict=True):
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_observers_that_do_not_opt_in_are_not_packed(inputs: list[Path]) -> None:
    """A plugin's observer that does not say it may be packed keeps its live state: the packer
    refuses it (by its class), and its connection stays unfrozen while open."""
    refused: dict[str, int] = {}
    for path in inputs[:3]:
        _, _, _, tracker = _run(path, ALWAYS, True)
        assert tracker.packer is not None and tracker.packs == 0
        for k, v in tracker.packer.refused.items():
            refused[k] = refused.get(k, 0) + v
    assert set(refused) == {f"{_Recorder.__module__}._Recorder"}, refused


def test_freezing_after_capture_time_delays_changes_nothing(inputs: list[Path]) -> None:
    """With the policy's delays in play, in capture time (the frames' timestamps; no clock is
    read): frozen 2 ms after a connection ended or 20 ms after its last packet, looked for
    every 7 segments, past 2 records. Connections are frozen when they went quiet and not
    before (a later packet moves their time on), and the tables, warnings and observer
    calls are still those of no freezing."""
    timed = FreezePolicy(ended_ns=2_000_000, idle_ns=20_000_000, every=7, min_records=2)
    frozen = kept = 0
    for path in inputs:
        for observe, early, spill in ((False, True, True), (True, False, False)):
            log, tables, rows, tracker = _run(path, timed, observe, early, spill)
            want_log, want_tables, want_rows, _ = _run(path, None, observe)
            assert log == want_log, path.name
            for got, want in zip(tables, want_tables, strict=True):
                pd.testing.assert_frame_equal(got, want, check_exact=True, obj=path.name)
            assert rows == want_rows, path.name
            n = len(tracker.__dict__.get("streams_frozen", ()))
            frozen += n
            kept += len(want_tables[0]) - n
    assert frozen > 100 and kept > 100  # (some went quiet in time, others never did)


@pytest.mark.tshark
def test_complete_connections_frozen_after_capture_time_delays_agree_with_tshark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks/synflood.py --answer close``: 2,000 complete connections (handshake, a
    102-byte request, a 300-byte answer, FIN both ways, last ACK), 10 µs apart. A TCP-only
    load that freezes each 50 µs after it ended (past 100 records) gives the tables of one
    that does not; every connection is SF / ShADadFf with its bytes; every frame's tcp.stream,
    relative seq and ack and ack RTT are tshark 4.0's."""
    import shutil
    import subprocess
    import sys

    import pcaptools
    import pcaptools.pipeline as pipeline
    from tests.oracle import tshark_fields

    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "close.pcap"
    subprocess.run([sys.executable, str(root / "benchmarks" / "synflood.py"), str(path),
                    "--connections", "2000", "--answer", "close"], check=True,
                   capture_output=True)
    monkeypatch.setattr(pipeline, "FreezePolicy", lambda: None)
    want = pcaptools.load(path, payloads=False)
    frozen = count_freezes(monkeypatch)
    monkeypatch.setattr(pipeline, "FreezePolicy",
                        lambda: FreezePolicy(ended_ns=50_000, every=16, min_records=100))
    cap = pcaptools.load(path, payloads=False)
    assert 1500 < len(set(frozen)) < 2000  # (the last connections ended too late for it)
    for table, df in want.tables.items():
        pd.testing.assert_frame_equal(cap.tables[table], df, check_exact=True, obj=table)
    c = cap.connections
    assert len(c) == 2000 and len(cap.packets) == 18000
    assert (c["conn_state"].astype(str) == "SF").all()
    assert (c["history"].astype(str) == "ShADadFf").all()
    assert (c["client_bytes"] == 102).all() and (c["server_bytes"] == 300).all()
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    rows = tshark_fields(str(path), ("frame.number", "tcp.stream", "tcp.seq", "tcp.ack",
                                     "tcp.analysis.ack_rtt"), (), "tcp")
    p = cap.packets
    want_rows = [(int(f), int(s), int(q), int(a) if int(f) % 9 != 1 else None,
                  round(float(r) * 1e3, 6) if r else None) for f, s, q, a, r in rows]
    got = [(f, s, q, None if pd.isna(a) else a, None if pd.isna(r) else round(r, 6))
           for f, s, q, a, r in zip(p["frame"].tolist(), p["tcp_stream"].tolist(),
                                    p["seq"].tolist(), p["ack"].tolist(),
                                    p["ack_rtt_ms"].tolist(), strict=True)]
    assert len(want_rows) == 18000 and got == want_rows


def test_a_record_survives_the_round_trip(inputs: list[Path]) -> None:
    """freeze(thaw(freeze(c))) holds what freeze(c) does, for every record at the end of every
    input (compared unpacked: marshal's bytes also say which objects were shared)."""
    n = 0
    for path in inputs:
        tracker = TcpTracker(Diagnostics())
        feed(tracker, path)
        for conn in tracker.connections:
            if conn is None:
                continue
            blob = RECORDS.freeze(conn)
            again = RECORDS.thaw(blob)
            assert marshal.loads(RECORDS.freeze(again)) == marshal.loads(blob)
            assert again.conv.tcp_stream == conn.conv.tcp_stream
            assert again.history.history == conn.history.history
            assert again.conv.c2s.unacked == conn.conv.c2s.unacked
            n += 1
    assert n > 250


def test_a_key_collision_takes_the_right_record(inputs: list[Path]) -> None:
    """Two frozen records under one address-pair key: each pair thaws its own."""
    tracker = TcpTracker(Diagnostics())
    feed(tracker, inputs[1])
    a, b = [c for c in tracker.connections if c is not None][:2]
    fz = FrozenConnections(RECORDS)
    for conn in (a, b):
        conn.streams = None
        fz.put(conn.conv.tcp_stream, RECORDS.freeze(conn), 7, False)
    assert fz.index == {7: [a.conv.tcp_stream, b.conv.tcp_stream]}
    fz.index = {k: v for k, v in fz.index.items()}

    def same_as(want: int):  # type: ignore[no-untyped-def]
        return lambda conn: conn.conv.tcp_stream == want

    import pcaptools.tcp.frozen as frozen_mod
    real = frozen_mod.pair_hash
    frozen_mod.pair_hash = lambda *args: 7  # type: ignore[assignment]
    try:
        got = fz.take(b"x", 1, b"y", 2, same_as(b.conv.tcp_stream))
        assert got is not None and got.conv.tcp_stream == b.conv.tcp_stream
        assert fz.index == {7: a.conv.tcp_stream} and fz.n == 1
        assert fz.take(b"x", 1, b"y", 2, same_as(-1)) is None
        assert fz.n == 1
    finally:
        frozen_mod.pair_hash = real


def test_a_database_that_fails_keeps_the_records_in_memory(
        inputs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The database fails at its second page: tables whole, one warning row."""
    import sqlite3

    import pcaptools.tcp.frozen as frozen_mod

    calls = []
    real = frozen_mod._Disk.put

    def failing(self, recs):  # type: ignore[no-untyped-def]
        calls.append(len(recs))
        if len(calls) == 2:
            raise sqlite3.OperationalError("database or disk is full")
        real(self, recs)

    monkeypatch.setattr(frozen_mod._Disk, "put", failing)
    path = next(p for p in inputs if p.name == "scan.pcap")
    _, tables, rows, _ = _run(path, ALWAYS, False, True, True)
    _, want_tables, want_rows, _ = _run(path, None, False)
    for got, want in zip(tables, want_tables, strict=True):
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert len(calls) == 2
    extra = [r for r in rows if r not in want_rows]
    assert [r[0] for r in extra] == ["tcp.frozen_spill_failed"]
    assert "disk is full" in str(extra[0][2])  # type: ignore[index]


@pytest.mark.parametrize("name", ["scan", "coverage-mixed.pcap", "zeek-rules.pcap",
                                  "tcp-refused.pcap", "http1-lossy.pcap", "pmtu-icmp-client.pcap",
                                  "ipv6.pcap", "compare-h2.pcapng", "compare-h1.pcapng",
                                  "tls-resumption.pcapng", "ws-tls.pcapng"])
def test_load_with_every_connection_frozen_equals_load(name: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """load() and load(out=DIR), every table, with every connection frozen at each segment
    that may be (nobody parses it, or its parsers are done: the last three captures' are TLS
    and HTTP connections; rows made when frozen, records moved to disk in pages of 2) equal load()
    without freezing: the pipeline's wiring (the row maker, path_mtu's kept records, the
    addresses of frozen connections, the database) changes nothing."""
    import pcaptools
    import pcaptools.pipeline as pipeline
    from tests.conftest import CAPTURES
    from tests.test_streaming_export import assert_same_tables

    path = write_pcap(tmp_path / "scan.pcap", _scan()) if name == "scan" else CAPTURES / name
    if not path.exists():
        pytest.skip(f"captures/{name} missing")
    keys = path.with_suffix(".keys")
    keylog = keys if keys.exists() else None
    monkeypatch.setattr(pipeline, "FreezePolicy", lambda: None)
    want = pcaptools.load(path, keylog=keylog)
    want_out = pcaptools.load(path, keylog=keylog, out=tmp_path / "want")
    frozen = count_freezes(monkeypatch)
    monkeypatch.setattr(pipeline, "FreezePolicy", lambda: ALWAYS)
    got = pcaptools.load(path, keylog=keylog)
    for table, df in want.tables.items():
        pd.testing.assert_frame_equal(got.tables[table], df, check_exact=True, obj=table)
    import pcaptools.tcp.frozen as frozen_mod
    monkeypatch.setitem(FrozenConnections.__init__.__kwdefaults__, "page_rows", 2)
    moved: list[int] = []
    real_put = frozen_mod._Disk.put

    def put(self, recs):  # type: ignore[no-untyped-def]
        moved.extend(r[0] for r in recs)
        real_put(self, recs)

    monkeypatch.setattr(frozen_mod._Disk, "put", put)
    assert_same_tables(want_out, want)  # (a scan's cold rows: categories as load()'s too)
    assert_same_tables(pcaptools.load(path, keylog=keylog, out=tmp_path / "out"), want)
    assert frozen  # (some connection was frozen)
    assert moved or len(set(frozen)) < 4, name  # (and moved to disk, when 4 were)


@pytest.mark.parametrize("where", ["captures", "corpus"])
def test_parsed_connections_let_go_at_once_change_no_table(
        where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every capture of captures/ (with its key log) and of the public corpus: load() with
    every connection frozen as soon as it may be, the parsed ones as soon as both directions
    ended (FIN or RST) with nothing held and their observers (TLS, HTTP/1, HTTP/2, WebSocket,
    the detectors) are done, gives every table of load() without freezing, warnings
    included; and parsed connections were let go (TLS and cleartext HTTP ones among them)."""
    import pcaptools
    import pcaptools.pipeline as pipeline
    from tests.conftest import CAPTURES, CORPUS, CORPUS_KEYS

    if where == "corpus":
        if not CORPUS.is_dir():
            pytest.skip("corpus not present")
        paths = sorted([*CORPUS.glob("*.pcap"), *CORPUS.glob("*.pcapng")])
        keys = {p: (CORPUS / CORPUS_KEYS[p.name] if p.name in CORPUS_KEYS else None)
                for p in paths}
    else:
        paths = sorted([*CAPTURES.glob("*.pcap"), *CAPTURES.glob("*.pcapng")])
        keys = {p: (p.with_suffix(".keys") if p.with_suffix(".keys").exists() else None)
                for p in paths}
    released = _count_releases(monkeypatch)
    packed = _count_packs(monkeypatch)
    for path in paths:
        monkeypatch.setattr(pipeline, "FreezePolicy", lambda: None)
        want = pcaptools.load(path, keylog=keys[path])
        monkeypatch.setattr(pipeline, "FreezePolicy", lambda: ALWAYS)
        got = pcaptools.load(path, keylog=keys[path])
        for table, df in want.tables.items():
            pd.testing.assert_frame_equal(got.tables[table], df, check_exact=True,
                                          obj=f"{path.name}: {table}")
    kinds = {inner for _, inner in released}
    assert len(released) > (80 if where == "captures" else 20), len(released)
    assert {"TlsObserver", "HttpDetector"} <= kinds, kinds
    # idle parsers packed (before each segment of another connection), TLS ones kept in memory
    assert len(packed) > (1000 if where == "captures" else 100), len(packed)
    assert {("TlsObserver", "memory")} <= set(packed)
    assert all(where == "memory" for inner, where in packed if inner == "TlsObserver")
    if where == "captures":
        assert ("HttpDetector", "record") in packed


def test_observers_let_go_are_freed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A let-go connection's parsers are freed by reference counting the moment the tracker
    drops them: no observer (dispatcher, detector, TLS, HTTP/1, HTTP/2 with its HPACK tables,
    WebSocket) holds a reference cycle, which would keep it until the cycle collector runs
    (rarely, during the pass: ``pipeline._gc_relaxed``), so memory would not follow the live
    connections. Every shipped capture, every connection frozen as soon as it may be, the
    cycle collector off: at the end of the pass no pcaptools object is unreachable."""
    import gc

    import pcaptools
    import pcaptools.pipeline as pipeline
    from tests.conftest import CAPTURES

    found: list[tuple[str, str]] = []
    released = _count_releases(monkeypatch)
    real_finish = pipeline.TcpTracker.finish
    name = [""]

    def finish(self, ts_ns, frame):  # type: ignore[no-untyped-def]
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            found.extend((name[0], type(o).__qualname__) for o in gc.garbage
                         if (type(o).__module__ or "").startswith("pcaptools"))
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        return real_finish(self, ts_ns, frame)

    patched_tracker(monkeypatch, finish=finish)
    monkeypatch.setattr(pipeline, "FreezePolicy", lambda: ALWAYS)
    paths = sorted([*CAPTURES.glob("*.pcap"), *CAPTURES.glob("*.pcapng")])
    was = gc.isenabled()
    gc.disable()
    try:
        for path in paths:
            name[0] = path.name
            keys = path.with_suffix(".keys")
            gc.collect()
            pcaptools.load(path, keylog=keys if keys.exists() else None)
    finally:
        if was:
            gc.enable()
    assert len(released) > 80
    assert found == []
