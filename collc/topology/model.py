"""The topology model: ranks, optional switch nodes and directed links.

A :class:`Topology` is an immutable value.  Nodes ``0 .. nranks-1`` are ranks
(GPUs); nodes ``nranks .. nranks+nswitches-1`` are switch nodes (an NVSwitch
crossbar, a network switch) that forward data but own no buffers.  Links are
directed; a bidirectional connection is two links.  Parallel links between the
same pair of nodes are one :class:`Link` with ``multiplicity > 1``.

Derived structures (adjacency, link index) are built lazily on first use and
cached on the instance, so building even a 4096-rank topology only costs a
sort and a validation pass over its links.

>>> t = Topology("pair", 2, (Link(0, 1), Link(1, 0)))
>>> t.distance(0, 1), t.is_bidirectional(), t.hamiltonian_cycle()
(1, True, (0, 1))
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from collc.errors import TopologyError

if TYPE_CHECKING:
    import networkx as nx  # type: ignore[import-untyped]

__all__ = ["Link", "Topology", "LINK_KINDS", "INTRA_HOST_KINDS", "strong_components"]

#: What a link is made of (docs/algorithms.md "Hosts and link kinds"): ``nvlink``, ``xgmi`` and ``pcie``
#: stay inside one host; ``net`` joins hosts over a network (InfiniBand, RoCE); ``mnnvl`` joins hosts of
#: one multi-node NVLink domain, which CUDA IPC reaches as if it were one host.
LINK_KINDS = ("nvlink", "xgmi", "pcie", "net", "mnnvl")
INTRA_HOST_KINDS = ("nvlink", "xgmi", "pcie")

#: Hamiltonian-cycle search is attempted only for topologies this small.
MAX_CYCLE_SEARCH_RANKS = 16
#: Largest node count (ranks, switches) and link-entry count of a topology file; the same
#: bounds as the generators' (checked before anything is allocated for them).
MAX_FILE_NODES = 1 << 16
MAX_FILE_LINKS = 1 << 20
#: Number of partial paths the cycle search may extend before it gives up.
CYCLE_SEARCH_BUDGET = 200_000
#: Number of per-destination switch-route tables kept per topology.
_ROUTE_CACHE_SIZE = 4096


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def strong_components(nnodes: int, edges: Sequence[tuple[int, int]]) -> tuple[Any, list[int]]:
    """The directed graph of ``edges`` on nodes ``0 .. nnodes-1`` as a scipy CSR matrix, and the
    strongly connected component of each node.

    >>> labels = strong_components(3, [(0, 1), (1, 0), (1, 2)])[1]
    >>> labels[0] == labels[1] != labels[2]
    True
    """
    import numpy as np
    from scipy.sparse import coo_matrix  # type: ignore[import-untyped]
    from scipy.sparse.csgraph import connected_components  # type: ignore[import-untyped]

    rows = np.fromiter((a for a, _ in edges), dtype=np.int64, count=len(edges))
    cols = np.fromiter((b for _, b in edges), dtype=np.int64, count=len(edges))
    graph = coo_matrix((np.ones(len(edges), dtype=np.int8), (rows, cols)), shape=(nnodes, nnodes)).tocsr()
    _, labels = connected_components(graph, directed=True, connection="strong")
    return graph, [int(x) for x in labels]


@dataclass(frozen=True)
class Link:
    """One directed link ``src -> dst``.

    ``bandwidth`` is in GB/s (per parallel link), ``latency`` in microseconds,
    ``multiplicity`` is the number of parallel physical links.  ``kind`` (one of
    :data:`LINK_KINDS`) says what the link is made of; None leaves it to the
    topology's hosts (:meth:`Topology.link_kind`).
    """

    src: int
    dst: int
    bandwidth: float = 1.0
    latency: float = 0.0
    multiplicity: int = 1
    kind: str | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.src) or not _is_int(self.dst):
            raise TopologyError(f"link endpoints must be integers, got {self.src!r}->{self.dst!r}")
        if self.src < 0 or self.dst < 0:
            raise TopologyError(f"link {self.src}->{self.dst}: node ids must be >= 0")
        if self.src == self.dst:
            raise TopologyError(f"link {self.src}->{self.dst}: a link cannot connect a node to itself")
        # bounds far beyond any machine that keep predicted times finite (JSON has no infinity)
        if not _is_number(self.bandwidth) or not math.isfinite(self.bandwidth) or self.bandwidth <= 0 \
                or not 1e-9 <= self.bandwidth <= 1e9:
            raise TopologyError(f"link {self.src}->{self.dst}: bandwidth must be a positive number "
                                f"(GB/s) in 1e-9..1e9, got {self.bandwidth!r}")
        if not _is_number(self.latency) or not math.isfinite(self.latency) or self.latency < 0 \
                or self.latency > 1e9:
            raise TopologyError(f"link {self.src}->{self.dst}: latency must be a number >= 0 (us) "
                                f"and at most 1e9, got {self.latency!r}")
        if not _is_int(self.multiplicity) or self.multiplicity < 1:
            raise TopologyError(f"link {self.src}->{self.dst}: multiplicity must be an integer >= 1, "
                                f"got {self.multiplicity!r}")
        if self.kind is not None and self.kind not in LINK_KINDS:
            raise TopologyError(f"link {self.src}->{self.dst}: kind must be one of {', '.join(LINK_KINDS)}, "
                                f"got {_brief(self.kind)}")
        # Normalise ints to floats so equal links compare and serialise identically.
        object.__setattr__(self, "bandwidth", float(self.bandwidth))
        object.__setattr__(self, "latency", float(self.latency))

    def reversed(self) -> Link:
        """The same link in the opposite direction."""
        return Link(self.dst, self.src, self.bandwidth, self.latency, self.multiplicity, self.kind)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"src": self.src, "dst": self.dst, "bandwidth": self.bandwidth,
                             "latency": self.latency, "multiplicity": self.multiplicity}
        if self.kind is not None:
            d["kind"] = self.kind
        return d


@dataclass(frozen=True)
class Topology:
    """Ranks, switch nodes and directed links; immutable and validated.

    ``links`` is kept sorted by ``(src, dst)`` (it is sorted on construction),
    so two topologies with the same links compare equal.  ``params`` records
    the generator's parameters as ``(key, value)`` string pairs.  ``cycle``,
    when given, is a Hamiltonian cycle over the ranks that the generator knows
    (every consecutive pair, and last -> first, has a :meth:`route`).

    ``hosts[r]`` is the host (machine, IPC domain of its own) of rank ``r``, numbered
    ``0 .. nhosts-1`` with none skipped; None means one host per rank.  ``ipc_domains[h]``
    groups hosts into CUDA IPC domains (a multi-node NVLink domain spans several hosts);
    None means one domain per host.  See docs/algorithms.md "Hosts and link kinds".
    """

    name: str
    nranks: int
    links: tuple[Link, ...]
    nswitches: int = 0
    params: tuple[tuple[str, str], ...] = ()
    cycle: tuple[int, ...] | None = field(default=None)
    hosts: tuple[int, ...] | None = None
    ipc_domains: tuple[int, ...] | None = None

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TopologyError(f"topology name must be a string, got {self.name!r}")
        if not _is_int(self.nranks) or self.nranks < 1:
            raise TopologyError(f"topology {self.name}: nranks must be an integer >= 1, got {self.nranks!r}")
        if not _is_int(self.nswitches) or self.nswitches < 0:
            raise TopologyError(f"topology {self.name}: nswitches must be an integer >= 0, "
                                f"got {self.nswitches!r}")
        if not isinstance(self.links, (tuple, list)):
            raise TopologyError(f"topology {self.name}: links must be a tuple of Link values")
        links = tuple(self.links)
        for link in links:
            if not isinstance(link, Link):
                raise TopologyError(f"topology {self.name}: links must be Link values, got {link!r}")
        links = tuple(sorted(links, key=lambda lk: (lk.src, lk.dst)))
        nnodes = self.nranks + self.nswitches
        previous: Link | None = None
        for link in links:
            if link.src >= nnodes or link.dst >= nnodes:
                bad = link.src if link.src >= nnodes else link.dst
                raise TopologyError(f"topology {self.name}: link {link.src}->{link.dst} names node {bad} "
                                    f"but the topology has {nnodes} nodes (0..{nnodes - 1})")
            if previous is not None and (previous.src, previous.dst) == (link.src, link.dst):
                raise TopologyError(f"topology {self.name}: duplicate link {link.src}->{link.dst} "
                                    f"(use multiplicity for parallel links)")
            previous = link
        object.__setattr__(self, "links", links)

        if not isinstance(self.params, (tuple, list)):
            raise TopologyError(f"topology {self.name}: params must be a tuple of (str, str) pairs")
        params = tuple(tuple(p) if isinstance(p, (tuple, list)) else (p,) for p in self.params)
        seen: set[str] = set()
        for p in params:
            if len(p) != 2 or not all(isinstance(x, str) for x in p):
                raise TopologyError(f"topology {self.name}: params must be (str, str) pairs, got {p!r}")
            if p[0] in seen:
                raise TopologyError(f"topology {self.name}: duplicate parameter {p[0]!r}")
            seen.add(p[0])
        object.__setattr__(self, "params", params)

        if self.cycle is not None:
            if not isinstance(self.cycle, (tuple, list)):
                raise TopologyError(f"topology {self.name}: cycle must be a tuple of ranks")
            cycle = tuple(self.cycle)
            object.__setattr__(self, "cycle", cycle)
            self._check_cycle(cycle)
        hosts = _grouping(self.hosts, self.nranks, f"topology {self.name}: hosts", "rank")
        object.__setattr__(self, "hosts", hosts)
        ndomains_of = max(hosts) + 1
        object.__setattr__(self, "ipc_domains",
                           _grouping(self.ipc_domains, ndomains_of, f"topology {self.name}: ipc_domains", "host"))
        self._check_kinds()

    def _check_kinds(self) -> None:
        """A rank-to-rank link's explicit kind must fit where its ends are."""
        n, hosts, domains = self.nranks, self.host_of, self.domain_of_host
        for lk in self.links:
            if lk.kind is None or lk.src >= n or lk.dst >= n:
                continue
            ha, hb = hosts[lk.src], hosts[lk.dst]
            if lk.kind in INTRA_HOST_KINDS and ha != hb:
                raise TopologyError(f"topology {self.name}: link {lk.src}->{lk.dst} is {lk.kind} but joins host "
                                    f"{ha} and host {hb} (a link between hosts is net, or mnnvl in one NVLink "
                                    f"domain)")
            if lk.kind == "mnnvl" and domains[ha] != domains[hb]:
                raise TopologyError(f"topology {self.name}: link {lk.src}->{lk.dst} is mnnvl but joins hosts of "
                                    f"different IPC domains ({domains[ha]} and {domains[hb]})")

    def _check_cycle(self, cycle: tuple[int, ...]) -> None:
        if not all(_is_int(r) for r in cycle) or sorted(cycle) != list(range(self.nranks)):
            raise TopologyError(f"topology {self.name}: cycle must list every rank 0..{self.nranks - 1} "
                                f"exactly once")
        index, (out, inn), n = self._link_index, self._adjacency, self.nranks
        # When every switch reaches every other over switches (fat trees, BiGraph, DGX-2), a rank
        # with a link to a switch reaches every rank with a link from one: no search per step
        # (that search is a breadth-first pass per rank, minutes for the largest specs).
        joined = self._switches_strongly_connected()
        scc = self._switch_components() if self.nswitches and not joined else None
        for i, a in enumerate(cycle):
            b = cycle[(i + 1) % len(cycle)]
            if (a, b) in index:
                continue
            if joined and any(s >= n for s in out[a]) and any(s >= n for s in inn[b]):
                continue
            if scc is not None:
                # a switch after a and a switch before b in one strongly connected set of switches:
                # the one reaches the other over switches, so a route exists (no search per step)
                after = {scc[s - n] for s in out[a] if s >= n}
                if after and any(scc[t - n] in after for t in inn[b] if t >= n):
                    continue
            if self.route(a, b) is None:
                raise TopologyError(f"topology {self.name}: cycle step {a}->{b} has no link or switch route")

    def _switch_components(self) -> list[int]:
        """The strongly connected component of each switch in the graph of switch-to-switch links."""
        n, m = self.nranks, self.nswitches
        out = self._adjacency[0]
        return strong_components(m, [(s - n, t - n) for s in range(n, n + m) for t in out[s] if t >= n])[1]

    def _switches_strongly_connected(self) -> bool:
        """True when there are switches and each reaches every other through switches only."""
        n, nnodes = self.nranks, self.nnodes
        if nnodes == n:
            return False
        out, inn = self._adjacency
        for adjacency in (out, inn):
            seen = {n}
            stack = [n]
            while stack:
                for v in adjacency[stack.pop()]:
                    if v >= n and v not in seen:
                        seen.add(v)
                        stack.append(v)
            if len(seen) != nnodes - n:
                return False
        return True

    def _check_node(self, node: int) -> None:
        if not _is_int(node) or not 0 <= node < self.nnodes:
            raise TopologyError(f"node {node!r} is out of range for topology {self.name} "
                                f"(nodes 0..{self.nnodes - 1})")

    # ------------------------------------------------------------------ basic queries
    @property
    def nnodes(self) -> int:
        """Ranks plus switch nodes."""
        return self.nranks + self.nswitches

    @property
    def ranks(self) -> range:
        return range(self.nranks)

    @property
    def switches(self) -> range:
        return range(self.nranks, self.nnodes)

    def is_switch(self, node: int) -> bool:
        self._check_node(node)
        return node >= self.nranks

    def param(self, key: str, default: str | None = None) -> str | None:
        """The generator parameter ``key``, or ``default``."""
        return dict(self.params).get(key, default)

    @property
    def family(self) -> str:
        """The generator family: ``torus`` for ``torus:4x4`` (the name up to its first colon);
        ``group`` for a process group's fabric (``torus:4x4@0-3``).

        >>> from collc.topology import parse_spec
        >>> parse_spec("torus:4x2").family, parse_spec("torus:4x2").dims
        ('torus', (4, 2))
        """
        if "@" in self.name:
            return "group"   # a process group's fabric (docs/groups.md): no generator's structure holds
        return self.name.split(":", 1)[0]

    @cached_property
    def dims(self) -> tuple[int, ...] | None:
        """The grid sizes its generator recorded (``dims`` parameter, slowest dimension first),
        parsed once; None when there are none (or they do not read as ``AxB...`` of positive
        sizes)."""
        raw = self.param("dims")
        try:
            dims = tuple(int(x) for x in str(raw).split("x")) if raw is not None else None
        except ValueError:
            return None
        return dims if dims and all(d >= 1 for d in dims) else None

    @cached_property
    def _link_index(self) -> dict[tuple[int, int], Link]:
        return {(lk.src, lk.dst): lk for lk in self.links}

    @cached_property
    def _adjacency(self) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        out: list[list[int]] = [[] for _ in range(self.nnodes)]
        inn: list[list[int]] = [[] for _ in range(self.nnodes)]
        for lk in self.links:  # sorted by (src, dst): both lists come out sorted
            out[lk.src].append(lk.dst)
            inn[lk.dst].append(lk.src)
        return tuple(tuple(x) for x in out), tuple(tuple(x) for x in inn)

    def link(self, src: int, dst: int) -> Link | None:
        """The link ``src -> dst``, or None."""
        return self._link_index.get((src, dst))

    def has_link(self, src: int, dst: int) -> bool:
        return (src, dst) in self._link_index

    def out_neighbors(self, node: int) -> tuple[int, ...]:
        """Nodes reachable from ``node`` over one link, ascending."""
        self._check_node(node)
        return self._adjacency[0][node]

    def in_neighbors(self, node: int) -> tuple[int, ...]:
        """Nodes with a link into ``node``, ascending."""
        self._check_node(node)
        return self._adjacency[1][node]

    def is_bidirectional(self) -> bool:
        """True when every link has a reverse link (attributes may differ)."""
        index = self._link_index
        return all((lk.dst, lk.src) in index for lk in self.links)

    def transpose(self) -> Topology:
        """All links reversed.  The name toggles a ``^T`` suffix, so
        ``t.transpose().transpose() == t``; a known cycle is walked backwards."""
        name = self.name[:-2] if self.name.endswith("^T") else self.name + "^T"
        cycle = None if self.cycle is None else (self.cycle[0],) + tuple(reversed(self.cycle[1:]))
        return Topology(name, self.nranks, tuple(lk.reversed() for lk in self.links),
                        self.nswitches, self.params, cycle, self.hosts, self.ipc_domains)

    def graph(self) -> nx.DiGraph:
        """A networkx DiGraph; nodes carry ``switch`` (bool), edges carry
        ``bandwidth``, ``latency``, ``multiplicity`` and ``kind`` (:meth:`link_kind`)."""
        import networkx as nx  # imported lazily: slow import

        g = nx.DiGraph(name=self.name)
        for node in range(self.nnodes):
            g.add_node(node, switch=node >= self.nranks)
        for lk in self.links:
            g.add_edge(lk.src, lk.dst, bandwidth=lk.bandwidth, latency=lk.latency,
                       multiplicity=lk.multiplicity, kind=self.link_kind(lk))
        return g

    # ------------------------------------------------------------------ distances and paths
    def _bfs(self, start: int, adjacency: Sequence[tuple[int, ...]], stop: int | None = None) -> dict[int, int]:
        """Hop distances from ``start`` along ``adjacency``; stops after the level
        that contains ``stop``."""
        dist = {start: 0}
        frontier = [start]
        level = 0
        while frontier and (stop is None or stop not in dist):
            level += 1
            nxt: list[int] = []
            for u in frontier:
                for v in adjacency[u]:
                    if v not in dist:
                        dist[v] = level
                        nxt.append(v)
            frontier = nxt
        return dist

    def distances_from(self, node: int) -> dict[int, int]:
        """Hop count from ``node`` to every node it can reach (switches included)."""
        self._check_node(node)
        return self._bfs(node, self._adjacency[0])

    def distance(self, a: int, b: int) -> int:
        """Hop count of a shortest path ``a -> b`` through any nodes."""
        self._check_node(a)
        self._check_node(b)
        dist = self._bfs(a, self._adjacency[0], stop=b)
        if b not in dist:
            raise TopologyError(f"topology {self.name}: node {b} is not reachable from node {a}")
        return dist[b]

    def shortest_path(self, a: int, b: int) -> tuple[int, ...]:
        """The lexicographically smallest shortest path ``a -> b`` (node ids,
        switches included, both ends included)."""
        self._check_node(a)
        self._check_node(b)
        to_b = self._bfs(b, self._adjacency[1], stop=a)
        if a not in to_b:
            raise TopologyError(f"topology {self.name}: node {b} is not reachable from node {a}")
        out = self._adjacency[0]
        path = [a]
        node = a
        while node != b:
            want = to_b[node] - 1
            node = next(v for v in out[node] if to_b.get(v) == want)
            path.append(node)
        return tuple(path)

    def diameter(self) -> int:
        """Largest rank-to-rank distance (paths may pass through any node)."""
        n, nnodes = self.nranks, self.nnodes
        inn = self._adjacency[1]
        full = (1 << n) - 1
        # reach[v]: bit set of ranks whose distance to v is <= level (all sources at once).
        reach = [1 << v if v < n else 0 for v in range(nnodes)]
        level = 0
        while not all(reach[v] == full for v in range(n)):
            new = list(reach)
            changed = False
            for v in range(nnodes):
                acc = reach[v]
                for u in inn[v]:
                    acc |= reach[u]
                if acc != reach[v]:
                    new[v] = acc
                    changed = True
            if not changed:
                raise TopologyError(f"topology {self.name}: ranks are not all reachable from each other")
            reach = new
            level += 1
        return level

    # ------------------------------------------------------------------ routes
    @cached_property
    def _switch_in(self) -> tuple[tuple[int, ...], ...]:
        """For each switch, its in-neighbours that are switches."""
        inn = self._adjacency[1]
        return tuple(tuple(u for u in inn[s] if u >= self.nranks) for s in self.switches)

    @cached_property
    def _route_cache(self) -> dict[int, dict[int, int]]:
        return {}

    def _switch_dist_to(self, dst: int) -> dict[int, int]:
        """Hops from each switch to ``dst`` over switch-only interiors."""
        cache = self._route_cache
        found = cache.get(dst)
        if found is not None:
            return found
        n = self.nranks
        dist: dict[int, int] = {}
        frontier = [u for u in self._adjacency[1][dst] if u >= n]
        for u in frontier:
            dist[u] = 1
        level = 1
        switch_in = self._switch_in
        while frontier:
            level += 1
            nxt: list[int] = []
            for s in frontier:
                for u in switch_in[s - n]:
                    if u not in dist:
                        dist[u] = level
                        nxt.append(u)
            frontier = nxt
        if len(cache) >= _ROUTE_CACHE_SIZE:
            del cache[next(iter(cache))]
        cache[dst] = dist
        return dist

    def is_routed(self) -> bool:
        """True for packet-routed networks (tori and meshes, as the Swing and MultiTree
        papers model them, or any topology whose params say ``routing: network``): any
        rank may send to any other and the network forwards along minimal routes.
        Elsewhere ranks exchange data only over a link or through switches."""
        return self.param("routing") == "network" or self.family in ("torus", "mesh")

    def route(self, a: int, b: int) -> tuple[int, ...] | None:
        """How ``a`` can send to ``b``: ``(a, b)`` over a direct link, else the
        lexicographically smallest shortest path whose interior nodes are all
        switches, else None.  ``route(a, a) == (a,)``."""
        self._check_node(a)
        self._check_node(b)
        if a == b:
            return (a,)
        if (a, b) in self._link_index:
            return (a, b)
        if self.nswitches == 0:
            return None
        dist = self._switch_dist_to(b)
        out = self._adjacency[0]
        best = min(((dist[s], s) for s in out[a] if s in dist), default=None)
        if best is None:
            return None
        hops, node = best
        path = [a, node]
        while hops > 1:
            hops -= 1
            node = next(v for v in out[node] if dist.get(v) == hops)
            path.append(node)
        path.append(b)
        return tuple(path)

    def rank_reachable(self, a: int, b: int) -> bool:
        """True when ``a`` can send to ``b`` directly or through switches only."""
        return self.route(a, b) is not None

    # ------------------------------------------------------------------ Hamiltonian cycle
    def hamiltonian_cycle(self) -> tuple[int, ...] | None:
        """A cycle over all ranks in which each consecutive pair (and last ->
        first) has a :meth:`route`.  The generator's recorded cycle when there
        is one; otherwise a bounded backtracking search for at most
        ``MAX_CYCLE_SEARCH_RANKS`` ranks; otherwise None."""
        if self.cycle is not None:
            return self.cycle
        return self._searched_cycle

    @cached_property
    def _searched_cycle(self) -> tuple[int, ...] | None:
        n = self.nranks
        if n == 1:
            return (0,)
        if n > MAX_CYCLE_SEARCH_RANKS:
            return None
        succ = [[b for b in range(n) if b != a and self.rank_reachable(a, b)] for a in range(n)]
        closes = [self.rank_reachable(a, 0) for a in range(n)]
        path = [0]
        used = [False] * n
        used[0] = True
        budget = [CYCLE_SEARCH_BUDGET]

        def extend(node: int) -> bool:
            if len(path) == n:
                return closes[node]
            budget[0] -= 1
            if budget[0] < 0:
                return False
            for v in succ[node]:
                if not used[v]:
                    used[v] = True
                    path.append(v)
                    if extend(v):
                        return True
                    path.pop()
                    used[v] = False
            return False

        return tuple(path) if extend(0) else None

    # ------------------------------------------------------------------ hosts, IPC domains, link kinds
    @property
    def host_of(self) -> tuple[int, ...]:
        """``host_of[r]``: the host of rank ``r`` (``hosts``, never None after construction)."""
        return self.hosts if self.hosts is not None else tuple(range(self.nranks))

    @property
    def domain_of_host(self) -> tuple[int, ...]:
        """``domain_of_host[h]``: the IPC domain of host ``h``."""
        return self.ipc_domains if self.ipc_domains is not None else tuple(range(self.nhosts))

    @cached_property
    def nhosts(self) -> int:
        return max(self.host_of) + 1

    @cached_property
    def nipc_domains(self) -> int:
        return max(self.domain_of_host) + 1

    def host(self, rank: int) -> int:
        """The host of ``rank``."""
        self._check_rank(rank)
        return self.host_of[rank]

    def ipc_domain(self, rank: int) -> int:
        """The CUDA IPC domain of ``rank``: ranks of one domain can map each other's memory
        (one host, or the hosts of one multi-node NVLink domain)."""
        self._check_rank(rank)
        return self.domain_of_host[self.host_of[rank]]

    def _check_rank(self, rank: int) -> None:
        if not _is_int(rank) or not 0 <= rank < self.nranks:
            raise TopologyError(f"rank {rank!r} is out of range for topology {self.name} (0..{self.nranks - 1})")

    @cached_property
    def host_ranks(self) -> tuple[tuple[int, ...], ...]:
        """The ranks of each host, ascending."""
        out: list[list[int]] = [[] for _ in range(self.nhosts)]
        for r, h in enumerate(self.host_of):
            out[h].append(r)
        return tuple(tuple(x) for x in out)

    def contiguous_ipc_domains(self) -> bool:
        """True when the IPC domains are equal contiguous blocks of ranks in rank order, the
        layout MSCCL++ assumes (``rank / nranksPerIpcDomain`` decides whether a port channel
        takes InfiniBand; docs/mscclpp-backend.md "Across hosts").

        >>> from collc.topology import parse_spec
        >>> parse_spec("a100:2x8").contiguous_ipc_domains(), parse_spec("ring:4").contiguous_ipc_domains()
        (True, True)
        """
        d = self.nipc_domains
        if self.nranks % d:
            return False
        per = self.nranks // d
        first = [self.ipc_domain(b * per) for b in range(d)]
        return len(set(first)) == d and all(self.ipc_domain(r) == first[r // per] for r in self.ranks)

    def hosts_summary(self) -> str:
        """``2 hosts x 8 ranks``, ``1 host x 8 ranks`` or ``3 hosts (8, 8, 4 ranks)``; the IPC
        domains when some span several hosts."""
        sizes = [len(r) for r in self.host_ranks]
        h = len(sizes)
        text = f"{h} host{'s' if h != 1 else ''} x {sizes[0]} rank{'s' if sizes[0] != 1 else ''}" \
            if len(set(sizes)) == 1 else \
            f"{h} hosts ({', '.join(str(s) for s in sizes[:8])}{', ...' if h > 8 else ''} ranks)"
        if self.nipc_domains != h:
            text += f", {self.nipc_domains} IPC domain{'s' if self.nipc_domains != 1 else ''} (multi-node NVLink)"
        return text

    @cached_property
    def _switch_span(self) -> tuple[frozenset[int], ...]:
        """For each switch, the hosts of the ranks linked to it."""
        n, hosts = self.nranks, self.host_of
        span: list[set[int]] = [set() for _ in self.switches]
        for lk in self.links:
            if lk.src < n <= lk.dst:
                span[lk.dst - n].add(hosts[lk.src])
            elif lk.dst < n <= lk.src:
                span[lk.src - n].add(hosts[lk.dst])
        return tuple(frozenset(s) for s in span)

    def link_kind(self, link: Link) -> str:
        """The link's own ``kind``, else what its ends say: two ranks of one host ``nvlink``, of
        one IPC domain ``mnnvl``, else ``net``; a link to or from a switch node counts the hosts
        of every rank linked to that switch (and to the other end's, for switch-to-switch links):
        one host ``nvlink``, one IPC domain ``mnnvl``, else (or none) ``net``."""
        if link.kind is not None:
            return link.kind
        n = self.nranks
        found: set[int] = set()
        for node in (link.src, link.dst):
            if node < n:
                found.add(self.host_of[node])
            else:
                span = self._switch_span[node - n]
                if not span:
                    return "net"
                found |= span
        if len(found) == 1:
            return "nvlink"
        domains = {self.domain_of_host[h] for h in found}
        return "mnnvl" if len(domains) == 1 else "net"

    def link_kind_counts(self) -> dict[str, int]:
        """Directed links (entries, not multiplicities) per kind, in :data:`LINK_KINDS` order."""
        counts = {k: 0 for k in LINK_KINDS}
        for lk in self.links:
            counts[self.link_kind(lk)] += 1
        return {k: c for k, c in counts.items() if c}

    def with_hosts(self, hosts: Sequence[int] | None, ipc_domains: Sequence[int] | None = None,
                   name: str | None = None) -> Topology:
        """The same topology with other hosts (and IPC domains); links keep their kinds."""
        return Topology(self.name if name is None else name, self.nranks, self.links, self.nswitches, self.params,
                        self.cycle, None if hosts is None else tuple(hosts),
                        None if ipc_domains is None else tuple(ipc_domains))

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """The file-format dict (see :mod:`collc.topology.spec`); every link is
        written as a directed link with all fields, so ``from_dict`` round-trips."""
        d: dict[str, Any] = {
            "name": self.name,
            "nranks": self.nranks,
            "nswitches": self.nswitches,
            "hosts": list(self.host_of),
        }
        if self.nipc_domains != self.nhosts:
            d["ipc_domains"] = list(self.domain_of_host)
        d["params"] = dict(self.params)
        d["links"] = [lk.to_dict() for lk in self.links]
        if self.cycle is not None:
            d["cycle"] = list(self.cycle)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], default_name: str = "custom") -> Topology:
        """Build a Topology from the file-format dict; TopologyError on bad input."""
        if not isinstance(d, Mapping):
            raise TopologyError(f"a topology must be a mapping, got {type(d).__name__}")
        known = {"name", "nranks", "nswitches", "hosts", "ipc_domains", "params", "defaults", "links", "cycle"}
        unknown = sorted(str(k) for k in d if k not in known)
        if unknown:
            raise TopologyError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        if "nranks" not in d:
            raise TopologyError("missing required key 'nranks'")
        name = d.get("name", default_name)
        if not isinstance(name, str) or not name:
            raise TopologyError(f"name must be a non-empty string, got {_brief(name)}")
        nranks = _int_field(d["nranks"], "nranks", 1, MAX_FILE_NODES)
        nswitches = _int_field(d.get("nswitches", 0), "nswitches", 0, MAX_FILE_NODES)

        params_raw = d.get("params", {})
        if params_raw is None:
            params_raw = {}
        if not isinstance(params_raw, Mapping):
            raise TopologyError(f"params must be a mapping of names to values, got {_brief(params_raw)}")
        params: list[tuple[str, str]] = []
        for key, value in params_raw.items():
            if not isinstance(key, str) or not isinstance(value, (str, int, float)) or isinstance(value, bool) \
                    or (not isinstance(value, str) and (abs(value) > 1e308 or not math.isfinite(value))):
                raise TopologyError(f"params: bad entry {_brief(key)}: {_brief(value)} (expected a name and a "
                                    f"string or finite number)")
            params.append((key, str(value)))

        defaults_raw = d.get("defaults", {})
        if defaults_raw is None:
            defaults_raw = {}
        if not isinstance(defaults_raw, Mapping):
            raise TopologyError(f"defaults must be a mapping, got {_brief(defaults_raw)}")
        bad_defaults = sorted(str(k) for k in defaults_raw if k not in ("bandwidth", "latency", "multiplicity"))
        if bad_defaults:
            raise TopologyError(f"defaults: unknown key(s) {', '.join(bad_defaults)} "
                                f"(known: bandwidth, latency, multiplicity)")
        # the ranges Link checks, here too: a file without links would otherwise keep a bad default
        default_bw = _float_field(defaults_raw.get("bandwidth", 1.0), "defaults.bandwidth", 1e-9, 1e9)
        default_lat = _float_field(defaults_raw.get("latency", 0.0), "defaults.latency", 0.0, 1e9)
        default_mult = _int_field(defaults_raw.get("multiplicity", 1), "defaults.multiplicity", 1, MAX_FILE_NODES)

        links_raw = d.get("links", [])
        if links_raw is None:
            links_raw = []
        if not isinstance(links_raw, Sequence) or isinstance(links_raw, (str, bytes)):
            raise TopologyError(f"links must be a list, got {_brief(links_raw)}")
        if len(links_raw) > MAX_FILE_LINKS:
            raise TopologyError(f"{len(links_raw)} link entries, more than {MAX_FILE_LINKS}")
        links: list[Link] = []
        for i, entry in enumerate(links_raw):
            links.extend(_links_from_entry(entry, f"links[{i}]", default_bw, default_lat, default_mult))

        cycle_raw = d.get("cycle")
        cycle: tuple[int, ...] | None = None
        if cycle_raw is not None:
            if not isinstance(cycle_raw, Sequence) or isinstance(cycle_raw, (str, bytes)):
                raise TopologyError(f"cycle must be a list of ranks, got {_brief(cycle_raw)}")
            cycle = tuple(_int_field(r, "cycle entry", 0, MAX_FILE_NODES) for r in cycle_raw)
        hosts = _int_list(d.get("hosts"), "hosts", "host index")
        domains = _int_list(d.get("ipc_domains"), "ipc_domains", "IPC domain index")
        return cls(name, nranks, tuple(links), nswitches, tuple(params), cycle, hosts, domains)


def _int_list(raw: object, what: str, entry: str) -> tuple[int, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise TopologyError(f"{what} must be a list of integers, got {_brief(raw)}")
    if len(raw) > MAX_FILE_NODES:
        raise TopologyError(f"{what}: {len(raw)} entries, more than {MAX_FILE_NODES}")
    return tuple(_int_field(v, f"{what} {entry}", 0, MAX_FILE_NODES) for v in raw)


def _grouping(raw: object, size: int, what: str, per: str) -> tuple[int, ...]:
    """A group index per item, numbered ``0 .. groups-1`` with none skipped (None: one group each)."""
    if raw is None:
        return tuple(range(size))
    if not isinstance(raw, (tuple, list)):
        raise TopologyError(f"{what} must be a tuple of integers, one per {per}")
    values = tuple(raw)
    if len(values) != size:
        raise TopologyError(f"{what} has {len(values)} entries but there are {size} {per}s (one entry per {per})")
    if not all(_is_int(v) and v >= 0 for v in values):
        raise TopologyError(f"{what} must be integers >= 0, got {_brief(values)}")
    used = set(values)
    if len(used) != max(values) + 1:
        gap = min(set(range(max(values) + 1)) - used)
        raise TopologyError(f"{what} must number groups 0..{max(values)} with none skipped; {gap} has no {per}")
    return values


_LINK_KEYS = ("src", "dst", "bandwidth", "latency", "multiplicity", "kind", "bidirectional")


def _links_from_entry(entry: object, where: str, bw: float, lat: float, mult: int) -> Iterable[Link]:
    if not isinstance(entry, Mapping):
        raise TopologyError(f"{where}: a link must be a mapping with src and dst, got {_brief(entry)}")
    unknown = sorted(str(k) for k in entry if k not in _LINK_KEYS)
    if unknown:
        raise TopologyError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_LINK_KEYS)})")
    for key in ("src", "dst"):
        if key not in entry:
            raise TopologyError(f"{where}: missing required key '{key}'")
    src = _int_field(entry["src"], f"{where}.src", 0, 2 * MAX_FILE_NODES)
    dst = _int_field(entry["dst"], f"{where}.dst", 0, 2 * MAX_FILE_NODES)
    bandwidth = _float_field(entry.get("bandwidth", bw), f"{where}.bandwidth")
    latency = _float_field(entry.get("latency", lat), f"{where}.latency")
    multiplicity = _int_field(entry.get("multiplicity", mult), f"{where}.multiplicity", 1, MAX_FILE_NODES)
    bidirectional = entry.get("bidirectional", False)
    if not isinstance(bidirectional, bool):
        raise TopologyError(f"{where}.bidirectional must be true or false, got {_brief(bidirectional)}")
    kind = entry.get("kind")
    if kind is not None and kind not in LINK_KINDS:
        raise TopologyError(f"{where}.kind must be one of {', '.join(LINK_KINDS)}, got {_brief(kind)}")
    try:
        link = Link(src, dst, bandwidth, latency, multiplicity, kind)
    except TopologyError as exc:
        raise TopologyError(f"{where}: {exc}") from exc
    return (link, link.reversed()) if bidirectional else (link,)


def _int_field(value: object, what: str, minimum: int, maximum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TopologyError(f"{what} must be an integer, got {_brief(value)}")
    if value < minimum:
        raise TopologyError(f"{what} must be >= {minimum}, got {_brief(value)}")
    if maximum is not None and value > maximum:
        raise TopologyError(f"{what} must be <= {maximum}, got {_brief(value)}")
    return value


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxlong, _REPR.maxother = 2, 4, 4, 40, 40, 40


def _brief(value: object) -> str:
    """``repr(value)`` cut short: a file's value may be huge (a long list, a 400-digit number)."""
    return _REPR.repr(value)


def _float_field(value: object, what: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    # an integer of 400 digits is past any float: math.isfinite would raise OverflowError on it
    if not isinstance(value, (int, float)) or isinstance(value, bool) or abs(value) > 1e308 \
            or not math.isfinite(value):
        raise TopologyError(f"{what} must be a finite number, got {_brief(value)}")
    if not lo <= value <= hi:
        raise TopologyError(f"{what} must be in {lo:g}..{hi:g}, got {_brief(value)}")
    return float(value)
