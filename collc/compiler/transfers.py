"""The Schedule's transfers as columns: one int64 array per field, one entry per transfer (issue #30).

Lowering reads the frontend's :class:`collc.ir.schedule.Schedule` into a :class:`TransferTable`
once, at its start (:meth:`TransferTable.of`; a Schedule made from columns,
:meth:`collc.ir.schedule.Schedule.of_columns`, hands over its own); ``pipelining``
(:mod:`collc.compiler.pipelining`) and ``scratch`` (:func:`collc.compiler.scratch.expand`) work
on the columns, with numpy doing the per-transfer work.  :meth:`TransferTable.schedule` builds
the Schedule back, only where a reader asks for it (``--dump-ir pipelining``, the invariant
check between passes, the tests).

A chunk list is ``cnt`` chunks from ``sfirst`` (``dfirst``) where it is contiguous and
ascending (a ``range``: ``sat`` is -1), else the ``cnt`` entries of ``sflat`` (``dflat``) from
``sat`` (``dat``): the lists that are not ranges, end to end.  A list that is contiguous is
always stored as a range, so ``sat >= 0`` means the list has at least two runs.  Buffers are
coded as :data:`collc.compiler.optable.BUF_CODE`; ``reduce`` is 1 for :attr:`Op.REDUCE`.  Rows are
in the Schedule's order (``Transfer.sort_key``, stable).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from collc.compiler.optable import BUFS, Ints
from collc.ir.collective import Buffer, Collective
from collc.ir.schedule import COLUMNS, Op, Provenance, Schedule, Slots, Transfer, transfer_columns

FIELDS = COLUMNS      # the layout a Schedule's own columns have
_BUFFERS = tuple(Buffer(b) for b in BUFS)
_OPS = (Op.COPY, Op.REDUCE)


@dataclass(frozen=True, eq=False)
class TransferTable:
    """Transfers as rows of ``cols`` (``len(FIELDS)`` x n), with the Schedule's other fields."""

    collective: Collective
    provenance: Provenance
    cols: Ints
    sflat: Ints
    dflat: Ints
    scratch_chunks: int = 0
    tb_pairs: tuple[tuple[int, int, int, int], ...] = ()
    step_sync: tuple[tuple[int, int], ...] = ()
    ordered_sends: bool = False
    step_reply: tuple[tuple[int, int], ...] = ()

    @staticmethod
    def of(schedule: Schedule) -> TransferTable:
        """The table of ``schedule``'s transfers (one pass over them per group of fields; none when
        the Schedule carries them as columns, in this layout)."""
        cols, sflat, dflat = transfer_columns(schedule)
        flats: list[Ints] = []
        for side, flat in ((0, sflat), (1, dflat)):
            # lists that are contiguous after all (a tuple (4, 5, 6)) are kept as ranges
            lists = np.flatnonzero(cols[10 + side] >= 0)
            cols[10 + side][lists], kept = pack(flat, cols[7][lists])
            flats.append(kept)
        return TransferTable(schedule.collective, schedule.provenance, cols, flats[0], flats[1],
                             schedule.scratch_chunks, schedule.tb_pairs, schedule.step_sync, schedule.ordered_sends,
                             schedule.step_reply)

    def schedule(self) -> Schedule:
        """The Schedule of these transfers (the readable view)."""
        out: list[Transfer] = []
        for (step, src, dst, sb, db, red, lane, cnt, sf, df, sa, da) in self.cols.T.tolist():
            out.append(Transfer(step, src, dst, _BUFFERS[sb], _slots(sf, sa, cnt, self.sflat), _BUFFERS[db],
                                _slots(df, da, cnt, self.dflat), _OPS[red], lane))
        return Schedule(self.collective, tuple(out), self.provenance, self.scratch_chunks, self.tb_pairs,
                        self.step_sync, self.ordered_sends, self.step_reply)

    def __len__(self) -> int:
        return int(self.cols.shape[1])

    def _row(self, k: int) -> Ints:
        row: Ints = self.cols[k]
        return row

    @property
    def step(self) -> Ints:
        return self._row(0)

    @property
    def src(self) -> Ints:
        return self._row(1)

    @property
    def dst(self) -> Ints:
        return self._row(2)

    @property
    def srcbuf(self) -> Ints:
        return self._row(3)

    @property
    def dstbuf(self) -> Ints:
        return self._row(4)

    @property
    def reduce(self) -> Ints:
        return self._row(5)

    @property
    def lane(self) -> Ints:
        return self._row(6)

    @property
    def cnt(self) -> Ints:
        return self._row(7)

    @property
    def sfirst(self) -> Ints:
        return self._row(8)

    @property
    def dfirst(self) -> Ints:
        return self._row(9)

    @property
    def sat(self) -> Ints:
        return self._row(10)

    @property
    def dat(self) -> Ints:
        return self._row(11)

    @property
    def nsteps(self) -> int:
        return int(self.step[-1]) + 1 if len(self) else 0     # sorted by step first

    @property
    def lanes(self) -> int:
        """Lanes in use: by a transfer, or named by a tb pair hint (``Schedule.lanes``)."""
        return 1 + max(int(self.lane.max()) if len(self) else 0, max((lane for _, lane, _, _ in self.tb_pairs),
                                                                     default=0))

    def sorted(self) -> TransferTable:
        """The rows in the Schedule's order: by ``Transfer.sort_key``, ties kept in row order."""
        order = np.lexsort((self.dfirst, self.sfirst, self.dst, self.src, self.lane, self.step))
        return TransferTable(self.collective, self.provenance, self.cols[:, order], self.sflat, self.dflat,
                             self.scratch_chunks, self.tb_pairs, self.step_sync, self.ordered_sends, self.step_reply)


def _slots(first: int, at: int, cnt: int, flat: Ints) -> Slots:
    if at < 0:
        return range(first, first + cnt)
    return tuple(flat[at:at + cnt].tolist())


def gather(flat: Ints, lo: Ints, lens: Ints) -> Ints:
    """``flat[lo[k]:lo[k] + lens[k]]`` for every k, end to end."""
    starts = np.cumsum(lens) - lens
    total = int(lens.sum())
    out: Ints = flat[np.repeat(lo - starts, lens) + np.arange(total, dtype=np.int64)]
    return out


def runs(flat: Ints, lens: Ints) -> tuple[Ints, Ints, Ints]:
    """The runs of consecutive ascending entries in the lists ``flat`` holds end to end (``lens``
    each, all >= 1): per run its list, first entry and length, list by list."""
    starts = np.cumsum(lens) - lens
    brk = np.ones(len(flat), dtype=bool)
    if len(flat) > 1:
        brk[1:] = flat[1:] - flat[:-1] != 1
    brk[starts] = True
    at = np.flatnonzero(brk)
    length = np.diff(np.append(at, len(flat)))
    owner = np.searchsorted(starts, at, "right") - 1
    return owner.astype(np.int64), flat[at], length.astype(np.int64)


def pack(flat: Ints, lens: Ints) -> tuple[Ints, Ints]:
    """For lists held end to end in ``flat`` (``lens`` each, >= 1): where each starts among the
    lists kept (-1 for a contiguous ascending one, stored as a range) and the kept lists."""
    if not len(lens):
        return np.zeros(0, dtype=np.int64), flat[:0]
    owner, _, _ = runs(flat, lens)
    contiguous: npt.NDArray[np.bool_] = np.bincount(owner, minlength=len(lens)) == 1
    kept_lens = np.where(contiguous, 0, lens)
    at = np.where(contiguous, -1, np.cumsum(kept_lens) - kept_lens)
    kept: Ints = flat[np.repeat(~contiguous, lens)]
    return at.astype(np.int64), kept
