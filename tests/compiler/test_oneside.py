"""The MSCCL++ lowering (Schedule -> one-sided Plan): every family on small topologies, both
protocols, determinism, the passes' invariants and the refusals.

Each plan is printed, read back (``collc.backends.mscclpp``), checked by ``collc check``'s plan
checker (``collc.check.plan.check``: reader rules and limits, executor simulation with races)
and run by the small symbolic executor of ``tests/compiler/plan_exec.py`` (which shares no code
with the lowering or the checker): no deadlock, the collective's postcondition, no double
reduction, and every signal and semaphore consumed by the end of the launch.
"""

from __future__ import annotations

from collections import Counter

import pytest

from collc.backends.mscclpp import parse_plan, write_plan
from collc.check.plan.check import check_plan
from collc.compiler.mscclpp.lower import (MAX_ENTRIES_PER_OP, MAX_OPS_PER_TB, MAX_RUNS_PER_PIECE, PlanOptions, Role,
                                    assign_slots, build_actions, dependencies, insert_nops, lower_plan,
                                    pair_threadblocks, split_pieces)
from collc.compiler.mscclpp.plan import BufferType, ChannelType, LocalBuff, Op, OpName, Protocol
from collc.errors import LoweringError
from collc.frontends.registry import algorithms, build_schedule, get
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Op as XferOp
from collc.ir.schedule import Provenance, Schedule, Transfer
from collc.topology import parse_spec
from tests.compiler.plan_exec import run_plan

KINDS = (CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER)
# small topologies first: each family runs on the first two (per collective) it applies to
CANDIDATES = ["ring:4", "switch:4", "torus:2x2", "circulant:5:1,2", "hypercube:3", "torus:3x3", "torus:2x4", "ring:5", "kautz:2,2", "dfc:2x3",
              "circulant:8:1,3", "bigraph:2x4", "switch:6", "mesh:3x3", "complete:4", "torus:4x4", "dfc:3x3",
              "circulant:12:1,5", "bigraph:2x8", "kautz:3,2", "torus:6x3"]


def _applies(name: str, kind: CollKind, spec: str) -> bool:
    topo = parse_spec(spec)
    return get(name).refusal(topo, Collective(kind, topo.nranks, 1, False, None)) is None


def _matrix() -> list[tuple[str, CollKind, str]]:
    out = []
    for alg in algorithms():
        for kind in KINDS:
            if kind not in alg.collectives:
                continue
            specs = [s for s in CANDIDATES if _applies(alg.name, kind, s)][:2]
            out += [(alg.name, kind, s) for s in specs]
    return out


MATRIX = _matrix()


# the plan checker needs about 10 s on these (vector clocks over ~14k ops): in the slow run only
HEAVY = {("hamiltonian-rings", "torus:4x4")}


# Plans already judged, by their text and collective: several matrix cases lower to the same
# bytes (a ring schedule does not depend on whether the ring is a ring or a switch), and the
# checker and the executor are functions of the plan alone, so each distinct plan runs once.
_JUDGED: set[tuple[str, Collective, bool]] = set()


def _check(s: Schedule, opts: PlanOptions = PlanOptions(), checker: bool = True) -> str:
    plan = lower_plan(s, opts)
    text = write_plan(plan)
    coll = s.collective if opts.chunks * opts.instances == 1 else \
        Collective(s.collective.kind, s.collective.nranks, s.collective.chunk_factor * opts.chunks * opts.instances,
                   s.collective.inplace, s.collective.root)
    if (text, coll, checker) in _JUDGED or (text, coll, True) in _JUDGED:
        return text
    back = parse_plan(text, "<test>")
    assert back == plan
    assert back.inplace is s.collective.inplace
    if checker:
        rep = check_plan(back)
        assert rep.ok, [f"[{f.code}] {f.message[:300]}" for f in rep.errors()][:3]
    problems = run_plan(back, coll)
    assert not problems, problems[:3]
    for g in back.gpus:
        assert g.input_chunks > 0 and g.output_chunks > 0
        for tb in g.threadblocks:
            assert len(tb.flat_ops()) <= MAX_OPS_PER_TB
            assert len(tb.channel_list(ChannelType.MEMORY)) <= 16 and len(tb.buffer_list(ChannelType.MEMORY)) <= 16
            for op in tb.ops:
                assert len(op.srcs) <= MAX_ENTRIES_PER_OP and len(op.dsts) <= MAX_ENTRIES_PER_OP
                assert all(b.size > 0 for b in op.srcs + op.dsts)
                assert op.reduce_op is None or op.reduce_op.value == "sum"
    _JUDGED.add((text, coll, checker))
    return text


def test_every_family_with_a_reduction_or_gather_is_in_the_matrix() -> None:
    families = {a.name for a in algorithms() if a.collectives & set(KINDS)}
    counted = Counter(name for name, _, _ in MATRIX)
    assert families == set(counted)
    specs = {name: {s for n, _, s in MATRIX if n == name} for name in families}
    assert all(len(v) >= 2 for v in specs.values()), {k: v for k, v in specs.items() if len(v) < 2}


@pytest.mark.parametrize("name, kind, spec", MATRIX, ids=[f"{n}-{k.value}-{s}" for n, k, s in MATRIX])
def test_family_plan_runs(name: str, kind: CollKind, spec: str) -> None:
    s = build_schedule(name, parse_spec(spec), kind, False)
    _check(s, checker=(name, spec) not in HEAVY)


@pytest.mark.slow
@pytest.mark.parametrize("name, spec", sorted(HEAVY))
def test_heavy_family_plans_pass_the_checker(name: str, spec: str) -> None:
    for kind in sorted(get(name).collectives & set(KINDS), key=lambda k: k.value):
        _check(build_schedule(name, parse_spec(spec), kind, False))


@pytest.mark.parametrize("name, kind, spec", [
    ("ring", CollKind.ALLREDUCE, "ring:4"), ("multitree", CollKind.ALLGATHER, "torus:3x3"),
    ("recursive-halving-doubling", CollKind.REDUCESCATTER, "hypercube:3"), ("swing", CollKind.ALLREDUCE, "torus:2x4"),
    ("binomial-tree", CollKind.BROADCAST, "switch:4"), ("direct", CollKind.ALLTOALL, "switch:4")])
def test_ll_protocol(name: str, kind: CollKind, spec: str) -> None:
    s = build_schedule(name, parse_spec(spec), kind, False, 0 if kind.rooted else None)
    text = _check(s, PlanOptions(protocol=Protocol.LL))
    assert '"signal"' in text     # only the end-of-launch acknowledgement
    names = {op.name for g in parse_plan(text).gpus for tb in g.threadblocks for op in tb.ops}
    assert OpName.PUT_PACKETS in names and OpName.PUT not in names


@pytest.mark.parametrize("kind", [CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER])
def test_in_place(kind: CollKind) -> None:
    """In-place plans (the matrix builds every family out of place; ``_check`` asserts the flag)."""
    s = build_schedule("ring", parse_spec("ring:4"), kind, True)
    plan = parse_plan(_check(s))
    assert plan.inplace is True


def test_chunks_and_instances() -> None:
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, True)
    text = _check(s, PlanOptions(chunks=2, instances=2))
    plan = parse_plan(text)
    assert plan.gpus[0].input_chunks == 16
    # two lanes: each rank has channels to its successor and from its predecessor in each lane
    # (a paired tb beyond 64 ops splits its connections into groups, each with its own channel)
    per_peer = Counter(plan.gpus[0].peers(ChannelType.MEMORY))
    assert set(per_peer) == {1, 3} and per_peer[1] == per_peer[3] and per_peer[1] % 2 == 0


def test_many_chunks_spread_over_more_threadblocks() -> None:
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, True)
    plain = lower_plan(s)
    piped = parse_plan(_check(s, PlanOptions(chunks=8), checker=False))
    assert max(len(g.threadblocks) for g in piped.gpus) > max(len(g.threadblocks) for g in plain.gpus)


def test_deterministic_bytes() -> None:
    s = build_schedule("multitree", parse_spec("torus:3x3"), CollKind.ALLREDUCE, True)
    again = build_schedule("multitree", parse_spec("torus:3x3"), CollKind.ALLREDUCE, True)
    assert write_plan(lower_plan(s)) == write_plan(lower_plan(again))


def test_message_size_window() -> None:
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLGATHER, False)
    plan = lower_plan(s, PlanOptions(min_bytes=1024, max_bytes=1 << 20))
    assert (plan.min_message_size, plan.max_message_size) == (1024, 1 << 20)
    # default: the largest size whose byte offsets fit the executor's 32 bits (output: 4 chunks)
    assert lower_plan(s).max_message_size == (2 ** 32 - 1) // 4 * 4
    with pytest.raises(LoweringError, match="32 bits"):
        lower_plan(s, PlanOptions(max_bytes=1 << 33))


# ---------------------------------------------------------------------- passes
def _sched(transfers: list[Transfer], kind: CollKind = CollKind.ALLREDUCE, n: int = 1, c: int = 2) -> Schedule:
    return Schedule(Collective(kind, n, c, False), tuple(transfers), Provenance("test"))


def test_slots_are_private_per_transfer() -> None:
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, True)
    items, scratch = assign_slots(s)
    taken: set[tuple[int, int]] = set()
    for it in items:
        if it.transfer.is_local:
            continue
        mine = {(it.transfer.dst, it.slot + j) for j in range(it.transfer.count)}
        assert not (mine & taken)
        taken |= mine
    assert scratch == (6, 6, 6, 6)        # 2 (n - 1) chunks received per rank


def test_channels_pair_up() -> None:
    plan = lower_plan(build_schedule("direct", parse_spec("switch:4"), CollKind.ALLTOALL, False))
    for g in plan.gpus:
        peers = g.peers(ChannelType.MEMORY)
        for tb in g.threadblocks:
            for ch in tb.channel_list(ChannelType.MEMORY):
                p = peers[ch]
                k = peers[:ch].count(p)
                other = plan.gpus[p].peers(ChannelType.MEMORY)
                assert [i for i, q in enumerate(other) if q == g.id][k] is not None
        # one tb per channel: a channel's device handle is never shared
        used = [c for tb in g.threadblocks for c in tb.channel_list(ChannelType.MEMORY)]
        assert len(used) == len(set(used)) == len(peers)


def test_semaphores_balance_and_go_forward() -> None:
    s = build_schedule("recursive-halving-doubling", parse_spec("switch:4"), CollKind.ALLREDUCE, True)
    items, _ = assign_slots(s)
    for acts in build_actions(s.collective, items, {}):
        sync = dependencies(acts)
        released = Counter(i for ids in sync.releases.values() for i in ids)
        acquired = Counter(i for ids in sync.acquires.values() for i in ids)
        assert released == acquired and len(released) == sync.count


def test_a_ring_forwards_on_one_threadblock() -> None:
    """Pass ``pairing``: the receive from the predecessor and the send to the successor share a tb,
    so the ring's receive-reduce-send needs no semaphore; the ops stay in step order."""
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, True)
    items, _ = assign_slots(s)
    acts = build_actions(s.collective, items, {})[0]
    host = pair_threadblocks(acts)
    assert host == {(Role.RECV, 3, 0, 0): (Role.SEND, 1, 0, 0)}
    gpu = lower_plan(s).gpus[0]
    ring_tb = gpu.threadblocks[0]
    assert ring_tb.channel_list(ChannelType.MEMORY) == (0, 1)       # to 1 (sends), from 3 (receives)
    names = [op.name.value for op in ring_tb.ops]
    assert "sem_acquire" not in names and "sem_release" not in names     # in place: nothing else to order
    assert names[-2:] == ["signal", "wait"]     # acknowledge the receive end before waiting as sender
    k = names.index("re")
    assert names[k - 2:k + 5] == ["wait", "nop", "re", "nop", "put", "nop", "signal"]


def test_pairing_never_costs_threadblocks() -> None:
    """Where a paired tb would exceed 64 ops the lowering unpairs or splits, whichever is smaller."""
    s = build_schedule("forestcoll", parse_spec("ring:4"), CollKind.ALLGATHER, False)
    plan = lower_plan(s)
    tbs = [len(g.threadblocks) for g in plan.gpus]
    assert sum(tbs) <= 46        # the count before pairing existed
    assert all(len(tb.flat_ops()) <= MAX_OPS_PER_TB for g in plan.gpus for tb in g.threadblocks)


def test_nops_guard_data_after_wait_and_before_signal() -> None:
    wait = Op(OpName.WAIT, channel_ids=(0,), channel_type=ChannelType.MEMORY)
    signal = Op(OpName.SIGNAL, channel_ids=(0,), channel_type=ChannelType.MEMORY)
    a = Op(OpName.COPY, src_buff=(LocalBuff(BufferType.SCRATCH, 0, 1),), dst_buff=(LocalBuff(BufferType.OUTPUT, 0, 1),))
    b = Op(OpName.COPY, src_buff=(LocalBuff(BufferType.SCRATCH, 1, 1),), dst_buff=(LocalBuff(BufferType.OUTPUT, 1, 1),))
    c = Op(OpName.COPY, src_buff=(LocalBuff(BufferType.OUTPUT, 0, 1),), dst_buff=(LocalBuff(BufferType.OUTPUT, 2, 1),))
    names = [o.name.value for o in insert_nops([wait, a, b, c, signal])]
    assert names == ["wait", "nop", "copy", "copy", "nop", "copy", "nop", "signal"]


def test_pieces_cut_scattered_transfers() -> None:
    t = Transfer(0, 0, 1, Buffer.INPUT, tuple(range(0, 80, 2)), Buffer.OUTPUT, tuple(range(0, 80, 2)))
    s = Schedule(Collective(CollKind.ALLREDUCE, 2, 80, False), (t,), Provenance("test"))
    cut = split_pieces(s)
    assert [x.count for x in cut.transfers] == [MAX_RUNS_PER_PIECE, MAX_RUNS_PER_PIECE, 8]


def test_local_transfers_reading_what_another_writes_in_one_step_are_refused() -> None:
    swap = [Transfer(0, 0, 0, Buffer.OUTPUT, (0,), Buffer.OUTPUT, (1,)),
            Transfer(0, 0, 0, Buffer.OUTPUT, (1,), Buffer.OUTPUT, (0,))]
    with pytest.raises(LoweringError, match="same step"):
        lower_plan(_sched(swap))


def test_two_reductions_into_one_chunk_in_one_step_are_ordered() -> None:
    """direct reducescatter: every peer's contribution is reduced into one chunk in one step, each
    on its own receiving tb; the dependencies pass orders them (a semaphore), the matrix case
    ``direct-reducescatter-switch:4`` runs the plan through the checker and the executor."""
    s = build_schedule("direct", parse_spec("switch:4"), CollKind.REDUCESCATTER, False)
    items, _ = assign_slots(s)
    acts = build_actions(s.collective, items, {})[0]
    into = Counter((a.order[0], c) for a in acts if a.tb[0] is Role.RECV for c in a.writes)
    assert max(into.values()) == 3
    assert dependencies(acts).count >= 2


def test_reduce_is_refused() -> None:
    s = build_schedule("binomial-tree", parse_spec("switch:4"), CollKind.REDUCE, False, 0)
    with pytest.raises(LoweringError, match="does not emit reduce"):
        lower_plan(s)


def test_local_reduce_uses_re() -> None:
    t = [Transfer(0, 0, 0, Buffer.INPUT, (0,), Buffer.OUTPUT, (0,)),
         Transfer(1, 0, 0, Buffer.INPUT, (0,), Buffer.OUTPUT, (0,), XferOp.REDUCE)]
    plan = lower_plan(Schedule(Collective(CollKind.ALLREDUCE, 1, 1, False), tuple(t), Provenance("test")))
    assert [o.name for o in plan.gpus[0].threadblocks[0].ops] == [OpName.COPY, OpName.NOP, OpName.REDUCE]
