"""Static analysis of a Schedule and the papers' alpha-beta step model.

Units: bytes, GB/s (= 1e3 bytes per microsecond), microseconds.  ``message_bytes``
is the collective's size as nccl-tests prints it (``max(sendBytes, recvBytes)``;
for allgather the gathered total): a chunk is ``message_bytes / nchunksperloop``.

* ``link_loads`` / ``step_loads``: per step, bytes and messages on every directed link (messages
  at exactly half a torus ring count half on each way, see ``Router``), the
  busiest link and the share of links in use.
* ``step_time``: T = sum over steps with traffic of (alpha + max over links of
  bytes / capacity [+ per-hop latency x the longest route of the step]) — the
  model of the direct-connect paper (Zhao et al., Efficient Direct-Connect Topologies for
  Collective Communications, section 3.2) and of Swing's Eq. 1.
* ``congestion_deficiency``: the bandwidth term over the ideal ``phases x M / (ports b)``,
  Swing's Psi x Xi (Swing NSDI'24 section 2.2, Eq. 1, Table 2; Xi itself when every port is busy).
* ``lower_bounds``: latency (alpha x the communication-step diameter: transfers go
  between linked ranks or through switches),
  bandwidth ((N-1)/N x M / ingress per phase, twice for allreduce) and the
  single-node cut bound of switch fabrics (ForestColl, Zhao et al. 2024, cut bound Eq. 1, singleton cuts).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from collc.ir.collective import CollKind
from collc.ir.schedule import Schedule
from collc.sim.routing import Link, Router
from collc.topology import Topology

BYTES_PER_US_PER_GBPS = 1e3


@dataclass(frozen=True)
class StepLoad:
    step: int
    max_bytes: float           # on the busiest link (by time, bytes/capacity)
    max_messages: float        # most messages sharing one directed link
    busiest: Link | None
    bw_time_us: float          # max over links of bytes / capacity
    hops: float                # longest mean route of the step's messages
    utilization: float         # share of the topology's directed links carrying traffic


def phases(kind: CollKind) -> int:
    return 2 if kind is CollKind.ALLREDUCE else 1


def link_loads(schedule: Schedule, router: Router, message_bytes: float) -> list[dict[Link, tuple[float, float]]]:
    """Per step: every directed link carrying traffic -> (bytes, messages)."""
    chunk = message_bytes / schedule.collective.nchunksperloop
    out: list[dict[Link, tuple[float, float]]] = []
    for transfers in schedule.steps:
        step: dict[Link, tuple[float, float]] = {}
        for t in transfers:
            if t.is_local:
                continue
            size = t.count * chunk
            for link, frac in router.shares(t.src, t.dst):
                b, m = step.get(link, (0.0, 0.0))
                step[link] = (b + size * frac, m + frac)
        out.append(step)
    return out


def step_loads(schedule: Schedule, router: Router, message_bytes: float,
               bandwidth: float | None = None) -> list[StepLoad]:
    """Per-step summary of ``link_loads``: the busiest link (by time), messages, utilisation."""
    nlinks = max(1, len(router.topology.links))
    out: list[StepLoad] = []
    for number, (transfers, loads) in enumerate(zip(schedule.steps, link_loads(schedule, router, message_bytes))):
        if not loads:
            out.append(StepLoad(number, 0.0, 0.0, None, 0.0, 0.0, 0.0))
            continue
        hops = max((router.hops(t.src, t.dst) for t in transfers if not t.is_local), default=0.0)

        def seconds(link: Link) -> float:
            cap = bandwidth if bandwidth is not None else router.capacity(link)
            return loads[link][0] / (cap * BYTES_PER_US_PER_GBPS)

        busiest = max(sorted(loads), key=seconds)
        out.append(StepLoad(number, loads[busiest][0], max(m for _, m in loads.values()), busiest,
                            seconds(busiest), hops, len(loads) / nlinks))
    return out


def step_time(schedule: Schedule, topology: Topology, message_bytes: float, alpha_us: float = 0.0, *,
              hop_latency_us: float = 0.0, bandwidth: float | None = None, router: Router | None = None) -> float:
    """Alpha-beta time in microseconds; steps without remote traffic cost nothing."""
    r = router or Router(topology)
    total = 0.0
    for s in step_loads(schedule, r, message_bytes, bandwidth):
        if s.busiest is not None:
            total += alpha_us + s.bw_time_us + hop_latency_us * s.hops
    return total


def step_times(schedule: Schedule, topology: Topology, sizes: list[float], alpha_us: float = 0.0, *,
               hop_latency_us: float = 0.0, bandwidth: float | None = None,
               router: Router | None = None) -> list[float]:
    """``step_time`` at many message sizes; link loads are linear in the size, so route once."""
    loads = step_loads(schedule, router or Router(topology), 1.0, bandwidth)
    active = [s for s in loads if s.busiest is not None]
    fixed = sum(alpha_us + hop_latency_us * s.hops for s in active)
    per_byte = sum(s.bw_time_us for s in active)
    return [fixed + per_byte * size for size in sizes]


def ports(topology: Topology) -> float:
    """Mean number of outgoing links (counting multiplicity) of a rank."""
    n = topology.nranks
    return sum(lk.multiplicity for lk in topology.links if lk.src < n) / n


def congestion_deficiency(schedule: Schedule, topology: Topology, router: Router | None = None) -> float:
    """Bandwidth term over the ideal of a rank that keeps all its ports busy.

    With unit message size and unit link bandwidth: the sum over steps of the busiest
    link's bytes, divided by ``phases x M / ports`` (``ports = 2D`` on a D-dimensional
    torus), i.e. the (n/D) beta of Swing's Eq. 1.  This is Swing's ``Psi x Xi``; for
    schedules that use every port at every step (Psi = 1, e.g. Swing (B), bidirectional
    ring) it is Swing's Xi (Swing NSDI'24 section 4.1, Table 2).
    """
    r = router or Router(topology)
    loads = step_loads(schedule, r, 1.0, bandwidth=1.0)
    term = sum(s.max_bytes for s in loads)
    return term / (phases(schedule.collective.kind) / ports(topology))


@dataclass(frozen=True)
class Bounds:
    latency_us: float       # alpha x this topology's communication-step diameter
    bandwidth_us: float
    cut_us: float
    moore_us: float = 0.0   # alpha x the Moore bound for N ranks of this degree (any topology of the degree)

    @property
    def total_us(self) -> float:
        return self.latency_us + max(self.bandwidth_us, self.cut_us)


def moore_diameter(n: int, degree: int) -> int:
    """Smallest D with 1 + d + ... + d^D >= n (direct-connect paper, Appendix B)."""
    reach, power, diameter = 1, 1, 0
    while reach < n:
        power *= degree
        reach += power
        diameter += 1
    return diameter


def step_diameter(topology: Topology) -> int:
    """Most rank-to-rank transfers any rank needs to reach another (switch paths count once)."""
    n = topology.nranks
    if topology.is_routed():
        return 1 if n > 1 else 0
    adj = [[b for b in range(n) if b != a and topology.route(a, b) is not None] for a in range(n)] \
        if topology.nswitches else [[b for b in topology.out_neighbors(a) if b < n] for a in range(n)]
    worst = 0
    for a in range(n):
        dist = {a: 0}
        queue = deque([a])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        worst = max(worst, max(dist.values()))
    return worst


def lower_bounds(kind: CollKind, topology: Topology, message_bytes: float, alpha_us: float = 0.0,
                 bandwidth: float | None = None) -> Bounds:
    """Lower bounds on any schedule of ``kind`` on ``topology`` (microseconds)."""
    n = topology.nranks
    k = phases(kind)
    rooted = kind in (CollKind.BROADCAST, CollKind.REDUCE)
    # a message needs at least diameter steps to cross the fabric; an all-to-all based
    # allreduce needs no more than that (direct-connect paper, Appendix B), so no factor 2 here
    latency = alpha_us * step_diameter(topology)
    degree = max(1, round(ports(topology)))
    moore = alpha_us * (1 if topology.is_routed() and n > 1 else moore_diameter(n, degree))
    ingress = [0.0] * topology.nnodes
    egress = [0.0] * topology.nnodes
    for lk in topology.links:
        cap = (bandwidth if bandwidth is not None else lk.bandwidth) * lk.multiplicity
        ingress[lk.dst] += cap
        egress[lk.src] += cap
    rate = BYTES_PER_US_PER_GBPS
    if rooted:  # every byte leaves the root (broadcast) or reaches it (reduce) once
        side = min(egress[:n]) if kind is CollKind.BROADCAST else min(ingress[:n])
        bw = message_bytes / (side * rate)
        return Bounds(latency, bw, bw, moore)
    volume = (n - 1) / n * message_bytes
    bw = k * volume / (min(ingress[:n]) * rate)
    # singleton cuts: a rank must send its shard out (egress) and get the others in (ingress)
    cut = k * max(volume / (min(ingress[:n]) * rate), message_bytes / n / (min(egress[:n]) * rate))
    return Bounds(latency, bw, cut, moore)


def allreduce_moore_bound(n: int, degree: int, message_bytes: float, alpha_us: float, gbps: float) -> float:
    """2 (T_L* + (N-1)/N M/B) with T_L* from the Moore bound; B in Gb/s (direct-connect paper, Table 4)."""
    bytes_per_us = gbps / 8 * BYTES_PER_US_PER_GBPS
    return 2 * (alpha_us * moore_diameter(n, degree) + (n - 1) / n * message_bytes / bytes_per_us)


def bus_bandwidth(kind: CollKind, nranks: int, message_bytes: float, time_us: float) -> tuple[float, float]:
    """nccl-tests' (algbw, busbw) in GB/s (NVIDIA/nccl-tests' performance notes)."""
    algbw = message_bytes / (time_us * BYTES_PER_US_PER_GBPS)
    if kind is CollKind.ALLREDUCE:
        factor = 2 * (nranks - 1) / nranks
    elif kind in (CollKind.BROADCAST, CollKind.REDUCE):
        factor = 1.0
    else:
        factor = (nranks - 1) / nranks
    return algbw, algbw * factor
