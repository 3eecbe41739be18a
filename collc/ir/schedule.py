"""The Schedule IR: a collective plus chunk transfers ordered by step.

A ``Transfer`` moves (copy) or accumulates (reduce) a list of chunks from one
rank's buffer into another rank's buffer.  Step semantics are synchronous: every
transfer of step ``t`` reads the state left by steps ``< t``; the writes of one
step land together.  A transfer whose ``src`` equals ``dst`` is a local copy or
reduce.  ``lane`` separates independent replicas (instances, or the two
directions of a bidirectional ring) so that lowering may give each its own
channels.

``tb_pairs`` is an optional lowering hint: ``(rank, lane, a, b)`` asks that on
``rank`` the threadblock receiving from ``a`` on a channel of ``lane`` be the one
sending to ``b`` on that channel, so that a chunk received from ``a`` and forwarded
to ``b`` can become one fused step.  It never changes what the schedule computes.

``step_sync`` is an optional lowering hint too: connections ``(src, dst)`` on which every
send of step ``s`` waits for all of ``src``'s receives of earlier steps on the same lane,
even where no data flows between them.  It carries a schedule's step grouping into the program for
sends that read only local data (Swing's extra rank for an odd p, Fig. 4), which the
runtime would otherwise issue all at once.

``step_reply`` is a lowering hint for trades: connections ``(src, dst)`` on which a send
of step ``s`` waits for ``src``'s receive from ``dst`` of the same step, so that ``src``
answers ``dst``'s message instead of sending at once (Swing's core ranks answering the
extra rank of an odd p, Fig. 4: each of the extra rank's steps then takes its own rounds
however the core's steps are paced).  A connection and its reverse cannot both reply.

``ordered_sends`` is another lowering hint: on every rank, a send to a peer waits
for the rank's previous send to that peer from an earlier step even when lowering
puts the two on different channels (a dependency between their threadblocks), so
that a link's transfers run one after the other instead of sharing the link.

``columns`` carries the transfers as integer columns (:data:`COLUMNS`) when a frontend made them that way
(:meth:`Schedule.of_columns`, for the million transfers of a 1024-rank MultiTree or BFB
schedule): the lowering reads them as its transfer table instead of reading every
``Transfer`` (``collc.compiler.transfers``); the ``Transfer`` values are the same either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from collc.errors import ScheduleError
from collc.ir.collective import Buffer, Collective
from collc.ir.records import fast_init

# Chunk index lists are ranges when contiguous (cheap at 1024 ranks), else tuples.
Slots = range | tuple[int, ...]


def make_slots(indices: Iterable[int]) -> Slots:
    """Normalize chunk indices: a ``range`` when contiguous and ascending."""
    if type(indices) is range and indices.step == 1:
        return indices
    if type(indices) is list and len(indices) == 1:    # one chunk: what most frontends pass
        return range(indices[0], indices[0] + 1)
    items = tuple(indices)
    n = len(items)
    # contiguous: the ends n-1 apart, and (beyond two) equal to the range they span (one C compare)
    if n and items[-1] - items[0] == n - 1 and (n <= 2 or items == tuple(range(items[0], items[0] + n))):
        return range(items[0], items[-1] + 1)
    return items


def _highest(idx: Slots) -> int:
    if isinstance(idx, range):   # max() would walk the whole range
        return idx[-1] if idx.step > 0 else idx[0]
    return max(idx)


def _lowest(idx: Slots) -> int:
    if isinstance(idx, range):   # min() would walk the whole range
        return idx[0] if idx.step > 0 else idx[-1]
    return min(idx)


class Op(str, Enum):
    COPY = "copy"
    REDUCE = "reduce"


#: The rows of :attr:`Schedule.columns`, one entry per transfer (``collc.compiler.transfers``
#: reads them as its table): buffers coded by :data:`BUFFER_CODES`, ``reduce`` 1 for
#: :attr:`Op.REDUCE`, chunk lists ``cnt`` chunks from ``sfirst`` / ``dfirst``; ``sat`` and ``dat``
#: are -1 (every list a range: the carrier holds no other lists).
COLUMNS = ("step", "src", "dst", "srcbuf", "dstbuf", "reduce", "lane", "cnt", "sfirst", "dfirst", "sat", "dat")
BUFFER_CODES = (Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH)
BUFFER_CODE: dict[Buffer, int] = {b: k for k, b in enumerate(BUFFER_CODES)}     # a buffer's code in the columns
_OPS = (Op.COPY, Op.REDUCE)


@fast_init
@dataclass(frozen=True, slots=True)
class Transfer:
    step: int
    src: int
    dst: int
    src_buf: Buffer
    src_idx: Slots
    dst_buf: Buffer
    dst_idx: Slots
    op: Op = Op.COPY
    lane: int = 0

    def __post_init__(self) -> None:
        if self.step < 0 or self.lane < 0:
            raise ScheduleError(f"negative step or lane in {self}")
        s, d = self.src_idx, self.dst_idx
        n = len(s)
        if n != len(d) or n == 0:
            raise ScheduleError(f"transfer needs equal, non-empty source and destination chunk lists: {self}")
        # a range of step 1 (what make_slots gives) starts at its lowest index
        if ((s.start if type(s) is range and s.step == 1 else _lowest(s)) < 0
                or (d.start if type(d) is range and d.step == 1 else _lowest(d)) < 0):
            raise ScheduleError(f"negative chunk index in {self}")
        if self.src == self.dst and self.src_buf == self.dst_buf and set(s) & set(d):
            raise ScheduleError(f"local transfer onto its own chunks: {self}")

    @property
    def count(self) -> int:
        return len(self.src_idx)

    @property
    def is_local(self) -> bool:
        return self.src == self.dst

    def sort_key(self) -> tuple[int, int, int, int, int, int]:
        return (self.step, self.lane, self.src, self.dst, self.src_idx[0], self.dst_idx[0])

    def on_lane(self, lane: int) -> Transfer:
        """The same transfer on ``lane`` (``dataclasses.replace`` costs 3x more: a frontend
        moves hundreds of thousands of transfers to their lanes)."""
        return Transfer(self.step, self.src, self.dst, self.src_buf, self.src_idx, self.dst_buf, self.dst_idx,
                        self.op, lane)


def _unchecked_maker() -> Callable[..., Transfer]:
    """``Transfer``'s constructor less ``__post_init__``, for rows whose invariants
    :meth:`Schedule.of_columns` has checked on the columns (a million transfers on 32x32)."""
    names = [f.name for f in fields(Transfer)]
    env: dict[str, Any] = {"new": object.__new__, "cls": Transfer}
    body = []
    for k, name in enumerate(names):
        env[f"set{k}"] = Transfer.__dict__[name].__set__
        body.append(f"    set{k}(t, {name})")
    code = f"def make({', '.join(names)}):\n    t = new(cls)\n" + "\n".join(body) + "\n    return t\n"
    exec(code, env)     # noqa: S102 - field names only, as collc.ir.records.fast_init does
    made: Callable[..., Transfer] = env["make"]
    return made


_unchecked_transfer = _unchecked_maker()


@dataclass(frozen=True)
class Provenance:
    """Where a schedule came from: algorithm, its parameters, topology, paper."""

    algorithm: str
    params: tuple[tuple[str, str], ...] = ()
    topology: str = ""
    reference: str = ""


@dataclass(frozen=True)
class Schedule:
    collective: Collective
    transfers: tuple[Transfer, ...]
    provenance: Provenance
    scratch_chunks: int = 0
    tb_pairs: tuple[tuple[int, int, int, int], ...] = ()   # (rank, lane, recv peer, send peer)
    step_sync: tuple[tuple[int, int], ...] = ()             # (src, dst): sends wait for earlier receives
    ordered_sends: bool = False
    step_reply: tuple[tuple[int, int], ...] = ()            # (src, dst): a send answers dst's message of its step
    _by_step: tuple[tuple[Transfer, ...], ...] = field(default=(), repr=False, compare=False)
    # set by of_columns only (``replace`` makes a Schedule without it, whose transfers may differ)
    columns: npt.NDArray[np.int32] | npt.NDArray[np.int64] | None = field(default=None, init=False, repr=False,
                                                                          compare=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.transfers, key=Transfer.sort_key))
        object.__setattr__(self, "transfers", ordered)
        self._check_transfers(ordered)
        self._check_hints()

    @staticmethod
    def of_columns(collective: Collective, columns: npt.NDArray[np.int64], provenance: Provenance,
                   scratch_chunks: int = 0, tb_pairs: tuple[tuple[int, int, int, int], ...] = (),
                   step_sync: tuple[tuple[int, int], ...] = (), ordered_sends: bool = False,
                   step_reply: tuple[tuple[int, int], ...] = ()) -> Schedule:
        """The Schedule of the transfers ``columns`` holds (``len(COLUMNS)`` x n int64, rows in the
        frontend's order, every chunk list a range): equal to the Schedule of the same
        ``Transfer`` values, and it keeps the columns, sorted as its transfers are, for lowering.

        The rows are sorted by ``Transfer.sort_key`` with numpy (ties keep their order, as
        ``sorted`` does) and bounds are checked on the columns; a schedule that breaks a bound
        goes through the ordinary constructor, which names the transfer."""
        cols = np.asarray(columns, dtype=np.int64)
        if cols.ndim != 2 or cols.shape[0] != len(COLUMNS):
            raise ScheduleError(f"schedule columns must be {len(COLUMNS)} rows of int64, got shape {cols.shape}")
        if cols.shape[1] and ((cols[10:] != -1).any() or (cols[3:5] < 0).any() or (cols[3:5] > 2).any()
                              or (cols[5] < 0).any() or (cols[5] > 1).any()):
            raise ScheduleError("schedule columns: buffer codes must be 0..2, reduce 0 or 1, and every chunk list a "
                                "range (sat = dat = -1)")
        step, src, dst, sb, db, red, lane, cnt, sf, df = cols[:10]
        order = np.lexsort((df, sf, dst, src, lane, step))     # stable: ties keep their order
        cols = np.ascontiguousarray(cols[:, order])
        del columns      # the caller's rows, freed here when the caller passed its only reference (memory)
        step, src, dst, sb, db, red, lane, cnt, sf, df = cols[:10]
        # Transfer's own invariants, on the columns: where one fails, the checked constructor names it
        bad = ((step < 0) | (lane < 0) | (cnt < 1) | (sf < 0) | (df < 0)
               | ((src == dst) & (sb == db) & (sf < df + cnt) & (df < sf + cnt))).any()
        n = collective.nranks
        size = np.array([collective.input_chunks, collective.output_chunks, scratch_chunks], dtype=np.int64)
        bound = bool(cols.shape[1]) and bool(((src < 0) | (src >= n) | (dst < 0) | (dst >= n) | (sf + cnt > size[sb])
                                              | (df + cnt > size[db])).any())
        # kept as int32 where every value fits (half the memory for as long as the Schedule lives)
        small = not cols.shape[1] or (int(cols.min()) >= -(1 << 31) and int(cols.max()) < 1 << 31)
        kept = cols.astype(np.int32) if small else cols
        kept.setflags(write=False)
        del cols, step, src, dst, sb, db, red, lane, cnt, sf, df
        hints = (scratch_chunks, tb_pairs, step_sync, ordered_sends, step_reply)
        if bad or bound:      # the checked constructor raises, naming the transfer
            return Schedule(collective, _transfers_of(kept, Transfer), provenance, *hints)
        out = object.__new__(Schedule)
        given = dict(zip(("collective", "provenance", "scratch_chunks", "tb_pairs", "step_sync",
                          "ordered_sends", "step_reply"), (collective, provenance, *hints)))
        for f in fields(Schedule):
            if f.name not in _LAZY:      # made from the columns on first access (_Materialized)
                object.__setattr__(out, f.name, given.get(f.name, f.default))
        object.__setattr__(out, "columns", kept)
        out._check_hints()
        return out

    def _materialize(self) -> None:
        """The ``Transfer`` objects and their grouping by step of a Schedule made by
        :meth:`of_columns`, from its (sorted, checked) columns."""
        kept = self.columns
        assert kept is not None, "only a Schedule from of_columns is made lazily"
        transfers = _transfers_of(kept, _unchecked_transfer)
        steps = kept[0]
        ends = np.searchsorted(steps, np.arange(int(steps[-1]) + 1 if len(steps) else 0), "right").tolist()
        starts = [0] + ends[:-1]
        object.__setattr__(self, "transfers", transfers)
        object.__setattr__(self, "_by_step", tuple(transfers[a:b] for a, b in zip(starts, ends)))

    def _check_transfers(self, ordered: tuple[Transfer, ...]) -> None:
        """Ranks and chunk indices in range; groups the transfers by step."""
        n = self.collective.nranks
        sizes = {Buffer.INPUT: self.collective.input_chunks, Buffer.OUTPUT: self.collective.output_chunks,
                 Buffer.SCRATCH: self.scratch_chunks}
        nsteps = ordered[-1].step + 1 if ordered else 0    # sorted by step first
        groups: list[list[Transfer]] = [[] for _ in range(nsteps)]
        for t in ordered:   # one pass: a million transfers on 32x32
            if not (0 <= t.src < n and 0 <= t.dst < n):
                raise ScheduleError(f"rank out of range 0..{n - 1} in {t}")
            s, d = t.src_idx, t.dst_idx
            # a range of step 1 (what make_slots gives) ends at its highest index
            if ((s.stop - 1 if type(s) is range and s.step == 1 else _highest(s)) >= sizes[t.src_buf]
                    or (d.stop - 1 if type(d) is range and d.step == 1 else _highest(d)) >= sizes[t.dst_buf]):
                for buf, idx in ((t.src_buf, s), (t.dst_buf, d)):
                    if _highest(idx) >= sizes[buf]:
                        raise ScheduleError(f"chunk {max(idx)} beyond buffer {buf.value} of {sizes[buf]} chunks "
                                            f"in {t}")
            groups[t.step].append(t)
        object.__setattr__(self, "_by_step", tuple(tuple(g) for g in groups))

    def _check_hints(self) -> None:
        n = self.collective.nranks
        recv_of: set[tuple[int, int, int]] = set()
        send_of: set[tuple[int, int, int]] = set()
        for rank, lane, a, b in self.tb_pairs:
            if not all(0 <= x < n for x in (rank, a, b)) or lane < 0 or a == rank or b == rank:
                raise ScheduleError(f"tb pair {(rank, lane, a, b)}: ranks must be in 0..{n - 1}, peers not "
                                    f"the rank itself, lane >= 0")
            if (rank, lane, a) in recv_of or (rank, lane, b) in send_of:
                raise ScheduleError(f"tb pair {(rank, lane, a, b)}: rank {rank} lane {lane} pairs peer "
                                    f"{a if (rank, lane, a) in recv_of else b} twice")
            recv_of.add((rank, lane, a))
            send_of.add((rank, lane, b))
        for src, dst in self.step_sync:
            if not (0 <= src < n and 0 <= dst < n) or src == dst:
                raise ScheduleError(f"step_sync connection {(src, dst)}: ranks must be in 0..{n - 1} and differ")
        replies = set(self.step_reply)
        for src, dst in self.step_reply:
            if not (0 <= src < n and 0 <= dst < n) or src == dst:
                raise ScheduleError(f"step_reply connection {(src, dst)}: ranks must be in 0..{n - 1} and differ")
            if (dst, src) in replies:
                raise ScheduleError(f"step_reply connections {(src, dst)} and {(dst, src)}: each would wait for "
                                    f"the other's message (a deadlock)")

    @property
    def nsteps(self) -> int:
        if self.columns is not None and "_by_step" not in self.__dict__:     # without making the transfers
            return int(self.columns[0, -1]) + 1 if self.columns.shape[1] else 0
        return len(self._by_step)

    def step(self, index: int) -> tuple[Transfer, ...]:
        return self._by_step[index]

    @property
    def steps(self) -> Sequence[tuple[Transfer, ...]]:
        return self._by_step

    @property
    def lanes(self) -> int:
        """Lanes in use: by a transfer, or named by a tb pair hint."""
        if self.columns is not None:
            used = int(self.columns[6].max()) if self.columns.shape[1] else 0
        else:
            used = max((t.lane for t in self.transfers), default=0)
        return 1 + max(used, max((lane for _, lane, _, _ in self.tb_pairs), default=0))


def _transfers_of(kept: npt.NDArray[np.int32] | npt.NDArray[np.int64], make: Callable[..., Transfer]
                  ) -> tuple[Transfer, ...]:
    """The ``Transfer`` of each column of ``kept`` (:data:`COLUMNS` rows, every chunk list a range)."""
    return tuple(make(t, a, b, BUFFER_CODES[x], range(s0, s0 + c), BUFFER_CODES[y], range(d0, d0 + c), _OPS[o], ln)
                 for at in range(0, kept.shape[1], 1 << 16)     # a block of rows at a time (memory)
                 for t, a, b, x, y, o, ln, c, s0, d0 in zip(*kept[:10, at:at + (1 << 16)].tolist()))


#: The fields of a Schedule that :meth:`Schedule.of_columns` leaves to be made on first access.
_LAZY = ("transfers", "_by_step")


class _Materialized:
    """Class attribute for a lazy field: an instance without the field in its ``__dict__`` (made by
    ``of_columns``) makes its transfers on first access; the instance attribute then shadows this
    (a non-data descriptor), so later reads cost nothing extra."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Schedule | None, cls: type | None = None) -> Any:
        if obj is None:
            return self
        obj._materialize()
        return obj.__dict__[self.name]


for _name in _LAZY:
    setattr(Schedule, _name, _Materialized(_name))


Ints = npt.NDArray[np.int64]
_CODE: dict[Buffer | Op, int] = {Op.COPY: 0, Op.REDUCE: 1}
_CODE.update(BUFFER_CODE.items())


def transfer_columns(schedule: Schedule) -> tuple[Ints, Ints, Ints]:
    """``schedule``'s transfers as int64 columns (:data:`COLUMNS` x transfers, in its order) with
    the flat source and destination lists (a list entry ``sat`` / ``dat`` >= 0 is its offset there;
    a range is ``cnt`` chunks from ``sfirst`` / ``dfirst``).  A Schedule that carries its columns
    gives a copy of them; otherwise C-level passes (``map``, ``attrgetter``) read a few fields
    each from the Transfer objects.  The IR check and the lowering's table both start here."""
    if schedule.columns is not None:
        empty = np.zeros(0, dtype=np.int64)
        return schedule.columns.astype(np.int64), empty, empty.copy()
    ts = schedule.transfers
    n = len(ts)
    cols = np.zeros((len(COLUMNS), n), dtype=np.int64)
    if not n:
        return cols, cols[0], cols[0]
    cols[[0, 1, 2, 6]] = np.fromiter(chain.from_iterable(map(attrgetter("step", "src", "dst", "lane"), ts)),
                                     dtype=np.int64, count=4 * n).reshape(n, 4).T
    cols[3:6] = np.fromiter(map(_CODE.__getitem__, chain.from_iterable(map(attrgetter("src_buf", "dst_buf", "op"),
                                                                           ts))),
                            dtype=np.int64, count=3 * n).reshape(n, 3).T
    flats: list[Ints] = []
    for side, name in ((0, "src_idx"), (1, "dst_idx")):
        idx = list(map(attrgetter(name), ts))
        if side == 0:
            cols[7] = np.fromiter(map(len, idx), dtype=np.int64, count=n)
        cnt = cols[7]
        ends = np.fromiter(chain.from_iterable(map(itemgetter(0, -1), idx)), dtype=np.int64, count=2 * n)
        cols[8 + side] = ends[0::2]
        # a range whose last entry is cnt - 1 past its first runs up by one (a tuple may not: (0, 2, 1))
        ranged = np.fromiter(map(isinstance, idx, repeat(range)), dtype=bool, count=n) & (
            ends[1::2] - ends[0::2] == cnt - 1)
        lists = np.flatnonzero(~ranged)
        lens = cnt[lists]
        cols[10 + side] = -1
        cols[10 + side, lists] = np.cumsum(lens) - lens
        flats.append(np.fromiter(chain.from_iterable(map(idx.__getitem__, lists.tolist())), dtype=np.int64,
                                 count=int(lens.sum())))
    return cols, flats[0], flats[1]
