"""The lowering pipeline: an explicit, ordered tuple of named passes.

``lower(schedule, options)`` runs::

    pipelining -> scratch -> channels -> threadblocks -> fusion -> dependencies -> limits

and returns a ``Program``.  After the scratch pass the remaining passes depend only on
one rank's ops, so ``lower`` runs them rank by rank (``channel_ops``,
``rank_threadblocks``, ``fuse_rank``, ``build_gpu``): only one rank's intermediate plans
are alive at a time, which keeps a 4096-rank lowering in memory.  The whole-plan forms
(``assign_threadblocks``, ``fuse``, ``build_program``) remain for tests and tools.
The channel pass is retried with more channel groups
while some tb exceeds the dialect's per-tb step limit.  Threadblocks pair a
receive peer with a send peer when that enables fusion; if the executor model
(``collc.compiler.verify.simulate``, no data) finds that pairing blocks, the
program is rebuilt with separate send and receive threadblocks, which cannot.  ``timings`` (if given)
receives the seconds spent per pass; ``verify_between`` runs the Schedule verifier
after the Schedule-level pass (used by the tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from collc.compiler.dependencies import build_gpu
from collc.compiler.fusion import fuse_rank
from collc.compiler.limits import LIMITS, Dialect, connection_steps_per_tb, parser_nodes
from collc.compiler.pipelining import cap_counts, split_chunks
from collc.compiler.program import Gpu, Program, Proto
from collc.compiler.scratch import Kind, OpPlan, RankOp, expand
from collc.compiler.threadblocks import channel_ops, peer_spread, rank_threadblocks
from collc.compiler.verify import simulate, size_model
from collc.errors import LoweringError, NodeBudgetError
from collc.ir.schedule import Schedule
from collc.ir.verify import verify_schedule

PASSES = ("pipelining", "scratch", "channels", "threadblocks", "fusion", "dependencies", "limits")


@dataclass(frozen=True)
class LowerOptions:
    chunks: int = 1
    instances: int = 1
    proto: Proto = Proto.SIMPLE
    dialect: Dialect = Dialect.EXECUTOR
    min_bytes: int = 0
    max_bytes: int = 0
    pair: bool = True
    check_pairing: bool = True   # simulate flow control to decide pairing (callers that check anyway skip it)
    shard: bool = False          # one file per rank will be written: no 1024-<gpu> file limit
    name: str = ""
    on_rank: Callable[[int, int], None] | None = field(default=None, compare=False)  # (ranks done, of)
    verify_between: bool = False
    timings: dict[str, float] = field(default_factory=dict, compare=False)


def program_name(schedule: Schedule) -> str:
    coll = schedule.collective
    root = f"-root{coll.root}" if coll.root is not None else ""
    return f"{schedule.provenance.algorithm}-{coll.kind.value}-n{coll.nranks}{root}"


def lower(schedule: Schedule, opts: LowerOptions = LowerOptions()) -> Program:
    clock = time.perf_counter
    t0 = clock()
    lim = LIMITS[opts.dialect]
    sched = cap_counts(split_chunks(schedule, opts.chunks, opts.instances), lim.max_cnt)
    if opts.verify_between:
        verify_schedule(sched)
    t1 = clock()
    plan = expand(sched)
    coll, lanes, ordered = sched.collective, sched.lanes, sched.ordered_sends
    hints: list[dict[tuple[int, int], int]] = [{} for _ in range(coll.nranks)]
    for rank, lane, rpeer, speer in sched.tb_pairs:
        hints[rank][(lane, rpeer)] = speer
    synced: list[frozenset[int]] = [frozenset() for _ in range(coll.nranks)]
    for src, dst in sched.step_sync:
        synced[src] |= {dst}
    replies: list[frozenset[int]] = [frozenset() for _ in range(coll.nranks)]
    for src, dst in sched.step_reply:
        replies[src] |= {dst}
    del sched      # the ops hold all that later passes need (memory at 4096 ranks)
    t2 = clock()
    spread = peer_spread(plan.ops, coll.nranks)
    if spread > 1 and lanes * spread > lim.max_channels:
        raise LoweringError(f"a rank has more than 32 send or receive peers per channel: spreading them needs "
                            f"{lanes * spread} channels, above the {opts.dialect.value} limit of "
                            f"{lim.max_channels}")
    most = max(1, lim.max_channels // (lanes * spread))
    if any(hints):
        # hinted pairs fuse only where nothing else of the tb comes between the receive and the
        # send: spread over as many channels as the dialect's channels and tbs allow
        per_group = max(len(h) for h in hints)      # paired tbs per rank and channel group
        groups = max(1, min(most, lim.max_tbs_per_gpu // per_group))
    else:
        groups = estimate_groups(plan, lim.max_steps_per_tb, most)
    spent = {"channels": 0.0, "threadblocks": 0.0, "fusion": 0.0, "dependencies": 0.0}
    by_rank: list[list[RankOp]] = [[] for _ in range(coll.nranks)]
    for op in plan.ops:
        by_rank[op.rank].append(op)
    name = opts.name or program_name(schedule)

    def assign(pair: bool, groups: int) -> Program:
        # rank by rank, so that only one rank's intermediate plans are alive at a time
        while True:
            gpus: list[Gpu] = []
            nchannels = 1
            worst = (0, 0, 0)
            every = max(1, coll.nranks // 100)
            for rank in range(coll.nranks):
                if opts.on_rank is not None and rank % every == 0:
                    opts.on_rank(rank, coll.nranks)
                a = clock()
                chops = channel_ops(by_rank[rank], groups, spread, coll.nranks)
                b = clock()
                tbs = rank_threadblocks(rank, chops, pair, hints[rank])
                c = clock()
                fused = fuse_rank(coll, rank, tbs)
                d = clock()
                gpu = build_gpu(coll, rank, fused, plan.scratch[rank], synced[rank], ordered, replies[rank])
                e = clock()
                for k, v in zip(spent, (b - a, c - b, d - c, e - d)):
                    spent[k] += v
                nchannels = max([nchannels] + [t.chan + 1 for t in tbs])
                worst = max([worst] + [(len(t.steps), gpu.id, t.id) for t in gpu.tbs])
                if worst[0] > lim.max_steps_per_tb:
                    break
                gpus.append(gpu)
            else:
                return Program(name=name, proto=opts.proto, nchannels=nchannels,
                               nchunksperloop=coll.nchunksperloop, ngpus=coll.nranks, coll=coll.kind.value,
                               inplace=int(schedule.collective.inplace),
                               outofplace=int(not schedule.collective.inplace), min_bytes=opts.min_bytes,
                               max_bytes=opts.max_bytes, gpus=tuple(gpus))
            if lanes * spread * (groups + 1) > lim.max_channels:
                raise LoweringError(f"gpu {worst[1]} tb {worst[2]} needs {worst[0]} steps, above the "
                                    f"{opts.dialect.value} limit of {lim.max_steps_per_tb} per tb, even spread "
                                    f"over {lanes * spread * groups} channels: use fewer --chunks or --instances")
            groups = min(2 * groups, lim.max_channels // (lanes * spread))

    prog = assign(opts.pair, groups)
    if opts.pair and opts.check_pairing and any(t.send >= 0 and t.recv >= 0 for g in prog.gpus for t in g.tbs):
        # Paired tbs put a step's sends before its receives; when a step sends more pieces than
        # a connection holds, a cycle of such tbs can block.  Separate send and receive tbs,
        # each in step order, cannot: fall back to them when the executor model says so.
        a = clock()
        model = size_model(opts.proto, prog.nchunksperloop, opts.max_bytes or None)
        blocked = not simulate(prog, coll, model, data=False, races=False).finished
        spent["threadblocks"] += clock() - a  # the pairing decision belongs to that pass
        if blocked:
            prog = assign(False, groups)
    f = clock()
    enforce_limits(prog, opts.dialect, opts.shard)
    g_ = clock()
    opts.timings.update(pipelining=t1 - t0, scratch=t2 - t1, **spent, limits=g_ - f)
    return prog


def estimate_groups(plan: OpPlan, max_steps: int, most: int) -> int:
    """Smallest power-of-two channel-group count whose busiest connection fits in one tb
    (at most ``most``, the groups that the dialect's channels allow for the lanes).

    A lower bound on the tb program (nops and unfused pairs come on top); ``lower``
    doubles further if the real program still exceeds the limit.
    """
    remote = [op for op in plan.ops if op.kind is Kind.SEND or op.kind is Kind.RECV]
    if not remote:
        return 1
    conn: dict[tuple[int, int, int, bool], int] = {}
    ids = np.fromiter((conn.setdefault((op.rank, op.peer, op.lane, op.kind is Kind.SEND), len(conn))
                       for op in remote), dtype=np.int64, count=len(remote))
    chunks = np.fromiter((op.chunk for op in remote), dtype=np.int64, count=len(remote))
    groups = 1
    while groups < most:
        if np.bincount(ids * groups + chunks % groups).max() <= connection_steps_per_tb(max_steps):
            break
        groups = min(2 * groups, most)   # powers of two, then as many as the channels allow
    return groups


def enforce_limits(prog: Program, dialect: Dialect, shard: bool = False) -> None:
    """Raise LoweringError naming the first limit the program breaks, with gpu and tb."""
    lim = LIMITS[dialect]
    gpus_per_file = 1 if shard else prog.ngpus
    if prog.nchannels > lim.max_channels:
        raise LoweringError(f"{prog.nchannels} channels exceed the {dialect.value} limit of {lim.max_channels}")
    if gpus_per_file > lim.max_children:
        raise LoweringError(f"{prog.ngpus} ranks: one file holds at most {lim.max_children} <gpu> elements "
                            f"(the real parser overflows beyond); use --shard-per-rank")
    for g in prog.gpus:
        if len(g.tbs) > lim.max_tbs_per_gpu:
            raise LoweringError(f"gpu {g.id}: {len(g.tbs)} tbs exceed the {dialect.value} limit of "
                                f"{lim.max_tbs_per_gpu} per GPU")
        nsteps = sum(len(t.steps) for t in g.tbs)
        nodes = parser_nodes(gpus_per_file, len(g.tbs), nsteps)
        if nodes > lim.max_nodes_per_rank:
            hint = ("; one file per rank (--shard-per-rank) would fit"
                    if not shard and parser_nodes(1, len(g.tbs), nsteps) <= lim.max_nodes_per_rank else "")
            raise NodeBudgetError(f"gpu {g.id}: {nodes} parser nodes (<algo>, {gpus_per_file} <gpu>, {len(g.tbs)} "
                                f"<tb>, {nsteps} <step>); the runtime's parser loads at most "
                                f"{lim.max_nodes_per_rank} per rank{hint}")
        if g.s_chunks > lim.max_offset or g.i_chunks > lim.max_offset + 1 or g.o_chunks > lim.max_offset + 1:
            raise LoweringError(f"gpu {g.id}: buffers of {max(g.i_chunks, g.o_chunks, g.s_chunks)} chunks exceed "
                                f"the int16 offset limit {lim.max_offset}")
        per_chan: dict[tuple[int, str], int] = {}
        for t in g.tbs:
            for role, peer in (("send", t.send), ("recv", t.recv)):
                if peer >= 0:
                    per_chan[(t.chan, role)] = per_chan.get((t.chan, role), 0) + 1
            if t.id > lim.max_depid and any(s.depid == t.id for u in g.tbs for s in u.steps):
                targets = len({s.depid for u in g.tbs for s in u.steps if s.depid >= 0})
                raise LoweringError(f"gpu {g.id} tb {t.id}: a dependency targets tb id above {lim.max_depid} "
                                    f"(depid is an int8 in the runtime; {targets} tbs of this rank are "
                                    f"dependency targets): use fewer --instances or --chunks")
            for s in t.steps:
                if s.cnt > lim.max_cnt:
                    raise LoweringError(f"gpu {g.id} tb {t.id} step {s.s}: cnt {s.cnt} exceeds {lim.max_cnt}")
        for (chan, role), count in per_chan.items():
            if count > lim.max_tbs_per_channel:
                raise LoweringError(f"gpu {g.id}: chan {chan} has {count} {role} tbs, above "
                                    f"{lim.max_tbs_per_channel} per channel")
