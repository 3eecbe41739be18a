"""The lowering passes, one section each (collc.compiler.*), plus the pipeline driver."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from collc.compiler.msccl.dependencies import build_program
from collc.compiler.msccl.fusion import fuse
from collc.limits import Dialect
from collc.compiler.pipeline import PASS_NAMES, LowerOptions, enforce_limits, lower
from collc.driver import lower_checked
from collc.compiler.pipelining import cap_counts, split_chunks
from collc.compiler.msccl.program import Program, Proto, Step, StepType
from collc.compiler.scratch import Kind, OpPlan, expand
from collc.compiler.transfers import TransferTable
from collc.compiler.msccl.threadblocks import TbPlan, assign_channels, assign_threadblocks, order_key, rank_threadblocks
from collc.errors import LoweringError, NodeBudgetError
from collc.frontends.registry import build_schedule
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Op, Provenance, Schedule, Transfer
from collc.ir.verify import verify_schedule
from collc.topology import parse_spec

I, O, S = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH


def sched(alg: str, spec: str, kind: CollKind, inplace: bool = False, root: int | None = None) -> Schedule:
    return build_schedule(alg, parse_spec(spec), kind, inplace, root, None)


SCHEDULES = {
    "ring-allreduce-ring4": lambda: sched("ring", "ring:4", CollKind.ALLREDUCE, True),
    "ring-allgather-torus": lambda: sched("ring", "torus:2x3", CollKind.ALLGATHER),
    "ring-reducescatter-bidir": lambda: build_schedule("ring", parse_spec("ring:6"), CollKind.REDUCESCATTER, False,
                                                       None, {"bidirectional": "true"}),
    "rd-allreduce-switch4": lambda: sched("recursive-doubling", "switch:4", CollKind.ALLREDUCE, True),
    "rhd-allreduce-switch8": lambda: sched("recursive-halving-doubling", "switch:8", CollKind.ALLREDUCE),
    "direct-alltoall-switch4": lambda: sched("direct", "switch:4", CollKind.ALLTOALL),
    "direct-allreduce-switch8": lambda: sched("direct", "switch:8", CollKind.ALLREDUCE),
    "binomial-reduce-switch5": lambda: sched("binomial-tree", "switch:5", CollKind.REDUCE, False, 3),
}


def split(s: Schedule, parts: int = 1, instances: int = 1) -> Schedule:
    """split_chunks on ``s``'s transfer table, read back as a Schedule."""
    return split_chunks(TransferTable.of(s), parts, instances).schedule()


def cap(s: Schedule, max_cnt: int) -> Schedule:
    return cap_counts(TransferTable.of(s), max_cnt).schedule()


def plan_of(s: Schedule) -> OpPlan:
    return expand(TransferTable.of(s))


def tb_plan(s: Schedule, groups: int = 1, pair: bool = True) -> TbPlan:
    plan = plan_of(s)
    return assign_threadblocks(plan, assign_channels(plan, groups), pair)


def program(s: Schedule, proto: Proto = Proto.SIMPLE) -> Program:
    return build_program(fuse(tb_plan(s)), proto, s.collective.inplace, "t")


# ======================================================================= pipelining: split_chunks
@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("parts, instances", [(2, 1), (3, 1), (1, 2), (2, 2)])
def test_split_chunks_multiplies_the_chunk_factor(name: str, parts: int, instances: int) -> None:
    s = SCHEDULES[name]()
    out = split(s, parts, instances)
    m = parts * instances
    assert out.collective.chunk_factor == s.collective.chunk_factor * m
    assert out.collective.kind is s.collective.kind and out.collective.inplace == s.collective.inplace
    assert out.nsteps == s.nsteps
    remote = [t for t in s.transfers if not t.is_local]
    local = [t for t in s.transfers if t.is_local]
    assert len(out.transfers) == m * len(remote) + len(local)  # local copies stay whole
    assert out.lanes == s.lanes * instances or not remote
    assert out.scratch_chunks == s.scratch_chunks * m
    assert sum(t.count for t in out.transfers) == m * sum(t.count for t in s.transfers)
    verify_schedule(out)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_split_chunks_keeps_transfers_contiguous(name: str) -> None:
    s = SCHEDULES[name]()
    out = split(s, 3, 2)
    contiguous = all(isinstance(t.src_idx, range) and isinstance(t.dst_idx, range) for t in s.transfers)
    if contiguous:
        assert all(isinstance(t.src_idx, range) and isinstance(t.dst_idx, range) for t in out.transfers)


def test_split_chunks_maps_chunk_x_to_its_sub_chunks() -> None:
    coll = Collective(CollKind.ALLTOALL, 2, 2)
    s = Schedule(coll, (Transfer(0, 0, 1, I, (0, 3), O, (1, 2)),), Provenance("t"))
    out = split(s, 2)
    assert [(list(t.src_idx), list(t.dst_idx)) for t in out.transfers] == [([0, 1], [2, 3]), ([6, 7], [4, 5])]


def test_split_chunks_is_pure_and_identity_for_one() -> None:
    s = SCHEDULES["ring-allreduce-ring4"]()
    before = s.transfers
    table = TransferTable.of(s)
    cols = table.cols.copy()
    assert split_chunks(table, 1, 1) is table
    split_chunks(table, 2, 2)
    assert s.transfers == before and s.collective.chunk_factor == 4
    assert np.array_equal(table.cols, cols) and table.schedule().transfers == before


def test_split_chunks_records_the_parameters() -> None:
    out = split(SCHEDULES["ring-allreduce-ring4"](), 2, 3)
    assert ("chunks", "2") in out.provenance.params and ("instances", "3") in out.provenance.params


@pytest.mark.parametrize("parts, instances", [(0, 1), (1, 0), (-1, 2)])
def test_split_chunks_rejects_bad_factors(parts: int, instances: int) -> None:
    with pytest.raises(LoweringError, match="at least|>= 1"):
        split(SCHEDULES["ring-allreduce-ring4"](), parts, instances)


# ======================================================================= pipelining: cap_counts
def allgather2(c: int) -> Schedule:
    """2-rank out-of-place allgather moving whole blocks of ``c`` chunks."""
    blk = [range(0, c), range(c, 2 * c)]
    return Schedule(Collective(CollKind.ALLGATHER, 2, c), (
        Transfer(0, 0, 0, I, range(c), O, blk[0]), Transfer(0, 1, 1, I, range(c), O, blk[1]),
        Transfer(0, 0, 1, I, range(c), O, blk[0]), Transfer(0, 1, 0, I, range(c), O, blk[1])), Provenance("t"))


def test_cap_counts_splits_large_transfers() -> None:
    s = allgather2(10)
    verify_schedule(s)
    assert {t.count for t in s.transfers} == {10}
    out = cap(s, 4)
    assert max(t.count for t in out.transfers) <= 4
    assert sorted({t.count for t in out.transfers}) == [3, 4]
    assert sum(t.count for t in out.transfers) == sum(t.count for t in s.transfers)
    assert all(isinstance(t.src_idx, range) and isinstance(t.dst_idx, range) for t in out.transfers)
    assert out.nsteps == s.nsteps
    verify_schedule(out)


def test_cap_counts_is_identity_when_within_the_cap() -> None:
    s = SCHEDULES["rhd-allreduce-switch8"]()
    table = TransferTable.of(s)
    assert cap_counts(table, 71) is table


def test_cap_counts_keeps_the_cnt_limit_in_lowering() -> None:
    prog = lower(allgather2(150))
    cnts = [st.cnt for g in prog.gpus for t in g.tbs for st in t.steps if st.type is not StepType.NOP]
    assert max(cnts) <= 71 and max(cnts) == 50


# ======================================================================= scratch: expand
def _ops(plan: OpPlan, rank: int, kind: Kind) -> list[object]:
    return [op for op in plan.ops if op.rank == rank and op.kind is kind]


def test_expand_gathers_a_non_contiguous_source_into_scratch() -> None:
    coll = Collective(CollKind.ALLTOALL, 2, 2)
    s = Schedule(coll, (Transfer(0, 0, 1, I, (0, 2), O, range(0, 2)),), Provenance("t"))
    plan = plan_of(s)
    assert plan.scratch == (2, 0)
    copies = _ops(plan, 0, Kind.COPY)
    assert [(c.srcbuf, c.srcoff, c.dstbuf, c.dstoff, c.cnt, c.phase) for c in copies] == [  # type: ignore[attr-defined]
        ("i", 0, "s", 0, 1, 0), ("i", 2, "s", 1, 1, 0)]
    (send,) = _ops(plan, 0, Kind.SEND)
    assert (send.srcbuf, send.srcoff, send.cnt, send.peer, send.phase) == ("s", 0, 2, 1, 1)  # type: ignore[attr-defined]
    (recv,) = _ops(plan, 1, Kind.RECV)
    assert (recv.dstbuf, recv.dstoff, recv.cnt, recv.peer) == ("o", 0, 2, 0)  # type: ignore[attr-defined]


def test_expand_scatters_a_non_contiguous_destination_from_scratch() -> None:
    coll = Collective(CollKind.ALLTOALL, 2, 2)
    s = Schedule(coll, (Transfer(0, 0, 1, I, range(0, 2), O, (1, 3), Op.REDUCE),), Provenance("t"))
    plan = plan_of(s)
    assert plan.scratch == (0, 2)
    (recv,) = _ops(plan, 1, Kind.RECV)
    assert (recv.dstbuf, recv.dstoff, recv.cnt, recv.reduce, recv.phase) == ("s", 0, 2, False, 2)  # type: ignore[attr-defined]
    scatter = _ops(plan, 1, Kind.REDUCE)
    assert [(c.srcbuf, c.srcoff, c.dstbuf, c.dstoff, c.phase) for c in scatter] == [  # type: ignore[attr-defined]
        ("s", 0, "o", 1, 3), ("s", 1, "o", 3, 3)]


def test_expand_same_step_exchange_receives_into_scratch() -> None:
    """Recursive doubling: both partners send and receive the same slot in one step."""
    s = SCHEDULES["rd-allreduce-switch4"]()
    plan = plan_of(s)
    recvs = [op for op in plan.ops if op.kind is Kind.RECV]
    assert recvs and all(op.dstbuf == "s" and not op.reduce for op in recvs)
    assert all(n >= s.nsteps for n in plan.scratch)  # fresh scratch per exchange
    for r in recvs:
        applied = [op for op in plan.ops if op.rank == r.rank and op.step == r.step and op.kind is Kind.REDUCE]
        assert [(op.srcbuf, op.phase) for op in applied] == [("s", 3)]
        sends = [op for op in plan.ops if op.rank == r.rank and op.step == r.step and op.kind is Kind.SEND]
        assert all(op.phase < r.phase < applied[0].phase for op in sends)


def test_expand_without_clash_receives_in_place() -> None:
    plan = plan_of(SCHEDULES["ring-allreduce-ring4"]())
    assert plan.scratch == (0, 0, 0, 0)
    assert all(op.dstbuf == "i" for op in plan.ops if op.kind is Kind.RECV)  # in place: o is i
    assert {op.reduce for op in plan.ops if op.kind is Kind.RECV} == {True, False}


def test_expand_resolves_in_place_aliasing() -> None:
    plan = plan_of(sched("ring", "ring:4", CollKind.ALLGATHER, True))
    assert {op.srcbuf for op in plan.ops if op.kind is Kind.SEND} == {"o"}
    assert not any(op.kind is Kind.COPY for op in plan.ops)  # own block is already in place


def test_expand_rejects_a_local_op_racing_its_step() -> None:
    coll = Collective(CollKind.ALLREDUCE, 2, 2)
    # rank 0 copies i[0] while rank 1 overwrites that very chunk in the same step
    s = Schedule(coll, (Transfer(0, 0, 0, I, (0,), O, (0,)), Transfer(0, 1, 0, I, (1,), I, (0,))),
                 Provenance("t"))
    with pytest.raises(LoweringError, match="step 0: the local copy on rank 0"):
        plan_of(s)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_expand_ops_are_contiguous_and_ordered(name: str) -> None:
    plan = plan_of(SCHEDULES[name]())
    for op in plan.ops:
        assert op.cnt >= 1
        assert (op.kind in (Kind.SEND, Kind.RECV)) == (op.peer >= 0)
        assert op.phase == {Kind.SEND: 1, Kind.RECV: 2}.get(op.kind, op.phase)
    sends = sorted(op.key for op in plan.ops if op.kind is Kind.SEND)
    recvs = sorted(op.key for op in plan.ops if op.kind is Kind.RECV)
    assert sends == recvs  # each message has both ends


# ======================================================================= threadblocks
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("pair", [True, False])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_threadblocks_have_one_peer_per_direction(name: str, pair: bool, groups: int) -> None:
    s = split(SCHEDULES[name](), 2)
    tbp = tb_plan(s, groups, pair)
    assert len(tbp.tbs) == s.collective.nranks
    for rank, tbs in enumerate(tbp.tbs):
        seen_send: set[tuple[int, int]] = set()
        seen_recv: set[tuple[int, int]] = set()
        for t in tbs:
            assert t.send != rank and t.recv != rank
            for c in t.ops:
                assert c.op.rank == rank and c.chan == t.chan
                if c.op.kind is Kind.SEND:
                    assert c.op.peer == t.send
                elif c.op.kind is Kind.RECV:
                    assert c.op.peer == t.recv
            if t.send >= 0:
                assert (t.send, t.chan) not in seen_send
                seen_send.add((t.send, t.chan))
            if t.recv >= 0:
                assert (t.recv, t.chan) not in seen_recv
                seen_recv.add((t.recv, t.chan))
            keys = [order_key(c.op) for c in t.ops]
            assert keys == sorted(keys)
            assert 0 <= t.chan < tbp.nchannels
        assert sum(len(t.ops) for t in tbs) == sum(op.rank == rank for op in tbp.plan.ops)


def test_channels_follow_lanes_and_groups() -> None:
    s = split(SCHEDULES["ring-allreduce-ring4"](), 2, 2)
    plan = plan_of(s)
    chops = [c for rank in assign_channels(plan, 2) for c in rank]
    assert {c.chan for c in chops} == {0, 1, 2, 3}
    assert all(c.chan // 2 == c.op.lane for c in chops)
    assert tb_plan(s, 2).nchannels == 4


def test_pairing_puts_forwarding_in_one_tb() -> None:
    tbs = tb_plan(SCHEDULES["ring-allreduce-ring4"]()).tbs
    assert [(t.send, t.recv) for t in tbs[0]] == [(1, 3)]
    unpaired = tb_plan(SCHEDULES["ring-allreduce-ring4"](), pair=False).tbs
    assert sorted((t.send, t.recv) for t in unpaired[0]) == [(-1, 3), (1, -1)]


def test_tb_pair_hints_decide_the_pairing() -> None:
    base = SCHEDULES["ring-allreduce-ring4"]()
    # ask rank 0 to pair its receive from 3 with nothing it sends to: no pair; rank 1 as the ring does
    s = replace(base, tb_pairs=((0, 0, 3, 2), (1, 0, 0, 2)))
    plan = plan_of(s)
    chops = assign_channels(plan, 1)
    r0 = rank_threadblocks(0, chops[0], True, {(0, 3): 2})
    assert sorted((t.send, t.recv) for t in r0) == [(-1, 3), (1, -1)]
    r1 = rank_threadblocks(1, chops[1], True, {(0, 0): 2})
    assert [(t.send, t.recv) for t in r1] == [(2, 0)]
    assert lower(s, LowerOptions()).gpus[0].tbs != lower(base).gpus[0].tbs


def test_split_chunks_copies_tb_pair_hints_into_every_instance() -> None:
    s = replace(SCHEDULES["ring-allreduce-ring4"](), tb_pairs=((1, 0, 0, 2),))
    assert split(s, 2, 3).tb_pairs == ((1, 0, 0, 2), (1, 1, 0, 2), (1, 2, 0, 2))
    assert cap(split(s, 2, 1), 1).tb_pairs == ((1, 0, 0, 2),)
    # a hint may name a lane no transfer uses: it still counts, so instances do not collide
    s = replace(SCHEDULES["ring-allreduce-ring4"](), tb_pairs=((1, 0, 0, 2), (1, 1, 0, 2)))
    assert s.lanes == 2
    assert split(s, 1, 2).tb_pairs == ((1, 0, 0, 2), (1, 1, 0, 2), (1, 2, 0, 2), (1, 3, 0, 2))


# ======================================================================= fusion
RING4_TYPES = ["s", "rrs", "rrs", "rrcs", "rcs", "rcs", "r"]


def test_fusion_ring_allreduce_in_place() -> None:
    fused = fuse(tb_plan(SCHEDULES["ring-allreduce-ring4"]()))
    for rank_tbs in fused.tbs:
        assert [[item.type.value for item in t.items] for t in rank_tbs] == [RING4_TYPES]


def test_fusion_ring_allreduce_out_of_place() -> None:
    prog = lower(sched("ring", "ring:4", CollKind.ALLREDUCE, False))
    for g in prog.gpus:
        remote = [t for t in g.tbs if t.send >= 0 or t.recv >= 0]
        assert [[st.type.value for st in t.steps if st.type is not StepType.NOP] for t in remote] == [RING4_TYPES]


def test_fusion_lowered_ring_allreduce_on_ring4() -> None:
    prog = lower(SCHEDULES["ring-allreduce-ring4"]())
    for g in prog.gpus:
        assert [[st.type.value for st in t.steps] for t in g.tbs] == [RING4_TYPES]


def test_fusion_keeps_plain_ops_without_forwarding() -> None:
    fused = fuse(tb_plan(SCHEDULES["direct-alltoall-switch4"]()))
    types = {item.type.value for rank_tbs in fused.tbs for t in rank_tbs for item in t.items}
    assert types <= {"s", "r", "cpy"}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_fusion_preserves_the_ops(name: str) -> None:
    tbp = tb_plan(SCHEDULES[name]())
    fused = fuse(tbp)
    for before, after in zip(tbp.tbs, fused.tbs):
        for t0, t1 in zip(before, after):
            assert (t0.send, t0.recv, t0.chan) == (t1.send, t1.recv, t1.chan)
            n_fused = sum(item.type in (StepType.RECV_COPY_SEND, StepType.RECV_REDUCE_SEND,
                                        StepType.RECV_REDUCE_COPY_SEND) for item in t1.items)
            assert len(t1.items) + n_fused == len(t0.ops)


# ======================================================================= dependencies: build_program
def _assert_dependency_encoding(prog: Program) -> None:
    for g in prog.gpus:
        assert [t.id for t in g.tbs] == list(range(len(g.tbs)))
        for t in g.tbs:
            pending = False
            for pos, st in enumerate(t.steps):
                assert st.s == pos
                if st.depid >= 0:
                    assert st.depid != t.id, "no same-tb dependency"
                    target = g.tbs[st.depid].steps[st.deps]
                    assert target.hasdep == 1, f"gpu {g.id} tb {t.id} step {pos} targets a step without hasdep"
                else:
                    assert st.deps == -1
                if st.type is StepType.NOP:
                    assert st.depid >= 0, "a nop always carries a dependency"
                    pending = True
                else:
                    if pending:
                        assert st.depid >= 0, "the real step after nops carries a dependency itself"
                    pending = False
            assert not pending, "a tb never ends with a nop"


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_build_program_dependency_encoding(name: str) -> None:
    _assert_dependency_encoding(program(SCHEDULES[name]()))


def test_build_program_inserts_nops_for_several_dependencies() -> None:
    prog = program(SCHEDULES["direct-allreduce-switch8"]())
    nops = [(g.id, t.id, pos) for g in prog.gpus for t in g.tbs for pos, st in enumerate(t.steps)
            if st.type is StepType.NOP]
    assert nops, "direct allreduce needs steps with several dependencies"
    for gid, tid, pos in nops:
        steps = prog.gpu(gid).tbs[tid].steps
        nxt = next(st for st in steps[pos:] if st.type is not StepType.NOP)
        run = [st for st in steps[pos:steps.index(nxt)]]
        targets = {(st.depid, st.deps) for st in run} | {(nxt.depid, nxt.deps)}
        assert len({d for d, _ in targets}) == len(targets), "one dependency per target tb"
    _assert_dependency_encoding(prog)


def test_build_program_header_and_buffers() -> None:
    s = SCHEDULES["rhd-allreduce-switch8"]()
    prog = build_program(fuse(tb_plan(s)), Proto.LL, False, "name", 10, 20)
    assert (prog.ngpus, prog.coll, prog.nchunksperloop, prog.proto) == (8, "allreduce", 8, Proto.LL)
    assert (prog.inplace, prog.outofplace, prog.min_bytes, prog.max_bytes, prog.name) == (0, 1, 10, 20, "name")
    assert all((g.i_chunks, g.o_chunks) == (8, 8) for g in prog.gpus)
    inplace = program(SCHEDULES["rd-allreduce-switch4"]())
    assert all((g.i_chunks, g.o_chunks) == (1, 0) for g in inplace.gpus)
    assert all(g.s_chunks > 0 for g in inplace.gpus)


def test_build_program_in_place_allgather_uses_only_the_output() -> None:
    prog = program(sched("ring", "ring:4", CollKind.ALLGATHER, True))
    assert all((g.i_chunks, g.o_chunks) == (0, 4) for g in prog.gpus)
    assert {st.srcbuf for g in prog.gpus for t in g.tbs for st in t.steps} == {"o"}


# ======================================================================= pipeline and limits
def test_pipeline_runs_the_named_passes_and_times_them() -> None:
    timings: dict[str, float] = {}
    prog = lower(SCHEDULES["rhd-allreduce-switch8"](), LowerOptions(verify_between=True, timings=timings))
    assert set(timings) == set(PASS_NAMES)
    assert prog.ngpus == 8


def test_pipeline_name_and_window() -> None:
    prog = lower(SCHEDULES["binomial-reduce-switch5"](), LowerOptions(min_bytes=1, max_bytes=2))
    assert prog.name == "binomial-tree-reduce-n5-root3"
    assert (prog.min_bytes, prog.max_bytes) == (1, 2)
    assert lower(SCHEDULES["binomial-reduce-switch5"](), LowerOptions(name="x")).name == "x"


def _with_tb_steps(prog: Program, steps: tuple[Step, ...]) -> Program:
    g0 = prog.gpus[0]
    t0 = replace(g0.tbs[0], steps=steps)
    return replace(prog, gpus=(replace(g0, tbs=(t0,) + g0.tbs[1:]),) + prog.gpus[1:])


@pytest.fixture(scope="module")
def ring_program() -> Program:
    return lower(SCHEDULES["ring-allreduce-ring4"]())


def test_enforce_limits_accepts_a_lowered_program(ring_program: Program) -> None:
    for d in Dialect:
        enforce_limits(ring_program, d)


def test_enforce_limits_tbs_per_gpu(ring_program: Program) -> None:
    g0 = ring_program.gpus[0]
    many = tuple(replace(g0.tbs[0], id=k, send=-1, recv=-1) for k in range(65))
    prog = replace(ring_program, gpus=(replace(g0, tbs=many),) + ring_program.gpus[1:])
    enforce_limits(prog, Dialect.EXECUTOR)
    with pytest.raises(LoweringError, match=r"gpu 0: 65 tbs exceed the rccl limit of 64 per GPU"):
        enforce_limits(prog, Dialect.RCCL)


def test_enforce_limits_cnt(ring_program: Program) -> None:
    steps = (replace(ring_program.gpus[0].tbs[0].steps[0], cnt=72),) + ring_program.gpus[0].tbs[0].steps[1:]
    with pytest.raises(LoweringError, match=r"gpu 0 tb 0 step 0: cnt 72 exceeds 71"):
        enforce_limits(_with_tb_steps(ring_program, steps), Dialect.EXECUTOR)


def test_enforce_limits_channels(ring_program: Program) -> None:
    prog = replace(ring_program, nchannels=33)
    with pytest.raises(LoweringError, match="33 channels exceed the executor limit of 32"):
        enforce_limits(prog, Dialect.EXECUTOR)
    enforce_limits(prog, Dialect.RCCL)


def test_enforce_limits_offsets(ring_program: Program) -> None:
    prog = replace(ring_program, gpus=(replace(ring_program.gpus[0], s_chunks=40000),) + ring_program.gpus[1:])
    with pytest.raises(LoweringError, match=r"gpu 0: .*int16 offset limit 32767"):
        enforce_limits(prog, Dialect.EXECUTOR)


def test_enforce_limits_node_budget(ring_program: Program) -> None:
    g0 = ring_program.gpus[0]
    tbs = tuple(replace(g0.tbs[0], id=k, send=-1, recv=-1) for k in range(600))  # 600 * 8 nodes
    prog = replace(ring_program, gpus=(replace(g0, tbs=tbs),) + ring_program.gpus[1:])
    with pytest.raises(NodeBudgetError, match=r"gpu 0: 4805 parser nodes \(<algo>, 4 <gpu>, 600 <tb>, 4200 "
                                              r"<step>\); the runtime's parser loads at most 4095 per rank"):
        enforce_limits(prog, Dialect.EXECUTOR)


def test_enforce_limits_tbs_per_channel(ring_program: Program) -> None:
    g0 = ring_program.gpus[0]
    tbs = tuple(replace(g0.tbs[0], id=k, send=1 + k, recv=-1, steps=()) for k in range(33))
    prog = replace(ring_program, ngpus=40, gpus=(replace(g0, tbs=tbs),) + ring_program.gpus[1:])
    with pytest.raises(LoweringError, match=r"gpu 0: chan 0 has 33 send tbs, above 32 per channel"):
        enforce_limits(prog, Dialect.EXECUTOR)


def test_enforce_limits_depid_int8(ring_program: Program) -> None:
    g0 = ring_program.gpus[0]
    blank = replace(g0.tbs[0], send=-1, recv=-1, steps=())
    tbs = [replace(blank, id=k) for k in range(129)]
    tbs[0] = replace(tbs[0], steps=(Step(0, StepType.NOP, "i", -1, "o", -1, 0, 128, 0, 0),))
    prog = replace(ring_program, gpus=(replace(g0, tbs=tuple(tbs)),) + ring_program.gpus[1:])
    with pytest.raises(LoweringError, match=r"gpu 0 tb 128: a dependency targets tb id above 127"):
        enforce_limits(prog, Dialect.EXECUTOR)


def test_enforce_limits_gpu_count(ring_program: Program) -> None:
    with pytest.raises(LoweringError, match="1025 ranks"):
        enforce_limits(replace(ring_program, ngpus=1025), Dialect.EXECUTOR)


def test_lower_spreads_a_busy_connection_over_channels() -> None:
    s = sched("ring", "ring:2", CollKind.ALLGATHER, True)
    prog = lower(s, LowerOptions(chunks=100))
    assert prog.nchannels > 1
    assert max(len(t.steps) for g in prog.gpus for t in g.tbs) <= 64


def test_lower_names_gpu_tb_and_limit_when_nothing_fits() -> None:
    s = sched("ring", "ring:2", CollKind.ALLGATHER, True)
    with pytest.raises(LoweringError, match=r"gpu \d+ tb \d+ needs \d+ steps, above the executor limit of 64 per tb"):
        lower(s, LowerOptions(chunks=2100))


def test_lower_fits_local_copies_of_a_pipelined_schedule() -> None:
    s = sched("ring", "ring:4", CollKind.ALLGATHER, False)  # one local copy i -> o per rank
    prog = lower(s, LowerOptions(chunks=65))
    assert max(len(t.steps) for g in prog.gpus for t in g.tbs) <= 64


# ---------------------------------------------------------------------- pipelined programs must not hang
def _lowered_ok(s: Schedule, **kw: Any) -> list[str]:
    rep = lower_checked(s, LowerOptions(**kw))[2]   # pairing is decided where compile_xml decides it
    return [f"[{f.code}] {f.message[:200]}" for f in rep.errors()]


@pytest.mark.parametrize("chunks", [2, 3, 5])
def test_pipelined_ring_without_pairing_passes(chunks: int) -> None:
    assert _lowered_ok(sched("ring", "ring:4", CollKind.ALLGATHER), chunks=chunks, pair=False) == []


@pytest.mark.parametrize("chunks", [3, 5])
def test_pipelined_ring_with_pairing_passes(chunks: int) -> None:
    assert _lowered_ok(sched("ring", "ring:4", CollKind.ALLGATHER), chunks=chunks) == []
