"""End-to-end compilation: topology + algorithm -> checked MSCCL XML text.

``compile_xml`` is what ``collc build``, the golden-file script, the prebuilt
schedules and the benchmarks all call: build the Schedule, verify it on the
topology, lower it, print it, read the text back and run the full checker on it.
If the paired-threadblock lowering fails its check (a send-first cycle that needs
more buffering than the runtime has), it lowers again with separate send and
receive threadblocks, which cannot deadlock (every tb runs in step order).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from collc.backends.msccl_xml import parse_xml, to_xml
from collc.backends.mscclpp import parse_plan, write_plan
from collc.backends.shards import assemble, shard_texts
from collc.check.plan_check import check_plan
from collc.compiler.limits import Dialect
from collc.compiler.oneside import PlanOptions, lower_plan
from collc.compiler.oneside import refusal as plan_refusal
from collc.compiler.plan import Plan, Protocol
from collc.compiler.pipeline import LowerOptions, lower
from collc.compiler.program import Program, Proto
from collc.compiler.verify import Report, check_parsed
from collc.errors import LoweringError, NodeBudgetError, VerifyError
from collc.inputs import check_program_size
from collc.frontends.registry import build_schedule, get as get_algorithm
from collc.ir.collective import CollKind
from collc.ir.schedule import Schedule
from collc.ir.verify import verify_schedule
from collc.topology import Topology

# PyTorch calls allreduce/broadcast/reduce in place and the *_tensor collectives out of place.
DEFAULT_INPLACE = {CollKind.ALLREDUCE: True, CollKind.BROADCAST: True, CollKind.REDUCE: True}


@dataclass
class Compiled:
    schedule: Schedule
    program: Program
    text: str                      # the single file ("" when sharded)
    report: Report
    timings: dict[str, float] = field(default_factory=dict)
    shards: dict[int, str] | None = None   # rank -> file text, with shard=True


def compile_xml(topology: Topology, algorithm: str, kind: CollKind, *, inplace: bool | None = None,
                root: int | None = None, params: Mapping[str, str] | None = None, chunks: int = 1,
                instances: int = 1, proto: Proto = Proto.SIMPLE, dialect: Dialect = Dialect.EXECUTOR,
                min_bytes: int = 0, max_bytes: int = 0, name: str = "",
                progress: Callable[[str], None] | None = None, shard: bool = False,
                rank_progress: Callable[[int, int], None] | None = None) -> Compiled:
    """Raise CollcError on impossible input; return the text and its check report.

    ``progress`` (if given) is called with the name of each stage as it starts, and
    ``rank_progress`` with (ranks lowered, ranks) as the lowering goes (about 100 times).
    """
    # The IR and the Program are millions of small acyclic objects at 4096 ranks: the
    # cyclic collector would rescan them over and over for nothing, so it pauses here.
    enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            return _compile(topology, algorithm, kind, inplace=inplace, root=root, params=params, chunks=chunks,
                            instances=instances, proto=proto, dialect=dialect, min_bytes=min_bytes,
                            max_bytes=max_bytes, name=name, progress=progress, shard=shard,
                            rank_progress=rank_progress)
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
            return _compile(topology, algorithm, kind, inplace=inplace, root=root, params={**given, **retry},
                            chunks=chunks, instances=instances, proto=proto, dialect=dialect,
                            min_bytes=min_bytes, max_bytes=max_bytes, name=name, progress=progress, shard=shard,
                            rank_progress=rank_progress)
    finally:
        if enabled:
            gc.enable()


def _compile(topology: Topology, algorithm: str, kind: CollKind, *, inplace: bool | None, root: int | None,
             params: Mapping[str, str] | None, chunks: int, instances: int, proto: Proto, dialect: Dialect,
             min_bytes: int, max_bytes: int, name: str, progress: Callable[[str], None] | None,
             rank_progress: Callable[[int, int], None] | None,
             shard: bool) -> Compiled:
    clock = time.perf_counter
    timings: dict[str, float] = {}
    tell = progress or (lambda stage: None)
    tell("frontend")
    t0 = clock()
    place = DEFAULT_INPLACE.get(kind, False) if inplace is None else inplace
    schedule = build_schedule(algorithm, topology, kind, place, root, params,
                              gpus_per_file=1 if shard else topology.nranks, chunks=chunks, instances=instances)
    coll, m = schedule.collective, chunks * instances
    check_program_size(coll.nranks, coll.nchunksperloop * m,
                       coll.nranks * (coll.input_chunks + coll.output_chunks + schedule.scratch_chunks) * m,
                       f"{algorithm} on {topology.name} with chunks x instances = {m}", LoweringError)
    t1 = clock()
    tell("verify schedule")
    try:
        verify_schedule(schedule, topology)
    except VerifyError as exc:
        raise VerifyError(f"{algorithm} cannot run {kind.value} on {topology.name}: {exc}") from None
    timings.update(frontend=t1 - t0, verify_schedule=clock() - t1)
    result: Compiled | None = None
    for pair in ((True, False) if get_algorithm(algorithm).pair_tbs or schedule.tb_pairs else (False,)):
        # the full check below decides pairing, so lower() need not simulate it first
        opts = LowerOptions(chunks=chunks, instances=instances, proto=proto, dialect=dialect,
                            min_bytes=min_bytes, max_bytes=max_bytes, pair=pair, check_pairing=False,
                            shard=shard, name=name, on_rank=rank_progress)
        tell("lower" if pair else "lower (unpaired tbs)")
        t2 = clock()
        program = lower(schedule, opts)
        t3 = clock()
        tell("emit")
        shards = shard_texts(program, dialect) if shard else None
        text = "" if shard else to_xml(program, dialect)
        # From here on the steps read back from the text stand for the lowered ones (equal by
        # construction, and what the check judges): at 4096 ranks one copy less is ~1 GB less.
        header = replace(program, gpus=())
        del program
        t4 = clock()
        tell("check")
        if shards is not None:
            parsed = assemble(parse_xml(t, f"<rank {r}>") for r, t in shards.items())
        else:
            parsed = parse_xml(text, "<built>")
        report = check_parsed(parsed, dialect, root=schedule.collective.root, sharded=shard)
        t5 = clock()
        timings.update(lower=t3 - t2, emit=t4 - t3, check=t5 - t4)
        timings.update({f"pass:{k}": v for k, v in opts.timings.items()})
        result = Compiled(schedule, replace(header, gpus=parsed.program.gpus), text, report, dict(timings), shards)
        if report.ok:
            break
    assert result is not None
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
                 instances: int = 1, protocol: Protocol = Protocol.SIMPLE, min_bytes: int = 0,
                 max_bytes: int = 0, name: str = "") -> CompiledPlan:
    """The MSCCL++ counterpart of ``compile_xml``: build and verify the Schedule, lower it to
    a one-sided plan (``collc.compiler.oneside``), print it, read the text back and check it.

    Raise CollcError on impossible input (a collective the backend cannot express, a limit)."""
    why = plan_refusal(kind)
    if why is not None:
        raise LoweringError(why)
    clock = time.perf_counter
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
                       max_bytes=max_bytes, name=name)
    plan = lower_plan(schedule, opts)
    t3 = clock()
    text = write_plan(plan)
    t4 = clock()
    parsed = parse_plan(text, "<built>")
    problems = [] if parsed == plan else ["the printed plan does not read back equal to the lowered one"]
    problems += check_plan_text(parsed)
    t5 = clock()
    timings = {"frontend": t1 - t0, "verify_schedule": t2 - t1, "lower": t3 - t2, "emit": t4 - t3,
               "check": t5 - t4, **{f"pass:{k}": v for k, v in opts.timings.items()}}
    return CompiledPlan(schedule, parsed, text, problems, timings)


def check_plan_text(plan: Plan) -> list[str]:
    """The plan checker's errors on ``plan`` (``collc.check``; one line each)."""
    return [f"[{f.code}] {f.message}" for f in check_plan(plan, "<built>").errors()]


def sync_files(files: Mapping[Path, str], check: bool, base: Path) -> int:
    """Write generated files, or with ``check`` report those that differ; returns an exit code."""
    if check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"differs: {p.relative_to(base)}")
        return 1 if stale else 0
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        print(f"wrote {p.relative_to(base)}")
    return 0
