"""The DNS, TLS, HTTP and streaming sections of the report, and the HTTP/TLS/DNS verdicts:
exact lines on hand-built and corpus captures, one-line no-data notes, and escaping of every
string that comes from the capture (SNI, paths, hosts, DNS names)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.summary import headline, tls_decrypt_sentences, verdicts
from pcaptools.report import SECTIONS, render_report
from pcaptools.report.html import dns_section, http_section, streaming_section, tls_section
from pcaptools.report.html import plotly_js as get_plotlyjs
from tests.analyses import llmcap
from tests.conftest import CAPTURES
from tests.protocols.dns.dnsbuild import A, message
from tests.protocols.tls import _tls_build as tb
from tests.report.factory import (
    XSS,
    checklist_lines,
    empty_capture,
    report_section,
    report_tables,
)

MINE = [dns_section, tls_section, http_section, streaming_section]


def _nodata(html: str, sid: str) -> str:
    m = re.search(r'<p class="nodata">(.*?)</p>', report_section(html, sid), re.S)
    assert m, sid
    return m.group(1)


@pytest.fixture(scope="module")
def chat1(tmp_path_factory: pytest.TempPathFactory) -> tuple[pcaptools.Capture, str]:
    cap = pcaptools.load(llmcap.chat_h1(tmp_path_factory.mktemp("r") / "chat_h1.pcap"))
    return cap, render_report(cap)


def test_sections_are_in_the_page_before_warnings() -> None:
    names = [b.__name__ for b in SECTIONS]
    for b in MINE:
        assert b in SECTIONS
    assert (
        names.index("tcp_flags_section")
        < names.index("dns_section")
        < names.index("tls_section")
        < names.index("http_section")
        < names.index("streaming_section")
        < names.index("warnings_section")
    )


def test_no_data_lines() -> None:
    html = render_report(empty_capture(5), sections=MINE)
    assert _nodata(html, "dns") == (
        "No DNS queries in this capture (over UDP or TCP port 53, or over HTTPS: "
        "application/dns-message)."
    )
    assert _nodata(html, "tls") == "No TLS handshake in this capture."
    assert _nodata(html, "http") == "No HTTP/1.x or HTTP/2 requests in this capture."
    assert _nodata(html, "streaming") == "No server-sent events in this capture."
    assert "Plotly.newPlot(" not in html


def test_h1_chat_report(chat1: tuple[pcaptools.Capture, str]) -> None:
    cap, html = chat1
    assert "This section failed" not in html
    v = verdicts(cap)
    assert "HTTP/1.1 reused 1 connection for 2 requests." in v
    assert "Median time to first byte 105.0 ms (p95 190.5 ms, max 200.0 ms, 2 requests)." in v
    assert (
        "Time to first token 218.0 ms (1 streamed response); median gap between tokens 40.0 ms."
        in v
    )
    assert "2 DNS queries, median answer time 13.8 ms (max 19.5 ms)." in v
    lines = checklist_lines(html)
    assert lines["HTTP"] == ("ok", (
        "2 requests (2 HTTP/1.1) on 1 connection; time to first byte median 105.0 ms (p95 "
        "190.5 ms, max 200.0 ms, 2 requests). slowest first byte: tcp.stream 0 #1 POST "
        "/v1/chat/completions, 200.0 ms tcp.stream eq 0 && frame.number >= 8 && "
        "frame.number <= 15"))
    assert lines["Time to first token"][1].startswith(
        "218.0 ms (1 streamed response); median gap between tokens 40.0 ms. slowest: "
        "tcp.stream 0 #1 POST /v1/chat/completions, 218.0 ms")
    assert lines["DNS"] == ("ok", "2 queries, answer time median 13.8 ms (p95 18.9 ms, max "
                                  "19.5 ms, 2 answers).")
    assert lines["TLS"] == ("absent", "no TLS handshake seen.")
    dns = report_section(html, "dns")
    assert '<code class="filter">dns.id == 0x0101 &amp;&amp; udp.port == 53001</code>' in dns
    assert '<td class="wrap">A 192.0.2.10</td>' in dns
    http = report_section(html, "http")
    assert 'id="fig-waterfall"' in http and 'id="fig-ttfb"' in http
    assert "2 requests on 1 connection." in http
    assert (
        '<code class="filter">tcp.stream eq 0 &amp;&amp; frame.number &gt;= 8 &amp;&amp; '
        "frame.number &lt;= 15</code>"
    ) in http
    # first row: DNS 20, connect 10.5, TLS - (cleartext), TTFB 200, TTFT 218, 5 tokens, total 370.
    # Related values share a cell, one a line (so that the table fits a 1400 px window, #19):
    # exchange over protocol, method over status, host over path, DNS over connect over TLS,
    # TTFT over tokens, total over from SYN
    row = re.search(r'<tr><td class="num">0</td><td>#1<br>HTTP/1.1</td>(.*?)</tr>', http).group(1)
    cells = [c.split("<br>") for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
    assert cells[:7] == [
        ["POST", "200"],
        ["llm.test", "/v1/chat/completions"],
        ["no"],
        ["20.0", "10.5", "\u2013"],  # cleartext: no TLS time (does not apply)
        ["200.0"],
        ["218.0", "5"],
        ["370.0", "381.0"],
    ]
    stream = report_section(html, "streaming")
    assert 'id="fig-token-cadence"' in stream
    assert "1 streamed response with text, median time to first token 218.0 ms." in stream
    assert html.count(get_plotlyjs()) == 1


def test_h2_waterfall_and_cadence_data(tmp_path: Path) -> None:
    from pcaptools.analyses.latency import stream_latency
    from pcaptools.report import charts

    cap = pcaptools.load(llmcap.chat_h2(tmp_path / "h2.pcap"))
    lat = stream_latency(cap)
    wf = charts.waterfall_rows(lat, cap.summary.first_ts_ns or 0, cap.summary.last_ts_ns or 0, 300)
    r = wf.rows
    assert r["label"].tolist() == ["0 s1 POST /v1/chat/completions", "0 s3 GET /health"]
    first = r.iloc[0]
    assert (first["dns_start"], first["dns_ms"]) == (0.0, 5.0)
    assert (first["connect_start"], first["connect_ms"]) == (0.01, 10.2)
    assert (first["wait_start"], first["wait_ms"]) == (0.021, 200.0)
    assert first["download_start"] == 0.221 and first["download_ms"] == pytest.approx(149.0)
    assert r["connect_ms"].isna().tolist() == [False, True]  # reused: no connect bar
    pts, total = charts.token_cadence_rows(lat, cap.sse_events, 30)
    assert total == 1
    assert pts["t_ms"].tolist() == [219.0, 259.0, 279.0, 339.0, 344.0]
    assert pts["tokens"].tolist() == [1, 2, 3, 4, 5]
    html = render_report(cap)
    assert '<code class="filter">tcp.stream eq 0 &amp;&amp; http2.streamid eq 1</code>' in html
    assert checklist_lines(html)["HTTP"][1].startswith("2 requests (2 HTTP/2) on 1 connection")


def test_waterfall_cap_is_stated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcaptools.report.html as rh

    monkeypatch.setattr(rh, "MAX_WATERFALL_ROWS", 2)
    cap = pcaptools.load(llmcap.many_h1(tmp_path / "h1.pcap", n=3))
    html = render_report(cap, sections=[http_section])
    assert "The waterfall shows the first 2 of 3 requests." in html


def test_request_cells_mark_an_unknown_value(tmp_path: Path) -> None:
    """In a cell of several lines an unknown value reads ``?`` (its line keeps its place), and
    a cell with none known is blank: a request never answered (no status, TTFB or total),
    with no DNS query in the capture."""
    w = llmcap.Wire()
    c = llmcap.Conn(w, 55002)
    c.handshake(1, 2, 3)
    c.send(4, True, b"GET /never HTTP/1.1\r\nHost: llm.test\r\n\r\n")
    c.close(50)
    cap = pcaptools.load(w.write(tmp_path / "unanswered.pcap"))
    (rows,) = report_tables(report_section(render_report(cap, sections=[http_section]), "http"))
    assert rows == [[
        "0",
        "#1\nHTTP/1.1",
        "GET\n?",  # no response: no status
        "llm.test\n/never",
        "no",
        "?\n2.0\n\u2013",  # DNS unknown (no query captured), connect 2 ms, no TLS
        "",  # TTFB
        "",  # TTFT and tokens: none
        "",  # total and from SYN
        "tcp.stream eq 0 && frame.number >= 4",
    ]]


@pytest.mark.corpus
def test_tls_section_decrypted(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "tls3.cryptohack.org.pcapng", keylog=corpus / "keylogfile.txt")
    html = render_report(cap, sections=MINE)
    tls = report_section(html, "tls")
    assert "1 TLS session on 1 connection (cap.tls_handshakes)." in tls
    cells = re.findall(r"<td[^>]*>(.*?)</td>", tls.split("<tbody>")[-1])
    assert cells[:10] == [
        "0",
        "0",
        "tls3.cryptohack.org",
        "TLS 1.3",
        "TLS_AES_256_GCM_SHA384",
        "h2 (offered h2,http/1.1)",
        "no",
        "28.9",
        "decrypted",
        "8",
    ]
    assert "<th>Resumed</th><td>0 of 1 (0%)</td>" in tls
    assert "could not be decrypted" not in tls
    assert '<code class="filter">tcp.stream eq 0 &amp;&amp; http2.streamid eq 1</code>' in html


@pytest.mark.corpus
def test_missing_keys_are_said_plainly(corpus: Path) -> None:
    # a key log that has no secrets for this session
    cap = pcaptools.load(corpus / "tls3.cryptohack.org.pcapng", keylog=corpus / "premaster.txt")
    html = render_report(cap, sections=[SECTIONS[0], *MINE])
    line = (
        "The TLS session could not be decrypted: no key in the key log "
        "(see tls.no_key_for_session)."
    )
    assert f"<li>{line}</li>" in report_section(html, "tls")
    assert line in verdicts(cap)
    assert _nodata(html, "http") == (
        "No HTTP request could be read: 1 TLS session was not decrypted (see the TLS section)."
    )


@pytest.mark.corpus
def test_decrypt_sentences_counts(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "many_interfaces-1.pcapng")
    h = headline(cap)
    assert h["tls_decrypt_status"] == {"incomplete": 1, "no_keylog": 1}
    assert tls_decrypt_sentences(h["tls_decrypt_status"]) == [
        "1 of 2 TLS sessions could not be decrypted: no key log was given (pcap-report "
        "--keylog KEYS.txt; record with SSLKEYLOGFILE set).",
        "1 of 2 TLS sessions could not be decrypted: the handshake was not captured (the "
        "capture started after it).",
    ]
    assert tls_decrypt_sentences({"decrypted": 2, "no_keys": 3}) == [
        "3 of 5 TLS sessions could not be decrypted: no key in the key log "
        "(see tls.no_key_for_session)."
    ]
    assert tls_decrypt_sentences({"no_keylog": 73}) == [
        "None of the 73 TLS sessions could be decrypted: no key log was given (pcap-report "
        "--keylog KEYS.txt; record with SSLKEYLOGFILE set)."
    ]
    assert "7 DNS queries, median answer time 25.2 ms (max 108.8 ms): 1 NXDOMAIN." in verdicts(
        cap, h
    )


@pytest.mark.corpus
def test_dump_73_requests_when_decrypted(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "dump.pcapng", keylog=corpus / "premaster.txt")
    h = headline(cap)
    assert (h["http_requests"], h["http_connections"], h["http_reused"]) == (73, 73, 0)
    assert h["tls_decrypt_status"] == {"decrypted": 73}
    html = render_report(cap, sections=MINE)
    http = report_section(html, "http")
    assert "73 requests on 73 connections." in http
    # the first page is HTML, every row is in the table's JSON
    assert http.count('<code class="filter">tcp.stream eq ') == 50
    (rows,) = report_tables(http)
    assert len(rows) == 73 and len({r[0] for r in rows}) == 73
    assert all(r[-1].startswith(f"tcp.stream eq {r[0]} ") for r in rows)
    tls = report_section(html, "tls")
    assert 'id="fig-tls-handshake"' in tls
    assert "HTTP/1.0: 73 requests over 73 connections." in verdicts(cap, h)  # tshark: HTTP/1.0


def _xss_capture(tmp_path: Path) -> Path:
    w = llmcap.Wire()
    # DNS for a name with markup in it
    q = message(9, XSS, A)
    from tests import helpers as h

    w.add(0, h.ethernet(h.ipv4(h.udp(53009, 53, q), llmcap.CLIENT, llmcap.RESOLVER, proto=17)))
    # TLS ClientHello + ServerHello with the SNI <script>alert(1)</script>
    t = llmcap.Conn(w, 55000, sport=443)
    t.handshake(1, 2, 3)
    ch = tb.client_hello(b"\x11" * 32, [0x1301], [tb.sni_ext(XSS), tb.alpn_ext("h2", XSS)])
    t.send(4, True, tb.record(22, ch, 0x0301))
    sh = tb.server_hello(b"\x22" * 32, 0x1301, [tb.ext(43, b"\x03\x04")])
    t.send(5, False, tb.record(22, sh))
    t.close(10)
    # HTTP/1.1 with markup in the Host header and the path
    c = llmcap.Conn(w, 55001)
    c.handshake(20, 21, 22)
    c.send(23, True, f"GET /{XSS} HTTP/1.1\r\nHost: {XSS}\r\n\r\n".encode())
    c.send(30, False, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    c.close(40)
    return w.write(tmp_path / "xss.pcap")


def test_capture_strings_are_escaped_everywhere(tmp_path: Path) -> None:
    cap = pcaptools.load(_xss_capture(tmp_path))
    assert cap.tls_handshakes["sni"].tolist() == [XSS]
    assert cap.http_requests["path"].tolist() == [f"/{XSS}"]
    assert cap.dns["name"].tolist() == [XSS]
    html = render_report(cap)
    assert "This section failed" not in html
    assert XSS not in html
    assert "alert(1)</script>" not in html
    esc = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f"<td>{esc}</td>" in report_section(html, "tls")  # SNI cell
    assert f"/{esc}" in report_section(html, "http")  # path cell
    assert f"<td>{esc}</td>" in report_section(html, "dns")  # DNS name
    # in plotly JSON (waterfall labels and hover text) markup arrives html-escaped, never raw
    assert "\\u003cscript" not in html


# --------------------------------------------------------------------------- recorded captures


def _recorded(name: str) -> pcaptools.Capture:
    path = CAPTURES / name
    keys = llmcap.keys_for(path) if path.is_file() else None
    if keys is None:
        pytest.skip(f"captures/{name} (+ .keys) not recorded yet")
    return pcaptools.load(path, keylog=keys)


def test_recorded_h2_sse_chat_follows_the_servers_plan() -> None:
    """The chat server's plan (facts truth.plan): tokens, first token after first_ms, then one
    every every_ms, behind a link with 30 ms one-way delay."""
    import json

    cap = _recorded("h2-sse-chat.pcapng")
    facts = json.loads((CAPTURES / "h2-sse-chat.pcapng.facts.json").read_text())
    plan = [p for p in facts["truth"]["plan"] if p["method"] == "POST"]
    from pcaptools.analyses.latency import stream_latency

    lat = stream_latency(cap)
    chats = lat[lat["method"] == "POST"]
    assert lat["reused"].tolist() == [False] + [True] * 6
    assert chats["token_events"].tolist() == [p["lab"]["tokens"] for p in plan]
    assert chats["sse_events"].tolist() == [p["lab"]["tokens"] + 2 for p in plan]  # + stop, [DONE]
    for (_, r), p in zip(chats.iterrows(), plan, strict=True):
        assert r["ttft_ms"] >= p["lab"]["first_ms"] + 2 * 30  # the server's wait + one round trip
        assert abs(r["token_gap_median_ms"] - p["lab"]["every_ms"]) < 2.0
    html = render_report(cap, sections=[SECTIONS[0], *MINE])
    stream = report_section(html, "streaming")
    assert "5 streamed responses with text" in stream
    assert stream.count('<code class="filter">tcp.stream eq 0 &amp;&amp; http2.streamid eq ') == 5
    lines = checklist_lines(html)
    assert lines["HTTP"][1].startswith("7 requests (7 HTTP/2) on 1 connection")
    assert lines["Time to first token"][1].endswith(" 5 streamed responses); median gap between "
                                                    "tokens 40.2 ms. slowest: tcp.stream 0 "
                                                    "stream 7 POST /v1/chat/completions, 361.7 ms "
                                                    "tcp.stream eq 0 && http2.streamid eq 7")
    assert lines["TLS"] == ("ok", "1 session (TLS 1.3), decrypted, handshake 66.1 ms.")


def test_recorded_tls_resumption_and_missing_key() -> None:
    cap = _recorded("tls-resumption.pcapng")
    v = verdicts(cap)
    assert "6 TLS sessions (TLS 1.2: 4, TLS 1.3: 2), 3 resumed." in v
    tls = report_section(render_report(cap, sections=MINE), "tls")
    assert "<th>Resumed</th><td>3 of 6 (50%): " in tls
    assert "could not be decrypted" not in tls

    cap = _recorded("tls-versions-ciphers.pcapng")  # one connection's keys deleted on purpose
    line = (
        "1 of 9 TLS sessions could not be decrypted: no key in the key log "
        "(see tls.no_key_for_session)."
    )
    assert line in verdicts(cap)
    assert f"<li>{line}</li>" in report_section(render_report(cap, sections=MINE), "tls")


def test_waterfall_response_cut_by_a_reset_is_not_open() -> None:
    """tcp-reset.pcap: the server resets /abort after 6,000 of 24,000 body bytes (facts: end
    rst-server on port 9002), the client resets two /stream responses (port 9003), and one
    stream is still running when the capture stops (open-at-capture-end, port 9001). Only
    that one is drawn as still open; the others are cut short at their connection's end,
    and the hover says who reset it."""
    import json

    path = CAPTURES / "tcp-reset.pcap"
    if not path.is_file():
        pytest.skip("captures/tcp-reset.pcap absent")
    facts = json.loads(path.with_name(path.name + ".facts.json").read_text())
    ends = {int(c["server"].rsplit(":", 1)[1]) * 100000 + int(c["client"].rsplit(":", 1)[1]):
            c["end"] for c in facts["connections"]}
    cap = pcaptools.load(path)
    from pcaptools.analyses.latency import stream_latency
    from pcaptools.report import charts

    lat = stream_latency(cap)
    t0, end = cap.summary.first_ts_ns, cap.summary.last_ts_ns
    assert t0 is not None and end is not None
    wf = charts.waterfall_rows(lat, t0, end, 100, cap.connections)
    conns = cap.connections.set_index("tcp_stream")
    order = lat.assign(_c=lat["connection_start_ts"].fillna(lat["request_ts"])).sort_values(
        ["_c", "tcp_stream", "request_ts"], kind="stable")  # the waterfall's row order
    for (_, r), (_, w) in zip(order.iterrows(), wf.rows.iterrows(), strict=True):
        c = conns.loc[r["tcp_stream"]]
        truth = ends[int(c["server_port"]) * 100000 + int(c["client_port"])]
        if truth == "open-at-capture-end":
            assert w["open_ms"] > 0 and pd.isna(w["cut_ms"])
            assert "still open when the capture ended" in w["hover"]
            continue
        assert truth in ("rst-server", "rst-client")
        assert pd.isna(w["open_ms"]) and pd.isna(w["download_ms"])
        # cut from the first response byte to the connection's last packet
        last = (int(c["last_ts"].value) - t0) / 1e9
        assert w["cut_start"] + w["cut_ms"] / 1e3 == pytest.approx(last, abs=1e-9)
        who = "server" if truth == "rst-server" else "client"
        assert f"cut short: TCP RST from the {who} (frame {int(c['end_frame'])})" in w["hover"]
    assert (wf.rows["cut_ms"].notna().sum(), wf.rows["open_ms"].notna().sum()) == (3, 1)
