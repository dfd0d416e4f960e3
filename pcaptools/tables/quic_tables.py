"""The QUIC tables: ``quic_connections`` (one row per QUIC connection), ``quic_packets``
(one row per QUIC packet, coalesced packets separately) and ``quic_frames`` (one row per
frame of a decrypted packet), built from :class:`~pcaptools.protocols.quic.QuicTracker`.

Initial packets are decrypted without a key log (their keys come from the client's
destination connection ID, RFC 9001 §5.2); Handshake, 0-RTT and 1-RTT packets with a TLS key
log (a file, or the capture's pcapng Decryption Secrets Blocks). Without the secrets the
tables show those packets' headers and sizes, and ``status`` says why they stayed encrypted.

Comparing with tshark (4.0; ``-o tls.keylog_file:KEYS`` for the same key log): a
``quic_packets`` row is one ``quic`` tree of the frame (``quic.header_form``,
``quic.long.packet_type`` for version 1, ``quic.version``, ``quic.dcid``, ``quic.scid``,
``quic.packet_number`` of decrypted packets, in the order of the packets in the datagram); a
``quic_frames`` row one frame of it (``quic.frame_type``, ``quic.stream.stream_id``,
``quic.stream.offset``, ``quic.stream.length``, ``quic.ack.largest_acknowledged``,
``quic.ack.ack_delay``, ``quic.crypto.offset``/``length``); ``quic_connections.sni`` /
``alpn_offered`` are ``tls.handshake.extensions_server_name`` /
``tls.handshake.extensions_alpn_str`` of the ClientHello in the Initial CRYPTO frames;
``quic_connection`` numbers connections in first-seen order as ``quic.connection.number``
does.
"""

from __future__ import annotations

import pandas as pd

from ..protocols.quic.frames import FRAME_TYPES
from ..protocols.quic.observer import PACKET_STATUSES, QuicConnection, QuicTracker
from ..protocols.quic.packets import PACKET_TYPES, version_name
from ..protocols.quic.ranges import RangeSet
from ..protocols.tls.fingerprint import ja4
from ..protocols.tls.suites import group_name, is_grease, suite_name
from ..protocols.tls.suites import version_name as tls_version_name
from ..tcp.tracker import addr_text
from .schema import TS_DTYPE, Column, TableSchema

__all__ = ["QUIC_CONNECTIONS", "QUIC_FRAMES", "QUIC_PACKETS", "quic_connections_table",
           "quic_frames_table", "quic_packets_table"]

_TYPES = ", ".join(PACKET_TYPES)
_STATUSES = ", ".join(PACKET_STATUSES)
_FRAME_TYPES = ", ".join(FRAME_TYPES)


def _counts(what: str) -> tuple[Column, ...]:
    return (
        Column(f"client_{what}_packets", "int64", "packets",
               f"{what} packets from the client"),
        Column(f"server_{what}_packets", "int64", "packets",
               f"{what} packets from the server"),
    )


def _pto(who: str) -> tuple[Column, ...]:
    return (
        Column(f"{who}_pto_episodes", "Int64", None,
               f"PTO episodes of the {who} (RFC 9002 §6.2): runs of probe packets (a PING, or "
               "STREAM / CRYPTO data sent before) that left after the peer's ACKs had been "
               "silent for at least the RTT (the larger smoothed RTT of the two directions) "
               "plus, for 1-RTT packets, the peer's max_ack_delay, with no new ACK since the "
               f"{who}'s previous packet; an episode ends at the peer's next ACK of a new "
               f"largest packet number. NA when some of the {who}'s packets were not decrypted "
               "(probes would not show)"),
        Column(f"{who}_pto_probes", "Int64", "packets", "probe packets of those episodes"),
        Column(f"{who}_pto_first_frame", "Int64", None, "frame of the first probe"),
        Column(f"{who}_pto_max_ms", "float64", "ms",
               "longest episode: from the packet before its first probe (the PTO timer runs "
               "from it, at the latest) to the peer's ACK ending it; NaN when no episode "
               "ended (the peer never answered: see disconnects' peer_vanished)"),
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
               "alpn (EncryptedExtensions, which needs a key log)"),
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
               "Handshake, 0-RTT or 1-RTT packets were seen and not all of them decrypted: "
               "their contents (the rest of the handshake, HTTP/3) need the key log's secrets "
               "of this connection"),
        Column("keys_found", "bool", None,
               "the key log (file or pcapng DSB) has secrets for this connection's ClientHello "
               "random"),
        Column("alpn", "string", None,
               "the ALPN id the server chose (EncryptedExtensions, decrypted with the key "
               "log); NA when its Handshake packets were not decrypted"),
        *_counts("decrypted"),
        Column("decrypt_failed", "int64", "packets",
               "Handshake, 0-RTT and 1-RTT packets that did not decrypt with the key log's "
               "secrets (quic.decrypt_failed rows)"),
        Column("key_updates", "int64", None,
               "1-RTT key updates (RFC 9001 §6: key phase bit flipped), both directions"),
        Column("handshake_kind", "category", None,
               "1rtt | 0rtt (the client sent 0-RTT packets) | retry (the server sent a Retry) | "
               "retry_0rtt; NA when the capture started inside the connection"),
        Column("zero_rtt", "category", None,
               "accepted | rejected (the server's EncryptedExtensions has / lacks early_data) "
               "| unknown (0-RTT sent, EncryptedExtensions not decrypted); NA: no 0-RTT"),
        Column("resumed", "boolean", None,
               "the ServerHello accepted a pre-shared key (pre_shared_key extension, RFC 8446 "
               "§4.2.11): a resumed TLS 1.3 session, with or without 0-RTT; NA when the "
               "ServerHello was not captured"),
        Column("session_tickets", "Int64", None,
               "TLS 1.3 NewSessionTicket messages the server sent in 1-RTT CRYPTO frames "
               "(tickets the client may resume with); NA when that cannot be told: not every "
               "server 1-RTT packet decrypted, the server's 1-RTT CRYPTO bytes have a hole "
               "or a message cut short, or the capture started inside the connection"),
        Column("ticket_frame", "Int64", None,
               "frame completing the first NewSessionTicket; NA without one"),
        Column("ticket_lifetime_s", "Int64", "s",
               "ticket_lifetime of the first NewSessionTicket (RFC 8446 §4.6.1: at most "
               "604800); NA without one"),
        Column("ticket_max_early_data", "Int64", "bytes",
               "max_early_data_size of the first ticket's early_data extension: the ticket "
               "allows 0-RTT, and a QUIC server must then send 4294967295 (0xffffffff, RFC "
               "9001 §4.6.1); NA when the ticket has no early_data extension (no 0-RTT with "
               "it) or there is no ticket"),
        Column("ticket_allows_0rtt", "boolean", None,
               "the first NewSessionTicket has the early_data extension; NA without one"),
        Column("handshake_done_frame", "Int64", None,
               "frame of the first HANDSHAKE_DONE (server, 1-RTT; needs the key log)"),
        Column("handshake_ms", "float64", "ms",
               "first_ts (the client's first Initial) to the HANDSHAKE_DONE frame at the "
               "capture point; NaN when either is not seen"),
        Column("client_rtt_samples", "int64", None,
               "RTT samples of the client's packets: a server ACK frame newly acknowledging "
               "a larger packet number of a packet seen here (RFC 9002 §5.1)"),
        Column("client_min_rtt_ms", "float64", "ms",
               "least sample: capture time of the ACK minus that of the packet. At the client "
               "this is the path RTT; at the server only the server's own ack delay"),
        Column("client_smoothed_rtt_ms", "float64", "ms",
               "RFC 9002 §5.3 smoothed RTT of those samples, ack delay (scaled by the server's "
               "ack_delay_exponent, capped by its max_ack_delay) subtracted in the "
               "application space"),
        Column("server_rtt_samples", "int64", None,
               "RTT samples of the server's packets (client ACK frames)"),
        Column("server_min_rtt_ms", "float64", "ms",
               "least sample (the path RTT at the server; the client's ack delay at the client)"),
        Column("server_smoothed_rtt_ms", "float64", "ms",
               "smoothed RTT of the server's packets (the client's ack delay subtracted)"),
        Column("client_packets_unacked", "Int64", "packets",
               "decrypted client packets the server's ACK frames never acknowledged though "
               "they acknowledged a larger packet number of the same space: lost after the "
               "capture point (at the client's vantage: on the path), or the ACK carrying them "
               "lost too (an upper bound); NA when a packet number set outgrew its limit "
               "(limits: QUIC packet number ranges)"),
        Column("client_packets_missing", "Int64", "packets",
               "client packet numbers between the smallest and the largest decrypted one of a "
               "space that never appeared in the capture: lost before the capture point (at "
               "the server's vantage: on the path); numbers a sender skips on purpose (Chrome "
               "does) count here too"),
        Column("server_packets_unacked", "Int64", "packets",
               "decrypted server packets the client's ACK frames never acknowledged though a "
               "larger one was (see client_packets_unacked)"),
        Column("server_packets_missing", "Int64", "packets",
               "server packet numbers a decrypted packet's numbering skips (see "
               "client_packets_missing)"),
        Column("client_resent_stream_bytes", "int64", "bytes",
               "STREAM bytes the client sent again (offsets already sent on that stream: "
               "QUIC retransmits frames, not packets)"),
        Column("server_resent_stream_bytes", "int64", "bytes",
               "STREAM bytes the server sent again"),
        Column("streams", "int64", None,
               "distinct stream ids with STREAM or RESET_STREAM frames (decrypted)"),
        Column("client_stream_bytes", "int64", "bytes",
               "distinct STREAM bytes from the client (each offset once)"),
        Column("server_stream_bytes", "int64", "bytes", "distinct STREAM bytes from the server"),
        Column("stream_gaps", "int64", None,
               "holes in the streams handed to the application observer (bytes never seen)"),
        Column("client_idle_timeout_ms", "Int64", "ms",
               "max_idle_timeout of the client's transport parameters (ClientHello; 0: none)"),
        Column("server_idle_timeout_ms", "Int64", "ms",
               "max_idle_timeout of the server's (EncryptedExtensions; needs the key log)"),
        Column("client_ack_delay_exponent", "Int64", None,
               "ack_delay_exponent the client announced (NA: not seen; the default is 3)"),
        Column("server_ack_delay_exponent", "Int64", None,
               "ack_delay_exponent the server announced"),
        Column("end", "category", None,
               "connection_close_transport | connection_close_application (a "
               "CONNECTION_CLOSE frame, decrypted) | stateless_reset | idle_timeout (no "
               "packet for longer than the idle timeout both sides announced before the end "
               "of the capture) | open_at_end | unknown (packets not decrypted: a close "
               "would not show)"),
        Column("closed_by", "category", None, "client | server: sender of the close or reset"),
        Column("close_frame", "Int64", None, "frame of the first CONNECTION_CLOSE"),
        Column("close_error_code", "Int64", None,
               "its error code (transport: RFC 9000 §20.1; application: e.g. HTTP/3's)"),
        Column("close_reason", "string", None,
               "its reason phrase (from the capture: untrusted text)", secret="text"),
        *_pto("client"),
        *_pto("server"),
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
               "full packet number (quic.packet_number) of a decrypted packet (decoded against "
               "the largest of its direction and packet number space); NA where the header "
               "protection could not be removed"),
        Column("status", "category", None, f"{_STATUSES}"),
        Column("frames", "string", None,
               "frame types of a decrypted packet in order, comma separated (a run of PADDING "
               "once; quic_frames has one row per frame); NA when not decrypted"),
        Column("header_bytes", "Int64", "bytes",
               "bytes of the header: of a decrypted packet, up to and including the packet "
               "number (length minus the plaintext and the 16-byte AEAD tag); of a protected "
               "packet not decrypted, the bytes before its (protected) packet number; of a "
               "Retry, all but its 16-byte integrity tag; of a Version Negotiation packet, all "
               "of it; NA for a stateless reset or an unknown version"),
    ),
)


QUIC_FRAMES = TableSchema(
    name="quic_frames",
    grain="one row per frame of a decrypted QUIC packet (a run of PADDING is one frame, as "
    "tshark shows it), in capture order",
    key=("frame", "packet_index", "frame_index"),
    columns=(
        Column("frame", "int64", None, "frame of the UDP datagram"),
        Column("ts", TS_DTYPE, None, "time of frame"),
        Column("quic_connection", "int64", None, "quic_connections.quic_connection"),
        Column("direction", "category", None, "client_to_server | server_to_client"),
        Column("packet_index", "int64", None, "quic_packets.index of its packet"),
        Column("packet_type", "category", None, "initial | 0rtt | handshake | 1rtt"),
        Column("packet_number", "int64", None, "quic.packet_number of its packet"),
        Column("frame_index", "int64", None, "position of the frame in its packet (0 first)"),
        Column("frame_type", "category", None, f"{_FRAME_TYPES}"),
        Column("frame_type_code", "int64", None,
               "the type on the wire (tshark quic.frame_type): 0x08-0x0f STREAM with its "
               "OFF/LEN/FIN bits, 0x03 ACK with ECN counts, 0x1d application CONNECTION_CLOSE"),
        Column("stream_id", "Int64", None,
               "STREAM, RESET_STREAM, STOP_SENDING, MAX_STREAM_DATA, STREAM_DATA_BLOCKED "
               "(quic.stream.stream_id)"),
        Column("offset", "Int64", "bytes", "STREAM / CRYPTO offset (0 when the frame has none)"),
        Column("length", "Int64", "bytes",
               "STREAM / CRYPTO / DATAGRAM data bytes, NEW_TOKEN token bytes, PADDING run "
               "bytes, PATH_* 8"),
        Column("fin", "boolean", None, "STREAM: the FIN bit"),
        Column("ack_largest", "Int64", None,
               "ACK: largest acknowledged (quic.ack.largest_acknowledged)"),
        Column("ack_delay", "Int64", None, "ACK: the ACK Delay field as sent (quic.ack.ack_delay)"),
        Column("ack_delay_us", "Int64", "us",
               "ACK Delay scaled: by 2**ack_delay_exponent of the ACK's sender in the "
               "application space (its transport parameter; 3 when not seen), by 2**3 in "
               "Initial and Handshake packets"),
        Column("ack_ranges", "string", None,
               "ACK: the acknowledged packet numbers as ranges, largest first ('7-9,3,0-1')"),
        Column("ack_ecn", "string", None, "ACK 0x03: ECT(0),ECT(1),ECN-CE counts"),
        Column("error_code", "Int64", None, "RESET_STREAM, STOP_SENDING, CONNECTION_CLOSE"),
        Column("error_space", "category", None,
               "CONNECTION_CLOSE: transport (0x1c) | application (0x1d)"),
        Column("error_frame_type", "Int64", None,
               "CONNECTION_CLOSE 0x1c: the frame type that triggered the error"),
        Column("reason", "string", None,
               "CONNECTION_CLOSE reason phrase (from the capture: untrusted text)"),
        Column("maximum", "Int64", None,
               "MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS, *_BLOCKED: the limit; RESET_STREAM: "
               "the final size"),
        Column("sequence", "Int64", None, "NEW_CONNECTION_ID / RETIRE_CONNECTION_ID sequence"),
        Column("retire_prior_to", "Int64", None, "NEW_CONNECTION_ID Retire Prior To"),
        Column("connection_id", "string", None, "NEW_CONNECTION_ID: hex connection ID"),
        Column("frame_bytes", "int64", "bytes",
               "bytes of the whole frame in the packet (type, fields and data; of a PADDING "
               "run, the run: tshark quic.padding_length)"),
    ),
)


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def _lost(c: QuicConnection, d: int) -> tuple[int | None, int | None]:
    """(unacked, missing) packets of direction ``d`` over its packet number spaces. Missing:
    the numbers between the smallest and the largest seen of a space that were not seen; a
    sender numbering all its packets with one counter (aioquic) leaves the numbers of its
    other spaces out of each: when the spaces' numbers do not overlap, they are counted as
    one sequence."""
    unacked = missing = 0
    spaces = c.spaces[d]
    if any(sp.seen.full or sp.acked.full for sp in spaces):
        return None, None  # a set stopped growing: the counts would be guesses
    for sp in spaces:
        if sp.largest_acked >= 0:
            unacked += sp.seen.count_not_in(sp.acked, sp.largest_acked)
    union = RangeSet()
    total = 0
    for sp in spaces:
        rs = sp.seen.ranges()
        if rs:
            missing += rs[-1][1] - rs[0][0] + 1 - sp.seen.count()
            total += sp.seen.count()
            for lo, hi in rs:
                union.add(lo, hi)
    urs = union.ranges()
    if urs and union.count() == total:  # one counter over the spaces
        missing = urs[-1][1] - urs[0][0] + 1 - total
    return unacked, missing


def _end(c: QuicConnection, capture_end: int) -> tuple[object, ...]:
    side = ("client", "server")
    if c.close is not None:
        fr, _ts, d, space, code, reason, _ft = c.close
        return (f"connection_close_{space}", side[d], fr, code, reason)
    if c.stateless_reset is not None:
        return ("stateless_reset", side[c.stateless_reset[2]], None, None, None)
    if not any(c.decrypted[d].get("1rtt", 0) for d in (0, 1)):
        return ("unknown", None, None, None, None)
    timeouts = [t for t in (c.transport_params[0].get("max_idle_timeout", 0),
                            c.transport_params[1].get("max_idle_timeout", 0)) if t > 0]
    if timeouts and capture_end - c.last_ts_ns > min(timeouts) * 1_000_000:
        return ("idle_timeout", None, None, None, None)
    return ("open_at_end", None, None, None, None)


def _hex(cid: bytes | None) -> str | None:
    return None if cid is None else cid.hex()


def _row(c: QuicConnection, capture_end: int) -> tuple[object, ...]:
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
        *_more(c, capture_end),
    )


def _more(c: QuicConnection, capture_end: int) -> tuple[object, ...]:
    dec = [sum(c.decrypted[d].values()) - c.decrypted[d].get("initial", 0) for d in (0, 1)]
    retry = c.retry_scid is not None
    zero = c.count(0, "0rtt") > 0
    kind = (None if not c.start_seen else
            ("retry_0rtt" if retry and zero else "retry" if retry else "0rtt" if zero
             else "1rtt"))
    ee = c.encrypted_extensions
    zero_rtt = (None if not zero else "unknown" if ee is None
                else "accepted" if ee.early_data else "rejected")
    hs_ms = (None if c.handshake_done_ts_ns is None or not c.start_seen
             else (c.handshake_done_ts_ns - c.first_ts_ns) / 1e6)
    rtt: list[object] = []
    for d in (0, 1):
        st = c.rtt[d]
        rtt += ([int(st[0]), _ms(st[1]), _ms(st[2])] if st else [0, None, None])
    lost = [_lost(c, 0), _lost(c, 1)]
    asm = c.assembler
    tpc, tps = c.transport_params
    return (
        c.secrets is not None, c.alpn, dec[0], dec[1], c.decrypt_failed,
        c.key_updates[0] + c.key_updates[1], kind, zero_rtt,
        None if c.server_hello is None else c.server_hello.psk_selected,
        *_tickets(c),
        c.handshake_done_frame, hs_ms,
        *rtt,
        lost[0][0], lost[0][1], lost[1][0], lost[1][1],
        c.resent_stream_bytes[0], c.resent_stream_bytes[1],
        asm.streams if asm is not None else 0,
        asm.stream_bytes(0) if asm is not None else 0,
        asm.stream_bytes(1) if asm is not None else 0,
        asm.gaps() if asm is not None else 0,
        tpc.get("max_idle_timeout"), tps.get("max_idle_timeout"),
        tpc.get("ack_delay_exponent"), tps.get("ack_delay_exponent"),
        *_end(c, capture_end),
        *_pto_values(c, 0),
        *_pto_values(c, 1),
    )


def _tickets(c: QuicConnection) -> tuple[object, ...]:
    """session_tickets, ticket_frame, ticket_lifetime_s, ticket_max_early_data,
    ticket_allows_0rtt."""
    hidden = c.count(1, "1rtt") - c.resets[1] - c.decrypted[1].get("1rtt", 0)
    known = c.start_seen and hidden == 0 and c.app_crypto[1].complete
    t = c.ticket
    if t is None:
        return (c.tickets if known else None, None, None, None, None)
    return (c.tickets if known else None, c.ticket_frame, t.lifetime_s, t.max_early_data,
            t.max_early_data is not None)


def _pto_values(c: QuicConnection, d: int) -> tuple[object, ...]:
    hidden = c.initial_failed > 0 if d == 0 else False
    dec = c.decrypted[d]
    for ptype in ("initial", "handshake", "0rtt", "1rtt"):
        if c.count(d, ptype) > dec.get(ptype, 0):
            hidden = True
    if hidden or not sum(dec.values()):
        return (None, None, None, None)
    t = c.pto[d]
    return (t.episodes, t.probes, t.first_frame,
            None if t.longest_ns < 0 else t.longest_ns / 1e6)


def quic_connections_table(tracker: QuicTracker | None) -> pd.DataFrame:
    """The ``quic_connections`` table (empty with all columns when ``tracker`` is None)."""
    if tracker is None:
        return QUIC_CONNECTIONS.frame([])
    end = tracker.last_ts_ns
    return QUIC_CONNECTIONS.frame([_row(c, end) for c in tracker.connections])


def quic_packets_table(tracker: QuicTracker | None) -> pd.DataFrame:
    """The ``quic_packets`` table, in capture order (empty when ``tracker`` is None)."""
    if tracker is None:
        return QUIC_PACKETS.frame([])
    return QUIC_PACKETS.frame(tracker.packet_rows)


def quic_frames_table(tracker: QuicTracker | None) -> pd.DataFrame:
    """The ``quic_frames`` table, in capture order (empty when ``tracker`` is None)."""
    if tracker is None:
        return QUIC_FRAMES.frame([])
    return QUIC_FRAMES.frame(tracker.frame_rows)
