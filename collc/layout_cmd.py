"""``--layout`` / ``--groups`` on ``simulate``, ``build`` and ``tune``: many process groups of one
job (docs/groups.md, "Layouts", "Many groups at once", "One file for many groups").

The commands stay thin: the groups come from :mod:`collc.topology.layout`, the timing from
:mod:`collc.sim.concurrent`, the files from the driver."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from collc.compiler.msccl.program import Program
from collc.errors import CollcError, TopologyError, UsageError
from collc.inputs import check_build_ranks
from collc.ir.collective import CollKind
from collc.topology import Topology, parse_spec
from collc.topology.groups import describe_members, group_topology, split_group
from collc.topology.layout import GroupSet, Layout, isomorphic, parse_group_list, parse_layout

if TYPE_CHECKING:
    from collc.sim.concurrent import SharedLink

__all__ = ["layout_sets", "simulate_layout", "build_layout", "tune_layout"]

#: ``build --layout`` and ``simulate`` compare files at this size (the bandwidth regime).
LOSS_SIZE = 1 << 30


def layout_sets(args: argparse.Namespace) -> tuple[Topology, Layout, list[GroupSet]]:
    """The whole fabric, the layout (``--layout`` or ``--groups``) and the group sets ``--group``
    picks (all of them without it)."""
    if args.layout is not None and args.groups is not None:
        raise UsageError("give --layout or --groups, not both")
    if split_group(args.topology)[1] is not None:
        raise UsageError(f"--topology {args.topology[:60]!r} names one group (after '@'); with --layout or "
                         f"--groups give the whole fabric")
    topo = parse_spec(args.topology)
    check_build_ranks(topo.nranks)
    if args.layout is not None:
        layout = parse_layout(args.layout, topo)
    else:
        if args.group is not None:
            raise UsageError("--group picks a dimension of --layout (tp, dp, pp); --groups lists its groups itself")
        layout = parse_group_list(args.groups, topo)
    sets = [layout.set_named(args.group)] if args.group is not None else list(layout.sets)
    return topo, layout, sets


# --------------------------------------------------------------------------- files per group
@dataclass(frozen=True)
class _Placed:
    """The file each group of a set runs: ``source[i]`` is the group whose fabric it was built on
    (``i`` itself: its own file) or -1 for a file given on the command line."""

    programs: tuple[Program, ...]
    source: tuple[int, ...]


def _own_files(topo: Topology, gs: GroupSet, build: Callable[[Topology], Program]) -> _Placed:
    """Each group's own file, built on its own fabric; one build per class of isomorphic groups.
    A group with no fabric of its own runs the file of the set's first group that has one."""
    programs: list[Program | None] = []
    source: list[int] = []
    built: list[int] = []          # groups whose file was built (one per isomorphism class)
    for i, members in enumerate(gs.groups):
        try:
            fabric = group_topology(topo, members)
        except TopologyError:
            programs.append(None)
            source.append(-1)
            continue
        twin = next((j for j in built if len(gs.groups[j]) == len(members) and isomorphic(topo, gs.groups[j],
                                                                                           members)), None)
        if twin is not None:
            programs.append(programs[twin])
            source.append(source[twin])
            continue
        programs.append(build(fabric))
        source.append(i)
        built.append(i)
    for i, members in enumerate(gs.groups):
        if programs[i] is None:
            donor = next((j for j in built if len(gs.groups[j]) == len(members)), None)
            if donor is None:
                raise UsageError(f"no {'' if gs.name == 'g' else gs.name + ' '}group of {len(members)} ranks on {topo.name} has a fabric of its own "
                                 f"(members reach each other only through other GPUs, e.g. group "
                                 f"{describe_members(members)}); build the file on another group and give it "
                                 f"as `collc simulate FILE --topology {topo.name} ...`")
            programs[i], source[i] = programs[donor], donor
    return _Placed(tuple(p for p in programs if p is not None), tuple(source))


def _given_file(gs: GroupSet, program: Program) -> _Placed:
    return _Placed(tuple(program for _ in gs.groups), tuple(-1 for _ in gs.groups))


def _builder(args: argparse.Namespace, kind: CollKind) -> Callable[[Topology], Program]:
    from collc.driver import compile_xml

    def build(fabric: Topology) -> Program:
        check_build_ranks(fabric.nranks)
        built = compile_xml(fabric, args.algorithm, kind, inplace=getattr(args, "inplace", None))
        if not built.report.ok:
            raise CollcError(f"{args.algorithm} on {fabric.name} fails its check: {built.report.errors()[0].message}")
        return built.program
    return build


# --------------------------------------------------------------------------- simulate
def simulate_layout(args: argparse.Namespace) -> int:
    """``collc simulate [FILE] --topology SPEC --layout L|--groups G;G [--group DIM]``."""
    from collc.sim.analysis import bus_bandwidth
    from collc.sim.concurrent import shared_links, time_parts
    from collc.sim.runner import ModelParams, human, parse_sizes
    from collc.tuning import model_summary

    params = ModelParams(args.model, args.alpha, args.link_bw, args.hop_latency, args.reduce_cost)
    sizes = parse_sizes(args.sizes)
    if args.plot:
        raise UsageError("--plot draws one file's busbw; with --layout or --groups the table is the output")
    given: Program | None = None
    if args.path is not None:
        if args.algorithm is not None or args.collective is not None:
            raise UsageError("give FILE or --algorithm with --collective, not both")
        given = _read_program(args)
    elif args.algorithm is None or args.collective is None:
        raise UsageError("simulate with --layout or --groups needs FILE (one file for every group of its size, as "
                         "the runtime loads it) or --algorithm and --collective (each group's own file)")
    topo, layout, sets = layout_sets(args)
    if given is not None:
        sets = [s for s in sets if all(len(g) == given.ngpus for g in s.groups)]
        if not sets:
            raise UsageError(f"{args.path} has {given.ngpus} ranks: no group of {layout.text[:60]!r} has that size")
        kind = given.kind
    else:
        kind = CollKind.parse(str(args.collective))
        build = _builder(args, kind)
    report: list[_SetReport] = []
    for gs in sets:
        placed = _given_file(gs, given) if given is not None else _own_files(topo, gs, build)
        parts = list(zip(placed.programs, gs.groups))
        together = time_parts(parts, topo, sizes, params)
        alone = [[t[0] for t in time_parts([p], topo, sizes, params)] for p in parts]
        rows = []
        for i, members in enumerate(gs.groups):
            for k, size in enumerate(sizes):
                a = bus_bandwidth(kind, len(members), size, alone[i][k])[1]
                b = bus_bandwidth(kind, len(members), size, together[k][i])[1]
                rows.append(_Row(gs.label(i), members, size,
                                 "given" if placed.source[i] < 0 else gs.label(placed.source[i]), round(a, 4),
                                 round(b, 4), round(together[k][i] / alone[i][k], 4) if alone[i][k] > 0 else 1.0))
        report.append(_SetReport(gs, tuple(rows), tuple(shared_links(parts, topo))))
    if args.json:
        print(json.dumps({"topology": topo.name, "layout": layout.text, "collective": kind.value,
                          "model": params.model, "alpha_us": params.alpha_us, "link_bw_GBps": params.link_bw,
                          "sets": [r.to_json() for r in report]}, indent=2, sort_keys=True))
        return 0
    for rep in report:
        gs = rep.set
        what = "" if gs.name == "g" else f"{gs.name} "
        print(f"{kind.value}: {len(gs.groups)} {what}groups of {len(gs.groups[0])} ranks on {topo.name} "
              f"at the same time ({model_summary(params, topo)})")
        print(f"{'size':>8s} {'slowest alone':>14s} {'slowest together':>17s} {'worst slowdown':>15s}  (busbw GB/s)")
        for size in sizes:
            at = [r for r in rep.rows if r.size == size]
            print(f"{human(size):>8s} {min(r.alone for r in at):14.3f} {min(r.together for r in at):17.3f} "
                  f"{max(r.slowdown for r in at):15.2f}")
        print(f"per group at {human(sizes[-1])} (file: the group whose fabric it was built on; 'given': FILE):")
        print(f"{'group':8s} {'members':16s} {'file':8s} {'busbw alone':>12s} {'together':>9s} {'slowdown':>8s}")
        for r in rep.rows:
            if r.size == sizes[-1]:
                print(f"{r.group:8s} {describe_members(r.members)[:16]:16s} {r.file:8s} {r.alone:12.3f} "
                      f"{r.together:9.3f} {r.slowdown:8.2f}")
        if not rep.shared:
            print("shared links: none (no link carries messages of two groups)")
            continue
        print("shared links, most loaded first (load: bytes per byte of message size, all groups):")
        for lk in rep.shared:
            ends = [f"{'rank' if v < topo.nranks else 'switch'} {v}" for v in (lk.src, lk.dst)]
            print(f"  {ends[0]} -> {ends[1]} ({lk.kind}, {lk.bandwidth:g} GB/s): load {lk.load:g}, "
                  f"{lk.us_per_mib:.1f} us per MiB, groups {','.join(gs.label(g) for g in lk.groups)}")
    return 0


@dataclass(frozen=True)
class _Row:
    """One group at one size: busbw (GB/s) alone and with every group of its set at once."""

    group: str
    members: tuple[int, ...]
    size: int
    file: str
    alone: float
    together: float
    slowdown: float

    def to_json(self) -> dict[str, object]:
        return {"group": self.group, "members": list(self.members), "size": self.size, "file": self.file,
                "busbw_alone_GBps": self.alone, "busbw_together_GBps": self.together, "slowdown": self.slowdown}


@dataclass(frozen=True)
class _SetReport:
    set: GroupSet
    rows: tuple[_Row, ...]
    shared: tuple[SharedLink, ...]

    def to_json(self) -> dict[str, object]:
        return {"set": self.set.name, "groups": len(self.set.groups), "rows": [r.to_json() for r in self.rows],
                "shared_links": [{"src": s.src, "dst": s.dst, "kind": s.kind, "bandwidth_GBps": s.bandwidth,
                                  "groups": [self.set.label(g) for g in s.groups], "load": round(s.load, 4),
                                  "us_per_MiB": round(s.us_per_mib, 4)} for s in self.shared]}


def _read_program(args: argparse.Namespace) -> Program:
    from pathlib import Path

    from collc.backends.msccl_xml import read_xml
    from collc.check import check_parsed
    from collc.limits import Dialect
    from collc.inputs import show

    path = Path(args.path)
    if path.suffix == ".json":
        raise UsageError(f"{show(path)}: --layout and --groups time MSCCL XML files (plans: one group at a time)")
    parsed = read_xml(path)
    report = check_parsed(parsed, Dialect(args.dialect))
    if not report.ok:
        raise UsageError(f"{show(path)} fails its check ([{report.errors()[0].code}] {report.errors()[0].message})")
    return parsed.program


# --------------------------------------------------------------------------- build
def build_layout(args: argparse.Namespace, build: Callable[[argparse.Namespace], int]) -> int:
    """``collc build --layout L --group DIM`` (or ``--groups``): the file for the communicator size
    of DIM's groups, built on its first group, and whether it is right for every other group."""
    from collc.sim.analysis import bus_bandwidth
    from collc.sim.concurrent import time_parts
    from collc.sim.runner import ModelParams

    topo, layout, sets = layout_sets(args)
    if len(sets) > 1:
        raise UsageError(f"layout {layout.text[:60]!r} has {', '.join(s.name for s in sets)} groups: name the "
                         f"communicator of the file with --group {'|'.join(s.name for s in sets)}")
    gs = sets[0]
    sizes = sorted({len(g) for g in gs.groups})
    if len(sizes) > 1:
        raise UsageError(f"the groups have {', '.join(map(str, sizes))} ranks: a file serves one communicator size; "
                         f"build one per size with --topology {topo.name}@GROUP")
    ref = gs.groups[0]
    args.topology = f"{args.topology}@{describe_members(ref)}"
    args.layout = args.groups = args.group = None
    rc = build(args)
    if rc != 0:
        return rc
    kind = CollKind.parse(args.collective)
    twins: list[int] = []
    others: list[tuple[int, str]] = []
    for i, members in enumerate(gs.groups[1:], 1):
        try:
            same = isomorphic(topo, ref, members)
        except TopologyError:
            others.append((i, "no fabric of its own (its members reach each other only through other GPUs)"))
            continue
        if same:
            twins.append(i)
        else:
            others.append((i, "its fabric differs"))
    n = len(gs.groups)
    print(f"{gs.name}: {n} groups of {len(ref)} ranks; the runtime picks a file by collective and communicator "
          f"size, so all {n} load this one (file rank i = the i-th member of each group)")
    if not others:
        print(f"isomorphic: all {n} {gs.name} groups see the same fabric (member order kept): this file is right "
              f"for every one")
        return 0
    print(f"not isomorphic: the file is right for {gs.label(0)} ({describe_members(ref)})"
          + (f" and {', '.join(gs.label(i) for i in twins)}" if twins else "")
          + f"; at {LOSS_SIZE >> 30} GiB (event model, each group alone):")
    file_prog = _builder(args, kind)(group_topology(topo, ref))
    params = ModelParams()
    for i, why in others:
        members = gs.groups[i]
        with_file = bus_bandwidth(kind, len(members), LOSS_SIZE,
                                  time_parts([(file_prog, members)], topo, [LOSS_SIZE], params)[0][0])[1]
        own = ""
        try:
            fabric = group_topology(topo, members)
            own_prog = _builder(args, kind)(fabric)
            own_bw = bus_bandwidth(kind, len(members), LOSS_SIZE,
                                   time_parts([(own_prog, members)], topo, [LOSS_SIZE], params)[0][0])[1]
            own = f", {own_bw:.2f} GB/s with its own file ({args.algorithm} on {fabric.name})"
        except TopologyError:
            own = ""         # the reason is given: no fabric of its own
        except CollcError as exc:
            own = f"; no file of its own: {str(exc)[:120]}"
        print(f"  {gs.label(i)} ({describe_members(members)}): {why}: busbw {with_file:.2f} GB/s with this file{own}")
    return 0


# --------------------------------------------------------------------------- tune
def tune_layout(args: argparse.Namespace, tune: Callable[[argparse.Namespace, Callable[[Program, Topology],
                                                                                        list[float]]], int]) -> int:
    """``collc tune --layout L --group DIM``: candidates built on the first group's fabric, each
    timed on every group of DIM at once (the same file, as the runtime loads it); a size's
    figure is its slowest group's."""
    from collc.sim.concurrent import time_parts
    from collc.sim.runner import ModelParams, parse_sizes

    topo, layout, sets = layout_sets(args)
    if len(sets) > 1:
        raise UsageError(f"layout {layout.text[:60]!r} has {', '.join(s.name for s in sets)} groups: name the "
                         f"communicator to tune with --group {'|'.join(s.name for s in sets)}")
    gs = sets[0]
    if len({len(g) for g in gs.groups}) > 1:
        raise UsageError("the groups differ in size: a file serves one communicator size; tune one size at a time")
    params = ModelParams(args.model, args.alpha, args.link_bw, args.hop_latency, args.reduce_cost)
    parse_sizes(args.sizes)       # a bad value is refused before any build
    args.topology = f"{args.topology}@{describe_members(gs.groups[0])}"
    args.layout = args.groups = args.group = None
    if not args.json:
        print(f"each candidate is built on {gs.label(0)}'s fabric and timed on all {len(gs.groups)} "
              f"{'' if gs.name == 'g' else gs.name + ' '}groups at once (the same file: the runtime loads one per "
              f"communicator size); a size's figure is its slowest group's")

    def together(program: Program, _fabric: Topology) -> list[float]:
        times = time_parts([(program, g) for g in gs.groups], topo, parse_sizes(args.sizes), params)
        return [max(t) for t in times]
    return tune(args, together)
