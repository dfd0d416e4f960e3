"""The report's Overhead section shows QUIC connections (analyses.overhead(cap, quic=True))
after the TCP part: a line, a chart, the QUIC totals and one table row per QUIC connection, on
the recorded h3-sse-chat capture (two aioquic HTTP/3 connections); captures without QUIC keep
the TCP-only section."""

from __future__ import annotations

import html
import re

import pytest

import pcaptools
from pcaptools.analyses import overhead
from pcaptools.analyses.overhead import CATEGORIES
from pcaptools.report import charts
from pcaptools.report.html import render_report
from tests.conftest import CAPTURES

CHAT = CAPTURES / "h3-sse-chat.pcapng"


def _section(page: str) -> str:
    i = page.index('id="overhead"')
    j = page.find("<section", i + 1)
    return page[i:j if j > 0 else len(page)]


def _cells(tr: str) -> list[str]:
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr)
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in cells]


def _int(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.fixture(scope="module")
def chat() -> tuple[pcaptools.Capture, str]:
    if not CHAT.exists():
        pytest.skip("h3-sse-chat.pcapng is absent")
    cap = pcaptools.load(CHAT, keylog=CHAT.with_suffix(".keys"))
    return cap, _section(render_report(cap))


def test_quic_rows_are_the_analysis_rows(chat: tuple[pcaptools.Capture, str]) -> None:
    cap, sec = chat
    o = overhead(cap, quic=True)
    q = o[o["transport"] == "quic"].reset_index(drop=True)
    assert q["quic_connection"].tolist() == [0, 1]
    assert q["wire_bytes"].tolist() == [26206, 15459]
    text = re.sub(r"<[^>]+>", " ", sec)
    assert "QUIC: 2 connections, 41,665 bytes on the wire in 211 UDP datagrams." in text
    assert 'id="fig-overhead-quic"' in sec
    # the table: its header names the categories with bytes, each row is an analysis row
    table = sec[sec.index("<thead>"):sec.index("</table>", sec.index("<thead>"))]
    head = _cells(re.search(r"<thead>(.*?)</thead>", table, re.S).group(1))  # type: ignore[union-attr]
    cats = [c for c in CATEGORIES if int(q[c].sum())]
    assert head == ["QUIC connection", "client", "server", "protocol", "datagrams", "wire bytes",
                    *[charts.overhead_label(c) for c in cats], "goodput"]
    assert "udp_header_bytes" in cats and "app_payload_bytes" in cats
    assert "tcp_ack_bytes" not in cats
    body = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
    assert len(body) == len(q)
    for tr, (_, r) in zip(body, q.iterrows(), strict=True):
        c = _cells(tr)
        assert _int(c[0]) == int(r["quic_connection"])
        assert c[1:4] == [str(r["client"]), str(r["server"]), str(r["protocol"])]
        assert _int(c[4]) == int(r["packets"]) and _int(c[5]) == int(r["wire_bytes"])
        assert [_int(x) for x in c[6:-1]] == [int(r[k]) for k in cats]
        assert sum(_int(x) for x in c[6:-1]) == int(r["wire_bytes"])
        assert c[-1] == f"{100.0 * float(r['goodput_ratio']):.1f}%"
    # the totals: each category summed over the QUIC rows, with its share of the QUIC bytes
    wire = int(q["wire_bytes"].sum())
    for k in cats:
        b = int(q[k].sum())
        label = html.escape(charts.overhead_label(k))
        assert f"<th>{label}</th><td>{b:,} ({100.0 * b / wire:.1f}%)</td>" in sec
    g = int(q["app_payload_bytes"].sum()) / wire
    assert f"<th>QUIC goodput</th><td>{100.0 * g:.1f}%</td>" in sec


def test_tcp_only_capture_has_no_quic_part() -> None:
    cap = pcaptools.load(CAPTURES / "demo.pcapng", keylog=CAPTURES / "demo.keys")
    assert len(cap.quic_connections) == 0
    sec = _section(render_report(cap))
    assert "QUIC" not in sec and "quic=True" not in sec and "overhead-quic" not in sec
    assert 'id="fig-overhead"' in sec  # the TCP chart is still there
