"""``PacketDecoder.decode`` decodes whole IPv4/IPv6 TCP segments without going through
``_ip`` / ``_ip4`` / ``_ip6`` / ``_l4``; the result and the rows must be exactly those of the
general path, for every frame of every capture we have and for hostile variations of the
headers (lengths, options, fragments, truncation, TSO total length 0)."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import RawFrame, open_capture
from pcaptools.net.decode import Decoded, PacketDecoder
from pcaptools.net.packet import TcpSegment
from tests.conftest import corpus_files, shipped_captures


def _general(dec: PacketDecoder, raw: RawFrame) -> Decoded:
    """decode() without its shortcut: link layer, then always the general IP path."""
    data = raw.data
    if raw.linktype == 1:
        if len(data) < 14:
            return dec.decode(raw)
        et = (data[12] << 8) | data[13]
        off = 14 if et in (0x0800, 0x86DD) else dec._ethertype(raw, data, et, 14)
    else:
        link = dec._links.get(raw.linktype)
        if link is None:
            return dec.decode(raw)
        off = link(raw, data)
    if off < 0:
        return None
    rep_end = max(raw.orig_len, len(data))
    return dec._ip(raw, data, off, rep_end, raw.orig_len, 0)


class _Counting(PacketDecoder):
    """The real decoder, counting the frames that reach the general IP path."""

    __slots__ = ("calls",)

    def __init__(self, diag: Diagnostics) -> None:
        super().__init__(diag)
        self.calls = 0

    def _ip(
        self, raw: RawFrame, buf: bytes, off: int, rep_end: int, wire_len: int, depth: int
    ) -> Decoded:
        self.calls += 1
        return super()._ip(raw, buf, off, rep_end, wire_len, depth)


def _compare(frames: list[RawFrame]) -> int:
    """Decode every frame both ways; return how many TCP segments took the shortcut."""
    fast_diag, ref_diag = Diagnostics(), Diagnostics()
    fast, ref = _Counting(fast_diag), PacketDecoder(ref_diag)
    shortcut = 0
    for raw in frames:
        before = fast.calls
        got = fast.decode(raw)
        assert got == _general(ref, raw), raw.frame
        if type(got) is TcpSegment and fast.calls == before:
            shortcut += 1
    assert fast_diag.rows == ref_diag.rows
    return shortcut


def _frames(path: Path) -> list[RawFrame]:
    with open_capture(path, Diagnostics()) as r:
        return list(r.frames())


def test_every_capture_decodes_the_same() -> None:
    paths = [*shipped_captures(), *corpus_files()]
    if not paths:
        pytest.skip("no captures")
    shortcut = sum(_compare(_frames(p)) for p in paths)
    assert shortcut > 5000


def _mutants(frames: list[RawFrame], seed: int) -> list[RawFrame]:
    """Ethernet TCP frames with their IP/TCP length, offset and fragment fields changed."""
    rng = random.Random(seed)
    out: list[RawFrame] = []
    n = 0
    for raw in frames:
        d = raw.data
        if raw.linktype != 1 or len(d) < 54 or d[12:14] not in (b"\x08\x00", b"\x86\xdd"):
            continue
        v6 = d[12:14] == b"\x86\xdd"
        tcp = 54 if v6 else 14 + (d[14] & 0x0F) * 4
        for _ in range(6):
            b = bytearray(d)
            what = rng.randrange(8)
            if what == 0:  # total / payload length
                pos = 18 if v6 else 16
                struct.pack_into("!H", b, pos, rng.choice([0, 1, 19, 20, 39, 40, len(d) - 14,
                                                           len(d) - 13, rng.randrange(65536)]))
            elif what == 1 and tcp + 13 <= len(b):  # TCP data offset
                b[tcp + 12] = (rng.randrange(16) << 4) | (b[tcp + 12] & 0x0F)
            elif what == 2 and not v6:  # fragment bits
                struct.pack_into("!H", b, 20, rng.choice([0x2000, 0x0001, 0x4000, 0x1FFF]))
            elif what == 3 and not v6:  # header length
                b[14] = 0x40 | rng.randrange(16)
            elif what == 4:  # protocol / next header
                b[23 if not v6 else 20] = rng.choice([6, 17, 0, 44, 1])
            b2 = bytes(b)
            if what == 5:  # snaplen cut
                b2 = b2[: rng.randrange(14, len(b2))]
            orig = len(d) if what != 6 else len(d) + rng.randrange(1, 100)
            if what == 7:
                orig = max(len(b2) - rng.randrange(0, 30), 0)
            n += 1
            out.append(RawFrame(n, raw.ts_ns, 1, b2, orig))
    return out


def test_hostile_headers_decode_the_same() -> None:
    paths = [*shipped_captures(), *corpus_files()][:12]
    if not paths:
        pytest.skip("no captures")
    mutants: list[RawFrame] = []
    for i, p in enumerate(paths):
        mutants += _mutants(_frames(p)[:200], i)
    assert len(mutants) > 2000
    _compare(mutants)
