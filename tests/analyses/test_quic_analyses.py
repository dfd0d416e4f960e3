"""QUIC in the analyses (issue #15): overhead rows per QUIC connection, QUIC PING heartbeats,
QUIC disconnect verdicts and PTO episodes, on the shipped QUIC captures and the corpus ones.

Ground truth: ``captures/quic-endings.pcapng`` (scripts/servers/quicends.py: nine aioquic
connections, each ending its own way, with the verdict each must get, the bytes each side
wrote, the datagrams the server dropped or answered with a stateless reset, and aioquic's
own PTO timer expiries, all in its facts), the h3 captures' facts, and tshark 4.0.17 where it
computes the same thing (PADDING lengths, packet lengths, PING frames).
"""

from __future__ import annotations

import itertools
import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.disconnects import QUIC_VERDICTS, disconnects
from pcaptools.analyses.heartbeats import HEARTBEATS, heartbeat_summary, heartbeats
from pcaptools.analyses.overhead import CATEGORIES, OVERHEAD, QUIC_CATEGORIES, overhead
from pcaptools.tables.heartbeats import HEARTBEAT_SUMMARY
from pcaptools.tables.quic_tables import QUIC_CONNECTIONS, QUIC_PACKETS
from tests.conftest import CAPTURES, CORPUS
from tests.oracle import keylog_options, tshark_fields

ENDINGS = CAPTURES / "quic-endings.pcapng"
LOSSY = CAPTURES / "h3-sse-lossy.pcapng"


def _load(path: Path, keys: Path | None = None) -> pcaptools.Capture:
    if not path.is_file():
        pytest.skip(f"{path.name} is absent")
    return pcaptools.load(path, keylog=keys)


# (each entry keeps its Capture alive: an id is unique only while its object lives, and a
# later capture at the same address would otherwise get another capture's result)
_OVERHEAD: dict[tuple[int, bool], tuple[pcaptools.Capture, pd.DataFrame]] = {}
_DISCONNECTS: dict[int, tuple[pcaptools.Capture, pd.DataFrame]] = {}


def _overhead(cap: pcaptools.Capture, by_direction: bool = False) -> pd.DataFrame:
    """overhead(cap, quic=True), computed once per capture and shape."""
    key = (id(cap), by_direction)
    if key not in _OVERHEAD:
        _OVERHEAD[key] = (cap, overhead(cap, quic=True, by_direction=by_direction))
    return _OVERHEAD[key][1]


def _disconnects(cap: pcaptools.Capture) -> pd.DataFrame:
    if id(cap) not in _DISCONNECTS:
        _DISCONNECTS[id(cap)] = (cap, cap.disconnects(quic=True))
    return _DISCONNECTS[id(cap)][1]


@pytest.fixture(scope="module")
def endings() -> pcaptools.Capture:
    return _load(ENDINGS, CAPTURES / "quic-endings.keys")


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    return json.loads((CAPTURES / "quic-endings.pcapng.facts.json").read_text())


@pytest.fixture(scope="module")
def cases(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """case name -> its connection's quic facts (quic_connection, client timeline, server
    events, expected verdict)."""
    return {c["quic"]["case"]: c["quic"] for c in facts["connections"]}


@pytest.fixture(scope="module")
def lossy() -> pcaptools.Capture:
    return _load(LOSSY, CAPTURES / "h3-sse-lossy.keys")


@pytest.fixture(scope="module")
def chrome() -> pcaptools.Capture:
    return _load(CORPUS / "chrome-cloudflare-quic-with-secrets.pcapng")


@pytest.fixture(scope="module")
def zerortt() -> pcaptools.Capture:
    return _load(CORPUS / "zerortt.pcap")


# ------------------------------------------------------------------------------- overhead


def _adds_up(o: pd.DataFrame) -> None:
    OVERHEAD.check(o)
    cats = o[list(CATEGORIES)].to_numpy().sum(axis=1)
    assert (cats == o["wire_bytes"].to_numpy()).all()
    assert (o["other_bytes"] >= 0).all()


@pytest.mark.parametrize("name", ["endings", "lossy", "chrome", "zerortt"])
def test_quic_overhead_adds_up_to_the_wire_bytes(name: str, request: Any) -> None:
    cap = request.getfixturevalue(name)
    qc = cap.quic_connections
    for by in (False, True):
        o = _overhead(cap, by)
        _adds_up(o)
        q = o[o["transport"].astype(object) == "quic"]
        assert q["tcp_stream"].isna().all()
        assert q["quic_connection"].tolist() == sorted(
            qc["quic_connection"].tolist() * (2 if by else 1))
        assert int(q["wire_bytes"].sum()) == int(qc["client_wire_bytes"].sum()
                                                 + qc["server_wire_bytes"].sum())
        assert int(q["packets"].sum()) == int(qc["client_datagrams"].sum()
                                              + qc["server_datagrams"].sum())
        tcp = o[o["transport"].astype(object) == "tcp"]
        assert (q[[c for c in CATEGORIES if c not in QUIC_CATEGORIES and c not in (
            "sse_framing_bytes", "app_payload_bytes", "other_bytes")]] == 0).all().all()
        assert (tcp[list(QUIC_CATEGORIES)] == 0).all().all()
        total = o[o["total"]]
        assert len(total) == 1
        assert int(total["wire_bytes"].iloc[0]) == int(o.loc[~o["total"], "wire_bytes"].sum())
        # tcp=False (the report's QUIC part): the same QUIC rows, totalled alone
        only = overhead(cap, by_direction=by, quic=True, tcp=False)
        _adds_up(only)
        pd.testing.assert_frame_equal(only[~only["total"]].reset_index(drop=True),
                                      q.reset_index(drop=True), check_categorical=False)
        assert int(only.loc[only["total"], "wire_bytes"].iloc[0]) == int(q["wire_bytes"].sum())


def test_quic_overhead_against_tshark_padding_and_packet_lengths(lossy: Any, chrome: Any) -> None:
    # tshark 4.0.17 -Y quic -T fields -e quic.padding_length -e quic.packet_length (with
    # -o tls.keylog_file:captures/h3-sse-lossy.keys for the first): the PADDING frames'
    # lengths, and the sum of the packet lengths. tshark leaves the zeros after an Initial
    # out of the packets in h3-sse-lossy, and counts them in the Chrome capture (frames 48,
    # 49: tests/protocols/quic/test_quic_vs_tshark.py); both are padding datagram bytes here
    for cap, pad, plen, tshark_counts_zeros in ((lossy, 1035, 37357, False),
                                                (chrome, 874, 17958, True)):
        qf = cap.quic_frames
        assert int(qf.loc[qf["frame_type"].astype(object) == "PADDING", "frame_bytes"].sum()) == pad
        qc = cap.quic_connections
        payload = int(qc["client_bytes"].sum() + qc["server_bytes"].sum())
        packets = int(cap.quic_packets["length"].sum())
        assert (payload if tshark_counts_zeros else packets) == plen
        o = _overhead(cap)
        q = o[o["transport"].astype(object) == "quic"]
        assert int(q["quic_padding_bytes"].sum()) == pad + payload - packets
    assert int(lossy.quic_connections["client_bytes"].sum()
               + lossy.quic_connections["server_bytes"].sum()) - 37357 == 1293


def test_quic_overhead_categories_of_the_lossy_h3_capture(lossy: Any) -> None:
    o = _overhead(lossy, True)
    c, s = (o[(o["transport"].astype(object) == "quic")
              & (o["direction"].astype(object) == d)].iloc[0]
            for d in ("client_to_server", "server_to_client"))
    qc = lossy.quic_connections.iloc[0]
    assert c["protocol"] == "quic/http3"
    # Ethernet 14 + IPv4 20 + UDP 8 per datagram
    assert c["udp_header_bytes"] == 42 * qc["client_datagrams"] == 5292
    assert s["udp_header_bytes"] == 42 * qc["server_datagrams"]
    # 16-byte AEAD tag per protected packet: 3 Initial + 1 Handshake + 124 1-RTT from the
    # client; 1 Initial + 1 Handshake + 154 1-RTT from the server, and the Retry's tag
    assert c["quic_aead_tag_bytes"] == 16 * 128
    assert s["quic_aead_tag_bytes"] == 16 * (156 + 1)
    assert c["quic_undecrypted_bytes"] == s["quic_undecrypted_bytes"] == 0
    # the HTTP/3 bodies: DATA payloads split into SSE event data and SSE framing
    st = lossy.http3_streams
    assert s["app_payload_bytes"] + s["sse_framing_bytes"] == int(st["server_data_bytes"].sum())
    assert s["app_payload_bytes"] == int(lossy.http3_sse_events["data_bytes"].sum())
    assert c["app_payload_bytes"] == int(st["client_data_bytes"].sum())
    assert s["quic_resent_bytes"] == qc["server_resent_stream_bytes"]
    # what is left: the QPACK encoder/decoder stream type bytes and decoder instructions
    assert 0 <= c["other_bytes"] <= 16 and 0 <= s["other_bytes"] <= 16


def test_unparsed_quic_stream_bytes_are_other_bytes(endings: Any, cases: dict[str, Any]) -> None:
    """The lab ALPN is not parsed: each side's stream bytes are exactly what quicends.py
    wrote (``mode <case>\\n`` and ``are you there?\\n``, ``ok <case>\\n``)."""
    o = _overhead(endings, True)
    q = o[o["transport"].astype(object) == "quic"]
    for case, info in cases.items():
        rows = q[q["quic_connection"] == info["quic_connection"]]
        c, s = (rows[rows["direction"].astype(object) == d].iloc[0]
                for d in ("client_to_server", "server_to_client"))
        if info["client"].get("answer") is None:
            assert c["other_bytes"] == s["other_bytes"] == 0, case
            continue
        sent = len(f"mode {case}\n") + (len("are you there?\n") if case in ("vanish", "reset")
                                        else 0)
        assert c["other_bytes"] == sent, case
        assert s["other_bytes"] == len(f"ok {case}\n"), case
        assert c["protocol"] == "quic"


def test_tcp_rows_do_not_change(chrome: Any) -> None:
    plain = overhead(chrome)
    both = _overhead(chrome)
    assert set(plain["transport"].astype(object)) == {"tcp", "total"}
    def plain_values(df: pd.DataFrame) -> pd.DataFrame:
        return df.astype({c: object for c in ("transport", "direction", "protocol")})

    tcp = both[both["transport"].astype(object) == "tcp"].reset_index(drop=True)
    want = plain[~plain["total"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(plain_values(tcp), plain_values(want))
    assert (plain[list(QUIC_CATEGORIES)] == 0).all().all()
    tot = both[both["total"]].iloc[0]
    assert tot["wire_bytes"] == int(both.loc[~both["total"], "wire_bytes"].sum())
    assert both["transport"].astype(object).tolist() == ["tcp", "quic", "total"]


def test_undecrypted_quic_is_its_own_category(zerortt: Any) -> None:
    o = _overhead(zerortt)
    q = o[o["transport"].astype(object) == "quic"]
    assert (q["quic_undecrypted_bytes"] > 0).all()
    assert (q["app_payload_bytes"] == 0).all()
    qp = zerortt.quic_packets
    hidden = qp[qp["status"].astype(object) == "no_key"]
    want = int((hidden["length"] - hidden["header_bytes"] - 16).sum())
    assert int(q["quic_undecrypted_bytes"].sum()) == want
    assert (q["goodput_max_ratio"] > q["goodput_ratio"]).all()


# ----------------------------------------------------------------------------- heartbeats


def test_quic_pings_of_the_lossy_h3_capture(lossy: Any) -> None:
    hb = lossy.heartbeats()
    HEARTBEATS.check(hb)
    q = hb[hb["mechanism"].astype(object) == "quic_ping"]
    # tshark: 4 PING frames (quic.frame_type 1); aioquic's ACK-of-ACK triggers and a probe
    assert q["ping_frame"].tolist() == [50, 102, 103, 177]
    assert q["sender"].astype(object).tolist() == ["client", "server", "client", "client"]
    assert q["payload"].tolist() == ["1rtt:24", "1rtt:56", "1rtt:48", "1rtt:80"]
    assert q["pong_frame"].tolist() == [57, 103, 113, 188]
    assert q["outcome"].astype(object).tolist() == ["answered"] * 4
    assert q["tcp_stream"].isna().all() and (q["quic_connection"] == 0).all()
    # a client PING answered by a server ACK: one path RTT (20 ms each way)
    client = q[q["sender"].astype(object) == "client"]
    assert (client["rtt_ms"] > 40).all() and (client["rtt_ms"] < 60).all()
    summary = heartbeat_summary(hb, quic_connections=lossy.quic_connections)
    row = summary.iloc[0]
    assert (row["quic_connection"], row["mechanism"]) == (0, "quic_ping")
    assert (row["client_pings"], row["client_answered"], row["server_pings"]) == (3, 3, 1)


def test_quic_pings_answered_and_not(endings: Any, cases: dict[str, Any],
                                     facts: dict[str, Any]) -> None:
    hb = heartbeats(quic_frames=endings.quic_frames, quic_connections=endings.quic_connections)
    ping = hb[hb["quic_connection"] == cases["ping"]["quic_connection"]]
    # the client sent one PING every 300 ms (facts: t_pings_ns), every one answered by an
    # ACK after at least the link's round trip (10 ms each way)
    assert len(ping) == len(cases["ping"]["client"]["t_pings_ns"]) == 5
    assert (ping["outcome"].astype(object) == "answered").all()
    assert (ping["rtt_ms"] >= 2 * facts["link"]["delay_ms_each_way"]).all()
    assert ping["interval_ms"].dropna().between(300, 400).all()
    # the vanished server acknowledges nothing: the client's PTO probes carry PINGs
    gone = hb[hb["quic_connection"] == cases["vanish"]["quic_connection"]]
    assert len(gone) >= 3 and (gone["outcome"].astype(object) == "unanswered").all()


def _tshark_silences(path: Path, keys: Path) -> dict[tuple[int, str], tuple[float, int]]:
    """(client port, side) -> (longest silence ms, start ns), from tshark's fields alone:
    the gaps between a QUIC connection's first frame, the side's frames holding an
    ack-eliciting frame (quic.frame_type other than PADDING 0, ACK 2/3, CONNECTION_CLOSE
    0x1c/0x1d) and the connection's end: its last frame when it holds a CONNECTION_CLOSE or
    a stateless reset (quic.stateless_reset_token), else the capture's last frame."""
    rows = tshark_fields(path, ("frame.time_epoch", "udp.srcport", "quic.connection.number",
                                "quic.frame_type", "quic.stateless_reset_token"),
                         keylog_options(keys))
    capture_end = int(Decimal(rows[-1][0]) * 10**9)
    conns: dict[str, list[tuple[int, int, list[int], bool]]] = {}
    for t, sport, conn, ftypes, reset in rows:
        if conn:
            conns.setdefault(conn, []).append((int(Decimal(t) * 10**9), int(sport),
                                               [int(x, 0) for x in ftypes.split(",") if x],
                                               bool(reset)))
    out: dict[tuple[int, str], tuple[float, int]] = {}
    for pk in conns.values():
        client = pk[0][1]
        closed = any(r or {0x1C, 0x1D} & set(f) for _, _, f, r in pk)
        end = pk[-1][0] if closed else capture_end
        for side in ("client", "server"):
            ts = [pk[0][0], *[t for t, sp, f, _ in pk if (sp == client) == (side == "client")
                              and set(f) - {0x00, 0x02, 0x03, 0x1C, 0x1D}], end]
            gap, start = max((b - a, a) for a, b in itertools.pairwise(ts))
            out[(client, side)] = (gap / 1e6, start)
    return out


@pytest.mark.parametrize("name", ["quic-endings", "h3-sse-lossy", "h3-sse-chat"])
def test_quic_silences_equal_tshark(name: str) -> None:
    path, keys = CAPTURES / f"{name}.pcapng", CAPTURES / f"{name}.keys"
    cap = _load(path, keys)
    summ = heartbeat_summary(cap.heartbeats(), quic_connections=cap.quic_connections,
                             quic_packets=cap.quic_packets, capture_end=cap.summary.last_ts_ns)
    HEARTBEAT_SUMMARY.check(summ)
    want = _tshark_silences(path, keys)
    port = dict(zip(cap.quic_connections["quic_connection"].tolist(),
                    cap.quic_connections["client_port"].tolist(), strict=True))
    q = summ[summ["mechanism"].astype(object) == "quic_ping"]
    # every QUIC connection decrypted past its Initials has a row (quic-endings: 7 of 9)
    assert len(q) == {"quic-endings": 7, "h3-sse-lossy": 1, "h3-sse-chat": 2}[name]
    for _, r in q.iterrows():
        for side in ("client", "server"):
            ms, start = want[(int(port[int(r["quic_connection"])]), side)]
            assert r[f"{side}_longest_silence_ms"] == pytest.approx(ms, abs=1e-6)
            assert r[f"{side}_silence_start_ts"].value == start
    if name == "quic-endings":
        # the stateless-reset connection ends at its last packet, the idle-timeout ones at
        # the capture's end (10.3 s of nothing on connection 5)
        r5 = q[q["quic_connection"] == 5].iloc[0]
        assert round(float(r5["client_longest_silence_ms"])) == 10330


def test_quic_silence_is_na_when_an_undecrypted_packet_could_break_it() -> None:
    s = 1_000_000_000
    qc = QUIC_CONNECTIONS.frame([]).reindex(range(1))
    qc["quic_connection"] = 0
    qc["first_ts"] = pd.Timestamp(0, tz="UTC")
    qc["last_ts"] = pd.Timestamp(12 * s, tz="UTC")
    qc["end"] = "connection_close_application"
    qc["client_decrypted_packets"] = 3
    qc["server_decrypted_packets"] = 3

    def pk(t: int, d: str, status: str, frames: str | None) -> dict[str, Any]:
        return {"frame": t + 1, "ts": pd.Timestamp(t * s, tz="UTC"), "quic_connection": 0,
                "direction": d, "status": status, "frames": frames}

    c, sv = "client_to_server", "server_to_client"
    rows = [pk(0, c, "decrypted", "CRYPTO,PADDING"), pk(1, sv, "decrypted", "ACK,CRYPTO"),
            # client: only ACKs from 1 s to 8 s, one undecrypted packet at 4 s
            pk(2, c, "decrypted", "ACK"), pk(4, c, "no_key", None),
            pk(8, c, "decrypted", "STREAM"),
            # server: data at 2 s and 9 s, an undecrypted packet at 10 s (in a shorter gap)
            pk(2, sv, "decrypted", "STREAM"), pk(9, sv, "decrypted", "PING,ACK"),
            pk(10, sv, "decrypt_failed", None), pk(12, sv, "decrypted", "CONNECTION_CLOSE")]
    qp = QUIC_PACKETS.frame([]).reindex(range(len(rows)))
    for col in ("frame", "ts", "quic_connection", "direction", "status", "frames"):
        qp[col] = [r[col] for r in rows]
    summ = heartbeat_summary(HEARTBEATS.frame([]), quic_connections=qc, quic_packets=qp)
    r = summ.iloc[0]
    # client: 0 s -> 8 s is the longest gap, with an undecrypted packet in it: unknown
    assert r["client_pings"] == 0
    assert pd.isna(r["client_longest_silence_ms"]) and pd.isna(r["client_silence_start_ts"])
    # server: 2 s -> 9 s is clean and longer than 9 s -> 12 s (which holds the unknown one)
    assert r["server_longest_silence_ms"] == 7000.0
    assert r["server_silence_start_ts"] == pd.Timestamp(2 * s, tz="UTC")
    # without quic_packets: NaN, as before
    assert pd.isna(heartbeat_summary(HEARTBEATS.frame([]), quic_connections=qc)
                   .iloc[0]["server_longest_silence_ms"])


def test_tcp_heartbeats_keep_their_shape() -> None:
    cap = _load(CAPTURES / "ws-healthy.pcap")
    hb = cap.heartbeats()
    assert hb["quic_connection"].isna().all()
    assert hb["tcp_stream"].tolist() == [0] * 7
    assert cap.ws_heartbeats["quic_connection"].isna().all()
    assert str(cap.ws_heartbeats["tcp_stream"].dtype) == "Int64"


# ----------------------------------------------------------------------------- disconnects


def test_every_quic_ending_gets_its_verdict(endings: Any, cases: dict[str, Any]) -> None:
    d = _disconnects(endings)
    assert d["transport"].astype(object).eq("quic").all() and d["tcp_stream"].isna().all()
    got = dict(zip(d["quic_connection"].tolist(), d["verdict"].astype(object), strict=True))
    for case, info in cases.items():
        assert got.get(info["quic_connection"]) == info["expected_verdict"], case
    assert d.attrs["quic_connections"] == 9
    assert d.attrs["quic_clean_connections"] == 2  # clean, ping: NO_ERROR closes
    assert d.attrs["quic_open_connections"] == d.attrs["quic_unknown_connections"] == 0
    assert d.counts_line().startswith(
        "disconnects: 7 of 0 TCP connections and 9 QUIC connections ended badly")
    assert disconnects(endings).attrs.get("quic_connections") is None  # the default
    assert set(d["verdict"].astype(object)) <= set(QUIC_VERDICTS)


def test_quic_verdict_details(endings: Any, cases: dict[str, Any]) -> None:
    d = _disconnects(endings).set_index("quic_connection")
    row = {case: d.loc[info["quic_connection"]] for case, info in cases.items()
           if info["expected_verdict"]}
    app = row["app_error"]
    assert (app["peer"], app["closed_by"], app["close_error_code"]) == ("client", "client", 0x2A)
    assert app["close_reason"] == "client gave up"
    tr = row["transport_error"]
    assert (tr["peer"], tr["close_error_code"], tr["close_error"]) == (
        "server", 0x0A, "PROTOCOL_VIOLATION")
    assert tr["close_reason"] == "lab: protocol violation"
    # the server refused the ALPN: aioquic logged error 376 (0x178: TLS alert 120)
    alpn = row["alpn_mismatch"]
    refused = [e for e in cases["alpn_mismatch"]["server_events"] if e["what"] == "terminated"]
    assert alpn["close_error_code"] == refused[0]["error_code"] == 0x178
    assert alpn["close_error"] == "CRYPTO_ERROR(no_application_protocol)"
    assert alpn["peer"] == "server" and "close_transport_error" in alpn["signals"]
    un = row["unanswered"]
    assert un["peer"] == "server" and un["noticed_how"] == "gave_up"
    assert "never answered the client's 4 datagram(s)" in un["summary"]
    idle = row["idle"]
    assert idle["idle_timeout_ms"] == 1000 == cases["idle"]["client"]["idle_timeout_s"] * 1000
    assert idle["noticed_how"] == "idle_timeout" and idle["detection_delay_ms"] == 1000
    assert idle["idle_gap_ms"] > 1000
    # every client datagram after the server's last one is one the server dropped (its log)
    van = row["vanish"]
    dropped = [e for e in cases["vanish"]["server_events"] if e["what"] == "dropped"]
    assert van["retransmissions_after_peer"] == len(dropped) == 6
    assert 1.5 < van["backoff_ratio"] < 2.5  # PTO backoff doubles
    assert (van["peer"], van["noticed_how"]) == ("server", "gave_up")
    res = row["reset"]
    sent = [e for e in cases["reset"]["server_events"] if e["what"] == "stateless_reset_sent"]
    qp = endings.quic_packets
    resets = qp[qp["status"].astype(object) == "stateless_reset"]
    assert len(resets) == len(sent) == 3
    assert res["noticed_frame"] == resets["frame"].min()
    assert (res["peer"], res["closed_by"], res["noticed_how"]) == (
        "server", "server", "reset_received")
    assert all(f.startswith(f"quic.connection.number eq {q} ")
               for q, f in zip(d.index, d["display_filter"], strict=True))


def test_clean_and_undecrypted_quic_connections_get_no_row(lossy: Any, zerortt: Any) -> None:
    d = _disconnects(lossy)
    assert len(d) == 0 and d.attrs["quic_clean_connections"] == 1
    d = _disconnects(zerortt)
    assert len(d) == 0
    assert d.attrs["quic_unknown_connections"] == d.attrs["quic_connections"] == 2


#: shipped QUIC capture -> (its QUIC rows' verdicts by quic_connection, quic_connections,
#: quic_clean_connections); none is open or undecrypted
_QUIC_ONLY: dict[str, tuple[dict[int, str], int, int]] = {
    "quic-endings": ({1: "close_application_error", 2: "close_transport_error",
                      3: "handshake_incomplete", 4: "handshake_incomplete", 5: "idle_timeout",
                      6: "peer_vanished", 7: "stateless_reset"}, 9, 2),
    "h3-sse-chat": ({}, 2, 2),
    "h3-sse-lossy": ({}, 1, 1),
    "h3-sse-lossy-server": ({}, 1, 1),
    "h3-push": ({}, 1, 1),
    "quic-suites": ({}, 4, 4),
}


def _quic_part(full: pd.DataFrame) -> pd.DataFrame:
    q = full[(full["transport"].astype(object) == "quic").to_numpy(bool)]
    return pd.DataFrame(q).reset_index(drop=True)


@pytest.mark.parametrize("name", sorted(_QUIC_ONLY))
def test_quic_only_call_is_the_quic_part(name: str) -> None:
    """disconnects(quic=True, tcp=False), what the report calls, gives exactly the QUIC rows
    and quic_* attrs of disconnects(quic=True), without the TCP counts."""
    path = CAPTURES / f"{name}.pcapng"
    cap = _load(path, path.with_suffix(".keys"))
    full = _disconnects(cap)
    only = disconnects(cap, quic=True, tcp=False)
    pd.testing.assert_frame_equal(pd.DataFrame(only), _quic_part(full))
    quic_attrs = {k: v for k, v in full.attrs.items() if k.startswith("quic_")}
    assert {k: v for k, v in only.attrs.items() if k.startswith("quic_")} == quic_attrs
    assert "connections" not in only.attrs and "clean_connections" not in only.attrs
    assert only.attrs["parameters"] == full.attrs["parameters"]
    verdicts, n, clean = _QUIC_ONLY[name]
    got = dict(zip(only["quic_connection"].tolist(), only["verdict"].astype(object),
                   strict=True))
    assert got == verdicts
    assert quic_attrs == {"quic_connections": n, "quic_clean_connections": clean,
                          "quic_open_connections": 0, "quic_unknown_connections": 0}
    assert only.attrs["verdicts"] == {v: list(verdicts.values()).count(v)
                                      for v in set(verdicts.values())}
    plural = "" if n == 1 else "s"
    assert only.counts_line().startswith(
        f"disconnects: {len(verdicts)} of {n} QUIC connection{plural} ended badly")


def test_quic_only_call_beside_tcp(chrome: Any) -> None:
    """A capture with a TCP connection too (Chrome's, from the corpus): the QUIC-only call
    leaves the TCP connection out of rows and counts."""
    full = _disconnects(chrome)
    only = disconnects(chrome, quic=True, tcp=False)
    assert full.attrs["connections"] == 1 and full.attrs["quic_connections"] == 1
    pd.testing.assert_frame_equal(pd.DataFrame(only), _quic_part(full))
    assert len(only) == 0 and only.attrs["quic_clean_connections"] == 1
    assert only.counts_line() == ("disconnects: 0 of 1 QUIC connection ended badly "
                                  "(1 QUIC closed cleanly with CONNECTION_CLOSE)")


def test_tcp_false_needs_quic(lossy: Any) -> None:
    with pytest.raises(ValueError, match="needs quic=True"):
        disconnects(lossy, tcp=False)


# ------------------------------------------------------------------------------------ PTO


def test_pto_episodes_match_aioquics_timer(endings: Any, cases: dict[str, Any]) -> None:
    """client_pto_probes equals the PTO expiries aioquic logged (each sent one probe), and
    the first probe left within 5 ms of the first expiry."""
    qc = endings.quic_connections.set_index("quic_connection")
    qp = endings.quic_packets
    for case, info in cases.items():
        row = qc.loc[info["quic_connection"]]
        ptos = [t for t in info["client"].get("timers") or [] if t["timer"] == "pto"]
        assert row["client_pto_probes"] == len(ptos), case
        assert row["client_pto_episodes"] == (1 if ptos else 0), case
        if ptos:
            ts = qp.loc[qp["frame"] == row["client_pto_first_frame"], "ts"].iloc[0].value
            assert abs(ts - ptos[0]["t_ns"]) < 5_000_000, case
            assert pd.isna(row["client_pto_max_ms"])  # never answered
    # a stateless reset is not decrypted: the server's probes could not show
    assert pd.isna(qc.loc[cases["reset"]["quic_connection"], "server_pto_episodes"])


def test_pto_is_na_without_keys(zerortt: Any) -> None:
    qc = zerortt.quic_connections
    assert qc["client_pto_episodes"].isna().all() and qc["server_pto_episodes"].isna().all()


def test_against_live_tshark(tshark: str, endings: Any) -> None:
    """PING frames and PADDING bytes of quic-endings as tshark counts them."""
    out = subprocess.run(
        [tshark, "-n", "-r", str(ENDINGS), "-o",
         f"tls.keylog_file:{CAPTURES / 'quic-endings.keys'}", "-Y", "quic", "-T", "fields",
         "-e", "quic.frame_type", "-e", "quic.padding_length"],
        capture_output=True, text=True, check=True).stdout
    types = [int(x) for line in out.splitlines() for x in line.split("\t")[0].split(",") if x]
    pad = sum(int(x) for line in out.splitlines() if "\t" in line
              for x in line.split("\t")[1].split(",") if x)
    qf = endings.quic_frames
    assert (qf["frame_type_code"] == 1).sum() == types.count(1)
    assert int(qf.loc[qf["frame_type_code"] == 0, "frame_bytes"].sum()) == pad


@pytest.mark.parametrize("name", ["endings", "lossy", "chrome", "zerortt"])
def test_header_frames_and_tag_are_the_packet(name: str, request: Any) -> None:
    """quic_packets.header_bytes + the quic_frames.frame_bytes of its frames + the 16-byte
    AEAD tag is the packet's length, for every decrypted packet."""
    cap = request.getfixturevalue(name)
    qp, qf = cap.quic_packets, cap.quic_frames
    dec = qp[qp["status"].astype(object) == "decrypted"].set_index(["frame", "index"])
    assert len(dec)
    sizes = qf.groupby(["frame", "packet_index"])["frame_bytes"].sum()
    sizes.index = sizes.index.set_names(["frame", "index"])
    got = dec["header_bytes"].astype("int64") + sizes.reindex(dec.index).fillna(0).astype("int64")
    assert (got + 16 == dec["length"]).all()
    # a short header: 1 byte, the destination connection ID, a 1-4 byte packet number
    short = dec[~dec["long_header"]]
    extra = short["header_bytes"] - 1 - short["dcid"].str.len() // 2
    assert extra.between(1, 4).all()
