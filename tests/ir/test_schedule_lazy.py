"""A Schedule made by ``Schedule.of_columns`` makes its ``Transfer`` objects on first access only
(issue #30: a million of them on torus:32x32 that lowering and checking never read), and is
otherwise the Schedule of the same transfers: equality, steps, lanes, pickling, ``replace``."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from collc.ir.schedule import Schedule
from tests.frontends.test_frontend_columns import COLL, PROV, _columns, _rows, _transfer


def _pair(seed: int) -> tuple[Schedule, Schedule]:
    rows = _rows(seed)
    plain = Schedule(COLL, tuple(map(_transfer, rows)), PROV, scratch_chunks=8, tb_pairs=((0, 3, 1, 2),))
    made = Schedule.of_columns(COLL, _columns(rows), PROV, scratch_chunks=8, tb_pairs=((0, 3, 1, 2),))
    return plain, made


def _lazy(s: Schedule) -> bool:
    return "transfers" not in vars(s) and "_by_step" not in vars(s)


@pytest.mark.parametrize("seed", range(4))
def test_counts_without_the_objects(seed: int) -> None:
    plain, made = _pair(seed)
    assert _lazy(made) and not _lazy(plain)
    assert made.nsteps == plain.nsteps and made.lanes == plain.lanes == 4
    assert _lazy(made)       # nsteps and lanes read the columns
    assert made.steps == plain.steps and not _lazy(made)
    assert made.nsteps == plain.nsteps and made.lanes == plain.lanes


@pytest.mark.parametrize("seed", range(4))
def test_first_access_makes_the_same_transfers(seed: int) -> None:
    plain, made = _pair(seed)
    assert made.transfers == plain.transfers
    assert all(made.step(k) == plain.step(k) for k in range(plain.nsteps))
    _, again = _pair(seed)
    assert again == plain and hash(again) == hash(plain)      # eq and hash make them too


def test_pickle_and_replace() -> None:
    plain, made = _pair(5)
    back = pickle.loads(pickle.dumps(made))
    assert _lazy(back) and back.columns is not None
    assert back == plain and back.steps == plain.steps
    moved = replace(made, ordered_sends=True)
    assert moved.columns is None and moved.transfers == plain.transfers and moved.ordered_sends


def test_empty() -> None:
    made = Schedule.of_columns(COLL, _columns([]), PROV)
    assert made.nsteps == 0 and made.lanes == 1 and made.transfers == () and made.steps == ()
