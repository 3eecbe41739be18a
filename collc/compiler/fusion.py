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
from dataclasses import dataclass

from collc.compiler.program import StepType
from collc.compiler.scratch import Interval, Kind, RankOp, Slot
from collc.compiler.threadblocks import PlannedTb, TbPlan, order_key
from collc.ir.collective import Buffer


@dataclass(frozen=True, slots=True)
class Item:
    """One future XML step: an op, possibly fused with the send that follows it."""

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


def _single(op: RankOp) -> Item:
    if op.kind is Kind.SEND:
        return Item(StepType.SEND, op, op.srcbuf, op.srcoff, op.srcbuf, op.srcoff, op.cnt,
                    op.rd, ())
    if op.kind is Kind.RECV:
        t = StepType.RECV_REDUCE_COPY if op.reduce else StepType.RECV
        return Item(t, op, op.dstbuf, op.dstoff, op.dstbuf, op.dstoff, op.cnt, op.rd,
                    op.wr)
    t = StepType.REDUCE if op.kind is Kind.REDUCE else StepType.COPY
    return Item(t, op, op.srcbuf, op.srcoff, op.dstbuf, op.dstoff, op.cnt, op.rd, op.wr)


def _candidate(cur: RankOp, nxt: RankOp | None) -> bool:
    return (nxt is not None and cur.kind is Kind.RECV and nxt.kind is Kind.SEND
            and (cur.dstbuf, cur.dstoff, cur.cnt) == (nxt.srcbuf, nxt.srcoff, nxt.cnt))


def fuse(plan: TbPlan) -> FusedPlan:
    coll = plan.plan.collective
    out: list[tuple[FusedTb, ...]] = []
    for rank, tbs in enumerate(plan.tbs):
        # the per-slot timeline is needed only for slots that a candidate pair moves
        cand: set[Slot] = set()
        for tb in tbs:
            for a, b in zip(tb.ops, tb.ops[1:]):
                if _candidate(a.op, b.op):
                    cand.update(a.op.writes())
        timeline = _timeline(tbs, cand) if cand else {}
        outputs = {coll.physical(rank, Buffer.OUTPUT, e[0]) for e in coll.expected(rank)} if cand else set()
        out_slots = {(b.value, i) for b, i in outputs}
        fused_tbs: list[FusedTb] = []
        for tb in tbs:
            items: list[Item] = []
            ops = tb.ops
            k = 0
            while k < len(ops):
                cur = ops[k].op
                nxt = ops[k + 1].op if k + 1 < len(ops) else None
                if nxt is not None and _candidate(cur, nxt) and _quiet_between(timeline, cur, nxt):
                    items.append(_fused(cur, nxt, timeline, out_slots))
                    k += 2
                    continue
                items.append(_single(cur))
                k += 1
            fused_tbs.append(FusedTb(tb.send, tb.recv, tb.chan, tuple(items)))
        out.append(tuple(fused_tbs))
    return FusedPlan(plan, tuple(out))


Timeline = dict[Slot, tuple[list[tuple[int, ...]], list[bool]]]  # slot -> (positions, is pure write)


def _timeline(tbs: tuple[PlannedTb, ...], only: set[Slot]) -> Timeline:
    """Accesses to the slots in ``only``: slot -> (sorted positions, pure-write flags)."""
    acc: dict[Slot, list[tuple[tuple[int, ...], bool]]] = {}
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}
    for b, i in only:
        lo[b] = min(lo.get(b, i), i)
        hi[b] = max(hi.get(b, i), i)
    for tb in tbs:
        for c in tb.ops:
            op: RankOp = c.op
            touched = [(op.srcbuf, op.srcoff), (op.dstbuf, op.dstoff)]
            if not any(b in lo and off <= hi[b] and off + op.cnt > lo[b] for b, off in touched):
                continue
            pos = order_key(op)
            reads = set(op.reads())
            for s in reads:
                if s in only:
                    acc.setdefault(s, []).append((pos, False))
            for s in op.writes():
                if s not in reads and s in only:
                    acc.setdefault(s, []).append((pos, True))
    out: Timeline = {}
    for s, lst in acc.items():
        lst.sort()
        out[s] = ([p for p, _ in lst], [w for _, w in lst])
    return out


def _quiet_between(tl: Timeline, recv: RankOp, send: RankOp) -> bool:
    lo, hi = order_key(recv), order_key(send)
    for s in recv.writes():
        positions, _ = tl[s]
        i = bisect_right(positions, lo)
        if i < len(positions) and positions[i] < hi:
            return False
    return True


def _dead_after(tl: Timeline, slots: list[Slot], after: tuple[int, ...], out_slots: set[Slot]) -> bool:
    for s in slots:
        positions, pure_write = tl[s]
        i = bisect_right(positions, after)
        if i < len(positions):
            if not pure_write[i]:
                return False
        elif s in out_slots:
            return False
    return True


def _fused(recv: RankOp, send: RankOp, tl: Timeline, out_slots: set[Slot]) -> Item:
    slots = recv.writes()
    if not recv.reduce:
        return Item(StepType.RECV_COPY_SEND, recv, recv.dstbuf, recv.dstoff, recv.dstbuf, recv.dstoff, recv.cnt,
                    (), recv.wr)
    if _dead_after(tl, slots, order_key(send), out_slots):
        return Item(StepType.RECV_REDUCE_SEND, recv, recv.dstbuf, recv.dstoff, recv.dstbuf, recv.dstoff,
                    recv.cnt, recv.wr, ())
    return Item(StepType.RECV_REDUCE_COPY_SEND, recv, recv.dstbuf, recv.dstoff, recv.dstbuf, recv.dstoff,
                recv.cnt, recv.wr, recv.wr)
