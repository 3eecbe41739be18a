"""End-to-end compilation: topology + algorithm -> checked MSCCL XML text.

``compile_xml`` is what ``collc build``, the golden-file script, the prebuilt
schedules and the benchmarks all call: build the Schedule, verify it on the
topology, lower it, print it, read the text back and run the full checker on it.
It lowers once: the lowering pairs a receive peer with a send peer in one threadblock only
where that cannot block (``collc.compiler.msccl.threadblocks``, "Safe pairs";
docs/runtime-model.md, "Paired threadblocks"), so the paired program's check passes.
Should it fail all the same, it lowers again with separate send and receive threadblocks,
which cannot deadlock (every tb runs in step order) -- a safety net the normal path never
takes (``Compiled.lowerings`` counts the lowerings): ``pairing_attempts`` is the one place
that orders the layouts (lowering never runs the checker), and ``lower_checked`` applies it
to a Schedule for callers without a registry name (tests, tools).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from collc.backends.msccl_xml import join_xml, parse_xml, table_text, to_xml
from collc.backends.shard_check import check_shard_dir
from collc.backends.shards import assemble, parse_texts
from collc.check import Report, check_parsed, simulate, size_model
from collc.clock import cpu_seconds
from collc.compiler.buffering import window_top
from collc.limits import Dialect
from collc.compiler.pipeline import LowerOptions, ShardFiles, lower, program_name, run_pipeline
from collc.compiler.msccl.program import Gpu, ParsedFile, Program, Proto
from collc.errors import LoweringError, NodeBudgetError, VerifyError
from collc.inputs import MAX_PLAN_THREADBLOCKS, check_program_size
from collc.frontends.registry import build_schedule, get as get_algorithm, orbit_ranks
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.ir.verify import verify_schedule
from collc.memory import gc_paused
from collc.topology import Topology

if TYPE_CHECKING:
    from collc.check.plan.releases import Release
    # the MSCCL++ modules are imported by compile_plan: an XML build does not load them
    from collc.compiler.mscclpp.plan import Plan, Protocol

# PyTorch calls allreduce/broadcast/reduce in place and the *_tensor collectives out of place.
DEFAULT_INPLACE = {CollKind.ALLREDUCE: True, CollKind.BROADCAST: True, CollKind.REDUCE: True}


@dataclass
class Compiled:
    # the frontend's Schedule; None where the build released it before its check (``keep_schedule``:
    # hundreds of MB of transfers at 4096 ranks, which nothing after the lowering reads)
    schedule: Schedule | None
    program: Program
    text: str                      # the single file ("" when sharded)
    report: Report
    timings: dict[str, float] = field(default_factory=dict)
    shards: dict[int, str] | None = None   # rank -> file text, with shard=True
    dumps: dict[str, list[str]] = field(default_factory=dict)   # pass -> IR text (``dump``)
    lowerings: int = 1             # lowerings run: 2 only where the safety net of pairing_attempts fired
    nsteps: int = 0                # the Schedule's steps (kept with or without it)
    shape: tuple[int, int] = (0, 0)   # the written ranks' most tbs on a gpu and most steps in a tb


def compile_xml(topology: Topology, algorithm: str, kind: CollKind, *, inplace: bool | None = None,
                root: int | None = None, params: Mapping[str, str] | None = None, chunks: int = 1,
                instances: int = 1, proto: Proto = Proto.SIMPLE, dialect: Dialect = Dialect.EXECUTOR,
                min_bytes: int = 0, max_bytes: int = 0, name: str = "",
                progress: Callable[[str], None] | None = None, shard: bool = False,
                rank_progress: Callable[[int, int], None] | None = None, jobs: int = 1,
                ranks: range | None = None, dump: frozenset[str] = frozenset(),
                keep_schedule: bool = True, shard_dir: Path | None = None) -> Compiled:
    """Raise CollcError on impossible input; return the text and its check report.

    ``progress`` (if given) is called with the name of each stage as it starts, and
    ``rank_progress`` with (ranks lowered, ranks) as the lowering goes (about 100 times).
    ``jobs`` worker processes run the per-rank passes and print the ranks' text (the
    output does not depend on it).  ``ranks`` (with ``shard``) keeps only those ranks'
    shards: every rank is still lowered (the channel count and the tb pairing are
    decisions over all of them), but the check covers what one node can check alone --
    the Schedule, the lowering's limits, the pairing's flow control over all ranks and
    the read-back of its shards; ``collc check`` of the assembled directory is the proof.
    ``dump`` names passes whose output IR is rendered into ``Compiled.dumps``.
    ``keep_schedule=False`` releases the frontend's Schedule once the lowering has read it into
    columns, before the scratch pass, the emit and the check (``Compiled.schedule`` is then None,
    ``Compiled.nsteps`` stays): at 4096 ranks those make the build's peak memory.
    ``shard_dir`` (with ``shard``, every rank: a pending temporary directory of
    ``collc.outputs``) has the workers write each rank's file there as they print it
    (``rank-K/<name>.xml``) and the check read that directory (``collc check``'s reader,
    :func:`collc.backends.shard_check.check_shard_dir`): the text never passes through this
    process (``Compiled.shards`` is None, ``Compiled.program`` has no gpus: ``Compiled.shape``).
    """
    # The IR and the Program are millions of small acyclic objects at 4096 ranks: the
    # cyclic collector would rescan them over and over for nothing, so it pauses here.
    with gc_paused():
        try:
            return _compile(topology, algorithm, kind, inplace=inplace, root=root, params=params, chunks=chunks,
                            instances=instances, proto=proto, dialect=dialect, min_bytes=min_bytes,
                            max_bytes=max_bytes, name=name, progress=progress, shard=shard,
                            rank_progress=rank_progress, jobs=jobs, ranks=ranks, dump=dump,
                            keep_schedule=keep_schedule, shard_dir=shard_dir)
        except NodeBudgetError:
            # an automatic layout predicted a fit that the real count refutes: build once
            # more with the layout the registration names, unless the user chose one
            alg = get_algorithm(algorithm)
            given = dict(params or {})
            defaults = {p.name: str(p.default) for p in alg.params}
            retry = {k: v for k, v in alg.budget_fallback.items()
                     if given.get(k, defaults.get(k)) == defaults.get(k) != v}
            if not retry:
                raise
            if shard_dir is not None:       # the ranks the first layout wrote: none may stay
                for part in shard_dir.iterdir():
                    shutil.rmtree(part)
            return _compile(topology, algorithm, kind, inplace=inplace, root=root, params={**given, **retry},
                            chunks=chunks, instances=instances, proto=proto, dialect=dialect,
                            min_bytes=min_bytes, max_bytes=max_bytes, name=name, progress=progress, shard=shard,
                            rank_progress=rank_progress, jobs=jobs, ranks=ranks, dump=dump,
                            keep_schedule=keep_schedule, shard_dir=shard_dir)


def _compile(topology: Topology, algorithm: str, kind: CollKind, *, inplace: bool | None, root: int | None,
             params: Mapping[str, str] | None, chunks: int, instances: int, proto: Proto, dialect: Dialect,
             min_bytes: int, max_bytes: int, name: str, progress: Callable[[str], None] | None,
             rank_progress: Callable[[int, int], None] | None,
             shard: bool, jobs: int, ranks: range | None, dump: frozenset[str], keep_schedule: bool,
             shard_dir: Path | None) -> Compiled:
    clock = cpu_seconds
    wall = time.perf_counter()
    timings: dict[str, float] = {}
    tell = progress or (lambda stage: None)
    tell("frontend")
    t0 = clock()
    place = DEFAULT_INPLACE.get(kind, False) if inplace is None else inplace
    partial = shard and ranks is not None and ranks != range(topology.nranks)
    if shard_dir is not None and (not shard or partial):
        raise ValueError("shard_dir: the files of every rank of a sharded build")
    # a node's own ranks and the algorithm's representatives: with a symmetry to stand on, a
    # partial build makes only the transfers touching them and lowers only them (see local_ranks)
    local = local_ranks(algorithm, topology, kind, params, ranks) if partial else None
    def frontend() -> Schedule:
        return build_schedule(algorithm, topology, kind, place, root, params,
                              gpus_per_file=1 if shard else topology.nranks, chunks=chunks, instances=instances,
                              keep=None if local is None else frozenset(local))

    schedule = frontend()
    coll, m, nsteps = schedule.collective, chunks * instances, schedule.nsteps
    # a local build holds (and checks) only its own ranks' slots; collc check of the assembled
    # directory bounds the whole program's
    held = coll.nranks if local is None else len(local)
    check_program_size(coll.nranks, coll.nchunksperloop * m * held // coll.nranks,
                       held * (coll.input_chunks + coll.output_chunks + schedule.scratch_chunks) * m,
                       f"{algorithm} on {topology.name} with chunks x instances = {m}", LoweringError)
    t1 = clock()
    tell("verify schedule")
    if local is None:     # a partial schedule computes nothing alone: collc check of the directory does
        try:
            verify_schedule(schedule, topology)
        except VerifyError as exc:
            raise VerifyError(f"{algorithm} cannot run {kind.value} on {topology.name}: {exc}") from None
    timings.update(frontend=t1 - t0, verify_schedule=clock() - t1)
    result: Compiled | None = None
    first = LowerOptions(chunks=chunks, instances=instances, proto=proto, dialect=dialect, min_bytes=min_bytes,
                         max_bytes=max_bytes, pair=bool(get_algorithm(algorithm).pair_tbs or schedule.tb_pairs),
                         shard=shard, name=name, on_rank=rank_progress, jobs=jobs, dump=dump)
    lowerings = 0
    files = None if shard_dir is None else ShardFiles(shard_dir, f"{name or program_name(schedule)}.xml",
                                                      lambda head, body: join_xml(head, dialect, [body]))
    kept: Schedule | None = schedule     # the one reference from here on (see keep_schedule)
    del schedule
    for opts in pairing_attempts(first):
        # the lowering pairs only tbs that cannot block (collc.compiler.msccl.threadblocks, "Safe
        # pairs"), so the first layout's check passes and no second lowering runs; the second
        # (unpaired) is a safety net for a check that fails all the same
        pair = opts.pair
        tell("lower" if pair else "lower (unpaired tbs)")
        t2 = clock()
        lowerings += 1
        if kept is None:     # released for the check of the layout before: the same again (deterministic)
            kept = frontend()
        # the ranks' text is printed by the workers that lowered them (emit is part of "lower");
        # a partial build keeps every rank's gpus for the one check of flow control it can make
        # (a local build cannot simulate every rank: it relies on the safe-pairs rule alone)
        probe = pair and partial and local is None
        # without keep_schedule the lowering gets the only reference, and frees the Schedule once read
        source: Schedule | list[Schedule] = kept if keep_schedule else [kept]
        if not keep_schedule:
            kept = None
        lowered = run_pipeline(source, opts, emit=table_text, ranks=ranks if shard else None, keep_gpus=probe,
                               lower_only=local, files=files)
        del source
        t_low = clock()
        if probe:
            blocked = pairing_blocks(lowered.program, coll, opts)
            # "pairing": the probe, or the whole of an attempt whose layout is dropped
            timings["pairing"] = timings.get("pairing", 0.0) + clock() - (t2 if blocked else t_low)
            if blocked:
                del lowered      # not alive while the next layout is lowered (memory at 4096 ranks)
                continue
        header = lowered.program = replace(lowered.program, gpus=())
        t3 = clock()
        tell("emit")
        # one copy of the text at a time (memory at 4096 ranks): each rank's body goes as its shard is made
        bodies, lowered.texts = lowered.texts, {}
        shards = {r: join_xml(header, dialect, [bodies.pop(r)]) for r in list(bodies)} \
            if shard and files is None else None
        text = "" if shard else join_xml(header, dialect, bodies.values())
        del bodies
        t4 = clock()
        tell("check")
        if shards is not None and ranks is not None:
            shards = {r: t for r, t in shards.items() if r in ranks}     # not the representatives'
        gpus: tuple[Gpu, ...] = ()
        if files is not None:
            # the files as written, read back as collc check reads a directory (the same report); in
            # this process, as the in-memory check: workers would pickle the columns back (CPU seconds)
            report = check_shard_dir(files.directory, dialect, root=coll.root, jobs=1)
            report.path = "<shards>"
        else:
            if shards is not None:
                parsed = assemble(parse_texts((f"<rank {r}>", t) for r, t in shards.items()))
            else:
                parsed = parse_xml(text, "<built>")
            if partial:
                report = _partial_report(parsed, dialect, ranks)
            else:
                report = check_parsed(parsed, dialect, root=coll.root, sharded=shard)
            gpus = parsed.program.gpus
            del parsed
        t5 = clock()
        if result is not None:
            # the dropped attempt counts as "pairing", as a dropped probe does
            timings["pairing"] = timings.get("pairing", 0.0) + sum(
                result.timings.get(k, 0.0) for k in ("lower", "emit", "check"))
        timings.update(lower=t_low - t2 - lowered.emit_seconds, emit=t4 - t3 + lowered.emit_seconds,
                       check=t5 - t4, workers=lowered.workers)
        timings.update({f"pass:{k}": v for k, v in lowered.timings.items()})
        result = Compiled(kept, replace(header, gpus=gpus), text, report, dict(timings), shards,
                          lowered.dumps, lowerings, nsteps, lowered.shape)
        if report.ok:
            break
    assert result is not None
    result.timings["wall"] = time.perf_counter() - wall
    return result


@dataclass
class CompiledPlan:
    schedule: Schedule
    plan: Plan
    text: str
    problems: list[str]            # the plan check's findings (empty: it passed)
    timings: dict[str, float] = field(default_factory=dict)


def compile_plan(topology: Topology, algorithm: str, kind: CollKind, *, inplace: bool | None = None,
                 root: int | None = None, params: Mapping[str, str] | None = None, chunks: int = 1,
                 instances: int = 1, protocol: Protocol | None = None, min_bytes: int = 0,
                 max_bytes: int = 0, name: str = "", releases: Sequence[Release] | None = None,
                 check: bool = True) -> CompiledPlan:
    """The MSCCL++ counterpart of ``compile_xml``: build and verify the Schedule, lower it to
    a one-sided plan (``collc.compiler.mscclpp.lower``), print it, read the text back and check it.

    Raise CollcError on impossible input (a collective the backend cannot express, a limit);
    ``protocol`` None is ``Protocol.SIMPLE``.  ``check=False`` skips the plan checker (the read-back
    comparison stays): for candidates that are only timed, whose winner is then built checked."""
    from collc.backends.mscclpp import parse_plan, write_plan
    from collc.compiler.mscclpp.lower import PlanOptions, lower_plan
    from collc.compiler.mscclpp.lower import refusal as plan_refusal
    from collc.compiler.mscclpp.placement import refuse_across_hosts
    from collc.compiler.mscclpp.plan import Protocol

    if protocol is None:
        protocol = Protocol.SIMPLE
    why = plan_refusal(kind)
    if why is not None:
        raise LoweringError(why)
    clock = cpu_seconds
    t0 = clock()
    place = DEFAULT_INPLACE.get(kind, False) if inplace is None else inplace
    schedule = build_schedule(algorithm, topology, kind, place, root, params)
    coll, m = schedule.collective, chunks * instances
    check_program_size(coll.nranks, coll.nchunksperloop * m,
                       coll.nranks * (coll.input_chunks + coll.output_chunks + schedule.scratch_chunks) * m,
                       f"{algorithm} on {topology.name} with chunks x instances = {m}", LoweringError)
    t1 = clock()
    try:
        verify_schedule(schedule, topology)
    except VerifyError as exc:
        raise VerifyError(f"{algorithm} cannot run {kind.value} on {topology.name}: {exc}") from None
    t2 = clock()
    opts = PlanOptions(chunks=chunks, instances=instances, protocol=protocol, min_bytes=min_bytes,
                       max_bytes=max_bytes, name=name,
                       domains=tuple(topology.ipc_domain(r) for r in range(topology.nranks)),
                       max_actors=2 * MAX_PLAN_THREADBLOCKS if check else 0)
    plan = lower_plan(schedule, opts)
    refuse_across_hosts(plan, topology)     # a memory channel between IPC domains cannot connect
    t3 = clock()
    text = write_plan(plan)
    t4 = clock()
    parsed = parse_plan(text, "<built>")
    problems = [] if parsed == plan else ["the printed plan does not read back equal to the lowered one"]
    if check:
        problems += check_plan_text(parsed, releases)
    t5 = clock()
    timings = {"frontend": t1 - t0, "verify_schedule": t2 - t1, "lower": t3 - t2, "emit": t4 - t3,
               "check": t5 - t4, **{f"pass:{k}": v for k, v in opts.timings.items()}}
    return CompiledPlan(schedule, parsed, text, problems, timings)


def check_plan_text(plan: Plan, releases: Sequence[Release] | None = None) -> list[str]:
    """The plan checker's errors on ``plan`` for ``releases`` (None: every MSCCL++ release collc models)
    (``collc.check``; one line each)."""
    from collc.check.plan.check import check_plan
    from collc.check.plan.releases import RELEASES

    return [f"[{f.code}] {f.message}" for f in check_plan(plan, "<built>", releases or RELEASES).errors()]


def local_ranks(algorithm: str, topology: Topology, kind: CollKind, params: Mapping[str, str] | None,
                ranks: range | None) -> tuple[int, ...] | None:
    """The ranks a ``--ranks`` build lowers when the algorithm names representatives of its
    symmetry (``Algorithm.orbits``): its own and those, ascending; None (lower every rank)
    otherwise.  Each rank's ops come only from the transfers it takes part in (the scratch pass
    expands a transfer on its two ends), so a schedule of those transfers gives these ranks
    their whole-schedule ops, and the program-wide decisions made over them are every rank's
    (docs/building.md, "Each node builds its own shards")."""
    if ranks is None:
        return None
    reps = orbit_ranks(algorithm, topology, kind, params)
    if reps is None:
        return None
    return tuple(sorted(set(ranks) | set(reps)))


def _partial_report(parsed: ParsedFile, dialect: Dialect, ranks: range | None) -> Report:
    """What one node checks of its own shards: they read back without a diagnostic and hold
    exactly its ranks (the rest -- matching, the executor simulation, the data -- needs every
    rank: ``collc check`` of the assembled directory)."""
    rep = Report(parsed.path, dialect)
    for d in parsed.diagnostics:
        rep.add("lexical" if d.where.startswith("line") else "attribute", str(d), d.kind)
    for where, attr in parsed.missing:
        rep.add("attribute", f'{where}: missing required attribute "{attr}"')
    got = [g.id for g in parsed.program.gpus]
    if ranks is not None and got != list(ranks):
        rep.add("structure", f"the shards hold ranks {got[:8]}, expected {ranks.start}..{ranks.stop - 1}")
    rep.info.update(ngpus=parsed.program.ngpus, ranks=f"{got[0]}-{got[-1]}" if got else "none",
                    check="partial: run collc check on the assembled directory")
    return rep


def pairing_attempts(opts: LowerOptions) -> tuple[LowerOptions, ...]:
    """The threadblock layouts to lower with, in order; the first whose full check passes is
    kept.  Paired tbs (a receive peer with a send peer, which lets fusion forward in one step,
    made only where safe) when ``opts.pair``, then -- a safety net, never reached while the
    pairing rule holds -- separate send and receive tbs, which cannot deadlock (every tb runs
    in step order)."""
    return (opts, replace(opts, pair=False)) if opts.pair else (opts,)


def lower_checked(schedule: Schedule, opts: LowerOptions) -> tuple[Program, str, Report]:
    """Lower, print, read back and check one file, with the layouts of ``compile_xml``
    (:func:`pairing_attempts`); returns the program kept, its text and its report."""
    for attempt in pairing_attempts(opts):
        program = lower(schedule, attempt)
        text = to_xml(program, attempt.dialect)
        report = check_parsed(parse_xml(text, "<built>"), attempt.dialect, root=schedule.collective.root)
        if report.ok:
            break
    return program, text, report


def pairing_blocks(program: Program, coll: Collective, opts: LowerOptions) -> bool:
    """Whether paired threadblocks can block in the executor model (no data, every rank), at
    the size the file check uses: its window's top (legacy: the runtime's default maxBytes).
    Paired tbs put a step's sends before its receives; were a step's sends more pieces than a
    connection holds, a cycle of such tbs could block -- the lowering pairs no such tbs, and
    this is the check of it that a partial build, which cannot run the full check, makes over
    every rank (a full build's check covers it)."""
    if not any(t.send >= 0 and t.recv >= 0 for g in program.gpus for t in g.tbs):
        return False
    model = size_model(opts.proto, program.nchunksperloop, window_top(opts.dialect, opts.max_bytes))
    return not simulate(program, coll, model, data=False, races=False).finished


def sync_files(files: Mapping[Path, str], check: bool, base: Path, owned: Iterable[Path] = ()) -> int:
    """Write generated files, or with ``check`` report those that differ; returns an exit code.

    ``owned`` are directories that hold generated files only: a file there that ``files`` no longer
    names is stale (a window that moved, a candidate that lost) and is deleted, or reported by
    ``check`` -- a runtime loads every file of its directory, so a stale one changes what runs."""
    stale_files = sorted(p for d in owned if d.is_dir() for p in d.iterdir() if p.is_file() and p not in files)
    if check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"differs: {p.relative_to(base)}")
        for p in stale_files:
            print(f"stale: {p.relative_to(base)} (no longer generated)")
        return 1 if stale or stale_files else 0
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        print(f"wrote {p.relative_to(base)}")
    for p in stale_files:
        p.unlink()
        print(f"removed {p.relative_to(base)} (no longer generated)")
    return 0
