"""Send/receive matching (code ``match``): the send-type steps of tb(a, send=b, chan) must equal
the receive-type steps of tb(b, recv=a, chan), in order and ``cnt`` (docs/runtime-model.md).
"""

from __future__ import annotations

import numpy as np

from collc.check.findings import Report
from collc.arrays import unique
from collc.check.xml.opstream import OpStream
from collc.check.runtime_model import F_RECV, F_SEND
from collc.compiler.msccl.program import Program


def all_match(p: Program, ops: OpStream) -> bool:
    """True when every connection's sends equal its receives, in order and ``cnt``, and each
    connection has one sending and one receiving tb: then :func:`check_matching` has nothing
    to report.  Vectorized: the (connection, cnt) sequence of all send-type steps, grouped by
    connection, must equal that of all receive-type steps."""
    gpu, chan = ops.tb_gpu, ops.tb_chan
    span = max(p.ngpus, int(max(gpu.max(initial=0), ops.tb_send.max(initial=0), ops.tb_recv.max(initial=0))) + 1)
    cspan = int(max(chan.max(initial=0), 0)) + 1
    out_key = (gpu * span + ops.tb_send) * cspan + chan    # (sender, receiver, chan) of each tb's sends
    in_key = (ops.tb_recv * span + gpu) * cspan + chan     # and of its receives
    senders, receivers = out_key[ops.tb_send >= 0], in_key[ops.tb_recv >= 0]
    if len(unique(senders)) != len(senders) or len(unique(receivers)) != len(receivers):
        return False
    flags = ops.flags
    sends, recvs = (flags & F_SEND) != 0, (flags & F_RECV) != 0
    if (ops.tb_send[ops.tb[sends]] < 0).any() or (ops.tb_recv[ops.tb[recvs]] < 0).any():
        return False
    a_key, a_cnt = out_key[ops.tb[sends]], ops.count[sends]
    b_key, b_cnt = in_key[ops.tb[recvs]], ops.count[recvs]
    if len(a_key) != len(b_key):
        return False
    a, b = np.argsort(a_key, kind="stable"), np.argsort(b_key, kind="stable")
    return bool(np.array_equal(a_key[a], b_key[b]) and np.array_equal(a_cnt[a], b_cnt[b]))


def check_matching(p: Program, rep: Report, ops: OpStream | None = None) -> bool:
    """Send-type steps of tb(a, send=b, chan) must equal recv-type steps of tb(b, recv=a, chan).

    With the op stream, the rule runs tb by tb only when :func:`all_match` finds a mismatch.
    """
    if ops is not None and all_match(p, ops):
        return True
    gpus = {g.id: g for g in p.gpus}
    ok = True
    for g in p.gpus:
        for t in g.tbs:
            if t.send < 0:
                continue
            peer = gpus.get(t.send)
            if peer is None:
                continue
            rtb = next((u for u in peer.tbs if u.recv == g.id and u.chan == t.chan), None)
            sends = [(i, s.cnt) for i, s in enumerate(t.steps) if s.type.sends]
            if rtb is None:
                if sends:
                    rep.add("match", f"gpu {g.id} tb {t.id} sends to {t.send} on chan {t.chan}, but gpu {t.send} "
                                     f"has no tb receiving from {g.id} on that channel")
                    ok = False
                continue
            recvs = [(i, s.cnt) for i, s in enumerate(rtb.steps) if s.type.receives]
            if [c for _, c in sends] != [c for _, c in recvs]:
                for k in range(max(len(sends), len(recvs))):
                    a = sends[k] if k < len(sends) else None
                    b = recvs[k] if k < len(recvs) else None
                    if a is None or b is None or a[1] != b[1]:
                        sa = f"step {a[0]} (cnt {a[1]})" if a else "nothing"
                        sb = f"step {b[0]} (cnt {b[1]})" if b else "nothing"
                        rep.add("match", f"gpu {g.id} tb {t.id} -> gpu {t.send} tb {rtb.id} on chan {t.chan}: "
                                         f"send #{k} is {sa} but the matching receive is {sb}")
                        break
                ok = False
    for g in p.gpus:
        for t in g.tbs:
            if t.recv < 0 or t.recv not in gpus:
                continue
            if not any(u.send == g.id and u.chan == t.chan for u in gpus[t.recv].tbs):
                if any(s.type.receives for s in t.steps):
                    rep.add("match", f"gpu {g.id} tb {t.id} receives from {t.recv} on chan {t.chan}, but gpu "
                                     f"{t.recv} has no tb sending there")
                    ok = False
    return ok
