"""Routing of rank-to-rank messages over a Topology's directed links.

``Router(topology, policy)`` answers ``shares(a, b)``: the fraction of a message
from rank ``a`` to rank ``b`` that crosses each directed link.

* Tori (generator ``torus``): minimal dimension-order routing, dimensions in index
  order.  With ``policy="minimal"`` (default) a peer at exactly half the ring of a
  dimension is reached half one way and half the other, as the Swing paper's load
  model assumes (Swing NSDI'24 section 4.1); ``policy="dor"`` sends it all the positive way.
* Bidirectional rings route as 1-D tori.
* Meshes: dimension-order routing (the minimal path is unique per dimension).
* Anything else: the topology's route (a direct link, or a path through switches),
  else its shortest path.

A link's capacity is its bandwidth times its multiplicity (parallel links).
"""

from __future__ import annotations

from functools import lru_cache

from collc.errors import TopologyError
from collc.topology import Topology
from collc.topology.generators import coords, rank_of

Link = tuple[int, int]


class Router:
    def __init__(self, topology: Topology, policy: str = "minimal") -> None:
        if policy not in ("minimal", "dor"):
            raise TopologyError(f"unknown routing policy {policy!r} (minimal or dor)")
        self.topology = topology
        self.policy = policy
        family = topology.family
        self._dims = topology.dims if family in ("torus", "mesh") else None
        self._wrap = family == "torus"
        if family == "ring" and topology.is_bidirectional():
            self._dims, self._wrap = (topology.nranks,), True  # a bidirectional ring is a 1-D torus
        self.shares = lru_cache(maxsize=1 << 16)(self._shares)

    def capacity(self, link: Link) -> float:
        """GB/s of a directed link (bandwidth x multiplicity)."""
        lk = self.topology.link(*link)
        if lk is None:
            raise TopologyError(f"{self.topology.name} has no link {link[0]} -> {link[1]}")
        return lk.bandwidth * lk.multiplicity

    def latency(self, link: Link) -> float:
        lk = self.topology.link(*link)
        return 0.0 if lk is None else lk.latency

    def _shares(self, a: int, b: int) -> tuple[tuple[Link, float], ...]:
        if a == b:
            return ()
        if self._dims is not None:
            return self._grid(a, b)
        path = self.topology.route(a, b) or self.topology.shortest_path(a, b)
        return tuple(((u, v), 1.0) for u, v in zip(path, path[1:]))

    def hops(self, a: int, b: int) -> float:
        """Mean number of links a message from a to b crosses."""
        return sum(f for _, f in self.shares(a, b))

    def _grid(self, a: int, b: int) -> tuple[tuple[Link, float], ...]:
        dims = self._dims
        assert dims is not None
        ca, cb = coords(a, dims), coords(b, dims)
        # each "path" is (current coords, fraction); dimension order, splitting ties
        paths: list[tuple[list[int], float]] = [(list(ca), 1.0)]
        out: dict[Link, float] = {}
        for d, size in enumerate(dims):
            nxt: list[tuple[list[int], float]] = []
            for cur, frac in paths:
                delta = (cb[d] - cur[d]) % size if self._wrap else cb[d] - cur[d]
                if delta == 0:
                    nxt.append((cur, frac))
                    continue
                if not self._wrap:
                    ways = [(1 if delta > 0 else -1, abs(delta), frac)]
                elif delta * 2 == size and self.policy == "minimal":
                    ways = [(1, delta, frac / 2), (-1, delta, frac / 2)]
                elif delta * 2 <= size:
                    ways = [(1, delta, frac)]
                else:
                    ways = [(-1, size - delta, frac)]
                for sign, count, f in ways:
                    pos = list(cur)
                    for _ in range(count):
                        here = rank_of(pos, dims)
                        pos[d] = (pos[d] + sign) % size
                        link = (here, rank_of(pos, dims))
                        out[link] = out.get(link, 0.0) + f
                    nxt.append((pos, f))
            paths = nxt
        return tuple(sorted(out.items()))

