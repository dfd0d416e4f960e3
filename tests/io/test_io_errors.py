"""Bad input to the reading layer: not a capture, cut off, corrupt, absurd, compressed wrongly.

Only :func:`open_capture` may raise (CaptureOpenError / CaptureFormatError); once a capture
is open, every problem is a Diagnostics row and the frames before it are all yielded.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import lzma
import os
import random
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from helpers import epb, eth_tcp4, idb, pcap_header, pcap_record, shb, write

from pcaptools.diagnostics import Diagnostics
from pcaptools.errors import CaptureFormatError, CaptureOpenError
from pcaptools.io import RawFrame, open_capture

PCAP_SAMPLE = "tcp-fast-open.pcap"  # 16 frames, little-endian microsecond pcap
PCAPNG_SAMPLE = "http_ip4and6.pcapng"  # 20 frames, several block types


def read(path: Path, **kw: object) -> tuple[list[RawFrame], Diagnostics]:
    diag = Diagnostics()
    with open_capture(path, diag, **kw) as r:  # type: ignore[arg-type]
        return list(r.frames()), diag


def record_ends(data: bytes) -> list[tuple[int, bool]]:
    """(end offset, is a packet) of each record/block after the file header (independent walker)."""
    out: list[tuple[int, bool]] = []
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        bo = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"  # one section in the samples
        off = 0
        while off + 8 <= len(data):
            btype, blen = struct.unpack_from(bo + "II", data, off)
            off += blen
            out.append((off, btype in (2, 3, 6)))
        return out
    off = 24
    while off + 16 <= len(data):
        (incl,) = struct.unpack_from("<I", data, off + 8)
        off += 16 + incl
        out.append((off, True))
    return out


# --------------------------------------------------------------------------- cannot open


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CaptureOpenError, match="not found"):
        open_capture(tmp_path / "nope.pcap", Diagnostics())


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(CaptureOpenError, match="is a directory"):
        open_capture(tmp_path, Diagnostics())


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_unreadable(tmp_path: Path) -> None:
    p = write(tmp_path / "secret.pcap", pcap_header())
    p.chmod(0)
    with pytest.raises(CaptureOpenError, match="permission"):
        open_capture(p, Diagnostics())


# --------------------------------------------------------------------------- not a capture


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(CaptureFormatError, match=r"is empty \(0 bytes\)"):
        open_capture(write(tmp_path / "e.pcap"), Diagnostics())


def _zip_bytes(tmp_path: Path) -> bytes:
    z = tmp_path / "a.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("capture.pcap", "x")
    return z.read_bytes()


@pytest.mark.parametrize(
    ("content", "magic", "looks_like"),
    [
        (b'{\n  "_index": "packets-2024",\n  "_source": {}\n}\n', "7b0a2020", "JSON"),
        (b'[\n  {\n    "_index": "packets"}]', "5b0a2020", "JSON"),
        (b"hello, this is a README\nsecond line\n", "68656c6c", "text"),
        (b"\x7fELF\x02\x01\x01\x00" + b"\0" * 56, "7f454c46", "an ELF executable"),
        (b"<!DOCTYPE html>\n<html><body>404</body></html>", "3c21444f", "HTML"),
        (b"  <html><head></head></html>", "20203c68", "HTML"),
        (b"%PDF-1.7\n", "25504446", "a PDF document"),
        (
            b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n",
            "434c4945",
            "a TLS key log file",
        ),
        (b"\x00\x01\x02\x03\xff\xfe\xfd", "00010203", "not recognised"),
    ],
)
def test_not_a_capture(tmp_path: Path, content: bytes, magic: str, looks_like: str) -> None:
    p = write(tmp_path / "capture.pcap", content)
    with pytest.raises(CaptureFormatError) as ei:
        open_capture(p, Diagnostics())
    msg = str(ei.value)
    assert f"expected pcap or pcapng magic, got 0x{magic}" in msg
    assert looks_like in msg


def test_zip_is_named(tmp_path: Path) -> None:
    with pytest.raises(CaptureFormatError, match=r"got 0x504b0304 \(this looks like a zip archive"):
        open_capture(write(tmp_path / "c.pcap", _zip_bytes(tmp_path)), Diagnostics())


def test_compressed_non_capture_names_the_compression(tmp_path: Path) -> None:
    p = write(tmp_path / "c.pcap.gz", gzip.compress(b'{"a": 1}\n'))
    with pytest.raises(
        CaptureFormatError,
        match=r"after gzip decompression, got 0x7b226122 \(this looks like JSON\)",
    ):
        open_capture(p, Diagnostics())
    p = write(tmp_path / "d.gz", b"\x1f\x8b\x08\x00garbage-not-deflate")
    with pytest.raises(CaptureFormatError, match="gzip"):
        open_capture(p, Diagnostics())


@pytest.mark.parametrize("n", [1, 3])
def test_too_short_for_a_magic(tmp_path: Path, n: int) -> None:
    with pytest.raises(CaptureFormatError, match=f"too short \\({n} bytes\\)"):
        open_capture(write(tmp_path / "s.pcap", pcap_header()[:n]), Diagnostics())


@pytest.mark.parametrize("n", [4, 10, 23])
def test_cut_pcap_file_header(tmp_path: Path, n: int) -> None:
    with pytest.raises(CaptureFormatError, match=f"pcap file header is cut off: {n} of 24 bytes"):
        open_capture(write(tmp_path / "h.pcap", pcap_header()[:n]), Diagnostics())


def test_header_only_files_have_no_frames(tmp_path: Path) -> None:
    assert read(write(tmp_path / "h.pcap", pcap_header()))[0] == []
    frames, diag = read(write(tmp_path / "h.pcapng", shb(), idb()))
    assert frames == [] and diag.rows == []


def test_frames_iterates_once(tmp_path: Path) -> None:
    with open_capture(write(tmp_path / "h.pcap", pcap_header()), Diagnostics()) as r:
        list(r.frames())
        with pytest.raises(RuntimeError):
            r.frames()


# --------------------------------------------------------------------------- cut off


def _check_cut(orig: bytes, all_frames: list[RawFrame], cut: int, tmp_path: Path) -> None:
    ends = record_ends(orig)
    path = write(tmp_path / "cut.bin", orig[:cut])
    frames, diag = read(path)
    complete_packets = sum(1 for end, is_pkt in ends if end <= cut and is_pkt)
    assert frames == all_frames[:complete_packets], cut
    at_boundary = cut in {e for e, _ in ends} or cut == (
        24 if orig[:4] != b"\x0a\x0d\x0d\x0a" else ends[0][0]
    )
    rows = [(r.code, r.frame) for r in diag.rows]
    if at_boundary:
        assert rows == [], cut
    else:
        assert len(rows) == 1 and rows[0][0] == "capture.truncated_record", (cut, rows)
        # the row names the frame number the cut record would have had, when it was a packet
        start = max([e for e, _ in ends if e <= cut] or [24])
        nxt = next(is_pkt for end, is_pkt in ends if end > cut)
        pcapng = orig[:4] == b"\x0a\x0d\x0d\x0a"
        known = nxt and (not pcapng or cut - start >= 4)  # a pcapng block type needs 4 bytes
        assert rows[0][1] == (complete_packets + 1 if known else None)
        assert f"offset {start}" in diag.rows[0].detail


@pytest.mark.parametrize("name", [PCAP_SAMPLE, PCAPNG_SAMPLE])
def test_truncated_at_and_inside_every_record(corpus: Path, tmp_path: Path, name: str) -> None:
    orig = (corpus / name).read_bytes()
    all_frames = read(corpus / name)[0]
    ends = record_ends(orig)
    assert ends[-1][0] == len(orig)
    first = 24 if name.endswith(".pcap") else ends[0][0]
    starts = [first] + [e for e, _ in ends[:-1] if e >= first]
    n_cuts = 0
    for start in starts:
        for delta in (0, 1, 4, 7, 8, 12, 16, 20):
            cut = start + delta
            if cut < len(orig):
                _check_cut(orig, all_frames, cut, tmp_path)
                n_cuts += 1
    assert n_cuts > 8 * (len(all_frames) - 1)


@pytest.mark.parametrize(
    "name", [PCAP_SAMPLE, PCAPNG_SAMPLE, "dump.pcapng", "syn_retransmit_with_ts.pcap"]
)
def test_truncated_at_random_offsets(corpus: Path, tmp_path: Path, name: str) -> None:
    orig = (corpus / name).read_bytes()
    all_frames = read(corpus / name)[0]
    first = 24 if name.endswith(".pcap") else record_ends(orig)[0][0]
    rng = random.Random(f"cut-{name}")
    for cut in sorted(rng.randrange(first, len(orig)) for _ in range(50)):
        _check_cut(orig, all_frames, cut, tmp_path)


# --------------------------------------------------------------------------- corrupt


def test_garbage_inside_records_does_not_change_framing(corpus: Path, tmp_path: Path) -> None:
    orig = bytearray((corpus / PCAP_SAMPLE).read_bytes())
    good = read(corpus / PCAP_SAMPLE)[0]
    # overwrite packet bytes (not record headers) with garbage
    off = 24
    rng = random.Random(7)
    for _ in good:
        (incl,) = struct.unpack_from("<I", orig, off + 8)
        for i in range(off + 16, off + 16 + incl):
            orig[i] = rng.randrange(256)
        off += 16 + incl
    frames, diag = read(write(tmp_path / "g.pcap", bytes(orig)))
    assert [(f.frame, f.ts_ns, f.orig_len, len(f.data)) for f in frames] == [
        (f.frame, f.ts_ns, f.orig_len, len(f.data)) for f in good
    ]
    assert diag.rows == []


def test_lying_record_length_in_the_middle(corpus: Path, tmp_path: Path) -> None:
    orig = bytearray((corpus / PCAP_SAMPLE).read_bytes())
    good = read(corpus / PCAP_SAMPLE)[0]
    ends = record_ends(bytes(orig))
    struct.pack_into("<I", orig, ends[4][0] + 8, 0x7FFFFFFF)  # record 6 claims 2 GiB
    frames, diag = read(write(tmp_path / "l.pcap", bytes(orig)))
    assert frames == good[:5]
    assert [(r.code, r.frame) for r in diag.rows] == [("capture.bad_record_length", 6)]


def test_mutations_never_raise(corpus: Path, tmp_path: Path) -> None:
    """Random byte changes after the file magic: reading ends cleanly, frames stay numbered."""
    for name in (PCAP_SAMPLE, PCAPNG_SAMPLE):
        orig = (corpus / name).read_bytes()
        rng = random.Random(f"mutate-{name}")
        outcomes = set()
        for i in range(150):
            data = bytearray(orig)
            for _ in range(rng.choice((1, 2, 8))):
                pos = rng.randrange(4, len(data))
                data[pos] = rng.randrange(256)
            path = write(tmp_path / f"m{i}.bin", bytes(data))
            diag = Diagnostics()
            try:
                reader = open_capture(path, diag)
            except CaptureFormatError:
                outcomes.add("format error")
                continue
            with reader:
                numbers = [f.frame for f in reader.frames()]
            assert numbers == sorted(set(numbers)) and all(n >= 1 for n in numbers)
            outcomes.add("read")
        assert "read" in outcomes


# --------------------------------------------------------------------------- compression

CODECS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
    "zstd": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
}


@functools.lru_cache(maxsize=8)
def compressed(path: Path, codec: str) -> bytes:
    return CODECS[codec](path.read_bytes())


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_corrupt_compressed_stream_keeps_frames_before(
    corpus: Path, tmp_path: Path, codec: str
) -> None:
    # 2 MB: several bzip2 blocks (900 kB each), so the damage is not in the first one
    good = read(corpus / "http2-with-cookies.pcapng")[0]
    comp = bytearray(compressed(corpus / "http2-with-cookies.pcapng", codec))
    mid = len(comp) * 3 // 4
    for i in range(mid, mid + 64):
        comp[i] ^= 0x5A
    frames, diag = read(write(tmp_path / "c.bin", bytes(comp)))
    same = next(
        (i for i, (a, b) in enumerate(zip(frames, good, strict=False)) if a != b),
        min(len(frames), len(good)),
    )
    assert same > 500 and len(frames) <= len(good)  # everything before the damage is intact
    codes = [r.code for r in diag.rows]
    # the decompressor notices the damage (bzip2 at the damaged block, gzip and zstd only through
    # their checksum at the end of the stream), or garbled bytes come out first and the pcapng
    # framing notices them: a row either way, never an exception
    assert {"capture.decompression_error", "capture.bad_block", "capture.bad_record_length"} & set(
        codes
    )
    for r in diag.rows:
        if r.code == "capture.decompression_error":
            assert codec in r.detail
    assert set(codes) <= {
        "capture.decompression_error",
        "capture.bad_block",
        "capture.bad_record_length",
        "capture.unknown_interface",
        "capture.unknown_block_type",
        "capture.timestamp_out_of_order",
    }


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_truncated_compressed_stream(corpus: Path, tmp_path: Path, codec: str) -> None:
    good = read(corpus / "http2-with-cookies.pcapng")[0]
    comp = compressed(corpus / "http2-with-cookies.pcapng", codec)
    frames, diag = read(write(tmp_path / "t.bin", comp[: len(comp) * 2 // 3]))
    assert 0 < len(frames) < len(good) and frames == good[: len(frames)]
    codes = [r.code for r in diag.rows]
    if codec == "zstd":
        # zstandard ends the stream silently: the cut shows as a truncated record
        assert codes in (["capture.truncated_record"], [])
    else:
        assert codes == ["capture.decompression_error"]
        assert "ended before the end-of-stream marker" in diag.rows[0].detail


@pytest.mark.parametrize("codec", [None, "gzip", "zstd"])
def test_max_decompressed_bytes(corpus: Path, tmp_path: Path, codec: str | None) -> None:
    raw = (corpus / "dump.pcapng").read_bytes()
    good = read(corpus / "dump.pcapng")[0]
    path = write(tmp_path / "x.bin", raw if codec is None else CODECS[codec](raw))
    frames, diag = read(path, max_decompressed_bytes=100_000)
    ends = record_ends(raw)
    expected = sum(1 for end, is_pkt in ends if end <= 100_000 and is_pkt)
    assert frames == good[:expected]
    assert [r.code for r in diag.rows] == ["capture.decompression_limit"]
    assert "100000" in diag.rows[0].detail
    # a limit above the size changes nothing
    frames, diag = read(path, max_decompressed_bytes=len(raw))
    assert frames == good and diag.rows == []


def test_bytes_read_progress(corpus: Path, tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.gz", gzip.compress((corpus / "http2-with-cookies.pcapng").read_bytes())
    )
    seen = []
    with open_capture(path, Diagnostics()) as r:
        size = r.file_size
        for f in r.frames():
            if f.frame % 200 == 0:
                seen.append(r.bytes_read)
        assert r.bytes_read == size
    assert seen == sorted(seen) and 0 < seen[0] <= size
    assert size == path.stat().st_size


def test_pcapng_epb_minimal_hand_built_truncations(tmp_path: Path) -> None:
    """A one-packet pcapng cut inside the EPB names frame 1 and its byte offset."""
    data = shb() + idb(1) + epb(0, 1, eth_tcp4(b"abc"))
    frames, diag = read(write(tmp_path / "x.pcapng", data[:-10]))
    assert frames == []
    assert [(r.code, r.frame) for r in diag.rows] == [("capture.truncated_record", 1)]
    assert "Enhanced Packet Block at byte offset 48" in diag.rows[0].detail
    frames, diag = read(write(tmp_path / "y.pcap", pcap_header() + pcap_record(1, eth_tcp4())[:-1]))
    assert frames == [] and [(r.code, r.frame) for r in diag.rows] == [
        ("capture.truncated_record", 1)
    ]
