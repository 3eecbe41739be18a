"""A small symbolic executor of MSCCL++ plans, for the lowering's tests (shares no code with it).

Threadblocks run their ops in order, round-robin, each as far as it can: ``wait`` blocks until
the paired channel has an unconsumed signal (the k-th channel a->b pairs with the k-th b->a),
``sem_acquire`` until the semaphore is positive, LL unpack/reduce until the packets landed.
Slots hold contribution sets; a reduce of overlapping sets is a double reduction.  At the end
every channel's signals and every semaphore must be consumed (the next launch starts clean)
and each rank's output must satisfy the collective's postcondition.
"""

from __future__ import annotations

from collections import defaultdict

from collc.compiler.mscclpp.plan import BufferType, ChannelType, LocalBuff, OpName, Plan, RemoteBuff
from collc.ir.collective import Buffer, Collective

Slot = tuple[int, str, int]          # (rank, buffer type, chunk)
_PHYS = {Buffer.INPUT: "i", Buffer.OUTPUT: "o", Buffer.SCRATCH: "s"}


def run_plan(plan: Plan, coll: Collective) -> list[str]:
    """Problems found (empty: the plan computes ``coll`` and leaves no signal or semaphore behind)."""
    n = plan.nranks
    data: dict[Slot, frozenset[tuple[int, int]]] = {}
    for r in range(n):
        for i in range(coll.input_chunks):
            b, j = coll.physical(r, Buffer.INPUT, i)
            data[(r, _PHYS[b], j)] = frozenset({(r, i)})
    # channel (rank, gpu channel index) -> peer, and the index among the rank's channels to that peer
    peer_of: dict[tuple[int, int], tuple[int, int]] = {}
    by_peer: dict[tuple[int, int, int], int] = {}
    for g in plan.gpus:
        seen: dict[int, int] = defaultdict(int)
        for idx, p in enumerate(g.peers(ChannelType.MEMORY)):
            peer_of[(g.id, idx)] = (p, seen[p])
            by_peer[(g.id, p, seen[p])] = idx
            seen[p] += 1
    inbound: dict[tuple[int, int], int] = defaultdict(int)      # (rank, channel) -> signals not yet waited for
    sems: dict[tuple[int, int], int] = defaultdict(int)
    pcs = {(g.id, tb.id): 0 for g in plan.gpus for tb in g.threadblocks}
    tbs = {(g.id, tb.id): tb for g in plan.gpus for tb in g.threadblocks}
    gpus = {g.id: g for g in plan.gpus}
    problems: list[str] = []

    def slots(r: int, tbk: tuple[int, int], b: object) -> list[Slot]:
        if isinstance(b, LocalBuff):
            return [(r, b.type.value, b.index + k) for k in range(b.size)]
        assert isinstance(b, RemoteBuff)
        rb = gpus[r].remote_buffers[tbs[tbk].buffer_list(ChannelType.MEMORY)[b.buffer_id]]
        return [(rb.rank, rb.type.value, b.index + k) for k in range(b.size)]

    def step(key: tuple[int, int]) -> bool:
        r = key[0]
        tb = tbs[key]
        op = tb.ops[pcs[key]]
        chans = tb.channel_list(ChannelType.MEMORY)
        name = op.name
        where = f"gpu {r} tb {tb.id} op {pcs[key]} ({name.value})"
        if name in (OpName.NOP,):
            pass
        elif name is OpName.SIGNAL:
            for c in op.channels:
                p, k = peer_of[(r, chans[c])]
                inbound[(p, by_peer[(p, r, k)])] += 1
        elif name is OpName.WAIT:
            if any(inbound[(r, chans[c])] == 0 for c in op.channels):
                return False
            for c in op.channels:
                inbound[(r, chans[c])] -= 1
        elif name is OpName.SEM_RELEASE:
            for s in op.semaphore_ids or ():
                sems[(r, s)] += 1
        elif name is OpName.SEM_ACQUIRE:
            ids = list(op.semaphore_ids or ())
            need: dict[int, int] = defaultdict(int)
            for s in ids:
                need[s] += 1
            if any(sems[(r, s)] < k for s, k in need.items()):
                return False
            for s in ids:
                sems[(r, s)] -= 1
        elif name in (OpName.PUT, OpName.PUT_PACKETS, OpName.COPY, OpName.UNPACK_PACKETS):
            pairs = list(zip(op.srcs, op.dsts))
            if name is OpName.UNPACK_PACKETS and any(s not in data for sb, _ in pairs for s in slots(r, key, sb)):
                return False
            for sb, db in pairs:
                for s, d in zip(slots(r, key, sb), slots(r, key, db)):
                    if s not in data:
                        problems.append(f"{where}: reads empty {s}")
                        continue
                    data[d] = data[s]
        elif name in (OpName.REDUCE, OpName.REDUCE_PACKETS):
            srcs = [slots(r, key, b) for b in op.srcs]
            if name is OpName.REDUCE_PACKETS and any(s not in data for ss in srcs[1:] for s in ss):
                return False
            for k, d in enumerate(slots(r, key, op.dsts[0])):
                acc: frozenset[tuple[int, int]] = frozenset()
                for ss in srcs:
                    v = data.get(ss[k])
                    if v is None:
                        problems.append(f"{where}: reduces empty {ss[k]}")
                        continue
                    if acc & v:
                        problems.append(f"{where}: double reduction into {d}")
                    acc |= v
                data[d] = acc
        else:
            problems.append(f"{where}: op not modelled")
        pcs[key] += 1
        return True

    live = sorted(k for k in pcs if tbs[k].ops)
    while live:
        moved = False
        for key in list(live):
            while pcs[key] < len(tbs[key].ops) and step(key):
                moved = True
            if pcs[key] == len(tbs[key].ops):
                live.remove(key)
        if not moved and live:
            blocked = ", ".join(f"gpu {r} tb {t} at {tbs[(r, t)].ops[pcs[(r, t)]].name.value}" for r, t in live[:4])
            return problems + [f"deadlock: {blocked}"]
    problems += [f"gpu {r} channel {c}: {v} signals never waited for" for (r, c), v in inbound.items() if v]
    problems += [f"gpu {r} semaphore {s}: left at {v}" for (r, s), v in sems.items() if v]
    for r in range(n):
        for idx, origin, ranks in coll.expected(r):
            b, j = coll.physical(r, Buffer.OUTPUT, idx)
            got = data.get((r, _PHYS[b], j))
            want = frozenset((q, origin) for q in ranks)
            if got != want:
                problems.append(f"gpu {r} output chunk {idx}: {sorted(got or ())} != {sorted(want)}")
                break
    return problems


__all__ = ["run_plan", "BufferType"]
