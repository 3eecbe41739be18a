"""Discrete-event, fluid-flow timing of a Program on a Topology.

``simulate_program(program, topology, sizes)`` times the executor at each message size
(nccl-tests' size: bytes of the collective, for allgather the gathered total) and returns
one ``EventResult`` per size with nccl-tests' algbw and busbw.

The execution model is the checker's (``collc.check``,
docs/runtime-model.md), with time added:

* At size ``S`` a chunk is ``S / nchunksperloop`` bytes.  ``size_model(proto,
  nchunksperloop, S)`` gives ``mac`` (maxAllowedCount, chunks per piece), the slots of
  a connection and the executor's runs: ``mscclRunInterpreter``'s ``gridOffset`` loop runs
  every tb's whole program ``iterations = ceil(chunk / loop_bytes)`` times, each run on
  the next ``loop_bytes`` of every chunk and the last on what is left (``loop_bytes`` is
  the kernel's ``chunkSize``: 2 MiB at Simple, ``buffSize / NCCL_STEPS`` x 4 steps; 32 KiB
  at LL and 576000 bytes at LL128, one step's data, ``mscclSetupCount``'s
  ``chunkEffectiveSize``).  In a run a step of ``cnt`` chunks is ``ceil(cnt / mac)``
  pieces, piece ``k`` covering chunks ``[k mac, min(cnt, (k + 1) mac))`` of that run's
  slice; past one run ``mac`` is 1.  Connections and their FIFO slots carry over from run
  to run, so a tb may start its next run while its peers are still in the last one.
* Each tb runs its steps in document order, run after run.  A step of run ``r`` starts
  once its dependency holds: tb ``depid`` of the same gpu has *completed*, in run ``r``
  or a later one, a step of index ``>= deps`` with ``hasdep=1`` (the kernel's flag is
  ``COMPUTE_FLAG(workIndex, iter, step)``, compared lexicographically; flags are
  published at step completion, only by such steps).  A ``nop`` only waits for its
  dependency.
* A send-type piece (``s``, ``rcs``, ``rrs``, ``rrcs``) on the connection (gpu, send
  peer, chan) needs FIFO space (the checker's slot accounting: a piece of ``c`` chunks
  takes ``piece_slots(c)`` of ``slots``) and, for the fused types, its received piece;
  as in the checker it takes both at once (consuming the input frees its slots), pays
  any reduction, and sends a message of ``chunks x chunk_bytes`` bytes.  The
  message starts flowing after ``alpha_us`` (the software cost of a message, paid by
  the sender) and crosses every link of ``Router.shares(src, dst)`` with weight =
  fraction.  The sending tb is busy until the last byte is on the wire (a threadblock
  copies the data itself, one piece at a time); the piece arrives ``hop_latency_us x
  hops`` later (hops = sum of the route's fractions: wire latency is pipelined, as in
  a network, so back-to-back messages on a link pay it once) and then waits in the
  FIFO until the receiver consumes it.
* Links are shared max-min fairly (progressive filling) among the flowing messages:
  for every link ``sum(fraction x rate) <= capacity`` (``link_bw`` GB/s if given, else
  ``Router.capacity``).  Rates are recomputed, only for the connected groups of
  flows and links that changed, whenever a message starts or finishes flowing.
* A receive-type piece (``r``, ``rrc`` and the receive half of the fused types)
  completes at the time its message arrived and frees its FIFO slots.  Reductions
  (``rrs``, ``rrc``, ``rrcs``, ``re``) add ``reduce_us_per_byte`` x the bytes of the piece
  on the receiving tb.  A local ``cpy`` (and a ``nop``) costs nothing.  Topology link
  latencies are not added (pass ``hop_latency_us`` for a per-hop cost).
* ``half_duplex=True`` makes the two directions of every link one shared capacity
  (SimGrid's default ``SHARED`` link policy on platforms that declare one link per
  node pair, as the Dragonfly and 2dfc platforms of the Kautz/2dfc thesis do;
  docs/kautz-dfc.md): opposite flows then split it max-min fairly.
* The time of a size is when the last tb finishes its last step of its last run.  If no
  event is possible while tbs remain, ``VerifyError`` names the size and a blocked tb;
  collc's programs never do that, and ``collc check`` is the judge of correctness.
* Many runs are aggregated, not simulated one by one: ``simulate_program`` simulates
  ``FIRST_RUNS`` runs (the last of them the short last run), and when each tb's finishing
  times of the full runs repeat with a period of 1 to 3 runs, every further full run
  delays that tb's end by the same amount (the network of tbs, FIFOs and fair-shared links
  is then periodic), so the tb ends at ``last + (iterations - FIRST_RUNS) x period``.  A
  tb not periodic yet doubles the runs simulated, up to all of them.  ``trace_program``
  simulates every run.

``simulate_parts`` runs several programs at once, each placed on its own ranks of the topology
(process groups, docs/groups.md "Many groups at once"): their messages share the links, and each
program's completion time is reported.

Units: microseconds, bytes, GB/s (= 1e3 bytes per microsecond).  Results are
deterministic: events at equal times are processed in the order they were created.

>>> from collc.driver import compile_xml
>>> from collc.ir.collective import CollKind
>>> from collc.topology import parse_spec
>>> topo = parse_spec("ring:4")
>>> prog = compile_xml(topo, "ring", CollKind.ALLREDUCE, inplace=True).program
>>> [round(r.time_us, 3) for r in simulate_program(prog, topo, [4000], alpha_us=1.0)]
[12.0]
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from heapq import heappop, heappush

from collc.check.runtime_model import F_LOCAL, F_RECV, F_REDUCE, F_SEND, FLAGS, size_model, waits_for
from collc.compiler.msccl.program import Program
from collc.errors import CollcError, TopologyError, VerifyError
from collc.sim.analysis import BYTES_PER_US_PER_GBPS, bus_bandwidth
from collc.sim.routing import Link, Router
from collc.topology import Topology

__all__ = ["EventResult", "TbTrace", "simulate_program", "simulate_parts", "trace_program", "max_min_rates"]

# step codes: the checker's step flags (cpy, re and nop are LOCAL: one piece, no connection)
_RECV, _SEND, _REDUCE, _LOCAL = F_RECV, F_SEND, F_REDUCE, F_LOCAL

# event kinds
_START = 0          # a message starts flowing (after its latency)
_FINISH = 1         # a message has fully arrived (if its version is current)
_RESUME = 2         # a tb's reduction is done
_ARRIVE = 3         # a message's last byte has crossed the wire latency to the receiver

_EPS = 1e-12


@dataclass(frozen=True)
class EventResult:
    """Time of one message size and nccl-tests' bandwidths (GB/s)."""

    size_bytes: int
    time_us: float
    algbw: float
    busbw: float


# =========================================================================== max-min fairness
def max_min_rates(flows: Sequence[Sequence[tuple[int, float]]],
                  capacity: Mapping[int, float] | Sequence[float]) -> list[float]:
    """Max-min fair rates by progressive filling.

    ``flows[i]`` lists (link, fraction) pairs; each flow's rate ``r`` loads link ``l`` by
    ``fraction x r`` and a link's load must not exceed ``capacity[l]``.  All unfrozen
    flows grow together; when a link saturates, the flows crossing it freeze.  A flow
    crossing no link gets ``inf``.

    >>> max_min_rates([[(0, 1.0)], [(0, 1.0), (1, 1.0)], [(1, 1.0)]], {0: 10.0, 1: 30.0})
    [5.0, 5.0, 25.0]
    """
    rates = [math.inf] * len(flows)
    left: dict[int, float] = {}
    weight: dict[int, float] = {}
    for f in flows:
        for link, frac in f:
            if frac > 0.0:
                weight[link] = weight.get(link, 0.0) + frac
                left[link] = capacity[link]
    unfrozen = [i for i, f in enumerate(flows) if any(frac > 0.0 for _, frac in f)]
    while unfrozen:
        level = math.inf
        for link, w in weight.items():
            lv = left[link] / w
            if lv < level:
                level = lv
        if level == math.inf:       # only negligible fractions left
            break
        if level < 0.0:
            level = 0.0
        limit = level * (1.0 + 1e-9) + _EPS
        saturated = {link for link, w in weight.items() if left[link] / w <= limit}
        still: list[int] = []
        for i in unfrozen:
            f = flows[i]
            if any(link in saturated for link, frac in f if frac > 0.0):
                rates[i] = level
                for link, frac in f:
                    if frac > 0.0 and link in weight:
                        left[link] -= frac * level
                        weight[link] -= frac
            else:
                still.append(i)
        for link in saturated:
            del weight[link]
        for link in [k for k, w in weight.items() if w <= _EPS]:
            del weight[link]
        unfrozen = still
    return rates


# =========================================================================== static plan
class _Plan:
    """Size-independent tables of Programs on a Topology (indices instead of objects).

    ``parts`` are the programs that run at the same time, each with the topology rank of each
    of its gpus (``ranks[gpu id]``): one program on all ranks, or the files of process groups
    placed on their members (docs/groups.md, "Many groups at once").  Connections and
    threadblocks of different parts never meet; their messages share the links."""

    def __init__(self, parts: Sequence[tuple[Program, Sequence[int]]], topology: Topology, router: Router,
                 link_bw: float | None, alpha_us: float, hop_latency_us: float,
                 half_duplex: bool = False) -> None:
        index: dict[tuple[int, int, int], int] = {}
        self.names: list[str] = []
        self.part_of: list[int] = []             # the part of each tb
        for p, (program, ranks) in enumerate(parts):
            if len(ranks) != program.ngpus or any(not 0 <= r < topology.nranks for r in ranks):
                raise TopologyError(f"the program has {program.ngpus} ranks but {topology.name} has "
                                    f"{topology.nranks}" if len(parts) == 1 else
                                    f"group {p}: {len(ranks)} ranks for a program of {program.ngpus}")
            for g in program.gpus:
                for t in g.tbs:
                    index[(p, g.id, t.id)] = len(self.names)
                    self.names.append(f"gpu {g.id} tb {t.id}" if len(parts) == 1 else
                                      f"group {p} gpu {g.id} (rank {ranks[g.id]}) tb {t.id}")
                    self.part_of.append(p)
        conns: dict[tuple[int, int, int, int], int] = {}
        self.conn_ends: list[tuple[int, int]] = []
        self.conn_part: list[int] = []

        def conn(p: int, src: int, dst: int, chan: int) -> int:
            key = (p, src, dst, chan)
            if key not in conns:
                conns[key] = len(self.conn_ends)
                self.conn_ends.append((src, dst))
                self.conn_part.append(p)
            return conns[key]

        # a step: (code, cnt, dependency target tb index or -1, deps, hasdep)
        self.steps: list[list[tuple[int, int, int, int, bool]]] = []
        self.send: list[int] = []
        self.recv: list[int] = []
        self.max_cnt = 1
        self.max_steps = 0
        for p, (program, ranks) in enumerate(parts):
            for g in program.gpus:
                for t in g.tbs:
                    me = index[(p, g.id, t.id)]
                    self.send.append(conn(p, ranks[g.id], ranks[t.send], t.chan) if t.send >= 0 else -1)
                    self.recv.append(conn(p, ranks[t.recv], ranks[g.id], t.chan) if t.recv >= 0 else -1)
                    out: list[tuple[int, int, int, int, bool]] = []
                    for pos, st in enumerate(t.steps):
                        ty = st.type
                        code = FLAGS[ty]
                        if (code & _SEND and self.send[me] < 0) or \
                                (code & _RECV and self.recv[me] < 0):
                            raise VerifyError(f"gpu {g.id} tb {t.id} step {pos} ({ty.value}) needs a "
                                              f"{'send' if code & _SEND and self.send[me] < 0 else 'recv'} peer")
                        dep = -1
                        if st.deps >= 0 and waits_for(t.id, pos, st.depid, st.deps):
                            dep = index.get((p, g.id, st.depid), -1)
                        cnt = max(st.cnt, 1)
                        self.max_cnt = max(self.max_cnt, cnt)
                        out.append((code, cnt, dep, st.deps, bool(st.hasdep)))
                    self.steps.append(out)
                    self.max_steps = max(self.max_steps, len(out))
        self.nconns = len(self.conn_ends)
        # routes of the connections over link indices
        links: dict[Link, int] = {}
        self.capacity: list[float] = []          # bytes per us
        self.routes: list[tuple[tuple[int, float], ...]] = []
        self.latency: list[float] = []          # alpha: the sender's cost before the data flows
        self.wire: list[float] = []             # hops x hop latency: pipelined, paid by the receiver
        for src, dst in self.conn_ends:
            route: list[tuple[int, float]] = []
            hops = 0.0
            for link, frac in router.shares(src, dst):
                if half_duplex and link[0] > link[1]:
                    link = (link[1], link[0])      # one capacity for both directions
                if link not in links:
                    links[link] = len(self.capacity)
                    gbps = link_bw if link_bw is not None else router.capacity(link)
                    if not gbps > 0.0:
                        raise TopologyError(f"link {link[0]} -> {link[1]} has no bandwidth ({gbps} GB/s)")
                    self.capacity.append(gbps * BYTES_PER_US_PER_GBPS)
                hops += frac
                if frac > 0.0:
                    route.append((links[link], frac))
            self.routes.append(tuple(route))
            self.latency.append(alpha_us)
            self.wire.append(hop_latency_us * hops)
        self.nlinks = len(self.capacity)


# =========================================================================== dynamic state
class _Flow:
    __slots__ = ("links", "rem", "rate", "last", "ver", "conn", "tb")

    def __init__(self, links: tuple[tuple[int, float], ...], nbytes: float, conn: int, tb: int) -> None:
        self.links = links
        self.rem = nbytes
        self.rate = 0.0
        self.last = 0.0
        self.ver = 0
        self.conn = conn
        self.tb = tb


#: One span of a threadblock's time for ``trace_program``: (tb index, kind, start us, end us, peer, bytes);
#: kind is send, receive (waiting for an incoming piece), reduce or wait (a dependency or FIFO space).
Span = tuple[int, str, float, float, int, float]


def _run_size(plan: _Plan, programs: Sequence[Program], size: int, rupb: float, trace: list[Span] | None = None,
              runs: int | None = None) -> tuple[float, list[list[float]]]:
    """Simulate ``runs`` runs of every tb's program (all of them when None; a part whose
    program has fewer runs at ``size`` runs all of its own): the first ``runs - 1`` move
    ``slice_bytes()`` of every chunk, the last what the last run moves.  Returns the end
    time of all parts and, per tb, the time it finished each run."""
    models = [size_model(pr.proto, pr.nchunksperloop, size) for pr in programs]
    part_of = plan.part_of
    conn_slots = [models[p].slots for p in plan.conn_part]
    part_mac = [m.mac for m in models]
    part_runs = [m.iterations if runs is None else min(runs, m.iterations) for m in models]
    part_full: list[float] = []      # bytes per chunk in a run before the last
    part_last: list[float] = []      # ... and in the last (exact, not rounded up)
    for m, pr in zip(models, programs):
        chunk_bytes = size / pr.nchunksperloop
        loop = float(m.loop_bytes or chunk_bytes)
        part_full.append(min(chunk_bytes, loop))
        part_last.append(chunk_bytes - (m.iterations - 1) * loop)
    part_full_slots = [[m.piece_slots(c) for c in range(plan.max_cnt + 1)] for m in models]
    part_last_slots = [[m.piece_slots(c, last=True) for c in range(plan.max_cnt + 1)] for m in models]
    # a flag is (run, step) in lexicographic order, as the kernel's COMPUTE_FLAG
    span = plan.max_steps + 1
    steps = plan.steps
    send_conn = plan.send
    recv_conn = plan.recv
    routes = plan.routes
    latency = plan.latency
    wire = plan.wire
    capacity = plan.capacity
    ntb = len(steps)

    run_of = [0] * ntb           # the run each tb is in
    done_at: list[list[float]] = [[] for _ in range(ntb)]
    pc = [0] * ntb
    piece = [0] * ntb
    phase = [0] * ntb            # 0: take input and output slots (+ reduce), 1: send, 2: piece done
    ready = [False] * ntb        # dependency of the current step holds
    flag = [-1] * ntb
    finished = 0
    end_time = 0.0
    flag_waiters: dict[int, list[int]] = {}
    used = [0] * plan.nconns     # slots held (reserved at send start, freed at consumption)
    held: list[deque[int]] = [deque() for _ in range(plan.nconns)]
    arrived = [0] * plan.nconns  # arrived, unconsumed pieces
    rwait = [-1] * plan.nconns
    swait = [-1] * plan.nconns
    active: list[dict[int, _Flow]] = [{} for _ in range(plan.nlinks)]

    times: list[float] = []
    buckets: dict[float, list[tuple[int, Any, int]]] = {}
    todo: deque[int] = deque()
    dirty: dict[int, None] = {}
    now = 0.0

    def push(t: float, kind: int, obj: Any, ver: int) -> None:
        b = buckets.get(t)
        if b is None:
            buckets[t] = b = []
            heappush(times, t)
        b.append((kind, obj, ver))

    def start_flow(f: _Flow) -> None:
        """Add a flowing message; the fast path serves a flow alone on all its links."""
        links = f.links
        f.last = now
        alone = True
        for link, _ in links:
            act = active[link]
            if act:
                alone = False
                dirty[link] = None
            act[id(f)] = f
        if alone:
            rate = math.inf
            for link, frac in links:
                r = capacity[link] / frac
                if r < rate:
                    rate = r
            f.rate = rate
            f.ver += 1
            push(now + f.rem / rate, _FINISH, f, f.ver)

    def refill() -> None:
        """Max-min rates again for the groups of flows and links reachable from dirty links."""
        seen: set[int] = set()
        for seed in list(dirty):
            if seed in seen:
                continue
            comp: dict[int, _Flow] = {}
            stack = [seed]
            seen.add(seed)
            while stack:
                link = stack.pop()
                for fid, f in active[link].items():
                    if fid not in comp:
                        comp[fid] = f
                        for l2, _ in f.links:
                            if l2 not in seen:
                                seen.add(l2)
                                stack.append(l2)
            if not comp:
                continue
            flows = list(comp.values())
            rates = max_min_rates([f.links for f in flows], capacity)
            for f, r in zip(flows, rates):
                if r == f.rate:
                    continue
                if f.rate > 0.0:
                    f.rem -= f.rate * (now - f.last)
                    if f.rem < 0.0:
                        f.rem = 0.0
                f.last = now
                f.rate = r
                f.ver += 1
                push(now + f.rem / r, _FINISH, f, f.ver)
        dirty.clear()

    def arrive(c: int) -> None:
        """A piece reached the receiving end of connection ``c``."""
        arrived[c] += 1
        r = rwait[c]
        if r >= 0:
            rwait[c] = -1
            todo.append(r)

    # tracing (``trace_program``): what each tb is doing since when, closed when it runs again
    doing: dict[int, tuple[str, float, int, float]] = {}

    def block(tb: int, kind: str, peer: int = -1, nbytes: float = 0.0) -> None:
        if trace is not None and tb not in doing:
            doing[tb] = (kind, now, peer, nbytes)

    def run(tb: int) -> None:
        nonlocal finished, end_time
        if trace is not None and tb in doing:
            kind, since, peer, nbytes = doing.pop(tb)
            if now > since:
                trace.append((tb, kind, since, now, peer, nbytes))
        prog = steps[tb]
        nsteps = len(prog)
        part = part_of[tb]
        mac = part_mac[part]
        nruns = part_runs[part]
        full_bytes, last_bytes = part_full[part], part_last[part]
        full_slots, last_slots = part_full_slots[part], part_last_slots[part]
        it = run_of[tb]
        while True:
            i = pc[tb]
            if i >= nsteps:
                done_at[tb].append(now)
                if it + 1 < nruns:          # the kernel's gridOffset loop: the program again
                    it += 1
                    run_of[tb] = it
                    pc[tb] = 0
                    if nsteps == 0:
                        continue
                    i = 0
                else:
                    finished += 1
                    if now > end_time:
                        end_time = now
                    return
            code, cnt, dep, deps, hasdep = prog[i]
            if it + 1 < nruns:
                per_chunk, pslots = full_bytes, full_slots
            else:
                per_chunk, pslots = last_bytes, last_slots
            if not ready[tb]:
                if dep >= 0 and flag[dep] < it * span + deps:
                    w = flag_waiters.get(dep)
                    if w is None:
                        flag_waiters[dep] = [tb]
                    else:
                        w.append(tb)
                    block(tb, "wait")
                    return
                ready[tb] = True
            ph = phase[tb]
            if code & _LOCAL:
                if ph == 0 and code & _REDUCE and rupb > 0.0:
                    phase[tb] = 2
                    push(now + rupb * cnt * per_chunk, _RESUME, tb, 0)
                    block(tb, "reduce")
                    return
                npieces = 1
                chunks = cnt
            else:
                npieces = -(-cnt // mac)
                k = piece[tb]
                chunks = mac if k < npieces - 1 else cnt - k * mac
                if ph == 0:
                    # like the checker, a piece goes when its input has arrived *and* its
                    # output fits: take both at once
                    if code & _SEND:
                        c = send_conn[tb]
                        need = pslots[chunks]
                        if used[c] + need > conn_slots[c]:
                            swait[c] = tb
                            block(tb, "wait", plan.conn_ends[c][1])
                            return
                    if code & _RECV:
                        c = recv_conn[tb]
                        if not arrived[c]:
                            rwait[c] = tb
                            block(tb, "receive", plan.conn_ends[c][0], chunks * per_chunk)
                            return
                        arrived[c] -= 1
                        used[c] -= held[c].popleft()
                        s = swait[c]
                        if s >= 0:
                            swait[c] = -1
                            todo.append(s)
                    if code & _SEND:
                        c = send_conn[tb]
                        used[c] += need
                        held[c].append(need)
                    if code & _REDUCE and rupb > 0.0:
                        phase[tb] = 1
                        push(now + rupb * chunks * per_chunk, _RESUME, tb, 0)
                        block(tb, "reduce")
                        return
                    ph = 1
                if ph == 1 and code & _SEND:        # its slots are reserved: send it
                    c = send_conn[tb]
                    phase[tb] = 2
                    f = _Flow(routes[c], chunks * per_chunk, c, tb)
                    block(tb, "send", plan.conn_ends[c][1], chunks * per_chunk)
                    lat = latency[c]
                    if lat > 0.0:
                        push(now + lat, _START, f, 0)
                    else:
                        start_flow(f)
                    return
            # the piece is done
            k = piece[tb] + 1
            phase[tb] = 0
            if k < npieces:
                piece[tb] = k
                continue
            piece[tb] = 0
            ready[tb] = False
            pc[tb] = i + 1
            if hasdep:
                flag[tb] = it * span + i
                w = flag_waiters.pop(tb, None)
                if w:
                    todo.extend(w)

    todo.extend(range(ntb))
    while todo:
        run(todo.popleft())
    if dirty:
        refill()
    while times:
        now = heappop(times)
        for kind, obj, ver in buckets.pop(now):
            if kind == _FINISH:
                if ver != obj.ver:
                    continue
                fid = id(obj)
                for link, _ in obj.links:
                    act = active[link]
                    del act[fid]
                    if act:
                        dirty[link] = None
                c = obj.conn
                todo.append(obj.tb)            # the sender is free once its data is on the wire
                if wire[c] > 0.0:
                    push(now + wire[c], _ARRIVE, c, 0)
                else:
                    arrive(c)
            elif kind == _ARRIVE:
                arrive(obj)
            elif kind == _START:
                start_flow(obj)
            else:
                todo.append(obj)
            while todo:
                run(todo.popleft())
        if dirty:
            refill()
    if finished < ntb:
        blocked = next(tb for tb in range(ntb) if pc[tb] < len(steps[tb]))
        raise VerifyError(f"event simulation at {size} bytes deadlocks: {plan.names[blocked]} is blocked at "
                          f"step {pc[blocked]} ({finished} of {ntb} tbs finished); run collc check")
    return end_time, done_at


# =========================================================================== runs
#: Runs of the program simulated one by one before the rest are extrapolated; doubled until
#: every tb's run times are periodic (or every run is simulated).
FIRST_RUNS = 4
#: Largest period (in runs) looked for, and the tolerance of "periodic" (relative to the time).
_MAX_PERIOD = 3
_PERIOD_TOL = 1e-9


def _extrapolate(done_at: Sequence[list[float]], runs: int, iters: int) -> float | None:
    """The end time of ``iters`` runs from a simulation of ``runs`` (``runs - 1`` full ones,
    then the last): when each tb's finishing times of the full runs repeat with a period of
    ``p`` runs, every further full run delays the tb's last run by the same ``d``, so the tb
    ends at ``last + (iters - runs) x d``.  None when some tb is not periodic yet."""
    full = runs - 1
    end = 0.0
    for times in done_at:
        if not times:
            continue
        if runs == iters:
            end = max(end, times[-1])
            continue
        step = None
        tol = _PERIOD_TOL * max(1.0, times[-1])
        for p in range(1, _MAX_PERIOD + 1):
            if full < 2 * p + 1:
                break
            a = times[full - 1] - times[full - 1 - p]
            b = times[full - 1 - p] - times[full - 1 - 2 * p]
            if abs(a - b) <= tol:
                step = a / p
                break
        if step is None:
            return None
        end = max(end, times[runs - 1] + (iters - runs) * step)
    return end


def _time_parts(plan: _Plan, programs: Sequence[Program], size: int, rupb: float) -> list[float]:
    """Each part's completion time at ``size`` (``_run_size``), the many identical runs of its
    program aggregated (``_extrapolate``)."""
    iters = [size_model(pr.proto, pr.nchunksperloop, size).iterations for pr in programs]
    members: list[list[int]] = [[] for _ in programs]
    for tb, p in enumerate(plan.part_of):
        members[p].append(tb)
    runs = min(max(iters), FIRST_RUNS)
    while True:
        _, done_at = _run_size(plan, programs, size, rupb, runs=runs)
        ends: list[float] = []
        for p, n in enumerate(iters):
            t = _extrapolate([done_at[tb] for tb in members[p]], min(runs, n), n)
            if t is None:
                break
            ends.append(t)
        if len(ends) == len(programs):
            return ends
        runs = min(max(iters), 2 * runs)


# =========================================================================== public API
@dataclass(frozen=True)
class TbTrace:
    """What every threadblock does at one size: ``names[i]`` is (gpu, tb) of index ``i`` of ``spans``."""

    size_bytes: int
    time_us: float
    names: tuple[tuple[int, int], ...]
    spans: tuple[Span, ...]


def trace_program(program: Program, topology: Topology, size: int, *, alpha_us: float = 0.0,
                  link_bw: float | None = None, hop_latency_us: float = 0.0,
                  reduce_us_per_byte: float = 0.0, half_duplex: bool = False) -> TbTrace:
    """``simulate_program`` at one size, recording each tb's spans (send, receive, reduce, wait)."""
    if size <= 0:
        raise CollcError(f"message size must be positive, got {size}")
    plan = _Plan([(program, range(program.ngpus))], topology, Router(topology), link_bw, alpha_us, hop_latency_us,
                 half_duplex)
    spans: list[Span] = []
    t, _ = _run_size(plan, [program], int(size), reduce_us_per_byte, spans)
    names = tuple((g.id, tb.id) for g in program.gpus for tb in g.tbs)
    return TbTrace(int(size), t, names, tuple(spans))


def simulate_program(program: Program, topology: Topology, sizes: Iterable[int], *, alpha_us: float = 0.0,
                     link_bw: float | None = None, hop_latency_us: float = 0.0,
                     reduce_us_per_byte: float = 0.0, router: Router | None = None,
                     progress: Callable[[int, int], None] | None = None,
                     half_duplex: bool = False) -> list[EventResult]:
    """Time ``program`` on ``topology`` at each size (bytes); see the module docstring.

    ``progress(done, total)`` is called after each size.  Raises ``VerifyError`` if the
    program deadlocks at a size and ``CollcError`` on bad arguments.
    """
    size_list = [int(s) for s in sizes]
    for s in size_list:
        if s <= 0:
            raise CollcError(f"message size must be positive, got {s}")
    for name, value in (("alpha_us", alpha_us), ("hop_latency_us", hop_latency_us),
                        ("reduce_us_per_byte", reduce_us_per_byte)):
        if not (math.isfinite(value) and value >= 0.0):
            raise CollcError(f"{name} must be a finite number >= 0, got {value!r}")
    if link_bw is not None and not (math.isfinite(link_bw) and link_bw > 0.0):
        raise CollcError(f"link_bw must be a positive number of GB/s, got {link_bw!r}")
    if program.nchunksperloop < 1:
        raise CollcError(f"nchunksperloop={program.nchunksperloop} must be at least 1")
    plan = _Plan([(program, range(program.ngpus))], topology, router or Router(topology), link_bw, alpha_us,
                 hop_latency_us, half_duplex)
    kind = program.kind
    out: list[EventResult] = []
    for done, size in enumerate(size_list, 1):
        t = max(_time_parts(plan, [program], size, reduce_us_per_byte))
        if t > 0.0:
            algbw, busbw = bus_bandwidth(kind, program.ngpus, size, t)
        else:
            algbw = busbw = math.inf
        out.append(EventResult(size, t, algbw, busbw))
        if progress is not None:
            progress(done, len(size_list))
    return out


def simulate_parts(parts: Sequence[tuple[Program, Sequence[int]]], topology: Topology, sizes: Iterable[int], *,
                   alpha_us: float = 0.0, link_bw: float | None = None, hop_latency_us: float = 0.0,
                   reduce_us_per_byte: float = 0.0, router: Router | None = None) -> list[tuple[float, ...]]:
    """Per size, the completion time (us) of each part when all run at the same time on
    ``topology``: part ``(program, ranks)`` runs ``program`` with its gpu ``i`` on rank
    ``ranks[i]``; all parts start together, their messages share the links max-min fairly
    (docs/groups.md, "Many groups at once").  A part alone is ``simulate_program`` of its
    program on the ranks it occupies.

    >>> from collc.driver import compile_xml
    >>> from collc.ir.collective import CollKind
    >>> from collc.topology import parse_spec
    >>> prog = compile_xml(parse_spec("ring:2"), "ring", CollKind.ALLGATHER, inplace=True).program
    >>> line = parse_spec("ring:4")      # 0-1 and 2-3 use their own links; 1-2 share none with them
    >>> simulate_parts([(prog, (0, 1)), (prog, (2, 3))], line, [2000], alpha_us=1.0)
    [(2.0, 2.0)]
    """
    size_list = [int(s) for s in sizes]
    if any(s <= 0 for s in size_list):
        raise CollcError(f"message sizes must be positive, got {min(size_list)}")
    if not parts:
        raise CollcError("no program to simulate")
    plan = _Plan(parts, topology, router or Router(topology), link_bw, alpha_us, hop_latency_us)
    programs = [p for p, _ in parts]
    return [tuple(_time_parts(plan, programs, size, reduce_us_per_byte)) for size in size_list]
