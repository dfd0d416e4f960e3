"""The report's Overhead section shows QUIC connections (analyses.overhead(cap, quic=True))
after the TCP part: a line, a chart, the QUIC totals and one table row per QUIC connection, on
the recorded h3-sse-chat capture (two aioquic HTTP/3 connections); captures without QUIC keep
the TCP-only section."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses import overhead
from pcaptools.analyses.overhead import CATEGORIES
from pcaptools.report import charts
from pcaptools.report.html import MAX_QUIC_OVERHEAD_COLUMNS, render_report
from tests.conftest import CAPTURES
from tests.report.factory import report_section

CHAT = CAPTURES / "h3-sse-chat.pcapng"


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
    return cap, report_section(render_report(cap), "overhead")


def test_quic_rows_are_the_analysis_rows(chat: tuple[pcaptools.Capture, str]) -> None:
    cap, sec = chat
    o = overhead(cap, quic=True)
    q = o[o["transport"] == "quic"].reset_index(drop=True)
    assert q["quic_connection"].tolist() == [0, 1]
    assert q["wire_bytes"].tolist() == [26206, 15459]
    text = re.sub(r"<[^>]+>", " ", sec)
    assert "QUIC: 2 connections, 41,665 bytes on the wire in 211 UDP datagrams." in text
    assert 'id="fig-overhead-quic"' in sec
    # the table: one column per QUIC connection, one row per category with bytes: every
    # cell is the analysis row's value
    _table_equals_rows(sec, q)
    # the totals: each category summed over the QUIC rows, with its share of the QUIC bytes
    wire = int(q["wire_bytes"].sum())
    cats = [c for c in CATEGORIES if int(q[c].sum())]
    assert "udp_header_bytes" in cats and "app_payload_bytes" in cats
    assert "tcp_ack_bytes" not in cats
    for k in cats:
        b = int(q[k].sum())
        label = html.escape(charts.overhead_label(k))
        assert f"<th>{label}</th><td>{b:,} ({100.0 * b / wire:.1f}%)</td>" in sec
    g = int(q["app_payload_bytes"].sum()) / wire
    assert f"<th>QUIC goodput</th><td>{100.0 * g:.1f}%</td>" in sec


def _table_equals_rows(sec: str, q: pd.DataFrame) -> None:
    """The section's QUIC table holds, column by column, the analysis rows ``q``."""
    table = sec[sec.index("<thead>"):sec.index("</table>", sec.index("<thead>"))]
    m = re.search(r"<thead>(.*?)</thead>", table, re.S)
    assert m is not None
    head = _cells(m.group(1))
    assert head == ["bytes", *[f"QUIC {int(c)}" for c in q["quic_connection"]]]
    body = [_cells(tr) for tr in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)]
    got = {r[0]: r[1:] for r in body}
    cats = [c for c in CATEGORIES if int(q[c].sum())]
    assert list(got) == ["client", "server", "protocol", "UDP datagrams", "bytes on the wire",
                         *[charts.overhead_label(c) for c in cats], "goodput"]
    assert got["client"] == q["client"].astype(str).tolist()
    assert got["server"] == q["server"].astype(str).tolist()
    assert got["protocol"] == q["protocol"].astype(str).tolist()
    assert [_int(x) for x in got["UDP datagrams"]] == q["packets"].astype(int).tolist()
    assert [_int(x) for x in got["bytes on the wire"]] == q["wire_bytes"].astype(int).tolist()
    for c in cats:
        assert [_int(x) for x in got[charts.overhead_label(c)]] == q[c].astype(int).tolist()
    # the categories of each column add up to its wire bytes
    for j in range(len(q)):
        assert sum(_int(got[charts.overhead_label(c)][j]) for c in cats) == int(
            q["wire_bytes"].iloc[j])
    assert got["goodput"] == [f"{100.0 * float(g):.1f}%" for g in q["goodput_ratio"]]


def test_many_quic_connections_show_the_largest() -> None:
    path = CAPTURES / "quic-endings.pcapng"
    if not path.exists():
        pytest.skip("quic-endings.pcapng is absent")
    cap = pcaptools.load(path, keylog=path.with_suffix(".keys"))
    o = overhead(cap, quic=True)
    q = o[o["transport"] == "quic"]
    assert len(q) == 9 > MAX_QUIC_OVERHEAD_COLUMNS == 5
    sec = report_section(render_report(cap), "overhead")
    text = re.sub(r"<[^>]+>", " ", sec)
    assert "QUIC: 9 connections, 38,920 bytes on the wire in 92 UDP datagrams." in text
    assert "Table: the 5 largest of 9 QUIC connections by wire bytes" in text
    top = q.sort_values(["wire_bytes", "quic_connection"], ascending=[False, True]).head(5)
    _table_equals_rows(sec, top.sort_values("quic_connection"))
    # the chart has every connection and the QUIC total
    assert all(f'"QUIC {i}"' in sec for i in range(9)) and '"QUIC total"' in sec


def test_tcp_only_capture_has_no_quic_part() -> None:
    cap = pcaptools.load(CAPTURES / "demo.pcapng", keylog=CAPTURES / "demo.keys")
    assert len(cap.quic_connections) == 0
    sec = report_section(render_report(cap), "overhead")
    assert "QUIC" not in sec and "quic=True" not in sec and "overhead-quic" not in sec
    assert 'id="fig-overhead"' in sec  # the TCP chart is still there
