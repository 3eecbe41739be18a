"""ShiftedRing and ShiftedBFBRing: the ring baselines of the direct-connect paper.

Paper: Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications" (arXiv 2202.03356), section 8.2 (baselines; ShiftedRing after
TopoOpt) and App. E.1 (BFB on rings); ``docs/direct-connect.md``.

Topology: a degree-4 bidirectional circulant ``circulant:N:a,b`` whose two
generators are both coprime with N (``circulant:12:1,5``), i.e. two superposed
Hamiltonian rings.  Each ring carries half of every shard.

* ``shifted-ring``: the traditional bidirectional ring on each ring (a quarter of
  each shard per direction): allgather ``N-1`` steps, allreduce ``2(N-1)``;
* ``shifted-bfb-ring``: BFB on each ring (every shard broadcast both ways, the
  antipode of an even ring getting one half from each side): ``floor(N/2)`` steps,
  allreduce ``2 floor(N/2)``.

Both are bandwidth-optimal (beta = (N-1)/N).  Reduce-scatter is the allgather run
backwards (Def 7; the rings are bidirectional).

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> t = parse_spec("circulant:12:1,5")
>>> from collc.frontends.bfb import schedule_cost
>>> [schedule_cost(build_schedule(a, t, CollKind.ALLREDUCE, inplace=True), t)
...  for a in ("shifted-ring", "shifted-bfb-ring")]
[(22, Fraction(11, 6)), (12, Fraction(11, 6))]
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from collc.errors import ScheduleError
from collc.frontends.bfb import BFBResult, Digraph, bfb_allgather, digraph_of, emit
from collc.frontends.registry import Algorithm, Options, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = ("Zhao et al., Efficient Direct-Connect Topologies for Collective Communications, section 8.2 "
             "(ShiftedRing, ShiftedBFBRing), App. E.1")


def applies(topology: Topology, kind: CollKind | None = None) -> str | None:
    gens = topology.param("generators")
    if not topology.name.startswith("circulant:") or gens is None:
        return f"shifted rings need a circulant:N:a,b topology, got {topology.name}"
    values = [int(x) for x in gens.split(",")]
    n = topology.nranks
    if len(values) != 2 or any(math.gcd(g, n) != 1 or 2 * g == n for g in values) or n < 3:
        return (f"shifted rings need two generators coprime with N (two Hamiltonian rings), "
                f"got {topology.name}")
    return None


def _generators(topology: Topology) -> tuple[int, int]:
    reason = applies(topology)
    if reason is not None:
        raise ScheduleError(reason)
    a, b = (int(x) for x in (topology.param("generators") or "").split(","))
    return a, b


def _combine(g: Digraph, parts: list[BFBResult]) -> BFBResult:
    """Rows of several schedules, each moving its own slice of every shard."""
    chunks = sum(p.chunks for p in parts)
    rows, offset = [], 0
    for p in parts:
        r = p.pieces.astype(np.int64).copy()
        r[:, 2] += offset
        rows.append(r)
        offset += p.chunks
    steps = max(p.diameter for p in parts)
    loads = tuple(max((p.step_loads[t] * p.chunks / chunks for p in parts if t < p.diameter), default=Fraction(0))
                  for t in range(steps))
    return BFBResult(g, chunks, loads, np.concatenate(rows))


def _ring(n: int, gen: int) -> Digraph:
    arcs = sorted({(i, (i + s * gen) % n) for i in range(n) for s in (1, -1)})
    return Digraph(n, tuple((a, b, 1) for a, b in arcs), 2, (n,), f"ring({gen})")


def _traditional(n: int, gen: int) -> BFBResult:
    """Bidirectional ring allgather: half of each shard clockwise, half the other way, N-1 steps."""
    rows = []
    for u in range(n):
        for t in range(1, n):
            for half, sign in ((0, 1), (1, -1)):
                rows.append((t, u, half, 1, (u + sign * (t - 1) * gen) % n, (u + sign * t * gen) % n))
    g = _ring(n, gen)
    return BFBResult(g, 2, tuple(Fraction(1, 2) for _ in range(n - 1)), np.array(rows, dtype=np.int64))


def _build(topology: Topology, request: Collective, opts: Options, bfb: bool) -> Schedule:
    a, b = _generators(topology)
    n = request.nranks
    parts = [bfb_allgather(_ring(n, g)) if bfb else _traditional(n, g) for g in (a, b)]
    if bfb and parts[0].chunks != parts[1].chunks:
        c = math.lcm(parts[0].chunks, parts[1].chunks)
        parts = [bfb_allgather(_ring(n, g), c) for g in (a, b)]
    ag = _combine(digraph_of(topology), parts)
    name = "shifted-bfb-ring" if bfb else "shifted-ring"
    return emit(topology, request, ag, ag, name, opts, REFERENCE)


def build_shifted(topology: Topology, request: Collective, opts: Options) -> Schedule:
    return _build(topology, request, opts, False)


def build_shifted_bfb(topology: Topology, request: Collective, opts: Options) -> Schedule:
    return _build(topology, request, opts, True)


_KINDS = frozenset({CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE})
register(Algorithm(
    name="shifted-ring", collectives=_KINDS,
    topologies="circulant:N:a,b with a and b coprime with N (two Hamiltonian rings)",
    summary="two superposed bidirectional rings, traditional ring schedule on each (TopoOpt); 2(N-1) allreduce steps",
    reference=REFERENCE, build=build_shifted, applies=lambda t, r, o: applies(t, r.kind),
    example="collc build --topology circulant:12:1,5 --algorithm shifted-ring --collective allreduce -o sr.xml"))
register(Algorithm(
    name="shifted-bfb-ring", collectives=_KINDS,
    topologies="circulant:N:a,b with a and b coprime with N (two Hamiltonian rings)",
    summary="two superposed bidirectional rings, BFB ring schedule on each; 2 floor(N/2) allreduce steps",
    reference=REFERENCE, build=build_shifted_bfb, applies=lambda t, r, o: applies(t, r.kind),
    example="collc build --topology circulant:12:1,5 --algorithm shifted-bfb-ring --collective allreduce -o sb.xml"))
