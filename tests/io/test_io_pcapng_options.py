"""pcapng options that overrun their block, block types pcaptools skips, and the obsolete
Packet Block's data offset: hand-built files, compared with what tshark 4.0 does with them."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from helpers import block, dsb, epb, eth_tcp4, idb, opb, shb, write

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import RawFrame, open_capture

HAVE_TSHARK = shutil.which("tshark") is not None

#: an option (opt_comment) announcing 40 bytes of which 4 are in the block
OVERRUN = struct.pack("<HH", 1, 40) + b"abcd"


def pkt(i: int) -> bytes:
    return eth_tcp4(b"x" * i, seq=1000 + i)


def epb_raw(i: int, opts: bytes = b"", ticks: int | None = None) -> bytes:
    """An EPB on interface 0 whose option bytes are given as they are (no end-of-options)."""
    data = pkt(i)
    t = 1000 + i if ticks is None else ticks
    body = struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(data), len(data))
    return block(6, body + data + b"\0" * (-len(data) % 4) + opts)


def read(path: Path) -> tuple[list[RawFrame], Diagnostics]:
    diag = Diagnostics()
    with open_capture(path, diag) as r:
        frames = list(r.frames())
    return frames, diag


def tshark_run(path: Path) -> tuple[list[str], str]:
    """(frame numbers tshark shows, its error output without the root warning)."""
    r = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"],
                       capture_output=True, text=True, check=False)
    err = " ".join(line for line in r.stderr.splitlines() if "Running as user" not in line)
    return r.stdout.split(), err


def test_epb_option_overrun_is_a_row_and_the_rest_is_read(tmp_path: Path) -> None:
    good = [epb_raw(i) for i in (1, 2, 3, 4)]
    path = write(tmp_path / "o.pcapng", shb(), idb(1), good[0], epb_raw(9, OVERRUN, ticks=1001),
                 *good[1:])
    frames, diag = read(path)
    assert [(f.frame, f.data) for f in frames] == [
        (1, pkt(1)), (2, pkt(9)), (3, pkt(2)), (4, pkt(3)), (5, pkt(4))
    ]
    assert [(r.code, r.frame) for r in diag.rows] == [("capture.bad_option", 2)]
    detail = diag.rows[0].detail
    assert "option 1 of the Enhanced Packet Block at byte offset 136 (frame 2)" in detail
    assert "announces 40 bytes but 4 are left" in detail
    if HAVE_TSHARK:
        shown, err = tshark_run(path)
        assert shown == ["1"]  # tshark stops at the damaged block
        assert "damaged or corrupt" in err and "option of length 40" in err


def test_options_that_fit_give_no_row_on_either_read_path(tmp_path: Path) -> None:
    """EPBs with well-formed options (a comment, epb_flags, a last option ending without
    opt_endofopt, 2 stray bytes after the options) are read as without options."""
    opts = [
        struct.pack("<HH", 1, 3) + b"abc\0" + struct.pack("<HH", 0, 0),
        struct.pack("<HHI", 2, 4, 1),
        b"\x01\x00",  # fewer bytes than an option header: tshark reads it without complaint
        struct.pack("<HH", 0, 0) + OVERRUN,  # after opt_endofopt nothing is read
    ]
    blocks = [epb_raw(i, opts[i % 4]) for i in range(1, 41)]
    path = write(tmp_path / "f.pcapng", shb(), idb(1), *blocks)
    frames, diag = read(path)
    assert [f.data for f in frames] == [pkt(i) for i in range(1, 41)]
    assert diag.rows == []
    if HAVE_TSHARK:
        shown, err = tshark_run(path)
        assert shown == [str(i) for i in range(1, 41)] and "corrupt" not in err


def test_idb_option_overrun_keeps_the_options_before_it(tmp_path: Path) -> None:
    """if_tsresol (nanoseconds) comes before the bad option: it still applies."""
    body = struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 9, 1) + b"\x09\0\0\0" + OVERRUN
    path = write(tmp_path / "i.pcapng", shb(), block(1, body),
                 epb_raw(1, ticks=1_700_000_000_123_456_789),
                 epb_raw(2, ticks=1_700_000_001_000_000_000))
    frames, diag = read(path)
    assert [(f.frame, f.ts_ns) for f in frames] == [(1, 1_700_000_000_123_456_789),
                                                   (2, 1_700_000_001_000_000_000)]
    assert [(r.code, r.frame) for r in diag.rows] == [("capture.bad_option", None)]
    assert "Interface Description Block at byte offset 28" in diag.rows[0].detail
    if HAVE_TSHARK:
        shown, err = tshark_run(path)
        assert shown == [] and "option of length 40" in err


def test_shb_and_dsb_option_overruns(tmp_path: Path) -> None:
    bad_shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + OVERRUN)
    keys = b"# no keys\n"
    bad_dsb = block(10, struct.pack("<II", 0x544C534B, len(keys)) + keys + b"\0\0" + OVERRUN)
    path = write(tmp_path / "s.pcapng", bad_shb, idb(1), epb_raw(1), bad_dsb, epb_raw(2))
    diag = Diagnostics()
    with open_capture(path, diag) as r:
        frames = list(r.frames())
        secrets = list(r.secrets)
    assert [f.data for f in frames] == [pkt(1), pkt(2)]
    assert secrets == [(0x544C534B, keys)]
    assert [(r.code, r.detail.split(" at byte")[0]) for r in diag.rows] == [
        ("capture.bad_option", "option 1 of the Section Header Block"),
        ("capture.bad_option", "option 1 of the Decryption Secrets Block"),
    ]


def test_well_formed_dsb_with_options_gives_no_row(tmp_path: Path) -> None:
    keys = b"# no keys\n"
    ok_dsb = block(10, struct.pack("<II", 0x544C534B, len(keys)) + keys + b"\0\0"
                   + struct.pack("<HH", 1, 2) + b"hi\0\0" + struct.pack("<HH", 0, 0))
    path = write(tmp_path / "d.pcapng", shb(), idb(1), ok_dsb, epb_raw(1))
    frames, diag = read(path)
    assert len(frames) == 1 and diag.rows == []
    assert dsb(0x544C534B, keys)  # (the helper builds the same block without options)


@pytest.mark.parametrize(
    ("btype", "name"),
    [
        (7, "reserved (IRIG timestamp / ARINC 429)"),
        (8, "reserved (IRIG timestamp / ARINC 429)"),
        (0x80000001, "Darwin process event block"),
        (0x80001234, "local use"),
        (0x101, "Hone project block"),
        (0x201, "sysdig event block"),
        (0x00001234, "not registered"),
    ],
)
def test_every_skipped_block_type_gets_one_row(tmp_path: Path, btype: int, name: str) -> None:
    """Registered types pcaptools does not read used to be skipped silently; the docs
    promise a row for every type skipped (one per type, however many blocks)."""
    junk = block(btype, b"zzzz")
    path = write(tmp_path / "u.pcapng", shb(), idb(1), epb_raw(1), junk, epb_raw(2), junk,
                 epb_raw(3))
    frames, diag = read(path)
    assert [(f.frame, f.data) for f in frames] == [(1, pkt(1)), (2, pkt(2)), (3, pkt(3))]
    assert [r.code for r in diag.rows] == ["capture.unknown_block_type"]
    assert diag.rows[0].detail.startswith(f"pcapng block type 0x{btype:08x} ({name}; first at "
                                          "byte offset 136)")
    if HAVE_TSHARK:
        shown, err = tshark_run(path)
        assert shown == ["1", "2", "3"] and "corrupt" not in err  # tshark skips them silently


def test_obsolete_packet_block_data_matches_tshark(tmp_path: Path) -> None:
    """Type-2 Packet Blocks have 20 bytes of fields before the data, as EPBs (the data was
    read 4 bytes late before)."""
    data = eth_tcp4(b"hello, world")
    path = write(tmp_path / "p.pcapng", shb(), idb(1), opb(0, 5, data), epb(0, 6, pkt(1)))
    frames, diag = read(path)
    assert [f.data for f in frames] == [data, pkt(1)]
    assert diag.rows == []
    if HAVE_TSHARK:
        r = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "tcp.payload"],
                           capture_output=True, text=True, check=False)
        assert r.stdout.split()[0] == b"hello, world".hex()
