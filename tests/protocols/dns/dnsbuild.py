"""Hand-built DNS messages (RFC 1035 wire format) for the DNS tests."""

from __future__ import annotations

import ipaddress
import struct

A, CNAME, AAAA, HTTPS, PTR = 1, 5, 28, 65, 12


def name(n: str) -> bytes:
    """Uncompressed wire name."""
    if n in ("", "."):
        return b"\0"
    return b"".join(bytes([len(p)]) + p.encode() for p in n.rstrip(".").split(".")) + b"\0"


def rr(owner: bytes, rtype: int, rdata: bytes, ttl: int = 60) -> bytes:
    return owner + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def a(addr: str) -> bytes:
    return ipaddress.ip_address(addr).packed


def message(
    ident: int,
    qname: str | None,
    qtype: int = A,
    *,
    response: bool = False,
    rcode: int = 0,
    tc: bool = False,
    answers: list[bytes] | None = None,
    qdcount: int | None = None,
    ancount: int | None = None,
) -> bytes:
    """Header + one question (none when ``qname`` is None) + answer records.
    ``qdcount``/``ancount`` override the counts (to lie)."""
    answers = answers or []
    flags = 0x0100 | (0x8000 | 0x0080 if response else 0) | (0x0200 if tc else 0) | rcode
    q = b"" if qname is None else name(qname) + struct.pack(">HH", qtype, 1)
    qd = (0 if qname is None else 1) if qdcount is None else qdcount
    an = len(answers) if ancount is None else ancount
    return struct.pack(">HHHHHH", ident, flags, qd, an, 0, 0) + q + b"".join(answers)


#: a pointer to the question name at offset 12
PTR_QNAME = b"\xc0\x0c"
