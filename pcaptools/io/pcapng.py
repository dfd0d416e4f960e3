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
from typing import Any

from ..diagnostics import Diagnostics
from ..errors import CaptureFormatError
from .frame import RawFrame
from .linktypes import InterfaceInfo, linktype_name, max_packet_len
from .pcap import Source, read_failed

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
        "_bo",
        "_diag",
        "_ifaces",
        "_offset",
        "_section",
        "_src",
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
        head = src.read(8)
        if len(head) < 8:
            raise CaptureFormatError(
                f"the pcapng Section Header Block is cut off after {4 + len(head)} bytes (the "
                "file is truncated)"
            )
        err = self._start_section(magic + head, 0)
        if err is not None:
            raise CaptureFormatError(err[1])

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

    def frames(self) -> Iterator[RawFrame]:
        """Yield every packet block as a RawFrame, in file order.

        Enhanced Packet Blocks that lie whole inside the source's read-ahead block
        (``src.buf``, see ``open._Stream``) and need no row other than an out-of-order
        timestamp are sliced out of it directly; every other block, and any EPB the fast
        path is unsure of, goes through the general loop (``read()``), which checks and
        reports exactly as before.
        """
        src: Any = self._src  # buf/pos/read_ahead: see open._Stream (absent from other sources)
        peek = hasattr(src, "read_ahead") and src.read_ahead()
        read = src.read
        diag = self._diag
        frame = 0
        last_ts = 0
        out_of_order_ref = -(1 << 63)
        offset = self._offset
        bo = self._bo
        hdr_unpack = struct.Struct(bo + "II").unpack
        epb_unpack = struct.Struct(bo + "IIIII").unpack_from
        epb_head = struct.Struct(bo + "IIIIIII").unpack_from  # type, length and the EPB fields
        u32 = struct.Struct(bo + "I").unpack_from
        ifaces = self._ifaces

        def truncated(what: str, got: int, need: int, is_packet: bool) -> None:
            if self._src.stopped:
                return
            diag.add(
                "capture.truncated_record",
                f"the file ends inside {what} at byte offset {offset} ({got} of {need} bytes "
                "present)" + (f"; it would have been frame {frame + 1}" if is_packet else ""),
                frame=frame + 1 if is_packet else None,
            )

        try:
            while True:
                if peek:
                    # fast path: Enhanced Packet Blocks whole inside the read-ahead block
                    buf: bytes = src.buf
                    pos: int = src.pos
                    last_head = len(buf) - 28
                    while pos <= last_head:
                        btype, blen, iface_id, hi, lo, caplen, orig = epb_head(buf, pos)
                        end = pos + blen
                        if (
                            btype != BT_EPB
                            or blen < 32
                            or blen & 3
                            or blen > MAX_BLOCK_LEN
                            or end > last_head + 28
                            or caplen > blen - 32
                            or iface_id >= len(ifaces)
                            or u32(buf, end - 4)[0] != blen
                        ):
                            break
                        linktype, ns_per_tick, tps, off_ns, _snap, gidx, maxlen = ifaces[iface_id]
                        if caplen > maxlen:
                            break
                        opts = pos + 28 + ((caplen + 3) & ~3)
                        if opts < end - 4 and _option_overrun(buf, opts, end - 4, bo) is not None:
                            break  # the general loop reports it
                        frame += 1
                        ts = _block_ts(hi, lo, ns_per_tick, tps, off_ns, last_ts, frame, diag)
                        if ts < out_of_order_ref:
                            diag.add(
                                "capture.timestamp_out_of_order",
                                f"frame {frame} is {(out_of_order_ref - ts) / 1e9:.6f} s earlier "
                                "than the frame before it",
                                frame=frame,
                                ts_ns=ts,
                            )
                        out_of_order_ref = last_ts = ts
                        src.pos = end
                        offset += blen
                        yield RawFrame(frame, ts, linktype, buf[pos + 28 : pos + 28 + caplen], orig,
                                       gidx)
                        pos = end
                head = read(8)
                if len(head) < 8:
                    if head:
                        known = len(head) >= 4 and struct.unpack_from(bo + "I", head)[0] in (
                            BT_EPB,
                            BT_SPB,
                            BT_PB,
                        )
                        truncated("a block header", len(head), 8, known)
                    return
                btype, blen = hdr_unpack(head)

                if btype == BT_SHB:
                    more = read(4)
                    if len(more) < 4:
                        truncated("a Section Header Block", 8 + len(more), 28, False)
                        return
                    err = self._start_section(head + more, offset)
                    if err is not None:
                        if not err[0]:
                            diag.add("capture.bad_block", err[1] + "; reading stopped")
                        elif not self._src.stopped:
                            diag.add("capture.truncated_record", err[1])
                        return
                    offset = self._offset
                    bo = self._bo
                    hdr_unpack = struct.Struct(bo + "II").unpack
                    epb_unpack = struct.Struct(bo + "IIIII").unpack_from
                    epb_head = struct.Struct(bo + "IIIIIII").unpack_from
                    u32 = struct.Struct(bo + "I").unpack_from
                    ifaces = self._ifaces
                    continue

                if blen < 12 or blen % 4 or blen > MAX_BLOCK_LEN:
                    diag.add(
                        "capture.bad_block",
                        f"block of type 0x{btype:08x} at byte offset {offset} has an impossible "
                        "length "
                        f"{blen}; reading stopped",
                    )
                    return

                is_packet = btype in (BT_EPB, BT_SPB, BT_PB)
                if not is_packet and btype != BT_IDB and btype != BT_DSB:
                    # not parsed: skip the body without holding it in memory, check the trailer
                    if not self._skip(blen - 12):
                        truncated(f"a block of type 0x{btype:08x}", 8, blen, False)
                        return
                    tr = read(4)
                    if len(tr) < 4:
                        truncated(f"a block of type 0x{btype:08x}", blen - 4 + len(tr), blen, False)
                        return
                    if hdr_unpack(head[:4] + tr)[1] != blen:
                        diag.add(
                            "capture.bad_block",
                            f"block of type 0x{btype:08x} at byte offset {offset}: trailing length "
                            f"{hdr_unpack(head[:4] + tr)[1]} differs from its length {blen}; "
                            "reading stopped",
                        )
                        return
                    if btype in _COUNTED_NOT_PACKETS:
                        frame += 1
                    elif btype not in _SILENT and btype not in self._unknown_types:
                        self._unknown_types.add(btype)
                        diag.add(
                            "capture.unknown_block_type",
                            f"pcapng block type 0x{btype:08x} ({_block_type_name(btype)}; first "
                            f"at byte offset {offset}) is not read by pcaptools; blocks of this "
                            "type were skipped",
                        )
                    offset += blen
                    continue

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
                    return
                (trailer,) = struct.unpack_from(bo + "I", body, blen - 12)
                if trailer != blen:
                    diag.add(
                        "capture.bad_block",
                        f"block of type 0x{btype:08x} at byte offset {offset}: trailing length "
                        f"{trailer} "
                        f"differs from its length {blen}; reading stopped",
                    )
                    return

                if btype in (BT_EPB, BT_PB):
                    if blen < 32:
                        diag.add(
                            "capture.bad_block",
                            f"packet block at byte offset {offset} is too short ({blen} bytes); "
                            "reading stopped",
                        )
                        return
                    if btype == BT_EPB:
                        iface_id, hi, lo, caplen, orig = epb_unpack(body, 0)
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
                        return
                    if iface_id >= len(ifaces):
                        frame += 1
                        diag.add(
                            "capture.unknown_interface",
                            f"frame {frame} (byte offset {offset}) refers to interface {iface_id} "
                            "but section "
                            f"{self._section} defines {len(ifaces)}; the packet was skipped "
                            "(Wireshark stops "
                            "reading here)",
                            frame=frame,
                        )
                        offset += blen
                        continue
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
                        return
                    frame += 1
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
                        return
                    if not ifaces:
                        frame += 1
                        diag.add(
                            "capture.unknown_interface",
                            f"frame {frame} (Simple Packet Block at byte offset {offset}) comes "
                            "before any "
                            "Interface Description Block of its section; the packet was skipped "
                            "(Wireshark stops reading here)",
                            frame=frame,
                        )
                        offset += blen
                        continue
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
                        return
                    frame += 1
                    ts = last_ts
                    data = body[4 : 4 + caplen]
                elif btype == BT_IDB:
                    if not self._add_interface(body[:-4], offset):
                        return
                    offset += blen
                    continue
                else:  # BT_DSB
                    self._add_secrets(body[:-4], offset)
                    offset += blen
                    continue

                if ts < out_of_order_ref:
                    diag.add(
                        "capture.timestamp_out_of_order",
                        f"frame {frame} is {(out_of_order_ref - ts) / 1e9:.6f} s earlier than the "
                        "frame before it",
                        frame=frame,
                        ts_ns=ts,
                    )
                out_of_order_ref = ts
                last_ts = ts
                yield RawFrame(frame, ts, linktype, data, orig, gidx)
                offset += blen
        except OSError as exc:
            read_failed(diag, exc, frame, offset)
        finally:
            self.frame_count = frame

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


def _block_ts(hi: int, lo: int, ns_per_tick: int, tps: int, off_ns: int, last_ts: int,
              frame: int, diag: Diagnostics) -> int:
    """The time of a packet block in ns since the epoch: its 64-bit tick count (``hi``,
    ``lo``) in the interface's resolution (``ns_per_tick``, or ``tps`` ticks per second when a
    tick is not a whole number of ns) plus its ``if_tsoffset`` (``off_ns``). Outside int64
    nanoseconds: the previous frame's time, with a row (:func:`_ts_out_of_range`)."""
    ticks = (hi << 32) | lo
    if ns_per_tick:
        ts = ticks * ns_per_tick + off_ns
    else:
        q, r = divmod(ticks, tps)
        ts = q * 1_000_000_000 + r * 1_000_000_000 // tps + off_ns
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
