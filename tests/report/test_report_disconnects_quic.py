"""The report's Disconnects section lists QUIC connections (analyses.disconnects(cap,
quic=True)) beside the TCP ones, on the recorded quic-endings capture (one aioquic connection
per way of ending, facts in its .facts.json); captures without QUIC keep the TCP-only section."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest

import pcaptools
from pcaptools.analyses import disconnects
from pcaptools.report.html import render_report
from tests.conftest import CAPTURES, CORPUS
from tests.report.factory import report_section

ENDINGS = CAPTURES / "quic-endings.pcapng"


@pytest.fixture(scope="module")
def endings() -> tuple[pcaptools.Capture, str]:
    if not ENDINGS.exists():
        pytest.skip("quic-endings.pcapng is absent")
    cap = pcaptools.load(ENDINGS, keylog=ENDINGS.with_suffix(".keys"))
    return cap, report_section(render_report(cap), "disconnects")


def test_quic_rows_are_the_analysis_rows(endings: tuple[pcaptools.Capture, str]) -> None:
    cap, sec = endings
    d = disconnects(cap, quic=True)
    q = d[d["transport"] == "quic"]
    assert len(q) == 7 and d.attrs["quic_connections"] == 9
    text = re.sub(r"<[^>]+>", " ", sec)
    assert "QUIC: 7 of 9 connections did not end cleanly; 2 closed cleanly" in text
    # every QUIC finding is a row: its connection number, verdict and filter, in order
    shown = re.findall(r"quic\.connection\.number eq (\d+) &amp;&amp;", sec)
    assert [int(x) for x in shown] == q["quic_connection"].astype(int).tolist()
    for v in q["verdict"].astype(str):
        assert v in text
    assert "PROTOCOL_VIOLATION" in text and "stateless_reset" in text


def test_report_runs_the_tcp_rules_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's QUIC part asks for the QUIC rows alone (disconnects(quic=True, tcp=False)):
    rendering a capture with a TCP and a QUIC connection (Chrome's, from the corpus) runs
    the TCP rules once and the QUIC rules once."""
    module = importlib.import_module("pcaptools.analyses.disconnects")

    path = CORPUS / "chrome-cloudflare-quic-with-secrets.pcapng"
    if not path.is_file():
        pytest.skip(f"{path.name} is absent")
    cap = pcaptools.load(path)
    assert len(cap.connections) == len(cap.quic_connections) == 1
    calls: list[str] = []
    tcp, quic = module._tcp, module._quic

    def count(name: str, f: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            calls.append(name)
            return f(*args)
        return wrapped

    monkeypatch.setattr(module, "_tcp", count("tcp", tcp))
    monkeypatch.setattr(module, "_quic", count("quic", quic))
    sec = report_section(render_report(cap), "disconnects")
    assert sorted(calls) == ["quic", "tcp"]
    assert "QUIC: 0 of 1 connection did not end cleanly; 1 closed cleanly" in sec


def test_tcp_only_capture_has_no_quic_part() -> None:
    cap = pcaptools.load(CAPTURES / "demo.pcapng", keylog=CAPTURES / "demo.keys")
    assert len(cap.quic_connections) == 0
    sec = report_section(render_report(cap), "disconnects")
    assert "QUIC:" not in sec and "quic=True" not in sec
