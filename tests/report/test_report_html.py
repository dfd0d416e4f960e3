"""The HTML report: self-contained (plotly.js once, no external URL), every section present,
no-data sections say so, capture strings escaped, tables capped with the fact stated."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from pcaptools.capture import Capture
from pcaptools.report import SECTIONS, ReportContext, Section, render_report, write_report
from pcaptools.report.html import plotly_js as get_plotlyjs
from tests.conftest import CAPTURES, CORPUS
from tests.report.factory import XSS, checklist_lines, empty_capture, make_capture, report_tables

TITLES = [
    "Verdicts",
    "Capture",
    "TCP connections",
    "Connections timeline",
    "TCP handshake RTT",
    "Retransmissions over time",
    "TCP analysis flags",
    "Warnings",
]


@functools.cache
def _plotly_banner() -> str:
    # the first line of plotly.min.js, e.g. "/**\n* plotly.js v3.0.1"
    return get_plotlyjs()[:40]


@functools.cache
def mixed_html() -> str:
    return render_report(make_capture())


def _assert_self_contained(html: str) -> None:
    """No external resource outside the inlined plotly.js (whose code mentions URLs it never
    loads for the cartesian charts the report draws)."""
    html = html.replace(get_plotlyjs(), "")
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)
    assert not re.search(r"<link[^>]*\bhref\s*=", html, re.I)
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert "http://" not in html and "https://" not in html
    assert "This section failed" not in html


def test_plotly_inlined_once_and_nothing_external() -> None:
    html = mixed_html()
    assert html.count(_plotly_banner()) == 1
    assert html.count(get_plotlyjs()) == 1
    _assert_self_contained(html)
    # one figure per chart section, each drawn with the inlined plotly.js
    assert html.count("Plotly.newPlot(") == 3
    for fig_id in ("fig-timeline", "fig-irtt", "fig-retransmissions"):
        assert f'id="{fig_id}"' in html


def test_plotly_partial_bundle() -> None:
    """The page inlines plotly.js's basic partial bundle (bar, pie, scatter: 1.2 MB, not the
    full 4.8 MB), of the plotly.js version the plotly package installed here ships, and the
    charts use no other trace type."""
    from plotly.offline import get_plotlyjs_version

    from pcaptools.report import charts

    js = get_plotlyjs()
    assert js.startswith(f"/**\n* plotly.js (basic - minified) v{get_plotlyjs_version()}\n")
    assert len(js) < 1_300_000
    assert {"bar", "pie", "scatter"} >= charts.TRACE_TYPES
    html = mixed_html()
    used = set(re.findall(r'"type":"(\w+)"', html.replace(js, "")))
    assert used - {"line"} <= charts.TRACE_TYPES  # "line": the median/p95 shapes


def test_every_section_title_and_anchor_present() -> None:
    html = mixed_html()
    names = [b.__name__ for b in SECTIONS]
    assert names[:7] == [
        "verdicts_section",
        "capture_section",
        "connections_section",
        "timeline_section",
        "irtt_section",
        "retransmissions_section",
        "tcp_flags_section",
    ]  # protocol sections (DNS, TLS, HTTP, ...) follow; see test_report_sections_http_tls.py
    assert "warnings_section" in names
    for title in TITLES:
        assert f"<h2>{title}</h2>" in html
    for anchor in (
        "verdicts",
        "capture",
        "connections",
        "timeline",
        "irtt",
        "retransmissions",
        "tcp-flags",
        "warnings",
    ):
        assert f'<section id="{anchor}">' in html and f'href="#{anchor}"' in html


def test_verdicts_come_first() -> None:
    html = mixed_html()
    assert html.index("<h2>Verdicts</h2>") < html.index("<h2>Capture</h2>")
    lines = checklist_lines(html)
    # one line per question, in this order, also when the answer is good or absent
    assert list(lines) == ["Capture", "Not analysed", "Disconnects", "Time to first token",
                           "HTTP", "Slowest request", "Heartbeats", "TLS", "Loss",
                           "TCP handshake RTT",
                           "TCP connections", "DNS", "Path MTU", "Overhead", "Warnings"]
    assert lines["Loss"] == ("warn", "2.0% of data segments lost and resent (4 of 200: 0 before "
                             "the capture point, 4 after it); 1 spurious resend. tcp.stream 0: "
                             "4 segments lost tcp.stream eq 0")
    assert lines["TCP connections"] == ("warn", (
        "6 connections: 2 closed with FIN, 1 reset (RST), 1 refused, 1 SYN never answered, 1 "
        "open at the end of the capture; 1 started before the capture."))
    assert lines["Heartbeats"] == ("absent", "no heartbeats seen (no WebSocket ping, HTTP/2 "
                                             "PING or TCP keep-alive).")
    assert lines["Warnings"] == ("warn", "8 warnings: net.bad_ip_total_length (7), "
                                         "tcp.capture_started_mid_stream (1).")
    # each line links to its section
    for href in re.findall(r'<li class="chk-\w+"><span[^>]*>[^<]*</span><a href="#([^"]+)"',
                           html):
        assert f'<section id="{href}">' in html


def test_connections_table_rows_and_filters() -> None:
    html = mixed_html()
    for n in range(6):
        assert f'<code class="filter">tcp.stream eq {n}</code>' in html
    assert "[2001:db8::1]:50004 (guessed)" in html
    assert "rst by client, frame 260" in html
    assert "open at end of capture" in html
    assert '<p class="note">6 connections.' in html


def test_warnings_section_lists_codes_meanings_and_rows() -> None:
    html = mixed_html()
    assert "tcp.capture_started_mid_stream" in html
    assert "the IP total/payload length disagrees with the captured bytes" in html  # CATALOGUE
    assert '<code class="filter">frame.number == 17</code>' in html
    assert "5 more occurrences of net.bad_ip_total_length were counted but not listed" in html


def test_capture_strings_are_escaped() -> None:
    cap = make_capture(xss=True)
    html = render_report(cap, title=f"t {XSS}")
    assert XSS not in html
    assert "alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the warning detail, history, title
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    # in plotly JSON the history is escaped twice over: html-escaped, then \u003c-encoded
    assert "\\u003cscript" not in html


def test_capture_path_is_escaped() -> None:
    cap = make_capture()
    cap.summary.path = "/tmp/<img src=x onerror=alert(1)>.pcap"
    html = render_report(cap)
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;.pcap" in html


def test_sections_without_data_say_so_in_one_line() -> None:
    html = render_report(empty_capture(5))
    for line in (
        "No TCP connections in this capture.",
        "No TCP connections to draw.",
        "No complete TCP handshake (SYN, SYN-ACK, ACK) in this capture.",
        "No retransmitted segments in this capture.",
        "tshark&#39;s TCP analysis flags nothing in this capture.",
        "No warnings: every frame was read and decoded.",
    ):
        assert f'<p class="nodata">{line}</p>' in html
    # no figure, so no plotly.js either
    assert "Plotly.newPlot(" not in html
    assert _plotly_banner() not in html
    _assert_self_contained(html)


def test_table_cap_is_stated() -> None:
    html = render_report(make_capture(), max_table_rows=2)
    assert (
        '<p class="cut">Showing first 2 of 6 rows; use the DataFrame cap.connections or '
        "pcap-report --export for all (--max-table-rows sets this limit).</p>"
    ) in html
    assert "tcp.stream eq 1</code>" in html and "tcp.stream eq 2</code>" not in html
    assert (
        '<p class="cut">Showing first 2 of 4 rows; use the DataFrame cap.warnings or '
        "pcap-report --export for all"
    ) in html


def test_timeline_downsampling_is_stated() -> None:
    html = render_report(make_capture(), max_timeline_bars=3)
    assert ("Showing 3 of 6 connections: those not in state SF first, then the longest.") in html


def test_a_failing_section_does_not_lose_the_report() -> None:
    def broken_section(ctx: ReportContext) -> Section:
        raise ValueError("boom")

    html = render_report(make_capture(), sections=[SECTIONS[0], broken_section])
    assert "<h2>Verdicts</h2>" in html
    assert "This section failed: ValueError: boom" in html


def test_sections_are_extensible() -> None:
    def tls_section(ctx: ReportContext) -> Section:
        return Section("tls", "TLS", ctx.table(["sni"], [[XSS]]), "1 handshake")

    html = render_report(make_capture(), sections=[*SECTIONS, tls_section])
    assert '<section id="tls">' in html and "<h2>TLS</h2>" in html
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in html


def test_write_report(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    write_report(make_capture(), out, title="My report")
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "<title>My report</title>" in text
    assert text == render_report(make_capture(), title="My report")  # deterministic


def test_write_report_to_missing_directory_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        write_report(make_capture(), tmp_path / "nope" / "r.html")


# --------------------------------------------------------------------------- real captures


def _real_captures() -> list[Path]:
    names = [
        "wireshark-retrans.pcap",
        "dump.pcapng",
        "tcp_refuseconnection.pcapng",
        "illustrated-quic-capture.pcap",
        "http_ip4and6.pcapng",
    ]
    out = [CORPUS / n for n in names if (CORPUS / n).is_file()]
    demo = CAPTURES / "demo.pcapng"
    return [*out, demo] if demo.is_file() else out


@pytest.fixture(scope="module")
def real_reports() -> dict[str, tuple[Capture, str]]:
    return {}


def _report(path: Path, cache: dict[str, tuple[Capture, str]]) -> tuple[Capture, str]:
    import pcaptools

    if path.name not in cache:
        cap = pcaptools.load(path)
        cache[path.name] = (cap, render_report(cap))
    return cache[path.name]


@pytest.mark.corpus
@pytest.mark.parametrize("path", _real_captures(), ids=lambda p: p.name)
def test_real_capture_report(path: Path, real_reports: dict[str, tuple[Capture, str]]) -> None:
    cap, html = _report(path, real_reports)
    _assert_self_contained(html)
    for title in TITLES:
        assert f"<h2>{title}</h2>" in html
    n = len(cap.connections)
    conns = re.search(r'<section id="connections">(.*?)</section>', html, re.S)
    assert conns is not None
    # every connection is in the page (paged beyond 10 rows), in tcp.stream order
    tables = report_tables(conns.group(1))
    assert len(tables) == (1 if n else 0)
    rows = tables[0] if n else []
    streams = sorted(cap.connections["tcp_stream"])
    assert [r[1] for r in rows] == [f"tcp.stream eq {t}" for t in streams]
    assert "Showing first" not in conns.group(1)
    if n:
        assert html.count(get_plotlyjs()) == 1
        assert 'id="fig-timeline"' in html


@pytest.mark.corpus
def test_wireshark_retrans_report(
    corpus: Path, real_reports: dict[str, tuple[Capture, str]]
) -> None:
    _cap, html = _report(corpus / "wireshark-retrans.pcap", real_reports)
    assert (
        "47 segments tshark flags tcp.analysis.retransmission "
        "(28 retransmission, 14 fast retransmission, 5 spurious retransmission)"
    ) in html
    assert 'id="fig-retransmissions"' in html
    assert '<code class="filter">tcp.analysis.duplicate_ack</code>' in html


@pytest.mark.corpus
def test_quic_only_report_has_no_tcp_sections(
    corpus: Path, real_reports: dict[str, tuple[Capture, str]]
) -> None:
    _cap, html = _report(corpus / "illustrated-quic-capture.pcap", real_reports)
    assert '<p class="nodata">No TCP connections in this capture.</p>' in html
    assert checklist_lines(html)["TCP connections"] == ("absent", "no TCP traffic.")
    # no TCP chart: the one figure is the Overhead section's QUIC chart
    assert re.findall(r'Plotly\.newPlot\("([^"]+)"', html) == ["fig-overhead-quic"]


def test_table_script_cannot_open_or_close_a_script_element() -> None:
    from pcaptools.report.html import _env

    js = _env().loader.get_source(_env(), "_tables.js.j2")[0].lower()  # type: ignore[union-attr]
    assert "<script" not in js and "</script" not in js and "<!--" not in js
    html = render_report(make_capture(xss=True), page_rows=2)
    assert html.count("<script") == html.count("</script>")
    opening = '<script type="application/json" class="pt-data">'
    blocks = re.findall(re.escape(opening) + "(.*?)</script>", html, re.S)
    # the tables of more than 2 rows (page_rows=2, tcp_losses too) are paged
    assert len(blocks) == 4
    for b in blocks:
        assert "<" not in b and ">" not in b and "&" not in b
    # and the hostile strings come back intact from the JSON, for textContent
    rows = [r for t in report_tables(html) for r in t]
    assert any("<script>alert(1)</script>" in c for r in rows for c in r)


def test_print_stylesheet_unrolls_tables_and_hides_controls() -> None:
    """Printed (or saved as PDF), the report shows whole tables, no sticky navigation and no
    paging controls, and keeps each chart on one page."""
    html = mixed_html()
    css = html[html.index("@media print {"):]
    css = css[: css.index("\n}\n")]
    assert "nav, .pt-controls, p.pt-nojs { display: none; }" in css
    assert ".table-wrap { max-height: none; overflow: visible;" in css
    assert ".plotly-graph-div" in css and "break-inside: avoid" in css


def test_the_report_gives_large_blocks_back_and_arrow_its_pool(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's analyses run as a load's pass does (pcaptools._memory): glibc's mmap
    threshold fixed and Arrow's pool the system allocator while the sections are built, both
    as they were afterwards; the page is the same."""
    import pyarrow as pa

    import pcaptools.report.html as html_mod
    from pcaptools import _memory, load

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("PCAPTOOLS_KEEP_MALLOC", raising=False)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    cap = load(CAPTURES / "h2-sse-chat.pcapng", keylog=CAPTURES / "h2-sse-chat.keys")
    before = pa.default_memory_pool().backend_name
    page = render_report(cap)
    calls: list[tuple[int, int]] = []
    pools: list[str] = []
    monkeypatch.setattr(_memory, "_MALLOPT", lambda p, v: calls.append((p, v)) or 1)
    real = html_mod.build_sections

    def spying(*args: object, **kwargs: object) -> object:
        pools.append(pa.default_memory_pool().backend_name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(html_mod, "build_sections", spying)
    assert render_report(cap) == page
    assert pools == ["system"]
    assert pa.default_memory_pool().backend_name == before
    assert calls == [(_memory.M_MMAP_THRESHOLD, 128 * 1024),
                     (_memory.M_MMAP_THRESHOLD, 32 * 1024 * 1024)]


def test_lossy_capture_names_the_wireshark_preference_its_payload_rows_need(
        corpus: Path) -> None:
    """A resend that filled a gap came after later segments: the retransmissions note names
    the Wireshark preference under which Wireshark shows the payload PDUs in the frames the
    tables name (tests/test_lossy_vs_tshark.py); a capture whose resends all follow a
    captured first copy gets no such line."""
    from pcaptools import load
    from pcaptools.report.html import build_sections

    def note(cap: Capture) -> str:
        sections, ctx = build_sections(cap)
        sec = next(s for s in sections if s.id == "retransmissions")
        return str(sec.note)

    lossy = load(CAPTURES / "h2-sse-lossy.pcapng", keylog=CAPTURES / "h2-sse-lossy.keys",
                 packets=False)
    text = note(lossy)
    assert text.startswith("Segments lost and resent: 3 (2 lost before the capture point")
    assert "turn on Protocols > TCP > Reassemble out-of-order segments (tshark: -o " \
           "tcp.reassemble_out_of_order:TRUE; off by default in Wireshark 4.0)" in text
    assert "waits for the bytes the capture missed" not in text
    # had the capture also missed bytes (no shipped capture has both), the note adds that the
    # preference then hides what follows them (tests/test_lossy_vs_tshark.py)
    from pcaptools.report import html as report_html

    _, ctx = build_sections(lossy)
    ctx.head["capture_drop_bytes"] = 1448
    text = str(report_html.retransmissions_section(ctx).note)
    assert text.endswith("With it on, Wireshark waits for the bytes the capture missed and "
                         "shows nothing more of that direction of those connections.")
    assert "The capture itself missed 1,448 bytes the receiver acknowledged" in text
    resent = load(corpus / "tcp_retransmissions.pcapng", packets=False)
    text = note(resent)
    assert text.startswith("Segments lost and resent: 5 (0 lost before the capture point")
    assert "out-of-order segments" not in text
