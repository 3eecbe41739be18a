"""HDRM: halving-doubling with rank mapping on a BiGraph (the MultiTree paper's HDRM baseline).

Family page: docs/recursive-doubling.md (what it does, the paper, the check values and their tests).

Collective: allreduce.  Topology: BiGraph ``bigraph:MxS`` (Alibaba EFLOPS): M ranks
on each of S switches, the switches in two halves of S/2 ("upper", "lower") with a
link between every upper and every lower switch.  The structure is read from the
links (each rank has one switch; the switch graph must be complete bipartite with
equal halves and M ranks per switch), so any spec or file with that shape works.
Needs M and S/2 powers of two with M <= S/2 (otherwise no contention-free rank map
exists: an upper switch's M ranks must reach M different lower switches).

Algorithm (EFLOPS; MultiTree ISCA'21 sections I, II-C, VI;
docs/recursive-doubling.md): Rabenseifner's recursive-halving reduce-scatter (log2 N steps, partner
``v xor N/2^(k+1)`` in step k, sending the half it does not keep) then
recursive-doubling allgather (log2 N steps), chunk factor N, ``2 log2 N`` steps
(plus one local copy step out of place), cost ``2 log2 N alpha + 2 (N-1)/N M/b``.
The rank map places logical rank ``v`` so that every pair of every step joins an
upper-switch rank with a lower-switch rank and no switch-to-switch link carries two
messages in one step:

* half = bit parity of ``v`` (flipping any one bit changes the half);
* ``x`` = the low ``log2 N - 1`` bits of ``v``, split as ``x = hi * M + lo``;
* upper half: switch ``hi``, slot ``lo``; lower half: switch ``hi xor lo``, slot ``lo``.

The partner of ``v`` flips one bit of ``x`` (or none, for the top bit), so an upper
switch's M ranks (same ``hi``, every ``lo``) always meet M distinct lower switches.
Every transfer therefore crosses exactly 3 links (rank, upper switch, lower switch,
rank), contention-free, and never uses a same-switch 1-hop path: the paper's reason
HDRM loses to MultiTree on small messages.  This map is ours; the paper's artifact
builds an equivalent one "from base pairs with bit-parity swaps and shifts".

>>> from collc.topology import Topology
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> m, s = 4, 8   # bigraph:4x8: ranks 0..31, switch 32 + r // 4, switches 32..35 upper
>>> links = [{"src": r, "dst": m * s + r // m, "bidirectional": True} for r in range(m * s)]
>>> links += [{"src": m * s + u, "dst": m * s + w, "bidirectional": True}
...           for u in range(s // 2) for w in range(s // 2, s)]
>>> topo = Topology.from_dict({"name": "bigraph:4x8", "nranks": m * s, "nswitches": s, "links": links})
>>> build_schedule("hdrm", topo, CollKind.ALLREDUCE, inplace=True).nsteps
10
"""

from __future__ import annotations

from dataclasses import dataclass

from collc.errors import ScheduleError
from collc.frontends.common import I, O, Builder, is_pow2, prefix_copy, refusal_of
from collc.frontends.recursive_doubling import doubling, halving
from collc.frontends.registry import Algorithm, Options, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = ("Dong et al. 2020, EFLOPS (halving-doubling with rank mapping on BiGraph); baseline HDRM of "
             "MultiTree ISCA'21 sections II-C, VI (docs/recursive-doubling.md)")


@dataclass(frozen=True)
class BiGraph:
    """A BiGraph read from a topology: ``halves[h][i]`` = ranks of switch i of half h (ascending)."""

    per_switch: int
    halves: tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]


def read_bigraph(topology: Topology, algorithm: str = "hdrm") -> BiGraph:
    """The BiGraph structure of ``topology``, or ScheduleError saying what is missing."""
    n = topology.nranks

    def refuse(why: str) -> ScheduleError:
        return ScheduleError(f"{algorithm} needs a BiGraph (bigraph:MxS: M ranks per switch, two halves of "
                             f"switches with links between every upper and lower switch): {topology.name} {why}")

    if topology.nswitches < 2:
        raise refuse(f"has {topology.nswitches} switch node{'s' if topology.nswitches != 1 else ''}")
    members: dict[int, list[int]] = {s: [] for s in topology.switches}
    for r in range(n):
        ups = topology.out_neighbors(r)
        if len(ups) != 1 or ups[0] < n or not topology.has_link(ups[0], r):
            raise refuse(f"does not connect rank {r} to exactly one switch (both ways)")
        members[ups[0]].append(r)
    side: dict[int, int] = {}
    for s0 in topology.switches:
        if s0 in side:
            continue
        if side:
            raise refuse("has a switch graph that is not connected")
        side[s0] = 0
        todo = [s0]
        while todo:
            s = todo.pop()
            for t in topology.out_neighbors(s):
                if t < n:
                    continue
                if t not in side:
                    side[t] = 1 - side[s]
                    todo.append(t)
                elif side[t] == side[s]:
                    raise refuse(f"links switches {s} and {t} of the same half")
    # the upper half is the one holding rank 0's switch
    first = topology.out_neighbors(0)[0]
    halves = tuple(sorted(s for s in topology.switches if (side[s] == side[first]) == (h == 0)) for h in (0, 1))
    if len(halves[0]) != len(halves[1]):
        raise refuse(f"has halves of {len(halves[0])} and {len(halves[1])} switches")
    for u in halves[0]:
        for w in halves[1]:
            if not (topology.has_link(u, w) and topology.has_link(w, u)):
                raise refuse(f"lacks the link between switches {u} and {w} (both ways)")
    sizes = {len(v) for v in members.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise refuse(f"has switches with {', '.join(str(x) for x in sorted(sizes))} ranks; every switch "
                     f"needs the same number M >= 1")
    upper, lower = (tuple(tuple(members[s]) for s in half) for half in halves)
    return BiGraph(sizes.pop(), (upper, lower))


def rank_map(graph: BiGraph, algorithm: str = "hdrm") -> list[int]:
    """Physical rank of every logical halving-doubling rank (see the module docstring)."""
    m = graph.per_switch
    half = len(graph.halves[0])
    if not is_pow2(m) or not is_pow2(half):
        raise ScheduleError(f"{algorithm} needs a power-of-two number of ranks per switch and of switches per "
                            f"half, got {m} ranks per switch and {half} switches per half")
    if m > half:
        raise ScheduleError(f"{algorithm}: with {m} ranks per switch but only {half} switches per half, some "
                            f"upper switch would send two messages to one lower switch in a step; "
                            f"a contention-free rank map needs M <= S/2")
    n = 2 * m * half
    low_bits = n.bit_length() - 2            # bits of x (all but the top bit)
    phys = []
    for v in range(n):
        parity = bin(v).count("1") & 1
        x = v & ((1 << low_bits) - 1)
        hi, lo = divmod(x, m)
        switch = hi if parity == 0 else hi ^ lo
        phys.append(graph.halves[parity][switch][lo])
    return phys


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    return refusal_of(lambda: rank_map(read_bigraph(topology)))


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    phys = rank_map(read_bigraph(topology))
    n = request.nranks
    logn = n.bit_length() - 1
    b = Builder(Collective(CollKind.ALLREDUCE, n, n, request.inplace))
    start = prefix_copy(b, I, O, n, range(n))
    doubling(b, n, logn, halving(b, n, logn, start, O, phys), O, phys)
    return b.schedule("hdrm", opts, topology.name, REFERENCE)


register(Algorithm(
    name="hdrm",
    collectives=frozenset({CollKind.ALLREDUCE}),
    topologies="BiGraph (bigraph:MxS, M <= S/2, powers of two)",
    summary="EFLOPS halving-doubling with rank mapping: 2 log2 N contention-free upper-lower steps",
    reference=REFERENCE,
    build=build, applies=applies,
    example="collc build --topology bigraph:4x8 --algorithm hdrm --collective allreduce -o hdrm.xml",
))
