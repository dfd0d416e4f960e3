"""PacketDecoder unit tests with concrete values: fields, lengths, malformed headers, link types,
fragment reassembly limits, and hypothesis (decode never raises)."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from helpers import (
    ethernet,
    ipv4,
    ipv6,
    ipv6_ext,
    ipv6_frag,
    null_link,
    sll,
    tcp,
    udp,
)
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import RawFrame
from pcaptools.net import SUPPORTED_LINKTYPES, IpPacket, PacketDecoder, TcpSegment, UdpDatagram
from pcaptools.net.fragments import FragmentReassembler

A4 = ipaddress.ip_address("10.0.0.1").packed
B4 = ipaddress.ip_address("10.0.0.2").packed
A6 = ipaddress.ip_address("2001:db8::1").packed
B6 = ipaddress.ip_address("2001:db8::2").packed


def frame(
    data: bytes, n: int = 1, *, linktype: int = 1, orig_len: int | None = None, ts_ns: int = 5_000
) -> RawFrame:
    return RawFrame(n, ts_ns, linktype, data, len(data) if orig_len is None else orig_len)


def decode(data: bytes, **kw: object) -> tuple[object, list[tuple[str, int | None]]]:
    diag = Diagnostics()
    out = PacketDecoder(diag).decode(frame(data, **kw))  # type: ignore[arg-type]
    return out, [(r.code, r.frame) for r in diag.rows]


# --------------------------------------------------------------------------- fields


def test_tcp_segment_fields() -> None:
    opts = b"\x02\x04\x05\xb4\x01\x01\x04\x02"
    pkt = ethernet(
        ipv4(
            tcp(40000, 443, 0xFFFFFFF0, 0x12345678, 0x18, b"payload!", window=512, opts=opts),
            ttl=57,
            ident=0xBEEF,
        )
    )
    seg, rows = decode(pkt, n=42, ts_ns=1_700_000_000_123_456_789)
    assert rows == []
    assert seg == TcpSegment(
        frame=42,
        ts_ns=1_700_000_000_123_456_789,
        frame_len=70,
        ip_version=4,
        src=A4,
        dst=B4,
        ttl=57,
        ip_id=0xBEEF,
        sport=40000,
        dport=443,
        seq=0xFFFFFFF0,
        ack=0x12345678,
        flags=0x18,
        window=512,
        header_len=28,
        options=opts,
        seg_len=8,
        payload=b"payload!",
        overhead_len=62,
        df=True,  # tests.helpers.ipv4 sets DF, as Linux does
    )


def test_ipv6_tcp_segment_fields() -> None:
    seg, rows = decode(ethernet(ipv6(tcp(1, 2, 3, 4, 0x011, b"xyz"), hlim=9), 0x86DD))
    assert rows == []
    assert isinstance(seg, TcpSegment)
    assert (
        seg.ip_version,
        seg.src,
        seg.dst,
        seg.ttl,
        seg.ip_id,
        seg.flags,
        seg.seg_len,
        seg.payload,
        seg.overhead_len,
    ) == (6, A6, B6, 9, -1, 0x011, 3, b"xyz", 14 + 40 + 20)


def test_ethernet_padding_is_not_payload() -> None:
    seg, rows = decode(ethernet(ipv4(tcp(flags=0x10))) + b"\0" * 6)
    assert isinstance(seg, TcpSegment) and (
        seg.seg_len,
        seg.payload,
        seg.frame_len,
        seg.overhead_len,
    ) == (0, b"", 60, 60)
    assert rows == []


def test_snaplen_cut_payload_keeps_tcp_len() -> None:
    full = ethernet(ipv4(tcp(payload=b"A" * 1000)))
    seg, rows = decode(full[:100], orig_len=len(full))
    assert isinstance(seg, TcpSegment)
    assert (seg.seg_len, seg.payload, seg.frame_len, seg.overhead_len) == (
        1000,
        b"A" * 46,
        1054,
        54,
    )
    assert rows == [("net.snaplen_truncated_payload", 1)]


def test_snaplen_cut_tcp_options() -> None:
    full = ethernet(ipv4(tcp(flags=0x02, opts=b"\x02\x04\x05\xb4" + b"\x01" * 16)))
    seg, rows = decode(full[:60], orig_len=len(full))
    assert isinstance(seg, TcpSegment)
    assert (seg.header_len, seg.options, seg.seg_len, seg.payload) == (
        40,
        b"\x02\x04\x05\xb4\x01\x01",
        0,
        b"",
    )
    assert rows == [("net.truncated_tcp_header", 1)]


def test_tso_total_length_zero() -> None:
    seg, rows = decode(ethernet(ipv4(tcp(payload=b"B" * 3000), total_length=0)))
    assert isinstance(seg, TcpSegment) and seg.seg_len == 3000 and rows == []


def test_ip_total_length_larger_than_frame() -> None:
    seg, rows = decode(ethernet(ipv4(tcp(payload=b"C" * 10), total_length=1500)))
    assert isinstance(seg, TcpSegment) and seg.seg_len == 10
    assert rows == [("net.bad_ip_total_length", 1)]


def test_udp_datagram_fields() -> None:
    dg, rows = decode(ethernet(ipv4(udp(5353, 53, b"query"), proto=17, ttl=3)) + b"\0" * 20)
    assert rows == []
    assert dg == UdpDatagram(
        frame=1,
        ts_ns=5_000,
        frame_len=67,
        ip_version=4,
        src=A4,
        dst=B4,
        ttl=3,
        sport=5353,
        dport=53,
        payload=b"query",
    )
    dg, _ = decode(ethernet(ipv4(udp(1, 2, b"abcdef", length=10), proto=17)))
    assert isinstance(dg, UdpDatagram) and dg.payload == b"ab"  # the UDP length bounds the payload
    dg, _ = decode(ethernet(ipv4(udp(1, 2, b"abcdef", length=99), proto=17)))
    assert (
        isinstance(dg, UdpDatagram) and dg.payload == b"abcdef"
    )  # a lying length cannot extend it


def test_other_ip_protocols_and_non_ip() -> None:
    pkt, _ = decode(ethernet(ipv4(b"\x08\x00\0\0\0\0\0\0", proto=1)))
    assert pkt == IpPacket(
        frame=1, ts_ns=5_000, frame_len=42, ip_version=4, src=A4, dst=B4, proto=1, fragment=False
    )
    pkt, _ = decode(ethernet(ipv6(ipv6_ext(58) + b"\x80\0\0\0", nh=60), 0x86DD))
    assert isinstance(pkt, IpPacket) and pkt.proto == 58
    assert decode(ethernet(b"\0" * 28, 0x0806)) == (None, [])  # ARP: not IP, not an anomaly


# --------------------------------------------------------------------------- malformed

MALFORMED = {
    "ihl_3": (ethernet(ipv4(tcp(), ihl=3)), None, "net.bad_ip_header_length"),
    "ihl_beyond_packet": (
        ethernet(ipv4(b"", ihl=15, proto=6, total_length=60)),
        None,
        "net.bad_ip_header_length",
    ),
    "total_below_header": (ethernet(ipv4(tcp(), total_length=12)), None, "net.bad_ip_total_length"),
    "ip_version_7": (ethernet(ipv4(tcp(), version=7)), None, "net.bad_ip_version"),
    "ipv4_cut": (ethernet(ipv4(tcp()))[:30], None, "net.truncated_ip_header"),
    "ipv6_cut": (ethernet(ipv6(tcp()), 0x86DD)[:40], None, "net.truncated_ip_header"),
    "no_ip_header": (ethernet(b""), None, "net.truncated_ip_header"),
    "ethernet_cut": (b"\x01\x02\x03", None, "net.truncated_link_header"),
    "vlan_cut": (ethernet(b"", 0x8100)[:15], None, "net.truncated_link_header"),
    "data_offset_4": (ethernet(ipv4(tcp(data_offset=4))), "tcp", "net.bad_tcp_header_length"),
    "data_offset_beyond": (ethernet(ipv4(tcp(data_offset=15))), "tcp", "net.bad_tcp_header_length"),
    "tcp_cut_by_ip_length": (
        ethernet(ipv4(tcp(), total_length=30)),
        "tcp",
        "net.bad_tcp_header_length",
    ),
    "udp_cut": (ethernet(ipv4(b"\0\1\0", proto=17)), "udp", "net.truncated_udp_header"),
    "ipv6_ext_runs_past_end": (
        ethernet(ipv6(bytes([6, 10]) + b"\0" * 6, nh=60), 0x86DD),
        "ext",
        "net.bad_ipv6_extension",
    ),
    "ipv6_ext_loop": (
        ethernet(ipv6(ipv6_ext(0) * 20, nh=0), 0x86DD),
        "ext",
        "net.bad_ipv6_extension",
    ),
    "ipv6_plen_0": (
        ethernet(ipv6(tcp(), payload_length=0), 0x86DD),
        "ext",
        "net.bad_ip_total_length",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_headers_become_rows(name: str) -> None:
    data, kind, code = MALFORMED[name]
    out, rows = decode(data, n=7)
    assert rows == [(code, 7)]
    if kind is None:
        assert out is None
    else:
        assert isinstance(out, IpPacket) and not out.fragment
        assert out.proto == {"tcp": 6, "udp": 17}.get(kind, out.proto)


def test_tcp_header_cut_by_snaplen() -> None:
    full = ethernet(ipv4(tcp(payload=b"x" * 100)))
    out, rows = decode(full[:44], orig_len=len(full))
    assert (
        isinstance(out, IpPacket) and out.proto == 6 and rows == [("net.truncated_tcp_header", 1)]
    )


def test_rows_carry_frame_and_time() -> None:
    diag = Diagnostics()
    PacketDecoder(diag).decode(frame(ethernet(ipv4(tcp(), ihl=2)), 9, ts_ns=123))
    (row,) = diag.rows
    assert (row.code, row.frame, row.ts_ns, row.layer) == (
        "net.bad_ip_header_length",
        9,
        123,
        "net",
    )
    assert "8 bytes" in row.detail


# --------------------------------------------------------------------------- link types


def test_unsupported_linktype_row_once_per_type() -> None:
    diag = Diagnostics()
    dec = PacketDecoder(diag)
    for i in range(1, 4):
        assert dec.decode(frame(b"\0" * 40, i, linktype=189)) is None
    assert dec.decode(frame(b"\0" * 40, 4, linktype=4242)) is None
    assert [(r.code, r.frame) for r in diag.rows] == [
        ("capture.unsupported_linktype", 1),
        ("capture.unsupported_linktype", 4),
    ]
    assert (
        "LINKTYPE_USB_LINUX (189)" in diag.rows[0].detail and "LINKTYPE 4242" in diag.rows[1].detail
    )
    assert dec.unsupported == {189: 3, 4242: 1}
    assert dec.supports(1) and dec.supports(276) and not dec.supports(189)
    assert {0, 1, 9, 12, 14, 50, 101, 108, 113, 127, 228, 229, 276} <= SUPPORTED_LINKTYPES


def test_deep_vlan_stack() -> None:
    seg, _ = decode(ethernet(ipv4(tcp()), vlans=[(0x8100, i) for i in range(10)]))
    assert isinstance(seg, TcpSegment) and seg.overhead_len == 14 + 40 + 20 + 20
    assert decode(ethernet(ipv4(tcp()), vlans=[(0x8100, i) for i in range(40)]))[0] is None


def test_sll_and_null_overhead() -> None:
    seg, _ = decode(sll(ipv4(tcp(payload=b"abc"))), linktype=113)
    assert isinstance(seg, TcpSegment) and seg.overhead_len == 16 + 40
    seg, _ = decode(null_link(ipv6(tcp(payload=b"abc")), 30, ">"), linktype=0)
    assert isinstance(seg, TcpSegment) and seg.ip_version == 6 and seg.overhead_len == 4 + 60


def test_ip_in_ip_reports_the_inner_packet() -> None:
    inner = ipv4(tcp(payload=b"in"), "192.168.1.1", "192.168.1.2")
    seg, _ = decode(ethernet(ipv4(inner, proto=4)))
    assert isinstance(seg, TcpSegment) and seg.src == bytes([192, 168, 1, 1])
    assert seg.overhead_len == 14 + 20 + 20 + 20


# --------------------------------------------------------------------------- fragments


def _frags(payload: bytes, ident: int, size: int = 1480, proto: int = 6) -> list[bytes]:
    out = []
    for off in range(0, len(payload), size):
        out.append(
            ethernet(
                ipv4(
                    payload[off : off + size],
                    proto=proto,
                    ident=ident,
                    df=False,
                    mf=off + size < len(payload),
                    frag_offset=off,
                )
            )
        )
    return out


def test_reassembled_segment_carries_last_fragment_frame() -> None:
    diag = Diagnostics()
    dec = PacketDecoder(diag)
    seg_bytes = tcp(payload=b"Z" * 4000)
    pieces = _frags(seg_bytes, 77)
    outs = [dec.decode(frame(p, i + 1, ts_ns=i)) for i, p in enumerate(pieces)]
    assert [type(o).__name__ for o in outs] == ["IpPacket", "IpPacket", "TcpSegment"]
    assert all(isinstance(o, IpPacket) and o.fragment for o in outs[:2])
    seg = outs[2]
    assert isinstance(seg, TcpSegment)
    assert (seg.frame, seg.ts_ns, seg.frame_len, seg.seg_len, len(seg.payload)) == (
        3,
        2,
        len(pieces[2]),
        4000,
        4000,
    )
    assert seg.overhead_len == sum(len(p) for p in pieces) - 4000  # every fragment's headers
    dec.finish()
    assert diag.rows == []


def test_ipv6_fragments_with_extension_after_fragment_header() -> None:
    dec = PacketDecoder(Diagnostics())
    body = ipv6_ext(6) + tcp(payload=b"v" * 1500)
    f1 = ethernet(ipv6(ipv6_frag(60, 0, True, 5) + body[:1000], nh=44), 0x86DD)
    f2 = ethernet(ipv6(ipv6_frag(60, 1000, False, 5) + body[1000:], nh=44), 0x86DD)
    assert isinstance(dec.decode(frame(f2, 1)), IpPacket)
    seg = dec.decode(frame(f1, 2))
    assert isinstance(seg, TcpSegment) and (seg.frame, seg.seg_len, seg.ip_version) == (2, 1500, 6)


def test_fragment_cut_by_snaplen_is_not_reassembled() -> None:
    diag = Diagnostics()
    dec = PacketDecoder(diag)
    a, b = _frags(tcp(payload=b"Q" * 2000), 9)
    assert isinstance(dec.decode(frame(a[:100], 1, orig_len=len(a))), IpPacket)
    out = dec.decode(frame(b, 2))
    assert isinstance(out, IpPacket) and out.fragment
    dec.finish()
    assert [(r.code, r.frame) for r in diag.rows] == [("net.ip_fragment_incomplete", 2)]
    assert "unknown size" not in diag.rows[0].detail


def test_without_reassembly_fragments_stay_fragments() -> None:
    dec = PacketDecoder(Diagnostics(), reassemble_fragments=False)
    outs = [dec.decode(frame(p, i + 1)) for i, p in enumerate(_frags(tcp(payload=b"Z" * 3000), 1))]
    assert all(isinstance(o, IpPacket) and o.fragment for o in outs)


def test_fragment_limits_and_timeouts() -> None:
    diag = Diagnostics()
    dec = PacketDecoder(diag, max_fragment_datagrams=2, fragment_timeout_ns=10_000)
    firsts = [_frags(tcp(payload=b"Z" * 2000), ident)[0] for ident in (1, 2, 3)]
    for i, p in enumerate(firsts):
        dec.decode(frame(p, i + 1, ts_ns=i))
    # a third datagram in flight evicts the oldest
    assert [(r.code, r.frame) for r in diag.rows] == [("net.ip_fragment_incomplete", 1)]
    assert "more than 2 datagrams" in diag.rows[0].detail
    # capture time moves on beyond the timeout: the others expire when the next fragment comes
    dec.decode(frame(ethernet(ipv4(tcp())), 4, ts_ns=50_000))
    assert len(diag.rows) == 1
    dec.decode(frame(_frags(tcp(payload=b"Y" * 2000), 4)[0], 5, ts_ns=60_000))
    assert [(r.code, r.frame) for r in diag.rows][1:] == [
        ("net.ip_fragment_incomplete", 2),
        ("net.ip_fragment_incomplete", 3),
    ]
    assert "within 1e-05 s" in diag.rows[1].detail
    dec.finish()  # the fourth datagram never completed either
    assert [(r.code, r.frame) for r in diag.rows][3:] == [("net.ip_fragment_incomplete", 5)]
    assert "the capture ended" in diag.rows[3].detail


def test_fragment_bytes_limit() -> None:
    diag = Diagnostics()
    r = FragmentReassembler(diag, max_bytes=2500)
    key1, key2 = (4, A4, B4, 6, 1), (4, A4, B4, 6, 2)
    assert r.add(key1, 0, True, b"a" * 1480, frame=1, ts_ns=0, frame_len=1514) is None
    assert r.add(key2, 0, True, b"b" * 1480, frame=2, ts_ns=0, frame_len=1514) is None
    assert r.in_flight == 1 and r.bytes_held == 1480
    assert [(x.code, x.frame) for x in diag.rows] == [("net.ip_fragment_incomplete", 1)]
    assert "10.0.0.1 -> 10.0.0.2 id 0x0001 protocol 6" in diag.rows[0].detail
    done = r.add(key2, 1480, False, b"c" * 8, frame=3, ts_ns=1, frame_len=60)
    assert done == (b"b" * 1480 + b"c" * 8, 1574, 2)
    assert r.in_flight == 0 and r.bytes_held == 0


def test_fragment_overlap_and_duplicates() -> None:
    diag = Diagnostics()
    r = FragmentReassembler(diag)
    key = (6, A6, B6, 0xABCDEF)
    assert r.add(key, 0, True, b"x" * 16, frame=1, ts_ns=0, frame_len=100) is None
    assert (
        r.add(key, 0, True, b"x" * 16, frame=2, ts_ns=0, frame_len=100) is None
    )  # identical duplicate: fine
    assert diag.rows == []
    assert (
        r.add(key, 8, True, b"y" * 16, frame=3, ts_ns=0, frame_len=100) is None
    )  # overlap, different bytes
    done = r.add(key, 24, False, b"z" * 8, frame=4, ts_ns=0, frame_len=100)
    assert done is not None and len(done[0]) == 32 and done[2] == 1
    assert [(x.code, x.frame) for x in diag.rows] == [("net.ip_fragment_overlap", 3)]
    assert "IPv6 datagram 2001:db8::1 -> 2001:db8::2 id 0x00abcdef" in diag.rows[0].detail


# ------------------------------------------------------------------ hypothesis: never raises


def _assert_no_crash(linktype: int, data: bytes, orig_extra: int = 0) -> None:
    diag = Diagnostics()
    dec = PacketDecoder(diag)
    out = dec.decode(RawFrame(1, 0, linktype, data, len(data) + orig_extra))
    assert out is None or isinstance(out, (TcpSegment, UdpDatagram, IpPacket))
    dec.finish()
    assert "net.decode_error" not in diag.counts


@pytest.mark.parametrize("linktype", sorted(SUPPORTED_LINKTYPES))
@given(data=st.binary(max_size=300), extra=st.integers(0, 2000))
def test_decode_never_raises_on_random_bytes(linktype: int, data: bytes, extra: int) -> None:
    _assert_no_crash(linktype, data, extra)


_PREFIXES = {
    "ethernet_ipv4": ethernet(ipv4(b"", proto=6)),
    "ethernet_ipv6": ethernet(ipv6(b""), 0x86DD)[:54],
    "sll_ipv4": sll(ipv4(b""))[:36],
}


@given(
    head=st.sampled_from(sorted(_PREFIXES)),
    mutate=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 255)), max_size=6),
    tail=st.binary(max_size=200),
    extra=st.integers(0, 70000),
)
def test_decode_never_raises_on_mutated_headers(
    head: str, mutate: list[tuple[int, int]], tail: bytes, extra: int
) -> None:
    """Valid link + IP headers, random bytes poked in, a random tail: reaches deep into IP/TCP."""
    data = bytearray(_PREFIXES[head] + tail)
    for pos, val in mutate:
        if pos < len(data):
            data[pos] = val
    _assert_no_crash(113 if head.startswith("sll") else 1, bytes(data), extra)


@given(
    chain=st.lists(st.sampled_from([0, 43, 44, 51, 60, 6, 17, 59]), min_size=1, max_size=20),
    tail=st.binary(max_size=64),
)
def test_decode_never_raises_on_ipv6_extension_chains(chain: list[int], tail: bytes) -> None:
    body = b""
    for nxt in chain[1:]:
        body += bytes([nxt]) + bytes([0, 0, 1, 0, 0, 0, 0])
    data = ethernet(ipv6(body + tail, nh=chain[0]), 0x86DD)
    _assert_no_crash(1, data)


@given(
    pieces=st.lists(
        st.tuples(st.integers(0, 400), st.booleans(), st.binary(min_size=0, max_size=64)),
        max_size=12,
    )
)
def test_random_fragments_never_raise(pieces: list[tuple[int, bool, bytes]]) -> None:
    diag = Diagnostics()
    dec = PacketDecoder(diag)
    for i, (off8, more, chunk) in enumerate(pieces):
        dec.decode(
            frame(
                ethernet(ipv4(chunk, proto=6, ident=3, df=False, mf=more, frag_offset=off8 * 8)),
                i + 1,
            )
        )
    dec.finish()
    assert "net.decode_error" not in diag.counts


def test_struct_layout_of_helpers() -> None:
    """Guard for the writers the tests rely on: a 20-byte TCP header with data offset 5."""
    t = tcp()
    assert len(t) == 20 and struct.unpack_from("!H", t, 12)[0] >> 12 == 5
