"""load(max_events_per_connection=N): per-record rows bounded per connection, nothing else lost."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools._eventcap import EventCap
from pcaptools.diagnostics import Diagnostics

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
PER_RECORD = ("tls_records", "http2_frames", "sse_events", "ws_frames", "ws_messages")


def _per_conn(cap: pcaptools.Capture) -> pd.Series:
    """per-record rows per tcp_stream, all per-record tables together"""
    parts = [cap.tables[t]["tcp_stream"] for t in PER_RECORD if len(cap.tables[t])]
    return pd.concat(parts).value_counts().sort_index()


@pytest.mark.parametrize("name,limit", [("h2-sse-chat.pcapng", 40), ("ws-tls.pcapng", 25),
                                        ("compare-h1.pcapng", 10)])
def test_cap_bounds_rows_per_connection_and_keeps_the_rest(name: str, limit: int) -> None:
    path = CAPTURES / name
    keys = path.with_suffix(".keys")
    full = pcaptools.load(path, keylog=keys)
    capped = pcaptools.load(path, keylog=keys, max_events_per_connection=limit)
    before, after = _per_conn(full), _per_conn(capped)
    over = before[before > limit]
    assert len(over) >= 1, "the capture must exercise the cap"
    # every connection keeps exactly min(limit, its rows); the ones under the cap are untouched
    expected = before.clip(upper=limit)
    pd.testing.assert_series_equal(after, expected, check_names=False)
    # one warning per connection that hit the cap, naming it
    w = capped.warnings[capped.warnings["code"] == "table.events_truncated"]
    assert sorted(w["tcp_stream"].astype(int)) == sorted(over.index.astype(int))
    assert capped.summary.extra["warning_counts"]["table.events_truncated"] == len(over)
    # what is kept is a subset of the full rows: the earliest of each connection
    for t in PER_RECORD:
        a, b = full.tables[t], capped.tables[t]
        assert set(zip(b["tcp_stream"], b["frame"], strict=True)) <= set(
            zip(a["tcp_stream"], a["frame"], strict=True)), t
        for s, sub in b.groupby("tcp_stream"):
            fa = a.loc[a["tcp_stream"] == s, "frame"]
            assert sub["frame"].max() <= fa.max()
    # summary tables and TCP analysis are not affected
    for t in ("connections", "tcp_handshakes", "tcp_events", "tls_handshakes", "packets",
              "http_requests", "http2_streams", "ws_connections"):
        pd.testing.assert_frame_equal(capped.tables[t], full.tables[t], obj=t)


def test_cap_zero_and_none() -> None:
    path = CAPTURES / "h2-sse-chat.pcapng"
    keys = path.with_suffix(".keys")
    zero = pcaptools.load(path, keylog=keys, max_events_per_connection=0)
    assert all(len(zero.tables[t]) == 0 for t in PER_RECORD)
    assert len(zero.http2_streams) == len(pcaptools.load(path, keylog=keys).http2_streams) > 0
    with pytest.raises(ValueError):
        EventCap(-1, Diagnostics())


def test_cap_with_workers_equals_one_process() -> None:
    path = CAPTURES / "h2-sse-chat.pcapng"
    keys = path.with_suffix(".keys")
    one = pcaptools.load(path, keylog=keys, max_events_per_connection=40)
    two = pcaptools.load(path, keylog=keys, max_events_per_connection=40, workers=2)
    for t in PER_RECORD:
        assert len(one.tables[t]) == len(two.tables[t]), t
    assert one.summary.extra["warning_counts"] == two.summary.extra["warning_counts"]
