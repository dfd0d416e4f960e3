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


# --------------------------------------------------------------------------- max_record_rows


def test_caps_are_on_by_default_and_documented() -> None:
    import inspect

    from pcaptools._eventcap import DEFAULT_MAX_EVENTS_PER_CONNECTION, DEFAULT_MAX_RECORD_ROWS
    from pcaptools.limits import LIMITS

    params = inspect.signature(pcaptools.load).parameters
    assert params["max_events_per_connection"].default == DEFAULT_MAX_EVENTS_PER_CONNECTION
    assert params["max_record_rows"].default == DEFAULT_MAX_RECORD_ROWS
    assert (DEFAULT_MAX_EVENTS_PER_CONNECTION, DEFAULT_MAX_RECORD_ROWS) == (1_000_000, 2_000_000)
    by_name = {lim.name: lim for lim in LIMITS}
    assert by_name["max_record_rows"].default == 2_000_000
    assert by_name["max_record_rows"].code == "table.records_truncated"
    assert by_name["max_events_per_connection"].default == 1_000_000


@pytest.mark.parametrize("name", ["h2-sse-chat.pcapng", "ws-tls.pcapng", "sse-h1-cleartext.pcap"])
def test_default_caps_do_not_touch_shipped_captures(name: str) -> None:
    path = CAPTURES / name
    keys = path.with_suffix(".keys")
    cap = pcaptools.load(path, keylog=keys if keys.exists() else None)
    unc = pcaptools.load(path, keylog=keys if keys.exists() else None,
                         max_events_per_connection=None, max_record_rows=None)
    assert cap.summary.extra["rows_dropped"] == {}
    assert cap.summary.extra["rows_dropped_by_connection"] == {}
    for t in PER_RECORD:
        assert len(cap.tables[t]) == len(unc.tables[t]), t


def test_record_rows_cap_per_table_exact_counts_and_one_warning_each() -> None:
    path = CAPTURES / "h2-sse-chat.pcapng"
    keys = path.with_suffix(".keys")
    full = pcaptools.load(path, keylog=keys, max_events_per_connection=None, max_record_rows=None)
    cap = 30
    capped = pcaptools.load(path, keylog=keys, max_events_per_connection=None,
                            max_record_rows=cap)
    sizes = {t: len(full.tables[t]) for t in PER_RECORD}
    over = sorted(t for t, n in sizes.items() if n > cap)
    assert over == ["http2_frames", "sse_events", "tls_records"], sizes
    for t in PER_RECORD:
        a, b = full.tables[t], capped.tables[t]
        assert len(b) == min(cap, len(a)), t
        # the rows kept are the first ones, identical to the uncapped load's
        pd.testing.assert_frame_equal(b, a.iloc[: len(b)].reset_index(drop=True), obj=t,
                                      check_categorical=False)
    # exact counts of what was dropped, per table and per connection
    assert capped.summary.extra["rows_dropped"] == {t: sizes[t] - cap for t in over}
    by_conn = capped.summary.extra["rows_dropped_by_connection"]
    assert sum(by_conn.values()) == sum(sizes[t] - cap for t in over)
    want: dict[int, int] = {}
    for t in over:
        for s, n in full.tables[t].iloc[cap:]["tcp_stream"].value_counts().items():
            want[int(s)] = want.get(int(s), 0) + int(n)
    assert by_conn == dict(sorted(want.items()))
    # one table.records_truncated row per table, at the first row not kept
    w = capped.warnings[capped.warnings["code"] == "table.records_truncated"]
    assert len(w) == 3 == capped.summary.extra["warning_counts"]["table.records_truncated"]
    for t in over:
        (row,) = w[w["detail"].str.startswith(f"{t} reached 30 rows")].itertuples()
        first = full.tables[t].iloc[cap]
        assert (int(row.frame), int(row.tcp_stream)) == (int(first["frame"]),
                                                         int(first["tcp_stream"]))
    # summary tables (with their exact counts) and TCP analysis are not affected
    for t in ("connections", "tcp_events", "tls_handshakes", "http_requests", "http2_streams",
              "http2_connections", "packets"):
        pd.testing.assert_frame_equal(capped.tables[t], full.tables[t], obj=t)


@pytest.mark.parametrize(("name", "cap"), [("h2-sse-chat.pcapng", 30), ("compare-h1.pcapng", 100),
                                           ("compare-h1.pcapng", 200)])
def test_record_rows_cap_with_workers_equals_one_process(name: str, cap: int) -> None:
    """One connection (all rows in one worker: the worker cuts), ten connections with 36 TLS
    records and 22 SSE events each (rows in both workers; cap 100: both workers cut, cap
    200: neither worker's 180 TLS records reach it, the merged 360 do)."""
    path = CAPTURES / name
    keys = path.with_suffix(".keys")
    one = pcaptools.load(path, keylog=keys, max_record_rows=cap)
    two = pcaptools.load(path, keylog=keys, max_record_rows=cap, workers=2)
    assert one.summary.extra["rows_dropped"]
    for t in PER_RECORD:
        pd.testing.assert_frame_equal(two.tables[t], one.tables[t], obj=t)
    assert one.summary.extra["warning_counts"] == two.summary.extra["warning_counts"]
    for k in ("rows_dropped", "rows_dropped_by_connection"):
        assert one.summary.extra[k] == two.summary.extra[k], k
    if name == "compare-h1.pcapng":
        assert set(two.tls_records["tcp_stream"] % 2) == {0, 1}
    cols = ["frame", "tcp_stream", "code", "detail"]
    assert (one.warnings[cols].astype(object).values.tolist()
            == two.warnings[cols].astype(object).values.tolist())


def test_record_rows_cap_is_not_applied_when_streaming(tmp_path: Path) -> None:
    """``load(out=...)`` writes the rows to Parquet while reading: memory is bounded without
    the table cap (as for max_packet_rows); the per-connection cap still applies."""
    path = CAPTURES / "h2-sse-chat.pcapng"
    keys = path.with_suffix(".keys")
    full = pcaptools.load(path, keylog=keys)
    streamed = pcaptools.load(path, keylog=keys, max_record_rows=5, out=tmp_path / "t")
    assert len(streamed.sse_events) == len(full.sse_events) > 5
    assert streamed.summary.extra["rows_dropped"] == {}


def test_event_cap_rejects_negative_table_cap_and_skips_unbuilt_tables() -> None:
    with pytest.raises(ValueError):
        EventCap(None, Diagnostics(), max_rows=-1)
    path = CAPTURES / "h2-sse-chat.pcapng"
    keys = path.with_suffix(".keys")
    cap = pcaptools.load(path, keylog=keys, tls_records=False, max_record_rows=30)
    assert "tls_records" not in cap.summary.extra["rows_dropped"]
    assert len(cap.tls_records) == 0


# --------------------------------------------------------------------------- plan + take


def _fake_event(t: type, stream: int, frame: int) -> object:
    """An instance of event type ``t`` with only tcp_stream, ts_ns and frame set (what the cap
    reads): a named tuple of that many fields, or a slotted dataclass left half-initialised."""
    if issubclass(t, tuple):
        n = len(t._fields)  # type: ignore[attr-defined]
        vals: list[object] = [None] * n
        for name, v in (("tcp_stream", stream), ("ts_ns", frame * 1000), ("frame", frame)):
            vals[t._fields.index(name)] = v  # type: ignore[attr-defined]
        return tuple.__new__(t, vals)
    e = object.__new__(t)
    for name, v in (("tcp_stream", stream), ("ts_ns", frame * 1000), ("frame", frame)):
        object.__setattr__(e, name, v)
    return e


class _Other:
    """An event type no per-record table keeps."""

    def __init__(self, stream: int) -> None:
        self.tcp_stream = stream


@pytest.mark.parametrize(("limit", "max_rows", "skip"), [
    (None, None, frozenset()), (7, None, frozenset()), (None, 11, frozenset()),
    (5, 9, frozenset({"tls_records"})), (0, 3, frozenset()), (40, 25, frozenset({"sse_events"})),
])
def test_plan_and_take_equal_the_per_event_loop(
        limit: int | None, max_rows: int | None, skip: frozenset[str]) -> None:
    """The routing in pipeline.emit counts a list by the plan of its types (EventCap.plan +
    take): the same lists kept, the same counts, drops and warning rows as __call__."""
    import random

    from pcaptools._eventcap import TABLE_OF

    rnd = random.Random(20261207)
    types: list[type] = [*TABLE_OF, _Other]
    da, db = Diagnostics(), Diagnostics()
    a = EventCap(limit, da, max_rows=max_rows, skip=skip)
    b = EventCap(limit, db, max_rows=max_rows, skip=skip)
    plans: dict[tuple[type, ...], object] = {}
    for frame in range(1, 400):
        stream = rnd.randrange(4)
        n = rnd.choice((1, 2, 3, 3, 5, 12))
        events = [_fake_event(t, stream, frame) if t is not _Other else _Other(stream)
                  for t in rnd.choices(types, k=n)]
        want = a(list(events))
        key = tuple(map(type, events))
        first, gains, total = b.plan(key)
        plans[key] = (first, gains, total)
        got = b.take(events, first, gains, total) if total else events
        assert [id(e) for e in got] == [id(e) for e in want]
        assert (got is events) == (len(want) == len(events))
        assert (b.rows, b.kept, b.dropped, b.dropped_by_stream, b.warned) == (
            a.rows, a.kept, a.dropped, a.dropped_by_stream, a.warned)
        assert {s: c for s, c in b.counts.items() if c} == {
            s: c for s, c in a.counts.items() if c}
    assert a.summary() == b.summary()
    assert da.counts == db.counts and len(plans) > 50
    if limit is not None or max_rows is not None:
        assert sum(a.dropped.values()) > 0, "the cap must be reached"
