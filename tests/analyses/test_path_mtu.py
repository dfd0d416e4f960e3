"""Path-MTU problems: the icmp_errors and path_mtu tables, DF and the largest segment delivered
in connections, the pmtu_black_hole verdict of disconnects(), the report section and --json.

Truth: the recorded captures pmtu-icmp-{server,client}.pcap and pmtu-blackhole-{server,
client}.pcap (scripts/record_captures.py: client - router - server, the router's link toward
the client has MTU 1400, ICMP sent / dropped by iptables; their facts say so), tshark 4.0 on
the same files, and the MTU itself: 1400 - 20 (IPv4) - 20 (TCP) - 12 (timestamps option) =
1348 payload bytes, 1400 - 40 - 20 - 12 = 1328 over IPv6. Hand-built flows for the cases the
lab does not make (an ignored ICMP, a dead path, ordinary loss, a fall-back without ICMP,
odd ICMP quotes).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.disconnects import disconnects
from pcaptools.cli import main
from pcaptools.tables.icmp_tables import ICMP_ERRORS, PATH_MTU
from tests.conftest import CAPTURES
from tests.helpers import _checksum, ethernet, ipv4, ipv6, pcap_file, tcp, udp, write

ICMP_SRV = CAPTURES / "pmtu-icmp-server.pcap"
ICMP_CLI = CAPTURES / "pmtu-icmp-client.pcap"
BH_SRV = CAPTURES / "pmtu-blackhole-server.pcap"
BH_CLI = CAPTURES / "pmtu-blackhole-client.pcap"
MTU = 1400
SEG4, SEG6 = MTU - 20 - 20 - 12, MTU - 40 - 20 - 12  # what fits, with the timestamps option


def _need(p: Path) -> Path:
    if not p.is_file():
        pytest.skip(f"{p.name} is absent")
    return p


def _facts(p: Path) -> dict[str, Any]:
    return dict(json.loads((p.parent / f"{p.name}.facts.json").read_text()))


def _tshark(
    tshark: str, p: Path, fields: list[str], yfilter: str, occ: str = "f"
) -> list[list[str]]:
    import subprocess

    args = [tshark, "-n", "-r", str(p), "-Y", yfilter, "-T", "fields", "-E", "separator=\t",
            "-E", f"occurrence={occ}"]
    for f in fields:
        args += ["-e", f]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [ln.split("\t") for ln in out.splitlines()]


@pytest.fixture(scope="module")
def caps() -> dict[str, pcaptools.Capture]:
    return {p.name: pcaptools.load(_need(p)) for p in (ICMP_SRV, ICMP_CLI, BH_SRV, BH_CLI)}


# ------------------------------------------------------------------ recorded captures vs tshark

_ICMP_FILTER = "icmp.type in {3,4,5,11,12} or icmpv6.type in {1,2,3,4}"


@pytest.mark.parametrize("name", ["pmtu-icmp-server.pcap", "tcp-refused.pcap"])
def test_icmp_errors_match_tshark(name: str, tshark: str) -> None:
    path = _need(CAPTURES / name)
    cap = pcaptools.load(path)
    ie = cap.icmp_errors
    ICMP_ERRORS.check(ie)
    want = _tshark(tshark, path, ["frame.number", "icmp.type", "icmpv6.type", "icmp.code",
                                  "icmpv6.code", "icmp.mtu", "icmpv6.mtu", "tcp.stream"],
                   _ICMP_FILTER)
    # the quoted packet's addresses and ports: the last occurrence of each field
    quoted = _tshark(tshark, path, ["ip.src", "ipv6.src", "ip.dst", "ipv6.dst", "tcp.srcport",
                                    "tcp.dstport", "ip.len", "ipv6.plen"], _ICMP_FILTER, "l")
    assert len(ie) == len(want) > 0
    for r, w, q in zip(ie.to_dict("records"), want, quoted, strict=True):
        assert r["frame"] == int(w[0])
        assert r["type"] == int(w[1] or w[2]) and r["code"] == int(w[3] or w[4])
        mtu = w[5] or w[6]
        assert (r["mtu"] if r["mtu"] is not pd.NA else None) == (int(mtu) if mtu else None)
        assert r["tcp_stream"] == int(w[7])
        assert (r["quoted_src"], r["quoted_dst"]) == (q[0] or q[1], q[2] or q[3])
        assert (r["quoted_sport"], r["quoted_dport"]) == (int(q[4]), int(q[5]))
        assert r["quoted_len"] == (int(q[6]) if q[6] else 40 + int(q[7]))
    if name == "pmtu-icmp-server.pcap":
        # the router's errors: 10 per connection (one per 1500-byte segment of the first
        # flight), to the server, about its packets to the client
        t = _facts(path)["truth"]["pmtu"]["icmp_errors"]
        assert ie["frame"].tolist() == [e["frame"] for e in t]
        assert ie["kind"].astype(str).value_counts().to_dict() == {"frag_needed": 10,
                                                                    "packet_too_big": 10}
        assert set(ie["mtu"]) == {MTU} and set(ie["quoted_len"]) == {1500}
        assert set(ie["direction"].astype(str)) == {"server_to_client"}
        assert set(ie["src"]) == {"198.51.100.1", "2001:db8:78::1"}
        assert bool(ie["quoted_df"].all())
    else:
        assert ie["kind"].astype(str).tolist() == ["port_unreachable"]


@pytest.mark.parametrize("name", ["pmtu-icmp-server.pcap", "pmtu-icmp-client.pcap",
                                  "pmtu-blackhole-server.pcap", "pmtu-blackhole-client.pcap"])
def test_largest_segments_and_df(name: str, caps: dict[str, pcaptools.Capture],
                                 tshark: str) -> None:
    cap = caps[name]
    c = cap.connections.set_index("tcp_stream")
    rows = _tshark(tshark, CAPTURES / name, ["tcp.stream", "tcp.srcport", "tcp.len",
                                            "ip.flags.df"], "tcp.len > 0")
    for st in (0, 1):
        for side, port_is_server in (("client", False), ("server", True)):
            lens = [int(r[2]) for r in rows
                    if int(r[0]) == st and (r[1] == "80") == port_is_server]
            assert c.loc[st, f"{side}_max_seg_bytes"] == max(lens, default=0)
            dfs = [r[3] for r in rows if int(r[0]) == st and (r[1] == "80") == port_is_server]
            want_df = None if not lens else all(x in ("", "1", "True") for x in dfs)
            got = c.loc[st, f"{side}_df"]
            assert (None if got is pd.NA else bool(got)) == want_df
        assert c.loc[st, "client_max_acked_seg_bytes"] == 73  # the GET request
    seg = [SEG4, SEG6]
    if name == "pmtu-icmp-server.pcap":
        # the first flight (MSS 1460: 1448 / 1428 bytes) was too big; what got through fits
        assert c["server_max_seg_bytes"].tolist() == [SEG4 + 100, SEG6 + 100]
        assert c["server_max_acked_seg_bytes"].tolist() == seg
    elif name == "pmtu-icmp-client.pcap":
        assert c["server_max_seg_bytes"].tolist() == seg
        assert c["server_max_acked_seg_bytes"].tolist() == seg
    elif name == "pmtu-blackhole-server.pcap":
        assert c["server_max_seg_bytes"].tolist() == [SEG4 + 100, SEG6 + 100]
        assert c["server_max_acked_seg_bytes"].tolist() == [0, 0]  # nothing got through
    else:
        assert c["server_max_seg_bytes"].tolist() == [0, 0]  # nothing arrived at all


def test_path_mtu_discovery_row(caps: dict[str, pcaptools.Capture], tshark: str) -> None:
    cap = caps["pmtu-icmp-server.pcap"]
    pm = cap.path_mtu
    PATH_MTU.check(pm)
    assert pm["tcp_stream"].tolist() == [0, 1]
    assert set(pm["outcome"].astype(str)) == {"discovered"}
    assert set(pm["direction"].astype(str)) == {"server_to_client"}
    assert pm["mtu"].tolist() == [MTU, MTU] and pm["icmp_mtu"].tolist() == [MTU, MTU]
    assert pm["icmp_errors"].tolist() == [10, 10]
    assert pm["ip_version"].tolist() == [4, 6]
    fields = ["frame.number", "frame.time_epoch", "tcp.stream", "tcp.srcport", "tcp.seq",
              "tcp.len", "tcp.ack", "tcp.analysis.initial_rtt"]
    rows = _tshark(tshark, ICMP_SRV, fields, "tcp && !icmp && !icmpv6")
    for r, seg in zip(pm.to_dict("records"), (SEG4, SEG6), strict=True):
        st = r["tcp_stream"]
        mine = [x for x in rows if int(x[2]) == st]
        data = [x for x in mine if x[3] == "80" and int(x[5]) > 0]
        first = data[0]  # the first server segment is the first one too big
        assert (r["big_frame"], r["big_seg_bytes"]) == (int(first[0]), int(first[5]))
        resend = next(x for x in data if x[4] == first[4] and int(x[5]) < int(first[5]))
        assert (r["resend_frame"], r["resend_seg_bytes"]) == (int(resend[0]), seg)
        end = int(first[4]) + int(first[5])
        ack = next(x for x in mine if x[3] != "80" and int(x[6]) >= end)
        assert r["delivered_frame"] == int(ack[0])
        t = {int(x[0]): float(x[1]) for x in mine}
        delivered = (t[int(ack[0])] - t[int(first[0])]) * 1e3
        assert r["delivered_ms"] == pytest.approx(delivered, abs=2e-3)
        assert r["adapt_ms"] == pytest.approx((t[int(resend[0])] - t[int(first[0])]) * 1e3,
                                              abs=2e-3)
        irtt = float(next(x[7] for x in mine if x[7])) * 1e3
        assert r["cost_ms"] == pytest.approx(max(0.0, delivered - irtt), abs=2e-3)
        assert r["icmp_frame"] == cap.icmp_errors.query("tcp_stream == @st")["frame"].min()
    # the downloads completed: no disconnect verdict
    assert len(disconnects(cap)) == 0


def test_receiver_side_sees_no_discovery(caps: dict[str, pcaptools.Capture]) -> None:
    # at the client the ICMP errors and the too-big first flight never appear: only the
    # smaller segments (connections.server_max_seg_bytes, above)
    cap = caps["pmtu-icmp-client.pcap"]
    assert len(cap.icmp_errors) == 0 and len(cap.path_mtu) == 0
    assert len(disconnects(cap)) == 0


def test_black_hole_verdict_at_the_sender(caps: dict[str, pcaptools.Capture],
                                          tshark: str) -> None:
    cap = caps["pmtu-blackhole-server.pcap"]
    assert len(cap.icmp_errors) == 0 and len(cap.path_mtu) == 0
    d = disconnects(cap)
    assert d["verdict"].astype(str).tolist() == ["pmtu_black_hole", "pmtu_black_hole"]
    assert d["signals"].tolist() == ["pmtu_black_hole,reset"] * 2  # it used to say just "reset"
    assert d["peer"].astype(str).tolist() == ["client", "client"]
    assert d["noticed_how"].astype(str).tolist() == ["rst_received", "rst_received"]
    retx = _tshark(tshark, BH_SRV, ["frame.number", "tcp.stream", "tcp.len"],
                   "tcp.analysis.retransmission")
    rst = _tshark(tshark, BH_SRV, ["frame.number", "tcp.stream"], "tcp.flags.reset == 1")
    first = _tshark(tshark, BH_SRV, ["frame.number", "tcp.stream"], "tcp.len > 1000")
    for r in d.to_dict("records"):
        st = r["tcp_stream"]
        frames = [int(x[0]) for x in retx if int(x[1]) == st]
        assert r["retransmissions_after_peer"] == len(frames) == 3
        rst_frame = next(int(x[0]) for x in rst if int(x[1]) == st)
        big = next(int(x[0]) for x in first if int(x[1]) == st)
        assert r["noticed_frame"] == rst_frame and r["first_unanswered_frame"] == big
        assert r["evidence_frames"] == sorted({big, *frames, rst_frame})
        assert "no ICMP" in r["summary"] and "largest server segment acknowledged: none" \
            in r["summary"]
    # the facts: ICMP dropped at the router, the downloads never completed
    t = _facts(BH_SRV)["truth"]["pmtu"]
    assert t["router_icmp"] == "dropped" and not any(t["downloads_complete"].values())


def test_black_hole_is_not_visible_at_the_receiver(caps: dict[str, pcaptools.Capture]) -> None:
    # the client never sees the large segments: its capture keeps the ending's verdict
    d = disconnects(caps["pmtu-blackhole-client.pcap"])
    assert d["verdict"].astype(str).tolist() == ["reset", "reset"]


def test_json_and_report_show_the_facts(tmp_path: Path) -> None:
    out, js = tmp_path / "r.html", tmp_path / "s.json"
    assert main([str(_need(BH_SRV)), "-o", str(out), "--json", str(js), "-q"]) == 0
    h = json.loads(js.read_text())
    assert [x["tcp_stream"] for x in h["pmtu_black_holes"]] == [0, 1]
    assert h["icmp_errors"] == 0 and h["path_mtu"] == []
    html = out.read_text()
    assert '<section id="path-mtu">' in html
    assert "path-MTU black hole toward the client" in html
    assert "2 path-MTU black holes." in html  # the checklist's Path MTU line
    assert "pmtu_black_hole" in html  # the Disconnects table's verdict column
    assert main([str(_need(ICMP_SRV)), "-o", str(out), "--json", str(js), "-q"]) == 0
    h = json.loads(js.read_text())
    assert h["icmp_errors"] == 20
    assert h["icmp_errors_by_kind"] == {"frag_needed": 10, "packet_too_big": 10}
    assert [(x["outcome"], x["mtu"], x["big_seg_bytes"], x["resend_seg_bytes"])
            for x in h["path_mtu"]] == [("discovered", MTU, SEG4 + 100, SEG4),
                                        ("discovered", MTU, SEG6 + 100, SEG6)]
    assert h["pmtu_black_holes"] == []
    html = out.read_text()
    assert "path-MTU discovery by the server: ICMP said MTU 1400 (frame 7)" in html
    assert "20 ICMP errors; 2 connection directions learnt a smaller path MTU (1400 bytes)." \
        in html  # the checklist's Path MTU line


# ------------------------------------------------------------------ hand-built flows

C, S = "10.0.0.1", "10.0.0.2"
R = "10.9.9.9"
MS = 1_000_000
T0 = 1_700_000_000 * 1_000_000_000


class _Flow:
    """A TCP connection client C:40000 -> server S:80, frames built in order."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, bytes]] = []
        self.cseq, self.sseq = 1000, 5000

    def _t(self, ms: float) -> int:
        return T0 + int(ms * MS)

    def c(self, ms: float, flags: int, n: int = 0, *, seq: int | None = None,
          ack: int | None = None) -> None:
        s = self.cseq if seq is None else seq
        a = self.sseq if ack is None else ack
        self.frames.append((self._t(ms), ethernet(ipv4(tcp(40000, 80, s, a, flags,
                                                           b"c" * n, src=C, dst=S), C, S))))
        if seq is None:
            self.cseq += n + (1 if flags & 0x03 else 0)

    def s(self, ms: float, flags: int, n: int = 0, *, seq: int | None = None,
          ack: int | None = None) -> None:
        sq = self.sseq if seq is None else seq
        a = self.cseq if ack is None else ack
        self.frames.append((self._t(ms), ethernet(ipv4(tcp(80, 40000, sq, a, flags,
                                                           b"s" * n, src=S, dst=C), S, C))))
        if seq is None:
            self.sseq += n + (1 if flags & 0x03 else 0)

    def c_ack(self, ms: float, ack: int) -> None:
        self.frames.append((self._t(ms), ethernet(ipv4(tcp(40000, 80, self.cseq, ack, 0x10,
                                                           src=C, dst=S), C, S))))

    def handshake(self) -> None:
        self.c(0, 0x02)
        self.s(1, 0x12)
        self.c(2, 0x10)
        self.c(3, 0x18, 100)
        self.s(4, 0x10)

    def icmp_too_big(self, ms: float, seq: int, n: int, mtu: int = 1400) -> None:
        quoted = ipv4(tcp(80, 40000, seq, self.cseq, 0x10, b"s" * n, src=S, dst=C), S, C)
        body = struct.pack("!BBHHH", 3, 4, 0, 0, mtu) + quoted[:40]  # (IP + TCP header)
        body = body[:2] + struct.pack("!H", _checksum(body)) + body[4:]
        self.frames.append((self._t(ms), ethernet(ipv4(body, R, S, proto=1))))

    def load(self, tmp: Path) -> pcaptools.Capture:
        return pcaptools.load(write(tmp / "f.pcap", pcap_file(self.frames)))


def test_icmp_ignored_black_hole(tmp_path: Path) -> None:
    f = _Flow()
    f.handshake()
    big = f.sseq
    f.s(5, 0x10, 1448)  # frame 6
    f.icmp_too_big(5.1, big, 1448)  # frame 7
    f.s(205, 0x10, 1448, seq=big)  # 8: same size again, twice
    f.s(605, 0x10, 1448, seq=big)  # 9
    f.c(900, 0x14, ack=big)  # 10: the client gives up with RST (it never got the data)
    cap = f.load(tmp_path)
    pm = cap.path_mtu
    assert pm[["tcp_stream", "outcome", "mtu", "icmp_errors", "icmp_frame"]].astype(object) \
        .values.tolist() == [[0, "icmp_ignored", 1400, 1, 7]]
    assert pm["big_frame"].isna().all()
    d = disconnects(cap)
    r = d.iloc[0]
    assert r["verdict"] == "pmtu_black_hole" and r["peer"] == "client"
    assert "1 ICMP too-big error(s) reached the server (first: frame 7, MTU 1400)" in r["summary"]
    assert r["evidence_frames"] == [6, 7, 8, 9, 10]
    assert cap.connections.loc[0, "server_max_acked_seg_bytes"] == 0


def test_dead_path_is_not_a_black_hole(tmp_path: Path) -> None:
    f = _Flow()
    f.handshake()
    big = f.sseq
    for ms in (5, 205, 605, 1405):  # nothing ever comes back from the client
        f.s(ms, 0x10, 1448, seq=big)
    d = disconnects(f.load(tmp_path))
    assert d["verdict"].astype(str).tolist() == ["peer_vanished"]


def test_ordinary_loss_is_not_a_black_hole(tmp_path: Path) -> None:
    f = _Flow()
    f.handshake()
    big = f.sseq
    f.s(5, 0x10, 1448)
    f.s(205, 0x10, 1448, seq=big)
    f.s(605, 0x10, 1448, seq=big)
    f.c_ack(606, big + 1448)
    f.c(700, 0x11)
    f.s(701, 0x11)
    f.c_ack(702, f.sseq)
    cap = f.load(tmp_path)
    assert cap.connections.loc[0, "server_max_acked_seg_bytes"] == 1448
    assert len(cap.path_mtu) == 0 and len(disconnects(cap)) == 0


def test_fallback_without_icmp(tmp_path: Path) -> None:
    f = _Flow()
    f.handshake()
    big = f.sseq
    f.s(5, 0x10, 1448)  # frame 6
    f.s(205, 0x10, 1448, seq=big)  # 7
    f.s(605, 0x10, 1448, seq=big)  # 8
    f.s(1405, 0x10, 1024, seq=big)  # 9: smaller, as Linux tcp_mtu_probing does
    f.c_ack(1406, big + 1024)  # 10
    f.s(1407, 0x10, 424, seq=big + 1024)  # 11
    f.c_ack(1408, big + 1448)  # 12: the first segment's data delivered
    f.c(1500, 0x11)
    f.s(1501, 0x11)
    f.c_ack(1502, f.sseq)
    cap = f.load(tmp_path)
    r = cap.path_mtu.astype(object).iloc[0].to_dict()
    assert (r["outcome"], r["mtu"], r["icmp_errors"]) == ("no_icmp", 1024 + 40, 0)
    assert (r["big_frame"], r["big_seg_bytes"], r["resend_frame"], r["resend_seg_bytes"]) == (
        6, 1448, 9, 1024)
    assert r["delivered_frame"] == 12
    assert r["adapt_ms"] == pytest.approx(1400.0) and r["delivered_ms"] == pytest.approx(1403.0)
    assert r["cost_ms"] == pytest.approx(1403.0 - 2.0)  # minus the initial RTT (SYN to ACK)
    assert cap.connections.loc[0, "server_max_acked_seg_bytes"] == 1024
    assert len(disconnects(cap)) == 0  # it recovered and closed cleanly


def test_odd_icmp_quotes(tmp_path: Path) -> None:
    quoted_udp = ipv4(udp(5000, 53, b"q" * 40), C, S, proto=17)
    v6_quoted = ipv6(tcp(80, 40000, 1, 1, 0x10, b"x" * 1300), "2001:db8::2", "2001:db8::1")
    frames = [
        # 1: fragmentation needed quoting UDP, with an old router's MTU 0
        ethernet(ipv4(struct.pack("!BBHHH", 3, 4, 0, 0, 0) + quoted_udp[:28], R, C, proto=1)),
        # 2: port unreachable quoting only 8 bytes of an IP header: no addresses
        ethernet(ipv4(struct.pack("!BBHI", 3, 3, 0, 0) + quoted_udp[:8], R, C, proto=1)),
        # 3: an echo reply is not an error
        ethernet(ipv4(struct.pack("!BBHHH", 0, 0, 0, 1, 1) + b"ping", S, C, proto=1)),
        # 4: ICMPv6 packet too big (MTU 1280) quoting a TCP segment of no known connection
        ethernet(ipv6(struct.pack("!BBHI", 2, 0, 0, 1280) + v6_quoted[:60], "2001:db8::9",
                      "2001:db8::2", 58), 0x86DD),
        # 5: time exceeded quoting a later IPv4 fragment (no ports)
        ethernet(ipv4(struct.pack("!BBHI", 11, 0, 0, 0)
                      + ipv4(b"\0" * 8, C, S, proto=17, df=False, frag_offset=8), R, C,
                      proto=1)),
    ]
    cap = pcaptools.load(write(tmp_path / "i.pcap",
                               pcap_file([(T0 + i * MS, d) for i, d in enumerate(frames)])))
    ie = cap.icmp_errors.astype(object).where(cap.icmp_errors.notna(), None)
    got = ie[["frame", "kind", "mtu", "quoted_proto", "quoted_src", "quoted_sport",
              "quoted_dport", "quoted_len", "quoted_df", "tcp_stream"]].values.tolist()
    assert got == [
        [1, "frag_needed", 0, 17, C, 5000, 53, 68, True, None],
        [2, "port_unreachable", None, None, None, None, None, None, None, None],
        [4, "packet_too_big", 1280, 6, "2001:db8::2", 80, 40000, 1360, True, 0],
        [5, "time_exceeded", None, 17, C, None, None, 28, False, None],
    ]
    # the quoted segment made tcp.stream 0 (roles guessed: port 80 is the server)
    assert ie.loc[2, "direction"] == "server_to_client"
    assert cap.warnings["code"].astype(str).tolist() == []


def test_black_hole_as_a_stall_cause(tmp_path: Path) -> None:
    """No RST, no FIN: the transfer just hangs until the capture ends (a stalled stream)."""
    f = _Flow()
    f.handshake()
    big = f.sseq
    f.s(5, 0x10, 1448)  # frame 6
    f.s(205, 0x10, 1448, seq=big)  # 7
    f.s(605, 0x10, 1448, seq=big)  # 8
    f.c(700, 0x18, 20, ack=big)  # 9: the client is still there (another small request)
    f.s(701, 0x10, ack=f.cseq)  # 10: acknowledged, so small packets pass both ways
    f.s(1405, 0x10, 1448, seq=big)  # 11
    f.c_ack(3000, big)  # 12: a duplicate ACK, nothing more
    d = disconnects(f.load(tmp_path))
    r = d.iloc[0]
    assert (r["verdict"], r["noticed_how"], r["retransmissions_after_peer"]) == (
        "pmtu_black_hole", "eof", 3)
    assert r["evidence_frames"] == [6, 7, 8, 11]
