"""Spanning out-tree packing on the switch-free graph, and mapping back to links.

ForestColl section 4.4 and appendix C.3 (Theorems 9-12, Algorithm 5): Bérczi and
Frank's batched packing with multiplicities.  Every root ``v`` starts one tree
``({v}, no edges)`` of multiplicity ``k``.  A tree ``j`` grows breadth-first; for an
edge ``(x, y)`` leaving its vertex set ``R_j`` the number of its copies that may take
the edge is (Theorem 12, one max-flow)::

    mu = min(c(x,y), m_j, F(x, y; D_j) - sum_{i != j} m_i)

where ``D_j`` is the residual graph plus a node ``s_i`` per other unfinished tree with
``x -> s_i`` of capacity ``m_i`` and ``s_i -> R_i`` infinite (trees with equal vertex
sets share one ``s_i``).  When ``mu < m_j`` the tree splits: ``m_j - mu`` copies stay
behind as a new tree.  Trees keep their multiplicities throughout: a tree of
multiplicity m carries m chunks and is never expanded into copies.

``map_back`` consumes, for every tree edge, units of the logical edge's physical
paths (``splitting.Logical.paths``), so the physical link loads can be checked
against ``U b(e)`` exactly (``link_loads``).

>>> from collc.topology import parse_spec
>>> from collc.frontends.forestcoll.flow import Network, optimal
>>> from collc.frontends.forestcoll.splitting import split_switches
>>> net = Network.of(parse_spec("a100:2x8"))
>>> opt = optimal(net)
>>> trees = pack_trees(split_switches(net, opt.scaled(net), opt.k), opt.k)
>>> len(trees), sum(t.mult for t in trees if t.root == 0), len(trees[0].edges)
(26, 13, 15)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
# scipy is imported where a flow is computed: every command loads the registry, and scipy.sparse
# with csgraph costs about 0.2 s of start-up

from collc.errors import ScheduleError
from collc.frontends.forestcoll.flow import INT_LIMIT, Edge
from collc.frontends.forestcoll.splitting import Logical, Path, _take

__all__ = ["Tree", "pack_trees", "map_back", "link_loads", "check_forest"]


@dataclass(frozen=True)
class Tree:
    """A spanning out-tree: root, edges (parent, child) in the order they were added
    (parents before children), multiplicity (trees, hence chunks, it stands for)."""

    root: int
    edges: tuple[Edge, ...]
    mult: int

    def depths(self) -> dict[int, int]:
        depth = {self.root: 0}
        for p, c in self.edges:
            depth[c] = depth[p] + 1
        return depth

    @property
    def height(self) -> int:
        return max(self.depths().values())


@dataclass
class _Growing:
    root: int
    verts: list[int]
    edges: list[Edge]
    mult: int


class _Aux:
    """D_j as one CSR matrix: the residual edges, an auxiliary node s_i per group i of
    other trees with ``s_i -> R_i`` of infinite capacity, and a hub h with ``h -> s_i``
    of capacity m_i.  The edge ``x -> h`` (a placeholder for every rank) is infinite only
    while a flow from x runs, which makes h stand for x's edges ``x -> s_i`` (m_i)."""

    def __init__(self, n: int, rows: np.ndarray, cols: np.ndarray, cap: np.ndarray,
                 groups: list[tuple[tuple[int, ...], int]], big: int) -> None:
        g = len(groups)
        hub = n + g
        r = [rows, np.arange(n, dtype=np.int32), np.full(g, hub, dtype=np.int32)]
        c = [cols, np.full(n, hub, dtype=np.int32), np.arange(n, n + g, dtype=np.int32)]
        d = [cap, np.zeros(n, dtype=np.int64), np.array([m for _, m in groups], dtype=np.int64)]
        for i, (verts, _) in enumerate(groups):
            r.append(np.full(len(verts), n + i, dtype=np.int32))
            c.append(np.array(verts, dtype=np.int32))
            d.append(np.full(len(verts), big, dtype=np.int64))
        rr, cc, dd = np.concatenate(r), np.concatenate(c), np.concatenate(d)
        order = np.lexsort((cc, rr))
        size = hub + 1
        indptr = np.zeros(size + 1, dtype=np.int32)
        np.cumsum(np.bincount(rr, minlength=size), out=indptr[1:])
        import scipy.sparse as sp  # type: ignore[import-untyped]
        self.matrix = sp.csr_matrix((dd[order].astype(np.int32), cc[order], indptr), shape=(size, size))
        slot = np.empty(len(order), dtype=np.int64)
        slot[order] = np.arange(len(order))
        self.edge_slot = slot[:len(rows)]                   # residual edge -> slot
        self.hub_slot = slot[len(rows):len(rows) + n]       # x -> hub placeholder -> slot
        self.big = big
        self.total = sum(m for _, m in groups)

    def flow(self, x: int, y: int) -> int:
        """F(x, y; D_j) - sum of the other trees' multiplicities."""
        data = self.matrix.data
        data[self.hub_slot[x]] = self.big
        from scipy.sparse.csgraph import maximum_flow  # type: ignore[import-untyped]
        value = int(maximum_flow(self.matrix, x, y).flow_value)
        data[self.hub_slot[x]] = 0
        return value - self.total


def pack_trees(logical: Logical, k: int) -> list[Tree]:
    n = logical.nranks
    keys = sorted(logical.cap)
    eid = {e: i for i, e in enumerate(keys)}
    cap = np.array([logical.cap[e] for e in keys], dtype=np.int64)
    rows = np.array([a for a, _ in keys], dtype=np.int32)
    cols = np.array([b for _, b in keys], dtype=np.int32)
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in keys:
        succ[a].append(b)
    queue: deque[_Growing] = deque(_Growing(v, [v], [], k) for v in range(n))
    done: list[Tree] = []
    big = int(cap.sum()) + n * k + 1
    if big * (n + 1) > INT_LIMIT:
        raise ScheduleError("forestcoll: capacities too large for the int32 max-flow solver")

    def aux_for(others: deque[_Growing]) -> _Aux | None:
        # D_j's extra nodes: one per distinct vertex set among the other unfinished trees
        groups: dict[tuple[int, ...], int] = {}
        for other in others:
            key = tuple(sorted(other.verts))
            groups[key] = groups.get(key, 0) + other.mult
        return _Aux(n, rows, cols, cap, sorted(groups.items()), big) if groups else None

    while queue:
        j = queue.popleft()
        aux = aux_for(queue)
        inside = set(j.verts)
        todo = deque(j.verts)
        while todo and len(inside) < n:
            x = todo.popleft()
            for y in succ[x]:
                e = eid[(x, y)]
                if y in inside or cap[e] == 0:
                    continue
                mu = min(int(cap[e]), j.mult)
                if aux is not None:
                    mu = min(mu, aux.flow(x, y))
                if mu <= 0:
                    continue
                j.verts.append(y)
                j.edges.append((x, y))
                inside.add(y)
                cap[e] -= mu
                todo.append(y)
                if mu < j.mult:
                    verts, edges = j.verts[:-1], j.edges[:-1]
                    queue.append(_Growing(j.root, verts, edges, j.mult - mu))
                    j.mult = mu
                    aux = aux_for(queue)      # the groups changed: rebuild D_j
                elif aux is not None:
                    aux.matrix.data[aux.edge_slot[e]] = cap[e]
        if len(inside) < n:
            raise ScheduleError(f"forestcoll: tree packing got stuck at root {j.root} with {len(inside)} of {n} "
                                f"ranks (the logical graph does not hold k={k} trees per root)")
        done.append(Tree(j.root, tuple(j.edges), j.mult))
    done.sort(key=lambda t: (t.root, -t.mult, t.edges))
    return done


def map_back(trees: list[Tree], logical: Logical) -> list[list[tuple[Path, int]]]:
    """For each tree, each edge's physical paths with the units they take (sum = mult)."""
    pool = {e: list(u) for e, u in logical.paths.items()}
    out: list[list[tuple[Path, int]]] = []
    for t in trees:
        used: list[tuple[Path, int]] = []
        for e in t.edges:
            if sum(n for _, n in pool.get(e, [])) < t.mult:
                raise ScheduleError(f"forestcoll: logical edge {e} has too few units for its trees")
            used.extend(_take(pool[e], t.mult))
        out.append(used)
    return out


def link_loads(mapped: list[list[tuple[Path, int]]]) -> dict[Edge, int]:
    """Trees (units) crossing each physical link."""
    load: dict[Edge, int] = {}
    for used in mapped:
        for path, units in used:
            for a, b in zip(path, path[1:]):
                load[(a, b)] = load.get((a, b), 0) + units
    return load


def check_forest(trees: list[Tree], n: int, k: int) -> None:
    """Every tree spans all ranks with N-1 edges; multiplicities sum to k per root."""
    per_root = [0] * n
    for t in trees:
        verts = {t.root} | {c for _, c in t.edges}
        if len(t.edges) != n - 1 or verts != set(range(n)) or t.mult < 1:
            raise ScheduleError(f"forestcoll: a tree of root {t.root} does not span the {n} ranks")
        per_root[t.root] += t.mult
    bad = [v for v in range(n) if per_root[v] != k]
    if bad:
        raise ScheduleError(f"forestcoll: root {bad[0]} has {per_root[bad[0]]} trees, not k={k}")
