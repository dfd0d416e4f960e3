"""The decoding layer against tshark 4.0, frame by frame: every corpus capture, and hand-built
edge cases for every supported link type and for malformed IP/TCP/UDP headers.

For each frame we compare frame.number, frame.time_epoch, frame.len, frame.cap_len, the IP
addresses, tcp.srcport/dstport/seq_raw/ack_raw/len/flags and the UDP ports. Where tshark and
pcaptools legitimately differ, the difference must be one of :data:`EXPLAINED` and the tests
name the frames concretely (the corpus has none).
"""

from __future__ import annotations

import ipaddress
import shutil
import struct
from pathlib import Path

import pytest
from conftest import corpus_files
from helpers import (
    eth_tcp4,
    ethernet,
    ipv4,
    ipv6,
    ipv6_ext,
    ipv6_frag,
    null_link,
    pcap_header,
    pcap_record,
    ppp,
    sll,
    sll2,
    tcp,
    udp,
)
from oracle import tshark_fields

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import open_capture
from pcaptools.net import IpPacket, PacketDecoder, TcpSegment, UdpDatagram

FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "frame.len",
    "frame.cap_len",
    "ip.src",
    "ipv6.src",
    "ip.dst",
    "ipv6.dst",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.len",
    "tcp.flags",
    "udp.srcport",
    "udp.dstport",
    "frame.protocols",
)
_TCP = slice(8, 14)
_UDP = slice(14, 16)

#: the only accepted kinds of difference, and why
EXPLAINED = {
    "tcp_header_malformed": (
        "the TCP header is cut off or its data offset is impossible (< 20 or beyond the segment): "
        "pcaptools "
        "reports an IpPacket(proto=6) and a net.bad_tcp_header_length / net.truncated_tcp_header "
        "row, while "
        "tshark still shows the TCP fields it could read (ports, sometimes seq/ack/flags or a "
        "tcp.len)"
    ),
    "ip_header_truncated": (
        "the snaplen cut the IP header: pcaptools decodes nothing (net.truncated_ip_header), "
        "tshark shows "
        "the address fields that happen to be captured"
    ),
    "icmp_error_quote": (
        "an ICMP error quotes the start of the offending packet: tshark decodes the quoted "
        "TCP/UDP header, "
        "pcaptools reports the ICMP packet itself (IpPacket, proto 1 or 58)"
    ),
}


def epoch(ts_ns: int) -> str:
    return f"{ts_ns // 1_000_000_000}.{ts_ns % 1_000_000_000:09d}"


def _layer(values: str, n: int) -> str:
    parts = values.split(",") if values else []
    return parts[n] if n < len(parts) else ""


def tshark_view(row: list[str]) -> tuple[list[str], bool]:
    """tshark's row reduced to one IP layer (the innermost, as pcaptools decodes tunnels; or,
    for ICMP errors, the outer one) and one TCP/UDP layer. Returns (row, has_icmp_quote)."""
    protos = row[16].split(":")
    out = row[:16]
    icmp = "icmp" in protos or "icmpv6" in protos
    ips = [p for p in protos if p in ("ip", "ipv6")]
    if icmp:
        cut = protos.index("icmp" if "icmp" in protos else "icmpv6")
        ips = [p for p in protos[:cut] if p in ("ip", "ipv6")]
    if ips:
        kind = ips[-1]
        idx = ips.count(kind) - 1
        v4 = kind == "ip"
        out[4] = _layer(row[4], idx) if v4 else ""
        out[6] = _layer(row[6], idx) if v4 else ""
        out[5] = "" if v4 else _layer(row[5], idx)
        out[7] = "" if v4 else _layer(row[7], idx)
    for i in range(8, 16):
        out[i] = _layer(row[i], 0)
    if out[13]:
        out[13] = f"0x{int(out[13], 16) & 0x1FF:03x}"  # pcaptools keeps the 9 flag bits
    quote = icmp and any(out[i] for i in range(8, 16))
    return out, quote


def our_rows(path: Path) -> tuple[dict[int, list[str]], dict[int, object], Diagnostics]:
    diag = Diagnostics()
    dec = PacketDecoder(diag)
    rows: dict[int, list[str]] = {}
    results: dict[int, object] = {}
    with open_capture(path, diag) as r:
        for raw in r.frames():
            p = dec.decode(raw)
            results[raw.frame] = p
            row = [str(raw.frame), epoch(raw.ts_ns), str(raw.orig_len), str(len(raw.data))] + [
                ""
            ] * 12
            if p is not None:
                src, dst = str(ipaddress.ip_address(p.src)), str(ipaddress.ip_address(p.dst))
                if p.ip_version == 4:
                    row[4], row[6] = src, dst
                else:
                    row[5], row[7] = src, dst
            if isinstance(p, TcpSegment):
                row[_TCP] = [
                    str(p.sport),
                    str(p.dport),
                    str(p.seq),
                    str(p.ack),
                    str(p.seg_len),
                    f"0x{p.flags:03x}",
                ]
            elif isinstance(p, UdpDatagram):
                row[_UDP] = [str(p.sport), str(p.dport)]
            rows[raw.frame] = row
    dec.finish()
    return rows, results, diag


def compare(path: Path) -> tuple[int, dict[str, list[int]]]:
    """Compare every frame; returns (frames compared, rule -> frames explained by it).
    Fails on any difference that no rule of EXPLAINED covers."""
    ours, results, diag = our_rows(path)
    codes_by_frame: dict[int, set[str]] = {}
    for a in diag.rows:
        if a.frame is not None:
            codes_by_frame.setdefault(a.frame, set()).add(a.code)
    explained: dict[str, list[int]] = {}
    unexplained = []
    tshark_rows = tshark_fields(path, FIELDS)
    assert [int(r[0]) for r in tshark_rows] == sorted(ours), (
        "tshark and pcaptools see different frames"
    )
    for trow in tshark_rows:
        n = int(trow[0])
        want, quote = tshark_view(trow)
        got = ours[n]
        if got == want:
            continue
        res = results[n]
        codes = codes_by_frame.get(n, set())
        rule = None
        if (
            isinstance(res, IpPacket)
            and res.proto == 6
            and codes & {"net.bad_tcp_header_length", "net.truncated_tcp_header"}
            and got[:8] == want[:8]
            and not any(got[8:16])
        ):
            rule = "tcp_header_malformed"
        elif (
            res is None
            and "net.truncated_ip_header" in codes
            and got[:4] == want[:4]
            and not any(got[4:])
        ):
            rule = "ip_header_truncated"
        elif (
            quote
            and isinstance(res, IpPacket)
            and res.proto in (1, 58)
            and got[:8] == want[:8]
            and not any(got[8:16])
        ):
            rule = "icmp_error_quote"
        if rule is None:
            unexplained.append((n, want, got))
        else:
            explained.setdefault(rule, []).append(n)
    assert not unexplained, "\n".join(
        f"frame {n}:\n  tshark {w}\n  ours   {g}" for n, w, g in unexplained[:10]
    )
    return len(tshark_rows), explained


# --------------------------------------------------------------------------- corpus

pytestmark = [pytest.mark.tshark]


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")


#: (TCP, UDP) frames per corpus capture, as ``tshark -Y tcp`` / ``-Y udp`` count them
TRANSPORT_FRAMES = {
    "raw_ip.pcap": (92, 8),
    "zerortt.pcap": (0, 100),
    "twovlan.pcap": (6, 0),
    "suricata-decode-sll2-01-input.pcap": (5, 0),
    "many_interfaces-1.pcapng": (32, 32),
    "truncated-header.pcap": (24, 0),
    "http_ip4and6.pcapng": (20, 0),
}


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_matches_tshark(path: Path) -> None:
    n, explained = compare(path)
    assert n > 0
    assert explained == {}, "corpus captures need no exceptions"
    if path.name in TRANSPORT_FRAMES:
        _, results, _ = our_rows(path)
        assert (
            sum(isinstance(p, TcpSegment) for p in results.values()),
            sum(isinstance(p, UdpDatagram) for p in results.values()),
        ) == TRANSPORT_FRAMES[path.name]


@pytest.mark.corpus
def test_corpus_total_frames_compared() -> None:
    files = corpus_files()
    if not files:
        pytest.skip("corpus absent")
    assert sum(compare(p)[0] for p in files) == 4107


@pytest.mark.corpus
def test_snaplen_cut_tcp(corpus: Path) -> None:
    """truncated-header.pcap (snaplen 68): tcp.len from the IP lengths, payload as captured."""
    rows, results, diag = our_rows(corpus / "truncated-header.pcap")
    segs = [p for p in results.values() if isinstance(p, TcpSegment)]
    assert len(segs) == 24
    first = segs[0]
    # an ECN-setup SYN whose 20 option bytes were cut to 14 by the snaplen
    assert (first.frame, first.flags, first.header_len, len(first.options), first.seg_len) == (
        1,
        0x0C2,
        40,
        14,
        0,
    )
    cut = [p for p in segs if len(p.payload) < p.seg_len]
    assert len(cut) == 11
    assert all(len(s.payload) == int(rows[s.frame][3]) - 14 - 20 - s.header_len for s in cut)
    assert {int(rows[s.frame][3]) for s in cut} == {54}  # headers only: no payload byte captured
    assert all(s.overhead_len == s.frame_len - s.seg_len for s in segs)
    codes = {a.code for a in diag.rows}
    assert codes == {"net.truncated_tcp_header", "net.snaplen_truncated_payload"}
    assert [a.frame for a in diag.rows if a.code == "net.truncated_tcp_header"] == [1]


# --------------------------------------------------------------------------- hand-built edge cases

S4, D4 = "10.0.0.1", "10.0.0.2"
S6, D6 = "2001:db8::1", "2001:db8::2"
P = b"hello world, this is tcp payload"


def t4(**kw: object) -> bytes:
    return tcp(src=S4, dst=D4, **kw)  # type: ignore[arg-type]


def t6(**kw: object) -> bytes:
    return tcp(src=S6, dst=D6, **kw)  # type: ignore[arg-type]


IP4 = ipv4(t4(payload=P))
IP6 = ipv6(t6(payload=P))


def _ethernet_cases() -> dict[str, bytes]:
    e4 = ethernet
    c = {
        "ipv4_options": e4(ipv4(t4(payload=P), opts=b"\x01\x01\x01\x00")),
        "ihl_3": e4(ipv4(t4(payload=P), ihl=3)),
        "ihl_15": e4(ipv4(t4(payload=P), ihl=15)),
        "total_length_too_big": e4(ipv4(t4(payload=P), total_length=2000)),
        "total_length_zero_tso": e4(ipv4(t4(payload=P), total_length=0)),
        "total_length_below_ihl": e4(ipv4(t4(payload=P), total_length=10)),
        "total_length_inside_tcp_header": e4(ipv4(t4(payload=P), total_length=30)),
        "total_length_short_payload": e4(ipv4(t4(payload=P), total_length=50)),
        "data_offset_3": e4(ipv4(t4(payload=P, data_offset=3))),
        "data_offset_15_short": e4(ipv4(t4(payload=P, data_offset=15))),
        "data_offset_15": e4(ipv4(t4(payload=b"x" * 100, data_offset=15))),
        "tcp_10_bytes": e4(ipv4(t4(payload=P)[:10], total_length=30)),
        "ethernet_padding": e4(ipv4(t4(flags=0x10))) + b"\0" * 6,
        "tcp_options": e4(ipv4(t4(flags=0x002, opts=b"\x02\x04\x05\xb4\x01\x03\x03\x07\x04\x02"))),
        "tcp_all_flags": e4(ipv4(t4(flags=0x1FF, payload=P))),
        "udp_length_too_big": e4(ipv4(udp(1, 2, b"abc", length=100), proto=17)),
        "udp_length_below_8": e4(ipv4(udp(1, 2, b"abcdef", length=3), proto=17)),
        "udp_3_bytes": e4(ipv4(b"\0\1\0", proto=17)),
        "ip_version_5": e4(ipv4(t4(), version=5)),
        "ipv4_15_bytes": e4(ipv4(t4())[:15]),
        "vlan_88a8_8100": ethernet(IP4, vlans=[(0x88A8, 10), (0x8100, 20)]),
        "vlan_9100_8100": ethernet(IP4, vlans=[(0x9100, 10), (0x8100, 20)]),
        "vlan_x3": ethernet(IP4, vlans=[(0x8100, 10), (0x8100, 20), (0x8100, 30)]),
        "vlan_ipv6": ethernet(IP6, 0x86DD, vlans=[(0x8100, 5)]),
        "pppoe": ethernet(
            b"\x11\x00\x00\x01" + struct.pack("!H", len(IP4) + 2) + b"\x00\x21" + IP4, 0x8864
        ),
        "mpls_2_labels": ethernet(b"\x00\x01\x00\x40" + b"\x00\x02\x01\x40" + IP4, 0x8847),
        "llc_snap": ethernet(b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + IP4, len(IP4) + 8),
        "ipv6_hbh_dst_routing": ethernet(
            ipv6(ipv6_ext(60) + ipv6_ext(43) + ipv6_ext(6) + t6(payload=P), nh=0), 0x86DD
        ),
        "ipv6_ah": ethernet(ipv6(bytes([6, 4, 0, 0]) + b"\0" * 20 + t6(payload=P), nh=51), 0x86DD),
        "ipv6_payload_length_0": ethernet(ipv6(t6(payload=P), payload_length=0), 0x86DD),
        "ipv6_payload_length_too_big": ethernet(ipv6(t6(payload=P), payload_length=1000), 0x86DD),
        "ipv6_20_extension_headers": ethernet(ipv6(ipv6_ext(0) * 20, nh=0), 0x86DD),
        "ipv6_extension_cut": ethernet(ipv6(bytes([6, 10]) + b"\0" * 6, nh=60), 0x86DD),
        "ipv6_udp": ethernet(ipv6(udp(5353, 5353, b"mdns"), nh=17), 0x86DD),
        "ip_in_ip": ethernet(ipv4(ipv4(t4(payload=P), "192.168.0.1", "192.168.0.2"), proto=4)),
        "ipv6_in_ipv4": ethernet(ipv4(ipv6(t6(payload=P)), proto=41)),
        "gre": ethernet(
            ipv4(b"\x00\x00\x08\x00" + ipv4(t4(payload=P), "172.16.0.1", "172.16.0.2"), proto=47)
        ),
        "gre_with_key": ethernet(
            ipv4(
                b"\x20\x00\x08\x00\0\0\0\x07" + ipv4(t4(payload=P), "172.16.0.1", "172.16.0.2"),
                proto=47,
            )
        ),
        "icmp_error_quoting_tcp": ethernet(
            ipv4(
                b"\x03\x03\x00\x00\x00\x00\x00\x00" + ipv4(t4(payload=P))[:28],
                proto=1,
                src="10.0.0.9",
            )
        ),
        "arp": ethernet(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\0" * 20, 0x0806),
        "empty": b"",
        "ethernet_10_bytes": b"\x00" * 10,
    }
    return c


ETH_CASES = _ethernet_cases()
ETH_EXPECTED_EXCEPTIONS = {
    "tcp_header_malformed": [
        "ihl_15",
        "total_length_inside_tcp_header",
        "data_offset_3",
        "data_offset_15_short",
        "tcp_10_bytes",
    ],
    "icmp_error_quote": ["icmp_error_quoting_tcp"],
}


def _write_pcap(
    path: Path,
    linktype: int,
    packets: list[bytes],
    snaplen: int = 262144,
    orig: list[int] | None = None,
) -> Path:
    with open(path, "wb") as f:
        f.write(pcap_header(linktype, snaplen))
        for i, p in enumerate(packets):
            f.write(
                pcap_record((i + 1) * 1_000_000_000, p, orig_len=None if orig is None else orig[i])
            )
    return path


def test_ethernet_edge_cases_match_tshark(tmp_path: Path) -> None:
    names = list(ETH_CASES)
    path = _write_pcap(tmp_path / "eth.pcap", 1, list(ETH_CASES.values()))
    n, explained = compare(path)
    assert n == len(names)
    assert {
        rule: [names[f - 1] for f in frames] for rule, frames in explained.items()
    } == ETH_EXPECTED_EXCEPTIONS


def test_snaplen_edge_cases_match_tshark(tmp_path: Path) -> None:
    full = [
        ethernet(ipv4(t4(payload=b"y" * 500))),
        ethernet(ipv4(t4(payload=b"y" * 500, opts=b"\x02\x04\x05\xb4" * 3))),
        ethernet(ipv4(t4(payload=b"y" * 500))),
        ethernet(ipv4(t4(payload=b"y" * 500), opts=b"\x01" * 8)),
    ]
    cuts = [60, 40, 20, 30]
    path = _write_pcap(
        tmp_path / "snap.pcap",
        1,
        [p[:c] for p, c in zip(full, cuts, strict=True)],
        snaplen=60,
        orig=[len(p) for p in full],
    )
    n, explained = compare(path)
    assert n == 4
    assert explained == {"tcp_header_malformed": [2], "ip_header_truncated": [4]}


LINK_CASES: dict[str, tuple[int, list[bytes]]] = {
    "sll": (
        113,
        [
            sll(IP4),
            sll(IP6, 0x86DD),
            sll(IP4, 0x8100)[:14],
            sll(struct.pack("!HH", 0, 0x0800) + IP4, 0x8100),
        ],
    ),
    "sll2": (276, [sll2(IP4), sll2(IP6, 0x86DD)]),
    "null": (
        0,
        [
            null_link(IP4, 2, "<"),
            null_link(IP4, 2, ">"),
            null_link(IP6, 24, "<"),
            null_link(IP6, 28, ">"),
            null_link(IP6, 30, "<"),
            null_link(IP6, 10, "<"),
            null_link(IP4, 7),
        ],
    ),
    "loop": (108, [null_link(IP4, 2, ">"), null_link(IP6, 24, ">"), null_link(IP4, 2, "<")]),
    "ppp": (
        9,
        [
            ppp(IP4),
            ppp(IP4, hdlc=False),
            b"\xff\x03\x21" + IP4,
            ppp(IP6, 0x57),
            b"\x0f\x00\x08\x00" + IP4,
            ppp(b"\xc0\x21", 0xC021),
        ],
    ),
    "ppp_hdlc": (50, [ppp(IP4), ppp(IP6, 0x57)]),
    "c_hdlc": (104, [b"\x0f\x00\x08\x00" + IP4, b"\x8f\x00\x86\xdd" + IP6]),
    "raw": (101, [IP4, IP6, b"\x50" + IP4[1:]]),
    "raw_12": (12, [IP4, IP6]),
    "raw_14": (14, [IP4, IP6]),
    "ipv4": (228, [IP4]),
    "ipv6": (229, [IP6]),
    "pflog": (117, [bytes([61, 2]) + b"\0" * 62 + IP4, bytes([61, 24]) + b"\0" * 62 + IP6]),
    "nflog": (
        239,
        [
            bytes([2, 0, 0, 0])
            + struct.pack("<HH", 8, 1)
            + b"\0" * 4
            + struct.pack("<HH", 4 + len(IP4), 9)
            + IP4
        ],
    ),
    "radiotap": (
        127,
        [
            struct.pack("<BBHI", 0, 0, 8, 0)
            + b"\x08\x01"
            + b"\0" * 22
            + b"\xaa\xaa\x03\x00\x00\x00\x08\x00"
            + IP4,
            struct.pack("<BBHI", 0, 0, 8, 0)
            + b"\x88\x01"
            + b"\0" * 24
            + b"\xaa\xaa\x03\x00\x00\x00\x08\x00"
            + IP4,
            struct.pack("<BBHI", 0, 0, 8, 0)
            + b"\x08\x41"
            + b"\0" * 22
            + b"\xaa\xaa\x03\x00\x00\x00\x08\x00"
            + IP4,
            struct.pack("<BBHIB", 0, 0, 9, 2, 0x20)
            + b"\x88\x01"
            + b"\0" * 24
            + b"\0\0"
            + b"\xaa\xaa\x03\x00\x00\x00\x08\x00"
            + IP4,
        ],
    ),
    "ieee802_11": (105, [b"\x08\x02" + b"\0" * 22 + b"\xaa\xaa\x03\x00\x00\x00\x86\xdd" + IP6]),
    "ppi": (
        192,
        [
            struct.pack("<BBHI", 0, 0, 8, 105)
            + b"\x08\x01"
            + b"\0" * 22
            + b"\xaa\xaa\x03\x00\x00\x00\x08\x00"
            + IP4
        ],
    ),
    "ppp_ether": (51, [b"\x11\x00\x00\x01" + struct.pack("!H", len(IP4) + 2) + b"\x00\x21" + IP4]),
    "usb_unsupported": (189, [b"\0" * 64]),
}


@pytest.mark.parametrize("name", list(LINK_CASES))
def test_link_types_match_tshark(tmp_path: Path, name: str) -> None:
    linktype, packets = LINK_CASES[name]
    n, explained = compare(_write_pcap(tmp_path / f"{name}.pcap", linktype, packets))
    assert (n, explained) == (len(packets), {})


def test_fragments_match_tshark(tmp_path: Path) -> None:
    """IPv4/IPv6 fragments in order, out of order, overlapping, incomplete: the transport appears
    on the frame that completes the datagram, as in tshark."""
    big = t4(payload=b"z" * 3000)

    def frag(off: int, more: bool, chunk: bytes, ident: int = 7, proto: int = 6) -> bytes:
        return ethernet(ipv4(chunk, proto=proto, ident=ident, df=False, mf=more, frag_offset=off))

    u = udp(5000, 53, b"d" * 2000)
    b6 = t6(payload=b"w" * 2000)
    pkts = [
        frag(0, True, big[:1480]),
        frag(1480, True, big[1480:2960]),
        frag(2960, False, big[2960:]),  # 1-3
        frag(1480, True, big[1480:2960], 8),
        frag(2960, False, big[2960:], 8),
        frag(0, True, big[:1480], 8),  # 4-6
        frag(0, True, big[:1480], 9),
        frag(1472, False, b"Q" * 8 + big[1480:], 9),  # 7-8: overlap
        frag(0, True, big[:1480], 10),  # 9: never completed
        frag(0, True, u[:1000], 11, 17),
        frag(1000, False, u[1000:], 11, 17),  # 10-11: UDP
        ethernet(ipv6(ipv6_frag(6, 0, True, 99) + b6[:1200], nh=44), 0x86DD),  # 12-13: IPv6
        ethernet(ipv6(ipv6_frag(6, 1200, False, 99) + b6[1200:], nh=44), 0x86DD),
        ethernet(
            ipv6(ipv6_frag(6, 0, False, 98) + b6[:100], nh=44, payload_length=108), 0x86DD
        ),  # 14: atomic
    ]
    path = _write_pcap(tmp_path / "frag.pcap", 1, pkts)
    n, explained = compare(path)
    assert (n, explained) == (14, {})
    _, results, diag = our_rows(path)
    tcp_frames = [f for f, p in results.items() if isinstance(p, TcpSegment)]
    assert tcp_frames == [3, 6, 8, 13, 14]
    assert [f for f, p in results.items() if isinstance(p, UdpDatagram)] == [11]
    assert [f for f, p in results.items() if isinstance(p, IpPacket)] == [1, 2, 4, 5, 7, 9, 10, 12]
    assert all(p.fragment for p in results.values() if isinstance(p, IpPacket))
    assert [(a.code, a.frame) for a in diag.rows if a.code.startswith("net.ip_fragment")] == [
        ("net.ip_fragment_overlap", 8),
        ("net.ip_fragment_incomplete", 9),
    ]


def test_jumbogram_matches_tshark(tmp_path: Path) -> None:
    t = t6(payload=b"j" * 70000)
    hbh = bytes([6, 0, 0xC2, 4]) + struct.pack("!I", 8 + len(t))
    small = bytes([6, 0, 0xC2, 4]) + struct.pack("!I", 8 + len(t6(payload=P)))
    pkts = [
        ethernet(ipv6(hbh + t, nh=0, payload_length=0), 0x86DD),
        ethernet(ipv6(small + t6(payload=P), nh=0, payload_length=0), 0x86DD),
    ]
    path = _write_pcap(tmp_path / "jumbo.pcap", 1, pkts)
    assert compare(path) == (2, {})
    _, results, _ = our_rows(path)
    seg = results[1]
    assert isinstance(seg, TcpSegment) and seg.seg_len == 70000
    assert isinstance(results[2], IpPacket)  # a jumbo length below 65536 is invalid: no payload


def test_eth_tcp4_helper_is_a_valid_packet(tmp_path: Path) -> None:
    path = _write_pcap(tmp_path / "h.pcap", 1, [eth_tcp4(b"GET / HTTP/1.1\r\n\r\n")])
    assert compare(path) == (1, {})
