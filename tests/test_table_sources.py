"""A table is registered with its builder once (pcaptools.tables.registry.TableSource): the
pipeline builds every source, hands the events to the ones that consume events, and assembles
the tables in registration order; the row caps (_eventcap.TABLE_OF) follow the registrations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools import _eventcap, limits
from pcaptools.protocols.doh import DohCollector
from pcaptools.protocols.http1 import HttpExchange
from pcaptools.protocols.http2 import Http2Frame
from pcaptools.protocols.sse import SseEvent
from pcaptools.protocols.tls.events import TlsRecord
from pcaptools.protocols.websocket import WsFrame, WsMessage
from pcaptools.tables import registry
from pcaptools.tables.http_tables import HttpTablesBuilder
from pcaptools.tables.registry import BuildContext, Built, TableSource
from pcaptools.tables.schema import Column, TableSchema
from pcaptools.tables.ws_tables import WsTablesBuilder

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
KEEPALIVE = CAPTURES / "http1-keepalive.pcap"  # 40 exchanges on tcp_stream 0, 1 on 1 and 2

ORDER = list(registry.TABLES)

TOY = TableSchema(
    name="toy_exchanges",
    grain="one row per HTTP/1.x exchange (a test table)",
    key=("tcp_stream", "request_index"),
    columns=(
        Column("tcp_stream", "int64", None, "connection"),
        Column("request_index", "int64", None, "exchange on the connection"),
        Column("status", "Int64", None, "final status"),
    ),
)


class _ToyBuilder:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int | None]] = []

    def add_all(self, events: list[object]) -> None:
        for e in events:
            if type(e) is HttpExchange:
                resp = e.response  # (status 0: no status line seen, NA as in http_requests)
                status = resp.status if resp is not None and resp.status else None
                self.rows.append((e.tcp_stream, e.request_index, status))


def _toy(ctx: BuildContext) -> Built | None:
    if not ctx.payloads:
        return None
    b = _ToyBuilder()
    return Built(frames=lambda: {"toy_exchanges": TOY.frame(b.rows)}, add_all=b.add_all,
                 builder=b)


@pytest.fixture
def toy() -> Iterator[TableSource]:
    with registry.registered(TableSource(name="toy", tables=(TOY,), build=_toy,
                                         consumes=(HttpExchange,))) as src:
        yield src
    assert list(registry.TABLES) == ORDER and "toy" not in registry.SOURCES


def test_a_registered_source_gets_its_table_into_load(toy: TableSource) -> None:
    assert list(registry.TABLES)[-1] == "toy_exchanges" and registry.SOURCES["toy"] is toy
    cap = pcaptools.load(KEEPALIVE)
    assert list(cap.tables) == [*ORDER, "toy_exchanges"]
    t = cap.toy_exchanges  # type: ignore[attr-defined]
    assert t is cap.tables["toy_exchanges"]
    assert len(t) == 42
    assert t["tcp_stream"].value_counts().to_dict() == {0: 40, 1: 1, 2: 1}
    assert t.loc[t["tcp_stream"] == 0, "request_index"].tolist() == list(range(1, 41))
    assert t.loc[:3, "status"].tolist() == [200, 200, 404, 200]
    assert t["status"].isna().sum() == 2  # the exchanges of tcp_stream 1 and 2: no response
    req = cap.http_requests  # the same exchanges, by the built-in source
    pd.testing.assert_frame_equal(
        t.sort_values(["tcp_stream", "request_index"]).reset_index(drop=True),
        req[["tcp_stream", "request_index", "status"]]
        .sort_values(["tcp_stream", "request_index"]).reset_index(drop=True),
        check_dtype=False,
    )


def test_a_source_that_is_off_gives_an_empty_table_with_its_columns(toy: TableSource) -> None:
    cap = pcaptools.load(KEEPALIVE, payloads=False)
    t = cap.toy_exchanges  # type: ignore[attr-defined]
    assert len(t) == 0 and list(t.columns) == ["tcp_stream", "request_index", "status"]
    assert str(t["status"].dtype) == "Int64"
    assert len(cap.connections) == 3  # the other tables are still built


def test_a_registered_source_is_streamed_to_parquet(toy: TableSource, tmp_path: Path) -> None:
    out = pcaptools.load(KEEPALIVE, out=tmp_path / "o")
    path = tmp_path / "o" / "toy_exchanges.parquet"
    assert path.exists()
    t = pd.read_parquet(path)
    assert len(t) == 42 and int(t["request_index"].max()) == 40
    assert list(out.paths)[-2:] == ["toy_exchanges", "captures"]  # type: ignore[attr-defined]


def test_builtin_sources_in_table_order() -> None:
    assert list(registry.SOURCES) == ["tcp", "tls", "http", "websocket", "realtime", "dns",
                                      "quic", "http3", "icmp", "packets", "warnings", "coverage"]
    tables = [s.name for src in registry.SOURCES.values() for s in src.tables]
    assert tables == list(registry.TABLES)


def test_consumed_event_types_are_what_the_builders_handle() -> None:
    src = registry.SOURCES
    assert set(src["http"].consumes) == set(HttpTablesBuilder()._handlers)
    assert set(src["websocket"].consumes) == set(WsTablesBuilder()._handlers)
    doh = DohCollector.__new__(DohCollector)
    DohCollector.__init__(doh, None, None, lambda s: None)  # type: ignore[arg-type]
    assert set(src["dns"].consumes) == set(doh._handlers)
    for s in src.values():  # a per-record event is one the source consumes
        assert set(s.per_record) <= set(s.consumes)


def test_row_caps_follow_the_registrations() -> None:
    assert _eventcap.TABLE_OF is registry.PER_RECORD
    assert {TlsRecord: "tls_records", Http2Frame: "http2_frames",
                                  SseEvent: "sse_events", WsFrame: "ws_frames",
                                  WsMessage: "ws_messages"} == _eventcap.TABLE_OF
    assert _eventcap.PER_RECORD_TABLES == ("tls_records", "http2_frames", "sse_events",
                                           "ws_frames", "ws_messages")
    # limits.py (base layer: it cannot import the registry) names the same tables
    text = {lim.name: lim.meaning for lim in limits.LIMITS}["max_record_rows"]
    assert "(" + ", ".join(_eventcap.PER_RECORD_TABLES) + ")" in text


def test_registering_twice_or_a_foreign_per_record_table_raises() -> None:
    with pytest.raises(ValueError, match="table source 'tcp' is registered twice"):
        registry.register_source(registry.SOURCES["tcp"])
    with pytest.raises(ValueError, match="table 'connections' is registered twice"):
        registry.register_source(TableSource(name="x", tables=(registry.TABLES["connections"],),
                                             build=lambda ctx: None))
    with pytest.raises(ValueError, match="per-record table 'tls_records' of 'y'"):
        registry.register_source(TableSource(name="y", tables=(TOY,), build=lambda ctx: None,
                                             per_record={HttpExchange: "tls_records"}))
    assert list(registry.TABLES) == ORDER and list(registry.SOURCES)[-1] == "coverage"
