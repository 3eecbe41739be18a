"""Pass: expand transfers into per-rank operations, allocating scratch (Schedule -> OpPlan).

Every remote transfer becomes a send on its source rank and a receive on its
destination rank; a local transfer becomes a ``cpy`` or ``re``.  Buffers are
resolved to the physical buffer of the placement (in-place aliasing), so later
passes and the XML see real slots.

Scratch is allocated (fresh, never reused, so it adds no ordering) where:

* a transfer's source chunks are not contiguous: local copies gather them into
  scratch and one message of ``cnt`` chunks is sent;
* a transfer's destination chunks are not contiguous: the message lands in
  scratch and local copies/reduces scatter it;
* a receive would write a slot that a send of the same step still reads (an
  exchange such as recursive doubling): receiving into scratch and applying it
  with a local op afterwards keeps both sides' sends independent of their
  receives, so no exchange waits on FIFO capacity.

Guarantees: each op has contiguous operands with ``cnt`` >= 1; ``phase`` orders
ops of one step (0 local/gather, 1 send, 2 receive, 3 scatter) so that reads of a
step see the state before its writes, as the Schedule's synchronous semantics
require.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

from collc.compiler.optable import BUF_CODE, OpTable
from collc.errors import LoweringError
from collc.ir.collective import Buffer, Collective
from collc.ir.schedule import Op, Schedule, Transfer

Slot = tuple[str, int]
Interval = tuple[str, int, int]   # buffer, first chunk, end (exclusive)


class Kind(str, Enum):
    SEND = "send"
    RECV = "recv"
    COPY = "cpy"
    REDUCE = "re"


_SEND, _RECV, _COPY, _REDUCE = Kind.SEND, Kind.RECV, Kind.COPY, Kind.REDUCE
KINDS = (_SEND, _RECV, _COPY, _REDUCE)     # the kind codes of ``collc.compiler.optable``
# the codes as written into the rows
_CS, _CR, _CC, _CRE = 0, 1, 2, 3
_SCRATCH = BUF_CODE["s"]


class _RankOpFields(NamedTuple):
    rank: int
    step: int
    phase: int
    kind: Kind
    peer: int            # -1 for local ops
    lane: int
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    reduce: bool         # receive: dst = dst (+) received
    key: tuple[int, ...]  # transfer identity: equal on both ends of a message, orders a connection
    chunk: int           # first logical chunk moved (channel hashing)
    # derived once, used by every later pass: the logical position, and the slots read and
    # written as (buffer, lo, hi) intervals (compact: a 4096-rank program has 10^8 chunk slots)
    pos: tuple[int, ...]
    rd: tuple[Interval, ...]
    wr: tuple[Interval, ...]


class RankOp(_RankOpFields):
    """One rank's op, immutable: the readable view of one row of the op table
    (:meth:`collc.compiler.optable.OpTable.ops`), for dumps and tests; the passes read the
    columns.  Built from its first 14 fields; ``pos``, ``rd`` and ``wr`` are derived from them."""

    __slots__ = ()

    def __new__(cls, rank: int, step: int, phase: int, kind: Kind, peer: int, lane: int, srcbuf: str,
                srcoff: int, dstbuf: str, dstoff: int, cnt: int, reduce: bool, key: tuple[int, ...],
                chunk: int) -> RankOp:
        if kind is _SEND:
            rd: tuple[Interval, ...] = ((srcbuf, srcoff, srcoff + cnt),)
            dst: tuple[Interval, ...] = ()
        else:
            dst = ((dstbuf, dstoff, dstoff + cnt),)
            if kind is _RECV:
                rd = dst if reduce else ()
            else:
                src = ((srcbuf, srcoff, srcoff + cnt),)
                rd = src if kind is _COPY else src + dst
        return tuple.__new__(cls, (rank, step, phase, kind, peer, lane, srcbuf, srcoff, dstbuf, dstoff, cnt,
                                   reduce, key, chunk, (step, phase) + key, rd, dst))

    def __getnewargs__(self) -> tuple[Any, ...]:   # pickling rebuilds from the 14 given fields
        return tuple(self[:14])

    def __repr__(self) -> str:
        return "RankOp(" + ", ".join(f"{f}={v!r}" for f, v in zip(self._fields[:14], self)) + ")"

    def reads(self) -> list[Slot]:
        return expand_slots(self.rd)

    def writes(self) -> list[Slot]:
        return expand_slots(self.wr)


def expand_slots(intervals: tuple[Interval, ...]) -> list[Slot]:
    return [(b, i) for b, lo, hi in intervals for i in range(lo, hi)]


@dataclass(frozen=True)
class OpPlan:
    collective: Collective
    table: OpTable             # every rank's ops, in the order ``expand`` made them
    scratch: tuple[int, ...]   # scratch chunks per rank
    name: str
    _ops: list[tuple[RankOp, ...]] = field(default_factory=list, init=False, compare=False, repr=False)

    @property
    def ops(self) -> tuple[RankOp, ...]:
        """The rows as :class:`RankOp` (built on first use: the passes read ``table``)."""
        if not self._ops:
            self._ops.append(tuple(self.table.ops()))
        return self._ops[0]

    def by_rank(self) -> list[OpTable]:
        """Each rank's rows, in plan order (views of one copy of the table sorted by rank)."""
        rank = self.table.rank
        ranked = self.table.take(np.argsort(rank, kind="stable"))
        bounds = np.searchsorted(ranked.rank, np.arange(self.collective.nranks + 1)).tolist()
        return [ranked.take(slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _runs(idx: range | tuple[int, ...]) -> list[tuple[int, int]]:
    """(start, length) runs of consecutive indices, in list order."""
    out: list[tuple[int, int]] = []
    for x in idx:
        if out and out[-1][0] + out[-1][1] == x:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((x, 1))
    return out


class _Intervals:
    """Half-open slot intervals per (rank, buffer), merged lazily for overlap queries
    (given whole: ``expand`` gathers a step's intervals in a dict before any query, which
    costs no method call per transfer)."""

    def __init__(self, raw: dict[tuple[int, int], list[tuple[int, int]]]) -> None:
        self._raw = raw
        self._merged: dict[tuple[int, int], tuple[list[int], list[int]]] = {}

    def overlaps(self, rank: int, buf: int, lo: int, hi: int) -> bool:
        key = (rank, buf)
        raw = self._raw.get(key)
        if raw is None:
            return False
        if len(raw) == 1:
            a, b = raw[0]
            return a < hi and lo < b
        if key not in self._merged:
            starts: list[int] = []
            ends: list[int] = []
            for a, b in sorted(self._raw[key]):
                if ends and a <= ends[-1]:
                    ends[-1] = max(ends[-1], b)
                else:
                    starts.append(a)
                    ends.append(b)
            self._merged[key] = (starts, ends)
        starts, ends = self._merged[key]
        i = bisect_right(starts, lo) - 1
        if i >= 0 and ends[i] > lo:
            return True
        return i + 1 < len(starts) and starts[i + 1] < hi


def expand(schedule: Schedule) -> OpPlan:
    coll = schedule.collective
    n = coll.nranks
    scratch_top = [schedule.scratch_chunks] * n
    ops: list[tuple[int, ...]] = []      # rows of the op table (collc.compiler.optable.FIELDS)

    def alloc(rank: int, size: int) -> int:
        base = scratch_top[rank]
        scratch_top[rank] += size
        return base

    aliases = [{b: (BUF_CODE[pb.value], base) for b in Buffer for pb, base in [coll.alias(r, b)]}
               for r in range(n)]

    def phys_runs(rank: int, buf: Buffer, idx: range | tuple[int, ...]) -> list[tuple[int, int, int]]:
        pb, base = aliases[rank][buf]
        if isinstance(idx, range):
            return [(pb, base + idx.start, len(idx))]
        out: list[tuple[int, int, int]] = []
        for x in idx:
            i = base + x
            if out and out[-1][1] + out[-1][2] == i:
                out[-1] = (pb, out[-1][1], out[-1][2] + 1)
            else:
                out.append((pb, i, 1))
        return out

    reduce_op = Op.REDUCE
    for step_no, transfers in enumerate(schedule.steps):
        # slots read by this step's transfers, per rank, as merged intervals; each transfer's
        # physical runs are computed once (a range is one run)
        read_ivs: dict[tuple[int, int], list[tuple[int, int]]] = {}
        runs: list[tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]] = []
        local: set[int] = set()      # ranks with a local copy or reduce in this step
        for t in transfers:
            src = t.src
            srcs = phys_runs(src, t.src_buf, t.src_idx)
            runs.append((srcs, phys_runs(t.dst, t.dst_buf, t.dst_idx)))
            for b, i, c in srcs:
                read_ivs.setdefault((src, b), []).append((i, i + c))
            if src == t.dst:
                local.add(src)
        reads = _Intervals(read_ivs)
        # the slots of the step on those ranks only: a local op is checked against its own rank's
        read_now: dict[int, set[tuple[int, int]]] = {}
        written_now: dict[int, set[tuple[int, int]]] = {}
        if local:
            for (srcs, dsts), t in zip(runs, transfers):
                for rank, rr, now in ((t.src, srcs, read_now), (t.dst, dsts, written_now)):
                    if rank in local:
                        now.setdefault(rank, set()).update((b, i + j) for b, i, c in rr for j in range(c))
        add = ops.append
        for number, t in enumerate(transfers):
            chunk = t.src_idx[0]
            srcs, dsts = runs[number]
            src, dst, lane = t.src, t.dst, t.lane
            if src == dst:
                _local(t, step_no, number, srcs, dsts, read_now, written_now, ops, chunk)
                continue
            count = len(t.src_idx)
            # sender side
            if len(srcs) == 1:
                sbuf, soff, _ = srcs[0]
            else:
                sbuf, soff = _SCRATCH, alloc(src, count)
                pos = soff
                for b, i, c in srcs:
                    add((src, step_no, 0, _CC, -1, lane, b, i, _SCRATCH, pos, c, 0, number, pos, chunk))
                    pos += c
            add((src, step_no, 1, _CS, dst, lane, sbuf, soff, sbuf, soff, count, 0, number, -1, chunk))
            # receiver side
            reduce = t.op is reduce_op
            b, i, c = dsts[0]
            if len(dsts) == 1 and not reads.overlaps(dst, b, i, i + c):
                add((dst, step_no, 2, _CR, src, lane, b, i, b, i, count, int(reduce), number, -1, chunk))
                continue
            base = alloc(dst, count)
            add((dst, step_no, 2, _CR, src, lane, _SCRATCH, base, _SCRATCH, base, count, 0, number, -1, chunk))
            pos = base
            kind = _CRE if reduce else _CC
            for b, i, c in dsts:
                add((dst, step_no, 3, kind, -1, lane, _SCRATCH, pos, b, i, c, 0, number, pos, chunk))
                pos += c
    return OpPlan(coll, OpTable.from_rows(ops), tuple(scratch_top), schedule.provenance.algorithm)


def _local(t: Transfer, step_no: int, number: int, srcs: list[tuple[int, int, int]],
           dsts: list[tuple[int, int, int]], read_now: dict[int, set[tuple[int, int]]],
           written_now: dict[int, set[tuple[int, int]]], ops: list[tuple[int, ...]], chunk: int) -> None:
    """A local copy or reduce reads and writes in one op: it must not race its own step."""
    mine_r = {(b, i + j) for b, i, c in srcs for j in range(c)}
    mine_w = {(b, i + j) for b, i, c in dsts for j in range(c)}
    if mine_r == mine_w:
        return  # in place the copy is onto itself (allgather's own block): nothing to do
    others_w = written_now.get(t.src, set()) - mine_w
    others_r = read_now.get(t.src, set()) - mine_r
    if mine_r & others_w or mine_w & others_r:
        raise LoweringError(f"step {step_no}: the local {t.op.value} on rank {t.src} touches chunks another "
                            f"transfer of the same step uses; put it in a step of its own")
    # split into pieces where both sides stay contiguous
    flat_s = [(b, i + j) for b, i, c in srcs for j in range(c)]
    flat_d = [(b, i + j) for b, i, c in dsts for j in range(c)]
    start = 0
    kind = _CRE if t.op is Op.REDUCE else _CC
    for k in range(1, len(flat_s) + 1):
        end_run = k == len(flat_s) or flat_s[k][0] != flat_s[k - 1][0] or flat_s[k][1] != flat_s[k - 1][1] + 1 \
            or flat_d[k][0] != flat_d[k - 1][0] or flat_d[k][1] != flat_d[k - 1][1] + 1
        if end_run:
            (sb, so), (db, do) = flat_s[start], flat_d[start]
            ops.append((t.src, step_no, 0, kind, -1, t.lane, sb, so, db, do, k - start, 0, number, start, chunk))
            start = k
