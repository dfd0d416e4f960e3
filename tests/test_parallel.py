"""load(path, workers=N): the same tables as one process, on real captures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.capture import TABLES
from pcaptools.diagnostics import ShardDiagnostics
from pcaptools.errors import PcapToolsError
from pcaptools.parallel import load_parallel
from tests.conftest import corpus_files

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SHIPPED = sorted([*CAPTURES.glob("*.pcap"), *CAPTURES.glob("*.pcapng")])


def _keys(p: Path) -> str | None:
    k = p.with_suffix(".keys")
    return str(k) if k.exists() else None


def assert_same_tables(single: pcaptools.Capture, par: pcaptools.Capture) -> None:
    """Every table has the same rows (values and dtypes) once both are put in key order;
    tables with a frame column are already in the same order."""
    for name, schema in TABLES.items():
        a, b = single.tables[name], par.tables[name]
        assert len(a) == len(b), name
        key = list(schema.key)
        pd.testing.assert_frame_equal(
            b.sort_values(key, kind="stable").reset_index(drop=True),
            a.sort_values(key, kind="stable").reset_index(drop=True),
            check_exact=True, check_categorical=False, obj=name,
        )
        if "frame" in a.columns and name not in ("ws_heartbeats",):
            assert b["frame"].tolist() == a["frame"].tolist(), name
    assert par.summary.extra["warning_counts"] == single.summary.extra["warning_counts"]
    assert par.summary.frames == single.summary.frames
    assert par.summary.extra["workers"] >= 2


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_parallel_equals_single_on_shipped_captures(path: Path) -> None:
    keys = _keys(path)
    single = pcaptools.load(path, keylog=keys)
    assert_same_tables(single, pcaptools.load(path, keylog=keys, workers=2))


def test_parallel_three_workers_h2_sse() -> None:
    path = CAPTURES / "h2-sse-chat.pcapng"
    single = pcaptools.load(path, keylog=_keys(path))
    par = load_parallel(path, workers=3, keylog=_keys(path))
    assert_same_tables(single, par)
    # the payload tables are not empty: the workers really parsed their shares
    assert len(par.sse_events) == len(single.sse_events) > 100
    assert par.http2_streams["tcp_stream"].nunique() == single.http2_streams["tcp_stream"].nunique()


def test_parallel_corpus() -> None:
    """workers=2 on every corpus capture whose connections the two workers share out (two or
    more TCP connections; with one, worker 1 parses nothing: the shipped captures above and
    scripts/snapshot.py's ``workers2`` option cover those)."""
    files = corpus_files()
    if not files:
        pytest.skip("public corpus absent")
    checked = 0
    for f in files:
        try:
            single = pcaptools.load(f)
        except PcapToolsError:
            continue  # not a capture we open (the corpus has a few on purpose)
        if len(single.connections) < 2:
            continue
        assert_same_tables(single, pcaptools.load(f, workers=2))
        checked += 1
    assert checked >= 9


def test_warning_cap_applies_after_merging() -> None:
    """Capped warning rows: each worker caps its own, the merge caps again, counts add up."""
    path = CAPTURES / "tcp-reset.pcap"  # http1.truncated_message on 3 connections
    full = pcaptools.load(path)
    assert (full.warnings["code"] == "http1.truncated_message").sum() == 3
    single = pcaptools.load(path, max_warnings_per_code=2)
    par = pcaptools.load(path, max_warnings_per_code=2, workers=2)
    assert par.summary.extra["warning_counts"] == single.summary.extra["warning_counts"]
    assert par.summary.extra["warning_counts"]["http1.truncated_message"] == 3
    pd.testing.assert_frame_equal(par.warnings, single.warnings, check_categorical=False)
    rows = par.warnings[par.warnings["code"] == "http1.truncated_message"]
    assert rows["frame"].tolist()[:2] == [26, 61] and pd.isna(rows["frame"].iloc[2])
    assert rows["detail"].iloc[2] == (
        "1 more occurrences of http1.truncated_message were counted but not listed")


def test_shard_diagnostics_keeps_only_its_own_rows() -> None:
    d0, d1 = ShardDiagnostics((0, 2)), ShardDiagnostics((1, 2))
    for d in (d0, d1):
        d.add("tcp.reassembly_gap", "x", frame=5, tcp_stream=3)
        d.add("tcp.reassembly_gap", "x", frame=6, tcp_stream=4)
        d.add("capture.truncated_record", "cut")
    assert [(r.tcp_stream, r.code) for r in d0.rows] == [
        (4, "tcp.reassembly_gap"), (None, "capture.truncated_record")]
    assert [(r.tcp_stream, r.code) for r in d1.rows] == [(3, "tcp.reassembly_gap")]
    assert d0.counts["tcp.reassembly_gap"] + d1.counts["tcp.reassembly_gap"] == 2
    with pytest.raises(KeyError):
        d1.add("no.such_code", "x", tcp_stream=4)


def test_parallel_rejects_progress() -> None:
    with pytest.raises(TypeError):
        load_parallel(SHIPPED[0], workers=2, progress=lambda a, b: None)
