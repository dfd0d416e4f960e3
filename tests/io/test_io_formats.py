"""Hand-built pcap and pcapng files (tests/helpers.py writers): every format feature, with
concrete values, and the frame numbering checked against tshark where it reads the file."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from helpers import block as pcapng_block
from helpers import (
    custom_block,
    dsb,
    epb,
    eth_tcp4,
    idb,
    isb,
    nrb,
    opb,
    pcap_header,
    pcap_record,
    shb,
    spb,
    write,
)
from oracle import tshark_fields

from pcaptools.diagnostics import Diagnostics
from pcaptools.errors import CaptureFormatError
from pcaptools.io import RawFrame, open_capture

HAVE_TSHARK = shutil.which("tshark") is not None


def pkt(i: int) -> bytes:
    return eth_tcp4(b"x" * i, seq=i)


def read(path: Path) -> tuple[list[RawFrame], Diagnostics, object]:
    diag = Diagnostics()
    with open_capture(path, diag) as r:
        frames = list(r.frames())
    return frames, diag, r


def codes(diag: Diagnostics) -> list[tuple[str, int | None]]:
    return [(r.code, r.frame) for r in diag.rows]


def epoch(ts_ns: int) -> str:
    return f"{ts_ns // 1_000_000_000}.{ts_ns % 1_000_000_000:09d}"


def check_tshark(
    path: Path,
    frames: list[RawFrame],
    *,
    no_time: tuple[int, ...] = (),
    tshark_stops_after: int | None = None,
) -> None:
    """Our packet frames equal tshark's rows for them: number, time, frame.len, frame.cap_len.

    ``no_time``: frames tshark shows without a timestamp (Simple Packet Blocks).
    ``tshark_stops_after``: tshark reports a read error after this frame where we read on.
    """
    if not HAVE_TSHARK:
        return
    rows = tshark_fields(path, ("frame.number", "frame.time_epoch", "frame.len", "frame.cap_len"))
    ours = {
        f.frame: [
            str(f.frame),
            "" if f.frame in no_time else epoch(f.ts_ns),
            str(f.orig_len),
            str(len(f.data)),
        ]
        for f in frames
    }
    if tshark_stops_after is None:
        assert [r for r in rows if int(r[0]) in ours] == [v for _, v in sorted(ours.items())]
    else:
        assert rows and int(rows[-1][0]) == tshark_stops_after
        assert [r for r in rows if int(r[0]) in ours] == [
            v for k, v in sorted(ours.items()) if k <= tshark_stops_after
        ]


# --------------------------------------------------------------------------- pcap


@pytest.mark.parametrize("bo", ["<", ">"])
@pytest.mark.parametrize("nsec", [False, True])
def test_pcap_byte_orders_and_resolutions(tmp_path: Path, bo: str, nsec: bool) -> None:
    ts = [1_700_000_000_123_456_789, 1_700_000_001_000_000_001, 1_700_000_002_999_999_999]
    path = write(
        tmp_path / "a.pcap",
        pcap_header(1, 65535, nsec=nsec, bo=bo),
        *(pcap_record(t, pkt(i), nsec=nsec, bo=bo) for i, t in enumerate(ts)),
    )
    frames, diag, r = read(path)
    assert r.format == "pcap" and r.nanosecond is nsec  # type: ignore[attr-defined]
    assert r.interfaces[0].tsresol == (10**9 if nsec else 10**6)  # type: ignore[attr-defined]
    assert r.interfaces[0].snaplen == 65535  # type: ignore[attr-defined]
    expect = ts if nsec else [t // 1000 * 1000 for t in ts]
    assert [(f.frame, f.ts_ns, f.data, f.orig_len, f.linktype, f.interface) for f in frames] == [
        (i + 1, t, pkt(i), len(pkt(i)), 1, 0) for i, t in enumerate(expect)
    ]
    assert diag.rows == []
    check_tshark(path, frames)


def test_pcap_fcs_bits_masked(tmp_path: Path) -> None:
    linktype = 1 | 0x04000000 | (2 << 28)  # FCS length present: 2 x 16 bits
    path = write(
        tmp_path / "fcs.pcap", pcap_header(linktype), pcap_record(10**9, pkt(1) + b"\0\0\0\0")
    )
    frames, _, r = read(path)
    assert r.interfaces[0].linktype == 1 and r.interfaces[0].fcs_len == 4  # type: ignore[attr-defined]
    assert frames[0].linktype == 1


def test_pcap_zero_length_and_odd_lengths(tmp_path: Path) -> None:
    """Zero-length records are frames; caplen > snaplen, orig_len < caplen are kept (as tshark)."""
    path = write(
        tmp_path / "z.pcap",
        pcap_header(1, 65535),
        pcap_record(1 * 10**9, pkt(1)),
        pcap_record(2 * 10**9, b""),
        pcap_record(3 * 10**9, pkt(3)),
    )
    frames, diag, _ = read(path)
    assert [(f.frame, f.data, f.orig_len) for f in frames] == [
        (1, pkt(1), 55),
        (2, b"", 0),
        (3, pkt(3), 57),
    ]
    assert diag.rows == []
    check_tshark(path, frames)
    # (tshark's format sniffing misreads this combination with a zero-length record: separate)
    path = write(
        tmp_path / "o.pcap",
        pcap_header(1, 60),
        pcap_record(1 * 10**9, pkt(1)),
        pcap_record(3 * 10**9, pkt(300)),
        pcap_record(4 * 10**9, pkt(3), orig_len=10),
    )
    frames, diag, _ = read(path)
    assert [(f.frame, len(f.data), f.orig_len) for f in frames] == [
        (1, 55, 55),
        (2, 354, 354),
        (3, 57, 10),
    ]
    assert diag.rows == []
    check_tshark(path, frames)


def test_pcap_modified_magic(tmp_path: Path) -> None:
    """Kuznetzov's patched libpcap format: 8 more bytes per record header."""
    hdr = pcap_header(1, magic=0xA1B2CD34)
    rec = struct.pack("<IIII", 5, 250, 55, 55) + b"\0" * 8 + pkt(1)
    frames, diag, _ = read(write(tmp_path / "m.pcap", hdr, rec, rec))
    assert [(f.frame, f.ts_ns, f.data) for f in frames] == [
        (1, 5_000_250_000, pkt(1)),
        (2, 5_000_250_000, pkt(1)),
    ]
    assert diag.rows == []


def test_pcap_absurd_lengths(tmp_path: Path) -> None:
    good = pcap_record(10**9, pkt(1))
    for incl in (262_145, 4_325_376, 300 * 1024 * 1024, 0xFFFFFFFF):
        path = write(
            tmp_path / f"bad{incl}.pcap",
            pcap_header(),
            good,
            good,
            struct.pack("<IIII", 1, 0, incl, incl) + b"garbage" * 10,
            good,
        )
        frames, diag, _ = read(path)
        assert [f.frame for f in frames] == [1, 2]
        assert codes(diag) == [("capture.bad_record_length", 3)]
        assert str(incl) in diag.rows[0].detail and "offset 166" in diag.rows[0].detail


def test_pcap_large_maximum_for_usb(tmp_path: Path) -> None:
    """USB link types may carry records above 262144 bytes (as in Wireshark)."""
    big = b"\0" * 300_000
    frames, diag, _ = read(write(tmp_path / "usb.pcap", pcap_header(220), pcap_record(10**9, big)))
    assert len(frames) == 1 and len(frames[0].data) == 300_000 and diag.rows == []


def test_pcap_timestamp_out_of_order(tmp_path: Path) -> None:
    path = write(
        tmp_path / "o.pcap",
        pcap_header(),
        pcap_record(5 * 10**9, pkt(1)),
        pcap_record(4 * 10**9, pkt(2)),
        pcap_record(6 * 10**9, pkt(3)),
    )
    frames, diag, _ = read(path)
    assert len(frames) == 3
    assert codes(diag) == [("capture.timestamp_out_of_order", 2)]
    assert diag.rows[0].ts_ns == 4 * 10**9


# --------------------------------------------------------------------------- pcapng


def test_pcapng_two_sections_of_different_byte_order(tmp_path: Path) -> None:
    path = write(
        tmp_path / "two.pcapng",
        shb("<"),
        idb(1, name="a", tsresol=9),
        idb(101, name="b"),
        epb(0, 1_500_000_001, pkt(1)),
        epb(1, 7_000_000, pkt(2)[14:]),
        shb(">"),
        idb(113, bo=">", name="c", tsresol=0x80 | 10, tsoffset=100),
        epb(0, 1025, b"\0" * 16 + pkt(3)[14:], bo=">"),
        epb(0, 1023, b"\0" * 16 + pkt(4)[14:], bo=">"),
    )
    frames, diag, r = read(path)
    ifs = r.interfaces  # type: ignore[attr-defined]
    assert [(i.linktype, i.name, i.section, i.tsresol, i.tsoffset) for i in ifs] == [
        (1, "a", 0, 10**9, 0),
        (101, "b", 0, 10**6, 0),
        (113, "c", 1, 1024, 100),
    ]
    assert [(f.frame, f.interface, f.linktype, f.ts_ns) for f in frames] == [
        (1, 0, 1, 1_500_000_001),
        (2, 1, 101, 7_000_000_000),
        (3, 2, 113, 101_000_976_562),  # 1025/1024 s, truncated to the ns as Wireshark does, + 100 s
        (4, 2, 113, 100_999_023_437),
    ]
    assert codes(diag) == [("capture.timestamp_out_of_order", 4)]
    check_tshark(path, frames)


@pytest.mark.parametrize(
    ("tsresol", "ticks", "expected_ns"),
    [
        (3, 1_234_567, 1_234_567_000_000),  # milliseconds
        (6, 1_234_567, 1_234_567_000),
        (9, 1_234_567, 1_234_567),
        (0x80 | 0, 7, 7_000_000_000),  # 2^0
        (0x80 | 20, 3 * 2**20 + 1, 3_000_000_953),  # 2^-20
        (0x80 | 30, 2**30 + 3, 1_000_000_002),
    ],
)
def test_pcapng_if_tsresol(tmp_path: Path, tsresol: int, ticks: int, expected_ns: int) -> None:
    path = write(tmp_path / "r.pcapng", shb(), idb(1, tsresol=tsresol), epb(0, ticks, pkt(1)))
    frames, diag, _ = read(path)
    assert [f.ts_ns for f in frames] == [expected_ns] and diag.rows == []
    check_tshark(path, frames)


def test_pcapng_picosecond_resolution(tmp_path: Path) -> None:
    """if_tsresol 12: truncated to the ns. tshark 4.0 overflows 64 bits computing
    (ticks % 10**12) * 10**9 and prints 1234.014488912 here: a known difference."""
    path = write(
        tmp_path / "ps.pcapng", shb(), idb(1, tsresol=12), epb(0, 1_234_567_891_234_567, pkt(1))
    )
    frames, _, _ = read(path)
    assert [f.ts_ns for f in frames] == [1_234_567_891_234]
    if HAVE_TSHARK:
        assert tshark_fields(path, ("frame.time_epoch",)) == [["1234.014488912"]]


def test_pcapng_if_tsoffset(tmp_path: Path) -> None:
    path = write(
        tmp_path / "o.pcapng",
        shb(),
        idb(1, tsoffset=1_600_000_000),
        epb(0, 2_500_000, pkt(1)),
        idb(1, tsoffset=-10, tsresol=9),
        epb(1, 20_000_000_005, pkt(2)),
    )
    frames, _, _ = read(path)
    assert [f.ts_ns for f in frames] == [1_600_000_002_500_000_000, 10_000_000_005]
    check_tshark(path, frames)


def test_pcapng_simple_and_obsolete_packet_blocks(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.pcapng",
        shb(),
        idb(1, snaplen=60),
        epb(0, 5_000_000, pkt(1)),
        spb(pkt(20)[:60], orig_len=len(pkt(20))),
        spb(pkt(2)),
        opb(0, 7_000_000, pkt(3)),
        spb(b""),
    )
    frames, diag, _ = read(path)
    assert [(f.frame, f.ts_ns, len(f.data), f.orig_len) for f in frames] == [
        (1, 5_000_000_000, 55, 55),
        (
            2,
            5_000_000_000,
            60,
            74,
        ),  # SPB: no timestamp (tshark shows none): the previous frame's time
        (3, 5_000_000_000, 56, 56),  # padding bytes of the block are not data
        (4, 7_000_000_000, 57, 57),
        (5, 7_000_000_000, 0, 0),
    ]
    assert frames[1].data == pkt(20)[:60] and frames[2].data == pkt(2)
    assert diag.rows == []
    check_tshark(path, frames, no_time=(2, 3, 5))


def test_pcapng_secrets(tmp_path: Path) -> None:
    keylog = b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n"
    bad = pcapng_block(10, struct.pack("<II", 0x544C534B, 500) + b"short")
    path = write(
        tmp_path / "d.pcapng",
        shb(),
        dsb(0x544C534B, keylog),
        idb(1),
        epb(0, 1, pkt(1)),
        dsb(0x57474B4C, b"wg-key"),
        bad,
        epb(0, 2, pkt(2)),
    )
    diag = Diagnostics()
    with open_capture(path, diag) as r:
        it = r.frames()
        first = next(it)
        assert first.frame == 1 and r.secrets == [(0x544C534B, keylog)]
        rest = list(it)
        assert r.secrets == [(0x544C534B, keylog), (0x57474B4C, b"wg-key")]
    assert [f.frame for f in rest] == [2]
    assert codes(diag) == [("capture.secrets_unsupported", None), ("capture.bad_block", None)]
    assert "WireGuard" in diag.rows[0].detail
    check_tshark(path, [first, *rest], tshark_stops_after=1)  # tshark stops at the malformed DSB


def test_pcapng_skipped_and_counted_blocks(tmp_path: Path) -> None:
    """NRB/ISB skipped silently; custom blocks and journal entries take a frame number as in
    Wireshark (not yielded); every other block type skipped gives one row per type."""
    journal = pcapng_block(9, b"__REALTIME_TIMESTAMP=1000000\nMESSAGE=hello\n")
    path = write(
        tmp_path / "k.pcapng",
        shb(),
        idb(1),
        nrb(),
        epb(0, 1, pkt(1)),
        pcapng_block(0x1234, b"abcd"),
        custom_block(),
        isb(),
        custom_block(copy=False),
        pcapng_block(0x1234, b"efgh"),
        journal,
        pcapng_block(0x204, b"\0" * 64),
        pcapng_block(0x205, b"\0" * 16),
        epb(0, 2, pkt(2)),
    )
    frames, diag, r = read(path)
    # 2, 3: custom blocks; 4: journal entry; 5: sysdig event; 0x205 (sysdig meta) is not a record
    assert [(f.frame, f.data) for f in frames] == [(1, pkt(1)), (6, pkt(2))]
    assert r.frame_count == 6  # type: ignore[attr-defined]
    # one row per type skipped: 0x1234 (not registered), 0x205 (sysdig meta event, not read)
    assert codes(diag) == [("capture.unknown_block_type", None)] * 2
    assert "0x00001234 (not registered;" in diag.rows[0].detail
    assert "0x00000205 (sysdig event block;" in diag.rows[1].detail
    check_tshark(path, frames)
    if HAVE_TSHARK:
        assert [r[1] for r in tshark_fields(path, ("frame.number", "frame.protocols"))] == [
            "eth:ethertype:ip:tcp",
            "data",
            "data",
            "systemd_journal",
            "data",
            "eth:ethertype:ip:tcp",
        ]


def test_pcapng_bad_trailer_stops(tmp_path: Path) -> None:
    bad = pcapng_block(6, epb(0, 2, pkt(2))[8:-4], trailer=999)
    path = write(tmp_path / "t.pcapng", shb(), idb(1), epb(0, 1, pkt(1)), bad, epb(0, 3, pkt(3)))
    frames, diag, _ = read(path)
    assert [f.frame for f in frames] == [1]
    assert codes(diag) == [("capture.bad_block", None)]
    assert "999" in diag.rows[0].detail and "offset 136" in diag.rows[0].detail
    check_tshark(path, frames)


@pytest.mark.parametrize("length", [8, 13, 0x7FFFFFF0, 0xFFFFFFFC])
def test_pcapng_impossible_block_length(tmp_path: Path, length: int) -> None:
    path = write(
        tmp_path / "l.pcapng",
        shb(),
        idb(1),
        epb(0, 1, pkt(1)),
        struct.pack("<II", 6, length) + b"\0" * 64,
        epb(0, 3, pkt(3)),
    )
    frames, diag, _ = read(path)
    assert [f.frame for f in frames] == [1]
    assert codes(diag) == [("capture.bad_block", None)]


def test_pcapng_caplen_larger_than_block_or_maximum(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.pcapng",
        shb(),
        idb(1),
        epb(0, 1, pkt(1)),
        epb(0, 2, pkt(2), caplen=200),
        epb(0, 3, pkt(3)),
    )
    frames, diag, _ = read(path)
    assert [f.frame for f in frames] == [1]
    assert codes(diag) == [("capture.bad_record_length", 2)]
    check_tshark(path, frames)
    big = b"\0" * 262_148
    path = write(
        tmp_path / "m.pcapng", shb(), idb(1), epb(0, 1, pkt(1)), epb(0, 2, big), epb(0, 3, pkt(3))
    )
    frames, diag, _ = read(path)
    assert [f.frame for f in frames] == [1]
    assert codes(diag) == [("capture.bad_record_length", 2)] and "262144" in diag.rows[0].detail


def test_pcapng_undefined_interface(tmp_path: Path) -> None:
    """tshark stops at a packet naming an undefined interface (frames before it agree); we
    count it, skip it with a row and read on."""
    path = write(
        tmp_path / "u.pcapng",
        shb(),
        idb(1),
        epb(0, 1_000_000, pkt(1)),
        epb(3, 2_000_000, pkt(2)),
        epb(0, 3_000_000, pkt(3)),
    )
    frames, diag, _ = read(path)
    assert [(f.frame, f.data) for f in frames] == [(1, pkt(1)), (3, pkt(3))]
    assert codes(diag) == [("capture.unknown_interface", 2)]
    assert "interface 3" in diag.rows[0].detail
    check_tshark(path, frames, tshark_stops_after=1)
    # a Simple Packet Block before any IDB refers to the undefined interface 0
    path = write(tmp_path / "s.pcapng", shb(), spb(pkt(1)), idb(1), epb(0, 1, pkt(2)))
    frames, diag, _ = read(path)
    assert [f.frame for f in frames] == [2] and codes(diag) == [("capture.unknown_interface", 1)]


def test_pcapng_zero_length_packets(tmp_path: Path) -> None:
    path = write(
        tmp_path / "z.pcapng",
        shb(),
        idb(1),
        epb(0, 1, b""),
        epb(0, 7_000_000, pkt(3)),
        opb(0, 8, b""),
    )
    frames, diag, _ = read(path)
    assert [(f.frame, f.data, f.orig_len) for f in frames] == [
        (1, b"", 0),
        (2, pkt(3), 57),
        (3, b"", 0),
    ]
    assert codes(diag) == [("capture.timestamp_out_of_order", 3)]
    check_tshark(path, frames)


def test_pcapng_idb_options_and_late_idb(tmp_path: Path) -> None:
    path = write(
        tmp_path / "i.pcapng",
        shb(),
        idb(1, name="eth0", extra_opts=[(3, b"uplink"), (13, b"\x04")]),
        epb(0, 1, pkt(1)),
        idb(101, snaplen=96),
        epb(1, 2, pkt(2)[14:]),
    )
    frames, diag, r = read(path)
    i0, i1 = r.interfaces  # type: ignore[attr-defined]
    assert (i0.name, i0.description, i0.fcs_len, i0.linktype_name) == (
        "eth0",
        "uplink",
        4,
        "LINKTYPE_ETHERNET (1)",
    )
    assert (i1.linktype, i1.snaplen, i1.name) == (101, 96, None)
    assert [(f.frame, f.linktype, f.interface) for f in frames] == [(1, 1, 0), (2, 101, 1)]
    assert diag.rows == []


def test_pcapng_bad_first_section(tmp_path: Path) -> None:
    with pytest.raises(CaptureFormatError, match="byte-order magic"):
        read(
            write(
                tmp_path / "bom.pcapng",
                struct.pack("<III", 0x0A0D0D0A, 28, 0x11223344) + b"\0" * 16,
            )
        )
    with pytest.raises(CaptureFormatError, match="version 2"):
        read(
            write(
                tmp_path / "v2.pcapng",
                struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 2, 0, -1)
                + struct.pack("<I", 28),
            )
        )
    with pytest.raises(CaptureFormatError, match=r"cut off|ends inside"):
        read(write(tmp_path / "cut.pcapng", shb()[:20]))


def test_pcapng_bad_later_section(tmp_path: Path) -> None:
    path = write(
        tmp_path / "b.pcapng",
        shb(),
        idb(1),
        epb(0, 1, pkt(1)),
        struct.pack("<III", 0x0A0D0D0A, 28, 0x11223344) + b"\0" * 16,
        epb(0, 2, pkt(2)),
    )
    frames, diag, _ = read(path)
    assert [f.frame for f in frames] == [1] and codes(diag) == [("capture.bad_block", None)]
