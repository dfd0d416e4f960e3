"""Sets of integers (packet numbers, stream offsets) as sorted disjoint ranges."""

from __future__ import annotations

import bisect

__all__ = ["MAX_RANGES", "RangeSet"]

MAX_RANGES = 4096
"""ranges of one set (packet numbers seen or acknowledged, stream offsets); beyond it the set
stops growing (``RangeSet.full``)"""


class RangeSet:
    """A set of packet numbers as sorted disjoint inclusive ranges (at most
    :data:`MAX_RANGES`; a set that would need more stops growing and says so)."""

    __slots__ = ("_hi", "_lo", "full")

    def __init__(self) -> None:
        self._lo: list[int] = []
        self._hi: list[int] = []
        self.full = False

    def add(self, lo: int, hi: int) -> None:
        los, his = self._lo, self._hi
        if his and lo == his[-1] + 1 and lo > los[-1]:  # the common case: appending
            his[-1] = max(his[-1], hi)
            return
        i = bisect.bisect_left(his, lo - 1)
        j = bisect.bisect_right(los, hi + 1)
        if i >= j:
            if len(los) >= MAX_RANGES:
                self.full = True
                return
            los.insert(i, lo)
            his.insert(i, hi)
            return
        nlo = min(lo, los[i])
        nhi = max(hi, his[j - 1])
        los[i:j] = [nlo]
        his[i:j] = [nhi]

    def clear(self) -> None:
        """Empty the set (and let it grow again)."""
        self._lo.clear()
        self._hi.clear()
        self.full = False

    def __contains__(self, pn: object) -> bool:
        if not isinstance(pn, int):
            return False
        i = bisect.bisect_right(self._lo, pn) - 1
        return i >= 0 and self._hi[i] >= pn

    def count(self, upto: int | None = None) -> int:
        """numbers in the set (those <= ``upto``)"""
        n = 0
        for lo, hi in zip(self._lo, self._hi, strict=True):
            if upto is not None:
                if lo > upto:
                    break
                hi = min(hi, upto)
            n += hi - lo + 1
        return n

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self._lo, self._hi, strict=True))

    def count_not_in(self, other: RangeSet, upto: int) -> int:
        """numbers of this set <= ``upto`` that are not in ``other``"""
        n = 0
        for lo, hi in self.ranges():
            if lo > upto:
                break
            hi = min(hi, upto)
            n += hi - lo + 1
            for olo, ohi in other.ranges():
                if ohi < lo:
                    continue
                if olo > hi:
                    break
                n -= min(hi, ohi) - max(lo, olo) + 1
        return n
