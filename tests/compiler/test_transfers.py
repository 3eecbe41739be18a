"""The transfer table (issue #30): a Schedule read into columns reads back as the same
Schedule, and pipelining on the columns cuts transfers as the definition in
collc/compiler/pipelining.py says, checked here against a transfer-by-transfer model."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from collc.compiler.pipelining import cap_counts, split_chunks
from collc.compiler.transfers import TransferTable, gather, pack, runs
from collc.frontends.registry import build_schedule
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Op, Provenance, Schedule, Slots, Transfer, make_slots
from collc.topology import parse_spec


def _flat(s: Schedule) -> list[tuple[object, ...]]:
    """The transfers with their chunk lists as lists (a contiguous tuple reads back as a range)."""
    return [(t.step, t.src, t.dst, t.src_buf, list(t.src_idx), t.dst_buf, list(t.dst_idx), t.op, t.lane)
            for t in s.transfers]


def _rows(t: TransferTable) -> list[tuple[object, ...]]:
    """The table's rows in its order (a Schedule view would sort them), as :func:`_flat` has them."""
    out: list[tuple[object, ...]] = []
    for k in range(len(t)):
        lists = []
        for first, at, flat in ((t.sfirst, t.sat, t.sflat), (t.dfirst, t.dat, t.dflat)):
            c = int(t.cnt[k])
            lists.append(list(range(first[k], first[k] + c)) if at[k] < 0 else flat[at[k]:at[k] + c].tolist())
        out.append((int(t.step[k]), int(t.src[k]), int(t.dst[k]), Buffer("ios"[t.srcbuf[k]]), lists[0],
                    Buffer("ios"[t.dstbuf[k]]), lists[1], (Op.COPY, Op.REDUCE)[t.reduce[k]], int(t.lane[k])))
    return out


def _random(seed: int) -> Schedule:
    """Transfers with scattered, shuffled and contiguous chunk lists, local ones among them."""
    rng = random.Random(seed)
    n = 5
    coll = Collective(CollKind.ALLTOALL, n, 2, seed % 2 == 0, None)
    sizes = {Buffer.INPUT: coll.input_chunks, Buffer.OUTPUT: coll.output_chunks, Buffer.SCRATCH: 6}
    out: list[Transfer] = []
    while len(out) < 12:
        src = rng.randrange(n)
        dst = src if rng.random() < 0.25 else (src + rng.randrange(1, n)) % n
        sb, db = rng.choice(list(Buffer)), rng.choice(list(Buffer))
        c = rng.randint(1, 4)

        def idx(buf: Buffer) -> Slots:
            xs = rng.sample(range(sizes[buf]), c)
            if rng.random() < 0.4:
                start = rng.randrange(sizes[buf] - c + 1)
                xs = list(range(start, start + c))
            return tuple(xs) if rng.random() < 0.5 else make_slots(xs)
        s_idx, d_idx = idx(sb), idx(db)
        if src == dst and sb == db and set(s_idx) & set(d_idx):
            continue
        out.append(Transfer(rng.randrange(4), src, dst, sb, s_idx, db, d_idx, rng.choice(list(Op)), rng.randrange(2)))
    return Schedule(coll, tuple(out), Provenance("random"), scratch_chunks=6, ordered_sends=True,
                    tb_pairs=((1, 0, 2, 3),))


def _model_split(s: Schedule, parts: int, instances: int) -> list[tuple[object, ...]]:
    """split_chunks, transfer by transfer (the module docstring's definition)."""
    m, lanes = parts * instances, s.lanes
    out: list[Transfer] = []
    for t in s.transfers:
        src = [x * m + j for x in t.src_idx for j in range(m)]
        dst = [x * m + j for x in t.dst_idx for j in range(m)]
        if t.is_local:
            out.append(Transfer(t.step, t.src, t.dst, t.src_buf, make_slots(src), t.dst_buf, make_slots(dst), t.op,
                                t.lane))
            continue
        for piece in range(m):
            sl = slice(piece * t.count, (piece + 1) * t.count)
            out.append(Transfer(t.step, t.src, t.dst, t.src_buf, make_slots(src[sl]), t.dst_buf, make_slots(dst[sl]),
                                t.op, piece // parts * lanes + t.lane))
    coll = replace(s.collective, chunk_factor=s.collective.chunk_factor * m)
    return _flat(Schedule(coll, tuple(out), s.provenance, s.scratch_chunks * m))


def _model_cap(s: Schedule, most: int) -> list[tuple[object, ...]]:
    out: list[Transfer] = []
    for t in s.transfers:
        parts = -(-t.count // most)
        b = [t.count * k // parts for k in range(parts + 1)]
        out += [Transfer(t.step, t.src, t.dst, t.src_buf, make_slots(list(t.src_idx)[lo:hi]), t.dst_buf,
                         make_slots(list(t.dst_idx)[lo:hi]), t.op, t.lane) for lo, hi in zip(b, b[1:])]
    return _flat(Schedule(s.collective, tuple(out), s.provenance, s.scratch_chunks))


FRONTENDS = [("multitree", "torus:3x3", CollKind.ALLGATHER), ("direct", "switch:4", CollKind.ALLTOALL),
             ("swing", "torus:7", CollKind.ALLREDUCE), ("binomial-tree", "switch:5", CollKind.REDUCE)]


@pytest.mark.parametrize("alg, spec, kind", FRONTENDS)
def test_a_frontend_schedule_reads_back_unchanged(alg: str, spec: str, kind: CollKind) -> None:
    s = build_schedule(alg, parse_spec(spec), kind, False)
    back = TransferTable.of(s).schedule()
    assert _flat(back) == _flat(s)
    assert (back.collective, back.provenance, back.scratch_chunks, back.tb_pairs, back.step_sync,
            back.ordered_sends, back.step_reply) == (s.collective, s.provenance, s.scratch_chunks, s.tb_pairs,
                                                     s.step_sync, s.ordered_sends, s.step_reply)


@pytest.mark.parametrize("seed", range(40))
def test_split_and_cap_on_columns_match_the_transfer_by_transfer_model(seed: int) -> None:
    s = _random(seed)
    table = TransferTable.of(s)
    assert _flat(table.schedule()) == _flat(s) == _rows(table)
    assert bool((table.sat >= 0).any() or (table.dat >= 0).any())
    for parts, instances in ((1, 1), (2, 1), (1, 3), (2, 2)):
        split = split_chunks(table, parts, instances)
        assert _rows(split) == _model_split(s, parts, instances)
        assert split.tb_pairs == tuple((1, k * s.lanes, 2, 3) for k in range(instances))
        assert split.ordered_sends is (parts * instances == 1)
        for most in (1, 3):
            assert _rows(cap_counts(split, most)) == _model_cap(split.schedule(), most)
    # a list that the pieces leave contiguous is stored as a range
    for t in (split_chunks(table, 2, 2), cap_counts(table, 1)):
        for side in (0, 1):
            at, flat = (t.sat, t.sflat) if side == 0 else (t.dat, t.dflat)
            for k in np.flatnonzero(at >= 0).tolist():
                xs = flat[at[k]:at[k] + t.cnt[k]].tolist()
                assert xs != list(range(xs[0], xs[0] + len(xs)))


def test_runs_pack_and_gather_against_lists() -> None:
    rng = random.Random(3)
    lists = [[rng.randrange(12) for _ in range(rng.randint(1, 6))] for _ in range(200)]
    lists += [[4, 5, 6], [7], [2, 3, 9, 10]]
    flat = np.array([x for xs in lists for x in xs], dtype=np.int64)
    lens = np.array([len(xs) for xs in lists], dtype=np.int64)
    owner, first, length = runs(flat, lens)
    want = []
    for k, xs in enumerate(lists):
        for x in xs:
            if want and want[-1][0] == k and want[-1][1] + want[-1][2] == x:
                want[-1] = (k, want[-1][1], want[-1][2] + 1)
            else:
                want.append((k, x, 1))
    assert list(zip(owner.tolist(), first.tolist(), length.tolist())) == want
    at, kept = pack(flat, lens)
    for k, xs in enumerate(lists):
        contiguous = xs == list(range(xs[0], xs[0] + len(xs)))
        assert (at[k] < 0) == contiguous
        if not contiguous:
            assert kept[at[k]:at[k] + len(xs)].tolist() == xs
    lo = np.array([3, 0, 10], dtype=np.int64)
    got = gather(np.arange(20, dtype=np.int64) * 2, lo, np.array([2, 1, 3], dtype=np.int64))
    assert got.tolist() == [6, 8, 0, 20, 22, 24]
