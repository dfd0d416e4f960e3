"""Every table a :class:`~pcaptools.capture.Capture` holds, registered once, in order.

:data:`TABLES` (name -> :class:`~.schema.TableSchema`) is filled here, from one list in the
order of ``docs/tables.md`` and of ``Capture.tables``; everything else follows from it:
``pcaptools.TABLES`` / ``capture.TABLES`` (this dict), the ``Capture`` attributes (set from
it; their annotations on ``Capture`` are checked against it by a test), the empty frame of a
table that was switched off, the exports (one file per table) and ``docs/tables.md``
(``python -m pcaptools._docgen``).

A new table is one :func:`register` call in the list below (where it should appear), its
schema next to its builder in ``tables/<layer>_tables.py``, one annotation on ``Capture``
and its builder's call in the pipeline (see ``docs/adding-a-protocol.md``).
"""

from __future__ import annotations

from .coverage import COVERAGE
from .dns_tables import DNS
from .foundation import CONNECTIONS, PACKETS, TCP_EVENTS, TCP_HANDSHAKES, TCP_LOSSES, WARNINGS
from .http_tables import HTTP_TABLES
from .icmp_tables import ICMP_ERRORS, PATH_MTU
from .quic_tables import QUIC_CONNECTIONS, QUIC_PACKETS
from .schema import TableSchema
from .tls_tables import TLS_HANDSHAKES, TLS_RECORDS
from .ws_tables import WS_TABLES

__all__ = ["TABLES", "register"]

#: every table a Capture holds, by attribute name (= ``TableSchema.name``), in order
TABLES: dict[str, TableSchema] = {}


def register(*schemas: TableSchema) -> None:
    """Add tables at the end of :data:`TABLES`. A name registered twice raises ValueError."""
    for schema in schemas:
        if schema.name in TABLES:
            raise ValueError(f"table {schema.name!r} is registered twice")
        TABLES[schema.name] = schema


register(
    # tcp
    CONNECTIONS,
    TCP_HANDSHAKES,
    TCP_EVENTS,
    TCP_LOSSES,
    # tls
    TLS_HANDSHAKES,
    TLS_RECORDS,
    # http/2, http/1.x, sse (http_tables.HTTP_TABLES: http2_frames, http2_streams,
    # http2_connections, http_requests, sse_events)
    *HTTP_TABLES.values(),
    # websocket (ws_tables.WS_TABLES: ws_connections, ws_frames, ws_messages, ws_heartbeats)
    *WS_TABLES.values(),
    # dns (UDP, TCP, HTTPS)
    DNS,
    # quic (UDP)
    QUIC_CONNECTIONS,
    QUIC_PACKETS,
    # icmp
    ICMP_ERRORS,
    PATH_MTU,
    # per frame, per capture
    PACKETS,
    WARNINGS,
    COVERAGE,
)
