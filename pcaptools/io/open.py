"""Opening a capture: compression and format found by magic bytes, never by file name.

A capture is a path (a regular file, or a FIFO) or a binary file object (``sys.stdin.buffer``
for ``tcpdump -w - | pcap-report -``, a socket's ``makefile("rb")``, ``io.BytesIO``). Only a
regular file is ever seeked: everything else is read once, front to back, through
:class:`_Unseekable` (the magic bytes it sniffs are handed to the parser again), so a pipe
gives the same frames, rows and tables as the file it carries, compressed or not.

:func:`open_capture` is the only way the rest of pcaptools reads a capture file. It raises
:class:`CaptureOpenError` / :class:`CaptureFormatError` when nothing can be read at all;
everything that goes wrong later (truncation, corruption, decompression errors) becomes a
row in the :class:`Diagnostics` sink and ends the frame iterator cleanly.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import lzma
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..diagnostics import Diagnostics
from ..errors import CaptureFormatError, CaptureOpenError, UnsupportedInputError
from .frame import RawFrame
from .linktypes import InterfaceInfo
from .pcap import PCAP_MAGICS, PcapParser
from .pcapng import BT_SHB, PcapngParser

#: (magic prefix, compression name)
COMPRESSION_MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)

_READ_BUFFER = 1 << 20
_BLOCK = 64 << 10
"""bytes an uncompressed capture is read ahead (the parsers slice records and blocks out of
it). Larger blocks are slower: every fresh multi-MiB ``bytes`` costs page faults, while 64 KiB
ones are recycled by malloc (classic pcap on ``mid.pcap``, 2026-12-06: 16 KiB 0.125 CPU s,
64 KiB 0.102, 256 KiB 0.118, 1 MiB 0.149; benchmarks/PROFILE.md)."""


@functools.cache
def _decompression_errors() -> tuple[type[BaseException], ...]:
    """what a decompressor raises on a damaged stream; looked up by the ``except`` clauses
    only when something was raised (zstandard is imported then, or by a zstd capture)"""
    errs: list[type[BaseException]] = [OSError, EOFError, ValueError, zlib.error, lzma.LZMAError]
    try:
        import zstandard

        errs.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover - zstandard is a dependency
        pass
    return tuple(errs)


def _is_read_error(exc: BaseException) -> bool:
    """``exc`` came from reading the source (an I/O error, a reset or timed-out socket, a
    file object that cannot read), not from corrupt compressed data (those carry no errno)."""
    return isinstance(exc, (io.UnsupportedOperation, TimeoutError, ConnectionError)) or (
        isinstance(exc, OSError) and exc.errno is not None)


class _Stream:
    """The decompressed byte stream the format parsers read (implements ``pcap.Source``).

    ``read(n)`` returns exactly n bytes or fewer at the end. For compressed input it turns a
    decompression error into a ``capture.decompression_error`` row; for any input it applies
    ``max_decompressed_bytes`` (``capture.decompression_limit`` row); after either, it
    returns ``b""`` and ``stopped`` is True.

    After :meth:`read_ahead` an uncompressed file is read in blocks of :data:`_BLOCK` bytes:
    ``buf[pos:]`` holds the bytes read ahead (never beyond the limit), and the parser slices
    whole records out of ``buf`` itself (advancing ``pos``) before it falls back to ``read()``.
    ``read()`` returns exactly what unbuffered reads of the same sizes would return, and emits
    the limit row at the same call. A regular file's blocks come from ``read1`` (one read of the
    disk each, straight into the block, and the bytes before a failing read are kept); a
    stream's from ``read``. A compressed stream is not read ahead (``buf`` stays empty), so a
    decompression error loses exactly the bytes it lost before.
    """

    __slots__ = (
        "_diag",
        "_eof",
        "_fh",
        "_fill",
        "_limit",
        "buf",
        "buffered",
        "compression",
        "pos",
        "read",
        "stopped",
        "total",
    )

    def __init__(
        self, fh: Any, compression: str | None, diag: Diagnostics, limit: int | None
    ) -> None:
        self._fh = fh
        self._diag = diag
        self._limit = limit
        self.compression = compression
        self.stopped = False
        self.total = 0
        """bytes of the stream before ``buf[0]`` (read ahead) or read so far (otherwise)"""
        self.buf = b""
        self.pos = 0
        self._eof = False
        self.buffered = False
        self._fill: Callable[[int], bytes] = fh.read
        """how blocks are read: ``read1`` of a regular file (one read straight into the block
        once its buffer is drained, not a copy out of the buffer), else ``read``"""
        self.read: Callable[[int], bytes]
        if compression is None and limit is None:
            self.read = fh.read
        else:
            self.read = self._read_checked

    def read_ahead(self) -> bool:
        """Switch an uncompressed file to block reads (``buf``/``pos``, see the class doc);
        False (nothing changes) for a compressed stream."""
        if self.compression is not None:
            return False
        if not self.buffered:
            self.total = self._fh.tell()
            self.buffered = True
            self.read = self._read_buffered
            self._fill = getattr(self._fh, "read1", self._fh.read)
        return True

    def tell(self) -> int:
        """Bytes of the stream handed to the parser so far (buffered streams)."""
        return self.total + self.pos

    def _read_buffered(self, n: int) -> bytes:
        pos = self.pos
        end = pos + n
        if end <= len(self.buf):
            self.pos = end
            return self.buf[pos:end]
        if self.stopped or n <= 0:
            return b""
        return self._refill(n)

    def _refill(self, n: int) -> bytes:
        """The buffer holds fewer than ``n`` bytes: read blocks until it holds ``n`` (or the
        file, or the limit, ends) and return up to ``n`` bytes. The last block read becomes
        the buffer; only the ``n`` bytes returned are copied out of the blocks."""
        rest = self.buf[self.pos :]
        self.total += self.pos
        self.pos = 0
        start = self.total
        parts = [rest]
        have = len(rest)
        limit = self._limit
        fill = self._fill
        while have < n and not self._eof:
            want = max(n - have, _BLOCK)
            if limit is not None:
                room = limit - (start + have)
                if room <= 0:
                    break
                want = min(want, room)
            more: bytes = fill(want)
            if not more:
                self._eof = True
                break
            parts.append(more)
            have += len(more)
        if have >= n:  # (at least one block was read: rest was shorter than n)
            last = parts[-1]
            before = have - len(last)
            self.buf = last
            self.total = start + before
            self.pos = n - before
            if not before:
                return last[:n]
            parts[-1] = last[: n - before]
            return b"".join(parts)
        # fewer than n bytes left before the end of the file or the limit
        buf = parts[0] if len(parts) == 1 else b"".join(parts)
        self.buf = b""
        self.total = start + have
        if limit is not None and not self._eof and start + n > limit:
            if self._fh.read(1):  # an unbuffered read would have gone past the limit
                self.stopped = True
                self.total = start + n  # where that read would have left the file (bytes_read)
                self._limit_row()
            else:
                self._eof = True
        return buf

    def read_failed(self, exc: OSError, nbytes: int) -> None:
        """The source (a stream) raised ``exc`` after ``nbytes`` bytes: a
        ``capture.read_error`` row; reading stops once those bytes are parsed (``stopped``:
        the parser adds no truncation row for the record the error cut)."""
        self.stopped = True
        self._diag.add(
            "capture.read_error",
            f"reading the capture failed after {nbytes} bytes of the stream "
            f"({type(exc).__name__}: {exc.strerror or exc}); everything before it was analysed",
        )

    def _limit_row(self) -> None:
        what = f"the {self.compression} stream" if self.compression else "the file"
        self._diag.add(
            "capture.decompression_limit",
            f"reading stopped after {self._limit} bytes of {what} (max_decompressed_bytes)",
        )

    def _read_checked(self, n: int) -> bytes:
        if self.stopped or n <= 0:
            return b""
        try:
            data: bytes = self._fh.read(n)
            while 0 < len(data) < n:  # some decompressors return short reads before the end
                more: bytes = self._fh.read(n - len(data))
                if not more:
                    break
                data += more
        except _decompression_errors() as exc:
            if self.stopped:  # the source failed (read_failed): the stream ended early
                return b""
            if _is_read_error(exc):
                raise  # not the data: the parser reports it (read_error / UnsupportedInputError)
            self.stopped = True
            self._diag.add(
                "capture.decompression_error",
                f"the {self.compression} stream is corrupt after {self.total} decompressed bytes "
                f"({type(exc).__name__}: {exc}); everything before it was read",
            )
            return b""
        self.total += len(data)
        if self._limit is not None and self.total > self._limit:
            keep = len(data) - (self.total - self._limit)
            self.total = self._limit
            self.stopped = True
            self._limit_row()
            return data[:keep]
        return data

    def close(self) -> None:
        self._fh.close()


class _Unseekable:
    """A binary stream read once without seeking (pipe, FIFO, socket, any file object).

    ``read(n)`` returns exactly ``n`` bytes, or fewer only at the end (file objects may
    return short reads before it: they are read again), the bytes given back with
    :meth:`unread` first. ``tell()`` counts the bytes handed out, which is all the readers
    need of it. ``close()`` closes the underlying object only if pcaptools opened it.
    """

    __slots__ = ("_fh", "_owned", "_pending", "consumed", "failed", "name", "on_error")

    def __init__(self, fh: Any, owned: bool, name: str) -> None:
        self._fh = fh
        self._owned = owned
        self._pending = b""
        self.consumed = 0
        self.name = name
        self.failed = False
        """a read raised: what arrived before it was handed out, then only ``b""``"""
        self.on_error: Callable[[OSError, int], None] | None = None
        """set by :func:`_open`: told of a read error (and the bytes read before it) instead
        of raising it, so the bytes that arrived are still parsed and the error is a row"""

    def unread(self, data: bytes) -> None:
        self._pending = data + self._pending
        self.consumed -= len(data)

    def read(self, n: int = -1) -> bytes:
        pending = self._pending
        if n is not None and 0 <= n <= len(pending):
            data = pending[:n]
            self._pending = pending[n:]
        else:
            self._pending = b""
            parts = [pending] if pending else []
            if not self.failed:
                try:
                    if n is None or n < 0:
                        _read_all(self._fh, parts)
                    else:
                        _read_exactly(self._fh, n, parts)
                except io.UnsupportedOperation as exc:
                    raise UnsupportedInputError(
                        f"cannot read {self.name}: the file object does not support reading "
                        f"({exc}); give a binary stream open for reading") from None
                except OSError as exc:
                    if self.on_error is None:
                        raise
                    self.failed = True
                    self.on_error(exc, self.consumed + sum(len(x) for x in parts))
            data = parts[0] if len(parts) == 1 else b"".join(parts)
        self.consumed += len(data)
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.consumed

    @property
    def closed(self) -> bool:
        return bool(getattr(self._fh, "closed", False))

    def close(self) -> None:
        if self._owned:
            self._fh.close()


def _as_bytes(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if data is None:  # a non-blocking stream with nothing available yet
        raise UnsupportedInputError(
            "the capture stream is non-blocking and had no data ready: give a blocking stream "
            "(pcaptools reads captures synchronously)"
        )
    raise UnsupportedInputError(
        f"the capture stream returned {type(data).__name__}, not bytes: open it in binary mode "
        "('rb'), or pass sys.stdin.buffer rather than sys.stdin"
    )


def _read_exactly(fh: Any, n: int, parts: list[bytes]) -> None:
    """Append reads of ``fh`` to ``parts`` until they hold ``n`` bytes (``parts`` may start
    with bytes already) or ``fh`` ends; what was read stays in ``parts`` if a read raises."""
    have = sum(len(x) for x in parts)
    while have < n:
        more = _as_bytes(fh.read(n - have))
        if not more:
            return
        parts.append(more)
        have += len(more)


def _read_all(fh: Any, parts: list[bytes]) -> None:
    while True:
        more = _as_bytes(fh.read(_READ_BUFFER))
        if not more:
            return
        parts.append(more)


def _open_decompressor(raw: Any, compression: str) -> Any:
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bzip2":
        return bz2.BZ2File(raw, mode="rb")
    if compression == "xz":
        return lzma.LZMAFile(raw, mode="rb")
    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)


def describe_content(head: bytes) -> str:
    """A guess at what non-capture bytes are, for error messages (``"this looks like JSON"``)."""
    if not head:
        return "the file is empty"
    checks: tuple[tuple[bytes, str], ...] = (
        (b"\x7fELF", "an ELF executable or library"),
        (b"MZ", "a Windows executable"),
        (b"PK\x03\x04", "a zip archive, or a docx/xlsx/jar file"),
        (b"PK\x05\x06", "an empty zip archive"),
        (b"%PDF", "a PDF document"),
        (b"\x89PNG", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (b"GIF8", "a GIF image"),
        (b"Rar!", "a RAR archive"),
        (b"7z\xbc\xaf", "a 7-Zip archive"),
        (b"SQLite format 3", "an SQLite database"),
        (b"PAR1", "a Parquet file"),
        (
            b"GMBU",
            "a Microsoft Network Monitor capture; convert it with: editcap -F pcapng in.cap "
            "out.pcapng",
        ),
        (
            b"snoop\0\0\0",
            "a Solaris snoop capture; convert it with: editcap -F pcapng in.snoop out.pcapng",
        ),
        (
            b"XCP\0",
            "a NetXRay/Sniffer capture; convert it with: editcap -F pcapng in.cap out.pcapng",
        ),
    )
    for magic, what in checks:
        if head.startswith(magic):
            return f"this looks like {what}"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "this looks like a tar archive"
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    low = text[:64].lower()
    if low.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "this looks like HTML, perhaps an error page saved instead of the capture"
    if low.startswith(b"<?xml"):
        return "this looks like XML"
    if text.startswith((b"{", b"[")):
        return "this looks like JSON"
    try:
        decoded = head.decode("utf-8")
    except UnicodeDecodeError:
        # the sample may end inside a multi-byte character
        try:
            decoded = head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            decoded = ""
    if decoded and all(c.isprintable() or c in "\r\n\t" for c in decoded):
        first = decoded.lstrip().split(None, 1)[0] if decoded.strip() else ""
        if first in (
            "CLIENT_RANDOM",
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0",
            "SERVER_TRAFFIC_SECRET_0",
            "EXPORTER_SECRET",
            "RSA",
        ):
            return "this looks like a TLS key log file, not a capture"
        return "this looks like text"
    return "the content is not recognised"


class CaptureReader:
    """An open capture file. Use as a context manager; iterate :meth:`frames` once.

    Attributes:
        path: the file
        format: ``"pcap"`` or ``"pcapng"``
        compression: None, ``"gzip"``, ``"bzip2"``, ``"xz"`` or ``"zstd"``
        interfaces: one :class:`InterfaceInfo` per interface (pcap: one; pcapng: filled as
            Interface Description Blocks are read, every section's in file order;
            ``RawFrame.interface`` indexes this list)
        secrets: ``(secrets_type, data)`` of every pcapng Decryption Secrets Block read so
            far (``0x544c534b`` is a TLS key log)
        file_size: size of the file on disk in bytes; for a stream (pipe, FIFO, file
            object), the bytes read from it so far (the whole stream once frames() ends)
        size_known: False for a stream: its size is known only at its end
        nanosecond: pcap only: the file has nanosecond timestamps
    """

    def __init__(
        self,
        path: Path,
        raw: Any,
        stream: _Stream,
        fmt: str,
        parser: PcapParser | PcapngParser,
        interfaces: list[InterfaceInfo],
        secrets: list[tuple[int, bytes]],
        file_size: int,
    ) -> None:
        self.path = path
        self._raw = raw
        self._stream = stream
        self._parser = parser
        self._iterated = False
        self.format = fmt
        self.compression = stream.compression
        self.interfaces = interfaces
        self.secrets = secrets
        self._file_size = file_size
        self.size_known = not isinstance(raw, _Unseekable)
        self.nanosecond = isinstance(parser, PcapParser) and parser.nanosecond

    def frames(self) -> Iterator[RawFrame]:
        """Stream the packet records in file order (one pass; constant memory).

        Frame numbers are Wireshark's ``frame.number``. Ends cleanly, with a Diagnostics
        row, at a truncated or corrupt record. Raises RuntimeError if called twice.
        """
        if self._iterated:
            raise RuntimeError("CaptureReader.frames() can be iterated only once")
        self._iterated = True
        return self._parser.frames()

    @property
    def frame_count(self) -> int:
        """Frame numbers used so far (final once frames() is exhausted; includes pcapng
        records Wireshark numbers that are not packets and are not yielded)."""
        return self._parser.frame_count

    @property
    def file_size(self) -> int:
        """Bytes on disk; for a stream, bytes read from it so far."""
        if isinstance(self._raw, _Unseekable):
            return self._raw.consumed
        return self._file_size

    @property
    def bytes_read(self) -> int:
        """Bytes of the file (compressed bytes, for a compressed file) consumed so far."""
        if self._stream.buffered:
            return min(self._parser.tell(), self.file_size)
        try:
            return min(int(self._raw.tell()), self.file_size)
        except (OSError, ValueError):
            return self.file_size

    def close(self) -> None:
        """Close the file (idempotent)."""
        try:
            self._stream.close()
        finally:
            self._raw.close()

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        comp = f"+{self.compression}" if self.compression else ""
        n = len(self.interfaces)
        return f"<CaptureReader {self.path.name} {self.format}{comp} {n} interface(s)>"


def open_capture(
    path: str | os.PathLike[str] | IO[bytes],
    diag: Diagnostics,
    *,
    max_decompressed_bytes: int | None = None,
) -> CaptureReader:
    """Open a pcap or pcapng capture, optionally gzip/bzip2/xz/zstd compressed.

    ``path`` is a file path (a FIFO too) or a binary file object (``sys.stdin.buffer``, a
    socket's ``makefile("rb")``, ``io.BytesIO``...); a path is always a path (``"-"`` names a
    file called ``-``: standard input is ``sys.stdin.buffer``). Only a regular file is ever seeked;
    anything else is read once, front to back, and gives the same frames. A file object
    is not closed by :meth:`CaptureReader.close` (its owner closes it).

    Reads the file header (pcap) or first Section Header Block (pcapng) at once.
    Raises :class:`CaptureOpenError` if the path cannot be opened (missing, a directory,
    no permission), :class:`UnsupportedInputError` (a ``CaptureOpenError``) for a file object
    that cannot be read as bytes (text mode, write-only, non-blocking), and
    :class:`CaptureFormatError` if it is empty or not a capture; the
    message says what was found (``"expected pcap or pcapng magic, got 0x7b0a2022 (this
    looks like JSON ...)"``). ``max_decompressed_bytes`` caps the bytes read after
    decompression (a ``capture.decompression_limit`` row says where reading stopped).
    """
    if hasattr(path, "read"):
        fobj: Any = path
        name = getattr(fobj, "name", None)
        name = name if isinstance(name, str) and name else "<stream>"
        if isinstance(fobj, io.TextIOBase):
            raise UnsupportedInputError(
                f"{name} is a text stream: captures are binary; open the file with 'rb', or "
                "pass sys.stdin.buffer rather than sys.stdin"
            )
        return _open(Path(name), _Unseekable(fobj, owned=False, name=name), diag,
                     max_decompressed_bytes)
    p = Path(path)
    try:
        raw: Any = open(p, "rb", buffering=_READ_BUFFER)  # noqa: SIM115 - closed by CaptureReader
    except FileNotFoundError:
        hint = (" ('-' is standard input only on the pcap-report command line: in Python pass "
                "sys.stdin.buffer)" if str(path) == "-" else "")
        raise CaptureOpenError(f"capture file not found: {p}{hint}") from None
    except IsADirectoryError:
        raise CaptureOpenError(f"{p} is a directory, not a capture file") from None
    except PermissionError:
        raise CaptureOpenError(f"no permission to read {p}") from None
    except OSError as exc:
        raise CaptureOpenError(f"cannot open {p}: {exc.strerror or exc}") from None
    try:
        try:
            regular = stat.S_ISREG(os.fstat(raw.fileno()).st_mode)
        except OSError as exc:
            raise CaptureOpenError(f"cannot read {p}: {exc.strerror or exc}") from None
        if not regular:  # a FIFO, a character device, /dev/stdin...: read it once, no seeks
            raw = _Unseekable(raw, owned=True, name=str(p))
        return _open(p, raw, diag, max_decompressed_bytes)
    except BaseException:
        raw.close()
        raise


def _open(p: Path, raw: Any, diag: Diagnostics, limit: int | None) -> CaptureReader:
    """Sniff and start the parser; ``raw`` is a regular file (seeked back to 0 after the
    sniff) or an :class:`_Unseekable` (the sniffed bytes are given back to it)."""
    unseekable = isinstance(raw, _Unseekable)
    try:
        file_size = 0 if unseekable else os.fstat(raw.fileno()).st_size
        head = raw.read(8)
    except io.UnsupportedOperation as exc:
        raise UnsupportedInputError(
            f"cannot read {p}: the file object does not support reading ({exc}); give a "
            "binary stream open for reading"
        ) from None
    except OSError as exc:
        raise CaptureOpenError(f"cannot read {p}: {exc.strerror or exc}") from None
    if not head:
        raise CaptureFormatError(f"{p} is empty (0 bytes): expected a pcap or pcapng capture")
    if unseekable:
        raw.unread(head)
    else:
        raw.seek(0)
    compression = next((name for magic, name in COMPRESSION_MAGICS if head.startswith(magic)), None)
    fh = raw if compression is None else _open_decompressor(raw, compression)
    stream = _Stream(fh, compression, diag, limit)
    if unseekable:
        raw.on_error = stream.read_failed
    try:
        magic = fh.read(4)
    except _decompression_errors() as exc:
        raise CaptureFormatError(
            f"{p} starts like a {compression} file but cannot be decompressed "
            f"({type(exc).__name__}: {exc})"
        ) from None
    after = f" after {compression} decompression" if compression else ""
    if len(magic) < 4:
        raise CaptureFormatError(
            f"{p} is too short{after} ({len(magic)} bytes): expected a pcap or pcapng capture"
        )
    stream.total = 4
    interfaces: list[InterfaceInfo] = []
    secrets: list[tuple[int, bytes]] = []
    magic_le = int.from_bytes(magic, "little")
    parser: PcapParser | PcapngParser
    if magic_le in PCAP_MAGICS:
        parser = PcapParser(stream, magic, diag, interfaces)
        fmt = "pcap"
    elif magic_le == BT_SHB:
        parser = PcapngParser(stream, magic, diag, interfaces, secrets)
        fmt = "pcapng"
    else:
        try:
            sample = magic + fh.read(508)
        except _decompression_errors():
            sample = magic
        raise CaptureFormatError(
            f"{p} is not a capture file: expected pcap or pcapng magic{after}, got 0x{magic.hex()} "
            f"({describe_content(sample)})"
        )
    return CaptureReader(p, raw, stream, fmt, parser, interfaces, secrets, file_size)
