"""The allreduce linear program of ForestColl's appendix E (LP (6), with switches).

Allreduce reduces along in-trees to roots and broadcasts along out-trees from them.
Reduce-scatter + allgather on one forest gives every rank an equal share and the
reduce and broadcast trees the same links (allreduce algbw ``N x* / 2``).  Appendix E
lets (i) every rank ``v`` root its own amount ``x_v`` and (ii) every link split its
bandwidth between the in-trees and the out-trees, and maximises ``X = sum x_v``
(allreduce time ``M / X``):

* a broadcast graph and a reduce graph on the ranks, of logical capacities
  ``L^B(u, t)`` and ``L^R(u, t)``; with switches (appendix E, last paragraph) each is a
  multi-commodity flow on the fabric, one commodity per source rank ``u`` that goes
  through switches only and ends at ranks (what edge splitting would produce), the two
  graphs' flows together within ``b(e)`` on every link;
* for every rank ``t``, a flow from a source ``s`` (``s -> v`` of capacity ``x_v``) to
  ``t`` of value ``X`` in the broadcast graph (Theorem 1: the out-trees exist), and the
  same in the reverse of the reduce graph (the in-trees exist).

The paper found it never beat reduce-scatter + allgather "in all topologies we have
tested so far" (section 4.6).  :func:`allreduce_lp` solves it with HiGHS
(``scipy.optimize.linprog``, floating point).  :func:`partition_bound` is an exact upper
bound on it (ours): for a partition of the ranks into m >= 2 parts S_i, every root outside
S_i feeds S_i through the broadcast graph and collects from it through the reduce graph,
so the logical capacity entering the parts, at most the fabric's capacity into each
``S_i`` (with any switches), is at least ``2 (m - 1) X``.  A partition into complements of
bottleneck cuts (single GPUs on a100:2x8, GCD packages on mi250:2) makes the bound equal to
reduce-scatter + allgather's ``N x* / 2``, which the LP reaches (halve every link): the LP
optimum is then exactly ``N x* / 2``.  On fabrics whose ranks are unequal the LP can win
(mi250:8+8).  docs/forestcoll.md has the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from collc.errors import ScheduleError
from collc.frontends.forestcoll.flow import FlowNet, Network
from collc.frontends.forestcoll.packing import Tree, check_forest, pack_trees, shorten
from collc.frontends.forestcoll.splitting import Logical

__all__ = ["LPResult", "LPForest", "allreduce_lp", "lp_forest", "partition_bound", "bottleneck_parts"]


@dataclass(frozen=True)
class LPResult:
    """LP (6) on a fabric: the optimum ``X`` (allreduce algbw, GB/s, floating point) and the
    per-root amounts ``x_v`` (GB/s)."""

    value: float
    roots: tuple[float, ...]
    bcast: dict[tuple[int, int], float]      # L^B(u, t): the broadcast graph (GB/s)
    reduce: dict[tuple[int, int], float]     # L^R(u, t): the reduce graph (GB/s)


class _Cols:
    def __init__(self) -> None:
        self.n = 0

    def take(self, count: int) -> int:
        first = self.n
        self.n += count
        return first


def allreduce_lp(net: Network) -> LPResult:
    """Solve appendix E's LP (6) on ``net`` (switches through multi-commodity routing)."""
    from scipy.optimize import linprog  # type: ignore[import-untyped]
    from scipy.sparse import coo_matrix  # type: ignore[import-untyped]

    n, nodes = net.nranks, net.nnodes
    links = sorted(net.cap)
    cols = _Cols()
    x0 = cols.take(n)
    # g[kind][u]: commodity u's flow on the links it may use: out of u or out of a switch,
    # never into u (a path that comes back is no use)
    usable = {u: [i for i, (a, b) in enumerate(links) if (a == u or a >= n) and b != u] for u in range(n)}
    g: list[list[dict[int, int]]] = []
    for _ in range(2):
        per: list[dict[int, int]] = []
        for u in range(n):
            start = cols.take(len(usable[u]))
            per.append({li: start + j for j, li in enumerate(usable[u])})
        g.append(per)
    pairs = [(u, v) for u in range(n) for v in range(n) if u != v]
    lcol = [cols.take(len(pairs)) for _ in range(2)]      # L[kind][(u, v)] at lcol + index
    pidx = {p: i for i, p in enumerate(pairs)}
    # f[kind][t]: the flow to t on pairs (u, v) with v != ... (no edge leaves t)
    fpairs = {t: [(u, v) for u, v in pairs if u != t] for t in range(n)}
    fcol = [[cols.take(len(fpairs[t])) for t in range(n)] for _ in range(2)]

    ub_r: list[int] = []
    ub_c: list[int] = []
    ub_v: list[float] = []
    ub_b: list[float] = []
    eq_r: list[int] = []
    eq_c: list[int] = []
    eq_v: list[float] = []
    nub = neq = 0

    def ub(entries: list[tuple[int, float]], bound: float) -> None:
        nonlocal nub
        for c, v in entries:
            ub_r.append(nub)
            ub_c.append(c)
            ub_v.append(v)
        ub_b.append(bound)
        nub += 1

    def eq(entries: list[tuple[int, float]]) -> None:
        nonlocal neq
        for c, v in entries:
            eq_r.append(neq)
            eq_c.append(c)
            eq_v.append(v)
        neq += 1

    # the two graphs' routing within b(e)
    for li, e in enumerate(links):
        ub([(g[k][u][li], 1.0) for k in range(2) for u in range(n) if li in g[k][u]], float(net.cap[e]))
    for k in range(2):
        for u in range(n):
            into: dict[int, list[int]] = {}
            out: dict[int, list[int]] = {}
            for li, c in g[k][u].items():
                a, b = links[li]
                out.setdefault(a, []).append(c)
                into.setdefault(b, []).append(c)
            for w in range(n, nodes):        # conservation at switches
                if w in into or w in out:
                    eq([(c, 1.0) for c in into.get(w, [])] + [(c, -1.0) for c in out.get(w, [])])
            for v in range(n):               # what reaches rank v is the logical capacity L(u, v)
                if v != u:
                    eq([(c, 1.0) for c in into.get(v, [])] + [(lcol[k] + pidx[(u, v)], -1.0)])
    # flows to every t: broadcast on L^B, reduce on the reverse of L^R
    for k in range(2):
        for t in range(n):
            base = fcol[k][t]
            into2: dict[int, list[int]] = {}
            out2: dict[int, list[int]] = {}
            for j, (u, v) in enumerate(fpairs[t]):
                cap_pair = (u, v) if k == 0 else (v, u)
                ub([(base + j, 1.0), (lcol[k] + pidx[cap_pair], -1.0)], 0.0)
                out2.setdefault(u, []).append(base + j)
                into2.setdefault(v, []).append(base + j)
            for v in range(n):
                if v != t:                   # x_v + in(v) - out(v) = 0
                    eq([(x0 + v, 1.0)] + [(c, 1.0) for c in into2.get(v, [])] + [(c, -1.0) for c in out2.get(v, [])])
    nvar = cols.n
    a_ub = coo_matrix((ub_v, (ub_r, ub_c)), shape=(nub, nvar)).tocsr()
    a_eq = coo_matrix((eq_v, (eq_r, eq_c)), shape=(neq, nvar)).tocsr()
    cost = np.zeros(nvar)
    cost[x0:x0 + n] = -1.0
    res = linprog(cost, A_ub=a_ub, b_ub=np.array(ub_b), A_eq=a_eq, b_eq=np.zeros(neq), bounds=(0, None),
                  method="highs")
    if res.status != 0:   # pragma: no cover - the LP is feasible (x = 0) and bounded (by b)
        raise ScheduleError(f"forestcoll: the allreduce LP failed on {net.name}: {res.message}")
    unit = float(net.unit)
    graphs = [{p: float(res.x[lcol[k] + i]) * unit for i, p in enumerate(pairs) if res.x[lcol[k] + i] > 0}
              for k in range(2)]
    return LPResult(float(-res.fun) * unit, tuple(float(v) * unit for v in res.x[:n]), graphs[0], graphs[1])


def partition_bound(net: Network, parts: list[list[int]]) -> Fraction:
    """The exact bound ``sum_i c(S_i) / (2 (m - 1))`` (GB/s) on the LP's X for a partition of
    the ranks into ``m >= 2`` parts, ``c(S)`` the least capacity into ``S`` plus any switches
    (one max-flow from the other ranks to S)."""
    n, nodes = net.nranks, net.nnodes
    if sorted(r for part in parts for r in part) != list(range(n)) or len(parts) < 2:
        raise ScheduleError("forestcoll: the partition bound needs a partition of the ranks into >= 2 parts")
    big = sum(net.cap.values()) + 1
    total = 0
    for part in parts:
        a, z = nodes, nodes + 1          # a feeds the other ranks, z drains the part
        inside = set(part)
        edges = list(net.cap) + [(a, r) for r in range(n) if r not in inside] + [(r, z) for r in part]
        caps = list(net.cap.values()) + [big] * n
        total += FlowNet(nodes + 2, edges, caps).flow(a, z)
    return Fraction(total, 2 * (len(parts) - 1)) * net.unit


def bottleneck_parts(net: Network, x_star: Fraction) -> list[list[int]]:
    """A partition into complements of bottleneck cuts where there is one (then
    :func:`partition_bound` is exactly ``N x* / 2``): the lowest rank v not yet covered takes
    the smallest set T of uncovered ranks around it with ``c(T) + x* |T|`` least (one min
    cut; covered ranks stay outside); T complements a bottleneck cut when that least value
    is ``N x*``."""
    n, nodes = net.nranks, net.nnodes
    p, q = x_star.numerator, x_star.denominator
    big = q * sum(net.cap.values()) + p * n + 1
    covered: set[int] = set()
    parts: list[list[int]] = []
    while len(covered) < n:
        v = min(set(range(n)) - covered)
        # the reversed network: source a (tied to v), sink z (tied to the other ranks, at x*
        # each, or for good when covered); what a reaches in the residual is the smallest T
        a, z = nodes, nodes + 1
        edges = [(y, x) for x, y in net.cap] + [(a, v)]
        caps = [c * q for c in net.cap.values()] + [big]
        for r in range(n):
            if r != v:
                edges.append((r, z))
                caps.append(big if r in covered else p)
        g = FlowNet(nodes + 2, edges, caps)
        part = sorted(r for r in g.min_cut_source_side(a, z) if r < n)
        parts.append(part)
        covered.update(part)
    return parts


@dataclass(frozen=True)
class LPForest:
    """An allreduce forest from the LP: out-trees (broadcast) and in-trees (reduce; stored as
    out-trees of the transposed graph, an edge ``(p, c)`` carrying data ``c -> p``), with
    ``roots[v]`` trees of ``y`` GB/s each rooted at v in both.  Model allreduce algbw
    ``sum(roots) y``; the LP optimum it was rounded from is ``lp.value``."""

    lp: LPResult
    bcast: tuple[Tree, ...]
    reduce: tuple[Tree, ...]
    roots: tuple[int, ...]
    y: float

    @property
    def algbw(self) -> float:
        return sum(self.roots) * self.y


def _holds(n: int, caps: dict[tuple[int, int], int], roots: tuple[int, ...]) -> bool:
    """Theorem 1 with unequal roots: every rank t gets sum(roots) from s (``s -> v``: roots[v])."""
    edges = list(caps) + [(n, v) for v in range(n) if roots[v] > 0]
    values = list(caps.values()) + [r for r in roots if r > 0]
    g = FlowNet(n + 1, edges, values)
    need = sum(roots)
    return all(f >= need for f in g.flows(n, range(n)))


_EPS = 1e-7     # the LP solver's tolerance, relative: a value this close below an integer is that integer


def lp_forest(net: Network, max_trees: int = 0) -> LPForest:
    """Round the LP's optimum to trees and pack them (appendix E, last paragraph).

    With ``K`` trees in all, each of ``y = X / K`` GB/s, root v gets ``floor(x_v / y)`` trees
    and a logical edge ``floor(L(u, t) / y)`` trees; the smallest K (up to ``max_trees``,
    default 4 N) whose rounding passes Theorem 1's test in both graphs (exact integer
    max-flows) and loses the least throughput is packed: Bérczi-Frank with unequal roots on
    the broadcast graph, and on the transpose of the reduce graph for the in-trees.
    """
    lp = allreduce_lp(net)
    n = net.nranks
    best: tuple[float, int, tuple[int, ...], dict[tuple[int, int], int], dict[tuple[int, int], int]] | None = None
    for total in range(1, (max_trees or 4 * n) + 1):
        y = lp.value / total
        roots = tuple(int(x / y + _EPS) for x in lp.roots)
        if sum(roots) == 0 or (best is not None and sum(roots) * y <= best[0] * (1 + _EPS)):
            continue
        bc = {e: int(v / y + _EPS) for e, v in lp.bcast.items() if int(v / y + _EPS) > 0}
        rd = {(t, u): int(v / y + _EPS) for (u, t), v in lp.reduce.items() if int(v / y + _EPS) > 0}
        if _holds(n, bc, roots) and _holds(n, rd, roots):
            best = (sum(roots) * y, total, roots, bc, rd)
            if sum(roots) * y >= lp.value * (1 - _EPS):
                break
    if best is None:
        raise ScheduleError(f"forestcoll: no rounding of the allreduce LP on {net.name} holds its trees")
    _, total, roots, bc, rd = best
    forests = []
    for caps in (bc, rd):
        logical = Logical(n, dict(caps), {})
        trees = shorten(pack_trees(logical, roots), logical)
        check_forest(trees, n, roots)
        forests.append(tuple(trees))
    return LPForest(lp, forests[0], forests[1], roots, lp.value / total)
