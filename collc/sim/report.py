"""``collc build --report``: what a schedule does to the fabric, step by step.

Generic figures for every algorithm (steps, directed links in use per step,
utilisation, busiest link's messages) plus whatever the algorithm's registration
adds through its ``report`` hook (MultiTree: tree heights).
"""

from __future__ import annotations

from collc.frontends.registry import get
from collc.ir.schedule import Schedule
from collc.sim.analysis import step_loads
from collc.sim.routing import Router
from collc.topology import Topology


def schedule_report(schedule: Schedule, topology: Topology) -> list[str]:
    loads = step_loads(schedule, Router(topology), float(schedule.collective.nchunksperloop))
    active = [s for s in loads if s.busiest is not None]
    nlinks = len(topology.links)
    lines = [f"report: {schedule.provenance.algorithm} {schedule.collective.kind.value} on {topology.name}: "
             f"{schedule.nsteps} steps ({len(active)} with traffic), {nlinks} directed links"]
    lines.append(f"{'step':>6s} {'links used':>10s} {'util':>6s} {'max msgs/link':>14s} {'chunks on busiest':>18s}")
    for s in loads:
        used = round(s.utilization * nlinks)
        lines.append(f"{s.step:6d} {used:10d} {s.utilization:6.2f} {s.max_messages:14.2f} {s.max_bytes:18.2f}")
    hook = get(schedule.provenance.algorithm).report
    if hook is not None:
        lines.extend(hook(topology, schedule))
    return lines
