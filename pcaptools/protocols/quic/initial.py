"""Initial packet protection (RFC 9001 §5, RFC 9369 §3.3): keys derived from the client's
destination connection ID, header protection removal and AES-128-GCM decryption, without any
key log. Also the frames an Initial packet may carry (RFC 9000 §17.2.2: PADDING, PING, ACK,
CRYPTO, CONNECTION_CLOSE) and the reassembly of the CRYPTO stream of one direction.

Uses the ``cryptography`` package (a dependency of pcaptools for TLS decryption), imported by
the first Initial packet opened.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

from .packets import VERSION_1, VERSION_2, QuicHeaderError, read_varint

__all__ = [
    "INITIAL_SALTS",
    "CryptoStream",
    "InitialKeys",
    "OpenedPacket",
    "QuicDecryptError",
    "decode_packet_number",
    "initial_keys",
    "open_initial",
    "parse_initial_frames",
]

#: version -> (initial salt, label prefix) (RFC 9001 §5.2, RFC 9369 §3.3.1 and §3.3.2)
INITIAL_SALTS: dict[int, tuple[bytes, str]] = {
    VERSION_1: (bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a"), "quic"),
    VERSION_2: (bytes.fromhex("0dede3def700a6db819381be6e269dcbf9bd2ed9"), "quicv2"),
}


class QuicDecryptError(ValueError):
    """An Initial packet that does not decrypt (authentication failed, too short)."""


def _hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt, ikm, hashlib.sha256).digest()


def _expand_label(secret: bytes, label: str, length: int) -> bytes:
    """HKDF-Expand-Label of TLS 1.3 (RFC 8446 §7.1) with SHA-256 and an empty context."""
    full = b"tls13 " + label.encode("ascii")
    info = struct.pack(">HB", length, len(full)) + full + b"\x00"
    out = b""
    block = b""
    i = 1
    while len(out) < length:
        block = hmac.new(secret, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
        i += 1
    return out[:length]


@dataclass(frozen=True, slots=True)
class InitialKeys:
    """The Initial keys of one direction."""

    secret: bytes
    key: bytes
    iv: bytes
    hp: bytes


def initial_keys(version: int, dcid: bytes) -> tuple[InitialKeys, InitialKeys] | None:
    """(client, server) Initial keys of ``version`` for the client's destination connection
    ID ``dcid``; None for a version without known Initial salt."""
    salt_label = INITIAL_SALTS.get(version)
    if salt_label is None:
        return None
    salt, prefix = salt_label
    initial = _hkdf_extract(salt, dcid)
    out = []
    for side in ("client in", "server in"):
        secret = _expand_label(initial, side, 32)
        out.append(InitialKeys(
            secret,
            _expand_label(secret, f"{prefix} key", 16),
            _expand_label(secret, f"{prefix} iv", 12),
            _expand_label(secret, f"{prefix} hp", 16),
        ))
    return out[0], out[1]


def decode_packet_number(truncated: int, pn_len: int, largest: int) -> int:
    """The full packet number (RFC 9000 Appendix A.3); ``largest``: the largest packet
    number received so far in the space (-1: none)."""
    expected = largest + 1
    win = 1 << (8 * pn_len)
    hwin = win // 2
    mask = win - 1
    candidate = (expected & ~mask) | truncated
    if candidate <= expected - hwin and candidate < (1 << 62) - win:
        return candidate + win
    if candidate > expected + hwin and candidate >= win:
        return candidate - win
    return candidate


@dataclass(frozen=True, slots=True)
class OpenedPacket:
    """A decrypted Initial packet."""

    packet_number: int
    payload: bytes
    """the plaintext frames"""


def open_initial(packet: bytes, pn_offset: int, keys: InitialKeys, largest: int) -> OpenedPacket:
    """Remove header protection and decrypt one long-header packet (``packet``: its bytes
    from the first byte to the end of its Length; ``pn_offset`` relative to it). Raises
    QuicDecryptError."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    sample = packet[pn_offset + 4:pn_offset + 20]
    if len(sample) != 16:
        raise QuicDecryptError("packet too short for the header protection sample")
    enc = Cipher(algorithms.AES(keys.hp), modes.ECB()).encryptor()
    mask = enc.update(sample) + enc.finalize()
    first = packet[0] ^ (mask[0] & 0x0F)
    pn_len = (first & 0x03) + 1
    pn_bytes = bytes(b ^ m for b, m in zip(packet[pn_offset:pn_offset + pn_len], mask[1:],
                                           strict=False))
    truncated = int.from_bytes(pn_bytes, "big")
    pn = decode_packet_number(truncated, pn_len, largest)
    header = bytes([first]) + packet[1:pn_offset] + pn_bytes
    nonce = bytes(a ^ b for a, b in zip(keys.iv, pn.to_bytes(12, "big"), strict=True))
    try:
        plain = AESGCM(keys.key).decrypt(nonce, packet[pn_offset + pn_len:], header)
    except Exception as exc:  # cryptography's InvalidTag
        raise QuicDecryptError(f"AEAD authentication failed ({type(exc).__name__})") from None
    return OpenedPacket(pn, plain)


def parse_initial_frames(payload: bytes) -> tuple[list[str], list[tuple[int, bytes]], str | None]:
    """The frames of a decrypted Initial: (frame type names in order, runs of consecutive
    PADDING counted once; CRYPTO (offset, data) pieces; None, or the reason parsing stopped
    early: a frame type an Initial may not carry, or a frame cut short)."""
    names: list[str] = []
    crypto: list[tuple[int, bytes]] = []
    pos = 0
    n = len(payload)
    try:
        while pos < n:
            ftype, pos = read_varint(payload, pos)
            if ftype == 0x00:
                while pos < n and payload[pos] == 0:
                    pos += 1
                names.append("PADDING")
            elif ftype == 0x01:
                names.append("PING")
            elif ftype in (0x02, 0x03):
                _largest, pos = read_varint(payload, pos)
                _delay, pos = read_varint(payload, pos)
                count, pos = read_varint(payload, pos)
                _first, pos = read_varint(payload, pos)
                for _ in range(count):
                    _gap, pos = read_varint(payload, pos)
                    _len, pos = read_varint(payload, pos)
                if ftype == 0x03:
                    for _ in range(3):
                        _ecn, pos = read_varint(payload, pos)
                names.append("ACK")
            elif ftype == 0x06:
                off, pos = read_varint(payload, pos)
                ln, pos = read_varint(payload, pos)
                data = payload[pos:pos + ln]
                if len(data) != ln:
                    return names, crypto, f"CRYPTO frame of {ln} bytes cut short"
                pos += ln
                crypto.append((off, data))
                names.append("CRYPTO")
            elif ftype == 0x1C:
                _code, pos = read_varint(payload, pos)
                _ftype, pos = read_varint(payload, pos)
                rl, pos = read_varint(payload, pos)
                pos += rl
                names.append("CONNECTION_CLOSE")
            else:
                return names, crypto, f"frame type 0x{ftype:x} not allowed in an Initial packet"
    except QuicHeaderError as exc:
        return names, crypto, f"frame cut short: {exc}"
    return names, crypto, None


class CryptoStream:
    """The CRYPTO stream of one direction and packet number space: pieces in any order,
    delivered as the in-order bytes and then as whole TLS handshake messages (type, body).
    Holds at most ``max_bytes`` ahead of the delivered point."""

    __slots__ = ("_buf", "_pending", "_pos", "max_bytes", "overflow")

    def __init__(self, max_bytes: int) -> None:
        self._pending: dict[int, bytes] = {}
        self._pos = 0
        """stream offset of the first byte not yet in _buf"""
        self._buf = b""
        """in-order bytes not yet consumed as handshake messages"""
        self.max_bytes = max_bytes
        self.overflow = False

    @property
    def complete(self) -> bool:
        """Every byte received was delivered as whole messages: no hole before a piece
        received, no message cut short, no overflow."""
        return not self.overflow and not self._pending and not self._buf

    def add(self, offset: int, data: bytes) -> list[tuple[int, bytes]]:
        """One CRYPTO frame -> the handshake messages it completes (type, body)."""
        if self.overflow:
            return []
        end = offset + len(data)
        if end <= self._pos:
            return []  # a retransmission
        if end - self._pos > self.max_bytes:
            self.overflow = True
            self._pending.clear()
            return []
        if offset < self._pos:
            data = data[self._pos - offset:]
            offset = self._pos
        old = self._pending.get(offset)
        if old is None or len(old) < len(data):
            self._pending[offset] = data
        pending = self._pending
        while True:
            best = None
            for off in pending:
                if off <= self._pos and (best is None or off + len(pending[off]) >
                                         best + len(pending[best])):
                    best = off
            if best is None:
                break
            piece = pending.pop(best)
            skip = self._pos - best
            if skip < len(piece):
                self._buf += piece[skip:]
                self._pos = best + len(piece)
        out = []
        buf = self._buf
        while len(buf) >= 4:
            ln = int.from_bytes(buf[1:4], "big")
            if len(buf) < 4 + ln:
                break
            out.append((buf[0], buf[4:4 + ln]))
            buf = buf[4 + ln:]
        if len(buf) > self.max_bytes:  # one message longer than the bound: stop here
            self.overflow = True
            buf = b""
        self._buf = buf
        return out
