"""Race check support (code ``race``): which tbs need vector clocks.

A step races when it touches a slot that another tb of the same GPU writes with no
happens-before between them (program order, flags and messages; never buffer capacity).
Only tbs that share a written slot with another tb can race, so the simulation tracks
vector clocks over those alone.
"""

from __future__ import annotations

import numpy as np

from collc.arrays import unique
from collc.check.xml.opstream import BUFFERS, TYPES, OpStream
from collc.compiler.msccl.program import READS_SRC, WRITES_DST, Program
from collc.ir.collective import Buffer, Collective

_READS = np.array([t in READS_SRC for t in TYPES])
_WRITES = np.array([t in WRITES_DST for t in TYPES])


def shared_slot_tbs(p: Program, coll: Collective, ops: OpStream, most: int) -> dict[int, int] | None:
    """Tbs (by op-stream index) that touch a slot which another tb of the same GPU writes:
    index -> clock component; None when there are more than ``most`` (the race check would
    not fit its budget).

    Vectorized over segments (each (gpu, physical buffer) cut at every interval end, so that
    every slot of a segment has the same users): a segment is shared when its smallest and
    largest user differ, and it counts when some user writes it.
    """
    ids = sorted({g.id for g in p.gpus})
    # physical buffer and base of every (gpu, logical buffer), as the placement aliases them
    pbuf = np.zeros((len(ids), len(BUFFERS)), dtype=np.int64)
    base = np.zeros((len(ids), len(BUFFERS)), dtype=np.int64)
    for k, gid in enumerate(ids):
        for b, name in enumerate(BUFFERS):
            pb, off = coll.alias(gid, Buffer(name))
            pbuf[k, b], base[k, b] = BUFFERS.index(pb.value), off
    # GPUs in growing batches, stopping once over budget (a big program is over it early)
    first_tb = np.zeros(len(p.gpus) + 1, dtype=np.int64)
    np.cumsum([len(g.tbs) for g in p.gpus], out=first_tb[1:])
    found: list[np.ndarray] = []
    total, g0, batch = 0, 0, 1
    while g0 < len(p.gpus):
        g1 = min(len(p.gpus), g0 + batch)
        rows = slice(int(ops.tb_start[first_tb[g0]]), int(ops.tb_start[first_tb[g1]]))
        chosen = _chosen(ops, rows, np.array(ids, dtype=np.int64), pbuf, base)
        found.append(chosen)
        total += len(chosen)
        if total > most:
            return None
        g0, batch = g1, 2 * batch
    every = unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    return {int(idx): n for n, idx in enumerate(every.tolist())}


def _chosen(ops: OpStream, rows: slice, ids: np.ndarray, pbuf: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The tbs of op-stream rows ``rows`` (whole GPUs) that use a segment another tb writes."""
    live = ops.count[rows] > 0
    op = ops.op[rows][live]
    reads, writes = _READS[op], _WRITES[op]
    tb = ops.tb[rows][live]
    row = np.searchsorted(ids, ops.tb_gpu[tb])
    cnt = ops.count[rows][live]
    parts = []
    for buf, offs, used, w in ((ops.srcbuf[rows][live], ops.srcoff[rows][live], reads, False),
                               (ops.dstbuf[rows][live], ops.dstoff[rows][live], writes, True)):
        lo = base[row, buf] + offs
        parts.append((tb[used], row[used], pbuf[row, buf][used], lo[used], cnt[used],
                      np.full(int(used.sum()), w)))
    t_, r_, b_, lo_, n_, w_ = (np.concatenate(x) for x in zip(*parts))
    if len(t_) == 0:
        return np.zeros(0, dtype=np.int64)
    span = int((lo_ + n_).max()) + 1
    lo_k = (r_ * len(BUFFERS) + b_) * span + lo_          # intervals in one key space per (gpu, buffer)
    hi_k = lo_k + n_
    # segments: the key space cut at every interval end; every slot of a segment has the same users
    cuts = unique(np.concatenate((lo_k, hi_k)))
    s0 = np.searchsorted(cuts, lo_k)
    nseg = np.searchsorted(cuts, hi_k) - s0
    ends = np.cumsum(nseg)
    seg = np.repeat(s0 - (ends - nseg), nseg) + np.arange(int(ends[-1]), dtype=np.int64)
    who = np.repeat(t_, nseg)
    wrote = np.repeat(w_, nseg)
    order = np.argsort(seg, kind="stable")
    seg_s, who_s, wrote_s = seg[order], who[order], wrote[order]
    starts = np.flatnonzero(np.concatenate(([True], seg_s[1:] != seg_s[:-1])))
    bad_seg = np.zeros(len(cuts), dtype=bool)
    bad_seg[seg_s[starts]] = (np.minimum.reduceat(who_s, starts) != np.maximum.reduceat(who_s, starts)) & \
        np.logical_or.reduceat(wrote_s, starts)
    out: np.ndarray = unique(who[bad_seg[seg]])
    return out
