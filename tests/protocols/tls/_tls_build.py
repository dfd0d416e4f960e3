"""TEST helper: build TLS records and hello messages byte by byte (and encrypt records).

Independent of pcaptools' decryptors: records are sealed here with ``cryptography``'s AEAD
and CBC primitives directly, following RFC 8446 / RFC 5246.
"""

from __future__ import annotations

import hmac
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.tls.keyschedule import hkdf_expand_label, prf12

C2S = Direction.CLIENT_TO_SERVER
S2C = Direction.SERVER_TO_CLIENT


def record(ctype: int, body: bytes, version: int = 0x0303) -> bytes:
    return struct.pack(">BHH", ctype, version, len(body)) + body


def handshake(mtype: int, body: bytes) -> bytes:
    return bytes([mtype]) + len(body).to_bytes(3, "big") + body


def ext(etype: int, data: bytes) -> bytes:
    return struct.pack(">HH", etype, len(data)) + data


def vec(n: int, data: bytes) -> bytes:
    return len(data).to_bytes(n, "big") + data


def client_hello(
    random: bytes,
    suites: list[int],
    exts: list[bytes],
    *,
    version: int = 0x0303,
    session_id: bytes = b"",
) -> bytes:
    body = (
        struct.pack(">H", version)
        + random
        + vec(1, session_id)
        + vec(2, b"".join(struct.pack(">H", s) for s in suites))
        + vec(1, b"\0")
        + vec(2, b"".join(exts))
    )
    return handshake(1, body)


def server_hello(
    random: bytes, suite: int, exts: list[bytes], *, version: int = 0x0303, session_id: bytes = b""
) -> bytes:
    body = (
        struct.pack(">H", version)
        + random
        + vec(1, session_id)
        + struct.pack(">HB", suite, 0)
        + vec(2, b"".join(exts))
    )
    return handshake(2, body)


def sni_ext(name: str) -> bytes:
    return ext(0, vec(2, b"\0" + vec(2, name.encode())))


def alpn_ext(*protos: str) -> bytes:
    return ext(16, vec(2, b"".join(vec(1, p.encode()) for p in protos)))


class Tls13Sealer:
    """Encrypts TLS 1.3 records for one direction (AES-128-GCM / SHA-256 or ChaCha20)."""

    def __init__(self, secret: bytes, *, chacha: bool = False) -> None:
        self.secret = secret
        self.chacha = chacha
        self._keys()

    def _keys(self) -> None:
        klen = 32 if self.chacha else 16
        key = hkdf_expand_label("sha256", self.secret, b"key", b"", klen)
        self.iv = int.from_bytes(hkdf_expand_label("sha256", self.secret, b"iv", b"", 12), "big")
        self.aead = ChaCha20Poly1305(key) if self.chacha else AESGCM(key)
        self.seq = 0

    def seal(self, inner_type: int, content: bytes, pad: int = 0) -> bytes:
        pt = content + bytes([inner_type]) + b"\0" * pad
        hdr = struct.pack(">BHH", 23, 0x0303, len(pt) + 16)
        nonce = (self.iv ^ self.seq).to_bytes(12, "big")
        self.seq += 1
        return hdr + self.aead.encrypt(nonce, pt, hdr)

    def update(self) -> None:
        """Move to the next traffic secret (after sending a KeyUpdate)."""
        self.secret = hkdf_expand_label("sha256", self.secret, b"traffic upd", b"", 32)
        self._keys()


class Tls12GcmSealer:
    """TLS 1.2 AES-128-GCM records for one direction (key block from the master secret)."""

    def __init__(
        self, master: bytes, client_random: bytes, server_random: bytes, client: bool
    ) -> None:
        kb = prf12("sha256", master, b"key expansion", server_random + client_random, 2 * (16 + 4))
        key = kb[0:16] if client else kb[16:32]
        self.salt = kb[32:36] if client else kb[36:40]
        self.aead = AESGCM(key)
        self.seq = 0

    def seal(self, ctype: int, content: bytes) -> bytes:
        explicit = struct.pack(">Q", self.seq + 1000)
        aad = struct.pack(">QBHH", self.seq, ctype, 0x0303, len(content))
        ct = self.aead.encrypt(self.salt + explicit, content, aad)
        self.seq += 1
        return record(ctype, explicit + ct)


class Tls12CbcSealer:
    """TLS 1.2 AES-128-CBC-SHA records (MAC-then-encrypt, explicit IV)."""

    def __init__(
        self, master: bytes, client_random: bytes, server_random: bytes, client: bool
    ) -> None:
        kb = prf12(
            "sha256", master, b"key expansion", server_random + client_random, 2 * (20 + 16 + 16)
        )
        self.mac_key = kb[0:20] if client else kb[20:40]
        self.key = kb[40:56] if client else kb[56:72]
        self.seq = 0

    def seal(self, ctype: int, content: bytes, iv: bytes = b"\x42" * 16) -> bytes:
        mac = hmac.new(
            self.mac_key,
            struct.pack(">QBHH", self.seq, ctype, 0x0303, len(content)) + content,
            "sha1",
        ).digest()
        data = content + mac
        pad = 15 - len(data) % 16
        data += bytes([pad]) * (pad + 1)
        enc = Cipher(algorithms.AES(self.key), modes.CBC(iv)).encryptor()
        self.seq += 1
        return record(ctype, iv + enc.update(data) + enc.finalize())


def chunks(
    direction: Direction,
    data: bytes,
    *,
    frame: int,
    offset: int,
    sizes: list[int] | None = None,
    ts_ns: int | None = None,
) -> list[StreamChunk]:
    """``data`` as StreamChunks of the given sizes (default: one chunk)."""
    out = []
    sizes = sizes or [len(data)]
    pos = 0
    i = 0
    while pos < len(data):
        n = sizes[i % len(sizes)] or 1
        out.append(
            StreamChunk(
                direction=direction,
                data=data[pos : pos + n],
                ts_ns=frame * 1000 if ts_ns is None else ts_ns,
                frame=frame,
                offset=offset + pos,
            )
        )
        pos += n
        i += 1
    return out


class Tls12ChachaSealer:
    """TLS 1.2 ChaCha20-Poly1305 records (RFC 7905: nonce = IV xor seq, no explicit nonce)."""

    def __init__(
        self, master: bytes, client_random: bytes, server_random: bytes, client: bool
    ) -> None:
        kb = prf12("sha256", master, b"key expansion", server_random + client_random, 2 * (32 + 12))
        key = kb[0:32] if client else kb[32:64]
        self.iv = int.from_bytes(kb[64:76] if client else kb[76:88], "big")
        self.aead = ChaCha20Poly1305(key)
        self.seq = 0

    def seal(self, ctype: int, content: bytes) -> bytes:
        aad = struct.pack(">QBHH", self.seq, ctype, 0x0303, len(content))
        ct = self.aead.encrypt((self.iv ^ self.seq).to_bytes(12, "big"), content, aad)
        self.seq += 1
        return record(ctype, ct)


class Tls10CbcSealer:
    """TLS 1.0 AES-128-CBC-SHA records: MD5/SHA1 PRF, IV chained from the previous record."""

    def __init__(
        self, master: bytes, client_random: bytes, server_random: bytes, client: bool
    ) -> None:
        from pcaptools.protocols.tls.keyschedule import prf10

        kb = prf10(master, b"key expansion", server_random + client_random, 2 * (20 + 16 + 16))
        self.mac_key = kb[0:20] if client else kb[20:40]
        self.key = kb[40:56] if client else kb[56:72]
        self.iv = kb[72:88] if client else kb[88:104]
        self.seq = 0

    def seal(self, ctype: int, content: bytes) -> bytes:
        mac = hmac.new(
            self.mac_key,
            struct.pack(">QBHH", self.seq, ctype, 0x0301, len(content)) + content,
            "sha1",
        ).digest()
        data = content + mac
        pad = 15 - len(data) % 16
        data += bytes([pad]) * (pad + 1)
        enc = Cipher(algorithms.AES(self.key), modes.CBC(self.iv)).encryptor()
        ct = enc.update(data) + enc.finalize()
        self.iv = ct[-16:]
        self.seq += 1
        return record(ctype, ct, 0x0301)
