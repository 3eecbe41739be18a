"""BFB (breadth-first broadcast) allgather, reduce-scatter and allreduce on any digraph.

Paper: Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications" (arXiv 2202.03356), section 6 and appendix D; the rebuilt math
is in ``docs/direct-connect.md``.

Collectives: allgather (``D`` steps, ``D`` the diameter), reducescatter (``D``
steps: the allgather of the transpose graph run backwards, Def 7 / Thm 3) and
allreduce (reduce-scatter then allgather, ``2 D`` steps).  Topology: any strongly
connected direct-connect graph (no switch nodes); parallel links count through
their multiplicity, and a ``ports`` parameter on the topology counts ports lost to
self-loops (de Bruijn, generalized Kautz).

Schedule: a shard travels only on shortest paths and reaches every node at
distance ``t`` in step ``t``.  Which byte range a sender forwards does not matter
(every eligible sender holds the whole shard), only how much: for each step ``t``
and receiver ``v`` LP (3) minimises the largest load ``U`` of an in-link of ``v``
(scipy HiGHS).  ``U`` is rationalised (its denominator is at most the in-link
count) and proved feasible by an integral max-flow at the chosen chunk count ``C``
(LCM of the denominators, or a fixed count with the ``ceil(U C)`` rounding of App
D.2), which also yields the exact integer split.  Cost (eq. 4): ``T_L = D alpha``,
``T_B = beta M / B`` with ``beta = (d/N) sum_t max_v U_{t,v}``.  In a reduce-scatter,
partials of one slot that arrive over several links in one step land in scratch and
are folded in by a local step, so the schedule may have local-only steps between
communication steps (``schedule_cost`` counts the latter).  On graphs whose
nodes form an abelian translation group (rings, circulants, tori, hypercubes,
Hamming graphs) one node is solved per step and the answer translated.

>>> from collc.topology import parse_spec
>>> r = bfb_allgather(parse_spec("torus:3x3"))
>>> r.diameter, r.beta, r.chunks
(2, Fraction(8, 9), 1)
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> s = build_schedule("bfb", parse_spec("ring:8"), CollKind.ALLREDUCE, inplace=True)
>>> schedule_cost(s, parse_spec("ring:8"))   # communication steps, beta of both phases
(8, Fraction(7, 4))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp  # type: ignore[import-untyped]

# scipy is imported by the functions that use it: every command loads the registry, and
# scipy.optimize alone costs a third of a second of start-up

from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, ColumnBuilder, code, prefix_copy
from collc.frontends.registry import Algorithm, Options, Param, register
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = ("Zhao et al., Efficient Direct-Connect Topologies for Collective Communications, "
             "section 6 (BFB), LP (3), App. D.2")

__all__ = ["Digraph", "BFBResult", "digraph_of", "bfb_allgather", "applies", "build", "measure", "schedule_cost", "emit"]

#: Largest chunk count per shard the LCM rule may pick before it falls back to rounding.
MAX_LCM_CHUNKS = 64


@dataclass(frozen=True)
class Digraph:
    """A direct-connect digraph: ``arcs`` are ``(src, dst, multiplicity)``, no self-loops;
    ``degree`` counts every port (self-loops included); ``group`` the sizes of an abelian
    group ``Z_g1 x ... x Z_gk`` whose translations (mixed radix, last fastest) are
    automorphisms, when known."""

    n: int
    arcs: tuple[tuple[int, int, int], ...]
    degree: int
    group: tuple[int, ...] | None = None
    name: str = ""

    def transpose(self) -> Digraph:
        return Digraph(self.n, tuple(sorted((b, a, m) for a, b, m in self.arcs)), self.degree, self.group,
                       self.name + "^T")

    def matrix(self) -> sp.csr_matrix:
        import scipy.sparse as sp
        a = np.array(self.arcs, dtype=np.int64).reshape(-1, 3)
        return sp.csr_matrix((a[:, 2], (a[:, 0], a[:, 1])), shape=(self.n, self.n))


def _family_group(topology: Topology) -> tuple[int, ...] | None:
    family = topology.name.split(":", 1)[0]
    n = topology.nranks
    group = topology.param("group")
    if group:
        return tuple(int(x) for x in group.split("x"))
    if family == "hypercube":
        return (2,) * (n.bit_length() - 1)
    if family == "torus":
        dims = topology.param("dims")
        return tuple(int(x) for x in dims.split("x")) if dims else None
    if family in ("ring", "complete", "circulant"):
        return (n,)
    return None


def digraph_of(topology: Topology) -> Digraph:
    """The digraph BFB works on; ScheduleError when BFB does not apply."""
    reason = applies(topology)
    if reason is not None:
        raise ScheduleError(reason)
    arcs = tuple((lk.src, lk.dst, lk.multiplicity) for lk in topology.links)
    out = [0] * topology.nranks
    for a, _, m in arcs:
        out[a] += m
    ports = topology.param("ports")
    degree = int(ports) if ports else max(out)
    g = Digraph(topology.nranks, arcs, degree, None, topology.name)
    group = _family_group(topology)
    if group is not None and math.prod(group) == g.n and _is_translation_invariant(g, group):
        g = Digraph(g.n, g.arcs, g.degree, group, g.name)
    return g


def applies(topology: Topology, kind: CollKind | None = None) -> str | None:
    """None when BFB applies, else the reason."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components  # type: ignore[import-untyped]
    if topology.nswitches:
        return f"bfb needs a direct-connect topology; {topology.name} has switch nodes"
    if topology.nranks < 2:
        return "bfb needs at least 2 ranks"
    m = sp.csr_matrix((np.ones(len(topology.links)), ([lk.src for lk in topology.links],
                                                      [lk.dst for lk in topology.links])),
                      shape=(topology.nranks, topology.nranks))
    if connected_components(m, directed=True, connection="strong")[0] != 1:
        return f"bfb needs a strongly connected topology; {topology.name} is not"
    return None


# ---------------------------------------------------------------------- translation groups
def _coords(x: np.ndarray, group: Sequence[int]) -> list[np.ndarray]:
    out = []
    for g in reversed(group):
        out.append(x % g)
        x = x // g
    return out[::-1]


def _translate(x: np.ndarray, by: np.ndarray, group: Sequence[int], sign: int = 1) -> np.ndarray:
    """``x + by`` (or ``x - by``) in the group, elementwise on node-id arrays."""
    cx, cb = _coords(np.asarray(x, dtype=np.int64), group), _coords(np.asarray(by, dtype=np.int64), group)
    res = np.zeros(np.broadcast(np.asarray(x), np.asarray(by)).shape, dtype=np.int64)
    for a, b, g in zip(cx, cb, group):
        res = res * g + (a + sign * b) % g
    return res


def _is_translation_invariant(g: Digraph, group: tuple[int, ...]) -> bool:
    arcs = {(a, b): m for a, b, m in g.arcs}
    src = np.array([a for a, _, _ in g.arcs], dtype=np.int64)
    dst = np.array([b for _, b, _ in g.arcs], dtype=np.int64)
    mult = [m for _, _, m in g.arcs]
    stride = 1
    for size in reversed(group):       # the unit vectors generate the group
        gen = np.int64(stride)
        s2, d2 = _translate(src, gen, group), _translate(dst, gen, group)
        if any(arcs.get((int(a), int(b))) != m for a, b, m in zip(s2, d2, mult)):
            return False
        stride *= size
    return True


# ---------------------------------------------------------------------- the per-(t, v) problem
@dataclass(frozen=True)
class _Problem:
    sources: np.ndarray          # S: nodes at distance t to v
    links: np.ndarray            # W: in-neighbours of v
    mult: np.ndarray             # parallel arcs w -> v
    eligible: np.ndarray         # |S| x |W| bool: dist(u, w) = t - 1


#: In-link counts up to which U is computed by the Hall condition over link subsets
#: (2^|W| terms) instead of the LP.
HALL_MAX_LINKS = 12


def _masks(p: _Problem) -> np.ndarray:
    bits: np.ndarray = (p.eligible.astype(np.int64) << np.arange(p.eligible.shape[1], dtype=np.int64)).sum(axis=1)
    return bits


def _hall_u(p: _Problem) -> Fraction:
    """The optimum of LP (3) in closed form (Thm 19): the sources that can only use links in
    X need ``U mult(X)`` capacity, so ``U = max_X #{u : F(u) in X} / mult(X)``."""
    nw = p.eligible.shape[1]
    full = 1 << nw
    count = np.bincount(_masks(p), minlength=full).astype(np.int64)
    for i in range(nw):                     # subset sums (zeta transform)
        bit = 1 << i
        idx = np.arange(full)
        has = (idx & bit) != 0
        count[has] += count[idx[has] ^ bit]
    cap = np.zeros(full, dtype=np.int64)
    for i in range(nw):
        cap[(np.arange(full) & (1 << i)) != 0] += int(p.mult[i])
    ratio = count[1:] / cap[1:]
    top = float(ratio.max())
    return max(Fraction(int(count[x]), int(cap[x])) for x in 1 + np.nonzero(ratio >= top - 1e-9)[0])


def _lp_u(p: _Problem) -> Fraction:
    """The optimum of LP (3) by scipy's HiGHS, rationalised (the optimum is a ratio
    ``|S'| / mult(P(S'))``, so its denominator is at most the in-link count) and
    confirmed exactly by an integral max-flow."""
    import scipy.sparse as sp
    from scipy.optimize import linprog  # type: ignore[import-untyped]
    ns, nw = p.eligible.shape
    cap = int(p.mult.sum())
    us, ws = np.nonzero(p.eligible)
    nv = len(us)
    # variables x[k] for each eligible (u, w), then U; minimise U
    c = np.zeros(nv + 1)
    c[-1] = 1.0
    a_eq = sp.csr_matrix((np.ones(nv), (us, np.arange(nv))), shape=(ns, nv + 1))
    rows = np.concatenate([ws, np.arange(nw)])
    cols = np.concatenate([np.arange(nv), np.full(nw, nv)])
    vals = np.concatenate([np.ones(nv), -p.mult.astype(float)])
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(nw, nv + 1))
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(nw), A_eq=a_eq, b_eq=np.ones(ns), bounds=(0, None),
                  method="highs")
    if res.status != 0:
        raise ScheduleError(f"bfb: the HiGHS LP failed ({res.message})")
    value = float(res.fun)
    candidates = sorted({Fraction(math.ceil((value - 1e-7) * q), q) for q in range(1, cap + 1)})
    for u in candidates:               # the smallest that an exact integral flow confirms
        if u > 0 and _flow(p, u.denominator, u, exact=True) is not None:
            return u
    raise ScheduleError(f"bfb: LP optimum {value} could not be confirmed exactly")  # pragma: no cover


def _solve_u(p: _Problem) -> Fraction:
    return _hall_u(p) if p.eligible.shape[1] <= HALL_MAX_LINKS else _lp_u(p)


def _max_flow(cap: list[list[int]], src: int, sink: int) -> tuple[int, list[list[int]]]:
    """Edmonds-Karp on a small dense graph (a few dozen nodes)."""
    n = len(cap)
    flow = [[0] * n for _ in range(n)]
    total = 0
    while True:
        parent = [-1] * n
        parent[src] = src
        queue = [src]
        for x in queue:
            for y in range(n):
                if parent[y] < 0 and cap[x][y] - flow[x][y] > 0:
                    parent[y] = x
                    queue.append(y)
        if parent[sink] < 0:
            return total, flow
        push, y = None, sink
        while y != src:
            x = parent[y]
            r = cap[x][y] - flow[x][y]
            push = r if push is None else min(push, r)
            y = x
        assert push is not None
        y = sink
        while y != src:
            x = parent[y]
            flow[x][y] += push
            flow[y][x] -= push
            y = x
        total += push


def _flow(p: _Problem, chunks: int, u: Fraction, exact: bool) -> np.ndarray | None:
    """Integral split (|S| x |W| chunk counts) with every link w carrying at most
    ``ceil(u mult_w chunks)`` chunks, or None when none exists.  Sources with the same
    eligible links are interchangeable: the flow runs on those types, and each type's
    per-link totals are then cut into consecutive whole shards."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_flow
    ns, nw = p.eligible.shape
    caps = [math.ceil(u * int(m) * chunks) for m in p.mult]
    if exact and any(c != u * int(m) * chunks for c, m in zip(caps, p.mult)):
        return None
    masks = _masks(p)
    types = sorted(set(masks.tolist()))
    size = 2 + len(types) + nw
    src, sink = 0, size - 1
    cap = [[0] * size for _ in range(size)]
    members = {m: np.nonzero(masks == m)[0] for m in types}
    for i, m in enumerate(types):
        cap[src][1 + i] = chunks * len(members[m])
        for w in range(nw):
            if m >> w & 1:
                cap[1 + i][1 + len(types) + w] = chunks * len(members[m])
    for w in range(nw):
        cap[1 + len(types) + w][sink] = caps[w]
    if size <= 40:
        total, flow = _max_flow(cap, src, sink)
    else:   # scipy's compiled max-flow once the type graph is large (hypercubes: C(d, t) types)
        dense = np.array(cap, dtype=np.int64)
        res = maximum_flow(sp.csr_matrix(dense.astype(np.int32)), src, sink, method="dinic")
        total, flow = int(res.flow_value), res.flow.toarray().tolist()
    if total != ns * chunks:
        return None
    split = np.zeros((ns, nw), dtype=np.int64)
    for i, m in enumerate(types):
        who = members[m].tolist()
        k, left = 0, chunks          # fill sources one after another along the links
        for w in range(nw):
            amount = flow[1 + i][1 + len(types) + w]
            while amount > 0:
                take = min(amount, left)
                split[who[k], w] += take
                amount -= take
                left -= take
                if left == 0:
                    k, left = k + 1, chunks
    return split


# ---------------------------------------------------------------------- the schedule
@dataclass(frozen=True)
class BFBResult:
    """A BFB allgather: ``pieces`` rows are ``(step, source, lo, count, sender, receiver)``
    with steps from 1 and ``[lo, lo + count)`` a range of the source's ``chunks`` chunks."""

    graph: Digraph
    chunks: int
    step_loads: tuple[Fraction, ...]      # per step: max over in-links of chunks / (chunks * mult)
    pieces: np.ndarray = field(repr=False, compare=False)

    @property
    def diameter(self) -> int:
        return len(self.step_loads)

    @property
    def beta(self) -> Fraction:
        """``T_B = beta M / B`` (eq. 4)."""
        return sum(self.step_loads, Fraction(0)) * self.graph.degree / self.graph.n


def _problem(link_dist: np.ndarray, links: np.ndarray, mult: np.ndarray, t: int, col: np.ndarray) -> _Problem:
    """Step ``t`` at one receiver: ``col[x] = dist(x, v)``, ``link_dist[x, i] = dist(x, links[i])``."""
    sources = np.nonzero(col == t)[0]
    return _Problem(sources, links, mult, link_dist[sources] == t - 1)


def bfb_allgather(topology: Topology | Digraph, chunks: int = 0, with_pieces: bool = True) -> BFBResult:
    """The optimal BFB allgather (LP (3) per step and receiver).  ``chunks`` fixes the
    chunks per shard (0: the LCM of the LP denominators, App. D.2).  ``with_pieces=False``
    computes only the costs (the finder's use): no split, no rows."""
    from scipy.sparse.csgraph import shortest_path
    g = topology if isinstance(topology, Digraph) else digraph_of(topology)
    n = g.n
    mat = g.matrix()
    csc = mat.tocsc()
    inn = [csc.indices[csc.indptr[v]:csc.indptr[v + 1]].astype(np.int64) for v in range(n)] if g.group is None \
        else [csc.indices[csc.indptr[0]:csc.indptr[1]].astype(np.int64)]
    inm = [csc.data[csc.indptr[v]:csc.indptr[v + 1]].astype(np.int64) for v in range(len(inn))]
    if g.group is not None:
        # dist(x, w) = dist(x - w, 0): one BFS to node 0 on the transpose
        to0 = shortest_path(mat.T.tocsr(), unweighted=True, indices=[0])[0]
        if not np.all(np.isfinite(to0)):
            raise ScheduleError(f"bfb: {g.name} is not strongly connected")
        to0 = to0.astype(np.int64)
        xs = np.arange(n, dtype=np.int64)
        receivers = [0]
        cols = {0: to0}
        link_dist = {0: np.stack([to0[_translate(xs, np.int64(w), g.group, -1)] for w in inn[0]], axis=1)
                     if len(inn[0]) else np.zeros((n, 0), dtype=np.int64)}
    else:
        full = shortest_path(mat, unweighted=True)
        if not np.all(np.isfinite(full)):
            raise ScheduleError(f"bfb: {g.name} is not strongly connected")
        fd = full.astype(np.int64)
        receivers = list(range(n))
        cols = {v: fd[:, v] for v in receivers}
        link_dist = {v: fd[:, inn[v]] for v in receivers}
    diameter = int(max(int(c.max()) for c in cols.values()))
    problems: dict[tuple[int, int], _Problem] = {}
    loads: dict[tuple[int, int], Fraction] = {}
    for t in range(1, diameter + 1):
        for v in receivers:
            p = _problem(link_dist[v], inn[v], inm[v], t, cols[v])
            if len(p.sources) == 0:
                continue
            problems[t, v] = p
            loads[t, v] = _solve_u(p)
    if chunks <= 0:
        chunks = math.lcm(*(u.denominator for u in loads.values()))
        if chunks > MAX_LCM_CHUNKS:
            chunks = MAX_LCM_CHUNKS
    if not with_pieces:
        worst = [max((u for (t, _), u in loads.items() if t == s_), default=Fraction(0))
                 for s_ in range(1, diameter + 1)]
        return BFBResult(g, chunks, tuple(worst), np.zeros((0, 6), dtype=np.int64))
    rows: list[np.ndarray] = []
    step_max = [Fraction(0)] * diameter
    for (t, v), p in problems.items():
        split = _flow(p, chunks, loads[t, v], exact=False)
        if split is None:  # pragma: no cover - the LP optimum guarantees a split
            raise ScheduleError(f"bfb: no integral split at step {t}, node {v}")
        load = split.sum(axis=0)
        step_max[t - 1] = max(step_max[t - 1], max(Fraction(int(c), chunks * int(m))
                                                   for c, m in zip(load, p.mult)))
        lo = np.cumsum(split, axis=1) - split
        us, ws = np.nonzero(split)
        rows.append(np.stack([np.full(len(us), t), p.sources[us], lo[us, ws], split[us, ws],
                              inn[v][ws], np.full(len(us), v)], axis=1))
    pieces = np.concatenate(rows) if rows else np.zeros((0, 6), dtype=np.int64)
    if g.group is None:
        order = np.lexsort((pieces[:, 2], pieces[:, 1], pieces[:, 4], pieces[:, 5], pieces[:, 0]))
        return BFBResult(g, chunks, tuple(step_max), pieces[order])
    # translate node 0's rows to every receiver; rows come out ordered by (step, receiver)
    base = pieces[np.lexsort((pieces[:, 2], pieces[:, 1], pieces[:, 4], pieces[:, 0]))]
    cv = _coords(np.arange(n, dtype=np.int64), g.group)
    blocks = []
    for t in range(1, diameter + 1):
        b = base[base[:, 0] == t]
        rep = np.empty((n, len(b), 6), dtype=np.int32)
        rep[:, :, 0] = t
        rep[:, :, 2] = b[:, 2]
        rep[:, :, 3] = b[:, 3]
        rep[:, :, 5] = np.arange(n, dtype=np.int32)[:, None]
        for col in (1, 4):
            cu = _coords(b[:, col], g.group)
            acc = np.zeros((n, len(b)), dtype=np.int64)
            for a_, v_, size in zip(cu, cv, g.group):
                acc *= size
                acc += (a_[None, :] + v_[:, None]) % size
            rep[:, :, col] = acc
        blocks.append(rep.reshape(-1, 6))
    return BFBResult(g, chunks, tuple(step_max), np.concatenate(blocks))


def measure(pieces: np.ndarray, g: Digraph, chunks: int) -> tuple[int, Fraction]:
    """(steps, beta) of allgather pieces, recomputed from the rows (independent of the LP)."""
    mult = {(a, b): m for a, b, m in g.arcs}
    loads: dict[tuple[int, int, int], int] = {}
    for t, _, _, cnt, w, v in pieces.tolist():
        loads[t, w, v] = loads.get((t, w, v), 0) + cnt
    steps = int(pieces[:, 0].max()) if len(pieces) else 0
    worst = [Fraction(0)] * steps
    for (t, w, v), c in loads.items():
        worst[t - 1] = max(worst[t - 1], Fraction(c, chunks * mult[w, v]))
    return steps, sum(worst, Fraction(0)) * g.degree / g.n


def schedule_cost(schedule: Schedule, topology: Topology) -> tuple[int, Fraction]:
    """``(T_L / alpha, beta)`` measured on a built Schedule: communication steps, and the sum
    over steps of the busiest link's load in shards (``nchunksperloop / N`` chunks) per
    parallel arc, times ``d / N`` (eq. 4; an allreduce counts both phases)."""
    n = schedule.collective.nranks
    shard = Fraction(schedule.collective.nchunksperloop, n)
    mult = {(lk.src, lk.dst): lk.multiplicity for lk in topology.links}
    degree = digraph_of(topology).degree
    steps, beta = 0, Fraction(0)
    for transfers in schedule.steps:
        load: dict[tuple[int, int], int] = {}
        for t in transfers:
            if not t.is_local:
                load[t.src, t.dst] = load.get((t.src, t.dst), 0) + t.count
        if load:
            steps += 1
            beta += max(Fraction(c) / (shard * mult[k]) for k, c in load.items())
    return steps, beta * degree / n


# ---------------------------------------------------------------------- lowering to the IR
def _merged(rows: list[tuple[int, int, int, int, int]]) -> list[tuple[int, int, int, int, int]]:
    """Merge ``(src, dst, src_slot, dst_slot, count)`` runs that are contiguous on both sides."""
    rows.sort(key=lambda r: (r[0], r[1], r[3]))
    out: list[tuple[int, int, int, int, int]] = []
    for r in rows:
        if out:
            p = out[-1]
            if p[0] == r[0] and p[1] == r[1] and p[2] + p[4] == r[2] and p[3] + p[4] == r[3]:
                out[-1] = (p[0], p[1], p[2], p[3], p[4] + r[4])
                continue
        out.append(r)
    return out


def _emit_allgather(b: ColumnBuilder, r: BFBResult, start: int, stride: int, inplace_src: bool) -> None:
    """Copies of the allgather pieces into output slots ``u * stride + lo``; step 1 reads the
    source's own data from the input (``inplace_src``: from the output like later steps).
    Per step, pieces that follow on in both source and destination slots on one link are one
    transfer (:func:`_merged`, on the columns)."""
    t, u, lo, cnt, w, v = (r.pieces[:, k].astype(np.int64) for k in range(6))
    slot = u * stride + lo
    first = (t == 1) if not inplace_src else np.zeros(len(t), dtype=bool)
    src = np.where(first, lo, slot)
    # by step, then (sender, receiver, destination slot) as _merged sorts, ties in piece order
    order = np.lexsort((np.arange(len(t)), slot, v, w, t))
    t, w, v, src, dst, cnt, first = t[order], w[order], v[order], src[order], slot[order], cnt[order], first[order]
    new = np.ones(len(t), dtype=bool)
    new[1:] = ((t[1:] != t[:-1]) | (w[1:] != w[:-1]) | (v[1:] != v[:-1]) | (src[:-1] + cnt[:-1] != src[1:])
               | (dst[:-1] + cnt[:-1] != dst[1:]))
    at = np.flatnonzero(new)
    b.moves(start + t[at] - 1, w[at], v[at], np.where(first[at], code(I), code(O)), src[at], O, dst[at],
            np.add.reduceat(cnt, at) if len(at) else cnt[at])


def _emit_reducescatter(b: ColumnBuilder, r: BFBResult, start: int, stride: int, work: Buffer,
                        final: Buffer | None) -> int:
    """Reductions of the reversed transpose-allgather (Def 7): piece ``(t, u, w -> v)`` of
    G^T becomes ``v -> w`` at step ``D - t + 1`` reducing destination ``u``'s slots; with
    ``final`` the reductions into the destination itself land in ``final[lo..]``.

    Partials of one slot arriving from several links in one step would serialise on that
    slot (each reduction waits for the previous): all but the first land in fresh scratch
    slots instead and a local step after the transfer folds them in (the paper's compiler
    consolidates through scratch the same way).  Returns the next free step."""
    steps = r.diameter
    rows_by: dict[int, list[tuple[int, int, int, int, int, bool]]] = {}
    for t, u, lo, cnt, w, v in r.pieces.tolist():
        slot = u * stride + lo
        last = final is not None and w == u
        rows_by.setdefault(steps - t + 1, []).append((v, w, slot, lo if last else slot, cnt, last))
    base = b.scratch
    extra = 0
    cur = start
    for t in range(1, steps + 1):
        used: set[tuple[int, bool, int]] = set()
        direct: dict[bool, list[tuple[int, int, int, int, int]]] = {False: [], True: []}
        spilled: list[tuple[int, int, int, int, int, bool]] = []   # (src, dst, slot, dst slot, cnt, last)
        for s_, d_, src, dst, c, last in sorted(rows_by.get(t, [])):
            keys = [(d_, last, i) for i in range(dst, dst + c)]
            if any(k in used for k in keys):
                spilled.append((s_, d_, src, dst, c, last))
            else:
                used.update(keys)
                direct[last].append((s_, d_, src, dst, c))
        for last, rows in direct.items():
            dbuf = final if last and final is not None else work
            for s_, d_, src, dst, c in _merged(rows):
                b.move(cur, s_, d_, work, range(src, src + c), dbuf, range(dst, dst + c), reduce=True)
        if spilled:
            extra += _emit_spilled(b, spilled, cur, base + extra, work, final)
            cur += 1
        cur += 1
    b.scratch = base + extra
    return cur


def _emit_spilled(b: ColumnBuilder, spilled: list[tuple[int, int, int, int, int, bool]], step: int, at: int,
                  work: Buffer, final: Buffer | None) -> int:
    """Partials ``(src, dst, slot, dst slot, cnt, last)`` that would collide with an earlier one on
    their destination slots: each lands in fresh scratch at ``step`` and is folded in by a local
    reduction at ``step + 1``.  Consolidated (docs/direct-connect.md, section 7 of the paper): a
    sender's partials whose source slots and destination slots both follow on are one transfer
    into consecutive scratch and one fold, instead of one of each per BFB piece; without it the
    1024-rank L3(C16(3,4)) allreduce exceeds the parser's per-rank node budget.  Returns the
    scratch chunks used (the widest receiver)."""
    runs: list[list[int]] = []   # [src, dst, slot, dst slot, cnt, last]
    for s_, d_, src, dst, c, last in sorted(spilled, key=lambda r: (r[1], r[5], r[0], r[2])):
        if runs:
            p = runs[-1]
            if (p[0], p[1], p[5]) == (s_, d_, int(last)) and p[2] + p[4] == src and p[3] + p[4] == dst:
                p[4] += c
                continue
        runs.append([s_, d_, src, dst, c, int(last)])
    offset: dict[int, int] = {}
    folds: dict[int, list[tuple[int, int, int, bool]]] = {}   # receiver -> (scratch, dst slot, cnt, last)
    for s_, d_, src, dst, c, flag in runs:
        here = at + offset.get(d_, 0)
        offset[d_] = offset.get(d_, 0) + c
        b.move(step, s_, d_, work, range(src, src + c), S, range(here, here + c))
        folds.setdefault(d_, []).append((here, dst, c, bool(flag)))
    for d_, fs in folds.items():
        # folds of runs that follow on in scratch and in the destination (several senders) merge too
        fs.sort(key=lambda f: (f[3], f[1]))
        merged: list[list[int]] = []
        for here, dst, c, into_final in fs:
            if merged:
                q = merged[-1]
                if q[3] == int(into_final) and q[0] + q[2] == here and q[1] + q[2] == dst:
                    q[2] += c
                    continue
            merged.append([here, dst, c, int(into_final)])
        for here, dst, c, flag in merged:
            dbuf = final if flag and final is not None else work
            b.move(step + 1, d_, d_, S, range(here, here + c), dbuf, range(dst, dst + c), reduce=True)
    return max(offset.values())


def _results(topology: Topology, kind: CollKind, chunks: int) -> tuple[BFBResult | None, BFBResult | None]:
    g = digraph_of(topology)
    ag = bfb_allgather(g, chunks) if kind in (CollKind.ALLGATHER, CollKind.ALLREDUCE) else None
    rs = None
    if kind in (CollKind.REDUCESCATTER, CollKind.ALLREDUCE):
        gt = g.transpose()
        symmetric = {(a, b, m) for a, b, m in g.arcs} == set(gt.arcs)
        # on a bidirectional graph G^T = G: the allgather itself serves (reversed)
        rs = ag if symmetric and ag is not None else bfb_allgather(gt, chunks)
        if ag is not None and rs.chunks != ag.chunks:   # one chunk count for both phases
            c = math.lcm(ag.chunks, rs.chunks)
            ag, rs = bfb_allgather(g, c), bfb_allgather(gt, c)
    return ag, rs


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    # the registry has checked `applies`; digraph_of checks it again for direct callers
    chunks = int(str(opts.get("chunks", 0)))
    if chunks < 0:
        raise ScheduleError(f"chunks={chunks} must be >= 0 (0: the LCM of the LP denominators)")
    ag, rs = _results(topology, request.kind, chunks)
    return emit(topology, request, ag, rs, "bfb", opts, REFERENCE)


def emit(topology: Topology, request: Collective, ag: BFBResult | None, rs: BFBResult | None, name: str,
         opts: Options, reference: str) -> Schedule:
    """The Schedule of an allgather (rows ``ag`` on G), a reduce-scatter (rows ``rs`` of an
    allgather on G^T, run backwards) or an allreduce (both, same chunk count)."""
    n, kind = request.nranks, request.kind
    if kind is CollKind.ALLGATHER:
        assert ag is not None
        c = ag.chunks
        b = ColumnBuilder(Collective(kind, n, c, request.inplace))
        if not request.inplace:
            for r in range(n):
                b.move(0, r, r, I, range(c), O, range(r * c, r * c + c))
        _emit_allgather(b, ag, 0, c, False)
    elif kind is CollKind.REDUCESCATTER:
        assert rs is not None
        c = rs.chunks
        b = ColumnBuilder(Collective(kind, n, c, request.inplace))
        if request.inplace:
            _emit_reducescatter(b, rs, 0, c, I, None)
        else:
            b.scratch = n * c
            for r in range(n):
                b.move(0, r, r, I, range(n * c), S, range(n * c))
                b.move(0, r, r, I, range(r * c, r * c + c), O, range(c))
            _emit_reducescatter(b, rs, 1, c, S, O)
    else:
        assert ag is not None and rs is not None and ag.chunks == rs.chunks
        c = ag.chunks
        b = ColumnBuilder(Collective(kind, n, n * c, request.inplace))
        start = prefix_copy(b, I, O, n * c, range(n))
        after = _emit_reducescatter(b, rs, start, c, O, None)
        _emit_allgather(b, ag, after, c, True)
    lanes = _spread_lanes(b.columns(), c)
    if lanes is not None:
        b.set_lanes(lanes)
    return b.schedule(name, opts, topology.name, reference)


#: Remote transfers per directed link above which a schedule is spread over lanes.
LANE_SPREAD_AT = 48


def _spread_lanes(cols: np.ndarray, c: int) -> np.ndarray | None:
    """Spread busy links over channels: the lowering picks a channel from the chunk index,
    and BFB's pieces mostly start at shard boundaries (multiples of ``c``), so on large
    graphs the transfers of shard ``u`` go to lane ``hash(u) mod L`` instead (every transfer
    of a shard's data stays in one lane).  The lanes of the transfers ``cols`` holds
    (:data:`collc.ir.schedule.COLUMNS`), or None where no link is that busy."""
    src, dst = cols[1], cols[2]
    remote = src != dst
    if not remote.any():
        return None
    busiest = int(np.unique(src[remote] * (int(dst.max()) + 1) + dst[remote], return_counts=True)[1].max())
    if busiest <= LANE_SPREAD_AT:
        return None
    lanes = min(32, 1 << math.ceil(math.log2(busiest / 40)))   # about 40 transfers per link and lane
    shard = np.where(cols[4] != code(S), cols[9], cols[8]) // c
    # a multiplicative hash: shard ids through one link follow the graph's arithmetic
    # structure, which a plain modulus keeps unbalanced
    out: np.ndarray = ((shard * 2654435761) >> 11) % lanes
    return out


def _report(topology: Topology, schedule: Schedule) -> list[str]:
    g = digraph_of(topology)
    r = bfb_allgather(g)
    return [f"bfb: diameter {r.diameter}, allgather beta {r.beta} ({float(r.beta):.5f}; optimal "
            f"{Fraction(g.n - 1, g.n)}), {r.chunks} chunks per shard"]


register(Algorithm(
    name="bfb",
    collectives=frozenset({CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE}),
    topologies="any strongly connected direct-connect graph (circulant, torus, hypercube, Kautz, line graphs, ...)",
    summary="breadth-first broadcast: diameter steps per phase, LP-optimal link loads (direct-connect paper)",
    reference=REFERENCE,
    build=build, applies=lambda t, r, o: applies(t, r.kind),
    params=(Param("chunks", int, 0, "chunks per shard (0: the LCM of the LP's denominators, App. D.2)"),),
    example="collc build --topology circulant:12:2,3 --algorithm bfb --collective allreduce -o c12.xml",
    report=_report,
    pair_tbs=False,
))
