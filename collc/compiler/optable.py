"""The op stream as columns: one int64 array per field, one entry per op (issue #30).

``scratch`` (:func:`collc.compiler.scratch.expand`) writes the program's ops into an
:class:`OpTable`; every later pass (channels, threadblocks, fusion, dependencies) and the
XML printer work on such columns, with numpy doing the per-op work, instead of on one
Python object per op.  :class:`collc.compiler.scratch.RankOp` remains the readable view of
one row (``OpTable.op``), built only where a reader asks for it (``--dump-ir``, the tests).

Codes: ``kind`` is an index into :data:`KINDS`, buffers into :data:`BUFS`; ``sub`` is -1
where the op's key has two parts.  An op's logical position ``(step, phase) + key`` sorts as
``(step, phase, number, sub)`` because its key is ``(step, number[, sub])``; ``pos`` is the op's
rank in that order among all the program's ops (:meth:`OpTable.from_rows` numbers them once),
so one integer compares two ops' positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]

FIELDS = ("rank", "step", "phase", "kind", "peer", "lane", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt",
          "reduce", "number", "sub", "chunk", "pos")
BUFS = ("i", "o", "s")
BUF_CODE = {b: k for k, b in enumerate(BUFS)}
SEND, RECV, COPY, REDUCE = 0, 1, 2, 3      # the kind codes, in the order of ``scratch.Kind``


@dataclass(frozen=True, eq=False)
class OpTable:
    """Ops as rows of ``cols`` (``len(FIELDS)`` x n); the named properties are its rows (views)."""

    cols: Ints

    @staticmethod
    def from_rows(rows: Sequence[tuple[int, ...]]) -> OpTable:
        """The table of rows of every field but ``pos``, which is worked out here."""
        cols = np.zeros((len(FIELDS), len(rows)), dtype=np.int64)
        if rows:
            # one flat iterator of ints: several times cheaper for numpy than a list of tuples
            flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=len(rows) * (len(FIELDS) - 1))
            cols[:-1] = flat.reshape(len(rows), len(FIELDS) - 1).T
            t = OpTable(cols)
            cols[-1][np.lexsort((t.sub, t.number, t.phase, t.step))] = np.arange(len(rows), dtype=np.int64)
        return OpTable(cols)

    @staticmethod
    def from_columns(cols: Ints) -> OpTable:
        """The table of ``cols`` (``len(FIELDS)`` x n, rows in plan order), whose ``pos`` row is
        worked out here, in place (a million ops make 16 MB a row: no copy)."""
        t = OpTable(cols)
        cols[-1][np.argsort(encode([t.step, t.phase, t.number, t.sub + 1]))] = np.arange(cols.shape[1], dtype=np.int64)
        return t

    def __len__(self) -> int:
        return int(self.cols.shape[1])

    def _row(self, k: int) -> Ints:
        row: Ints = self.cols[k]
        return row

    def take(self, idx: Any) -> OpTable:
        """The rows ``idx`` (an index array, a slice or a mask), in that order."""
        return OpTable(self.cols[:, idx])

    @property
    def rank(self) -> Ints:
        return self._row(0)

    @property
    def step(self) -> Ints:
        return self._row(1)

    @property
    def phase(self) -> Ints:
        return self._row(2)

    @property
    def kind(self) -> Ints:
        return self._row(3)

    @property
    def peer(self) -> Ints:
        return self._row(4)

    @property
    def lane(self) -> Ints:
        return self._row(5)

    @property
    def srcbuf(self) -> Ints:
        return self._row(6)

    @property
    def srcoff(self) -> Ints:
        return self._row(7)

    @property
    def dstbuf(self) -> Ints:
        return self._row(8)

    @property
    def dstoff(self) -> Ints:
        return self._row(9)

    @property
    def cnt(self) -> Ints:
        return self._row(10)

    @property
    def reduce(self) -> Ints:
        return self._row(11)

    @property
    def number(self) -> Ints:
        return self._row(12)

    @property
    def sub(self) -> Ints:
        return self._row(13)

    @property
    def chunk(self) -> Ints:
        return self._row(14)
    @property
    def pos(self) -> Ints:
        return self._row(15)

    def order(self) -> Ints:
        """Indices of the rows in logical-position order."""
        return np.argsort(self.pos)

    def ops(self) -> list[Any]:
        """Every row as a :class:`collc.compiler.scratch.RankOp` (the readable view)."""
        from collc.compiler.scratch import KINDS, RankOp

        out = []
        for (rank, step, phase, kind, peer, lane, sb, so, db, do, cnt, red, num, sub, chunk, _) in self.cols.T.tolist():
            key = (step, num) if sub < 0 else (step, num, sub)
            out.append(RankOp(rank, step, phase, KINDS[kind], peer, lane, BUFS[sb], so, BUFS[db], do, cnt,
                              bool(red), key, chunk))
        return out


def encode(cols: Sequence[Ints]) -> Ints:
    """One int64 per row that orders and compares the rows like the tuples of ``cols``
    (each column non-negative): mixed radix where it fits, else the rank among the distinct rows."""
    if not cols or len(cols[0]) == 0:
        return np.zeros(len(cols[0]) if cols else 0, dtype=np.int64)
    out = np.zeros(len(cols[0]), dtype=np.int64)
    total = 1
    for c in cols:
        top = int(c.max()) + 1
        total *= top
        if total >= 1 << 62:
            stacked = np.stack(cols, axis=1)
            inv = np.unique(stacked, axis=0, return_inverse=True)[1]
            return inv.reshape(-1).astype(np.int64)
        out = out * top + c
    return out


def segments(lo: Ints, hi: Ints, cuts: Ints) -> tuple[Ints, Ints]:
    """For intervals ``[lo, hi)`` whose ends are all in the sorted ``cuts``: the segment numbers
    they cover (segment k is ``[cuts[k], cuts[k+1])``) and the interval each belongs to."""
    a = np.searchsorted(cuts, lo)
    b = np.searchsorted(cuts, hi)
    n = b - a
    owner = np.repeat(np.arange(len(lo), dtype=np.int64), n)
    starts = np.cumsum(n) - n
    seg = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(starts, n) + np.repeat(a, n)
    return seg.astype(np.int64), owner
