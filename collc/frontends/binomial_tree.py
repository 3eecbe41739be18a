"""Binomial-tree broadcast and reduce from a root.

Family page: docs/baselines.md (what it does, the paper, the check values and their tests).

Ranks are renumbered relative to the root: ``v = r xor root`` when N is a power
of two (partners then differ in one bit, as on a hypercube), else
``v = (r - root) mod N``.  Broadcast:
at step k every rank with ``v < 2^k`` sends to ``v + 2^k`` (if it exists);
ceil(log2 N) steps, cost ceil(log2 N)(alpha + M/b).  Reduce is its time reverse:
at step k (from the top) ranks with ``2^k <= v < 2^(k+1)`` send their partial to
``v - 2^k``, which reduces.  Non-root ranks accumulate in scratch (the runtime
does not promise a receive buffer off the root).  Any N; partners at distance
2^k need links (hypercube, complete, switch).

The runtimes ignore ``root`` when they select an XML (docs/runtime-model.md): a
file is correct only for the root it was built for, which is recorded in its
name (``...-root3``).

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> build_schedule("binomial-tree", parse_spec("switch:8"), CollKind.BROADCAST, root=3).nsteps
3
"""

from __future__ import annotations

from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder, route_refusal
from collc.frontends.registry import Algorithm, Options, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = "binomial tree (Thakur, Rabenseifner & Gropp 2005)"


def _numbering(n: int, root: int) -> list[int]:
    """Relative numbering: xor with the root when N is a power of two, so partners v, v + 2^k
    differ in one bit (hypercube links); otherwise a rotation."""
    pow2 = n & (n - 1) == 0
    return [v ^ root if pow2 else (v + root) % n for v in range(n)]


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    n, root = request.nranks, request.root
    if root is None or n < 2:
        return "binomial-tree needs a root and at least 2 ranks"
    rank = _numbering(n, root)
    pairs = ((rank[v], rank[v + (1 << k)]) for k in range((n - 1).bit_length()) for v in range(min(1 << k, n - (1 << k))))
    if request.kind is CollKind.REDUCE:
        pairs = ((b, a) for a, b in pairs)
    return route_refusal(topology, pairs, "binomial-tree", f"tree neighbours 2^k apart relative to root {root}")


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    n = request.nranks
    root = request.root
    if root is None or n < 2:
        raise ScheduleError("binomial-tree needs a root and at least 2 ranks")
    levels = (n - 1).bit_length()
    rank = _numbering(n, root)
    b = Builder(Collective(request.kind, n, 1, request.inplace, root))
    if request.kind is CollKind.BROADCAST:
        if not request.inplace:
            b.move(0, root, root, I, [0], O, [0])
        for k in range(levels):
            for v in range(min(1 << k, n - (1 << k))):
                src_buf = I if v == 0 else O
                b.move(k, rank[v], rank[v + (1 << k)], src_buf, [0], O, [0])
        return b.schedule("binomial-tree", opts, topology.name, REFERENCE)
    if request.kind is CollKind.REDUCE:
        has_children = {v for v in range(n) if any(v + (1 << k) < n and v < (1 << k) for k in range(levels))}
        b.scratch = 1
        start = 0
        if not request.inplace:
            b.move(0, root, root, I, [0], O, [0])
            start = 1
        for v in has_children - {0}:
            b.move(0, rank[v], rank[v], I, [0], S, [0])
            start = 1
        for step, k in enumerate(reversed(range(levels))):
            for v in range(1 << k, min(n, 1 << (k + 1))):
                parent = v - (1 << k)
                src = S if v in has_children else I
                dst = O if parent == 0 else S
                b.move(start + step, rank[v], rank[parent], src, [0], dst, [0], reduce=True)
        return b.schedule("binomial-tree", opts, topology.name, REFERENCE)
    raise ScheduleError(f"binomial-tree does not implement {request.kind.value}")  # pragma: no cover


register(Algorithm(
    name="binomial-tree",
    collectives=frozenset({CollKind.BROADCAST, CollKind.REDUCE}),
    topologies="links between ranks 2^k apart relative to the root (hypercube, complete, switch)",
    summary="binomial tree from/to a root, ceil(log2 N) steps; the file is only right for its root",
    reference=REFERENCE, build=build, applies=applies,
    example="collc build --topology switch:8 --algorithm binomial-tree --collective broadcast "
            "--root 0 -o bcast.xml",
))
