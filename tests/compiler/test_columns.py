"""The lowering on columns (issue #30): runs of ranks lowered together give each rank exactly
the program it gets alone, the printer of the columns prints what the Gpu printer prints, and
the readable views (RankOp, Gpu) round-trip through the columns."""

from __future__ import annotations

import numpy as np
import pytest

import collc.compiler.pipeline as pipeline
from collc.backends.msccl_xml import gpu_text, table_text
from collc.compiler.msccl.dependencies import GpuTable, build_gpus
from collc.compiler.msccl.fusion import fuse_tbs
from collc.compiler.msccl.threadblocks import channel_ops, threadblocks
from collc.compiler.optable import OpTable
from collc.compiler.pipeline import LowerOptions, lower
from collc.compiler.scratch import expand
from collc.compiler.transfers import TransferTable
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.ir.schedule import Schedule
from collc.topology import parse_spec


def _sched(alg: str, spec: str, kind: CollKind, inplace: bool = True, **params: str) -> Schedule:
    return build_schedule(alg, parse_spec(spec), kind, inplace, params=params or None)


# each exercises a rule keyed by rank: pairing (greedy and hinted), local-only tbs, scratch,
# step_sync and step_reply, ordered_sends, output liveness on a reduce's non-roots
CASES = {
    "ring-allreduce": lambda: _sched("ring", "ring:8", CollKind.ALLREDUCE),
    "rhd-allreduce-outofplace": lambda: _sched("recursive-halving-doubling", "switch:8", CollKind.ALLREDUCE, False),
    "swing-odd-sync-reply": lambda: _sched("swing", "torus:7", CollKind.ALLREDUCE),
    "multitree-ordered": lambda: _sched("multitree", "torus:4x4", CollKind.ALLGATHER),
    "multitree-hinted": lambda: _sched("multitree", "torus:4x4", CollKind.ALLREDUCE, threadblocks="fused"),
    "binomial-reduce": lambda: _sched("binomial-tree", "switch:6", CollKind.REDUCE, False),
    "direct-alltoall": lambda: _sched("direct", "switch:6", CollKind.ALLTOALL, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_ranks_lowered_together_get_the_program_each_gets_alone(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s = CASES[name]()
    if name == "swing-odd-sync-reply":
        assert s.step_sync and s.step_reply
    if name == "multitree-ordered":
        assert s.ordered_sends
    if name == "multitree-hinted":
        assert s.tb_pairs
    together = lower(s)          # every rank of these small programs in one run
    monkeypatch.setattr(pipeline, "BLOCK_OPS", 1)
    alone = lower(s)
    assert together == alone
    assert lower(s, LowerOptions(verify_between=True)) == alone     # one rank a run, checked


def test_a_run_of_ranks_in_any_grouping_gives_the_same_gpus() -> None:
    s = CASES["swing-odd-sync-reply"]()
    plan = expand(TransferTable.of(s))
    ranks = plan.by_rank()
    hints = [dict[tuple[int, int], int]() for _ in ranks]
    sync = [frozenset({b for a, b in s.step_sync if a == r}) for r in range(len(ranks))]
    reply = [frozenset({b for a, b in s.step_reply if a == r}) for r in range(len(ranks))]

    def gpus(run: list[int]) -> list[str]:
        table = OpTable(np.concatenate([ranks[r].cols for r in run], axis=1))
        items = fuse_tbs(plan.collective, threadblocks(channel_ops(table, 1), True, hints))
        return [table_text(g) for g in build_gpus(plan.collective, run, items, plan.scratch, sync, False, reply)]

    alone = [text for r in range(len(ranks)) for text in gpus([r])]
    assert gpus(list(range(len(ranks)))) == alone
    assert gpus([0, 1, 2]) + gpus([3, 4, 5, 6]) == alone


def test_the_printer_of_the_columns_prints_the_gpu() -> None:
    for name in ("ring-allreduce", "swing-odd-sync-reply", "direct-alltoall"):
        for g in lower(CASES[name]()).gpus:
            table = GpuTable.from_gpu(g)
            assert table_text(table) == gpu_text(g)
            assert table.to_gpu() == g


def test_op_table_rows_read_as_rank_ops_in_logical_order() -> None:
    plan = expand(TransferTable.of(CASES["rhd-allreduce-outofplace"]()))
    ops = plan.table.ops()
    assert len(ops) == len(plan.table) and {op.rank for op in ops} == set(range(8))
    assert sorted(ops) == sorted(plan.ops)           # the same ops, in plan order there
    # ``pos`` orders the rows as the RankOps' logical positions do
    by_pos = [ops[k].pos for k in np.argsort(plan.table.pos).tolist()]
    assert by_pos == sorted(op.pos for op in ops)
    assert any(len(op.key) == 3 for op in ops)      # scratch copies: keys of three parts


def test_the_exchange_test_matches_interval_overlap_by_brute_force() -> None:
    from collc.compiler.scratch import _overlaps

    rng = np.random.default_rng(7)
    keys = rng.integers(0, 4, 60)
    lo = rng.integers(0, 40, 60)
    hi = lo + rng.integers(1, 6, 60)
    qkey = rng.integers(0, 5, 300)
    qlo = rng.integers(0, 45, 300)
    qhi = qlo + rng.integers(1, 6, 300)
    want = [any(k == q and a < qb and qa < b for k, a, b in zip(keys, lo, hi))
            for q, qa, qb in zip(qkey, qlo, qhi)]
    assert _overlaps(keys, lo, hi, qkey, qlo, qhi).tolist() == want
    assert not _overlaps(keys[:0], lo[:0], hi[:0], qkey, qlo, qhi).any()


def test_the_byte_printer_prints_any_values_as_the_gpu_printer_does() -> None:
    """The columns' printer spells values from a table of -1 .. 65535 with each column as wide as
    its widest value; wider or lower values go through its line-at-a-time path."""
    rng = np.random.default_rng(3)
    for top in (1, 9, 10, 99999, 1 << 16, 1 << 40):
        ntb = 5
        lens = rng.integers(1, 7, ntb)
        n = int(lens.sum())

        def col(lo: int, hi: int, size: int = n) -> np.ndarray:
            return rng.integers(lo, hi + 1, size).astype(np.int64)
        g = GpuTable(7, top, 0, 3, col(-1, min(top, 40), ntb), col(-1, min(top, 40), ntb), col(0, 3, ntb),
                     np.concatenate([[0], np.cumsum(lens)]).astype(np.int64), col(0, 8), col(0, 2), col(-1, top),
                     col(0, 2), col(0, top), col(1, top), col(-1, min(top, 4)), col(-1, 6), col(0, 1))
        assert table_text(g) == gpu_text(g.to_gpu())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_plans_positions_are_the_logical_order_of_its_rows(name: str) -> None:
    """``expand`` numbers the positions on its parts (stable sorts that merge their runs); the
    table's own sort of (step, phase, number, sub) gives the same numbers."""
    plan = expand(TransferTable.of(CASES[name]()))
    again = OpTable.from_columns(plan.table.cols.copy())
    assert np.array_equal(again.pos, plan.table.pos)
    rank = plan.table.rank
    assert bool((rank[1:] >= rank[:-1]).all())


def test_dense_numbers_pairs_as_unique_does() -> None:
    from collc.compiler.pipeline import _dense

    rng = np.random.default_rng(5)
    for top, tops in ((5, 7), (4096, 16384), (70000, 3), (3, 70000)):
        a, b = rng.integers(0, top, 3000), rng.integers(0, tops, 3000)
        assert np.array_equal(_dense(a, top, b, tops), np.unique(a * tops + b, return_inverse=True)[1].reshape(-1))


CAPPED = {
    "rhd-allreduce-outofplace": CASES["rhd-allreduce-outofplace"],
    "swing-4x4": lambda: _sched("swing", "torus:4x4", CollKind.ALLREDUCE),
    "rhd-reducescatter": lambda: _sched("recursive-halving-doubling", "hypercube:4", CollKind.REDUCESCATTER, False),
}


@pytest.mark.parametrize("name", sorted(CAPPED))
def test_capped_pieces_come_in_the_schedules_order(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """cap_counts orders its pieces by one stable sort of (run, sfirst, dfirst); the table's
    lexsort of the whole Transfer.sort_key gives the same rows."""
    import collc.compiler.pipelining as pipelining

    seen: list[TransferTable] = []
    real = pipelining._sorted_pieces
    monkeypatch.setattr(pipelining, "_sorted_pieces", lambda t: seen.append(t) or real(t))
    checked = 0
    for parts, instances in ((1, 1), (2, 3)):
        table = pipelining.split_chunks(TransferTable.of(CAPPED[name]()), parts, instances)
        for cap in (1, 2, 3):
            if int(table.cnt.max()) <= cap:
                continue
            seen.clear()
            capped = pipelining.cap_counts(table, cap)
            assert len(seen) == 1 and len(capped) > len(table)
            assert np.array_equal(capped.cols, seen[0].sorted().cols)
            checked += 1
    assert checked


def test_pieces_out_of_order_within_their_run_are_sorted_as_the_table_sorts() -> None:
    """Rows of one (step, lane, src, dst) in any order are put in the sort key's order; rows
    whose (step, lane, src, dst) are out of order fall back to the table's own sort."""
    from dataclasses import replace

    import collc.compiler.pipelining as pipelining

    capped = pipelining.cap_counts(TransferTable.of(CAPPED["swing-4x4"]()), 1)
    key = np.stack([capped.step, capped.lane, capped.src, capped.dst])
    run = np.concatenate([[0], np.cumsum((key[:, 1:] != key[:, :-1]).any(axis=0))])
    backwards = np.lexsort((-np.arange(len(capped)), run))          # each run reversed
    assert not np.array_equal(backwards, np.arange(len(capped)))
    for order in (backwards, np.arange(len(capped))[::-1]):
        shuffled = replace(capped, cols=capped.cols[:, order])
        assert np.array_equal(pipelining._sorted_pieces(shuffled).cols, shuffled.sorted().cols)
