"""Whether an MSCCL++ plan's channels can be set up where its ranks are (docs/mscclpp-backend.md
"Across hosts").

The executor connects a **memory** channel over CUDA IPC only, so both ends must be in one IPC
domain (one host, or the hosts of one multi-node NVLink domain: ``Topology.ipc_domain``); a
**switch** (NVLS) channel's rank group must be one NVLink domain as well.  A **port** channel
takes InfiniBand between IPC domains, judged by ``rank / nranksPerIpcDomain``: the domains must
be equal contiguous blocks of ranks (``Topology.contiguous_ipc_domains``).  The lowering puts a
transfer between IPC domains on a port channel (``collc.compiler.mscclpp.lower``), so :func:`placement_refusal`
refuses only what it cannot express: a memory channel between domains (a plan lowered without the
topology's domains), a switch group across domains, port channels on non-contiguous domains;
``collc check --topology`` reports the same pairs for any plan.

>>> from collc.compiler.mscclpp.plan import Channel, ChannelType, Gpu, Plan, Protocol
>>> from collc.topology import parse_spec
>>> ch = lambda peer: (Channel(ChannelType.MEMORY, (peer,)),)
>>> plan = Plan("p", "allgather", Protocol.SIMPLE, True,
...             tuple(Gpu(r, 1, 2, 0, (), ch(1 - r), ()) for r in range(2)))
>>> cross_domain_pairs(plan, parse_spec("ring:2:hosts=1")), cross_domain_pairs(plan, parse_spec("ring:2"))
([], [(0, 1), (1, 0)])
"""

from __future__ import annotations

from collc.compiler.mscclpp.plan import Channel, ChannelType, Plan, SwitchChannel
from collc.errors import LoweringError
from collc.topology.model import Topology

__all__ = ["memory_channel_pairs", "cross_domain_pairs", "switch_groups_across", "ports_misjudged",
           "placement_refusal", "pair_text", "CROSS_HOST_HINT"]

#: What the refusal tells a user to do instead.
CROSS_HOST_HINT = ("a memory channel needs CUDA IPC; a transfer between IPC domains needs a port channel "
                   "(lower the plan with the topology's IPC domains)")


def memory_channel_pairs(plan: Plan) -> list[tuple[int, int]]:
    """Every ``(rank, peer)`` joined by a memory channel, sorted, each once."""
    return sorted({(g.id, p) for g in plan.gpus for c in g.channels
                   if isinstance(c, Channel) and c.channel_type is ChannelType.MEMORY for p in c.connected_to})


def cross_domain_pairs(plan: Plan, topology: Topology) -> list[tuple[int, int]]:
    """The memory-channel pairs whose ranks are in different IPC domains of ``topology`` (pairs
    naming a rank the topology lacks are left to the plan checker)."""
    n = topology.nranks
    return [(a, b) for a, b in memory_channel_pairs(plan)
            if a < n and b < n and topology.ipc_domain(a) != topology.ipc_domain(b)]


def switch_groups_across(plan: Plan, topology: Topology) -> list[tuple[int, tuple[int, ...]]]:
    """``(gpu, ranks)`` of each switch-channel rank group that spans IPC domains."""
    n = topology.nranks
    out = []
    for g in plan.gpus:
        for c in g.channels:
            if isinstance(c, SwitchChannel):
                for group in c.rank_groups:
                    ranks = tuple(r for r in group.ranks if r < n)
                    if len({topology.ipc_domain(r) for r in ranks}) > 1:
                        out.append((g.id, group.ranks))
    return out


def ports_misjudged(plan: Plan, topology: Topology) -> bool:
    """Whether ``plan`` has port channels on IPC domains that are not equal contiguous blocks of ranks, where
    the executor's ``rank / nranksPerIpcDomain`` picks the wrong transport for some pairs."""
    return topology.nipc_domains > 1 and not topology.contiguous_ipc_domains() and any(
        g.peers(ChannelType.PORT) for g in plan.gpus)


def pair_text(a: int, b: int, topology: Topology) -> str:
    """``rank 0 -> rank 8 cross hosts (host 0 -> host 1)``."""
    return f"rank {a} -> rank {b} cross hosts (host {topology.host(a)} -> host {topology.host(b)})"


def placement_refusal(plan: Plan, topology: Topology) -> str | None:
    """Why ``plan`` cannot be set up on ``topology``'s hosts, or None.  The first crossing pair
    is named; the count says how many more there are."""
    pairs = cross_domain_pairs(plan, topology)
    if pairs:
        a, b = pairs[0]
        more = f" (and {len(pairs) - 1} more pair(s))" if len(pairs) > 1 else ""
        return f"{pair_text(a, b, topology)}{more}: {CROSS_HOST_HINT}"
    groups = switch_groups_across(plan, topology)
    if groups:
        gpu, ranks = groups[0]
        return (f"gpu {gpu}: switch channel over ranks {list(ranks)[:8]} spans IPC domains: NVLS multicast needs one "
                f"NVLink domain")
    if ports_misjudged(plan, topology):
        return (f"{topology.name}: its IPC domains ({topology.hosts_summary()}) are not equal contiguous blocks of "
                f"ranks, and MSCCL++ picks InfiniBand for a port channel by rank / nranksPerIpcDomain")
    return None


def refuse_across_hosts(plan: Plan, topology: Topology) -> None:
    """Raise :class:`LoweringError` when :func:`placement_refusal` has a reason."""
    why = placement_refusal(plan, topology)
    if why is not None:
        raise LoweringError(why)
