"""Per-connection state made when needed (issue #18) gives exactly what state made up front gives.

``TcpTracker`` makes a connection's reassembly and observer (or its sequence follower) at
its first segment that is not a payload-less SYN, SYN-ACK, or ACK/RST at the start of the
sequence spaces (:meth:`TcpTracker._defer`), replaying the SYNs
(:meth:`TcpTracker._attach`), so the connections of a port scan, a SYN flood or refused or
reset handshakes never get them. Here every input goes through
the tracker as it is and through one that attaches at the connection's first segment (what
it did before): the observers must see the same calls, except the ``close``/``finish`` of
connections that never got past a SYN (nothing was fed to them, and they report nothing), and
the connections, handshakes and events tables and the Diagnostics rows must be identical.
Inputs: captures/, the public corpus, the tshark-comparison scenarios and seeded simulations,
and a scan-like capture (SYN-only connections, a retransmitted SYN answered later, a refused
SYN, a SYN followed by data, with and without an observer factory).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pcaptools.diagnostics import Diagnostics
from pcaptools.tables.tcp_tables import events_table, record_tables
from pcaptools.tcp.tracker import Connection, TcpTracker
from tests.conftest import corpus_files, shipped_captures
from tests.tcp._compare import feed, tcp_items
from tests.tcp._pcapgen import ACK, FIN, PSH, RST, SYN, Pkt, simulate, write_pcap, wscale_opt
from tests.tcp._scenarios import SCENARIOS
from tests.tcp._tracker_patch import patched_tracker
from tests.tcp.test_fast_paths import _Recorder


def _scan() -> list[Pkt]:
    """SYN-only connections around four that go further."""
    out: list[Pkt] = []
    t = 1_000_000_000
    for i in range(20):
        out.append(Pkt(t + i * 1000, True, SYN, 1000 + i, opts=wscale_opt(7), cport=50000 + i))
    t += 100_000
    # a SYN sent twice, answered, then data both ways and FINs
    out += [
        Pkt(t, True, SYN, 7000, opts=wscale_opt(7), cport=41000),
        Pkt(t + 1_000_000, True, SYN, 7000, opts=wscale_opt(7), cport=41000),
        Pkt(t + 2_000_000, False, SYN | ACK, 9000, 7001, opts=wscale_opt(7), cport=41000),
        Pkt(t + 3_000_000, True, ACK, 7001, 9001, cport=41000),
        Pkt(t + 4_000_000, True, PSH | ACK, 7001, 9001, plen=100, cport=41000),
        Pkt(t + 5_000_000, False, PSH | ACK, 9001, 7101, plen=300, cport=41000),
        Pkt(t + 6_000_000, True, FIN | ACK, 7101, 9301, cport=41000),
        Pkt(t + 7_000_000, False, FIN | ACK, 9301, 7102, cport=41000),
        Pkt(t + 8_000_000, True, ACK, 7102, 9302, cport=41000),
    ]
    # refused: SYN, RST-ACK
    out += [Pkt(t + 9_000_000, True, SYN, 5, cport=42000),
            Pkt(t + 9_100_000, False, RST | ACK, 0, 6, cport=42000)]
    # a SYN, then data with no handshake seen (the ACK reveals bytes never captured)
    out += [Pkt(t + 10_000_000, True, SYN, 100, cport=43000),
            Pkt(t + 11_000_000, True, PSH | ACK, 101, 777, plen=50, cport=43000),
            Pkt(t + 12_000_000, False, ACK, 777, 251, cport=43000)]
    # a SYN with a new ISN on the port of a SYN-only connection (port reuse), then its SYN-ACK
    out += [Pkt(t + 13_000_000, True, SYN, 100_000, cport=50003),
            Pkt(t + 13_100_000, False, SYN | ACK, 3, 100_001, cport=50003)]
    for i in range(20, 25):
        out.append(Pkt(t + 14_000_000 + i, True, SYN, 2000 + i, cport=50000 + i))
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("lazy_state")
    paths = [write_pcap(d / "scan.pcap", _scan()), *shipped_captures(), *corpus_files()]
    for name, build in SCENARIOS.items():
        paths.append(write_pcap(d / f"scenario_{name}.pcap", build()))
    for seed in range(8):
        paths.append(write_pcap(d / f"sim_{seed:03d}.pcap",
                                simulate(seed, n_conns=2 + seed % 4, n_data=40 + seed % 80)))
    return paths


def _run(path: Path, eager: bool, observe: bool,
         monkeypatch: pytest.MonkeyPatch
         ) -> tuple[list[object], list[pd.DataFrame], list[object], int]:
    log: list[object] = []
    with monkeypatch.context() as m:
        tracker_class = TcpTracker
        if eager:
            new = TcpTracker._new_connection

            def eager_new(self: TcpTracker, a: object, seg: object) -> Connection:
                conn = new(self, a, seg)  # type: ignore[arg-type]
                self._attach(conn)
                return conn

            tracker_class = patched_tracker(  # (cold_syns False: a record at every first segment)
                m, _new_connection=eager_new, cold_syns=False)
        diag = Diagnostics()
        tracker = tracker_class(diag, observer_factory=(lambda s, _mid: _Recorder(log, s))
                             if observe else None)
        last = feed(tracker, path)
        never = sum(1 for c in tracker.connections  # (None: cold, test_cold_syns.py)
                    if c is None or (c.streams is None and c.follow is None))
        tracker.finish(0, last)
        tables = [*record_tables(tracker), events_table(tracker)]
    return log, tables, [(r.code, r.frame, r.detail) for r in diag.rows], never


@pytest.mark.parametrize("observe", [True, False], ids=["observer", "no_observer"])
def test_lazy_state_is_exact(inputs: list[Path], observe: bool,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    skipped = 0
    for path in inputs:
        log, tables, rows, never = _run(path, False, observe, monkeypatch)
        want_log, want_tables, want_rows, none_eager = _run(path, True, observe, monkeypatch)
        assert none_eager == 0, path.name
        seen = {x[0] for x in log}  # type: ignore[index]
        quiet = [x for x in want_log if x[0] not in seen]  # type: ignore[index]
        assert all(x[1] in ("close", "finish") for x in quiet), path.name  # type: ignore[index]
        assert log == [x for x in want_log if x[0] in seen], path.name  # type: ignore[index]
        for got, want in zip(tables, want_tables, strict=True):
            pd.testing.assert_frame_equal(got, want, check_exact=True, obj=path.name)
        assert rows == want_rows, path.name
        skipped += never
    assert skipped >= 25  # the scan's SYN-only connections never got byte-stream state


def test_a_syn_flood_makes_no_stream_state(tmp_path: Path) -> None:
    made: list[int] = []
    log: list[object] = []

    def factory(stream: int, _mid: bool) -> _Recorder:
        made.append(stream)
        return _Recorder(log, stream)

    tracker = TcpTracker(Diagnostics(), observer_factory=factory)
    path = write_pcap(tmp_path / "scan.pcap", _scan())
    for seg, _ in tcp_items(path):
        tracker.segment(seg)
    # 20: SYN twice, handshake, data; 22: data. No stream state for 21 (refused: SYN,
    # RST-ACK) and 23 (a new ISN on the port of SYN-only stream 3, a new stream as in tshark,
    # answered by a SYN-ACK and nothing more): nothing but SYNs to replay
    assert made == [20, 22]
    assert [c is not None and c.loss is not None for c in tracker.connections].count(True) == 4
    refused, reused = tracker.connections[21], tracker.connections[23]
    assert refused is not None and refused.streams is None and refused.follow is None
    assert refused.syn_pending == 0 and refused.syn_pending_peer == -1  # (the client's SYN)
    assert reused is not None and (reused.syn_pending, reused.syn_pending_peer) == (0, 1)
    tracker.finish(0, 0)
    assert {x[0] for x in log} == {20, 22}  # type: ignore[index]


@pytest.mark.tshark
def test_a_closed_port_scan_agrees_with_tshark_and_makes_no_stream_state(
        tmp_path: Path) -> None:
    """``benchmarks/synflood.py --answer rst``: 3,000 SYNs, each answered by the server's
    RST-ACK (a scan of closed ports). No connection gets reassembly, an observer or a
    follower (nothing but its SYN to replay); every frame's tcp.stream, relative sequence and
    acknowledgement numbers and ack RTT are tshark 4.0's; each connection is refused (Zeek
    REJ, history Sr)."""
    import shutil
    import subprocess
    import sys

    import pcaptools
    from tests.oracle import tshark_fields

    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "rst.pcap"
    subprocess.run([sys.executable, str(root / "benchmarks" / "synflood.py"), str(path),
                    "--connections", "3000", "--answer", "rst"], check=True,
                   capture_output=True)
    made: list[int] = []
    tracker = TcpTracker(Diagnostics(), observer_factory=lambda s, _m: made.append(s))
    feed(tracker, path)
    assert made == [] and len(tracker.connections) == 3000
    assert all(c is not None and c.streams is None and c.follow is None
               and c.syn_pending == 0 for c in tracker.connections)
    cap = pcaptools.load(path)
    assert len(cap.packets) == 6000
    c = cap.connections
    assert (c["conn_state"].astype(str) == "REJ").all()
    assert (c["history"].astype(str) == "Sr").all()
    assert (cap.tcp_handshakes["result"].astype(str) == "refused").all()
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    rows = tshark_fields(str(path), ("frame.number", "tcp.stream", "tcp.seq", "tcp.ack",
                                     "tcp.analysis.ack_rtt"), (), "tcp")
    p = cap.packets
    # (the SYNs, odd frames, have no ACK flag: tshark prints 0, the packets table NA)
    want = [(int(f), int(s), int(q), int(a) if int(f) % 2 == 0 else None,
             round(float(r) * 1e3, 6) if r else None) for f, s, q, a, r in rows]
    got = [(f, s, q, None if pd.isna(a) else a, None if pd.isna(r) else round(r, 6))
           for f, s, q, a, r in zip(p["frame"].tolist(), p["tcp_stream"].tolist(),
                                    p["seq"].tolist(), p["ack"].tolist(),
                                    p["ack_rtt_ms"].tolist(), strict=True)]
    assert len(want) == 6000 and got == want
    assert sum(r[4] is not None for r in want) == 3000  # (each RST-ACK acks its SYN)
