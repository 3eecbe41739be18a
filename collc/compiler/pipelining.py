"""Pass: pipelining and instances (Schedule -> Schedule).

``split_chunks(schedule, parts, instances)`` multiplies the chunk factor by
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
"""

from __future__ import annotations

from dataclasses import replace

from collc.errors import LoweringError
from collc.ir.schedule import Schedule, Transfer, make_slots


def _expand(idx: range | tuple[int, ...], m: int) -> list[int]:
    if isinstance(idx, range):
        return list(range(idx.start * m, idx.stop * m))
    return [x * m + j for x in idx for j in range(m)]


def split_chunks(schedule: Schedule, parts: int = 1, instances: int = 1) -> Schedule:
    if parts < 1 or instances < 1:
        raise LoweringError(f"chunks and instances must be >= 1, got {parts} and {instances}")
    m = parts * instances
    if m == 1:
        return schedule
    _check_pieces(schedule, m)
    lanes = schedule.lanes
    out: list[Transfer] = []
    for t in schedule.transfers:
        src = _expand(t.src_idx, m)
        dst = _expand(t.dst_idx, m)
        if t.is_local:
            # a local copy gains nothing from pieces: keep it whole (cap_counts bounds its cnt)
            out.append(replace(t, src_idx=make_slots(src), dst_idx=make_slots(dst)))
            continue
        size = t.count
        for piece in range(m):
            inst = piece // parts
            sl = slice(piece * size, (piece + 1) * size)
            out.append(Transfer(t.step, t.src, t.dst, t.src_buf, make_slots(src[sl]), t.dst_buf,
                                make_slots(dst[sl]), t.op, inst * lanes + t.lane))
    coll = replace(schedule.collective, chunk_factor=schedule.collective.chunk_factor * m)
    params = schedule.provenance.params + (("chunks", str(parts)), ("instances", str(instances)))
    pairs = tuple((rank, inst * lanes + lane, a, b) for inst in range(instances)
                  for rank, lane, a, b in schedule.tb_pairs)
    return Schedule(coll, tuple(out), replace(schedule.provenance, params=params),
                    scratch_chunks=schedule.scratch_chunks * m, tb_pairs=pairs, step_sync=schedule.step_sync,
                    step_reply=schedule.step_reply)


#: Steps one rank can hold: the parser's 4095 nodes less ``<algo>``, one ``<gpu>`` and one ``<tb>``.
MAX_RANK_STEPS = 4092


def _check_pieces(schedule: Schedule, m: int) -> None:
    """Refuse, before expanding anything, a split that gives some rank more steps than a file holds.

    Every piece of a transfer is a send step on its source and a receive step on its
    destination; a receive and a send may fuse into one step, and transfers of one step
    between the same pair count once (in case they merge), so ``m`` times a rank's distinct
    sends (or receives) by (step, peer) bounds its steps from below.
    """
    seen: set[tuple[int, bool, int, int]] = set()
    for t in schedule.transfers:
        if not t.is_local:
            seen.add((t.src, True, t.step, t.dst))
            seen.add((t.dst, False, t.step, t.src))
    per_side: dict[tuple[int, bool], int] = {}
    for rank, sending, _, _ in seen:
        per_side[(rank, sending)] = per_side.get((rank, sending), 0) + 1
    worst = max(((r, n) for (r, _), n in per_side.items()), key=lambda kv: (kv[1], -kv[0]), default=(0, 0))
    if worst[1] * m > MAX_RANK_STEPS:
        raise LoweringError(f"chunks x instances = {m} gives rank {worst[0]} at least {worst[1] * m} steps, more "
                            f"than the {MAX_RANK_STEPS} a rank can hold in the runtime's 4095 XML nodes: use fewer "
                            f"--chunks or --instances")


def cap_counts(schedule: Schedule, max_cnt: int) -> Schedule:
    """Split every transfer of more than ``max_cnt`` chunks into near-equal contiguous parts."""
    if all(t.count <= max_cnt for t in schedule.transfers):
        return schedule
    out: list[Transfer] = []
    for t in schedule.transfers:
        if t.count <= max_cnt:
            out.append(t)
            continue
        parts = -(-t.count // max_cnt)
        src, dst = t.src_idx, t.dst_idx    # a range slices into ranges, in O(1)
        bounds = [t.count * k // parts for k in range(parts + 1)]
        for a, b in zip(bounds, bounds[1:]):
            out.append(Transfer(t.step, t.src, t.dst, t.src_buf, make_slots(src[a:b]), t.dst_buf,
                                make_slots(dst[a:b]), t.op, t.lane))
    return Schedule(schedule.collective, tuple(out), schedule.provenance, schedule.scratch_chunks,
                    schedule.tb_pairs, schedule.step_sync, schedule.ordered_sends, schedule.step_reply)
