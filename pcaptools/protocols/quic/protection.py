"""QUIC packet protection with keys from a TLS key log (RFC 9001 §5, RFC 9369 §3.3).

The TLS 1.3 secrets of a connection (``CLIENT_HANDSHAKE_TRAFFIC_SECRET``,
``CLIENT_TRAFFIC_SECRET_0``, ``CLIENT_EARLY_TRAFFIC_SECRET``... of its ClientHello random, see
:mod:`pcaptools.protocols.tls.keylog`) give the packet keys of each epoch: HKDF-Expand-Label
with the labels ``quic key``, ``quic iv`` and ``quic hp`` (QUIC v2: ``quicv2 key``...), with
the hash of the cipher suite. A key update (RFC 9001 §6) derives the next secret with
``quic ku`` (v2 ``quicv2 ku``) and keeps the header protection key.

Ciphers (the ``cryptography`` package): AES-128-GCM and AES-256-GCM with AES-ECB header
protection, ChaCha20-Poly1305 with ChaCha20 header protection (RFC 9001 §5.4); imported by
the first :class:`PacketProtection` built, so a load without QUIC keys does not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tls.keyschedule import hkdf_expand_label
from .initial import QuicDecryptError, decode_packet_number
from .packets import VERSION_2

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

__all__ = [
    "QUIC_SUITES",
    "PacketProtection",
    "Unprotected",
    "label_prefix",
    "suites_for_secret",
    "unprotect",
]

#: TLS 1.3 cipher suite -> (hash, AEAD key length, header protection cipher)
QUIC_SUITES: dict[int, tuple[str, int, str]] = {
    0x1301: ("sha256", 16, "aes"),  # TLS_AES_128_GCM_SHA256
    0x1302: ("sha384", 32, "aes"),  # TLS_AES_256_GCM_SHA384
    0x1303: ("sha256", 32, "chacha20"),  # TLS_CHACHA20_POLY1305_SHA256
}


def label_prefix(version: int) -> bytes:
    """``quicv2`` for QUIC version 2, else ``quic`` (v1 and the drafts that use its labels)."""
    return b"quicv2" if version == VERSION_2 else b"quic"


def suites_for_secret(secret: bytes) -> tuple[int, ...]:
    """The cipher suites a secret of this length can belong to (when the ServerHello that
    names the suite was not seen: 0-RTT, or a lost ServerHello): trial decryption tells."""
    if len(secret) == 48:
        return (0x1302,)
    return (0x1301, 0x1303)


class PacketProtection:
    """The packet keys of one epoch, direction and key generation: AEAD, IV and header
    protection. Built from a traffic secret; :meth:`next_generation` is the key update."""

    __slots__ = ("_aead", "_ecb", "_hp", "_hp_kind", "generation", "iv", "prefix", "secret",
                 "suite")

    def __init__(self, suite: int, secret: bytes, version: int, generation: int = 0,
                 hp: bytes | None = None) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

        hash_name, key_len, hp_kind = QUIC_SUITES[suite]
        prefix = label_prefix(version)
        self.suite = suite
        self.secret = secret
        self.prefix = prefix
        self.generation = generation
        key = hkdf_expand_label(hash_name, secret, prefix + b" key", b"", key_len)
        self.iv = hkdf_expand_label(hash_name, secret, prefix + b" iv", b"", 12)
        if hp is None:
            hp = hkdf_expand_label(hash_name, secret, prefix + b" hp", b"", key_len)
        self._hp = hp
        self._hp_kind = hp_kind
        self._aead: AESGCM | ChaCha20Poly1305 = (
            ChaCha20Poly1305(key) if hp_kind == "chacha20" else AESGCM(key))
        # (ECB keeps no state between blocks: one encryptor serves every packet)
        self._ecb = (None if hp_kind == "chacha20"
                     else Cipher(algorithms.AES(hp), modes.ECB()).encryptor())

    def __repr__(self) -> str:
        return f"<PacketProtection suite=0x{self.suite:04x} generation={self.generation}>"

    def mask(self, sample: bytes) -> bytes:
        """The 5-byte header protection mask of a 16-byte ``sample`` (RFC 9001 §5.4)."""
        ecb = self._ecb
        if ecb is None:
            from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

            enc = Cipher(algorithms.ChaCha20(self._hp, sample), mode=None).encryptor()
            return enc.update(b"\0\0\0\0\0")
        return ecb.update(sample)[:5]

    def decrypt(self, header: bytes, ciphertext: bytes, pn: int) -> bytes:
        """The plaintext of a packet (``header``: unprotected, up to the packet number).
        Raises QuicDecryptError when authentication fails."""
        iv = self.iv
        nonce = (int.from_bytes(iv, "big") ^ pn).to_bytes(12, "big")
        try:
            return self._aead.decrypt(nonce, ciphertext, header)
        except Exception as exc:  # cryptography's InvalidTag
            raise QuicDecryptError(f"AEAD authentication failed ({type(exc).__name__})") from None

    def next_generation(self) -> PacketProtection:
        """The keys after a key update: secret from ``quic ku``, same header protection key."""
        hash_name = QUIC_SUITES[self.suite][0]
        n = len(self.secret)
        secret = hkdf_expand_label(hash_name, self.secret, self.prefix + b" ku", b"", n)
        return PacketProtection(self.suite, secret, 2 if self.prefix == b"quicv2" else 1,
                                self.generation + 1, hp=self._hp)


class Unprotected:
    """A packet with its header protection removed (not yet decrypted)."""

    __slots__ = ("ciphertext", "first", "header", "packet_number", "pn_len")

    def __init__(self, first: int, header: bytes, ciphertext: bytes, packet_number: int,
                 pn_len: int) -> None:
        self.first = first
        """the unprotected first byte (short header: key phase bit 0x04)"""
        self.header = header
        """the unprotected header, up to and including the packet number (the AEAD's AAD)"""
        self.ciphertext = ciphertext
        self.packet_number = packet_number
        self.pn_len = pn_len

    @property
    def key_phase(self) -> int:
        return (self.first >> 2) & 1


def unprotect(packet: bytes, pn_offset: int, prot: PacketProtection, largest: int,
              long_header: bool) -> Unprotected:
    """Remove the header protection of ``packet`` (its bytes from the first byte to its end;
    ``pn_offset`` relative to it) and decode its packet number against ``largest`` (the
    largest of its packet number space so far, -1: none). Raises QuicDecryptError."""
    sample = packet[pn_offset + 4:pn_offset + 20]
    if len(sample) != 16:
        raise QuicDecryptError("packet too short for the header protection sample")
    mask = prot.mask(sample)
    first = packet[0] ^ (mask[0] & (0x0F if long_header else 0x1F))
    pn_len = (first & 0x03) + 1
    end = pn_offset + pn_len
    pn_bytes = bytes(b ^ m for b, m in zip(packet[pn_offset:end], mask[1:], strict=False))
    pn = decode_packet_number(int.from_bytes(pn_bytes, "big"), pn_len, largest)
    header = bytes([first]) + packet[1:pn_offset] + pn_bytes
    return Unprotected(first, header, packet[end:], pn, pn_len)
