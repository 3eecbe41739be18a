"""``collc check`` for MSCCL++ execution plans: the static rules, then the executor simulation.

>>> from collc.compiler.plan import Gpu, Plan, Protocol
>>> check_plan(Plan("p", "allreduce", Protocol.SIMPLE, True, (Gpu(0, 0, 1, 0, (), (), ()),))).codes()
['zero-chunks']
"""

from __future__ import annotations

import math

from collc.check.plan_report import PlanReport
from collc.check.plan_rules import check_rules
from collc.check.plan_sim import PIPELINE_ITERATIONS, Simulator
from collc.compiler.plan import ChannelType, Plan, PlanError
from collc.inputs import MAX_PLAN_THREADBLOCKS, MAX_SLOTS

# Static findings after which the simulation would index outside the plan or misread every op.
BLOCKING = frozenset({"plan-empty", "gpu-id", "tb-id", "zero-chunks", "chunk-counts", "index-range", "op-shape",
                      "op-fields", "channel-peer", "remote-buffer", "switch-group"})


def _check_simulation_size(plan: Plan, path: str) -> None:
    """Refuse a plan whose simulation would not fit in memory: too many actors for its vector clocks,
    or more than ``MAX_SLOTS`` sub-chunk slots (each chunk is cut into the least common multiple of the
    plan's thread-block group sizes, x 2 for pipelines)."""
    threads = sum(2 * len(g.threadblocks) + 1 + len(g.peers(ChannelType.PORT)) for g in plan.gpus)
    if threads > 2 * MAX_PLAN_THREADBLOCKS:
        raise PlanError(f"{path}: the executor simulation would follow {threads} actors (2 per threadblock, 1 per GPU "
                        f"and port channel), more than {2 * MAX_PLAN_THREADBLOCKS}: its vector clocks hold "
                        "actors^2 entries")
    sizes = {op.tbg_info.tbg_size for g in plan.gpus for tb in g.threadblocks for op in tb.flat_ops()
             if op.tbg_info is not None}
    parts = 1
    for size in sorted(sizes):
        parts = math.lcm(parts, size)
        if parts > MAX_SLOTS:
            break
    chunks = sum(g.input_chunks + g.output_chunks + 2 * g.scratch_chunks for g in plan.gpus)
    if parts * PIPELINE_ITERATIONS * chunks > MAX_SLOTS:
        raise PlanError(f"{path}: tbg_size values {sorted(sizes)[:8]} cut each of its {chunks} buffer chunks into "
                        f"{parts if parts <= MAX_SLOTS else 'more than ' + str(MAX_SLOTS)} parts, more than the "
                        f"{MAX_SLOTS} (2^28) chunk slots collc can check in memory")


def check_plan(plan: Plan, path: str = "<plan>") -> PlanReport:
    rep = PlanReport(path)
    rep.info.update({"name": plan.name, "collective": plan.collective, "protocol": plan.protocol.value,
                     "gpus": plan.nranks, "inplace": plan.inplace,
                     "threadblocks": sum(len(g.threadblocks) for g in plan.gpus),
                     "ops": sum(len(tb.flat_ops()) for g in plan.gpus for tb in g.threadblocks)})
    check_rules(plan, rep)
    blocking = sorted({f.code for f in rep.errors()} & BLOCKING)
    if blocking:
        rep.info["simulated"] = False
        rep.add("not-simulated", f"the executor simulation was skipped after {', '.join(blocking)} findings",
                "warning")
        return rep
    _check_simulation_size(plan, path)
    rep.info["simulated"] = True
    sim = Simulator(plan)
    rep.findings.extend(sim.run())
    if sim.root is not None:
        rep.info["root"] = sim.root
    if rep.ok:       # a clean launch: run the next one on the same buffers
        rep.findings.extend(sim.next_launch())
    return rep
