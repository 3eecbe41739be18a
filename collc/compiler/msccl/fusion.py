"""Pass: instruction fusion (TbPlan -> FusedPlan).

Inside one tb, a receive immediately followed by a send of exactly the slots it
just wrote becomes one step that forwards piece by piece: ``rcs`` (copy),
``rrcs`` (reduce, keep the result) or ``rrs`` (reduce, result dead: the slot's next
access on this rank overwrites it, or it is scratch / not an output).  Fusion is
skipped when any other op of the rank touches those slots between the two.
Guarantees: the fused program reads and writes the same values at the same
logical positions, so the Schedule's semantics are unchanged.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from collc.compiler.msccl.program import StepType
from collc.compiler.scratch import Interval, Kind, RankOp
from collc.compiler.segments import Partition
from collc.compiler.msccl.threadblocks import PlannedTb, TbPlan, order_key
from collc.ir.collective import Buffer, Collective


class Item(NamedTuple):
    """One future XML step: an op, possibly fused with the send that follows it (immutable;
    a named tuple because lowering builds one per op and tuples are the cheapest to build)."""

    type: StepType
    op: RankOp
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    reads: tuple[Interval, ...]     # (buffer, lo, hi) intervals, as RankOp keeps them
    writes: tuple[Interval, ...]

    @property
    def position(self) -> tuple[int, ...]:
        return order_key(self.op)


@dataclass(frozen=True)
class FusedTb:
    send: int
    recv: int
    chan: int
    items: tuple[Item, ...]


@dataclass(frozen=True)
class FusedPlan:
    base: TbPlan
    tbs: tuple[tuple[FusedTb, ...], ...]


# enum members and the tuple constructor as module constants: ``StepType.X`` is a class
# attribute lookup (~0.25 us) and a named tuple's own constructor a Python call, paid per op
_SEND, _RECV, _REDUCE = Kind.SEND, Kind.RECV, Kind.REDUCE
_S, _R, _RRC, _RE, _CPY = StepType.SEND, StepType.RECV, StepType.RECV_REDUCE_COPY, StepType.REDUCE, StepType.COPY
_RCS, _RRS, _RRCS = StepType.RECV_COPY_SEND, StepType.RECV_REDUCE_SEND, StepType.RECV_REDUCE_COPY_SEND
_new = tuple.__new__


def _single(op: RankOp) -> Item:
    kind = op.kind
    if kind is _SEND:
        return _new(Item, (_S, op, op.srcbuf, op.srcoff, op.srcbuf, op.srcoff, op.cnt, op.rd, ()))
    if kind is _RECV:
        return _new(Item, (_RRC if op.reduce else _R, op, op.dstbuf, op.dstoff, op.dstbuf, op.dstoff, op.cnt,
                           op.rd, op.wr))
    return _new(Item, (_RE if kind is _REDUCE else _CPY, op, op.srcbuf, op.srcoff, op.dstbuf, op.dstoff, op.cnt,
                       op.rd, op.wr))


def fuse(plan: TbPlan) -> FusedPlan:
    coll = plan.plan.collective
    return FusedPlan(plan, tuple(fuse_rank(coll, rank, tbs) for rank, tbs in enumerate(plan.tbs)))


def fuse_rank(coll: Collective, rank: int, tbs: tuple[PlannedTb, ...]) -> tuple[FusedTb, ...]:
    """Fusion of one rank's tbs (the pass works rank by rank)."""
    # candidate pairs, per tb the index of the receive of each: a receive followed by a send of
    # exactly the slots it wrote
    at: list[list[int]] = []
    tb_ops: list[list[RankOp]] = []
    cands: list[RankOp] = []
    for tb in tbs:
        ks: list[int] = []
        ops = [c.op for c in tb.ops]
        tb_ops.append(ops)
        for k in range(len(ops) - 1):
            cur = ops[k]
            if cur.kind is _RECV:
                nxt = ops[k + 1]
                if (nxt.kind is _SEND and cur.dstoff == nxt.srcoff and cur.cnt == nxt.cnt
                        and cur.dstbuf == nxt.srcbuf):
                    ks.append(k)
                    cands.append(cur)
        at.append(ks)
    # the access timeline is needed only for slots that a candidate pair moves
    tl = _Timeline(tb_ops, cands) if cands else None
    pb, base = coll.alias(rank, Buffer.OUTPUT)
    outs = coll.obligated_outputs(rank)
    out_iv = (pb.value, base + outs.start, base + outs.stop)
    fused_tbs: list[FusedTb] = []
    for tb, ops, ks in zip(tbs, tb_ops, at):
        if not ks or tl is None:
            items = [_single(op) for op in ops]
        else:
            items = []
            fuse_at = set(ks)
            k, n = 0, len(ops)
            while k < n:
                cur = ops[k]
                if k in fuse_at and tl.quiet_between(cur, ops[k + 1]):
                    items.append(_fused(cur, ops[k + 1], tl, out_iv))
                    k += 2
                    continue
                items.append(_single(cur))
                k += 1
        fused_tbs.append(FusedTb(tb.send, tb.recv, tb.chan, tuple(items)))
    return tuple(fused_tbs)


class _Timeline:
    """Accesses of one rank to the slots that candidate receives write, per segment:
    sorted positions and whether each access is a pure write (writes without reading)."""

    def __init__(self, tb_ops: list[list[RankOp]], cands: list[RankOp]) -> None:
        self.part = part = Partition({iv for ops in tb_ops for op in ops for ivs in (op.rd, op.wr) for iv in ivs})
        segs = part.table        # every interval of an op is one the partition was built from
        wanted = bytearray(len(part))
        for cand in cands:
            for iv in cand.wr:
                for g in segs[iv]:
                    wanted[g] = 1
        # per interval: its wanted segments (most intervals have none, and many repeat)
        hits = {iv: tuple(g for g in r if wanted[g]) for iv, r in segs.items()}
        acc: defaultdict[int, list[tuple[tuple[int, ...], bool]]] = defaultdict(list)
        for ops in tb_ops:
            for op in ops:
                rd, wr, pos = op.rd, op.wr, op.pos
                read: set[int] | tuple[int, ...] = ()
                if rd:
                    read = hits[rd[0]] if len(rd) == 1 else {g for iv in rd for g in hits[iv]}
                    for g in read:
                        acc[g].append((pos, False))
                for iv in wr:
                    for g in hits[iv]:
                        if g not in read:
                            acc[g].append((pos, True))
        self.positions: dict[int, tuple[tuple[int, ...], ...]] = {}
        self.pure_write: dict[int, tuple[bool, ...]] = {}
        for g, lst in acc.items():
            lst.sort()
            self.positions[g], self.pure_write[g] = zip(*lst)

    def quiet_between(self, recv: RankOp, send: RankOp) -> bool:
        """No other access to the received slots between the receive and the send."""
        lo, hi = recv.pos, send.pos
        segs = self.part.table
        for iv in recv.wr:
            for g in segs[iv]:
                positions = self.positions[g]
                i = bisect_right(positions, lo)
                if i < len(positions) and positions[i] < hi:
                    return False
        return True

    def dead_after(self, recv: RankOp, after: tuple[int, ...], out_iv: Interval) -> bool:
        """Every received slot is next overwritten, or never read again and not an output."""
        for iv in recv.wr:
            for g in self.part.segments(iv):
                positions = self.positions[g]
                i = bisect_right(positions, after)
                if i < len(positions):
                    if not self.pure_write[g][i]:
                        return False
                else:
                    b, lo, hi = self.part.bounds(g)
                    if b == out_iv[0] and lo < out_iv[2] and out_iv[1] < hi:   # holds output
                        return False
        return True


def _fused(recv: RankOp, send: RankOp, tl: _Timeline, out_iv: Interval) -> Item:
    if not recv.reduce:
        return _new(Item, (_RCS, recv, recv.dstbuf, recv.dstoff, recv.dstbuf, recv.dstoff, recv.cnt, (), recv.wr))
    if tl.dead_after(recv, order_key(send), out_iv):
        return _new(Item, (_RRS, recv, recv.dstbuf, recv.dstoff, recv.dstbuf, recv.dstoff, recv.cnt, recv.wr, ()))
    return _new(Item, (_RRCS, recv, recv.dstbuf, recv.dstoff, recv.dstbuf, recv.dstoff, recv.cnt, recv.wr,
                       recv.wr))
