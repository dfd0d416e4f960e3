"""headline() and verdicts(): exact values on hand-built captures, and on corpus captures
against tshark 4.0 (truth.txt and live tshark runs)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from pcaptools.analyses.summary import _pct, fmt_ms, headline, verdicts, warning_counts
from pcaptools.capture import Capture
from tests.conftest import CORPUS, corpus_files
from tests.report.factory import (
    MIXED_FACTS,
    conn_row,
    empty_capture,
    make_capture,
    summary,
    warning_row,
)

# --------------------------------------------------------------------------- hand-built captures


def test_headline_mixed_capture_values() -> None:
    h = headline(make_capture())
    f = MIXED_FACTS
    assert h["file"] == "mixed.pcapng"
    assert h["format"] == "pcapng" and h["compression"] is None
    assert h["linktypes"] == [1]
    assert h["first_ts"] == "2023-11-14T22:13:20+00:00"
    assert h["last_ts"] == "2023-11-14T22:13:30+00:00"
    assert h["duration_s"] == 10.0
    assert h["frames"] == f["frames"] == 300
    assert h["tcp_connections"] == 6
    assert h["handshakes_captured"] == 5
    assert h["handshakes_established"] == 3
    assert h["refused"] == 1
    assert h["no_answer"] == 1
    assert h["started_mid_stream"] == 1
    assert h["reset"] == 1  # stream 1 only: the refused stream 2 also ended by RST
    assert h["closed_fin"] == 2
    assert h["half_closed"] == 0
    assert h["open_at_eof"] == 2
    assert h["irtt_ms"] == {"count": 3, "median": 20.0, "p95": 29.0, "max": 30.0}
    assert h["retransmitted_segments"] == 6
    assert h["retransmissions_by_kind"] == {
        "retransmission": 4,
        "fast_retransmission": 1,
        "spurious_retransmission": 1,
    }
    assert h["data_segments"] == 200
    assert h["retransmitted_data_segments"] == 5
    assert h["retransmitted_share"] == 0.025
    assert h["payload_bytes"] == 24_000
    assert h["resent_bytes"] == 800
    assert h["resent_share"] == round(800 / 24_000, 6)
    assert h["lost_segments"] == f["lost_segments"] == 4
    assert (h["lost_before_capture"], h["lost_after_capture"]) == (0, 4)
    assert h["losses_by_recovery"] == {"rto": 3, "fast_retransmit": 1}
    assert h["spurious_resends"] == f["spurious_resends"] == 1
    assert (h["capture_drop_bytes"], h["unresolved_gaps"]) == (0, 0)
    assert h["conn_state"] == {"SF": 2, "OTH": 1, "REJ": 1, "RSTO": 1, "S0": 1}
    assert list(h["conn_state"]) == ["SF", "OTH", "REJ", "RSTO", "S0"]  # count desc, then name
    assert h["end_reason"] == {"fin": 2, "open_at_eof": 2, "rst": 2}
    assert h["tcp_events"] == {
        "retransmission": 4,
        "duplicate_ack": 2,
        "fast_retransmission": 1,
        "spurious_retransmission": 1,
        "zero_window": 1,
    }
    assert h["warnings"] == 8
    assert h["warnings_by_code"] == {
        "net.bad_ip_total_length": 7,
        "tcp.capture_started_mid_stream": 1,
    }


def test_headline_is_strict_json() -> None:
    for cap in (make_capture(), empty_capture(), empty_capture(5)):
        h = headline(cap)
        assert json.loads(json.dumps(h, allow_nan=False)) == h


def test_headline_is_deterministic() -> None:
    assert headline(make_capture()) == headline(make_capture())


def test_verdicts_mixed_capture() -> None:
    assert verdicts(make_capture()) == [
        "300 frames over 10.0 s.",
        "6 TCP connections: 2 closed with FIN, 1 reset (RST), 1 refused, 1 SYN never answered, "
        "1 still open at the end of the capture.",
        "1 of 6 connections started before the capture (no SYN seen): client and server are "
        "guessed from the ports.",
        "Median TCP handshake RTT 20.0 ms (p95 29.0 ms, max 30.0 ms, 3 connections).",
        "1 connection had to retransmit the SYN or SYN-ACK.",
        "2.0% of data segments were lost and resent (4 of 200: 0 lost before the capture "
        "point, 4 after it).",
        "1 resend was spurious (the first copy had arrived).",
        "6 retransmissions flagged by tshark (tcp.analysis.retransmission): 1 fast, 1 spurious, "
        "1 without payload (SYN or FIN).",
        "800 payload bytes were sent more than once (3.3% of 24,000).",
        "Zero window advertised by a receiver (1 frame in 1 connection).",
        "8 warnings while reading: 7 net.bad_ip_total_length, 1 tcp.capture_started_mid_stream.",
    ]


def test_verdicts_accept_precomputed_headline() -> None:
    cap = make_capture()
    assert verdicts(cap, headline(cap)) == verdicts(cap)


def test_empty_capture() -> None:
    cap = empty_capture()
    h = headline(cap)
    assert h["frames"] == 0 and h["first_ts"] is None and h["duration_s"] == 0.0
    assert h["tcp_connections"] == 0
    assert h["irtt_ms"] == {"count": 0, "median": None, "p95": None, "max": None}
    assert h["data_segments"] == 0 and h["retransmitted_share"] is None
    assert h["resent_share"] is None
    assert h["conn_state"] == {} and h["warnings"] == 0 and h["warnings_by_code"] == {}
    assert verdicts(cap) == ["The capture holds no frames."]


def test_capture_without_tcp() -> None:
    assert verdicts(empty_capture(5, duration_s=0.25)) == [
        "5 frames over 250 ms.",
        "No TCP traffic.",
    ]


def test_without_packets_table_the_share_is_unknown() -> None:
    cap = make_capture()
    tables = dict(cap.tables)
    del tables["packets"]
    cap2 = Capture(cap.summary, tables)
    h = headline(cap2)
    assert h["data_segments"] is None
    assert h["retransmitted_share"] is None
    assert h["retransmitted_segments"] == 6
    v = verdicts(cap2)
    assert "4 segments lost and resent (0 lost before the capture point, 4 after it)." in v
    assert "6 retransmissions flagged by tshark (tcp.analysis.retransmission): 1 fast, " \
        "1 spurious." in v
    assert not any("of data segments" in s for s in v)


def test_no_retransmission_sentence_says_how_many_segments() -> None:
    cap = make_capture()
    tables = dict(cap.tables)
    ev = cap.tcp_events
    tables["tcp_events"] = ev[~ev["kind"].astype("string").str.contains("retransmission")]
    del tables["tcp_losses"]
    v = verdicts(Capture(cap.summary, tables))
    assert "No data segment was lost (200 data segments)." in v
    assert not any("tshark" in s for s in v)


def test_single_handshake_sentence() -> None:
    from pcaptools.tables.foundation import CONNECTIONS, TCP_HANDSHAKES
    from tests.report.factory import handshake_row

    cap = Capture(
        summary(10),
        {
            "connections": CONNECTIONS.frame([conn_row(0)]),
            "tcp_handshakes": TCP_HANDSHAKES.frame([handshake_row(0, irtt_ms=0.0421)]),
        },
    )
    v = verdicts(cap)
    assert "TCP handshake RTT 0.0421 ms (1 connection)." in v
    assert "1 TCP connection: 1 closed with FIN." in v


def test_warning_counts_adds_suppressed_occurrences() -> None:
    from pcaptools.tables.foundation import WARNINGS

    rows = [warning_row("capture.bad_block", "x", frame=3)] * 2 + [
        warning_row(
            "capture.bad_block",
            "1998 more occurrences of capture.bad_block were counted but not listed",
        ),
        # a detail that merely looks alike but names another code, or has a frame, counts once
        warning_row("capture.bad_block", "7 more occurrences of net.x were counted but not listed"),
        warning_row(
            "capture.bad_block",
            "9 more occurrences of capture.bad_block were counted but not listed",
            frame=4,
        ),
    ]
    cap = Capture(summary(10), {"warnings": WARNINGS.frame(rows)})
    assert warning_counts(cap) == {"capture.bad_block": 2 + 1998 + 1 + 1}


def test_warning_counts_prefers_summary_extra() -> None:
    cap = make_capture()
    cap.summary.extra["warning_counts"] = {"a.b": 1, "c.d": 5}
    assert warning_counts(cap) == {"c.d": 5, "a.b": 1}


@pytest.mark.parametrize(
    ("part", "whole", "text"),
    [
        (47, 2611, "1.8%"),
        (5, 200, "2.5%"),
        (1, 3, "33%"),
        (1, 10_000, "0.01%"),
        (3, 7000, "0.043%"),
    ],
)
def test_pct(part: int, whole: int, text: str) -> None:
    assert _pct(part, whole) == text


@pytest.mark.parametrize(
    ("v", "text"),
    [
        (12.44, "12.4 ms"),
        (0.0421, "0.0421 ms"),
        (1204.4, "1,204 ms"),
        (1.0, "1.0 ms"),
    ],
)
def testfmt_ms(v: float, text: str) -> None:
    assert fmt_ms(v) == text


# --------------------------------------------------------------------------- corpus vs tshark


def _truth() -> dict[str, dict[str, int]]:
    """truth.txt -> {capture: {"frames": N, "tcp.streams": N, "tcp.retransmission": N, ...}}"""
    path = CORPUS / "truth.txt"
    if not path.is_file():
        return {}
    out: dict[str, dict[str, int]] = {}
    cur: dict[str, int] | None = None
    for line in path.read_text().splitlines():
        if line.startswith("== "):
            cur = out.setdefault(line[3:].strip(), {})
        elif cur is not None and line.startswith("frames="):
            cur["frames"] = int(line.split("=", 1)[1])
        elif cur is not None and line.startswith("tcp: "):
            for k, v in re.findall(r"(\w+)=(\d+)", line):
                cur[f"tcp.{k}"] = int(v)
    return out


TRUTH = _truth()
TRUTH_FILES = [p for p in corpus_files() if p.name in TRUTH and "tcp.streams" in TRUTH[p.name]]


@pytest.fixture(scope="module")
def loaded() -> dict[str, Capture]:
    return {}


def _load(path: Path, cache: dict[str, Capture]) -> Capture:
    import pcaptools

    if path.name not in cache:
        cache[path.name] = pcaptools.load(path)
    return cache[path.name]


@pytest.mark.corpus
@pytest.mark.parametrize("path", TRUTH_FILES, ids=lambda p: p.name)
def test_headline_matches_truth(path: Path, loaded: dict[str, Capture]) -> None:
    t = TRUTH[path.name]
    h = headline(_load(path, loaded))
    assert h["frames"] == t["frames"]
    assert h["tcp_frames"] == t["tcp.frames"]
    assert h["tcp_connections"] == t["tcp.streams"]
    # tshark's tcp.analysis.retransmission also matches fast and spurious ones: our union
    assert h["retransmitted_segments"] == t["tcp.retransmission"]
    kinds = h["retransmissions_by_kind"]
    assert kinds.get("fast_retransmission", 0) == t["tcp.fast_retransmission"]
    assert kinds.get("spurious_retransmission", 0) == t["tcp.spurious_retransmission"]
    ev = h["tcp_events"]
    for k in (
        "duplicate_ack",
        "zero_window",
        "zero_window_probe",
        "keep_alive",
        "out_of_order",
        "lost_segment",
    ):
        assert ev.get(k, 0) == t[f"tcp.{k}"], k


@pytest.mark.corpus
def test_wireshark_retrans_headline(corpus: Path, loaded: dict[str, Capture]) -> None:
    cap = _load(corpus / "wireshark-retrans.pcap", loaded)
    h = headline(cap)
    assert h["frames"] == 108
    assert h["tcp_connections"] == 1
    assert h["retransmitted_segments"] == 47
    assert h["retransmissions_by_kind"] == {
        "retransmission": 47 - 14 - 5,
        "fast_retransmission": 14,
        "spurious_retransmission": 5,
    }
    assert h["tcp_events"]["duplicate_ack"] == 27
    v = verdicts(cap)
    assert v[0].startswith("108 frames over ")
    assert any(s.startswith("1 TCP connection") for s in v)


@pytest.mark.corpus
@pytest.mark.tshark
@pytest.mark.parametrize(
    "name",
    [
        "wireshark-retrans.pcap",
        "syn_retransmit_with_ts.pcap",
        "dump.pcapng",
        "tls-13draft19-early-data.pcap",
    ],
)
def test_data_segments_and_irtt_match_tshark(
    name: str, corpus: Path, tshark: str, loaded: dict[str, Capture]
) -> None:
    from tests.oracle import tshark_fields

    path = corpus / name
    h = headline(_load(path, loaded))
    data = tshark_fields(path, ("frame.number",), display_filter="tcp.len > 0")
    assert h["data_segments"] == len(data)
    rdata = tshark_fields(
        path, ("frame.number",), display_filter="tcp.analysis.retransmission && tcp.len > 0"
    )
    assert h["retransmitted_data_segments"] == len(rdata)
    irtt: dict[str, float] = {}
    for stream, rtt in tshark_fields(path, ("tcp.stream", "tcp.analysis.initial_rtt")):
        if rtt and stream not in irtt:
            irtt[stream] = float(rtt) * 1e3
    assert h["irtt_ms"]["count"] == len(irtt)
    if irtt:
        assert h["irtt_ms"]["median"] == pytest.approx(statistics.median(irtt.values()), abs=1e-3)
        assert h["irtt_ms"]["max"] == pytest.approx(max(irtt.values()), abs=1e-3)


@pytest.mark.corpus
def test_refused_connection_verdict(corpus: Path, loaded: dict[str, Capture]) -> None:
    cap = _load(corpus / "tcp_refuseconnection.pcapng", loaded)
    h = headline(cap)
    assert (h["tcp_connections"], h["refused"], h["reset"]) == (1, 1, 0)
    assert h["conn_state"] == {"REJ": 1}
    assert "1 TCP connection: 1 refused." in verdicts(cap)


@pytest.mark.corpus
def test_dump_all_connections_reset(corpus: Path, loaded: dict[str, Capture]) -> None:
    # 73 TLS connections on loopback, each ended by one RST (truth.txt: rst=73)
    h = headline(_load(corpus / "dump.pcapng", loaded))
    assert h["tcp_connections"] == 73
    assert h["end_reason"].get("rst", 0) + h["end_reason"].get("fin", 0) == 73
    assert h["handshakes_established"] == 73


# ----------------------------------------------------------- shipped captures (facts.json)


def _shipped_with_facts() -> list[Path]:
    from tests.conftest import shipped_captures

    return [p for p in shipped_captures() if p.with_name(p.name + ".facts.json").is_file()]


@pytest.mark.parametrize("path", _shipped_with_facts(), ids=lambda p: p.name)
def test_headline_matches_recorded_facts(path: Path, loaded: dict[str, Capture]) -> None:
    facts = json.loads(path.with_name(path.name + ".facts.json").read_text())
    ts, want = facts["tshark"], facts["summary"]
    h = headline(_load(path, loaded))
    assert h["frames"] == ts["frames"]
    tcp = ts.get("tcp", {})
    assert h["tcp_connections"] == tcp.get("streams", 0)
    assert h["retransmitted_segments"] == tcp.get("retransmission", 0)
    assert h["retransmissions_by_kind"].get("fast_retransmission", 0) == tcp.get(
        "fast_retransmission", 0
    )
    for k in ("duplicate_ack", "zero_window", "out_of_order", "lost_segment", "window_update"):
        assert h["tcp_events"].get(k, 0) == tcp.get(k, 0), k
    # what the recording script did, for sure
    assert h["refused"] == want["refused"]
    assert h["reset"] == want["reset"]
    # an SYN rejected by ICMP port unreachable is "no answer" at the TCP level (ICMP errors are
    # not tied to connections yet)
    assert h["no_answer"] == want["no_answer"] + want["icmp_rejected"]
    assert h["closed_fin"] == want["closed_with_fin"]
    assert h["started_mid_stream"] == want["open_at_capture_start"]
