"""Topology expansions and their allgather schedule transforms.

Paper: Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications" (arXiv 2202.03356), section 5 and App. C, F; ``docs/direct-connect.md``.

* line graph ``L(G)`` (Def 1, schedule Def 2): ``d N`` nodes, degree ``d``;
  ``T_L + alpha``, ``beta + 1/N`` (Thm 1, equality for uniform optimal BFB);
* degree expansion ``G*m`` (Def 3, schedule Def 4; G without self-loops): ``m N`` nodes,
  degree ``m d``; ``T_L + alpha``, ``beta + (m-1)/(m N)`` (Thm 11);
* Cartesian power ``G^n`` (Def 5, schedule Def 14): ``N^n`` nodes, degree ``n d``;
  ``n T_L``, ``beta N/(N-1) (1 - N^-n)`` (Thm 12); products of different graphs go
  through BFB on the product (Thm 13);
* uni-to-bi ``G u G^T`` (App. F) for a reverse-symmetric ``G``: degree ``2d``, same
  ``T_L`` and ``beta``: half of every shard by ``A``, half by ``phi^-1(A)``.

Schedules are :class:`~collc.frontends.bfb.BFBResult` rows ``(step, source, lo, count,
sender, receiver)`` over integer chunks of a shard; each transform returns the rows on
the expanded graph, and ``allgather_schedule`` turns any of them into a Schedule
that the IR verifier and ``schedule_cost`` check.

>>> from collc.topology import parse_spec
>>> from collc.frontends.bfb import bfb_allgather
>>> g = parse_spec("bipartite:2")
>>> r = line_schedule(g, bfb_allgather(g))
>>> r.graph.n, r.diameter, r.beta
(8, 3, Fraction(1, 1))
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from collc.errors import ScheduleError, TopologyError
from collc.frontends.bfb import BFBResult, Digraph, digraph_of, _emit_allgather
from collc.frontends.common import I, O, ColumnBuilder
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Link, Topology

__all__ = ["line_graph", "degree_expansion", "cartesian_product", "uni_to_bi", "line_schedule",
           "degree_schedule", "power_schedule", "uni_to_bi_schedule", "result_from_pieces",
           "allgather_schedule"]


def _arcs(t: Topology) -> list[tuple[int, int]]:
    if t.param("selfloops"):
        raise TopologyError(f"{t.name} has self-loops; this expansion needs a graph without them")
    return [(lk.src, lk.dst) for lk in t.links for _ in range(lk.multiplicity)]


def _topology(name: str, n: int, arcs: list[tuple[int, int]], params: tuple[tuple[str, str], ...] = ()) -> Topology:
    count: dict[tuple[int, int], int] = {}
    for a in arcs:
        count[a] = count.get(a, 0) + 1
    if any(a == b for a, b in count):
        raise TopologyError(f"{name} would have self-loops")
    return Topology(name, n, tuple(Link(a, b, multiplicity=c) for (a, b), c in sorted(count.items())),
                    params=params)


# ---------------------------------------------------------------------- topologies
def line_graph(g: Topology, name: str = "") -> Topology:
    """Def 1: one node per arc (index = position in the sorted arc list), ``(x,y) -> (y,z)``."""
    arcs = _arcs(g)
    if len(set(arcs)) != len(arcs):
        raise TopologyError(f"the line graph of {g.name} needs single arcs (it has parallel links)")
    index = {a: i for i, a in enumerate(arcs)}
    out: dict[int, list[int]] = {}
    for x, y in arcs:
        out.setdefault(x, []).append(y)
    new = [(index[x, y], index[y, z]) for x, y in arcs for z in out.get(y, [])]
    return _topology(name or f"L({g.name})", len(arcs), new)


def degree_expansion(g: Topology, m: int, name: str = "") -> Topology:
    """Def 3: node ``v_i`` is ``v m + i``; an arc ``u_i -> v_j`` for every arc ``u -> v``."""
    if m < 2:
        raise TopologyError(f"degree expansion needs m >= 2, got {m}")
    arcs = _arcs(g)
    new = [(u * m + i, v * m + j) for u, v in arcs for i in range(m) for j in range(m)]
    return _topology(name or f"({g.name})*{m}", g.nranks * m, new)


def cartesian_product(a: Topology, b: Topology, name: str = "") -> Topology:
    """Def 5: node ``(g, h)`` is ``g |H| + h``."""
    nb = b.nranks
    arcs = [(g * nb + h, g * nb + h2) for g in a.ranks for h, h2 in _arcs(b)]
    arcs += [(g * nb + h, g2 * nb + h) for g, g2 in _arcs(a) for h in b.ranks]
    return _topology(name or f"({a.name})x({b.name})", a.nranks * nb, arcs)


def _reverse_isomorphism(g: Topology) -> list[int]:
    """phi: G^T -> G as a node map (Def 9), found with networkx's matcher."""
    import networkx as nx  # type: ignore[import-untyped]
    from networkx.algorithms.isomorphism import DiGraphMatcher  # type: ignore[import-untyped]

    gt = nx.MultiDiGraph(_arcs(g.transpose()))
    gg = nx.MultiDiGraph(_arcs(g))
    gt.add_nodes_from(g.ranks)
    gg.add_nodes_from(g.ranks)
    m = DiGraphMatcher(gt, gg)
    if not m.is_isomorphic():
        raise TopologyError(f"{g.name} is not reverse-symmetric (G^T is not isomorphic to G)")
    return [m.mapping[v] for v in g.ranks]


def uni_to_bi(g: Topology, name: str = "") -> Topology:
    """App. F: ``G u G^T`` (parallel arcs add up)."""
    arcs = _arcs(g)
    return _topology(name or f"Bi({g.name})", g.nranks, arcs + [(b, a) for a, b in arcs])


# ---------------------------------------------------------------------- schedules
def result_from_pieces(g: Digraph, chunks: int, pieces: np.ndarray) -> BFBResult:
    mult = {(a, b): m for a, b, m in g.arcs}
    steps = int(pieces[:, 0].max()) if len(pieces) else 0
    loads: dict[tuple[int, int, int], int] = {}
    for t, _, _, cnt, w, v in pieces.tolist():
        if (w, v) not in mult:
            raise ScheduleError(f"expanded schedule uses {w} -> {v}, which is not an arc")
        loads[t, w, v] = loads.get((t, w, v), 0) + cnt
    worst = [Fraction(0)] * steps
    for (t, w, v), c in loads.items():
        worst[t - 1] = max(worst[t - 1], Fraction(c, chunks * mult[w, v]))
    order = np.lexsort((pieces[:, 2], pieces[:, 1], pieces[:, 4], pieces[:, 5], pieces[:, 0]))
    return BFBResult(g, chunks, tuple(worst), pieces[order])


def line_schedule(g: Topology, a: BFBResult) -> BFBResult:
    """Def 2: step 1 sends each line-node's shard to its out-neighbours; step ``t+1`` replays
    ``(v, C, u -> w, t)`` as ``(v', v) -> ... : (u, w) -> (w, w')``."""
    lg = line_graph(g)
    arcs = _arcs(g)
    index = {x: i for i, x in enumerate(arcs)}
    ins: dict[int, list[int]] = {}
    outs: dict[int, list[int]] = {}
    for x, y in arcs:
        ins.setdefault(y, []).append(x)
        outs.setdefault(x, []).append(y)
    rows = [(1, index[vp, v], 0, a.chunks, index[vp, v], index[v, u]) for vp, v in arcs for u in outs.get(v, [])]
    for t, v, lo, cnt, u, w in a.pieces.tolist():
        for vp in ins.get(v, []):
            for wp in outs.get(w, []):
                if (vp, v) != (w, wp):
                    rows.append((t + 1, index[vp, v], lo, cnt, index[u, w], index[w, wp]))
    return result_from_pieces(digraph_of(lg), a.chunks, np.array(rows, dtype=np.int64))


def degree_schedule(g: Topology, a: BFBResult, m: int) -> BFBResult:
    """Def 4: ``(v_j, C, u_j -> w_i, t)`` for all ``i, j``; then one step in which every
    ``u_j`` gets each ``u_i``'s shard in ``m d`` equal pieces from its in-neighbours."""
    ge = degree_expansion(g, m)
    ge_graph = digraph_of(ge)
    d = ge_graph.degree
    chunks = math.lcm(a.chunks, d)
    k = chunks // a.chunks
    rows = [(t, v * m + j, lo * k, cnt * k, u * m + j, w * m + i)
            for t, v, lo, cnt, u, w in a.pieces.tolist() for j in range(m) for i in range(m)]
    last = a.diameter + 1
    piece = chunks // d
    ins: dict[int, list[int]] = {}
    for x, y, mult in ge_graph.arcs:
        ins.setdefault(y, []).extend([x] * mult)
    for u in range(g.nranks):
        for j in range(m):
            for i in range(m):
                if i != j:
                    for slot, p in enumerate(ins[u * m + j]):
                        rows.append((last, u * m + i, slot * piece, piece, p, u * m + j))
    return result_from_pieces(ge_graph, chunks, np.array(rows, dtype=np.int64))


def power_schedule(g: Topology, a: BFBResult, n: int) -> tuple[Topology, BFBResult]:
    """Def 14: ``n`` sub-schedules, sub-schedule ``r`` moving the ``r``-th ``1/n`` of every
    shard along dimensions ``r, r+1, ..., r-1`` (one replay of ``A`` per phase)."""
    if n < 2:
        raise ScheduleError(f"a Cartesian power needs n >= 2, got {n}")
    base = g
    for _ in range(n - 1):
        base = cartesian_product(base, g)
    size = g.nranks
    strides = [size ** (n - 1 - k) for k in range(n)]      # dimension k's stride (first dim slowest)
    T = a.diameter
    chunks = a.chunks * n
    rows: list[tuple[int, int, int, int, int, int]] = []
    others = np.arange(size ** (n - 1), dtype=np.int64)
    for r in range(n):
        order = [(r + k) % n for k in range(n)]
        for k, delta in enumerate(order):
            done = order[:k]
            rest = [x for x in range(n) if x != delta]
            # every assignment of the other dimensions: the sender's coordinates there (x for
            # dims done, z for dims not yet traversed) and the source's (y on done dims, z else)
            coords = np.stack([(others // size ** (len(rest) - 1 - i)) % size for i in range(len(rest))])
            base_node = sum(coords[i] * strides[dim] for i, dim in enumerate(rest))
            for t, v, lo, cnt, u, w in a.pieces.tolist():
                sender = base_node + u * strides[delta]
                receiver = base_node + w * strides[delta]
                # source: v on delta, z (= the sender's) on dims not done, any y on done dims
                src_base = base_node + v * strides[delta]
                srcs = [src_base]
                for dim in done:
                    cur = (src_base // strides[dim]) % size
                    srcs = [s - cur * strides[dim] + y * strides[dim] for s in srcs for y in range(size)]
                for s in srcs:
                    for a_, b_, c_ in zip(s.tolist(), sender.tolist(), receiver.tolist()):
                        rows.append((t + k * T, a_, r * a.chunks + lo, cnt, b_, c_))
    return base, result_from_pieces(digraph_of(base), chunks, np.array(rows, dtype=np.int64))


def uni_to_bi_schedule(g: Topology, a: BFBResult) -> tuple[Topology, BFBResult]:
    """App. F: half of every shard by ``A`` on G, half by ``phi^-1(A)`` on ``G^T``."""
    phi = _reverse_isomorphism(g)
    inv = [0] * len(phi)
    for x, y in enumerate(phi):
        inv[y] = x
    bi = uni_to_bi(g)
    rows = [(t, u, lo, cnt, w, v) for t, u, lo, cnt, w, v in a.pieces.tolist()]
    rows += [(t, inv[u], a.chunks + lo, cnt, inv[w], inv[v]) for t, u, lo, cnt, w, v in a.pieces.tolist()]
    return bi, result_from_pieces(digraph_of(bi), 2 * a.chunks, np.array(rows, dtype=np.int64))


def allgather_schedule(r: BFBResult, topology: Topology, inplace: bool = False, name: str = "bfb") -> Schedule:
    """An allgather Schedule from schedule rows (for the verifier and ``schedule_cost``)."""
    n, c = topology.nranks, r.chunks
    if r.graph.n != n:
        raise ScheduleError(f"schedule is for {r.graph.n} ranks, {topology.name} has {n}")
    b = ColumnBuilder(Collective(CollKind.ALLGATHER, n, c, inplace))
    if not inplace:
        for v in range(n):
            b.move(0, v, v, I, range(c), O, range(v * c, v * c + c))
    _emit_allgather(b, r, 0, c, False)
    return b.schedule(name, {}, topology.name, "Zhao et al., direct-connect topologies, section 5")
