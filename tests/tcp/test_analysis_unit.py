"""TcpAnalyzer on hand-built segments: wraparound, port reuse, roles, scaling, resent bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.net.packet import ACK, FIN, PSH, RST, SYN, TcpSegment
from pcaptools.tcp.analysis import (
    KIND_NAMES,
    MAX_SEEN_INTERVALS,
    RETRANSMISSION_KINDS,
    SegmentAnalysis,
    TcpAnalyzer,
    TcpDirection,
)
from tests.tcp._pcapgen import simulate

CLIENT = bytes([192, 168, 1, 10])
SERVER = bytes([93, 184, 216, 34])
MS = 1_000_000
M = 0xFFFFFFFF


def ws(shift: int) -> bytes:
    return bytes([1, 3, 3, shift])


class Conn:
    """Builds the segments of one connection and feeds them to an analyzer."""

    def __init__(self, an: TcpAnalyzer, cport: int = 51000, sport: int = 443) -> None:
        self.an = an
        self.cport, self.sport = cport, sport
        self.frame = 0
        self.t = 1_700_000_000 * 1_000_000_000

    def send(
        self,
        c2s: bool,
        flags: int,
        seq: int,
        ack: int = 0,
        win: int = 65535,
        plen: int = 0,
        opts: bytes = b"",
        dt: int = MS,
    ) -> SegmentAnalysis:
        self.frame += 1
        self.t += dt
        src, dst = (CLIENT, SERVER) if c2s else (SERVER, CLIENT)
        sp, dp = (self.cport, self.sport) if c2s else (self.sport, self.cport)
        seg = TcpSegment(
            frame=self.frame,
            ts_ns=self.t,
            frame_len=54 + plen + len(opts),
            ip_version=4,
            src=src,
            dst=dst,
            ttl=64,
            ip_id=1,
            sport=sp,
            dport=dp,
            seq=seq & M,
            ack=ack & M,
            flags=flags,
            window=win,
            header_len=20 + len(opts),
            options=opts,
            seg_len=plen,
            payload=b"x" * plen,
            overhead_len=54 + len(opts),
        )
        return self.an.feed(seg)

    def c(self, *a: int, **k: object) -> SegmentAnalysis:
        return self.send(True, *a, **k)  # type: ignore[arg-type]

    def s(self, *a: int, **k: object) -> SegmentAnalysis:
        return self.send(False, *a, **k)  # type: ignore[arg-type]


def handshake(
    cn: Conn, cisn: int, sisn: int, copt: bytes = b"", sopt: bytes = b""
) -> list[SegmentAnalysis]:
    return [
        cn.c(SYN, cisn, 0, opts=copt),
        cn.s(SYN | ACK, sisn, cisn + 1, opts=sopt),
        cn.c(ACK, cisn + 1, sisn + 1),
    ]


# --------------------------------------------------------------------------- wraparound


def test_sequence_wraparound_is_serial() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    cisn, sisn = 0xFFFFFF00, 0xFFFFFFF0
    hs = handshake(cn, cisn, sisn)
    assert [a.rel_seq for a in hs] == [0, 0, 1]
    assert hs[2].rel_ack == 1
    seq = sisn + 1
    rel = []
    for _ in range(5):  # server data crossing 2**32
        a = cn.s(ACK | PSH, seq, cisn + 1, plen=1000)
        rel.append(a.rel_seq)
        assert a.kinds == ()
        seq += 1000
    assert rel == [1, 1001, 2001, 3001, 4001]
    a = cn.c(ACK, cisn + 1, seq)  # acks everything, across the wrap
    assert a.rel_ack == 5001 and a.kinds == () and a.acked_frame == 8
    # the segment that straddled the wrap, sent again: a spurious retransmission of seen bytes
    again = cn.s(ACK, sisn + 1, cisn + 1, plen=1000)
    assert again.kinds == ("spurious_retransmission",)
    assert again.resent_bytes == 1000 and again.rel_seq == 1
    # a gap after the wrap is a lost segment, not a retransmission
    gap = cn.s(ACK, seq + 500, cisn + 1, plen=100)
    assert gap.kinds == ("lost_segment",) and gap.rel_seq == 5501 and gap.resent_bytes == 0


def test_nextseq_of_zero_behaves_as_unset_like_wireshark() -> None:
    """Data ending exactly at 2**32 leaves nextseq == 0, which Wireshark treats as 'unset':
    the same data sent again is then not flagged (tshark 4.0.17 agrees, checked by hand)."""
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    handshake(cn, M - 100, 1000)
    first = cn.c(ACK, M - 99, 1001, plen=100)
    again = cn.c(ACK, M - 99, 1001, plen=100, dt=300 * MS)
    assert (first.rel_seq, first.kinds, again.kinds) == (1, (), ())
    assert again.resent_bytes == 100  # the plain fact is still recorded
    nxt = cn.c(ACK, 0, 1001, plen=100)
    assert (nxt.rel_seq, nxt.kinds) == (101, ())
    third = cn.c(ACK, M - 99, 1001, plen=100, dt=300 * MS)
    assert third.kinds == ("retransmission",)


# --------------------------------------------------------------------------- port reuse


def test_port_reuse_starts_new_stream() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    hs1 = handshake(cn, 1000, 5000)
    assert hs1[0].new_stream and hs1[0].tcp_stream == 0 and not hs1[1].new_stream
    cn.c(ACK | FIN, 1001, 5001)
    cn.s(ACK | FIN, 5001, 1002)
    cn.c(ACK, 1002, 5002)
    # same ports, same ISN: a SYN retransmission of the old connection, not a new one
    again = cn.c(SYN, 1000, 0, dt=2000 * MS)
    assert again.tcp_stream == 0 and not again.new_stream
    assert again.kinds == ("retransmission",)
    # same ports, new ISN: a new conversation (tcp.stream 1) flagged reused_ports
    syn2 = cn.c(SYN, 777777, 0, dt=2000 * MS)
    assert syn2.tcp_stream == 1 and syn2.new_stream and syn2.kinds == ("reused_ports",)
    assert syn2.rel_seq == 0 and syn2.from_client
    sa2 = cn.s(SYN | ACK, 9000, 777778)
    assert sa2.tcp_stream == 1 and sa2.rel_seq == 0 and sa2.rel_ack == 1 and sa2.kinds == ()
    # a SYN-ACK with yet another ISN re-bases the server side, same stream
    sa3 = cn.s(SYN | ACK, 9500, 777778)
    assert sa3.tcp_stream == 1 and sa3.rel_seq == 0
    assert sa3.kinds == ("lost_segment", "reused_ports")  # 9500 is beyond the old nextseq 9001
    assert [c.tcp_stream for c in an.conversations] == [0, 1]
    assert an.conversations[1].server_base_seq == 9500
    assert an.conversations[0].client_base_seq == 1000


def test_reverse_direction_syn_reuses_ports_with_roles_swapped() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    handshake(cn, 10, 20)
    a = cn.s(SYN, 5555, 0, dt=5000 * MS)
    assert a.tcp_stream == 1 and a.kinds == ("reused_ports",) and a.from_client
    conv = an.conversations[1]
    assert (conv.client_addr, conv.client_port, conv.server_port) == (SERVER, 443, 51000)


# --------------------------------------------------------------------------- roles, scaling, RTT


def test_mid_stream_start_infers_roles_and_keeps_raw_window() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an, cport=50123, sport=8000)
    a = cn.s(ACK | PSH, 123456, 999, win=300, plen=10)  # first seen: server data
    conv = an.conversations[0]
    assert conv.client_inferred and conv.client_port == 50123 and not a.from_client
    assert (a.rel_seq, a.rel_ack, a.window) == (1, 1, 300)  # scale unknown: raw window
    b = cn.c(ACK, 999, 123466, win=200)
    assert b.from_client and (b.rel_seq, b.rel_ack, b.window) == (1, 11, 200)
    assert b.acked_frame == 1 and b.ack_rtt_ns == MS
    assert conv.irtt_ns is None  # no SYN: no initial RTT


def test_window_scaling_and_initial_rtt() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    syn = cn.c(SYN, 100, 0, win=64240, opts=ws(7))
    synack = cn.s(SYN | ACK, 200, 101, win=65160, opts=ws(9), dt=3 * MS)
    assert (syn.window, synack.window) == (64240, 65160)  # SYNs are never scaled
    ack = cn.c(ACK, 101, 201, win=502, dt=2 * MS)
    assert ack.window == 502 * 128 and ack.acked_frame == 2 and ack.ack_rtt_ns == 2 * MS
    assert an.conversations[0].irtt_ns == 5 * MS  # SYN -> first ACK without SYN
    data = cn.s(ACK, 201, 101, win=100, plen=10)
    assert data.window == 100 * 512


def test_synack_without_window_scale_disables_scaling() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    cn.c(SYN, 100, 0, opts=ws(7))
    cn.s(SYN | ACK, 200, 101)
    assert cn.c(ACK, 101, 201, win=502).window == 502
    assert an.conversations[0].c2s.win_scale == -2 and an.conversations[0].s2c.win_scale == -2


def test_duplicate_acks_then_fast_retransmission() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    handshake(cn, 1, 1000)
    cn.s(ACK, 1001, 2, plen=1000)
    cn.s(ACK, 2001, 2, plen=1000)  # frame 5: the first, at 1001, is "lost" for the receiver
    d1 = cn.c(ACK, 2, 1001)  # same ack/window as the handshake ACK (frame 3)
    d2 = cn.c(ACK, 2, 1001)
    assert (d1.kinds, d1.dup_ack_num, d1.dup_ack_frame) == (("duplicate_ack",), 1, 3)
    assert (d2.dup_ack_num, d2.dup_ack_frame) == (2, 3)
    assert d1.acked_frame is None
    fr = cn.s(ACK, 1001, 2, plen=1000)
    assert fr.kinds == ("fast_retransmission",) and fr.resent_bytes == 1000
    late = cn.s(ACK, 1001, 2, plen=1000, dt=500 * MS)
    assert late.kinds == ("retransmission",)


def test_zero_window_probe_and_keepalive() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    handshake(cn, 1, 1000)
    cn.s(ACK, 1001, 2, plen=500)
    assert cn.c(ACK, 2, 1501, win=0).kinds == ("zero_window",)
    assert cn.s(ACK, 1501, 2, plen=1, dt=200 * MS).kinds == ("zero_window_probe",)
    assert cn.c(ACK, 2, 1501, win=0).kinds == ("zero_window", "zero_window_probe_ack")
    assert cn.c(ACK, 2, 1501, win=800).kinds == ("window_update",)
    assert cn.s(ACK, 1500, 2, plen=1, dt=30_000 * MS).kinds == ("keep_alive",)
    assert cn.c(ACK, 2, 1501, win=800).kinds == ("keep_alive_ack",)


def test_retransmission_kinds_are_exclusive_on_simulated_traffic() -> None:
    from tests.tcp._compare import tcp_segments  # noqa: F401  (keeps the helper importable)

    an = TcpAnalyzer(Diagnostics())
    exclusive = RETRANSMISSION_KINDS | {"out_of_order"}
    seen = 0
    for seed in range(3):
        for i, p in enumerate(simulate(seed)):
            seg = TcpSegment(
                frame=i + 1,
                ts_ns=p.t_ns,
                frame_len=60,
                ip_version=4,
                src=bytes([10, 0, seed, 1]) if p.c2s else bytes([10, 0, seed, 2]),
                dst=bytes([10, 0, seed, 2]) if p.c2s else bytes([10, 0, seed, 1]),
                ttl=64,
                ip_id=0,
                sport=p.cport if p.c2s else p.sport,
                dport=p.sport if p.c2s else p.cport,
                seq=p.seq & M,
                ack=p.ack & M,
                flags=p.flags,
                window=p.win & 0xFFFF,
                header_len=20,
                options=b"",
                seg_len=p.plen,
                payload=b"",
                overhead_len=60,
            )
            a = an.feed(seg)
            assert len(exclusive.intersection(a.kinds)) <= 1
            assert set(a.kinds) <= set(KIND_NAMES)
            seen += bool(exclusive.intersection(a.kinds))
    assert seen > 10


# --------------------------------------------------------------------------- resent bytes


def test_resent_bytes_counts_overlaps_only() -> None:
    d = TcpDirection()
    assert d.resent(1000, 100) == 0
    assert d.resent(1100, 100) == 0
    assert d.resent(1050, 100) == 100  # entirely inside [1000, 1200)
    assert d.resent(1300, 50) == 0  # hole [1200, 1300)
    assert d.resent(1150, 200) == 100  # [1150,1200) and [1300,1350) seen, the hole is new
    assert d.seen_starts == [1000] and d.seen_ends == [1350]
    assert d.resent(M - 10, 5) == 0  # far away (unwrapped below): new bytes


def test_resent_bytes_across_wrap_and_cap() -> None:
    d = TcpDirection()
    assert d.resent(M - 99, 200) == 0  # wraps: [2**32-99, 2**32+101)
    assert d.resent(50, 20) == 20
    assert d.resent(M - 49, 10) == 10
    d2 = TcpDirection()
    for i in range(MAX_SEEN_INTERVALS + 5):
        d2.resent(i * 10, 5)  # disjoint intervals
    assert d2.seen_starts is not None and len(d2.seen_starts) == MAX_SEEN_INTERVALS
    assert d2.resent(0, 5) == 0  # forgotten (documented approximation)
    assert d2.resent((MAX_SEEN_INTERVALS + 4) * 10, 5) == 5


# --------------------------------------------------------------------------- limits and robustness


def test_unacked_limit_reported_once() -> None:
    diag = Diagnostics()
    an = TcpAnalyzer(diag)
    cn = Conn(an)
    handshake(cn, 1, 100)
    seq = 101
    for _ in range(10_003):
        cn.s(ACK, seq, 2, plen=10, dt=1000)
        seq += 10
    assert diag.counts["tcp.unacked_limit"] == 1
    assert len(an.conversations[0].s2c.unacked) == 10_000
    last = cn.c(ACK, 2, 101 + 10 * 10_000)
    assert last.acked_frame == 3 + 10_000 and an.conversations[0].s2c.unacked == []


segments_strategy = st.lists(
    st.tuples(
        st.booleans(),
        st.integers(0, 0x1FF),
        st.integers(0, M),
        st.integers(0, M),
        st.integers(0, 0xFFFF),
        st.integers(0, 3000),
        st.integers(-5 * MS, 50 * MS),
        st.binary(max_size=12),
        st.sampled_from([0, 1, 2]),
    ),
    max_size=60,
)


@given(segments_strategy)
def test_never_raises(segs: list[tuple[bool, int, int, int, int, int, int, bytes, int]]) -> None:
    an = TcpAnalyzer(Diagnostics())
    conns = [Conn(an, 40000 + i, 80) for i in range(3)]
    t = 0
    for frame, (c2s, flags, seq, ack, win, plen, dt, opts, ci) in enumerate(segs, start=1):
        cn = conns[ci]
        cn.frame = frame - 1
        t += dt
        cn.t = t
        # options longer than announced, shorter than announced (snaplen), garbage: all tolerated
        a = cn.send(c2s, flags, seq, ack, win, plen, opts[: len(opts) // 2 * 2], dt=0)
        assert 0 <= a.rel_seq <= M and 0 <= a.window <= 0xFFFF << 14
        assert a.tcp_stream < len(an.conversations)
    for flags in (SYN | FIN, RST | ACK, RST, FIN, 0):
        a = conns[0].c(flags, 5, 7, plen=3)
        assert isinstance(a.kinds, tuple)


def _quoted(
    cn: Conn, c2s: bool, flags: int, seq: int, ack: int = 0, opts: bytes = b""
) -> TcpSegment:
    """The header of a segment as an ICMP error would quote it (frame/time of the ICMP packet)."""
    cn.frame += 1
    cn.t += MS
    src, dst = (CLIENT, SERVER) if c2s else (SERVER, CLIENT)
    sp, dp = (cn.cport, cn.sport) if c2s else (cn.sport, cn.cport)
    return TcpSegment(
        cn.frame,
        cn.t,
        90,
        4,
        src,
        dst,
        64,
        1,
        sp,
        dp,
        seq,
        ack,
        flags,
        1000,
        20 + len(opts),
        opts,
        0,
        b"",
        0,
    )


def test_icmp_quoted_headers_get_streams_but_no_analysis() -> None:
    an = TcpAnalyzer(Diagnostics())
    cn = Conn(an)
    # an error quoting a SYN of a connection never seen: tshark creates tcp.stream 0 for it
    q = an.feed_unanalysed(_quoted(cn, True, SYN, 200, opts=ws(2)), captured=24)
    assert q is not None and (q.tcp_stream, q.new_stream, q.rel_seq, q.kinds) == (0, True, 200, ())
    assert an.feed_unanalysed(_quoted(cn, True, SYN, 200), captured=8) is None  # too short
    syn = cn.c(SYN, 200, 0, opts=ws(2))
    assert (syn.tcp_stream, syn.new_stream, syn.rel_seq, syn.kinds) == (0, False, 0, ())
    cn.s(SYN | ACK, 900, 201, opts=ws(3))
    ack = cn.c(ACK, 201, 901, win=1000)
    assert ack.window == 4000 and an.conversations[0].irtt_ns == 2 * MS
    # a quoted SYN with another ISN on the same ports: a new stream, flagged, raw numbers
    q2 = an.feed_unanalysed(_quoted(cn, True, SYN, 4000), captured=20)
    assert q2 is not None and (q2.tcp_stream, q2.kinds, q2.rel_seq) == (1, ("reused_ports",), 4000)
    assert cn.c(ACK, 201, 901).tcp_stream == 1  # later segments follow the newest conversation


def test_the_last_address_pair_found_follows_the_index() -> None:
    """feed_known finds a segment of the previous segment's address pair (either way) without
    the index: it must give what the index gives, through interleaved connections, a
    conversation let go (frozen) and taken back, and a port reuse."""
    an = TcpAnalyzer(Diagnostics())
    a, b = Conn(an, cport=51000), Conn(an, cport=52000)
    handshake(a, 1000, 5000)
    handshake(b, 3000, 7000)
    # alternating connections and directions: each segment gets its own connection's stream
    for i in range(3):
        assert a.c(ACK, 1001 + 10 * i, 5001, plen=10).tcp_stream == 0
        assert a.s(ACK, 5001, 1011 + 10 * i).tcp_stream == 0
        assert b.s(ACK, 7001 + 10 * i, 3001, plen=10).tcp_stream == 1
        assert b.c(ACK, 3001, 7011 + 10 * i).tcp_stream == 1
    conv_b = an.conversations[1]
    assert conv_b is not None and an.forget(conv_b)  # (b's pair was the last one found)
    b.frame += 1
    seg = TcpSegment(b.frame, b.t, 54, 4, CLIENT, SERVER, 64, 1, 52000, 443, 3001, 7031, ACK,
                     65535, 20, b"", 0, b"", 54)
    assert an.feed_known(seg) is None  # let go: the index no longer has the pair
    an.restore(conv_b)
    assert b.c(ACK, 3001, 7031).tcp_stream == 1
    # a new connection on b's ports while b's pair is the last one found: the new stream
    syn = b.c(SYN, 999999, 0, dt=2000 * MS)
    assert syn.tcp_stream == 2 and syn.new_stream and syn.kinds == ("reused_ports",)
    assert b.s(SYN | ACK, 123456, 1000000).tcp_stream == 2
    assert a.c(ACK, 1031, 5001).tcp_stream == 0
