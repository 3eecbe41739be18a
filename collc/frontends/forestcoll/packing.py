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

``shorten`` then re-hangs ranks on shallower parents through the logical capacity the
packing left unused (or that another tree gives up), without raising any rank's number of
tree edges out: the packing grows trees one after another and the last ones take long
ways round (mi250:2 at k=1: tallest tree 12 hops, 7 after ``shorten``).

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
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
# scipy is imported where a flow is computed: every command loads the registry, and scipy.sparse
# with csgraph costs about 0.2 s of start-up

from collc.errors import ScheduleError
from collc.frontends.forestcoll.flow import INT_LIMIT, Edge, max_flows
from collc.frontends.forestcoll.splitting import Logical, Path, _take

__all__ = ["Tree", "pack_trees", "shorten", "map_back", "link_loads", "check_forest"]

#: queries whose flows one solver call computes ahead in ``pack_trees`` (speculatively)
BATCH = 16


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

    def flows(self, queries: list[tuple[int, int, int, bool]], mult: int, cap: np.ndarray) -> list[int]:
        """``F(x, y; D_j) - sum of the other trees' multiplicities`` for each query
        ``(x, y, e, take)`` in the state where every earlier query with ``take`` took
        ``min(cap[e], mult)`` units of its edge e (one solver call, :func:`flow.max_flows`)."""
        data = np.tile(self.matrix.data, (len(queries), 1))
        for i, (x, _, e, take) in enumerate(queries):
            data[i, self.hub_slot[x]] = self.big
            if take:
                data[i + 1:, self.edge_slot[e]] -= min(int(cap[e]), mult)
        ends = [(x, y) for x, y, _, _ in queries]
        return [v - self.total for v in max_flows(self.matrix, data, ends)]


def pack_trees(logical: Logical, k: int | tuple[int, ...]) -> list[Tree]:
    """``k`` trees per root, or ``k[v]`` at root v (appendix E's unequal roots; 0: none)."""
    n = logical.nranks
    per = k if isinstance(k, tuple) else (k,) * n
    keys = sorted(logical.cap)
    eid = {e: i for i, e in enumerate(keys)}
    cap = np.array([logical.cap[e] for e in keys], dtype=np.int64)
    rows = np.array([a for a, _ in keys], dtype=np.int32)
    cols = np.array([b for _, b in keys], dtype=np.int32)
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in keys:
        succ[a].append(b)
    queue: deque[_Growing] = deque(_Growing(v, [v], [], per[v]) for v in range(n) if per[v] > 0)
    done: list[Tree] = []
    big = int(cap.sum()) + sum(per) + 1
    if big * (n + 1) > INT_LIMIT:
        raise ScheduleError("forestcoll: capacities too large for the int32 max-flow solver")

    def aux_for(others: deque[_Growing]) -> _Aux | None:
        # D_j's extra nodes: one per distinct vertex set among the other unfinished trees
        groups: dict[tuple[int, ...], int] = {}
        for other in others:
            key = tuple(sorted(other.verts))
            groups[key] = groups.get(key, 0) + other.mult
        return _Aux(n, rows, cols, cap, sorted(groups.items()), big) if groups else None

    def frontier(verts: list[int], inside: set[int], head: int, x: int,
                 at: int) -> Iterator[tuple[int, int, int, int, int]]:
        """The edges ``(x, y, e)`` a breadth-first growth queries next, from ``succ[x][at:]``
        and then from ``verts[head:]`` on, each with the ``at`` and ``head`` it resumes from;
        it reads ``verts``, ``inside`` and ``cap`` as the caller changes them."""
        while True:
            nexts = succ[x]
            for i in range(at, len(nexts)):
                y = nexts[i]
                e = eid[(x, y)]
                if y not in inside and cap[e] != 0:
                    yield x, y, e, i, head
            if head == len(verts) or len(inside) == n:
                return
            x, at, head = verts[head], 0, head + 1

    def upcoming(j: _Growing, head: int, x: int, at: int, takes: dict[Edge, bool]) -> list[tuple[int, int, int, bool]]:
        """The next queries ``(x, y, e, take)`` of j's growth from ``succ[x][at]`` (then
        ``j.verts[head:]``), each guessed to take its edge as ``takes`` says (yes when it does
        not know), at most BATCH."""
        verts, inside = list(j.verts), set(j.verts)
        out: list[tuple[int, int, int, bool]] = []
        for x, y, e, _, _ in frontier(verts, inside, head, x, at):
            take = takes.get((x, y), True)
            out.append((x, y, e, take))
            if len(out) == BATCH:
                break
            if take:
                inside.add(y)
                verts.append(y)
        return out

    while queue:
        j = queue.popleft()
        aux = aux_for(queue)
        inside = set(j.verts)
        # Lookahead: the flows of the next BATCH queries come from one solver call, each in
        # the state where the earlier ones went as guessed (a take when unknown, else as the
        # latest value said).  While every edge taken since was guessed taken earlier, a
        # value is a lower bound (capacities fell no more than guessed), value plus the units
        # guessed taken but not taken is an upper bound (a unit of capacity adds at most a
        # unit of flow), and the value is exact when the same edges were taken; a query the
        # bounds do not settle starts a new batch.
        takes: dict[Edge, bool] = {}
        spec: dict[Edge, tuple[int, int, int, int, bool]] = {}   # position, value, units and takes guessed before, take
        taken, took, last = 0, 0, -1      # takes since the batch: how many, their units, the latest position
        for x, y, e, at, head in frontier(j.verts, inside, 1, j.verts[0], 0):
            mu = min(int(cap[e]), j.mult)
            if aux is not None:
                # an edge the batch did not foresee has position -1 <= last: a new batch
                pos, value, before, count, guess = spec.get((x, y), (-1, 0, 0, 0, False))
                if pos <= last or not (taken == count or value >= mu or value + before - took <= 0):
                    queries = upcoming(j, head, x, at, takes)
                    spec, before, count = {}, 0, 0
                    for i, ((a, b, f, take), v) in enumerate(zip(queries, aux.flows(queries, j.mult, cap))):
                        spec[(a, b)] = (i, v, before, count, take)
                        takes[(a, b)] = v > 0
                        if take:
                            before, count = before + min(int(cap[f]), j.mult), count + 1
                    taken, took, last = 0, 0, -1
                    pos, value, before, count, guess = spec[(x, y)]
                mu = min(mu, value)
            if mu <= 0:
                continue
            if aux is not None:
                # a take guessed as a skip: no later value of the batch bounds anything
                taken, took, last = taken + 1, took + mu, max(last, pos if guess else BATCH)
            j.verts.append(y)
            j.edges.append((x, y))
            inside.add(y)
            cap[e] -= mu
            if mu < j.mult:
                verts, edges = j.verts[:-1], j.edges[:-1]
                queue.append(_Growing(j.root, verts, edges, j.mult - mu))
                j.mult = mu
                aux = aux_for(queue)      # the groups changed: rebuild D_j
                spec = {}
            elif aux is not None:
                aux.matrix.data[aux.edge_slot[e]] = cap[e]
        if len(inside) < n:
            raise ScheduleError(f"forestcoll: tree packing got stuck at root {j.root} with {len(inside)} of {n} "
                                f"ranks (the logical graph does not hold k={k} trees per root)")
        done.append(Tree(j.root, tuple(j.edges), j.mult))
    done.sort(key=lambda t: (t.root, -t.mult, t.edges))
    return done


def shorten(trees: list[Tree], logical: Logical) -> list[Tree]:
    """Re-hang ranks on shallower parents: shorter trees within the same capacities.

    A tree is any spanning out-tree whose edges fit the logical capacities, so moving a
    rank ``y`` (with its subtree) of tree A from parent ``p`` to a parent ``q`` not below
    ``y`` keeps every property the packing guarantees when ``(q, y)`` has A's ``mult``
    spare units.  When it has not, a tree B using ``(q, y)`` may give it up by moving its
    own ``y`` to another parent ``q2`` (possibly the ``p`` that A frees).  A move (or
    swap) is made when it lowers sum(mult x 4^depth) over all trees' ranks, which weighs
    the deepest ranks most and strictly falls, so the loop ends.  The packing grows trees
    one after another and the last ones take long ways round; shorter trees fill and drain
    their pipelines sooner (mi250:2, k=1: the tallest tree goes from 12 hops to 7).  No move
    raises the busiest rank's count of tree edges out, so the lowering's threadblocks per
    rank do not grow.  Deterministic: trees tallest first, ranks deepest first, parents
    shallowest first, ties by index.
    """
    spare = dict(logical.cap)
    users: dict[Edge, set[int]] = {}
    par: list[dict[int, int]] = []
    for i, t in enumerate(trees):
        par.append({c: p for p, c in t.edges})
        for e in t.edges:
            spare[e] -= t.mult
            users.setdefault(e, set()).add(i)
    preds: dict[int, list[int]] = {}
    for (a, b) in sorted(logical.cap):
        preds.setdefault(b, []).append(a)
    mult = [t.mult for t in trees]
    # a rank's tree edges out (each a send connection where trees have lanes of their own):
    # no move raises the busiest rank's count, so the threadblocks per rank do not grow
    fanout: dict[int, int] = {}
    for t in trees:
        for p, _ in t.edges:
            fanout[p] = fanout.get(p, 0) + 1
    most = max(fanout.values(), default=0)

    depths: dict[int, dict[int, int]] = {}     # per tree, dropped when the tree changes
    kids: dict[int, dict[int, list[int]]] = {}

    def depth_of(i: int) -> dict[int, int]:
        if i not in depths:
            depths[i] = _depths(trees[i].root, par[i])
        return depths[i]

    def cost(i: int, y: int, delta: int) -> int:
        """Change of mult x 4^depth over y's subtree in tree i when y moves by delta."""
        if i not in kids:
            kids[i] = {}
            for c, p in par[i].items():
                kids[i].setdefault(p, []).append(c)
        depth, below = depth_of(i), kids[i]
        total, todo = 0, [y]
        while todo:
            v = todo.pop()
            total += 4 ** (depth[v] + delta) - 4 ** depth[v]
            todo.extend(below.get(v, ()))
        return total * mult[i]

    def move(i: int, y: int, q: int) -> None:
        p = par[i][y]
        fanout[p] -= 1
        fanout[q] = fanout.get(q, 0) + 1
        spare[(p, y)] += mult[i]
        users[(p, y)].discard(i)
        spare[(q, y)] -= mult[i]
        users.setdefault((q, y), set()).add(i)
        par[i][y] = q
        depths.pop(i, None)
        kids.pop(i, None)

    def improve(a: int) -> bool:
        da = depth_of(a)
        for y in sorted(par[a], key=lambda v: (-da[v], v)):
            pa = par[a][y]
            for q in sorted(preds.get(y, []), key=lambda v: (da[v], v)):
                if da[q] + 1 >= da[y] or _below(q, y, par[a]):
                    continue
                gain = cost(a, y, da[q] + 1 - da[y])
                if spare.get((q, y), 0) >= mult[a] and fanout.get(q, 0) < most:
                    move(a, y, q)
                    return True
                for b in sorted(users.get((q, y), ())):
                    if b == a:
                        continue
                    db = depth_of(b)
                    for q2 in preds.get(y, []):
                        if q2 == q or _below(q2, y, par[b]) or (q2 != pa and fanout.get(q2, 0) >= most):
                            continue
                        # spare after A takes (q, y) from B and B takes (q2, y)
                        freed = mult[a] if q2 == pa else 0
                        if spare[(q, y)] + mult[b] < mult[a] or spare.get((q2, y), 0) + freed < mult[b]:
                            continue
                        if gain + cost(b, y, db[q2] + 1 - db[y]) >= 0:
                            continue
                        move(b, y, q2)
                        move(a, y, q)
                        return True
        return False

    order = sorted(range(len(trees)), key=lambda i: (-trees[i].height, i))
    progress = True
    while progress:
        progress = False
        for a in order:
            while improve(a):
                progress = True
    out = []
    for i, t in enumerate(trees):
        if par[i] == {c: p for p, c in t.edges}:
            out.append(t)
        else:
            out.append(Tree(t.root, _bfs_edges(t.root, par[i]), t.mult))
    return out


def _depths(root: int, parent: dict[int, int]) -> dict[int, int]:
    depth = {root: 0}

    def of(v: int) -> int:
        chain = []
        while v not in depth:
            chain.append(v)
            v = parent[v]
        d = depth[v]
        for u in reversed(chain):
            d += 1
            depth[u] = d
        return depth[chain[0]] if chain else d

    for v in parent:
        of(v)
    return depth


def _below(q: int, y: int, parent: dict[int, int]) -> bool:
    """q is y or in y's subtree."""
    while True:
        if q == y:
            return True
        if q not in parent:
            return False
        q = parent[q]


def _bfs_edges(root: int, parent: dict[int, int]) -> tuple[Edge, ...]:
    children: dict[int, list[int]] = {}
    for c, p in sorted(parent.items()):
        children.setdefault(p, []).append(c)
    out: list[Edge] = []
    todo = deque([root])
    while todo:
        v = todo.popleft()
        for c in children.get(v, []):
            out.append((v, c))
            todo.append(c)
    return tuple(out)


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


def check_forest(trees: list[Tree], n: int, k: int | tuple[int, ...]) -> None:
    """Every tree spans all ranks with N-1 edges; multiplicities sum to k (or k[v]) per root."""
    want = k if isinstance(k, tuple) else (k,) * n
    per_root = [0] * n
    for t in trees:
        verts = {t.root} | {c for _, c in t.edges}
        if len(t.edges) != n - 1 or verts != set(range(n)) or t.mult < 1:
            raise ScheduleError(f"forestcoll: a tree of root {t.root} does not span the {n} ranks")
        per_root[t.root] += t.mult
    bad = [v for v in range(n) if per_root[v] != want[v]]
    if bad:
        raise ScheduleError(f"forestcoll: root {bad[0]} has {per_root[bad[0]]} trees, not k={want[bad[0]]}")
