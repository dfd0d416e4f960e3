"""pcaptools.tcp.options: known vectors, tolerance to truncated/garbage input, tshark as oracle."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.tcp.options import NO_OPTIONS, TcpOptions, parse_options
from tests.conftest import corpus_files
from tests.oracle import tshark_fields

# --------------------------------------------------------------------------- known vectors
# Option bytes copied from corpus captures, values as tshark 4.0.17 decodes them.


def test_tfo_cookie_request_experimental_kind() -> None:
    # tcp-fast-open.pcap frame 1 (SYN): MSS, SACK_PERM, TS, NOP, WS 7, kind 254 ExID F989 (request)
    o = parse_options(bytes.fromhex("020405b40402080a00d968a30000000001030307fe04f989"))
    assert o == TcpOptions(mss=1460, wscale=7, sack_perm=True, timestamps=(14248099, 0), tfo=b"")


def test_tfo_cookie_experimental_kind() -> None:
    # tcp-fast-open.pcap frame 2 (SYN-ACK): cookie 261fb060cecab690
    o = parse_options(
        bytes.fromhex("020405b40402080afffff8f600d968a301030306fe0cf989261fb060cecab690")
    )
    assert o.mss == 1460
    assert o.wscale == 6
    assert o.sack_perm is True
    assert o.timestamps == (4294965494, 14248099)
    assert o.tfo == bytes.fromhex("261fb060cecab690")
    assert not o.truncated and o.unknown_kinds == () and o.malformed == ()


def test_no_tfo_in_plain_syn_ack() -> None:
    # tcp-fast-open.pcap frame 10 (second SYN-ACK, no cookie option)
    o = parse_options(bytes.fromhex("020405b40402080afffff8f800d968a501030306"))
    assert (o.mss, o.wscale, o.sack_perm, o.timestamps, o.tfo) == (
        1460,
        6,
        True,
        (4294965496, 14248101),
        None,
    )


def test_snaplen_cut_syn_options() -> None:
    # truncated-header.pcap frame 1: header says 20 option bytes, 14 captured; the timestamp
    # option announces length 8 (should be 10) and ends exactly at the cut
    o = parse_options(bytes.fromhex("020405b404020808000000010000"))
    assert (o.mss, o.sack_perm, o.timestamps) == (1460, True, None)
    assert o.malformed == (8,)
    assert o.truncated is False


def test_tfo_kind_34() -> None:
    assert parse_options(bytes([34, 2])).tfo == b""
    assert parse_options(bytes([34, 10]) + b"ABCDEFGH").tfo == b"ABCDEFGH"


def test_other_experiment_id_is_unknown() -> None:
    o = parse_options(bytes.fromhex("fe06abcd0102") + bytes([1, 1]))
    assert o.tfo is None
    assert o.unknown_kinds == (254,)


def test_sack_blocks() -> None:
    raw = bytes([1, 1, 5, 26]) + struct.pack(">6I", 10, 20, 30, 40, 0xFFFFFFF0, 5)
    o = parse_options(raw)
    assert o.sack_blocks == ((10, 20), (30, 40), (0xFFFFFFF0, 5))
    assert o.malformed == ()


def test_sack_bad_length_keeps_whole_blocks() -> None:
    raw = bytes([5, 14]) + struct.pack(">3I", 1, 2, 3)
    o = parse_options(raw)
    assert o.sack_blocks == ((1, 2),)
    assert o.malformed == (5,)
    assert parse_options(bytes([5, 2])).malformed == (5,)


def test_wrong_lengths_are_malformed_not_fatal() -> None:
    raw = bytes([2, 3, 5, 3, 4, 7, 0, 4, 3, 0, 8, 4, 0, 0, 2, 4, 0x05, 0xB4])
    o = parse_options(raw)
    assert o.malformed == (2, 3, 4, 8)
    assert o.mss == 1460  # the well-formed MSS after them is still read
    assert o.wscale is None and o.sack_perm is False and o.timestamps is None


def test_first_occurrence_wins() -> None:
    o = parse_options(bytes([2, 4, 0, 100, 2, 4, 0, 200, 3, 3, 2, 3, 3, 9]))
    assert (o.mss, o.wscale) == (100, 2)


def test_eol_ends_the_list() -> None:
    o = parse_options(bytes([2, 4, 0x05, 0xB4, 0, 0xFF, 0xFF, 0x03]))
    assert o == TcpOptions(mss=1460)


def test_empty_and_padding_only() -> None:
    assert parse_options(b"") is NO_OPTIONS
    assert parse_options(b"\x01\x01\x01\x00") == NO_OPTIONS


@pytest.mark.parametrize(
    ("raw", "mss"),
    [
        (bytes([2]), None),  # no room for the length byte
        (bytes([2, 4, 5]), None),  # option runs past the end
        (bytes([2, 4, 5, 0xB4, 8, 0]), 1460),  # length 0: garbage, walk stops
        (bytes([2, 4, 5, 0xB4, 30, 1]), 1460),  # length 1: garbage, walk stops
        (bytes([2, 4, 5, 0xB4, 8, 10, 0, 0]), 1460),  # timestamps cut in the middle
    ],
)
def test_truncated(raw: bytes, mss: int | None) -> None:
    o = parse_options(raw)
    assert o.truncated is True
    assert o.mss == mss
    assert o.timestamps is None


def test_every_prefix_of_a_syn_option_list() -> None:
    full = bytes.fromhex("020405b40402080a00d968a30000000001030307fe04f989")
    boundaries = {0, 4, 6, 16, 17, 20, 24}  # option ends in ``full``
    for k in range(len(full) + 1):
        o = parse_options(full[:k])
        assert o.truncated is (k not in boundaries), k
        assert o.mss == (1460 if k >= 4 else None)
        assert o.timestamps == ((14248099, 0) if k >= 16 else None)
        assert o.wscale == (7 if k >= 20 else None)
        assert o.tfo == (b"" if k >= 24 else None)


@given(st.binary(max_size=60))
def test_garbage_never_raises(raw: bytes) -> None:
    o = parse_options(raw)
    assert isinstance(o, TcpOptions)
    assert o.mss is None or 0 <= o.mss <= 0xFFFF
    assert o.wscale is None or 0 <= o.wscale <= 0xFF
    assert all(0 <= a <= 0xFFFFFFFF and 0 <= b <= 0xFFFFFFFF for a, b in o.sack_blocks)
    assert o.tfo is None or len(o.tfo) <= len(raw)


# --------------------------------------------------------------------------- tshark oracle

_FIELDS = (
    "frame.number",
    "tcp.options",
    "tcp.options.mss_val",
    "tcp.options.wscale.shift",
    "tcp.options.sack_perm",
    "tcp.options.timestamp.tsval",
    "tcp.options.timestamp.tsecr",
    "tcp.options.tfo.request",
    "tcp.options.tfo.cookie",
    "tcp.options.sack_le",
    "tcp.options.sack_re",
)


def _first_int(text: str) -> int | None:
    return int(text.split(",")[0]) if text else None


@pytest.mark.corpus
@pytest.mark.tshark
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_against_tshark(path, tshark) -> None:  # type: ignore[no-untyped-def]
    """Every SYN, SYN-ACK and SACK-carrying segment of the corpus decodes as tshark decodes it."""
    rows = tshark_fields(
        str(path),
        _FIELDS,
        ("-o", "tcp.relative_sequence_numbers:FALSE"),
        "tcp.flags.syn == 1 || tcp.options.sack_le",
    )
    for row in rows:
        frame, raw_hex, mss, ws, sack_perm, tsval, tsecr, tfo_req, tfo_cookie, sle, sre = row
        if not raw_hex:
            continue
        o = parse_options(bytes.fromhex(raw_hex.split(",")[0]))
        where = f"{path.name} frame {frame}"
        assert o.mss == _first_int(mss), where
        assert o.wscale == _first_int(ws), where
        assert o.sack_perm is bool(sack_perm), where
        if tsval:
            assert o.timestamps == (_first_int(tsval), _first_int(tsecr)), where
        else:
            assert o.timestamps is None, where
        if tfo_req:
            assert o.tfo == b"", where
        elif tfo_cookie:
            assert o.tfo == bytes.fromhex(tfo_cookie.replace(":", "")), where
        else:
            assert o.tfo is None, where
        lefts = [int(x) for x in sle.split(",")] if sle else []
        rights = [int(x) for x in sre.split(",")] if sre else []
        assert list(o.sack_blocks) == list(zip(lefts, rights, strict=True)), where


@pytest.mark.corpus
@pytest.mark.tshark
def test_tfo_capture_against_tshark(corpus, tshark) -> None:  # type: ignore[no-untyped-def]
    """tcp-fast-open.pcap: 4 SYN/SYN-ACK frames; the cookie is granted in frame 2, used in 8."""
    rows = tshark_fields(str(corpus / "tcp-fast-open.pcap"), _FIELDS, (), "tcp.flags.syn == 1")
    got = {int(r[0]): parse_options(bytes.fromhex(r[1])).tfo for r in rows}
    cookie = bytes.fromhex("261fb060cecab690")
    assert got == {1: b"", 2: cookie, 8: cookie, 10: None}
