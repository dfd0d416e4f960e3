"""The ``dns`` table: one row per DNS query over UDP (and per response whose query was not
captured), built from :class:`~pcaptools.protocols.dns.DnsTracker`.

Comparing with tshark: ``query_frame`` / ``response_frame`` are the frames of
``dns.flags.response == 0`` / ``== 1`` with the same ``dns.id``; ``latency_ms`` is the
response's ``dns.time``; ``name``, ``type_code`` and ``rcode_code`` are ``dns.qry.name``,
``dns.qry.type`` and ``dns.flags.rcode``.
"""

from __future__ import annotations

import pandas as pd

from ..protocols.dns import DnsTracker, rcode_name, type_name
from ..tcp.tracker import addr_text
from .schema import TS_DTYPE, Column, TableSchema

__all__ = ["DNS", "dns_table"]

DNS = TableSchema(
    name="dns",
    grain="one row per DNS query over UDP port 53 (retransmissions of it counted, not listed), "
    "and one per response whose query was not captured",
    key=("frame",),
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
            "retransmitted)",
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
        Column("client_port", "int64", None, "its UDP port"),
        Column("server_addr", "string", None, "address the query was sent to (the resolver)"),
        Column("server_port", "int64", None, "its UDP port (53)"),
        Column("ip_version", "int64", None, "4 or 6"),
        Column("transport", "category", None, "udp (DNS over TCP, TLS or HTTPS is not parsed)"),
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
                addr_text(t.client_addr),
                t.client_port,
                addr_text(t.server_addr),
                t.server_port,
                t.ip_version,
                "udp",
            )
        )
    rows.sort(key=lambda r: r[0] or 0)
    return DNS.frame(rows)
