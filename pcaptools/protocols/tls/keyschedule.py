"""Key schedules: TLS 1.3 HKDF (RFC 8446 section 7) and the TLS 1.0-1.2 / SSLv3 PRFs.

Only standard-library hashing is used here (``hmac``/``hashlib``); the record ciphers
live in :mod:`.decrypt`. Every function is pure: bytes in, bytes out. Secrets are never
logged or put in exceptions.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

# --------------------------------------------------------------------------- TLS 1.3 (HKDF)


def hkdf_extract(hash_name: str, salt: bytes, ikm: bytes) -> bytes:
    """HKDF-Extract (RFC 5869): HMAC-Hash(salt, IKM). An empty salt means HashLen zeros."""
    if not salt:
        salt = b"\0" * hashlib.new(hash_name).digest_size
    return hmac.new(salt, ikm, hash_name).digest()


def hkdf_expand(hash_name: str, prk: bytes, info: bytes, length: int) -> bytes:
    """HKDF-Expand (RFC 5869): the first ``length`` bytes of T(1) | T(2) | ..."""
    out = bytearray()
    t = b""
    i = 1
    while len(out) < length:
        t = hmac.new(prk, t + info + bytes([i]), hash_name).digest()
        out += t
        i += 1
    return bytes(out[:length])


def hkdf_expand_label(
    hash_name: str, secret: bytes, label: bytes, context: bytes, length: int
) -> bytes:
    """HKDF-Expand-Label(Secret, Label, Context, Length) with the ``"tls13 "`` prefix."""
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    return hkdf_expand(hash_name, secret, info, length)


def derive_secret(hash_name: str, secret: bytes, label: bytes, transcript_hash: bytes) -> bytes:
    """Derive-Secret(Secret, Label, Messages) given Transcript-Hash(Messages)."""
    return hkdf_expand_label(
        hash_name, secret, label, transcript_hash, hashlib.new(hash_name).digest_size
    )


def traffic_keys(
    hash_name: str, secret: bytes, key_len: int, iv_len: int = 12
) -> tuple[bytes, bytes]:
    """(write_key, write_iv) of a TLS 1.3 traffic secret."""
    return (
        hkdf_expand_label(hash_name, secret, b"key", b"", key_len),
        hkdf_expand_label(hash_name, secret, b"iv", b"", iv_len),
    )


def next_traffic_secret(hash_name: str, secret: bytes) -> bytes:
    """application_traffic_secret_N+1 after a KeyUpdate (RFC 8446 section 7.2)."""
    return hkdf_expand_label(
        hash_name, secret, b"traffic upd", b"", hashlib.new(hash_name).digest_size
    )


# --------------------------------------------------------------------------- TLS 1.0-1.2 PRF


def p_hash(hash_name: str, secret: bytes, seed: bytes, length: int) -> bytes:
    """P_hash(secret, seed) of RFC 5246 section 5, truncated to ``length`` bytes."""
    out = bytearray()
    a = seed
    while len(out) < length:
        a = hmac.new(secret, a, hash_name).digest()
        out += hmac.new(secret, a + seed, hash_name).digest()
    return bytes(out[:length])


def prf12(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.2 PRF: P_<hash>(secret, label + seed) (SHA-256, or SHA-384 for *_SHA384 suites)."""
    return p_hash(hash_name, secret, label + seed, length)


def prf10(secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.0/1.1 PRF: P_MD5(S1, label + seed) XOR P_SHA1(S2, label + seed)."""
    half = (len(secret) + 1) // 2
    s1, s2 = secret[:half], secret[len(secret) - half :]
    a = p_hash("md5", s1, label + seed, length)
    b = p_hash("sha1", s2, label + seed, length)
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def ssl3_key_block(master: bytes, server_random: bytes, client_random: bytes, length: int) -> bytes:
    """SSLv3 key block: MD5(master + SHA1('A' + master + sr + cr)) + MD5(... 'BB' ...) + ..."""
    out = bytearray()
    i = 0
    while len(out) < length:
        salt = bytes([ord("A") + i]) * (i + 1)
        sha = hashlib.sha1(salt + master + server_random + client_random).digest()
        out += hashlib.md5(master + sha).digest()
        i += 1
    return bytes(out[:length])


def prf(
    version: int, hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int
) -> bytes:
    """The PRF of protocol ``version`` (0x0301/0x0302: MD5+SHA1; 0x0303: P_hash)."""
    if version >= 0x0303:
        return prf12(hash_name, secret, label, seed, length)
    return prf10(secret, label, seed, length)


def key_block(
    version: int,
    hash_name: str,
    master: bytes,
    client_random: bytes,
    server_random: bytes,
    length: int,
) -> bytes:
    """The key block of RFC 5246 section 6.3 (or SSLv3's), ``length`` bytes."""
    if version == 0x0300:
        return ssl3_key_block(master, server_random, client_random, length)
    return prf(version, hash_name, master, b"key expansion", server_random + client_random, length)


def master_secret(
    version: int, hash_name: str, pre_master: bytes, client_random: bytes, server_random: bytes
) -> bytes:
    """The 48-byte master secret from a pre-master secret (no extended master secret)."""
    if version == 0x0300:
        return ssl3_key_block(pre_master, client_random, server_random, 48)
    return prf(version, hash_name, pre_master, b"master secret", client_random + server_random, 48)
