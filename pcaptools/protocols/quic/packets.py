"""QUIC packet headers (RFC 8999 invariants, RFC 9000 v1, RFC 9369 v2): the packets of one
UDP datagram, coalesced ones separately, without decrypting anything.

:func:`split_datagram` walks a datagram: long-header packets carry their own length (Initial,
0-RTT, Handshake) and may be followed by more packets; a Retry, a Version Negotiation and a
short-header (1-RTT) packet take the rest of the datagram. A short header does not say how
long its destination connection ID is: the caller passes the IDs it knows for that receiver.
What cannot be parsed is a :class:`QuicHeaderError` (the observer turns it into a row).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "MAX_CID_LEN",
    "PACKET_TYPES",
    "VERSION_1",
    "VERSION_2",
    "QuicHeaderError",
    "QuicPacket",
    "long_type_name",
    "looks_like_quic",
    "read_varint",
    "split_datagram",
    "version_name",
]

VERSION_1 = 0x00000001
"""QUIC version 1 (RFC 9000)"""
VERSION_2 = 0x6B3343CF
"""QUIC version 2 (RFC 9369)"""
MAX_CID_LEN = 20
"""longest connection ID of versions 1 and 2 (RFC 9000 §17.2)"""

#: packet type names (the vocabulary of ``quic_packets.packet_type``)
PACKET_TYPES: dict[str, str] = {
    "initial": "Initial (long header): carries the TLS ClientHello/ServerHello in CRYPTO frames; "
    "protected with keys derived from the client's destination connection ID",
    "0rtt": "0-RTT (long header): early application data of a resumed connection",
    "handshake": "Handshake (long header): the rest of the TLS handshake",
    "retry": "Retry (long header): the server asks the client to repeat its Initial with a token",
    "version_negotiation": "Version Negotiation (version 0): the versions the server supports",
    "1rtt": "1-RTT (short header): application data",
    "unknown": "a long header of a version pcaptools does not know (type bits not interpreted)",
}

# long packet type bits (0-3) per version (RFC 9000 §17.2, RFC 9369 §3.2)
_V1_TYPES = ("initial", "0rtt", "handshake", "retry")
_V2_TYPES = ("retry", "initial", "0rtt", "handshake")
_LONG_TYPES: dict[int, tuple[str, str, str, str]] = {VERSION_1: _V1_TYPES, VERSION_2: _V2_TYPES}


class QuicHeaderError(ValueError):
    """A QUIC header that does not parse (cut short, a connection ID too long...)."""


def version_name(version: int) -> str:
    """``1``, ``2``, ``negotiation`` (0), ``draft-29`` (0xff00001d) or ``0x...``."""
    if version == VERSION_1:
        return "1"
    if version == VERSION_2:
        return "2"
    if version == 0:
        return "negotiation"
    if version >> 8 == 0xFF0000:
        return f"draft-{version & 0xFF}"
    return f"0x{version:08x}"


def long_type_name(first: int, version: int) -> str:
    """The packet type of a long header with first byte ``first`` of ``version``."""
    if version == 0:
        return "version_negotiation"
    types = _LONG_TYPES.get(version)
    if types is None:
        if version >> 8 == 0xFF0000:  # drafts use the v1 code points
            types = _V1_TYPES
        else:
            return "unknown"
    return types[(first >> 4) & 0x03]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The variable-length integer at ``pos`` (RFC 9000 §16) and the position after it.
    Raises QuicHeaderError when ``buf`` ends inside it."""
    if pos >= len(buf):
        raise QuicHeaderError("varint: no bytes left")
    b0 = buf[pos]
    n = 1 << (b0 >> 6)
    end = pos + n
    if end > len(buf):
        raise QuicHeaderError(f"varint: needs {n} bytes, {len(buf) - pos} left")
    v = b0 & 0x3F
    for i in range(pos + 1, end):
        v = (v << 8) | buf[i]
    return v, end


@dataclass(frozen=True, slots=True)
class QuicPacket:
    """One QUIC packet of a datagram (header fields only; nothing is decrypted here)."""

    start: int
    """offset of the packet's first byte in the UDP payload"""
    end: int
    """offset after its last byte"""
    long: bool
    packet_type: str
    """a key of :data:`PACKET_TYPES`"""
    version: int | None
    """None for a short header (the connection's version applies)"""
    dcid: bytes | None
    """None for a short header whose connection ID length is not known"""
    scid: bytes | None
    """None for a short header"""
    token: bytes = b""
    """Initial: the token (from a Retry or NEW_TOKEN); Retry: the retry token"""
    length: int | None = None
    """the Length field (packet number + payload), None where the header has none"""
    pn_offset: int | None = None
    """offset of the (protected) packet number, None where there is none"""
    versions: tuple[int, ...] = ()
    """Version Negotiation: the supported versions listed"""


def _long(buf: bytes, pos: int) -> QuicPacket:
    n = len(buf)
    if pos + 7 > n:
        raise QuicHeaderError(f"long header cut short ({n - pos} bytes)")
    first = buf[pos]
    version = int.from_bytes(buf[pos + 1:pos + 5], "big")
    p = pos + 5
    dl = buf[p]
    p += 1
    if version in (VERSION_1, VERSION_2) and dl > MAX_CID_LEN:
        raise QuicHeaderError(f"destination connection ID of {dl} bytes (at most 20)")
    dcid = buf[p:p + dl]
    p += dl
    if p >= n or len(dcid) != dl:
        raise QuicHeaderError("long header cut short in the destination connection ID")
    sl = buf[p]
    p += 1
    if version in (VERSION_1, VERSION_2) and sl > MAX_CID_LEN:
        raise QuicHeaderError(f"source connection ID of {sl} bytes (at most 20)")
    scid = buf[p:p + sl]
    p += sl
    if len(scid) != sl:
        raise QuicHeaderError("long header cut short in the source connection ID")
    ptype = long_type_name(first, version)
    if ptype == "version_negotiation":
        body = buf[p:]
        vs = tuple(int.from_bytes(body[i:i + 4], "big") for i in range(0, len(body) - 3, 4))
        return QuicPacket(pos, n, True, ptype, version, dcid, scid, versions=vs)
    if ptype == "unknown":
        return QuicPacket(pos, n, True, ptype, version, dcid, scid)
    if ptype == "retry":
        if n - p < 16:
            raise QuicHeaderError("Retry packet shorter than its integrity tag")
        return QuicPacket(pos, n, True, ptype, version, dcid, scid, token=buf[p:n - 16])
    token = b""
    if ptype == "initial":
        tl, p = read_varint(buf, p)
        token = buf[p:p + tl]
        if len(token) != tl:
            raise QuicHeaderError(f"Initial token of {tl} bytes cut short")
        p += tl
    length, p = read_varint(buf, p)
    end = p + length
    if end > n:
        raise QuicHeaderError(f"{ptype} packet Length {length} beyond the datagram ({n - p} left)")
    if length < 20:  # packet number (1-4) + sample of 16 bytes is the least that is valid
        raise QuicHeaderError(f"{ptype} packet Length {length} too short to be protected")
    return QuicPacket(pos, end, True, ptype, version, dcid, scid, token=token, length=length,
                      pn_offset=p)


def split_datagram(
    payload: bytes, short_dcids: Iterable[bytes] = ()
) -> tuple[list[QuicPacket], str | None]:
    """The QUIC packets of one UDP payload, in order, and None or what stopped the walk (a
    packet that does not parse: the packets before it are kept). ``short_dcids``: the
    connection IDs the receiver is known to use (to find the end of a short header's
    destination connection ID, the longest that matches; none matching: its ``dcid`` is
    None). Zero bytes after a packet are padding (no packet)."""
    out: list[QuicPacket] = []
    pos = 0
    n = len(payload)
    try:
        while pos < n:
            first = payload[pos]
            if first & 0x80:
                pkt = _long(payload, pos)
                out.append(pkt)
                pos = pkt.end
                if pkt.length is None:
                    break
                continue
            if out and not any(payload[pos:]):
                break  # padding after a coalesced packet
            if not first & 0x40:
                raise QuicHeaderError(f"not a QUIC packet (first byte 0x{first:02x}, fixed bit 0)")
            dcid = None
            for cid in short_dcids:
                if payload.startswith(cid, pos + 1) and (dcid is None or len(cid) > len(dcid)):
                    dcid = cid
            out.append(QuicPacket(pos, n, False, "1rtt", None, dcid, None))
            break
    except QuicHeaderError as exc:
        return out, f"at byte {pos}: {exc}"
    return out, None


def looks_like_quic(payload: bytes) -> bool:
    """A long header of QUIC version 1 or 2 (fixed bit set, connection IDs of at most 20
    bytes), or a short header (fixed bit set, long-header bit clear): what the probe accepts
    on ports other than 443. The observer keeps a short header only when its flow is already
    a QUIC connection (a long header started it), so a false positive costs one lookup."""
    if len(payload) < 7:
        return False
    b0 = payload[0] & 0xC0
    if b0 == 0x40:
        return True
    if b0 != 0xC0:
        return False
    version = int.from_bytes(payload[1:5], "big")
    return version in (VERSION_1, VERSION_2) and payload[5] <= MAX_CID_LEN
