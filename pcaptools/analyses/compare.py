"""Two captures side by side: did HTTP/2 (or a config change, a new region...) help?

:func:`compare` is a pure function of two captures' tables and returns one row per metric
(schema :data:`COMPARISON`), in a fixed order, with the value of each capture, the
difference and which one did better. ``pcap-report A B`` puts this table at the top of its
report. Every metric is computed the same way on both sides, from the same tables, so a
difference is a difference in the traffic, not in the method.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..tables.schema import Column, TableSchema
from .latency import stream_latency

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = [
    "COMPARISON",
    "METRICS",
    "QUIC_METRICS",
    "SAME_WITHIN",
    "SSE_METRICS",
    "Metric",
    "compare",
    "compare_latency",
]

COMPARISON = TableSchema(
    name="comparison",
    grain="one row per metric: pcaptools.analyses.compare.compare(a, b), not a Capture attribute",
    key=("metric",),
    columns=(
        Column("metric", "string", None, "stable metric name, e.g. ttfb_median_ms"),
        Column("label", "string", None, "what the metric is, in words"),
        Column("unit", "string", None, "ms, count, share (0..1), ratio, bytes"),
        Column("a", "float64", None, "value for the first capture (NaN: no data)"),
        Column("b", "float64", None, "value for the second capture"),
        Column("delta", "float64", None, "b - a"),
        Column("ratio", "float64", None, "b / a (NaN when a is 0 or unknown)"),
        Column(
            "better",
            "category",
            None,
            "a, b or same (counts equal, times and ratios within 2%); NA when the metric has no "
            "better side or a value is missing",
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    label: str
    unit: str
    lower_is_better: bool | None
    """True: lower wins (times, handshakes); False: higher wins (reuse); None: neither"""
    fn: Callable[[Capture, pd.DataFrame], float]
    """(capture, its stream_latency table) -> value (NaN when unknown)"""


def _median(s: pd.Series) -> float:
    v = s.dropna().to_numpy(dtype=np.float64)
    return float(np.median(v)) if v.size else math.nan


def _download_ms(cap: Capture, lat: pd.DataFrame) -> float:
    """First packet of a connection that carried a request (its SYN), or the first request
    when the connection start is unknown, to the last response end."""
    if len(lat) == 0:
        return math.nan
    start = lat["connection_start_ts"].fillna(lat["request_ts"]).min()
    end = lat["end_ts"].max()
    if pd.isna(start) or pd.isna(end):
        return math.nan
    return float((end - start).value / 1e6)


def _body_bytes(cap: Capture) -> int:
    r, s = cap.http_requests, cap.http2_streams
    h1 = int(r["request_body_bytes"].fillna(0).sum() + r["response_body_bytes"].fillna(0).sum())
    h2 = int(s["client_data_bytes"].sum() + s["server_data_bytes"].sum())
    h3s = getattr(cap, "http3_streams", None)
    h3 = int(h3s["client_data_bytes"].sum() + h3s["server_data_bytes"].sum()) if (
        h3s is not None) else 0
    return h1 + h2 + h3


def _wire_bytes(cap: Capture) -> int:
    c = cap.connections
    return int(c["client_wire_bytes"].sum() + c["server_wire_bytes"].sum())


def _quic_wire_bytes(cap: Capture) -> int:
    """frame bytes of the QUIC connections (HTTP/3)"""
    q = getattr(cap, "quic_connections", None)
    if q is None:
        return 0
    return int(q["client_wire_bytes"].sum() + q["server_wire_bytes"].sum())


def _quic_connections(cap: Capture, lat: pd.DataFrame) -> float:
    q = getattr(cap, "quic_connections", None)
    return float(len(q)) if q is not None else 0.0


def _wire_per_body(cap: Capture, lat: pd.DataFrame) -> float:
    body = _body_bytes(cap)
    return (_wire_bytes(cap) + _quic_wire_bytes(cap)) / body if body else math.nan


def _reused_share(cap: Capture, lat: pd.DataFrame) -> float:
    known = lat["reused"].dropna()
    return float(known.astype(bool).mean()) if len(known) else math.nan


def _established(cap: Capture, lat: pd.DataFrame) -> float:
    return float(
        cap.tcp_handshakes["result"].astype("string").eq("established").fillna(False).sum()
    )


def _tokens(cap: Capture, lat: pd.DataFrame) -> float:
    return float(lat["token_events"].sum()) if len(lat) else 0.0


def _losses(cap: Capture, kind: str) -> float:
    return float((cap.tcp_losses["kind"].astype("string") == kind).fillna(False).sum())


def _lost(cap: Capture, lat: pd.DataFrame) -> float:
    c = cap.connections
    return float(c["client_lost_segments"].sum() + c["server_lost_segments"].sum())


#: the comparison rows, in order
METRICS: tuple[Metric, ...] = (
    Metric("requests", "HTTP requests", "count", None, lambda c, lat: float(len(lat))),
    Metric(
        "tcp_connections",
        "TCP connections",
        "count",
        True,
        lambda c, lat: float(len(c.connections)),
    ),
    Metric("tcp_handshakes", "TCP handshakes completed", "count", True, _established),
    Metric("quic_connections", "QUIC connections (HTTP/3)", "count", True, _quic_connections),
    Metric(
        "tls_handshakes",
        "TLS handshakes (ClientHello seen)",
        "count",
        True,
        lambda c, lat: float(c.tls_handshakes["client_hello_frame"].notna().sum()),
    ),
    Metric("reused_share", "requests on an already open connection", "share", False, _reused_share),
    Metric(
        "ttfb_median_ms",
        "time to first response byte, median",
        "ms",
        True,
        lambda c, lat: _median(lat["ttfb_ms"]),
    ),
    Metric(
        "total_median_ms",
        "request start to response end, median",
        "ms",
        True,
        lambda c, lat: _median(lat["total_ms"]),
    ),
    Metric(
        "first_request_median_ms",
        "first request on a connection, from its SYN, median",
        "ms",
        True,
        lambda c, lat: _median(
            lat.loc[lat["reused"].eq(False).fillna(False), "from_connection_start_ms"]
        ),
    ),
    Metric(
        "download_ms",
        "total download time: first SYN to last response byte",
        "ms",
        True,
        _download_ms,
    ),
    Metric(
        "ttft_median_ms",
        "time to first token (SSE), median",
        "ms",
        True,
        lambda c, lat: _median(lat["ttft_ms"]),
    ),
    Metric(
        "ttft_from_start_median_ms",
        "time to first token incl. TCP + TLS setup (from the SYN for a new connection), median",
        "ms",
        True,
        lambda c, lat: _median(lat["ttft_from_start_ms"]),
    ),
    Metric(
        "token_gap_median_ms",
        "gap between tokens, median of the streams' medians",
        "ms",
        True,
        lambda c, lat: _median(lat["token_gap_median_ms"]),
    ),
    Metric("token_events", "SSE events carrying text", "count", None, _tokens),
    Metric(
        "lost_segments",
        "segments lost and resent (tcp_losses: from any vantage point)",
        "count",
        True,
        _lost,
    ),
    Metric(
        "spurious_resends",
        "resends not needed (spurious: the first copy had arrived)",
        "count",
        True,
        lambda c, lat: _losses(c, "spurious"),
    ),
    Metric(
        "retransmitted_segments",
        "retransmissions flagged by tshark (tcp.analysis.retransmission)",
        "count",
        True,
        lambda c, lat: float(len(c.retransmissions)),
    ),
    Metric(
        "wire_bytes",
        "bytes on the wire (TCP connections, frame.len)",
        "bytes",
        True,
        lambda c, lat: float(_wire_bytes(c)),
    ),
    Metric(
        "quic_wire_bytes",
        "bytes on the wire (QUIC connections, frame.len)",
        "bytes",
        True,
        lambda c, lat: float(_quic_wire_bytes(c)),
    ),
    Metric(
        "body_bytes",
        "HTTP body bytes (requests and responses)",
        "bytes",
        None,
        lambda c, lat: float(_body_bytes(c)),
    ),
    Metric(
        "wire_per_body_byte", "bytes on the wire per HTTP body byte", "ratio", True, _wire_per_body
    ),
)

#: times and ratios closer than this (relative) are "same": run-to-run noise, not a winner
SAME_WITHIN = 0.02

#: metrics shown only when either capture has QUIC connections (HTTP/3)
QUIC_METRICS = frozenset({"quic_connections", "quic_wire_bytes"})

#: metrics shown only when either capture has streamed tokens
SSE_METRICS = frozenset(
    {"ttft_median_ms", "ttft_from_start_median_ms", "token_gap_median_ms", "token_events"}
)


def compare(a: Capture, b: Capture) -> pd.DataFrame:
    """Side-by-side metrics of two captures (schema :data:`COMPARISON`), in :data:`METRICS`
    order. The QUIC rows are left out when neither capture has a QUIC connection (HTTP/3
    requests are rows of ``stream_latency`` like HTTP/1.x and HTTP/2 ones, so an HTTP/2
    capture compares with an HTTP/3 one). The time-to-first-token rows are left out when
    neither capture has SSE events
    with text. Never raises on missing data: a value that cannot be computed is NaN."""
    return compare_latency(a, b, stream_latency(a), stream_latency(b))


def compare_latency(
    a: Capture, b: Capture, lat_a: pd.DataFrame, lat_b: pd.DataFrame
) -> pd.DataFrame:
    """:func:`compare` when the callers already have both ``stream_latency`` tables."""
    sse = (
        bool(lat_a["token_events"].sum() + lat_b["token_events"].sum())
        if len(lat_a) + len(lat_b)
        else False
    )
    quic = bool(_quic_connections(a, lat_a) + _quic_connections(b, lat_b))
    rows = []
    for m in METRICS:
        if m.name in SSE_METRICS and not sse:
            continue
        if m.name in QUIC_METRICS and not quic:
            continue
        va, vb = _value(m, a, lat_a), _value(m, b, lat_b)
        delta = vb - va
        ratio = vb / va if va and not math.isnan(va) else math.nan
        if m.lower_is_better is None or math.isnan(va) or math.isnan(vb):
            better = None
        elif math.isclose(
            va, vb, rel_tol=SAME_WITHIN if m.unit in ("ms", "ratio") else 0.0, abs_tol=1e-9
        ):
            better = "same"
        else:
            better = "a" if (va < vb) == m.lower_is_better else "b"
        rows.append((m.name, m.label, m.unit, va, vb, delta, ratio, better))
    return COMPARISON.frame(rows)


def _value(m: Metric, cap: Capture, lat: pd.DataFrame) -> float:
    try:
        v = float(m.fn(cap, lat))
    except (KeyError, ValueError, TypeError, ZeroDivisionError):  # a table without data
        return math.nan
    return v
