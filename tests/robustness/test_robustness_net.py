"""Bad-input catalogue, packet level: headers cut by the snaplen, lying IP header and total
lengths, lying TCP data offsets, a real transfer whose sequence numbers cross 2^32.

Damaged packets come from a second host beside the good connection: each must give exactly
its warning row, and the good connection's rows must not change."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import pcaptools
from tests.conftest import CAPTURES
from tests.helpers import (
    ethernet,
    ipv4,
    ipv6,
    ipv6_ext,
    pcap_header,
    pcap_record,
    tcp,
)
from tests.robustness._build import (
    assert_good_unchanged,
    bounded,
    codes,
    good_conv,
    load_bytes,
    pcap,
    rows,
)

BAD_HOST = "10.0.0.3"
_SEG = tcp(41000, 8080, 1, 0, 0x18, b"hello world", src=BAD_HOST, dst="10.0.0.2")
_FRAME = ethernet(ipv4(_SEG, BAD_HOST, "10.0.0.2"))
_OPTS = tcp(41000, 8080, 1, 0, 0x18, b"x", opts=b"\x01" * 12, src=BAD_HOST, dst="10.0.0.2")


def _v4(seg: bytes, **kw: object) -> bytes:
    return ethernet(ipv4(seg, BAD_HOST, "10.0.0.2", **kw))  # type: ignore[arg-type]


#: name -> (frame bytes, orig_len or None, expected warning codes, TCP connection made?)
CASES: dict[str, tuple[bytes, int | None, list[str], bool]] = {
    "cut-in-ip-header": (_FRAME[: 14 + 10], len(_FRAME), ["net.truncated_ip_header"], False),
    "cut-in-tcp-header": (_FRAME[: 14 + 20 + 12], len(_FRAME), ["net.truncated_tcp_header"], False),
    "cut-in-tcp-options": (
        _v4(_OPTS)[: 14 + 20 + 24],
        100,
        ["net.truncated_tcp_header", "tcp.capture_started_mid_stream", "tcp.reassembly_gap"],
        True,
    ),
    "ihl-3": (_v4(_SEG, ihl=3), None, ["net.bad_ip_header_length"], False),
    "ihl-15-short-packet": (_v4(_SEG, ihl=15)[: 14 + 40], None, ["net.bad_ip_total_length"], False),
    "total-length-below-header": (
        _v4(_SEG, total_length=12),
        None,
        ["net.bad_ip_total_length"],
        False,
    ),
    "total-length-above-frame": (
        _v4(_SEG, total_length=1400),
        None,
        ["net.bad_ip_total_length", "tcp.capture_started_mid_stream"],
        True,
    ),
    "tcp-offset-3": (
        _v4(tcp(41000, 8080, data_offset=3, payload=b"abc")),
        None,
        ["net.bad_tcp_header_length"],
        False,
    ),
    "tcp-offset-15": (
        _v4(tcp(41000, 8080, data_offset=15, payload=b"abc")),
        None,
        ["net.bad_tcp_header_length"],
        False,
    ),
    "ip-version-5": (_v4(_SEG, version=5), None, ["net.bad_ip_version"], False),
    "ipv6-payload-length-lie": (
        ethernet(ipv6(tcp(41000, 8080, 1, 0, 0x18, b"abc"), payload_length=5000), 0x86DD),
        None,
        ["net.bad_ip_total_length", "tcp.capture_started_mid_stream"],
        True,
    ),
    "ipv6-extension-chain-of-20": (
        ethernet(ipv6(ipv6_ext(0) * 20 + tcp(41000, 8080), nh=0), 0x86DD),
        None,
        ["net.bad_ipv6_extension"],
        False,
    ),
    "ethernet-cut": (_FRAME[:9], len(_FRAME), ["net.truncated_link_header"], False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_damaged_packet_beside_a_good_connection(tmp_path: Path, name: str) -> None:
    frame, orig, expected, makes_conn = CASES[name]
    good = good_conv()
    recs: list[tuple[int, bytes, int | None]] = [(ts, f, None) for ts, f in good.packets]
    recs.insert(5, (good.packets[4][0] + 1, frame, orig))  # between good frames 5 and 6
    data = pcap_header(nsec=True) + b"".join(pcap_record(ts, f, o, nsec=True) for ts, f, o in recs)
    cap = load_bytes(tmp_path, data)
    assert codes(cap) == expected
    assert cap.warnings["frame"].iloc[0] == 6
    assert cap.summary.frames == 19
    assert len(cap.connections) == (2 if makes_conn else 1)
    assert_good_unchanged(cap, load_bytes(tmp_path, pcap(good), "ref.pcap"))


def test_all_damaged_packets_together_many_times(tmp_path: Path) -> None:
    """Every damaged packet 500 times over: rows are capped per code, counts are exact."""
    good = good_conv()
    recs = [(ts, f, None) for ts, f in good.packets]
    bad = [(good.packets[4][0] + 1, f, o) for f, o, _, _ in CASES.values()] * 500
    data = pcap_header(nsec=True) + b"".join(
        pcap_record(ts, f, o, nsec=True) for ts, f, o in recs[:5] + bad + recs[5:]
    )
    cap, _ = bounded(lambda: load_bytes(tmp_path, data, max_warnings_per_code=50))
    counts = cap.summary.extra["warning_counts"]
    assert isinstance(counts, dict)
    assert counts["net.bad_ip_total_length"] == 4 * 500
    assert counts["net.truncated_link_header"] == 500
    assert (cap.warnings["code"].value_counts() <= 51).all()
    assert_good_unchanged(cap, load_bytes(tmp_path, pcap(good), "ref.pcap"))


# --------------------------------------------------------------------------- seq wraparound


def _rewrite_seq(data: bytes, isns: dict[tuple[bytes, int], int]) -> tuple[bytes, int]:
    """Shift every TCP sequence/ack number (and SACK edges) of an Ethernet/IPv4 pcap so that
    the direction (source address, source port) starts at ``isns[...]`` instead of its SYN's
    ISN. Checksums are left stale (pcaptools, like tshark by default, does not check them).
    Returns the new file and the number of segments whose sequence range crosses 2^32."""
    out = bytearray(data)
    off, first_isn, crossing = 24, {}, 0
    while off + 16 <= len(out):
        (incl,) = struct.unpack_from("<I", out, off + 8)
        p = off + 16
        off += 16 + incl
        if struct.unpack_from("!H", out, p + 12)[0] != 0x0800 or out[p + 23] != 6:
            continue
        ip = p + 14
        t = ip + (out[ip] & 0xF) * 4
        src = bytes(out[ip + 12 : ip + 16])
        dst = bytes(out[ip + 16 : ip + 20])
        sport, dport, seq, ack = struct.unpack_from("!HHII", out, t)
        flags = out[t + 13]
        hlen = (out[t + 12] >> 4) * 4
        me, peer = (src, sport), (dst, dport)
        if flags & 0x02 and me not in first_isn:
            first_isn[me] = seq
        shift = (isns[me] - first_isn[me]) % 2**32
        new_seq = (seq + shift) % 2**32
        struct.pack_into("!I", out, t + 4, new_seq)
        paylen = struct.unpack_from("!H", out, ip + 2)[0] - (t - ip) - hlen
        if new_seq + paylen > 2**32:
            crossing += 1
        if flags & 0x10 and peer in first_isn:
            pshift = (isns[peer] - first_isn[peer]) % 2**32
            struct.pack_into("!I", out, t + 8, (ack + pshift) % 2**32)
            o = t + 20
            while o < t + hlen:
                kind = out[o]
                if kind == 0:
                    break
                if kind == 1:
                    o += 1
                    continue
                ln = out[o + 1]
                if kind == 5:  # SACK: edges are the peer's sequence numbers
                    for e in range(o + 2, o + ln, 4):
                        (edge,) = struct.unpack_from("!I", out, e)
                        struct.pack_into("!I", out, e, (edge + pshift) % 2**32)
                o += max(ln, 2)
    return bytes(out), crossing


def test_transfer_crossing_2_to_the_32(tmp_path: Path) -> None:
    """The lossy 300 KB download (and 64 KB upload) of a shipped capture, rewritten so both
    directions' sequence numbers wrap in mid-transfer, retransmissions and SACKs included:
    every table is the same as for the original."""
    src = CAPTURES / "http1-lossy.pcap"
    if not src.is_file():
        pytest.skip("captures/http1-lossy.pcap is absent")
    orig = pcaptools.load(src)
    conns = orig.connections
    isns = {}
    for _, c in conns.iterrows():
        cli = bytes(int(x) for x in str(c["client_addr"]).split("."))
        srv = bytes(int(x) for x in str(c["server_addr"]).split("."))
        isns[(cli, int(c["client_port"]))] = 2**32 - 20_000
        isns[(srv, int(c["server_port"]))] = 2**32 - 100_000
    data, crossing = _rewrite_seq(src.read_bytes(), isns)
    assert crossing >= 2  # at least one segment per direction straddles the wrap
    cap = load_bytes(tmp_path, data, "wrapped.pcap")
    assert cap.summary.frames == orig.summary.frames > 400
    assert len(cap.http_requests) == len(orig.http_requests) >= 2
    for name in ("connections", "tcp_handshakes", "tcp_events", "http_requests", "warnings",
                 "tcp_sack_blocks"):
        assert rows(cap.tables[name]) == rows(orig.tables[name]), name
    assert len(cap.tcp_sack_blocks) == 176  # relative edges, as tshark shows them
    from pcaptools.analyses.slow import connection_series

    assert rows(connection_series(cap)) == rows(connection_series(orig))
    # per packet: relative numbers identical, raw ones moved
    raw = ("seq_raw", "ack_raw")
    assert rows(cap.packets, raw) == rows(orig.packets, raw)
    assert (cap.packets["seq_raw"] >= 2**32 - 100_000).any() and (
        cap.packets["seq_raw"] < 1000
    ).any()
    assert len(cap.tcp_events) == len(orig.tcp_events) > 50
