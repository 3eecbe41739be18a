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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from collc.compiler.optable import BUF_CODE, Ints, OpTable
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
    table: OpTable             # every rank's ops, rank by rank, each rank's in plan order
    scratch: tuple[int, ...]   # scratch chunks per rank
    name: str
    _ops: list[tuple[RankOp, ...]] = field(default_factory=list, init=False, compare=False, repr=False)

    @property
    def ops(self) -> tuple[RankOp, ...]:
        """The ops as :class:`RankOp` in plan order -- transfer by transfer, each transfer's
        gathers, send, receive and scatters -- (built on first use: the passes read ``table``)."""
        if not self._ops:
            t = self.table
            self._ops.append(tuple(t.take(np.lexsort((t.sub, t.phase, t.number, t.step))).ops()))
        return self._ops[0]

    def by_rank(self) -> list[OpTable]:
        """Each rank's rows, in plan order (views of the table)."""
        rank = self.table.rank
        if len(rank) > 1 and bool((rank[1:] < rank[:-1]).any()):
            raise LoweringError("an op table out of rank order (expand writes it rank by rank)")
        bounds = np.searchsorted(rank, np.arange(self.collective.nranks + 1)).tolist()
        return [self.table.take(slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _phys_runs(pb: int, base: int, idx: range | tuple[int, ...]) -> list[tuple[int, int, int]]:
    """The (buffer, first slot, length) runs of ``idx`` in physical buffer ``pb`` at ``base``."""
    if type(idx) is range:
        return [(pb, base + idx.start, len(idx))]
    out: list[tuple[int, int, int]] = []
    for x in idx:
        i = base + x
        if out and out[-1][1] + out[-1][2] == i:
            out[-1] = (pb, out[-1][1], out[-1][2] + 1)
        else:
            out.append((pb, i, 1))
    return out


#: Order of an op among its transfer's (plan order): gathers, the send, the receive, scatters.
_SEQ_SEND, _SEQ_RECV, _SEQ_SCATTER = 1 << 40, 2 << 40, 3 << 40


def _overlaps(keys: Ints, lo: Ints, hi: Ints, qkey: Ints, qlo: Ints, qhi: Ints) -> npt.NDArray[np.bool_]:
    """Per query: whether ``[qlo, qhi)`` overlaps an interval ``[lo, hi)`` of the same key."""
    if not len(keys):
        return np.zeros(len(qkey), dtype=bool)
    shift = 1 << 32                         # slots and keys fit 31 bits each (check_program_size)
    order = np.lexsort((lo, keys))
    comp = keys[order] * shift + lo[order]
    top = np.maximum.accumulate(keys[order] * shift + hi[order])     # per key, the highest end so far
    j = np.searchsorted(comp, qkey * shift + qhi, "left") - 1          # the last interval starting below qhi
    ok = j >= 0
    j = np.maximum(j, 0)
    hit: npt.NDArray[np.bool_] = ok & (comp[j] // shift == qkey) & (top[j] - qkey * shift > qlo)
    return hit


def expand(schedule: Schedule) -> OpPlan:
    coll = schedule.collective
    n = coll.nranks
    ts = schedule.transfers
    count = len(ts)

    def col(values: Iterable[int]) -> Ints:
        return np.fromiter(values, dtype=np.int64, count=count)

    def pull(names: tuple[str, ...], to: Callable[[Any], int] = int) -> list[Ints]:
        """Attributes of every transfer, pulled in one pass (a million transfers on 32x32)."""
        flat = np.fromiter(map(to, chain.from_iterable(map(attrgetter(*names), ts))), dtype=np.int64,
                           count=count * len(names))
        return list(flat.reshape(count, len(names)).T)

    step, src, dst, lane = pull(("step", "src", "dst", "lane"))
    code = {b: BUF_CODE[b.value] for b in Buffer}
    sbuf, dbuf = pull(("src_buf", "dst_buf"), code.__getitem__)
    reduce = col(map({Op.COPY: 0, Op.REDUCE: 1}.__getitem__, map(attrgetter("op"), ts))) > 0
    sidx = list(map(attrgetter("src_idx"), ts))
    didx = list(map(attrgetter("dst_idx"), ts))
    size = col(map(len, sidx))
    chunk = col(x[0] for x in sidx)
    number = np.arange(count, dtype=np.int64) - np.searchsorted(step, step)       # index within its step
    # where each rank's logical buffers live (in-place aliasing)
    abuf = np.zeros((n, len(BUF_CODE)), dtype=np.int64)
    abase = np.zeros((n, len(BUF_CODE)), dtype=np.int64)
    for r in range(n):
        for b in Buffer:
            pb, base = coll.alias(r, b)
            abuf[r, code[b]], abase[r, code[b]] = BUF_CODE[pb.value], base
    ps_buf, pd_buf = abuf[src, sbuf], abuf[dst, dbuf]
    ps_off = abase[src, sbuf] + np.fromiter((x[0] for x in sidx), dtype=np.int64, count=count)
    pd_off = abase[dst, dbuf] + np.fromiter((x[0] for x in didx), dtype=np.int64, count=count)
    # index lists that are not ranges: their physical runs, worked out one by one
    s_runs = {k: _phys_runs(int(ps_buf[k]), int(abase[src[k], sbuf[k]]), sidx[k])
              for k in np.flatnonzero([type(x) is not range for x in sidx]).tolist()}
    d_runs = {k: _phys_runs(int(pd_buf[k]), int(abase[dst[k], dbuf[k]]), didx[k])
              for k in np.flatnonzero([type(x) is not range for x in didx]).tolist()}
    multi_s = np.zeros(count, dtype=bool)
    multi_s[[k for k, r in s_runs.items() if len(r) > 1]] = True
    multi_d = np.zeros(count, dtype=bool)
    multi_d[[k for k, r in d_runs.items() if len(r) > 1]] = True
    local = src == dst
    remote = ~local
    # the slots each step reads, per (step, rank, buffer): a receive that would write one of them
    # lands in scratch (an exchange: both sides' sends stay independent of their receives)
    rkey = [(step * n + src) * 3 + ps_buf]
    rlo, rhi = [ps_off], [ps_off + size]
    more = [(k, b, i, c) for k in np.flatnonzero(multi_s).tolist() for b, i, c in s_runs[k]]
    if more:
        mk, mb, mi, mc = (np.array(x, dtype=np.int64) for x in zip(*more))
        keep = ~multi_s
        rkey, rlo, rhi = [rkey[0][keep], (step[mk] * n + src[mk]) * 3 + mb], [rlo[0][keep], mi], [rhi[0][keep], mi + mc]
    into_scratch = remote & ~multi_d & _overlaps(np.concatenate(rkey), np.concatenate(rlo), np.concatenate(rhi),
                                                 (step * n + dst) * 3 + pd_buf, pd_off, pd_off + size)
    # scratch, fresh per use, in transfer order on each rank: a gather on the sender, a landing
    # place on the receiver
    a_src = remote & multi_s
    a_dst = remote & (multi_d | into_scratch)
    ev = np.concatenate([np.flatnonzero(a_src), np.flatnonzero(a_dst)])
    ev_rank = np.concatenate([src[a_src], dst[a_dst]])
    order = np.lexsort((ev, ev_rank))
    ev, ev_rank = ev[order], ev_rank[order]
    ev_size = size[ev]
    total = np.cumsum(ev_size)
    first = np.searchsorted(ev_rank, ev_rank)
    at = schedule.scratch_chunks + total - ev_size - (total[first] - ev_size[first])    # exclusive, per rank
    s_alloc = np.zeros(count, dtype=np.int64)
    d_alloc = np.zeros(count, dtype=np.int64)
    is_src = np.concatenate([np.ones(int(a_src.sum()), bool), np.zeros(int(a_dst.sum()), bool)])[order]
    s_alloc[ev[is_src]] = at[is_src]
    d_alloc[ev[~is_src]] = at[~is_src]
    scratch_top = [schedule.scratch_chunks] * n
    if len(ev):
        last = np.append(np.flatnonzero(ev_rank[1:] != ev_rank[:-1]), len(ev) - 1)
        for r, top in zip(ev_rank[last].tolist(), (at[last] + ev_size[last]).tolist()):
            scratch_top[r] = top
    # rows as columns (collc.compiler.optable.FIELDS but pos), each with its transfer and its
    # place among the transfer's ops
    parts: list[tuple[Ints, Ints, list[Ints]]] = []

    def rows(which: Ints, seq: int, fields: list[Ints | int]) -> None:
        k = np.flatnonzero(which)
        parts.append((k, np.full(len(k), seq, dtype=np.int64),
                      [f[k] if isinstance(f, np.ndarray) else np.full(len(k), f, dtype=np.int64) for f in fields]))

    red = reduce.astype(np.int64)
    sends = remote & ~multi_s
    rows(sends, _SEQ_SEND, [src, step, 1, _CS, dst, lane, ps_buf, ps_off, ps_buf, ps_off, size, 0, number, -1, chunk])
    recvs = remote & ~multi_d & ~into_scratch
    rows(recvs, _SEQ_RECV, [dst, step, 2, _CR, src, lane, pd_buf, pd_off, pd_buf, pd_off, size, red, number, -1,
                            chunk])
    landed = remote & ~multi_d & into_scratch
    rows(landed, _SEQ_RECV, [dst, step, 2, _CR, src, lane, _SCRATCH, d_alloc, _SCRATCH, d_alloc, size, 0, number, -1,
                             chunk])
    rows(landed, _SEQ_SCATTER, [dst, step, 3, np.where(reduce, _CRE, _CC), -1, lane, _SCRATCH, d_alloc, pd_buf,
                                pd_off, size, 0, number, d_alloc, chunk])
    # the rest one transfer at a time: gathers and scatters of index lists in several runs, and
    # local copies (which must not race their step)
    extra: list[tuple[int, ...]] = []
    seqs: list[int] = []
    tix: list[int] = []

    def add(k: int, seq: int, row: tuple[int, ...]) -> None:
        tix.append(k)
        seqs.append(seq)
        extra.append(row)
    for k in np.flatnonzero(remote & (multi_s | multi_d)).tolist():
        t = ts[k]
        st, nm, ln, ch, cnt = t.step, int(number[k]), t.lane, int(chunk[k]), len(t.src_idx)
        if multi_s[k]:
            pos = base = int(s_alloc[k])
            for j, (rb, ri, rc) in enumerate(s_runs[k]):
                add(k, j, (t.src, st, 0, _CC, -1, ln, rb, ri, _SCRATCH, pos, rc, 0, nm, pos, ch))
                pos += rc
            add(k, _SEQ_SEND, (t.src, st, 1, _CS, t.dst, ln, _SCRATCH, base, _SCRATCH, base, cnt, 0, nm, -1, ch))
        if multi_d[k]:
            pos = base = int(d_alloc[k])
            add(k, _SEQ_RECV, (t.dst, st, 2, _CR, t.src, ln, _SCRATCH, base, _SCRATCH, base, cnt, 0, nm, -1, ch))
            kind = _CRE if reduce[k] else _CC
            for j, (rb, ri, rc) in enumerate(d_runs[k]):
                add(k, _SEQ_SCATTER + j, (t.dst, st, 3, kind, -1, ln, _SCRATCH, pos, rb, ri, rc, 0, nm, pos, ch))
                pos += rc
    if local.any():
        _locals(schedule, ts, local, step, number, chunk, s_runs, d_runs, ps_buf, ps_off, pd_buf, pd_off, size, add)
    if extra:
        parts.append((np.array(tix, dtype=np.int64), np.array(seqs, dtype=np.int64),
                      list(np.array(extra, dtype=np.int64).reshape(len(extra), -1).T)))
    # rank by rank, each rank's rows in plan order (transfer by transfer): by_rank takes views
    order = np.lexsort((np.concatenate([p[1] for p in parts]), np.concatenate([p[0] for p in parts]),
                        np.concatenate([p[2][0] for p in parts])))
    cols = np.empty((len(parts[0][2]), len(order)), dtype=np.int64)
    for f in range(len(cols)):          # a field at a time: a million ops make 100 MB a copy
        cols[f] = np.concatenate([p[2][f] for p in parts])[order]
        for p in parts:
            p[2][f] = p[2][f][:0]
    return OpPlan(coll, OpTable.from_columns(cols), tuple(scratch_top), schedule.provenance.algorithm)


def _locals(schedule: Schedule, ts: Sequence[Transfer], local: npt.NDArray[np.bool_], step: Ints, number: Ints,
            chunk: Ints, s_runs: dict[int, list[tuple[int, int, int]]], d_runs: dict[int, list[tuple[int, int, int]]],
            ps_buf: Ints, ps_off: Ints, pd_buf: Ints, pd_off: Ints, size: Ints,
            add: Callable[[int, int, tuple[int, ...]], None]) -> None:
    """The local copies and reduces, step by step: each checked against the slots its step's
    other transfers read and write on its rank."""
    def runs(k: int, dst_side: bool) -> list[tuple[int, int, int]]:
        got = (d_runs if dst_side else s_runs).get(k)
        if got is not None:
            return got
        if dst_side:
            return [(int(pd_buf[k]), int(pd_off[k]), int(size[k]))]
        return [(int(ps_buf[k]), int(ps_off[k]), int(size[k]))]

    bounds = np.searchsorted(step, np.arange(schedule.nsteps + 1)).tolist()
    for s in np.unique(step[local]).tolist():
        lo, hi = bounds[s], bounds[s + 1]
        ranks = set(ts[k].src for k in range(lo, hi) if local[k])
        # the slots of the step on those ranks only: a local op is checked against its own rank's
        read_now: dict[int, set[tuple[int, int]]] = {}
        written_now: dict[int, set[tuple[int, int]]] = {}
        for k in range(lo, hi):
            t = ts[k]
            for rank, dst_side, now in ((t.src, False, read_now), (t.dst, True, written_now)):
                if rank in ranks:
                    now.setdefault(rank, set()).update((b, i + j) for b, i, c in runs(k, dst_side) for j in range(c))
        for k in range(lo, hi):
            if local[k]:
                _local(ts[k], s, int(number[k]), runs(k, False), runs(k, True), read_now, written_now,
                       partial(add, k), int(chunk[k]))


def _local(t: Transfer, step_no: int, number: int, srcs: list[tuple[int, int, int]],
           dsts: list[tuple[int, int, int]], read_now: dict[int, set[tuple[int, int]]],
           written_now: dict[int, set[tuple[int, int]]], emit: Callable[[int, tuple[int, ...]], None],
           chunk: int) -> None:
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
            emit(start, (t.src, step_no, 0, kind, -1, t.lane, sb, so, db, do, k - start, 0, number, start, chunk))
            start = k
