"""Hand-built Schedules and the symbolic Schedule verifier (collc.ir.schedule, collc.ir.verify)."""

from __future__ import annotations

import pytest

from collc.compiler.pipelining import split_chunks
from collc.compiler.transfers import TransferTable
from collc.errors import ScheduleError, VerifyError
from collc.frontends.registry import build_schedule
from collc.ir import verify
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Op, Provenance, Schedule, Transfer, make_slots
from collc.ir.verify import verify_schedule
from collc.topology import parse_spec

I, O, S = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH
COPY, REDUCE = Op.COPY, Op.REDUCE
PROV = Provenance("hand-made")


def t(step: int, src: int, dst: int, sbuf: Buffer, sidx: list[int], dbuf: Buffer, didx: list[int],
      op: Op = COPY) -> Transfer:
    return Transfer(step, src, dst, sbuf, make_slots(sidx), dbuf, make_slots(didx), op)


def allreduce2(*transfers: Transfer, inplace: bool = True) -> Schedule:
    return Schedule(Collective(CollKind.ALLREDUCE, 2, 1, inplace), transfers, PROV)


EXCHANGE = (t(0, 0, 1, O, [0], O, [0], REDUCE), t(0, 1, 0, O, [0], O, [0], REDUCE))


# ---------------------------------------------------------------------- accepted
def test_two_rank_allreduce_in_place_is_correct() -> None:
    verify_schedule(allreduce2(*EXCHANGE))


def test_two_rank_allreduce_out_of_place_is_correct() -> None:
    s = allreduce2(t(0, 0, 0, I, [0], O, [0]), t(0, 1, 1, I, [0], O, [0]), *(
        t(1, x.src, x.dst, O, [0], O, [0], REDUCE) for x in EXCHANGE), inplace=False)
    verify_schedule(s)
    assert s.nsteps == 2


def test_correct_schedule_on_its_topology() -> None:
    verify_schedule(allreduce2(*EXCHANGE), parse_spec("ring:2"))


def test_synchronous_step_semantics_swap() -> None:
    """Both transfers of a step read the state before the step: a swap in one step is fine."""
    coll = Collective(CollKind.ALLTOALL, 2, 1, inplace=True)
    s = Schedule(coll, (t(0, 0, 1, I, [1], I, [0]), t(0, 1, 0, I, [0], I, [1])), PROV)
    verify_schedule(s)


def test_allgather_in_place_reads_input_through_the_output() -> None:
    coll = Collective(CollKind.ALLGATHER, 2, 1, inplace=True)
    s = Schedule(coll, (t(0, 0, 1, I, [0], O, [0]), t(0, 1, 0, I, [0], O, [1])), PROV)
    verify_schedule(s)


# ---------------------------------------------------------------------- rejected
def test_missing_contribution() -> None:
    s = allreduce2(EXCHANGE[0])  # rank 1 never sends its chunk to rank 0
    with pytest.raises(VerifyError, match=r"rank 0 output chunk 0 holds chunk 0 of rank\(s\) \{0\}, "
                                          r"expected chunk 0 of rank\(s\) \{0, 1\}"):
        verify_schedule(s)


def test_a_later_rank_missing_what_the_first_holds_is_named() -> None:
    """Ranks whose outputs equal a passing rank's pass by one compare; one that differs is
    still checked chunk by chunk (here the last rank of a ring allgather misses a chunk)."""
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLGATHER)
    last = max(x.step for x in s.transfers if x.dst == 3)
    kept = tuple(x for x in s.transfers if not (x.dst == 3 and x.step == last))
    with pytest.raises(VerifyError, match=r"rank 3 output chunk \d+ holds uninitialized"):
        verify_schedule(Schedule(s.collective, kept, s.provenance))


def test_double_reduction() -> None:
    s = allreduce2(*EXCHANGE, t(1, 1, 0, I, [0], O, [0], REDUCE))
    with pytest.raises(VerifyError, match=r"step 1: rank 0 i\[0\] counts .* twice"):
        verify_schedule(s)


def test_double_reduction_names_the_repeated_rank() -> None:
    s = allreduce2(t(0, 0, 0, I, [0], O, [0]), t(0, 1, 1, I, [0], O, [0]),
                   t(1, 0, 1, I, [0], O, [0], REDUCE), t(1, 1, 0, I, [0], O, [0], REDUCE),
                   t(2, 1, 0, I, [0], O, [0], REDUCE), inplace=False)
    with pytest.raises(VerifyError, match=r"step 2: rank 0 o\[0\] counts the contribution of rank\(s\) \{1\} "
                                          r"to chunk 0 twice"):
        verify_schedule(s)


def test_two_copies_into_one_slot_in_a_step() -> None:
    s = allreduce2(t(0, 0, 1, I, [0], O, [0]), t(0, 1, 1, I, [0], O, [0]), inplace=False)
    with pytest.raises(VerifyError, match=r"step 0: two transfers write rank 1 o\[0\] in the same step"):
        verify_schedule(s)


def test_copy_and_reduce_into_one_slot_in_a_step() -> None:
    s = allreduce2(t(0, 0, 1, I, [0], O, [0]), t(0, 1, 1, I, [0], O, [0], REDUCE), inplace=False)
    with pytest.raises(VerifyError, match=r"step 0: rank 1 o\[0\] is copied and reduced into in the same step"):
        verify_schedule(s)
    # in the other order the reduce is seen first: still rejected
    s = allreduce2(t(0, 0, 1, I, [0], O, [0], REDUCE), t(0, 1, 1, I, [0], O, [0]), inplace=False)
    with pytest.raises(VerifyError, match="same step"):
        verify_schedule(s)


def test_reduce_into_uninitialized_slot() -> None:
    s = allreduce2(t(0, 0, 1, I, [0], O, [0], REDUCE), inplace=False)
    with pytest.raises(VerifyError, match=r"rank 1 o\[0\] is reduced into before it holds data"):
        verify_schedule(s)


def test_send_uninitialized_data_to_be_reduced() -> None:
    s = allreduce2(t(0, 0, 1, O, [0], I, [0], REDUCE), inplace=False)
    with pytest.raises(VerifyError, match="uninitialized"):
        verify_schedule(s)


def test_mixing_chunks() -> None:
    coll = Collective(CollKind.ALLREDUCE, 2, 2, inplace=True)
    s = Schedule(coll, (t(0, 0, 1, I, [0], I, [1], REDUCE),), PROV)
    with pytest.raises(VerifyError, match="different chunks"):
        verify_schedule(s)


def test_transfer_on_a_missing_link() -> None:
    coll = Collective(CollKind.ALLREDUCE, 4, 1, inplace=True)
    s = Schedule(coll, (t(0, 0, 2, I, [0], I, [0], REDUCE),), PROV)
    with pytest.raises(VerifyError, match=r"step 0: rank 0 sends to rank 2, but ring:4 has no link"):
        verify_schedule(s, parse_spec("ring:4"))


def test_switch_route_counts_as_a_link() -> None:
    coll = Collective(CollKind.BROADCAST, 4, 1, inplace=True, root=0)
    s = Schedule(coll, tuple(t(0, 0, d, I, [0], I, [0]) for d in (1, 2, 3)), PROV)
    verify_schedule(s, parse_spec("switch:4"))
    with pytest.raises(VerifyError, match="no link"):
        verify_schedule(s, parse_spec("ring:4"))


def test_rank_count_must_match_the_topology() -> None:
    with pytest.raises(VerifyError, match="schedule has 2 ranks but topology ring:4 has 4"):
        verify_schedule(allreduce2(*EXCHANGE), parse_spec("ring:4"))


# ---------------------------------------------------------------------- Schedule / Transfer invariants
def test_make_slots_prefers_ranges() -> None:
    assert make_slots([3, 4, 5]) == range(3, 6)
    assert make_slots(range(2, 4)) == range(2, 4)
    assert make_slots([0, 2]) == (0, 2)
    assert make_slots([5, 4]) == (5, 4)


def test_transfer_needs_equal_nonempty_index_lists() -> None:
    with pytest.raises(ScheduleError, match="equal, non-empty"):
        Transfer(0, 0, 1, I, range(0, 2), O, range(0, 1))
    with pytest.raises(ScheduleError, match="equal, non-empty"):
        Transfer(0, 0, 1, I, (), O, ())


def test_transfer_rejects_negative_values() -> None:
    with pytest.raises(ScheduleError, match="negative step"):
        Transfer(-1, 0, 1, I, range(1), O, range(1))
    with pytest.raises(ScheduleError, match="negative chunk"):
        Transfer(0, 0, 1, I, (-1,), O, (0,))


def test_local_transfer_onto_itself_is_rejected() -> None:
    with pytest.raises(ScheduleError, match="onto its own chunks"):
        Transfer(0, 1, 1, O, range(0, 2), O, range(1, 3))


def test_schedule_checks_ranks_and_buffer_bounds() -> None:
    with pytest.raises(ScheduleError, match="rank out of range"):
        allreduce2(t(0, 0, 2, I, [0], O, [0]))
    with pytest.raises(ScheduleError, match="beyond buffer o"):
        allreduce2(t(0, 0, 1, I, [0], O, [1]), inplace=False)
    with pytest.raises(ScheduleError, match="beyond buffer s"):
        allreduce2(t(0, 0, 1, I, [0], S, [0]))


def test_schedule_checks_tb_pair_hints() -> None:
    coll = Collective(CollKind.ALLGATHER, 3, 1, True)
    prov = Provenance("x")
    assert Schedule(coll, (), prov, tb_pairs=((0, 0, 1, 2), (0, 1, 1, 2), (1, 0, 0, 2))).tb_pairs
    for bad, message in [((0, 0, 3, 1), "ranks must be in 0..2"), ((0, 0, 0, 1), "not the rank itself"),
                         ((0, -1, 1, 2), "lane >= 0")]:
        with pytest.raises(ScheduleError, match=message):
            Schedule(coll, (), prov, tb_pairs=(bad,))
    with pytest.raises(ScheduleError, match="rank 0 lane 0 pairs peer 1 twice"):
        Schedule(coll, (), prov, tb_pairs=((0, 0, 1, 2), (0, 0, 1, 1)))


def test_schedule_orders_transfers_and_groups_steps() -> None:
    late = t(2, 1, 0, I, [0], S, [0])
    early = t(0, 1, 0, I, [0], S, [0])
    s = Schedule(Collective(CollKind.ALLREDUCE, 2, 1), (late, early), PROV, scratch_chunks=1)
    assert s.transfers == (early, late)
    assert s.nsteps == 3
    assert s.step(0) == (early,) and s.step(1) == () and s.step(2) == (late,)
    assert s.lanes == 1


def test_transfer_properties() -> None:
    x = t(0, 1, 1, I, [0, 1], S, [2, 3], REDUCE)
    assert x.count == 2 and x.is_local and x.op is REDUCE
    assert x.sort_key() == (0, 0, 1, 1, 0, 2)


# ---------------------------------------------------------------------- whole-transfer steps
def _variants(s: Schedule) -> list[Schedule]:
    """The schedule and broken copies: one transfer dropped, one reduce doubled, one copy doubled."""
    out = [s]
    xs = list(s.transfers)
    for k in (0, len(xs) // 3, len(xs) - 1):
        out.append(Schedule(s.collective, tuple(xs[:k] + xs[k + 1:]), s.provenance, s.scratch_chunks))
    for op in (REDUCE, COPY):
        picked = [x for x in xs if x.op is op]
        if picked:
            out.append(Schedule(s.collective, tuple(xs + [picked[len(picked) // 2]]), s.provenance,
                                s.scratch_chunks))
    return out


def _outcome(s: Schedule) -> str | None:
    try:
        verify_schedule(s, data_check="exact")
    except VerifyError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("algorithm,spec", [("recursive-halving-doubling", "hypercube:3"), ("swing", "torus:4x4"),
                                            ("ring", "ring:4")])
def test_sliced_steps_reach_the_chunk_by_chunk_verdicts(algorithm: str, spec: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A step applied a transfer at a time (list slices) gives the same verdict and message
    as the chunk-by-chunk pass, on correct schedules and on broken ones."""
    topo = parse_spec(spec)
    base = build_schedule(algorithm, topo, CollKind.ALLREDUCE, True, None, None, gpus_per_file=topo.nranks,
                          chunks=1, instances=1)
    for s in _variants(base) + _variants(split_chunks(TransferTable.of(base), 4).schedule()):
        monkeypatch.setattr(verify, "SLICED", 10 ** 9)
        slow = _outcome(s)
        monkeypatch.setattr(verify, "SLICED", 0)
        assert _outcome(s) == slow
    assert _outcome(base) is None and _outcome(_variants(base)[1]) is not None
