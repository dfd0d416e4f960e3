"""Cipher suite parameters, read from the IANA names (``TLS_<kex>_WITH_<cipher>_<mac>``).

:func:`suite_info` returns what record decryption needs (cipher, key and IV lengths,
MAC, PRF hash) for every suite whose bulk cipher pcaptools can decrypt, and a
:class:`CipherSuite` with ``cipher=None`` for the others (ARIA, Camellia-GCM, GOST,
SM4...), which become ``tls.unsupported_cipher``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ._names import CIPHER_SUITES, NAMED_GROUPS

#: bulk cipher -> (key length, block size (0 = stream or AEAD), export key material length)
_BLOCK_CIPHERS: dict[str, tuple[int, int]] = {
    "AES_128_CBC": (16, 16),
    "AES_256_CBC": (32, 16),
    "CAMELLIA_128_CBC": (16, 16),
    "CAMELLIA_256_CBC": (32, 16),
    "SEED_CBC": (16, 16),
    "IDEA_CBC": (16, 8),
    "3DES_EDE_CBC": (24, 8),
    "DES_CBC": (8, 8),
    "DES40_CBC": (8, 8),
    "DES_CBC_40": (8, 8),
    "RC2_CBC_40": (16, 8),
    "RC2_CBC_56": (16, 8),
}
_MACS = {
    "MD5": ("md5", 16),
    "SHA": ("sha1", 20),
    "SHA256": ("sha256", 32),
    "SHA384": ("sha384", 48),
}
_EXPORT_MATERIAL = {
    "DES40_CBC": 5,
    "DES_CBC_40": 5,
    "RC2_CBC_40": 5,
    "RC4_40": 5,
    "RC2_CBC_56": 7,
    "RC4_56": 7,
    "DES_CBC": 8,
}


@dataclass(frozen=True, slots=True)
class CipherSuite:
    """What record decryption needs to know about one suite."""

    code: int
    name: str
    tls13: bool
    cipher: str | None
    """AES, AES-CCM, CHACHA20, CAMELLIA, SEED, IDEA, 3DES, DES, RC2, RC4, NULL; None: not decryptable"""
    mode: str
    """aead, cbc, stream or null"""
    key_len: int
    """bytes of the (final) write key"""
    fixed_iv_len: int
    """IV bytes taken from the key block (TLS <= 1.2) or derived (TLS 1.3)"""
    block_size: int
    """CBC block size (0 otherwise)"""
    explicit_nonce_len: int
    """AEAD bytes carried in each record (8 for TLS 1.2 GCM/CCM, 0 otherwise)"""
    tag_len: int
    """AEAD tag length"""
    mac: str | None
    """HMAC hash (hashlib name) of CBC/stream/null suites"""
    mac_len: int
    prf_hash: str
    """hash of the TLS 1.2 PRF / TLS 1.3 HKDF"""
    export_material_len: int
    """> 0 for export suites: key bytes taken from the key block before expansion"""

    @property
    def decryptable(self) -> bool:
        return self.cipher is not None


_AEAD_RE = re.compile(r"^(AES_128|AES_256)_(GCM|CCM|CCM_8)(?:_(SHA256|SHA384))?$")


def _parse(code: int, name: str) -> CipherSuite:
    unsupported = CipherSuite(code, name, False, None, "null", 0, 0, 0, 0, 0, None, 0, "sha256", 0)
    if name in (
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    ):
        prf_hash = "sha384" if name.endswith("SHA384") else "sha256"
        if "CHACHA20" in name:
            return CipherSuite(
                code, name, True, "CHACHA20", "aead", 32, 12, 0, 0, 16, None, 0, prf_hash, 0
            )
        if "CCM" in name:
            tag = 8 if "CCM_8" in name else 16
            return CipherSuite(
                code, name, True, "AES-CCM", "aead", 16, 12, 0, 0, tag, None, 0, prf_hash, 0
            )
        klen = 32 if "AES_256" in name else 16
        return CipherSuite(
            code, name, True, "AES", "aead", klen, 12, 0, 0, 16, None, 0, prf_hash, 0
        )
    _kex, sep, bulk = name.partition("_WITH_")
    if not sep:
        return unsupported
    export = "_EXPORT" in _kex
    if bulk == "CHACHA20_POLY1305_SHA256":
        return CipherSuite(
            code, name, False, "CHACHA20", "aead", 32, 12, 0, 0, 16, None, 0, "sha256", 0
        )
    m = _AEAD_RE.match(bulk)
    if m:
        klen = 32 if m.group(1) == "AES_256" else 16
        prf_hash = "sha384" if m.group(3) == "SHA384" else "sha256"
        if m.group(2) == "GCM":
            return CipherSuite(
                code, name, False, "AES", "aead", klen, 4, 0, 8, 16, None, 0, prf_hash, 0
            )
        tag = 8 if m.group(2) == "CCM_8" else 16
        return CipherSuite(
            code, name, False, "AES-CCM", "aead", klen, 4, 0, 8, tag, None, 0, prf_hash, 0
        )
    cipher_part, _, mac_part = bulk.rpartition("_")
    if mac_part not in _MACS:
        return unsupported
    mac, mac_len = _MACS[mac_part]
    prf_hash = "sha384" if mac_part == "SHA384" else "sha256"
    exp_len = _EXPORT_MATERIAL.get(cipher_part, 0) if export else 0
    if cipher_part == "NULL":
        return CipherSuite(
            code, name, False, "NULL", "null", 0, 0, 0, 0, 0, mac, mac_len, prf_hash, 0
        )
    if cipher_part in ("RC4_128", "RC4_40", "RC4_56"):
        return CipherSuite(
            code, name, False, "RC4", "stream", 16, 0, 0, 0, 0, mac, mac_len, prf_hash, exp_len
        )
    if cipher_part in _BLOCK_CIPHERS:
        klen, bs = _BLOCK_CIPHERS[cipher_part]
        family = cipher_part.split("_")[0]
        family = {"DES40": "DES", "3DES": "3DES"}.get(family, family)
        if export and exp_len == 0:
            return unsupported
        return CipherSuite(
            code, name, False, family, "cbc", klen, bs, bs, 0, 0, mac, mac_len, prf_hash, exp_len
        )
    return unsupported


@functools.lru_cache(maxsize=512)
def suite_info(code: int) -> CipherSuite:
    """Parameters of cipher suite ``code`` (unknown codes: an undecryptable suite named ``0xNNNN``)."""
    name = CIPHER_SUITES.get(code)
    if name is None:
        return CipherSuite(
            code, f"0x{code:04X}", False, None, "null", 0, 0, 0, 0, 0, None, 0, "sha256", 0
        )
    return _parse(code, name)


def suite_name(code: int) -> str:
    """IANA name of a cipher suite, ``0xNNNN`` if unknown, ``GREASE`` for RFC 8701 values."""
    if is_grease(code):
        return "GREASE"
    return CIPHER_SUITES.get(code) or f"0x{code:04X}"


def group_name(code: int) -> str:
    """Name of a supported_groups / key_share group (``x25519``, ``secp256r1``...), ``0xNNNN`` if unknown."""
    if is_grease(code):
        return "GREASE"
    return NAMED_GROUPS.get(code) or f"0x{code:04X}"


def is_grease(value: int) -> bool:
    """RFC 8701 GREASE code point (0x0A0A, 0x1A1A, ... 0xFAFA)."""
    return (value & 0x0F0F) == 0x0A0A and (value >> 8) == (value & 0xFF)


VERSION_NAMES = {
    0x0200: "SSL 2.0",
    0x0002: "SSL 2.0",
    0x0300: "SSL 3.0",
    0x0301: "TLS 1.0",
    0x0302: "TLS 1.1",
    0x0303: "TLS 1.2",
    0x0304: "TLS 1.3",
}


def version_name(v: int | None) -> str | None:
    """``TLS 1.2``-style name; drafts as ``TLS 1.3 (draft 19)``; others ``0xNNNN``."""
    if v is None:
        return None
    n = VERSION_NAMES.get(v)
    if n is not None:
        return n
    if 0x7F00 < v <= 0x7FFF:
        return f"TLS 1.3 (draft {v & 0xFF})"
    if (v >> 8) == 0xFB:
        return f"TLS 1.3 (Facebook draft {v & 0xFF})"
    if is_grease(v):
        return "GREASE"
    return f"0x{v:04X}"


def effective_version(v: int) -> int:
    """Map TLS 1.3 drafts (0x7Fxx, 0xFBxx) to 0x0304."""
    if 0x7F00 < v <= 0x7FFF or (v >> 8) == 0xFB:
        return 0x0304
    return v
