"""Every table a :class:`~pcaptools.capture.Capture` holds, registered once with its builder,
in order.

A table is registered by a :class:`TableSource`: the tables (:class:`~.schema.TableSchema`) one
builder produces, the builder's factory (called once per load with a :class:`BuildContext`),
the event types it consumes and, for the tables that grow with a connection's traffic, which
event type makes which table's rows. :data:`SOURCES` holds them in the order of
``docs/tables.md`` and of ``Capture.tables``; everything else follows from it:

- :data:`TABLES` (name -> schema, in that order): ``pcaptools.TABLES`` / ``capture.TABLES``, the
  ``Capture`` attributes (set from it; their annotations on ``Capture`` are checked against it
  by a test), the empty frame of a table that was switched off, the exports (one file per
  table) and ``docs/tables.md`` (``python -m pcaptools._docgen``);
- the pipeline (:mod:`pcaptools.pipeline`): it builds every source once per load, hands the
  protocol events to each source that consumes events (in registration order), gives the
  streaming export each source's drainable builder, and assembles the tables by one loop over
  the sources; a table its source leaves out (or every table of a source whose factory returns
  None, e.g. ``packets=False``) is the empty frame of its schema;
- :data:`PER_RECORD` (event type -> table): the per-connection and per-table row caps of
  :mod:`pcaptools._eventcap`.

A new table is one :func:`register_source` call (or one entry in the list of :data:`SOURCES`
below, where it should appear), its schema and builder in ``tables/<layer>_tables.py`` and one
annotation on ``Capture`` (see ``docs/adding-a-protocol.md``). Tables derived after the pass
from the other tables (``ws_heartbeats``, ``coverage``) belong to a source that does not build
them: the pipeline derives them in named steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import pandas as pd

from .._memory import trim
from ..diagnostics import Diagnostics
from ..protocols.body import HttpBody
from ..protocols.dns import DnsTracker
from ..protocols.doh import DohCollector
from ..protocols.http1 import HttpExchange, ProtocolSwitched
from ..protocols.http2 import Http2ConnectionEnded, Http2Frame, Http2StreamEnded
from ..protocols.quic import QuicTracker
from ..protocols.registry import UdpRoute
from ..protocols.sse import SseEvent
from ..protocols.tls.events import TlsRecord, TlsSession
from ..protocols.websocket import WsConnectionEnded, WsFrame, WsMessage
from ..tcp.tracker import Connection, TcpTracker
from .coverage import COVERAGE
from .dns_tables import DNS, dns_table
from .foundation import (
    CONNECTIONS,
    PACKETS,
    TCP_EVENTS,
    TCP_HANDSHAKES,
    TCP_LOSSES,
    TCP_SACK_BLOCKS,
    WARNINGS,
)
from .http3_tables import HTTP3_TABLES, http3_tables
from .http_tables import HTTP_TABLES, HttpTablesBuilder
from .icmp_tables import ICMP_ERRORS, PATH_MTU, IcmpErrorsBuilder, path_mtu_needs, path_mtu_table
from .packets import PacketsBuilder
from .quic_tables import (
    QUIC_CONNECTIONS,
    QUIC_FRAMES,
    QUIC_PACKETS,
    quic_connections_table,
    quic_frames_table,
    quic_packets_table,
)
from .realtime_tables import REALTIME_EVENTS, RealtimeEventsBuilder
from .schema import TableSchema
from .tcp_tables import events_table, losses_table, packed_rows, record_tables, warnings_table
from .tls_tables import TLS_HANDSHAKES, TLS_RECORDS, TlsTablesBuilder
from .ws_tables import WS_TABLES, WsTablesBuilder

if TYPE_CHECKING:
    from ..protocols.http3.observer import Http3Observer

__all__ = [
    "PER_RECORD",
    "SOURCES",
    "TABLES",
    "BuildContext",
    "Built",
    "TableSource",
    "TableWriter",
    "register",
    "register_source",
    "registered",
    "unregister_source",
]

_T = TypeVar("_T")

TableWriter = Callable[[str, pd.DataFrame], None]
"""``write(table, chunk)``: the next rows of a table, to the streaming export"""
ConnAddrs = Callable[[int], "tuple[int, bytes, int, bytes, int] | None"]
"""``conn_addrs(tcp_stream)``: a connection's (ip_version, client address, client port, server
address, server port), None for a stream the tracker does not know"""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildContext:
    """What a :class:`TableSource` factory gets, once per load (the pipeline builds it)."""

    diag: Diagnostics
    """the load's diagnostics sink (rows of the warnings table)"""
    tracker: TcpTracker
    """the TCP tracker of the load (connections, TCP analysis); read it at the end"""
    udp: UdpRoute | None
    """the load's UDP route with its datagram observers (``udp.observer(name, cls)``), None
    with ``payloads=False``"""
    conn_addrs: ConnAddrs
    """a connection's addresses and ports by tcp_stream"""
    payloads: bool
    """``load(payloads=...)``"""
    packets: bool
    """``load(packets=...)``"""
    tls_records: bool
    """``load(tls_records=...)``"""
    show_secrets: bool
    """``load(show_secrets=...)``"""
    max_packet_rows: int | None
    """``load(max_packet_rows=...)``, None while streaming (``out=``)"""
    streaming: bool
    """the rows are handed to the streaming export while reading (``load(out=...)``)"""


@dataclass(slots=True, kw_only=True)
class Built:
    """One source's builder for one load, as its factory returns it."""

    frames: Callable[[], Mapping[str, pd.DataFrame]]
    """the source's tables at the end of the pass, by name (called once, in registration
    order; a table left out is the empty frame of its schema)"""
    add_all: Callable[[list[object]], None] | None = None
    """takes every list of protocol events (one observer call's), or None: no events"""
    drain: object = None
    """what the streaming export drains while reading (a
    :class:`~pcaptools.tables.schema.Drainable`, or the ``TcpTracker``), None: nothing"""
    builder: object = None
    """the builder itself, for a step of the pipeline that feeds it directly (the frame loop
    feeds the ICMP and packets builders): :meth:`get`"""
    write_frames: Callable[[TableWriter], Mapping[str, pd.DataFrame]] | None = None
    """what the streaming export calls instead of :attr:`frames`, or None (it calls
    ``frames``): the same tables, but those too big to be whole in memory at once (one row
    per connection) are handed to the writer a chunk at a time and left out of the mapping"""

    def get(self, cls: type[_T]) -> _T:
        """:attr:`builder`, checked to be a ``cls``."""
        b = self.builder
        if not isinstance(b, cls):
            raise TypeError(f"builder {type(b).__name__} is not a {cls.__name__}")
        return b


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSource:
    """The tables one builder produces, registered together, and how to build them."""

    name: str
    """the source's name (``SOURCES`` key; the pipeline finds a builder by it)"""
    tables: tuple[TableSchema, ...]
    """the tables it produces, in their order in ``Capture.tables`` and ``docs/tables.md``"""
    build: Callable[[BuildContext], Built | None]
    """called once per load; None: the source is off for this load (its tables are empty)"""
    consumes: tuple[type, ...] = ()
    """the event types its ``add_all`` keeps (the others it ignores)"""
    per_record: Mapping[type, str] = field(default_factory=dict)
    """event type -> table, for the tables with one row per record, frame or message: they
    get the per-connection and per-table row caps (:mod:`pcaptools._eventcap`)"""


#: every table a Capture holds, by attribute name (= ``TableSchema.name``), in order
TABLES: dict[str, TableSchema] = {}

#: every table source, by name, in registration order
SOURCES: dict[str, TableSource] = {}

#: per-record event type -> its table (of every source, in registration order)
PER_RECORD: dict[type, str] = {}


def register(*schemas: TableSchema) -> None:
    """Add tables at the end of :data:`TABLES` (prefer :func:`register_source`, which
    registers the tables with their builder). A name registered twice raises ValueError."""
    for schema in schemas:
        if schema.name in TABLES:
            raise ValueError(f"table {schema.name!r} is registered twice")
    for schema in schemas:
        TABLES[schema.name] = schema


def register_source(source: TableSource) -> None:
    """Add a source and its tables at the end of :data:`SOURCES` and :data:`TABLES` (and its
    per-record event types to :data:`PER_RECORD`). A source or table name registered twice,
    or a per-record table not among the source's tables, raises ValueError."""
    if source.name in SOURCES:
        raise ValueError(f"table source {source.name!r} is registered twice")
    names = {s.name for s in source.tables}
    for etype, table in source.per_record.items():
        if table not in names:
            raise ValueError(f"per-record table {table!r} of {source.name!r} is not one of "
                             "its tables")
        if etype in PER_RECORD:
            raise ValueError(f"per-record event {etype.__name__} is registered twice")
    register(*source.tables)
    SOURCES[source.name] = source
    PER_RECORD.update(source.per_record)


def unregister_source(name: str) -> TableSource:
    """Remove a source and its tables (for tests that register a toy one); returns it."""
    source = SOURCES.pop(name)
    for schema in source.tables:
        del TABLES[schema.name]
    for etype in source.per_record:
        del PER_RECORD[etype]
    return source


@contextmanager
def registered(source: TableSource) -> Iterator[TableSource]:
    """``with registered(src):`` the source is registered inside the block only."""
    register_source(source)
    try:
        yield source
    finally:
        unregister_source(source.name)


# ---------------------------------------------------------------- the built-in sources


def _tcp(ctx: BuildContext) -> Built:
    """(connections and tcp_handshakes drop the tracker's records as they are built, but for
    those the icmp source's path_mtu reads after: icmp_tables.path_mtu_needs)"""
    t = ctx.tracker

    def keep(conn: Connection) -> bool:
        return path_mtu_needs(conn, t)

    t.row_maker = lambda conn: packed_rows(conn, keep)

    def frames(write: TableWriter | None = None) -> dict[str, pd.DataFrame]:
        conns, handshakes = record_tables(t, keep=keep, write=write)
        t.drop_cold()  # (its rows are in the tables: nothing reads the cold SYNs after)
        trim()
        out = {"tcp_events": events_table(t), "tcp_losses": losses_table(t)}
        if write is None:
            out |= {"connections": conns, "tcp_handshakes": handshakes}
        return out

    return Built(frames=frames, drain=t, write_frames=frames)


def _tls(ctx: BuildContext) -> Built:
    b = TlsTablesBuilder(records=ctx.tls_records)
    return Built(frames=lambda: {"tls_handshakes": b.handshakes(), "tls_records": b.records()},
                 add_all=b.add, drain=b, builder=b)


def _http(ctx: BuildContext) -> Built:
    b = HttpTablesBuilder()
    return Built(frames=b.tables, add_all=b.add_all, drain=b, builder=b)


def _ws(ctx: BuildContext) -> Built:
    """(ws_heartbeats is derived from ws_frames after the pass: pipeline._finish_tables, or
    the streaming export)"""
    b = WsTablesBuilder()
    return Built(frames=b.tables, add_all=b.add_all, drain=b, builder=b)


def _realtime(ctx: BuildContext) -> Built:
    """(realtime_events: the JSON text messages of the WebSocket observers)"""
    b = RealtimeEventsBuilder(ctx.diag, show_secrets=ctx.show_secrets)
    return Built(frames=lambda: {"realtime_events": b.frame()}, add_all=b.add_all, drain=b,
                 builder=b)


# the ``dns`` datagram observer of the UDP route (DNS over UDP and TCP report to it) and the
# DoH collector feeding it from HTTP events (quoted in docs/adding-a-protocol.md)
def _dns(ctx: BuildContext) -> Built:
    tracker = ctx.udp.observer("dns", DnsTracker) if ctx.udp is not None else None
    if tracker is None:
        return Built(frames=lambda: {"dns": dns_table(None)})
    doh = DohCollector(tracker, ctx.diag, ctx.conn_addrs)
    return Built(frames=lambda: {"dns": dns_table(tracker)}, add_all=doh.add_all,
                 builder=tracker)


def _quic(ctx: BuildContext) -> Built:
    """the ``quic`` datagram observer of the UDP route (fed by worker 0 only, like all UDP)"""
    tracker = ctx.udp.observer("quic", QuicTracker) if ctx.udp is not None else None
    return Built(frames=lambda: {"quic_connections": quic_connections_table(tracker),
                                 "quic_packets": quic_packets_table(tracker),
                                 "quic_frames": quic_frames_table(tracker)},
                 builder=tracker)


def http3_observers(tracker: QuicTracker | None) -> list[Http3Observer]:
    """The HTTP/3 observers of a load's QUIC connections (those whose ALPN is ``h3`` and
    whose streams were decrypted), in connection order."""
    out: list[Http3Observer] = []
    if tracker is None or not tracker.connections:
        return out
    from ..protocols.http3.observer import Http3Observer  # (pylsqpack: only with QUIC)

    for conn in tracker.connections:
        obs = conn.assembler.observer if conn.assembler is not None else None
        if isinstance(obs, Http3Observer):
            out.append(obs)
    return out


def _http3(ctx: BuildContext) -> Built:
    """HTTP/3: the application observers the ``quic`` datagram observer created (worker 0)"""
    tracker = ctx.udp.observer("quic", QuicTracker) if ctx.udp is not None else None
    return Built(frames=lambda: http3_tables(http3_observers(tracker)))


def _icmp(ctx: BuildContext) -> Built:
    """(fed by the frame loop: ``Built.get(IcmpErrorsBuilder).add(pkt, analysis)``)"""
    b = IcmpErrorsBuilder(ctx.diag)
    t = ctx.tracker
    return Built(frames=lambda: {"icmp_errors": b.frame(), "path_mtu": path_mtu_table(t, b)},
                 builder=b)


def _packets(ctx: BuildContext) -> Built | None:
    """(fed by the frame loop: ``PacketsBuilder.add_capped``)"""
    if not ctx.packets:
        return None
    b = PacketsBuilder(max_rows=ctx.max_packet_rows, diag=ctx.diag)
    return Built(frames=lambda: {"packets": b.frame(), "tcp_sack_blocks": b.sack_frame()},
                 drain=b, builder=b)


def _warnings(ctx: BuildContext) -> Built:
    """(built last but one: every other table's rows are final; coverage is derived after)"""
    diag = ctx.diag
    return Built(frames=lambda: {"warnings": warnings_table(diag)})


def _derived(ctx: BuildContext) -> None:
    """coverage: derived from the other tables by the pipeline (``_finish_tables``)"""
    return None


for _source in (
    TableSource(name="tcp", tables=(CONNECTIONS, TCP_HANDSHAKES, TCP_EVENTS, TCP_LOSSES),
                build=_tcp),
    TableSource(name="tls", tables=(TLS_HANDSHAKES, TLS_RECORDS), build=_tls,
                consumes=(TlsRecord, TlsSession), per_record={TlsRecord: "tls_records"}),
    # http/2, http/1.x, sse (http2_frames, http2_streams, http2_connections, http_requests,
    # sse_events)
    TableSource(name="http", tables=tuple(HTTP_TABLES.values()), build=_http,
                consumes=(Http2Frame, Http2StreamEnded, Http2ConnectionEnded, HttpExchange,
                          SseEvent, ProtocolSwitched),
                per_record={Http2Frame: "http2_frames", SseEvent: "sse_events"}),
    # websocket (ws_connections, ws_frames, ws_messages, ws_heartbeats)
    TableSource(name="websocket", tables=tuple(WS_TABLES.values()), build=_ws,
                consumes=(WsFrame, WsMessage, WsConnectionEnded),
                per_record={WsFrame: "ws_frames", WsMessage: "ws_messages"}),
    # realtime API events carried as WebSocket JSON messages (rows capped with ws_messages)
    TableSource(name="realtime", tables=(REALTIME_EVENTS,), build=_realtime,
                consumes=(WsMessage,)),
    # dns (UDP, TCP, HTTPS)
    TableSource(name="dns", tables=(DNS,), build=_dns,
                consumes=(HttpBody, HttpExchange, Http2StreamEnded)),
    TableSource(name="quic", tables=(QUIC_CONNECTIONS, QUIC_PACKETS, QUIC_FRAMES),
                build=_quic),
    # http/3 over QUIC (http3_connections, http3_frames, http3_streams, http3_pushes,
    # http3_sse_events)
    TableSource(name="http3", tables=tuple(HTTP3_TABLES.values()), build=_http3),
    # icmp
    TableSource(name="icmp", tables=(ICMP_ERRORS, PATH_MTU), build=_icmp),
    # per frame, per capture
    TableSource(name="packets", tables=(PACKETS, TCP_SACK_BLOCKS), build=_packets),
    TableSource(name="warnings", tables=(WARNINGS,), build=_warnings),
    TableSource(name="coverage", tables=(COVERAGE,), build=_derived),
):
    register_source(_source)
del _source
