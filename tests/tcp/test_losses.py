"""tcp_losses: segments resent, from any vantage point, against the link emulator's drop log.

The recorded captures come from ``scripts/record_captures.py``: the TAP forwarder of
``scripts/netlab.py`` logs every frame it dropped (``link.<direction>.dropped_segments`` in
the ``.facts.json``), and data segments (len > 0) are what a sender has to send again.
Hand-built pcaps cover what the recordings do not: capture drops, late originals,
gaps open at the end, D-SACK.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.tables.foundation import CONNECTIONS, TCP_LOSSES
from tests.tcp._pcapgen import ACK, PSH, SYN, Pkt, write_pcap

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
MS = 1_000_000


def drop_log(path: Path, cap: pcaptools.Capture) -> dict[tuple[int, str], int]:
    """(tcp_stream, direction) -> data segments the link dropped, from the facts file."""
    facts = json.loads(Path(f"{path}.facts.json").read_text())
    streams = {(r.client_addr, r.client_port): r.tcp_stream
               for r in cap.connections.itertuples()}
    out: dict[tuple[int, str], int] = {}
    for d in ("client_to_server", "server_to_client"):
        for x in facts["link"][d]["dropped_segments"]:
            if x["len"] == 0:
                continue
            src, dst = x["flow"].split(">")
            host, port = (src if d == "client_to_server" else dst).rsplit(":", 1)
            st = streams.get((host, int(port)))
            if st is not None:  # (compare-h1/h2 share one link log: the other capture's flows)
                out[(st, d)] = out.get((st, d), 0) + 1
    return out


def black_hole_streams(path: Path, cap: pcaptools.Capture) -> set[int]:
    """tcp.stream of the connections whose path the recording made vanish (end black-hole)."""
    facts = json.loads(Path(f"{path}.facts.json").read_text())
    streams = {(r.client_addr, r.client_port): r.tcp_stream
               for r in cap.connections.itertuples()}
    out = set()
    for c in facts["connections"]:
        if c["end"] == "black-hole":
            host, port = c["client"].rsplit(":", 1)
            out.add(int(streams[(host, int(port))]))
    return out


def counts(cap: pcaptools.Capture, kind: str) -> dict[tuple[int, str], int]:
    lo = cap.tcp_losses
    g = lo[lo["kind"] == kind].groupby(["tcp_stream", "direction"], observed=True).size()
    return {(int(k[0]), str(k[1])): int(v) for k, v in g.items()}


@pytest.fixture(scope="module")
def caps() -> dict[str, pcaptools.Capture]:
    names = ["http1-lossy.pcap", "http1-lossy-server.pcap", "compare-h1.pcapng",
             "compare-h2.pcapng", "h2-sse-lossy.pcapng", "h2-sse-lossy-server.pcapng",
             "demo.pcapng", "tls-versions-ciphers.pcapng"]
    return {n: pcaptools.load(CAPTURES / n, packets=False, payloads=False) for n in names}


@pytest.mark.parametrize("name", ["compare-h1.pcapng", "compare-h2.pcapng", "demo.pcapng",
                                  "h2-sse-lossy.pcapng", "h2-sse-lossy-server.pcapng"])
def test_losses_equal_the_drop_log(caps: dict[str, pcaptools.Capture], name: str) -> None:
    cap = caps[name]
    TCP_LOSSES.check(cap.tcp_losses)
    truth = drop_log(CAPTURES / name, cap)
    assert truth  # every one of these runs dropped data segments
    got = counts(cap, "loss")
    # demo: one connection's path vanishes (iptables DROP at the server, not the link): what
    # its client resent into the void was lost after the capture point, outside the drop log
    void = black_hole_streams(CAPTURES / name, cap)
    lo = cap.tcp_losses
    in_void = lo[lo["tcp_stream"].isin(void)]
    assert set(in_void["direction"].astype(str)) <= {"client_to_server"}
    assert set(in_void["lost_where"].astype(str)) <= {"after_capture"}
    assert len(in_void) == (5 if name == "demo.pcapng" else 0)
    assert {k: v for k, v in got.items() if k[0] not in void} == truth
    assert counts(cap, "spurious") == {}
    assert not cap.tcp_losses["kind"].isin(["capture_drop", "unresolved"]).any()


def test_no_loss_on_a_clean_link_only_a_spurious_resend(
        caps: dict[str, pcaptools.Capture]) -> None:
    """tls-versions-ciphers went over a plain veth (nothing dropped): tshark's one flagged
    retransmission there (frame 12, a plain "retransmission" for tshark) is spurious: the
    peer's next ACK (frame 13) carries a D-SACK for exactly its bytes [321, 425)."""
    cap = caps["tls-versions-ciphers.pcapng"]
    assert len(cap.retransmissions) == 1
    lo = cap.tcp_losses
    assert lo["kind"].astype(str).tolist() == ["spurious"]
    assert lo[["frame", "seq", "len"]].astype(object).values.tolist() == [[12, 321, 104]]
    assert lo["tshark_kind"].astype(str).tolist() == ["retransmission"]
    assert int(cap.connections[["client_lost_segments", "server_lost_segments"]].sum().sum()) == 0


def test_h2_sse_lossy_same_losses_from_both_ends(caps: dict[str, pcaptools.Capture]) -> None:
    """One run, two captures: the same 3 segments, lost before the capture point at the
    receiver's end and after it at the sender's end (drop log: 1 client, 2 server segments)."""
    c, s = caps["h2-sse-lossy.pcapng"].tcp_losses, caps["h2-sse-lossy-server.pcapng"].tcp_losses
    key = ["direction", "seq", "len"]
    assert c[key].astype(object).values.tolist() == s[key].astype(object).values.tolist() == [
        ["client_to_server", 2611, 31], ["server_to_client", 6256, 225],
        ["server_to_client", 41235, 207]]
    assert c["lost_where"].tolist() == ["after_capture", "before_capture", "before_capture"]
    assert s["lost_where"].tolist() == ["before_capture", "after_capture", "after_capture"]
    # client side: the server's two segments never reached it; the gap frames revealed them
    assert c["first_frame"].tolist()[1:] == [pd.NA, pd.NA]
    assert c["gap_frame"].tolist() == [pd.NA, 60, 285]
    assert c["frame"].tolist() == [169, 110, 320]
    assert s["first_frame"].tolist() == [pd.NA, 52, 276]
    assert s["frame"].tolist() == [185, 88, 305]
    assert c["recovery"].tolist() == s["recovery"].tolist() == ["fast_retransmit"] * 3
    for cap, vantage in ((caps["h2-sse-lossy.pcapng"], "client"),
                         (caps["h2-sse-lossy-server.pcapng"], "server")):
        row = cap.connections.iloc[0]
        assert row["capture_vantage"] == vantage
        assert (row["client_lost_segments"], row["server_lost_segments"]) == (1, 2)
        assert (row["client_spurious_resends"], row["server_spurious_resends"]) == (0, 0)
    # tshark's flag count sees only part of it from the client: 2 of the 3
    assert len(caps["h2-sse-lossy.pcapng"].retransmissions) == 2


def test_http1_lossy_both_ends(caps: dict[str, pcaptools.Capture]) -> None:
    """Drop log: 8 server data segments. The link also reordered 2 server segments (its
    reordered_segments log): seq 157833 arrived late after the server had resent it (a
    spurious resend: tshark flags it at the client, the client's D-SACK tells the server),
    and seq 304081 arrived at the client after newer data and was discarded there (PAWS: the
    client never acknowledged it until the resend came), so the server had to send it again:
    8 + 1 segments lost and resent, 1 spurious, seen the same from both ends."""
    for name, where in (("http1-lossy.pcap", "before_capture"),
                        ("http1-lossy-server.pcap", "after_capture")):
        cap = caps[name]
        assert drop_log(CAPTURES / name, cap) == {(0, "server_to_client"): 8}
        assert counts(cap, "loss") == {(0, "server_to_client"): 9}
        assert counts(cap, "spurious") == {(0, "server_to_client"): 1}
        lo = cap.tcp_losses
        assert lo.loc[lo["kind"] == "spurious", "seq"].tolist() == [157833]
        loss = lo[lo["kind"] == "loss"]
        assert loss["seq"].tolist() == [66609, 88329, 95569, 97017, 195481, 207065, 301185,
                                        302633, 304081]
        # the reordered-and-discarded copy was captured at both ends: lost after the capture
        assert loss["lost_where"].tolist() == [where] * 8 + ["after_capture"]
    c = caps["http1-lossy.pcap"]
    assert c.connections.loc[0, "server_lost_segments"] == 9
    assert c.connections.loc[0, "retransmissions"] == 8  # tshark's flags: another count
    s = caps["http1-lossy-server.pcap"]
    assert len(s.retransmissions) == 4  # tshark at the sender: 4 of the 10 resends
    sp = s.tcp_losses[s.tcp_losses["kind"] == "spurious"].iloc[0]
    assert (sp["first_frame"], sp["frame"]) == (168, 255)  # D-SACK in frame 346


def test_connections_counts_match_the_table(caps: dict[str, pcaptools.Capture]) -> None:
    for cap in caps.values():
        CONNECTIONS.check(cap.connections)
        lo = cap.tcp_losses
        for r in cap.connections.itertuples():
            mine = lo[lo["tcp_stream"] == r.tcp_stream]
            for side, d in (("client", "client_to_server"), ("server", "server_to_client")):
                m = mine[mine["direction"] == d]
                assert getattr(r, f"{side}_lost_segments") == (m["kind"] == "loss").sum()
                assert getattr(r, f"{side}_spurious_resends") == (m["kind"] == "spurious").sum()
                assert getattr(r, f"{side}_capture_drop_bytes") == \
                    m.loc[m["kind"] == "capture_drop", "len"].sum()


@pytest.mark.parametrize("name", ["http1-lossy.pcap", "http1-lossy-server.pcap",
                                  "h2-sse-lossy.pcapng", "h2-sse-lossy-server.pcapng"])
def test_tshark_kind_is_what_tshark_flags(caps: dict[str, pcaptools.Capture], name: str,
                                          tshark: str) -> None:
    out = subprocess.run(
        [tshark, "-r", str(CAPTURES / name), "-T", "fields", "-e", "frame.number",
         "-e", "tcp.analysis.retransmission", "-e", "tcp.analysis.fast_retransmission",
         "-e", "tcp.analysis.spurious_retransmission", "-e", "tcp.analysis.out_of_order",
         "-Y", "tcp.analysis.retransmission || tcp.analysis.out_of_order"],
        capture_output=True, text=True, check=True).stdout
    flagged: dict[int, str] = {}
    for line in out.splitlines():
        f = line.split("\t")
        kind = ("spurious_retransmission" if f[3] else "fast_retransmission" if f[2]
                else "retransmission" if f[1] else "out_of_order")
        flagged[int(f[0])] = kind
    lo = caps[name].tcp_losses
    rows = lo[lo["frame"].notna()]
    for r in rows.itertuples():
        want = flagged.get(int(r.frame))
        assert (None if pd.isna(r.tshark_kind) else r.tshark_kind) == want, r.frame


# ---- hand-built edge cases ---------------------------------------------------------------

T0 = 1_700_000_000 * 1_000_000_000
C_ISN, S_ISN = 5000, 1000


def ts_opt(tsval: int, tsecr: int = 0) -> bytes:
    return b"\x01\x01" + struct.pack(">BBII", 8, 10, tsval, tsecr)


def sack_opt(*blocks: tuple[int, int]) -> bytes:
    return b"\x01\x01" + struct.pack(">BB", 5, 2 + 8 * len(blocks)) + b"".join(
        struct.pack(">II", a, b) for a, b in blocks)


class Flow:
    """A connection captured at the client: server data segments of 100 bytes each."""

    def __init__(self) -> None:
        self.pkts = [
            Pkt(T0, True, SYN, C_ISN),
            Pkt(T0 + 20 * MS, False, SYN | ACK, S_ISN, C_ISN + 1),
            Pkt(T0 + 20 * MS + 50_000, True, ACK, C_ISN + 1, S_ISN + 1),
        ]
        self.t = T0 + 21 * MS

    def data(self, i: int, tsval: int, dt_ms: float = 1.0) -> int:
        """Server segment number ``i`` (relative seq 1 + 100 i); returns its frame number."""
        self.t += int(dt_ms * MS)
        self.pkts.append(Pkt(self.t, False, ACK | PSH, S_ISN + 1 + 100 * i, C_ISN + 1,
                             plen=100, opts=ts_opt(tsval)))
        return len(self.pkts)

    def ack(self, upto: int, opts: bytes = b"", dt_ms: float = 0.1) -> int:
        """Client ACK of the server's bytes up to relative ``upto``."""
        self.t += int(dt_ms * MS)
        self.pkts.append(Pkt(self.t, True, ACK, C_ISN + 1, S_ISN + upto, opts=opts))
        return len(self.pkts)

    def load(self, tmp_path: Path) -> pcaptools.Capture:
        return pcaptools.load(write_pcap(tmp_path / "flow.pcap", self.pkts))


def test_gap_filled_by_a_resend_is_a_loss_before_the_capture(tmp_path: Path) -> None:
    f = Flow()
    f.data(0, 100)
    f.ack(101)
    gap = f.data(2, 102)  # segment 1 lost before the capture point
    f.ack(101)
    f.data(3, 103)
    f.ack(101)
    f.data(4, 104)
    f.ack(101)
    fill = f.data(1, 150, dt_ms=40)  # sent after the dup ACKs reached the server
    f.ack(501)
    cap = f.load(tmp_path)
    lo = cap.tcp_losses
    assert len(lo) == 1
    r = lo.iloc[0]
    assert (r["kind"], r["direction"], r["seq"], r["len"]) == ("loss", "server_to_client", 101, 100)
    assert pd.isna(r["first_frame"]) and (r["frame"], r["gap_frame"]) == (fill, gap)
    assert (r["lost_where"], r["spurious"], r["recovery"]) == ("before_capture", False,
                                                              "fast_retransmit")
    assert r["dup_acks"] == 3
    assert r["recovery_ms"] == pytest.approx(40 + 0.1 * 3 + 2, abs=1e-6)
    assert cap.connections.loc[0, "server_lost_segments"] == 1
    assert cap.connections.loc[0, "capture_vantage"] == "client"


def test_gap_filled_by_the_late_original_is_not_a_loss(tmp_path: Path) -> None:
    """Reordering: the filling segment's TSval is older than the one that opened the gap."""
    f = Flow()
    f.data(0, 100)
    f.data(2, 102)
    f.data(1, 101, dt_ms=30)  # 30 ms later (above the handshake RTT) but sent earlier
    f.ack(301)
    cap = f.load(tmp_path)
    assert len(cap.tcp_losses) == 0
    assert cap.connections.loc[0, "server_lost_segments"] == 0


def test_gap_acknowledged_but_never_captured_is_a_capture_drop(tmp_path: Path) -> None:
    f = Flow()
    f.data(0, 100)
    gap = f.data(2, 102)  # segment 1 passed the capture point unseen
    f.data(3, 103)
    ack = f.ack(401)  # ... and the client had it
    cap = f.load(tmp_path)
    lo = cap.tcp_losses
    assert lo[["kind", "seq", "len"]].astype(object).values.tolist() == [["capture_drop", 101, 100]]
    assert lo.loc[0, "gap_frame"] == gap and pd.isna(lo.loc[0, "frame"])
    w = cap.warnings[cap.warnings["code"] == "tcp.capture_drop"]
    assert w["frame"].tolist() == [ack]
    row = cap.connections.iloc[0]
    assert (row["server_lost_segments"], row["server_capture_drop_bytes"]) == (0, 100)


def test_gap_open_at_the_end_is_unresolved(tmp_path: Path) -> None:
    f = Flow()
    f.data(0, 100)
    f.ack(101)
    gap = f.data(3, 103)  # segments 1 and 2 missing, nothing more captured
    cap = f.load(tmp_path)
    lo = cap.tcp_losses
    assert lo[["kind", "seq", "len", "gap_frame"]].astype(object).values.tolist() == [
        ["unresolved", 101, 200, gap]]
    assert cap.warnings["code"].astype(str).tolist().count("tcp.unresolved_gap") == 1
    assert cap.connections.loc[0, "server_lost_segments"] == 0


def test_resend_seen_twice_rto_then_dsack_makes_it_spurious(tmp_path: Path) -> None:
    f = Flow()
    first = f.data(0, 100)
    f.data(1, 101)
    f.data(2, 102)
    # no ACK for 300 ms: the oldest unacknowledged segment is resent (a timeout)
    again = f.data(0, 400, dt_ms=300)
    f.ack(301)
    cap = f.load(tmp_path)
    r = cap.tcp_losses.iloc[0]
    assert (r["kind"], r["lost_where"], r["recovery"]) == ("loss", "after_capture", "rto")
    assert (r["first_frame"], r["frame"]) == (first, again)
    assert r["recovery_ms"] == pytest.approx(302, abs=1e-6)

    # the same, but the client's next ACK carries a D-SACK for [1, 101): it had the first copy
    f.ack(301, opts=sack_opt((S_ISN + 1, S_ISN + 101)))
    cap = f.load(tmp_path)
    r = cap.tcp_losses.iloc[0]
    assert (r["kind"], r["spurious"]) == ("spurious", True) and pd.isna(r["lost_where"])
    row = cap.connections.iloc[0]
    assert (row["server_lost_segments"], row["server_spurious_resends"]) == (0, 1)


def test_without_timestamps_the_ipv4_id_tells_a_resend_from_a_late_original(
    tmp_path: Path,
) -> None:
    """No TCP timestamps: the IPv4 identification decides, even for a fill that comes sooner
    than the handshake RTT (where timing alone would call it reordering)."""
    from tests.helpers import ethernet, ipv4, pcap_file, tcp

    c, s = "10.0.0.1", "10.0.0.2"

    def seg(t_ms: float, c2s: bool, flags: int, seq: int, ack: int, n: int = 0,
            ident: int = 1) -> tuple[int, bytes]:
        src, dst = (c, s) if c2s else (s, c)
        sp, dp = (40000, 80) if c2s else (80, 40000)
        body = tcp(sp, dp, seq, ack, flags, b"x" * n, src=src, dst=dst)
        return T0 + int(t_ms * MS), ethernet(ipv4(body, src, dst, ident=ident))

    def flow(fill_ident: int) -> pcaptools.Capture:
        pkts = [
            seg(0, True, SYN, C_ISN, 0),
            seg(20, False, SYN | ACK, S_ISN, C_ISN + 1),
            seg(20.05, True, ACK, C_ISN + 1, S_ISN + 1),
            seg(21, False, ACK, S_ISN + 1, C_ISN + 1, 100, ident=500),
            seg(22, False, ACK, S_ISN + 201, C_ISN + 1, 100, ident=502),  # 501 not captured
            seg(23, False, ACK, S_ISN + 101, C_ISN + 1, 100, ident=fill_ident),  # 1 ms later
            seg(23.1, True, ACK, C_ISN + 1, S_ISN + 301),
        ]
        path = tmp_path / f"id{fill_ident}.pcap"
        path.write_bytes(pcap_file(pkts))
        return pcaptools.load(path)

    late = flow(501)  # sent before the segment that opened the gap: reordering
    assert len(late.tcp_losses) == 0
    resent = flow(503)  # sent after it: a resend, however soon it arrived
    lo = resent.tcp_losses
    assert lo[["kind", "seq", "len", "frame", "gap_frame", "lost_where"]].astype(
        object).values.tolist() == [["loss", 101, 100, 6, 5, "before_capture"]]


def test_headline_verdicts_and_report_use_the_losses() -> None:
    from pcaptools.analyses.summary import headline, verdicts
    from pcaptools.report.html import render_report

    path = CAPTURES / "h2-sse-lossy.pcapng"
    cap = pcaptools.load(path, keylog=CAPTURES / "h2-sse-lossy.keys")
    h = headline(cap)  # (what pcap-report --json writes)
    assert (h["lost_segments"], h["lost_before_capture"], h["lost_after_capture"]) == (3, 2, 1)
    assert h["losses_by_recovery"] == {"fast_retransmit": 3}
    assert (h["spurious_resends"], h["capture_drop_bytes"], h["unresolved_gaps"]) == (0, 0, 0)
    assert h["retransmitted_segments"] == 2
    v = verdicts(cap, h)
    ds = h["data_segments"]
    assert f"{100 * 3 / ds:.1f}% of data segments were lost and resent (3 of {ds:,}: 2 lost " \
        "before the capture point, 1 after it)." in v
    assert "2 retransmissions flagged by tshark (tcp.analysis.retransmission): 2 fast." in v
    html = render_report(cap)
    assert ("Segments lost and resent: 3 (2 lost before the capture point, seen as a gap that "
            "the resend filled; 1 after it, seen twice), plus 0 spurious resends") in html
    assert "Another count: 2 segments tshark flags tcp.analysis.retransmission" in html


def test_compare_counts_segments_lost_and_resent(caps: dict[str, pcaptools.Capture]) -> None:
    """pcap-report --compare on compare-h1 vs compare-h2: 2 vs 2 segments lost and resent
    (the drop logs' data segments), tshark's flag count (1 vs 1) kept as its own row."""
    from pcaptools.analyses.compare import compare

    a, b = caps["compare-h1.pcapng"], caps["compare-h2.pcapng"]
    m = compare(a, b).set_index("metric")
    truth = [sum(drop_log(CAPTURES / n, c).values()) for n, c in
             (("compare-h1.pcapng", a), ("compare-h2.pcapng", b))]
    assert [m.loc["lost_segments", "a"], m.loc["lost_segments", "b"]] == truth == [2, 2]
    assert m.loc["lost_segments", "label"] == \
        "segments lost and resent (tcp_losses: from any vantage point)"
    assert [m.loc["spurious_resends", "a"], m.loc["spurious_resends", "b"]] == [0, 0]
    assert [m.loc["retransmitted_segments", "a"], m.loc["retransmitted_segments", "b"]] == [1, 1]
    assert m.loc["retransmitted_segments", "label"] == \
        "retransmissions flagged by tshark (tcp.analysis.retransmission)"
