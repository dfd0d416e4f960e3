"""The Verdicts checklist (pcaptools.report.checklist) on the demo capture, against what the
recording knows (captures/demo.pcapng.facts.json: the connections' ends, tshark's decrypted
view, the client's own timeline), and the directory index facts of the same report."""

from __future__ import annotations

import json
from typing import Any

import pytest

import pcaptools
from pcaptools.analyses.latency import stream_latency
from pcaptools.analyses.summary import fmt_ms
from pcaptools.report.checklist import QUESTIONS, STATUSES, checklist
from pcaptools.report.html import build_sections, index_facts
from tests.conftest import CAPTURES

DEMO = CAPTURES / "demo.pcapng"
pytestmark = pytest.mark.skipif(not DEMO.is_file(), reason="captures/demo.pcapng absent")


@pytest.fixture(scope="module")
def demo() -> tuple[Any, dict[str, Any], dict[str, Any]]:
    cap = pcaptools.load(DEMO, keylog=DEMO.with_suffix(".keys"))
    _, ctx = build_sections(cap, sections=[])
    checks = {c.key: c for c in checklist(ctx)}
    facts = json.loads(DEMO.with_name(DEMO.name + ".facts.json").read_text())
    return cap, checks, {"facts": facts, "index": index_facts(ctx)}


def _stream(cap: Any, endpoint: str) -> int:
    port = int(endpoint.rsplit(":", 1)[1])
    return int(cap.connections.loc[cap.connections["client_port"] == port, "tcp_stream"].iloc[0])


def test_one_line_per_question(demo: tuple[Any, dict[str, Any], dict[str, Any]]) -> None:
    _, checks, _ = demo
    # (no QUIC and no realtime events in the demo: those two questions have no line)
    assert list(checks) == [k for k, _ in QUESTIONS if k not in ("quic", "voice")]
    assert all(c.status in STATUSES and c.status != "error" for c in checks.values())


def test_the_silent_death_is_named(demo: tuple[Any, dict[str, Any], dict[str, Any]]) -> None:
    cap, checks, f = demo
    dead = [c for c in f["facts"]["connections"] if c["end"] == "black-hole"]
    assert len(dead) == 1
    tcp = _stream(cap, dead[0]["client"])
    c = checks["disconnects"]
    assert (c.status, c.text) == ("bad", "1 of 3 connections did not end cleanly: 1 peer "
                                         "vanished.")
    assert c.worst is not None and c.worst.startswith(f"tcp.stream {tcp}: server went silent")
    assert c.filter is not None and c.filter.startswith(f"tcp.stream eq {tcp} && ")
    # its unanswered ping is the heartbeat line's worst connection; tshark saw 15 pings and
    # 14 pongs (all but the one sent into the void)
    ws = f["facts"]["tshark"]["app"]["websocket"]["opcodes"]
    assert (ws["ping"], ws["pong"]) == (15, 14)
    h = checks["heartbeats"]
    assert h.status == "bad"
    assert h.text.startswith(f"WebSocket: {ws['pong']} of {ws['ping']} pings answered")
    assert h.worst == f"tcp.stream {tcp}: 1 unanswered ping"
    assert h.filter == f"tcp.stream eq {tcp} && websocket.opcode in {{9 10}}"
    assert f["index"]["unclean_connections"] == 1 and f["index"]["missed_heartbeats"] == 1


def test_tls_and_streaming(demo: tuple[Any, dict[str, Any], dict[str, Any]]) -> None:
    cap, checks, f = demo
    tls = f["facts"]["tshark"]["app"]["tls"]
    assert all(s["decrypted"] for s in tls["streams"]) and len(tls["streams"]) == 3
    t = checks["tls"]
    assert t.status == "ok" and t.text.startswith("3 sessions (TLS 1.3), all decrypted, ")
    assert (f["index"]["tls_sessions"], f["index"]["tls_decrypted"]) == (3, 3)
    # time to first token: the capture measures from the request's last byte on the wire, the
    # client from before it sent; on the reused connection (chat-2, chat-3) the client's wait
    # is the capture's plus its own few ms
    chat = next(c for c in f["facts"]["connections"] if c["server"].endswith(":443"))
    lat = stream_latency(cap)
    streamed = lat[lat["token_events"] > 0].sort_values("request_ts")
    assert len(streamed) == len(chat["requests"]) == 3
    client = f["facts"]["truth"]["time_to_first_token_ms"]
    for wire, seen, reused in zip(streamed["ttft_ms"], client, streamed["reused"], strict=True):
        assert wire < seen
        if reused:
            assert seen - wire < 30
    c = checks["ttft"]
    assert c.text.startswith(f"median {fmt_ms(float(streamed['ttft_ms'].median()))}")
    slow = streamed.loc[streamed["ttft_ms"].idxmax()]
    assert c.filter == str(slow["wireshark_filter"])
    assert f["index"]["ttft_median_ms"] == pytest.approx(float(streamed["ttft_ms"].median()))


def test_loss_and_what_was_not_analysed(demo: tuple[Any, dict[str, Any], dict[str, Any]]) -> None:
    _, checks, f = demo
    link = f["facts"]["link"]
    dropped = [d for k in ("client_to_server", "server_to_client")
               for d in link[k]["dropped_segments"] if d["len"] > 0]
    # the link's drops, plus the 5 segments the client resent into the black hole
    lost = len(dropped) + 5
    c = checks["loss"]
    assert c.status == "warn" and f"({lost} of " in c.text
    na = checks["not-analysed"]
    assert (na.status, na.text) == ("warn", "2 non-IP frames (0.2% of bytes) were ARP and are "
                                            "not analysed.")
    assert checks["dns"].status == checks["path-mtu"].status == "absent"
    assert checks["warnings"].status == "ok"


def test_slowest_request_line_is_request_timings() -> None:
    """slow-causes: the slowest request is HTTP/2 stream 3 on tcp.stream 0 (the stream the
    recording paused, facts "connections"), its line quotes request_timing's total, its
    largest part and its stalls, names its sentence and filter, and links to the section."""
    from pcaptools.analyses.slow import request_timing, stalls

    path = CAPTURES / "slow-causes.pcapng"
    if not path.is_file():
        pytest.skip("captures/slow-causes.pcapng absent")
    cap = pcaptools.load(path, keylog=path.with_suffix(".keys"))
    _, ctx = build_sections(cap, sections=[])
    c = {c.key: c for c in checklist(ctx)}["slowest"]
    facts = json.loads((CAPTURES / "slow-causes.facts.json").read_text())
    assert "server pause on stream 3" in facts["connections"][0]["purpose"]
    st = stalls(cap)
    rt = request_timing(cap, stall_table=st)
    r = rt.loc[rt["total_ms"].idxmax()]
    assert (int(r["stream_id"]), int(r["tcp_stream"]), int(r["stalls"])) == (3, 0, 2)
    parts = ["dns_ms", "connect_ms", "tls_ms", "client_ms", "upload_ms", "network_rtt_ms",
             "server_wait_ms", "model_wait_ms", "streaming_ms", "stall_ms"]
    assert r[parts].astype(float).idxmax() == "streaming_ms"
    share = 100 * r["streaming_ms"] / r["total_ms"]
    assert share >= 50
    assert (c.status, c.section) == ("info", "slow")
    assert c.text == (
        f"of {len(rt)} requests, stream 3 on tcp.stream 0, {fmt_ms(r['total_ms'])}, mostly "
        f"streaming ({fmt_ms(r['streaming_ms'])}, {share:.0f}%); 2 stalls "
        f"({fmt_ms(r['stall_ms'])}; longest: server pause).")
    assert c.text == ("of 7 requests, stream 3 on tcp.stream 0, 4,217 ms, mostly streaming "
                      "(3,110 ms, 74%); 2 stalls (888.4 ms; longest: server pause).")
    assert r["worst_stall_cause"] == "server_pause"
    assert c.worst == r["sentence"]
    assert c.filter == r["wireshark_filter"] == "tcp.stream eq 0 && http2.streamid eq 3"


@pytest.mark.parametrize(("name", "status", "text"), [
    ("tls-versions-ciphers.pcapng", "absent", "no HTTP request to time (see the HTTP line)."),
    ("tcp-reset.pcap", "absent",
     "4 requests, none with a response end in the capture: no total time."),
])
def test_slowest_request_line_without_a_timed_request(name: str, status: str,
                                                      text: str) -> None:
    """No request (TLS not decrypted: no keys given), or requests whose responses never
    ended in the capture (tcp-reset): the line says so."""
    path = CAPTURES / name
    if not path.is_file():
        pytest.skip(f"captures/{name} absent")
    cap = pcaptools.load(path)
    _, ctx = build_sections(cap, sections=[])
    c = {c.key: c for c in checklist(ctx)}["slowest"]
    assert (c.status, c.text, c.worst, c.filter) == (status, text, None, None)
