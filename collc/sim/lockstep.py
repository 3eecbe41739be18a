"""The step (alpha-beta) model for a lowered Program, by recovering its rounds.

A Program (an XML file, ours or anyone's) has no step numbers, only per-threadblock
order, dependencies and send/receive matching.  ``program_rounds`` recovers the
lockstep structure the papers' model needs: a send goes out in the earliest round
after everything it depends on is available, where a received message is available
one round after it was sent, and after the previous send of its threadblock (a tb runs
its steps one after the other, so two of its messages are never in flight together);
otherwise program order and dependencies add no round, except that a send that
waits for another tb's send to the same peer goes out a round later (the two cross
one link one after the other: MultiTree's runs of a link on several channels), and
local copies and reductions are free.  This recovers a lockstep schedule's steps from its program: a
MultiTree program on a 4x4 torus has 2T = 10 rounds with every connection used at
most once per round.  Messages of the same round share links; the time is
``sum over rounds of (alpha + max over links of bytes / capacity)``, as for a
Schedule in ``collc.sim.analysis``.  The pieces of a pipelined program (``--chunks``)
are messages of their own: a tb sends them in consecutive rounds, each paying alpha.
"""

from __future__ import annotations

from collections import deque

from collc.compiler.msccl.program import RECVS, SENDS, Program, StepType
from collc.errors import VerifyError
from collc.sim.analysis import BYTES_PER_US_PER_GBPS
from collc.sim.routing import Link, Router
from collc.topology import Topology

Message = tuple[int, int, int]   # (src gpu, dst gpu, chunks)


def program_rounds(program: Program) -> list[list[Message]]:
    """Messages per round, assuming unbounded buffering (the check proves buffering is enough)."""
    tbs = [(g.id, t) for g in program.gpus for t in g.tbs]
    index = {(gid, t.id): i for i, (gid, t) in enumerate(tbs)}
    pc = [0] * len(tbs)
    done = [[-1] * len(t.steps) for _, t in tbs]       # round by which each step's effect is visible
    sent: dict[tuple[int, int, int], list[int]] = {}   # connection -> send rounds, in order
    taken: dict[tuple[int, int, int], int] = {}
    rounds: list[list[Message]] = []
    waiting: dict[object, list[int]] = {}
    ready: deque[int] = deque(range(len(tbs)))
    finished = [False] * len(tbs)
    last_send = [-1] * len(tbs)
    send_of = [[-1] * len(t.steps) for _, t in tbs]     # round of each step's send
    while ready:
        i = ready.popleft()
        if finished[i]:
            continue
        gid, tb = tbs[i]
        while pc[i] < len(tb.steps):
            k = pc[i]
            st = tb.steps[k]
            start = done[i][k - 1] if k else 0
            if st.depid >= 0 and st.depid != tb.id:
                j = index.get((gid, st.depid))
                if j is not None:
                    target = min(st.deps, len(tbs[j][1].steps) - 1)
                    if pc[j] <= target:
                        waiting.setdefault(("tb", j), []).append(i)
                        break
                    start = max(start, done[j][target])
                    other = tbs[j][1]
                    if (st.type in SENDS and other.steps[target].type in SENDS and other.send == tb.send
                            and 0 <= target < len(send_of[j]) and send_of[j][target] >= 0):
                        start = max(start, send_of[j][target] + 1)
            arrival = start
            if st.type in RECVS:
                conn = (tb.recv, gid, tb.chan)
                n = taken.get(conn, 0)
                if n >= len(sent.get(conn, ())):
                    waiting.setdefault(("conn", conn), []).append(i)
                    break
                taken[conn] = n + 1
                arrival = max(start, sent[conn][n] + 1)
            finish = arrival
            if st.type in SENDS:
                send_round = max(arrival, last_send[i] + 1)
                last_send[i] = send_round
                send_of[i][k] = send_round
                conn = (gid, tb.send, tb.chan)
                sent.setdefault(conn, []).append(send_round)
                while len(rounds) <= send_round:
                    rounds.append([])
                rounds[send_round].append((gid, tb.send, st.cnt))
                for w in waiting.pop(("conn", conn), []):
                    ready.append(w)
                finish = send_round if st.type is StepType.SEND else arrival
            done[i][k] = finish
            pc[i] = k + 1
            for w in waiting.pop(("tb", i), []):
                ready.append(w)
        else:
            finished[i] = True
            for w in waiting.pop(("tb", i), []):
                ready.append(w)
    if not all(finished):
        raise VerifyError("the program cannot complete even with unbounded buffers; run `collc check` on it")
    return rounds


def program_step_times(program: Program, topology: Topology, sizes: list[float], alpha_us: float = 0.0, *,
                       hop_latency_us: float = 0.0, bandwidth: float | None = None,
                       router: Router | None = None) -> list[float]:
    """Step-model time (us) of the program at each message size."""
    r = router or Router(topology)
    if topology.nranks != program.ngpus:
        raise VerifyError(f"the program has {program.ngpus} ranks but {topology.name} has {topology.nranks}")
    fixed = 0.0
    per_byte = 0.0   # microseconds per byte of message size
    for msgs in program_rounds(program):
        if not msgs:
            continue
        load: dict[Link, float] = {}
        hops = 0.0
        for src, dst, cnt in msgs:
            shares = r.shares(src, dst)
            hops = max(hops, sum(f for _, f in shares))
            for link, frac in shares:
                load[link] = load.get(link, 0.0) + cnt * frac
        worst = max(chunks / ((bandwidth if bandwidth is not None else r.capacity(link)) * BYTES_PER_US_PER_GBPS)
                    for link, chunks in load.items())
        fixed += alpha_us + hop_latency_us * hops
        per_byte += worst / program.nchunksperloop
    return [fixed + per_byte * size for size in sizes]
