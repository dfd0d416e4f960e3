"""Classic pcap (libpcap) files: both byte orders, microsecond and nanosecond magics.

Frames are numbered as Wireshark numbers them: every record, from 1. A record cut off by
the end of the file becomes a ``capture.truncated_record`` row; a record whose length
Wireshark would refuse (longer than the maximum for the link type, 262144 bytes for most)
becomes a ``capture.bad_record_length`` row. Reading stops at either; every frame before
it has been yielded and nothing is raised.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator
from itertools import chain
from operator import length_hint
from typing import Any, Protocol

from ..diagnostics import Diagnostics
from ..errors import CaptureFormatError, UnsupportedInputError
from .frame import RawFrame
from .linktypes import InterfaceInfo, linktype_name, max_packet_len

try:  # (True in the compiled build only: see PcapParser._next_batch)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False

#: magic (read little endian) -> (struct byte order, ns per timestamp fraction unit,
#: record header size)
PCAP_MAGICS: dict[int, tuple[str, int, int]] = {
    0xA1B2C3D4: ("<", 1000, 16),  # microseconds, little endian
    0xD4C3B2A1: (">", 1000, 16),  # microseconds, big endian
    0xA1B23C4D: ("<", 1, 16),  # nanoseconds, little endian
    0x4D3CB2A1: (">", 1, 16),  # nanoseconds, big endian
    0xA1B2CD34: ("<", 1000, 24),  # Kuznetzov's "modified" libpcap (extra 8 bytes per record)
    0x34CDB2A1: (">", 1000, 24),
}

_LT_LINKTYPE_MASK = 0x03FFFFFF
_LT_FCS_LENGTH_PRESENT = 0x04000000


class Source(Protocol):
    """What the format parsers read from (see ``open.py``): a byte stream.

    ``read(n)`` returns exactly ``n`` bytes, or fewer at the end of the data; ``stopped`` is
    True when the end came from a decompression error or limit, or a stream's read error
    (already reported as a row), not from the end of the file.
    """

    read: Callable[[int], bytes]

    @property
    def stopped(self) -> bool: ...



def read_failed(diag: Diagnostics, exc: OSError, frame: int, offset: int) -> None:
    """Reading the capture raised ``exc`` after frame ``frame``, at byte ``offset`` of the
    (decompressed) stream: a ``capture.read_error`` row, and reading ends there (everything
    before it is analysed: an I/O error, a socket reset or timeout of a file object). A file
    object that stops supporting reading (``io.UnsupportedOperation``) is a misuse, not a
    property of the capture: :class:`~pcaptools.errors.UnsupportedInputError`."""
    if isinstance(exc, io.UnsupportedOperation):
        raise UnsupportedInputError(
            f"the capture stream stopped supporting reading after frame {frame} ({exc}): give "
            "a binary stream open for reading"
        ) from None
    diag.add(
        "capture.read_error",
        f"reading the capture failed at byte offset {offset}, after frame {frame} "
        f"({type(exc).__name__}: {exc.strerror or exc}); everything before it was analysed",
    )


class PcapParser:
    """Reads the 24-byte file header at construction and the records in :meth:`frames`.

    Raises :class:`CaptureFormatError` when the file header itself is cut off.

    :meth:`frames` hands the records out in batches (:meth:`_next_batch`): an uncompressed
    capture is read ahead in blocks (``open._Stream.read_ahead``) and the whole records in the
    block are sliced out of it together; a record that crosses the end of the block, needs a
    row (cut off, absurd length, out-of-order timestamp) or comes from a compressed stream is
    read on its own through ``read()``, as every record was before. A batch is made only once
    every frame of the one before has been taken, and a record with a row starts a batch, so
    rows are added at the same point of the consumer's work as when records were read one at a
    time; ``CaptureReader.bytes_read`` stays the end of the frame taken (:meth:`tell`).
    (``benchmarks/PROFILE.md``, 2026-12-06: the compiled build slices with C integers.)
    """

    __slots__ = (
        "_ahead",
        "_batch",
        "_batch_iter",
        "_batch_start",
        "_diag",
        "_frac_ns",
        "_last_ts",
        "_linktype",
        "_maxlen",
        "_offset",
        "_order",
        "_rechdr",
        "_src",
        "_le",
        "_unpack",
        "frame_count",
        "interface",
        "nanosecond",
    )

    def __init__(
        self, src: Source, magic: bytes, diag: Diagnostics, interfaces: list[InterfaceInfo]
    ) -> None:
        (m,) = struct.unpack("<I", magic)
        self._order, self._frac_ns, self._rechdr = PCAP_MAGICS[m]
        rest = src.read(20)
        if len(rest) < 20:
            raise CaptureFormatError(
                f"the pcap file header is cut off: {4 + len(rest)} of 24 bytes (the file is "
                "truncated)"
            )
        _vmaj, _vmin, _zone, _sigfigs, snaplen, network = struct.unpack(
            self._order + "HHiIII", rest
        )
        fcs_len = (network >> 28) * 2 if network & _LT_FCS_LENGTH_PRESENT else None
        self.interface = InterfaceInfo(
            linktype=network & _LT_LINKTYPE_MASK,
            snaplen=snaplen,
            tsresol=1_000_000_000 // self._frac_ns,
            fcs_len=fcs_len,
        )
        interfaces.append(self.interface)
        self.nanosecond = self._frac_ns == 1
        self._src = src
        self._diag = diag
        self.frame_count = 0
        self._linktype = self.interface.linktype
        self._maxlen = max_packet_len(self._linktype)
        self._unpack = struct.Struct(self._order + "IIII").unpack_from
        self._le = self._order == "<"
        self._offset = 24
        """byte offset of the next record (what the rows say)"""
        self._last_ts = -(1 << 63)
        self._ahead = False
        self._batch: list[RawFrame] = []
        """the frames handed out last, from ``_batch_iter``, the first at stream offset
        ``_batch_start`` (for :meth:`tell`)"""
        self._batch_iter: Iterator[RawFrame] | None = None
        self._batch_start = 0

    def frames(self) -> Iterator[RawFrame]:
        """Every record as a RawFrame; stops (with a row) at a cut-off or absurd record."""
        src: Any = self._src  # read_ahead: see open._Stream (absent from other sources)
        self._ahead = hasattr(src, "read_ahead") and src.read_ahead()
        return chain.from_iterable(iter(self._next_batch, None))

    def tell(self) -> int:
        """Bytes of a read-ahead stream up to the end of the last record handed out: what
        ``tell()`` of a stream read one record at a time says (``CaptureReader.bytes_read``).
        Only for a read-ahead stream (``open._Stream.read_ahead``)."""
        src: Any = self._src
        it = self._batch_iter
        if it is None:  # (the end: the stream's own position, past any cut-off record)
            return int(src.tell())
        batch = self._batch
        taken = len(batch) - length_hint(it)
        return self._batch_start + sum(
            [self._rechdr + len(f.data) for f in batch[:taken]])

    def _next_batch(self) -> Iterator[RawFrame] | None:
        """The frames to hand out next; None once reading has ended (``frames()`` calls it
        again only when every frame it returned has been taken).

        From the read-ahead block: every whole record up to the first that needs a row or
        another read. Otherwise that one record, through :meth:`_record`."""
        out: list[RawFrame] = []
        if self._ahead:
            src: Any = self._src
            buf: bytes = src.buf
            pos: int = src.pos
            rechdr = self._rechdr
            maxlen = self._maxlen
            frac_ns = self._frac_ns
            linktype = self._linktype
            unpack = self._unpack
            frame = self.frame_count
            last_ts = self._last_ts
            start = src.total + pos
            last_head = len(buf) - rechdr
            p = buf
            le = self._le
            while pos <= last_head:
                if _COMPILED:  # (C reads of the record header: no tuple, no int objects)
                    sec = _u32(p, pos, le)
                    frac = _u32(p, pos + 4, le)
                    incl = _u32(p, pos + 8, le)
                    orig = _u32(p, pos + 12, le)
                else:
                    sec, frac, incl, orig = unpack(buf, pos)
                end = pos + rechdr + incl
                if end > last_head + rechdr or incl > maxlen:
                    break
                ts = sec * 1_000_000_000 + frac * frac_ns
                if ts < last_ts:
                    break
                last_ts = ts
                frame += 1
                out.append(RawFrame(frame, ts, linktype, buf[pos + rechdr : end], orig))
                pos = end
            if out:
                self._offset += pos - src.pos
                src.pos = pos
                self.frame_count = frame
                self._last_ts = last_ts
                self._batch = out
                self._batch_start = start
                self._batch_iter = it = iter(out)
                return it
            self._batch_start = start
        got = self._record()
        if got is None:
            self._batch_iter = None
            return None
        out.append(got)
        self._batch = out
        self._batch_iter = it = iter(out)
        return it

    def _record(self) -> RawFrame | None:
        """The next record read with ``read()``, with its rows; None (after a row if the
        file was cut or is corrupt there) when reading ends."""
        diag = self._diag
        rechdr = self._rechdr
        frame = self.frame_count
        offset = self._offset
        read = self._src.read
        try:
            hdr = read(rechdr)
            if len(hdr) < rechdr:
                if hdr and not self._src.stopped:
                    diag.add(
                        "capture.truncated_record",
                        f"the file ends inside the header of record {frame + 1} at byte "
                        f"offset {offset} "
                        f"({len(hdr)} of {rechdr} header bytes)",
                        frame=frame + 1,
                    )
                return None
            sec, frac, incl, orig = self._unpack(hdr)
            ts = sec * 1_000_000_000 + frac * self._frac_ns
            if incl > self._maxlen:
                linktype = self._linktype
                diag.add(
                    "capture.bad_record_length",
                    f"record {frame + 1} at byte offset {offset} announces {incl} captured "
                    "bytes, more than "
                    f"the {self._maxlen} allowed for {linktype_name(linktype)}: the file is "
                    "corrupt after "
                    f"frame {frame}",
                    frame=frame + 1,
                )
                return None
            data = read(incl)
            if len(data) < incl:
                if not self._src.stopped:
                    diag.add(
                        "capture.truncated_record",
                        f"the file ends inside record {frame + 1} at byte offset {offset}: "
                        f"{len(data)} of {incl} captured bytes present",
                        frame=frame + 1,
                        ts_ns=ts,
                    )
                return None
        except OSError as exc:
            read_failed(diag, exc, frame, offset)
            return None
        frame += 1
        self.frame_count = frame
        if ts < self._last_ts:
            diag.add(
                "capture.timestamp_out_of_order",
                f"frame {frame} is {(self._last_ts - ts) / 1e9:.6f} s earlier than the frame "
                "before it",
                frame=frame,
                ts_ns=ts,
            )
        self._last_ts = ts
        self._offset = offset + rechdr + incl
        return RawFrame(frame, ts, self._linktype, data, orig)


def _u32(p: bytes, i: int, le: bool) -> int:
    """The unsigned 32-bit field at ``p[i]``, little endian if ``le`` (in the compiled build a C
    read of an ``unsigned char *``, pcap.pxd; the caller has checked the bounds)."""
    if le:
        hi = p[i + 3]  # (a C integer in the compiled build: ``<< 24`` of a char would overflow)
        return (hi << 24) | (p[i + 2] << 16) | (p[i + 1] << 8) | p[i]
    hi = p[i]
    return (hi << 24) | (p[i + 1] << 16) | (p[i + 2] << 8) | p[i + 3]
