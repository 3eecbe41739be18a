"""2D-ring allreduce on a 2D torus or mesh (the MultiTree paper's 2D-RING baseline).

Family page: docs/ring.md (what it does, the paper, the check values and their tests).

Collective: allreduce.  Topology: a 2D torus or mesh ``R x C`` (``torus:RxC``,
``mesh:RxC``; rank ``r*C + c`` at row ``r``, column ``c``).

The algorithm (Ying et al., TPU; MultiTree ISCA'21 sections I, II-C and VI;
docs/ring.md): a full ring **allreduce** along one dimension,
then a full ring allreduce along the other.  The vector is cut into four quarters,
one per directional ring (the "4 flows per node"), so that all four directed links
of every node are busy at every step:

=======  ==========================  ==========================
quarter  phase 1                     phase 2
=======  ==========================  ==========================
0        rows, eastward (c -> c+1)   columns, southward (r -> r+1)
1        rows, westward (c -> c-1)   columns, northward (r -> r-1)
2        columns, southward          rows, eastward
3        columns, northward          rows, westward
=======  ==========================  ==========================

Each phase is a ring reduce-scatter (d-1 steps) followed by a ring allgather
(d-1 steps) over the d ranks of a line, so every rank ends phase 1 with its line's
sum of the quarter and phase 2 turns line sums into the global sum.  A quarter is
cut into ``lcm(R, C)`` chunks (chunk factor ``4 lcm(R, C)``) so that it splits
into equal ring blocks along either dimension; a message is one ring block, D/(4d)
= d/4 chunk units of D/N.  Steps: ``4 (d-1)`` on a ``d x d`` grid, ``4 (max(R, C)-1)``
on ``R x C`` (phase 2 starts when the longer phase 1 ends, so no directed link
carries two messages in one step), plus one local copy step out of place.
Bandwidth-bound cost: ``d (d-1)`` chunk units (12 on 4x4, 56 on 8x8;
docs/ring.md); each rank sends about twice the data of a flat ring (2N(N-1) vs N^2-1 units on
an N x N torus: bandwidth sub-optimal, as the paper says).

Links: on a torus every transfer is between physical neighbours and every directed
link carries exactly one message per step (dimensions >= 3).  A mesh line has no
wraparound; with the default ``mesh_ring=wrap`` the ring is the paper's: ranks in
line order, closed by a transfer between the **two ends of the line**, d-1 hops
apart and forwarded by the network (meshes are routed networks).  This is not a
neighbour transfer on purpose: the paper attributes 2D-RING losing to RING on the
8x8 mesh to exactly this "slowest pair, the two farthest nodes in the same
dimension" (section VI-A).  ``mesh_ring=folded`` uses the folded ring
``0, 2, 4, ..., 5, 3, 1`` instead (every hop at most 2 links).  Either way each
opposite-direction flow crosses the other's links, so mesh links carry two
messages per step.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> s = build_schedule("ring-2d", parse_spec("torus:4x4"), CollKind.ALLREDUCE, inplace=True)
>>> s.nsteps, s.collective.chunk_factor, s.lanes
(12, 16, 4)
"""

from __future__ import annotations

import math

from collc.errors import ScheduleError
from collc.frontends.common import I, O, Builder, prefix_copy, refusal_of
from collc.frontends.registry import Algorithm, Options, Param, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = ("Ying et al. 2018 (2D ring allreduce on TPU pods); baseline 2D-RING of MultiTree ISCA'21 "
             "sections II-C, VI (docs/ring.md)")

MESH_RINGS = ("wrap", "folded")


def grid_dims(topology: Topology, algorithm: str) -> tuple[int, int, bool]:
    """``(rows, cols, wrap)`` of a 2D torus (wrap) or mesh; ScheduleError otherwise."""
    dims = topology.dims
    if topology.family not in ("torus", "mesh") or dims is None:
        raise ScheduleError(f"{algorithm} needs a 2D torus or mesh (torus:RxC or mesh:RxC), got {topology.name}")
    if len(dims) != 2:
        raise ScheduleError(f"{algorithm} needs a 2D torus or mesh (torus:RxC or mesh:RxC), got {topology.name} "
                            f"with {len(dims)} dimension{'s' if len(dims) != 1 else ''}")
    rows, cols = dims
    if rows * cols != topology.nranks:
        raise ScheduleError(f"{algorithm}: {topology.name} has {topology.nranks} ranks, not {rows}x{cols}")
    return rows, cols, topology.family == "torus"


def line_ring(d: int, wrap: bool, mesh_ring: str) -> list[int]:
    """Positions 0..d-1 of a line in ring order (closing back to the first).

    Torus or ``wrap``: ``0, 1, ..., d-1``.  ``folded``: evens up, odds down.

    >>> line_ring(6, False, "folded")
    [0, 2, 4, 5, 3, 1]
    """
    if wrap or mesh_ring == "wrap":
        return list(range(d))
    return list(range(0, d, 2)) + list(range(d - 1 - (d % 2 == 1), 0, -2))


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    return refusal_of(lambda: grid_dims(topology, "ring-2d"))


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    rows, cols, wrap = grid_dims(topology, "ring-2d")
    mesh_ring = str(opts.get("mesh_ring", "wrap"))
    if mesh_ring not in MESH_RINGS:  # pragma: no cover - Param.choices filters it
        raise ScheduleError(f"ring-2d: mesh_ring={mesh_ring!r}: choose one of {', '.join(MESH_RINGS)}")
    n = request.nranks
    span = math.lcm(rows, cols)          # chunks per quarter
    b = Builder(Collective(CollKind.ALLREDUCE, n, 4 * span, request.inplace))
    start = prefix_copy(b, I, O, 4 * span, range(n))
    phase_steps = 2 * (max(rows, cols) - 1)

    def rank(line: int, pos: int, along_rows: bool) -> int:
        return line * cols + pos if along_rows else pos * cols + line

    def ring_allreduce(quarter: int, along_rows: bool, forward: bool, step0: int) -> None:
        d = cols if along_rows else rows
        lines = rows if along_rows else cols
        order = line_ring(d, wrap, mesh_ring)
        if not forward:
            order = order[:1] + order[:0:-1]
        width = span // d
        base = quarter * span
        for line in range(lines):
            ring = [rank(line, pos, along_rows) for pos in order]
            for t in range(d - 1):
                for q in range(d):
                    for reduce, step, blk in ((True, step0 + t, (q - 1 - t) % d),
                                              (False, step0 + d - 1 + t, (q - t) % d)):
                        idx = range(base + blk * width, base + (blk + 1) * width)
                        b.move(step, ring[q], ring[(q + 1) % d], O, idx, O, idx, reduce=reduce, lane=quarter)

    for quarter in range(4):
        rows_first = quarter < 2
        forward = quarter % 2 == 0
        ring_allreduce(quarter, rows_first, forward, start)
        ring_allreduce(quarter, not rows_first, forward, start + phase_steps)
    return b.schedule("ring-2d", opts, topology.name, REFERENCE)


register(Algorithm(
    name="ring-2d",
    collectives=frozenset({CollKind.ALLREDUCE}),
    topologies="2D torus or mesh (torus:RxC, mesh:RxC)",
    summary="2D-RING: ring allreduce along rows then columns, 4 directional flows; 4(d-1) steps on d x d",
    reference=REFERENCE,
    build=build, applies=applies,
    params=(Param("mesh_ring", str, "wrap", "ring along a mesh line: wrap (paper: the two ends close the "
                  "ring over d-1 hops) or folded (0,2,4,...,5,3,1; hops of at most 2 links)", MESH_RINGS),),
    example="collc build --topology torus:8x8 --algorithm ring-2d --collective allreduce -o ring2d.xml",
))
