"""The classic pcap reader slices records out of read-ahead blocks and hands them out in
batches (``PcapParser._next_batch``): it must give exactly what the record-by-record generator
it replaced gave. That generator is kept below (``_reference``, verbatim but for taking the
parser as an argument) and both read the same bytes through ``open_capture``:

* every ``RawFrame`` (number, time, link type, bytes, original length), ``frame_count``;
* every Diagnostics row (code, frame, time, text with its byte offset) and the point at which
  it was added (how many rows there were when each frame was handed out: a row must never be
  added before the frames before it have been taken);
* ``bytes_read`` after every frame (the end of that frame, as a stream read one record at a
  time says) and at the end.

Block sizes are forced small (``open._BLOCK``) so that records cross block edges: 1 (every
record read on its own), sizes below one record (every record crosses an edge), and sizes of
a few records.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from conftest import CAPTURES, corpus_files, shipped_captures
from helpers import DiskFailsAt, Trickle, pcap_file, pcap_header, pcap_record, write

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import RawFrame, open_capture
from pcaptools.io import open as io_open
from pcaptools.io.linktypes import linktype_name, max_packet_len
from pcaptools.io.pcap import PcapParser, read_failed

PCAPS = [p for p in shipped_captures() if p.suffix == ".pcap"] + corpus_files("*.pcap")
BLOCKS = [1, 7, 16, 17, 61, 100, 1000, 4096, 1 << 16]


def _reference(parser: PcapParser) -> Iterator[RawFrame]:
    """``PcapParser.frames`` as it was before the batches (main at a8f9ab2): one record at a
    time through ``read()``, the stream never read ahead."""
    p: Any = parser
    read = p._src.read
    diag = p._diag
    unpack = struct.Struct(p._order + "IIII").unpack_from
    rechdr = p._rechdr
    frac_ns = p._frac_ns
    linktype = p.interface.linktype
    maxlen = max_packet_len(linktype)
    frame = 0
    offset = 24
    last_ts = -(1 << 63)
    try:
        while True:
            hdr = read(rechdr)
            if len(hdr) < rechdr:
                if hdr and not p._src.stopped:
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
                if not p._src.stopped:
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
        p.frame_count = frame


Rows = list[tuple[str, int | None, int | None, str]]


class Read:
    """What one reading of a capture gave (compared whole with ``==``)."""

    def __init__(self, frames: list[RawFrame], rows: Rows, rows_at: list[int],
                 progress: list[int], frame_count: int) -> None:
        self.frames, self.rows, self.rows_at = frames, rows, rows_at
        self.progress, self.frame_count = progress, frame_count

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Read) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return (f"Read({len(self.frames)} frames, rows={self.rows}, "
                f"progress[-3:]={self.progress[-3:]}, frame_count={self.frame_count})")


def _read(source: Any, reference: bool, block: int = io_open._BLOCK,
          monkeypatch: pytest.MonkeyPatch | None = None, **kw: Any) -> Read:
    """Read ``source`` (a path, or a factory of a fresh file object) with the reference or
    with ``frames()`` at ``block``."""
    if monkeypatch is not None:
        monkeypatch.setattr(io_open, "_BLOCK", block)
    diag = Diagnostics()
    src = source() if callable(source) else source
    with open_capture(src, diag, **kw) as r:
        assert r.format == "pcap"
        frames, rows_at, progress = [], [], []
        it = _reference(r._parser) if reference else r.frames()  # type: ignore[arg-type]
        for f in it:
            frames.append(f)
            rows_at.append(len(diag.rows))
            progress.append(r.bytes_read)
        progress.append(r.bytes_read)
        count = r.frame_count
    rows = [(a.code, a.frame, a.ts_ns, a.detail) for a in diag.rows]
    return Read(frames, rows, rows_at, progress, count)


def _same_at_every_block(source: Any, monkeypatch: pytest.MonkeyPatch,
                         blocks: list[int] = BLOCKS, **kw: Any) -> Read:
    """Read ``source`` with the reference and at every block size; all equal. Returns the
    reference's reading."""
    ref = _read(source, True, **kw)
    for block in blocks:
        got = _read(source, False, block, monkeypatch, **kw)
        assert got == ref, (source, block, kw)
    return ref


# --------------------------------------------------------------------------- real captures


@pytest.mark.parametrize("path", PCAPS, ids=[p.name for p in PCAPS])
def test_every_capture_reads_as_before(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = _same_at_every_block(path, monkeypatch)
    assert len(ref.frames) >= 1 and ref.frame_count == len(ref.frames)
    if not ref.rows:
        assert ref.progress[-1] == path.stat().st_size
    # progress after each frame: the end of its record
    rechdr = 24 if path.read_bytes()[:4] in (b"\x34\xcd\xb2\xa1", b"\xa1\xb2\xcd\x34") else 16
    ends = [24]
    for f in ref.frames:
        ends.append(ends[-1] + rechdr + len(f.data))
    assert ref.progress[:-1] == ends[1:]


def test_the_captures_hold_what_the_edges_need() -> None:
    """The shipped pcap captures have records below and above every small block size, so the
    comparisons above cut records at every place (header, data, both)."""
    lengths = set()
    for path in PCAPS:
        with open_capture(path, Diagnostics()) as r:
            lengths.update(len(f.data) for f in r.frames())
    assert len(PCAPS) >= 20
    assert min(lengths) < 61 - 16 and max(lengths) > 4096 - 16


@pytest.mark.parametrize("name", ["ipv6.pcap", "http1-basic.pcap"])
def test_cut_at_every_place_near_block_edges(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file cut inside a record header and inside record data, right at and around the
    first edges of 1000-byte blocks and the first 64 KiB edge, and at random places: the same
    rows, with the same offsets, as before."""
    orig = (CAPTURES / name).read_bytes()
    starts = [24]  # of the records
    while starts[-1] + 16 <= len(orig):
        starts.append(starts[-1] + 16 + int.from_bytes(orig[starts[-1] + 8 : starts[-1] + 12],
                                                       "little"))
    edges = [24 + 1000 * k for k in range(1, 6)] + [24 + (1 << 16)]
    cuts = {c for e in edges for c in range(e - 20, e + 21)}
    for e in edges:  # inside the header of the records around the edge
        first = max(i for i, s in enumerate(starts) if s <= e)
        cuts.update(c for s in starts[first - 1 : first + 2] for c in range(s + 1, s + 16))
    cuts.update(random.Random(name).sample(range(25, len(orig)), 20))
    in_header = in_data = 0
    for cut in sorted(cuts):
        path = write(tmp_path / "cut.pcap", orig[:cut])
        ref = _same_at_every_block(path, monkeypatch, blocks=[1, 61, 1000, 1 << 16])
        assert ref.progress[-1] == cut
        for _code, _frame, _ts, detail in ref.rows:
            in_header += detail.startswith("the file ends inside the header of record")
            in_data += detail.endswith("captured bytes present")
    assert in_header >= 10 and in_data >= 100


def _three(n: int = 3, size: int = 40) -> list[tuple[int, bytes]]:
    return [(1_700_000_000_000_000_000 + i * 1000, bytes([i]) * size) for i in range(n)]


def test_a_record_crossing_a_block_edge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records of 16 + 40 bytes read in 64-byte blocks: the second record's header crosses the
    first block's end, the third record's data the second's; each is joined whole."""
    path = write(tmp_path / "t.pcap", pcap_file(_three()))
    got = _read(path, False, 64, monkeypatch)
    assert [(f.frame, f.ts_ns, f.data, f.orig_len) for f in got.frames] == [
        (i + 1, 1_700_000_000_000_000_000 + i * 1000, bytes([i]) * 40, 40) for i in range(3)]
    assert got.progress == [24 + 56, 24 + 112, 24 + 168, 24 + 168]
    assert got.rows == [] and got.frame_count == 3
    assert got == _read(path, True)


def test_a_block_is_handed_out_at_once_and_progress_stays_per_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records after the first are sliced out of the block together (the stream is at the
    end of the block's last whole record), yet ``bytes_read`` is the end of the frame taken."""
    path = write(tmp_path / "t.pcap", pcap_file(_three(5)))
    monkeypatch.setattr(io_open, "_BLOCK", 1 << 16)
    with open_capture(path, Diagnostics()) as r:
        it = r.frames()
        assert next(it).frame == 1  # read on its own: the block was empty
        assert (r.bytes_read, r._stream.tell()) == (24 + 56, 24 + 56)
        assert next(it).frame == 2  # frames 2-5 were sliced out of the block together
        assert (r.bytes_read, r._stream.tell()) == (24 + 112, 24 + 280)
        assert [f.frame for f in it] == [3, 4, 5]
        assert (r.bytes_read, r.frame_count) == (24 + 280, 5)


@pytest.mark.parametrize("block", [1, 20, 64, 100, 1 << 16])
def test_rows_between_frames_come_where_they_came(
    block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out-of-order timestamps in the middle of a block, then a record with an absurd length:
    each row is added when the frame it names is handed out (not when its block is sliced)."""
    pk = _three(6)
    pk[2], pk[4] = (pk[2][0] - 5_000_000, pk[2][1]), (pk[4][0] - 7_000, pk[4][1])
    body = b"".join(pcap_record(ts, d) for ts, d in pk)
    bad = pcap_record(pk[5][0], b"x" * 10, incl_len=300_000)
    path = write(tmp_path / "t.pcap", pcap_header() + body + bad + pcap_record(pk[5][0], b"y"))
    got = _read(path, False, block, monkeypatch)
    assert [f.frame for f in got.frames] == [1, 2, 3, 4, 5, 6]
    assert got.rows == [
        ("capture.timestamp_out_of_order", 3, pk[2][0],
         "frame 3 is 0.004999 s earlier than the frame before it"),
        ("capture.timestamp_out_of_order", 5, pk[4][0],
         "frame 5 is 0.000006 s earlier than the frame before it"),
        ("capture.bad_record_length", 7, None,
         f"record 7 at byte offset {24 + 6 * 56} announces 300000 captured bytes, more than "
         "the 262144 allowed for LINKTYPE_ETHERNET (1): the file is corrupt after frame 6"),
    ]
    assert got.rows_at == [0, 0, 1, 1, 2, 2]
    assert got.frame_count == 6 and got.progress[-1] == 24 + 6 * 56 + 16
    assert got == _read(path, True)


@pytest.mark.parametrize("cut,row", [
    (24 + 56 + 5, "the file ends inside the header of record 2 at byte offset 80 "
                  "(5 of 16 header bytes)"),
    (24 + 56 + 16, "the file ends inside record 2 at byte offset 80: 0 of 40 captured bytes "
                   "present"),
    (24 + 56 + 30, "the file ends inside record 2 at byte offset 80: 14 of 40 captured bytes "
                   "present"),
])
@pytest.mark.parametrize("block", [1, 30, 64, 80, 81, 96, 1 << 16])
def test_cut_inside_a_record_at_a_block_edge(
    cut: int, row: str, block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file cut in the second record's header or data, with block edges before, at and
    after the cut: one row naming record 2 and its offset; frame 1 and only it."""
    path = write(tmp_path / "t.pcap", pcap_file(_three())[:cut])
    got = _read(path, False, block, monkeypatch)
    assert [f.frame for f in got.frames] == [1]
    assert [(r[0], r[1], r[3]) for r in got.rows] == [("capture.truncated_record", 2, row)]
    assert got.progress == [80, cut] and got.frame_count == 1
    assert got == _read(path, True)


@pytest.mark.parametrize("magic,bo,nsec", [
    (0xA1B2C3D4, ">", False), (0xA1B23C4D, "<", True), (0xA1B23C4D, ">", True)])
def test_byte_orders_and_nanoseconds(
    magic: int, bo: str, nsec: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "t.pcap", pcap_file(_three(4, 33), nsec=nsec, bo=bo))
    ref = _same_at_every_block(path, monkeypatch)
    assert [f.ts_ns for f in ref.frames] == [1_700_000_000_000_000_000 + i * 1000
                                             for i in range(4)]


def test_modified_pcap_records_of_24_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kuznetzov's modified format: 8 more header bytes per record, skipped."""
    recs = [pcap_record(ts, d)[:16] + b"\xee" * 8 + d for ts, d in _three(5, 50)]
    data = pcap_header(magic=0xA1B2CD34) + b"".join(recs)
    path = write(tmp_path / "m.pcap", data)
    ref = _same_at_every_block(path, monkeypatch)
    assert [f.data for f in ref.frames] == [bytes([i]) * 50 for i in range(5)]
    assert ref.progress[-1] == 24 + 5 * 74
    cut = write(tmp_path / "c.pcap", data[: 24 + 74 + 20])
    rows = _same_at_every_block(cut, monkeypatch).rows
    assert [r[3] for r in rows] == ["the file ends inside the header of record 2 at byte offset "
                                    "98 (20 of 24 header bytes)"]


# --------------------------------------------------------------------------- limits


@pytest.mark.parametrize("name", ["http1-basic.pcap", "tcp-reset.pcap"])
def test_max_decompressed_bytes_stops_where_it_stopped(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A limit on an uncompressed file stops at the same frame, with the same row."""
    path = CAPTURES / name
    size = path.stat().st_size
    limits = [24, 25, 40, 24 + 16, size - 1, size, size + 1]
    limits += random.Random(name).sample(range(24, size), 12)
    stopped = 0
    for limit in limits:
        ref = _same_at_every_block(path, monkeypatch, blocks=[1, 17, 1000, 1 << 16],
                                   max_decompressed_bytes=limit)
        stopped += any(r[0] == "capture.decompression_limit" for r in ref.rows)
    assert stopped == len(limits) - 2


# --------------------------------------------------------------------------- streams


@pytest.mark.parametrize("name,piece", [("tcp-reset.pcap", 1), ("tcp-reset.pcap", 3),
                                        ("http1-lossy.pcap", 1000)])
def test_a_stream_read_in_small_pieces(
    name: str, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file object whose reads return a few bytes at a time (read once, never seeked):
    whole, and cut inside a record."""
    data = (CAPTURES / name).read_bytes()
    for cut in (len(data), len(data) - 3, len(data) - 500):
        ref = _same_at_every_block(lambda d=data[:cut]: Trickle(d, piece), monkeypatch,
                                   blocks=[1, 61, 4096, 1 << 16])
        assert ref.progress[-1] == cut and len(ref.frames) > 40
        assert [r[0] for r in ref.rows] == ["capture.truncated_record"] * (cut != len(data))


@pytest.mark.parametrize("inside", [0, 5, 16, 30])
def test_read_error_in_a_regular_file(inside: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO from a failing disk in record 11 (or right at its start): frames 1-10, then one
    read_error row naming record 11's offset, at any block size."""
    path = CAPTURES / "http1-lossy.pcap"
    with open_capture(path, Diagnostics()) as r:
        ends = [24]
        for f in r.frames():
            ends.append(ends[-1] + 16 + len(f.data))
    at = ends[10] + inside

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

    ref = failing(True, 0)
    assert ref == (list(range(1, 11)), [(
        "capture.read_error", None, None,
        f"reading the capture failed at byte offset {ends[10]}, after frame 10 (OSError: "
        "Input/output error); everything before it was analysed")], 10)
    for block in (1, 61, 4096, 1 << 16):
        assert failing(False, block) == ref, block


# --------------------------------------------------------------------------- compressed


_CODECS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "bzip2": lambda b: bz2.compress(b, 1),  # (100 kB blocks: the damage is not in the first)
    "xz": lzma.compress,
    "zstd": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
}


@pytest.mark.parametrize("codec", list(_CODECS))
def test_compressed_captures_read_as_before(
    codec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compressed stream is read one record at a time, as before: the same frames, rows
    (a cut or damaged stream) and progress in compressed bytes."""
    data = (CAPTURES / "http1-lossy.pcap").read_bytes()
    packed = _CODECS[codec](data)
    m = len(packed) * 3 // 4
    cases = {
        "whole": packed,
        "cut": _CODECS[codec](data[:-300]),
        "damaged": packed[:m] + b"\x00" * 64 + packed[m + 64 :],
    }
    for label, blob in cases.items():
        path = write(tmp_path / f"{label}.pcap.x", blob)
        ref = _same_at_every_block(path, monkeypatch, blocks=[1, 61, 1 << 16])
        if label != "damaged":
            assert ref.progress[-1] == len(blob) and len(ref.frames) > 400, label
        else:  # (xz decompresses the damage into a record header announcing 3 GB)
            assert [r[0] for r in ref.rows] == [
                "capture.bad_record_length" if codec == "xz" else "capture.decompression_error"]
        for limit in (24, 5000, len(data) // 2):
            _same_at_every_block(path, monkeypatch, blocks=[61], max_decompressed_bytes=limit)
