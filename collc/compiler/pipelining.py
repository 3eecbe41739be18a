"""Pass: pipelining and instances, on the transfer table (Schedule -> TransferTable).

Lowering reads the Schedule's transfers into a :class:`collc.compiler.transfers.TransferTable`
once, here (``collc.compiler.pipeline``), and both functions below work on its columns.

``split_chunks(table, parts, instances)`` multiplies the chunk factor by
``parts * instances``.  Every chunk index ``x`` becomes the sub-chunks
``x*m .. x*m+m-1`` (``m = parts*instances``); a transfer's expanded index list is
cut into ``m`` consecutive pieces, so a contiguous transfer stays contiguous
(local copies and reduces stay whole: pieces would only add steps).
Pieces of one instance share a lane (channels of their own); the ``parts``
pieces of a transfer are separate transfers, which lets the runtime overlap step
``t`` of one piece with step ``t+1`` of the previous one.

Guarantees: the result computes the same collective (the layout of each rank's
block is preserved because sub-chunks of chunk ``x`` stay inside ``x``), steps are
unchanged, and lanes are ``instance * old_lanes + old_lane`` (tb pair hints follow
their lane into every instance).  The ``ordered_sends`` hint is dropped: pieces
are there to overlap on a link.

``cap_counts(table, max_cnt)`` cuts every transfer of more than ``max_cnt`` chunks into
near-equal contiguous parts.  Both keep the rows in the Schedule's order
(``Transfer.sort_key``), as the Schedule of their pieces would have them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from collc.arrays import unique
from collc.compiler.optable import Ints, encode
from collc.compiler.transfers import TransferTable, gather, pack
from collc.errors import LoweringError


def _pieces(offset: Ints, cnt: Ints, cols: Ints, flats: tuple[Ints, Ints]) -> tuple[Ints, Ints]:
    """Make the rows ``cols`` (copies of their transfers' rows, chunk lists already scaled)
    pieces: piece k is ``cnt[k]`` chunks from ``offset[k]`` of its transfer's list (a range from
    ``cols[8 + side]``, else from ``cols[10 + side]`` in that side's ``flats``); the kept lists."""
    out: list[Ints] = []
    for side in (0, 1):
        first, at = cols[8 + side], cols[10 + side]
        rng = at < 0
        first[rng] += offset[rng]
        k = np.flatnonzero(~rng)
        lst = gather(flats[side], at[k] + offset[k], cnt[k])
        at[k], kept = pack(lst, cnt[k])
        first[k] = lst[np.cumsum(cnt[k]) - cnt[k]]
        out.append(kept)
    return out[0], out[1]


def split_chunks(table: TransferTable, parts: int = 1, instances: int = 1) -> TransferTable:
    if parts < 1 or instances < 1:
        raise LoweringError(f"chunks and instances must be >= 1, got {parts} and {instances}")
    m = parts * instances
    if m == 1:
        return table
    _check_pieces(table, m)
    lanes = table.lanes
    local = table.src == table.dst
    many = np.where(local, 1, m)                 # a local copy gains nothing from pieces: kept whole
    owner = np.repeat(np.arange(len(table), dtype=np.int64), many)
    piece = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(many) - many, many)
    whole = local[owner]
    cnt = table.cnt[owner]
    cols = table.cols[:, owner]
    cols[6] = np.where(whole, cols[6], (piece // parts) * lanes + cols[6])
    cols[7] = np.where(whole, cnt * m, cnt)
    # a range's sub-chunks start at first * m; a list's are x*m .. x*m+m-1 for each of its x, and
    # its ``at`` moves to at * m
    cols[8] *= m
    cols[9] *= m
    for side in (10, 11):
        cols[side] = np.where(cols[side] < 0, -1, cols[side] * m)
    sub = np.arange(m, dtype=np.int64)
    flats = ((table.sflat[:, None] * m + sub).reshape(-1), (table.dflat[:, None] * m + sub).reshape(-1))
    sflat, dflat = _pieces(piece * cnt, cols[7], cols, flats)
    coll = replace(table.collective, chunk_factor=table.collective.chunk_factor * m)
    params = table.provenance.params + (("chunks", str(parts)), ("instances", str(instances)))
    pairs = tuple((rank, inst * lanes + lane, a, b) for inst in range(instances)
                  for rank, lane, a, b in table.tb_pairs)
    return TransferTable(coll, replace(table.provenance, params=params), cols, sflat, dflat,
                         scratch_chunks=table.scratch_chunks * m, tb_pairs=pairs, step_sync=table.step_sync,
                         step_reply=table.step_reply).sorted()


#: Steps one rank can hold: the parser's 4095 nodes less ``<algo>``, one ``<gpu>`` and one ``<tb>``.
MAX_RANK_STEPS = 4092


def _check_pieces(table: TransferTable, m: int) -> None:
    """Refuse, before expanding anything, a split that gives some rank more steps than a file holds.

    Every piece of a transfer is a send step on its source and a receive step on its
    destination; a receive and a send may fuse into one step, and transfers of one step
    between the same pair count once (in case they merge), so ``m`` times a rank's distinct
    sends (or receives) by (step, peer) bounds its steps from below.
    """
    remote = table.src != table.dst
    src, dst, step = table.src[remote], table.dst[remote], table.step[remote]
    if not len(src):
        return
    n, steps = table.collective.nranks, table.nsteps
    # (rank, sending, step, peer) as one number, rank and side leading
    seen = unique(np.concatenate([((src * 2 + 1) * steps + step) * n + dst, ((dst * 2) * steps + step) * n + src]))
    per_side = np.bincount(seen // (steps * n), minlength=2 * n)
    side = int(np.argmax(per_side))                # the most steps, and of those the lowest rank
    rank, most = side // 2, int(per_side[side])
    if most * m > MAX_RANK_STEPS:
        raise LoweringError(f"chunks x instances = {m} gives rank {rank} at least {most * m} steps, more "
                            f"than the {MAX_RANK_STEPS} a rank can hold in the runtime's 4095 XML nodes: use fewer "
                            f"--chunks or --instances")


def cap_counts(table: TransferTable, max_cnt: int) -> TransferTable:
    """Split every transfer of more than ``max_cnt`` chunks into near-equal contiguous parts."""
    if not len(table) or int(table.cnt.max()) <= max_cnt:
        return table
    many = -(-table.cnt // max_cnt)
    owner = np.repeat(np.arange(len(table), dtype=np.int64), many)
    k = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(many) - many, many)
    cnt, parts = table.cnt[owner], many[owner]
    lo, hi = cnt * k // parts, cnt * (k + 1) // parts
    cols = table.cols[:, owner]
    cols[7] = hi - lo
    sflat, dflat = _pieces(lo, cols[7], cols, (table.sflat, table.dflat))
    return _sorted_pieces(replace(table, cols=cols, sflat=sflat, dflat=dflat))


def _sorted_pieces(table: TransferTable) -> TransferTable:
    """``table.sorted()`` of pieces of a sorted table's rows, each piece where its transfer was:
    their (step, lane, src, dst) are in order already, so one stable sort of (that run's
    number, sfirst, dfirst) finds the order -- a merge of runs, not lexsort's six sorts."""
    n = len(table)
    if n < 2:
        return table.sorted()
    later = np.zeros(n - 1, dtype=bool)      # a row's (step, lane, src, dst) above the one before
    same = np.ones(n - 1, dtype=bool)
    for c in (table.step, table.lane, table.src, table.dst):
        if bool((same & (c[1:] < c[:-1])).any()):
            return table.sorted()            # not pieces of a sorted table after all
        later |= same & (c[1:] > c[:-1])
        same &= c[1:] == c[:-1]
    run = np.concatenate([[0], np.cumsum(later)]).astype(np.int64)
    order = np.argsort(encode([run, table.sfirst, table.dfirst]), kind="stable")
    if bool((order[1:] > order[:-1]).all()):
        return table                         # in order already (the usual case): no copy
    return replace(table, cols=table.cols[:, order])
