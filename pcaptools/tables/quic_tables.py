"""The QUIC tables: ``quic_connections`` (one row per QUIC connection) and ``quic_packets``
(one row per QUIC packet, coalesced packets separately), built from
:class:`~pcaptools.protocols.quic.QuicTracker`.

Only Initial packets are decrypted (their keys come from the client's destination connection
ID, RFC 9001 §5.2): what the tables show of Handshake, 0-RTT and 1-RTT packets is their
headers and sizes, and ``status`` says so. Key-log decryption is not supported yet.

Comparing with tshark (4.0, no key log): a ``quic_packets`` row is one ``quic`` tree of the
frame (``quic.header_form``, ``quic.long.packet_type`` for version 1, ``quic.version``,
``quic.dcid``, ``quic.scid``, ``quic.packet_number`` of Initial packets, in the order of the
packets in the datagram); ``quic_connections.sni`` / ``alpn_offered`` are
``tls.handshake.extensions_server_name`` / ``tls.handshake.extensions_alpn_str`` of the
ClientHello in the Initial CRYPTO frames; ``quic_connection`` numbers connections in
first-seen order as ``quic.connection.number`` does.
"""

from __future__ import annotations

import pandas as pd

from ..protocols.quic.observer import PACKET_STATUSES, QuicConnection, QuicTracker
from ..protocols.quic.packets import PACKET_TYPES, version_name
from ..protocols.tls.fingerprint import ja4
from ..protocols.tls.suites import group_name, is_grease, suite_name
from ..protocols.tls.suites import version_name as tls_version_name
from ..tcp.tracker import addr_text
from .schema import TS_DTYPE, Column, TableSchema

__all__ = ["QUIC_CONNECTIONS", "QUIC_PACKETS", "quic_connections_table", "quic_packets_table"]

_TYPES = ", ".join(PACKET_TYPES)
_STATUSES = ", ".join(PACKET_STATUSES)


def _counts(what: str) -> tuple[Column, ...]:
    return (
        Column(f"client_{what}_packets", "int64", "packets",
               f"{what} packets from the client"),
        Column(f"server_{what}_packets", "int64", "packets",
               f"{what} packets from the server"),
    )


QUIC_CONNECTIONS = TableSchema(
    name="quic_connections",
    grain="one row per QUIC connection (UDP port 443, or a QUIC v1/v2 long header on another "
    "port), in first-seen order; connection IDs and the UDP 5-tuple map packets to it",
    key=("quic_connection",),
    columns=(
        Column("quic_connection", "int64", None,
               "connection index in first-seen order (like tcp_stream; tshark "
               "quic.connection.number)"),
        Column("first_frame", "int64", None, "first packet of the connection"),
        Column("first_ts", TS_DTYPE, None, "time of first_frame"),
        Column("last_frame", "int64", None, "last packet of the connection"),
        Column("last_ts", TS_DTYPE, None, "time of last_frame"),
        Column("ip_version", "int64", None, "4 or 6"),
        Column("client_addr", "string", None,
               "the client: sender of the first Initial (or, when the capture started later, "
               "the side not on port 443)"),
        Column("client_port", "int64", None, "client UDP port"),
        Column("server_addr", "string", None, "the server"),
        Column("server_port", "int64", None, "server UDP port"),
        Column("start_seen", "bool", None,
               "the first packet seen is a client Initial or 0-RTT packet (False: the capture "
               "started inside the connection)"),
        Column("version", "category", None,
               "QUIC version of the latest long header other than Version Negotiation: 1, 2, "
               "draft-NN or 0x........; NA when only short headers were seen"),
        Column("versions", "string", None,
               "every version of its long headers, in first-seen order, comma separated "
               "(negotiation: a Version Negotiation packet)"),
        Column("original_dcid", "string", None,
               "hex destination connection ID of the client's first Initial (the original "
               "one, before any Retry); NA when not captured"),
        Column("client_scid", "string", None,
               "hex source connection ID of the client's first long header ('' when empty)"),
        Column("server_scid", "string", None,
               "hex source connection ID of the server's first Initial or Handshake packet "
               "('' when empty)"),
        Column("retry", "bool", None, "the server sent a Retry"),
        Column("retry_scid", "string", None,
               "hex source connection ID of the first Retry (the destination of the client's "
               "next Initial)"),
        Column("sni", "string", None,
               "server name of the ClientHello in the client's Initial CRYPTO frames"),
        Column("alpn_offered", "string", None,
               "ALPN ids the client offered, comma separated (h3...); the server's choice is "
               "in EncryptedExtensions, which needs a key log"),
        Column("tls_version", "category", None,
               "the ServerHello's version (supported_versions): TLS 1.3"),
        Column("cipher", "category", None, "cipher suite the ServerHello chose"),
        Column("key_share_group", "category", None, "key share group the ServerHello chose"),
        Column("ja4", "string", None, "JA4 fingerprint of the ClientHello (QUIC form, 'q')"),
        Column("client_hello_frame", "Int64", None,
               "frame completing the ClientHello (its last CRYPTO frame)"),
        Column("server_hello_frame", "Int64", None, "frame completing the ServerHello"),
        *_counts("initial"),
        *_counts("0rtt"),
        *_counts("handshake"),
        *_counts("1rtt"),
        Column("retry_packets", "int64", "packets", "Retry packets (from the server)"),
        Column("vn_packets", "int64", "packets", "Version Negotiation packets (from the server)"),
        Column("initial_decrypted", "int64", "packets", "Initial packets decrypted"),
        Column("initial_failed", "int64", "packets", "Initial packets that did not decrypt"),
        Column("client_datagrams", "int64", "datagrams", "UDP datagrams from the client"),
        Column("server_datagrams", "int64", "datagrams", "UDP datagrams from the server"),
        Column("client_bytes", "int64", "bytes", "UDP payload bytes from the client"),
        Column("server_bytes", "int64", "bytes", "UDP payload bytes from the server"),
        Column("client_wire_bytes", "int64", "bytes", "frame bytes from the client"),
        Column("server_wire_bytes", "int64", "bytes", "frame bytes from the server"),
        Column("needs_keylog", "bool", None,
               "Handshake, 0-RTT or 1-RTT packets were seen: their contents (the rest of the "
               "handshake, HTTP/3) need a key log, which is not supported yet"),
    ),
)

QUIC_PACKETS = TableSchema(
    name="quic_packets",
    grain="one row per QUIC packet (the packets coalesced in one datagram are separate rows)",
    key=("frame", "index"),
    columns=(
        Column("frame", "int64", None, "frame of the UDP datagram"),
        Column("ts", TS_DTYPE, None, "time of frame"),
        Column("quic_connection", "int64", None, "quic_connections.quic_connection"),
        Column("direction", "category", None, "client_to_server | server_to_client"),
        Column("index", "int64", None, "position of the packet in its datagram (0 first)"),
        Column("long_header", "bool", None, "long header (tshark quic.header_form 1)"),
        Column("packet_type", "category", None, f"{_TYPES}"),
        Column("version", "Int64", None, "quic.version of a long header; NA for short headers"),
        Column("dcid", "string", None,
               "hex destination connection ID ('' when empty); NA for a short header whose "
               "connection ID is not one the connection announced"),
        Column("scid", "string", None, "hex source connection ID; NA for short headers"),
        Column("length", "int64", "bytes",
               "bytes of the packet in the datagram (header, payload and AEAD tag)"),
        Column("packet_number", "Int64", None,
               "full packet number (quic.packet_number) of a decrypted Initial; NA where the "
               "header protection could not be removed"),
        Column("status", "category", None, f"{_STATUSES}"),
        Column("frames", "string", None,
               "frame types of a decrypted Initial in order (CRYPTO, ACK, PING, PADDING, "
               "CONNECTION_CLOSE; a run of PADDING once); NA when not decrypted"),
    ),
)


def _hex(cid: bytes | None) -> str | None:
    return None if cid is None else cid.hex()


def _row(c: QuicConnection) -> tuple[object, ...]:
    ch, sh = c.client_hello, c.server_hello
    alpn = ",".join(a.decode("ascii", "replace") for a in ch.alpn) if ch is not None else None
    counts: list[int] = []
    for t in ("initial", "0rtt", "handshake", "1rtt"):
        counts += [c.count(0, t), c.count(1, t)]
    return (
        c.index, c.first_frame, c.first_ts_ns, c.last_frame, c.last_ts_ns, c.ip_version,
        addr_text(c.client_addr), c.client_port, addr_text(c.server_addr), c.server_port,
        c.start_seen,
        None if c.version is None else version_name(c.version),
        ",".join(version_name(v) for v in c.versions),
        _hex(c.original_dcid), _hex(c.client_scid), _hex(c.server_scid),
        c.retry_scid is not None, _hex(c.retry_scid),
        ch.sni if ch is not None else None,
        alpn or None,
        tls_version_name(sh.version) if sh is not None else None,
        suite_name(sh.cipher_suite) if sh is not None else None,
        group_name(sh.key_share_group)
        if sh is not None and sh.key_share_group is not None and not is_grease(sh.key_share_group)
        else None,
        ja4(ch, "q") if ch is not None else None,
        c.client_hello_frame, c.server_hello_frame,
        *counts,
        c.count(1, "retry") + c.count(0, "retry"),
        c.count(1, "version_negotiation") + c.count(0, "version_negotiation"),
        c.initial_decrypted, c.initial_failed,
        c.datagrams[0], c.datagrams[1], c.payload_bytes[0], c.payload_bytes[1],
        c.wire_bytes[0], c.wire_bytes[1], c.needs_keylog,
    )


def quic_connections_table(tracker: QuicTracker | None) -> pd.DataFrame:
    """The ``quic_connections`` table (empty with all columns when ``tracker`` is None)."""
    if tracker is None:
        return QUIC_CONNECTIONS.frame([])
    return QUIC_CONNECTIONS.frame([_row(c) for c in tracker.connections])


def quic_packets_table(tracker: QuicTracker | None) -> pd.DataFrame:
    """The ``quic_packets`` table, in capture order (empty when ``tracker`` is None)."""
    if tracker is None:
        return QUIC_PACKETS.frame([])
    return QUIC_PACKETS.frame(tracker.packet_rows)
