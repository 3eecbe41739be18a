"""What a ``collc show`` page shows, as plain values (docs/show.md): the schedule as read and
checked, the bytes on every directed link per step, each threadblock's spans at one size and
the per-size series.  ``collc.show.page`` draws them; nothing here imports plotly.

Steps are the schedule's rounds: for an MSCCL XML program the lockstep rounds that the step
model recovers (``collc.sim.lockstep.program_rounds``); for an MSCCL++ plan the rounds of its
puts under the one-sided event model with one unit of latency per message and links too fast
to matter (so a put that waits for a signal goes a round after the put it waits for).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collc.check.findings import Finding
from collc.limits import LIMITS, Dialect, parser_nodes
from collc.compiler.mscclpp.plan import Plan
from collc.compiler.msccl.program import Program
from collc.errors import CollcError
from collc.ir.collective import CollKind
from collc.sim.analysis import bus_bandwidth
from collc.sim.routing import Link, Router
from collc.sim.runner import ModelParams, Row, bound_busbw, rows_for, time_program
from collc.topology import Topology

#: Above this many ranks a page draws aggregates: link load per torus dimension (or link class)
#: instead of every link, and a timeline of sampled ranks (docs/show.md, "Large schedules").
AGGREGATE_RANKS = 256
#: Ranks whose threadblocks a sampled timeline keeps.
SAMPLED_RANKS = 16
#: Most timeline bars a page holds; beyond it the longest are kept (and the page says so).
MAX_BARS = 40_000
#: Most ranks for which the other applicable algorithms are built and timed for the per-size view.
MAX_OTHERS_RANKS = 256

KINDS = ("send", "receive", "reduce", "wait")
#: The latency per message (us) with which a plan's rounds are found: far above a 64-byte message's data time.
ROUND_US = 1e3


class ShowError(CollcError):
    """Bad ``collc show`` input."""


@dataclass(frozen=True)
class Loaded:
    """A schedule as read and checked."""

    path: str
    form: str                       # "xml", "shards" or "plan"
    name: str
    kind: CollKind
    nranks: int
    dialect: str
    program: Program | None
    plan: Plan | None
    ok: bool
    findings: tuple[Finding, ...]
    info: tuple[tuple[str, str], ...]

    def limits_used(self) -> list[tuple[str, str]]:
        """The runtime limits this schedule uses, beside the limit (for the facts table)."""
        if self.program is not None:
            p = self.program
            lim = LIMITS[Dialect(self.dialect)]
            tbs = max(len(g.tbs) for g in p.gpus)
            steps = max((len(t.steps) for g in p.gpus for t in g.tbs), default=0)
            nodes = max(parser_nodes(1 if self.form == "shards" else p.ngpus, len(g.tbs),
                                     sum(len(t.steps) for t in g.tbs)) for g in p.gpus)
            return [("threadblocks per GPU", f"{tbs} of {lim.max_tbs_per_gpu}"),
                    ("steps per threadblock", f"{steps} of {lim.max_steps_per_tb}"),
                    ("channels", f"{p.nchannels} of {lim.max_channels}"),
                    ("parser nodes per rank", f"{nodes} of {lim.max_nodes_per_rank}"),
                    ("chunks per loop", str(p.nchunksperloop)), ("protocol", p.proto.value)]
        assert self.plan is not None
        pl = self.plan
        tbs = max(len(g.threadblocks) for g in pl.gpus)
        ops = max((len(t.ops) for g in pl.gpus for t in g.threadblocks), default=0)
        return [("threadblocks per GPU", str(tbs)), ("ops per threadblock", str(ops)),
                ("protocol", pl.protocol.value), ("message sizes", f"{pl.min_message_size}..{pl.max_message_size}")]


def load(path: str | Path, dialect: Dialect = Dialect.EXECUTOR) -> Loaded:
    """Read and check an XML file, a shard directory or an MSCCL++ plan."""
    from collc.backends.shards import is_shard_dir, read_shards

    p = Path(path)
    if is_shard_dir(p):
        from collc.check import check_parsed
        parsed = read_shards(p)
        rep = check_parsed(parsed, dialect, sharded=True)
        return _of_program(str(p), "shards", parsed.program, dialect, rep.ok, rep.findings, rep.info)
    if p.is_dir():
        raise ShowError(f"{p}: a directory that is no shard directory (rank-N/ subdirectories of one XML each)")
    from collc.backends.mscclpp import is_plan_file
    if is_plan_file(p):
        from collc.backends.mscclpp import read_plan
        from collc.check.plan.check import check_plan
        plan = read_plan(p)
        prep = check_plan(plan, str(p))
        return Loaded(str(p), "plan", plan.name, CollKind.parse(plan.collective), plan.nranks, "mscclpp", None, plan,
                      prep.ok, tuple(prep.findings), _info(prep.info))
    from collc.backends.msccl_xml import read_xml
    from collc.check import check_parsed
    parsed = read_xml(p)
    rep = check_parsed(parsed, dialect)
    return _of_program(str(p), "xml", parsed.program, dialect, rep.ok, rep.findings, rep.info)


def _info(info: dict[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v)) for k, v in sorted(info.items()))


def _of_program(path: str, form: str, program: Program, dialect: Dialect, ok: bool, findings: Sequence[Finding],
                info: dict[str, object]) -> Loaded:
    return Loaded(path, form, program.name, program.kind, program.ngpus, dialect.value, program, None, ok,
                  tuple(findings), _info(info))


# --------------------------------------------------------------------------- link load per step
@dataclass(frozen=True)
class StepLoads:
    """Bytes on every directed link in each step at ``size_bytes`` (links without traffic absent)."""

    size_bytes: int
    steps: tuple[dict[Link, float], ...]
    messages: tuple[int, ...]

    def busiest(self, step: int, router: Router) -> Link | None:
        """The link of the step with the longest transfer time (bytes / capacity); ties by link."""
        loads = self.steps[step]
        if not loads:
            return None
        return max(sorted(loads), key=lambda lk: loads[lk] / router.capacity(lk))

    def total(self) -> dict[Link, float]:
        out: dict[Link, float] = {}
        for loads in self.steps:
            for lk, b in loads.items():
                out[lk] = out.get(lk, 0.0) + b
        return out


def step_loads(loaded: Loaded, topology: Topology, size: int) -> StepLoads:
    """Link loads per step of the schedule at ``size`` bytes (see the module docstring)."""
    router = Router(topology)
    msgs: list[list[tuple[int, int, float]]] = []
    if loaded.program is not None:
        from collc.sim.lockstep import program_rounds
        chunk = size / max(loaded.program.nchunksperloop, 1)
        msgs = [[(s, d, c * chunk) for s, d, c in rnd] for rnd in program_rounds(loaded.program)]
    else:
        assert loaded.plan is not None
        from collc.sim.plan_event import trace_plan
        # a small size and a large latency: the data time is a sliver of each round (bytes scale linearly)
        small = 64
        _, names, spans = trace_plan(loaded.plan, topology, small, alpha_us=ROUND_US)
        for tb, kind, start, _end, peer, nbytes in spans:
            if kind != "send" or peer < 0:
                continue
            nbytes *= size / small
            rnd = int(start // ROUND_US)
            while len(msgs) <= rnd:
                msgs.append([])
            msgs[rnd].append((names[tb][0], peer, nbytes))
    steps: list[dict[Link, float]] = []
    for messages in msgs:
        loads: dict[Link, float] = {}
        for src, dst, nbytes in messages:
            for lk, frac in router.shares(src, dst):
                loads[lk] = loads.get(lk, 0.0) + nbytes * frac
        steps.append(loads)
    return StepLoads(size, tuple(steps), tuple(len(r) for r in msgs))


# --------------------------------------------------------------------------- threadblock timeline
@dataclass(frozen=True)
class Bar:
    rank: int
    tb: int
    kind: str           # one of KINDS
    start_us: float
    end_us: float
    peer: int           # -1: none
    nbytes: float


@dataclass(frozen=True)
class Timeline:
    size_bytes: int
    time_us: float
    rows: tuple[tuple[int, int], ...]      # (rank, tb) of every row shown
    bars: tuple[Bar, ...]
    ranks_total: int
    sampled: bool                          # only some ranks' rows are shown
    bars_dropped: int = 0


def timeline(loaded: Loaded, topology: Topology, size: int, params: ModelParams) -> Timeline:
    """Each threadblock's spans under the event model at ``size`` (sampled ranks above
    :data:`AGGREGATE_RANKS`)."""
    if loaded.program is not None:
        from collc.sim.event import trace_program
        from collc.sim.runner import PROTO_ALPHA
        tr = trace_program(loaded.program, topology, size,
                           alpha_us=params.alpha_us * PROTO_ALPHA[loaded.program.proto], link_bw=params.link_bw,
                           hop_latency_us=params.hop_latency_us, reduce_us_per_byte=params.reduce_us_per_byte)
        time_us, names, spans = tr.time_us, tr.names, list(tr.spans)
    else:
        assert loaded.plan is not None
        from collc.sim.plan_event import trace_plan
        time_us, names, spans = trace_plan(loaded.plan, topology, size, alpha_us=params.alpha_us,
                                           link_bw=params.link_bw, hop_latency_us=params.hop_latency_us,
                                           reduce_us_per_byte=params.reduce_us_per_byte, proxy_us=params.proxy_us)
    n = loaded.nranks
    keep: set[int] | None = None
    if n > AGGREGATE_RANKS:
        keep = {round(i * (n - 1) / (SAMPLED_RANKS - 1)) for i in range(SAMPLED_RANKS)}
        last = max(spans, key=lambda s: (s[3], -s[0]), default=None)
        if last is not None:
            keep.add(names[last[0]][0])     # the rank that finishes last
    bars: list[Bar] = []
    for tb, kind, start, end, peer, nbytes in sorted(spans, key=lambda s: (s[0], s[2], s[1])):
        rank, tbid = names[tb]
        if keep is not None and rank not in keep:
            continue
        prev = bars[-1] if bars else None
        if (prev is not None and prev.rank == rank and prev.tb == tbid and prev.kind == kind == "wait"
                and abs(prev.end_us - start) < 1e-9):
            bars[-1] = Bar(rank, tbid, kind, prev.start_us, end, -1, 0.0)   # one wait, however often woken
            continue
        bars.append(Bar(rank, tbid, kind, start, end, peer, nbytes))
    dropped = 0
    if len(bars) > MAX_BARS:
        dropped = len(bars) - MAX_BARS
        bars = sorted(sorted(bars, key=lambda b: b.start_us - b.end_us)[:MAX_BARS],
                      key=lambda b: (b.rank, b.tb, b.start_us))
    rows = tuple(nm for nm in names if keep is None or nm[0] in keep)
    return Timeline(size, time_us, rows, tuple(bars), n, keep is not None, dropped)


# --------------------------------------------------------------------------- per-size view
@dataclass
class SizeView:
    sizes: list[int]
    label: str
    rows: list[Row]
    bound_busbw: list[float]
    model: str
    others: dict[str, list[Row]] = field(default_factory=dict)
    others_note: str = ""
    measured: dict[str, list[tuple[int, float]]] = field(default_factory=dict)   # label -> (size, busbw)


def size_view(loaded: Loaded, topology: Topology, sizes: Sequence[int], params: ModelParams,
              others: bool = True) -> SizeView:
    """Predicted time, algbw and busbw of the schedule over ``sizes``, the bound and (``others``)
    the other algorithms that apply, as ``collc compare`` times them."""
    from collc.tuning import model_summary

    sizes = list(sizes)
    if loaded.program is not None:
        times = time_program(loaded.program, topology, sizes, params)
        rows = rows_for(loaded.program, sizes, times)
        model = model_summary(params, topology)
    else:
        assert loaded.plan is not None
        from collc.sim.plan_event import time_plan
        ev = ModelParams("event", params.alpha_us, params.link_bw, params.hop_latency_us, params.reduce_us_per_byte,
                         params.proxy_us)
        times = time_plan(loaded.plan, topology, sizes, alpha_us=ev.alpha_us, link_bw=ev.link_bw,
                          hop_latency_us=ev.hop_latency_us, reduce_us_per_byte=ev.reduce_us_per_byte,
                          proxy_us=ev.proxy_us)
        rows = []
        for size, t in zip(sizes, times):
            algbw, busbw = bus_bandwidth(loaded.kind, loaded.nranks, size, t) if t > 0 else (math.inf, math.inf)
            rows.append(Row(size, t, algbw, busbw, loaded.plan.min_message_size <= size <= loaded.plan.max_message_size))
        model = "one-sided event model (plans), " + model_summary(ev, topology)
    view = SizeView(sizes, Path(loaded.path).name, rows, bound_busbw(loaded.kind, topology, sizes, params), model)
    if not others:
        view.others_note = "other algorithms: not computed (--no-others)"
    elif topology.nranks > MAX_OTHERS_RANKS:
        view.others_note = (f"other algorithms: not computed above {MAX_OTHERS_RANKS} ranks (each is a full build); "
                            f"run collc compare for them")
    else:
        view.others, view.others_note = other_algorithms(topology, loaded.kind, sizes, params)
    return view


def other_algorithms(topology: Topology, kind: CollKind, sizes: Sequence[int],
                     params: ModelParams) -> tuple[dict[str, list[Row]], str]:
    """Every registered algorithm that applies, built, checked and timed as ``collc compare`` does."""
    from collc.frontends.registry import algorithms
    from collc.tuning import Candidate, compare

    names = [a.name for a in algorithms() if a.refusal_of_kind(topology, kind) is None]
    if not names:
        return {}, "other algorithms: none applies"
    try:
        cmp = compare(topology, kind, [Candidate(n) for n in names], list(sizes), params)
    except CollcError as exc:
        return {}, f"other algorithms: none could be built ({exc})"
    note = f"other algorithms: as collc compare times them ({cmp.model})"
    if cmp.failed:
        note += "; not compared: " + ", ".join(sorted(cmp.failed))
    return dict(cmp.series), note
