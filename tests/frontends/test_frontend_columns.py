"""Frontends that hand their transfers over as columns (issue #30): ``Schedule.of_columns`` is the
Schedule of the same ``Transfer`` values, refuses what the ordinary constructor refuses with its
message, and the columns it keeps are what the lowering would have read from the transfers."""

from __future__ import annotations

import random

import numpy as np
import pytest

from collc.compiler.optable import BUFS
from collc.compiler.transfers import TransferTable
from collc.errors import ScheduleError
from collc.frontends.common import ColumnBuilder, code
from collc.frontends.multitree import link_runs
from collc.frontends.multitree.lanes import link_run_lanes
from collc.frontends.registry import build_schedule
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import BUFFER_CODES, COLUMNS, Op, Provenance, Schedule, Transfer
from collc.topology import parse_spec

PROV = Provenance("test")


def _rows(seed: int, n: int = 4, count: int = 40) -> list[tuple[int, ...]]:
    """Random one-rank-pair transfers with ranges, local ones and exact ties among them."""
    rng = random.Random(seed)
    out: list[tuple[int, ...]] = []
    while len(out) < count:
        src = rng.randrange(n)
        dst = src if rng.random() < 0.2 else (src + rng.randrange(1, n)) % n
        sb, db = rng.randrange(3), rng.randrange(3)
        c = rng.randint(1, 3)
        s0, d0 = rng.randrange(8 - c + 1), rng.randrange(8 - c + 1)
        if src == dst and sb == db and s0 < d0 + c and d0 < s0 + c:
            continue
        row = (rng.randrange(4), src, dst, sb, db, rng.randrange(2), rng.randrange(2), c, s0, d0)
        out.append(row)
        twin = row[:4] + ((row[4] + 1) % 3,) + row[5:]
        if rng.random() < 0.2 and not (src == dst and sb == twin[4] and s0 < d0 + c and d0 < s0 + c):
            out.append(twin)       # the same key again, another buffer: ties keep their order
    return out


def _transfer(row: tuple[int, ...]) -> Transfer:
    t, a, b, x, y, o, ln, c, s0, d0 = row
    return Transfer(t, a, b, BUFFER_CODES[x], range(s0, s0 + c), BUFFER_CODES[y], range(d0, d0 + c),
                    (Op.COPY, Op.REDUCE)[o], ln)


def _columns(rows: list[tuple[int, ...]]) -> np.ndarray:
    cols = np.full((len(COLUMNS), len(rows)), -1, dtype=np.int64)
    if rows:
        cols[:10] = np.array(rows, dtype=np.int64).T
    return cols


COLL = Collective(CollKind.ALLTOALL, 4, 2, False)     # 8 chunks in each buffer


@pytest.mark.parametrize("seed", range(8))
def test_of_columns_is_the_schedule_of_its_transfers(seed: int) -> None:
    rows = _rows(seed)
    plain = Schedule(COLL, tuple(map(_transfer, rows)), PROV, scratch_chunks=8)
    made = Schedule.of_columns(COLL, _columns(rows), PROV, scratch_chunks=8)
    assert made == plain
    assert made.transfers == plain.transfers and made.steps == plain.steps and made.nsteps == plain.nsteps
    assert plain.columns is None and made.columns is not None
    want = TransferTable.of(plain)
    got = TransferTable.of(made)
    assert got.cols.dtype == np.int64 and np.array_equal(got.cols, want.cols)
    assert len(got.sflat) == len(got.dflat) == 0


def test_buffer_codes_are_the_lowerings() -> None:
    assert [b.value for b in BUFFER_CODES] == list(BUFS)
    assert [code(b) for b in Buffer] == [BUFS.index(b.value) for b in Buffer]


@pytest.mark.parametrize("bad", [
    (0, 0, 9, 0, 1, 0, 0, 1, 0, 0),        # rank out of range
    (0, 0, 1, 0, 1, 0, 0, 2, 7, 0),        # chunk beyond the input
    (-1, 0, 1, 0, 1, 0, 0, 1, 0, 0),       # negative step
    (0, 0, 1, 0, 1, 0, -1, 1, 0, 0),       # negative lane
    (0, 2, 2, 1, 1, 0, 0, 2, 1, 2),        # a local copy onto its own chunks
    (0, 0, 1, 0, 1, 0, 0, 1, -1, 0),       # negative chunk index
])
def test_of_columns_refuses_as_the_constructor_does(bad: tuple[int, ...]) -> None:
    rows = _rows(1) + [bad]
    with pytest.raises(ScheduleError) as plain:
        Schedule(COLL, tuple(map(_transfer, rows)), PROV, scratch_chunks=8)
    with pytest.raises(ScheduleError) as made:
        Schedule.of_columns(COLL, _columns(rows), PROV, scratch_chunks=8)
    assert str(made.value) == str(plain.value)


def test_of_columns_refuses_lists_and_bad_codes() -> None:
    cols = _columns(_rows(2))
    for k, value in ((10, 0), (3, 3), (5, 2)):
        broken = cols.copy()
        broken[k, 0] = value
        with pytest.raises(ScheduleError, match="schedule columns"):
            Schedule.of_columns(COLL, broken, PROV, scratch_chunks=8)


def test_columns_are_read_only() -> None:
    made = Schedule.of_columns(COLL, _columns(_rows(3)), PROV, scratch_chunks=8)
    assert made.columns is not None
    with pytest.raises(ValueError):
        made.columns[0, 0] = 1


def test_column_builder_keeps_ranks_and_order() -> None:
    b = ColumnBuilder(COLL, scratch=8, keep=frozenset({1}))
    b.move(0, 0, 1, Buffer.INPUT, range(0, 2), Buffer.OUTPUT, range(2, 4))
    b.moves(np.array([1, 1]), np.array([2, 3]), np.array([3, 1]), Buffer.OUTPUT, np.array([0, 4]), Buffer.OUTPUT,
            np.array([0, 4]))
    b.move(2, 2, 3, Buffer.INPUT, range(1), Buffer.OUTPUT, range(1))
    assert b.columns()[:3].T.tolist() == [[0, 0, 1], [1, 3, 1]]
    s = b.schedule("x", {}, "", "")
    assert [(t.step, t.src, t.dst, t.dst_idx) for t in s.transfers] == [(0, 0, 1, range(2, 4)), (1, 3, 1, range(4, 5))]
    with pytest.raises(ScheduleError):
        b.move(0, 0, 1, Buffer.INPUT, range(2), Buffer.OUTPUT, range(3))


@pytest.mark.parametrize("seed", range(4))
def test_link_run_lanes_is_link_runs(seed: int) -> None:
    rng = random.Random(seed)
    rows = [(rng.randrange(60), rng.randrange(3), rng.randrange(3), 1, 1, 0, 0, 1, rng.randrange(8), rng.randrange(8))
            for _ in range(400)]
    rows = [r for r in rows if r[1] != r[2]] + [(0, 1, 1, 0, 1, 0, 0, 1, 0, 0)]
    lanes = [t.lane for t in link_runs([_transfer(r) for r in rows])]
    assert link_run_lanes(_columns(rows)).tolist() == lanes
    assert max(lanes) >= 1          # the busiest link holds more than one run


@pytest.mark.parametrize("algorithm, spec, kind, inplace", [
    ("multitree", "torus:4x4", CollKind.ALLGATHER, False),
    ("multitree", "torus:4x4", CollKind.REDUCESCATTER, False),
    ("multitree", "torus:8x8", CollKind.ALLREDUCE, True),
    ("multitree", "ring:8:uni", CollKind.REDUCESCATTER, True),
    ("bfb", "hypercube:4", CollKind.ALLGATHER, False),
    ("bfb", "kautz:2,3", CollKind.REDUCESCATTER, False),
    ("bfb", "circulant:12:2,3", CollKind.ALLREDUCE, True),
])
def test_frontend_columns_are_its_transfers(algorithm: str, spec: str, kind: CollKind, inplace: bool) -> None:
    """What the lowering reads from the columns is what it would read from the transfers."""
    s = build_schedule(algorithm, parse_spec(spec), kind, inplace=inplace)
    assert s.columns is not None
    plain = Schedule(s.collective, s.transfers, s.provenance, s.scratch_chunks, s.tb_pairs, s.step_sync,
                     s.ordered_sends, s.step_reply)
    assert plain == s
    assert np.array_equal(TransferTable.of(s).cols, TransferTable.of(plain).cols)
