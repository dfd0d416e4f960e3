"""cap.coverage: every frame in one row, with what it was and whether it was analysed.

Truth: tshark 4.0's ``frame.protocols`` for every frame (which frames are QUIC, TLS, DNS,
ICMP, ARP...), the recorder's facts for captures/coverage-mixed.pcap (what the script sent),
and hand-built frames for the edge cases.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.coverage import coverage_headline, coverage_sentences, coverage_summary
from pcaptools.analyses.overhead import overhead
from pcaptools.analyses.summary import headline, verdicts
from pcaptools.diagnostics import Diagnostics
from pcaptools.net.packet import IpPacket, UdpDatagram
from pcaptools.report.html import render_report
from pcaptools.tables.coverage import (
    COVERAGE,
    STATUSES,
    ConnectionFacts,
    FlowCounter,
    connection_verdict,
    udp_protocol,
)
from tests.conftest import CAPTURES, CORPUS, shipped_captures
from tests.helpers import pcap_file

MIXED = CAPTURES / "coverage-mixed.pcap"
QUIC = CORPUS / "chrome-cloudflare-quic-with-secrets.pcapng"


def _tshark_protocols(tshark: str, path: Path, *opts: str) -> list[str]:
    import subprocess

    out = subprocess.run(
        [tshark, "-r", str(path), "-n", *opts, "-T", "fields", "-e", "frame.protocols"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.splitlines()


def _check_sums(cap: pcaptools.Capture) -> None:
    cov = cap.coverage
    COVERAGE.check(cov)
    s = cap.summary
    assert int(cov["frames"].sum()) == s.frames
    assert int(cov["wire_bytes"].sum()) == s.wire_bytes
    tcp = cov[cov["transport"].astype(str).eq("tcp") & cov["tcp_stream"].notna()]
    assert int(tcp["frames"].sum()) == s.tcp_frames
    assert int(cov[cov["transport"].astype(str).eq("udp")]["frames"].sum()) == s.udp_frames
    assert int(cov[cov["transport"].astype(str).eq("non_ip")]["frames"].sum()) == s.non_ip_frames
    assert set(cov["status"].astype(str)) <= set(STATUSES)
    assert cov["frame"].is_monotonic_increasing


# -- recorded capture ------------------------------------------------------------------------


def test_mixed_capture_rows_match_what_was_sent_and_tshark(tshark: str) -> None:
    cap = pcaptools.load(MIXED)
    _check_sums(cap)
    cov = cap.coverage
    got = [
        (str(r.transport), str(r.protocol), str(r.status), int(r.frames))
        for r in cov.itertuples(index=False)
    ]
    assert got == [
        ("non_ip", "arp", "not_parsed", 2),
        ("tcp", "http1", "analysed", 10),
        ("tcp", "tls", "encrypted_no_key", 18),
        ("tcp", "unknown", "unknown_payload", 10),
        ("udp", "dns", "analysed", 1),
        ("icmp", "icmp_error", "analysed", 4),
        ("udp", "unknown", "unknown_payload", 3),
        ("icmp", "icmp", "not_parsed", 4),
    ]
    # the four port-unreachable errors (the DNS query and the three unknown datagrams) are
    # rows of icmp_errors; the echo requests and replies are not parsed
    assert len(cap.icmp_errors) == 4
    facts = json.loads((CAPTURES / "coverage-mixed.pcap.facts.json").read_text())
    truth = facts["truth"]
    unknown_tcp = cov[cov["protocol"].astype(str).eq("unknown") & cov["transport"].eq("tcp")]
    # the client sent 400 bytes of its binary protocol; tcpkit's sink answered 13 bytes
    assert (
        int(unknown_tcp["payload_bytes"].iloc[0])
        == truth["tcp"]["unknown_payload_bytes_client"] + 13
    )
    udp_unknown = cov[cov["protocol"].astype(str).eq("unknown") & cov["transport"].eq("udp")]
    assert int(udp_unknown["payload_bytes"].iloc[0]) == (
        truth["udp"]["unknown_datagrams"] * truth["udp"]["unknown_datagram_bytes"]
    )
    assert int(udp_unknown["dport"].iloc[0]) == 9999
    # tshark: frame.protocols per frame, counted the same way
    protos = _tshark_protocols(tshark, MIXED)
    assert len(protos) == cap.summary.frames
    parts = [p.split(":") for p in protos]
    c = Counter(x[3] if x[2] in ("ip", "ipv6") else x[2] for x in parts)
    assert c["arp"] == 2 and c["icmp"] == 8 and c["udp"] == 4 and c["tcp"] == 38
    tls_stream = cov[cov["protocol"].astype(str).eq("tls")]
    assert str(tls_stream["detail"].iloc[0]) == "TLS 1.3: no key log"


def test_mixed_capture_sentences_headline_and_report() -> None:
    cap = pcaptools.load(MIXED)
    assert coverage_sentences(cap) == [
        "pcaptools analysed 15 of 52 frames (28% of bytes); the rest is listed below and in "
        "the Coverage section.",
        "18 TCP frames (54% of bytes) in 1 connection were TLS without a key: only the "
        "handshakes are analysed.",
        "10 TCP frames (11% of bytes) in 1 connection carried a payload no parser recognised.",
        "4 ICMP frames (3.4% of bytes) are not analysed.",  # echo; the 4 errors are analysed
        "3 UDP frames (2.8% of bytes) carried a payload no parser recognised.",
        "2 non-IP frames (0.9% of bytes) were ARP and are not analysed.",
    ]
    v = verdicts(cap)
    assert v[1] == coverage_sentences(cap)[0]
    h = headline(cap)
    json.dumps(h)  # JSON-serialisable
    cov = h["coverage"]
    assert cov["frames_analysed"] == 15
    assert cov["by_status"]["encrypted_no_key"] == {"frames": 18, "wire_bytes": 5321}
    assert sum(g["frames"] for g in cov["groups"]) == 52
    assert h["tcp_wire_bytes"] == 2181 + 5321 + 1089
    html = render_report(cap)
    assert 'id="coverage"' in html
    assert "encrypted no key" in html
    assert (
        "No warnings: every frame was read, but 37 of 52 were not analysed (see Coverage)." in html
    )


# -- public corpus ---------------------------------------------------------------------------


def test_quic_capture_with_its_dsb_keys_is_decrypted(corpus: Path, tshark: str) -> None:
    """The Chrome capture's pcapng DSB holds the QUIC secrets too: its QUIC flow (52% of the
    bytes) is decrypted, and nothing is left unanalysed."""
    cap = pcaptools.load(QUIC)
    _check_sums(cap)
    protos = _tshark_protocols(tshark, QUIC)
    quic_frames = sum(":quic" in p for p in protos)
    assert quic_frames == 34
    s = coverage_summary(cap)
    quic = s[s["protocol"].eq("quic")]
    assert quic[["transport", "status", "flows", "frames", "wire_bytes"]].values.tolist() == [
        ["udp", "decrypted", 1, 34, 20066]
    ]
    assert round(float(quic["wire_share"].iloc[0]), 4) == 0.5193
    tcp = s[s["transport"].eq("tcp")]
    assert tcp[["protocol", "status", "frames"]].values.tolist() == [["http2", "decrypted", 49]]
    v = verdicts(cap)
    assert not [x for x in v if "not analysed" in x or "without a key" in x]
    assert coverage_sentences(cap) == []
    # without payload parsing the QUIC observer does not run: the flow is not analysed
    off = pcaptools.load(QUIC, payloads=False)
    assert coverage_summary(off).query("protocol == 'quic'")["status"].astype(str).tolist() == [
        "not_parsed"]
    assert "34 UDP frames (52% of bytes) were QUIC and are not analysed." in verdicts(off)
    # the overhead ratios say which bytes they are taken over
    o = overhead(cap)
    tot = o[o["total"]].iloc[0]
    assert int(tot["wire_bytes"]) == 18572
    assert round(float(tot["capture_wire_share"]), 4) == round(18572 / 38638, 4)
    html = render_report(cap)
    assert "TCP frames only: 18,572 of the capture&#39;s 38,638 bytes (48.1%" in html


def test_tls_without_keys_then_with_them(corpus: Path) -> None:
    path = corpus / "dump.pcapng"
    cap = pcaptools.load(path)
    _check_sums(cap)
    s = coverage_summary(cap)
    assert s[["transport", "protocol", "status", "flows", "frames"]].values.tolist() == [
        ["tcp", "tls", "encrypted_no_key", 73, 1095]
    ]
    keyed = pcaptools.load(path, keylog=corpus / "premaster.txt")
    ks = coverage_summary(keyed)
    assert ks[["protocol", "status", "flows", "frames"]].values.tolist() == [
        ["http1", "decrypted", 73, 1095]
    ]
    assert coverage_sentences(keyed) == []


def test_gquic_dns_ntp_and_unknown_udp_vs_tshark(corpus: Path, tshark: str) -> None:
    path = corpus / "many_interfaces-1.pcapng"
    cap = pcaptools.load(path)
    _check_sums(cap)
    protos = _tshark_protocols(tshark, path)
    cov = cap.coverage
    # per UDP flow, tshark's top protocol of each frame vs our protocol for the flow
    by_frame = {i + 1: p.split(":") for i, p in enumerate(protos)}
    udp = cov[cov["transport"].eq("udp")]
    # our flow protocol (from its first datagram) -> what tshark calls that datagram
    mapping = {
        "dns": {"dns"},
        "ntp": {"ntp"},
        "gquic": {"gquic"},
        "unknown": {"data"},
        "db-lsp-disc": {"db-lsp-disc"},
    }
    for r in udp.itertuples(index=False):
        assert mapping[str(r.protocol)] & set(by_frame[int(r.frame)]), (r.frame, r.protocol)
    assert sum("dns" in x for x in by_frame.values()) == int(
        udp[udp["protocol"].eq("dns")]["frames"].sum()
    )
    # every frame tshark calls gquic is in our gquic flow
    gq = udp[udp["protocol"].eq("gquic")]
    assert sum("gquic" in x for x in by_frame.values()) <= int(gq["frames"].sum()) == 8


@pytest.mark.parametrize("name", [p.name for p in shipped_captures()][:40])
def test_shipped_captures_add_up(name: str) -> None:
    cap = pcaptools.load(CAPTURES / name, packets=False)
    _check_sums(cap)


def test_parallel_and_payloads_off() -> None:
    one = pcaptools.load(MIXED)
    two = pcaptools.load(MIXED, workers=2)
    pd.testing.assert_frame_equal(one.coverage, two.coverage, check_categorical=False)
    off = pcaptools.load(MIXED, payloads=False)
    _check_sums(off)
    tcp = off.coverage[off.coverage["transport"].eq("tcp")]
    assert tcp["status"].astype(str).tolist() == ["not_parsed"] * 3


def test_streaming_export_keeps_the_http1_evidence(tmp_path: Path) -> None:
    base = pcaptools.load(CAPTURES / "http1-basic.pcap")
    streamed = pcaptools.load(CAPTURES / "http1-basic.pcap", out=tmp_path / "o", chunk_rows=1)
    got = streamed.coverage
    pd.testing.assert_frame_equal(
        base.coverage.reset_index(drop=True), got.reset_index(drop=True), check_categorical=False
    )


# -- edge cases (hand-built) -----------------------------------------------------------------


def _quic_long(version: int) -> bytes:
    return bytes([0xC3]) + struct.pack("!I", version) + b"\x08" + b"\x11" * 8 + b"\x00" * 20


@pytest.mark.parametrize(
    ("sport", "dport", "payload", "want"),
    [
        (40000, 53, b"\x12\x34\x01\x00", "dns"),
        (40000, 443, _quic_long(1), "quic"),
        (40000, 4433, _quic_long(0x6B3343CF), "quic"),  # QUIC v2 (RFC 9369)
        (40000, 9000, _quic_long(0xFF00001D), "quic"),  # draft-29 on any port
        (443, 40000, bytes([0x41]) + b"\x00" * 30, "quic"),  # short header on a QUIC port
        (40000, 9000, bytes([0x41]) + b"\x00" * 30, "unknown"),  # ... elsewhere: unknown
        (40000, 443, b"\x0d" + b"\x01" * 8 + b"Q043" + b"\x00" * 10, "gquic"),
        (40000, 3479, b"\x00\x01\x00\x00\x21\x12\xa4\x42" + b"\x00" * 12, "webrtc"),  # STUN
        (40000, 50000, b"\x16\xfe\xfd" + b"\x00" * 20, "webrtc"),  # DTLS 1.2 handshake
        (40000, 123, b"\x23" + b"\x00" * 47, "ntp"),
        (40000, 9999, b"\x00\x07LABDGRAM", "unknown"),
        (40000, 9999, b"", "unknown"),
    ],
)
def test_udp_protocol(sport: int, dport: int, payload: bytes, want: str) -> None:
    assert udp_protocol(sport, dport, payload) == want


@pytest.mark.parametrize(
    ("facts", "want"),
    [
        (ConnectionFacts(payload_bytes=0), ("none", "analysed")),
        (ConnectionFacts(payload_bytes=10), ("unknown", "unknown_payload")),
        (ConnectionFacts(payload_bytes=10, parsed=False), ("unknown", "not_parsed")),
        (ConnectionFacts(payload_bytes=10, layers=("http1",)), ("http1", "analysed")),
        (
            ConnectionFacts(payload_bytes=10, layers=("websocket", "http1")),
            ("websocket", "analysed"),
        ),
        (
            ConnectionFacts(payload_bytes=10, tls_status="decrypted", layers=("http2",)),
            ("http2", "decrypted"),
        ),
        (
            ConnectionFacts(payload_bytes=10, tls_status="partial", layers=("http2",)),
            ("http2", "decrypted"),
        ),
        (
            ConnectionFacts(payload_bytes=10, tls_status="decrypted", tls_app_bytes=5),
            ("tls", "unknown_payload"),
        ),
        (ConnectionFacts(payload_bytes=10, tls_status="no_keys"), ("tls", "encrypted_no_key")),
        (ConnectionFacts(payload_bytes=10, tls_status="failed"), ("tls", "encrypted_no_key")),
        (ConnectionFacts(payload_bytes=10, tls_status="incomplete"), ("tls", "encrypted_no_key")),
        (
            ConnectionFacts(payload_bytes=10, layers=("http2",), malformed="http2.desynced"),
            ("http2", "malformed"),
        ),
    ],
)
def test_connection_verdict(facts: ConnectionFacts, want: tuple[str, str]) -> None:
    v = connection_verdict(facts)
    assert (v.protocol, v.status) == want
    assert v.detail


def test_flow_counter_folds_beyond_its_bound() -> None:
    fc = FlowCounter(Diagnostics(), max_flows=3)
    for i in range(10):
        fc.udp(
            UdpDatagram(
                frame=i + 1,
                ts_ns=0,
                frame_len=100,
                ip_version=4,
                src=b"\x0a\x00\x00\x01",
                dst=b"\x0a\x00\x00\x02",
                ttl=64,
                sport=20000 + i,
                dport=9999,
                payload=b"x" * 10,
            )
        )
    rows = COVERAGE.frame(fc.rows())
    assert len(rows) == 4
    assert rows["frames"].tolist() == [1, 1, 1, 7]
    assert int(rows["wire_bytes"].sum()) == 1000
    assert rows["src"].isna().tolist() == [False, False, False, True]
    assert "folded" in str(rows["detail"].iloc[3])
    fc.other(
        IpPacket(
            frame=11,
            ts_ns=0,
            frame_len=60,
            ip_version=4,
            src=b"\x01" * 4,
            dst=b"\x02" * 4,
            proto=6,
            fragment=False,
        )
    )
    assert COVERAGE.frame(fc.rows())["status"].astype(str).tolist()[-1] == "malformed"


def test_malformed_and_non_ip_frames(tmp_path: Path) -> None:
    eth = b"\x02" * 6 + b"\x04" * 6
    ip_ok = (
        bytes([0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0])
        + b"\x0a\x00\x00\x01"
        + b"\x0a\x00\x00\x02"
        + struct.pack("!HHHH", 5000, 6000, 8, 0)
    )
    bad_ip = bytes([0x43]) + b"\x00" * 30  # header length 12 bytes: malformed
    arp = b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20
    lldp = b"\x02\x07\x04" + b"\x00" * 20
    frames = [
        eth + b"\x08\x00" + ip_ok,
        eth + b"\x08\x00" + bad_ip,
        eth + b"\x08\x06" + arp,
        eth + b"\x88\xcc" + lldp,
        eth + b"\x08\x06" + arp,
    ]
    p = tmp_path / "edge.pcap"
    p.write_bytes(
        pcap_file([(1_700_000_000_000_000_000 + i * 1000, f) for i, f in enumerate(frames)])
    )
    cap = pcaptools.load(p)
    _check_sums(cap)
    got = [
        (int(r.frame), str(r.protocol), str(r.status), int(r.frames))
        for r in cap.coverage.itertuples(index=False)
    ]
    assert got == [
        (1, "unknown", "unknown_payload", 1),
        (2, "ip", "malformed", 1),
        (3, "arp", "not_parsed", 2),
        (4, "lldp", "not_parsed", 1),
    ]
    assert "1 non-IP frame (" in " ".join(coverage_sentences(cap))


def test_empty_coverage_headline() -> None:
    class Bare:
        summary = pcaptools.CaptureSummary(
            path="x", file_size=0, format="pcap", compression=None, linktypes=[]
        )

    assert coverage_headline(Bare())["groups"] == []  # type: ignore[arg-type]


def test_subset_keeps_matching_rows_whole() -> None:
    cap = pcaptools.load(MIXED)
    everything = cap.subset()
    pd.testing.assert_frame_equal(everything.coverage, cap.coverage)
    by_port = cap.subset(port=9999).coverage
    assert [(str(r.transport), str(r.protocol), int(r.frames)) for r in by_port.itertuples()] == [
        ("udp", "unknown", 3)
    ]
    tls = cap.subset(port=443).coverage
    assert tls["protocol"].astype(str).tolist() == ["tls"]
    # a window around the ICMP echo at the end: the ICMP row (whole), no TCP connection
    last = cap.packets["ts"].iloc[-1]
    late = cap.subset(start=last - pd.Timedelta(microseconds=1), end=last).coverage
    assert late["transport"].astype(str).tolist() == ["icmp"]
    assert int(late["frames"].iloc[0]) == 4


@pytest.mark.corpus
def test_cli_json_carries_the_coverage(corpus: Path, tmp_path: Path) -> None:
    from pcaptools import cli

    out, js = tmp_path / "r.html", tmp_path / "s.json"
    assert cli.main([str(QUIC), "-q", "-o", str(out), "--json", str(js)]) == 0
    got = json.loads(js.read_text())["coverage"]
    # (the capture's DSB holds the QUIC secrets too: everything is analysed)
    assert got["frames_analysed"] == 83
    assert got["analysed_wire_share"] == 1.0
    assert {
        "transport": "udp",
        "protocol": "quic",
        "status": "decrypted",
        "flows": 1,
        "frames": 34,
        "wire_bytes": 20066,
        "frames_share": round(34 / 83, 6),
        "wire_share": round(20066 / 38638, 6),
    } in got["groups"]
    assert got["sentences"] == []
    assert out.read_text(encoding="utf-8")


def test_ip_fragments_count_where_the_summary_counts_them(tmp_path: Path) -> None:
    """A UDP datagram in two fragments: the first fragment is an IP row (not yet a datagram),
    the completing one is the UDP flow's frame, as in summary.other_ip_frames / udp_frames."""
    from tests.helpers import ethernet, ipv4, udp

    dgram = udp(40000, 9999, b"z" * 40)
    frags = [
        ethernet(ipv4(dgram[:24], proto=17, df=False, mf=True, ident=7)),
        ethernet(ipv4(dgram[24:], proto=17, df=False, frag_offset=24, ident=7)),
    ]
    p = tmp_path / "frag.pcap"
    p.write_bytes(pcap_file([(1_700_000_000_000_000_000 + i, f) for i, f in enumerate(frags)]))
    cap = pcaptools.load(p)
    _check_sums(cap)
    got = [
        (str(r.transport), str(r.protocol), str(r.status), int(r.frames))
        for r in cap.coverage.itertuples(index=False)
    ]
    assert got == [("ip", "ip_fragment", "analysed", 1), ("udp", "unknown", "unknown_payload", 1)]
    assert cap.summary.udp_frames == 1 and cap.summary.other_ip_frames == 1


def test_unknown_tcp_payload_vs_tshark_data(corpus: Path, tshark: str) -> None:
    """tcp_retransmissions.pcapng: one connection (ports 1048 -> 1043) whose payload tshark
    shows as "data" (no dissector): unknown_payload, with tshark's tcp.len summed."""
    import subprocess

    path = corpus / "tcp_retransmissions.pcapng"
    cap = pcaptools.load(path)
    _check_sums(cap)
    out = subprocess.run(
        [tshark, "-r", str(path), "-n", "-T", "fields", "-e", "frame.protocols", "-e", "tcp.len"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    protos = [ln.split("\t")[0] for ln in out]
    tcp_len = sum(int(ln.split("\t")[1] or 0) for ln in out)
    assert all(p.split(":")[-1] in ("tcp", "data") for p in protos)
    cov = cap.coverage
    assert cov[["transport", "protocol", "status", "frames", "payload_bytes"]].astype(
        object
    ).values.tolist() == [["tcp", "unknown", "unknown_payload", len(protos), tcp_len]]
    assert coverage_sentences(cap)[1] == (
        "6 TCP frames (100% of bytes) in 1 connection carried a payload no parser recognised."
    )


@pytest.mark.parametrize(
    "facts",
    [
        ConnectionFacts(payload_bytes=10),
        ConnectionFacts(payload_bytes=10, layers=("http1",)),
        ConnectionFacts(payload_bytes=10, tls_status="decrypted", tls_app_bytes=5),
        ConnectionFacts(payload_bytes=10, tls_status="partial", alpn="h2", tls_app_bytes=5),
        ConnectionFacts(payload_bytes=10, tls_status="no_keys", tls_version="TLS 1.3"),
        ConnectionFacts(payload_bytes=10, layers=("http2",), malformed="http2.desynced"),
    ],
)
def test_connection_verdict_depends_on_whether_bytes_were_seen_not_how_many(
    facts: ConnectionFacts,
) -> None:
    """CoverageContext.part asks once for each case (its cache key has these as booleans)."""
    more = dataclasses.replace(facts, payload_bytes=facts.payload_bytes * 1000,
                               tls_app_bytes=facts.tls_app_bytes * 1000)
    assert connection_verdict(more) == connection_verdict(facts)


# -- payload after a connection's parsers were let go (tcp.payload_after_release) ------------

_REQ = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
_RESP = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
_LATE = "tcp.payload_after_release"


def _http_connection(cport: int, t0: int, late: bool) -> list[tuple[int, bytes]]:
    """One HTTP/1.1 exchange closed by a FIN each way and a last ACK; with ``late``, 2 s
    later the client sends 20 bytes from its FIN's sequence number on, then 7 more."""
    from tests.helpers import eth_tcp4

    syn, fin, psh, ack = 0x02, 0x01, 0x08, 0x10
    c, s = 1000, 5000
    cfin, sfin = c + 1 + len(_REQ), s + 1 + len(_RESP)
    segs = [(0, True, syn, c, 0, b""), (1, False, syn | ack, s, c + 1, b""),
            (2, True, ack, c + 1, s + 1, b""), (3, True, psh | ack, c + 1, s + 1, _REQ),
            (4, False, psh | ack, s + 1, cfin, _RESP), (5, True, fin | ack, cfin, sfin, b""),
            (6, False, fin | ack, sfin, cfin + 1, b""), (7, True, ack, cfin + 1, sfin + 1, b"")]
    if late:
        segs += [(2_000_000, True, psh | ack, cfin, sfin + 1, b"y" * 20),
                 (2_000_001, True, psh | ack, cfin + 20, sfin + 1, b"z" * 7)]
    out = []
    for us, c2s, flags, seq, ackn, payload in segs:
        sport, dport = (cport, 80) if c2s else (80, cport)
        src, dst = ("10.0.0.1", "10.0.0.2") if c2s else ("10.0.0.2", "10.0.0.1")
        out.append((t0 + us * 1000, eth_tcp4(payload, sport=sport, dport=dport, seq=seq,
                                             ack=ackn, flags=flags, src=src, dst=dst)))
    return out


def _late_payload_capture(tmp_path: Path) -> Path:
    """Two interleaved HTTP/1.1 connections (frames 1-18): tcp_stream 0 ends at frame 13 and
    gets 27 bytes after its FIN in frames 17 and 18; tcp_stream 1 is complete and alone."""
    t0 = 1_700_000_000_000_000_000
    packets = sorted(_http_connection(40000, t0, True) + _http_connection(40001, t0 + 500, False))
    p = tmp_path / "late.pcap"
    p.write_bytes(pcap_file(packets))
    return p


def _freeze_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """load() freezes every connection it may before each segment (as tests/tcp/test_frozen.py:
    the parsers of a connection that ended are let go at its next segment)."""
    import pcaptools.pipeline as pipeline
    from pcaptools.tcp.frozen import FreezePolicy

    monkeypatch.setattr(pipeline, "FreezePolicy", lambda: FreezePolicy(0, 0, 1, 0))


def test_payload_after_release_makes_the_connection_partly_analysed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _late_payload_capture(tmp_path)
    base = pcaptools.load(path)  # (2 connections: nothing frozen, nothing let go)
    assert not len(base.warnings)
    assert base.coverage["status"].astype(str).tolist() == ["analysed", "analysed"]
    _freeze_at_once(monkeypatch)
    cap = pcaptools.load(path)
    _check_sums(cap)
    w = cap.warnings
    assert [(str(c), int(f), int(s)) for c, f, s in zip(w["code"], w["frame"], w["tcp_stream"],
                                                      strict=True)] == [(_LATE, 17, 0),
                                                                        (_LATE, 18, 0)]
    cov = cap.coverage
    assert cov[["tcp_stream", "protocol", "status", "frames", "payload_bytes"]].astype(
        object).values.tolist() == [[0, "http1", "partly_analysed", 10, 97],
                                    [1, "http1", "analysed", 8, 70]]
    # (the bytes too once the warning rows carry them: the next test)
    detail = str(cov["detail"].iloc[0])
    assert detail.startswith("cleartext; payload after the connection ended not parsed: ")
    assert detail.endswith(" 2 segments (tcp.payload_after_release)")
    # every other value of the rows is what it is without the late payload's warnings
    same = [c for c in COVERAGE.names if c not in ("status", "detail")]
    pd.testing.assert_frame_equal(cov[same], base.coverage[same])
    pd.testing.assert_frame_equal(cov.iloc[1:], base.coverage.iloc[1:], check_categorical=False)
    # the account of what was not analysed says so
    assert coverage_sentences(cap) == [
        "pcaptools analysed 8 of 18 frames (44% of bytes); the rest is listed below and in the "
        "Coverage section.",
        "10 TCP frames (56% of bytes) in 1 connection were HTTP/1.x whose payload after the "
        "connection's end was not parsed.",
    ]
    assert coverage_headline(cap)["by_status"]["partly_analysed"] == {
        "frames": 10, "wire_bytes": int(cov["wire_bytes"].iloc[0])}
    html = render_report(cap)
    assert "partly analysed" in html and "Partly analysed: connections parsed to their end" in html
    assert "Partly analysed" not in render_report(base)
    # the streaming export (coverage written a chunk of connections at a time) says the same
    streamed = pcaptools.load(path, out=tmp_path / "o", chunk_rows=1)
    pd.testing.assert_frame_equal(streamed.coverage.reset_index(drop=True),
                                  cov.reset_index(drop=True), check_categorical=False)


def test_payload_after_release_bytes_reach_the_coverage_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _freeze_at_once(monkeypatch)
    cap = pcaptools.load(_late_payload_capture(tmp_path))
    assert cap.warnings["bytes"].tolist() == [20, 7]
    assert str(cap.coverage["detail"].iloc[0]) == (
        "cleartext; payload after the connection ended not parsed: 27 bytes in 2 segments "
        "(tcp.payload_after_release)")


def test_unparsed_payload_bytes_are_summed_from_the_warning_rows() -> None:
    """coverage_table over hand-made tables: tcp_stream 0 and 1 parsed as HTTP/1.x, 2 without
    a TLS key, 3 parsed until a parser gave up; the bytes of 0's warnings are summed, 1's are
    not all known (its detail counts segments), 2 stays encrypted_no_key, 3 malformed; 4 has
    none of those warnings and is untouched."""
    from pcaptools.diagnostics import ShardDiagnostics
    from pcaptools.tables.coverage import coverage_table
    from pcaptools.tables.foundation import CONNECTIONS
    from pcaptools.tables.tcp_tables import warnings_table
    from pcaptools.tables.tls_tables import TLS_HANDSHAKES
    from tests.report.factory import conn_row

    diag = ShardDiagnostics((0, 1))  # (its add() hands nbytes on as Diagnostics' does)
    for st, nb in ((0, 20), (0, 7), (1, 5), (1, None), (2, 9), (3, 4)):
        diag.add(_LATE, "late", frame=100 + st, tcp_stream=st, nbytes=nb)
    diag.add("http2.desynced", "lost", frame=90, tcp_stream=3)
    diag.add(_LATE, "no connection", frame=99)
    w = warnings_table(diag)
    assert w["bytes"].tolist()[:6] == [20, 7, 5, pd.NA, 9, 4]
    conns = CONNECTIONS.frame([conn_row(i, first_frame=1 + i) for i in range(5)])
    tls = {"tcp_stream": 2, "decrypt_status": "no_keylog", "version": "TLS 1.3"}
    zero = {"int64": 0, "bool": False, "float64": float("nan")}
    hs = TLS_HANDSHAKES.frame([tuple(tls.get(c.name, zero.get(c.dtype))
                                     for c in TLS_HANDSHAKES.columns)])
    tables = {"connections": conns, "warnings": w, "tls_handshakes": hs}
    cov = coverage_table(tables, None, extra_streams={"http_requests": {0, 1, 4},
                                                      "http2_connections": {3}})
    assert cov[["tcp_stream", "protocol", "status", "detail"]].astype(object).values.tolist() == [
        [0, "http1", "partly_analysed", "cleartext; payload after the connection ended not "
         "parsed: 27 bytes in 2 segments (tcp.payload_after_release)"],
        [1, "http1", "partly_analysed", "cleartext; payload after the connection ended not "
         "parsed: 2 segments (tcp.payload_after_release)"],
        [2, "tls", "encrypted_no_key", "TLS 1.3: no key log; payload after the connection "
         "ended not parsed: 9 bytes in 1 segment (tcp.payload_after_release)"],
        [3, "http2", "malformed", "cleartext; payload after the connection ended not parsed: "
         "4 bytes in 1 segment (tcp.payload_after_release); parsing stopped (http2.desynced)"],
        [4, "http1", "analysed", "cleartext"],
    ]
    # warnings without the bytes column (tables from elsewhere): the segments are counted
    old = coverage_table({**tables, "warnings": w.drop(columns="bytes")}, None,
                         extra_streams={"http_requests": {0}})
    assert str(old["detail"].iloc[0]) == (
        "cleartext; payload after the connection ended not parsed: 2 segments "
        "(tcp.payload_after_release)")
