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
from typing import Protocol

from ..diagnostics import Diagnostics
from ..errors import CaptureFormatError, UnsupportedInputError
from .frame import RawFrame
from .linktypes import InterfaceInfo, linktype_name, max_packet_len

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
    """

    __slots__ = (
        "_diag",
        "_frac_ns",
        "_order",
        "_rechdr",
        "_src",
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

    def frames(self) -> Iterator[RawFrame]:
        """Yield every record as a RawFrame; stop (with a row) at a cut-off or absurd record."""
        read = self._src.read
        diag = self._diag
        unpack = struct.Struct(self._order + "IIII").unpack_from
        rechdr = self._rechdr
        frac_ns = self._frac_ns
        linktype = self.interface.linktype
        maxlen = max_packet_len(linktype)
        frame = 0
        offset = 24
        last_ts = -(1 << 63)
        try:
            while True:
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
                    return
                sec, frac, incl, orig = unpack(hdr)
                ts = sec * 1_000_000_000 + frac * frac_ns
                if incl > maxlen:
                    diag.add(
                        "capture.bad_record_length",
                        f"record {frame + 1} at byte offset {offset} announces {incl} captured "
                        "bytes, more than "
                        f"the {maxlen} allowed for {linktype_name(linktype)}: the file is corrupt "
                        "after "
                        f"frame {frame}",
                        frame=frame + 1,
                    )
                    return
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
                    return
                frame += 1
                if ts < last_ts:
                    diag.add(
                        "capture.timestamp_out_of_order",
                        f"frame {frame} is {(last_ts - ts) / 1e9:.6f} s earlier than the frame "
                        "before it",
                        frame=frame,
                        ts_ns=ts,
                    )
                last_ts = ts
                yield RawFrame(frame, ts, linktype, data, orig)
                offset += rechdr + incl
        except OSError as exc:
            read_failed(diag, exc, frame, offset)
        finally:
            self.frame_count = frame
