"""Byte writers for hand-built captures and packets (pcap, pcapng, Ethernet, IP, TCP, UDP).

Every function returns ``bytes``; nothing here touches the disk except
:func:`write`. The writers never validate: tests use them to build *bad* input on purpose
(``ihl=3``, ``data_offset=15``, a pcapng block whose trailer disagrees...).

Byte order arguments are struct prefixes: ``"<"`` (little endian) or ``">"`` (big endian).
"""

from __future__ import annotations

import io
import ipaddress
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------- generic


def write(path: Path, *parts: bytes) -> Path:
    """Write the concatenated parts to ``path`` and return it."""
    path.write_bytes(b"".join(parts))
    return path


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _addr(a: str | bytes) -> bytes:
    return a if isinstance(a, bytes) else ipaddress.ip_address(a).packed


# --------------------------------------------------------------------------- classic pcap

PCAP_MAGIC_USEC = 0xA1B2C3D4
PCAP_MAGIC_NSEC = 0xA1B23C4D


def pcap_header(
    linktype: int = 1,
    snaplen: int = 262144,
    *,
    nsec: bool = False,
    bo: str = "<",
    magic: int | None = None,
    version: tuple[int, int] = (2, 4),
) -> bytes:
    """The 24-byte pcap file header (``linktype`` may carry FCS bits in its top nibble)."""
    if magic is None:
        magic = PCAP_MAGIC_NSEC if nsec else PCAP_MAGIC_USEC
    return struct.pack(bo + "IHHiIII", magic, version[0], version[1], 0, 0, snaplen, linktype)


def pcap_record(
    ts_ns: int,
    data: bytes,
    orig_len: int | None = None,
    *,
    nsec: bool = False,
    bo: str = "<",
    incl_len: int | None = None,
) -> bytes:
    """One pcap record header + data. ``incl_len`` overrides the length field (to lie)."""
    sec, frac = divmod(ts_ns, 1_000_000_000)
    if not nsec:
        frac //= 1000
    return (
        struct.pack(
            bo + "IIII",
            sec,
            frac,
            len(data) if incl_len is None else incl_len,
            len(data) if orig_len is None else orig_len,
        )
        + data
    )


def pcap_file(
    packets: Iterable[tuple[int, bytes]],
    linktype: int = 1,
    snaplen: int = 262144,
    *,
    nsec: bool = False,
    bo: str = "<",
) -> bytes:
    """A whole pcap file from ``(ts_ns, data)`` pairs."""
    out = [pcap_header(linktype, snaplen, nsec=nsec, bo=bo)]
    out += [pcap_record(ts, d, nsec=nsec, bo=bo) for ts, d in packets]
    return b"".join(out)


# --------------------------------------------------------------------------- pcapng

SHB = 0x0A0D0D0A
IDB = 1
PB = 2
SPB = 3
NRB = 4
ISB = 5
EPB = 6
JOURNAL = 9
DSB = 10
CB_COPY = 0x00000BAD
CB_NO_COPY = 0x40000BAD
TLS_KEYLOG = 0x544C534B


def _pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def option(code: int, value: bytes, bo: str = "<") -> bytes:
    """One pcapng option (code, length, value padded to 4 bytes)."""
    return struct.pack(bo + "HH", code, len(value)) + _pad4(value)


def options(opts: Sequence[tuple[int, bytes]], bo: str = "<") -> bytes:
    """Options followed by opt_endofopt (empty input: no options at all)."""
    if not opts:
        return b""
    return b"".join(option(c, v, bo) for c, v in opts) + struct.pack(bo + "HH", 0, 0)


def block(
    btype: int,
    body: bytes,
    bo: str = "<",
    *,
    trailer: int | None = None,
    total_length: int | None = None,
) -> bytes:
    """A pcapng block: type, total length, body (padded), trailing total length.

    ``trailer``/``total_length`` override the two length fields (to build bad blocks).
    """
    body = _pad4(body)
    n = 12 + len(body)
    head = struct.pack(bo + "II", btype, n if total_length is None else total_length)
    return head + body + struct.pack(bo + "I", n if trailer is None else trailer)


def shb(
    bo: str = "<", opts: Sequence[tuple[int, bytes]] = (), *, section_length: int = -1
) -> bytes:
    """Section Header Block (version 1.0)."""
    body = struct.pack(bo + "IHHq", 0x1A2B3C4D, 1, 0, section_length) + options(opts, bo)
    return block(SHB, body, bo)


def idb(
    linktype: int = 1,
    snaplen: int = 0,
    bo: str = "<",
    *,
    tsresol: int | None = None,
    tsoffset: int | None = None,
    name: str | None = None,
    extra_opts: Sequence[tuple[int, bytes]] = (),
) -> bytes:
    """IDB; ``tsresol``: the raw if_tsresol byte (6 = usec, 0x80|n = 2^-n)."""
    opts: list[tuple[int, bytes]] = []
    if name is not None:
        opts.append((2, name.encode()))
    if tsresol is not None:
        opts.append((9, bytes([tsresol])))
    if tsoffset is not None:
        opts.append((14, struct.pack(bo + "q", tsoffset)))
    opts += extra_opts
    return block(IDB, struct.pack(bo + "HHI", linktype, 0, snaplen) + options(opts, bo), bo)


def epb(
    iface: int,
    ticks: int,
    data: bytes,
    orig_len: int | None = None,
    bo: str = "<",
    *,
    caplen: int | None = None,
    opts: Sequence[tuple[int, bytes]] = (),
) -> bytes:
    """Enhanced Packet Block; ``ticks`` in the interface's if_tsresol units."""
    body = (
        struct.pack(
            bo + "IIIII",
            iface,
            ticks >> 32,
            ticks & 0xFFFFFFFF,
            len(data) if caplen is None else caplen,
            len(data) if orig_len is None else orig_len,
        )
        + _pad4(data)
        + options(opts, bo)
    )
    return block(EPB, body, bo)


def spb(data: bytes, orig_len: int | None = None, bo: str = "<") -> bytes:
    """Simple Packet Block (interface 0, no timestamp)."""
    return block(SPB, struct.pack(bo + "I", len(data) if orig_len is None else orig_len) + data, bo)


def opb(iface: int, ticks: int, data: bytes, orig_len: int | None = None, bo: str = "<") -> bytes:
    """Obsolete Packet Block (type 2)."""
    body = (
        struct.pack(
            bo + "HHIIII",
            iface,
            0,
            ticks >> 32,
            ticks & 0xFFFFFFFF,
            len(data),
            len(data) if orig_len is None else orig_len,
        )
        + data
    )
    return block(PB, body, bo)


def dsb(secrets_type: int, data: bytes, bo: str = "<") -> bytes:
    """Decryption Secrets Block."""
    return block(DSB, struct.pack(bo + "II", secrets_type, len(data)) + data, bo)


def nrb(bo: str = "<") -> bytes:
    """Name Resolution Block with one IPv4 record (10.0.0.1 = host.example) and the end record."""
    rec = _pad4(b"\x0a\x00\x00\x01host.example\0")
    body = (
        struct.pack(bo + "HH", 1, len(b"\x0a\x00\x00\x01host.example\0"))
        + rec
        + struct.pack(bo + "HH", 0, 0)
    )
    return block(NRB, body, bo)


def isb(iface: int = 0, bo: str = "<") -> bytes:
    """Interface Statistics Block without options."""
    return block(ISB, struct.pack(bo + "III", iface, 0, 0), bo)


def custom_block(bo: str = "<", copy: bool = True) -> bytes:
    """Custom block with a made-up PEN."""
    return block(CB_COPY if copy else CB_NO_COPY, struct.pack(bo + "I", 32473) + b"hello", bo)


# --------------------------------------------------------------------------- link layers

MAC_A = bytes.fromhex("020000000001")
MAC_B = bytes.fromhex("020000000002")


def ethernet(
    payload: bytes,
    ethertype: int = 0x0800,
    *,
    vlans: Sequence[tuple[int, int]] = (),
    src: bytes = MAC_A,
    dst: bytes = MAC_B,
) -> bytes:
    """Ethernet II frame; ``vlans`` are (TPID, VLAN id) pairs, outermost first."""
    tags = b"".join(struct.pack("!HH", tpid, vid) for tpid, vid in vlans)
    return dst + src + tags + struct.pack("!H", ethertype) + payload


def sll(payload: bytes, protocol: int = 0x0800, pkttype: int = 0) -> bytes:
    """Linux cooked capture v1 header (16 bytes)."""
    return struct.pack("!HHH8sH", pkttype, 1, 6, MAC_A + b"\0\0", protocol) + payload


def sll2(payload: bytes, protocol: int = 0x0800, ifindex: int = 2) -> bytes:
    """Linux cooked capture v2 header (20 bytes)."""
    return struct.pack("!HHIHBB8s", protocol, 0, ifindex, 1, 0, 6, MAC_A + b"\0\0") + payload


def null_link(payload: bytes, af: int = 2, bo: str = "<") -> bytes:
    """BSD loopback (DLT_NULL/LOOP) header: 4-byte address family in ``bo`` order."""
    return struct.pack(bo + "I", af) + payload


def ppp(payload: bytes, protocol: int = 0x0021, hdlc: bool = True) -> bytes:
    """PPP frame with (or without) the ff 03 address/control bytes."""
    return (b"\xff\x03" if hdlc else b"") + struct.pack("!H", protocol) + payload


# --------------------------------------------------------------------------- IP, TCP, UDP


def ipv4(
    payload: bytes,
    src: str | bytes = "10.0.0.1",
    dst: str | bytes = "10.0.0.2",
    proto: int = 6,
    *,
    ttl: int = 64,
    ident: int = 1,
    df: bool = True,
    mf: bool = False,
    frag_offset: int = 0,
    opts: bytes = b"",
    ihl: int | None = None,
    total_length: int | None = None,
    version: int = 4,
) -> bytes:
    """IPv4 header (+ options) + payload. ``frag_offset`` in bytes (multiple of 8)."""
    opts = _pad4(opts)
    hl = 20 + len(opts)
    ihl_v = hl // 4 if ihl is None else ihl
    tl = hl + len(payload) if total_length is None else total_length
    fl = (0x4000 if df else 0) | (0x2000 if mf else 0) | (frag_offset // 8)
    hdr = (
        struct.pack(
            "!BBHHHBBH4s4s",
            (version << 4) | (ihl_v & 0xF),
            0,
            tl,
            ident,
            fl,
            ttl,
            proto,
            0,
            _addr(src),
            _addr(dst),
        )
        + opts
    )
    csum = _checksum(hdr)
    hdr = hdr[:10] + struct.pack("!H", csum) + hdr[12:]
    return hdr + payload


def ipv6(
    payload: bytes,
    src: str | bytes = "2001:db8::1",
    dst: str | bytes = "2001:db8::2",
    nh: int = 6,
    *,
    hlim: int = 64,
    payload_length: int | None = None,
) -> bytes:
    """IPv6 header + payload (``payload`` includes any extension headers; ``nh`` the first one)."""
    pl = len(payload) if payload_length is None else payload_length
    return struct.pack("!IHBB16s16s", 0x60000000, pl, nh, hlim, _addr(src), _addr(dst)) + payload


def ipv6_ext(nh: int, body: bytes = b"\0" * 6) -> bytes:
    """Generic IPv6 extension header (hop-by-hop, routing, dest. options), body padded to 8n-2."""
    body = body + b"\0" * (-(len(body) + 2) % 8)
    return bytes([nh, (len(body) + 2) // 8 - 1]) + body


def ipv6_frag(nh: int, offset: int, more: bool, ident: int) -> bytes:
    """IPv6 Fragment header; ``offset`` in bytes (multiple of 8)."""
    return struct.pack("!BBHI", nh, 0, (offset // 8) << 3 | (1 if more else 0), ident)


def tcp(
    sport: int = 40000,
    dport: int = 80,
    seq: int = 1000,
    ack: int = 0,
    flags: int = 0x02,
    payload: bytes = b"",
    *,
    window: int = 65535,
    opts: bytes = b"",
    data_offset: int | None = None,
    src: str | bytes | None = None,
    dst: str | bytes | None = None,
) -> bytes:
    """TCP header (+ options) + payload; with src and dst set, the checksum is computed."""
    opts = _pad4(opts)
    off = (20 + len(opts)) // 4 if data_offset is None else data_offset
    hdr = (
        struct.pack(
            "!HHIIHHHH", sport, dport, seq, ack, (off << 12) | (flags & 0x1FF), window, 0, 0
        )
        + opts
    )
    seg = hdr + payload
    if src is not None and dst is not None:
        s, d = _addr(src), _addr(dst)
        if len(s) == 4:
            pseudo = s + d + struct.pack("!BBH", 0, 6, len(seg))
        else:
            pseudo = s + d + struct.pack("!IxxxB", len(seg), 6)
        seg = seg[:16] + struct.pack("!H", _checksum(pseudo + seg)) + seg[18:]
    return seg


def udp(
    sport: int = 5353, dport: int = 53, payload: bytes = b"", *, length: int | None = None
) -> bytes:
    """UDP header + payload (checksum 0 = none)."""
    return (
        struct.pack("!HHHH", sport, dport, 8 + len(payload) if length is None else length, 0)
        + payload
    )


def eth_tcp4(
    payload: bytes = b"",
    *,
    sport: int = 40000,
    dport: int = 80,
    seq: int = 1000,
    ack: int = 0,
    flags: int = 0x18,
    src: str = "10.0.0.1",
    dst: str = "10.0.0.2",
) -> bytes:
    """A complete Ethernet/IPv4/TCP frame (the most common test packet)."""
    return ethernet(ipv4(tcp(sport, dport, seq, ack, flags, payload, src=src, dst=dst), src, dst))


# ----------------------------------------------------------------- file objects that misbehave


class Trickle(io.RawIOBase):
    """A file object handing out at most ``piece`` bytes per read (a slow pipe, a socket)."""

    def __init__(self, data: bytes, piece: int) -> None:
        self._data, self._piece, self._pos = data, piece, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        k = min(len(b), self._piece, len(self._data) - self._pos)
        b[:k] = self._data[self._pos : self._pos + k]
        self._pos += k
        return k


class DiskFailsAt:
    """A regular file (a ``BufferedReader``) whose disk fails at byte ``at``: ``read1`` (one
    read of the disk) hands out the bytes before it, then raises EIO; ``read(n)`` raises when
    the n bytes reach it (the buffered reader loses what it had)."""

    def __init__(self, fh: Any, at: int) -> None:
        self._fh, self._at = fh, at

    def read(self, n: int = -1) -> bytes:
        if self._fh.tell() + n > self._at:
            raise OSError(5, "Input/output error")
        return bytes(self._fh.read(n))

    def read1(self, n: int = -1) -> bytes:
        room = self._at - self._fh.tell()
        if room <= 0:
            raise OSError(5, "Input/output error")
        return bytes(self._fh.read(min(n, room)))

    def tell(self) -> int:
        return int(self._fh.tell())

    def close(self) -> None:
        self._fh.close()
