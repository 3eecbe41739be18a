"""Symbolic execution of a Schedule: postcondition, double reduction, links.

Independent of lowering (DESIGN 4.7): it executes the transfers step by step with
synchronous semantics (all reads of step ``t`` see the state after step ``t-1``)
on the physical buffers of the collective's placement, then compares every
output chunk with the collective's postcondition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from collc.errors import VerifyError
from collc.ir.collective import Buffer
from collc.ir.schedule import Op, Schedule, Slots, Transfer
from collc.ir.symbolic import DataError, ExactDomain, NumericExpectation, leaf_values

if TYPE_CHECKING:
    from collc.topology import Topology


def check_links(schedule: Schedule, topology: Topology) -> None:
    """Every remote transfer must use a link, or a route through switches only
    (any pair on a routed network such as a torus)."""
    if topology.nranks != schedule.collective.nranks:
        raise VerifyError(f"schedule has {schedule.collective.nranks} ranks but topology "
                          f"{topology.name} has {topology.nranks}")
    if topology.is_routed():
        return  # the network forwards between any two ranks (collc.sim routes the load)
    seen: set[tuple[int, int]] = set()
    for t in schedule.transfers:
        pair = (t.src, t.dst)
        if t.is_local or pair in seen:
            continue
        seen.add(pair)
        if topology.route(t.src, t.dst) is None:
            raise VerifyError(f"step {t.step}: rank {t.src} sends to rank {t.dst}, but {topology.name} "
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
    if topology is not None:
        check_links(schedule, topology)
    coll = schedule.collective
    if data_check == "numeric" or (data_check == "auto" and
                                   coll.nranks * max(coll.input_chunks, coll.output_chunks) > EXACT_LIMIT):
        _verify_numeric(schedule)
        return
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


LONG = 32   # chunks per transfer from which a step is checked transfer by transfer (slices)


def _verify_numeric(schedule: Schedule, seed: int = 1) -> None:
    """The same step semantics on random 64-bit values (numpy), for very large schedules."""
    coll = schedule.collective
    n = coll.nranks
    sizes = {Buffer.INPUT: coll.input_chunks, Buffer.OUTPUT: coll.output_chunks,
             Buffer.SCRATCH: schedule.scratch_chunks}
    alias = [{b: coll.alias(r, b) for b in Buffer} for r in range(n)]
    phys = {b for r in range(n) for b, _ in alias[r].values()}
    vals = {b: np.zeros((n, sizes[b]), dtype=np.uint64) for b in phys}
    ok = {b: np.zeros((n, sizes[b]), dtype=bool) for b in phys}
    stamp = {b: np.full((n, sizes[b]), -1, dtype=np.int32) for b in phys}   # step of the last copy-in
    rstamp = {b: np.full((n, sizes[b]), -1, dtype=np.int32) for b in phys}  # step of the last reduction
    for r in range(n):
        pb, base = alias[r][Buffer.INPUT]
        vals[pb][r, base:base + coll.input_chunks] = leaf_values(seed, r, coll.input_chunks)
        ok[pb][r, base:base + coll.input_chunks] = True

    def index(rank: int, buf: Buffer, idx: range | tuple[int, ...]) -> tuple[Buffer, slice | np.ndarray]:
        pb, base = alias[rank][buf]
        if isinstance(idx, range):
            return pb, slice(base + idx.start, base + idx.stop)
        return pb, np.asarray(idx, dtype=np.int64) + base

    def step_by_transfer(step_no: int, transfers: tuple[Transfer, ...]) -> None:
        """One step transfer by transfer (slices: fast for long transfers); names any problem."""
        moves = []
        for t in transfers:   # all reads of the step first
            sb, si = index(t.src, t.src_buf, t.src_idx)
            moves.append((t, vals[sb][t.src, si].copy(), ok[sb][t.src, si].copy()))
        for t, v, good in moves:
            db, di = index(t.dst, t.dst_buf, t.dst_idx)
            if t.op is Op.COPY:
                if (stamp[db][t.dst, di] == step_no).any():
                    raise VerifyError(f"step {step_no}: two transfers write rank {t.dst} {t.dst_buf.value} "
                                      f"chunks in the same step")
                if (rstamp[db][t.dst, di] == step_no).any():
                    raise VerifyError(f"step {step_no}: rank {t.dst} {t.dst_buf.value} chunks are copied and "
                                      f"reduced into in the same step")
                stamp[db][t.dst, di] = step_no
                vals[db][t.dst, di] = v
                ok[db][t.dst, di] = good
            else:
                if (stamp[db][t.dst, di] == step_no).any():
                    raise VerifyError(f"step {step_no}: rank {t.dst} {t.dst_buf.value} chunks are copied and "
                                      f"reduced into in the same step")
                if not (good.all() and ok[db][t.dst, di].all()):
                    raise VerifyError(f"step {step_no}: rank {t.dst} reduces uninitialized data")
                vals[db][t.dst, di] += v
                rstamp[db][t.dst, di] = step_no

    def flat(ranks: list[int], bufs: list[Buffer], idxs: list[range | tuple[int, ...]]) -> tuple[
            np.ndarray, np.ndarray, np.ndarray]:
        """(physical buffer code, rank, slot) of every chunk the given transfer ends name."""
        lens = np.fromiter((len(i) for i in idxs), dtype=np.int64, count=len(idxs))
        code = np.empty(len(idxs), dtype=np.int64)
        first = np.empty(len(idxs), dtype=np.int64)
        for k, (r, b, i) in enumerate(zip(ranks, bufs, idxs)):
            pb, base = alias[r][b]
            code[k] = code_of[pb]
            first[k] = base + (i.start if isinstance(i, range) else 0)
        # slot of each chunk: first + its position within the transfer (tuples filled in below)
        offs = np.cumsum(lens) - lens
        slot = np.repeat(first - offs, lens) + np.arange(int(lens.sum()), dtype=np.int64)
        for k, i in enumerate(idxs):
            if not isinstance(i, range):
                o = int(offs[k])
                slot[o:o + len(i)] = np.asarray(i, dtype=np.int64) + first[k]
        return np.repeat(code, lens), np.repeat(np.asarray(ranks, dtype=np.int64), lens), slot

    code_of = {b: k for k, b in enumerate(sorted(phys, key=lambda b: b.value))}
    codes = {k: b for b, k in code_of.items()}
    with np.errstate(over="ignore"):
        for step_no, transfers in enumerate(schedule.steps):
            if not transfers:
                continue
            if sum(len(t.src_idx) for t in transfers) >= LONG * len(transfers):
                step_by_transfer(step_no, transfers)
                continue
            # short transfers: the whole step at once in flat arrays
            scode, srank, sslot = flat([t.src for t in transfers], [t.src_buf for t in transfers],
                                       [t.src_idx for t in transfers])
            dcode, drank, dslot = flat([t.dst for t in transfers], [t.dst_buf for t in transfers],
                                       [t.dst_idx for t in transfers])
            reduce = np.repeat(np.fromiter((t.op is Op.REDUCE for t in transfers), dtype=bool, count=len(transfers)),
                               [len(t.src_idx) for t in transfers])
            # all reads of the step first
            v = np.empty(len(scode), dtype=np.uint64)
            good = np.empty(len(scode), dtype=bool)
            for k, b in codes.items():
                m = scode == k
                v[m] = vals[b][srank[m], sslot[m]]
                good[m] = ok[b][srank[m], sslot[m]]
            # the step is well formed: no slot copied twice, or copied and reduced into; reductions
            # read initialized data.  Otherwise the transfer-by-transfer pass names the problem.
            # Collisions without sorting: every chunk written stamps its own id into its slot, and a
            # chunk that reads back another id shares the slot with another write of this step.
            ids = -2 - np.arange(len(dcode), dtype=np.int32)   # never a step number, nor -1
            back = np.empty(len(dcode), dtype=np.int32)
            for k, b in codes.items():
                m = dcode == k
                stamp[b][drank[m], dslot[m]] = ids[m]
                back[m] = stamp[b][drank[m], dslot[m]]
            shared = back != ids
            bad = bool((shared & ~reduce).any()) or not bool(reduce[-2 - back[shared & reduce]].all())
            if not bad and reduce.any():
                dst_ok = np.empty(int(reduce.sum()), dtype=bool)
                rc, rr, rs = dcode[reduce], drank[reduce], dslot[reduce]
                for k, b in codes.items():
                    m = rc == k
                    dst_ok[m] = ok[b][rr[m], rs[m]]
                bad = not (good[reduce].all() and dst_ok.all())
            if bad:
                step_by_transfer(step_no, transfers)
                raise AssertionError("the transfer-by-transfer pass must name the problem")  # pragma: no cover
            several = bool((shared & reduce).any())   # several reductions into one slot: add them all
            for k, b in codes.items():
                m = (dcode == k) & ~reduce
                vals[b][drank[m], dslot[m]] = v[m]
                ok[b][drank[m], dslot[m]] = good[m]
                m = (dcode == k) & reduce
                if several:
                    np.add.at(vals[b], (drank[m], dslot[m]), v[m])
                else:
                    vals[b][drank[m], dslot[m]] += v[m]
    expectation = NumericExpectation(coll, seed)
    for r in range(n):
        ob, obase = alias[r][Buffer.OUTPUT]
        outs, want = expectation(r)
        if len(outs) == 0:
            continue
        idx = outs + obase
        wrong = np.nonzero(~ok[ob][r, idx] | (vals[ob][r, idx] != want))[0]
        if len(wrong):
            raise VerifyError(f"after {schedule.nsteps} steps rank {r} output chunk {outs[int(wrong[0])]} holds a "
                              f"wrong value (numeric check: a contribution is missing, doubled or uninitialized)")
