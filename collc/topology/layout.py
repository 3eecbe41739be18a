"""Parallel layouts: the process groups of a whole job, and whether one file serves them
(docs/groups.md, "Layouts" and "One file for many groups").

:func:`parse_layout` reads ``tp=T,dp=D[,pp=P]`` (any order, each at most once, a missing one is
1; ``T x D x P`` must be the rank count).  Ranks are numbered with tensor parallelism fastest,
then data, then pipeline parallelism (Megatron-LM's ``tp-dp-pp`` order): rank
``t + T (d + D p)``.  So the tensor-parallel groups are consecutive blocks of ``T`` ranks (a
box's GPUs when ``T`` is the GPUs per host), the data-parallel groups take every ``T``-th rank
inside a block of ``T x D``, and the pipeline groups every ``T x D``-th rank.  A dimension of
size 1 has no groups.

:func:`parse_group_list` reads an explicit list ``G;G;...`` of groups in the grammar of
:func:`collc.topology.groups.parse_group`; the groups must not overlap.

:func:`isomorphic` says whether two groups see the same fabric with member order respected:
the group fabrics are isomorphic by a mapping that sends the ``i``-th member of one to the
``i``-th member of the other, switches to switches, and keeps every link's kind, bandwidth,
latency and multiplicity (networkx's VF2 matcher).  Then one file, built on either, is right
for both: what a runtime that picks files by collective and communicator size needs.

>>> from collc.topology import parse_spec
>>> t = parse_spec("a100:2x8")
>>> lay = parse_layout("tp=8,dp=2", t)
>>> [(s.name, s.groups[:2]) for s in lay.sets]
[('tp', ((0, 1, 2, 3, 4, 5, 6, 7), (8, 9, 10, 11, 12, 13, 14, 15))), ('dp', ((0, 8), (1, 9)))]
>>> isomorphic(t, (0, 8), (2, 10)), isomorphic(t, (0, 8), (1, 9)), isomorphic(t, (0, 8), (8, 0))
(True, True, True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from typing import Any

from collc.errors import TopologyError
from collc.topology.groups import group_topology, parse_group
from collc.topology.model import Topology

__all__ = ["GroupSet", "Layout", "parse_layout", "parse_group_list", "isomorphic", "MAX_LAYOUT_CHARS",
           "DIMENSIONS"]

#: The layout dimensions, fastest-varying first.
DIMENSIONS = ("tp", "dp", "pp")
#: A layout text or group list longer than this is refused before it is read.
MAX_LAYOUT_CHARS = 4096


@dataclass(frozen=True)
class GroupSet:
    """The groups of one layout dimension (``tp``, ``dp``, ``pp``) or of an explicit list
    (``g``), each as its members in communicator order."""

    name: str
    groups: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for g in self.groups:
            if len(g) < 2 or seen.intersection(g):
                raise ValueError(f"group set {self.name}: groups of at least 2 ranks that do not overlap")
            seen.update(g)

    def label(self, i: int) -> str:
        return f"{self.name}{i}"


@dataclass(frozen=True)
class Layout:
    text: str
    sets: tuple[GroupSet, ...]

    def set_named(self, name: str) -> GroupSet:
        """The groups of dimension ``name``; TopologyError naming the dimensions otherwise."""
        for s in self.sets:
            if s.name == name:
                return s
        names = ", ".join(s.name for s in self.sets) or "none"
        raise TopologyError(f"unknown group {name[:20]!r} of layout {self.text[:60]!r} (its groups: {names})")


def _check_text(text: str, flag: str) -> str:
    if len(text) > MAX_LAYOUT_CHARS:
        raise TopologyError(f"{flag} is {len(text)} characters long: at most {MAX_LAYOUT_CHARS}")
    return text.strip()


def parse_layout(text: str, topology: Topology) -> Layout:
    """The groups of layout ``text`` (``tp=8,dp=4``) on ``topology``'s ranks; TopologyError for bad
    syntax, an unknown or repeated dimension, or sizes whose product is not the rank count."""
    body = _check_text(text, "--layout")
    sizes: dict[str, int] = {}
    for item in body.split(","):
        m = re.fullmatch(r"\s*([a-z]+)\s*=\s*([0-9]{1,9})\s*", item)
        if m is None:
            raise TopologyError(f"bad layout {body[:60]!r}: {item.strip()[:20]!r} is not NAME=SIZE "
                                f"(expected tp=T,dp=D[,pp=P])")
        name, size = m.group(1), int(m.group(2))
        if name not in DIMENSIONS:
            raise TopologyError(f"bad layout {body[:60]!r}: unknown dimension {name!r} (tp, dp, pp)")
        if name in sizes:
            raise TopologyError(f"bad layout {body[:60]!r}: {name} is given twice")
        if size < 1:
            raise TopologyError(f"bad layout {body[:60]!r}: {name} must be at least 1")
        sizes[name] = size
    t, d, p = (sizes.get(k, 1) for k in DIMENSIONS)
    n = topology.nranks
    if t * d * p != n:
        raise TopologyError(f"layout {body[:60]!r}: tp x dp x pp = {t} x {d} x {p} = {t * d * p}, but "
                            f"{topology.name} has {n} ranks")

    def rank(ti: int, di: int, pi: int) -> int:
        return ti + t * (di + d * pi)

    sets: list[GroupSet] = []
    if t > 1:
        sets.append(GroupSet("tp", tuple(tuple(rank(i, di, pi) for i in range(t))
                                         for pi in range(p) for di in range(d))))
    if d > 1:
        sets.append(GroupSet("dp", tuple(tuple(rank(ti, i, pi) for i in range(d))
                                         for pi in range(p) for ti in range(t))))
    if p > 1:
        sets.append(GroupSet("pp", tuple(tuple(rank(ti, di, i) for i in range(p))
                                         for di in range(d) for ti in range(t))))
    if not sets:
        raise TopologyError(f"layout {body[:60]!r} has no group of 2 or more ranks")
    return Layout(body, tuple(sets))


def parse_group_list(text: str, topology: Topology) -> Layout:
    """The groups ``G;G;...`` (docs/groups.md grammar) as one set named ``g``; TopologyError
    for a bad group or two groups that share a rank."""
    body = _check_text(text, "--groups")
    items = [x.strip() for x in body.split(";")]
    if len(items) > topology.nranks // 2:
        raise TopologyError(f"--groups lists {len(items)} groups: {topology.name} has room for at most "
                            f"{topology.nranks // 2} groups of 2 or more ranks")
    owner: dict[int, int] = {}
    groups: list[tuple[int, ...]] = []
    for i, item in enumerate(items):
        members = parse_group(item, topology)
        for r in members:
            if r in owner:
                raise TopologyError(f"--groups: rank {r} is in group {owner[r]} ({items[owner[r]][:30]!r}) and "
                                    f"group {i} ({item[:30]!r}); groups must not overlap")
            owner[r] = i
        groups.append(members)
    return Layout(body, (GroupSet("g", tuple(groups)),))


def isomorphic(topology: Topology, a: Sequence[int], b: Sequence[int]) -> bool:
    """True when groups ``a`` and ``b`` (members in communicator order) see isomorphic fabrics
    by a mapping that sends member ``i`` of ``a`` to member ``i`` of ``b`` and keeps each link's
    kind, bandwidth, latency and multiplicity.  TopologyError when either group has no fabric of
    its own (its members reach each other only through other GPUs)."""
    from networkx.algorithms.isomorphism import DiGraphMatcher  # type: ignore[import-untyped]  # slow import

    if len(a) != len(b):
        return False
    ga, gb = _labelled(group_topology(topology, a)), _labelled(group_topology(topology, b))
    if ga.number_of_nodes() != gb.number_of_nodes() or ga.number_of_edges() != gb.number_of_edges():
        return False
    if sorted(_signature(ga)) != sorted(_signature(gb)):
        return False
    matcher = DiGraphMatcher(ga, gb, node_match=lambda x, y: x["label"] == y["label"],
                             edge_match=lambda x, y: x["label"] == y["label"])
    return bool(matcher.is_isomorphic())


def _labelled(t: Topology) -> Any:
    """``t`` as a networkx DiGraph: member ``i`` labelled ``i``, every switch ``-1``, every link by its
    kind, bandwidth, latency and multiplicity."""
    import networkx as nx  # type: ignore[import-untyped]

    g = nx.DiGraph()
    for v in range(t.nnodes):
        g.add_node(v, label=v if v < t.nranks else -1)
    for lk in t.links:
        g.add_edge(lk.src, lk.dst, label=(t.link_kind(lk), lk.bandwidth, lk.latency, lk.multiplicity))
    return g


def _signature(g: Any) -> list[tuple[int, int, int]]:
    """Node labels with in- and out-degree: different multisets rule out an isomorphism cheaply."""
    return [(d["label"], g.in_degree(v), g.out_degree(v)) for v, d in g.nodes(data=True)]
