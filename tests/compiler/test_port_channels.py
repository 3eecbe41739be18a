"""Port channels in the MSCCL++ lowering (issue 28; docs/mscclpp-backend.md "Across hosts"): a transfer
between IPC domains goes over a port channel (``pws`` or ``put`` + ``signal``, then a ``flush`` naming the
channel), one inside a domain over a memory channel; the plans pass the checker on every MSCCL++ release,
and copies with the flush or a signal dropped fail with the finding that names it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collc.check.findings import FindingList
from collc.check.plan.placement import check_placement
from collc.check.plan.check import check_plan
from collc.check.plan.releases import RELEASES
from collc.compiler.mscclpp.plan import ChannelType, Gpu, Op, OpName, Plan, Threadblock
from collc.driver import compile_plan
from collc.errors import CollcError
from collc.ir.collective import CollKind
from collc.sim.plan_event import time_plan
from collc.topology import Topology, parse_spec

class _Findings(FindingList):
    def __init__(self) -> None:
        self.findings = []


KINDS = (CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER)


def _pairs(plan: Plan, kind: ChannelType) -> set[tuple[int, int]]:
    return {(g.id, p) for g in plan.gpus for p in g.peers(kind)}


def assert_placed(plan: Plan, topo: Topology) -> None:
    """Port channels exactly between IPC domains (and some), memory channels inside one, and
    ``collc check --topology``'s placement rules pass."""
    port, mem = _pairs(plan, ChannelType.PORT), _pairs(plan, ChannelType.MEMORY)
    assert port, "a schedule across hosts must cross them somewhere"
    assert all(topo.ipc_domain(a) != topo.ipc_domain(b) for a, b in port)
    assert all(topo.ipc_domain(a) == topo.ipc_domain(b) for a, b in mem)
    rep = _Findings()
    check_placement(plan, topo, rep)
    assert not rep.errors(), [f.message for f in rep.errors()]


def _assert_lowered(spec: str, algorithm: str, kind: CollKind) -> Plan:
    topo = parse_spec(spec)
    built = compile_plan(topo, algorithm, kind)
    assert built.problems == []
    plan = built.plan
    assert_placed(plan, topo)
    # no pwsf (it flushes from v0.10 only); every port put is followed by a flush with a destination
    for g in plan.gpus:
        for tb in g.threadblocks:
            names = [(op.name, op.channel_type) for op in tb.ops]
            assert (OpName.PUT_WITH_SIGNAL_AND_FLUSH, ChannelType.PORT) not in names
            for k, op in enumerate(tb.ops):
                if op.channel_type is ChannelType.PORT and op.name in (OpName.PUT, OpName.PUT_WITH_SIGNAL):
                    flush = next(o for o in tb.ops[k:] if o.name is OpName.FLUSH)
                    assert flush.dsts and flush.channels == op.channels[:1]
    return plan


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_ring_on_two_a100_hosts(kind: CollKind) -> None:
    _assert_lowered("a100:2x8", "ring", kind)


@pytest.mark.parametrize("spec, algorithm, kind", [
    ("dgx-a100:2", "ring", CollKind.ALLREDUCE),
    ("a100:2x4", "forestcoll", CollKind.ALLGATHER),
    ("a100:2x4", "multitree", CollKind.ALLREDUCE),
    ("a100:2x4", "double-binary-tree", CollKind.ALLREDUCE),
    ("a100:2x4", "recursive-halving-doubling", CollKind.REDUCESCATTER),
    ("ring:4", "ring", CollKind.ALLREDUCE),          # one host per rank: port channels only
])
def test_other_families_across_hosts(spec: str, algorithm: str, kind: CollKind) -> None:
    _assert_lowered(spec, algorithm, kind)


def test_one_host_plans_have_no_port_channels() -> None:
    plan = compile_plan(parse_spec("a100:1x8"), "ring", CollKind.ALLREDUCE).plan
    assert not _pairs(plan, ChannelType.PORT) and _pairs(plan, ChannelType.MEMORY)


def test_receivers_reduce_locally_over_port_channels() -> None:
    """Port channels cannot read remote memory: no get, rre or rres on them; reductions are local re."""
    plan = compile_plan(parse_spec("ring:4:hosts=2"), "ring", CollKind.ALLREDUCE).plan
    ops = {(op.name, op.channel_type) for g in plan.gpus for tb in g.threadblocks for op in tb.ops}
    assert (OpName.REDUCE, None) in ops and (OpName.WAIT, ChannelType.PORT) in ops
    assert not {n for n, _ in ops} & {OpName.GET, OpName.READ_REDUCE, OpName.READ_REDUCE_SEND}


# ---------------------------------------------------------------- broken copies
def _edit(plan: Plan, drop: OpName | None = None, pws_to_put: bool = False) -> Plan:
    """``plan`` with every port ``drop`` op removed (or every port pws turned into a put: its signal lost)."""
    def ops(tb: Threadblock) -> tuple[Op, ...]:
        out = []
        for op in tb.ops:
            if op.channel_type is ChannelType.PORT and op.name is drop:
                continue
            if pws_to_put and op.channel_type is ChannelType.PORT and op.name is OpName.PUT_WITH_SIGNAL:
                op = replace(op, name=OpName.PUT)
            out.append(op)
        return tuple(out)

    def gpu(g: Gpu) -> Gpu:
        return replace(g, threadblocks=tuple(replace(tb, ops=ops(tb)) for tb in g.threadblocks))
    return replace(plan, gpus=tuple(gpu(g) for g in plan.gpus))


def _codes_per_release(plan: Plan) -> set[str]:
    rep = check_plan(plan, "p", RELEASES)
    return {f.code for f in rep.errors()}


def test_dropped_flush_before_the_source_is_reused() -> None:
    """Recursive doubling overwrites a chunk it sent across hosts (the partner's sum lands there) before
    any reply orders the proxy's read: without the flush the proxy may still be reading it."""
    plan = compile_plan(parse_spec("a100:2x4"), "recursive-doubling", CollKind.ALLREDUCE).plan
    assert check_plan(plan, "p", RELEASES).ok
    assert "port-source-reuse" in _codes_per_release(_edit(plan, drop=OpName.FLUSH))


def test_closing_acknowledgement_also_orders_the_next_launch() -> None:
    """A ring allgather never rewrites a sent chunk in the launch, and each receiver's closing
    acknowledgement (a signal sent after the data landed, waited for before the kernel ends) orders the
    proxy's read before the next launch: the flush is redundant there, so dropping it is no finding."""
    plan = compile_plan(parse_spec("ring:4:hosts=2"), "ring", CollKind.ALLGATHER).plan
    assert _codes_per_release(_edit(plan, drop=OpName.FLUSH)) == set()


def test_dropped_signal_deadlocks() -> None:
    plan = compile_plan(parse_spec("ring:4:hosts=2"), "ring", CollKind.ALLGATHER).plan
    assert "deadlock" in _codes_per_release(_edit(plan, pws_to_put=True))


# ---------------------------------------------------------------- refusals
def test_non_contiguous_ipc_domains_are_refused() -> None:
    """MSCCL++ picks InfiniBand by rank / nranksPerIpcDomain: unequal boxes cannot be expressed."""
    with pytest.raises(CollcError, match="not equal contiguous blocks of ranks"):
        compile_plan(parse_spec("mi250:8+4"), "ring", CollKind.ALLGATHER)


# ---------------------------------------------------------------- timing
def test_port_plan_times_like_the_memory_plan_of_one_host() -> None:
    """The timing model runs port channels: a proxy message pays alpha and flows like a put; the
    ring on two hosts is as fast as the network link allows, and slower than on one host."""
    spec = "ring:4:hosts=2"
    plan = compile_plan(parse_spec(spec), "ring", CollKind.ALLGATHER).plan
    one = compile_plan(parse_spec("ring:4:hosts=1"), "ring", CollKind.ALLGATHER).plan
    t_port = time_plan(plan, parse_spec(spec), [1 << 20], alpha_us=1.0)[0]
    t_mem = time_plan(one, parse_spec("ring:4:hosts=1"), [1 << 20], alpha_us=1.0)[0]
    assert t_port > 0 and t_mem > 0
    assert abs(t_port - t_mem) / t_mem < 0.5
