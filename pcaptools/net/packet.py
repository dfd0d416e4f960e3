"""What the network decoding layer produces for the TCP and UDP layers above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._slots import slots_eq, slots_repr

# TCP flag bits as in the 9-bit flags field (tcp.flags)
FIN = 0x001
SYN = 0x002
RST = 0x004
PSH = 0x008
ACK = 0x010
URG = 0x020
ECE = 0x040
CWR = 0x080
NS = 0x100
#: (bit, name) of every TCP flag, lowest bit first: the one list the tables and their docs use
TCP_FLAGS: tuple[tuple[int, str], ...] = (
    (FIN, "FIN"), (SYN, "SYN"), (RST, "RST"), (PSH, "PSH"), (ACK, "ACK"), (URG, "URG"),
    (ECE, "ECE"), (CWR, "CWR"), (NS, "NS"),
)


class TcpSegment:
    """One TCP segment, decoded from link, IP and TCP headers (no payload parsing).

    For a datagram reassembled from IP fragments, ``frame``/``ts_ns`` are those of
    the fragment that completed it (where Wireshark shows the TCP layer).

    (A class with ``__slots__``, not a dataclass: the compiled build makes it an extension type,
    ``packet.pxd``, one per TCP frame; ``repr`` and ``==`` are a dataclass's.)
    """

    __slots__ = ("frame", "ts_ns", "frame_len", "ip_version", "src", "dst", "ttl", "ip_id",
                 "sport", "dport", "seq", "ack", "flags", "window", "header_len", "options",
                 "seg_len", "payload", "overhead_len", "df")

    frame: int
    ts_ns: int
    frame_len: int
    """frame.len: bytes on the wire"""
    ip_version: int
    """4 or 6"""
    src: bytes
    """packed source address (4 or 16 bytes)"""
    dst: bytes
    """packed destination address"""
    ttl: int
    """IPv4 TTL or IPv6 hop limit"""
    ip_id: int
    """IPv4 identification; -1 for IPv6"""
    sport: int
    dport: int
    seq: int
    """raw 32-bit sequence number"""
    ack: int
    """raw 32-bit acknowledgement number (meaningful only with ACK set)"""
    flags: int
    """9-bit TCP flags (FIN=0x01 ... NS=0x100)"""
    window: int
    """raw 16-bit window field (unscaled)"""
    header_len: int
    """TCP header length in bytes (data offset * 4)"""
    options: bytes
    """raw TCP option bytes (may be shorter than header_len - 20 if the snaplen cut them)"""
    seg_len: int
    """tcp.len: payload length from the IP length fields, whatever was captured"""
    payload: bytes
    """captured payload bytes; shorter than seg_len when the snaplen cut the packet"""
    overhead_len: int
    """bytes of link + IP + TCP headers in this frame (frame_len - seg_len, for overhead)"""
    df: bool
    """IPv4 Don't Fragment bit (ip.flags.df); True for IPv6, which routers never fragment"""

    def __init__(self, frame: int, ts_ns: int, frame_len: int, ip_version: int, src: bytes,
                 dst: bytes, ttl: int, ip_id: int, sport: int, dport: int, seq: int, ack: int,
                 flags: int, window: int, header_len: int, options: bytes, seg_len: int,
                 payload: bytes, overhead_len: int, df: bool = False) -> None:
        self.frame = frame
        self.ts_ns = ts_ns
        self.frame_len = frame_len
        self.ip_version = ip_version
        self.src = src
        self.dst = dst
        self.ttl = ttl
        self.ip_id = ip_id
        self.sport = sport
        self.dport = dport
        self.seq = seq
        self.ack = ack
        self.flags = flags
        self.window = window
        self.header_len = header_len
        self.options = options
        self.seg_len = seg_len
        self.payload = payload
        self.overhead_len = overhead_len
        self.df = df

    def __repr__(self) -> str:
        return slots_repr(self)

    def __eq__(self, other: Any) -> Any:
        return slots_eq(self, other)

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as the dataclass)


def new_segment(frame: int, ts_ns: int, frame_len: int, ip_version: int, src: bytes, dst: bytes,
                ttl: int, ip_id: int, sport: int, dport: int, seq: int, ack: int, flags: int,
                window: int, header_len: int, options: bytes, seg_len: int, payload: bytes,
                overhead_len: int, df: bool) -> TcpSegment:
    """``TcpSegment(...)`` for the decoder's fast paths (once a TCP frame): in the compiled
    build a C function that fills the new object's fields, without the argument parsing of a
    call to the class."""
    s = TcpSegment.__new__(TcpSegment)
    s.frame = frame
    s.ts_ns = ts_ns
    s.frame_len = frame_len
    s.ip_version = ip_version
    s.src = src
    s.dst = dst
    s.ttl = ttl
    s.ip_id = ip_id
    s.sport = sport
    s.dport = dport
    s.seq = seq
    s.ack = ack
    s.flags = flags
    s.window = window
    s.header_len = header_len
    s.options = options
    s.seg_len = seg_len
    s.payload = payload
    s.overhead_len = overhead_len
    s.df = df
    return s


@dataclass(slots=True)
class UdpDatagram:
    """One UDP datagram (for DNS and, later, QUIC)."""

    frame: int
    ts_ns: int
    frame_len: int
    ip_version: int
    src: bytes
    dst: bytes
    ttl: int
    sport: int
    dport: int
    payload: bytes


@dataclass(slots=True)
class IcmpError:
    """An ICMP (type 3, 4, 5, 11, 12) or ICMPv6 (type 1-4) error and the start of the packet it
    quotes (RFC 792 / 1191 / 4443). Only ICMP errors get one: echo and the like do not."""

    type: int
    """icmp.type / icmpv6.type"""
    code: int
    """icmp.code / icmpv6.code"""
    mtu: int
    """next-hop MTU of an ICMP "fragmentation needed" (type 3 code 4, RFC 1191; 0 from routers
    older than it) or the MTU of an ICMPv6 "packet too big" (type 2); -1 for other errors"""
    quoted_version: int
    """IP version of the quoted packet; 0 when no IP header is quoted"""
    quoted_proto: int
    """IP protocol of the quoted packet (after IPv6 extension headers it could walk); -1 unknown"""
    quoted_src: bytes
    """packed source address of the quoted packet (b"" when not quoted)"""
    quoted_dst: bytes
    quoted_sport: int
    """TCP/UDP source port of the quoted packet; -1 when not quoted"""
    quoted_dport: int
    quoted_len: int
    """IP total length of the quoted packet (IPv6: 40 + payload length): the size that did not
    fit for a "too big" error; -1 when not quoted"""
    quoted_df: bool
    """DF bit of the quoted IPv4 packet (True for IPv6)"""


@dataclass(slots=True)
class IpPacket:
    """An IP packet that is neither a decoded TCP segment nor a UDP datagram
    (another protocol, or a fragment of a datagram not yet reassembled)."""

    frame: int
    ts_ns: int
    frame_len: int
    ip_version: int
    src: bytes
    dst: bytes
    proto: int
    """IP protocol number (next header after IPv6 extension headers)"""
    fragment: bool
    """True for a fragment that did not (yet) complete a datagram"""
    quoted_tcp: TcpSegment | None = None
    """a TCP header this packet carries but that is not a segment of its own: the header quoted
    inside an ICMP/ICMPv6 error, or a TCP header cut short (16..19 bytes captured). tshark gives
    such frames the tcp.stream of that connection without analysing them."""
    quoted_tcp_len: int = 0
    """TCP header bytes available for ``quoted_tcp``"""
    icmp: IcmpError | None = None
    """the ICMP/ICMPv6 error this packet is, with what it quotes; None for anything else"""
