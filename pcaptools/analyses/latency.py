"""Per-request latency, from the DNS lookup to the last streamed token.

:func:`stream_latency` is a pure function of a capture's tables (``http_requests``,
``http2_streams``, ``http3_streams``, ``sse_events``, ``http3_sse_events``, ``connections``,
``quic_connections``, ``tcp_handshakes``, ``tls_handshakes``, ``http2_connections``, ``dns``):
one row per HTTP request, HTTP/1.x exchange or HTTP/2 or HTTP/3 stream,
with the phases a browser's network panel shows (DNS, TCP connect, TLS, waiting, download)
and, for streamed responses (server-sent events), the time to the first token and the
cadence of the tokens after it. Its columns are documented by :data:`STREAM_LATENCY`
(``docs/tables.md``).

How the phases are attributed:

- **reused**: a request that is not the first on its connection (HTTP/1.x
  ``http_requests.position`` > 1, or not the first exchange seen on a connection whose start
  was not captured; HTTP/2: not the first stream opened, by request time, and every stream
  of an h2c connection upgraded from HTTP/1.1). NA for the first request seen on a
  connection that started before the capture. A reused request paid nothing
  for DNS, TCP or TLS: its ``dns_ms``, ``connect_ms`` and ``tls_ms`` are 0.0. NaN means
  *unknown* (the capture started after the connection did, or no lookup was captured).
- **dns_ms** of a connection's first request: the lookup of the request's host (``Host`` /
  ``:authority`` without the port) by the connection's client (or through a loopback stub
  resolver) whose response arrived last before the connection's first packet. Queries for the
  same name that were outstanding at the same time (A and AAAA sent together, a stub resolver
  and its upstream query) form one lookup, from the first query to the last response.
  A lookup counts for the first connection that follows it only: later connections reused
  the cached answer and get NaN. A host that is an IP address needs no lookup: 0.0.
  Every ``dns`` row counts, whatever its ``transport`` (UDP, TCP, DNS over HTTPS); a TCP
  query that retried a truncated UDP answer (``dns.retry_of_frame``) starts its lookup at
  the UDP query.
- **connect_ms**: tshark's ``tcp.analysis.initial_rtt`` of the connection (first SYN to the
  ACK that completes the handshake). **tls_ms**: ``tls_handshakes.handshake_ms`` of the
  connection's first TLS session (ClientHello to the client's Finished); 0.0 on cleartext.
- **ttfb_ms**: first response byte minus the time the request was completely sent
  (the ``ttfb_ms`` of ``http_requests`` / ``http2_streams``); NaN for an HTTP/1.x row that is
  not ``paired`` (``http_requests.unpaired_reason`` says why), whose ``response_start_ts``
  is NA. **ttft_ms**: the first SSE
  event carrying non-empty delta text (``sse_events.delta_text``: OpenAI, Anthropic...)
  minus the same request time.
- **total_ms**: end of the response minus the first byte of the request, NaN when the
  response did not end in the capture. **from_connection_start_ms** adds what the first
  request on a connection waited for the connection: response end minus the connection's
  first packet (its SYN), so it includes TCP connect and TLS; **from_dns_start_ms** also
  includes the lookup. For reused requests both equal ``total_ms``.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..tables.schema import TS_DTYPE, Column, TableSchema

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = ["STREAM_LATENCY", "stream_latency"]

STREAM_LATENCY = TableSchema(
    name="stream_latency",
    grain="one row per HTTP request (HTTP/1.x exchange, HTTP/2 or HTTP/3 stream): "
    "pcaptools.analyses.latency.stream_latency(cap), not a Capture attribute",
    key=("tcp_stream", "quic_connection", "request_index", "stream_id"),
    columns=(
        Column("tcp_stream", "Int64", None,
               "Wireshark tcp.stream of the connection; NA for HTTP/3 (QUIC)"),
        Column("quic_connection", "Int64", None,
               "HTTP/3: quic_connections.quic_connection; NA over TCP"),
        Column("protocol", "category", None, "HTTP/1.0, HTTP/1.1, HTTP/2 or HTTP/3"),
        Column(
            "request_index", "Int64", None, "HTTP/1.x: http_requests.request_index; NA for HTTP/2"
        ),
        Column("stream_id", "Int64", None,
               "HTTP/2: http2_streams.stream_id; HTTP/3: http3_streams.stream_id (the QUIC "
               "stream id); NA for HTTP/1.x"),
        Column("method", "string", None, "request method"),
        Column("host", "string", None, "Host header / :authority"),
        Column("path", "string", None, "request target / :path"),
        Column("status", "Int64", None, "final response status"),
        Column("content_type", "string", None, "response content type"),
        Column("tls", "bool", None,
               "the connection carries TLS (it has a tls_handshakes row; HTTP/3: always)"),
        Column(
            "position",
            "Int64",
            None,
            "1-based order of the request on its connection; NA when earlier requests may be "
            "missing",
        ),
        Column(
            "reused",
            "boolean",
            None,
            "not the first request on its connection; NA when unknown (capture started "
            "mid-connection)",
        ),
        Column(
            "connection_start_ts",
            TS_DTYPE,
            None,
            "first packet of the connection (its SYN when client_inferred is False; HTTP/3: "
            "the client's first Initial when quic_connections.start_seen)",
        ),
        Column(
            "dns_start_ts",
            TS_DTYPE,
            None,
            "first query of the lookup attributed to this request (first requests only)",
        ),
        Column("dns_query_frame", "Int64", None, "frame of that query (dns.query_frame)"),
        Column(
            "dns_ms",
            "float64",
            "ms",
            "lookup time: first query to last response of the lookup; 0.0 when reused or the host "
            "is an IP address; NaN when no lookup was captured (cached, or before the capture)",
        ),
        Column(
            "connect_ms",
            "float64",
            "ms",
            "TCP handshake (tshark tcp.analysis.initial_rtt); 0.0 when reused; NaN when not "
            "captured, and for HTTP/3 (QUIC has no separate transport handshake)",
        ),
        Column(
            "tls_start_ts",
            TS_DTYPE,
            None,
            "ClientHello of the connection's first TLS session (first requests only; HTTP/3: "
            "the client's first Initial)",
        ),
        Column(
            "tls_ms",
            "float64",
            "ms",
            "TLS handshake (ClientHello to client Finished); 0.0 when reused or cleartext; NaN "
            "when not captured. HTTP/3: the QUIC handshake, quic_connections.handshake_ms "
            "(first Initial to HANDSHAKE_DONE at the capture point)",
        ),
        Column(
            "request_frame",
            "Int64",
            None,
            "packet that completed the request (HTTP/2: its header block)",
        ),
        Column(
            "request_ts",
            TS_DTYPE,
            None,
            "first byte of the request (HTTP/2: the frame completing its headers)",
        ),
        Column(
            "request_sent_ts",
            TS_DTYPE,
            None,
            "request completely sent (END_STREAM / last body byte)",
        ),
        Column(
            "response_frame",
            "Int64",
            None,
            "HTTP/1.x: packet completing the response; HTTP/2: the response HEADERS",
        ),
        Column(
            "response_start_ts",
            TS_DTYPE,
            None,
            "first byte of the response (HTTP/2: response headers)",
        ),
        Column("first_token_ts", TS_DTYPE, None, "first SSE event with non-empty delta text"),
        Column(
            "end_ts",
            TS_DTYPE,
            None,
            "response complete (HTTP/2: END_STREAM, RST_STREAM or the connection's end; HTTP/3: "
            "the server's FIN or a RESET_STREAM); NaT when it did not end in the capture",
        ),
        Column("ttfb_ms", "float64", "ms", "response_start_ts - request_sent_ts"),
        Column("first_event_ms", "float64", "ms", "first SSE event (any) - request_sent_ts"),
        Column("ttft_ms", "float64", "ms", "first_token_ts - request_sent_ts: time to first token"),
        Column(
            "ttft_from_start_ms",
            "float64",
            "ms",
            "time to first token as the client waited for it: from the connection's first packet "
            "(SYN) for the first request on a connection (TCP connect and TLS included, DNS not), "
            "from request_ts for a reused one",
        ),
        Column("sse_events", "int64", "events", "server-sent events in the response"),
        Column(
            "token_events",
            "int64",
            "events",
            "SSE events with non-empty delta text (a chunk may hold several tokens)",
        ),
        Column(
            "token_gap_median_ms", "float64", "ms", "median time between consecutive token events"
        ),
        Column(
            "token_gap_p95_ms",
            "float64",
            "ms",
            "95th percentile of those gaps (linear interpolation)",
        ),
        Column("token_gap_max_ms", "float64", "ms", "longest gap between token events (a stall)"),
        Column("total_ms", "float64", "ms", "end_ts - request_ts"),
        Column(
            "from_connection_start_ms",
            "float64",
            "ms",
            "first request on a connection: end_ts - connection_start_ts (TCP connect and TLS "
            "included); reused: total_ms",
        ),
        Column(
            "from_dns_start_ms",
            "float64",
            "ms",
            "first request: end_ts - dns_start_ts (DNS, connect and TLS included; no lookup "
            "needed for an IP address: from_connection_start_ms); reused: total_ms",
        ),
        Column(
            "complete",
            "bool",
            None,
            "the response ended normally (HTTP/1.x complete, HTTP/2 END_STREAM, HTTP/3 FIN)",
        ),
        Column(
            "end_reason", "category", None,
            "http_requests.end_reason / http2_streams.end_reason / http3_streams.end_reason"
        ),
        Column(
            "wireshark_filter",
            "string",
            None,
            "display filter for the request's packets, e.g. tcp.stream eq 3 && http2.streamid eq "
            "5, quic.connection.number eq 0 && quic.stream.stream_id eq 4",
        ),
    ),
)

_LOOPBACK = ("127.", "::1")
_H2_UNENDED = ("open_at_eof", "idle", "evicted")


def stream_latency(cap: Capture) -> pd.DataFrame:
    """One row per HTTP request of ``cap`` (schema :data:`STREAM_LATENCY`), ordered by request
    time, then tcp.stream (then QUIC connection). Empty (with all columns) when the capture
    holds no HTTP request; missing facts are NA/NaN, never an exception."""
    h1 = _h1_rows(cap.http_requests)
    h2 = _h2_rows(cap.http2_streams, cap.http2_connections)
    quic = _table(cap, "quic_connections")
    h3 = _h3_rows(_table(cap, "http3_streams"), quic)
    parts = [p for p in (h1, h2, h3) if len(p)]
    if not parts:
        return STREAM_LATENCY.frame([])
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)

    n = len(df)
    stream = _ints(df["tcp_stream"])
    qconn = _ints(df["quic_connection"])
    is_h3 = qconn >= 0
    conn = cap.connections.set_index("tcp_stream")
    conn_start = _lookup_ns(conn["first_ts"], stream)
    inferred = _lookup(conn["client_inferred"], stream, True).astype(bool)
    clients = np.array([str(c) for c in _lookup(conn["client_addr"].astype("string"), stream,
                                                 "")], dtype=object)
    if is_h3.any():
        q = quic.set_index("quic_connection") if len(quic) else None
        if q is not None:
            q_start = _lookup_ns(q["first_ts"], qconn)
            q_seen = _lookup(q["start_seen"], qconn, False).astype(bool)
            q_client = np.array([str(c) for c in _lookup(q["client_addr"].astype("string"),
                                                          qconn, "")], dtype=object)
            conn_start = np.where(is_h3, q_start, conn_start)
            inferred = np.where(is_h3, ~q_seen, inferred)
            clients = np.where(is_h3, q_client, clients)
            q_hs = (_lookup(q["handshake_ms"], qconn, np.nan).astype(np.float64)
                    if "handshake_ms" in q.columns else np.full(n, np.nan))
        else:
            conn_start = np.where(is_h3, _NA, conn_start)
            inferred = np.where(is_h3, True, inferred)
            q_hs = np.full(n, np.nan)
    hs = cap.tcp_handshakes
    est = hs[hs["result"].astype("string").eq("established").fillna(False)].set_index("tcp_stream")
    irtt = _lookup(est["irtt_ms"], stream, np.nan).astype(np.float64)
    tls = cap.tls_handshakes
    tls0 = tls[tls["session"] == 0].set_index("tcp_stream")
    has_tls = np.isin(stream, tls["tcp_stream"].to_numpy(np.int64)) | is_h3
    tls_ms = _lookup(tls0["handshake_ms"], stream, np.nan).astype(np.float64)
    tls_start = _lookup_ns(tls0["client_hello_ts"], stream)
    if is_h3.any():  # QUIC: the handshake is TLS's, from the client's first Initial
        tls_ms = np.where(is_h3, q_hs, tls_ms)
        tls_start = np.where(is_h3 & ~inferred, conn_start, np.where(is_h3, _NA, tls_start))

    reused = df["reused"].to_numpy(dtype=object)
    is_reused = np.array([r is True for r in reused])
    is_first = np.array([r is False for r in reused])
    connect = np.where(is_reused, 0.0, np.where(is_first, irtt, np.nan))
    tls_col = np.where(is_reused | (is_first & ~has_tls), 0.0, np.where(is_first, tls_ms, np.nan))

    # DNS: first requests only
    dns_start = np.full(n, _NA, np.int64)
    dns_frame: list[Any] = [None] * n
    dns_ms = np.where(is_reused, 0.0, np.nan)
    hosts = df["host"].astype(object).to_numpy()
    lookups = _dns_lookups(cap, stream, is_first, hosts, clients, conn_start)
    for i, found in lookups.items():
        if found is None:
            dns_ms[i] = 0.0  # an IP address: nothing to look up
        else:
            lo, hi, frame = found
            dns_start[i], dns_frame[i], dns_ms[i] = lo, frame, (hi - lo) / 1e6

    # SSE
    sse = _sse_stats(cap.sse_events, _table(cap, "http3_sse_events"), df, stream, qconn)

    req = _ns(df["request_ts"])
    sent = _ns(df["request_sent_ts"])
    resp = _ns(df["response_start_ts"])
    end = _ns(df["end_ts"])
    first_tok = sse["first_token_ts"]
    total = _diff_ms(end, req)
    from_conn = np.where(
        is_reused,
        total,
        np.where(is_first & ~inferred, _diff_ms(end, conn_start), np.nan),
    )
    ttft_from_start = np.where(
        is_reused,
        _diff_ms(first_tok, req),
        np.where(is_first & ~inferred, _diff_ms(first_tok, conn_start), np.nan),
    )
    ip_literal = np.array([_is_ip(h) for h in hosts], dtype=bool)
    from_dns = np.where(
        is_reused,
        total,
        np.where(
            is_first & (dns_start != _NA),
            _diff_ms(end, dns_start),
            np.where(is_first & ip_literal, from_conn, np.nan),
        ),
    )
    out = {
        "tcp_stream": pd.array([None if h else int(v) for h, v in zip(is_h3, stream,
                                                                     strict=True)],
                               dtype="Int64"),
        "quic_connection": pd.array([int(v) if h else None for h, v in zip(is_h3, qconn,
                                                                          strict=True)],
                                    dtype="Int64"),
        "protocol": df["protocol"].to_numpy(dtype=object),
        "request_index": df["request_index"].to_numpy(dtype=object),
        "stream_id": df["stream_id"].to_numpy(dtype=object),
        "method": df["method"].to_numpy(dtype=object),
        "host": df["host"].to_numpy(dtype=object),
        "path": df["path"].to_numpy(dtype=object),
        "status": df["status"].to_numpy(dtype=object),
        "content_type": df["content_type"].to_numpy(dtype=object),
        "tls": has_tls,
        "position": df["position"].to_numpy(dtype=object),
        "reused": reused,
        "connection_start_ts": _ts_values(conn_start),
        "dns_start_ts": _ts_values(dns_start),
        "dns_query_frame": dns_frame,
        "dns_ms": dns_ms,
        "connect_ms": connect,
        "tls_start_ts": _ts_values(np.where(is_first, tls_start, _NA)),
        "tls_ms": tls_col,
        "request_frame": df["request_frame"].to_numpy(dtype=object),
        "request_ts": _ts_values(req),
        "request_sent_ts": _ts_values(sent),
        "response_frame": df["response_frame"].to_numpy(dtype=object),
        "response_start_ts": _ts_values(resp),
        "first_token_ts": _ts_values(first_tok),
        "end_ts": _ts_values(end),
        "ttfb_ms": _diff_ms(resp, sent),
        "first_event_ms": _diff_ms(sse["first_event_ts"], sent),
        "ttft_ms": _diff_ms(first_tok, sent),
        "ttft_from_start_ms": ttft_from_start,
        "sse_events": sse["events"],
        "token_events": sse["tokens"],
        "token_gap_median_ms": sse["gap_median"],
        "token_gap_p95_ms": sse["gap_p95"],
        "token_gap_max_ms": sse["gap_max"],
        "total_ms": total,
        "from_connection_start_ms": from_conn,
        "from_dns_start_ms": from_dns,
        "complete": df["complete"].to_numpy(dtype=bool),
        "end_reason": df["end_reason"].to_numpy(dtype=object),
        "wireshark_filter": df["wireshark_filter"].to_numpy(dtype=object),
    }
    result = STREAM_LATENCY.frame(columns=out)
    order = np.lexsort((qconn, stream, _sort_key(req)))
    return result.iloc[order].reset_index(drop=True)


def _table(cap: Capture, name: str) -> pd.DataFrame:
    """``cap.<name>``, or the empty table of its schema on an object that lacks it"""
    df = getattr(cap, name, None)
    if isinstance(df, pd.DataFrame):
        return df
    from ..tables.registry import TABLES  # tables sit below analyses

    return TABLES[name].frame([])


def _request_keys(stream: list[int], sid: pd.Series,
                  idx: pd.Series) -> list[tuple[int, int, int] | None]:
    """Each row's request key: HTTP/2 (0, stream, stream_id) where ``sid`` is set, else
    HTTP/1.x (0, stream, -request_index), else None."""
    sid_na = sid.isna().to_numpy(bool).tolist()
    idx_na = idx.isna().to_numpy(bool).tolist()
    return [(0, s, d) if not dn else None if inn else (0, s, -i) for s, d, dn, i, inn in zip(
        stream, _ints(sid).tolist(), sid_na, _ints(idx).tolist(), idx_na, strict=True)]


def _ints(col: pd.Series) -> np.ndarray:
    """an integer column that may hold NA -> int64, NA -> -1 (no stream, connection or
    request number is negative)"""
    if not len(col):
        return np.empty(0, np.int64)
    out: np.ndarray = col.astype("Int64").fillna(-1).to_numpy(np.int64)
    return out


# -- per-protocol request rows ------------------------------------------------------------

_NA = np.iinfo(np.int64).min


def _h1_rows(req: pd.DataFrame) -> pd.DataFrame:
    if len(req) == 0:
        return req
    req = req.reset_index(drop=True)
    pos = req["position"]
    # position NA: earlier requests may be missing, but a second one seen is surely reused
    reused = [
        (True if i > 1 else None) if pd.isna(p) else bool(p > 1)
        for p, i in zip(pos, req["request_index"], strict=True)
    ]
    version = req["http_version"].astype("string").fillna("1.1")
    # a row whose request and response were not paired (capture gaps, responses to requests
    # never captured) yields no waiting time: its response start is not that request's
    resp_ts = req["response_ts"]
    if "paired" in req.columns:
        resp_ts = resp_ts.where(req["paired"].fillna(False).to_numpy(bool))
    filt = [
        _h1_filter(int(s), rf, pf)
        for s, rf, pf in zip(
            req["tcp_stream"], req["request_frame"], req["response_frame"], strict=True
        )
    ]
    return pd.DataFrame(
        {
            "tcp_stream": req["tcp_stream"].to_numpy(np.int64),
            "quic_connection": [None] * len(req),
            "protocol": ("HTTP/" + version).to_numpy(dtype=object),
            "request_index": req["request_index"].to_numpy(dtype=object),
            "stream_id": [None] * len(req),
            "method": req["method"].to_numpy(dtype=object),
            "host": req["host"].to_numpy(dtype=object),
            "path": req["path"].to_numpy(dtype=object),
            "status": req["status"].to_numpy(dtype=object),
            "content_type": req["content_type"].to_numpy(dtype=object),
            "position": pos.to_numpy(dtype=object),
            "reused": reused,
            "request_frame": req["request_frame"].to_numpy(dtype=object),
            "request_ts": req["request_ts"],
            "request_sent_ts": req["request_end_ts"].fillna(req["request_ts"]),
            "response_frame": req["response_frame"].to_numpy(dtype=object),
            "response_start_ts": resp_ts,
            "end_ts": req["response_end_ts"],
            "complete": req["end_reason"]
            .astype("string")
            .eq("complete")
            .fillna(False)
            .to_numpy(bool),
            "end_reason": req["end_reason"].astype("string").to_numpy(dtype=object),
            "wireshark_filter": filt,
        }
    )


def _h1_filter(stream: int, req_frame: Any, resp_frame: Any) -> str:
    f = f"tcp.stream eq {stream}"
    if not pd.isna(req_frame):
        f += f" && frame.number >= {int(req_frame)}"
        if not pd.isna(resp_frame):
            f += f" && frame.number <= {int(resp_frame)}"
    return f


def _rank_on_connection(conn: pd.Series, req_ts: pd.Series, stream_id: pd.Series) -> np.ndarray:
    """Position (1, 2...) of each stream on its connection, by request time then stream id."""
    tmp = pd.DataFrame(
        {
            "s": conn.to_numpy(np.int64),
            "t": _sort_key(_ns(req_ts)),
            "id": stream_id.to_numpy(np.int64),
        }
    )
    return (
        tmp.sort_values(["s", "t", "id"]).groupby("s").cumcount().add(1)
        .reindex(tmp.index).to_numpy()
    )


def _multiplexed_rows(st: pd.DataFrame, *, protocol: str, req_ts: pd.Series,
                      position: list[int | None], reused: list[bool | None],
                      ended: np.ndarray, tcp_stream: Any, quic_connection: Any,
                      wireshark_filter: list[str]) -> pd.DataFrame:
    """The stream_latency rows of an HTTP/2 or HTTP/3 streams table (same column names)."""
    reason = st["end_reason"].astype("string")
    return pd.DataFrame(
        {
            "tcp_stream": tcp_stream,
            "quic_connection": quic_connection,
            "protocol": protocol,
            "request_index": [None] * len(st),
            "stream_id": st["stream_id"].to_numpy(dtype=object),
            "method": st["method"].to_numpy(dtype=object),
            "host": st["authority"].to_numpy(dtype=object),
            "path": st["path"].to_numpy(dtype=object),
            "status": st["status"].to_numpy(dtype=object),
            "content_type": st["content_type"].to_numpy(dtype=object),
            "position": position,
            "reused": reused,
            "request_frame": st["request_frame"].to_numpy(dtype=object),
            "request_ts": req_ts,
            "request_sent_ts": st["request_end_ts"].fillna(req_ts),
            "response_frame": st["response_headers_frame"].to_numpy(dtype=object),
            "response_start_ts": st["response_headers_ts"],
            "end_ts": st["end_ts"].where(ended, pd.NaT),
            "complete": reason.eq("end_stream").fillna(False).to_numpy(bool),
            "end_reason": reason.to_numpy(dtype=object),
            "wireshark_filter": wireshark_filter,
        }
    )


def _h2_rows(st: pd.DataFrame, h2c: pd.DataFrame) -> pd.DataFrame:
    if len(st) == 0:
        return st
    st = st[st["end_reason"].astype("string").ne("idle").fillna(True)].reset_index(drop=True)
    if len(st) == 0:
        return st
    req_ts = st["request_ts"].fillna(st["first_ts"])
    start = h2c.set_index("tcp_stream")["start"].astype("string")
    conn_start = np.array([start.get(int(s), "mid_stream") for s in st["tcp_stream"]], dtype=object)
    rank = _rank_on_connection(st["tcp_stream"], req_ts, st["stream_id"])
    reused: list[bool | None] = []
    position: list[int | None] = []
    for r, cs in zip(rank, conn_start, strict=True):
        if cs == "upgrade":  # the HTTP/1.1 Upgrade request came first
            reused.append(True)
            position.append(None)
        elif cs == "preface":
            reused.append(bool(r > 1))
            position.append(int(r))
        else:  # mid-stream: earlier streams may not have been captured
            reused.append(True if r > 1 else None)
            position.append(None)
    ended = ~st["end_reason"].astype("string").isin(_H2_UNENDED).fillna(False)
    return _multiplexed_rows(
        st, protocol="HTTP/2", req_ts=req_ts, position=position, reused=reused,
        ended=ended.to_numpy(bool), tcp_stream=st["tcp_stream"].to_numpy(np.int64),
        quic_connection=[None] * len(st),
        wireshark_filter=[f"tcp.stream eq {int(s)} && http2.streamid eq {int(i)}"
                          for s, i in zip(st["tcp_stream"], st["stream_id"], strict=True)],
    )


def _h3_rows(st: pd.DataFrame, quic: pd.DataFrame) -> pd.DataFrame:
    if len(st) == 0:
        return st
    st = st.reset_index(drop=True)
    req_ts = st["request_ts"].fillna(st["first_ts"])
    seen = dict(zip(quic["quic_connection"].astype(int), quic["start_seen"].astype(bool),
                    strict=True)) if len(quic) else {}
    rank = _rank_on_connection(st["quic_connection"], req_ts, st["stream_id"])
    reused: list[bool | None] = []
    position: list[int | None] = []
    for r, c in zip(rank, st["quic_connection"], strict=True):
        if seen.get(int(c), False):
            reused.append(bool(r > 1))
            position.append(int(r))
        else:  # the capture started inside the connection
            reused.append(True if r > 1 else None)
            position.append(None)
    ended = st["end_reason"].astype("string").ne("open_at_end").fillna(False)
    return _multiplexed_rows(
        st, protocol="HTTP/3", req_ts=req_ts, position=position, reused=reused,
        ended=ended.to_numpy(bool), tcp_stream=[None] * len(st),
        quic_connection=st["quic_connection"].to_numpy(np.int64),
        wireshark_filter=[
            f"quic.connection.number eq {int(c)} && quic.stream.stream_id eq {int(i)}"
            for c, i in zip(st["quic_connection"], st["stream_id"], strict=True)],
    )


# -- SSE -----------------------------------------------------------------------------------


def _sse_stats(ev: pd.DataFrame, ev3: pd.DataFrame, df: pd.DataFrame, stream: np.ndarray,
               qconn: np.ndarray) -> dict[str, np.ndarray]:
    n = len(df)
    out = {
        "events": np.zeros(n, np.int64),
        "tokens": np.zeros(n, np.int64),
        "first_event_ts": np.full(n, _NA, np.int64),
        "first_token_ts": np.full(n, _NA, np.int64),
        "gap_median": np.full(n, np.nan),
        "gap_p95": np.full(n, np.nan),
        "gap_max": np.full(n, np.nan),
    }
    if len(ev) + len(ev3) == 0:
        return out

    # one key per request: HTTP/2 (0, stream, stream_id), HTTP/1.x (0, stream, -request_index),
    # HTTP/3 (1, QUIC connection, stream_id)
    row_of: dict[tuple[int, int, int] | None, int] = {}
    keys = _request_keys(stream.tolist(), df["stream_id"], df["request_index"])
    for i, (q, sid, k) in enumerate(zip(qconn.tolist(), _ints(df["stream_id"]).tolist(), keys,
                                        strict=True)):
        row_of[(1, q, sid) if q >= 0 else k] = i
    rows_l = [row_of.get(k, -1) for k in _request_keys(
        _ints(ev["tcp_stream"]).tolist(), ev["stream_id"], ev["request_index"])]
    rows_l += [
        row_of.get((1, q, sid), -1) for q, sid in zip(
            _ints(ev3["quic_connection"]).tolist(), _ints(ev3["stream_id"]).tolist(), strict=True)
    ]
    ts = np.concatenate([_ns(ev["ts"]), _ns(ev3["ts"])])
    is_token = np.concatenate([
        (t.notna() & t.astype("string").str.len().gt(0)).fillna(False).to_numpy(bool)
        for t in (ev["delta_text"], ev3["delta_text"])
    ])
    index = np.concatenate([ev["index"].to_numpy(np.int64), ev3["index"].to_numpy(np.int64)])
    rows = np.array(rows_l, dtype=np.int64)
    known = rows >= 0
    if not known.any():
        return out
    ev_rows, ev_ts, ev_tok = rows[known], ts[known], is_token[known]
    order = np.lexsort((index[known], ev_rows))
    ev_rows, ev_ts, ev_tok = ev_rows[order], ev_ts[order], ev_tok[order]
    np.add.at(out["events"], ev_rows, 1)
    first = np.r_[True, ev_rows[1:] != ev_rows[:-1]]
    out["first_event_ts"][ev_rows[first]] = ev_ts[first]
    t_rows, t_ts = ev_rows[ev_tok], ev_ts[ev_tok]
    if len(t_rows) == 0:
        return out
    np.add.at(out["tokens"], t_rows, 1)
    t_first = np.r_[True, t_rows[1:] != t_rows[:-1]]
    out["first_token_ts"][t_rows[t_first]] = t_ts[t_first]
    same = ~t_first[1:]
    if same.any():
        gaps = pd.DataFrame(
            {
                "r": t_rows[1:][same],
                "g": (t_ts[1:][same] - t_ts[:-1][same]) / 1e6,
            }
        ).groupby("r")["g"]
        med, p95, mx = gaps.median(), gaps.quantile(0.95), gaps.max()
        idx = med.index.to_numpy(np.int64)
        out["gap_median"][idx] = med.to_numpy()
        out["gap_p95"][idx] = p95.to_numpy()
        out["gap_max"][idx] = mx.to_numpy()
    return out


# -- DNS -----------------------------------------------------------------------------------


def _dns_lookups(
    cap: Capture,
    streams: np.ndarray,
    is_first: np.ndarray,
    hosts: np.ndarray,
    clients: np.ndarray,
    conn_start: np.ndarray,
) -> dict[int, tuple[int, int, int] | None]:
    """row index -> (lookup start ns, lookup end ns, first query frame) for the first requests
    whose lookup was found, or None when the host is an IP address (no lookup needed).
    ``clients``: the client address of each row's connection (TCP or QUIC)."""
    out: dict[int, tuple[int, int, int] | None] = {}
    first_rows = [int(i) for i in np.flatnonzero(is_first) if conn_start[i] != _NA]
    if not first_rows:
        return out
    dns = cap.dns
    answered = dns[dns["response_ts"].notna() & dns["query_ts"].notna() & dns["name"].notna()]
    # a TCP retry of a truncated UDP answer: the lookup started with the UDP query
    udp_start: dict[int, int] = {}
    if "retry_of_frame" in dns.columns and dns["retry_of_frame"].notna().any():
        udp_start = dict(zip(dns["query_frame"].dropna().astype(int),
                             _ns(dns.loc[dns["query_frame"].notna(), "query_ts"]), strict=True))
        retry_of = answered["retry_of_frame"].to_numpy(dtype=object)
    else:
        retry_of = np.full(len(answered), None, dtype=object)
    by_name: dict[str, list[tuple[int, int, int, str]]] = {}
    for name, q, r, frame, client, of in zip(
        answered["name"].astype(str),
        _ns(answered["query_ts"]),
        _ns(answered["response_ts"]),
        answered["query_frame"],
        answered["client_addr"].astype(str),
        retry_of,
        strict=True,
    ):
        if of is not None and of is not pd.NA and int(of) in udp_start:
            q, frame = udp_start[int(of)], int(of)
        by_name.setdefault(_host_key(name), []).append((int(q), int(r), int(frame), client))
    used: set[int] = set()
    # connections in the order they started, so a lookup goes to the first that follows it
    for i in sorted(first_rows, key=lambda j: (int(conn_start[j]), int(streams[j]))):
        host = hosts[i]
        if host is None or pd.isna(host):
            continue
        key = _host_key(_strip_port(str(host)))
        if _is_ip(str(host)):
            out[i] = None
            continue
        client = str(clients[i])
        cands = [
            c
            for c in by_name.get(key, ())
            if c[1] <= conn_start[i] and (c[3] == client or c[3].startswith(_LOOPBACK))
        ]
        if not cands:
            continue
        best = max(cands, key=lambda c: (c[1], c[0]))
        if best[2] in used:
            continue  # the answer came from the cache: the lookup belongs to an earlier connection
        used.add(best[2])
        lo, hi, frame = best[0], best[1], best[2]
        changed = True
        while changed:  # queries outstanding at the same time form one lookup
            changed = False
            for q, r, f, _c in cands:
                if q <= hi and r >= lo and (q < lo or r > hi):
                    lo, hi = min(lo, q), max(hi, r)
                    if q <= lo:
                        frame = f
                    changed = True
        for q, _r, f, _c in cands:
            if q == lo:
                frame = f
                used.add(f)
        out[i] = (lo, hi, frame)
    return out


def _host_key(name: str) -> str:
    return name.lower().rstrip(".")


def _strip_port(host: str) -> str:
    host = host.strip()
    if host.startswith("["):  # [v6]:port
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


def _is_ip(host: Any) -> bool:
    if host is None or pd.isna(host):
        return False
    try:
        ipaddress.ip_address(_strip_port(str(host)))
    except ValueError:
        return False
    return True


# -- small helpers -------------------------------------------------------------------------


def _ns(col: pd.Series | np.ndarray) -> np.ndarray:
    """datetime column -> int64 ns, NaT -> _NA."""
    arr = np.asarray(pd.Series(col).to_numpy(dtype="datetime64[ns]"))
    return arr.view(np.int64).copy()


def _ts_values(ns: np.ndarray) -> Any:
    return pd.array([None if v == _NA else int(v) for v in ns], dtype="Int64")


def _diff_ms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bad = (a == _NA) | (b == _NA)
    out = (np.where(bad, 0, a) - np.where(bad, 0, b)) / 1e6
    out[bad] = np.nan
    return out


def _sort_key(ns: np.ndarray) -> np.ndarray:
    return np.where(ns == _NA, np.iinfo(np.int64).max, ns)


def _lookup(col: pd.Series, keys: np.ndarray, default: Any) -> np.ndarray:
    d = col.to_dict()
    return np.array([_na(d.get(int(k), default), default) for k in keys], dtype=object)


def _lookup_ns(col: pd.Series, keys: np.ndarray) -> np.ndarray:
    d = dict(zip(col.index.to_numpy(np.int64), _ns(col), strict=True))
    return np.array([d.get(int(k), _NA) for k in keys], dtype=np.int64)


def _na(v: Any, default: Any) -> Any:
    return default if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else v
