"""Where a page draws a topology's nodes and links (docs/show.md, "The fabric").

* Tori and meshes sit on their grid: rank ``r`` at its coordinates (``coords``: dimension 0
  across, dimension 1 down, so rank 1 is below rank 0; a third dimension lays its planes side by side).  A torus's wrap-around
  link is drawn as two stubs leaving one edge and entering the opposite one.
* Rings and circulant graphs sit on a circle (networkx ``circular_layout``).
* Switch fabrics: each switch is a box with its ranks on a circle around it (one switch), or
  every node placed by networkx's seeded ``kamada_kawai_layout``/``spring_layout`` (several).
* Anything else (hypercubes, Kautz graphs, other direct-connect graphs): networkx's
  ``kamada_kawai_layout`` (``spring_layout`` with a fixed seed above 200 nodes), so the page
  is the same for the same input.

The two directions of a link are drawn side by side, each shifted a little to its right.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collc.sim.routing import Link
from collc.topology import Topology
from collc.topology.generators import coords

Point = tuple[float, float]
Segment = tuple[Point, Point]

#: Sideways shift of a directed link from the line between its nodes (grid units).
OFFSET = 0.07


@dataclass(frozen=True)
class Geometry:
    style: str                          # "grid", "circle", "switch" or "graph"
    pos: dict[int, Point]               # every node (ranks and switches)
    segments: dict[Link, tuple[Segment, ...]]
    labels: dict[int, str]              # hover text of each node


def geometry(topology: Topology) -> Geometry:
    n = topology.nranks
    dims = topology.dims if topology.family in ("torus", "mesh") else None
    labels = {r: f"rank {r}" for r in range(n)}
    labels.update({s: f"switch {s - n}" for s in topology.switches})
    if dims is not None and len(dims) <= 3:
        return _grid(topology, dims, labels)
    pos: dict[int, Point]
    if topology.nswitches == 1:
        pos = {r: (math.cos(2 * math.pi * r / n), -math.sin(2 * math.pi * r / n)) for r in range(n)}
        pos[n] = (0.0, 0.0)
        style = "switch"
    elif topology.family in ("ring", "circulant", "complete") and not topology.nswitches:
        pos = {r: (math.cos(2 * math.pi * r / n), -math.sin(2 * math.pi * r / n)) for r in range(n)}
        style = "circle"
    else:
        import networkx as nx  # type: ignore[import-untyped]

        g = nx.Graph()
        g.add_nodes_from(range(topology.nnodes))
        g.add_edges_from((lk.src, lk.dst) for lk in topology.links)
        if topology.nnodes <= 200 and nx.is_connected(g):
            raw = nx.kamada_kawai_layout(g)
        else:
            raw = nx.spring_layout(g, seed=0, iterations=60)
        pos = {int(k): (float(v[0]), float(v[1])) for k, v in raw.items()}
        style = "switch" if topology.nswitches else "graph"
    scale = _spacing(pos)
    segs: dict[Link, tuple[Segment, ...]] = {
        (lk.src, lk.dst): (_shift(pos[lk.src], pos[lk.dst], OFFSET * scale),) for lk in topology.links}
    return Geometry(style, pos, segs, labels)


def _spacing(pos: dict[int, Point]) -> float:
    """A typical distance between neighbouring nodes: the offset and stubs scale with it."""
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
    return span / max(1.0, math.sqrt(len(pos)))


def _shift(a: Point, b: Point, d: float) -> Segment:
    """The segment a -> b moved ``d`` to its right and shortened a little at both ends."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = math.hypot(dx, dy) or 1.0
    ox, oy = dy / length * d, -dx / length * d
    trim = min(0.15, 0.5 * d / max(length, 1e-9) * 2)
    return ((a[0] + dx * trim + ox, a[1] + dy * trim + oy), (b[0] - dx * trim + ox, b[1] - dy * trim + oy))


def _grid(topology: Topology, dims: tuple[int, ...], labels: dict[int, str]) -> Geometry:
    n = topology.nranks
    plane_gap = dims[0] + 1.0

    def place(r: int) -> Point:
        c = coords(r, dims)
        x = float(c[0]) + (c[2] * plane_gap if len(dims) == 3 else 0.0)
        y = -float(c[1]) if len(dims) >= 2 else 0.0
        return (x, y)

    pos = {r: place(r) for r in range(n)}
    for r in range(n):
        labels[r] = f"rank {r} at ({', '.join(str(x) for x in coords(r, dims))})"
    segs: dict[Link, tuple[Segment, ...]] = {}
    for lk in topology.links:
        a, b = pos[lk.src], pos[lk.dst]
        ca, cb = coords(lk.src, dims), coords(lk.dst, dims)
        d = next((i for i in range(len(dims)) if ca[i] != cb[i]), 0)
        step = (cb[d] - ca[d]) % dims[d]
        wrap = dims[d] > 2 and abs(cb[d] - ca[d]) != 1
        if not wrap or d == 2:
            segs[(lk.src, lk.dst)] = (_shift(a, b, OFFSET),)
            continue
        # a wrap-around link: a stub out of the edge at the source, one into the destination
        sign = 1.0 if step == 1 else -1.0
        unit = (sign, 0.0) if d == 0 else (0.0, -sign)
        out_end = (a[0] + unit[0] * 0.45, a[1] + unit[1] * 0.45)
        in_start = (b[0] - unit[0] * 0.45, b[1] - unit[1] * 0.45)
        segs[(lk.src, lk.dst)] = (_shift(a, out_end, OFFSET), _shift(in_start, b, OFFSET))
    return Geometry("grid", pos, segs, labels)
