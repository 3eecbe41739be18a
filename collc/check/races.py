"""Race check support (code ``race``): which tbs need vector clocks.

A step races when it touches a slot that another tb of the same GPU writes with no
happens-before between them (program order, flags and messages; never buffer capacity).
Only tbs that share a written slot with another tb can race, so the simulation tracks
vector clocks over those alone.
"""

from __future__ import annotations

import numpy as np

from collc.check.opstream import BUFFERS, TYPES, OpStream
from collc.compiler.program import READS_SRC, WRITES_DST, Program
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
    live = ops.count > 0
    op = ops.op[live]
    reads, writes = _READS[op], _WRITES[op]
    gpu = ops.tb_gpu[ops.tb[live]]
    # physical buffer and base of every (gpu, logical buffer), as the placement aliases them
    ids = sorted({g.id for g in p.gpus})
    row = np.searchsorted(np.array(ids, dtype=np.int64), gpu)
    pbuf = np.zeros((len(ids), len(BUFFERS)), dtype=np.int64)
    base = np.zeros((len(ids), len(BUFFERS)), dtype=np.int64)
    for k, gid in enumerate(ids):
        for b, name in enumerate(BUFFERS):
            pb, off = coll.alias(gid, Buffer(name))
            pbuf[k, b], base[k, b] = BUFFERS.index(pb.value), off
    tb = ops.tb[live]
    cnt = ops.count[live]
    parts = []
    for buf, offs, used, w in ((ops.srcbuf[live], ops.srcoff[live], reads, False),
                               (ops.dstbuf[live], ops.dstoff[live], writes, True)):
        lo = base[row, buf] + offs
        parts.append((tb[used], row[used], pbuf[row, buf][used], lo[used], cnt[used],
                      np.full(int(used.sum()), w)))
    t_, r_, b_, lo_, n_, w_ = (np.concatenate(x) for x in zip(*parts))
    if len(t_) == 0:
        return {}
    span = int((lo_ + n_).max()) + 1
    lo_k = (r_ * len(BUFFERS) + b_) * span + lo_          # intervals in one key space per (gpu, buffer)
    hi_k = lo_k + n_
    # segments: the key space cut at every interval end; every slot of a segment has the same users
    cuts = np.unique(np.concatenate((lo_k, hi_k)))
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
    chosen = np.unique(who[bad_seg[seg]])
    if len(chosen) > most:
        return None
    return {int(idx): n for n, idx in enumerate(chosen.tolist())}
