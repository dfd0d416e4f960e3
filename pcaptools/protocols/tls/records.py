"""The TLS record layer of one direction: bytes in, ``(offset, type, version, fragment)`` out.

:class:`RecordReader` buffers at most one partial record. In sync, a header that
cannot be TLS (unknown content type, a version that is not 3.x, a length above
2^14 + 2048) desynchronises the direction for good: later bytes are counted, not parsed.
After a gap (bytes never captured) the reader *resynchronises*: it scans for a plausible
header whose record is followed by another plausible header (or ends exactly at the end of
the data seen so far) and carries on from there.
"""

from __future__ import annotations

import struct

CHANGE_CIPHER_SPEC = 20
ALERT = 21
HANDSHAKE = 22
APPLICATION_DATA = 23
HEARTBEAT = 24
SSL2_VERSION = 0x0002
"""record version given to an SSLv2-format ClientHello (its content type is reported as 22)"""

CONTENT_TYPE_NAMES = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data",
                      24: "heartbeat"}

MAX_RECORD_LENGTH = 2**14 + 2048
"""largest ciphertext a record may announce (RFC 5246 6.2.3); beyond it: tls.record_overflow"""
_RESYNC_MAX_LENGTH = 2**14 + 256
_RESYNC_WINDOW = 1 << 17

_HDR = struct.Struct(">BHH")

SYNCED = 0
RESYNC = 1
DESYNCED = 2


def plausible_header(buf: bytes | bytearray, pos: int) -> bool:
    """Could a record header start at ``pos``? (type 20-23, version 3.0-3.4, sane length)"""
    ctype, version, length = _HDR.unpack_from(buf, pos)
    return 20 <= ctype <= 23 and 0x0300 <= version <= 0x0304 and length <= _RESYNC_MAX_LENGTH


Record = tuple[int, int, int, bytes]
"""(stream offset of the header, content type, record version, fragment)"""


class RecordReader:
    """Splits one direction's in-order bytes into records (see the module docstring)."""

    __slots__ = ("buf", "bytes_seen", "mode", "offset", "records", "skipped")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.offset = 0
        """stream offset of buf[0]"""
        self.mode = SYNCED
        self.bytes_seen = 0
        self.skipped = 0
        """bytes skipped while resynchronising or after desynchronisation"""
        self.records = 0

    def feed(self, data: bytes, offset: int) -> tuple[list[Record], tuple[str, str] | None]:
        """Records completed by ``data`` (at stream ``offset``) and the problem that stopped
        parsing, if any, as ``(anomaly code, detail)``."""
        self.bytes_seen += len(data)
        if self.mode == DESYNCED:
            self.skipped += len(data)
            return [], None
        buf = self.buf
        if not buf:
            self.offset = offset
        buf += data
        out: list[Record] = []
        problem = None
        if self.mode == RESYNC and not self._resync():
            return out, None
        pos = 0
        n = len(buf)
        if self.records == 0 and n >= 3 and buf[0] & 0x80 and buf[2] == 1:
            # SSLv2-compatible ClientHello (2-byte header, msg_type 1): only as the first record
            length = ((buf[0] & 0x7F) << 8) | buf[1]
            if n < 2 + length:
                return out, None
            out.append((self.offset, HANDSHAKE, SSL2_VERSION, bytes(buf[2:2 + length])))
            pos = 2 + length
            self.records += 1
        while n - pos >= 5:
            ctype, version, length = _HDR.unpack_from(buf, pos)
            if not 20 <= ctype <= 24:
                problem = ("tls.bad_record_type", f"content type {ctype} at stream offset {self.offset + pos}")
            elif version >> 8 != 3:
                problem = ("tls.bad_record_version",
                           f"record version 0x{version:04x} at stream offset {self.offset + pos}")
            elif length > MAX_RECORD_LENGTH:
                problem = ("tls.record_overflow",
                           f"record length {length} > {MAX_RECORD_LENGTH} at stream offset {self.offset + pos}")
            if problem is not None:
                self.mode = DESYNCED
                self.skipped += n - pos
                buf.clear()
                return out, problem
            end = pos + 5 + length
            if end > n:
                break
            out.append((self.offset + pos, ctype, version, bytes(buf[pos + 5:end])))
            self.records += 1
            pos = end
        if pos:
            del buf[:pos]
            self.offset += pos
        return out, None

    def gap(self, offset: int, nbytes: int) -> None:
        """``nbytes`` at ``offset`` were never captured: drop the partial record, resynchronise."""
        if self.mode == DESYNCED:
            self.skipped += nbytes
            return
        self.skipped += len(self.buf) + nbytes
        self.buf.clear()
        self.offset = offset + nbytes
        self.mode = RESYNC

    def _resync(self) -> bool:
        """Look for a record boundary; True when found (``buf`` then starts with it)."""
        buf = self.buf
        n = len(buf)
        p = 0
        while p + 5 <= n:
            if plausible_header(buf, p):
                end = p + 5 + _HDR.unpack_from(buf, p)[2]
                if end == n or (end + 5 <= n and plausible_header(buf, end)):
                    self._drop(p)
                    self.mode = SYNCED
                    return True
                if end + 5 > n and n - p < _RESYNC_WINDOW:
                    self._drop(p)  # wait for the bytes that confirm or refute it
                    return False
            p += 1
        self._drop(max(0, n - 4))
        return False

    def _drop(self, k: int) -> None:
        if k:
            del self.buf[:k]
            self.offset += k
            self.skipped += k

    @property
    def pending(self) -> int:
        """bytes buffered in an incomplete record"""
        return len(self.buf)
