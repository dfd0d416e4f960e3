"""Block reads: an uncompressed capture is read ahead in blocks and pcapng packet blocks and
pcap records are sliced out of the block (``open._Stream.read_ahead``, the batches of
``PcapngParser.frames`` and ``PcapParser.frames``; tests/io/test_io_pcap_batches.py and
tests/io/test_io_pcapng_batches.py compare the readers with the generators they replaced).

Whatever the block size, the frames, the Diagnostics rows and the ``bytes_read`` progress must
be exactly those of record-by-record reads (block size 0: every read asks the file for exactly
the bytes requested, which is how the parsers read before the read-ahead existed), also for
files cut at any offset and for ``max_decompressed_bytes`` limits; and a limit must stop at the
same frame, with the same row, as for the same capture read through a (never read-ahead)
compressed stream.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from helpers import write

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import RawFrame, open_capture
from pcaptools.io import open as io_open

SAMPLES = [
    "tcp-fast-open.pcap",  # little-endian microseconds
    "nanosecs_big_endian.pcap",
    "http_ip4and6.pcapng",  # several block types
    "many_interfaces-1.pcapng",
    "dump.pcapng",
]
BLOCKS = [0, 1, 5, 16, 29, 100, 333, 1500, 4096, 1 << 22]

Result = tuple[list[RawFrame], list[tuple[str, int | None, int | None, str]], list[int]]


def _read(path: Path, block: int, monkeypatch: pytest.MonkeyPatch, **kw: object) -> Result:
    monkeypatch.setattr(io_open, "_BLOCK", block)
    diag = Diagnostics()
    with open_capture(path, diag, **kw) as r:  # type: ignore[arg-type]
        frames = []
        progress = []
        for f in r.frames():
            frames.append(f)
            progress.append(r.bytes_read)
        progress.append(r.bytes_read)
    return frames, [(a.code, a.frame, a.ts_ns, a.detail) for a in diag.rows], progress


@pytest.mark.parametrize("name", SAMPLES)
def test_every_block_size_reads_the_same(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = corpus / name
    ref = _read(path, 0, monkeypatch)
    assert len(ref[0]) >= 10 and ref[2][-1] == path.stat().st_size
    # progress is the end of the last record handed out, as an unbuffered file's tell()
    assert ref[2] == sorted(ref[2])
    for block in BLOCKS[1:]:
        assert _read(path, block, monkeypatch) == ref, block


@pytest.mark.parametrize("name", SAMPLES)
def test_cut_files_read_the_same(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    orig = (corpus / name).read_bytes()
    rng = random.Random(f"blocks-{name}")
    first = 24 if name.endswith(".pcap") else int.from_bytes(orig[4:8], "little")
    cuts = sorted(rng.randrange(first, len(orig)) for _ in range(12))
    truncated_rows = 0
    for i, cut in enumerate(cuts):
        path = write(tmp_path / f"c{i}{Path(name).suffix}", orig[:cut])
        ref = _read(path, 0, monkeypatch)
        truncated_rows += sum(1 for r in ref[1] if r[0] == "capture.truncated_record")
        for block in (1, 7, 64, 1000, 1 << 22):
            assert _read(path, block, monkeypatch) == ref, (cut, block)
    assert truncated_rows >= 6  # most random cuts fall inside a record


@pytest.mark.parametrize("name", ["tcp-fast-open.pcap", "dump.pcapng"])
def test_limits_stop_where_a_compressed_stream_stops(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    raw = (corpus / name).read_bytes()
    plain = write(tmp_path / f"p{Path(name).suffix}", raw)
    packed = write(tmp_path / "p.gz", gzip.compress(raw))
    rng = random.Random(f"limit-{name}")
    # the file header / first Section Header Block must fit (or opening fails)
    first = 24 if name.endswith(".pcap") else int.from_bytes(raw[4:8], "little")
    limits = [first, first + 1, first + 15, first + 16, len(raw) - 1, len(raw), len(raw) + 1]
    limits += [rng.randrange(first, len(raw)) for _ in range(10)]
    limit_rows = 0
    for limit in limits:
        ref = _read(plain, 0, monkeypatch, max_decompressed_bytes=limit)
        # the compressed stream is never read ahead: an independent reference for the limit
        frames, rows, _ = _read(packed, 1 << 22, monkeypatch, max_decompressed_bytes=limit)
        assert frames == ref[0], limit
        assert [(c, f, t, d.replace("gzip stream", "file")) for c, f, t, d in rows] == ref[1]
        limit_rows += sum(1 for r in ref[1] if r[0] == "capture.decompression_limit")
        for block in (1, 13, 256, 1 << 22):
            assert _read(plain, block, monkeypatch, max_decompressed_bytes=limit) == ref, (
                limit,
                block,
            )
    assert limit_rows == len(limits) - 2  # every limit below the size stops reading
