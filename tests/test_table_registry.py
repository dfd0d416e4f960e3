"""Tables are registered once (pcaptools.tables.registry): TABLES, the Capture attributes and
their annotations, and docs/tables.md follow from the registrations."""

from __future__ import annotations

import typing

import pandas as pd
import pytest

import pcaptools
from pcaptools import _docgen, capture
from pcaptools.tables import registry
from pcaptools.tables.foundation import CONNECTIONS
from pcaptools.tables.schema import TableSchema

#: the order of docs/tables.md and Capture.tables before the registry (#14), with the QUIC
#: tables (#15) after dns, then the HTTP/3 ones (#15); realtime_events (#17) after
#: the WebSocket tables
ORDER = [
    "connections", "tcp_handshakes", "tcp_events", "tcp_losses", "tls_handshakes",
    "tls_records", "http2_frames", "http2_streams", "http2_connections", "http_requests",
    "sse_events", "ws_connections", "ws_frames", "ws_messages", "ws_heartbeats",
    "realtime_events", "dns",
    "quic_connections", "quic_packets", "quic_frames", "http3_connections", "http3_frames",
    "http3_streams", "http3_pushes", "http3_sse_events",
    "icmp_errors", "path_mtu", "packets", "tcp_sack_blocks", "warnings", "coverage",
]


def test_tables_come_from_the_registry_in_order() -> None:
    assert capture.TABLES is registry.TABLES and pcaptools.TABLES is registry.TABLES
    assert list(registry.TABLES) == ORDER
    assert all(name == schema.name for name, schema in registry.TABLES.items())


def test_capture_annotations_match_the_registry() -> None:
    hints = typing.get_type_hints(pcaptools.Capture)
    frames = [n for n, t in hints.items() if t is pd.DataFrame]
    assert sorted(frames) == sorted(registry.TABLES) and len(frames) == len(registry.TABLES)


def test_an_empty_capture_has_every_registered_table() -> None:
    cap = pcaptools.Capture(capture.CaptureSummary("x.pcap", 0, "pcap", None, []), {})
    for name, schema in registry.TABLES.items():
        assert list(getattr(cap, name).columns) == schema.names


def test_docs_list_the_registered_tables_in_order() -> None:
    md = _docgen.tables_markdown()
    positions = [md.index(f"## `{name}`") for name in ORDER]
    assert positions == sorted(positions)


def test_a_table_is_registered_once() -> None:
    with pytest.raises(ValueError, match="table 'connections' is registered twice"):
        registry.register(CONNECTIONS)
    assert isinstance(registry.TABLES["connections"], TableSchema)
    assert list(registry.TABLES) == ORDER
