"""DNS over TCP and DNS over HTTPS in ``cap.dns``: the recorded captures ``dns-transports.pcap``
(UDP with a TC=1 answer and its TCP retry, pipelined and split DNS over TCP, DoH on HTTP/1.1)
and ``doh-h2.pcapng`` (DoH on HTTP/2 over TLS 1.3, key log beside it) against tshark 4.0 and
the server's log in the facts, then hand-built edge cases: gaps, resynchronisation, a capture
that starts inside a connection, segmentation, garbage, and DoH bodies and parameters."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.latency import stream_latency
from pcaptools.analyses.summary import headline, verdicts
from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.body import HttpBody
from pcaptools.protocols.dns import DnsTcpObserver, DnsTracker
from pcaptools.protocols.doh import DohCollector, dns_param
from pcaptools.protocols.http1 import Http1Observer
from pcaptools.report.html import dns_section, render_report
from pcaptools.tables.dns_tables import DNS, dns_table, link_tcp_retries
from tests.oracle import keylog_options, tshark_fields
from tests.protocols.dns.dnsbuild import AAAA, PTR_QNAME, A, a, message, rr

CAPTURES = Path(__file__).resolve().parents[3] / "captures"
TRANSPORTS = CAPTURES / "dns-transports.pcap"
DOH_H2 = CAPTURES / "doh-h2.pcapng"
DOH_KEYS = CAPTURES / "doh-h2.keys"
C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
ADDRS = (4, bytes([192, 0, 2, 10]), 41053, bytes([192, 0, 2, 20]), 53)

COLS = ["frame", "id", "name", "type", "query_frame", "response_frame", "rcode", "answer_count",
        "truncated", "transport", "tcp_stream", "http_stream_id", "http_request_index",
        "doh_method", "tcp_retry_frame", "retry_of_frame"]


def _rows(df: pd.DataFrame, cols: list[str] = COLS) -> list[list[Any]]:
    return [[None if v is pd.NA or (isinstance(v, float) and pd.isna(v)) else v for v in r]
            for r in df[cols].astype(object).values.tolist()]


@pytest.fixture(scope="module")
def transports() -> pcaptools.Capture:
    return pcaptools.load(TRANSPORTS)


@pytest.fixture(scope="module")
def doh_h2() -> pcaptools.Capture:
    return pcaptools.load(DOH_H2, keylog=DOH_KEYS)


# -- recorded captures ------------------------------------------------------------------------


def test_dns_transports_rows(transports: pcaptools.Capture) -> None:
    d = transports.dns
    DNS.check(d)
    assert _rows(d) == [
        [3, 0x1001, "small.lab.test", "A", 3, 4, "NOERROR", 1, False, "udp",
         None, None, None, None, None, None],
        [5, 0x1002, "big.lab.test", "A", 5, 6, "NOERROR", 0, True, "udp",
         None, None, None, None, 10, None],
        [10, 0x1002, "big.lab.test", "A", 10, 12, "NOERROR", 41, False, "tcp",
         0, None, None, None, None, 5],
        # three queries in one segment, answered in three
        [14, 0x2001, "a.lab.test", "A", 14, 15, "NOERROR", 1, False, "tcp",
         0, None, None, None, None, None],
        [14, 0x2002, "a.lab.test", "AAAA", 14, 16, "NOERROR", 1, False, "tcp",
         0, None, None, None, None, None],
        [14, 0x2003, "nx.example.com", "A", 14, 18, "NXDOMAIN", 0, False, "tcp",
         0, None, None, None, None, None],
        # query split after its length prefix; a 4 KB answer over several segments
        [21, 0x2004, "huge.lab.test", "TXT", 21, 26, "NOERROR", 20, False, "tcp",
         0, None, None, None, None, None],
        # the answer's length prefix and body 50 ms apart
        [27, 0x2005, "split.lab.test", "A", 27, 30, "NOERROR", 1, False, "tcp",
         0, None, None, None, None, None],
        [48, 0, "doh1.lab.test", "A", 48, 50, "NOERROR", 1, False, "doh",
         2, None, 1, "POST", None, None],
        [52, 0, "doh2.lab.test", "AAAA", 52, 53, "NOERROR", 1, False, "doh",
         2, None, 2, "GET", None, None],
        [54, 0, "nx.example.org", "A", 54, 55, "NXDOMAIN", 0, False, "doh",
         2, None, 3, "GET", None, None],
    ]
    assert d.loc[d["transport"] == "tcp", ["client_port", "server_port"]].drop_duplicates(
    ).values.tolist() == [[41053, 53]]
    assert d.loc[d["transport"] == "doh", "server_port"].unique().tolist() == [80]
    assert d["answers"].iloc[6].startswith("TXT (201 bytes), TXT (201 bytes)")
    assert round(float(d["latency_ms"].iloc[7]), 3) == 52.287  # the server's 50 ms pause
    assert not (transports.warnings["layer"] == "dns").any()


def test_doh_h2_rows(doh_h2: pcaptools.Capture) -> None:
    d = doh_h2.dns
    DNS.check(d)
    assert _rows(d) == [
        [15, 0, "app.lab.test", "A", 15, 18, "NOERROR", 1, False, "doh",
         0, 1, None, "GET", None, None],
        [19, 0, "app.lab.test", "AAAA", 19, 20, "NOERROR", 1, False, "doh",
         0, 3, None, "POST", None, None],
        [21, 0, "nx.example.net", "A", 21, 22, "NXDOMAIN", 0, False, "doh",
         0, 5, None, "GET", None, None],
        [23, 0, "huge.lab.test", "TXT", 23, 27, "NOERROR", 20, False, "doh",
         0, 7, None, "POST", None, None],
    ]
    assert d["answer_addrs"].tolist()[:2] == ["192.0.2.20", "2001:db8:77::20"]
    # the DoH streams are in http2_streams under the same keys
    s = doh_h2.http2_streams
    assert sorted(s.loc[s["tcp_stream"] == 0, "stream_id"].tolist()) == [1, 3, 5, 7]
    assert len(doh_h2.warnings) == 0


def test_without_keys_doh_is_not_seen() -> None:
    cap = pcaptools.load(DOH_H2)
    assert len(cap.dns) == 0


def _facts(path: Path) -> dict[str, Any]:
    return json.loads(Path(f"{path}.facts.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("path", [TRANSPORTS, DOH_H2], ids=lambda p: p.name)
def test_every_answer_the_server_logged_is_a_row(path: Path) -> None:
    cap = pcaptools.load(path, keylog=DOH_KEYS if path == DOH_H2 else None)
    log = _facts(path)["truth"]["server_log"]
    got = sorted((str(n), int(t)) for n, t in
                 cap.dns.loc[cap.dns["response_frame"].notna(), ["name", "type_code"]].values)
    want = sorted((r["name"], r["qtype"]) for r in log)
    assert got == want
    assert int(cap.dns["responses"].sum()) == len(log)


_FIELDS = ("frame.number", "dns.flags.response", "dns.id", "dns.qry.name", "dns.qry.type",
           "dns.flags.rcode", "dns.count.answers", "dns.flags.truncated", "tcp.stream")


@pytest.mark.tshark
@pytest.mark.parametrize("path", [TRANSPORTS, DOH_H2], ids=lambda p: p.name)
def test_every_dns_message_tshark_shows_matches(path: Path, tshark: str) -> None:
    """Each DNS message tshark 4.0 dissects (several per frame over TCP and HTTP/2) is the
    query or the response of one row with the same frame, id, name, type and rcode. tshark
    does not dissect a DoH GET's ?dns= parameter: those queries are ours only."""
    keys = DOH_KEYS if path == DOH_H2 else None
    cap = pcaptools.load(path, keylog=keys)
    d = cap.dns
    ours: set[tuple[Any, ...]] = set()
    for r in d.to_dict("records"):
        base = (int(r["id"]), r["name"], int(r["type_code"]))
        if not pd.isna(r["query_frame"]) and r["doh_method"] != "GET":
            ours.add((int(r["query_frame"]), False, *base, None, None))
        if not pd.isna(r["response_frame"]):
            ours.add((int(r["response_frame"]), True, *base, int(r["rcode_code"]),
                      int(r["answer_count"])))
    theirs: set[tuple[Any, ...]] = set()
    for row in tshark_fields(str(path), _FIELDS, keylog_options(keys), "dns"):
        cols = [c.split(",") for c in row]
        for i in range(len(cols[2])):
            resp = cols[1][i] in ("1", "True")
            theirs.add((int(cols[0][0]), resp, int(cols[2][i], 16), cols[3][i],
                        int(cols[4][i]), int(cols[5][i]) if resp else None,
                        int(cols[6][i]) if resp else None))
    assert theirs and ours == theirs
    tc = [r for r in tshark_fields(str(path), ("frame.number",), keylog_options(keys),
                                   "dns.flags.truncated == 1")]
    assert sorted(int(r[0]) for r in tc) == sorted(
        int(x) for x in d.loc[d["truncated"].fillna(False), "response_frame"])


def test_stream_latency_dns_time_uses_tcp_and_doh_rows(transports: pcaptools.Capture,
                                                       doh_h2: pcaptools.Capture) -> None:
    ts = {int(f): int(t) for f, t in zip(transports.packets["frame"],
                                         transports.packets["ts"].astype("int64"), strict=True)}
    lat = stream_latency(transports).set_index("host")
    # big.lab.test: UDP query (frame 5), TC=1 answer, TCP retry answered in frame 12
    assert int(lat.loc["big.lab.test", "dns_query_frame"]) == 5
    assert lat.loc["big.lab.test", "dns_ms"] == (ts[12] - ts[5]) / 1e6
    # doh1.lab.test: looked up with a DoH POST (48 -> 50)
    assert int(lat.loc["doh1.lab.test", "dns_query_frame"]) == 48
    assert lat.loc["doh1.lab.test", "dns_ms"] == (ts[50] - ts[48]) / 1e6
    h2 = stream_latency(doh_h2).set_index("host")
    assert int(h2.loc["app.lab.test", "dns_query_frame"]) == 19  # the later (AAAA) lookup


def test_headline_verdict_and_report(transports: pcaptools.Capture) -> None:
    h = headline(transports)
    assert h["dns_queries"] == 11
    assert h["dns_transports"] == {"tcp": 6, "doh": 3, "udp": 2}
    assert (h["dns_truncated"], h["dns_tcp_retries"]) == (1, 1)
    text = [v for v in verdicts(transports, h) if "DNS" in v]
    assert text and text[0].startswith(
        "11 DNS queries (6 over TCP, 3 over HTTPS (DoH), 2 over UDP)")
    assert "1 UDP answer truncated (TC=1), all retried over TCP" in text[0]
    html = render_report(transports, sections=[dns_section])
    assert "udp, TC=1: retried over TCP in frame 10" in html
    assert "dns &amp;&amp; tcp.stream == 0 &amp;&amp; dns.id == 0x2001" in html
    assert "doh (POST)" in html


def test_parallel_load_links_the_retry_across_workers() -> None:
    one = pcaptools.load(TRANSPORTS)
    two = pcaptools.load(TRANSPORTS, workers=2)
    pd.testing.assert_frame_equal(one.dns, two.dns)


# -- DNS over TCP, hand-built -----------------------------------------------------------------


def _framed(*msgs: bytes) -> bytes:
    return b"".join(len(m).to_bytes(2, "big") + m for m in msgs)


Q1, Q2, Q3 = message(1, "a.test", A), message(2, "b.test", AAAA), message(3, "c.test", A)
R1 = message(1, "a.test", A, response=True, answers=[rr(PTR_QNAME, A, a("192.0.2.1"))])


def _observer(midstream: bool = False) -> tuple[DnsTcpObserver, DnsTracker, Diagnostics]:
    diag = Diagnostics()
    tracker = DnsTracker(diag)
    return DnsTcpObserver(tcp_stream=7, tracker=tracker, diag=diag, addrs=ADDRS,
                          midstream=midstream), tracker, diag


def _feed(obs: DnsTcpObserver, d: Direction, data: bytes, cuts: list[int], frame0: int,
          offset: int = 0) -> int:
    """Feed ``data`` split at ``cuts``, one frame per piece; returns the next frame number."""
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(data))), len(data)]
    for i in range(len(bounds) - 1):
        piece = data[bounds[i]:bounds[i + 1]]
        obs.feed(StreamChunk(direction=d, data=piece, ts_ns=frame0 * 1000, frame=frame0,
                             offset=offset + bounds[i]))
        frame0 += 1
    return frame0


def _summary(tracker: DnsTracker) -> list[tuple[Any, ...]]:
    return [(t.id, t.name, t.query_frame, t.response_frame, t.transport, t.tcp_stream)
            for t in tracker.transactions]


def test_tcp_several_messages_per_segment_and_one_split_over_many() -> None:
    obs, tracker, diag = _observer()
    _feed(obs, C2S, _framed(Q1, Q2, Q3), [], 1)
    _feed(obs, S2C, _framed(R1), [1, 2, 5, 20], 2)  # prefix split, body in 4 pieces
    assert _summary(tracker) == [(1, "a.test", 1, 6, "tcp", 7), (2, "b.test", 1, None, "tcp", 7),
                                 (3, "c.test", 1, None, "tcp", 7)]
    t = tracker.transactions[0]
    assert (t.client_port, t.server_port, t.answer_addrs) == (41053, 53, "192.0.2.1")
    assert not diag.counts


@pytest.mark.parametrize("seed", range(20))
def test_tcp_messages_do_not_depend_on_segmentation(seed: int) -> None:
    wire = _framed(Q1, Q2, Q3)
    rnd = random.Random(seed)
    cuts = [rnd.randrange(1, len(wire)) for _ in range(rnd.randrange(1, 12))]
    whole, split = _observer(), _observer()
    _feed(whole[0], C2S, wire, [], 1)
    _feed(split[0], C2S, wire, cuts, 1)
    strip = [(t.id, t.name, t.qtype) for t in whole[1].transactions]
    assert strip == [(t.id, t.name, t.qtype) for t in split[1].transactions]
    assert len(strip) == 3
    bytewise = _observer()
    _feed(bytewise[0], C2S, wire, list(range(1, len(wire))), 1)
    assert [t.query_frame for t in bytewise[1].transactions] == [
        len(_framed(Q1)), len(_framed(Q1, Q2)), len(wire)]  # the frame that completed each


def test_tcp_gap_inside_a_message_loses_only_that_message() -> None:
    obs, tracker, diag = _observer()
    wire = _framed(Q1, Q2, Q3)
    start2 = len(_framed(Q1))
    nxt = _feed(obs, C2S, wire[: start2 + 5], [], 1)  # Q1 and the first 5 bytes of Q2
    obs.gap(C2S, start2 + 5, 4, 2000, nxt)
    _feed(obs, C2S, wire[start2 + 9:], [], nxt + 1, offset=start2 + 9)
    assert [t.name for t in tracker.transactions] == ["a.test", "c.test"]
    assert diag.counts == {"dns.tcp_bytes_lost": 1}


def test_tcp_gap_over_a_length_prefix_resynchronises() -> None:
    obs, tracker, diag = _observer()
    wire = _framed(Q1, Q2, Q3)
    start2 = len(_framed(Q1))
    nxt = _feed(obs, C2S, wire[: start2 - 3], [], 1)
    obs.gap(C2S, start2 - 3, 6, 2000, nxt)  # end of Q1, the prefix of Q2 and 1 byte
    _feed(obs, C2S, wire[start2 + 3:], [], nxt + 1, offset=start2 + 3)
    assert [t.name for t in tracker.transactions] == ["c.test"]
    assert diag.counts == {"dns.tcp_bytes_lost": 1}


def test_tcp_capture_started_inside_the_connection() -> None:
    obs, tracker, diag = _observer(midstream=True)
    wire = _framed(Q1, Q2, Q3)
    _feed(obs, C2S, wire[7:], [10], 1, offset=0)
    assert [t.name for t in tracker.transactions] == ["b.test", "c.test"]
    assert not diag.counts


def test_tcp_end_inside_a_message_is_reported() -> None:
    obs, tracker, diag = _observer()
    _feed(obs, C2S, _framed(Q1)[:-3], [], 1)
    obs.close(C2S, 5000, 2)
    assert tracker.transactions == []
    assert diag.counts == {"dns.tcp_truncated_message": 1}
    assert "3 bytes before the end of a message" in diag.rows[0].detail


@pytest.mark.parametrize("seed", range(10))
def test_tcp_garbage_never_raises(seed: int) -> None:
    rnd = random.Random(seed)
    obs, tracker, _ = _observer(midstream=bool(seed % 2))
    for i in range(30):
        d = C2S if rnd.random() < 0.5 else S2C
        if rnd.random() < 0.1:
            obs.gap(d, 0, rnd.randrange(1, 3000), i, i)
        else:
            obs.feed(StreamChunk(direction=d, data=rnd.randbytes(rnd.randrange(0, 400)),
                                 ts_ns=i, frame=i, offset=0))
    obs.close(C2S, 99, 99)
    obs.close(S2C, 99, 99)
    DNS.check(dns_table(tracker))


def test_tcp_over_a_real_load(tmp_path: Path) -> None:
    """A hand-built TCP port 53 connection through load(): prefix and message in separate
    segments, two answers in one."""
    from tests import helpers as h

    c, s = "10.0.0.5", "10.0.0.1"
    t0 = 1_700_000_000_000_000_000
    ms = 1_000_000

    fl = {"S": 0x02, "SA": 0x12, "A": 0x10, "PA": 0x18, "FA": 0x11}

    def seg(src: str, dst: str, sp: int, dp: int, seq: int, ack: int, flags: str,
            data: bytes = b"") -> bytes:
        return h.eth_tcp4(data, sport=sp, dport=dp, seq=seq, ack=ack, flags=fl[flags],
                          src=src, dst=dst)

    q = _framed(Q1, Q2)
    r2 = message(2, "b.test", AAAA, response=True)
    rs = _framed(R1, r2)
    pk = [seg(c, s, 40000, 53, 100, 0, "S"), seg(s, c, 53, 40000, 500, 101, "SA"),
          seg(c, s, 40000, 53, 101, 501, "A"),
          seg(c, s, 40000, 53, 101, 501, "PA", q[:2]),  # 4: Q1's prefix alone
          seg(c, s, 40000, 53, 103, 501, "PA", q[2:]),  # 5: the rest: Q1 and Q2
          seg(s, c, 53, 40000, 501, 101 + len(q), "PA", rs),  # 6: both answers
          seg(c, s, 40000, 53, 101 + len(q), 501 + len(rs), "FA"),
          seg(s, c, 53, 40000, 501 + len(rs), 102 + len(q), "FA")]
    path = h.write(tmp_path / "dnstcp.pcap",
                   h.pcap_file([(t0 + i * ms, p) for i, p in enumerate(pk)], nsec=True))
    cap = pcaptools.load(path)
    assert _rows(cap.dns, ["frame", "id", "query_frame", "response_frame", "transport",
                           "tcp_stream"]) == [[5, 1, 5, 6, "tcp", 0], [5, 2, 5, 6, "tcp", 0]]
    assert cap.dns["latency_ms"].tolist() == [1.0, 1.0]
    assert len(cap.warnings) == 0


# -- TC=1 links ----------------------------------------------------------------------------


def test_link_tcp_retries_rules() -> None:
    diag = Diagnostics()
    tr = DnsTracker(diag)
    from pcaptools.net.packet import UdpDatagram

    def udp(frame: int, ts_s: float, payload: bytes, response: bool) -> UdpDatagram:
        cl, sv = bytes([10, 0, 0, 5]), bytes([10, 0, 0, 1])
        src, dst = (sv, cl) if response else (cl, sv)
        return UdpDatagram(frame=frame, ts_ns=int(ts_s * 1e9), frame_len=len(payload) + 42,
                           ip_version=4, src=src, dst=dst, ttl=64,
                           sport=53 if response else 5000, dport=5000 if response else 53,
                           payload=payload)

    addrs = (4, bytes([10, 0, 0, 5]), 6000, bytes([10, 0, 0, 1]), 53)
    tc = message(9, "big.test", A, response=True, tc=True)
    tr.datagram(udp(1, 0.0, message(9, "big.test", A), False))
    tr.datagram(udp(2, 0.1, tc, True))
    tr.datagram(udp(3, 0.2, message(8, "far.test", A), False))
    tr.datagram(udp(4, 0.3, message(8, "far.test", A, response=True, tc=True), True))
    # the retry of big.test, then a second TCP query for it that retries nothing; far.test's
    # TCP query comes 11 s after its truncated answer: too late to be its retry
    for frame, ts, ident, qname in ((5, 0.4, 9, "BIG.test"), (6, 0.5, 10, "big.test"),
                                    (7, 11.4, 8, "far.test")):
        tr.stream_message(message(ident, qname, A), tcp_stream=0, from_client=True,
                          frame=frame, ts_ns=int(ts * 1e9), addrs=addrs)
    d = dns_table(tr)
    assert _rows(d, ["frame", "transport", "tcp_retry_frame", "retry_of_frame"]) == [
        [1, "udp", 5, None], [3, "udp", None, None], [5, "tcp", None, 1],
        [6, "tcp", None, None], [7, "tcp", None, None]]
    # idempotent and pure
    pd.testing.assert_frame_equal(link_tcp_retries(d), d)


# -- DoH, hand-built -------------------------------------------------------------------------


def _b64(m: bytes) -> str:
    return base64.urlsafe_b64encode(m).decode().rstrip("=")


def _doh_h1(request: bytes, response: bytes, *, gap_in_response: int = 0
            ) -> tuple[pd.DataFrame, Diagnostics]:
    diag = Diagnostics()
    tracker = DnsTracker(diag)
    doh = DohCollector(tracker, diag, lambda s: (4, bytes(4), 50000, bytes(4), 80))
    obs = Http1Observer(tcp_stream=3, diag=diag)
    ev = obs.feed(StreamChunk(direction=C2S, data=request, ts_ns=1000, frame=4, offset=0))
    if gap_in_response:
        ev += obs.feed(StreamChunk(direction=S2C, data=response[:-gap_in_response - 2],
                                   ts_ns=2000, frame=5, offset=0))
        ev += obs.gap(S2C, len(response) - gap_in_response - 2, gap_in_response, 2500, 6)
        ev += obs.feed(StreamChunk(direction=S2C, data=response[-2:], ts_ns=3000, frame=7,
                                   offset=len(response) - 2))
    else:
        ev += obs.feed(StreamChunk(direction=S2C, data=response, ts_ns=2000, frame=5,
                                   offset=0))
    ev += obs.finish(4000, 8)
    doh.add_all(ev)
    return dns_table(tracker), diag


def _resp(body: bytes, ctype: str = "application/dns-message") -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body)


R0 = message(0, "a.test", A, response=True, answers=[rr(PTR_QNAME, A, a("192.0.2.1"))])


def test_doh_http1_post_and_get() -> None:
    q = message(0, "a.test", A)
    post = (b"POST /dns-query HTTP/1.1\r\nHost: d\r\nContent-Type: application/dns-message; "
            b"charset=x\r\nContent-Length: " + str(len(q)).encode() + b"\r\n\r\n" + q)
    d, diag = _doh_h1(post, _resp(R0))
    assert _rows(d, ["query_frame", "response_frame", "name", "transport", "doh_method",
                     "http_request_index", "tcp_stream", "answer_addrs"]) == [
        [4, 5, "a.test", "doh", "POST", 1, 3, "192.0.2.1"]]
    get = f"GET /dns-query?ct&dns={_b64(q)} HTTP/1.1\r\nHost: d\r\n\r\n".encode()
    d, _ = _doh_h1(get, _resp(R0))
    assert _rows(d, ["query_frame", "response_frame", "doh_method", "queries"]) == [
        [4, 5, "GET", 1]]
    assert not diag.counts


def test_doh_not_dns_and_lost_bodies() -> None:
    # a GET with a dns parameter that is no DNS query, answered with HTML: not DoH
    d, diag = _doh_h1(b"GET /?dns=hello HTTP/1.1\r\nHost: d\r\n\r\n", _resp(b"<p>", "text/html"))
    assert len(d) == 0 and not diag.counts
    # a GET answered with a DNS message whose parameter is not base64url: response only
    d, diag = _doh_h1(b"GET /dns-query?dns=%%%%! HTTP/1.1\r\nHost: d\r\n\r\n", _resp(R0))
    assert _rows(d, ["query_frame", "response_frame", "name", "queries"]) == [
        [None, 5, "a.test", 0]]
    assert diag.counts == {"dns.doh_bad_query": 1}
    # response bytes lost: the query stays, the response is unknown
    q = message(0, "a.test", A)
    d, diag = _doh_h1(f"GET /dns-query?dns={_b64(q)} HTTP/1.1\r\nHost: d\r\n\r\n".encode(),
                      _resp(R0), gap_in_response=5)
    assert _rows(d, ["query_frame", "response_frame", "name", "rcode"]) == [
        [4, None, "a.test", None]]


def test_doh_gzip_bodies_are_decoded_before_the_dns_parser() -> None:
    """A DoH body with Content-Encoding goes through the one body path (content decoding,
    then the DNS collector): a gzip response, and a gzip POST request body, give the row
    the identity bodies give."""
    import gzip

    q = message(0, "a.test", A)
    zr = gzip.compress(R0)
    resp = (b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\n"
            b"Content-Encoding: gzip\r\nContent-Length: " + str(len(zr)).encode()
            + b"\r\n\r\n" + zr)
    get = f"GET /dns-query?dns={_b64(q)} HTTP/1.1\r\nHost: d\r\n\r\n".encode()
    cols = ["query_frame", "response_frame", "name", "transport", "doh_method", "rcode",
            "answer_addrs"]
    d, diag = _doh_h1(get, resp)
    assert _rows(d, cols) == [[4, 5, "a.test", "doh", "GET", "NOERROR", "192.0.2.1"]]
    assert not diag.counts
    zq = gzip.compress(q)
    post = (b"POST /dns-query HTTP/1.1\r\nHost: d\r\nContent-Type: application/dns-message"
            b"\r\nContent-Encoding: gzip\r\nContent-Length: " + str(len(zq)).encode()
            + b"\r\n\r\n" + zq)
    d, diag = _doh_h1(post, resp)
    assert _rows(d, cols) == [[4, 5, "a.test", "doh", "POST", "NOERROR", "192.0.2.1"]]
    assert not diag.counts
    # a corrupt gzip response: one decoding warning, and the response is unknown (not
    # parsed as DNS from the undecodable bytes)
    bad = resp[: -len(zr)] + zr[:10] + bytes(len(zr) - 10)
    d, diag = _doh_h1(get, bad)
    assert _rows(d, ["query_frame", "response_frame", "name", "rcode"]) == [
        [4, None, "a.test", None]]
    assert diag.counts == {"http.content_decoding_failed": 1}


def test_dns_param() -> None:
    q = message(0, "x.test", A)
    assert dns_param(f"/dns-query?dns={_b64(q)}") == q
    assert dns_param("/dns-query?name=x") is None
    assert dns_param(None) is None
    assert dns_param("/q?dns=@@") == "@@"


def test_http_body_events_only_for_dns_message() -> None:
    diag = Diagnostics()
    obs = Http1Observer(tcp_stream=0, diag=diag)
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    plain = _resp(b"hello", "text/plain")
    ev = obs.feed(StreamChunk(direction=C2S, data=req + req, ts_ns=1, frame=1, offset=0))
    ev += obs.feed(StreamChunk(direction=S2C, data=plain, ts_ns=2, frame=2, offset=0))
    ev += obs.feed(StreamChunk(direction=S2C, data=_resp(R0), ts_ns=3, frame=3,
                               offset=len(plain)))
    bodies = [e for e in ev if isinstance(e, HttpBody)]
    assert [(b.frame, b.request_index, b.stream_id, b.content_type, b.data, b.complete)
            for b in bodies] == [(3, 2, None, "application/dns-message", R0, True)]


def test_subset_keeps_the_dns_rows_a_kept_connection_carried(
        transports: pcaptools.Capture) -> None:
    sub = transports.subset(stream=2)  # the DoH connection (Host dns.lab.test)
    doh = sub.dns[sub.dns["transport"] == "doh"]
    # nx.example.org has no answer: only its connection relates it to stream 2
    assert doh["name"].tolist() == ["doh1.lab.test", "doh2.lab.test", "nx.example.org"]
    sub = transports.subset(stream=0)
    assert "nx.example.com" in sub.dns["name"].tolist()  # NXDOMAIN over TCP stream 0


def test_unknown_connection_addresses_leave_the_address_columns_empty() -> None:
    tr = DnsTracker(Diagnostics())
    tr.stream_message(Q1, tcp_stream=4, from_client=True, frame=1, ts_ns=1, addrs=None)
    d = dns_table(tr)
    assert d[["client_addr", "server_addr"]].isna().all(axis=None)
    assert d["tcp_stream"].tolist() == [4]


def _drop_frames(src: Path, dst: Path, drop: set[int]) -> Path:
    """A copy of the pcap ``src`` without the frames numbered in ``drop`` (a capture that
    missed those packets)."""
    import struct

    b = src.read_bytes()
    endian = "<" if b[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, pos, n = bytearray(b[:24]), 24, 0
    while pos + 16 <= len(b):
        incl = struct.unpack_from(endian + "I", b, pos + 8)[0]
        n += 1
        if n not in drop:
            out += b[pos : pos + 16 + incl]
        pos += 16 + incl
    dst.write_bytes(bytes(out))
    return dst


@pytest.mark.tshark
def test_a_segment_the_capture_missed_costs_one_answer(tmp_path: Path, tshark: str) -> None:
    """Frame 24 carries the middle 1448 bytes of the 4 KB huge.lab.test answer: without it
    that answer is lost (as in tshark), the length prefixes stay known, and the next
    exchange on the connection (split.lab.test) is still matched."""
    path = _drop_frames(TRANSPORTS, tmp_path / "missed.pcap", {24})
    cap = pcaptools.load(path)
    d = cap.dns[cap.dns["transport"] == "tcp"]
    assert _rows(d, ["name", "query_frame", "response_frame"]) == [
        ["big.lab.test", 10, 12], ["a.lab.test", 14, 15], ["a.lab.test", 14, 16],
        ["nx.example.com", 14, 18], ["huge.lab.test", 21, None], ["split.lab.test", 26, 29]]
    w = cap.warnings
    assert w.loc[w["layer"] == "dns", ["code", "frame"]].values.tolist() == [
        ["dns.tcp_bytes_lost", 24]]
    resp = tshark_fields(str(path), ("frame.number", "dns.qry.name"), (),
                         "dns.flags.response == 1 && tcp.stream == 0")
    assert [(int(f), n) for f, n in resp] == [
        (12, "big.lab.test"), (15, "a.lab.test"), (16, "a.lab.test"), (18, "nx.example.com"),
        (29, "split.lab.test")]


def test_tcp_chunks_are_aligned_with_the_stream_cursor() -> None:
    """A chunk that repeats bytes already seen is trimmed, and a chunk beyond the next
    expected offset counts as a gap first: the same transactions and rows as the clean feed
    with an explicit gap (tcp.stream.StreamCursor)."""
    wire = _framed(Q1, Q2, Q3)
    start2 = len(_framed(Q1))
    clean, overlapped = _observer(), _observer()
    _feed(clean[0], C2S, wire, [], 1)
    _feed(overlapped[0], C2S, wire[: start2 + 5], [], 1)
    _feed(overlapped[0], C2S, wire[3:], [], 2, offset=3)  # bytes 3.. again, then the rest
    assert [t.name for t in overlapped[1].transactions] == ["a.test", "b.test", "c.test"]
    assert _summary(overlapped[1])[1:] == [(2, "b.test", 2, None, "tcp", 7),
                                           (3, "c.test", 2, None, "tcp", 7)]
    assert not overlapped[2].counts and not clean[2].counts

    explicit, implicit = _observer(), _observer()
    for obs, _, _ in (explicit, implicit):
        nxt = _feed(obs, C2S, wire[: start2 + 5], [], 1)
        if obs is explicit[0]:
            obs.gap(C2S, start2 + 5, 4, nxt * 1000, nxt)
        _feed(obs, C2S, wire[start2 + 9:], [], nxt, offset=start2 + 9)
    assert [t.name for t in implicit[1].transactions] == ["a.test", "c.test"]
    assert _summary(implicit[1]) == _summary(explicit[1])
    assert implicit[2].counts == explicit[2].counts == {"dns.tcp_bytes_lost": 1}
    assert [r.detail for r in implicit[2].rows] == [r.detail for r in explicit[2].rows]
