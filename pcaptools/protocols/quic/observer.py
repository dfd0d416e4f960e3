"""The QUIC datagram observer: every UDP datagram of port 443 (and what the probe accepts on
other ports) split into its QUIC packets, mapped to one connection index per connection (in
first-seen order, like ``tcp_stream``), Initial packets decrypted and their CRYPTO frames fed
to the TLS handshake parser (SNI, ALPN, versions, cipher, key share group, JA4).

Connection IDs map datagrams to connections: the client's first Initial opens a connection
(its destination connection ID is the ``original_dcid``); every connection ID either side
announces in a long header (and the one a Retry hands out) is registered to it; a datagram
whose connection IDs are unknown goes to the connection of its UDP 5-tuple (zero-length
connection IDs, and short headers after a migration the keys would show). A short header on
port 443 of an unknown flow opens a connection whose start was not captured; on other ports
it is ignored (the probe accepts short headers only so that a known flow keeps its packets).

Nothing beyond the Initial packets is decrypted (no key log support yet): Handshake, 0-RTT
and 1-RTT packets are counted and listed with status ``no_key``. Never raises on wire data:
what does not parse is a ``quic.*`` row of the warnings table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...diagnostics import Diagnostics
from ...net.packet import UdpDatagram
from ...tcp.stream import Direction
from ..tls.handshake import (
    ClientHello,
    HandshakeParseError,
    ServerHello,
    parse_client_hello,
    parse_server_hello,
)
from .initial import (
    CryptoStream,
    InitialKeys,
    QuicDecryptError,
    initial_keys,
    open_initial,
    parse_initial_frames,
)
from .packets import QuicPacket, looks_like_quic, split_datagram

__all__ = [
    "MAX_CRYPTO_BYTES",
    "MAX_QUIC_CONNECTIONS",
    "MAX_QUIC_PACKET_ROWS",
    "PACKET_STATUSES",
    "QUIC_PORT",
    "QuicConnection",
    "QuicTracker",
    "looks_like_quic_datagram",
]

QUIC_PORT = 443
"""the UDP port QUIC is registered for (HTTP/3)"""
MAX_QUIC_PACKET_ROWS = 2_000_000
"""quic_packets rows kept per load; later packets are counted in quic_connections only"""
MAX_QUIC_CONNECTIONS = 100_000
"""QUIC connections tracked per load; datagrams that would open more are not analysed"""
MAX_CRYPTO_BYTES = 65_536
"""bytes of an Initial CRYPTO stream held ahead of the parsed point (one direction)"""

#: packet status -> meaning (the vocabulary of ``quic_packets.status``)
PACKET_STATUSES: dict[str, str] = {
    "decrypted": "an Initial packet decrypted with the keys of RFC 9001 §5.2 (no key log needed)",
    "no_key": "a Handshake, 0-RTT or 1-RTT packet: its keys come from the TLS handshake and "
    "need a key log (not supported yet), so it stays encrypted",
    "no_client_initial": "an Initial packet of a connection whose client Initial was not "
    "captured: its keys (from the client's destination connection ID) are unknown",
    "decrypt_failed": "an Initial packet that did not decrypt (a quic.initial_decrypt_failed row)",
    "not_protected": "a Retry or Version Negotiation packet: not encrypted",
    "unsupported_version": "a long header of a QUIC version pcaptools does not know",
}

_C2S = Direction.CLIENT_TO_SERVER
_S2C = Direction.SERVER_TO_CLIENT
_LABELS = (_C2S.label, _S2C.label)
_COUNTED = ("initial", "0rtt", "handshake", "1rtt", "retry", "version_negotiation", "unknown")


def looks_like_quic_datagram(d: UdpDatagram) -> bool:
    """The registry probe: :func:`.packets.looks_like_quic` of the datagram's payload."""
    return looks_like_quic(d.payload)


@dataclass(slots=True)
class QuicConnection:
    """One QUIC connection, as far as the packets show it without a key log."""

    index: int
    first_frame: int
    first_ts_ns: int
    ip_version: int
    client_addr: bytes
    client_port: int
    server_addr: bytes
    server_port: int
    last_frame: int = 0
    last_ts_ns: int = 0
    start_seen: bool = True
    """False when the first packet seen was not a long header (capture started after it)"""
    versions: list[int] = field(default_factory=list)
    """distinct versions of the long headers (0: Version Negotiation), in first-seen order"""
    version: int | None = None
    """version of the latest long header other than Version Negotiation"""
    original_dcid: bytes | None = None
    initial_dcid: bytes | None = None
    """the destination connection ID the Initial keys come from (the Retry's after a Retry)"""
    key_dcids: list[bytes] = field(default_factory=list)
    """every connection ID the Initial keys may come from (the original DCID, Retry SCIDs)"""
    client_scid: bytes | None = None
    server_scid: bytes | None = None
    retry_scid: bytes | None = None
    client_hello: ClientHello | None = None
    client_hello_frame: int | None = None
    server_hello: ServerHello | None = None
    server_hello_frame: int | None = None
    packets: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))
    """per direction: packet type -> packets"""
    datagrams: list[int] = field(default_factory=lambda: [0, 0])
    payload_bytes: list[int] = field(default_factory=lambda: [0, 0])
    """UDP payload bytes per direction"""
    wire_bytes: list[int] = field(default_factory=lambda: [0, 0])
    """frame bytes per direction"""
    initial_decrypted: int = 0
    initial_failed: int = 0
    cids: tuple[set[bytes], set[bytes]] = field(default_factory=lambda: (set(), set()))
    """per direction: the destination connection IDs its packets may carry"""
    largest_pn: list[int] = field(default_factory=lambda: [-1, -1])
    """largest Initial packet number per direction"""
    crypto: tuple[CryptoStream, CryptoStream] = field(
        default_factory=lambda: (CryptoStream(MAX_CRYPTO_BYTES), CryptoStream(MAX_CRYPTO_BYTES)))
    keys: tuple[int, bytes, tuple[InitialKeys, InitialKeys] | None] | None = None
    """(version, dcid, keys) of the latest derivation"""

    def count(self, direction: int, ptype: str) -> int:
        return self.packets[direction].get(ptype, 0)

    @property
    def needs_keylog(self) -> bool:
        """Handshake, 0-RTT or 1-RTT packets were seen: a key log would show more"""
        return any(self.count(d, t) for d in (0, 1) for t in ("handshake", "0rtt", "1rtt"))


class QuicTracker:
    """The QUIC observer of one load (a :class:`~..registry.DatagramObserver`). Its
    ``connections`` and ``packet_rows`` are read by :mod:`pcaptools.tables.quic_tables`."""

    __slots__ = ("_by_cid", "_by_flow", "connections", "diag", "max_connections",
                 "max_packet_rows", "packet_rows", "rows_dropped")

    def __init__(self, diag: Diagnostics, *, max_packet_rows: int = MAX_QUIC_PACKET_ROWS,
                 max_connections: int = MAX_QUIC_CONNECTIONS) -> None:
        self.diag = diag
        self.connections: list[QuicConnection] = []
        self.packet_rows: list[tuple[object, ...]] = []
        """(frame, ts_ns, connection, direction, index, long, type, version, dcid, scid,
        length, packet number, status, frames): see quic_tables.QUIC_PACKETS"""
        self.max_packet_rows = max_packet_rows
        self.max_connections = max_connections
        self.rows_dropped = 0
        self._by_cid: dict[bytes, tuple[QuicConnection, int]] = {}
        """connection ID -> (connection, direction of the packets that carry it as DCID)"""
        self._by_flow: dict[tuple[bytes, int, bytes, int], tuple[QuicConnection, int]] = {}

    # ------------------------------------------------------------------ the datagram

    def datagram(self, d: UdpDatagram) -> None:
        payload = d.payload
        if not payload or not payload[0] & 0xC0:
            return  # not QUIC (gQUIC's public header, other protocols on port 443)
        key = (d.src, d.sport, d.dst, d.dport)
        flow = self._by_flow.get(key)
        known: set[bytes] | tuple[()] = flow[0].cids[flow[1]] if flow is not None else ()
        packets, error = split_datagram(payload, known)
        if flow is None:
            flow = self._connection_of(d, packets)
            if flow is None:
                if error is not None and payload[0] & 0x80:
                    self.diag.add("quic.malformed_packet", f"UDP {d.sport} -> {d.dport}: {error}",
                                  ts_ns=d.ts_ns, frame=d.frame)
                return
        conn, direction = flow
        conn.last_frame = d.frame
        conn.last_ts_ns = d.ts_ns
        conn.datagrams[direction] += 1
        conn.payload_bytes[direction] += len(payload)
        conn.wire_bytes[direction] += d.frame_len
        for i, pkt in enumerate(packets):
            self._packet(d, conn, direction, i, pkt)
        if error is not None:
            self.diag.add("quic.malformed_packet",
                          f"connection {conn.index} {_LABELS[direction]}: {error}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])

    def _connection_of(self, d: UdpDatagram,
                       packets: list[QuicPacket]) -> tuple[QuicConnection, int] | None:
        """The connection and direction of a datagram of a flow not seen before."""
        if not packets:
            return None
        p = packets[0]
        by_cid = self._by_cid
        found = by_cid.get(p.dcid) if p.dcid else None
        if found is None and p.scid:
            rev = by_cid.get(p.scid)
            if rev is not None:
                found = (rev[0], 1 - rev[1])
        key = (d.src, d.sport, d.dst, d.dport)
        if found is None:
            if not p.long and QUIC_PORT not in (d.sport, d.dport):
                return None  # a probe's guess on another port, of a flow no long header opened
            if len(self.connections) >= self.max_connections:
                self.diag.add("quic.too_many_connections",
                              f"more than {self.max_connections} QUIC connections: UDP "
                              f"{d.sport} -> {d.dport} is not analysed",
                              ts_ns=d.ts_ns, frame=d.frame)
                return None
            if p.packet_type in ("initial", "0rtt"):
                sender_is_client = True
            elif p.packet_type in ("retry", "version_negotiation"):
                sender_is_client = False
            else:  # a handshake or short header first: the side on port 443 is the server
                sender_is_client = d.sport != QUIC_PORT or d.dport == QUIC_PORT
            if sender_is_client:
                conn = QuicConnection(len(self.connections), d.frame, d.ts_ns, d.ip_version,
                                      d.src, d.sport, d.dst, d.dport)
            else:
                conn = QuicConnection(len(self.connections), d.frame, d.ts_ns, d.ip_version,
                                      d.dst, d.dport, d.src, d.sport)
            conn.start_seen = p.packet_type in ("initial", "0rtt")
            self.connections.append(conn)
            found = (conn, _C2S if sender_is_client else _S2C)
        conn, direction = found
        self._by_flow[key] = (conn, direction)
        self._by_flow[(d.dst, d.dport, d.src, d.sport)] = (conn, 1 - direction)
        return found

    def _register(self, conn: QuicConnection, cid: bytes, direction: int) -> None:
        """``cid`` is a destination connection ID of ``conn``'s packets in ``direction``."""
        if cid and cid not in conn.cids[direction]:
            conn.cids[direction].add(cid)
            self._by_cid.setdefault(cid, (conn, direction))

    # ------------------------------------------------------------------ one packet

    def _packet(self, d: UdpDatagram, conn: QuicConnection, direction: int, index: int,
                pkt: QuicPacket) -> None:
        ptype = pkt.packet_type
        counts = conn.packets[direction]
        counts[ptype] = counts.get(ptype, 0) + 1
        pn: int | None = None
        frames: str | None = None
        if pkt.long:
            version = pkt.version
            assert version is not None
            if version not in conn.versions:
                conn.versions.append(version)
            if version:
                conn.version = version
            dcid = pkt.dcid or b""
            scid = pkt.scid or b""
            self._register(conn, dcid, direction)
            self._register(conn, scid, 1 - direction)
            if direction == _C2S:
                if conn.client_scid is None:
                    conn.client_scid = scid
                if ptype == "initial" and conn.original_dcid is None:
                    conn.original_dcid = dcid
                    if conn.initial_dcid is None:
                        conn.initial_dcid = dcid
                        conn.key_dcids.append(dcid)
            elif ptype == "retry":
                if conn.retry_scid is None:
                    conn.retry_scid = scid
                conn.initial_dcid = scid  # the client's next Initial goes to it, keys from it
                if scid not in conn.key_dcids and len(conn.key_dcids) < 8:
                    conn.key_dcids.append(scid)
            elif ptype != "version_negotiation" and conn.server_scid is None:
                conn.server_scid = scid
            if ptype == "initial":
                status, pn, frames = self._initial(d, conn, direction, pkt)
            elif ptype in ("retry", "version_negotiation"):
                status = "not_protected"
            elif ptype == "unknown":
                status = "unsupported_version"
            else:
                status = "no_key"
        else:
            status = "no_key"
        if len(self.packet_rows) < self.max_packet_rows:
            self.packet_rows.append((
                d.frame, d.ts_ns, conn.index, _LABELS[direction], index, pkt.long, ptype,
                pkt.version, None if pkt.dcid is None else pkt.dcid.hex(),
                None if pkt.scid is None else pkt.scid.hex(), pkt.end - pkt.start, pn, status,
                frames,
            ))
        else:
            if not self.rows_dropped:
                self.diag.add("quic.packet_rows_capped",
                              f"more than {self.max_packet_rows} QUIC packets: later ones are "
                              "counted in quic_connections but not listed in quic_packets",
                              ts_ns=d.ts_ns, frame=d.frame)
            self.rows_dropped += 1

    def _initial(self, d: UdpDatagram, conn: QuicConnection, direction: int,
                 pkt: QuicPacket) -> tuple[str, int | None, str | None]:
        """Decrypt an Initial packet and take its CRYPTO frames -> (status, pn, frames)."""
        version = pkt.version
        assert version is not None and pkt.pn_offset is not None
        if conn.initial_dcid is None:
            return "no_client_initial", None, None
        raw = d.payload[pkt.start:pkt.end]
        pn_offset = pkt.pn_offset - pkt.start
        # the keys come from the client's first Initial's DCID, or from a Retry's SCID: the
        # current one first, then (two Retries, a Retry lost or ignored) the other candidates
        candidates = [conn.initial_dcid]
        candidates += [c for c in conn.key_dcids if c != conn.initial_dcid]
        opened = None
        error = ""
        for dcid in candidates:
            cached = conn.keys
            if cached is None or cached[0] != version or cached[1] != dcid:
                cached = conn.keys = (version, dcid, initial_keys(version, dcid))
            keys = cached[2]
            if keys is None:
                return "unsupported_version", None, None
            try:
                opened = open_initial(raw, pn_offset, keys[direction], conn.largest_pn[direction])
            except QuicDecryptError as exc:
                error = str(exc)
                continue
            conn.initial_dcid = dcid
            break
        if opened is None:
            conn.initial_failed += 1
            self.diag.add("quic.initial_decrypt_failed",
                          f"connection {conn.index} {_LABELS[direction]} Initial: {error}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
            return "decrypt_failed", None, None
        conn.initial_decrypted += 1
        pn = opened.packet_number
        if pn > conn.largest_pn[direction]:
            conn.largest_pn[direction] = pn
        names, crypto, stop = parse_initial_frames(opened.payload)
        if stop is not None:
            self.diag.add("quic.malformed_frame",
                          f"connection {conn.index} {_LABELS[direction]} Initial {pn}: {stop}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
        stream = conn.crypto[direction]
        for off, data in crypto:
            was = stream.overflow
            for mtype, body in stream.add(off, data):
                self._handshake(d, conn, direction, mtype, body)
            if stream.overflow and not was:
                self.diag.add("quic.crypto_overflow",
                              f"connection {conn.index} {_LABELS[direction]}: Initial CRYPTO "
                              f"data beyond {stream.max_bytes} bytes not yet parsed; the rest "
                              "of its handshake is not read",
                              ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
        return "decrypted", pn, ",".join(names)

    def _handshake(self, d: UdpDatagram, conn: QuicConnection, direction: int, mtype: int,
                   body: bytes) -> None:
        try:
            if mtype == 1 and direction == _C2S and conn.client_hello is None:
                conn.client_hello = parse_client_hello(body)
                conn.client_hello_frame = d.frame
            elif mtype == 2 and direction == _S2C and conn.server_hello is None:
                conn.server_hello = parse_server_hello(body)
                conn.server_hello_frame = d.frame
        except HandshakeParseError as exc:
            self.diag.add("quic.tls_malformed",
                          f"connection {conn.index} {_LABELS[direction]} TLS handshake message "
                          f"{mtype} in Initial CRYPTO frames: {exc}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
