"""Content gaps of the connections no protocol layer parses, found without buffering payload.

A connection whose bytes some observer wants goes through :class:`~.reassembly.Reassembler`,
which reports the bytes the capture never saw as :class:`~.reassembly.StreamGap` objects. A
connection no observer wants (FTP, SSH, LDAP..., or every connection with
``load(payloads=False)``), or one whose observer gave up, used to be followed no further, so
its gaps were neither in its Zeek ``history`` (``G``/``g``) nor in the warnings. Zeek follows
sequence space on every connection (``TCP_Reassembler`` runs whether or not an analyzer reads
the bytes), and so does :class:`SeqFollower`, at the cost of a few integers per direction:

* ``nxt``: the sequence number after the highest byte of the contiguous stream seen so far;
* the ranges captured above ``nxt`` (bounded by :data:`MAX_FOLLOW_RANGES`; never the bytes);
* the sequence number of the FIN, once seen.

It reports the same gaps, with the same reasons and offsets, as the reassembler would:
``acked`` (the peer acknowledged bytes beyond ``nxt`` that the capture never saw), ``snaplen``
(the stream reached bytes the snaplen cut off), ``limit`` (more than
:data:`MAX_FOLLOW_RANGES` captured ranges waited above a hole: the lowest hole is given up)
and, from :meth:`SeqFollower.finish`, ``end`` (holes left at the end of the capture). The base
(offset 0) follows the reassembler's rule: the SYN (its sequence number + 1), else an
acknowledgement from the peer seen before any segment of the direction, else the first
segment. Sequence numbers are the analysis' relative ones, unwrapped by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MAX_FOLLOW_RANGES", "SeqFollower"]

#: captured ranges remembered above the lowest hole, per direction
MAX_FOLLOW_RANGES = 256

#: an acknowledgement more than this beyond everything seen is garbage (as in reassembly.py)
_MAX_ACK_AHEAD = 1 << 30

Gap = tuple[int, int, int, str]
"""(direction 0 client / 1 server, stream offset, bytes, reason)"""


class _Dir:
    __slots__ = ("base", "fin", "nxt", "ranges")

    def __init__(self) -> None:
        self.base = -1
        """relative sequence number of stream offset 0 (-1: not known yet)"""
        self.nxt = -1
        """sequence number after the contiguous stream (-1: not known yet)"""
        self.ranges: list[list[int]] = []
        """[start, end) captured above nxt, ascending, disjoint, not touching nxt"""
        self.fin = -1
        """sequence number of the FIN (-1: none seen)"""


class SeqFollower:
    """Sequence-space follower of one connection (both directions). Never raises."""

    __slots__ = ("dirs", "hi", "released")

    def __init__(self) -> None:
        self.dirs = (_Dir(), _Dir())
        self.hi = [-1, -1]
        """the caller's unwrapping state: last unwrapped relative sequence number per direction"""
        self.released = False
        """took over from a parser let go once done (both directions ended at a FIN): bytes
        beyond a FIN would have been parsed (the tracker reports them)"""

    @classmethod
    def from_reassembly(cls, bases: Sequence[int | None], next_offsets: Sequence[int],
                        buffered: Sequence[Sequence[tuple[int, int]]],
                        fins: Sequence[int | None]) -> SeqFollower:
        """Take over from two reassemblers whose observer stopped wanting bytes: per direction
        the base, the next offset, the buffered (offset, length) pieces and the FIN offset."""
        f = cls()
        for x in (0, 1):
            b = bases[x]
            if b is None:
                continue
            d = f.dirs[x]
            d.base = b
            d.nxt = b + next_offsets[x]
            d.ranges = [[b + o, b + o + n] for o, n in buffered[x] if n > 0]
            fo = fins[x]
            if fo is not None:
                d.fin = b + fo
        return f

    def segment(self, x: int, seq: int, seg_len: int, captured: int, syn: bool, fin: bool,
                out: list[Gap]) -> None:
        """A segment of direction ``x`` (0 client, 1 server) at unwrapped relative ``seq``
        with ``seg_len`` payload bytes of which ``captured`` were captured. Gaps found are
        appended to ``out``."""
        d = self.dirs[x]
        if syn:
            seq += 1
            if d.base < 0:
                d.base = d.nxt = seq
        end = seq + seg_len
        if fin:
            d.fin = end
        if not seg_len:
            return
        if d.nxt < 0:
            d.base = d.nxt = seq
        nxt = d.nxt
        if seq <= nxt:
            if end <= nxt:
                return  # already passed (retransmission, or bytes given up as a gap)
            cut = seq + captured
            if cut < end:  # the snaplen cut the tail: a gap once the stream reaches it
                lo = cut if cut > nxt else nxt
                out.append((x, lo - d.base, end - lo, "snaplen"))
            d.nxt = end
            if d.ranges:
                _absorb(d)
            return
        # above a hole: remember the range (merged with its neighbours)
        r = d.ranges
        if not r or seq > r[-1][1]:
            r.append([seq, end])
        else:
            r.append([seq, end])
            r.sort()
            merged: list[list[int]] = []
            for a in r:
                if merged and a[0] <= merged[-1][1]:
                    if a[1] > merged[-1][1]:
                        merged[-1][1] = a[1]
                else:
                    merged.append(a)
            d.ranges = r = merged
        if len(r) > MAX_FOLLOW_RANGES:
            out.append((x, d.nxt - d.base, r[0][0] - d.nxt, "limit"))
            d.nxt = r[0][0]
            _absorb(d)

    def acked(self, x: int, ack: int, out: list[Gap]) -> None:
        """The peer acknowledged direction ``x`` up to unwrapped relative ``ack``: the holes
        below it that the capture never filled are gaps (``acked``)."""
        d = self.dirs[x]
        if d.nxt < 0:
            d.base = d.nxt = ack
            return
        if d.fin >= 0 and ack > d.fin:
            ack = d.fin
        nxt = d.nxt
        if ack <= nxt:
            return
        top = d.ranges[-1][1] if d.ranges else nxt
        if ack - max(top, nxt) > _MAX_ACK_AHEAD:
            return
        while d.nxt < ack:
            r = d.ranges
            gap_end = r[0][0] if r and r[0][0] < ack else ack
            out.append((x, d.nxt - d.base, gap_end - d.nxt, "acked"))
            d.nxt = gap_end
            if r:
                _absorb(d)

    def finish(self, out: list[Gap]) -> None:
        """End of the capture: the holes between captured ranges, and before a FIN, are gaps
        (``end``)."""
        for x in (0, 1):
            d = self.dirs[x]
            if d.nxt < 0:
                continue
            top = d.fin if d.fin >= 0 else -1
            while d.ranges or (top > d.nxt):
                r = d.ranges
                gap_end = r[0][0] if r else top
                if gap_end > d.nxt:
                    out.append((x, d.nxt - d.base, gap_end - d.nxt, "end"))
                d.nxt = max(d.nxt, gap_end)
                if r:
                    _absorb(d)
                else:
                    break


def _absorb(d: _Dir) -> None:
    """Move ``d.nxt`` over the captured ranges that now touch it, and drop them."""
    r = d.ranges
    nxt = d.nxt
    i = 0
    while i < len(r) and r[i][0] <= nxt:
        if r[i][1] > nxt:
            nxt = r[i][1]
        i += 1
    if i:
        del r[:i]
    d.nxt = nxt
