"""The QUIC / HTTP/3 and realtime voice sections of the report and their checklist lines:
the numbers shown equal the tables' and the recorded facts (captures/h3-*, voice-realtime,
the corpus QUIC captures), the sections are absent without QUIC / realtime events, hostile
capture strings are escaped, and the tables stay bounded. Each report is built once."""

from __future__ import annotations

import html as htmlmod
import json
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.latency import stream_latency
from pcaptools.analyses.realtime import audio_cadence, playout_stalls, turns
from pcaptools.report import (
    SECTIONS,
    charts,
    proto_charts,
    quic_section,
    render_report,
    voice_section,
)
from pcaptools.report import html as report_html
from pcaptools.report.checklist import QUESTIONS, Check, checklist
from pcaptools.report.html import ReportContext, Section, build_sections, num_text
from pcaptools.result import Capture
from tests.conftest import CAPTURES, CORPUS
from tests.report.factory import XSS, checklist_lines, make_capture, report_section

VoiceFix = tuple[Capture, str, Check | None]


def _load(name: str) -> Capture:
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"{path} not recorded")
    keys = path.with_suffix(".keys")
    return pcaptools.load(path, keylog=keys if keys.exists() else None)


def _facts(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CAPTURES / f"{name}.facts.json").read_text())
    return data


def _rows(section: str, first_cell: str) -> list[list[str]]:
    """The body rows (cells as text) of the section's table whose header starts with
    ``first_cell`` (its first page: every row here, the tables are short). A cell holding
    several values, one a line (``<br>``), reads as its lines joined by newlines."""
    for t in re.findall(r"<table>(.*?)</table>", section, re.S):
        head = re.search(r"<th(?: [^>]*)?>(.*?)</th>", t, re.S)
        if head and htmlmod.unescape(head.group(1)) == first_cell:
            return [[htmlmod.unescape(re.sub(r"<[^>]+>", "", c.replace("<br>", "\n"))) for c in
                     re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
                    for tr in re.findall(r"<tr>(.*?)</tr>", t.split("<tbody>")[1], re.S)]
    raise AssertionError(f"no table starting with {first_cell!r}")


def _items(section: str) -> list[str]:
    m = re.search(r"<ul>(.*?)</ul>", section, re.S)
    assert m
    return [htmlmod.unescape(re.sub(r"<[^>]+>", "", x))
            for x in re.findall(r"<li>(.*?)</li>", m.group(1), re.S)]


def _ms(v: float) -> str:
    return num_text(float(v))


def _ctx(cap: Capture) -> ReportContext:
    """A report context without the headline (the QUIC and voice sections do not read it):
    cheaper than build_sections for the tests that need one section."""
    s = cap.summary
    t0 = s.first_ts_ns or 0
    return ReportContext(cap, {}, t0, ((s.last_ts_ns or t0) - t0) / 1e9,
                         _parts=report_html._env().get_template("_parts.html.j2").module)


def _body(sec: Section | None) -> str:
    assert sec is not None and sec.html is not None
    return str(sec.html)


@pytest.fixture(scope="module")
def h3chat() -> tuple[Capture, str]:
    cap = _load("h3-sse-chat.pcapng")
    return cap, render_report(cap)


@pytest.fixture(scope="module")
def voice() -> VoiceFix:
    """The voice section alone and its checklist line (the rest of the report is not needed)."""
    cap = _load("voice-realtime.pcapng")
    ctx = _ctx(cap)
    sec = report_html.voice_section(ctx)
    assert sec is not None and sec.id == "voice" and sec.title == "Realtime voice"
    return cap, f'<section id="voice">{_body(sec)}</section>', dict(QUESTIONS)["voice"](ctx)


def test_sections_are_listed_in_page_order() -> None:
    names = [b.__name__ for b in SECTIONS]
    assert names.index("streaming_section") < names.index("quic_section") \
        < names.index("heartbeats_section") < names.index("voice_section") \
        < names.index("disconnects_section")


# -- QUIC / HTTP/3 ---------------------------------------------------------------------------


def test_h3_chat_connections(h3chat: tuple[Capture, str]) -> None:
    cap, page = h3chat
    assert "This section failed" not in page and "could not be computed" not in page
    sec = report_section(page, "quic")
    q = cap.quic_connections.set_index("quic_connection")
    rows = {int(r[0]): r for r in _rows(sec, "QUIC conn.")}
    assert sorted(rows) == [0, 1]
    # conn-1 a full handshake, conn-2 resumed with early data accepted (the apps' own view)
    facts = [c["quic"] for c in _facts("h3-sse-chat.pcapng")["connections"]]
    assert [(f["resumed"], f["early_data_accepted"]) for f in facts] == [(False, False),
                                                                       (True, True)]
    # cells of several lines: client / server, server name / ALPN, version / handshake, RTT
    # and lost both ways, end / decrypted (so that the table fits a 1400 px window, #19)
    assert rows[0][3] == "1\nfull"
    assert rows[1][3] == "1\nresumed, 0-RTT accepted"
    for qc, r in rows.items():
        assert r[1] == (f"{q.loc[qc, 'client_addr']}:{q.loc[qc, 'client_port']}\n"
                        f"{q.loc[qc, 'server_addr']}:{q.loc[qc, 'server_port']}")
        assert r[2] == "lab.test\nh3" and q.loc[qc, "sni"] == "lab.test"
        assert r[4] == _ms(q.loc[qc, "handshake_ms"])
        c2s, s2c = r[5].split("\n")
        assert c2s.startswith(f"c\u2192s {_ms(q.loc[qc, 'client_min_rtt_ms'])} ms / ")
        assert s2c.startswith(f"s\u2192c {_ms(q.loc[qc, 'server_min_rtt_ms'])} ms / ")
        assert r[6] == "c\u2192s 0 / 0\ns\u2192c 0 / 0"  # no loss on this link
        end, decrypted = r[7].split("\n")
        assert end.startswith("CONNECTION_CLOSE (application) by the client, 0x0")
        assert decrypted == "decrypted: yes"
        assert r[8] == f"quic.connection.number eq {qc}"
    # worst first: nothing unclean or lost, so the slower handshake (conn 0) first
    assert list(rows) == [0, 1]
    items = _items(sec)
    assert items[0] == "2 QUIC connections: 2 decrypted."
    lat = stream_latency(cap).set_index(["quic_connection", "stream_id"])
    z, f = lat.loc[(1, 0)], lat.loc[(0, 0)]
    assert items[1] == (
        "0-RTT: 1 connection sent 0-RTT packets (1 accepted); 1 first request went in 0-RTT "
        "packets: the request left 0 ms after the first packet, first token "
        f"{_ms(z['ttft_from_start_ms'])} ms after it. On the 1 connection without 0-RTT: the "
        f"request left {_ms((f['request_ts'] - f['connection_start_ts']).value / 1e6)} ms after "
        f"the first packet, first token {_ms(f['ttft_from_start_ms'])} ms after it.")
    assert items[3] == ("QPACK: 10 field sections decoded, none had to wait for encoder-stream "
                        "bytes; none left undecoded.")


def test_h3_chat_requests(h3chat: tuple[Capture, str]) -> None:
    cap, page = h3chat
    sec = report_section(page, "quic")
    assert 'id="fig-quic-ttfb"' in sec and 'id="fig-quic-token-cadence"' in sec
    tables = re.findall(r"<table>.*?</table>", sec, re.S)  # connections, then requests
    req = _rows(tables[1], "QUIC conn.")
    conns = _facts("h3-sse-chat.pcapng")["connections"]
    want = [(i, q["quic_stream_id"], q["sent_in_0rtt"]) for i, c in enumerate(conns)
            for q in c["requests"]]
    assert [(int(r[0]), int(r[1]), r[6] == "yes") for r in req] == want
    lat = stream_latency(cap).set_index(["quic_connection", "stream_id"])
    for r in req:
        x = lat.loc[(int(r[0]), int(r[1]))]
        assert (r[2], r[4], r[5]) == ("POST", "/v1/chat/completions", "200")
        assert r[7] == _ms(x["ttfb_ms"]) and r[8] == _ms(x["ttft_ms"])
        assert int(r[9]) == int(x["token_events"])
    # the facts' token counts: every token arrived and was counted
    assert [int(r[9]) for r in req] == [q["tokens_received"] for c in conns
                                       for q in c["requests"]]


def test_h3_chat_checklist(h3chat: tuple[Capture, str]) -> None:
    cap, page = h3chat
    q = cap.quic_connections
    lines = checklist_lines(page)
    ttfb = stream_latency(cap)["ttfb_ms"].median()
    hs = q["handshake_ms"]
    assert lines["QUIC / HTTP/3"] == ("info", (
        f"2 QUIC connections (h3), handshake median {_ms(hs.median())} ms (max "
        f"{_ms(hs.max())} ms); 0-RTT: 1 accepted; 1 resumed; 5 HTTP/3 requests, TTFB median "
        f"{_ms(ttfb)} ms. slowest handshake: QUIC connection 0, {_ms(hs.max())} ms "
        "quic.connection.number eq 0"))
    # the HTTP and token lines name HTTP/3 requests by their QUIC connection
    assert lines["HTTP"][1].startswith("5 requests (5 HTTP/3)")
    assert "QUIC connection " in lines["Time to first token"][1]
    assert '<td class="num">QUIC 1</td>' in report_section(page, "http")
    assert '<td class="num">QUIC 0</td>' in report_section(page, "streaming")
    assert '<a href="#quic">QUIC / HTTP/3</a>' in page


@pytest.mark.parametrize("name, vantage", [("h3-sse-lossy.pcapng", "client"),
                                           ("h3-sse-lossy-server.pcapng", "server")])
def test_lost_packets_match_the_links_drop_log(name: str, vantage: str) -> None:
    cap = _load(name)
    sec = _body(report_html.quic_section(_ctx(cap)))
    row = _rows(sec, "QUIC conn.")[0]
    link = _facts(name)["link"]
    c2s = len(link["client_to_server"]["dropped_datagrams"])
    s2c = len(link["server_to_client"]["dropped_datagrams"])
    assert (c2s, s2c) == (1, 3)
    if vantage == "client":  # its own losses are unacked, the server's never seen
        assert row[6] == f"c\u2192s {c2s} / 0\ns\u2192c 0 / {s2c}"
    else:
        assert row[6] == f"c\u2192s 0 / {c2s}\ns\u2192c {s2c} / 0"
    assert row[3] == "1\nRetry, full"
    assert f"Loss: {c2s + s2c} packets lost on 1 HTTP/3 connection" in _items(sec)[2]


def test_corpus_quic_without_keys() -> None:
    path = CORPUS / "zerortt.pcap"
    if not path.exists():
        pytest.skip("../shared/corpus is absent")
    cap = pcaptools.load(path)
    ctx = _ctx(cap)
    sec = _body(report_html.quic_section(ctx))
    items = _items(sec)
    assert items[0] == "2 QUIC connections: 0 decrypted."
    assert items[1].startswith("2 QUIC connections not decrypted: no key for their client "
                               "random")
    rows = {int(r[0]): r for r in _rows(sec, "QUIC conn.")}
    # tshark: the second ServerHello has pre_shared_key (extension 41), the first not
    assert rows[0][3].split("\n")[1] == "full"
    assert rows[1][3].split("\n")[1] == "resumed, 0-RTT (accepted or not: not decrypted)"
    for r in rows.values():
        assert r[7] == ("unknown: packets not decrypted (a close would not show)\n"
                        "decrypted: no: no key for its client random")
        assert r[6] == "c\u2192s 0 / 0\ns\u2192c 0 / 0\n(Initial packets only)"
    assert items[2] == "0-RTT: 1 connection sent 0-RTT packets (1 accepted or not: not decrypted)."
    check = quic_section.quic_check(ctx)
    assert check is not None and check.status == "warn"
    assert "; 2 not decrypted: no key for their client random." in check.text


def test_corpus_chrome_quic_close_reason() -> None:
    path = CORPUS / "chrome-cloudflare-quic-with-secrets.pcapng"
    if not path.exists():
        pytest.skip("../shared/corpus is absent")
    cap = pcaptools.load(path)
    row = _rows(_body(report_html.quic_section(_ctx(cap))), "QUIC conn.")[0]
    q = cap.quic_connections.iloc[0]
    assert row[2] == "cloudflare-quic.com\nh3"
    assert row[7] == (f"CONNECTION_CLOSE (transport) by the client, 0x0 NO_ERROR, frame "
                      f"{int(q['close_frame'])}: \u201c70:net error\u201d\ndecrypted: yes")
    # HTTP/2 over TCP and HTTP/3 in one capture: the waterfall draws both (it failed on the
    # HTTP/3 row's missing tcp.stream)
    lat = stream_latency(cap)
    assert sorted(lat["protocol"].astype(str)) == ["HTTP/2", "HTTP/3"]
    t0, end = cap.summary.first_ts_ns, cap.summary.last_ts_ns
    assert t0 is not None and end is not None
    wf = charts.waterfall_rows(lat, t0, end, 300, cap.connections)
    assert len(wf.rows) == 2 and wf.rows["label"].str.startswith("q0 s0 GET").sum() == 1


# -- realtime voice --------------------------------------------------------------------------


def test_voice_turns_and_cadence(voice: VoiceFix) -> None:
    cap, page, _ = voice
    sec = report_section(page, "voice")
    assert 'id="fig-voice-turns"' in sec and 'id="fig-voice-cadence"' in sec
    truth = _facts("voice-realtime.pcapng")["truth"]
    t = turns(cap)
    rows = _rows(sec, "tcp.stream")
    assert [r[1] for r in rows[:3]] == [x["response_id"] for x in truth["turns"]]
    for r, x, (_, tr), ts in zip(rows, truth["turns"], t.iterrows(), truth["tshark_turns"],
                                 strict=True):
        assert r[5] == _ms(tr["time_to_first_audio_ms"])
        assert abs(tr["time_to_first_audio_ms"] - x["time_to_first_audio_ms"]) < 5  # apps' log
        assert abs(tr["time_to_first_audio_ms"] - ts["time_to_first_audio_ms"]) < 0.01
        assert int(r[3]) == ts["create_frame"] and int(r[6]) == ts["first_audio_frame"]
        assert int(r[7]) == x["audio_chunks"]
    cad = _rows(sec, "stream")
    audio = [r for r in cad if r[0] == "audio"]
    assert [int(r[12]) for r in audio] == [x["underruns"] for x in truth["turns"]]
    c = audio_cadence(cap, sse=False)
    for r, (_, cr) in zip(cad, c.iterrows(), strict=True):
        assert r[10] == _ms(cr["jitter_ms"]) and int(r[3]) == int(cr["chunks"])


def test_voice_chart_points_are_the_tables_chunks(voice: VoiceFix) -> None:
    cap = voice[0]
    c = audio_cadence(cap, sse=False)
    t0 = cap.summary.first_ts_ns
    assert t0 is not None
    ap = proto_charts.audio_chunk_points(cap, c, t0, 40)
    assert ap.streams == len(c) and ap.left_out == 0
    per = ap.points.groupby("key", sort=False)
    assert [len(g) for _, g in per] == c.sort_values(["first_ts", "kind"])["chunks"].tolist()
    stalls = ap.points.dropna(subset=["stall_ms"])
    bad = c[c["underruns"] > 0]
    assert stalls["frame"].tolist() == bad["first_underrun_frame"].astype(int).tolist()
    assert stalls["stall_ms"].sum() == pytest.approx(bad["underrun_ms"].sum())
    rows, total = proto_charts.turn_latency_rows(turns(cap), 200)
    assert total == 3
    np.testing.assert_allclose(rows["first_event_ms"] + rows["first_audio_ms"],
                               rows["time_to_first_audio_ms"])


def test_voice_sessions_storms_and_checklist(voice: VoiceFix) -> None:
    cap, page, check = voice
    sec = report_section(page, "voice")
    items = _items(sec)
    assert items[0].startswith("tcp.stream 0 (192.0.2.10:51001 \u2192 192.0.2.20:443) "
                               "/v1/realtime: 101 realtime events; 2 responses")
    assert "1 underrun with a 200 ms playout buffer" in items[0]
    assert "ended: peer vanished; reconnect storm 0: 4 attempts (3 failed)" in items[0]
    truth = _facts("voice-realtime.pcapng")["truth"]
    att = _rows(sec, "storm")  # the storm table, then its attempts
    assert len(att) == 1 and int(att[0][6]) == len(truth["connect_attempts"]) - 1
    assert check is not None and (check.label, check.section) == ("Voice", "voice")
    status, text = check.status, f"{check.text} {check.worst} {check.filter}"
    assert status == "warn"
    t = turns(cap)["time_to_first_audio_ms"]
    assert text.startswith(f"3 turns on 2 sessions, time to first audio median "
                           f"{_ms(t.median())} ms (max {_ms(t.max())} ms); 1 audio underrun "
                           "with a 200 ms playout buffer")
    assert text.endswith("tcp.stream 0 resp_002: 1 underrun, first at frame 355 tcp.stream eq 0 "
                         "&& frame.number == 355")


# -- absent, hostile, bounded -----------------------------------------------------------------


def test_absent_without_quic_or_realtime_events() -> None:
    built, ctx = build_sections(make_capture())
    ids = [s.id for s in built]
    assert "quic" not in ids and "voice" not in ids and "warnings" in ids
    keys = [c.key for c in checklist(ctx)]
    assert "quic" not in keys and "voice" not in keys and "tls" in keys


def test_no_voice_section_for_untyped_json_over_websocket() -> None:
    path = CORPUS / "wsapp.pcap"
    if not path.exists():
        pytest.skip("../shared/corpus is absent")
    cap = pcaptools.load(path)
    assert len(cap.realtime_events) and cap.realtime_events["type"].isna().all()
    assert report_html.voice_section(_ctx(cap)) is None


def _with(cap: Capture, **tables: pd.DataFrame) -> Capture:
    return Capture(cap.summary, {**cap.tables, **tables})


def test_capture_strings_are_escaped(h3chat: tuple[Capture, str],
                                     voice: VoiceFix) -> None:
    q = h3chat[0].quic_connections.copy()
    for col in ("sni", "alpn", "close_reason", "versions"):
        q[col] = XSS
    q["end"] = "connection_close_transport"
    cap = _with(h3chat[0], quic_connections=q)
    page = _body(report_html.quic_section(_ctx(cap)))
    ev = voice[0].realtime_events.copy()
    ev["response_id"] = ev["response_id"].where(ev["response_id"].isna(), XSS)
    ws = voice[0].ws_connections.copy()
    ws["path"] = XSS
    vcap = _with(voice[0], realtime_events=ev, ws_connections=ws)
    vpage = _body(report_html.voice_section(_ctx(vcap)))
    esc = htmlmod.escape(XSS, quote=False)
    for p in (page, vpage):
        assert XSS not in p
    assert esc in page and "\u201c" + esc in page  # SNI, ALPN, close reason
    assert esc in vpage  # path, response ids
    # the turn chart's labels reach plotly escaped (its JSON escapes < as well)
    assert "&lt;script&gt;" in vpage.split('id="fig-voice-turns"')[1]


def test_tables_are_bounded(h3chat: tuple[Capture, str], voice: VoiceFix) -> None:
    cap = h3chat[0]
    q = cap.quic_connections
    many = pd.concat([q] * 150, ignore_index=True)
    many["quic_connection"] = np.arange(len(many))
    sec = _body(report_html.quic_section(_ctx(_with(cap, quic_connections=many))))
    assert f"Showing first {quic_section.MAX_QUIC_CONNECTIONS:,} of 300 rows" in sec
    assert len(sec) < 400_000
    big = pd.concat([turns(voice[0])] * 150, ignore_index=True)
    rows, total = proto_charts.turn_latency_rows(big, voice_section.MAX_TURN_BARS)
    assert len(rows) == voice_section.MAX_TURN_BARS and total == 450


def test_playout_stalls_rule() -> None:
    # playback starts 200 ms after the first chunk; 100 ms chunks; the third arrives 700 ms
    # late: one stall of 700 - (200 + 200) ms
    ms = 1_000_000
    assert playout_stalls([0, 100 * ms, 700 * ms, 800 * ms], [100.0] * 4) == [(2, 300.0)]
    assert playout_stalls([], []) == []


def test_quic_text_helpers() -> None:
    base: dict[str, Any] = {"handshake_kind": "retry_0rtt", "resumed": True,
                            "zero_rtt": "rejected"}
    assert quic_section.handshake_text(base) == "Retry, resumed, 0-RTT rejected"
    assert quic_section.handshake_text({**base, "handshake_kind": pd.NA}) == \
        "started before the capture"
    assert quic_section.error_name(0x128, False) == "0x128 CRYPTO_ERROR (TLS alert 40)"
    assert quic_section.error_name(0x10C, True) == "0x10c H3_REQUEST_CANCELLED"
    end = {"end": "stateless_reset", "closed_by": "server", "close_error_code": pd.NA,
           "close_frame": pd.NA, "close_reason": pd.NA}
    assert quic_section.end_text(end) == "stateless reset by the server"
    assert quic_section.clean_end(end) is False
    assert quic_section.clean_end({**end, "end": "connection_close_application",
                                   "close_error_code": 0x100}) is True


def test_qpack_never_decoded_is_listed(h3chat: tuple[Capture, str]) -> None:
    cap = h3chat[0]
    fr = cap.http3_frames.copy()
    heads = fr.index[fr["type"].astype(str).eq("HEADERS")]
    i = heads[-1]  # a response's HEADERS whose encoder-stream bytes "were not captured"
    fr["qpack"] = fr["qpack"].cat.add_categories(["never_decoded"]) \
        if "never_decoded" not in fr["qpack"].cat.categories else fr["qpack"]
    fr.loc[i, "qpack"] = "never_decoded"
    h3 = cap.http3_connections.copy()
    side = "server" if str(fr.loc[i, "direction"]) == "server_to_client" else "client"
    q = int(fr.loc[i, "quic_connection"])
    h3.loc[h3["quic_connection"] == q, f"{side}_undecoded_field_sections"] = 1
    sec = _body(report_html.quic_section(_ctx(_with(cap, http3_frames=fr,
                                                    http3_connections=h3))))
    assert "; 1 field section never decoded or failed (their headers are unknown: listed " \
           "below)." in _items(sec)[3]
    row = _rows(re.findall(r"<table>.*?</table>", sec, re.S)[-1], "QUIC conn.")  # QPACK's
    assert len(row) == 1 and row[-1][:6] == [str(q), str(int(fr.loc[i, "stream_id"])),
                           str(fr.loc[i, "direction"]), "HEADERS", str(int(fr.loc[i, "frame"])),
                           "never decoded"]
