"""The numeric Schedule check agrees with the exact one and catches the same mistakes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collc.compiler.transfers import TransferTable
from collc.errors import VerifyError
from collc.frontends.registry import build_schedule
from collc.ir import verify
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Op, Schedule, Transfer
from collc.ir.symbolic import NumericExpectation
from collc.ir.verify import transfer_columns, verify_columns, verify_schedule
from collc.topology import parse_spec
from tests._applicable import applicable

CASES = applicable(("ring:8", "torus:4x4", "switch:8", "hypercube:3", "kautz:2,2"), root=1)


@pytest.mark.parametrize("name, kind, spec", CASES)
def test_numeric_accepts_what_exact_accepts(name: str, kind: CollKind, spec: str) -> None:
    topo = parse_spec(spec)
    s = build_schedule(name, topo, kind, inplace=False, root=1 if kind.rooted else None)
    verify_schedule(s, topo, data_check="exact")
    verify_schedule(s, topo, data_check="numeric")


@pytest.fixture(params=[1, 10**9], ids=["slices", "flat"])
def step_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a test with every step of runs moved with slices, then with every step's chunks flat."""
    monkeypatch.setattr(verify, "LONG", request.param)


STEP_PATH_CASES = [c for name, spec in (("swing", "torus:4x4"), ("ring", "ring:8"), ("multitree", "torus:4x4"),
                                         ("direct", "switch:4"))
                   for c in applicable([spec], names=[name], kinds=[CollKind.ALLREDUCE, CollKind.REDUCESCATTER,
                                                                    CollKind.ALLGATHER])]


@pytest.mark.parametrize("name, kind, spec", STEP_PATH_CASES)
def test_both_step_paths_accept_correct_schedules(name: str, spec: str, kind: CollKind, step_path: None) -> None:
    s = build_schedule(name, parse_spec(spec), kind, inplace=False)
    verify_schedule(s, data_check="numeric")


def _ring() -> Schedule:
    return build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, inplace=True)


def test_numeric_catches_a_missing_and_a_doubled_contribution(step_path: None) -> None:
    s = _ring()
    first_reduce = next(i for i, t in enumerate(s.transfers) if t.op is Op.REDUCE)
    dropped = list(s.transfers)
    dropped[first_reduce] = replace(dropped[first_reduce], op=Op.COPY)
    with pytest.raises(VerifyError, match="numeric check"):
        verify_schedule(Schedule(s.collective, tuple(dropped), s.provenance), data_check="numeric")
    doubled = list(s.transfers) + [replace(s.transfers[first_reduce], step=s.nsteps)]
    with pytest.raises(VerifyError, match="numeric check"):
        verify_schedule(Schedule(s.collective, tuple(doubled), s.provenance), data_check="numeric")


def test_numeric_catches_two_copies_into_one_slot(step_path: None) -> None:
    s = _ring()
    last = s.transfers[-1]
    twin = replace(last, src=(last.src + 2) % 4)
    with pytest.raises(VerifyError, match="two transfers write"):
        verify_schedule(Schedule(s.collective, s.transfers + (twin,), s.provenance), data_check="numeric")


# the reduce's sender sorts before (0), with (1) or after (3) the copy's sender 1; never the
# receiver 2 (the old shift of the last transfer always hit the receiver for one case, which skipped)
@pytest.mark.parametrize("src", [0, 1, 3])
def test_numeric_catches_a_copy_and_a_reduce_into_one_slot_and_uninitialized_reads(src: int,
                                                                                 step_path: None) -> None:
    s = _ring()
    copy = next(t for t in s.step(s.nsteps - 1) if t.src == 1)   # an allgather copy 1 -> 2
    assert copy.op is Op.COPY and copy.dst == 2
    clash = replace(copy, src=src, op=Op.REDUCE)
    with pytest.raises(VerifyError, match="copied and reduced into"):
        verify_schedule(Schedule(s.collective, s.transfers + (clash,), s.provenance), data_check="numeric")
    # a reduction that reads scratch nobody wrote
    stray = replace(s.transfers[0], src_buf=Buffer.SCRATCH, src_idx=range(0, s.transfers[0].count),
                    op=Op.REDUCE, step=s.nsteps)
    with pytest.raises(VerifyError, match="uninitialized"):
        verify_schedule(Schedule(s.collective, s.transfers + (stray,), s.provenance, scratch_chunks=4),
                        data_check="numeric")


def test_numeric_reduces_several_messages_into_one_slot_in_one_step(step_path: None) -> None:
    # direct reduce-scatter: every rank adds all others' pieces into its slot in one step
    s = build_schedule("direct", parse_spec("switch:4"), CollKind.REDUCESCATTER, inplace=False)
    verify_schedule(s, data_check="numeric")
    verify_schedule(s, data_check="exact")


def test_auto_switches_to_numeric_for_big_schedules(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[bool] = []
    monkeypatch.setattr(verify, "EXACT_LIMIT", 1)
    monkeypatch.setattr(verify, "_verify_numeric", lambda s, topology=None, seed=1: called.append(True))
    verify_schedule(_ring())
    assert called == [True]


@pytest.mark.parametrize("kind", list(CollKind))
@pytest.mark.parametrize("inplace", [False, True])
def test_vectorised_expectations_equal_the_general_ones(kind: CollKind, inplace: bool) -> None:
    coll = Collective(kind, 5, 3, inplace, 2 if kind.rooted else None)
    exp = NumericExpectation(coll, seed=7)
    for r in range(5):
        fast, general = exp(r), exp.general(r)
        assert fast[0].tolist() == general[0].tolist()
        assert fast[1].tolist() == general[1].tolist()


def _reversed_lists(s: Schedule, ends: str) -> Schedule:
    """``s`` with every transfer's chunk lists of two or more as reversed tuples, on ``ends``
    ("both": the same pairs of chunks, so the same result; "dst": the pairs crossed)."""
    def flip(t: Transfer) -> Transfer:
        if t.count < 2:
            return t
        src = tuple(reversed(t.src_idx)) if ends == "both" else t.src_idx
        return replace(t, src_idx=src, dst_idx=tuple(reversed(t.dst_idx)))
    return Schedule(s.collective, tuple(map(flip, s.transfers)), s.provenance, s.scratch_chunks)


@pytest.mark.parametrize("name, spec", [("swing", "torus:4x4"), ("ring", "ring:4"),
                                        ("recursive-halving-doubling", "hypercube:3")])
def test_chunk_lists_that_are_not_ranges(name: str, spec: str, step_path: None) -> None:
    s = build_schedule(name, parse_spec(spec), CollKind.REDUCESCATTER, inplace=False, chunks=2)
    same = _reversed_lists(s, "both")
    assert any(type(t.dst_idx) is tuple for t in same.transfers)
    verify_schedule(same, data_check="exact")
    verify_schedule(same, data_check="numeric")
    with pytest.raises(VerifyError, match="numeric check"):
        verify_schedule(_reversed_lists(s, "dst"), data_check="numeric")


def test_a_copy_naming_one_slot_twice_is_two_writes(step_path: None) -> None:
    # one transfer that writes its first chunk twice: the exact check's verdict too
    s = _ring()
    k, t = next((k, t) for k, t in enumerate(s.transfers) if t.op is Op.COPY and t.count >= 1)
    twice = replace(t, src_idx=(t.src_idx[0], t.src_idx[0]), dst_idx=(t.dst_idx[0], t.dst_idx[0]))
    bad = Schedule(s.collective, s.transfers[:k] + (twice,) + s.transfers[k + 1:], s.provenance)
    with pytest.raises(VerifyError, match=f"step {t.step}: two transfers write rank {t.dst} "):
        verify_schedule(bad, data_check="numeric")
    with pytest.raises(VerifyError, match=f"step {t.step}: two transfers write rank {t.dst} "):
        verify_schedule(bad, data_check="exact")


@pytest.mark.parametrize("name, kind, spec", STEP_PATH_CASES[:6])
def test_the_columns_are_the_lowering_table(name: str, kind: CollKind, spec: str) -> None:
    # the lowering's columns (collc.compiler.transfers) feed the numeric check as they are
    s = _reversed_lists(build_schedule(name, parse_spec(spec), kind, inplace=False, chunks=2), "both")
    cols, sflat, dflat = transfer_columns(s)
    table = TransferTable.of(s)
    assert (cols[:10] == table.cols[:10]).all()
    for at, flat, tat, tflat in ((cols[10], sflat, table.sat, table.sflat), (cols[11], dflat, table.dat, table.dflat)):
        assert ((at < 0) == (tat < 0)).all()
        assert all((flat[a:a + c] == tflat[b:b + c]).all() for a, b, c in zip(at, tat, cols[7]) if a >= 0)
    verify_columns(table.collective, table.scratch_chunks, table.cols, table.sflat, table.dflat)
    # without the first transfer: the verdict on the Schedule without it
    with pytest.raises(VerifyError) as want:
        verify_schedule(Schedule(s.collective, s.transfers[1:], s.provenance, s.scratch_chunks), data_check="numeric")
    with pytest.raises(VerifyError) as got:
        verify_columns(table.collective, table.scratch_chunks, table.cols[:, 1:], table.sflat, table.dflat)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("kind", [CollKind.ALLREDUCE, CollKind.ALLGATHER])
def test_rank_rows_without_a_view(kind: CollKind, monkeypatch: pytest.MonkeyPatch) -> None:
    # the inputs and outputs taken slot by slot, as for a placement whose ranks lie no fixed stride apart
    s = build_schedule("ring", parse_spec("ring:4"), kind, inplace=True)
    short = Schedule(s.collective, s.transfers[1:], s.provenance)
    with pytest.raises(VerifyError, match="output chunk") as viewed:
        verify_schedule(short, data_check="numeric")
    monkeypatch.setattr(verify._State, "rows", lambda *args: None)
    verify_schedule(s, data_check="numeric")
    with pytest.raises(VerifyError) as slots:
        verify_schedule(short, data_check="numeric")
    assert str(slots.value) == str(viewed.value)


@pytest.mark.parametrize("check", ["exact", "numeric"])
def test_links_name_the_first_transfer_of_the_first_pair_without_one(check: str) -> None:
    s = _ring()
    t = s.transfers[0]
    late = replace(t, step=s.nsteps - 1, src=0, dst=2, op=Op.COPY)        # ring:4 has no link 0 -> 2
    early = replace(late, step=1, src=3, dst=1)                           # nor 3 -> 1, sooner
    again = replace(early, step=0)                                        # the same pair, sooner still
    bad = Schedule(s.collective, s.transfers + (late, early, again), s.provenance)
    with pytest.raises(VerifyError, match=r"^step 0: rank 3 sends to rank 1, but ring:4 has no link"):
        verify_schedule(bad, parse_spec("ring:4"), data_check=check)
