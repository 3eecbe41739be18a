"""Lowering a Schedule to an MSCCL++ execution plan (Schedule -> Plan), one-sided.

``lower_plan(schedule, options)`` runs the named passes of ``PLAN_PASSES``::

    pipelining -> pieces -> slots -> threadblocks -> pairing -> dependencies -> staging -> ops -> limits

and returns a :class:`collc.compiler.mscclpp.plan.Plan`.  The design, the flow control and the
runtime limits it respects are described in ``docs/mscclpp-backend.md``; in short:

* **pipelining**: the same Schedule-level pass as the XML lowering (``--chunks``,
  ``--instances``; instances become lanes).
* **pieces**: a transfer of more than 16 separate chunk ranges is cut into pieces of 16 ranges
  (each range is one op on the receiver).
* **slots**: every remote transfer gets scratch chunks of its own on the receiver, after
  the schedule's own scratch.  A slot is written once per launch (by the sender's ``put``)
  and read once (by the receiver after its ``wait``), so no slot is overwritten while its
  receiver still reads it.  Across launches, each receiving threadblock signals its sender
  once at the end and the sender waits for it before its kernel ends (back-pressure), so
  the next launch cannot write a slot that the previous one has not consumed.
* **threadblocks**: one sending threadblock per (peer, lane, group) and one receiving
  threadblock per (peer, lane, group), each with a memory channel of its own (the k-th
  channel a->b pairs with the k-th b->a: both ends list a pair's channels in one sorted
  order), plus local threadblocks for the copies and reduces a rank does alone.  The
  transfers of a connection are dealt round-robin to ``groups`` threadblocks; ``groups``
  doubles until every threadblock fits the executor's 64 ops.
* **pairing**: a receiving end and the sending end that forwards what it receives run on one
  threadblock (as a ring's receive-reduce-send does), which saves the semaphore pair and a
  ``nop`` of every forward; a paired tb beyond 64 ops is either unpaired or split, whichever
  plan has fewer tbs, then fewer ops.
* **dependencies**: actions of one rank in the order of the Schedule's step semantics
  (step; within a step the puts read first, then local transfers, then received data is
  written); a read-after-write, write-after-read or write-after-write on a local chunk
  between two threadblocks becomes a counting semaphore per (producer tb, consumer tb),
  released only at the points some acquire needs, so releases and acquires balance in
  every launch.  Every edge goes forward in that order, so the plan cannot deadlock.
* **staging** (LL only): each sending end on a port channel gets a packet staging region in the
  sender's own scratch (the proxy copies bytes; it cannot make packets).
* **ops**: Simple: ``put`` + ``signal`` on the sender, ``wait`` + ``copy``/``re`` on the
  receiver (over a port channel ``pws`` or ``put``s + ``signal``, then a ``flush``).  LL: ``ppkt``
  on the sender, ``upkt``/``repkt`` on the receiver (the packets' flags replace the signal); over a
  port channel ``cpkt`` into the staging region and ``rppkt`` from it, a ``flush`` before the region
  is staged again and at the end of the tb.  ``nop`` (a block-wide barrier) separates an op from the next
  where the executor does not: after a wait or an acquire before data moves, and after
  data moves before a signal or a release or a data op on the same chunks.

>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> from collc.topology import parse_spec
>>> plan = lower_plan(build_schedule("ring", parse_spec("ring:4"), CollKind.ALLGATHER, False, None, {}))
>>> # per rank: one tb receives from the predecessor and forwards to the successor, one copies locally
>>> plan.collective, len(plan.gpus), [len(g.threadblocks) for g in plan.gpus]
('allgather', 4, [2, 2, 2, 2])
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum

from collc.compiler.pipelining import split_chunks
from collc.compiler.transfers import TransferTable
from collc.compiler.mscclpp.plan import (BufferType, Channel, ChannelType, Gpu, LocalBuff, Op, OpName,
                                 Plan, Protocol, ReduceOp, RemoteBuff, RemoteBuffer, Semaphore, TbChannels,
                                 TbRemoteBuffers, Threadblock)
from collc.errors import LoweringError
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Op as XferOp
from collc.ir.schedule import Schedule, Transfer, make_slots

PLAN_PASSES = ("pipelining", "pieces", "slots", "threadblocks", "pairing", "dependencies", "staging", "ops", "limits")

# The executor's limits (execution_common.hpp of MSCCL++): ops per threadblock (checked at
# load), channels and remote-buffer references per threadblock and buffer entries per op (not
# checked: an overflow corrupts memory), semaphores per sem op.  Entries per op: 8 channels;
# src/dst lists hold 10 in v0.10 (2 local + 8 channel) but 8 in earlier v0.8+ sources, and the
# plans load on both (docs/mscclpp.md), so the lowering stays within 8.
MAX_OPS_PER_TB = 64
MAX_CHANNELS_PER_TB = 16
MAX_ENTRIES_PER_OP = 8
MAX_SEMS_PER_OP = 16
# Every threadblock must be resident at once (they spin on each other): stay within the
# SM count of the smallest GPU the runtime targets (80 SMs on V100; 104+ on A100/H100/MI300).
MAX_TBS_PER_GPU = 64

# Collectives the executor runs from a plan (the ``collective`` string it matches).
PLAN_COLLECTIVES = {CollKind.ALLREDUCE: "allreduce", CollKind.ALLGATHER: "allgather",
                    CollKind.REDUCESCATTER: "reducescatter", CollKind.BROADCAST: "broadcast",
                    CollKind.ALLTOALL: "alltoall"}

_BUF = {Buffer.INPUT: BufferType.INPUT, Buffer.OUTPUT: BufferType.OUTPUT, Buffer.SCRATCH: BufferType.SCRATCH}
_DATA_OPS = {OpName.PUT, OpName.PUT_WITH_SIGNAL, OpName.COPY, OpName.REDUCE, OpName.PUT_PACKETS, OpName.UNPACK_PACKETS,
             OpName.REDUCE_PACKETS, OpName.COPY_PACKETS, OpName.READ_PUT_PACKETS}


@dataclass(frozen=True)
class PlanOptions:
    chunks: int = 1
    instances: int = 1
    protocol: Protocol = Protocol.SIMPLE
    min_bytes: int = 0
    max_bytes: int = 0          # 0: no upper limit
    name: str = ""
    #: IPC domain of each rank (``Topology.ipc_domain``); empty: one domain.  A connection between
    #: two domains goes over a port channel (docs/mscclpp-backend.md "Across hosts").
    domains: tuple[int, ...] = ()
    #: refuse, before the ops are built, a plan whose check would follow more actors (0: no
    #: limit); a checked build passes the plan checker's limit, so a plan it cannot check is
    #: refused in seconds rather than after lowering, printing and reading it back
    max_actors: int = 0
    timings: dict[str, float] = field(default_factory=dict, compare=False)


def refusal(kind: CollKind) -> str | None:
    """Why the MSCCL++ executor cannot run ``kind`` from a plan, or None."""
    if kind in PLAN_COLLECTIVES:
        return None
    return (f"the mscclpp backend does not emit {kind.value}: MSCCL++ plans and its NCCL shim cover "
            f"{', '.join(sorted(PLAN_COLLECTIVES[k] for k in PLAN_COLLECTIVES))}")


def channel_kind(domains: Sequence[int], a: int, b: int) -> ChannelType:
    """The channel type of a connection between ranks ``a`` and ``b``: memory within an IPC domain
    (CUDA IPC), port between domains (the proxy's RDMA put)."""
    if domains and a < len(domains) and b < len(domains) and domains[a] != domains[b]:
        return ChannelType.PORT
    return ChannelType.MEMORY


# --------------------------------------------------------------------------- pass: pieces
MAX_RUNS_PER_PIECE = 16


def _run_starts(t: Transfer) -> list[int]:
    """Positions where a new contiguous (source, destination) run of ``t`` begins."""
    src, dst = list(t.src_idx), list(t.dst_idx)
    return [0] + [k for k in range(1, len(src)) if src[k] != src[k - 1] + 1 or dst[k] != dst[k - 1] + 1]


def split_pieces(schedule: Schedule) -> Schedule:
    """Cut a transfer of more than ``MAX_RUNS_PER_PIECE`` contiguous runs into pieces of that
    many (same step, same lane): each run is an op of its own on the receiver (``copy`` and
    ``re`` take one range), so a scattered transfer would not fit a threadblock's 64 ops; its
    pieces are separate transfers that the threadblocks pass deals out like any other."""
    out: list[Transfer] = []
    for t in schedule.transfers:
        starts = _run_starts(t)
        if len(starts) <= MAX_RUNS_PER_PIECE:
            out.append(t)
            continue
        src, dst = list(t.src_idx), list(t.dst_idx)
        bounds = starts[::MAX_RUNS_PER_PIECE] + [len(src)]
        for a, b in zip(bounds, bounds[1:]):
            out.append(replace(t, src_idx=make_slots(src[a:b]), dst_idx=make_slots(dst[a:b])))
    if len(out) == len(schedule.transfers):
        return schedule
    return replace(schedule, transfers=tuple(out))


# --------------------------------------------------------------------------- pass: slots
@dataclass(frozen=True, slots=True)
class Slotted:
    """A transfer with the first chunk of its own slot in the receiver's scratch (remote only)."""
    transfer: Transfer
    slot: int


def assign_slots(schedule: Schedule) -> tuple[tuple[Slotted, ...], tuple[int, ...]]:
    """Pass ``slots``: a private scratch range per remote transfer; returns the transfers and
    each rank's scratch chunk count (the schedule's own scratch first)."""
    n = schedule.collective.nranks
    top = [schedule.scratch_chunks] * n
    out: list[Slotted] = []
    for t in schedule.transfers:
        if t.is_local:
            out.append(Slotted(t, -1))
            continue
        out.append(Slotted(t, top[t.dst]))
        top[t.dst] += t.count
    return tuple(out), tuple(top)


# --------------------------------------------------------------------------- pass: threadblocks
class Role(IntEnum):
    SEND = 0
    RECV = 1
    LOCAL = 2


TbKey = tuple[Role, int, int, int]          # (role, peer, lane, group); peer = lane = -1... for LOCAL: (2, 0, 0, g)


class Phase(IntEnum):
    """Order of a step's actions on one rank: reads, then local transfers, then received writes."""
    PUT = 0
    LOCAL = 1
    RECV = 2


@dataclass(frozen=True, slots=True)
class Action:
    """What one threadblock of ``rank`` does for one transfer."""
    rank: int
    tb: TbKey
    order: tuple[int, int, tuple[int, int, int, int, int, int]]
    item: Slotted
    reads: frozenset[tuple[BufferType, int]]
    writes: frozenset[tuple[BufferType, int]]


def _phys(coll: Collective, rank: int, buf: Buffer, idx: Iterable[int]) -> list[tuple[BufferType, int]]:
    """``coll.physical`` of each index, the buffer's alias looked up once."""
    b, base = coll.alias(rank, buf)
    kind = _BUF[b]
    return [(kind, base + i) for i in idx]


GroupKey = tuple[int, int, int]     # (src, dst, lane) of a connection; (rank, rank, -1) for a rank's local tbs


def build_actions(coll: Collective, items: Sequence[Slotted], groups: Mapping[GroupKey, int]) -> list[list[Action]]:
    """Pass ``threadblocks``: each rank's actions in step order, each on its threadblock
    (a connection's or a rank's local transfers dealt round-robin to ``groups[key]`` tbs, default 1)."""
    n = coll.nranks
    per_rank: list[list[Action]] = [[] for _ in range(n)]
    conn_count: dict[tuple[int, int, int], int] = defaultdict(int)
    local_count = [0] * n
    for it in items:
        t = it.transfer
        key = t.sort_key()
        src = _phys(coll, t.src, t.src_buf, t.src_idx)
        dst = _phys(coll, t.dst, t.dst_buf, t.dst_idx)
        if t.is_local:
            g = local_count[t.src] % groups.get((t.src, t.src, -1), 1)
            local_count[t.src] += 1
            reads = set(src) | (set(dst) if t.op is XferOp.REDUCE else set())
            per_rank[t.src].append(Action(t.src, (Role.LOCAL, 0, 0, g), (t.step, Phase.LOCAL, key), it,
                                          frozenset(reads), frozenset(dst)))
            continue
        c = (t.src, t.dst, t.lane)
        g = conn_count[c] % groups.get(c, 1)
        conn_count[c] += 1
        per_rank[t.src].append(Action(t.src, (Role.SEND, t.dst, t.lane, g), (t.step, Phase.PUT, key), it,
                                      frozenset(src), frozenset()))
        reads = set(dst) if t.op is XferOp.REDUCE else set()
        per_rank[t.dst].append(Action(t.dst, (Role.RECV, t.src, t.lane, g), (t.step, Phase.RECV, key), it,
                                      frozenset(reads), frozenset(dst)))
    for acts in per_rank:
        acts.sort(key=lambda a: a.order)
        _check_local_steps(acts)
    return per_rank


def _check_local_steps(acts: Sequence[Action]) -> None:
    """Local transfers of one step must not read what another writes in that step: the
    Schedule reads the old value there, and a sequential order cannot give both."""
    by_step: dict[int, list[Action]] = defaultdict(list)
    for a in acts:
        if a.tb[0] is Role.LOCAL:
            by_step[a.order[0]].append(a)
    for step, group in by_step.items():
        sources = [b.reads - (b.writes if b.item.transfer.op is XferOp.REDUCE else frozenset()) for b in group]
        for a in group:
            for b, src in zip(group, sources):
                # two reduces into one chunk accumulate in either order; reading another's target does not
                if a is not b and a.writes & src:
                    raise LoweringError(f"rank {a.rank} step {step}: a local transfer writes chunks another local "
                                        f"transfer of the same step reads; the mscclpp backend cannot order them")


# --------------------------------------------------------------------------- pass: dependencies
@dataclass(frozen=True)
class Sync:
    """Semaphores of one rank: after action (tb, position) release ids; before it acquire ids."""
    releases: dict[tuple[TbKey, int], tuple[int, ...]]
    acquires: dict[tuple[TbKey, int], tuple[int, ...]]
    count: int


def dependencies(acts: Sequence[Action], host: Mapping[TbKey, TbKey] | None = None) -> Sync:
    """Pass ``dependencies``: cross-threadblock hazards on local chunks -> counting semaphores
    (``host`` maps a connection end to the threadblock that runs it, see ``pair_threadblocks``)."""
    where = host or {}
    tb_of = [where.get(a.tb, a.tb) for a in acts]
    position: dict[int, tuple[TbKey, int]] = {}
    per_tb: dict[TbKey, int] = defaultdict(int)
    for i, tb in enumerate(tb_of):
        position[i] = (tb, per_tb[tb])
        per_tb[tb] += 1
    last_write: dict[tuple[BufferType, int], int] = {}
    readers: dict[tuple[BufferType, int], list[int]] = defaultdict(list)
    needs: list[dict[TbKey, int]] = []          # per action: producer tb -> latest position needed
    for i, a in enumerate(acts):
        deps: set[int] = set()
        for s in a.reads:
            if s in last_write:
                deps.add(last_write[s])
        for s in a.writes:
            if s in last_write:
                deps.add(last_write[s])
            deps.update(readers.get(s, ()))
        need: dict[TbKey, int] = {}
        for d in deps:
            tb, pos = position[d]
            if tb != tb_of[i]:
                need[tb] = max(need.get(tb, -1), pos)
        needs.append(need)
        for s in a.reads:
            readers[s].append(i)
        for s in a.writes:
            last_write[s] = i
            readers[s] = []
    reached: dict[tuple[TbKey, TbKey], int] = {}
    sem_id: dict[tuple[TbKey, TbKey], int] = {}
    rel: dict[tuple[TbKey, int], list[int]] = defaultdict(list)
    acq: dict[tuple[TbKey, int], list[int]] = defaultdict(list)
    for i in range(len(acts)):
        for ptb, pos in sorted(needs[i].items()):
            pair = (ptb, tb_of[i])
            if pos <= reached.get(pair, -1):
                continue          # an earlier acquire of this pair already covers it
            reached[pair] = pos
            sid = sem_id.setdefault(pair, len(sem_id))
            rel[(ptb, pos)].append(sid)
            acq[position[i]].append(sid)
    return Sync({k: tuple(v) for k, v in rel.items()}, {k: tuple(v) for k, v in acq.items()}, len(sem_id))


# --------------------------------------------------------------------------- pass: pairing
def pair_threadblocks(acts: Sequence[Action], apart: frozenset[TbKey] = frozenset()) -> dict[TbKey, TbKey]:
    """Pass ``pairing``: run a receiving connection end and the sending end that forwards
    what it receives on one threadblock (the receive-reduce-send of a ring), as the MSCCL
    lowering pairs a tb's recv and send peers.  Within one tb the forward needs no semaphore
    pair and one ``nop`` less; the tb's ops stay in the rank's step order, so the plan still
    cannot deadlock (every action waits only for actions earlier in that order).

    Each send end takes the receive end whose writes its puts read most often (ties: the
    smaller keys), each end at most once; ends in ``apart`` stay alone (``lower_plan`` puts
    there the ends of a paired tb beyond 64 ops, before it splits crowded connections).
    Returns the host of every paired receive end (the send end's key)."""
    writer: dict[tuple[BufferType, int], TbKey] = {}
    score: dict[tuple[TbKey, TbKey], int] = defaultdict(int)
    for a in acts:
        if a.tb[0] is Role.SEND and a.tb not in apart:
            for c in a.reads:
                w = writer.get(c)
                if w is not None and w[0] is Role.RECV and w not in apart:
                    score[(w, a.tb)] += 1
        for c in a.writes:
            writer[c] = a.tb
    host: dict[TbKey, TbKey] = {}
    taken: set[TbKey] = set()
    for (recv, send), _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0])):
        if recv in host or send in taken:
            continue
        host[recv] = send
        taken.add(send)
    return host


# --------------------------------------------------------------------------- pass: ops
def _runs(pairs: Sequence[tuple[tuple[BufferType, int], tuple[BufferType, int]]]
          ) -> list[tuple[BufferType, int, BufferType, int, int]]:
    """Maximal runs where source and destination chunks both advance by one."""
    out: list[list[object]] = []
    for (sb, si), (db, di) in pairs:
        if out:
            r = out[-1]
            if r[0] == sb and r[2] == db and r[1] + r[4] == si and r[3] + r[4] == di:  # type: ignore[operator]
                r[4] += 1  # type: ignore[operator]
                continue
        out.append([sb, si, db, di, 1])
    return [(r[0], r[1], r[2], r[3], r[4]) for r in out]  # type: ignore[misc]


def _batches(items: Sequence[tuple[BufferType, int, BufferType, int, int]], k: int
             ) -> list[Sequence[tuple[BufferType, int, BufferType, int, int]]]:
    return [items[i:i + k] for i in range(0, len(items), k)]


def _port_send_ops(src: Sequence[tuple[BufferType, int]], scratch: Sequence[tuple[BufferType, int]],
                   ch: int) -> list[Op]:
    """A send over a port channel (Simple): the proxy's put into the receiver's slot and its signal
    (``pws`` for one range; ``put``s and a ``signal`` otherwise: a ``pws`` signals once per entry),
    then a ``flush`` naming the channel, so that the source may be overwritten afterwards, in this
    launch or the next (``pwsf`` flushes from MSCCL++ v0.10 only; docs/mscclpp.md "Port channels and
    releases")."""
    port = ChannelType.PORT
    runs = _runs(list(zip(src, scratch)))
    ops: list[Op] = []
    if len(runs) == 1:
        sb, si, _, di, sz = runs[0]
        ops.append(Op(OpName.PUT_WITH_SIGNAL, src_buff=(LocalBuff(sb, si, sz),), dst_buff=(RemoteBuff(0, di, sz),),
                      channel_ids=(ch,), channel_type=port))
    else:
        for batch in _batches(runs, MAX_ENTRIES_PER_OP):
            ops.append(Op(OpName.PUT, src_buff=tuple(LocalBuff(sb, si, sz) for sb, si, _, _, sz in batch),
                          dst_buff=tuple(RemoteBuff(0, di, sz) for _, _, _, di, sz in batch),
                          channel_ids=(ch,) * len(batch), channel_type=port))
        ops.append(Op(OpName.SIGNAL, channel_ids=(ch,), channel_type=port))
    _, _, _, di, sz = runs[0]
    ops.append(Op(OpName.FLUSH, dst_buff=(RemoteBuff(0, di, sz),), channel_ids=(ch,), channel_type=port))
    return ops


def _port_packet_ops(src: Sequence[tuple[BufferType, int]], slot: int, staging: int, ch: int,
                     reuse: bool) -> list[Op]:
    """A send over a port channel (LL): ``cpkt`` stages the data as packets (data and this launch's flag)
    in the sender's own scratch at ``staging``, then ``rppkt`` has the proxy copy that packet region,
    flags included, into the receiver's slot, where ``upkt``/``repkt`` poll the flags.  ``rppkt`` names
    the local scratch by the executor context's memory id (``ppkt`` on a port channel leaves the context's
    base out); its threads also wait for the staged flags.  The proxy reads the staging region after the
    op returns, so before ``cpkt`` writes it again (``reuse``) a ``flush`` naming the channel waits for
    the previous copy (docs/mscclpp.md "Packets across hosts")."""
    port = ChannelType.PORT
    count = len(src)
    ops: list[Op] = []
    if reuse:
        ops.append(Op(OpName.FLUSH, dst_buff=(RemoteBuff(0, slot, count),), channel_ids=(ch,), channel_type=port))
    stage = [(BufferType.SCRATCH, staging + j) for j in range(count)]
    for sb, si, db, di, size in _runs(list(zip(src, stage))):
        ops.append(Op(OpName.COPY_PACKETS, src_buff=(LocalBuff(sb, si, size),), dst_buff=(LocalBuff(db, di, size),)))
    ops.append(Op(OpName.READ_PUT_PACKETS, src_buff=(LocalBuff(BufferType.SCRATCH, staging, count),),
                  dst_buff=(RemoteBuff(0, slot, count),), channel_ids=(ch,), channel_type=port))
    return ops


def _action_ops(coll: Collective, a: Action, proto: Protocol, ch: int = 0,
                kind: ChannelType = ChannelType.MEMORY, staging: int = -1, reuse: bool = False) -> list[Op]:
    """The ops of one action; ``ch``: its connection's channel index (of type ``kind``) in the host tb;
    ``staging``: the first scratch chunk of its end's packet staging region (LL over a port channel),
    ``reuse``: whether an earlier action of that end staged there in this launch."""
    t = a.item.transfer
    role = a.tb[0]
    mem = kind
    src = _phys(coll, t.src, t.src_buf, t.src_idx)
    dst = _phys(coll, t.dst, t.dst_buf, t.dst_idx)
    ops: list[Op] = []
    if role is Role.LOCAL:
        for sb, si, db, di, size in _runs(list(zip(src, dst))):
            if t.op is XferOp.COPY:
                ops.append(Op(OpName.COPY, src_buff=(LocalBuff(sb, si, size),), dst_buff=(LocalBuff(db, di, size),)))
            else:
                ops.append(Op(OpName.REDUCE, src_buff=(LocalBuff(db, di, size), LocalBuff(sb, si, size)),
                              dst_buff=(LocalBuff(db, di, size),), reduce_op=ReduceOp.SUM))
        return ops
    scratch = [(BufferType.SCRATCH, a.item.slot + j) for j in range(t.count)]
    if role is Role.SEND and kind is ChannelType.PORT:
        if proto is Protocol.SIMPLE:
            return _port_send_ops(src, scratch, ch)
        if staging < 0:
            raise LoweringError(f"rank {t.src} -> rank {t.dst}: {proto.value} over a port channel needs a staging "
                                f"region in the sender's scratch")
        return _port_packet_ops(src, a.item.slot, staging, ch, reuse)
    if role is Role.SEND:
        name = OpName.PUT if proto is Protocol.SIMPLE else OpName.PUT_PACKETS
        for batch in _batches(_runs(list(zip(src, scratch))), MAX_ENTRIES_PER_OP):
            ops.append(Op(name, src_buff=tuple(LocalBuff(sb, si, sz) for sb, si, _, _, sz in batch),
                          dst_buff=tuple(RemoteBuff(0, di, sz) for _, _, _, di, sz in batch),
                          channel_ids=(ch,) * len(batch), channel_type=mem))
        if proto is Protocol.SIMPLE:
            ops.append(Op(OpName.SIGNAL, channel_ids=(ch,), channel_type=mem))
        return ops
    if proto is Protocol.SIMPLE:
        ops.append(Op(OpName.WAIT, channel_ids=(ch,), channel_type=mem))
    for sb, si, db, di, size in _runs(list(zip(scratch, dst))):
        s, d = LocalBuff(sb, si, size), LocalBuff(db, di, size)
        if t.op is XferOp.COPY:
            name = OpName.COPY if proto is Protocol.SIMPLE else OpName.UNPACK_PACKETS
            ops.append(Op(name, src_buff=(s,), dst_buff=(d,)))
        else:
            name = OpName.REDUCE if proto is Protocol.SIMPLE else OpName.REDUCE_PACKETS
            ops.append(Op(name, src_buff=(d, s), dst_buff=(d,), reduce_op=ReduceOp.SUM))
    return ops


def _sem_ops(name: OpName, ids: Sequence[int]) -> list[Op]:
    return [Op(name, semaphore_ids=tuple(ids[i:i + MAX_SEMS_PER_OP])) for i in range(0, len(ids), MAX_SEMS_PER_OP)]


def _local_chunks(op: Op) -> set[tuple[BufferType, int]]:
    out: set[tuple[BufferType, int]] = set()
    for b in op.srcs + op.dsts:
        if isinstance(b, LocalBuff):
            out.update((b.type, b.index + k) for k in range(b.size))
    return out


def insert_nops(ops: Sequence[Op]) -> tuple[Op, ...]:
    """A block-wide barrier where the executor has none but the threads must agree: the
    executor runs a tb's ops back to back, and signal/wait/semaphore ops use a few threads.

    A ``nop`` goes after a wait or acquire before data moves, after data moves before a
    signal or release, and before a data op touching chunks that a data op since the last
    barrier touched (its threads may still be at work on them)."""
    out: list[Op] = []
    pending: set[tuple[BufferType, int]] = set()     # chunks touched since the last barrier
    moved = False                                    # data moved since the last barrier
    for op in ops:
        data_now = op.name in _DATA_OPS
        prev = out[-1].name if out else None
        chunks = _local_chunks(op) if data_now else set()
        if (prev in (OpName.WAIT, OpName.SEM_ACQUIRE) and data_now) or \
           (prev is OpName.FLUSH and op.name is not OpName.NOP) or \
           (moved and op.name in (OpName.SIGNAL, OpName.SEM_RELEASE)) or \
           (data_now and chunks & pending):
            out.append(Op(OpName.NOP))
            pending, moved = set(), False
        out.append(op)
        if data_now:
            pending |= chunks
            moved = True
    return tuple(out)


def tb_ops(coll: Collective, key: TbKey, acts: Sequence[Action], sync: Sync, proto: Protocol,
           ends: Sequence[TbKey] = (), kinds: Mapping[TbKey, ChannelType] | None = None,
           staging: Mapping[TbKey, int] | None = None) -> tuple[Op, ...]:
    """Pass ``ops``: a threadblock's ops, semaphores around its actions and the closing
    acknowledgement of each connection end it runs (``ends``, in channel order; default: ``key``;
    ``kinds``: each end's channel type, default memory; ``staging``: the packet staging region of each
    LL sending end on a port channel).  Receiving ends acknowledge before sending ends wait, so a
    paired tb cannot block on itself; a sending end that staged packets flushes its channel before
    that, so that no copy of the proxy's is still reading the staging region when the tb ends."""
    ends = tuple(ends) or (key,)
    kind = {e: (kinds or {}).get(e, ChannelType.MEMORY) for e in ends if e[0] is not Role.LOCAL}
    ch: dict[TbKey, int] = {}
    for t in (ChannelType.MEMORY, ChannelType.PORT):      # tb-local indices count per channel type
        ch.update({e: i for i, e in enumerate(e for e in kind if kind[e] is t)})
    stage = staging or {}
    staged: dict[TbKey, Action] = {}                     # end -> its last staged action
    ops: list[Op] = []
    for pos, a in enumerate(acts):
        ops += _sem_ops(OpName.SEM_ACQUIRE, sync.acquires.get((key, pos), ()))
        ops += _action_ops(coll, a, proto, ch.get(a.tb, 0), kind.get(a.tb, ChannelType.MEMORY),
                           stage.get(a.tb, -1), a.tb in staged)
        if a.tb in stage and a.tb[0] is Role.SEND:
            staged[a.tb] = a
        ops += _sem_ops(OpName.SEM_RELEASE, sync.releases.get((key, pos), ()))
    for e, last in staged.items():
        ops.append(Op(OpName.FLUSH, dst_buff=(RemoteBuff(0, last.item.slot, last.item.transfer.count),),
                      channel_ids=(ch[e],), channel_type=ChannelType.PORT))
    for role, name in ((Role.RECV, OpName.SIGNAL), (Role.SEND, OpName.WAIT)):
        # back-pressure: the sender may write these slots again next launch
        for e in ends:
            if e[0] is role:
                ops.append(Op(name, channel_ids=(ch[e],), channel_type=kind[e]))
    return insert_nops(ops)


# --------------------------------------------------------------------------- assembly
def _pair_channels(per_rank: Sequence[Sequence[Action]], domains: Sequence[int] = ()) -> dict[tuple[int, TbKey], int]:
    """GPU-level channel index of each connection tb among the channels of its type (memory, or
    port between IPC domains): a pair's channels in one sorted order on both ends, so that the
    k-th channel a->b is the k-th b->a."""
    pair_keys: dict[tuple[int, int], set[tuple[int, int, int, int]]] = defaultdict(set)
    for acts in per_rank:
        for a in acts:
            role, peer, lane, g = a.tb
            if role is Role.LOCAL:
                continue
            sender, receiver = (a.rank, peer) if role is Role.SEND else (peer, a.rank)
            lo, hi = min(sender, receiver), max(sender, receiver)
            pair_keys[(lo, hi)].add((lane, g, 0 if sender == lo else 1, 0))
    index: dict[tuple[int, TbKey], int] = {}
    n = len(per_rank)
    for r in range(n):
        bases = {ChannelType.MEMORY: 0, ChannelType.PORT: 0}
        for p in range(n):
            if p == r:
                continue
            kind = channel_kind(domains, r, p)
            base = bases[kind]
            keys = sorted(pair_keys.get((min(r, p), max(r, p)), ()))
            lo = min(r, p)
            for k, (lane, g, direction, _) in enumerate(keys):
                sender_is_r = (r == lo) == (direction == 0)
                role = Role.SEND if sender_is_r else Role.RECV
                index[(r, (role, p, lane, g))] = base + k
            bases[kind] = base + len(keys)
    return index


def _gpu_channels(r: int, chan_index: dict[tuple[int, TbKey], int], domains: Sequence[int] = ()
                  ) -> tuple[Channel, ...]:
    """The memory channel list, then the port channel list (each only when it has channels)."""
    peers: dict[ChannelType, list[tuple[int, int]]] = {ChannelType.MEMORY: [], ChannelType.PORT: []}
    for (rank, key), i in chan_index.items():
        if rank == r:
            peers[channel_kind(domains, r, key[1])].append((i, key[1]))
    return tuple(Channel(kind, tuple(p for _, p in sorted(found))) for kind, found in peers.items() if found)


def staging_regions(acts: Sequence[Action], scratch: int, proto: Protocol, domains: Sequence[int] = ()
                    ) -> tuple[dict[TbKey, int], int]:
    """Pass ``staging`` (LL only): each sending end on a port channel gets a region of the sender's own
    scratch, after ``scratch`` chunks, as large as its largest transfer, where ``cpkt`` stages the packets
    that the proxy copies (``rppkt``); the end's transfers reuse it one after another, with a ``flush``
    before each reuse.  Returns the regions and the rank's scratch chunk count with them."""
    if proto is Protocol.SIMPLE:
        return {}, scratch
    need: dict[TbKey, int] = {}
    for a in acts:
        if a.tb[0] is Role.SEND and channel_kind(domains, a.rank, a.tb[1]) is ChannelType.PORT:
            need[a.tb] = max(need.get(a.tb, 0), a.item.transfer.count)
    out: dict[TbKey, int] = {}
    top = scratch
    for e in sorted(need):
        out[e] = top
        top += need[e]
    return out, top


def assemble_gpu(coll: Collective, rank: int, acts: Sequence[Action], scratch: int, proto: Protocol,
                 chan_index: dict[tuple[int, TbKey], int], apart: frozenset[GroupKey] = frozenset(),
                 domains: Sequence[int] = ()) -> tuple[Gpu, list[tuple[TbKey, ...]]]:
    """The GPU of ``rank`` and the connection ends each of its tbs runs (tb id = position);
    the ends of connections in ``apart`` are not paired."""
    staging, scratch = staging_regions(acts, scratch, proto, domains)
    host = pair_threadblocks(acts, frozenset(a.tb for a in acts if _group_key(rank, a.tb) in apart))
    sync = dependencies(acts, host)
    by_tb: dict[TbKey, list[Action]] = defaultdict(list)
    ends: dict[TbKey, set[TbKey]] = defaultdict(set)
    for a in acts:
        h = host.get(a.tb, a.tb)
        by_tb[h].append(a)
        ends[h].add(a.tb)
    keys = sorted(by_tb)
    targets = sorted({k[1] for k in keys if k[0] is Role.SEND})
    rb_index = {p: i for i, p in enumerate(targets)}
    tbs: list[Threadblock] = []
    out_ends: list[tuple[TbKey, ...]] = []
    for tid, key in enumerate(keys):
        mine = tuple(sorted(ends[key]))         # a send end (role 0) before its paired receive end
        kinds = {e: channel_kind(domains, rank, e[1]) for e in mine if e[0] is not Role.LOCAL}
        ops = tb_ops(coll, key, by_tb[key], sync, proto, mine, kinds, staging)
        chans: tuple[TbChannels, ...] = ()
        refs: tuple[TbRemoteBuffers, ...] = ()
        for t in (ChannelType.MEMORY, ChannelType.PORT):
            ids = tuple(chan_index[(rank, e)] for e in mine if kinds.get(e) is t)
            if ids:
                chans += (TbChannels(t, ids),)
        if key[0] is Role.SEND:
            refs = (TbRemoteBuffers(kinds[key], (rb_index[key[1]],)),)
        tbs.append(Threadblock(tid, ops, chans, refs))
        out_ends.append(mine)
    rbs = tuple(RemoteBuffer(p, BufferType.SCRATCH, (channel_kind(domains, rank, p),)) for p in targets)
    return Gpu(rank, coll.input_chunks, coll.output_chunks, scratch, tuple(tbs),
               _gpu_channels(rank, chan_index, domains), rbs,
               tuple(Semaphore(0) for _ in range(sync.count))), out_ends


def plan_name(schedule: Schedule) -> str:
    coll = schedule.collective
    root = f"-root{coll.root}" if coll.root is not None else ""
    return f"{schedule.provenance.algorithm}-{coll.kind.value}-n{coll.nranks}{root}"


def enforce_plan_limits(plan: Plan) -> None:
    """Pass ``limits``: raise LoweringError naming gpu and tb where a limit is broken
    (by construction none is, except ops per tb and tbs per GPU, which ``lower_plan`` retries)."""
    for g in plan.gpus:
        if len(g.threadblocks) > MAX_TBS_PER_GPU:
            raise LoweringError(f"gpu {g.id}: {len(g.threadblocks)} threadblocks, above {MAX_TBS_PER_GPU} "
                                f"(every tb must be resident at once): use fewer --chunks or --instances")
        for tb in g.threadblocks:
            where = f"gpu {g.id} tb {tb.id}"
            if len(tb.flat_ops()) > MAX_OPS_PER_TB:
                raise LoweringError(f"{where}: {len(tb.flat_ops())} ops, above the executor's {MAX_OPS_PER_TB}")
            for kind in (ChannelType.MEMORY, ChannelType.PORT):
                if len(tb.channel_list(kind)) > MAX_CHANNELS_PER_TB or len(tb.buffer_list(kind)) > MAX_CHANNELS_PER_TB:
                    raise LoweringError(f"{where}: more than {MAX_CHANNELS_PER_TB} {kind.value} channels or "
                                        f"remote buffers")
            for op in tb.flat_ops():
                if len(op.srcs) > MAX_ENTRIES_PER_OP or len(op.dsts) > MAX_ENTRIES_PER_OP or \
                        len(op.channels) > MAX_ENTRIES_PER_OP:
                    raise LoweringError(f"{where}: op {op.name.value} has more than {MAX_ENTRIES_PER_OP} entries")
                if any(b.size == 0 for b in op.srcs + op.dsts):
                    raise LoweringError(f"{where}: op {op.name.value} moves zero chunks")


OFFSET_LIMIT = 1 << 32


def size_cap(coll: Collective, scratch_chunks: int, proto: Protocol) -> int:
    """The largest message size whose byte offsets and sizes all fit the executor's 32 bits
    (the device plan's ``uint32_t`` offsets): the default ``max_message_size``."""
    ci = coll.input_chunks
    widest = max(ci, coll.output_chunks, scratch_chunks * (2 if proto is Protocol.LL else 1))
    in_bytes = (OFFSET_LIMIT - 1) * ci // widest
    size = in_bytes * coll.nranks if coll.kind is CollKind.ALLGATHER else in_bytes
    return min(size, OFFSET_LIMIT - 1)


def _group_key(rank: int, key: TbKey) -> GroupKey:
    role, peer, lane, _ = key
    if role is Role.LOCAL:
        return (rank, rank, -1)
    return (rank, peer, lane) if role is Role.SEND else (peer, rank, lane)


class PlanTooLarge(LoweringError):
    """The plan's check would follow more actors than it can (``PlanOptions.max_actors``); the
    other way of fitting threadblocks would not be smaller, so ``lower_plan`` does not try it."""


def least_actors(per_rank: Sequence[Sequence[Action]], domains: Sequence[int] = ()) -> int:
    """A lower bound on the actors the plan checker's simulation follows (2 per threadblock, 1
    per GPU and port-channel peer), from the connection ends alone: pairing puts at most one
    receiving end on each sending end's tb, so a rank runs at least max(send, receive) ends'
    tbs plus its local ones."""
    total = 0
    for rank, acts in enumerate(per_rank):
        ends = {a.tb for a in acts}
        roles = [k[0] for k in ends]
        tbs = max(roles.count(Role.SEND), roles.count(Role.RECV)) + roles.count(Role.LOCAL)
        ports = {k[1] for k in ends if k[0] is not Role.LOCAL
                 and channel_kind(domains, rank, k[1]) is ChannelType.PORT}
        total += 2 * tbs + 1 + len(ports)
    return total


def _fit_threadblocks(coll: Collective, items: Sequence[Slotted], scratch: Sequence[int], proto: Protocol,
                      unpair_first: bool, spent: dict[str, float], domains: Sequence[int] = (),
                      max_actors: int = 0) -> tuple[tuple[Gpu, ...], bool]:
    """Passes ``threadblocks`` to ``ops`` until every tb fits the executor's 64 ops: a paired tb
    beyond it runs its ends apart again (if ``unpair_first``), else crowded connections (both
    ends) take more tbs (the power of two that would bring the longest to 64 ops, at least
    twice as many).  Also returns whether some paired tb was too long (else the two ways agree)."""
    clock = time.process_time     # CPU seconds (collc.clock: the machines are shared)
    paired_over = False
    groups: dict[GroupKey, int] = {}
    apart: set[tuple[int, GroupKey]] = set()     # (rank, connection) whose ends run unpaired
    while True:
        a = clock()
        per_rank = build_actions(coll, items, groups)
        least = least_actors(per_rank, domains) if max_actors else 0
        if least > max_actors:
            raise PlanTooLarge(f"the plan's check would follow at least {least} actors (2 per threadblock, 1 per "
                                f"GPU and port channel), more than the {max_actors} collc checks (its vector "
                                f"clocks hold actors^2 entries): build it for fewer ranks, or use the xml backend")
        chan_index = _pair_channels(per_rank, domains)
        b = clock()
        built = [assemble_gpu(coll, r, per_rank[r], scratch[r], proto, chan_index,
                              frozenset(gk for rank, gk in apart if rank == r), domains)
                 for r in range(coll.nranks)]
        gpus = tuple(g for g, _ in built)
        spent["threadblocks"] += b - a
        spent["ops"] += clock() - b
        over = [(len(tb.flat_ops()), g.id, tb.id, ends[tb.id]) for g, ends in built for tb in g.threadblocks
                if len(tb.flat_ops()) > MAX_OPS_PER_TB]
        if not over:
            return gpus, paired_over
        paired = {(g, _group_key(g, e)) for _, g, _, ends in over if len(ends) > 1 for e in ends}
        paired_over = paired_over or bool(paired)
        if unpair_first and paired - apart:
            apart |= paired
            continue
        crowded = sorted({_group_key(g, e) for _, g, _, ends in over for e in ends})
        most_tbs = max(len(g.threadblocks) for g in gpus)
        worst = max(over)
        if most_tbs >= MAX_TBS_PER_GPU or any(groups.get(gk, 1) >= 64 for gk in crowded):
            raise LoweringError(f"gpu {worst[1]} tb {worst[2]} needs {worst[0]} ops, above the executor's "
                                f"{MAX_OPS_PER_TB} per threadblock, and spreading its transfers over more "
                                f"threadblocks would exceed {MAX_TBS_PER_GPU} per GPU: use fewer --chunks or "
                                f"--instances")
        need: dict[GroupKey, int] = {}
        for n_ops, g, _, ends in over:
            for e in ends:
                gk = _group_key(g, e)
                need[gk] = max(need.get(gk, 2), 1 << (-(-n_ops // MAX_OPS_PER_TB) - 1).bit_length())
        for gk in crowded:      # only the crowded connections (both ends) take more tbs
            groups[gk] = min(groups.get(gk, 1) * need[gk], 64)
        apart = {(r, gk) for r, gk in apart if gk not in crowded}     # smaller groups may pair again


def lower_plan(schedule: Schedule, opts: PlanOptions = PlanOptions()) -> Plan:
    """Lower ``schedule`` to a checked-by-construction MSCCL++ plan (see the module docstring)."""
    why = refusal(schedule.collective.kind)
    if why is not None:
        raise LoweringError(why)
    clock = time.process_time     # CPU seconds (collc.clock: the machines are shared)
    t0 = clock()
    # split_chunks works on the transfer table (collc.compiler.transfers); this lowering reads
    # Transfer objects, so the table is read back, where there is something to split
    whole = opts.chunks == opts.instances == 1
    sched = split_pieces(schedule if whole else
                         split_chunks(TransferTable.of(schedule), opts.chunks, opts.instances).schedule())
    coll = sched.collective
    t1 = clock()
    items, scratch = assign_slots(sched)
    t2 = clock()
    spent = {"threadblocks": 0.0, "ops": 0.0, "limits": 0.0}     # ops include the dependencies pass
    # Two ways to fit a paired tb that grew beyond 64 ops: run its ends apart again, or split
    # its connections into more groups; keep the plan with fewer tbs, then fewer ops.
    fits: list[tuple[int, int, int, tuple[Gpu, ...]]] = []
    failure: LoweringError | None = None
    for k, unpair_first in enumerate((True, False)):
        try:
            gpus, paired_over = _fit_threadblocks(coll, items, scratch, opts.protocol, unpair_first, spent,
                                                  opts.domains, opts.max_actors)
        except PlanTooLarge:
            raise
        except LoweringError as e:
            failure = failure or e
            continue
        fits.append((sum(len(g.threadblocks) for g in gpus),
                     sum(len(tb.flat_ops()) for g in gpus for tb in g.threadblocks), k, gpus))
        if not paired_over:
            break               # no paired tb was too long: the other way builds the same plan
    if not fits:
        assert failure is not None
        raise failure
    gpus = min(fits)[3]
    cap = size_cap(coll, max((g.scratch_chunks for g in gpus), default=0), opts.protocol)   # staging included
    if opts.max_bytes > cap or opts.min_bytes > cap:
        raise LoweringError(f"message sizes above {cap} bytes: this plan's buffers would need offsets of 4 GiB "
                            f"or more, which the executor holds in 32 bits")
    plan = Plan(name=opts.name or plan_name(schedule), collective=PLAN_COLLECTIVES[coll.kind],
                protocol=opts.protocol, inplace=coll.inplace, gpus=gpus,
                min_message_size=opts.min_bytes, max_message_size=opts.max_bytes or cap)
    d = clock()
    enforce_plan_limits(plan)
    spent["limits"] = clock() - d
    opts.timings.update(pipelining=t1 - t0, slots=t2 - t1, **spent)
    return plan
