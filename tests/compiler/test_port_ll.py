"""LL across hosts (issue 28; docs/mscclpp-backend.md "Across hosts", docs/mscclpp.md "Packets across
hosts"): every family the registry applies to a multi-host topology builds Simple and LL plans whose
transfers between IPC domains are port channels and whose transfers inside one are memory channels, and
each passes the plan checker on every MSCCL++ release and ``collc check --topology``'s placement rules.

The whole matrix (``SPECS`` x every applicable family x allreduce/allgather/reducescatter x Simple/LL,
and the same on two nodes imported from an NCCL dump) runs with ``-m slow``; by default a representative
subset runs: ``FAST`` (every applicable family on ``a100:2x8`` in LL, ring on every topology in both
protocols).  A broken LL copy without its staging flushes fails with ``port-source-reuse``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collc.check.plan.check import check_plan
from collc.check.plan.releases import RELEASES
from collc.compiler.mscclpp.plan import BufferType, ChannelType, Gpu, LocalBuff, Op, OpName, Plan, Protocol
from collc.driver import compile_plan
from collc.ir.collective import CollKind
from collc.sim.plan_event import time_plan
from collc.topology import Topology, parse_spec
from tests._applicable import applicable
from tests._shared import have, missing, shared
from tests.compiler.test_port_channels import assert_placed

SPECS = ("a100:2x8", "a100:4x8", "mi250:8+8", "mi250:2")
KINDS = (CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER)
PROTOCOLS = (Protocol.SIMPLE, Protocol.LL)
#: Two nodes from the NCCL dump corpus: it holds no pair of dumps from two nodes of one cluster, so one
#: node's dump twice stands for two identical nodes (the importer makes each file one host).
DUMP = ("corpora", "nccl-topo", "yccl_8x-h800_topo.xml")


def _fast(alg: str, kind: CollKind, spec: str, proto: Protocol) -> bool:
    """The default subset (about 40 s of CPU): every family but ForestColl (slow to build) on a100:2x8 in
    LL and ring in Simple; ring on mi250:8+8 (LL, and Simple allreduce); one ring LL case on each
    32-rank topology."""
    if spec == "a100:2x8":
        return alg != "forestcoll" and (proto is Protocol.LL or alg == "ring")
    if spec == "mi250:8+8":
        return alg == "ring" and (proto is Protocol.LL or kind is CollKind.ALLREDUCE)
    return alg == "ring" and kind is CollKind.REDUCESCATTER and proto is Protocol.LL


def _cases() -> list[object]:
    out: list[object] = []
    for alg, kind, spec in applicable(SPECS, kinds=KINDS):
        for proto in PROTOCOLS:
            marks = () if _fast(alg, kind, spec, proto) else (pytest.mark.slow,)
            out.append(pytest.param(alg, kind, spec, proto, marks=marks,
                                    id=f"{alg}-{kind.value}-{spec}-{proto.value}"))
    return out


def _assert_across_hosts(topo: Topology, alg: str, kind: CollKind, proto: Protocol) -> Plan:
    built = compile_plan(topo, alg, kind, protocol=proto)      # checked on every release
    assert built.problems == []
    plan = built.plan
    assert_placed(plan, topo)
    for g in plan.gpus:
        for tb in g.threadblocks:
            port_ops = {op.name for op in tb.ops if op.channel_type is ChannelType.PORT}
            if proto is Protocol.LL:
                # packets cross hosts only as staged packets copied by rppkt; no ppkt on port channels
                # (its memory id misses the context's base) and no per-transfer signal
                assert port_ops <= {OpName.READ_PUT_PACKETS, OpName.FLUSH, OpName.SIGNAL, OpName.WAIT}
                _assert_staging_flushed(tb.ops)
            else:
                assert OpName.READ_PUT_PACKETS not in port_ops
    return plan


def _assert_staging_flushed(ops: tuple[Op, ...]) -> None:
    """Between a port rppkt and the next write of its staging chunks (or the tb's end), a flush names
    that channel."""
    pending: dict[int, set[int]] = {}           # channel -> staging chunks its proxy may still read
    for op in ops:
        if op.name is OpName.FLUSH:
            for c in op.channels[:len(op.dsts)]:
                pending.pop(c, None)
        elif op.name is OpName.READ_PUT_PACKETS and op.channel_type is ChannelType.PORT:
            s = op.srcs[0]
            assert isinstance(s, LocalBuff) and s.type is BufferType.SCRATCH
            pending.setdefault(op.channels[0], set()).update(range(s.index, s.index + s.size))
        elif op.name is OpName.COPY_PACKETS:
            d = op.dsts[0]
            assert isinstance(d, LocalBuff)
            written = set(range(d.index, d.index + d.size))
            assert not any(written & chunks for chunks in pending.values()), "staging rewritten before a flush"
    assert not pending, "a sending tb ends with an unflushed rppkt"


@pytest.mark.parametrize("alg, kind, spec, proto", _cases())
def test_every_family_builds_simple_and_ll_across_hosts(alg: str, kind: CollKind, spec: str,
                                                        proto: Protocol) -> None:
    _assert_across_hosts(parse_spec(spec), alg, kind, proto)


def _dump_cases() -> list[object]:
    if not have(*DUMP):
        return [pytest.param("ring", CollKind.ALLREDUCE, Protocol.LL, id="corpus-missing")]
    path = shared(*DUMP)
    out: list[object] = []
    for alg, kind, _ in applicable([f"nccl:{path},{path}"], kinds=KINDS):
        for proto in PROTOCOLS:
            fast = alg == "ring" and kind is CollKind.ALLREDUCE
            marks = () if fast else (pytest.mark.slow,)
            out.append(pytest.param(alg, kind, proto, marks=marks, id=f"{alg}-{kind.value}-{proto.value}"))
    return out


@pytest.mark.parametrize("alg, kind, proto", _dump_cases())
def test_two_nodes_imported_from_nccl_dumps(alg: str, kind: CollKind, proto: Protocol) -> None:
    if not have(*DUMP):
        pytest.skip(missing(*DUMP))
    path = shared(*DUMP)
    topo = parse_spec(f"nccl:{path},{path}")        # one file per node: two hosts, two IPC domains
    assert topo.nipc_domains == 2 and topo.nranks == 16
    _assert_across_hosts(topo, alg, kind, proto)


# ---------------------------------------------------------------- broken copies
def _drop_staging_flushes(plan: Plan) -> Plan:
    """``plan`` without the flushes that guard a staging region's reuse (those followed by a cpkt)."""
    def gpu(g: Gpu) -> Gpu:
        tbs = []
        for tb in g.threadblocks:
            ops = [op for k, op in enumerate(tb.ops)
                   if not (op.name is OpName.FLUSH and any(o.name is OpName.COPY_PACKETS for o in tb.ops[k + 1:k + 3]))]
            tbs.append(replace(tb, ops=tuple(ops)))
        return replace(g, threadblocks=tuple(tbs))
    return replace(plan, gpus=tuple(gpu(g) for g in plan.gpus))


def _ring_ll() -> Plan:
    return compile_plan(parse_spec("a100:2x8"), "ring", CollKind.ALLREDUCE, protocol=Protocol.LL).plan


def test_dropped_staging_flush_is_port_source_reuse() -> None:
    """Each sending end stages every transfer in one region: without the flush before the next cpkt, the
    proxy may still be copying the previous packets out of it (on every release)."""
    plan = _ring_ll()
    broken = _drop_staging_flushes(plan)
    assert broken != plan
    rep = check_plan(broken, "p", RELEASES)
    codes = {f.code for f in rep.errors()}
    assert codes == {"port-source-reuse"}
    msg = next(f.message for f in rep.errors())
    assert "(cpkt) overwrites gpu" in msg and "(rppkt) may still be reading through gpu" in msg
    assert all(not v["ok"] for v in rep.info["releases"].values())  # type: ignore[union-attr, index]


def test_final_flush_is_covered_by_the_acknowledgement() -> None:
    """The closing acknowledgement (a signal the receiver sends after its packets landed) also orders the
    proxy's last read before the kernel ends: dropping only the last flush of each tb is no finding."""
    plan = _ring_ll()

    def gpu(g: Gpu) -> Gpu:
        tbs = []
        for tb in g.threadblocks:
            last = max((k for k, op in enumerate(tb.ops) if op.name is OpName.FLUSH), default=-1)
            tbs.append(replace(tb, ops=tuple(op for k, op in enumerate(tb.ops) if k != last)))
        return replace(g, threadblocks=tuple(tbs))
    assert check_plan(replace(plan, gpus=tuple(gpu(g) for g in plan.gpus)), "p", RELEASES).ok


def test_ppkt_instead_of_rppkt_is_warned() -> None:
    """ppkt on a port channel copies the same packets, but names the local scratch without the executor
    context's memory-id base: the checker warns (ppkt-port), which is why the lowering uses rppkt."""
    plan = _ring_ll()

    def gpu(g: Gpu) -> Gpu:
        return replace(g, threadblocks=tuple(replace(tb, ops=tuple(
            replace(op, name=OpName.PUT_PACKETS) if op.name is OpName.READ_PUT_PACKETS else op for op in tb.ops))
            for tb in g.threadblocks))
    rep = check_plan(replace(plan, gpus=tuple(gpu(g) for g in plan.gpus)), "p", RELEASES)
    assert rep.ok and "ppkt-port" in {f.code for f in rep.findings}


# ---------------------------------------------------------------- timing
def test_ll_plan_across_hosts_is_timed() -> None:
    """The timing model runs cpkt (a local copy) and port rppkt (a proxy message of twice the bytes):
    at 1 MiB the LL plan moves twice the bytes over the network and is slower than Simple."""
    topo = parse_spec("a100:2x8")
    simple = compile_plan(topo, "ring", CollKind.ALLREDUCE).plan
    t_ll, t_simple = (time_plan(p, topo, [1 << 20], alpha_us=5.0)[0] for p in (_ring_ll(), simple))
    assert t_simple < t_ll < 2 * t_simple
