"""Torus algorithms on a bidirectional ring: every distant transfer relayed by the ranks between.

Family page: docs/swing.md (section "On a ring").

A ``ring:N`` is the paper's 1-D torus (Swing NSDI'24 section 2.2: one rank per node, two
ports, bidirectional links) except that nothing forwards: GPUs joined in a ring exchange
data only with their two neighbours.  The torus algorithms (Swing, torus recursive
doubling) pair ranks up to N/2 hops apart, which a torus router would carry over the
minimal path.  :func:`relay` does that forwarding in the schedule itself: a transfer over
``h`` hops becomes ``h`` neighbour transfers along the shorter way round (ties: even
sources go up, odd sources go down, as Swing's even ranks add rho and odd ranks subtract
it), each intermediate rank holding the chunks in scratch for one sub-step.  Step ``s``
of the torus schedule becomes ``max(1, longest path of the step)`` sub-steps; every
transfer of the step reads its source at the first sub-step and writes its destination
at the last hop, so the step's semantics (reads see the state before the step, writes
land before the next) are unchanged.  The links a step loads are exactly those the
torus's minimal routing would load, so the congestion (Swing's Xi) is the same; the
store-and-forward adds latency, which ``--chunks`` pipelining hides.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> s = build_schedule("swing", parse_spec("ring:8"), CollKind.ALLREDUCE, inplace=True)
>>> s.nsteps, all(abs(t.src - t.dst) in (0, 1, 7) for t in s.transfers)
(10, True)
"""

from __future__ import annotations

from dataclasses import replace

from collc.errors import ScheduleError
from collc.ir.collective import Buffer
from collc.ir.schedule import Op, Schedule, Transfer
from collc.topology import Topology


def ring_path(src: int, dst: int, n: int) -> list[int]:
    """Ranks from ``src`` to ``dst`` along the shorter way round a ring of ``n``."""
    up = (dst - src) % n
    down = n - up
    step = 1 if up < down or (up == down and src % 2 == 0) else -1
    hops = min(up, down)
    return [(src + step * h) % n for h in range(hops + 1)]


def is_relay_ring(topology: Topology) -> bool:
    """True for a ``ring:N`` (not routed): torus algorithms run on it through :func:`relay`."""
    return topology.family == "ring" and not topology.is_routed()


def ring_refusal(topology: Topology, name: str) -> str | None:
    """Why ``name`` cannot relay on this ring (a one-way ring), or None."""
    if is_relay_ring(topology) and not topology.is_bidirectional():
        return (f"{name} exchanges with partners on both sides and {topology.name} has links one way only: "
                f"use ring:{topology.nranks} (bidirectional) or torus:{topology.nranks}")
    return None


def relay(schedule: Schedule, topology: Topology) -> Schedule:
    """The schedule with every transfer between non-neighbours relayed over the ring."""
    refusal = ring_refusal(topology, schedule.provenance.algorithm)
    if refusal is not None:
        raise ScheduleError(refusal)
    n = schedule.collective.nranks
    base_scratch = schedule.scratch_chunks
    out: list[Transfer] = []
    used = 0
    start = 0
    first_hop: dict[tuple[int, int], int] = {}
    for s in range(schedule.nsteps):
        transfers = schedule.step(s)
        paths = [ring_path(t.src, t.dst, n) if not t.is_local else [t.src] for t in transfers]
        length = max([1] + [len(p) - 1 for p in paths])
        free = [base_scratch] * n          # scratch is reused step by step (the lowering orders reuse)
        for t, path in zip(transfers, paths):
            if len(path) <= 2:
                out.append(replace(t, step=start))
                continue
            first_hop[(t.src, t.dst)] = path[1]
            buf, idx = t.src_buf, t.src_idx
            for h, (a, b) in enumerate(zip(path, path[1:])):
                if b == t.dst:
                    out.append(replace(t, step=start + h, src=a, src_buf=buf, src_idx=idx))
                    break
                slots = range(free[b], free[b] + t.count)
                free[b] += t.count
                out.append(Transfer(start + h, a, b, buf, idx, Buffer.SCRATCH, slots, Op.COPY, t.lane))
                buf, idx = Buffer.SCRATCH, slots
        used = max([used] + free)
        start += length
    sync = tuple(dict.fromkeys((a, first_hop.get((a, b), b)) for a, b in schedule.step_sync))
    pairs = tuple(p for p in schedule.tb_pairs if all(len(ring_path(p[0], q, n)) == 2 for q in p[2:]))
    return Schedule(schedule.collective, tuple(out), schedule.provenance, max(used, base_scratch), pairs, sync)
