"""The reading layer against tshark 4.0: every frame of every corpus capture; compressed copies."""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from conftest import corpus_files
from oracle import tshark_fields

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import RawFrame, open_capture

pytestmark = [pytest.mark.corpus]

FRAME_FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "frame.len",
    "frame.cap_len",
    "frame.interface_id",
)

#: frames tshark shows per corpus capture (tshark/capinfos 4.0.17, see MANIFEST.md)
EXPECTED_FRAMES = {
    "dump.pcapng": 1095,
    "http2-with-cookies.pcapng": 1607,
    "many_interfaces-1.pcapng": 64,
    "pcapng-multi-interface.pcapng": 6,
    "tls_DER-incomplete-header.pcap": 6,
    "raw_ip.pcap": 100,
    "zerortt.pcap": 104,
    "nanosecs_big_endian.pcap": 10,
}


def epoch(ts_ns: int) -> str:
    """An integer-ns timestamp as tshark prints frame.time_epoch."""
    return f"{ts_ns // 1_000_000_000}.{ts_ns % 1_000_000_000:09d}"


def read_all(path: Path, **kw: object) -> tuple[list[RawFrame], Diagnostics]:
    diag = Diagnostics()
    with open_capture(path, diag, **kw) as reader:  # type: ignore[arg-type]
        frames = list(reader.frames())
    return frames, diag


def our_rows(frames: list[RawFrame], pcapng: bool) -> list[list[str]]:
    """Our frames as tshark prints FRAME_FIELDS (tshark shows no interface id for pcap files;
    all corpus pcapng files have one section, where our global interface index is tshark's)."""
    return [
        [
            str(f.frame),
            epoch(f.ts_ns),
            str(f.orig_len),
            str(len(f.data)),
            str(f.interface) if pcapng else "",
        ]
        for f in frames
    ]


@pytest.mark.tshark
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_frames_match_tshark(path: Path, tshark: str) -> None:
    """frame.number, frame.time_epoch (to the ns), frame.len, frame.cap_len, interface id."""
    expected = tshark_fields(path, FRAME_FIELDS)
    frames, diag = read_all(path)
    assert our_rows(frames, path.suffix == ".pcapng") == expected
    if path.name in EXPECTED_FRAMES:
        assert len(frames) == EXPECTED_FRAMES[path.name]
    # only the damaged file has a reading problem
    reading_rows = [
        r.code
        for r in diag.rows
        if r.code in ("capture.truncated_record", "capture.bad_record_length", "capture.bad_block")
    ]
    assert reading_rows == (
        ["capture.bad_record_length"] if path.name == "tls_DER-incomplete-header.pcap" else []
    )


def test_corrupt_record_keeps_frames_before_it(corpus: Path) -> None:
    """tls_DER-incomplete-header.pcap: tshark reads 6 frames then reports a read error."""
    frames, diag = read_all(corpus / "tls_DER-incomplete-header.pcap")
    assert [f.frame for f in frames] == [1, 2, 3, 4, 5, 6]
    (row,) = [r for r in diag.rows if r.code == "capture.bad_record_length"]
    assert row.frame == 7
    assert "4325376" in row.detail and "5035" in row.detail
    # frame 2 carries a bogus timestamp (2 time-travel rows would be wrong: only frame 2 is earlier)
    assert [r.frame for r in diag.rows if r.code == "capture.timestamp_out_of_order"] == [2]


def test_interfaces_and_secrets(corpus: Path) -> None:
    diag = Diagnostics()
    with open_capture(corpus / "many_interfaces-1.pcapng", diag) as r:
        frames = list(r.frames())
        assert r.format == "pcapng" and r.compression is None
        assert [i.linktype for i in r.interfaces] == [1, 1, 1, 1, 0, 1, 1, 1, 12, 1, 0]
        assert [i.name for i in r.interfaces][:5] == [
            "en0",
            "awdl0",
            "bridge0",
            "vboxnet0",
            "utun0",
        ]
        assert all(i.snaplen == 262144 and i.tsresol == 1_000_000 for i in r.interfaces)
        assert r.bytes_read == r.file_size == 20704
    assert sorted({(f.interface, f.linktype) for f in frames}) == [(0, 1), (10, 0)]
    assert sum(f.linktype == 0 for f in frames) == 2

    with open_capture(corpus / "pcapng-multi-interface.pcapng", Diagnostics()) as r:
        frames = list(r.frames())
        assert [i.tsresol for i in r.interfaces] == [1_000_000_000, 1_000_000]
        assert r.interfaces[0].name == "eth0"
    assert [f.interface for f in frames].count(1) >= 1

    with open_capture(corpus / "nanosecs_big_endian.pcap", Diagnostics()) as r:
        assert r.format == "pcap" and r.nanosecond
        assert r.interfaces[0].tsresol == 1_000_000_000 and r.interfaces[0].linktype == 1
        assert len(list(r.frames())) == 10

    with open_capture(corpus / "dsb-tls3.cryptohack.org.pcapng", Diagnostics()) as r:
        assert r.secrets == []  # filled as the blocks are read
        list(r.frames())
        ((stype, data),) = r.secrets
        assert stype == 0x544C534B and len(data) == 938
        assert data.startswith(b"SERVER_HANDSHAKE_TRAFFIC_SECRET ")
    assert (corpus / "keylogfile.txt").read_bytes().split() and sorted(data.split()) == sorted(
        (corpus / "keylogfile.txt").read_bytes().split()
    )

    with open_capture(corpus / "http2-with-cookies.pcapng", Diagnostics()) as r:
        list(r.frames())
        assert [(t, len(d)) for t, d in r.secrets] == [(0x544C534B, 27880)]


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
}
COMPRESSED_SAMPLES = (
    "dump.pcapng",
    "many_interfaces-1.pcapng",
    "nanosecs_big_endian.pcap",
    "raw_ip.pcap",
    "dsb-tls3.cryptohack.org.pcapng",
)


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
@pytest.mark.parametrize("name", COMPRESSED_SAMPLES)
def test_compressed_copies_give_identical_frames(
    corpus: Path, tmp_path: Path, codec: str, name: str
) -> None:
    plain, plain_diag = read_all(corpus / name)
    # a misleading file name on purpose: compression is found by magic bytes
    copy = tmp_path / (name + ".bin")
    copy.write_bytes(COMPRESSORS[codec]((corpus / name).read_bytes()))
    diag = Diagnostics()
    with open_capture(copy, diag) as r:
        assert r.compression == codec
        assert r.format == ("pcapng" if name.endswith(".pcapng") else "pcap")
        frames = list(r.frames())
        assert r.bytes_read == r.file_size == copy.stat().st_size
        secrets = list(r.secrets)
    assert frames == plain
    assert [x.code for x in diag.rows] == [x.code for x in plain_diag.rows]
    if name.startswith("dsb-"):
        assert len(secrets) == 1


def test_zstd_multi_frame_stream(corpus: Path, tmp_path: Path) -> None:
    """A zstd file made of several frames (as zstd writes for concatenated input) reads through."""
    data = (corpus / "dump.pcapng").read_bytes()
    c = zstandard.ZstdCompressor()
    copy = tmp_path / "x.zst"
    copy.write_bytes(c.compress(data[:100_000]) + c.compress(data[100_000:]))
    assert read_all(copy)[0] == read_all(corpus / "dump.pcapng")[0]
