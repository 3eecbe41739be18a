"""Pass: expand transfers into per-rank operations, allocating scratch (TransferTable -> OpPlan).

Every remote transfer becomes a send on its source rank and a receive on its
destination rank; a local transfer becomes a ``cpy`` or ``re``.  Buffers are
resolved to the physical buffer of the placement (in-place aliasing), so later
passes and the XML see real slots.

Scratch is allocated (fresh, never reused, so it adds no ordering) where:

* a transfer's source chunks are not contiguous: local copies gather them into
  scratch and one message of ``cnt`` chunks is sent;
* a transfer's destination chunks are not contiguous: the message lands in
  scratch and local copies/reduces scatter it;
* a receive would write a slot that a send of the same step still reads (an
  exchange such as recursive doubling): receiving into scratch and applying it
  with a local op afterwards keeps both sides' sends independent of their
  receives, so no exchange waits on FIFO capacity.

Guarantees: each op has contiguous operands with ``cnt`` >= 1; ``phase`` orders
ops of one step (0 local/gather, 1 send, 2 receive, 3 scatter) so that reads of a
step see the state before its writes, as the Schedule's synchronous semantics
require.  ``expand`` reads the transfers' columns (:mod:`collc.compiler.transfers`), and the
gathers and scatters of lists in several runs are worked out on their runs, all at once;
only local copies and reduces are checked one at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from collc.arrays import unique
from collc.compiler.optable import BUF_CODE, FIELDS, Ints, OpTable, encode
from collc.compiler.transfers import TransferTable, gather, runs
from collc.errors import LoweringError
from collc.ir.collective import Buffer, Collective
from collc.ir.schedule import Op

Slot = tuple[str, int]
Interval = tuple[str, int, int]   # buffer, first chunk, end (exclusive)


class Kind(str, Enum):
    SEND = "send"
    RECV = "recv"
    COPY = "cpy"
    REDUCE = "re"


_SEND, _RECV, _COPY, _REDUCE = Kind.SEND, Kind.RECV, Kind.COPY, Kind.REDUCE
KINDS = (_SEND, _RECV, _COPY, _REDUCE)     # the kind codes of ``collc.compiler.optable``
# the codes as written into the rows
_CS, _CR, _CC, _CRE = 0, 1, 2, 3
_SCRATCH = BUF_CODE["s"]


class _RankOpFields(NamedTuple):
    rank: int
    step: int
    phase: int
    kind: Kind
    peer: int            # -1 for local ops
    lane: int
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    reduce: bool         # receive: dst = dst (+) received
    key: tuple[int, ...]  # transfer identity: equal on both ends of a message, orders a connection
    chunk: int           # first logical chunk moved (channel hashing)
    # derived once, used by every later pass: the logical position, and the slots read and
    # written as (buffer, lo, hi) intervals (compact: a 4096-rank program has 10^8 chunk slots)
    pos: tuple[int, ...]
    rd: tuple[Interval, ...]
    wr: tuple[Interval, ...]


class RankOp(_RankOpFields):
    """One rank's op, immutable: the readable view of one row of the op table
    (:meth:`collc.compiler.optable.OpTable.ops`), for dumps and tests; the passes read the
    columns.  Built from its first 14 fields; ``pos``, ``rd`` and ``wr`` are derived from them."""

    __slots__ = ()

    def __new__(cls, rank: int, step: int, phase: int, kind: Kind, peer: int, lane: int, srcbuf: str,
                srcoff: int, dstbuf: str, dstoff: int, cnt: int, reduce: bool, key: tuple[int, ...],
                chunk: int) -> RankOp:
        if kind is _SEND:
            rd: tuple[Interval, ...] = ((srcbuf, srcoff, srcoff + cnt),)
            dst: tuple[Interval, ...] = ()
        else:
            dst = ((dstbuf, dstoff, dstoff + cnt),)
            if kind is _RECV:
                rd = dst if reduce else ()
            else:
                src = ((srcbuf, srcoff, srcoff + cnt),)
                rd = src if kind is _COPY else src + dst
        return tuple.__new__(cls, (rank, step, phase, kind, peer, lane, srcbuf, srcoff, dstbuf, dstoff, cnt,
                                   reduce, key, chunk, (step, phase) + key, rd, dst))

    def __getnewargs__(self) -> tuple[Any, ...]:   # pickling rebuilds from the 14 given fields
        return tuple(self[:14])

    def __repr__(self) -> str:
        return "RankOp(" + ", ".join(f"{f}={v!r}" for f, v in zip(self._fields[:14], self)) + ")"

    def reads(self) -> list[Slot]:
        return expand_slots(self.rd)

    def writes(self) -> list[Slot]:
        return expand_slots(self.wr)


def expand_slots(intervals: tuple[Interval, ...]) -> list[Slot]:
    return [(b, i) for b, lo, hi in intervals for i in range(lo, hi)]


@dataclass(frozen=True)
class OpPlan:
    collective: Collective
    table: OpTable             # every rank's ops, rank by rank, each rank's in plan order
    scratch: tuple[int, ...]   # scratch chunks per rank
    name: str
    _ops: list[tuple[RankOp, ...]] = field(default_factory=list, init=False, compare=False, repr=False)

    @property
    def ops(self) -> tuple[RankOp, ...]:
        """The ops as :class:`RankOp` in plan order -- transfer by transfer, each transfer's
        gathers, send, receive and scatters -- (built on first use: the passes read ``table``)."""
        if not self._ops:
            t = self.table
            self._ops.append(tuple(t.take(np.lexsort((t.sub, t.phase, t.number, t.step))).ops()))
        return self._ops[0]

    def by_rank(self) -> list[OpTable]:
        """Each rank's rows, in plan order (views of the table)."""
        rank = self.table.rank
        if len(rank) > 1 and bool((rank[1:] < rank[:-1]).any()):
            raise LoweringError("an op table out of rank order (expand writes it rank by rank)")
        bounds = np.searchsorted(rank, np.arange(self.collective.nranks + 1)).tolist()
        return [self.table.take(slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _overlaps(keys: Ints, lo: Ints, hi: Ints, qkey: Ints, qlo: Ints, qhi: Ints) -> npt.NDArray[np.bool_]:
    """Per query: whether ``[qlo, qhi)`` overlaps an interval ``[lo, hi)`` of the same key."""
    if not len(keys):
        return np.zeros(len(qkey), dtype=bool)
    shift = 1 << 32                         # slots and keys fit 31 bits each (check_program_size)
    order = np.lexsort((lo, keys))
    comp = keys[order] * shift + lo[order]
    top = np.maximum.accumulate(keys[order] * shift + hi[order])     # per key, the highest end so far
    j = np.searchsorted(comp, qkey * shift + qhi, "left") - 1          # the last interval starting below qhi
    ok = j >= 0
    j = np.maximum(j, 0)
    hit: npt.NDArray[np.bool_] = ok & (comp[j] // shift == qkey) & (top[j] - qkey * shift > qlo)
    return hit


_Part = tuple[Ints, Ints, list[Ints]]


def expand(table: TransferTable) -> OpPlan:
    """Every rank's ops, rank by rank, each rank's in plan order (the module docstring)."""
    parts, scratch_top = _parts(table)     # its per-transfer temporaries freed: the peak is below
    coll = table.collective
    n = coll.nranks
    # rank by rank, each rank's rows in plan order (transfer by transfer): by_rank takes views.
    # Every part lists its rows by (transfer, place), so a stable sort by that merges the parts'
    # runs, and a stable sort by rank (a radix sort of small integers) then keeps that order
    # within each rank: the order of the one key (rank, transfer, place), which is one op's
    nparts = sum(len(p[0]) for p in parts)
    order = np.argsort(encode([np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])]),
                       kind="stable")
    parts = [(p[0][:0], p[1][:0], p[2]) for p in parts]     # the transfers and places: read (peak memory)
    rank_now = np.concatenate([p[2][0] for p in parts])[order]
    order = order[np.argsort(rank_now.astype(np.uint16) if n <= 1 << 16 else rank_now, kind="stable")]
    del rank_now
    # the logical position (step, phase, number, sub) of each row: within a part too its rows
    # come in that order (its phase is one), so this stable sort merges runs as well
    step_, phase_, number_, sub_ = (np.concatenate([p[2][f] for p in parts]) for f in (1, 2, 12, 13))
    logical = np.argsort(encode([step_, phase_, number_, sub_ + 1]), kind="stable")
    del step_, phase_, number_, sub_
    pos = np.empty(nparts, dtype=np.int64)
    pos[logical] = np.arange(nparts, dtype=np.int64)
    del logical
    cols = np.empty((len(FIELDS), nparts), dtype=np.int64)
    for f in range(len(parts[0][2])):   # a field at a time: a million ops make 100 MB a copy
        np.take(np.concatenate([p[2][f] for p in parts]), order, out=cols[f])
        for p in parts:
            p[2][f] = p[2][f][:0]
    np.take(pos, order, out=cols[-1])
    return OpPlan(coll, OpTable(cols), tuple(scratch_top), table.provenance.algorithm)


def _parts(table: TransferTable) -> tuple[list[_Part], list[int]]:
    """The rows of every op, as parts of (transfer, place, fields) columns, and each rank's scratch."""
    coll = table.collective
    n = coll.nranks
    count = len(table)
    step, src, dst, lane, size = table.step, table.src, table.dst, table.lane, table.cnt
    sbuf, dbuf = table.srcbuf, table.dstbuf
    reduce = table.reduce > 0
    chunk = table.sfirst
    number = np.arange(count, dtype=np.int64) - np.searchsorted(step, step)       # index within its step
    # where each rank's logical buffers live (in-place aliasing)
    abuf = np.zeros((n, len(BUF_CODE)), dtype=np.int64)
    abase = np.zeros((n, len(BUF_CODE)), dtype=np.int64)
    for r in range(n):
        for b in Buffer:
            pb, base = coll.alias(r, b)
            abuf[r, BUF_CODE[b.value]], abase[r, BUF_CODE[b.value]] = BUF_CODE[pb.value], base
    ps_buf, pd_buf = abuf[src, sbuf], abuf[dst, dbuf]
    ps_off = abase[src, sbuf] + table.sfirst
    pd_off = abase[dst, dbuf] + table.dfirst
    # chunk lists in several runs (a table stores a contiguous list as a range): their physical runs
    multi_s, multi_d = table.sat >= 0, table.dat >= 0
    s_runs = _Runs.of(table.sflat, table.sat, size, multi_s, ps_buf, abase[src, sbuf], ps_off)
    d_runs = _Runs.of(table.dflat, table.dat, size, multi_d, pd_buf, abase[dst, dbuf], pd_off)
    local = src == dst
    remote = ~local
    # the slots each step reads, per (step, rank, buffer): a receive that would write one of them
    # lands in scratch (an exchange: both sides' sends stay independent of their receives)
    keep = ~multi_s
    o = s_runs.owner
    rkey = np.concatenate([((step * n + src) * 3 + ps_buf)[keep], (step[o] * n + src[o]) * 3 + ps_buf[o]])
    rlo = np.concatenate([ps_off[keep], s_runs.start])
    rhi = np.concatenate([(ps_off + size)[keep], s_runs.start + s_runs.length])
    into_scratch = remote & ~multi_d & _overlaps(rkey, rlo, rhi, (step * n + dst) * 3 + pd_buf, pd_off, pd_off + size)
    del rkey, rlo, rhi
    # scratch, fresh per use, in transfer order on each rank: a gather on the sender, a landing
    # place on the receiver
    a_src = remote & multi_s
    a_dst = remote & (multi_d | into_scratch)
    ev = np.concatenate([np.flatnonzero(a_src), np.flatnonzero(a_dst)])
    ev_rank = np.concatenate([src[a_src], dst[a_dst]])
    order = np.lexsort((ev, ev_rank))
    ev, ev_rank = ev[order], ev_rank[order]
    ev_size = size[ev]
    total = np.cumsum(ev_size)
    first = np.searchsorted(ev_rank, ev_rank)
    at = table.scratch_chunks + total - ev_size - (total[first] - ev_size[first])    # exclusive, per rank
    s_alloc = np.zeros(count, dtype=np.int64)
    d_alloc = np.zeros(count, dtype=np.int64)
    is_src = np.concatenate([np.ones(int(a_src.sum()), bool), np.zeros(int(a_dst.sum()), bool)])[order]
    s_alloc[ev[is_src]] = at[is_src]
    d_alloc[ev[~is_src]] = at[~is_src]
    scratch_top = [table.scratch_chunks] * n
    if len(ev):
        last = np.append(np.flatnonzero(ev_rank[1:] != ev_rank[:-1]), len(ev) - 1)
        for r, top in zip(ev_rank[last].tolist(), (at[last] + ev_size[last]).tolist()):
            scratch_top[r] = top
    # rows as columns (collc.compiler.optable.FIELDS but pos), each with its transfer and its
    # place among the transfer's ops
    parts: list[tuple[Ints, Ints, list[Ints]]] = []

    def rows(which: npt.NDArray[np.bool_], seq: int, fields: list[Ints | int]) -> None:
        """Rows of the transfers ``which``: each field an array (indexed by transfer), or one value."""
        k = np.flatnonzero(which)
        parts.append((k, np.full(len(k), seq, dtype=np.int64),
                      [f[k] if isinstance(f, np.ndarray) else np.full(len(k), f, dtype=np.int64) for f in fields]))

    def each(k: Ints, seq: Ints, fields: list[Ints | int]) -> None:
        """Rows of the runs whose transfers are ``k``: each field an array (one entry per row), or one value."""
        parts.append((k, seq, [f if isinstance(f, np.ndarray) else np.full(len(k), f, dtype=np.int64)
                               for f in fields]))

    red = reduce.astype(np.int64)
    # an op's place among its transfer's (plan order): gathers (and a local op's pieces) by their
    # first chunk in the list, the send, the receive, scatters
    seq_send = int(size.max()) + 1 if count else 1
    seq_recv, seq_scatter = seq_send + 1, seq_send + 2
    rows(remote & ~multi_s, seq_send, [src, step, 1, _CS, dst, lane, ps_buf, ps_off, ps_buf, ps_off, size, 0, number,
                                        -1, chunk])
    rows(remote & ~multi_d & ~into_scratch, seq_recv, [dst, step, 2, _CR, src, lane, pd_buf, pd_off, pd_buf, pd_off,
                                                        size, red, number, -1, chunk])
    landed = remote & ~multi_d & into_scratch
    rows(landed, seq_recv, [dst, step, 2, _CR, src, lane, _SCRATCH, d_alloc, _SCRATCH, d_alloc, size, 0, number, -1,
                             chunk])
    rows(landed, seq_scatter, [dst, step, 3, np.where(reduce, _CRE, _CC), -1, lane, _SCRATCH, d_alloc, pd_buf,
                                pd_off, size, 0, number, d_alloc, chunk])
    # index lists in several runs: gathered into scratch and sent from there, received into
    # scratch and scattered from there
    rows(a_src, seq_send, [src, step, 1, _CS, dst, lane, _SCRATCH, s_alloc, _SCRATCH, s_alloc, size, 0, number, -1,
                            chunk])
    g = remote[s_runs.owner]
    k = s_runs.owner[g]
    pos = s_alloc[k] + s_runs.offset[g]
    each(k, s_runs.index[g], [src[k], step[k], 0, _CC, -1, lane[k], ps_buf[k], s_runs.start[g], _SCRATCH, pos,
                              s_runs.length[g], 0, number[k], pos, chunk[k]])
    rows(remote & multi_d, seq_recv, [dst, step, 2, _CR, src, lane, _SCRATCH, d_alloc, _SCRATCH, d_alloc, size, 0,
                                       number, -1, chunk])
    g = remote[d_runs.owner]
    k = d_runs.owner[g]
    pos = d_alloc[k] + d_runs.offset[g]
    each(k, seq_scatter + d_runs.index[g], [dst[k], step[k], 3, np.where(reduce[k], _CRE, _CC), -1, lane[k],
                                             _SCRATCH, pos, pd_buf[k], d_runs.start[g], d_runs.length[g], 0,
                                             number[k], pos, chunk[k]])
    # local copies one transfer at a time (they must not race their step)
    extra: list[tuple[int, ...]] = []
    seqs: list[int] = []
    tix: list[int] = []

    def add(k: int, seq: int, row: tuple[int, ...]) -> None:
        tix.append(k)
        seqs.append(seq)
        extra.append(row)
    if local.any():
        _locals(table, local, number, chunk, s_runs, d_runs, add)
    if extra:
        parts.append((np.array(tix, dtype=np.int64), np.array(seqs, dtype=np.int64),
                      list(np.array(extra, dtype=np.int64).reshape(len(extra), -1).T)))
    return parts, scratch_top


@dataclass(frozen=True)
class _Runs:
    """The physical runs (contiguous ascending slots) of one side's chunk lists in several runs,
    list by list: per run its transfer, place among the transfer's runs, first slot, length and
    offset in the transfer's list; and the whole side's buffers and slots (a list in one run)."""

    owner: Ints
    index: Ints
    start: Ints
    length: Ints
    offset: Ints
    buf: Ints
    first: Ints
    cnt: Ints

    @staticmethod
    def of(flat: Ints, at: Ints, cnt: Ints, multi: npt.NDArray[np.bool_], buf: Ints, base: Ints,
           first: Ints) -> _Runs:
        k = np.flatnonzero(multi)
        owner, start, length = runs(gather(flat, at[k], cnt[k]), cnt[k])
        owner = k[owner]
        begin = np.searchsorted(owner, owner)
        ends = np.cumsum(length) - length
        return _Runs(owner, np.arange(len(owner), dtype=np.int64) - begin, base[owner] + start, length,
                     ends - ends[begin], buf, first, cnt)

    def of_transfer(self, k: int, first: int) -> list[tuple[int, int, int]]:
        """Transfer ``k``'s runs as (buffer, first slot, length); ``first``: its first slot."""
        lo, hi = np.searchsorted(self.owner, [k, k + 1]).tolist()
        b = int(self.buf[k])
        if lo == hi:
            return [(b, first, int(self.cnt[k]))]
        return [(b, s, c) for s, c in zip(self.start[lo:hi].tolist(), self.length[lo:hi].tolist())]


def _locals(table: TransferTable, local: npt.NDArray[np.bool_], number: Ints, chunk: Ints, s_runs: _Runs,
            d_runs: _Runs, add: Callable[[int, int, tuple[int, ...]], None]) -> None:
    """The local copies and reduces, step by step: each checked against the slots its step's
    other transfers read and write on its rank."""
    ps_off, pd_off = s_runs.first, d_runs.first
    step, src, dst, lane, red = (c.tolist() for c in (table.step, table.src, table.dst, table.lane, table.reduce))
    bounds = np.searchsorted(table.step, np.arange(table.nsteps + 1)).tolist()

    def runs_of(k: int, dst_side: bool) -> list[tuple[int, int, int]]:
        return d_runs.of_transfer(k, int(pd_off[k])) if dst_side else s_runs.of_transfer(k, int(ps_off[k]))

    for s in unique(table.step[local]).tolist():
        lo, hi = bounds[s], bounds[s + 1]
        ranks = set(src[k] for k in range(lo, hi) if local[k])
        # the slots of the step on those ranks only: a local op is checked against its own rank's
        read_now: dict[int, set[tuple[int, int]]] = {}
        written_now: dict[int, set[tuple[int, int]]] = {}
        for k in range(lo, hi):
            for rank, dst_side, now in ((src[k], False, read_now), (dst[k], True, written_now)):
                if rank in ranks:
                    now.setdefault(rank, set()).update((b, i + j) for b, i, c in runs_of(k, dst_side)
                                                       for j in range(c))
        for k in range(lo, hi):
            if local[k]:
                _local(src[k], bool(red[k]), lane[k], s, int(number[k]), runs_of(k, False), runs_of(k, True),
                       read_now, written_now, partial(add, k), int(chunk[k]))


def _local(rank: int, reduce: bool, lane: int, step_no: int, number: int, srcs: list[tuple[int, int, int]],
           dsts: list[tuple[int, int, int]], read_now: dict[int, set[tuple[int, int]]],
           written_now: dict[int, set[tuple[int, int]]], emit: Callable[[int, tuple[int, ...]], None],
           chunk: int) -> None:
    """A local copy or reduce reads and writes in one op: it must not race its own step."""
    mine_r = {(b, i + j) for b, i, c in srcs for j in range(c)}
    mine_w = {(b, i + j) for b, i, c in dsts for j in range(c)}
    if mine_r == mine_w:
        return  # in place the copy is onto itself (allgather's own block): nothing to do
    others_w = written_now.get(rank, set()) - mine_w
    others_r = read_now.get(rank, set()) - mine_r
    if mine_r & others_w or mine_w & others_r:
        op = Op.REDUCE if reduce else Op.COPY
        raise LoweringError(f"step {step_no}: the local {op.value} on rank {rank} touches chunks another "
                            f"transfer of the same step uses; put it in a step of its own")
    # split into pieces where both sides stay contiguous
    flat_s = [(b, i + j) for b, i, c in srcs for j in range(c)]
    flat_d = [(b, i + j) for b, i, c in dsts for j in range(c)]
    start = 0
    kind = _CRE if reduce else _CC
    for k in range(1, len(flat_s) + 1):
        end_run = k == len(flat_s) or flat_s[k][0] != flat_s[k - 1][0] or flat_s[k][1] != flat_s[k - 1][1] + 1 \
            or flat_d[k][0] != flat_d[k - 1][0] or flat_d[k][1] != flat_d[k - 1][1] + 1
        if end_run:
            (sb, so), (db, do) = flat_s[start], flat_d[start]
            emit(start, (rank, step_no, 0, kind, -1, lane, sb, so, db, do, k - start, 0, number, start, chunk))
            start = k
