"""Pass: instruction fusion (a rank's tbs -> its items, the future XML steps).

Inside one tb, a receive immediately followed by a send of exactly the slots it
just wrote becomes one step that forwards piece by piece: ``rcs`` (copy),
``rrcs`` (reduce, keep the result) or ``rrs`` (reduce, result dead: the slot's next
access on this rank overwrites it, or it is scratch / not an output).  Fusion is
skipped when any other op of the rank touches those slots between the two.
Guarantees: the fused program reads and writes the same values at the same
logical positions, so the Schedule's semantics are unchanged.

The pass works on columns (:mod:`collc.compiler.optable`): the candidates, the rank's
accesses per slot segment and both tests (nothing else touches the slots between the
receive and the send; what the slots hold is dead after the send) are numpy searches over
the accesses sorted by (segment, position).  :class:`Item` and :class:`FusedTb` are the
readable views (dumps, tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from collc.arrays import unique
from collc.compiler.msccl.program import StepType
from collc.compiler.msccl.threadblocks import TbPlan, TbTable
from collc.compiler.optable import BUF_CODE, BUFS, COPY, RECV, REDUCE, SEND, Ints, OpTable, segments
from collc.compiler.scratch import RankOp
from collc.ir.collective import Buffer, Collective

#: Step types by code (the ``type`` column of items and steps).
TYPES = tuple(StepType)
_CODE = {t: k for k, t in enumerate(TYPES)}
S, R, RCS, RRS, RRC, RRCS, CPY, RE, NOP = (_CODE[t] for t in (
    StepType.SEND, StepType.RECV, StepType.RECV_COPY_SEND, StepType.RECV_REDUCE_SEND, StepType.RECV_REDUCE_COPY,
    StepType.RECV_REDUCE_COPY_SEND, StepType.COPY, StepType.REDUCE, StepType.NOP))
# what a step of each type reads and writes: its src interval, its dst interval, its dst interval
READ_SRC = np.array([t in (StepType.SEND, StepType.COPY, StepType.REDUCE) for t in TYPES])
READ_DST = np.array([t in (StepType.RECV_REDUCE_SEND, StepType.RECV_REDUCE_COPY, StepType.RECV_REDUCE_COPY_SEND,
                           StepType.REDUCE) for t in TYPES])
WRITE_DST = np.array([t.writes_dst for t in TYPES])
BIG = 1 << 40          # a slot's coordinate: (rank * 3 + buffer) * BIG + offset


class Item(NamedTuple):
    """One future XML step (the readable view of one row of an :class:`ItemTable`)."""

    type: StepType
    op: RankOp
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int

    @property
    def position(self) -> tuple[int, ...]:
        return self.op.pos


@dataclass(frozen=True)
class FusedTb:
    send: int
    recv: int
    chan: int
    items: tuple[Item, ...]


@dataclass(frozen=True, eq=False)
class ItemTable:
    """One rank's tbs after fusion: the fusion pass's output.  Item ``j`` is the op ``op`` row
    ``j`` (the receive of a fused pair) as a step of type ``type`` (a code of :data:`TYPES`)
    on ``(srcbuf, srcoff)``, ``(dstbuf, dstoff)``, ``cnt``; tb ``k``'s items are rows
    ``start[k]:start[k+1]``."""

    op: OpTable
    type: Ints
    srcbuf: Ints
    srcoff: Ints
    dstbuf: Ints
    dstoff: Ints
    rank: Ints
    send: Ints
    recv: Ints
    chan: Ints
    start: Ints

    @property
    def cnt(self) -> Ints:
        return self.op.cnt

    def __len__(self) -> int:
        return len(self.send)

    def __iter__(self) -> Iterator[FusedTb]:
        ops = self.op.ops()
        rows = zip(ops, self.type.tolist(), self.srcbuf.tolist(), self.srcoff.tolist(), self.dstbuf.tolist(),
                   self.dstoff.tolist(), self.cnt.tolist())
        items = [Item(TYPES[ty], op, BUFS[sb], so, BUFS[db], do, c) for op, ty, sb, so, db, do, c in rows]
        out = []
        for k, (s, r, c) in enumerate(zip(self.send.tolist(), self.recv.tolist(), self.chan.tolist())):
            out.append(FusedTb(s, r, c, tuple(items[int(self.start[k]):int(self.start[k + 1])])))
        return iter(out)


@dataclass(frozen=True)
class FusedPlan:
    base: TbPlan
    tbs: tuple[ItemTable, ...]


def fuse(plan: TbPlan) -> FusedPlan:
    coll = plan.plan.collective
    return FusedPlan(plan, tuple(fuse_tbs(coll, tbs) for tbs in plan.tbs))


# by (kind, reduce): a receive that reduces is rrc, the other kinds ignore the flag
_SINGLE = np.array([S, S, R, RRC, CPY, CPY, RE, RE], dtype=np.int64)


def single_types(t: OpTable) -> Ints:
    """The step type of each op alone."""
    single: Ints = _SINGLE[t.kind * 2 + (t.reduce > 0)]
    return single


def coords(rank: Ints, buf: Ints, off: Ints) -> Ints:
    """Slot coordinates: every (rank, buffer) its own range."""
    return (rank * len(BUFS) + buf) * BIG + off


def intervals(rank: Ints, types: Ints, srcbuf: Ints, srcoff: Ints, dstbuf: Ints, dstoff: Ints, cnt: Ints
              ) -> tuple[Ints, Ints, Ints, Ints]:
    """The slot intervals that steps of ``types`` on these operands access, as coordinates
    ``[lo, hi)``: their step (row), lo, hi, and whether the access reads (else it only writes)."""
    src = coords(rank, srcbuf, srcoff)
    dst = coords(rank, dstbuf, dstoff)
    rows = np.arange(len(types), dtype=np.int64)
    rs, rd, w = READ_SRC[types], READ_DST[types], WRITE_DST[types]
    row = np.concatenate([rows[rs], rows[rd], rows[w]])
    lo = np.concatenate([src[rs], dst[rd], dst[w]])
    hi = lo + np.concatenate([cnt[rs], cnt[rd], cnt[w]])
    reads = np.concatenate([np.ones(int(rs.sum()) + int(rd.sum()), dtype=bool), np.zeros(int(w.sum()), dtype=bool)])
    return row, lo, hi, reads


class Accesses:
    """One rank's accesses to slot segments (the buffers cut at every interval end), one per
    (step, segment), sorted by (segment, position): ``code`` is ``segment * n + position``;
    ``reads``: the step reads some slot of the segment (else it only writes it); ``writes``:
    it writes some."""

    def __init__(self, row: Ints, lo: Ints, hi: Ints, reads: Ints, pos: Ints) -> None:
        self.cuts = unique(np.concatenate([lo, hi]))
        self.n = n = int(pos.max()) + 1 if len(pos) else 1
        seg, owner = segments(lo, hi, self.cuts)
        row = row[owner]
        code = seg * n + pos[row]
        order = np.argsort(code, kind="stable")
        code, rd = code[order], reads[owner][order]
        if not len(code):
            self.code, self.reads, self.writes, self.row = code, rd, rd, code
            return
        change = np.empty(len(code), dtype=bool)
        change[0] = True
        np.not_equal(code[1:], code[:-1], out=change[1:])
        first = np.flatnonzero(change)
        self.code = code[first]
        self.row = row[order][first]        # the step of each access
        self.reads = np.logical_or.reduceat(rd, first)
        self.writes = np.logical_or.reduceat(~rd, first)

    def segs(self, lo: Ints, hi: Ints) -> tuple[Ints, Ints]:
        return segments(lo, hi, self.cuts)


def fuse_rank(coll: Collective, rank: int, tbs: TbTable) -> ItemTable:
    """Fusion of one rank's tbs."""
    return fuse_tbs(coll, tbs)


def fuse_tbs(coll: Collective, tbs: TbTable) -> ItemTable:
    """Fusion of the tbs of one or more ranks (each rank's on its own: a candidate's slots are its
    rank's, and coordinates keep the ranks apart)."""
    t = tbs.table
    n = len(t)
    kind = t.kind
    tb_of = np.repeat(np.arange(len(tbs), dtype=np.int64), np.diff(tbs.start))
    posrank = t.pos
    types = single_types(t)
    # candidate pairs: a receive followed in its tb by a send of exactly the slots it wrote
    k = np.flatnonzero((kind[:-1] == RECV) & (kind[1:] == SEND) & (tb_of[:-1] == tb_of[1:])
                       & (t.dstoff[:-1] == t.srcoff[1:]) & (t.cnt[:-1] == t.cnt[1:]) & (t.dstbuf[:-1] == t.srcbuf[1:]))
    keep = np.ones(n, dtype=bool)
    if len(k):
        row, lo, hi, reads = intervals(t.rank, types, t.srcbuf, t.srcoff, t.dstbuf, t.dstoff, t.cnt)
        acc = Accesses(row, lo, hi, reads, posrank)
        m = acc.n
        start = coords(t.rank[k], t.dstbuf[k], t.dstoff[k])
        seg, owner = acc.segs(start, start + t.cnt[k])
        a, b = posrank[k][owner], posrank[k + 1][owner]
        # nothing else accesses the received slots between the receive and the send
        between = np.searchsorted(acc.code, seg * m + b, "left") - np.searchsorted(acc.code, seg * m + a, "right")
        quiet = np.bincount(owner, weights=between.astype(np.float64), minlength=len(k)) == 0
        k = k[quiet]
        red = t.reduce[k] > 0
        types[k] = RCS
        rk = k[red]
        if len(rk):
            # the result is dead after the send: every received slot is next overwritten, or never
            # read again and not an output
            # per rank of the block: its obligated output slots as coordinates
            ranks = unique(t.rank[rk])
            out_lo = np.empty(len(ranks), dtype=np.int64)
            out_hi = np.empty(len(ranks), dtype=np.int64)
            for j, r in enumerate(ranks.tolist()):
                pb, base = coll.alias(r, Buffer.OUTPUT)
                outs = coll.obligated_outputs(r)
                out_lo[j] = (r * len(BUFS) + BUF_CODE[pb.value]) * BIG + base + outs.start
                out_hi[j] = out_lo[j] + len(outs)
            start = coords(t.rank[rk], t.dstbuf[rk], t.dstoff[rk])
            seg, owner = acc.segs(start, start + t.cnt[rk])
            at = np.searchsorted(acc.code, seg * m + posrank[rk + 1][owner], "right")
            later = at < len(acc.code)
            later[later] = acc.code[at[later]] // m == seg[later]
            live = np.zeros(len(seg), dtype=bool)
            live[later] = acc.reads[at[later]]
            slo, shi = acc.cuts[seg], acc.cuts[seg + 1]
            which = np.searchsorted(ranks, t.rank[rk][owner])
            live[~later] = ((slo < out_hi[which]) & (out_lo[which] < shi))[~later]
            dead = np.bincount(owner, weights=live.astype(np.float64), minlength=len(rk)) == 0
            types[rk] = np.where(dead, RRS, RRCS)
        keep[k + 1] = False
    rows = np.flatnonzero(keep)
    ty = types[rows]
    sends = ty == S
    whole = (ty == CPY) | (ty == RE) | sends       # src operand its own, else the dst one
    start_items = np.searchsorted(rows, tbs.start)
    return ItemTable(t.take(rows), ty, np.where(whole, t.srcbuf[rows], t.dstbuf[rows]),
                     np.where(whole, t.srcoff[rows], t.dstoff[rows]), np.where(sends, t.srcbuf[rows], t.dstbuf[rows]),
                     np.where(sends, t.srcoff[rows], t.dstoff[rows]), tbs.rank, tbs.send, tbs.recv, tbs.chan,
                     start_items.astype(np.int64))
