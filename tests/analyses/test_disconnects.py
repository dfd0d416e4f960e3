"""analyses.disconnects: verdicts and timelines on real captures whose facts say how every
connection ended (captures/*.facts.json), on corpus captures checked against tshark, and on a
hand-made capture for the verdicts the recordings lack."""

from __future__ import annotations

import base64
import hashlib
import importlib
import itertools
import json
import statistics
import struct
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses import DISCONNECTS, disconnects
from pcaptools.analyses.disconnects import VERDICTS
from tests.conftest import CAPTURES, CORPUS, shipped_captures
from tests.helpers import ethernet, ipv4, pcap_file, tcp
from tests.oracle import tshark_fields

S = 1_000_000_000
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def _facts(capture: Path) -> dict[str, Any]:
    return dict(json.loads((capture.parent / f"{capture.name}.facts.json").read_text()))


def _ns(ts: Any) -> int:
    return int(pd.Timestamp(ts).value)


def _epoch_ns(text: str) -> int:
    sec, _, frac = text.partition(".")
    return int(sec) * S + int((frac + "000000000")[:9])


def _row(df: pd.DataFrame, stream: int) -> pd.Series:
    sel = df[df["tcp_stream"] == stream]
    assert len(sel) == 1, f"tcp.stream {stream}: {len(sel)} rows"
    return sel.iloc[0]


def _load(path: Path, **kw: Any) -> pcaptools.Capture:
    keys = path.with_suffix(".keys")
    return pcaptools.load(path, keylog=keys if keys.exists() else None, **kw)


def _corpus(name: str) -> Path:
    p = CORPUS / name
    if not p.is_file():
        pytest.skip(f"corpus capture {name} is absent")
    return p


# --------------------------------------------------------------------- shipped captures (facts)

#: how a facts "end" maps to a verdict row: (verdict, peer), or None for no row
_EXPECTED: dict[tuple[str, str], tuple[str, str] | None] = {
    ("fin-client-first", "completed"): None,
    ("fin-server-first", "completed"): None,
    ("fin-both", "completed"): None,
    ("open-at-capture-end", "completed"): None,
    ("rst-server", "completed"): ("reset", "server"),
    ("rst-client", "completed"): ("reset", "client"),
    ("none", "refused"): ("refused", "server"),
    ("none", "icmp-rejected"): ("refused", "server"),
    ("none", "no-answer"): ("syn_unanswered", "server"),
    ("black-hole", "completed"): ("peer_vanished", "server"),
}
#: where a WebSocket makes a more specific verdict than the TCP ending alone
_WS_EXPECTED = {("ws-idle-reset.pcap", 0): ("ws_no_close_frame", "server")}


@pytest.mark.parametrize("path", shipped_captures(), ids=lambda p: p.name)
def test_every_shipped_connection_gets_the_verdict_its_facts_describe(path: Path) -> None:
    facts = _facts(path)
    cap = _load(path)
    df = disconnects(cap)
    DISCONNECTS.check(df)
    expected_rows = 0
    clean = opened = 0
    # QUIC connections (transport "quic") have no TCP verdicts yet (issue 15)
    tcp_conns = [c for c in facts["connections"] if c.get("transport", "tcp") == "tcp"]
    for c in tcp_conns:
        stream = c["tshark_stream"]
        key = (c["end"], c["handshake"])
        assert key in _EXPECTED, f"{path.name}: new ending {key}: add it to _EXPECTED"
        want = _WS_EXPECTED.get((path.name, stream)) or _EXPECTED[key]
        if c.get("path_mtu") == "black-hole" and facts["vantage"] == "server":
            # the sender's capture shows the large segments retransmitted into the black
            # hole; the receiver's never sees them (its verdict stays the ending: reset)
            want = ("pmtu_black_hole", "client")
        got = df[df["tcp_stream"] == stream]
        if want is None:
            assert got.empty, f"tcp.stream {stream} ({c['end']}) got {got['verdict'].tolist()}"
            if c["end"] == "open-at-capture-end":
                opened += 1
            else:
                clean += 1
            continue
        expected_rows += 1
        r = _row(df, stream)
        assert (r["verdict"], r["peer"]) == want, (
            f"tcp.stream {stream}: {c['end']} ({c.get('purpose')})"
        )
        assert r["signals"].split(",")[0] == r["verdict"]
        assert r["display_filter"].startswith(f"tcp.stream eq {stream} && frame.number >= ")
        assert r["evidence_frames"] == sorted(set(r["evidence_frames"])) and r["evidence_frames"]
    assert len(df) == expected_rows
    assert df.attrs["clean_connections"] == clean
    assert df.attrs["open_connections"] == opened
    assert df.attrs["connections"] == len(cap.connections) == len(tcp_conns)
    assert sum(df.attrs["verdicts"].values()) == len(df)


@pytest.mark.parametrize("name", ["tcp-reset.pcap", "demo.pcapng", "tcp-port-reuse.pcap"])
def test_reset_rows_point_at_tsharks_rst_frames(name: str, tshark: str) -> None:
    path = CAPTURES / name
    df = disconnects(_load(path))
    rst = tshark_fields(
        path,
        ("frame.number", "tcp.stream", "ip.src", "frame.time_epoch"),
        display_filter="tcp.flags.reset == 1",
    )
    first: dict[int, tuple[int, int]] = {}
    for fr, st, _src, t in rst:
        first.setdefault(int(st), (int(fr), _epoch_ns(t)))
    assert df["rst_frame"].notna().sum() == len(first)  # every reset connection has its row
    for r in df.itertuples():
        if r.tcp_stream not in first:  # ended another way (the demo's black-holed WebSocket)
            assert pd.isna(r.rst_frame) and r.noticed_how != "rst_received"
            continue
        fr, t = first[r.tcp_stream]
        assert r.rst_frame == fr
        assert r.noticed_frame == fr and r.noticed_how == "rst_received"
        assert _ns(r.noticed_ts) == t
        assert fr in r.evidence_frames
        assert pd.isna(r.middlebox_hint)  # the hosts' own RSTs: TTL and IP ID fit


def test_tcp_reset_timeline_and_summary() -> None:
    cap = _load(CAPTURES / "tcp-reset.pcap")
    df = disconnects(cap)
    conns = cap.connections.set_index("tcp_stream")
    r = _row(df, 1)  # the server aborts with SO_LINGER 0 after 6000 body bytes
    assert r["closed_by"] == "server" and r["end_reason"] == "rst"
    assert r["last_peer_frame"] == conns.loc[1, "server_last_frame"]
    assert r["detection_delay_ms"] == pytest.approx(
        (_ns(r["noticed_ts"]) - _ns(r["last_peer_ts"])) / 1e6
    )
    assert r["summary"] == f"the server reset the connection (frame {r['rst_frame']})"
    for stream in (2, 3):  # the client aborts (SO_LINGER 0; unread data)
        r = _row(df, stream)
        assert r["closed_by"] == "client" and r["peer"] == "client"


def test_ws_blackhole_peer_vanished_within_the_cut_window() -> None:
    """The recording cut the path (iptables DROP both ways) between installed_ns_from and
    installed_ns_to. Our estimate of the path's death, the server's last packet, must be at
    or before the cut, and less than one client ping interval (1 s) plus an RTT before it;
    the first segment that never got an answer must be after it."""
    path = CAPTURES / "ws-blackhole.pcap"
    truth = _facts(path)["truth"]["blackhole"]
    cap = _load(path, packets=False)
    df = disconnects(cap)
    r = _row(df, 0)
    assert r["verdict"] == "peer_vanished" and r["peer"] == "server"
    assert r["protocol"] == "http1/websocket"
    assert r["signals"].split(",")[:2] == ["peer_vanished", "unanswered_heartbeats"]
    assert r["last_peer_frame"] == truth["last_server_packet_before"]["frame"]
    assert _ns(r["last_peer_ts"]) == _epoch_ns(truth["last_server_packet_before"]["t_epoch"])
    cut_from, cut_to = truth["installed_ns_from"], truth["installed_ns_to"]
    assert _ns(r["last_peer_ts"]) <= cut_from
    assert cut_from - _ns(r["last_peer_ts"]) < 1.1 * S
    assert _ns(r["first_unanswered_ts"]) >= cut_to
    assert r["retransmissions_after_peer"] == truth["client_retransmissions_after"]
    assert 1.8 <= r["backoff_ratio"] <= 2.2  # Linux RTO backoff doubles
    # the client's close frame and FIN never reached the wire: nothing noticed on it
    assert r["noticed_how"] == "eof" and pd.isna(r["noticed_frame"])
    assert _ns(r["noticed_ts"]) == cap.summary.last_ts_ns
    assert r["detection_delay_ms"] == pytest.approx(
        (cap.summary.last_ts_ns - _ns(r["last_peer_ts"])) / 1e6
    )
    assert r["heartbeats_unanswered"] >= 1 and r["heartbeat_mechanisms"] == "websocket"
    assert pd.isna(r["ws_close_frame"])
    assert r["display_filter"] == f"tcp.stream eq 0 && frame.number >= {r['last_peer_frame']}"


def test_ws_idle_reset_found_with_the_idle_threshold_below_the_gap() -> None:
    """6 s of silence, then the client's message drew a RST forged by iptables REJECT with
    the server's address (facts). idle_then_reset needs idle_gap_s <= the gap; the default
    30 s does not see it and the WebSocket's missing Close frame is what remains."""
    path = CAPTURES / "ws-idle-reset.pcap"
    idle = _facts(path)["truth"]["idle"]
    cap = _load(path)
    r = _row(disconnects(cap, idle_gap_s=5.0), 0)
    assert r["verdict"] == "idle_then_reset" and r["peer"] == "server"
    assert r["signals"] == "idle_then_reset,ws_no_close_frame,reset"
    assert r["idle_gap_ms"] == pytest.approx(idle["gap_on_wire_s"] * 1000, abs=0.001)
    before, after = idle["last_frame_before_gap"]["frame"], idle["first_frame_after_gap"]["frame"]
    assert r["evidence_frames"] == [before, after, idle["rst_frame"]["frame"]]
    assert r["rst_frame"] == r["noticed_frame"] == idle["rst_frame"]["frame"]
    assert _ns(r["noticed_ts"]) == _epoch_ns(idle["rst_frame"]["t_epoch"])
    assert r["display_filter"] == f"tcp.stream eq 0 && frame.number >= {before}"
    # REJECT --reject-with tcp-reset copies the host's TTL and uses IP ID 0, like the host's
    # own RST of a socket it no longer has: nothing to tell them apart (documented)
    assert pd.isna(r["middlebox_hint"])
    r30 = _row(disconnects(cap), 0)
    assert r30["verdict"] == "ws_no_close_frame" and "idle_then_reset" not in r30["signals"]
    r7 = _row(disconnects(cap, idle_gap_s=idle["gap_on_wire_s"] + 1), 0)
    assert r7["verdict"] == "ws_no_close_frame"


@pytest.mark.parametrize(
    "name", ["ws-healthy.pcap", "ws-tls.pcapng", "h2-ping.pcap", "http1-basic.pcap"]
)
def test_healthy_captures_have_no_rows(name: str) -> None:
    df = disconnects(_load(CAPTURES / name))
    assert df.empty
    assert df.attrs["clean_connections"] == df.attrs["connections"] >= 1


def test_packets_table_only_adds_the_icmp_refusal() -> None:
    """Everything but ICMP errors comes from per-connection columns: packets=False gives the
    same rows, except that an ICMP-rejected SYN is then only a SYN without answer."""
    for path in shipped_captures():
        a = disconnects(_load(path))
        b = disconnects(_load(path, packets=False))
        if path.name == "tcp-refused.pcap":
            assert (
                _row(a, 3)["verdict"] == "refused" and _row(a, 3)["noticed_how"] == "icmp_received"
            )
            a, b = a[a["tcp_stream"] != 3], b[b["tcp_stream"] != 3]
            assert 3 not in b["tcp_stream"].tolist() or _row(b, 3)["verdict"] != "refused"
        pd.testing.assert_frame_equal(
            a.reset_index(drop=True), b.reset_index(drop=True), check_categorical=False
        )


def test_tcp_refused_syn_retransmissions_and_icmp(tshark: str) -> None:
    path = CAPTURES / "tcp-refused.pcap"
    df = disconnects(_load(path))
    syn = [
        int(f)
        for (f,) in tshark_fields(
            path, ("frame.number",), display_filter="tcp.stream == 2 && tcp.flags.syn == 1"
        )
    ]
    r = _row(df, 2)
    assert r["verdict"] == "syn_unanswered" and r["retransmissions_after_peer"] == len(syn) - 1 == 3
    assert r["evidence_frames"] == syn and r["first_unanswered_frame"] == syn[0]
    assert r["summary"] == "4 SYN(s) sent and never answered"
    icmp = tshark_fields(path, ("frame.number",), display_filter="icmp && tcp.stream == 3")
    r = _row(df, 3)
    assert r["verdict"] == "refused" and r["noticed_frame"] == int(icmp[0][0])


# ------------------------------------------------------------------------------------ corpus


def test_tcp_retransmissions_is_a_black_hole(tshark: str) -> None:
    """One 648-byte segment sent, then retransmitted 5 times with RTO backoff, no ACK at all."""
    path = _corpus("tcp_retransmissions.pcapng")
    rows = tshark_fields(path, ("frame.number", "frame.time_epoch", "tcp.analysis.retransmission"))
    retrans = [int(f) for f, _t, r in rows if r]
    t = {int(f): _epoch_ns(ts) for f, ts, _r in rows}
    df = disconnects(pcaptools.load(path))
    assert len(df) == 1
    r = df.iloc[0]
    assert r["verdict"] == "peer_vanished" and r["peer"] == "server"
    assert r["signals"] == "peer_vanished,half_open_at_eof"
    assert r["retransmissions_after_peer"] == len(retrans) == 5
    assert pd.isna(r["last_peer_frame"])  # the server sent nothing at all
    assert r["first_unanswered_frame"] == 1
    assert r["evidence_frames"] == [1, *retrans]
    assert r["noticed_how"] == "eof"
    assert r["detection_delay_ms"] == pytest.approx((t[6] - t[1]) / 1e6)
    gaps = [t[b] - t[a] for a, b in itertools.pairwise(retrans)]
    ratios = [b / a for a, b in itertools.pairwise(gaps)]
    assert r["backoff_ratio"] == pytest.approx(statistics.median(ratios))
    assert 1.8 <= r["backoff_ratio"] <= 2.2
    assert r["summary"].startswith(
        "server went silent (nothing from it in the capture); the "
        "client retransmitted 5 times into the void (gaps growing x2.0)"
    )


def test_zero_window_dead_keepalives_are_answered(tshark: str) -> None:
    """The receiver (client) sits at zero window; the server's 3 keep-alives are each answered
    by a zero-window ACK, so the heartbeat rule stays quiet and the stall is the verdict."""
    path = _corpus("tcp_zerowindowdead.pcapng")
    ka = [
        int(f)
        for (f,) in tshark_fields(path, ("frame.number",), display_filter="tcp.analysis.keep_alive")
    ]
    zw = [
        int(f)
        for (f,) in tshark_fields(
            path, ("frame.number",), display_filter="tcp.analysis.zero_window"
        )
    ]
    assert ka == [3, 5, 7] and zw == [2, 4, 6, 8]
    cap = pcaptools.load(path)
    r = _row(disconnects(cap), 0)
    assert r["verdict"] == "zero_window_stall" and r["signals"] == "zero_window_stall"
    assert r["peer"] == "client" and r["heartbeats_unanswered"] == 0
    assert r["evidence_frames"] == [zw[0], zw[-1]] and r["last_peer_frame"] == zw[-1]
    first_zw = cap.tcp_events[cap.tcp_events["frame"] == zw[0]]["ts"].iloc[0]
    assert r["detection_delay_ms"] == pytest.approx((cap.summary.last_ts_ns - _ns(first_zw)) / 1e6)
    # a grace longer than the stall: no verdict, the connection is merely open
    quiet = disconnects(cap, heartbeat_grace=r["detection_delay_ms"] / 1000 + 1)
    assert quiet.empty and quiet.attrs["open_connections"] == 1


def test_dump_every_tls_connection_ends_with_the_servers_rst(tshark: str) -> None:
    """73 TLS connections: the server closes with FIN, the client's close_notify arrives
    after it, the server's kernel answers RST (IP ID 0: no socket, no middlebox hint)."""
    path = _corpus("dump.pcapng")
    rst = tshark_fields(path, ("tcp.stream", "frame.number"), display_filter="tcp.flags.reset == 1")
    fin = tshark_fields(
        path,
        ("tcp.stream", "frame.number"),
        display_filter="tcp.flags.fin == 1 && tcp.srcport in {4430..4500}",
    )
    first_rst = {int(s): int(f) for s, f in reversed(rst)}
    server_fin = {int(s): int(f) for s, f in reversed(fin)}
    df = disconnects(pcaptools.load(path, keylog=_corpus("premaster.txt")))
    assert len(df) == 73 and set(df["verdict"]) == {"reset"} and set(df["peer"]) == {"server"}
    assert set(df["protocol"]) == {"tls/http1"}
    assert df.attrs["clean_connections"] == 0
    for r in df.itertuples():
        assert r.rst_frame == first_rst[r.tcp_stream]
        assert r.summary == (
            f"the server reset the connection (frame {r.rst_frame}) after closing "
            f"its side with FIN (frame {server_fin[r.tcp_stream]}): later data hit "
            "a closed socket"
        )
    assert df["middlebox_hint"].isna().all()


def test_suricata_websocket_ping_ends_without_close_frame() -> None:
    path = _corpus("suricata-websocket-ping-input.pcap")
    df = disconnects(pcaptools.load(path))
    assert df.attrs["clean_connections"] == 1 and len(df) == 1
    r = _row(df, 0)
    assert r["verdict"] == "ws_no_close_frame" and r["signals"] == "ws_no_close_frame,reset"
    assert r["protocol"] == "http1/websocket" and r["peer"] == "client"
    assert r["closed_by"] == "client" and r["rst_frame"] == 12
    assert (r["noticed_frame"], r["noticed_how"]) == (10, "fin_received")  # its FIN came first
    assert r["heartbeats_unanswered"] == 0  # the one ping was answered (frame 11)


def test_tls13_draft_client_rst_with_random_ip_ids_is_not_flagged() -> None:
    """The client (random IP IDs per packet, macOS-like) resets after its FIN; a random-ID host
    gives no IP ID evidence, and the TTL matches: no middlebox hint."""
    df = disconnects(pcaptools.load(_corpus("tls-13draft19-early-data.pcap")))
    r = _row(df, 0)
    assert (r["verdict"], r["peer"], r["rst_frame"]) == ("reset", "client", 17)
    assert pd.isna(r["middlebox_hint"])


def test_corpus_runs_clean_everywhere(corpus: Path) -> None:
    """Every corpus capture: the schema holds, counts add up, nothing raises."""
    total: dict[str, int] = {}
    for path in sorted(corpus.glob("*.pcap*")):
        cap = pcaptools.load(path)
        df = disconnects(cap)
        DISCONNECTS.check(df)
        assert len(df) + df.attrs["clean_connections"] + df.attrs["open_connections"] == len(
            cap.connections
        )
        assert set(df["verdict"].astype(str)) <= set(VERDICTS)
        for v, n in df.attrs["verdicts"].items():
            total[v] = total.get(v, 0) + n
    # dump.pcapng 73 + tls-13draft19 1 resets; raw_ip.pcap: a SYN left unanswered for 8 s
    assert total == {
        "reset": 74,
        "syn_unanswered": 1,
        "ws_no_close_frame": 1,
        "refused": 1,
        "peer_vanished": 1,
        "zero_window_stall": 1,
    }


# --------------------------------------------------------------------- hand-made capture


class _Flow:
    """One TCP connection's packets with real sequence numbers, TTLs and sequential IP IDs."""

    def __init__(self, cport: int, sport: int = 80) -> None:
        self.cport, self.sport = cport, sport
        self.addr = ("10.0.0.1", "10.0.0.2")
        self.seq = [1000, 5000]
        self.ip_id = [100, 7000]

    def pkt(
        self,
        t: float,
        side: int,
        flags: int,
        payload: bytes = b"",
        *,
        ttl: int = 64,
        ip_id: int | None = None,
        seq: int | None = None,
    ) -> tuple[int, bytes]:
        src, dst = self.addr[side], self.addr[1 - side]
        sp, dp = (self.cport, self.sport) if side == 0 else (self.sport, self.cport)
        s = self.seq[side] if seq is None else seq
        a = self.seq[1 - side] if flags & ACK else 0
        if seq is None:
            self.seq[side] += len(payload) + (1 if flags & (SYN | FIN) else 0)
        if ip_id is None:
            ip_id = self.ip_id[side]
            self.ip_id[side] += 1
        seg = tcp(sp, dp, s, a, flags, payload, src=src, dst=dst)
        return int(t * S), ethernet(ipv4(seg, src, dst, ttl=ttl, ident=ip_id))

    def handshake(self, t: float) -> list[tuple[int, bytes]]:
        return [self.pkt(t, 0, SYN), self.pkt(t + 0.001, 1, SYN | ACK), self.pkt(t + 0.002, 0, ACK)]


def _ws_frame(opcode: int, payload: bytes, mask: bytes | None) -> bytes:
    head = bytes([0x80 | opcode, (0x80 if mask else 0) | len(payload)])
    if mask is None:
        return head + payload
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _h2(ftype: int, payload: bytes, flags: int = 0) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + b"\0\0\0\0" + payload


def _handmade() -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    # A: idle 40 s, then the next request draws a RST whose TTL and IP ID are not the server's
    a = _Flow(40001)
    out += a.handshake(0)
    out += [
        a.pkt(0.01, 0, PSH | ACK, b"hello"),
        a.pkt(0.02, 1, PSH | ACK, b"world"),
        a.pkt(0.03, 0, ACK),
        a.pkt(40.03, 0, PSH | ACK, b"again"),
        a.pkt(40.05, 1, RST, ttl=50, ip_id=40000),
    ]
    # B: WebSocket close handshake, then the server resets instead of closing with FIN
    b = _Flow(40002)
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    accept = base64.b64encode(
        hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
    )
    mask = b"\x01\x02\x03\x04"
    out += b.handshake(50)
    out += [
        b.pkt(
            50.01,
            0,
            PSH | ACK,
            b"GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key.encode() + b"\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n",
        ),
        b.pkt(
            50.02,
            1,
            PSH | ACK,
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n",
        ),
        b.pkt(50.03, 0, PSH | ACK, _ws_frame(1, b"hi", mask)),
        b.pkt(50.04, 1, PSH | ACK, _ws_frame(1, b"hi", None)),
        b.pkt(50.05, 0, PSH | ACK, _ws_frame(8, b"\x03\xe8", mask)),
        b.pkt(50.06, 1, PSH | ACK, _ws_frame(8, b"\x03\xe8", None)),
        b.pkt(50.07, 0, ACK),
        b.pkt(50.08, 1, RST | ACK),
    ]
    # C: the client closes, the server acknowledges and never closes its side
    c = _Flow(40003)
    out += c.handshake(60)
    out += [
        c.pkt(60.01, 0, PSH | ACK, b"bye?"),
        c.pkt(60.02, 1, ACK),
        c.pkt(61.0, 0, FIN | ACK),
        c.pkt(61.001, 1, ACK),
    ]
    # E: HTTP/2 PINGs the server acknowledges at TCP level but never answers
    e = _Flow(40005)
    out += e.handshake(70)
    out += [
        e.pkt(70.01, 0, PSH | ACK, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _h2(4, b"")),
        e.pkt(70.02, 1, PSH | ACK, _h2(4, b"") + _h2(4, b"", 1)),
        e.pkt(70.03, 0, PSH | ACK, _h2(4, b"", 1)),
    ]
    for i in range(3):
        out += [e.pkt(71 + i, 0, PSH | ACK, _h2(6, bytes([i + 1]) * 8)), e.pkt(71.001 + i, 1, ACK)]
    out.append(e.pkt(76, 0, RST | ACK))
    # F: the server vanishes; 4 retransmissions with backoff, then the client gives up (RST)
    f = _Flow(40006)
    out += f.handshake(90)
    out += [
        f.pkt(90.01, 0, PSH | ACK, b"q1"),
        f.pkt(90.02, 1, PSH | ACK, b"a1"),
        f.pkt(90.03, 0, ACK),
    ]
    seq = f.seq[0]
    out.append(f.pkt(91.0, 0, PSH | ACK, b"q2"))
    out += [f.pkt(91.0 + dt, 0, PSH | ACK, b"q2", seq=seq) for dt in (0.2, 0.6, 1.4, 3.0)]
    out.append(f.pkt(95.0, 0, RST | ACK))
    # D: at the end of the capture the client has waited 5 s for an ACK (2 retransmissions)
    d = _Flow(40004)
    out += d.handshake(100)
    out += [d.pkt(100.01, 0, PSH | ACK, b"x1"), d.pkt(100.02, 1, ACK)]
    seq = d.seq[0]
    out += [
        d.pkt(101.0, 0, PSH | ACK, b"x2"),
        d.pkt(101.3, 0, PSH | ACK, b"x2", seq=seq),
        d.pkt(106.0, 0, PSH | ACK, b"x2", seq=seq),
    ]
    return out


@pytest.fixture(scope="module")
def handmade(tmp_path_factory: pytest.TempPathFactory) -> pcaptools.Capture:
    path = tmp_path_factory.mktemp("disc") / "handmade.pcap"
    path.write_bytes(pcap_file(_handmade(), nsec=True))
    return pcaptools.load(path)


def test_handmade_verdicts(handmade: pcaptools.Capture) -> None:
    df = disconnects(handmade)
    got = {r.tcp_stream: (r.verdict, r.peer, r.signals) for r in df.itertuples()}
    assert got == {
        0: ("idle_then_reset", "server", "idle_then_reset,reset"),
        1: ("abortive_close_after_ws_close", "server", "abortive_close_after_ws_close,reset"),
        2: ("one_sided_fin", "server", "one_sided_fin"),
        3: ("unanswered_heartbeats", "server", "unanswered_heartbeats,reset"),
        4: ("peer_vanished", "server", "peer_vanished,reset"),
        5: ("half_open_at_eof", "server", "half_open_at_eof"),
    }
    assert df.attrs["verdicts"] == {
        "idle_then_reset": 1,
        "abortive_close_after_ws_close": 1,
        "one_sided_fin": 1,
        "unanswered_heartbeats": 1,
        "peer_vanished": 1,
        "half_open_at_eof": 1,
    }
    assert df.attrs["parameters"] == {
        "idle_gap_s": 30.0,
        "min_retransmissions": 3,
        "heartbeat_grace": 2.0,
        "reset_window_s": 5.0,
        "fin_grace_s": 1.0,
        "pmtu_min_retransmissions": 2,
    }


def test_handmade_idle_reset_with_a_forged_rst(handmade: pcaptools.Capture) -> None:
    r = _row(disconnects(handmade), 0)  # frames 1-3 handshake, 4-6 exchange, 7 after idle, 8 RST
    assert r["idle_gap_ms"] == pytest.approx(40_000.0)
    assert r["evidence_frames"] == [6, 7, 8] and r["rst_frame"] == 8
    assert r["display_filter"] == "tcp.stream eq 0 && frame.number >= 6"
    assert (r["last_peer_frame"], r["noticed_frame"], r["noticed_how"]) == (5, 8, "rst_received")
    assert r["detection_delay_ms"] == pytest.approx(40_030.0)
    assert r["middlebox_hint"] == (
        "RST TTL 50 but the server's other packets had TTL 64; RST IP ID "
        "40000 does not continue the server's sequential IP IDs (last 7001)"
    )
    assert r["summary"] == (
        "40.0 s of silence, then a RST from the server side 20.0 ms after the next packet (frame 7)"
    )
    assert _row(disconnects(handmade, idle_gap_s=41), 0)["verdict"] == "reset"
    assert _row(disconnects(handmade, reset_window_s=0.01), 0)["verdict"] == "reset"


def test_handmade_websocket_abortive_close(handmade: pcaptools.Capture) -> None:
    r = _row(disconnects(handmade), 1)
    assert r["protocol"] == "http1/websocket"
    assert r["summary"] == (
        f"WebSocket Close from the client (frame {r['ws_close_frame']}), then the server reset "
        f"the TCP connection (frame {r['rst_frame']}) instead of closing it with FIN"
    )
    assert (r["ws_close_by"], r["ws_close_code"]) == ("client", 1000)
    close = int(r["ws_close_frame"])
    assert r["evidence_frames"] == [close, int(r["rst_frame"])]
    assert r["closed_by"] == "server" and pd.isna(r["middlebox_hint"])


def test_handmade_one_sided_fin_half_open_and_heartbeats(handmade: pcaptools.Capture) -> None:
    df = disconnects(handmade)
    eof = handmade.summary.last_ts_ns
    r = _row(df, 2)
    assert r["closed_by"] == "client" and r["noticed_how"] == "eof"
    assert r["summary"].startswith("the client closed (FIN, frame ")
    assert _ns(r["noticed_ts"]) == eof
    r = _row(df, 3)
    assert (r["heartbeats_unanswered"], r["heartbeat_mechanisms"]) == (3, "http2")
    assert r["noticed_how"] == "rst_sent" and r["protocol"] == "http2"
    assert len(r["evidence_frames"]) == 4  # three PINGs and the RST
    r = _row(df, 5)
    assert r["retransmissions_after_peer"] == 2
    assert _ns(r["first_unanswered_ts"]) == 101 * S
    assert r["summary"] == (
        f"at the end of the capture the client had been waiting 5.0 s for the "
        f"server to acknowledge frame {r['first_unanswered_frame']}"
    )
    # a lone FIN less than fin_grace_s before the end is a close in progress, not a verdict
    assert 2 not in disconnects(handmade, fin_grace_s=60)["tcp_stream"].tolist()


def test_handmade_peer_vanished_then_rst(handmade: pcaptools.Capture) -> None:
    r = _row(disconnects(handmade), 4)
    assert r["retransmissions_after_peer"] == 4
    assert r["backoff_ratio"] == pytest.approx(2.0)
    assert r["noticed_how"] == "rst_sent" and r["noticed_frame"] == r["rst_frame"]
    assert _ns(r["last_peer_ts"]) == int(90.02 * S)
    assert r["detection_delay_ms"] == pytest.approx(4980.0)
    assert r["summary"] == (
        f"server went silent after frame {r['last_peer_frame']}; the client "
        "retransmitted 4 times into the void (gaps growing x2.0) and gave up "
        f"with RST (frame {r['rst_frame']}) 5.0 s after its last sign of life"
    )
    assert _row(disconnects(handmade, min_retransmissions=5), 4)["verdict"] == "reset"


def test_empty_capture(tmp_path: Path) -> None:
    path = tmp_path / "empty.pcap"
    path.write_bytes(pcap_file([]))
    df = disconnects(pcaptools.load(path))
    DISCONNECTS.check(df)
    assert df.empty and df.attrs["connections"] == 0 and df.attrs["verdicts"] == {}


def test_rule_list_follows_the_documented_verdict_order() -> None:
    """The rules are a list of small functions, one per verdict, tried in the order the module
    docstring documents (VERDICTS); refused and syn_unanswered come from the handshake check
    that runs before them and excludes them."""
    mod = importlib.import_module("pcaptools.analyses.disconnects")  # (a function shadows it)

    assert [name for name, _ in mod.RULES] == list(VERDICTS[2:])
    assert VERDICTS[:2] == ("refused", "syn_unanswered")
    assert len({rule for _, rule in mod.RULES}) == len(mod.RULES)
    doc = mod.__doc__ or ""
    documented = [v for v in VERDICTS if f"- ``{v}``" in doc]
    assert documented == list(VERDICTS)
    assert sorted(documented, key=lambda v: doc.index(f"- ``{v}``")) == list(VERDICTS)
    for name, rule in mod.RULES:
        assert name in (rule.__doc__ or "").split(":")[0], name


def test_each_rule_returns_its_own_verdict_or_none() -> None:
    """Every rule, given the facts of a connection, returns a finding of its own verdict or None:
    a RST after a long silence is idle_then_reset and reset; a lone FIN is one_sided_fin."""
    mod = importlib.import_module("pcaptools.analyses.disconnects")  # (a function shadows it)

    limits = mod._Limits(idle_gap_s=30.0, min_retx=3, grace=2 * 10**9,
                         reset_window=5 * 10**9, fin_grace=10**9, pmtu_min_retx=2)
    s = 10**9

    def facts(**conn: Any) -> Any:
        base: dict[str, Any] = dict(
            stream=0, client="10.0.0.1:1000", server="10.0.0.2:80", end_reason=None,
            conn_state=None, first_frame=1, last_frame=9, last_ts=100 * s,
            dir_last=[(8, 99 * s), (9, 100 * s)], fin=[None, None], rst=None, rst_by=None,
            rst_ttl=None, rst_ip_id=None, ttl_range=[None, None], ip_id=[None, None],
            ip_id_sequential=[False, False], packets=[5, 4], max_idle=(0.0, None, None, None),
            last_idle=None, unacked=[None, None],
        )
        base.update(conn)
        return mod._Facts(mod._Conn(**base), None, None, (), (), (), (), (), {}, 100 * s, limits)

    rst = facts(end_reason="rst", rst=(9, 100 * s), rst_by=1,
                last_idle=(40_000.0, 7, 8, 99 * s))
    fin = facts(end_reason=None, fin=[(5, 50 * s), None])
    got = {name: (rule(rst), rule(fin)) for name, rule in mod.RULES}
    for name, (a, b) in got.items():
        for found in (a, b):
            assert found is None or found.verdict == name
    assert [n for n, (a, _) in got.items() if a is not None] == ["idle_then_reset", "reset"]
    assert [n for n, (_, b) in got.items() if b is not None] == ["one_sided_fin"]
    assert got["reset"][0].peer == 1 and got["one_sided_fin"][1].peer == 1
    assert got["idle_then_reset"][0].idle_gap_ms == 40_000.0
    assert [f.verdict for f in mod._rules(rst)] == ["idle_then_reset", "reset"]
