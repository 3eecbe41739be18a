"""``collc check`` for MSCCL++ execution plans: the static rules, then the executor simulation.

>>> from collc.compiler.plan import Gpu, Plan, Protocol
>>> check_plan(Plan("p", "allreduce", Protocol.SIMPLE, True, (Gpu(0, 0, 1, 0, (), (), ()),))).codes()
['zero-chunks']
"""

from __future__ import annotations

from collc.check.plan_report import PlanReport
from collc.check.plan_rules import check_rules
from collc.check.plan_sim import Simulator
from collc.compiler.plan import Plan

# Static findings after which the simulation would index outside the plan or misread every op.
BLOCKING = frozenset({"plan-empty", "gpu-id", "tb-id", "zero-chunks", "chunk-counts", "index-range", "op-shape",
                      "op-fields", "channel-peer", "remote-buffer", "switch-group"})


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
    rep.info["simulated"] = True
    sim = Simulator(plan)
    rep.findings.extend(sim.run())
    if sim.root is not None:
        rep.info["root"] = sim.root
    if rep.ok:       # a clean launch: run the next one on the same buffers
        rep.findings.extend(sim.next_launch())
    return rep
