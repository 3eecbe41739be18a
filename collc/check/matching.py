"""Send/receive matching (code ``match``): the send-type steps of tb(a, send=b, chan) must equal
the receive-type steps of tb(b, recv=a, chan), in order and ``cnt`` (docs/runtime-model.md).
"""

from __future__ import annotations

from collc.check.findings import Report
from collc.compiler.program import Program


def check_matching(p: Program, rep: Report) -> bool:
    """Send-type steps of tb(a, send=b, chan) must equal recv-type steps of tb(b, recv=a, chan)."""
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
