"""Many process groups at once: each group's program placed on its members, all running at the
same time on the whole fabric (docs/groups.md, "Many groups at once").

A group's program (built on the group's fabric, file rank ``i`` = the ``i``-th member) is
placed on the physical ranks: its messages go from member to member over the whole fabric's
routes (the routes the group's fabric gives, when it has one: it keeps the switches and links
between members with their numbering order).  Every group's messages share the physical links.

* ``event`` model: :func:`collc.sim.event.simulate_parts` runs all programs in one event
  simulation; a group's time is when its last threadblock finishes.
* ``step`` model: each program's rounds (:func:`collc.sim.lockstep.program_rounds`) run in
  lockstep with the same round of every other group; a round costs alpha plus its busiest
  link's bytes (summed over the groups) over the link's bandwidth; a group's time is the sum
  of the rounds up to its last one.

"Alone" is the same program on the same members with the other groups idle, so the slowdown
``alone / together`` is the contention between groups and nothing else.  :func:`shared_links`
lists the links that messages of two or more groups cross, with their load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collc.compiler.msccl.program import Program
from collc.errors import CollcError
from collc.sim.analysis import BYTES_PER_US_PER_GBPS
from collc.sim.lockstep import program_rounds
from collc.sim.routing import Link, Router
from collc.sim.runner import PROTO_ALPHA, PROTO_BW, ModelParams
from collc.topology import Topology

__all__ = ["Part", "SharedLink", "time_parts", "shared_links"]

#: A program and the topology rank of each of its gpus.
Part = tuple[Program, Sequence[int]]


@dataclass(frozen=True)
class SharedLink:
    """A directed link crossed by messages of two or more groups.  ``load``: bytes it carries per
    byte of message size, all groups together; ``us_per_mib``: the microseconds that load needs
    per MiB of message size at the link's bandwidth (higher is a worse bottleneck)."""

    src: int
    dst: int
    kind: str
    bandwidth: float
    groups: tuple[int, ...]
    load: float
    us_per_mib: float


def _check(parts: Sequence[Part], topology: Topology) -> None:
    if not parts:
        raise CollcError("no group to simulate")
    protos = {p.proto for p, _ in parts}
    if len(protos) > 1:
        raise CollcError(f"the groups' files use different protocols ({', '.join(sorted(x.value for x in protos))}); "
                         f"simulate groups of one protocol at a time")
    owner: dict[int, int] = {}
    for i, (program, ranks) in enumerate(parts):
        if len(ranks) != program.ngpus:
            raise CollcError(f"group {i} has {len(ranks)} members but its file has {program.ngpus} ranks")
        for r in ranks:
            if not 0 <= r < topology.nranks:
                raise CollcError(f"group {i}: rank {r} is not a rank of {topology.name}")
            if r in owner:
                raise CollcError(f"rank {r} is in group {owner[r]} and group {i}; groups must not overlap")
            owner[r] = i


def time_parts(parts: Sequence[Part], topology: Topology, sizes: Sequence[int],
               params: ModelParams) -> list[tuple[float, ...]]:
    """Per size, each group's completion time (us) when all run together (see the module
    docstring); protocols scale alpha and payload as :func:`collc.sim.runner.time_program` does."""
    _check(parts, topology)
    proto = parts[0][0].proto
    router = Router(topology)
    alpha = params.alpha_us * PROTO_ALPHA[proto]
    eff = PROTO_BW[proto]
    if params.link_bw is None:
        scaled, bw = [s / eff for s in sizes], None
    else:
        scaled, bw = [float(s) for s in sizes], params.link_bw * eff
    if params.model == "step":
        return _step_times(parts, router, scaled, alpha, params.hop_latency_us, bw)
    from collc.sim.event import simulate_parts

    return simulate_parts(parts, topology, [max(1, round(x)) for x in scaled], alpha_us=alpha, link_bw=bw,
                          hop_latency_us=params.hop_latency_us, reduce_us_per_byte=params.reduce_us_per_byte,
                          router=router)


def _step_times(parts: Sequence[Part], router: Router, sizes: Sequence[float], alpha: float, hop_latency: float,
                bandwidth: float | None) -> list[tuple[float, ...]]:
    rounds = [program_rounds(p) for p, _ in parts]
    last = [max((r for r, msgs in enumerate(rs) if msgs), default=-1) for rs in rounds]
    fixed = [0.0] * len(parts)
    per_byte = [0.0] * len(parts)      # us per byte of message size
    run_fixed = run_per_byte = 0.0
    for r in range(max(len(rs) for rs in rounds)):
        load: dict[Link, float] = {}     # bytes per byte of message size
        hops = 0.0
        for (program, ranks), rs in zip(parts, rounds):
            if r >= len(rs):
                continue
            for src, dst, cnt in rs[r]:
                shares = router.shares(ranks[src], ranks[dst])
                hops = max(hops, sum(f for _, f in shares))
                for link, frac in shares:
                    load[link] = load.get(link, 0.0) + cnt * frac / program.nchunksperloop
        if load:
            run_fixed += alpha + hop_latency * hops
            run_per_byte += max(x / ((bandwidth if bandwidth is not None else router.capacity(link))
                                     * BYTES_PER_US_PER_GBPS) for link, x in load.items())
        for i in range(len(parts)):
            if r == last[i]:
                fixed[i], per_byte[i] = run_fixed, run_per_byte
    return [tuple(f + b * size for f, b in zip(fixed, per_byte)) for size in sizes]


def shared_links(parts: Sequence[Part], topology: Topology, limit: int = 5) -> list[SharedLink]:
    """The links that messages of two or more groups cross, the most loaded (in time per byte
    of message size) first, at most ``limit``."""
    router = Router(topology)
    load: dict[Link, float] = {}
    users: dict[Link, set[int]] = {}
    for i, (program, ranks) in enumerate(parts):
        for msgs in program_rounds(program):
            for src, dst, cnt in msgs:
                for link, frac in router.shares(ranks[src], ranks[dst]):
                    load[link] = load.get(link, 0.0) + cnt * frac / program.nchunksperloop
                    users.setdefault(link, set()).add(i)
    out = []
    for link, groups in users.items():
        if len(groups) < 2:
            continue
        lk = topology.link(*link)
        assert lk is not None     # the router only crosses the topology's links
        cap = router.capacity(link)
        out.append(SharedLink(link[0], link[1], topology.link_kind(lk), cap, tuple(sorted(groups)), load[link],
                              load[link] * (1 << 20) / (cap * BYTES_PER_US_PER_GBPS)))
    out.sort(key=lambda s: (-s.us_per_mib, s.src, s.dst))
    return out[:limit]
