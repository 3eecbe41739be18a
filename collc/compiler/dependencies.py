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
from dataclasses import replace

from collc.compiler.fusion import FusedPlan, FusedTb
from collc.compiler.limits import MAX_DEPID
from collc.compiler.program import RECVS, SENDS, Gpu, Program, Proto, Step, StepType, Threadblock
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
    order = sorted(((item.op.pos, tb_i, it_i) for tb_i, tb in enumerate(tbs)
                    for it_i, item in enumerate(tb.items)))
    part = Partition({iv for tb in tbs for item in tb.items for ivs in (item.reads, item.writes)
                      for iv in ivs})
    # per segment (all its slots alike): the last writer and, per tb, the last reader since
    last_writer: list[tuple[int, int] | None] = [None] * len(part)
    readers: list[dict[int, int]] = [{} for _ in range(len(part))]
    deps: dict[tuple[int, int], dict[int, int]] = {}
    satisfied: list[dict[int, int]] = [{} for _ in tbs]
    segs = part.table        # every interval of an item is one the partition was built from
    # step_sync: per (tb, lane) the schedule steps and item indices of its receives, in order
    recv_at: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    if sync:
        for tb_i, tb in enumerate(tbs):
            for it_i, item in enumerate(tb.items):
                if item.type in RECVS:
                    at, idx = recv_at.setdefault((tb_i, item.op.lane), ([], []))
                    at.append(item.op.step)
                    idx.append(it_i)
    # step_reply: per (receive peer, lane, step) the tb and item of the last receive
    answer: dict[tuple[int, int, int], tuple[int, int]] = {}
    if reply:
        for tb_i, tb in enumerate(tbs):
            if tb.recv in reply:
                for it_i, item in enumerate(tb.items):
                    if item.type in RECVS:
                        answer[(tb.recv, item.op.lane, item.op.step)] = (tb_i, it_i)
    # ordered_sends, per send peer: (step, tb, item) of the latest send to it, and the latest one of an earlier step
    last_send: dict[int, tuple[int, int, int]] = {}
    prev_send: dict[int, tuple[int, int, int]] = {}
    sends = SENDS
    recv_before: dict[tuple[int, int], dict[int, int]] = {}
    items_of = [tb.items for tb in tbs]
    for position, tb_i, it_i in order:
        item = items_of[tb_i][it_i]
        need: dict[int, int] = {}
        if sync and item.type in sends and tbs[tb_i].send in sync:
            # per other tb: its last receive of the lane before this step (the same for every
            # send of a (lane, step): worked out once)
            lane_step = (item.op.lane, item.op.step)
            before = recv_before.get(lane_step)
            if before is None:
                lane, step = lane_step
                before = {}
                for (t, rlane), (at, idx) in recv_at.items():
                    if rlane == lane:
                        k = bisect_left(at, step)
                        if k:
                            before[t] = max(before.get(t, -1), idx[k - 1])
                recv_before[lane_step] = before
            need = {t: i for t, i in before.items() if t != tb_i}
        if reply and item.type in sends and tbs[tb_i].send in reply:
            got = answer.get((tbs[tb_i].send, item.op.lane, item.op.step))
            if got is not None and got[0] != tb_i:
                need[got[0]] = max(need.get(got[0], -1), got[1])
        if ordered_sends and item.type in sends:
            peer, step = tbs[tb_i].send, position[0]
            last = last_send.get(peer)
            if last is not None and last[0] < step:
                prev_send[peer] = last
            prev = prev_send.get(peer)
            if prev is not None and prev[1] != tb_i:
                need[prev[1]] = max(need.get(prev[1], -1), prev[2])
            last_send[peer] = (step, tb_i, it_i)
        # RAW on the last writer; WAW and WAR on the last writer and every reader since
        reads, writes = item.reads, item.writes
        for iv in reads:
            for g in segs[iv]:
                w = last_writer[g]
                if w is not None and w[0] != tb_i and need.get(w[0], -1) < w[1]:
                    need[w[0]] = w[1]
        for iv in writes:
            for g in segs[iv]:
                w = last_writer[g]
                if w is not None and w[0] != tb_i and need.get(w[0], -1) < w[1]:
                    need[w[0]] = w[1]
                for t, i in readers[g].items():
                    if t != tb_i and need.get(t, -1) < i:
                        need[t] = i
        for iv in reads:
            for g in segs[iv]:
                readers[g][tb_i] = it_i      # items of a tb come in increasing order
        if writes:
            me = (tb_i, it_i)
            for iv in writes:
                for g in segs[iv]:
                    last_writer[g] = me
                    readers[g] = {}
        if need:
            sat = satisfied[tb_i]
            kept = {t: i for t, i in need.items() if sat.get(t, -1) < i}
            if kept:
                sat.update(kept)
                deps[(tb_i, it_i)] = kept
    # step index of each item after inserting nops
    index: list[list[int]] = []
    for tb_i, tb in enumerate(tbs):
        pos, idx = 0, []
        for it_i in range(len(tb.items)):
            d = deps.get((tb_i, it_i))
            if d is not None and len(d) > 1:
                pos += len(d) - 1
            idx.append(pos)
            pos += 1
        index.append(idx)
    targets = {(t, index[t][i]) for d in deps.values() for t, i in d.items()}
    out_tbs: list[Threadblock] = []
    nop = StepType.NOP
    for tb_i, tb in enumerate(tbs):
        steps: list[Step] = []
        for it_i, item in enumerate(tb.items):
            d = deps.get((tb_i, it_i))
            if d is None:
                n = len(steps)
                steps.append(Step(n, item.type, item.srcbuf, item.srcoff, item.dstbuf, item.dstoff,
                                  item.cnt, -1, -1, 1 if (tb_i, n) in targets else 0))
                continue
            dl = sorted((t, index[t][i]) for t, i in d.items())
            for dep_tb, dep_step in dl[:-1]:
                steps.append(Step(len(steps), nop, "i", -1, "o", -1, 0, dep_tb, dep_step,
                                  int((tb_i, len(steps)) in targets)))
            depid, dep_s = dl[-1]
            steps.append(Step(len(steps), item.type, item.srcbuf, item.srcoff, item.dstbuf, item.dstoff,
                              item.cnt, depid, dep_s, int((tb_i, len(steps)) in targets)))
        out_tbs.append(Threadblock(tb_i, tb.send, tb.recv, tb.chan, tuple(steps)))
    if any(s.depid > MAX_DEPID for t in out_tbs for s in t.steps):
        out_tbs = _targets_first(out_tbs)
    # a buffer folded into the other by in-place aliasing is never named in the XML
    i_chunks = 0 if coll.alias(rank, Buffer.INPUT)[0] is not Buffer.INPUT else coll.input_chunks
    o_chunks = 0 if coll.alias(rank, Buffer.OUTPUT)[0] is not Buffer.OUTPUT else coll.output_chunks
    return Gpu(rank, i_chunks, o_chunks, scratch, tuple(out_tbs))


def _targets_first(tbs: list[Threadblock]) -> list[Threadblock]:
    """The same tbs renumbered so that every dependency target has one of the lowest ids."""
    targets = sorted({s.depid for t in tbs for s in t.steps if s.depid >= 0})
    chosen = set(targets)
    new = {old: k for k, old in enumerate(targets + [t.id for t in tbs if t.id not in chosen])}
    moved = [replace(t, id=new[t.id], steps=tuple(replace(s, depid=new[s.depid]) if s.depid >= 0 else s
                                                  for s in t.steps)) for t in tbs]
    return sorted(moved, key=lambda t: t.id)
