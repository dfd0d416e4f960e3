"""Handshake message bodies: ClientHello, ServerHello, EncryptedExtensions, Certificate,
TLS 1.3 NewSessionTicket...

Each ``parse_*`` function takes the body of one handshake message (after its 4-byte
header) and returns a small frozen dataclass, or raises :class:`HandshakeParseError`
(a ``ValueError``) on malformed input; the observer turns that into a
``tls.handshake_parse_error`` anomaly and carries on.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

HELLO_REQUEST = 0
CLIENT_HELLO = 1
SERVER_HELLO = 2
NEW_SESSION_TICKET = 4
END_OF_EARLY_DATA = 5
HELLO_RETRY_REQUEST = 6  # TLS 1.3 drafts only
ENCRYPTED_EXTENSIONS = 8
CERTIFICATE = 11
SERVER_KEY_EXCHANGE = 12
CERTIFICATE_REQUEST = 13
SERVER_HELLO_DONE = 14
CERTIFICATE_VERIFY = 15
CLIENT_KEY_EXCHANGE = 16
FINISHED = 20
CERTIFICATE_STATUS = 22
KEY_UPDATE = 24
COMPRESSED_CERTIFICATE = 25
MESSAGE_HASH = 254

HANDSHAKE_NAMES = {
    0: "hello_request",
    1: "client_hello",
    2: "server_hello",
    3: "hello_verify_request",
    4: "new_session_ticket",
    5: "end_of_early_data",
    6: "hello_retry_request",
    8: "encrypted_extensions",
    11: "certificate",
    12: "server_key_exchange",
    13: "certificate_request",
    14: "server_hello_done",
    15: "certificate_verify",
    16: "client_key_exchange",
    20: "finished",
    21: "certificate_url",
    22: "certificate_status",
    23: "supplemental_data",
    24: "key_update",
    25: "compressed_certificate",
    254: "message_hash",
}

#: ServerHello.random of a HelloRetryRequest (RFC 8446 4.1.3)
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")

EXT_SERVER_NAME = 0
EXT_SUPPORTED_GROUPS = 10
EXT_EC_POINT_FORMATS = 11
EXT_SIGNATURE_ALGORITHMS = 13
EXT_ALPN = 16
EXT_ENCRYPT_THEN_MAC = 22
EXT_EXTENDED_MASTER_SECRET = 23
EXT_SESSION_TICKET = 35
EXT_PRE_SHARED_KEY = 41
EXT_EARLY_DATA = 42
EXT_SUPPORTED_VERSIONS = 43
EXT_KEY_SHARE_DRAFT = 40
EXT_KEY_SHARE = 51


class HandshakeParseError(ValueError):
    """A handshake message body is malformed."""


class _Reader:
    """Bounds-checked big-endian reader over one message body."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.end - self.pos:
            raise HandshakeParseError(f"{what}: needs {n} bytes, {self.end - self.pos} left")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        v: int = struct.unpack(">H", self.take(2, what))[0]
        return v

    def u24(self, what: str) -> int:
        b = self.take(3, what)
        return (b[0] << 16) | (b[1] << 8) | b[2]

    def vec(self, len_bytes: int, what: str) -> bytes:
        n = (
            self.u8(what)
            if len_bytes == 1
            else self.u16(what)
            if len_bytes == 2
            else self.u24(what)
        )
        return self.take(n, what)

    def sub(self, len_bytes: int, what: str) -> _Reader:
        n = (
            self.u8(what)
            if len_bytes == 1
            else self.u16(what)
            if len_bytes == 2
            else self.u24(what)
        )
        if n > self.end - self.pos:
            raise HandshakeParseError(
                f"{what}: length {n} exceeds the {self.end - self.pos} bytes left"
            )
        r = _Reader(self.buf, self.pos, self.pos + n)
        self.pos += n
        return r


def _u16_list(data: bytes, what: str) -> tuple[int, ...]:
    if len(data) % 2:
        raise HandshakeParseError(f"{what}: odd length {len(data)}")
    return struct.unpack(f">{len(data) // 2}H", data)


@dataclass(frozen=True, slots=True)
class ClientHello:
    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suites: tuple[int, ...]
    compression_methods: bytes
    extensions: tuple[int, ...]
    """extension types in wire order (GREASE included)"""
    sni: str | None = None
    alpn: tuple[bytes, ...] = ()
    supported_versions: tuple[int, ...] = ()
    supported_groups: tuple[int, ...] = ()
    ec_point_formats: tuple[int, ...] = ()
    signature_algorithms: tuple[int, ...] = ()
    key_share_groups: tuple[int, ...] = ()
    psk_offered: bool = False
    early_data: bool = False
    session_ticket_len: int | None = None
    """length of the session_ticket extension data (None: no extension)"""
    sslv2: bool = False
    """sent in the SSLv2-compatible format (no extensions; JA3/JA4 are not computed, as in tshark)"""


@dataclass(frozen=True, slots=True)
class ServerHello:
    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suite: int
    compression_method: int
    extensions: tuple[int, ...]
    is_hrr: bool = False
    supported_version: int | None = None
    key_share_group: int | None = None
    psk_selected: bool = False
    alpn: bytes | None = None
    encrypt_then_mac: bool = False
    extended_master_secret: bool = False
    session_ticket_ext: bool = False

    @property
    def version(self) -> int:
        """negotiated version: supported_versions if present, else legacy_version"""
        return self.supported_version if self.supported_version is not None else self.legacy_version


@dataclass(frozen=True, slots=True)
class EncryptedExtensions:
    extensions: tuple[int, ...]
    alpn: bytes | None = None
    early_data: bool = False


@dataclass(frozen=True, slots=True)
class CertificateChain:
    count: int | None
    """number of certificates; None when compressed with an algorithm we cannot expand"""
    der_bytes: int
    """sum of the DER certificate lengths (uncompressed_length for undecodable compressed chains)"""


def _server_names(data: bytes) -> str | None:
    r = _Reader(data)
    lst = r.sub(2, "server_name list")
    while lst.left():
        kind = lst.u8("server_name type")
        name = lst.vec(2, "server_name")
        if kind == 0:
            return name.decode("ascii", errors="replace")
    return None


def _alpn_list(data: bytes) -> tuple[bytes, ...]:
    r = _Reader(data)
    lst = r.sub(2, "ALPN list")
    out = []
    while lst.left():
        out.append(lst.vec(1, "ALPN protocol"))
    return tuple(out)


def parse_client_hello(body: bytes) -> ClientHello:
    """Parse a ClientHello body (SSLv3 .. TLS 1.3). Raises HandshakeParseError."""
    r = _Reader(body)
    version = r.u16("client_version")
    random = r.take(32, "random")
    session_id = r.vec(1, "session_id")
    suites = _u16_list(r.vec(2, "cipher_suites"), "cipher_suites")
    comp = r.vec(1, "compression_methods")
    exts: list[int] = []
    fields: dict[str, object] = {}
    if r.left() >= 2:
        er = r.sub(2, "extensions")
        while er.left():
            etype = er.u16("extension type")
            data = er.vec(2, f"extension {etype}")
            exts.append(etype)
            try:
                _client_ext(etype, data, fields)
            except HandshakeParseError:
                raise
            except (struct.error, IndexError) as exc:  # pragma: no cover - _Reader checks bounds
                raise HandshakeParseError(f"extension {etype}: {exc}") from None
    return ClientHello(version, random, session_id, suites, comp, tuple(exts), **fields)  # type: ignore[arg-type]


def _client_ext(etype: int, data: bytes, f: dict[str, object]) -> None:
    if etype == EXT_SERVER_NAME and data:
        f["sni"] = _server_names(data)
    elif etype == EXT_ALPN:
        f["alpn"] = _alpn_list(data)
    elif etype == EXT_SUPPORTED_VERSIONS:
        f["supported_versions"] = _u16_list(
            _Reader(data).vec(1, "supported_versions"), "supported_versions"
        )
    elif etype == EXT_SUPPORTED_GROUPS:
        f["supported_groups"] = _u16_list(
            _Reader(data).vec(2, "supported_groups"), "supported_groups"
        )
    elif etype == EXT_EC_POINT_FORMATS:
        f["ec_point_formats"] = tuple(_Reader(data).vec(1, "ec_point_formats"))
    elif etype == EXT_SIGNATURE_ALGORITHMS:
        f["signature_algorithms"] = _u16_list(
            _Reader(data).vec(2, "signature_algorithms"), "signature_algorithms"
        )
    elif etype in (EXT_KEY_SHARE, EXT_KEY_SHARE_DRAFT):
        lst = _Reader(data).sub(2, "key_share list")
        groups = []
        while lst.left():
            groups.append(lst.u16("key_share group"))
            lst.vec(2, "key_exchange")
        f["key_share_groups"] = tuple(groups)
    elif etype == EXT_PRE_SHARED_KEY:
        f["psk_offered"] = True
    elif etype == EXT_EARLY_DATA:
        f["early_data"] = True
    elif etype == EXT_SESSION_TICKET:
        f["session_ticket_len"] = len(data)


def parse_sslv2_client_hello(msg: bytes) -> ClientHello:
    """An SSLv2-format CLIENT-HELLO (``msg`` starts with msg_type 1). Cipher specs whose first
    byte is 0 are TLS cipher suites; the challenge is right-aligned in the 32-byte random."""
    r = _Reader(msg)
    if r.u8("msg_type") != 1:
        raise HandshakeParseError("SSLv2 message is not a CLIENT-HELLO")
    version = r.u16("version")
    cs_len = r.u16("cipher_specs length")
    sid_len = r.u16("session_id length")
    ch_len = r.u16("challenge length")
    specs = r.take(cs_len, "cipher_specs")
    session_id = r.take(sid_len, "session_id")
    challenge = r.take(ch_len, "challenge")
    if cs_len % 3 or not 16 <= ch_len <= 32:
        raise HandshakeParseError(
            f"SSLv2 CLIENT-HELLO: cipher_specs {cs_len} / challenge {ch_len} bytes"
        )
    suites = tuple((specs[i + 1] << 8) | specs[i + 2] for i in range(0, cs_len, 3) if specs[i] == 0)
    random = b"\0" * (32 - ch_len) + challenge
    return ClientHello(version, random, session_id, suites, b"\0", (), sslv2=True)


def _is_old_draft(version: int) -> bool:
    """TLS 1.3 drafts before 22 used a ServerHello without session id and compression."""
    return (0x7F00 < version < 0x7F16) or version in (0xFB17,)


def parse_server_hello(body: bytes) -> ServerHello:
    """Parse a ServerHello (or TLS 1.3 HelloRetryRequest) body. Raises HandshakeParseError."""
    r = _Reader(body)
    version = r.u16("server_version")
    random = r.take(32, "random")
    if _is_old_draft(version):
        session_id, suite, comp = b"", r.u16("cipher_suite"), 0
    else:
        session_id = r.vec(1, "session_id")
        suite = r.u16("cipher_suite")
        comp = r.u8("compression_method")
    is_hrr = random == HRR_RANDOM
    exts: list[int] = []
    f: dict[str, object] = {}
    if r.left() >= 2:
        er = r.sub(2, "extensions")
        while er.left():
            etype = er.u16("extension type")
            data = er.vec(2, f"extension {etype}")
            exts.append(etype)
            if etype == EXT_SUPPORTED_VERSIONS and len(data) >= 2:
                f["supported_version"] = struct.unpack(">H", data[:2])[0]
            elif etype in (EXT_KEY_SHARE, EXT_KEY_SHARE_DRAFT) and len(data) >= 2:
                f["key_share_group"] = struct.unpack(">H", data[:2])[0]
            elif etype == EXT_PRE_SHARED_KEY:
                f["psk_selected"] = True
            elif etype == EXT_ALPN:
                lst = _alpn_list(data)
                f["alpn"] = lst[0] if lst else None
            elif etype == EXT_ENCRYPT_THEN_MAC:
                f["encrypt_then_mac"] = True
            elif etype == EXT_EXTENDED_MASTER_SECRET:
                f["extended_master_secret"] = True
            elif etype == EXT_SESSION_TICKET:
                f["session_ticket_ext"] = True
    return ServerHello(version, random, session_id, suite, comp, tuple(exts), is_hrr, **f)  # type: ignore[arg-type]


def parse_hello_retry_request_draft(body: bytes) -> ServerHello:
    """TLS 1.3 draft HelloRetryRequest (handshake type 6): version, [suite,] extensions."""
    r = _Reader(body)
    version = r.u16("server_version")
    suite = r.u16("cipher_suite") if version >= 0x7F13 or version >> 8 == 0xFB else 0
    exts: list[int] = []
    group = None
    if r.left() >= 2:
        er = r.sub(2, "extensions")
        while er.left():
            etype = er.u16("extension type")
            data = er.vec(2, f"extension {etype}")
            exts.append(etype)
            if etype in (EXT_KEY_SHARE, EXT_KEY_SHARE_DRAFT) and len(data) >= 2:
                group = struct.unpack(">H", data[:2])[0]
    return ServerHello(version, HRR_RANDOM, b"", suite, 0, tuple(exts), True, version, group)


def parse_encrypted_extensions(body: bytes) -> EncryptedExtensions:
    r = _Reader(body)
    er = r.sub(2, "extensions")
    exts: list[int] = []
    alpn = None
    early = False
    while er.left():
        etype = er.u16("extension type")
        data = er.vec(2, f"extension {etype}")
        exts.append(etype)
        if etype == EXT_ALPN:
            lst = _alpn_list(data)
            alpn = lst[0] if lst else None
        elif etype == EXT_EARLY_DATA:
            early = True
    return EncryptedExtensions(tuple(exts), alpn, early)


#: the max_early_data_size a QUIC server must put in a ticket that allows 0-RTT (RFC 9001
#: §4.6.1); any other value is a PROTOCOL_VIOLATION in QUIC
QUIC_MAX_EARLY_DATA = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class NewSessionTicket:
    """A TLS 1.3 NewSessionTicket (RFC 8446 §4.6.1): a ticket the client may resume with."""

    lifetime_s: int
    """ticket_lifetime: seconds the ticket may be used for (at most 604800, 7 days)"""
    age_add: int
    """ticket_age_add (obfuscates the ticket age the client sends)"""
    nonce_len: int
    ticket_len: int
    """bytes of the opaque ticket"""
    extensions: tuple[int, ...]
    """extension types in wire order"""
    max_early_data: int | None
    """the early_data extension's max_early_data_size: the ticket allows 0-RTT (QUIC:
    0xffffffff); None without the extension (no 0-RTT with this ticket)"""


def parse_new_session_ticket(body: bytes) -> NewSessionTicket:
    """A TLS 1.3 NewSessionTicket body (the TLS 1.2 one, RFC 5077, has no nonce and no
    extensions, and is not read here)."""
    r = _Reader(body)
    lifetime = int.from_bytes(r.take(4, "ticket_lifetime"), "big")
    age_add = int.from_bytes(r.take(4, "ticket_age_add"), "big")
    nonce = r.vec(1, "ticket_nonce")
    ticket = r.vec(2, "ticket")
    if not ticket:
        raise HandshakeParseError("ticket: empty (at least 1 byte)")
    er = r.sub(2, "extensions")
    exts: list[int] = []
    early = None
    while er.left():
        etype = er.u16("extension type")
        data = er.vec(2, f"extension {etype}")
        exts.append(etype)
        if etype == EXT_EARLY_DATA:
            if len(data) != 4:
                raise HandshakeParseError(f"early_data: {len(data)} bytes, not 4")
            early = int.from_bytes(data, "big")
    if r.left():
        raise HandshakeParseError(f"{r.left()} bytes after the extensions")
    return NewSessionTicket(lifetime, age_add, len(nonce), len(ticket), tuple(exts), early)


def parse_certificate(body: bytes, tls13: bool) -> CertificateChain:
    """Certificate message: number and DER bytes of the certificates."""
    r = _Reader(body)
    if tls13:
        r.vec(1, "certificate_request_context")
    lst = r.sub(3, "certificate_list")
    n = total = 0
    while lst.left():
        cert = lst.u24("cert_data length")
        lst.take(cert, "cert_data")
        if tls13:
            lst.vec(2, "certificate extensions")
        n += 1
        total += cert
    return CertificateChain(n, total)


def parse_compressed_certificate(body: bytes) -> CertificateChain:
    """RFC 8879 CompressedCertificate (TLS 1.3): zlib and zstd are expanded, brotli is not."""
    r = _Reader(body)
    algo = r.u16("algorithm")
    ulen = r.u24("uncompressed_length")
    data = r.vec(3, "compressed_certificate_message")
    raw: bytes | None = None
    try:
        if algo == 1:
            d = zlib.decompressobj()
            raw = d.decompress(data, ulen + 1)
        elif algo == 3:
            import zstandard

            raw = zstandard.ZstdDecompressor().decompress(data, max_output_size=ulen + 1)
    except Exception:
        raw = None
    if raw is None or len(raw) != ulen:
        return CertificateChain(None, ulen)
    return parse_certificate(raw, True)


def parse_server_key_exchange_group(body: bytes) -> int | None:
    """Named group of an ECDHE ServerKeyExchange (curve_type 3), else None."""
    if len(body) >= 3 and body[0] == 3:
        v: int = struct.unpack(">H", body[1:3])[0]
        return v
    return None
