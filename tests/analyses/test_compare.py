"""compare(a, b), the comparison page and ``pcap-report A --compare B``: exact values on
hand-built HTTP/1.1-vs-HTTP/2 captures (checked against tshark where tshark counts the same
thing), and on the recorded compare-h1 / compare-h2 pair when it exists."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools import cli
from pcaptools.analyses.compare import COMPARISON, METRICS, QUIC_METRICS, SSE_METRICS, compare
from pcaptools.report import render_comparison
from pcaptools.report.comparison import comparison_rows
from pcaptools.report.html import plotly_js as get_plotlyjs
from tests.analyses import llmcap
from tests.conftest import CAPTURES
from tests.oracle import tshark_fields
from tests.report.factory import XSS, empty_capture


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cmp")
    return {
        "h1": llmcap.many_h1(d / "h1.pcap"),
        "h1r": llmcap.many_h1(d / "h1r.pcap", retransmit=True),
        "h2": llmcap.many_h2(d / "h2.pcap"),
        "chat1": llmcap.chat_h1(d / "chat1.pcap"),
        "chat2": llmcap.chat_h2(d / "chat2.pcap"),
    }


def _by_metric(df: pd.DataFrame) -> dict[str, tuple[float, float, object]]:
    return {
        r["metric"]: (r["a"], r["b"], None if pd.isna(r["better"]) else r["better"])
        for r in df.to_dict("records")
    }


def test_h1_vs_h2_exact_values(pair: dict[str, Path]) -> None:
    df = compare(pcaptools.load(pair["h1"]), pcaptools.load(pair["h2"]))
    COMPARISON.check(df)
    m = _by_metric(df)
    # no SSE and no QUIC in either capture: the token and QUIC rows are left out
    assert list(m) == [x.name for x in METRICS if x.name not in SSE_METRICS | QUIC_METRICS]
    assert m["requests"] == (3.0, 3.0, None)
    assert m["tcp_connections"] == (3.0, 1.0, "b")
    assert m["tcp_handshakes"] == (3.0, 1.0, "b")
    assert m["tls_handshakes"] == (0.0, 0.0, "same")
    assert m["reused_share"][:2] == (0.0, pytest.approx(2 / 3)) and m["reused_share"][2] == "b"
    assert m["ttfb_median_ms"] == (20.0, 20.0, "same")
    assert m["total_median_ms"] == (20.0, 20.0, "same")
    assert m["first_request_median_ms"] == (31.0, 31.0, "same")
    # first SYN at 0 ms, last response byte at 231 ms in both
    assert m["download_ms"] == (231.0, 231.0, "same")
    assert m["retransmitted_segments"] == (0.0, 0.0, "same")
    assert m["body_bytes"] == (3000.0, 3000.0, None)
    r = df.set_index("metric")
    assert r.loc["tcp_connections", "delta"] == -2.0
    assert r.loc["tcp_connections", "ratio"] == pytest.approx(1 / 3)
    assert math.isnan(r.loc["tls_handshakes", "ratio"])  # 0 / 0


@pytest.mark.tshark
def test_wire_bytes_and_retransmissions_agree_with_tshark(
    pair: dict[str, Path], tshark: str
) -> None:
    df = compare(pcaptools.load(pair["h1r"]), pcaptools.load(pair["h2"]))
    m = _by_metric(df)
    for key, path in (("a", pair["h1r"]), ("b", pair["h2"])):
        lens = tshark_fields(str(path), ("frame.len",), (), "tcp")
        want = float(sum(int(x[0]) for x in lens))
        got = m["wire_bytes"][0 if key == "a" else 1]
        assert got == want
        retx = tshark_fields(str(path), ("frame.number",), (), "tcp.analysis.retransmission")
        assert m["retransmitted_segments"][0 if key == "a" else 1] == len(retx)
    assert m["retransmitted_segments"] == (1.0, 0.0, "b")
    ratio = m["wire_per_body_byte"]
    assert ratio[0] == pytest.approx(m["wire_bytes"][0] / 3000)
    assert ratio[1] == pytest.approx(m["wire_bytes"][1] / 3000)
    assert ratio[2] == "b"


def test_streamed_chat_rows(pair: dict[str, Path]) -> None:
    df = compare(pcaptools.load(pair["chat1"]), pcaptools.load(pair["chat2"]))
    m = _by_metric(df)
    assert m["ttft_median_ms"] == (218.0, 219.0, "same")  # within 2%
    # from the SYN: HTTP/1.1 SYN 21 -> first token 250; h2c SYN 10 -> 240 (first requests),
    # the reused /health requests have no token: medians of one value each
    assert m["ttft_from_start_median_ms"] == (229.0, 230.0, "same")
    assert m["token_gap_median_ms"] == (40.0, 30.0, "b")
    assert m["token_events"] == (5.0, 5.0, None)
    assert m["requests"] == (2.0, 2.0, None)
    assert m["reused_share"] == (0.5, 0.5, "same")


def test_empty_captures_compare_without_error() -> None:
    df = compare(empty_capture(0), empty_capture(3))
    COMPARISON.check(df)
    m = _by_metric(df)
    assert m["requests"] == (0.0, 0.0, None)
    assert math.isnan(m["ttfb_median_ms"][0]) and m["ttfb_median_ms"][2] is None
    assert math.isnan(m["wire_per_body_byte"][0])


def test_comparison_rows_text(pair: dict[str, Path]) -> None:
    df = compare(pcaptools.load(pair["h1"]), pcaptools.load(pair["h2"]))
    rows = {r[0]: r[1:] for r in comparison_rows(df, ("h1", "h2"))}
    assert rows["TCP connections"] == ["3", "1", "-2 (-67%)", "h2"]
    assert rows["requests on an already open connection"] == ["0%", "67%", "+67 points", "h2"]
    assert rows["time to first response byte, median"] == [
        "20.0 ms",
        "20.0 ms",
        "no change",
        "same",
    ]
    assert rows["HTTP requests"][3] == ""


def test_comparison_page(pair: dict[str, Path]) -> None:
    a, b = pcaptools.load(pair["chat1"]), pcaptools.load(pair["chat2"])
    html = render_comparison(a, b, labels=("HTTP/1.1", XSS))
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count(get_plotlyjs()) == 1
    # the comparison table comes first, then A's sections, then B's
    i_cmp = html.index('<section id="comparison">')
    i_a = html.index('<section id="a-verdicts">')
    i_b = html.index('<section id="b-verdicts">')
    assert i_cmp < i_a < i_b
    assert "<td>time to first token (SSE), median</td>" in html
    ids = re.findall(r'<div id="(fig-[^"]+)"', html)
    assert len(ids) == len(set(ids)) and "fig-a-waterfall" in ids and "fig-b-token-cadence" in ids
    sec_ids = re.findall(r'<section id="([^"]+)"', html)
    assert len(sec_ids) == len(set(sec_ids))
    assert "This section failed" not in html


def test_cli_compare_writes_page_and_json(
    pair: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, js = tmp_path / "c.html", tmp_path / "c.json"
    code = cli.main(
        [
            str(pair["h1"]),
            "--compare",
            str(pair["h2"]),
            "--labels",
            "HTTP/1.1,HTTP/2",
            "-o",
            str(out),
            "--json",
            str(js),
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert err == f"compared h1.pcap (HTTP/1.1) with h2.pcap (HTTP/2) -> {out}\n"
    text = out.read_text(encoding="utf-8")
    assert '<th class="num">HTTP/1.1</th>' in text and '<th class="num">HTTP/2</th>' in text
    doc = json.loads(js.read_text())
    assert doc["labels"] == ["HTTP/1.1", "HTTP/2"]
    assert doc["a"]["tcp_connections"] == 3 and doc["b"]["tcp_connections"] == 1
    rows = {r["metric"]: r for r in doc["comparison"]}
    assert rows["tcp_connections"]["a"] == 3.0 and rows["tcp_connections"]["better"] == "b"
    assert rows["requests"]["better"] is None


def test_cli_compare_default_output_and_errors(
    pair: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main([str(pair["h1"]), "--compare", str(pair["h2"]), "-q"]) == 0
    assert (tmp_path / "h1-vs-h2.report.html").is_file()
    assert cli.compare_output("x.pcapng", "y.pcap.gz") == Path("x-vs-y.report.html")
    with pytest.raises(SystemExit) as e:
        cli.main([str(pair["h1"]), str(pair["h2"]), "--compare", str(pair["h2"])])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main([str(pair["h1"]), "--labels", "a,b"])
    assert e.value.code == 2
    capsys.readouterr()
    assert cli.main([str(pair["h1"]), "--compare", str(tmp_path / "missing.pcap"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pcap-report: error: ") and "missing.pcap" in err
    assert cli.main([str(pair["h1"]), "--compare", str(pair["h2"]), "--labels", "x", "-q"]) == 1


_H1 = CAPTURES / "compare-h1.pcapng"
_H2 = CAPTURES / "compare-h2.pcapng"


_keys = llmcap.keys_for


@pytest.mark.skipif(
    not (_H1.is_file() and _H2.is_file() and _keys(_H1) and _keys(_H2)),
    reason="captures/compare-h1.pcapng / compare-h2.pcapng (+ .keys) not recorded yet",
)
def test_recorded_h1_vs_h2_pair() -> None:
    a = pcaptools.load(_H1, keylog=_keys(_H1))
    b = pcaptools.load(_H2, keylog=_keys(_H2))
    m = _by_metric(compare(a, b))
    assert m["requests"][0] == m["requests"][1] > 0
    assert m["tcp_connections"][0] > m["tcp_connections"][1]
    assert m["reused_share"][1] > m["reused_share"][0]
    assert m["tls_handshakes"][0] >= m["tls_handshakes"][1] >= 1


def readme_table(a: pcaptools.Capture, b: pcaptools.Capture) -> list[str]:
    """The README's comparison table, as the tool makes it (markdown lines)."""
    lines = ["| metric | HTTP/1.1 | HTTP/2 | change | better |", "|---|---:|---:|---:|---|"]
    lines += [
        "| " + " | ".join(r) + " |" for r in comparison_rows(compare(a, b), ("HTTP/1.1", "HTTP/2"))
    ]
    return lines


@pytest.mark.skipif(
    not (_H1.is_file() and _H2.is_file() and _keys(_H1) and _keys(_H2)),
    reason="captures/compare-h1.pcapng / compare-h2.pcapng (+ .keys) not recorded yet",
)
def test_readme_comparison_table_is_what_the_tool_prints() -> None:
    want = readme_table(
        pcaptools.load(_H1, keylog=_keys(_H1)), pcaptools.load(_H2, keylog=_keys(_H2))
    )
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    start = readme.index(want[0])
    got = readme[start:].split("\n\n", 1)[0].splitlines()
    assert got == want, "re-recorded captures: paste this table into README.md:\n" + "\n".join(want)
