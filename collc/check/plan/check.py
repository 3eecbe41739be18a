"""``collc check`` for MSCCL++ execution plans: the static rules, then the executor simulation, once per
MSCCL++ release whose executor behaves differently on the plan (docs/mscclpp.md, "Port channels and releases").

>>> from collc.compiler.mscclpp.plan import Gpu, Plan, Protocol
>>> check_plan(Plan("p", "allreduce", Protocol.SIMPLE, True, (Gpu(0, 0, 1, 0, (), (), ()),))).codes()
['zero-chunks']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from collc.check.plan.report import PlanReport
from collc.check.plan.rules import check_rules
from collc.check.findings import Finding
from collc.check.plan.sim import PIPELINE_ITERATIONS, Simulator
from collc.check.plan.releases import RELEASES, Release
from collc.compiler.mscclpp.plan import ChannelType, OpName, Plan, PlanError
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


def _uses(plan: Plan) -> tuple[bool, bool, bool]:
    """Which release differences the plan can see: a port ``pwsf``, the packet-copy ops, ``reuse_resources``."""
    ops = {(op.name, op.channel_type) for g in plan.gpus for tb in g.threadblocks for op in tb.flat_ops()}
    pwsf = (OpName.PUT_WITH_SIGNAL_AND_FLUSH, ChannelType.PORT) in ops
    packet_copy = any(name in (OpName.REDUCE_COPY_PACKETS, OpName.REDUCE_COPY_SEND_PACKETS) for name, _ in ops)
    return pwsf, packet_copy, plan.reuse_resources


def _behaviour(uses: tuple[bool, bool, bool], release: Release) -> tuple[bool | None, ...]:
    """What of ``release`` matters to a plan with ``uses``: releases with equal keys give the same report,
    so the plan is simulated once per key (most plans, and all of collc's own, once in all)."""
    pwsf, packet_copy, reuse = uses
    return (release.pwsf_flushes if pwsf else None, release.knows_packet_copy if packet_copy else None,
            release.scratch_limit if reuse else None)


def check_plan(plan: Plan, path: str = "<plan>", releases: Sequence[Release] = RELEASES) -> PlanReport:
    """The report on ``plan`` for every release in ``releases`` at once: a finding that holds on some of
    them only is prefixed with their names, and ``info["releases"]`` holds each release's verdict."""
    by_key: dict[tuple[bool | None, ...], PlanReport] = {}
    reports: dict[Release, PlanReport] = {}
    uses = _uses(plan)
    for r in releases:
        key = _behaviour(uses, r)
        if key not in by_key:
            by_key[key] = check_plan_release(plan, path, r)
        reports[r] = by_key[key]
    return _merge(path, list(releases), reports)


def _merge(path: str, releases: list[Release], reports: dict[Release, PlanReport]) -> PlanReport:
    first = reports[releases[0]]
    out = PlanReport(path, info=dict(first.info))
    verdicts = {r.name: {"ok": reports[r].ok, "codes": reports[r].codes()} for r in releases}
    out.info["releases"] = verdicts
    holds: dict[Finding, list[Release]] = {}
    for r in releases:
        for f in reports[r].findings:
            if r not in holds.setdefault(f, []):
                holds[f].append(r)
    for f, rs in holds.items():
        if len(rs) == len(releases):
            out.findings.append(f)
        else:
            out.findings.append(Finding(f.code, f"[{', '.join(r.name for r in rs)}] {f.message}", f.severity))
    if len({(v["ok"], tuple(v["codes"])) for v in verdicts.values()}) > 1:  # type: ignore[arg-type]
        out.info["verdict"] = verdict_line(releases, reports)
    return out


def verdict_line(releases: list[Release], reports: dict[Release, PlanReport]) -> str:
    """``FAIL on v0.8, v0.9 (port-source-reuse: ...); PASS on v0.10``: releases grouped by equal verdicts."""
    parts: list[tuple[str, list[str]]] = []
    for r in releases:
        rep = reports[r]
        errs = rep.errors()
        text = "PASS on {}" if rep.ok else f"FAIL on {{}} ({errs[0].code}: {errs[0].message[:100]})"
        for said, names in parts:
            if said == text:
                names.append(r.name)
                break
        else:
            parts.append((text, [r.name]))
    return "; ".join(said.format(", ".join(names)) for said, names in parts)


def check_plan_release(plan: Plan, path: str, release: Release) -> PlanReport:
    """The report on ``plan`` for the executor of one release."""
    rep = PlanReport(path)
    rep.info.update({"name": plan.name, "collective": plan.collective, "protocol": plan.protocol.value,
                     "gpus": plan.nranks, "inplace": plan.inplace,
                     "threadblocks": sum(len(g.threadblocks) for g in plan.gpus),
                     "ops": sum(len(tb.flat_ops()) for g in plan.gpus for tb in g.threadblocks)})
    check_rules(plan, rep, release)
    blocking = sorted({f.code for f in rep.errors()} & BLOCKING)
    if blocking:
        rep.info["simulated"] = False
        rep.add("not-simulated", f"the executor simulation was skipped after {', '.join(blocking)} findings",
                "warning")
        return rep
    _check_simulation_size(plan, path)
    rep.info["simulated"] = True
    sim = Simulator(plan, release)
    rep.findings.extend(sim.run())
    if sim.root is not None:
        rep.info["root"] = sim.root
    if rep.ok:       # a clean launch: run the next one on the same buffers
        rep.findings.extend(sim.next_launch())
    return rep
