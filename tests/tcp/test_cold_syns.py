"""Cold connections (issue #18): a connection that sent one payload-less SYN is a packed row
until a second segment of its address pair comes (``pcaptools.tcp.cold``). Every table must be
what the full path gives (``TcpTracker.cold_syns = False``: a record and a conversation at the
first segment), on captures/, the public corpus, a generated SYN flood and a scan-like capture
of SYNs that stay alone, get answered, retransmitted, reset, quoted in ICMP errors, reuse a
port with a new ISN, carry ECN bits, IPv6 and every TCP option the handshake table reads.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.diagnostics import Diagnostics
from pcaptools.net.packet import TcpSegment
from pcaptools.tables.tcp_tables import record_tables
from pcaptools.tcp.cold import ColdSyns
from pcaptools.tcp.tracker import TcpTracker
from tests.conftest import corpus_files, shipped_captures
from tests.oracle import tshark_fields
from tests.tcp._compare import tcp_items
from tests.tcp._made import made_fixture  # noqa: F401  (the fixture ``made``)
from tests.tcp._pcapgen import ACK, FIN, PSH, RST, SYN, Pkt, write_pcap, wscale_opt
from tests.tcp._tracker_patch import patched_tracker

ECE, CWR = 0x40, 0x80
_TS = bytes([8, 10, 0, 0, 0, 1, 0, 0, 0, 0])  # timestamps option
_SACK_PERM = bytes([4, 2])
_TFO_REQUEST = bytes([34, 2])
_TFO_COOKIE = bytes([34, 10]) + b"cookie!!"


def _syns() -> list[Pkt]:
    """Lone SYNs of every shape, and SYNs whose connection goes on in each way."""
    t = 2_000_000_000
    out: list[Pkt] = []
    shapes = [b"", wscale_opt(7), wscale_opt(0, mss=536) + _SACK_PERM + b"\x01\x01" + _TS,
              _TFO_REQUEST, _TFO_COOKIE, _SACK_PERM, bytes([2, 4, 5, 0xB4, 0])]  # (EOL padding)
    port = 30000
    for v6 in (False, True):
        for opts in shapes:
            for flags in (SYN, SYN | ECE | CWR, SYN | PSH):
                out.append(Pkt(t, True, flags, 1000 + port, opts=opts, cport=port, v6=v6))
                t, port = t + 10_000, port + 1
    # not cold: a zero window (Zeek W), a FIN with the SYN, a SYN with payload
    out.append(Pkt(t, True, SYN, 5, win=0, cport=port))
    out.append(Pkt(t + 1, True, SYN | FIN, 5, cport=port + 1))
    out.append(Pkt(t + 2, True, SYN, 5, plen=10, cport=port + 2))
    t, port = t + 1_000_000, port + 3
    # a cold SYN made by an RST from the server, by an ICMP error quoting it (v4 and v6), by a
    # second SYN of the same ISN much later, by a FIN of the client
    out += [Pkt(t, True, SYN, 77, cport=port), Pkt(t + 5_000_000, False, RST | ACK, 0, 78,
                                                       cport=port)]
    out += [Pkt(t + 1, True, SYN, 88, cport=port + 1),
            Pkt(t + 6_000_000, True, SYN, 88, cport=port + 1, icmp_quote=28)]
    out += [Pkt(t + 2, True, SYN, 99, cport=port + 2, v6=True),
            Pkt(t + 6_000_001, True, SYN, 99, cport=port + 2, v6=True, icmp_quote=8)]
    out += [Pkt(t + 3, True, SYN, 111, cport=port + 3),
            Pkt(t + 3_000_000_000, True, SYN, 111, cport=port + 3)]
    out += [Pkt(t + 4, True, SYN, 222, cport=port + 4),
            Pkt(t + 7_000_000, True, FIN | ACK, 223, 1, cport=port + 4)]
    # a cold SYN answered with data after other cold SYNs came (streams interleave)
    out += [Pkt(t + 5, True, SYN, 333, opts=wscale_opt(2), cport=port + 5),
            Pkt(t + 6, True, SYN, 444, cport=port + 6),
            Pkt(t + 8_000_000, False, SYN | ACK, 900, 334, opts=wscale_opt(3), cport=port + 5),
            Pkt(t + 9_000_000, True, ACK, 334, 901, cport=port + 5),
            Pkt(t + 10_000_000, True, PSH | ACK, 334, 901, plen=20, cport=port + 5)]
    return sorted(out, key=lambda p: p.t_ns)


def _load(path: Path, cold: bool, monkeypatch: pytest.MonkeyPatch) -> pcaptools.Capture:
    keys = path.with_suffix(".keys")
    with monkeypatch.context() as m:
        patched_tracker(m, cold_syns=cold)
        return pcaptools.load(path, keylog=keys if keys.exists() else None,
                              check_checksums=True)


def _same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got, want = _load(path, True, monkeypatch), _load(path, False, monkeypatch)
    assert list(got.tables) == list(want.tables)
    for name, df in got.tables.items():
        pd.testing.assert_frame_equal(df, want.tables[name], check_exact=True,
                                      obj=f"{path.name}: {name}")


def test_cold_tables_equal_the_full_path_on_made_captures(
        made: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    kept: list[int] = []
    add = ColdSyns.add

    def counting_add(self: ColdSyns, seg: object, stream: int) -> object:
        kept.append(stream)
        return add(self, seg, stream)  # type: ignore[arg-type]

    monkeypatch.setattr(ColdSyns, "add", counting_add)
    for name in ("syns", "scan", "flood"):
        kept.clear()
        _same(made[name], monkeypatch)
        assert kept, name
    cap = pcaptools.load(made["syns"])
    c = cap.connections
    assert len(c) == 42 + 3 + 7
    assert len(cap.warnings) == 0
    # S0: the 42 lone SYNs, the zero-window SYN (history SW), the SYN with payload, the two
    # quoted in ICMP errors, the SYN sent twice, the last lone SYN
    assert (c["conn_state"] == "S0").sum() == 48
    assert c["history"].tolist()[42:] == ["SW", "Q", "S", "Sr", "S", "S", "S", "SF", "ShAD",
                                           "S"]
    hs = cap.tcp_handshakes
    tfo = hs[hs["tfo_cookie_len"].notna()]
    assert sorted(tfo["tfo_cookie_len"].unique().tolist()) == [8]
    assert hs["tfo_cookie_request"].sum() == 6  # (3 flag sets x IPv4/IPv6)
    assert (hs["client_mss"] == 536).sum() == 6


def test_cold_tables_equal_the_full_path_on_shipped_captures(
        monkeypatch: pytest.MonkeyPatch) -> None:
    paths = shipped_captures()
    assert len(paths) >= 20
    for path in paths:
        _same(path, monkeypatch)


def test_cold_tables_equal_the_full_path_on_the_corpus(
        monkeypatch: pytest.MonkeyPatch) -> None:
    paths = corpus_files()
    if not paths:
        pytest.skip("public corpus not present (../shared/corpus)")
    for path in paths:
        _same(path, monkeypatch)


def test_a_syn_flood_keeps_no_record_and_no_conversation(made: dict[str, Path]) -> None:
    tracker = TcpTracker(Diagnostics())
    n = 0
    for seg, captured in tcp_items(made["flood"]):
        assert captured is None
        a = tracker.segment(seg)
        assert a.tcp_stream == n and a.conv is None and a.new_stream and a.rel_seq == 0
        n += 1
    assert n == 40000
    assert tracker.connections == [None] * n
    assert tracker.analyzer.conversations == [None] * n
    assert not tracker.analyzer._table
    assert tracker.cold is not None and len(tracker.cold) == n
    assert len(tracker.cold.buf) == 61 * n  # (one packed row each)
    assert len(tracker.cold.options) == 1  # (the flood's SYNs have no options: one b"")


def test_a_second_segment_makes_the_connection_under_its_number(tmp_path: Path) -> None:
    pkts = [Pkt(1000, True, SYN, 10, cport=1), Pkt(2000, True, SYN, 20, cport=2),
            Pkt(3000, True, SYN, 30, cport=3),
            Pkt(4000, False, SYN | ACK, 500, 21, cport=2)]
    tracker = TcpTracker(Diagnostics())
    out = [tracker.segment(seg) for seg, _ in tcp_items(write_pcap(tmp_path / "x.pcap", pkts))]
    assert [a.tcp_stream for a in out] == [0, 1, 2, 1]
    assert out[3].conv is not None and out[3].rel_ack == 1 and not out[3].from_client
    assert tracker.connections[0] is None and tracker.connections[2] is None
    conn = tracker.connections[1]
    assert conn is not None and conn.first_frame == 2 and conn.counts[:2] == [1, 1]
    assert conn.handshake is not None and conn.handshake.synack_frame == 4
    assert tracker.cold is not None and len(tracker.cold) == 2


def test_a_syn_sent_to_its_own_address_and_port() -> None:
    """Source and destination the same (a LAND packet): one address-pair key for both
    directions; the second SYN makes the connection as the full path does."""
    me = bytes([10, 0, 0, 9])

    def syn(frame: int) -> TcpSegment:
        return TcpSegment(frame, frame * 1000, 54, 4, me, me, 64, frame, 7000, 7000, 5, 0, SYN,
                          1024, 20, b"", 0, b"", 54, True)

    got, want = TcpTracker(Diagnostics()), TcpTracker(Diagnostics())
    want.cold = None
    for frame in (1, 2, 3):
        a, b = got.segment(syn(frame)), want.segment(syn(frame))
        assert (a.tcp_stream, a.rel_seq, a.kinds, a.from_client) == \
            (b.tcp_stream, b.rel_seq, b.kinds, b.from_client)
    assert got.cold is not None and len(got.cold) == 0 and not got.cold.keys
    for mine, theirs in zip(record_tables(got), record_tables(want), strict=True):
        pd.testing.assert_frame_equal(mine, theirs)


def test_a_syn_a_cold_row_cannot_hold_goes_the_full_path() -> None:
    """A field out of the packed row's range (here a TTL of 300, which no decoder gives) is
    analysed as any first segment: a record and a conversation at once."""
    seg = TcpSegment(1, 1000, 54, 4, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), 300, 1, 4000,
                     80, 5, 0, SYN, 1024, 20, b"", 0, b"", 54, True)
    tracker = TcpTracker(Diagnostics())
    a = tracker.segment(seg)
    assert a.conv is not None and a.tcp_stream == 0
    assert tracker.cold is not None and len(tracker.cold) == 0 and not tracker.cold.buf
    conn = tracker.connections[0]
    assert conn is not None and conn.counts[:2] == [1, 0]


@pytest.mark.tshark
def test_cold_streams_seq_and_window_agree_with_tshark(made: dict[str, Path]) -> None:
    """On the capture of SYNs of every shape and on the flood, every TCP frame's tcp.stream,
    relative sequence number and window in the packets table (the cold SYNs' rows among them)
    are tshark 4.0's."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    for name in ("syns", "flood"):
        path = made[name]
        rows = tshark_fields(str(path), ("frame.number", "tcp.stream", "tcp.seq",
                                         "tcp.window_size"), (), "tcp && !icmp && !icmpv6")
        p = pcaptools.load(path).packets
        p = p[p["ip_proto"] == 6]
        got = list(zip(p["frame"].tolist(), p["tcp_stream"].tolist(), p["seq"].tolist(),
                       p["window"].tolist(), strict=True))
        want = [tuple(int(x) for x in r) for r in rows]
        assert len(got) == len(want) > 40, name
        assert got == want, name
