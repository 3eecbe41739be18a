"""Pass: cross-tb dependencies, nops and the final Program (FusedPlan -> Program).

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
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import replace
from itertools import accumulate

from collc.compiler.msccl.fusion import FusedPlan, FusedTb, Item
from collc.limits import MAX_DEPID
from collc.compiler.msccl.program import RECVS, SENDS, Gpu, Program, Proto, Step, StepType, Threadblock
from collc.compiler.segments import Partition
from collc.ir.collective import Buffer, Collective


def build_program(plan: FusedPlan, proto: Proto, inplace: bool, name: str,
                  min_bytes: int = 0, max_bytes: int = 0) -> Program:
    coll = plan.base.plan.collective
    gpus = [build_gpu(coll, rank, tbs, plan.base.plan.scratch[rank]) for rank, tbs in enumerate(plan.tbs)]
    return Program(name=name, proto=proto, nchannels=plan.base.nchannels, nchunksperloop=coll.nchunksperloop,
                   ngpus=coll.nranks, coll=coll.kind.value, inplace=int(inplace), outofplace=int(not inplace),
                   min_bytes=min_bytes, max_bytes=max_bytes, gpus=tuple(gpus))


def build_gpu(coll: Collective, rank: int, tbs: tuple[FusedTb, ...], scratch: int,
              sync: frozenset[int] = frozenset(), ordered_sends: bool = False,
              reply: frozenset[int] = frozenset()) -> Gpu:
    """The dependencies, nops and steps of one rank (the pass works rank by rank);
    ``sync``: the send peers of the rank's connections in the schedule's ``step_sync``;
    ``ordered_sends``: the schedule's hint of that name; ``reply``: the send peers of the
    rank's connections in ``step_reply``."""
    items_of = [tb.items for tb in tbs]
    # logical order: the items tb by tb, then a stable sort by position (as (position, tb, item))
    order = [(tb_i, it_i, item) for tb_i, items in enumerate(items_of) for it_i, item in enumerate(items)]
    order.sort(key=_position)
    part = Partition({iv for items in items_of for item in items for ivs in (item.reads, item.writes)
                      for iv in ivs})
    segs = part.table        # every interval of an item is one the partition was built from
    # per segment (all its slots alike): the last writer, and per tb the last access since
    # that write (the writer's own, or a later read)
    last_writer: list[tuple[int, int] | None] = [None] * len(part)
    since: list[dict[int, int]] = [{} for _ in range(len(part))]
    # per tb, per target tb: the latest item of the target already depended on (the tb's own
    # items count as depended on throughout: program order covers them)
    satisfied = [{tb_i: _EVER} for tb_i in range(len(tbs))]
    deps: list[dict[int, dict[int, int]]] = [{} for _ in tbs]      # per tb: item -> {tb: item}
    extra = _ExtraRules(tbs, sync, ordered_sends, reply) if sync or ordered_sends or reply else None
    for tb_i, it_i, item in order:
        sat = satisfied[tb_i]
        kept: dict[int, int] = {}    # a candidate counts only beyond what tb_i already waits for
        if extra is not None:
            for t, i in extra.needs(tb_i, it_i, item):
                if sat.get(t, -1) < i:
                    sat[t] = kept[t] = i
        # RAW on the last writer; WAW and WAR on the last writer and every reader since
        for iv in item.reads:
            for g in segs[iv]:
                w = last_writer[g]
                if w is not None:
                    t, i = w
                    if sat.get(t, -1) < i:
                        sat[t] = kept[t] = i
                since[g][tb_i] = it_i      # items of a tb come in increasing order
        if item.writes:
            me = (tb_i, it_i)
            for iv in item.writes:
                for g in segs[iv]:
                    for t, i in since[g].items():
                        if sat.get(t, -1) < i:
                            sat[t] = kept[t] = i
                    last_writer[g] = me
                    since[g] = {tb_i: it_i}
        if kept:
            deps[tb_i][it_i] = kept
    # step index of each item after inserting nops, and the items that are targets
    index: list[Sequence[int]] = []
    hit: list[set[int]] = [set() for _ in tbs]
    for tb_i, items in enumerate(items_of):
        nops = [0] * len(items)
        for it_i, on in deps[tb_i].items():
            nops[it_i] = len(on) - 1
            for t, i in on.items():
                hit[t].add(i)
        index.append([k + n for k, n in enumerate(accumulate(nops))] if any(nops) else range(len(items)))
    out_tbs: list[Threadblock] = []
    nop = StepType.NOP
    for tb_i, tb in enumerate(tbs):
        steps: list[Step] = []
        targets, d_of = hit[tb_i], deps[tb_i]
        for it_i, (typ, _, sbuf, soff, dbuf, doff, cnt, _, _) in enumerate(tb.items):
            d = d_of.get(it_i)
            if d is None:
                depid = dep_s = -1
            elif len(d) == 1:
                ((depid, i),) = d.items()
                dep_s = index[depid][i]
            else:
                # a nop is never a target: a target is the step of an item
                dl = sorted((t, index[t][i]) for t, i in d.items())
                for dep_tb, dep_step in dl[:-1]:
                    steps.append(Step(len(steps), nop, "i", -1, "o", -1, 0, dep_tb, dep_step, 0))
                depid, dep_s = dl[-1]
            steps.append(Step(len(steps), typ, sbuf, soff, dbuf, doff, cnt, depid, dep_s,
                              1 if it_i in targets else 0))
        out_tbs.append(Threadblock(tb_i, tb.send, tb.recv, tb.chan, tuple(steps)))
    if any(hit[MAX_DEPID + 1:]):
        out_tbs = _targets_first(out_tbs)
    # a buffer folded into the other by in-place aliasing is never named in the XML
    i_chunks = 0 if coll.alias(rank, Buffer.INPUT)[0] is not Buffer.INPUT else coll.input_chunks
    o_chunks = 0 if coll.alias(rank, Buffer.OUTPUT)[0] is not Buffer.OUTPUT else coll.output_chunks
    return Gpu(rank, i_chunks, o_chunks, scratch, tuple(out_tbs))


_EVER = 1 << 62      # "already depended on" beyond any item index


def _position(entry: tuple[int, int, Item]) -> tuple[int, ...]:
    return entry[2].op.pos


class _ExtraRules:
    """The dependencies that the schedule's hints add to sends (``step_sync``, ``step_reply``,
    ``ordered_sends``); ``needs`` is asked of every item in logical order."""

    def __init__(self, tbs: tuple[FusedTb, ...], sync: frozenset[int], ordered_sends: bool,
                 reply: frozenset[int]) -> None:
        self.tbs, self.sync, self.ordered_sends, self.reply = tbs, sync, ordered_sends, reply
        # step_sync: per (tb, lane) the schedule steps and item indices of its receives, in order
        self.recv_at: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        if sync:
            for tb_i, tb in enumerate(tbs):
                for it_i, item in enumerate(tb.items):
                    if item.type in RECVS:
                        at, idx = self.recv_at.setdefault((tb_i, item.op.lane), ([], []))
                        at.append(item.op.step)
                        idx.append(it_i)
        self.recv_before: dict[tuple[int, int], dict[int, int]] = {}
        # step_reply: per (receive peer, lane, step) the tb and item of the last receive
        self.answer: dict[tuple[int, int, int], tuple[int, int]] = {}
        if reply:
            for tb_i, tb in enumerate(tbs):
                if tb.recv in reply:
                    for it_i, item in enumerate(tb.items):
                        if item.type in RECVS:
                            self.answer[(tb.recv, item.op.lane, item.op.step)] = (tb_i, it_i)
        # ordered_sends, per send peer: (step, tb, item) of the latest send to it, and the latest
        # one of an earlier step
        self.last_send: dict[int, tuple[int, int, int]] = {}
        self.prev_send: dict[int, tuple[int, int, int]] = {}

    def needs(self, tb_i: int, it_i: int, item: Item) -> list[tuple[int, int]]:
        """(tb, item) pairs that ``item`` (item ``it_i`` of tb ``tb_i``) depends on."""
        if item.type not in SENDS:
            return []
        out: list[tuple[int, int]] = []
        peer = self.tbs[tb_i].send
        if peer in self.sync:
            # per other tb: its last receive of the lane before this step (the same for every
            # send of a (lane, step): worked out once)
            lane_step = (item.op.lane, item.op.step)
            before = self.recv_before.get(lane_step)
            if before is None:
                lane, step = lane_step
                before = self.recv_before[lane_step] = {}
                for (t, rlane), (at, idx) in self.recv_at.items():
                    if rlane == lane:
                        k = bisect_left(at, step)
                        if k:
                            before[t] = max(before.get(t, -1), idx[k - 1])
            out.extend(before.items())
        if peer in self.reply:
            got = self.answer.get((peer, item.op.lane, item.op.step))
            if got is not None:
                out.append(got)
        if self.ordered_sends:
            step = item.op.pos[0]
            last = self.last_send.get(peer)
            if last is not None and last[0] < step:
                self.prev_send[peer] = last
            prev = self.prev_send.get(peer)
            if prev is not None:
                out.append(prev[1:])
            self.last_send[peer] = (step, tb_i, it_i)
        return out


def _targets_first(tbs: list[Threadblock]) -> list[Threadblock]:
    """The same tbs renumbered so that every dependency target has one of the lowest ids."""
    targets = sorted({s.depid for t in tbs for s in t.steps if s.depid >= 0})
    chosen = set(targets)
    new = {old: k for k, old in enumerate(targets + [t.id for t in tbs if t.id not in chosen])}
    moved = [replace(t, id=new[t.id], steps=tuple(replace(s, depid=new[s.depid]) if s.depid >= 0 else s
                                                  for s in t.steps)) for t in tbs]
    return sorted(moved, key=lambda t: t.id)
