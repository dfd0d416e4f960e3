"""DNS wherever it travels: one :class:`DnsTransaction` per query, matched with its response.

:class:`DnsTracker` is fed every UDP datagram with port 53 on either side (the pipeline
does the port test, so the per-packet cost for other UDP traffic is one comparison), the
messages of DNS over TCP (port 53: :class:`DnsTcpObserver` takes the 2-byte length
prefixes apart, RFC 1035 §4.2.2 / RFC 7766) and the DNS over HTTPS exchanges
(RFC 8484, :mod:`pcaptools.protocols.doh`). Each transaction says its ``transport``
(``udp``, ``tcp``, ``doh``).
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

Over TCP the key is ``(tcp_stream, transaction id, query name)``: the connection replaces the
client address and port. DoH transactions are not matched by id (RFC 8484 §4.1 asks clients
to send id 0): the query and the response are the two bodies of one HTTP exchange.

Differences from tshark: tshark matches within a UDP conversation (both addresses and both
ports) by id only; pcaptools also requires the same query name and does not require the
response to come from the address the query went to. The two agree on every capture in the
test corpus.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..diagnostics import Diagnostics
from ..net.packet import UdpDatagram
from ..tcp.stream import Direction, StreamChunk, StreamCursor

__all__ = [
    "DNS_PORT",
    "RCODE_NAMES",
    "RETRANSMISSION_WINDOW_NS",
    "TYPE_NAMES",
    "DnsTcpObserver",
    "DnsTracker",
    "DnsTransaction",
    "looks_like_query",
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


def _wire() -> ModuleType:
    """:mod:`._dnswire` (dpkt's DNS message): imported by the first message decoded, so a
    load without DNS does not import dpkt."""
    from . import _dnswire

    return _dnswire


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
    transport: str = "udp"
    """udp, tcp or doh"""
    tcp_stream: int | None = None
    """the TCP connection of a tcp or doh transaction"""
    http_stream_id: int | None = None
    """doh over HTTP/2: the stream id"""
    http_request_index: int | None = None
    """doh over HTTP/1.x: the exchange's request_index on the connection"""
    doh_method: str | None = None
    """doh: GET (query in ``?dns=``) or POST (query in the body)"""

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


_Addrs = tuple[int, bytes, int, bytes, int]
"""(ip_version, client address, client port, server address, server port) of a TCP connection"""


class DnsTracker:
    """Matches DNS queries and responses seen on UDP port 53, over TCP and over HTTPS; memory
    grows with the number of queries (one small object each, the rows of the ``dns`` table)."""

    __slots__ = ("_diag", "_slots", "transactions")
    _packing_ = "shared"
    """one for every transport: a packed parser refers to it (:mod:`pcaptools.tcp.packing`)"""

    def __init__(self, diag: Diagnostics) -> None:
        self._diag = diag
        self.transactions: list[DnsTransaction] = []
        self._slots: dict[tuple[object, ...], list[DnsTransaction]] = {}

    def datagram(self, d: UdpDatagram) -> None:
        """Take one UDP datagram with port 53 on either side. Never raises: a message that
        cannot be decoded becomes a ``dns.malformed`` warning."""
        msg = self._decode(
            d.payload, d.frame, d.ts_ns, f"on UDP port {d.sport} -> {d.dport}", None
        )
        if msg is None:
            return
        if msg.response:
            key: tuple[object, ...] = (d.dst, d.dport, msg.id)
            addrs = (d.ip_version, d.dst, d.dport, d.src, d.sport)
            self._response(key, msg, d.frame, d.ts_ns, addrs, "udp", None)
        else:
            key = (d.src, d.sport, msg.id)
            addrs = (d.ip_version, d.src, d.sport, d.dst, d.dport)
            self._query(key, msg, d.frame, d.ts_ns, addrs, "udp", None)

    def stream_message(
        self, data: bytes, *, tcp_stream: int, from_client: bool, frame: int, ts_ns: int,
        addrs: _Addrs | None,
    ) -> None:
        """Take one DNS message (length prefix removed) of a DNS over TCP connection.
        ``addrs`` are the connection's (client = the SYN sender); the query's sender is taken
        as the DNS client whichever side it is. Never raises."""
        msg = self._decode(data, frame, ts_ns, f"over TCP (tcp.stream {tcp_stream})", tcp_stream)
        if msg is None:
            return
        a = addrs if addrs is not None else (0, b"", 0, b"", 0)
        if from_client == msg.response:  # the TCP server sent the query
            a = (a[0], a[3], a[4], a[1], a[2])
        key: tuple[object, ...] = ("tcp", tcp_stream, msg.id)
        if msg.response:
            self._response(key, msg, frame, ts_ns, a, "tcp", tcp_stream)
        else:
            self._query(key, msg, frame, ts_ns, a, "tcp", tcp_stream)

    def doh_exchange(
        self,
        query: bytes | None,
        response: bytes | None,
        *,
        tcp_stream: int,
        query_frame: int | None,
        query_ts: int | None,
        response_frame: int | None,
        response_ts: int | None,
        addrs: _Addrs | None,
        method: str | None,
        http_stream_id: int | None = None,
        http_request_index: int | None = None,
    ) -> None:
        """One DNS over HTTPS exchange: the query (POST body or decoded ``?dns=``) and the
        response body, either may be None (not captured, or not DNS). Never raises."""
        where = (f"over HTTPS (tcp.stream {tcp_stream}, "
                 + (f"HTTP/2 stream {http_stream_id})" if http_stream_id is not None
                    else f"HTTP/1.x request {http_request_index})"))
        q = (self._decode(query, query_frame or 0, query_ts or 0, where, tcp_stream)
             if query is not None else None)
        r = (self._decode(response, response_frame or 0, response_ts or 0, where, tcp_stream)
             if response is not None else None)
        if q is None and r is None:
            return
        a = addrs if addrs is not None else (0, b"", 0, b"", 0)
        first = q if q is not None else r
        assert first is not None
        t = DnsTransaction(
            ip_version=a[0], client_addr=a[1], client_port=a[2], server_addr=a[3],
            server_port=a[4], id=first.id, name=first.name, qtype=first.qtype,
            transport="doh", tcp_stream=tcp_stream, http_stream_id=http_stream_id,
            http_request_index=http_request_index, doh_method=method,
        )
        if q is not None:
            t.query_frame, t.query_ts, t.queries = query_frame, query_ts, 1
        if r is not None and response_frame is not None and response_ts is not None:
            self._fill(t, response_frame, response_ts, r)
        self.transactions.append(t)

    # -- matching ----------------------------------------------------------------------------

    def _query(
        self, key: tuple[object, ...], m: _Message, frame: int, ts: int, a: _Addrs,
        transport: str, tcp_stream: int | None,
    ) -> None:
        slot = self._slots.get(key)
        nk = _key(m.name)
        if slot is not None:
            for t in reversed(slot):
                if t.name_key == nk:
                    if (
                        t.query_ts is not None
                        and t.response_frame is None
                        and ts - t.query_ts < RETRANSMISSION_WINDOW_NS
                    ):
                        t.queries += 1
                        return
                    break
        t = DnsTransaction(
            ip_version=a[0],
            client_addr=a[1],
            client_port=a[2],
            server_addr=a[3],
            server_port=a[4],
            id=m.id,
            name=m.name,
            qtype=m.qtype,
            query_frame=frame,
            query_ts=ts,
            queries=1,
            transport=transport,
            tcp_stream=tcp_stream,
        )
        self.transactions.append(t)
        self._remember(key, t)

    def _response(
        self, key: tuple[object, ...], m: _Message, frame: int, ts: int, a: _Addrs,
        transport: str, tcp_stream: int | None,
    ) -> None:
        slot = self._slots.get(key)
        nk = _key(m.name)
        if slot is not None:
            for t in reversed(slot):
                if nk is None or t.name_key is None or t.name_key == nk:
                    if t.response_frame is None:
                        self._fill(t, frame, ts, m)
                    else:
                        t.responses += 1  # retransmitted (or duplicated) response
                    return
        t = DnsTransaction(  # unsolicited: the query was not captured
            ip_version=a[0],
            client_addr=a[1],
            client_port=a[2],
            server_addr=a[3],
            server_port=a[4],
            id=m.id,
            name=m.name,
            qtype=m.qtype,
            transport=transport,
            tcp_stream=tcp_stream,
        )
        self._fill(t, frame, ts, m)
        self.transactions.append(t)
        self._remember(key, t)

    def _remember(self, key: tuple[object, ...], t: DnsTransaction) -> None:
        slot = self._slots.setdefault(key, [])
        slot.append(t)
        if len(slot) > _PER_KEY:
            del slot[0]

    @staticmethod
    def _fill(t: DnsTransaction, frame: int, ts: int, m: _Message) -> None:
        t.response_frame, t.response_ts = frame, ts
        t.responses += 1
        t.rcode, t.truncated, t.answer_count = m.rcode, m.truncated, m.answer_count
        t.answers, t.answer_addrs, t.min_ttl = m.answers, m.answer_addrs, m.min_ttl
        if t.name is None:
            t.name, t.qtype = m.name, m.qtype

    # -- decoding ---------------------------------------------------------------------------

    def _decode(
        self, buf: bytes, frame: int, ts: int, where: str, tcp_stream: int | None
    ) -> _Message | None:
        dw = _wire()
        try:
            msg = dw.Message(buf)
            for rr in (*msg.an, *msg.ns, *msg.ar):
                if len(rr.rdata) != rr.rlen:  # dpkt slices past the end silently
                    raise dw.NeedData("record data cut short")
        except (
            Exception
        ) as exc:  # dpkt raises UnpackError, NeedData, struct.error, UnicodeDecodeError...
            return self._partial(buf, frame, ts, where, tcp_stream, exc)
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

    def _partial(
        self, buf: bytes, frame: int, ts: int, where: str, tcp_stream: int | None, exc: Exception
    ) -> _Message | None:
        """Report the malformed message; decode what the header and question give, if anything."""
        reason = _reason(exc)
        self._diag.add(
            "dns.malformed",
            f"DNS message of {len(buf)} bytes {where} could not be decoded ({reason})",
            frame=frame,
            ts_ns=ts,
            tcp_stream=tcp_stream,
        )
        if len(buf) < 12:
            return None
        ident, flags, qdcount, ancount = struct.unpack_from(">HHHH", buf, 0)
        name: str | None = None
        qtype: int | None = None
        if qdcount:
            try:
                raw, off = _wire().unpack_name(buf, 12)
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
    if isinstance(exc, _wire().NeedData):
        return "cut short"
    if isinstance(exc, UnicodeDecodeError):
        return "a name is not UTF-8"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _rr_text(rr: Any) -> str:
    """a decoded record (dpkt's ``DNS.RR``) as text"""
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


# -- DNS over TCP ---------------------------------------------------------------------------

_MAX_DNS_MESSAGE = 65535
"""a DNS over TCP message's length prefix is 16 bits"""
_RESYNC_SCAN_BYTES = _MAX_DNS_MESSAGE + 2 + 14
"""bytes kept while looking for the next message start after lost length prefixes"""


class _TcpSide(StreamCursor):
    """One direction of a DNS over TCP connection, and its cursor (:attr:`next_offset`)."""

    __slots__ = ("buf", "drop", "lost", "synced")

    def __init__(self) -> None:
        self.next_offset = -1
        self.buf = bytearray()
        self.drop = 0
        """bytes still to drop: the rest of a message some of whose bytes were not captured"""
        self.synced = True
        """False while the next length prefix is unknown (bytes lost across one, or the
        capture started inside the connection)"""
        self.lost = 0
        """messages given up in this direction"""


class DnsTcpObserver:
    """DNS over TCP of one connection (port 53 on either side): each direction is a sequence
    of messages, each after a 2-byte big-endian length (RFC 1035 §4.2.2); several may share
    a segment and one may span many. Complete messages go to the :class:`DnsTracker` with
    the frame of the segment that completed them (what tshark's ``dns`` rows show).

    Bytes not captured inside a message of known length cost that message only (a
    ``dns.tcp_bytes_lost`` row) and the next length prefix is where it was expected. When the
    prefixes themselves may be lost (a gap longer than the rest of the message, or a capture
    that started inside the connection), parsing resumes at the first offset where a length
    prefix is followed by a whole message that decodes as DNS with one question. Never raises;
    wants the bytes of the whole connection (DNS connections are short)."""

    __slots__ = ("_addrs", "_diag", "_sides", "_tracker", "tcp_stream", "wants_bytes")

    def __init__(
        self,
        *,
        tcp_stream: int,
        tracker: DnsTracker,
        diag: Diagnostics,
        addrs: _Addrs | None,
        midstream: bool = False,
    ) -> None:
        self.tcp_stream = tcp_stream
        self._tracker = tracker
        self._diag = diag
        self._addrs = addrs
        self._sides = (_TcpSide(), _TcpSide())
        if midstream:
            for s in self._sides:
                s.synced = False
        self.wants_bytes = True

    def feed(self, chunk: StreamChunk) -> list[object]:
        side = self._sides[chunk.direction]
        data = chunk.data
        if chunk.offset != side.next_offset:  # (the first chunk, or bytes missing or repeated)
            hole, data = side.align(chunk.offset, data)
            if hole:
                self.gap(chunk.direction, chunk.offset - hole, hole, chunk.ts_ns, chunk.frame)
        side.next_offset += len(data)
        if side.drop:
            drop = min(side.drop, len(data))
            side.drop -= drop
            data = data[drop:]
        side.buf += data
        self._parse(side, chunk.direction, chunk.frame, chunk.ts_ns)
        return []

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        side = self._sides[direction]
        side.skip(offset, nbytes)
        if side.drop >= nbytes:  # inside a message already given up
            side.drop -= nbytes
            return []
        nbytes -= side.drop
        side.drop = 0
        buf = side.buf
        if side.synced and len(buf) >= 2:
            need = 2 + int.from_bytes(buf[:2], "big") - len(buf)
            if nbytes <= need:  # the hole is inside this message: the next prefix is known
                side.drop = need - nbytes
                buf.clear()
                self._lost(side, direction, nbytes, ts_ns, frame, "the message they belong to")
                return []
        had = bool(buf) or side.synced
        buf.clear()
        side.synced = False
        if had:
            self._lost(side, direction, nbytes, ts_ns, frame,
                       "the messages they belong to; parsing resumes at the next message start")
        return []

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        side = self._sides[direction]
        if side.synced and (side.buf or side.drop):
            need = (2 + int.from_bytes(side.buf[:2], "big") - len(side.buf)
                    if len(side.buf) >= 2 else None)
            self._diag.add(
                "dns.tcp_truncated_message",
                f"DNS over TCP {direction.label} "
                + ("at the end of the capture" if at_eof else "closed")
                + (f" {need} bytes before the end of a message" if need is not None
                   else " inside a length prefix"),
                ts_ns=ts_ns, frame=frame, tcp_stream=self.tcp_stream,
                direction=direction.label,
            )
        side.buf.clear()
        side.drop = 0
        return []

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        return []

    def _lost(self, side: _TcpSide, d: Direction, nbytes: int, ts: int, frame: int,
              what: str) -> None:
        side.lost += 1
        self._diag.add(
            "dns.tcp_bytes_lost",
            f"{nbytes} bytes of DNS over TCP {d.label} were not captured: {what} "
            "is missing from the dns table",
            ts_ns=ts, frame=frame, tcp_stream=self.tcp_stream, direction=d.label,
        )

    def _parse(self, side: _TcpSide, d: Direction, frame: int, ts: int) -> None:
        buf = side.buf
        if not side.synced and not self._resync(side):
            return
        pos = 0
        n = len(buf)
        out: list[bytes] = []
        while n - pos >= 2:
            length = (buf[pos] << 8) | buf[pos + 1]
            end = pos + 2 + length
            if end > n:
                break
            out.append(bytes(buf[pos + 2 : end]))
            pos = end
        if pos:
            del buf[:pos]
        tracker = self._tracker
        for m in out:
            tracker.stream_message(
                m, tcp_stream=self.tcp_stream, from_client=d == Direction.CLIENT_TO_SERVER,
                frame=frame, ts_ns=ts, addrs=self._addrs,
            )

    @staticmethod
    def _resync(side: _TcpSide) -> bool:
        """Find the next message start in ``side.buf`` (dropping what comes before it): the
        first offset where a length prefix is followed by that many bytes that decode as a
        DNS message with one question. False while none is found; the bytes from the first
        candidate still incomplete are kept for the next call."""
        buf = side.buf
        n = len(buf)
        pending = -1
        for i in range(n - 13):
            length = (buf[i] << 8) | buf[i + 1]
            if length < 17 or buf[i + 6] != 0 or buf[i + 7] != 1 or buf[i + 4] & 0x78:
                continue
            end = i + 2 + length
            if end > n:
                if pending < 0:
                    pending = i
                continue
            if looks_like_query(bytes(buf[i + 2 : end])):
                del buf[:i]
                side.synced = True
                return True
        keep = pending if pending >= 0 else max(0, n - 13)
        if keep:
            del buf[:keep]
        if len(buf) > _RESYNC_SCAN_BYTES:  # a candidate that never completed: not one
            del buf[:1]
        return False


def looks_like_query(data: bytes) -> bool:
    """``data`` decodes as a DNS message with one question."""
    try:
        msg = _wire().Message(data)
    except Exception:  # dpkt raises many types on garbage
        return False
    return len(msg.qd) == 1
