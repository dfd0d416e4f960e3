"""Default caps on the per-record tables: ``load(max_events_per_connection=N,
max_record_rows=M)``.

The tables that grow with a connection's traffic get one row per TLS record, HTTP/2 frame,
SSE event, WebSocket frame and WebSocket message (the ``per_record`` event types of the
table sources in :mod:`pcaptools.tables.registry`: :data:`TABLE_OF`). A hostile or
pathological capture (a flood of 9-byte HTTP/2 frames, an SSE stream of empty events: 5
million SSE events on one connection peak at 1.65 GB uncapped, 0.44 GB with the defaults:
``benchmarks/sse_caps.py``, ``benchmarks/SSE_CAPS.md``) can make millions of them, so both
bounds are on by default:

- ``max_events_per_connection`` (default :data:`DEFAULT_MAX_EVENTS_PER_CONNECTION`): past
  ``N`` such rows for one connection (all five tables together), its further per-record
  events are dropped and one ``table.events_truncated`` row says from which frame;
- ``max_record_rows`` (default :data:`DEFAULT_MAX_RECORD_ROWS`): each of the five tables keeps
  at most ``M`` rows in all; the first row it cannot keep gives one ``table.records_truncated``
  row naming the table (not with ``load(out=...)``, which streams the rows to Parquet with
  bounded memory, as for ``max_packet_rows``).

What is dropped is counted exactly: ``Capture.summary.extra["rows_dropped"]`` (rows not kept,
per table) and ``["rows_dropped_by_connection"]`` (per tcp_stream, for the connections that
lost any). A connection's summary rows (handshakes, requests, HTTP/2 streams, WebSocket
connections with their frame, message and byte counts) are kept and exact, and its TCP
analysis is not affected. ``None`` switches a bound off.

Why these defaults: over every shipped and corpus capture (``captures/``, ``../shared/corpus``)
the largest counts are 1,148 per-record rows on one connection and 989 rows in one table, and
the 300 MB benchmark capture has 185,108 sse_events rows in all (``benchmarks/README.md``);
the caps sit three orders of magnitude above the shipped traffic and ten times above the
benchmark's. At the cap a table holds ~0.4-0.5 GB (the benchmark's tables: 196 bytes a row
of sse_events, 237 of http2_frames, 62 of tls_records), the order of ``max_packet_rows``'
2,000,000 rows; the per-connection cap keeps one flooding connection from taking more than
half of a table.
"""

from __future__ import annotations

from typing import Final

from .diagnostics import Diagnostics
from .tables.registry import PER_RECORD

DEFAULT_MAX_EVENTS_PER_CONNECTION: Final = 1_000_000
"""per-record rows one connection may add (all per-record tables together)"""
DEFAULT_MAX_RECORD_ROWS: Final = 2_000_000
"""rows each per-record table keeps in all"""

#: per-record event type -> the table its rows go to: the ``per_record`` of every registered
#: :class:`~pcaptools.tables.registry.TableSource`, in registration order (this is
#: ``tables.registry.PER_RECORD`` itself, so a source registered later is capped as well)
TABLE_OF: dict[type, str] = PER_RECORD

#: the per-record tables of the built-in sources, in TABLE_OF order
PER_RECORD_TABLES: tuple[str, ...] = tuple(TABLE_OF.values())


CapPlan = tuple[int, tuple[tuple[str, int], ...], int]
""":meth:`EventCap.plan`: (index of the first per-record event or -1, (table, rows) counted,
their sum)"""


class EventCap:
    """Counts per-record events per tcp_stream and per table and drops them past the limits
    (one warning row per connection and per table that hit its limit); counts every dropped
    row exactly."""

    __slots__ = ("counts", "diag", "dropped", "dropped_by_stream", "kept", "limit", "max_rows",
                 "rows", "skip", "warned")

    def __init__(self, limit: int | None, diag: Diagnostics, *, max_rows: int | None = None,
                 skip: frozenset[str] = frozenset()) -> None:
        """``limit``: per connection (None: none); ``max_rows``: per table (None: none);
        ``skip``: tables that are not built (their events are neither counted nor capped)."""
        if limit is not None and limit < 0:
            raise ValueError(f"max_events_per_connection must be >= 0, got {limit}")
        if max_rows is not None and max_rows < 0:
            raise ValueError(f"max_record_rows must be >= 0, got {max_rows}")
        self.limit = limit
        self.max_rows = max_rows
        self.diag = diag
        self.skip = skip
        self.counts: dict[int, int] = {}
        """per-record events seen per tcp_stream (kept or not)"""
        tables = tuple(dict.fromkeys(TABLE_OF.values()))  # (the sources registered now)
        self.rows: dict[str, int] = dict.fromkeys(tables, 0)
        """rows kept per table"""
        self.kept = 0
        """rows kept in all (the sum of :attr:`rows`): while it stays ``max_rows`` below, no
        table can reach ``max_rows``"""
        self.dropped: dict[str, int] = dict.fromkeys(tables, 0)
        """rows dropped per table (either cap), exact"""
        self.dropped_by_stream: dict[int, int] = {}
        """rows dropped per tcp_stream (either cap), for the connections that lost any"""
        self.warned: set[str] = set()
        """tables whose table.records_truncated row was written"""

    @property
    def active(self) -> bool:
        """Is any cap on?"""
        return self.limit is not None or self.max_rows is not None

    def plan(self, types: tuple[type, ...]) -> CapPlan:
        """What a list of events of these types (in this order) adds to the counts: the index
        of its first per-record event (-1: none), the rows each counted table gains (tables
        in ``skip`` are not counted), and their sum. The same for every list of these types,
        so :func:`pcaptools.pipeline` finds it once per sequence of types and hands it to
        :meth:`take` with each list."""
        table_of, skip = TABLE_OF, self.skip
        first = -1
        gains: dict[str, int] = {}
        for i, t in enumerate(types):
            table = table_of.get(t)
            if table is None:
                continue
            if first < 0:
                first = i
            if table not in skip:
                gains[table] = gains.get(table, 0) + 1
        return first, tuple(gains.items()), sum(gains.values())

    def take(self, events: list[object], first: int, gains: tuple[tuple[str, int], ...],
             n: int) -> list[object]:
        """:meth:`__call__` with the :meth:`plan` of ``events``' types (``n`` > 0): counts them
        at once when neither cap can be reached by them (the usual case, the same counts as
        ``__call__``'s loop), and goes through ``__call__`` otherwise."""
        stream: int = getattr(events[first], "tcp_stream", -1)
        seen = self.counts.get(stream, 0)
        limit, max_rows = self.limit, self.max_rows
        if (limit is None or seen + n <= limit) and (max_rows is None
                                                     or self.kept + n <= max_rows):
            rows = self.rows
            for table, k in gains:
                rows[table] += k
            self.kept += n
            self.counts[stream] = seen + n
            return events
        return self(events)

    def __call__(self, events: list[object]) -> list[object]:
        """``events`` (one observer call's, all of one connection) without the per-record
        events beyond the limits."""
        table_of = TABLE_OF
        for e in events:
            if type(e) in table_of:
                break
        else:
            return events
        stream: int = getattr(e, "tcp_stream", -1)
        seen = self.counts.get(stream, 0)
        limit, max_rows, rows, skip = self.limit, self.max_rows, self.rows, self.skip
        n = len(events)
        if (limit is None or seen + n <= limit) and (max_rows is None
                                                     or self.kept + n <= max_rows):
            # the usual case: neither cap can be reached by this call's events, all are kept
            kept = seen
            for e in events:
                table = table_of.get(type(e))
                if table is not None and table not in skip:
                    rows[table] += 1
                    seen += 1
            self.kept += seen - kept
            self.counts[stream] = seen
            return events
        out: list[object] | None = None
        for i, e in enumerate(events):
            table = table_of.get(type(e))
            if table is None or table in skip:
                if out is not None:
                    out.append(e)
                continue
            seen += 1
            if limit is not None and seen > limit:
                reason = "connection"
            elif max_rows is not None and rows[table] >= max_rows:
                reason = "table"
            else:
                rows[table] += 1
                self.kept += 1
                if out is not None:
                    out.append(e)
                continue
            if out is None:
                out = events[:i]
            self._drop(e, table, stream, reason, seen)
        self.counts[stream] = seen
        return events if out is None else out

    def _drop(self, e: object, table: str, stream: int, reason: str, seen: int) -> None:
        self.dropped[table] += 1
        self.dropped_by_stream[stream] = self.dropped_by_stream.get(stream, 0) + 1
        ts, frame = getattr(e, "ts_ns", None), getattr(e, "frame", None)
        if reason == "connection":
            if seen == (self.limit or 0) + 1:  # the first event over the limit: say so once
                self.diag.add(
                    "table.events_truncated",
                    f"more than {self.limit:,} per-record events (TLS records, HTTP/2 "
                    f"frames, SSE events, WebSocket frames/messages) on this connection: "
                    f"its later ones are not in those tables (max_events_per_connection; "
                    f"summary.extra['rows_dropped_by_connection'] counts them)",
                    ts_ns=ts, frame=frame, tcp_stream=stream,
                )
        elif table not in self.warned:
            self.warned.add(table)
            self.diag.add(
                "table.records_truncated",
                f"{table} reached {self.max_rows:,} rows (max_record_rows): this row and "
                f"every later one of that table are not kept "
                f"(summary.extra['rows_dropped'] counts them)",
                ts_ns=ts, frame=frame, tcp_stream=stream,
            )

    def summary(self) -> dict[str, object]:
        """What goes into ``Capture.summary.extra``: the exact counts of dropped rows."""
        return {
            "rows_dropped": {t: n for t, n in self.dropped.items() if n},
            "rows_dropped_by_connection": dict(sorted(self.dropped_by_stream.items())),
        }
