"""DNS over UDP: one :class:`DnsTransaction` per query, matched with its response.

:class:`DnsTracker` is fed every UDP datagram with port 53 on either side (the pipeline
does the port test, so the per-packet cost for other UDP traffic is one comparison).
Messages are decoded with :mod:`dpkt.dns` inside ``try``; a message dpkt cannot decode is
reported as ``dns.malformed`` and, if its header and question are readable, still takes part
in matching (its answers are then unknown).

Matching follows tshark 4.0 (``packet-dns.c``) with the key the analyst cares about:
``(client address, client port, transaction id, query name)``, where the client is the
sender of the query (QR=0), whatever the ports are.

- A query with the key of an earlier query that has no response yet and was sent less than
  :data:`RETRANSMISSION_WINDOW_NS` (tshark's ``dns.retransmission_timer``, 5 s) before is a
  retransmission (tshark ``dns.retransmit_request``): it adds to ``queries`` and the latency
  stays measured from the first query, as tshark's ``dns.time``. Otherwise it starts a new
  transaction.
- A response completes the latest transaction with its key; if that transaction already has
  a response, the new one is a retransmitted response (``responses`` += 1, tshark
  ``dns.retransmit_response``); with no transaction it is unsolicited (a row without query:
  the capture started after the query was sent).

Differences from tshark: tshark matches within a UDP conversation (both addresses and both
ports) by id only; pcaptools also requires the same query name and does not require the
response to come from the address the query went to. The two agree on every capture in the
test corpus.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

import dpkt

from ..diagnostics import Diagnostics
from ..net.packet import UdpDatagram

__all__ = [
    "DNS_PORT",
    "RCODE_NAMES",
    "RETRANSMISSION_WINDOW_NS",
    "TYPE_NAMES",
    "DnsTracker",
    "DnsTransaction",
    "rcode_name",
    "type_name",
]

DNS_PORT = 53
RETRANSMISSION_WINDOW_NS = 5_000_000_000
"""tshark's ``dns.retransmission_timer`` default: a query id repeated within 5 s is resent"""

#: transactions remembered per (client address, port, id), newest last
_PER_KEY = 8

TYPE_NAMES: dict[int, str] = {
    1: "A",
    2: "NS",
    5: "CNAME",
    6: "SOA",
    12: "PTR",
    13: "HINFO",
    15: "MX",
    16: "TXT",
    28: "AAAA",
    33: "SRV",
    35: "NAPTR",
    41: "OPT",
    43: "DS",
    46: "RRSIG",
    47: "NSEC",
    48: "DNSKEY",
    50: "NSEC3",
    52: "TLSA",
    64: "SVCB",
    65: "HTTPS",
    252: "AXFR",
    255: "ANY",
    257: "CAA",
}

RCODE_NAMES: dict[int, str] = {
    0: "NOERROR",
    1: "FORMERR",
    2: "SERVFAIL",
    3: "NXDOMAIN",
    4: "NOTIMP",
    5: "REFUSED",
    6: "YXDOMAIN",
    7: "YXRRSET",
    8: "NXRRSET",
    9: "NOTAUTH",
    10: "NOTZONE",
}


def type_name(code: int) -> str:
    """``1`` -> ``A``; unknown types as RFC 3597 writes them: ``TYPE4242``."""
    return TYPE_NAMES.get(code, f"TYPE{code}")


def rcode_name(code: int) -> str:
    """``3`` -> ``NXDOMAIN``; unknown codes as ``RCODE12``."""
    return RCODE_NAMES.get(code, f"RCODE{code}")


# rdata types whose fields dpkt decodes; others keep their raw rdata (dpkt would raise)
_DPKT_RDATA = frozenset({1, 2, 5, 6, 12, 15, 28, 33})


class _RR(dpkt.dns.DNS.RR):  # type: ignore[misc]
    def unpack_rdata(self, buf: bytes, off: int) -> None:
        if self.type in _DPKT_RDATA:
            super().unpack_rdata(buf, off)


class _DNS(dpkt.dns.DNS):  # type: ignore[misc]
    """dpkt's DNS message that tolerates record types dpkt does not decode (HTTPS, SVCB,
    DNSSEC...): their rdata is kept raw instead of raising UnpackError."""

    RR = _RR


@dataclass(slots=True)
class DnsTransaction:
    """One DNS query and its response (either may be missing)."""

    ip_version: int
    client_addr: bytes
    """packed address of the query sender"""
    client_port: int
    server_addr: bytes
    server_port: int
    id: int
    name: str | None
    """query name as sent (without the trailing dot; ``<Root>`` for the root); None if unreadable"""
    qtype: int | None
    query_frame: int | None = None
    query_ts: int | None = None
    response_frame: int | None = None
    response_ts: int | None = None
    rcode: int | None = None
    truncated: bool | None = None
    """the response had the TC flag (too long for UDP: the client should retry over TCP)"""
    answer_count: int | None = None
    """ANCOUNT of the response"""
    answers: str | None = None
    """answer records in wire order: ``CNAME x, A 192.0.2.1``; None when undecodable"""
    answer_addrs: str | None = None
    """A and AAAA addresses among the answers, comma-separated"""
    min_ttl: int | None = None
    """smallest TTL among the answers (seconds)"""
    queries: int = 0
    responses: int = 0

    @property
    def name_key(self) -> str | None:
        return None if self.name is None else self.name.lower().rstrip(".")


@dataclass(slots=True)
class _Message:
    id: int
    response: bool
    truncated: bool
    rcode: int
    name: str | None
    qtype: int | None
    answer_count: int
    answers: str | None
    answer_addrs: str | None
    min_ttl: int | None


class DnsTracker:
    """Matches DNS queries and responses seen on UDP port 53; memory grows with the number of
    queries (one small object each, the rows of the ``dns`` table)."""

    __slots__ = ("_diag", "_slots", "transactions")

    def __init__(self, diag: Diagnostics) -> None:
        self._diag = diag
        self.transactions: list[DnsTransaction] = []
        self._slots: dict[tuple[bytes, int, int], list[DnsTransaction]] = {}

    def datagram(self, d: UdpDatagram) -> None:
        """Take one UDP datagram with port 53 on either side. Never raises: a message that
        cannot be decoded becomes a ``dns.malformed`` warning."""
        msg = self._decode(d)
        if msg is None:
            return
        if msg.response:
            self._response(d, msg)
        else:
            self._query(d, msg)

    # -- matching ----------------------------------------------------------------------------

    def _query(self, d: UdpDatagram, m: _Message) -> None:
        key = (d.src, d.sport, m.id)
        slot = self._slots.get(key)
        nk = _key(m.name)
        if slot is not None:
            for t in reversed(slot):
                if t.name_key == nk:
                    if (
                        t.query_ts is not None
                        and t.response_frame is None
                        and d.ts_ns - t.query_ts < RETRANSMISSION_WINDOW_NS
                    ):
                        t.queries += 1
                        return
                    break
        t = DnsTransaction(
            ip_version=d.ip_version,
            client_addr=d.src,
            client_port=d.sport,
            server_addr=d.dst,
            server_port=d.dport,
            id=m.id,
            name=m.name,
            qtype=m.qtype,
            query_frame=d.frame,
            query_ts=d.ts_ns,
            queries=1,
        )
        self.transactions.append(t)
        self._remember(key, t)

    def _response(self, d: UdpDatagram, m: _Message) -> None:
        key = (d.dst, d.dport, m.id)
        slot = self._slots.get(key)
        nk = _key(m.name)
        if slot is not None:
            for t in reversed(slot):
                if nk is None or t.name_key is None or t.name_key == nk:
                    if t.response_frame is None:
                        self._fill(t, d, m)
                    else:
                        t.responses += 1  # retransmitted (or duplicated) response
                    return
        t = DnsTransaction(  # unsolicited: the query was not captured
            ip_version=d.ip_version,
            client_addr=d.dst,
            client_port=d.dport,
            server_addr=d.src,
            server_port=d.sport,
            id=m.id,
            name=m.name,
            qtype=m.qtype,
        )
        self._fill(t, d, m)
        self.transactions.append(t)
        self._remember(key, t)

    def _remember(self, key: tuple[bytes, int, int], t: DnsTransaction) -> None:
        slot = self._slots.setdefault(key, [])
        slot.append(t)
        if len(slot) > _PER_KEY:
            del slot[0]

    @staticmethod
    def _fill(t: DnsTransaction, d: UdpDatagram, m: _Message) -> None:
        t.response_frame, t.response_ts = d.frame, d.ts_ns
        t.responses += 1
        t.rcode, t.truncated, t.answer_count = m.rcode, m.truncated, m.answer_count
        t.answers, t.answer_addrs, t.min_ttl = m.answers, m.answer_addrs, m.min_ttl
        if t.name is None:
            t.name, t.qtype = m.name, m.qtype

    # -- decoding ---------------------------------------------------------------------------

    def _decode(self, d: UdpDatagram) -> _Message | None:
        buf = d.payload
        try:
            msg = _DNS(buf)
            for rr in (*msg.an, *msg.ns, *msg.ar):
                if len(rr.rdata) != rr.rlen:  # dpkt slices past the end silently
                    raise dpkt.NeedData("record data cut short")
        except (
            Exception
        ) as exc:  # dpkt raises UnpackError, NeedData, struct.error, UnicodeDecodeError...
            return self._partial(d, exc)
        qd = msg.qd[0] if msg.qd else None
        answers: list[str] = []
        addrs: list[str] = []
        ttls: list[int] = []
        for rr in msg.an:
            text = _rr_text(rr)
            answers.append(text)
            if rr.type == 1 and len(rr.rdata) == 4:
                addrs.append(socket.inet_ntop(socket.AF_INET, rr.rdata))
            elif rr.type == 28 and len(rr.rdata) == 16:
                addrs.append(socket.inet_ntop(socket.AF_INET6, rr.rdata))
            ttls.append(int(rr.ttl))
        return _Message(
            id=int(msg.id),
            response=bool(msg.qr),
            truncated=bool(msg.op & 0x0200),
            rcode=int(msg.rcode),
            name=None if qd is None else _name(qd.name),
            qtype=None if qd is None else int(qd.type),
            answer_count=len(msg.an),
            answers=", ".join(answers),
            answer_addrs=",".join(addrs),
            min_ttl=min(ttls) if ttls else None,
        )

    def _partial(self, d: UdpDatagram, exc: Exception) -> _Message | None:
        """Report the malformed message; decode what the header and question give, if anything."""
        buf = d.payload
        reason = _reason(exc)
        self._diag.add(
            "dns.malformed",
            f"DNS message of {len(buf)} bytes on UDP port {d.sport} -> {d.dport} could not be "
            f"decoded ({reason})",
            frame=d.frame,
            ts_ns=d.ts_ns,
        )
        if len(buf) < 12:
            return None
        ident, flags, qdcount, ancount = struct.unpack_from(">HHHH", buf, 0)
        name: str | None = None
        qtype: int | None = None
        if qdcount:
            try:
                raw, off = dpkt.dns.unpack_name(buf, 12)
                if off + 4 <= len(buf):
                    name, qtype = _name(raw), struct.unpack_from(">H", buf, off)[0]
            except Exception:  # the question itself is unreadable
                pass
        return _Message(
            id=ident,
            response=bool(flags & 0x8000),
            truncated=bool(flags & 0x0200),
            rcode=flags & 0x000F,
            name=name,
            qtype=qtype,
            answer_count=ancount,
            answers=None,
            answer_addrs=None,
            min_ttl=None,
        )


def _key(name: str | None) -> str | None:
    return None if name is None else name.lower().rstrip(".")


def _name(raw: str) -> str:
    return raw if raw else "<Root>"


def _reason(exc: Exception) -> str:
    if isinstance(exc, dpkt.NeedData):
        return "cut short"
    if isinstance(exc, UnicodeDecodeError):
        return "a name is not UTF-8"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _rr_text(rr: dpkt.dns.DNS.RR) -> str:
    t = int(rr.type)
    name = type_name(t)
    if t == 1 and len(rr.rdata) == 4:
        return f"A {socket.inet_ntop(socket.AF_INET, rr.rdata)}"
    if t == 28 and len(rr.rdata) == 16:
        return f"AAAA {socket.inet_ntop(socket.AF_INET6, rr.rdata)}"
    if t == 5:
        return f"CNAME {rr.cname}"
    if t == 12:
        return f"PTR {rr.ptrname}"
    if t == 2:
        return f"NS {rr.nsname}"
    if t == 15:
        return f"MX {rr.preference[0]} {rr.mxname}"
    if t == 33:
        return f"SRV {rr.priority} {rr.weight} {rr.port} {rr.srvname}"
    if t == 6:
        return f"SOA {rr.mname}"
    return f"{name} ({len(rr.rdata)} bytes)"
