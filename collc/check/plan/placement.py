"""``collc check --topology SPEC`` on an MSCCL++ plan: can its channels be set up where its ranks are?

A memory channel connects over CUDA IPC only, so its two ranks must share an IPC domain (one
host, or one multi-node NVLink domain); a switch (NVLS) channel's rank group too; a port channel
picks InfiniBand by ``rank / nranksPerIpcDomain``, which needs equal contiguous domains.  The
rules live in :mod:`collc.compiler.mscclpp.placement`; see docs/mscclpp-backend.md "Across hosts".
Without a topology the check says, as an ``info`` finding, that it cannot judge placement.
"""

from __future__ import annotations

from collc.check.findings import FindingList
from collc.compiler.mscclpp.placement import (cross_domain_pairs, memory_channel_pairs, pair_text, ports_misjudged,
                                     switch_groups_across)
from collc.compiler.mscclpp.plan import Plan
from collc.topology.model import Topology

__all__ = ["check_placement", "MAX_PAIR_FINDINGS"]

#: Crossing pairs reported one finding each; the rest are counted in one more finding.
MAX_PAIR_FINDINGS = 16


def check_placement(plan: Plan, topology: Topology | None, rep: FindingList) -> None:
    """Add the placement findings of ``plan`` on ``topology`` (None: not given) to ``rep``."""
    pairs = memory_channel_pairs(plan)
    if topology is None:
        if pairs:
            rep.add("placement-not-judged", f"{len(pairs)} memory-channel pair(s) need CUDA IPC between their ranks; "
                    "without --topology collc cannot judge whether each pair shares a host (or NVLink domain)",
                    "info")
        return
    if topology.nranks != plan.nranks:
        rep.add("topology-ranks", f"the plan has {plan.nranks} ranks but {topology.name} has {topology.nranks}: "
                "placement not judged")
        return
    crossing = cross_domain_pairs(plan, topology)
    for a, b in crossing[:MAX_PAIR_FINDINGS]:
        rep.add("memory-channel-across-hosts", f"{pair_text(a, b, topology)} on {topology.name}: a memory channel "
                "connects over CUDA IPC only (one host or one multi-node NVLink domain); the executor cannot set it "
                "up, use a port channel")
    if len(crossing) > MAX_PAIR_FINDINGS:
        rep.add("memory-channel-across-hosts", f"and {len(crossing) - MAX_PAIR_FINDINGS} more memory-channel pair(s) "
                f"across hosts on {topology.name}")
    for gpu, ranks in switch_groups_across(plan, topology)[:MAX_PAIR_FINDINGS]:
        rep.add("switch-channel-across-hosts", f"gpu {gpu}: a switch channel over ranks {list(ranks)[:8]} spans IPC "
                f"domains of {topology.name}: NVLS multicast needs one NVLink domain")
    if ports_misjudged(plan, topology):
        rep.add("ipc-domains-not-contiguous", f"{topology.name}: IPC domains ({topology.hosts_summary()}) are not "
                "equal contiguous blocks of ranks; MSCCL++ chooses InfiniBand for a port channel by "
                "rank / nranksPerIpcDomain and would misjudge some pairs", "warning")
