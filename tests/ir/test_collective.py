"""Collective layouts, in-place aliasing, obligations and validation (collc.ir.collective)."""

from __future__ import annotations

import pytest

from collc.errors import CollcError, ScheduleError
from collc.ir.collective import Buffer, CollKind, Collective

I, O, S = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH
N, C = 4, 3


def make(kind: CollKind, n: int = N, c: int = C, inplace: bool = False) -> Collective:
    return Collective(kind, n, c, inplace, 0 if kind.rooted else None)


# ---------------------------------------------------------------------- layouts
@pytest.mark.parametrize("kind, i_chunks, o_chunks, per_loop", [
    (CollKind.ALLREDUCE, C, C, C),
    (CollKind.ALLGATHER, C, N * C, N * C),
    (CollKind.REDUCESCATTER, N * C, C, N * C),
    (CollKind.ALLTOALL, N * C, N * C, N * C),
    (CollKind.BROADCAST, C, C, C),
    (CollKind.REDUCE, C, C, C),
])
@pytest.mark.parametrize("inplace", [False, True])
def test_layout(kind: CollKind, i_chunks: int, o_chunks: int, per_loop: int, inplace: bool) -> None:
    coll = make(kind, inplace=inplace)
    assert coll.input_chunks == i_chunks
    assert coll.output_chunks == o_chunks
    assert coll.nchunksperloop == per_loop
    assert coll.buffer_size(I) == i_chunks
    assert coll.buffer_size(O) == o_chunks


def test_scratch_has_no_fixed_size() -> None:
    with pytest.raises(ScheduleError, match="scratch"):
        make(CollKind.ALLREDUCE).buffer_size(S)


@pytest.mark.parametrize("kind", list(CollKind))
def test_nchunksperloop_is_a_multiple_of_the_size_multiplier(kind: CollKind) -> None:
    coll = make(kind)
    mult = N if kind.size_multiplier_is_n else 1
    assert coll.nchunksperloop == mult * C


def test_kind_properties() -> None:
    assert {k for k in CollKind if k.reduces} == {CollKind.ALLREDUCE, CollKind.REDUCESCATTER, CollKind.REDUCE}
    assert {k for k in CollKind if k.rooted} == {CollKind.BROADCAST, CollKind.REDUCE}
    assert {k for k in CollKind if k.size_multiplier_is_n} == {CollKind.ALLGATHER, CollKind.REDUCESCATTER,
                                                              CollKind.ALLTOALL}


@pytest.mark.parametrize("text, kind", [
    ("allreduce", CollKind.ALLREDUCE), ("AllReduce", CollKind.ALLREDUCE), ("reducescatter", CollKind.REDUCESCATTER),
    ("reduce_scatter", CollKind.REDUCESCATTER), ("reduce-scatter", CollKind.REDUCESCATTER),
    (" alltoall ", CollKind.ALLTOALL), ("broadcast", CollKind.BROADCAST), ("reduce", CollKind.REDUCE),
])
def test_parse_spellings(text: str, kind: CollKind) -> None:
    assert CollKind.parse(text) is kind


def test_parse_unknown_lists_the_known_collectives() -> None:
    with pytest.raises(ScheduleError, match="unknown collective 'gossip'; known: allreduce, allgather"):
        CollKind.parse("gossip")
    with pytest.raises(ScheduleError, match="did you mean 'allreduce'"):
        CollKind.parse("allreduse")


def test_values_are_the_executor_spellings() -> None:
    assert [k.value for k in CollKind] == ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast",
                                           "reduce"]
    assert [b.value for b in Buffer] == ["i", "o", "s"]


# ---------------------------------------------------------------------- aliasing
@pytest.mark.parametrize("kind", list(CollKind))
def test_out_of_place_buffers_are_their_own(kind: CollKind) -> None:
    coll = make(kind)
    for r in range(N):
        for buf in Buffer:
            assert coll.alias(r, buf) == (buf, 0)
            assert coll.physical(r, buf, 2) == (buf, 2)


@pytest.mark.parametrize("r", range(N))
def test_allgather_in_place_input_is_a_slice_of_the_output(r: int) -> None:
    coll = make(CollKind.ALLGATHER, inplace=True)
    for k in range(C):
        assert coll.physical(r, I, k) == (O, r * C + k)
    for k in range(N * C):
        assert coll.physical(r, O, k) == (O, k)


@pytest.mark.parametrize("r", range(N))
def test_reducescatter_in_place_output_is_a_slice_of_the_input(r: int) -> None:
    coll = make(CollKind.REDUCESCATTER, inplace=True)
    for k in range(C):
        assert coll.physical(r, O, k) == (I, r * C + k)
    for k in range(N * C):
        assert coll.physical(r, I, k) == (I, k)


@pytest.mark.parametrize("kind", [CollKind.ALLREDUCE, CollKind.ALLTOALL, CollKind.BROADCAST, CollKind.REDUCE])
def test_single_buffer_collectives_in_place_output_is_input(kind: CollKind) -> None:
    coll = make(kind, inplace=True)
    for r in range(N):
        assert coll.alias(r, O) == (I, 0)
        assert coll.alias(r, I) == (I, 0)
        assert coll.physical(r, O, 1) == (I, 1)


@pytest.mark.parametrize("kind", list(CollKind))
def test_scratch_is_never_aliased(kind: CollKind) -> None:
    coll = make(kind, inplace=True)
    assert all(coll.physical(r, S, 5) == (S, 5) for r in range(N))


# ---------------------------------------------------------------------- obligations
def _as_sets(coll: Collective, rank: int) -> dict[int, tuple[int, set[int]]]:
    return {idx: (origin, set(ranks)) for idx, origin, ranks in coll.expected(rank)}


@pytest.mark.parametrize("r", range(N))
def test_expected_allreduce(r: int) -> None:
    assert _as_sets(make(CollKind.ALLREDUCE), r) == {k: (k, set(range(N))) for k in range(C)}


@pytest.mark.parametrize("r", range(N))
def test_expected_allgather(r: int) -> None:
    want = {q * C + k: (k, {q}) for q in range(N) for k in range(C)}
    assert _as_sets(make(CollKind.ALLGATHER), r) == want


@pytest.mark.parametrize("r", range(N))
def test_expected_reducescatter(r: int) -> None:
    assert _as_sets(make(CollKind.REDUCESCATTER), r) == {k: (r * C + k, set(range(N))) for k in range(C)}


@pytest.mark.parametrize("r", range(N))
def test_expected_alltoall(r: int) -> None:
    want = {q * C + k: (r * C + k, {q}) for q in range(N) for k in range(C)}
    assert _as_sets(make(CollKind.ALLTOALL), r) == want


@pytest.mark.parametrize("root", [0, 2])
def test_expected_broadcast(root: int) -> None:
    coll = Collective(CollKind.BROADCAST, N, C, False, root)
    for r in range(N):
        assert _as_sets(coll, r) == {k: (k, {root}) for k in range(C)}


@pytest.mark.parametrize("root", [0, 3])
def test_expected_reduce_only_binds_the_root(root: int) -> None:
    coll = Collective(CollKind.REDUCE, N, C, False, root)
    for r in range(N):
        want = {k: (k, set(range(N))) for k in range(C)} if r == root else {}
        assert _as_sets(coll, r) == want


def test_contributions_spell_out_the_obligations() -> None:
    coll = Collective(CollKind.ALLTOALL, 3, 1)
    assert coll.contributions(1) == {0: frozenset({(0, 1)}), 1: frozenset({(1, 1)}), 2: frozenset({(2, 1)})}
    coll = Collective(CollKind.ALLREDUCE, 3, 2)
    assert coll.contributions(2)[1] == frozenset({(0, 1), (1, 1), (2, 1)})


def test_initial_value_is_rank_and_chunk() -> None:
    assert make(CollKind.ALLREDUCE).initial(2, 1) == (2, 1)


def test_expected_is_compact_at_scale() -> None:
    coll = Collective(CollKind.ALLREDUCE, 1024, 1024)
    obligations = coll.expected(7)
    assert len(obligations) == 1024
    assert all(isinstance(ranks, range) for _, _, ranks in obligations)


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize("kind", [CollKind.BROADCAST, CollKind.REDUCE])
def test_rooted_collectives_need_a_root(kind: CollKind) -> None:
    with pytest.raises(ScheduleError, match="needs a root"):
        Collective(kind, N, 1)


@pytest.mark.parametrize("kind", [CollKind.BROADCAST, CollKind.REDUCE])
@pytest.mark.parametrize("root", [-1, N, 100])
def test_root_must_be_a_rank(kind: CollKind, root: int) -> None:
    with pytest.raises(ScheduleError, match=f"root in 0..{N - 1}"):
        Collective(kind, N, 1, False, root)


@pytest.mark.parametrize("kind", [CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLTOALL])
def test_unrooted_collectives_take_no_root(kind: CollKind) -> None:
    with pytest.raises(ScheduleError, match="takes no root"):
        Collective(kind, N, 1, False, 0)


def test_needs_a_rank_and_a_chunk() -> None:
    with pytest.raises(ScheduleError, match="at least one rank"):
        Collective(CollKind.ALLREDUCE, 0)
    with pytest.raises(ScheduleError, match="chunk factor"):
        Collective(CollKind.ALLREDUCE, 2, 0)


def test_errors_belong_to_the_hierarchy() -> None:
    assert issubclass(ScheduleError, CollcError)


def test_collective_is_frozen_and_describes_itself() -> None:
    coll = Collective(CollKind.REDUCE, 8, 2, True, 3)
    with pytest.raises(AttributeError):
        coll.nranks = 4  # type: ignore[misc]
    text = coll.describe()
    assert "reduce on 8 ranks" in text and "in-place" in text and "root 3" in text


@pytest.mark.parametrize("kind", list(CollKind))
def test_obligated_outputs_are_the_expected_indices(kind: CollKind) -> None:
    coll = Collective(kind, N, C, False, 1 if kind.rooted else None)
    for r in range(N):
        assert list(coll.obligated_outputs(r)) == sorted(idx for idx, _, _ in coll.expected(r))


@pytest.mark.parametrize("kind", list(CollKind))
def test_ranks_of_one_obligations_class_have_equal_obligations(kind: CollKind) -> None:
    coll = Collective(kind, N, C, False, 1 if kind.rooted else None)
    for r in range(N):
        for q in range(N):
            assert (coll.obligations_class(r) == coll.obligations_class(q)) == (coll.expected(r) == coll.expected(q))
