"""The pcapng reader slices packet blocks out of read-ahead blocks and hands them out in
batches (``PcapngParser._next_batch``): it must give exactly what the generator it replaced
gave. That generator is kept below (``_reference``, verbatim but for taking the parser as an
argument) and both read the same bytes through ``open_capture``:

* every ``RawFrame`` (number, time, link type, bytes, original length, interface),
  ``frame_count``;
* every Diagnostics row (code, frame, time, text with its byte offset) and the point at which
  it was added (how many rows there were when each frame was handed out);
* ``reader.secrets`` (the Decryption Secrets Blocks) and how many there were when each frame
  was handed out (``pipeline._read`` hands the key log of a DSB to the TLS layer before the
  frame after it);
* ``bytes_read`` after every frame (the end of its block, as a stream read one block at a time
  says) and at the end.

Block sizes are forced small (``open._BLOCK``) so that blocks cross block edges: 0 (every read
asks for exactly what it needs: nothing is sliced), 1, sizes below one packet block (every
block crosses an edge), and sizes of a few blocks. The reference reads at the default size.
"""

from __future__ import annotations

import gzip
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from conftest import CAPTURES, corpus_files, shipped_captures
from helpers import (
    TLS_KEYLOG,
    DiskFailsAt,
    Trickle,
    custom_block,
    dsb,
    epb,
    idb,
    isb,
    nrb,
    opb,
    shb,
    spb,
    write,
)
from helpers import block as raw_block

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import RawFrame, open_capture
from pcaptools.io import open as io_open
from pcaptools.io.linktypes import linktype_name, max_packet_len
from pcaptools.io.pcap import read_failed
from pcaptools.io.pcapng import (
    _COUNTED_NOT_PACKETS,
    _SILENT,
    BT_DSB,
    BT_EPB,
    BT_IDB,
    BT_PB,
    BT_SHB,
    BT_SPB,
    MAX_BLOCK_LEN,
    TS_MAX_NS,
    TS_MIN_NS,
    PcapngParser,
    _block_type_name,
    _fast_ts,
    _option_overrun,
    _ts_out_of_range,
)

PCAPNGS = [p for p in shipped_captures() if p.name.endswith(".pcapng")] + corpus_files(
    "*.pcapng")
BLOCKS = [0, 1, 7, 29, 61, 100, 1000, 4096, 1 << 16]


def _ref_block_ts(hi: int, lo: int, ns_per_tick: int, tps: int, off_ns: int, last_ts: int,
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




def _reference(parser: PcapngParser) -> Iterator[RawFrame]:
    """``PcapngParser.frames`` as it was before the batches (main at 64671b7): one
    generator; Enhanced Packet Blocks whole in the read-ahead block sliced out one at a time,
    every other block read through ``read()``."""
    p: Any = parser
    src: Any = p._src  # buf/pos/read_ahead: see open._Stream (absent from other sources)
    peek = hasattr(src, "read_ahead") and src.read_ahead()
    read = src.read
    diag = p._diag
    frame = 0
    last_ts = 0
    out_of_order_ref = -(1 << 63)
    offset = p._offset
    bo = p._bo
    hdr_unpack = struct.Struct(bo + "II").unpack
    epb_unpack = struct.Struct(bo + "IIIII").unpack_from
    epb_head = struct.Struct(bo + "IIIIIII").unpack_from  # type, length and the EPB fields
    u32 = struct.Struct(bo + "I").unpack_from
    ifaces = p._ifaces

    def truncated(what: str, got: int, need: int, is_packet: bool) -> None:
        if p._src.stopped:
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
                    ts = _ref_block_ts(hi, lo, ns_per_tick, tps, off_ns, last_ts, frame, diag)
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
                err = p._start_section(head + more, offset)
                if err is not None:
                    if not err[0]:
                        diag.add("capture.bad_block", err[1] + "; reading stopped")
                    elif not p._src.stopped:
                        diag.add("capture.truncated_record", err[1])
                    return
                offset = p._offset
                bo = p._bo
                hdr_unpack = struct.Struct(bo + "II").unpack
                epb_unpack = struct.Struct(bo + "IIIII").unpack_from
                epb_head = struct.Struct(bo + "IIIIIII").unpack_from
                u32 = struct.Struct(bo + "I").unpack_from
                ifaces = p._ifaces
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
                if not p._skip(blen - 12):
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
                elif btype not in _SILENT and btype not in p._unknown_types:
                    p._unknown_types.add(btype)
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
                        f"{p._section} defines {len(ifaces)}; the packet was skipped "
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
                ts = _ref_block_ts(hi, lo, ns_per_tick, tps, off_ns, last_ts, frame, diag)
                data = body[20 : 20 + caplen]  # (both: 20 bytes of fields, then data)
                opts = 20 + ((caplen + 3) & ~3)
                if opts < blen - 12:
                    p._check_options(
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
                if not p._add_interface(body[:-4], offset):
                    return
                offset += blen
                continue
            else:  # BT_DSB
                p._add_secrets(body[:-4], offset)
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
        p.frame_count = frame


Rows = list[tuple[str, int | None, int | None, str]]


class Read:
    """What one reading of a capture gave (compared whole with ``==``)."""

    def __init__(self, frames: list[RawFrame], rows: Rows, rows_at: list[int],
                 secrets: list[tuple[int, bytes]], secrets_at: list[int], progress: list[int],
                 frame_count: int) -> None:
        self.frames, self.rows, self.rows_at = frames, rows, rows_at
        self.secrets, self.secrets_at = secrets, secrets_at
        self.progress, self.frame_count = progress, frame_count

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Read) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return (f"Read({len(self.frames)} frames, rows={self.rows}, rows_at={self.rows_at}, "
                f"secrets_at={self.secrets_at}, progress={self.progress[-3:]}, "
                f"frame_count={self.frame_count})")


def _read(source: Any, reference: bool, block: int = io_open._BLOCK,
          monkeypatch: pytest.MonkeyPatch | None = None, **kw: Any) -> Read:
    """Read ``source`` (a path, or a factory of a fresh file object) with the reference or
    with ``frames()`` at ``block``."""
    if monkeypatch is not None:
        monkeypatch.setattr(io_open, "_BLOCK", block)
    diag = Diagnostics()
    src = source() if callable(source) else source
    with open_capture(src, diag, **kw) as r:
        assert r.format == "pcapng"
        frames, rows_at, secrets_at, progress = [], [], [], []
        it = _reference(r._parser) if reference else r.frames()  # type: ignore[arg-type]
        for f in it:
            frames.append(f)
            rows_at.append(len(diag.rows))
            secrets_at.append(len(r.secrets))
            progress.append(r.bytes_read)
        progress.append(r.bytes_read)
        count = r.frame_count
        secrets = list(r.secrets)
    rows = [(a.code, a.frame, a.ts_ns, a.detail) for a in diag.rows]
    return Read(frames, rows, rows_at, secrets, secrets_at, progress, count)


def _same_at_every_block(source: Any, monkeypatch: pytest.MonkeyPatch,
                         blocks: list[int] = BLOCKS, **kw: Any) -> Read:
    """Read ``source`` with the reference and at every block size; all equal. Returns the
    reference's reading."""
    ref = _read(source, True, **kw)
    for block in blocks:
        got = _read(source, False, block, monkeypatch, **kw)
        assert got == ref, (source, block, kw)
    return ref


def _block_starts(data: bytes) -> list[int]:
    """Byte offsets of the blocks of a well-formed pcapng (and its length)."""
    starts = [0]
    bo = "<"
    while starts[-1] + 12 <= len(data):
        at = starts[-1]
        if data[at : at + 4] == b"\x0a\x0d\x0d\x0a":
            bo = "<" if data[at + 8 : at + 12] == b"\x4d\x3c\x2b\x1a" else ">"
        starts.append(at + struct.unpack_from(bo + "I", data, at + 4)[0])
    return starts


# --------------------------------------------------------------------------- real captures


@pytest.mark.parametrize("path", PCAPNGS, ids=[p.name for p in PCAPNGS])
def test_every_capture_reads_as_before(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCKS if path.stat().st_size < 600_000 else [0, 61, 4096, 1 << 16]
    ref = _same_at_every_block(path, monkeypatch, blocks)
    assert len(ref.frames) >= 1 and ref.frame_count >= len(ref.frames)
    if not ref.rows:
        assert ref.progress[-1] == path.stat().st_size
    # progress after each frame: the end of a block
    assert set(ref.progress[:-1]) <= set(_block_starts(path.read_bytes()))


def test_the_captures_hold_what_the_tests_need() -> None:
    """The shipped pcapng captures hold packets shorter and longer than the small block sizes;
    the corpus adds Decryption Secrets Blocks (all before the first packet: the built files
    below put them between packets) and interfaces of different link types."""
    lengths: set[int] = set()
    with_secrets = linktypes = 0
    for path in PCAPNGS:
        with open_capture(path, Diagnostics()) as r:
            lengths.update(len(f.data) for f in r.frames())
            with_secrets += bool(r.secrets)
            linktypes = max(linktypes, len({i.linktype for i in r.interfaces}))
    assert len(PCAPNGS) >= 19 and min(lengths) < 100 - 32 and max(lengths) > 4096
    assert (with_secrets >= 2 and linktypes >= 2) or not corpus_files()


@pytest.mark.parametrize("name", ["doh-h2.pcapng", "h3-push.pcapng"])
def test_cut_at_every_byte_near_block_edges(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file cut at every byte of the first blocks, at every byte around the first edges of
    1000-byte read-ahead blocks and of the first 4 KiB ones, and at random places: the same
    frames, rows (with the same offsets) and progress as before."""
    orig = (CAPTURES / name).read_bytes()
    starts = _block_starts(orig)
    cuts = set(range(0, starts[6] + 1))
    edges = [1000 * k for k in range(1, 8)] + [4096, 8192]
    cuts.update(c for e in edges for c in range(e - 40, e + 41))
    for e in edges:  # every byte of the blocks around the edge
        first = max(i for i, s in enumerate(starts) if s <= e)
        cuts.update(range(starts[first - 1], starts[min(first + 2, len(starts) - 1)]))
    cuts.update(random.Random(name).sample(range(12, len(orig)), 30))
    cuts = {c for c in cuts if starts[1] <= c <= len(orig)}  # (the first SHB whole)
    truncated = 0
    for cut in sorted(cuts):
        path = write(tmp_path / "cut.pcapng", orig[:cut])
        ref = _same_at_every_block(path, monkeypatch, blocks=[0, 1, 61, 1000, 4096])
        truncated += any(r[0] == "capture.truncated_record" for r in ref.rows)
    assert truncated == len(cuts - set(starts)) and len(cuts) > 1000


# --------------------------------------------------------------------------- built files

T0 = 1_700_000_000_000_000_000  # ns


def _pkt(i: int, size: int = 40) -> bytes:
    return bytes([i & 0xFF]) * size


def _mixed(bo: str = "<", second_bo: str = ">") -> bytes:
    """Two sections of different byte orders; interfaces of different link types and
    if_tsresol; packets of every kind with Decryption Secrets Blocks, name resolution,
    statistics, custom and unknown blocks between them; an option that overruns its block, an
    out-of-order time, a packet of an undefined interface."""
    keys = b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n"
    s0 = T0 // 10**9

    def at(iface: int, i: int) -> int:  # ticks of second i after T0 on each interface
        return [T0 + i * 10**9, (T0 + i * 10**9) // 1000, (s0 + i) << 20][iface]

    overrun = raw_block(6, struct.pack(bo + "IIIII", 0, at(0, 17) >> 32, at(0, 17) & 0xFFFFFFFF,
                                   40, 40) + _pkt(14) + struct.pack(bo + "HH", 2, 40) + b"\0" * 4,
                    bo)
    first = [
        shb(bo),
        idb(1, 0, bo, tsresol=9),  # Ethernet, ns
        idb(113, 0, bo, tsresol=6),  # Linux SLL, us
        idb(101, 0, bo, tsresol=0x80 | 20),  # raw IP, 2^-20 s (not a whole number of ns)
        *(epb(i % 3, at(i % 3, i), _pkt(i, 30 + 7 * i), bo=bo) for i in range(6)),
        dsb(TLS_KEYLOG, keys, bo),
        epb(0, at(0, 10), _pkt(6), bo=bo, opts=[(2, b"\x01\x00\x00\x00")]),  # epb_flags
        epb(0, at(0, 11), _pkt(7), 1500, bo=bo),
        nrb(bo), isb(0, bo),
        epb(1, at(1, 12), _pkt(8), bo=bo),
        dsb(0x5353484B, b"ssh secrets", bo),  # (not TLS: a row)
        dsb(TLS_KEYLOG, keys.replace(b"ab", b"ef"), bo),
        epb(2, at(2, 13), _pkt(9), bo=bo),
        custom_block(bo), epb(0, at(0, 14), _pkt(10), bo=bo),
        custom_block(bo, copy=False),
        epb(0, at(0, 9), _pkt(11), bo=bo),  # earlier than the frame before it
        epb(0, at(0, 15), _pkt(12), bo=bo),
        epb(7, at(0, 16), _pkt(13), bo=bo),  # no interface 7
        overrun,
        spb(_pkt(15, 33), bo=bo), spb(_pkt(16, 20), bo=bo),
        opb(1, at(1, 18), _pkt(17), bo=bo),
        opb(2, at(2, 19), _pkt(18), bo=bo),
        raw_block(0x80001234, b"\0" * 4, bo),  # (local use: a row)
        epb(0, at(0, 20), _pkt(19), bo=bo),
    ]
    second = [
        shb(second_bo),
        idb(228, 64, second_bo, tsresol=3),  # IPv4, ms, snaplen 64
        idb(1, 64, second_bo, tsresol=9, tsoffset=-3),  # Ethernet, ns, 3 s earlier
        *(epb(i % 2, [(T0 + i * 10**9) // 10**6, T0 + (i + 3) * 10**9][i % 2] + i,
              _pkt(20 + i, 50 + i), bo=second_bo) for i in range(30, 38)),
        dsb(TLS_KEYLOG, keys.replace(b"ab", b"99"), second_bo),
        spb(_pkt(28, 64), 100, bo=second_bo),  # (cut to the snaplen)
        epb(1, T0 + 42 * 10**9, _pkt(29), bo=second_bo),
    ]
    return b"".join(first + second)


@pytest.mark.parametrize("bo,second_bo", [("<", ">"), (">", "<"), ("<", "<")])
def test_sections_interfaces_secrets_and_rows(
    bo: str, second_bo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _mixed(bo, second_bo)
    path = write(tmp_path / "m.pcapng", data)
    ref = _same_at_every_block(path, monkeypatch, blocks=[*BLOCKS, 200, 333, 512])
    # frames 11 and 13 are custom blocks, 16 names interface 7 (skipped with a row)
    assert [f.frame for f in ref.frames] == [*range(1, 11), 12, 14, 15, *range(17, 33)]
    assert [f.interface for f in ref.frames] == [0, 1, 2] * 2 + [0, 0, 1, 2] + [0] * 6 + [
        1, 2, 0] + [3, 4] * 5
    assert [f.linktype for f in ref.frames[:3]] == [1, 113, 101]
    assert [f.linktype for f in ref.frames[-3:]] == [1, 228, 1]
    s = 10**9
    assert [f.ts_ns - T0 for f in ref.frames] == [
        *(i * s for i in range(6)), *(i * s for i in range(10, 15)), 9 * s, 15 * s,
        17 * s, 17 * s, 17 * s,  # (Simple Packet Blocks: the time of the frame before)
        18 * s, 19 * s, 20 * s,
        *(i * s + (i * 10**6 if i % 2 == 0 else i) for i in range(30, 38)), 37 * s + 37, 39 * s]
    assert [(len(f.data), f.orig_len) for f in ref.frames if len(f.data) != f.orig_len] == [
        (40, 1500), (64, 100)]
    # the secrets of a DSB are there when the frame after it is handed out, not before
    assert ref.secrets_at == [0] * 6 + [1] * 3 + [3] * 18 + [4] * 2
    assert [t for t, _d in ref.secrets] == [TLS_KEYLOG, 0x5353484B, TLS_KEYLOG, TLS_KEYLOG]
    assert [(r[0], r[1]) for r in ref.rows] == [
        ("capture.secrets_unsupported", None), ("capture.timestamp_out_of_order", 14),
        ("capture.unknown_interface", 16), ("capture.bad_option", 17),
        ("capture.unknown_block_type", None)]
    assert ref.rows_at == [0] * 9 + [1] * 2 + [2] * 2 + [4] * 5 + [5] * 11
    assert ref.progress[-1] == len(data) and ref.frame_count == 32


@pytest.mark.parametrize("tsresol,tsoffset", [
    (9, None), (6, None), (0, None), (3, -(1 << 40)), (9, 1 << 33), (9, (1 << 62) // 10**9),
    (0x80 | 30, None), (0x80 | 3, 7), (19, None), (0x80 | 62, None)])
def test_times_at_the_edge_of_what_c_integers_hold(
    tsresol: int, tsoffset: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tick counts on both sides of where ``_next_batch`` stops computing times in C
    (``_fast_ts``), in every kind of resolution and offset, up to times out of the range of
    int64 nanoseconds (a row, the frame before's time): the same frames and rows."""
    tps = (1 << (tsresol & 0x7F)) if tsresol & 0x80 else 10**tsresol
    npt = 10**9 // tps if tps <= 10**9 and 10**9 % tps == 0 else 0
    hi_max, _off = _fast_ts(npt, (tsoffset or 0) * 10**9)
    his = {0, 1, 5, 300_000_000, 1 << 30, (1 << 32) - 1}
    if hi_max >= 0:
        his |= {hi_max - 1, hi_max, hi_max + 1}
    ticks = sorted({(hi << 32) | lo for hi in his if 0 <= hi < 1 << 32
                    for lo in (0, 7, 0xFFFFFFFF)})
    order = ticks + ticks[::-1]  # (then backwards: out of order)
    data = shb() + idb(1, 0, tsresol=tsresol, tsoffset=tsoffset) + b"".join(
        epb(0, t, _pkt(i, 20 + i % 13)) for i, t in enumerate(order))
    path = write(tmp_path / "t.pcapng", data)
    ref = _same_at_every_block(path, monkeypatch, blocks=[1, 100, 1000, 1 << 16])
    assert len(ref.frames) == len(order)
    assert all(TS_MIN_NS <= f.ts_ns <= TS_MAX_NS for f in ref.frames)


@pytest.mark.parametrize("npt", [1, 3, 1000, 10**6, 10**9])
def test_fast_ts_bounds_hold(npt: int) -> None:
    """Every time ``_next_batch`` computes in C fits in a signed 64-bit integer."""
    hi_max, off = _fast_ts(npt, -(1 << 62) + 1)
    assert hi_max >= 0 and off == -(1 << 62) + 1
    most = ((hi_max << 32) | 0xFFFFFFFF) * npt
    assert most < 1 << 62 and -(1 << 63) <= most + off and most + (1 << 62) - 1 < 1 << 63
    assert _fast_ts(npt, 1 << 62) == (-1, 0) and _fast_ts(0, 0) == (-1, 0)


# --------------------------------------------------------------------------- how it hands out


def test_a_block_is_handed_out_at_once_and_progress_stays_per_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packet blocks after the first are sliced out of the read-ahead block together (the
    stream is at the end of the last one), yet ``bytes_read`` is the end of the frame taken;
    a DSB ends the batch and its secrets are there for the frame after it."""
    head = shb() + idb(1, 0, tsresol=9)
    pk = [epb(0, T0 + i, _pkt(i)) for i in range(6)]  # 72 bytes each
    sec = dsb(TLS_KEYLOG, b"CLIENT_RANDOM 00 00\n")
    path = write(tmp_path / "t.pcapng", head + b"".join(pk[:4]) + sec + b"".join(pk[4:]))
    h, e = len(head), len(pk[0])
    monkeypatch.setattr(io_open, "_BLOCK", 1 << 16)
    with open_capture(path, Diagnostics()) as r:
        it = r.frames()
        # (reading the IDB filled the block) frames 1-4 are sliced out together, up to the DSB
        assert next(it).frame == 1
        assert (r.bytes_read, r._stream.tell()) == (h + e, h + 4 * e)
        assert [(next(it).frame, r.bytes_read, len(r.secrets)) for _ in range(3)] == [
            (2, h + 2 * e, 0), (3, h + 3 * e, 0), (4, h + 4 * e, 0)]
        assert (next(it).frame, len(r.secrets)) == (5, 1)
        assert [f.frame for f in it] == [6]
        assert (r.bytes_read, r.frame_count) == (path.stat().st_size, 6)


# --------------------------------------------------------------------------- streams


@pytest.mark.parametrize("piece", [1, 3, 1000])
def test_a_stream_read_in_small_pieces(piece: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file object whose reads return a few bytes at a time (read once, never seeked):
    whole, and cut inside a block."""
    data = _mixed()
    for cut in (len(data), len(data) - 3, len(data) - 50):
        ref = _same_at_every_block(lambda d=data[:cut]: Trickle(d, piece), monkeypatch,
                                   blocks=[1, 61, 4096, 1 << 16])
        assert ref.progress[-1] == cut and len(ref.frames) > 25
        assert [r[0] for r in ref.rows][5:] == ["capture.truncated_record"] * (cut != len(data))


@pytest.mark.parametrize("inside", [0, 5, 30])
def test_read_error_in_a_regular_file(inside: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO from a failing disk in the 12th block (or right at its start): the frames before
    it, then one read_error row, at any block size, as before."""
    path = CAPTURES / "doh-h2.pcapng"
    at = _block_starts(path.read_bytes())[11] + inside

    def failing(reference: bool, block: int) -> tuple[list[int], Rows, int]:
        monkeypatch.setattr(io_open, "_BLOCK", block)
        diag = Diagnostics()
        with open_capture(path, diag) as r:
            stream: Any = r._stream
            stream._fh = DiskFailsAt(stream._fh, at)
            stream.read = stream._fh.read  # (how a plain file is read before read_ahead)
            it = _reference(r._parser) if reference else r.frames()  # type: ignore[arg-type]
            frames = [f.frame for f in it]
        rows = [(a.code, a.frame, a.ts_ns, a.detail) for a in diag.rows]
        return frames, rows, r.frame_count

    ref = failing(True, 1 << 16)
    assert ref[0] and [row[0] for row in ref[1]] == ["capture.read_error"]
    for block in (0, 1, 61, 4096, 1 << 16):
        assert failing(False, block) == ref, block


# --------------------------------------------------------------------------- compressed


_CODECS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zstd": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
}


@pytest.mark.parametrize("codec", list(_CODECS))
@pytest.mark.parametrize("name", ["h2-sse-chat.pcapng", "mixed"])
def test_compressed_captures_read_as_before(
    codec: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compressed stream is read one block at a time, as before: the same frames, rows
    (a cut or damaged stream), secrets and progress in compressed bytes."""
    data = _mixed() if name == "mixed" else (CAPTURES / name).read_bytes()
    packed = _CODECS[codec](data)
    m = len(packed) * 3 // 4
    cases = {
        "whole": packed,
        "cut": _CODECS[codec](data[:-30]),
        "damaged": packed[:m] + b"\x00" * 64 + packed[m + 64 :],
    }
    if name == "mixed" and codec == "zstd":
        del cases["damaged"]  # (one zstd block: the damage is found before the first frame)
    for label, blob in cases.items():
        path = write(tmp_path / f"{label}.pcapng.x", blob)
        ref = _same_at_every_block(path, monkeypatch, blocks=[1, 61, 1 << 16])
        if label != "damaged":
            assert ref.progress[-1] == len(blob) and len(ref.frames) > 25, label
        for limit in (400, 2000, len(data) // 2):
            _same_at_every_block(path, monkeypatch, blocks=[61], max_decompressed_bytes=limit)


def test_damaged_blocks_read_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 32-bit field of a block after the first (type, lengths, interface, times, length, options,
    trailer) overwritten with values a damaged file holds, in blocks of every kind: the same
    frames, rows, secrets and progress as before."""
    data = _mixed()
    starts = _block_starts(data)
    values = [0, 1, 6, 31, 33, 0x7FFF, 1 << 20, 0xFFFFFFFF]
    cases = [(s, k, v) for s, e in zip(starts[1:], starts[2:], strict=False)
             for k in sorted({0, 4, 8, 12, 16, 20, 24, 28, e - s - 8, e - s - 4})
             if s + k + 4 <= e for v in values]
    rows: set[str] = set()
    for start, k, v in random.Random(1).sample(cases, 500):
        bad = data[: start + k] + struct.pack("<I", v) + data[start + k + 4 :]
        path = write(tmp_path / "d.pcapng", bad)
        ref = _same_at_every_block(path, monkeypatch, blocks=[0, 61, 1 << 16])
        rows.update(r[0] for r in ref.rows)
    assert rows >= {"capture.bad_block", "capture.bad_record_length", "capture.truncated_record",
                    "capture.unknown_interface", "capture.timestamp_out_of_order",
                    "capture.bad_option", "capture.timestamp_out_of_range"}
