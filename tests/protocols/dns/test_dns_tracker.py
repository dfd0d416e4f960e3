"""DnsTracker and the dns table on hand-built datagrams: matching, retransmissions,
unsolicited responses, record types dpkt does not decode, malformed messages."""

from __future__ import annotations

import ipaddress

import pandas as pd
import pytest

from pcaptools.diagnostics import Diagnostics
from pcaptools.net.packet import UdpDatagram
from pcaptools.protocols.dns import DnsTracker, rcode_name, type_name
from pcaptools.tables.dns_tables import DNS, dns_table
from tests.protocols.dns.dnsbuild import AAAA, CNAME, HTTPS, PTR_QNAME, A, a, message, name, rr

MS = 1_000_000
T0 = 1_700_000_000_000_000_000
CLIENT, RESOLVER = "10.0.0.5", "10.0.0.1"


def dgram(
    frame: int,
    t_ms: float,
    payload: bytes,
    *,
    response: bool = False,
    cport: int = 40000,
    client: str = CLIENT,
) -> UdpDatagram:
    c, s = ipaddress.ip_address(client).packed, ipaddress.ip_address(RESOLVER).packed
    src, dst, sport, dport = (s, c, 53, cport) if response else (c, s, cport, 53)
    return UdpDatagram(
        frame=frame,
        ts_ns=T0 + int(t_ms * MS),
        frame_len=42 + len(payload),
        ip_version=4,
        src=src,
        dst=dst,
        ttl=64,
        sport=sport,
        dport=dport,
        payload=payload,
    )


def run(*datagrams: UdpDatagram) -> tuple[pd.DataFrame, Diagnostics]:
    diag = Diagnostics()
    t = DnsTracker(diag)
    for d in datagrams:
        t.datagram(d)
    df = dns_table(t)
    DNS.check(df)
    return df, diag


def test_query_and_response_one_row() -> None:
    answers = [
        rr(PTR_QNAME, CNAME, name("edge.example.net"), ttl=300),
        rr(name("edge.example.net"), A, a("192.0.2.7"), ttl=20),
    ]
    df, diag = run(
        dgram(1, 0, message(0x1234, "api.Example.com", A)),
        dgram(
            2,
            12.5,
            message(0x1234, "api.Example.com", A, response=True, answers=answers),
            response=True,
        ),
    )
    assert len(df) == 1 and not diag.rows
    r = df.iloc[0]
    assert (r["frame"], r["id"], r["name"], r["type"], r["type_code"]) == (
        1,
        0x1234,
        "api.Example.com",
        "A",
        1,
    )
    assert (r["query_frame"], r["response_frame"], r["latency_ms"]) == (1, 2, 12.5)
    assert (r["rcode"], r["rcode_code"], r["answer_count"]) == ("NOERROR", 0, 2)
    assert r["answers"] == "CNAME edge.example.net, A 192.0.2.7"
    assert r["answer_addrs"] == "192.0.2.7"
    assert r["min_ttl_s"] == 20 and not r["truncated"]
    assert (r["queries"], r["responses"]) == (1, 1)
    assert (r["client_addr"], r["client_port"], r["server_addr"], r["server_port"]) == (
        CLIENT,
        40000,
        RESOLVER,
        53,
    )
    assert (r["ip_version"], r["transport"]) == (4, "udp")
    assert r["query_ts"] == pd.Timestamp(T0, unit="ns", tz="UTC")


def test_a_and_aaaa_on_one_port_are_two_transactions() -> None:
    v6 = [rr(PTR_QNAME, AAAA, a("2001:db8::7"))]
    df, _ = run(
        dgram(1, 0, message(1, "x.test", A)),
        dgram(2, 0.3, message(2, "x.test", AAAA)),
        dgram(
            3,
            8,
            message(1, "x.test", A, response=True, answers=[rr(PTR_QNAME, A, a("192.0.2.1"))]),
            response=True,
        ),
        dgram(4, 242, message(2, "x.test", AAAA, response=True, answers=v6), response=True),
    )
    assert df[["frame", "type", "response_frame"]].values.tolist() == [[1, "A", 3], [2, "AAAA", 4]]
    assert df["latency_ms"].tolist() == [8.0, 241.7]
    assert df["answer_addrs"].tolist() == ["192.0.2.1", "2001:db8::7"]


def test_retransmitted_query_within_5_s_counts_and_latency_is_from_the_first() -> None:
    df, _ = run(
        dgram(1, 0, message(7, "slow.test")),
        dgram(2, 1000, message(7, "slow.test")),  # retransmission (tshark: dns.retransmit_request)
        dgram(3, 1030, message(7, "slow.test", response=True), response=True),
        dgram(
            4, 1031, message(7, "slow.test", response=True), response=True
        ),  # retransmitted response
    )
    assert len(df) == 1
    r = df.iloc[0]
    assert (r["queries"], r["responses"], r["query_frame"], r["response_frame"]) == (2, 2, 1, 3)
    assert r["latency_ms"] == 1030.0


def test_same_id_after_5_s_or_after_an_answer_is_a_new_transaction() -> None:
    df, _ = run(
        dgram(1, 0, message(7, "a.test")),
        dgram(2, 5000, message(7, "a.test")),  # 5 s later: new (tshark too)
        dgram(3, 5010, message(7, "a.test", response=True), response=True),
        dgram(4, 6000, message(7, "a.test")),  # after an answer: new
        dgram(5, 6004, message(7, "a.test", response=True), response=True),
    )
    assert df[["frame", "response_frame", "queries"]].astype(object).values.tolist() == [
        [1, pd.NA, 1],
        [2, 3, 1],
        [4, 5, 1],
    ]
    assert pd.isna(df["latency_ms"].iloc[0]) and df["latency_ms"].tolist()[1:] == [10.0, 4.0]
    assert pd.isna(df["rcode"].iloc[0])


def test_different_client_port_or_name_does_not_match() -> None:
    df, _ = run(
        dgram(1, 0, message(9, "a.test")),
        dgram(2, 5, message(9, "a.test", response=True), response=True, cport=40001),
        dgram(3, 6, message(9, "b.test", response=True), response=True),
        dgram(4, 7, message(9, "A.TEST", response=True), response=True),  # 0x20 case: matches
    )
    assert df[["frame", "query_frame", "response_frame", "queries"]].astype(
        object
    ).values.tolist() == [
        [1, 1, 4, 1],
        [2, pd.NA, 2, 0],  # unsolicited: its query (port 40001) was not captured
        [3, pd.NA, 3, 0],
    ]
    assert df["client_port"].tolist() == [40000, 40001, 40000]
    assert df["responses"].tolist() == [1, 1, 1]


def test_nxdomain_truncated_and_types_dpkt_does_not_decode() -> None:
    https = [rr(PTR_QNAME, HTTPS, b"\x00\x01\x00\x00\x01\x00\x03\x02h2")]
    df, diag = run(
        dgram(1, 0, message(1, "nope.test", A)),
        dgram(2, 3, message(1, "nope.test", A, response=True, rcode=3), response=True),
        dgram(3, 4, message(2, "svc.test", HTTPS)),
        dgram(4, 9, message(2, "svc.test", HTTPS, response=True, answers=https), response=True),
        dgram(5, 10, message(3, "big.test", A)),
        dgram(6, 11, message(3, "big.test", A, response=True, tc=True), response=True),
    )
    assert not diag.rows
    assert df["rcode"].tolist() == ["NXDOMAIN", "NOERROR", "NOERROR"]
    assert df["type"].tolist() == ["A", "HTTPS", "A"]
    assert df["answers"].tolist() == ["", "HTTPS (10 bytes)", ""]
    assert df["truncated"].tolist() == [False, False, True]
    assert type_name(4242) == "TYPE4242" and rcode_name(12) == "RCODE12"


def test_malformed_response_is_a_warning_and_still_matches() -> None:
    good = message(5, "cut.test", A, response=True, answers=[rr(PTR_QNAME, A, a("192.0.2.9"))])
    df, diag = run(
        dgram(1, 0, message(5, "cut.test", A)),
        dgram(2, 2, good[:-3], response=True),  # answer cut short
    )
    assert [(w.code, w.frame) for w in diag.rows] == [("dns.malformed", 2)]
    assert "cut short" in diag.rows[0].detail
    r = df.iloc[0]
    assert (r["response_frame"], r["latency_ms"], r["answer_count"]) == (2, 2.0, 1)
    assert pd.isna(r["answers"]) and pd.isna(r["answer_addrs"])


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x12\x34\x01", None),  # shorter than a header
        (message(1, None, qdcount=1), "cut short"),  # question missing
        (
            b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01\x00\x01",
            "pointer",
        ),  # loop
        (
            b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x02\xff\xfe\x00\x00\x01\x00\x01",
            "UTF-8",
        ),
    ],
)
def test_garbage_never_raises(payload: bytes, reason: str | None) -> None:
    df, diag = run(dgram(1, 0, payload))
    assert [w.code for w in diag.rows] == ["dns.malformed"]
    if reason:
        assert reason in diag.rows[0].detail
    if len(payload) < 12:
        assert len(df) == 0
    else:
        assert df["name"].isna().tolist() == [True] and df["id"].tolist() == [1]


def test_root_name_and_empty_table() -> None:
    df, _ = run(dgram(1, 0, message(1, "", 2)))
    assert df["name"].tolist() == ["<Root>"] and df["type"].tolist() == ["NS"]
    empty = dns_table(None)
    DNS.check(empty)
    assert len(empty) == 0
