"""Exact capacities, validation, max-flow and the optimality searches of ForestColl.

Zhao et al., "ForestColl: Efficient Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), section 4.2 and appendix C.1 (Algorithm 1,
Theorem 1, Propositions 2-3) and section 4.5 / appendix C.4 (Algorithm 3, Theorems
13-15).  Everything is exact: link bandwidths become integers in a common unit
(``unit`` GB/s), x* is a Fraction, and every max-flow runs on integer capacities
(``scipy.sparse.csgraph.maximum_flow``).

The search for x* is Theorem 1's test driven by Dinkelbach's iteration instead of
Algorithm 1's bisection: start from an x at or above x*; if some ``F(s, v; G_x) < N x``,
the minimum cut of that flow is a cut S with ``B+(S) / |S & V_c| < x``, which becomes
the next x.  Each x is the ratio of a real cut, so its denominator is at most N-1 and
the scaled capacities stay small, and the last cut is the bottleneck cut S* (the
bisection of Algorithm 1 reaches the same fraction; see ``docs/forestcoll.md``).

>>> from collc.topology import parse_spec
>>> net = Network.of(parse_spec("a100:2x8"))
>>> opt = optimal(net)
>>> opt.x_star * net.unit, opt.k, opt.U / net.unit, float(opt.algbw(net))
(Fraction(65, 3), 13, Fraction(3, 5), 346.6666666666667)
>>> fixed_k(net, 1).algbw(net)
Fraction(2400, 7)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import reduce
from typing import Any

import numpy as np
# scipy is imported where a flow is computed: every command loads the registry, and scipy.sparse
# with csgraph costs about 0.2 s of start-up

from collc.errors import ScheduleError
from collc.topology import Topology

__all__ = ["Network", "Optimum", "optimal", "fixed_k", "feasible", "FlowNet", "INT_LIMIT"]

#: scipy's max-flow works on int32 capacities; every flow network stays below this.
INT_LIMIT = (1 << 31) - 1

Edge = tuple[int, int]


@dataclass(frozen=True)
class Network:
    """A topology's capacities as integers: ``b(e) = cap[e] * unit`` GB/s.

    Nodes ``0 .. nranks-1`` are compute nodes, the rest switches (the Topology's ids).
    """

    name: str
    nranks: int
    nnodes: int
    cap: dict[Edge, int]
    unit: Fraction

    @classmethod
    def of(cls, topology: Topology) -> Network:
        exact = {(lk.src, lk.dst): Fraction(repr(lk.bandwidth)) * lk.multiplicity for lk in topology.links}
        if not exact:
            raise ScheduleError(f"forestcoll: {topology.name} has no links")
        den = reduce(math.lcm, (f.denominator for f in exact.values()), 1)
        num = reduce(math.gcd, (int(f * den) for f in exact.values()), 0)
        unit = Fraction(num, den)
        cap = {e: int(f / unit) for e, f in exact.items()}
        net = cls(topology.name, topology.nranks, topology.nnodes, cap, unit)
        net.validate()
        return net

    def validate(self) -> None:
        """Eulerian (ingress = egress at every node) and strongly connected."""
        if self.nranks < 2:
            raise ScheduleError("forestcoll needs at least 2 ranks")
        inn = [0] * self.nnodes
        out = [0] * self.nnodes
        for (a, b), c in self.cap.items():
            out[a] += c
            inn[b] += c
        for v in range(self.nnodes):
            if inn[v] != out[v]:
                what = "rank" if v < self.nranks else "switch node"
                raise ScheduleError(f"forestcoll: {self.name} is not Eulerian: {what} {v} has ingress "
                                    f"{inn[v] * self.unit} GB/s but egress {out[v] * self.unit} GB/s")
        succ: list[list[int]] = [[] for _ in range(self.nnodes)]
        pred: list[list[int]] = [[] for _ in range(self.nnodes)]
        for a, b in self.cap:
            succ[a].append(b)
            pred[b].append(a)
        for adj, how in ((succ, "cannot be reached from"), (pred, "cannot reach")):
            seen = {0}
            todo = [0]
            while todo:
                for y in adj[todo.pop()]:
                    if y not in seen:
                        seen.add(y)
                        todo.append(y)
            if len(seen) < self.nnodes:
                v = min(set(range(self.nnodes)) - seen)
                what = "rank" if v < self.nranks else "switch node"
                raise ScheduleError(f"forestcoll: {self.name} is not strongly connected: {what} {v} {how} rank 0")

    def ingress(self, v: int) -> int:
        return sum(c for (_, b), c in self.cap.items() if b == v)

    @property
    def bidirectional(self) -> bool:
        return all(self.cap.get((b, a)) == c for (a, b), c in self.cap.items())


class FlowNet:
    """A fixed edge list as a CSR matrix whose capacities can be changed in place."""

    def __init__(self, n: int, edges: list[Edge], caps: list[int]) -> None:
        if any(c > INT_LIMIT for c in caps) or sum(caps) > INT_LIMIT:
            raise ScheduleError("forestcoll: scaled capacities exceed the int32 range of the max-flow solver")
        merged: dict[Edge, int] = {}
        for e, c in zip(edges, caps):
            merged[e] = merged.get(e, 0) + c
        keys = sorted(merged)
        rows = np.fromiter((a for a, _ in keys), dtype=np.int32, count=len(keys))
        cols = np.fromiter((b for _, b in keys), dtype=np.int32, count=len(keys))
        data = np.fromiter((merged[e] for e in keys), dtype=np.int32, count=len(keys))
        self.n = n
        import scipy.sparse as sp  # type: ignore[import-untyped]
        self.matrix = sp.csr_matrix((data, (rows, cols)), shape=(n, n), dtype=np.int32)
        self.matrix.sort_indices()
        self._slot = {e: i for i, e in enumerate(keys)}   # csr data order = sorted (row, col)

    def put(self, edge: Edge, cap: int) -> None:
        self.matrix.data[self._slot[edge]] = cap

    def flow(self, s: int, t: int) -> int:
        from scipy.sparse.csgraph import maximum_flow  # type: ignore[import-untyped]
        return int(maximum_flow(self.matrix, s, t).flow_value)

    def flows(self, s: int, sinks: Sequence[int]) -> list[int]:
        """``F(s, t)`` for every ``t`` in ``sinks``, in one solver call (:func:`max_flows`)."""
        return max_flows(self.matrix, self.matrix.data, [(s, t) for t in sinks])

    def min_cut_source_side(self, s: int, t: int) -> set[int]:
        """Nodes reachable from ``s`` in the residual network of a maximum flow."""
        from scipy.sparse.csgraph import maximum_flow
        flow = maximum_flow(self.matrix, s, t).flow.toarray()   # antisymmetric
        residual = self.matrix.toarray() - flow
        seen = {s}
        todo = [s]
        while todo:
            u = todo.pop()
            for v in np.nonzero(residual[u] > 0)[0]:
                if int(v) not in seen:
                    seen.add(int(v))
                    todo.append(int(v))
        return seen


def max_flows(matrix: Any, data: np.ndarray, ends: Sequence[Edge]) -> list[int]:
    """Maximum flow values of copies of one sorted int32 CSR graph, in one scipy call.

    Copy ``i`` has the capacities ``data[i]`` (or ``data`` for all) and runs from
    ``ends[i][0]`` to ``ends[i][1]``.  The copies are disjoint, joined by a super source
    and a super sink (edges of capacity INT_LIMIT, above any copy's flow), so a maximum
    flow of the union is a maximum flow in every copy and the flow on each super source
    edge is that copy's value, exactly.  One call instead of one per pair: scipy's
    ``maximum_flow`` spends about 0.4 ms per call on CSR validation and transposes,
    far more than Dinic takes on these graphs.
    """
    if not ends:
        return []
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow
    r, size, nnz = len(ends), matrix.shape[0], matrix.nnz
    base = np.arange(r, dtype=np.int64) * size
    src = base + np.array([a for a, _ in ends], dtype=np.int64)
    dst = base + np.array([b for _, b in ends], dtype=np.int64)
    source, sink = r * size, r * size + 1
    counts = np.zeros(r * size + 2, dtype=np.int64)
    counts[:r * size] = np.tile(np.diff(matrix.indptr), r)
    counts[dst] += 1                      # the edge to the sink ends its row (the highest index)
    counts[source] = r
    indptr = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(nnz * r + 2 * r, dtype=np.int32)
    values = np.empty(nnz * r + 2 * r, dtype=np.int32)
    to_sink = indptr[dst + 1] - 1
    copied = np.ones(len(indices), dtype=bool)
    copied[to_sink] = False
    copied[-r:] = False                   # the source's row comes last (the sink's is empty)
    indices[copied] = (matrix.indices[None, :] + base[:, None]).ravel()
    values[copied] = np.broadcast_to(data, (r, nnz)).ravel()
    indices[to_sink] = sink
    values[to_sink] = INT_LIMIT
    indices[-r:] = src
    values[-r:] = INT_LIMIT
    union = csr_matrix((values, indices, indptr), shape=(sink + 1, sink + 1))
    flow = maximum_flow(union, source, sink).flow
    lo, hi = flow.indptr[source], flow.indptr[source + 1]
    out = np.zeros(r, dtype=np.int64)
    out[flow.indices[lo:hi] // size] = flow.data[lo:hi]
    return [int(v) for v in out]


def source_net(net: Network, caps: dict[Edge, int], k: int, extra: tuple[Edge, ...] = ()) -> FlowNet:
    """``caps`` plus a source ``s = nnodes`` with ``s -> v`` of capacity ``k`` for every rank,
    and zero-capacity placeholders for ``extra`` edges (set later with ``FlowNet.put``)."""
    s = net.nnodes
    edges = list(caps) + [(s, v) for v in range(net.nranks)] + list(extra)
    values = list(caps.values()) + [k] * net.nranks + [0] * len(extra)
    return FlowNet(net.nnodes + 1, edges, values)


def feasible(net: Network, caps: dict[Edge, int], k: int) -> int | None:
    """Theorem 1/5 test: None when ``F(s, v) >= N k`` for every rank ``v``, else a failing rank."""
    g = source_net(net, caps, k)
    need = net.nranks * k
    return next((v for v, f in enumerate(g.flows(net.nnodes, range(net.nranks))) if f < need), None)


@dataclass(frozen=True)
class Optimum:
    """x* (per-root bandwidth, in units), k trees per root, U = k / x* (capacity scale)."""

    x_star: Fraction
    k: int
    U: Fraction
    cut: frozenset[int]       # the bottleneck cut S* (nodes), or empty when unknown

    def algbw(self, net: Network) -> Fraction:
        """Allgather / reduce-scatter algbw in GB/s: N x* (N k / U)."""
        return net.nranks * self.x_star * net.unit

    def scaled(self, net: Network) -> dict[Edge, int]:
        """``floor(U b(e))`` (exact ``U b(e)`` at the optimum)."""
        return {e: math.floor(self.U * c) for e, c in net.cap.items()}


def _cut_ratio(net: Network, side: set[int]) -> tuple[int, int]:
    nodes = {v for v in side if v < net.nnodes}
    out = sum(c for (a, b), c in net.cap.items() if a in nodes and b not in nodes)
    return out, sum(1 for v in nodes if v < net.nranks)


def optimal(net: Network) -> Optimum:
    """x*, the bottleneck cut, and Proposition 3's smallest k with integer U b(e)."""
    n = net.nranks
    # x* <= min_v B-(v) / (N-1): the cut of everything but the weakest rank (appendix C.1)
    x = Fraction(min(net.ingress(v) for v in range(n)), n - 1)
    cut: frozenset[int] = frozenset(set(range(net.nnodes)) - {min(range(n), key=net.ingress)})
    while True:
        q, p = x.denominator, x.numerator   # test x = p/q with capacities scaled by q
        caps = {e: c * q for e, c in net.cap.items()}
        g = source_net(net, caps, p)
        failing = next((v for v, f in enumerate(g.flows(net.nnodes, range(n))) if f < n * p), None)
        if failing is None:
            break
        side = g.min_cut_source_side(net.nnodes, failing)
        out, inside = _cut_ratio(net, side)
        nxt = Fraction(out, inside)
        if nxt >= x:   # pragma: no cover - a min cut below N x always has a smaller ratio
            raise ScheduleError("forestcoll: optimality search did not progress")
        x, cut = nxt, frozenset(v for v in side if v < net.nnodes)
    inv = 1 / x
    g_ = reduce(math.gcd, net.cap.values(), inv.denominator)
    return Optimum(x, inv.denominator // g_, Fraction(inv.numerator, g_), cut)


def fixed_k(net: Network, k: int) -> Optimum:
    """Algorithm 3: the smallest U with k trees per root in floor(U G) (Theorems 13-15).

    U_k* lies in ``[k / x*, k / x* + 1 / min b]`` (Theorem 15) and is a breakpoint
    ``m / b(e)``; a binary search over the sorted breakpoints finds it exactly.
    """
    if k < 1:
        raise ScheduleError(f"forestcoll: k must be at least 1, got {k}")
    opt = optimal(net)
    lo = k / opt.x_star
    hi = lo + Fraction(1, min(net.cap.values()))
    points = sorted({Fraction(m, b) for b in set(net.cap.values())
                     for m in range(math.ceil(lo * b), math.floor(hi * b) + 1)})

    def ok(u: Fraction) -> bool:
        caps = {e: math.floor(u * c) for e, c in net.cap.items()}
        return feasible(net, {e: c for e, c in caps.items() if c > 0}, k) is None

    a, b = 0, len(points) - 1
    if not points or not ok(points[b]):   # pragma: no cover - Theorem 15 guarantees hi
        raise ScheduleError(f"forestcoll: no feasible U for k={k}")
    while a < b:
        mid = (a + b) // 2
        if ok(points[mid]):
            b = mid
        else:
            a = mid + 1
    u = points[a]
    return Optimum(Fraction(k) / u, k, u, opt.cut)
