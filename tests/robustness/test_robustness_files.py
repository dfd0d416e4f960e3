"""Bad-input catalogue, file level: not a capture, cut off, lying lengths, odd pcapng blocks,
compressed files that are corrupt or decompress to gigabytes. Everything goes through
``pcaptools.load()``; the reader-level cases (every record boundary of corpus files, random
mutations, each compression codec) live in ``tests/io`` and are not repeated here.

Each case asserts: a clear error or the expected warning codes, the good connection's rows
unchanged wherever the damage comes after it or beside it, and a bound on memory."""

from __future__ import annotations

import gzip
import struct
import zipfile
from pathlib import Path

import pytest
import zstandard

import pcaptools
from tests.helpers import block, dsb, epb, idb, isb, nrb, pcap_header, pcap_record, shb
from tests.robustness._build import (
    GOOD_RESPONSE,
    T0,
    assert_good_unchanged,
    bounded,
    codes,
    good_conv,
    load_bytes,
    pcap,
    rows,
)

# --------------------------------------------------------------------------- not a capture


def _zip(tmp_path: Path) -> bytes:
    z = tmp_path / "a.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("capture.pcap", pcap(good_conv()))
    return z.read_bytes()


def _elf() -> bytes:
    return b"\x7fELF\x02\x01\x01\x00" + b"\0" * 8 + struct.pack("<HHI", 2, 62, 1) + b"\0" * 200


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"is empty \(0 bytes\)"),
        (b'{"packets": [1, 2, 3]}\n', "this looks like JSON"),
        (b"Release notes\n\nNothing to see here.\n", "this looks like text"),
        (_elf(), "this looks like an ELF executable"),
        (b"zip", "this looks like a zip archive"),
        (b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n", "a TLS key log file"),
        (gzip.compress(b"<html><body>502 Bad Gateway</body></html>"), "after gzip decompression"),
        (b"\xd4\xc3", r"too short \(2 bytes\)"),
    ],
    ids=["empty", "json", "text", "elf", "zip", "keylog", "gzip-html", "two-bytes"],
)
def test_not_a_capture_is_one_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    if content == b"zip":
        content = _zip(tmp_path)
    p = tmp_path / "upload.pcapng"
    p.write_bytes(content)
    with pytest.raises(pcaptools.CaptureFormatError, match=message) as ei:
        pcaptools.load(p)
    assert str(p) in str(ei.value)  # the message names the file...
    assert "\n" not in str(ei.value)  # ...on one line, without echoing the content


def test_a_capture_given_as_the_key_log_is_not_an_error(tmp_path: Path) -> None:
    """Binary garbage as a key log: every line is a bad line, counted, never shown."""
    cap_path = tmp_path / "c.pcap"
    cap_path.write_bytes(pcap(good_conv()))
    cap = pcaptools.load(cap_path, keylog=cap_path)
    assert set(codes(cap)) == {"tls.keylog_bad_line"}
    assert_good_unchanged(cap, pcaptools.load(cap_path))
    for detail in cap.warnings["detail"]:
        assert "\\x" not in detail and "\x00" not in detail


# --------------------------------------------------------------------------- pcapng cut everywhere


def _pcapng_blocks() -> list[bytes]:
    """A pcapng of the good connection with every non-packet block type in between."""
    conv = good_conv()
    blocks = [shb(), idb(1, tsresol=9), nrb(), dsb(0x544C534B, b"# empty key log\n")]
    for i, (ts, frame) in enumerate(conv.packets):
        blocks.append(epb(0, ts, frame))
        if i == 4:
            blocks += [isb(0), block(0x00001234, b"unknown block body")]
    return blocks


_LATER = ("ack_rtt_ms", "acks_frame")  # filled in by a later packet


def test_pcapng_cut_at_and_inside_every_block(tmp_path: Path) -> None:
    blocks = _pcapng_blocks()
    data = b"".join(blocks)
    full = load_bytes(tmp_path, data, "full.pcapng")
    assert len(full.http_requests) == 1 and full.summary.frames == 18
    assert codes(full) == ["capture.unknown_block_type"]
    starts, pos = [], 0
    for b in blocks:
        starts.append(pos)
        pos += len(b)
    cuts = {s + d for s in starts[1:] for d in (0, 1, 4, 8, 11, 27)} | {len(data) - 1}
    outcomes: dict[str, int] = {}
    for cut in sorted(c for c in cuts if c < len(data)):
        cap = load_bytes(tmp_path, data[:cut], "cut.pcapng")
        n = cap.summary.frames
        at_boundary = cut in starts
        complete_epbs = sum(
            1
            for s, b in zip(starts, blocks, strict=True)
            if s + len(b) <= cut and b[:4] == b"\x06\0\0\0"
        )
        assert n == complete_epbs, cut
        # everything before the cut: same packets, same TCP analysis
        assert rows(cap.packets, _LATER) == rows(full.packets, _LATER)[:n], cut
        got = set(codes(cap))
        truncation = {"capture.truncated_record"} if not at_boundary else set()
        allowed = truncation | {
            "capture.unknown_block_type",
            "http1.truncated_message",
            "tcp.reassembly_gap",
        }
        assert truncation <= got <= allowed, (cut, got)
        if len(cap.http_requests):
            assert cap.http_requests["path"].tolist() == ["/v1/models"]
        outcomes[
            cap.http_requests["end_reason"].astype(str).iloc[0]
            if len(cap.http_requests)
            else "none"
        ] = 1
    # cuts before the request, inside the response, after it
    assert {"none", "complete"} <= set(outcomes)


# --------------------------------------------------------------------------- lying lengths


def _good_records() -> bytes:
    return pcap(good_conv())[24:]


@pytest.mark.parametrize(
    ("snaplen", "incl", "orig"),
    [
        (1500, 9000, 9000),  # caplen > snaplen, but a sane size: kept (as tshark)
        (262144, 262145, 262145),  # above the largest record tshark accepts
        (262144, 300 << 20, 300 << 20),  # above 256 MiB
        (262144, 0xFFFFFFFF, 0xFFFFFFFF),
    ],
    ids=["over-snaplen", "over-max", "over-256MiB", "u32-max"],
)
def test_record_longer_than_allowed(tmp_path: Path, snaplen: int, incl: int, orig: int) -> None:
    header = pcap_header(1, snaplen, nsec=True)
    bad = struct.pack("<IIII", T0 // 10**9 + 1, 0, incl, orig) + b"\x00" * 64
    data = header + _good_records() + bad + _good_records()
    cap, _ = bounded(lambda: load_bytes(tmp_path, data))
    ref = load_bytes(tmp_path, pcap(good_conv()), "ref.pcap")
    assert_good_unchanged(cap, ref)
    if incl == 9000:
        # not a length error: the record is read as 9000 bytes (64 present, then the next
        # record's bytes), and the file ends inside it
        assert "capture.bad_record_length" not in codes(cap)
        assert "capture.truncated_record" in codes(cap)
    else:
        assert codes(cap) == ["capture.bad_record_length"]
        assert cap.summary.frames == 18
        assert str(incl) in cap.warnings["detail"].iloc[0]


def test_zero_length_records_between_packets(tmp_path: Path) -> None:
    conv = good_conv()
    recs = [pcap_record(ts, f, nsec=True) for ts, f in conv.packets]
    zeros = [pcap_record(conv.packets[0][0], b"", nsec=True)] * 3
    last = pcap_record(conv.packets[-1][0], b"", nsec=True)
    data = pcap_header(nsec=True) + recs[0] + b"".join(zeros) + b"".join(recs[1:]) + last
    cap = load_bytes(tmp_path, data)
    assert cap.summary.frames == 18 + 4
    assert cap.summary.non_ip_frames == 4
    assert codes(cap) == ["net.truncated_link_header"] * 4
    assert cap.warnings["frame"].tolist() == [2, 3, 4, 22]
    assert_good_unchanged(cap, load_bytes(tmp_path, pcap(conv), "ref.pcap"))


# --------------------------------------------------------------------------- pcapng oddities


def _epbs(conv_packets: list[tuple[int, bytes]], bo: str = "<", iface: int = 0) -> list[bytes]:
    return [epb(iface, ts, f, bo=bo) for ts, f in conv_packets]


def test_pcapng_unknown_blocks_everywhere(tmp_path: Path) -> None:
    pk = _epbs(good_conv().packets)
    junk = [block(t, b"x" * n) for t, n in ((0x00001234, 0), (0x0FFFFFFF, 13), (0x80000001, 400))]
    body = [b for i, e in enumerate(pk) for b in (e, junk[i % 3])]
    data = shb() + idb(1, tsresol=9) + b"".join(body)
    cap = load_bytes(tmp_path, data, "u.pcapng")
    ref = load_bytes(tmp_path, shb() + idb(1, tsresol=9) + b"".join(pk), "ref.pcapng")
    assert_good_unchanged(cap, ref)
    # one row per type: not registered, reserved, local use (Darwin process events)
    assert codes(cap) == ["capture.unknown_block_type"] * 3
    assert {d.split(" (")[0] for d in cap.warnings["detail"]} == {
        f"pcapng block type 0x{t:08x}" for t in (0x00001234, 0x0FFFFFFF, 0x80000001)
    }


def test_pcapng_bad_trailer_keeps_what_came_before(tmp_path: Path) -> None:
    pk = _epbs(good_conv().packets)
    bad = pk[10][:-4] + struct.pack("<I", 12345)
    data = shb() + idb(1, tsresol=9) + b"".join(pk[:10]) + bad + b"".join(pk[11:])
    cap = load_bytes(tmp_path, data, "t.pcapng")
    assert cap.summary.frames == 10
    assert codes(cap)[0] == "capture.bad_block"
    assert "12345" in cap.warnings["detail"].iloc[0]
    # the cut-off connection is still a row, with the response partly seen
    assert set(codes(cap)) <= {"capture.bad_block", "http1.truncated_message"}
    assert cap.http_requests["end_reason"].astype(str).tolist() == ["open_at_eof"]


def test_pcapng_packet_on_an_undefined_interface(tmp_path: Path) -> None:
    pk = good_conv().packets
    epbs = _epbs(pk)
    stray = epb(7, pk[5][0], pk[5][1])  # a copy of frame 6 on interface 7
    data = shb() + idb(1, tsresol=9) + b"".join(epbs[:6]) + stray + b"".join(epbs[6:])
    cap = load_bytes(tmp_path, data, "i.pcapng")
    assert [(c, f) for c, f in zip(codes(cap), cap.warnings["frame"], strict=True)] == [
        ("capture.unknown_interface", 7)
    ]
    ref = load_bytes(tmp_path, shb() + idb(1, tsresol=9) + b"".join(epbs), "ref.pcapng")
    assert cap.summary.frames == 18  # frame 7 is numbered, not analysed
    assert_good_unchanged(cap, ref)


def test_pcapng_second_section_in_the_other_byte_order(tmp_path: Path) -> None:
    pk = good_conv().packets
    data = (
        shb("<")
        + idb(1, tsresol=9)
        + b"".join(_epbs(pk[:9], "<"))
        + shb(">")
        + idb(1, tsresol=9, bo=">")
        + b"".join(_epbs(pk[9:], ">"))
    )
    cap = load_bytes(tmp_path, data, "s.pcapng")
    ref = load_bytes(tmp_path, shb() + idb(1, tsresol=9) + b"".join(_epbs(pk)), "ref.pcapng")
    assert codes(cap) == []
    assert cap.summary.frames == 18
    assert_good_unchanged(cap, ref)
    assert cap.http_requests["response_body_bytes"].tolist() == [len(GOOD_RESPONSE) - 73]


# --------------------------------------------------------------------------- compression


def test_gzip_with_a_bad_checksum_is_analysed_to_the_end(tmp_path: Path) -> None:
    data = pcap(good_conv())
    comp = bytearray(gzip.compress(data))
    comp[-8] ^= 0xFF  # the CRC-32 in the trailer
    cap = load_bytes(tmp_path, bytes(comp), "c.pcap.gz")
    assert codes(cap) == ["capture.decompression_error"]
    assert "gzip" in cap.warnings["detail"].iloc[0]
    assert_good_unchanged(cap, load_bytes(tmp_path, data, "ref.pcap"))


def test_zstd_corrupt_in_the_middle(tmp_path: Path) -> None:
    """Two zstd frames, the second one damaged: the first is analysed, then one row."""
    first = pcap(good_conv())
    second = pcap(good_conv(T0 + 10**9, sport=40001))[24:]
    c = zstandard.ZstdCompressor(level=1, write_checksum=True)
    damaged = bytearray(c.compress(second))
    for i in range(len(damaged) // 2, len(damaged) // 2 + 16):
        damaged[i] ^= 0xA5
    cap = load_bytes(tmp_path, c.compress(first) + bytes(damaged), "c.pcap.zst")
    assert 18 <= cap.summary.frames < 36
    assert codes(cap)[-1] == "capture.decompression_error"
    assert "zstd" in cap.warnings["detail"].iloc[-1]
    # the first connection was complete long before the damage
    assert_good_unchanged(cap, load_bytes(tmp_path, first, "ref.pcap"))


_ZEROS = 64 << 20
_BOMB_MEMBERS = 32  # 32 x 64 MiB = 2 GiB of zeros


def _gzip_bomb(prefix: bytes) -> bytes:
    member = gzip.compress(b"\0" * _ZEROS, compresslevel=9, mtime=0)
    return gzip.compress(prefix, mtime=0) + member * _BOMB_MEMBERS


def _zstd_bomb(prefix: bytes) -> bytes:
    c = zstandard.ZstdCompressor(level=3)
    return c.compress(prefix) + c.compress(b"\0" * _ZEROS) * _BOMB_MEMBERS


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_pcap_bomb_stops_at_max_decompressed_bytes(tmp_path: Path, codec: str) -> None:
    """2 GiB of zeros after a real capture: zero-length pcap records, 134 million of them.
    ``max_decompressed_bytes`` stops reading; everything before the limit is analysed."""
    prefix = pcap(good_conv())
    bomb = (_gzip_bomb if codec == "gzip" else _zstd_bomb)(prefix)
    assert len(bomb) < 4 << 20  # a small file...
    limit = len(prefix) + (1 << 20)  # ...read up to 1 MiB past the real packets
    cap, _ = bounded(
        lambda: load_bytes(tmp_path, bomb, f"b.pcap.{codec}", max_decompressed_bytes=limit)
    )
    assert cap.summary.frames == 18 + (1 << 20) // 16
    counts = cap.summary.extra["warning_counts"]
    assert counts == {
        "net.truncated_link_header": (1 << 20) // 16,  # one per zero-length record...
        "capture.timestamp_out_of_order": 1,  # ...whose time is 1970
        "capture.decompression_limit": 1,
    }
    assert len(cap.warnings) < 1100  # rows are capped per code, counts are exact
    detail = cap.warnings[cap.warnings["code"] == "capture.decompression_limit"]["detail"].iloc[0]
    assert str(limit) in detail and codec in detail
    assert_good_unchanged(cap, load_bytes(tmp_path, prefix, "ref.pcap"))


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_pcapng_bomb_stops_at_the_first_bad_block_without_a_limit(
    tmp_path: Path, codec: str
) -> None:
    """In pcapng, zeros are a block of type 0 and length 0: reading stops there, so the
    rest of the bomb is never decompressed (the test would take minutes otherwise)."""
    prefix = shb() + idb(1, tsresol=9) + b"".join(_epbs(good_conv().packets))
    bomb = (_gzip_bomb if codec == "gzip" else _zstd_bomb)(prefix)
    cap, _ = bounded(lambda: load_bytes(tmp_path, bomb, f"b.pcapng.{codec}"))
    assert codes(cap) == ["capture.bad_block"]
    assert cap.summary.frames == 18
    assert_good_unchanged(cap, load_bytes(tmp_path, prefix, "ref.pcapng"))


def test_pcapng_timestamp_beyond_int64_nanoseconds(tmp_path: Path) -> None:
    """An EPB whose time (ticks x if_tsresol + if_tsoffset) is past 2262: the frame keeps the
    previous frame's time with a capture.timestamp_out_of_range row; later frames are normal.
    (Found by the reader fuzz harness: the packets table used to raise OverflowError.)"""
    import struct as _s

    def block(btype: int, body: bytes) -> bytes:
        n = 12 + len(body)
        return _s.pack("<II", btype, n) + body + _s.pack("<I", n)

    shb = block(0x0A0D0D0A, _s.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    # if_tsresol = 0 (ticks are seconds)
    idb = block(1, _s.pack("<HHI", 1, 0, 65535) + _s.pack("<HHB3x", 9, 1, 0) + _s.pack("<HH", 0, 0))
    pkt = bytes(14) + bytes([0x45]) + bytes(19)  # Ethernet + a stub IPv4 header

    def epb(seconds: int) -> bytes:
        data = pkt + bytes(-len(pkt) % 4)
        return block(6, _s.pack("<IIIII", 0, seconds >> 32, seconds & 0xFFFFFFFF, len(pkt),
                                len(pkt)) + data)

    path = tmp_path / "future.pcapng"
    path.write_bytes(shb + idb + epb(1_700_000_000) + epb(10**13) + epb(1_700_000_002))
    cap = pcaptools.load(path)
    assert cap.summary.frames == 3
    ts = cap.packets["ts"].astype("int64").tolist()
    assert ts == [1_700_000_000 * 10**9, 1_700_000_000 * 10**9, 1_700_000_002 * 10**9]
    w = cap.warnings[cap.warnings["code"] == "capture.timestamp_out_of_range"]
    assert w["frame"].tolist() == [2]
