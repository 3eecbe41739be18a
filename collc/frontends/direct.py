"""Direct (all-pairs) collectives on fully connected fabrics.

Family page: docs/baselines.md (what it does, the paper, the check values and their tests).

Every rank exchanges with every other rank in one communication step:
allgather and alltoall in 1 step, reducescatter in 1 step (each rank receives its
block from all N-1 peers and reduces), allreduce in 2 steps (direct reduce-scatter
then direct allgather).  Cost: alpha + (N-1)/N M/b per phase when every rank can
drive N-1 links at once.  Topology: complete or switch (every pair routable);
the pattern of RCCL's and MSCCL's own "allpairs" XMLs.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> build_schedule("direct", parse_spec("switch:8"), CollKind.ALLREDUCE, inplace=True).nsteps
2
"""

from __future__ import annotations

from collc.errors import ScheduleError
from collc.frontends.common import I, O, Builder, prefix_copy, route_refusal
from collc.frontends.registry import Algorithm, Options, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = "all-pairs exchange (MSCCL allpairs; Thakur et al. 2005)"


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    n = request.nranks
    return route_refusal(topology, ((a, b) for a in range(n) for b in range(n) if a != b), "direct",
                         "every pair of ranks")


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    n = request.nranks
    kind = request.kind
    b = Builder(Collective(kind, n, n if kind is CollKind.ALLREDUCE else 1, request.inplace))
    others = [(r, q) for r in range(n) for q in range(n) if q != r]
    if kind is CollKind.ALLGATHER:
        if not request.inplace:
            for r in range(n):
                b.move(0, r, r, I, [0], O, [r])
        for r, q in others:
            b.move(0, r, q, I, [0], O, [r])
    elif kind is CollKind.ALLTOALL:
        for r in range(n):
            b.move(0, r, r, I, [r], O, [r])
        for r, q in others:
            b.move(0, r, q, I, [q], O, [r])
    elif kind is CollKind.REDUCESCATTER:
        start = 0
        if not request.inplace:
            for r in range(n):
                b.move(0, r, r, I, [r], O, [0])
            start = 1
        for r, q in others:
            b.move(start, r, q, I, [q], O, [0], reduce=True)
    elif kind is CollKind.ALLREDUCE:
        start = prefix_copy(b, I, O, n, range(n))
        for r, q in others:
            b.move(start, r, q, O, [q], O, [q], reduce=True)
        for r, q in others:
            b.move(start + 1, r, q, O, [r], O, [r])
    else:  # pragma: no cover
        raise ScheduleError(f"direct does not implement {kind.value}")
    return b.schedule("direct", opts, topology.name, REFERENCE)


register(Algorithm(
    name="direct",
    collectives=frozenset({CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLTOALL}),
    topologies="fully connected: complete or switch",
    summary="all-pairs exchange: one step per phase, N-1 peers at once",
    reference=REFERENCE, build=build, applies=applies,
    example="collc build --topology switch:8 --algorithm direct --collective alltoall -o a2a.xml",
))
