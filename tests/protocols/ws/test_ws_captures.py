"""WebSocket and heartbeat tables on the recorded captures (captures/ws-*.pcap, h2-ping.pcap),
against tshark 4.0 and what the client and server logged (the facts files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.heartbeats import heartbeat_summary, heartbeats
from tests.conftest import CAPTURES
from tests.oracle import keylog_options
from tests.protocols.ws.test_ws_load import ours_ws, tshark_ws

WS_CAPTURES = {
    "ws-healthy.pcap": None,
    "ws-tls.pcapng": "ws-tls.keys",
    "ws-blackhole.pcap": None,
    "ws-idle-reset.pcap": None,
}


def _load(name: str) -> tuple[pcaptools.Capture, dict[str, Any], Path | None]:
    path = CAPTURES / name
    facts_path = CAPTURES / f"{name}.facts.json"
    if not path.is_file() or not facts_path.is_file():
        pytest.skip(f"captures/{name} is absent")
    keys = WS_CAPTURES.get(name)
    keylog = CAPTURES / keys if keys else None
    cap = pcaptools.load(path, keylog=keylog)
    return cap, json.loads(facts_path.read_text()), keylog


def _text(hexpayload: str) -> str:
    return bytes.fromhex(hexpayload).decode("latin-1")


@pytest.mark.tshark
@pytest.mark.parametrize("name", sorted(WS_CAPTURES))
def test_frames_equal_tshark(name: str, tshark: str) -> None:
    cap, facts, keylog = _load(name)
    theirs = tshark_ws(CAPTURES / name, keylog_options(keylog))
    assert theirs, "tshark saw no WebSocket frame"
    assert ours_ws(cap) == theirs
    w = facts["tshark"]["app"]["websocket"]
    counts = cap.ws_frames["opcode_name"].astype(str).value_counts().to_dict()
    assert {k: v for k, v in w["opcodes"].items() if v} == counts
    assert sorted(cap.ws_frames.loc[cap.ws_frames["close_code"].notna(), "close_code"]) == sorted(
        w["close_codes"]
    )
    assert int(cap.ws_frames["masked"].sum()) == w["masked"]
    assert int((~cap.ws_frames["fin"]).sum()) == w["fin_clear"]


@pytest.mark.parametrize("name", ["ws-healthy.pcap", "ws-tls.pcapng"])
def test_healthy_sessions(name: str) -> None:
    cap, facts, _ = _load(name)
    t = facts["truth"]
    assert (cap.warnings["layer"].astype(str) == "ws").sum() == 0
    (c,) = cap.ws_connections.itertuples()
    assert (
        c.path,
        c.accept_ok,
        c.permessage_deflate,
        c.close_by,
        c.client_close_code,
        c.server_close_code,
        c.end_reason,
    ) == ("/chat", True, False, "client", 1000, 1000, "close_handshake")
    assert (c.client_pings, c.server_pings) == (len(t["client_pings"]), len(t["server_pings"]))
    # every message the client sent, and the server's echo, with its type and fragments
    m = cap.ws_messages
    sent = [(x["type"], x.get("fragments") or 1) for x in t["client_sent"]]
    cm = m[m["direction"] == "client_to_server"]
    # websockets ends a fragmented message with an empty FIN continuation (one frame more)
    assert [
        (ty, f - 1 if f > 1 else f)
        for ty, f in zip(cm["type"].astype(str), cm["fragments"], strict=True)
    ] == sent
    assert len(m[m["direction"] == "server_to_client"]) == len(t["server_received"])
    assert (m["end_reason"].astype(str) == "fin").all() and m["utf8_ok"].dropna().all()
    hb = cap.ws_heartbeats
    pings = {("client", p["payload"]) for p in t["client_pings"]} | {
        ("server", p["payload"]) for p in t["server_pings"]
    }
    assert {(str(r.sender), _text(r.payload)) for r in hb.itertuples()} == pings
    assert hb["answered"].all() and (hb["outcome"].astype(str) == "answered").all()
    # the ends measured their own ping latency; ours is the capture's view (client side)
    logged = {p["payload"]: p["latency_ms"] for p in t["client_pongs_received"]}
    for r in hb[hb["sender"] == "client"].itertuples():
        assert 0 < r.rtt_ms <= logged[_text(r.payload)]
    sm = heartbeat_summary(hb, connections=cap.connections, packets=cap.packets)
    (s,) = sm.itertuples()
    assert (
        s.client_pings,
        s.client_answered,
        s.client_missed,
        s.server_pings,
        s.server_answered,
    ) == (
        len(t["client_pings"]),
        len(t["client_pings"]),
        0,
        len(t["server_pings"]),
        len(t["server_pings"]),
    )
    every = {"ws-healthy.pcap": (2000, 3000), "ws-tls.pcapng": (1000, 1500)}[name]
    assert abs(s.client_interval_ms - every[0]) < 50 and abs(s.server_interval_ms - every[1]) < 50


def test_blackhole() -> None:
    cap, facts, _ = _load("ws-blackhole.pcap")
    t = facts["truth"]
    b = t["blackhole"]
    hb = cap.ws_heartbeats
    client = hb[hb["sender"] == "client"]
    answered = {p["payload"] for p in t["client_pongs_received"]}
    for r in client.itertuples():
        before = r.ping_ts.value < b["installed_ns_from"]
        assert (_text(r.payload) in answered) == before == (r.outcome == "answered")
    # the ping in flight when the path vanished: the capture saw 3.1 s of it unanswered
    last = client.iloc[-1]
    assert _text(last["payload"]) == b["client_ping_timeout"]["payload"]
    assert str(last["outcome"]) == "unanswered" and bool(last["answered"]) is False
    # the pings the client queued after it never reached the wire
    assert len(client) < len(t["client_pings"])
    (c,) = cap.ws_connections.itertuples()
    # the client's Close (1011) stayed queued behind unacknowledged data: none on the wire,
    # and the TCP connection was still open when the capture stopped
    assert pd.isna(c.close_by) and pd.isna(c.client_close_code) and c.end_reason == "open_at_eof"
    sm = heartbeat_summary(hb, connections=cap.connections, packets=cap.packets)
    (s,) = sm.itertuples()
    assert (s.client_missed, s.client_answered) == (1, len(answered))
    # nothing from the server after the black hole until the capture ended
    last_server = b["last_server_packet_before"]["t_epoch"]
    end = cap.summary.last_ts_ns or 0
    assert abs(s.server_longest_silence_ms - (end / 1e6 - float(last_server) * 1e3)) < 1


def test_idle_reset() -> None:
    cap, facts, _ = _load("ws-idle-reset.pcap")
    i = facts["truth"]["idle"]
    assert len(cap.ws_heartbeats) == 0
    m = cap.ws_messages
    assert m["preview"].astype(str).tolist() == [
        "before the idle gap",
        "before the idle gap",
        "after the idle gap",
    ]
    sm = heartbeat_summary(
        cap.ws_heartbeats,
        connections=cap.connections,
        packets=cap.packets,
        ws_connections=cap.ws_connections,
    )
    (s,) = sm.itertuples()
    assert (s.mechanism, s.client_pings, s.server_pings) == ("websocket", 0, 0)
    # the wire gap counts pure ACKs too; ours is between the client's payload packets
    assert i["gap_on_wire_s"] <= s.client_longest_silence_ms / 1e3 < i["gap_on_wire_s"] + 0.1
    assert s.client_longest_silence_ms / 1e3 >= i["planned_s"] - 0.5
    (c,) = cap.ws_connections.itertuples()
    assert c.end_reason == "no_close"
    assert cap.connections.iloc[0]["end_reason"] == "rst"


def test_h2_ping() -> None:
    path = CAPTURES / "h2-ping.pcap"
    if not path.is_file():
        pytest.skip("captures/h2-ping.pcap is absent")
    facts = json.loads((CAPTURES / "h2-ping.pcap.facts.json").read_text())
    cap = pcaptools.load(path)
    hb = heartbeats(cap.ws_frames, cap.http2_frames, cap.tcp_events, connections=cap.connections)
    pings = facts["truth"]["pings"]
    h2 = hb[hb["mechanism"] == "http2"]
    assert [_text(p) for p in h2["payload"]] == [p["payload"] for p in pings]
    assert h2["answered"].tolist() == ["t_ack_ns" in p for p in pings]
    for r, p in zip(h2.itertuples(), pings, strict=True):
        if "rtt_ms" in p:
            assert 0 < r.rtt_ms <= p["rtt_ms"]
    sm = heartbeat_summary(
        hb,
        connections=cap.connections,
        packets=cap.packets,
        http2_connections=cap.http2_connections,
    )
    s = sm[sm["mechanism"] == "http2"].iloc[0]
    assert abs(s["client_interval_ms"] - facts["truth"]["ping_interval_s"] * 1e3) < 50
