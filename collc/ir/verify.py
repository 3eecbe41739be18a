"""Symbolic execution of a Schedule: postcondition, double reduction, links.

Independent of lowering (DESIGN 4.7): it executes the transfers step by step with
synchronous semantics (all reads of step ``t`` see the state after step ``t-1``)
on the physical buffers of the collective's placement, then compares every
output chunk with the collective's postcondition.

Large schedules are checked numerically (``verify_columns``): the transfers read once into
columns -- the lowering table's layout -- and each step applied with numpy over every chunk it
moves; only a step found malformed is walked transfer by transfer, to name its first problem.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, NoReturn

import numpy as np

from collc.errors import VerifyError
from collc.ir.collective import Buffer, Collective
from collc.ir.schedule import COLUMNS, Ints, Op, Schedule, Slots, Transfer, transfer_columns
from collc.ir.symbolic import DataError, ExactDomain, NumericExpectation, leaf_at

if TYPE_CHECKING:
    from collc.topology import Topology


def check_links(schedule: Schedule, topology: Topology, columns: Ints | None = None) -> None:
    """Every remote transfer must use a link, or a route through switches only
    (any pair on a routed network such as a torus).  ``columns``: the transfers' columns
    (``transfer_columns``) where the caller has them."""
    n = schedule.collective.nranks
    if topology.nranks != n:
        raise VerifyError(f"schedule has {n} ranks but topology "
                          f"{topology.name} has {topology.nranks}")
    if topology.is_routed():
        return  # the network forwards between any two ranks (collc.sim routes the load)
    # every pair once; a pair without a route is named at its first transfer, as a walk over the
    # transfers would name it
    if columns is None:
        ts = schedule.transfers
        bad = {(a, b) for a, b in set(map(attrgetter("src", "dst"), ts)) if a != b and topology.route(a, b) is None}
        if bad:
            t = next(t for t in ts if (t.src, t.dst) in bad)
            _no_route(t.step, t.src, t.dst, topology)
        return
    step, src, dst = columns[0], columns[1], columns[2]
    key = src * n + dst
    missing = [k for k in np.unique(key).tolist() if k // n != k % n and topology.route(k // n, k % n) is None]
    if missing:
        first = int(np.argmax(np.isin(key, missing)))
        _no_route(int(step[first]), int(src[first]), int(dst[first]), topology)


def _no_route(step: int, src: int, dst: int, topology: Topology) -> NoReturn:
    raise VerifyError(f"step {step}: rank {src} sends to rank {dst}, but {topology.name} "
                      f"has no link or switch route between them")


#: Rank-chunks above which ``auto`` verifies a Schedule numerically (the emitted file's own check
#: keeps ``collc.ir.symbolic.EXACT_LIMIT``).  Lower than the file check's: this is the guard before
#: lowering, the emitted file's check is the proof, and exact sets of 1024-bit masks cost about
#: 1 us per rank-chunk moved (hypercube:10 RHD allreduce, 2^20 rank-chunks: 0.9 CPU s exact, 0.2
#: numeric; ring:256, 2^16: 0.15 exact, 0.19 numeric).
EXACT_LIMIT = 1 << 19


def verify_schedule(schedule: Schedule, topology: Topology | None = None, data_check: str = "auto") -> None:
    """Raise VerifyError naming the first problem; return None when correct.

    ``data_check``: ``exact`` symbolic contribution sets, or ``numeric`` random 64-bit
    values summed modulo 2^64 (detects a dropped or doubled contribution except with
    probability about 2^-64); ``auto`` picks numeric above ``EXACT_LIMIT`` rank-chunks.
    """
    coll = schedule.collective
    if data_check == "numeric" or (data_check == "auto" and
                                   coll.nranks * max(coll.input_chunks, coll.output_chunks) > EXACT_LIMIT):
        _verify_numeric(schedule, topology)
        return
    if topology is not None:
        check_links(schedule, topology)
    n = coll.nranks
    dom = ExactDomain(n)
    sizes = {Buffer.INPUT: coll.input_chunks, Buffer.OUTPUT: coll.output_chunks,
             Buffer.SCRATCH: schedule.scratch_chunks}
    # state[rank][physical buffer] is a list of node ids (None: uninitialized)
    state: list[dict[Buffer, list[int | None]]] = [
        {b: [None] * size for b, size in sizes.items()} for _ in range(n)]
    alias = [{b: coll.alias(r, b) for b in Buffer} for r in range(n)]
    for r in range(n):
        pb, base = alias[r][Buffer.INPUT]
        state[r][pb][base:base + coll.input_chunks] = dom.leaves(r, coll.input_chunks)

    def where(rank: int, buf: Buffer, idx: int) -> str:
        return f"rank {rank} {buf.value}[{idx}]"

    for step_no, transfers in enumerate(schedule.steps):
        # whole transfers pay off once they move a few chunks each (one chunk: the loop below is as quick)
        if (sum(len(t.src_idx) for t in transfers) >= SLICED * len(transfers)
                and _exact_step_fast(dom, state, alias, transfers)):
            continue
        # the chunk-by-chunk semantics, which name the first problem
        copies: dict[tuple[int, Buffer, int], int | None] = {}
        reduces: dict[tuple[int, Buffer, int], list[int]] = {}
        for t in transfers:
            sb, sbase = alias[t.src][t.src_buf]
            db, dbase = alias[t.dst][t.dst_buf]
            srow = state[t.src][sb]
            for s_i, d_i in zip(t.src_idx, t.dst_idx):
                value = srow[sbase + s_i]
                dst = (t.dst, db, dbase + d_i)
                if t.op is Op.COPY:
                    if dst in copies or dst in reduces:
                        raise VerifyError(f"step {step_no}: two transfers write {where(*dst)} in the same step")
                    copies[dst] = value
                else:
                    if dst in copies:
                        raise VerifyError(f"step {step_no}: {where(*dst)} is copied and reduced into in "
                                          f"the same step")
                    if value is None:
                        raise VerifyError(f"step {step_no}: rank {t.src} sends uninitialized "
                                          f"{t.src_buf.value}[{s_i}] to be reduced on rank {t.dst}")
                    reduces.setdefault(dst, []).append(value)
        for (r, b, i), value in copies.items():
            state[r][b][i] = value
        for (r, b, i), values in reduces.items():
            acc = state[r][b][i]
            if acc is None:
                raise VerifyError(f"step {step_no}: {where(r, b, i)} is reduced into before it holds data")
            try:
                for v in values:
                    acc = dom.reduce(acc, v)
            except DataError as exc:
                raise VerifyError(f"step {step_no}: {where(r, b, i)} {exc}") from None
            state[r][b][i] = acc

    mask_of: dict[range | tuple[int, ...], int] = {}    # the origin ranks' mask, once per rank set
    # A rank whose obligations' class and outputs equal the last rank's (which passed: a failure
    # raises) passes too: every rank of an allgather or allreduce is checked by one list compare.
    passed: tuple[int, list[int | None]] | None = None
    for r in range(n):
        ob, obase = alias[r][Buffer.OUTPUT]
        row = state[r][ob]
        key = coll.verdict_key(r, row, obase)
        if key == passed:
            continue
        for idx, origin, ranks in coll.expected(r):
            mask = mask_of.get(ranks)
            if mask is None:
                mask = mask_of[ranks] = dom.expect(origin, ranks).mask
            got = row[obase + idx]
            if got is None or dom.chunk(got) != origin or dom.mask(got) != mask:   # dom.matches, unrolled
                want = dom.expect(origin, ranks)
                raise VerifyError(f"after {schedule.nsteps} steps rank {r} output chunk {idx} holds "
                                  f"{dom.describe(got)}, expected {dom.describe_expect(want)}")
        passed = key


SLICED = 4   # chunks per transfer, on average, from which a step is applied with list slices


def _gather(row: list[int | None], base: int, idx: Slots) -> list[int | None]:
    """The values at ``base + i`` for ``i`` in ``idx`` (a list slice when ``idx`` is a step-1 range)."""
    if type(idx) is range and idx.step == 1:
        return row[base + idx.start:base + idx.stop]
    return [row[base + i] for i in idx]


def _exact_step_fast(dom: ExactDomain, state: list[dict[Buffer, list[int | None]]],
                     alias: list[dict[Buffer, tuple[Buffer, int]]], transfers: tuple[Transfer, ...]) -> bool:
    """One step of ``verify_schedule``'s exact semantics a transfer (list slice) at a time.

    Applies the step and returns True when it is well formed: no slot written twice in the
    step (reductions included), every reduction reads initialized data into initialized data
    and is a valid sum.  Otherwise returns False having changed nothing but the domain's
    hash-consed nodes (which name values, not state), and the caller's chunk-by-chunk pass
    names the problem.
    """
    # the slots each transfer writes, per (rank, physical buffer): none may be written twice
    spans: dict[tuple[int, Buffer], list[tuple[int, int]]] = {}
    for t in transfers:
        db, dbase = alias[t.dst][t.dst_buf]
        idx = t.dst_idx
        lst = spans.setdefault((t.dst, db), [])
        if type(idx) is range and idx.step == 1:
            lst.append((dbase + idx.start, dbase + idx.stop))
        else:
            lst.extend((dbase + i, dbase + i + 1) for i in idx)
    for lst in spans.values():
        if len(lst) > 1:
            lst.sort()
            for (_, hi), (lo, _) in zip(lst, lst[1:]):
                if lo < hi:
                    return False
    # all reads of the step first, then the new values; nothing is written before all are known
    writes: list[tuple[list[int | None], Slots, int, list[int | None]]] = []
    for t in transfers:
        sb, sbase = alias[t.src][t.src_buf]
        db, dbase = alias[t.dst][t.dst_buf]
        srow = state[t.src][sb]
        drow = state[t.dst][db]
        values = _gather(srow, sbase, t.src_idx)
        if t.op is Op.REDUCE:
            summed = dom.reduce_all(_gather(drow, dbase, t.dst_idx), values)
            if summed is None:
                return False
            values = list(summed)
        writes.append((drow, t.dst_idx, dbase, values))
    for drow, didx, dbase, values in writes:
        if type(didx) is range and didx.step == 1:
            drow[dbase + didx.start:dbase + didx.stop] = values
        else:
            for i, v in zip(didx, values):
                drow[dbase + i] = v
    return True


# --------------------------------------------------------------------------- numeric, on columns
#: The columns of :func:`transfer_columns`, one row each, one entry per transfer in the Schedule's
#: order -- the layout of the lowering's table (``collc.compiler.transfers``), which ``verify_columns``
#: therefore reads as it is.  Buffers are coded in ``Buffer``'s order (i, o, s), ``reduce`` is 1 for
#: ``Op.REDUCE``; a chunk list is ``cnt`` chunks from ``sfirst`` (``dfirst``) where ``sat`` (``dat``)
#: is -1, else the ``cnt`` entries of ``sflat`` (``dflat``) from ``sat`` (``dat``).
FIELDS = COLUMNS
_BUFFERS = tuple(Buffer)


def _verify_numeric(schedule: Schedule, topology: Topology | None = None, seed: int = 1) -> None:
    """``check_links`` and ``verify_columns`` on ``schedule``'s transfers, read into columns once
    (the numeric check of ``verify_schedule``)."""
    cols, sflat, dflat = transfer_columns(schedule)
    if topology is not None:
        check_links(schedule, topology, cols)
    verify_columns(schedule.collective, schedule.scratch_chunks, cols, sflat, dflat, seed)


def _expand(base: Ints, first: Ints, at: Ints, cnt: Ints, flat: Ints) -> Ints:
    """The global slot of every chunk the transfers name, transfer after transfer: ``base + first
    + k`` for a run, ``base + flat[at + k]`` for a list."""
    total = int(cnt.sum())
    if total == len(cnt):           # one chunk each (a tree's transfers): no repeat
        out: Ints = base + np.where(at < 0, first, flat[np.maximum(at, 0)] if len(flat) else first)
        return out
    off = np.cumsum(cnt) - cnt
    out = np.repeat(base + first - off, cnt) + np.arange(total, dtype=np.int64)
    lists = np.flatnonzero(at >= 0)
    if len(lists):
        lens = cnt[lists]
        lo = np.cumsum(lens) - lens
        within = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(lo, lens)
        out[np.repeat(off[lists], lens) + within] = flat[np.repeat(at[lists], lens) + within] + np.repeat(
            base[lists], lens)
    return out


def _expand_into(out: Ints, base: Ints, first: Ints, at: Ints, cnt: Ints, flat: Ints) -> None:
    """``_expand`` written into ``out`` (a step's work buffer: no new array as long as the step,
    whose pages would be faulted in afresh at every step)."""
    if len(out) == len(cnt):        # one chunk each (a tree's transfers)
        np.add(base, first, out=out)
    else:
        # runs: steps of one from each run's first slot, as the running sum of ones, each run's
        # first entry stepping from the previous run's last slot to its own first
        start = base + first
        out.fill(1)
        jump = start.copy()
        jump[1:] -= start[:-1] + cnt[:-1] - 1
        out[np.cumsum(cnt) - cnt] = jump
        np.cumsum(out, out=out)
    lists = np.flatnonzero(at >= 0)
    if len(lists):
        off = np.cumsum(cnt) - cnt
        lens = cnt[lists]
        lo = np.cumsum(lens) - lens
        within = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(lo, lens)
        out[np.repeat(off[lists], lens) + within] = flat[np.repeat(at[lists], lens) + within] + np.repeat(
            base[lists], lens)


def _exclusive_max(x: Ints) -> Ints:
    """``max(x[:k])`` at every k (-1 at 0)."""
    out: Ints = np.empty_like(x)
    out[0] = -1
    np.maximum.accumulate(x[:-1], out=out[1:])
    return out


class _State:
    """Every physical slot of every rank, end to end: its value and whether it holds data.

    ``base[b, r]`` is the global slot of chunk 0 of rank ``r``'s logical buffer ``b`` (``Buffer``
    order), in place aliases folded in (``Collective.alias``)."""

    def __init__(self, coll: Collective, scratch_chunks: int) -> None:
        n = coll.nranks
        sizes = {Buffer.INPUT: coll.input_chunks, Buffer.OUTPUT: coll.output_chunks, Buffer.SCRATCH: scratch_chunks}
        alias = [[coll.alias(r, b) for r in range(n)] for b in _BUFFERS]
        phys = sorted({pb for row in alias for pb, _ in row}, key=_BUFFERS.index)
        start, at = {}, 0
        for pb in phys:
            start[pb] = at
            at += n * sizes[pb]
        self.base: Ints = np.array([[start[pb] + r * sizes[pb] + off for r, (pb, off) in enumerate(row)]
                                    for row in alias], dtype=np.int64).reshape(len(_BUFFERS), n)
        self.vals = np.zeros(at, dtype=np.uint64)
        self.ok = np.zeros(at, dtype=bool)

    def rows(self, arr: np.ndarray, buf: int, first: int, count: int, width: int) -> np.ndarray | None:
        """Chunks ``[0, width)`` of logical buffer ``buf`` of ranks ``first..first+count-1`` in
        ``arr`` (``vals`` or ``ok``) as a (count, width) view, when the ranks' buffers lie a fixed
        stride apart (every placement ``Collective.alias`` makes); else None (``slots``)."""
        at = self.base[buf, first:first + count]
        stride = int(at[1] - at[0]) if count > 1 else width
        if not (count and stride >= width and bool((np.diff(at) == stride).all())):
            return None
        view: np.ndarray = np.lib.stride_tricks.as_strided(arr[int(at[0]):], shape=(count, width),
                                                           strides=(stride * arr.itemsize, arr.itemsize))
        return view

    def slots(self, buf: int, first: int, count: int, width: int) -> Ints:
        """The global slots that ``rows`` would view."""
        out: Ints = self.base[buf, first:first + count][:, None] + np.arange(width, dtype=np.int64)[None, :]
        return out


def verify_columns(coll: Collective, scratch_chunks: int, cols: Ints, sflat: Ints, dflat: Ints,
                   seed: int = 1) -> None:
    """``verify_schedule``'s numeric check on transfer columns (``transfer_columns``' layout, sorted
    by step): random 64-bit inputs, summed modulo 2^64, the step semantics applied a step at a time
    with numpy over every chunk the step moves.

    A step that is not well formed -- a slot written twice (reductions apart), copied and reduced
    into, or a reduction of uninitialized data -- is taken again transfer by transfer
    (``_name_problem``), which raises naming the first problem."""
    n = coll.nranks
    st = _State(coll, scratch_chunks)
    vals, ok = st.vals, st.ok
    # the inputs, a block of ranks at a time, and their column sums (the reductions' expectation)
    ic = coll.input_chunks
    colsum = np.zeros(ic, dtype=np.uint64)
    block = max(1, BLOCK // max(ic, 1))
    chunk = np.arange(ic, dtype=np.uint64)[None, :]
    for r0 in range(0, n, block):
        rs = np.arange(r0, min(n, r0 + block), dtype=np.int64)
        leaves = leaf_at(seed, rs.astype(np.uint64)[:, None], chunk)
        colsum += leaves.sum(axis=0, dtype=np.uint64)
        into, held = st.rows(vals, 0, r0, len(rs), ic), st.rows(ok, 0, r0, len(rs), ic)
        if into is None or held is None:
            pos = st.slots(0, r0, len(rs), ic)
            vals[pos], ok[pos] = leaves, True
        else:
            into[:], held[:] = leaves, True
        del leaves
    nsteps = int(cols[0, -1]) + 1 if cols.shape[1] else 0
    bounds = np.searchsorted(cols[0], np.arange(nsteps + 1, dtype=np.int64))
    chunks = np.cumsum(np.concatenate(([0], cols[7])))[bounds]
    work = _Work(int(np.diff(chunks).max(initial=0)))
    with np.errstate(over="ignore"):
        for step_no in range(nsteps):
            a, b = int(bounds[step_no]), int(bounds[step_no + 1])
            if a < b and not _numeric_step(st, work, cols[:, a:b], sflat, dflat):
                _name_problem(st, step_no, cols[:, a:b], sflat, dflat)
                raise AssertionError("the transfer-by-transfer pass must name the problem")  # pragma: no cover
    _check_outputs(st, NumericExpectation(coll, seed, colsum), n, nsteps)


BLOCK = 1 << 15   # values per block of ranks where all ranks' inputs or outputs are computed (no big temporaries)
LONG = 128   # chunks per transfer, on average, from which a step of runs is moved with slices


class _Work:
    """A step's work buffers, as long as the longest step (reused: see ``_expand_into``)."""

    def __init__(self, size: int) -> None:
        self.sidx: Ints = np.empty(size, dtype=np.int64)
        self.didx: Ints = np.empty(size, dtype=np.int64)
        self.v = np.empty(size, dtype=np.uint64)
        self.good = np.empty(size, dtype=bool)
        self.held = np.empty(size, dtype=bool)


def _numeric_step(st: _State, work: _Work, c: Ints, sflat: Ints, dflat: Ints) -> bool:
    """Apply one step (columns ``c``) and return True, or return False having changed nothing
    when the step is not well formed."""
    vals, ok = st.vals, st.ok
    red = c[5].astype(bool)
    if red.any() and not red.all():
        c = c[:, np.argsort(red, kind="stable")]       # copies first, then reductions: two slices
        red = c[5].astype(bool)
    cnt = c[7]
    total = int(cnt.sum())
    dbase = st.base[c[4], c[2]]
    runs = c[11] < 0
    # long runs on both ends: moved a transfer at a time with slices (memory speed, no index arrays)
    sliced = total >= LONG * len(cnt) and bool(runs.all()) and bool((c[10] < 0).all())
    didx = work.didx[:total]
    if not sliced:
        _expand_into(didx, dbase, c[9], c[11], cnt, dflat)
    # writes as intervals of slots (a list: one per chunk): none may overlap a copy's, and a
    # reduction's only other reductions' (sums, added together)
    if runs.all():
        lo, hi, ired = dbase + c[9], dbase + c[9] + cnt, red
    else:
        each = np.repeat(~runs, cnt)
        lo = np.concatenate((dbase[runs] + c[9][runs], didx[each]))
        hi = np.concatenate((lo[:int(runs.sum())] + cnt[runs], didx[each] + 1))
        ired = np.concatenate((red[runs], np.repeat(red[~runs], cnt[~runs])))
    order = np.argsort(lo, kind="stable")
    lo, hi, ired = lo[order], hi[order], ired[order]
    after_copy = lo < _exclusive_max(np.where(ired, -1, hi))
    after_reduce = lo < _exclusive_max(np.where(ired, hi, -1))
    if after_copy.any() or (after_reduce & ~ired).any():
        return False
    several = bool((after_reduce & ired).any())      # several reductions into one slot: add them all
    if sliced:
        return _slice_step(st, work, st.base[c[3], c[1]] + c[8], dbase + c[9], cnt, int(red.sum()))
    # all reads of the step first
    sidx, v, good = work.sidx[:total], work.v[:total], work.good[:total]
    _expand_into(sidx, st.base[c[3], c[1]], c[8], c[10], cnt, sflat)
    np.take(vals, sidx, out=v)
    np.take(ok, sidx, out=good)
    split = total - int(cnt[red].sum())               # chunks copied; the rest are reduced
    if split < total:
        rd, held = didx[split:], work.held[split:total]
        np.take(ok, rd, out=held)
        if not (good[split:].all() and held.all()):
            return False
    if split:
        cd = didx[:split]
        np.put(vals, cd, v[:split])
        if good[:split].all():
            np.put(ok, cd, True)
        else:
            np.put(ok, cd, good[:split])
    if split < total:
        if several:
            np.add.at(vals, rd, v[split:])
        else:
            acc = sidx[split:].view(np.uint64)          # the reads are done: their slots hold the sums
            np.take(vals, rd, out=acc)
            acc += v[split:]
            np.put(vals, rd, acc)
    return True


def _slice_step(st: _State, work: _Work, sstart: Ints, dstart: Ints, cnt: Ints, nred: int) -> bool:
    """``_numeric_step``'s moves for a step of runs, copies first, then ``nred`` reductions (several
    into one slot add up: each is its own slice operation)."""
    vals, ok = st.vals, st.ok
    total = int(cnt.sum())
    s0, d0, k = sstart.tolist(), dstart.tolist(), cnt.tolist()
    ncopy = len(k) - nred
    split = total - int(cnt[ncopy:].sum())        # chunks copied
    # all reads of the step first
    v, good = work.v[:total], work.good[:total]
    np.concatenate([vals[a:a + m] for a, m in zip(s0, k)], out=v)
    np.concatenate([ok[a:a + m] for a, m in zip(s0, k)], out=good)
    if nred:
        held = work.held[:total - split]
        np.concatenate([ok[d:d + m] for d, m in zip(d0[ncopy:], k[ncopy:])], out=held)
        if not (good[split:].all() and held.all()):
            return False
    o = 0
    every = bool(good[:split].all())
    for d, m in zip(d0[:ncopy], k[:ncopy]):
        vals[d:d + m] = v[o:o + m]
        ok[d:d + m] = True if every else good[o:o + m]
        o += m
    for d, m in zip(d0[ncopy:], k[ncopy:]):
        vals[d:d + m] += v[o:o + m]
        o += m
    return True


def _name_problem(st: _State, step_no: int, c: Ints, sflat: Ints, dflat: Ints) -> None:
    """One step transfer by transfer, as the step semantics read: raise naming its first problem."""
    ok = st.ok
    copied = np.zeros(len(ok), dtype=bool)
    reduced = np.zeros(len(ok), dtype=bool)
    rows = c.T.tolist()
    # all reads of the step first
    reads = [ok[_expand(st.base[sb, src:src + 1], np.array([sf]), np.array([sa]), np.array([cnt]), sflat)]
             for (_, src, _, sb, _, _, _, cnt, sf, _, sa, _) in rows]
    for (_, src, dst, _, db, rd, _, cnt, _, df, _, da), good in zip(rows, reads):
        di = _expand(st.base[db, dst:dst + 1], np.array([df]), np.array([da]), np.array([cnt]), dflat)
        buf = _BUFFERS[db].value
        if not rd:
            if copied[di].any() or len(np.unique(di)) < len(di):
                raise VerifyError(f"step {step_no}: two transfers write rank {dst} {buf} chunks in the same step")
            if reduced[di].any():
                raise VerifyError(f"step {step_no}: rank {dst} {buf} chunks are copied and reduced into in the "
                                  f"same step")
            copied[di] = True
        else:
            if copied[di].any():
                raise VerifyError(f"step {step_no}: rank {dst} {buf} chunks are copied and reduced into in the "
                                  f"same step")
            if not (good.all() and ok[di].all()):
                raise VerifyError(f"step {step_no}: rank {dst} reduces uninitialized data")
            reduced[di] = True


def _check_outputs(st: _State, expectation: NumericExpectation, n: int, nsteps: int) -> None:
    """Every output chunk against its expected sum; the first wrong one, rank by rank, is named."""
    ranks = range(n)
    if expectation.same_for_all():
        outs, want = expectation(0)
        if not len(outs):
            return
        width = int(outs[-1]) + 1
        every = width == len(outs)        # outs is range(width): the rows as they are
        block = max(1, BLOCK // len(outs))
        for r0 in range(0, n, block):
            count = min(n, r0 + block) - r0
            got, held = st.rows(st.vals, 1, r0, count, width), st.rows(st.ok, 1, r0, count, width)
            if got is None or held is None:
                pos = st.slots(1, r0, count, width)
                got, held = st.vals[pos], st.ok[pos]
            if not every:
                got, held = got[:, outs], held[:, outs]
            wrong = (got != want[None, :]) | ~held
            if wrong.any():
                ranks = range(r0 + int(np.argmax(wrong.any(axis=1))), n)     # the first wrong rank, named below
                break
        else:
            return
    for r in ranks:
        outs, want = expectation(r)
        if len(outs) == 0:
            continue
        idx = outs + st.base[1, r]
        wrong_at = np.nonzero(~st.ok[idx] | (st.vals[idx] != want))[0]
        if len(wrong_at):
            raise VerifyError(f"after {nsteps} steps rank {r} output chunk {outs[int(wrong_at[0])]} holds a "
                              f"wrong value (numeric check: a contribution is missing, doubled or uninitialized)")
