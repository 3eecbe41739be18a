"""Pass: cross-tb dependencies, nops and the rank's steps (its items -> a :class:`GpuTable`).

Ops of one rank are scanned in logical order (step, phase, transfer).  A step
depends on the last writer of every slot it reads (RAW) and, for every slot it
writes, on the last writer (WAW) and on every reader since (WAR), when those live
in another tb; program order covers the same tb.  Per target tb only the latest
step is kept, and a dependency already implied by an earlier step of the same tb
is dropped.  One dependency rides on the step itself; each further one becomes
a preceding ``nop`` (the parser's rule: the real step after nops must carry a
dependency itself).  Every target step gets ``hasdep="1"``.  With ``ordered_sends``
(the Schedule's hint) a send also depends on the rank's latest send to the same
peer from an earlier step when that one is in another tb (another channel), so
that the link's transfers do not overlap.

For a connection ``rank -> peer`` that the schedule lists in ``step_sync``, a step that
sends at schedule step ``s`` also depends, in every other tb, on the last receive of the
same lane at a step before ``s``: the schedule's step grouping survives for sends that
read only local data.  For a connection ``rank -> peer`` in ``step_reply``, a send of step
``s`` also depends on the rank's receive from ``peer`` of the same step (in another tb):
the rank answers the peer's message of the trade, so consecutive trades of the peer fall in
distinct rounds whatever the pace of the rest.

Guarantees: ``s`` equals the position in the tb; no same-tb dependency; every
dependency points to an earlier logical position (a ``step_reply`` one to a receive of the
same step, whose sender waits for nothing of this rank's step), so the dependency graph
(together with send->receive edges, which follow step order) is acyclic.

A ``depid`` is an int8 on the device (at most 127).  When a rank has more tbs than
that and a dependency targets one above it, the tbs are renumbered so that the
targets come first (in their old order, the rest after them): tb ids carry no
meaning beyond naming, so the program is the same, and it fits whenever at most
128 of its tbs are targets.

The pass works on columns: the candidate dependencies of every step come from the rank's
accesses sorted by (slot segment, position) -- the last write before a read, the next write
after any access -- and "per target tb the latest, beyond what the tb already waits for" is a
running maximum per (tb, target tb).  Its output, :class:`GpuTable`, is the ``<gpu>`` as
columns, which the XML printer reads; :meth:`GpuTable.to_gpu` builds the :class:`Gpu` view.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from collc.arrays import unique
from collc.compiler.msccl.fusion import (NOP, TYPES, Accesses, FusedPlan, ItemTable, R, RCS, RRC, RRCS,
                                         RRS, S, intervals)
from collc.compiler.msccl.program import Gpu, Program, Proto, Step, Threadblock
from collc.compiler.optable import BUF_CODE, BUFS, Ints, encode
from collc.ir.collective import Buffer, Collective
from collc.limits import MAX_DEPID

_SENDS = np.zeros(len(TYPES), dtype=bool)
_SENDS[[S, RCS, RRS, RRCS]] = True
_RECVS = np.zeros(len(TYPES), dtype=bool)
_RECVS[[R, RCS, RRS, RRC, RRCS]] = True


@dataclass(frozen=True, eq=False)
class GpuTable:
    """One rank's ``<gpu>`` as columns: tbs in id order (``send``, ``recv``, ``chan``), tb ``k``'s
    steps are rows ``start[k]:start[k+1]`` of the step columns (``type``: codes of
    :data:`collc.compiler.msccl.fusion.TYPES`, buffers: of :data:`collc.compiler.optable.BUFS`)."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    send: Ints
    recv: Ints
    chan: Ints
    start: Ints
    type: Ints
    srcbuf: Ints
    srcoff: Ints
    dstbuf: Ints
    dstoff: Ints
    cnt: Ints
    depid: Ints
    deps: Ints
    hasdep: Ints

    @property
    def ntbs(self) -> int:
        return len(self.send)

    def s(self) -> Ints:
        """Each step's index in its tb."""
        return np.arange(len(self.type), dtype=np.int64) - np.repeat(self.start[:-1], np.diff(self.start))

    @staticmethod
    def from_gpu(g: Gpu) -> GpuTable:
        """The columns of a :class:`Gpu` (step numbers are positions; ``s`` is not kept)."""
        steps = [st for t in g.tbs for st in t.steps]
        code = {t: k for k, t in enumerate(TYPES)}

        def col(values: list[int]) -> Ints:
            return np.array(values, dtype=np.int64)
        lens = [len(t.steps) for t in g.tbs]
        return GpuTable(g.id, g.i_chunks, g.o_chunks, g.s_chunks, col([t.send for t in g.tbs]),
                        col([t.recv for t in g.tbs]), col([t.chan for t in g.tbs]),
                        col([0] + lens).cumsum(), col([code[st.type] for st in steps]),
                        col([BUF_CODE.get(st.srcbuf, 0) for st in steps]), col([st.srcoff for st in steps]),
                        col([BUF_CODE.get(st.dstbuf, 0) for st in steps]), col([st.dstoff for st in steps]),
                        col([st.cnt for st in steps]), col([st.depid for st in steps]),
                        col([st.deps for st in steps]), col([st.hasdep for st in steps]))

    def to_gpu(self) -> Gpu:
        """The :class:`Gpu` of these columns."""
        rows = zip(self.s().tolist(), self.type.tolist(), self.srcbuf.tolist(), self.srcoff.tolist(),
                   self.dstbuf.tolist(), self.dstoff.tolist(), self.cnt.tolist(), self.depid.tolist(),
                   self.deps.tolist(), self.hasdep.tolist())
        steps = [Step(s, TYPES[ty], BUFS[sb], so, BUFS[db], do, c, di, ds, h)
                 for s, ty, sb, so, db, do, c, di, ds, h in rows]
        bounds = self.start.tolist()
        tbs = tuple(Threadblock(k, s, r, c, tuple(steps[bounds[k]:bounds[k + 1]]))
                    for k, (s, r, c) in enumerate(zip(self.send.tolist(), self.recv.tolist(), self.chan.tolist())))
        return Gpu(self.id, self.i_chunks, self.o_chunks, self.s_chunks, tbs)


def build_program(plan: FusedPlan, proto: Proto, inplace: bool, name: str,
                  min_bytes: int = 0, max_bytes: int = 0) -> Program:
    coll = plan.base.plan.collective
    gpus = [build_gpu(coll, rank, tbs, plan.base.plan.scratch[rank]).to_gpu() for rank, tbs in enumerate(plan.tbs)]
    return Program(name=name, proto=proto, nchannels=plan.base.nchannels, nchunksperloop=coll.nchunksperloop,
                   ngpus=coll.nranks, coll=coll.kind.value, inplace=int(inplace), outofplace=int(not inplace),
                   min_bytes=min_bytes, max_bytes=max_bytes, gpus=tuple(gpus))


def _shift(a: Ints, fill: int, by: int) -> Ints:
    """``a`` moved ``by`` places (1: right, -1: left), ``fill`` in the place left empty."""
    out = np.empty_like(a)
    if len(a):
        if by > 0:
            out[0] = fill
            out[1:] = a[:-1]
        else:
            out[-1] = fill
            out[:-1] = a[1:]
    return out


def _first_of_runs(*keys: Ints) -> Ints:
    """Where a run of equal rows of ``keys`` (sorted) starts."""
    n = len(keys[0])
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
        for k in keys:
            change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def build_gpu(coll: Collective, rank: int, items: ItemTable, scratch: int,
              sync: frozenset[int] = frozenset(), ordered_sends: bool = False,
              reply: frozenset[int] = frozenset()) -> GpuTable:
    """The dependencies, nops and steps of one rank (:func:`build_gpus` of one rank)."""
    return build_gpus(coll, [rank], items, {rank: scratch}, {rank: sync}, ordered_sends, {rank: reply})[0]


T = TypeVar("T")
PerRank = Sequence[T] | Mapping[int, T]      # a value per rank, by rank


def build_gpus(coll: Collective, ranks: Sequence[int], items: ItemTable, scratch: PerRank[int],
               sync: PerRank[frozenset[int]] | None = None, ordered_sends: bool = False,
               reply: PerRank[frozenset[int]] | None = None) -> list[GpuTable]:
    """The dependencies, nops and steps of each of ``ranks`` (ascending), whose items ``items``
    holds (each rank's on its own: coordinates keep the ranks' slots apart); per rank
    ``scratch[rank]``: its scratch chunks, ``sync[rank]``: the send peers of its connections
    in the schedule's ``step_sync``, ``reply[rank]``: those in ``step_reply``;
    ``ordered_sends``: the schedule's hint of that name."""
    n = len(items.type)
    ntb = len(items.send)
    tb_of = np.repeat(np.arange(ntb, dtype=np.int64), np.diff(items.start))
    it_of = np.arange(n, dtype=np.int64) - items.start[tb_of]
    row, lo, hi, reads = intervals(items.rank[tb_of], items.type, items.srcbuf, items.srcoff, items.dstbuf,
                                   items.dstoff, items.cnt)
    acc = Accesses(row, lo, hi, reads, items.op.pos)
    seg = acc.code // acc.n
    who = acc.row                              # the item of each access
    idx = np.arange(len(seg), dtype=np.int64)
    # RAW: a read depends on the segment's last write before it
    wr_at = np.where(acc.writes, idx, -1)
    prev = _shift(np.maximum.accumulate(wr_at), -1, 1)
    raw = acc.reads & (prev >= 0)
    raw[raw] = seg[prev[raw]] == seg[raw]
    # WAR and WAW: the segment's next write depends on every access since the write before it
    big = len(idx)
    nw_at = np.where(acc.writes, idx, big)
    nxt = _shift(np.minimum.accumulate(nw_at[::-1])[::-1], big, -1)
    war = nxt < big
    war[war] = seg[nxt[war]] == seg[war]
    dep = [who[raw], who[nxt[war]]]
    tgt = [who[prev[raw]], who[war]]
    if ordered_sends:
        d, t = _ordered(items, tb_of)
        dep.append(d)
        tgt.append(t)
    if bool(sync and any(sync[r] for r in ranks)) or bool(reply and any(reply[r] for r in ranks)):
        no: dict[int, frozenset[int]] = {}
        d, t = _extra(items, tb_of, items.op.order(), sync or no, reply or no)
        dep.append(d)
        tgt.append(t)
    d, e = np.concatenate(dep), np.concatenate(tgt)
    td, te = tb_of[d], tb_of[e]
    other = td != te
    d, e, td, te = d[other], e[other], td[other], te[other]
    ie = it_of[e]
    # per (tb, target tb), in the tb's item order: keep the latest target item of each item,
    # and only beyond the latest the tb already waits for (program order covers the same tb)
    # one key and one sort, not lexsort's sort per key (rows of equal keys are equal rows)
    srt = np.argsort(encode([td, te, d, ie]))
    d, td, te, ie = d[srt], td[srt], te[srt], ie[srt]
    last = _shift(_first_of_runs(d, te) - 1, len(d) - 1, -1)
    d, td, te, ie = d[last], td[last], te[last], ie[last]
    group = np.zeros(len(d), dtype=np.int64)
    if len(d):
        group[_first_of_runs(td, te)] = 1
        group = np.cumsum(group)
    scale = n + 1
    val = group * scale + ie
    before = _shift(np.maximum.accumulate(val), -1, 1)
    kept = val > before
    d, te, ie = d[kept], te[kept], ie[kept]
    # the item's dependencies sorted by target tb: all but the last ride on nops before it
    srt = np.argsort(encode([d, te]))        # (item, target tb) is unique here
    d, te, ie = d[srt], te[srt], ie[srt]
    ndeps = np.bincount(d, minlength=n)
    nops = np.maximum(ndeps - 1, 0)
    at = np.arange(n, dtype=np.int64) + np.cumsum(nops)            # each item's row among the steps
    total = n + int(nops.sum())
    heads = items.start[:-1]                  # no tb is empty: its first step is its first item's first nop
    tb_start = np.append(at[heads] - nops[heads], total).astype(np.int64)
    s_of = at - tb_start[tb_of]                                      # each item's index in its tb
    type_ = np.full(total, NOP, dtype=np.int64)
    srcbuf = np.full(total, BUF_CODE["i"], dtype=np.int64)
    dstbuf = np.full(total, BUF_CODE["o"], dtype=np.int64)
    srcoff = np.full(total, -1, dtype=np.int64)
    dstoff = np.full(total, -1, dtype=np.int64)
    cnt = np.zeros(total, dtype=np.int64)
    depid = np.full(total, -1, dtype=np.int64)
    deps = np.full(total, -1, dtype=np.int64)
    hasdep = np.zeros(total, dtype=np.int64)
    type_[at], srcbuf[at], srcoff[at], dstbuf[at], dstoff[at], cnt[at] = (
        items.type, items.srcbuf, items.srcoff, items.dstbuf, items.dstoff, items.cnt)
    if len(d):
        first = np.searchsorted(d, d)                   # the item's first dependency
        j = np.arange(len(d), dtype=np.int64) - first
        step_row = at[d] - (ndeps[d] - 1) + j            # nops first, the item's own step last
        target = items.start[te] + ie
        depid[step_row] = te - np.searchsorted(items.rank, items.rank[te])      # the tb's id on its rank
        deps[step_row] = s_of[target]
        hasdep[at[target]] = 1
    # one GpuTable per rank: its tbs are a run of the block's, its steps a run of the steps
    tb_lo = np.searchsorted(items.rank, ranks).tolist()
    tb_hi = np.searchsorted(items.rank, ranks, "right").tolist()
    step_at = tb_start.tolist()
    out = []
    for rank, a, b in zip(ranks, tb_lo, tb_hi):
        # a buffer folded into the other by in-place aliasing is never named in the XML
        i_chunks = 0 if coll.alias(rank, Buffer.INPUT)[0] is not Buffer.INPUT else coll.input_chunks
        o_chunks = 0 if coll.alias(rank, Buffer.OUTPUT)[0] is not Buffer.OUTPUT else coll.output_chunks
        lo_s, hi_s = step_at[a], step_at[b]
        g = GpuTable(rank, i_chunks, o_chunks, scratch[rank], items.send[a:b], items.recv[a:b], items.chan[a:b],
                     tb_start[a:b + 1] - lo_s, type_[lo_s:hi_s], srcbuf[lo_s:hi_s], srcoff[lo_s:hi_s],
                     dstbuf[lo_s:hi_s], dstoff[lo_s:hi_s], cnt[lo_s:hi_s], depid[lo_s:hi_s], deps[lo_s:hi_s],
                     hasdep[lo_s:hi_s])
        out.append(_targets_first(g) if b - a > MAX_DEPID + 1 and int(g.depid.max()) > MAX_DEPID else g)
    return out


def _targets_first(g: GpuTable) -> GpuTable:
    """The same tbs renumbered so that every dependency target has one of the lowest ids
    (in their old order, the rest after them)."""
    ntb = g.ntbs
    targets = unique(g.depid[g.depid >= 0])
    old = np.concatenate([targets, np.setdiff1d(np.arange(ntb, dtype=np.int64), targets)]).astype(np.int64)
    new = np.empty(ntb, dtype=np.int64)
    new[old] = np.arange(ntb, dtype=np.int64)
    lens = np.diff(g.start)[old]
    rows = np.concatenate([np.arange(g.start[o], g.start[o + 1], dtype=np.int64) for o in old.tolist()])
    depid = g.depid[rows]
    depid[depid >= 0] = new[depid[depid >= 0]]
    return GpuTable(g.id, g.i_chunks, g.o_chunks, g.s_chunks, g.send[old], g.recv[old], g.chan[old],
                    np.concatenate([[0], np.cumsum(lens)]).astype(np.int64), g.type[rows], g.srcbuf[rows], g.srcoff[rows],
                    g.dstbuf[rows], g.dstoff[rows], g.cnt[rows], depid, g.deps[rows], g.hasdep[rows])


def _ordered(items: ItemTable, tb_of: Ints) -> tuple[Ints, Ints]:
    """``ordered_sends``: each send depends on the rank's latest send to the same peer of an
    earlier step (the last one before its step's first, in logical order), as (item, item)."""
    sends = np.flatnonzero(_SENDS[items.type])
    if not len(sends):
        return sends, sends
    rank, peer = items.rank[tb_of[sends]], items.send[tb_of[sends]]
    step = items.op.step[sends]
    order = np.lexsort((items.op.pos[sends], peer, rank))
    sends, rank, peer, step = sends[order], rank[order], peer[order], step[order]
    new_group = np.ones(len(sends), dtype=bool)
    new_group[1:] = (rank[1:] != rank[:-1]) | (peer[1:] != peer[:-1])
    new_step = new_group.copy()
    new_step[1:] |= step[1:] != step[:-1]
    run = np.maximum.accumulate(np.where(new_step, np.arange(len(sends)), 0))      # its step's first send
    group = np.maximum.accumulate(np.where(new_group, np.arange(len(sends)), 0))   # its peer's first send
    has = run > group
    return sends[has], sends[run[has] - 1]


def _extra(items: ItemTable, tb_of: Ints, order: Ints, sync: PerRank[frozenset[int]],
           reply: PerRank[frozenset[int]]) -> tuple[Ints, Ints]:
    """The dependencies that the schedule's ``step_sync`` and ``step_reply`` add to sends, as
    (item, item it depends on); every key names the rank, so several ranks' items keep to
    their own."""
    types = items.type.tolist()
    lanes = items.op.lane.tolist()
    steps = items.op.step.tolist()
    tbs = tb_of.tolist()
    tb_rank = items.rank.tolist()
    send_of, recv_of = items.send.tolist(), items.recv.tolist()
    is_recv = _RECVS[items.type].tolist()
    is_send = _SENDS[items.type]
    none: frozenset[int] = frozenset()
    # step_sync: per (tb, lane) the schedule steps and rows of its receives, in order
    recv_at: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    if sync:
        for j in range(len(types)):
            if is_recv[j]:
                at, idx = recv_at.setdefault((tbs[j], lanes[j]), ([], []))
                at.append(steps[j])
                idx.append(j)
    recv_before: dict[tuple[int, int, int], dict[int, int]] = {}
    # step_reply: per (rank, receive peer, lane, step) the row of the last receive
    answer: dict[tuple[int, int, int, int], int] = {}
    if reply:
        for j in range(len(types)):
            rank = tb_rank[tbs[j]]
            if is_recv[j] and recv_of[tbs[j]] in reply[rank]:
                answer[(rank, recv_of[tbs[j]], lanes[j], steps[j])] = j
    dep: list[int] = []
    tgt: list[int] = []
    for j in order[is_send[order]].tolist():
        rank = tb_rank[tbs[j]]
        peer = send_of[tbs[j]]
        lane, step = lanes[j], steps[j]
        if peer in (sync[rank] if sync else none):
            # per other tb of the rank: its last receive of the lane before this step (the same
            # for every send of a (lane, step): worked out once)
            before = recv_before.get((rank, lane, step))
            if before is None:
                before = recv_before[(rank, lane, step)] = {}
                for (t, rlane), (at, idx) in recv_at.items():
                    if rlane == lane and tb_rank[t] == rank:
                        k = bisect_left(at, step)
                        if k:
                            before[t] = max(before.get(t, -1), idx[k - 1])
            for row in before.values():
                dep.append(j)
                tgt.append(row)
        if peer in (reply[rank] if reply else none):
            got = answer.get((rank, peer, lane, step))
            if got is not None:
                dep.append(j)
                tgt.append(got)
    return np.array(dep, dtype=np.int64), np.array(tgt, dtype=np.int64)
