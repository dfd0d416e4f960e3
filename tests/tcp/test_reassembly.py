"""pcaptools.tcp.reassembly: segmentation invariance (hypothesis), gaps, limits, base rules."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.tcp.reassembly import Reassembler, StreamGap

C2S = Direction.CLIENT_TO_SERVER
Item = StreamChunk | StreamGap


def _syn(r: Reassembler) -> None:
    """SYN with relative seq 0: stream offset 0 is relative seq 1."""
    assert r.segment(0, b"", 0, 1, syn=True) == []


def _chunk(data: bytes, offset: int, frame: int, ts: int | None = None) -> StreamChunk:
    return StreamChunk(
        direction=C2S, data=data, ts_ns=frame * 10 if ts is None else ts, frame=frame, offset=offset
    )


def _gap(offset: int, n: int, frame: int, reason: str) -> StreamGap:
    return StreamGap(
        direction=C2S, offset=offset, nbytes=n, ts_ns=frame * 10, frame=frame, reason=reason
    )


def _check_contiguous(items: Sequence[Item], start: int = 0) -> int:
    """Items tile the stream with no overlap and no hole; returns the end offset."""
    pos = start
    for it in items:
        assert it.offset == pos
        n = len(it.data) if isinstance(it, StreamChunk) else it.nbytes
        assert n > 0
        pos += n
    return pos


def _uncovered(n: int, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    covered = bytearray(n)
    for a, b in ranges:
        covered[a:b] = b"\x01" * (b - a)
    out: list[tuple[int, int]] = []
    i = 0
    while i < n:
        if covered[i]:
            i += 1
            continue
        j = i
        while j < n and not covered[j]:
            j += 1
        out.append((i, j - i))
        i = j
    return out


# --------------------------------------------------------------------------- strategies


@st.composite
def segmented(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]], list[tuple[int, int]]]:
    """(original, fed ranges in arrival order, withheld ranges).

    The original is split at random points; some pieces are withheld; random overlapping
    re-sends (retransmissions with other boundaries) and exact duplicates are added;
    everything fed is shuffled.
    """
    data = draw(st.binary(min_size=1, max_size=200))
    n = len(data)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=min(n - 1, 12)))) if n > 1 else []
    bounds = [0, *cuts, n]
    pieces = [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    withheld_mask = draw(st.lists(st.booleans(), min_size=len(pieces), max_size=len(pieces)))
    fed = [p for p, w in zip(pieces, withheld_mask, strict=True) if not w]
    withheld = [p for p, w in zip(pieces, withheld_mask, strict=True) if w]
    # overlapping re-sends: only of bytes that were fed (so withheld bytes stay withheld)
    for _ in range(draw(st.integers(0, 4))):
        if not fed:
            break
        a, b = draw(st.sampled_from(fed))
        lo = draw(st.integers(a, b - 1))
        hi = draw(st.integers(lo + 1, b))
        fed.append((lo, hi))
    fed += draw(st.lists(st.sampled_from(fed), max_size=4)) if fed else []
    fed = draw(st.permutations(fed))
    return data, fed, withheld


# --------------------------------------------------------------------------- invariance


@given(segmented())
def test_segmentation_invariance(
    case: tuple[bytes, list[tuple[int, int]], list[tuple[int, int]]],
) -> None:
    data, fed, _withheld = case
    n = len(data)
    r = Reassembler(C2S)
    _syn(r)
    items: list[Item] = []
    for frame, (a, b) in enumerate(fed, start=2):
        got = r.segment(a + 1, data[a:b], frame * 10, frame)
        for it in got:
            assert it.frame == frame and it.ts_ns == frame * 10
        items += got
        assert r.delivered_bytes + r.gap_bytes == r.next_offset
    fin_frame = len(fed) + 2
    assert r.segment(n + 1, b"", fin_frame * 10, fin_frame, fin=True) == []
    items += r.finish(999, 999)

    assert _check_contiguous(items) == n
    for it in items:
        if isinstance(it, StreamChunk):
            assert it.data == data[it.offset : it.offset + len(it.data)]
    gaps = [(g.offset, g.nbytes) for g in items if isinstance(g, StreamGap)]
    assert gaps == _uncovered(n, fed)
    covered = n - sum(g[1] for g in gaps)
    assert r.delivered_bytes == covered
    assert r.gap_bytes == n - covered
    assert r.buffered_bytes == 0
    assert r.duplicate_bytes == sum(b - a for a, b in fed) - covered
    assert r.inconsistent_bytes == 0
    assert r.dropped_bytes == 0
    # every gap is reported at finish(): nothing acked, no limit, no snaplen
    assert all(g.reason == "end" and g.frame == 999 for g in items if isinstance(g, StreamGap))


@given(segmented())
def test_no_gap_and_one_chunk_per_segment_when_nothing_withheld_in_order(
    case: tuple[bytes, list[tuple[int, int]], list[tuple[int, int]]],
) -> None:
    """Fed in offset order with nothing missing, each segment delivers at most one chunk."""
    data, fed, withheld = case
    ranges = sorted(fed + withheld)
    r = Reassembler(C2S)
    _syn(r)
    out: list[Item] = []
    for frame, (a, b) in enumerate(ranges, start=2):
        got = r.segment(a + 1, data[a:b], frame, frame)
        assert len(got) <= 1
        out += got
    assert r.finish(0, 0) == []
    assert b"".join(c.data for c in out if isinstance(c, StreamChunk)) == data
    assert not any(isinstance(g, StreamGap) for g in out)


@st.composite
def with_acks_and_cuts(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, int, int, int]]]:
    """(original, ops): ("seg", start, end, captured) and ("ack", offset, 0, 0), in arrival order.

    Pieces of the original may be cut by a snaplen (only ``captured`` leading bytes kept,
    the same in every copy, so cut bytes are never captured); re-sends with other
    boundaries cover captured bytes only; the peer acknowledges true stream positions at
    random moments.
    """
    data = draw(st.binary(min_size=1, max_size=120))
    n = len(data)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=min(n - 1, 10)))) if n > 1 else []
    bounds = [0, *cuts, n]
    segs: list[tuple[int, int, int]] = []
    for a, b in pairwise(bounds):
        if draw(st.booleans()):
            continue  # withheld
        cap = draw(st.integers(0, b - a)) if draw(st.booleans()) else b - a
        segs.append((a, b, cap))
    for _ in range(draw(st.integers(0, 3))):
        caps = [(a, a + cap) for a, _b, cap in segs if cap]
        if not caps:
            break
        a, b = draw(st.sampled_from(caps))
        lo = draw(st.integers(a, b - 1))
        hi = draw(st.integers(lo + 1, b))
        segs.append((lo, hi, hi - lo))
    segs += draw(st.lists(st.sampled_from(segs), max_size=3)) if segs else []
    ops: list[tuple[str, int, int, int]] = [
        ("seg", a, b, cap) for a, b, cap in draw(st.permutations(segs))
    ]
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(ops)))
        ops.insert(pos, ("ack", draw(st.integers(0, n)), 0, 0))
    return data, ops


@given(with_acks_and_cuts())
def test_gaps_exactly_where_not_captured_before_acked(
    case: tuple[bytes, list[tuple[str, int, int, int]]],
) -> None:
    """A byte is a gap iff it was not captured before the peer acknowledged it (or ever)."""
    data, ops = case
    n = len(data)
    inf = len(ops) + 1
    t_cap = [inf] * n
    t_ack = [inf] * n
    for t, (op, a, _b, cap) in enumerate(ops):
        if op == "seg":
            for p in range(a, a + cap):
                t_cap[p] = min(t_cap[p], t)
        else:
            for p in range(a):
                t_ack[p] = min(t_ack[p], t)
    expected_gap = [t_cap[p] > t_ack[p] or t_cap[p] == inf for p in range(n)]

    r = Reassembler(C2S)
    _syn(r)
    items: list[Item] = []
    for t, (op, a, b, cap) in enumerate(ops, start=2):
        if op == "seg":
            items += r.segment(a + 1, data[a : a + cap], t, t, seg_len=b - a)
        else:
            items += r.acked(a + 1, t, t)
        assert r.delivered_bytes + r.gap_bytes == r.next_offset
    r.segment(n + 1, b"", 0, 0, fin=True)
    items += r.finish(0, 0)

    assert _check_contiguous(items) == n
    got_gap = [False] * n
    for it in items:
        if isinstance(it, StreamChunk):
            assert it.data == data[it.offset : it.offset + len(it.data)]
        else:
            got_gap[it.offset : it.offset + it.nbytes] = [True] * it.nbytes
    assert got_gap == expected_gap
    fed_bytes = sum(cap for op, _a, _b, cap in ops if op == "seg")
    assert r.delivered_bytes + r.duplicate_bytes + r.dropped_bytes == fed_bytes
    assert r.buffered_bytes == 0


@st.composite
def overlapping_copies(draw: st.DrawFn) -> list[tuple[int, bytes]]:
    """Segments with arbitrary contents over a 60-byte stream: overlaps may disagree."""
    segs = []
    for _ in range(draw(st.integers(1, 12))):
        a = draw(st.integers(0, 59))
        payload = draw(st.binary(min_size=1, max_size=60 - a))
        segs.append((a, payload))
    return segs


@given(overlapping_copies())
def test_first_copy_wins(segs: list[tuple[int, bytes]]) -> None:
    first: dict[int, int] = {}
    inconsistent = 0
    total = 0
    for a, payload in segs:
        for k, byte in enumerate(payload):
            total += 1
            if a + k in first:
                inconsistent += first[a + k] != byte
            else:
                first[a + k] = byte
    r = Reassembler(C2S)
    _syn(r)
    items: list[Item] = []
    for frame, (a, payload) in enumerate(segs, start=2):
        items += r.segment(a + 1, payload, frame, frame)
    items += r.finish(0, 0)
    end = _check_contiguous(items)
    assert end == max(first) + 1
    for it in items:
        if isinstance(it, StreamChunk):
            assert list(it.data) == [first[it.offset + k] for k in range(len(it.data))]
        else:
            assert all(it.offset + k not in first for k in range(it.nbytes))
    assert r.inconsistent_bytes == inconsistent
    assert r.duplicate_bytes == total - len(first)


@given(segmented(), st.integers(1, 64))
def test_buffer_limit_invariants(
    case: tuple[bytes, list[tuple[int, int]], list[tuple[int, int]]], limit: int
) -> None:
    data, fed, _withheld = case
    r = Reassembler(C2S, max_buffer_bytes=limit)
    _syn(r)
    items: list[Item] = []
    for frame, (a, b) in enumerate(fed, start=2):
        items += r.segment(a + 1, data[a:b], frame, frame)
        assert r.buffered_bytes <= limit
        assert r.delivered_bytes + r.gap_bytes == r.next_offset
    items += r.finish(0, 0)
    end = _check_contiguous(items)
    for it in items:
        if isinstance(it, StreamChunk):
            assert it.data == data[it.offset : it.offset + len(it.data)]
    assert end == max((b for _a, b in fed), default=0)
    # every captured byte is delivered once, recognised as a duplicate, or dropped (late)
    assert r.delivered_bytes + r.duplicate_bytes + r.dropped_bytes == sum(b - a for a, b in fed)
    assert r.buffered_bytes == 0


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["seg", "ack", "fin"]),
            st.integers(-(2**40), 2**40) | st.integers(-5, 300),
            st.binary(max_size=40),
            st.booleans(),
            st.integers(-3, 60) | st.none(),
        ),
        max_size=25,
    )
)
def test_weird_values_never_raise(ops: list[tuple[str, int, bytes, bool, int | None]]) -> None:
    r = Reassembler(C2S, max_buffer_bytes=100)
    items: list[Item] = []
    for frame, (op, seq, payload, flag, seg_len) in enumerate(ops, start=1):
        if op == "seg":
            items += r.segment(seq, payload, frame, frame, syn=flag, seg_len=seg_len)
        elif op == "ack":
            items += r.acked(seq, frame, frame)
        else:
            items += r.segment(seq, payload, frame, frame, fin=True)
        assert r.buffered_bytes <= 100
        assert r.delivered_bytes + r.gap_bytes == r.next_offset
    items += r.finish(0, 0)
    assert _check_contiguous(items) == r.next_offset
    assert r.buffered_bytes == 0


# --------------------------------------------------------------------------- concrete cases


def test_in_order_fast_path_does_not_copy() -> None:
    r = Reassembler(C2S)
    _syn(r)
    payload = b"x" * 1000
    (chunk,) = r.segment(1, payload, 20, 2)
    assert isinstance(chunk, StreamChunk)
    assert chunk.data is payload
    assert chunk == _chunk(payload, 0, 2)
    assert r.next_offset == 1000


def test_out_of_order_released_with_the_filling_segment() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.segment(1, b"abc", 20, 2) == [_chunk(b"abc", 0, 2)]
    assert r.segment(7, b"ghi", 30, 3) == []
    assert r.buffered_bytes == 3
    assert r.segment(4, b"def", 40, 4) == [_chunk(b"defghi", 3, 4)]
    assert (r.buffered_bytes, r.delivered_bytes, r.next_offset) == (0, 9, 9)


def test_ack_beyond_hole_makes_gap() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.segment(1, b"0123456789", 20, 2) == [_chunk(b"0123456789", 0, 2)]
    assert r.segment(21, b"ABCDEFGHIJ", 30, 3) == []  # [20, 30) buffered, [10, 20) missing
    assert r.acked(11, 40, 4) == []  # acks only what was delivered
    assert r.acked(31, 50, 5) == [_gap(10, 10, 5, "acked"), _chunk(b"ABCDEFGHIJ", 20, 5)]
    # the peer acks 5 more bytes we never saw: a gap at the end of the stream
    assert r.acked(36, 60, 6) == [_gap(30, 5, 6, "acked")]
    # the missing bytes turn up late: not delivered, counted as dropped
    assert r.segment(11, b"klmnopqrst", 70, 7) == []
    assert (r.dropped_bytes, r.duplicate_bytes, r.gap_bytes, r.delivered_bytes) == (10, 0, 15, 20)


def test_ack_of_fin_is_not_a_gap() -> None:
    r = Reassembler(C2S)
    _syn(r)
    r.segment(1, b"hello", 20, 2, fin=True)
    assert r.fin_offset == 5
    assert r.acked(7, 30, 3) == []  # 1 (SYN) + 5 + 1 (FIN)
    assert r.finish(40, 4) == []
    assert r.gap_bytes == 0


def test_fin_reveals_missing_tail_at_finish() -> None:
    r = Reassembler(C2S)
    _syn(r)
    r.segment(1, b"hello", 20, 2)
    assert r.segment(11, b"", 30, 3, fin=True) == []
    assert r.finish(40, 4) == [_gap(5, 5, 4, "end")]


def test_implausible_ack_is_ignored() -> None:
    r = Reassembler(C2S)
    _syn(r)
    r.segment(1, b"abc", 20, 2)
    assert r.acked(1 + (1 << 31), 30, 3) == []
    assert r.next_offset == 3 and r.gap_bytes == 0


def test_buffer_limit_turns_hole_into_gap() -> None:
    r = Reassembler(C2S, max_buffer_bytes=100)
    _syn(r)
    a = bytes(range(60))
    b = bytes(range(100, 160))
    assert r.segment(51, a, 20, 2) == []  # [50, 110) buffered
    assert r.buffered_bytes == 60
    # [200, 260) would make 120 buffered bytes: the first hole is given up, no more
    assert r.segment(201, b, 30, 3) == [_gap(0, 50, 3, "limit"), _chunk(a, 50, 3)]
    assert (r.buffered_bytes, r.next_offset) == (60, 110)
    assert r.finish(40, 4) == [_gap(110, 90, 4, "end"), _chunk(b, 200, 4)]
    assert r.buffered_bytes == 0


def test_segment_larger_than_the_buffer() -> None:
    r = Reassembler(C2S, max_buffer_bytes=10)
    _syn(r)
    big = b"B" * 50
    assert r.segment(31, big, 20, 2) == [_gap(0, 30, 2, "limit"), _chunk(big, 30, 2)]
    assert r.buffered_bytes == 0


def test_buffer_limit_keeps_what_fits() -> None:
    r = Reassembler(C2S, max_buffer_bytes=100)
    _syn(r)
    assert r.segment(11, b"a" * 50, 20, 2) == []
    assert r.segment(71, b"b" * 50, 30, 3) == []  # exactly at the limit: still buffered
    assert r.buffered_bytes == 100
    got = r.segment(131, b"c" * 10, 40, 4)
    # only the first hole is given up; [60, 70) and [120, 130) stay holes
    assert got == [_gap(0, 10, 4, "limit"), _chunk(b"a" * 50, 10, 4)]
    assert r.buffered_bytes == 60


def test_snaplen_cut_in_order_is_gap_immediately() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.segment(1, b"abcd", 20, 2, seg_len=10) == [
        _chunk(b"abcd", 0, 2),
        _gap(4, 6, 2, "snaplen"),
    ]
    assert r.segment(11, b"klm", 30, 3, seg_len=10) == [
        _chunk(b"klm", 10, 3),
        _gap(13, 7, 3, "snaplen"),
    ]
    assert r.segment(21, b"", 40, 4, seg_len=5) == [_gap(20, 5, 4, "snaplen")]
    assert (r.delivered_bytes, r.gap_bytes, r.next_offset) == (7, 18, 25)


def test_snaplen_cut_out_of_order_is_gap_when_reached() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.segment(11, b"klm", 20, 2, seg_len=10) == []  # [10, 13) captured, [13, 20) cut
    assert r.segment(21, b"uvw", 30, 3) == []
    assert r.segment(1, b"abcdefghij", 40, 4) == [
        _chunk(b"abcdefghijklm", 0, 4),
        _gap(13, 7, 4, "snaplen"),
        _chunk(b"uvw", 20, 4),
    ]


def test_snaplen_cut_tail_filled_by_a_later_full_copy() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.segment(11, b"klm", 20, 2, seg_len=10) == []
    assert r.segment(11, b"klmnopqrst", 30, 3) == []  # a full copy of the same segment
    assert r.segment(1, b"abcdefghij", 40, 4) == [_chunk(b"abcdefghijklmnopqrst", 0, 4)]
    assert r.gap_bytes == 0


def test_snaplen_cut_beyond_everything_reported_at_finish() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.segment(21, b"uv", 20, 2, seg_len=5) == []
    assert r.finish(30, 3) == [
        _gap(0, 20, 3, "end"),
        _chunk(b"uv", 20, 3),
        _gap(22, 3, 3, "snaplen"),
    ]


def test_padding_beyond_seg_len_is_ignored() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.segment(1, b"abc\x00\x00\x00", 20, 2, seg_len=3) == [_chunk(b"abc", 0, 2)]


def test_retransmission_compared_with_delivered_data_until_acked() -> None:
    r = Reassembler(C2S)
    _syn(r)
    r.segment(1, b"abcdef", 20, 2)
    assert r.segment(1, b"abXdeY", 30, 3) == []  # retransmission with different bytes
    assert (r.duplicate_bytes, r.inconsistent_bytes) == (6, 2)
    assert r.segment(4, b"def123", 40, 4) == [_chunk(b"123", 6, 4)]  # partial overlap + new data
    assert (r.duplicate_bytes, r.inconsistent_bytes) == (9, 2)
    r.acked(10, 50, 5)  # everything acknowledged: the history is released
    assert r.segment(1, b"zzzzzzzzz", 60, 6) == []
    assert (r.duplicate_bytes, r.inconsistent_bytes) == (18, 2)


def test_history_is_bounded() -> None:
    r = Reassembler(C2S, max_history_bytes=8)
    _syn(r)
    for i in range(4):
        r.segment(1 + 4 * i, b"abcd", i, i)
    r.segment(1, b"XXXX", 9, 9)  # first segment no longer held: counted, not compared
    assert (r.duplicate_bytes, r.inconsistent_bytes) == (4, 0)
    r.segment(13, b"XXXX", 10, 10)  # last segment still held
    assert (r.duplicate_bytes, r.inconsistent_bytes) == (8, 4)


def test_syn_data_starts_at_offset_zero() -> None:
    """TCP Fast Open: the SYN carries the first bytes."""
    r = Reassembler(C2S)
    got = r.segment(1000, b"GET / HTTP/1.0\r\n", 10, 1, syn=True)
    assert got == [_chunk(b"GET / HTTP/1.0\r\n", 0, 1, ts=10)]
    assert r.base == 1001
    # a retransmitted SYN with the same data is a duplicate
    assert r.segment(1000, b"GET / HTTP/1.0\r\n", 20, 2, syn=True) == []
    assert r.duplicate_bytes == 16


def test_mid_stream_first_segment_is_offset_zero() -> None:
    r = Reassembler(C2S)
    assert r.segment(1, b"abc", 10, 1) == [_chunk(b"abc", 0, 1, ts=10)]
    assert r.base == 1


def test_lower_seq_than_first_segment_is_dropped() -> None:
    """Mid-stream start where the first segment seen was out of order and no ACK preceded it."""
    r = Reassembler(C2S)
    assert r.segment(101, b"later", 10, 1) == [_chunk(b"later", 0, 1, ts=10)]
    assert r.segment(91, b"0123456789", 20, 2) == []
    assert r.segment(96, b"56789later", 30, 3) == []  # 5 bytes before the start, 5 duplicates
    assert (r.dropped_bytes, r.duplicate_bytes, r.delivered_bytes) == (15, 5, 5)


def test_ack_before_any_data_sets_the_base() -> None:
    """tcp_dupack.pcapng-like: the receiver's ACK comes first, the first data seen is out of order.

    tshark numbers the server's bytes from the client's first ACK (relative ack 1), so the
    segments seen first have relative seqs 10945, 12313, 13681 and the fast retransmission 1.
    """
    r = Reassembler(Direction.SERVER_TO_CLIENT)
    assert r.acked(1, 10, 1) == []
    seg = b"s" * 1368
    assert r.segment(10945, seg, 20, 2) == []
    assert r.acked(1, 30, 3) == []
    assert r.segment(12313, seg, 40, 4) == []
    assert r.segment(13681, seg, 60, 6) == []
    (chunk,) = r.segment(1, seg, 80, 8)
    assert isinstance(chunk, StreamChunk)
    assert (chunk.offset, len(chunk.data), chunk.frame) == (0, 1368, 8)
    assert r.acked(1369, 90, 9) == []
    got = r.finish(100, 10)
    assert [(type(x).__name__, x.offset, x.frame) for x in got] == [
        ("StreamGap", 1368, 10),
        ("StreamChunk", 10944, 10),
    ]
    assert isinstance(got[0], StreamGap) and got[0].nbytes == 10944 - 1368
    assert isinstance(got[1], StreamChunk) and len(got[1].data) == 3 * 1368


def test_acks_before_the_syn_only_matter_after_it() -> None:
    r = Reassembler(C2S)
    _syn(r)
    assert r.acked(1, 10, 2) == []  # the SYN-ACK acknowledges the SYN: offset 0
    assert r.next_offset == 0


@pytest.mark.parametrize("limit", [0, 1])
def test_tiny_limits(limit: int) -> None:
    """With no room for out-of-order data every hole is skipped at once; late bytes are dropped."""
    r = Reassembler(C2S, max_buffer_bytes=limit, max_history_bytes=limit)
    _syn(r)
    assert r.segment(4, b"def", 10, 1) == [_gap(0, 3, 1, "limit"), _chunk(b"def", 3, 1)]
    assert r.segment(1, b"abc", 20, 2) == []
    assert r.finish(30, 3) == []
    assert (r.delivered_bytes, r.gap_bytes, r.dropped_bytes, r.buffered_bytes) == (3, 3, 3, 0)
