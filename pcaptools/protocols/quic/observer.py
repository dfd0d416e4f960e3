"""The QUIC datagram observer: every UDP datagram of port 443 (and what the probe accepts on
other ports) split into its QUIC packets, mapped to one connection index per connection (in
first-seen order, like ``tcp_stream``), Initial packets decrypted and their CRYPTO frames fed
to the TLS handshake parser (SNI, ALPN, versions, cipher, key share group, JA4).

Connection IDs map datagrams to connections: the client's first Initial opens a connection
(its destination connection ID is the ``original_dcid``); every connection ID either side
announces in a long header (and the one a Retry hands out, and, once decrypted, the ones of
NEW_CONNECTION_ID frames) is registered to it; a datagram whose connection IDs are unknown
goes to the connection of its UDP 5-tuple (zero-length connection IDs). A short header on
port 443 of an unknown flow opens a connection whose start was not captured; on other ports
it is ignored (the probe accepts short headers only so that a known flow keeps its packets).

With a TLS key log (a file, or the pcapng Decryption Secrets Blocks: the load's
:class:`~pcaptools.protocols.tls.keylog.KeyLog`), the secrets of the connection's ClientHello
random decrypt its Handshake, 0-RTT and 1-RTT packets (:mod:`.protection`; key updates
followed by the key phase bit). Every decrypted packet's frames (:mod:`.frames`) are kept as
``quic_frames`` rows; Handshake CRYPTO frames give EncryptedExtensions (the negotiated ALPN,
0-RTT accepted, the server's transport parameters); STREAM frames are reassembled and handed
to the application observer of the negotiated ALPN (:mod:`.reassembly`, :mod:`.streams`);
ACK frames give RTT samples and which packets the peer acknowledged (:class:`PnSpace`).

Never raises on wire data: what does not parse is a ``quic.*`` row of the warnings table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...diagnostics import Diagnostics
from ...net.packet import UdpDatagram
from ...tcp.stream import Direction
from ..registry import REGISTRY
from ..tls.handshake import (
    ClientHello,
    EncryptedExtensions,
    HandshakeParseError,
    NewSessionTicket,
    ServerHello,
    parse_client_hello,
    parse_encrypted_extensions,
    parse_new_session_ticket,
    parse_server_hello,
)
from ..tls.keylog import KeyLog, SessionSecrets
from .frames import QuicFrame, parse_frames
from .initial import (
    CryptoStream,
    InitialKeys,
    QuicDecryptError,
    initial_keys,
    open_initial,
)
from .packets import QuicHeaderError, QuicPacket, looks_like_quic, read_varint, split_datagram
from .protection import QUIC_SUITES, PacketProtection, suites_for_secret, unprotect
from .ranges import MAX_RANGES, RangeSet
from .reassembly import QuicStreamAssembler
from .streams import QuicAppContext
from .tparams import EXT_QUIC_TRANSPORT_PARAMETERS, find_extension, parse_transport_parameters

__all__ = [
    "MAX_CRYPTO_BYTES",
    "MAX_QUIC_CONNECTIONS",
    "MAX_QUIC_FRAME_ROWS",
    "MAX_QUIC_PACKET_ROWS",
    "MAX_RANGES",
    "MAX_RTT_PENDING",
    "PACKET_STATUSES",
    "QUIC_PORT",
    "PnSpace",
    "PtoTrack",
    "QuicConnection",
    "QuicTracker",
    "RangeSet",
    "looks_like_quic_datagram",
]

QUIC_PORT = 443
"""the UDP port QUIC is registered for (HTTP/3)"""
MAX_QUIC_PACKET_ROWS = 2_000_000
"""quic_packets rows kept per load; later packets are counted in quic_connections only"""
MAX_QUIC_FRAME_ROWS = 4_000_000
"""quic_frames rows kept per load; later frames are still analysed (streams, ACKs)"""
MAX_QUIC_CONNECTIONS = 100_000
"""QUIC connections tracked per load; datagrams that would open more are not analysed"""
MAX_CRYPTO_BYTES = 65_536
"""bytes of an Initial or Handshake CRYPTO stream held ahead of the parsed point (one
direction)"""
MAX_RTT_PENDING = 4096
"""send times kept per direction and packet number space for RTT samples (the most recent)"""

#: packet status -> meaning (the vocabulary of ``quic_packets.status``)
PACKET_STATUSES: dict[str, str] = {
    "decrypted": "decrypted: an Initial packet with the keys of RFC 9001 §5.2 (no key log "
    "needed), a Handshake, 0-RTT or 1-RTT packet with the key log's secrets",
    "no_key": "a Handshake, 0-RTT or 1-RTT packet of a connection the key log has no secrets "
    "for (no key log, its ClientHello random is not in it, or its ClientHello was not captured)",
    "no_epoch_key": "the key log has the connection's session but not the secret of this "
    "packet's epoch (e.g. no CLIENT_EARLY_TRAFFIC_SECRET for a 0-RTT packet)",
    "unknown_cid": "a short-header packet whose destination connection ID is not one the "
    "connection announced: where its packet number starts is unknown, so it is not decrypted",
    "no_client_initial": "an Initial packet of a connection whose client Initial was not "
    "captured: its keys (from the client's destination connection ID) are unknown",
    "decrypt_failed": "a packet that did not decrypt (a quic.initial_decrypt_failed or "
    "quic.decrypt_failed row)",
    "stateless_reset": "a short-header datagram that does not decrypt and ends in a stateless "
    "reset token the peer handed out (RFC 9000 §10.3): the sender has no state for the "
    "connection",
    "not_protected": "a Retry or Version Negotiation packet: not encrypted",
    "unsupported_version": "a long header of a QUIC version pcaptools does not know",
}

_C2S = Direction.CLIENT_TO_SERVER
_S2C = Direction.SERVER_TO_CLIENT
_LABELS = (_C2S.label, _S2C.label)
_SPACE = {"initial": 0, "handshake": 1, "0rtt": 2, "1rtt": 2}
_INITIAL_FRAMES = frozenset({0x00, 0x01, 0x02, 0x03, 0x06, 0x1C})
_FAILED = "AEAD authentication failed with the key log's secret"
_TAG = 16
_NOT_ELICITING = frozenset({"ACK", "PADDING", "CONNECTION_CLOSE"})
"""AEAD tag bytes of a protected packet (every QUIC v1/v2 suite; the Retry integrity tag)"""


def looks_like_quic_datagram(d: UdpDatagram) -> bool:
    """The registry probe: :func:`.packets.looks_like_quic` of the datagram's payload."""
    return looks_like_quic(d.payload)


@dataclass(slots=True)
class PnSpace:
    """One direction's packets of one packet number space (Initial, Handshake, application):
    the packet numbers seen, the ones the peer acknowledged, and send times for RTT."""

    seen: RangeSet = field(default_factory=RangeSet)
    acked: RangeSet = field(default_factory=RangeSet)
    """packet numbers of this direction the peer's ACK frames acknowledged"""
    largest_acked: int = -1
    sent_ts: dict[int, int] = field(default_factory=dict)
    """packet number -> capture time (the most recent :data:`MAX_RTT_PENDING`)"""
    retransmitted_frames: int = 0


@dataclass(slots=True)
class PtoTrack:
    """One direction's PTO probes (RFC 9002 §6.2): packets carrying a PING or data sent
    before (STREAM or CRYPTO offsets already sent) that left after a silence of the peer's
    ACKs longer than a probe timeout could be. See ``quic_connections.*_pto_*``."""

    last_ack_ts: int = -1
    """capture time of the peer's last ACK frame that acknowledged a new largest packet"""
    last_ae_ts: int = -1
    """capture time of this direction's last ack-eliciting packet"""
    last_ae: tuple[int, int] = (-1, -1)
    """its (packet number space, packet number)"""
    episodes: int = 0
    probes: int = 0
    first_frame: int | None = None
    in_episode: bool = False
    start_ts: int = 0
    """the packet before the episode's first probe (when the timer was armed, at the latest)"""
    longest_ns: int = -1
    """longest episode ended by the peer's ACK (-1: none ended)"""


@dataclass(slots=True)
class QuicConnection:
    """One QUIC connection, as far as its packets (and the key log) show it."""

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
    encrypted_extensions: EncryptedExtensions | None = None
    transport_params: tuple[dict[str, int], dict[str, int]] = field(
        default_factory=lambda: ({}, {}))
    """(client's, server's) integer transport parameters (ClientHello, EncryptedExtensions)"""
    packets: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))
    """per direction: packet type -> packets"""
    decrypted: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))
    """per direction: packet type -> packets decrypted"""
    datagrams: list[int] = field(default_factory=lambda: [0, 0])
    payload_bytes: list[int] = field(default_factory=lambda: [0, 0])
    """UDP payload bytes per direction"""
    wire_bytes: list[int] = field(default_factory=lambda: [0, 0])
    """frame bytes per direction"""
    initial_decrypted: int = 0
    initial_failed: int = 0
    decrypt_failed: int = 0
    """Handshake, 0-RTT and 1-RTT packets that did not decrypt"""
    cids: tuple[set[bytes], set[bytes]] = field(default_factory=lambda: (set(), set()))
    """per direction: the destination connection IDs its packets may carry"""
    largest_pn: list[list[int]] = field(default_factory=lambda: [[-1, -1, -1], [-1, -1, -1]])
    """largest packet number per direction and space (Initial, Handshake, application)"""
    crypto: tuple[CryptoStream, CryptoStream] = field(
        default_factory=lambda: (CryptoStream(MAX_CRYPTO_BYTES), CryptoStream(MAX_CRYPTO_BYTES)))
    hs_crypto: tuple[CryptoStream, CryptoStream] = field(
        default_factory=lambda: (CryptoStream(MAX_CRYPTO_BYTES), CryptoStream(MAX_CRYPTO_BYTES)))
    app_crypto: tuple[CryptoStream, CryptoStream] = field(
        default_factory=lambda: (CryptoStream(MAX_CRYPTO_BYTES), CryptoStream(MAX_CRYPTO_BYTES)))
    """1-RTT CRYPTO streams: post-handshake messages (the server's NewSessionTickets)"""
    tickets: int = 0
    """NewSessionTicket messages the server sent in 1-RTT CRYPTO frames"""
    ticket: NewSessionTicket | None = None
    """the first of them that parsed"""
    ticket_frame: int | None = None
    """frame completing the first NewSessionTicket"""
    keys: tuple[int, bytes, tuple[InitialKeys, InitialKeys] | None] | None = None
    """(version, dcid, keys) of the latest Initial key derivation"""
    secrets: SessionSecrets | None = None
    """the key log's secrets of this connection's ClientHello random"""
    prot: dict[tuple[int, str], PacketProtection | None] = field(default_factory=dict)
    """(direction, "handshake" | "0rtt") -> keys (None: no secret, or none that decrypts)"""
    app_keys: tuple[dict[int, PacketProtection], dict[int, PacketProtection]] = field(
        default_factory=lambda: ({}, {}))
    """per direction: 1-RTT key generation -> keys"""
    key_phase: list[int] = field(default_factory=lambda: [0, 0])
    """current 1-RTT key generation per direction (its key phase bit is generation & 1)"""
    key_updates: list[int] = field(default_factory=lambda: [0, 0])
    spaces: tuple[tuple[PnSpace, PnSpace, PnSpace], tuple[PnSpace, PnSpace, PnSpace]] = field(
        default_factory=lambda: ((PnSpace(), PnSpace(), PnSpace()),
                                 (PnSpace(), PnSpace(), PnSpace())))
    rtt: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    """per sending direction: [samples, min_ns, smoothed_ns, latest_ns]"""
    stream_sent: tuple[dict[int, RangeSet], dict[int, RangeSet]] = field(
        default_factory=lambda: ({}, {}))
    """per direction: stream id -> byte offsets sent (to count resent STREAM bytes), as
    ranges of offsets"""
    resent_stream_bytes: list[int] = field(default_factory=lambda: [0, 0])
    resent_stream_frames: list[int] = field(default_factory=lambda: [0, 0])
    handshake_done_frame: int | None = None
    handshake_done_ts_ns: int | None = None
    close: tuple[int, int, int, str, int, str, int | None] | None = None
    """the first CONNECTION_CLOSE: (frame, ts_ns, direction, "transport" | "application",
    error code, reason, frame type)"""
    reset_tokens: tuple[set[bytes], set[bytes]] = field(default_factory=lambda: (set(), set()))
    """per direction: stateless reset tokens the packets of that direction may end in (the
    ones the receiver of those packets handed out)"""
    stateless_reset: tuple[int, int, int] | None = None
    """(frame, ts_ns, direction) of a stateless reset"""
    resets: list[int] = field(default_factory=lambda: [0, 0])
    """stateless reset datagrams per direction (counted as 1-RTT packets, never decrypted)"""
    crypto_sent: tuple[tuple[RangeSet, RangeSet, RangeSet], tuple[RangeSet, RangeSet, RangeSet]] = (
        field(default_factory=lambda: ((RangeSet(), RangeSet(), RangeSet()),
                                       (RangeSet(), RangeSet(), RangeSet()))))
    """per direction and packet number space: CRYPTO offsets sent (to tell resent ones)"""
    pto: tuple[PtoTrack, PtoTrack] = field(default_factory=lambda: (PtoTrack(), PtoTrack()))
    assembler: QuicStreamAssembler | None = None
    alpn: str | None = None
    """the negotiated ALPN (EncryptedExtensions, else the only one offered)"""

    def count(self, direction: int, ptype: str) -> int:
        return self.packets[direction].get(ptype, 0)

    @property
    def needs_keylog(self) -> bool:
        """Handshake, 0-RTT or 1-RTT packets were seen, not all of them decrypted"""
        for d in (0, 1):
            dec = self.decrypted[d]
            for t in ("handshake", "0rtt", "1rtt"):
                if self.count(d, t) > dec.get(t, 0):
                    return True
        return False


_MIN, _SMOOTH, _LATEST, _SAMPLES = 1, 2, 3, 0


class QuicTracker:
    """The QUIC observer of one load (a :class:`~..registry.DatagramObserver`). Its
    ``connections``, ``packet_rows`` and ``frame_rows`` are read by
    :mod:`pcaptools.tables.quic_tables`."""

    __slots__ = ("_by_cid", "_by_flow", "_cid_lens", "_plain_len", "connections", "diag",
                 "finished", "frame_rows", "frames_dropped", "keylog", "last_ts_ns",
                 "max_connections", "max_frame_rows", "max_packet_rows", "packet_rows",
                 "rows_dropped")

    def __init__(self, diag: Diagnostics, keylog: KeyLog | None = None, *,
                 max_packet_rows: int = MAX_QUIC_PACKET_ROWS,
                 max_frame_rows: int = MAX_QUIC_FRAME_ROWS,
                 max_connections: int = MAX_QUIC_CONNECTIONS) -> None:
        self.diag = diag
        self.keylog = keylog
        """the load's key log (filled from a file, and from pcapng DSBs as they are read)"""
        self.connections: list[QuicConnection] = []
        self.packet_rows: list[tuple[object, ...]] = []
        """(frame, ts_ns, connection, direction, index, long, type, version, dcid, scid,
        length, packet number, status, frames, header bytes): see quic_tables.QUIC_PACKETS"""
        self.frame_rows: list[tuple[object, ...]] = []
        """see quic_tables.QUIC_FRAMES"""
        self.max_packet_rows = max_packet_rows
        self.max_frame_rows = max_frame_rows
        self.max_connections = max_connections
        self.rows_dropped = 0
        self.frames_dropped = 0
        self.finished = False
        self.last_ts_ns = 0
        self._by_cid: dict[bytes, tuple[QuicConnection, int]] = {}
        """connection ID -> (connection, direction of the packets that carry it as DCID)"""
        self._by_flow: dict[tuple[bytes, int, bytes, int], tuple[QuicConnection, int]] = {}
        self._cid_lens: set[int] = set()
        self._plain_len = 0
        """plaintext bytes of the packet just decrypted (for its header_bytes)"""

    # ------------------------------------------------------------------ the datagram

    def datagram(self, d: UdpDatagram) -> None:
        payload = d.payload
        if not payload or not payload[0] & 0xC0:
            return  # not QUIC (gQUIC's public header, other protocols on port 443)
        self.last_ts_ns = d.ts_ns
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
            if packets and not packets[0].long and packets[0].dcid is None:
                packets, error = split_datagram(payload, flow[0].cids[flow[1]])
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
        if found is None and not p.long and p.dcid is None:
            # a short header on a new 5-tuple (a migration, a NAT rebinding): a connection ID
            # of a known connection (the lengths in use), from a long header or a decrypted
            # NEW_CONNECTION_ID frame
            payload = d.payload
            for n in sorted(self._cid_lens, reverse=True):
                found = by_cid.get(bytes(payload[1:1 + n]))
                if found is not None:
                    break
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
            self._cid_lens.add(len(cid))

    # ------------------------------------------------------------------ one packet

    def _packet(self, d: UdpDatagram, conn: QuicConnection, direction: int, index: int,
                pkt: QuicPacket) -> None:
        ptype = pkt.packet_type
        counts = conn.packets[direction]
        counts[ptype] = counts.get(ptype, 0) + 1
        pn: int | None = None
        frames: list[QuicFrame] | None = None
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
                sp = conn.spaces[_C2S][0]  # the Retry answers the client's Initials so far
                for lo, hi in sp.seen.ranges():
                    sp.acked.add(lo, hi)
                # the client's next Initial starts its handshake again: not a probe
                conn.pto[_C2S].last_ack_ts = d.ts_ns
                conn.crypto_sent[_C2S][0].clear()
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
                status, pn, frames = self._protected(d, conn, direction, pkt)
        else:
            status, pn, frames = self._protected(d, conn, direction, pkt)
        names: str | None = None
        size = pkt.end - pkt.start
        header: int | None
        if frames is not None:
            header = size - self._plain_len - _TAG
        elif status in ("no_key", "no_epoch_key", "unknown_cid", "no_client_initial",
                        "decrypt_failed"):
            # the bytes before the (protected) packet number
            header = ((pkt.pn_offset - pkt.start) if pkt.pn_offset is not None
                      else 1 + (len(pkt.dcid) if pkt.dcid is not None else 0))
        elif ptype == "retry":
            header = max(size - _TAG, 0)
        elif ptype == "version_negotiation":
            header = size
        else:  # stateless_reset, unsupported_version: no header to speak of
            header = None
        if frames is not None:
            dec = conn.decrypted[direction]
            dec[ptype] = dec.get(ptype, 0) + 1
            names = ",".join(f.name for f in frames)
            assert pn is not None
            self._frames(d, conn, direction, index, ptype, pn, frames)
        if len(self.packet_rows) < self.max_packet_rows:
            self.packet_rows.append((
                d.frame, d.ts_ns, conn.index, _LABELS[direction], index, pkt.long, ptype,
                pkt.version, None if pkt.dcid is None else pkt.dcid.hex(),
                None if pkt.scid is None else pkt.scid.hex(), size, pn, status,
                names, header,
            ))
        else:
            if not self.rows_dropped:
                self.diag.add("quic.packet_rows_capped",
                              f"more than {self.max_packet_rows} QUIC packets: later ones are "
                              "counted in quic_connections but not listed in quic_packets",
                              ts_ns=d.ts_ns, frame=d.frame)
            self.rows_dropped += 1

    def _initial(self, d: UdpDatagram, conn: QuicConnection, direction: int,
                 pkt: QuicPacket) -> tuple[str, int | None, list[QuicFrame] | None]:
        """Decrypt an Initial packet -> (status, pn, frames)."""
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
        largest = conn.largest_pn[direction]
        for dcid in candidates:
            cached = conn.keys
            if cached is None or cached[0] != version or cached[1] != dcid:
                cached = conn.keys = (version, dcid, initial_keys(version, dcid))
            keys = cached[2]
            if keys is None:
                return "unsupported_version", None, None
            try:
                opened = open_initial(raw, pn_offset, keys[direction], largest[0])
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
        self._plain_len = len(opened.payload)
        pn = opened.packet_number
        if pn > largest[0]:
            largest[0] = pn
        frames, stop = parse_frames(opened.payload)
        for i, f in enumerate(frames):
            if f.code not in _INITIAL_FRAMES:
                stop = f"frame type 0x{f.code:x} not allowed in an Initial packet"
                del frames[i:]
                break
        if stop is not None:
            self.diag.add("quic.malformed_frame",
                          f"connection {conn.index} {_LABELS[direction]} Initial {pn}: {stop}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
        return "decrypted", pn, frames

    # ------------------------------------------------------------------ key-log epochs

    def _secrets(self, conn: QuicConnection) -> SessionSecrets | None:
        s = conn.secrets
        if s is None and self.keylog and conn.client_hello is not None:
            s = conn.secrets = self.keylog.lookup(conn.client_hello.random)
        return s

    def _epoch_keys(self, conn: QuicConnection, direction: int, epoch: str,
                    secret: bytes, version: int, raw: bytes, pn_offset: int, long: bool,
                    largest: int) -> tuple[PacketProtection, Any] | None:
        """Keys of an epoch, found by the ServerHello's suite (else by trying the suites the
        secret's length allows on this packet), and the packet opened with them."""
        sh = conn.server_hello
        suites = ((sh.cipher_suite,) if sh is not None and sh.cipher_suite in QUIC_SUITES
                  else suites_for_secret(secret))
        for suite in suites:
            prot = PacketProtection(suite, secret, version)
            try:
                u = unprotect(raw, pn_offset, prot, largest, long)
                return prot, (u, prot.decrypt(u.header, u.ciphertext, u.packet_number))
            except QuicDecryptError:
                continue
        return None

    def _known_suite_keys(self, conn: QuicConnection, secret: bytes,
                          version: int) -> PacketProtection | None:
        """The keys of ``secret`` when the ServerHello named the suite (no trial needed)."""
        sh = conn.server_hello
        if sh is not None and sh.cipher_suite in QUIC_SUITES:
            return PacketProtection(sh.cipher_suite, secret, version)
        return None

    def _protected(self, d: UdpDatagram, conn: QuicConnection, direction: int,
                   pkt: QuicPacket) -> tuple[str, int | None, list[QuicFrame] | None]:
        """Decrypt a Handshake, 0-RTT or 1-RTT packet with the key log -> (status, pn,
        frames)."""
        ptype = pkt.packet_type
        long = pkt.long
        tokens = conn.reset_tokens[direction]
        if not long and tokens and bytes(d.payload[-16:]) in tokens and len(d.payload) >= 21:
            # a stateless reset (RFC 9000 §10.3): it ends in a token the receiver handed out
            # (an AEAD tag equals one with probability 2**-128)
            if conn.stateless_reset is None:
                conn.stateless_reset = (d.frame, d.ts_ns, direction)
            conn.resets[direction] += 1
            return "stateless_reset", None, None
        secrets = self._secrets(conn)
        if secrets is None:
            return "no_key", None, None
        if long:
            assert pkt.pn_offset is not None
            pn_offset = pkt.pn_offset - pkt.start
        else:
            if pkt.dcid is not None:
                pn_offset = 1 + len(pkt.dcid)
            elif (conn.client_scid if direction == _S2C else conn.server_scid) == b"":
                pn_offset = 1  # the receiver uses a zero-length connection ID
            else:
                return "unknown_cid", None, None
        raw = d.payload[pkt.start:pkt.end]
        space = _SPACE[ptype]
        largest = conn.largest_pn[direction]
        version = conn.version or 1
        plain: bytes | None = None
        pn = -1
        if ptype == "1rtt":
            gens = conn.app_keys[direction]
            if not gens:
                secret = (secrets.client_traffic if direction == _C2S
                          else secrets.server_traffic).get(0)
                if secret is None:
                    return self._maybe_reset(d, conn, direction, "no_epoch_key")
                found = self._epoch_keys(conn, direction, "1rtt", secret, version, raw,
                                         pn_offset, long, largest[space])
                if found is None:
                    known = self._known_suite_keys(conn, secret, version)
                    if known is not None:  # the next packets try these keys, once each
                        gens[0] = known
                    return self._failed(d, conn, direction, ptype, _FAILED)
                gens[0] = found[0]
                u, plain = found[1]
                pn = u.packet_number
            else:
                cur = conn.key_phase[direction]
                prot = gens[cur]
                try:
                    u = unprotect(raw, pn_offset, prot, largest[space], False)
                except QuicDecryptError as exc:
                    return self._failed(d, conn, direction, ptype, str(exc))
                pn = u.packet_number
                gen = cur if u.key_phase == (cur & 1) else (
                    cur + 1 if pn > largest[space] else cur - 1)
                if gen < 0:
                    gen = cur + 1
                keys = gens.get(gen)
                if keys is None and gen == cur + 1:
                    keys = gens[gen] = gens[cur].next_generation()
                    if len(gens) > 3:
                        del gens[min(gens)]
                if keys is None:
                    return self._failed(d, conn, direction, ptype,
                                        f"key phase {u.key_phase} of an old generation")
                try:
                    plain = keys.decrypt(u.header, u.ciphertext, pn)
                except QuicDecryptError as exc:
                    if gen == cur + 1:
                        gens.pop(gen, None)
                    return self._maybe_reset(d, conn, direction, "decrypt_failed", str(exc),
                                             ptype)
                if gen == cur + 1:
                    conn.key_phase[direction] = gen
                    conn.key_updates[direction] += 1
        else:
            cache_key = (direction, ptype)
            if cache_key in conn.prot:
                prot0 = conn.prot[cache_key]
                if prot0 is None:
                    return "no_epoch_key", None, None
                try:
                    u = unprotect(raw, pn_offset, prot0, largest[space], True)
                    plain = prot0.decrypt(u.header, u.ciphertext, u.packet_number)
                    pn = u.packet_number
                except QuicDecryptError as exc:
                    return self._failed(d, conn, direction, ptype, str(exc))
            else:
                if ptype == "handshake":
                    secret0 = (secrets.client_handshake if direction == _C2S
                               else secrets.server_handshake)
                else:
                    secret0 = secrets.client_early if direction == _C2S else None
                if secret0 is None:
                    conn.prot[cache_key] = None
                    return "no_epoch_key", None, None
                found = self._epoch_keys(conn, direction, ptype, secret0, version, raw,
                                         pn_offset, True, largest[space])
                if found is None:
                    known = self._known_suite_keys(conn, secret0, version)
                    if known is not None:  # the next packets try these keys, once each
                        conn.prot[cache_key] = known
                    return self._failed(d, conn, direction, ptype, _FAILED)
                conn.prot[cache_key] = found[0]
                u, plain = found[1]
                pn = u.packet_number
        assert plain is not None
        self._plain_len = len(plain)
        if pn > largest[space]:
            largest[space] = pn
        frames, stop = parse_frames(plain)
        if stop is not None:
            self.diag.add("quic.malformed_frame",
                          f"connection {conn.index} {_LABELS[direction]} {ptype} {pn}: {stop}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
        return "decrypted", pn, frames

    def _failed(self, d: UdpDatagram, conn: QuicConnection, direction: int, ptype: str,
                error: str) -> tuple[str, int | None, list[QuicFrame] | None]:
        conn.decrypt_failed += 1
        self.diag.add("quic.decrypt_failed",
                      f"connection {conn.index} {_LABELS[direction]} {ptype} packet: {error}",
                      ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
        return "decrypt_failed", None, None

    def _maybe_reset(self, d: UdpDatagram, conn: QuicConnection, direction: int, status: str,
                     error: str = "", ptype: str = "1rtt"
                     ) -> tuple[str, int | None, list[QuicFrame] | None]:
        """A short header that did not decrypt -> ``status`` (with a row when it failed)."""
        if status == "decrypt_failed":
            return self._failed(d, conn, direction, ptype, error)
        return status, None, None

    # ------------------------------------------------------------------ the frames

    def _frames(self, d: UdpDatagram, conn: QuicConnection, direction: int, index: int,
                ptype: str, pn: int, frames: list[QuicFrame]) -> None:
        space_i = _SPACE[ptype]
        space = conn.spaces[direction][space_i]
        space.seen.add(pn, pn)
        sent = space.sent_ts
        sent[pn] = d.ts_ns
        if len(sent) > MAX_RTT_PENDING:
            del sent[next(iter(sent))]
        rows = self.frame_rows
        keep = len(rows) < self.max_frame_rows
        label = _LABELS[direction]
        probe = eliciting = False
        for fi, f in enumerate(frames):
            name = f.name
            if name not in _NOT_ELICITING:
                eliciting = True
            ack_delay_us: int | None = None
            if name == "ACK":
                ack_delay_us = self._ack(d, conn, direction, space_i, f)
            elif name == "STREAM":
                probe |= self._stream(d, conn, direction, f)
            elif name == "CRYPTO":
                probe |= self._crypto(d, conn, direction, space_i, f)
            elif name == "PING":
                probe = True
            elif name == "RESET_STREAM":
                asm = self._assembler(conn)
                if asm is not None and f.stream_id is not None:
                    asm.reset(direction, f.stream_id, f.error_code or 0, f.maximum or 0,
                              d.ts_ns, d.frame)
            elif name == "NEW_CONNECTION_ID":
                if f.connection_id is not None:
                    self._register(conn, f.connection_id, 1 - direction)
                if f.reset_token is not None and len(conn.reset_tokens[1 - direction]) < 64:
                    conn.reset_tokens[1 - direction].add(f.reset_token)
            elif name == "HANDSHAKE_DONE":
                if conn.handshake_done_frame is None:
                    conn.handshake_done_frame = d.frame
                    conn.handshake_done_ts_ns = d.ts_ns
            elif name == "CONNECTION_CLOSE" and conn.close is None:
                conn.close = (d.frame, d.ts_ns, direction,
                              "application" if f.code == 0x1D else "transport",
                              f.error_code or 0, f.reason or "", f.error_frame_type)
                if conn.assembler is not None:
                    conn.assembler.finish(d.ts_ns, d.frame)
            if keep:
                if len(rows) >= self.max_frame_rows:
                    keep = False
                    if not self.frames_dropped:
                        self.diag.add("quic.frame_rows_capped",
                                      f"more than {self.max_frame_rows} QUIC frames: later "
                                      "ones are analysed but not listed in quic_frames",
                                      ts_ns=d.ts_ns, frame=d.frame)
                    self.frames_dropped += len(frames) - fi
                    continue
                ranges = (",".join(f"{lo}-{hi}" if lo != hi else str(lo)
                                   for lo, hi in f.ack_ranges) if name == "ACK" else None)
                rows.append((
                    d.frame, d.ts_ns, conn.index, label, index, ptype, pn, fi, name, f.code,
                    f.stream_id, f.offset, f.length, f.fin, f.ack_largest, f.ack_delay,
                    ack_delay_us, ranges,
                    None if f.ecn is None else ",".join(map(str, f.ecn)),
                    f.error_code,
                    None if name != "CONNECTION_CLOSE" else (
                        "application" if f.code == 0x1D else "transport"),
                    f.error_frame_type, f.reason, f.maximum, f.sequence, f.retire_prior_to,
                    None if f.connection_id is None else f.connection_id.hex(), f.size,
                ))
            else:
                self.frames_dropped += 1
        if eliciting:
            self._pto(conn, direction, space_i, pn, probe, d.ts_ns, d.frame)

    def _pto(self, conn: QuicConnection, direction: int, space_i: int, pn: int, probe: bool,
             ts: int, frame: int) -> None:
        """Is this ack-eliciting packet a PTO probe (RFC 9002 §6.2.4)? It carries a PING or
        data sent before; this direction's previous ack-eliciting packet is still
        unacknowledged; and the probe timer's start (that packet, or the peer's last ACK of
        a new largest packet number if later: §6.2.1) is at least the RTT ago (the larger
        smoothed RTT of the two directions: at either vantage one of them is the path's)
        plus, in the application space, the peer's max_ack_delay: a PTO is never shorter,
        and loss detection after an ACK (§6.1) retransmits sooner."""
        t = conn.pto[direction]
        prev_ts, (prev_space, prev_pn) = t.last_ae_ts, t.last_ae
        t.last_ae_ts, t.last_ae = ts, (space_i, pn)
        if not probe or prev_ts < 0 or prev_pn in conn.spaces[direction][prev_space].acked:
            return
        rtts = [st[_SMOOTH] for st in conn.rtt if st]
        wait = max(rtts) if rtts else 0.0
        if space_i == 2:
            wait += conn.transport_params[1 - direction].get("max_ack_delay", 25) * 1e6
        start = max(prev_ts, t.last_ack_ts)
        if ts - start < wait:
            return
        t.probes += 1
        if not t.in_episode:
            t.in_episode = True
            t.episodes += 1
            t.start_ts = start
            if t.first_frame is None:
                t.first_frame = frame

    def _ack(self, d: UdpDatagram, conn: QuicConnection, direction: int, space_i: int,
             f: QuicFrame) -> int | None:
        """An ACK frame sent in ``direction``: the peer's packets it acknowledges, an RTT
        sample of the peer's packets (RFC 9002 §5) -> the ack delay in microseconds."""
        peer = 1 - direction
        space = conn.spaces[peer][space_i]
        for lo, hi in f.ack_ranges:
            space.acked.add(lo, hi)
        largest = f.ack_largest
        assert largest is not None and f.ack_delay is not None
        exponent = conn.transport_params[direction].get("ack_delay_exponent", 3)
        delay_us = f.ack_delay << exponent if space_i == 2 else f.ack_delay << 3
        if largest <= space.largest_acked:
            return delay_us
        space.largest_acked = largest
        pto = conn.pto[peer]
        pto.last_ack_ts = d.ts_ns
        if pto.in_episode:
            pto.in_episode = False
            pto.longest_ns = max(pto.longest_ns, d.ts_ns - pto.start_ts)
        sent = space.sent_ts.get(largest)
        if sent is None:
            return delay_us
        latest = d.ts_ns - sent
        if latest < 0:
            return delay_us
        st = conn.rtt[peer]
        if not st:
            st.extend((1.0, float(latest), 0.0, float(latest)))
        else:
            st[_SAMPLES] += 1
            st[_MIN] = min(st[_MIN], float(latest))
            st[_LATEST] = float(latest)
        adjusted = float(latest)
        if space_i == 2:
            ack_delay = delay_us * 1000
            if conn.handshake_done_frame is not None:
                mad = conn.transport_params[direction].get("max_ack_delay", 25)
                ack_delay = min(ack_delay, mad * 1_000_000)
            if adjusted >= st[_MIN] + ack_delay:
                adjusted -= ack_delay
        st[_SMOOTH] = adjusted if st[_SAMPLES] == 1 else 0.875 * st[_SMOOTH] + 0.125 * adjusted
        return delay_us

    def _assembler(self, conn: QuicConnection) -> QuicStreamAssembler | None:
        asm = conn.assembler
        if asm is None:
            alpn = conn.alpn
            if alpn is None and conn.client_hello is not None and len(
                    conn.client_hello.alpn) == 1:
                alpn = conn.client_hello.alpn[0].decode("ascii", "replace")
            ctx = QuicAppContext(connection=conn.index, alpn=alpn or "", diag=self.diag,
                                 midstream=not conn.start_seen)
            asm = conn.assembler = QuicStreamAssembler(ctx, REGISTRY.quic_app(alpn))
        return asm

    def _stream(self, d: UdpDatagram, conn: QuicConnection, direction: int,
                f: QuicFrame) -> bool:
        """Hand a STREAM frame on; True when it resends bytes already sent."""
        resent = False
        sid, off, data = f.stream_id, f.offset, f.data
        assert sid is not None and off is not None
        ln = len(data)
        sent = conn.stream_sent[direction]
        rs = sent.get(sid)
        if rs is None and len(sent) < 100_000:
            rs = sent[sid] = RangeSet()
        if rs is not None and ln:
            before = rs.count()
            rs.add(off, off + ln - 1)
            new = rs.count() - before
            if new < ln:
                conn.resent_stream_bytes[direction] += ln - new
                conn.resent_stream_frames[direction] += 1
                resent = True
        asm = self._assembler(conn)
        if asm is not None:
            asm.stream(direction, sid, off, data, bool(f.fin), d.ts_ns, d.frame)
        return resent

    def _crypto(self, d: UdpDatagram, conn: QuicConnection, direction: int, space_i: int,
                f: QuicFrame) -> bool:
        """Read a CRYPTO frame; True when it resends handshake bytes already sent."""
        assert f.offset is not None
        resent = False
        if f.length:
            sent = conn.crypto_sent[direction][space_i]
            before = sent.count()
            sent.add(f.offset, f.offset + f.length - 1)
            resent = sent.count() - before < f.length
        stream = (conn.crypto, conn.hs_crypto, conn.app_crypto)[space_i][direction]
        was = stream.overflow
        for mtype, body in stream.add(f.offset, f.data):
            if space_i == 2:
                self._post_handshake(d, conn, direction, mtype, body)
            else:
                self._handshake(d, conn, direction, mtype, body)
        if stream.overflow and not was:
            what = ("Initial", "Handshake", "1-RTT")[space_i]
            self.diag.add("quic.crypto_overflow",
                          f"connection {conn.index} {_LABELS[direction]}: {what} CRYPTO "
                          f"data beyond {stream.max_bytes} bytes not yet parsed; the rest "
                          "of its handshake is not read",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
        return resent

    def _handshake(self, d: UdpDatagram, conn: QuicConnection, direction: int, mtype: int,
                   body: bytes) -> None:
        try:
            if mtype == 1 and direction == _C2S and conn.client_hello is None:
                conn.client_hello = parse_client_hello(body)
                conn.client_hello_frame = d.frame
                tp = find_extension(body, EXT_QUIC_TRANSPORT_PARAMETERS, client_hello=True)
                if tp is not None:
                    conn.transport_params[0].update(parse_transport_parameters(tp))
            elif mtype == 2 and direction == _S2C and conn.server_hello is None:
                conn.server_hello = parse_server_hello(body)
                conn.server_hello_frame = d.frame
            elif mtype == 8 and direction == _S2C and conn.encrypted_extensions is None:
                ee = conn.encrypted_extensions = parse_encrypted_extensions(body)
                if ee.alpn is not None:
                    conn.alpn = ee.alpn.decode("ascii", "replace")
                tp = find_extension(body, EXT_QUIC_TRANSPORT_PARAMETERS, client_hello=False)
                if tp is not None:
                    params = parse_transport_parameters(tp)
                    conn.transport_params[1].update(params)
                    token = find_reset_token(tp)
                    if token is not None:
                        conn.reset_tokens[_S2C].add(token)
        except HandshakeParseError as exc:
            self.diag.add("quic.tls_malformed",
                          f"connection {conn.index} {_LABELS[direction]} TLS handshake message "
                          f"{mtype} in CRYPTO frames: {exc}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])

    def _post_handshake(self, d: UdpDatagram, conn: QuicConnection, direction: int,
                        mtype: int, body: bytes) -> None:
        """A TLS message of the 1-RTT CRYPTO stream: a NewSessionTicket from the server is
        counted and the first one read (lifetime, early_data); QUIC has no other
        post-handshake message (no KeyUpdate, RFC 9001 §6)."""
        if mtype != 4 or direction != _S2C:
            return
        conn.tickets += 1
        try:
            nst = parse_new_session_ticket(body)
        except HandshakeParseError as exc:
            self.diag.add("quic.tls_malformed",
                          f"connection {conn.index} {_LABELS[direction]} NewSessionTicket in "
                          f"1-RTT CRYPTO frames: {exc}",
                          ts_ns=d.ts_ns, frame=d.frame, direction=_LABELS[direction])
            return
        if conn.ticket is None:
            conn.ticket = nst
            conn.ticket_frame = d.frame

    # ------------------------------------------------------------------ the end

    def finish(self, ts_ns: int, frame: int) -> None:
        """The end of the capture: the application observers of connections still open get
        their last calls. Called once (later calls do nothing)."""
        if self.finished:
            return
        self.finished = True
        self.last_ts_ns = max(self.last_ts_ns, ts_ns)
        for conn in self.connections:
            if conn.assembler is not None and conn.close is None:
                conn.assembler.finish(ts_ns, frame)


def find_reset_token(tp: bytes) -> bytes | None:
    """The stateless_reset_token (0x02) of a server's transport parameters."""
    pos = 0
    try:
        while pos < len(tp):
            pid, pos = read_varint(tp, pos)
            ln, pos = read_varint(tp, pos)
            if pid == 0x02 and ln == 16:
                return bytes(tp[pos:pos + 16])
            pos += ln
    except QuicHeaderError:
        return None
    return None
