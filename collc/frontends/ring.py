"""Ring allgather, reduce-scatter and allreduce on a Hamiltonian cycle.

Family page: docs/ring.md (what it does, the paper, the check values and their tests).

Collectives: allgather, reducescatter (N-1 steps), allreduce (2(N-1) steps:
reduce-scatter then allgather).  Topology: any with a Hamiltonian cycle over the
ranks, taken from ``--param cycle=0,1,...`` or found by the topology (ring, torus,
mesh with an even side, hypercube, complete, switch).  Cost model (alpha-beta,
message size M, link bandwidth b): allreduce 2(N-1)(alpha + M/(N b)), the
bandwidth-optimal baseline every paper compares against (e.g. MultiTree section
2, Swing section 2).  ``bidirectional=true`` sends half of every block each way
round the cycle on its own channels (two lanes), halving the per-link volume on
bidirectional links.

Example:

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, inplace=True)
>>> s.nsteps, s.collective.chunk_factor
(6, 4)
"""

from __future__ import annotations

from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder, prefix_copy, refusal_of
from collc.frontends.registry import Algorithm, Options, Param, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = "Patarasuk & Yuan, bandwidth optimal all-reduce (ring); baseline in all seed papers"


def find_cycle(topology: Topology, given: object) -> list[int]:
    n = topology.nranks
    if isinstance(given, str) and given:
        try:
            cyc = [int(x) for x in given.split(",")]
        except ValueError:
            raise ScheduleError(f"cycle={given!r} must be a comma-separated list of ranks") from None
        if sorted(cyc) != list(range(n)):
            raise ScheduleError(f"cycle={given!r} must list every rank 0..{n - 1} exactly once")
        for a, b in zip(cyc, cyc[1:] + cyc[:1]):
            if topology.route(a, b) is None:
                raise ScheduleError(f"cycle={given!r}: {topology.name} has no link or switch route {a} -> {b}")
        return cyc
    found = topology.hamiltonian_cycle()
    if found is None:
        raise ScheduleError(f"{topology.name} has no Hamiltonian cycle collc can find; pass --param cycle=0,1,...")
    return list(found)


def _directions(topology: Topology, opts: Options) -> list[list[int]]:
    cyc = find_cycle(topology, opts.get("cycle"))
    if not opts.get("bidirectional"):
        return [cyc]
    back = cyc[:1] + cyc[:0:-1]
    for a, b in zip(back, back[1:] + back[:1]):
        if topology.route(a, b) is None:
            raise ScheduleError(f"bidirectional ring needs the reverse link {a} -> {b}, which {topology.name} lacks")
    return [cyc, back]


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    if request.nranks < 2:
        return "a ring needs at least 2 ranks"
    return refusal_of(lambda: _directions(topology, opts))


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    n = request.nranks
    if n < 2:
        raise ScheduleError("a ring needs at least 2 ranks")
    dirs = _directions(topology, opts)
    m = len(dirs)
    kind = request.kind
    if kind is CollKind.ALLGATHER:
        b = Builder(Collective(kind, n, m, request.inplace))
        if not request.inplace:
            for r in range(n):
                b.move(0, r, r, I, range(m), O, range(r * m, r * m + m))
        for d, cyc in enumerate(dirs):
            for t in range(n - 1):
                for q in range(n):
                    owner = cyc[(q - t) % n]
                    src_buf, src_idx = (I, [d]) if t == 0 else (O, [owner * m + d])
                    b.move(t, cyc[q], cyc[(q + 1) % n], src_buf, src_idx, O, [owner * m + d], lane=d)
    elif kind is CollKind.REDUCESCATTER:
        b = Builder(Collective(kind, n, m, request.inplace))
        start = 0
        work = I
        if not request.inplace:
            work, b.scratch = S, n * m
            for r in range(n):
                b.move(0, r, r, I, range(n * m), S, range(n * m))
                b.move(0, r, r, I, range(r * m, r * m + m), O, range(m))
            start = 1
        for d, cyc in enumerate(dirs):
            for t in range(n - 1):
                for q in range(n):
                    blk = cyc[(q - 1 - t) % n]
                    last = t == n - 2
                    dst_buf, dst_idx = (O, [d]) if last and not request.inplace else (work, [blk * m + d])
                    b.move(start + t, cyc[q], cyc[(q + 1) % n], work, [blk * m + d], dst_buf, dst_idx,
                           reduce=True, lane=d)
    elif kind is CollKind.ALLREDUCE:
        b = Builder(Collective(kind, n, n * m, request.inplace))
        start = prefix_copy(b, I, O, n * m, range(n))
        for d, cyc in enumerate(dirs):
            for t in range(n - 1):
                for q in range(n):
                    x = cyc[(q - 1 - t) % n] * m + d
                    b.move(start + t, cyc[q], cyc[(q + 1) % n], O, [x], O, [x], reduce=True, lane=d)
            for t in range(n - 1):
                for q in range(n):
                    x = cyc[(q - t) % n] * m + d
                    b.move(start + n - 1 + t, cyc[q], cyc[(q + 1) % n], O, [x], O, [x], lane=d)
    else:  # pragma: no cover - the registry filters collectives
        raise ScheduleError(f"ring does not implement {kind.value}")
    return b.schedule("ring", opts, topology.name, REFERENCE)


register(Algorithm(
    name="ring",
    collectives=frozenset({CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER}),
    topologies="any topology with a Hamiltonian cycle (ring, torus, mesh, hypercube, complete, switch)",
    summary="ring over a Hamiltonian cycle; bandwidth-optimal, N-1 steps per phase",
    reference=REFERENCE,
    build=build, applies=applies,
    params=(Param("bidirectional", bool, False, "send half of each block each way round the cycle"),
            Param("cycle", str, "", "the cycle as a comma-separated rank list (default: found)")),
    example="collc build --topology ring:8 --algorithm ring --collective allreduce -o ring8.xml",
))
