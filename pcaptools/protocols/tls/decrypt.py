"""Record decryption: one :class:`RecordDecryptor` per direction and key epoch.

The primitives come from ``cryptography``; the record formats are ours:

- TLS 1.3 AEAD (RFC 8446 5.2): nonce = IV xor seq, AAD = the record header,
  plaintext = content || type || zeros.
- TLS 1.2 AEAD: GCM/CCM with an 8-byte explicit nonce (salt from the key block),
  ChaCha20-Poly1305 (RFC 7905) with IV xor seq; AAD = seq || type || version || length.
- CBC (SSLv3, TLS 1.0 chained IV, TLS 1.1+ explicit IV), MAC-then-encrypt or
  encrypt-then-MAC (RFC 7366); RC4 stream; NULL. The MAC is checked so that a wrong key
  is reported rather than garbage passed on.

:meth:`RecordDecryptor.decrypt` returns ``(inner_content_type, plaintext)`` or raises
:class:`DecryptError` whose message never contains key material. The sequence number
advances only on success (callers call :meth:`RecordDecryptor.skip` when they decide a
record that failed was really sent under this key).

``cryptography`` is imported by the first decryptor built (a load without a key log never
imports it): the cipher objects are made in ``__init__``; ``except _invalid_tag():`` looks
the exception class up only when an exception is raised.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable
from typing import Any

from .keyschedule import key_block, prf, traffic_keys
from .suites import CipherSuite

_SEQ = struct.Struct(">Q")
_AAD12 = struct.Struct(">QBHH")
_AAD13 = struct.Struct(">BHH")


class DecryptError(Exception):
    """A record could not be decrypted (bad tag, bad padding, bad MAC). No secrets inside."""


class RecordDecryptor:
    """Decrypts the records of one direction under one key. ``seq`` is the next record's number."""

    __slots__ = ("seq",)
    _packing_ = "secret"
    """holds a key: packed while idle, never written to disk (:mod:`pcaptools.tcp.packing`)"""

    def __init__(self) -> None:
        self.seq = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} seq={self.seq}>"

    def decrypt(self, ctype: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        """(inner content type, plaintext) of one record; raises DecryptError."""
        raise NotImplementedError

    def skip(self) -> None:
        """Count a record sent under this key that could not be decrypted."""
        self.seq += 1

    def plaintext_bound(self, length: int) -> int:
        """Upper bound of the plaintext length of a ``length``-byte record."""
        return length


def _invalid_tag() -> type[Exception]:
    """cryptography's InvalidTag (an AEAD tag mismatch)"""
    from cryptography.exceptions import InvalidTag

    return InvalidTag


def _with_aead(cls: type[_AeadDecryptor], args: tuple[str, bytes, int],
               state: dict[str, Any]) -> _AeadDecryptor:
    """An AEAD decryptor packed by :meth:`_AeadDecryptor.__reduce__`, made again."""
    o = cls.__new__(cls)
    o._aead_args = args
    o._aead = _aead(*args)
    for name, value in state.items():
        setattr(o, name, value)
    return o


def _aead(cipher: str, key: bytes, tag_len: int) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

    if cipher == "CHACHA20":
        return ChaCha20Poly1305(key)
    if cipher == "AES-CCM":
        return AESCCM(key, tag_length=tag_len)
    return AESGCM(key)


class _AeadDecryptor(RecordDecryptor):
    """A decryptor with a cryptography AEAD object, which pickle cannot pack: packed as the
    arguments that make it (an idle connection's parsers, :mod:`pcaptools.tcp.packing`)."""

    __slots__ = ("_aead", "_aead_args")
    _aead: Any
    _aead_args: tuple[str, bytes, int]
    """(cipher, key, tag length): what makes ``_aead``"""

    def __reduce__(self) -> tuple[Any, ...]:
        state = {n: getattr(self, n) for c in type(self).__mro__
                 for n in getattr(c, "__slots__", ()) if n not in ("_aead", "_aead_args")}
        return _with_aead, (type(self), self._aead_args, state)


class Tls13Decryptor(_AeadDecryptor):
    """TLS 1.3 record protection (also used for early data)."""

    __slots__ = ("_iv", "_tag_len")

    def __init__(self, suite: CipherSuite, secret: bytes) -> None:
        super().__init__()
        key, iv = traffic_keys(suite.prf_hash, secret, suite.key_len, 12)
        self._aead_args = (suite.cipher or "AES", key, suite.tag_len)
        self._aead = _aead(*self._aead_args)
        self._iv = int.from_bytes(iv, "big")
        self._tag_len = suite.tag_len

    def decrypt(self, ctype: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        if len(fragment) < self._tag_len + 1:
            raise DecryptError(f"record of {len(fragment)} bytes is shorter than the AEAD tag")
        try:
            pt = self._aead.decrypt(
                (self._iv ^ self.seq).to_bytes(12, "big"),
                fragment,
                _AAD13.pack(ctype, version, len(fragment)),
            )
        except _invalid_tag():
            raise DecryptError("authentication tag mismatch") from None
        if pt and pt[-1]:  # no padding: the content type is the last byte
            self.seq += 1
            return pt[-1], pt[:-1]
        end = len(pt.rstrip(b"\0"))
        if end == 0:
            raise DecryptError("TLSInnerPlaintext has no content type")
        self.seq += 1
        return pt[end - 1], pt[: end - 1]

    def plaintext_bound(self, length: int) -> int:
        return max(0, length - self._tag_len - 1)


class Tls12AeadDecryptor(_AeadDecryptor):
    """TLS 1.2 AES-GCM / AES-CCM (explicit nonce) and ChaCha20-Poly1305."""

    __slots__ = ("_explicit", "_iv", "_salt", "_tag_len")

    def __init__(self, suite: CipherSuite, key: bytes, iv: bytes) -> None:
        super().__init__()
        self._aead_args = (suite.cipher or "AES", key, suite.tag_len)
        self._aead = _aead(*self._aead_args)
        self._explicit = suite.explicit_nonce_len
        self._salt = iv
        self._iv = int.from_bytes(iv, "big")
        self._tag_len = suite.tag_len

    def decrypt(self, ctype: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        n = len(fragment) - self._explicit - self._tag_len
        if n < 0:
            raise DecryptError(f"record of {len(fragment)} bytes is shorter than nonce and tag")
        body: bytes | memoryview
        if self._explicit:
            nonce = self._salt + fragment[: self._explicit]
            body = memoryview(fragment)[self._explicit :]  # no copy of the ciphertext
        else:
            nonce = (self._iv ^ self.seq).to_bytes(12, "big")
            body = fragment
        aad = _AAD12.pack(self.seq, ctype, version, n)
        try:
            pt = self._aead.decrypt(nonce, body, aad)
        except _invalid_tag():
            raise DecryptError("authentication tag mismatch") from None
        self.seq += 1
        return ctype, pt

    def plaintext_bound(self, length: int) -> int:
        return max(0, length - self._explicit - self._tag_len)


def _ssl3_mac(hash_name: str, key: bytes, seq: int, ctype: int, data: bytes) -> bytes:
    pad_len = 48 if hash_name == "md5" else 40
    inner = hashlib.new(
        hash_name,
        key + b"\x36" * pad_len + _SEQ.pack(seq) + struct.pack(">BH", ctype, len(data)) + data,
    ).digest()
    return hashlib.new(hash_name, key + b"\x5c" * pad_len + inner).digest()


def _record_mac(
    hash_name: str, key: bytes, seq: int, ctype: int, version: int, data: bytes
) -> bytes:
    """The MAC of one record: HMAC over seq || type || version || length || data (SSLv3: its own MAC)."""
    if version == 0x0300:
        return _ssl3_mac(hash_name, key, seq, ctype, data)
    return hmac.new(key, _AAD12.pack(seq, ctype, version, len(data)) + data, hash_name).digest()


class CbcDecryptor(RecordDecryptor):
    """Block cipher in CBC mode with HMAC (MAC-then-encrypt, or encrypt-then-MAC)."""

    __slots__ = ("_algo", "_bs", "_etm", "_explicit_iv", "_iv", "_mac_hash", "_mac_key", "_mac_len")

    def __init__(
        self, suite: CipherSuite, key: bytes, iv: bytes, mac_key: bytes, version: int, etm: bool
    ) -> None:
        super().__init__()
        self._algo = _block_algorithm(suite.cipher or "", key)
        self._bs = suite.block_size
        self._iv = iv
        self._explicit_iv = version >= 0x0302
        self._mac_hash = suite.mac or "sha1"
        self._mac_key = mac_key
        self._mac_len = suite.mac_len
        self._etm = etm

    def decrypt(self, ctype: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        bs, mlen = self._bs, self._mac_len
        if self._etm:
            if len(fragment) < mlen + bs:
                raise DecryptError("record shorter than MAC and one block")
            body, tag = fragment[:-mlen], fragment[-mlen:]
            if not hmac.compare_digest(
                _record_mac(self._mac_hash, self._mac_key, self.seq, ctype, version, body), tag
            ):
                raise DecryptError("MAC mismatch (encrypt-then-MAC)")
        else:
            body = fragment
        if len(body) % bs or len(body) < bs * (2 if self._explicit_iv else 1):
            raise DecryptError(
                f"ciphertext of {len(body)} bytes is not a multiple of the {bs}-byte block"
            )
        if self._explicit_iv:
            iv, ct = body[:bs], body[bs:]
        else:
            # TLS 1.0 / SSLv3: the IV is the previous record's last block, whatever happens next
            iv, ct = self._iv, body
            self._iv = body[-bs:]
        from cryptography.hazmat.primitives.ciphers import Cipher, modes

        dec = Cipher(self._algo, modes.CBC(iv)).decryptor()
        pt = dec.update(ct) + dec.finalize()
        pad = pt[-1]
        need = pad + 1 + (0 if self._etm else mlen)
        if need > len(pt) or (version == 0x0300 and pad >= bs):
            raise DecryptError("bad CBC padding")
        if version != 0x0300 and pt[-pad - 1 :] != bytes([pad]) * (pad + 1):
            raise DecryptError("bad CBC padding")
        content = pt[: len(pt) - pad - 1]
        if not self._etm:
            data, tag = content[: len(content) - mlen], content[len(content) - mlen :]
            if not hmac.compare_digest(
                _record_mac(self._mac_hash, self._mac_key, self.seq, ctype, version, data), tag
            ):
                raise DecryptError("MAC mismatch")
        else:
            data = content
        self.seq += 1
        return ctype, data

    def plaintext_bound(self, length: int) -> int:
        return max(0, length - self._mac_len - 1 - (self._bs if self._explicit_iv else 0))


class StreamDecryptor(RecordDecryptor):
    """RC4 (the keystream runs on across records) or NULL encryption, with HMAC."""

    __slots__ = ("_dec", "_mac_hash", "_mac_key", "_mac_len")

    def __init__(self, suite: CipherSuite, key: bytes, mac_key: bytes) -> None:
        super().__init__()
        self._dec: Any = None
        if suite.cipher == "RC4":
            from cryptography.hazmat.decrepit.ciphers import algorithms as legacy
            from cryptography.hazmat.primitives.ciphers import Cipher

            self._dec = Cipher(legacy.ARC4(key), mode=None).decryptor()
        self._mac_hash = suite.mac or "sha1"
        self._mac_key = mac_key
        self._mac_len = suite.mac_len

    def decrypt(self, ctype: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        if len(fragment) < self._mac_len:
            raise DecryptError("record shorter than its MAC")
        pt = self._dec.update(fragment) if self._dec is not None else fragment
        data, tag = pt[: len(pt) - self._mac_len], pt[len(pt) - self._mac_len :]
        if not hmac.compare_digest(
            _record_mac(self._mac_hash, self._mac_key, self.seq, ctype, version, data), tag
        ):
            # the keystream has moved on (a stream cipher cannot retry a record); the caller
            # counts the record with skip()
            raise DecryptError("MAC mismatch")
        self.seq += 1
        return ctype, data

    def plaintext_bound(self, length: int) -> int:
        return max(0, length - self._mac_len)


def _block_algorithm(cipher: str, key: bytes) -> Any:
    from cryptography.hazmat.decrepit.ciphers import algorithms as legacy
    from cryptography.hazmat.primitives.ciphers import algorithms

    if cipher == "AES":
        return algorithms.AES(key)
    if cipher == "CAMELLIA":
        return legacy.Camellia(key)
    if cipher == "SEED":
        return legacy.SEED(key)
    if cipher == "IDEA":
        return legacy.IDEA(key)
    if cipher == "3DES":
        return legacy.TripleDES(key)
    if cipher == "DES":
        return legacy.TripleDES(key * 3)
    if cipher == "RC2":
        return legacy.RC2(key)
    raise DecryptError(f"no block cipher {cipher}")


def tls12_decryptors(
    suite: CipherSuite,
    version: int,
    master: bytes,
    client_random: bytes,
    server_random: bytes,
    *,
    etm: bool = False,
) -> tuple[RecordDecryptor, RecordDecryptor]:
    """(client_to_server, server_to_client) decryptors of a TLS 1.0-1.2 / SSLv3 session.

    Export suites expand their 5/7-byte key material with the PRF (TLS) or MD5 (SSLv3)
    as OpenSSL and Wireshark do.
    """
    mac_len = suite.mac_len if suite.mode in ("cbc", "stream", "null") else 0
    klen = suite.export_material_len or suite.key_len
    if suite.mode == "aead":
        iv_len = suite.fixed_iv_len
    elif suite.mode == "cbc":
        iv_len = 0 if suite.export_material_len and version != 0x0300 else suite.block_size
    else:
        iv_len = 0
    kb = key_block(
        version, suite.prf_hash, master, client_random, server_random, 2 * (mac_len + klen + iv_len)
    )
    o = 0

    def take(n: int) -> bytes:
        nonlocal o
        out = kb[o : o + n]
        o += n
        return out

    cmac, smac, ckey, skey = take(mac_len), take(mac_len), take(klen), take(klen)
    civ, siv = take(iv_len), take(iv_len)
    if suite.export_material_len:
        ckey, skey, civ, siv = _export_keys(
            suite, version, ckey, skey, client_random, server_random
        )
    make: Callable[[bytes, bytes, bytes], RecordDecryptor]
    if suite.mode == "aead":

        def make(key: bytes, iv: bytes, mac_key: bytes) -> RecordDecryptor:
            return Tls12AeadDecryptor(suite, key, iv)
    elif suite.mode == "cbc":

        def make(key: bytes, iv: bytes, mac_key: bytes) -> RecordDecryptor:
            return CbcDecryptor(suite, key, iv, mac_key, version, etm)
    else:

        def make(key: bytes, iv: bytes, mac_key: bytes) -> RecordDecryptor:
            return StreamDecryptor(suite, key, mac_key)

    return make(ckey, civ, cmac), make(skey, siv, smac)


def _export_keys(
    suite: CipherSuite, version: int, ckey: bytes, skey: bytes, cr: bytes, sr: bytes
) -> tuple[bytes, bytes, bytes, bytes]:
    n, bs = suite.key_len, suite.block_size
    if version == 0x0300:
        fc = hashlib.md5(ckey + cr + sr).digest()[:n]
        fs = hashlib.md5(skey + sr + cr).digest()[:n]
        civ = hashlib.md5(cr + sr).digest()[:bs]
        siv = hashlib.md5(sr + cr).digest()[:bs]
        return fc, fs, civ, siv
    fc = prf(version, suite.prf_hash, ckey, b"client write key", cr + sr, n)
    fs = prf(version, suite.prf_hash, skey, b"server write key", cr + sr, n)
    ivb = prf(version, suite.prf_hash, b"", b"IV block", cr + sr, 2 * bs) if bs else b""
    return fc, fs, ivb[:bs], ivb[bs:]
