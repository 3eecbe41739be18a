"""MultiTree tree growth (paper section III-C, Algorithm 1) and the trees' invariants.

Part of the MultiTree family (docs/multitree.md): :func:`build_trees` grows one
spanning tree per root in lockstep, :func:`check_trees` checks what the paper
requires of them, and :class:`Trees` holds the result with its per-node schedule
tables (Fig. 5).  The lane planner of fused threadblocks is in
:mod:`collc.frontends.multitree.lanes`, the Schedule in :mod:`collc.frontends.multitree`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from itertools import chain
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from collc.errors import ScheduleError
from collc.frontends.multitree import grow
from collc.topology import Topology

__all__ = ["Trees", "TableEntry", "Edge", "build_trees", "check_trees", "neighbour_order", "eccentricities",
           "artifact_priority", "RULES", "ORDERS"]

RULES = ("any", "last")
ORDERS = ("ascending", "priority", "artifact")

#: A tree edge: (parent, child, allgather time step in 1..T).
Edge = tuple[int, int, int]


# ---------------------------------------------------------------------- result
class TableEntry(NamedTuple):
    """One row of a node's schedule table (paper Fig. 5): ``R``educe or ``G``ather of a flow."""

    op: str
    flow: int
    parent: int | None
    children: tuple[int, ...]
    step: int

    def __str__(self) -> str:
        parent = ("(root)" if self.op == "R" else "nil") if self.parent is None else f"p{self.parent}"
        kids = "[" + ",".join(map(str, self.children)) + "]" if self.children else "-"
        return f"{self.op} {self.flow} {parent} {kids} s{self.step}"


@dataclass(frozen=True)
class Trees:
    """The N spanning trees of Algorithm 1.

    ``edges[r]`` lists tree ``r``'s edges ``(parent, child, t)`` in the order they
    were added (``t`` in ``1..steps``); ``paths[r][i]`` is the node path of
    ``edges[r][i]`` (``(parent, child)`` over a direct link, switches in between
    otherwise).  ``sequence`` is every allocation in order as
    ``(root, parent, child, t)``.  ``steps`` is T.  ``search`` is how a tree's turn
    chose its edge on a switch fabric: ``parent`` (parent by parent, nearest child
    first: Algorithm 1's scan) or ``length`` (shortest path over all parents first).
    """

    topology: str
    nranks: int
    steps: int
    rule: str
    order: str
    cap: int
    edges: tuple[tuple[Edge, ...], ...]
    paths: tuple[tuple[tuple[int, ...], ...], ...]
    sequence: tuple[tuple[int, int, int, int], ...]
    search: str = "parent"

    @property
    def T(self) -> int:  # noqa: N802 - the paper's name
        return self.steps

    @cached_property
    def usage(self) -> tuple[dict[tuple[int, int], int], ...]:
        """Per step (index ``t - 1``): directed link ``(u, v)`` -> tree edges using it."""
        use: list[dict[tuple[int, int], int]] = [{} for _ in range(self.steps)]
        for tree_edges, tree_paths in zip(self.edges, self.paths):
            for (_, _, t), path in zip(tree_edges, tree_paths):
                step = use[t - 1]
                for link in zip(path, path[1:]):
                    step[link] = step.get(link, 0) + 1
        return tuple(use)

    @cached_property
    def edge_columns(self) -> tuple[npt.NDArray[np.int64], ...]:
        """Every tree's edges as four arrays (root, parent, child, t), tree by tree in ``edges``' order."""
        total = sum(map(len, self.edges))
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(self.edges)), dtype=np.int64, count=3 * total)
        roots = np.repeat(np.arange(self.nranks, dtype=np.int64), [len(e) for e in self.edges])
        p, c, t = flat.reshape(-1, 3).T
        return roots, p, c, t

    @property
    def links_used(self) -> tuple[int, ...]:
        """Number of distinct directed links in use at each step."""
        return tuple(len(u) for u in self.usage)

    @cached_property
    def heights(self) -> tuple[int, ...]:
        """Per tree: the step at which it is complete (its height in time steps)."""
        return tuple(max((t for _, _, t in e), default=0) for e in self.edges)

    @cached_property
    def depths(self) -> tuple[int, ...]:
        """Per tree: the largest number of edges from the root to a node."""
        out = []
        for r, tree_edges in enumerate(self.edges):
            depth = {r: 0}
            for p, c, _ in tree_edges:  # parents are always added before their children
                depth[c] = depth[p] + 1
            out.append(max(depth.values()))
        return tuple(out)

    def parents(self, root: int) -> dict[int, int]:
        """Tree ``root`` as child -> parent."""
        return {c: p for p, c, _ in self.edges[root]}

    def schedule_table(self, node: int) -> list[TableEntry]:
        """The node's schedule table, the NI hardware table of paper section IV (Fig. 5).

        Per flow (tree) one Reduce entry (send the partial to the parent once the listed
        children's partials are in; the root only collects) and, if the node has children,
        one Gather entry (forward to them).  Steps are 1-based as in the paper: ``1..T``
        reduce-scatter, ``T+1..2T`` allgather; a Reduce entry's step is when its message
        goes out (the root's: when its last child's arrives), a Gather entry's when the
        first child is sent to.  Ordered by step, the root's entry last in its step.
        Assumes reduce-scatter runs on the same trees (symmetric links).
        """
        t_total = self.steps
        reduce_: list[tuple[int, int, int, TableEntry]] = []
        gather: list[tuple[int, int, TableEntry]] = []
        for r, tree_edges in enumerate(self.edges):
            kids = [(c, t) for p, c, t in tree_edges if p == node]
            children = tuple(c for c, _ in kids)
            parent: int | None = None
            if node == r:
                if kids:
                    step = t_total - min(t for _, t in kids) + 1
                    reduce_.append((step, 1, r, TableEntry("R", r, None, children, step)))
            else:
                parent, t_in = next((p, t) for p, c, t in tree_edges if c == node)
                step = t_total - t_in + 1
                reduce_.append((step, 0, r, TableEntry("R", r, parent, children, step)))
            if kids:
                step = t_total + min(t for _, t in kids)
                gather.append((step, r, TableEntry("G", r, parent, children, step)))
        return [e for *_, e in sorted(reduce_)] + [e for *_, e in sorted(gather)]

    def reduce_scatter_rounds(self) -> tuple[int, ...]:
        """Messages per round of reduce-scatter as the emitted file runs it: data-driven.

        The paper's NI sends tree ``r``'s partial over edge ``(p, c, t)`` at step
        ``T + 1 - t``.  The lowered file has no step counter: a tb per link sends its
        transfers in that order, each once the sender holds its children's partials
        (one round after their messages went out) and the previous transfer of the link
        has gone; leaves therefore start at once.  This is the step model's recovery of
        rounds (``collc.sim.lockstep.program_rounds``) worked out on the trees; it still
        takes T rounds on tori.  Assumes reduce-scatter runs on these trees.

        >>> from collc.topology import parse_spec
        >>> build_trees(parse_spec("torus:4x4")).reduce_scatter_rounds()
        (48, 64, 64, 32, 32)
        """
        ready = [dict.fromkeys(range(self.nranks), 0) for _ in range(self.nranks)]  # tree -> rank -> round
        link_free: dict[tuple[int, int], int] = {}
        sent: list[tuple[int, int, int, int]] = []     # (paper step, tree, sender, receiver)
        for r, tree_edges in enumerate(self.edges):
            for p, c, t in tree_edges:
                sent.append((self.steps - t, r, c, p))
        rounds: dict[int, int] = {}
        for _, r, c, p in sorted(sent):     # children's edges come at earlier paper steps
            go = max(ready[r][c], link_free.get((c, p), 0))
            link_free[(c, p)] = go + 1
            ready[r][p] = max(ready[r][p], go + 1)
            rounds[go] = rounds.get(go, 0) + 1
        return tuple(rounds.get(k, 0) for k in range(max(rounds, default=-1) + 1))

    def report(self, show_tree: int | None = 0) -> list[str]:
        """Human-readable summary: T, link use per step, heights, one tree's edges and
        that rank's schedule table."""
        total = sum(len(e) for e in self.edges)
        lines = [f"multitree on {self.topology}: T = {self.steps} steps per phase "
                 f"(rule={self.rule}, order={self.order}, cap={self.cap or 'none'}), {total} tree edges",
                 "links in use per step: " + ", ".join(str(x) for x in self.links_used),
                 f"tree heights (steps): {min(self.heights, default=0)}..{max(self.heights, default=0)}; "
                 f"depths (edges): {min(self.depths, default=0)}..{max(self.depths, default=0)}"]
        if show_tree is not None and 0 <= show_tree < self.nranks:
            by_step: dict[int, list[str]] = {}
            for (p, c, t), path in zip(self.edges[show_tree], self.paths[show_tree]):
                via = "" if len(path) == 2 else " via " + ",".join(str(x) for x in path[1:-1])
                by_step.setdefault(t, []).append(f"{p}->{c}{via}")
            lines.append(f"tree {show_tree}: " + " | ".join(f"t{t}: " + ", ".join(v)
                                                            for t, v in sorted(by_step.items())))
            lines.append(f"rank {show_tree} schedule table (op flow parent children step): "
                         + "; ".join(str(e) for e in self.schedule_table(show_tree)))
        return lines


# ---------------------------------------------------------------------- topology views
def _grid_dims(topology: Topology) -> tuple[int, ...] | None:
    dims = topology.dims
    if dims is None or topology.nswitches or math.prod(dims) != topology.nranks:
        return None
    return dims


def neighbour_order(topology: Topology) -> list[list[int]]:
    """Per rank, the ranks it has a direct link to, in Algorithm 1's preference order.

    Grids (a ``dims`` parameter, as tori and meshes record): per dimension in order,
    the ``-1`` then the ``+1`` neighbour (the artifact's N, S, W, E on 2-D grids),
    then any other linked ranks ascending.  Other topologies: ascending.

    >>> from collc.topology import parse_spec
    >>> neighbour_order(parse_spec("torus:4x4"))[0], neighbour_order(parse_spec("mesh:2x2"))[0]
    ([12, 4, 3, 1], [2, 1])
    """
    n = topology.nranks
    base = [[v for v in topology.out_neighbors(p) if v < n] for p in range(n)]
    dims = _grid_dims(topology)
    if dims is None:
        return base
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    out: list[list[int]] = []
    for p in range(n):
        linked = set(base[p])
        order: list[int] = []
        for d, stride in zip(dims, strides):
            x = (p // stride) % d
            for delta in (-1, 1):
                q = p + (((x + delta) % d) - x) * stride
                if q in linked and q not in order:
                    order.append(q)
        order.extend(v for v in base[p] if v not in order)
        out.append(order)
    return out


def _one_hop(topology: Topology) -> list[set[int]]:
    """Per rank, the ranks it can send to in one tree edge (a link or a switch-only path)."""
    n = topology.nranks
    via_switch: dict[int, set[int]] = {}
    for s in topology.switches:  # ranks reachable from switch s through switches only
        seen = {s}
        frontier = [s]
        ranks: set[int] = set()
        while frontier:
            nxt = []
            for u in frontier:
                for v in topology.out_neighbors(u):
                    if v < n:
                        ranks.add(v)
                    elif v not in seen:
                        seen.add(v)
                        nxt.append(v)
            frontier = nxt
        via_switch[s] = ranks
    hop: list[set[int]] = []
    for p in range(n):
        reach: set[int] = set()
        for v in topology.out_neighbors(p):
            reach |= {v} if v < n else via_switch[v]
        reach.discard(p)
        hop.append(reach)
    return hop


def _hop_distances(hop: Sequence[set[int]], start: int) -> dict[int, int]:
    dist = {start: 0}
    frontier = [start]
    while frontier:
        nxt = []
        for u in frontier:
            for v in hop[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
        frontier = nxt
    return dist


def eccentricities(topology: Topology) -> list[int]:
    """Per rank, the largest number of tree-edge hops to any rank (the least height its
    tree can have); the default priority of ``order=priority``."""
    hop = _one_hop(topology)
    return [max(_hop_distances(hop, r).values()) for r in range(topology.nranks)]


def _require_connected(topology: Topology, hop: Sequence[set[int]]) -> None:
    n = topology.nranks
    back: list[set[int]] = [set() for _ in range(n)]
    for p, targets in enumerate(hop):
        for c in targets:
            back[c].add(p)
    for graph, how in ((hop, "reach"), (back, "be reached from")):
        dist = _hop_distances(graph, 0)
        if len(dist) < n:
            missing = min(set(range(n)) - set(dist))
            raise ScheduleError(f"multitree needs every rank to reach every other, but on {topology.name} rank 0 "
                                f"cannot {how} rank {missing} over links or switch-only paths")


# ---------------------------------------------------------------------- Algorithm 1
class _Grower:
    """One run of Algorithm 1 over a topology's links (mutable scratch state)."""

    def __init__(self, topology: Topology, cap: int, parent_first: bool = True) -> None:
        n = topology.nranks
        self.n = n
        self.cap = cap
        self.parent_first = parent_first
        index = {(lk.src, lk.dst): i for i, lk in enumerate(topology.links)}
        self.capacity = [lk.multiplicity for lk in topology.links]
        self.direct = [[(c, index[(p, c)]) for c in order] for p, order in enumerate(neighbour_order(topology))]
        self.up = [[(s, index[(p, s)]) for s in topology.out_neighbors(p) if s >= n] for p in range(n)]
        self.sw_ranks: dict[int, list[tuple[int, int]]] = {}
        self.sw_next: dict[int, list[tuple[int, int]]] = {}
        for s in topology.switches:
            outs = topology.out_neighbors(s)
            self.sw_ranks[s] = [(v, index[(s, v)]) for v in outs if v < n]
            self.sw_next[s] = [(v, index[(s, v)]) for v in outs if v >= n]
        self.any_direct = any(self.direct)
        #: per rank, the switches with a link to it
        self.feeders: list[list[int]] = [[s for s in topology.in_neighbors(c) if s >= n] for c in range(n)]
        self.up_any = any(self.up)
        #: per link, its source when it joins two ranks, else -1
        self.link_src = [lk.src if lk.src < n and lk.dst < n else -1 for lk in topology.links]
        #: per rank, its direct links to ranks; ``free_out`` counts those with free capacity this step
        self.out_degree = [len(d) for d in self.direct]
        self.free_out: list[int] = []
        self.free: list[int] = []
        self.snd: list[int] = []
        self.rcv: list[int] = []

    def _through_switches(self, p: int, mem: bytearray, missing: dict[int, int], limit: int
                          ) -> tuple[int, list[int], list[int]] | None:
        """Breadth-first search from ``p`` over switches with free capacity for a rank
        not in the tree, reached over fewer than ``limit`` links; returns (child,
        interior switches, link ids) of the nearest (first in BFS order).
        ``missing[s]`` counts the ranks linked from switch ``s`` not yet in the tree."""
        free, rcv, cap = self.free, self.rcv, self.cap
        prev: dict[int, tuple[int, int]] = {}
        level: list[int] = []
        for s, lid in self.up[p]:
            if free[lid] and s not in prev:
                prev[s] = (p, lid)
                level.append(s)
        links = 2   # links of a path to a rank on a switch of the current level
        while level and links < limit:
            nxt: list[int] = []
            for s in level:
                for c, lid in self.sw_ranks[s] if missing[s] else ():
                    if free[lid] and not mem[c] and (not cap or rcv[c]):
                        switches = [s]
                        lids = [lid]
                        node = s
                        while node != p:
                            node, link = prev[node]
                            lids.append(link)
                            if node != p:
                                switches.append(node)
                        switches.reverse()
                        return c, switches, lids
                if links + 1 < limit:
                    for v, lid in self.sw_next[s]:
                        if free[lid] and v not in prev:
                            prev[v] = (s, lid)
                            nxt.append(v)
            level = nxt
            links += 1
        return None

    def _pick_direct(self, parents: list[int], start: int, mem: bytearray, missing: dict[int, int],
                     dead: set[int]) -> tuple[tuple[int, int, tuple[int, ...], list[int]] | None, int]:
        """:meth:`_pick` for topologies without switches (every edge is one link)."""
        cap, free, snd, rcv, direct, outs = self.cap, self.free, self.snd, self.rcv, self.direct, self.free_out
        for i in range(start, len(parents)):
            p = parents[i]
            if not outs[p] or (cap and not snd[p]):
                continue
            open_ = False
            for c, lid in direct[p]:
                if not mem[c]:
                    if free[lid] and (not cap or rcv[c]):
                        return (p, c, (p, c), [lid]), i
                    open_ = True
            if not open_:
                dead.add(p)
        return None, len(parents)

    def _pick(self, parents: list[int], start: int, mem: bytearray, missing: dict[int, int], dead: set[int]
              ) -> tuple[tuple[int, int, tuple[int, ...], list[int]] | None, int]:
        """One turn of a tree: the edge to add (parent, child, path, link ids) or None,
        and the new scan start.  Candidates rank by path length (a direct link first,
        then same-switch ranks, then ranks further away), then by parent insertion
        order, then by neighbour order.  Parents before the returned start cannot add
        a node for the rest of the step; parents that can never add one again (all
        their linked ranks are in the tree, no switch) are put in ``dead``."""
        cap, free, snd, rcv = self.cap, self.free, self.snd, self.rcv
        direct, up = self.direct, self.up
        best: tuple[int, int, tuple[int, ...], list[int]] | None = None
        best_len = 0
        i = start
        ptr = start
        settled = True   # every parent in [start, i) can no longer add this step
        while i < len(parents):
            p = parents[i]
            i += 1
            if cap and not snd[p]:
                if settled:
                    ptr = i
                continue
            open_ = False
            for c, lid in direct[p]:
                if not mem[c]:
                    open_ = True
                    if free[lid] and (not cap or rcv[c]):
                        return (p, c, (p, c), [lid]), ptr   # length 1: nothing beats it
            if up[p] and (best is None or best_len > 2):
                hit = self._through_switches(p, mem, missing, best_len if best is not None else 1 << 30)
                if hit is not None:
                    c, switches, lids = hit
                    best, best_len = (p, c, (p, *switches, c), lids), len(lids)
                    settled = False
                elif best is not None:
                    settled = False   # searched only for shorter paths
                elif settled:
                    ptr = i
            elif not up[p]:
                if not open_:
                    dead.add(p)
                if settled:
                    ptr = i
            else:
                settled = False   # not searched: it may still reach someone
            if best is not None and (self.parent_first or (best_len == 2 and not self.any_direct)):
                break
        return best, ptr

    def run(self, rule: str, rounds: Sequence[Sequence[int]]) -> tuple[
            list[list[Edge]], list[list[tuple[int, ...]]], list[tuple[int, int, int, int]], int]:
        """Grow all trees.  ``rounds[0]`` is the order of the very first round,
        ``rounds[1]`` the order of every later one."""
        n, cap = self.n, self.cap
        if not cap and not self.up_any and not any(self.feeders):
            if grow.worth_it(n):
                grown = grow.grow_direct(self.direct, self.capacity, rule, rounds)
                if grown is not None:
                    return _unpack(n, *grown)
            return self._run_direct(rule, rounds)
        pick = self._pick if self.up_any else self._pick_direct
        link_src, feeders = self.link_src, self.feeders
        members = [bytearray(n) for _ in range(n)]
        size = [1] * n
        for r in range(n):
            members[r][r] = 1
        edges: list[list[Edge]] = [[] for _ in range(n)]
        paths: list[list[tuple[int, ...]]] = [[] for _ in range(n)]
        sequence: list[tuple[int, int, int, int]] = []
        live: list[list[int]] = [[r] for r in range(n)]   # candidate parents, insertion order
        missing: list[dict[int, int]] = []   # per tree: switch -> its linked ranks not in the tree
        for r in range(n):
            miss = {s: len(ranks) for s, ranks in self.sw_ranks.items()}
            for s in self.feeders[r]:
                miss[s] -= 1
            missing.append(miss)
        incomplete = sum(1 for r in range(n) if size[r] < n)
        t = 0
        first_round = True
        while incomplete:
            t += 1
            free = list(self.capacity)
            if cap:
                snd = [cap] * n
                rcv = [cap] * n
            else:
                snd = rcv = []
            self.free, self.snd, self.rcv = free, snd, rcv
            self.free_out = free_out = list(self.out_degree)
            ptr = [0] * n                     # parents before ptr[r] cannot add this step
            dead: list[set[int]] = [set() for _ in range(n)]   # parents with no non-member neighbour
            fresh: list[list[int]] = [[] for _ in range(n)]    # nodes added this step
            failed = bytearray(n)
            added = 0
            while True:
                order = rounds[0] if first_round else rounds[1]
                last = order[-1]
                first_round = False
                grew_any = False
                grew_last = False
                for r in order:
                    if failed[r] or size[r] == n:
                        continue
                    found, ptr[r] = pick(live[r], ptr[r], members[r], missing[r], dead[r])
                    if found is None:
                        failed[r] = 1
                        continue
                    p, c, path, lids = found
                    for lid in lids:
                        free[lid] -= 1
                        if not free[lid] and link_src[lid] >= 0:
                            free_out[link_src[lid]] -= 1
                    if cap:
                        snd[p] -= 1
                        rcv[c] -= 1
                    members[r][c] = 1
                    if feeders[c]:
                        miss = missing[r]
                        for s in feeders[c]:
                            miss[s] -= 1
                    size[r] += 1
                    if size[r] == n:
                        incomplete -= 1
                    fresh[r].append(c)
                    edges[r].append((p, c, t))
                    paths[r].append(path)
                    sequence.append((r, p, c, t))
                    added += 1
                    grew_any = True
                    if r == last:
                        grew_last = True
                if not incomplete or not grew_any or (rule == "last" and not grew_last):
                    break
            _end_step(t, added, size, live, fresh, dead)
        return edges, paths, sequence, t


    def _run_direct(self, rule: str, rounds: Sequence[Sequence[int]]) -> tuple[
            list[list[Edge]], list[list[tuple[int, ...]]], list[tuple[int, int, int, int]], int]:
        """:meth:`run` without switches and without an NI cap (tori, meshes, hypercubes): the
        same trees, with :meth:`_pick_direct` inlined in the round (a million turns on 32x32).

        A tree's turn scans its parents from ``ptr`` in insertion order and takes the first
        neighbour not in the tree over a link with capacity left; a parent skipped in a step
        (no free link, or none to a non-member) stays skipped for the rest of the step, as
        both only shrink, and one with no non-member neighbour leaves ``live`` at the step's end."""
        n = self.n
        direct, link_src = self.direct, self.link_src
        # per link between ranks: its receiver and its place in its sender's neighbour order
        link_dst = [-1] * len(link_src)
        rank_in_order = [0] * len(link_src)
        width = 1 + max(map(len, direct), default=0)
        for p_, order_ in enumerate(direct):
            for k, (c_, lid_) in enumerate(order_):
                link_dst[lid_], rank_in_order[lid_] = c_, k
        members = [bytearray(n) for _ in range(n)]
        size = [1] * n
        for r in range(n):
            members[r][r] = 1
        edges: list[list[Edge]] = [[] for _ in range(n)]
        paths: list[list[tuple[int, ...]]] = [[] for _ in range(n)]
        sequence: list[tuple[int, int, int, int]] = []
        live: list[list[int]] = [[r] for r in range(n)]   # candidate parents, insertion order
        incomplete = sum(1 for r in range(n) if size[r] < n)
        t = 0
        first_round = True
        while incomplete:
            t += 1
            free = list(self.capacity)
            outs = list(self.out_degree)     # per rank, its links to ranks with capacity left
            open_links = {lid for lid, x in enumerate(free) if x and link_src[lid] >= 0}
            table = len(open_links)
            place: list[dict[int, int] | None] = [None] * n     # per tree: parent -> index in live
            ptr = [0] * n
            dead: list[list[int]] = [[] for _ in range(n)]
            fresh: list[list[int]] = [[] for _ in range(n)]
            failed = bytearray(n)
            added = 0
            while True:
                order = rounds[0] if first_round else rounds[1]
                last = order[-1]
                first_round = False
                grew_any = False
                grew_last = False
                for r in order:
                    if failed[r] or size[r] == n:
                        continue
                    parents, mem = live[r], members[r]
                    if not open_links:     # every link is in use: no tree grows again this step
                        failed[r] = 1
                        continue
                    if 4 * len(open_links) < len(parents) - ptr[r]:
                        # far fewer links left than parents to scan (late in a step): the scan's
                        # answer is the usable link whose parent comes first, then its neighbour
                        at = place[r]
                        if at is None:
                            at = place[r] = dict(zip(parents, range(len(parents))))
                        start, best, lid = ptr[r], -1, -1
                        for x in open_links:
                            if not mem[link_dst[x]]:
                                i = at.get(link_src[x], -1)
                                if i >= start and (best < 0 or i * width + rank_in_order[x] < best):
                                    best, lid = i * width + rank_in_order[x], x
                        if best < 0:
                            ptr[r] = len(parents)
                            failed[r] = 1
                            continue
                        i = best // width
                        p, c = parents[i], link_dst[lid]
                    else:
                        for i in range(ptr[r], len(parents)):
                            p = parents[i]
                            if not outs[p]:
                                continue
                            open_ = False
                            for c, lid in direct[p]:
                                if not mem[c]:
                                    if free[lid]:
                                        break
                                    open_ = True
                            else:
                                if not open_:
                                    dead[r].append(p)
                                continue
                            break
                        else:
                            ptr[r] = len(parents)
                            failed[r] = 1
                            continue
                    ptr[r] = i
                    free[lid] -= 1
                    if not free[lid]:
                        outs[p] -= 1
                        open_links.discard(lid)
                        if len(open_links) * 4 < table:      # a set keeps its table: iterate a compact one
                            open_links = set(open_links)
                            table = len(open_links)
                    mem[c] = 1
                    size[r] += 1
                    if size[r] == n:
                        incomplete -= 1
                    fresh[r].append(c)
                    edges[r].append((p, c, t))
                    paths[r].append((p, c))
                    sequence.append((r, p, c, t))
                    added += 1
                    grew_any = True
                    if r == last:
                        grew_last = True
                if not incomplete or not grew_any or (rule == "last" and not grew_last):
                    break
            _end_step(t, added, size, live, fresh, dead)
        return edges, paths, sequence, t


def _end_step(t: int, added: int, size: Sequence[int], live: list[list[int]], fresh: Sequence[list[int]],
              dead: Sequence[Collection[int]]) -> None:
    """After step ``t`` of :meth:`_Grower.run`: each incomplete tree's candidate parents lose those
    with no non-member neighbour left and gain the nodes added this step (insertion order)."""
    if not added:  # cannot happen on a connected topology (checked before); guards the loop
        raise ScheduleError(f"multitree made no progress at step {t}")
    n = len(size)
    for r in range(n):
        if size[r] == n:
            live[r] = []
            continue
        if dead[r]:
            gone = set(dead[r])
            live[r] = [p for p in live[r] if p not in gone]
        live[r].extend(fresh[r])


def _unpack(n: int, rows: npt.NDArray[np.int64], by_tree: npt.NDArray[np.int64], steps: int) -> tuple[
        list[list[Edge]], list[list[tuple[int, ...]]], list[tuple[int, int, int, int]], int]:
    """:meth:`_Grower.run`'s result from :func:`collc.frontends.multitree.grow.grow_direct`'s arrays."""
    if steps < 0:  # cannot happen on a connected topology (checked before); as _run_direct
        raise ScheduleError(f"multitree made no progress at step {-steps}")
    # one int object per value (as the Python loop shares them): an object array's rows index it
    ints = np.array(range(max(n, steps + 1)), dtype=object)
    r, p, c, t = ints[rows.T].tolist()
    sequence = list(zip(r, p, c, t))
    p, c, t = ints[rows[by_tree.ravel(), 1:].T].tolist()
    flat_edges = list(zip(p, c, t))
    flat_paths: list[tuple[int, ...]] = list(zip(p, c))
    k = n - 1      # every tree has n - 1 edges once the kernel finished
    edges = [flat_edges[i * k:(i + 1) * k] for i in range(n)]
    paths: list[list[tuple[int, ...]]] = [flat_paths[i * k:(i + 1) * k] for i in range(n)]
    return edges, paths, sequence, steps


def build_trees(topology: Topology, rule: str = "any", order: str = "ascending", cap: int = 0,
                priority: Sequence[int] | None = None) -> Trees:
    """Run Algorithm 1 on ``topology``; see the module docstring for the parameters.

    ``priority`` (one number per rank, larger first) replaces the eccentricities
    used by ``order="priority"``.  Raises ScheduleError on bad parameters or when
    some rank cannot reach another.
    """
    if rule not in RULES:
        raise ScheduleError(f"multitree rule={rule!r}: choose one of {', '.join(RULES)}")
    if order not in ORDERS:
        raise ScheduleError(f"multitree order={order!r}: choose one of {', '.join(ORDERS)}")
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
        raise ScheduleError(f"multitree cap={cap!r} must be an integer >= 0 (0: no limit)")
    n = topology.nranks
    ascending = list(range(n))
    later = ascending
    if order in ("priority", "artifact"):
        if priority is None:
            prio: Sequence[int] = eccentricities(topology) if order == "priority" else artifact_priority(topology)
        else:
            if len(priority) != n:
                raise ScheduleError(f"multitree priority needs {n} values, got {len(priority)}")
            prio = priority
        later = sorted(range(n), key=lambda r: (prio[r], r), reverse=True)
    elif priority is not None:
        raise ScheduleError("multitree priority= applies only with order='priority' or 'artifact'")
    if n > 1:
        _require_connected(topology, _one_hop(topology))
    rounds = (ascending, later)
    grown = _Grower(topology, cap, parent_first=True).run(rule, rounds)
    search = "parent"
    if topology.nswitches:
        # parent by parent (Algorithm 1's scan; stars around the roots on fat trees and DGX-2), unless
        # ranking by path length over all parents needs fewer steps (BiGraph: docs/multitree.md)
        by_length = _Grower(topology, cap, parent_first=False).run(rule, rounds)
        if by_length[3] < grown[3]:
            grown, search = by_length, "length"
    edges, paths, sequence, steps = grown
    return Trees(topology.name, n, steps, rule, order, cap,
                 tuple(tuple(e) for e in edges), tuple(tuple(p) for p in paths), tuple(sequence), search)


def artifact_priority(topology: Topology) -> list[int]:
    """The authors' artifact's static root priority (its ``sort=True``): on a 2-D mesh the
    largest "distance" to a corner under the artifact's distance, ``|r1 - r2| + |r2 - c2|``
    (a bug: the intended one is ``|r1 - r2| + |c1 - c2|``), so that it depends on the row
    only; 0 on every other topology (tori and the switch fabrics), where later rounds
    then take the roots in descending order.

    >>> from collc.topology import parse_spec
    >>> artifact_priority(parse_spec("mesh:4x4"))[::4], set(artifact_priority(parse_spec("torus:4x4")))
    ([6, 5, 5, 6], {0})
    """
    n = topology.nranks
    dims = _grid_dims(topology)
    if dims is None or len(dims) != 2 or topology.family != "mesh":
        return [0] * n
    rows, cols = dims
    corners = [(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)]
    return [max(abs(r // cols - cr) + abs(cr - cc) for cr, cc in corners) for r in range(n)]


def check_trees(trees: Trees, topology: Topology) -> None:
    """Raise ScheduleError unless ``trees`` satisfy Algorithm 1's invariants on
    ``topology``: N spanning trees of N-1 edges rooted at their ids, every edge a
    link or switch-only path with its child added after its parent, at most
    ``multiplicity`` uses of a link per step and at most ``cap`` sends and receives
    per rank per step."""
    n = topology.nranks
    if trees.nranks != n or len(trees.edges) != n or len(trees.paths) != n:
        raise ScheduleError(f"trees are for {trees.nranks} ranks, {topology.name} has {n}")
    sends: dict[tuple[int, int], int] = {}
    recvs: dict[tuple[int, int], int] = {}
    for r in range(n):
        added = {r: 0}
        if len(trees.edges[r]) != n - 1 or len(trees.paths[r]) != n - 1:
            raise ScheduleError(f"tree {r} has {len(trees.edges[r])} edges, expected {n - 1}")
        for (p, c, t), path in zip(trees.edges[r], trees.paths[r]):
            if p not in added or c in added:
                raise ScheduleError(f"tree {r}: edge {p}->{c} does not extend the tree")
            if not added[p] < t <= trees.steps:
                raise ScheduleError(f"tree {r}: edge {p}->{c} at step {t}, parent added at step {added[p]}")
            if path[0] != p or path[-1] != c or any(not topology.is_switch(x) for x in path[1:-1]):
                raise ScheduleError(f"tree {r}: edge {p}->{c} has path {path}")
            if any(not topology.has_link(u, v) for u, v in zip(path, path[1:])):
                raise ScheduleError(f"tree {r}: path {path} uses a missing link")
            added[c] = t
            sends[(p, t)] = sends.get((p, t), 0) + 1
            recvs[(c, t)] = recvs.get((c, t), 0) + 1
        if len(added) != n:
            raise ScheduleError(f"tree {r} does not span all ranks")
    for t, use in enumerate(trees.usage, start=1):
        for (u, v), count in use.items():
            link = topology.link(u, v)
            if link is None or count > link.multiplicity:
                raise ScheduleError(f"step {t}: link {u}->{v} carries {count} tree edges")
    if trees.cap:
        for what, table in (("sends", sends), ("receives", recvs)):
            for (rank, t), count in table.items():
                if count > trees.cap:
                    raise ScheduleError(f"step {t}: rank {rank} {what} {count} times, cap {trees.cap}")


