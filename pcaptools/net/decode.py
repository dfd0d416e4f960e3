"""Link -> IP -> TCP/UDP decoding of one RawFrame, as Wireshark (tshark 4.0) decodes it.

The hot path uses ``struct.unpack_from`` at computed offsets; no object is made per protocol
layer. Malformed headers become ``net.*`` rows with the frame number, never exceptions.

Lengths follow Wireshark: the IP total length (IPv6 payload length) bounds the datagram
unless it claims more than the frame carried on the wire (``frame.len``), and
``TcpSegment.seg_len`` is ``tcp.len``, computed from those lengths even when the snaplen cut
the payload (``payload`` then holds only the captured bytes). An IPv4 total length of 0
(TCP segmentation offload on the sending host) means "the rest of the frame", as in
Wireshark.

Link types: Ethernet (802.1Q/802.1ad/QinQ tags at any depth, 802.3+LLC/SNAP, PPPoE
session, MPLS), Linux cooked v1/v2, raw IP (101, 12, 14, 228, 229), BSD NULL/LOOP (either
byte order of the address family), PPP / PPP-HDLC / PPPoE without Ethernet, Cisco HDLC,
OpenBSD pflog, Linux NFLOG, 802.11 data frames (plain, radiotap or PPI) with LLC/SNAP.
Other link types: one ``capture.unsupported_linktype`` row per link type naming it; the
frames are still counted (see :attr:`PacketDecoder.unsupported`).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable

from ..diagnostics import Diagnostics
from ..io.frame import RawFrame
from ..io.linktypes import linktype_name
from .fragments import FragmentReassembler
from .packet import IcmpError, IpPacket, TcpSegment, UdpDatagram, new_segment

Decoded = TcpSegment | UdpDatagram | IpPacket | None

_IP4 = struct.Struct("!BBHHHBBH4s4s").unpack_from
_IP6 = struct.Struct("!IHBB16s16s").unpack_from
_TCP = struct.Struct("!HHIIHH").unpack_from
try:  # (True in the compiled build only: see the fast path of PacketDecoder.decode)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False


def _be16(p: bytes, i: int) -> int:
    """The big-endian 16-bit field at ``p[i]`` (in the compiled build a C read of a
    ``unsigned char *``, decode.pxd; the caller has checked the bounds)."""
    return (p[i] << 8) | p[i + 1]


def _be32(p: bytes, i: int) -> int:
    """The big-endian 32-bit field at ``p[i]`` (as :func:`_be16`)."""
    hi = p[i]  # (a C long long in the compiled build: ``<< 24`` of a promoted char overflows)
    return (hi << 24) | (p[i + 1] << 16) | (p[i + 2] << 8) | p[i + 3]


#: an IPv4 header without options followed by a TCP header (decode's fast path)
_IP4_TCP = struct.Struct("!BBHHHBBH4s4sHHIIHH").unpack_from
#: an IPv6 header followed directly by a TCP header
_IP6_TCP = struct.Struct("!IHBB16s16sHHIIHH").unpack_from
_ICMP4_ERRORS = frozenset((3, 4, 5, 11, 12))  # types that quote the offending datagram
_ICMP6_ERRORS = frozenset((1, 2, 3, 4))
_UDP = struct.Struct("!HHH").unpack_from
_U16 = struct.Struct("!H").unpack_from
_U32LE = struct.Struct("<I").unpack_from
_U32BE = struct.Struct("!I").unpack_from
_U16LE = struct.Struct("<H").unpack_from

_VLAN_TPIDS = frozenset({0x8100, 0x88A8, 0x9100})
#: BSD address family values of IPv6 (NetBSD/OpenBSD/BSD/OS, FreeBSD, Darwin)
_BSD_AF_INET6 = frozenset({24, 28, 30})
#: IPv6 extension headers with the generic (next header, length in 8-byte units) layout
_IP6_EXT_GENERIC = frozenset({0, 43, 60})
_MAX_IP6_EXT = 16
_MAX_ETHER_DEPTH = 16
_MAX_TUNNEL_DEPTH = 3

SUPPORTED_LINKTYPES: frozenset[int] = frozenset(
    {0, 1, 9, 12, 14, 50, 51, 101, 104, 105, 108, 113, 117, 127, 192, 228, 229, 239, 276}
)
"""LINKTYPE values :class:`PacketDecoder` decodes down to IP."""


MAX_FRAGMENT_DATAGRAMS = 1024
"""Default of ``PacketDecoder(max_fragment_datagrams=)``: incomplete IP datagrams held at once."""
MAX_FRAGMENT_BYTES = 64 * 1024 * 1024
"""Default of ``PacketDecoder(max_fragment_bytes=)``: bytes held by incomplete datagrams."""
FRAGMENT_TIMEOUT_NS = 60_000_000_000
"""Default of ``PacketDecoder(fragment_timeout_ns=)``: age (capture time) at which an incomplete
datagram is dropped."""


class PacketDecoder:
    """Decodes RawFrames into TcpSegment / UdpDatagram / IpPacket, or None when not IP.

    One decoder per capture: it holds the IP fragment reassembly state. Call
    :meth:`finish` after the last frame so datagrams that never completed are reported.
    Malformed or truncated headers give ``net.*`` rows and None (link or IP layer broken)
    or an :class:`IpPacket` (transport header broken); ``decode`` never raises.
    """

    __slots__ = ("_diag", "_frag", "_links", "unsupported")

    def __init__(
        self,
        diag: Diagnostics,
        *,
        reassemble_fragments: bool = True,
        max_fragment_datagrams: int = MAX_FRAGMENT_DATAGRAMS,
        max_fragment_bytes: int = MAX_FRAGMENT_BYTES,
        fragment_timeout_ns: int = FRAGMENT_TIMEOUT_NS,
    ) -> None:
        self._diag = diag
        self._frag: FragmentReassembler | None = (
            FragmentReassembler(
                diag,
                max_datagrams=max_fragment_datagrams,
                max_bytes=max_fragment_bytes,
                timeout_ns=fragment_timeout_ns,
            )
            if reassemble_fragments
            else None
        )
        self.unsupported: Counter[int] = Counter()
        """link type -> number of frames not decoded because the link type is not supported"""
        raw_ip = self._link_raw
        self._links: dict[int, Callable[[RawFrame, bytes], int]] = {
            0: self._link_null,
            1: self._link_ethernet,
            9: self._link_ppp,
            12: raw_ip,
            14: raw_ip,
            50: self._link_ppp,
            51: self._link_pppoe,
            101: raw_ip,
            104: self._link_chdlc,
            105: self._link_80211,
            108: self._link_loop,
            113: self._link_sll,
            117: self._link_pflog,
            127: self._link_radiotap,
            192: self._link_ppi,
            228: raw_ip,
            229: raw_ip,
            239: self._link_nflog,
            276: self._link_sll2,
        }

    @staticmethod
    def supports(linktype: int) -> bool:
        """True if frames of this LINKTYPE are decoded (False: counted, not decoded)."""
        return linktype in SUPPORTED_LINKTYPES

    def finish(self) -> None:
        """End of capture: report IP datagrams whose fragments never all arrived."""
        if self._frag is not None:
            self._frag.flush()

    # ------------------------------------------------------------------ entry point

    def decode(self, raw: RawFrame) -> Decoded:
        """Decode one frame. Returns None when the frame carries no (decodable) IP packet."""
        data = raw.data
        try:
            if raw.linktype == 1:  # Ethernet, inlined: by far the most common
                if len(data) < 14:
                    self._short_link(raw, "Ethernet", 14)
                    return None
                et = (data[12] << 8) | data[13]
                off = 14 if (et == 0x0800 or et == 0x86DD) else self._ethertype(raw, data, et, 14)
            else:
                link = self._links.get(raw.linktype)
                if link is None:
                    self._unsupported(raw)
                    return None
                off = link(raw, data)
            if off < 0:
                return None
            n = len(data)
            # fast path: a whole, unfragmented IPv4 (no options) or IPv6 (no extension headers)
            # TCP segment, captured in full; the conditions are exactly those under which the
            # general path (_ip4/_ip6 -> _l4) adds no row and returns this same TcpSegment
            if off + 40 <= n:
                first = data[off]
                if first == 0x45:
                    # (p is the frame: in the compiled build an unsigned char * to its bytes,
                    # through which the header fields are read and the addresses, options and
                    # payload sliced out as bytes with no slice object; the bounds are checked
                    # before each slice, as C does not check them)
                    p = data
                    if _COMPILED:  # (C reads of the header: no Python int per field)
                        tlen = _be16(p, off + 2)
                        ident = _be16(p, off + 4)
                        frag = _be16(p, off + 6)
                        ttl = p[off + 8]
                        proto = p[off + 9]
                        src = p[off + 12 : off + 16]
                        dst = p[off + 16 : off + 20]
                        sport = _be16(p, off + 20)
                        dport = _be16(p, off + 22)
                        seq = _be32(p, off + 24)
                        ack = _be32(p, off + 28)
                        offflags = _be16(p, off + 32)
                        window = _be16(p, off + 34)
                    else:
                        (_v, _tos, tlen, ident, frag, ttl, proto, _c, src, dst,
                         sport, dport, seq, ack, offflags, window) = _IP4_TCP(data, off)
                    if proto == 6 and not frag & 0x3FFF:
                        orig = raw.orig_len
                        # (total length 0, TCP segmentation offload: the rest of the frame)
                        end = off + tlen if tlen else (orig if orig > n else n)
                        thl = (offflags >> 12) * 4
                        hdr_end = off + 20 + thl
                        if thl >= 20 and hdr_end <= end <= n:
                            seg_len = end - hdr_end
                            return new_segment(
                                raw.frame, raw.ts_ns, orig, 4, src, dst, ttl, ident, sport,
                                dport, seq, ack, offflags & 0x1FF, window, thl,
                                p[off + 40 : hdr_end] if thl > 20 else b"", seg_len,
                                p[hdr_end:end], orig - seg_len, (frag & 0x4000) != 0,
                            )
                elif first >> 4 == 6 and off + 60 <= n:
                    p = data
                    if _COMPILED:
                        plen = _be16(p, off + 4)
                        nh = p[off + 6]
                        hlim = p[off + 7]
                        src = p[off + 8 : off + 24]
                        dst = p[off + 24 : off + 40]
                        sport = _be16(p, off + 40)
                        dport = _be16(p, off + 42)
                        seq = _be32(p, off + 44)
                        ack = _be32(p, off + 48)
                        offflags = _be16(p, off + 52)
                        window = _be16(p, off + 54)
                    else:
                        (_vtf, plen, nh, hlim, src, dst,
                         sport, dport, seq, ack, offflags, window) = _IP6_TCP(data, off)
                    if nh == 6 and plen:
                        end = off + 40 + plen
                        thl = (offflags >> 12) * 4
                        hdr_end = off + 40 + thl
                        if thl >= 20 and hdr_end <= end <= n:
                            orig = raw.orig_len
                            seg_len = end - hdr_end
                            return new_segment(
                                raw.frame, raw.ts_ns, orig, 6, src, dst, hlim, -1, sport,
                                dport, seq, ack, offflags & 0x1FF, window, thl,
                                p[off + 60 : hdr_end] if thl > 20 else b"", seg_len,
                                p[hdr_end:end], orig - seg_len, True,
                            )
            rep_end = raw.orig_len if raw.orig_len > n else n
            return self._ip(raw, data, off, rep_end, raw.orig_len, 0)
        except (
            struct.error,
            IndexError,
            ValueError,
            OverflowError,
        ) as exc:  # pragma: no cover - safety net
            self._diag.add(
                "net.decode_error",
                f"frame {raw.frame} could not be decoded ({type(exc).__name__}: {exc}); it was "
                "skipped",
                frame=raw.frame,
                ts_ns=raw.ts_ns,
            )
            return None

    # ------------------------------------------------------------------ rows

    def _row(self, raw: RawFrame, code: str, detail: str) -> None:
        self._diag.add(code, detail, frame=raw.frame, ts_ns=raw.ts_ns)

    def _short_link(self, raw: RawFrame, what: str, need: int) -> None:
        self._row(
            raw,
            "net.truncated_link_header",
            f"{len(raw.data)} captured bytes, shorter than the {need}-byte {what} header",
        )

    def _unsupported(self, raw: RawFrame) -> None:
        lt = raw.linktype
        self.unsupported[lt] += 1
        if self.unsupported[lt] == 1:
            self._row(
                raw,
                "capture.unsupported_linktype",
                f"frames with {linktype_name(lt)} are counted but not decoded (first: frame "
                f"{raw.frame})",
            )

    # ------------------------------------------------------------------ link layers
    # Each returns the offset of the IP header in ``data``, or -1 (not IP, or malformed:
    # a row was added).

    def _link_ethernet(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 14:
            self._short_link(raw, "Ethernet", 14)
            return -1
        return self._ethertype(raw, data, (data[12] << 8) | data[13], 14)

    def _ethertype(self, raw: RawFrame, data: bytes, et: int, off: int) -> int:
        """Follow VLAN tags, LLC/SNAP, PPPoE and MPLS from ethertype ``et`` at ``off``."""
        n = len(data)
        for _ in range(_MAX_ETHER_DEPTH):
            if et == 0x0800 or et == 0x86DD:
                return off
            if et in _VLAN_TPIDS:
                if off + 4 > n:
                    self._short_link(raw, "802.1Q VLAN tag", off + 4)
                    return -1
                et = (data[off + 2] << 8) | data[off + 3]
                off += 4
            elif et <= 1500:  # 802.3 length field: LLC follows
                if (
                    off + 8 <= n
                    and data[off] == 0xAA
                    and data[off + 1] == 0xAA
                    and data[off + 2] == 0x03
                ):
                    et = (data[off + 6] << 8) | data[off + 7]
                    off += 8
                else:
                    return -1
            elif et == 0x8864:  # PPPoE session
                if off + 8 > n:
                    self._short_link(raw, "PPPoE", off + 8)
                    return -1
                return self._ppp_proto(raw, data, off + 6)
            elif et == 0x8847 or et == 0x8848:  # MPLS unicast / multicast
                while True:
                    if off + 4 > n:
                        self._short_link(raw, "MPLS label stack", off + 4)
                        return -1
                    bottom = data[off + 2] & 0x01
                    off += 4
                    if bottom:
                        break
                if off < n and (data[off] >> 4) in (4, 6):
                    return off
                return -1
            else:
                return -1
        return -1

    def _link_raw(self, raw: RawFrame, data: bytes) -> int:
        return 0

    def _link_null(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 4:
            self._short_link(raw, "loopback", 4)
            return -1
        if data[0] == 0xFF and data[1] == 0x03:  # PPP in HDLC-like framing
            return self._link_ppp(raw, data)
        (af,) = _U32LE(data, 0)
        if af > 0xFF:
            (af,) = _U32BE(data, 0)
            if af > 0xFF:
                return -1
        if af == 2 or af in _BSD_AF_INET6:
            return 4
        return -1

    def _link_loop(self, raw: RawFrame, data: bytes) -> int:
        """OpenBSD LOOP: the address family is always in network byte order."""
        if len(data) < 4:
            self._short_link(raw, "loopback", 4)
            return -1
        (af,) = _U32BE(data, 0)
        return 4 if (af == 2 or af in _BSD_AF_INET6) else -1

    def _link_ppp(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 2:
            self._short_link(raw, "PPP", 2)
            return -1
        if data[0] == 0x0F or data[0] == 0x8F:  # Cisco HDLC framing on a PPP link
            return self._link_chdlc(raw, data)
        off = 2 if (data[0] == 0xFF and data[1] == 0x03) else 0
        return self._ppp_proto(raw, data, off)

    def _ppp_proto(self, raw: RawFrame, data: bytes, off: int) -> int:
        """PPP protocol field at ``off`` (1 byte if protocol-field-compressed)."""
        n = len(data)
        if off >= n:
            self._short_link(raw, "PPP", off + 2)
            return -1
        if data[off] & 1:
            proto = data[off]
            off += 1
        else:
            if off + 2 > n:
                self._short_link(raw, "PPP", off + 2)
                return -1
            proto = (data[off] << 8) | data[off + 1]
            off += 2
        if proto == 0x21 or proto == 0x57:
            return off
        return -1

    def _link_pppoe(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 8:
            self._short_link(raw, "PPPoE", 8)
            return -1
        return self._ppp_proto(raw, data, 6)

    def _link_chdlc(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 4:
            self._short_link(raw, "Cisco HDLC", 4)
            return -1
        return self._ethertype(raw, data, (data[2] << 8) | data[3], 4)

    def _link_sll(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 16:
            self._short_link(raw, "Linux cooked (SLL)", 16)
            return -1
        if (data[2] << 8 | data[3]) == 824:  # ARPHRD_NETLINK: the protocol is a netlink family
            return -1
        return self._ethertype(raw, data, (data[14] << 8) | data[15], 16)

    def _link_sll2(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 20:
            self._short_link(raw, "Linux cooked v2 (SLL2)", 20)
            return -1
        if (data[8] << 8 | data[9]) == 824:
            return -1
        return self._ethertype(raw, data, (data[0] << 8) | data[1], 20)

    def _link_pflog(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 4:
            self._short_link(raw, "pflog", 4)
            return -1
        off = (data[0] + 3) & ~3
        if off < 4 or len(data) < off:
            self._short_link(raw, "pflog", max(off, 4))
            return -1
        af = data[1]
        return off if (af == 2 or af in _BSD_AF_INET6) else -1

    def _link_nflog(self, raw: RawFrame, data: bytes) -> int:
        n = len(data)
        if n < 4:
            self._short_link(raw, "NFLOG", 4)
            return -1
        # TLVs in host byte order: try little endian, then big endian
        for unpack in (_U16LE, _U16):
            off = 4
            for _ in range(64):
                if off + 4 > n:
                    break
                (tlen,) = unpack(data, off)
                (ttype,) = unpack(data, off + 2)
                if tlen < 4 or off + tlen > n:
                    break
                if ttype & 0x7FFF == 9:  # NFULA_PAYLOAD
                    return off + 4
                off += (tlen + 3) & ~3
        return -1

    def _link_80211(self, raw: RawFrame, data: bytes, off: int = 0, datapad: bool = False) -> int:
        n = len(data)
        if off + 24 > n:
            self._short_link(raw, "802.11", off + 24)
            return -1
        fc, flags = data[off], data[off + 1]
        if (fc >> 2) & 3 != 2 or flags & 0x40:  # not a data frame, or protected (encrypted)
            return -1
        subtype = fc >> 4
        if subtype & 0x04:  # null function: no data
            return -1
        hl = 30 if flags & 3 == 3 else 24
        if subtype & 0x08:  # QoS data
            if off + hl + 2 > n:
                return -1
            if data[off + hl] & 0x80:  # A-MSDU
                return -1
            hl += 2
            if flags & 0x80:  # +HTC
                hl += 4
        if datapad:
            hl = (hl + 3) & ~3
        p = off + hl
        if p + 8 > n:
            return -1
        if data[p] == 0xAA and data[p + 1] == 0xAA and data[p + 2] == 0x03:
            return self._ethertype(raw, data, (data[p + 6] << 8) | data[p + 7], p + 8)
        return -1

    def _link_radiotap(self, raw: RawFrame, data: bytes) -> int:
        n = len(data)
        if n < 8:
            self._short_link(raw, "radiotap", 8)
            return -1
        (rlen,) = _U16LE(data, 2)
        if rlen < 8 or rlen > n:
            self._short_link(raw, "radiotap", max(rlen, 8))
            return -1
        (present,) = _U32LE(data, 4)
        p = 8
        word = present
        while word & 0x80000000 and p + 4 <= rlen:
            (word,) = _U32LE(data, p)
            p += 4
        datapad = False
        if present & 0x02:  # Flags field, after TSFT (8 bytes, 8-aligned) if present
            if present & 0x01:
                p = ((p + 7) & ~7) + 8
            if p < rlen:
                datapad = bool(data[p] & 0x20)
        return self._link_80211(raw, data, rlen, datapad)

    def _link_ppi(self, raw: RawFrame, data: bytes) -> int:
        if len(data) < 8:
            self._short_link(raw, "PPI", 8)
            return -1
        (plen,) = _U16LE(data, 2)
        (dlt,) = _U32LE(data, 4)
        if plen < 8 or plen > len(data):
            self._short_link(raw, "PPI", max(plen, 8))
            return -1
        if dlt == 105:
            return self._link_80211(raw, data, plen)
        if dlt == 1:
            if plen + 14 > len(data):
                return -1
            return self._ethertype(raw, data, (data[plen + 12] << 8) | data[plen + 13], plen + 14)
        return -1

    # ------------------------------------------------------------------ IP

    def _ip(
        self, raw: RawFrame, buf: bytes, off: int, rep_end: int, wire_len: int, depth: int
    ) -> Decoded:
        """IP header at ``buf[off]``; ``rep_end`` = end of the bytes as on the wire (may be
        beyond ``len(buf)`` when the snaplen cut the packet); ``wire_len`` = frame.len summed
        over the frames that carried it (for overhead_len)."""
        if off >= len(buf):
            self._row(
                raw,
                "net.truncated_ip_header",
                f"no IP header captured (frame ends at byte {len(buf)})",
            )
            return None
        version = buf[off] >> 4
        if version == 4:
            return self._ip4(raw, buf, off, rep_end, wire_len, depth)
        if version == 6:
            return self._ip6(raw, buf, off, rep_end, wire_len, depth)
        self._row(raw, "net.bad_ip_version", f"IP version nibble is {version} at byte {off}")
        return None

    def _ip4(
        self, raw: RawFrame, buf: bytes, off: int, rep_end: int, wire_len: int, depth: int
    ) -> Decoded:
        cap = len(buf)
        if cap - off < 20:
            self._row(
                raw,
                "net.truncated_ip_header",
                f"{cap - off} bytes of a 20-byte IPv4 header captured",
            )
            return None
        vihl, _tos, tlen, ident, frag, ttl, proto, _csum, src, dst = _IP4(buf, off)
        ihl = (vihl & 0x0F) * 4
        if ihl < 20:
            self._row(
                raw,
                "net.bad_ip_header_length",
                f"IPv4 header length {ihl} bytes (must be at least 20)",
            )
            return None
        avail = rep_end - off
        if tlen == 0:  # TCP segmentation offload: Wireshark uses the frame's length
            tlen = avail
        if tlen < ihl:
            self._row(
                raw,
                "net.bad_ip_total_length",
                f"IPv4 total length {tlen} is smaller than its header length {ihl}",
            )
            return None
        if ihl > cap - off:
            if ihl > avail:
                self._row(
                    raw,
                    "net.bad_ip_header_length",
                    f"IPv4 header length {ihl} is larger than the {avail} bytes of the packet",
                )
            else:
                self._row(
                    raw,
                    "net.truncated_ip_header",
                    f"{cap - off} bytes of a {ihl}-byte IPv4 header captured (snaplen)",
                )
            return None
        if tlen > avail:
            self._row(
                raw,
                "net.bad_ip_total_length",
                f"IPv4 total length {tlen} exceeds the {avail} bytes on the wire",
            )
            end = rep_end
        else:
            end = off + tlen
        l4 = off + ihl
        if frag & 0x3FFF:  # MF set or offset non-zero: a fragment
            fragment = self._fragment(
                raw,
                (4, src, dst, proto, ident),
                (frag & 0x1FFF) * 8,
                bool(frag & 0x2000),
                buf,
                l4,
                end,
                wire_len,
            )
            if fragment is None:
                return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, 4, src, dst, proto, True)
            whole, wire_sum = fragment
            return self._l4(
                raw, proto, whole, 0, len(whole), 4, src, dst, ttl, ident, wire_sum, depth
            )
        out = self._l4(raw, proto, buf, l4, end, 4, src, dst, ttl, ident, wire_len, depth)
        if frag & 0x4000 and type(out) is TcpSegment:
            out.df = True
        return out

    def _ip6(
        self, raw: RawFrame, buf: bytes, off: int, rep_end: int, wire_len: int, depth: int
    ) -> Decoded:
        cap = len(buf)
        if cap - off < 40:
            self._row(
                raw,
                "net.truncated_ip_header",
                f"{cap - off} bytes of a 40-byte IPv6 header captured",
            )
            return None
        _vtf, plen, nh, hlim, src, dst = _IP6(buf, off)
        avail = rep_end - off - 40
        if plen == 0:
            plen = self._jumbo_length(buf, off + 40) if nh == 0 else 0
            if plen == 0:  # as Wireshark: no jumbo option, so no payload
                self._row(
                    raw,
                    "net.bad_ip_total_length",
                    "IPv6 payload length 0 without a Jumbo Payload option",
                )
                return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, 6, src, dst, nh, False)
        if plen > avail:
            self._row(
                raw,
                "net.bad_ip_total_length",
                f"IPv6 payload length {plen} exceeds the {avail} bytes on the wire",
            )
            end = rep_end
        else:
            end = off + 40 + plen
        return self._ip6_payload(raw, buf, off + 40, end, nh, src, dst, hlim, wire_len, depth, True)

    @staticmethod
    def _jumbo_length(buf: bytes, p: int) -> int:
        """Jumbo Payload option value in the hop-by-hop header at ``p`` (0 if none)."""
        if p + 2 > len(buf):
            return 0
        end = min(p + (buf[p + 1] + 1) * 8, len(buf))
        q = p + 2
        while q < end:
            if buf[q] == 0:  # Pad1
                q += 1
                continue
            if q + 2 > end:
                return 0
            if buf[q] == 0xC2 and buf[q + 1] == 4 and q + 6 <= end:
                jumbo = int(_U32BE(buf, q + 2)[0])
                return jumbo if jumbo > 0xFFFF else 0  # RFC 2675: smaller values are invalid
            q += 2 + buf[q + 1]
        return 0

    def _ip6_payload(
        self,
        raw: RawFrame,
        buf: bytes,
        p: int,
        end: int,
        nh: int,
        src: bytes,
        dst: bytes,
        hlim: int,
        wire_len: int,
        depth: int,
        may_fragment: bool,
    ) -> Decoded:
        """Walk the IPv6 extension headers from ``p`` (bounded), then the transport."""
        cap = len(buf) if len(buf) < end else end
        for _ in range(_MAX_IP6_EXT):
            if nh in _IP6_EXT_GENERIC or nh == 51:
                if p + 2 > cap:
                    self._row(
                        raw,
                        "net.bad_ipv6_extension",
                        f"IPv6 extension header {nh} cut off at byte {p}",
                    )
                    return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, 6, src, dst, nh, False)
                hlen = (buf[p + 1] + 2) * 4 if nh == 51 else (buf[p + 1] + 1) * 8
                if p + hlen > end:
                    self._row(
                        raw,
                        "net.bad_ipv6_extension",
                        f"IPv6 extension header {nh} of {hlen} bytes runs past the payload end",
                    )
                    return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, 6, src, dst, nh, False)
                nh = buf[p]
                p += hlen
            elif nh == 44:  # Fragment
                if p + 8 > cap:
                    self._row(
                        raw, "net.bad_ipv6_extension", f"IPv6 fragment header cut off at byte {p}"
                    )
                    return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, 6, src, dst, nh, False)
                nxt = buf[p]
                offflag = (buf[p + 2] << 8) | buf[p + 3]
                (ident,) = _U32BE(buf, p + 4)
                p += 8
                nh = nxt
                if offflag & 0xFFF9 and may_fragment:  # offset or M set (not an atomic fragment)
                    fragment = self._fragment(
                        raw,
                        (6, src, dst, ident),
                        offflag & 0xFFF8,
                        bool(offflag & 1),
                        buf,
                        p,
                        end,
                        wire_len,
                    )
                    if fragment is None:
                        return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, 6, src, dst, nxt, True)
                    whole, wire_sum = fragment
                    return self._ip6_payload(
                        raw, whole, 0, len(whole), nh, src, dst, hlim, wire_sum, depth, False
                    )
            else:
                return self._l4(raw, nh, buf, p, end, 6, src, dst, hlim, -1, wire_len, depth)
        self._row(raw, "net.bad_ipv6_extension", f"more than {_MAX_IP6_EXT} IPv6 extension headers")
        return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, 6, src, dst, nh, False)

    def _fragment(
        self,
        raw: RawFrame,
        key: tuple[object, ...],
        offset: int,
        more: bool,
        buf: bytes,
        start: int,
        end: int,
        wire_len: int,
    ) -> tuple[bytes, int] | None:
        """Hand a fragment to the reassembler; the whole datagram payload when it completes."""
        if self._frag is None or end > len(buf):
            # no reassembly, or the snaplen cut the fragment (Wireshark cannot use it either)
            return None
        done = self._frag.add(
            key, offset, more, buf[start:end], frame=raw.frame, ts_ns=raw.ts_ns, frame_len=wire_len
        )
        if done is None:
            return None
        return done[0], done[1]

    # ------------------------------------------------------------------ transport

    def _l4(
        self,
        raw: RawFrame,
        proto: int,
        buf: bytes,
        start: int,
        end: int,
        ver: int,
        src: bytes,
        dst: bytes,
        ttl: int,
        ident: int,
        wire_len: int,
        depth: int,
    ) -> Decoded:
        """Transport header at ``buf[start]``; ``end`` = end of the IP payload (as on the wire)."""
        cap_end = len(buf) if len(buf) < end else end
        if proto == 6:
            if cap_end - start < 20:
                if end - start < 20:
                    self._row(
                        raw,
                        "net.bad_tcp_header_length",
                        f"the IP payload holds {end - start} bytes, less than a 20-byte TCP header",
                    )
                else:
                    self._row(
                        raw,
                        "net.truncated_tcp_header",
                        f"{max(cap_end - start, 0)} bytes of the TCP header captured (snaplen)",
                    )
                pkt = IpPacket(raw.frame, raw.ts_ns, raw.orig_len, ver, src, dst, 6, False)
                if cap_end - start >= 16:
                    pkt.quoted_tcp = self._partial_tcp(raw, buf, start, ver, src, dst, ttl, ident)
                    pkt.quoted_tcp_len = cap_end - start
                return pkt
            sport, dport, seq, ack, offflags, window = _TCP(buf, start)
            thl = (offflags >> 12) * 4
            seg_end = end - start
            if thl < 20 or thl > seg_end:
                self._row(
                    raw,
                    "net.bad_tcp_header_length",
                    f"TCP data offset {thl} bytes (must be 20..{seg_end}); ports {sport} -> "
                    f"{dport}",
                )
                return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, ver, src, dst, 6, False)
            seg_len = seg_end - thl
            hdr_end = start + thl
            if hdr_end > cap_end:
                self._row(
                    raw,
                    "net.truncated_tcp_header",
                    f"{cap_end - start} of {thl} TCP header bytes captured (snaplen); options cut "
                    "off",
                )
                options = buf[start + 20 : cap_end]
                payload = b""
            else:
                options = buf[start + 20 : hdr_end] if thl > 20 else b""
                payload = buf[hdr_end:cap_end]
            if len(payload) < seg_len and hdr_end <= cap_end:
                self._row(
                    raw,
                    "net.snaplen_truncated_payload",
                    f"{len(payload)} of {seg_len} TCP payload bytes captured ({sport} -> {dport})",
                )
            return TcpSegment(
                raw.frame,
                raw.ts_ns,
                raw.orig_len,
                ver,
                src,
                dst,
                ttl,
                ident,
                sport,
                dport,
                seq,
                ack,
                offflags & 0x1FF,
                window,
                thl,
                options,
                seg_len,
                payload,
                wire_len - seg_len,
                ver == 6,
            )
        if proto == 17:
            if cap_end - start < 8:
                self._row(
                    raw,
                    "net.truncated_udp_header",
                    f"{max(cap_end - start, 0)} bytes of the 8-byte UDP header captured",
                )
                return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, ver, src, dst, 17, False)
            sport, dport, ulen = _UDP(buf, start)
            pend = start + ulen if 8 <= ulen <= end - start else end
            return UdpDatagram(
                raw.frame,
                raw.ts_ns,
                raw.orig_len,
                ver,
                src,
                dst,
                ttl,
                sport,
                dport,
                buf[start + 8 : pend if pend < cap_end else cap_end],
            )
        if (proto == 4 or proto == 41) and depth < _MAX_TUNNEL_DEPTH:  # IP in IP, IPv6 in IP
            if start < cap_end:
                inner = self._ip(raw, buf, start, end, wire_len, depth + 1)
                if inner is not None:
                    return inner
            return IpPacket(raw.frame, raw.ts_ns, raw.orig_len, ver, src, dst, proto, False)
        if proto == 47 and depth < _MAX_TUNNEL_DEPTH:  # GRE
            inner_off = self._gre(buf, start, cap_end)
            if inner_off >= 0:
                inner = self._ip(raw, buf, inner_off, end, wire_len, depth + 1)
                if inner is not None:
                    return inner
        pkt = IpPacket(raw.frame, raw.ts_ns, raw.orig_len, ver, src, dst, proto, False)
        if (proto == 1 and cap_end - start >= 8 and buf[start] in _ICMP4_ERRORS) or (
            proto == 58 and cap_end - start >= 8 and buf[start] in _ICMP6_ERRORS
        ):
            pkt.icmp = self._icmp_error(buf, start, cap_end, proto == 58)
            self._quoted(raw, buf, start + 8, cap_end, pkt)
        return pkt

    @staticmethod
    def _icmp_error(buf: bytes, p: int, cap_end: int, v6: bool) -> IcmpError:
        """The ICMP error header at ``buf[p]`` (8 bytes captured) and the addresses, ports and
        length of the packet it quotes, as far as they were captured."""
        typ, code = buf[p], buf[p + 1]
        if v6:
            mtu = int(_U32BE(buf, p + 4)[0]) if typ == 2 else -1
        else:
            mtu = int(_U16(buf, p + 6)[0]) if typ == 3 and code == 4 else -1
        q = p + 8
        ver, proto, qsrc, qdst, sport, dport, qlen, qdf = 0, -1, b"", b"", -1, -1, -1, False
        if q < cap_end and buf[q] >> 4 == 4 and cap_end - q >= 20:
            vihl, _tos, tlen, _id, frag, _ttl, proto, _c, qsrc, qdst = _IP4(buf, q)
            ver, qlen, qdf = 4, tlen, bool(frag & 0x4000)
            l4 = q + (vihl & 0x0F) * 4
            if frag & 0x1FFF or (vihl & 0x0F) < 5:
                l4 = cap_end  # a later fragment, or a broken header: no ports
        elif q < cap_end and buf[q] >> 4 == 6 and cap_end - q >= 40:
            _vtf, plen, proto, _hl, qsrc, qdst = _IP6(buf, q)
            ver, qlen, qdf, l4 = 6, 40 + plen, True, q + 40
        else:
            l4 = cap_end
        if (proto == 6 or proto == 17) and cap_end - l4 >= 4:
            sport, dport = _U16(buf, l4)[0], _U16(buf, l4 + 2)[0]
        return IcmpError(typ, code, mtu, ver, proto, qsrc, qdst, sport, dport, qlen, qdf)

    def _partial_tcp(
        self, raw: RawFrame, buf: bytes, p: int, ver: int, src: bytes, dst: bytes, ttl: int, ident: int
    ) -> TcpSegment:
        """A TcpSegment from the first 16 bytes of a TCP header at ``buf[p]`` (no payload)."""
        sport, dport, seq, ack, offflags, window = _TCP(buf, p)
        thl = (offflags >> 12) * 4
        opts = buf[p + 20 : p + thl] if thl > 20 else b""
        return TcpSegment(raw.frame, raw.ts_ns, raw.orig_len, ver, src, dst, ttl, ident, sport, dport,
                          seq, ack, offflags & 0x1FF, window, thl, opts, 0, b"", raw.orig_len)

    def _quoted(self, raw: RawFrame, buf: bytes, p: int, cap_end: int, pkt: IpPacket) -> None:
        """The IP + TCP header quoted by an ICMP error at ``buf[p]``, if at least 16 TCP header
        bytes are there. Quoted packets are often cut short on purpose: no anomaly rows."""
        if p >= cap_end:
            return
        version = buf[p] >> 4
        if version == 4 and cap_end - p >= 20:
            vihl, _tos, _tlen, ident, frag, ttl, proto, _c, src, dst = _IP4(buf, p)
            tcp = p + (vihl & 0x0F) * 4
            if proto != 6 or (vihl & 0x0F) < 5 or frag & 0x1FFF:
                return
            ver = 4
        elif version == 6 and cap_end - p >= 40:
            _vtf, _plen, nh, hlim, src, dst = _IP6(buf, p)
            if nh != 6:
                return
            tcp, ver, ttl, ident = p + 40, 6, hlim, -1
        else:
            return
        if cap_end - tcp < 16:
            return
        pkt.quoted_tcp = self._partial_tcp(raw, buf, tcp, ver, src, dst, ttl, ident)
        pkt.quoted_tcp_len = min(cap_end - tcp, pkt.quoted_tcp.header_len or 20)

    @staticmethod
    def _gre(buf: bytes, p: int, cap_end: int) -> int:
        """Offset of an IP packet inside a GRE (version 0) header at ``p``, or -1."""
        if p + 4 > cap_end:
            return -1
        flags = buf[p]
        if buf[p + 1] & 0x07:  # version 1 (PPTP) and others
            return -1
        proto = (buf[p + 2] << 8) | buf[p + 3]
        off = (
            p
            + 4
            + (4 if flags & 0x80 else 0)
            + (4 if flags & 0x20 else 0)
            + (4 if flags & 0x10 else 0)
        )
        if off >= cap_end or not (proto == 0x0800 or proto == 0x86DD):
            return -1
        return off
