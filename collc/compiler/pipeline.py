"""The lowering pipeline: an explicit, ordered tuple of named passes and the runner over them.

``PASSES`` is::

    pipelining -> scratch -> channels -> threadblocks -> fusion -> dependencies -> limits

(xDSL's ``PassPipeline``, sqlglot's ``RULES``).  Each :class:`Pass` is a frozen object
with a name and a pure ``run(ir, context) -> ir``; ``scope`` says whether it runs once
on the whole IR or once per rank.  After ``scratch`` every pass depends only on one
rank's ops and on a few program-wide decisions made once (the :class:`Layout`: channel
groups, peer spread, tb pairing hints), so :func:`run_pipeline` runs the per-rank
passes on runs of ranks -- in ``jobs`` worker processes when asked -- and only one run's
intermediate IR is alive at a time.  ``pipelining`` reads the Schedule's transfers into
columns once (:mod:`collc.compiler.transfers`) and ``scratch`` expands those; the IR after
``scratch`` is columns too (numpy arrays, one entry per op, item or step:
:mod:`collc.compiler.optable`), so a run of ranks is one set of arrays whose every key names the rank: the ranks of a run are lowered together but each on
its own.  The result does not depend on ``jobs`` or on the runs: ranks are lowered
independently and gathered in rank order.

The runner times each pass (per-rank passes: seconds summed over ranks and workers),
renders the IR after any named pass (``dump``: :mod:`collc.compiler.dump`) and, with
``verify_between``, checks each pass's invariants on its output (the tests turn it on).
The channel groups are doubled while some tb exceeds the dialect's per-tb step limit.
Threadblocks pair a receive peer with a send peer when ``pair`` is set (it enables
fusion), and only where the pair cannot block at the window's top size
(``collc.compiler.msccl.threadblocks``, "Safe pairs"), so one lowering serves: lowering never
runs the checker.

``lower(schedule, options)`` returns the ``Program``; :func:`run_pipeline` can also
print each rank's text in the workers (``emit``) and keep only some ranks (``ranks``),
which is how ``collc build --shard-per-rank --ranks A-B`` builds one node's shards.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from collc.arrays import unique
from collc.compiler.buffering import SizeModel, size_model, window_top
from collc.compiler.msccl.dependencies import GpuTable, build_gpus
from collc.compiler.dump import show_chops, show_gpu, show_op, show_plan, show_program_header, show_schedule, show_tbs
from collc.compiler.msccl.fusion import ItemTable, fuse_tbs
from collc.limits import LIMITS, Dialect, connection_steps_per_tb, parser_nodes
from collc.compiler.optable import RECV, SEND, Ints, OpTable
from collc.compiler.pipelining import cap_counts, split_chunks
from collc.compiler.msccl.program import Gpu, Program, Proto
from collc.compiler.scratch import Kind, OpPlan, expand
from collc.compiler.transfers import TransferTable
from collc.compiler.msccl.threadblocks import ChannelOps, TbTable, channel_ops, peer_spread, threadblocks
from collc.errors import CollcError, EmitError, LoweringError, NodeBudgetError
from collc.ir.collective import Collective
from collc.ir.schedule import Schedule
from collc.ir.verify import verify_schedule


@dataclass(frozen=True)
class LowerOptions:
    chunks: int = 1
    instances: int = 1
    proto: Proto = Proto.SIMPLE
    dialect: Dialect = Dialect.EXECUTOR
    min_bytes: int = 0
    max_bytes: int = 0
    pair: bool = True
    shard: bool = False          # one file per rank will be written: no 1024-<gpu> file limit
    name: str = ""
    on_rank: Callable[[int, int], None] | None = field(default=None, compare=False)  # (ranks done, of)
    verify_between: bool = False  # check each pass's invariants on its output
    jobs: int = 1                # worker processes for the per-rank passes (1: in this process)
    dump: frozenset[str] = frozenset()   # passes after which to render the IR (run_pipeline's dumps)
    timings: dict[str, float] = field(default_factory=dict, compare=False)


# --------------------------------------------------------------------------- the passes
@dataclass(frozen=True)
class Layout:
    """The program-wide decisions the per-rank passes share (made once, after ``scratch``)."""

    coll: Collective
    groups: int                                  # channel groups per lane
    spread: int                                  # channels each group is split into (peers per channel)
    pair: bool                                   # pair a receive peer with a send peer in one tb
    hints: tuple[dict[tuple[int, int], int], ...]  # per rank: (lane, recv peer) -> send peer to pair
    scratch: tuple[int, ...]                     # scratch chunks per rank
    dialect: Dialect
    shard: bool
    synced: tuple[frozenset[int], ...] = ()      # per rank: send peers in the schedule's step_sync
    ordered_sends: bool = False                  # the schedule's ordered_sends hint
    replies: tuple[frozenset[int], ...] = ()     # per rank: send peers in the schedule's step_reply
    buffering: SizeModel | None = None           # the slicing at the window's top: which pairs are safe


@dataclass(frozen=True)
class RankContext:
    """The ranks a run of the per-rank passes lowers together (ascending; one rank when the
    passes' IR is checked or rendered: ``check`` and ``show`` read one rank's)."""

    layout: Layout
    ranks: tuple[int, ...]

    @property
    def rank(self) -> int:
        return self.ranks[0]


@dataclass(frozen=True)
class Pass:
    """One named lowering pass: ``run(ir, context)`` returns the next IR and never mutates its input.

    ``scope`` is ``"program"`` (run once; context: the options) or ``"rank"`` (run once per
    rank; context: a :class:`RankContext`).  ``check`` (the invariants of its output) and
    ``show`` (the text of its output) serve ``verify_between`` and ``dump``.
    """

    name: str
    scope: str
    doc: str
    run: Callable[[Any, Any], Any]
    check: Callable[[Any, Any], None]
    show: Callable[[Any, Any], list[str]]


def _pipelining(s: Schedule, opts: LowerOptions) -> TransferTable:
    # the Schedule's transfers are read into columns here, once: the program passes work on them
    table = TransferTable.of(s)
    return cap_counts(split_chunks(table, opts.chunks, opts.instances), LIMITS[opts.dialect].max_cnt)


def _scratch(t: TransferTable, opts: LowerOptions) -> OpPlan:
    return expand(t)


def _channels(ops: OpTable, ctx: RankContext) -> ChannelOps:
    lay = ctx.layout
    return channel_ops(ops, lay.groups, lay.spread, lay.coll.nranks)


def _threadblocks(chops: ChannelOps, ctx: RankContext) -> TbTable:
    lay = ctx.layout
    return threadblocks(chops, lay.pair, lay.hints, lay.buffering)


def _fusion(tbs: TbTable, ctx: RankContext) -> ItemTable:
    return fuse_tbs(ctx.layout.coll, tbs)


def _dependencies(tbs: ItemTable, ctx: RankContext) -> list[GpuTable]:
    lay = ctx.layout
    return build_gpus(lay.coll, ctx.ranks, tbs, lay.scratch, lay.synced, lay.ordered_sends, lay.replies)


def _limits(gpus: list[GpuTable], ctx: RankContext) -> list[GpuTable]:
    lay = ctx.layout
    for gpu in gpus:
        gpu_limits(gpu, lay.dialect, 1 if lay.shard else lay.coll.nranks)
    return gpus


def _fail(name: str, msg: str) -> LoweringError:
    return LoweringError(f"invariant broken after pass {name}: {msg}")


def _check_schedule(t: TransferTable, opts: LowerOptions) -> None:
    verify_schedule(t.schedule())


def _check_plan(plan: OpPlan, opts: LowerOptions) -> None:
    """Every op has contiguous operands of cnt >= 1; every send has its receive (same key and count)."""
    ends: dict[tuple[int, int, tuple[int, ...], int], int] = {}
    for op in plan.ops:
        if op.cnt < 1:
            raise _fail("scratch", f"{show_op(op)}: cnt below 1")
        if op.kind is Kind.SEND:
            k = (op.rank, op.peer, op.key, op.cnt)
            ends[k] = ends.get(k, 0) + 1
        elif op.kind is Kind.RECV:
            k = (op.peer, op.rank, op.key, op.cnt)
            ends[k] = ends.get(k, 0) - 1
    bad = sorted(k for k, v in ends.items() if v)
    if bad:
        src, dst, key, cnt = bad[0]
        raise _fail("scratch", f"{len(bad)} messages without both ends, first {src}->{dst} key {key} cnt {cnt}")
    if len(plan.scratch) != plan.collective.nranks or min(plan.scratch, default=0) < 0:
        raise _fail("scratch", f"scratch sizes {list(plan.scratch)[:8]} do not fit {plan.collective.nranks} ranks")


def _check_channels(chops: ChannelOps, ctx: RankContext) -> None:
    top = LIMITS[ctx.layout.dialect].max_channels
    for c in chops:
        if c.op.rank != ctx.rank or not 0 <= c.chan < top:
            raise _fail("channels", f"rank {ctx.rank}: {show_op(c.op)} on channel {c.chan} (0..{top - 1})")


def _check_threadblocks(table: TbTable, ctx: RankContext) -> None:
    tbs = table.views()
    seen: set[tuple[int, ...]] = set()
    for k, t in enumerate(tbs):
        where = f"rank {ctx.rank} tb {k}"
        if any(c.chan != t.chan for c in t.ops):
            raise _fail("threadblocks", f"{where}: an op of another channel than the tb's {t.chan}")
        for c in t.ops:
            if c.op.kind is Kind.SEND and c.op.peer != t.send or c.op.kind is Kind.RECV and c.op.peer != t.recv:
                raise _fail("threadblocks", f"{where}: {show_op(c.op)} does not match send={t.send} recv={t.recv}")
        pos = [c.op.pos for c in t.ops]
        if pos != sorted(pos):
            raise _fail("threadblocks", f"{where}: ops out of logical order")
        seen.update(pos)
        if len(seen) < sum(len(u.ops) for u in tbs[:k + 1]):
            raise _fail("threadblocks", f"{where}: an op placed twice")


def _check_fusion(tbs: ItemTable, ctx: RankContext) -> None:
    for k, t in enumerate(tbs):
        pos = [i.position for i in t.items]
        if pos != sorted(pos) or len(set(pos)) != len(pos):
            raise _fail("fusion", f"rank {ctx.rank} tb {k}: items out of logical order")


def _check_gpu(name: str) -> Callable[[list[GpuTable], RankContext], None]:
    def check(tables: list[GpuTable], ctx: RankContext) -> None:
        for table in tables:
            one(table.to_gpu(), replace(ctx, ranks=(table.id,)))

    def one(gpu: Gpu, ctx: RankContext) -> None:
        """Step numbers are positions; every dependency names an earlier-placed step of another
        tb of this rank, which carries hasdep."""
        if gpu.id != ctx.rank or [t.id for t in gpu.tbs] != list(range(len(gpu.tbs))):
            raise _fail(name, f"rank {ctx.rank}: gpu id {gpu.id} or tb ids not 0..{len(gpu.tbs) - 1}")
        for t in gpu.tbs:
            for k, s in enumerate(t.steps):
                where = f"gpu {gpu.id} tb {t.id} step {k}"
                if s.s != k:
                    raise _fail(name, f"{where}: s={s.s}")
                if s.depid >= 0:
                    if s.depid == t.id or s.depid >= len(gpu.tbs) or not 0 <= s.deps < len(gpu.tbs[s.depid].steps):
                        raise _fail(name, f"{where}: dependency on tb {s.depid} step {s.deps} does not exist")
                    if not gpu.tbs[s.depid].steps[s.deps].hasdep:
                        raise _fail(name, f"{where}: its target tb {s.depid} step {s.deps} lacks hasdep")
    return check


def _show_rank(render: Callable[[Any], list[str]], title: str) -> Callable[[Any, RankContext], list[str]]:
    return lambda ir, ctx: [f"{title} rank {ctx.rank}"] + render(ir)


PASSES: tuple[Pass, ...] = (
    Pass("pipelining", "program", "split chunks into parts and instances, cap message counts (Schedule -> "
         "TransferTable)", _pipelining, _check_schedule, lambda t, o: show_schedule(t.schedule())),
    Pass("scratch", "program", "per-rank send/recv/copy/reduce ops, scratch allocated (TransferTable -> OpPlan)",
         _scratch, _check_plan, lambda p, o: show_plan(p)),
    Pass("channels", "rank", "a channel per op from its lane, chunk group and peer spread",
         _channels, _check_channels, _show_rank(show_chops, "channels")),
    Pass("threadblocks", "rank", "tbs per (send peer, recv peer, channel), ops in logical order",
         _threadblocks, _check_threadblocks, _show_rank(show_tbs, "tbs")),
    Pass("fusion", "rank", "a receive and the send of the same data become one rcs/rrs/rrcs step",
         _fusion, _check_fusion, _show_rank(show_tbs, "fused")),
    Pass("dependencies", "rank", "cross-tb dependencies, nops and the rank's steps (-> Gpu)",
         _dependencies, _check_gpu("dependencies"), lambda gs, ctx: [ln for g in gs for ln in show_gpu(g.to_gpu())]),
    Pass("limits", "rank", "the dialect's limits on the rank (the program-wide ones after all ranks)",
         _limits, _check_gpu("limits"), lambda gs, ctx: [ln for g in gs for ln in show_gpu(g.to_gpu())]),
)
PASS_NAMES = tuple(p.name for p in PASSES)
_PROGRAM_PASSES = tuple(p for p in PASSES if p.scope == "program")
_RANK_PASSES = tuple(p for p in PASSES if p.scope == "rank")


# --------------------------------------------------------------------------- the runner
@dataclass
class Lowered:
    """What :func:`run_pipeline` made: the program (its gpus only with ``keep_gpus``), the emitted
    text of the selected ranks, the IR dumps asked for and the seconds per pass."""

    program: Program
    texts: dict[int, str]
    dumps: dict[str, list[str]]
    timings: dict[str, float]      # seconds per pass (per-rank passes: summed over ranks and workers)
    emit_seconds: float = 0.0      # spent in ``emit`` (summed likewise)
    workers: int = 1               # processes that ran the per-rank passes
    shape: tuple[int, int] = (0, 0)   # the selected ranks' most tbs on a gpu and most steps in a tb


@dataclass(frozen=True)
class ShardFiles:
    """Where the workers write the selected ranks' files themselves (``collc build
    --shard-per-rank``): ``directory/rank-K/filename``, the text ``join(header, emitted)``.

    ``directory`` is a pending temporary directory (``collc.outputs.new_temp_dir``: removed on
    an error or interrupt, renamed into place by the caller).  The header's channel count is
    the lowering's result; the workers write the count the round's channel assignment gives
    (:func:`used_channels`) and the runner rewrites the first lines should the result differ.
    The text then never crosses the pool (hundreds of MB at 4096 ranks)."""

    directory: Path
    filename: str
    join: Callable[[Program, str], str]

    def path(self, rank: int) -> Path:
        return self.directory / f"rank-{rank}" / self.filename


def _write_rank(files: ShardFiles, rank: int, text: str) -> None:
    """Write (or overwrite: a round with more channel groups writes again) one rank's file."""
    target = files.path(rank)
    try:
        target.parent.mkdir(0o777, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("ascii"))
    except OSError as exc:
        raise EmitError(f"cannot write {target}: {(exc.strerror or str(exc)).lower()}") from None


def used_channels(table: OpTable, groups: int, spread: int, nranks: int) -> int:
    """The channel count a lowering with this channel assignment gives: a tb's channel is that
    of its sends and receives (a local-only tb's is 0), so one more than the largest channel of a
    send or receive, in slices of the table (memory at 4096 ranks)."""
    top = 0
    step = 1 << 20
    for lo in range(0, len(table), step):
        part = OpTable(table.cols[:, lo:lo + step])      # a view: every row's channel, then the remote ones'
        remote = part.kind <= RECV
        if remote.any():
            top = max(top, int(channel_ops(part, groups, spread, nranks).chan[remote].max()) + 1)
    return max(1, top)


def rewrite_heads(files: ShardFiles, ranks: Sequence[int], head: Program) -> None:
    """Give the ranks' written files ``head``'s ``<algo>`` line (the first line of each)."""
    line = files.join(head, "").partition("\n")[0]
    for rank in ranks:
        target = files.path(rank)
        try:
            text = target.read_bytes().decode("ascii")
            _write_rank(files, rank, line + text[text.index("\n"):])
        except (OSError, ValueError) as exc:
            raise EmitError(f"cannot rewrite {target}: {exc}") from None


@dataclass
class _RankResult:
    rank: int
    gpu: GpuTable | None
    text: str | None
    nchannels: int
    worst: tuple[int, int, int]               # (steps, gpu, tb) of the longest tb
    error: CollcError | None                  # raised by a pass before limits
    limit_error: CollcError | None            # raised by the limits pass
    dumps: dict[str, list[str]]
    spent: dict[str, float]
    ntbs: int = 0


@dataclass
class _Job:
    """Everything a worker needs, inherited through fork (nothing of it is pickled)."""

    by_rank: list[OpTable]
    layout: Layout
    opts: LowerOptions
    emit: Callable[[GpuTable], str] | None
    selected: range
    keep_gpus: bool
    order: Sequence[int] = ()        # the ranks to lower, ascending (() : every rank)
    files: ShardFiles | None = None  # write the selected ranks' files here (with ``head``'s header)
    head: Program | None = None


_JOB: _Job | None = None


#: Ops the per-rank passes take at once: ranks are lowered together up to this many ops (each on
#: its own, sharing numpy's calls), so that one rank's few ops do not pay the calls alone, and a
#: large program's intermediate tables stay small.
BLOCK_OPS = 1 << 15


def _blocks(job: _Job, ranks: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """``ranks`` cut into runs lowered together: single ranks when a pass's IR is checked or
    rendered, else runs of about :data:`BLOCK_OPS` ops."""
    if job.opts.verify_between or job.opts.dump:
        for r in ranks:
            yield (r,)
        return
    run: list[int] = []
    ops = 0
    for r in ranks:
        run.append(r)
        ops += len(job.by_rank[r])
        if ops >= BLOCK_OPS:
            yield tuple(run)
            run, ops = [], 0
    if run:
        yield tuple(run)


def _lower_ranks(job: _Job, ranks: tuple[int, ...]) -> list[_RankResult]:
    """Run the per-rank passes on ``ranks`` together; one result per rank (the seconds spent go
    with the first)."""
    clock = time.process_time     # CPU seconds of this process (a worker's own)
    ctx = RankContext(job.layout, ranks)
    lim = LIMITS[job.layout.dialect]
    spent = dict.fromkeys((p.name for p in _RANK_PASSES), 0.0)
    dumps: dict[str, list[str]] = {}
    tables = [job.by_rank[r] for r in ranks]
    ir: Any = tables[0] if len(tables) == 1 else OpTable(np.concatenate([t.cols for t in tables], axis=1))
    for p in _RANK_PASSES:
        if p.name == "limits":
            break              # per rank, below
        a = clock()
        try:
            ir = p.run(ir, ctx)
            if job.opts.verify_between:
                p.check(ir, ctx)
        except CollcError as exc:
            spent[p.name] += clock() - a
            return [_RankResult(ranks[0], None, None, 1, (0, 0, 0), exc, None, dumps, spent)]
        spent[p.name] += clock() - a
        if p.name in job.opts.dump:
            dumps[p.name] = p.show(ir, ctx)
    out: list[_RankResult] = []
    limits = _RANK_PASSES[-1]
    for gpu in ir:
        rank = gpu.id
        one = RankContext(job.layout, (rank,))
        nchannels = int(gpu.chan.max()) + 1 if gpu.ntbs else 1
        worst = (0, 0, 0)
        if gpu.ntbs:
            lens = np.diff(gpu.start)
            most = int(lens.max())
            worst = (most, rank, int(np.flatnonzero(lens == most)[-1]))
        mine = spent if not out else {}
        res = _RankResult(rank, gpu if job.keep_gpus else None, None, nchannels, worst, None, None,
                          dumps if not out else {}, mine)
        res.ntbs = gpu.ntbs
        out.append(res)
        if worst[0] > lim.max_steps_per_tb:
            continue           # the runner retries with more channel groups: limits would only mislead
        a = clock()
        try:
            limits.run([gpu], one)
            if job.opts.verify_between:
                limits.check([gpu], one)
        except CollcError as exc:
            spent["limits"] += clock() - a
            res.gpu, res.limit_error = None, exc
            continue
        spent["limits"] += clock() - a
        if limits.name in job.opts.dump:
            res.dumps[limits.name] = limits.show([gpu], one)
        if job.emit is not None and rank in job.selected:
            a = clock()
            text = job.emit(gpu)
            if job.files is not None and job.head is not None:
                try:
                    _write_rank(job.files, rank, job.files.join(job.head, text))
                except CollcError as exc:
                    res.error = exc
                    return out
            else:
                res.text = text
            spent["emit"] = spent.get("emit", 0.0) + clock() - a
    return out


def _lower_block(block: tuple[int, int]) -> list[_RankResult]:
    assert _JOB is not None, "worker started without a job"
    order = _JOB.order or range(_JOB.layout.coll.nranks)
    return [res for run in _blocks(_JOB, order[block[0]:block[1]]) for res in _lower_ranks(_JOB, run)]


def default_jobs() -> int:
    """The cores this process may use (``collc build --jobs`` default)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:       # not on Linux
        return max(1, os.cpu_count() or 1)


#: Below this many ranks the per-rank passes stay in this process (starting workers costs more).
PARALLEL_MIN_RANKS = 128


def _worker_signals() -> None:
    # a worker leaves interrupts to the parent (which removes unfinished outputs and stops the
    # pool); the handlers it inherited would act on the parent's pending files
    # (under nohup SIGHUP stays ignored, as in the parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)


def workers(jobs: int, nranks: int) -> int:
    """The worker processes ``jobs`` gives for ``nranks`` ranks (1: the passes run in this process)."""
    if jobs <= 1 or nranks < PARALLEL_MIN_RANKS:
        return 1
    import multiprocessing  # here: most builds run in this process, and the import costs start-up

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return jobs


def _rank_results(job: _Job, jobs: int) -> Iterator[_RankResult]:
    """Every rank's result in rank order, from ``jobs`` fork workers or from this process."""
    global _JOB
    order = job.order or range(job.layout.coll.nranks)
    n = len(order)
    on_rank = job.opts.on_rank
    every = max(1, n // 100)
    if workers(jobs, n) == 1:
        done = told = 0
        for run in _blocks(job, order):
            if on_rank is not None and done >= told:
                on_rank(done, n)
                told = done + every
            yield from _lower_ranks(job, run)
            done += len(run)
        return
    size = max(1, -(-n // (jobs * 8)))
    blocks = [(lo, min(n, lo + size)) for lo in range(0, n, size)]
    _JOB = job
    import multiprocessing

    try:
        with multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_signals) as pool:
            for lo, block in zip((b[0] for b in blocks), pool.imap(_lower_block, blocks)):
                if on_rank is not None:
                    on_rank(lo, n)
                yield from block
    finally:
        _JOB = None


def program_name(schedule: Schedule) -> str:
    coll = schedule.collective
    root = f"-root{coll.root}" if coll.root is not None else ""
    return f"{schedule.provenance.algorithm}-{coll.kind.value}-n{coll.nranks}{root}"


def lower(schedule: Schedule, opts: LowerOptions = LowerOptions()) -> Program:
    """Run every pass; the Program with all its gpus (``opts.timings`` receives seconds per pass)."""
    return run_pipeline(schedule, opts).program


@dataclass
class Prepared:
    """The program-wide part of a lowering: the program passes' output, split by rank, and the
    decisions the per-rank passes share (it does not depend on tb pairing)."""

    plan: OpPlan
    by_rank: list[OpTable]
    hints: list[dict[tuple[int, int], int]]
    synced: list[frozenset[int]]
    replies: list[frozenset[int]]
    lanes: int
    ordered: bool
    spread: int
    groups: int
    timings: dict[str, float]      # CPU seconds of the program passes and the channel decision
    dumps: dict[str, list[str]]


def prepare(schedule: Schedule | list[Schedule], opts: LowerOptions = LowerOptions(),
            only: frozenset[int] | None = None) -> Prepared:
    """Run the program passes on ``schedule`` and decide the channel groups and peer spread
    (``only``: from these ranks' ops alone -- the ranks of a partial schedule that hold all
    their ops, which stand for every rank: ``collc.frontends.registry.Algorithm.orbits``)."""
    clock = time.process_time     # CPU seconds of this process
    lim = LIMITS[opts.dialect]
    timings: dict[str, float] = {}
    dumps: dict[str, list[str]] = {}
    # a one-element list hands over the caller's only reference: the Schedule is freed once the
    # pipelining pass has read it into columns, before scratch makes the lowering's peak (4096 ranks)
    ir: Any = schedule.pop() if isinstance(schedule, list) else schedule
    del schedule
    for p in _PROGRAM_PASSES:
        a = clock()
        ir = p.run(ir, opts)
        if opts.verify_between:
            p.check(ir, opts)
        if p.name == "pipelining":
            sched: TransferTable = ir
            hints: list[dict[tuple[int, int], int]] = [{} for _ in range(sched.collective.nranks)]
            for rank, lane, rpeer, speer in sched.tb_pairs:
                hints[rank][(lane, rpeer)] = speer
            synced: list[frozenset[int]] = [frozenset() for _ in range(sched.collective.nranks)]
            for src, dst in sched.step_sync:
                synced[src] |= {dst}
            replies: list[frozenset[int]] = [frozenset() for _ in range(sched.collective.nranks)]
            for src, dst in sched.step_reply:
                replies[src] |= {dst}
            lanes, ordered = sched.lanes, sched.ordered_sends
        timings[p.name] = clock() - a
        if p.name in opts.dump:
            dumps[p.name] = p.show(ir, opts)
    plan: OpPlan = ir
    del ir, sched      # the ops hold all that later passes need (memory at 4096 ranks)
    coll = plan.collective
    a = clock()
    decide = plan.table if only is None else plan.table.take(np.isin(plan.table.rank, sorted(only)))
    spread = peer_spread(decide, coll.nranks)
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
        groups = estimate_groups(decide, coll.nranks, lim.max_steps_per_tb, most)
    del decide
    by_rank = plan.by_rank()
    timings["channels"] = clock() - a     # the channel groups are the channel pass's decision
    return Prepared(plan, by_rank, hints, synced, replies, lanes, ordered, spread, groups, timings, dumps)


def run_pipeline(schedule: Schedule | list[Schedule], opts: LowerOptions = LowerOptions(), *,
                 emit: Callable[[GpuTable], str] | None = None, ranks: range | None = None,
                 keep_gpus: bool = True, lower_only: Sequence[int] | None = None,
                 files: ShardFiles | None = None) -> Lowered:
    """Run ``PASSES`` on ``schedule`` (a one-element list: the caller's only reference, which the
    lowering drops once it is read).

    ``emit`` (if given) prints each rank's gpu in the worker that lowered it, for the ranks
    in ``ranks`` (default all); ``keep_gpus=False`` returns the program without its gpus
    (their text is what the caller wants, and 4096 ranks of steps are ~1 GB).  ``lower_only``
    (ascending) lowers only those ranks, and makes the program-wide decisions (channel groups,
    peer spread, channel count, tb lengths) from them alone: for a schedule built with
    ``keep`` (only the transfers touching them) whose symmetry makes them stand for all ranks.
    ``files`` (with ``emit``, every rank lowered) has the workers write the texts themselves
    (:class:`ShardFiles`); ``Lowered.texts`` is then empty.
    """
    if files is not None and (emit is None or lower_only is not None):
        raise ValueError("files: the workers write what emit prints, for every rank lowered")
    clock = time.process_time     # CPU seconds of this process (a worker's own)
    lim = LIMITS[opts.dialect]
    name = opts.name or program_name(schedule[0] if isinstance(schedule, list) else schedule)
    pre = prepare(schedule, opts, None if lower_only is None else frozenset(lower_only))
    del schedule
    timings = dict(pre.timings)
    dumps = dict(pre.dumps)
    plan, by_rank, hints, synced, replies = pre.plan, pre.by_rank, pre.hints, pre.synced, pre.replies
    lanes, ordered, spread, groups = pre.lanes, pre.ordered, pre.spread, pre.groups
    del pre
    coll = plan.collective
    selected = range(coll.nranks) if ranks is None else ranks
    jobs = max(1, opts.jobs)

    def header(nchannels: int, gpus: tuple[Gpu, ...]) -> Program:
        return Program(name=name, proto=opts.proto, nchannels=nchannels, nchunksperloop=coll.nchunksperloop,
                       ngpus=coll.nranks, coll=coll.kind.value, inplace=int(coll.inplace),
                       outofplace=int(not coll.inplace), min_bytes=opts.min_bytes, max_bytes=opts.max_bytes,
                       gpus=gpus)

    # a paired tb is made only where its sends cannot wait for a receiver at this size
    buffering = size_model(opts.proto, coll.nchunksperloop, window_top(opts.dialect, opts.max_bytes))

    def assign(pair: bool, groups: int, keep: bool) -> tuple[Program, dict[int, str], tuple[int, int]]:
        while True:
            layout = Layout(coll, groups, spread, pair, tuple(hints), plan.scratch, opts.dialect, opts.shard,
                            tuple(synced), ordered, tuple(replies), buffering)
            head = None
            if files is not None:
                head = header(used_channels(plan.table, groups, spread, coll.nranks), ())
            job = _Job(by_rank, layout, opts, emit, selected, keep, tuple(lower_only or ()), files, head)
            gpus: list[Gpu] = []
            texts: dict[int, str] = {}
            nchannels, worst = 1, (0, 0, 0)
            shape = (0, 0)
            limit_error: CollcError | None = None
            round_dumps: dict[str, list[str]] = {}
            for res in _rank_results(job, jobs):
                for k, v in res.spent.items():
                    timings[k] = timings.get(k, 0.0) + v
                for k, lines in res.dumps.items():
                    round_dumps.setdefault(k, []).extend(lines)
                if res.error is not None:
                    raise res.error
                limit_error = limit_error or res.limit_error
                nchannels = max(nchannels, res.nchannels)
                worst = max(worst, res.worst)
                if res.rank in selected:
                    shape = (max(shape[0], res.ntbs), max(shape[1], res.worst[0]))
                if worst[0] > lim.max_steps_per_tb:
                    break             # more channel groups are needed: the rest would be redone anyway
                if res.gpu is not None:
                    gpus.append(res.gpu.to_gpu())
                if res.text is not None:
                    texts[res.rank] = res.text
            if worst[0] <= lim.max_steps_per_tb:
                prog = header(nchannels, tuple(gpus))
                b = clock()
                program_limits(prog, opts.dialect, opts.shard)   # the program-wide limits, before any gpu's
                if limit_error is not None:
                    raise limit_error
                timings["limits"] = timings.get("limits", 0.0) + clock() - b
                if head is not None and files is not None and head.nchannels != nchannels:
                    rewrite_heads(files, selected, prog)     # a safety net: used_channels is exact
                dumps.update(round_dumps)
                if "limits" in dumps:
                    dumps["limits"] = show_program_header(prog) + dumps["limits"]
                return prog, texts, shape
            if lanes * spread * (groups + 1) > lim.max_channels:
                raise LoweringError(f"gpu {worst[1]} tb {worst[2]} needs {worst[0]} steps, above the "
                                    f"{opts.dialect.value} limit of {lim.max_steps_per_tb} per tb, even spread "
                                    f"over {lanes * spread * groups} channels: use fewer --chunks or --instances")
            groups = min(2 * groups, lim.max_channels // (lanes * spread))

    prog, texts, shape = assign(opts.pair, groups, keep_gpus)
    if not keep_gpus:
        prog = header(prog.nchannels, ())
    passes = {p.name: timings.get(p.name, 0.0) for p in PASSES}
    opts.timings.update(passes)
    return Lowered(prog, texts, dumps, passes, timings.get("emit", 0.0),
                   workers(jobs, coll.nranks if lower_only is None else len(lower_only)), shape)


def estimate_groups(ops: OpTable, nranks: int, max_steps: int, most: int) -> int:
    """Smallest power-of-two channel-group count whose busiest connection fits in one tb
    (at most ``most``, the groups that the dialect's channels allow for the lanes).

    A lower bound on the tb program (nops and unfused pairs come on top); ``lower``
    doubles further if the real program still exceeds the limit.
    """
    if most <= 1:
        return 1          # no choice to make
    remote = ops.kind <= RECV
    if not remote.any():
        return 1
    rank, peer, lane = ops.rank[remote], ops.peer[remote], ops.lane[remote]
    # a connection's id: its rank among the distinct (rank, peer, lane, direction)
    lanes = 1 + int(lane.max())
    side = (peer * lanes + lane) * 2 + (ops.kind[remote] == SEND)
    ids = _dense(rank, nranks, side, nranks * lanes * 2)
    chunks = ops.chunk[remote]
    groups = 1
    while groups < most:
        if np.bincount(ids * groups + chunks % groups).max() <= connection_steps_per_tb(max_steps):
            break
        groups = min(2 * groups, most)   # powers of two, then as many as the channels allow
    return groups


def _dense(major: Ints, top: int, minor: Ints, tops: int) -> Ints:
    """Each row's rank among the distinct ``(major, minor)`` (``0 <= major < top``,
    ``0 <= minor < tops``), as ``np.unique(..., return_inverse=True)`` gives it: from two
    stable radix sorts of 16-bit keys where they fit, else from that."""
    out: Ints
    if not len(major):
        out = major.copy()
        return out
    if top > 1 << 16 or tops > 1 << 16:
        out = np.unique(major * tops + minor, return_inverse=True)[1].reshape(-1).astype(np.int64)
        return out
    order = np.argsort(minor.astype(np.uint16), kind="stable")
    order = order[np.argsort(major[order].astype(np.uint16), kind="stable")]
    key = major[order] * tops + minor[order]
    new = np.empty(len(key), dtype=np.int64)
    new[0] = 0
    np.not_equal(key[1:], key[:-1], out=new[1:])
    out = np.empty(len(key), dtype=np.int64)
    out[order] = np.cumsum(new)
    return out


def enforce_limits(prog: Program, dialect: Dialect, shard: bool = False) -> None:
    """Raise LoweringError naming the first limit the program breaks, with gpu and tb."""
    program_limits(prog, dialect, shard)
    for g in prog.gpus:
        gpu_limits(GpuTable.from_gpu(g), dialect, 1 if shard else prog.ngpus)


def program_limits(prog: Program, dialect: Dialect, shard: bool = False) -> None:
    """The limits on the whole program: channels, and ``<gpu>`` elements per file."""
    lim = LIMITS[dialect]
    gpus_per_file = 1 if shard else prog.ngpus
    if prog.nchannels > lim.max_channels:
        raise LoweringError(f"{prog.nchannels} channels exceed the {dialect.value} limit of {lim.max_channels}")
    if gpus_per_file > lim.max_children:
        raise LoweringError(f"{prog.ngpus} ranks: one file holds at most {lim.max_children} <gpu> elements "
                            f"(the real parser overflows beyond); use --shard-per-rank")


def gpu_limits(g: GpuTable, dialect: Dialect, gpus_per_file: int) -> None:
    """The limits on one rank: tbs, parser nodes, offsets, depid, cnt, tbs per channel."""
    lim = LIMITS[dialect]
    shard = gpus_per_file == 1
    ntbs = g.ntbs
    if ntbs > lim.max_tbs_per_gpu:
        raise LoweringError(f"gpu {g.id}: {ntbs} tbs exceed the {dialect.value} limit of "
                            f"{lim.max_tbs_per_gpu} per GPU")
    nsteps = len(g.type)
    nodes = parser_nodes(gpus_per_file, ntbs, nsteps)
    if nodes > lim.max_nodes_per_rank:
        hint = ("; one file per rank (--shard-per-rank) would fit"
                if not shard and parser_nodes(1, ntbs, nsteps) <= lim.max_nodes_per_rank else "")
        raise NodeBudgetError(f"gpu {g.id}: {nodes} parser nodes (<algo>, {gpus_per_file} <gpu>, {ntbs} "
                            f"<tb>, {nsteps} <step>); the runtime's parser loads at most "
                            f"{lim.max_nodes_per_rank} per rank{hint}")
    if g.s_chunks > lim.max_offset or g.i_chunks > lim.max_offset + 1 or g.o_chunks > lim.max_offset + 1:
        raise LoweringError(f"gpu {g.id}: buffers of {max(g.i_chunks, g.o_chunks, g.s_chunks)} chunks exceed "
                            f"the int16 offset limit {lim.max_offset}")
    # tb by tb: a dependency on a tb id above the int8 range, then a step's cnt
    targets = unique(g.depid[g.depid >= 0])
    high = targets[targets > lim.max_depid]
    big = np.flatnonzero(g.cnt > lim.max_cnt)
    tb_of_big = np.searchsorted(g.start, big, "right") - 1
    if len(high) and (not len(big) or int(high[0]) <= int(tb_of_big[0])):
        raise LoweringError(f"gpu {g.id} tb {int(high[0])}: a dependency targets tb id above {lim.max_depid} "
                            f"(depid is an int8 in the runtime; {len(targets)} tbs of this rank are "
                            f"dependency targets): use fewer --instances or --chunks")
    if len(big):
        t, row = int(tb_of_big[0]), int(big[0])
        raise LoweringError(f"gpu {g.id} tb {t} step {row - int(g.start[t])}: cnt {int(g.cnt[row])} exceeds "
                            f"{lim.max_cnt}")
    # tbs per (channel, direction), in the order of their first tb (send before receive)
    per_chan: dict[tuple[int, str], int] = {}
    for send, recv, chan in zip(g.send.tolist(), g.recv.tolist(), g.chan.tolist()):
        if send >= 0:
            per_chan[(chan, "send")] = per_chan.get((chan, "send"), 0) + 1
        if recv >= 0:
            per_chan[(chan, "recv")] = per_chan.get((chan, "recv"), 0) + 1
    for (chan, role), count in per_chan.items():
        if count > lim.max_tbs_per_channel:
            raise LoweringError(f"gpu {g.id}: chan {chan} has {count} {role} tbs, above "
                                f"{lim.max_tbs_per_channel} per channel")
