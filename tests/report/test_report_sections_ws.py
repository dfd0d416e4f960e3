"""The heartbeats, disconnects and overhead sections of the report and their verdict sentences:
exact lines on the recorded captures in captures/, one-line no-data notes, and the chart data."""

from __future__ import annotations

import re

import pytest

import pcaptools
from pcaptools.analyses.heartbeats import heartbeats
from pcaptools.analyses.summary import health_verdicts
from pcaptools.report import SECTIONS, charts, render_report
from pcaptools.report import html as html_mod
from pcaptools.report.html import disconnects_section, heartbeats_section, overhead_section
from tests.conftest import CAPTURES
from tests.report.factory import checklist_lines, empty_capture, make_capture, report_section

MINE = [heartbeats_section, disconnects_section, overhead_section]
TITLES = {
    "heartbeats": "WebSocket and heartbeats",
    "disconnects": "Disconnects",
    "overhead": "Overhead",
}


def _nodata(html: str, sid: str) -> str | None:
    m = re.search(r'<p class="nodata">(.*?)</p>', report_section(html, sid), re.S)
    return m.group(1) if m else None


def _load(name: str, keys: str | None = None) -> pcaptools.Capture:
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"{path} not recorded")
    return pcaptools.load(path, keylog=CAPTURES / keys if keys else None)


@pytest.fixture(scope="module")
def blackhole() -> tuple[pcaptools.Capture, str]:
    cap = _load("ws-blackhole.pcap")
    return cap, render_report(cap)


def test_sections_sit_before_warnings() -> None:
    names = [b.__name__ for b in SECTIONS]
    assert names.index("streaming_section") < names.index("heartbeats_section")
    assert (
        names.index("heartbeats_section")
        < names.index("disconnects_section")
        < names.index("overhead_section")
        < names.index("warnings_section")
    )


def test_ws_blackhole(blackhole: tuple[pcaptools.Capture, str]) -> None:
    _, html = blackhole
    assert "This section failed" not in html
    for sid, title in TITLES.items():
        assert f"<h2>{title}</h2>" in report_section(html, sid)
    hb = report_section(html, "heartbeats")
    assert 'id="fig-heartbeats"' in hb
    assert "5 pings on 1 connection." in hb
    # client: 4 pings, 3 answered, 1 missed; server: 1 ping answered
    assert re.search(r"<td>WebSocket Ping/Pong</td><td>client</td><td class=\"num\">4</td>"
                     r"<td class=\"num\">3</td><td class=\"num\">1</td>", hb)
    assert "tcp.stream eq 0 &amp;&amp; websocket.opcode in {9 10}" in hb
    d = report_section(html, "disconnects")
    assert "<td>peer_vanished</td>" in d
    assert '<code class="filter">tcp.stream eq 0 &amp;&amp; frame.number &gt;= 29</code>' in d
    assert "29, 31, 33, 34, 35, 36, 37" in d
    assert "<p>0 of 1 connection ended cleanly" in d
    assert "4,143" in d  # detection delay ms
    o = report_section(html, "overhead")
    assert 'id="fig-overhead"' in o
    assert "<th>bytes on the wire</th><td>3,122</td>" in o
    assert "<th>goodput</th><td>2.0%</td>" in o
    lines = checklist_lines(html)
    assert lines["Disconnects"] == ("bad", (
        "1 of 1 connection did not end cleanly: 1 peer vanished. tcp.stream 0: server went "
        "silent after frame 29; the client retransmitted 5 times into the void (gaps growing "
        "x2.0) and was still waiting when the capture ended 4.1 s after its last sign of life "
        "tcp.stream eq 0 && frame.number >= 29"))
    assert lines["Heartbeats"] == ("bad", (
        "WebSocket: 4 of 5 pings answered (median 0.448 ms); 1 ping never answered, 1 of them "
        "missed (the connection lived on 2 s or more). tcp.stream 0: 1 unanswered ping "
        "tcp.stream eq 0 && websocket.opcode in {9 10}"))
    # the goodput is over the TCP bytes, and says so (2 ARP frames are not TCP)
    assert lines["Overhead"] == ("info", "goodput 2.0%: 63 of 3,122 TCP bytes on the wire are "
                                         "application payload.")
    assert lines["Not analysed"] == ("warn", "2 non-IP frames (2.6% of bytes) were ARP and are "
                                             "not analysed.")


def test_heartbeat_points_mark_the_unanswered_ping(
    blackhole: tuple[pcaptools.Capture, str],
) -> None:
    cap, _ = blackhole
    hb = heartbeats(cap.ws_frames, cap.http2_frames, cap.tcp_events, connections=cap.connections)
    t0 = cap.summary.first_ts_ns
    assert t0 is not None
    pts = charts.heartbeat_points(hb, t0)
    assert (pts["kind"] == "ping").sum() == 5 and (pts["kind"] == "pong").sum() == 4
    bad = pts[pts["outcome"] == "unanswered"]
    assert bad["frame"].tolist() == [31]
    assert bad["lane"].tolist() == ["tcp.stream 0 / websocket / client"]
    assert set(pts["lane"]) == {
        "tcp.stream 0 / websocket / client",
        "tcp.stream 0 / websocket / server",
    }
    fig = charts.heartbeat_figure(pts)
    assert fig is not None
    assert [t.name for t in fig.data] == ["ping answered", "ping unanswered", "pong"]


def test_ws_healthy() -> None:
    cap = _load("ws-healthy.pcap")
    html = render_report(cap, sections=MINE)
    assert "This section failed" not in html
    assert _nodata(html, "disconnects") == (
        "No connection ended badly: 1 of 1 connection ended cleanly "
        "(FIN both ways, and a WebSocket Close frame)."
    )
    hb = report_section(html, "heartbeats")
    assert "7 pings on 1 connection." in hb
    assert "2,001" in hb  # client ping interval (median ms)
    assert health_verdicts(cap) == [
        "WebSocket pings: 7 of 7 answered, median pong 0.359 ms.",
        "Goodput 69% of the TCP bytes on the wire (12,170 of 17,731 bytes are application "
        "payload); the TCP connections hold 99.5% of the capture's 17,815 bytes.",
    ]


def test_h2_ping() -> None:
    cap = _load("h2-ping.pcap")
    html = render_report(cap, sections=MINE)
    hb = report_section(html, "heartbeats")
    assert "6 pings on 1 connection." in hb
    assert "<td>HTTP/2 PING</td><td>client</td>" in hb
    assert '<code class="filter">tcp.stream eq 0 &amp;&amp; http2.type == 6</code>' in hb
    assert "HTTP/2 PINGs: 6 of 6 answered, median PING ACK 0.137 ms." in health_verdicts(cap)


def test_compare_h2_decrypted() -> None:
    cap = _load("compare-h2.pcapng", "compare-h2.keys")
    html = render_report(cap, sections=MINE)
    assert "This section failed" not in html
    hb = report_section(html, "heartbeats")
    assert "No ping on any connection" in hb
    assert "<td>HTTP/2 PING</td><td>no pings</td>" in hb
    assert 'id="fig-heartbeats"' not in hb
    o = report_section(html, "overhead")
    assert "<th>goodput</th><td>48.0%</td>" in o
    assert "<th>TLS record headers, tags and padding</th><td>5,786 (7.5%)</td>" in o
    assert health_verdicts(cap) == [
        "Goodput 48% of bytes on the wire (37,222 of 77,491 bytes are application payload).",
    ]


def test_without_websocket_the_sections_degrade() -> None:
    cap = _load("tcp-refused.pcap")
    html = render_report(cap, sections=MINE)
    assert _nodata(html, "heartbeats") == (
        "No WebSocket or HTTP/2 connection and no TCP keep-alive in this capture."
    )
    d = report_section(html, "disconnects")
    assert "<p>1 of 4 connections ended cleanly (FIN both ways).</p>" in d
    assert d.count("<td>refused</td>") == 2 and d.count("<td>syn_unanswered</td>") == 1
    assert '<code class="filter">tcp.stream eq 2 &amp;&amp; frame.number &gt;= 15</code>' in d
    assert "3 of 4 TCP connections did not end cleanly: 2 refused, 1 syn unanswered." in (
        health_verdicts(cap)
    )


def test_empty_capture_one_line_each() -> None:
    html = render_report(empty_capture(5), sections=MINE)
    assert _nodata(html, "heartbeats") == (
        "No WebSocket or HTTP/2 connection and no TCP keep-alive in this capture."
    )
    assert _nodata(html, "disconnects") == "No TCP connections in this capture."
    assert _nodata(html, "overhead") == "No TCP connections in this capture."
    assert health_verdicts(empty_capture(5)) == []


def test_tcp_only_capture_has_no_overhead_chart() -> None:
    html = render_report(make_capture(), sections=[overhead_section])
    o = report_section(html, "overhead")
    assert "No layer above TCP was parsed" in o
    assert 'id="fig-overhead"' not in o
    assert "<th>bytes on the wire</th><td>40,800</td>" in o


def test_overhead_chart_caps_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    cap = _load("tcp-refused.pcap")
    monkeypatch.setattr(html_mod, "MAX_OVERHEAD_BARS", 2)
    html = render_report(cap, sections=[overhead_section])
    o = report_section(html, "overhead")
    assert "Chart: the 2 largest of 4 connections by wire bytes, and the total of all." in o
    # the bars: streams 0 (2,181 B) and 2 (296 B), then the total
    ys = set(re.findall(r'"y":\s*\[([^\]]*)\]', o))
    assert ys == {'"tcp.stream 0","tcp.stream 2","total"'}
