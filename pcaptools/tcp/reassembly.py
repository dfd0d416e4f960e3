"""In-order byte stream of one direction of a TCP connection, for the protocol observers.

:class:`Reassembler` is a sans-IO observer (STYLE.md section 2): the TCP tracker feeds
it the segments of one direction and the acknowledgements the peer sends, and it
returns, in stream order, :class:`~pcaptools.protocols._base.StreamChunk` objects
(bytes, delivered once each) and :class:`StreamGap` objects (bytes that exist on the
wire but were never captured). It never raises.

Offsets
    Stream offset 0 is the first payload byte. The base, the relative sequence number
    of offset 0, is fixed by the first of these events, the same rule tshark uses for
    its relative sequence numbers:

    * a SYN: base = its sequence number + 1 (SYN data, as in TCP Fast Open, is at offset 0);
    * an acknowledgement from the peer (:meth:`Reassembler.acked`) before any segment of
      this direction: base = the acknowledged sequence number;
    * otherwise the first segment seen (a capture that starts mid-stream): base = its
      sequence number.

    With tshark's relative sequence numbers (1 = first byte after the SYN, or the first
    byte seen mid-stream), ``offset == relative seq - 1``. The caller unwraps sequence
    numbers (they may exceed 2**32). Bytes that later turn up *below* offset 0 (the first
    segment seen was itself out of order and no ACK came before it) are not part of the
    stream: they are counted in ``dropped_bytes`` and never delivered, because bytes
    after them may already have been handed to the protocol layer.

Delivery rules
    * In-order data is delivered at once: one :class:`StreamChunk` per call, with the
      ``ts_ns``/``frame`` of that call. The in-order path makes no copy of the payload.
    * Retransmitted and overlapping bytes are delivered once; the first copy wins. An
      overlap is compared with the first copy while that copy is still held (buffered
      out-of-order data, or delivered data not yet acknowledged, within
      ``max_history_bytes``); differing bytes are counted in ``inconsistent_bytes``.
    * Out-of-order data is buffered until the hole before it is filled; the bytes the
      filling segment releases are delivered in the same chunk (so a chunk's ``ts_ns`` is
      when the bytes became available in order, which is what application latency needs).
    * A hole becomes a :class:`StreamGap` when (a) the peer acknowledges bytes beyond it
      (they reached the peer but not the capture: ``reason="acked"``), (b) buffering would
      exceed ``max_buffer_bytes`` (``"limit"``), (c) :meth:`Reassembler.finish` is called
      (``"end"``), or (d) the snaplen cut a segment (``len(data) < seg_len``): the missing
      tail is a gap as soon as the stream reaches it (``"snaplen"``).
    * Captured bytes that arrive for offsets the stream has already passed as a gap are
      counted in ``dropped_bytes``.

Memory is bounded per direction by ``max_buffer_bytes`` of out-of-order data plus
``max_history_bytes`` of references to already delivered, unacknowledged payloads (no
copies: the same ``bytes`` objects that were delivered).

Callers should not pass the payload of RST segments (it is not stream data) nor the
acknowledgement number of RST segments (often unreliable); and they should call
:meth:`Reassembler.acked` only with segments that carry the ACK flag.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass

from .chunk import StreamChunk, new_chunk
from .stream import Direction

__all__ = ["Reassembler", "StreamGap"]

#: an acknowledgement more than this beyond everything seen is treated as garbage
#: (a window can never exceed 2**30 bytes, RFC 7323)
_MAX_ACK_AHEAD = 1 << 30
#: at most this many separate out-of-order pieces are buffered (1-byte segment floods)
_MAX_PIECES = 1 << 16
#: at most this many snaplen-cut ranges are remembered ahead of the stream
_MAX_MISSING = 1 << 12
#: at most this many delivered chunks are remembered for overlap checks
_MAX_HISTORY_ENTRIES = 1 << 12
#: delivered bytes remembered per direction to compare retransmitted copies with (the default
#: of ``Reassembler(max_history_bytes=...)``; a module constant, which :mod:`pcaptools.limits`
#: reads: the compiled Reassembler, an extension type, has no inspectable ``__init__``)
MAX_HISTORY_BYTES = 256 << 10
#: at most this many reported gaps are remembered, to recognise bytes that arrive too late
_MAX_GAP_MEMORY = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamGap:
    """Bytes of one direction that were sent but never captured."""

    direction: Direction
    offset: int
    """stream offset of the first missing byte"""
    nbytes: int
    """number of missing bytes (> 0)"""
    ts_ns: int
    """capture time of the packet (or end of capture) that revealed the gap"""
    frame: int
    """Wireshark frame.number of that packet"""
    reason: str = "end"
    """``acked`` (the peer acknowledged them), ``snaplen`` (cut by the capture's snaplen),
    ``limit`` (the out-of-order buffer was full), ``end`` (still missing at
    :meth:`Reassembler.finish`)"""


class Reassembler:
    """Reassembles one direction of a TCP connection. See the module docstring.

    Counters (all in bytes, read-only for callers):

    * ``next_offset``: stream offset of the next byte to deliver
      (always ``delivered_bytes + gap_bytes``).
    * ``buffered_bytes``: out-of-order bytes held, waiting for a hole to be filled.
    * ``delivered_bytes``: bytes handed out in chunks.
    * ``gap_bytes``: bytes reported as gaps.
    * ``dropped_bytes``: captured bytes never delivered because the stream had already
      passed their offsets as a gap, or because they lie before offset 0.
    * ``duplicate_bytes``: captured bytes seen again for offsets already delivered or
      buffered (retransmissions, overlaps).
    * ``inconsistent_bytes``: duplicate bytes whose content differed from the first copy.
    """

    __slots__ = (
        "_base",
        "_fin_off",
        "_gaps",
        "_high",
        "_hist",
        "_hist_bytes",
        "_missing",
        "_pieces",
        "_starts",
        "buffered_bytes",
        "delivered_bytes",
        "direction",
        "dropped_bytes",
        "duplicate_bytes",
        "gap_bytes",
        "inconsistent_bytes",
        "max_buffer_bytes",
        "max_history_bytes",
        "next_offset",
    )

    def __init__(
        self,
        direction: Direction,
        *,
        max_buffer_bytes: int = 4 << 20,
        max_history_bytes: int = MAX_HISTORY_BYTES,
    ) -> None:
        self.direction = direction
        self.max_buffer_bytes = max(0, max_buffer_bytes)
        self.max_history_bytes = max(0, max_history_bytes)
        self.next_offset = 0
        self.buffered_bytes = 0
        self.delivered_bytes = 0
        self.gap_bytes = 0
        self.dropped_bytes = 0
        self.duplicate_bytes = 0
        self.inconsistent_bytes = 0
        self._base: int | None = None
        self._fin_off: int | None = None
        self._high = 0
        # out-of-order buffer: sorted, non-overlapping pieces, all starting beyond next_offset
        self._starts: list[int] = []
        self._pieces: list[bytes] = []
        # sorted, merged ranges known to be missing from the capture (snaplen), ahead of the stream
        self._missing: list[tuple[int, int]] = []
        # (start, end, data) of the most recent delivered, not yet acknowledged chunks
        self._hist: deque[tuple[int, int, bytes]] = deque()
        self._hist_bytes = 0
        # (start, end) of the most recent gaps (kept after ACKs: they cost no payload memory);
        # made at the first gap (most directions have none)
        self._gaps: deque[tuple[int, int]] | None = None

    @property
    def base(self) -> int | None:
        """Relative sequence number of stream offset 0 (None until the first segment or ACK)."""
        return self._base

    @property
    def fin_offset(self) -> int | None:
        """Stream offset where the FIN sits (= stream length), if a FIN was seen."""
        return self._fin_off

    @property
    def empty(self) -> bool:
        """Nothing is held: no piece waits behind a hole and no snaplen-cut range is pending,
        so only bytes not captured yet could still be delivered (and :meth:`finish` reports
        no more than a hole before a FIN, as :class:`~.gaps.SeqFollower` would)."""
        return not self._starts and not self._missing

    @property
    def buffered_ranges(self) -> list[tuple[int, int]]:
        """(stream offset, length) of the out-of-order pieces held above the next offset."""
        return [(o, len(p)) for o, p in zip(self._starts, self._pieces, strict=True)]

    # ------------------------------------------------------------------ input

    def segment(
        self,
        seq_rel: int,
        data: bytes,
        ts_ns: int,
        frame: int,
        *,
        syn: bool = False,
        fin: bool = False,
        seg_len: int | None = None,
    ) -> list[StreamChunk | StreamGap]:
        """Feed one segment of this direction.

        ``seq_rel`` is its (unwrapped, relative) sequence number, ``data`` the captured
        payload, ``seg_len`` the payload length on the wire (tcp.len; default
        ``len(data)``; bytes beyond it, e.g. Ethernet padding, are ignored).
        Returns what became deliverable, in stream order.
        """
        n = len(data)
        if seg_len is None or seg_len < 0:
            seg_len = n
        elif seg_len < n:
            data = data[:seg_len]
            n = seg_len
        base = self._base
        if base is None:
            base = self._base = seq_rel + 1 if syn else seq_rel
        off = seq_rel - base + 1 if syn else seq_rel - base
        end = off + seg_len
        if fin and self._fin_off is None:
            self._fin_off = end
        if end > self._high:
            self._high = end
        if seg_len == 0:
            return []
        if off == self.next_offset and n == seg_len and not self._starts and not self._missing:
            # in-order fast path: no copy, one chunk
            self.next_offset = end
            self.delivered_bytes += n
            if self.max_history_bytes:
                self._remember(off, end, data)
            return [new_chunk(self.direction, data, ts_ns, frame, off)]
        return self._segment_slow(off, data, seg_len, ts_ns, frame)

    def in_order(
        self, seq_rel: int, data: bytes, ts_ns: int, frame: int
    ) -> StreamChunk | None:
        """:meth:`segment` for the common case, a segment without SYN or FIN whose payload
        (``data``, captured whole and not empty) is the next in order while nothing is
        buffered: returns its chunk, with the state updated exactly as :meth:`segment` does.
        Returns None, changing nothing, for any other segment (call :meth:`segment`)."""
        base = self._base
        off = self.next_offset
        if base is None or seq_rel - base != off or self._starts or self._missing:
            return None
        end = off + len(data)
        if end > self._high:
            self._high = end
        self.next_offset = end
        self.delivered_bytes += len(data)
        if self.max_history_bytes:  # _remember(off, end, data), inlined
            hist = self._hist
            hist.append((off, end, data))
            n = self._hist_bytes + end - off
            if n > self.max_history_bytes or len(hist) > _MAX_HISTORY_ENTRIES:
                while n > self.max_history_bytes or len(hist) > _MAX_HISTORY_ENTRIES:
                    n -= len(hist.popleft()[2])
            self._hist_bytes = n
        return new_chunk(self.direction, data, ts_ns, frame, off)

    def acked(self, ack_rel: int, ts_ns: int, frame: int) -> list[StreamChunk | StreamGap]:
        """The peer acknowledged everything before relative sequence number ``ack_rel``.

        Holes below it become gaps (``reason="acked"``) and the buffered bytes between
        them are delivered. An acknowledgement of the FIN is capped at the FIN, and one
        more than 2**30 bytes beyond anything seen is ignored as garbage.
        """
        base = self._base
        if base is None:
            self._base = ack_rel
            return []
        ack_off = ack_rel - base
        fin_off = self._fin_off
        if fin_off is not None and ack_off > fin_off:
            ack_off = fin_off
        if ack_off <= self.next_offset:
            hist = self._hist
            if hist and hist[0][1] <= ack_off:  # _trim_history(ack_off), inlined
                n = self._hist_bytes
                while hist and hist[0][1] <= ack_off:
                    n -= len(hist.popleft()[2])
                self._hist_bytes = n
            return []
        if ack_off - max(self._high, self.next_offset) > _MAX_ACK_AHEAD:
            return []
        out: list[StreamChunk | StreamGap] = []
        self._flush(out, ts_ns, frame)
        while self.next_offset < ack_off:
            nxt = self.next_offset
            gap_end = ack_off
            if self._starts and self._starts[0] < gap_end:
                gap_end = self._starts[0]
            if self._missing and nxt < self._missing[0][0] < gap_end:
                gap_end = self._missing[0][0]  # the snaplen part is labelled by _flush
            self._emit_gap(out, nxt, gap_end - nxt, ts_ns, frame, "acked")
            self._flush(out, ts_ns, frame)
        self._trim_history(ack_off)
        return out

    def finish(self, ts_ns: int, frame: int) -> list[StreamChunk | StreamGap]:
        """End of this direction (or of the capture): every hole becomes a gap.

        Delivers all buffered bytes, reports the holes between them (``"end"``), the
        known snaplen-cut ranges (``"snaplen"``) and, if a FIN was seen, any bytes
        missing before it. Releases the retained history. Later calls still work.
        """
        out: list[StreamChunk | StreamGap] = []
        if self._base is None:
            return out
        self._flush(out, ts_ns, frame)
        while self._starts:
            nxt = self.next_offset
            self._emit_gap(out, nxt, self._starts[0] - nxt, ts_ns, frame, "end")
            self._flush(out, ts_ns, frame)
        for lo, hi in self._missing:
            nxt = self.next_offset
            if hi <= nxt:
                continue
            if lo > nxt:
                self._emit_gap(out, nxt, lo - nxt, ts_ns, frame, "end")
                nxt = lo
            self._emit_gap(out, nxt, hi - nxt, ts_ns, frame, "snaplen")
        self._missing.clear()
        fin_off = self._fin_off
        if fin_off is not None and fin_off > self.next_offset:
            self._emit_gap(out, self.next_offset, fin_off - self.next_offset, ts_ns, frame, "end")
        self._hist.clear()
        self._hist_bytes = 0
        return out

    # ------------------------------------------------------------- internals

    def _segment_slow(
        self, off: int, data: bytes, seg_len: int, ts_ns: int, frame: int
    ) -> list[StreamChunk | StreamGap]:
        out: list[StreamChunk | StreamGap] = []
        cap_end = off + len(data)
        end = off + seg_len
        nxt = self.next_offset
        lo = off
        if lo < 0:
            below = min(cap_end, 0) - off
            if below > 0:
                self.dropped_bytes += below
            lo = 0
        old_end = min(cap_end, nxt)
        if lo < old_end:
            self._old(
                lo, data[lo - off : old_end - off] if (lo != off or old_end != cap_end) else data
            )
        new_lo = max(lo, nxt)
        if cap_end > new_lo:
            self._insert(new_lo, data[new_lo - off :] if new_lo != off else data)
        miss_lo = max(cap_end, new_lo)
        if end > miss_lo:
            self._add_missing(miss_lo, end)
        self._flush(out, ts_ns, frame)
        if self.buffered_bytes > self.max_buffer_bytes or len(self._starts) > _MAX_PIECES:
            self._force(out, ts_ns, frame)
        return out

    def _old(self, lo: int, old: bytes) -> None:
        """Captured bytes ``old`` at offsets [lo, lo+len) all below next_offset."""
        hi = lo + len(old)
        covered = 0
        for s, e in reversed(self._gaps or ()):
            if e <= lo:
                break
            if s < hi:
                late = (e if e < hi else hi) - (s if s > lo else lo)
                self.dropped_bytes += late
                covered += late
        for s, e, d in reversed(self._hist):
            if e <= lo:
                break
            if s >= hi:
                continue
            a = s if s > lo else lo
            b = e if e < hi else hi
            self._compare(d, a - s, old, a - lo, b - a)
            covered += b - a
        rest = len(old) - covered
        if rest > 0:
            # delivered data no longer held (acknowledged, or beyond max_history_bytes), or a
            # gap reported too long ago to remember: counted as duplicates, not compared
            self.duplicate_bytes += rest

    def _compare(self, first: bytes, f_off: int, later: bytes, l_off: int, n: int) -> None:
        self.duplicate_bytes += n
        a = memoryview(first)[f_off : f_off + n]
        b = memoryview(later)[l_off : l_off + n]
        if a != b:
            self.inconsistent_bytes += sum(1 for x, y in zip(a, b, strict=True) if x != y)

    def _insert(self, off: int, data: bytes) -> None:
        """Buffer ``data`` at ``off`` (>= next_offset); bytes already buffered win."""
        starts = self._starts
        pieces = self._pieces
        end = off + len(data)
        i = bisect_right(starts, off) - 1
        if i < 0 or starts[i] + len(pieces[i]) <= off:
            i += 1
        if i == len(starts) or starts[i] >= end:
            # no overlap: the common case
            starts.insert(i, off)
            pieces.insert(i, data)
            self.buffered_bytes += len(data)
            return
        new: list[tuple[int, bytes]] = []
        cur = off
        while i < len(starts) and starts[i] < end:
            ps = starts[i]
            pd = pieces[i]
            pe = ps + len(pd)
            if ps > cur:
                new.append((cur, data[cur - off : ps - off]))
            a = ps if ps > cur else cur
            b = pe if pe < end else end
            if b > a:
                self._compare(pd, a - ps, data, a - off, b - a)
            if pe > cur:
                cur = pe
            i += 1
            if cur >= end:
                break
        if cur < end:
            new.append((cur, data[cur - off :]))
        for s, d in new:
            j = bisect_left(starts, s)
            starts.insert(j, s)
            pieces.insert(j, d)
            self.buffered_bytes += len(d)

    def _add_missing(self, lo: int, hi: int) -> None:
        """Remember that [lo, hi) was cut by the snaplen."""
        missing = self._missing
        if len(missing) >= _MAX_MISSING:
            return  # becomes an ordinary hole
        merged: list[tuple[int, int]] = []
        placed = False
        for a, b in missing:
            if b < lo:
                merged.append((a, b))
            elif a > hi:
                if not placed:
                    merged.append((lo, hi))
                    placed = True
                merged.append((a, b))
            else:
                lo = min(lo, a)
                hi = max(hi, b)
        if not placed:
            merged.append((lo, hi))
        self._missing = merged

    def _flush(self, out: list[StreamChunk | StreamGap], ts_ns: int, frame: int) -> None:
        """Deliver the buffered pieces contiguous with next_offset, and snaplen gaps among them."""
        starts = self._starts
        missing = self._missing
        if not starts and not missing:
            return
        pieces = self._pieces
        nxt = self.next_offset
        run: list[bytes] = []
        run_start = nxt
        i = 0
        np = len(starts)
        while True:
            if i < np and starts[i] == nxt:
                d = pieces[i]
                i += 1
                run.append(d)
                nxt += len(d)
                continue
            while missing and missing[0][1] <= nxt:
                missing.pop(0)
            if missing and missing[0][0] <= nxt:
                gap_end = missing[0][1]
                if i < np and starts[i] < gap_end:
                    gap_end = starts[i]
                if run:
                    self._emit_run(out, run, run_start, ts_ns, frame)
                    run = []
                self.next_offset = nxt
                self._emit_gap(out, nxt, gap_end - nxt, ts_ns, frame, "snaplen")
                nxt = run_start = gap_end
                continue
            break
        if run:
            self._emit_run(out, run, run_start, ts_ns, frame)
        if i:
            del starts[:i]
            del pieces[:i]
        self.next_offset = nxt

    def _force(self, out: list[StreamChunk | StreamGap], ts_ns: int, frame: int) -> None:
        """The buffer is over its limits: skip holes (as gaps) until it is not."""
        while self._starts and (
            self.buffered_bytes > self.max_buffer_bytes or len(self._starts) > _MAX_PIECES
        ):
            nxt = self.next_offset
            self._emit_gap(out, nxt, self._starts[0] - nxt, ts_ns, frame, "limit")
            self._flush(out, ts_ns, frame)

    def _emit_run(
        self,
        out: list[StreamChunk | StreamGap],
        run: list[bytes],
        start: int,
        ts_ns: int,
        frame: int,
    ) -> None:
        data = run[0] if len(run) == 1 else b"".join(run)
        n = len(data)
        self.buffered_bytes -= n
        self.delivered_bytes += n
        out.append(new_chunk(self.direction, data, ts_ns, frame, start))
        if self.max_history_bytes:
            self._remember(start, start + n, data)

    def _emit_gap(
        self,
        out: list[StreamChunk | StreamGap],
        off: int,
        n: int,
        ts_ns: int,
        frame: int,
        reason: str,
    ) -> None:
        if n <= 0:
            return
        self.gap_bytes += n
        self.next_offset = off + n
        out.append(
            StreamGap(
                direction=self.direction,
                offset=off,
                nbytes=n,
                ts_ns=ts_ns,
                frame=frame,
                reason=reason,
            )
        )
        gaps = self._gaps
        if gaps is None:
            gaps = self._gaps = deque(maxlen=_MAX_GAP_MEMORY)
        if gaps and gaps[-1][1] == off:
            gaps[-1] = (gaps[-1][0], off + n)
        else:
            gaps.append((off, off + n))

    def _remember(self, start: int, end: int, data: bytes) -> None:
        hist = self._hist
        hist.append((start, end, data))
        self._hist_bytes += end - start
        while self._hist_bytes > self.max_history_bytes or len(hist) > _MAX_HISTORY_ENTRIES:
            self._hist_bytes -= len(hist.popleft()[2])

    def _trim_history(self, upto: int) -> None:
        """Forget delivered data the peer has acknowledged (as Zeek trims on ACK)."""
        hist = self._hist
        while hist and hist[0][1] <= upto:
            self._hist_bytes -= len(hist.popleft()[2])
