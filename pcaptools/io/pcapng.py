"""pcapng files: our own block loop (dpkt's reader only uses the first interface).

What is read (and how Wireshark 4.0 numbers frames, which we follow):

- Section Header Blocks: each one starts a new section with its own byte order and its own
  interfaces (interface ids restart at 0). ``RawFrame.interface`` is the index into
  :attr:`PcapngParser.interfaces`, which lists the interfaces of every section in file order.
- Interface Description Blocks: link type, snaplen, ``if_name``, ``if_description``,
  ``if_tsresol`` (a power of 10 or of 2), ``if_tsoffset``, ``if_fcslen``.
- Enhanced, Simple and obsolete (type 2) Packet Blocks: yielded as frames. A Simple Packet
  Block has no timestamp (tshark shows none); it gets the previous frame's time.
- Decryption Secrets Blocks: appended to ``secrets`` as ``(secrets_type, data)``.
- Blocks that Wireshark shows as records of their own without being packets (systemd
  journal entries, custom blocks, sysdig events) use up a frame number but are not yielded,
  so the numbers of the packets after them stay equal to ``frame.number``.
- Name Resolution and Interface Statistics Blocks are skipped silently; every other block
  type that is skipped (registered but not read, such as Darwin process event blocks, or not
  registered at all) gets one ``capture.unknown_block_type`` row per type, as tshark skips
  them without a word.
- Options are checked as tshark 4.0 checks them: an option of a Section Header, Interface
  Description, (Enhanced) Packet or Decryption Secrets Block that overruns its block gives a
  ``capture.bad_option`` row (tshark calls the file corrupt and stops there); the block is
  kept without the rest of its options and reading goes on.

Malformed input never raises: a block cut off by the end of the file gives
``capture.truncated_record``; a length that cannot be right gives ``capture.bad_block`` or
``capture.bad_record_length`` and reading stops there, as Wireshark stops (the framing of
the rest of the file is unknown). A packet naming an interface its section never defined
gives ``capture.unknown_interface``: Wireshark stops reading there, pcaptools counts it as a
frame, skips it and goes on.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from itertools import chain
from operator import length_hint
from typing import Any

from ..diagnostics import Diagnostics
from ..errors import CaptureFormatError
from .frame import RawFrame
from .linktypes import InterfaceInfo, linktype_name, max_packet_len
from .pcap import Source, _u32, read_failed

try:  # (True in the compiled build only: see PcapngParser._next_batch)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False

BT_SHB = 0x0A0D0D0A
BT_IDB = 0x00000001
BT_PB = 0x00000002
BT_SPB = 0x00000003
BT_NRB = 0x00000004
BT_ISB = 0x00000005
BT_EPB = 0x00000006
BT_JOURNAL = 0x00000009
BT_DSB = 0x0000000A
BT_CB_COPY = 0x00000BAD
BT_CB_NO_COPY = 0x40000BAD
BYTE_ORDER_MAGIC = 0x1A2B3C4D
SECRETS_TLS_KEYLOG = 0x544C534B
"""pcapng Decryption Secrets Block type of an NSS key log"""

#: secrets types from the pcapng spec, for messages
SECRETS_TYPE_NAMES: dict[int, str] = {
    0x544C534B: "TLS key log",
    0x5353484B: "SSH key log",
    0x57474B4C: "WireGuard key log",
    0x5A4E574B: "ZigBee NWK key",
    0x5A415053: "ZigBee APS key",
    0x6F726163: "OPC UA key log",
}

#: block types Wireshark returns as records (frame numbers) that are not packets
_COUNTED_NOT_PACKETS = frozenset({BT_JOURNAL, BT_CB_COPY, BT_CB_NO_COPY, 0x204, 0x216, 0x221})
#: block types skipped without a row: what they hold is not needed by any table
_SILENT = frozenset({BT_NRB, BT_ISB})


def _block_type_name(btype: int) -> str:
    """What the pcapng registry (and Wireshark) call a block type pcaptools skips, for the
    ``capture.unknown_block_type`` row."""
    if btype in (7, 8):
        return "reserved (IRIG timestamp / ARINC 429)"
    if 0x80000001 <= btype <= 0x80000003:
        return "Darwin process event block"
    if 0x101 <= btype <= 0x10F:
        return "Hone project block"
    if 0x201 <= btype <= 0x2FF:
        return "sysdig event block"
    if btype & 0x80000000:
        return "local use"
    return "not registered"


#: Wireshark's MAX_BLOCK_SIZE: largest packet it accepts plus room for headers and options
MAX_BLOCK_LEN = 32 + 256 * 1024 * 1024 + 131072
_SKIP_CHUNK = 1 << 20


def _describe_bom(raw: bytes) -> str:
    return "0x" + raw.hex()


class PcapngParser:
    """Parses the first Section Header Block at construction, the rest in :meth:`frames`.

    Raises :class:`CaptureFormatError` only for a first Section Header Block that cannot be
    read (cut off, bad byte-order magic, unsupported major version).
    """

    __slots__ = (
        "_ahead",
        "_batch",
        "_batch_buf",
        "_batch_iter",
        "_batch_pos",
        "_batch_start",
        "_bo",
        "_diag",
        "_epb_head",
        "_epb_unpack",
        "_hdr_unpack",
        "_ifaces",
        "_last_ts",
        "_offset",
        "_order_ref",
        "_section",
        "_src",
        "_tail_head",
        "_u32",
        "_unknown_types",
        "frame_count",
        "interfaces",
        "secrets",
    )

    def __init__(
        self,
        src: Source,
        magic: bytes,
        diag: Diagnostics,
        interfaces: list[InterfaceInfo],
        secrets: list[tuple[int, bytes]],
    ) -> None:
        self._src = src
        self._diag = diag
        self.interfaces = interfaces
        self.secrets = secrets
        self.frame_count = 0
        self._section = -1
        self._unknown_types: set[int] = set()
        #: per interface of the current section: (linktype, ns per tick or 0, ticks per second,
        #: offset ns, snaplen, global index, max_packet_len(linktype))
        self._ifaces: list[tuple[int, int, int, int, int, int, int]] = []
        self._bo = "<"
        self._offset = 0
        self._last_ts = 0
        """time of the last frame (a Simple Packet Block's, and the fallback of a time out of
        range; 0 before the first)"""
        self._order_ref = -(1 << 63)
        """time of the last frame, for ``capture.timestamp_out_of_order`` (none before the
        first)"""
        self._ahead = False
        self._batch: list[RawFrame] = []
        """the frames handed out last, from ``_batch_iter``; if they were sliced out of the
        read-ahead block ``_batch_buf`` (else None), the first from ``_batch_pos``, which is
        stream offset ``_batch_start + _batch_pos`` (for :meth:`tell`)"""
        self._batch_iter: Iterator[RawFrame] | None = None
        self._batch_buf: bytes | None = None
        self._batch_pos = 0
        self._batch_start = 0
        head = src.read(8)
        if len(head) < 8:
            raise CaptureFormatError(
                f"the pcapng Section Header Block is cut off after {4 + len(head)} bytes (the "
                "file is truncated)"
            )
        err = self._start_section(magic + head, 0)
        if err is not None:
            raise CaptureFormatError(err[1])
        self._set_order()

    # ------------------------------------------------------------------ sections

    def _start_section(self, first12: bytes, offset: int) -> tuple[bool, str] | None:
        """Read an SHB whose first 12 bytes are given.

        Returns None when the section started, else ``(truncated, message)``.
        """
        bom_raw = first12[8:12]
        (bom,) = struct.unpack("<I", bom_raw)
        if bom == BYTE_ORDER_MAGIC:
            bo = "<"
        elif bom == 0x4D3C2B1A:
            bo = ">"
        else:
            return False, (
                f"pcapng Section Header Block at byte offset {offset} has byte-order magic "
                f"{_describe_bom(bom_raw)}, expected 0x4d3c2b1a or 0x1a2b3c4d"
            )
        (blen,) = struct.unpack_from(bo + "I", first12, 4)
        if blen < 28 or blen % 4 or blen > MAX_BLOCK_LEN:
            return (
                False,
                f"pcapng Section Header Block at byte offset {offset} has an impossible length "
                f"{blen}",
            )
        rest = self._src.read(blen - 12)
        if len(rest) < blen - 12:
            return True, (
                f"the file ends inside the pcapng Section Header Block at byte offset {offset} "
                f"({12 + len(rest)} of {blen} bytes present)"
            )
        major, _minor = struct.unpack_from(bo + "HH", rest, 0)
        (trailer,) = struct.unpack_from(bo + "I", rest, len(rest) - 4)
        if trailer != blen:
            return False, (
                f"pcapng Section Header Block at byte offset {offset}: its trailing length "
                f"{trailer} "
                f"differs from its length {blen}"
            )
        if major != 1:
            return (
                False,
                f"pcapng Section Header Block at byte offset {offset} has version {major}, "
                "expected 1",
            )
        self._bo = bo
        self._section += 1
        self._ifaces = []
        self._offset = offset + blen
        self._check_options(rest, 12, len(rest) - 4, "Section Header Block", offset, None)
        return None

    def _check_options(self, body: bytes, start: int, end: int, what: str, offset: int,
                       frame: int | None) -> None:
        """A ``capture.bad_option`` row if an option in ``body[start:end]`` overruns it."""
        bad = _option_overrun(body, start, end, self._bo)
        if bad is None:
            return
        code, olen, room = bad
        at = f" (frame {frame})" if frame is not None else ""
        self._diag.add(
            "capture.bad_option",
            f"option {code} of the {what} at byte offset {offset}{at} announces {olen} bytes "
            f"but {room} are left in the block; the block was kept without the rest of its "
            "options and reading went on (tshark: 'Not enough data to handle option', the file "
            "appears to be damaged or corrupt, and it stops reading here)",
            frame=frame,
        )

    def _add_interface(self, body: bytes, offset: int) -> bool:
        """Parse an IDB body (without type/length/trailer); False if it is too short."""
        bo = self._bo
        if len(body) < 8:
            self._diag.add(
                "capture.bad_block",
                f"Interface Description Block at byte offset {offset} is too short "
                f"({len(body) + 12} bytes); reading stopped",
            )
            return False
        linktype, _res, snaplen = struct.unpack_from(bo + "HHI", body, 0)
        info = InterfaceInfo(linktype=linktype, snaplen=snaplen, section=self._section)
        tsresol_raw = 6
        for code, value in _options(body, 8, bo):
            if code == 2:
                info.name = value.rstrip(b"\0").decode("utf-8", "replace")
            elif code == 3:
                info.description = value.rstrip(b"\0").decode("utf-8", "replace")
            elif code == 9 and value:
                tsresol_raw = value[0]
            elif code == 14 and len(value) >= 8:
                (info.tsoffset,) = struct.unpack_from(bo + "q", value)
            elif code == 13 and value:
                info.fcs_len = value[0]
        self._check_options(body, 8, len(body), "Interface Description Block", offset, None)
        tps = (1 << (tsresol_raw & 0x7F)) if tsresol_raw & 0x80 else 10**tsresol_raw
        info.tsresol = tps
        ns_per_tick = (
            1_000_000_000 // tps if tps <= 1_000_000_000 and 1_000_000_000 % tps == 0 else 0
        )
        self._ifaces.append(
            (
                linktype,
                ns_per_tick,
                tps,
                info.tsoffset * 1_000_000_000,
                snaplen,
                len(self.interfaces),
                max_packet_len(linktype),
            )
        )
        self.interfaces.append(info)
        return True

    # ------------------------------------------------------------------ blocks

    def _set_order(self) -> None:
        """The unpackers of the current section's byte order (``_bo``)."""
        bo = self._bo
        self._hdr_unpack = struct.Struct(bo + "II").unpack
        self._epb_unpack = struct.Struct(bo + "IIIII").unpack_from
        self._epb_head = struct.Struct(bo + "IIIIIII").unpack_from  # type, length, EPB fields
        self._tail_head = struct.Struct(bo + "IIIIIIII").unpack_from  # a trailer, the next head
        self._u32 = struct.Struct(bo + "I").unpack_from

    def frames(self) -> Iterator[RawFrame]:
        """Every packet block as a RawFrame, in file order (see the module doc for the rest).

        The frames are handed out in batches (:meth:`_next_batch`): an uncompressed capture is
        read ahead in blocks (``open._Stream.read_ahead``) and the packet blocks that lie whole
        in the block and need no row are sliced out of it together; every other block (and a
        packet block that crosses the end of the block, needs a row or comes from a compressed
        stream) is read through ``read()`` by :meth:`_block`, which checks and reports
        everything. A batch ends at the first block that is not such a packet block and is made
        only once every frame of the one before has been taken, so a Decryption Secrets Block
        is in ``secrets``, and every row is added, at the same point of the consumer's work as
        when blocks were read one at a time. ``CaptureReader.bytes_read`` stays the end of the
        block of the frame taken (:meth:`tell`). (``benchmarks/PROFILE.md``, 2026-12-06: the
        compiled build slices with C integers.)
        """
        src: Any = self._src  # read_ahead: see open._Stream (absent from other sources)
        self._ahead = hasattr(src, "read_ahead") and src.read_ahead()
        return chain.from_iterable(iter(self._next_batch, None))

    def tell(self) -> int:
        """Bytes of a read-ahead stream up to the end of the block of the last frame handed
        out (or of what was read after it, once reading ended): what ``tell()`` of a stream
        read one block at a time says (``CaptureReader.bytes_read``). Only for a read-ahead
        stream (``open._Stream.read_ahead``)."""
        src: Any = self._src
        it = self._batch_iter
        buf = self._batch_buf
        if it is None or buf is None:  # (a frame read on its own, or the end)
            return int(src.tell())
        taken = len(self._batch) - length_hint(it)
        pos = self._batch_pos
        u32 = self._u32
        for _ in range(taken):
            pos += u32(buf, pos + 4)[0]
        return int(self._batch_start) + pos

    def _next_batch(self) -> Iterator[RawFrame] | None:
        """The frames to hand out next; None once reading has ended (``frames()`` calls it
        again only when every frame it returned has been taken).

        From the read-ahead block: every whole Enhanced, Simple or obsolete Packet Block up to
        the first block that is not one, needs a row or another read. Otherwise one block
        through :meth:`_block`: its frame alone, or, for a block that gives none (an interface,
        secrets, a skipped block), the same again from the block after it."""
        while True:
            if self._ahead:
                src: Any = self._src
                buf: bytes = src.buf
                pos: int = src.pos
                start = pos
                out: list[RawFrame] = []
                ifaces = self._ifaces
                n_ifaces = len(ifaces)
                head = self._epb_head
                tail_head = self._tail_head
                u32 = self._u32
                bo = self._bo
                frame = self.frame_count
                last_ts = self._last_ts
                ref = self._order_ref
                cur = -1  # the interface whose fields follow (the last packet's)
                linktype = ns_per_tick = tps = off_ns = snaplen = gidx = maxlen = 0
                hi_max = off_c = 0
                last_head = len(buf) - 28
                got_head = False  # (the header at pos was unpacked with the trailer before it)
                nbtype = nblen = niface = nhi = nlo = ncap = norig = 0
                p = buf
                le = bo == "<"
                while pos <= last_head:
                    if _COMPILED:  # (C reads of the block header: no tuple, no int objects)
                        btype = _u32(p, pos, le)
                        blen = _u32(p, pos + 4, le)
                        iface_id = _u32(p, pos + 8, le)
                        hi = _u32(p, pos + 12, le)
                        lo = _u32(p, pos + 16, le)
                        caplen = _u32(p, pos + 20, le)
                        orig = _u32(p, pos + 24, le)
                    elif got_head:
                        btype, blen, iface_id, hi = nbtype, nblen, niface, nhi
                        lo, caplen, orig = nlo, ncap, norig
                    else:
                        btype, blen, iface_id, hi, lo, caplen, orig = head(buf, pos)
                    end = pos + blen
                    if blen < 16 or blen & 3 or blen > MAX_BLOCK_LEN or end > last_head + 28:
                        break
                    if _COMPILED:
                        trailer = _u32(p, end - 4, le)
                    elif end <= last_head:  # the trailer and the next block's header at once
                        trailer, nbtype, nblen, niface, nhi, nlo, ncap, norig = tail_head(
                            buf, end - 4)
                        got_head = True
                    else:
                        trailer = u32(buf, end - 4)[0]
                    if trailer != blen:
                        break
                    if btype == BT_SPB:  # (iface_id is its original length)
                        if not n_ifaces:
                            break
                        if cur != 0:
                            linktype, _n, _t, _o, snaplen, gidx, _max = ifaces[0]
                            cur = -1  # (the timestamp fields were not read)
                        caplen = iface_id if not snaplen or iface_id < snaplen else snaplen
                        if caplen > blen - 16:
                            break
                        frame += 1
                        out.append(RawFrame(frame, last_ts, linktype,
                                            buf[pos + 12 : pos + 12 + caplen], iface_id, gidx))
                        ref = last_ts
                        pos = end
                        continue
                    if btype == BT_PB:  # 16-bit interface id, 16-bit drops count
                        iface_id = (iface_id >> 16) if bo == ">" else (iface_id & 0xFFFF)
                    elif btype != BT_EPB:
                        break
                    if blen < 32 or caplen > blen - 32:
                        break
                    if iface_id != cur:
                        if iface_id >= n_ifaces:
                            break
                        linktype, ns_per_tick, tps, off_ns, snaplen, gidx, maxlen = ifaces[
                            iface_id]
                        hi_max, off_c = _fast_ts(ns_per_tick, off_ns)
                        cur = iface_id
                    if caplen > maxlen:
                        break
                    opts = pos + 28 + ((caplen + 3) & ~3)
                    if opts < end - 4 and _option_overrun(buf, opts, end - 4, bo) is not None:
                        break  # (_block reports it)
                    if hi <= hi_max:  # (C integers: no overflow, see _fast_ts)
                        ts = ((hi << 32) | lo) * ns_per_tick + off_c
                    else:
                        big = _ticks_ns(hi, lo, ns_per_tick, tps, off_ns)
                        if not TS_MIN_NS <= big <= TS_MAX_NS:
                            break  # (_block reports it)
                        ts = big
                    if ts < ref:
                        break  # (_block reports it)
                    frame += 1
                    last_ts = ref = ts
                    out.append(RawFrame(frame, ts, linktype, buf[pos + 28 : pos + 28 + caplen],
                                        orig, gidx))
                    pos = end
                if out:
                    self._offset += pos - start
                    src.pos = pos
                    self.frame_count = frame
                    self._last_ts = last_ts
                    self._order_ref = ref
                    self._batch = out
                    self._batch_buf = buf
                    self._batch_pos = start
                    self._batch_start = src.total
                    self._batch_iter = it = iter(out)
                    return it
            got = self._block()
            if isinstance(got, bool):
                if got:
                    continue
                self._batch_iter = None
                return None
            self._batch = [got]
            self._batch_buf = None
            self._batch_iter = it = iter(self._batch)
            return it

    def _truncated(self, what: str, got: int, need: int, is_packet: bool) -> None:
        if self._src.stopped:
            return
        frame = self.frame_count
        self._diag.add(
            "capture.truncated_record",
            f"the file ends inside {what} at byte offset {self._offset} ({got} of {need} bytes "
            "present)" + (f"; it would have been frame {frame + 1}" if is_packet else ""),
            frame=frame + 1 if is_packet else None,
        )

    def _block(self) -> RawFrame | bool:
        """Read the next block through ``read()``: its frame, True when it gives none (a
        block that is not a packet, or a packet that is skipped), False when reading ends (at
        the end of the data, or with a row)."""
        try:
            return self._read_block()
        except OSError as exc:
            read_failed(self._diag, exc, self.frame_count, self._offset)
            return False

    def _read_block(self) -> RawFrame | bool:
        """:meth:`_block` without the read errors."""
        read = self._src.read
        diag = self._diag
        frame = self.frame_count
        offset = self._offset
        bo = self._bo
        hdr_unpack = self._hdr_unpack
        ifaces = self._ifaces
        truncated = self._truncated

        head = read(8)
        if len(head) < 8:
            if head:
                known = len(head) >= 4 and struct.unpack_from(bo + "I", head)[0] in (
                    BT_EPB,
                    BT_SPB,
                    BT_PB,
                )
                truncated("a block header", len(head), 8, known)
            return False
        btype, blen = hdr_unpack(head)

        if btype == BT_SHB:
            more = read(4)
            if len(more) < 4:
                truncated("a Section Header Block", 8 + len(more), 28, False)
                return False
            err = self._start_section(head + more, offset)
            if err is not None:
                if not err[0]:
                    diag.add("capture.bad_block", err[1] + "; reading stopped")
                elif not self._src.stopped:
                    diag.add("capture.truncated_record", err[1])
                return False
            self._set_order()
            return True

        if blen < 12 or blen % 4 or blen > MAX_BLOCK_LEN:
            diag.add(
                "capture.bad_block",
                f"block of type 0x{btype:08x} at byte offset {offset} has an impossible "
                "length "
                f"{blen}; reading stopped",
            )
            return False

        is_packet = btype in (BT_EPB, BT_SPB, BT_PB)
        if not is_packet and btype != BT_IDB and btype != BT_DSB:
            # not parsed: skip the body without holding it in memory, check the trailer
            if not self._skip(blen - 12):
                truncated(f"a block of type 0x{btype:08x}", 8, blen, False)
                return False
            tr = read(4)
            if len(tr) < 4:
                truncated(f"a block of type 0x{btype:08x}", blen - 4 + len(tr), blen, False)
                return False
            if hdr_unpack(head[:4] + tr)[1] != blen:
                diag.add(
                    "capture.bad_block",
                    f"block of type 0x{btype:08x} at byte offset {offset}: trailing length "
                    f"{hdr_unpack(head[:4] + tr)[1]} differs from its length {blen}; "
                    "reading stopped",
                )
                return False
            if btype in _COUNTED_NOT_PACKETS:
                self.frame_count = frame + 1
            elif btype not in _SILENT and btype not in self._unknown_types:
                self._unknown_types.add(btype)
                diag.add(
                    "capture.unknown_block_type",
                    f"pcapng block type 0x{btype:08x} ({_block_type_name(btype)}; first "
                    f"at byte offset {offset}) is not read by pcaptools; blocks of this "
                    "type were skipped",
                )
            self._offset = offset + blen
            return True

        body = read(blen - 8)
        if len(body) < blen - 8:
            what = {
                BT_EPB: "an Enhanced Packet Block",
                BT_SPB: "a Simple Packet Block",
                BT_PB: "a Packet Block",
                BT_IDB: "an Interface Description Block",
                BT_DSB: "a Decryption Secrets Block",
            }[btype]
            truncated(what, 8 + len(body), blen, is_packet)
            return False
        (trailer,) = struct.unpack_from(bo + "I", body, blen - 12)
        if trailer != blen:
            diag.add(
                "capture.bad_block",
                f"block of type 0x{btype:08x} at byte offset {offset}: trailing length "
                f"{trailer} "
                f"differs from its length {blen}; reading stopped",
            )
            return False

        last_ts = self._last_ts
        if btype in (BT_EPB, BT_PB):
            if blen < 32:
                diag.add(
                    "capture.bad_block",
                    f"packet block at byte offset {offset} is too short ({blen} bytes); "
                    "reading stopped",
                )
                return False
            if btype == BT_EPB:
                iface_id, hi, lo, caplen, orig = self._epb_unpack(body, 0)
            else:
                iface_id, _drops, hi, lo, caplen, orig = struct.unpack_from(
                    bo + "HHIIII", body, 0
                )
            if caplen > blen - 32:
                diag.add(
                    "capture.bad_record_length",
                    f"packet block at byte offset {offset} (frame {frame + 1}) announces "
                    f"{caplen} "
                    f"captured bytes but the block has room for {blen - 32}; reading "
                    "stopped",
                    frame=frame + 1,
                )
                return False
            if iface_id >= len(ifaces):
                frame += 1
                self.frame_count = frame
                diag.add(
                    "capture.unknown_interface",
                    f"frame {frame} (byte offset {offset}) refers to interface {iface_id} "
                    "but section "
                    f"{self._section} defines {len(ifaces)}; the packet was skipped "
                    "(Wireshark stops "
                    "reading here)",
                    frame=frame,
                )
                self._offset = offset + blen
                return True
            linktype, ns_per_tick, tps, off_ns, _snap, gidx, _max = ifaces[iface_id]
            if caplen > max_packet_len(linktype):
                diag.add(
                    "capture.bad_record_length",
                    f"packet block at byte offset {offset} (frame {frame + 1}) announces "
                    f"{caplen} "
                    f"captured bytes, more than the {max_packet_len(linktype)} allowed for "
                    f"{linktype_name(linktype)}; reading stopped",
                    frame=frame + 1,
                )
                return False
            frame += 1
            self.frame_count = frame
            ts = _block_ts(hi, lo, ns_per_tick, tps, off_ns, last_ts, frame, diag)
            data = body[20 : 20 + caplen]  # (both: 20 bytes of fields, then data)
            opts = 20 + ((caplen + 3) & ~3)
            if opts < blen - 12:
                self._check_options(
                    body, opts, blen - 12,
                    "Enhanced Packet Block" if btype == BT_EPB else "Packet Block",
                    offset, frame)
        elif btype == BT_SPB:
            if blen < 16:
                diag.add(
                    "capture.bad_block",
                    f"Simple Packet Block at byte offset {offset} is too short; reading "
                    "stopped",
                )
                return False
            if not ifaces:
                frame += 1
                self.frame_count = frame
                diag.add(
                    "capture.unknown_interface",
                    f"frame {frame} (Simple Packet Block at byte offset {offset}) comes "
                    "before any "
                    "Interface Description Block of its section; the packet was skipped "
                    "(Wireshark stops reading here)",
                    frame=frame,
                )
                self._offset = offset + blen
                return True
            (orig,) = struct.unpack_from(bo + "I", body, 0)
            linktype, _n, _t, _o, snaplen, gidx, _max = ifaces[0]
            caplen = min(orig, snaplen) if snaplen else orig
            if caplen > blen - 16:
                diag.add(
                    "capture.bad_record_length",
                    f"Simple Packet Block at byte offset {offset} (frame {frame + 1}) "
                    "announces "
                    f"{caplen} bytes but the block has room for {blen - 16}; reading "
                    "stopped",
                    frame=frame + 1,
                )
                return False
            frame += 1
            self.frame_count = frame
            ts = last_ts
            data = body[4 : 4 + caplen]
        elif btype == BT_IDB:
            if not self._add_interface(body[:-4], offset):
                return False
            self._offset = offset + blen
            return True
        else:  # BT_DSB
            self._add_secrets(body[:-4], offset)
            self._offset = offset + blen
            return True

        if ts < self._order_ref:
            diag.add(
                "capture.timestamp_out_of_order",
                f"frame {frame} is {(self._order_ref - ts) / 1e9:.6f} s earlier than the "
                "frame before it",
                frame=frame,
                ts_ns=ts,
            )
        self._order_ref = self._last_ts = ts
        self._offset = offset + blen
        return RawFrame(frame, ts, linktype, data, orig, gidx)

    def _skip(self, n: int) -> bool:
        """Discard n bytes, a chunk at a time; False if the data ends first."""
        read = self._src.read
        while n > 0:
            k = min(n, _SKIP_CHUNK)
            if len(read(k)) < k:
                return False
            n -= k
        return True

    def _add_secrets(self, body: bytes, offset: int) -> None:
        if len(body) < 8:
            self._diag.add(
                "capture.bad_block",
                f"Decryption Secrets Block at byte offset {offset} is too short; skipped",
            )
            return
        stype, slen = struct.unpack_from(self._bo + "II", body, 0)
        if slen > len(body) - 8:
            self._diag.add(
                "capture.bad_block",
                f"Decryption Secrets Block at byte offset {offset} announces {slen} bytes of "
                "secrets but holds "
                f"{len(body) - 8}; skipped",
            )
            return
        self.secrets.append((stype, body[8 : 8 + slen]))
        self._check_options(body, 8 + ((slen + 3) & ~3), len(body), "Decryption Secrets Block",
                            offset, None)
        if stype != SECRETS_TLS_KEYLOG:
            name = SECRETS_TYPE_NAMES.get(stype, "unknown type")
            self._diag.add(
                "capture.secrets_unsupported",
                f"Decryption Secrets Block at byte offset {offset} holds secrets of type "
                f"0x{stype:08x} ({name})",
            )


def _options(body: bytes, start: int, bo: str) -> Iterator[tuple[int, bytes]]:
    """(code, value) of each option from ``start`` to the end of ``body``; stops at opt_endofopt
    or at an option that does not fit (malformed options are ignored, not reported)."""
    end = len(body)
    off = start
    fmt = bo + "HH"
    while off + 4 <= end:
        code, olen = struct.unpack_from(fmt, body, off)
        if code == 0 or off + 4 + olen > end:
            return
        yield code, body[off + 4 : off + 4 + olen]
        off += 4 + olen + (-olen % 4)


def _option_overrun(body: bytes, start: int, end: int, bo: str) -> tuple[int, int, int] | None:
    """``(code, announced length, bytes left)`` of the first option in ``body[start:end]``
    whose value (with its padding) does not fit before ``end``, as tshark 4.0 checks
    ("Not enough data to handle option of length N"); None when every option fits, up to
    opt_endofopt or the end. Fewer than 4 bytes left over is not an error (tshark agrees)."""
    off = start
    fmt = bo + "HH"
    while off + 4 <= end:
        code, olen = struct.unpack_from(fmt, body, off)
        if code == 0:
            return None
        room = end - off - 4
        if olen + (-olen % 4) > room:
            return code, olen, room
        off += 4 + olen + (-olen % 4)
    return None


TS_MAX_NS = (1 << 63) - 1
"""the latest time an int64 of nanoseconds holds (2262-04-11): what every table stores"""
TS_MIN_NS = -(1 << 63)


def _ticks_ns(hi: int, lo: int, ns_per_tick: int, tps: int, off_ns: int) -> int:
    """The time of a packet block in ns since the epoch, however large: its 64-bit tick count
    (``hi``, ``lo``) in the interface's resolution (``ns_per_tick``, or ``tps`` ticks per
    second when a tick is not a whole number of ns) plus its ``if_tsoffset`` (``off_ns``)."""
    ticks = (hi << 32) | lo
    if ns_per_tick:
        return ticks * ns_per_tick + off_ns
    q, r = divmod(ticks, tps)
    return q * 1_000_000_000 + r * 1_000_000_000 // tps + off_ns


_FAST_TS_BOUND = 1 << 62


def _fast_ts(ns_per_tick: int, off_ns: int) -> tuple[int, int]:
    """``(hi_max, off_ns)`` for an interface whose packet times ``_next_batch`` may compute in
    64-bit C integers: a block whose high tick word is at most ``hi_max`` has fewer than
    ``2**62 // ns_per_tick`` ticks, so its time (ticks times ``ns_per_tick``, plus an offset
    below ``2**62``) stays inside int64. ``(-1, 0)`` (never) when a tick is not a whole number
    of ns or the offset is that large: those times go through :func:`_ticks_ns`."""
    if not ns_per_tick or not -_FAST_TS_BOUND < off_ns < _FAST_TS_BOUND:
        return -1, 0
    return ((_FAST_TS_BOUND // ns_per_tick) >> 32) - 1, off_ns


def _block_ts(hi: int, lo: int, ns_per_tick: int, tps: int, off_ns: int, last_ts: int,
              frame: int, diag: Diagnostics) -> int:
    """The time of a packet block (:func:`_ticks_ns`). Outside int64 nanoseconds: the
    previous frame's time, with a row (:func:`_ts_out_of_range`)."""
    ts = _ticks_ns(hi, lo, ns_per_tick, tps, off_ns)
    if not TS_MIN_NS <= ts <= TS_MAX_NS:
        return _ts_out_of_range(ts, last_ts, frame, diag)
    return ts


def _ts_out_of_range(ts: int, last_ts: int, frame: int, diag: Diagnostics) -> int:
    """A packet time outside int64 nanoseconds (a huge timestamp, if_tsresol or if_tsoffset):
    the frame gets the previous frame's time (0, the epoch, for the first) and a
    ``capture.timestamp_out_of_range`` row says what the block said."""
    diag.add(
        "capture.timestamp_out_of_range",
        f"frame {frame}: timestamp {ts / 1e9:.9g} s since the epoch is outside what nanoseconds "
        f"in 64 bits hold (years 1677-2262); the frame gets the previous frame's time",
        frame=frame, ts_ns=last_ts,
    )
    return last_ts
