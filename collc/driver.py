"""End-to-end compilation: topology + algorithm -> checked MSCCL XML text.

``compile_xml`` is what ``collc build``, the golden-file script, the prebuilt
schedules and the benchmarks all call: build the Schedule, verify it on the
topology, lower it, print it, read the text back and run the full checker on it.
If the paired-threadblock lowering fails its check (a send-first cycle that needs
more buffering than the runtime has), it lowers again with separate send and
receive threadblocks, which cannot deadlock (every tb runs in step order):
``pairing_attempts`` is the one place that decides pairing (lowering never runs the
checker), and ``lower_checked`` applies it to a Schedule for callers without a registry
name (tests, tools).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from collc.backends.msccl_xml import parse_xml, to_xml
from collc.backends.shards import assemble, shard_texts
from collc.compiler.limits import Dialect
from collc.compiler.pipeline import LowerOptions, lower
from collc.compiler.program import Program, Proto
from collc.check import Report, check_parsed
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
                              gpus_per_file=1 if shard else topology.nranks)
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
    first = LowerOptions(chunks=chunks, instances=instances, proto=proto, dialect=dialect, min_bytes=min_bytes,
                         max_bytes=max_bytes, pair=bool(get_algorithm(algorithm).pair_tbs or schedule.tb_pairs),
                         shard=shard, name=name, on_rank=rank_progress)
    for opts in pairing_attempts(first):
        # the first layout whose full check passes is kept
        pair = opts.pair
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


def pairing_attempts(opts: LowerOptions) -> tuple[LowerOptions, ...]:
    """The threadblock layouts to lower with, in order; the first whose full check passes is
    kept.  This is the one place that decides pairing: paired tbs (a receive peer with a send
    peer, which lets fusion forward in one step) when ``opts.pair``, then separate send and
    receive tbs, which cannot deadlock (every tb runs in step order)."""
    return (opts, replace(opts, pair=False)) if opts.pair else (opts,)


def lower_checked(schedule: Schedule, opts: LowerOptions) -> tuple[Program, str, Report]:
    """Lower, print, read back and check one file, deciding pairing as ``compile_xml`` does
    (:func:`pairing_attempts`); returns the program kept, its text and its report."""
    for attempt in pairing_attempts(opts):
        program = lower(schedule, attempt)
        text = to_xml(program, attempt.dialect)
        report = check_parsed(parse_xml(text, "<built>"), attempt.dialect, root=schedule.collective.root)
        if report.ok:
            break
    return program, text, report


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
