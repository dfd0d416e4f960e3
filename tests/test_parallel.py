"""load(path, workers=N): the same tables as one process, on real captures."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.capture import TABLES
from pcaptools.diagnostics import ShardDiagnostics
from pcaptools.errors import PcapToolsError
from pcaptools.frameloop import shard_of
from pcaptools.parallel import load_parallel, merge_shards
from pcaptools.tables.concat import concat_tables
from pcaptools.tables.foundation import WARNINGS
from tests.conftest import corpus_files
from tests.tcp._tracker_patch import count_freezes

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
            check_exact=True, obj=name,  # (categories too, in the same order)
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
    pd.testing.assert_frame_equal(par.warnings, single.warnings)
    rows = par.warnings[par.warnings["code"] == "http1.truncated_message"]
    assert rows["frame"].tolist()[:2] == [26, 61] and pd.isna(rows["frame"].iloc[2])
    assert rows["detail"].iloc[2] == (
        "1 more occurrences of http1.truncated_message were counted but not listed")


def test_shard_diagnostics_keeps_only_its_own_rows() -> None:
    """A connection's anomalies come only from the worker that follows it: each keeps
    its own; what belongs to no connection every worker meets, and worker 0 keeps it."""
    d0, d1 = ShardDiagnostics((0, 2)), ShardDiagnostics((1, 2))
    d0.add("tcp.reassembly_gap", "x", frame=5, tcp_stream=0)
    d1.add("tcp.reassembly_gap", "x", frame=6, tcp_stream=0)
    for d in (d0, d1):
        d.add("capture.truncated_record", "cut")
    assert [(r.frame, r.code) for r in d0.rows] == [
        (5, "tcp.reassembly_gap"), (None, "capture.truncated_record")]
    assert [(r.frame, r.code) for r in d1.rows] == [(6, "tcp.reassembly_gap")]
    assert d0.counts["tcp.reassembly_gap"] + d1.counts["tcp.reassembly_gap"] == 2
    assert d0.counts["capture.truncated_record"] + d1.counts["capture.truncated_record"] == 1
    with pytest.raises(KeyError):
        d1.add("no.such_code", "x")


def test_a_row_made_after_the_pass_goes_where_its_frame_is() -> None:
    from pcaptools.diagnostics import Diagnostics
    d = Diagnostics()
    for frame in (5, None, 9):
        d.add("tcp.reassembly_gap", "x", frame=frame)
    d.add_in_frame_order("tcp.checksum_offloaded", "y", frame=7)
    d.add_in_frame_order("tcp.checksum_offloaded", "z", frame=1)
    d.add_in_frame_order("tcp.checksum_offloaded", "w", frame=20)
    assert [r.frame for r in d.rows] == [1, 5, None, 7, 9, 20]
    assert d.counts["tcp.checksum_offloaded"] == 3
    d1 = ShardDiagnostics((1, 2))  # (not its row: nothing moves)
    d1.add("tcp.reassembly_gap", "x", frame=5, tcp_stream=0)
    d1.add_in_frame_order("tcp.checksum_offloaded", "y", frame=2)
    assert [r.frame for r in d1.rows] == [5]


def test_shard_of_is_symmetric_and_spreads_even_ports() -> None:
    """Both directions of a connection go to the same worker, and a client's ports in steps
    of two (Linux connect() prefers even ones) spread over the workers."""
    a, b = bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1])
    c, s = bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1])
    for n in (2, 3, 16):
        for port in range(40000, 40100):
            assert shard_of(c, port, s, 443, n) == shard_of(s, 443, c, port, n)
    for n in (2, 16):
        for src, dst in ((a, b), (c, s)):
            counts = Counter(shard_of(src, p, dst, 443, n) for p in range(40000, 44000, 2))
            assert len(counts) == n
            assert min(counts.values()) > 2000 / n * 0.8


def test_workers_follow_only_their_connections() -> None:
    """Each worker follows (and numbers) only its own connections: the numbers add up to the
    capture's, and every connection is in the merged tables once, numbered as tshark does."""
    path = CAPTURES / "zeek-rules.pcap"  # (8 connections, interleaved)
    single = pcaptools.load(path)
    n = len(single.connections)
    assert n >= 4
    from pcaptools.pipeline import LoadOptions, run_tables
    parts = [run_tables(str(path), LoadOptions(shard=(k, 2))) for k in range(2)]
    opened = [s.extra["tcp_stream_opened"] for s, _ in parts]
    assert sum(map(len, opened)) == n and all(opened)
    for (_, t), o in zip(parts, opened, strict=True):
        assert t["connections"]["tcp_stream"].tolist() == list(range(len(o)))
        assert t["connections"]["first_frame"].tolist() == o
    # what names a connection besides the tcp_stream columns is renumbered too: a warning's
    # text (DNS over TCP and HTTPS say "tcp.stream N") and the rows dropped per connection
    s1, t1 = parts[1]
    local = 1
    text = f"DNS message of 3 bytes over TCP (tcp.stream {local}) could not be decoded"
    extra = WARNINGS.frame([(0, 1, local, None, "dns", "dns.malformed", text, None)])
    marked = [parts[0], (dataclasses.replace(s1, extra={
        **s1.extra, "tcp_stream_opened": list(opened[1]),
        "rows_dropped_by_connection": {local: 7}}),
        {**t1, "warnings": concat_tables([t1["warnings"], extra])})]
    renamed = merge_shards(marked)
    number = int(single.connections.set_index("first_frame").loc[opened[1][local], "tcp_stream"])
    assert number != local
    row = renamed.warnings[renamed.warnings["code"] == "dns.malformed"]
    assert row["tcp_stream"].tolist() == [number]
    assert row["detail"].tolist() == [text.replace(f"stream {local})", f"stream {number})")]
    assert renamed.summary.extra["rows_dropped_by_connection"] == {number: 7}

    merged = merge_shards(parts)
    assert "tcp_stream_opened" not in merged.summary.extra
    assert_same_tables(single, merged)
    # the parts are left as they were; consume=True empties the list (load(workers=N) lets
    # each table's parts go once it is merged)
    assert [set(t) for _, t in parts] == [set(TABLES), set(TABLES)]
    assert all(o for o in (s.extra.get("tcp_stream_opened") for s, _ in parts))
    given = list(parts)
    assert_same_tables(single, merge_shards(given, consume=True))
    assert given == []


def test_parallel_progress_follows_the_file_read_here() -> None:
    """With workers, the callback is called in this process by the part read here (every
    worker reads the whole file): byte counts that only grow, up to the file's size, and
    the same tables as without it."""
    path = CAPTURES / "h2-sse-chat.pcapng"
    calls: list[tuple[int, int]] = []
    par = load_parallel(path, workers=2, keylog=_keys(path),
                        progress=lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert calls and calls[-1] == (size, size)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert {t for _, t in calls} == {size}
    assert_same_tables(pcaptools.load(path, keylog=_keys(path)), par)
    with pytest.raises(TypeError):
        load_parallel(path, workers=2, shard=(0, 2))


@pytest.mark.parametrize("answer", ["close", "syn"])
def test_many_connections_numbered_as_one_process(answer: str, tmp_path: Path) -> None:
    """``benchmarks/synflood.py``: 2,000 complete HTTP/1.1 connections (``close``; their
    records frozen as they end) or 3,000 one-SYN ones (``syn``; kept as cold SYNs, whose
    tcp_stream number is taken when they come). Each worker numbers only its own; after the
    merge every table is one process's (whose tcp.stream tshark agrees with:
    tests/tcp/test_frozen.py), with 2 and 3 workers."""
    import subprocess
    import sys

    path = tmp_path / f"{answer}.pcap"
    args = ["--connections", "2000", "--answer", "close"] if answer == "close" \
        else ["--connections", "3000"]
    subprocess.run([sys.executable, str(CAPTURES.parent / "benchmarks" / "synflood.py"),
                    str(path), *args], check=True, capture_output=True)
    single = pcaptools.load(path)
    assert len(single.connections) == (2000 if answer == "close" else 3000)
    if answer == "close":
        assert len(single.http_requests) == 2000
    for workers in (2, 3):
        assert_same_tables(single, pcaptools.load(path, workers=workers))


def test_warnings_in_frame_order_with_checksums() -> None:
    """check_checksums=True: the tcp.checksum_offloaded row, made at the end of the pass,
    names the first frame with a partial checksum; one process and two workers put it there."""
    path = CAPTURES / "http1-keepalive-drops.pcap"
    single = pcaptools.load(path, check_checksums=True)
    frames = single.warnings["frame"].tolist()
    assert frames == sorted(frames) and len(frames) > 10
    assert single.warnings["code"].iloc[0] == "tcp.checksum_offloaded"
    par = pcaptools.load(path, check_checksums=True, workers=2)
    assert_same_tables(single, par)
    assert par.summary.extra["tcp_checksums"] == single.summary.extra["tcp_checksums"]


def test_workers_that_freeze_their_connections(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker freezes its own ended connections on its own clock (the segments it
    follows): 2,000 whole HTTP/1.1 connections, frozen 50 µs after they end once a worker
    holds 100 records (``tests/tcp/test_frozen.py``), in the workers' parts run here; merged,
    they are one process's tables."""
    import subprocess
    import sys

    import pcaptools.pipeline as pipeline
    from pcaptools.pipeline import LoadOptions, run_tables
    from pcaptools.tcp.frozen import FreezePolicy

    path = tmp_path / "close.pcap"
    subprocess.run([sys.executable, str(CAPTURES.parent / "benchmarks" / "synflood.py"),
                    str(path), "--connections", "2000", "--answer", "close"], check=True,
                   capture_output=True)
    single = pcaptools.load(path)
    frozen = count_freezes(monkeypatch)
    monkeypatch.setattr(pipeline, "FreezePolicy",
                        lambda: FreezePolicy(ended_ns=50_000, every=16, min_records=100))
    parts = [run_tables(str(path), LoadOptions(shard=(k, 2))) for k in range(2)]
    assert len(frozen) > 1000
    assert_same_tables(single, merge_shards(parts))
