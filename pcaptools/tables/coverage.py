"""The coverage account: which frames and bytes pcaptools analysed, and which it did not.

``Capture.coverage`` has one row per TCP connection, per UDP flow (the 5-tuple, both
directions) and per other traffic class (ICMP between two hosts, non-IP frames of one
EtherType...). Every frame of the capture is in exactly one row, so ``frames`` adds up to
``summary.frames`` and ``wire_bytes`` to ``summary.wire_bytes``. Each row says which
``protocol`` the traffic was and a ``status`` (:data:`STATUSES`).

How a row gets its protocol and status (extensible: add a protocol without touching the
frame loop):

- TCP: at the end of the load, from what the observers reported into the tables
  (:func:`connection_verdict` over :class:`ConnectionFacts`): the TLS handshake table (and
  its ``decrypt_status``), the tables listed in :data:`STREAM_PROTOCOLS` (a table with a
  ``tcp_stream`` column whose rows name the protocol a connection carried), the
  warnings in :data:`MALFORMED_CODES` (a parser gave up on the connection) and in
  :data:`UNPARSED_CODES` (payload came after its parsers were let go: ``partly_analysed``,
  with the warnings' ``bytes`` summed in the detail). The frame and byte counts are the
  ``connections`` table's counters: no per-frame work.
- UDP: per flow, from its first datagram (:func:`udp_protocol`: ports and first bytes),
  then :data:`UDP_STATUS` says whether pcaptools analyses it (DNS on port 53; the rest are
  ``not_parsed``). One dict update per UDP frame. A QUIC flow that is a row of
  ``quic_connections`` is ``decrypted`` at the end of the load when the key log decrypted
  all of its packets, else ``encrypted_no_key`` (its Initial packets were decrypted and its
  handshake's first flight parsed; the rest needs the key log's secrets); other QUIC flows
  stay ``not_parsed``.
- Other IP and non-IP frames: :func:`ip_protocol_name` / :func:`non_ip_protocol`,
  ``not_parsed`` unless :data:`OTHER_STATUS` says otherwise; frames whose headers could
  not be decoded (a ``net.*`` warning on the frame) are ``malformed``.

The number of non-TCP rows is bounded (:data:`MAX_FLOWS`): past it, new flows are folded
into one row per (transport, protocol, status) with no addresses.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd

from .schema import Column, TableSchema

if TYPE_CHECKING:
    from ..diagnostics import Diagnostics
    from ..io.frame import RawFrame
    from ..net.packet import IpPacket, UdpDatagram

__all__ = [
    "COVERAGE",
    "MALFORMED_CODES",
    "MAX_FLOWS",
    "OTHER_STATUS",
    "STATUSES",
    "STREAM_PROTOCOLS",
    "UDP_STATUS",
    "UNPARSED_CODES",
    "ConnectionFacts",
    "FlowCounter",
    "Verdict",
    "connection_verdict",
    "coverage_table",
    "udp_protocol",
]

#: status -> meaning (the vocabulary of ``coverage.status``)
STATUSES: Final[dict[str, str]] = {
    "analysed": "parsed by pcaptools (TCP without payload: the TCP analysis is all there is)",
    "decrypted": "TLS (or QUIC) decrypted with a key log, and the protocol inside parsed",
    "encrypted_no_key": "TLS whose payload stayed encrypted (no key for it, hellos not captured, "
    "decryption failed or cipher not supported): only the handshake is analysed; QUIC: the "
    "Initial packets are decrypted (no key needed), the rest needs the key log's secrets",
    "unknown_payload": "payload of a protocol pcaptools did not recognise",
    "not_parsed": "a protocol pcaptools recognises but does not analyse (yet): QUIC, ICMP "
    "other than errors (echo, neighbour discovery...), "
    "non-IP...",
    "malformed": "headers that could not be decoded, or a parser gave up on the connection",
    "partly_analysed": "a TCP connection parsed (or decrypted) to its end, but payload that "
    "came after that end was not parsed (its parsers had been let go: "
    "tcp.payload_after_release); the detail counts them",
}

#: tables whose ``tcp_stream`` rows say a connection carried that protocol, most specific first
#: (a WebSocket connection also has its HTTP/1.1 Upgrade in http_requests). Add a row here
#: when a new observer fills a table with a ``tcp_stream`` column (DNS over TCP, ...); tables
#: without such a column are skipped.
STREAM_PROTOCOLS: Final[list[tuple[str, str]]] = [
    ("ws_connections", "websocket"),
    ("http2_connections", "http2"),
    ("http_requests", "http1"),
    ("dns", "dns"),
]

#: warning codes after which a parser stopped reading a connection: its status is malformed
MALFORMED_CODES: Final[frozenset[str]] = frozenset(
    {
        "tcp.observer_error",
        "tls.resync_failed",
        "tls.internal_error",
        "http2.desynced",
        "ws.desynced",
    }
)

#: warning codes that report payload of a connection no parser was given (its parsers had
#: finished and were let go when the connection ended): an analysed or decrypted
#: connection with one is partly_analysed, the rows' ``bytes`` summed in its detail
UNPARSED_CODES: Final[frozenset[str]] = frozenset({"tcp.payload_after_release"})

#: UDP protocol -> status; protocols not listed are not_parsed ("unknown" is unknown_payload)
UDP_STATUS: Final[dict[str, str]] = {"dns": "analysed", "unknown": "unknown_payload"}
#: other-IP / non-IP protocol -> status; not listed: not_parsed
OTHER_STATUS: Final[dict[str, str]] = {"ip_fragment": "analysed", "icmp_error": "analysed"}

#: non-TCP rows kept with their addresses; later flows are folded per (transport, protocol, status)
MAX_FLOWS: Final = 100_000

_UDP_PORTS: Final[dict[int, str]] = {
    53: "dns",
    5353: "mdns",
    5355: "llmnr",
    123: "ntp",
    67: "dhcp",
    68: "dhcp",
    546: "dhcpv6",
    547: "dhcpv6",
    137: "netbios",
    138: "netbios",
    1900: "ssdp",
    161: "snmp",
    162: "snmp",
    514: "syslog",
    500: "isakmp",
    4500: "isakmp",
    51820: "wireguard",
    3478: "webrtc",
    5349: "webrtc",
    19302: "webrtc",
    17500: "db-lsp-disc",
}
_QUIC_PORTS: Final = frozenset({443, 80, 8443, 4433, 784, 853})
_QUIC_VERSIONS: Final = frozenset({0x00000000, 0x00000001, 0x6B3343CF, 0x709A50C4})
_IP_PROTOCOLS: Final[dict[int, str]] = {
    1: "icmp",
    2: "igmp",
    4: "ipip",
    41: "ipv6_in_ip",
    47: "gre",
    50: "esp",
    51: "ah",
    58: "icmpv6",
    89: "ospf",
    103: "pim",
    112: "vrrp",
    132: "sctp",
}
_ETHERTYPES: Final[dict[int, str]] = {
    0x0806: "arp",
    0x8035: "rarp",
    0x88CC: "lldp",
    0x888E: "eapol",
    0x8863: "pppoe",
    0x8864: "pppoe",
    0x88E5: "macsec",
    0x8847: "mpls",
    0x8848: "mpls",
    0x88F7: "ptp",
    0x8809: "slow_protocols",
    0x9000: "loopback",
}

_TCP, _UDP = "tcp", "udp"

COVERAGE = TableSchema(
    name="coverage",
    grain="one row per TCP connection, UDP flow (5-tuple, both directions) and other traffic "
    "class (other IP protocol between two hosts, non-IP frames of one kind): every frame in "
    "exactly one row",
    key=("frame",),
    columns=(
        Column("frame", "int64", None, "first frame of the row (Wireshark frame.number)"),
        Column("last_frame", "int64", None, "last frame of the row"),
        Column(
            "transport",
            "category",
            None,
            "tcp, udp, the IP protocol (icmp, icmpv6, gre, ip_proto_N...), ip (IP fragments "
            "not yet reassembled) or non_ip",
        ),
        Column(
            "protocol",
            "category",
            None,
            "what the traffic carried: TCP: websocket, http2, http1, dns (the protocol inside "
            "TLS when decrypted), tls (not decrypted, or nothing recognised inside), unknown "
            "(payload nobody recognised), none (no payload); UDP: dns, quic, gquic, webrtc "
            "(STUN/DTLS/SRTP), mdns, ntp... or unknown; other IP: icmp, icmpv6, ip_fragment...; "
            "non-IP: arp, lldp, ethertype_0xNNNN, non_ip",
        ),
        Column(
            "status",
            "category",
            None,
            "analysed, decrypted, encrypted_no_key, unknown_payload, not_parsed, malformed, "
            "partly_analysed (pcaptools.tables.coverage.STATUSES says what each means)",
        ),
        Column(
            "detail",
            "string",
            None,
            "why this status, in words (TLS decrypt_status, ALPN, the warning code that "
            "made it malformed, the bytes of payload not parsed...)",
        ),
        Column(
            "tcp_stream", "Int64", None, "Wireshark tcp.stream of a TCP connection; NA otherwise"
        ),
        Column("ip_version", "Int64", None, "4 or 6; NA for non-IP rows"),
        Column(
            "src",
            "string",
            None,
            "source address of the first frame (TCP: the client); NA for non-IP and folded rows",
        ),
        Column("sport", "Int64", None, "source port of the first frame (TCP: the client's)"),
        Column("dst", "string", None, "destination address of the first frame (TCP: the server)"),
        Column("dport", "Int64", None, "destination port of the first frame (TCP: the server's)"),
        Column(
            "frames", "int64", "frames", "frames of the row; the column adds up to summary.frames"
        ),
        Column(
            "wire_bytes",
            "int64",
            "bytes",
            "frame.len summed; the column adds up to summary.wire_bytes",
        ),
        Column(
            "payload_bytes",
            "Int64",
            "bytes",
            "TCP: tcp.len summed (retransmissions included); UDP: captured UDP payload bytes; "
            "NA for other rows",
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one row was and how far pcaptools got with it."""

    protocol: str
    status: str
    """a key of :data:`STATUSES`"""
    detail: str


@dataclass(frozen=True, slots=True)
class ConnectionFacts:
    """What the observers of one TCP connection reported, read back from the tables."""

    payload_bytes: int
    """tcp.len summed over both directions"""
    parsed: bool = True
    """payload analysis was on for this connection (``load(payloads=False)``: off)"""
    tls_status: str | None = None
    """best tls_handshakes.decrypt_status of its sessions; None without a TLS row"""
    tls_version: str | None = None
    alpn: str | None = None
    tls_app_bytes: int = 0
    """decrypted application data bytes, both directions"""
    layers: tuple[str, ...] = ()
    """protocols of :data:`STREAM_PROTOCOLS` whose tables have rows for it, in that order"""
    malformed: str | None = None
    """first warning code of :data:`MALFORMED_CODES` on it"""
    unparsed: str | None = None
    """first warning code of :data:`UNPARSED_CODES` on it"""
    unparsed_segments: int = 0
    """its warning rows of :data:`UNPARSED_CODES`: segments whose payload was not parsed"""
    unparsed_bytes: int | None = None
    """their ``bytes`` summed; None when a row does not say"""


_TLS_BEST = (
    "decrypted",
    "partial",
    "failed",
    "unsupported_cipher",
    "no_keys",
    "no_keylog",
    "incomplete",
    "not_encrypted",
)
_TLS_WHY = {
    "failed": "decryption failed (wrong key?)",
    "unsupported_cipher": "cipher suite not supported for decryption",
    "no_keys": "the key log has no secret for this session",
    "no_keylog": "no key log",
    "incomplete": "hellos not captured: cannot decrypt",
}


def connection_verdict(f: ConnectionFacts) -> Verdict:
    """(protocol, status, detail) of one TCP connection from what its observers reported."""
    inner = f.layers[0] if f.layers else None
    if f.tls_status is not None:
        tls = (
            " ".join(x for x in (f.tls_version, f"ALPN {f.alpn}" if f.alpn else None) if x) or "TLS"
        )
        if f.tls_status in ("decrypted", "partial"):
            part = ", some records failed" if f.tls_status == "partial" else ""
            if inner is not None:
                v = Verdict(inner, "decrypted", f"{tls}, decrypted{part}")
            elif f.tls_app_bytes:
                v = Verdict(
                    "tls",
                    "unknown_payload",
                    f"{tls}, decrypted{part}: the plaintext is no protocol pcaptools parses",
                )
            else:
                v = Verdict("tls", "decrypted", f"{tls}, decrypted{part}; no application data")
        elif f.tls_status == "not_encrypted":
            v = Verdict(inner or "tls", "analysed", f"{tls}: no protected record")
        else:
            v = Verdict(
                "tls", "encrypted_no_key", f"{tls}: {_TLS_WHY.get(f.tls_status, f.tls_status)}"
            )
    elif inner is not None:
        v = Verdict(inner, "analysed", "cleartext")
    elif not f.payload_bytes:
        v = Verdict("none", "analysed", "no payload: TCP analysis only")
    elif not f.parsed:
        v = Verdict("unknown", "not_parsed", "payload analysis switched off (payloads=False)")
    else:
        v = Verdict("unknown", "unknown_payload", "no parser recognised the payload")
    if f.unparsed is not None:
        n = f.unparsed_segments
        what = f"{n:,} segment{'' if n == 1 else 's'}"
        if f.unparsed_bytes is not None:
            what = f"{f.unparsed_bytes:,} bytes in {what}"
        status = "partly_analysed" if v.status in ("analysed", "decrypted") else v.status
        v = Verdict(v.protocol, status,
                    f"{v.detail}; payload after the connection ended not parsed: {what} "
                    f"({f.unparsed})")
    if f.malformed is not None:
        return Verdict(v.protocol, "malformed", f"{v.detail}; parsing stopped ({f.malformed})")
    return v


def udp_protocol(sport: int, dport: int, payload: bytes) -> str:
    """The protocol of a UDP flow from its first datagram: DNS by port 53, QUIC by its long
    header (RFC 8999 invariants, known versions) or a short header on a QUIC port, gQUIC
    by its ``Q0xx`` version (as tshark, a gQUIC flow seen first without it is unknown),
    WebRTC by a STUN (RFC 8489) or DTLS record, others by port."""
    if sport == 53 or dport == 53:
        return "dns"
    n = len(payload)
    if n >= 5:
        b0 = payload[0]
        if (b0 & 0x81) == 0x01 and n >= 13 and payload[9:10] == b"Q" and payload[10:13].isdigit():
            return "gquic"  # Google QUIC public header: flags, 8-byte CID, version "Q0xx"
        if b0 & 0x80:
            version = int.from_bytes(payload[1:5], "big")
            if (
                version in _QUIC_VERSIONS
                or version >> 8 == 0xFF0000
                or version & 0x0F0F0F0F == 0x0A0A0A0A
            ):
                return "quic"
        elif b0 & 0x40 and (sport in _QUIC_PORTS or dport in _QUIC_PORTS):
            return "quic"
        if n >= 20 and b0 < 2 and payload[4:8] == b"\x21\x12\xa4\x42":
            return "webrtc"
        if n >= 13 and 20 <= b0 <= 25 and payload[1] == 0xFE and payload[2] in (0xFF, 0xFD, 0xFC):
            return "webrtc"
    for p in (dport, sport) if dport < sport else (sport, dport):
        name = _UDP_PORTS.get(p)
        if name is not None:
            return name
    return "unknown"


def ip_protocol_name(proto: int) -> str:
    return _IP_PROTOCOLS.get(proto, f"ip_proto_{proto}")


def non_ip_protocol(raw: RawFrame) -> str:
    """What a frame without a decodable IP packet carried, when its link header says it
    (Ethernet EtherType, 802.3 LLC), else ``non_ip``."""
    data = raw.data
    if raw.linktype == 1 and len(data) >= 14:
        et = (data[12] << 8) | data[13]
        if et in (0x8100, 0x88A8) and len(data) >= 18:
            et = (data[16] << 8) | data[17]
        if et < 0x0600:
            return "llc"
        if et in (0x0800, 0x86DD):
            return "ip"
        return _ETHERTYPES.get(et, f"ethertype_0x{et:04x}")
    return "non_ip"


def _addr(packed: bytes) -> str:
    return str(ipaddress.ip_address(packed))


class FlowCounter:
    """Counts the frames that are not TCP segments, per UDP flow / other traffic class.
    One dict lookup per frame; rows grow with flows (bounded by :data:`MAX_FLOWS`)."""

    __slots__ = ("_diag", "_rows", "flows", "max_flows")

    def __init__(self, diag: Diagnostics, max_flows: int = MAX_FLOWS) -> None:
        self._diag = diag
        self.max_flows = max_flows
        self.flows: dict[tuple[object, ...], list[object]] = {}
        """key -> [frames, wire_bytes, payload_bytes, first, last, transport, protocol,
        status, detail, ip_version, src, sport, dst, dport]; a UDP flow is there under both
        (src, sport, dst, dport) orders, so that a datagram needs one lookup"""
        self._rows: list[list[object]] = []
        """every row once, in order of creation"""

    def _new(
        self,
        key: tuple[object, ...],
        frame: int,
        transport: str,
        protocol: str,
        status: str,
        detail: str,
        ipv: int | None,
        src: bytes | None,
        sport: int | None,
        dst: bytes | None,
        dport: int | None,
    ) -> list[object]:
        flows = self.flows
        if len(self._rows) >= self.max_flows:  # fold: one row per class, no addresses
            key = ("folded", transport, protocol, status)
            row = flows.get(key)
            if row is not None:
                return row
            detail = f"{detail} (flows beyond the first {self.max_flows:,} folded into this row)"
            ipv = src = sport = dst = dport = None
        row = [
            0,
            0,
            0,
            frame,
            frame,
            transport,
            protocol,
            status,
            detail,
            ipv,
            src,
            sport,
            dst,
            dport,
        ]
        flows[key] = row
        self._rows.append(row)
        return row

    def udp(self, pkt: UdpDatagram) -> None:
        key = (pkt.src, pkt.sport, pkt.dst, pkt.dport)
        row = self.flows.get(key)
        if row is None:
            proto = udp_protocol(pkt.sport, pkt.dport, pkt.payload)
            status = UDP_STATUS.get(proto, "not_parsed")
            row = self._new(
                key,
                pkt.frame,
                _UDP,
                proto,
                status,
                _udp_detail(proto, status),
                pkt.ip_version,
                pkt.src,
                pkt.sport,
                pkt.dst,
                pkt.dport,
            )
            if row[10] is not None:  # (a folded row is found through its class, not its flow)
                self.flows[(pkt.dst, pkt.dport, pkt.src, pkt.sport)] = row
        row[0] += 1  # type: ignore[operator]
        row[1] += pkt.frame_len  # type: ignore[operator]
        row[2] += len(pkt.payload)  # type: ignore[operator]
        row[4] = pkt.frame

    def other(self, pkt: IpPacket) -> None:
        """An IP packet with another transport, or a fragment."""
        # (fragments: transport "ip", so that the tcp/udp rows add up to summary.tcp_frames /
        # udp_frames, which count decoded segments and datagrams only)
        transport = (
            "ip"
            if pkt.fragment
            else {6: _TCP, 17: _UDP}.get(pkt.proto, ip_protocol_name(pkt.proto))
        )
        a, b = pkt.src, pkt.dst
        # ICMP errors (rows of icmp_errors) apart from the ICMP pcaptools does not parse (echo...)
        err = pkt.icmp is not None
        key = ((transport, pkt.fragment, err, a, b) if a <= b
               else (transport, pkt.fragment, err, b, a))
        row = self.flows.get(key)
        if row is None:
            if err:
                proto, detail = "icmp_error", "ICMP errors: one row each in icmp_errors"
            elif pkt.fragment:
                proto, detail = (
                    "ip_fragment",
                    (
                        "IP fragments: the datagram is analysed at the "
                        "frame that completes it (if any)"
                    ),
                )
            else:
                proto, detail = transport, "not analysed"
            status = OTHER_STATUS.get(proto, "not_parsed")
            if transport in (_TCP, _UDP):
                status, detail = "malformed", f"{transport.upper()} header cut short: not analysed"
            elif pkt.quoted_tcp is not None and not err:
                detail = (
                    "not analysed (errors quoting a TCP header carry its tcp_stream in packets)"
                )
            row = self._new(
                key,
                pkt.frame,
                transport,
                proto,
                status,
                detail,
                pkt.ip_version,
                pkt.src,
                None,
                pkt.dst,
                None,
            )
        row[0] += 1  # type: ignore[operator]
        row[1] += pkt.frame_len  # type: ignore[operator]
        row[4] = pkt.frame

    def non_ip(self, raw: RawFrame, *, malformed: bool, supported: bool) -> None:
        """A frame that decoded to no IP packet: ``malformed`` when the decoder wrote a
        ``net.*`` row for it, ``supported`` False for a link type pcaptools does not decode."""
        if malformed:
            key: tuple[object, ...] = ("malformed", raw.linktype)
        elif not supported:
            key = ("linktype", raw.linktype)
        else:
            key = ("non_ip", non_ip_protocol(raw))
        row = self.flows.get(key)
        if row is None:
            if malformed:
                proto, status, detail = (
                    "ip",
                    "malformed",
                    "headers could not be decoded (net.* warnings)",
                )
            elif not supported:
                proto, status, detail = (
                    f"linktype_{raw.linktype}",
                    "not_parsed",
                    "link type not decoded",
                )
            else:
                proto = str(key[1])
                status = OTHER_STATUS.get(proto, "not_parsed")
                detail = "not IP: not analysed"
            row = self._new(
                key, raw.frame, "non_ip", proto, status, detail, None, None, None, None, None
            )
        row[0] += 1  # type: ignore[operator]
        row[1] += raw.orig_len  # type: ignore[operator]
        row[4] = raw.frame

    def rows(self) -> list[tuple[object, ...]]:
        out: list[tuple[object, ...]] = []
        for r in self._rows:
            (
                frames,
                wire,
                payload,
                first,
                last,
                transport,
                proto,
                status,
                detail,
                ipv,
                src,
                sport,
                dst,
                dport,
            ) = r
            out.append(
                (
                    first,
                    last,
                    transport,
                    proto,
                    status,
                    detail,
                    None,
                    ipv,
                    _addr(src) if isinstance(src, bytes) else None,
                    sport,
                    _addr(dst) if isinstance(dst, bytes) else None,
                    dport,
                    frames,
                    wire,
                    payload if transport == _UDP else None,
                )
            )
        return out


def _udp_detail(proto: str, status: str) -> str:
    if proto == "quic":
        return "QUIC: not analysed yet (HTTP/3 and its TLS handshake are invisible)"
    if proto == "webrtc":
        return "STUN/DTLS/SRTP (RFC 7983 multiplexing): not analysed"
    if status == "analysed":
        return "cleartext"
    if status == "unknown_payload":
        return "no parser recognised the payload"
    return "not analysed"


_QUIC_ANALYSED = (
    "QUIC: Initial packets decrypted (versions, connection IDs, SNI, ALPN, TLS version and "
    "cipher in quic_connections); Handshake, 0-RTT and 1-RTT packets stay encrypted (no "
    "secrets for them in the key log)"
)
_QUIC_DECRYPTED = (
    "QUIC: every packet decrypted with the key log (quic_packets, quic_frames; streams handed "
    "to the application protocol of its ALPN)"
)


def _quic_flows(df: pd.DataFrame | None) -> dict[tuple[object, ...], bool]:
    """(addr, port, addr, port) of the UDP flows of ``quic_connections``, both ways round ->
    whether all of its packets decrypted (with the key log)."""
    out: dict[tuple[object, ...], bool] = {}
    if df is None or not len(df):
        return out
    done = ((df["keys_found"] & ~df["needs_keylog"]).tolist() if "keys_found" in df.columns
            else [False] * len(df))
    for ca, cp, sa, sp, ok in zip(df["client_addr"].tolist(), df["client_port"].tolist(),
                                  df["server_addr"].tolist(), df["server_port"].tolist(),
                                  done, strict=True):
        for key in ((ca, int(cp), sa, int(sp)), (sa, int(sp), ca, int(cp))):
            out[key] = bool(ok) and out.get(key, True)
    return out


def _quic_row(r: tuple[object, ...], decrypted: bool) -> tuple[object, ...]:
    """A UDP flow row of a QUIC connection the QUIC observer analysed."""
    if decrypted:
        return (*r[:4], "decrypted", _QUIC_DECRYPTED, *r[6:])
    return (*r[:4], "encrypted_no_key", _QUIC_ANALYSED, *r[6:])


def _streams(df: pd.DataFrame | None) -> set[int]:
    if df is None or "tcp_stream" not in df.columns or not len(df):
        return set()
    return {int(x) for x in df["tcp_stream"].dropna().tolist()}


def coverage_table(
    tables: dict[str, pd.DataFrame],
    flows: FlowCounter | None,
    *,
    payloads: bool = True,
    extra_streams: dict[str, set[int]] | None = None,
) -> pd.DataFrame:
    """The coverage table from the finished tables (``connections``, ``tls_handshakes``,
    the :data:`STREAM_PROTOCOLS` tables, ``warnings``) and the non-TCP flow counts.
    ``extra_streams``: table name -> tcp_streams of rows already handed over (streaming
    export), added to what the tables still hold. Rows in first-frame order."""
    ctx = CoverageContext(tables, payloads=payloads, extra_streams=extra_streams)
    return _with_rows(ctx.part(tables["connections"]), ctx.flow_rows(flows))


def coverage_chunks(
    ctx: CoverageContext,
    flows: FlowCounter | None,
    first_frames: np.ndarray,
    chunks: Iterable[pd.DataFrame],
) -> Iterator[pd.DataFrame]:
    """The coverage table in pieces, for a connections table read a chunk at a time (the
    streaming export): ``chunks`` are its rows in tcp_stream order (the columns of
    :data:`CONNECTION_COLUMNS`), ``first_frames`` its whole ``first_frame`` column of the
    connections with frames. Each piece is one chunk's rows merged with the flow rows that
    come before the next chunk's first frame, so the pieces joined are
    :func:`coverage_table`'s rows. Needs ``first_frames`` non-decreasing (connections are
    numbered in the order their first frame comes: :func:`in_frame_order`)."""
    rows = ctx.flow_rows(flows)
    rows.sort(key=lambda r: int(r[0]))  # type: ignore[call-overload]  # (stable)
    at = 0  # next flow row to hand out
    seen = 0  # connections with frames handed out so far
    for conns in chunks:
        part = ctx.part(conns)
        seen += len(part["frame"])
        nxt = int(first_frames[seen]) if seen < len(first_frames) else None
        stop = len(rows) if nxt is None else at
        while nxt is not None and stop < len(rows) and int(rows[stop][0]) < nxt:  # type: ignore[call-overload]
            stop += 1
        if len(part["frame"]) or stop > at:
            yield _with_rows(part, rows[at:stop])
        at = stop
    if at < len(rows):
        yield _with_rows(CoverageContext.empty_part(), rows[at:])


def in_frame_order(first_frames: np.ndarray) -> bool:
    """Whether the connections' first frames (those with frames, in tcp_stream order) never
    go back, as :func:`coverage_chunks` needs."""
    return bool((first_frames[1:] >= first_frames[:-1]).all())


CONNECTION_COLUMNS = ("tcp_stream", "first_frame", "last_frame", "ip_version", "client_addr",
                      "client_port", "server_addr", "server_port", "client_packets",
                      "server_packets", "client_bytes", "server_bytes", "client_wire_bytes",
                      "server_wire_bytes")
"""the ``connections`` columns the coverage table reads"""


class CoverageContext:
    """What the coverage rows of connections need from the other tables: each reported
    connection's TLS session, malformed-payload warning, unparsed-payload warnings and
    protocol layers, and the two verdicts of a connection nothing reported on (with or
    without payload)."""

    def __init__(self, tables: Mapping[str, pd.DataFrame], *, payloads: bool = True,
                 extra_streams: dict[str, set[int]] | None = None) -> None:
        self.payloads = payloads
        extra = extra_streams or {}
        self.layer_streams = [
            (proto, _streams(tables.get(name)) | extra.get(name, set()))
            for name, proto in STREAM_PROTOCOLS
        ]
        self.quic_connections = tables.get("quic_connections")
        tls: dict[int, tuple[str, str | None, str | None, int]] = {}
        hs = tables.get("tls_handshakes")
        if hs is not None and len(hs):
            rank = {s: i for i, s in enumerate(_TLS_BEST)}
            app = hs["client_app_bytes"].fillna(0).astype("int64") + hs[
                "server_app_bytes"].fillna(0).astype("int64")
            for st, status, ver, alpn, nb in zip(
                hs["tcp_stream"].tolist(),
                hs["decrypt_status"].astype(object).tolist(),
                hs["version"].astype(object).tolist(),
                hs["alpn_selected"].astype(object).tolist(),
                app.tolist(),
                strict=True,
            ):
                status = str(status) if isinstance(status, str) else "incomplete"
                old = tls.get(int(st))
                if old is None or rank.get(status, 99) < rank.get(old[0], 99):
                    tls[int(st)] = (
                        status,
                        ver if isinstance(ver, str) else None,
                        alpn if isinstance(alpn, str) else None,
                        int(nb) + (old[3] if old else 0),
                    )
                else:
                    tls[int(st)] = (old[0], old[1], old[2], old[3] + int(nb))
        self.tls = tls
        bad: dict[int, str] = {}
        unparsed: dict[int, tuple[str, int, int | None]] = {}
        w = tables.get("warnings")
        if w is not None and len(w):
            codes = w["code"].astype(object)
            m = codes.isin(MALFORMED_CODES) & w["tcp_stream"].notna()
            for st, code in zip(w.loc[m, "tcp_stream"].tolist(),
                                codes[m].tolist(), strict=True):
                bad.setdefault(int(st), str(code))
            m = codes.isin(UNPARSED_CODES) & w["tcp_stream"].notna()
            nbytes = (w.loc[m, "bytes"].astype(object).tolist() if "bytes" in w.columns
                      else [None] * int(m.sum()))
            for st, code, nb in zip(w.loc[m, "tcp_stream"].tolist(), codes[m].tolist(), nbytes,
                                    strict=True):
                first, n, total = unparsed.get(int(st), (str(code), 0, 0))
                unparsed[int(st)] = (first, n + 1,
                                     None if total is None or pd.isna(nb) else total + int(nb))
        self.bad = bad
        self.unparsed = unparsed
        reported = set(tls) | set(bad) | set(unparsed)
        for _, s in self.layer_streams:
            reported |= s
        self.reported = np.fromiter(reported, np.int64, len(reported))
        self.verdicts = [connection_verdict(ConnectionFacts(payload_bytes=0, parsed=payloads)),
                         connection_verdict(ConnectionFacts(payload_bytes=1, parsed=payloads))]

    def flow_rows(self, flows: FlowCounter | None) -> list[tuple[object, ...]]:
        """The rows of the non-TCP flows (QUIC flows with what the QUIC observer found)."""
        if flows is None:
            return []
        quic = _quic_flows(self.quic_connections)
        return [_quic_row(r, quic[r[8:12]]) if quic and r[3] == "quic" and r[8:12] in quic
                else r for r in flows.rows()]

    @staticmethod
    def empty_part() -> dict[str, Any]:
        """:meth:`part` of no connection."""
        e = np.empty(0, np.int64)
        o = np.empty(0, object)
        return {"frame": e, "last_frame": e, "transport": o, "protocol": o, "status": o,
                "detail": o, "tcp_stream": e, "ip_version": e, "src": pd.array([], "string"),
                "sport": e, "dst": pd.array([], "string"), "dport": e, "frames": e,
                "wire_bytes": e, "payload_bytes": e}

    def part(self, conns: pd.DataFrame) -> dict[str, Any]:
        """The coverage columns of the connections ``conns`` that have frames, as whole
        columns; the verdict of a connection no observer, TLS session or warning reported
        on depends only on whether it carried payload, so it is asked once for each of those
        two cases. The verdict of the others depends on what was reported and on whether
        payload and decrypted bytes were seen, not on how many: it is asked once for each such
        case (most connections of a capture have one of a few; the rare one with payload not
        parsed has its own, which counts it)."""
        st = conns["tcp_stream"].to_numpy(np.int64)
        frames = (conns["client_packets"].to_numpy(np.int64)
                  + conns["server_packets"].to_numpy(np.int64))
        payload = (conns["client_bytes"].to_numpy(np.int64)
                   + conns["server_bytes"].to_numpy(np.int64))
        has = frames > 0  # (else known only from an ICMP error quoting it: the ICMP row counts it)
        special = np.isin(st, self.reported)
        verdicts = self.verdicts
        pick = (payload > 0).astype(np.intp)
        protocol = np.array([v.protocol for v in verdicts], object)[pick]
        status = np.array([v.status for v in verdicts], object)[pick]
        detail = np.array([v.detail for v in verdicts], object)[pick]
        tls, bad, unparsed = self.tls, self.bad, self.unparsed
        asked: dict[tuple[object, ...], Verdict] = {}
        for i in np.flatnonzero(special & has).tolist():
            sti = int(st[i])
            t = tls.get(sti)
            layers = tuple(p for p, s in self.layer_streams if sti in s)
            malformed = bad.get(sti)
            late = unparsed.get(sti)  # (rare: its counts in the key)
            key = (payload[i] > 0, t and (t[0], t[1], t[2], t[3] > 0), layers, malformed, late)
            v = asked.get(key)
            if v is None:
                v = asked[key] = connection_verdict(ConnectionFacts(
                    payload_bytes=int(payload[i]),
                    parsed=self.payloads,
                    tls_status=t[0] if t else None,
                    tls_version=t[1] if t else None,
                    alpn=t[2] if t else None,
                    tls_app_bytes=t[3] if t else 0,
                    layers=layers,
                    malformed=malformed,
                    unparsed=late[0] if late else None,
                    unparsed_segments=late[1] if late else 0,
                    unparsed_bytes=late[2] if late else None,
                ))
            protocol[i], status[i], detail[i] = v.protocol, v.status, v.detail
        every = bool(has.all())  # (the usual case: no copy of the columns to drop rows)
        kept = np.flatnonzero(has)
        keep: Any = slice(None) if every else kept
        n_keep = len(kept)
        del kept

        def ints(name: str) -> np.ndarray:
            col: np.ndarray = conns[name].to_numpy(np.int64)[keep]
            return col

        def addrs(name: str) -> Any:
            a = conns[name].array
            return a if every else a.take(keep)

        return {
            "frame": ints("first_frame"), "last_frame": ints("last_frame"),
            "transport": np.full(n_keep, _TCP, object),
            "protocol": protocol[keep], "status": status[keep], "detail": detail[keep],
            "tcp_stream": st[keep], "ip_version": ints("ip_version"),
            "src": addrs("client_addr"), "sport": ints("client_port"),
            "dst": addrs("server_addr"), "dport": ints("server_port"),
            "frames": frames[keep],
            "wire_bytes": (conns["client_wire_bytes"].to_numpy(np.int64)
                           + conns["server_wire_bytes"].to_numpy(np.int64))[keep],
            "payload_bytes": payload[keep],
        }


COVERAGE_DTYPES = {c.name: c.dtype for c in COVERAGE.columns}


def _with_rows(part: dict[str, Any], rows: list[tuple[object, ...]]) -> pd.DataFrame:
    """The coverage table of the connection columns ``part`` and the flow ``rows``, in
    first-frame order (connections first among equal frames, as a stable sort of the
    connection rows followed by the flow rows)."""
    frame = np.concatenate([part["frame"], np.array([r[0] for r in rows], np.int64)])
    order: Any = np.argsort(frame, kind="stable")
    if (order[1:] > order[:-1]).all():  # (already in order: no copy)
        order = slice(None)
    del frame
    out: dict[str, Any] = {}
    for i, name in enumerate(COVERAGE.names):
        p = part.pop(name)  # (each input column goes once its output is made)
        ex = [r[i] for r in rows]
        if not isinstance(p, np.ndarray):  # (the addresses: strings of the connections table)
            joined = pd.concat([pd.Series(p, copy=False), pd.Series(ex, dtype=p.dtype)],
                               ignore_index=True).array if ex else p
            out[name] = joined if isinstance(order, slice) else joined.take(order)
        elif p.dtype.kind == "i" and all(type(x) is int for x in ex):
            out[name] = np.concatenate([p, np.array(ex, np.int64)])[order]
        else:
            extra = np.empty(len(rows), object)
            extra[:] = ex
            v = np.concatenate([p.astype(object, copy=False), extra])[order]
            # (a category column from the object array itself: no list of a million pointers)
            out[name] = pd.Categorical(v) if COVERAGE_DTYPES[name] == "category" else v.tolist()
        del p
    return COVERAGE.frame(columns=out, copy=False)
