"""Heartbeats: pings, their pongs, and how long connections stayed silent.

The documented home of the heartbeat analyses (``from pcaptools.analyses.heartbeats import
heartbeats, heartbeat_summary``). The code lives in :mod:`pcaptools.tables.heartbeats`: the
pipeline builds ``Capture.ws_heartbeats`` with :func:`websocket_heartbeats` while loading, so
the matching sits in the tables layer, below the pipeline (see that module for the matching
rules and the outcomes).
"""

from __future__ import annotations

from ..tables.heartbeats import (
    DEFAULT_ANSWER_TIMEOUT_MS,
    HEARTBEAT_SUMMARY,
    HEARTBEATS,
    heartbeat_summary,
    heartbeats,
    http2_heartbeats,
    quic_ping_heartbeats,
    tcp_keepalive_heartbeats,
    websocket_heartbeats,
)

__all__ = [
    "DEFAULT_ANSWER_TIMEOUT_MS",
    "HEARTBEATS",
    "HEARTBEAT_SUMMARY",
    "heartbeat_summary",
    "heartbeats",
    "http2_heartbeats",
    "quic_ping_heartbeats",
    "tcp_keepalive_heartbeats",
    "websocket_heartbeats",
]
