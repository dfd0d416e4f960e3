"""cap.dns through pcaptools.load(), compared with tshark 4.0 on the corpus captures that hold
DNS and on a hand-built capture with retransmissions, an unsolicited response and a malformed
message."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.tables.dns_tables import DNS
from tests import helpers as h
from tests.conftest import corpus_files
from tests.oracle import tshark_fields
from tests.protocols.dns.dnsbuild import AAAA, PTR_QNAME, A, a, message, rr

DNS_CAPTURES = [
    "raw_ip.pcap",
    "tls3.cryptohack.org.pcapng",
    "dsb-tls3.cryptohack.org.pcapng",
    "many_interfaces-1.pcapng",
    "pcapng-multi-interface.pcapng",
]

FIELDS = (
    "frame.number",
    "dns.flags.response",
    "dns.id",
    "dns.qry.name",
    "dns.qry.type",
    "dns.flags.rcode",
    "dns.response_to",
    "dns.response_in",
    "dns.time",
    "dns.count.answers",
    "dns.a",
    "dns.aaaa",
    "dns.retransmit_request",
    "dns.retransmit_response",
)


def _tshark_rows(path: Path) -> list[dict[str, str]]:
    return [
        dict(zip(FIELDS, r, strict=True))
        for r in tshark_fields(str(path), FIELDS, ("-2",), "dns && !icmp && !icmpv6")
    ]


def _compare(path: Path, cap: pcaptools.Capture) -> int:
    """Every field tshark gives, against cap.dns. Returns the number of packets compared."""
    df = cap.dns
    DNS.check(df)
    by_query = {
        int(r["query_frame"]): r for r in df.to_dict("records") if not pd.isna(r["query_frame"])
    }
    by_resp = {
        int(r["response_frame"]): r
        for r in df.to_dict("records")
        if not pd.isna(r["response_frame"])
    }
    rows = _tshark_rows(path)
    assert rows, path
    for t in rows:
        frame = int(t["frame.number"])
        if t["dns.retransmit_request"] or t["dns.retransmit_response"]:
            continue  # counted in queries/responses, checked in the hand-built test
        if t["dns.flags.response"] == "1":
            r = by_resp[frame]
            want_q = int(t["dns.response_to"]) if t["dns.response_to"] else None
            assert (None if pd.isna(r["query_frame"]) else int(r["query_frame"])) == want_q, frame
            if t["dns.time"]:
                assert round(r["latency_ms"], 6) == round(float(t["dns.time"]) * 1000, 6), frame
            assert int(r["rcode_code"]) == int(t["dns.flags.rcode"]), frame
            assert int(r["answer_count"]) == int(t["dns.count.answers"]), frame
            addrs = [x for x in (t["dns.a"], t["dns.aaaa"]) if x]
            want = sorted(",".join(addrs).split(",")) if addrs else []
            got = sorted(r["answer_addrs"].split(",")) if r["answer_addrs"] else []
            assert got == want, frame
        else:
            r = by_query[frame]
            want_r = int(t["dns.response_in"]) if t["dns.response_in"] else None
            assert (None if pd.isna(r["response_frame"]) else int(r["response_frame"])) == want_r, (
                frame
            )
        assert int(r["id"]) == int(t["dns.id"], 16), frame
        assert r["name"] == t["dns.qry.name"], frame
        assert int(r["type_code"]) == int(t["dns.qry.type"]), frame
    n_q = sum(1 for t in rows if t["dns.flags.response"] == "0" and not t["dns.retransmit_request"])
    unsolicited = sum(
        1
        for t in rows
        if t["dns.flags.response"] == "1"
        and not t["dns.response_to"]
        and not t["dns.retransmit_response"]
    )
    assert len(df) == n_q + unsolicited
    return len(rows)


@pytest.mark.corpus
@pytest.mark.tshark
@pytest.mark.parametrize("path", [p for p in corpus_files(*DNS_CAPTURES)], ids=lambda p: p.name)
def test_corpus_dns_matches_tshark(path: Path, tshark: str) -> None:
    cap = pcaptools.load(path)
    assert _compare(path, cap) > 0
    assert not (cap.warnings["layer"] == "dns").any()


@pytest.mark.corpus
def test_tls3_cryptohack_dns_rows(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "tls3.cryptohack.org.pcapng")
    got = cap.dns[["frame", "name", "type", "response_frame", "latency_ms", "answers"]]
    assert got.astype(object).values.tolist() == [
        [1, "tls3.cryptohack.org", "A", 3, 8.133, "A 178.62.74.206"],
        [2, "tls3.cryptohack.org", "AAAA", 4, 242.001, ""],
    ]
    assert cap.dns["client_addr"].tolist() == ["172.16.112.134"] * 2
    assert cap.dns["server_addr"].tolist() == ["172.16.112.2"] * 2


@pytest.mark.corpus
def test_raw_ip_dns_rows(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "raw_ip.pcap")
    assert cap.dns[["frame", "response_frame", "latency_ms"]].values.tolist() == [
        [51, 52, 17.004],
        [70, 71, 18.001],
        [73, 76, 17.001],
    ]
    assert cap.dns["answers"].iloc[1] == (
        "CNAME www.ynet.co.il.edgekey.net, CNAME e12476.b.akamaiedge.net, A 23.221.143.117"
    )


def _udp_frame(payload: bytes, *, response: bool, cport: int = 40000) -> bytes:
    c, s = "10.0.0.5", "10.0.0.1"
    if response:
        return h.ethernet(h.ipv4(h.udp(53, cport, payload), s, c, proto=17))
    return h.ethernet(h.ipv4(h.udp(cport, 53, payload), c, s, proto=17))


@pytest.mark.tshark
def test_hand_built_capture_matches_tshark(tmp_path: Path, tshark: str) -> None:
    t0 = 1_700_000_000_000_000_000
    ms = 1_000_000
    ans = [rr(PTR_QNAME, A, a("192.0.2.1"))]
    good = message(3, "c.test", A, response=True, answers=ans)
    packets = [
        (t0, _udp_frame(message(1, "a.test", A), response=False)),  # 1
        (t0 + 1000 * ms, _udp_frame(message(1, "a.test", A), response=False)),  # 2 retransmit
        (
            t0 + 1020 * ms,
            _udp_frame(message(1, "a.test", A, response=True, answers=ans), response=True),
        ),
        (
            t0 + 1021 * ms,
            _udp_frame(message(1, "a.test", A, response=True, answers=ans), response=True),
        ),
        (
            t0 + 1100 * ms,
            _udp_frame(message(2, "b.test", AAAA, response=True), response=True, cport=40001),
        ),
        (t0 + 1200 * ms, _udp_frame(message(3, "c.test", A), response=False)),  # 6
        (t0 + 1210 * ms, _udp_frame(good[:-2], response=True)),  # 7 cut short
        (t0 + 1300 * ms, _udp_frame(message(4, "d.test", A), response=False)),  # 8 unanswered
    ]
    path = h.write(tmp_path / "dns.pcap", h.pcap_file(packets, nsec=True))
    cap = pcaptools.load(path)
    assert cap.dns[["frame", "query_frame", "response_frame", "queries", "responses"]].astype(
        object
    ).values.tolist() == [
        [1, 1, 3, 2, 2],
        [5, pd.NA, 5, 0, 1],
        [6, 6, 7, 1, 1],
        [8, 8, pd.NA, 1, 0],
    ]
    assert cap.dns["latency_ms"].tolist()[:1] == [1020.0]
    w = cap.warnings
    assert w.loc[w["code"] == "dns.malformed", "frame"].tolist() == [7]
    # tshark agrees on the retransmissions, the unsolicited response and the times
    rows = {int(t["frame.number"]): t for t in _tshark_rows(path)}
    assert rows[2]["dns.retransmit_request"] == "1" and rows[4]["dns.retransmit_response"] == "1"
    assert rows[3]["dns.response_to"] == "1" and float(rows[3]["dns.time"]) == 1.02
    assert rows[5]["dns.response_to"] == "" and rows[8]["dns.response_in"] == ""
    unsolicited = tshark_fields(str(path), ("frame.number",), (), "dns.unsolicited")
    assert unsolicited == [["5"]]
