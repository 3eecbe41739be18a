"""Process groups: the fabric a subset of a topology's ranks sees (docs/groups.md).

A group is the ranks of one communicator, in communicator order: rank ``i`` of the group's
topology is the ``i``-th member.  :func:`parse_group` reads the group grammar

* ``0-7``, ``0,8,16,24``, ``0-3,8-11``: ranks and inclusive ranges, in the order written;
* ``stride:S`` / ``stride:S:O``: every ``S``-th rank starting at ``O`` (default 0);
* ``host:H``: the ranks of host ``H``, ascending;
* ``rail:L``: the rank with local index ``L`` on each host, host by host;

and :func:`group_topology` builds the group's fabric: the member ranks, the switch nodes
(NICs, NVSwitches, IB switches: they forward data) in the members' strongly connected part that
are no dead end, and the links among them; non-member GPUs go with their links, since they run
no kernel and cannot forward.  Hosts
and IPC domains are carried over (renumbered), every link keeps the kind it had on the whole
fabric, and a group whose members cannot all reach each other without the other GPUs is refused
with the pair named.

A spec ``SPEC@GROUP`` (``a100:4x8@stride:8``) names the group's fabric wherever a topology
spec is accepted; ``--group G`` is the same as appending ``@G``.

>>> from collc.topology import parse_spec
>>> t = parse_spec("a100:4x8@stride:8:1")
>>> t.name, t.nranks, t.nswitches, t.hosts_summary(), t.route(0, 1)
('a100:4x8@stride:8:1', 4, 5, '4 hosts x 1 rank', (0, 4, 8, 5, 1))
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from collc.errors import TopologyError
from collc.topology.model import Link, Topology, strong_components

__all__ = ["parse_group", "group_topology", "split_group", "describe_members"]

_RANGE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?\Z")


def split_group(spec: str) -> tuple[str, str | None]:
    """``a100:4x8@stride:8`` -> ``("a100:4x8", "stride:8")``; the group is after the last ``@``."""
    head, sep, group = spec.rpartition("@")
    return (head, group) if sep else (spec, None)


def _number(text: str, what: str, group: str) -> int:
    if not re.fullmatch(r"[0-9]{1,9}", text):
        raise TopologyError(f"bad group {group!r}: {what} must be a non-negative integer, got {text[:20]!r}")
    return int(text)


def parse_group(text: str, topology: Topology) -> tuple[int, ...]:
    """The member ranks ``text`` names on ``topology``, in communicator order; TopologyError
    for bad syntax, a rank out of range, a repeated rank, an unknown host or fewer than 2 ranks.

    >>> from collc.topology import parse_spec
    >>> t = parse_spec("a100:2x8")
    >>> parse_group("stride:8", t), parse_group("rail:3", t), parse_group("host:1", t)[:3], parse_group("0-2,9", t)
    ((0, 8), (3, 11), (8, 9, 10), (0, 1, 2, 9))
    """
    group = text.strip()
    n = topology.nranks
    if not group:
        raise TopologyError("empty group (give ranks such as 0-7 or 0,8,16, or stride:S, host:H, rail:L)")
    kind, colon, rest = group.partition(":")
    members: list[int] = []
    if colon:
        args = rest.split(":")
        if kind == "stride" and len(args) in (1, 2):
            step = _number(args[0], "the stride", group)
            start = _number(args[1], "the start", group) if len(args) == 2 else 0
            if step < 1:
                raise TopologyError(f"bad group {group!r}: the stride must be at least 1")
            if start >= n:
                raise TopologyError(f"bad group {group!r}: start rank {start} is out of range for "
                                    f"{topology.name} (ranks 0..{n - 1})")
            members = list(range(start, n, step))
        elif kind == "host" and len(args) == 1:
            host = _number(args[0], "the host", group)
            if host >= topology.nhosts:
                raise TopologyError(f"bad group {group!r}: {topology.name} has no host {host} "
                                    f"(hosts 0..{topology.nhosts - 1})")
            members = list(topology.host_ranks[host])
        elif kind == "rail" and len(args) == 1:
            local = _number(args[0], "the local index", group)
            for h, ranks in enumerate(topology.host_ranks):
                if local >= len(ranks):
                    raise TopologyError(f"bad group {group!r}: host {h} of {topology.name} has {len(ranks)} "
                                        f"rank{'s' if len(ranks) != 1 else ''}, no local index {local}")
                members.append(ranks[local])
        else:
            raise TopologyError(f"bad group {group[:40]!r}: expected RANKS (0-7, 0,8,16), stride:S[:O], "
                                f"host:H or rail:L")
    else:
        for item in group.split(","):
            m = _RANGE.match(item.strip())
            if m is None:
                raise TopologyError(f"bad group {group[:40]!r}: {item.strip()[:20]!r} is not a rank or a range "
                                    f"A-B (expected RANKS such as 0-7 or 0,8,16, or stride:S[:O], host:H, rail:L)")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) is not None else lo
            if hi < lo:
                raise TopologyError(f"bad group {group!r}: range {item.strip()} runs backwards")
            if hi >= n:   # checked before the range is expanded
                raise TopologyError(f"bad group {group!r}: rank {hi} is out of range for {topology.name} "
                                    f"(ranks 0..{n - 1})")
            members.extend(range(lo, hi + 1))
            if len(members) > n:
                break   # repeats; reported below
    seen: set[int] = set()
    for r in members:
        if r in seen:
            raise TopologyError(f"bad group {group!r}: rank {r} is given twice")
        seen.add(r)
    if len(members) < 2:
        raise TopologyError(f"bad group {group!r}: a group needs at least 2 ranks, got {len(members)}")
    return tuple(members)


def describe_members(members: Sequence[int]) -> str:
    """The members as ranks and ranges: ``0-3,8,16``."""
    parts: list[str] = []
    i = 0
    while i < len(members):
        j = i
        while j + 1 < len(members) and members[j + 1] == members[j] + 1:
            j += 1
        parts.append(str(members[i]) if j == i else f"{members[i]}-{members[j]}")
        i = j + 1
    return ",".join(parts)


def group_topology(topology: Topology, members: Sequence[int], label: str | None = None) -> Topology:
    """The fabric the ranks ``members`` (in communicator order) see on ``topology``: the members,
    the switch nodes that can pass data between them, the links among them (each with the kind it has on the whole fabric), hosts
    and IPC domains renumbered in order; named ``NAME@LABEL`` (``label`` defaults to the members
    as ranges).  TopologyError when a member is out of range or repeated, or when a member cannot
    reach another over links, switches and other members."""
    n = topology.nranks
    members = tuple(members)
    if len(set(members)) != len(members) or any(not isinstance(r, int) or not 0 <= r < n for r in members):
        raise TopologyError(f"group of {topology.name}: members must be distinct ranks 0..{n - 1}")
    if len(members) < 2:
        raise TopologyError(f"group of {topology.name}: a group needs at least 2 ranks")
    k = len(members)
    label = describe_members(members) if label is None else label
    name = f"{topology.name}@{label}"
    node: dict[int, int] = {r: i for i, r in enumerate(members)}
    for s in topology.switches:
        node[s] = k + (s - n)
    induced = [(node[lk.src], node[lk.dst], lk) for lk in topology.links if lk.src in node and lk.dst in node]
    keep = _members_component(induced, k + topology.nswitches, k, name, members)
    _prune_dead_ends(induced, keep, k)
    # switches outside the members' strongly connected set (the NVSwitch of a box without members,
    # the other rail's IB switch) and dead ends (a non-member's NIC, the NVSwitch of a box with one
    # member) carry nothing between members: they go, the rest are renumbered
    switch_id = {v: k + i for i, v in enumerate(v for v in range(k, k + topology.nswitches) if keep[v])}
    new = {**{i: i for i in range(k)}, **switch_id}
    links = tuple(Link(new[a], new[b], lk.bandwidth, lk.latency, lk.multiplicity, topology.link_kind(lk))
                  for a, b, lk in induced if keep[a] and keep[b])
    old_hosts = sorted({topology.host_of[r] for r in members})
    host_id = {h: i for i, h in enumerate(old_hosts)}
    old_domains = sorted({topology.domain_of_host[h] for h in old_hosts})
    domain_id = {d: i for i, d in enumerate(old_domains)}
    hosts = tuple(host_id[topology.host_of[r]] for r in members)
    domains = tuple(domain_id[topology.domain_of_host[h]] for h in old_hosts)
    params = (("parent", topology.name), ("members", label))
    nsw = len(switch_id)
    group = Topology(name, k, links, nsw, params, None, hosts, domains)
    # the whole fabric's ring, visiting the members only, when each step still has a route
    parent_cycle = topology.hamiltonian_cycle() if topology.cycle is not None or n <= 16 else None
    if parent_cycle is not None:
        index = {r: i for i, r in enumerate(members)}
        cycle = tuple(index[r] for r in parent_cycle if r in index)
        if all(group.route(a, cycle[(i + 1) % k]) is not None for i, a in enumerate(cycle)):
            group = Topology(name, k, links, nsw, params, cycle, hosts, domains)
    return group


def _prune_dead_ends(induced: Sequence[tuple[int, int, Link]], keep: list[bool], k: int) -> None:
    """Drop (in ``keep``) switches whose only neighbour, in and out, is one node: whatever passes
    through them returns to where it came from.  Repeated until none is left."""
    nbrs: dict[int, set[int]] = {}
    for a, b, _ in induced:
        if keep[a] and keep[b]:
            nbrs.setdefault(a, set()).add(b)
            nbrs.setdefault(b, set()).add(a)
    stack = [v for v, s in nbrs.items() if v >= k and len(s) <= 1]
    while stack:
        v = stack.pop()
        if not keep[v]:
            continue
        keep[v] = False
        for u in nbrs.pop(v, set()):
            others = nbrs.get(u)
            if others is not None:
                others.discard(v)
                if u >= k and len(others) <= 1:
                    stack.append(u)


def _members_component(induced: Sequence[tuple[int, int, Link]], nnodes: int, k: int, name: str,
                       members: Sequence[int]) -> list[bool]:
    """Which nodes lie in the members' strongly connected set; TopologyError (naming a pair) when
    the members do not all reach each other over links, switches and other members (which run the
    collective's kernel and may relay), never through a GPU outside the group."""
    from scipy.sparse.csgraph import breadth_first_order  # type: ignore[import-untyped]

    graph, labels = strong_components(nnodes, [(a, b) for a, b, _ in induced])
    for b in range(1, k):
        if labels[b] != labels[0]:
            reached = set(int(x) for x in breadth_first_order(graph, 0, directed=True, return_predecessors=False))
            a, b = (0, b) if b not in reached else (b, 0)
            raise TopologyError(f"group {name}: member {a} (rank {members[a]}) cannot reach member {b} "
                                f"(rank {members[b]}) without the GPUs outside the group (a transfer never "
                                f"passes through a GPU that is not a member)")
    return [bool(labels[v] == labels[0]) for v in range(nnodes)]
