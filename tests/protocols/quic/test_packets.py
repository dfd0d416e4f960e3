"""QUIC headers: long and short, coalesced packets, Version Negotiation, Retry, v2 type bits,
malformed headers, the probe; and the observer never raises on arbitrary datagrams."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.net.packet import UdpDatagram
from pcaptools.protocols.quic import QuicTracker, looks_like_quic, split_datagram
from pcaptools.protocols.quic.packets import (
    VERSION_1,
    VERSION_2,
    long_type_name,
    read_varint,
    version_name,
)

DCID = bytes.fromhex("0102030405060708")
SCID = bytes.fromhex("aabbcc")


def _long(first: int, version: int, body: bytes, *, dcid: bytes = DCID, scid: bytes = SCID,
          token: bytes | None = b"") -> bytes:
    head = bytes([first]) + version.to_bytes(4, "big") + bytes([len(dcid)]) + dcid
    head += bytes([len(scid)]) + scid
    if token is not None:
        head += bytes([len(token)]) + token
    n = len(body)
    return head + bytes([0x40 | (n >> 8), n & 0xFF]) + body


def test_varints_rfc9000_a1() -> None:
    assert read_varint(bytes.fromhex("c2197c5eff14e88c"), 0) == (151288809941952652, 8)
    assert read_varint(bytes.fromhex("9d7f3e7d"), 0) == (494878333, 4)
    assert read_varint(bytes.fromhex("7bbd"), 0) == (15293, 2)
    assert read_varint(bytes.fromhex("25"), 0) == (37, 1)


def test_type_bits_of_v1_and_v2() -> None:
    assert [long_type_name(0xC0 | t << 4, VERSION_1) for t in range(4)] == [
        "initial", "0rtt", "handshake", "retry"]
    assert [long_type_name(0xC0 | t << 4, VERSION_2) for t in range(4)] == [
        "retry", "initial", "0rtt", "handshake"]
    assert long_type_name(0xC0, 0) == "version_negotiation"
    assert long_type_name(0xC0, 0x51303436) == "unknown"  # gQUIC Q046
    assert [version_name(v) for v in (1, VERSION_2, 0, 0xFF00001D, 0x51303436)] == [
        "1", "2", "negotiation", "draft-29", "0x51303436"]


def test_coalesced_initial_handshake_and_short_header() -> None:
    initial = _long(0xC0, VERSION_1, b"\x00" * 30)
    handshake = _long(0xE0, VERSION_1, b"\x11" * 25, token=None)
    short = bytes([0x40]) + SCID + b"\x22" * 30
    pkts, error = split_datagram(initial + handshake + short, [SCID, b"\xaa"])
    assert error is None
    assert [(p.packet_type, p.long, p.start, p.end) for p in pkts] == [
        ("initial", True, 0, len(initial)),
        ("handshake", True, len(initial), len(initial) + len(handshake)),
        ("1rtt", False, len(initial) + len(handshake), len(initial + handshake + short)),
    ]
    assert pkts[0].dcid == DCID and pkts[0].scid == SCID and pkts[0].length == 30
    assert pkts[2].dcid == SCID  # the longest known connection ID that matches
    assert split_datagram(short)[0][0].dcid is None  # not known: not guessed


def test_padding_after_a_packet_is_no_packet() -> None:
    initial = _long(0xC0, VERSION_1, b"\x00" * 30)
    pkts, error = split_datagram(initial + b"\x00" * 900)
    assert error is None and [p.packet_type for p in pkts] == ["initial"]


def test_version_negotiation_and_retry() -> None:
    vn = bytes([0x80]) + b"\0\0\0\0" + bytes([3]) + SCID + bytes([8]) + DCID
    vn += VERSION_1.to_bytes(4, "big") + VERSION_2.to_bytes(4, "big")
    (p,), error = split_datagram(vn)
    assert error is None and p.packet_type == "version_negotiation"
    assert p.versions == (VERSION_1, VERSION_2) and p.dcid == SCID and p.scid == DCID
    retry = bytes([0xF0]) + VERSION_1.to_bytes(4, "big") + bytes([3]) + SCID + bytes([4])
    retry += b"NEWC" + b"token!" + b"\x99" * 16
    (p,), error = split_datagram(retry)
    assert error is None and p.packet_type == "retry"
    assert (p.scid, p.token, p.length) == (b"NEWC", b"token!", None)
    v2_retry = bytes([0xC0]) + retry[1:]
    v2_retry = v2_retry[:1] + VERSION_2.to_bytes(4, "big") + v2_retry[5:]
    assert split_datagram(v2_retry)[0][0].packet_type == "retry"


def test_malformed_headers_are_reported_not_raised() -> None:
    good = _long(0xC0, VERSION_1, b"\x00" * 30)
    cut = good[:-5]
    pkts, error = split_datagram(good + cut)
    assert [p.packet_type for p in pkts] == ["initial"]
    assert error is not None and "beyond the datagram" in error
    long_cid = bytes([0xC0]) + VERSION_1.to_bytes(4, "big") + bytes([21]) + b"x" * 40
    assert split_datagram(long_cid)[1] == (
        "at byte 0: destination connection ID of 21 bytes (at most 20)")
    assert split_datagram(b"\x01\x02")[1] == (
        "at byte 0: not a QUIC packet (first byte 0x01, fixed bit 0)")


def test_the_probe() -> None:
    assert looks_like_quic(_long(0xC0, VERSION_1, b"\x00" * 30))
    assert looks_like_quic(_long(0xD0, VERSION_2, b"\x00" * 30))
    assert not looks_like_quic(_long(0xC0, 0x51303436, b"\x00" * 30))  # not v1/v2
    assert looks_like_quic(b"\x41" + b"\x00" * 20)  # a short header: the flow decides
    assert not looks_like_quic(b"\x80\x60" + b"\x00" * 20)  # RTP version 2
    assert not looks_like_quic(b"\x00\x01\x00\x08\x21\x12\xa4\x42" + b"\x00" * 12)  # STUN


def _dg(frame: int, payload: bytes, sport: int = 50000, dport: int = 443) -> UdpDatagram:
    a, b = b"\x0a\0\0\1", b"\x0a\0\0\2"  # the client is 10.0.0.1 (the server: port 443)
    src, dst = (b, a) if sport == 443 else (a, b)
    return UdpDatagram(frame=frame, ts_ns=frame * 1000, frame_len=len(payload) + 42,
                       ip_version=4, src=src, dst=dst, ttl=64,
                       sport=sport, dport=dport, payload=payload)


def test_the_observer_maps_packets_to_connections() -> None:
    diag = Diagnostics()
    t = QuicTracker(diag)
    t.datagram(_dg(1, _long(0xC0, VERSION_1, b"\x00" * 30)))   # undecryptable client Initial
    t.datagram(_dg(2, bytes([0x40]) + SCID + b"\x22" * 30, 443, 50000))  # short, to client
    t.datagram(_dg(3, b"\x41" + b"\x00" * 20, 40000, 40001))  # probe's guess, unknown flow
    t.datagram(_dg(4, b"\x41" + b"\x00" * 20, 40002, 443))  # port 443: opened mid-connection
    assert [(c.index, c.client_port, c.start_seen) for c in t.connections] == [
        (0, 50000, True), (1, 40002, False)]
    rows = t.packet_rows
    assert [(r[0], r[2], r[3], r[6], r[8], r[12]) for r in rows] == [
        (1, 0, "client_to_server", "initial", DCID.hex(), "decrypt_failed"),
        (2, 0, "server_to_client", "1rtt", SCID.hex(), "no_key"),
        (4, 1, "client_to_server", "1rtt", None, "no_key"),
    ]
    assert diag.counts["quic.initial_decrypt_failed"] == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=6))
def test_the_observer_never_raises(datagrams: list[bytes]) -> None:
    t = QuicTracker(Diagnostics())
    for i, p in enumerate(datagrams):
        t.datagram(_dg(i + 1, p, 443 if i % 2 else 50000, 50000 if i % 2 else 443))
        t.datagram(_dg(i + 1, b"\xc0\x00\x00\x00\x01" + p))
