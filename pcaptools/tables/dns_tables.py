"""The ``dns`` table: one row per DNS query over UDP, TCP or HTTPS (and per response whose
query was not captured), built from :class:`~pcaptools.protocols.dns.DnsTracker`.

Comparing with tshark: ``query_frame`` / ``response_frame`` are the frames of
``dns.flags.response == 0`` / ``== 1`` with the same ``dns.id``; ``latency_ms`` is the
response's ``dns.time``; ``name``, ``type_code`` and ``rcode_code`` are ``dns.qry.name``,
``dns.qry.type`` and ``dns.flags.rcode``. tshark shows DNS over TCP and DNS over HTTPS (with
the TLS keys) in the same ``dns`` rows; a message split over several segments is shown in the
frame that completed it, as here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..protocols.dns import DnsTracker, rcode_name, type_name
from ..tcp.tracker import addr_text
from .schema import TS_DTYPE, Column, TableSchema

__all__ = ["DNS", "TCP_RETRY_WINDOW_NS", "dns_table", "link_tcp_retries"]

TCP_RETRY_WINDOW_NS = 10_000_000_000
"""a TCP query for the same name and type from the same client within 10 s of a truncated
UDP answer is its retry"""

DNS = TableSchema(
    name="dns",
    grain="one row per DNS query over UDP or TCP port 53 or over HTTPS (retransmissions of it "
    "counted, not listed), and one per response whose query was not captured",
    key=("frame", "id", "http_stream_id"),
    columns=(
        Column(
            "frame", "int64", None, "query_frame, or response_frame when the query was not captured"
        ),
        Column("id", "int64", None, "dns.id: transaction id"),
        Column(
            "name",
            "string",
            None,
            "dns.qry.name: the name asked for (no trailing dot; <Root> for the root)",
        ),
        Column(
            "type", "category", None, "query type: A, AAAA, HTTPS, PTR... (TYPEnnn when unknown)"
        ),
        Column("type_code", "Int64", None, "dns.qry.type"),
        Column(
            "query_frame",
            "Int64",
            None,
            "first query packet; NA when only the response was captured",
        ),
        Column("query_ts", TS_DTYPE, None, "time of query_frame"),
        Column(
            "response_frame",
            "Int64",
            None,
            "first response packet (tshark dns.response_in); NA if unanswered",
        ),
        Column("response_ts", TS_DTYPE, None, "time of response_frame"),
        Column(
            "latency_ms",
            "float64",
            "ms",
            "response_ts - query_ts: tshark's dns.time (from the first query when it was "
            "retransmitted); doh: from the packet completing the query (POST body, or a GET's "
            "header section: tshark shows no query and no dns.time there) to the one "
            "completing the response body",
        ),
        Column(
            "rcode",
            "category",
            None,
            "response code: NOERROR, NXDOMAIN, SERVFAIL, REFUSED... NA if unanswered",
        ),
        Column("rcode_code", "Int64", None, "dns.flags.rcode"),
        Column("answer_count", "Int64", "records", "dns.count.answers of the response"),
        Column(
            "answers",
            "string",
            None,
            "answer records in wire order, e.g. 'CNAME edge.example.net, A 192.0.2.1'; NA when "
            "the response was not decoded",
        ),
        Column(
            "answer_addrs",
            "string",
            None,
            "A and AAAA addresses among the answers, comma-separated (dns.a, dns.aaaa)",
        ),
        Column("min_ttl_s", "Int64", "s", "smallest TTL among the answers"),
        Column(
            "truncated",
            "boolean",
            None,
            "the response had the TC flag (answer too long for UDP; the client retries over TCP)",
        ),
        Column(
            "queries",
            "int64",
            "packets",
            "query packets: 1 + retransmissions (tshark dns.retransmit_request); 0 when not "
            "captured",
        ),
        Column(
            "responses",
            "int64",
            "packets",
            "response packets: 1 + retransmitted responses; 0 if unanswered",
        ),
        Column("client_addr", "string", None, "address that sent the query"),
        Column("client_port", "int64", None, "its UDP or TCP port"),
        Column("server_addr", "string", None, "address the query was sent to (the resolver)"),
        Column("server_port", "int64", None, "its UDP or TCP port (53; 443 for DoH)"),
        Column("ip_version", "int64", None, "4 or 6"),
        Column(
            "transport",
            "category",
            None,
            "udp, tcp (DNS over TCP port 53, RFC 7766) or doh (DNS over HTTPS, RFC 8484: "
            "HTTP/1.x or HTTP/2, in clear or decrypted TLS); DNS over TLS (853) and over "
            "QUIC are not parsed",
        ),
        Column(
            "tcp_stream",
            "Int64",
            None,
            "the TCP connection of a tcp or doh row (tcp.stream); NA on udp",
        ),
        Column(
            "http_stream_id",
            "Int64",
            None,
            "doh over HTTP/2: the stream id (http2_streams.stream_id); NA otherwise",
        ),
        Column(
            "http_request_index",
            "Int64",
            None,
            "doh over HTTP/1.x: the exchange (http_requests.request_index); NA otherwise",
        ),
        Column(
            "doh_method",
            "category",
            None,
            "doh: GET (query in the ?dns= parameter) or POST (query in the body); NA otherwise",
        ),
        Column(
            "tcp_retry_frame",
            "Int64",
            None,
            "a udp row whose answer was truncated (TC=1): query_frame of the tcp row that "
            "retried it (same client, name and type, within 10 s of the answer); NA when no "
            "retry was captured",
        ),
        Column(
            "retry_of_frame",
            "Int64",
            None,
            "a tcp row that retried a truncated UDP answer: that udp row's query_frame",
        ),
    ),
)


def dns_table(tracker: DnsTracker | None) -> pd.DataFrame:
    """The ``dns`` table, ordered by frame (empty with all columns when ``tracker`` is None)."""
    if tracker is None:
        return DNS.frame([])
    rows = []
    for t in tracker.transactions:
        frame = t.query_frame if t.query_frame is not None else t.response_frame
        latency = (
            (t.response_ts - t.query_ts) / 1e6
            if t.response_ts is not None and t.query_ts is not None
            else None
        )
        rows.append(
            (
                frame,
                t.id,
                t.name,
                None if t.qtype is None else type_name(t.qtype),
                t.qtype,
                t.query_frame,
                t.query_ts,
                t.response_frame,
                t.response_ts,
                latency,
                None if t.rcode is None else rcode_name(t.rcode),
                t.rcode,
                t.answer_count,
                t.answers,
                t.answer_addrs,
                t.min_ttl,
                t.truncated,
                t.queries,
                t.responses,
                addr_text(t.client_addr) if t.client_addr else None,
                t.client_port,
                addr_text(t.server_addr) if t.server_addr else None,
                t.server_port,
                t.ip_version,
                t.transport,
                t.tcp_stream,
                t.http_stream_id,
                t.http_request_index,
                t.doh_method,
                None,
                None,
            )
        )
    rows.sort(key=lambda r: r[0] or 0)
    return link_tcp_retries(DNS.frame(rows))


def link_tcp_retries(df: pd.DataFrame) -> pd.DataFrame:
    """Fill ``tcp_retry_frame`` / ``retry_of_frame``: each udp row answered with TC=1 is
    linked to the first tcp query after that answer for the same name (case-insensitive) and
    type from the same client address, within :data:`TCP_RETRY_WINDOW_NS`; each tcp row
    retries one udp row at most. Pure function of the table (the parallel merge calls it on
    the concatenated rows)."""
    if not len(df):
        return df
    udp = df.index[(df["transport"] == "udp").to_numpy()
                   & df["truncated"].fillna(False).to_numpy(bool)
                   & df["response_ts"].notna().to_numpy()]
    if not len(udp):
        return df
    tcp = df[(df["transport"] == "tcp").to_numpy() & df["query_ts"].notna().to_numpy()]
    if not len(tcp):
        return df
    names = df["name"].astype(object).map(lambda v: None if v is None or v is pd.NA
                                          else str(v).lower().rstrip("."))
    cands: dict[tuple[object, object, object], list[tuple[int, int]]] = {}
    q_ns = df["query_ts"].to_numpy("datetime64[ns]").view(np.int64)
    r_ns = df["response_ts"].to_numpy("datetime64[ns]").view(np.int64)
    for i in tcp.index:
        key = (df.at[i, "client_addr"], names[i], df.at[i, "type_code"])
        cands.setdefault(key, []).append((int(q_ns[i]), int(i)))
    used: set[int] = set()
    retry = df["tcp_retry_frame"].copy()
    of = df["retry_of_frame"].copy()
    for i in sorted(udp, key=lambda j: int(r_ns[j])):
        key = (df.at[i, "client_addr"], names[i], df.at[i, "type_code"])
        at = int(r_ns[i])
        for q, j in sorted(cands.get(key, ())):
            if j not in used and at <= q <= at + TCP_RETRY_WINDOW_NS:
                used.add(j)
                retry[i] = df.at[j, "query_frame"]
                of[j] = df.at[i, "query_frame"]
                break
    df = df.copy()
    df["tcp_retry_frame"] = retry
    df["retry_of_frame"] = of
    return df
