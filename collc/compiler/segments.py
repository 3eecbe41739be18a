"""Slot segments: one rank's buffers cut at every interval end its ops use.

The dependency and fusion passes track state per chunk slot (last writer, readers,
accesses).  Ops move contiguous intervals of up to 71 chunks, and many ops share the
same ends, so cutting each buffer only where some op's interval starts or ends gives
segments inside which every slot always has the same state.  Tracking a segment
instead of each of its slots gives the same answers for a fraction of the work
(a 1024-rank Swing program: ~35 slots per op, ~2 segments).

>>> part = Partition([("o", 0, 8), ("o", 4, 6), ("s", 0, 2)])
>>> [part.bounds(s) for s in part.segments(("o", 0, 8))]
[('o', 0, 4), ('o', 4, 6), ('o', 6, 8)]
>>> list(part.segments(("o", 4, 6))), len(part)
([1], 4)
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from collc.compiler.scratch import Interval

__all__ = ["Partition"]


class Partition:
    """Segments numbered 0..len-1; an interval used to build it is a run of whole segments."""

    __slots__ = ("_cuts", "_base", "_owner", "_n", "_memo")

    def __init__(self, intervals: Iterable[Interval]) -> None:
        ivs = set(intervals)
        ends: dict[str, set[int]] = {}
        for b, lo, hi in ivs:
            s = ends.get(b)
            if s is None:
                ends[b] = s = set()
            s.add(lo)
            s.add(hi)
        self._cuts: dict[str, list[int]] = {}
        self._base: dict[str, int] = {}
        self._owner: list[str] = []
        n = 0
        for b in sorted(ends):
            cuts = sorted(ends[b])
            self._cuts[b] = cuts
            self._base[b] = n
            n += len(cuts) - 1
            self._owner.extend([b] * (len(cuts) - 1))
        self._n = n
        # ops reuse the same intervals many times: look each one up once (both ends are cuts:
        # a dict from cut to segment number does it without bisecting)
        seg_at = {b: {c: self._base[b] + k for k, c in enumerate(cuts)} for b, cuts in self._cuts.items()}
        self._memo: dict[Interval, range] = {}
        for iv in ivs:
            at = seg_at[iv[0]]
            self._memo[iv] = range(at[iv[1]], at[iv[2]])

    def __len__(self) -> int:
        return self._n

    @property
    def table(self) -> dict[Interval, range]:
        """``segments`` of every interval given, as a dict (the passes' inner loops index it)."""
        return self._memo

    def segments(self, iv: Interval) -> range:
        """The segments that make up ``iv`` (which must be one of the intervals given)."""
        r = self._memo.get(iv)
        return r if r is not None else self._lookup(iv)

    def _lookup(self, iv: Interval) -> range:
        b, lo, hi = iv
        cuts = self._cuts[b]
        base = self._base[b]
        return range(base + bisect_left(cuts, lo), base + bisect_left(cuts, hi))

    def bounds(self, seg: int) -> Interval:
        b = self._owner[seg]
        k = seg - self._base[b]
        cuts = self._cuts[b]
        return (b, cuts[k], cuts[k + 1])
