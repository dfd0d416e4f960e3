"""The TLS record layer of one direction: bytes in, ``(offset, type, version, fragment)`` out.

:class:`RecordReader` buffers at most one partial record. In sync, a header that
cannot be TLS (unknown content type, a version that is not 3.x, a length above
2^14 + 2048) desynchronises the direction for good: later bytes are counted, not parsed.
After a gap (bytes never captured) the reader *resynchronises*: it scans for a plausible
header whose record is followed by another plausible header (or ends exactly at the end of
the data seen so far) and carries on from there.
"""

from __future__ import annotations

import re
import struct
from typing import Any

CHANGE_CIPHER_SPEC = 20
ALERT = 21
HANDSHAKE = 22
APPLICATION_DATA = 23
HEARTBEAT = 24
SSL2_VERSION = 0x0002
"""record version given to an SSLv2-format ClientHello (its content type is reported as 22)"""

CONTENT_TYPE_NAMES = {
    20: "change_cipher_spec",
    21: "alert",
    22: "handshake",
    23: "application_data",
    24: "heartbeat",
}

MAX_RECORD_LENGTH = 2**14 + 2048
"""largest ciphertext a record may announce (RFC 5246 6.2.3); beyond it: tls.record_overflow"""
_RESYNC_MAX_LENGTH = 2**14 + 256
_RESYNC_WINDOW = 1 << 17
RESYNC_BUDGET = 1 << 16
"""bytes a direction may skip while looking for a record boundary before it is given up"""
_CANDIDATE = re.compile(rb"[\x14-\x17]\x03[\x00-\x04]")

_HDR = struct.Struct(">BHH")

PROBE = 3
"""nothing parsed yet: the first bytes decide between SYNCED and RESYNC (capture started mid-record)"""
SYNCED = 0
RESYNC = 1
DESYNCED = 2


def plausible_header(buf: bytes | bytearray, pos: int) -> bool:
    """Could a record header start at ``pos``? (type 20-23, version 3.0-3.4, sane length)"""
    ctype, version, length = _HDR.unpack_from(buf, pos)
    return bool(20 <= ctype <= 23 and 0x0300 <= version <= 0x0304 and length <= _RESYNC_MAX_LENGTH)


def looks_like_tls(data: bytes) -> bool | None:
    """Protocol sniffing for the pipeline: do the first bytes of a direction look like TLS?

    True for a record header (types 20-23, version 3.0-3.4, a length up to 2^14 + 2048;
    application data counts, for captures that start mid-connection) or an SSLv2-format
    ClientHello; False when they cannot be TLS; None when fewer than 3 bytes are available.
    """
    if len(data) < 3:
        return None
    if data[0] & 0x80:
        return data[2] == 1 and ((data[0] & 0x7F) << 8 | data[1]) >= 9
    if not 20 <= data[0] <= 23 or data[1] != 3 or data[2] > 4:
        return False
    return len(data) < 5 or ((data[3] << 8) | data[4]) <= MAX_RECORD_LENGTH


Record = tuple[int, int, int, bytes]
"""(stream offset of the header, content type, record version, fragment)"""
Note = tuple[str, str]
"""(anomaly code, detail)"""


def _problem(ctype: int, version: int, length: int, offset: int) -> Note:
    """Why the header ``(ctype, version, length)`` at stream ``offset`` desynchronises."""
    if not 20 <= ctype <= 24:
        return ("tls.bad_record_type", f"content type {ctype} at stream offset {offset}")
    if version >> 8 != 3:
        return (
            "tls.bad_record_version",
            f"record version 0x{version:04x} at stream offset {offset}",
        )
    return (
        "tls.record_overflow",
        f"record length {length} > {MAX_RECORD_LENGTH} at stream offset {offset}",
    )


def _remake_reader(buf: bytearray, offset: int, mode: int, bytes_seen: int, skipped: int,
                   records: int, budget: int, need: int, parts: list[bytes | memoryview],
                   head: tuple[int, int, int], length: int) -> RecordReader:
    """A :class:`RecordReader` packed by its ``__reduce__``, made again."""
    r = RecordReader()
    r.buf, r.offset, r.mode, r.bytes_seen, r.skipped = buf, offset, mode, bytes_seen, skipped
    r.records, r.budget, r.need, r.parts, r.head, r.length = \
        records, budget, need, parts, head, length
    return r


class RecordReader:
    """Splits one direction's in-order bytes into records (see the module docstring).

    In sync, a record that arrives in several chunks is kept as the list of its pieces
    (:attr:`parts`, no copy) and joined once when its last byte arrives; :attr:`need` says how
    many bytes are still missing, so a caller may take a chunk shorter than that with
    :meth:`take` (nothing completes) without going through :meth:`feed`."""

    __slots__ = (
        "budget", "buf", "bytes_seen", "head", "length", "mode", "need", "offset", "parts",
        "records", "skipped",
    )

    def __init__(self) -> None:
        self.buf = bytearray()
        """bytes held while probing or resynchronising; in sync, at most 4 bytes of a header"""
        self.offset = 0
        """stream offset of buf[0]"""
        self.mode = PROBE
        self.bytes_seen = 0
        self.skipped = 0
        """bytes skipped while resynchronising or after desynchronisation"""
        self.records = 0
        self.budget = RESYNC_BUDGET
        """bytes that may still be skipped in the current resynchronisation"""
        self.need = 0
        """in sync, with a record header read: bytes of its fragment still missing (else 0)"""
        self.parts: list[bytes | memoryview] = []
        """the pieces of that fragment received so far"""
        self.head = (0, 0, 0)
        """(stream offset, content type, version) of that record"""
        self.length = 0
        """its fragment length"""

    def __reduce__(self) -> tuple[Any, ...]:
        """Packed (an idle connection's parsers, :mod:`pcaptools.tcp.packing`) with the
        pieces of a record in progress joined: pickle packs no memoryview."""
        parts: list[bytes | memoryview] = [b"".join(self.parts)] if self.parts else []
        return _remake_reader, (self.buf, self.offset, self.mode, self.bytes_seen, self.skipped,
                                self.records, self.budget, self.need, parts, self.head,
                                self.length)

    def take(self, data: bytes) -> None:
        """Add a chunk shorter than :attr:`need` (the caller checked): nothing completes."""
        self.bytes_seen += len(data)
        self.need -= len(data)
        self.parts.append(data)

    def feed(self, data: bytes, offset: int) -> tuple[list[Record], list[Note]]:
        """Records completed by ``data`` (at stream ``offset``) and notes about what was
        skipped or why parsing stopped, as ``(anomaly code, detail)`` pairs."""
        n = len(data)
        self.bytes_seen += n
        out: list[Record] = []
        notes: list[Note] = []
        mode = self.mode
        if mode == SYNCED:
            if type(data) is not bytes:
                data = bytes(data)
            need = self.need
            if need:
                parts = self.parts
                if n < need:
                    self.need = need - n
                    parts.append(data)
                    return out, notes
                parts.append(data if n == need else memoryview(data)[:need])
                off, ctype, version = self.head
                out.append((off, ctype, version, b"".join(parts)))
                self.records += 1
                self.need = 0
                self.parts = []
                if n > need:
                    self._synced(data, need, offset, out, notes)
                return out, notes
            if self.buf:  # a header cut short by the previous chunk
                data = bytes(self.buf) + data
                offset = self.offset
                self.buf.clear()
            self._synced(data, 0, offset, out, notes)
            return out, notes
        if mode == DESYNCED:
            self.skipped += n
            return out, notes
        buf = self.buf
        if not buf:
            self.offset = offset
        buf += data
        if mode == PROBE:
            if len(buf) < 5 and not (len(buf) >= 3 and buf[0] & 0x80):
                return out, notes
            if self._first_record_plausible():
                self.mode = SYNCED
            else:
                self.mode = RESYNC
                self.budget = RESYNC_BUDGET
        if self.mode == RESYNC:
            if not self._resync():
                if self.budget < 0:
                    self.mode = DESYNCED
                    self.skipped += len(self.buf)
                    self.buf.clear()
                    notes.append(
                        (
                            "tls.resync_failed",
                            f"no TLS record boundary found in {RESYNC_BUDGET} bytes; direction no longer parsed",
                        )
                    )
                return out, notes
            skipped = RESYNC_BUDGET - self.budget
            if skipped:
                notes.append(
                    (
                        "tls.resynchronized",
                        f"skipped {skipped} bytes to the record boundary at stream offset {self.offset}",
                    )
                )
        data = bytes(self.buf)
        self.buf.clear()
        self._synced(data, 0, self.offset, out, notes)
        return out, notes

    def _synced(
        self, data: bytes, pos: int, offset: int, out: list[Record], notes: list[Note]
    ) -> None:
        """Records in ``data[pos:]`` (``data[0]`` at stream ``offset``; nothing held before
        it); a record left incomplete goes to :attr:`parts`, a partial header to ``buf``."""
        n = len(data)
        if self.records == 0 and n - pos >= 3 and data[pos] & 0x80 and data[pos + 2] == 1:
            # SSLv2-compatible ClientHello (2-byte header, msg_type 1): only as the first record
            length = ((data[pos] & 0x7F) << 8) | data[pos + 1]
            if n - pos < 2 + length:
                self.buf += memoryview(data)[pos:]
                self.offset = offset + pos
                return
            out.append((offset + pos, HANDSHAKE, SSL2_VERSION, data[pos + 2 : pos + 2 + length]))
            pos += 2 + length
            self.records += 1
        unpack = _HDR.unpack_from
        while n - pos >= 5:
            ctype, version, length = unpack(data, pos)
            if not 20 <= ctype <= 24 or version >> 8 != 3 or length > MAX_RECORD_LENGTH:
                self.mode = DESYNCED
                self.skipped += n - pos
                notes.append(_problem(ctype, version, length, offset + pos))
                return
            end = pos + 5 + length
            if end > n:
                self.need = end - n
                self.length = length
                self.head = (offset + pos, ctype, version)
                self.parts = [memoryview(data)[pos + 5 :]]
                return
            out.append((offset + pos, ctype, version, data[pos + 5 : end]))
            self.records += 1
            pos = end
        if pos < n:
            self.buf += memoryview(data)[pos:]
            self.offset = offset + pos

    def _first_record_plausible(self) -> bool:
        buf = self.buf
        if buf[0] & 0x80:
            return len(buf) >= 3 and buf[2] == 1
        ctype, version, length = _HDR.unpack_from(buf, 0)
        return bool(20 <= ctype <= 24 and version >> 8 == 3 and length <= MAX_RECORD_LENGTH)

    def gap(self, offset: int, nbytes: int) -> None:
        """``nbytes`` at ``offset`` were never captured: drop the partial record, resynchronise."""
        if self.mode == DESYNCED:
            self.skipped += nbytes
            return
        self.skipped += self.pending + nbytes
        self.buf.clear()
        self.need = 0
        self.parts = []
        self.offset = offset + nbytes
        self.mode = RESYNC
        self.budget = RESYNC_BUDGET

    def _resync(self) -> bool:
        """Look for a record boundary; True when found (``buf`` then starts with it)."""
        buf = bytes(self.buf)  # a snapshot: match objects would pin the bytearray
        n = len(buf)
        for m in _CANDIDATE.finditer(buf):
            p = m.start()
            if p + 5 > n:
                break
            if not plausible_header(buf, p):
                continue
            end = p + 5 + _HDR.unpack_from(buf, p)[2]
            if end == n or (end + 5 <= n and plausible_header(buf, end)):
                self._drop(p)
                self.mode = SYNCED
                return True
            if end + 5 > n and n - p < _RESYNC_WINDOW:
                self._drop(p)  # wait for the bytes that confirm or refute it
                return False
        self._drop(max(0, n - 4))
        return False

    def _drop(self, k: int) -> None:
        if k:
            del self.buf[:k]
            self.offset += k
            self.skipped += k
            self.budget -= k

    @property
    def pending(self) -> int:
        """bytes buffered in an incomplete record"""
        if self.need:
            return 5 + self.length - self.need
        return len(self.buf)

